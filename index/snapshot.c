/*
** snapshot.c: the vector snapshot (index.h, cdb_index_snap_*): a copy of a vector set's
** stored fp16 vectors as of a watermark, in one file that searches map instead of
** reading SQLite: the flat plan scans it, the re-rank of an approximate index fetches
** its candidates from it. A cache, never the truth: the caller reads from the store
** whatever the snapshot lacks or whatever changed after its watermark.
**
** The file, in this machine's byte order (a cache of this machine):
**   snap_hdr | zeros to SNAP_PAGE | ids[count] (int64, strictly ascending, >= 0)
**   | zeros to the next SNAP_PAGE | vecs[count * dim] (fp16, row i is ids[i]'s)
** Nothing in it is trusted: the header must name this format, this byte order, the
** vector set (model id, dim) asked for, and a size that equals the file's exactly; the
** padding must be zeros; an XXH3-64 over the header, one over the ids (which must
** ascend: a lookup bisects them) and one over the vectors must match. Hashing the vectors costs ~0.1 s a GB,
** so, as encoder/packcache.c does, the writer leaves a stamp beside the file (core.h's
** cdb_stamp, <file>.ok: its device, inode, size, mtime and ctime and the vectors' sum;
** core/stamp.c says why it is safe) after the file reached the disk (fsync, rename,
** fsync of the folder): an open whose file still has that identity skips the vectors'
** hash; every other check runs.
**
** Writes: a private "<file>.tmp.<pid>.<n>" (cdb_tmp_create: never a planted link)
** written whole, fsynced and renamed over the name, so a reader sees the old file or
** the new one, and a writer killed at any moment leaves the old one (its temporary is
** removed by the next writer).
*/
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "index/index_int.h"

#define SNAP_MAGIC "CDBSNAP1"
#define SNAP_VERSION 1u
#define SNAP_BYTE_ORDER 0x01020304u
#define SNAP_PAGE 4096u
#define SNAP_CHUNK 16384
#define SNAP_MAX_DIM (1 << 20)

typedef struct snap_hdr {
    char magic[8];
    uint32_t version, byte_order;
    uint32_t dim, owner; /* owner: the caller's name for its database (0: none) */
    int64_t model_id, count;
    uint64_t watermark;
    uint64_t vecs_off; /* from the file's start */
    uint64_t ids_sum, vecs_sum;
    uint64_t hdr_sum; /* XXH3-64 of the fields above */
} snap_hdr;

struct cdb_index_snap {
    unsigned char *map;
    size_t map_size;
    snap_hdr h;
    const int64_t *ids;
    const uint16_t *vecs;
};

static uint64_t align_page(uint64_t v) { return (v + SNAP_PAGE - 1) / SNAP_PAGE * SNAP_PAGE; }

static uint64_t hdr_sum(const snap_hdr *h) { return XXH3_64bits(h, offsetof(snap_hdr, hdr_sum)); }

/* The offset of the vectors and the file's size for count vectors of dim; 0 when they
** overflow. */
static int snap_layout(int64_t count, uint32_t dim, uint64_t *vecs_off, uint64_t *size) {
    uint64_t row = (uint64_t)dim * 2, n = (uint64_t)count;
    if (count < 0 || dim == 0 || dim > SNAP_MAX_DIM || n > (UINT64_MAX / 2) / 8 ||
        (n && row > (UINT64_MAX / 4) / n))
        return 0;
    *vecs_off = align_page(SNAP_PAGE + n * 8);
    *size = *vecs_off + n * row;
    return *size >= *vecs_off && *size <= (uint64_t)SIZE_MAX;
}

/* Writes path's stamp (core.h's cdb_stamp, the vectors' sum as its payload sum) for the
** file open as fd, on disk already (fsynced and renamed), when path still names it. Best
** effort: without a stamp the next open hashes the vectors. */
static void write_stamp(const char *path, int fd, uint64_t vecs_sum) {
    char p[4200];
    struct stat st;
    cdb_stamp due;
    if (fstat(fd, &st) != 0 || cdb_stamp_path(path, p, sizeof p) != 0) return;
    due = cdb_stamp_of(&st, (const uint64_t[2]){vecs_sum, 0});
    cdb_index_remove_stale_temps_(p);
    (void)cdb_stamp_write(path, &due);
}

/* ---- reading ---------------------------------------------------------------------------- */

/* Checks the header h of a file of size bytes against the vector set asked for. */
static cdb_status check_header(const char *path, const snap_hdr *h, uint64_t size,
                               int64_t model_id, int dim) {
    uint64_t off, want;
    if (memcmp(h->magic, SNAP_MAGIC, 8))
        return cdb_seterr(CDB_CORRUPT, "%s: not a clipdb vector snapshot", path);
    if (h->byte_order != SNAP_BYTE_ORDER)
        return cdb_seterr(CDB_CORRUPT, "%s: written on a machine of another byte order", path);
    if (h->version != SNAP_VERSION)
        return cdb_seterr(CDB_VERSION, "%s: snapshot version %u, expected %u", path, h->version,
                          SNAP_VERSION);
    if (h->hdr_sum != hdr_sum(h)) return cdb_seterr(CDB_CORRUPT, "%s: damaged header", path);
    if (!snap_layout(h->count, h->dim, &off, &want) || h->vecs_off != off)
        return cdb_seterr(CDB_CORRUPT, "%s: impossible sizes in its header", path);
    if (want != size)
        return cdb_seterr(CDB_CORRUPT, "%s: %llu bytes where its header says %llu (truncated?)",
                          path, (unsigned long long)size, (unsigned long long)want);
    if (model_id >= 0 && h->model_id != model_id)
        return cdb_seterr(CDB_CORRUPT, "%s: of vector set %lld, not %lld", path,
                          (long long)h->model_id, (long long)model_id);
    if (dim > 0 && h->dim != (uint32_t)dim)
        return cdb_seterr(CDB_DIM_MISMATCH, "%s: dim %u, expected %d", path, h->dim, dim);
    return CDB_OK;
}

/* 1 when map[from, to) is all zeros. */
static int zeros(const unsigned char *map, uint64_t from, uint64_t to) {
    for (uint64_t i = from; i < to; i++)
        if (map[i]) return 0;
    return 1;
}

/* The padding (zeros: every byte of the file is checked), the ids' sum and order, and the
** vectors' sum unless the stamp vouches for them. */
static cdb_status check_payload(const char *path, const cdb_index_snap *s, const struct stat *st,
                                unsigned flags) {
    int64_t n = s->h.count;
    if (!zeros(s->map, sizeof s->h, SNAP_PAGE) ||
        !zeros(s->map, SNAP_PAGE + (uint64_t)n * 8, s->h.vecs_off))
        return cdb_seterr(CDB_CORRUPT, "%s: damaged padding", path);
    if (XXH3_64bits(s->ids, (size_t)n * sizeof *s->ids) != s->h.ids_sum)
        return cdb_seterr(CDB_CORRUPT, "%s: its ids do not match their checksum", path);
    for (int64_t i = 0; i < n; i++)
        if (s->ids[i] < 0 || (i && s->ids[i] <= s->ids[i - 1]))
            return cdb_seterr(CDB_CORRUPT, "%s: its ids do not ascend", path);
    if (!(flags & CDB_INDEX_SNAP_VERIFY) &&
        cdb_stamp_matches(path, st, (const uint64_t[2]){s->h.vecs_sum, 0}))
        return CDB_OK;
    if (XXH3_64bits(s->vecs, (size_t)n * s->h.dim * 2) != s->h.vecs_sum)
        return cdb_seterr(CDB_CORRUPT, "%s: its vectors do not match their checksum", path);
    return CDB_OK;
}

cdb_status cdb_index_snap_open(const char *path, int64_t model_id, int dim, unsigned flags,
                               cdb_index_snap **out) {
    cdb_index_snap *s = NULL;
    struct stat st;
    cdb_status rc = CDB_OK;
    int fd;
    *out = NULL;
    if (!path) return cdb_seterr(CDB_INVALID, "snapshot: no path");
    if ((fd = cdb_open_regular(path, 0)) < 0) /* a FIFO there must not block the open */
        return cdb_seterr(errno == ENOENT ? CDB_NOTFOUND
                          : errno == EINVAL || errno == ELOOP ? CDB_CORRUPT
                                                              : cdb_errno_status(errno),
                          "open %s: %s", path,
                          errno == EINVAL ? "not a regular file" : strerror(errno));
    if (!(s = cdb_calloc(1, sizeof *s))) {
        rc = cdb_seterr(CDB_NOMEM, "snapshot");
        goto done;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        rc = cdb_seterr(CDB_CORRUPT, "%s: not a regular file", path);
        goto done;
    }
    if ((uint64_t)st.st_size < SNAP_PAGE || pread(fd, &s->h, sizeof s->h, 0) != sizeof s->h) {
        rc = cdb_seterr(CDB_CORRUPT, "%s: shorter than a snapshot's header", path);
        goto done;
    }
    if ((rc = check_header(path, &s->h, (uint64_t)st.st_size, model_id, dim)) != CDB_OK) goto done;
    s->map_size = (size_t)st.st_size;
    s->map = mmap(NULL, s->map_size, PROT_READ, MAP_SHARED, fd, 0);
    if (s->map == MAP_FAILED) {
        s->map = NULL;
        rc = cdb_seterr(cdb_errno_status(errno), "mmap %s: %s", path, strerror(errno));
        goto done;
    }
    s->ids = (const int64_t *)(s->map + SNAP_PAGE);
    s->vecs = (const uint16_t *)(s->map + s->h.vecs_off);
    if ((rc = check_payload(path, s, &st, flags)) != CDB_OK) goto done;
    if (flags & CDB_INDEX_SNAP_STAMP) write_stamp(path, fd, s->h.vecs_sum);
done:
    close(fd);
    if (rc != CDB_OK) cdb_index_snap_close(s);
    else *out = s;
    return rc;
}

void cdb_index_snap_close(cdb_index_snap *s) {
    if (!s) return;
    if (s->map) munmap(s->map, s->map_size);
    cdb_free(s);
}

int64_t cdb_index_snap_count(const cdb_index_snap *s) { return s->h.count; }
int cdb_index_snap_dim(const cdb_index_snap *s) { return (int)s->h.dim; }
uint64_t cdb_index_snap_watermark(const cdb_index_snap *s) { return s->h.watermark; }
const int64_t *cdb_index_snap_ids(const cdb_index_snap *s) { return s->ids; }
const uint16_t *cdb_index_snap_vecs(const cdb_index_snap *s) { return s->vecs; }

const uint16_t *cdb_index_snap_find(const cdb_index_snap *s, int64_t id) {
    size_t lo = 0, hi = (size_t)s->h.count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->ids[mid] < id) lo = mid + 1;
        else hi = mid;
    }
    if (lo < (size_t)s->h.count && s->ids[lo] == id) return s->vecs + lo * s->h.dim;
    return NULL;
}

/* ---- writing ---------------------------------------------------------------------------- */

static cdb_status pwrite_all(int fd, const void *buf, size_t n, uint64_t off, const char *tmp) {
    const unsigned char *p = buf;
    while (n) {
        ssize_t w = pwrite(fd, p, n, (off_t)off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0)
            return cdb_seterr(w < 0 ? cdb_errno_status(errno) : CDB_IO, "write %s: %s", tmp,
                              w < 0 ? strerror(errno) : "short write");
        p += w, n -= (size_t)w, off += (uint64_t)w;
    }
    return CDB_OK;
}

/* Copies src into fd's file at h's layout, summing ids and vectors into h. */
static cdb_status write_rows(int fd, const char *tmp, const cdb_index_source *src, snap_hdr *h) {
    size_t row = (size_t)h->dim * 2;
    int64_t *ids = cdb_malloc(SNAP_CHUNK * sizeof *ids), last = -1;
    uint16_t *vecs = cdb_malloc(SNAP_CHUNK * row);
    XXH3_state_t *si = XXH3_createState(), *sv = XXH3_createState();
    cdb_status rc = CDB_OK;
    if (!ids || !vecs || !si || !sv) {
        rc = cdb_seterr(CDB_NOMEM, "snapshot buffers");
        goto done;
    }
    XXH3_64bits_reset(si);
    XXH3_64bits_reset(sv);
    for (int64_t pos = 0; pos < h->count && rc == CDB_OK; pos += SNAP_CHUNK) {
        int64_t n = h->count - pos < SNAP_CHUNK ? h->count - pos : SNAP_CHUNK;
        if ((rc = src->read(src->ctx, pos, n, ids, vecs)) != CDB_OK) break;
        for (int64_t i = 0; i < n; last = ids[i++])
            if (ids[i] <= last) {
                rc = cdb_seterr(CDB_INVALID, "snapshot: ids not ascending at %lld",
                                (long long)(pos + i));
                goto done;
            }
        XXH3_64bits_update(si, ids, (size_t)n * sizeof *ids);
        XXH3_64bits_update(sv, vecs, (size_t)n * row);
        if ((rc = pwrite_all(fd, ids, (size_t)n * sizeof *ids, SNAP_PAGE + (uint64_t)pos * 8,
                             tmp)) == CDB_OK)
            rc = pwrite_all(fd, vecs, (size_t)n * row, h->vecs_off + (uint64_t)pos * row, tmp);
    }
    h->ids_sum = XXH3_64bits_digest(si);
    h->vecs_sum = XXH3_64bits_digest(sv);
done:
    XXH3_freeState(si);
    XXH3_freeState(sv);
    cdb_free(ids);
    cdb_free(vecs);
    return rc;
}

cdb_status cdb_index_snap_write_owned(const char *path, int64_t model_id, int dim,
                                      uint64_t watermark, uint32_t owner,
                                      const cdb_index_source *src) {
    char tmp[4200];
    snap_hdr h;
    uint64_t size = 0;
    cdb_status rc = CDB_OK;
    int fd = -1;
    if (!path || !src || !src->read || dim <= 0 || src->n < 0)
        return cdb_seterr(CDB_INVALID, "snapshot: bad arguments");
    memset(&h, 0, sizeof h);
    memcpy(h.magic, SNAP_MAGIC, 8);
    h.version = SNAP_VERSION, h.byte_order = SNAP_BYTE_ORDER;
    h.dim = (uint32_t)dim, h.model_id = model_id, h.count = src->n, h.watermark = watermark;
    h.owner = owner;
    if (!snap_layout(h.count, h.dim, &h.vecs_off, &size))
        return cdb_seterr(CDB_INVALID, "snapshot: %lld vectors of dim %d are too many",
                          (long long)h.count, dim);
    cdb_index_remove_stale_temps_(path);
    if ((fd = cdb_tmp_create(path, tmp, sizeof tmp)) < 0) /* never a planted link */
        return cdb_seterr(cdb_errno_status(errno), "create %s: %s", tmp, strerror(errno));
    if ((rc = write_rows(fd, tmp, src, &h)) != CDB_OK) goto done;
    h.hdr_sum = hdr_sum(&h);
    /* the header last, the size set whole (a file of no vectors has none to write) */
    if ((rc = pwrite_all(fd, &h, sizeof h, 0, tmp)) != CDB_OK) goto done;
    if (ftruncate(fd, (off_t)size) != 0 || fsync(fd) != 0) {
        rc = cdb_seterr(cdb_errno_status(errno), "write %s: %s", tmp, strerror(errno));
        goto done;
    }
    if (rename(tmp, path) != 0) {
        rc = cdb_seterr(cdb_errno_status(errno), "rename %s -> %s: %s", tmp, path,
                        strerror(errno));
        goto done;
    }
    cdb_index_fsync_dir_(path);
    write_stamp(path, fd, h.vecs_sum);
done:
    if (fd >= 0) close(fd);
    if (rc != CDB_OK) unlink(tmp);
    return rc;
}

cdb_status cdb_index_snap_write(const char *path, int64_t model_id, int dim, uint64_t watermark,
                                const cdb_index_source *src) {
    return cdb_index_snap_write_owned(path, model_id, dim, watermark, 0, src);
}

uint32_t cdb_index_snap_owner(const cdb_index_snap *s) { return s ? s->h.owner : 0; }
