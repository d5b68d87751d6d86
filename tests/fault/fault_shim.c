/*
** fault_shim.c: an LD_PRELOAD library for the fault-injection tests (tests/fault/),
** never part of clipdb. It makes chosen I/O calls of the process fail the way a
** sick machine does, configured by environment variables (unset: no effect):
**
**   CDB_FAULT_ENOSPC_DIR=DIR   writes to regular files whose path starts with DIR
**   CDB_FAULT_ENOSPC_AFTER=N   (write, pwrite, pwrite64, writev, pwritev, fallocate,
**                              posix_fallocate, ftruncate growing a file) succeed for
**                              the first N bytes in all, then fail with ENOSPC: the
**                              disk filled up. A write that would cross N is cut
**                              short (a partial write, as the kernel does), the
**                              next one fails.
**   CDB_FAULT_EIO_MATCH=S      read/pread/readv on regular files whose path contains
**                              S fail with EIO (a bad sector under that file).
**   CDB_FAULT_EACCES_MATCH=S   open/open64 for reading and opendir of paths containing
**                              S fail with EACCES (a file or folder without read
**                              permission, as a user other than root meets it).
**   CDB_FAULT_KILL_FSYNC=S     SIGKILL just before fsync/fdatasync of a regular
**                              file whose path contains S (its data is written,
**                              not yet durable nor renamed).
**   CDB_FAULT_KILL_RENAME=S    SIGKILL just before rename() of a path containing S
**                              (the moment before an atomic swap).
**   CDB_FAULT_LOG=FILE         appends one line per injected fault (to check the
**                              fault really happened: a test that injects nothing
**                              proves nothing).
**   CDB_FAULT_COUNT=FILE       at exit, writes the bytes written under
**                              CDB_FAULT_ENOSPC_DIR (set it without ..._AFTER to
**                              measure a clean run).
**
** Paths come from /proc/self/fd, so they are the kernel's canonical paths; DIR and
** S should be canonical too (realpath). Writes to stdout/stderr are never touched.
*/
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <dlfcn.h>
#include <stdarg.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

static atomic_llong g_written;

static int fd_path(int fd, char *path, size_t size) {
    char link[64];
    ssize_t n;
    struct stat st;
    if (fd <= 2 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    if ((n = readlink(link, path, size - 1)) < 0) return 0;
    path[n] = '\0';
    return 1;
}

static void fault_log(const char *what, const char *path) {
    const char *log = getenv("CDB_FAULT_LOG");
    int fd;
    char line[4400];
    int n;
    if (!log || !*log) return;
    n = snprintf(line, sizeof line, "%d %s %s\n", (int)getpid(), what, path);
    if (n <= 0) return;
    if ((fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644)) < 0) return;
    if (write(fd, line, (size_t)(n < (int)sizeof line ? n : (int)sizeof line - 1)) < 0) {
    }
    close(fd);
}

/* How many of n bytes a write to fd may still put on the "disk": n when the fd
** is not under the full directory; -1 (errno ENOSPC) when nothing fits. */
static ssize_t space_for(int fd, size_t n) {
    const char *dir = getenv("CDB_FAULT_ENOSPC_DIR"), *after = getenv("CDB_FAULT_ENOSPC_AFTER");
    char path[4096];
    long long limit, used;
    if (!dir || !*dir || n == 0) return (ssize_t)n;
    if (!fd_path(fd, path, sizeof path) || strncmp(path, dir, strlen(dir)) != 0) return (ssize_t)n;
    limit = after && *after ? atoll(after) : -1;
    if (limit < 0) {
        atomic_fetch_add(&g_written, (long long)n);
        return (ssize_t)n;
    }
    used = atomic_fetch_add(&g_written, (long long)n);
    if (used >= limit) {
        atomic_fetch_sub(&g_written, (long long)n);
        fault_log("ENOSPC", path);
        errno = ENOSPC;
        return -1;
    }
    if (used + (long long)n > limit) {
        atomic_fetch_sub(&g_written, used + (long long)n - limit);
        return (ssize_t)(limit - used);
    }
    return (ssize_t)n;
}

static int eio_for(int fd) {
    const char *m = getenv("CDB_FAULT_EIO_MATCH");
    char path[4096];
    if (!m || !*m || !fd_path(fd, path, sizeof path) || !strstr(path, m)) return 0;
    fault_log("EIO", path);
    errno = EIO;
    return 1;
}

#define NEXT(name) ((__typeof__(&name))dlsym(RTLD_NEXT, #name))

ssize_t write(int fd, const void *buf, size_t n) {
    ssize_t k = space_for(fd, n);
    return k < 0 ? -1 : NEXT(write)(fd, buf, (size_t)k);
}
ssize_t pwrite(int fd, const void *buf, size_t n, off_t off) {
    ssize_t k = space_for(fd, n);
    return k < 0 ? -1 : NEXT(pwrite)(fd, buf, (size_t)k, off);
}
ssize_t pwrite64(int fd, const void *buf, size_t n, off64_t off) {
    ssize_t k = space_for(fd, n);
    return k < 0 ? -1 : NEXT(pwrite64)(fd, buf, (size_t)k, off);
}
static size_t iov_len(const struct iovec *iov, int n) {
    size_t t = 0;
    for (int i = 0; i < n; i++) t += iov[i].iov_len;
    return t;
}
ssize_t writev(int fd, const struct iovec *iov, int n) {
    size_t want = iov_len(iov, n);
    ssize_t k = space_for(fd, want);
    if (k < 0) return -1;
    if ((size_t)k < want) return NEXT(write)(fd, iov[0].iov_base, (size_t)k < iov[0].iov_len ? (size_t)k : iov[0].iov_len);
    return NEXT(writev)(fd, iov, n);
}
ssize_t pwritev(int fd, const struct iovec *iov, int n, off_t off) {
    size_t want = iov_len(iov, n);
    ssize_t k = space_for(fd, want);
    if (k < 0) return -1;
    if ((size_t)k < want)
        return NEXT(pwrite)(fd, iov[0].iov_base, (size_t)k < iov[0].iov_len ? (size_t)k : iov[0].iov_len, off);
    return NEXT(pwritev)(fd, iov, n, off);
}
int fallocate(int fd, int mode, off_t off, off_t len) {
    if (len > 0 && space_for(fd, (size_t)len) < (ssize_t)len) return -1;
    return NEXT(fallocate)(fd, mode, off, len);
}
int posix_fallocate(int fd, off_t off, off_t len) {
    if (len > 0 && space_for(fd, (size_t)len) < (ssize_t)len) return ENOSPC;
    return NEXT(posix_fallocate)(fd, off, len);
}
int ftruncate(int fd, off_t len) {
    struct stat st;
    if (fstat(fd, &st) == 0 && len > st.st_size && space_for(fd, (size_t)(len - st.st_size)) < len - st.st_size)
        return -1;
    return NEXT(ftruncate)(fd, len);
}

ssize_t read(int fd, void *buf, size_t n) {
    if (eio_for(fd)) return -1;
    return NEXT(read)(fd, buf, n);
}
ssize_t pread(int fd, void *buf, size_t n, off_t off) {
    if (eio_for(fd)) return -1;
    return NEXT(pread)(fd, buf, n, off);
}
ssize_t pread64(int fd, void *buf, size_t n, off64_t off) {
    if (eio_for(fd)) return -1;
    return NEXT(pread64)(fd, buf, n, off);
}
ssize_t readv(int fd, const struct iovec *iov, int n) {
    if (eio_for(fd)) return -1;
    return NEXT(readv)(fd, iov, n);
}

static int eacces_for(const char *path, int flags) {
    const char *m = getenv("CDB_FAULT_EACCES_MATCH");
    if (!m || !*m || !path || (flags & O_ACCMODE) != O_RDONLY || !strstr(path, m)) return 0;
    fault_log("EACCES", path);
    errno = EACCES;
    return 1;
}
/* The body of open and open64 (next: the real one): the mode argument is there only
** when flags create a file. */
#define SHIM_OPEN(next)                                                  \
    {                                                                    \
        mode_t mode = 0;                                                 \
        if (flags & (O_CREAT | O_TMPFILE)) {                             \
            va_list ap;                                                  \
            va_start(ap, flags);                                         \
            mode = (mode_t)va_arg(ap, int);                              \
            va_end(ap);                                                  \
        }                                                                \
        if (eacces_for(path, flags)) return -1;                          \
        return NEXT(next)(path, flags, mode);                            \
    }
int open(const char *path, int flags, ...) SHIM_OPEN(open)
int open64(const char *path, int flags, ...) SHIM_OPEN(open64)
DIR *opendir(const char *path) {
    if (eacces_for(path, O_RDONLY)) return NULL;
    return NEXT(opendir)(path);
}

static void kill_if(const char *env, const char *path) {
    const char *m = getenv(env);
    if (m && *m && path && strstr(path, m)) {
        fault_log("SIGKILL", path);
        kill(getpid(), SIGKILL);
    }
}
int fsync(int fd) {
    char path[4096];
    if (fd_path(fd, path, sizeof path)) kill_if("CDB_FAULT_KILL_FSYNC", path);
    return NEXT(fsync)(fd);
}
int fdatasync(int fd) {
    char path[4096];
    if (fd_path(fd, path, sizeof path)) kill_if("CDB_FAULT_KILL_FSYNC", path);
    return NEXT(fdatasync)(fd);
}
int rename(const char *from, const char *to) {
    kill_if("CDB_FAULT_KILL_RENAME", from);
    return NEXT(rename)(from, to);
}

__attribute__((destructor)) static void shim_report(void) {
    const char *p = getenv("CDB_FAULT_COUNT");
    char line[64];
    int fd, n;
    if (!p || !*p) return;
    n = snprintf(line, sizeof line, "%lld\n", (long long)atomic_load(&g_written));
    if ((fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0) return;
    if (write(fd, line, (size_t)n) < 0) {
    }
    close(fd);
}
