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
} cdb_kc_backend;

#ifdef __cplusplus
extern "C" {
#endif
/* Grows the scratch to at least bytes (waits for queued work first). Caller holds mu. */
cdb_status cdb_kc_backend_ws(cdb_kc_backend *b, size_t bytes);
#ifdef __cplusplus
}
#endif

#endif
