/*
** test_merge_index.c: the merged database's index built in parts (merge_index.c,
** cdb_eng_index_build_split) against two independent truths: the index a single build
** makes from the same store (cdb_eng_index_build), and brute force over every stored
** vector (cdb_index_exact_search). A store of clustered random vectors, its ids spread
** over 3 parts plus ids no part brought (the last group); the index forced to an IVF
** kind. In-process, no model needed.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdb_test.h"
#include "../db/db_test_util.h"
#include "engine/library/library.h"

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

/* Top K of every query through the saved index of the model (every list probed). */
static int search_saved(cdb_db *db, int64_t model, const float *qs, cdb_hit *out,
                        int64_t *covered) {
    char path[4096];
    cdb_index *ix = NULL;
    cdb_index_info info;
    eng_fetch_ctx fc = {.db = db, .model_id = model, .dim = DIM};
    cdb_index_search_opts o = cdb_index_search_opts_default();
    int got = 0;
    cdb_eng_index_path(db, model, path, sizeof path);
    if (cdb_index_load(path, &ix) != CDB_OK) return -1;
    cdb_index_get_info(ix, &info);
    *covered = cdb_index_count(ix);
    if (info.nlist > 0 && cdb_index_set_search_params(ix, info.nlist, 0, 0) != CDB_OK) return -1;
    o.k = K;
    o.fetch = cdb_eng_fetch_vectors;
    o.fetch_ctx = &fc;
    for (int q = 0; q < N_Q; q++)
        if (cdb_index_search(ix, qs + (size_t)q * DIM, DIM, &o, out + (size_t)q * K, &got) !=
                CDB_OK ||
            got != K)
            return -1;
    cdb_index_free(ix);
    return 0;
}

CDB_TEST(split_ivf_index_equals_single_build_and_brute_force) {
    cdb_db *db = NULL;
    int64_t model = 0, covered = 0;
    float *all = malloc(sizeof *all * N_VEC * DIM), qs[N_Q * DIM];
    uint8_t part_of[N_VEC + 1];
    cdb_hit split[N_Q * K], single[N_Q * K], brute[N_Q * K];
    eng_index_result res;
    uint64_t seed = 7;
    int built_in = -1;
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
                                       &res, &built_in));
    CHECK_EQ_INT(built_in, 4);
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
                                       &res, &built_in));
    CHECK_EQ_INT(built_in, 0);
    CHECK_EQ_INT(res.info.kind, CDB_INDEX_FLAT);
    tu_close_rm(&db, g_dir);
    free(all);
}

CDB_TEST_MAIN(split_ivf_index_equals_single_build_and_brute_force)
