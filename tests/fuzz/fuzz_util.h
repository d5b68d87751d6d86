/*
** fuzz_util.h: helpers shared by the libFuzzer targets in tests/fuzz/.
**
** FUZZ_CHECK(cond, ...) states an invariant of the API under test: when it fails the
** target prints the message and aborts, which libFuzzer records as a crash (with the
** input saved). Targets never abort on an error status: a clean refusal of bad input
** is the expected outcome; only crashes, sanitizer reports, broken invariants, leaks
** and timeouts are findings.
*/
#ifndef CDB_FUZZ_UTIL_H
#define CDB_FUZZ_UTIL_H

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/core.h"

#define FUZZ_CHECK(cond, ...)                                                  \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "fuzz invariant failed at %s:%d: %s: ", __FILE__,  \
                    __LINE__, #cond);                                          \
            fprintf(stderr, __VA_ARGS__);                                      \
            fprintf(stderr, "\n");                                             \
            abort();                                                           \
        }                                                                      \
    } while (0)

/* Silences the library's logging (fuzzed inputs make it warn on every run). */
static inline void fuzz_quiet(void) {
    cdb_log_set_level(CDB_LOG_LEVEL_OFF);
}

/* Folders made by fuzz_tmpdir, removed at exit (libFuzzer exits with exit()). */
static char fuzz_tmpdirs_[4][256];
static int fuzz_n_tmpdirs_;

static inline int fuzz_rm_one_(const char *path, const struct stat *st, int flag, struct FTW *f) {
    (void)st, (void)flag, (void)f;
    remove(path);
    return 0;
}

static inline void fuzz_rm_tmpdirs_(void) {
    for (int i = 0; i < fuzz_n_tmpdirs_; i++)
        nftw(fuzz_tmpdirs_[i], fuzz_rm_one_, 16, FTW_DEPTH | FTW_PHYS);
}

/* A private temporary folder (under /dev/shm when it exists: the targets rewrite
** files on every input), removed at exit. Aborts when it cannot be made: that is a
** set-up failure. At most 4 per process. */
static inline const char *fuzz_tmpdir(const char *tag) {
    static char dir[256];
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(dir, sizeof dir, "%s/cdbfuzz_%s_%d_XXXXXX", base, tag, (int)getpid());
    if (!mkdtemp(dir) || fuzz_n_tmpdirs_ >= 4) {
        perror("fuzz: mkdtemp");
        abort();
    }
    if (fuzz_n_tmpdirs_ == 0) atexit(fuzz_rm_tmpdirs_);
    snprintf(fuzz_tmpdirs_[fuzz_n_tmpdirs_++], sizeof fuzz_tmpdirs_[0], "%s", dir);
    return dir;
}

/* Writes exactly n bytes to path (truncating). 0 or -1. */
static inline int fuzz_write_file(const char *path, const void *buf, size_t n) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const char *p = (const char *)buf;
    if (fd < 0) return -1;
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            close(fd);
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return close(fd);
}

/* Reads a whole file into heap memory (malloc). NULL on failure. */
static inline void *fuzz_read_file(const char *path, size_t *n_out) {
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    long n;
    if (!f) return NULL;
    if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        return NULL;
    }
    buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) {
        buf[n] = 0;
        *n_out = (size_t)n;
    }
    return buf;
}

/* Source tree root (for the vocabulary and fixtures): CLIPDB_SOURCE_DIR, else the
** path CMake compiled in. */
static inline const char *fuzz_source_dir(void) {
    const char *e = getenv("CLIPDB_SOURCE_DIR");
#ifndef CDB_SOURCE_DIR
#define CDB_SOURCE_DIR "."
#endif
    return e && *e ? e : CDB_SOURCE_DIR;
}

/* A little-endian u32 at p. */
static inline uint32_t fuzz_u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The cache targets' damage (fuzz_packcache, fuzz_tokcache): a malloc'ed copy of valid
** damaged as p[0..n) says under mode 0: replaced by p; 1: patches of 5 bytes (u32 offset
** modulo the size, then the byte); 2: cut at a u32 offset (modulo the size + 1), then
** patched as 1. *out_n: its size. NULL when out of memory. */
static inline unsigned char *fuzz_damage(const unsigned char *valid, size_t valid_n,
                                         const uint8_t *p, size_t n, int mode, size_t *out_n) {
    const uint8_t *end = p + n;
    size_t fn = mode == 0 ? n : valid_n;
    unsigned char *f = malloc(fn ? fn : 1);
    if (!f) return NULL;
    if (mode == 0) {
        if (n) memcpy(f, p, n);
        *out_n = n;
        return f;
    }
    memcpy(f, valid, valid_n);
    if (mode == 2 && end - p >= 4) {
        fn = fuzz_u32(p) % (valid_n + 1);
        p += 4;
    }
    for (; fn && end - p >= 5; p += 5) f[fuzz_u32(p) % fn] = p[4];
    *out_n = fn;
    return f;
}

#endif /* CDB_FUZZ_UTIL_H */
