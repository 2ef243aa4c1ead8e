// The CG kernels. Every phase of the iteration (detail/cg_rows.hpp) runs over
// aligned chunks of rows and leaves one partial sum per chunk; the tree over
// the partials gives the phase's reductions, and detail/cg_control.hpp turns
// them into the next step. Two ways to run the phases:
//
//  * persistent: one cooperative kernel runs the whole solve. After each
//    phase a grid-wide barrier; then every block reduces the partials itself
//    (the same tree, so the same bits in every block) and takes the same
//    decision, so no second barrier is needed to broadcast it. Two barriers
//    an iteration (search; update), a third only when the true residual is
//    recomputed. The new search direction p = z + β·p is not stored before
//    the product A·p: each row recomputes it for the columns it reads (the
//    same bits as the owner's), so the direction update needs no barrier;
//    except in a large CSR problem, where reading each neighbour's once is
//    worth a barrier (kStoredDirectionsRows).
//  * graph: one kernel per phase, one chunk per block; the last block to
//    finish (a counter, not an atomic on values) reduces the partials and
//    updates the control block in global memory. A stencil's search first
//    stages the new directions its chunk reads in shared memory
//    (cg_stencil_window.cuh), or a 27-point one marches through planes
//    (cg_stencil_march.cuh) and leaves p·Ap to a sums kernel whose blocks
//    only store partials: every block of the update then takes the
//    search's root itself, as the persistent kernel's blocks do. The
//    kernels of a step check the control block and do nothing once the
//    solve is over (or while a true residual waits for the body's end), so
//    a CUDA graph can loop over them on the device (cuda/cg.cuh).
#pragma once

#include <cstdint>

#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include "tally/core/tree.hpp"
#include "tally/cuda/device/vector_load.cuh"
#include "tally/solvers/cuda/cg_advance_x.cuh"
#include "tally/solvers/cuda/cg_staging.cuh"
#include "tally/solvers/cuda/cg_stencil_march.cuh"
#include "tally/solvers/cuda/cg_stencil_window.cuh"
#include "tally/solvers/cuda/cg_tree.cuh"
#include "tally/solvers/detail/cg_control.hpp"
#include "tally/solvers/detail/cg_rows.hpp"
#include "tally/solvers/stencil.hpp"

namespace tally::solvers::kernels {

using detail::cg_control;
using detail::cg_phase;
using detail::cg_vectors;
using detail::residual_sums;
using detail::search_sums;
using detail::pipelined_sums;
using detail::update_sums;

/// What the solve leaves in device memory for the caller.
struct cg_device_result {
  std::int64_t iterations;
  int status;  ///< a cg_status
  double relative_residual;
  double rhs_norm;
};

/// Scratch of one solve, in device memory.
template <class T>
struct cg_scratch {
  cg_control<T>* control;          ///< graph mode: the solve's scalar state
  residual_sums<T>* residual_partials;
  search_sums<T>* search_partials;
  update_sums<T>* update_partials;
  pipelined_sums<T>* pipelined_partials;
  search_sums<T>* search_leaves;   ///< graph mode's march: p·Ap of each vector of kV rows (its tree leaf)
  /// Graph mode's march where chunks have at least kV passes: p·Ap of each
  /// aligned group of kMarchGroup vectors that march_group_walk finds inside (the
  /// others' vectors in search_leaves); null otherwise.
  search_sums<T>* search_groups;
  unsigned* arrivals;              ///< graph mode: blocks done with the current kernel; zero at rest
  std::int64_t chunks;             ///< partials per phase
  int passes;                      ///< kThreads-row passes per chunk
};

/// Reads of vectors written earlier in the solve. Persistent: plain loads
/// (other blocks wrote them in this kernel, before a grid-wide barrier, whose
/// acquire makes their writes visible to plain loads, through L1 too; the
/// non-coherent read-only path would not be covered). Plain loads keep a
/// row's 27 neighbour reads in L1: through L2 (__ldcg) they made the
/// persistent search L2-bound (282 µs an iteration at g = 128, matrix-free).
/// Graph: through the read-only cache (they do not change during the kernel).
template <bool Persistent>
struct fresh_read {
  template <class T>
  __device__ __forceinline__ T operator()(const T* p) const {
    if constexpr (Persistent) return *p;
    else return __ldg(p);
  }
};

/// Runs `leaf` over the rows of chunk c (leaf(i, view), with the operator's
/// view from `rows`; or vector_leaf over kV<T> rows at once, see chunk_tree)
/// and stores the chunk's value.
template <class T, class S, class Rows, class Leaf, class VectorLeaf = no_vector_leaf>
__device__ __forceinline__ void chunk_phase(std::int64_t c, const cg_scratch<T>& s, std::int64_t n, S* partials,
                                            const Rows& rows, const Leaf& leaf, block_storage<S>& storage,
                                            const VectorLeaf& vector_leaf = {}) {
  const std::int64_t chunk_rows = static_cast<std::int64_t>(kThreads) * s.passes;
  const auto value =
      chunk_tree<kV<T>, S>(c * chunk_rows, s.passes, n, rows, leaf, detail::add_sums{}, storage, vector_leaf);
  if (threadIdx.x == 0) partials[c] = value.value;  // every chunk holds a row, so the value is never empty
}

template <class Op>
inline constexpr bool is_stencil = false;
template <class V>
inline constexpr bool is_stencil<stencil_operator<V>> = true;

// The phases' row functions. `a` is the operator as a warp's stager gives it
// for the rows at hand (the operator itself, or a CSR matrix's staged rows).
template <bool Persistent, class T>
struct phases {
  const cg_vectors<T>& v;
  const cg_control<T>& control;

  template <class A>
  __device__ residual_sums<T> setup(const A& a, std::int64_t i) const {
    if (control.pipelined) return detail::pipelined_setup_row(a, v, i, control.jacobi, fresh_read<Persistent>{});
    return detail::setup_row(a, v, i, control.jacobi, fresh_read<Persistent>{});
  }
  /// The new search direction at row j: z_j + β·p_j, p from buffer `from`.
  /// A stencil's update stores no z (its M⁻¹ is one constant): z_j is
  /// recomputed from r_j as the update computed it, the same bits, so the
  /// update moves 24 bytes a row instead of 32 and the search reads r where
  /// it read z.
  template <class A>
  __device__ __forceinline__ T direction_at(const A&, const T* from, std::int64_t j) const {
    const fresh_read<Persistent> fresh;
    if constexpr (is_stencil<A>)
      return detail::stencil_direction_value(control.constant_dinv, fresh(v.r + j), fresh(from + j), control.beta);
    else return detail::direction(v, from, j, control.beta, fresh);
  }
  template <class A>
  __device__ search_sums<T> search(const A& a, std::int64_t i) const {
    const T* from = v.direction(control.searches);
    T* to = v.direction(control.searches + 1);
    const T p_i = direction_at(a, from, i);
    to[i] = p_i;
    return detail::search_row(a, v, i, p_i, [&](std::int64_t j) { return direction_at(a, from, j); });
  }
  /// Stores the new directions p = z + β·p of rows [begin, end) (begin a
  /// multiple of kV<T>) into the buffer the search writes, a vector at a time.
  /// A CSR search then reads each neighbour's direction once (search_stored)
  /// instead of recomputing it from z and the old p: one gather and no
  /// arithmetic a term instead of two gathers and two operations. The same
  /// bits (direction_value either way).
  __device__ void store_directions(std::int64_t begin, std::int64_t end) const {
    constexpr int V = kV<T>;
    const T* from = v.direction(control.searches);
    T* to = v.direction(control.searches + 1);
    const T beta = control.beta;
    std::int64_t i0 = begin + static_cast<std::int64_t>(threadIdx.x) * V;
    for (; i0 + V <= end; i0 += static_cast<std::int64_t>(kThreads) * V) {
      const auto zv = device::load_vector<T, V, true, !Persistent>(v.z + i0);
      const auto pv = device::load_vector<T, V, true, !Persistent>(from + i0);
      device::vector_of<T, V> w;
#pragma unroll
      for (int t = 0; t < V; ++t) w.v[t] = detail::direction_value(zv.v[t], pv.v[t], beta);
      device::store_vector<T, V, true>(to + i0, w);
    }
    for (std::int64_t i = i0; i < end && i < i0 + V; ++i)
      to[i] = detail::direction(v, from, i, beta, fresh_read<Persistent>{});
  }
  /// search() once store_directions has stored every row's new direction
  /// (and a barrier or a kernel boundary has passed): the neighbours' read.
  template <class A>
  __device__ search_sums<T> search_stored(const A& a, std::int64_t i) const {
    const fresh_read<Persistent> fresh;
    const T* to = v.direction(control.searches + 1);
    return detail::search_row(a, v, i, fresh(to + i), [&](std::int64_t j) { return fresh(to + j); });
  }
  /// search() of the kV<T> rows from i0 (all below n; i0 a multiple of
  /// kV<T>), their leaves folded in row order. A 27-point stencil's rows
  /// that share a grid line read each neighbour's new direction once for all
  /// of them, a line at a time (kV + 2 values for kV rows instead of 3 a row),
  /// and sum their terms through stencil_operator::add_line, as lines_row
  /// does: the same bits. Lines outside the grid (the y and z faces) are left
  /// out, as lines_row leaves them out: a face row takes this path too, so
  /// that the warp that holds it is not the block's slowest (through the
  /// general row loop, ~10 times the work, it held every other warp of its
  /// block at the chunk's barrier). Other rows take search() one by one.
  ///
  /// When g is a multiple of kV (warp-uniform), every line's window starts
  /// on a vector: its kV middle values are read as two 16-byte loads (r and
  /// p), and its ends are the neighbouring lanes' values, by shuffles (lanes
  /// 0 and 31 read theirs). Scalar loads strided by kV would make the L1 look
  /// up kV times as many lines. Every lane takes part in the shuffles.
  template <class A>
  __device__ search_sums<T> search_vector(const A& a, std::int64_t i0) const {
    constexpr int V = kV<T>;
    using vec = device::vector_of<T, V>;
    std::int64_t x0, y, z;
    a.coordinates(i0, x0, y, z);
    const bool lined = a.points == 27 && x0 + V <= a.g;  // the kV rows share a grid line
    const bool whole = a.g % V == 0;
    const fresh_read<Persistent> fresh;
    const T* from = v.direction(control.searches);
    const T beta = control.beta;
    auto direction = [&](std::int64_t j) { return direction_at(a, from, j); };
    const bool left = x0 > 0, right = x0 + V < a.g;
    const auto lines = a.lines_inside(y, z);
    const int lane = threadIdx.x & 31;
    vec p{}, ap;
#pragma unroll
    for (int k = 0; k < V; ++k) ap.v[k] = a.template sum_start<T>();
    if (lined) {  // warp-uniform when whole (the shuffles' condition): x0 + kV <= g always
#pragma unroll
      for (int line = 0; line < 9; ++line) {
        // A line outside the grid reads the rows' own line and is not added
        // (see lines_row): the reads need no condition.
        const bool inside = lines(line);
        const std::int64_t j0 = i0 + (inside ? a.line_offset(line) : 0);
        T w[V + 2];  // the new direction at x0 − 1 .. x0 + V on this line
        if (whole) {
          // Persistent: plain loads, as fresh_read says; graph: read-only.
          // z = M⁻¹·r (see direction_at).
          const vec rv = device::load_vector<T, V, true, !Persistent>(v.r + j0);
          const vec pv = device::load_vector<T, V, true, !Persistent>(from + j0);
#pragma unroll
          for (int t = 0; t < V; ++t)
            w[t + 1] = detail::stencil_direction_value(control.constant_dinv, rv.v[t], pv.v[t], beta);
          // x0 − 1 ends lane − 1's vector, x0 + V starts lane + 1's, when
          // they are on this row's grid line (x0 is a multiple of V).
          const T before = __shfl_up_sync(device::kFullMask, w[V], 1);
          const T after = __shfl_down_sync(device::kFullMask, w[1], 1);
          w[0] = lane > 0 ? before : (left ? direction(j0 - 1) : T(0));
          w[V + 1] = lane < 31 ? after : (right ? direction(j0 + V) : T(0));
        } else {
          w[0] = left ? direction(j0 - 1) : T(0);
#pragma unroll
          for (int t = 0; t < V; ++t) w[t + 1] = direction(j0 + t);
          w[V + 1] = right ? direction(j0 + V) : T(0);
        }
#pragma unroll
        for (int k = 0; k < V; ++k) {
          const T sum = a.add_line(ap.v[k], line, k > 0 || left, k + 1 < V || right, w[k], w[k + 1], w[k + 2]);
          ap.v[k] = inside ? sum : ap.v[k];
        }
        if (line == 4) {  // always inside the grid
#pragma unroll
          for (int k = 0; k < V; ++k) p.v[k] = w[k + 1];
        }
      }
    }
    if (!lined) return fold_rows(i0, [&](std::int64_t i) { return search(a, i); });
    return store_search_vectors(i0, p, ap);
  }
  /// row(i0) ⊕ … ⊕ row(i0 + kV − 1), left to right: the tree's vector.
  template <class Row>
  __device__ __forceinline__ search_sums<T> fold_rows(std::int64_t i0, const Row& row) const {
    search_sums<T> acc = row(i0);
#pragma unroll
    for (int k = 1; k < kV<T>; ++k) acc = acc + row(i0 + k);
    return acc;
  }
  /// Stores the new directions and products of the kV<T> rows from i0 (a
  /// multiple of kV<T>: the scratch vectors are aligned there) and returns
  /// their leaves folded left to right.
  __device__ __forceinline__ search_sums<T> store_search_vectors(std::int64_t i0, const device::vector_of<T, kV<T>>& p,
                                                                 const device::vector_of<T, kV<T>>& ap) const {
    device::store_vector<T, kV<T>, true>(v.direction(control.searches + 1) + i0, p);
    device::store_vector<T, kV<T>, true>(v.ap + i0, ap);
    search_sums<T> acc{detail::multiply_rounded(p.v[0], ap.v[0])};
#pragma unroll
    for (int k = 1; k < kV<T>; ++k) acc = acc + search_sums<T>{detail::multiply_rounded(p.v[k], ap.v[k])};
    return acc;
  }
  /// The search's several-rows-a-lane leaf: stencils only (a CSR matrix's
  /// rows are staged 32 at a time, one a lane).
  template <class A>
  __device__ auto search_vector_leaf(const A& a) const {
    if constexpr (is_stencil<A>) return [this, &a](std::int64_t i0) { return search_vector(a, i0); };
    else return no_vector_leaf{};
  }
  /// search() of a stencil's row i, the new directions read from `window`
  /// (staged for the chunk that holds i): the same bits.
  template <class Value>
  __device__ search_sums<T> search_staged(const stencil_operator<Value>& a, const stencil_window<T>& window,
                                          std::int64_t i) const {
    const T p_i = window(i);
    v.direction(control.searches + 1)[i] = p_i;
    const T ap = window.product(a, i);
    v.ap[i] = ap;
    return {detail::multiply_rounded(p_i, ap)};
  }
  /// search_staged() of the kV<T> rows from i0 (a multiple of kV<T>, all
  /// below n; g a multiple of kV<T>), their leaves folded in row order (the
  /// tree's vector): 27-point rows a vector at a time, 7-point ones row by row.
  template <class Value>
  __device__ search_sums<T> search_staged_vector(const stencil_operator<Value>& a, const stencil_window<T>& window,
                                                 std::int64_t i0) const {
    constexpr int V = kV<T>;
    device::vector_of<T, V> p, ap;
    if (!window.line_products(a, i0, p, ap))
      return fold_rows(i0, [&](std::int64_t i) { return search_staged(a, window, i); });
    return store_search_vectors(i0, p, ap);
  }
  // After the search phase `searches` was incremented: the new p is p[searches & 1].
  /// The update of row i. A stencil's takes M⁻¹ from the control block and
  /// stores no z (see direction_at), as update_vector does.
  template <class A>
  __device__ update_sums<T> update(const A&, std::int64_t i) const {
    const T* p = v.direction(control.searches);
    if constexpr (is_stencil<A>) {
      T r = v.r[i], z;
      const update_sums<T> sums =
          detail::update_residual_values(r, z, v.ap[i], control.constant_dinv, control.alpha);
      if (!control.lag_x) v.x[i] = detail::advanced_x(v.x[i], p[i], control.alpha);  // else the next search's
      v.r[i] = r;
      return sums;
    } else {
      return detail::update_row(v, p, i, control.alpha);
    }
  }
  /// update() of the kV<T> rows from i0 (all below n; i0 a multiple of kV<T>),
  /// their leaves folded in row order; vectors moved whole (x too when the
  /// caller's x is aligned). A stencil's diagonal is one constant, and so is
  /// M⁻¹: not read from dinv (the value the set-up stored there, so the same
  /// bits), and z not stored (see direction_at): 24 bytes a row, not 32; 12
  /// where x lags (control.lag_x: the next search adds α·p to it).
  template <class A>
  __device__ update_sums<T> update_vector(const A&, std::int64_t i0) const {
    constexpr int V = kV<T>;
    // Plain loads throughout: x and r are rewritten in this kernel, and in the
    // persistent one p and Ap were written by other blocks (see fresh_read).
    auto r = device::load_vector<T, V, true, false>(v.r + i0);
    const auto ap = device::load_vector<T, V, true, false>(v.ap + i0);
    device::vector_of<T, V> dinv;
    if constexpr (is_stencil<A>) {
#pragma unroll
      for (int k = 0; k < V; ++k) dinv.v[k] = control.constant_dinv;
    } else {
      dinv = device::load_vector<T, V, true, false>(v.dinv + i0);
    }
    if (!is_stencil<A> || !control.lag_x)  // block-uniform
      advance_x_vector(v.x + i0, device::load_vector<T, V, true, false>(v.direction(control.searches) + i0),
                       control.alpha, device::vector_aligned<T, V>(v.x));
    device::vector_of<T, V> z;
    update_sums<T> acc = detail::update_residual_values(r.v[0], z.v[0], ap.v[0], dinv.v[0], control.alpha);
#pragma unroll
    for (int k = 1; k < V; ++k)
      acc = acc + detail::update_residual_values(r.v[k], z.v[k], ap.v[k], dinv.v[k], control.alpha);
    device::store_vector<T, V, true>(v.r + i0, r);
    if constexpr (!is_stencil<A>) device::store_vector<T, V, true>(v.z + i0, z);  // a stencil's search recomputes it
    return acc;
  }
  /// x_j as it is: where x lags (control.x_behind), advanced as the next
  /// search will advance it, so the same bits as an x brought up to date.
  __device__ __forceinline__ T current_x(std::int64_t j) const {
    const fresh_read<Persistent> fresh;
    const T x = fresh(v.x + j);
    return control.x_behind ? detail::advanced_x(x, fresh(v.direction(control.searches) + j), control.alpha) : x;
  }
  /// The true residual of row i, of the current x (current_x).
  template <class A>
  __device__ residual_sums<T> true_residual(const A& a, std::int64_t i) const {
    return detail::true_residual_row(a, v, i, [&](std::int64_t j) { return current_x(j); });
  }
  // Pipelined CG.
  template <class A>
  __device__ search_sums<T> restart(const A& a, std::int64_t i) const {
    return detail::restart_row(a, v, i, fresh_read<Persistent>{});
  }
  template <class A>
  __device__ pipelined_sums<T> gather(const A& a, std::int64_t i) const {
    return detail::gather_row(a, v, i, fresh_read<Persistent>{});
  }
  __device__ search_sums<T> vectors(std::int64_t i) const { return detail::vectors_row(v, i, control.alpha, control.beta); }
};

/// The block's dynamic shared memory: the CSR stagers' buffers
/// (staging_bytes<Op>(kThreads)), or a graph-mode stencil search's window
/// (stencil_window_bytes; cg_window_memory is the same memory).
extern __shared__ __align__(16) unsigned char cg_staging_memory[];

/// The graph mode's search phase over chunk c. A stencil's rows read their
/// neighbours' new directions from a window of them staged in the block's
/// dynamic shared memory (cg_stencil_window.cuh: stencil_window_bytes for
/// the chunk). The persistent kernel, which runs the problems that sit in L2
/// and L1, reads them straight from the vectors (search_vector), which
/// measured faster there (H100, f32, µs an iteration with the window against
/// without: g = 31 11.5 / 9.8, g = 64 22.1 / 17.7, g = 128 88.5 / 86.9; in the
/// graph mode g = 128 102 / 107, g = 200 272 / 321). A CSR matrix's rows go
/// through the warps' stagers (`matrix`). Pre: the whole block calls it.
template <class T, class Op>
__device__ __forceinline__ void graph_search_chunk(std::int64_t c, const Op& A, const phases<false, T>& rows,
                                                   const cg_scratch<T>& s, const warp_rows<Op>& matrix,
                                                   block_storage<search_sums<T>>& storage) {
  if constexpr (is_stencil<Op>) {
    const std::int64_t chunk_rows = static_cast<std::int64_t>(kThreads) * s.passes;
    const auto window =
        stage_stencil_window(A, rows.v, rows.v.direction(rows.control.searches), rows.control.beta,
                             rows.control.constant_dinv, c * chunk_rows, chunk_rows);
    const auto leaf = [&](std::int64_t i, int) { return rows.search_staged(A, window, i); };
    // Whole vectors (block-uniform): kV<T> rows a lane where the chunk allows.
    if (A.g % kV<T> == 0)
      chunk_phase(c, s, rows.v.n, s.search_partials, no_rows{}, leaf, storage,
                  [&](std::int64_t i0) { return rows.search_staged_vector(A, window, i0); });
    else chunk_phase(c, s, rows.v.n, s.search_partials, no_rows{}, leaf, storage);
  } else {
    chunk_phase(c, s, rows.v.n, s.search_partials, matrix,
                [&](std::int64_t i, const auto& a) { return rows.search(a, i); }, storage);
  }
}

/// Shared memory of the kernels: the control block (a copy per block in the
/// persistent kernel) and the reductions' storage. Raw bytes: __shared__
/// variables cannot have constructors.
template <class T>
struct shared_state {
  alignas(cg_control<T>) unsigned char control_bytes[sizeof(cg_control<T>)];
  union {
    block_storage<residual_sums<T>> residual;
    block_storage<search_sums<T>> search;
    block_storage<update_sums<T>> update;
    block_storage<pipelined_sums<T>> pipelined;
  } storage;
  __device__ cg_control<T>& control() { return *reinterpret_cast<cg_control<T>*>(control_bytes); }
};

/// A graph-mode kernel's start: the control block the previous kernel wrote,
/// into `control` (this block's shared copy); returns whether this kernel's
/// phase runs now (Final: the last true residual). A kernel that does not
/// run still sets the device loop's condition where `sets_handle` (block 0).
/// Pre: the whole block calls it.
template <cg_phase Phase, bool Final, class T>
__device__ __forceinline__ bool graph_phase_begins(cg_control<T>& control, const cg_scratch<T>& s,
                                                   cudaGraphConditionalHandle handle, bool sets_handle) {
  if (threadIdx.x == 0) control = *s.control;  // the previous kernel wrote it
  __syncthreads();
  const bool active = Final ? control.needs_final_residual() : control.next == Phase;
  if (!active) {
    if (sets_handle && blockIdx.x == 0 && threadIdx.x == 0)
      cudaGraphSetConditional(handle, control.next != cg_phase::done);
  }
  return active;
}

/// After a phase: the root of its `partials` partials (a phase that reduces;
/// one a chunk, or each the aligned subtree of a group of chunks) and, in
/// thread 0, the decision (cg_control's after_*) in
/// `control`. Pre: the whole block calls it, after every block stored its
/// partials (a grid barrier or the last arrival since).
template <cg_phase Phase, class T>
__device__ __forceinline__ void decide_after(cg_control<T>& control, const cg_scratch<T>& s, shared_state<T>& sh,
                                             std::int64_t partials) {
  if constexpr (Phase == cg_phase::search) {
    const auto root = root_tree(s.search_partials, partials, detail::add_sums{}, sh.storage.search);
    if (threadIdx.x == 0) control.after_search(root.value);
  } else if constexpr (Phase == cg_phase::update) {
    const auto root = root_tree(s.update_partials, partials, detail::add_sums{}, sh.storage.update);
    if (threadIdx.x == 0) control.after_update(root.value);
  } else if constexpr (Phase == cg_phase::true_residual) {
    const auto root = root_tree(s.residual_partials, partials, detail::add_sums{}, sh.storage.residual);
    if (threadIdx.x == 0) control.after_true_residual(root.value);
  } else if constexpr (Phase == cg_phase::gather) {
    const auto root = root_tree(s.pipelined_partials, partials, detail::add_sums{}, sh.storage.pipelined);
    if (threadIdx.x == 0) control.after_gather(root.value);
  } else if constexpr (Phase == cg_phase::restart) {
    if (threadIdx.x == 0) control.after_restart();
  } else {
    if (threadIdx.x == 0) control.after_vectors();
  }
}

/// In the last block of a graph-mode kernel to arrive, once `control` holds
/// the decision: the control block for the next kernel, the arrivals back to
/// zero, and the device loop's condition where `sets_handle` (thread 0).
template <class T>
__device__ __forceinline__ void graph_phase_publishes(const cg_control<T>& control, const cg_scratch<T>& s,
                                                      cudaGraphConditionalHandle handle, bool sets_handle) {
  if (threadIdx.x == 0) {
    *s.control = control;
    *s.arrivals = 0;
    if (sets_handle) cudaGraphSetConditional(handle, control.next != cg_phase::done);
  }
}

/// A graph-mode phase's end, in the last block to arrive: decide_after over
/// `partials` partials, then graph_phase_publishes. Pre: the whole block
/// calls it, after every block stored its partials.
template <cg_phase Phase, class T>
__device__ __forceinline__ void graph_phase_ends(cg_control<T>& control, const cg_scratch<T>& s, shared_state<T>& sh,
                                                 cudaGraphConditionalHandle handle, bool sets_handle,
                                                 std::int64_t partials) {
  decide_after<Phase>(control, s, sh, partials);
  graph_phase_publishes(control, s, handle, sets_handle);
}

/// Blocks of the persistent kernel an SM should hold: its registers capped so
/// that 3 fit for float (125 registers a thread left 2, 25 % occupancy, and
/// the solve latency-bound: measured at g = 128); double keeps 2, where the
/// cap would spill.
template <class T>
inline constexpr int kPersistentBlocksPerSm = sizeof(T) == 4 ? 3 : 2;

/// Blocks of a graph-mode phase kernel an SM should hold. Stencils: 4, which
/// caps the search at 64 registers (96 uncapped: two blocks an SM, and the
/// kernel latency-bound). H100, 27-point, graph mode, `tally bench cg`, µs an
/// iteration: f32 g = 128 129 → 106, g = 200 377 → 319; f64 g = 128 204 →
/// 164. CSR phases stage 64 KiB of rows a block, so at most 3 fit anyway,
/// and capping them at 64 registers was slower (g = 200: 1143 against 1072).
/// (The persistent kernel at 4 blocks for float: 64 registers and ~1 KiB of
/// spills, the same 93 µs at g = 128.)
template <class Op>
inline constexpr int kPhaseBlocksPerSm = is_stencil<Op> ? 4 : 1;

/// Rows from which the persistent kernel's CSR search stores the new
/// directions before the product (phases::store_directions), at the price of
/// a third grid barrier an iteration. H100, 27-point, f32, µs an iteration
/// (bench/results/h100-2026-11-26-cg-csr-directions-ab.json): g = 31 12.2 →
/// 13.3 and g = 64 (262 144 rows) 50.7 → 52.1, where the vectors sit in L1 and
/// L2 and the barrier costs more than the second gather; g = 128 (2.1 M rows)
/// 281 → 262, g = 200 1219 → 1056. (In the graph mode a kernel of its own for
/// the directions made g = 64 and 128 slower, 71 → 84 and 310 → 328, and
/// g = 200 1073 → 1058: not taken there.)
inline constexpr std::int64_t kStoredDirectionsRows = std::int64_t{1} << 20;

/// The solve as one cooperative kernel. Pre: launched cooperatively with
/// kThreads threads and gridDim.x <= s.chunks blocks, all co-resident;
/// `initial` made by cg_control::make. Post: x, the history (block 0 writes
/// it) and *result hold the outcome.
template <class T, class Op>
__global__ void __launch_bounds__(kThreads, kPersistentBlocksPerSm<T>) cg_persistent_kernel(const Op A, const cg_vectors<T> v,
                                                                 const cg_control<T> initial, const cg_scratch<T> s,
                                                                 cg_device_result* result) {
  namespace cgx = cooperative_groups;
  const cgx::grid_group grid = cgx::this_grid();
  __shared__ shared_state<T> sh;
  cg_control<T>& control = sh.control();
  if (threadIdx.x == 0) {
    control = initial;
    if (blockIdx.x != 0) control.history = nullptr;  // one writer
  }
  __syncthreads();
  const phases<true, T> rows{v, control};
  const warp_rows<Op> matrix(A, cg_staging_memory);
  const no_rows vectors_only;
  const std::int64_t n = v.n;

  // Each phase: this block's chunks, the barrier, then the root in every block.
  auto run_residual = [&](bool setup) {
    for (std::int64_t c = blockIdx.x; c < s.chunks; c += gridDim.x) {
      if (setup)
        chunk_phase(c, s, n, s.residual_partials, matrix,
                    [&](std::int64_t i, const auto& a) { return rows.setup(a, i); }, sh.storage.residual);
      else
        chunk_phase(c, s, n, s.residual_partials, matrix,
                    [&](std::int64_t i, const auto& a) { return rows.true_residual(a, i); }, sh.storage.residual);
    }
    grid.sync();
    const auto root = root_tree(s.residual_partials, s.chunks, detail::add_sums{}, sh.storage.residual);
    if (threadIdx.x == 0) {
      if (setup) control.start(root.value);
      else control.after_true_residual(root.value);
    }
    __syncthreads();
  };

  run_residual(true);
  if (control.status == cg_status::converged && control.bnorm == 0) {
    for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(kThreads) + threadIdx.x; i < n;
         i += static_cast<std::int64_t>(gridDim.x) * kThreads)
      v.x[i] = T(0);
  }
  while (control.next != cg_phase::done) {
    if (control.next == cg_phase::search) {
      bool stored = false;  // a large CSR problem's directions first (kStoredDirectionsRows)
      if constexpr (!is_stencil<Op>) {
        if (n >= kStoredDirectionsRows) {
          const std::int64_t chunk_rows = static_cast<std::int64_t>(kThreads) * s.passes;
          for (std::int64_t c = blockIdx.x; c < s.chunks; c += gridDim.x)
            rows.store_directions(c * chunk_rows, (c + 1) * chunk_rows < n ? (c + 1) * chunk_rows : n);
          grid.sync();
          stored = true;
        }
      }
      for (std::int64_t c = blockIdx.x; c < s.chunks; c += gridDim.x) {
        if (stored)
          chunk_phase(c, s, n, s.search_partials, matrix,
                      [&](std::int64_t i, const auto& a) { return rows.search_stored(a, i); }, sh.storage.search);
        else
          chunk_phase(c, s, n, s.search_partials, matrix,
                      [&](std::int64_t i, const auto& a) { return rows.search(a, i); }, sh.storage.search,
                      rows.search_vector_leaf(A));
      }
      grid.sync();
      decide_after<cg_phase::search>(control, s, sh, s.chunks);
      __syncthreads();
    } else if (control.next == cg_phase::update) {
      for (std::int64_t c = blockIdx.x; c < s.chunks; c += gridDim.x)
        chunk_phase(c, s, n, s.update_partials, vectors_only, [&](std::int64_t i, int) { return rows.update(A, i); },
                    sh.storage.update, [&](std::int64_t i0) { return rows.update_vector(A, i0); });
      grid.sync();
      decide_after<cg_phase::update>(control, s, sh, s.chunks);
      __syncthreads();
    } else if (control.next == cg_phase::true_residual) {
      run_residual(false);
    } else if (control.next == cg_phase::gather) {  // pipelined: the one reduction of an iteration
      for (std::int64_t c = blockIdx.x; c < s.chunks; c += gridDim.x)
        chunk_phase(c, s, n, s.pipelined_partials, matrix,
                    [&](std::int64_t i, const auto& a) { return rows.gather(a, i); }, sh.storage.pipelined);
      grid.sync();
      decide_after<cg_phase::gather>(control, s, sh, s.chunks);
      __syncthreads();
    } else {  // pipelined restart or vectors: no reduction, only the barrier before the next gather
      const bool restart = control.next == cg_phase::restart;
      for (std::int64_t c = blockIdx.x; c < s.chunks; c += gridDim.x) {
        const std::int64_t rows_per_chunk = static_cast<std::int64_t>(kThreads) * s.passes;
        for (std::int64_t i = c * rows_per_chunk + threadIdx.x; i < (c + 1) * rows_per_chunk && i < n; i += kThreads) {
          if (restart) rows.restart(A, i);
          else rows.vectors(i);
        }
      }
      grid.sync();
      if (threadIdx.x == 0) {
        if (restart) control.after_restart();
        else control.after_vectors();
      }
      __syncthreads();
    }
  }
  if (control.needs_final_residual()) run_residual(false);
  if (blockIdx.x == 0 && threadIdx.x == 0)
    *result = {control.iterations, static_cast<int>(control.status), control.relative_residual(), control.bnorm};
}

/// Graph mode, set-up: copies `initial` into s.control (block 0, before any
/// block reads it: the next kernel). One chunk per block.
template <class T, class Op>
__global__ void __launch_bounds__(kThreads) cg_setup_kernel(const Op A, const cg_vectors<T> v,
                                                            const cg_control<T> initial, const cg_scratch<T> s);

/// Graph mode, one phase over one chunk per block (the true residual: any
/// grid, its blocks striding over the chunks), the last block reducing. The
/// update has a kernel of its own (cg_update_groups_kernel). Does nothing
/// unless the control block says this phase is next (or, for Final, that the
/// final residual is needed). `sets_handle`: the kernel that sets the
/// device-side loop's condition (the last of a loop body).
template <cg_phase Phase, bool Final, class T, class Op>
__global__ void __launch_bounds__(kThreads, kPhaseBlocksPerSm<Op>)
    cg_phase_kernel(const Op A, const cg_vectors<T> v, const cg_scratch<T> s, cudaGraphConditionalHandle handle,
                    bool sets_handle);

/// The graph mode's search of a 27-point stencil, marching through planes
/// (march_unit, one unit a block), its products and new directions stored;
/// no reduction (cg_search_sums_kernel follows). p·Ap by leaves: where
/// s.search_groups is set, each aligned group of kMarchGroup vectors inside
/// one tile's plane as one leaf (the balanced tree over its vectors' leaves,
/// from shared memory once the plane is done), the other vectors' leaves
/// one by one in s.search_leaves; else every vector's. Does nothing unless
/// the control block says the search is next. Pre: launched with m.blocks
/// blocks of kThreads threads and march_bytes<T>(g, m) of dynamic shared
/// memory; marches<T>(A); m from make_march_shape<T>. Post: p, Ap and the
/// leaves stored.
template <class T, class Value>
__global__ void __launch_bounds__(kThreads, kPhaseBlocksPerSm<stencil_operator<Value>>)
    cg_march_kernel(const stencil_operator<Value> A, const cg_vectors<T> v, const cg_scratch<T> s,
                    const march_shape m) {
  constexpr int V = kV<T>;
  __shared__ shared_state<T> sh;
  __shared__ search_sums<T> plane_leaves[2][kThreads];  // a plane's leaves by thread, two planes in turn
  cg_control<T>& control = sh.control();
  if (!graph_phase_begins<cg_phase::search, false>(control, s, cudaGraphConditionalHandle{}, false)) return;
  const phases<false, T> rows{v, control};
  const bool grouped = s.search_groups != nullptr;
  // Plane z's leaves go to buffer z & 1; a thread emits for planes z0, z0 + 1, ... in turn.
  int buffer = static_cast<int>(((blockIdx.x / m.tiles) * m.planes) & 1);
  march_unit(
      A, v, control, m, blockIdx.x,
      [&](std::int64_t i0, const device::vector_of<T, V>& own, const device::vector_of<T, V>& products) {
        const auto leaf = rows.store_search_vectors(i0, own, products);
        if (grouped) plane_leaves[buffer][threadIdx.x] = leaf;
        else s.search_leaves[i0 / V] = leaf;
        buffer ^= 1;
      },
      [&](std::int64_t z) {
        // Thread t holds vector t of the tile's plane (march_unit's layout),
        // `held` of them in the grid: the groups among them whole (what
        // march_group_walk says of them) as one leaf, the others' vectors
        // one by one.
        const std::int64_t y0 = (blockIdx.x % m.tiles) * m.lines;
        const int held = static_cast<int>(std::min<std::int64_t>(m.lines, A.g - y0)) * m.per_line;
        const int t = static_cast<int>(threadIdx.x);
        if (!grouped || t >= held) return;
        const std::int64_t vector = (z * A.g * A.g + y0 * A.g) / V + t;
        const int offset = static_cast<int>(vector % kMarchGroup), start = t - offset;
        const search_sums<T>* leaves = plane_leaves[z & 1];
        if (start < 0 || start + kMarchGroup > held) {
          s.search_leaves[vector] = leaves[t];
        } else if (offset == 0) {
          search_sums<T> values[kMarchGroup];
#pragma unroll
          for (int k = 0; k < kMarchGroup; ++k) values[k] = leaves[t + k];
          s.search_groups[vector / kMarchGroup] = group_tree(values, kMarchGroup, kMarchGroup, detail::add_sums{});
        }
      });
}

/// Blocks of cg_search_sums_kernel: a chunk a warp where chunks have at
/// least kV passes (the march's group leaves), else a chunk a block.
template <class T>
constexpr std::int64_t search_sums_blocks(std::int64_t chunks, int passes) {
  return passes >= kV<T> ? (chunks + kWarps - 1) / kWarps : chunks;
}

/// Graph mode, after cg_march_kernel (tiles of `lines` grid lines): p·Ap's
/// partials from the leaves it stored, one a block, for the update's blocks
/// to take the root (cg_update_groups_kernel): the search phase's tree over
/// the same vectors, so its bits. Chunks of at
/// least kV passes a warp each, from the groups' leaves (s.search_groups,
/// its vectors' leaves for a group march_group_walk finds outside), 8
/// chunks a block; fewer passes a block each, from the vectors' leaves.
/// Does nothing unless the control block says the search is next. Pre:
/// launched with search_sums_blocks<T> blocks of kThreads threads; Op a
/// stencil.
template <class T, class Op>
__global__ void __launch_bounds__(kThreads, kPhaseBlocksPerSm<Op>)
    cg_search_sums_kernel(const Op A, const cg_vectors<T> v, const cg_scratch<T> s, cudaGraphConditionalHandle handle,
                          bool sets_handle, int lines);

/// Graph mode, the end: zero x when b = 0, else add the α·p x still lacks
/// where it lags (control.x_behind); write *result.
template <class T>
__global__ void cg_result_kernel(const cg_vectors<T> v, const cg_scratch<T> s, cg_device_result* result) {
  const cg_control<T>& control = *s.control;
  const bool zero = control.status == cg_status::converged && control.bnorm == 0;
  if (zero || control.x_behind) {
    const phases<false, T> rows{v, control};
    for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < v.n;
         i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
      v.x[i] = zero ? T(0) : rows.current_x(i);  // each thread reads only the element it writes
  }
  if (blockIdx.x == 0 && threadIdx.x == 0)
    *result = {control.iterations, static_cast<int>(control.status), control.relative_residual(), control.bnorm};
}

/// The last block of a graph-mode kernel to arrive: true in every thread of
/// that block. Pre: every block calls it once, after thread 0 wrote the
/// block's partial (the one value the last block reads; the vectors the
/// other threads wrote are for the next kernel, which the kernel boundary
/// orders). Only thread 0 fences: a fence in every thread made each wait
/// for its own vector stores to complete before the block could retire.
__device__ __forceinline__ bool last_to_arrive(unsigned* arrivals, unsigned blocks) {
  __shared__ int last;
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();  // this block's partial before its arrival
    last = atomicAdd(arrivals, 1u) + 1 == blocks;
    if (last) __threadfence();  // the arrivals before reading the partials
  }
  __syncthreads();
  return last != 0;
}

template <class T, class Op>
__global__ void __launch_bounds__(kThreads) cg_setup_kernel(const Op A, const cg_vectors<T> v,
                                                            const cg_control<T> initial, const cg_scratch<T> s) {
  __shared__ shared_state<T> sh;
  const phases<false, T> rows{v, initial};
  const warp_rows<Op> matrix(A, cg_staging_memory);
  chunk_phase(blockIdx.x, s, v.n, s.residual_partials, matrix,
              [&](std::int64_t i, const auto& a) { return rows.setup(a, i); }, sh.storage.residual);
  if (!last_to_arrive(s.arrivals, gridDim.x)) return;
  const auto root = root_tree(s.residual_partials, s.chunks, detail::add_sums{}, sh.storage.residual);
  if (threadIdx.x == 0) {
    cg_control<T> control = initial;
    control.start(root.value);
    *s.control = control;
    *s.arrivals = 0;
  }
}

template <cg_phase Phase, bool Final, class T, class Op>
__global__ void __launch_bounds__(kThreads, kPhaseBlocksPerSm<Op>)
    cg_phase_kernel(const Op A, const cg_vectors<T> v, const cg_scratch<T> s, cudaGraphConditionalHandle handle,
                    bool sets_handle) {
  static_assert(Phase != cg_phase::update, "the graph mode's update is cg_update_groups_kernel");
  __shared__ shared_state<T> sh;
  cg_control<T>& control = sh.control();
  if (!graph_phase_begins<Phase, Final>(control, s, handle, sets_handle)) return;
  const phases<false, T> rows{v, control};
  const warp_rows<Op> matrix(A, cg_staging_memory);
  if constexpr (Phase == cg_phase::search) {
    graph_search_chunk(blockIdx.x, A, rows, s, matrix, sh.storage.search);
  } else if constexpr (Phase == cg_phase::true_residual) {
    // Any grid, its blocks striding over the chunks: the loop's copy, which
    // runs once in many iterations, launches fewer blocks to find it has
    // nothing to do.
    for (std::int64_t c = blockIdx.x; c < s.chunks; c += gridDim.x)
      chunk_phase(c, s, v.n, s.residual_partials, matrix,
                  [&](std::int64_t i, const auto& a) { return rows.true_residual(a, i); }, sh.storage.residual);
  } else if constexpr (Phase == cg_phase::gather) {
    chunk_phase(blockIdx.x, s, v.n, s.pipelined_partials, matrix,
                [&](std::int64_t i, const auto& a) { return rows.gather(a, i); }, sh.storage.pipelined);
  } else {  // restart, vectors: no reduction
    const std::int64_t rows_per_chunk = static_cast<std::int64_t>(kThreads) * s.passes;
    for (std::int64_t i = blockIdx.x * rows_per_chunk + threadIdx.x; i < (blockIdx.x + 1) * rows_per_chunk && i < v.n;
         i += kThreads) {
      if constexpr (Phase == cg_phase::restart) rows.restart(A, i);
      else rows.vectors(i);
    }
  }
  if (!last_to_arrive(s.arrivals, gridDim.x)) return;
  graph_phase_ends<Phase>(control, s, sh, handle, sets_handle, s.chunks);
}

template <class T, class Op>
__global__ void __launch_bounds__(kThreads, kPhaseBlocksPerSm<Op>)
    cg_search_sums_kernel(const Op A, const cg_vectors<T> v, const cg_scratch<T> s, cudaGraphConditionalHandle handle,
                          bool sets_handle, int lines) {
  constexpr int V = kV<T>;
  __shared__ shared_state<T> sh;
  cg_control<T>& control = sh.control();
  if (!graph_phase_begins<cg_phase::search, false>(control, s, handle, sets_handle)) return;
  const std::int64_t vectors = v.n / V;  // n is a multiple of kV under the march
  if (s.passes >= V) {
    // Block b: chunks 8b .. 8b + 7, a warp each. A chunk's vectors, in
    // aligned groups of kMarchGroup: lane l takes `per_lane` consecutive
    // groups; each group's leaf is the march's where it stored one, else the
    // balanced tree over its vectors' leaves (those in the grid: a prefix);
    // then the lane's groups by the balanced tree and the 32 lanes' values by
    // the shuffle tree: chunk_tree's balanced tree over the chunk's vectors,
    // an empty suffix skipped (the last chunk). The chunks' balanced tree (an
    // aligned subtree of the root's tree) is block b's partial.
    constexpr int kMaxGroupsPerLane = 32 / V;  // passes <= 32
    const std::int64_t chunk_vectors = static_cast<std::int64_t>(kThreads) * s.passes / V;
    const int per_lane = static_cast<int>(chunk_vectors / kMarchGroup / 32);  // a power of two >= 1
    const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x & 31);
    const std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * kWarps + warp;
    __shared__ search_sums<T> chunk_values[kWarps];
    if (c < s.chunks) {  // warp-uniform
      const std::int64_t first_group = c * chunk_vectors / kMarchGroup + static_cast<std::int64_t>(lane) * per_lane;
      // This lane's groups with a vector in the grid (a prefix of its per_lane).
      const std::int64_t in_grid = (vectors + kMarchGroup - 1) / kMarchGroup - first_group;
      const int present = static_cast<int>(std::clamp<std::int64_t>(in_grid, 0, per_lane));
      march_group_walk<T> walk(first_group, A.g, lines, vectors);
      const auto group_leaf = [&](int k) {  // called for k = 0, 1, ... in turn
        const std::int64_t first = (first_group + k) * kMarchGroup;
        const bool inside = walk.inside();
        walk.next();
        if (inside) return load_cg(s.search_groups + first / kMarchGroup);
        const int count = static_cast<int>(std::min<std::int64_t>(kMarchGroup, vectors - first));
        return prefix_tree<kMarchGroup, search_sums<T>>(
            count, [&](int j) { return load_cg(s.search_leaves + first + j); }, detail::add_sums{});
      };
      const search_sums<T> mine =
          prefix_tree<kMaxGroupsPerLane, search_sums<T>>(present, group_leaf, detail::add_sums{});
      const search_sums<T> value = warp_lanes_tree(mine, 32, detail::add_sums{}, [&](int l) {
        return (c * chunk_vectors / kMarchGroup + static_cast<std::int64_t>(l) * per_lane) * kMarchGroup < vectors;
      });
      if (lane == 0) chunk_values[warp] = value;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      const std::int64_t left = s.chunks - static_cast<std::int64_t>(blockIdx.x) * kWarps;
      const int present = left < kWarps ? static_cast<int>(left) : kWarps;  // the chunks that exist: a prefix
      s.search_partials[blockIdx.x] = group_tree(chunk_values, kWarps, present, detail::add_sums{});
    }
    return;  // the update's blocks take the root (cg_update_groups_kernel)
  }
  // The chunk's vectors' leaves, through chunk_tree's vector leaf: the same
  // tree over them, a leaf read for kV rows. Rows of a last chunk that is not
  // full, one at a time: the first row of a vector gives its leaf, the others
  // −0, which the fold adds without changing a bit.
  chunk_phase(
      blockIdx.x, s, v.n, s.search_partials, no_rows{},
      [&](std::int64_t i, int) { return i % V == 0 ? load_cg(s.search_leaves + i / V) : search_sums<T>{-T(0)}; },
      sh.storage.search, [&](std::int64_t i0) { return load_cg(s.search_leaves + i0 / V); });
}

/// The most chunks of the graph mode's grouped update a block takes (cg_update_groups_kernel).
inline constexpr int kMaxUpdateGroup = 8;

/// Graph mode, the update phase with `group` consecutive chunks a block:
/// block b updates chunks group·b .. group·b + group − 1 (those that exist)
/// in turn and stores their balanced tree, an aligned subtree of the root's
/// tree, as partial b; the last block to arrive takes the root over the
/// blocks' partials: the same tree as over the chunks', with 1/group of the
/// values to read in its tail. Where `search_partials` > 0 (after
/// cg_search_sums_kernel, whose blocks only store their partials), every
/// block first takes the search's root over those partials and its decision
/// (after_search: the same tree and the same decision in every block, as in
/// the persistent kernel), so that no block of the sums kernel waits for the
/// others; on a breakdown the blocks update nothing and the last to arrive
/// records it. Else the control block has the search's decision. Does
/// nothing unless the control block says this update (or its search's root)
/// is next. Pre: `group` a power of two <= kMaxUpdateGroup; launched with
/// ceil(s.chunks / group) blocks of kThreads threads.
template <class T, class Op>
__global__ void __launch_bounds__(kThreads, kPhaseBlocksPerSm<Op>)
    cg_update_groups_kernel(const Op A, const cg_vectors<T> v, const cg_scratch<T> s,
                            cudaGraphConditionalHandle handle, bool sets_handle, int group,
                            std::int64_t search_partials) {
  __shared__ shared_state<T> sh;
  cg_control<T>& control = sh.control();
  if (search_partials > 0) {
    if (!graph_phase_begins<cg_phase::search, false>(control, s, handle, sets_handle)) return;
    decide_after<cg_phase::search>(control, s, sh, search_partials);
    __syncthreads();
    if (control.next != cg_phase::update) {  // block-uniform: a breakdown, recorded by the last to arrive
      if (last_to_arrive(s.arrivals, gridDim.x)) graph_phase_publishes(control, s, handle, sets_handle);
      return;
    }
  } else if (!graph_phase_begins<cg_phase::update, false>(control, s, handle, sets_handle)) {
    return;
  }
  const phases<false, T> rows{v, control};
  const std::int64_t chunk_rows = static_cast<std::int64_t>(kThreads) * s.passes;
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * group;
  const std::int64_t left = s.chunks - first;
  const int present = left < group ? static_cast<int>(left) : group;  // a prefix of the group
  __shared__ update_sums<T> values[kMaxUpdateGroup];
#pragma unroll 1
  for (int k = 0; k < present; ++k) {  // block-uniform
    const auto value = chunk_tree<kV<T>, update_sums<T>>(
        (first + k) * chunk_rows, s.passes, v.n, no_rows{}, [&](std::int64_t i, int) { return rows.update(A, i); },
        detail::add_sums{}, sh.storage.update, [&](std::int64_t i0) { return rows.update_vector(A, i0); });
    if (threadIdx.x == 0) values[k] = value.value;  // thread 0's is the chunk's
  }
  if (threadIdx.x == 0) s.update_partials[blockIdx.x] = group_tree(values, group, present, detail::add_sums{});
  if (!last_to_arrive(s.arrivals, gridDim.x)) return;
  graph_phase_ends<cg_phase::update>(control, s, sh, handle, sets_handle, gridDim.x);
}

}  // namespace tally::solvers::kernels
