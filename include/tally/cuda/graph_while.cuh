// A conditional while node, as CG's graph mode and Himeno's device-side
// convergence build their loops (CUDA 12.4+, with the graph API rather than
// by stream capture, so that the graph runs on any stream).
#pragma once

#include <cstddef>

#include <cuda_runtime.h>

#include "tally/cuda/check.cuh"

namespace tally::detail {

/// Adds a conditional while node to `graph` after the `count` nodes at
/// `dependencies`; its condition is created with default 1, assigned at
/// every launch of the graph, so the body runs at least once and every
/// replay of the graph starts the loop afresh. *handle receives the
/// condition (which a kernel of the body sets through
/// cudaGraphSetConditional), *node the while node. Returns the body graph,
/// empty and owned by the node. Throws cuda_error when a call fails.
inline cudaGraph_t add_while_node(cudaGraph_t graph, const cudaGraphNode_t* dependencies, std::size_t count,
                                  cudaGraphConditionalHandle* handle, cudaGraphNode_t* node) {
  TALLY_CUDA(cudaGraphConditionalHandleCreate(handle, graph, 1, cudaGraphCondAssignDefault));
  cudaGraphNodeParams params{};
  params.type = cudaGraphNodeTypeConditional;
  params.conditional.handle = *handle;
  params.conditional.type = cudaGraphCondTypeWhile;
  params.conditional.size = 1;
  TALLY_CUDA(cudaGraphAddNode(node, graph, dependencies, nullptr, count, &params));
  return params.conditional.phGraph_out[0];
}

}  // namespace tally::detail
