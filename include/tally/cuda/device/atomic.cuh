// Per-thread atomics for any operator: tally::device::atomic_update.
//
// Seed 000's CAS-loop atomicAdd for double, generalised to any operator and to
// 4-, 8- and 16-byte types (16 bytes with sm_90's 128-bit atomicCAS). Where
// the hardware has the operation (integer add/min/max/and/or/xor, float and
// double add) it is used directly; everything else is a compare-and-swap
// loop on the value's bits. Works on global, shared and distributed shared
// memory (generic addresses), except 16-byte CAS: global memory only on sm_90.
//
// These are plain per-thread atomics: 32 lanes updating one address make 32
// serialised atomics. For contended addresses use the warp-aggregated forms
// in warp_aggregated.cuh (aggregated_atomic_update, atomic_add).
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "tally/core/operators.hpp"
#include "tally/core/types.hpp"

namespace tally::device {

namespace atomic_detail {

/// 16 bytes with the alignment sm_90's 128-bit atomicCAS requires.
struct alignas(16) bits128 {
  unsigned long long lo, hi;
};

template <std::size_t Bytes>
struct bits_of;
template <>
struct bits_of<4> { using type = unsigned int; };
template <>
struct bits_of<8> { using type = unsigned long long; };
template <>
struct bits_of<16> { using type = bits128; };

template <class To, class From>
__device__ __forceinline__ To reinterpret_bits(const From& from) {
  static_assert(sizeof(To) == sizeof(From));
  To to;
  std::memcpy(&to, &from, sizeof(To));
  return to;
}

__device__ __forceinline__ bool same_bits(unsigned a, unsigned b) { return a == b; }
__device__ __forceinline__ bool same_bits(unsigned long long a, unsigned long long b) { return a == b; }
__device__ __forceinline__ bool same_bits(const bits128& a, const bits128& b) { return a.lo == b.lo && a.hi == b.hi; }

/// The unsigned type atomicAdd/Min/... take for an integer of T's size and
/// signedness: int, unsigned, long long, unsigned long long.
template <class T>
using native_int_t = std::conditional_t<
    sizeof(T) == 4, std::conditional_t<std::is_signed_v<T>, int, unsigned>,
    std::conditional_t<std::is_signed_v<T>, long long, unsigned long long>>;

template <class T>
inline constexpr bool is_native_int_v =
    std::is_integral_v<T> && !std::is_same_v<T, bool> && (sizeof(T) == 4 || sizeof(T) == 8);

/// old = *addr; *addr = op(old, value), by compare-and-swap on the bits.
template <class T, class Op>
__device__ __forceinline__ T cas_update(T* addr, const T& value, const Op& op) {
  using Bits = typename bits_of<sizeof(T)>::type;
  static_assert(sizeof(T) == 4 || sizeof(T) == 8 || sizeof(T) == 16,
                "tally::device::atomic_update: types of 4, 8 or 16 bytes");
  Bits* word = reinterpret_cast<Bits*>(addr);
  // A plain read to start: a stale value only costs one more round.
  Bits assumed;
  if constexpr (sizeof(T) == 16) {
    const volatile unsigned long long* halves = reinterpret_cast<const volatile unsigned long long*>(addr);
    assumed = bits128{halves[0], halves[1]};
  } else {
    assumed = *reinterpret_cast<const volatile Bits*>(addr);
  }
  for (;;) {
    const T current = reinterpret_bits<T>(assumed);
    const Bits desired = reinterpret_bits<Bits>(op(current, value));
    const Bits seen = atomicCAS(word, assumed, desired);
    if (same_bits(seen, assumed)) return current;
    assumed = seen;
  }
}

}  // namespace atomic_detail

/// Atomically performs *addr = op(*addr, value) and returns the old *addr.
/// Pre: addr is naturally aligned (16-byte types: 16-aligned and in global
/// memory); op is associative and commutative (other threads' updates land in
/// any order) and callable on the device. T is 4, 8 or 16 bytes.
/// Post: the update is atomic as a whole (complex numbers included). Uses the
/// hardware instruction for integer plus/minimum/maximum/bit ops and for
/// float/double plus; a CAS loop otherwise (minimum/maximum on floats go
/// through CAS so NaN propagates as tally::minimum/maximum define it).
template <class T, class Op>
__device__ __forceinline__ T atomic_update(T* addr, T value, Op op) {
  using namespace atomic_detail;
  if constexpr (is_native_int_v<T>) {
    using N = native_int_t<T>;
    N* a = reinterpret_cast<N*>(addr);
    const N v = static_cast<N>(value);
    if constexpr (std::is_same_v<Op, plus>) {
      // Signed wrap-around equals unsigned wrap-around bit for bit.
      using U = std::conditional_t<sizeof(T) == 4, unsigned, unsigned long long>;
      return static_cast<T>(atomicAdd(reinterpret_cast<U*>(addr), static_cast<U>(value)));
    } else if constexpr (std::is_same_v<Op, minimum>) {
      return static_cast<T>(atomicMin(a, v));
    } else if constexpr (std::is_same_v<Op, maximum>) {
      return static_cast<T>(atomicMax(a, v));
    } else if constexpr (std::is_same_v<Op, bit_and> && !std::is_signed_v<N>) {
      return static_cast<T>(atomicAnd(a, v));
    } else if constexpr (std::is_same_v<Op, bit_or> && !std::is_signed_v<N>) {
      return static_cast<T>(atomicOr(a, v));
    } else if constexpr (std::is_same_v<Op, bit_xor> && !std::is_signed_v<N>) {
      return static_cast<T>(atomicXor(a, v));
    } else {
      return cas_update(addr, value, op);
    }
  } else if constexpr ((std::is_same_v<T, float> || std::is_same_v<T, double>) && std::is_same_v<Op, plus>) {
    return atomicAdd(addr, value);
  } else {
    return cas_update(addr, value, op);
  }
}

/// atomic_update(addr, value, op) where the old value is not needed (the
/// compiler emits the reduction form, RED, for hardware operations).
template <class T, class Op>
__device__ __forceinline__ void atomic_accumulate(T* addr, T value, Op op) {
  (void)atomic_update(addr, value, op);
}

/// Plain per-thread atomic addition for every type tally::device::atomic_add
/// accepts (ints of 4 and 8 bytes, float, double, complex<float/double>).
/// Complex numbers are added component by component (each component atomic,
/// like CUDA's float2 atomicAdd): the returned old value pairs the two
/// components' old values. For an update atomic as a whole, use
/// atomic_update(addr, value, tally::plus{}).
template <class T>
__device__ __forceinline__ T atomic_add_per_thread(T* addr, T value) {
  if constexpr (is_complex_v<T>) {
    using R = typename T::value_type;
    R* parts = reinterpret_cast<R*>(addr);
    const R re = atomicAdd(parts, value.real());
    const R im = atomicAdd(parts + 1, value.imag());
    return T(re, im);
  } else {
    return atomic_update(addr, value, plus{});
  }
}

}  // namespace tally::device
