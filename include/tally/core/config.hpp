// Annotations that let one definition serve the host and the device.
#pragma once

#if defined(__CUDACC__)
#define TALLY_HD __host__ __device__
#define TALLY_HD_INLINE __host__ __device__ __forceinline__
#else
#define TALLY_HD
#define TALLY_HD_INLINE inline
#endif
