/*
** test_cli_parts.c: issue 29's guarantee, with the real clipdb binary and a model: a
** library ingested in N parts (`ingest --part I/N`, one database each) and merged
** (`merge`) exports what one process ingesting the same roots exports, for N = 1, 3
** and 8; after moves (within a folder, across roots, hence across parts), an edit, a
** deletion and new photos, `reindex` of each part and a merge again export what one
** process's `reindex` exports. The oracle is that single-process database, made by
** the same binary from the same folders: no golden.
**
** The roots: a folder with nested folders that hold the same file names (and a file
** a.jpg beside a folder a/, which a walk and byte order put in other orders), a second
** folder with those names again, a single-file root, and an undecodable photo (a
** quarantined row, which takes an id). Compared: `export` (npy): vectors.npy,
** paths.txt and paths0.txt byte for byte, photos.jsonl byte for byte once its "id"
** fields are cut (the photos of one folder carry EXIF capture times, cameras and
** positions), ids.npy only as "one id per row, ascending"; the thumbnails, read from
** the databases' files by path; and `clipdb errors` (the quarantined photo and a broken
** link, a walk problem every part records). The ids are the one
** thing normalized, because a single process's ids are not a function of the library:
** its writer numbers files in the order results reach it, and a quarantined file
** (never encoded) overtakes the photos batched for the encoder, so its id depends on
** the batch size; the merge numbers them in walk order. After the reindex the rows are
** compared as sets keyed by path (sorted): a file that moved between two parts is a
** deletion in one part and a new file in the other, so it gets a new id in the merged
** database where one process's move detection kept its id.
**
** Also: merge is idempotent and survives kill -9 at a random write (kill_shim.c): the
** rerun's export equals the clean merge's byte for byte, ids included, and verify
** passes; a part of another model is refused and nothing is written; --part is checked.
** $CLIPDB_PARTS_TRIALS kill trials (default 4), $CLIPDB_PARTS_SEED fixes them.
*/
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cdb_test.h"
#include "cli_run.h"
#include "db/db.h"
#include "exif_build.h"
#include "kill_util.h"
#include "world/world.h"

#if defined(CDB_KILL_SHIM) && !defined(__SANITIZE_ADDRESS__) /* ASan wants to be preloaded first */
static const char *g_shim = CDB_KILL_SHIM;
#else
static const char *g_shim = "";
#endif

static char g_tmp[512], g_model[700], g_r1[700], g_r2[700], g_r3[700];
static const int g_ns[3] = {1, 3, 8};

/* ---- running clipdb ------------------------------------------------------------- */

/* want for a run that may end 0 or 3 (done, some files quarantined) */
#define DONE (-3)

/* Runs clipdb args; its exit code (stderr printed when it is not want). */
static int run(const char *const *args, int want) {
    cli_run_result r;
    int rc = cli_run(args, &r);
    if (rc != want && !(want == DONE && (rc == 0 || rc == 3))) fprintf(stderr, "    clipdb %s ... -> %d: %s", args[0], rc, r.err);
    cli_run_free(&r);
    return rc;
}

static void part_dir(char *out, size_t size, const char *tag, int n, int i) {
    snprintf(out, size, "%s/%s%d/part%d", g_tmp, tag, n, i);
}

/* init + ingest --part i/n of the three roots into tag<n>/part<i>; 0 or the failure. */
static int ingest_part(const char *tag, int n, int i) {
    char db[900], part[32], up[900];
    int rc;
    snprintf(up, sizeof up, "%s/%s%d", g_tmp, tag, n);
    mkdir(up, 0755);
    part_dir(db, sizeof db, tag, n, i);
    snprintf(part, sizeof part, "%d/%d", i, n);
    if ((rc = run((const char *[]){"init", "--db", db, "--model", g_model, "-q", NULL}, 0)))
        return rc;
    rc = run((const char *[]){"ingest", "--db", db, "--part", part, "--threads", "1", "--device",
                              "cpu", "--follow-symlinks", "-q", g_r1, g_r2, g_r3, NULL},
             DONE); /* 3: the undecodable photo, in whichever part holds it */
    return rc == 0 || rc == 3 ? 0 : rc;
}

/* merge --db into the n parts of tag<n>; its exit code. */
static int merge(const char *into, const char *tag, int n, int want) {
    char parts[8][900];
    const char *args[16] = {"merge", "--db", into, "-q"};
    int k = 4;
    for (int i = 1; i <= n; i++) {
        part_dir(parts[i - 1], sizeof parts[0], tag, n, i);
        args[k++] = parts[i - 1];
    }
    args[k] = NULL;
    return run(args, want);
}

static int export_db(const char *db, const char *out) {
    return run((const char *[]){"export", "--db", db, "--out", out, "-q", NULL}, 0);
}

/* ---- comparing exports ------------------------------------------------------------ */

/* One export read back: rows of (path line, paths0 entry, vector bytes, photo line
** without its id). */
typedef struct xrow {
    char *path, *path0, *photo;
    const unsigned char *vec;
} xrow;
typedef struct xport {
    char *paths, *paths0, *photos, *vecs, *ids;
    size_t n_vecs, n_ids;
    xrow *rows;
    int n, vec_bytes;
    long hdr;
} xport;

static void xport_free(xport *x) {
    free(x->paths);
    free(x->paths0);
    free(x->photos);
    free(x->vecs);
    free(x->ids);
    free(x->rows);
    memset(x, 0, sizeof *x);
}

/* The end of an .npy header (the offset of its data), 0 when it is not one. */
static long npy_data(const char *b, size_t n) {
    const char *nl;
    if (n < 10 || memcmp(b, "\x93NUMPY", 6)) return 0;
    nl = memchr(b, '\n', n);
    return nl ? (long)(nl - b + 1) : 0;
}

/* Cuts {"id":N, from the front of a photos.jsonl line (in place). */
static char *cut_id(char *line) {
    char *comma = strchr(line, ',');
    if (strncmp(line, "{\"id\":", 6) || !comma) return line;
    *comma = '{';
    return comma;
}

/* Reads the export in dir; 0, or -1 with why printed. */
static int xport_read(const char *dir, xport *x) {
    char p[900];
    char *s;
    long hv, hi;
    memset(x, 0, sizeof *x);
    snprintf(p, sizeof p, "%s/paths.txt", dir);
    x->paths = cli_read_file(p, NULL);
    snprintf(p, sizeof p, "%s/paths0.txt", dir);
    x->paths0 = cli_read_file(p, NULL);
    snprintf(p, sizeof p, "%s/photos.jsonl", dir);
    x->photos = cli_read_file(p, NULL);
    snprintf(p, sizeof p, "%s/vectors.npy", dir);
    x->vecs = cli_read_file(p, &x->n_vecs);
    snprintf(p, sizeof p, "%s/ids.npy", dir);
    x->ids = cli_read_file(p, &x->n_ids);
    if (!x->paths || !x->paths0 || !x->photos || !x->vecs || !x->ids) {
        fprintf(stderr, "    %s: an export file is missing\n", dir);
        return -1;
    }
    for (s = x->paths; *s; s++) x->n += *s == '\n';
    if (!(hv = npy_data(x->vecs, x->n_vecs)) || !(hi = npy_data(x->ids, x->n_ids)) ||
        !(x->rows = calloc((size_t)x->n + 1, sizeof *x->rows)) ||
        (x->n && (x->n_vecs - (size_t)hv) % (size_t)x->n) ||
        x->n_ids - (size_t)hi != (size_t)x->n * 8) {
        fprintf(stderr, "    %s: %d rows, vectors.npy or ids.npy do not hold them\n", dir, x->n);
        return -1;
    }
    x->hdr = hv;
    x->vec_bytes = x->n ? (int)((x->n_vecs - (size_t)hv) / (size_t)x->n) : 0;
    {
        char *pl = x->paths, *p0 = x->paths0, *ph = x->photos;
        for (int i = 0; i < x->n; i++) {
            int64_t id, prev = 0;
            char *e = strchr(pl, '\n'), *f = ph ? strchr(ph, '\n') : NULL;
            memcpy(&id, x->ids + hi + 8 * i, 8);
            if (i) memcpy(&prev, x->ids + hi + 8 * (i - 1), 8);
            if (!e || !f || (i && id <= prev)) {
                fprintf(stderr, "    %s: row %d: short photos.jsonl, or ids not ascending\n", dir,
                        i);
                return -1;
            }
            *e = *f = '\0';
            x->rows[i].path = pl;
            x->rows[i].path0 = p0;
            x->rows[i].photo = cut_id(ph);
            x->rows[i].vec = (const unsigned char *)x->vecs + hv + (size_t)i * x->vec_bytes;
            pl = e + 1;
            ph = f + 1;
            p0 += strlen(p0) + 1;
        }
    }
    return 0;
}

static int by_row_path(const void *a, const void *b) {
    return strcmp(((const xrow *)a)->path, ((const xrow *)b)->path);
}

/* The number of differences between the exports in dirs a and b (rows in their order,
** or sorted by path): every row's path, bytes, vector and photo line. */
static int compare_exports(const char *a, const char *b, int sorted) {
    xport x, y;
    int bad = 0;
    if (xport_read(a, &x) || xport_read(b, &y)) {
        xport_free(&x);
        xport_free(&y);
        return 1;
    }
    if (x.n != y.n || x.vec_bytes != y.vec_bytes ||
        memcmp(x.vecs, y.vecs, (size_t)(x.hdr < y.hdr ? x.hdr : y.hdr))) {
        fprintf(stderr, "    %s: %d rows of %d bytes, %s: %d of %d (or headers differ)\n", a, x.n,
                x.vec_bytes, b, y.n, y.vec_bytes);
        bad++;
    }
    if (sorted) {
        qsort(x.rows, (size_t)x.n, sizeof *x.rows, by_row_path);
        qsort(y.rows, (size_t)y.n, sizeof *y.rows, by_row_path);
    }
    for (int i = 0; !bad && i < x.n; i++) {
        const xrow *r = &x.rows[i], *s = &y.rows[i];
        if (strcmp(r->path, s->path) || strcmp(r->path0, s->path0) ||
            strcmp(r->photo, s->photo) || memcmp(r->vec, s->vec, (size_t)x.vec_bytes)) {
            if (bad++ < 5)
                fprintf(stderr, "    row %d: %s | %s%s%s\n", i, r->path, s->path,
                        strcmp(r->photo, s->photo) ? " (photo metadata differs)" : "",
                        memcmp(r->vec, s->vec, (size_t)x.vec_bytes) ? " (vector differs)" : "");
        }
    }
    xport_free(&x);
    xport_free(&y);
    return bad;
}

/* The thumbnails of the database db, read straight from its files (catalog.db and
** thumbs.db, not through clipdb) as one text: a line per thumbnail, by the photo's path:
** path, content hash, size setting, pixels, bytes and an FNV-1a of the JPEG. Heap. */
static char *thumbs_text(const char *db) {
    sqlite3 *h = NULL;
    sqlite3_stmt *st = NULL;
    char p[900], line[1400], *out = calloc(1, 1);
    size_t n = 0;
    snprintf(p, sizeof p, "file:%s/catalog.db?mode=ro", db);
    if (sqlite3_open_v2(p, &h, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, NULL) != SQLITE_OK)
        goto done;
    snprintf(p, sizeof p, "ATTACH 'file:%s/thumbs.db?mode=ro' AS t", db);
    if (sqlite3_exec(h, p, NULL, NULL, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(h,
                           "SELECT CAST(r.path AS TEXT) || '/' || CAST(f.relpath AS TEXT), "
                           "hex(x.hash), x.px, x.width, x.height, x.jpeg FROM t.thumbs x "
                           "JOIN files f ON f.id = x.file_id JOIN roots r ON r.id = f.root_id "
                           "ORDER BY 1", -1, &st, NULL) != SQLITE_OK)
        goto done;
    while (sqlite3_step(st) == SQLITE_ROW) {
        const unsigned char *j = sqlite3_column_blob(st, 5);
        int nj = sqlite3_column_bytes(st, 5), k;
        uint64_t fnv = 1469598103934665603ULL;
        for (int i = 0; i < nj; i++) fnv = (fnv ^ j[i]) * 1099511628211ULL;
        k = snprintf(line, sizeof line, "%s %s %d %dx%d %d %016llx\n",
                     (const char *)sqlite3_column_text(st, 0),
                     (const char *)sqlite3_column_text(st, 1), sqlite3_column_int(st, 2),
                     sqlite3_column_int(st, 3), sqlite3_column_int(st, 4), nj,
                     (unsigned long long)fnv);
        cli_run_append_(&out, &n, line, (size_t)k);
    }
done:
    sqlite3_finalize(st);
    sqlite3_close(h);
    return out;
}

/* 0 when the databases a and b hold the same thumbnails for the same paths. */
static int compare_thumbs(const char *a, const char *b) {
    char *x = thumbs_text(a), *y = thumbs_text(b);
    int bad = !x || !y || !*x || strcmp(x, y);
    if (bad) fprintf(stderr, "    thumbnails of %s:\n%.600s\n    of %s:\n%.600s\n", a, x, b, y);
    free(x);
    free(y);
    return bad;
}

/* 0 when `clipdb errors` (quarantined files and walk problems) says the same of a and b. */
static int compare_errors(const char *a, const char *b) {
    cli_run_result x, y;
    int bad;
    cli_run((const char *[]){"errors", "--db", a, NULL}, &x);
    cli_run((const char *[]){"errors", "--db", b, NULL}, &y);
    bad = x.exit_code != y.exit_code || strcmp(x.out, y.out) || !strstr(x.out, "broken.jpg") ||
          !strstr(x.out, "dangling.jpg");
    if (bad) fprintf(stderr, "    errors of %s (%d):\n%s    of %s (%d):\n%s", a, x.exit_code, x.out,
                     b, y.exit_code, y.out);
    cli_run_free(&x);
    cli_run_free(&y);
    return bad;
}

/* ---- the library ------------------------------------------------------------------- */

/* The name of the k-th image (sorted) in dir, into out; 0, or -1 when there is none. */
static int nth_image(const char *dir, int k, char *out, size_t size) {
    DIR *d = opendir(dir);
    struct dirent *e;
    char names[64][256];
    int n = 0;
    while (d && (e = readdir(d)) && n < 64)
        if (!strncmp(e->d_name, "img_", 4)) snprintf(names[n++], sizeof names[0], "%s", e->d_name);
    if (d) closedir(d);
    qsort(names, (size_t)n, sizeof names[0], (int (*)(const void *, const void *))strcmp);
    if (k >= n) return -1;
    snprintf(out, size, "%s/%s", dir, names[k]);
    return 0;
}

/* Gives every JPEG of dir a capture time, a camera and a position (EXIF), k-th apart. */
static int add_exif(const char *dir) {
    char f[900];
    for (int k = 0; nth_image(dir, k, f, sizeof f) == 0; k++) {
        eb_meta m = {1, 2024, 5, 1 + k, 12, 30, k, 1, 120, "Canon", "EOS R5", 1, 46.5 + k,
                     7.9 - k};
        size_t n = 0;
        char *bytes;
        buf out = {0};
        if (strcmp(strrchr(f, '.'), ".jpg")) continue;
        if (!(bytes = cli_read_file(f, &n))) return -1;
        if (eb_jpeg_with_exif((const uint8_t *)bytes, n, &m, &out) != 0) {
            free(bytes);
            return -1;
        }
        write_file(f, out.p, out.n);
        free(out.p);
        free(bytes);
    }
    return 0;
}

/* r1/x, r1/x/y, r1/z and r2: generated photos under the same names; r1/x/broken.jpg;
** r3/single.<ext>, a file root. */
static int make_library(void) {
    cdb_world_library_params lp = cdb_world_library_params_default();
    char d[900], f[900];
    lp.n_threads = 2;
    CLI_PATHS(g_tmp, CLI_AT(g_r1, "lib/r1"), CLI_AT(g_r2, "lib/r2"), CLI_AT(d, "lib"));
    mkdir(d, 0755);
    mkdir(g_r1, 0755);
    snprintf(d, sizeof d, "%s/lib/r3", g_tmp);
    mkdir(d, 0755);
    static const struct {
        const char *sub;
        uint64_t seed;
        int n;
    } parts[] = {{"r1/x", 1, 6}, {"r1/x/y", 2, 5}, {"r1/z", 3, 5}, {"r1/z/a", 6, 2},
                 {"r2", 4, 7}, {"src", 5, 4}};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        snprintf(d, sizeof d, "%s/lib/%s", g_tmp, parts[i].sub);
        if (cdb_world_generate(d, parts[i].seed, 0, parts[i].n, &lp) != CDB_OK) return -1;
        snprintf(f, sizeof f, "%s/manifest.jsonl", d);
        unlink(f); /* not a photo: nothing to compare */
    }
    if (add_exif(g_r2) != 0) return -1; /* metadata to carry over: photos.jsonl shows it */
    /* r1/z/a.<ext> beside the folder r1/z/a: a walk meets r1/z/a/... first, byte order
    ** puts r1/z/a.<ext> first */
    snprintf(d, sizeof d, "%s/lib/src", g_tmp);
    if (nth_image(d, 1, f, sizeof f)) return -1;
    {
        size_t n = 0;
        char *bytes = cli_read_file(f, &n), a[900];
        snprintf(a, sizeof a, "%s/z/a%s", g_r1, strrchr(f, '.'));
        if (!bytes) return -1;
        write_file(a, bytes, n);
        free(bytes);
    }
    snprintf(f, sizeof f, "%s/x/dangling.jpg", g_r1); /* a walk problem (links followed) */
    if (symlink("nowhere.jpg", f) != 0) return -1;
    snprintf(f, sizeof f, "%s/x/broken.jpg", g_r1);
    write_file(f, "\xff\xd8\xff\xe0 not a JPEG after all", 25);
    snprintf(d, sizeof d, "%s/lib/src", g_tmp);
    if (nth_image(d, 0, f, sizeof f)) return -1;
    snprintf(g_r3, sizeof g_r3, "%s/lib/r3/single%s", g_tmp, strrchr(f, '.'));
    return rename(f, g_r3);
}

/* Overwrites a photo of r1/z with another photo's bytes of the same format: an edit. */
static int edit_one(void) {
    char z[900], src[900], a[900], b[900];
    snprintf(z, sizeof z, "%s/z", g_r1);
    snprintf(src, sizeof src, "%s/lib/src", g_tmp);
    for (int i = 0; nth_image(z, i, a, sizeof a) == 0; i++)
        for (int k = 0; nth_image(src, k, b, sizeof b) == 0; k++)
            if (!strcmp(strrchr(a, '.'), strrchr(b, '.'))) return cli_copy_file(b, a);
    return -1;
}

/* Moves within a root and across roots, an edit, a deletion and new photos. */
static int change_library(void) {
    cdb_world_library_params lp = cdb_world_library_params_default();
    char a[900], b[900], d[900];
    lp.n_threads = 2;
    snprintf(d, sizeof d, "%s/x", g_r1); /* across roots: r1/x -> r2 */
    if (nth_image(d, 1, a, sizeof a)) return -1;
    snprintf(b, sizeof b, "%s/moved%s", g_r2, strrchr(a, '.'));
    if (rename(a, b)) return -1;
    snprintf(d, sizeof d, "%s/x/y", g_r1); /* within a root, into another folder */
    if (nth_image(d, 2, a, sizeof a)) return -1;
    snprintf(b, sizeof b, "%s/z/renamed%s", g_r1, strrchr(a, '.'));
    if (rename(a, b)) return -1;
    if (nth_image(g_r2, 3, a, sizeof a) || unlink(a)) return -1; /* deleted */
    if (edit_one() != 0) return -1;
    snprintf(d, sizeof d, "%s/x/new", g_r1); /* new photos */
    if (cdb_world_generate(d, 9, 0, 3, &lp) != CDB_OK) return -1;
    snprintf(a, sizeof a, "%s/manifest.jsonl", d);
    unlink(a);
    return 0;
}

/* ---- tests ------------------------------------------------------------------------- */

static int g_ready; /* 1: the library, the single-process database and its export */

/* The library, one process's database of it (single/) and its export (single.x/). */
#define NEED_SETUP()                                                                       \
    do {                                                                                   \
        const char *m_ = cli_find_model();                                                 \
        char db_[900], x_[900];                                                            \
        if (!m_) CDB_SKIP("no model: set CLIPDB_TEST_MODEL or add models/");               \
        if (g_ready) break;                                                                \
        if (!cli_tmpdir(g_tmp, sizeof g_tmp)) CDB_TEST_FAIL_("no temporary folder");        \
        snprintf(g_model, sizeof g_model, "%s", kill_copy_model(m_, g_tmp));               \
        CHECK_MSG(make_library() == 0, "cannot make the library: %s", cdb_errmsg());       \
        snprintf(db_, sizeof db_, "%s/single", g_tmp);                                     \
        snprintf(x_, sizeof x_, "%s/single.x", g_tmp);                                     \
        CHECK_EQ_INT(run((const char *[]){"init", "--db", db_, "--model", g_model, "-q", NULL}, \
                         0), 0);                                                           \
        CHECK_EQ_INT(run((const char *[]){"ingest", "--db", db_, "--threads", "1", "--device", \
                                          "cpu", "--follow-symlinks", "-q", g_r1, g_r2, g_r3, \
                                          NULL}, 3), 3);                                   \
        CHECK_EQ_INT(export_db(db_, x_), 0);                                               \
        g_ready = 1;                                                                       \
    } while (0)

/* N = 1, 3, 8 parts, merged: the single process's export (ids normalized). */
CDB_TEST(parts_merge_equals_single_ingest) {
    NEED_SETUP();
    for (int k = 0; k < 3; k++) {
        int n = g_ns[k];
        char into[900], x[900], single[900];
        for (int i = 1; i <= n; i++) CHECK_EQ_INT(ingest_part("p", n, i), 0);
        snprintf(into, sizeof into, "%s/merged%d", g_tmp, n);
        snprintf(x, sizeof x, "%s/merged%d.x", g_tmp, n);
        snprintf(single, sizeof single, "%s/single.x", g_tmp);
        CHECK_EQ_INT(merge(into, "p", n, 0), 0);
        CHECK_EQ_INT(export_db(into, x), 0);
        CHECK_MSG(compare_exports(single, x, 0) == 0, "N=%d: the merged export differs", n);
        snprintf(single, sizeof single, "%s/single", g_tmp);
        CHECK_MSG(compare_thumbs(single, into) == 0, "N=%d: the thumbnails differ", n);
        CHECK_MSG(compare_errors(single, into) == 0, "N=%d: clipdb errors differs", n);
        CHECK_EQ_INT(run((const char *[]){"verify", "--db", into, "-q", NULL}, 0), 0);
    }
}

/* Every file is in exactly one part: the parts' files add up to the single process's,
** and with 3 parts none is empty (the hash spreads them). */
CDB_TEST(parts_split_the_files) {
    NEED_SETUP();
    char p1[900], x[900], single[900];
    int total = 0;
    xport s;
    snprintf(single, sizeof single, "%s/single.x", g_tmp);
    CHECK(xport_read(single, &s) == 0);
    for (int i = 1; i <= 3; i++) {
        xport e;
        part_dir(p1, sizeof p1, "p", 3, i);
        snprintf(x, sizeof x, "%s.x", p1);
        if (access(p1, F_OK) != 0) CHECK_EQ_INT(ingest_part("p", 3, i), 0);
        CHECK_EQ_INT(export_db(p1, x), 0);
        CHECK(xport_read(x, &e) == 0);
        CHECK_MSG(e.n > 0, "part %d/3 holds no file", i);
        total += e.n;
        xport_free(&e);
    }
    CHECK_EQ_INT(total, s.n);
    xport_free(&s);
}

/* --part is checked, and a part keeps its partition. */
CDB_TEST(part_option_is_checked) {
    NEED_SETUP();
    char db[900], p1[900];
    snprintf(db, sizeof db, "%s/badpart", g_tmp);
    part_dir(p1, sizeof p1, "p", 3, 1);
    if (access(p1, F_OK) != 0) CHECK_EQ_INT(ingest_part("p", 3, 1), 0);
    CHECK_EQ_INT(run((const char *[]){"ingest", "--db", db, "--part", "0/3", g_r2, NULL}, 2), 2);
    CHECK_EQ_INT(run((const char *[]){"ingest", "--db", db, "--part", "4/3", g_r2, NULL}, 2), 2);
    CHECK_EQ_INT(run((const char *[]){"ingest", "--db", db, "--part", "1/x", g_r2, NULL}, 2), 2);
    CHECK_EQ_INT(run((const char *[]){"reindex", "--db", p1, "--part", "2/3", "-q", NULL}, 1), 1);
    CHECK_EQ_INT(run((const char *[]){"ingest", "--db", p1, "--part", "1/4", g_r2, NULL}, 1), 1);
}

/* Runs merge of the 3 parts into into with the kill shim: killed before write `at`
** (at > 0), or counting into count_file. Its exit code. */
static int merge_shimmed(const char *into, long at, const char *count_file) {
    char parts[3][900], a[32], out[900], err[900];
    pid_t pid;
    for (int i = 1; i <= 3; i++) part_dir(parts[i - 1], sizeof parts[0], "p", 3, i);
    snprintf(a, sizeof a, "%ld", at);
    snprintf(out, sizeof out, "%s/shim.out", g_tmp);
    snprintf(err, sizeof err, "%s/shim.err", g_tmp);
    setenv("LD_PRELOAD", g_shim, 1);
    setenv("CDB_KILL_SHIM_AT", a, 1);
    if (count_file) setenv("CDB_KILL_SHIM_COUNT", count_file, 1);
    pid = cli_spawn((const char *[]){"merge", "--db", into, "-q", parts[0], parts[1], parts[2],
                                     NULL},
                    out, err);
    unsetenv("LD_PRELOAD");
    unsetenv("CDB_KILL_SHIM_AT");
    unsetenv("CDB_KILL_SHIM_COUNT");
    return pid < 0 ? -1000 : cli_wait(pid);
}

/* kill -9 at a random write of a merge, then the same merge again: the clean merge's
** export byte for byte (ids included), and verify passes. Also: a merge run twice. */
CDB_TEST(merge_survives_kill_and_reruns) {
    NEED_SETUP();
    char ref[900], refx[900], into[900], x[900], cnt[900];
    const char *e = getenv("CLIPDB_PARTS_TRIALS"), *se = getenv("CLIPDB_PARTS_SEED");
    int trials = e ? atoi(e) : 4;
    long count = 0;
    if (!g_shim[0]) CDB_SKIP("no kill shim (an ASan build)");
    for (int i = 1; i <= 3; i++) {
        part_dir(ref, sizeof ref, "p", 3, i);
        if (access(ref, F_OK) != 0) CHECK_EQ_INT(ingest_part("p", 3, i), 0);
    }
    CLI_PATHS(g_tmp, CLI_AT(ref, "kref"), CLI_AT(refx, "kref.x"), CLI_AT(cnt, "kcount"));
    CHECK_EQ_INT(merge_shimmed(ref, 0, cnt), 0);
    {
        char *c = cli_read_file(cnt, NULL);
        count = c ? atol(c) : 0;
        free(c);
    }
    CHECK_MSG(count > 10, "the clean merge made %ld writes", count);
    CHECK_EQ_INT(export_db(ref, refx), 0);
    CHECK_EQ_INT(merge(ref, "p", 3, 0), 0); /* again: nothing changes */
    snprintf(x, sizeof x, "%s/kref.again.x", g_tmp);
    CHECK_EQ_INT(export_db(ref, x), 0);
    CHECK_MSG(compare_exports(refx, x, 0) == 0, "a second merge changed the export");
    g_rng = se ? strtoull(se, NULL, 10) : (uint64_t)time(NULL) * 2654435761u + 1;
    fprintf(stderr, "    seed %llu, %ld writes, %d trials\n", (unsigned long long)g_rng, count,
            trials);
    for (int t = 0; t < trials; t++) {
        long at = 1 + (long)(rnd01() * (double)count);
        int rc;
        snprintf(into, sizeof into, "%s/kill%d", g_tmp, t);
        snprintf(x, sizeof x, "%s/kill%d.x", g_tmp, t);
        rc = merge_shimmed(into, at, NULL);
        CHECK_MSG(rc == -9 || rc == 0, "trial %d: killed at write %ld: exit %d", t, at, rc);
        CHECK_EQ_INT(merge(into, "p", 3, 0), 0);
        CHECK_EQ_INT(export_db(into, x), 0);
        CHECK_MSG(compare_exports(refx, x, 0) == 0, "trial %d (killed at write %ld of %ld): the "
                  "rerun's export differs from the clean merge's", t, at, count);
        CHECK_EQ_INT(run((const char *[]){"verify", "--db", into, "-q", NULL}, 0), 0);
        rm_rf(into);
    }
}

/* A part made with another model: refused, with a message, and nothing is written. */
CDB_TEST(merge_refuses_another_model) {
    NEED_SETUP();
    char dir[900], w[1200], other[900], into[900], before[900], after[900];
    const char *model2;
    size_t n = 0;
    char *b;
    cli_run_result r;
    snprintf(dir, sizeof dir, "%s/second", g_tmp);
    mkdir(dir, 0755);
    model2 = kill_copy_model(g_model, dir);
    snprintf(w, sizeof w, "%s/model.safetensors", model2);
    CHECK((b = cli_read_file(w, &n)) != NULL && n > 8);
    b[n - 4] ^= 1; /* another weights hash */
    write_file(w, b, n);
    free(b);
    snprintf(other, sizeof other, "%s/othermodel", g_tmp);
    CHECK_EQ_INT(run((const char *[]){"init", "--db", other, "--model", model2, "-q", NULL}, 0), 0);
    CHECK_EQ_INT(run((const char *[]){"ingest", "--db", other, "--device", "cpu", "-q", g_r3,
                                      NULL}, 0), 0);
    snprintf(into, sizeof into, "%s/merged1", g_tmp);
    if (access(into, F_OK) != 0) {
        CHECK_EQ_INT(ingest_part("p", 1, 1), 0);
        CHECK_EQ_INT(merge(into, "p", 1, 0), 0);
    }
    snprintf(before, sizeof before, "%s/refuse.before.x", g_tmp);
    snprintf(after, sizeof after, "%s/refuse.after.x", g_tmp);
    CHECK_EQ_INT(export_db(into, before), 0);
    cli_run((const char *[]){"merge", "--db", into, other, NULL}, &r);
    CHECK_MSG(r.exit_code == 1 && strstr(r.err, "same model"), "exit %d: %s", r.exit_code, r.err);
    cli_run_free(&r);
    CHECK_EQ_INT(export_db(into, after), 0);
    CHECK_MSG(compare_exports(before, after, 0) == 0, "the refused merge changed the database");
}

/* After moves, an edit, a deletion and new photos: reindex of every part, merged again
** into the database of the first merge, = one process's reindex (rows as sets). */
CDB_TEST(parts_reindex_merge_equals_single_reindex) {
    NEED_SETUP();
    char single[900], sx[900];
    for (int k = 0; k < 3; k++) { /* the merged databases of the first test, made if needed */
        char into[900];
        int n = g_ns[k];
        snprintf(into, sizeof into, "%s/merged%d", g_tmp, n);
        for (int i = 1; i <= n; i++) {
            char p[900];
            part_dir(p, sizeof p, "p", n, i);
            if (access(p, F_OK) != 0) CHECK_EQ_INT(ingest_part("p", n, i), 0);
        }
        if (access(into, F_OK) != 0) CHECK_EQ_INT(merge(into, "p", n, 0), 0);
    }
    CHECK_MSG(change_library() == 0, "cannot change the library (%s)", strerror(errno));
    snprintf(single, sizeof single, "%s/single", g_tmp);
    snprintf(sx, sizeof sx, "%s/single.reindexed.x", g_tmp);
    {
        int rc = run((const char *[]){"reindex", "--db", single, "--threads", "1", "--device",
                                      "cpu", "-q", NULL}, DONE);
        CHECK_MSG(rc == 0 || rc == 3, "reindex of the single database: exit %d", rc);
    }
    CHECK_EQ_INT(export_db(single, sx), 0);
    for (int k = 0; k < 3; k++) {
        int n = g_ns[k];
        char into[900], x[900];
        for (int i = 1; i <= n; i++) {
            char p[900];
            int rc;
            part_dir(p, sizeof p, "p", n, i);
            rc = run((const char *[]){"reindex", "--db", p, "--threads", "1", "--device", "cpu",
                                      "-q", NULL}, DONE);
            CHECK_MSG(rc == 0 || rc == 3, "reindex of part %d/%d: exit %d", i, n, rc);
        }
        snprintf(into, sizeof into, "%s/merged%d", g_tmp, n);
        snprintf(x, sizeof x, "%s/merged%d.reindexed.x", g_tmp, n);
        CHECK_EQ_INT(merge(into, "p", n, 0), 0);
        CHECK_EQ_INT(export_db(into, x), 0);
        CHECK_MSG(compare_exports(sx, x, 1) == 0, "N=%d: after the reindex, the merged export "
                  "differs from one process's", n);
        CHECK_MSG(compare_thumbs(single, into) == 0, "N=%d: after the reindex, the thumbnails "
                  "differ", n);
        CHECK_EQ_INT(run((const char *[]){"verify", "--db", into, "-q", NULL}, 0), 0);
    }
}

/* ---- nested roots, refusals, counts ------------------------------------------------ */

/* init + ingest of whole roots (no partition) into g_tmp/name (path into db); 0 or the
** failure. */
static int ingest_whole(const char *name, const char *const *roots, char *db, size_t size) {
    const char *args[16] = {"ingest", "--db", db, "--threads", "1", "--device", "cpu",
                            "--follow-symlinks", "-q"};
    int k = 9, rc;
    snprintf(db, size, "%s/%s", g_tmp, name);
    if ((rc = run((const char *[]){"init", "--db", db, "--model", g_model, "-q", NULL}, 0)))
        return rc;
    while (*roots && k < 15) args[k++] = *roots++;
    args[k] = NULL;
    rc = run(args, DONE);
    return rc == 0 || rc == 3 ? 0 : rc;
}

/* merge --db into parts[0..n), then its export at into.x compared with the export at
** want (rows sorted by path when sorted), clipdb errors and thumbnails with the database
** want_db, and verify: the number of differences. */
static int merge_and_compare(const char *into, const char *const *parts, int n,
                             const char *want, const char *want_db, int sorted) {
    const char *args[12] = {"merge", "--db", into, "-q"};
    char x[900];
    int bad = 0;
    for (int i = 0; i < n; i++) args[4 + i] = parts[i];
    args[4 + n] = NULL;
    snprintf(x, sizeof x, "%s.x", into);
    if (run(args, 0) != 0 || export_db(into, x) != 0) return 1;
    bad += compare_exports(want, x, sorted) != 0;
    bad += compare_thumbs(want_db, into) != 0;
    if (!sorted) bad += compare_errors(want_db, into) != 0;
    bad += run((const char *[]){"verify", "--db", into, "-q", NULL}, 0) != 0;
    return bad;
}

/* Nested roots: one process's ingest of r1 (the oracle, g_one, its export g_onex) and
** parts whose roots nest: A: r1; B: r1/x; C: r1/z and r1/x/y. Made once; 0 when ready. */
static char g_one[900], g_onex[900], g_pa[900], g_pb[900], g_pc[900], g_x1[900], g_y1[900],
    g_z1[900];
static int g_nested_ready;

static int nested_setup(void) {
    if (g_nested_ready) return 0;
    snprintf(g_x1, sizeof g_x1, "%s/x", g_r1);
    snprintf(g_y1, sizeof g_y1, "%s/x/y", g_r1);
    snprintf(g_z1, sizeof g_z1, "%s/z", g_r1);
    if (ingest_whole("n.one", (const char *[]){g_r1, NULL}, g_one, sizeof g_one) ||
        export_db(g_one, strcat(strcpy(g_onex, g_one), ".x")) ||
        ingest_whole("n.a", (const char *[]){g_r1, NULL}, g_pa, sizeof g_pa) ||
        ingest_whole("n.b", (const char *[]){g_x1, NULL}, g_pb, sizeof g_pb) ||
        ingest_whole("n.c", (const char *[]){g_z1, g_y1, NULL}, g_pc, sizeof g_pc))
        return -1;
    g_nested_ready = 1;
    return 0;
}

/* The nested parts merged in several orders: what one process's ingest of r1 exports
** (ids too), its thumbnails and errors; verify passes (no file under two roots). */
CDB_TEST(merge_nested_roots_equal_single_ingest) {
    static const char *const orders[4] = {"ab", "ba", "cba", "acb"};
    char into[900];
    NEED_SETUP();
    CHECK(nested_setup() == 0);
    for (int k = 0; k < 4; k++) {
        const char *parts[3];
        int n = 0;
        for (const char *o = orders[k]; *o; o++)
            parts[n++] = *o == 'a' ? g_pa : *o == 'b' ? g_pb : g_pc;
        snprintf(into, sizeof into, "%s/n.merged.%s", g_tmp, orders[k]);
        CHECK_MSG(merge_and_compare(into, parts, n, g_onex, g_one, 0) == 0,
                  "parts in the order %s: the merge is not one ingest of %s", orders[k], g_r1);
    }
}

/* A database holding r1/x takes in the part of r1 (the part's root takes the database's
** over), and one holding r1 takes in the parts of r1/x, r1/z and r1/x/y (they go into
** its root): each what one process's ingest of r1 exports (rows by path: the
** database's own rows keep their ids). */
CDB_TEST(merge_nested_roots_into_a_database) {
    char t[900];
    NEED_SETUP();
    CHECK(nested_setup() == 0);
    CHECK_EQ_INT(ingest_whole("t.inner", (const char *[]){g_x1, NULL}, t, sizeof t), 0);
    CHECK_MSG(merge_and_compare(t, (const char *[]){g_pa}, 1, g_onex, g_one, 1) == 0,
              "a part of %s into a database of %s", g_r1, g_x1);
    CHECK_EQ_INT(ingest_whole("t.outer", (const char *[]){g_r1, NULL}, t, sizeof t), 0);
    CHECK_MSG(merge_and_compare(t, (const char *[]){g_pb, g_pc}, 2, g_onex, g_one, 1) == 0,
              "parts of %s, %s and %s into a database of %s", g_x1, g_z1, g_y1, g_r1);
}

/* A catalog that records r1/x/y inside r1/x, its files under both (the state an older
** merge left; made here in SQL): verify lists each of them as file-twice. The oracle:
** the rows the test made. */
CDB_TEST(verify_reports_files_under_two_roots) {
    NEED_SETUP();
    char x1[900], y1[900], db[900], sql[2400], p[900];
    sqlite3 *h = NULL;
    sqlite3_stmt *st = NULL;
    cli_run_result r;
    int n = 0, listed = 0;
    snprintf(x1, sizeof x1, "%s/x", g_r1);
    snprintf(y1, sizeof y1, "%s/x/y", g_r1);
    CHECK_EQ_INT(ingest_whole("twice", (const char *[]){x1, NULL}, db, sizeof db), 0);
    CHECK_EQ_INT(run((const char *[]){"verify", "--db", db, "-q", NULL}, 0), 0);
    snprintf(p, sizeof p, "%s/catalog.db", db);
    CHECK(sqlite3_open(p, &h) == SQLITE_OK);
    snprintf(sql, sizeof sql,
             "INSERT INTO roots(path, created_ns) VALUES(CAST('%s' AS BLOB), 1);"
             "INSERT INTO files(root_id, relpath, size, mtime_ns, hash, width, height, state,"
             " error, shard, created_ns, updated_ns) SELECT (SELECT id FROM roots WHERE"
             " path = CAST('%s' AS BLOB)), CAST(substr(CAST(relpath AS TEXT), 3) AS BLOB), size,"
             " mtime_ns, hash, width, height, state, error, shard, created_ns, updated_ns"
             " FROM files WHERE CAST(relpath AS TEXT) LIKE 'y/%%' AND state = 2;",
             y1, y1);
    CHECK_MSG(sqlite3_exec(h, sql, NULL, NULL, NULL) == SQLITE_OK, "%s", sqlite3_errmsg(h));
    CHECK(sqlite3_prepare_v2(h, "SELECT count(*) FROM files f JOIN roots r ON r.id = f.root_id"
                                " WHERE CAST(r.path AS TEXT) LIKE '%/x/y'", -1, &st, NULL) ==
          SQLITE_OK);
    if (sqlite3_step(st) == SQLITE_ROW) n = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(h);
    CHECK_MSG(n >= 2, "%d rows made under two roots", n);
    cli_run((const char *[]){"verify", "--db", db, NULL}, &r);
    for (const char *s = r.out; (s = strstr(s, "file-twice: ")); s++) {
        char want[900];
        snprintf(want, sizeof want, "file-twice: %s/", y1);
        listed += !strncmp(s, want, strlen(want));
    }
    CHECK_MSG(r.exit_code == 1 && listed == n, "verify: exit %d, %d of %d files listed as "
              "recorded twice:\n%s", r.exit_code, listed, n, r.out);
    cli_run_free(&r);
}

/* Refused merges create nothing at --db: the same part twice, a part that is not a
** database, a part whose shard is missing (named in the message). */
CDB_TEST(merge_refused_creates_nothing) {
    NEED_SETUP();
    char a[900], into[900], empty[900], ms[900], sh[900];
    cli_run_result r;
    snprintf(into, sizeof into, "%s/refused", g_tmp);
    snprintf(a, sizeof a, "%s/r.a", g_tmp);
    CHECK_EQ_INT(ingest_whole("r.a", (const char *[]){g_r3, NULL}, a, sizeof a), 0);
    cli_run((const char *[]){"merge", "--db", into, a, a, NULL}, &r);
    CHECK_MSG(r.exit_code == 1 && strstr(r.err, "same database"), "exit %d: %s", r.exit_code,
              r.err);
    cli_run_free(&r);
    CHECK_MSG(access(into, F_OK) != 0, "the refused merge (a part twice) created %s", into);
    snprintf(empty, sizeof empty, "%s/r.empty", g_tmp);
    mkdir(empty, 0755);
    cli_run((const char *[]){"merge", "--db", into, a, empty, NULL}, &r);
    CHECK_MSG(r.exit_code != 0 && strstr(r.err, "r.empty"), "exit %d: %s", r.exit_code, r.err);
    cli_run_free(&r);
    CHECK_MSG(access(into, F_OK) != 0, "the refused merge (not a database) created %s", into);
    CHECK_EQ_INT(ingest_whole("r.noshard", (const char *[]){g_r2, NULL}, ms, sizeof ms), 0);
    snprintf(sh, sizeof sh, "%s/shards/0001.db", ms);
    CHECK_MSG(access(sh, F_OK) == 0, "no shard 0001 in %s", ms);
    rm_rf(sh);
    cli_run((const char *[]){"merge", "--db", into, a, ms, NULL}, &r);
    CHECK_MSG(r.exit_code == 1 && strstr(r.err, "shards/0001.db") && !strstr(r.err, "norm"),
              "exit %d: %s", r.exit_code, r.err);
    cli_run_free(&r);
    CHECK_MSG(access(into, F_OK) != 0, "the refused merge (a shard missing) created %s", into);
}

/* The value of "key": N in a JSON text, or -1. */
static long long json_count(const char *js, const char *key) {
    char k[64];
    const char *s;
    snprintf(k, sizeof k, "\"%s\": ", key);
    return (s = strstr(js, k)) ? atoll(s + strlen(k)) : -1;
}

/* Two whole copies of one library merged: the report counts each file once, as many as
** the result's export holds (the oracle), merged again into it too. */
CDB_TEST(merge_of_copies_counts_each_file_once) {
    NEED_SETUP();
    char c1[900], c2[900], into[900], x[900];
    const char *parts[3];
    xport e;
    CHECK_EQ_INT(ingest_whole("copy1", (const char *[]){g_r2, NULL}, c1, sizeof c1), 0);
    CHECK_EQ_INT(ingest_whole("copy2", (const char *[]){g_r2, NULL}, c2, sizeof c2), 0);
    snprintf(into, sizeof into, "%s/copies", g_tmp);
    snprintf(x, sizeof x, "%s/copies.x", g_tmp);
    parts[0] = c1;
    parts[1] = c2;
    for (int round = 0; round < 2; round++) {
        cli_run_result r;
        cli_run((const char *[]){"merge", "--db", into, "--json", parts[0], parts[1], NULL}, &r);
        CHECK_MSG(r.exit_code == 0, "exit %d: %s", r.exit_code, r.err);
        rm_rf(x);
        CHECK_EQ_INT(export_db(into, x), 0);
        CHECK(xport_read(x, &e) == 0);
        CHECK_MSG(e.n > 1 && json_count(r.out, "files") == e.n &&
                      json_count(r.out, "vectors") == e.n,
                  "round %d: the result holds %d files; the merge said %s", round, e.n, r.out);
        xport_free(&e);
        cli_run_free(&r);
    }
}

/* A photo moved from part 1's share to part 2's between the two parts' ingests (an array's
** tasks run at different times) is held by both parts, at its old path and its new one.
** The merge keeps it once, at the path the disk has it at: the merged export equals a
** single ingest of the folder as it is (the oracle). When the disk has it at neither
** path (moved on again), nothing confirms either row: both stay (nothing is deleted on
** a guess), and verify --deep reports them gone. */
CDB_TEST(merge_keeps_a_photo_moved_between_parts_once) {
    NEED_SETUP();
    char lib[900], p1[900], p2[900], into[900], single[900], from[1100], to[1100], last[1100];
    char xm[910], xs[910];
    xport a;
    cli_run_result r;
    int k = 0, found = -1;
    snprintf(lib, sizeof lib, "%s/moving", g_tmp);
    CHECK(mkdir(lib, 0755) == 0);
    for (int i = 0; i < 6 && nth_image(g_r2, i, from, sizeof from) == 0; i++) {
        snprintf(to, sizeof to, "%s/%s", lib, strrchr(from, '/') + 1);
        CHECK(cli_copy_file(from, to) == 0);
        if (found < 0 && cdb_db_part_of(lib, strrchr(from, '/') + 1, 2) == 1) found = i;
    }
    CHECK_MSG(found >= 0, "no photo in part 1's share");
    snprintf(p1, sizeof p1, "%s/moving1", g_tmp);
    snprintf(p2, sizeof p2, "%s/moving2", g_tmp);
    for (int i = 0; i < 2; i++)
        CHECK_EQ_INT(run((const char *[]){"init", "--db", i ? p2 : p1, "--model", g_model, "-q",
                                          NULL}, 0), 0);
    CHECK_EQ_INT(run((const char *[]){"ingest", "--db", p1, "--part", "1/2", "--threads", "1",
                                      "--device", "cpu", "-q", lib, NULL}, 0), 0);
    nth_image(lib, found, from, sizeof from);
    do /* a new name in part 2's share */
        snprintf(to, sizeof to, "%s/moved_%d%s", lib, k++, strrchr(from, '.'));
    while (cdb_db_part_of(lib, strrchr(to, '/') + 1, 2) != 2);
    CHECK(rename(from, to) == 0);
    CHECK_EQ_INT(run((const char *[]){"ingest", "--db", p2, "--part", "2/2", "--threads", "1",
                                      "--device", "cpu", "-q", lib, NULL}, 0), 0);
    snprintf(into, sizeof into, "%s/moving.m", g_tmp);
    CHECK_EQ_INT(run((const char *[]){"merge", "--db", into, "-q", p1, p2, NULL}, 0), 0);
    CHECK_EQ_INT(ingest_whole("moving.s", (const char *[]){lib, NULL}, single, sizeof single), 0);
    snprintf(xm, sizeof xm, "%s.x", into);
    snprintf(xs, sizeof xs, "%s.x", single);
    CHECK(export_db(into, xm) == 0 && export_db(single, xs) == 0 && xport_read(xm, &a) == 0);
    CHECK_MSG(a.n == 6, "the merge holds %d photos, the disk 6", a.n);
    xport_free(&a);
    CHECK_EQ_INT(compare_exports(xm, xs, 1), 0);
    CHECK_EQ_INT(run((const char *[]){"verify", "--db", into, "-q", NULL}, 0), 0);
    /* moved on again before the merge: neither recorded path is there */
    rm_rf(into);
    snprintf(last, sizeof last, "%s/elsewhere%s", g_tmp, strrchr(from, '.'));
    CHECK(rename(to, last) == 0);
    CHECK_EQ_INT(run((const char *[]){"merge", "--db", into, "-q", p1, p2, NULL}, 0), 0);
    rm_rf(xm);
    CHECK(export_db(into, xm) == 0 && xport_read(xm, &a) == 0);
    CHECK_MSG(a.n == 7, "the merge holds %d photos: want both rows kept (7)", a.n);
    xport_free(&a);
    cli_run((const char *[]){"verify", "--db", into, "--deep", NULL}, &r);
    CHECK_MSG(r.exit_code == 0 && strstr(r.out, " 2 gone"), "verify --deep: exit %d:\n%s",
              r.exit_code, r.out); /* the file's two recorded paths */
    cli_run_free(&r);
}

CDB_TEST_MAIN_TMP(g_tmp, rm_rf, parts_merge_equals_single_ingest, parts_split_the_files,
                  part_option_is_checked, merge_survives_kill_and_reruns,
                  merge_refuses_another_model, merge_nested_roots_equal_single_ingest,
                  merge_nested_roots_into_a_database, verify_reports_files_under_two_roots,
                  merge_refused_creates_nothing, merge_of_copies_counts_each_file_once,
                  merge_keeps_a_photo_moved_between_parts_once,
                  parts_reindex_merge_equals_single_reindex)
