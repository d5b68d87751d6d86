/*
** bias_act.cu: the elementwise epilogues: y = act(y + bias) (QuickGELU, exact
** GELU, tanh-approximated GELU, ReLU) and residual adds, all computed in fp32 whatever the storage.
*/
#include "kernels/cuda/cuda_common.cuh"

static __device__ __forceinline__ float apply_act(float v, int act) {
    if (act == CDB_K_ACT_QUICK_GELU) return v / (1.f + expf(-1.702f * v));
    if (act == CDB_K_ACT_GELU) return 0.5f * v * (1.f + erff(v * 0.70710678118654752f));
    if (act == CDB_K_ACT_RELU) return v < 0.f ? 0.f : v; /* NaN compares false: kept */
    if (act == CDB_K_ACT_GELU_TANH) /* 0.5 v (1 + tanh(u)) written as v * sigmoid(2u) */
        return v / (1.f + expf(-1.5957691216057308f * (v + 0.044715f * v * v * v)));
    return v;
}

static __global__ void k_bias_act(void *y, int y_f32, const float *__restrict__ bias, size_t n,
                                  int cols, int act) {
    CDB_KC_GRID_STRIDE(i, n) {
        float v = cdb_kc_ld(y, y_f32, i);
        if (bias) v += bias[i % cols];
        cdb_kc_st(y, y_f32, i, apply_act(v, act));
    }
}

/* Vectorized common case: f16 storage, even column count (two halves per thread). */
static __global__ void k_bias_act_h2(__half2 *y, const float *__restrict__ bias, size_t n2,
                                     int cols2, int act) {
    CDB_KC_GRID_STRIDE(i, n2) {
        float2 v = __half22float2(y[i]);
        if (bias) {
            size_t c = (i % cols2) * 2;
            v.x += bias[c];
            v.y += bias[c + 1];
        }
        v.x = apply_act(v.x, act);
        v.y = apply_act(v.y, act);
        y[i] = __floats2half2_rn(v.x, v.y);
    }
}

static __global__ void k_add(void *y, int y_f32, const void *x, int x_f32, size_t n) {
    CDB_KC_GRID_STRIDE(i, n)
        cdb_kc_st(y, y_f32, i, cdb_kc_ld(y, y_f32, i) + cdb_kc_ld(x, x_f32, i));
}

static __global__ void k_add_bias_f32(float *y, const float *__restrict__ bias, size_t n, int cols) {
    CDB_KC_GRID_STRIDE(i, n)
        y[i] += bias[i % cols];
}

extern "C" cdb_status cdb_kc_bias_act(cdb_kc_ctx *c, void *y, int y_f32, const float *bias,
                                      int rows, int cols, cdb_k_act act) {
    cdb_status rc = CDB_OK;
    size_t n = (size_t)rows * cols;
    if (!n || (!bias && act == CDB_K_ACT_NONE)) return CDB_OK;
    if (!y_f32 && cols % 2 == 0 && ((uintptr_t)y & 3) == 0) {
        k_bias_act_h2<<<cdb_kc_grid(n / 2, 256), 256, 0, c->compute>>>((__half2 *)y, bias, n / 2,
                                                                        cols / 2, (int)act);
        CDB_CUDA_CHECK_LAUNCH("k_bias_act_h2");
    } else {
        k_bias_act<<<cdb_kc_grid(n, 256), 256, 0, c->compute>>>(y, y_f32, bias, n, cols, (int)act);
        CDB_CUDA_CHECK_LAUNCH("k_bias_act");
    }
done:
    return rc;
}

extern "C" cdb_status cdb_kc_add(cdb_kc_ctx *c, void *y, int y_f32, const void *x, int x_f32,
                                 size_t n) {
    cdb_status rc = CDB_OK;
    if (!n) return CDB_OK;
    k_add<<<cdb_kc_grid(n, 256), 256, 0, c->compute>>>(y, y_f32, x, x_f32, n);
    CDB_CUDA_CHECK_LAUNCH("k_add");
done:
    return rc;
}

extern "C" cdb_status cdb_kc_add_bias_f32(cdb_kc_ctx *c, float *y, const float *bias, int rows,
                                          int cols) {
    cdb_status rc = CDB_OK;
    size_t n = (size_t)rows * cols;
    if (!n || !bias) return CDB_OK;
    k_add_bias_f32<<<cdb_kc_grid(n, 256), 256, 0, c->compute>>>(y, bias, n, cols);
    CDB_CUDA_CHECK_LAUNCH("k_add_bias_f32");
done:
    return rc;
}
