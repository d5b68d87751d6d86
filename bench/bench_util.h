/*
** bench_util.h: what the bench programs share: where the source and build trees are
** (CMake compiles them in; "." otherwise), the Python with Debian's torch, the clock,
** the peak RSS, sorting timed runs, and scratch folders removed after a run.
** Static inline functions: a bench takes what it uses.
*/
#ifndef CDB_BENCH_UTIL_H
#define CDB_BENCH_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>

#ifndef CDB_SOURCE_DIR
#define CDB_SOURCE_DIR "."
#endif
#ifndef CDB_BINARY_DIR
#define CDB_BINARY_DIR "."
#endif
#define PY "/usr/bin/python3" /* Debian's, with python3-torch (not a pyenv one on PATH) */

/* Seconds on the monotonic clock. */
static inline double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* This process's peak resident set so far, in MiB. */
static inline double peak_rss_mb(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0;
}

static inline int file_exists(const char *p) {
    struct stat st;
    return stat(p, &st) == 0;
}

/* qsort's comparison of doubles, ascending. */
static inline int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Removes the folder dir and all below it (rm -rf); says so on stderr when it cannot. */
static inline void rm_rf(const char *dir) {
    char cmd[4200];
    if ((size_t)snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir) >= sizeof cmd || system(cmd) != 0)
        fprintf(stderr, "bench: could not remove %s\n", dir);
}

#endif /* CDB_BENCH_UTIL_H */
