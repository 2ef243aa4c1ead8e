// SIMD evaluation of the fixed tree (core/tree.hpp) on the host, for the
// common sources: sums, products, minima, maxima and bit operations of float,
// double and 32/64-bit integers, dots and squared norms of float and double,
// and compensated sums of those. Every other source and operator takes the
// generic path of cpu/reduce.hpp.
//
// An aligned subtree of S = L·q complete vectors is evaluated in the L lanes
// of R-byte registers (R = 16, 32 or 64: SSE2, AVX2, AVX-512, picked at run
// time). Lane s evaluates the aligned subtree of q vectors that starts at
// vector s·q (its stream); at the end the L lane values are combined in tree
// order, adjacent lanes first. Within the lanes, one step reads 4 vectors (64
// bytes) of every stream:
//
//   1. each register load takes C = R/16 consecutive vectors of one stream;
//      the registers of V streams are transposed within 16-byte chunks, so that
//      register k holds element k of those vectors, and each vector's left fold
//      is V−1 lane-wise operations in the fold's own order;
//   2. two shuffles of 16-byte chunks on a pair of registers bring vectors 2c
//      and 2c+1 of each stream into the same lane of two registers, which are
//      combined; repeated (twice for C = 4) until one register holds a subtree
//      of C vectors in every lane, lane s being stream s; the C-vector subtrees
//      of one step are then combined pairwise into a subtree of 4 vectors;
//   3. steps are combined by a binary counter (the balanced tree over them);
//   4. the lanes are combined adjacent first, in registers halved each level.
//
// Compensated sums fold each vector's leaves {x, +0} without adding their zero
// errors (fold_leaves says why that gives the same bits): the fold is most of
// their work.
//
// Integer operators are exactly associative and commutative (sums and products
// wrap), so for them any order gives the tree's bits: their kernel combines
// the elements straight down the lanes, without transposes.
//
// Every lane-wise operation is the scalar operation on one lane's values in
// the tree's order, so the result equals tree::reduce_reference bit for bit.
//
// Host code only. Written with GCC vector extensions (g++ and nvcc's
// host pass accept them); the wider kernels are compiled with target
// attributes and called only where the CPU has the instructions. Helpers take
// vectors by reference, never by value, so that no call passes a vector
// across an ABI that depends on the target.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "tally/core/operators.hpp"
#include "tally/core/source.hpp"
#include "tally/core/tree.hpp"

namespace tally::detail {
// The transforms of dot and squared_norm, defined with them in reduce.hpp.
struct product_transform;
struct squared_magnitude;
}  // namespace tally::detail

namespace tally::detail::cpu_simd {

/// R bytes of E: a GCC vector.
template <class E, int R>
struct vector_of {
  typedef E type __attribute__((vector_size(R)));
};
template <class E, int R>
using vec = typename vector_of<E, R>::type;

/// Vectors of one stream read per step: 64 bytes, one cache line.
inline constexpr int kStepVectors = 4;

// ---------------------------------------------------------------------------
// Shuffles, on a view of 32-bit words (W = R/4 words, C = R/16 chunks).

enum class shuffle_kind {
  lo32,  // per chunk: a0 b0 a1 b1
  hi32,  // per chunk: a2 b2 a3 b3
  lo64,  // per chunk: a0 a1 b0 b1
  hi64,  // per chunk: a2 a3 b2 b3
  even,  // a's even chunks, then b's even chunks
  odd,   // a's odd chunks, then b's odd chunks
};

/// out = the shuffle `K` of a and b. Vectors of 16, 32 or 64 bytes, any element type.
/// The 64-bit moves are written on 64-bit words, so that the compiler finds
/// the unpack and 128-bit shuffle instructions for them.
template <shuffle_kind K, class Vec>
[[gnu::always_inline]] inline void shuffle(Vec& out, const Vec& a_in, const Vec& b_in) {
  constexpr bool k32 = K == shuffle_kind::lo32 || K == shuffle_kind::hi32;
  using words = vec<std::conditional_t<k32, std::uint32_t, std::uint64_t>, sizeof(Vec)>;
  const words a = (words)a_in, b = (words)b_in;  // same-size vector casts keep the bits
  words r;
  if constexpr (sizeof(Vec) == 16) {
    if constexpr (K == shuffle_kind::lo32) r = __builtin_shufflevector(a, b, 0, 4, 1, 5);
    else if constexpr (K == shuffle_kind::hi32) r = __builtin_shufflevector(a, b, 2, 6, 3, 7);
    else if constexpr (K == shuffle_kind::lo64) r = __builtin_shufflevector(a, b, 0, 2);
    else if constexpr (K == shuffle_kind::hi64) r = __builtin_shufflevector(a, b, 1, 3);
    else static_assert(K == shuffle_kind::lo32, "one chunk: nothing to transpose");
  } else if constexpr (sizeof(Vec) == 32) {
    if constexpr (K == shuffle_kind::lo32) r = __builtin_shufflevector(a, b, 0, 8, 1, 9, 4, 12, 5, 13);
    else if constexpr (K == shuffle_kind::hi32) r = __builtin_shufflevector(a, b, 2, 10, 3, 11, 6, 14, 7, 15);
    else if constexpr (K == shuffle_kind::lo64) r = __builtin_shufflevector(a, b, 0, 4, 2, 6);
    else if constexpr (K == shuffle_kind::hi64) r = __builtin_shufflevector(a, b, 1, 5, 3, 7);
    else if constexpr (K == shuffle_kind::even) r = __builtin_shufflevector(a, b, 0, 1, 4, 5);
    else r = __builtin_shufflevector(a, b, 2, 3, 6, 7);
  } else {
    static_assert(sizeof(Vec) == 64);
    if constexpr (K == shuffle_kind::lo32)
      r = __builtin_shufflevector(a, b, 0, 16, 1, 17, 4, 20, 5, 21, 8, 24, 9, 25, 12, 28, 13, 29);
    else if constexpr (K == shuffle_kind::hi32)
      r = __builtin_shufflevector(a, b, 2, 18, 3, 19, 6, 22, 7, 23, 10, 26, 11, 27, 14, 30, 15, 31);
    else if constexpr (K == shuffle_kind::lo64) r = __builtin_shufflevector(a, b, 0, 8, 2, 10, 4, 12, 6, 14);
    else if constexpr (K == shuffle_kind::hi64) r = __builtin_shufflevector(a, b, 1, 9, 3, 11, 5, 13, 7, 15);
    else if constexpr (K == shuffle_kind::even) r = __builtin_shufflevector(a, b, 0, 1, 4, 5, 8, 9, 12, 13);
    else r = __builtin_shufflevector(a, b, 2, 3, 6, 7, 10, 11, 14, 15);
  }
  out = (Vec)r;
}

/// f(0), f(1), ..., f(N − 1), unrolled at compile time. gcc leaves such short
/// loops rolled in the 32-byte kernels and then keeps their vectors in memory
/// (the float AVX2 kernel ran 6 times slower); `#pragma GCC unroll` would
/// do, but nvcc's host pass rejects it.
template <class F, int... I>
[[gnu::always_inline]] inline void unrolled_at(const F& f, std::integer_sequence<int, I...>) {
  (f(I), ...);
}
template <int N, class F>
[[gnu::always_inline]] inline void unrolled(const F& f) {
  unrolled_at(f, std::make_integer_sequence<int, N>{});
}

// ---------------------------------------------------------------------------
// Values in lanes: one vector per lane value, or two for compensated sums.

template <class Acc, int R>
struct pack {
  using elem = Acc;
  vec<Acc, R> v;
};
/// Compensated sums: sums and errors in two vectors.
template <class T, int R>
struct pack<compensated<T>, R> {
  using elem = T;
  vec<T, R> sum, error;
};

/// s = a + b and e its rounding error (Knuth's TwoSum), lane-wise: the sum
/// and error of compensated_plus, written again here because nvcc would
/// compile that __host__ __device__ operator for the device too, where
/// vectors do not exist. The tests compare the two bit for bit.
/// Post: e is never −0 (see fold_leaves).
template <class V>
[[gnu::always_inline]] inline void two_sum(V& s, V& e, const V& a, const V& b) {
  s = a + b;
  const V bb = s - a;
  e = (a - (s - bb)) + (b - bb);
}

/// Lane-wise a ⊕ b, each lane exactly the scalar operator (the simd_op form
/// for float minimum and maximum). out may alias neither input.
template <class Op>
struct lane_op {
  template <class Acc, int R>
  [[gnu::always_inline]] static void apply(pack<Acc, R>& out, const pack<Acc, R>& a, const pack<Acc, R>& b) {
    using V = vec<typename pack<Acc, R>::elem, R>;
    if constexpr (std::is_same_v<Op, compensated_plus>) {
      V e;
      two_sum(out.sum, e, a.sum, b.sum);
      out.error = (a.error + b.error) + e;
    } else if constexpr (std::is_same_v<Op, plus> || std::is_same_v<Op, multiplies>) {
      if constexpr (std::is_integral_v<Acc>) {  // modulo 2^bits, as wrap_add and wrap_mul
        using U = vec<std::make_unsigned_t<Acc>, R>;
        if constexpr (std::is_same_v<Op, plus>) out.v = (V)((U)a.v + (U)b.v);
        else out.v = (V)((U)a.v * (U)b.v);
      } else {
        if constexpr (std::is_same_v<Op, plus>) out.v = a.v + b.v;
        else out.v = a.v * b.v;
      }
    } else if constexpr (std::is_same_v<Op, minimum> || std::is_same_v<Op, maximum>) {
      const V x = a.v, y = b.v;
      V r = std::is_same_v<Op, minimum> ? (y < x ? y : x) : (x < y ? y : x);
      if constexpr (std::is_floating_point_v<Acc>) {  // NaN a, else NaN b, else the extremum
        r = (y != y) ? y : r;
        r = (x != x) ? x : r;
      }
      out.v = r;
    } else if constexpr (std::is_same_v<Op, bit_and>) {
      out.v = a.v & b.v;
    } else if constexpr (std::is_same_v<Op, bit_or>) {
      out.v = a.v | b.v;
    } else {
      static_assert(std::is_same_v<Op, bit_xor>);
      out.v = a.v ^ b.v;
    }
  }
};

// ---------------------------------------------------------------------------
// Which sources and operators have a SIMD path.

template <class T>
inline constexpr bool is_simd_element =
    std::is_same_v<T, float> || std::is_same_v<T, double> ||
    (std::is_integral_v<T> && !std::is_same_v<T, bool> && (sizeof(T) == 4 || sizeof(T) == 8));

/// How leaves are read: the element (identity), x·y, or x·x.
enum class leaf_kind { identity, product, square };

template <class Source>
struct source_traits {
  static constexpr bool supported = false;
};
template <class T>
struct source_traits<unary_source<T, T, identity_transform>> {
  static constexpr bool supported = is_simd_element<T>;
  static constexpr leaf_kind kind = leaf_kind::identity;
};
template <class T>
struct source_traits<unary_source<T, T, squared_magnitude>> {
  static constexpr bool supported = std::is_floating_point_v<T>;
  static constexpr leaf_kind kind = leaf_kind::square;
};
template <class T>
struct source_traits<binary_source<T, T, T, product_transform>> {
  static constexpr bool supported = std::is_floating_point_v<T>;
  static constexpr leaf_kind kind = leaf_kind::product;
};
template <class Source>
struct source_traits<compensated_source<Source>> : source_traits<Source> {};

template <class Op, class Acc>
inline constexpr bool op_supported =
    std::is_same_v<Op, plus> || std::is_same_v<Op, multiplies> || std::is_same_v<Op, minimum> ||
    std::is_same_v<Op, maximum> ||
    (std::is_integral_v<Acc> && (std::is_same_v<Op, bit_and> || std::is_same_v<Op, bit_or> ||
                                 std::is_same_v<Op, bit_xor>));

/// True when the kernels below evaluate Source's tree under Op.
template <class Source, class Op>
inline constexpr bool supported = [] {
  if constexpr (!source_traits<Source>::supported) {
    return false;
  } else if constexpr (std::is_same_v<Op, compensated_plus>) {
    return !std::is_same_v<typename Source::acc_type, typename Source::first_type>;  // a compensated source
  } else {
    return std::is_same_v<typename Source::acc_type, typename Source::first_type> &&
           op_supported<Op, typename Source::acc_type>;
  }
}();

// ---------------------------------------------------------------------------
// The kernel.

/// Reads R bytes of leaf values of src (transform applied) from element i on.
template <int R, class Source, class Vec>
[[gnu::always_inline]] inline void load_leaves(Vec& out, const Source& src, std::int64_t i) {
  std::memcpy(&out, src.x + i, R);
  if constexpr (source_traits<Source>::kind == leaf_kind::product) {
    Vec y;
    std::memcpy(&y, src.y + i, R);
    out = out * y;
  } else if constexpr (source_traits<Source>::kind == leaf_kind::square) {
    out = out * out;
  }
}

/// Lanes of the far kernel: at most this many streams a core, so that the
/// streams, a power of two of bytes apart and hence in one set of the L1 and
/// L2 caches, do not evict each other's prefetched lines (8 or 12 ways).
inline constexpr int kFarLanes = 8;

/// Steps (one 64-byte line of each stream) between a line's prefetch and its
/// load in the far kernel.
inline constexpr std::int64_t kPrefetchSteps = 8;

/// Prefetches the line of src's leaves at element i (both arrays of a
/// product). Prefetches never fault, so i may lie past the subtree's end.
template <class Source>
[[gnu::always_inline]] inline void prefetch_leaves(const Source& src, std::int64_t i) {
  __builtin_prefetch(src.x + i);
  if constexpr (source_traits<Source>::kind == leaf_kind::product) __builtin_prefetch(src.y + i);
}

/// out = the shuffle K of a and b, on each vector of the packs.
template <shuffle_kind K, class P>
[[gnu::always_inline]] inline void shuffle_packs(P& out, const P& a, const P& b) {
  if constexpr (requires { out.error; }) {
    shuffle<K>(out.sum, a.sum, b.sum);
    shuffle<K>(out.error, a.error, b.error);
  } else {
    shuffle<K>(out.v, a.v, b.v);
  }
}

/// out = a ⊕ b (lane-wise) through a temporary, so out may alias an input.
template <class Op, class P>
[[gnu::always_inline]] inline void combine(P& out, const P& a, const P& b) {
  P r;
  lane_op<Op>::apply(r, a, b);
  out = r;
}

/// acc = each lane's left fold ((x0 ⊕ x1) ⊕ x2) ⊕ ... of the leaves in
/// cols[0], cols[1], ... (K of them, K >= 2).
///
/// Compensated leaves are {x, +0}, and their zero errors are left out: the
/// fold's error is e1, then e1 + e2, (e1 + e2) + e3, where compensated_plus
/// computes (+0 + +0) + e1, then (e1 + +0) + e2, ... The two agree bit for
/// bit because no value here is −0: in round-to-nearest, x + y is −0 only
/// when x and y are both −0, and x − y only when x = −0 and y = +0, so a
/// TwoSum error e = (a − (s − bb)) + (b − bb) would need b = −0 and bb = +0
/// (b − bb = −0), and a = −0 with s − bb = +0 — but then s = a + b = −0,
/// bb = s − a = +0 and s − bb = −0. Sums of such errors are never −0 either,
/// and y + (+0) = y for every y but −0 (NaNs keep their payload).
template <class Op, class P, class V, int K>
[[gnu::always_inline]] inline void fold_leaves(P& acc, const V (&cols)[K]) {
  static_assert(K >= 2);
  if constexpr (requires { acc.error; }) {
    two_sum(acc.sum, acc.error, cols[0], cols[1]);
    for (int k = 2; k < K; ++k) {
      V s, e;
      two_sum(s, e, acc.sum, cols[k]);
      acc.sum = s;
      acc.error = acc.error + e;
    }
  } else {
    P leaf;
    acc.v = cols[0];
    for (int k = 1; k < K; ++k) {
      leaf.v = cols[k];
      combine<Op>(acc, acc, leaf);
    }
  }
}

/// out = the pairs of a's chunks (2c ⊕ 2c+1) in out's first half, then
/// those of b's, lane by lane: the even chunks are the left operands.
template <class Op, class P>
[[gnu::always_inline]] inline void combine_chunk_pairs(P& out, const P& a, const P& b) {
  P left, right;
  shuffle_packs<shuffle_kind::even>(left, a, b);
  shuffle_packs<shuffle_kind::odd>(right, a, b);
  combine<Op>(out, left, right);
}

/// out lane s = the subtree of C consecutive vectors (C = R/16) of stream s,
/// from the vector at element `first + s·stride` on, for each of L streams.
template <int R, class Op, class Source, class P>
[[gnu::always_inline]] inline void fold_step(P& out, const Source& src, std::int64_t first, std::int64_t stride) {
  using E = typename P::elem;
  using V = vec<E, R>;
  constexpr int kVector = 16 / sizeof(E);  // elements per vector
  constexpr int kChunks = R / 16;
  P folds[kChunks];  // folds[g] chunk c position i: vector c of stream g·kVector + i
  unrolled<kChunks>([&](int g) __attribute__((always_inline)) {
    V rows[kVector], cols[kVector];  // cols[k]: element k of each (stream, vector c) in (chunk c, position)
    unrolled<kVector>([&](int i) __attribute__((always_inline)) {
      load_leaves<R>(rows[i], src, first + (g * kVector + i) * stride);
    });
    if constexpr (kVector == 4) {
      V t0, t1, t2, t3;
      shuffle<shuffle_kind::lo32>(t0, rows[0], rows[1]);
      shuffle<shuffle_kind::hi32>(t1, rows[0], rows[1]);
      shuffle<shuffle_kind::lo32>(t2, rows[2], rows[3]);
      shuffle<shuffle_kind::hi32>(t3, rows[2], rows[3]);
      shuffle<shuffle_kind::lo64>(cols[0], t0, t2);
      shuffle<shuffle_kind::hi64>(cols[1], t0, t2);
      shuffle<shuffle_kind::lo64>(cols[2], t1, t3);
      shuffle<shuffle_kind::hi64>(cols[3], t1, t3);
    } else {
      static_assert(kVector == 2);
      shuffle<shuffle_kind::lo64>(cols[0], rows[0], rows[1]);
      shuffle<shuffle_kind::hi64>(cols[1], rows[0], rows[1]);
    }
    fold_leaves<Op>(folds[g], cols);
  });
  // Vectors 2c and 2c+1 combined, each level halving the chunks per stream;
  // the result's chunk g holds folds[g]'s streams, so lane s is stream s.
  // (Six shuffles per vector of the pack for C = 4, where a full transpose of
  // the chunks took eight.)
  if constexpr (kChunks == 1) {
    out = folds[0];
  } else if constexpr (kChunks == 2) {
    combine_chunk_pairs<Op>(out, folds[0], folds[1]);
  } else {
    static_assert(kChunks == 4);
    P pairs[2];  // pairs[h] chunks: (0 ⊕ 1, 2 ⊕ 3) of folds[2h], then of folds[2h+1]
    combine_chunk_pairs<Op>(pairs[0], folds[0], folds[1]);
    combine_chunk_pairs<Op>(pairs[1], folds[2], folds[3]);
    combine_chunk_pairs<Op>(out, pairs[0], pairs[1]);
  }
}

/// Lanes per register, and so streams per subtree, for accumulator Acc.
template <class Acc, int R>
inline constexpr int kLanes = R / static_cast<int>(sizeof(typename pack<Acc, R>::elem));

/// The value of the aligned subtree of `size` complete vectors from vector
/// `first` on, for integer operators: wrapping sums and products, minima,
/// maxima and bit operations of integers are exactly associative and
/// commutative, so every order of combining gives the tree's bits. The
/// elements are combined straight down the lanes of four registers.
/// Pre: as lanes_subtree.
template <int R, class Source, class Op>
[[gnu::always_inline]] inline typename Source::acc_type unordered_subtree(const Source& src, std::int64_t first,
                                                                          std::int64_t size) {
  using Acc = typename Source::acc_type;
  using P = pack<Acc, R>;
  constexpr int kWidth = R / static_cast<int>(sizeof(Acc));
  const Acc* x = src.x + first * Source::V;
  const std::int64_t count = size * Source::V;  // a multiple of 4·kWidth
  P acc[4];
  for (int u = 0; u < 4; ++u) std::memcpy(&acc[u].v, x + u * kWidth, R);
  for (std::int64_t i = 4 * kWidth; i < count; i += 4 * kWidth) {
    for (int u = 0; u < 4; ++u) {
      P next;
      std::memcpy(&next.v, x + i + u * kWidth, R);
      combine<Op>(acc[u], acc[u], next);
    }
  }
  combine<Op>(acc[0], acc[0], acc[1]);
  combine<Op>(acc[2], acc[2], acc[3]);
  combine<Op>(acc[0], acc[0], acc[2]);
  const Op op{};
  Acc r = acc[0].v[0];
  for (int s = 1; s < kWidth; ++s) r = op(r, acc[0].v[s]);
  return r;
}

/// True where unordered_subtree gives the tree's bits.
template <class Source, class Op>
inline constexpr bool kUnordered =
    std::is_integral_v<typename Source::acc_type> && source_traits<Source>::kind == leaf_kind::identity;

/// out = the even (Odd = 0) or odd (Odd = 1) lanes of v, a vector of N = 4, 8
/// or 16 elements: lanes 2s + Odd, s < N/2. (The lists are written out: nvcc's
/// host pass mangles a pack expanded inside __builtin_shufflevector.)
template <int Odd, class Half, class Vec>
[[gnu::always_inline]] inline void pick_lanes(Half& out, const Vec& v) {
  constexpr int N = sizeof(Vec) / sizeof(v[0]);
  if constexpr (N == 4) out = __builtin_shufflevector(v, v, Odd, 2 + Odd);
  else if constexpr (N == 8) out = __builtin_shufflevector(v, v, Odd, 2 + Odd, 4 + Odd, 6 + Odd);
  else {
    static_assert(N == 16);
    out = __builtin_shufflevector(v, v, Odd, 2 + Odd, 4 + Odd, 6 + Odd, 8 + Odd, 10 + Odd, 12 + Odd, 14 + Odd);
  }
}

/// p's lanes combined adjacent first (lanes[s] = lanes[2s] ⊕ lanes[2s+1],
/// level by level), as the tree combines the streams. Each level is one
/// lane-wise operation on registers of half the width, the last pair a
/// scalar one: a few instructions where one per lane, on values spilled to
/// memory, made most of a small compensated sum's time.
template <class Op, class Acc, int R>
[[gnu::always_inline]] inline Acc combine_lanes(const pack<Acc, R>& p) {
  constexpr int kCount = R / static_cast<int>(sizeof(typename pack<Acc, R>::elem));
  if constexpr (kCount == 2) {
    const Op op{};  // the scalar operator: the same result as lane_op on one lane
    if constexpr (requires { p.error; })
      return op(Acc{p.sum[0], p.error[0]}, Acc{p.sum[1], p.error[1]});
    else
      return op(p.v[0], p.v[1]);
  } else {
    pack<Acc, R / 2> even, odd, r;
    if constexpr (requires { p.error; }) {
      pick_lanes<0>(even.sum, p.sum), pick_lanes<1>(odd.sum, p.sum);
      pick_lanes<0>(even.error, p.error), pick_lanes<1>(odd.error, p.error);
    } else {
      pick_lanes<0>(even.v, p.v), pick_lanes<1>(odd.v, p.v);
    }
    lane_op<Op>::apply(r, even, odd);
    return combine_lanes<Op>(r);
  }
}

/// The value of the aligned subtree of `size` complete vectors from vector
/// `first` on; with Far, each stream's line kPrefetchSteps steps ahead is
/// prefetched (streams far apart in memory: more lines in flight than the
/// hardware prefetchers keep). Pre: size is a power of two,
/// size >= kLanes·kStepVectors; vectors first ... first + size − 1 lie wholly
/// inside src.
template <int R, bool Far, class Source, class Op>
[[gnu::always_inline]] inline typename Source::acc_type lanes_subtree(const Source& src, std::int64_t first,
                                                                      std::int64_t size) {
  if constexpr (kUnordered<Source, Op>) return unordered_subtree<R, Source, Op>(src, first, size);
  using Acc = typename Source::acc_type;
  using P = pack<Acc, R>;
  constexpr int kLaneCount = kLanes<Acc, R>;
  constexpr int kChunks = R / 16;
  constexpr int kUnits = kStepVectors / kChunks;  // register loads per stream per step
  constexpr std::int64_t V = Source::V;
  const std::int64_t q = size / kLaneCount;  // vectors per stream
  const std::int64_t steps = q / kStepVectors;
  const std::int64_t base = first * V, stride = q * V;
  P stack[64];  // stack[h]: the pending subtree of 2^h steps (a binary counter)
  for (std::int64_t j = 0; j < steps; ++j) {
    if constexpr (Far)
      unrolled<kLaneCount>([&](int s) __attribute__((always_inline)) {
        prefetch_leaves(src, base + (j + kPrefetchSteps) * kStepVectors * V + s * stride);
      });
    P units[kUnits];  // subtrees of kChunks vectors
    unrolled<kUnits>([&](int u) __attribute__((always_inline)) {
      fold_step<R, Op>(units[u], src, base + (j * kStepVectors + u * kChunks) * V, stride);
    });
    P value;
    if constexpr (kUnits == 1)
      value = units[0];
    else if constexpr (kUnits == 2)
      combine<Op>(value, units[0], units[1]);
    else {
      combine<Op>(units[0], units[0], units[1]);
      combine<Op>(units[2], units[2], units[3]);
      combine<Op>(value, units[0], units[2]);
    }
    int h = 0;
    for (; (j >> h) & 1; ++h) combine<Op>(value, stack[h], value);
    stack[h] = value;
  }
  return combine_lanes<Op>(stack[tree::bit_width(static_cast<std::uint64_t>(steps)) - 1]);
}

// One entry per instruction set; each is compiled for its target, with the
// helpers above inlined into it.
#if defined(__x86_64__)
template <class Source, class Op, bool Far>
[[gnu::target("avx512f,avx512vl,avx512dq,avx512bw")]] typename Source::acc_type subtree_avx512(
    const Source& src, std::int64_t first, std::int64_t size) {
  return lanes_subtree<64, Far, Source, Op>(src, first, size);
}
template <class Source, class Op, bool Far>
[[gnu::target("avx2")]] typename Source::acc_type subtree_avx2(const Source& src, std::int64_t first,
                                                                  std::int64_t size) {
  return lanes_subtree<32, Far, Source, Op>(src, first, size);
}
#endif
template <class Source, class Op, bool Far>
typename Source::acc_type subtree_sse2(const Source& src, std::int64_t first, std::int64_t size) {
  return lanes_subtree<16, Far, Source, Op>(src, first, size);
}

/// The widest registers this CPU runs: 64, 32 or 16 bytes.
inline int register_bytes() {
  static const int bytes = [] {
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw"))
      return 64;
    if (__builtin_cpu_supports("avx2")) return 32;
#endif
    return 16;
  }();
  return bytes;
}

/// A SIMD evaluator of Source's tree under Op for this CPU.
template <class Source, class Op>
struct evaluator {
  using Acc = typename Source::acc_type;
  using function = Acc (*)(const Source&, std::int64_t, std::int64_t);
  /// The widest registers' kernel.
  function run;
  /// The smallest subtree (in vectors) run takes; larger ones are powers of two.
  std::int64_t min_vectors;
  /// For subtrees far larger than the caches: the widest registers of at
  /// most kFarLanes lanes, with prefetches. Takes every power of two of at
  /// least 4·kFarLanes vectors.
  function far;

  static evaluator for_this_cpu() {
    constexpr bool k64 = kLanes<Acc, 64> <= kFarLanes, k32 = kLanes<Acc, 32> <= kFarLanes;
    constexpr function far16 = &subtree_sse2<Source, Op, true>;
#if defined(__x86_64__)
    constexpr function far32 = k32 ? &subtree_avx2<Source, Op, true> : far16;
    const int bytes = register_bytes();
    if (bytes == 64)
      return {&subtree_avx512<Source, Op, false>, kLanes<Acc, 64> * kStepVectors,
              k64 ? &subtree_avx512<Source, Op, true> : far32};
    if (bytes == 32) return {&subtree_avx2<Source, Op, false>, kLanes<Acc, 32> * kStepVectors, far32};
#endif
    return {&subtree_sse2<Source, Op, false>, kLanes<Acc, 16> * kStepVectors, far16};
  }
};

}  // namespace tally::detail::cpu_simd
