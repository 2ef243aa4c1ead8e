// Does compute-sanitizer's racecheck survive a CUDA graph with a conditional
// while node? tally's CG graph mode and Himeno's device-side convergence both
// launch one; under racecheck their tests ended the process with SIGSEGV and
// no report, while memcheck and synccheck passed them. This program has
// nothing of tally: a body of two kernels using shared memory, the last one
// ending the loop after 20 iterations, three solves.
//
//   racecheck_conditional_while A   executable graph destroyed right after its launch (as tally does)
//   racecheck_conditional_while B   destroyed after the stream has finished
//   racecheck_conditional_while C   no conditional node: the body's kernels once, in a plain graph
//
// On the lent H100 (CUDA 13.0, 2026-11-25) all three run clean on their own;
// under `compute-sanitizer --tool racecheck` C passes (0 hazards) and A and B
// end with exit code 11 ("process didn't terminate successfully", 0 hazards).
// scripts/gpu-check runs mode B under racecheck before the suite and leaves
// the tests that launch conditional nodes out of racecheck while it crashes.
#include <cstdio>
#include <cstdlib>

#include <cuda_runtime.h>

#define CHECK(x)                                                        \
  do {                                                                  \
    const cudaError_t e = (x);                                          \
    if (e != cudaSuccess) {                                             \
      std::printf("%s: %s\n", #x, cudaGetErrorString(e));               \
      std::exit(1);                                                     \
    }                                                                   \
  } while (0)

// Averages neighbours through shared memory; the last block to finish resets
// the arrival counter and, where `sets`, counts an iteration and sets the
// loop's condition.
__global__ void body_kernel(float* v, unsigned* arrivals, int* iterations, cudaGraphConditionalHandle loop, int sets) {
  __shared__ float tile[256];
  __shared__ int last;
  const int i = blockIdx.x * 256 + threadIdx.x;
  tile[threadIdx.x] = v[i];
  __syncthreads();
  v[i] = 0.5f * (tile[threadIdx.x] + tile[(threadIdx.x + 1) & 255]);
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(arrivals, 1u) + 1 == gridDim.x;
  __syncthreads();
  if (last && threadIdx.x == 0) {
    *arrivals = 0;
    if (sets) cudaGraphSetConditional(loop, ++*iterations < 20 ? 1 : 0);
  }
}

int main(int argc, char** argv) {
  const char mode = argc > 1 ? argv[1][0] : 'A';
  const int blocks = 64;
  float* v = nullptr;
  unsigned* arrivals = nullptr;
  int* iterations = nullptr;
  CHECK(cudaMalloc(&v, blocks * 256 * sizeof(float)));
  CHECK(cudaMemset(v, 0, blocks * 256 * sizeof(float)));
  CHECK(cudaMalloc(&arrivals, sizeof(unsigned)));
  CHECK(cudaMemset(arrivals, 0, sizeof(unsigned)));
  CHECK(cudaMalloc(&iterations, sizeof(int)));
  cudaStream_t stream;
  CHECK(cudaStreamCreate(&stream));
  for (int solve = 0; solve < 3; ++solve) {
    cudaGraph_t graph;
    CHECK(cudaGraphCreate(&graph, 0));
    cudaGraph_t body = graph;
    cudaGraphConditionalHandle loop{};
    if (mode != 'C') {
      CHECK(cudaGraphConditionalHandleCreate(&loop, graph, 1, cudaGraphCondAssignDefault));
      cudaGraphNodeParams params{};
      params.type = cudaGraphNodeTypeConditional;
      params.conditional.handle = loop;
      params.conditional.type = cudaGraphCondTypeWhile;
      params.conditional.size = 1;
      cudaGraphNode_t node;
      CHECK(cudaGraphAddNode(&node, graph, nullptr, nullptr, 0, &params));
      body = params.conditional.phGraph_out[0];
    }
    cudaGraphNode_t previous{};
    for (int k = 0; k < 2; ++k) {
      int sets = mode != 'C' && k == 1;
      void* args[] = {&v, &arrivals, &iterations, &loop, &sets};
      cudaKernelNodeParams kp{};
      kp.func = reinterpret_cast<void*>(body_kernel);
      kp.gridDim = dim3(blocks);
      kp.blockDim = dim3(256);
      kp.kernelParams = args;
      cudaGraphNode_t node;
      CHECK(cudaGraphAddKernelNode(&node, body, k ? &previous : nullptr, k ? 1 : 0, &kp));
      previous = node;
    }
    cudaGraphExec_t exec;
    CHECK(cudaGraphInstantiate(&exec, graph, 0));
    CHECK(cudaGraphDestroy(graph));
    CHECK(cudaMemsetAsync(iterations, 0, sizeof(int), stream));
    CHECK(cudaGraphLaunch(exec, stream));
    if (mode == 'A') CHECK(cudaGraphExecDestroy(exec));
    CHECK(cudaStreamSynchronize(stream));
    if (mode != 'A') CHECK(cudaGraphExecDestroy(exec));
    int done = 0;
    CHECK(cudaMemcpy(&done, iterations, sizeof(int), cudaMemcpyDeviceToHost));
    std::printf("mode %c solve %d: %d iterations\n", mode, solve, done);
    if (done != (mode == 'C' ? 0 : 20)) return 1;
  }
  std::puts("OK");
  return 0;
}
