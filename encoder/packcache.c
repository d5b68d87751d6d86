/*
** packcache.c: the packed matrix cache (encoder.h, cdb_model_params.pack_cache). A
** model's matrices packed by the backend for its GEMM (kernels.h, packed matrix
** images), kept in one file per (weights hash, towers, backend layout) and mapped by
** later opens instead of being widened and packed again: a one-shot `clipdb search`
** then maps the text tower's panels instead of rewriting ~150 MB (ViT-B/32) or
** ~340 MB (SigLIP B/16) of memory.
**
** The file, in this machine's byte order (a cache is of this machine):
**   pc_header | pc_entry[n_mats] | zeros to PC_PAGE | payload
** the payload holding each matrix's packed bytes at its entry's offset (PC_ALIGN
** aligned). Nothing in it is trusted: before any byte is used the header must name
** this format, these weights, these towers and this layout, the size must be exact,
** an XXH3-64 must match over the header and the table, an XXH3-128 over the whole
** payload, and every entry must have the size the backend gives its shape; then, as
** the loader asks for matrices in its fixed order, each must have the shape asked for
** at that place. A file that fails is not used (the matrices are packed as without a
** cache) and is rewritten at the end of the open.
**
** The stamp (cachedir.c): hashing the whole payload costs a query more than the rest of
** the open (150 MB for ViT-B/32), so once a file has passed that check a stamp beside it
** (<file>.ok) vouches for it while the file keeps its identity; every other check still
** runs. So the file trusted is the one that was checked, as the model's weights are
** trusted by their stat key (model.c, files_key). A stamped file is mapped without
** MAP_POPULATE: its pages come in as the text tower first reads them (fault-around),
** which costs a ViT-B/32 query 0.93x the CPU time of mapping all 150 MB up front; a file
** hashed whole is populated, the hash reading every page anyway.
**
** Concurrency: a file is never modified in place. A writer writes a private temporary
** file in the same folder and renames it over the name (atomic); a reader's mapping
** keeps the inode it opened. Two writers racing both write complete files, the last
** rename wins. No fsync: a crash may leave a short or empty file under the name, which
** the next open refuses (size, checksum) and rewrites.
**
** Disk use (cachedir.c): the folder keeps the PC_KEEP most recently used .pack files;
** deleting the folder is always safe.
*/
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "encoder/encoder_int.h"

#define PC_MAGIC "CDBPACK1"
/* Bump when model.c changes which matrices it uploads, their order or their contents
** for the same weights (a transposition, a concatenation, a fold). */
#define PC_FORMAT 2u /* 2: SigLIP's text tower splits its last in-projection */
#define PC_ALIGN 64
#define PC_PAGE 4096
#define PC_KEEP 4
#define PC_MAX_MATS 100000u
#define PC_SUFFIX ".pack"

typedef struct pc_header {
    char magic[8];
    uint32_t format, n_mats;
    char hash[40];   /* the weights hash (hex), NUL-padded */
    char layout[48]; /* cdb_k_matrix_layout */
    char towers[8];  /* "text", "image", "both" */
    uint64_t payload_off, payload_bytes;
    uint64_t payload_sum[2]; /* XXH3-128 of the payload: high, low */
    uint64_t meta_sum;       /* XXH3-64 of this header (meta_sum 0) and the table */
} pc_header;

typedef struct pc_entry {
    int32_t rows, cols;
    uint64_t off, bytes; /* from the payload's start */
} pc_entry;

typedef struct pc_rec {
    const cdb_k_buf *b;
    int rows, cols;
} pc_rec;

struct cdb_pack_cache {
    cdb_k_backend *be;
    char path[4096], dir[4096];
    pc_header want;          /* the header fields this open expects (no sums) */
    unsigned char *map;      /* the validated file, or NULL */
    size_t map_size;
    const pc_entry *table;   /* inside map */
    uint32_t next;           /* the next entry take() hands out */
    int usable;              /* 1 while the mapped file matches every request */
    int stamped;             /* the payload hash was skipped: the stamp vouched for it */
    cdb_stamp stamp_due;     /* magic[0] != 0: the file was hashed whole; stamp it */
    char refused[256];       /* why the file on disk was not used ("" : none there) */
    pc_rec *recs;            /* every matrix of this open, in order, for a rewrite */
    int n_recs, cap_recs, rec_failed;
    char status[320];
};

static size_t align_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

static uint64_t meta_sum(const pc_header *h, const pc_entry *t, uint32_t n) {
    pc_header c = *h;
    XXH3_state_t *s = XXH3_createState();
    uint64_t v;
    if (!s) return 0;
    c.meta_sum = 0;
    XXH3_64bits_reset(s);
    XXH3_64bits_update(s, &c, sizeof c);
    XXH3_64bits_update(s, t, (size_t)n * sizeof *t);
    v = XXH3_64bits_digest(s);
    XXH3_freeState(s);
    return v;
}

/* Maps and validates pc->path whole; on refusal pc->refused says why ("" when there
** is no file). */
static void open_file(cdb_pack_cache *pc) {
    pc_header h;
    pc_entry *t = NULL;
    struct stat st;
    size_t table_bytes, end = 0;
    XXH128_hash_t sum;
    void *map;
    int fd = cdb_cache_open_header(pc->path, &h, sizeof h, &st, pc->refused, sizeof pc->refused);
#define REFUSE(...) CDB_CACHE_REFUSE(pc->refused, __VA_ARGS__)
    if (fd < 0) return;
    if (memcmp(h.magic, PC_MAGIC, 8)) REFUSE("not a clipdb packed matrix cache");
    if (h.format != PC_FORMAT) REFUSE("format %u, this clipdb's is %u", h.format, PC_FORMAT);
    if (memcmp(h.hash, pc->want.hash, sizeof h.hash) ||
        memcmp(h.layout, pc->want.layout, sizeof h.layout) ||
        memcmp(h.towers, pc->want.towers, sizeof h.towers))
        REFUSE("stale: written for other weights, towers or layout");
    if (h.n_mats == 0 || h.n_mats > PC_MAX_MATS) REFUSE("%u matrices", h.n_mats);
    table_bytes = (size_t)h.n_mats * sizeof *t;
    if (h.payload_off != align_up(sizeof h + table_bytes, PC_PAGE) ||
        h.payload_bytes > (uint64_t)st.st_size ||
        (uint64_t)st.st_size != h.payload_off + h.payload_bytes)
        REFUSE("truncated or padded: %lld bytes, the header says %llu", (long long)st.st_size,
               (unsigned long long)(h.payload_off + h.payload_bytes));
    if (!(t = malloc(table_bytes))) REFUSE("out of memory");
    if (pread(fd, t, table_bytes, sizeof h) != (ssize_t)table_bytes) REFUSE("unreadable table");
    if (meta_sum(&h, t, h.n_mats) != h.meta_sum) REFUSE("damaged header (checksum)");
    for (uint32_t i = 0; i < h.n_mats; i++) {
        size_t want = cdb_k_matrix_packed_bytes(pc->be, t[i].rows, t[i].cols);
        if (t[i].rows <= 0 || t[i].cols <= 0 || want == 0 || t[i].bytes != want ||
            t[i].off % PC_ALIGN || t[i].off < end || t[i].off > h.payload_bytes ||
            t[i].bytes > h.payload_bytes - t[i].off)
            REFUSE("damaged table (matrix %u)", i);
        end = t[i].off + t[i].bytes;
    }
    pc->stamped = cdb_stamp_matches(pc->path, &st, h.payload_sum);
    map = mmap(NULL, (size_t)st.st_size, PROT_READ,
               MAP_PRIVATE | (pc->stamped ? 0 : MAP_POPULATE), fd, 0);
    if (map == MAP_FAILED) REFUSE("mmap: %s", strerror(errno));
    if (!pc->stamped) {
        sum = XXH3_128bits((const unsigned char *)map + h.payload_off, h.payload_bytes);
        if (sum.high64 != h.payload_sum[0] || sum.low64 != h.payload_sum[1]) {
            munmap(map, (size_t)st.st_size);
            REFUSE("damaged (payload checksum)");
        }
        pc->stamp_due = cdb_stamp_of(&st, h.payload_sum);
    }
    pc->map = map;
    pc->map_size = (size_t)st.st_size;
    pc->table = (const pc_entry *)(pc->map + sizeof h);
    pc->want.n_mats = h.n_mats;
    pc->want.payload_off = h.payload_off;
    pc->usable = 1;
done:
#undef REFUSE
    free(t);
    close(fd);
}

cdb_pack_cache *cdb_pack_cache_begin(cdb_k_backend *be, const char *dir, const char *hash,
                                     const char *towers, char *why, size_t why_size) {
    const char *layout = cdb_k_matrix_layout(be);
    cdb_pack_cache *pc;
    why[0] = '\0';
    if (!layout) {
        snprintf(why, why_size, "the backend keeps no packed matrices");
        return NULL;
    }
    if (!hash || strlen(hash) != 32 || strlen(layout) >= sizeof pc->want.layout) {
        snprintf(why, why_size, "no weights hash");
        return NULL;
    }
    if (!(pc = calloc(1, sizeof *pc))) {
        snprintf(why, why_size, "out of memory");
        return NULL;
    }
    pc->be = be;
    if (cdb_cache_dir_pick(dir, pc->dir, sizeof pc->dir) != 0 ||
        snprintf(pc->path, sizeof pc->path, "%s/%s-%s-%s-f%u%s", pc->dir, hash, towers, layout,
                 PC_FORMAT, PC_SUFFIX) >= (int)sizeof pc->path) {
        snprintf(why, why_size, "no cache folder ($HOME unset, the path too long, or the "
                 "folder not safe: a link, another user's, or writable by others)");
        free(pc);
        return NULL;
    }
    memcpy(pc->want.magic, PC_MAGIC, 8);
    pc->want.format = PC_FORMAT;
    memcpy(pc->want.hash, hash, 32);
    memcpy(pc->want.layout, layout, strlen(layout));
    snprintf(pc->want.towers, sizeof pc->want.towers, "%s", towers);
    open_file(pc);
    if (pc->refused[0]) CDB_LOG_INFO("packed matrix cache %s refused: %s", pc->path, pc->refused);
    return pc;
}

int cdb_pack_cache_take(cdb_pack_cache *pc, int rows, int cols, cdb_k_buf **out) {
    const pc_entry *e;
    *out = NULL;
    if (!pc || !pc->usable) return 0;
    e = pc->next < pc->want.n_mats ? &pc->table[pc->next] : NULL;
    if (!e || e->rows != rows || e->cols != cols) { /* not the loader's sequence */
        snprintf(pc->refused, sizeof pc->refused, "stale: matrix %u is not %dx%d", pc->next,
                 rows, cols);
        pc->usable = 0;
        return 0;
    }
    if (cdb_k_matrix_borrow_packed(pc->be, pc->map + pc->want.payload_off + e->off, rows, cols,
                                   out) != CDB_OK) {
        cdb_clearerr();
        snprintf(pc->refused, sizeof pc->refused, "the backend refused matrix %u", pc->next);
        pc->usable = 0;
        return 0;
    }
    pc->next++;
    return 1;
}

void cdb_pack_cache_note(cdb_pack_cache *pc, const cdb_k_buf *b, int rows, int cols) {
    if (!pc || pc->rec_failed) return;
    if (pc->n_recs == pc->cap_recs) {
        int cap = pc->cap_recs ? 2 * pc->cap_recs : 64;
        pc_rec *r = realloc(pc->recs, (size_t)cap * sizeof *r);
        if (!r) {
            pc->rec_failed = 1;
            return;
        }
        pc->recs = r;
        pc->cap_recs = cap;
    }
    pc->recs[pc->n_recs++] = (pc_rec){b, rows, cols};
}

/* Writes every recorded matrix to a temporary file, renamed over pc->path: the header,
** the table, then each matrix at its offset in the payload. */
static int write_file(cdb_pack_cache *pc, char *why, size_t why_size) {
    pc_header h = pc->want;
    pc_entry *t;
    cdb_cache_piece *pv = NULL; /* the header, the table, the matrices */
    XXH3_state_t *s = NULL;
    XXH128_hash_t sum;
    static const char zeros[PC_PAGE];
    size_t off = 0, table_bytes = (size_t)pc->n_recs * sizeof *t;
    int rc = -1;
    if (pc->rec_failed || pc->n_recs == 0 || (unsigned)pc->n_recs > PC_MAX_MATS) {
        snprintf(why, why_size, "%s", pc->rec_failed ? "out of memory" : "no matrices");
        return -1;
    }
    if (!(t = calloc((size_t)pc->n_recs, sizeof *t)) ||
        !(pv = calloc((size_t)pc->n_recs + 2, sizeof *pv)) || !(s = XXH3_createState())) {
        snprintf(why, why_size, "out of memory");
        goto done;
    }
    h.payload_off = align_up(sizeof h + table_bytes, PC_PAGE);
    XXH3_128bits_reset(s);
    for (int i = 0; i < pc->n_recs; i++) {
        const void *data = cdb_k_matrix_packed_data(pc->be, pc->recs[i].b);
        size_t bytes = cdb_k_matrix_packed_bytes(pc->be, pc->recs[i].rows, pc->recs[i].cols);
        size_t at = align_up(off, PC_ALIGN);
        if (!data || !bytes) {
            snprintf(why, why_size, "matrix %d has no packed image", i);
            goto done;
        }
        XXH3_128bits_update(s, zeros, at - off);
        XXH3_128bits_update(s, data, bytes);
        t[i] = (pc_entry){pc->recs[i].rows, pc->recs[i].cols, at, bytes};
        pv[2 + i] = (cdb_cache_piece){data, bytes, h.payload_off + at};
        off = at + bytes;
    }
    sum = XXH3_128bits_digest(s);
    h.n_mats = (uint32_t)pc->n_recs;
    h.payload_bytes = off;
    h.payload_sum[0] = sum.high64;
    h.payload_sum[1] = sum.low64;
    h.meta_sum = meta_sum(&h, t, h.n_mats);
    pv[0] = (cdb_cache_piece){&h, sizeof h, 0};
    pv[1] = (cdb_cache_piece){t, table_bytes, sizeof h};
    if (cdb_cache_publish(pc->dir, pc->path, cdb_cache_fill_pieces,
                          &(cdb_cache_pieces){pv, pc->n_recs + 2}, why, why_size))
        goto done;
    rc = 0;
    cdb_cache_prune(pc->dir, PC_SUFFIX, PC_KEEP);
done:
    XXH3_freeState(s);
    free(pv);
    free(t);
    return rc;
}

void cdb_pack_cache_end(cdb_pack_cache *pc) {
    char why[256];
    if (!pc) return;
    if (pc->usable && pc->next == pc->want.n_mats && pc->n_recs == (int)pc->next) {
        snprintf(pc->status, sizeof pc->status, "%s", pc->stamped ? "hit (stamped)" : "hit");
        if (pc->stamp_due.magic[0]) cdb_stamp_write(pc->path, &pc->stamp_due);
        cdb_stamp_touch(pc->path); /* recently used (prune) */
    } else {
        if (pc->usable) /* it matched as far as it went, but the loader wanted a different count */
            snprintf(pc->refused, sizeof pc->refused, "stale: %u matrices, the model has %d",
                     pc->want.n_mats, pc->n_recs);
        if (write_file(pc, why, sizeof why) != 0)
            snprintf(pc->status, sizeof pc->status, "not written: %s", why);
        else if (pc->refused[0])
            snprintf(pc->status, sizeof pc->status, "rebuilt: %s", pc->refused);
        else
            snprintf(pc->status, sizeof pc->status, "written");
    }
    CDB_LOG_DEBUG("packed matrix cache %s: %s", pc->path, pc->status);
    free(pc->recs);
    pc->recs = NULL;
    pc->n_recs = pc->cap_recs = 0;
}

const char *cdb_pack_cache_status(const cdb_pack_cache *pc) { return pc ? pc->status : "off"; }
const char *cdb_pack_cache_path(const cdb_pack_cache *pc) { return pc ? pc->path : ""; }

void cdb_pack_cache_free(cdb_pack_cache *pc) {
    if (!pc) return;
    if (pc->map) munmap(pc->map, pc->map_size);
    free(pc->recs);
    free(pc);
}
