/*
** test_clipdb_api.c: the public C API (lib/clipdb.h) through libclipdb.so, in process,
** so that the ASan + UBSan build checks its memory: every object freed by its _free,
** errors with their status and message, bad arguments refused. Oracles: a normalized
** embedding is its raw embedding over its norm (computed here in double); a batch of
** images gives each image's row alone; hits come best first, under the folder asked
** for, with pixel sizes, and a reindex of an unchanged folder finds every file
** unchanged. Skips (77) without the bundled model.
** Examples and Python (tests/install/test_lib.sh, tests/python) check the answers
** against the clipdb program.
*/
#include <clipdb.h>

#include <ftw.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cdb_test.h"

#define MODEL CDB_SOURCE_DIR "/models/shapes-vit-tiny"
#define N_PHOTOS 12

/* A call that must succeed; the library's message on failure. */
#define API_OK(call)                                                                         \
    do {                                                                                     \
        clipdb_status st_ = (call);                                                          \
        if (st_ != CLIPDB_OK)                                                                \
            CDB_TEST_FAIL_("%s -> %s: %s", #call, clipdb_status_str(st_), clipdb_errmsg()); \
    } while (0)
/* A call that must fail with want, and say why. */
#define API_FAILS(call, want)                                                                \
    do {                                                                                     \
        clipdb_status st_ = (call);                                                          \
        if (st_ != (want) || !*clipdb_errmsg())                                             \
            CDB_TEST_FAIL_("%s -> %s, want %s with a message (msg: %s)", #call,              \
                           clipdb_status_str(st_), clipdb_status_str(want), clipdb_errmsg()); \
    } while (0)

static char g_dir[256]; /* scratch: photos/ (generated), db/ */

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

static void cleanup(void) {
    if (*g_dir) nftw(g_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* Makes the scratch folder with N_PHOTOS world photos once; 0 when it cannot. */
static int photos(void) {
    char cmd[PATH_MAX * 2];
    const char *tmp = getenv("TMPDIR") && strlen(getenv("TMPDIR")) < 200 ? getenv("TMPDIR")
                                                                        : "/tmp";
    if (*g_dir) return 1;
    snprintf(g_dir, sizeof g_dir, "%s/clipdb-api-XXXXXX", tmp);
    if (!mkdtemp(g_dir)) return *g_dir = 0, 0;
    atexit(cleanup);
    snprintf(cmd, sizeof cmd, "'%s/world/clipdb-world' generate '%s/photos' --seed 9 --n %d "
             ">/dev/null 2>&1", CDB_BINARY_DIR, g_dir, N_PHOTOS);
    if (system(cmd) != 0) return 0;
    snprintf(cmd, sizeof cmd, "%s/photos/manifest.jsonl", g_dir); /* not a photo */
    return unlink(cmd) == 0;
}

/* The path of photo i (sorted names: img_0000000.jpg or .png ...); NULL past the end. */
static const char *photo(int i, char *buf, size_t cap) {
    for (const char *ext = "jpg"; ext; ext = strcmp(ext, "jpg") ? NULL : "png") {
        snprintf(buf, cap, "%s/photos/img_%07d.%s", g_dir, i, ext);
        if (access(buf, R_OK) == 0) return buf;
    }
    return NULL;
}

static int have_model(void) { return access(MODEL "/model.safetensors", R_OK) == 0; }

CDB_TEST(versions_and_statuses) {
    CHECK_EQ_STR(clipdb_version(), CLIPDB_VERSION_STRING);
    CHECK_EQ_INT(clipdb_version_number(), CLIPDB_VERSION_NUMBER);
    CHECK_EQ_STR(clipdb_status_str(CLIPDB_OK), "ok");
    CHECK_EQ_STR(clipdb_status_str(CLIPDB_BUSY), "busy");
    CHECK(clipdb_status_str((clipdb_status)999) != NULL);
}

CDB_TEST(options_refuse_bad_values) {
    clipdb_options *o = clipdb_options_new();
    CHECK(o != NULL);
    API_FAILS(clipdb_options_set_device(o, "tpu"), CLIPDB_INVALID);
    API_FAILS(clipdb_options_set_threads(o, -1), CLIPDB_INVALID);
    API_FAILS(clipdb_options_set_lock_wait_ms(o, -2), CLIPDB_INVALID);
    API_OK(clipdb_options_set_device(o, "cpu"));
    API_OK(clipdb_options_set_threads(o, 2));
    API_OK(clipdb_options_set_lock_wait_ms(o, 100));
    clipdb_options_free(o);
    clipdb_options_free(NULL);
}

CDB_TEST(embed_normalized_is_raw_over_norm) {
    static const char *const texts[] = {"a red circle", "a blue square", ""};
    char p0[PATH_MAX], p1[PATH_MAX], p2[PATH_MAX];
    const char *imgs[3];
    clipdb_model *m = NULL;
    clipdb_options *o = clipdb_options_new();
    float *v, *raw, *one;
    int dim;
    if (!have_model()) CDB_SKIP("no bundled model");
    if (!photos()) CDB_SKIP("clipdb-world could not make photos");
    imgs[0] = photo(0, p0, sizeof p0), imgs[1] = photo(1, p1, sizeof p1);
    imgs[2] = photo(2, p2, sizeof p2);
    CHECK(imgs[0] && imgs[1] && imgs[2]);
    API_OK(clipdb_options_set_device(o, "cpu"));
    API_OK(clipdb_model_open(MODEL, o, &m));
    clipdb_options_free(o);
    dim = clipdb_model_dim(m);
    CHECK(dim > 0 && strlen(clipdb_model_name(m)) > 0);
    v = calloc((size_t)dim * 3, sizeof *v);
    raw = calloc((size_t)dim * 3, sizeof *raw);
    one = calloc((size_t)dim, sizeof *one);
    CHECK(v && raw && one);
    for (int kind = 0; kind < 2; kind++) { /* texts, then images */
        if (kind == 0) {
            API_OK(clipdb_embed_texts(m, texts, 3, 0, v));
            API_OK(clipdb_embed_texts(m, texts, 3, CLIPDB_EMBED_RAW, raw));
        } else {
            API_OK(clipdb_embed_images(m, imgs, 3, 0, v));
            API_OK(clipdb_embed_images(m, imgs, 3, CLIPDB_EMBED_RAW, raw));
        }
        for (int r = 0; r < 3; r++) {
            double n2 = 0;
            for (int d = 0; d < dim; d++) n2 += (double)raw[r * dim + d] * raw[r * dim + d];
            CHECK(n2 > 0);
            for (int d = 0; d < dim; d++)
                CHECK_NEAR(v[r * dim + d], raw[r * dim + d] / sqrt(n2), 1e-6);
        }
    }
    /* each image's row is the one it gets alone (here the last one, image 2) */
    API_OK(clipdb_embed_images(m, imgs + 2, 1, 0, one));
    CHECK(memcmp(one, v + 2 * dim, sizeof *one * (size_t)dim) == 0);
    API_OK(clipdb_embed_texts(m, texts, 0, 0, NULL)); /* nothing to do */
    {
        const char *bad[] = {imgs[0], "/nonexistent/x.png"};
        API_FAILS(clipdb_embed_images(m, bad, 2, 0, v), CLIPDB_NOTFOUND);
        CHECK(strstr(clipdb_errmsg(), "/nonexistent/x.png") != NULL);
    }
    API_FAILS(clipdb_embed_texts(m, texts, -1, 0, v), CLIPDB_INVALID);
    API_FAILS(clipdb_embed_texts(NULL, texts, 1, 0, v), CLIPDB_INVALID);
    free(v);
    free(raw);
    free(one);
    clipdb_model_close(m);
    clipdb_model_close(NULL);
    API_FAILS(clipdb_model_open("/nonexistent/model", NULL, &m), CLIPDB_NOTFOUND);
    CHECK(m == NULL && strstr(clipdb_errmsg(), "/nonexistent/model") != NULL);
}

/* progress: counts the calls, remembers the last "done" */
static int count_progress(void *ud, const char *label, int64_t done, int64_t total,
                          int64_t errors) {
    int64_t *c = ud;
    (void)total, (void)errors;
    if (strcmp(label, "ingest") && strcmp(label, "reindex")) c[2] = 1; /* unknown label */
    c[0]++;
    c[1] = done;
    return 0;
}

CDB_TEST(database_ingest_search_reindex) {
    char dbdir[PATH_MAX], root[PATH_MAX], other[PATH_MAX];
    const char *paths[1];
    int64_t calls[3] = {0, 0, 0};
    clipdb *db = NULL;
    clipdb_report *rep = NULL;
    clipdb_search_params *sp = clipdb_search_params_new();
    clipdb_hits *hits = NULL;
    if (!have_model()) CDB_SKIP("no bundled model");
    if (!photos()) CDB_SKIP("clipdb-world could not make photos");
    snprintf(dbdir, sizeof dbdir, "%s/db", g_dir);
    snprintf(root, sizeof root, "%s/photos", g_dir);
    snprintf(other, sizeof other, "%s/elsewhere", g_dir);
    paths[0] = root;
    API_FAILS(clipdb_open(dbdir, NULL, &db), CLIPDB_NOTFOUND);
    CHECK(db == NULL && strstr(clipdb_errmsg(), dbdir) != NULL);
    API_OK(clipdb_create(dbdir, MODEL));
    API_FAILS(clipdb_create(dbdir, MODEL), CLIPDB_INVALID); /* already there */
    API_OK(clipdb_open(dbdir, NULL, &db));
    API_OK(clipdb_ingest(db, paths, 1, count_progress, calls, &rep));
    CHECK_EQ_INT(clipdb_report_get(rep, CLIPDB_REPORT_ADDED), N_PHOTOS);
    CHECK_EQ_INT(clipdb_report_get(rep, CLIPDB_REPORT_FOUND), N_PHOTOS);
    CHECK_EQ_INT(clipdb_report_get(rep, CLIPDB_REPORT_PARTIAL), 0);
    CHECK_EQ_INT(clipdb_report_get(rep, (clipdb_report_field)999), 0);
    CHECK(calls[0] > 0 && calls[1] == N_PHOTOS && calls[2] == 0);
    clipdb_report_free(rep);

    API_OK(clipdb_search_params_set_k(sp, 5));
    API_OK(clipdb_search_text(db, "a red circle", sp, &hits));
    CHECK_EQ_INT(clipdb_hits_count(hits), 5);
    for (int i = 0; i < 5; i++) {
        CHECK(clipdb_hits_id(hits, i) > 0);
        CHECK(strncmp(clipdb_hits_path(hits, i), root, strlen(root)) == 0);
        CHECK(clipdb_hits_width(hits, i) > 0 && clipdb_hits_height(hits, i) > 0);
        if (i) CHECK(clipdb_hits_score(hits, i) <= clipdb_hits_score(hits, i - 1));
    }
    CHECK(clipdb_hits_path(hits, 5) == NULL && clipdb_hits_id(hits, -1) == 0);
    clipdb_hits_free(hits);
    hits = NULL;

    API_OK(clipdb_search_params_add_under(sp, other)); /* nothing there */
    API_OK(clipdb_search_text(db, "a red circle", sp, &hits));
    CHECK_EQ_INT(clipdb_hits_count(hits), 0);
    clipdb_hits_free(hits);
    API_OK(clipdb_search_params_add_under(sp, root)); /* either place */
    API_OK(clipdb_search_text(db, "a red circle", sp, &hits));
    CHECK_EQ_INT(clipdb_hits_count(hits), 5);
    clipdb_hits_free(hits);
    hits = NULL;

    API_FAILS(clipdb_search_params_set_k(sp, 0), CLIPDB_INVALID);
    API_FAILS(clipdb_search_params_set_min_score(sp, 1.5), CLIPDB_INVALID);
    API_OK(clipdb_search_params_set_min_score(sp, 1.0));
    API_OK(clipdb_search_text(db, "a red circle", sp, &hits));
    CHECK_EQ_INT(clipdb_hits_count(hits), 0);
    clipdb_hits_free(hits);
    hits = NULL;
    API_FAILS(clipdb_search_text(db, "", NULL, &hits), CLIPDB_INVALID);
    API_FAILS(clipdb_search_text(db, "a - a", NULL, &hits), CLIPDB_INVALID);
    CHECK(hits == NULL);
    clipdb_hits_free(NULL);
    clipdb_search_params_free(sp);

    paths[0] = "/nonexistent/photos";
    API_FAILS(clipdb_ingest(db, paths, 1, NULL, NULL, &rep), CLIPDB_NOTFOUND);
    CHECK(rep == NULL);
    calls[0] = calls[1] = 0;
    API_OK(clipdb_reindex(db, count_progress, calls, &rep));
    CHECK_EQ_INT(clipdb_report_get(rep, CLIPDB_REPORT_UNCHANGED), N_PHOTOS);
    CHECK_EQ_INT(clipdb_report_get(rep, CLIPDB_REPORT_ADDED), 0);
    clipdb_report_free(rep);
    clipdb_report_free(NULL);
    API_OK(clipdb_reindex(db, NULL, NULL, NULL)); /* no report wanted */
    clipdb_close(db);
    clipdb_close(NULL);
}

/* clipdb_search_text_many over two databases of the photos (odd and even, ingested
** file by file) gives the hits and score bits of clipdb_search_text over a database of
** the folder: the oracle (the encoder is batch-invariant: the same vectors). */
CDB_TEST(search_text_many_equals_one_database) {
    static const char *const queries[] = {"a red circle", "a blue square - stripes", "star"};
    char dirs[3][PATH_MAX], names[N_PHOTOS][PATH_MAX], root[PATH_MAX];
    const char *half[2][N_PHOTOS];
    int n_half[2] = {0, 0};
    clipdb *dbs[3] = {NULL, NULL, NULL}, *parts[2];
    clipdb_search_params *sp = clipdb_search_params_new();
    if (!have_model()) CDB_SKIP("no bundled model");
    if (!photos()) CDB_SKIP("clipdb-world could not make photos");
    snprintf(root, sizeof root, "%s/photos", g_dir);
    for (int i = 0; i < N_PHOTOS; i++)
        if (photo(i, names[i], sizeof names[i])) half[i % 2][n_half[i % 2]++] = names[i];
    for (int d = 0; d < 3; d++) {
        snprintf(dirs[d], sizeof dirs[d], "%s/many%d", g_dir, d);
        API_OK(clipdb_create(dirs[d], MODEL));
        API_OK(clipdb_open(dirs[d], NULL, &dbs[d]));
    }
    API_OK(clipdb_ingest(dbs[0], half[1], n_half[1], NULL, NULL, NULL)); /* odd first */
    API_OK(clipdb_ingest(dbs[1], half[0], n_half[0], NULL, NULL, NULL));
    API_OK(clipdb_ingest(dbs[2], (const char *[]){root}, 1, NULL, NULL, NULL));
    parts[0] = dbs[0];
    parts[1] = dbs[1];
    for (int q = 0; q < 3; q++)
        for (int k = 1; k <= N_PHOTOS; k += 5) {
            clipdb_hits *many = NULL, *one = NULL;
            API_OK(clipdb_search_params_set_k(sp, k));
            API_OK(clipdb_search_text_many(parts, 2, queries[q], sp, &many));
            API_OK(clipdb_search_text(dbs[2], queries[q], sp, &one));
            CHECK_EQ_INT(clipdb_hits_count(many), clipdb_hits_count(one));
            for (int i = 0; i < clipdb_hits_count(one) && i < clipdb_hits_count(many); i++) {
                float a = clipdb_hits_score(many, i), b = clipdb_hits_score(one, i);
                const char *path = clipdb_hits_path(many, i);
                int odd = atoi(strrchr(path, '_') + 1) % 2;
                CHECK(memcmp(&a, &b, sizeof a) == 0);
                CHECK(strcmp(path, clipdb_hits_path(one, i)) == 0);
                CHECK_EQ_INT(clipdb_hits_db(many, i), odd ? 0 : 1);
                CHECK_EQ_INT(clipdb_hits_db(one, i), 0);
            }
            CHECK_EQ_INT(clipdb_hits_db(many, k), -1);
            clipdb_hits_free(many);
            clipdb_hits_free(one);
        }
    { /* collapsed (these photos have no copies): the same hits, none with copies */
        clipdb_hits *many = NULL, *one = NULL;
        API_FAILS(clipdb_search_params_set_collapse(NULL, 1), CLIPDB_INVALID);
        API_OK(clipdb_search_params_set_collapse(sp, 1));
        API_OK(clipdb_search_params_set_k(sp, N_PHOTOS));
        API_OK(clipdb_search_text_many(parts, 2, queries[0], sp, &many));
        API_OK(clipdb_search_text(dbs[2], queries[0], sp, &one));
        CHECK_EQ_INT(clipdb_hits_count(many), clipdb_hits_count(one));
        for (int i = 0; i < clipdb_hits_count(one) && i < clipdb_hits_count(many); i++) {
            CHECK(strcmp(clipdb_hits_path(many, i), clipdb_hits_path(one, i)) == 0);
            CHECK_EQ_INT(clipdb_hits_copies(many, i), 0);
        }
        CHECK_EQ_INT(clipdb_hits_copies(many, -1), 0);
        CHECK_EQ_INT((int)clipdb_hits_copy_id(many, 0, 0), 0);
        CHECK_EQ_INT(clipdb_hits_copy_db(many, 0, 0), -1);
        clipdb_hits_free(many);
        clipdb_hits_free(one);
        API_OK(clipdb_search_params_set_collapse(sp, 0));
    }
    {
        clipdb_hits *h = NULL;
        clipdb *with_null[2] = {dbs[0], NULL};
        API_FAILS(clipdb_search_text_many(parts, 0, "a red circle", sp, &h), CLIPDB_INVALID);
        API_FAILS(clipdb_search_text_many(with_null, 2, "a red circle", sp, &h), CLIPDB_INVALID);
        API_FAILS(clipdb_search_text_many(parts, 2, "a - a", sp, &h), CLIPDB_INVALID);
        CHECK(h == NULL);
    }
    for (int d = 0; d < 3; d++) clipdb_close(dbs[d]);
    clipdb_search_params_free(sp);
}

CDB_TEST_MAIN(versions_and_statuses, options_refuse_bad_values,
              embed_normalized_is_raw_over_norm, database_ingest_search_reindex,
              search_text_many_equals_one_database)
