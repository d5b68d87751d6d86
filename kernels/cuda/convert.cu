/*
** convert.cu: fp32 <-> fp16 on the device, bit-exact with the scalar reference
** (kernels/cpu/fp16_scalar.c): round to nearest even, overflow to Inf, NaN kept
** quiet with its sign and payload bits.
*/
#include "kernels/cuda/cuda_common.cuh"

static __global__ void k_f32_to_f16(const float *__restrict__ src, uint16_t *__restrict__ dst,
                                    size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        dst[i] = cdb_kc_f2h(src[i]);
}

static __global__ void k_f16_to_f32(const uint16_t *__restrict__ src, float *__restrict__ dst,
                                    size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        dst[i] = cdb_kc_h2f(src[i]);
}

extern "C" cdb_status cdb_kc_f32_to_f16(cdb_kc_ctx *c, const float *src, uint16_t *dst, size_t n) {
    cdb_status rc = CDB_OK;
    if (!n) return CDB_OK;
    k_f32_to_f16<<<cdb_kc_blocks(n, 256) > 65536 ? 65536 : cdb_kc_blocks(n, 256), 256, 0,
                   c->compute>>>(src, dst, n);
    CDB_CUDA_CHECK_LAUNCH("k_f32_to_f16");
done:
    return rc;
}

extern "C" cdb_status cdb_kc_f16_to_f32(cdb_kc_ctx *c, const uint16_t *src, float *dst, size_t n) {
    cdb_status rc = CDB_OK;
    if (!n) return CDB_OK;
    k_f16_to_f32<<<cdb_kc_blocks(n, 256) > 65536 ? 65536 : cdb_kc_blocks(n, 256), 256, 0,
                   c->compute>>>(src, dst, n);
    CDB_CUDA_CHECK_LAUNCH("k_f16_to_f32");
done:
    return rc;
}
