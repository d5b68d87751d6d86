/*
** backend_impl.h: how a backend plugs into the BACKEND interface of kernels.h (as
** ggml keeps ggml-backend-impl.h): the vtable and the struct every backend starts
** with, and the device resolution's test seam. Private to kernels/: the backends
** (kernels/cpu/backend_cpu.c, backend_cpu_ref.c, kernels/cuda/backend.cu) fill the
** vtable in, kernels/backend.c forwards the public cdb_k_* functions to it. No
** other module includes it; tests/kernels/test_device.c does, as a white-box test.
**
** Each slot's contract is that of the public function of the same name in
** kernels.h (cdb_k_<slot>, except act -> cdb_k_activate, destroy ->
** cdb_k_backend_free). The forwarders check be != NULL; a slot may assume it.
** Compiles as C and as C++ (backend.cu).
*/
#ifndef CDB_KERNELS_BACKEND_IMPL_H
#define CDB_KERNELS_BACKEND_IMPL_H

#include "kernels/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cdb_k_backend_ops {
    const char *name; /* "cpu", "cpu-ref", "cuda" */
    void (*destroy)(cdb_k_backend *be);

    cdb_status (*buf_alloc)(cdb_k_backend *be, size_t n, cdb_k_buf **out);
    void (*buf_free)(cdb_k_backend *be, cdb_k_buf *b);
    cdb_status (*weight_upload)(cdb_k_backend *be, const void *src, cdb_k_dtype dt, size_t n,
                                cdb_k_wrole role, int flags, cdb_k_buf **out);
    cdb_status (*buf_upload)(cdb_k_backend *be, cdb_k_buf *dst, size_t off, const float *src,
                             size_t n);
    cdb_status (*buf_download)(cdb_k_backend *be, const cdb_k_buf *src, size_t off, float *dst,
                               size_t n);

    cdb_status (*gemm)(cdb_k_backend *be, const cdb_k_buf *x, const cdb_k_buf *w,
                       const cdb_k_buf *bias, cdb_k_buf *y, int m, int n, int k, cdb_k_act act,
                       int accumulate);
    cdb_status (*layernorm)(cdb_k_backend *be, const cdb_k_buf *x, const cdb_k_buf *gamma,
                            const cdb_k_buf *beta, cdb_k_buf *y, int m, int n, float eps);
    cdb_status (*act)(cdb_k_backend *be, cdb_k_buf *x, size_t n, cdb_k_act act);
    cdb_status (*add)(cdb_k_backend *be, cdb_k_buf *y, const cdb_k_buf *x, size_t n);
    cdb_status (*attention)(cdb_k_backend *be, const cdb_k_buf *qkv, cdb_k_buf *out, int batch,
                            int seq, int heads, int head_dim, int causal);
    /* Optional (NULL: cdb_k_attention_rows runs attention and gathers the rows). */
    cdb_status (*attention_rows)(cdb_k_backend *be, const cdb_k_buf *qkv, cdb_k_buf *out,
                                 int batch, int seq, int heads, int head_dim, int causal,
                                 const int32_t *qpos);
    cdb_status (*lookup_add)(cdb_k_backend *be, const cdb_k_buf *table, const cdb_k_buf *pos,
                             const int32_t *ids, int n_rows, int period, int width,
                             cdb_k_buf *out);
    cdb_status (*prepend_add)(cdb_k_backend *be, const cdb_k_buf *x, const cdb_k_buf *head,
                              const cdb_k_buf *pos, int batch, int n, int width, cdb_k_buf *out);
    cdb_status (*gather_rows)(cdb_k_backend *be, const cdb_k_buf *x, const int32_t *rows, int n,
                              int width, cdb_k_buf *out);
    cdb_status (*sync)(cdb_k_backend *be);

    cdb_status (*im2col)(cdb_k_backend *be, const cdb_k_buf *x, int n, int h, int w, int c, int k,
                         int stride, int pad, cdb_k_buf *cols);
    cdb_status (*avgpool)(cdb_k_backend *be, const cdb_k_buf *x, int n, int h, int w, int c,
                          int s, cdb_k_buf *out);
    cdb_status (*prepend_mean_add)(cdb_k_backend *be, const cdb_k_buf *x, const cdb_k_buf *pos,
                                   int batch, int n, int width, cdb_k_buf *out);
    cdb_status (*attention_q)(cdb_k_backend *be, const cdb_k_buf *q, const cdb_k_buf *kv,
                              cdb_k_buf *out, int batch, int n_q, int seq, int heads,
                              int head_dim);

    cdb_status (*matrix_upload)(cdb_k_backend *be, const void *src, cdb_k_dtype dt, int rows,
                                int cols, int flags, cdb_k_buf **out);

    cdb_status (*patchify)(cdb_k_backend *be, const cdb_k_buf *x, int n, int c, int h, int w,
                           int p, cdb_k_buf *cols);
    /* Optional (NULL: CDB_K_CPU_SCRATCH_BYTES). */
    size_t (*scratch_bytes)(cdb_k_backend *be);

    /* Optional, all four or none (NULL: no packed layout; kernels.h, packed matrix
    ** images). The CUDA backend's positional initializer gives them NULL. */
    const char *(*matrix_layout)(const cdb_k_backend *be);
    size_t (*matrix_packed_bytes)(const cdb_k_backend *be, int rows, int cols);
    const void *(*matrix_packed_data)(const cdb_k_backend *be, const cdb_k_buf *b);
    cdb_status (*matrix_borrow_packed)(cdb_k_backend *be, const void *packed, int rows, int cols,
                                       cdb_k_buf **out);
    /* Optional (NULL: the arithmetic on the host, the floats uploaded: backend.c).
    ** Called with every geometry validated. */
    cdb_status (*preprocess_u8)(cdb_k_backend *be, const cdb_k_pp_geom *g,
                                const uint8_t *const *src, int n, cdb_k_buf *px, int at);
    /* Optional (NULL: no JPEG decoder on this backend). Called with every geometry
    ** validated; jpeg_on_device says whether it can run now. */
    cdb_status (*jpeg_preprocess)(cdb_k_backend *be, const cdb_k_pp_geom *g,
                                  const uint8_t *const *jpeg, const size_t *len, int n,
                                  cdb_k_buf *px, int at, cdb_status *item_rc);
    int (*jpeg_on_device)(const cdb_k_backend *be);
    /* Optional (NULL: CDB_UNSUPPORTED, no device). */
    cdb_status (*mem_info)(cdb_k_backend *be, size_t *free_b, size_t *total_b);
} cdb_k_backend_ops;

/* Every backend struct starts with this header (a CPU or CUDA backend embeds it as
** its first member and hands out its address). */
struct cdb_k_backend {
    const cdb_k_backend_ops *ops;
};

/* cdb_k_device_resolve with the facts injected (device.c; for tests): n_cuda usable
** CUDA devices and, when n_cuda == 0, why_none (NULL or "": "no usable CUDA device"). */
cdb_status cdb_k_device_resolve_with(cdb_k_device want, int n_cuda, const char *why_none,
                                     cdb_k_device *out /* OUT */);

#ifdef __cplusplus
}
#endif
#endif /* CDB_KERNELS_BACKEND_IMPL_H */
