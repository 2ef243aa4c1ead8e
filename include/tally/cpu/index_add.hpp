// The CPU backend of index_add (index_add.hpp; hooks described in
// core/index_add_calls.hpp).
//
// No atomics and no per-thread copy of the output: the rows are first
// bucketed by blocks of consecutive output rows (a stable counting sort on
// index / keys_per_block, so each block lists its rows in row order), and
// then each block -- split by columns when it holds more than a thread's
// share of the rows, as a hot key's block does -- is summed by one thread in
// a private buffer of at most kBlockBytes (so it stays in cache while the
// block's source rows stream past) and added to out once per element. Every
// output element thus combines its rows in row order whatever the thread
// count: results are the same bits with 1 thread or 64. Work and memory are
// O(rows·cols) plus 8 bytes per row and per block, never O(out_rows·cols).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include <omp.h>

#include "tally/core/fixed_point.hpp"
#include "tally/core/fixed_point_rounding.hpp"
#include "tally/core/index_add_calls.hpp"
#include "tally/core/tree.hpp"
#include "tally/cpu/histogram.hpp"

namespace tally::detail {

namespace cpu_index_add {

/// Bytes of accumulators one block of output rows takes (within a core's L2).
inline constexpr std::int64_t kBlockBytes = std::int64_t(256) << 10;
/// Most blocks: bounds the per-thread bucket counts (threads × blocks).
inline constexpr std::int64_t kMaxBlocks = std::int64_t(1) << 16;
/// Narrowest range of columns a heavy block is split into.
inline constexpr std::int64_t kMinTileCols = 16;
/// Fewest elements worth a thread: below, the parallel regions' start-up
/// and barriers cost more than the work.
inline constexpr std::int64_t kElementsPerThread = std::int64_t(1) << 15;

/// Rows [first, last) of the `t`-th of `parts` equal shares of n.
inline std::int64_t share_begin(std::int64_t n, int t, int parts) {
  return n / parts * t + std::min<std::int64_t>(t, n % parts);
}

/// The rows of a call bucketed by blocks of keys_per_block consecutive
/// output rows, each block's rows in row order.
struct row_buckets {
  std::int64_t keys_per_block = 1;
  std::int64_t blocks = 0;
  std::vector<std::int64_t> start;  ///< blocks + 1 offsets into order
  std::vector<std::int64_t> order;  ///< row numbers
  std::int64_t first_bad = -1;      ///< the first row whose index lies outside [0, out_rows), or -1
};

/// A stable counting sort of the rows by block: each thread counts its
/// share of the rows per block, the counts become each thread's first
/// position in each block (thread order within a block is row order), and
/// each thread places its rows.
template <class I, class V>
row_buckets bucket_rows(int threads, const row_scatter<I, V>& p, std::size_t acc_bytes) {
  row_buckets b;
  b.keys_per_block = std::max<std::int64_t>(1, kBlockBytes / (static_cast<std::int64_t>(acc_bytes) * p.cols));
  b.keys_per_block = std::max(b.keys_per_block, (p.out_rows + kMaxBlocks - 1) / kMaxBlocks);
  b.blocks = (p.out_rows + b.keys_per_block - 1) / b.keys_per_block;
  b.start.assign(static_cast<std::size_t>(b.blocks) + 1, 0);
  const auto blocks = static_cast<std::size_t>(b.blocks);
  std::vector<std::int64_t> counts(static_cast<std::size_t>(threads) * blocks, 0);
  std::vector<std::int64_t> first_bad(static_cast<std::size_t>(threads), std::numeric_limits<std::int64_t>::max());
#pragma omp parallel num_threads(threads)
  {
    const int team = omp_get_num_threads(), t = omp_get_thread_num();
    const std::int64_t r0 = share_begin(p.rows, t, team), r1 = share_begin(p.rows, t + 1, team);
    std::int64_t* mine = counts.data() + static_cast<std::size_t>(t) * blocks;
    for (std::int64_t i = r0; i < r1; ++i) {
      const auto k = static_cast<std::int64_t>(p.index[i]);
      if (k >= 0 && k < p.out_rows) ++mine[k / b.keys_per_block];
      else if (first_bad[static_cast<std::size_t>(t)] > i) first_bad[static_cast<std::size_t>(t)] = i;
    }
#pragma omp barrier
#pragma omp single
    {
      std::int64_t position = 0;
      for (std::size_t blk = 0; blk < blocks; ++blk) {
        b.start[blk] = position;
        for (int s = 0; s < team; ++s) {
          std::int64_t& c = counts[static_cast<std::size_t>(s) * blocks + blk];
          const std::int64_t rows_here = c;
          c = position;  // now: where thread s places its first row of this block
          position += rows_here;
        }
      }
      b.start[blocks] = position;
      b.order.resize(static_cast<std::size_t>(position));
      std::int64_t first = std::numeric_limits<std::int64_t>::max();
      for (int s = 0; s < team; ++s) first = std::min(first, first_bad[static_cast<std::size_t>(s)]);
      b.first_bad = first == std::numeric_limits<std::int64_t>::max() ? -1 : first;
    }  // (implicit barrier)
    for (std::int64_t i = r0; i < r1; ++i) {
      const auto k = static_cast<std::int64_t>(p.index[i]);
      if (k >= 0 && k < p.out_rows) b.order[static_cast<std::size_t>(mine[k / b.keys_per_block]++)] = i;
    }
  }
  return b;
}

/// A block's rows, restricted to columns [col0, col1).
struct tile {
  std::int64_t block, col0, col1;
};

/// The tiles to sum: every non-empty block, split into column ranges when it
/// holds more than a thread's share of the rows (so a hot key's block is
/// shared by several threads).
inline std::vector<tile> make_tiles(const row_buckets& b, std::int64_t cols, int threads) {
  std::vector<tile> tiles;
  const std::int64_t share = std::max<std::int64_t>(1, b.start.back() / threads);
  const std::int64_t most_pieces = std::max<std::int64_t>(1, std::min<std::int64_t>(threads, cols / kMinTileCols));
  for (std::int64_t blk = 0; blk < b.blocks; ++blk) {
    const std::int64_t rows_here = b.start[static_cast<std::size_t>(blk) + 1] - b.start[static_cast<std::size_t>(blk)];
    if (rows_here == 0) continue;
    const std::int64_t pieces = std::clamp<std::int64_t>(rows_here / share, 1, most_pieces);
    const std::int64_t width = (cols + pieces - 1) / pieces;
    for (std::int64_t c = 0; c < cols; c += width) tiles.push_back({blk, c, std::min(cols, c + width)});
  }
  return tiles;
}

/// How elements are combined: op on V (float for half and bfloat16).
template <class V, class Op>
struct combine_policy {
  using acc_type = default_accumulator_t<V>;
  Op op;
  acc_type identity() const { return op.template identity<acc_type>(); }
  acc_type value(const V& v) const { return convert<acc_type>(v); }
  acc_type combine(const acc_type& a, const acc_type& x) const { return op(a, x); }
  V finish(const V& out, const acc_type& a) const { return convert<V>(op(convert<acc_type>(out), a)); }
};

/// Deterministic sums: int64 fixed point, each element rounded once at the end.
template <class V>
struct fixed_point_policy {
  using acc_type = long long;
  fixed_point_value quantize;
  int bits;
  acc_type identity() const { return 0; }
  acc_type value(const V& v) const { return quantize(convert<double>(v)); }
  acc_type combine(acc_type a, acc_type x) const { return a + x; }
  V finish(const V& out, acc_type a) const { return add_fixed_point(out, a, bits); }
};

/// Sums every tile of `b` with `policy` and adds the sums to out.
template <class I, class V, class Policy>
void sum_tiles(int threads, const row_scatter<I, V>& p, V* out, const row_buckets& b, const Policy& policy) {
  using Acc = typename Policy::acc_type;
  const std::vector<tile> tiles = make_tiles(b, p.cols, threads);
  const std::int64_t kpb = b.keys_per_block;
#pragma omp parallel num_threads(threads)
  {
    std::vector<Acc> buffer;             // kpb rows of the tile's width, as needed
    std::vector<unsigned char> touched;  // rows of the block met so far (cleared as they are written back)
#pragma omp for schedule(dynamic)
    for (std::size_t t = 0; t < tiles.size(); ++t) {
      const tile& tl = tiles[t];
      const std::int64_t k0 = tl.block * kpb, width = tl.col1 - tl.col0;
      const auto need = static_cast<std::size_t>(kpb * width);
      if (buffer.size() < need) buffer.resize(need);
      if (touched.size() < static_cast<std::size_t>(kpb)) touched.resize(static_cast<std::size_t>(kpb), 0);
      const std::int64_t first = b.start[static_cast<std::size_t>(tl.block)];
      const std::int64_t last = b.start[static_cast<std::size_t>(tl.block) + 1];
      for (std::int64_t pos = first; pos < last; ++pos) {
        const std::int64_t i = b.order[static_cast<std::size_t>(pos)];
        const std::int64_t local = static_cast<std::int64_t>(p.index[i]) - k0;
        Acc* a = buffer.data() + local * width;
        if (!touched[static_cast<std::size_t>(local)]) {
          touched[static_cast<std::size_t>(local)] = 1;
          std::fill(a, a + width, policy.identity());
        }
        const V* s = p.src + i * p.src_stride + tl.col0;
        for (std::int64_t j = 0; j < width; ++j) a[j] = policy.combine(a[j], policy.value(s[j]));
      }
      for (std::int64_t pos = first; pos < last; ++pos) {
        const std::int64_t key = static_cast<std::int64_t>(p.index[b.order[static_cast<std::size_t>(pos)]]);
        const std::int64_t local = key - k0;
        if (!touched[static_cast<std::size_t>(local)]) continue;  // written back already
        touched[static_cast<std::size_t>(local)] = 0;
        const Acc* a = buffer.data() + local * width;
        V* o = out + key * p.out_stride + tl.col0;
        for (std::int64_t j = 0; j < width; ++j) o[j] = policy.finish(o[j], a[j]);
      }
    }
  }
}

/// Ordered sums (index_add_sums::ordered) of every tile of `b`: a tile's
/// rows are its block's rows in row order, so the r-th row of key k lies at
/// sorted position first(k) + r, first(k) = b.start[block] + the rows of the
/// block's smaller keys. Each key's rows are summed into its pieces (cut at
/// multiples of kOrderedPieceRows of the positions), left to right in Acc, and
/// the pieces combined by tree::balanced_fold before the one rounding into
/// out. Work per tile: its rows, and its distinct keys sorted (never the
/// block's whole key range, which sparse keys would make most of the work).
template <class I, class V>
void sum_tiles_ordered(int threads, const row_scatter<I, V>& p, V* out, const row_buckets& b) {
  using Acc = default_accumulator_t<V>;
  constexpr std::int64_t P = kOrderedPieceRows;
  const std::vector<tile> tiles = make_tiles(b, p.cols, threads);
  const std::int64_t kpb = b.keys_per_block;
#pragma omp parallel num_threads(threads)
  {
    // Per key of a block (zero between tiles): rows seen, then the key's
    // first position and its first piece.
    std::vector<std::int64_t> count(static_cast<std::size_t>(kpb), 0), first(static_cast<std::size_t>(kpb), 0),
        piece_base(static_cast<std::size_t>(kpb), 0);
    std::vector<std::int64_t> present;  // the tile's distinct keys (local), ascending
    std::vector<Acc> pieces;            // every key's pieces × the tile's width
#pragma omp for schedule(dynamic)
    for (std::size_t t = 0; t < tiles.size(); ++t) {
      const tile& tl = tiles[t];
      const std::int64_t k0 = tl.block * kpb, width = tl.col1 - tl.col0;
      const std::int64_t begin = b.start[static_cast<std::size_t>(tl.block)];
      const std::int64_t end = b.start[static_cast<std::size_t>(tl.block) + 1];
      const auto local_key = [&](std::int64_t pos) {
        return static_cast<std::size_t>(static_cast<std::int64_t>(p.index[b.order[static_cast<std::size_t>(pos)]]) - k0);
      };
      present.clear();
      for (std::int64_t pos = begin; pos < end; ++pos) {
        const std::size_t l = local_key(pos);
        if (count[l]++ == 0) present.push_back(static_cast<std::int64_t>(l));
      }
      std::sort(present.begin(), present.end());
      const auto pieces_of = [&](std::size_t l) { return (first[l] + count[l] - 1) / P - first[l] / P + 1; };
      std::int64_t position = begin, total_pieces = 0;
      for (const std::int64_t key : present) {
        const auto l = static_cast<std::size_t>(key);
        first[l] = position;
        piece_base[l] = total_pieces;
        total_pieces += pieces_of(l);
        position += count[l];
      }
      pieces.resize(static_cast<std::size_t>(total_pieces * width));
      for (const std::int64_t key : present) count[static_cast<std::size_t>(key)] = 0;  // now: rows placed
      for (std::int64_t pos = begin; pos < end; ++pos) {
        const std::int64_t i = b.order[static_cast<std::size_t>(pos)];
        const std::size_t l = local_key(pos);
        const std::int64_t r = count[l]++, at = first[l] + r;
        Acc* a = pieces.data() + (piece_base[l] + at / P - first[l] / P) * width;
        const V* s = p.src + i * p.src_stride + tl.col0;
        // A piece's sum starts at its first row's values (0 + (−0) would lose a sign).
        if (r == 0 || at % P == 0)
          for (std::int64_t j = 0; j < width; ++j) a[j] = convert<Acc>(s[j]);
        else
          for (std::int64_t j = 0; j < width; ++j) a[j] = a[j] + convert<Acc>(s[j]);
      }
      for (const std::int64_t key : present) {
        const auto l = static_cast<std::size_t>(key);
        const std::int64_t n = pieces_of(l);
        const Acc* base = pieces.data() + piece_base[l] * width;
        V* o = out + (k0 + key) * p.out_stride + tl.col0;
        for (std::int64_t j = 0; j < width; ++j) {
          const Acc sum = tree::balanced_fold<62, Acc>(
              n, [&](std::int64_t q) { return base[q * width + j]; }, plus{});
          o[j] = convert<V>(convert<Acc>(o[j]) + sum);
        }
        count[l] = 0;
      }
    }
  }
}

/// Threads for a call of rows × cols elements.
inline int threads_for(const cpu_backend& cpu, std::int64_t rows, std::int64_t cols) {
  const std::int64_t elements = rows > std::numeric_limits<std::int64_t>::max() / cols ? rows : rows * cols;
  return static_cast<int>(
      std::clamp<std::int64_t>(std::min(rows, elements / kElementsPerThread), 1, cpu_histogram::thread_count(cpu)));
}

/// After the rows were applied: the data errors of a checked call go to
/// opts.errors, or are thrown.
template <class I, class V>
void report(const row_scatter<I, V>& p, std::int64_t first_bad, bool bad_value, const index_add_options& opts) {
  if (!p.report_out_of_range) return;
  if (opts.errors) {
    opts.errors->first_bad_index = first_bad;
    opts.errors->bad_value = bad_value ? 1 : 0;
    return;
  }
  throw_index_add_data_errors(opts, first_bad, first_bad >= 0 ? static_cast<long long>(p.index[first_bad]) : 0,
                              p.out_rows, bad_value, p.rows);
}

/// The largest finite |src| over every row (bad indices included), 0 when none.
template <class I, class V>
double largest_magnitude(int threads, const row_scatter<I, V>& p) {
  double largest = 0;
#pragma omp parallel for num_threads(threads) reduction(max : largest) schedule(static)
  for (std::int64_t i = 0; i < p.rows; ++i) {
    const V* s = p.src + i * p.src_stride;
    for (std::int64_t j = 0; j < p.cols; ++j) {
      const double v = std::fabs(convert<double>(s[j]));
      if (std::isfinite(v)) largest = std::max(largest, v);
    }
  }
  return largest;
}

}  // namespace cpu_index_add

template <class I, class V, class Op>
void execute_index_add(const cpu_backend& cpu, const row_scatter<I, V>& p, V* out, const Op& op,
                       const index_add_options& opts) {
  using namespace cpu_index_add;
  std::int64_t first_bad = -1;
  if (p.rows > 0 && p.cols > 0) {
    const int threads = threads_for(cpu, p.rows, p.cols);
    const combine_policy<V, Op> policy{op};
    const row_buckets b = bucket_rows(threads, p, sizeof(typename combine_policy<V, Op>::acc_type));
    sum_tiles(threads, p, out, b, policy);
    first_bad = b.first_bad;
  }
  report(p, first_bad, false, opts);
}

template <class I, class V>
void run_index_add_deterministic(const cpu_backend& cpu, const row_scatter<I, V>& p, V* out,
                                 const index_add_options& opts) {
  using namespace cpu_index_add;
  std::int64_t first_bad = -1;
  unsigned bad = 0;
  if (p.rows > 0 && p.cols > 0) {
    const int threads = threads_for(cpu, p.rows, p.cols);
    const int headroom = fixed_point_headroom_bits(p.rows);
    const int bits = opts.fixed_point_bits == kDeriveFixedPointScale
                         ? derived_fixed_point_bits(largest_magnitude(threads, p), headroom)
                         : opts.fixed_point_bits;
    const fixed_point_policy<V> policy{fixed_point_value::with_bits(bits, headroom, &bad), bits};
    const row_buckets b = bucket_rows(threads, p, sizeof(long long));
    sum_tiles(threads, p, out, b, policy);
    first_bad = b.first_bad;
  }
  report(p, first_bad, bad != 0, opts);
}

template <class I, class V>
void run_index_add_ordered(const cpu_backend& cpu, const row_scatter<I, V>& p, V* out, const index_add_options& opts) {
  using namespace cpu_index_add;
  std::int64_t first_bad = -1;
  if (p.rows > 0 && p.cols > 0) {
    const int threads = threads_for(cpu, p.rows, p.cols);
    const row_buckets b = bucket_rows(threads, p, sizeof(default_accumulator_t<V>));
    sum_tiles_ordered(threads, p, out, b);
    first_bad = b.first_bad;
  }
  report(p, first_bad, false, opts);
}

}  // namespace tally::detail
