/*
** bench_store.c: db/ store and read-back throughput for 512-d vectors.
**   bench_store [n_vectors] [batch] [dir]
** Stores n vectors (default 100,000) in batches (default 1,000 files per commit:
** normalize + fp16 + catalog/shard transactions with the crash-safe write order),
** once with synchronous=FULL (the default) and once with NORMAL, then reads them
** back: the ordered iterator as fp16 and as fp32, and random lookups by file id
** (re-rank). Bar (issue 5): store >= 50,000 vectors/s. Prints figures; exit 1 when
** the bar is missed with the default durability.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "db/db.h"

#define DIM     512
#define BAR_VPS 50000.0

static uint64_t rng_state = 12345;
static float urand(void) {
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (float)((double)(z >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static void die(const char *what, cdb_status rc) {
    fprintf(stderr, "bench_store: %s: %s: %s\n", what, cdb_status_str(rc), cdb_errmsg());
    exit(2);
}

static double secs(int64_t ns) { return (double)ns / 1e9; }

/* CPU time of this process (user + sys): on a shared, loaded machine the wall
** clock also counts other programs' time slices. */
static int64_t cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}
static double g_store_cpu_vps;

/* Returns store throughput (vectors/s). */
static double store(const char *dir, cdb_db_sync sync, int n, int batch, const float *pool,
                    int pool_n, double *mb_s) {
    cdb_db *db = NULL;
    cdb_db_params p = cdb_db_params_default();
    int64_t model = 0, root = 0;
    cdb_status rc;
    char name[64];
    p.create = 1;
    p.sync = sync;
    if ((rc = cdb_db_open(dir, &p, &db)) != CDB_OK) die("open", rc);
    if ((rc = cdb_db_model_register(db, "bench", "bench-512", DIM, NULL, &model)) != CDB_OK)
        die("model", rc);
    if ((rc = cdb_db_root_add(db, "/bench", &root)) != CDB_OK) die("root", rc);
    cdb_db_batch *b = NULL;
    if ((rc = cdb_db_batch_new(db, model, &b)) != CDB_OK) die("batch", rc);
    int64_t t0 = cdb_now_ns(), c0 = cpu_ns();
    for (int i = 0; i < n; i++) {
        cdb_db_file_meta m;
        memset(&m, 0, sizeof m);
        m.size = 100000 + i;
        m.mtime_ns = 1700000000000000000LL + i;
        m.has_hash = 1;
        cdb_db_hash_buf(&i, sizeof i, m.hash);
        m.width = 1024;
        m.height = 768;
        snprintf(name, sizeof name, "album%03d/IMG_%07d.jpg", i / 1000, i);
        if ((rc = cdb_db_batch_put(b, root, name, &m, pool + (size_t)(i % pool_n) * DIM, DIM)) !=
            CDB_OK)
            die("put", rc);
        if (cdb_db_batch_count(b) == batch || i == n - 1)
            if ((rc = cdb_db_batch_commit(b, NULL)) != CDB_OK) die("commit", rc);
    }
    int64_t dt = cdb_now_ns() - t0;
    g_store_cpu_vps = n / secs(cpu_ns() - c0);
    cdb_db_batch_free(b);
    cdb_db_counts c;
    if ((rc = cdb_db_get_counts(db, model, &c)) != CDB_OK) die("counts", rc);
    if (c.n_vectors != n) {
        fprintf(stderr, "bench_store: stored %lld vectors, want %d\n", (long long)c.n_vectors, n);
        exit(2);
    }
    cdb_db_close(db);
    *mb_s = (double)n * DIM * 2 / 1e6 / secs(dt);
    return n / secs(dt);
}

static void readback(const char *dir, int n) {
    cdb_db *db = NULL;
    cdb_db_params p = cdb_db_params_default();
    cdb_db_model m;
    cdb_status rc;
    p.readonly = 1;
    if ((rc = cdb_db_open(dir, &p, &db)) != CDB_OK) die("open reader", rc);
    if ((rc = cdb_db_model_default(db, &m)) != CDB_OK) die("model", rc);
    const int chunk = 4096;
    int64_t *ids = malloc((size_t)chunk * sizeof *ids);
    float *f32 = malloc((size_t)chunk * DIM * sizeof *f32);
    uint16_t *f16 = malloc((size_t)chunk * DIM * sizeof *f16);
    int64_t *all = malloc((size_t)n * sizeof *all);
    if (!ids || !f32 || !f16 || !all) die("malloc", CDB_NOMEM);
    for (int pass = 0; pass < 2; pass++) {
        cdb_db_iter *it = NULL;
        int total = 0, got = 0;
        int64_t t0 = cdb_now_ns();
        if ((rc = cdb_db_iter_new(db, m.id, &it)) != CDB_OK) die("iter", rc);
        do {
            if ((rc = cdb_db_iter_read(it, chunk, ids, pass ? f32 : NULL, pass ? NULL : f16,
                                       &got)) != CDB_OK)
                die("iter read", rc);
            if (pass == 0) memcpy(all + total, ids, (size_t)got * sizeof *ids);
            total += got;
        } while (got > 0);
        int64_t dt = cdb_now_ns() - t0;
        cdb_db_iter_free(it);
        printf("  read back (iterator, %s): %d vectors in %.2f s = %.0f vectors/s\n",
               pass ? "fp32" : "fp16", total, secs(dt), total / secs(dt));
    }
    /* Re-rank style: 100 lookups of 100 random ids. */
    int64_t q[100];
    uint8_t found[100];
    int64_t t0 = cdb_now_ns();
    for (int r = 0; r < 100; r++) {
        for (int i = 0; i < 100; i++) q[i] = all[(size_t)((urand() + 1.0f) * 0.5f * (n - 1))];
        if ((rc = cdb_db_vectors_get(db, m.id, q, 100, f32, found)) != CDB_OK) die("get", rc);
    }
    int64_t dt = cdb_now_ns() - t0;
    printf("  get by file id (re-rank, 100 ids/call): %.1f us per vector, %.2f ms per call\n",
           secs(dt) * 1e6 / 10000, secs(dt) * 1e3 / 100);
    int64_t t1 = cdb_now_ns();
    cdb_db_report *rep = NULL;
    if ((rc = cdb_db_verify(db, &rep)) != CDB_OK) die("verify", rc);
    printf("  verify: %lld vectors checked, %lld problems, %.2f s\n",
           (long long)rep->n_vectors_checked, (long long)rep->n_problems, secs(cdb_now_ns() - t1));
    cdb_db_report_free(rep);
    free(ids);
    free(f32);
    free(f16);
    free(all);
    cdb_db_close(db);
}

static void rmrf(const char *dir) {
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "bench_store: could not remove %s\n", dir);
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 100000;
    int batch = argc > 2 ? atoi(argv[2]) : 1000;
    char base[512], dir[600];
    if (n <= 0 || batch <= 0) {
        fprintf(stderr, "usage: bench_store [n_vectors] [batch] [dir]\n");
        return 2;
    }
    snprintf(base, sizeof base, "%s/cdb_bench_store_%d", argc > 3 ? argv[3] : "/tmp",
             (int)getpid());
    rmrf(base);
    if (mkdir(base, 0755) != 0) {
        fprintf(stderr, "bench_store: mkdir %s failed\n", base);
        return 2;
    }
    /* Embeddings of realistic scale (unnormalized, ~N(0,1)-ish elements). */
    const int pool_n = 4096;
    float *pool = malloc((size_t)pool_n * DIM * sizeof *pool);
    if (!pool) die("malloc", CDB_NOMEM);
    for (size_t i = 0; i < (size_t)pool_n * DIM; i++) pool[i] = urand() * 3.0f;

    printf("bench_store: %d vectors of %d-d (fp16 %d bytes each), batches of %d\n", n, DIM, DIM * 2,
           batch);
    double mb = 0;
    snprintf(dir, sizeof dir, "%s/full", base);
    double full = store(dir, CDB_DB_SYNC_FULL, n, batch, pool, pool_n, &mb);
    if (getenv("BENCH_STORE_ONLY")) { /* for instruction counting: one store, nothing else */
        printf("  store (FULL): %.0f vectors/s wall, %.0f per CPU-second\n", full, g_store_cpu_vps);
        rmrf(base);
        free(pool);
        return 0;
    }
    printf("  store, sync=FULL (default, power-safe): %.0f vectors/s wall (%.1f MB/s of fp16); "
           "%.0f vectors/s per CPU-second\n",
           full, mb, g_store_cpu_vps);
    readback(dir, n);
    rmrf(dir);
    snprintf(dir, sizeof dir, "%s/normal", base);
    double normal = store(dir, CDB_DB_SYNC_NORMAL, n, batch, pool, pool_n, &mb);
    printf("  store, sync=NORMAL (crash-safe, not power-safe): %.0f vectors/s wall (%.1f MB/s); "
           "%.0f vectors/s per CPU-second\n",
           normal, mb, g_store_cpu_vps);
    rmrf(dir);
    rmrf(base);
    free(pool);
    printf("  bar: store >= %.0f vectors/s (sync=FULL): %s (%.2fx)\n", BAR_VPS,
           full >= BAR_VPS ? "PASS" : "FAIL", full / BAR_VPS);
    return full >= BAR_VPS ? 0 : 1;
}
