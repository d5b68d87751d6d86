/*
** kill_shim.c: an LD_PRELOAD library for test_cli_kill, never part of clipdb. It
** counts the process's writes and syncs to regular files (write, pwrite, pwrite64,
** writev, fsync, fdatasync: every step SQLite takes towards the disk) and, when
** $CDB_KILL_SHIM_AT is N > 0, sends itself SIGKILL just before the N-th one: a kill -9
** at an exact point between two I/O calls, e.g. between the catalog commit that
** marks files pending and the shard write, a window far too short for a random
** delay to hit. $CDB_KILL_SHIM_MATCH limits the count to files whose path contains
** it (e.g. "/shards/"). $CDB_KILL_SHIM_COUNT names a file that gets the count at exit.
** Writes to stdout and stderr are not counted.
*/
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

static atomic_long g_count;
static long g_at = -1;

/* $CDB_KILL_SHIM_MATCH: count only files whose path contains this string */
static int shim_matches(int fd) {
    const char *m = getenv("CDB_KILL_SHIM_MATCH");
    char link[64], path[4096];
    ssize_t n;
    if (!m || !*m) return 1;
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    if ((n = readlink(link, path, sizeof path - 1)) < 0) return 0;
    path[n] = '\0';
    return strstr(path, m) != NULL;
}

static void shim_step(int fd) {
    struct stat st;
    long n;
    if (fd <= 2 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || !shim_matches(fd)) return;
    n = atomic_fetch_add(&g_count, 1) + 1;
    if (g_at < 0) {
        const char *e = getenv("CDB_KILL_SHIM_AT");
        g_at = e ? atol(e) : 0;
    }
    if (g_at > 0 && n == g_at) kill(getpid(), SIGKILL);
}

#define NEXT(name) ((__typeof__(&name))dlsym(RTLD_NEXT, #name))

ssize_t write(int fd, const void *buf, size_t n) {
    shim_step(fd);
    return NEXT(write)(fd, buf, n);
}
ssize_t pwrite(int fd, const void *buf, size_t n, off_t off) {
    shim_step(fd);
    return NEXT(pwrite)(fd, buf, n, off);
}
ssize_t pwrite64(int fd, const void *buf, size_t n, off64_t off) {
    shim_step(fd);
    return NEXT(pwrite64)(fd, buf, n, off);
}
ssize_t writev(int fd, const struct iovec *iov, int n) {
    shim_step(fd);
    return NEXT(writev)(fd, iov, n);
}
int fsync(int fd) {
    shim_step(fd);
    return NEXT(fsync)(fd);
}
int fdatasync(int fd) {
    shim_step(fd);
    return NEXT(fdatasync)(fd);
}

__attribute__((destructor)) static void shim_report(void) {
    const char *p = getenv("CDB_KILL_SHIM_COUNT");
    FILE *f;
    if (p && *p && (f = fopen(p, "w"))) {
        fprintf(f, "%ld\n", (long)atomic_load(&g_count));
        fclose(f);
    }
}
