/*
** pp_upload.cu: cdb_k_preprocess_u8 on the CUDA backend. Decoded 8-bit images go up
** through two pinned staging buffers on a copy stream of their own: while the compute
** stream transforms image i (preprocess.cu) out of device slot i % 2, the host packs
** image i + 1 into the other pinned slot and the copy stream moves it up, so the
** PCIe copy overlaps the transform and the host's packing. A slot is reused only once
** the copy stream has read its host half (event copied) and the compute stream its
** device half (event consumed). Each slot carries an image's rows (only those its
** passes read, tightly strided) followed by its tables, so one copy moves both.
*/
#include <string.h>

#include "kernels/cuda/cuda_backend.cuh"
#include "kernels/cuda/pp_elem.h"

#define PP_ALIGN 256 /* every part of a slot starts on this boundary */

static size_t pp_round(size_t n) { return (n + PP_ALIGN - 1) / PP_ALIGN * PP_ALIGN; }

/* Where an image's parts lie in its slot, and the source rows [row0, row0 + nrows)
** that it carries. */
typedef struct pp_layout {
    int row0, nrows;
    size_t row_bytes;
    size_t o_bh, o_kkh, o_bv, o_kkv, o_lut, copy_bytes, o_tmp, dev_bytes;
} pp_layout;

static void pp_layout_of(const cdb_k_pp_geom *g, int src_on_device, pp_layout *l) {
    size_t o;
    l->row_bytes = (size_t)g->w * g->nch;
    if (src_on_device) /* the source is read where it lies: the slot carries the tables */
        l->row0 = 0, l->nrows = 0;
    else if (g->kh) /* the horizontal pass reads rows [y0, y0 + rows) only */
        l->row0 = g->y0, l->nrows = g->rows;
    else if (!g->kv) /* a plain crop: its own rows */
        l->row0 = g->top, l->nrows = g->size;
    else /* vertical pass only: its taps index the whole image */
        l->row0 = 0, l->nrows = g->h;
    o = pp_round(l->row_bytes * (size_t)l->nrows);
    l->o_bh = o, o += pp_round(g->kh ? sizeof(int) * 2 * (size_t)g->size : 0);
    l->o_kkh = o, o += pp_round(sizeof(int32_t) * (size_t)g->size * (size_t)g->kh);
    l->o_bv = o, o += pp_round(g->kv ? sizeof(int) * 2 * (size_t)g->size : 0);
    l->o_kkv = o, o += pp_round(sizeof(int32_t) * (size_t)g->size * (size_t)g->kv);
    l->o_lut = o, o += pp_round(sizeof(float) * 3 * 256);
    l->copy_bytes = o;
    l->o_tmp = o;
    l->dev_bytes = o + pp_round(g->kh ? (size_t)g->rows * g->size * g->nch : 0);
}

static cdb_status pp_stage_init(cdb_kc_pp_stage *s) {
    cdb_status rc = CDB_OK;
    if (s->ready) return CDB_OK;
    CDB_CUDA_CHECK(cudaStreamCreateWithFlags(&s->copy, cudaStreamNonBlocking));
    for (int i = 0; i < 2; i++) {
        CDB_CUDA_CHECK(cudaEventCreateWithFlags(&s->copied[i], cudaEventDisableTiming));
        CDB_CUDA_CHECK(cudaEventCreateWithFlags(&s->consumed[i], cudaEventDisableTiming));
    }
    s->ready = 1;
done:
    return rc;
}

/* Slot k with room for l; an older, smaller one is freed once its work is done. */
static cdb_status pp_slot_fit(cdb_kc_pp_stage *s, int k, const pp_layout *l) {
    cdb_status rc = CDB_OK;
    if (s->host_cap[k] >= l->copy_bytes && s->dev_cap[k] >= l->dev_bytes) return CDB_OK;
    CDB_CUDA_CHECK(cudaEventSynchronize(s->copied[k]));
    CDB_CUDA_CHECK(cudaEventSynchronize(s->consumed[k]));
    if (s->host_cap[k] < l->copy_bytes) {
        size_t cap = l->copy_bytes + l->copy_bytes / 4;
        (void)cudaFreeHost(s->host[k]);
        s->host[k] = NULL, s->host_cap[k] = 0;
        CDB_CUDA_CHECK(cudaHostAlloc(&s->host[k], cap, cudaHostAllocDefault));
        s->host_cap[k] = cap;
    }
    if (s->dev_cap[k] < l->dev_bytes) {
        size_t cap = l->dev_bytes + l->dev_bytes / 4;
        (void)cudaFree(s->dev[k]);
        s->dev[k] = NULL, s->dev_cap[k] = 0;
        CDB_CUDA_CHECK(cudaMalloc(&s->dev[k], cap));
        s->dev_cap[k] = cap;
    }
done:
    return rc;
}

/* Packs image g/src (NULL: on the device, not carried) into host slot h as l says. */
static void pp_pack(const cdb_k_pp_geom *g, const uint8_t *src, const pp_layout *l,
                    uint8_t *h) {
    for (int r = 0; r < l->nrows && src; r++)
        memcpy(h + (size_t)r * l->row_bytes, src + (size_t)(l->row0 + r) * g->stride,
               l->row_bytes);
    if (g->kh) {
        memcpy(h + l->o_bh, g->bh, sizeof(int) * 2 * (size_t)g->size);
        memcpy(h + l->o_kkh, g->kkh, sizeof(int32_t) * (size_t)g->size * g->kh);
    }
    if (g->kv) {
        memcpy(h + l->o_bv, g->bv, sizeof(int) * 2 * (size_t)g->size);
        memcpy(h + l->o_kkv, g->kkv, sizeof(int32_t) * (size_t)g->size * g->kv);
    }
    memcpy(h + l->o_lut, g->lut, sizeof(float) * 3 * 256);
}

/* g as the kernels see it from device slot d: tables in the slot, the source rows
** re-based on row0 when the slot carries them. */
static cdb_k_pp_geom pp_dev_geom(const cdb_k_pp_geom *g, const pp_layout *l, uint8_t *d) {
    cdb_k_pp_geom dg = *g;
    if (l->nrows) {
        dg.h = l->nrows;
        dg.stride = l->row_bytes;
        if (g->kh) dg.y0 = 0;
        else if (!g->kv) dg.top = 0;
    }
    dg.bh = g->kh ? (const int *)(d + l->o_bh) : NULL;
    dg.kkh = g->kh ? (const int32_t *)(d + l->o_kkh) : NULL;
    dg.bv = g->kv ? (const int *)(d + l->o_bv) : NULL;
    dg.kkv = g->kv ? (const int32_t *)(d + l->o_kkv) : NULL;
    dg.lut = (const float *)(d + l->o_lut);
    return dg;
}

extern "C" cdb_status cdb_kc_pp_one(cdb_kc_backend *b, int i, const cdb_k_pp_geom *g,
                                    const uint8_t *host_src, const uint8_t *dev_src,
                                    float *out) {
    cdb_kc_pp_stage *s = &b->pp;
    cdb_status rc = CDB_OK;
    const int k = i & 1;
    pp_layout l;
    cdb_k_pp_geom dg;
    if ((rc = pp_stage_init(s)) != CDB_OK) return rc;
    pp_layout_of(g, dev_src != NULL, &l);
    if ((rc = pp_slot_fit(s, k, &l)) != CDB_OK) return rc;
    CDB_CUDA_CHECK(cudaEventSynchronize(s->copied[k])); /* host[k] is free again */
    pp_pack(g, host_src, &l, (uint8_t *)s->host[k]);
    CDB_CUDA_CHECK(cudaStreamWaitEvent(s->copy, s->consumed[k], 0)); /* dev[k] too */
    CDB_CUDA_CHECK(cudaMemcpyAsync(s->dev[k], s->host[k], l.copy_bytes, cudaMemcpyHostToDevice,
                                   s->copy));
    CDB_CUDA_CHECK(cudaEventRecord(s->copied[k], s->copy));
    CDB_CUDA_CHECK(cudaStreamWaitEvent(b->c->compute, s->copied[k], 0));
    dg = pp_dev_geom(g, &l, (uint8_t *)s->dev[k]);
    rc = cdb_kc_pp_image(b->c, &dg, dev_src ? dev_src : (const uint8_t *)s->dev[k],
                         (uint8_t *)s->dev[k] + l.o_tmp, out);
    if (rc != CDB_OK) return rc;
    CDB_CUDA_CHECK(cudaEventRecord(s->consumed[k], b->c->compute));
done:
    return rc;
}

extern "C" cdb_status cdb_kc_backend_preprocess_u8(cdb_k_backend *be, const cdb_k_pp_geom *g,
                                                   const uint8_t *const *src, int n,
                                                   cdb_k_buf *px, int at) {
    cdb_kc_backend *b = (cdb_kc_backend *)be;
    cdb_status rc = CDB_OK;
    const size_t per = (size_t)3 * g[0].size * g[0].size;
    pthread_mutex_lock(&b->mu);
    if ((rc = cdb_kc_ctx_bind(b->c)) != CDB_OK) goto done;
    CDB_CUDA_CHECK_ARG(px->n / per >= (size_t)at + n, "preprocess_u8: images [%d, %d) need %zu "
                       "floats, the buffer holds %zu", at, at + n, per * ((size_t)at + n), px->n);
    /* fp32 contents: a fresh activation buffer, or one written by buf_upload (the
    ** encoder's other images); partial writes never change a buffer's type */
    CDB_CUDA_CHECK_ARG(px->f32 && !px->is_weight, "preprocess_u8: px is not an fp32 "
                       "activation buffer");
    for (int i = 0; i < n && rc == CDB_OK; i++)
        rc = cdb_kc_pp_one(b, i, &g[i], src[i], NULL, (float *)px->d + per * (size_t)(at + i));
done:
    pthread_mutex_unlock(&b->mu);
    return rc;
}

extern "C" void cdb_kc_pp_stage_free(cdb_kc_backend *b) {
    cdb_kc_pp_stage *s = &b->pp;
    if (!s->ready) return;
    (void)cudaStreamSynchronize(s->copy);
    if (b->c) (void)cudaStreamSynchronize(b->c->compute);
    for (int k = 0; k < 2; k++) {
        (void)cudaFreeHost(s->host[k]);
        (void)cudaFree(s->dev[k]);
        (void)cudaEventDestroy(s->copied[k]);
        (void)cudaEventDestroy(s->consumed[k]);
    }
    (void)cudaStreamDestroy(s->copy);
    (void)cudaGetLastError();
    memset(s, 0, sizeof *s);
}
