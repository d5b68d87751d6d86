/*
** imagefile.c: reading one photo from disk for the encoder, with every failure
** classified as the library model wants it (DESIGN.md):
**   gone       the file is not there any more (a race with a delete or a move):
**              nothing to record, the deletion pass and the next walk decide;
**   transient  nothing says the bytes are bad: I/O errors, permissions, memory, a
**              file changing while it is read. The file is retried by the next run;
**   permanent  the bytes cannot be used (empty, too large, not decodable): the file
**              is quarantined until it changes.
** Used by the ingest pipeline's readers for the files a walk just met (a recorded
** photo is opened by rowfile.c, then read here from its descriptor).
*/
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/library/library.h"
#include "db/db.h"
#include "encoder/encoder.h"

#define MAX_FILE_BYTES ((int64_t)1 << 30)

static eng_readfail failed(eng_readfail kind, char *reason, size_t size, const char *fmt,
                           const char *a) {
    snprintf(reason, size, fmt, a);
    for (char *p = reason; *p; p++)
        if (*p == '\n' || *p == '\r') *p = ' ';
    return kind;
}

/* Errors of open() and read() that mean the path is simply not there now. */
static int is_gone_errno(int e) { return e == ENOENT || e == ENOTDIR; }

void cdb_eng_stat_meta(const struct stat *st, cdb_db_file_meta *m) {
    m->size = (int64_t)st->st_size;
    m->mtime_ns = (int64_t)st->st_mtim.tv_sec * 1000000000LL + st->st_mtim.tv_nsec;
    m->ctime_ns = (int64_t)st->st_ctim.tv_sec * 1000000000LL + st->st_ctim.tv_nsec;
    m->dev = (uint64_t)st->st_dev;
    m->ino = (uint64_t)st->st_ino;
}

eng_readfail cdb_eng_read_photo(const char *path, int sniff, unsigned char **buf_out,
                                cdb_db_file_meta *meta, char *reason, size_t reason_size) {
    struct stat st;
    eng_readfail k;
    int fd, fl;
    *buf_out = NULL;
    /* O_NONBLOCK: a FIFO that took the file's place since the walk does not block the
    ** open (nor the reader thread); it is refused below. */
    do fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    while (fd < 0 && errno == EINTR);
    if (fd < 0) {
        int e = errno;
        if (is_gone_errno(e) || e == ENXIO) return ENG_FAIL_GONE; /* ENXIO: a socket now */
        if (sniff) return ENG_FAIL_NOT_IMAGE; /* not claiming to be an image: not ours */
        return failed(ENG_FAIL_TRANSIENT, reason, reason_size, "cannot open: %s", strerror(e));
    }
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return failed(ENG_FAIL_TRANSIENT, reason, reason_size, "cannot stat: %s", strerror(e));
    }
    if (!S_ISREG(st.st_mode)) { /* replaced by a folder, FIFO or device since the walk */
        close(fd);
        return ENG_FAIL_GONE;
    }
    if ((fl = fcntl(fd, F_GETFL)) >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    k = cdb_eng_read_photo_fd(fd, &st, sniff, buf_out, meta, reason, reason_size);
    close(fd);
    return k;
}

eng_readfail cdb_eng_read_photo_fd(int fd, const struct stat *st, int sniff,
                                   unsigned char **buf_out, cdb_db_file_meta *meta, char *reason,
                                   size_t reason_size) {
    unsigned char *buf = NULL;
    size_t got = 0;
    *buf_out = NULL;
    cdb_eng_stat_meta(st, meta);
    if (sniff) {
        unsigned char head[32];
        ssize_t k = pread(fd, head, sizeof head, 0);
        if (k <= 0 || !cdb_image_sniff(head, (size_t)k, 1)) {
            return ENG_FAIL_NOT_IMAGE;
        }
    }
    if (meta->size == 0) {
        return failed(ENG_FAIL_PERMANENT, reason, reason_size, "empty file%s", "");
    }
    if (meta->size > MAX_FILE_BYTES) {
        return failed(ENG_FAIL_PERMANENT, reason, reason_size, "file too large (over 1 GiB)%s", "");
    }
    if (!(buf = malloc((size_t)meta->size))) {
        return failed(ENG_FAIL_TRANSIENT, reason, reason_size, "out of memory reading the file%s",
                      "");
    }
    int e = 0;
    while (got < (size_t)meta->size) {
        ssize_t k = pread(fd, buf + got, (size_t)meta->size - got, (off_t)got);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) e = errno;
        if (k <= 0) break;
        got += (size_t)k;
    }
    if (got != (size_t)meta->size) {
        free(buf);
        if (e)
            return failed(ENG_FAIL_TRANSIENT, reason, reason_size, "cannot read: %s", strerror(e));
        return failed(ENG_FAIL_TRANSIENT, reason, reason_size, "cannot read: %s",
                      "the file shrank while it was read");
    }
    cdb_db_hash_buf(buf, got, meta->hash);
    meta->has_hash = 1;
    *buf_out = buf;
    return ENG_FAIL_NONE;
}

/* A decoder or preprocessing status as a failure kind: running out of memory says
** nothing about the bytes; anything else is about them. */
static eng_readfail status_fail(cdb_status rc, const char *what, char *reason, size_t size) {
    const char *m = cdb_errmsg();
    char text[300];
    snprintf(text, sizeof text, "%.40s: %.240s", what, m && *m ? m : cdb_status_str(rc));
    return failed(rc == CDB_NOMEM ? ENG_FAIL_TRANSIENT : ENG_FAIL_PERMANENT, reason, size, "%s",
                  text);
}

eng_readfail cdb_eng_preprocess_kept(cdb_image **img, const cdb_preprocess_params *pp,
                                     float *pixels, char *reason, size_t reason_size) {
    cdb_status rc = cdb_image_preprocess(*img, pp, pixels, NULL);
    cdb_image_free(*img);
    *img = NULL;
    return rc == CDB_OK ? ENG_FAIL_NONE : status_fail(rc, "cannot preprocess", reason, reason_size);
}

eng_readfail cdb_eng_decode_photo(const unsigned char *buf, size_t n, int apply_exif, int decode,
                              int64_t max_pixels, const cdb_preprocess_params *pp, float *pixels,
                              cdb_image **keep, int32_t *width, int32_t *height, int64_t ns[2],
                              int thumb_px,
                              eng_thumb *thumb, eng_phash *ph, char *reason, size_t reason_size) {
    cdb_image *img = NULL;
    cdb_image_params ip = cdb_image_params_default();
    cdb_status rc;
    int64_t t0 = cdb_now_ns(), t1;
    ip.apply_exif = apply_exif;
    ip.decode = decode ? CDB_DECODE_FAST : CDB_DECODE_EXACT;
    ip.target_size = pp->size;
    ip.max_pixels = max_pixels > 0 ? max_pixels : 0;
    ip.phash = ph != NULL; /* a JPEG's DC hash from this decode's entropy decoding */
    rc = cdb_image_decode(buf, n, &ip, &img);
    t1 = cdb_now_ns();
    if (ns) ns[0] += t1 - t0;
    if (rc != CDB_OK) return status_fail(rc, "cannot decode", reason, reason_size);
    *width = img->full_width > 0 ? img->full_width : img->width; /* fast mode shrinks */
    *height = img->full_height > 0 ? img->full_height : img->height;
    if (thumb_px > 0 && thumb && cdb_eng_thumb_make(img, thumb_px, thumb) != CDB_OK)
        CDB_LOG_DEBUG("no thumbnail: %s", cdb_errmsg()); /* the photo itself is fine */
    if (ph) cdb_eng_phash_of_decoded(img, ip.decode == CDB_DECODE_FAST, pp->size, apply_exif, ph);
    if (keep) *keep = NULL;
    if (keep && pixels && cdb_image_device_ready(img)) {
        *keep = img; /* transformed on the device (cdb_encode_images) */
        img = NULL;
        rc = CDB_OK;
    } else {
        rc = pixels ? cdb_image_preprocess(img, pp, pixels, NULL) : CDB_OK;
    }
    cdb_image_free(img);
    if (ns) ns[1] += cdb_now_ns() - t1;
    if (rc != CDB_OK) {
        if (thumb) cdb_eng_thumb_clear(thumb);
        return status_fail(rc, "cannot preprocess", reason, reason_size);
    }
    return ENG_FAIL_NONE;
}
