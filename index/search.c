/*
** search.c: the query side. Exact search over fp16 arrays (blocked, OpenMP over
** stored vectors, per-thread top-k heaps), FAISS candidates + exact fp32 re-rank
** from the store (through the caller's fetch callback), the merge with vectors the
** index does not cover yet, deletion filtering, and the query helpers (validation,
** weighted combination, normalization in fp32/double).
**
** Every score comes from cdb_k_dot_f16_f32 (or its batch/multi forms, which are
** bit-identical), clamped to [-1, 1]: whichever path found an item, its score is
** the same number.
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <faiss/c_api/Index_c.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "index/index_int.h"
#include "kernels/kernels.h"

#define EXACT_BLOCK 256
/* How far an approximate index's score may lie above the exact one (fp16 storage,
** quantizers): a filtered search stops widening below min_score minus this. */
#define SCORE_MARGIN 0.05f

static inline float clamp_score(float s) { return s > 1.0f ? 1.0f : s < -1.0f ? -1.0f : s; }

/* a ranks below b: lower score, or equal score and larger id. */
static inline int hit_worse(cdb_hit a, cdb_hit b) {
    return a.score < b.score || (a.score == b.score && a.id > b.id);
}

static int hit_cmp_best_first(const void *pa, const void *pb) {
    cdb_hit a = *(const cdb_hit *)pa, b = *(const cdb_hit *)pb;
    if (hit_worse(a, b)) return 1;
    if (hit_worse(b, a)) return -1;
    return 0;
}

/* Min-heap of the k best (root = worst kept). */
typedef struct topk {
    cdb_hit *h;
    int k, n;
} topk;

static void topk_push(topk *t, cdb_hit x) {
    int i;
    if (t->n < t->k) {
        i = t->n++;
        while (i > 0) {
            int p = (i - 1) / 2;
            if (!hit_worse(x, t->h[p])) break;
            t->h[i] = t->h[p];
            i = p;
        }
        t->h[i] = x;
        return;
    }
    if (!hit_worse(t->h[0], x)) return;
    i = 0;
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        cdb_hit cur = (m == i) ? x : t->h[m];
        if (l < t->n && hit_worse(t->h[l], cur)) m = l, cur = t->h[l];
        if (r < t->n && hit_worse(t->h[r], cur)) m = r;
        if (m == i) break;
        t->h[i] = t->h[m];
        i = m;
    }
    t->h[i] = x;
}

/* Sorts the kept hits best first and pads to k; returns the count. */
static int topk_finish(topk *t) {
    qsort(t->h, (size_t)t->n, sizeof *t->h, hit_cmp_best_first);
    for (int i = t->n; i < t->k; i++) t->h[i].id = -1, t->h[i].score = -INFINITY;
    return t->n;
}

int cdb_index_ids_have(const int64_t *a, size_t n, int64_t id) {
    size_t lo = 0, hi = n;
    if (!a) return 0;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (a[mid] < id) lo = mid + 1;
        else hi = mid;
    }
    return lo < n && a[lo] == id;
}

/* 1 if id occurs more than once in the sorted array a[n]. */
static int has_dup(const int64_t *a, size_t n, int64_t id) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (a[mid] < id) lo = mid + 1;
        else hi = mid;
    }
    return lo + 1 < n && a[lo] == id && a[lo + 1] == id;
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* ---- query helpers ---------------------------------------------------------------- */

cdb_status cdb_index_query_check(const float *q, int dim) {
    int nonzero = 0;
    if (!q || dim <= 0) return cdb_seterr(CDB_INVALID, "query: no vector (dim %d)", dim);
    for (int i = 0; i < dim; i++) {
        if (isnan(q[i])) return cdb_seterr(CDB_INVALID, "query element %d is NaN", i);
        if (isinf(q[i])) return cdb_seterr(CDB_INVALID, "query element %d is infinite", i);
        nonzero |= q[i] != 0.0f;
    }
    if (!nonzero) return cdb_seterr(CDB_INVALID, "query vector is all zeros");
    return CDB_OK;
}

/* Validated, normalized copy of q. */
static cdb_status query_prepare(const float *q, int dim, float **out) {
    cdb_status rc;
    float *qn;
    *out = NULL;
    if ((rc = cdb_index_query_check(q, dim)) != CDB_OK) return rc;
    if (!(qn = cdb_malloc((size_t)dim * sizeof *qn))) return cdb_seterr(CDB_NOMEM, "query copy");
    memcpy(qn, q, (size_t)dim * sizeof *qn);
    if ((rc = cdb_k_normalize_f32(qn, (size_t)dim, NULL)) != CDB_OK) {
        cdb_free(qn);
        return cdb_errctx(rc, "query");
    }
    *out = qn;
    return CDB_OK;
}

cdb_status cdb_index_query_combine(const float *terms, const float *weights, int n_terms, int dim,
                                   float *out) {
    double *acc = NULL;
    cdb_status rc = CDB_OK;
    if (!terms || !weights || !out || n_terms < 1 || dim <= 0)
        return cdb_seterr(CDB_INVALID, "query_combine: need >= 1 term and dim > 0");
    if (!(acc = cdb_calloc((size_t)dim, sizeof *acc))) return cdb_seterr(CDB_NOMEM, "query_combine");
    for (int t = 0; t < n_terms; t++) {
        const float *v = terms + (size_t)t * (size_t)dim;
        double norm;
        if (!isfinite(weights[t])) { rc = cdb_seterr(CDB_INVALID, "query term %d: weight is not finite", t); goto done; }
        for (int i = 0; i < dim; i++)
            if (!isfinite(v[i])) {
                rc = cdb_seterr(CDB_INVALID, "query term %d: element %d is %s", t, i, isnan(v[i]) ? "NaN" : "infinite");
                goto done;
            }
        norm = (double)cdb_k_l2norm_f32(v, (size_t)dim);
        if (!(norm > 0.0) || !isfinite(norm)) {
            /* l2norm rounds to fp32: recompute in double for huge terms */
            norm = 0.0;
            for (int i = 0; i < dim; i++) norm += (double)v[i] * (double)v[i];
            norm = sqrt(norm);
        }
        if (!(norm > 0.0)) { rc = cdb_seterr(CDB_INVALID, "query term %d is a zero vector", t); goto done; }
        for (int i = 0; i < dim; i++) acc[i] += (double)weights[t] * ((double)v[i] / norm);
    }
    {
        double s = 0.0;
        for (int i = 0; i < dim; i++) s += acc[i] * acc[i];
        s = sqrt(s);
        if (!(s > 1e-12)) { /* "a - a" */
            rc = cdb_seterr(CDB_INVALID, "the weighted sum of the terms is zero");
            goto done;
        }
        for (int i = 0; i < dim; i++) out[i] = (float)(acc[i] / s);
    }
done:
    cdb_free(acc);
    return rc;
}

/* ---- exact search ------------------------------------------------------------------- */

cdb_status cdb_index_exact_search(const float *q, int n_q, int dim, const int64_t *ids,
                                  const uint16_t *vecs, size_t n, int k, float min_score,
                                  const int64_t *exclude_ids, size_t n_exclude, int n_threads,
                                  cdb_hit *out) {
    float *qn = NULL;
    cdb_hit *heaps = NULL;
    int nt;
    cdb_status rc = CDB_OK;
    if (!q || n_q < 1 || dim <= 0 || k < 1 || !out || (n > 0 && !vecs))
        return cdb_seterr(CDB_INVALID, "exact_search: bad arguments (n_q %d, dim %d, k %d)", n_q, dim, k);
    if (!(qn = cdb_malloc((size_t)n_q * (size_t)dim * sizeof *qn))) return cdb_seterr(CDB_NOMEM, "exact_search");
    for (int j = 0; j < n_q; j++) {
        float *one = NULL;
        if ((rc = query_prepare(q + (size_t)j * (size_t)dim, dim, &one)) != CDB_OK) {
            rc = cdb_errctx(rc, "query %d", j);
            goto done;
        }
        memcpy(qn + (size_t)j * (size_t)dim, one, (size_t)dim * sizeof *qn);
        cdb_free(one);
    }
    nt = n_threads > 0 ? n_threads : cdb_default_threads();
    if ((size_t)nt > n / 4096 + 1) nt = (int)(n / 4096 + 1); /* small stores: one thread */
    if (!(heaps = cdb_malloc((size_t)nt * (size_t)n_q * (size_t)k * sizeof *heaps))) {
        rc = cdb_seterr(CDB_NOMEM, "exact_search heaps");
        goto done;
    }
    {
        int failed = 0;
#pragma omp parallel num_threads(nt)
        {
            int tid = 0, nth = 1;
#ifdef _OPENMP
            tid = omp_get_thread_num();
            nth = omp_get_num_threads();
#endif
            size_t lo = n * (size_t)tid / (size_t)nth, hi = n * (size_t)(tid + 1) / (size_t)nth;
            float *sc = malloc((size_t)EXACT_BLOCK * (size_t)n_q * sizeof *sc);
            topk *t = malloc((size_t)n_q * sizeof *t);
            if (!sc || !t) {
#pragma omp atomic write
                failed = 1;
            } else {
                for (int j = 0; j < n_q; j++)
                    t[j].h = heaps + ((size_t)tid * (size_t)n_q + (size_t)j) * (size_t)k, t[j].k = k, t[j].n = 0;
                for (size_t b = lo; b < hi; b += EXACT_BLOCK) {
                    size_t m = hi - b < EXACT_BLOCK ? hi - b : EXACT_BLOCK;
                    const uint16_t *v = vecs + b * (size_t)dim;
                    if (n_q == 1) cdb_k_dot_f16_f32_batch(v, m, qn, (size_t)dim, sc);
                    else cdb_k_dot_f16_f32_multi(v, m, qn, (size_t)n_q, (size_t)dim, sc);
                    for (size_t i = 0; i < m; i++)
                        for (int j = 0; j < n_q; j++) {
                            cdb_hit x;
                            x.score = clamp_score(sc[i * (size_t)n_q + (size_t)j]);
                            if (!(x.score >= min_score)) continue;
                            if (t[j].n == k && x.score < t[j].h[0].score) continue;
                            x.id = ids ? ids[b + i] : (int64_t)(b + i);
                            if (n_exclude && cdb_index_ids_have(exclude_ids, n_exclude, x.id))
                                continue;
                            topk_push(&t[j], x);
                        }
                }
                for (int j = 0; j < n_q; j++)
                    for (int i = t[j].n; i < k; i++) t[j].h[i].id = -1, t[j].h[i].score = -INFINITY;
            }
            free(sc);
            free(t);
        }
        if (failed) { rc = cdb_seterr(CDB_NOMEM, "exact_search scratch"); goto done; }
    }
    for (int j = 0; j < n_q; j++) {
        topk t = {out + (size_t)j * (size_t)k, k, 0};
        for (int th = 0; th < nt; th++) {
            const cdb_hit *h = heaps + ((size_t)th * (size_t)n_q + (size_t)j) * (size_t)k;
            for (int i = 0; i < k; i++)
                if (h[i].id >= 0) topk_push(&t, h[i]);
        }
        topk_finish(&t);
    }
done:
    cdb_free(qn);
    cdb_free(heaps);
    return rc;
}

/* ---- index search + re-rank ----------------------------------------------------------- */

/* FAISS's candidates for one query, on n_threads OpenMP threads (0: one). FAISS 1.7.3
** shares a search out by query only (the IVF scan, the HNSW walk, the flat scan), so a
** second thread has no work for one query; yet its parallel regions still wake the team
** and wait for it at their barriers, which on a loaded 2-core machine is a wait for the
** scheduler (bench_index --sweep measures one thread against all). The thread count is
** an OpenMP setting of the calling thread alone, restored after: concurrent searches in
** other threads, and this thread's later builds, keep theirs. An IVF index with an HNSW
** quantizer walks it with clipdb's dot kernel (ivf.cc); others are FAISS's search. */
static cdb_status faiss_search_one(const cdb_index *ix, const float *q, int64_t k,
                                   int n_threads, int plain, float *D, int64_t *L) {
    cdb_status rc;
    int handled = 0;
#ifdef _OPENMP
    int nt = omp_get_max_threads(), want = n_threads > 0 ? n_threads : 1;
    if (want != nt) omp_set_num_threads(want);
#else
    (void)n_threads;
#endif
    rc = !plain && (ix->info.kind == CDB_INDEX_IVF_HNSW_PQ || ix->info.kind == CDB_INDEX_CUSTOM)
             ? cdb_ivf_search_one_(ix->fx, q, k, D, L, &handled)
             : CDB_OK;
    if (rc == CDB_OK && !handled) {
        int frc = faiss_Index_search(ix->fx, 1, q, k, D, L);
        if (frc != 0) rc = cdb_index_faiss_err_(frc, "search");
    }
#ifdef _OPENMP
    if (want != nt) omp_set_num_threads(nt);
#endif
    return rc;
}

cdb_index_search_opts cdb_index_search_opts_default(void) {
    cdb_index_search_opts o;
    memset(&o, 0, sizeof o);
    o.k = 10;
    o.min_score = -INFINITY;
    return o;
}

/* Adds hits for candidate ids cand[n] (distinct), scored from fetched vectors. */
static cdb_status rerank(const cdb_index_search_opts *o, const float *qn, int dim, const int64_t *cand,
                         size_t n, cdb_hit *hits, size_t *n_hits) {
    uint16_t *vecs = NULL;
    uint8_t *found = NULL;
    float *sc = NULL;
    cdb_status rc = CDB_OK;
    if (n == 0) return CDB_OK;
    if (!(vecs = cdb_malloc(n * (size_t)dim * 2)) || !(found = cdb_calloc(n, 1)) ||
        !(sc = cdb_malloc(n * sizeof *sc))) {
        rc = cdb_seterr(CDB_NOMEM, "re-rank buffers");
        goto done;
    }
    if ((rc = o->fetch(o->fetch_ctx, cand, n, vecs, found)) != CDB_OK) {
        rc = cdb_errctx(rc, "re-rank fetch of %zu vectors", n);
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        if (!found[i]) continue;
        sc[i] = clamp_score(cdb_k_dot_f16_f32(vecs + i * (size_t)dim, qn, (size_t)dim));
        if (!(sc[i] >= o->min_score)) continue;
        hits[*n_hits].id = cand[i];
        hits[(*n_hits)++].score = sc[i];
    }
done:
    cdb_free(vecs);
    cdb_free(found);
    cdb_free(sc);
    return rc;
}

/* The hits of a filtered search over a small set: every included id that is neither
** excluded nor in extra (xsorted, may be NULL: extra's vectors override), fetched and
** scored. *hits (heap) gets room for them plus the extra vectors. */
static cdb_status scan_included(const cdb_index_search_opts *o, const float *qn, int dim,
                                const int64_t *xsorted, cdb_hit **hits, size_t *n_hits) {
    int64_t *cand = NULL;
    size_t nc = 0;
    cdb_status rc = CDB_OK;
    if (!(cand = cdb_malloc((o->n_include + 1) * sizeof *cand)) ||
        !(*hits = cdb_malloc((o->n_include + o->n_extra + 1) * sizeof **hits))) {
        cdb_free(cand);
        return cdb_seterr(CDB_NOMEM, "filtered search of %zu photos", o->n_include);
    }
    for (size_t i = 0; i < o->n_include; i++) {
        int64_t id = o->include_ids[i];
        if (id < 0 || (nc && cand[nc - 1] == id)) continue;
        if (o->n_exclude && cdb_index_ids_have(o->exclude_ids, o->n_exclude, id)) continue;
        if (xsorted && cdb_index_ids_have(xsorted, o->n_extra, id)) continue;
        cand[nc++] = id;
    }
    rc = rerank(o, qn, dim, cand, nc, *hits, n_hits);
    cdb_free(cand);
    return rc;
}

cdb_status cdb_index_search(const cdb_index *ix, const float *q, int dim, const cdb_index_search_opts *o,
                            cdb_hit *out, int *n_out) {
    float *qn = NULL, *D = NULL;
    int64_t *L = NULL, *cand = NULL, *xsorted = NULL;
    cdb_hit *hits = NULL;
    size_t n_hits = 0, cap_hits;
    cdb_status rc = CDB_OK;
    int64_t ntotal = 0;
    int inc;
    size_t scan_max;
    if (n_out) *n_out = 0;
    if (!o || !out || !n_out || o->k < 1)
        return cdb_seterr(CDB_INVALID, "index_search: need options, out, n_out and k >= 1");
    if (ix && dim != ix->info.dim)
        return cdb_seterr(CDB_DIM_MISMATCH, "query dim %d != index dim %d", dim, ix->info.dim);
    if (o->n_extra && (!o->extra_ids || !o->extra_vecs))
        return cdb_seterr(CDB_INVALID, "index_search: n_extra %zu without ids/vectors", o->n_extra);
    if (o->n_exclude && !o->exclude_ids) return cdb_seterr(CDB_INVALID, "index_search: n_exclude without ids");
    if (o->rerank_factor < 0) return cdb_seterr(CDB_INVALID, "index_search: rerank_factor < 0");
    if (o->n_include && !o->include_ids)
        return cdb_seterr(CDB_INVALID, "index_search: n_include without ids");
    if (ix) ntotal = faiss_Index_ntotal(ix->fx);
    if (ntotal > 0 && !o->fetch) return cdb_seterr(CDB_INVALID, "index_search: a fetch callback is required to re-rank");
    if ((rc = query_prepare(q, dim, &qn)) != CDB_OK) return rc;
    inc = o->include_ids != NULL;
    scan_max = o->scan_max ? o->scan_max : CDB_INDEX_SCAN_MAX;

    cap_hits = o->n_extra;
    if (o->n_extra) {
        if (!(xsorted = cdb_malloc(o->n_extra * sizeof *xsorted))) { rc = cdb_seterr(CDB_NOMEM, "search"); goto done; }
        memcpy(xsorted, o->extra_ids, o->n_extra * sizeof *xsorted);
        qsort(xsorted, o->n_extra, sizeof *xsorted, cmp_i64);
    }
    if (inc && ntotal > 0 && o->n_include <= scan_max) {
        /* A small filtered set: every vector of it, exactly (those in extra are scored
        ** below, from extra). */
        if ((rc = scan_included(o, qn, dim, xsorted, &hits, &n_hits)) != CDB_OK) goto done;
    } else if (ntotal > 0) {
        int R = o->rerank_factor > 0 ? o->rerank_factor : (ix->info.rerank_factor > 0 ? ix->info.rerank_factor : 1);
        int64_t kk = (int64_t)o->k * R;
        /* A filtered set: as many more candidates as the set is rarer than the whole. */
        int64_t n_inc = o->n_include > 0 ? (int64_t)o->n_include : 1;
        if (inc) kk *= (ntotal + n_inc - 1) / n_inc;
        if (kk > ntotal || kk <= 0) kk = ntotal;
        for (;;) {
            size_t nc = 0, valid;
            float worst = INFINITY; /* the index's score of its last candidate */
            cdb_free(D), cdb_free(L), cdb_free(cand), cdb_free(hits);
            D = NULL, L = NULL, cand = NULL, hits = NULL;
            n_hits = 0;
            cap_hits = o->n_extra + (size_t)kk;
            if (!(D = cdb_malloc((size_t)kk * sizeof *D)) || !(L = cdb_malloc((size_t)kk * sizeof *L)) ||
                !(cand = cdb_malloc((size_t)kk * sizeof *cand)) || !(hits = cdb_malloc(cap_hits * sizeof *hits))) {
                rc = cdb_seterr(CDB_NOMEM, "search buffers (%lld candidates)", (long long)kk);
                goto done;
            }
            rc = faiss_search_one(ix, qn, kk, o->faiss_threads, o->faiss_plain, D, L);
            if (rc != CDB_OK) goto done;
            for (int64_t i = 0; i < kk; i++) {
                if (L[i] < 0) continue;
                worst = D[i];
                if (o->n_exclude && cdb_index_ids_have(o->exclude_ids, o->n_exclude, L[i]))
                    continue;
                if (inc && !cdb_index_ids_have(o->include_ids, o->n_include, L[i])) continue;
                if (xsorted && cdb_index_ids_have(xsorted, o->n_extra, L[i]))
                    continue; /* extra overrides */
                cand[nc++] = L[i];
            }
            qsort(cand, nc, sizeof *cand, cmp_i64);
            valid = 0;
            for (size_t i = 0; i < nc; i++)
                if (valid == 0 || cand[valid - 1] != cand[i]) cand[valid++] = cand[i];
            if ((rc = rerank(o, qn, dim, cand, valid, hits, &n_hits)) != CDB_OK) goto done;
            /* Deletions, duplicates or min_score left too few: widen once more. A filtered
            ** search widens until its set is served, unless the index's candidates are
            ** already below min_score (with a margin for approximate scores). */
            if (n_hits >= (size_t)o->k) break;
            if (kk >= ntotal) {
                /* An approximate index asked for every vector need not return them all
                ** (HNSW's walk): a filtered set still short is then scanned exactly. */
                if (inc && ix->info.kind != CDB_INDEX_FLAT) {
                    cdb_free(hits);
                    hits = NULL;
                    n_hits = 0;
                    rc = scan_included(o, qn, dim, xsorted, &hits, &n_hits);
                }
                break;
            }
            if (o->min_score > -INFINITY && (!inc || worst < o->min_score - SCORE_MARGIN)) break;
            kk = kk * 4 < ntotal ? kk * 4 : ntotal;
        }
        if (rc != CDB_OK) goto done;
    } else if (o->n_extra && !(hits = cdb_malloc(cap_hits * sizeof *hits))) {
        rc = cdb_seterr(CDB_NOMEM, "search buffers");
        goto done;
    }
    if (o->n_extra) {
        float *sc = cdb_malloc(o->n_extra * sizeof *sc);
        if (!sc) { rc = cdb_seterr(CDB_NOMEM, "extra scores"); goto done; }
        cdb_k_dot_f16_f32_batch(o->extra_vecs, o->n_extra, qn, (size_t)dim, sc);
        for (size_t i = 0; i < o->n_extra; i++) {
            float s = clamp_score(sc[i]);
            int dup = 0;
            if (!(s >= o->min_score)) continue;
            if (o->n_exclude && cdb_index_ids_have(o->exclude_ids, o->n_exclude, o->extra_ids[i]))
                continue;
            if (inc && !cdb_index_ids_have(o->include_ids, o->n_include, o->extra_ids[i])) continue;
            /* an id listed twice in extra: keep the later entry (the newer vector) */
            if (has_dup(xsorted, o->n_extra, o->extra_ids[i]))
                for (size_t j = i + 1; j < o->n_extra && !dup; j++) dup = o->extra_ids[j] == o->extra_ids[i];
            if (dup) continue;
            hits[n_hits].id = o->extra_ids[i];
            hits[n_hits++].score = s;
        }
        cdb_free(sc);
    }
    {
        topk t = {out, o->k, 0};
        for (size_t i = 0; i < n_hits; i++) topk_push(&t, hits[i]);
        *n_out = topk_finish(&t);
    }
done:
    cdb_free(qn), cdb_free(D), cdb_free(L), cdb_free(cand), cdb_free(xsorted), cdb_free(hits);
    return rc;
}
