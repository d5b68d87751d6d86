/*
** test_ingest_phash.c: ingest stores each photo's perceptual hash from its own decode
** where that decode is the phash's (issue 28: no second read, and no reindex needed
** before near copies collapse), and the hash it stores is the one a fresh decode gives.
** The oracle: each file's bytes decoded here through the encoder's API with the phash's
** definition (a fast decode to 64 pixels, EXIF applied, cdb_image_phash), independent of
** the engine's code. The library: generated world photos (JPEG and PNG) and P6 pictures
** with their half-size copies, ingested with the bundled model (input 64 pixels). With
** --decode fast every one of these is decoded as the phash decodes it: all stored. With
** the exact decode (the default) a JPEG's full-size pixels are not the phash's 1/8 DCT
** decode: its phash is left to the reindex, which then stores the same hash.
*/
#include <limits.h>

#include "db/db.h"
#include "encoder/encoder.h"
#include "engine/engine.h"
#include "lib_util.h"

typedef struct seen {
    cdb_engine *e;
    int n, n_phash, n_jpeg, wrong;
    int jpeg_left;         /* 1: JPEGs must have no phash (the exact decode) */
} seen;

/* Checks one catalog row against the file's own bytes. */
static int check_row(const cdb_db_photo *r, void *ud) {
    seen *s = ud;
    cdb_engine_file f;
    size_t n = 0;
    unsigned char *buf;
    cdb_image_params ip = cdb_image_params_default();
    cdb_image *img = NULL;
    uint64_t want = 0;
    s->n++;
    s->n_phash += r->has_phash;
    if (cdb_engine_file_get(s->e, r->file_id, &f) != CDB_OK) return s->wrong++, 0;
    if (s->jpeg_left && strstr(f.path, ".jpg")) { /* left to the reindex */
        s->n_jpeg++;
        s->wrong += r->has_phash != 0;
        cdb_engine_file_clear(&f);
        return 0;
    }
    buf = (unsigned char *)cli_read_file(f.path, &n);
    ip.decode = CDB_DECODE_FAST;
    ip.target_size = 64;
    if (!buf || cdb_image_decode(buf, n, &ip, &img) != CDB_OK ||
        cdb_image_phash(img, &want) != CDB_OK || !r->has_phash || r->phash != want) {
        fprintf(stderr, "    %s: stored %d %016llx, decoded %016llx\n", f.path, r->has_phash,
                (unsigned long long)r->phash, (unsigned long long)want);
        s->wrong++;
    }
    cdb_image_free(img);
    free(buf);
    cdb_engine_file_clear(&f);
    return 0;
}

CDB_TEST(ingest_stores_the_phash_of_its_decode) {
    LU_NEED_SETUP();
    char root[PATH_MAX], db[PATH_MAX], p[PATH_MAX + 64];
    lu_path(root, sizeof root, "photos");
    lu_path(db, sizeof db, "photos.db");
    CHECK_EQ_INT(lu_generate(root, 28, 0, 12), 0);
    for (int i = 0; i < 4; i++) { /* pictures and their half-size copies */
        size_t n = 0;
        unsigned char *b = lu_ppm(192 + 8 * i, 144, 40 + (uint64_t)i, &n);
        snprintf(p, sizeof p, "%s/pic%d.ppm", root, i);
        CHECK(b && lu_write(p, b, n) == 0);
        free(b);
        b = lu_ppm(96 + 4 * i, 72, 40 + (uint64_t)i, &n);
        snprintf(p, sizeof p, "%s/pic%d_small.ppm", root, i);
        CHECK(b && lu_write(p, b, n) == 0);
        free(b);
    }
    for (int fast = 1; fast >= 0; fast--) {
        seen s = {NULL, 0, 0, 0, 0, !fast};
        cdb_db *d = NULL;
        cdb_db_params dp = cdb_db_params_default();
        dp.readonly = 1;
        lu_path(db, sizeof db, fast ? "fast.db" : "exact.db");
        CHECK_EQ_INT(lu_init(db), 0);
        CHECK_EQ_INT(lu_expect((const char *[]){"ingest", "--db", db, root, "--decode",
                                                fast ? "fast" : "exact", "--quiet", NULL},
                               0, NULL),
                     0);
        CHECK_OK(cdb_engine_open(db, NULL, &s.e));
        CHECK_OK(cdb_db_open(db, &dp, &d));
        CHECK_OK(cdb_db_photos_foreach(d, 1, check_row, &s));
        CHECK_EQ_INT(s.n, 20);
        CHECK_EQ_INT(s.wrong, 0);
        CHECK_EQ_INT(s.n_phash, 20 - s.n_jpeg); /* stored by the ingest */
        CHECK(fast || s.n_jpeg > 0);
        cdb_db_close(d);
        cdb_engine_close(s.e);
        if (fast) continue;
        /* the reindex stores the JPEGs' (the same definition: all equal now) */
        CHECK_EQ_INT(lu_expect((const char *[]){"reindex", "--db", db, "--quiet", NULL}, 0, NULL),
                     0);
        memset(&s, 0, sizeof s);
        CHECK_OK(cdb_engine_open(db, NULL, &s.e));
        CHECK_OK(cdb_db_open(db, &dp, &d));
        CHECK_OK(cdb_db_photos_foreach(d, 1, check_row, &s));
        CHECK_EQ_INT(s.n_phash, 20);
        CHECK_EQ_INT(s.wrong, 0);
        cdb_db_close(d);
        cdb_engine_close(s.e);
    }
}

CDB_TEST_MAIN(ingest_stores_the_phash_of_its_decode)
