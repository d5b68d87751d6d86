/*
** test_snapshot_search.c: searches through the vector snapshot beside the index
** (engine/search/snapshot.c) give what searches through the shards alone give, bit for
** bit. The oracle: the stored vectors read back from the shards (cdb_db_iter), scored
** by cdb_index_exact_search, the flat plan's scan before the snapshot; and, for an
** approximate index (IVF-PQ with every list probed on a small database), the same.
** Checked: the snapshot a build writes; vectors changed, deleted and added after its
** watermark (the snapshot is left stale: the dirty ids come from the shards); a
** snapshot damaged on disk (ignored, reported by verify, rewritten by the next
** refresh); an IVF index whose lists are on disk (`index build --on-disk`), reopened.
** And a refresh that finds nothing changed learns it from the index file's head and
** stamp, without loading the file (shown on a file whose body no load accepts), while
** one change or one deletion makes it load and bring the index up to date.
** No model is needed: the database is filled through db/ and searched with raw vectors.
*/
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "cdb_test.h"
#include "db/db.h"
#include "engine/engine.h"
#include "engine/search/search.h"
#include "index/index.h"
#include "kernels/kernels.h"

#define DIM 48
#define N0 3000
#define K 10

static uint64_t g_rng = 0x5eed;
static double gauss(void) {
    double u, v;
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    u = ((double)(g_rng >> 11) + 0.5) / 9007199254740992.0;
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    v = ((double)(g_rng >> 11) + 0.5) / 9007199254740992.0;
    return sqrt(-2 * log(u)) * cos(6.283185307179586 * v);
}

/* Around one of 24 fixed centres, as embeddings cluster (PQ codes then rank well). */
static void draw(float *x) {
    static float centre[24][DIM];
    static int ready;
    uint64_t keep = g_rng;
    int c;
    if (!ready) {
        g_rng = 99;
        for (int j = 0; j < 24; j++)
            for (int i = 0; i < DIM; i++) centre[j][i] = (float)gauss();
        g_rng = keep, ready = 1;
    }
    c = (int)((g_rng >> 33) % 24);
    for (int i = 0; i < DIM; i++) x[i] = centre[c][i] + 0.6f * (float)gauss();
}

typedef struct fixture {
    char base[64], dir[PATH_MAX];
    cdb_db *db;
    int64_t model, root;
} fixture;

/* Files i in [from, to) under /snaptest (absent: never walked) with fresh vectors. */
static int put_files(fixture *f, int from, int to) {
    cdb_db_batch *b = NULL;
    float x[DIM];
    if (cdb_db_batch_new(f->db, f->model, &b) != CDB_OK) return -1;
    for (int i = from; i < to; i++) {
        char rel[64];
        cdb_db_file_meta m;
        memset(&m, 0, sizeof m);
        snprintf(rel, sizeof rel, "d%02d/img_%06d.jpg", i % 17, i);
        m.size = 1000 + i, m.mtime_ns = 1700000000000000000LL + i + (int64_t)g_rng % 1000;
        m.has_hash = 1, m.width = 64, m.height = 48;
        memcpy(m.hash, &g_rng, sizeof g_rng);
        memcpy(m.hash + 8, &i, sizeof i);
        draw(x);
        if (cdb_db_batch_put(b, f->root, rel, &m, x, DIM) != CDB_OK) return -1;
    }
    if (cdb_db_batch_commit(b, NULL) != CDB_OK) return -1;
    cdb_db_batch_free(b);
    return 0;
}

static void fixture_close(fixture *f) {
    char cmd[128];
    cdb_db_close(f->db);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->base);
    if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", f->base);
}

static int fixture_open(fixture *f, const char *name) {
    cdb_db_params p = cdb_db_params_default();
    snprintf(f->base, sizeof f->base, "/tmp/cdb_snapsearchXXXXXX");
    if (!mkdtemp(f->base)) return -1;
    snprintf(f->dir, sizeof f->dir, "%s/%s", f->base, name);
    p.create = 1;
    if (cdb_db_open(f->dir, &p, &f->db) != CDB_OK ||
        cdb_db_model_register(f->db, "snaptest", "snaptest-48", DIM, NULL, &f->model) != CDB_OK ||
        cdb_db_root_add(f->db, "/snaptest", &f->root) != CDB_OK)
        return -1;
    return put_files(f, 0, N0);
}

/* The oracle: every vector the shards hold now scored against q, best first (k of
** them: at most 16,384). */
static void brute_force(fixture *f, const float *q, int k, cdb_hit *out) {
    int64_t cap = 1 << 14, n = 0;
    int64_t *ids = malloc(sizeof *ids * (size_t)cap);
    uint16_t *v = malloc(sizeof *v * (size_t)cap * DIM);
    cdb_db_iter *it = NULL;
    int got = 1;
    if (cdb_db_iter_new(f->db, f->model, &it) != CDB_OK) got = 0;
    while (got > 0 && n + 4096 <= cap &&
           cdb_db_iter_read(it, 4096, ids + n, NULL, v + (size_t)n * DIM, &got) == CDB_OK)
        n += got;
    cdb_db_iter_free(it);
    if (cdb_index_exact_search(q, 1, DIM, ids, v, (size_t)n, k, -INFINITY, NULL, 0, 1, out) !=
        CDB_OK)
        out[0].id = -2;
    free(ids), free(v);
}

/* The top K for the raw vector q (no collapsing of duplicates). */
static cdb_status search_k(cdb_engine *e, const float *q, cdb_engine_result *r) {
    cdb_engine_query qu;
    cdb_engine_search_params p = cdb_engine_search_params_default();
    memset(&qu, 0, sizeof qu);
    qu.vector = q, qu.vector_dim = DIM;
    p.k = K, p.collapse = 0;
    return cdb_engine_search(e, &qu, &p, r);
}

/* A one-shot search (a new engine handle, as the CLI makes) of n_q random queries. exact:
** the hits' ids and score bits equal the oracle's top K; else (an approximate index)
** each hit is a stored vector scored with the oracle's bits, and *recall (optional) gets
** the share of the oracle's top K found. Returns the number of mismatches. */
static int searches_check(fixture *f, int n_q, int exact, double *recall) {
    cdb_engine *e = NULL;
    int bad = 0, found = 0;
    cdb_hit *all = malloc(sizeof *all * 16384);
    if (!all || cdb_engine_open(f->dir, NULL, &e) != CDB_OK) return free(all), -1;
    for (int j = 0; j < n_q; j++) {
        float q[DIM];
        const cdb_hit *want = all;
        cdb_engine_result r;
        draw(q);
        brute_force(f, q, 16384, all);
        if (search_k(e, q, &r) != CDB_OK) {
            fprintf(stderr, "search: %s\n", cdb_errmsg());
            bad++;
            continue;
        }
        for (int i = 0; !exact && i < r.n; i++) {
            int at = -1;
            for (int t = 0; t < 16384 && all[t].id >= 0 && at < 0; t++)
                if (all[t].id == r.hits[i].id) at = t;
            found += at >= 0 && at < K;
            if (at < 0 || memcmp(&r.hits[i].score, &all[at].score, sizeof(float))) {
                fprintf(stderr, "query %d rank %d: %lld %.9g, not so in the shards\n", j, i,
                        (long long)r.hits[i].id, r.hits[i].score);
                bad++;
            }
        }
        for (int i = 0; exact && i < K; i++)
            if (i >= r.n || r.hits[i].id != want[i].id ||
                memcmp(&r.hits[i].score, &want[i].score, sizeof(float))) {
                fprintf(stderr, "query %d rank %d: %lld %.9g, brute force %lld %.9g\n", j, i,
                        i < r.n ? (long long)r.hits[i].id : -1LL, i < r.n ? r.hits[i].score : 0,
                        (long long)want[i].id, want[i].score);
                bad++;
                break;
            }
        cdb_engine_result_free(&r);
    }
    cdb_engine_close(e);
    free(all);
    if (recall) *recall = (double)found / (n_q * K);
    return bad;
}

static int searches_match(fixture *f, int n_q) { return searches_check(f, n_q, 1, NULL); }

static int snap_exists(fixture *f) {
    char path[PATH_MAX + 64];
    cdb_eng_snap_path(f->db, f->model, path, sizeof path);
    return access(path, F_OK) == 0;
}

static uint64_t snap_watermark(fixture *f) {
    cdb_index_snap *s = NULL;
    uint64_t w = 0;
    if (cdb_eng_snap_open(f->db, f->model, DIM, 0, &s) != CDB_OK) return 0;
    w = cdb_index_snap_watermark(s);
    cdb_index_snap_close(s);
    return w;
}

/* Builds the index through the engine (type, lists on disk). */
static cdb_status build(fixture *f, cdb_engine_index_kind kind, int on_disk) {
    cdb_engine *e = NULL;
    cdb_engine_index_params p = {kind, on_disk};
    cdb_engine_index_report r;
    cdb_status st = cdb_engine_open(f->dir, NULL, &e);
    if (st == CDB_OK) st = cdb_engine_index_build(e, NULL, &p, &r);
    cdb_engine_close(e);
    return st;
}

/* Changes after the snapshot: every third of the files with ids up to del_upto deleted,
** the vectors of files [rep, rep + n) replaced, n_add files added after the first at. */
static int change_some(fixture *f, int64_t del_upto, int rep, int n, int at, int n_add) {
    cdb_db_batch *b = NULL;
    for (int64_t id = 1; id <= del_upto; id++) {
        cdb_db_file fl;
        if (id % 3 || cdb_db_file_get(f->db, id, &fl) != CDB_OK) continue;
        cdb_db_file_clear(&fl);
        if (!b && cdb_db_batch_new(f->db, f->model, &b) != CDB_OK) return -1;
        if (cdb_db_batch_delete(b, id) != CDB_OK) return -1;
    }
    if (b && cdb_db_batch_commit(b, NULL) != CDB_OK) return -1;
    cdb_db_batch_free(b);
    g_rng ^= 0xabcdef; /* new vectors (same paths: replaced) */
    if (put_files(f, rep, rep + n)) return -1;
    return put_files(f, at, at + n_add);
}

static int change_store(fixture *f) { return change_some(f, 60, 100, 100, N0, 50); }

static int verify_problems(fixture *f) {
    cdb_engine *e = NULL;
    cdb_engine_verify_report r;
    int n = -1;
    if (cdb_engine_open(f->dir, NULL, &e) != CDB_OK) return -1;
    if (cdb_engine_verify(e, 0, 0, &r) == CDB_OK) {
        n = (int)r.n_problems;
        for (int i = 0; i < r.n_listed; i++) fprintf(stderr, "verify: %s\n", r.problems[i].msg);
        cdb_engine_verify_report_free(&r);
    }
    cdb_engine_close(e);
    return n;
}

CDB_TEST(flat_scan_through_snapshot_equals_shards) {
    fixture f;
    int64_t gen0 = 0, gen1 = 0;
    memset(&f, 0, sizeof f);
    CHECK(fixture_open(&f, "flat") == 0);
    CHECK_OK(build(&f, CDB_ENGINE_INDEX_AUTO, 0)); /* flat at this size, and the snapshot */
    CHECK(snap_exists(&f));
    CHECK_OK(cdb_db_generation(f.db, &gen0));
    CHECK_EQ_INT(snap_watermark(&f), gen0);
    CHECK_EQ_INT(searches_match(&f, 12), 0);
    CHECK_EQ_INT(verify_problems(&f), 0);
    /* stale: changed, deleted and added after the watermark (nothing refreshed) */
    CHECK(change_store(&f) == 0);
    CHECK_OK(cdb_db_generation(f.db, &gen1));
    CHECK(gen1 > gen0 && snap_watermark(&f) == (uint64_t)gen0);
    CHECK_EQ_INT(searches_match(&f, 12), 0);
    CHECK_EQ_INT(verify_problems(&f), 0); /* the dirty ids are not held against it */
    fixture_close(&f);
}

CDB_TEST(damaged_snapshot_is_ignored_reported_rewritten) {
    fixture f;
    char path[PATH_MAX + 64], stamp[PATH_MAX + 80];
    struct stat st;
    int fd;
    unsigned char c = 0;
    eng_index_result res;
    memset(&f, 0, sizeof f);
    CHECK(fixture_open(&f, "damaged") == 0);
    CHECK_OK(build(&f, CDB_ENGINE_INDEX_AUTO, 0));
    cdb_eng_snap_path(f.db, f.model, path, sizeof path);
    snprintf(stamp, sizeof stamp, "%s.ok", path);
    CHECK(stat(path, &st) == 0);
    usleep(20000);
    /* one bit of one vector, as a disk may flip it */
    CHECK((fd = open(path, O_RDWR)) >= 0);
    CHECK(pread(fd, &c, 1, st.st_size - 1000) == 1);
    c ^= 0x40;
    CHECK(pwrite(fd, &c, 1, st.st_size - 1000) == 1);
    close(fd);
    CHECK_EQ_INT(searches_match(&f, 8), 0); /* refused: the shards answer */
    CHECK_EQ_INT(verify_problems(&f), 1);
    /* the next refresh (an ingest's) writes it again */
    CHECK_OK(cdb_eng_index_refresh(f.db, f.model, DIM, 0, &res));
    CHECK_EQ_INT(verify_problems(&f), 0);
    CHECK_EQ_INT(searches_match(&f, 8), 0);
    /* another database's snapshot (a watermark past this one's generation) */
    {
        fixture g;
        char gpath[PATH_MAX + 64];
        memset(&g, 0, sizeof g);
        CHECK(fixture_open(&g, "other") == 0);
        CHECK(put_files(&g, N0, 2 * N0) == 0);
        CHECK_OK(build(&g, CDB_ENGINE_INDEX_AUTO, 0));
        cdb_eng_snap_path(g.db, g.model, gpath, sizeof gpath);
        CHECK(rename(gpath, path) == 0);
        unlink(stamp);
        CHECK_EQ_INT(searches_match(&f, 8), 0);
        CHECK_EQ_INT(verify_problems(&f), 1);
        fixture_close(&g);
    }
    /* another database's snapshot made at a lower generation than this one's: its
    ** watermark passes, its owner (this database's uuid, in its header) does not */
    CHECK(put_files(&f, N0, N0 + 500) == 0);
    CHECK_OK(cdb_eng_index_refresh(f.db, f.model, DIM, 0, &res));
    CHECK_EQ_INT(verify_problems(&f), 0);
    {
        fixture h;
        char hpath[PATH_MAX + 64];
        int64_t fgen = 0;
        memset(&h, 0, sizeof h);
        CHECK(fixture_open(&h, "smaller") == 0);
        CHECK_OK(build(&h, CDB_ENGINE_INDEX_AUTO, 0)); /* its own vectors (draw's) */
        CHECK_OK(cdb_db_generation(f.db, &fgen));
        CHECK_MSG(snap_watermark(&h) > 0 && snap_watermark(&h) <= (uint64_t)fgen, "watermark %llu, generation %lld", (unsigned long long)snap_watermark(&h), (long long)fgen);
        cdb_eng_snap_path(h.db, h.model, hpath, sizeof hpath);
        CHECK(rename(hpath, path) == 0);
        unlink(stamp);
        CHECK_EQ_INT(searches_match(&f, 8), 0); /* refused: the shards answer */
        CHECK_EQ_INT(verify_problems(&f), 1);
        CHECK_OK(cdb_eng_index_refresh(f.db, f.model, DIM, 0, &res)); /* rewritten */
        CHECK_EQ_INT(verify_problems(&f), 0);
        fixture_close(&h);
    }
    fixture_close(&f);
}

/* Breaks the index file at path where only a load looks (its end mark: FAISS's bytes and
** the header stay whole), then makes its checksum and stamp agree with the new bytes, as
** cdb_index_save would have left them: only a load can tell this file from a good one. */
static int forge_unloadable(const char *path) {
    struct stat st;
    unsigned char *buf = NULL;
    uint64_t sum;
    int fd = open(path, O_RDWR), ok = 0;
    cdb_stamp due;
    if (fd < 0 || fstat(fd, &st) != 0 || st.st_size < 64) goto out;
    if (!(buf = malloc((size_t)st.st_size)) ||
        pread(fd, buf, (size_t)st.st_size, 0) != st.st_size)
        goto out;
    memcpy(buf + st.st_size - 16, "NOTANEND", 8); /* the end mark */
    sum = XXH3_64bits(buf, (size_t)st.st_size - 8);
    memcpy(buf + st.st_size - 8, &sum, 8);
    if (pwrite(fd, buf, (size_t)st.st_size, 0) != st.st_size || fsync(fd) != 0 ||
        fstat(fd, &st) != 0)
        goto out;
    due = cdb_stamp_of(&st, (const uint64_t[2]){sum, 0});
    ok = cdb_stamp_write(path, &due) == 0;
out:
    if (fd >= 0) close(fd);
    free(buf);
    return ok ? 0 : -1;
}

/* The index file as a refresh left it: its watermark is the generation now, it covers
** what the store holds, and not id gone (when > 0). */
static int index_current(fixture *f, int64_t gone) {
    char path[PATH_MAX + 64];
    cdb_index *ix = NULL;
    int64_t gen = 0, n = 0;
    int ok;
    cdb_eng_index_path(f->db, f->model, path, sizeof path);
    if (cdb_index_load(path, &ix) != CDB_OK || cdb_db_generation(f->db, &gen) != CDB_OK ||
        cdb_db_count_vectors(f->db, f->model, &n) != CDB_OK)
        return cdb_index_free(ix), 0;
    ok = cdb_index_watermark(ix) == (uint64_t)gen && cdb_index_count(ix) == n &&
         !(gone > 0 && cdb_index_covers(ix, gone));
    if (!ok)
        fprintf(stderr, "index: watermark %llu (generation %lld), %lld ids (%lld stored)%s\n",
                (unsigned long long)cdb_index_watermark(ix), (long long)gen,
                (long long)cdb_index_count(ix), (long long)n,
                gone > 0 && cdb_index_covers(ix, gone) ? ", covers the deleted id" : "");
    cdb_index_free(ix);
    return ok;
}

CDB_TEST(no_change_refresh_reads_only_the_head) {
    fixture f;
    char path[PATH_MAX + 64];
    cdb_index_head h;
    eng_index_result res;
    cdb_db_batch *b = NULL;
    struct stat st0, st1;
    memset(&f, 0, sizeof f);
    CHECK(fixture_open(&f, "head") == 0);
    CHECK_OK(build(&f, CDB_ENGINE_INDEX_AUTO, 0));
    cdb_eng_index_path(f.db, f.model, path, sizeof path);
    CHECK_OK(cdb_index_file_head(path, &h));
    CHECK(h.vouched); /* the save stamped it */
    CHECK_OK(cdb_eng_index_refresh(f.db, f.model, DIM, 0, &res));
    CHECK_EQ_INT(res.action, 0);
    /* nothing changed: a file no load accepts is taken as it is, untouched */
    CHECK(forge_unloadable(path) == 0);
    CHECK(stat(path, &st0) == 0);
    CHECK_OK(cdb_eng_index_refresh(f.db, f.model, DIM, 0, &res));
    CHECK_MSG(res.action == 0, "action %d (%s): the index was loaded", res.action, res.why);
    CHECK(stat(path, &st1) == 0);
    CHECK(st0.st_ino == st1.st_ino && st0.st_ctim.tv_nsec == st1.st_ctim.tv_nsec &&
          st0.st_ctime == st1.st_ctime);
    /* one file changed: loaded (the forged file refused: rebuilt) and current */
    g_rng ^= 0x1234;
    CHECK(put_files(&f, 7, 8) == 0);
    CHECK_OK(cdb_eng_index_refresh(f.db, f.model, DIM, 0, &res));
    CHECK_EQ_INT(res.action, 2);
    CHECK(index_current(&f, 0));
    /* one changed again, on a good index: brought up to date */
    g_rng ^= 0x5678;
    CHECK(put_files(&f, 8, 9) == 0);
    CHECK_OK(cdb_eng_index_refresh(f.db, f.model, DIM, 0, &res));
    CHECK(res.action != 0);
    CHECK(index_current(&f, 0));
    /* one deleted: its id leaves the index */
    CHECK_OK(cdb_db_batch_new(f.db, f.model, &b));
    CHECK_OK(cdb_db_batch_delete(b, 5));
    CHECK_OK(cdb_db_batch_commit(b, NULL));
    cdb_db_batch_free(b);
    CHECK_OK(cdb_eng_index_refresh(f.db, f.model, DIM, 0, &res));
    CHECK(res.action != 0);
    CHECK(index_current(&f, 5));
    CHECK_OK(cdb_index_file_head(path, &h));
    CHECK(h.vouched);
    CHECK_EQ_INT(searches_match(&f, 8), 0);
    /* a bit of FAISS's part flipped, as a disk may (the head as it was, but the stamp no
    ** longer names the file): loaded, refused, rebuilt */
    {
        int fd = open(path, O_RDWR);
        unsigned char c = 0;
        CHECK(fd >= 0 && stat(path, &st0) == 0);
        CHECK(pread(fd, &c, 1, st0.st_size / 2) == 1);
        c ^= 0x10;
        CHECK(pwrite(fd, &c, 1, st0.st_size / 2) == 1);
        close(fd);
    }
    CHECK_OK(cdb_index_file_head(path, &h));
    CHECK(!h.vouched);
    CHECK_OK(cdb_eng_index_refresh(f.db, f.model, DIM, 0, &res));
    CHECK_EQ_INT(res.action, 2);
    CHECK(index_current(&f, 5));
    fixture_close(&f);
}

CDB_TEST(ivf_on_disk_reopened_equals_shards) {
    fixture f;
    cdb_engine *e = NULL;
    cdb_engine_index_info in;
    char lists[PATH_MAX + 64];
    double recall = 0;
    memset(&f, 0, sizeof f);
    CHECK(fixture_open(&f, "ondisk") == 0);
    /* lists on disk need an IVF kind */
    CHECK_RC(build(&f, CDB_ENGINE_INDEX_FLAT, 1), CDB_UNSUPPORTED);
    CHECK_OK(build(&f, CDB_ENGINE_INDEX_IVF_PQ, 1));
    CHECK_OK(cdb_engine_open(f.dir, NULL, &e));
    CHECK_OK(cdb_engine_index_describe(e, NULL, &in));
    cdb_engine_close(e);
    CHECK_EQ_STR(in.kind, "ivf-pq");
    CHECK(in.on_disk); /* what `index info` says: the index file's own answer, below */
    {
        cdb_index *ix = NULL;
        CHECK_OK(cdb_index_load(in.path, &ix));
        CHECK(cdb_index_on_disk(ix));
        cdb_index_free(ix);
    }
    /* approximate: each hit scored from the stored vector, bit for bit; most found */
    CHECK_EQ_INT(searches_check(&f, 20, 0, &recall), 0);
    fprintf(stderr, "recall@%d of ivf-pq on disk: %.3f\n", K, recall);
    CHECK(recall >= 0.9);
    snprintf(lists, sizeof lists,
             "ls %s/index/model_%lld.ivfdata.* 2>/dev/null | wc -l | grep -qx %%d", f.dir,
             (long long)f.model);
    /* changed (deleted, replaced, added) and refreshed: rebuilt by the plan for the size
    ** (flat here, a family other than ivf-pq): in memory, and the lists file goes */
    CHECK(change_store(&f) == 0);
    {
        eng_index_result res;
        char cmd[PATH_MAX + 64];
        CHECK_OK(cdb_eng_index_refresh(f.db, f.model, DIM, 0, &res));
        CHECK_EQ_INT(res.action, 2);
        CHECK(!res.on_disk);
        snprintf(cmd, sizeof cmd, lists, 0);
        CHECK(system(cmd) == 0);
    }
    CHECK_EQ_INT(searches_match(&f, 12), 0);
    CHECK_EQ_INT(verify_problems(&f), 0);
    /* rebuilt in memory: `index info` says so */
    CHECK_OK(cdb_engine_open(f.dir, NULL, &e));
    CHECK_OK(cdb_engine_index_describe(e, NULL, &in));
    cdb_engine_close(e);
    CHECK(in.has_index && !in.on_disk);
    fixture_close(&f);
}

static void count_warn(void *ud, const char *msg) {
    (*(int *)ud)++;
    fprintf(stderr, "warning: %s\n", msg);
}

/* n_q queries (drawn from seed) through one engine handle on dir, their K hits each into
** out (n_q * K, id -1 past the end); the warnings it gave into *warns. */
static int hits_of(const char *dir, int n_q, uint64_t seed, cdb_hit *out, int *warns) {
    cdb_engine *e = NULL;
    cdb_engine_params ep = cdb_engine_params_default();
    uint64_t keep = g_rng;
    int rc = 0;
    *warns = 0;
    ep.events.warn = count_warn, ep.events.ud = warns;
    if (cdb_engine_open(dir, &ep, &e) != CDB_OK) return -1;
    g_rng = seed;
    for (int j = 0; j < n_q && rc == 0; j++) {
        float q[DIM];
        cdb_engine_result r;
        memset(&r, 0, sizeof r);
        draw(q);
        if (search_k(e, q, &r) != CDB_OK) rc = -1;
        for (int i = 0; rc == 0 && i < K; i++) {
            out[j * K + i].id = i < r.n ? r.hits[i].id : -1;
            out[j * K + i].score = i < r.n ? r.hits[i].score : 0;
        }
        cdb_engine_result_free(&r);
    }
    g_rng = keep;
    cdb_engine_close(e);
    return rc;
}

/* A database whose index has its lists on disk, moved to another folder (`mv`): the
** index file names its lists file by its name in the index's own folder, so the moved
** database loads its index (no warning: not the exact fallback) and its searches give
** the hits, ids and score bits, they gave before the move. Its lists file removed: one
** warning, and the searches go on exactly. */
CDB_TEST(ivf_on_disk_found_after_the_folder_moves) {
    enum { NQ = 8 };
    fixture f;
    cdb_engine *e = NULL;
    cdb_engine_index_info in;
    cdb_hit before[NQ * K], after[NQ * K], exact[K];
    char moved[PATH_MAX], cmd[3 * PATH_MAX];
    int warns = -1;
    memset(&f, 0, sizeof f);
    CHECK(fixture_open(&f, "ondisk") == 0);
    CHECK_OK(build(&f, CDB_ENGINE_INDEX_IVF_PQ, 1));
    CHECK_EQ_INT(hits_of(f.dir, NQ, 77, before, &warns), 0);
    CHECK_EQ_INT(warns, 0);
    cdb_db_close(f.db), f.db = NULL;
    snprintf(moved, sizeof moved, "%s/moved", f.base);
    snprintf(cmd, sizeof cmd, "mv '%s' '%s'", f.dir, moved);
    CHECK(system(cmd) == 0);
    snprintf(f.dir, sizeof f.dir, "%s", moved);
    CHECK_OK(cdb_engine_open(f.dir, NULL, &e));
    CHECK_OK(cdb_engine_index_describe(e, NULL, &in));
    cdb_engine_close(e);
    CHECK(in.on_disk && strncmp(in.path, moved, strlen(moved)) == 0);
    {
        cdb_index *ix = NULL;
        CHECK_OK(cdb_index_load(in.path, &ix));
        CHECK(cdb_index_on_disk(ix));
        cdb_index_free(ix);
    }
    CHECK_EQ_INT(hits_of(f.dir, NQ, 77, after, &warns), 0);
    CHECK_EQ_INT(warns, 0); /* the index was used */
    for (int i = 0; i < NQ * K; i++)
        CHECK_MSG(before[i].id == after[i].id &&
                      !memcmp(&before[i].score, &after[i].score, sizeof(float)),
                  "hit %d: %lld %.9g before the move, %lld %.9g after", i,
                  (long long)before[i].id, before[i].score, (long long)after[i].id,
                  after[i].score);
    /* the lists file gone: the index is refused with one warning, searches go exact */
    snprintf(cmd, sizeof cmd, "rm %s/index/model_%lld.ivfdata.*", f.dir, (long long)f.model);
    CHECK(system(cmd) == 0);
    CHECK_EQ_INT(hits_of(f.dir, NQ, 77, after, &warns), 0);
    CHECK_EQ_INT(warns, 1);
    {
        cdb_db_params p = cdb_db_params_default();
        CHECK_OK(cdb_db_open(f.dir, &p, &f.db));
    }
    for (int j = 0; j < NQ; j++) { /* the exact answer: brute force over the shards */
        float q[DIM];
        uint64_t keep = g_rng;
        g_rng = 77;
        for (int t = 0; t <= j; t++) draw(q);
        g_rng = keep;
        brute_force(&f, q, K, exact);
        for (int i = 0; i < K; i++)
            CHECK(after[j * K + i].id == exact[i].id &&
                  !memcmp(&after[j * K + i].score, &exact[i].score, sizeof(float)));
    }
    fixture_close(&f);
}

CDB_TEST_MAIN(flat_scan_through_snapshot_equals_shards,
              damaged_snapshot_is_ignored_reported_rewritten, no_change_refresh_reads_only_the_head,
              ivf_on_disk_reopened_equals_shards, ivf_on_disk_found_after_the_folder_moves)
