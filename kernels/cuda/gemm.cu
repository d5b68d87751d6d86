/*
** gemm.cu: GEMMs through cuBLAS (cublasGemmEx / cublasGemmStridedBatchedEx, fp16
** operands, CUBLAS_COMPUTE_32F: fp32 accumulation on tensor cores), and the
** run-time loading of cuBLAS itself.
**
** Why dlopen and not a link: the binary must start on machines with no CUDA
** libraries (CPU-only users of the same build). A shared link to libcublas would
** stop it at load time; the static cuBLAS/cuBLASLt archives are not shipped by
** the toolkit we build with and, where they exist, add hundreds of MB and
** minutes of link time to every executable linking cdb_kernels (all tests).
** dlopen costs a table of eight function pointers. The library is looked up as
** $CLIPDB_CUBLAS (a path), then libcublas.so.<major of the headers> on the
** loader's path, then the toolkit's and PyTorch-wheel's usual folders
** (cdb_dynlib_open, dynlib.c, says which attempts failed and how).
*/
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_api.h>

#include "kernels/cuda/cuda_common.cuh"

typedef cublasStatus_t (*pf_create)(cublasHandle_t *);
typedef cublasStatus_t (*pf_destroy)(cublasHandle_t);
typedef cublasStatus_t (*pf_set_stream)(cublasHandle_t, cudaStream_t);
typedef cublasStatus_t (*pf_set_workspace)(cublasHandle_t, void *, size_t);
typedef cublasStatus_t (*pf_set_math_mode)(cublasHandle_t, cublasMath_t);
typedef const char *(*pf_status_string)(cublasStatus_t);
typedef cublasStatus_t (*pf_gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int,
                                     int, int, const void *, const void *, cudaDataType, int,
                                     const void *, cudaDataType, int, const void *, void *,
                                     cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
typedef cublasStatus_t (*pf_gemm_sb_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int,
                                        int, int, const void *, const void *, cudaDataType, int,
                                        long long, const void *, cudaDataType, int, long long,
                                        const void *, void *, cudaDataType, int, long long, int,
                                        cublasComputeType_t, cublasGemmAlgo_t);

static struct {
    void *lib;
    pf_create create;
    pf_destroy destroy;
    pf_set_stream set_stream;
    pf_set_workspace set_workspace;
    pf_set_math_mode set_math_mode;
    pf_status_string status_string;
    pf_gemm_ex gemm_ex;
    pf_gemm_sb_ex gemm_sb_ex;
    cdb_status rc;     /* of the one load */
    char err[1536];    /* its message */
} g_cb;
static pthread_once_t g_cb_once = PTHREAD_ONCE_INIT;

#define CDB_STR2_(x) #x
#define CDB_STR_(x) CDB_STR2_(x)

static void load_once(void) {
    static const char *const candidates[] = {
        "libcublas.so." CDB_STR_(CUBLAS_VER_MAJOR),
        "/usr/local/cuda/lib64/libcublas.so." CDB_STR_(CUBLAS_VER_MAJOR),
        "/usr/local/cuda/targets/x86_64-linux/lib/libcublas.so." CDB_STR_(CUBLAS_VER_MAJOR),
        "/usr/lib/x86_64-linux-gnu/libcublas.so." CDB_STR_(CUBLAS_VER_MAJOR),
        "/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cu" CDB_STR_(CUBLAS_VER_MAJOR)
            "/lib/libcublas.so." CDB_STR_(CUBLAS_VER_MAJOR),
        "/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cublas/lib/libcublas.so." CDB_STR_(
            CUBLAS_VER_MAJOR),
    };
    /* in the order of g_cb's function pointers */
    static const char *const symbols[] = {
        "cublasCreate_v2",   "cublasDestroy_v2",      "cublasSetStream_v2",
        "cublasSetWorkspace_v2", "cublasSetMathMode", "cublasGetStatusString",
        "cublasGemmEx",      "cublasGemmStridedBatchedEx",
    };
    const cdb_dynlib_spec spec = {
        "cuBLAS " CDB_STR_(CUBLAS_VER_MAJOR), "CLIPDB_CUBLAS", candidates,
        (int)(sizeof candidates / sizeof candidates[0]), symbols,
        (int)(sizeof symbols / sizeof symbols[0])};
    void *syms[sizeof symbols / sizeof symbols[0]];
    g_cb.rc = cdb_dynlib_open(&spec, &g_cb.lib, syms);
    if (g_cb.rc != CDB_OK) {
        snprintf(g_cb.err, sizeof g_cb.err, "%s", cdb_errmsg());
        return;
    }
    g_cb.create = (pf_create)syms[0];
    g_cb.destroy = (pf_destroy)syms[1];
    g_cb.set_stream = (pf_set_stream)syms[2];
    g_cb.set_workspace = (pf_set_workspace)syms[3];
    g_cb.set_math_mode = (pf_set_math_mode)syms[4];
    g_cb.status_string = (pf_status_string)syms[5];
    g_cb.gemm_ex = (pf_gemm_ex)syms[6];
    g_cb.gemm_sb_ex = (pf_gemm_sb_ex)syms[7];
}

extern "C" cdb_status cdb_kc_cublas_load(void) {
    pthread_once(&g_cb_once, load_once);
    return g_cb.lib ? CDB_OK : cdb_seterr(g_cb.rc, "%s", g_cb.err);
}

extern "C" cdb_status cdb_kc_cublas_fail(int st, const char *call, const char *file, int line) {
    const char *s = g_cb.status_string ? g_cb.status_string((cublasStatus_t)st) : "?";
    cdb_status rc = (st == CUBLAS_STATUS_ALLOC_FAILED) ? CDB_NOMEM : CDB_DEVICE;
    return cdb_seterr(rc, "%s:%d: %s: cuBLAS status %d (%s)", file, line, call, st, s);
}

#define CDB_CUBLAS_CHECK(call)                                                 \
    do {                                                                       \
        cublasStatus_t s_ = (call);                                            \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                     \
            rc = cdb_kc_cublas_fail((int)s_, #call, __FILE__, __LINE__);       \
            goto done;                                                         \
        }                                                                      \
    } while (0)

/* 32 MiB: what cuBLAS asks for on Hopper (its own default is smaller there). */
#define CDB_KC_CUBLAS_WS (32u << 20)

extern "C" cdb_status cdb_kc_cublas_create(cdb_kc_ctx *c) {
    cdb_status rc = CDB_OK;
    cublasHandle_t h = NULL;
    if ((rc = cdb_kc_cublas_load()) != CDB_OK) return rc;
    CDB_CUBLAS_CHECK(g_cb.create(&h));
    c->cublas = h;
    CDB_CUBLAS_CHECK(g_cb.set_stream(h, c->compute));
    /* Tensor cores with fp32 accumulation; no reduced-precision reductions. */
    CDB_CUBLAS_CHECK(g_cb.set_math_mode(h, CUBLAS_DEFAULT_MATH));
    CDB_CUDA_CHECK(cudaMalloc(&c->cublas_ws, CDB_KC_CUBLAS_WS));
    c->cublas_ws_bytes = CDB_KC_CUBLAS_WS;
    CDB_CUBLAS_CHECK(g_cb.set_workspace(h, c->cublas_ws, c->cublas_ws_bytes));
done:
    return rc;
}

extern "C" void cdb_kc_cublas_destroy(cdb_kc_ctx *c) {
    if (c->cublas && g_cb.destroy) (void)g_cb.destroy((cublasHandle_t)c->cublas);
    c->cublas = NULL;
    if (c->cublas_ws) (void)cudaFree(c->cublas_ws);
    c->cublas_ws = NULL;
}

/* Row-major C[M,N] = A[M,K] . op(B): column-major C^T[N,M] = op(B)^T . A^T. */
extern "C" cdb_status cdb_kc_gemm(cdb_kc_ctx *c, int m, int n, int k, const uint16_t *a,
                                  const uint16_t *b, int b_trans, void *cmat, int c_f32,
                                  float alpha, float beta) {
    cdb_status rc = CDB_OK;
    CDB_CUDA_CHECK_ARG(m >= 0 && n >= 0 && k >= 0, "gemm: bad sizes %d x %d x %d", m, n, k);
    if (m == 0 || n == 0) return CDB_OK;
    CDB_CUBLAS_CHECK(g_cb.gemm_ex((cublasHandle_t)c->cublas, b_trans ? CUBLAS_OP_T : CUBLAS_OP_N,
                                  CUBLAS_OP_N, n, m, k, &alpha, b, CUDA_R_16F, b_trans ? k : n, a,
                                  CUDA_R_16F, k, &beta, cmat, c_f32 ? CUDA_R_32F : CUDA_R_16F, n,
                                  CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
done:
    return rc;
}

/* Batched row-major C_i[M,N] = alpha * A_i[M,K] . op(B_i) (+ beta C_i), strided. */
extern "C" cdb_status cdb_kc_gemm_batched(cdb_kc_ctx *c, int m, int n, int k, const uint16_t *a,
                                          long long stride_a, const uint16_t *b, int b_trans,
                                          long long stride_b, void *cmat, int c_f32,
                                          long long stride_c, int batch, float alpha, float beta) {
    cdb_status rc = CDB_OK;
    if (m == 0 || n == 0 || batch == 0) return CDB_OK;
    CDB_CUBLAS_CHECK(g_cb.gemm_sb_ex(
        (cublasHandle_t)c->cublas, b_trans ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, n, m, k,
        &alpha, b, CUDA_R_16F, b_trans ? k : n, stride_b, a, CUDA_R_16F, k, stride_a, &beta, cmat,
        c_f32 ? CUDA_R_32F : CUDA_R_16F, n, stride_c, batch, CUBLAS_COMPUTE_32F,
        CUBLAS_GEMM_DEFAULT));
done:
    return rc;
}
