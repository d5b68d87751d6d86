/*
** test_db.c: the db/ module in one process: opening/creating, vector encoding
** (normalization of any magnitude, NaN/Inf refusal, the fp16 round trip against a
** double-precision reference), files CRUD with non-UTF-8 paths, quarantine,
** moves, deletes, models and default model, generations, shard rollover, a
** database from the future, the v1 -> v2 migration, and verify/repair catching
** a deleted or truncated shard and bad/orphan vectors. Process-level behaviour
** (locks, readers during writes, kill -9) is in test_db_proc.c.
*/
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <sqlite3.h>

#include "cdb_test.h"
#include "db/db.h"
#include "db_test_util.h"
#include "kernels/kernels.h"

#define DIM 64

/* A writer on a fresh temp dir with one model and one root. */
typedef struct fixture {
    char dir[256];
    cdb_db *db;
    int64_t model, root;
} fixture;

static cdb_status fx_open(fixture *fx, const char *tag, int64_t capacity) {
    cdb_db_params p = cdb_db_params_default();
    cdb_status rc;
    memset(fx, 0, sizeof *fx);
    p.sync = CDB_DB_SYNC_NORMAL;
    p.shard_capacity_bytes = capacity;
    if ((rc = tu_create(fx->dir, sizeof fx->dir, tag, p, &fx->db)) != CDB_OK) return rc;
    if ((rc = cdb_db_model_register(fx->db, "hash-m1", "m1", DIM, "{\"k\":1}", &fx->model)) !=
        CDB_OK)
        return rc;
    return cdb_db_root_add(fx->db, "/photos", &fx->root);
}

static void fx_close(fixture *fx) { tu_close_rm(&fx->db, fx->dir); }

/* Stages and commits files [from, to) named f%05d.jpg with vectors tu_vec(seed=i). */
static cdb_status fx_put_range(fixture *fx, int from, int to, int64_t *ids) {
    cdb_db_batch *b = NULL;
    float v[DIM];
    char name[64];
    cdb_status rc = cdb_db_batch_new(fx->db, fx->model, &b);
    for (int i = from; i < to && rc == CDB_OK; i++) {
        cdb_db_file_meta m = tu_meta(1000 + i, 5000 + i, (uint64_t)i);
        snprintf(name, sizeof name, "f%05d.jpg", i);
        tu_vec((uint64_t)i, 1.0f, v, DIM);
        rc = cdb_db_batch_put(b, fx->root, name, &m, v, DIM);
    }
    if (rc == CDB_OK) rc = cdb_db_batch_commit(b, ids);
    cdb_db_batch_free(b);
    return rc;
}

/* fx_open, then files 0..n-1 stored (fx_put_range; their ids in ids, which may be NULL). */
static cdb_status fx_open_with(fixture *fx, const char *tag, int64_t capacity, int n,
                               int64_t *ids) {
    cdb_status rc = fx_open(fx, tag, capacity);
    return rc != CDB_OK ? rc : fx_put_range(fx, 0, n, ids);
}

static int count_iter(cdb_db *db, int64_t model, int64_t *last_id_out) {
    cdb_db_iter *it = NULL;
    int64_t ids[7], last = -1;
    int n = 0, got = 0;
    if (cdb_db_iter_new(db, model, &it) != CDB_OK) return -1;
    do {
        if (cdb_db_iter_read(it, 7, ids, NULL, NULL, &got) != CDB_OK) {
            n = -1;
            break;
        }
        for (int i = 0; i < got; i++) {
            if (ids[i] <= last) {
                n = -2;
                break;
            } /* must ascend */
            last = ids[i];
        }
        n += got;
    } while (got > 0 && n >= 0);
    cdb_db_iter_free(it);
    if (last_id_out) *last_id_out = last;
    return n;
}
/* cdb_db_verify finds no problem (when: a label for the message). */
static void verify_clean(cdb_test_ctx *cdb_t_, cdb_db *db, const char *when) {
    cdb_db_report *r = NULL;
    CHECK_OK(cdb_db_verify(db, &r));
    CHECK_MSG(r->n_problems == 0, "verify%s: %s", when, r->n_listed ? r->problems[0].msg : "");
    cdb_db_report_free(r);
}


/* fp16 ulp at |x| (binary16: 10 fraction bits, min normal 2^-14). */
static double f16_ulp(double x) {
    int e;
    x = fabs(x);
    if (x < ldexp(1.0, -14)) return ldexp(1.0, -24);
    frexp(x, &e);
    return ldexp(1.0, e - 11);
}

CDB_TEST(open_create_reopen) {
    char base[256], dir[300];
    cdb_db *db = NULL;
    cdb_db_params p = cdb_db_params_default();
    tu_tmpdir(base, sizeof base, "open");
    snprintf(dir, sizeof dir, "%s/db", base);
    CHECK_RC(cdb_db_open(dir, NULL, &db), CDB_NOTFOUND);
    CHECK(db == NULL);
    p.create = 1;
    CHECK_OK(cdb_db_open(dir, &p, &db));
    CHECK(!cdb_db_is_readonly(db));
    CHECK_EQ_STR(cdb_db_dir(db), dir);
    cdb_db_close(db);
    char path[400];
    snprintf(path, sizeof path, "%s/catalog.db", dir);
    CHECK(access(path, F_OK) == 0);
    snprintf(path, sizeof path, "%s/shards", dir);
    CHECK(access(path, F_OK) == 0);
    CHECK_OK(cdb_db_open(dir, NULL, &db));
    cdb_db_counts c;
    CHECK_OK(cdb_db_get_counts(db, 0, &c));
    CHECK_EQ_INT(c.n_models, 0);
    CHECK_EQ_INT(c.generation, 0);
    cdb_db_model m;
    CHECK_RC(cdb_db_model_default(db, &m), CDB_NOTFOUND);
    cdb_db_close(db);
    /* A directory holding something else is not a database. */
    snprintf(path, sizeof path, "%s/other", base);
    mkdir(path, 0755);
    snprintf(dir, sizeof dir, "%s/other/catalog.db", base);
    FILE *f = fopen(dir, "wb");
    CHECK(f != NULL);
    fputs("this is not sqlite at all, just text padding padding padding padding padding padding "
          "padding padding",
          f);
    fclose(f);
    CHECK_RC(cdb_db_open(path, NULL, &db), CDB_CORRUPT);
    cdb_db_close(NULL);
    tu_rmtree(base);
}

CDB_TEST(encode_matches_double_reference) {
    float v[1000];
    uint16_t h[1000];
    float back[1000];
    int dims[] = {1, 3, 64, 512, 1000};
    for (int t = 0; t < 5; t++) {
        int dim = dims[t];
        tu_vec(100 + t, 3.0f, v, dim);
        CHECK_OK(cdb_db_encode_vector(v, dim, h));
        double ss = 0;
        for (int i = 0; i < dim; i++) ss += (double)v[i] * v[i];
        double nrm = sqrt(ss), bn = 0;
        cdb_k_f16_to_f32(h, back, (size_t)dim);
        for (int i = 0; i < dim; i++) {
            double ref = v[i] / nrm;
            /* round-to-nearest: within half an ulp (plus fp32 normalization slack) */
            CHECK_MSG(fabs(back[i] - ref) <= 0.5 * f16_ulp(ref) + 4e-7 * fabs(ref) + 1e-12,
                      "dim %d elem %d: stored %.9g ref %.9g", dim, i, back[i], ref);
            bn += (double)back[i] * back[i];
        }
        CHECK_NEAR(sqrt(bn), 1.0, 1e-3);
    }
}

CDB_TEST(encode_any_magnitude) {
    float v[DIM], w[DIM];
    uint16_t h0[DIM], h1[DIM];
    tu_vec(7, 1.0f, v, DIM);
    CHECK_OK(cdb_db_encode_vector(v, DIM, h0));
    /* Exact power-of-two rescalings (huge, tiny) give bit-identical results. */
    const int exps[] = {40, 100, 126, -60, -100};
    for (int k = 0; k < 5; k++) {
        for (int i = 0; i < DIM; i++) w[i] = ldexpf(v[i], exps[k]);
        CHECK_OK(cdb_db_encode_vector(w, DIM, h1));
        CHECK_MSG(!memcmp(h0, h1, sizeof h0), "2^%d scaling changed the stored bits", exps[k]);
    }
    /* 1e5 per element (sum of squares 5e11.. fine) and 1e30 (squares overflow fp32
    ** without scaling): still unit vectors pointing the same way. */
    const float scales[] = {1e5f, 1e30f, 3e38f};
    for (int k = 0; k < 3; k++) {
        float back[DIM], ref[DIM];
        for (int i = 0; i < DIM; i++)
            w[i] = v[i] >= 0 ? scales[k] * (0.5f + 0.5f * v[i]) : -scales[k] * 0.25f;
        CHECK_OK(cdb_db_encode_vector(w, DIM, h1));
        cdb_k_f16_to_f32(h1, back, DIM);
        double dot = 0, nb = 0, nr = 0;
        for (int i = 0; i < DIM; i++) {
            ref[i] = v[i] >= 0 ? (0.5f + 0.5f * v[i]) : -0.25f;
            dot += (double)back[i] * ref[i];
            nb += (double)back[i] * back[i];
            nr += (double)ref[i] * ref[i];
        }
        CHECK_NEAR(sqrt(nb), 1.0, 1e-3);
        CHECK_MSG(dot / sqrt(nb * nr) > 0.9999, "scale %g: cosine %.6f", scales[k],
                  dot / sqrt(nb * nr));
    }
    /* A single huge spike plus tiny noise: the spike dominates. */
    for (int i = 0; i < DIM; i++) w[i] = 1e-30f;
    w[5] = 1e30f;
    CHECK_OK(cdb_db_encode_vector(w, DIM, h1));
    CHECK_EQ_INT(h1[5], 0x3c00); /* exactly 1.0 */
    /* A 59,136-element vector (precision contract example). */
    float *big = malloc(59136 * sizeof *big);
    uint16_t *hb = malloc(59136 * sizeof *hb);
    CHECK(big && hb);
    tu_vec(9, 1.0f, big, 59136);
    CHECK_OK(cdb_db_encode_vector(big, 59136, hb));
    free(big);
    free(hb);
}

CDB_TEST(encode_refuses_bad) {
    float v[DIM];
    uint16_t h[DIM];
    fixture fx;
    CHECK_OK(fx_open(&fx, "bad", 0));
    cdb_db_batch *b = NULL;
    CHECK_OK(cdb_db_batch_new(fx.db, fx.model, &b));
    cdb_db_file_meta m = tu_meta(1, 1, 1);
    tu_vec(1, 1.0f, v, DIM);
    v[10] = NAN;
    CHECK_RC(cdb_db_encode_vector(v, DIM, h), CDB_INVALID);
    CHECK_RC(cdb_db_batch_put(b, fx.root, "nan.jpg", &m, v, DIM), CDB_INVALID);
    v[10] = INFINITY;
    CHECK_RC(cdb_db_batch_put(b, fx.root, "inf.jpg", &m, v, DIM), CDB_INVALID);
    v[10] = -INFINITY;
    CHECK_RC(cdb_db_batch_put(b, fx.root, "inf.jpg", &m, v, DIM), CDB_INVALID);
    memset(v, 0, sizeof v);
    CHECK_RC(cdb_db_batch_put(b, fx.root, "zero.jpg", &m, v, DIM), CDB_INVALID);
    tu_vec(1, 1.0f, v, DIM);
    CHECK_RC(cdb_db_batch_put(b, fx.root, "dim.jpg", &m, v, DIM - 1), CDB_DIM_MISMATCH);
    CHECK_EQ_INT(cdb_db_batch_count(b), 0);
    CHECK_OK(cdb_db_batch_commit(b, NULL)); /* empty: no-op */
    cdb_db_batch_free(b);
    cdb_db_counts c;
    CHECK_OK(cdb_db_get_counts(fx.db, 0, &c));
    CHECK_EQ_INT(c.files[CDB_DB_OK] + c.files[CDB_DB_PENDING], 0);
    fx_close(&fx);
}

CDB_TEST(crud_put_lookup_read) {
    fixture fx;
    int64_t ids[100];
    CHECK_OK(fx_open_with(&fx, "crud", 0, 100, ids));
    for (int i = 1; i < 100; i++) CHECK(ids[i] > ids[i - 1]);
    cdb_db_file f;
    CHECK_OK(cdb_db_file_lookup(fx.db, fx.root, "f00042.jpg", &f));
    CHECK_EQ_INT(f.id, ids[42]);
    CHECK_EQ_INT(f.state, CDB_DB_OK);
    CHECK_EQ_INT(f.meta.size, 1042);
    CHECK_EQ_INT(f.meta.mtime_ns, 5042);
    CHECK_EQ_INT(f.meta.width, 640);
    CHECK(f.meta.has_hash);
    cdb_db_file_meta want = tu_meta(0, 0, 42);
    CHECK(!memcmp(f.meta.hash, want.hash, 16));
    CHECK(f.shard == 1);
    CHECK(f.error == NULL);
    CHECK_EQ_STR(f.relpath, "f00042.jpg");
    cdb_db_file_clear(&f);
    CHECK_RC(cdb_db_file_lookup(fx.db, fx.root, "nope.jpg", &f), CDB_NOTFOUND);
    char *path = NULL;
    CHECK_OK(cdb_db_file_path(fx.db, ids[7], &path));
    CHECK_EQ_STR(path, "/photos/f00007.jpg");
    cdb_free(path);

    /* Iteration: ascending ids, the exact encoded bits. */
    cdb_db_iter *it = NULL;
    int64_t rid[100];
    uint16_t *h = malloc(100 * DIM * 2), want_h[DIM];
    float *f32 = malloc(100 * DIM * 4), v[DIM];
    int n = 0;
    CHECK_OK(cdb_db_iter_new(fx.db, fx.model, &it));
    CHECK_OK(cdb_db_iter_read(it, 100, rid, f32, h, &n));
    CHECK_EQ_INT(n, 100);
    int got = -1;
    CHECK_OK(cdb_db_iter_read(it, 100, rid, NULL, NULL, &got));
    CHECK_EQ_INT(got, 0);
    cdb_db_iter_free(it);
    for (int i = 0; i < 100; i++) {
        tu_vec((uint64_t)i, 1.0f, v, DIM);
        CHECK_OK(cdb_db_encode_vector(v, DIM, want_h));
        CHECK_EQ_INT(rid[i], ids[i]);
        CHECK_MSG(!memcmp(h + i * DIM, want_h, sizeof want_h), "file %d: stored bits differ", i);
        for (int j = 0; j < DIM; j++) CHECK(f32[i * DIM + j] == cdb_k_f16_to_f32_1(want_h[j]));
    }
    /* Lookup by ids (re-rank), including an unknown id. */
    int64_t q[3] = {ids[99], 987654, ids[0]};
    float out[3 * DIM];
    uint8_t found[3];
    CHECK_OK(cdb_db_vectors_get(fx.db, fx.model, q, 3, out, found));
    CHECK(found[0] && !found[1] && found[2]);
    CHECK(!memcmp(out, f32 + 99 * DIM, DIM * 4));
    CHECK(!memcmp(out + 2 * DIM, f32, DIM * 4));
    CHECK(out[DIM] == 0.0f);
    free(h);
    free(f32);

    /* Re-putting the same content is idempotent: still 100 vectors, one per file. */
    CHECK_OK(fx_put_range(&fx, 0, 100, NULL));
    cdb_db_counts c;
    CHECK_OK(cdb_db_get_counts(fx.db, 0, &c));
    CHECK_EQ_INT(c.files[CDB_DB_OK], 100);
    CHECK_EQ_INT(c.n_vectors, 100);
    CHECK_EQ_INT(c.n_shards, 1);
    CHECK_EQ_INT(count_iter(fx.db, fx.model, NULL), 100);
    cdb_db_report *r = NULL;
    CHECK_OK(cdb_db_verify(fx.db, &r));
    CHECK_MSG(r->n_problems == 0, "verify: %s", r->n_listed ? r->problems[0].msg : "");
    CHECK_EQ_INT(r->n_vectors_checked, 100);
    cdb_db_report_free(r);
    fx_close(&fx);
}

CDB_TEST(odd_paths) {
    fixture fx;
    CHECK_OK(fx_open(&fx, "paths", 0));
    char longname[1100];
    memset(longname, 'x', 1000);
    strcpy(longname + 1000, ".jpg");
    const char *names[] = {"with space.jpg", "new\nline.jpg", "\xff\xfe latin1 \xe9.jpg",
                           "dir/sub dir/\x80.png", longname};
    cdb_db_batch *b = NULL;
    float v[DIM];
    CHECK_OK(cdb_db_batch_new(fx.db, fx.model, &b));
    for (int i = 0; i < 5; i++) {
        cdb_db_file_meta m = tu_meta(i, i, (uint64_t)i);
        tu_vec((uint64_t)i, 1.0f, v, DIM);
        CHECK_OK(cdb_db_batch_put(b, fx.root, names[i], &m, v, DIM));
    }
    int64_t ids[5];
    CHECK_OK(cdb_db_batch_commit(b, ids));
    cdb_db_batch_free(b);
    for (int i = 0; i < 5; i++) {
        cdb_db_file f;
        CHECK_OK(cdb_db_file_lookup(fx.db, fx.root, names[i], &f));
        CHECK_EQ_INT(f.id, ids[i]);
        CHECK(!strcmp(f.relpath, names[i]));
        cdb_db_file_clear(&f);
        char *p = NULL, want[1200];
        CHECK_OK(cdb_db_file_path(fx.db, ids[i], &p));
        snprintf(want, sizeof want, "/photos/%s", names[i]);
        CHECK(!strcmp(p, want));
        cdb_free(p);
    }
    fx_close(&fx);
}

typedef struct id_acc {
    int64_t *ids;
    int *n;
} id_acc;

static int collect(int64_t file_id, int64_t seq, void *ud) {
    id_acc *acc = ud;
    (void)seq;
    acc->ids[(*acc->n)++] = file_id;
    return *acc->n >= 8;
}

CDB_TEST(quarantine_move_delete) {
    fixture fx;
    int64_t ids[10];
    CHECK_OK(fx_open_with(&fx, "qmd", 0, 10, ids));
    int64_t gen0 = 0;
    CHECK_OK(cdb_db_generation(fx.db, &gen0));
    CHECK_EQ_INT(gen0, 10);

    cdb_db_batch *b = NULL;
    CHECK_OK(cdb_db_batch_new(fx.db, fx.model, &b));
    /* f3 became corrupt: error with a one-line reason, its vector removed. */
    cdb_db_file_meta m3 = tu_meta(7, 7, 333);
    CHECK_OK(cdb_db_batch_put_error(b, fx.root, "f00003.jpg", &m3, "truncated JPEG\nat byte 7"));
    /* a brand new unreadable file */
    CHECK_OK(cdb_db_batch_put_error(b, fx.root, "broken.png", &m3, "not an image"));
    /* f4 renamed to g4 (same content) */
    cdb_db_file_meta m4 = tu_meta(1004, 9999, 4);
    int64_t same[4];
    int nsame = 0;
    CHECK_OK(cdb_db_files_by_hash(fx.db, fx.root, m4.hash, same, 4, &nsame));
    CHECK_EQ_INT(nsame, 1);
    CHECK_EQ_INT(same[0], ids[4]);
    CHECK_OK(cdb_db_batch_move(b, ids[4], "renamed/g4.jpg", &m4));
    /* f5 deleted; f6 touched (mtime only) */
    CHECK_OK(cdb_db_batch_delete(b, ids[5]));
    cdb_db_file_meta m6 = tu_meta(1006, 123456, 6);
    CHECK_OK(cdb_db_batch_touch(b, ids[6], &m6));
    CHECK_OK(cdb_db_batch_commit(b, NULL));

    cdb_db_file f;
    CHECK_OK(cdb_db_file_lookup(fx.db, fx.root, "f00003.jpg", &f));
    CHECK_EQ_INT(f.state, CDB_DB_ERROR);
    CHECK_EQ_STR(f.error, "truncated JPEG at byte 7");
    CHECK_EQ_INT(f.meta.size, 7); /* quarantine key: retried only when size/mtime change */
    cdb_db_file_clear(&f);
    CHECK_OK(cdb_db_file_lookup(fx.db, fx.root, "broken.png", &f));
    CHECK_EQ_INT(f.state, CDB_DB_ERROR);
    cdb_db_file_clear(&f);
    CHECK_RC(cdb_db_file_lookup(fx.db, fx.root, "f00004.jpg", &f), CDB_NOTFOUND);
    CHECK_OK(cdb_db_file_lookup(fx.db, fx.root, "renamed/g4.jpg", &f));
    CHECK_EQ_INT(f.id, ids[4]);
    CHECK_EQ_INT(f.state, CDB_DB_OK);
    CHECK_EQ_INT(f.meta.mtime_ns, 9999);
    cdb_db_file_clear(&f);
    CHECK_OK(cdb_db_file_get(fx.db, ids[5], &f));
    CHECK_EQ_INT(f.state, CDB_DB_DELETED);
    cdb_db_file_clear(&f);
    CHECK_OK(cdb_db_file_get(fx.db, ids[6], &f));
    CHECK_EQ_INT(f.meta.mtime_ns, 123456);
    CHECK_EQ_INT(f.state, CDB_DB_OK);
    cdb_db_file_clear(&f);

    int has = 1;
    CHECK_OK(cdb_db_file_has_vector(fx.db, fx.model, ids[3], &has));
    CHECK_EQ_INT(has, 0);
    CHECK_OK(cdb_db_file_has_vector(fx.db, fx.model, ids[4], &has));
    CHECK_EQ_INT(has, 1);
    int64_t last = 0;
    CHECK_EQ_INT(count_iter(fx.db, fx.model, &last), 8); /* 10 - f3 - f5 */
    float out[2 * DIM];
    uint8_t found[2];
    int64_t q[2] = {ids[5], ids[4]};
    CHECK_OK(cdb_db_vectors_get(fx.db, fx.model, q, 2, out, found));
    CHECK(!found[0] && found[1]);

    /* Removals since gen0: f3 and f5; nothing added. */
    int64_t rem[8];
    int nrem = 0;
    id_acc acc = {rem, &nrem};
    CHECK_OK(cdb_db_removed_since(fx.db, fx.model, gen0, collect, &acc));
    CHECK_EQ_INT(nrem, 2);
    CHECK(rem[0] == ids[3] && rem[1] == ids[5]);
    nrem = 0;
    CHECK_OK(cdb_db_added_since(fx.db, fx.model, gen0, collect, &acc));
    CHECK_EQ_INT(nrem, 0);

    /* f3 fixed (content changed): it comes back with a vector. */
    CHECK_OK(fx_put_range(&fx, 3, 4, NULL));
    CHECK_OK(cdb_db_file_lookup(fx.db, fx.root, "f00003.jpg", &f));
    CHECK_EQ_INT(f.state, CDB_DB_OK);
    CHECK(f.error == NULL);
    cdb_db_file_clear(&f);
    /* Moving onto a tracked ok path is refused at commit; nothing changes. */
    CHECK_OK(cdb_db_batch_move(b, ids[4], "f00003.jpg", &m4));
    CHECK_RC(cdb_db_batch_commit(b, NULL), CDB_INVALID);
    cdb_db_batch_free(b);
    /* Moving onto a deleted row's path replaces that row. */
    CHECK_OK(cdb_db_batch_new(fx.db, fx.model, &b));
    CHECK_OK(cdb_db_batch_move(b, ids[4], "f00005.jpg", &m4));
    CHECK_OK(cdb_db_batch_commit(b, NULL));
    cdb_db_batch_free(b);
    CHECK_OK(cdb_db_file_lookup(fx.db, fx.root, "f00005.jpg", &f));
    CHECK_EQ_INT(f.id, ids[4]);
    cdb_db_file_clear(&f);

    cdb_db_counts c;
    CHECK_OK(cdb_db_get_counts(fx.db, 0, &c));
    CHECK_EQ_INT(c.files[CDB_DB_OK], 9);
    CHECK_EQ_INT(c.files[CDB_DB_ERROR], 1);
    CHECK_EQ_INT(c.files[CDB_DB_PENDING], 0);
    CHECK_EQ_INT(c.n_vectors, 9);
    verify_clean(cdb_t_, fx.db, "");
    fx_close(&fx);
}

CDB_TEST(models_side_by_side) {
    fixture fx;
    int64_t ids[4], m2 = 0, again = 0;
    CHECK_OK(fx_open(&fx, "models", 0));
    CHECK_OK(cdb_db_model_register(fx.db, "hash-m1", "m1", DIM, NULL, &again));
    CHECK_EQ_INT(again, fx.model);
    CHECK_RC(cdb_db_model_register(fx.db, "hash-m1", "m1", DIM + 1, NULL, &again),
             CDB_DIM_MISMATCH);
    CHECK_OK(cdb_db_model_register(fx.db, "hash-m2", "m2", 32, NULL, &m2));
    cdb_db_model m;
    CHECK_OK(cdb_db_model_default(fx.db, &m));
    CHECK_EQ_INT(m.id, fx.model);
    CHECK_EQ_STR(m.weights_hash, "hash-m1");
    char *info = NULL;
    CHECK_OK(cdb_db_model_info(fx.db, fx.model, &info));
    CHECK_EQ_STR(info, "{\"k\":1}");
    cdb_free(info);

    CHECK_OK(fx_put_range(&fx, 0, 4, ids));
    /* Second model's vectors for the same files, beside the first. */
    cdb_db_batch *b = NULL;
    float v[32];
    CHECK_OK(cdb_db_batch_new(fx.db, m2, &b));
    for (int i = 0; i < 4; i++) {
        char name[32];
        cdb_db_file_meta mm = tu_meta(1000 + i, 5000 + i, (uint64_t)i);
        snprintf(name, sizeof name, "f%05d.jpg", i);
        tu_vec(1000 + (uint64_t)i, 1.0f, v, 32);
        CHECK_OK(cdb_db_batch_put(b, fx.root, name, &mm, v, 32));
    }
    CHECK_OK(cdb_db_batch_commit(b, NULL));
    CHECK_EQ_INT(count_iter(fx.db, fx.model, NULL), 4);
    CHECK_EQ_INT(count_iter(fx.db, m2, NULL), 4);
    /* f1's content changes and is re-encoded with m1: m2's stale vector goes. */
    cdb_db_file_meta changed = tu_meta(1, 2, 999);
    float v1[DIM];
    tu_vec(5, 1.0f, v1, DIM);
    cdb_db_batch_free(b);
    CHECK_OK(cdb_db_batch_new(fx.db, fx.model, &b));
    CHECK_OK(cdb_db_batch_put(b, fx.root, "f00001.jpg", &changed, v1, DIM));
    /* f2 re-put with the same content: m2's vector stays. */
    cdb_db_file_meta same = tu_meta(1002, 5002, 2);
    CHECK_OK(cdb_db_batch_put(b, fx.root, "f00002.jpg", &same, v1, DIM));
    CHECK_OK(cdb_db_batch_commit(b, NULL));
    cdb_db_batch_free(b);
    int has = 0;
    CHECK_OK(cdb_db_file_has_vector(fx.db, m2, ids[1], &has));
    CHECK_EQ_INT(has, 0);
    CHECK_OK(cdb_db_file_has_vector(fx.db, m2, ids[2], &has));
    CHECK_EQ_INT(has, 1);
    CHECK_EQ_INT(count_iter(fx.db, m2, NULL), 3);
    CHECK_EQ_INT(count_iter(fx.db, fx.model, NULL), 4);
    CHECK_OK(cdb_db_model_set_default(fx.db, m2));
    CHECK_OK(cdb_db_model_default(fx.db, &m));
    CHECK_EQ_INT(m.id, m2);
    cdb_db_counts c;
    CHECK_OK(cdb_db_get_counts(fx.db, fx.model, &c));
    CHECK_EQ_INT(c.n_vectors, 4);
    CHECK_OK(cdb_db_get_counts(fx.db, 0, &c)); /* default = m2 now */
    CHECK_EQ_INT(c.n_vectors, 3);
    CHECK_EQ_INT(c.n_models, 2);
    /* verify: with m2 default, f1 (ok) lacks an m2 vector: reported. */
    cdb_db_report *r = NULL;
    CHECK_OK(cdb_db_verify(fx.db, &r));
    CHECK_EQ_INT(r->n_problems, 1);
    CHECK_EQ_INT(r->problems[0].kind, CDB_DB_FILE_NO_VECTOR);
    CHECK_EQ_INT(r->problems[0].file_id, ids[1]);
    cdb_db_report_free(r);
    fx_close(&fx);
}

static int count_seq(int64_t file_id, int64_t seq, void *ud) {
    (void)file_id;
    int64_t *n = ud;
    n[0]++;
    if (seq > n[1]) n[1] = seq;
    return 0;
}

CDB_TEST(generations) {
    fixture fx;
    int64_t ids[5], g1 = 0, g2 = 0;
    CHECK_OK(fx_open_with(&fx, "gen", 0, 5, ids));
    CHECK_OK(cdb_db_generation(fx.db, &g1));
    /* Replace f0's vector (new content) and delete f1. */
    CHECK_OK(fx_put_range(&fx, 0, 1, NULL)); /* same content: still a new seq */
    cdb_db_batch *b = NULL;
    CHECK_OK(cdb_db_batch_new(fx.db, fx.model, &b));
    CHECK_OK(cdb_db_batch_delete(b, ids[1]));
    CHECK_OK(cdb_db_batch_commit(b, NULL));
    cdb_db_batch_free(b);
    CHECK_OK(cdb_db_generation(fx.db, &g2));
    CHECK(g2 > g1);
    int64_t added[2] = {0, 0}, removed[2] = {0, 0};
    CHECK_OK(cdb_db_added_since(fx.db, fx.model, g1, count_seq, added));
    CHECK_OK(cdb_db_removed_since(fx.db, fx.model, g1, count_seq, removed));
    CHECK_EQ_INT(added[0], 1);   /* f0 again */
    CHECK_EQ_INT(removed[0], 2); /* f0's old vector, f1 */
    CHECK(added[1] <= g2 && removed[1] <= g2);
    added[0] = 0;
    CHECK_OK(cdb_db_added_since(fx.db, fx.model, 0, count_seq, added));
    CHECK_EQ_INT(added[0], 4);
    CHECK_OK(cdb_db_prune_removed(fx.db, g2));
    removed[0] = 0;
    CHECK_OK(cdb_db_removed_since(fx.db, fx.model, 0, count_seq, removed));
    CHECK_EQ_INT(removed[0], 0);
    fx_close(&fx);
}

CDB_TEST(shard_rollover) {
    fixture fx;
    int64_t ids[300];
    /* 64-d vectors: 128 bytes + overhead; 8 KiB shards hold ~42 each. */
    CHECK_OK(fx_open(&fx, "roll", 8192));
    for (int i = 0; i < 300; i += 50) CHECK_OK(fx_put_range(&fx, i, i + 50, ids + i));
    cdb_db_counts c;
    CHECK_OK(cdb_db_get_counts(fx.db, 0, &c));
    CHECK_MSG(c.n_shards >= 6, "only %lld shards", (long long)c.n_shards);
    int64_t last = 0;
    CHECK_EQ_INT(count_iter(fx.db, fx.model, &last), 300);
    CHECK_EQ_INT(last, ids[299]);
    cdb_db_file f;
    CHECK_OK(cdb_db_file_get(fx.db, ids[299], &f));
    CHECK(f.shard == c.n_shards);
    cdb_db_file_clear(&f);
    /* Capacity is remembered: reopen without the param and keep filling. */
    char dir[256];
    snprintf(dir, sizeof dir, "%s", fx.dir);
    cdb_db_close(fx.db);
    CHECK_OK(cdb_db_open(dir, NULL, &fx.db));
    CHECK_OK(fx_put_range(&fx, 300, 400, NULL));
    cdb_db_counts c2;
    CHECK_OK(cdb_db_get_counts(fx.db, 0, &c2));
    CHECK(c2.n_shards > c.n_shards);
    CHECK_EQ_INT(count_iter(fx.db, fx.model, NULL), 400);
    verify_clean(cdb_t_, fx.db, "");
    fx_close(&fx);
}

/* Makes the fixture's database look as another clipdb version left it: closes the
** handle (fx->db = NULL; the folder stays for fx_close) and runs sql on its catalog,
** whose path goes in cat. SQLite's result code. */
static int fx_edit_catalog(fixture *fx, const char *sql, char *cat, size_t size) {
    snprintf(cat, size, "%s/catalog.db", fx->dir);
    cdb_db_close(fx->db);
    fx->db = NULL;
    return tu_sql_exec(cat, sql);
}

/* Opens the fixture's database again, read-only, into fx->db. */
static cdb_status fx_open_readonly(fixture *fx) {
    cdb_db_params p = cdb_db_params_default();
    p.readonly = 1;
    return cdb_db_open(fx->dir, &p, &fx->db);
}

/* fx_edit_catalog, then the migration: a reader refuses the old catalog (CDB_VERSION)
** and the writer, opened into fx->db, migrates it. CDB_OK, or what went otherwise. */
static cdb_status fx_migrate(fixture *fx, char *cat, size_t size, const char *sql) {
    cdb_status rc;
    if (fx_edit_catalog(fx, sql, cat, size) != SQLITE_OK)
        return cdb_seterr(CDB_ERROR, "cannot rewrite %s", cat);
    if ((rc = fx_open_readonly(fx)) != CDB_VERSION) {
        cdb_db_close(fx->db);
        fx->db = NULL;
        return cdb_seterr(CDB_ERROR, "a reader opened the old catalog (%s)", cdb_status_str(rc));
    }
    return cdb_db_open(fx->dir, NULL, &fx->db);
}

/* Commits one file of fx's root in the error state (a file that could not be read). */
/* fx_open_with, then broken.jpg stored as an error (a truncated file; its meta in *bad). */
static cdb_status fx_open_with_error(fixture *fx, const char *tag, int n, cdb_db_file_meta *bad) {
    cdb_db_batch *b = NULL;
    cdb_status rc = fx_open_with(fx, tag, 0, n, NULL);
    *bad = tu_meta(7, 7, 777);
    if (rc == CDB_OK) rc = cdb_db_batch_new(fx->db, fx->model, &b);
    if (rc == CDB_OK) rc = cdb_db_batch_put_error(b, fx->root, "broken.jpg", bad, "truncated");
    if (rc == CDB_OK) rc = cdb_db_batch_commit(b, NULL);
    cdb_db_batch_free(b);
    return rc;
}

static int read_file(const char *path, char *buf, size_t cap, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    *n = fread(buf, 1, cap, f);
    fclose(f);
    return 0;
}

CDB_TEST(schema_from_the_future) {
    fixture fx;
    char cat[300];
    CHECK_OK(fx_open_with(&fx, "future", 0, 3, NULL));
    CHECK_EQ_INT(fx_edit_catalog(&fx, "UPDATE meta SET value=99 WHERE key='schema_version';"
                                      "UPDATE meta SET value='9.9.9' WHERE key='last_writer';"
                                      "PRAGMA wal_checkpoint(TRUNCATE);",
                                 cat, sizeof cat),
                 SQLITE_OK);
    static char before[1 << 20], after[1 << 20];
    size_t nb = 0, na = 0;
    CHECK(read_file(cat, before, sizeof before, &nb) == 0);
    cdb_db *db = NULL;
    CHECK_RC(cdb_db_open(fx.dir, NULL, &db), CDB_VERSION);
    CHECK(strstr(cdb_errmsg(), "99") && strstr(cdb_errmsg(), "9.9.9"));
    cdb_db_params p = cdb_db_params_default();
    p.readonly = 1;
    CHECK_RC(cdb_db_open(fx.dir, &p, &db), CDB_VERSION);
    CHECK(db == NULL);
    CHECK(read_file(cat, after, sizeof after, &na) == 0);
    CHECK_EQ_INT(na, nb);
    CHECK_MSG(!memcmp(before, after, nb), "catalog.db changed when refused");
    fx_close(&fx);
}

CDB_TEST(migrate_v1_to_v2) {
    fixture fx;
    char cat[300];
    CHECK_OK(fx_open_with(&fx, "migrate", 0, 20, NULL));
    /* Make it a v1 catalog: no vector directory, no removal log. */
    CHECK_OK(fx_migrate(&fx, cat, sizeof cat, "DROP TABLE vectors; DROP TABLE removed;"
                        "DELETE FROM meta WHERE key='generation';"
                        "UPDATE meta SET value=1 WHERE key='schema_version';"));
    cdb_db_counts c;
    CHECK_OK(cdb_db_get_counts(fx.db, 0, &c));
    CHECK_EQ_INT(c.n_vectors, 20);
    CHECK_EQ_INT(c.generation, 1);
    verify_clean(cdb_t_, fx.db, "");
    cdb_db_close(fx.db);
    CHECK_OK(fx_open_readonly(&fx));
    fx_close(&fx);
}

/* A v2 catalog (before files.hkey): the writer adds the column, fills it from the
** stored hashes and swaps the indexes; move detection and counts work after. */
CDB_TEST(migrate_v2_to_v3) {
    fixture fx;
    char cat[300];
    cdb_db_file_meta bad;
    CHECK_OK(fx_open_with_error(&fx, "migrate3", 30, &bad));
    CHECK_OK(fx_migrate(&fx, cat, sizeof cat, "DROP TABLE hkeys; DROP TABLE hkeys_new;"
                        "DROP INDEX files_notok; ALTER TABLE files DROP COLUMN hkey;"
                        "CREATE INDEX files_hash ON files(root_id, hash);"
                        "CREATE INDEX files_state ON files(state);"
                        "UPDATE meta SET value=2 WHERE key='schema_version';"));
    cdb_db_counts c;
    CHECK_OK(cdb_db_get_counts(fx.db, 0, &c));
    CHECK_EQ_INT(c.n_vectors, 30);
    CHECK_EQ_INT(c.files[CDB_DB_OK], 30);
    CHECK_EQ_INT(c.files[CDB_DB_ERROR], 1);
    CHECK_EQ_INT(c.files[CDB_DB_PENDING], 0);
    for (int i = 0; i < 30; i += 7) {
        cdb_db_file_meta m = tu_meta(1000 + i, 5000 + i, (uint64_t)i);
        int64_t ids[4];
        int n = 0;
        char name[64];
        cdb_db_file f;
        snprintf(name, sizeof name, "f%05d.jpg", i);
        CHECK_OK(cdb_db_file_lookup(fx.db, fx.root, name, &f));
        CHECK_OK(cdb_db_files_by_hash(fx.db, fx.root, m.hash, ids, 4, &n));
        CHECK_EQ_INT(n, 1);
        CHECK_EQ_INT(ids[0], f.id);
        cdb_db_file_clear(&f);
    }
    /* The error file has a hash but is not ok: not a move candidate. */
    int64_t ids[4];
    int n = 0;
    CHECK_OK(cdb_db_files_by_hash(fx.db, fx.root, bad.hash, ids, 4, &n));
    CHECK_EQ_INT(n, 0);
    verify_clean(cdb_t_, fx.db, "");
    CHECK_OK(cdb_db_flush(fx.db));
    fx_close(&fx);
}

/* 1 when files_by_hash finds exactly file i (f%05d.jpg of fx_put_range) for its hash. */
static int found_by_hash(fixture *fx, int i) {
    cdb_db_file_meta m = tu_meta(1000 + i, 5000 + i, (uint64_t)i);
    cdb_db_file f;
    int64_t ids[4];
    int n = 0, ok;
    char name[64];
    snprintf(name, sizeof name, "f%05d.jpg", i);
    if (cdb_db_file_lookup(fx->db, fx->root, name, &f) != CDB_OK) return 0;
    ok = cdb_db_files_by_hash(fx->db, fx->root, m.hash, ids, 4, &n) == CDB_OK && n == 1 &&
         ids[0] == f.id;
    cdb_db_file_clear(&f);
    return ok;
}

/* A v3 catalog (files_hkey index on files): the writer builds the two-level hash
** index (hkeys + hkeys_new) from files.hkey and drops files_hkey; move detection
** finds old and new files, through both levels and across a merge. */
CDB_TEST(migrate_v3_to_v4) {
    fixture fx;
    char cat[300];
    cdb_db_file_meta bad;
    CHECK_OK(fx_open_with_error(&fx, "migrate4", 40, &bad));
    cdb_db_batch *b = NULL;
    CHECK_OK(fx_migrate(&fx, cat, sizeof cat, "DROP TABLE hkeys; DROP TABLE hkeys_new;"
                        "CREATE INDEX files_hkey ON files(root_id, hkey);"
                        "UPDATE meta SET value=3 WHERE key='schema_version';"));
    CHECK_EQ_INT(tu_sql_int(cat, "SELECT value FROM meta WHERE key='schema_version'"),
                 CDB_DB_SCHEMA_VERSION);
    CHECK_EQ_INT(tu_sql_int(cat, "SELECT count(*) FROM sqlite_master WHERE name='files_hkey'"), 0);
    CHECK_EQ_INT(tu_sql_int(cat, "SELECT count(*) FROM hkeys"), 41);
    for (int i = 0; i < 40; i += 3) CHECK_MSG(found_by_hash(&fx, i), "file %d", i);
    int64_t ids[4];
    int n = 0;
    CHECK_OK(cdb_db_files_by_hash(fx.db, fx.root, bad.hash, ids, 4, &n));
    CHECK_EQ_INT(n, 0); /* error: not a move candidate */
    /* New files after the migration go to hkeys_new, then (past its bound) are
    ** merged into hkeys; found before and after. */
    CHECK_OK(fx_put_range(&fx, 40, 1040, NULL));
    CHECK_EQ_INT(tu_sql_int(cat, "SELECT count(*) FROM hkeys_new"), 1000);
    for (int i = 40; i < 1040; i += 97) CHECK_MSG(found_by_hash(&fx, i), "file %d", i);
    for (int k = 1; k <= 4; k++) CHECK_OK(fx_put_range(&fx, 40 + 1000 * k, 1040 + 1000 * k, NULL));
    CHECK(tu_sql_int(cat, "SELECT count(*) FROM hkeys_new") < 1000);
    CHECK_EQ_INT(tu_sql_int(cat, "SELECT count(*) FROM hkeys") +
                     tu_sql_int(cat, "SELECT count(*) FROM hkeys_new"),
                 5041);
    for (int i = 0; i < 5040; i += 61) CHECK_MSG(found_by_hash(&fx, i), "file %d", i);
    /* A file whose content changed is found by its new hash only; a moved file
    ** under its new path. */
    cdb_db_file_meta m5 = tu_meta(1005, 6005, 555555), m6 = tu_meta(1006, 6006, 6);
    cdb_db_file f6;
    float v[DIM];
    tu_vec(555555, 1.0f, v, DIM);
    CHECK_OK(cdb_db_file_lookup(fx.db, fx.root, "f00006.jpg", &f6));
    CHECK_OK(cdb_db_batch_new(fx.db, fx.model, &b));
    CHECK_OK(cdb_db_batch_put(b, fx.root, "f00005.jpg", &m5, v, DIM));
    CHECK_OK(cdb_db_batch_move(b, f6.id, "moved/f6.jpg", &m6));
    CHECK_OK(cdb_db_batch_commit(b, NULL));
    cdb_db_batch_free(b);
    CHECK(!found_by_hash(&fx, 5));
    CHECK_OK(cdb_db_files_by_hash(fx.db, fx.root, m5.hash, ids, 4, &n));
    CHECK_EQ_INT(n, 1);
    CHECK_OK(cdb_db_files_by_hash(fx.db, fx.root, m6.hash, ids, 4, &n));
    CHECK_EQ_INT(n, 1);
    CHECK_EQ_INT(ids[0], f6.id);
    cdb_db_file_clear(&f6);
    verify_clean(cdb_t_, fx.db, "");
    fx_close(&fx);
}

/* Runs of new files take the range statements of step 3; mixed batches (new,
** re-stored, error, duplicate paths) keep per-file semantics and sequence numbers. */
CDB_TEST(mixed_batch_runs) {
    fixture fx;
    float v[DIM];
    int64_t ids[8], gen0 = 0, gen1 = 0;
    CHECK_OK(fx_open_with(&fx, "runs", 0, 3, NULL)); /* f00000..f00002 exist */
    CHECK_OK(cdb_db_generation(fx.db, &gen0));
    cdb_db_batch *b = NULL;
    CHECK_OK(cdb_db_batch_new(fx.db, fx.model, &b));
    const char *names[] = {"n1.jpg", "n2.jpg", "f00001.jpg", "n3.jpg", "n3.jpg", "bad.jpg", "n4.jpg"};
    for (int i = 0; i < 7; i++) {
        cdb_db_file_meta m = tu_meta(100 + i, 200 + i, 900 + (uint64_t)i);
        tu_vec(900 + (uint64_t)i, 2.0f, v, DIM);
        if (i == 5)
            CHECK_OK(cdb_db_batch_put_error(b, fx.root, names[i], &m, "corrupt"));
        else
            CHECK_OK(cdb_db_batch_put(b, fx.root, names[i], &m, v, DIM));
    }
    CHECK_OK(cdb_db_batch_commit(b, ids));
    cdb_db_batch_free(b);
    CHECK(ids[3] == ids[4]); /* same path twice: one file */
    CHECK_OK(cdb_db_generation(fx.db, &gen1));
    /* 6 puts (one replaces f00001's vector: logged as removed + added) */
    CHECK_EQ_INT(gen1 - gen0, 6 + 1 + 1);
    cdb_db_counts c;
    CHECK_OK(cdb_db_get_counts(fx.db, 0, &c));
    CHECK_EQ_INT(c.files[CDB_DB_OK], 3 + 4);
    CHECK_EQ_INT(c.files[CDB_DB_ERROR], 1);
    CHECK_EQ_INT(c.files[CDB_DB_PENDING], 0);
    CHECK_EQ_INT(c.n_vectors, 7);
    for (int i = 0; i < 7; i++) {
        cdb_db_file f;
        CHECK_OK(cdb_db_file_get(fx.db, ids[i], &f));
        CHECK_EQ_STR(f.relpath, names[i]);
        CHECK_EQ_INT(f.state, i == 5 ? CDB_DB_ERROR : CDB_DB_OK);
        cdb_db_file_clear(&f);
    }
    verify_clean(cdb_t_, fx.db, "");
    fx_close(&fx);
}

static int has_kind(const cdb_db_report *r, cdb_db_problem_kind k, int32_t shard) {
    for (int i = 0; i < r->n_listed; i++)
        if (r->problems[i].kind == k && (shard < 0 || r->problems[i].shard == shard)) return 1;
    return 0;
}

CDB_TEST(verify_missing_and_truncated_shard) {
    fixture fx;
    char dir[256], path[400];
    CHECK_OK(fx_open(&fx, "vshard", 8192));
    for (int i = 0; i < 150; i += 30) CHECK_OK(fx_put_range(&fx, i, i + 30, NULL));
    snprintf(dir, sizeof dir, "%s", fx.dir);
    cdb_db_close(fx.db);
    /* Somebody deletes shard 1 and truncates shard 2. */
    snprintf(path, sizeof path, "%s/shards/0001.db", dir);
    CHECK(unlink(path) == 0);
    snprintf(path, sizeof path, "%s/shards/0002.db", dir);
    struct stat sb;
    CHECK(stat(path, &sb) == 0);
    CHECK(truncate(path, sb.st_size / 2) == 0);
    CHECK_OK(cdb_db_open(dir, NULL, &fx.db));
    cdb_db_report *r = NULL;
    CHECK_OK(cdb_db_check_shards(fx.db, &r));
    CHECK(has_kind(r, CDB_DB_SHARD_MISSING, 1));
    CHECK(has_kind(r, CDB_DB_SHARD_DAMAGED, 2));
    CHECK_EQ_INT(r->n_problems, 2);
    cdb_db_report_free(r);
    /* Reads that need them fail with a clear error instead of silently skipping. */
    cdb_db_iter *it = NULL;
    CHECK_RC(cdb_db_iter_new(fx.db, fx.model, &it), CDB_CORRUPT);
    CHECK(strstr(cdb_errmsg(), "0001.db") != NULL);
    {
        /* Searches read what is left: the other shards' vectors, the stored fp16 bits,
        ** the two unreadable shards counted and their files marked as such. */
        int n_unreadable = -1, got = 0, total = 0, n_shards_ok = 0;
        int64_t ids[150];
        uint16_t *v16 = malloc(sizeof *v16 * 150 * DIM), *rows = malloc(sizeof *rows * 150 * DIM);
        float *f32 = malloc(sizeof *f32 * 150 * DIM);
        uint8_t found16[150], found32[150];
        CHECK(v16 && rows && f32);
        CHECK_OK(cdb_db_iter_new_skipping(fx.db, fx.model, &n_unreadable, &it));
        CHECK_EQ_INT(n_unreadable, 2);
        do {
            CHECK_OK(cdb_db_iter_read(it, 150 - total, ids + total, NULL, v16 + total * DIM, &got));
            total += got;
        } while (got > 0 && total < 150);
        cdb_db_iter_free(it);
        CHECK(total > 0 && total < 150);
        int64_t all[150];
        for (int i = 0; i < 150; i++) all[i] = i + 1;
        CHECK_OK(cdb_db_vectors_get_f16(fx.db, fx.model, all, 150, rows, found16));
        for (int i = 0; i < 150; i++) n_shards_ok += found16[i] == 1;
        CHECK_EQ_INT(n_shards_ok, total);
        for (int i = 0; i < 150; i++)
            CHECK(found16[i] == 1 || found16[i] == CDB_DB_FOUND_UNREADABLE);
        /* the rows are the iterator's bits, and decode to what the fp32 read gives */
        for (int k = 0, j = 0; k < 150; k++) {
            if (found16[k] != 1) continue;
            while (j < total && ids[j] != all[k]) j++;
            CHECK(j < total && !memcmp(rows + (size_t)k * DIM, v16 + (size_t)j * DIM, DIM * 2));
            CHECK_OK(cdb_db_vectors_get(fx.db, fx.model, &all[k], 1, f32, found32));
            for (int d = 0; d < DIM && found32[0]; d++) {
                float x = f32[d];
                uint16_t h = rows[(size_t)k * DIM + d];
                float want = ldexpf((float)((h & 0x3ff) | ((h >> 10 & 0x1f) ? 0x400 : 0)),
                                    ((h >> 10 & 0x1f) ? (h >> 10 & 0x1f) : 1) - 25);
                if (h & 0x8000) want = -want;
                if (x != want) {
                    CDB_TEST_FAIL_("file %d dim %d: fp32 %g, fp16 bits decode to %g", k, d, x, want);
                    break;
                }
            }
        }
        free(v16);
        free(rows);
        free(f32);
    }
    CHECK_OK(cdb_db_verify(fx.db, &r));
    CHECK(has_kind(r, CDB_DB_SHARD_MISSING, 1));
    CHECK(has_kind(r, CDB_DB_SHARD_DAMAGED, 2));
    /* Repair: those shards' files become pending, empty shards replace them. */
    int64_t fixed = 0;
    CHECK_OK(cdb_db_repair(fx.db, r, &fixed));
    cdb_db_report_free(r);
    CHECK(fixed > 0);
    cdb_db_counts c;
    CHECK_OK(cdb_db_get_counts(fx.db, 0, &c));
    CHECK_EQ_INT(c.files[CDB_DB_PENDING], fixed);
    CHECK_EQ_INT(c.files[CDB_DB_OK] + c.files[CDB_DB_PENDING], 150);
    CHECK_EQ_INT(c.n_vectors, 150 - fixed);
    CHECK_OK(cdb_db_verify(fx.db, &r));
    CHECK_MSG(r->n_problems == 0, "verify after repair: %s", r->n_listed ? r->problems[0].msg : "");
    CHECK_EQ_INT(r->n_files_pending, fixed);
    cdb_db_report_free(r);
    /* Redo the pending files (what the next ingest does): healthy and complete. */
    CHECK_OK(fx_put_range(&fx, 0, 150, NULL));
    CHECK_EQ_INT(count_iter(fx.db, fx.model, NULL), 150);
    verify_clean(cdb_t_, fx.db, " after redo");
    fx_close(&fx);
}

CDB_TEST(verify_bad_and_orphan_vectors) {
    fixture fx;
    int64_t ids[10];
    char dir[256], path[400], sql[512];
    CHECK_OK(fx_open_with(&fx, "vvec", 0, 10, ids));
    snprintf(dir, sizeof dir, "%s", fx.dir);
    cdb_db_close(fx.db);
    snprintf(path, sizeof path, "%s/shards/0001.db", dir);
    /* f2: not unit norm (all 1.0 = 0x3c00); f3: wrong size; orphan for file 9999;
    ** f4: vector row gone. */
    snprintf(sql, sizeof sql,
             "UPDATE vectors SET vec=zeroblob(128) WHERE file_id=%lld;"
             "UPDATE vectors SET vec=x'003c' WHERE file_id=%lld;"
             "INSERT INTO vectors(model_id, file_id, vec) SELECT model_id, 9999, vec FROM vectors"
             " WHERE file_id=%lld;"
             "DELETE FROM vectors WHERE file_id=%lld;",
             (long long)ids[2], (long long)ids[3], (long long)ids[0], (long long)ids[4]);
    CHECK_EQ_INT(tu_sql_exec(path, sql), SQLITE_OK);
    CHECK_OK(cdb_db_open(dir, NULL, &fx.db));
    cdb_db_report *r = NULL;
    CHECK_OK(cdb_db_verify(fx.db, &r));
    CHECK_EQ_INT(r->n_problems, 4);
    CHECK(has_kind(r, CDB_DB_VECTOR_BAD, 1));
    CHECK(has_kind(r, CDB_DB_VECTOR_ORPHAN, 1));
    CHECK(has_kind(r, CDB_DB_VECTOR_MISSING, 1));
    int64_t fixed = 0;
    CHECK_OK(cdb_db_repair(fx.db, r, &fixed));
    cdb_db_report_free(r);
    CHECK_EQ_INT(fixed, 4);
    CHECK_OK(cdb_db_verify(fx.db, &r));
    CHECK_MSG(r->n_problems == 0, "verify after repair: %s", r->n_listed ? r->problems[0].msg : "");
    CHECK_EQ_INT(r->n_files_pending, 3);
    cdb_db_report_free(r);
    fx_close(&fx);
}

static int count_run(const cdb_db_run *r, void *ud) {
    int *n = ud;
    if (*n == 0 && (!r->status || strcmp(r->status, "partial"))) return 1;
    (*n)++;
    return 0;
}

CDB_TEST(runs_and_readonly) {
    fixture fx;
    int64_t run = 0;
    CHECK_OK(fx_open(&fx, "runs", 0));
    CHECK_OK(cdb_db_run_begin(fx.db, "ingest", &run));
    CHECK_OK(cdb_db_run_finish(fx.db, run, "ok", "{\"added\":3}"));
    CHECK_OK(cdb_db_run_begin(fx.db, "reindex", &run));
    CHECK_OK(cdb_db_run_finish(fx.db, run, "partial", NULL));
    CHECK_RC(cdb_db_run_finish(fx.db, 777, "ok", NULL), CDB_NOTFOUND);
    int n = 0;
    CHECK_OK(cdb_db_runs_foreach(fx.db, 0, count_run, &n));
    CHECK_EQ_INT(n, 2); /* newest first: "partial" then the other */
    CHECK_OK(fx_put_range(&fx, 0, 3, NULL));
    /* A reader beside the writer sees everything and cannot write. */
    cdb_db_params p = cdb_db_params_default();
    p.readonly = 1;
    cdb_db *rd = NULL;
    CHECK_OK(cdb_db_open(fx.dir, &p, &rd));
    CHECK(cdb_db_is_readonly(rd));
    CHECK_EQ_INT(count_iter(rd, fx.model, NULL), 3);
    cdb_db_batch *b = NULL;
    CHECK_RC(cdb_db_batch_new(rd, fx.model, &b), CDB_INVALID);
    int64_t x;
    CHECK_RC(cdb_db_root_add(rd, "/elsewhere", &x), CDB_INVALID);
    cdb_db_close(rd);
    fx_close(&fx);
}

/* A foreign connection holding catalog.db's write lock (as a crashed tool or an
** external sqlite3 shell might): clipdb waits with backoff and succeeds, or after
** busy_timeout_ms reports CDB_BUSY; SQLITE_BUSY itself never escapes. */
static pid_t hold_write_lock(const char *path, int ms, int *ready_fd) {
    int p[2];
    if (pipe(p) != 0) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        sqlite3 *c = NULL;
        char x = 1;
        if (sqlite3_open(path, &c) != SQLITE_OK ||
            sqlite3_exec(c, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
            _exit(2);
        if (write(p[1], &x, 1) != 1) _exit(3);
        usleep((useconds_t)ms * 1000);
        sqlite3_exec(c, "COMMIT", NULL, NULL, NULL);
        sqlite3_close(c);
        _exit(0);
    }
    close(p[1]);
    *ready_fd = p[0];
    return pid;
}

CDB_TEST(busy_is_retried_then_reported) {
    fixture fx;
    char cat[300], c;
    int fd = -1, st = 0;
    CHECK_OK(fx_open(&fx, "busy", 0));
    snprintf(cat, sizeof cat, "%s/catalog.db", fx.dir);
    /* Held for 300 ms: the commit waits it out. */
    pid_t pid = hold_write_lock(cat, 300, &fd);
    CHECK(pid > 0);
    CHECK(read(fd, &c, 1) == 1);
    close(fd);
    int64_t t0 = cdb_now_ns();
    CHECK_OK(fx_put_range(&fx, 0, 5, NULL));
    CHECK(cdb_now_ns() - t0 > 100000000LL);
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    /* Held longer than the handle's busy timeout: CDB_BUSY with SQLite's text. */
    char dir[256];
    snprintf(dir, sizeof dir, "%s", fx.dir);
    cdb_db_close(fx.db);
    cdb_db_params p = cdb_db_params_default();
    p.busy_timeout_ms = 200;
    CHECK_OK(cdb_db_open(dir, &p, &fx.db));
    pid = hold_write_lock(cat, 1500, &fd);
    CHECK(pid > 0);
    CHECK(read(fd, &c, 1) == 1);
    close(fd);
    CHECK_RC(fx_put_range(&fx, 5, 10, NULL), CDB_BUSY);
    CHECK(strstr(cdb_errmsg(), "locked") != NULL || strstr(cdb_errmsg(), "busy") != NULL);
    waitpid(pid, &st, 0);
    /* Nothing half-done: the failed commit left no rows; a retry works. */
    cdb_db_counts cn;
    CHECK_OK(cdb_db_get_counts(fx.db, 0, &cn));
    CHECK_EQ_INT(cn.files[CDB_DB_OK], 5);
    CHECK_EQ_INT(cn.files[CDB_DB_PENDING], 0);
    CHECK_OK(fx_put_range(&fx, 5, 10, NULL));
    CHECK_OK(cdb_db_get_counts(fx.db, 0, &cn));
    CHECK_EQ_INT(cn.files[CDB_DB_OK], 10);
    fx_close(&fx);
}

static void die_after_step1(int after_step, void *ud) {
    (void)ud;
    if (after_step == 1) raise(SIGKILL);
}

static void die_after_step2(int after_step, void *ud) {
    (void)ud;
    if (after_step == 2) raise(SIGKILL);
}

/* Stages one batch in a child process on the database at dir and commits it with
** hook, which kills the child; 1 when the child died by a signal. */
static int commit_killed(const char *dir, int64_t model, cdb_db_commit_hook hook,
                         cdb_status (*stage)(cdb_db_batch *b, void *ud), void *ud) {
    int st = 0;
    pid_t pid = fork();
    if (pid < 0) return 0;
    if (pid == 0) {
        cdb_db *db = NULL;
        cdb_db_batch *b = NULL;
        if (cdb_db_open(dir, NULL, &db) != CDB_OK || cdb_db_batch_new(db, model, &b) != CDB_OK ||
            stage(b, ud) != CDB_OK)
            _exit(2);
        cdb_db_set_commit_hook(db, hook, NULL);
        cdb_db_batch_commit(b, NULL);
        _exit(3);
    }
    waitpid(pid, &st, 0);
    return WIFSIGNALED(st);
}

/* f00000 with new content (fixture *ud). */
static cdb_status stage_f0_changed(cdb_db_batch *b, void *ud) {
    const fixture *fx = ud;
    float v[DIM];
    cdb_db_file_meta m = tu_meta(1, 2, 999);
    tu_vec(3, 1.0f, v, DIM);
    return cdb_db_batch_put(b, fx->root, "f00000.jpg", &m, v, DIM);
}

/* cdb_db_classify from size and mtime alone (rows written without an identity). */
static cdb_status classify_sm(cdb_db *db, int64_t model, int64_t root, const char *rel, int64_t size,
                              int64_t mtime, cdb_db_change *ch, cdb_db_file *out) {
    cdb_db_file_meta st;
    memset(&st, 0, sizeof st);
    st.size = size;
    st.mtime_ns = mtime;
    return cdb_db_classify(db, model, root, rel, &st, ch, out);
}

CDB_TEST(classify_changes) {
    fixture fx;
    int64_t ids[4], m2 = 0;
    cdb_db_change ch;
    cdb_db_file f;
    CHECK_OK(fx_open_with(&fx, "classify", 0, 4, ids)); /* f0..f3: size 1000+i, mtime 5000+i */
    CHECK_OK(classify_sm(fx.db, fx.model, fx.root, "new.jpg", 1, 1, &ch, NULL));
    CHECK_EQ_INT(ch, CDB_DB_CHANGE_NEW);
    CHECK_OK(classify_sm(fx.db, fx.model, fx.root, "f00001.jpg", 1001, 5001, &ch, &f));
    CHECK_EQ_INT(ch, CDB_DB_CHANGE_RESTAT); /* same, but no identity recorded yet */
    CHECK_EQ_INT(f.id, ids[1]);
    cdb_db_file_clear(&f);
    CHECK_OK(classify_sm(fx.db, fx.model, fx.root, "f00001.jpg", 1001, 9999, &ch, NULL));
    CHECK_EQ_INT(ch, CDB_DB_CHANGE_MODIFIED);
    CHECK_OK(cdb_db_model_register(fx.db, "hash-m2", "m2", DIM, NULL, &m2));
    CHECK_OK(classify_sm(fx.db, m2, fx.root, "f00001.jpg", 1001, 5001, &ch, NULL));
    CHECK_EQ_INT(ch, CDB_DB_CHANGE_NEEDS_VECTOR);
    /* quarantine: same size/mtime -> skip; changed -> retry */
    cdb_db_batch *b = NULL;
    cdb_db_file_meta bad = tu_meta(77, 88, 5);
    CHECK_OK(cdb_db_batch_new(fx.db, fx.model, &b));
    CHECK_OK(cdb_db_batch_put_error(b, fx.root, "f00002.jpg", &bad, "corrupt"));
    CHECK_OK(cdb_db_batch_delete(b, ids[3]));
    CHECK_OK(cdb_db_batch_commit(b, NULL));
    cdb_db_batch_free(b);
    CHECK_OK(classify_sm(fx.db, fx.model, fx.root, "f00002.jpg", 77, 88, &ch, NULL));
    CHECK_EQ_INT(ch, CDB_DB_CHANGE_QUARANTINED);
    CHECK_OK(classify_sm(fx.db, fx.model, fx.root, "f00002.jpg", 78, 88, &ch, NULL));
    CHECK_EQ_INT(ch, CDB_DB_CHANGE_RETRY);
    CHECK_OK(classify_sm(fx.db, fx.model, fx.root, "f00003.jpg", 1003, 5003, &ch, NULL));
    CHECK_EQ_INT(ch, CDB_DB_CHANGE_NEW);
    /* pending: a writer killed between steps 1 and 2 leaves f00000 pending */
    char dir[256];
    snprintf(dir, sizeof dir, "%s", fx.dir);
    cdb_db_close(fx.db);
    fx.db = NULL;
    CHECK(commit_killed(dir, fx.model, die_after_step1, stage_f0_changed, &fx));
    CHECK_OK(cdb_db_open(dir, NULL, &fx.db));
    CHECK_OK(classify_sm(fx.db, fx.model, fx.root, "f00000.jpg", 1000, 5000, &ch, NULL));
    CHECK_EQ_INT(ch, CDB_DB_CHANGE_REDO);
    fx_close(&fx);
}

/* The second model's vector of file i (same seed as the first's, another dim). */
static cdb_status put_m2(cdb_db *db, int64_t m2, int64_t root, int from, int to) {
    cdb_db_batch *b = NULL;
    float v[32];
    cdb_status rc = cdb_db_batch_new(db, m2, &b);
    for (int i = from; i < to && rc == CDB_OK; i++) {
        char name[32];
        cdb_db_file_meta m = tu_meta(1000 + i, 5000 + i, (uint64_t)i);
        snprintf(name, sizeof name, "f%05d.jpg", i);
        tu_vec(1000 + (uint64_t)i, 1.0f, v, 32);
        rc = cdb_db_batch_put(b, root, name, &m, v, 32);
    }
    if (rc == CDB_OK) rc = cdb_db_batch_commit(b, NULL);
    cdb_db_batch_free(b);
    return rc;
}

static cdb_status stage_delete(cdb_db_batch *b, void *ud) {
    return cdb_db_batch_delete(b, *(const int64_t *)ud);
}

/* Issue 33: a deletion killed after its shard commit (step 2) leaves no claim of any
** model without its vector, so the first model's redo of the file cannot hide the
** second set's hole; a pending file whose claims an older clipdb left stale is checked
** against its shard when redone; counts check pending files' claims;
** cdb_db_count_stale_claims finds an ok file's claim whose vector is gone. */
CDB_TEST(interrupted_delete_keeps_claims_true) {
    fixture fx;
    int64_t ids[3], m2 = 0, stale = -1;
    char dir[256], cat[300], shard[300], sql[200];
    int has = 1;
    cdb_db_change ch;
    cdb_db_counts c;
    CHECK_OK(fx_open(&fx, "claims", 0));
    CHECK_OK(cdb_db_model_register(fx.db, "hash-m2", "m2", 32, NULL, &m2));
    CHECK_OK(fx_put_range(&fx, 0, 3, ids));
    CHECK_OK(put_m2(fx.db, m2, fx.root, 0, 3));
    snprintf(dir, sizeof dir, "%s", fx.dir);
    cdb_db_close(fx.db);
    fx.db = NULL;
    /* f0 deleted, killed between the shard commit and step 3 */
    CHECK(commit_killed(dir, fx.model, die_after_step2, stage_delete, &ids[0]));
    CHECK_OK(cdb_db_open(dir, NULL, &fx.db));
    CHECK_OK(cdb_db_file_has_vector(fx.db, m2, ids[0], &has));
    CHECK_EQ_INT(has, 0); /* the claim went with step 1 */
    CHECK_OK(cdb_db_get_counts(fx.db, m2, &c));
    CHECK_EQ_INT(c.n_vectors, 2);
    /* the photo is back: the first model redoes it, the second finds its hole */
    cdb_db_file_meta m0 = tu_meta(1000, 5000, 0), m1 = tu_meta(1001, 5001, 1);
    CHECK_OK(fx_put_range(&fx, 0, 1, NULL));
    CHECK_OK(cdb_db_classify(fx.db, m2, fx.root, "f00000.jpg", &m0, &ch, NULL));
    CHECK_EQ_INT(ch, CDB_DB_CHANGE_NEEDS_VECTOR);

    /* f1 as an older clipdb's interrupted delete left it: pending, its vectors gone
    ** from the shard, its claims kept */
    cdb_db_close(fx.db);
    fx.db = NULL;
    snprintf(cat, sizeof cat, "%s/catalog.db", dir);
    snprintf(shard, sizeof shard, "%s/shards/0001.db", dir);
    snprintf(sql, sizeof sql, "UPDATE files SET state=1 WHERE id=%lld", (long long)ids[1]);
    CHECK_EQ_INT(tu_sql_exec(cat, sql), SQLITE_OK);
    snprintf(sql, sizeof sql, "DELETE FROM vectors WHERE file_id=%lld", (long long)ids[1]);
    CHECK_EQ_INT(tu_sql_exec(shard, sql), SQLITE_OK);
    /* and f2 an ok file whose second vector is gone (an older clipdb's reindex after that) */
    snprintf(sql, sizeof sql, "DELETE FROM vectors WHERE file_id=%lld AND model_id=%lld",
             (long long)ids[2], (long long)m2);
    CHECK_EQ_INT(tu_sql_exec(shard, sql), SQLITE_OK);
    CHECK_OK(cdb_db_open(dir, NULL, &fx.db));
    CHECK_OK(cdb_db_get_counts(fx.db, m2, &c)); /* f1's stale claim is checked, f2's trusted */
    CHECK_EQ_INT(c.n_vectors, 1);
    CHECK_OK(cdb_db_count_stale_claims(fx.db, m2, &stale));
    CHECK_EQ_INT(stale, 1); /* f2 */
    CHECK_OK(fx_put_range(&fx, 1, 2, NULL));
    CHECK_OK(cdb_db_file_has_vector(fx.db, m2, ids[1], &has));
    CHECK_EQ_INT(has, 0);
    CHECK_OK(cdb_db_classify(fx.db, m2, fx.root, "f00001.jpg", &m1, &ch, NULL));
    CHECK_EQ_INT(ch, CDB_DB_CHANGE_NEEDS_VECTOR);
    CHECK_OK(put_m2(fx.db, m2, fx.root, 0, 2));
    CHECK_OK(cdb_db_get_counts(fx.db, m2, &c));
    CHECK_EQ_INT(c.n_vectors, 3);
    CHECK_EQ_INT(c.n_missing, 0);
    fx_close(&fx);
}

/* Schema 8: the photo_meta table; an older catalog's files read as not read until a
** reindex fills their rows. */
CDB_TEST(migrate_v7_to_v8) {
    fixture fx;
    char cat[300];
    int64_t ids[12];
    CHECK_OK(fx_open_with(&fx, "migrate8", 0, 12, ids));
    CHECK_OK(fx_migrate(&fx, cat, sizeof cat, "DROP TABLE photo_meta;"
                        "UPDATE meta SET value=7 WHERE key='schema_version';"));
    CHECK_EQ_INT(tu_sql_int(cat, "SELECT value FROM meta WHERE key='schema_version'"),
                 CDB_DB_SCHEMA_VERSION);
    int64_t *missing = NULL, n = 0;
    CHECK_OK(cdb_db_photos_missing(fx.db, 0, &missing, &n));
    CHECK_EQ_INT(n, 12);
    for (int i = 0; i < n && i < 12; i++) CHECK_EQ_INT(missing[i], ids[i]);
    cdb_free(missing);
    cdb_db_photo row;
    cdb_db_file f;
    memset(&row, 0, sizeof row);
    CHECK_OK(cdb_db_file_get(fx.db, ids[3], &f));
    row.file_id = f.id;
    memcpy(row.hash, f.meta.hash, CDB_DB_HASH_BYTES);
    snprintf(row.model, sizeof row.model, "X-T4");
    row.has_phash = 1; /* a complete row (schema 9: one without a phash is still missing) */
    cdb_db_file_clear(&f);
    CHECK_OK(cdb_db_photos_put(fx.db, &row, 1));
    CHECK_OK(cdb_db_photos_missing(fx.db, fx.root, &missing, &n));
    CHECK_EQ_INT(n, 11);
    cdb_free(missing);
    cdb_db_photo got;
    CHECK_OK(cdb_db_photos_get(fx.db, &ids[3], 1, &got, NULL));
    CHECK_EQ_INT(got.read, 1);
    CHECK_EQ_STR(got.model, "X-T4");
    fx_close(&fx);
}

/* Schema 9: photo_meta's perceptual hash (and the ignore_files table). A v8 catalog's
** rows keep their metadata but, without a phash, count as missing (a reindex fills
** them); a row put with a phash reads it back, and a row whose file's content changed
** is never current, phash included (a changed file's stale phash is never used). */
CDB_TEST(migrate_v8_to_v9) {
    fixture fx;
    char cat[300];
    int64_t ids[4], *missing = NULL, n = 0;
    cdb_db_photo row, got;
    cdb_db_file f;
    CHECK_OK(fx_open_with(&fx, "migrate9", 0, 4, ids));
    memset(&row, 0, sizeof row);
    CHECK_OK(cdb_db_file_get(fx.db, ids[1], &f));
    row.file_id = f.id;
    memcpy(row.hash, f.meta.hash, CDB_DB_HASH_BYTES);
    cdb_db_file_clear(&f);
    snprintf(row.make, sizeof row.make, "Fuji");
    CHECK_OK(cdb_db_photos_put(fx.db, &row, 1));
    /* back to v8: photo_meta as v8 made it (its row kept), no ignore_files */
    CHECK_OK(fx_migrate(&fx, cat, sizeof cat,
                        "CREATE TABLE pm8(file_id INTEGER PRIMARY KEY, hash BLOB NOT NULL,"
                        " taken_source INTEGER NOT NULL DEFAULT 0, taken_ms INTEGER,"
                        " has_offset INTEGER NOT NULL DEFAULT 0,"
                        " offset_min INTEGER NOT NULL DEFAULT 0, make TEXT NOT NULL DEFAULT '',"
                        " model TEXT NOT NULL DEFAULT '', lens TEXT NOT NULL DEFAULT '',"
                        " has_gps INTEGER NOT NULL DEFAULT 0, lat REAL, lon REAL, alt REAL);"
                        " INSERT INTO pm8 SELECT file_id, hash, taken_source, taken_ms,"
                        " has_offset, offset_min, make, model, lens, has_gps, lat, lon, alt"
                        " FROM photo_meta; DROP TABLE photo_meta;"
                        " ALTER TABLE pm8 RENAME TO photo_meta; DROP TABLE ignore_files;"
                        " UPDATE meta SET value=8 WHERE key='schema_version';"));
    CHECK_EQ_INT(tu_sql_int(cat, "SELECT value FROM meta WHERE key='schema_version'"),
                 CDB_DB_SCHEMA_VERSION);
    CHECK_EQ_INT(tu_sql_int(cat, "SELECT count(*) FROM ignore_files"), 0);
    CHECK_OK(cdb_db_photos_get(fx.db, &ids[1], 1, &got, NULL));
    CHECK_EQ_INT(got.read, 1);
    CHECK_EQ_STR(got.make, "Fuji");
    CHECK_EQ_INT(got.has_phash, 0);
    CHECK_OK(cdb_db_photos_missing(fx.db, 0, &missing, &n));
    CHECK_EQ_INT(n, 4); /* the v8 row too: it has no phash */
    cdb_free(missing);
    row.has_phash = 1;
    row.phash = 0xF00DFACE12345678ULL; /* the top bit set: stored as a negative int64 */
    row.phash_format = 1;
    row.phash_width = 4000;
    row.phash_height = 3000;
    CHECK_OK(cdb_db_photos_put(fx.db, &row, 1));
    CHECK_OK(cdb_db_photos_get(fx.db, &ids[1], 1, &got, NULL));
    CHECK_EQ_INT(got.has_phash, 1);
    CHECK(got.phash == 0xF00DFACE12345678ULL);
    CHECK_EQ_INT(got.phash_format, 1);
    CHECK_EQ_INT(got.phash_width, 4000);
    CHECK_EQ_INT(got.phash_height, 3000);
    CHECK_OK(cdb_db_photos_missing(fx.db, 0, &missing, &n));
    CHECK_EQ_INT(n, 3);
    cdb_free(missing);
    /* the file's content changes: its row (and phash) is no longer current */
    {
        cdb_db_batch *b = NULL;
        cdb_db_file_meta m = tu_meta(1001, 6001, 99); /* another hash */
        float v[DIM];
        tu_vec(99, 1.0f, v, DIM);
        CHECK_OK(cdb_db_batch_new(fx.db, fx.model, &b));
        CHECK_OK(cdb_db_batch_put(b, fx.root, "f00001.jpg", &m, v, DIM));
        CHECK_OK(cdb_db_batch_commit(b, NULL));
        cdb_db_batch_free(b);
    }
    CHECK_OK(cdb_db_photos_get(fx.db, &ids[1], 1, &got, NULL));
    CHECK_EQ_INT(got.read, 0);
    CHECK_EQ_INT(got.has_phash, 0);
    fx_close(&fx);
}

/* Schema 10: a JPEG's phash changed definition (its DC hash), so the phashes a v9
** catalog holds for JPEG-like decodes (format 1) are cleared and count as missing (the
** reindex recomputes them); the others (format 0 RAW, 2 other) are kept as they are. */
CDB_TEST(migrate_v9_to_v10) {
    fixture fx;
    char cat[300];
    int64_t ids[3], *missing = NULL, n = 0;
    cdb_db_photo rows[3], got[3];
    CHECK_OK(fx_open_with(&fx, "migrate10", 0, 3, ids));
    for (int i = 0; i < 3; i++) {
        cdb_db_file f;
        memset(&rows[i], 0, sizeof rows[i]);
        CHECK_OK(cdb_db_file_get(fx.db, ids[i], &f));
        rows[i].file_id = f.id;
        memcpy(rows[i].hash, f.meta.hash, CDB_DB_HASH_BYTES);
        cdb_db_file_clear(&f);
        rows[i].has_phash = 1;
        rows[i].phash = 0x8000000000000001ULL + (uint64_t)i;
        rows[i].phash_format = i; /* 0 RAW, 1 JPEG/HEIF/TIFF, 2 other */
        rows[i].phash_width = 640;
        rows[i].phash_height = 480;
    }
    CHECK_OK(cdb_db_photos_put(fx.db, rows, 3));
    CHECK_OK(fx_migrate(&fx, cat, sizeof cat,
                        "UPDATE meta SET value=9 WHERE key='schema_version';"));
    CHECK_EQ_INT(tu_sql_int(cat, "SELECT value FROM meta WHERE key='schema_version'"), 10);
    CHECK_OK(cdb_db_photos_get(fx.db, ids, 3, got, NULL));
    for (int i = 0; i < 3; i++) {
        CHECK_EQ_INT(got[i].read, 1);
        CHECK_EQ_INT(got[i].has_phash, i != 1);
        if (i != 1) CHECK(got[i].phash == rows[i].phash);
    }
    CHECK_OK(cdb_db_photos_missing(fx.db, 0, &missing, &n));
    CHECK_EQ_INT(n, 1);
    CHECK_EQ_INT(n == 1 ? missing[0] : 0, ids[1]);
    cdb_free(missing);
    fx_close(&fx);
}

/* A reader's snapshot (cdb_db_read_begin): its lookups see the catalog as it was when it
** began, not a writer's later commit, until it is renewed; a writer cannot take one. */
CDB_TEST(read_snapshot_holds_until_renewed) {
    fixture fx;
    cdb_db_params p = cdb_db_params_default();
    cdb_db *rd = NULL;
    cdb_db_file f;
    CHECK_OK(fx_open_with(&fx, "snap", 0, 2, NULL));
    CHECK_RC(cdb_db_read_begin(fx.db), CDB_INVALID);
    p.readonly = 1;
    CHECK_OK(cdb_db_open(fx.dir, &p, &rd));
    CHECK_OK(cdb_db_read_begin(rd));
    CHECK_OK(fx_put_range(&fx, 2, 3, NULL)); /* committed after the snapshot */
    CHECK_RC(cdb_db_file_lookup(rd, fx.root, "f00002.jpg", &f), CDB_NOTFOUND);
    CHECK_OK(cdb_db_file_lookup(rd, fx.root, "f00001.jpg", &f));
    cdb_db_file_clear(&f);
    CHECK_OK(cdb_db_read_begin(rd)); /* renewed: sees it */
    CHECK_OK(cdb_db_file_lookup(rd, fx.root, "f00002.jpg", &f));
    cdb_db_file_clear(&f);
    cdb_db_read_end(rd);
    CHECK_OK(fx_put_range(&fx, 3, 4, NULL)); /* without one: every statement is current */
    CHECK_OK(cdb_db_file_lookup(rd, fx.root, "f00003.jpg", &f));
    cdb_db_file_clear(&f);
    cdb_db_close(rd);
    fx_close(&fx);
}

/* The walk-order cursor against the order a sort with cdb_db_walk_cmp gives ('/' below
** every byte: "a/b" before "a.jpg", "a b" after "a/z") and an independent oracle of it
** (each '/' mapped to byte 1, then strcmp). */
static int walk_oracle(const void *a, const void *b) {
    char x[64], y[64];
    snprintf(x, sizeof x, "%s", *(const char *const *)a);
    snprintf(y, sizeof y, "%s", *(const char *const *)b);
    for (char *c = x; *c; c++) if (*c == '/') *c = 1;
    for (char *c = y; *c; c++) if (*c == '/') *c = 1;
    return strcmp(x, y);
}

CDB_TEST(files_cursor_walk_order) {
    static const char *names[] = {"a.jpg", "a/b.jpg", "a b.jpg", "a/z/c.jpg", "a-c.jpg",
                                  "b.jpg", "a/z.jpg", "A.jpg", "a/b/c.jpg", "a!.jpg"};
    enum { N = sizeof names / sizeof names[0] };
    const char *want[N];
    fixture fx;
    cdb_db_batch *b = NULL;
    cdb_db_files_cursor *cur = NULL;
    cdb_db_file f;
    float v[DIM];
    int has = 0, n = 0;
    CHECK_OK(fx_open(&fx, "walkorder", 0));
    CHECK_OK(cdb_db_batch_new(fx.db, fx.model, &b));
    for (int i = 0; i < N; i++) {
        cdb_db_file_meta m = tu_meta(10 + i, 20 + i, (uint64_t)i);
        tu_vec((uint64_t)i, 1.0f, v, DIM);
        CHECK_OK(cdb_db_batch_put(b, fx.root, names[i], &m, v, DIM));
        want[i] = names[i];
    }
    CHECK_OK(cdb_db_batch_commit(b, NULL));
    cdb_db_batch_free(b);
    qsort(want, N, sizeof *want, walk_oracle);
    CHECK_OK(cdb_db_files_cursor_open(fx.db, fx.root, CDB_DB_MASK_ALL, &cur));
    for (;;) {
        CHECK_OK(cdb_db_files_cursor_next(cur, &f, &has));
        if (!has) break;
        CHECK_MSG(n < N && !strcmp(f.relpath, want[n]), "row %d: %s, want %s", n, f.relpath,
                  n < N ? want[n] : "none");
        if (n > 0) CHECK(cdb_db_walk_cmp(want[n - 1], f.relpath) < 0);
        n++;
    }
    CHECK_EQ_INT(n, N);
    cdb_db_files_cursor_close(cur);
    fx_close(&fx);
}

CDB_TEST_MAIN(open_create_reopen, encode_matches_double_reference, encode_any_magnitude,
              encode_refuses_bad, crud_put_lookup_read, odd_paths, quarantine_move_delete,
              models_side_by_side, generations, shard_rollover, schema_from_the_future,
              migrate_v1_to_v2, migrate_v2_to_v3, migrate_v3_to_v4, migrate_v7_to_v8,
              migrate_v8_to_v9, migrate_v9_to_v10,
              mixed_batch_runs,
              verify_missing_and_truncated_shard, verify_bad_and_orphan_vectors, runs_and_readonly, busy_is_retried_then_reported, classify_changes,
              interrupted_delete_keeps_claims_true, read_snapshot_holds_until_renewed,
              files_cursor_walk_order)
