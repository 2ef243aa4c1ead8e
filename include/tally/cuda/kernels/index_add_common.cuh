// What the index_add kernels share: loading a chunk of a source row, the
// transforms of loaded values (plain, or fixed point for deterministic
// sums), and the sinks that add a combined chunk to its destination -- the
// output itself (with vector atomics where the address allows) or the int64
// sums of a deterministic call.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "tally/core/fixed_point.hpp"
#include "tally/core/operators.hpp"
#include "tally/core/types.hpp"
#include "tally/cuda/device/atomic.cuh"
#include "tally/cuda/device/vector_load.cuh"

namespace tally::kernels::index_add {

inline constexpr int kThreads = 256;
inline constexpr unsigned kFull = 0xffffffffu;

/// Elements of V in one 16-byte load: the chunk a lane handles at a time.
template <class V>
inline constexpr int kChunk = 16 / static_cast<int>(sizeof(V));

__device__ __forceinline__ bool aligned_to(const void* p, unsigned bytes) {
  return (reinterpret_cast<std::uintptr_t>(p) & (bytes - 1)) == 0;
}

/// row[0..count) into v (count <= kChunk<V>): one 16-byte load when the
/// chunk is whole and 16-byte aligned, else element by element.
template <class V>
__device__ __forceinline__ void load_chunk(const V* row, int count, V (&v)[kChunk<V>]) {
  constexpr int W = kChunk<V>;
  if (count == W && aligned_to(row, 16)) {
    const device::vector_of<V, W> loaded = device::load_vector<V, W, true>(row);
#pragma unroll
    for (int e = 0; e < W; ++e) v[e] = loaded.v[e];
  } else {
#pragma unroll
    for (int e = 0; e < W; ++e)
      if (e < count) v[e] = __ldg(row + e);
  }
}

/// A thread's grid-stride walk over the elements of a rows × cols matrix in
/// row-major order: (row, col) of its element, advanced by the grid's step
/// without dividing again. Pre: cols > 0, element < rows·cols.
struct element_walk {
  std::int64_t row, col, drow, dcol, cols;
  __device__ element_walk(std::int64_t element, std::int64_t step, std::int64_t cols_)
      : row(element / cols_), col(element - row * cols_), drow(step / cols_), dcol(step - drow * cols_), cols(cols_) {}
  __device__ __forceinline__ void advance() {
    row += drow;
    col += dcol;
    if (col >= cols) {
      col -= cols;
      ++row;
    }
  }
};

/// Loaded values as they are, in the accumulator type Acc (float for half
/// and bfloat16).
template <class Acc>
struct plain_values {
  template <class V>
  __device__ __forceinline__ Acc operator()(const V& v) const {
    return convert<Acc>(v);
  }
};

/// Loaded values as int64 fixed point (histogram_options::deterministic).
struct fixed_point_values {
  ::tally::detail::fixed_point_value quantize;
  /// 2^s as a float where resolved() found it a normal float, else 0.
  float scale_float = 0;
  float limit_float = 0;

  /// A copy with the scale read from the device (where derived there) and,
  /// where 2^s is a normal float, the float form of the quantisation.
  __device__ __forceinline__ fixed_point_values resolved() const {
    fixed_point_values r = *this;
    if (quantize.scale_on_device) {
      r.quantize.scale = *quantize.scale_on_device;
      r.quantize.scale_on_device = nullptr;
    }
    const double scale = r.quantize.scale;
    if (scale >= 0x1p-126 && scale <= 0x1p127 && quantize.limit <= 0x1p127) {
      r.scale_float = static_cast<float>(scale);
      r.limit_float = static_cast<float>(quantize.limit);
    }
    return r;
  }

  /// round(v·2^s) as int64, or 0 with the bad flag set for a value outside
  /// the contract. For float, half and bfloat16 with a float scale the
  /// product is exact in float (2^s a normal float; a product below 2^-126
  /// rounds to 0 either way) and cvt.rni rounds half to even as nearbyint:
  /// the same integer as the double path, at a fraction of its conversions.
  template <class V>
  __device__ __forceinline__ long long operator()(const V& v) const {
    if constexpr (!std::is_same_v<V, double>) {
      if (scale_float != 0) {
        const float scaled = convert<float>(v) * scale_float;
        if (!(scaled > -limit_float && scaled < limit_float)) {
          atomicOr(quantize.bad, 1u);
          return 0;
        }
        return __float2ll_rn(scaled);
      }
    }
    return quantize(convert<double>(v));
  }
};

/// *p = op(*p, v) for half and bfloat16 and any operator but plus (minimum,
/// maximum, multiplies, make_op) by a 16-bit compare-and-swap loop: the
/// operator evaluated in float, the result rounded once to V (exact for
/// minimum and maximum; one rounding per update for products).
template <class V, class Op>
__device__ __forceinline__ void narrow_atomic_update(V* p, float v, const Op& op) {
  static_assert(sizeof(V) == 2);
  auto* word = reinterpret_cast<unsigned short*>(p);
  unsigned short assumed = *reinterpret_cast<volatile unsigned short*>(word);
  for (;;) {
    V current;
    memcpy(&current, &assumed, 2);
    const V next = convert<V>(op(convert<float>(current), v));
    unsigned short desired;
    memcpy(&desired, &next, 2);
    // When v leaves the value seen as it is, the update may take effect at the
    // moment that value was read (the operator is associative and commutative,
    // so any order of the updates is a valid one): nothing to write.
    if (desired == assumed) return;
    const unsigned short seen = atomicCAS(word, assumed, desired);
    if (seen == assumed) return;
    assumed = seen;
  }
}

/// Two half or bfloat16 values packed into one 32-bit word (first in the low half).
template <class V>
__device__ __forceinline__ unsigned pack_pair(float a, float b) {
  const V lo = convert<V>(a), hi = convert<V>(b);
  unsigned short l, h;
  memcpy(&l, &lo, 2);
  memcpy(&h, &hi, 2);
  return static_cast<unsigned>(l) | (static_cast<unsigned>(h) << 16);
}

/// One vector reduction of 8 half/bfloat16 values at a 16-byte aligned p.
template <class V>
__device__ __forceinline__ void red_add_8(V* p, const float (&v)[8]) {
  const unsigned w0 = pack_pair<V>(v[0], v[1]), w1 = pack_pair<V>(v[2], v[3]);
  const unsigned w2 = pack_pair<V>(v[4], v[5]), w3 = pack_pair<V>(v[6], v[7]);
  if constexpr (std::is_same_v<V, bfloat16>)
    asm volatile("red.global.add.noftz.v4.bf16x2 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(w0), "r"(w1), "r"(w2), "r"(w3)
                 : "memory");
  else
    asm volatile("red.global.add.noftz.v4.f16x2 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(w0), "r"(w1), "r"(w2), "r"(w3)
                 : "memory");
}

/// v added to the half/bfloat16 at p by the packed-pair reduction on p's
/// aligned 32-bit word, the other half of the word getting -0 (x + (-0) = x
/// for every x, -0 included; a NaN stays a NaN). sm_90 has no 16-bit atomic
/// addition: CUDA's atomicAdd on one half/bfloat16 is a compare-and-swap
/// loop, which collapses when many warps add into one element (width-1 bf16
/// rows, half of 994 M on one key: 10.6 s a call; 56 ms this way). Pre: the
/// other half is memory the call may update (an element of the output).
template <class V>
__device__ __forceinline__ void red_add_in_pair(V* p, float v) {
  constexpr float kNegativeZero = -0.0f;
  const bool low = (reinterpret_cast<std::uintptr_t>(p) & 2u) == 0;
  const unsigned word = low ? pack_pair<V>(v, kNegativeZero) : pack_pair<V>(kNegativeZero, v);
  auto* aligned = reinterpret_cast<unsigned*>(reinterpret_cast<std::uintptr_t>(p) & ~std::uintptr_t{3});
  if constexpr (std::is_same_v<V, bfloat16>)
    asm volatile("red.global.add.noftz.bf16x2 [%0], %1;" ::"l"(aligned), "r"(word) : "memory");
  else
    asm volatile("red.global.add.noftz.f16x2 [%0], %1;" ::"l"(aligned), "r"(word) : "memory");
}

/// Adds combined chunks to the output: out[key·stride + col + e] =
/// op(..., acc[e]) atomically. Sums use the hardware's vector atomics where
/// the address allows (float4, 8 half/bfloat16 on sm_90), each element's
/// own atomic otherwise (one half/bfloat16 through its 32-bit word where the
/// word's other half is an output element too); half and bfloat16 sums are
/// rounded to V first. Other operators: a compare-and-swap loop per element.
template <class V, class Op>
struct out_sink {
  using acc_type = default_accumulator_t<V>;
  V* out;
  std::int64_t stride;
  std::int64_t rows;  ///< output rows
  std::int64_t cols;  ///< columns a row (<= stride)
  Op op;

  __device__ __forceinline__ void touch(std::int64_t) const {}

  /// Whether the element next to (key, col) in the other half of its 32-bit
  /// word is an output element: the row's next (previous) column, or with
  /// stride == cols the next row's first (previous row's last) one.
  __device__ __forceinline__ bool pair_in_output(std::int64_t key, std::int64_t col, const V* p) const {
    const bool low = (reinterpret_cast<std::uintptr_t>(p) & 2u) == 0;
    return low ? col + 1 < cols || (stride == cols && key + 1 < rows) : col > 0 || (stride == cols && key > 0);
  }

  __device__ __forceinline__ void add_one(std::int64_t key, std::int64_t col, acc_type v) const {
    V* p = out + key * stride + col;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if constexpr (std::is_same_v<Op, plus> && is_low_precision_v<V>) {
      if (pair_in_output(key, col, p)) {
        red_add_in_pair(p, v);
        return;
      }
    }
#endif
    if constexpr (std::is_same_v<Op, plus>) atomicAdd(p, convert<V>(v));
    else if constexpr (is_low_precision_v<V>) narrow_atomic_update(p, v, op);
    else device::atomic_accumulate(p, v, op);
  }

  __device__ __forceinline__ void add(std::int64_t key, std::int64_t col, acc_type v) const { add_one(key, col, v); }

  template <int W>
  __device__ __forceinline__ void add(std::int64_t key, std::int64_t col, const acc_type (&acc)[W], int count) const {
    V* p = out + key * stride + col;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if constexpr (std::is_same_v<Op, plus> && std::is_same_v<V, float> && W == 4) {
      if (count == 4 && aligned_to(p, 16)) {
        atomicAdd(reinterpret_cast<float4*>(p), make_float4(acc[0], acc[1], acc[2], acc[3]));
        return;
      }
    }
    if constexpr (std::is_same_v<Op, plus> && is_low_precision_v<V> && W == 8) {
      if (count == 8 && aligned_to(p, 16)) {
        red_add_8(p, acc);
        return;
      }
    }
#endif
#pragma unroll
    for (int e = 0; e < W; ++e)
      if (e < count) add_one(key, col + e, acc[e]);
  }
};

/// Adds combined chunks to a deterministic call's int64 sums: element
/// (key, col) of out has its sum at sums[slot·cols + col], slot = key (one
/// slot per output row; `touched` marks the rows reached) or slot_of[key]
/// (the first row that names key; no marks needed).
struct fixed_point_sink {
  using acc_type = long long;
  unsigned long long* sums;
  std::int64_t cols;
  const unsigned long long* slot_of;  ///< null: slot = key
  unsigned* touched;                  ///< slot = key: 1 for every output row reached

  __device__ __forceinline__ std::int64_t slot(std::int64_t key) const {
    return slot_of ? static_cast<std::int64_t>(slot_of[key]) : key;
  }
  /// Marks the output row `key` as reached (every row that lands calls it at least once).
  __device__ __forceinline__ void touch(std::int64_t key) const {
    if (touched) touched[key] = 1u;
  }
  __device__ __forceinline__ void add(std::int64_t key, std::int64_t col, long long v) const {
    if (v != 0) atomicAdd(sums + slot(key) * cols + col, static_cast<unsigned long long>(v));
  }
  template <int W>
  __device__ __forceinline__ void add(std::int64_t key, std::int64_t col, const long long (&acc)[W], int count) const {
    unsigned long long* p = sums + slot(key) * cols + col;
#pragma unroll
    for (int e = 0; e < W; ++e)
      if (e < count && acc[e] != 0) atomicAdd(p + e, static_cast<unsigned long long>(acc[e]));
  }
};

}  // namespace tally::kernels::index_add
