// Row scatter: out[index[i], :] ⊕= src[i, :] (PyTorch's index_add_ and
// index_reduce_), on either backend (tally::cpu or tally::gpu), with the
// operators of scatter_reduce that apply to floating-point values: plus,
// multiplies, minimum, maximum and make_op operators (on the GPU, sums use
// the hardware's atomic additions, the others compare-and-swap loops).
//
// The GPU backend takes the rows 32 at a time per warp: lanes with equal
// indices are grouped (__match_any_sync), each group's rows are combined in
// registers, and one atomic per (index, column) goes to the output, so a key
// that takes half the rows costs about 1/16 of the atomics of one atomic per
// element (aggregated_atomics). For rows of 32 bytes or more on inputs of
// 16 MB or more it sorts the rows by index
// instead (sorted_rows: a radix sort of the 32-bit keys with the row numbers,
// then each index's rows summed in registers, several narrow rows' tasks a
// warp, and its output row updated once), which reads and writes each output
// row about once rather than once per warp group, and does not slow down
// when a few keys take most rows. plain_atomics, one
// atomic per element, and the other two can be forced through
// options.strategy (for comparisons); options.chosen reports the one that
// ran. A single-column sum (cols == 1, both strides 1, the automatic
// strategy) is a scatter-add, and the GPU runs it as scatter_reduce does
// (histogram.hpp; half and bfloat16 summed in a float copy of out): per-block shared-memory sums where out fits a block,
// else hot_keys -- the keys a sample finds frequent summed in each block's
// shared memory, the rest by global atomics -- so one key taking most rows
// costs no contention; options.chosen then reports shared_memory, hot_keys or
// aggregated_atomics. The CPU backend groups the rows by blocks of output rows
// (in row order) and sums each block's rows in a private, cache-sized buffer
// with no atomics, so its results do not depend on the thread count.
//
// Scratch (GPU, from the workspace: gpu.with(ws), else the stream's; drawn
// once per call): the error words; for sorted_rows 16 bytes a row (keys and
// row numbers, before and after the sort) and the sort's temporary storage;
// for deterministic calls the int64 sums (see index_add). A stream being captured into a CUDA graph never
// grows the workspace (workspace::reserve, workspace.hpp).
//
// The checks and the backends' hooks behind index_add live in core/
// (index_add_calls.hpp, index_add_validate.hpp), cpu/index_add.hpp and
// cuda/index_add.cuh.
#pragma once

#include <cstdint>

#include "tally/core/backend.hpp"
#include "tally/core/error.hpp"
#include "tally/core/index_add_calls.hpp"
#include "tally/core/index_add_options.hpp"
#include "tally/core/operators.hpp"

namespace tally {

/// out[index[i]·out_stride + j] = op(out[index[i]·out_stride + j], src[i·src_stride + j])
/// for every row i < rows and column j < cols; out is accumulated into, never
/// cleared, and only the rows that some index names are written (columns
/// [cols, out_stride) of every row and the rows no index names stay as they
/// were). src_stride and out_stride come from opts (0: cols).
///
/// The deterministic contract in brief (opts.deterministic, op = plus; details
/// below): the same bits on every run, for any grid, on both backends, summed
/// one of two ways (index_add_sums::automatic chooses from sizes alone):
///   - below 16 MB of src, or rows under 32 bytes: fixed-point sums -- every
///     value rounded to a multiple of 2^-s and summed exactly, so the bits do
///     not depend on the order of the rows either, but a value outside the
///     range contract (NaN, ±inf, too large for the scale) is an error;
///   - from 16 MB of src with rows of 32 bytes or more: ordered sums -- float
///     (double for double) sums of fixed pieces of 256 rows, combined by a
///     fixed tree: no range limit and no value errors (NaN and ±inf
///     propagate), and bits that depend on the order of the rows (permute
///     them and the bits may change) but not on the run, grid or backend.
/// opts.deterministic_sums forces either (with the limits below).
///
/// Pre: I is int32 or int64; V is float, double, half or bfloat16; op is
/// tally::plus, multiplies, minimum, maximum or a make_op operator, which
/// must be associative and commutative (the GPU applies rows in any order),
/// take and return the accumulator type (float for half and bfloat16, else
/// V) with identity() its identity, and, for the GPU backend, be callable on
/// the device (a __host__ __device__ function object or lambda). index holds
/// rows indices; src is a rows × cols matrix, out an out_rows × cols matrix,
/// both with the row strides of opts (>= cols), in the backend's memory (GPU:
/// device, managed or pinned memory), out not overlapping src or index.
/// rows == 0 or cols == 0: nothing is read or written (and no pointer is
/// inspected).
///
/// Post (plus, multiplies, make_op operators): float and double rows are
/// combined in their own type; half and bfloat16 in float:
///   - CPU: every output element is op(out, the rows combined in row order),
///     rounded once to V. Results do not depend on the thread count.
///   - GPU aggregated_atomics: the rows of a warp's 32 that share an index are
///     combined in float (double for double) registers, and that result is
///     applied by one atomic per element, which rounds to V (a half or
///     bfloat16 element is rounded once per warp group that reaches it; a
///     group's sum is rounded to V once more before its atomic addition);
///     plain_atomics: one atomic per element, each rounding to V;
///     single-column sums (automatic, unit strides): combined in float
///     (double) by shared-memory or global atomics, and a half or bfloat16
///     element rounded once, out + its total;
///     sorted_rows: each index's rows are combined in float
///     (double) in row order, 256 sorted rows at a time, and each such result
///     is applied once -- rounded once to V with the output element when no
///     other 256 shares its index, else by an atomic.
///   Sums use the hardware's atomic additions; every other operator a
///   compare-and-swap loop on the element (16 bits for half and bfloat16, the
///   operator evaluated in float and rounded once to V per update). GPU
///   results are rounded in an order that depends on timing (for sums,
///   opts.deterministic gives the same bits on every run; products and
///   make_op operators have no such mode). A half or bfloat16 sum added to
///   one element (not 8 at a 16-byte boundary) goes through the element's
///   32-bit word, adding -0 to the other half where that half is an output
///   element too: every value there stays as it was, bit for bit, except that
///   a NaN may come back as another NaN. minimum and maximum are exact (NaN
///   propagates, as tally::minimum/maximum define it), as are products whose
///   partial products are all representable in V.
///
/// Errors (checked mode, the default): every argument is checked before
/// anything is written: null, overlapping or (GPU) host pointers, negative
/// sizes, strides below cols, sizes that overflow the address space, a
/// strategy index_add does not have (shared_memory, cluster_memory, hot_keys: on both
/// backends), a forced sorted_rows on the GPU with rows or out_rows of 2^32 − 1
/// or more, opts.deterministic with an operator other than plus (minimum and
/// maximum need no such mode; products and make_op operators have none). Each is a
/// tally::invalid_argument naming index_add and the argument, and leaves out
/// untouched. An index outside [0, out_rows) is an error found while the call
/// runs: the rows in range are all applied, the others skipped (nothing is
/// written out of bounds), and then the call reports invalid_argument naming
/// the first bad position i and its index -- on both backends, every
/// strategy and in deterministic mode. On the GPU the report reads a flag
/// back, so a checked call waits for the stream, unless opts.errors is given:
/// then the first bad position (-1: none) is left in *opts.errors (device
/// memory) and the call never waits, so it can be captured in a CUDA graph.
/// The unchecked mode never waits and skips bad rows silently.
///
/// opts.deterministic (op = plus): the same bits on every run, for any grid,
/// and on both backends, summed as opts.deterministic_sums says
/// (index_add_sums): ordered sums where the GPU's sort pays for itself
/// (automatic: rows of 32 bytes or more, 16 MB of src or more, no
/// fixed_point_bits given, the strategy automatic or sorted_rows), fixed-point
/// sums otherwise.
///
/// Ordered sums: each element is out + T rounded once to V, T the balanced
/// tree (tree::balanced_fold) over the pieces of its rows: the rows of an
/// index, in row order, cut at every multiple of 256 of their positions among
/// all rows sorted by (index, row), each piece summed left to right in float
/// (double for double). The error is that of a float sum of at most 256
/// terms plus a tree of depth log2(pieces); NaN and ±inf propagate as in any
/// float sum and are not errors; the bits depend on the order of the rows.
/// GPU: the sorted_rows path (its sort and run kernel, at its speed) and two
/// short passes over its tasks; scratch: the sort's and two accumulators per
/// 256 sorted rows and column. Errors (invalid_argument naming the option):
/// ordered with a given fixed_point_bits, with a forced aggregated_atomics or
/// plain_atomics, or with rows >= 2^32 or out_rows >= 2^32 - 1;
/// deterministic_sums other than automatic without deterministic.
///
/// Fixed-point sums: the contract of
/// histogram_options::deterministic for n = rows (the most addends an element
/// can receive): each src value v is rounded to q = round(v·2^s), the q of an
/// element are summed exactly in int64, and the element receives the exact
/// sum q·2^-s rounded once to V (correctly rounded for every V, also half
/// and bfloat16; for double, except below 2^-1022), which is then added to
/// out (one more rounding to V). An element whose integer sum is exactly 0
/// (its values cancelled) keeps its bits, as the elements no row reaches do. The derived scale looks at every src value
/// (rows with a bad index included). The bits are the same on every run, for
/// any order of the rows, grid and strategy, and on both backends. A src
/// value outside the contract (NaN, ±inf, or too large for a given scale) in
/// a row that lands in out counts as 0, the other values are applied, and
/// the call then reports invalid_argument naming 'src' (or sets
/// opts.errors->bad_value); in the unchecked mode it counts as 0 silently
/// (nothing is read back, so the call never waits). GPU scratch: with sorted_rows (chosen for rows of
/// 32 bytes or more), the sort's (16 bytes a row and CUB's storage) and one int64
/// sum per 256 sorted rows and column; otherwise the int64 sums of the
/// elements rows can reach -- out_rows × cols × 8 bytes plus 4 per output
/// row, or, when it is smaller, rows × cols × 8 bytes plus 8 per output row --
/// or, for a single-column sum run as scatter_reduce, out_rows × 8 bytes and
/// what its strategy draws (a block's rows, the hot-key table) -- drawn from the workspace (workspace.hpp: it
/// refuses to grow while its stream is captured).
template <class Backend, class I, class V, class Op = plus>
void index_add(const Backend& backend, const I* index, const V* src, std::int64_t rows, std::int64_t cols, V* out,
               std::int64_t out_rows, Op op = {}, const index_add_options& opts = {}) {
  detail::run_index_add(backend, index, src, rows, cols, out, out_rows, op, opts);
}

}  // namespace tally
