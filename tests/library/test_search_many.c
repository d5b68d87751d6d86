/*
** test_search_many.c: one search over several databases (issue 29 part 3) is exact.
** The oracle is a database the test builds of all the roots at once: the encoder is
** batch-invariant, so its vectors are bit for bit those of three databases built of
** one root each (disjoint roots a, b, c), and `clipdb search --db A --db B --db C`
** must print the hits and scores `clipdb search --db ALL` prints, for random queries
** (text, --not, --image), k, --offset, --under, --min-score, --sort and
** --taken-after/--before. The roots share photos (copies of the same bytes in two
** databases: equal scores, so the tie order is tested) and file times (equal times:
** the time sorts' tie order). In-process, cdb_engine_search_many against
** cdb_engine_search on the oracle compares the score bits and the paging window of
** the server's time sorts (sort_window). Databases of different models are refused,
** and one database given twice.
**
** Copies collapsed across databases (issue 28): three more roots of pictures with
** copies in another root (the same bytes, a half-size copy, a noisy copy) and in the
** same root; the collapsed search over their databases (a reindex stored the phashes
** in each) must equal the collapsed search of one database of all three roots: the
** hits, scores, and each hit's copies (as paths).
*/
#include <limits.h>

#include "engine/engine.h"
#include "lib_util.h"

#define N_PER_ROOT 14
#define T0_NS 1714521600000000000LL /* 2024-05-01T00:00:00Z */

static char g_root[3][PATH_MAX], g_db[3][PATH_MAX], g_all[PATH_MAX], g_files[64][PATH_MAX];
static int g_n_files, g_ready;
static uint64_t g_rng = 29;

static uint32_t rnd(uint32_t n) {
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(g_rng >> 33) % n;
}

/* Three roots of generated photos, some copied into another root, each file a file
** time from a few seconds (many equal); a database per root and one of all. */
static int fixtures(void) {
    char all[PATH_MAX], name[PATH_MAX], copy[PATH_MAX];
    if (g_ready) return 0;
    for (int r = 0; r < 3; r++) {
        lu_path(g_root[r], sizeof g_root[r], r == 0 ? "a" : r == 1 ? "b" : "c");
        if (lu_generate(g_root[r], 290 + (uint64_t)r, r * N_PER_ROOT, N_PER_ROOT)) return -1;
        for (int i = 0; i < N_PER_ROOT; i++)
            snprintf(g_files[g_n_files++], PATH_MAX, "%s",
                     lu_img(g_root[r], r * N_PER_ROOT + i, name, sizeof name));
    }
    for (int i = 0; i < 3; i++) { /* the same bytes in two databases */
        snprintf(copy, sizeof copy, "%s/copy_%d%s", g_root[(i + 1) % 3], i,
                 strrchr(g_files[i * N_PER_ROOT + 1], '.'));
        if (lu_copy(g_files[i * N_PER_ROOT + 1], copy)) return -1;
        snprintf(g_files[g_n_files++], PATH_MAX, "%s", copy);
    }
    for (int i = 0; i < g_n_files; i++)
        if (lu_set_mtime(g_files[i], T0_NS + (int64_t)rnd(6) * 3600 * 1000000000LL)) return -1;
    for (int r = 0; r < 3; r++) {
        snprintf(g_db[r], sizeof g_db[r], "%s.db", g_root[r]);
        if (lu_db_of(g_db[r], (const char *[]){g_root[r], NULL}, r == 1)) return -1;
    }
    lu_path(g_all, sizeof g_all, "all.db");
    if (lu_db_of(g_all, (const char *[]){g_root[0], g_root[1], g_root[2], NULL}, 0)) return -1;
    (void)all;
    g_ready = 1;
    return 0;
}

#define NEED_FIXTURES()                                    \
    do {                                                   \
        LU_NEED_SETUP();                                   \
        if (fixtures() != 0) CDB_TEST_FAIL_("cannot build the databases"); \
    } while (0)

/* The "score" and "path" lines of `search --json` (what the hits are, in order; ids
** differ between databases by design). Heap. */
static char *hit_lines(const char *json) {
    size_t n = strlen(json), o = 0;
    char *out = malloc(n + 1);
    for (const char *l = json; out && *l;) {
        const char *e = strchr(l, '\n');
        size_t len = e ? (size_t)(e - l) : strlen(l);
        if ((strstr(l, "\"score\":") && strstr(l, "\"score\":") < l + len) ||
            (strstr(l, "\"path\":") && strstr(l, "\"path\":") < l + len)) {
            memcpy(out + o, l, len);
            o += len;
            out[o++] = '\n';
        }
        l += len + (e != NULL);
    }
    if (out) out[o] = '\0';
    return out;
}

static const char *const k_words[] = {"red", "blue", "green", "circle", "square", "star",
                                      "triangle", "a yellow star", "small", "striped"};

/* Random search arguments after `search --db ... --json` into args from at; returns the
** count. bufs: storage for the numbers. */
static int random_args(const char **args, int at, char bufs[6][64]) {
    int n = at, kind = (int)rnd(4);
    snprintf(bufs[0], 64, "%u", 1 + rnd(12));
    args[n++] = "-k";
    args[n++] = bufs[0];
    if (rnd(2)) {
        snprintf(bufs[1], 64, "%u", rnd(10));
        args[n++] = "--offset";
        args[n++] = bufs[1];
    }
    if (rnd(4) == 0) {
        args[n++] = "--under";
        args[n++] = g_root[rnd(3)];
    }
    if (rnd(5) == 0) {
        snprintf(bufs[2], 64, "%.2f", 0.3 + 0.05 * rnd(6));
        args[n++] = "--min-score";
        args[n++] = bufs[2];
    }
    if (rnd(3) == 0) {
        static const char *const sorts[] = {"time", "taken", "taken-asc"};
        args[n++] = "--sort";
        args[n++] = sorts[rnd(3)];
    }
    if (rnd(4) == 0) {
        snprintf(bufs[3], 64, "2024-05-01T%02u:00Z", rnd(6));
        args[n++] = rnd(2) ? "--taken-after" : "--taken-before";
        args[n++] = bufs[3];
    }
    if (kind == 0) { /* an example image: its copies score 1 in two databases */
        args[n++] = "--image";
        args[n++] = g_files[rnd((uint32_t)g_n_files)];
    } else {
        uint32_t w = rnd(10);
        args[n++] = k_words[w];
        if (kind == 1) args[n++] = k_words[rnd(10)];
        if (kind == 2) { /* another word: "a - a" cancels out */
            args[n++] = "--not";
            args[n++] = k_words[(w + 1 + rnd(9)) % 10];
        }
    }
    args[n] = NULL;
    return n;
}

CDB_TEST(cli_many_equals_all_roots) {
    NEED_FIXTURES();
    int nonempty = 0;
    for (int t = 0; t < 40; t++) {
        /* the databases in another order than their paths' (ties go by path) */
        /* every file (--no-collapse): the collapsed searches are compared below */
        const char *many[40] = {"search", "--db", g_db[2], "--db", g_db[0], "--db", g_db[1],
                                "--json", "--no-collapse"},
                   *one[40] = {"search", "--db", g_all, "--json", "--no-collapse"};
        char bufs[6][64];
        cli_run_result rm, ro;
        uint64_t seed = g_rng;
        int n = random_args(many, 9, bufs);
        g_rng = seed; /* the same draws for the oracle's command */
        random_args(one, 5, bufs);
        CHECK_EQ_INT(lu_expect(many, 0, &rm), 0);
        CHECK_EQ_INT(lu_expect(one, 0, &ro), 0);
        char *a = hit_lines(rm.out), *b = hit_lines(ro.out);
        CHECK(a && b);
        if (strcmp(a, b)) {
            fprintf(stderr, "    search");
            for (int i = 9; i < n; i++) fprintf(stderr, " %s", many[i]);
            fprintf(stderr, "\n    many:\n%s\n    all:\n%s\n", a, b);
        }
        CHECK_EQ_STR(a, b);
        nonempty += a[0] != '\0';
        free(a);
        free(b);
        cli_run_free(&rm);
        cli_run_free(&ro);
    }
    CHECK(nonempty >= 30); /* the comparisons compared hits */
}

/* Both plain output forms agree too (the text lines and --paths). */
CDB_TEST(cli_many_text_and_paths) {
    NEED_FIXTURES();
    cli_run_result rm, ro;
    const char *img = g_files[1]; /* copied into b: two hits of score 1 */
    CHECK_EQ_INT(lu_expect((const char *[]){"search", "--db", g_db[1], "--db", g_db[2], "--db",
                                            g_db[0], "-k", "5", "--no-collapse", "--image", img,
                                            NULL},
                           0, &rm),
                 0);
    CHECK_EQ_INT(lu_expect((const char *[]){"search", "--db", g_all, "-k", "5", "--no-collapse",
                                            "--image", img, NULL},
                           0, &ro),
                 0);
    CHECK_EQ_STR(rm.out, ro.out);
    CHECK(strstr(rm.out, "1\t1.0000\t") && strstr(rm.out, "2\t1.0000\t"));
    cli_run_free(&rm);
    cli_run_free(&ro);
}

/* 1 when a and b are one photo (path) with the same score, bit for bit. */
static int same_hit(const cdb_engine_hit *a, const cdb_engine_hit *b) {
    return !memcmp(&a->score, &b->score, sizeof a->score) && !strcmp(a->path, b->path);
}

/* es[i]: the database dbs[perm[i]] opened; *all: the oracle's. */
static cdb_status open_many(char dbs[3][PATH_MAX], const int *perm, const char *all_db,
                            cdb_engine **es, cdb_engine **all) {
    cdb_status st = CDB_OK;
    for (int i = 0; i < 3 && st == CDB_OK; i++) st = cdb_engine_open(dbs[perm[i]], NULL, &es[i]);
    return st == CDB_OK ? cdb_engine_open(all_db, NULL, all) : st;
}

/* The engine: cdb_engine_search_many against cdb_engine_search on the oracle, score
** bits and paths, with offsets and the server's time window (sort_window). */
CDB_TEST(engine_many_equals_all_roots) {
    NEED_FIXTURES();
    cdb_engine *es[3] = {NULL, NULL, NULL}, *all = NULL;
    static const int perm[3] = {2, 0, 1}; /* es[i] is root perm[i]'s: not the paths' order */
    CHECK_OK(open_many(g_db, perm, g_all, es, &all));
    for (int t = 0; t < 60; t++) {
        cdb_engine_query q;
        cdb_engine_search_params p = cdb_engine_search_params_default();
        cdb_engine_result rm, ro;
        char after[40];
        cdb_engine_under u = {g_root[rnd(3)], 1};
        const char *img = g_files[rnd((uint32_t)g_n_files)];
        memset(&q, 0, sizeof q);
        if (rnd(3) == 0) {
            q.image_paths = &img;
            q.n_image_paths = 1;
        } else {
            q.text = k_words[rnd(10)];
        }
        p.k = 1 + (int)rnd(15);
        p.offset = (int)rnd(12);
        if (rnd(3) == 0) {
            p.sort = (cdb_engine_sort)(1 + rnd(3));
            p.sort_window = rnd(2) ? 0 : 5 + (int)rnd(30);
        }
        if (rnd(4) == 0) {
            p.unders = &u;
            p.n_unders = 1;
        }
        if (rnd(4) == 0) {
            snprintf(after, sizeof after, "2024-05-01T%02u:00Z", rnd(6));
            p.taken_after = after;
        }
        if (rnd(5) == 0) p.min_score = 0.4f;
        CHECK_OK(cdb_engine_search_many(es, 3, &q, &p, &rm));
        CHECK_OK(cdb_engine_search(all, &q, &p, &ro));
        CHECK_EQ_INT(rm.n, ro.n);
        for (int i = 0; i < rm.n && i < ro.n; i++) {
            CHECK_MSG(same_hit(&rm.hits[i], &ro.hits[i]), "hit %d: %s %.9g, one database %s %.9g",
                      i, rm.hits[i].path, rm.hits[i].score, ro.hits[i].path, ro.hits[i].score);
            /* the hit's database holds the path under that id */
            CHECK(rm.hits[i].db >= 0 && rm.hits[i].db < 3);
            CHECK(!strncmp(rm.hits[i].path, g_root[perm[rm.hits[i].db]], strlen(g_root[0])));
        }
        cdb_engine_result_free(&rm);
        cdb_engine_result_free(&ro);
    }
    for (int i = 0; i < 3; i++) cdb_engine_close(es[i]);
    cdb_engine_close(all);
}

/* "More like this" ids name the photos of one database (like_db): the same hits as
** the oracle's ids of the same photo. */
CDB_TEST(engine_many_like_db) {
    NEED_FIXTURES();
    cdb_engine *es[3] = {NULL, NULL, NULL}, *all = NULL;
    cdb_engine_result rm, ro, self;
    cdb_engine_query q;
    cdb_engine_search_params p = cdb_engine_search_params_default();
    const char *img = g_files[N_PER_ROOT + 3]; /* in b */
    int64_t id_b, id_all;
    for (int i = 0; i < 3; i++) CHECK_OK(cdb_engine_open(g_db[i], NULL, &es[i]));
    CHECK_OK(cdb_engine_open(g_all, NULL, &all));
    memset(&q, 0, sizeof q);
    q.image_paths = &img;
    q.n_image_paths = 1;
    p.k = 1;
    CHECK_OK(cdb_engine_search(es[1], &q, &p, &self));
    CHECK_OK(cdb_engine_search(all, &q, &p, &ro));
    CHECK_EQ_INT(self.n, 1);
    id_b = self.hits[0].id;
    id_all = ro.hits[0].id;
    cdb_engine_result_free(&self);
    cdb_engine_result_free(&ro);
    memset(&q, 0, sizeof q);
    p.k = 9;
    q.like_ids = &id_b;
    q.n_like_ids = 1;
    q.like_db = 1;
    CHECK_OK(cdb_engine_search_many(es, 3, &q, &p, &rm));
    q.like_ids = &id_all;
    q.like_db = 0;
    CHECK_OK(cdb_engine_search(all, &q, &p, &ro));
    CHECK_EQ_INT(rm.n, ro.n);
    for (int i = 0; i < rm.n && i < ro.n; i++) {
        CHECK(rm.hits[i].score == ro.hits[i].score);
        CHECK_EQ_STR(rm.hits[i].path, ro.hits[i].path);
    }
    cdb_engine_result_free(&rm);
    cdb_engine_result_free(&ro);
    q.like_db = 3; /* no such database */
    CHECK(cdb_engine_search_many(es, 3, &q, &p, &rm) == CDB_INVALID);
    for (int i = 0; i < 3; i++) cdb_engine_close(es[i]);
    cdb_engine_close(all);
}

/* A database of another model (one weight's bit flipped: another weights hash) is
** refused, naming both; nothing is printed on stdout. */
CDB_TEST(cli_many_refuses_other_model) {
    NEED_FIXTURES();
    char dir[PATH_MAX], w[PATH_MAX + 40], db[PATH_MAX];
    const char *model2;
    size_t n = 0;
    char *b;
    cli_run_result r;
    lu_path(dir, sizeof dir, "second");
    CHECK_EQ_INT(lu_mkdirs(dir), 0);
    model2 = dir;
    { /* the model folder's files, copied */
        DIR *d = opendir(lu_model);
        struct dirent *e;
        char from[PATH_MAX + 300], to[PATH_MAX + 300];
        CHECK(d != NULL);
        while (d && (e = readdir(d)))
            if (e->d_name[0] != '.') {
                snprintf(from, sizeof from, "%s/%s", lu_model, e->d_name);
                snprintf(to, sizeof to, "%s/%s", dir, e->d_name);
                CHECK_EQ_INT(lu_copy(from, to), 0);
            }
        if (d) closedir(d);
    }
    snprintf(w, sizeof w, "%s/model.safetensors", model2);
    CHECK((b = cli_read_file(w, &n)) != NULL && n > 8);
    b[n - 4] ^= 1;
    CHECK_EQ_INT(lu_write(w, b, n), 0);
    free(b);
    lu_path(db, sizeof db, "second.db");
    CHECK_EQ_INT(lu_expect((const char *[]){"init", "--db", db, "--model", model2, "-q", NULL},
                           0, NULL),
                 0);
    CHECK_EQ_INT(lu_expect((const char *[]){"ingest", "--db", db, g_root[0], "-q", NULL}, 0,
                           NULL),
                 0);
    CHECK_EQ_INT(lu_run((const char *[]){"search", "--db", g_db[1], "--db", db, "red", NULL},
                        &r),
                 1);
    CHECK(strstr(r.err, "different models") != NULL);
    CHECK(strstr(r.err, g_db[1]) && strstr(r.err, db));
    CHECK_EQ_INT((int)r.out_len, 0);
    cli_run_free(&r);
    { /* one database twice would count its photos twice */
        char again[PATH_MAX + 2];
        snprintf(again, sizeof again, "%s/", g_db[1]);
        CHECK_EQ_INT(lu_run((const char *[]){"search", "--db", g_db[1], "--db", again, "red",
                                             NULL},
                            &r),
                     2);
        CHECK(strstr(r.err, "one database") != NULL);
        cli_run_free(&r);
    }
}

/* ---- copies collapsed across databases ---------------------------------------------- */

static char g_croot[3][PATH_MAX], g_cdb[3][PATH_MAX], g_call[PATH_MAX];
static int g_cready;

static int copy_fixtures(void) {
    if (g_cready) return 0;
    if (lu_copy_fixtures(g_croot, g_cdb, g_call)) return -1;
    g_cready = 1;
    return 0;
}

/* The path of file id of e (heap), or NULL. */
static char *path_of(cdb_engine *e, int64_t id) {
    cdb_engine_file f;
    char *p = NULL;
    if (cdb_engine_file_get(e, id, &f) != CDB_OK) return NULL;
    p = strdup(f.path);
    cdb_engine_file_clear(&f);
    return p;
}

static int str_cmp(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* h's copies as sorted paths, one per line (heap): of es[copies_db[i]] (or all's). */
static char *copy_paths(cdb_engine *const *es, cdb_engine *all, const cdb_engine_hit *h) {
    char **v = calloc((size_t)h->n_copies + 1, sizeof *v), *out;
    size_t len = 1;
    for (int i = 0; v && i < h->n_copies; i++) {
        cdb_engine *e = all ? all : es[h->copies_db ? h->copies_db[i] : h->db];
        v[i] = path_of(e, h->copies[i]);
        len += (v[i] ? strlen(v[i]) : 1) + 1;
    }
    if (!v || !(out = malloc(len))) {
        free(v);
        return NULL;
    }
    qsort(v, (size_t)h->n_copies, sizeof *v, str_cmp);
    out[0] = '\0';
    for (int i = 0; i < h->n_copies; i++) {
        strcat(out, v[i] ? v[i] : "?");
        strcat(out, "\n");
        free(v[i]);
    }
    free(v);
    return out;
}

/* cdb_engine_search_many with collapse against cdb_engine_search of one database of all
** the roots: hits, score bits and each hit's copies (paths), for random queries. */
CDB_TEST(engine_many_collapses_across_databases) {
    LU_NEED_SETUP();
    if (copy_fixtures() != 0) CDB_TEST_FAIL_("cannot build the databases");
    cdb_engine *es[3] = {NULL, NULL, NULL}, *all = NULL;
    static const int perm[3] = {1, 2, 0};
    int cross = 0, fewer = 0;
    CHECK_OK(open_many(g_cdb, perm, g_call, es, &all));
    for (int t = 0; t < 40; t++) {
        cdb_engine_query q;
        cdb_engine_search_params p = cdb_engine_search_params_default();
        cdb_engine_result rm, ro;
        cdb_engine_under u = {g_croot[rnd(3)], 1};
        memset(&q, 0, sizeof q);
        q.text = k_words[rnd(10)];
        p.collapse = 1;
        p.k = 1 + (int)rnd(t < 10 ? 40 : 8);
        p.offset = (int)rnd(10);
        if (rnd(4) == 0) {
            p.sort = CDB_ENGINE_SORT_TIME;
            p.sort_window = rnd(2) ? 0 : 5 + (int)rnd(20);
        }
        if (rnd(4) == 0) {
            p.unders = &u;
            p.n_unders = 1;
        }
        if (rnd(5) == 0) p.min_score = 0.2f;
        CHECK_OK(cdb_engine_search_many(es, 3, &q, &p, &rm));
        CHECK_OK(cdb_engine_search(all, &q, &p, &ro));
        CHECK_MSG(rm.n == ro.n, "query %s k %d offset %d: %d hits, one database %d", q.text,
                  p.k, p.offset, rm.n, ro.n);
        for (int i = 0; i < rm.n && i < ro.n; i++) {
            CHECK_MSG(same_hit(&rm.hits[i], &ro.hits[i]), "hit %d: %s %.9g, one database %s %.9g",
                      i, rm.hits[i].path, rm.hits[i].score, ro.hits[i].path, ro.hits[i].score);
            CHECK_EQ_INT(rm.hits[i].n_copies, ro.hits[i].n_copies);
            char *cm = copy_paths(es, NULL, &rm.hits[i]), *co = copy_paths(NULL, all, &ro.hits[i]);
            CHECK(cm && co);
            if (cm && co) CHECK_EQ_STR(cm, co);
            for (int c = 0; c < rm.hits[i].n_copies; c++)
                cross += rm.hits[i].copies_db && rm.hits[i].copies_db[c] != rm.hits[i].db;
            free(cm);
            free(co);
        }
        cdb_engine_result_free(&rm);
        cdb_engine_result_free(&ro);
        if (t == 0) { /* the whole library: collapsing took copies out */
            p.k = 100;
            p.offset = 0;
            p.sort = CDB_ENGINE_SORT_SCORE;
            p.n_unders = 0;
            p.min_score = -1;
            CHECK_OK(cdb_engine_search_many(es, 3, &q, &p, &rm));
            fewer = rm.n;
            cdb_engine_result_free(&rm);
        }
    }
    CHECK_MSG(cross > 10, "only %d copies in another database than their hit's", cross);
    CHECK_MSG(fewer > 0 && fewer <= 30 - 9, "%d collapsed hits of 30 files", fewer);
    for (int i = 0; i < 3; i++) cdb_engine_close(es[i]);
    cdb_engine_close(all);
}

/* The CLI: `search --db A --db B --db C --json` (collapsed, the default) prints the hits
** of `search --db ALL --json`. */
CDB_TEST(cli_many_collapses_across_databases) {
    LU_NEED_SETUP();
    if (copy_fixtures() != 0) CDB_TEST_FAIL_("cannot build the databases");
    for (int t = 0; t < 6; t++) {
        char k[16];
        cli_run_result rm, ro;
        snprintf(k, sizeof k, "%u", 3 + rnd(20));
        const char *w = k_words[rnd(10)];
        CHECK_EQ_INT(lu_expect((const char *[]){"search", "--db", g_cdb[2], "--db", g_cdb[0],
                                                "--db", g_cdb[1], "--json", "-k", k, w, NULL},
                               0, &rm),
                     0);
        CHECK_EQ_INT(
            lu_expect((const char *[]){"search", "--db", g_call, "--json", "-k", k, w, NULL}, 0,
                      &ro),
            0);
        char *a = hit_lines(rm.out), *b = hit_lines(ro.out);
        CHECK(a && b);
        if (a && b) CHECK_EQ_STR(a, b);
        CHECK(strstr(rm.out, "\"copies_db\"") != NULL);
        free(a);
        free(b);
        cli_run_free(&rm);
        cli_run_free(&ro);
    }
}

CDB_TEST_MAIN(cli_many_equals_all_roots, cli_many_text_and_paths, engine_many_equals_all_roots,
              engine_many_like_db, cli_many_refuses_other_model,
              engine_many_collapses_across_databases, cli_many_collapses_across_databases)
