/*
** context.cu: the device context (cdb_kc_ctx): device selection, the compute
** stream, the cuBLAS handle, device memory and synchronous copies,
** plus the CUDA error -> cdb_status mapping every other .cu file uses.
*/
#include <stdlib.h>

#include "kernels/cuda/cuda_common.cuh"

extern "C" cdb_status cdb_kc_cuda_fail(cudaError_t e, const char *call, const char *file,
                                       int line) {
    cdb_status rc = (e == cudaErrorMemoryAllocation) ? CDB_NOMEM : CDB_DEVICE;
    (void)cudaGetLastError(); /* clear non-sticky errors so the next call is clean */
    return cdb_seterr(rc, "%s:%d: %s: %s (%s)", file, line, call, cudaGetErrorString(e),
                      cudaGetErrorName(e));
}

extern "C" cdb_status cdb_kc_ctx_open(int device, cdb_kc_ctx **out) {
    cdb_status rc = CDB_OK;
    cdb_kc_ctx *c = NULL;
    int n = cdb_k_cuda_device_count();
    *out = NULL;
    if (n <= 0) return cdb_seterr(CDB_UNSUPPORTED, "cuda:%d: %s", device, cdb_k_cuda_unusable_reason());
    if (device < 0 || device >= n)
        return cdb_seterr(CDB_UNSUPPORTED, "cuda:%d: only %d CUDA device(s) present", device, n);
    if ((rc = cdb_kc_cublas_load()) != CDB_OK) return rc;
    c = (cdb_kc_ctx *)cdb_calloc(1, sizeof *c);
    if (!c) return cdb_seterr(CDB_NOMEM, "cuda context: out of memory");
    c->device = device;
    CDB_CUDA_CHECK(cudaSetDevice(device));
    CDB_CUDA_CHECK(cudaStreamCreateWithFlags(&c->compute, cudaStreamNonBlocking));
    if ((rc = cdb_kc_cublas_create(c)) != CDB_OK) goto done;
    *out = c;
    c = NULL;
done:
    if (c) cdb_kc_ctx_close(c);
    return rc;
}

extern "C" void cdb_kc_ctx_close(cdb_kc_ctx *c) {
    if (!c) return;
    (void)cudaSetDevice(c->device);
    if (c->compute) (void)cudaStreamSynchronize(c->compute);
    cdb_kc_cublas_destroy(c);
    if (c->compute) (void)cudaStreamDestroy(c->compute);
    (void)cudaGetLastError();
    cdb_free(c);
}

extern "C" cdb_status cdb_kc_ctx_bind(cdb_kc_ctx *c) {
    cdb_status rc = CDB_OK;
    int cur = -1;
    CDB_CUDA_CHECK(cudaGetDevice(&cur));
    if (cur != c->device) CDB_CUDA_CHECK(cudaSetDevice(c->device));
done:
    return rc;
}

extern "C" cdb_status cdb_kc_sync(cdb_kc_ctx *c) {
    cdb_status rc = CDB_OK;
    CDB_CUDA_CHECK(cudaStreamSynchronize(c->compute));
done:
    return rc;
}

extern "C" cdb_status cdb_kc_malloc(cdb_kc_ctx *c, size_t bytes, void **out) {
    cdb_status rc = CDB_OK;
    (void)c;
    *out = NULL;
    CDB_CUDA_CHECK(cudaMalloc(out, bytes ? bytes : 1));
done:
    if (rc != CDB_OK) *out = NULL;
    return rc;
}

extern "C" void cdb_kc_free(cdb_kc_ctx *c, void *d) {
    (void)c;
    if (d) {
        (void)cudaFree(d);
        (void)cudaGetLastError();
    }
}

extern "C" cdb_status cdb_kc_mem_info(cdb_kc_ctx *c, size_t *free_b, size_t *total_b) {
    cdb_status rc = CDB_OK;
    size_t f = 0, t = 0;
    (void)c;
    CDB_CUDA_CHECK(cudaMemGetInfo(&f, &t));
done:
    if (free_b) *free_b = f;
    if (total_b) *total_b = t;
    return rc;
}

/* A copy on the compute stream, waited for. */
static cdb_status copy_sync(cdb_kc_ctx *c, void *dst, const void *src, size_t bytes,
                            cudaMemcpyKind kind) {
    cdb_status rc = CDB_OK;
    if (!bytes) return CDB_OK;
    CDB_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, c->compute));
    CDB_CUDA_CHECK(cudaStreamSynchronize(c->compute));
done:
    return rc;
}

extern "C" cdb_status cdb_kc_upload(cdb_kc_ctx *c, void *d_dst, const void *h_src, size_t bytes) {
    return copy_sync(c, d_dst, h_src, bytes, cudaMemcpyHostToDevice);
}

extern "C" cdb_status cdb_kc_download(cdb_kc_ctx *c, void *h_dst, const void *d_src, size_t bytes) {
    return copy_sync(c, h_dst, d_src, bytes, cudaMemcpyDeviceToHost);
}
