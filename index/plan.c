/*
** plan.c: the automatic choice of index (by collection size and memory budget,
** with FAISS's sizing guidelines), its human-readable report, and the refresh
** policy (incremental add vs full rebuild). Pure computation: no FAISS calls.
**
** Sizing rules (FAISS wiki "Guidelines to choose an index"):
** - < 20k vectors: exact "IDMap,Flat" (a few ms per query at 512-d).
** - < 200k: HNSW32 over the fp32 vectors (no training, best latency/recall). Not over
**   fp16 codes: Debian's FAISS is a generic build that decodes fp16 one component at a
**   time, which made the graph's construction 2.7x slower (20,000 512-d vectors: 92 s
**   against 34 s on 2 cores) for half the vector memory.
** - < 500k: IVF with an fp16 scalar quantizer.
** - < 2M: IVF-PQ, dim/8 sub-quantizers of 8 bits, re-ranked exactly from the store
**   ("np": no polysemous training, which we never use and which costs minutes).
** - larger: the same codes under an HNSW coarse quantizer ("IVF<nlist>_HNSW32"): the
**   lists a query probes are found in a graph over the centroids instead of a scan of
**   all of them, and the training is cut to what 2 cores do in minutes at 10^7 (20
**   points per centroid, 10 k-means iterations: 16,384 lists at 10^7 would otherwise
**   take 40 x 16,384 points through 25 iterations, about an hour of k-means).
** - nlist ~ 4*sqrt(n) rounded to a power of two, at most n/39; training on 40
**   points per centroid (FAISS warns below 39) and at least 10,000 for PQ's
**   256-entry codebooks, capped by n.
** - nprobe follows nlist and k: the lists probed per query are nlist/32 (at least 8)
**   for IVF-SQ and nlist/64 (at least 16) for IVF-PQ, and every list while they hold
**   fewer than 32 vectors on average (index.c, cdb_index_nprobe_effective_): a small
**   database's k x rerank_factor candidates (rerank_factor 2 flat, 4 HNSW and IVF-SQ,
**   10 IVF-PQ) then come from every vector, and the exact re-rank of them returns
**   brute force's top k.
** If the planned family's memory estimate exceeds the budget, the next more
** compact family is taken.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "index/index_int.h"

#define FLAT_MAX 20000
#define HNSW_MAX 200000
#define IVFSQ_MAX 500000
#define IVFPQ_MAX 2000000
#define HNSW_M 32

const char *cdb_index_kind_name(cdb_index_kind kind) {
    switch (kind) {
    case CDB_INDEX_AUTO: return "auto";
    case CDB_INDEX_FLAT: return "flat";
    case CDB_INDEX_HNSW: return "hnsw";
    case CDB_INDEX_IVF_SQ: return "ivf-sq";
    case CDB_INDEX_IVF_PQ: return "ivf-pq";
    case CDB_INDEX_CUSTOM: return "custom";
    case CDB_INDEX_IVF_HNSW_PQ: return "ivf-hnsw-pq";
    }
    return "unknown";
}

cdb_index_params cdb_index_params_default(void) {
    cdb_index_params p;
    memset(&p, 0, sizeof p);
    p.kind = CDB_INDEX_AUTO;
    return p;
}

static size_t mem_available(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    unsigned long long kb = 0;
    if (f) {
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) break;
        fclose(f);
    }
    if (kb) return (size_t)kb * 1024;
    long pages = sysconf(_SC_AVPHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    return pages > 0 && psz > 0 ? (size_t)pages * (size_t)psz : (size_t)4 << 30;
}

static int pow2_near(double x) {
    int p = 1;
    while (p * 2 <= x) p *= 2;
    return (x - p > 2.0 * p - x) ? 2 * p : p;
}

static int pq_m_for(int dim) {
    int m = dim / 8 > 0 ? dim / 8 : 1;
    while (m > 1 && dim % m) m--;
    return m;
}

size_t cdb_index_estimate_bytes_(cdb_index_kind kind, int64_t n, int dim, int nlist, int pq_m) {
    double nn = (double)n, d = dim;
    switch (kind) {
    case CDB_INDEX_FLAT: return (size_t)(nn * (4 * d + 8));
    case CDB_INDEX_HNSW: return (size_t)(nn * (4 * d + 8 + 2 * HNSW_M * 4 * 1.15 + 16));
    case CDB_INDEX_IVF_SQ: return (size_t)(nn * (2 * d + 8) + (double)nlist * d * 4);
    case CDB_INDEX_IVF_PQ:
        return (size_t)(nn * (pq_m + 8) + (double)nlist * d * 4 + 256.0 * d * 4);
    case CDB_INDEX_IVF_HNSW_PQ: /* + the centroids' graph */
        return (size_t)(nn * (pq_m + 8) + (double)nlist * (d * 4 + 2 * HNSW_M * 4 * 1.15) +
                        256.0 * d * 4);
    default: return 0;
    }
}

void cdb_index_plan_kind_(cdb_index_kind kind, int64_t n, int dim, cdb_index_info *out) {
    int64_t nn = n > 0 ? n : 1;
    out->kind = kind;
    out->nlist = out->pq_m = out->nprobe = out->ef_search = 0;
    out->n_train = 0;
    switch (kind) {
    case CDB_INDEX_FLAT:
        snprintf(out->factory, sizeof out->factory, "IDMap,Flat");
        out->rerank_factor = 2;
        break;
    case CDB_INDEX_HNSW:
        snprintf(out->factory, sizeof out->factory, "IDMap,HNSW%d,Flat", HNSW_M);
        out->ef_search = 128;
        out->rerank_factor = 4;
        break;
    case CDB_INDEX_IVF_SQ:
    case CDB_INDEX_IVF_PQ:
    case CDB_INDEX_IVF_HNSW_PQ: {
        int nlist = pow2_near(4.0 * sqrt((double)nn));
        while (nlist > 16 && (int64_t)nlist * 39 > nn) nlist /= 2;
        if (nlist < 16) nlist = 16;
        if (nlist > 65536) nlist = 65536;
        out->nlist = nlist;
        out->n_train = 40 * (int64_t)nlist;
        if (kind == CDB_INDEX_IVF_SQ) {
            snprintf(out->factory, sizeof out->factory, "IVF%d,SQfp16", nlist);
            out->nprobe = nlist / 32 > 8 ? nlist / 32 : 8;
            out->rerank_factor = 4;
        } else if (kind == CDB_INDEX_IVF_PQ) {
            out->pq_m = pq_m_for(dim);
            snprintf(out->factory, sizeof out->factory, "IVF%d,PQ%dnp", nlist, out->pq_m);
            if (out->n_train < 10000) out->n_train = 10000;
            out->nprobe = nlist / 64 > 16 ? nlist / 64 : 16;
            out->rerank_factor = 10;
        } else {
            out->pq_m = pq_m_for(dim);
            snprintf(out->factory, sizeof out->factory, "IVF%d_HNSW%d,PQ%dnp", nlist, HNSW_M,
                     out->pq_m);
            out->n_train = IVF_HNSW_TRAIN_PER_LIST * (int64_t)nlist;
            if (out->n_train < 10000) out->n_train = 10000;
            out->nprobe = nlist / IVF_HNSW_PROBE_DIV > 16 ? nlist / IVF_HNSW_PROBE_DIV : 16;
            out->rerank_factor = 10;
        }
        if (out->nprobe > nlist) out->nprobe = nlist;
        if (out->n_train > n) out->n_train = n;
        break;
    }
    default: break;
    }
    out->est_bytes = cdb_index_estimate_bytes_(kind, n, dim, out->nlist, out->pq_m);
}

cdb_status cdb_index_plan_custom_(const char *factory, int dim, int64_t n, cdb_index_info *out) {
    const char *ivf = strstr(factory, "IVF");
    int need_idmap = !strstr(factory, "IDMap") && !ivf;
    int w = snprintf(out->factory, sizeof out->factory, "%s%s", need_idmap ? "IDMap," : "",
                     factory);
    if (w < 0 || (size_t)w >= sizeof out->factory)
        return cdb_seterr(CDB_INVALID, "factory string too long (max %zu chars)",
                          sizeof out->factory - 8);
    out->kind = CDB_INDEX_CUSTOM;
    out->nlist = ivf ? atoi(ivf + 3) : 0;
    out->pq_m = 0;
    out->nprobe = out->nlist ? (out->nlist / 64 > 16 ? out->nlist / 64 : 16) : 0;
    if (out->nprobe > out->nlist) out->nprobe = out->nlist;
    out->ef_search = strstr(factory, "HNSW") ? 128 : 0;
    out->rerank_factor = 10;
    /* Training sample: enough for k-means on nlist centroids and for PQ/SQ codebooks;
    ** indexes that need none ignore it. */
    out->n_train = out->nlist ? 40 * (int64_t)out->nlist : 0;
    if (out->n_train < 20000) out->n_train = 20000;
    if (out->n_train > n) out->n_train = n;
    out->est_bytes = 0;
    (void)dim;
    return CDB_OK;
}

cdb_status cdb_index_plan(int64_t n, const cdb_index_params *p, cdb_index_info *out) {
    cdb_index_params def = cdb_index_params_default();
    if (!p) p = &def;
    if (!out) return cdb_seterr(CDB_INVALID, "cdb_index_plan: out is NULL");
    memset(out, 0, sizeof *out);
    if (p->dim <= 0) return cdb_seterr(CDB_INVALID, "index dim %d must be > 0", p->dim);
    if (n < 0) return cdb_seterr(CDB_INVALID, "collection size %lld < 0", (long long)n);
    out->dim = p->dim;
    out->n_planned = n;
    out->mem_budget_bytes = p->mem_budget_bytes ? p->mem_budget_bytes : mem_available() / 4;
    if (p->factory && *p->factory) {
        cdb_status rc = cdb_index_plan_custom_(p->factory, p->dim, n, out);
        if (rc != CDB_OK) return rc;
        snprintf(out->reason, sizeof out->reason, "factory string forced by the user");
    } else if (p->kind != CDB_INDEX_AUTO) {
        if (p->kind < CDB_INDEX_FLAT || p->kind == CDB_INDEX_CUSTOM ||
            p->kind > CDB_INDEX_IVF_HNSW_PQ)
            return cdb_seterr(CDB_INVALID, "index kind %d cannot be forced without a factory",
                              (int)p->kind);
        cdb_index_plan_kind_(p->kind, n, p->dim, out);
        snprintf(out->reason, sizeof out->reason, "family %s forced by the user",
                 cdb_index_kind_name(p->kind));
    } else {
        cdb_index_kind k = n < FLAT_MAX    ? CDB_INDEX_FLAT
                           : n < HNSW_MAX  ? CDB_INDEX_HNSW
                           : n < IVFSQ_MAX ? CDB_INDEX_IVF_SQ
                           : n < IVFPQ_MAX ? CDB_INDEX_IVF_PQ
                                           : CDB_INDEX_IVF_HNSW_PQ;
        cdb_index_kind first = k;
        cdb_index_plan_kind_(k, n, p->dim, out);
        while (out->est_bytes > out->mem_budget_bytes && k < CDB_INDEX_IVF_PQ) {
            k = (cdb_index_kind)(k + 1);
            cdb_index_plan_kind_(k, n, p->dim, out);
        }
        if (k == first)
            snprintf(out->reason, sizeof out->reason,
                     "%lld vectors: %s is the size class's choice and fits the %.0f MB budget",
                     (long long)n, cdb_index_kind_name(k), out->mem_budget_bytes / 1e6);
        else
            snprintf(out->reason, sizeof out->reason,
                     "%lld vectors: %s would exceed the %.0f MB memory budget, using %s",
                     (long long)n, cdb_index_kind_name(first), out->mem_budget_bytes / 1e6,
                     cdb_index_kind_name(k));
    }
    if (p->nprobe > 0 && out->nlist) out->nprobe = p->nprobe < out->nlist ? p->nprobe : out->nlist;
    if (p->ef_search > 0 && out->ef_search) out->ef_search = p->ef_search;
    if (p->rerank_factor > 0) out->rerank_factor = p->rerank_factor;
    return CDB_OK;
}

/* "12.3 MB", "48 KB": a size in the unit that keeps its digits meaningful. */
static const char *fmt_size(double bytes, char *buf, size_t size) {
    if (bytes >= 1e6) snprintf(buf, size, "%.1f MB", bytes / 1e6);
    else if (bytes >= 1e3) snprintf(buf, size, "%.0f KB", bytes / 1e3);
    else snprintf(buf, size, "%.0f bytes", bytes);
    return buf;
}

int cdb_index_info_format(const cdb_index_info *in, char *buf, size_t size) {
    char extra[160] = "", est[32], budget[64] = "";
    int w = 0;
    if (in->mem_budget_bytes > 0) { /* known when planned; a loaded file does not record it */
        char b[32];
        snprintf(budget, sizeof budget, " (budget %s)",
                 fmt_size((double)in->mem_budget_bytes, b, sizeof b));
    }
    if (in->nlist) w += snprintf(extra + w, sizeof extra - (size_t)w, " nlist=%d nprobe=%d", in->nlist, in->nprobe);
    if (in->pq_m) w += snprintf(extra + w, sizeof extra - (size_t)w, " pq_m=%d", in->pq_m);
    if (in->ef_search) snprintf(extra + w, sizeof extra - (size_t)w, " efSearch=%d", in->ef_search);
    return snprintf(buf, size,
                    "kind:        %s\n"
                    "factory:     %s (inner product)\n"
                    "dim:         %d\n"
                    "planned for: %lld vectors\n"
                    "indexed:     %lld vectors (%lld distinct ids), watermark %llu\n"
                    "training:    %lld vectors\n"
                    "search:     %s re-rank %dx (k*%d candidates, exact fp32 scores from the store)\n"
                    "memory:      ~%s estimated%s\n"
                    "why:         %s\n",
                    cdb_index_kind_name(in->kind), in->factory, in->dim, (long long)in->n_planned,
                    (long long)in->n_indexed, (long long)in->n_covered,
                    (unsigned long long)in->watermark, (long long)in->n_train, extra,
                    in->rerank_factor, in->rerank_factor,
                    fmt_size((double)in->est_bytes, est, sizeof est), budget, in->reason);
}

static void say(char *why, size_t n, const char *fmt, ...) CDB_PRINTF(3, 4);
#include <stdarg.h>
static void say(char *why, size_t n, const char *fmt, ...) {
    va_list ap;
    if (!why || !n) return;
    va_start(ap, fmt);
    vsnprintf(why, n, fmt, ap);
    va_end(ap);
}

/* 1 when an index of kind, with nlist lists trained for n_trained_for vectors, is to be
** rebuilt for its size: the plan for n_live (p, the index's dim) picks another kind (unless
** a kind or a factory was forced), or the IVF lists were trained for < a quarter of n_live.
** *rc: the plan's failure. */
static int size_calls_for_rebuild(const cdb_index_params *p, int dim, cdb_index_kind kind,
                                  int nlist, int64_t n_trained_for, int64_t n_live,
                                  cdb_status *rc, char *why, size_t why_size) {
    cdb_index_params q = p ? *p : cdb_index_params_default();
    cdb_index_info want;
    q.dim = dim;
    if ((*rc = cdb_index_plan(n_live, &q, &want)) != CDB_OK) return 0;
    if (!(q.factory && *q.factory) && q.kind == CDB_INDEX_AUTO && kind != CDB_INDEX_CUSTOM &&
        want.kind != kind) {
        say(why, why_size, "%lld vectors now call for %s, the index is %s", (long long)n_live,
            cdb_index_kind_name(want.kind), cdb_index_kind_name(kind));
        return 1;
    }
    if (nlist && n_live > 4 * (n_trained_for > 0 ? n_trained_for : 1)) {
        say(why, why_size, "grew to %lld vectors, > 4x the %lld the IVF lists were trained for",
            (long long)n_live, (long long)n_trained_for);
        return 1;
    }
    return 0;
}

int cdb_index_head_current(const cdb_index_head *h, const cdb_index_params *p, int64_t n_live,
                           uint64_t watermark_now, char *why, size_t why_size) {
    cdb_status rc = CDB_OK;
    if (!h || !h->vouched) {
        say(why, why_size, "the index file is not vouched for by its stamp");
        return 0;
    }
    if (h->watermark != watermark_now || h->n_covered != n_live) {
        say(why, why_size, "the store changed since the index was refreshed");
        return 0;
    }
    if (size_calls_for_rebuild(p, h->dim, h->kind, h->nlist, h->n_trained_for, n_live, &rc, why,
                               why_size))
        return 0;
    if (rc != CDB_OK) { /* the plan's failure: the load and cdb_index_refresh_decide say it */
        say(why, why_size, "%s", cdb_errmsg());
        cdb_clearerr();
        return 0;
    }
    say(why, why_size, "index covers the store");
    return 1;
}

cdb_status cdb_index_refresh_decide(const cdb_index *ix, const cdb_index_params *p,
                                    int64_t n_live, int64_t n_uncovered, int64_t n_stale,
                                    cdb_index_refresh_action *out, char *why, size_t why_size) {
    cdb_status rc = CDB_OK;
    if (!out) return cdb_seterr(CDB_INVALID, "refresh_decide: out is NULL");
    if (n_live < 0 || n_uncovered < 0 || n_stale < 0)
        return cdb_seterr(CDB_INVALID, "refresh_decide: negative counts");
    if (!ix) {
        *out = n_live > 0 ? CDB_INDEX_REFRESH_REBUILD : CDB_INDEX_REFRESH_NONE;
        say(why, why_size, n_live > 0 ? "no index yet" : "empty store, nothing to index");
        return CDB_OK;
    }
    if (size_calls_for_rebuild(p, ix->info.dim, ix->info.kind, ix->info.nlist,
                               ix->n_trained_for, n_live, &rc, why, why_size)) {
        *out = CDB_INDEX_REFRESH_REBUILD;
        return CDB_OK;
    }
    if (rc != CDB_OK) return rc;
    int64_t tombstones = faiss_Index_ntotal(ix->fx) - ix->n_cov;
    if (tombstones < 0) tombstones = 0;
    if (n_stale + tombstones > 0 &&
        (double)(n_stale + tombstones) > 0.2 * (double)(ix->n_cov > 0 ? ix->n_cov : 1)) {
        *out = CDB_INDEX_REFRESH_REBUILD;
        say(why, why_size, "%lld of %lld indexed vectors are deleted or changed (> 20%%)",
            (long long)(n_stale + tombstones), (long long)ix->n_cov);
        return CDB_OK;
    }
    if (n_uncovered > 0 || n_stale > 0) {
        *out = CDB_INDEX_REFRESH_ADD;
        say(why, why_size, "%lld new or changed, %lld removed since the last refresh",
            (long long)n_uncovered, (long long)n_stale);
        return CDB_OK;
    }
    *out = CDB_INDEX_REFRESH_NONE;
    say(why, why_size, "index covers the store");
    return CDB_OK;
}
