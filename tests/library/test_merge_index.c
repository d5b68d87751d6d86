/*
** test_merge_index.c: the merged database's index built in parts (merge_index.c,
** cdb_eng_index_build_split) against two independent truths: the index a single build
** makes from the same store (cdb_eng_index_build), and brute force over every stored
** vector (cdb_index_exact_search). A store of clustered random vectors, its ids spread
** over 3 parts plus ids no part brought (the last group); the index forced to an IVF
** kind. In-process, no model needed.
**
** And the index a cluster builds (part_index.c, then the merge): one index trained on a
** sample of 3 part databases, each part's vectors added to a copy of it under the part's
** own file ids, then a merged store whose ids are not the parts' (rows in another order,
** some of a part's rows replaced by another part's, rows of no part): the merged lists,
** from the parts' indexes with their ids renamed, are checked against a single add of the
** merged store to the same trained index (every id in the same list) and the top 10 of
** random queries against that build and brute force. A part changed since its add, or
** whose index is gone, is added again and the result still equals.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cdb_test.h"
#include "../db/db_test_util.h"
#include "engine/library/library.h"
#include "index/index.h"

#define DIM 32
#define N_VEC 6000
#define N_CENTERS 48
#define N_Q 24
#define K 10

static char g_dir[256];

/* A database of N_VEC clustered vectors (all[]), ids 1..N_VEC in put order. */
static int make_store(cdb_db **db, int64_t *model, float *all) {
    cdb_db_batch *b = NULL;
    float centers[N_CENTERS][DIM];
    uint64_t seed = 29;
    int64_t root = 0;
    cdb_db_params p = cdb_db_params_default();
    p.sync = CDB_DB_SYNC_NORMAL;
    if (tu_create(g_dir, sizeof g_dir, "mergeidx", p, db) != CDB_OK) return -1;
    if (cdb_db_model_register(*db, "merge-index-test", "test", DIM, NULL, model) != CDB_OK ||
        cdb_db_root_add(*db, "/merge/photos", &root) != CDB_OK ||
        cdb_db_batch_new(*db, *model, &b) != CDB_OK)
        return -1;
    for (int c = 0; c < N_CENTERS; c++) tu_vec(1000 + (uint64_t)c, 1.0f, centers[c], DIM);
    for (int i = 0; i < N_VEC; i++) {
        char rel[64];
        cdb_db_file_meta m = tu_meta(1000 + i, 1700000000000000000LL + i, (uint64_t)i);
        float *v = all + (size_t)i * DIM;
        int c = (int)(tu_splitmix(&seed) % N_CENTERS);
        for (int d = 0; d < DIM; d++) v[d] = centers[c][d] + 0.3f * (tu_uniform(&seed) - 0.5f);
        snprintf(rel, sizeof rel, "%02d/img_%05d.jpg", i / 500, i);
        if (cdb_db_batch_put(b, root, rel, &m, v, DIM) != CDB_OK) return -1;
        if (cdb_db_batch_count(b) >= 1000 && cdb_db_batch_commit(b, NULL) != CDB_OK) return -1;
    }
    if (cdb_db_batch_commit(b, NULL) != CDB_OK) return -1;
    cdb_db_batch_free(b);
    return 0;
}

/* Top K of each query through ix (its own nprobe), re-ranked from db's store. */
static int search_ix(const cdb_index *ix, cdb_db *db, int64_t model, const float *qs,
                     cdb_hit *out) {
    eng_fetch_ctx fc = {.db = db, .model_id = model, .dim = DIM};
    cdb_index_search_opts o = cdb_index_search_opts_default();
    int got = 0;
    o.k = K;
    o.fetch = cdb_eng_fetch_vectors;
    o.fetch_ctx = &fc;
    for (int q = 0; q < N_Q; q++)
        if (cdb_index_search(ix, qs + (size_t)q * DIM, DIM, &o, out + (size_t)q * K, &got) !=
                CDB_OK ||
            got != K)
            return -1;
    return 0;
}

/* Top K of every query through the saved index of the model (every list probed). */
static int search_saved(cdb_db *db, int64_t model, const float *qs, cdb_hit *out,
                        int64_t *covered) {
    char path[4096];
    cdb_index *ix = NULL;
    cdb_index_info info;
    int rc;
    cdb_eng_index_path(db, model, path, sizeof path);
    if (cdb_index_load(path, &ix) != CDB_OK) return -1;
    cdb_index_get_info(ix, &info);
    *covered = cdb_index_count(ix);
    if (info.nlist > 0 && cdb_index_set_search_params(ix, info.nlist, 0, 0) != CDB_OK) return -1;
    rc = search_ix(ix, db, model, qs, out);
    cdb_index_free(ix);
    return rc;
}

CDB_TEST(split_ivf_index_equals_single_build_and_brute_force) {
    cdb_db *db = NULL;
    int64_t model = 0, covered = 0;
    float *all = malloc(sizeof *all * N_VEC * DIM), qs[N_Q * DIM];
    uint8_t part_of[N_VEC + 1];
    cdb_hit split[N_Q * K], single[N_Q * K], brute[N_Q * K];
    eng_index_result res;
    eng_split_result sp;
    uint64_t seed = 7;
    CHECK(all);
    CHECK_MSG(make_store(&db, &model, all) == 0, "store: %s", cdb_errmsg());
    for (int q = 0; q < N_Q; q++) { /* near a stored vector */
        int i = (int)(tu_splitmix(&seed) % N_VEC);
        for (int d = 0; d < DIM; d++)
            qs[q * DIM + d] = all[(size_t)i * DIM + d] + 0.05f * (tu_uniform(&seed) - 0.5f);
    }
    /* parts 1..3 by id, every 10th id brought by none (the last group) */
    part_of[0] = 0;
    for (int i = 1; i <= N_VEC; i++) part_of[i] = i % 10 == 0 ? 0 : (uint8_t)(1 + i % 3);

    CHECK_OK(cdb_eng_index_build_split(db, model, DIM, CDB_INDEX_IVF_SQ, part_of, N_VEC + 1, 3,
                                       NULL, NULL, &res, &sp));
    CHECK_EQ_INT(sp.built_in, 4);
    CHECK_EQ_INT(res.info.kind, CDB_INDEX_IVF_SQ);
    CHECK_MSG(search_saved(db, model, qs, split, &covered) == 0, "split: %s", cdb_errmsg());
    CHECK_EQ_INT(covered, N_VEC);

    CHECK_OK(cdb_eng_index_build(db, model, DIM, CDB_INDEX_IVF_SQ, ENG_LISTS_MEMORY, &res));
    CHECK_MSG(search_saved(db, model, qs, single, &covered) == 0, "single: %s", cdb_errmsg());
    CHECK_EQ_INT(covered, N_VEC);

    /* brute force over the stored fp16 vectors (what the re-rank scores) */
    {
        int64_t n = 0, *sids = NULL;
        uint16_t *svecs = NULL;
        CHECK_OK(cdb_eng_read_all_vectors(db, model, DIM, &sids, &svecs, &n, NULL));
        CHECK_EQ_INT(n, N_VEC);
        CHECK_OK(cdb_index_exact_search(qs, N_Q, DIM, sids, svecs, (size_t)n, K, -INFINITY,
                                        NULL, 0, 1, brute));
        free(sids);
        free(svecs);
    }
    for (int i = 0; i < N_Q * K; i++) {
        CHECK_MSG(split[i].id == single[i].id && split[i].score == single[i].score,
                  "query %d rank %d: parts %lld %.7f, single build %lld %.7f", i / K, i % K,
                  (long long)split[i].id, split[i].score, (long long)single[i].id,
                  single[i].score);
        CHECK_MSG(split[i].id == brute[i].id && split[i].score == brute[i].score,
                  "query %d rank %d: parts %lld %.7f, brute force %lld %.7f", i / K, i % K,
                  (long long)split[i].id, split[i].score, (long long)brute[i].id,
                  brute[i].score);
    }

    /* a kind without inverted lists is built whole */
    CHECK_OK(cdb_eng_index_build_split(db, model, DIM, CDB_INDEX_FLAT, part_of, N_VEC + 1, 3,
                                       NULL, NULL, &res, &sp));
    CHECK_EQ_INT(sp.built_in, 0);
    CHECK_EQ_INT(res.info.kind, CDB_INDEX_FLAT);
    tu_close_rm(&db, g_dir);
    free(all);
}

/* ---- the parts' own indexes -------------------------------------------------------- */

#define N_PARTS 3
#define N_EXTRA 300   /* rows of the merged store that no part brought */
#define N_REPLACED 50 /* part 0's first rows: replaced in the merged store (not its own) */

static const int part_n[N_PARTS] = {1500, 2000, 1200};

/* Puts n clustered vectors (from seed) under root into db, rel names "<tag>_<i>". */
static int put_vectors(cdb_db *db, int64_t model, int64_t root, const char *tag,
                       const float *vecs, int n) {
    cdb_db_batch *b = NULL;
    if (cdb_db_batch_new(db, model, &b) != CDB_OK) return -1;
    for (int i = 0; i < n; i++) {
        char rel[64];
        cdb_db_file_meta m = tu_meta(1000 + i, 1700000000000000000LL + i, (uint64_t)i);
        snprintf(rel, sizeof rel, "%s_%05d.jpg", tag, i);
        if (cdb_db_batch_put(b, root, rel, &m, vecs + (size_t)i * DIM, DIM) != CDB_OK) return -1;
        if (cdb_db_batch_count(b) >= 1000 && cdb_db_batch_commit(b, NULL) != CDB_OK) return -1;
    }
    if (cdb_db_batch_commit(b, NULL) != CDB_OK) return -1;
    cdb_db_batch_free(b);
    return 0;
}

static void clustered(uint64_t seed, float *v, int n) {
    float centers[N_CENTERS][DIM];
    for (int c = 0; c < N_CENTERS; c++) tu_vec(1000 + (uint64_t)c, 1.0f, centers[c], DIM);
    for (int i = 0; i < n; i++) {
        int c = (int)(tu_splitmix(&seed) % N_CENTERS);
        for (int d = 0; d < DIM; d++)
            v[(size_t)i * DIM + d] = centers[c][d] + 0.3f * (tu_uniform(&seed) - 0.5f);
    }
}

static int cmp_pair(const void *a, const void *b) {
    const int64_t *x = a, *y = b;
    return (x[0] > y[0]) - (x[0] < y[0]);
}

/* ix's entries as (id, list) pairs sorted by id, into *pairs (malloc'd, 2 * *n). */
static int entries(const cdb_index *ix, int64_t **pairs, int64_t *n) {
    int64_t *ids = NULL, *lists = NULL;
    if (cdb_index_list_of_ids(ix, &ids, &lists, n) != CDB_OK) return -1;
    *pairs = malloc(sizeof **pairs * 2 * (size_t)(*n + 1));
    for (int64_t i = 0; *pairs && i < *n; i++) {
        (*pairs)[2 * i] = ids[i];
        (*pairs)[2 * i + 1] = lists[i];
    }
    cdb_free(ids);
    cdb_free(lists);
    if (!*pairs) return -1;
    qsort(*pairs, (size_t)*n, sizeof **pairs * 2, cmp_pair);
    return 0;
}

CDB_TEST(parts_own_indexes_renamed_equal_single_build) {
    char dirs[N_PARTS][256], mdir[256], trained[300], part_ix[N_PARTS][4200];
    const char *dir_ptrs[N_PARTS];
    cdb_db *parts[N_PARTS] = {NULL}, *m = NULL;
    int64_t pmodel[N_PARTS], proot[N_PARTS], model = 0, root = 0, next_id = 1;
    float *pv[N_PARTS], *extra = malloc(sizeof *extra * N_EXTRA * DIM), qs[N_Q * DIM];
    int64_t *from[N_PARTS], *to[N_PARTS], n_map[N_PARTS] = {0};
    uint8_t *part_of = calloc(8000, 1);
    eng_part_index pi[N_PARTS];
    cdb_engine_train_report tr;
    cdb_engine_part_add_report ar;
    eng_index_result res;
    eng_split_result split;
    uint64_t seed = 11;
    CHECK(extra && part_of);
    for (int k = 0; k < N_PARTS; k++) {
        char tag[32];
        snprintf(tag, sizeof tag, "part%d", k);
        pv[k] = malloc(sizeof *pv[k] * (size_t)part_n[k] * DIM);
        from[k] = malloc(sizeof *from[k] * (size_t)part_n[k]);
        to[k] = malloc(sizeof *to[k] * (size_t)part_n[k]);
        CHECK(pv[k] && from[k] && to[k]);
        clustered(100 + (uint64_t)k, pv[k], part_n[k]);
        CHECK_OK(tu_create_with_model(dirs[k], sizeof dirs[k], tag, "m", DIM, &parts[k],
                                      &pmodel[k]));
        CHECK_OK(cdb_db_root_add(parts[k], "/merge/photos", &proot[k]));
        CHECK(put_vectors(parts[k], pmodel[k], proot[k], tag, pv[k], part_n[k]) == 0);
        dir_ptrs[k] = dirs[k];
    }
    /* 1. one trained index for all parts; 2. each part's vectors into a copy of it */
    snprintf(trained, sizeof trained, "%s/../trained.cdbidx", dirs[0]);
    CHECK_OK(cdb_engine_index_train_parts(dir_ptrs, N_PARTS, CDB_ENGINE_INDEX_IVF_SQ, trained,
                                          &tr));
    CHECK_EQ_INT(tr.written, 1);
    CHECK_EQ_INT(tr.vectors, 1500 + 2000 + 1200);
    for (int k = 0; k < N_PARTS; k++) {
        CHECK_OK(cdb_eng_part_index_add(parts[k], trained, &ar));
        CHECK_EQ_INT(ar.vectors, part_n[k]);
        snprintf(part_ix[k], sizeof part_ix[k], "%s", ar.path);
    }

    /* the merged store: the extra rows first, then part 2, part 1, part 0 (without its
    ** first N_REPLACED rows), so no part's ids are the store's */
    CHECK_OK(tu_create_with_model(mdir, sizeof mdir, "merged", "m", DIM, &m, &model));
    CHECK_OK(cdb_db_root_add(m, "/merge/photos", &root));
    clustered(999, extra, N_EXTRA);
    CHECK(put_vectors(m, model, root, "extra", extra, N_EXTRA) == 0);
    next_id = 1 + N_EXTRA;
    for (int k = N_PARTS - 1; k >= 0; k--) {
        int first = k == 0 ? N_REPLACED : 0;
        char tag[32];
        snprintf(tag, sizeof tag, "merged%d", k);
        CHECK(put_vectors(m, model, root, tag, pv[k] + (size_t)first * DIM, part_n[k] - first) ==
              0);
        for (int i = first; i < part_n[k]; i++) { /* part ids are 1.. in put order */
            from[k][n_map[k]] = i + 1;
            to[k][n_map[k]++] = next_id;
            part_of[next_id++] = (uint8_t)(k + 1);
        }
        pi[k] = (eng_part_index){dirs[k], parts[k], from[k], to[k], n_map[k]};
    }
    {   /* the ids are what the map says: the store's vector of to[] is the part's */
        uint16_t got[DIM], want[DIM];
        uint8_t found = 0;
        int64_t id = to[1][7];
        CHECK_OK(cdb_db_vectors_get_f16(m, model, &id, 1, got, &found));
        id = from[1][7];
        CHECK_OK(cdb_db_vectors_get_f16(parts[1], pmodel[1], &id, 1, want, &found));
        CHECK(found == 1 && !memcmp(got, want, sizeof got));
    }
    for (int q = 0; q < N_Q; q++) {
        int k = q % N_PARTS, i = (int)(tu_splitmix(&seed) % (uint64_t)part_n[k]);
        for (int d = 0; d < DIM; d++)
            qs[q * DIM + d] = pv[k][(size_t)i * DIM + d] + 0.05f * (tu_uniform(&seed) - 0.5f);
    }

    for (int round = 0; round < 3; round++) {
        cdb_index *single = NULL, *tix = NULL, *merged = NULL;
        cdb_index_source src;
        int64_t *a = NULL, *b = NULL, na = 0, nb = 0;
        cdb_hit hm[N_Q * K], hs[N_Q * K];
        char path[4096];
        CHECK_OK(cdb_eng_index_build_split(m, model, DIM, CDB_INDEX_AUTO, part_of, 8000, N_PARTS,
                                           trained, pi, &res, &split));
        CHECK_EQ_INT(split.trained_file, 1);
        CHECK_EQ_INT(split.built_in, N_PARTS + 1); /* + the extra rows */
        /* round 1: part 2 changed since its add; round 2: part 1's index is gone too: those
        ** parts are added again from the store */
        CHECK_EQ_INT(split.from_files, N_PARTS - round);
        cdb_eng_index_path(m, model, path, sizeof path);
        CHECK_OK(cdb_index_load(path, &merged));

        /* the oracle: every vector of the merged store added to the same trained index */
        CHECK_OK(cdb_index_load(trained, &tix));
        CHECK_OK(cdb_index_clone_empty(tix, &single));
        CHECK_OK(cdb_eng_store_source_open(m, model, DIM, &src));
        CHECK_OK(cdb_index_add_source(single, &src));
        cdb_eng_store_source_close(&src);
        CHECK(entries(merged, &a, &na) == 0 && entries(single, &b, &nb) == 0);
        CHECK_EQ_INT(na, nb);
        CHECK_EQ_INT(na, N_EXTRA + 1500 + 2000 + 1200 - N_REPLACED);
        for (int64_t i = 0; i < na; i++)
            CHECK_MSG(a[2 * i] == b[2 * i] && a[2 * i + 1] == b[2 * i + 1],
                      "entry %lld: merged id %lld in list %lld, single build id %lld in list "
                      "%lld", (long long)i, (long long)a[2 * i], (long long)a[2 * i + 1],
                      (long long)b[2 * i], (long long)b[2 * i + 1]);
        CHECK(search_ix(merged, m, model, qs, hm) == 0 && search_ix(single, m, model, qs, hs) == 0);
        for (int i = 0; i < N_Q * K; i++)
            CHECK_MSG(hm[i].id == hs[i].id && hm[i].score == hs[i].score,
                      "query %d rank %d: merged %lld %.7f, single build %lld %.7f", i / K, i % K,
                      (long long)hm[i].id, hm[i].score, (long long)hs[i].id, hs[i].score);
        {   /* and brute force, every list probed */
            int64_t n = 0, *sids = NULL, c = 0;
            uint16_t *svecs = NULL;
            cdb_hit brute[N_Q * K];
            CHECK_OK(cdb_eng_read_all_vectors(m, model, DIM, &sids, &svecs, &n, NULL));
            CHECK_OK(cdb_index_exact_search(qs, N_Q, DIM, sids, svecs, (size_t)n, K, -INFINITY,
                                            NULL, 0, 1, brute));
            free(sids);
            free(svecs);
            CHECK(search_saved(m, model, qs, hm, &c) == 0);
            for (int i = 0; i < N_Q * K; i++)
                CHECK_MSG(hm[i].id == brute[i].id && hm[i].score == brute[i].score,
                          "query %d rank %d: merged %lld %.7f, brute force %lld %.7f", i / K,
                          i % K, (long long)hm[i].id, hm[i].score, (long long)brute[i].id,
                          brute[i].score);
        }
        free(a);
        free(b);
        cdb_index_free(single);
        cdb_index_free(tix);
        cdb_index_free(merged);
        if (round == 1) CHECK(unlink(part_ix[1]) == 0);
        if (!round) { /* part 2 changes: a vector rewritten, its generation moves on */
            cdb_db_batch *bt = NULL;
            cdb_db_file_meta mt = tu_meta(5, 1700000000000000000LL, 5);
            CHECK_OK(cdb_db_batch_new(parts[2], pmodel[2], &bt));
            CHECK_OK(cdb_db_batch_put(bt, proot[2], "part2_00000.jpg", &mt, pv[2] + DIM, DIM));
            CHECK_OK(cdb_db_batch_commit(bt, NULL));
            cdb_db_batch_free(bt);
        }
    }
    for (int k = 0; k < N_PARTS; k++) {
        tu_close_rm(&parts[k], dirs[k]);
        free(pv[k]);
        free(from[k]);
        free(to[k]);
    }
    tu_close_rm(&m, mdir);
    free(extra);
    free(part_of);
}

CDB_TEST_MAIN(split_ivf_index_equals_single_build_and_brute_force,
              parts_own_indexes_renamed_equal_single_build)
