// Warp-aggregated atomics (Tabaru & Nakahira, seed 003), on Volta+ intrinsics.
//
// Lanes of a warp that update the same address first combine their values
// among themselves, and only one lane per distinct address touches memory:
// 32 lanes on one address make one atomic instead of 32 serialised ones.
// The paper scans every active lane with shuffles (O(32) steps); here lanes
// are grouped by __match_any_sync and each group is scanned in lane order by
// pointer jumping over the group's members (Wyllie's list ranking), which
// takes ceil(log2(largest group)) shuffle steps: 0 when all addresses
// differ, 5 when all 32 lanes agree.
//
// Like the paper's atomicAddW, the value returned to each lane is the one it
// would have seen had the warp's updates run one by one in lane order: the
// group's writer performs old = atomic(addr, v_0 ⊕ ... ⊕ v_k) and lane j gets
// old ⊕ v_0 ⊕ ... ⊕ v_(j-1) (its own value excluded).
//
// Any set of active lanes works (divergent code, partial warps, blocks that
// are not a multiple of 32): the lanes that reach the call together are the
// ones that aggregate (__activemask()).
//
//   atomic_add(addr, v)                      drop-in for atomicAdd
//   aggregated_atomic_update(addr, v, op)    any operator, returns the old value
//   block_aggregated_atomic_update(...)      the paper's figure 4: the whole block
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "tally/core/operators.hpp"
#include "tally/core/types.hpp"
#include "tally/cuda/device/atomic.cuh"
#include "tally/cuda/device/shuffle.cuh"

namespace tally::device {

namespace aggregation_detail {

__device__ __forceinline__ int lane_id() {
  int lane;
  asm("mov.s32 %0, %%laneid;" : "=r"(lane));
  return lane;
}

__device__ __forceinline__ unsigned lanes_below() {
  unsigned mask;
  asm("mov.u32 %0, %%lanemask_lt;" : "=r"(mask));
  return mask;
}

}  // namespace aggregation_detail

/// The lanes of the calling warp that share a key, found with one
/// __match_any_sync. Every lane of `active` must call with its own key.
struct warp_group {
  unsigned active;   ///< the lanes taking part
  unsigned members;  ///< the lanes whose key equals this lane's
  int lane;          ///< this lane
  int writer;        ///< the group's highest lane: it holds the group's total after a scan
  int previous;      ///< the member just below this lane, -1 for the group's first
  __device__ __forceinline__ bool is_writer() const { return lane == writer; }
  __device__ __forceinline__ int size() const { return __popc(members); }
};

/// Groups the lanes of `active` by key (32- or 64-bit integers, or pointers).
/// Pre: every lane in `active` calls this with the same `active`.
template <class Key>
__device__ __forceinline__ warp_group group_by_key(unsigned active, Key key) {
  using namespace aggregation_detail;
  unsigned members;
  if constexpr (std::is_pointer_v<Key>) {
    members = __match_any_sync(active, reinterpret_cast<unsigned long long>(key));
  } else if constexpr (sizeof(Key) == 8) {
    members = __match_any_sync(active, static_cast<unsigned long long>(key));
  } else {
    members = __match_any_sync(active, static_cast<unsigned>(key));
  }
  warp_group g;
  g.active = active;
  g.members = members;
  g.lane = lane_id();
  g.writer = 31 - __clz(members);
  g.previous = 31 - __clz(members & lanes_below());  // __clz(0) = 32 gives -1
  return g;
}

/// Inclusive scan of `value` over the group's members in lane order:
/// returns v_first ⊕ ... ⊕ v_this. The writer gets the group's total.
/// Pre: op associative; all lanes of g.active call together.
template <class T, class Op>
__device__ __forceinline__ T group_inclusive_scan(const warp_group& g, T value, const Op& op) {
  using namespace aggregation_detail;
  // Pointer jumping: after step k each lane holds the fold of the last 2^k
  // members ending at itself, and `back` points 2^k members behind.
  const unsigned largest = __reduce_max_sync(g.active, static_cast<unsigned>(g.size()));
  int back = g.previous;
  for (unsigned span = 1; span < largest; span <<= 1) {
    const int source = back < 0 ? g.lane : back;
    const T earlier = shuffle(value, source, g.active);
    const int further = __shfl_sync(g.active, back, source);
    if (back >= 0) {
      value = op(earlier, value);
      back = further;
    }
  }
  return value;
}

/// Given the scan and the old value the writer's atomic returned, the value
/// this lane would have seen in a lane-order serial execution.
template <class T, class Op>
__device__ __forceinline__ T serial_view(const warp_group& g, const T& inclusive, const T& writer_old,
                                         const Op& op) {
  using namespace aggregation_detail;
  const T old = shuffle(writer_old, g.writer, g.active);
  const T before = shuffle(inclusive, g.previous < 0 ? g.lane : g.previous, g.active);
  return g.previous < 0 ? old : op(old, before);
}

/// Warp-aggregated *addr = op(*addr, value); returns the value this lane
/// would have seen had the warp's updates run one by one in lane order.
/// Pre: as atomic_update (atomic.cuh); op associative and commutative.
/// Post: one atomic per distinct address among the lanes that call together.
template <class T, class Op>
__device__ __forceinline__ T aggregated_atomic_update(T* addr, T value, Op op) {
  const warp_group g = group_by_key(__activemask(), addr);
  const T inclusive = group_inclusive_scan(g, value, op);
  T old{};
  if (g.is_writer()) old = atomic_update(addr, inclusive, op);
  return serial_view(g, inclusive, old, op);
}

/// Drop-in replacement for atomicAdd, warp-aggregated: same arguments, and
/// returns the old value this lane would have seen had the warp's additions
/// run one by one in lane order (as the paper's atomicAddW).
/// T: int32, uint32, int64, uint64, float, double, complex<float>,
/// complex<double>. Pre: addr naturally aligned, in global, shared or
/// distributed shared memory.
/// Post: one hardware atomic per distinct address (complex: one per
/// component, each atomic on its own, like float2 atomicAdd). Floating-point
/// sums are rounded in a different order than one atomicAdd per lane.
template <class T>
__device__ __forceinline__ T atomic_add(T* addr, T value) {
  const warp_group g = group_by_key(__activemask(), addr);
  const T inclusive = group_inclusive_scan(g, value, plus{});
  T old{};
  if (g.is_writer()) old = atomic_add_per_thread(addr, inclusive);
  return serial_view(g, inclusive, old, plus{});
}

// ---------------------------------------------------------------------------
// Block-level aggregation (the paper's figure 4).

/// Shared memory for block_aggregated_atomic_update, for blocks of at most
/// MaxThreads threads. Reusable across calls (the function synchronises).
template <class T, int MaxThreads = 1024>
struct block_atomic_storage {
  T* address[MaxThreads];  ///< per thread: its warp group's address if it is the writer, else null
  T partial[MaxThreads];   ///< writer: its warp group's total; then the block writer's old value
};

/// *addr = op(*addr, value) for every thread of the block, aggregated over
/// the whole block: one atomic per distinct address in the block. Returns the
/// value this thread would have seen had the block's updates run one by one
/// in linear thread order. A thread passing addr == nullptr takes part in the
/// synchronisation but updates nothing (its return value is T{}).
/// Pre: EVERY thread of the block calls this, in the same call site
/// (it contains __syncthreads()); blockDim ≤ MaxThreads; op associative and
/// commutative. Worth it where addresses repeat across warps (few
/// destinations); each writer scans the block's writers, O(blockDim).
template <class T, class Op, int MaxThreads>
__device__ T block_aggregated_atomic_update(T* addr, T value, Op op, block_atomic_storage<T, MaxThreads>& storage) {
  const int threads = blockDim.x * blockDim.y * blockDim.z;
  const int tid = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
  const int warp_first = tid & ~31;
  const int lanes = min(32, threads - warp_first);
  const unsigned warp_lanes = lanes == 32 ? 0xffffffffu : ((1u << lanes) - 1);

  const warp_group g = group_by_key(warp_lanes, addr);
  const T inclusive = group_inclusive_scan(g, value, op);

  __syncthreads();  // the previous call's readers are done with storage
  storage.address[tid] = g.is_writer() ? addr : nullptr;
  storage.partial[tid] = inclusive;
  __syncthreads();

  // Each warp writer folds in the same-address totals of the other warps, in
  // thread order: `before` from lower warps, `after` from higher ones.
  bool is_block_writer = false;
  int block_writer = -1;
  T before{}, block_total{};
  bool has_before = false;
  if (g.is_writer() && addr != nullptr) {
    T after{};
    bool has_after = false;
    for (int j = 0; j < threads; ++j) {
      if ((j & ~31) == warp_first || storage.address[j] != addr) continue;
      if (j < warp_first) {
        if (block_writer < 0) block_writer = j;
        before = has_before ? op(before, storage.partial[j]) : storage.partial[j];
        has_before = true;
      } else {
        after = has_after ? op(after, storage.partial[j]) : storage.partial[j];
        has_after = true;
      }
    }
    is_block_writer = block_writer < 0;
    block_total = has_before ? op(before, inclusive) : inclusive;
    if (has_after) block_total = op(block_total, after);
  }
  __syncthreads();  // every writer has read partial[]
  T old{};
  if (is_block_writer) {
    old = atomic_update(addr, block_total, op);
    storage.partial[tid] = old;
  }
  __syncthreads();
  if (g.is_writer() && addr != nullptr && !is_block_writer) {
    old = storage.partial[block_writer];
    old = op(old, before);  // has_before is true for every non-block writer
  }
  const T view = serial_view(g, inclusive, old, op);
  return addr == nullptr ? T{} : view;
}

}  // namespace tally::device
