/*
** test_photo_filters.c: filtered search is exact (issue 28), through the real clipdb
** binary. A generated library in two folders, each JPEG given random EXIF by the test
** itself (tests/exif_build.h: capture time with or without an offset, camera, GPS
** near one of three places, or none of them), each file a known mtime (what a photo
** without a capture time is dated by); then random filters (--taken-after,
** --taken-before, --camera, --near, --has-gps), alone and combined with --under and
** --min-score, each search compared with a brute force over the photos that pass: the
** filter's rules (docs/images.md "Metadata") evaluated here on what the test wrote,
** scores as the dot of `clipdb export`'s vectors with the query image's own embedding
** (`clipdb embed`). Every hit must pass, and the hits must be the best that pass:
** never fewer, never worse. --sort taken / taken-asc: the same hits, ordered by the
** capture time (the file time where there is none), and --json says which one. An
** old database (schema 6) is backfilled by reindex without encoding again.
*/
#include <limits.h>
#include <time.h>

#include <sqlite3.h>

#include "exif_build.h"
#include "lib_util.h"

#define N_PER_DIR 24
#define N_PHOTOS (2 * N_PER_DIR)
#define K 6
#define T0_S 1714521600 /* 2024-05-01T00:00:00Z */

typedef struct truth {
    char path[PATH_MAX];
    eb_meta m;
    char make[32], model[32];
    int64_t mtime_s;
    double lat, lon; /* as the rationals store them */
    int row;         /* in the export */
} truth;

static truth g_t[N_PHOTOS];
static uint64_t g_rng = 28;

static uint32_t rnd(uint32_t n) {
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(g_rng >> 33) % n;
}

static int64_t wall_s(int y, int mo, int d, int h, int mi, int s) {
    struct tm tm = {.tm_year = y - 1900, .tm_mon = mo - 1, .tm_mday = d, .tm_hour = h,
                    .tm_min = mi, .tm_sec = s};
    return (int64_t)timegm(&tm);
}

/* A time bound as the user types it, and how the rules read it. */
typedef struct bound {
    char text[40];
    int64_t wall, utc;
    int zoned;
} bound;

static void random_bound(bound *b) {
    int d = 1 + (int)rnd(4), h = (int)rnd(24), mi = (int)rnd(60), off = ((int)rnd(29) - 14) * 60;
    b->zoned = rnd(2);
    b->wall = wall_s(2024, 5, d, h, mi, 0);
    b->utc = b->wall - (b->zoned ? off * 60 : 0);
    int n = snprintf(b->text, sizeof b->text, "2024-05-%02dT%02d:%02d", d, h, mi);
    if (b->zoned)
        snprintf(b->text + n, sizeof b->text - (size_t)n, "%c%02d:00", off < 0 ? '-' : '+',
                 abs(off) / 60);
}

/* The photo's time against the bound: UTC when both have an offset, else wall clocks; a
** photo without a capture time has its file time, a UTC instant. */
static int64_t photo_vs(const truth *t, const bound *b) {
    int64_t wall, utc;
    int zoned;
    if (t->m.has_time) {
        wall = wall_s(t->m.y, t->m.mo, t->m.d, t->m.h, t->m.mi, t->m.s);
        zoned = t->m.has_offset;
        utc = wall - (zoned ? t->m.offset_min * 60 : 0);
    } else {
        wall = utc = t->mtime_s;
        zoned = 1;
    }
    return zoned && b->zoned ? utc - b->utc : wall - b->wall;
}

/* The instant photos are sorted by. */
static int64_t sort_key(const truth *t) {
    if (!t->m.has_time) return t->mtime_s;
    return wall_s(t->m.y, t->m.mo, t->m.d, t->m.h, t->m.mi, t->m.s) -
           (t->m.has_offset ? t->m.offset_min * 60 : 0);
}

static int icontains(const char *hay, const char *needle) {
    return *needle && strcasestr(hay, needle) != NULL;
}

static double dist_km(double lat1, double lon1, double lat2, double lon2) {
    double r = M_PI / 180, a[3], b[3], c = 0;
    a[0] = cos(lat1 * r) * cos(lon1 * r), a[1] = cos(lat1 * r) * sin(lon1 * r);
    b[0] = cos(lat2 * r) * cos(lon2 * r), b[1] = cos(lat2 * r) * sin(lon2 * r);
    a[2] = sin(lat1 * r), b[2] = sin(lat2 * r);
    for (int i = 0; i < 3; i++) c += (a[i] - b[i]) * (a[i] - b[i]);
    return 2 * 6371.0088 * asin(sqrt(c) / 2);
}

static const double k_places[3][2] = {{48.8566, 2.3522}, {51.5074, -0.1278}, {35.68, 139.69}};
static const char *const k_makes[] = {"Canon", "NIKON CORPORATION", "FUJIFILM"};
static const char *const k_models[] = {"Canon EOS R5", "NIKON Z 6", "X-T4"};

/* Writes the library: two folders of generated photos, the JPEGs tagged. */
static int make_library(const char *root) {
    char dir[PATH_MAX], name[PATH_MAX];
    for (int half = 0; half < 2; half++) {
        snprintf(dir, sizeof dir, "%s/%s", root, half ? "b" : "a");
        if (lu_generate(dir, 2800 + (uint64_t)half, half * N_PER_DIR, N_PER_DIR)) return -1;
        for (int i = 0; i < N_PER_DIR; i++) {
            truth *t = &g_t[half * N_PER_DIR + i];
            size_t n = 0;
            lu_img(dir, half * N_PER_DIR + i, name, sizeof name);
            if (!realpath(name, t->path)) return -1;
            t->mtime_s = T0_S + 3600 * (int64_t)rnd(96);
            if (strstr(t->path, ".jpg")) {
                eb_meta *m = &t->m;
                int cam = (int)rnd(4), place = (int)rnd(3);
                m->has_time = rnd(5) != 0;
                m->y = 2024, m->mo = 5, m->d = 1 + (int)rnd(4);
                m->h = (int)rnd(24), m->mi = (int)rnd(60), m->s = (int)rnd(60);
                m->has_offset = rnd(2), m->offset_min = ((int)rnd(29) - 14) * 60;
                if (cam < 3) {
                    snprintf(t->make, sizeof t->make, "%s", k_makes[cam]);
                    snprintf(t->model, sizeof t->model, "%s", k_models[cam]);
                    m->make = t->make, m->model = t->model;
                }
                m->has_gps = rnd(3) != 0;
                m->lat = k_places[place][0] + (rnd(2001) - 1000.0) / 500;
                m->lon = k_places[place][1] + (rnd(2001) - 1000.0) / 500;
                t->lat = eb_dms_value(m->lat), t->lon = eb_dms_value(m->lon);
                char *jpeg = cli_read_file(t->path, &n);
                buf out;
                if (!jpeg || eb_jpeg_with_exif((const uint8_t *)jpeg, n, m, &out) ||
                    lu_write(t->path, out.p, out.n)) {
                    free(jpeg);
                    return -1;
                }
                free(jpeg);
                free(out.p);
            }
            if (lu_set_mtime(t->path, t->mtime_s * 1000000000)) return -1;
        }
    }
    return 0;
}

typedef struct filter {
    int has_after, has_before, has_near, has_gps, under_b;
    bound after, before;
    const char *camera;
    double lat, lon, km, min_score;
    char near[64];
} filter;

static int passes(const filter *f, const truth *t, const char *root) {
    char b[PATH_MAX];
    snprintf(b, sizeof b, "%s/b/", root);
    if (f->under_b && strncmp(t->path, b, strlen(b))) return 0;
    if (f->has_after && photo_vs(t, &f->after) < 0) return 0;
    if (f->has_before && photo_vs(t, &f->before) >= 0) return 0;
    if (f->camera && !icontains(t->make, f->camera) && !icontains(t->model, f->camera)) return 0;
    if ((f->has_gps || f->has_near) && !t->m.has_gps) return 0;
    if (f->has_near && dist_km(f->lat, f->lon, t->lat, t->lon) > f->km) return 0;
    return 1;
}

/* Runs the search of f; hits' rows (g_t index) and scores into rows/scores. Returns
** the count, -1 on failure. sort: NULL or the --sort value. */
static int run_search(const char *db, const char *query, const char *root, const filter *f,
                      const char *sort, int *rows, double *scores) {
    const char *args[40];
    char ms[32], under[PATH_MAX];
    int n = 0, got = 0;
    cli_run_result r;
    args[n++] = "search", args[n++] = "--db", args[n++] = db, args[n++] = "--image";
    args[n++] = query, args[n++] = "-k", args[n++] = "6";
    if (f->has_after) args[n++] = "--taken-after", args[n++] = f->after.text;
    if (f->has_before) args[n++] = "--taken-before", args[n++] = f->before.text;
    if (f->camera) args[n++] = "--camera", args[n++] = f->camera;
    if (f->has_near) args[n++] = "--near", args[n++] = f->near;
    if (f->has_gps) args[n++] = "--has-gps";
    if (f->under_b) {
        snprintf(under, sizeof under, "%s/b", root);
        args[n++] = "--under", args[n++] = under;
    }
    if (f->min_score > -2) {
        snprintf(ms, sizeof ms, "%.4f", f->min_score);
        args[n++] = "--min-score", args[n++] = ms;
    }
    if (sort) args[n++] = "--sort", args[n++] = sort;
    args[n] = NULL;
    if (lu_expect(args, 0, &r)) return -1;
    for (char *line = r.out; line && *line && got < K;) {
        char *nl = strchr(line, '\n'), *t1 = strchr(line, '\t');
        char *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
        if (nl) *nl = '\0';
        if (!t2) break;
        rows[got] = -1;
        for (int i = 0; i < N_PHOTOS; i++)
            if (!strcmp(g_t[i].path, t2 + 1)) rows[got] = i;
        scores[got++] = atof(t1 + 1);
        line = nl ? nl + 1 : NULL;
    }
    cli_run_free(&r);
    return got;
}

static int by_score_desc(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x < y) - (x > y);
}

CDB_TEST(filtered_search_matches_brute_force) {
    char root[PATH_MAX], db[PATH_MAX], tmp[PATH_MAX];
    LU_NEED_SETUP();
    lu_path(tmp, sizeof tmp, "filters/lib");
    CHECK(lu_mkdirs(tmp) == 0);
    CHECK(realpath(tmp, root) != NULL);
    CHECK(make_library(root) == 0);
    lu_path(db, sizeof db, "filters/db");
    CHECK(lu_init(db) == 0);
    CHECK(lu_expect((const char *[]){"ingest", "--db", db, root, "--quiet", NULL}, 0, NULL) == 0);
    lu_export e;
    CHECK(lu_export_read(db, &e) == 0);
    CHECK_EQ_INT(e.n, N_PHOTOS);
    for (int i = 0; i < N_PHOTOS; i++)
        CHECK((g_t[i].row = lu_export_find(&e, g_t[i].path, NULL)) >= 0);
    const char *query = g_t[5].path;
    float *q = NULL;
    int dim = 0;
    CHECK(lu_embed(&query, 1, &q, &dim) == 0 && dim == e.dim);
    double qn = 0, score[N_PHOTOS];
    for (int d = 0; d < dim; d++) qn += (double)q[d] * q[d];
    for (int i = 0; i < N_PHOTOS; i++) {
        score[i] = 0;
        for (int d = 0; d < dim; d++)
            score[i] += (double)e.vecs[(size_t)g_t[i].row * dim + d] * q[d] / sqrt(qn);
    }
    int total = 0, checked = 0;
    for (int t = 0; t < 60; t++) {
        filter f;
        memset(&f, 0, sizeof f);
        f.min_score = -3;
        int what = 0; /* each filter in one search of three */
        for (int bit = 0; bit < 7; bit++) what |= (rnd(3) == 0) << bit;
        if (what & 1) f.has_after = 1, random_bound(&f.after);
        if (what & 2) f.has_before = 1, random_bound(&f.before);
        if (what & 4) f.camera = (const char *[]){"canon", "Nikon z", "x-t", "EOS", "o"}[rnd(5)];
        if (what & 8) {
            int p = (int)rnd(3);
            f.has_near = 1, f.lat = k_places[p][0], f.lon = k_places[p][1];
            f.km = 30 + rnd(200);
            snprintf(f.near, sizeof f.near, "%.4f,%.4f,%.0f", f.lat, f.lon, f.km);
        }
        if (what & 16) f.has_gps = 1;
        if (what & 32) f.under_b = 1;
        if (what & 64) f.min_score = 0.3 + rnd(50) / 100.0;
        /* The brute force: the scores of every photo that passes, best first. */
        double want[N_PHOTOS];
        int n_want = 0, ambiguous = 0;
        for (int i = 0; i < N_PHOTOS; i++) {
            if (f.has_near && g_t[i].m.has_gps &&
                fabs(dist_km(f.lat, f.lon, g_t[i].lat, g_t[i].lon) - f.km) < 1e-3)
                ambiguous = 1;
            if (f.min_score > -2 && fabs(score[i] - f.min_score) < 2e-4) ambiguous = 1;
            if (passes(&f, &g_t[i], root) && score[i] >= f.min_score) want[n_want++] = score[i];
        }
        if (ambiguous) continue;
        qsort(want, (size_t)n_want, sizeof *want, by_score_desc);
        int rows[K];
        double got[K];
        int n = run_search(db, query, root, &f, NULL, rows, got);
        CHECK_MSG(n == (n_want < K ? n_want : K), "filter %d (what %d): %d hits, %d pass", t, what,
                  n, n_want);
        for (int i = 0; i < n; i++) {
            CHECK_MSG(rows[i] >= 0 && passes(&f, &g_t[rows[i]], root), "filter %d: hit %d fails",
                      t, i);
            if (rows[i] >= 0) CHECK_NEAR(got[i], score[rows[i]], 2e-4);
            CHECK_MSG(fabs(got[i] - want[i]) < 2e-4, "filter %d rank %d: %.4f, best %.4f", t, i,
                      got[i], want[i]);
        }
        total += n_want;
        checked++;
        /* By capture time: the same hits, newest (or oldest) first. */
        if (t % 3 == 0 && n > 1) {
            int rows2[K];
            double got2[K];
            const char *sort = t % 2 ? "taken-asc" : "taken";
            int n2 = run_search(db, query, root, &f, sort, rows2, got2);
            CHECK_EQ_INT(n2, n);
            for (int i = 0; i < n2; i++) {
                int in = 0;
                for (int j = 0; j < n; j++) in |= rows2[i] == rows[j];
                CHECK(in);
                if (i && rows2[i] >= 0 && rows2[i - 1] >= 0) {
                    int64_t a = sort_key(&g_t[rows2[i - 1]]), b = sort_key(&g_t[rows2[i]]);
                    CHECK_MSG(t % 2 ? a <= b : a >= b, "%s: rank %d out of order", sort, i);
                }
            }
        }
    }
    CHECK(checked >= 40);
    /* The filters selected something on the whole, and not everything. */
    CHECK_MSG(total > checked * 3 && total < checked * N_PHOTOS * 3 / 4,
              "%d photos passed %d filters", total, checked);
    free(q);
    lu_export_free(&e);
}

/* --json shows each hit's metadata: the capture time as written, or the file time
** marked "file". */
CDB_TEST(json_shows_metadata) {
    char db[PATH_MAX];
    cli_run_result r;
    int shown = 0;
    LU_NEED_SETUP();
    lu_path(db, sizeof db, "filters/db");
    for (int i = 0; i < N_PHOTOS; i++) {
        const truth *t = &g_t[i];
        if (!t->path[0]) continue;
        CHECK(lu_expect((const char *[]){"search", "--db", db, "--image", t->path, "-k", "1",
                                         "--json", NULL},
                        0, &r) == 0);
        char want[64];
        if (t->m.has_time) {
            int n = snprintf(want, sizeof want, "\"taken\": \"2024-05-%02dT%02d:%02d:%02d", t->m.d,
                             t->m.h, t->m.mi, t->m.s);
            (void)n;
        }
        if (strstr(r.out, t->path)) { /* the photo itself is its best hit */
            shown++;
            if (t->m.has_time) CHECK_MSG(strstr(r.out, want) != NULL, "%s\n%s", want, r.out);
            CHECK(strstr(r.out, t->m.has_time ? "\"taken_source\": \"original\""
                                              : "\"taken_source\": \"file\"") != NULL);
            if (t->m.make) CHECK(strstr(r.out, t->m.model) != NULL);
        }
        cli_run_free(&r);
    }
    CHECK_MSG(shown > N_PHOTOS / 2, "%d photos found themselves", shown);
    /* export: photos.jsonl, a row per path of paths.txt, says the same */
    char out[PATH_MAX], p[PATH_MAX + 32];
    lu_path(out, sizeof out, "filters/export");
    CHECK(lu_expect((const char *[]){"export", "--db", db, "--out", out, "--quiet", NULL}, 0,
                    NULL) == 0);
    snprintf(p, sizeof p, "%s/paths.txt", out);
    char *paths = cli_read_file(p, NULL);
    snprintf(p, sizeof p, "%s/photos.jsonl", out);
    char *meta = cli_read_file(p, NULL);
    int rows = 0;
    for (char *a = paths, *b = meta; a && b && *a && *b; rows++) {
        char *na = strchr(a, '\n'), *nb = strchr(b, '\n');
        if (!na || !nb) break;
        *na = *nb = '\0';
        for (int i = 0; i < N_PHOTOS; i++) {
            const truth *t = &g_t[i];
            if (strcmp(t->path, a)) continue;
            char want[64];
            snprintf(want, sizeof want, "\"taken\":\"2024-05-%02dT%02d:%02d:%02d", t->m.d, t->m.h,
                     t->m.mi, t->m.s);
            if (t->m.has_time) CHECK_MSG(strstr(b, want) != NULL, "%s: %s", a, b);
            else CHECK_MSG(strstr(b, "\"taken_source\":\"file\"") != NULL, "%s: %s", a, b);
            if (t->m.make) CHECK_MSG(strstr(b, t->m.make) != NULL, "%s: %s", a, b);
        }
        a = na + 1, b = nb + 1;
    }
    CHECK_EQ_INT(rows, N_PHOTOS);
    free(paths);
    free(meta);
}

/* A database from before metadata (schema 6: no photo_meta table): searches are
** refused until a writer opens it; `reindex` migrates it and reads every photo's
** metadata from its bytes without encoding anything again (all unchanged, nothing
** added or changed, the same vectors), after which the filters find the photos. */
CDB_TEST(reindex_backfills_an_old_database) {
    char db[PATH_MAX], cat[PATH_MAX + 16];
    cli_run_result r;
    sqlite3 *c = NULL;
    lu_export before, after;
    LU_NEED_SETUP();
    lu_path(db, sizeof db, "filters/db");
    CHECK(lu_export_read(db, &before) == 0);
    snprintf(cat, sizeof cat, "%s/catalog.db", db);
    CHECK(sqlite3_open(cat, &c) == SQLITE_OK);
    CHECK(sqlite3_exec(c, "DROP TABLE photo_meta; UPDATE meta SET value=6 WHERE "
                          "key='schema_version'; PRAGMA wal_checkpoint(TRUNCATE);",
                       NULL, NULL, NULL) == SQLITE_OK);
    sqlite3_close(c);
    CHECK(lu_expect((const char *[]){"search", "--db", db, "--image", g_t[0].path, NULL}, 1,
                    NULL) == 1);
    CHECK(lu_expect((const char *[]){"reindex", "--db", db, "--json", NULL}, 0, &r) == 0);
    CHECK_MSG(strstr(r.out, "\"added\": 0") && strstr(r.out, "\"changed\": 0"), "%s", r.out);
    char unchanged[64];
    snprintf(unchanged, sizeof unchanged, "\"unchanged\": %d", N_PHOTOS);
    CHECK_MSG(strstr(r.out, unchanged) != NULL, "%s", r.out);
    cli_run_free(&r);
    CHECK(lu_export_read(db, &after) == 0);
    CHECK_EQ_INT(after.n, before.n);
    for (int i = 0; i < before.n && i < after.n; i++) {
        int j = lu_export_find(&after, before.paths[i], NULL);
        CHECK(j >= 0 && !memcmp(after.vecs + (size_t)j * after.dim,
                                before.vecs + (size_t)i * before.dim, sizeof(float) * before.dim));
    }
    lu_export_free(&before);
    lu_export_free(&after);
    /* Every tagged photo is found by its camera and its capture time again. */
    int tagged = 0;
    for (int i = 0; i < N_PHOTOS; i++) {
        const truth *t = &g_t[i];
        if (!t->m.make || !t->m.has_time) continue;
        char when[40];
        snprintf(when, sizeof when, "2024-05-%02dT%02d:%02d:%02d", t->m.d, t->m.h, t->m.mi, t->m.s);
        CHECK(lu_expect((const char *[]){"search", "--db", db, "--image", t->path, "-k", "1",
                                         "--camera", t->m.model, "--taken-after", when,
                                         "--paths", NULL},
                        0, &r) == 0);
        CHECK_MSG(strstr(r.out, t->path) != NULL, "%s: %s", t->path, r.out);
        cli_run_free(&r);
        if (++tagged == 8) break;
    }
    CHECK(tagged > 0);
}

CDB_TEST_MAIN(filtered_search_matches_brute_force, json_shows_metadata,
              reindex_backfills_an_old_database)
