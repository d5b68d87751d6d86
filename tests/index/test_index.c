/*
** test_index.c: index/ — automatic choice, build/train/add through FAISS, exact
** re-rank, scores independent of the index type, freshness (uncovered vectors,
** deletions, changed vectors), atomic persistence, refresh policy, and the query
** helpers (NaN/Inf refusal, weighted combination). Expected values come from
** independent computations here (long double dots over the fp16 data, brute
** force), never from the code under test.
*/
#include <sys/stat.h>
#include <unistd.h>

#include "cdb_test.h"
#define KTU_SPLITMIX_SEED 12345
#include "kernel_test_util.h"
#include "index/index.h"

/* n unit vectors (fp16) around n_clusters centers; ids = 10*i + 7. */
typedef struct store {
    int dim;
    int64_t n;
    int64_t *ids;
    uint16_t *vecs;
    uint8_t *deleted;
    int fetch_calls;
} store;

static void unit_into(const double *x, int dim, uint16_t *out) {
    double s = 0;
    for (int i = 0; i < dim; i++) s += x[i] * x[i];
    s = sqrt(s);
    for (int i = 0; i < dim; i++) out[i] = to_half(x[i] / s);
}

static store *store_make(int64_t n, int dim, int n_clusters, double noise) {
    store *s = calloc(1, sizeof *s);
    double *c = malloc((size_t)n_clusters * dim * sizeof *c), *x = malloc(dim * sizeof *x);
    s->dim = dim, s->n = n;
    s->ids = malloc(n * sizeof *s->ids);
    s->vecs = malloc((size_t)n * dim * 2);
    s->deleted = calloc((size_t)n, 1);
    for (int i = 0; i < n_clusters * dim; i++) c[i] = rng_gauss();
    for (int64_t i = 0; i < n; i++) {
        const double *ci = c + (size_t)(rng_next() % (uint64_t)n_clusters) * dim;
        for (int d = 0; d < dim; d++) x[d] = ci[d] + noise * rng_gauss();
        unit_into(x, dim, s->vecs + (size_t)i * dim);
        s->ids[i] = 10 * i + 7;
    }
    free(c), free(x);
    return s;
}

static void store_free(store *s) {
    if (!s) return;
    free(s->ids), free(s->vecs), free(s->deleted), free(s);
}

static int64_t pos_of(const store *s, int64_t id) {
    if (id < 7 || (id - 7) % 10) return -1;
    return (id - 7) / 10 < s->n ? (id - 7) / 10 : -1;
}

static cdb_status fetch(void *ctx, const int64_t *ids, size_t n, uint16_t *vecs, uint8_t *found) {
    store *s = ctx;
    s->fetch_calls++;
    for (size_t i = 0; i < n; i++) {
        int64_t p = pos_of(s, ids[i]);
        found[i] = p >= 0 && !s->deleted[p];
        if (found[i]) memcpy(vecs + i * s->dim, s->vecs + (size_t)p * s->dim, (size_t)s->dim * 2);
    }
    return CDB_OK;
}

static void query_from(const store *s, int64_t pos, float *q) {
    for (int d = 0; d < s->dim; d++) q[d] = (float)(from_half(s->vecs[(size_t)pos * s->dim + d]) + 0.05 * rng_gauss());
}

/* Independent score: long double dot of the fp16 vector with the normalized query. */
static double ref_score(const store *s, int64_t pos, const float *q) {
    long double n = 0, d = 0;
    for (int i = 0; i < s->dim; i++) n += (long double)q[i] * q[i];
    n = sqrtl(n);
    for (int i = 0; i < s->dim; i++) d += (long double)from_half(s->vecs[(size_t)pos * s->dim + i]) * ((long double)q[i] / n);
    return (double)d;
}

/* Brute-force top-k positions by ref_score, skipping deleted. */
static void ref_topk(const store *s, const float *q, int k, int64_t *out_ids) {
    double *best = malloc(k * sizeof *best);
    for (int i = 0; i < k; i++) best[i] = -1e9, out_ids[i] = -1;
    for (int64_t p = 0; p < s->n; p++) {
        double sc;
        int j;
        if (s->deleted[p]) continue;
        sc = ref_score(s, p, q);
        if (sc <= best[k - 1]) continue;
        for (j = k - 1; j > 0 && best[j - 1] < sc; j--) best[j] = best[j - 1], out_ids[j] = out_ids[j - 1];
        best[j] = sc, out_ids[j] = s->ids[p];
    }
    free(best);
}

static cdb_index_params params_for(int dim) {
    cdb_index_params p = cdb_index_params_default();
    p.dim = dim;
    return p;
}

/* Options that re-rank k hits from s's stored vectors; the rest as the defaults. */
static cdb_index_search_opts search_opts(store *s, int k) {
    cdb_index_search_opts o = cdb_index_search_opts_default();
    o.k = k, o.fetch = fetch, o.fetch_ctx = s;
    return o;
}

CDB_TEST(plan_automatic_choice) {
    cdb_index_params p = params_for(512);
    cdb_index_info in;
    char buf[2048];
    p.mem_budget_bytes = (size_t)8 << 30;
    CHECK_OK(cdb_index_plan(1000, &p, &in));
    CHECK_EQ_INT(in.kind, CDB_INDEX_FLAT);
    CHECK_EQ_INT(in.n_train, 0);
    CHECK_OK(cdb_index_plan(50000, &p, &in));
    CHECK_EQ_INT(in.kind, CDB_INDEX_HNSW);
    CHECK(strstr(in.factory, "HNSW") && strstr(in.factory, "IDMap"));
    CHECK_OK(cdb_index_plan(300000, &p, &in));
    CHECK_EQ_INT(in.kind, CDB_INDEX_IVF_SQ);
    CHECK(strstr(in.factory, "SQfp16") != NULL);
    CHECK_OK(cdb_index_plan(1000000, &p, &in));
    CHECK_EQ_INT(in.kind, CDB_INDEX_IVF_PQ);
    /* FAISS guidelines: 4*sqrt(n) <= nlist*2 and nlist <= 16*sqrt(n); >= 30 points per centroid */
    CHECK(in.nlist >= 2000 && in.nlist <= 16000);
    CHECK(in.n_train >= 30 * (int64_t)in.nlist && in.n_train <= 256 * (int64_t)in.nlist);
    CHECK(in.est_bytes <= (size_t)1200 << 20);
    CHECK(in.rerank_factor > 1);
    CHECK(cdb_index_info_format(&in, buf, sizeof buf) > 0);
    CHECK(strstr(buf, "ivf-pq") && strstr(buf, in.factory));
    /* a tight memory budget pushes a medium collection to a compact family */
    p.mem_budget_bytes = (size_t)20 << 20;
    CHECK_OK(cdb_index_plan(100000, &p, &in));
    CHECK_EQ_INT(in.kind, CDB_INDEX_IVF_PQ);
    CHECK(strstr(in.reason, "budget") != NULL);
    /* forced factory gets IDMap when it cannot take ids */
    p.factory = "HNSW16";
    CHECK_OK(cdb_index_plan(100, &p, &in));
    CHECK_EQ_INT(in.kind, CDB_INDEX_CUSTOM);
    CHECK_EQ_STR(in.factory, "IDMap,HNSW16");
    p.factory = "IVF64,Flat";
    CHECK_OK(cdb_index_plan(100000, &p, &in));
    CHECK_EQ_STR(in.factory, "IVF64,Flat");
    CHECK_EQ_INT(in.nlist, 64);
    p = params_for(0);
    CHECK_RC(cdb_index_plan(10, &p, &in), CDB_INVALID);
}

/* Every returned score is the exact dot of the query with the stored fp16 vector,
** and every kind returns the same score for the same item. */
CDB_TEST(scores_identical_across_index_types) {
    const int dim = 64, k = 10, n_q = 20;
    store *s = store_make(6000, dim, 40, 0.5);
    const char *factories[] = {NULL, "IDMap,HNSW16", "IVF32,PQ8np", "IVF32,SQfp16"};
    cdb_index *ix[4] = {0};
    cdb_hit hits[4][10];
    int nh[4];
    float q[64];
    cdb_index_search_opts o = search_opts(s, k);
    for (int f = 0; f < 4; f++) {
        cdb_index_params p = params_for(dim);
        p.factory = factories[f];
        if (!factories[f]) p.kind = CDB_INDEX_FLAT;
        CHECK_OK(cdb_index_build_arrays(&p, s->ids, s->vecs, s->n, &ix[f]));
        CHECK_EQ_INT(cdb_index_count(ix[f]), s->n);
    }
    int shared = 0, recall_hits = 0;
    for (int t = 0; t < n_q; t++) {
        int64_t want[10];
        query_from(s, (int64_t)(rng_next() % (uint64_t)s->n), q);
        ref_topk(s, q, k, want);
        for (int f = 0; f < 4; f++) {
            CHECK_OK(cdb_index_search(ix[f], q, dim, &o, hits[f], &nh[f]));
            CHECK_EQ_INT(nh[f], k);
            for (int i = 0; i < nh[f]; i++) {
                int64_t p = pos_of(s, hits[f][i].id);
                CHECK(p >= 0);
                CHECK_NEAR(hits[f][i].score, ref_score(s, p, q), 1e-6);
                CHECK(hits[f][i].score <= 1.0f && hits[f][i].score >= -1.0f);
                if (i) CHECK(hits[f][i - 1].score >= hits[f][i].score);
            }
        }
        /* flat + re-rank is exact */
        for (int i = 0; i < k; i++) recall_hits += hits[0][i].id == want[i];
        for (int a = 0; a < 4; a++)
            for (int b = a + 1; b < 4; b++)
                for (int i = 0; i < nh[a]; i++)
                    for (int j = 0; j < nh[b]; j++)
                        if (hits[a][i].id == hits[b][j].id) {
                            CHECK_MSG(memcmp(&hits[a][i].score, &hits[b][j].score, 4) == 0,
                                      "id %lld: %.9g (%s) vs %.9g (%s)", (long long)hits[a][i].id,
                                      hits[a][i].score, factories[a] ? factories[a] : "flat",
                                      hits[b][j].score, factories[b] ? factories[b] : "flat");
                            shared++;
                        }
    }
    CHECK(shared > n_q * k); /* the comparison actually happened */
    CHECK_MSG(recall_hits >= n_q * k - 2, "flat+re-rank ranks %d/%d like brute force", recall_hits, n_q * k);
    /* exact search over the array gives the same numbers */
    {
        cdb_hit ex[10];
        CHECK_OK(cdb_index_exact_search(q, 1, dim, s->ids, s->vecs, (size_t)s->n, k, -INFINITY, NULL, 0, 2, ex));
        for (int i = 0; i < k; i++) {
            CHECK_EQ_INT(ex[i].id, hits[0][i].id);
            CHECK(memcmp(&ex[i].score, &hits[0][i].score, 4) == 0);
        }
    }
    for (int f = 0; f < 4; f++) cdb_index_free(ix[f]);
    store_free(s);
}

/* One query near a random stored vector: brute force's top o->k ids into want, the
** index's hits into hits (o->k of them, checked). */
static void search_against_truth(cdb_test_ctx *cdb_t_, const cdb_index *ix, store *s,
                                 const cdb_index_search_opts *o, float *q, int64_t *want,
                                 cdb_hit *hits) {
    int nh = 0;
    query_from(s, (int64_t)(rng_next() % (uint64_t)s->n), q);
    ref_topk(s, q, o->k, want);
    CHECK_OK(cdb_index_search(ix, q, s->dim, o, hits, &nh));
    CHECK_EQ_INT(nh, o->k);
}

/* An IVF index on a small database (400 vectors: 16 lists of 25 on average) probes
** every list, so the re-ranked top k is brute force's (issue 32: with 8 of 16 lists
** probed, brute force found a better photo in every trial). */
CDB_TEST(ivf_on_small_database_equals_brute_force) {
    const int dim = 64, k = 10, n_q = 30;
    store *s = store_make(400, dim, 1, 5.0); /* spread out: neighbours in many lists */
    cdb_index *ix = NULL;
    cdb_index_params p = params_for(dim);
    cdb_index_search_opts o = search_opts(s, k);
    cdb_hit hits[10];
    float q[64];
    int same = 0;
    p.kind = CDB_INDEX_IVF_SQ;
    CHECK_OK(cdb_index_build_arrays(&p, s->ids, s->vecs, s->n, &ix));
    {
        cdb_index_info in;
        cdb_index_get_info(ix, &in);
        CHECK_EQ_INT(in.nlist, 16);
        CHECK(in.nprobe < in.nlist); /* the planned share alone would leave lists out */
    }
    for (int t = 0; t < n_q; t++) {
        int64_t want[10];
        search_against_truth(cdb_t_, ix, s, &o, q, want, hits);
        for (int i = 0; i < k; i++) {
            /* the same scores (an id may trade places with a tie) */
            CHECK_NEAR(hits[i].score, ref_score(s, pos_of(s, want[i]), q), 1e-6);
            same += hits[i].id == want[i];
        }
    }
    CHECK(same >= n_q * k - 2);
    cdb_index_free(ix);
    store_free(s);
}

/* Too few vectors to train: refused in clipdb's words before FAISS runs, and an index
** given enough trains. */
CDB_TEST(train_needs_enough_vectors) {
    const int dim = 64;
    store *s = store_make(300, dim, 10, 0.5);
    const cdb_index_kind kinds[] = {CDB_INDEX_IVF_SQ, CDB_INDEX_IVF_PQ};
    const int64_t too_few[] = {15, 255}; /* the plan's fewest lists are 16; PQ codebooks 256 */
    for (int f = 0; f < 2; f++) {
        cdb_index_params p = params_for(dim);
        cdb_index *ix = NULL;
        p.kind = kinds[f];
        CHECK_OK(cdb_index_new(&p, s->n, &ix));
        CHECK_RC(cdb_index_train(ix, s->vecs, too_few[f]), CDB_INVALID);
        CHECK_MSG(strstr(cdb_errmsg(), "needs at least") && !strstr(cdb_errmsg(), "faiss"), "%s",
                  cdb_errmsg());
        CHECK(!cdb_index_is_trained(ix));
        CHECK_OK(cdb_index_train(ix, s->vecs, s->n));
        CHECK(cdb_index_is_trained(ix));
        cdb_index_free(ix);
    }
    store_free(s);
}

CDB_TEST(freshness_uncovered_deleted_changed) {
    const int dim = 32;
    store *s = store_make(3000, dim, 20, 0.4);
    cdb_index *ix = NULL;
    cdb_index_params p = params_for(dim);
    cdb_hit hits[5];
    int n = 0;
    float q[32];
    cdb_index_search_opts o = search_opts(s, 5);
    /* index covers the first 2500; the last 500 are "stored since" */
    CHECK_OK(cdb_index_build_arrays(&p, s->ids, s->vecs, 2500, &ix));
    CHECK(cdb_index_covers(ix, s->ids[0]) && cdb_index_covers(ix, s->ids[2499]));
    CHECK(!cdb_index_covers(ix, s->ids[2500]) && !cdb_index_covers(ix, 8));
    /* a query equal to an uncovered vector: not found without extra, found with */
    for (int d = 0; d < dim; d++) q[d] = (float)from_half(s->vecs[(size_t)2900 * dim + d]);
    CHECK_OK(cdb_index_search(ix, q, dim, &o, hits, &n));
    CHECK(hits[0].id != s->ids[2900]);
    o.extra_ids = s->ids + 2500, o.extra_vecs = s->vecs + (size_t)2500 * dim, o.n_extra = 500;
    CHECK_OK(cdb_index_search(ix, q, dim, &o, hits, &n));
    CHECK_EQ_INT(hits[0].id, s->ids[2900]);
    CHECK_NEAR(hits[0].score, 1.0, 1e-3);
    /* deleted (fetch says absent) and excluded ids never appear */
    for (int d = 0; d < dim; d++) q[d] = (float)from_half(s->vecs[(size_t)100 * dim + d]);
    CHECK_OK(cdb_index_search(ix, q, dim, &o, hits, &n));
    CHECK_EQ_INT(hits[0].id, s->ids[100]);
    s->deleted[100] = 1;
    CHECK_OK(cdb_index_search(ix, q, dim, &o, hits, &n));
    CHECK_EQ_INT(n, 5);
    for (int i = 0; i < n; i++) CHECK(hits[i].id != s->ids[100]);
    {
        int64_t excl[1] = {hits[0].id};
        o.exclude_ids = excl, o.n_exclude = 1;
        CHECK_OK(cdb_index_search(ix, q, dim, &o, hits, &n));
        for (int i = 0; i < n; i++) CHECK(hits[i].id != excl[0]);
        o.exclude_ids = NULL, o.n_exclude = 0;
    }
    /* mass deletion: search widens and still fills k from what is left */
    for (int64_t i = 0; i < 2500; i++) s->deleted[i] = (i % 10) != 0;
    CHECK_OK(cdb_index_search(ix, q, dim, &o, hits, &n));
    CHECK_EQ_INT(n, 5);
    for (int i = 0; i < n; i++) {
        int64_t pp = pos_of(s, hits[i].id);
        CHECK(pp >= 0 && !s->deleted[pp]);
    }
    memset(s->deleted, 0, (size_t)s->n);
    /* a changed vector (id 0 re-stored as another vector) is scored from extra */
    {
        int64_t id0 = s->ids[0];
        o.extra_ids = &id0, o.extra_vecs = s->vecs + (size_t)2900 * dim, o.n_extra = 1;
        for (int d = 0; d < dim; d++) q[d] = (float)from_half(s->vecs[(size_t)2900 * dim + d]);
        CHECK_OK(cdb_index_search(ix, q, dim, &o, hits, &n));
        CHECK_EQ_INT(hits[0].id, id0);
        CHECK_NEAR(hits[0].score, 1.0, 1e-3);
        for (int i = 1; i < n; i++) CHECK(hits[i].id != id0); /* once */
    }
    /* min_score */
    o.extra_ids = NULL, o.n_extra = 0, o.min_score = 0.99f;
    CHECK_OK(cdb_index_search(ix, q, dim, &o, hits, &n));
    for (int i = 0; i < n; i++) CHECK(hits[i].score >= 0.99f);
    for (int i = n; i < 5; i++) CHECK(hits[i].id == -1 && isinf(hits[i].score));
    /* incremental add makes the rest covered */
    CHECK_OK(cdb_index_add(ix, s->ids + 2500, s->vecs + (size_t)2500 * dim, 500));
    CHECK(cdb_index_covers(ix, s->ids[2900]));
    CHECK_EQ_INT(cdb_index_count(ix), 3000);
    /* no index at all: extra alone is an exact search */
    o.min_score = -INFINITY, o.extra_ids = s->ids, o.extra_vecs = s->vecs, o.n_extra = (size_t)s->n;
    CHECK_OK(cdb_index_search(NULL, q, dim, &o, hits, &n));
    CHECK_EQ_INT(hits[0].id, s->ids[2900]);
    cdb_index_free(ix);
    store_free(s);
}

CDB_TEST(persist_atomic_roundtrip) {
    const int dim = 48;
    store *s = store_make(4000, dim, 16, 0.5);
    cdb_index *ix = NULL, *ld = NULL, *old = NULL;
    cdb_index_params p = params_for(dim);
    char dir[] = "/tmp/cdb_index_testXXXXXX", path[256], tmp[300];
    cdb_hit a[8], b[8];
    int na, nb;
    float q[48];
    cdb_index_search_opts o = search_opts(s, 8);
    cdb_index_info info;
    FILE *f;
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/model1.index", dir);
    CHECK_RC(cdb_index_load(path, &ld), CDB_NOTFOUND);
    p.factory = "IVF16,PQ8np";
    p.nprobe = 4;
    CHECK_OK(cdb_index_build_arrays(&p, s->ids, s->vecs, 3000, &ix));
    cdb_index_set_watermark(ix, 424242);
    CHECK_OK(cdb_index_save(ix, path));
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    CHECK(access(tmp, F_OK) != 0); /* no temp left behind */
    CHECK_OK(cdb_index_load(path, &ld));
    CHECK_EQ_INT(cdb_index_watermark(ld), 424242);
    CHECK_EQ_INT(cdb_index_count(ld), 3000);
    CHECK(cdb_index_covers(ld, s->ids[2999]) && !cdb_index_covers(ld, s->ids[3000]));
    cdb_index_get_info(ld, &info);
    CHECK_EQ_INT(info.nprobe, 4);
    CHECK_EQ_INT(info.n_indexed, 3000);
    CHECK_EQ_STR(info.factory, "IVF16,PQ8np");
    for (int t = 0; t < 5; t++) {
        query_from(s, t * 300, q);
        CHECK_OK(cdb_index_search(ix, q, dim, &o, a, &na));
        CHECK_OK(cdb_index_search(ld, q, dim, &o, b, &nb));
        CHECK_EQ_INT(na, nb);
        for (int i = 0; i < na; i++) CHECK(a[i].id == b[i].id && a[i].score == b[i].score);
    }
    /* replace the file while "old" (loaded earlier) keeps serving */
    old = ld, ld = NULL;
    CHECK_OK(cdb_index_add(ix, s->ids + 3000, s->vecs + (size_t)3000 * dim, 1000));
    cdb_index_set_watermark(ix, 424243);
    CHECK_OK(cdb_index_save(ix, path));
    query_from(s, 10, q);
    CHECK_OK(cdb_index_search(old, q, dim, &o, a, &na));
    CHECK_EQ_INT(na, 8);
    CHECK_OK(cdb_index_load(path, &ld));
    CHECK_EQ_INT(cdb_index_count(ld), 4000);
    CHECK_EQ_INT(cdb_index_watermark(ld), 424243);
    cdb_index_free(ld), ld = NULL;
    /* damaged files are refused, not crashed on */
    f = fopen(path, "r+b");
    CHECK(f != NULL);
    fseek(f, 0, SEEK_END);
    {
        long sz = ftell(f);
        CHECK(ftruncate(fileno(f), sz / 2) == 0);
    }
    fclose(f);
    CHECK_RC(cdb_index_load(path, &ld), CDB_CORRUPT);
    f = fopen(path, "wb");
    fputs("not an index at all, just text", f);
    fclose(f);
    CHECK_RC(cdb_index_load(path, &ld), CDB_CORRUPT);
    CHECK(ld == NULL);
    unlink(path);
    rmdir(dir);
    cdb_index_free(ix), cdb_index_free(old);
    store_free(s);
}

CDB_TEST(query_refuses_nan_inf_and_checks_dims) {
    const int dim = 16;
    store *s = store_make(500, dim, 4, 0.3);
    cdb_index *ix = NULL;
    cdb_index_params p = params_for(dim);
    cdb_hit hits[3];
    int n = 0;
    float q[16];
    cdb_index_search_opts o = search_opts(s, 3);
    CHECK_OK(cdb_index_build_arrays(&p, s->ids, s->vecs, s->n, &ix));
    query_from(s, 1, q);
    q[5] = NAN;
    CHECK_RC(cdb_index_search(ix, q, dim, &o, hits, &n), CDB_INVALID);
    CHECK(strstr(cdb_errmsg(), "NaN") && strstr(cdb_errmsg(), "5"));
    q[5] = -INFINITY;
    CHECK_RC(cdb_index_search(ix, q, dim, &o, hits, &n), CDB_INVALID);
    CHECK(strstr(cdb_errmsg(), "infinite") != NULL);
    CHECK_RC(cdb_index_query_check(q, dim), CDB_INVALID);
    memset(q, 0, sizeof q);
    CHECK_RC(cdb_index_search(ix, q, dim, &o, hits, &n), CDB_INVALID);
    CHECK(strstr(cdb_errmsg(), "zero") != NULL);
    query_from(s, 1, q);
    CHECK_RC(cdb_index_search(ix, q, dim - 1, &o, hits, &n), CDB_DIM_MISMATCH);
    CHECK_RC(cdb_index_exact_search(q, 1, dim, NULL, s->vecs, 0, 0, 0, NULL, 0, 1, hits), CDB_INVALID);
    o.fetch = NULL;
    CHECK_RC(cdb_index_search(ix, q, dim, &o, hits, &n), CDB_INVALID);
    /* an un-normalized query (x1e5) gives the same result as the normalized one */
    {
        cdb_hit h2[3];
        int n2;
        float big[16];
        o.fetch = fetch;
        for (int i = 0; i < dim; i++) big[i] = q[i] * 1e5f;
        CHECK_OK(cdb_index_search(ix, q, dim, &o, hits, &n));
        CHECK_OK(cdb_index_search(ix, big, dim, &o, h2, &n2));
        for (int i = 0; i < n; i++) CHECK(hits[i].id == h2[i].id && fabsf(hits[i].score - h2[i].score) <= 1e-6f);
    }
    /* ids must be >= 0 */
    {
        int64_t bad = -5;
        CHECK_RC(cdb_index_add(ix, &bad, s->vecs, 1), CDB_INVALID);
    }
    cdb_index_free(ix);
    store_free(s);
}

CDB_TEST(query_combine_weighted) {
    const int dim = 24;
    float t[3 * 24], out[24], w[3] = {1.0f, 0.5f, -1.0f};
    double want[24], s = 0;
    for (int i = 0; i < 3 * dim; i++) t[i] = (float)(rng_gauss() * (i < dim ? 1e5 : 1.0));
    for (int i = 0; i < dim; i++) want[i] = 0;
    for (int k = 0; k < 3; k++) {
        double n = 0;
        for (int i = 0; i < dim; i++) n += (double)t[k * dim + i] * t[k * dim + i];
        n = sqrt(n);
        for (int i = 0; i < dim; i++) want[i] += w[k] * t[k * dim + i] / n;
    }
    for (int i = 0; i < dim; i++) s += want[i] * want[i];
    s = sqrt(s);
    CHECK_OK(cdb_index_query_combine(t, w, 3, dim, out));
    for (int i = 0; i < dim; i++) CHECK_NEAR(out[i], want[i] / s, 1e-6);
    /* "a - a" cancels: refused */
    memcpy(t + dim, t, dim * sizeof *t);
    w[1] = -1.0f;
    CHECK_RC(cdb_index_query_combine(t, w, 2, dim, out), CDB_INVALID);
    t[3] = NAN;
    w[1] = 1.0f;
    CHECK_RC(cdb_index_query_combine(t, w, 2, dim, out), CDB_INVALID);
    CHECK(strstr(cdb_errmsg(), "NaN") != NULL);
    t[3] = 1;
    w[0] = INFINITY;
    CHECK_RC(cdb_index_query_combine(t, w, 2, dim, out), CDB_INVALID);
}

CDB_TEST(refresh_policy) {
    const int dim = 16;
    store *s = store_make(1000, dim, 4, 0.3);
    cdb_index *ix = NULL;
    cdb_index_params p = params_for(dim);
    cdb_index_refresh_action a;
    char why[256];
    CHECK_OK(cdb_index_refresh_decide(NULL, &p, 100, 100, 0, &a, why, sizeof why));
    CHECK_EQ_INT(a, CDB_INDEX_REFRESH_REBUILD);
    CHECK_OK(cdb_index_build_arrays(&p, s->ids, s->vecs, s->n, &ix));
    CHECK_OK(cdb_index_refresh_decide(ix, &p, 1000, 0, 0, &a, why, sizeof why));
    CHECK_EQ_INT(a, CDB_INDEX_REFRESH_NONE);
    CHECK_OK(cdb_index_refresh_decide(ix, &p, 1050, 50, 10, &a, why, sizeof why));
    CHECK_EQ_INT(a, CDB_INDEX_REFRESH_ADD);
    CHECK_OK(cdb_index_refresh_decide(ix, &p, 1000, 0, 300, &a, why, sizeof why));
    CHECK_EQ_INT(a, CDB_INDEX_REFRESH_REBUILD);
    CHECK(strstr(why, "20%") != NULL);
    /* outgrowing the flat size class */
    CHECK_OK(cdb_index_refresh_decide(ix, &p, 100000, 99000, 0, &a, why, sizeof why));
    CHECK_EQ_INT(a, CDB_INDEX_REFRESH_REBUILD);
    cdb_index_free(ix);
    store_free(s);
}

CDB_TEST(exact_search_multi_query_threads) {
    const int dim = 40, k = 7, n_q = 5;
    store *s = store_make(9000, dim, 30, 0.6);
    float q[5 * 40];
    cdb_hit multi[5 * 7], one[7], one1[7];
    int64_t excl[3];
    for (int j = 0; j < n_q; j++) query_from(s, j * 1000, q + j * dim);
    CHECK_OK(cdb_index_exact_search(q, n_q, dim, s->ids, s->vecs, (size_t)s->n, k, -INFINITY, NULL, 0, 2, multi));
    for (int j = 0; j < n_q; j++) {
        int64_t want[7];
        ref_topk(s, q + j * dim, k, want);
        CHECK_OK(cdb_index_exact_search(q + j * dim, 1, dim, s->ids, s->vecs, (size_t)s->n, k, -INFINITY, NULL, 0, 1, one));
        for (int i = 0; i < k; i++) {
            CHECK_EQ_INT(multi[j * k + i].id, one[i].id);
            CHECK(memcmp(&multi[j * k + i].score, &one[i].score, 4) == 0);
            CHECK_EQ_INT(one[i].id, want[i]);
        }
    }
    /* exclusions (sorted) and positions as ids */
    excl[0] = one[0].id, excl[1] = one[2].id, excl[2] = one[4].id;
    if (excl[0] > excl[1]) { int64_t t = excl[0]; excl[0] = excl[1]; excl[1] = t; }
    if (excl[1] > excl[2]) { int64_t t = excl[1]; excl[1] = excl[2]; excl[2] = t; }
    if (excl[0] > excl[1]) { int64_t t = excl[0]; excl[0] = excl[1]; excl[1] = t; }
    CHECK_OK(cdb_index_exact_search(q + (n_q - 1) * dim, 1, dim, s->ids, s->vecs, (size_t)s->n, k, -INFINITY, excl, 3, 2, one1));
    for (int i = 0; i < k; i++) CHECK(one1[i].id != excl[0] && one1[i].id != excl[1] && one1[i].id != excl[2]);
    CHECK_EQ_INT(one1[0].id, one[1].id);
    CHECK_OK(cdb_index_exact_search(q, 1, dim, NULL, s->vecs, (size_t)s->n, k, -INFINITY, NULL, 0, 2, one1));
    CHECK_EQ_INT(one1[0].id * 10 + 7, multi[0].id);
    store_free(s);
}

/* Brute-force top-k by ref_score among the positions with in[pos] set and score >=
** min_score; returns how many there are (<= k). */
static int ref_topk_in(const store *s, const float *q, int k, const uint8_t *in, double min_score,
                       int64_t *out_ids, double *out_scores) {
    int n = 0;
    for (int64_t p = 0; p < s->n; p++) {
        double sc;
        int j;
        if (!in[p] || s->deleted[p] || (sc = ref_score(s, p, q)) < min_score) continue;
        if (n == k && sc <= out_scores[k - 1]) continue;
        if (n < k) n++;
        for (j = n - 1; j > 0 && out_scores[j - 1] < sc; j--)
            out_scores[j] = out_scores[j - 1], out_ids[j] = out_ids[j - 1];
        out_scores[j] = sc, out_ids[j] = s->ids[p];
    }
    return n;
}

/* A search limited to a set of ids (a metadata filter) returns the top k of the set:
** on a flat index, by the exact scan (small sets) and by widened candidates (forced
** with scan_max 1) alike, equal to a brute force over the set; never fewer hits than
** the set holds, on HNSW too, and with min_score only what passes it. */
CDB_TEST(filtered_search_is_top_k_of_the_set) {
    const int dim = 32, k = 10;
    store *s = store_make(5000, dim, 30, 0.6);
    const char *factories[] = {NULL, "IDMap,HNSW16"};
    uint8_t *in = calloc((size_t)s->n, 1);
    int64_t *inc = malloc((size_t)s->n * sizeof *inc);
    float q[32];
    int exact_checked = 0;
    for (int f = 0; f < 2; f++) {
        cdb_index *ix = NULL;
        cdb_index_params p = params_for(dim);
        p.factory = factories[f];
        if (!factories[f]) p.kind = CDB_INDEX_FLAT;
        CHECK_OK(cdb_index_build_arrays(&p, s->ids, s->vecs, s->n, &ix));
        static const int sizes[] = {0, 3, 40, 700, 2600, 4990};
        for (int t = 0; t < 36; t++) {
            int size = sizes[t % 6], n_inc = 0;
            memset(in, 0, (size_t)s->n);
            for (int i = 0; i < size; i++) in[rng_next() % (uint64_t)s->n] = 1;
            for (int64_t i = 0; i < s->n; i++)
                if (in[i]) inc[n_inc++] = s->ids[i];
            query_from(s, (int64_t)(rng_next() % (uint64_t)s->n), q);
            double min_score = t % 4 == 3 ? 0.3 : -INFINITY;
            int64_t want[10];
            double want_sc[10];
            int n_want = ref_topk_in(s, q, k, in, min_score, want, want_sc);
            for (int path = 0; path < 2; path++) {
                cdb_index_search_opts o = search_opts(s, k);
                cdb_hit hits[10];
                int nh = -1;
                o.min_score = (float)min_score;
                o.include_ids = inc, o.n_include = (size_t)n_inc;
                o.scan_max = path == 0 ? 0 : 1;
                CHECK_OK(cdb_index_search(ix, q, dim, &o, hits, &nh));
                CHECK_MSG(nh == n_want, "%s, set of %d, path %d: %d hits, %d in the set",
                          factories[f] ? factories[f] : "flat", n_inc, path, nh, n_want);
                for (int i = 0; i < nh; i++) {
                    int64_t pos = pos_of(s, hits[i].id);
                    CHECK(pos >= 0 && in[pos]);
                    CHECK(hits[i].score >= (float)min_score);
                }
                /* Exact: the scan always, the widened candidates on the flat index. */
                if (path == 0 || !factories[f]) {
                    for (int i = 0; i < nh && i < n_want; i++)
                        CHECK_NEAR(hits[i].score, want_sc[i], 1e-6);
                    exact_checked += nh;
                }
            }
        }
        cdb_index_free(ix);
    }
    CHECK(exact_checked > 200);
    free(in), free(inc);
    store_free(s);
}

/* ---- issue 29: IVF over an HNSW coarse quantizer, lists on disk, parts merged ---- */

static cdb_status src_read(void *ctx, int64_t pos, int64_t n, int64_t *ids, uint16_t *vecs) {
    const store *s = ctx;
    memcpy(ids, s->ids + pos, (size_t)n * sizeof *ids);
    memcpy(vecs, s->vecs + (size_t)pos * s->dim, (size_t)n * s->dim * 2);
    return CDB_OK;
}

/* A source over s's positions [lo, hi): the store's own bytes, through a view that
** starts at lo. */
typedef struct range_src { store view; } range_src;

static cdb_index_source source_range(const store *s, int64_t lo, int64_t hi, range_src *r) {
    cdb_index_source src;
    r->view = *s;
    r->view.ids = s->ids + lo;
    r->view.vecs = s->vecs + (size_t)lo * s->dim;
    r->view.n = hi - lo;
    src.n = hi - lo, src.read = src_read, src.ctx = &r->view;
    return src;
}

/* Searches a and b for the same n_q queries: the same hits, ids and score bits. */
static void same_hits(cdb_test_ctx *cdb_t_, const cdb_index *a, const cdb_index *b, store *s,
                      int n_q, int *compared) {
    cdb_index_search_opts o = search_opts(s, 10);
    cdb_hit ha[10], hb[10];
    float q[64];
    int na, nb;
    for (int t = 0; t < n_q; t++) {
        query_from(s, (int64_t)(t * 7919 % s->n), q);
        CHECK_OK(cdb_index_search(a, q, s->dim, &o, ha, &na));
        CHECK_OK(cdb_index_search(b, q, s->dim, &o, hb, &nb));
        CHECK_EQ_INT(na, nb);
        for (int i = 0; i < na && i < nb; i++) {
            CHECK_MSG(ha[i].id == hb[i].id && ha[i].score == hb[i].score,
                      "query %d hit %d: %lld %.9g vs %lld %.9g", t, i, (long long)ha[i].id,
                      ha[i].score, (long long)hb[i].id, hb[i].score);
            (*compared)++;
        }
    }
}

CDB_TEST(plan_ivf_hnsw_pq_for_large_n) {
    cdb_index_params p = params_for(512);
    cdb_index_info in;
    p.mem_budget_bytes = (size_t)8 << 30;
    CHECK_OK(cdb_index_plan(10000000, &p, &in));
    CHECK_EQ_INT(in.kind, CDB_INDEX_IVF_HNSW_PQ);
    CHECK_EQ_STR(cdb_index_kind_name(in.kind), "ivf-hnsw-pq");
    CHECK(strstr(in.factory, "_HNSW32,PQ64") != NULL);
    CHECK(in.nlist >= 8192 && in.nlist <= 65536);
    /* training bounded: the sample's fp32 copy stays well under 1 GB at 10^7 */
    CHECK(in.n_train * 512 * 4 < (int64_t)1 << 30);
    CHECK(in.est_bytes < (size_t)1 << 30); /* codes + ids: 72 bytes a vector */
    CHECK_OK(cdb_index_plan(1000000, &p, &in));
    CHECK_EQ_INT(in.kind, CDB_INDEX_IVF_PQ);
    p.kind = CDB_INDEX_IVF_HNSW_PQ; /* forced at any size */
    CHECK_OK(cdb_index_plan(1000000, &p, &in));
    CHECK_EQ_INT(in.kind, CDB_INDEX_IVF_HNSW_PQ);
    p.kind = CDB_INDEX_CUSTOM; /* needs a factory */
    CHECK_RC(cdb_index_plan(1000000, &p, &in), CDB_INVALID);
}

/* Recall against brute force, and every score the exact one of the stored vector. */
CDB_TEST(ivf_hnsw_pq_against_brute_force) {
    const int dim = 64, k = 10, n_q = 30;
    int found = 0;
    float q[64];
    cdb_hit hits[10];
    cdb_index_info in;
    store *s = store_make(20000, dim, 1000, 0.5); /* PQ8 cannot rank 500 near-twins */
    cdb_index_params p = params_for(dim);
    cdb_index_search_opts o = search_opts(s, k);
    cdb_index *ix = NULL;
    p.kind = CDB_INDEX_IVF_HNSW_PQ;
    CHECK_OK(cdb_index_build_arrays(&p, s->ids, s->vecs, s->n, &ix));
    cdb_index_get_info(ix, &in);
    CHECK_EQ_INT(in.kind, CDB_INDEX_IVF_HNSW_PQ);
    CHECK_EQ_INT(in.n_indexed, s->n);
    CHECK(in.nprobe < in.nlist); /* approximate: not every list is probed */
    for (int t = 0; t < n_q; t++) {
        int64_t want[10];
        search_against_truth(cdb_t_, ix, s, &o, q, want, hits);
        for (int i = 0; i < k; i++) {
            int64_t pos = pos_of(s, hits[i].id);
            CHECK(pos >= 0);
            CHECK_NEAR(hits[i].score, ref_score(s, pos, q), 1e-6);
            for (int j = 0; j < k; j++) found += hits[i].id == want[j];
        }
    }
    CHECK_MSG(found >= 0.95 * n_q * k, "recall@10 %.3f", found / (double)(n_q * k));
    cdb_index_free(ix);
    store_free(s);
}

/* One query's candidates with the HNSW quantizer walked by clipdb (its dot kernel) are
** FAISS's own (faiss_plain: IndexIVF::search): re-rank 1x, so the hits are exactly the
** k candidates FAISS's part returned. The oracle is FAISS; fp32 sums in another order may
** swap a near-tie at the k-th place, so 98 of 100 queries must agree. And one OpenMP
** thread or two give the very same hits. */
CDB_TEST(ivf_hnsw_walk_equals_faiss_search) {
    const int dim = 64, k = 10, n_q = 100;
    int same = 0, same_threads = 0;
    float q[64];
    store *s = store_make(20000, dim, 1000, 0.5);
    cdb_index_params p = params_for(dim);
    cdb_index_search_opts o = search_opts(s, k);
    cdb_index_info in;
    cdb_index *ix = NULL;
    p.kind = CDB_INDEX_IVF_HNSW_PQ;
    CHECK_OK(cdb_index_build_arrays(&p, s->ids, s->vecs, s->n, &ix));
    cdb_index_get_info(ix, &in);
    CHECK(in.nprobe < in.nlist); /* the walk chooses lists */
    o.rerank_factor = 1;
    for (int t = 0; t < n_q; t++) {
        cdb_hit a[10], b[10], c[10];
        int na = 0, nb = 0, nc = 0, eq = 1, eq_t = 1;
        query_from(s, (int64_t)(rng_next() % (uint64_t)s->n), q);
        o.faiss_plain = 1, o.faiss_threads = 0;
        CHECK_OK(cdb_index_search(ix, q, dim, &o, a, &na));
        o.faiss_plain = 0;
        CHECK_OK(cdb_index_search(ix, q, dim, &o, b, &nb));
        o.faiss_plain = 1, o.faiss_threads = 2;
        CHECK_OK(cdb_index_search(ix, q, dim, &o, c, &nc));
        CHECK_EQ_INT(na, k);
        eq = nb == na, eq_t = nc == na;
        for (int i = 0; i < na; i++) {
            eq &= a[i].id == b[i].id && a[i].score == b[i].score;
            eq_t &= a[i].id == c[i].id && a[i].score == c[i].score;
        }
        same += eq, same_threads += eq_t;
    }
    CHECK_MSG(same >= 98, "clipdb's walk agreed with FAISS's search on %d of %d queries", same,
              n_q);
    CHECK_EQ_INT(same_threads, n_q);
    cdb_index_free(ix);
    store_free(s);
}

/* Every entry of ix's lists: for each id its list (list_of[id], -1: none) and code
** (code_size bytes at codes + id * code_size); and the lists' ids in order, end to end,
** into seq[n]. Ids are s's positions (0 .. n-1). */
static void entries_of(cdb_test_ctx *cdb_t_, const cdb_index *ix, int64_t n, int nlist,
                       int64_t *list_of, uint8_t *codes, size_t code_size, int64_t *seq) {
    int64_t at = 0, *ids = malloc((size_t)n * sizeof *ids);
    uint8_t *c = malloc((size_t)n * code_size);
    for (int64_t i = 0; i < n; i++) list_of[i] = -1;
    for (int l = 0; l < nlist; l++) {
        int64_t len = 0;
        size_t cs = 0;
        CHECK_OK(cdb_index_list_entries(ix, l, &len, &cs, NULL, NULL));
        CHECK(cs == code_size && at + len <= n);
        if (cs != code_size || at + len > n) break;
        CHECK_OK(cdb_index_list_entries(ix, l, &len, &cs, ids, c));
        for (int64_t e = 0; e < len; e++) {
            CHECK(ids[e] >= 0 && ids[e] < n && list_of[ids[e]] < 0);
            if (ids[e] < 0 || ids[e] >= n) continue;
            list_of[ids[e]] = l;
            memcpy(codes + (size_t)ids[e] * code_size, c + (size_t)e * code_size, code_size);
            seq[at++] = ids[e];
        }
    }
    CHECK_EQ_INT(at, n);
    free(ids), free(c);
}

/* clipdb's add (the quantizer walked with its dot kernel, the PQ codes computed with its
** kernel) against FAISS's own add (IndexIVF::add_with_ids) of the same vectors to copies
** of one trained index, compared entry by entry: each vector in the same list, except
** where the two walks' fp32 sums order a near-tie differently (at most 0.1%), with the
** same code bytes wherever the list is the same; and 1 or 2 threads give the same lists,
** entry for entry in the same order. */
CDB_TEST(ivf_add_equals_faiss_add) {
    const int dim = 64;
    store *s = store_make(20000, dim, 1000, 0.5);
    cdb_index_params p = params_for(dim);
    cdb_index *trained = NULL, *faiss = NULL, *ours = NULL, *one = NULL;
    cdb_index_info in;
    range_src r_all;
    cdb_index_source all = source_range(s, 0, s->n, &r_all);
    const size_t cs = (size_t)dim / 8; /* PQ8: 8 sub-quantizers of 8 bits */
    int64_t n = s->n, *lf = malloc((size_t)n * 8), *lo = malloc((size_t)n * 8);
    int64_t *l1 = malloc((size_t)n * 8), *sf = malloc((size_t)n * 8);
    int64_t *so = malloc((size_t)n * 8), *s1 = malloc((size_t)n * 8);
    uint8_t *cf = malloc((size_t)n * cs), *co = malloc((size_t)n * cs), *c1 = malloc(n * cs);
    int moved = 0, code_diff = 0;
    for (int64_t i = 0; i < n; i++) s->ids[i] = i; /* ids are positions, for entries_of */
    p.kind = CDB_INDEX_IVF_HNSW_PQ;
    CHECK_OK(cdb_index_new(&p, n, &trained));
    CHECK_OK(cdb_index_train_source(trained, &all));
    CHECK_OK(cdb_index_clone_empty(trained, &faiss));
    CHECK_OK(cdb_index_clone_empty(trained, &ours));
    CHECK_OK(cdb_index_clone_empty(trained, &one));
    cdb_index_set_faiss_add(faiss, 1);
    CHECK_OK(cdb_index_add_source(faiss, &all));
    setenv("CLIPDB_THREADS", "2", 1);
    CHECK_OK(cdb_index_add_source(ours, &all));
    setenv("CLIPDB_THREADS", "1", 1);
    CHECK_OK(cdb_index_add_source(one, &all));
    unsetenv("CLIPDB_THREADS");
    cdb_index_get_info(ours, &in);
    CHECK_EQ_INT(in.n_indexed, n);
    entries_of(cdb_t_, faiss, n, in.nlist, lf, cf, cs, sf);
    entries_of(cdb_t_, ours, n, in.nlist, lo, co, cs, so);
    entries_of(cdb_t_, one, n, in.nlist, l1, c1, cs, s1);
    for (int64_t i = 0; i < n; i++) {
        moved += lf[i] != lo[i];
        code_diff += lf[i] == lo[i] && memcmp(cf + i * cs, co + i * cs, cs) != 0;
    }
    CHECK_MSG(moved <= n / 1000, "%d of %lld vectors in another list than FAISS's add gives",
              moved, (long long)n);
    CHECK_MSG(code_diff == 0, "%d codes differ from FAISS's", code_diff);
    CHECK(memcmp(lo, l1, (size_t)n * 8) == 0 && memcmp(so, s1, (size_t)n * 8) == 0 &&
          memcmp(co, c1, (size_t)n * cs) == 0);
    if (moved == 0) /* then the lists hold the same entries in the same order */
        CHECK(memcmp(sf, so, (size_t)n * 8) == 0);
    cdb_index_free(trained), cdb_index_free(faiss), cdb_index_free(ours), cdb_index_free(one);
    free(lf), free(lo), free(l1), free(sf), free(so), free(s1), free(cf), free(co), free(c1);
    store_free(s);
}

static long file_size(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 ? (long)sb.st_size : -1;
}

/* Lists moved to a file: the same hits before and after, and after the index is
** saved, freed and loaded again (the loaded index maps the lists file); the index
** file no longer carries the codes. */
CDB_TEST(ondisk_lists_reopened_after_close) {
    const int dim = 64;
    store *s = store_make(12000, dim, 30, 0.5);
    cdb_index *ix = NULL, *ram = NULL, *ld = NULL;
    cdb_index_params p = params_for(dim);
    char dir[] = "/tmp/cdb_index_odXXXXXX", idx[256], lists[256], idx_ram[256];
    int compared = 0;
    CHECK(mkdtemp(dir) != NULL);
    snprintf(idx, sizeof idx, "%s/model.cdbidx", dir);
    snprintf(idx_ram, sizeof idx_ram, "%s/ram.cdbidx", dir);
    snprintf(lists, sizeof lists, "%s/model.ivfdata", dir);
    p.kind = CDB_INDEX_IVF_HNSW_PQ;
    CHECK_OK(cdb_index_build_arrays(&p, s->ids, s->vecs, s->n, &ix));
    CHECK_OK(cdb_index_build_arrays(&p, s->ids, s->vecs, s->n, &ram));
    CHECK_OK(cdb_index_save(ram, idx_ram));
    CHECK(!cdb_index_on_disk(ix));
    CHECK_OK(cdb_index_lists_to_disk(ix, lists));
    CHECK(cdb_index_on_disk(ix));
    CHECK_RC(cdb_index_lists_to_disk(ix, lists), CDB_INVALID);
    same_hits(cdb_t_, ix, ram, s, 20, &compared);
    if (cdb_t_->failed) return;
    CHECK_OK(cdb_index_save(ix, idx));
    cdb_index_free(ix), ix = NULL;
    CHECK_OK(cdb_index_load(idx, &ld));
    CHECK(cdb_index_on_disk(ld));
    CHECK_EQ_INT(cdb_index_count(ld), s->n);
    same_hits(cdb_t_, ld, ram, s, 20, &compared);
    CHECK(compared == 400);
    /* 12,000 PQ8 codes + ids (192 KB) are in the lists file, not in the index file */
    CHECK(file_size(lists) >= (long)s->n * (8 + 8));
    CHECK_MSG(file_size(idx) <= file_size(idx_ram) - (long)s->n * (8 + 8) * 9 / 10,
              "index file %ld bytes, in-RAM one %ld", file_size(idx), file_size(idx_ram));
    { /* a flat index has no lists to move */
        cdb_index *flat = NULL;
        cdb_index_params pf = params_for(dim);
        pf.kind = CDB_INDEX_FLAT;
        CHECK_OK(cdb_index_build_arrays(&pf, s->ids, s->vecs, 100, &flat));
        CHECK_RC(cdb_index_lists_to_disk(flat, lists), CDB_UNSUPPORTED);
        cdb_index_free(flat);
    }
    cdb_index_free(ld), ld = NULL;
    /* the lists file cut short (a crash, a partial copy): refused at load, never a SIGBUS
    ** when a search reads past its end */
    CHECK(truncate(lists, file_size(lists) / 2) == 0);
    CHECK_RC(cdb_index_load(idx, &ld), CDB_CORRUPT);
    CHECK(ld == NULL);
    cdb_index_free(ram);
    unlink(idx), unlink(idx_ram), unlink(lists);
    rmdir(dir);
    store_free(s);
}

/* Parts added to copies of one trained index and merged give the index a single add
** gives: the same ids covered and the same hits, lists in memory or on disk; a part
** trained elsewhere is refused. */
CDB_TEST(merge_of_parts_equals_single_build) {
    const int dim = 64;
    store *s = store_make(9000, dim, 30, 0.5);
    cdb_index *trained = NULL, *single = NULL, *merged = NULL, *ondisk = NULL, *other = NULL;
    cdb_index *stray = NULL, *dst = NULL;
    cdb_index_params p = params_for(dim);
    range_src r_all, r[3];
    cdb_index_source all = source_range(s, 0, s->n, &r_all), parts[3];
    const int64_t cut[4] = {0, 2000, 6500, 9000};
    char dir[] = "/tmp/cdb_index_mgXXXXXX", lists[256];
    int compared = 0;
    CHECK(mkdtemp(dir) != NULL);
    snprintf(lists, sizeof lists, "%s/merged.ivfdata", dir);
    for (int i = 0; i < 3; i++) parts[i] = source_range(s, cut[i], cut[i + 1], &r[i]);
    p.kind = CDB_INDEX_IVF_HNSW_PQ;
    CHECK_OK(cdb_index_new(&p, s->n, &trained));
    CHECK_OK(cdb_index_train_source(trained, &all));
    CHECK_EQ_INT(cdb_index_count(trained), 0);
    CHECK_OK(cdb_index_clone_empty(trained, &single));
    CHECK_OK(cdb_index_add_source(single, &all));
    CHECK_OK(cdb_index_build_parts(trained, parts, 3, NULL, &merged));
    CHECK_OK(cdb_index_build_parts(trained, parts, 3, lists, &ondisk));
    CHECK(cdb_index_on_disk(ondisk) && !cdb_index_on_disk(merged));
    CHECK_EQ_INT(cdb_index_count(merged), s->n);
    CHECK_EQ_INT(cdb_index_count(ondisk), s->n);
    for (int64_t i = 0; i < s->n; i++)
        CHECK(cdb_index_covers(merged, s->ids[i]) && cdb_index_covers(ondisk, s->ids[i]));
    {
        cdb_index_info a, b;
        cdb_index_get_info(single, &a);
        cdb_index_get_info(merged, &b);
        CHECK_EQ_INT(a.n_indexed, b.n_indexed);
        CHECK_EQ_INT(a.nprobe, b.nprobe);
    }
    same_hits(cdb_t_, single, merged, s, 40, &compared);
    same_hits(cdb_t_, single, ondisk, s, 40, &compared);
    CHECK(compared == 800);
    /* a part from an index trained on other vectors has other centroids: refused */
    p.kind = CDB_INDEX_IVF_HNSW_PQ;
    {
        range_src rr;
        cdb_index_source half = source_range(s, 0, 4500, &rr);
        CHECK_OK(cdb_index_new(&p, 4500, &other));
        CHECK_OK(cdb_index_train_source(other, &half));
        CHECK_OK(cdb_index_clone_empty(other, &stray));
        CHECK_OK(cdb_index_add_source(stray, &half));
        CHECK_OK(cdb_index_clone_empty(trained, &dst));
        CHECK(cdb_index_merge(dst, &stray, 1, NULL) != CDB_OK);
    }
    cdb_index_free(trained), cdb_index_free(single), cdb_index_free(merged);
    cdb_index_free(ondisk), cdb_index_free(other), cdb_index_free(stray), cdb_index_free(dst);
    unlink(lists);
    rmdir(dir);
    store_free(s);
}

CDB_TEST_MAIN(filtered_search_is_top_k_of_the_set, plan_automatic_choice,
              scores_identical_across_index_types,
              ivf_on_small_database_equals_brute_force,
              train_needs_enough_vectors, freshness_uncovered_deleted_changed, persist_atomic_roundtrip,
              query_refuses_nan_inf_and_checks_dims, query_combine_weighted, refresh_policy,
              exact_search_multi_query_threads, plan_ivf_hnsw_pq_for_large_n,
              ivf_hnsw_pq_against_brute_force, ondisk_lists_reopened_after_close,
              merge_of_parts_equals_single_build, ivf_hnsw_walk_equals_faiss_search,
              ivf_add_equals_faiss_add)
