/*
** test_db_photos.c: photo metadata in the catalog (db/photos.c, schema 7; the migration
** from schema 6 is test_db's migrate_v6_to_v7): every ok file starts as not read; rows
** are stored and read back per file id, a file without a
** capture time reads as its mtime, a changed content makes its row not current and
** prune drops it; the ISO 8601 and LAT,LON,KM parsers against libc (timegm, strtod)
** and lists of texts they must refuse; and the filter over a random library compared
** with a brute force written here from the rules in db.h: times through timegm,
** distances through the chord of unit vectors (not the haversine), camera names
** through strcasestr.
*/

#include <math.h>
#include <time.h>

#include "cdb_test.h"
#include "db_test_util.h"

#define DIM 16
#define N_FILES 400

typedef struct fixture {
    char dir[256];
    cdb_db *db;
    int64_t model, root;
    int64_t ids[N_FILES];
} fixture;

static cdb_status fx_open(fixture *fx, const char *tag) {
    cdb_status rc;
    memset(fx, 0, sizeof *fx);
    if ((rc = tu_create_with_model(fx->dir, sizeof fx->dir, tag, "ph", DIM, &fx->db,
                                   &fx->model)) != CDB_OK)
        return rc;
    return cdb_db_root_add(fx->db, "/photos", &fx->root);
}

static void fx_close(fixture *fx) {
    tu_close_rm(&fx->db, fx->dir);
}

/* File i: mtime FILE_T0 + (i + 1) * 1e9 + 7 ns (a file time of FILE_T0_S + i + 1 s, within
** the days the random photos were taken), content seed i. */
#define FILE_T0_S 1714550400 /* 2024-05-01T08:00:00Z */
#define FILE_T0 ((int64_t)FILE_T0_S * 1000000000)
static cdb_status fx_put(fixture *fx, int from, int to) {
    cdb_db_batch *b = NULL;
    float v[DIM];
    char name[64];
    cdb_status rc = cdb_db_batch_new(fx->db, fx->model, &b);
    for (int i = from; i < to && rc == CDB_OK; i++) {
        cdb_db_file_meta m = tu_meta(1000 + i, FILE_T0 + (int64_t)(i + 1) * 1000000000 + 7,
                                      (uint64_t)i);
        snprintf(name, sizeof name, "f%05d.jpg", i);
        tu_vec((uint64_t)i, 1.0f, v, DIM);
        rc = cdb_db_batch_put(b, fx->root, name, &m, v, DIM);
    }
    if (rc == CDB_OK) rc = cdb_db_batch_commit(b, fx->ids + from);
    cdb_db_batch_free(b);
    return rc;
}

/* ---- the truth the brute force works from --------------------------------------------- */

typedef struct truth {
    int taken;                     /* has a capture time */
    int y, mo, d, h, mi, s, ms;    /* the wall clock */
    int has_offset, offset_min;
    char make[64], model[64];
    int has_gps;
    double lat, lon;
} truth;

static int64_t wall_ms_libc(int y, int mo, int d, int h, int mi, int s, int ms) {
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    tm.tm_year = y - 1900;
    tm.tm_mon = mo - 1;
    tm.tm_mday = d;
    tm.tm_hour = h;
    tm.tm_min = mi;
    tm.tm_sec = s;
    return (int64_t)timegm(&tm) * 1000 + ms;
}

static const char *const k_makes[] = {"Canon", "NIKON CORPORATION", "FUJIFILM", "Apple", ""};
static const char *const k_models[] = {"Canon EOS R5", "NIKON Z 6", "X-T4", "iPhone 13 Pro", ""};

static void random_truth(uint64_t *s, truth *t) {
    memset(t, 0, sizeof *t);
    t->taken = tu_splitmix(s) % 5 != 0;
    /* Within four days, so that UTC offsets decide many comparisons with the bounds. */
    t->y = 2024;
    t->mo = 5;
    t->d = 1 + (int)(tu_splitmix(s) % 4);
    t->h = (int)(tu_splitmix(s) % 24);
    t->mi = (int)(tu_splitmix(s) % 60);
    t->s = (int)(tu_splitmix(s) % 60);
    t->ms = (int)(tu_splitmix(s) % 1000);
    t->has_offset = tu_splitmix(s) % 2;
    t->offset_min = ((int)(tu_splitmix(s) % 57) - 28) * 30;
    int cam = (int)(tu_splitmix(s) % 5);
    snprintf(t->make, sizeof t->make, "%s", k_makes[cam]);
    snprintf(t->model, sizeof t->model, "%s", k_models[cam]);
    t->has_gps = tu_splitmix(s) % 3 != 0;
    /* Clustered around three places so that 'near' filters select something. */
    static const double places[3][2] = {{48.8566, 2.3522}, {51.5074, -0.1278}, {35.68, 139.69}};
    int pl = (int)(tu_splitmix(s) % 3);
    t->lat = places[pl][0] + tu_uniform(s) * 3;
    t->lon = places[pl][1] + tu_uniform(s) * 3;
}

static cdb_db_photo photo_of(const truth *t, int64_t id, const uint8_t hash[16]) {
    cdb_db_photo p;
    memset(&p, 0, sizeof p);
    p.file_id = id;
    memcpy(p.hash, hash, 16);
    if (t->taken) {
        p.taken_source = CDB_DB_TAKEN_ORIGINAL;
        p.taken.wall_ms = wall_ms_libc(t->y, t->mo, t->d, t->h, t->mi, t->s, t->ms);
        p.taken.has_offset = t->has_offset;
        p.taken.offset_min = t->has_offset ? t->offset_min : 0;
    }
    snprintf(p.make, sizeof p.make, "%s", t->make);
    snprintf(p.model, sizeof p.model, "%s", t->model);
    p.has_gps = t->has_gps;
    p.lat = t->lat;
    p.lon = t->lon;
    return p;
}

/* ---- migration, rows ------------------------------------------------------------------ */

/* Every ok file starts unread; rows stored read back per file id, the others (and rows
** without a capture time) with their file time. */
CDB_TEST(rows_read_back_per_file) {
    fixture fx;
    CHECK_OK(fx_open(&fx, "photos6"));
    CHECK_OK(fx_put(&fx, 0, 20));
    int64_t *ids = NULL, n = 0;
    CHECK_OK(cdb_db_photos_missing(fx.db, 0, &ids, &n));
    CHECK_EQ_INT(n, 20);
    for (int i = 0; i < n && i < 20; i++) CHECK_EQ_INT(ids[i], fx.ids[i]);
    cdb_free(ids);
    /* Store rows for the even files: the odd ones stay missing. */
    cdb_db_photo rows[10];
    uint64_t seed = 5;
    truth t[10];
    for (int i = 0; i < 10; i++) {
        cdb_db_file f;
        CHECK_OK(cdb_db_file_get(fx.db, fx.ids[2 * i], &f));
        random_truth(&seed, &t[i]);
        rows[i] = photo_of(&t[i], f.id, f.meta.hash);
        snprintf(rows[i].lens, sizeof rows[i].lens, "lens %d", i);
        rows[i].has_alt = i % 2;
        rows[i].alt = -12.5 * i;
        rows[i].has_phash = 1; /* schema 9: a row without it is still missing */
        rows[i].phash = (uint64_t)(i + 1) * 0x9E3779B97F4A7C15ULL;
        rows[i].phash_format = i % 3;
        rows[i].phash_width = 100 + i;
        rows[i].phash_height = 200 + i;
        cdb_db_file_clear(&f);
    }
    CHECK_OK(cdb_db_photos_put(fx.db, rows, 10));
    CHECK_OK(cdb_db_photos_missing(fx.db, fx.root, &ids, &n));
    CHECK_EQ_INT(n, 10);
    for (int i = 0; i < n && i < 10; i++) CHECK_EQ_INT(ids[i], fx.ids[2 * i + 1]);
    cdb_free(ids);
    cdb_db_photo got[20];
    uint8_t found[20];
    CHECK_OK(cdb_db_photos_get(fx.db, fx.ids, 20, got, found));
    for (int i = 0; i < 20; i++) {
        CHECK_EQ_INT(found[i], 1);
        CHECK_EQ_INT(got[i].file_id, fx.ids[i]);
        if (i % 2 == 0 && t[i / 2].taken) {
            const cdb_db_photo *w = &rows[i / 2];
            CHECK_EQ_INT(got[i].read, 1);
            CHECK_EQ_INT(got[i].taken_source, CDB_DB_TAKEN_ORIGINAL);
            CHECK_EQ_INT(got[i].taken.wall_ms, w->taken.wall_ms);
            CHECK_EQ_INT(got[i].taken.has_offset, w->taken.has_offset);
            CHECK_EQ_INT(got[i].taken.offset_min, w->taken.offset_min);
        } else {
            /* Not read, or read without a capture time: the file time, (i + 1) s. */
            CHECK_EQ_INT(got[i].read, i % 2 == 0);
            CHECK_EQ_INT(got[i].taken_source, CDB_DB_TAKEN_FILE);
            CHECK_EQ_INT(got[i].taken.wall_ms, ((int64_t)FILE_T0_S + i + 1) * 1000);
            CHECK_EQ_INT(got[i].taken.has_offset, 1);
            CHECK_EQ_INT(got[i].taken.offset_min, 0);
        }
        if (i % 2 == 0) {
            const cdb_db_photo *w = &rows[i / 2];
            CHECK_EQ_STR(got[i].make, w->make);
            CHECK_EQ_STR(got[i].model, w->model);
            CHECK_EQ_STR(got[i].lens, w->lens);
            CHECK_EQ_INT(got[i].has_gps, w->has_gps);
            if (w->has_gps) {
                CHECK(got[i].lat == w->lat);
                CHECK(got[i].lon == w->lon);
            }
            CHECK_EQ_INT(got[i].has_alt, w->has_alt);
            if (w->has_alt) CHECK(got[i].alt == w->alt);
            CHECK_EQ_INT(got[i].has_phash, 1);
            CHECK(got[i].phash == w->phash);
            CHECK_EQ_INT(got[i].phash_format, w->phash_format);
            CHECK_EQ_INT(got[i].phash_width, w->phash_width);
            CHECK_EQ_INT(got[i].phash_height, w->phash_height);
        } else {
            CHECK_EQ_STR(got[i].make, "");
            CHECK_EQ_INT(got[i].has_gps, 0);
        }
    }
    int64_t absent = 999999;
    CHECK_OK(cdb_db_photos_get(fx.db, &absent, 1, got, found));
    CHECK_EQ_INT(found[0], 0);
    fx_close(&fx);
}

/* A row describes the content it was read from: a file re-stored with other content
** is missing again; prune drops its stale row and the rows of deleted files. */
CDB_TEST(changed_content_is_unread_and_pruned) {
    fixture fx;
    CHECK_OK(fx_open(&fx, "photosch"));
    CHECK_OK(fx_put(&fx, 0, 4));
    cdb_db_photo rows[4];
    for (int i = 0; i < 4; i++) {
        cdb_db_file f;
        CHECK_OK(cdb_db_file_get(fx.db, fx.ids[i], &f));
        memset(&rows[i], 0, sizeof rows[i]);
        rows[i].file_id = f.id;
        memcpy(rows[i].hash, f.meta.hash, 16);
        snprintf(rows[i].make, sizeof rows[i].make, "Make%d", i);
        rows[i].has_phash = 1;
        cdb_db_file_clear(&f);
    }
    CHECK_OK(cdb_db_photos_put(fx.db, rows, 4));
    int64_t *ids = NULL, n = 0, dropped = -1;
    CHECK_OK(cdb_db_photos_missing(fx.db, 0, &ids, &n));
    CHECK_EQ_INT(n, 0);
    cdb_free(ids);
    /* File 1 gets new content, file 2 is deleted. */
    cdb_db_batch *b = NULL;
    float v[DIM];
    cdb_db_file_meta m = tu_meta(5, 6, 424242);
    tu_vec(77, 1.0f, v, DIM);
    CHECK_OK(cdb_db_batch_new(fx.db, fx.model, &b));
    CHECK_OK(cdb_db_batch_put(b, fx.root, "f00001.jpg", &m, v, DIM));
    CHECK_OK(cdb_db_batch_delete(b, fx.ids[2]));
    CHECK_OK(cdb_db_batch_commit(b, NULL));
    cdb_db_batch_free(b);
    CHECK_OK(cdb_db_photos_missing(fx.db, 0, &ids, &n));
    CHECK_EQ_INT(n, 1);
    if (n == 1) CHECK_EQ_INT(ids[0], fx.ids[1]);
    cdb_free(ids);
    cdb_db_photo got;
    CHECK_OK(cdb_db_photos_get(fx.db, &fx.ids[1], 1, &got, NULL));
    CHECK_EQ_INT(got.read, 0);
    CHECK_EQ_STR(got.make, "");
    CHECK_OK(cdb_db_photos_prune(fx.db, &dropped));
    CHECK_EQ_INT(dropped, 2);
    CHECK_OK(cdb_db_photos_prune(fx.db, &dropped));
    CHECK_EQ_INT(dropped, 0);
    /* Bad rows are refused whole. */
    cdb_db_photo bad[2] = {rows[0], rows[3]};
    bad[1].has_gps = 1;
    bad[1].lat = 91;
    CHECK_RC(cdb_db_photos_put(fx.db, bad, 2), CDB_INVALID);
    bad[1].has_gps = 0;
    bad[1].taken_source = CDB_DB_TAKEN_FILE;
    CHECK_RC(cdb_db_photos_put(fx.db, bad, 2), CDB_INVALID);
    bad[1].taken_source = CDB_DB_TAKEN_RAW;
    bad[1].taken.has_offset = 1;
    bad[1].taken.offset_min = 841;
    CHECK_RC(cdb_db_photos_put(fx.db, bad, 2), CDB_INVALID);
    fx_close(&fx);
}

/* ---- parsers ------------------------------------------------------------------------ */

CDB_TEST(time_parse_against_timegm) {
    uint64_t s = 99;
    for (int k = 0; k < 3000; k++) {
        int y = 1 + (int)(tu_splitmix(&s) % 9999), mo = 1 + (int)(tu_splitmix(&s) % 12);
        int dim = mo == 2 ? ((y % 4 == 0 && y % 100 != 0) || y % 400 == 0 ? 29 : 28)
                  : (mo == 4 || mo == 6 || mo == 9 || mo == 11) ? 30 : 31;
        int d = 1 + (int)(tu_splitmix(&s) % (uint64_t)dim);
        int h = (int)(tu_splitmix(&s) % 24), mi = (int)(tu_splitmix(&s) % 60);
        int sec = (int)(tu_splitmix(&s) % 60), ms = (int)(tu_splitmix(&s) % 1000);
        int form = (int)(tu_splitmix(&s) % 5), off = ((int)(tu_splitmix(&s) % 113) - 56) * 15;
        char text[80];
        int n = snprintf(text, sizeof text, "%04d-%02d-%02d", y, mo, d);
        if (form == 0) h = mi = sec = ms = 0;
        if (form >= 1) n += snprintf(text + n, sizeof text - (size_t)n, "T%02d:%02d", h, mi);
        if (form == 1) sec = ms = 0;
        if (form >= 2) n += snprintf(text + n, sizeof text - (size_t)n, ":%02d", sec);
        if (form == 2) ms = 0;
        if (form >= 3) n += snprintf(text + n, sizeof text - (size_t)n, ".%03d", ms);
        if (form == 4)
            snprintf(text + n, sizeof text - (size_t)n, "%c%02d:%02d", off < 0 ? '-' : '+',
                     abs(off) / 60, abs(off) % 60);
        cdb_db_time t;
        CHECK_OK(cdb_db_time_parse(text, &t));
        CHECK_MSG(t.wall_ms == wall_ms_libc(y, mo, d, h, mi, sec, ms), "%s", text);
        CHECK_EQ_INT(t.has_offset, form == 4);
        if (form == 4) CHECK_EQ_INT(t.offset_min, off);
    }
    static const struct {
        const char *text;
        int64_t utc_ms;
        int has_offset;
    } good[] = {
        {"2024-02-29", 1709164800000, 0},
        {"2024-02-29 23:59", 1709251140000, 0},
        {"1970-01-01T00:00:00Z", 0, 1},
        {"1969-12-31T23:59:59.9999999z", -1, 1},
        {"2000-01-01T00:00:00+14:00", 946634400000, 1},
        {"2000-01-01T00:00:00-0930", 946719000000, 1},
        {"2000-01-01t00:00:00,5+01", 946681200500, 1},
        {"2016-12-31T23:59:60Z", 1483228799000, 1},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        cdb_db_time t;
        CHECK_OK(cdb_db_time_parse(good[i].text, &t));
        CHECK_MSG(cdb_db_time_key(&t) == good[i].utc_ms, "%s", good[i].text);
        CHECK_EQ_INT(t.has_offset, good[i].has_offset);
    }
    static const char *const bad[] = {
        "", "2024", "2024-1-01", "2024-01-1", "2023-02-29", "2024-13-01", "2024-00-10",
        "0000-01-01", "2024-04-31", "2024-01-01T", "2024-01-01T24:00", "2024-01-01T12",
        "2024-01-01T12:60", "2024-01-01T12:00:61", "2024-01-01T12:00:00.", "2024-01-01Z",
        "2024-01-01T12:00:00.1234567890", "2024-01-01T12:00+15:00", "2024-01-01T12:00+05:",
        "2024-01-01T12:00+05:3", "2024-01-01T12:00+0560", "2024-01-01T12:00 ",
        " 2024-01-01", "2024-01-01x", "2024-01-01T12:00:00Zjunk", "+2024-01-01",
        "2024/01/01", "20240101",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cdb_db_time t;
        CHECK_MSG(cdb_db_time_parse(bad[i], &t) == CDB_INVALID, "accepted '%s'", bad[i]);
    }
}

CDB_TEST(near_parse_against_strtod) {
    static const char *const good[] = {"48.8566,2.3522,10", " -33.9 , 151.2 , 0.5",
                                       "90,-180,20000", "-90,180,1", "0,0,.5", "+1.,-0,7"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        double lat, lon, km;
        CHECK_OK(cdb_db_near_parse(good[i], &lat, &lon, &km));
        const char *c1 = strchr(good[i], ','), *c2 = c1 ? strchr(c1 + 1, ',') : NULL;
        CHECK(c2 != NULL);
        if (!c2) continue;
        double a = strtod(good[i], NULL), b = strtod(c1 + 1, NULL), c = strtod(c2 + 1, NULL);
        CHECK_MSG(lat == a && lon == b && km == c, "%s", good[i]);
    }
    static const char *const bad[] = {"", "1,2", "1,2,3,4", "91,0,1", "0,181,1", "0,0,0",
                                      "0,0,-1", "nan,0,1", "0,inf,1", "0x10,0,1", "1e1,0,1",
                                      "1,,2", "a,b,c", "1,2,3km", "-,0,1", ".,0,1", "0,0,1e-0",
                                      "0,0,1 2"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        double lat, lon, km;
        CHECK_MSG(cdb_db_near_parse(bad[i], &lat, &lon, &km) == CDB_INVALID, "accepted '%s'",
                  bad[i]);
    }
}

/* ---- the filter against a brute force ------------------------------------------------- */

/* The brute force's own reading of the rules (db.h, cdb_db_photo_filter). */
typedef struct oracle_bound {
    int on;
    int64_t wall_ms, utc_ms;
    int has_offset;
} oracle_bound;

/* <0, 0, >0: the photo's time against the bound. */
static int oracle_cmp(const truth *t, int64_t file_utc_ms, const oracle_bound *b) {
    int64_t wall, utc;
    int zoned;
    if (t->taken) {
        wall = wall_ms_libc(t->y, t->mo, t->d, t->h, t->mi, t->s, t->ms);
        zoned = t->has_offset;
        utc = wall - (zoned ? (int64_t)t->offset_min * 60000 : 0);
    } else {
        wall = utc = file_utc_ms;
        zoned = 1;
    }
    int64_t x = zoned && b->has_offset ? utc : wall, y = zoned && b->has_offset ? b->utc_ms
                                                                                : b->wall_ms;
    return (x > y) - (x < y);
}

static void unit_vec(double lat, double lon, double v[3]) {
    double r = 3.14159265358979323846 / 180;
    v[0] = cos(lat * r) * cos(lon * r);
    v[1] = cos(lat * r) * sin(lon * r);
    v[2] = sin(lat * r);
}

/* Great-circle distance through the chord between the two unit vectors. */
static double chord_km(double lat1, double lon1, double lat2, double lon2) {
    double a[3], b[3];
    unit_vec(lat1, lon1, a);
    unit_vec(lat2, lon2, b);
    double c = sqrt((a[0] - b[0]) * (a[0] - b[0]) + (a[1] - b[1]) * (a[1] - b[1]) +
                    (a[2] - b[2]) * (a[2] - b[2]));
    return 2 * 6371.0088 * asin(c / 2);
}

static void bound_text(uint64_t *s, char *text, size_t cap, oracle_bound *b) {
    int y = 2024, mo = 5, d = 1 + (int)(tu_splitmix(s) % 4), h = (int)(tu_splitmix(s) % 24);
    int mi = (int)(tu_splitmix(s) % 60), zoned = tu_splitmix(s) % 2;
    int off = ((int)(tu_splitmix(s) % 57) - 28) * 30;
    int n = snprintf(text, cap, "%04d-%02d-%02dT%02d:%02d", y, mo, d, h, mi);
    if (zoned)
        snprintf(text + n, cap - (size_t)n, "%c%02d:%02d", off < 0 ? '-' : '+', abs(off) / 60,
                 abs(off) % 60);
    b->on = 1;
    b->wall_ms = wall_ms_libc(y, mo, d, h, mi, 0, 0);
    b->has_offset = zoned;
    b->utc_ms = b->wall_ms - (zoned ? (int64_t)off * 60000 : 0);
}

CDB_TEST(random_filters_match_brute_force) {
    fixture fx;
    static truth tr[N_FILES];
    static cdb_db_photo rows[N_FILES];
    uint64_t s = 2026;
    CHECK_OK(fx_open(&fx, "photosf"));
    CHECK_OK(fx_put(&fx, 0, N_FILES));
    int n_rows = 0;
    for (int i = 0; i < N_FILES; i++) {
        random_truth(&s, &tr[i]);
        /* One file in ten is never read: it has its file time and nothing else. */
        if (i % 10 == 9) {
            memset(&tr[i], 0, sizeof tr[i]);
            continue;
        }
        cdb_db_file f;
        CHECK_OK(cdb_db_file_get(fx.db, fx.ids[i], &f));
        rows[n_rows++] = photo_of(&tr[i], f.id, f.meta.hash);
        cdb_db_file_clear(&f);
    }
    CHECK_OK(cdb_db_photos_put(fx.db, rows, n_rows));
    static const char *const cams[] = {"canon", "EOS", "nikon z", "x-t", "IPHONE", "zzz", "o"};
    int total_pass = 0;
    for (int q = 0; q < 300; q++) {
        cdb_db_photo_filter f;
        oracle_bound after = {0}, before = {0};
        char ta[64], tb[64];
        memset(&f, 0, sizeof f);
        int what = (int)(tu_splitmix(&s) % 32);
        if (what & 1) {
            bound_text(&s, ta, sizeof ta, &after);
            CHECK_OK(cdb_db_time_parse(ta, &f.after));
            f.has_after = 1;
        }
        if (what & 2) {
            bound_text(&s, tb, sizeof tb, &before);
            CHECK_OK(cdb_db_time_parse(tb, &f.before));
            f.has_before = 1;
        }
        if (what & 4) f.camera = cams[tu_splitmix(&s) % 7];
        if (what & 8) {
            char near[96];
            int pl = (int)(tu_splitmix(&s) % 3);
            static const double places[3][2] = {{48.9, 2.4}, {51.4, -0.2}, {35.7, 139.7}};
            snprintf(near, sizeof near, "%.4f,%.4f,%.1f", places[pl][0], places[pl][1],
                     20 + (double)(tu_splitmix(&s) % 300));
            CHECK_OK(cdb_db_near_parse(near, &f.near_lat, &f.near_lon, &f.near_km));
            f.has_near = 1;
        }
        if (what & 16) f.has_gps = 1;
        int64_t *ids = NULL, n = 0, k = 0;
        CHECK_OK(cdb_db_photos_select(fx.db, &f, &ids, &n));
        for (int i = 0; i < N_FILES; i++) {
            const truth *t = &tr[i];
            int pass = 1;
            int64_t file_utc = ((int64_t)FILE_T0_S + i + 1) * 1000;
            if (after.on && oracle_cmp(t, file_utc, &after) < 0) pass = 0;
            if (before.on && oracle_cmp(t, file_utc, &before) >= 0) pass = 0;
            if (f.camera && !strcasestr(t->make, f.camera) && !strcasestr(t->model, f.camera))
                pass = 0;
            if ((f.has_gps || f.has_near) && !t->has_gps) pass = 0;
            if (f.has_near && t->has_gps) {
                double dk = chord_km(f.near_lat, f.near_lon, t->lat, t->lon);
                if (fabs(dk - f.near_km) < 1e-6) continue; /* too close to call */
                if (dk > f.near_km) pass = 0;
            }
            int got = 0;
            while (k < n && ids[k] < fx.ids[i]) k++;
            got = k < n && ids[k] == fx.ids[i];
            CHECK_MSG(got == pass, "query %d (what %d, camera %s) file %d: got %d want %d", q,
                      what, f.camera ? f.camera : "-", i, got, pass);
            total_pass += pass;
        }
        for (int64_t j = 1; j < n; j++) CHECK(ids[j] > ids[j - 1]);
        cdb_free(ids);
    }
    /* The queries selected neither nothing nor everything on the whole. */
    CHECK(total_pass > 300 * N_FILES / 50 && total_pass < 300 * N_FILES * 9 / 10);
    fx_close(&fx);
}

CDB_TEST_MAIN(rows_read_back_per_file, changed_content_is_unread_and_pruned,
              time_parse_against_timegm, near_parse_against_strtod,
              random_filters_match_brute_force)
