/*
** ingest.cu: GPU preprocessing of decoded images for ingestion, with overlap.
** Two slots, each a set of pinned host buffers + device buffers + two events.
** A call packs its images and PIL resize tables into the free slot's pinned
** memory (host work that overlaps whatever the GPU is still computing), queues
** the upload on the backend's copy stream, makes the compute stream wait for it
** and queues the resize/crop/normalize kernels there. A slot is reused only once
** the kernels that read it have run (event), so batch i+1 uploads while batch i
** is encoded.
*/
#include <string.h>
#include <unistd.h>

#include "kernels/cuda/cuda_backend.cuh"

typedef struct ingest_slot {
    uint8_t *h_src, *d_src;
    size_t src_cap;
    int32_t *h_tab, *d_tab;
    size_t tab_cap; /* int32 elements */
    cdb_kc_pre_desc *h_desc, *d_desc;
    uint8_t *d_tmp;
    size_t tmp_cap;
    cudaEvent_t uploaded, consumed;
    int used;
} ingest_slot;

struct cdb_k_cuda_ingest {
    cdb_kc_backend *b;
    int size, max_batch;
    int64_t max_pixels;
    float mean[3], std[3];
    ingest_slot slot[2];
    int cur;
    cdb_kc_resize_plan *plans; /* max_batch scratch plans */
};

static void slot_free_bufs(cdb_kc_ctx *c, ingest_slot *s, int src, int tab, int tmp) {
    if (src) {
        cdb_kc_host_free(s->h_src);
        cdb_kc_free(c, s->d_src);
        s->h_src = s->d_src = NULL;
        s->src_cap = 0;
    }
    if (tab) {
        cdb_kc_host_free(s->h_tab);
        cdb_kc_free(c, s->d_tab);
        s->h_tab = s->d_tab = NULL;
        s->tab_cap = 0;
    }
    if (tmp) {
        cdb_kc_free(c, s->d_tmp);
        s->d_tmp = NULL;
        s->tmp_cap = 0;
    }
}

extern "C" void cdb_k_cuda_ingest_free(cdb_k_cuda_ingest *ing) {
    if (!ing) return;
    if (ing->b) {
        cdb_kc_ctx *c = ing->b->c;
        (void)cdb_kc_ctx_bind(c);
        (void)cdb_kc_sync(c);
        for (int i = 0; i < 2; i++) {
            ingest_slot *s = &ing->slot[i];
            slot_free_bufs(c, s, 1, 1, 1);
            cdb_kc_host_free(s->h_desc);
            cdb_kc_free(c, s->d_desc);
            if (s->uploaded) (void)cudaEventDestroy(s->uploaded);
            if (s->consumed) (void)cudaEventDestroy(s->consumed);
        }
        (void)cudaGetLastError();
    }
    cdb_free(ing->plans);
    cdb_free(ing);
}

extern "C" cdb_status cdb_k_cuda_ingest_new(cdb_k_backend *be, int size, const float mean[3],
                                            const float std[3], int max_batch,
                                            int64_t max_pixels, cdb_k_cuda_ingest **out) {
    cdb_status rc = CDB_OK;
    cdb_k_cuda_ingest *ing = NULL;
    cdb_kc_backend *b = cdb_kc_backend_of(be);
    *out = NULL;
    if (!b) return cdb_errctx(CDB_INVALID, "GPU ingest");
    if (size < 1 || max_batch < 1 || max_batch > 65535 || !mean || !std)
        return cdb_seterr(CDB_INVALID, "GPU ingest: size %d, max_batch %d", size, max_batch);
    ing = (cdb_k_cuda_ingest *)cdb_calloc(1, sizeof *ing);
    if (!ing) return cdb_seterr(CDB_NOMEM, "GPU ingest: out of memory");
    ing->b = b;
    ing->size = size;
    ing->max_batch = max_batch;
    ing->max_pixels = max_pixels > 0 ? max_pixels : ((int64_t)1 << 40);
    memcpy(ing->mean, mean, sizeof ing->mean);
    memcpy(ing->std, std, sizeof ing->std);
    ing->plans = (cdb_kc_resize_plan *)cdb_calloc((size_t)max_batch, sizeof *ing->plans);
    if (!ing->plans) {
        rc = cdb_seterr(CDB_NOMEM, "GPU ingest: out of memory");
        goto done;
    }
    if ((rc = cdb_kc_ctx_bind(b->c)) != CDB_OK) goto done;
    for (int i = 0; i < 2; i++) {
        ingest_slot *s = &ing->slot[i];
        void *p = NULL;
        if ((rc = cdb_kc_host_alloc((size_t)max_batch * sizeof(cdb_kc_pre_desc), &p)) != CDB_OK)
            goto done;
        s->h_desc = (cdb_kc_pre_desc *)p;
        if ((rc = cdb_kc_malloc(b->c, (size_t)max_batch * sizeof(cdb_kc_pre_desc), &p)) != CDB_OK)
            goto done;
        s->d_desc = (cdb_kc_pre_desc *)p;
        CDB_CUDA_CHECK(cudaEventCreateWithFlags(&s->uploaded, cudaEventDisableTiming));
        CDB_CUDA_CHECK(cudaEventCreateWithFlags(&s->consumed, cudaEventDisableTiming));
    }
    *out = ing;
    ing = NULL;
done:
    cdb_k_cuda_ingest_free(ing);
    return rc;
}

/* Grows pinned + device buffer pairs (the slot is idle: its event has fired). */
static cdb_status grow(cdb_kc_ctx *c, void **h, void **d, size_t *cap, size_t need, size_t elem) {
    cdb_status rc;
    size_t cap2;
    if (need <= *cap) return CDB_OK;
    cap2 = need + need / 4;
    cdb_kc_host_free(*h);
    if (d) cdb_kc_free(c, *d);
    *h = NULL;
    if (d) *d = NULL;
    *cap = 0;
    if (h != NULL && (rc = cdb_kc_host_alloc(cap2 * elem, h)) != CDB_OK) return rc;
    if (d && (rc = cdb_kc_malloc(c, cap2 * elem, d)) != CDB_OK) return rc;
    *cap = cap2;
    return CDB_OK;
}

/* Copying decoded images into pinned memory is the host's main cost (about 1 MB
** per photo): split it over a few threads when there is enough of it. */
typedef struct pack_job {
    uint8_t *dst;
    const cdb_k_image_u8 *imgs;
    const cdb_kc_pre_desc *desc;
    int i0, i1;
} pack_job;

static void *pack_worker(void *arg) {
    const pack_job *j = (const pack_job *)arg;
    for (int i = j->i0; i < j->i1; i++)
        memcpy(j->dst + j->desc[i].src_off, j->imgs[i].rgb,
               (size_t)j->imgs[i].width * j->imgs[i].height * 3);
    return NULL;
}

static void pack_images(uint8_t *dst, const cdb_k_image_u8 *imgs, const cdb_kc_pre_desc *desc,
                        int n, size_t total) {
    enum { MAX_T = 8 };
    pthread_t th[MAX_T];
    pack_job job[MAX_T];
    int started[MAX_T] = {0};
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int nt = (int)(total / ((size_t)16 << 20)) + 1;
    if (nt > MAX_T) nt = MAX_T;
    if (ncpu > 0 && nt > ncpu) nt = (int)ncpu;
    if (nt > n) nt = n;
    if (nt < 1) nt = 1;
    for (int t = 0; t < nt; t++) {
        job[t].dst = dst, job[t].imgs = imgs, job[t].desc = desc;
        job[t].i0 = (int)((long long)n * t / nt);
        job[t].i1 = (int)((long long)n * (t + 1) / nt);
        if (t > 0) started[t] = pthread_create(&th[t], NULL, pack_worker, &job[t]) == 0;
    }
    pack_worker(&job[0]);
    for (int t = 1; t < nt; t++) {
        if (started[t])
            pthread_join(th[t], NULL);
        else
            pack_worker(&job[t]); /* thread creation failed: do it here */
    }
}

extern "C" cdb_status cdb_k_cuda_ingest_preprocess(cdb_k_cuda_ingest *ing,
                                                   const cdb_k_image_u8 *imgs, int n,
                                                   cdb_k_buf *pixels) {
    cdb_status rc = CDB_OK;
    cdb_kc_backend *b;
    cdb_kc_ctx *c;
    ingest_slot *s;
    size_t src_bytes = 0, tab_n = 0, tmp_bytes = 0, plane;
    int locked = 0, n_plans = 0, size;
    if (!ing || !pixels || n < 0 || (n > 0 && !imgs))
        return cdb_seterr(CDB_INVALID, "GPU ingest: bad arguments");
    if (n > ing->max_batch)
        return cdb_seterr(CDB_INVALID, "GPU ingest: %d images > max_batch %d", n, ing->max_batch);
    b = ing->b;
    c = b->c;
    size = ing->size;
    plane = (size_t)size * size;
    if (pixels->n < (size_t)n * 3 * plane || pixels->is_weight)
        return cdb_seterr(CDB_INVALID, "GPU ingest: pixel buffer holds %zu < %zu elements",
                          pixels->n, (size_t)n * 3 * plane);
    if (n == 0) return CDB_OK;
    if ((rc = cdb_kc_ctx_bind(c)) != CDB_OK) return rc;
    s = &ing->slot[ing->cur];
    ing->cur ^= 1;
    /* Plans (host arithmetic, no lock). */
    for (int i = 0; i < n; i++) {
        const cdb_k_image_u8 *im = &imgs[i];
        if (!im->rgb || im->width < 1 || im->height < 1) {
            rc = cdb_seterr(CDB_INVALID, "GPU ingest: image %d is empty", i);
            goto done;
        }
        if ((int64_t)im->width * im->height > ing->max_pixels) {
            rc = cdb_seterr(CDB_TOO_LARGE, "GPU ingest: image %d is %dx%d, over %lld pixels", i,
                            im->width, im->height, (long long)ing->max_pixels);
            goto done;
        }
        if ((rc = cdb_kc_resize_plan_new(im->width, im->height, size, &ing->plans[i])) != CDB_OK)
            goto done;
        n_plans++;
        src_bytes += ((size_t)im->width * im->height * 3 + 15) & ~(size_t)15;
        tab_n += 2 * (size_t)size + (size_t)size * (ing->plans[i].ksize_h + ing->plans[i].ksize_v);
        tmp_bytes += ((size_t)ing->plans[i].n_rows * size * 3 + 15) & ~(size_t)15;
    }
    /* The slot's previous batch must have been consumed before we overwrite it. */
    if (s->used) CDB_CUDA_CHECK(cudaEventSynchronize(s->consumed));
    s->used = 0;
    if ((rc = grow(c, (void **)&s->h_src, (void **)&s->d_src, &s->src_cap, src_bytes, 1)) != CDB_OK)
        goto done;
    if ((rc = grow(c, (void **)&s->h_tab, (void **)&s->d_tab, &s->tab_cap, tab_n, 4)) != CDB_OK)
        goto done;
    if (tmp_bytes > s->tmp_cap) {
        void *p = NULL;
        cdb_kc_free(c, s->d_tmp);
        s->d_tmp = NULL;
        s->tmp_cap = 0;
        if ((rc = cdb_kc_malloc(c, tmp_bytes + tmp_bytes / 4, &p)) != CDB_OK) goto done;
        s->d_tmp = (uint8_t *)p;
        s->tmp_cap = tmp_bytes + tmp_bytes / 4;
    }
    /* Pack into pinned memory. */
    {
        size_t so = 0, to = 0, mo = 0;
        for (int i = 0; i < n; i++) {
            const cdb_kc_resize_plan *pl = &ing->plans[i];
            cdb_kc_pre_desc *d = &s->h_desc[i];
            size_t ib = (size_t)imgs[i].width * imgs[i].height * 3;
            int32_t *t = s->h_tab + to;
            d->src_off = (int64_t)so;
            d->tmp_off = (int64_t)mo;
            d->tab_off = (int64_t)to;
            d->in_w = pl->in_w;
            d->row0 = pl->row0;
            d->n_rows = pl->n_rows;
            d->ksize_h = pl->ksize_h;
            d->ksize_v = pl->ksize_v;
            memcpy(t, pl->xmin, (size_t)size * 4);
            t += size;
            memcpy(t, pl->kh, (size_t)size * pl->ksize_h * 4);
            t += (size_t)size * pl->ksize_h;
            memcpy(t, pl->ymin, (size_t)size * 4);
            t += size;
            memcpy(t, pl->kv, (size_t)size * pl->ksize_v * 4);
            so += (ib + 15) & ~(size_t)15;
            to += 2 * (size_t)size + (size_t)size * (pl->ksize_h + pl->ksize_v);
            mo += ((size_t)pl->n_rows * size * 3 + 15) & ~(size_t)15;
        }
        pack_images(s->h_src, imgs, s->h_desc, n, src_bytes);
    }
    /* Queue: upload on the copy stream, kernels on the compute stream after it. */
    pthread_mutex_lock(&b->mu);
    locked = 1;
    CDB_CUDA_CHECK(cudaMemcpyAsync(s->d_src, s->h_src, src_bytes, cudaMemcpyHostToDevice, c->copy));
    CDB_CUDA_CHECK(cudaMemcpyAsync(s->d_tab, s->h_tab, tab_n * 4, cudaMemcpyHostToDevice, c->copy));
    CDB_CUDA_CHECK(cudaMemcpyAsync(s->d_desc, s->h_desc, (size_t)n * sizeof(cdb_kc_pre_desc),
                                   cudaMemcpyHostToDevice, c->copy));
    CDB_CUDA_CHECK(cudaEventRecord(s->uploaded, c->copy));
    CDB_CUDA_CHECK(cudaStreamWaitEvent(c->compute, s->uploaded, 0));
    if ((rc = cdb_kc_preprocess(c, s->d_src, s->d_desc, s->d_tab, s->d_tmp, n, size, ing->mean,
                                ing->std, (float *)pixels->d, NULL)) != CDB_OK)
        goto done;
    pixels->f32 = 1;
    CDB_CUDA_CHECK(cudaEventRecord(s->consumed, c->compute));
    s->used = 1;
done:
    if (locked) pthread_mutex_unlock(&b->mu);
    for (int i = 0; i < n_plans; i++) cdb_kc_resize_plan_free(&ing->plans[i]);
    return rc;
}
