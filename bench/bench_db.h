/*
** bench_db.h: the benches' stand-in libraries: a database that `clipdb init` made,
** filled through db/db.h with n files and random vectors (bench_search, bench_serve,
** bench_reindex), so that a search bench need not encode n photos first; and running
** the clipdb program as a whole process.
*/
#ifndef CDB_BENCH_DB_H
#define CDB_BENCH_DB_H

#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "db/db.h"

#ifndef CDB_BINARY_DIR
#define CDB_BINARY_DIR "."
#endif
#define BENCH_CLIPDB CDB_BINARY_DIR "/clipdb"

/* The clipdb program the benches run: $CLIPDB_BENCH_BIN (another build's, to compare
** it in the same run) or this build's. */
static inline const char *bench_clipdb_path(void) {
    const char *p = getenv("CLIPDB_BENCH_BIN");
    return p && *p ? p : BENCH_CLIPDB;
}

/* What a finished child used, as the kernel accounts it (wait4). */
typedef struct bench_usage {
    double cpu_ms;  /* user + system time */
    long maxrss_kb; /* peak RSS */
} bench_usage;

/* Runs the program exe with args (its stdout/stderr to /dev/null unless show), as a
** whole process; its exit code, or -1. *ms (may be NULL): wall time; *use (may be
** NULL): its CPU time and peak RSS. */
static inline int bench_exe_run(const char *exe, const char *const *args, int show, double *ms,
                                bench_usage *use) {
    int64_t t0 = cdb_now_ns();
    int status = 0;
    struct rusage ru;
    pid_t pid = fork();
    if (pid == 0) {
        const char *argv[32];
        int n = 0;
        if (!show) {
            int fd = open("/dev/null", O_WRONLY);
            dup2(fd, 1);
            dup2(fd, 2);
        }
        argv[n++] = exe;
        for (int i = 0; args[i] && n < 31; i++) argv[n++] = args[i];
        argv[n] = NULL;
        execv(exe, (char *const *)argv);
        _exit(127);
    }
    if (pid < 0 || wait4(pid, &status, 0, &ru) != pid) return -1;
    if (ms) *ms = (double)(cdb_now_ns() - t0) / 1e6;
    if (use) {
        use->cpu_ms = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
                      (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
        use->maxrss_kb = ru.ru_maxrss;
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* bench_exe_run of the clipdb program (bench_clipdb_path), without its RSS. */
static inline int bench_clipdb_run(const char *const *args, int show, double *ms) {
    return bench_exe_run(bench_clipdb_path(), args, show, ms, NULL);
}

/* The state of bench_rnd_normal (xorshift64*): save and restore it to draw the same
** vectors again. */
static uint64_t bench_rng = 0x9E3779B97F4A7C15ULL;

/* A standard normal draw (Box-Muller over xorshift64*): random vector components. */
static inline float bench_rnd_normal(void) {
    uint64_t g_rng = bench_rng;
    double u1, u2;
    g_rng ^= g_rng >> 12, g_rng ^= g_rng << 25, g_rng ^= g_rng >> 27;
    u1 = ((double)((g_rng * 2685821657736338717ULL) >> 11) + 1.0) / 9007199254740993.0;
    g_rng ^= g_rng >> 12, g_rng ^= g_rng << 25, g_rng ^= g_rng >> 27;
    u2 = (double)((g_rng * 2685821657736338717ULL) >> 11) / 9007199254740992.0;
    bench_rng = g_rng;
    return (float)(sqrt(-2.0 * log(u1)) * cos(2 * M_PI * u2));
}

/* Creates files_root/rel (a few bytes) and puts its identity (size, times, device,
** inode) in meta, as an ingest records it: a walk then finds it unchanged. 0 or -1. */
static inline int bench_db_real_file(const char *files_root, const char *rel,
                                     cdb_db_file_meta *meta) {
    char full[8192], sub[8192];
    struct stat st;
    FILE *f;
    if (snprintf(sub, sizeof sub, "%s/%s", files_root, rel) >= (int)sizeof sub) return -1;
    *strrchr(sub, '/') = '\0';
    mkdir(sub, 0777);
    snprintf(full, sizeof full, "%s/%s", files_root, rel);
    if (!(f = fopen(full, "wb"))) return -1;
    fprintf(f, "stand-in %s\n", rel);
    fclose(f);
    if (stat(full, &st) != 0) return -1;
    meta->size = (int64_t)st.st_size;
    meta->mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
    meta->ctime_ns = (int64_t)st.st_ctim.tv_sec * 1000000000LL + st.st_ctim.tv_nsec;
    meta->dev = (uint64_t)st.st_dev;
    meta->ino = (uint64_t)st.st_ino;
    return 0;
}

/* Records n files in the database at dir (made by `clipdb init`) for its default model:
** NNN/img_NNNNNNN.jpg under files_root (created there, see bench_db_real_file) or, when
** files_root is NULL, under the root /bench/photos that does not exist; each with a
** unique hash, 640 x 480, and a vector of draw()s. 0 on success; else the reason on
** stderr, after who. */
static inline int bench_db_fill(const char *dir, int64_t n, const char *files_root,
                                float (*draw)(void), const char *who) {
    cdb_db *db = NULL;
    cdb_db_batch *b = NULL;
    cdb_db_model dm;
    cdb_db_params p = cdb_db_params_default();
    int64_t root = 0;
    float *v = NULL;
    int rc = -1;
    p.sync = CDB_DB_SYNC_NORMAL;
    if (cdb_db_open(dir, &p, &db) != CDB_OK || cdb_db_model_default(db, &dm) != CDB_OK ||
        cdb_db_root_add(db, files_root ? files_root : "/bench/photos", &root) != CDB_OK ||
        cdb_db_batch_new(db, dm.id, &b) != CDB_OK || !(v = malloc(sizeof *v * (size_t)dm.dim)))
        goto done;
    for (int64_t i = 0; i < n; i++) {
        char rel[64];
        cdb_db_file_meta meta;
        memset(&meta, 0, sizeof meta);
        snprintf(rel, sizeof rel, "%03lld/img_%07lld.jpg", (long long)(i / 1000), (long long)i);
        meta.size = 100000 + i;
        meta.mtime_ns = 1700000000000000000LL + i;
        meta.has_hash = 1;
        memcpy(meta.hash, &i, sizeof i); /* unique */
        meta.width = 640;
        meta.height = 480;
        if (files_root && bench_db_real_file(files_root, rel, &meta) != 0) goto done;
        for (int d = 0; d < dm.dim; d++) v[d] = draw();
        if (cdb_db_batch_put(b, root, rel, &meta, v, dm.dim) != CDB_OK) goto done;
        if (cdb_db_batch_count(b) >= 1000 && cdb_db_batch_commit(b, NULL) != CDB_OK) goto done;
    }
    if (cdb_db_batch_commit(b, NULL) != CDB_OK) goto done;
    rc = 0;
done:
    if (rc) fprintf(stderr, "%s: cannot fill %s: %s\n", who, dir, cdb_errmsg());
    free(v);
    cdb_db_batch_free(b);
    cdb_db_close(db);
    return rc;
}

#endif /* CDB_BENCH_DB_H */
