// Do compute-sanitizer's racecheck and synccheck survive a CUDA graph with a
// conditional while node? tally's CG graph mode and Himeno's device-side
// convergence both launch one. This program has nothing of tally: a body of two
// kernels using shared memory and block barriers, the last block of each
// counting an iteration, 20 iterations, three solves.
//
//   sanitizer_conditional_while MODE [BLOCKS THREADS [FLAGS]]   (default 64 blocks of 256 threads)
//   MODE A   executable graph destroyed right after its launch (as tally once did)
//   MODE B   destroyed after the stream has finished (as tally does)
//   MODE C   no conditional node: 22 of the body's kernels in a plain graph
//   FLAGS    as Himeno's sweep kernel: p = griddepcontrol.wait / launch_dependents
//            first; s = the loop ends through a stop flag in memory, which thread 0
//            reads into shared memory before a barrier, every block returning once
//            it is set (block 0 then clears the condition)
//
// Every mode, shape and flag runs clean on its own (lent H100, CUDA 13.0; 21
// of 21 runs). racecheck: C passes (0 hazards); B (2026-11-26, plain and with
// ps at 464 × 128) and A (2026-11-25, before the flags) end the process with
// exit code 11 and no report, as racecheck did with tally's conditional-node
// tests. synccheck (2026-11-26): C passes (6 of 6 runs); B
// fails in some runs and not in others, with or without flags, at either shape
// (9 of 15: the program's stream synchronisation reports "an illegal memory
// access", and the tool 0 errors). tally's Himeno test under the while node
// failed under synccheck too, differently from run to run: every thread
// reported "divergent thread(s) in warp" at the kernel's first barrier (which
// thread 0's branch reconverges before), or an overflow of tracked barriers
// and a launch failure; its replayed twin, the same kernels in a plain graph,
// passes. scripts/gpu-check runs mode B under racecheck and synccheck before
// the suite, and leaves the tests that launch conditional nodes out of the
// tool while the repro fails under it.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <cuda_runtime.h>

#define CHECK(x)                                                        \
  do {                                                                  \
    const cudaError_t e = (x);                                          \
    if (e != cudaSuccess) {                                             \
      std::printf("%s: %s\n", #x, cudaGetErrorString(e));               \
      std::exit(1);                                                     \
    }                                                                   \
  } while (0)

constexpr int kIterations = 20;

// Averages neighbours through shared memory; the last block to finish resets
// the arrival counter, counts an iteration and, where `sets`, sets the loop's
// condition (with `stop_flag`, it also raises *stop at the last iteration).
__global__ void body_kernel(float* v, unsigned* arrivals, int* iterations, unsigned* stop,
                            cudaGraphConditionalHandle loop, int conditional, int sets, int pdl, int stop_flag) {
  __shared__ float tile[1024];
  __shared__ int last;
  __shared__ unsigned stopped;
  if (pdl) asm volatile("griddepcontrol.wait;" ::: "memory");
  if (stop_flag) {
    if (threadIdx.x == 0) stopped = *reinterpret_cast<volatile unsigned*>(stop);
    __syncthreads();
    if (stopped != 0) {
      if (conditional && blockIdx.x == 0 && threadIdx.x == 0) cudaGraphSetConditional(loop, 0);
      return;
    }
  }
  if (pdl) asm volatile("griddepcontrol.launch_dependents;");
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  tile[threadIdx.x] = v[i];
  __syncthreads();
  v[i] = 0.5f * (tile[threadIdx.x] + tile[(threadIdx.x + 1) % blockDim.x]);
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(arrivals, 1u) + 1 == gridDim.x;
  __syncthreads();
  if (last && threadIdx.x == 0) {
    *arrivals = 0;
    const int done = ++*iterations;
    if (stop_flag && done >= kIterations) *stop = 1;
    if (conditional && sets) cudaGraphSetConditional(loop, done < kIterations ? 1 : 0);
  }
}

int main(int argc, char** argv) {
  const char mode = argc > 1 ? argv[1][0] : 'A';
  const int blocks = argc > 2 ? std::atoi(argv[2]) : 64;
  const int threads = argc > 3 ? std::atoi(argv[3]) : 256;
  const char* flags = argc > 4 ? argv[4] : "";
  if ((mode != 'A' && mode != 'B' && mode != 'C') || blocks < 1 || threads < 1 || threads > 1024) {
    std::puts("usage: sanitizer_conditional_while A|B|C [BLOCKS THREADS<=1024 [FLAGS p, s]]");
    return 2;
  }
  int pdl = std::strchr(flags, 'p') != nullptr, stop_flag = std::strchr(flags, 's') != nullptr;
  int conditional = mode != 'C';
  const std::size_t bytes = static_cast<std::size_t>(blocks) * threads * sizeof(float);
  float* v = nullptr;
  unsigned* arrivals = nullptr;
  int* iterations = nullptr;
  unsigned* stop = nullptr;
  CHECK(cudaMalloc(&v, bytes));
  CHECK(cudaMemset(v, 0, bytes));
  CHECK(cudaMalloc(&arrivals, sizeof(unsigned)));
  CHECK(cudaMemset(arrivals, 0, sizeof(unsigned)));
  CHECK(cudaMalloc(&iterations, sizeof(int)));
  CHECK(cudaMalloc(&stop, sizeof(unsigned)));
  cudaStream_t stream;
  CHECK(cudaStreamCreate(&stream));
  for (int solve = 0; solve < 3; ++solve) {
    cudaGraph_t graph;
    CHECK(cudaGraphCreate(&graph, 0));
    cudaGraph_t body = graph;
    cudaGraphConditionalHandle loop{};
    int kernels = kIterations + 2;  // C: without a stop flag, 22 iterations
    if (conditional) {
      CHECK(cudaGraphConditionalHandleCreate(&loop, graph, 1, cudaGraphCondAssignDefault));
      cudaGraphNodeParams params{};
      params.type = cudaGraphNodeTypeConditional;
      params.conditional.handle = loop;
      params.conditional.type = cudaGraphCondTypeWhile;
      params.conditional.size = 1;
      cudaGraphNode_t node;
      CHECK(cudaGraphAddNode(&node, graph, nullptr, nullptr, 0, &params));
      body = params.conditional.phGraph_out[0];
      kernels = 2;
    }
    cudaGraphNode_t previous{};
    for (int k = 0; k < kernels; ++k) {
      int sets = k == 1;
      void* args[] = {&v, &arrivals, &iterations, &stop, &loop, &conditional, &sets, &pdl, &stop_flag};
      cudaKernelNodeParams kp{};
      kp.func = reinterpret_cast<void*>(body_kernel);
      kp.gridDim = dim3(blocks);
      kp.blockDim = dim3(threads);
      kp.kernelParams = args;
      cudaGraphNode_t node;
      CHECK(cudaGraphAddKernelNode(&node, body, k ? &previous : nullptr, k ? 1 : 0, &kp));
      previous = node;
    }
    cudaGraphExec_t exec;
    CHECK(cudaGraphInstantiate(&exec, graph, 0));
    CHECK(cudaGraphDestroy(graph));
    CHECK(cudaMemsetAsync(iterations, 0, sizeof(int), stream));
    CHECK(cudaMemsetAsync(stop, 0, sizeof(unsigned), stream));
    CHECK(cudaGraphLaunch(exec, stream));
    if (mode == 'A') CHECK(cudaGraphExecDestroy(exec));
    CHECK(cudaStreamSynchronize(stream));
    if (mode != 'A') CHECK(cudaGraphExecDestroy(exec));
    int done = 0;
    CHECK(cudaMemcpy(&done, iterations, sizeof(int), cudaMemcpyDeviceToHost));
    std::printf("mode %c, %d blocks of %d, flags '%s', solve %d: %d iterations\n", mode, blocks, threads, flags, solve,
                done);
    const int expected = conditional || stop_flag ? kIterations : kIterations + 2;
    if (done != expected) return 1;
  }
  std::puts("OK");
  return 0;
}
