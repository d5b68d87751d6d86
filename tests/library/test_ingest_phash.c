/*
** test_ingest_phash.c: ingest stores each photo's perceptual hash from its own decode
** (issue 28: no second read, and no reindex needed before near copies collapse), and
** the hash it stores is the one the backfill (reindex) computes for the same file.
**
** The oracles, independent of the engine's code: a JPEG's hash (encoder.h: its DC hash)
** from libjpeg's own 1/8 decode into YCbCr (its luma plane is the DC terms as libjpeg's
** 1x1 IDCT gives them), oriented here as the EXIF tag the test wrote says, then
** cdb_image_phash; any other file's from a fast decode to 64 pixels (EXIF applied) and
** cdb_image_phash. The library: generated world photos (JPEG and PNG), P6 pictures with
** their half-size copies, and JPEGs written here (baseline and progressive, 4:2:0 and
** 4:4:4, colour and gray, one with EXIF orientation 6) of three pictures with near
** copies (half size at q=75, recompressed at q=60). Both decodes (--decode fast, and
** exact, the default) store every file's hash. Right after the exact ingest a collapsed
** search shows each picture's copies; then the catalog is put back to schema 9 (whose
** JPEG hashes were another definition): the migration clears them, the reindex
** recomputes them, and each equals what the ingest stored. Fails on a build whose ingest
** does not ask its decode for the DC hash (the stored hashes are short or another
** definition's, the copies are not collapsed).
*/
#include <limits.h>
#include <stdio.h>

#include <sqlite3.h>

#include "db/db.h"
#include "encoder/encoder.h"
#include "engine/engine.h"
#include "jpeg_test_util.h"
#include "lib_util.h"

enum { N_PIC = 3, N_FILES = 12 + 8 + 3 * N_PIC + 3 };

/* ---- JPEGs written and read through libjpeg itself --------------------------------- */

/* rgb (w x h, 3 channels) as a JPEG of quality q at path: gray (one component, the
** luma) when gray, as flags say (jpeg_test_util.h). */
static int write_jpeg(const char *path, const unsigned char *rgb, int w, int h, int q, int gray,
                      int flags) {
    unsigned char *luma = gray ? malloc((size_t)w * (size_t)h) : NULL, *b;
    unsigned long n = 0;
    int rc;
    if (gray && !luma) return -1;
    for (size_t i = 0; luma && i < (size_t)w * (size_t)h; i++)
        luma[i] = (unsigned char)((299 * rgb[3 * i] + 587 * rgb[3 * i + 1] +
                                   114 * rgb[3 * i + 2] + 500) / 1000);
    b = cdb_test_jpeg_of(gray ? luma : rgb, w, h, gray ? 1 : 3, q, flags, &n);
    rc = b ? lu_write(path, b, n) : -1;
    free(b);
    free(luma);
    return rc;
}

/* The oracle of a YCbCr or gray JPEG's hash (buf, n bytes; orient: its EXIF
** orientation, 1 or 6): libjpeg's 1/8 decode without colour conversion, its first
** plane, rotated 90 degrees clockwise for 6 (PIL's exif_transpose), cdb_image_phash. */
static int oracle_jpeg(const unsigned char *buf, size_t n, int orient, uint64_t *out) {
    struct jpeg_decompress_struct d;
    struct jpeg_error_mgr err;
    cdb_image *img = NULL;
    unsigned char *px = NULL;
    int rc = -1, w, h, nc;
    d.err = jpeg_std_error(&err);
    jpeg_create_decompress(&d);
    jpeg_mem_src(&d, buf, (unsigned long)n);
    jpeg_read_header(&d, TRUE);
    d.out_color_space = d.jpeg_color_space; /* YCbCr or gray: as stored */
    d.scale_num = 1;
    d.scale_denom = 8;
    jpeg_start_decompress(&d);
    w = (int)d.output_width, h = (int)d.output_height, nc = d.output_components;
    if ((px = malloc((size_t)w * h * nc))) {
        while (d.output_scanline < d.output_height) {
            JSAMPROW r = px + (size_t)d.output_scanline * w * nc;
            jpeg_read_scanlines(&d, &r, 1);
        }
        img = calloc(1, sizeof *img);
        unsigned char *luma = img ? malloc((size_t)w * h) : NULL;
        if (luma) {
            int ow = orient == 6 ? h : w, oh = orient == 6 ? w : h;
            for (int y = 0; y < oh; y++)
                for (int x = 0; x < ow; x++) /* 6: out(x, y) = in(y, h - 1 - x) */
                    luma[(size_t)y * ow + x] =
                        orient == 6 ? px[((size_t)(h - 1 - x) * w + y) * nc]
                                    : px[((size_t)y * w + x) * nc];
            img->width = ow, img->height = oh, img->channels = 1, img->bits = 8;
            img->pixels = luma;
            rc = cdb_image_phash(img, out) == CDB_OK ? 0 : -1;
            free(luma);
        }
        free(img);
    }
    jpeg_finish_decompress(&d);
    jpeg_destroy_decompress(&d);
    free(px);
    return rc;
}

/* The oracle of any other file's hash: a fast decode to 64 pixels, cdb_image_phash. */
static int oracle_other(const unsigned char *buf, size_t n, uint64_t *out) {
    cdb_image_params ip = cdb_image_params_default();
    cdb_image *img = NULL;
    int rc;
    ip.decode = CDB_DECODE_FAST;
    ip.target_size = 64;
    rc = cdb_image_decode(buf, n, &ip, &img) == CDB_OK && cdb_image_phash(img, out) == CDB_OK
             ? 0 : -1;
    cdb_image_free(img);
    return rc;
}

/* ---- the catalog's rows against the oracles ----------------------------------------- */

typedef struct seen {
    cdb_engine *e;
    int n, n_phash, n_jpeg, wrong;
    int64_t ids[64];
    uint64_t ph[64]; /* the hashes stored, by row */
} seen;

static int check_row(const cdb_db_photo *r, void *ud) {
    seen *s = ud;
    cdb_engine_file f;
    size_t n = 0;
    unsigned char *buf;
    uint64_t want = 0;
    int ok;
    if (s->n < 64) s->ids[s->n] = r->file_id, s->ph[s->n] = r->phash;
    s->n++;
    s->n_phash += r->has_phash;
    if (cdb_engine_file_get(s->e, r->file_id, &f) != CDB_OK) return s->wrong++, 0;
    buf = (unsigned char *)cli_read_file(f.path, &n);
    if (strstr(f.path, ".jpg")) {
        s->n_jpeg++;
        ok = buf && !oracle_jpeg(buf, n, strstr(f.path, "_rot6") ? 6 : 1, &want);
    } else {
        ok = buf && !oracle_other(buf, n, &want);
    }
    if (!ok || !r->has_phash || r->phash != want) {
        fprintf(stderr, "    %s: stored %d %016llx, oracle %016llx\n", f.path, r->has_phash,
                (unsigned long long)r->phash, (unsigned long long)want);
        s->wrong++;
    }
    free(buf);
    cdb_engine_file_clear(&f);
    return 0;
}

/* Every row of db checked against the oracles into *s (s->e open on db). */
static int check_db(const char *db, seen *s) {
    cdb_db *d = NULL;
    cdb_db_params dp = cdb_db_params_default();
    dp.readonly = 1;
    if (cdb_db_open(db, &dp, &d) != CDB_OK) return -1;
    int rc = cdb_db_photos_foreach(d, 1, check_row, s) == CDB_OK ? 0 : -1;
    cdb_db_close(d);
    return rc;
}

/* The library: world photos, P6 pictures with half-size copies, JPEG pictures with
** near copies (pic<i>.jpg, pic<i>_half.jpg, pic<i>_q60.jpg) and three more JPEGs. */
static int make_library(const char *root) {
    char p[PATH_MAX + 64];
    if (lu_generate(root, 28, 0, 12)) return -1;
    for (int i = 0; i < 4; i++) {
        size_t n = 0;
        unsigned char *b = lu_ppm(192 + 8 * i, 144, 40 + (uint64_t)i, &n);
        snprintf(p, sizeof p, "%s/pic%d.ppm", root, i);
        if (!b || lu_write(p, b, n)) return free(b), -1;
        free(b);
        b = lu_ppm(96 + 4 * i, 72, 40 + (uint64_t)i, &n);
        snprintf(p, sizeof p, "%s/pic%d_small.ppm", root, i);
        if (!b || lu_write(p, b, n)) return free(b), -1;
        free(b);
    }
    for (int i = 0; i < N_PIC + 1; i++) {
        size_t n = 0, hl;
        int w = 640, h = 480;
        unsigned char *b = lu_ppm(w, h, 70 + 13 * (uint64_t)i, &n), *half;
        if (!b) return -1;
        hl = n - (size_t)w * h * 3;
        if (i == N_PIC) { /* gray, progressive, rotated: three more, no copies */
            snprintf(p, sizeof p, "%s/more_gray.jpg", root);
            int rc = write_jpeg(p, b + hl, w, h, 85, 1, 0);
            snprintf(p, sizeof p, "%s/more_prog.jpg", root);
            rc |= write_jpeg(p, b + hl, w, h, 85, 0, CDB_TJ_PROGRESSIVE);
            snprintf(p, sizeof p, "%s/more_rot6.jpg", root);
            rc |= write_jpeg(p, b + hl, w, h - 8, 85, 0, CDB_TJ_PROGRESSIVE | CDB_TJ_ROTATED);
            free(b);
            if (rc) return -1;
            continue;
        }
        half = malloc((size_t)w * h * 3 / 4);
        for (int y = 0; half && y < h / 2; y++) /* 2x2 averages */
            for (int x = 0; x < w / 2; x++)
                for (int c = 0; c < 3; c++) {
                    const unsigned char *q = b + hl + 3 * ((size_t)2 * y * w + 2 * x) + c;
                    half[3 * ((size_t)y * (w / 2) + x) + c] =
                        (unsigned char)((q[0] + q[3] + q[3 * w] + q[3 * w + 3] + 2) / 4);
                }
        int rc = !half;
        snprintf(p, sizeof p, "%s/pic%d.jpg", root, i);
        rc |= rc || write_jpeg(p, b + hl, w, h, 92, 0, i == 1 ? CDB_TJ_PROGRESSIVE : 0);
        snprintf(p, sizeof p, "%s/pic%d_half.jpg", root, i);
        rc |= rc || write_jpeg(p, half, w / 2, h / 2, 75, 0, CDB_TJ_444);
        snprintf(p, sizeof p, "%s/pic%d_q60.jpg", root, i);
        rc |= rc || write_jpeg(p, b + hl, w, h, 60, 0, i == 2 ? CDB_TJ_PROGRESSIVE : 0);
        free(half);
        free(b);
        if (rc) return -1;
    }
    return 0;
}

/* The id of path in e's catalog (a search by the photo itself finds it first). */
static int64_t id_of(cdb_engine *e, const char *path) {
    cdb_engine_query q;
    cdb_engine_search_params sp = cdb_engine_search_params_default();
    cdb_engine_result r;
    int64_t id = 0;
    memset(&q, 0, sizeof q);
    q.image_paths = &path;
    q.n_image_paths = 1;
    sp.k = N_FILES;
    if (cdb_engine_search(e, &q, &sp, &r) != CDB_OK) return 0;
    for (int i = 0; i < r.n && !id; i++)
        if (!strcmp(r.hits[i].path, path)) id = r.hits[i].id;
    cdb_engine_result_free(&r);
    return id;
}

/* 1 when a collapsed search for pic<i>.jpg shows its two copies with it, in one hit. */
static int copies_collapsed(cdb_engine *e, const char *root, int i) {
    char p[3][PATH_MAX + 64];
    int64_t ids[3];
    cdb_engine_query q;
    cdb_engine_search_params sp = cdb_engine_search_params_default();
    cdb_engine_result r;
    const char *img = p[0];
    int ok = 0;
    snprintf(p[0], sizeof p[0], "%s/pic%d.jpg", root, i);
    snprintf(p[1], sizeof p[1], "%s/pic%d_half.jpg", root, i);
    snprintf(p[2], sizeof p[2], "%s/pic%d_q60.jpg", root, i);
    for (int k = 0; k < 3; k++)
        if (!(ids[k] = id_of(e, p[k]))) return 0;
    memset(&q, 0, sizeof q);
    q.image_paths = &img;
    q.n_image_paths = 1;
    sp.k = N_FILES;
    sp.collapse = 1;
    if (cdb_engine_search(e, &q, &sp, &r) != CDB_OK) return 0;
    for (int h = 0; h < r.n && !ok; h++) {
        int in = 0;
        for (int k = 0; k < 3; k++) {
            in += r.hits[h].id == ids[k];
            for (int c = 0; c < r.hits[h].n_copies; c++) in += r.hits[h].copies[c] == ids[k];
        }
        ok = in == 3 && r.hits[h].n_copies == 2;
        if (in && !ok)
            fprintf(stderr, "    pic%d: a hit with %d of its 3 files, %d copies\n", i, in,
                    r.hits[h].n_copies);
        if (in) break;
    }
    cdb_engine_result_free(&r);
    return ok;
}

/* Puts db's catalog back to schema 9 (what a database of the previous build says). */
static int back_to_v9(const char *db) {
    char cat[PATH_MAX + 16];
    sqlite3 *s = NULL;
    int rc;
    snprintf(cat, sizeof cat, "%s/catalog.db", db);
    rc = sqlite3_open(cat, &s) == SQLITE_OK &&
                 sqlite3_exec(s, "UPDATE meta SET value=9 WHERE key='schema_version'", NULL, NULL,
                              NULL) == SQLITE_OK
             ? 0 : -1;
    sqlite3_close(s);
    return rc;
}

CDB_TEST(ingest_stores_the_phash_of_its_decode) {
    LU_NEED_SETUP();
    char root[PATH_MAX], db[PATH_MAX];
    lu_path(root, sizeof root, "photos");
    CHECK_EQ_INT(make_library(root), 0);
    for (int fast = 1; fast >= 0; fast--) {
        seen s, again;
        memset(&s, 0, sizeof s);
        lu_path(db, sizeof db, fast ? "fast.db" : "exact.db");
        CHECK_EQ_INT(lu_init(db), 0);
        CHECK_EQ_INT(lu_expect((const char *[]){"ingest", "--db", db, root, "--decode",
                                                fast ? "fast" : "exact", "--quiet", NULL},
                               0, NULL),
                     0);
        CHECK_OK(cdb_engine_open(db, NULL, &s.e));
        CHECK_EQ_INT(check_db(db, &s), 0);
        CHECK_EQ_INT(s.n, N_FILES);
        CHECK_EQ_INT(s.n_phash, N_FILES); /* every one stored by the ingest itself */
        CHECK_EQ_INT(s.wrong, 0);
        CHECK(s.n_jpeg >= 3 * N_PIC + 3);
        for (int i = 0; i < N_PIC; i++) /* right after the ingest: no reindex */
            CHECK_MSG(copies_collapsed(s.e, root, i), "pic%d's copies not collapsed", i);
        cdb_engine_close(s.e);
        if (fast) continue;
        /* a schema-9 catalog: its JPEG hashes cleared, the reindex computes them again */
        CHECK_EQ_INT(back_to_v9(db), 0);
        { /* a writer migrates it: the JPEGs' rows count as missing */
            cdb_db *d = NULL;
            int64_t *missing = NULL, n_missing = 0;
            CHECK_OK(cdb_db_open(db, NULL, &d));
            CHECK_OK(cdb_db_photos_missing(d, 0, &missing, &n_missing));
            CHECK_EQ_INT(n_missing, s.n_jpeg);
            cdb_free(missing);
            cdb_db_close(d);
        }
        CHECK_EQ_INT(lu_expect((const char *[]){"reindex", "--db", db, "--quiet", NULL}, 0, NULL),
                     0);
        memset(&again, 0, sizeof again);
        CHECK_OK(cdb_engine_open(db, NULL, &again.e));
        CHECK_EQ_INT(check_db(db, &again), 0);
        CHECK_EQ_INT(again.n_phash, N_FILES);
        CHECK_EQ_INT(again.wrong, 0);
        for (int i = 0; i < again.n && i < 64; i++) { /* the backfill's equals the ingest's */
            int k = 0;
            while (k < s.n && s.ids[k] != again.ids[i]) k++;
            CHECK(k < s.n && s.ph[k] == again.ph[i]);
        }
        cdb_engine_close(again.e);
    }
}

CDB_TEST_MAIN(ingest_stores_the_phash_of_its_decode)
