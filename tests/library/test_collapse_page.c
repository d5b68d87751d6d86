/*
** test_collapse_page.c: a one-shot search groups only its page's hits
** (cdb_eng_groups_build_page: the closure of the hits over exact and near edges, then
** the dupes rule over the closure) and must collapse copies exactly as the groups of the
** whole library do. The oracle: cdb_dupes_find over every file of the library, its
** exact and near groups joined, from the facts this test wrote (content hashes, phashes,
** cameras, capture times) and the vectors read back from the shards; applied to the
** search's whole ranking (collapse off): the first hit of each group in rank order,
** with the group's other files as its copies. Each query is searched on a fresh handle
** (its first collapsed search: the page's groups) and again on the same handle (the
** whole library's groups, cached): both must equal the oracle.
** The library holds what makes a group more than the hits' neighbours: exact copies
** without a phash, near copies, chains whose ends are beyond the phash bound of each
** other (two steps of the closure), copies refused as distinct shots (two cameras, two
** capture times), phashes within the bound but vectors apart, and a crowd of more than
** CDB_DUPES_CROWD phashes within the bound of each other (never near, still exact).
** No model is needed: the database is filled through db/ and searched with raw vectors.
*/
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdb_test.h"
#include "db/db.h"
#include "dupes/dupes.h"
#include "engine/engine.h"

#define DIM 32
#define N_PIC 300
#define N_CROWD 72
#define MAX_FILES 4000
#define K 12

/* What the test wrote of each file (the oracle's facts). */
typedef struct file {
    int64_t id;
    uint8_t hash[CDB_DB_HASH_BYTES];
    int has_phash;
    uint64_t phash;
    char camera[16];
    int has_taken;
    int64_t taken_ms;
    float vec[DIM];
} file;

static file g_f[MAX_FILES];
static int g_n;
static int g_chain_end[N_PIC], g_n_chain, g_crowd0; /* what queries aim at */
static uint64_t g_rng = 0xc011a75e;

static uint64_t rnd(void) {
    g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
    return g_rng;
}

static double gauss(void) {
    double u = ((double)(rnd() >> 11) + 0.5) / 9007199254740992.0;
    double v = ((double)(rnd() >> 11) + 0.5) / 9007199254740992.0;
    return sqrt(-2 * log(u)) * cos(6.283185307179586 * v);
}

/* x = base + s * noise (base NULL: noise alone). */
static void draw(float *x, const float *base, double s) {
    for (int i = 0; i < DIM; i++) x[i] = (float)((base ? base[i] : 0) + s * gauss());
}

/* phash with `bits` distinct bits flipped. */
static uint64_t flip(uint64_t h, int bits) {
    uint64_t m = 0;
    while (__builtin_popcountll(m) < bits) m |= 1ull << (rnd() % 64);
    return h ^ m;
}

/* A new file: a fresh content hash unless same_as >= 0 (that file's bytes). */
static file *add(int same_as, const float *vec, int has_phash, uint64_t phash) {
    file *f = &g_f[g_n];
    memset(f, 0, sizeof *f);
    if (same_as >= 0) memcpy(f->hash, g_f[same_as].hash, sizeof f->hash);
    else for (int i = 0; i < CDB_DB_HASH_BYTES; i += 8) {
            uint64_t r = rnd();
            memcpy(f->hash + i, &r, 8);
        }
    memcpy(f->vec, vec, sizeof f->vec);
    f->has_phash = has_phash;
    f->phash = phash;
    g_n++;
    return f;
}

/* The library: pictures with copies of every kind (the top of the file). */
static void make_library(void) {
    float v[DIM], w[DIM];
    g_n = g_n_chain = 0;
    for (int p = 0; p < N_PIC; p++) {
        int base = g_n, kind = (int)(rnd() % 8);
        uint64_t ph = rnd();
        draw(v, NULL, 1.0);
        add(-1, v, rnd() % 10 != 0, ph);
        if (kind == 0) { /* exact copies, one without a phash */
            add(base, v, 1, ph);
            add(base, v, 0, 0);
        } else if (kind == 1) { /* near copies */
            for (int c = 0, n = 1 + (int)(rnd() % 3); c < n; c++) {
                draw(w, v, 0.03);
                add(-1, w, 1, flip(ph, (int)(rnd() % 11)));
            }
        } else if (kind == 2) { /* a chain of 5, its far end among look-alikes */
            uint64_t h = ph;
            memcpy(w, v, sizeof w);
            for (int c = 0; c < 4; c++) { /* each link: cosine about 0.94, 7 bits */
                draw(w, w, 0.35);
                h = flip(h, 7);
                if (c == 3) g_chain_end[g_n_chain++] = g_n;
                add(-1, w, 1, h);
            }
            for (int c = 0; c < 15; c++) { /* closer to the end than its chain: no copies */
                float x[DIM];
                draw(x, w, 0.2);
                add(-1, x, 1, rnd());
            }
        } else if (kind == 3) { /* two shots of one camera: refused, then a copy of each */
            file *a = &g_f[base], *b;
            char cam[16];
            snprintf(cam, sizeof cam, "Cam %d", p % 5);
            memcpy(a->camera, cam, sizeof cam);
            a->has_taken = 1, a->taken_ms = 1600000000000LL + p * 100000LL;
            draw(w, v, 0.02);
            b = add(-1, w, 1, flip(ph, 3));
            memcpy(b->camera, cam, sizeof cam);
            b->has_taken = 1, b->taken_ms = a->taken_ms + 2000;
            draw(w, v, 0.02);
            add(-1, w, 1, flip(ph, 4)); /* no camera: joins one of them */
        } else if (kind == 4) { /* within the phash bound, vectors apart */
            draw(w, NULL, 1.0);
            add(-1, w, 1, flip(ph, 5));
        } else if (kind == 5) { /* two cameras */
            file *a = &g_f[base], *b;
            snprintf(a->camera, sizeof a->camera, "Maker A");
            draw(w, v, 0.02);
            b = add(-1, w, 1, flip(ph, 2));
            snprintf(b->camera, sizeof b->camera, "Maker B");
        }
    }
    { /* the crowd: phashes within the bound of each other, too many to name a picture
      ** (no near copies there), pictures apart; then a copy of its first one, in it */
        uint64_t c = rnd();
        g_crowd0 = g_n;
        for (int i = 0; i < N_CROWD; i++) {
            draw(w, NULL, 1.0);
            add(i == 5 ? g_crowd0 : -1, w, 1, flip(c, (int)(rnd() % 4)));
        }
        draw(w, g_f[g_crowd0].vec, 0.02);
        add(-1, w, 1, flip(g_f[g_crowd0].phash, 1));
    }
}

typedef struct fixture {
    char base[64], dir[PATH_MAX];
    cdb_db *db;
    int64_t model, root;
} fixture;

/* The files into a new database (vectors, then their metadata rows); their ids and the
** vectors as stored (read back from the shards) into g_f. 0, or -1. */
static int fill(fixture *fx) {
    cdb_db_params p = cdb_db_params_default();
    cdb_db_batch *b = NULL;
    cdb_db_photo *rows = calloc((size_t)g_n, sizeof *rows);
    int64_t *ids = malloc(sizeof *ids * (size_t)g_n);
    float *back = malloc(sizeof *back * (size_t)g_n * DIM);
    uint8_t *found = malloc((size_t)g_n);
    int n_rows = 0, rc = -1;
    snprintf(fx->base, sizeof fx->base, "/tmp/cdb_collapse_pageXXXXXX");
    if (!rows || !ids || !back || !found || !mkdtemp(fx->base)) goto done;
    snprintf(fx->dir, sizeof fx->dir, "%s/db", fx->base);
    p.create = 1;
    if (cdb_db_open(fx->dir, &p, &fx->db) != CDB_OK ||
        cdb_db_model_register(fx->db, "pagetest", "pagetest-32", DIM, NULL, &fx->model) !=
            CDB_OK ||
        cdb_db_root_add(fx->db, "/pagetest", &fx->root) != CDB_OK ||
        cdb_db_batch_new(fx->db, fx->model, &b) != CDB_OK)
        goto done;
    for (int i = 0; i < g_n; i++) {
        char rel[64];
        cdb_db_file_meta m;
        memset(&m, 0, sizeof m);
        snprintf(rel, sizeof rel, "img_%05d.jpg", i);
        m.size = 1000 + i, m.mtime_ns = 1700000000000000000LL + i;
        m.has_hash = 1, m.width = 64, m.height = 48;
        memcpy(m.hash, g_f[i].hash, sizeof m.hash);
        if (cdb_db_batch_put(b, fx->root, rel, &m, g_f[i].vec, DIM) != CDB_OK) goto done;
    }
    if (cdb_db_batch_commit(b, NULL) != CDB_OK) goto done;
    for (int i = 0; i < g_n; i++) {
        char rel[64];
        cdb_db_file df;
        snprintf(rel, sizeof rel, "img_%05d.jpg", i);
        if (cdb_db_file_lookup(fx->db, fx->root, rel, &df) != CDB_OK) goto done;
        ids[i] = g_f[i].id = df.id;
        cdb_db_file_clear(&df);
        if (!g_f[i].has_phash && !g_f[i].camera[0] && !g_f[i].has_taken) continue;
        cdb_db_photo *r = &rows[n_rows++];
        r->file_id = g_f[i].id;
        memcpy(r->hash, g_f[i].hash, sizeof r->hash);
        snprintf(r->make, sizeof r->make, "%s", g_f[i].camera);
        r->taken_source = g_f[i].has_taken ? CDB_DB_TAKEN_ORIGINAL : CDB_DB_TAKEN_NONE;
        r->taken.wall_ms = g_f[i].taken_ms;
        r->has_phash = g_f[i].has_phash, r->phash = g_f[i].phash;
        r->phash_format = 1, r->phash_width = 64, r->phash_height = 48;
    }
    if (cdb_db_photos_put(fx->db, rows, n_rows) != CDB_OK ||
        cdb_db_vectors_get(fx->db, fx->model, ids, g_n, back, found) != CDB_OK)
        goto done;
    for (int i = 0; i < g_n; i++) {
        if (!found[i]) goto done;
        memcpy(g_f[i].vec, back + (size_t)i * DIM, sizeof g_f[i].vec);
    }
    rc = 0;
done:
    cdb_db_batch_free(b);
    free(rows), free(ids), free(back), free(found);
    return rc;
}

/* comp[i]: the oracle's group of file i (the smallest index of its joined exact and near
** groups), or i. 0, or -1. */
static int oracle(int *comp) {
    cdb_dupes_item *it = calloc((size_t)g_n, sizeof *it);
    cdb_dupes_groups *g = NULL;
    if (!it) return -1;
    for (int i = 0; i < g_n; i++) {
        it[i].id = g_f[i].id;
        memcpy(it[i].hash, g_f[i].hash, sizeof it[i].hash);
        it[i].has_hash = 1;
        it[i].has_phash = g_f[i].has_phash, it[i].phash = g_f[i].phash;
        it[i].vec = g_f[i].vec;
        it[i].camera = g_f[i].camera;
        it[i].has_taken = g_f[i].has_taken, it[i].taken_ms = g_f[i].taken_ms;
        comp[i] = i;
    }
    if (cdb_dupes_find(it, (size_t)g_n, DIM, NULL, &g) != CDB_OK) return free(it), -1;
    for (int changed = 1; changed;) { /* join until nothing changes */
        changed = 0;
        for (size_t k = 0; k < g->n_groups; k++) {
            if (g->kind[k] != CDB_DUPES_EXACT && g->kind[k] != CDB_DUPES_NEAR) continue;
            int lo = INT_MAX;
            for (size_t m = g->start[k]; m < g->start[k + 1]; m++)
                if (comp[g->member[m]] < lo) lo = comp[g->member[m]];
            for (int i = 0; i < g_n; i++)
                for (size_t m = g->start[k]; m < g->start[k + 1]; m++)
                    if (comp[i] != lo && comp[i] == comp[g->member[m]]) comp[i] = lo, changed = 1;
        }
    }
    cdb_dupes_groups_free(g);
    free(it);
    return 0;
}

static int index_of(int64_t id) {
    for (int i = 0; i < g_n; i++)
        if (g_f[i].id == id) return i;
    return -1;
}

/* r against the oracle: all (the whole ranking, collapse off) cut to the first hit of
** each group, at most K, each with the other files of its group as copies (ascending
** ids). Mismatches, said on stderr with what. */
static int check(const char *what, int qn, const cdb_engine_result *all,
                 const cdb_engine_result *r, const int *comp) {
    unsigned char *seen = calloc((size_t)g_n, 1);
    int kept = 0, bad = 0;
    for (int i = 0; seen && i < all->n && kept < K; i++) {
        int x = index_of(all->hits[i].id), n_copies = 0;
        if (x < 0 || seen[comp[x]]) continue;
        seen[comp[x]] = 1;
        if (kept >= r->n || r->hits[kept].id != all->hits[i].id) {
            fprintf(stderr, "%s, query %d, rank %d: id %lld, the oracle %lld\n", what, qn, kept,
                    kept < r->n ? (long long)r->hits[kept].id : -1LL,
                    (long long)all->hits[i].id);
            bad++;
            break;
        }
        for (int q = 0; q < g_n; q++) {
            if (q == x || comp[q] != comp[x]) continue;
            if (n_copies >= r->hits[kept].n_copies ||
                r->hits[kept].copies[n_copies] != g_f[q].id) {
                fprintf(stderr, "%s, query %d, rank %d (id %lld): copy %d is not %lld\n", what,
                        qn, kept, (long long)all->hits[i].id, n_copies, (long long)g_f[q].id);
                bad++;
            }
            n_copies++;
        }
        if (n_copies != r->hits[kept].n_copies) {
            fprintf(stderr, "%s, query %d, rank %d: %d copies, the oracle %d\n", what, qn, kept,
                    r->hits[kept].n_copies, n_copies);
            bad++;
        }
        kept++;
    }
    if (kept != r->n) {
        fprintf(stderr, "%s, query %d: %d hits, the oracle %d\n", what, qn, r->n, kept);
        bad++;
    }
    free(seen);
    return bad;
}

static cdb_status search(cdb_engine *e, const float *q, int k, int collapse,
                         cdb_engine_result *r) {
    cdb_engine_query qu;
    cdb_engine_search_params p = cdb_engine_search_params_default();
    memset(&qu, 0, sizeof qu);
    qu.vector = q, qu.vector_dim = DIM;
    p.k = k, p.collapse = collapse;
    return cdb_engine_search(e, &qu, &p, r);
}

CDB_TEST(page_groups_equal_the_library_groups) {
    static int comp[MAX_FILES];
    fixture fx;
    int n_multi = 0;
    memset(&fx, 0, sizeof fx);
    make_library();
    CHECK(g_n <= MAX_FILES);
    CHECK_EQ_INT(fill(&fx), 0);
    CHECK_EQ_INT(oracle(comp), 0);
    for (int i = 0; i < g_n; i++) n_multi += comp[i] != i;
    CHECK(n_multi > N_PIC / 2); /* the library has copies to collapse */
    CHECK(g_n_chain > 10);
    for (int qn = 0; qn < 40; qn++) {
        float q[DIM];
        cdb_engine *e = NULL;
        cdb_engine_result all, page, lib;
        /* near a chain's far end (found from the hit in two steps), near the crowd,
        ** near any file, or anywhere */
        int at = qn % 4 == 0 ? g_chain_end[(qn / 4) % g_n_chain]
                 : qn % 4 == 1 ? g_crowd0 + (qn % 8 == 1 ? 0 : (int)(rnd() % N_CROWD))
                               : (int)(rnd() % (uint64_t)g_n);
        draw(q, qn % 4 == 3 ? NULL : g_f[at].vec, qn % 4 == 3 ? 1.0 : 0.05);
        CHECK_OK(cdb_engine_open(fx.dir, NULL, &e));
        CHECK_OK(search(e, q, K, 1, &page)); /* the handle's first: the page's groups */
        CHECK_OK(search(e, q, K, 1, &lib));  /* then the library's */
        CHECK_OK(search(e, q, g_n, 0, &all));
        CHECK_EQ_INT(all.n, g_n);
        CHECK_EQ_INT(check("page groups", qn, &all, &page, comp), 0);
        CHECK_EQ_INT(check("library groups", qn, &all, &lib, comp), 0);
        cdb_engine_result_free(&page);
        cdb_engine_result_free(&lib);
        cdb_engine_result_free(&all);
        cdb_engine_close(e);
    }
    cdb_db_close(fx.db);
    {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", fx.base);
        if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", fx.base);
    }
}

CDB_TEST_MAIN(page_groups_equal_the_library_groups)
