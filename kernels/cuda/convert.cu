/*
** convert.cu: fp32 <-> fp16 on the device, bit-exact with the scalar reference
** (kernels/cpu/fp16_scalar.c): round to nearest even, overflow to Inf, NaN kept
** quiet with its sign and payload bits.
*/
#include "kernels/cuda/cuda_common.cuh"

/* The two conversions, as functors for k_convert. */
struct to_f16 {
    __device__ uint16_t operator()(float f) const { return cdb_kc_f2h(f); }
};
struct to_f32 {
    __device__ float operator()(uint16_t h) const { return cdb_kc_h2f(h); }
};

/* dst[i] = Cvt()(src[i]) for i < n, grid-stride. */
template <typename Cvt, typename S, typename D>
static __global__ void k_convert(const S *__restrict__ src, D *__restrict__ dst, size_t n) {
    CDB_KC_GRID_STRIDE(i, n)
        dst[i] = Cvt()(src[i]);
}

/* Launches k_convert<Cvt> on the compute stream (256 threads a block, at most 65536
** blocks); a launch error is recorded as `launch` (cdb_kc_cuda_fail). */
template <typename Cvt, typename S, typename D>
static cdb_status convert(cdb_kc_ctx *c, const S *src, D *dst, size_t n, const char *launch) {
    cudaError_t e;
    if (!n) return CDB_OK;
    k_convert<Cvt><<<cdb_kc_grid(n, 256), 256, 0, c->compute>>>(src, dst, n);
    e = cudaGetLastError();
    return e == cudaSuccess ? CDB_OK : cdb_kc_cuda_fail(e, launch, __FILE__, __LINE__);
}

extern "C" cdb_status cdb_kc_f32_to_f16(cdb_kc_ctx *c, const float *src, uint16_t *dst, size_t n) {
    return convert<to_f16>(c, src, dst, n, "launch k_f32_to_f16");
}

extern "C" cdb_status cdb_kc_f16_to_f32(cdb_kc_ctx *c, const uint16_t *src, float *dst, size_t n) {
    return convert<to_f32>(c, src, dst, n, "launch k_f16_to_f32");
}
