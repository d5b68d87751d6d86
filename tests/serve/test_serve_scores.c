/*
** test_serve_scores.c: what a search says besides the cosine, and what a new user is
** told (issue 26, parts 6 and 8), through the real binary and `clipdb serve`:
**
**   probability        a model with a logit bias (the bundled model with a logit_bias
**                      shard beside its weights, written here) gives each hit of a text
**                      query "probability" in `search --json`, /api/search and
**                      /knn-service. The oracle: sigmoid(exp(logit_scale) * cos +
**                      logit_bias) in double, with logit_scale read from the weights
**                      file's own bytes (the log of the scale, as checkpoints store it)
**                      and the bias this test wrote, for the printed cosine and for the
**                      cosine of a brute-force dot product of `clipdb embed --text` with
**                      the stored vectors of `clipdb export`. Absent (not null) for an
**                      image query, "more like this" and a model without a bias.
**   bundled_notice     with the bundled model: init says the hint once; an ingest of
**                      generated world photos says nothing; an ingest with a real
**                      photo (a PIL-made JPEG of tests/golden/images) says it exactly
**                      once, on stderr, with --json's stdout still one JSON document;
**                      /api/stats says bundled_model and real_photos (false, then true
**                      once the real photo is in); a model that is not the bundled one
**                      says bundled_model false.
*/
#include "serve/serve_util.h"

#define BIAS -10.0f /* the logit_bias written: 0.5 at a cosine of 0.4 (scale e^3.2 = 25) */
#define HINT "the bundled model knows only generated shapes"

static su_server g_srv;

/* Occurrences of needle in hay. */
static int count_of(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle)) n++;
    return n;
}

/* A scalar tensor of a safetensors file (F32 or F16, as stored), read from its bytes. */
static int st_scalar(const char *path, const char *name, double *out) {
    size_t n = 0;
    unsigned char *b = (unsigned char *)cli_read_file(path, &n);
    json_t *h = NULL, *t;
    uint64_t hl = 0;
    int ok = 0;
    for (int i = 0; b && n >= 8 && i < 8; i++) hl |= (uint64_t)b[i] << (8 * i);
    if (b && n >= 8 && hl < n - 8) h = json_loadb((const char *)b + 8, (size_t)hl, 0, NULL);
    if ((t = json_object_get(h, name))) {
        const char *dt = json_string_value(json_object_get(t, "dtype"));
        json_t *offsets = json_object_get(t, "data_offsets");
        size_t at = 8 + (size_t)hl + (size_t)json_integer_value(json_array_get(offsets, 0));
        if (dt && !strcmp(dt, "F32") && at + 4 <= n) {
            float f;
            memcpy(&f, b + at, 4);
            *out = f, ok = 1;
        } else if (dt && !strcmp(dt, "F16") && at + 2 <= n) {
            *out = lu_f16((uint16_t)(b[at] | b[at + 1] << 8)), ok = 1;
        }
    }
    json_decref(h);
    free(b);
    return ok;
}

/* The bundled model with a second weights file holding logit_bias = BIAS (F32 [1], as
** Hugging Face stores it): a folder of several *.safetensors loads them in name order. */
static int bias_model(const char *dir) {
    static const char *const files[] = {"open_clip_config.json", "vocab.json", "merges.txt"};
    char from[4200], to[4200], hdr[128];
    unsigned char file[256];
    float bias = BIAS;
    size_t hn;
    if (lu_mkdirs(dir) != 0) return -1;
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(from, sizeof from, "%s/%s", lu_model, files[i]);
        snprintf(to, sizeof to, "%s/%s", dir, files[i]);
        if (lu_copy(from, to) != 0) return -1;
    }
    snprintf(from, sizeof from, "%s/model.safetensors", lu_model);
    snprintf(to, sizeof to, "%s/a.safetensors", dir);
    if (lu_copy(from, to) != 0) return -1;
    hn = (size_t)snprintf(hdr, sizeof hdr, "{\"logit_bias\":{\"dtype\":\"F32\",\"shape\":[1],"
                                           "\"data_offsets\":[0,4]}}");
    while (hn % 8) hdr[hn++] = ' ';
    for (int i = 0; i < 8; i++) file[i] = (unsigned char)((uint64_t)hn >> (8 * i));
    memcpy(file + 8, hdr, hn);
    memcpy(file + 8 + hn, &bias, 4);
    snprintf(to, sizeof to, "%s/b.safetensors", dir);
    return lu_write(to, file, 8 + hn + 4);
}

static double sigmoid_of(double scale_log, double bias, double cos) {
    return 1.0 / (1.0 + exp(-(exp(scale_log) * cos + bias)));
}

/* `clipdb embed --model model --text text`: the query's embedding (dim floats, heap). */
static float *embed_text(const char *model, const char *text, int *dim) {
    cli_run_result r;
    json_t *doc, *row;
    float *v = NULL;
    if (lu_expect((const char *[]){"embed", "--model", model, "--text", text, NULL}, 0, &r) != 0) {
        cli_run_free(&r);
        return NULL;
    }
    doc = json_loads(r.out, 0, NULL);
    row = json_array_get(json_object_get(doc, "embeddings"), 0);
    *dim = (int)json_array_size(row);
    if (*dim > 0 && (v = malloc(sizeof *v * (size_t)*dim)))
        for (int i = 0; i < *dim; i++) v[i] = (float)json_number_value(json_array_get(row, i));
    json_decref(doc);
    cli_run_free(&r);
    return v;
}

/* The hits of `clipdb search --json ARGS` (a new reference, NULL on failure). */
static json_t *search_json(const char *db, const char *const *args) {
    const char *all[24] = {"search", "--db", db, "--json"};
    int n = 4;
    cli_run_result r;
    json_t *doc = NULL;
    for (int i = 0; args[i] && n < 23; i++) all[n++] = args[i];
    all[n] = NULL;
    if (lu_expect(all, 0, &r) == 0) doc = json_loads(r.out, 0, NULL);
    cli_run_free(&r);
    return doc;
}

CDB_TEST(probability) {
    char lib[700], db[700], model[700], weights[800], q[256];
    double scale_log = 0, bias = 0;
    lu_export ex;
    float *tv = NULL;
    int dim = 0;
    json_t *doc, *hits, *cr;
    su_resp r;
    if (lu_setup() == 77) CDB_SKIP("no model: set CLIPDB_TEST_MODEL or add models/<name>/");
    lu_path(lib, sizeof lib, "photos");
    lu_path(db, sizeof db, "db_bias");
    lu_path(model, sizeof model, "bias_model");
    CHECK_EQ_INT(lu_generate(lib, 11, 0, 16), 0);
    CHECK_EQ_INT(bias_model(model), 0);
    snprintf(weights, sizeof weights, "%s/model.safetensors", lu_model);
    CHECK(st_scalar(weights, "logit_scale", &scale_log));
    snprintf(weights, sizeof weights, "%s/b.safetensors", model);
    CHECK(st_scalar(weights, "logit_bias", &bias));
    CHECK(fabs(bias - BIAS) == 0);
    /* stored as a log: exp() of it is CLIP's temperature, 1 / 0.07 .. 100 */
    CHECK_MSG(scale_log > 2.0 && scale_log < 4.7, "logit_scale %g", scale_log);
    CHECK_EQ_INT(lu_expect((const char *[]){"init", "--db", db, "--model", model, "--quiet", NULL},
                           0, NULL), 0);
    CHECK_EQ_INT(lu_expect((const char *[]){"ingest", "--db", db, lib, "--quiet", NULL}, 0, NULL),
                 0);
    CHECK((doc = search_json(db, (const char *[]){"a red circle", "-k", "16", NULL})));
    hits = json_object_get(doc, "hits");
    CHECK_EQ_INT((int)json_array_size(hits), 16);
    CHECK((tv = embed_text(model, "a red circle", &dim)));
    CHECK_EQ_INT(lu_export_read(db, &ex), 0);
    CHECK_EQ_INT(ex.dim, dim);
    {
        double lo = 1, hi = 0;
        for (size_t i = 0; i < json_array_size(hits); i++) {
            json_t *h = json_array_get(hits, i);
            double s = json_number_value(json_object_get(h, "score")), dot = 0;
            json_t *p = json_object_get(h, "probability");
            const char *path = json_string_value(json_object_get(h, "path"));
            int at = lu_export_find(&ex, path, NULL);
            CHECK_MSG(p && json_is_number(p), "hit %zu has no probability", i);
            CHECK(at >= 0);
            for (int k = 0; k < dim; k++) dot += (double)tv[k] * ex.vecs[(size_t)at * dim + k];
            CHECK_MSG(fabs(dot - s) < 2e-6, "score %.9g, brute-force dot %.9g", s, dot);
            CHECK_MSG(fabs(json_number_value(p) - sigmoid_of(scale_log, bias, s)) < 1e-5,
                      "probability %.9g, sigmoid of the score %.9g", json_number_value(p),
                      sigmoid_of(scale_log, bias, s));
            CHECK_MSG(fabs(json_number_value(p) - sigmoid_of(scale_log, bias, dot)) < 2e-4,
                      "probability %.9g, sigmoid of the dot %.9g", json_number_value(p),
                      sigmoid_of(scale_log, bias, dot));
            if (json_number_value(p) < lo) lo = json_number_value(p);
            if (json_number_value(p) > hi) hi = json_number_value(p);
        }
        /* the bias was chosen so that the formula is exercised away from 0 and 1 */
        CHECK_MSG(hi - lo > 0.05, "probabilities %g .. %g", lo, hi);
    }
    lu_export_free(&ex);
    free(tv);
    /* an example image: an image-image cosine is no match probability */
    {
        char img[800];
        json_t *d2 = search_json(db, (const char *[]){"--image", lu_img(lib, 0, img, sizeof img),
                                                      NULL});
        CHECK(d2);
        CHECK(json_array_size(json_object_get(d2, "hits")) > 0);
        CHECK(!json_object_get(json_array_get(json_object_get(d2, "hits"), 0), "probability"));
        json_decref(d2);
    }
    /* the server: the same probabilities; /knn-service too; "more like this" none */
    CHECK_EQ_INT(su_start(&g_srv, (const char *[]){"--db", db, NULL}), 0);
    CHECK_EQ_INT(su_get(g_srv.port, "/api/search?k=16&q=a%20red%20circle", &r), 0);
    CHECK_EQ_INT(r.status, 200);
    cr = su_json(&r);
    for (size_t i = 0; i < json_array_size(hits); i++) {
        json_t *a = json_array_get(hits, i), *b = json_array_get(json_object_get(cr, "results"), i);
        CHECK_EQ_INT((int)json_integer_value(json_object_get(b, "id")),
                     (int)json_integer_value(json_object_get(a, "id")));
        CHECK(json_number_value(json_object_get(b, "probability")) ==
              json_number_value(json_object_get(a, "probability")));
    }
    json_decref(cr);
    su_resp_free(&r);
    snprintf(q, sizeof q, "/api/search?image_id=%lld",
             (long long)json_integer_value(json_object_get(json_array_get(hits, 0), "id")));
    CHECK_EQ_INT(su_get(g_srv.port, q, &r), 0);
    CHECK_EQ_INT(r.status, 200);
    cr = su_json(&r);
    CHECK(json_array_size(json_object_get(cr, "results")) > 0);
    CHECK(!json_object_get(json_array_get(json_object_get(cr, "results"), 0), "probability"));
    json_decref(cr);
    su_resp_free(&r);
    CHECK_EQ_INT(su_post_json(g_srv.port, "/knn-service",
                              "{\"text\": \"a red circle\", \"num_images\": 3}", &r), 0);
    CHECK_EQ_INT(r.status, 200);
    cr = su_json(&r);
    CHECK_EQ_INT((int)json_array_size(cr), 3);
    CHECK(json_number_value(json_object_get(json_array_get(cr, 0), "probability")) ==
          json_number_value(json_object_get(json_array_get(hits, 0), "probability")));
    CHECK(json_object_get(json_array_get(cr, 0), "similarity"));
    json_decref(cr);
    su_resp_free(&r);
    /* not the bundled model: no banner whatever the photos */
    CHECK_EQ_INT(su_get(g_srv.port, "/api/stats", &r), 0);
    CHECK_EQ_INT(r.status, 200);
    cr = su_json(&r);
    CHECK(json_is_false(json_object_get(cr, "bundled_model")));
    json_decref(cr);
    su_resp_free(&r);
    CHECK_EQ_INT(su_stop(&g_srv), 0);
    json_decref(doc);
    /* a model without a bias (the bundled one): no "probability" key at all */
    {
        char db2[700];
        json_t *d2;
        lu_path(db2, sizeof db2, "db_plain");
        CHECK_EQ_INT(lu_init(db2), 0);
        CHECK_EQ_INT(lu_expect((const char *[]){"ingest", "--db", db2, lib, "--quiet", NULL}, 0,
                               NULL), 0);
        CHECK((d2 = search_json(db2, (const char *[]){"a red circle", NULL})));
        CHECK(json_array_size(json_object_get(d2, "hits")) > 0);
        CHECK(!json_object_get(json_array_get(json_object_get(d2, "hits"), 0), "probability"));
        json_decref(d2);
    }
}

/* /api/stats' bundled_model and real_photos of a server over db. */
static void stats_flags(const char *db, int *bundled, int *real) {
    su_server s = {0};
    su_resp r;
    json_t *doc;
    *bundled = *real = -1;
    if (su_start(&s, (const char *[]){"--db", db, NULL}) != 0) return;
    if (su_get(s.port, "/api/stats", &r) == 0 && r.status == 200 && (doc = su_json(&r))) {
        *bundled = json_is_true(json_object_get(doc, "bundled_model"));
        *real = json_is_true(json_object_get(doc, "real_photos"));
        json_decref(doc);
    }
    su_resp_free(&r);
    su_stop(&s);
}

CDB_TEST(bundled_notice) {
    char lib[700], db[700], real[700], from[4200];
    cli_run_result r;
    int bundled, has_real;
    json_t *doc;
    if (lu_setup() == 77) CDB_SKIP("no model: set CLIPDB_TEST_MODEL or add models/<name>/");
    LU_PATHS("notice", CLI_AT(lib, "photos"), CLI_AT(db, "db"), CLI_AT(real, "real/photo.jpg"));
    CHECK_EQ_INT(lu_generate(lib, 5, 0, 6), 0);
    CHECK_EQ_INT(lu_expect((const char *[]){"init", "--db", db, "--model", lu_model, NULL}, 0, &r),
                 0);
    CHECK_MSG(count_of(r.err, HINT) == 1 && !strstr(r.out, HINT), "init: stdout %s stderr %s",
              r.out, r.err);
    cli_run_free(&r);
    CHECK_EQ_INT(lu_expect((const char *[]){"ingest", "--db", db, lib, NULL}, 0, &r), 0);
    CHECK_MSG(!strstr(r.err, HINT) && !strstr(r.out, HINT), "world photos: %s", r.err);
    cli_run_free(&r);
    stats_flags(db, &bundled, &has_real);
    CHECK_EQ_INT(bundled, 1);
    CHECK_EQ_INT(has_real, 0);
    /* a real photo (PIL's JPEG) among world photos: one line, on stderr only */
    snprintf(from, sizeof from, "%s/tests/golden/images/photo_320x240.jpg", CDB_SOURCE_DIR);
    CHECK_EQ_INT(lu_mkdirs(lu_path(real, sizeof real, "notice/real")), 0);
    lu_path(real, sizeof real, "notice/real/photo.jpg");
    CHECK_EQ_INT(lu_copy(from, real), 0);
    lu_path(real, sizeof real, "notice/real");
    CHECK_EQ_INT(lu_generate(real, 6, 100, 3), 0);
    CHECK_EQ_INT(lu_expect((const char *[]){"ingest", "--db", db, real, "--json", NULL}, 0, &r), 0);
    CHECK_MSG(count_of(r.err, HINT) == 1, "real photo: stderr %s", r.err);
    CHECK(!strstr(r.out, HINT));
    CHECK((doc = json_loads(r.out, 0, NULL)));
    json_decref(doc);
    cli_run_free(&r);
    stats_flags(db, &bundled, &has_real);
    CHECK_EQ_INT(bundled, 1);
    CHECK_EQ_INT(has_real, 1);
    /* --quiet: nothing */
    CHECK_EQ_INT(lu_copy(from, lu_path(real, sizeof real, "notice/real/photo2.jpg")), 0);
    {
        FILE *f = fopen(real, "ab"); /* another file's bytes: not a move of the first */
        CHECK(f && fputc(0, f) == 0 && fclose(f) == 0);
    }
    lu_path(real, sizeof real, "notice/real");
    CHECK_EQ_INT(lu_expect((const char *[]){"ingest", "--db", db, real, "-q", NULL}, 0, &r), 0);
    CHECK_MSG(!strstr(r.err, HINT), "--quiet: %s", r.err);
    cli_run_free(&r);
}

int main(int argc, char **argv) {
    CDB_TEST_LIST(tests, probability, bundled_notice);
    return su_main(tests, CDB_TEST_N(tests), argc, argv, &g_srv);
}
