/*
** kernels.h: clipdb's compute primitives behind one C interface. The only kernels
** header other modules include.
**
** Implementations live in kernels/cpu/ (a scalar reference that is always built,
** plus ISA-specific files compiled with their own flags and chosen at run time)
** and kernels/cuda/ (when built with CUDA). The scalar C version is the reference
** every other backend is tested against (tests/kernels/).
**
** Precision contract (DESIGN.md): fp16 is a storage format only; every reduction
** (dot, norm, sum) accumulates in fp32 or wider.
**
** Thread-safety: all functions are reentrant; the dispatch choice is made once
** (pthread_once) on first use.
*/
#ifndef CDB_KERNELS_H
#define CDB_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "core/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- dispatch ---------------------------------------------------------------- */

typedef enum cdb_k_isa {
    CDB_K_ISA_SCALAR = 0, /* portable C reference */
    CDB_K_ISA_AVX2 = 1,   /* AVX2 + FMA + F16C */
    CDB_K_ISA_AVX512 = 2  /* AVX-512F on top of AVX2 (the CPU backend's GEMM and vector ops;
                             every other kernel group takes its AVX2 path) */
} cdb_k_isa;

/* The CPU ISA level in use: the best the CPU supports (cpuid, with the OS saving
** the wider registers), capped by the CLIPDB_ISA environment variable: "scalar"
** forces the portable paths, "avx2" stops below AVX-512, "avx512" (or unset) caps
** nothing; a level the CPU lacks is never used whatever CLIPDB_ISA says. Fixed for
** the process (the CPU backend packs its weights for it). */
cdb_k_isa cdb_k_cpu_isa(void);
const char *cdb_k_isa_name(cdb_k_isa isa);

/* ---- CUDA presence -----------------------------------------------------------
** Number of usable CUDA devices: 0 when clipdb was built without CUDA, when no
** driver is installed, or when no GPU is present. Never fails, never aborts. */
int cdb_k_cuda_device_count(void);
/* 1 when this build contains the CUDA backend. */
int cdb_k_cuda_built(void);
/* Why no CUDA device is usable, or "" when one is: "this clipdb was built without
** CUDA", "the NVIDIA driver is missing or older than ...", "no CUDA-capable device
** is present", "cuBLAS could not be loaded ...". Static string; thread-safe. */
const char *cdb_k_cuda_unusable_reason(void);

/* nvJPEG (kernels/cuda/nvjpeg.c): 1 when a CUDA device is usable and libnvjpeg was
** loaded (dlopen, once per process, as cuBLAS), so a GPU ingest may decode baseline
** JPEGs on the device; else 0, and the reason ("this clipdb was built without CUDA",
** "no CUDA device: ...", "nvJPEG could not be loaded (...); install it or set
** CLIPDB_NVJPEG=..."), or "" when usable. Static string; thread-safe. */
int cdb_k_nvjpeg_usable(void);
const char *cdb_k_nvjpeg_unusable_reason(void);

/* ---- fp16 <-> fp32 --------------------------------------------------------------
** IEEE binary16 stored as uint16_t (little-endian on disk). f32 -> f16 rounds to
** nearest, ties to even; overflow gives +-Inf; NaN stays NaN (quiet, sign kept);
** subnormals are produced and consumed exactly. f16 -> f32 is exact. */

float cdb_k_f16_to_f32_1(uint16_t h);
uint16_t cdb_k_f32_to_f16_1(float f);
void cdb_k_f16_to_f32(const uint16_t *src, float *dst, size_t n);
void cdb_k_f32_to_f16(const float *src, uint16_t *dst, size_t n);

/* Scalar references, exposed for differential tests. */
void cdb_k_f16_to_f32_scalar(const uint16_t *src, float *dst, size_t n);
void cdb_k_f32_to_f16_scalar(const float *src, uint16_t *dst, size_t n);

/* ---- DOT / RERANK ----------------------------------------------------------------
** Dot products of fp16-stored vectors (IEEE binary16 as uint16_t, rows of dim
** elements, any dim) with fp32 queries. Precision contract: products are formed in
** fp32 and accumulated in fp32 (AVX2+F16C: 32 independent partial sums) or double
** (the scalar reference), never in fp16; the two agree within 1e-6 * sum|a_i*q_i|
** (tests/kernels/test_dot.c). Norms accumulate in double; normalization scales by a
** power of two first, so any finite fp32 input (e.g. 1e5 per element, or 1e30)
** normalizes without overflow. Reentrant. */

/* sum_i a[i]*q[i] */
float cdb_k_dot_f16_f32(const uint16_t *a, const float *q, size_t dim);
/* sum_i a[i]*b[i], both fp16-stored (each widened to fp32 first) */
float cdb_k_dot_f16_f16(const uint16_t *a, const uint16_t *b, size_t dim);
/* sum_i a[i]*b[i], both fp32 (a query against an IVF index's fp32 centroids) */
float cdb_k_dot_f32(const float *a, const float *b, size_t dim);
/* out[i] = dot(vecs + i*dim, q) for i < n_vecs (many stored vectors, one query). */
void cdb_k_dot_f16_f32_batch(const uint16_t *vecs, size_t n_vecs, const float *q, size_t dim,
                             float *out /* OUT: n_vecs */);
/* out[i*n_q + j] = dot(vecs + i*dim, qs + j*dim): many stored vectors against a few
** queries; each stored vector is read and widened once per pair of queries. The
** batch and multi results are bit-identical to cdb_k_dot_f16_f32's (same ISA). */
void cdb_k_dot_f16_f32_multi(const uint16_t *vecs, size_t n_vecs, const float *qs, size_t n_q,
                             size_t dim, float *out /* OUT: n_vecs * n_q */);
/* The i < ny whose y_i is nearest to x[dim] in squared L2 distance, the ys given
** transposed (yt[d * ny + i] is component d of y_i): each distance is summed as FAISS's
** reference loop sums it (d = 0, 1, ...; each (x_d - y_d)^2 rounded, then added: no fused
** multiply-add), the first minimum wins a tie, and 0 when none is below 1e20. So the
** same index as FAISS 1.7.3's ProductQuantizer::compute_code on its generic build (a
** product quantizer's sub-vector against its ksub centroids). */
size_t cdb_k_nearest_l2_t_f32(const float *x, const float *yt, size_t ny, size_t dim);
/* Euclidean norms (not squared), accumulated in double. */
float cdb_k_l2norm_f32(const float *x, size_t n);
float cdb_k_l2norm_f16(const uint16_t *x, size_t n);
/* dot(a,b) / (|a| |b|) with fp32-accumulated dot and double norms; 0 when either
** vector is zero. NaN if an input holds NaN/Inf. */
float cdb_k_cosine_f16(const uint16_t *a, const uint16_t *b, size_t dim);
/* x /= |x| (normalize.c: the one normalization of the encoder, the store and the
** queries): x scaled by a power of two first, so any finite magnitude works, the
** squares summed in double over 8 fixed lanes, each element divided by the norm in
** double and rounded once to fp32; the same bits on every ISA. Returns CDB_INVALID (x untouched, message set) if any element
** is NaN/Inf or x is all zeros. *norm_out (may be NULL) receives |x| before scaling
** (may round to +Inf in fp32 for huge inputs; the scaling itself never overflows). */
cdb_status cdb_k_normalize_f32(float *x, size_t n, float *norm_out /* OUT */);
/* out = fp16(src / |src|): exactly the fp32 values cdb_k_normalize_f32 gives, each
** rounded once to fp16 (DESIGN.md precision contract 1). Same refusals; src is not
** modified. src and out must not overlap. */
cdb_status cdb_k_normalize_to_f16(const float *src, size_t n, uint16_t *out /* OUT: n */);

/* Scalar references (double accumulation), exposed for differential tests. */
float cdb_k_dot_f16_f32_scalar(const uint16_t *a, const float *q, size_t dim);
float cdb_k_dot_f16_f16_scalar(const uint16_t *a, const uint16_t *b, size_t dim);
float cdb_k_dot_f32_scalar(const float *a, const float *b, size_t dim);
size_t cdb_k_nearest_l2_t_f32_scalar(const float *x, const float *yt, size_t ny, size_t dim);
void cdb_k_dot_f16_f32_multi_scalar(const uint16_t *vecs, size_t n_vecs, const float *qs,
                                    size_t n_q, size_t dim, float *out /* OUT */);


/* ==== DEVICES ==================================================================
** Where a backend runs: clipdb's one device type, as users name it (`--device`,
** $CLIPDB_DEVICE) and as the encoder's and the engine's params carry it. */

typedef enum cdb_k_device_kind {
    CDB_K_DEVICE_AUTO = 0, /* cuda:0 when a CUDA device is usable, else the CPU */
    CDB_K_DEVICE_CPU = 1,
    CDB_K_DEVICE_CUDA = 2
} cdb_k_device_kind;

typedef struct cdb_k_device {
    cdb_k_device_kind kind;
    int index; /* CDB_K_DEVICE_CUDA: the device ordinal; 0 otherwise */
} cdb_k_device; /* all zeros: auto */

/* Parses a device name: exactly "auto", "cpu", "cuda" (= cuda:0) or "cuda:N", N a
** CUDA device ordinal written in 1 to 9 decimal digits (no sign, no blanks).
** Lowercase only: "CPU", " cpu", "cuda:", "cuda:-1", "cuda:+1", "cuda:1x", "cuda: 1"
** and "gpu" are CDB_INVALID, with a message that quotes s and lists the accepted
** forms. Whether the device exists is not checked here (cdb_k_device_resolve). */
cdb_status cdb_k_device_parse(const char *s, cdb_k_device *out /* OUT */);
/* Resolves want against this process: auto -> cuda:0 when a CUDA device is usable,
** else cpu; cpu -> cpu; cuda:N -> itself when device N exists, else CDB_UNSUPPORTED
** with a message that says why: "cuda:N is not available: this clipdb was built
** without CUDA" (or the driver's or cuBLAS's reason, from
** cdb_k_cuda_unusable_reason), or "no CUDA device N: only M present (cuda:0...)".
** cdb_k_backend_new resolves its device with it. */
cdb_status cdb_k_device_resolve(cdb_k_device want, cdb_k_device *out /* OUT */);

/* ==== BACKEND ==================================================================
** The compute seam of the CLIP forward pass (encoder/clip.c is written once
** against it). A backend owns a device (or the CPU), its buffers and its threads;
** the graph only sees opaque buffers and calls the functions below.
**
** Buffers (cdb_k_buf) hold a 1-D array of n elements whose storage type the
** backend chooses: the CPU backend stores fp32; a CUDA backend may store weights
** and activations in fp16. The graph never reads a buffer's memory directly: it
** fills one with cdb_k_buf_upload / cdb_k_weight_upload / cdb_k_matrix_upload and
** reads one with cdb_k_buf_download, always in fp32 on the host side. Matrices are row-major; "X [M,K]" means M rows
** of K elements. Ops may run asynchronously; cdb_k_buf_download (and cdb_k_sync)
** wait for all earlier ops. Buffers passed to one op must not overlap unless stated.
**
** Precision (DESIGN.md): every GEMM accumulates in fp32 or wider, LayerNorm and
** softmax statistics are fp32, whatever the storage type.
**
** Errors: ops return cdb_status and set cdb_errmsg (CDB_INVALID for bad sizes or a
** NULL backend, CDB_NOMEM, CDB_DEVICE). They never abort on bad input.
**
** Threading: one backend may be used by several threads at once as long as they
** use different activation buffers (weights are read-only after upload). Each
** backend's own parallelism (OpenMP, BLAS threads, streams) is internal.
**
** Adding a backend: implement the vtable of kernels/backend_impl.h (private to
** kernels/) next to kernels/cpu/ and kernels/cuda/, expose a constructor, and make
** cdb_k_backend_new() return it. Nothing in encoder/ changes: callers see an opaque
** cdb_k_backend and the functions below, which forward to the backend's vtable. The
** scalar CPU backend (cdb_k_backend_cpu_ref_new) is the reference every backend is
** tested against. */

typedef struct cdb_k_buf cdb_k_buf;         /* opaque, owned by its backend */
typedef struct cdb_k_backend cdb_k_backend; /* opaque */

typedef enum cdb_k_dtype {
    CDB_K_F32 = 0, /* IEEE binary32, little-endian */
    CDB_K_F16 = 1, /* IEEE binary16 */
    CDB_K_BF16 = 2 /* bfloat16: the high half of a binary32 */
} cdb_k_dtype;

typedef enum cdb_k_act {
    CDB_K_ACT_NONE = 0,
    CDB_K_ACT_QUICK_GELU = 1, /* x * sigmoid(1.702 x)  (OpenAI CLIP) */
    CDB_K_ACT_GELU = 2,       /* 0.5 x (1 + erf(x / sqrt 2)), exact, not tanh */
    CDB_K_ACT_RELU = 3,       /* max(x, 0) (ModifiedResNet); NaN stays NaN */
    CDB_K_ACT_GELU_TANH = 4   /* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))): PyTorch's
                                 GELU(approximate='tanh'), HF's gelu_pytorch_tanh (SigLIP) */
} cdb_k_act;

/* What a weight is used for, so a backend can pick its storage: MATRIX (the B
** operand of gemm; a GPU backend may keep it fp16), EMBED (positional/class
** embeddings, read by lookup_add / prepend_add), PARAM (biases and LayerNorm gains,
** which a backend should keep in fp32), TABLE (a token embedding table, read only as
** lookup_add's table operand: F16 and BF16 tables stay in their dtype, borrowed in
** place with CDB_K_UPLOAD_BORROW, and each row is widened when it is looked up;
** widening is exact, so the sums are those of a widened table. SigLIP2's 256k x 768
** table is 393 MB in F16, 786 MB widened). */
typedef enum cdb_k_wrole {
    CDB_K_W_MATRIX = 0,
    CDB_K_W_EMBED = 1,
    CDB_K_W_PARAM = 2,
    CDB_K_W_TABLE = 3
} cdb_k_wrole;

/* cdb_k_weight_upload / cdb_k_matrix_upload flags */
#define CDB_K_UPLOAD_BORROW 1 /* src stays valid and unchanged for the buffer's whole
                                 life (an mmapped file): the backend may use it in place */

/* ---- buffers ----
** Weights: n elements of dtype dt at src (host memory, any alignment), converted to
** the backend's storage for role. flags: CDB_K_UPLOAD_*. Activations: uninitialized,
** n elements. cdb_k_buf_free(be, NULL) is fine. buf_upload / buf_download copy host
** fp32 <-> the buffer's elements [off, off+n); download waits for earlier ops. */
cdb_status cdb_k_buf_alloc(cdb_k_backend *be, size_t n, cdb_k_buf **out /* OUT */);
void cdb_k_buf_free(cdb_k_backend *be, cdb_k_buf *b);
cdb_status cdb_k_weight_upload(cdb_k_backend *be, const void *src, cdb_k_dtype dt, size_t n,
                               cdb_k_wrole role, int flags, cdb_k_buf **out /* OUT */);
/* A gemm operand W [rows, cols] (row-major, the nn.Linear layout), as weight_upload
** with CDB_K_W_MATRIX, but with the shape known so that a backend may store it in a
** layout of its own, once, at load: the CPU backend packs it into its GEMM's column
** panels (then W no longer reads src, and flags are ignored). buf_download still
** gives the row-major values. cdb_k_gemm takes such a buffer as w with k == cols and
** n <= rows. */
cdb_status cdb_k_matrix_upload(cdb_k_backend *be, const void *src, cdb_k_dtype dt, int rows,
                               int cols, int flags, cdb_k_buf **out /* OUT */);
cdb_status cdb_k_buf_upload(cdb_k_backend *be, cdb_k_buf *dst, size_t off, const float *src,
                            size_t n);
/* Packed matrix images: a backend that stores matrices in a layout of its own (the
** optimized CPU backend's fp32 column panels) hands that layout out and takes it
** back, so that a caller can keep packed matrices in a file and map them instead of
** packing them again at every load (encoder/packcache.c).
** cdb_k_matrix_layout: the layout's name ("cpu-panels-nr32-avx512", ...); two backends
** with the same name pack the same matrix into the same bytes. NULL: this backend has
** no such layout (the other three functions then give 0, NULL, CDB_UNSUPPORTED).
** cdb_k_matrix_packed_bytes: the bytes of a rows x cols matrix in it.
** cdb_k_matrix_packed_data: those bytes of a buffer made by matrix_upload or
** matrix_borrow_packed (NULL for any other buffer).
** cdb_k_matrix_borrow_packed: a matrix buffer over packed bytes (64-byte aligned,
** packed_bytes of them) that the caller keeps valid and unchanged for the buffer's
** whole life (a mapped file): the buffer matrix_upload gives for the matrix they were
** packed from, so every op gives the same bits with either. */
const char *cdb_k_matrix_layout(const cdb_k_backend *be);
size_t cdb_k_matrix_packed_bytes(const cdb_k_backend *be, int rows, int cols);
const void *cdb_k_matrix_packed_data(const cdb_k_backend *be, const cdb_k_buf *b);
cdb_status cdb_k_matrix_borrow_packed(cdb_k_backend *be, const void *packed, int rows, int cols,
                                      cdb_k_buf **out /* OUT */);
cdb_status cdb_k_buf_download(cdb_k_backend *be, const cdb_k_buf *src, size_t off,
                              float *dst /* OUT */, size_t n);

/* ---- ops ---- */

/* Y[M,N] = act(X[M,K] . W[N,K]^T + bias[N]) (+ Y when accumulate).
** W is row-major [N,K] (the nn.Linear layout). bias may be NULL. accumulate
** requires act == CDB_K_ACT_NONE. Y must not overlap X. */
cdb_status cdb_k_gemm(cdb_k_backend *be, const cdb_k_buf *x, const cdb_k_buf *w,
                      const cdb_k_buf *bias, cdb_k_buf *y, int m, int n, int k, cdb_k_act act,
                      int accumulate);
/* Y[r,:] = (X[r,:] - mean) / sqrt(var + eps) * gamma + beta for rows r < m,
** biased variance (as torch.nn.LayerNorm). Y may equal X. */
cdb_status cdb_k_layernorm(cdb_k_backend *be, const cdb_k_buf *x, const cdb_k_buf *gamma,
                           const cdb_k_buf *beta, cdb_k_buf *y, int m, int n, float eps);
/* In place: X[0..n) = act(X). */
cdb_status cdb_k_activate(cdb_k_backend *be, cdb_k_buf *x, size_t n, cdb_k_act act);
/* In place: Y[0..n) += X[0..n). */
cdb_status cdb_k_add(cdb_k_backend *be, cdb_k_buf *y, const cdb_k_buf *x, size_t n);
/* Multi-head scaled dot-product attention, as torch.nn.MultiheadAttention after
** its input projection. qkv: [batch*seq, 3*heads*head_dim], each row the
** concatenation q | k | v, each of those heads blocks of head_dim. out:
** [batch*seq, heads*head_dim], heads concatenated. scores = q.k^T / sqrt(head_dim),
** softmax over keys (fp32), causal: key j > query i masked out. */
cdb_status cdb_k_attention(cdb_k_backend *be, const cdb_k_buf *qkv, cdb_k_buf *out, int batch,
                           int seq, int heads, int head_dim, int causal);
/* cdb_k_attention for one query per item (a tower's last block needs only its
** pooled rows): out [batch, heads*head_dim], row b what cdb_k_attention gives at row
** b*seq + qpos[b] (the same bits on the CPU backends), over the same keys (causal:
** j <= qpos[b]). qpos: host memory, batch positions, each in [0, seq). */
cdb_status cdb_k_attention_rows(cdb_k_backend *be, const cdb_k_buf *qkv, cdb_k_buf *out,
                                int batch, int seq, int heads, int head_dim, int causal,
                                const int32_t *qpos);
/* Multi-head attention with separate queries (e.g. an attention pool: one query
** per item): q [batch*n_q, heads*head_dim], kv [batch*seq, 2*heads*head_dim]
** (each row k | v, each heads blocks of head_dim); out [batch*n_q,
** heads*head_dim] = per head softmax(q.k^T / sqrt(head_dim)) . v over the item's
** seq keys, not causal, fp32 softmax. out must not overlap q or kv. */
cdb_status cdb_k_attention_q(cdb_k_backend *be, const cdb_k_buf *q, const cdb_k_buf *kv,
                             cdb_k_buf *out /* OUT */, int batch, int n_q, int seq, int heads,
                             int head_dim);
/* Embedding lookup plus a periodic addend: out[r,:] = table[ids[r],:] +
** pos[r % period,:] for r < n_rows (a text tower's token + positional
** embedding). ids: host memory, each in [0, table rows) (CDB_INVALID otherwise). */
cdb_status cdb_k_lookup_add(cdb_k_backend *be, const cdb_k_buf *table, const cdb_k_buf *pos,
                            const int32_t *ids, int n_rows, int period, int width,
                            cdb_k_buf *out /* OUT */);
/* One row put in front of each of batch groups of n rows, then a positional
** table added: out [batch*(n+1), width], out row b*(n+1) = head + pos[0], out row
** b*(n+1) + 1 + p = x[b*n + p] + pos[1 + p] (a ViT's class token before its patch
** embeddings). head: one row of width; pos: n+1 rows. */
cdb_status cdb_k_prepend_add(cdb_k_backend *be, const cdb_k_buf *x, const cdb_k_buf *head,
                             const cdb_k_buf *pos, int batch, int n, int width,
                             cdb_k_buf *out /* OUT */);
/* cdb_k_prepend_add with each group's own mean as its head row: x [batch*n, width],
** pos [n+1, width]; out row b*(n+1) = mean_p x[b*n + p] + pos[0] (the mean summed
** in fp32 or wider), out row b*(n+1) + 1 + p = x[b*n + p] + pos[1 + p] (the
** tokens of ModifiedResNet's attention pool). out must not overlap x. */
cdb_status cdb_k_prepend_mean_add(cdb_k_backend *be, const cdb_k_buf *x, const cdb_k_buf *pos,
                                  int batch, int n, int width, cdb_k_buf *out /* OUT */);
/* out[i,:] = x[rows[i],:] for i < n; rows: host memory, each < rows of x. */
cdb_status cdb_k_gather_rows(cdb_k_backend *be, const cdb_k_buf *x, const int32_t *rows, int n,
                             int width, cdb_k_buf *out /* OUT */);
/* Waits for every queued op (a no-op on the CPU). */
cdb_status cdb_k_sync(cdb_k_backend *be);

/* ---- NHWC image ops (convolutions, as encoder/resnet.c runs them) ----
** Images are NHWC: x [n, h, w, c] is n*h*w rows of c channels, so a 1x1
** convolution is a gemm and a k x k one is im2col followed by a gemm. */

/* Patch matrix of a k x k convolution with stride `stride` and zero padding
** `pad`: cols [n*ho*wo, k*k*c] with ho = (h + 2*pad - k) / stride + 1 (wo the
** same with w); row (b, oy, ox) holds x[b, oy*stride - pad + ky, ox*stride - pad
** + kx, 0..c) for ky, kx < k in that order, zeros outside the image. A weight
** stored [cout, k, k, c] then gives the convolution as gemm(cols, weight).
** k, stride >= 1, 0 <= pad < k, ho and wo >= 1. cols must not overlap x. */
cdb_status cdb_k_im2col(cdb_k_backend *be, const cdb_k_buf *x, int n, int h, int w, int c, int k,
                        int stride, int pad, cdb_k_buf *cols /* OUT */);
/* The patch matrix of a ViT's patch embedding (a p x p convolution with stride p) over
** NCHW pixels: x [n, c, h, w] (an image's planes one after the other, as
** cdb_image_preprocess writes them); cols [n*gh*gw, c*p*p] with gh = h / p, gw = w / p
** (floor: trailing rows/columns that fill no patch are dropped, as the convolution
** does); row (b, gy, gx) holds x[b, ch, gy*p + ky, gx*p + kx] in (ch, ky, kx) order,
** the order of a conv weight [cout, c, p, p], so gemm(cols, weight) is the patch
** embedding. A pure permutation of the pixels (a backend may round them to its GEMM
** operand type). 1 <= p <= h, w; cols must not overlap x. */
cdb_status cdb_k_patchify(cdb_k_backend *be, const cdb_k_buf *x, int n, int c, int h, int w,
                          int p, cdb_k_buf *cols /* OUT */);
/* torch.nn.AvgPool2d(s) on NHWC x [n, h, w, c]: out [n, h/s, w/s, c] (floor: a
** trailing row/column that does not fill a window is dropped), each the mean of
** its s x s window. s == 1 copies. out must not overlap x. */
cdb_status cdb_k_avgpool(cdb_k_backend *be, const cdb_k_buf *x, int n, int h, int w, int c, int s,
                         cdb_k_buf *out /* OUT */);

/* The activation scratch a graph should give one call on be, in bytes (encoder/clip.c
** sizes its chunks with it): CDB_K_CPU_SCRATCH_BYTES on the CPU backends (a chunk's
** working set stays near the caches, memory bounded); on a CUDA device what
** cdb_k_batch_from_free leaves of half its free memory now, in MiB, between 128 MiB and 8 GiB
** (bigger GEMMs; an estimate off by too much is caught by cdb_k_run_batched's halving).
** 0 for a NULL backend. */
#define CDB_K_CPU_SCRATCH_BYTES ((size_t)128 << 20)
size_t cdb_k_scratch_bytes(cdb_k_backend *be);

/* ---- 8-bit images to model pixels (the device transform) ----
** One image's resize + crop + normalize, planned on the host (encoder/preprocess.c's
** cdb_pp_plan: PIL's coefficients and the normalization table, computed in that one
** place) and run by the backend with kernels/cuda/pp_elem.h's per-output arithmetic:
** integer sums plus a table lookup, so every backend gives cdb_image_preprocess's floats
** bit for bit. Source: w x h, nch (1 gray, 3 RGB) interleaved bytes, stride bytes per
** row; the crop is size x size at (left, top) of the resized image. Horizontal pass (kh
** > 0): source rows [y0, y0 + rows), taps bh/kkh per output column. Vertical pass (kv >
** 0): taps bv/kkv per output row, bv relative to row y0 when the horizontal pass runs,
** else to row 0. lut: 3 x 256 floats (channel c, byte v). Tables: host memory. */
typedef struct cdb_k_pp_geom {
    int w, h, nch;
    size_t stride;
    int size, left, top;
    int y0, rows;
    const int *bh;
    const int32_t *kkh;
    int kh;
    const int *bv;
    const int32_t *kkv;
    int kv;
    const float *lut;
} cdb_k_pp_geom;
/* px[(at + i) * 3*size*size ...] (CHW floats) = the transform g[i] of src[i] (host
** bytes) for i < n, every g[i].size equal; px holds at least (at + n)*3*size*size
** elements, fp32 (a buffer from cdb_k_buf_alloc that only buf_upload has written).
** A GPU backend uploads the bytes through pinned double buffers on a copy stream,
** overlapped with the transform of the previous image (kernels/cuda/pp_upload.cu); the
** others run the same arithmetic on the host and upload the floats. CDB_INVALID for
** a malformed geometry (checked before anything runs). */
cdb_status cdb_k_preprocess_u8(cdb_k_backend *be, const cdb_k_pp_geom *g,
                               const uint8_t *const *src, int n, cdb_k_buf *px /* OUT */,
                               int at);
/* JPEG files decoded on be's device by nvJPEG, then transformed as cdb_k_preprocess_u8:
** jpeg[i] (host, len[i] bytes: a frame cdb_image_pick_decoder gives to nvJPEG, whose
** stored size is g[i].w x g[i].h, g[i].nch 3: decoded to interleaved RGB) into px[at +
** i]. The hardware JPEG decoder takes the batch where the device has one (A100, H100,
** H200); nvJPEG's default backend takes each JPEG it refuses. item_rc[i]: CDB_OK, or why
** JPEG i was not decoded (CDB_CORRUPT, CDB_UNSUPPORTED, CDB_DEVICE; its slot is left as
** it was: the caller decodes it on the CPU). Returns CDB_UNSUPPORTED, nothing done, when
** be has no JPEG decoder (cdb_k_jpeg_on_device is 0); CDB_INVALID for bad geometry;
** other failures are the device's. */
cdb_status cdb_k_jpeg_preprocess(cdb_k_backend *be, const cdb_k_pp_geom *g,
                                 const uint8_t *const *jpeg, const size_t *len, int n,
                                 cdb_k_buf *px /* OUT */, int at, cdb_status *item_rc /* OUT */);
/* 1 when be decodes JPEGs on its device: a GPU backend, nvJPEG usable, and its decoder
** did not fail to start on this device (then CDB_UNSUPPORTED and this turns 0). */
int cdb_k_jpeg_on_device(const cdb_k_backend *be);
/* 1 when be runs cdb_k_preprocess_u8 on a device (a GPU backend), so uploading bytes
** beats transforming on the host; 0 for the CPU backends and NULL. */
int cdb_k_preprocess_on_device(const cdb_k_backend *be);

/* ---- construction ---- */

typedef struct cdb_k_backend_params {
    cdb_k_device device; /* default auto */
    int n_threads;       /* CPU: 0 = cdb_default_threads() */
} cdb_k_backend_params;
cdb_k_backend_params cdb_k_backend_params_default(void);

/* Creates a backend (p == NULL: defaults) on p->device, resolved by
** cdb_k_device_resolve: cuda:N is that CUDA device or CDB_UNSUPPORTED (its
** message); auto is cuda:0 when usable (falling back to the CPU, with a warning,
** when that backend cannot start), else the CPU. Free with cdb_k_backend_free
** (NULL ok). */
cdb_status cdb_k_backend_new(const cdb_k_backend_params *p, cdb_k_backend **out /* OUT */);
/* The optimized CPU backend and the scalar reference one (plain loops, double
** accumulators, single thread; for tests).
**
** The optimized backend runs clipdb's own GEMM (AVX-512, AVX2+FMA or portable C
** micro-kernels, chosen by cdb_k_cpu_isa(); no BLAS) and vector kernels with
** OpenMP. Batch and thread invariance: every output row of every op is computed by
** the same arithmetic in the same order whatever the batch size, the row's position
** in it, the thread count and the chunking, so an image or a text gives the same
** bits alone or in any batch, with any n_threads (same ISA path; paths differ from
** each other by rounding). Each path stays within 1e-6 * sum |x_k w_k| of the
** reference per GEMM element (tests/kernels/test_gemm.c). */
cdb_status cdb_k_backend_cpu_new(int n_threads, cdb_k_backend **out /* OUT */);
cdb_status cdb_k_backend_cpu_ref_new(cdb_k_backend **out /* OUT */);
void cdb_k_backend_free(cdb_k_backend *be);
/* Bytes held now, process-wide, by the optimized CPU backend's packed matrices
** (fp32 column panels, the last panel of each matrix zero-padded). */
size_t cdb_k_cpu_packed_bytes(void);
/* The GEMM path the optimized CPU backend uses: "avx512", "avx2" or "scalar". */
const char *cdb_k_cpu_gemm_path(void);
/* This machine's fp32 FMA rate on that path, measured now: n_threads (>= 1) threads
** each running independent vector FMA chains for about `seconds`; GFLOP/s (2 flops
** per lane per FMA), all threads together. For benchmarks' percent-of-peak figures. */
double cdb_k_cpu_fma_peak_gflops(int n_threads, double seconds);

/* ==== BATCHING ON A DEVICE ======================================================
** Host-side planning (kernels/batch.c; pure, built in every configuration). */

/* Items per batch that free_bytes of free device memory allow: what is left after a
** reserve of free_bytes / 8 (cuBLAS's workspace, the allocator's fragmentation, other
** processes) and fixed_bytes (the call's per-batch constant), divided by
** per_item_bytes, capped to [1, max_batch] (max_batch < 1 counts as 1). 1 when nothing
** fits (cdb_k_run_batched's halving then has the last word); max_batch when
** per_item_bytes is 0. */
int cdb_k_batch_from_free(size_t free_bytes, size_t fixed_bytes, size_t per_item_bytes,
                          int max_batch);

/* Free and total memory of be's device now (cudaMemGetInfo, through the CUDA runtime
** the backend loaded): CDB_UNSUPPORTED for the CPU backends (no device: a caller keeps
** its own batch), CDB_DEVICE when the driver cannot say. Either may be NULL. */
cdb_status cdb_k_device_memory(cdb_k_backend *be, size_t *free_b /* OUT */,
                               size_t *total_b /* OUT */);

/* Runs items [first, first + count) of a batched job; CDB_NOMEM when the device ran
** out of memory, leaving nothing half done that a rerun of the same items would not
** redo. */
typedef cdb_status (*cdb_k_batch_fn)(void *ctx, int first, int count);
/* Runs fn over items [0, n) in order, in batches of at most *batch (>= 1). A batch
** that fails with CDB_NOMEM is run again at half its size (rounded up), and again,
** down to one item; *batch keeps the smaller size for the rest of the run and is left
** at it, so the caller's next run starts there (logged at info). One item that still
** gets CDB_NOMEM, or any other error, stops the run: its status is returned and
** *done (may be NULL) holds the items finished before it. CDB_INVALID for n < 0,
** *batch < 1 or no fn. */
cdb_status cdb_k_run_batched(int n, int *batch, cdb_k_batch_fn fn, void *ctx,
                             int *done /* OUT */);

/* ==== CUDA =====================================================================
** The CUDA backend. Its kernels are private to kernels/cuda/. cuBLAS is loaded with
** dlopen on first use, so a binary built with CUDA starts on a machine with no
** driver and no CUDA libraries; there the constructor reports CDB_UNSUPPORTED
** (cdb_k_cuda_unusable_reason says why) instead of failing. */

/* The CUDA backend ("cuda"): fp16 weight matrices, fp32 biases/LayerNorm
** parameters/embeddings, fp32 residual stream, fp16 GEMM operands with fp32
** accumulation (cuBLAS, tensor cores), fp32 softmax and LayerNorm statistics. Owns
** its device context (a compute stream, a cuBLAS handle); ops from several threads
** are serialized by a mutex. CDB_UNSUPPORTED when not built with CUDA or the device
** is unusable (message says why). */
cdb_status cdb_k_backend_cuda_new(int device_index, cdb_k_backend **out /* OUT */);

/* ---- PIL 8-bit resampling (encoder/preprocess.c) ------------------------------------
** The two passes of PIL 9.4's ImagingResample for 8-bit bands, with coefficients the
** caller computed PIL's way (22-bit fixed point, CDB_K_RESAMPLE_PRECISION). Every
** sum starts at the rounding bias 1 << 21 and gives clip(sum >> 22, 0, 255). Integer
** arithmetic only: the AVX2 and scalar versions give identical bytes
** (tests/encoder/test_resample.c). Precondition: 255 * sum |taps| fits in int32, as
** for PIL's normalized taps (sum |k| <= ~1.3 * 2^22). Reentrant; dispatched by
** cdb_k_cpu_isa(). */
#define CDB_K_RESAMPLE_PRECISION 22

/* PIL's coefficients (precompute_coeffs + normalize_coeffs_8bpc; bicubic, or bilinear
** when `bilinear`) for the outputs [first, first + count) of an axis resized from
** in_size to out_size (the whole axis: 0, out_size): for output i, bounds[2i] is the
** first source index and bounds[2i+1] the tap count, kk + i*ksize its ksize taps in
** 22-bit fixed point.
** *bounds and *kk are heap (cdb_free). CDB_INVALID for an empty or outside window. */
cdb_status cdb_k_pil_coeffs(int in_size, int out_size, int first, int count, int bilinear,
                            int *ksize /* OUT */, int **bounds /* OUT */,
                            int32_t **kk /* OUT */);

/* Horizontal: nch channel planes (plane c at planes + c * plane_stride, contiguous
** source pixels); for output i, bounds[2i] is the first source pixel and bounds[2i+1]
** the tap count, kk + i*ksize the taps. out: n_out pixels of nch interleaved bytes. */
void cdb_k_resample_h_u8(const uint8_t *planes, size_t plane_stride, int nch,
                         const int *bounds, const int32_t *kk, int ksize, int n_out,
                         uint8_t *out /* OUT: n_out * nch */);
/* Vertical: out[j] = clip(bias + sum_y src[y * stride + j] * k[y]) for j < len, y < n. */
void cdb_k_resample_v_u8(const uint8_t *src, size_t stride, const int32_t *k, int n,
                         size_t len, uint8_t *out /* OUT: len */);
/* Splits n_px interleaved pixels of nch (1..4) bytes into planes. */
void cdb_k_deinterleave_u8(const uint8_t *src, size_t n_px, int nch,
                           uint8_t *planes /* OUT: nch * plane_stride */, size_t plane_stride);
/* The same split for gray+alpha (nch 2) or RGBA (nch 4) with the colour channels
** premultiplied on the way, as PIL's "La"/"RGBa" conversion: MULDIV255(c, a), i.e.
** t = c * a + 128, ((t >> 8) + t) >> 8; the alpha plane is copied. */
void cdb_k_premul_deinterleave_u8(const uint8_t *src, size_t n_px, int nch,
                                  uint8_t *planes /* OUT: nch * plane_stride */,
                                  size_t plane_stride);
/* The four kernels above as implemented for one ISA (suffix isa: scalar, avx2), with the
** same arguments. The scalar references are declared here, for differential tests; the
** AVX2 ones in kernels/cpu/resample_int.h. */
#define CDB_K_RESAMPLE_DECLARE(isa)                                                           \
    void cdb_k_resample_h_u8_##isa(const uint8_t *planes, size_t plane_stride, int nch,        \
                                   const int *bounds, const int32_t *kk, int ksize, int n_out, \
                                   uint8_t *out);                                             \
    void cdb_k_resample_v_u8_##isa(const uint8_t *src, size_t stride, const int32_t *k, int n, \
                                   size_t len, uint8_t *out);                                 \
    void cdb_k_deinterleave_u8_##isa(const uint8_t *src, size_t n_px, int nch,                 \
                                     uint8_t *planes, size_t plane_stride);                   \
    void cdb_k_premul_deinterleave_u8_##isa(const uint8_t *src, size_t n_px, int nch,          \
                                            uint8_t *planes, size_t plane_stride)
CDB_K_RESAMPLE_DECLARE(scalar);

#ifdef __cplusplus
}
#endif
#endif /* CDB_KERNELS_H */
