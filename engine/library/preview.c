/*
** preview.c: the viewer's large JPEGs of originals that browsers cannot show (HEIC,
** TIFF, camera RAW). Made on demand: the original opened the one way a recorded photo
** is (cdb_eng_open_file_id: 404 gone, 409 changed, as for the original itself), read,
** decoded fast (cdb_eng_decode_original: a JPEG shrinks in the DCT domain, a RAW gives
** its embedded preview), scaled by area averaging to its long side and compressed as
** the thumbnails are (cdb_eng_jpeg_make).
**
** The cache: <db>/previews/<tag>.jpg, where the tag is a hash of the row (id, size,
** mtime, device, inode, content hash), px and the format's version, so a photo that
** changed (and was reindexed) gets a new file and a request never sees a stale one.
** Written to a temporary name and renamed; a read bumps the file's mtime, and after
** each write the oldest (by mtime) go until the folder holds at most
** CDB_ENGINE_PREVIEW_CACHE_MB. Best effort: a database this user cannot write, or a
** full disk, serves previews uncached. Readers of another process see whole files.
**
** Memory: a decode holds the whole file and its pixels (a 100 MP HEIC: ~30 MB + 300 MB),
** so at most CDB_ENGINE_PREVIEW_DECODES run at once per engine handle; the others wait
** (and find the cache filled when the same photo was asked for twice).
*/
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/library/library.h"

#define PREVIEW_QUALITY 85
#define PREVIEW_VERSION 1 /* bump when the bytes made for a key change */
#define PREVIEW_DIR "previews"

void cdb_engine_preview_clear(cdb_engine_preview *p) {
    if (!p) return;
    free(p->jpeg);
    memset(p, 0, sizeof *p);
}

/* The cache key of row f at px: 32 hex digits. */
static void preview_tag(const cdb_db_file *f, int px, char tag[40]) {
    int64_t v[7] = {PREVIEW_VERSION, f->id, f->meta.size, f->meta.mtime_ns, (int64_t)f->meta.dev,
                    (int64_t)f->meta.ino, px};
    unsigned char buf[sizeof v + CDB_DB_HASH_BYTES];
    uint8_t h[CDB_DB_HASH_BYTES];
    memcpy(buf, v, sizeof v);
    memcpy(buf + sizeof v, f->meta.hash, CDB_DB_HASH_BYTES); /* zeros when unknown */
    cdb_db_hash_buf(buf, sizeof buf, h);
    for (int i = 0; i < CDB_DB_HASH_BYTES; i++) snprintf(tag + 2 * i, 3, "%02x", h[i]);
}

/* <dir>/previews[/name] into out; 0, or -1 when it does not fit. */
static int cache_path(const cdb_engine *e, const char *name, char *out, size_t size) {
    int k = name ? snprintf(out, size, "%s/" PREVIEW_DIR "/%s", e->dir, name)
                 : snprintf(out, size, "%s/" PREVIEW_DIR, e->dir);
    return k > 0 && (size_t)k < size ? 0 : -1;
}

/* The cached preview of tag into *jpeg, *n bytes (heap); 0, or -1 when there is none. */
static int cache_read(const cdb_engine *e, const char *tag, void **jpeg, size_t *n) {
    char path[PATH_MAX], name[48];
    struct stat sb;
    unsigned char *buf = NULL;
    size_t got = 0;
    int fd;
    snprintf(name, sizeof name, "%s.jpg", tag);
    if (cache_path(e, name, path, sizeof path) ||
        (fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)) < 0)
        return -1;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size <= 0 ||
        sb.st_size > (off_t)256 << 20 || !(buf = malloc((size_t)sb.st_size)))
        goto fail;
    while (got < (size_t)sb.st_size) {
        ssize_t k = read(fd, buf + got, (size_t)sb.st_size - got);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) goto fail;
        got += (size_t)k;
    }
    futimens(fd, NULL); /* recently used (fails quietly on a read-only database) */
    close(fd);
    *jpeg = buf;
    *n = got;
    return 0;
fail:
    free(buf);
    close(fd);
    return -1;
}

typedef struct cache_entry {
    char name[48];
    int64_t bytes;
    int64_t mtime_ns;
} cache_entry;

static int by_age(const void *a, const void *b) {
    const cache_entry *x = a, *y = b;
    return x->mtime_ns < y->mtime_ns ? -1 : x->mtime_ns > y->mtime_ns;
}

/* The oldest previews out until the folder holds at most the cache's bytes. */
static void cache_trim(const cdb_engine *e) {
    char dir[PATH_MAX];
    const int64_t cap = (int64_t)CDB_ENGINE_PREVIEW_CACHE_MB << 20;
    cache_entry *v = NULL;
    size_t n = 0, alloc = 0;
    int64_t total = 0;
    struct dirent *d;
    DIR *dh;
    int dfd;
    if (cache_path(e, NULL, dir, sizeof dir) || !(dh = opendir(dir))) return;
    dfd = dirfd(dh);
    while ((d = readdir(dh))) {
        struct stat sb;
        size_t len = strlen(d->d_name);
        if (len < 5 || len >= sizeof v->name || strcmp(d->d_name + len - 4, ".jpg") ||
            fstatat(dfd, d->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(sb.st_mode))
            continue;
        if (n == alloc) {
            size_t na = alloc ? alloc * 2 : 256;
            cache_entry *p = realloc(v, sizeof *p * na);
            if (!p) break;
            v = p;
            alloc = na;
        }
        snprintf(v[n].name, sizeof v[n].name, "%s", d->d_name);
        v[n].bytes = (int64_t)sb.st_size;
        v[n].mtime_ns = (int64_t)sb.st_mtim.tv_sec * 1000000000LL + sb.st_mtim.tv_nsec;
        total += v[n++].bytes;
    }
    if (total > cap) {
        qsort(v, n, sizeof *v, by_age);
        for (size_t i = 0; i < n && total > cap; i++)
            if (unlinkat(dfd, v[i].name, 0) == 0) total -= v[i].bytes;
    }
    closedir(dh);
    free(v);
}

/* Stores jpeg under tag (best effort: nothing when the folder cannot be written). */
static void cache_write(const cdb_engine *e, const char *tag, const void *jpeg, size_t n) {
    char dir[PATH_MAX], tmp[PATH_MAX], final[PATH_MAX], name[96];
    const unsigned char *p = jpeg;
    int fd, ok = 1;
    if (cache_path(e, NULL, dir, sizeof dir)) return;
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) return;
    snprintf(name, sizeof name, ".%s.%ld.%p.tmp", tag, (long)getpid(), (void *)&fd);
    if (cache_path(e, name, tmp, sizeof tmp)) return;
    snprintf(name, sizeof name, "%s.jpg", tag);
    if (cache_path(e, name, final, sizeof final)) return;
    if ((fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644)) < 0) return;
    for (size_t off = 0; ok && off < n;) {
        ssize_t k = write(fd, p + off, n - off);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) ok = 0;
        else off += (size_t)k;
    }
    if (close(fd) != 0) ok = 0;
    if (!ok || rename(tmp, final) != 0) {
        unlink(tmp);
        return;
    }
    cache_trim(e);
}

/* At most CDB_ENGINE_PREVIEW_DECODES at once per handle. */
static void decode_slot_take(cdb_engine *e) {
    pthread_mutex_lock(&e->preview_mu);
    while (e->n_previewing >= CDB_ENGINE_PREVIEW_DECODES)
        pthread_cond_wait(&e->preview_cv, &e->preview_mu);
    e->n_previewing++;
    pthread_mutex_unlock(&e->preview_mu);
}

static void decode_slot_give(cdb_engine *e) {
    pthread_mutex_lock(&e->preview_mu);
    e->n_previewing--;
    pthread_cond_signal(&e->preview_cv);
    pthread_mutex_unlock(&e->preview_mu);
}

/* The decode's target: the short side that gives a long side of at least px, so a
** JPEG shrinks in the DCT domain no further than the preview needs. */
static int decode_target(const cdb_db_file *f, int px) {
    int64_t w = f->meta.width, h = f->meta.height, lo = w < h ? w : h, hi = w < h ? h : w;
    if (lo <= 0 || hi <= 0) return px;
    return (int)((lo * px + hi - 1) / hi);
}

static cdb_status make_preview(cdb_engine *e, cdb_db *db, const cdb_db_file *f, int fd,
                               const struct stat *sb, int px, cdb_engine_preview *out) {
    char reason[256] = "";
    cdb_image *img = NULL;
    eng_thumb t;
    cdb_status st;
    memset(&t, 0, sizeof t);
    decode_slot_take(e);
    if (cache_read(e, out->tag, &out->jpeg, &out->n) == 0) { /* made while this one waited */
        decode_slot_give(e);
        return CDB_OK;
    }
    st = cdb_eng_decode_original(db, f, fd, sb, decode_target(f, px), &img, reason, sizeof reason);
    if (st == CDB_OK) st = cdb_eng_jpeg_make(img, px, PREVIEW_QUALITY, &t);
    cdb_image_free(img); /* the pixels go before the next decode starts */
    decode_slot_give(e);
    if (st != CDB_OK)
        return cdb_eng_failw(CDB_NOTFOUND, CDB_ENGINE_E_NO_PREVIEW, reason[0] ? reason : NULL,
                             "no preview for %lld (its original cannot be decoded)",
                             (long long)f->id);
    cache_write(e, out->tag, t.jpeg, t.n); /* best effort */
    out->jpeg = t.jpeg; /* malloc'd: cdb_free frees it */
    out->n = t.n;
    return CDB_OK;
}

cdb_status cdb_engine_preview_get(cdb_engine *e, int64_t id, int px, int tag_only,
                                  cdb_engine_preview *out) {
    eng_reader *r = NULL;
    cdb_db_file f;
    struct stat sb;
    int fd = -1;
    cdb_status st;
    cdb_eng_clear();
    memset(out, 0, sizeof *out);
    memset(&f, 0, sizeof f);
    if (px < 64 || px > 8192)
        return cdb_eng_failw(CDB_INVALID, CDB_ENGINE_E_NONE, NULL,
                             "a preview's size is 64 to 8192 pixels, not %d", px);
    if ((st = cdb_eng_reader_get(e, &r)) != CDB_OK) return st;
    /* the catalog's file, checked on disk: 404 gone, 409 changed, like the original */
    if ((st = cdb_eng_open_file_id(r->db, id, &f, NULL, &fd, &sb)) != CDB_OK) goto done;
    preview_tag(&f, px, out->tag);
    if (tag_only || cache_read(e, out->tag, &out->jpeg, &out->n) == 0) goto done;
    st = make_preview(e, r->db, &f, fd, &sb, px, out);
done:
    if (fd >= 0) close(fd);
    cdb_db_file_clear(&f);
    cdb_eng_reader_put(e, r);
    if (st != CDB_OK) {
        free(out->jpeg);
        memset(out, 0, sizeof *out);
    }
    return st;
}
