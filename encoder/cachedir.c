/*
** cachedir.c: what the encoder's on-disk caches share (encoder_int.h, "the cache
** folder"): the packed matrix cache (packcache.c) and the tokenizer cache (tokcache.c)
** keep their files in one folder, under one stamp rule and one size policy.
**
** The folder: the caller's, else $CLIPDB_CACHE_DIR/packed, $XDG_CACHE_HOME/clipdb/packed,
** $HOME/.cache/clipdb/packed. Deleting it is always safe.
**
** The stamp: core's (core.h, cdb_stamp_*; stamp.c says why it is safe): a cache file
** that passed its whole check (its payload hashed) is fsynced and stamped (<file>.ok),
** and a later open of the same unchanged file skips the payload hash; every other check
** still runs.
**
** Disk use: per kind of file (its suffix), the folder keeps the `keep` most recently
** used files (a hit refreshes the mtime of the file's stamp, never of the file, whose
** ctime the stamp holds); writing a new one deletes the older ones with their stamps,
** stamps left without a file, and temporary files (of a cache file or of a stamp) an
** interrupted writer left over an hour ago.
*/
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "encoder/encoder_int.h"

#define CD_STAMP_SUFFIX ".ok" /* cdb_stamp_path's */
#define CD_MAX_FILES 64

/* 1 when real (an absolute path) and every folder above it are folders, not links, that
** only we or root can change: owned by one of us, and writable by others (or by a group
** not ours) only with the sticky bit, which keeps them from renaming our entries. The
** folders above matter as much as the cache folder: whoever can rename an entry above it
** can swap the cache folder for theirs between our check and our open. */
static int chain_trusted(const char *real) {
    char p[4096];
    size_t n = strlen(real);
    if (real[0] != '/' || n >= sizeof p) return 0;
    memcpy(p, real, n + 1);
    for (;;) {
        struct stat st;
        char *slash;
        if (lstat(p, &st) != 0 || !S_ISDIR(st.st_mode) ||
            (st.st_uid != geteuid() && st.st_uid != 0))
            return 0;
        if (!(st.st_mode & S_ISVTX) &&
            ((st.st_mode & S_IWOTH) || ((st.st_mode & S_IWGRP) && st.st_gid != getegid())))
            return 0;
        if (!strcmp(p, "/")) return 1;
        slash = strrchr(p, '/');
        slash[slash == p] = '\0'; /* "/a" -> "/", "/a/b" -> "/a" */
    }
}

int cdb_cache_dir_make(const char *dir) {
    char p[4096];
    size_t n = strlen(dir);
    if (n == 0 || n >= sizeof p) return -1;
    memcpy(p, dir, n + 1);
    for (size_t i = 1; i <= n; i++)
        if (p[i] == '/' || p[i] == '\0') {
            char c = p[i];
            p[i] = '\0';
            if (mkdir(p, 0777) != 0 && errno != EEXIST) return -1;
            p[i] = c;
        }
    if (cdb_dir_private(dir) && chain_trusted(dir)) return 0;
    errno = EPERM;
    return -1;
}

/* The folder's name into out, before the trust check. */
static int dir_name(const char *dir, char *out, size_t size) {
    const char *v;
    if (dir && *dir) return snprintf(out, size, "%s", dir) >= (int)size ? -1 : 0;
    if ((v = getenv("CLIPDB_CACHE_DIR")) && *v)
        return snprintf(out, size, "%s/packed", v) >= (int)size ? -1 : 0;
    if ((v = getenv("XDG_CACHE_HOME")) && *v == '/')
        return snprintf(out, size, "%s/clipdb/packed", v) >= (int)size ? -1 : 0;
    if ((v = getenv("HOME")) && *v)
        return snprintf(out, size, "%s/.cache/clipdb/packed", v) >= (int)size ? -1 : 0;
    return -1;
}

/* name with every link above its last component resolved, into out (size bytes): the
** deepest folder above it that exists, through realpath and checked (chain_trusted), then
** the rest as named. The last component is kept as it is, so that a link there is seen
** (and refused) by lstat. */
static int resolve_above(const char *name, char *out, size_t size) {
    char head[4096], real[PATH_MAX];
    struct stat st;
    size_t end = strlen(name), start;
    while (end > 1 && name[end - 1] == '/') end--;
    if (end == 0 || end >= sizeof head) return -1;
    memcpy(head, name, end);
    for (;;) { /* head[0, end) names a path; try the folder above its last component */
        size_t above;
        start = end;
        while (start > 0 && head[start - 1] != '/') start--;
        for (above = start; above > 1 && head[above - 1] == '/';) above--;
        head[above] = '\0';
        if (realpath(above ? head : ".", real)) break;
        if (errno != ENOENT || above == 0) return -1;
        end = above;
    }
    if (stat(real, &st) == 0 && !S_ISDIR(st.st_mode)) /* no folder can be made there */
        return snprintf(out, size, "%s", name) >= (int)size ? -1 : 0;
    if (!chain_trusted(real)) return -1;
    return snprintf(out, size, "%s/%.*s", strcmp(real, "/") ? real : "",
                    (int)(strlen(name) - start), name + start) >= (int)size ? -1 : 0;
}

int cdb_cache_dir_pick(const char *dir, char *out, size_t size) {
    char name[4096];
    struct stat st;
    if (dir_name(dir, name, sizeof name) != 0 || resolve_above(name, out, size) != 0) return -1;
    if (lstat(out, &st) != 0) return 0; /* not there: made (and checked) on a write */
    return cdb_dir_private(out) ? 0 : -1;
}

static int64_t ts_ns(struct timespec t) { return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec; }

int cdb_cache_write_all(int fd, const void *p, size_t n) {
    const char *s = p;
    while (n) {
        ssize_t w = write(fd, s, n > ((size_t)1 << 30) ? (size_t)1 << 30 : n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        s += w, n -= (size_t)w;
    }
    return 0;
}

int cdb_cache_open_header(const char *path, void *h, size_t hsize, struct stat *st, char *why,
                          size_t why_size) {
    int fd = cdb_open_regular(path, 0);
    why[0] = '\0';
    if (fd < 0) {
        if (errno != ENOENT) snprintf(why, why_size, "cannot open it: %s", strerror(errno));
        return -1;
    }
    if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode))
        snprintf(why, why_size, "not a regular file");
    else if ((size_t)st->st_size < hsize || pread(fd, h, hsize, 0) != (ssize_t)hsize)
        snprintf(why, why_size, "truncated (%lld bytes)", (long long)st->st_size);
    else
        return fd;
    close(fd);
    return -1;
}

int cdb_cache_fill_pieces(int fd, void *ud) {
    static const char zeros[4096];
    const cdb_cache_pieces *ps = ud;
    uint64_t pos = 0;
    for (int i = 0; i < ps->n; i++) {
        const cdb_cache_piece *c = &ps->v[i];
        if (c->at < pos) return -1;
        while (pos < c->at) {
            size_t z = c->at - pos < sizeof zeros ? (size_t)(c->at - pos) : sizeof zeros;
            if (cdb_cache_write_all(fd, zeros, z)) return -1;
            pos += z;
        }
        if (cdb_cache_write_all(fd, c->p, c->n)) return -1;
        pos += c->n;
    }
    return 0;
}

typedef struct cd_dirent {
    int64_t used_ns; /* the later of the file's and its stamp's mtime */
    char name[256];
} cd_dirent;

static int cmp_used_desc(const void *a, const void *b) {
    const cd_dirent *x = a, *y = b;
    return (x->used_ns < y->used_ns) - (x->used_ns > y->used_ns);
}

static int has_suffix(const char *name, size_t len, const char *suffix) {
    size_t k = strlen(suffix);
    return len > k && !strcmp(name + len - k, suffix);
}

/* Removes name (a cache file) and its stamp from dir. */
static void remove_file(const char *dir, const char *name) {
    char p[4096 + 256 + 8];
    snprintf(p, sizeof p, "%s/%s%s", dir, name, CD_STAMP_SUFFIX);
    unlink(p);
    snprintf(p, sizeof p, "%s/%s", dir, name);
    unlink(p);
}

void cdb_cache_prune(const char *dir, const char *suffix, int keep) {
    DIR *d = opendir(dir);
    struct dirent *e;
    cd_dirent v[CD_MAX_FILES];
    char stamp_suffix[64];
    int n = 0;
    time_t now = time(NULL);
    if (!d) return;
    snprintf(stamp_suffix, sizeof stamp_suffix, "%s%s", suffix, CD_STAMP_SUFFIX);
    while ((e = readdir(d)) != NULL) {
        char p[4096 + 256 + 8];
        struct stat st, so;
        size_t len = strlen(e->d_name);
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if ((e->d_name[0] == '.' && strstr(e->d_name, ".tmp.")) ||
            strstr(e->d_name, CD_STAMP_SUFFIX ".tmp.")) {
            if (lstat(p, &st) == 0 && S_ISREG(st.st_mode) && now - st.st_mtime > 3600)
                unlink(p);
            continue;
        }
        if (has_suffix(e->d_name, len, stamp_suffix)) {
            p[strlen(p) - strlen(CD_STAMP_SUFFIX)] = '\0';
            if (lstat(p, &st) != 0 && errno == ENOENT) { /* its file is gone */
                snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
                unlink(p);
            }
            continue;
        }
        if (!has_suffix(e->d_name, len, suffix) || len >= sizeof v[0].name ||
            n == CD_MAX_FILES || lstat(p, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        v[n].used_ns = ts_ns(st.st_mtim);
        snprintf(p, sizeof p, "%s/%s%s", dir, e->d_name, CD_STAMP_SUFFIX);
        if (lstat(p, &so) == 0 && ts_ns(so.st_mtim) > v[n].used_ns)
            v[n].used_ns = ts_ns(so.st_mtim);
        memcpy(v[n].name, e->d_name, len + 1);
        n++;
    }
    closedir(d);
    qsort(v, (size_t)n, sizeof v[0], cmp_used_desc);
    for (int i = keep; i < n; i++) remove_file(dir, v[i].name);
}

int cdb_cache_publish(const char *dir, const char *path, int (*fill)(int fd, void *ud), void *ud,
                      char *why, size_t why_size) {
    char tmp[4096 + 64];
    int fd;
    if (cdb_cache_dir_make(dir) != 0) {
        snprintf(why, why_size, "cannot create the folder: %s", strerror(errno));
        return -1;
    }
    snprintf(tmp, sizeof tmp, "%s/.cache.tmp.XXXXXX", dir);
    if ((fd = mkstemp(tmp)) < 0) {
        snprintf(why, why_size, "cannot write in the folder: %s", strerror(errno));
        return -1;
    }
    if (fill(fd, ud) != 0) {
        snprintf(why, why_size, "writing a temporary file: %s", strerror(errno));
        close(fd);
        unlink(tmp);
        return -1;
    }
    if (close(fd) != 0 || rename(tmp, path) != 0) {
        snprintf(why, why_size, "writing a temporary file: %s", strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}
