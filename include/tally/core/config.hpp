// Annotations that let one definition serve the host and the device.
#pragma once

#if defined(__CUDACC__)
#define TALLY_HD __host__ __device__
#define TALLY_HD_INLINE __host__ __device__ __forceinline__
#else
#define TALLY_HD
#define TALLY_HD_INLINE inline
#endif

/// `#pragma unroll` for loops in host-and-device code: the device compiler
/// unrolls, the host compiler (which warns about the pragma) sees nothing.
#if defined(__CUDA_ARCH__)
#define TALLY_UNROLL _Pragma("unroll")
#else
#define TALLY_UNROLL
#endif
