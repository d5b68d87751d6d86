/*
** test_encoder_faults.c: the ingest pipeline in-process, through the engine's public
** API, with an encoder that fails where the test says (cdb_engine_run_params.encode,
** the test hook, wraps cdb_encode_pixels):
**
**   transient_batch_failure_is_retried  batch k fails (a device error), and so does
**       item j on its own: every other item of the batch gets its own vector; item j
**       is left pending with the reason (not quarantined) and the next run stores it
**   failing_first_item_does_not_shift   the batch fails and its first item keeps
**       failing alone: the items after it must not get stale vectors (issue 13's
**       copy from the failed call's buffer)
**   out_of_memory_halves_the_batch      calls of more than 2 images run out of memory:
**       the first batch of 4 is split in halves, the run keeps batches of 2, no
**       item fails and every vector is the item's own
**   unusable_vector_is_quarantined      the encoder returns NaN for one item: that
**       file is an error (permanent), the next run skips it
**   gpu_route_gives_the_same_vectors    the GPU's route through the pipeline
**       (CLIPDB_TEST_GPU_ROUTE=1: readers keep decoded images, as many as the
**       pool of kept images holds (a 1 MB decode budget: some, not the large one), for
**       cdb_encode_images and the bytes of the JPEGs nvJPEG would take for
**       cdb_encode_files; on the CPU both run the CPU's decode and transform) stores
**       the very vectors of the usual route in fast mode, bit for bit, and refuses a
**       JPEG cut in its entropy-coded data (its markers send it to "nvJPEG") as the
**       usual route does
**
** After each run the database is checked with the oracle of lib_util.h: every
** stored path holds the embedding of its own bytes (clipdb embed), once.
*/
#include "db/db.h"
#include "encoder/encoder.h"
#include "engine/engine.h"
#include "ingest_util.h"
#include "lib_util.h"

#define N_PHOTOS 14
#define BATCH 4

typedef struct fault_plan {
    int fail_call;   /* 1-based encoder call that fails (0: none) */
    int item;        /* the item of that call that keeps failing alone */
    int nan;         /* 1: the item gets NaN instead of an error */
    int calls;
    uint64_t bad;    /* pixel hash of the failing item, once known */
    int n_singles_failed;
    int oom_above;   /* > 0: calls of more items fail with CDB_NOMEM (a small device) */
    int n_oom, max_ok; /* calls refused that way; the largest call that ran */
} fault_plan;

static uint64_t pixel_hash(const float *px, size_t n) {
    uint64_t h = 1469598103934665603ULL;
    const unsigned char *b = (const unsigned char *)px;
    for (size_t i = 0; i < n * sizeof *px; i += 7) h = (h ^ b[i]) * 1099511628211ULL;
    return h;
}

static cdb_status faulty_encode(void *ud, cdb_model *m, const float *px, int n, float *out) {
    fault_plan *p = ud;
    size_t per = 3 * (size_t)cdb_model_get_info(m)->preprocess.size *
                 (size_t)cdb_model_get_info(m)->preprocess.size;
    int dim = cdb_model_get_info(m)->embed_dim;
    p->calls++;
    if (p->oom_above > 0 && n > p->oom_above) {
        p->n_oom++;
        return cdb_seterr(CDB_NOMEM, "injected: out of device memory at %d images", n);
    }
    if (n > p->max_ok) p->max_ok = n;
    if (p->fail_call && p->calls == p->fail_call && n > p->item) {
        p->bad = pixel_hash(px + per * (size_t)p->item, per);
        if (!p->nan) return cdb_seterr(CDB_DEVICE, "injected device error (batch %d)", p->calls);
    }
    cdb_status rc = cdb_encode_pixels(m, px, n, 1, out);
    for (int i = 0; rc == CDB_OK && p->bad && i < n; i++) {
        if (pixel_hash(px + per * (size_t)i, per) != p->bad) continue;
        if (p->nan) {
            for (int d = 0; d < dim; d++) out[(size_t)i * dim + d] = NAN;
        } else if (n == 1) {
            p->n_singles_failed++;
            return cdb_seterr(CDB_DEVICE, "injected device error (the same item again)");
        }
    }
    return rc;
}

static int g_fast; /* the next ingests decode fast */
static int64_t g_decode_mb; /* the decoders' budget (0: the default) */

/* One ingest of lib into db in this process, with plan (NULL: no fault). */
static cdb_status ingest(const char *db_dir, const char *lib, fault_plan *plan,
                         cdb_engine_summary *sum) {
    cdb_engine *e = NULL;
    cdb_engine_params ep = cdb_engine_params_default();
    cdb_engine_run_params rp = cdb_engine_run_params_default();
    cdb_status rc;
    ep.writer = 1;
    ep.device.kind = CDB_K_DEVICE_CPU;
    rp.batch = BATCH;
    rp.threads = 2;
    rp.decode = g_fast ? 1 : -1;
    rp.decode_memory_mb = g_decode_mb;
    rp.encode = plan ? faulty_encode : NULL;
    rp.encode_ud = plan;
    if ((rc = cdb_engine_open(db_dir, &ep, &e)) == CDB_OK) rc = cdb_test_ingest(e, lib, &rp, sum);
    cdb_engine_close(e);
    return rc;
}

/* A case: N_PHOTOS generated photos in <tag>/photos (lib), ingested with plan into a new
** database <tag>/db (db); s: the run's summary. */
typedef struct fcase {
    fault_plan plan;
    char lib[700], db[700];
    cdb_engine_summary s;
} fcase;

/* Makes case tag (c->plan set by the caller); the run added `added` photos, left `retry`
** to retry and quarantined `errors`, and the database holds the added ones exactly, each
** with its own vector. Skips without a model. */
static void run_case(cdb_test_ctx *cdb_t_, const char *tag, fcase *c, int added, int retry,
                     int errors) {
    LU_NEED_SETUP();
    LU_PATHS(tag, CLI_AT(c->lib, "photos"), CLI_AT(c->db, "db"));
    CHECK_EQ_INT(lu_generate(c->lib, 7000 + (uint64_t)strlen(tag), 0, N_PHOTOS), 0);
    CHECK_EQ_INT(lu_init(c->db), 0);
    CHECK_OK(ingest(c->db, c->lib, &c->plan, &c->s));
    CHECK_EQ_INT(c->s.added, added);
    CHECK_EQ_INT(c->s.retry, retry);
    CHECK_EQ_INT(c->s.errors, errors);
    CHECK_EQ_INT(lu_db_is_exact(c->db, added), 0);
}

/* `clipdb errors` on db says says (and not not_says, when given). */
static void errors_say(cdb_test_ctx *cdb_t_, const char *db, const char *says,
                       const char *not_says) {
    cli_run_result r;
    CHECK_EQ_INT(lu_expect((const char *[]){"errors", "--db", db, NULL}, 0, &r), 0);
    CHECK_MSG(strstr(r.out, says) && !(not_says && strstr(r.out, not_says)), "%s", r.out);
    cli_run_free(&r);
}

CDB_TEST(transient_batch_failure_is_retried) {
    fcase c = {.plan = {.fail_call = 2, .item = 1}};
    CHECK_CALL(run_case(cdb_t_, "transient", &c, N_PHOTOS - 1, 1, 0));
    CHECK_MSG(c.plan.n_singles_failed == 1, "the failing item was encoded alone %d times",
              c.plan.n_singles_failed);
    errors_say(cdb_t_, c.db, "will retry: cannot encode", NULL);
    errors_say(cdb_t_, c.db, "injected device error", NULL);
    /* the device is fine again: the next run (nothing changed on disk) stores it */
    CHECK_OK(ingest(c.db, c.lib, NULL, &c.s));
    CHECK_EQ_INT(c.s.added, 1);
    CHECK_EQ_INT(c.s.unchanged, N_PHOTOS - 1);
    CHECK_EQ_INT(lu_db_is_exact(c.db, N_PHOTOS), 0);
    CHECK_EQ_INT(lu_expect((const char *[]){"verify", "--db", c.db, "--quiet", NULL}, 0, NULL), 0);
}

CDB_TEST(out_of_memory_halves_the_batch) {
    fcase c = {.plan = {.oom_above = 2}};
    CHECK_CALL(run_case(cdb_t_, "oom", &c, N_PHOTOS, 0, 0));
    CHECK_EQ_INT(c.plan.n_oom, 1); /* only the first batch of 4: the run keeps 2 */
    CHECK_EQ_INT(c.plan.max_ok, 2);
}

CDB_TEST(failing_first_item_does_not_shift) {
    fcase c = {.plan = {.fail_call = 1}};
    /* items 1..3 of batch 1 stored: each its own vector (the oracle in run_case) */
    CHECK_CALL(run_case(cdb_t_, "shift", &c, N_PHOTOS - 1, 1, 0));
    for (int i = 0; i < N_PHOTOS; i += 3) {
        char p[900];
        lu_img(c.lib, i, p, sizeof p);
        lu_export e;
        CHECK_EQ_INT(lu_export_read(c.db, &e), 0);
        int at = lu_export_find(&e, p, NULL);
        lu_export_free(&e);
        if (at >= 0) CHECK_EQ_INT(lu_search_finds_itself(c.db, p), 0);
    }
}

CDB_TEST(unusable_vector_is_quarantined) {
    fcase c = {.plan = {.fail_call = 3, .item = 2, .nan = 1}};
    CHECK_CALL(run_case(cdb_t_, "nan", &c, N_PHOTOS - 1, 0, 1));
    errors_say(cdb_t_, c.db, "unusable vector", "will retry");
    CHECK_OK(ingest(c.db, c.lib, NULL, &c.s)); /* quarantined: not read again */
    CHECK_EQ_INT(c.s.added, 0);
    CHECK_EQ_INT(c.s.unchanged, N_PHOTOS);
}

/* The thumbnails of the ok files of the database in dir. */
static int64_t count_thumbs(const char *dir) {
    cdb_db *db = NULL;
    cdb_db_params p = cdb_db_params_default();
    int64_t n = 0;
    p.readonly = 1;
    if (cdb_db_open(dir, &p, &db) != CDB_OK) return -1;
    for (int64_t id = 1; id < 1000; id++) {
        cdb_db_file f;
        cdb_db_thumb t;
        memset(&t, 0, sizeof t);
        if (cdb_db_file_get(db, id, &f) != CDB_OK) continue;
        if (f.state == CDB_DB_OK && cdb_db_thumb_get(db, id, &t) == CDB_OK && t.n_bytes > 0) n++;
        cdb_db_thumb_clear(&t);
        cdb_db_file_clear(&f);
    }
    cdb_db_close(db);
    return n;
}

CDB_TEST(gpu_route_gives_the_same_vectors) {
    char lib[700], db[4][700], p[900], cut[900];
    cdb_engine_summary s[4];
    lu_export e[4];
    size_t n = 0;
    unsigned char *jpg;
    LU_NEED_SETUP();
    lu_path(lib, sizeof lib, "route/photos");
    lu_path(db[0], sizeof db[0], "route/db_usual");
    lu_path(db[1], sizeof db[1], "route/db_gpu");
    lu_path(db[2], sizeof db[2], "route/db_gpu_small_pool");
    lu_path(db[3], sizeof db[3], "route/db_gpu_thumbs");
    CHECK_EQ_INT(lu_generate(lib, 7300, 0, N_PHOTOS), 0);
    for (int i = 0; i < 3; i++) { /* small: the decoded bytes are kept, not the floats */
        unsigned char *ppm = lu_ppm(120 + 40 * i, 90 + 10 * i, 50 + (uint64_t)i, &n);
        snprintf(p, sizeof p, "%s/small_%d.ppm", lib, i);
        CHECK(ppm && lu_write(p, ppm, n) == 0);
        free(ppm);
    }
    { /* large: 1.4 MB decoded, more than a 1 MB budget's pool of kept images holds */
        unsigned char *ppm = lu_ppm(800, 600, 77, &n);
        snprintf(p, sizeof p, "%s/large.ppm", lib);
        CHECK(ppm && lu_write(p, ppm, n) == 0);
        free(ppm);
    }
    for (int i = 0; i < N_PHOTOS && !strstr(lu_img(lib, i, p, sizeof p), ".jpg"); i++) {}
    CHECK(strstr(p, ".jpg") && (jpg = (unsigned char *)cli_read_file(p, &n)) && n > 2000);
    snprintf(cut, sizeof cut, "%s/cut.jpg", lib);
    CHECK_EQ_INT(lu_write(cut, jpg, n / 2), 0);
    free(jpg);
    g_fast = 1;
    for (int k = 0; k < 4; k++) { /* the usual route; the GPU's; the GPU's, 1 MB budget;
                                   ** the GPU's with thumbnails */
        CHECK_EQ_INT(lu_expect((const char *[]){"init", "--db", db[k], "--model", lu_model,
                                                "--thumb-size", k == 3 ? "128" : "0",
                                                "--quiet", NULL},
                               0, NULL),
                     0);
        if (k) setenv("CLIPDB_TEST_GPU_ROUTE", "1", 1);
        g_decode_mb = k == 2 ? 1 : 0;
        CHECK_OK(ingest(db[k], lib, NULL, &s[k]));
        unsetenv("CLIPDB_TEST_GPU_ROUTE");
        CHECK_EQ_INT(lu_export_read(db[k], &e[k]), 0);
    }
    g_fast = 0;
    g_decode_mb = 0;
    /* every decoded image (none of them a JPEG nvJPEG takes) is kept while the pool has
    ** room, whatever its size; a 1 MB budget's pool (512 KB) leaves the large one, and
    ** some others, to the CPU's transform, and is never exceeded */
    CHECK_EQ_INT(s[0].kept_images, 0);
    CHECK_MSG(s[1].kept_images >= 4, "%lld kept", (long long)s[1].kept_images);
    CHECK_MSG(s[1].kept_peak_bytes >= 800 * 600 * 3, "peak %lld", (long long)s[1].kept_peak_bytes);
    CHECK_MSG(s[2].kept_images > 0 && s[2].kept_images < s[1].kept_images, "%lld of %lld kept",
              (long long)s[2].kept_images, (long long)s[1].kept_images);
    CHECK_MSG(s[2].kept_peak_bytes <= 512 * 1024, "peak %lld", (long long)s[2].kept_peak_bytes);
    /* with thumbnails on, the JPEGs still go to "nvJPEG" (not kept as decoded images), and
    ** every photo has its thumbnail */
    CHECK_EQ_INT(s[3].kept_images, s[1].kept_images);
    CHECK_EQ_INT(count_thumbs(db[3]), s[3].added);
    for (int k = 1; k < 4; k++) {
        CHECK_EQ_INT(s[k].added, s[0].added);
        CHECK_EQ_INT(s[k].errors, 1);
        CHECK_EQ_INT(e[k].n, e[0].n);
        CHECK_EQ_INT(e[k].dim, e[0].dim);
        for (int i = 0; i < e[0].n; i++) {
            int at = lu_export_find(&e[k], e[0].paths[i], NULL);
            CHECK_MSG(at >= 0, "%s: not stored by the GPU route", e[0].paths[i]);
            CHECK_MSG(at < 0 || !memcmp(e[0].vecs + (size_t)i * e[0].dim,
                                        e[k].vecs + (size_t)at * e[0].dim,
                                        sizeof(float) * (size_t)e[0].dim),
                      "%s: another vector on the GPU route (run %d)", e[0].paths[i], k);
        }
    }
    CHECK_EQ_INT(s[0].added, N_PHOTOS + 4);
    CHECK_EQ_INT(s[0].errors, 1);
    for (int k = 0; k < 4; k++) {
        cli_run_result r;
        CHECK_EQ_INT(lu_expect((const char *[]){"errors", "--db", db[k], NULL}, 0, &r), 0);
        CHECK_MSG(strstr(r.out, "cut.jpg") && strstr(r.out, "cannot decode"), "%s", r.out);
        cli_run_free(&r);
        lu_export_free(&e[k]);
    }
}

CDB_TEST_MAIN_TMP(lu_tmp, lu_rm_rf, transient_batch_failure_is_retried,
                  out_of_memory_halves_the_batch, failing_first_item_does_not_shift,
                  unusable_vector_is_quarantined, gpu_route_gives_the_same_vectors)
