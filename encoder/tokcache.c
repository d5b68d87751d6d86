/*
** tokcache.c: the tokenizer cache (tok_int.h, cdb_tok_bpe_open_cached). Building the
** CLIP BPE tokenizer's tables from the standard vocabulary costs a one-shot search
** ~22 ms (inflating 600 KB of merges, then ~100,000 hash inserts); mapping them from a
** file written by an earlier open costs well under a millisecond.
**
** The file, in the cache folder of the packed matrix cache (cachedir.c), named
** <key>-clipbpe-f<TC_FORMAT>.tok, in this machine's byte order (a cache is of this
** machine):
**   tc_header | zeros to TC_PAGE | payload
** the payload holding the tables of cdb_tok_bpe_tables in a fixed order, each at a
** TC_ALIGN boundary, their sizes given by the header's counts. The key is the XXH3-128
** of the vocabulary files' bytes (cdb_tok_bpe_sources, in order, each with its length):
** the same vocabulary anywhere shares one file, and an edited one gets another.
**
** Nothing in it is trusted: the header must name this format, kind and key, the file
** must have exactly the size the counts give, an XXH3-64 must match over the header,
** the padding after it must be zeros, an XXH3-128 must match over the payload (skipped
** under a valid stamp, cachedir.c), and then cdb_tok_bpe_from_tables checks every
** bound the encoder relies on. A file that fails is not used: the tables are built
** from the vocabulary and the file is rewritten.
**
** Concurrency and crashes: as the packed matrix cache (packcache.c): written to a
** private temporary file renamed over the name; a reader's mapping keeps its inode; a
** short file left by a crash is refused by its size. The folder keeps the TC_KEEP most
** recently used .tok files.
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

#include "encoder/encoder_int.h"
#include "encoder/tok_int.h"

#define TC_MAGIC "CDBTOKC1"
/* Bump when tokenizer.c changes its tables' layout, its hashes, or the tables a
** vocabulary gives (tok_int.h, cdb_tok_bpe_tables). */
#define TC_FORMAT 1u
#define TC_KIND_CLIP_BPE 1u
#define TC_ALIGN 64
#define TC_PAGE 4096
#define TC_KEEP 4
#define TC_SUFFIX ".tok"
#define TC_N_SECT 7 /* str, arena, hslot, hfull, mkey, mrank, mres */

typedef struct tc_header {
    char magic[8];
    uint32_t format, kind;
    char key[40]; /* the sources' XXH3-128 (hex), NUL-padded */
    cdb_tok_bpe_dims d;
    uint64_t payload_off, payload_bytes;
    uint64_t payload_sum[2]; /* XXH3-128 of the payload: high, low */
    uint64_t meta_sum;       /* XXH3-64 of this header with meta_sum 0 */
} tc_header;

static uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

/* The sections' offsets (from the payload's start) and sizes for h's counts, and the
** payload's size. -1 when a count is out of range (nothing then overflows). */
static int layout(const tc_header *h, uint64_t off[TC_N_SECT], uint64_t size[TC_N_SECT],
                  uint64_t *payload) {
    uint64_t end = 0;
    if (h->d.n_vocab < 1 || h->d.n_vocab > (1 << 24) || h->d.arena_bytes < 1 ||
        h->d.arena_bytes >= UINT32_MAX || h->d.hcap > (1u << 26) || h->d.mcap > (1u << 26))
        return -1;
    size[0] = (uint64_t)h->d.n_vocab * 4;
    size[1] = h->d.arena_bytes;
    size[2] = size[3] = h->d.hcap * 4;
    size[4] = h->d.mcap * 8;
    size[5] = size[6] = h->d.mcap * 4;
    for (int i = 0; i < TC_N_SECT; i++) {
        off[i] = align_up(end, TC_ALIGN);
        end = off[i] + size[i];
    }
    *payload = end;
    return 0;
}

static uint64_t meta_sum(const tc_header *h) {
    tc_header c = *h;
    c.meta_sum = 0;
    return XXH3_64bits(&c, sizeof c);
}

/* XXH3-128 over each source's length and bytes, as 32 hex digits; -1 when one cannot
** be read (the plain open then says why). */
static int sources_key(char files[2][4096], int n, char key[40]) {
    XXH3_state_t *s = XXH3_createState();
    XXH128_hash_t h;
    int rc = -1;
    if (!s) return -1;
    XXH3_128bits_reset(s);
    XXH3_128bits_update(s, "clipbpe", 7);
    for (int i = 0; i < n; i++) {
        struct stat st;
        uint64_t len;
        void *p = NULL;
        int fd = open(files[i], O_RDONLY | O_CLOEXEC);
        if (fd < 0) goto done;
        if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
            close(fd);
            goto done;
        }
        len = (uint64_t)st.st_size;
        if (len && (p = mmap(NULL, (size_t)len, PROT_READ, MAP_PRIVATE, fd, 0)) == MAP_FAILED) {
            close(fd);
            goto done;
        }
        close(fd);
        XXH3_128bits_update(s, &len, sizeof len);
        if (len) {
            XXH3_128bits_update(s, p, (size_t)len);
            munmap(p, (size_t)len);
        }
    }
    h = XXH3_128bits_digest(s);
    snprintf(key, 33, "%016llx%016llx", (unsigned long long)h.high64,
             (unsigned long long)h.low64);
    rc = 0;
done:
    XXH3_freeState(s);
    return rc;
}

typedef struct tc_open {
    char dir[4096], path[4096 + 64];
    char key[40];          /* NUL-padded as in the header */
    char refused[200];     /* why the file there was not used ("": none there) */
    int stamped;           /* the payload hash was skipped: the stamp vouched for it */
    cdb_cache_stamp stamp_due; /* magic[0] != 0: hashed whole; stamp it */
} tc_open;

/* Maps and validates o->path; a tokenizer over its tables, or NULL (o->refused says
** why; "" when there is no file). */
static cdb_tok_bpe *open_file(tc_open *o) {
    tc_header h;
    struct stat st;
    uint64_t off[TC_N_SECT], size[TC_N_SECT], payload;
    unsigned char *map = NULL, *pl;
    cdb_tok_bpe_tables tb;
    cdb_tok_bpe *t = NULL;
    int fd = open(o->path, O_RDONLY | O_CLOEXEC);
#define REFUSE(...)                                              \
    do {                                                         \
        snprintf(o->refused, sizeof o->refused, __VA_ARGS__);    \
        goto done;                                               \
    } while (0)
    if (fd < 0) {
        if (errno != ENOENT) snprintf(o->refused, sizeof o->refused, "%s", strerror(errno));
        return NULL;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) REFUSE("not a regular file");
    if ((size_t)st.st_size < sizeof h || pread(fd, &h, sizeof h, 0) != (ssize_t)sizeof h)
        REFUSE("truncated (%lld bytes)", (long long)st.st_size);
    if (memcmp(h.magic, TC_MAGIC, 8)) REFUSE("not a clipdb tokenizer cache");
    if (h.format != TC_FORMAT || h.kind != TC_KIND_CLIP_BPE)
        REFUSE("format %u kind %u, this clipdb's is %u kind %u", h.format, h.kind, TC_FORMAT,
               TC_KIND_CLIP_BPE);
    if (memcmp(h.key, o->key, sizeof h.key)) REFUSE("stale: written for another vocabulary");
    if (meta_sum(&h) != h.meta_sum) REFUSE("damaged header (checksum)");
    if (layout(&h, off, size, &payload) != 0) REFUSE("damaged header (counts)");
    if (h.payload_off != align_up(sizeof h, TC_PAGE) || h.payload_bytes != payload ||
        (uint64_t)st.st_size != h.payload_off + h.payload_bytes)
        REFUSE("truncated or padded: %lld bytes, the header says %llu", (long long)st.st_size,
               (unsigned long long)(h.payload_off + payload));
    map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    if (map == MAP_FAILED) {
        map = NULL;
        REFUSE("mmap: %s", strerror(errno));
    }
    pl = map + h.payload_off;
    for (size_t i = sizeof h; i < h.payload_off; i++) /* every byte of the file is checked */
        if (map[i]) REFUSE("damaged (padding)");
    o->stamped = cdb_cache_stamp_matches(o->path, &st, h.payload_sum);
    if (!o->stamped) {
        XXH128_hash_t sum = XXH3_128bits(pl, (size_t)payload);
        if (sum.high64 != h.payload_sum[0] || sum.low64 != h.payload_sum[1])
            REFUSE("damaged (payload checksum)");
        o->stamp_due = cdb_cache_stamp_of(&st, h.payload_sum);
    }
    tb.d = h.d;
    tb.str = (const uint32_t *)(pl + off[0]);
    tb.arena = (const char *)(pl + off[1]);
    tb.hslot = (const uint32_t *)(pl + off[2]);
    tb.hfull = (const uint32_t *)(pl + off[3]);
    tb.mkey = (const uint64_t *)(pl + off[4]);
    tb.mrank = (const int32_t *)(pl + off[5]);
    tb.mres = (const int32_t *)(pl + off[6]);
    if (cdb_tok_bpe_from_tables(&tb, map, (size_t)st.st_size, &t) != CDB_OK) {
        snprintf(o->refused, sizeof o->refused, "%s", cdb_errmsg());
        cdb_clearerr();
        goto done;
    }
    map = NULL; /* t's now */
done:
#undef REFUSE
    if (map) munmap(map, (size_t)st.st_size);
    close(fd);
    return t;
}

typedef struct tc_out {
    const tc_header *h;
    const cdb_tok_bpe_tables *tb;
    const uint64_t *off, *size;
} tc_out;

/* cdb_cache_publish's fill: the header, zeros to the payload, the sections. */
static int fill_file(int fd, void *ud) {
    static const char zeros[TC_PAGE];
    const tc_out *o = ud;
    const void *sect[TC_N_SECT] = {o->tb->str,  o->tb->arena, o->tb->hslot, o->tb->hfull,
                                   o->tb->mkey, o->tb->mrank, o->tb->mres};
    uint64_t at = 0;
    if (cdb_cache_write_all(fd, o->h, sizeof *o->h) ||
        cdb_cache_write_all(fd, zeros, (size_t)(o->h->payload_off - sizeof *o->h)))
        return -1;
    for (int i = 0; i < TC_N_SECT; i++) {
        if (cdb_cache_write_all(fd, zeros, (size_t)(o->off[i] - at)) ||
            cdb_cache_write_all(fd, sect[i], (size_t)o->size[i]))
            return -1;
        at = o->off[i] + o->size[i];
    }
    return 0;
}

/* Writes t's tables to o->path; 0 on success, else -1 with why. */
static int write_file(const tc_open *o, const cdb_tok_bpe *t, char *why, size_t why_size) {
    cdb_tok_bpe_tables tb;
    tc_header h;
    uint64_t off[TC_N_SECT], size[TC_N_SECT], payload;
    XXH3_state_t *s;
    XXH128_hash_t sum;
    static const char zeros[TC_ALIGN];
    const void *sect[TC_N_SECT];
    uint64_t at = 0;
    cdb_tok_bpe_tables_of(t, &tb);
    memset(&h, 0, sizeof h);
    memcpy(h.magic, TC_MAGIC, 8);
    h.format = TC_FORMAT;
    h.kind = TC_KIND_CLIP_BPE;
    memcpy(h.key, o->key, sizeof h.key);
    h.d = tb.d;
    if (layout(&h, off, size, &payload) != 0) {
        snprintf(why, why_size, "tables too large");
        return -1;
    }
    h.payload_off = align_up(sizeof h, TC_PAGE);
    h.payload_bytes = payload;
    sect[0] = tb.str, sect[1] = tb.arena, sect[2] = tb.hslot, sect[3] = tb.hfull;
    sect[4] = tb.mkey, sect[5] = tb.mrank, sect[6] = tb.mres;
    if (!(s = XXH3_createState())) {
        snprintf(why, why_size, "out of memory");
        return -1;
    }
    XXH3_128bits_reset(s);
    for (int i = 0; i < TC_N_SECT; i++) {
        XXH3_128bits_update(s, zeros, (size_t)(off[i] - at));
        XXH3_128bits_update(s, sect[i], (size_t)size[i]);
        at = off[i] + size[i];
    }
    sum = XXH3_128bits_digest(s);
    XXH3_freeState(s);
    h.payload_sum[0] = sum.high64;
    h.payload_sum[1] = sum.low64;
    h.meta_sum = meta_sum(&h);
    if (cdb_cache_publish(o->dir, o->path, fill_file, &(tc_out){&h, &tb, off, size}, why,
                          why_size))
        return -1;
    cdb_cache_prune(o->dir, TC_SUFFIX, TC_KEEP);
    return 0;
}

cdb_status cdb_tok_bpe_open_cached(const char *path, const char *dir, cdb_tok_bpe **out,
                                   char *status, size_t status_size) {
    tc_open *o = NULL;
    char files[2][4096], why[256], sink[8];
    int n = 0;
    cdb_status rc;
    if (!status || !status_size) status = sink, status_size = sizeof sink;
    snprintf(status, status_size, "off");
    if (!out || !path || !*path || cdb_tok_bpe_sources(path, files, &n) != 0 ||
        !(o = calloc(1, sizeof *o)) || cdb_cache_dir_pick(dir, o->dir, sizeof o->dir) != 0 ||
        sources_key(files, n, o->key) != 0) {
        free(o);
        return cdb_tok_bpe_open(path, out); /* its errors, or no cache */
    }
    snprintf(o->path, sizeof o->path, "%s/%s-clipbpe-f%u%s", o->dir, o->key, TC_FORMAT,
             TC_SUFFIX);
    if ((*out = open_file(o)) != NULL) {
        snprintf(status, status_size, "%s", o->stamped ? "hit (stamped)" : "hit");
        if (o->stamp_due.magic[0]) cdb_cache_stamp_write(o->path, o->dir, &o->stamp_due);
        cdb_cache_stamp_touch(o->path); /* recently used (prune) */
        rc = CDB_OK;
    } else if ((rc = cdb_tok_bpe_open(path, out)) == CDB_OK) {
        if (write_file(o, *out, why, sizeof why) != 0)
            snprintf(status, status_size, "not written: %s", why);
        else if (o->refused[0])
            snprintf(status, status_size, "rebuilt: %s", o->refused);
        else
            snprintf(status, status_size, "written");
    }
    CDB_LOG_DEBUG("tokenizer cache %s: %s", o->path, status);
    free(o);
    return rc;
}

int cdb_tok_cache_reseal(void *file, size_t n) {
    tc_header h;
    if (n < sizeof h) return -1;
    memcpy(&h, file, sizeof h);
    if (h.payload_off <= n && h.payload_bytes <= n - h.payload_off) {
        XXH128_hash_t sum = XXH3_128bits((unsigned char *)file + h.payload_off,
                                         (size_t)h.payload_bytes);
        h.payload_sum[0] = sum.high64;
        h.payload_sum[1] = sum.low64;
    }
    h.meta_sum = meta_sum(&h);
    memcpy(file, &h, sizeof h);
    return 0;
}
