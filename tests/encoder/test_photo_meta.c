/*
** test_photo_meta: cdb_photo_meta_read against an independent truth.
**
** photo_meta_make.py (next to this file) makes photos of every format that carries
** metadata (JPEG, PNG, WebP, TIFF, HEIC) with Debian's python3-pil and heif-enc, writes
** random metadata into them with Debian's exiftool, and records the truth: the values
** written (capture time through the documented fallbacks, make, model, lens) and GPS
** as exiftool reads the stored rationals back. Hostile input: every file's bytes
** truncated at random points and with random bytes overwritten in its metadata must
** read without a crash (run under ASan/UBSan in CI), giving valid fields or none.
** The tools missing is a failure, not a skip: scripts/setup.sh installs them.
** CLIPDB_META_SEED / CLIPDB_META_COUNT choose the run (default 1 and 60).
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "cdb_test.h"
#include "read_file.h"
#include "encoder/encoder.h"
#include "encoder/image_int.h"

static char g_dir[] = "/tmp/cdb_photo_meta_XXXXXX";
static json_t *g_manifest;

static int make_photos(void) {
    char cmd[1024];
    const char *seed = getenv("CLIPDB_META_SEED"), *count = getenv("CLIPDB_META_COUNT");
    if (g_manifest) return 1;
    if (!mkdtemp(g_dir)) return 0;
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/photo_meta_make.py %s %s %s", CDB_TEST_SRC,
             g_dir, seed ? seed : "1", count ? count : "60");
    fprintf(stderr, "    %s\n", cmd);
    if (system(cmd) != 0) return 0;
    snprintf(cmd, sizeof cmd, "%s/manifest.json", g_dir);
    g_manifest = json_load_file(cmd, 0, NULL);
    return g_manifest && json_is_array(g_manifest) && json_array_size(g_manifest) > 0;
}

static int read_file_meta(const char *name, cdb_photo_meta *m, uint8_t **bytes, size_t *n) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    if (!(*bytes = test_read_file(path, n))) return 0;
    return cdb_photo_meta_read(*bytes, *n, m) == CDB_OK;
}

CDB_TEST(every_format_matches_the_truth) {
    size_t i;
    json_t *e;
    int n_taken = 0, n_gps = 0, n_alt = 0, n_text = 0;
    CHECK_MSG(make_photos(), "photo_meta_make.py failed (python3-pil, exiftool, heif-enc?)");
    json_array_foreach(g_manifest, i, e) {
        const char *file = json_string_value(json_object_get(e, "file"));
        const char *want_taken = json_string_value(json_object_get(e, "taken"));
        json_t *gps = json_object_get(e, "gps"), *alt = json_object_get(e, "alt");
        static const char *const keys[] = {"make", "model", "lens"};
        cdb_photo_meta m;
        uint8_t *bytes = NULL;
        size_t n = 0;
        char iso[64];
        CHECK_MSG(read_file_meta(file, &m, &bytes, &n), "%s: cannot read", file);
        free(bytes);
        cdb_photo_meta_taken_iso(&m, iso, sizeof iso);
        CHECK_MSG(!strcmp(iso, want_taken ? want_taken : ""), "%s: taken '%s', want '%s'", file,
                  iso, want_taken ? want_taken : "");
        CHECK_MSG((int)m.taken_source ==
                      (int)json_integer_value(json_object_get(e, "source")),
                  "%s: taken source %d", file, (int)m.taken_source);
        n_taken += want_taken != NULL;
        for (int k = 0; k < 3; k++) {
            const char *want = json_string_value(json_object_get(e, keys[k]));
            const char *got = k == 0 ? m.make : k == 1 ? m.model : m.lens;
            CHECK_MSG(!strcmp(got, want), "%s: %s '%s', want '%s'", file, keys[k], got, want);
            n_text += want[0] != 0;
        }
        CHECK_MSG(m.has_gps == json_is_array(gps), "%s: has_gps %d", file, m.has_gps);
        if (m.has_gps) {
            double la = json_real_value(json_array_get(gps, 0));
            double lo = json_real_value(json_array_get(gps, 1));
            CHECK_MSG(fabs(m.lat - la) < 1e-9 && fabs(m.lon - lo) < 1e-9,
                      "%s: gps %.10f,%.10f, exiftool %.10f,%.10f", file, m.lat, m.lon, la, lo);
            n_gps++;
        }
        CHECK_MSG(m.has_alt == !json_is_null(alt) && (!m.has_alt || fabs(m.alt -
                  json_number_value(alt)) < 1e-9), "%s: alt %d %.4f", file, m.has_alt, m.alt);
        n_alt += m.has_alt;
    }
    fprintf(stderr, "    %zu files: %d capture times, %d texts, %d GPS, %d altitudes\n",
            json_array_size(g_manifest), n_taken, n_text, n_gps, n_alt);
    CHECK(n_taken > 0 && n_gps > 0 && n_alt > 0 && n_text > 0);
}

/* Any value read from damaged bytes is still a valid value. */
static int meta_valid(const cdb_photo_meta *m) {
    if (m->has_gps && !(fabs(m->lat) <= 90 && fabs(m->lon) <= 180)) return 0;
    if (m->has_alt && !isfinite(m->alt)) return 0;
    if (m->has_offset && (m->offset_min < -840 || m->offset_min > 840)) return 0;
    return strnlen(m->make, sizeof m->make) < sizeof m->make &&
           strnlen(m->model, sizeof m->model) < sizeof m->model &&
           strnlen(m->lens, sizeof m->lens) < sizeof m->lens;
}

CDB_TEST(damaged_metadata_never_crashes) {
    size_t i;
    json_t *e;
    unsigned seed = 12345;
    CHECK_MSG(make_photos(), "photo_meta_make.py failed");
    json_array_foreach(g_manifest, i, e) {
        const char *file = json_string_value(json_object_get(e, "file"));
        uint8_t *bytes = NULL, *copy;
        size_t n = 0;
        cdb_photo_meta m;
        CHECK(read_file_meta(file, &m, &bytes, &n));
        copy = malloc(n);
        for (int t = 0; t < 40 && copy; t++) {
            size_t cut = t < 20 ? (size_t)rand_r(&seed) % (n + 1) : n;
            memcpy(copy, bytes, n);
            if (t >= 20) /* damage within the first 4 KiB, where the metadata lives */
                for (int k = 0; k < 8; k++) copy[(size_t)rand_r(&seed) % (n < 4096 ? n : 4096)] =
                        (uint8_t)rand_r(&seed);
            CHECK_EQ_INT(cdb_photo_meta_read(copy, cut, &m), CDB_OK);
            CHECK_MSG(meta_valid(&m), "%s: invalid fields after damage %d", file, t);
        }
        free(copy);
        free(bytes);
    }
}

CDB_TEST(dates_are_validated) {
    static const struct { const char *dt, *sub, *off, *want; } cases[] = {
        {"2024:05:01 12:34:56", NULL, NULL, "2024-05-01T12:34:56"},
        {"2024:05:01 12:34:56", "7", "+02:00", "2024-05-01T12:34:56.700+02:00"},
        {"2024:05:01 12:34:56", "123456", "-03:30", "2024-05-01T12:34:56.123-03:30"},
        {"2024:05:01 12:34:56", "  ", "   :  ", "2024-05-01T12:34:56"},
        {"2024:02:29 00:00:00", NULL, "+00:00", "2024-02-29T00:00:00Z"},
        {"1999:12:31 23:59:60", NULL, NULL, "1999-12-31T23:59:59"},
        {"2023:02:29 00:00:00", NULL, NULL, ""},
        {"0000:00:00 00:00:00", NULL, NULL, ""},
        {"    :  :     :  :  ", NULL, NULL, ""},
        {"2024:13:01 00:00:00", NULL, NULL, ""},
        {"2024:05:01 24:00:00", NULL, NULL, ""},
        {"2024:05:01", NULL, NULL, ""},
        {"2024:05:01 12:34:56", NULL, "+15:00", "2024-05-01T12:34:56"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        cdb_photo_meta m;
        char iso[64];
        memset(&m, 0, sizeof m);
        cdb_meta_set_taken(&m, CDB_TAKEN_ORIGINAL, cases[i].dt, strlen(cases[i].dt),
                           cases[i].sub, cases[i].sub ? strlen(cases[i].sub) : 0, cases[i].off,
                           cases[i].off ? strlen(cases[i].off) : 0, 0);
        cdb_photo_meta_taken_iso(&m, iso, sizeof iso);
        CHECK_MSG(!strcmp(iso, cases[i].want), "'%s' '%s' '%s': got '%s', want '%s'", cases[i].dt,
                  cases[i].sub ? cases[i].sub : "", cases[i].off ? cases[i].off : "", iso,
                  cases[i].want);
    }
}

CDB_TEST(no_metadata_is_no_error) {
    cdb_photo_meta m;
    static const uint8_t junk[] = "not an image at all";
    CHECK_EQ_INT(cdb_photo_meta_read(junk, sizeof junk, &m), CDB_OK);
    CHECK_EQ_INT(m.taken_source, CDB_TAKEN_NONE);
    CHECK(!m.has_gps && !m.make[0]);
    CHECK_EQ_INT(cdb_photo_meta_read(NULL, 0, &m), CDB_OK);
    CHECK_EQ_INT(cdb_photo_meta_read(junk, sizeof junk, NULL), CDB_INVALID);
}

static void cleanup(void) {
    char cmd[256];
    json_decref(g_manifest);
    if (strcmp(g_dir + strlen(g_dir) - 6, "XXXXXX") && !getenv("CLIPDB_KEEP")) {
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
        if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", g_dir);
    }
}

int main(int argc, char **argv) {
    int rc;
    CDB_TEST_LIST(tests, dates_are_validated, no_metadata_is_no_error,
                  every_format_matches_the_truth, damaged_metadata_never_crashes);
    rc = cdb_test_run_(tests, CDB_TEST_N(tests), argc, argv);
    cleanup();
    return rc;
}
