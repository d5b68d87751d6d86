/*
** cuda_int.h: private declarations of the CUDA backend (kernels/cuda/). Included
** by the .cu files and by the GPU tests (tests/gpu/); nothing outside kernels/
** and tests/ may include it. Compiles as C and as C++ and needs no CUDA header:
** device pointers are plain pointers, streams are hidden in cdb_kc_ctx.
**
** Conventions of every launcher below:
**  - runs on the context's compute stream, asynchronously; returns CDB_OK once
**    queued, CDB_DEVICE (message: call, file:line, CUDA's error string) if a
**    launch or cuBLAS call fails, CDB_NOMEM if a device allocation fails;
**  - matrices are row-major; "f16" arrays are IEEE binary16 stored as uint16_t;
**  - per-row vectors (bias, LayerNorm gain/shift, class/positional embeddings)
**    are fp32 on the device; every reduction accumulates in fp32.
*/
#ifndef CDB_KERNELS_CUDA_INT_H
#define CDB_KERNELS_CUDA_INT_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- nvJPEG (nvjpeg.c: loading and choices, plain C; nvjpeg_decode.cu: decoding) ----
** nvjpeg.h's C ABI, as NVIDIA documents it (no header ships with this toolkit): handles
** and states are opaque pointers, statuses ints (0 success), enums ints. */
#define CDB_NVJPEG_BACKEND_DEFAULT 0  /* nvJPEG picks: hybrid / GPU Huffman decoding */
#define CDB_NVJPEG_BACKEND_HARDWARE 3 /* the hardware JPEG decoder (A100, H100, H200) */
#define CDB_NVJPEG_OUTPUT_RGBI 5      /* interleaved RGB into channel[0] */
#define CDB_NVJPEG_CSS_410 5          /* chroma subsamplings the hardware decoder refuses */
#define CDB_NVJPEG_CSS_411 4
#define CDB_NVJPEG_CSS_410V 7
#define CDB_NVJPEG_MAX_COMPONENT 4
typedef struct cdb_nvjpeg_image { /* nvjpegImage_t */
    unsigned char *channel[CDB_NVJPEG_MAX_COMPONENT];
    size_t pitch[CDB_NVJPEG_MAX_COMPONENT];
} cdb_nvjpeg_image;
/* The entry points, resolved from the library (stream: a cudaStream_t). */
typedef struct cdb_kc_nvjpeg_api {
    void *lib; /* the dlopen handle: NULL until loaded */
    int (*create_ex)(int backend, void *dev_alloc, void *pinned_alloc, unsigned flags,
                     void **handle);
    int (*destroy)(void *handle);
    int (*state_create)(void *handle, void **state);
    int (*state_destroy)(void *state);
    int (*get_image_info)(void *handle, const unsigned char *data, size_t len, int *n_comp,
                          int *subsampling, int *widths, int *heights);
    int (*decode)(void *handle, void *state, const unsigned char *data, size_t len, int fmt,
                  cdb_nvjpeg_image *dst, void *stream);
    int (*batched_init)(void *handle, void *state, int batch, int max_cpu_threads, int fmt);
    int (*batched)(void *handle, void *state, const unsigned char *const *data,
                   const size_t *lens, cdb_nvjpeg_image *dst, void *stream);
} cdb_kc_nvjpeg_api;
/* The library clipdb looks for ($CLIPDB_NVJPEG, then the candidates). */
extern const cdb_dynlib_spec cdb_kc_nvjpeg_spec;
/* Whether nvJPEG is usable, from the facts: cuda_built, cuda_why (the CUDA path's
** cdb_k_cuda_unusable_reason(): "" when a device, the driver and cuBLAS are usable) and
** spec's library. CDB_OK with *api filled, or CDB_UNSUPPORTED with *api zeroed and why
** (the message cdb_k_nvjpeg_unusable_reason gives) written. The process decides it once
** with the real facts; tests call it with fake ones. */
cdb_status cdb_kc_nvjpeg_decide(int cuda_built, const char *cuda_why,
                                const cdb_dynlib_spec *spec, cdb_kc_nvjpeg_api *api /* OUT */,
                                char *why /* OUT */, size_t why_cap);
/* A decoder handle: the hardware backend when nvjpegCreateEx takes it (*hardware = 1),
** else the default one (*hardware = 0); CDB_DEVICE when neither is created. */
cdb_status cdb_kc_nvjpeg_handle(const cdb_kc_nvjpeg_api *api, void **handle /* OUT */,
                                int *hardware /* OUT */);
/* The process's nvJPEG (loaded once), or NULL when cdb_k_nvjpeg_usable() is 0. */
const cdb_kc_nvjpeg_api *cdb_kc_nvjpeg(void);

/* One device context: a device ordinal, a compute stream, a cuBLAS handle bound
** to it. Owned by one backend or test. */
typedef struct cdb_kc_ctx cdb_kc_ctx;

/* Opens device `device` (cudaSetDevice on the calling thread), creates the
** stream and the cuBLAS handle. CDB_UNSUPPORTED when no device / no cuBLAS (the
** message says which and how to fix it). */
cdb_status cdb_kc_ctx_open(int device, cdb_kc_ctx **out /* OUT */);
void cdb_kc_ctx_close(cdb_kc_ctx *c); /* NULL ok; waits for queued work */
/* Makes c's device current on the calling thread (cheap; call before any op on a
** thread that did not open c). */
cdb_status cdb_kc_ctx_bind(cdb_kc_ctx *c);
cdb_status cdb_kc_sync(cdb_kc_ctx *c);           /* waits for the stream */
cdb_status cdb_kc_malloc(cdb_kc_ctx *c, size_t bytes, void **out /* OUT */);
void cdb_kc_free(cdb_kc_ctx *c, void *d);        /* NULL ok */
cdb_status cdb_kc_mem_info(cdb_kc_ctx *c, size_t *free_b /* OUT */, size_t *total_b /* OUT */);
/* Synchronous copies on the compute stream (wait for earlier ops). */
cdb_status cdb_kc_upload(cdb_kc_ctx *c, void *d_dst, const void *h_src, size_t bytes);
cdb_status cdb_kc_download(cdb_kc_ctx *c, void *h_dst, const void *d_src, size_t bytes);

/* ---- cuBLAS (loaded with dlopen on first use; see gemm.cu for why) --------- */

/* Loads libcublas once per process. CDB_UNSUPPORTED with the paths tried when it
** is missing. Thread-safe. */
cdb_status cdb_kc_cublas_load(void);

/* C[M,N] = alpha * A[M,K] . B^T + beta * C, where B is [N,K] when b_trans (the
** nn.Linear layout) else [K,N]. A and B f16; C f16 (c_f32 == 0) or fp32.
** fp32 accumulation (CUBLAS_COMPUTE_32F, tensor cores). */
cdb_status cdb_kc_gemm(cdb_kc_ctx *c, int m, int n, int k, const uint16_t *a, const uint16_t *b,
                       int b_trans, void *cmat, int c_f32, float alpha, float beta);

/* Strided batched form: C_i = alpha * A_i . op(B_i) + beta * C_i for i < batch,
** X_i = X + i * stride_x elements. */
cdb_status cdb_kc_gemm_batched(cdb_kc_ctx *c, int m, int n, int k, const uint16_t *a,
                               long long stride_a, const uint16_t *b, int b_trans,
                               long long stride_b, void *cmat, int c_f32, long long stride_c,
                               int batch, float alpha, float beta);

/* ---- elementwise / row kernels -------------------------------------------- */

/* Bit-exact with cdb_k_f32_to_f16_scalar / cdb_k_f16_to_f32_scalar. */
cdb_status cdb_kc_f32_to_f16(cdb_kc_ctx *c, const float *src, uint16_t *dst, size_t n);
cdb_status cdb_kc_f16_to_f32(cdb_kc_ctx *c, const uint16_t *src, float *dst, size_t n);

/* y[r,:] = LayerNorm(x[r,:]) * gamma + beta for r < rows; x row r starts at
** x + r*x_stride elements. x_f32/y_f32 choose fp32 (1) or f16 (0) storage.
** fp32 statistics (two-pass mean/variance over the row held in registers/smem).
** y may equal x only when x_f32 == y_f32 and x_stride == cols. */
cdb_status cdb_kc_layernorm(cdb_kc_ctx *c, const void *x, int x_f32, size_t x_stride, void *y,
                            int y_f32, const float *gamma, const float *beta, int rows, int cols,
                            float eps);

/* In place on y [rows, cols] (f16 if y_f32 == 0, else fp32):
** y = act(y + bias) (bias fp32 [cols], may be NULL), computed in fp32. */
cdb_status cdb_kc_bias_act(cdb_kc_ctx *c, void *y, int y_f32, const float *bias, int rows,
                           int cols, cdb_k_act act);
/* y[i] += x[i] for i < n; each operand fp32 or f16; computed in fp32. */
cdb_status cdb_kc_add(cdb_kc_ctx *c, void *y, int y_f32, const void *x, int x_f32, size_t n);
/* y[r,:] += bias (fp32) for r < rows; y fp32. */
cdb_status cdb_kc_add_bias_f32(cdb_kc_ctx *c, float *y, const float *bias, int rows, int cols);

/* ---- attention -------------------------------------------------------------- */

/* Softmax over each row of s [rows, cols] (fp32 scores), written as f16 to p.
** fp32 max subtraction and sum. causal: row r is query i = r % cols of a square
** [cols, cols] block; keys j > i get probability 0. */
cdb_status cdb_kc_softmax(cdb_kc_ctx *c, const float *s, uint16_t *p, int rows, int cols,
                          int causal);
/* Device workspace attention needs (bytes). */
size_t cdb_kc_attention_ws_bytes(int batch, int seq, int heads, int head_dim);
/* out[batch*seq, heads*head_dim] (f16) from qkv[batch*seq, 3*heads*head_dim] (f16
** or fp32), as cdb_k_attention. ws: cdb_kc_attention_ws_bytes. */
cdb_status cdb_kc_attention(cdb_kc_ctx *c, const void *qkv, int qkv_f32, uint16_t *out,
                            int batch, int seq, int heads, int head_dim, int causal, void *ws);

/* ---- embeddings / gathers --------------------------------------------------- */

/* out[r,:] (fp32) = table[ids[r],:] + pos[r % period,:]; table f16 or fp32
** (table_f32), pos fp32; d_ids on the device. */
cdb_status cdb_kc_lookup_add(cdb_kc_ctx *c, const void *table, int table_f32, const float *pos,
                             const int32_t *d_ids, int n_rows, int period, int width, float *out);
/* As cdb_k_prepend_add: fp32 out [batch*(n+1), width]; x f16 or fp32,
** head and pos fp32. */
cdb_status cdb_kc_prepend_add(cdb_kc_ctx *c, const void *x, int x_f32, const float *head,
                              const float *pos, int batch, int n, int width, float *out);
/* out[i,:] = x[rows[i],:]; elem_bytes 2 or 4; d_rows on the device. */
cdb_status cdb_kc_gather_rows(cdb_kc_ctx *c, const void *x, const int32_t *d_rows, int n,
                              int width, size_t elem_bytes, void *out);

/* ---- ModifiedResNet (NHWC activations; see kernels.h's appended ops) -------- */

/* cols [n*ho*wo, k*k*c] (f16) = the k x k / stride / pad patch matrix of x [n,h,w,c]
** (f16 or fp32), column order (ky, kx, channel), zeros outside the image. */
cdb_status cdb_kc_im2col_nhwc(cdb_kc_ctx *c, const void *x, int x_f32, int n, int h, int w,
                              int ch, int k, int stride, int pad, uint16_t *cols);
/* cols [n*(h/p)*(w/p), ch*p*p] (f16) = the ViT patch matrix of x [n,ch,h,w] (f16 or
** fp32), column order (channel, ky, kx), as cdb_k_patchify. */
cdb_status cdb_kc_patchify(cdb_kc_ctx *c, const void *x, int x_f32, int n, int ch, int h, int w,
                           int p, uint16_t *cols);
/* out [n, h/s, w/s, c] = s x s window means of x [n,h,w,c] (floor), fp32 sums;
** out stored fp32 (out_f32) or f16. */
cdb_status cdb_kc_avgpool_nhwc(cdb_kc_ctx *c, const void *x, int x_f32, int n, int h, int w,
                               int ch, int s, void *out, int out_f32);
/* out [batch*(n+1), width] fp32: row 0 of each group the fp32 mean of its n rows of x
** (f16 or fp32) + pos[0], then x's rows + pos[1..n]. */
cdb_status cdb_kc_prepend_mean_add(cdb_kc_ctx *c, const void *x, int x_f32, const float *pos,
                                   int batch, int n, int width, float *out);
/* out [batch*n_q, heads*head_dim] (f16) from q [batch*n_q, heads*head_dim] and kv
** [batch*seq, 2*heads*head_dim] (each f16 or fp32), as cdb_k_attention_q:
** one thread block per (item, head, query), fp32 scores/softmax/sums in shared memory
** (seq <= 8192). */
cdb_status cdb_kc_attention_q(cdb_kc_ctx *c, const void *q, int q_f32, const void *kv,
                              int kv_f32, uint16_t *out, int batch, int n_q, int seq, int heads,
                              int head_dim);

/* ---- image preprocessing (preprocess.cu; arithmetic in pp_elem.h) ------------- */

/* One 8-bit gray/RGB image src (device) resized, cropped and normalized into out
** (device, 3 x size x size floats, CHW) as g says (g's table pointers on the device);
** tmp (device): rows x size x nch bytes when g->kh > 0. */
cdb_status cdb_kc_pp_image(cdb_kc_ctx *c, const cdb_k_pp_geom *g, const uint8_t *src,
                           uint8_t *tmp, float *out);

/* x[r,:] /= |x[r,:]| in fp32 (sum of squares accumulated in fp32); rows with a zero
** or non-finite norm are left unchanged and counted in *d_bad (device int, may be
** NULL). */
cdb_status cdb_kc_l2norm(cdb_kc_ctx *c, float *x, int rows, int dim, int *d_bad);

#ifdef __cplusplus
}
#endif
#endif /* CDB_KERNELS_CUDA_INT_H */
