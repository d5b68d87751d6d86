/*
** index.c: the FAISS side of cdb_index: create from a plan (faiss_index_factory,
** inner product), train, add with ids, search parameters (ParameterSpace), and
** the single-file persistence with atomic replacement (a temp file, fsync, rename;
** a save also removes the temp files of saves killed before their rename). Also the coverage record
** (sorted distinct ids) that freshness and refresh decisions rely on.
**
** File layout (little-endian, the host order on every supported platform):
**   "CDBIDX01" | u32 version | u32 dim | u32 kind | i32 nlist | i32 pq_m |
**   i32 nprobe | i32 ef_search | i32 rerank | u64 watermark | i64 n_planned |
**   i64 n_train | i64 n_trained_for | char factory[128] | i64 n_cov | i64 ids[n_cov] |
**   FAISS index (faiss_write_index) | "CDBIDXND" | u64 XXH3-64 of the bytes before it
** An index whose lists are on disk names its lists file by the file's name alone: it is
** found at load in the index file's own folder, so a database folder can be moved.
*/
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <libgen.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>
#include <xxhash.h>

#include <faiss/c_api/AutoTune_c.h>
#include <faiss/c_api/error_c.h>
#include <faiss/c_api/impl/AuxIndexStructures_c.h>
#include <faiss/c_api/index_factory_c.h>
#include <faiss/c_api/index_io_c.h>

#include "index/index_int.h"
#include "kernels/kernels.h"

#define FILE_MAGIC "CDBIDX01"
#define FILE_END "CDBIDXND"
/* 2: an XXH3-64 of every byte before it ends the file, after the end mark: FAISS's reader
** trusts what it reads (one flipped byte of an HNSW graph crashed every search), so a
** file is handed to it only when the sum holds. Version 1 files (no sum) are refused:
** searches go exact until the next ingest, reindex or `index build` rebuilds them. */
#define FILE_VERSION 2u
#define ADD_CHUNK 65536

const char *cdb_index_faiss_reason_(const char *m) {
    const char *p = strstr(m, "Error: '");
    if (p && (p = strstr(p, "' failed: "))) return p + 10;
    if ((p = strstr(m, ": Error: "))) return p + 9;
    return m;
}

cdb_status cdb_index_faiss_err_(int frc, const char *what) {
    const char *m = faiss_get_last_error();
    (void)frc;
    if (!m) m = "(no message)";
    if (strstr(m, "bad_alloc") || strstr(m, "Cannot allocate"))
        return cdb_seterr(CDB_NOMEM, "faiss: %s: out of memory", what);
    return cdb_seterr(CDB_ERROR, "faiss: %s failed: %s", what, cdb_index_faiss_reason_(m));
}

/* ---- FAISS's own stderr lines ------------------------------------------------------------
** FAISS prints warnings ("WARNING clustering 500 points to 16 centroids: please provide
** at least 624 training points", once per k-means run) straight to stderr. Around a
** training call fd 2 goes to a memory file; afterwards the k-means warning is said once
** in clipdb's words, anything else is passed on as it was. */

typedef struct stderr_capture {
    int saved, mem;
} stderr_capture;

static void capture_begin(stderr_capture *c) {
    c->saved = c->mem = -1;
    fflush(stderr);
    if ((c->mem = memfd_create("faiss-stderr", MFD_CLOEXEC)) < 0) return;
    if ((c->saved = dup(STDERR_FILENO)) < 0 || dup2(c->mem, STDERR_FILENO) < 0) {
        if (c->saved >= 0) close(c->saved);
        close(c->mem);
        c->saved = c->mem = -1;
    }
}

static void capture_end(stderr_capture *c, const char *factory) {
    char buf[8192];
    ssize_t n;
    long long pts = 0, k = 0, want = 0;
    int warned = 0;
    if (c->mem < 0) return;
    fflush(stderr);
    dup2(c->saved, STDERR_FILENO);
    close(c->saved);
    n = pread(c->mem, buf, sizeof buf - 1, 0);
    close(c->mem);
    buf[n > 0 ? n : 0] = '\0';
    for (char *line = buf, *nl; *line; line = nl ? nl + 1 : line + strlen(line)) {
        if ((nl = strchr(line, '\n'))) *nl = '\0';
        if (sscanf(line, "WARNING clustering %lld points to %lld centroids: please provide at "
                         "least %lld", &pts, &k, &want) == 3) {
            if (!warned++)
                CDB_LOG_WARN("index: %s was trained on %lld vectors; FAISS's k-means would like "
                             "%lld for %lld clusters, so its lists may miss some neighbours "
                             "(searches re-rank exactly; 'flat' is exact at this size)",
                             factory, pts, want, k);
        } else if (*line && !strstr(line, "Error in ")) { /* errors come back as statuses */
            fprintf(stderr, "%s\n", line);
        }
    }
}

/* Below this many vectors per list on average, an IVF index probes every list. */
#define IVF_SMALL_LIST_AVG 32

int cdb_index_nprobe_effective_(const cdb_index_info *info, int64_t ntotal) {
    if (!info->nlist) return 0;
    if (ntotal < (int64_t)IVF_SMALL_LIST_AVG * info->nlist) return info->nlist;
    return info->nprobe < info->nlist ? info->nprobe : info->nlist;
}

cdb_status cdb_index_apply_params_(cdb_index *ix) {
    FaissParameterSpace *ps = NULL;
    cdb_status rc = CDB_OK;
    int frc, nprobe = cdb_index_nprobe_effective_(&ix->info, faiss_Index_ntotal(ix->fx));
    if (!nprobe && !ix->info.ef_search) return CDB_OK;
    if ((frc = faiss_ParameterSpace_new(&ps)) != 0) return cdb_index_faiss_err_(frc, "ParameterSpace");
    if (nprobe &&
        (frc = faiss_ParameterSpace_set_index_parameter(ps, ix->fx, "nprobe", nprobe)) != 0) {
        rc = cdb_index_faiss_err_(frc, "set nprobe");
        goto done;
    }
    if (ix->info.ef_search &&
        (frc = faiss_ParameterSpace_set_index_parameter(ps, ix->fx, "efSearch",
                                                         ix->info.ef_search)) != 0) {
        rc = cdb_index_faiss_err_(frc, "set efSearch");
        goto done;
    }
done:
    faiss_ParameterSpace_free(ps);
    return rc;
}

static cdb_status make_faiss(cdb_index *ix) {
    int frc = faiss_index_factory(&ix->fx, ix->info.dim, ix->info.factory, METRIC_INNER_PRODUCT);
    if (frc != 0) {
        ix->fx = NULL;
        return cdb_index_faiss_err_(frc, ix->info.factory);
    }
    if (ix->info.kind == CDB_INDEX_IVF_HNSW_PQ) {
        cdb_status rc = cdb_ivf_set_training_(ix->fx, IVF_HNSW_KMEANS_ITER,
                                              IVF_HNSW_TRAIN_PER_LIST);
        if (rc != CDB_OK) return rc;
    }
    return cdb_index_apply_params_(ix);
}

cdb_status cdb_index_new(const cdb_index_params *p, int64_t n_planned, cdb_index **out) {
    cdb_index *ix = NULL;
    cdb_status rc;
    if (!out) return cdb_seterr(CDB_INVALID, "cdb_index_new: out is NULL");
    *out = NULL;
    if (!(ix = cdb_calloc(1, sizeof *ix))) return cdb_seterr(CDB_NOMEM, "cdb_index_new");
    if ((rc = cdb_index_plan(n_planned, p, &ix->info)) != CDB_OK) goto fail;
    ix->n_trained_for = n_planned;
    if ((rc = make_faiss(ix)) != CDB_OK) goto fail;
    *out = ix;
    return CDB_OK;
fail:
    cdb_index_free(ix);
    return rc;
}

void cdb_index_free(cdb_index *ix) {
    if (!ix) return;
    if (ix->fx) faiss_Index_free(ix->fx);
    cdb_free(ix->cov);
    cdb_free(ix);
}

int cdb_index_is_trained(const cdb_index *ix) { return ix && faiss_Index_is_trained(ix->fx); }

/* Widens fp16 rows to fp32 for FAISS. */
static float *widen(const uint16_t *vecs, int64_t n, int dim) {
    float *x = cdb_malloc((size_t)n * (size_t)dim * sizeof(float));
    if (x) cdb_k_f16_to_f32(vecs, x, (size_t)n * (size_t)dim);
    return x;
}

cdb_status cdb_index_train(cdb_index *ix, const uint16_t *vecs, int64_t n) {
    float *x = NULL;
    int frc;
    if (!ix || (!vecs && n > 0) || n < 0) return cdb_seterr(CDB_INVALID, "cdb_index_train: bad arguments");
    if (faiss_Index_is_trained(ix->fx)) return CDB_OK;
    if (n == 0) return cdb_seterr(CDB_INVALID, "index %s needs training vectors", ix->info.factory);
    if (ix->info.pq_m > 0 && n < 256) /* 8-bit product-quantizer codebooks: 256 centroids */
        return cdb_seterr(CDB_INVALID,
                          "%s needs at least 256 vectors to train its codebooks, and there are "
                          "%lld (flat is exact and fast at this size)",
                          cdb_index_kind_name(ix->info.kind), (long long)n);
    if (ix->info.nlist > 0 && n < ix->info.nlist) /* k-means: a point per list at least */
        return cdb_seterr(CDB_INVALID,
                          "%s needs at least %d vectors to train its %d lists, and there are "
                          "%lld (flat is exact and fast at this size)",
                          cdb_index_kind_name(ix->info.kind), ix->info.nlist, ix->info.nlist,
                          (long long)n);
    if (!(x = widen(vecs, n, ix->info.dim))) return cdb_seterr(CDB_NOMEM, "train: %lld vectors", (long long)n);
    stderr_capture cap;
    capture_begin(&cap);
    frc = faiss_Index_train(ix->fx, n, x);
    capture_end(&cap, ix->info.factory);
    cdb_free(x);
    if (frc != 0) return cdb_index_faiss_err_(frc, "train");
    ix->n_trained_for = ix->info.n_planned > n ? ix->info.n_planned : n;
    return cdb_index_apply_params_(ix);
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

cdb_status cdb_index_cover_(cdb_index *ix, const int64_t *ids, int64_t n) {
    int64_t *add = NULL, *merged = NULL, na = 0, i = 0, j = 0, m = 0;
    if (n == 0) return CDB_OK;
    if (!(add = cdb_malloc((size_t)n * sizeof *add))) return cdb_seterr(CDB_NOMEM, "coverage");
    memcpy(add, ids, (size_t)n * sizeof *add);
    qsort(add, (size_t)n, sizeof *add, cmp_i64);
    for (i = 0; i < n; i++)
        if (na == 0 || add[na - 1] != add[i]) add[na++] = add[i];
    if (!(merged = cdb_malloc((size_t)(ix->n_cov + na) * sizeof *merged))) {
        cdb_free(add);
        return cdb_seterr(CDB_NOMEM, "coverage");
    }
    for (i = 0, j = 0; i < ix->n_cov || j < na;) {
        int64_t v;
        if (j >= na || (i < ix->n_cov && ix->cov[i] < add[j])) v = ix->cov[i++];
        else if (i >= ix->n_cov || add[j] < ix->cov[i]) v = add[j++];
        else v = ix->cov[i++], j++;
        merged[m++] = v;
    }
    cdb_free(ix->cov);
    cdb_free(add);
    ix->cov = merged;
    ix->n_cov = ix->cap_cov = m;
    return CDB_OK;
}

cdb_status cdb_index_add(cdb_index *ix, const int64_t *ids, const uint16_t *vecs, int64_t n) {
    float *x = NULL;
    cdb_status rc = CDB_OK;
    if (!ix || n < 0 || (n > 0 && (!ids || !vecs))) return cdb_seterr(CDB_INVALID, "cdb_index_add: bad arguments");
    if (!faiss_Index_is_trained(ix->fx))
        return cdb_seterr(CDB_INVALID, "index %s is not trained yet", ix->info.factory);
    for (int64_t i = 0; i < n; i++)
        if (ids[i] < 0) return cdb_seterr(CDB_INVALID, "id %lld < 0 at %lld", (long long)ids[i], (long long)i);
    /* the threads FAISS's own add would take (OpenMP's), at most CLIPDB_THREADS */
    int threads = omp_get_max_threads() < cdb_default_threads() ? omp_get_max_threads()
                                                                   : cdb_default_threads();
    for (int64_t off = 0; off < n; off += ADD_CHUNK) {
        int64_t c = n - off < ADD_CHUNK ? n - off : ADD_CHUNK;
        int frc, handled = 0;
        if (!(x = widen(vecs + (size_t)off * (size_t)ix->info.dim, c, ix->info.dim)))
            return cdb_seterr(CDB_NOMEM, "add: %lld vectors", (long long)c);
        rc = ix->faiss_add ? CDB_OK : cdb_ivf_add_(ix->fx, c, x, ids + off, threads, &handled);
        frc = rc == CDB_OK && !handled ? faiss_Index_add_with_ids(ix->fx, c, x, ids + off) : 0;
        cdb_free(x);
        if (rc != CDB_OK) return rc;
        if (frc != 0) return cdb_index_faiss_err_(frc, "add_with_ids");
        if ((rc = cdb_index_cover_(ix, ids + off, c)) != CDB_OK) return rc;
    }
    return cdb_index_apply_params_(ix); /* nprobe follows the size */
}

void cdb_index_set_faiss_add(cdb_index *ix, int faiss_add) {
    if (ix) ix->faiss_add = faiss_add != 0;
}

cdb_status cdb_index_remove(cdb_index *ix, const int64_t *ids, int64_t n) {
    FaissIDSelectorBatch *sel = NULL;
    int64_t *sorted = NULL, m = 0;
    size_t n_removed = 0;
    if (!ix || n < 0 || (n > 0 && !ids)) return cdb_seterr(CDB_INVALID, "cdb_index_remove: bad arguments");
    if (n == 0) return CDB_OK;
    if (!(sorted = cdb_malloc((size_t)n * sizeof *sorted))) return cdb_seterr(CDB_NOMEM, "remove");
    for (int64_t i = 0; i < n; i++) /* only what is covered */
        if (cdb_index_covers(ix, ids[i])) sorted[m++] = ids[i];
    if (m == 0) {
        cdb_free(sorted);
        return CDB_OK;
    }
    qsort(sorted, (size_t)m, sizeof *sorted, cmp_i64);
    if (faiss_IDSelectorBatch_new(&sel, (size_t)m, sorted) != 0) {
        cdb_free(sorted);
        return cdb_index_faiss_err_(1, "IDSelectorBatch");
    }
    /* Flat and IVF indexes drop the entries. HNSW cannot: its entries stay behind as
    ** tombstones that a search drops (the store no longer has them, or re-ranks the
    ** id from its current vector), counted as n_indexed - n_covered until a rebuild. */
    if (faiss_Index_remove_ids(ix->fx, (const FaissIDSelector *)sel, &n_removed) != 0)
        CDB_LOG_DEBUG("index %s keeps %lld removed entries as tombstones", ix->info.factory,
                      (long long)m);
    faiss_IDSelector_free((FaissIDSelector *)sel);
    /* coverage: a merge of two sorted lists */
    int64_t o = 0, k = 0;
    for (int64_t i = 0; i < ix->n_cov; i++) {
        while (k < m && sorted[k] < ix->cov[i]) k++;
        if (k < m && sorted[k] == ix->cov[i]) continue;
        ix->cov[o++] = ix->cov[i];
    }
    ix->n_cov = o;
    cdb_free(sorted);
    return CDB_OK;
}

static cdb_status check_source(const cdb_index_source *src) {
    if (!src || !src->read || src->n < 0) return cdb_seterr(CDB_INVALID, "index: bad source");
    return CDB_OK;
}

cdb_status cdb_index_train_source(cdb_index *ix, const cdb_index_source *src) {
    int64_t *ids = NULL, nt, got = 0, n_chunks;
    uint16_t *vecs = NULL;
    cdb_status rc;
    int dim;
    if (!ix) return cdb_seterr(CDB_INVALID, "cdb_index_train_source: index is NULL");
    if ((rc = check_source(src)) != CDB_OK) return rc;
    if (faiss_Index_is_trained(ix->fx)) return CDB_OK;
    dim = ix->info.dim;
    /* Evenly spread sample: chunks of up to 256 consecutive vectors. */
    nt = ix->info.n_train > 0 ? ix->info.n_train : src->n;
    if (nt > src->n) nt = src->n;
    n_chunks = (nt + 255) / 256;
    if (nt == 0)
        return cdb_seterr(CDB_INVALID, "index %s needs training vectors, source is empty",
                          ix->info.factory);
    if (!(ids = cdb_malloc((size_t)nt * sizeof *ids)) ||
        !(vecs = cdb_malloc((size_t)nt * (size_t)dim * 2))) {
        rc = cdb_seterr(CDB_NOMEM, "training sample");
        goto done;
    }
    for (int64_t c = 0; c < n_chunks && got < nt; c++) {
        int64_t pos = (int64_t)((double)c * (double)src->n / (double)n_chunks);
        int64_t len = nt - got < 256 ? nt - got : 256;
        if (pos + len > src->n) len = src->n - pos;
        if (len <= 0) continue;
        rc = src->read(src->ctx, pos, len, ids + got, vecs + (size_t)got * (size_t)dim);
        if (rc != CDB_OK) goto done;
        got += len;
    }
    rc = cdb_index_train(ix, vecs, got);
done:
    cdb_free(ids);
    cdb_free(vecs);
    return rc;
}

cdb_status cdb_index_add_source(cdb_index *ix, const cdb_index_source *src) {
    int64_t *ids = NULL;
    uint16_t *vecs = NULL;
    cdb_status rc;
    if (!ix) return cdb_seterr(CDB_INVALID, "cdb_index_add_source: index is NULL");
    if ((rc = check_source(src)) != CDB_OK) return rc;
    if (!(ids = cdb_malloc((size_t)ADD_CHUNK * sizeof *ids)) ||
        !(vecs = cdb_malloc((size_t)ADD_CHUNK * (size_t)ix->info.dim * 2))) {
        rc = cdb_seterr(CDB_NOMEM, "add buffer");
        goto done;
    }
    for (int64_t pos = 0; pos < src->n; pos += ADD_CHUNK) {
        int64_t len = src->n - pos < ADD_CHUNK ? src->n - pos : ADD_CHUNK;
        if ((rc = src->read(src->ctx, pos, len, ids, vecs)) != CDB_OK) goto done;
        if ((rc = cdb_index_add(ix, ids, vecs, len)) != CDB_OK) goto done;
    }
done:
    cdb_free(ids);
    cdb_free(vecs);
    return rc;
}

cdb_status cdb_index_build(const cdb_index_params *p, const cdb_index_source *src,
                           cdb_index **out) {
    cdb_index *ix = NULL;
    cdb_status rc;
    if (!out) return cdb_seterr(CDB_INVALID, "cdb_index_build: out is NULL");
    *out = NULL;
    if ((rc = check_source(src)) != CDB_OK) return rc;
    if ((rc = cdb_index_new(p, src->n, &ix)) != CDB_OK) return rc;
    if ((rc = cdb_index_train_source(ix, src)) != CDB_OK ||
        (rc = cdb_index_add_source(ix, src)) != CDB_OK) {
        cdb_index_free(ix);
        return rc;
    }
    *out = ix;
    return CDB_OK;
}

typedef struct arrays_src { const int64_t *ids; const uint16_t *vecs; int dim; } arrays_src;

static cdb_status arrays_read(void *ctx, int64_t pos, int64_t n, int64_t *ids, uint16_t *vecs) {
    const arrays_src *a = ctx;
    memcpy(ids, a->ids + pos, (size_t)n * sizeof *ids);
    memcpy(vecs, a->vecs + (size_t)pos * (size_t)a->dim, (size_t)n * (size_t)a->dim * 2);
    return CDB_OK;
}

cdb_status cdb_index_build_arrays(const cdb_index_params *p, const int64_t *ids, const uint16_t *vecs,
                                  int64_t n, cdb_index **out) {
    arrays_src a;
    cdb_index_source src;
    if (!p || n < 0 || (n > 0 && (!ids || !vecs))) {
        if (out) *out = NULL;
        return cdb_seterr(CDB_INVALID, "cdb_index_build_arrays: bad arguments");
    }
    a.ids = ids, a.vecs = vecs, a.dim = p->dim;
    src.n = n, src.read = arrays_read, src.ctx = &a;
    return cdb_index_build(p, &src, out);
}

/* ---- coverage and parameters ---------------------------------------------------- */

void cdb_index_set_watermark(cdb_index *ix, uint64_t w) { if (ix) ix->info.watermark = w; }
uint64_t cdb_index_watermark(const cdb_index *ix) { return ix ? ix->info.watermark : 0; }
int cdb_index_dim(const cdb_index *ix) { return ix ? ix->info.dim : 0; }
int64_t cdb_index_count(const cdb_index *ix) { return ix ? ix->n_cov : 0; }

int cdb_index_covers(const cdb_index *ix, int64_t id) {
    int64_t lo = 0, hi;
    if (!ix) return 0;
    hi = ix->n_cov;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (ix->cov[mid] < id) lo = mid + 1;
        else hi = mid;
    }
    return lo < ix->n_cov && ix->cov[lo] == id;
}

void cdb_index_get_info(const cdb_index *ix, cdb_index_info *out) {
    if (!out) return;
    if (!ix) { memset(out, 0, sizeof *out); return; }
    *out = ix->info;
    out->n_indexed = faiss_Index_ntotal(ix->fx);
    out->n_covered = ix->n_cov;
    if (!out->est_bytes) /* a loaded file: estimated from what it holds */
        out->est_bytes = cdb_index_estimate_bytes_(out->kind, out->n_indexed, out->dim, out->nlist,
                                                   out->pq_m);
}

cdb_status cdb_index_set_search_params(cdb_index *ix, int nprobe, int ef_search, int rerank_factor) {
    if (!ix) return cdb_seterr(CDB_INVALID, "set_search_params: index is NULL");
    if (nprobe < 0 || ef_search < 0 || rerank_factor < 0)
        return cdb_seterr(CDB_INVALID, "set_search_params: negative value");
    if (nprobe && !ix->info.nlist) return cdb_seterr(CDB_UNSUPPORTED, "nprobe: %s is not an IVF index", ix->info.factory);
    if (ef_search && !strstr(ix->info.factory, "HNSW"))
        return cdb_seterr(CDB_UNSUPPORTED, "efSearch: %s is not an HNSW index", ix->info.factory);
    if (nprobe) ix->info.nprobe = nprobe < ix->info.nlist ? nprobe : ix->info.nlist;
    if (ef_search) ix->info.ef_search = ef_search;
    if (rerank_factor) ix->info.rerank_factor = rerank_factor;
    return cdb_index_apply_params_(ix);
}

/* ---- persistence ------------------------------------------------------------------ */

typedef struct file_hdr {
    char magic[8];
    uint32_t version, dim, kind;
    int32_t nlist, pq_m, nprobe, ef_search, rerank;
    uint64_t watermark;
    int64_t n_planned, n_train, n_trained_for;
    char factory[128];
    int64_t n_cov;
} file_hdr;

cdb_status cdb_index_fsync_dir_(const char *path) {
    char *copy = cdb_strdup(path);
    int fd;
    if (!copy) return cdb_seterr(CDB_NOMEM, "fsync_dir");
    fd = open(dirname(copy), O_RDONLY | O_DIRECTORY);
    cdb_free(copy);
    if (fd < 0) return CDB_OK; /* best effort: some filesystems refuse */
    (void)fsync(fd);
    close(fd);
    return CDB_OK;
}

/* Removes "<path>.tmp.<pid>[.<n>]" files left by saves that were killed before their
** rename (their pid is gone; cdb_tmp_create's names). Best effort: a failure leaves a stray file, never
** a broken index, since the index itself is only ever replaced by rename. */
void cdb_index_remove_stale_temps_(const char *path) {
    char *copy = cdb_strdup(path), *dir, *base;
    size_t base_len;
    DIR *d;
    struct dirent *e;
    if (!copy) return;
    base = strrchr(copy, '/');
    if (base) {
        *base++ = '\0';
        dir = *copy ? copy : "/";
    } else {
        base = copy;
        dir = ".";
    }
    base_len = strlen(base);
    if ((d = opendir(dir))) {
        while ((e = readdir(d))) {
            const char *p = e->d_name;
            long pid;
            if (strncmp(p, base, base_len) || strncmp(p + base_len, ".tmp.", 5)) continue;
            pid = cdb_tmp_owner_pid(p + base_len + 5);
            if (pid <= 0 || pid == (long)getpid()) continue;
            if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue; /* alive (or not ours) */
            {
                size_t n = strlen(dir) + strlen(p) + 2;
                char *full = cdb_malloc(n);
                if (full) {
                    snprintf(full, n, "%s/%s", dir, p);
                    (void)unlink(full);
                    cdb_free(full);
                }
            }
        }
        closedir(d);
    }
    cdb_free(copy);
}

/* XXH3-64 of the first n bytes of the file open as fd (read with pread: the descriptor's
** offset, and a FILE's buffer over it, are left alone). 0, or -1 with errno. */
static int sum_prefix(int fd, uint64_t n, uint64_t *sum) {
    XXH3_state_t *st = XXH3_createState();
    static const size_t chunk = (size_t)1 << 20;
    unsigned char *buf = malloc(chunk);
    int rc = st && buf && XXH3_64bits_reset(st) == XXH_OK ? 0 : -1;
    for (uint64_t at = 0; rc == 0 && at < n;) {
        size_t want = n - at < chunk ? (size_t)(n - at) : chunk;
        ssize_t r = pread(fd, buf, want, (off_t)at);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            if (r == 0) errno = EIO;
            rc = -1;
        } else {
            XXH3_64bits_update(st, buf, (size_t)r);
            at += (uint64_t)r;
        }
    }
    if (rc == 0) *sum = XXH3_64bits_digest(st);
    XXH3_freeState(st);
    free(buf);
    return rc;
}

/* Writes path's stamp (core.h's cdb_stamp: <path>.ok) for the file with stat st whose
** body sums to sum, when path still names that file. Best effort: without a stamp the
** next refresh loads the file to learn that it is current (cdb_index_file_head). */
static void write_stamp(const char *path, const struct stat *st, uint64_t sum) {
    char p[4200];
    cdb_stamp due = cdb_stamp_of(st, (const uint64_t[2]){sum, 0});
    if (cdb_stamp_path(path, p, sizeof p) != 0) return;
    cdb_index_remove_stale_temps_(p);
    (void)cdb_stamp_write(path, &due);
}

cdb_status cdb_index_save(const cdb_index *ix, const char *path) {
    char *tmp = NULL;
    FILE *f = NULL;
    cdb_status rc = CDB_OK;
    file_hdr h;
    size_t len;
    int frc;
    if (!ix || !path) return cdb_seterr(CDB_INVALID, "cdb_index_save: bad arguments");
    cdb_index_remove_stale_temps_(path);
    len = strlen(path) + 48;
    if (!(tmp = cdb_malloc(len))) return cdb_seterr(CDB_NOMEM, "save");
    int fd = cdb_tmp_create(path, tmp, len); /* never a link planted at the name */
    if (fd < 0 || !(f = fdopen(fd, "w+b"))) {
        rc = cdb_seterr(cdb_errno_status(errno), "create %s: %s", tmp, strerror(errno));
        if (fd >= 0) close(fd);
        else *tmp = '\0'; /* nothing of ours to remove */
        goto done;
    }
    memset(&h, 0, sizeof h);
    memcpy(h.magic, FILE_MAGIC, 8);
    h.version = FILE_VERSION, h.dim = (uint32_t)ix->info.dim, h.kind = (uint32_t)ix->info.kind;
    h.nlist = ix->info.nlist, h.pq_m = ix->info.pq_m, h.nprobe = ix->info.nprobe;
    h.ef_search = ix->info.ef_search, h.rerank = ix->info.rerank_factor;
    h.watermark = ix->info.watermark, h.n_planned = ix->info.n_planned;
    h.n_train = ix->info.n_train, h.n_trained_for = ix->n_trained_for;
    memcpy(h.factory, ix->info.factory, sizeof h.factory);
    h.n_cov = ix->n_cov;
    if (fwrite(&h, sizeof h, 1, f) != 1 ||
        (ix->n_cov && fwrite(ix->cov, sizeof *ix->cov, (size_t)ix->n_cov, f) != (size_t)ix->n_cov)) {
        rc = cdb_seterr(cdb_errno_status(errno), "write %s: %s", tmp, strerror(errno));
        goto done;
    }
    char *lists_name = NULL; /* the lists file (on disk) named in the index's folder */
    if ((rc = cdb_ivf_lists_name_(ix->fx, path, &lists_name)) != CDB_OK) goto done;
    errno = 0;
    frc = faiss_write_index(ix->fx, f);
    int e = errno; /* FAISS's writer failed on fwrite: a full disk sets ENOSPC */
    cdb_ivf_lists_name_restore_(ix->fx, lists_name);
    if (frc != 0) {
        cdb_index_faiss_err_(frc, "write_index");
        rc = cdb_errctx(e ? cdb_errno_status(e) : CDB_IO, "%s", tmp);
        goto done;
    }
    uint64_t sum = 0;
    long body;
    if (fwrite(FILE_END, 8, 1, f) != 1 || fflush(f) != 0 || (body = ftell(f)) < 0 ||
        sum_prefix(fileno(f), (uint64_t)body, &sum) != 0 || fwrite(&sum, 8, 1, f) != 1 ||
        fflush(f) != 0 || fsync(fileno(f)) != 0) {
        rc = cdb_seterr(cdb_errno_status(errno), "write %s: %s", tmp, strerror(errno));
        goto done;
    }
    if (fclose(f) != 0) { f = NULL; rc = cdb_seterr(cdb_errno_status(errno), "close %s: %s", tmp, strerror(errno)); goto done; }
    f = NULL;
    if (rename(tmp, path) != 0) { rc = cdb_seterr(CDB_IO, "rename %s -> %s: %s", tmp, path, strerror(errno)); goto done; }
    rc = cdb_index_fsync_dir_(path);
    if (rc == CDB_OK) { /* every byte was just written and summed: vouched for */
        struct stat st;
        if (stat(path, &st) == 0) write_stamp(path, &st, sum);
    }
done:
    if (f) fclose(f);
    if (rc != CDB_OK && tmp && *tmp) unlink(tmp);
    cdb_free(tmp);
    return rc;
}

/* Opens path and reads its header, checked: *fp is left open after it on success. */
static cdb_status open_with_header(const char *path, FILE **fp, file_hdr *h) {
    FILE *f;
    cdb_status rc = CDB_OK;
    *fp = NULL;
    int fd = cdb_open_regular(path, 0); /* a link or a FIFO at the name is no index */
    if (fd < 0 || !(f = fdopen(fd, "rb"))) {
        int e = errno;
        if (fd >= 0) close(fd);
        return cdb_seterr(e == ENOENT ? CDB_NOTFOUND : e == ELOOP || e == EINVAL ? CDB_CORRUPT
                                                                                  : CDB_IO,
                          "open %s: %s", path, e == EINVAL ? "not a regular file" : strerror(e));
    }
    if (fread(h, sizeof *h, 1, f) != 1 || memcmp(h->magic, FILE_MAGIC, 8))
        rc = cdb_seterr(CDB_CORRUPT, "%s: not a clipdb index file", path);
    else if (h->version != FILE_VERSION && h->version != 1u)
        rc = cdb_seterr(CDB_VERSION, "%s: index file version %u, expected %u", path, h->version, FILE_VERSION);
    else if (h->dim == 0 || h->dim > (1u << 20) || h->n_cov < 0 ||
             h->kind > CDB_INDEX_IVF_HNSW_PQ ||
             memchr(h->factory, 0, sizeof h->factory) == NULL)
        rc = cdb_seterr(CDB_CORRUPT, "%s: damaged header", path);
    if (rc != CDB_OK) fclose(f);
    else *fp = f;
    return rc;
}

/* The whole file's sum against its last 8 bytes (FILE_VERSION 2), before FAISS reads a
** byte of it. */
static cdb_status check_sum(const char *path, FILE *f, const file_hdr *h, struct stat *st_out,
                            uint64_t *sum_out) {
    struct stat st;
    uint64_t want = 0, got = 0;
    if (h->version != FILE_VERSION)
        return cdb_seterr(CDB_VERSION, "%s: index file version %u has no checksum; the next "
                          "ingest, reindex or `clipdb index build` rebuilds it", path, h->version);
    if (fstat(fileno(f), &st) != 0 || st.st_size < (off_t)(sizeof *h + 16))
        return cdb_seterr(CDB_CORRUPT, "%s: truncated", path);
    uint64_t body = (uint64_t)st.st_size - 8;
    if (pread(fileno(f), &want, 8, (off_t)body) != 8 || sum_prefix(fileno(f), body, &got) != 0)
        return cdb_seterr(CDB_IO, "read %s: %s", path, strerror(errno));
    if (got != want)
        return cdb_seterr(CDB_CORRUPT, "%s: damaged (checksum mismatch)", path);
    *st_out = st;
    *sum_out = want;
    return CDB_OK;
}

cdb_status cdb_index_file_kind(const char *path, cdb_index_kind *kind) {
    FILE *f;
    file_hdr h;
    cdb_status rc;
    if (!path || !kind) return cdb_seterr(CDB_INVALID, "cdb_index_file_kind: bad arguments");
    if ((rc = open_with_header(path, &f, &h)) != CDB_OK) return rc;
    fclose(f);
    *kind = (cdb_index_kind)h.kind;
    return CDB_OK;
}

cdb_status cdb_index_file_head(const char *path, cdb_index_head *out) {
    FILE *f;
    file_hdr h;
    struct stat st;
    uint64_t sum = 0;
    cdb_status rc;
    if (!path || !out) return cdb_seterr(CDB_INVALID, "cdb_index_file_head: bad arguments");
    memset(out, 0, sizeof *out);
    if ((rc = open_with_header(path, &f, &h)) != CDB_OK) return rc;
    out->kind = (cdb_index_kind)h.kind;
    out->dim = (int)h.dim;
    out->nlist = h.nlist;
    out->watermark = h.watermark;
    out->n_covered = h.n_cov;
    out->n_trained_for = h.n_trained_for;
    /* the sum the file ends with, which its stamp must name too */
    out->vouched = h.version == FILE_VERSION && fstat(fileno(f), &st) == 0 &&
                   st.st_size >= (off_t)(sizeof h + 16) &&
                   pread(fileno(f), &sum, 8, (off_t)st.st_size - 8) == 8 &&
                   cdb_stamp_matches(path, &st, (const uint64_t[2]){sum, 0});
    fclose(f);
    return CDB_OK;
}

void cdb_index_stamp(const cdb_index *ix, const char *path) {
    char p[4200];
    if (!ix || !ix->has_loaded || !path || cdb_stamp_path(path, p, sizeof p) != 0) return;
    cdb_index_remove_stale_temps_(p);
    (void)cdb_stamp_write(path, &ix->loaded);
}

cdb_status cdb_index_load(const char *path, cdb_index **out) {
    FILE *f = NULL;
    cdb_index *ix = NULL;
    cdb_status rc = CDB_OK;
    file_hdr h;
    struct stat st;
    uint64_t sum = 0;
    char end[8];
    if (!path || !out) return cdb_seterr(CDB_INVALID, "cdb_index_load: bad arguments");
    *out = NULL;
    if ((rc = open_with_header(path, &f, &h)) != CDB_OK) return rc;
    if ((rc = check_sum(path, f, &h, &st, &sum)) != CDB_OK) goto done;
    if (!(ix = cdb_calloc(1, sizeof *ix))) { rc = cdb_seterr(CDB_NOMEM, "load"); goto done; }
    ix->loaded = cdb_stamp_of(&st, (const uint64_t[2]){sum, 0});
    ix->has_loaded = 1;
    ix->info.kind = (cdb_index_kind)h.kind, ix->info.dim = (int)h.dim;
    memcpy(ix->info.factory, h.factory, sizeof h.factory);
    ix->info.nlist = h.nlist, ix->info.pq_m = h.pq_m, ix->info.nprobe = h.nprobe;
    ix->info.ef_search = h.ef_search, ix->info.rerank_factor = h.rerank;
    ix->info.watermark = h.watermark, ix->info.n_planned = h.n_planned, ix->info.n_train = h.n_train;
    ix->n_trained_for = h.n_trained_for;
    snprintf(ix->info.reason, sizeof ix->info.reason, "loaded from %s", path);
    if (h.n_cov > 0) {
        if (!(ix->cov = cdb_malloc((size_t)h.n_cov * sizeof *ix->cov))) { rc = cdb_seterr(CDB_NOMEM, "load ids"); goto done; }
        if (fread(ix->cov, sizeof *ix->cov, (size_t)h.n_cov, f) != (size_t)h.n_cov) {
            rc = cdb_seterr(CDB_CORRUPT, "%s: truncated id list", path);
            goto done;
        }
        ix->n_cov = ix->cap_cov = h.n_cov;
    }
    if ((rc = cdb_ivf_read_(f, path, &ix->fx)) != CDB_OK) {
        ix->fx = NULL;
        rc = cdb_errctx(CDB_CORRUPT, "%s", path);
        goto done;
    }
    if (fread(end, 8, 1, f) != 1 || memcmp(end, FILE_END, 8)) { rc = cdb_seterr(CDB_CORRUPT, "%s: truncated (no end mark)", path); goto done; }
    if (faiss_Index_d(ix->fx) != ix->info.dim) { rc = cdb_seterr(CDB_CORRUPT, "%s: FAISS dim %d != header dim %d", path, faiss_Index_d(ix->fx), ix->info.dim); goto done; }
    if ((rc = cdb_ivf_ondisk_check_(ix->fx)) != CDB_OK) {
        rc = cdb_errctx(rc, "%s", path);
        goto done;
    }
    ix->info.mem_budget_bytes = 0;
    rc = cdb_index_apply_params_(ix);
done:
    if (f) fclose(f);
    if (rc != CDB_OK) cdb_index_free(ix);
    else *out = ix;
    return rc;
}
