/*
** cuda_common.cuh: what every .cu file of the CUDA backend shares: the device
** context's layout, the error-checking macros and small device helpers.
** Included only by the .cu files of kernels/cuda/.
**
** Error handling (STYLE.md): every CUDA runtime call, kernel launch and cuBLAS
** call is checked; a failure sets CDB_DEVICE (CDB_NOMEM for an allocation
** failure, so callers can retry smaller) with the call, file:line and CUDA's
** error string, then jumps to the function's `done:` label. Nothing aborts.
** Functions using the macros declare `cdb_status rc = CDB_OK;` and all their
** locals before the first check (C++ forbids jumping over initializations).
*/
#ifndef CDB_KERNELS_CUDA_COMMON_CUH
#define CDB_KERNELS_CUDA_COMMON_CUH

#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "kernels/cuda/cuda_int.h"

struct cdb_kc_ctx {
    int device;
    cudaStream_t compute; /* every op and synchronous copy */
    void *cublas;         /* cublasHandle_t bound to `compute` */
    void *cublas_ws;      /* cuBLAS workspace (device), cublas_ws_bytes */
    size_t cublas_ws_bytes;
};

#ifdef __cplusplus
extern "C" {
#endif
/* Maps a CUDA error to CDB_NOMEM (allocation) or CDB_DEVICE and records
** "file:line: call: name: string" in cdb_errmsg. Clears the non-sticky error. */
cdb_status cdb_kc_cuda_fail(cudaError_t e, const char *call, const char *file, int line);
/* Same for a cuBLAS status (int: cublasStatus_t). */
cdb_status cdb_kc_cublas_fail(int st, const char *call, const char *file, int line);
/* Creates / destroys the cuBLAS handle of a context (gemm.cu). */
cdb_status cdb_kc_cublas_create(cdb_kc_ctx *c);
void cdb_kc_cublas_destroy(cdb_kc_ctx *c);
#ifdef __cplusplus
}
#endif

#define CDB_CUDA_CHECK(call)                                                   \
    do {                                                                       \
        cudaError_t e_ = (call);                                               \
        if (e_ != cudaSuccess) {                                               \
            rc = cdb_kc_cuda_fail(e_, #call, __FILE__, __LINE__);              \
            goto done;                                                         \
        }                                                                      \
    } while (0)

/* After a <<<>>> launch: configuration errors show up here. */
#define CDB_CUDA_CHECK_LAUNCH(name)                                            \
    do {                                                                       \
        cudaError_t e_ = cudaGetLastError();                                   \
        if (e_ != cudaSuccess) {                                               \
            rc = cdb_kc_cuda_fail(e_, "launch " name, __FILE__, __LINE__);     \
            goto done;                                                         \
        }                                                                      \
    } while (0)

#define CDB_CUDA_CHECK_ARG(cond, ...)                                          \
    do {                                                                       \
        if (!(cond)) {                                                         \
            rc = cdb_seterr(CDB_INVALID, __VA_ARGS__);                         \
            goto done;                                                         \
        }                                                                      \
    } while (0)

static inline unsigned cdb_kc_blocks(size_t n, unsigned threads) {
    size_t b = (n + threads - 1) / threads;
    if (b > 1u << 30) b = 1u << 30;
    return (unsigned)(b ? b : 1);
}

/* The grid of a grid-stride kernel over n items at threads a block: the blocks that cover
** n, at most 65536 (a thread then takes several items). */
static inline unsigned cdb_kc_grid(size_t n, unsigned threads) {
    unsigned b = cdb_kc_blocks(n, threads);
    return b > 65536 ? 65536 : b;
}

/* The grid-stride loop of a kernel: i (size_t) over [0, n), in steps of the whole grid. */
#define CDB_KC_GRID_STRIDE(i, n)                                                    \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n);        \
         i += (size_t)gridDim.x * blockDim.x)

/* fp32 <-> fp16 on the device, bit-exact with kernels/cpu/fp16_scalar.c. */
__device__ static inline float cdb_kc_h2f(uint16_t h) {
    if ((h & 0x7c00u) == 0x7c00u && (h & 0x3ffu)) /* NaN: keep sign and payload exactly */
        return __uint_as_float(((uint32_t)(h & 0x8000u) << 16) | 0x7f800000u |
                               ((uint32_t)(h & 0x3ffu) << 13));
    return __half2float(__ushort_as_half(h));
}

__device__ static inline uint16_t cdb_kc_f2h(float f) {
    uint32_t u = __float_as_uint(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t abs = u & 0x7fffffffu;
    if (abs >= 0x7f800000u) {
        if (abs == 0x7f800000u) return sign | 0x7c00u;
        return sign | 0x7e00u | (uint16_t)((abs >> 13) & 0x3ffu);
    }
    /* finite: the hardware conversion is round-to-nearest-even, as the reference */
    return __half_as_ushort(__float2half_rn(f));
}

/* Load one element of a buffer stored as fp32 (f32 != 0) or f16. */
__device__ static inline float cdb_kc_ld(const void *p, int f32, size_t i) {
    return f32 ? ((const float *)p)[i] : cdb_kc_h2f(((const uint16_t *)p)[i]);
}
__device__ static inline void cdb_kc_st(void *p, int f32, size_t i, float v) {
    if (f32)
        ((float *)p)[i] = v;
    else
        ((uint16_t *)p)[i] = cdb_kc_f2h(v);
}

__device__ static inline float cdb_kc_warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ static inline float cdb_kc_warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

#endif /* CDB_KERNELS_CUDA_COMMON_CUH */
