/*
** cuda_backend.cuh: the CUDA backend's private structures (backend.cu implements
** the vtable of kernels/backend_impl.h over them).
*/
#ifndef CDB_KERNELS_CUDA_BACKEND_CUH
#define CDB_KERNELS_CUDA_BACKEND_CUH

#include <pthread.h>

#include "kernels/backend_impl.h"
#include "kernels/cuda/cuda_common.cuh"

/* A device array of n elements. Activation buffers are allocated with room for
** fp32 (4n bytes) and carry the type of their current contents (f32): ops write
** fp16 where the next consumer is a GEMM operand and fp32 for the residual
** stream, and convert on read, so the graph never sees the difference. Weight
** buffers are allocated at their storage type (fp16 matrices, fp32 parameters). */
struct cdb_k_buf {
    void *d;
    size_t n;
    size_t cap_bytes;
    int f32;       /* contents are fp32 (1) or fp16 (0) */
    int is_weight; /* read-only after upload */
};

#define CDB_KC_CACHE_SLOTS 32

/* nvJPEG's decoder of one backend (nvjpeg_decode.cu), made on first use: the hardware
** backend's handle and state when the device has the decoder (hw), and the default
** backend's (sw: every JPEG on a device without it, and what the hardware refuses);
** out: the decoded RGB of a batch (device). */
typedef struct cdb_kc_jpeg_dec {
    int tried, hw;
    void *h_hw, *st_hw, *h_sw, *st_sw;
    void *out;
    size_t out_cap;
} cdb_kc_jpeg_dec;

/* cdb_k_preprocess_u8's staging (pp_upload.cu): two slots, each a pinned host buffer
** and a device buffer of the same layout (an image's bytes, then its tables; the
** device one also holds the horizontal pass's output), filled in turn. copied[s]: the
** copy stream has read host[s]; consumed[s]: the compute stream has read dev[s]. */
typedef struct cdb_kc_pp_stage {
    cudaStream_t copy;
    void *host[2], *dev[2];
    size_t host_cap[2], dev_cap[2];
    cudaEvent_t copied[2], consumed[2];
    int ready; /* the stream and the events exist */
} cdb_kc_pp_stage;

typedef struct cdb_kc_backend {
    cdb_k_backend base; /* first: the graph calls base.ops */
    cdb_kc_ctx *c;
    pthread_mutex_t mu; /* serializes ops: they share the scratch and the stream */
    void *ws;           /* scratch for fp16 operand copies, attention */
    size_t ws_bytes;
    int32_t *d_idx; /* row indices uploaded for lookup_add / gather_rows */
    size_t idx_cap;
    /* Freed activation blocks kept for reuse (the graph allocates its scratch per
    ** call; cudaMalloc/cudaFree per call would synchronize and cost milliseconds).
    ** Reuse is safe without events: every op runs on the one compute stream. */
    void *cache_ptr[CDB_KC_CACHE_SLOTS];
    size_t cache_bytes[CDB_KC_CACHE_SLOTS];
    int n_cache;
    cdb_kc_pp_stage pp;
    cdb_kc_jpeg_dec jd;
} cdb_kc_backend;

#ifdef __cplusplus
extern "C" {
#endif
/* Grows the scratch to at least bytes (waits for queued work first). Caller holds mu. */
cdb_status cdb_kc_backend_ws(cdb_kc_backend *b, size_t bytes);
/* The preprocess_u8 slot (pp_upload.cu); takes mu itself. */
cdb_status cdb_kc_backend_preprocess_u8(cdb_k_backend *be, const cdb_k_pp_geom *g,
                                        const uint8_t *const *src, int n, cdb_k_buf *px,
                                        int at);
/* One image's transform into out (device, 3 x size x size floats) through staging slot
** i % 2: from host_src (its rows go up with its tables) or dev_src (already on the
** device, stride g->stride: only the tables go up). Caller holds mu, device bound. */
cdb_status cdb_kc_pp_one(cdb_kc_backend *b, int i, const cdb_k_pp_geom *g,
                         const uint8_t *host_src, const uint8_t *dev_src, float *out);
/* The jpeg_preprocess and jpeg_on_device slots (nvjpeg_decode.cu); the first takes mu. */
cdb_status cdb_kc_backend_jpeg_preprocess(cdb_k_backend *be, const cdb_k_pp_geom *g,
                                          const uint8_t *const *jpeg, const size_t *len,
                                          int n, cdb_k_buf *px, int at, cdb_status *item_rc);
int cdb_kc_backend_jpeg_on_device(const cdb_k_backend *be);
/* Frees b->jd (destroy; device bound, the streams idle). */
void cdb_kc_jpeg_dec_free(cdb_kc_backend *b);
/* Frees b->pp after waiting for its work (destroy; device bound). */
void cdb_kc_pp_stage_free(cdb_kc_backend *b);
#ifdef __cplusplus
}
#endif

#endif
