/*
** stamp.c: the stamp of a checked cache file (core.h, cdb_stamp_*), one rule for every
** cache that hashes its payload at open: the encoder's packed matrices and tokenizer
** tables (encoder/cachedir.c) and the index's vector snapshots (index/snapshot.c).
**
** A cache file whose payload was hashed whole and matched is fsynced, and a stamp is
** written beside it (<file>.ok: its device, inode, size, mtime and ctime and the payload
** sum its header names, with an XXH3-64 over them). A later open whose file still has
** that identity and whose header names that sum may skip the payload hash; every other
** check still runs. Why that is safe: any write to the file changes its ctime, which no
** user can set back; a replaced file is another inode; the fsync before the stamp means
** a crash cannot leave a stamp beside bytes that never reached the disk; and a stamp is
** compared byte for byte, so a torn or damaged stamp only costs a hash.
**
** The stamp goes to "<file>.ok.tmp.<pid>.<n>" (cdb_tmp_create), fsynced, then renamed over "<file>.ok": a
** reader sees the old stamp, the new one or none. Two threads of one process stamping
** the same file write the same bytes (or a stamp that does not match: a hash later).
** A temporary left by a killed writer is the caller's to remove (cachedir.c's prune,
** snapshot.c's stale temporaries).
*/
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "core/core.h"

#define STAMP_MAGIC "CDBSTMP1"

static int64_t ts_ns(struct timespec t) { return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec; }

cdb_stamp cdb_stamp_of(const struct stat *st, const uint64_t payload_sum[2]) {
    cdb_stamp s;
    memset(&s, 0, sizeof s);
    memcpy(s.magic, STAMP_MAGIC, sizeof s.magic);
    s.dev = (uint64_t)st->st_dev;
    s.ino = (uint64_t)st->st_ino;
    s.size = (uint64_t)st->st_size;
    s.mtime_ns = ts_ns(st->st_mtim);
    s.ctime_ns = ts_ns(st->st_ctim);
    s.payload_sum[0] = payload_sum[0];
    s.payload_sum[1] = payload_sum[1];
    s.sum = XXH3_64bits(&s, offsetof(cdb_stamp, sum));
    return s;
}

int cdb_stamp_path(const char *file, char *out, size_t size) {
    return snprintf(out, size, "%s.ok", file) >= (int)size ? -1 : 0;
}

int cdb_stamp_matches(const char *file, const struct stat *st, const uint64_t payload_sum[2]) {
    char p[4096 + 8];
    cdb_stamp want = cdb_stamp_of(st, payload_sum), got;
    int fd, ok;
    if (cdb_stamp_path(file, p, sizeof p) != 0) return 0;
    if ((fd = cdb_open_regular(p, 0)) < 0) return 0;
    ok = pread(fd, &got, sizeof got, 0) == (ssize_t)sizeof got && !memcmp(&got, &want, sizeof got);
    close(fd);
    return ok;
}

int cdb_stamp_write(const char *file, const cdb_stamp *due) {
    char p[4096 + 8], tmp[4096 + 40];
    struct stat st;
    cdb_stamp s;
    int fd = cdb_open_regular(file, 0), ok;
    if (fd < 0) return -1;
    ok = fsync(fd) == 0 && fstat(fd, &st) == 0;
    close(fd);
    if (!ok) return -1;
    s = cdb_stamp_of(&st, due->payload_sum);
    if (memcmp(&s, due, sizeof s)) return -1; /* another file, or changed since its check */
    if (cdb_stamp_path(file, p, sizeof p) != 0) return -1;
    if ((fd = cdb_tmp_create(p, tmp, sizeof tmp)) < 0) return -1; /* never a planted link */
    ok = write(fd, &s, sizeof s) == (ssize_t)sizeof s && fsync(fd) == 0;
    if (close(fd) != 0 || !ok || rename(tmp, p) != 0) {
        unlink(tmp);
        return -1;
    }
    return 0;
}

void cdb_stamp_touch(const char *file) {
    char p[4096 + 8];
    if (cdb_stamp_path(file, p, sizeof p) == 0) (void)utimensat(AT_FDCWD, p, NULL, AT_SYMLINK_NOFOLLOW);
}
