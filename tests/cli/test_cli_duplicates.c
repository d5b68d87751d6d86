/*
** test_cli_duplicates.c: `clipdb duplicates` through the binary. A library of distinct
** pictures drawn here (random rectangles, written with stb_image_write), an exact byte
** copy of one, a half-size copy and a noisy copy of two others: the oracle is how the
** files were made. Checks --json (the groups, their kind, keep and files), --kind,
** --paths0 (the files not kept, NUL-separated; nothing deleted) and the table; that
** search collapses copies as brute force over the files' own bytes, export's vectors
** and dupes' decision groups them; and, under strace, that a run after a reindex opens
** no photo and prints the same.
** Needs a model: $CLIPDB_TEST_MODEL, else the bundled one; skipped (77) without.
*/
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* stb is third-party code: its warnings are silenced (as world/stb_write.c does); only
** its PNG writer is used (its JPEG writer left-shifts negative values, UBSan's finding) */
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wall"
#pragma GCC diagnostic ignored "-Wextra"
#pragma GCC diagnostic ignored "-Wunused-function"
#endif
#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb_image_write.h>
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

#include "cdb_test.h"
#include "cli_run.h"
#include "dupes/dupes.h"
#include "encoder/encoder.h"

#define W 192
#define H 144
#define N_PICS 8

/* Picture k: a background and five rectangles from a fixed seed. */
static void draw(int k, uint8_t *rgb)
{
    uint64_t s = 0x9E3779B97F4A7C15ULL * (uint64_t)(k + 1);
#define NEXT() (s = s * 6364136223846793005ULL + 1442695040888963407ULL, (unsigned)(s >> 33))
    uint8_t bg[3] = {(uint8_t)NEXT(), (uint8_t)NEXT(), (uint8_t)NEXT()};
    for (int i = 0; i < W * H; i++)
        memcpy(rgb + 3 * i, bg, 3);
    for (int r = 0; r < 5; r++) {
        int x0 = (int)(NEXT() % (W - 40)), y0 = (int)(NEXT() % (H - 30));
        int w = 20 + (int)(NEXT() % 80), h = 15 + (int)(NEXT() % 60);
        uint8_t c[3] = {(uint8_t)NEXT(), (uint8_t)NEXT(), (uint8_t)NEXT()};
        for (int y = y0; y < y0 + h && y < H; y++)
            for (int x = x0; x < x0 + w && x < W; x++)
                memcpy(rgb + 3 * (y * W + x), c, 3);
    }
#undef NEXT
}

/* The group (of kind) holding a file whose path ends with `name`, or NULL. */
static json_t *group_of(json_t *doc, const char *name)
{
    size_t gi, fi, nl = strlen(name);
    json_t *g, *f;
    json_array_foreach(json_object_get(doc, "groups"), gi, g)
        json_array_foreach(json_object_get(g, "files"), fi, f) {
            const char *p = json_string_value(json_object_get(f, "path"));
            if (p && strlen(p) >= nl && !strcmp(p + strlen(p) - nl, name))
                return g;
        }
    return NULL;
}

/* `duplicates --json` under strace: its output in tmp/out.json (heap, NUL-terminated),
** and how many times it opened (to read; O_PATH handles of folders aside) a file whose
** name, as open or openat got it (the one way to a photo opens it by its name in its
** folder), contains `match`; -1 when strace could not run. */
static int traced_opens(const char *tmp, const char *db, const char *match, char **out)
{
    char cmd[2400], trace[600], outp[600], line[4096];
    int n = 0;
    snprintf(trace, sizeof trace, "%s/trace.txt", tmp);
    snprintf(outp, sizeof outp, "%s/out.json", tmp);
    snprintf(cmd, sizeof cmd,
             /* LeakSanitizer cannot run under ptrace: off for the traced run (ASan builds) */
             "ASAN_OPTIONS=\"${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0\" "
             "strace -f -qq -e trace=open,openat -o '%s' '%s' duplicates --db '%s' --json"
             " > '%s' 2>/dev/null", trace, CLIPDB_BIN, db, outp);
    if (system(cmd) != 0)
        return -1;
    *out = cli_read_file(outp, NULL);
    FILE *f = fopen(trace, "r");
    while (f && fgets(line, sizeof line, f))
        n += strstr(line, match) != NULL && !strstr(line, "ENOENT") && !strstr(line, "O_PATH");
    if (f)
        fclose(f);
    return f ? n : -1;
}

/* Issue 28: the facts `duplicates` groups by are kept in the catalog (photo_meta's phash,
** schema 9; ingest stores the phash of its own decode where that is the phash's, as for
** these PNGs, and leaves the rest to the first duplicates run, which stores what it read,
** or to a reindex): a run opens no photo (strace counts the opens) and prints what the
** first run printed (whose groups the test checked against how the files were made). A
** photo whose content changed since is opened, refused (unreadable) and grouped with
** nothing: its stored phash and hash are never used; after a reindex it is grouped by its
** new content (pic3 rewritten with pic4's picture is pic4's exact copy), with the phash
** the reindex's decode gave: no photo opened. */
static void cached_run_reads_no_photo(cdb_test_ctx *cdb_t_, const char *tmp, const char *lib,
                                      const char *db, const char *first)
{
    char p[800], *cached = NULL, *changed = NULL;
    cli_run_result r;
    static uint8_t rgb[W * H * 3];
    if (system("strace -V >/dev/null 2>&1") != 0) {
        fprintf(stderr, "    no strace: the read-no-photo check is skipped\n");
        return;
    }
    /* ingest stored the PNGs' phashes: a run reads no photo and prints the first's */
    CHECK_EQ_INT(traced_opens(tmp, db, "\"pic", &cached), 0);
    CHECK(first && cached && !strcmp(first, cached));
    draw(4, rgb);
    snprintf(p, sizeof p, "%s/pic3.png", lib);
    CHECK(stbi_write_png(p, W, H, 3, rgb, W * 3));
    /* changed since the catalog recorded it: opened (and refused by the one way from a
    ** row to bytes), counted unreadable, in no group: its stored facts are not used */
    CHECK_EQ_INT(traced_opens(tmp, db, "\"pic", &changed), 1);
    json_error_t e;
    json_t *doc = changed ? json_loads(changed, 0, &e) : NULL;
    CHECK_EQ_INT((int)json_integer_value(json_object_get(doc, "unreadable")), 1);
    CHECK(doc && !group_of(doc, "/pic3.png"));
    json_decref(doc);
    free(changed);
    /* a reindex records the new content and its phash (from its decode): pic3 is pic4's
    ** exact copy, and no photo is opened */
    cli_run((const char *[]){"reindex", "--db", db, NULL}, &r);
    CHECK_EQ_INT(r.exit_code, 0);
    cli_run_free(&r);
    CHECK_EQ_INT(traced_opens(tmp, db, "\"pic3.png", &changed), 0);
    doc = changed ? json_loads(changed, 0, &e) : NULL;
    json_t *g = doc ? group_of(doc, "/pic3.png") : NULL;
    CHECK_MSG(g != NULL && g == group_of(doc, "/pic4.png"), "pic3 is not pic4's copy: %.300s",
              changed ? changed : "");
    CHECK_EQ_STR(g ? json_string_value(json_object_get(g, "kind")) : "", "exact");
    free(changed);
    CHECK_EQ_INT(traced_opens(tmp, db, "\"pic", &changed), 0);
    json_decref(doc);
    free(cached);
    free(changed);
}

/* ---- search results with copies collapsed: the oracle -------------------------------- */

typedef struct oracle {
    int n;
    int64_t id[64];
    int comp[64];        /* component of file i: the root of its copy group, or i */
} oracle;

/* The copy groups as brute force over the library's own facts: exact copies by equal
** bytes, phashes from each file's decode (the parameters duplicates documents: a fast
** decode to 64 px), vectors and capture times from `clipdb export`; dupes' decision
** (cdb_dupes_find) over them, its exact and near groups joined. 0, or -1. */
static int oracle_groups(const char *tmp, const char *db, oracle *o)
{
    char dir[700], p[800], *txt;
    static cdb_dupes_item it[64];
    static float vec[64][512];
    static char *bytes[64];
    static size_t nbytes[64];
    int dim = 0;
    snprintf(dir, sizeof dir, "%s/export", tmp);
    cli_run_result r;
    cli_run((const char *[]){"export", "--db", db, "--format", "jsonl", "--out", dir, NULL}, &r);
    cli_run_free(&r);
    snprintf(p, sizeof p, "%s/vectors.jsonl", dir);
    if (!(txt = cli_read_file(p, NULL)))
        return -1;
    memset(it, 0, sizeof it);
    o->n = 0;
    for (char *line = strtok(txt, "\n"); line && o->n < 64; line = strtok(NULL, "\n")) {
        json_error_t e;
        json_t *j = json_loads(line, 0, &e), *v;
        size_t k;
        int i = o->n++;
        o->id[i] = it[i].id = json_integer_value(json_object_get(j, "id"));
        json_array_foreach(json_object_get(j, "vector"), k, v) if (k < 512) vec[i][k] =
            (float)json_number_value(v);
        dim = (int)json_array_size(json_object_get(j, "vector"));
        it[i].vec = vec[i];
        bytes[i] = cli_read_file(json_string_value(json_object_get(j, "path")), &nbytes[i]);
        cdb_image_params ip = cdb_image_params_default();
        ip.decode = CDB_DECODE_FAST;
        ip.target_size = 64;
        cdb_image *img = NULL;
        if (bytes[i] && cdb_image_decode(bytes[i], nbytes[i], &ip, &img) == CDB_OK &&
            cdb_image_phash(img, &it[i].phash) == CDB_OK)
            it[i].has_phash = 1;
        cdb_image_free(img);
        json_decref(j);
    }
    free(txt);
    for (int i = 0; i < o->n; i++) { /* the hash: the first file with the same bytes */
        int first = i;
        for (int k = 0; k < i && first == i; k++)
            if (bytes[k] && bytes[i] && nbytes[k] == nbytes[i] &&
                !memcmp(bytes[k], bytes[i], nbytes[i]))
                first = k;
        memcpy(it[i].hash, &first, sizeof first);
        it[i].has_hash = 1;
    }
    cdb_dupes_groups *g = NULL;
    if (dim <= 0 || dim > 512 || cdb_dupes_find(it, (size_t)o->n, dim, NULL, &g) != CDB_OK)
        return -1;
    for (int i = 0; i < o->n; i++)
        o->comp[i] = i;
    for (int pass = 0; pass < o->n; pass++) /* join until nothing changes (tiny n) */
        for (size_t k = 0; k < g->n_groups; k++) {
            if (g->kind[k] != CDB_DUPES_EXACT && g->kind[k] != CDB_DUPES_NEAR)
                continue;
            int lo = o->n;
            for (size_t m = g->start[k]; m < g->start[k + 1]; m++)
                if (o->comp[g->member[m]] < lo)
                    lo = o->comp[g->member[m]];
            for (size_t m = g->start[k]; m < g->start[k + 1]; m++)
                for (int q = 0; q < o->n; q++)
                    if (q != (int)g->member[m] && o->comp[q] == o->comp[g->member[m]])
                        o->comp[q] = lo;
            for (size_t m = g->start[k]; m < g->start[k + 1]; m++)
                o->comp[g->member[m]] = lo;
        }
    cdb_dupes_groups_free(g);
    for (int i = 0; i < o->n; i++)
        free(bytes[i]);
    return 0;
}

static int oracle_index(const oracle *o, int64_t id)
{
    for (int i = 0; i < o->n; i++)
        if (o->id[i] == id)
            return i;
    return -1;
}

/* The ids of `search --json` for q with the extra arguments (NULL-terminated), into
** ids (at most 64); the parsed document in *doc (caller frees). Their count, or -1. */
static int search_ids(const char *db, const char *k, const char *extra, int64_t *ids,
                      json_t **doc)
{
    cli_run_result r;
    json_error_t e;
    size_t i;
    json_t *h;
    int n = 0;
    cli_run((const char *[]){"search", "--db", db, "a picture", "-k", k, "--json", extra, NULL},
            &r);
    *doc = r.exit_code == 0 ? json_loads(r.out, 0, &e) : NULL;
    cli_run_free(&r);
    if (!*doc)
        return -1;
    json_array_foreach(json_object_get(*doc, "hits"), i, h) if (n < 64) ids[n++] =
        json_integer_value(json_object_get(h, "id"));
    return n;
}

/* Issue 28: search collapses copies. The whole ranking (--no-collapse) cut to the first
** hit of each oracle group, in rank order, is what `search` gives for every k (so k
** counts groups, and every k's page is a prefix of one ordering), each kept hit with
** "duplicates" and "copies" naming exactly the other files of its group. */
static void collapse_matches_oracle(cdb_test_ctx *cdb_t_, const char *tmp, const char *db)
{
    oracle o;
    int64_t all[64], want[64], got[64];
    json_t *doc = NULL;
    cli_run_result r;
    cli_run((const char *[]){"reindex", "--db", db, NULL}, &r); /* every phash stored */
    CHECK_EQ_INT(r.exit_code, 0);
    cli_run_free(&r);
    CHECK_EQ_INT(oracle_groups(tmp, db, &o), 0);
    int n_all = search_ids(db, "64", "--no-collapse", all, &doc);
    json_decref(doc);
    CHECK_EQ_INT(n_all, o.n);
    int n_want = 0;
    unsigned char seen[64] = {0};
    for (int i = 0; i < n_all; i++) {
        int x = oracle_index(&o, all[i]);
        CHECK(x >= 0);
        if (x < 0 || seen[o.comp[x]])
            continue;
        seen[o.comp[x]] = 1;
        want[n_want++] = all[i];
    }
    CHECK(n_want < n_all); /* the library has copies to collapse */
    for (int k = 1; k <= n_want + 1; k++) {
        char kb[16];
        snprintf(kb, sizeof kb, "%d", k);
        int n = search_ids(db, kb, NULL, got, &doc);
        CHECK_EQ_INT(n, k <= n_want ? k : n_want);
        for (int i = 0; i < n && i < n_want; i++) {
            CHECK_EQ_INT((int)got[i], (int)want[i]);
            json_t *h = json_array_get(json_object_get(doc, "hits"), (size_t)i);
            int x = oracle_index(&o, got[i]), n_copies = 0;
            for (int q = 0; x >= 0 && q < o.n; q++) {
                if (q == x || o.comp[q] != o.comp[x])
                    continue;
                json_t *c = json_array_get(json_object_get(h, "copies"), (size_t)n_copies++);
                CHECK_EQ_INT((int)json_integer_value(c), (int)o.id[q]); /* ascending ids */
            }
            CHECK_EQ_INT((int)json_integer_value(json_object_get(h, "duplicates")), n_copies);
            CHECK_EQ_INT((int)json_array_size(json_object_get(h, "copies")), n_copies);
        }
        json_decref(doc);
    }
}

/* A fresh folder tmp with tmp/photos (lib) and the name of tmp/db (db). 0 on failure. */
static int make_dirs(char *tmp, size_t tmp_size, char *lib, char *db, size_t size)
{
    if (!cli_tmpdir(tmp, tmp_size))
        return 0;
    snprintf(lib, size, "%s/photos", tmp);
    snprintf(db, size, "%s/db", tmp);
    return mkdir(lib, 0700) == 0;
}

/* In a CDB_TEST: declares const char *model and char tmp[512], lib[600], db[600] (make_dirs);
** skips without a model. */
#define NEED_MODEL_AND_DIRS(model, tmp, lib, db)                                           \
    const char *model = cli_find_model();                                                 \
    char tmp[512], lib[600], db[600];                                                     \
    if (!model) CDB_SKIP("no model: set CLIPDB_TEST_MODEL or add models/<name>/");        \
    if (!make_dirs(tmp, sizeof tmp, lib, db, sizeof lib)) CDB_TEST_FAIL_("mkdtemp")

CDB_TEST(duplicates_groups_copies)
{
    NEED_MODEL_AND_DIRS(model, tmp, lib, db);
    char p[800];
    cli_run_result r;
    static uint8_t rgb[W * H * 3], half[(W / 2) * (H / 2) * 3];
    for (int k = 0; k < N_PICS; k++) {
        draw(k, rgb);
        snprintf(p, sizeof p, "%s/pic%d.png", lib, k);
        CHECK(stbi_write_png(p, W, H, 3, rgb, W * 3));
        if (k == 0) /* an exact copy */
            CHECK(stbi_write_png((snprintf(p, sizeof p, "%s/pic0_copy.png", lib), p), W, H, 3,
                                 rgb, W * 3));
        if (k == 1) { /* a 50% resize: 2x2 box averages */
            for (int y = 0; y < H / 2; y++)
                for (int x = 0; x < W / 2; x++)
                    for (int c = 0; c < 3; c++) {
                        const uint8_t *q = rgb + 3 * (2 * y * W + 2 * x) + c;
                        int sum = q[0] + q[3] + q[3 * W] + q[3 * W + 3];
                        half[3 * (y * (W / 2) + x) + c] = (uint8_t)((sum + 2) / 4);
                    }
            CHECK(stbi_write_png((snprintf(p, sizeof p, "%s/pic1_half.png", lib), p), W / 2,
                                 H / 2, 3, half, (W / 2) * 3));
        }
        if (k == 2) { /* the same picture with noise, as a lossy re-encode leaves it */
            uint64_t s = 5;
            for (int i = 0; i < W * H * 3; i++) {
                s = s * 6364136223846793005ULL + 1442695040888963407ULL;
                int v = rgb[i] + (int)((s >> 33) % 9) - 4;
                rgb[i] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
            }
            CHECK(stbi_write_png((snprintf(p, sizeof p, "%s/pic2_noisy.png", lib), p), W, H, 3,
                                 rgb, W * 3));
        }
    }
    CHECK_EQ_INT(cli_init_ingest(db, model, lib), 0);

    cli_run((const char *[]){"duplicates", "--db", db, "--json", NULL}, &r);
    CHECK_EQ_INT(r.exit_code, 0);
    json_error_t e;
    json_t *doc = json_loads(r.out, 0, &e);
    CHECK_MSG(doc != NULL, "not JSON: %.300s", r.out);
    char *first = strdup(r.out); /* its groups are checked below */
    cli_run_free(&r);
    CHECK_EQ_INT((int)json_array_size(json_object_get(doc, "groups")), 3);
    CHECK_EQ_INT((int)json_integer_value(json_object_get(doc, "files")), N_PICS + 3);
    static const char *const pairs[3][3] = {{"/pic0.png", "/pic0_copy.png", "exact"},
                                            {"/pic1.png", "/pic1_half.png", "near"},
                                            {"/pic2.png", "/pic2_noisy.png", "near"}};
    for (int i = 0; i < 3; i++) {
        json_t *g = group_of(doc, pairs[i][0]);
        CHECK_MSG(g != NULL && g == group_of(doc, pairs[i][1]), "%s and %s not grouped",
                  pairs[i][0], pairs[i][1]);
        CHECK_EQ_STR(json_string_value(json_object_get(g, "kind")), pairs[i][2]);
        CHECK_EQ_INT((int)json_array_size(json_object_get(g, "files")), 2);
        json_t *f0 = json_array_get(json_object_get(g, "files"), 0);
        json_t *f1 = json_array_get(json_object_get(g, "files"), 1);
        int64_t keep = json_integer_value(json_object_get(g, "keep"));
        CHECK(keep == json_integer_value(json_object_get(f0, "id")) ||
              keep == json_integer_value(json_object_get(f1, "id")));
        if (i == 1) { /* the larger one is kept */
            json_t *big = json_integer_value(json_object_get(f0, "width")) == W ? f0 : f1;
            CHECK_EQ_INT((int)keep, (int)json_integer_value(json_object_get(big, "id")));
        }
    }
    json_decref(doc);

    cli_run((const char *[]){"duplicates", "--db", db, "--kind", "exact", "--paths0", NULL},
            &r);
    CHECK_EQ_INT(r.exit_code, 0);
    CHECK_EQ_INT((int)r.out_len, (int)strlen(r.out) + 1); /* one path, NUL-terminated */
    CHECK(strstr(r.out, "/pic0") != NULL);
    cli_run_free(&r);
    /* nothing was deleted */
    struct stat st;
    CHECK(stat((snprintf(p, sizeof p, "%s/pic0_copy.png", lib), p), &st) == 0);
    CHECK(stat((snprintf(p, sizeof p, "%s/pic0.png", lib), p), &st) == 0);

    cli_run((const char *[]){"duplicates", "--db", db, NULL}, &r);
    CHECK_EQ_INT(r.exit_code, 0);
    CHECK(strstr(r.out, "exact (2 files)") != NULL);
    CHECK(strstr(r.err, "3 groups among 11 files") != NULL);
    cli_run_free(&r);
    cli_run((const char *[]){"duplicates", "--db", db, "--kind", "copies", NULL}, &r);
    CHECK_EQ_INT(r.exit_code, 2);
    cli_run_free(&r);
    cached_run_reads_no_photo(cdb_t_, tmp, lib, db, first);
    free(first);
    collapse_matches_oracle(cdb_t_, tmp, db);
    snprintf(p, sizeof p, "rm -rf '%s'", tmp);
    CHECK_EQ_INT(system(p), 0);
}

/* Plain pictures (one colour each: blank frames, uniform scans) all have the perceptual
** hash 0, and the model may find two colours close: without the crowd rule (dupes.h,
** CDB_DUPES_CROWD) every such pair was a near copy. 70 colours, none the same bytes:
** no group holds one of them, and a search that collapses copies shows each colour's
** file apart (as many hits as asked for). */
CDB_TEST(duplicates_plain_pictures_are_no_copies)
{
    enum { COLOURS = CDB_DUPES_CROWD + 6, SIDE = 48 };
    NEED_MODEL_AND_DIRS(model, tmp, lib, db);
    char p[800];
    cli_run_result r;
    static uint8_t rgb[SIDE * SIDE * 3];
    for (int k = 0; k < COLOURS; k++) {
        for (int i = 0; i < SIDE * SIDE; i++) /* a slow walk through the colours */
            rgb[3 * i] = (uint8_t)(100 + k), rgb[3 * i + 1] = (uint8_t)(60 + k / 2),
            rgb[3 * i + 2] = 40;
        snprintf(p, sizeof p, "%s/plain%02d.png", lib, k);
        CHECK(stbi_write_png(p, SIDE, SIDE, 3, rgb, SIDE * 3));
    }
    CHECK_EQ_INT(cli_init_ingest(db, model, lib), 0);
    cli_run((const char *[]){"duplicates", "--db", db, "--json", NULL}, &r);
    CHECK_EQ_INT(r.exit_code, 0);
    json_error_t e;
    json_t *doc = json_loads(r.out, 0, &e);
    CHECK_MSG(doc != NULL && json_array_size(json_object_get(doc, "groups")) == 0,
              "plain pictures grouped: %.400s", r.out);
    json_decref(doc);
    cli_run_free(&r);
    cli_run((const char *[]){"search", "--db", db, "--json", "-k", "20", "a plain colour",
                             NULL}, &r);
    CHECK_EQ_INT(r.exit_code, 0);
    doc = json_loads(r.out, 0, &e);
    CHECK_MSG(doc != NULL && json_array_size(json_object_get(doc, "hits")) == 20,
              "a collapsed search of 70 plain pictures: %.400s", r.out);
    json_decref(doc);
    cli_run_free(&r);
    snprintf(p, sizeof p, "rm -rf '%s'", tmp);
    CHECK_EQ_INT(system(p), 0);
}

CDB_TEST_MAIN(duplicates_groups_copies, duplicates_plain_pictures_are_no_copies)
