/*
** test_cli_e2e.c: clipdb end to end, as a user runs it: init, ingest a generated
** library (world/) with a corrupt image, a text file and a misnamed PNG, search in
** every output format, stats, verify, errors, export, reindex after moves,
** deletions and edits, paths with spaces, newlines and non-UTF-8 bytes, the
** encoder commands, Ctrl-C during an ingest (exit 130, work kept), a search and a
** second writer (refused at once) while an ingest runs, and a writer that waits
** (--wait) and then finishes the job. JSON is read with jansson.
**
** Needs a model: $CLIPDB_TEST_MODEL, else the bundled one (models/<name>/ with
** weights). Skipped (exit 77) when there is none.
*/
#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cdb_test.h"
#include "cli_run.h"
#include "output/output.h"
#include "world/world.h"

#define NEED_MODEL(m)                                                         \
    const char *m = cli_find_model();                                             \
    if (!m) CDB_SKIP("no model: set CLIPDB_TEST_MODEL or add models/<name>/")

static json_t *parse(cdb_test_ctx *cdb_t_, const cli_run_result *r) {
    json_error_t e;
    json_t *j = json_loads(r->out, 0, &e);
    if (!j) fprintf(stderr, "    not JSON (%s, line %d): %.300s\n", e.text, e.line, r->out);
    (void)cdb_t_;
    return j;
}

static int64_t jint(json_t *o, const char *key) { return json_integer_value(json_object_get(o, key)); }

/* Name of the generated image with this index (jpg or png), in buf. */
static const char *img_name(const char *dir, int i, char *buf, size_t size) {
    snprintf(buf, size, "%s/img_%07d.jpg", dir, i);
    if (access(buf, F_OK) == 0) return buf;
    snprintf(buf, size, "%s/img_%07d.png", dir, i);
    return buf;
}

/* The data of the .npy file at path when its header says 'shape': shape (e.g. "(1, 64)")
** and, when dtype is not NULL, that dtype (e.g. "'<f2'"), and the file holds exactly
** n_values of elem bytes after the header: a pointer into *file (which the caller
** frees, also on NULL), else NULL. */
static const char *npy_data(const char *path, const char *shape, const char *dtype,
                            size_t n_values, size_t elem, char **file) {
    size_t len = 0, hl;
    char want[96];
    *file = cli_read_file(path, &len);
    if (!*file || len < 10) return NULL;
    hl = (unsigned char)(*file)[8] | (size_t)(unsigned char)(*file)[9] << 8;
    snprintf(want, sizeof want, "'shape': %s", shape);
    if (len != 10 + hl + n_values * elem || !strstr(*file + 10, want) ||
        (dtype && !strstr(*file + 10, dtype)))
        return NULL;
    return *file + 10 + hl;
}

static int generate(const char *dir, int n, uint64_t seed) {
    cdb_world_library_params lp = cdb_world_library_params_default();
    char manifest[1024];
    lp.n_threads = 2;
    if (cdb_world_generate(dir, seed, 0, n, &lp) != CDB_OK) return -1;
    snprintf(manifest, sizeof manifest, "%s/manifest.jsonl", dir);
    remove(manifest); /* a photo library, nothing else */
    return 0;
}

/* ---- the main user journey ----------------------------------------------------------- */

#define N_IMG 24

CDB_TEST(e2e_ingest_search_and_friends) {
    NEED_MODEL(model);
    char tmp[512], lib[600], db[600], p[1200], q[1200], exp[600];
    cli_run_result r;
    json_t *j;
    int dim = 0;
    if (!cli_tmpdir(tmp, sizeof tmp)) CDB_TEST_FAIL_("mkdtemp");
    snprintf(lib, sizeof lib, "%s/photos", tmp);
    snprintf(db, sizeof db, "%s/db", tmp);
    if (generate(lib, N_IMG, 7)) CDB_TEST_FAIL_("cannot generate the library: %s", cdb_errmsg());
    /* a corrupt "image", a text file, and a PNG under a non-image name */
    cli_write_file((snprintf(p, sizeof p, "%s/broken.jpg", lib), p), "\xFF\xD8\xFF garbage", 12);
    cli_write_file((snprintf(p, sizeof p, "%s/notes.txt", lib), p), "hello\n", 6);
    snprintf(p, sizeof p, "%s/misnamed.dat", lib);
    cli_copy_file(img_name(lib, 0, q, sizeof q), p);

    cli_run((const char *[]){"init", "--db", db, "--model", model, NULL}, &r);
    CHECK_EQ_INT(r.exit_code, 0);
    CHECK(strstr(r.out, "Created the database") != NULL);
    cli_run_free(&r);
    cli_run((const char *[]){"init", "--db", db, "--model", model, NULL}, &r);
    CHECK_EQ_INT(r.exit_code, 1); /* never replaces a database */
    CHECK(strstr(r.err, "a database already exists") != NULL);
    cli_run_free(&r);

    /* ingest: some files failed -> exit 3, the summary says what happened */
    cli_run((const char *[]){"ingest", "--db", db, lib, "--json", NULL}, &r);
    CHECK_EQ_INT(r.exit_code, 3);
    CHECK(strstr(r.err, "hint: run 'clipdb errors'") != NULL);
    j = parse(cdb_t_, &r);
    CHECK(j != NULL);
    if (j) {
        CHECK_EQ_INT(jint(j, "added"), N_IMG + 1); /* + the misnamed PNG */
        CHECK_EQ_INT(jint(j, "errors"), 1);
        CHECK_EQ_INT(jint(j, "not_images"), 1);
        CHECK_EQ_INT(jint(j, "exit_code"), 3);
        CHECK_EQ_STR(json_string_value(json_object_get(j, "status")), "partial");
        json_decref(j);
    }
    cli_run_free(&r);

    /* again: nothing changed -> nothing encoded, the bad file stays quarantined */
    cli_run((const char *[]){"ingest", "--db", db, lib, "--json", NULL}, &r);
    CHECK_EQ_INT(r.exit_code, 0);
    if ((j = parse(cdb_t_, &r))) {
        CHECK_EQ_INT(jint(j, "added"), 0);
        CHECK_EQ_INT(jint(j, "errors"), 0);
        CHECK_EQ_INT(jint(j, "unchanged"), N_IMG + 2);
        json_decref(j);
    }
    cli_run_free(&r);

    /* the human summary is one line on stdout */
    cli_run((const char *[]){"ingest", "--db", db, lib, NULL}, &r);
    CHECK_EQ_INT(r.exit_code, 0);
    CHECK(strncmp(r.out, "ingest: ", 8) == 0);
    CHECK(strchr(r.out, '\n') == r.out + r.out_len - 1);
    cli_run_free(&r);

    /* errors */
    cli_run((const char *[]){"errors", "--db", db, "--json", NULL}, &r);
    CHECK_EQ_INT(r.exit_code, 0);
    if ((j = parse(cdb_t_, &r))) {
        json_t *e0 = json_array_get(json_object_get(j, "errors"), 0);
        const char *path = json_string_value(json_object_get(e0, "path"));
        CHECK_EQ_INT(jint(j, "count"), 1);
        CHECK(path && strstr(path, "/broken.jpg") != NULL);
        CHECK(json_string_length(json_object_get(e0, "reason")) > 0);
        json_decref(j);
    }
    cli_run_free(&r);

    /* search: JSON, default lines and --paths agree */
    {
        const char *paths[5] = {0};
        int n_hits = 0;
        json_t *hits;
        cli_run((const char *[]){"search", "--db", db, "a", "red", "circle", "-k", "5", "--json", NULL}, &r);
        CHECK_EQ_INT(r.exit_code, 0);
        CHECK_EQ_INT((int)r.err_len, 0);
        j = parse(cdb_t_, &r);
        CHECK(j != NULL);
        if (!j) return;
        CHECK_EQ_STR(json_string_value(json_object_get(j, "query")), "a red circle");
        hits = json_object_get(j, "hits");
        n_hits = (int)json_array_size(hits);
        CHECK_EQ_INT(n_hits, 5);
        CHECK_EQ_INT(jint(j, "count"), 5);
        for (int i = 0; i < n_hits && i < 5; i++) {
            json_t *h = json_array_get(hits, (size_t)i);
            double s = json_real_value(json_object_get(h, "score"));
            CHECK_EQ_INT(jint(h, "rank"), i + 1);
            CHECK(s >= -1.0 && s <= 1.0);
            if (i) CHECK(s <= json_real_value(json_object_get(json_array_get(hits, (size_t)i - 1), "score")));
            paths[i] = json_string_value(json_object_get(h, "path"));
            CHECK(paths[i] && access(paths[i], F_OK) == 0);
            CHECK(strstr(paths[i], "broken.jpg") == NULL);
        }
        cli_run_free(&r);
        cli_run((const char *[]){"search", "--db", db, "a red circle", "-k", "5", NULL}, &r);
        CHECK_EQ_INT(r.exit_code, 0);
        {
            char *line = r.out;
            for (int i = 0; i < 5; i++) {
                int rank = 0, consumed = 0;
                double score = 0;
                char *nl = strchr(line, '\n'), *tab2;
                CHECK(nl != NULL);
                if (!nl) break;
                *nl = '\0';
                CHECK_EQ_INT(sscanf(line, "%d\t%lf\t%n", &rank, &score, &consumed), 2);
                CHECK_EQ_INT(rank, i + 1);
                tab2 = strchr(strchr(line, '\t') + 1, '\t');
                CHECK(tab2 && tab2 - strchr(line, '\t') - 1 == (score < 0 ? 7 : 6)); /* 4 decimals */
                CHECK_EQ_STR(tab2 + 1, paths[i]);
                line = nl + 1;
            }
            CHECK_EQ_INT(*line, '\0');
        }
        cli_run_free(&r);
        cli_run((const char *[]){"search", "--db", db, "a red circle", "-k", "5", "--paths", NULL}, &r);
        {
            char *line = r.out;
            for (int i = 0; i < 5 && line; i++) {
                char *nl = strchr(line, '\n');
                if (nl) *nl = '\0';
                CHECK_EQ_STR(line, paths[i]);
                line = nl ? nl + 1 : NULL;
            }
        }
        cli_run_free(&r);
        json_decref(j);
    }

    /* query by image: the image itself comes first, score ~1 */
    img_name(lib, 3, q, sizeof q);
    cli_run((const char *[]){"search", "--db", db, "--image", q, "-k", "1", "--json", NULL}, &r);
    CHECK_EQ_INT(r.exit_code, 0);
    if ((j = parse(cdb_t_, &r))) {
        json_t *h = json_array_get(json_object_get(j, "hits"), 0);
        const char *hp = json_string_value(json_object_get(h, "path"));
        CHECK(hp && strstr(hp, strrchr(q, '/')) != NULL);
        CHECK(json_real_value(json_object_get(h, "score")) > 0.999);
        json_decref(j);
    }
    cli_run_free(&r);

    /* weighted terms and --not are accepted; --min-score 1.0 leaves nothing (exit 0) */
    cli_run((const char *[]){"search", "--db", db, "2*star + red - blue", "--not", "circle", NULL}, &r);
    CHECK_EQ_INT(r.exit_code, 0);
    cli_run_free(&r);
    cli_run((const char *[]){"search", "--db", db, "star", "--min-score", "1", NULL}, &r);
    CHECK_EQ_INT(r.exit_code, 0);
    CHECK_EQ_INT((int)r.out_len, 0);
    cli_run_free(&r);

    /* stats and verify */
    cli_run((const char *[]){"stats", "--db", db, "--json", NULL}, &r);
    CHECK_EQ_INT(r.exit_code, 0);
    if ((j = parse(cdb_t_, &r))) {
        json_t *m0 = json_array_get(json_object_get(j, "models"), 0);
        CHECK_EQ_INT(jint(json_object_get(j, "files"), "ok"), N_IMG + 1);
        CHECK_EQ_INT(jint(json_object_get(j, "files"), "error"), 1);
        CHECK_EQ_INT(jint(m0, "vectors"), N_IMG + 1);
        dim = (int)jint(m0, "dim");
        CHECK(dim > 0);
        json_decref(j);
    }
    cli_run_free(&r);
    /* the human stats format: these lines, in this order */
    cli_run((const char *[]){"stats", "--db", db, NULL}, &r);
    CHECK_EQ_INT(r.exit_code, 0);
    {
        static const char *const want[] = {"database:  ", "files:     ", "folders:   ", "shards:    ",
                                           "disk:      ", "models:    (* = default)", "  * "};
        const char *line = r.out;
        char files_line[128];
        for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
            if (!line || strncmp(line, want[i], strlen(want[i])))
                CDB_TEST_FAIL_("stats line %zu should start with '%s': %s", i + 1, want[i], line ? line : "(none)");
            line = strchr(line, '\n');
            if (line) line++;
        }
        snprintf(files_line, sizeof files_line, "\nfiles:     %d ok, 0 pending, 1 error, 0 deleted\n", N_IMG + 1);
        CHECK(strstr(r.out, files_line) != NULL);
    }
    cli_run_free(&r);
    cli_run((const char *[]){"verify", "--db", db, "--json", NULL}, &r);
    CHECK_EQ_INT(r.exit_code, 0);
    if ((j = parse(cdb_t_, &r))) {
        CHECK(json_is_true(json_object_get(j, "ok")));
        CHECK_EQ_INT(jint(j, "vectors_checked"), N_IMG + 1);
        json_decref(j);
    }
    cli_run_free(&r);

    /* export: npy shapes and sizes */
    snprintf(exp, sizeof exp, "%s/export", tmp);
    cli_run((const char *[]){"export", "--db", db, "--out", exp, NULL}, &r);
    CHECK_EQ_INT(r.exit_code, 0);
    cli_run_free(&r);
    {
        size_t n = 0;
        char *v, shape[32];
        snprintf(shape, sizeof shape, "(%d, %d)", N_IMG + 1, dim);
        snprintf(p, sizeof p, "%s/vectors.npy", exp);
        CHECK(npy_data(p, shape, "'<f2'", (size_t)(N_IMG + 1) * (size_t)dim, 2, &v) != NULL);
        free(v);
        v = cli_read_file((snprintf(p, sizeof p, "%s/paths.txt", exp), p), &n);
        if (v) {
            int lines = 0;
            for (size_t i = 0; i < n; i++) lines += v[i] == '\n';
            CHECK_EQ_INT(lines, N_IMG + 1);
            free(v);
        }
    }

    /* reindex after a move, a deletion and an edit */
    {
        char from[1200], to[1200], sub[700];
        snprintf(sub, sizeof sub, "%s/sub", lib);
        mkdir(sub, 0777);
        img_name(lib, 1, from, sizeof from);
        snprintf(to, sizeof to, "%s/moved%s", sub, strrchr(from, '.'));
        CHECK_EQ_INT(rename(from, to), 0);
        img_name(lib, 2, p, sizeof p);
        CHECK_EQ_INT(remove(p), 0);
        img_name(lib, 4, from, sizeof from); /* replace image 4's content with image 5's */
        img_name(lib, 5, q, sizeof q);
        if (!strcmp(strrchr(from, '.'), strrchr(q, '.'))) cli_copy_file(q, from);
        else cli_copy_file(img_name(lib, 6, q, sizeof q), from);
        cli_run((const char *[]){"reindex", "--db", db, "--json", NULL}, &r);
        CHECK_EQ_INT(r.exit_code, 0);
        if ((j = parse(cdb_t_, &r))) {
            CHECK_EQ_INT(jint(j, "moved"), 1);
            CHECK_EQ_INT(jint(j, "deleted"), 1);
            CHECK_EQ_INT(jint(j, "added") + jint(j, "changed"), 1);
            CHECK_EQ_INT(jint(j, "errors"), 0);
            json_decref(j);
        }
        cli_run_free(&r);
        cli_run((const char *[]){"search", "--db", db, "--image", to, "-k", "1", "--paths", NULL}, &r);
        CHECK_EQ_INT(r.exit_code, 0);
        CHECK(strncmp(r.out, to, strlen(to)) == 0); /* the moved file kept its vector */
        cli_run_free(&r);
        cli_run((const char *[]){"search", "--db", db, "shape", "-k", "100", "--paths", NULL}, &r);
        CHECK(strstr(r.out, p) == NULL); /* the deleted file is gone from results */
        cli_run_free(&r);
        cli_run((const char *[]){"verify", "--db", db, NULL}, &r);
        CHECK_EQ_INT(r.exit_code, 0);
        cli_run_free(&r);
        cli_run((const char *[]){"index", "info", "--db", db, "--json", NULL}, &r);
        CHECK_EQ_INT(r.exit_code, 0);
        if ((j = parse(cdb_t_, &r))) {
            json_t *ix = json_object_get(j, "index");
            CHECK(json_is_object(ix));
            CHECK_EQ_INT(jint(ix, "covered"), jint(ix, "stored"));
            json_decref(j);
        }
        cli_run_free(&r);
    }
}

/* ---- paths with spaces, newlines and non-UTF-8 bytes ---------------------------------- */

CDB_TEST(e2e_odd_paths) {
    NEED_MODEL(model);
    char tmp[512], lib[600], db[600], src[1200], odd[1200], nl[1200];
    cli_run_result r;
    json_t *j;
    if (!cli_tmpdir(tmp, sizeof tmp)) CDB_TEST_FAIL_("mkdtemp");
    snprintf(lib, sizeof lib, "%s/my photos", tmp);
    snprintf(db, sizeof db, "%s/db", tmp);
    if (generate(lib, 3, 9)) CDB_TEST_FAIL_("generate");
    img_name(lib, 0, src, sizeof src);
    snprintf(odd, sizeof odd, "%s/caf\xE9 %s", lib, strrchr(src, '.')); /* Latin-1 e-acute */
    CHECK_EQ_INT(rename(src, odd), 0);
    img_name(lib, 1, src, sizeof src);
    snprintf(nl, sizeof nl, "%s/two\nlines%s", lib, strrchr(src, '.'));
    CHECK_EQ_INT(rename(src, nl), 0);
    cli_run((const char *[]){"init", "--db", db, "--model", model, NULL}, &r);
    cli_run_free(&r);
    cli_run((const char *[]){"ingest", "--db", db, lib, "--json", NULL}, &r);
    CHECK_EQ_INT(r.exit_code, 0);
    if ((j = parse(cdb_t_, &r))) {
        CHECK_EQ_INT(jint(j, "added"), 3);
        json_decref(j);
    }
    cli_run_free(&r);
    /* JSON: the exact bytes come back through path_b64 */
    cli_run((const char *[]){"search", "--db", db, "--image", odd, "-k", "1", "--json", NULL}, &r);
    CHECK_EQ_INT(r.exit_code, 0);
    if ((j = parse(cdb_t_, &r))) {
        json_t *h = json_array_get(json_object_get(j, "hits"), 0);
        const char *b64 = json_string_value(json_object_get(h, "path_b64"));
        size_t n = 0;
        unsigned char *raw = b64 ? cdb_out_base64_decode(b64, strlen(b64), &n) : NULL;
        CHECK(raw != NULL);
        CHECK_EQ_INT((int)n, (int)strlen(odd));
        CHECK(memcmp(raw, odd, n) == 0);
        free(raw);
        json_decref(j);
    }
    cli_run_free(&r);
    /* --paths -0: raw bytes, NUL-terminated, even with a newline in the name */
    cli_run((const char *[]){"search", "--db", db, "--image", nl, "-k", "1", "--paths", "-0", NULL}, &r);
    CHECK_EQ_INT(r.exit_code, 0);
    CHECK_EQ_INT((int)r.out_len, (int)strlen(nl) + 1);
    CHECK(memcmp(r.out, nl, strlen(nl) + 1) == 0);
    cli_run_free(&r);
}

/* ---- the encoder commands ------------------------------------------------------------ */

CDB_TEST(e2e_encoder_commands) {
    NEED_MODEL(model);
    char tmp[512], lib[600], img[1200], out[700];
    cli_run_result r;
    json_t *j;
    int ctx = 0, dim = 0, size = 0;
    if (!cli_tmpdir(tmp, sizeof tmp)) CDB_TEST_FAIL_("mkdtemp");
    snprintf(lib, sizeof lib, "%s/photos", tmp);
    if (generate(lib, 2, 11)) CDB_TEST_FAIL_("generate");
    img_name(lib, 0, img, sizeof img);

    cli_run((const char *[]){"models", "--model", model, "--json", NULL}, &r);
    CHECK_EQ_INT(r.exit_code, 0);
    if ((j = parse(cdb_t_, &r))) {
        ctx = (int)jint(json_object_get(j, "text"), "context_length");
        dim = (int)jint(j, "embed_dim");
        size = (int)jint(json_object_get(j, "preprocess"), "size");
        json_decref(j);
    }
    cli_run_free(&r);
    CHECK(ctx > 2 && dim > 0 && size > 0);

    cli_run((const char *[]){"tokenize", "--model", model, "--json", "a red circle", "a star", NULL}, &r);
    CHECK_EQ_INT(r.exit_code, 0);
    if ((j = parse(cdb_t_, &r))) {
        json_t *texts = json_object_get(j, "texts");
        CHECK_EQ_INT((int)json_array_size(texts), 2);
        for (size_t t = 0; t < json_array_size(texts); t++) {
            json_t *ids = json_object_get(json_array_get(texts, t), "ids");
            int eot = (int)jint(json_array_get(texts, t), "eot_index");
            CHECK_EQ_INT((int)json_array_size(ids), ctx);
            CHECK(eot > 1 && eot < ctx);
            for (int i = eot + 1; i < ctx; i++) CHECK_EQ_INT(json_integer_value(json_array_get(ids, (size_t)i)), 0);
        }
        json_decref(j);
    }
    cli_run_free(&r);
    /* the plain form: one line of ctx ids per text */
    cli_run((const char *[]){"tokenize", "--model", model, "a red circle", NULL}, &r);
    {
        int n = 0;
        for (char *s = r.out; *s; s++) n += *s == ' ';
        CHECK_EQ_INT(n, ctx - 1);
    }
    cli_run_free(&r);

    /* embed: rows in the order given, unit norm unless --raw */
    cli_run((const char *[]){"embed", "--model", model, "--text", "a star", "--image", img,
                             "--text", "a ring", NULL}, &r);
    CHECK_EQ_INT(r.exit_code, 0);
    if ((j = parse(cdb_t_, &r))) {
        json_t *emb = json_object_get(j, "embeddings"), *in = json_object_get(j, "inputs");
        CHECK_EQ_INT((int)json_array_size(emb), 3);
        CHECK_EQ_INT(jint(j, "dim"), dim);
        CHECK_EQ_STR(json_string_value(json_object_get(json_array_get(in, 0), "text")), "a star");
        CHECK(json_object_get(json_array_get(in, 1), "image") != NULL);
        CHECK_EQ_STR(json_string_value(json_object_get(json_array_get(in, 2), "text")), "a ring");
        for (size_t r_ = 0; r_ < json_array_size(emb); r_++) {
            json_t *row = json_array_get(emb, r_);
            double n2 = 0;
            CHECK_EQ_INT((int)json_array_size(row), dim);
            for (size_t d = 0; d < json_array_size(row); d++) {
                double v = json_number_value(json_array_get(row, d));
                n2 += v * v;
            }
            CHECK_NEAR(sqrt(n2), 1.0, 1e-4);
        }
        json_decref(j);
    }
    cli_run_free(&r);
    snprintf(out, sizeof out, "%s/e.npy", tmp);
    cli_run((const char *[]){"embed", "--model", model, "--image", img, "--format", "npy", "--out", out, NULL}, &r);
    CHECK_EQ_INT(r.exit_code, 0);
    cli_run_free(&r);
    {
        char *v, shape[32];
        snprintf(shape, sizeof shape, "(1, %d)", dim);
        CHECK(npy_data(out, shape, NULL, (size_t)dim, 4, &v) != NULL);
        free(v);
    }
    /* preprocess: 3 x S x S float32 */
    snprintf(out, sizeof out, "%s/p.npy", tmp);
    cli_run((const char *[]){"preprocess", "--model", model, img, "--out", out, NULL}, &r);
    CHECK_EQ_INT(r.exit_code, 0);
    cli_run_free(&r);
    {
        char *v, shape[32];
        snprintf(shape, sizeof shape, "(3, %d, %d)", size, size);
        CHECK(npy_data(out, shape, NULL, 3 * (size_t)size * (size_t)size, 4, &v) != NULL);
        free(v);
    }
    /* a file that is not an image: failure, exit 1, a reason */
    snprintf(out, sizeof out, "%s/notimage.jpg", tmp);
    cli_write_file(out, "nope", 4);
    cli_run((const char *[]){"embed", "--model", model, "--image", out, NULL}, &r);
    CHECK_EQ_INT(r.exit_code, 1);
    CHECK(strncmp(r.err, "clipdb: error: cannot embed ", 28) == 0);
    CHECK_EQ_INT((int)r.out_len, 0);
    cli_run_free(&r);
}

/* embed encodes its images in batches (32): with one text among 34 images (two
** batches, the second of 2), every row has the bytes of its input embedded alone, in
** the order given. */
#define N_EMBED 34

/* The float data of an N x dim .npy file embed wrote (a pointer into *file, which the
** caller frees), or NULL when it is not N x dim. */
static const char *npy_rows(const char *path, int n, int dim, char **file) {
    char shape[32];
    snprintf(shape, sizeof shape, "(%d, %d)", n, dim);
    return npy_data(path, shape, NULL, (size_t)n * (size_t)dim, 4, file);
}

CDB_TEST(e2e_embed_batches_match_alone) {
    NEED_MODEL(model);
    char tmp[512], lib[600], imgs[N_EMBED][700], out[700], one[700];
    const char *argv[2 * N_EMBED + 16];
    const char *text = "a red circle";
    cli_run_result r;
    json_t *j;
    char *all = NULL;
    const char *rows;
    int dim = 0, na = 0, text_row = 5;
    if (!cli_tmpdir(tmp, sizeof tmp)) CDB_TEST_FAIL_("mkdtemp");
    snprintf(lib, sizeof lib, "%s/photos", tmp);
    if (generate(lib, N_EMBED, 23)) CDB_TEST_FAIL_("generate");
    cli_run((const char *[]){"models", "--model", model, "--json", NULL}, &r);
    if ((j = parse(cdb_t_, &r))) {
        dim = (int)jint(j, "embed_dim");
        json_decref(j);
    }
    cli_run_free(&r);
    CHECK(dim > 0);
    snprintf(out, sizeof out, "%s/all.npy", tmp);
    argv[na++] = "embed", argv[na++] = "--model", argv[na++] = model;
    for (int i = 0; i < N_EMBED; i++) {
        if (i == text_row) argv[na++] = "--text", argv[na++] = text;
        argv[na++] = "--image", argv[na++] = img_name(lib, i, imgs[i], sizeof imgs[i]);
    }
    argv[na++] = "--format", argv[na++] = "npy", argv[na++] = "--out", argv[na++] = out;
    argv[na] = NULL;
    cli_run(argv, &r);
    CHECK_EQ_INT(r.exit_code, 0);
    cli_run_free(&r);
    rows = npy_rows(out, N_EMBED + 1, dim, &all);
    CHECK(rows != NULL);
    snprintf(one, sizeof one, "%s/one.npy", tmp);
    for (int row = 0; rows && row <= N_EMBED; row++) {
        int i = row < text_row ? row : row - 1;
        char *f = NULL;
        const char *alone;
        if (row == text_row)
            cli_run((const char *[]){"embed", "--model", model, "--text", text, "--format", "npy",
                                     "--out", one, NULL}, &r);
        else
            cli_run((const char *[]){"embed", "--model", model, "--image", imgs[i], "--format",
                                     "npy", "--out", one, NULL}, &r);
        CHECK_EQ_INT(r.exit_code, 0);
        cli_run_free(&r);
        alone = npy_rows(one, 1, dim, &f);
        CHECK(alone != NULL);
        CHECK_MSG(!alone || memcmp(alone, rows + (size_t)row * dim * 4, (size_t)dim * 4) == 0,
                  "row %d (%s) differs from its input embedded alone", row,
                  row == text_row ? text : imgs[i]);
        free(f);
    }
    free(all);
}

/* ---- Ctrl-C, concurrent readers and writers ---------------------------------------- */

#define N_BIG 160

static int64_t ok_files(cdb_test_ctx *cdb_t_, const char *db) {
    cli_run_result r;
    json_t *j;
    int64_t n = -1;
    cli_run((const char *[]){"stats", "--db", db, "--json", NULL}, &r);
    if ((j = parse(cdb_t_, &r))) {
        n = jint(json_object_get(j, "files"), "ok");
        json_decref(j);
    }
    cli_run_free(&r);
    return n;
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

CDB_TEST(e2e_sigint_and_concurrency) {
    NEED_MODEL(model);
    char tmp[512], lib[600], db[600], o1[700], e1[700], o2[700], e2[700];
    cli_run_result r;
    pid_t pid;
    int code, searched = 0, second_writer_checked = 0;
    int64_t after_int;
    if (!cli_tmpdir(tmp, sizeof tmp)) CDB_TEST_FAIL_("mkdtemp");
    CLI_PATHS(tmp, CLI_AT(lib, "photos"), CLI_AT(db, "db"), CLI_AT(o1, "o1"), CLI_AT(e1, "e1"),
              CLI_AT(o2, "o2"), CLI_AT(e2, "e2"));
    if (generate(lib, N_BIG, 5)) CDB_TEST_FAIL_("generate");
    cli_run((const char *[]){"init", "--db", db, "--model", model, NULL}, &r);
    CHECK_EQ_INT(r.exit_code, 0);
    cli_run_free(&r);

    /* Ctrl-C once files are being committed: exit 130, what was done is kept */
    pid = cli_spawn((const char *[]){"ingest", "--db", db, lib, "--batch", "4", "--threads", "1", NULL}, o1, e1);
    for (int i = 0; i < 400; i++) { /* wait for the first commits */
        sleep_ms(25);
        if (ok_files(cdb_t_, db) > 0) break;
    }
    /* a search reads while the ingest writes */
    cli_run((const char *[]){"search", "--db", db, "a circle", "-k", "3", "--json", NULL}, &r);
    if (r.exit_code == 0) searched = 1;
    else fprintf(stderr, "    search during ingest: exit %d: %s\n", r.exit_code, r.err);
    cli_run_free(&r);
    /* a second writer fails at once, naming the holder */
    cli_run((const char *[]){"ingest", "--db", db, lib, NULL}, &r);
    if (r.exit_code == 1) {
        CHECK(strstr(r.err, "being written by another clipdb") != NULL);
        CHECK(strstr(r.err, "--wait") != NULL);
        second_writer_checked = 1;
    } else {
        CHECK_EQ_INT(r.exit_code, 0); /* the first one had finished: then it just works */
    }
    cli_run_free(&r);
    /* a writer that waits for the lock (--wait) takes over when the first one ends */
    {
        char o3[700], e3[700];
        pid_t waiter;
        int wcode;
        snprintf(o3, sizeof o3, "%s/o3", tmp);
        snprintf(e3, sizeof e3, "%s/e3", tmp);
        waiter = cli_spawn((const char *[]){"ingest", "--db", db, lib, "--wait", "--json", NULL}, o3, e3);
        sleep_ms(200);
        kill(pid, SIGINT);
        code = cli_wait(pid);
        after_int = ok_files(cdb_t_, db);
        if (code == 0) {
            fprintf(stderr, "    the ingest finished before Ctrl-C arrived; interrupt not exercised\n");
        } else {
            char *err = cli_read_file(e1, NULL), *out = cli_read_file(o1, NULL);
            CHECK_EQ_INT(code, 130);
            CHECK(err && strstr(err, "interrupted") != NULL);
            CHECK(out && strstr(out, "[interrupted]") != NULL); /* the summary still comes */
            /* what the interrupted run itself stored (its summary): at most all of them
            ** (the signal may land after the last commit, before the exit: a loaded
            ** machine does that). The catalog's count cannot say it: the waiter may have
            ** finished the job by then */
            const char *f = out ? strstr(out, " files: ") : NULL;
            long long own = -1;
            CHECK(f && sscanf(f, " files: %lld added", &own) == 1);
            CHECK_MSG(own >= 0 && own <= N_BIG, "the interrupted run added %lld of %d", own, N_BIG);
            if (own == N_BIG) fprintf(stderr, "    Ctrl-C arrived after the last commit\n");
            CHECK_MSG(after_int > 0, "ok files after Ctrl-C: %lld", (long long)after_int);
            free(err);
            free(out);
        }
        CHECK(searched);
        if (!second_writer_checked) fprintf(stderr, "    second writer not exercised (timing)\n");
        /* the waiting writer finishes the job: every image exactly once */
        wcode = cli_wait(waiter);
        CHECK_EQ_INT(wcode, 0);
        {
            char *out = cli_read_file(o3, NULL);
            json_error_t je;
            json_t *j = out ? json_loads(out, 0, &je) : NULL;
            CHECK(j != NULL);
            if (j) {
                int64_t added = json_integer_value(json_object_get(j, "added"));
                /* after_int was read after the waiter may have started writing */
                CHECK_MSG(added >= N_BIG - after_int && added <= N_BIG, "added %lld, ok after Ctrl-C %lld",
                          (long long)added, (long long)after_int);
                json_decref(j);
            }
            free(out);
        }
    }
    CHECK_EQ_INT(ok_files(cdb_t_, db), N_BIG);
    cli_run((const char *[]){"verify", "--db", db, NULL}, &r);
    CHECK_EQ_INT(r.exit_code, 0);
    cli_run_free(&r);
}

CDB_TEST_MAIN(e2e_ingest_search_and_friends, e2e_odd_paths, e2e_encoder_commands,
              e2e_embed_batches_match_alone,
              e2e_sigint_and_concurrency)
