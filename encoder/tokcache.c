/*
** tokcache.c: the tokenizer cache (tok_int.h, cdb_tok_bpe_open_cached and
** cdb_tok_hf_open_cached). Building a tokenizer's tables from its vocabulary costs a
** one-shot search ~22 ms for CLIP's BPE (inflating 600 KB of merges, then ~100,000 hash
** inserts) and ~1.2 s for Gemma's tokenizer.json (a 33 MB JSON parse, 262k vocabulary
** and 515k merge inserts); mapping them from a file written by an earlier open costs
** milliseconds.
**
** The file, in the cache folder of the packed matrix cache (cachedir.c), named
** <key>-<kind>-f<TC_FORMAT>.tok, in this machine's byte order (a cache is of this
** machine):
**   tc_header | zeros to TC_PAGE | payload
** the payload holding the tokenizer's sections (cdb_tc_sects: what each kind puts, in
** its order), each at a TC_ALIGN boundary, their sizes in the header. The key is the
** XXH3-128 of the kind's name and of the vocabulary files' bytes (each with its
** length): the same vocabulary anywhere shares one file, and an edited one gets another.
**
** Nothing in it is trusted: the header must name this format, kind and key, the file
** must have exactly the size the section sizes give, an XXH3-64 must match over the
** header, the padding after it must be zeros, an XXH3-128 must match over the payload
** (skipped under a valid stamp, cachedir.c), and then the kind's adopt function checks
** every bound its tokenizer relies on (cdb_tok_bpe_from_tables, cdb_tok_hf_from_sects;
** under a valid stamp, those that need no pass over a whole table: cdb_tc_sects.proven
** says why that is safe).
** A file that fails is not used: the tables are built from the vocabulary and the file
** is rewritten.
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
#include "encoder/tok_hf_int.h"
#include "encoder/tok_int.h"

#define TC_MAGIC "CDBTOKC1"
/* Bump when the sections a kind writes change (their layout, hashes, order, or the
** tables a vocabulary gives: tok_int.h, tok_hf_int.h). */
#define TC_FORMAT 2u
#define TC_ALIGN 64
#define TC_PAGE 4096
#define TC_KEEP 4
#define TC_SUFFIX ".tok"
#define TC_SRC_SUFFIX ".src" /* the record of a vocabulary's key (sources_key) */
#define TC_KEEP_SRC 16
#define TC_MAX_SECT_BYTES ((uint64_t)1 << 36)

typedef struct tc_header {
    char magic[8];
    uint32_t format, kind;
    char key[40]; /* the sources' XXH3-128 (hex), NUL-padded */
    uint32_t n_sect, reserved;
    uint64_t sect_bytes[CDB_TC_MAX_SECT];
    uint64_t payload_off, payload_bytes;
    uint64_t payload_sum[2]; /* XXH3-128 of the payload: high, low */
    uint64_t meta_sum;       /* XXH3-64 of this header with meta_sum 0 */
} tc_header;

/* What the cache needs of a kind of tokenizer. */
typedef struct tc_kind {
    const char *name; /* in the key and the file name */
    uint32_t id;
    /* The files the vocabulary at path is read from (their bytes make the key). */
    int (*sources)(const char *path, char files[2][4096], int *n);
    cdb_status (*build)(const char *path, void **out); /* without the cache */
    /* The tables of a built tokenizer; -1 when they cannot go in a file. */
    int (*sects)(const void *tok, cdb_tc_sects *out);
    /* A tokenizer over the sections of a mapped file, after checking every bound; on
    ** success it owns map. */
    cdb_status (*adopt)(cdb_tc_sects *in, void *map, size_t map_size, void **out);
    void (*free)(void *tok);
} tc_kind;

static uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

void cdb_tc_put(cdb_tc_sects *s, const void *p, uint64_t bytes) {
    if (s->n == CDB_TC_MAX_SECT) {
        s->bad = 1;
        return;
    }
    s->p[s->n] = p;
    s->bytes[s->n++] = bytes;
}

void *cdb_tc_scratch(cdb_tc_sects *s, size_t bytes) {
    size_t at = (size_t)align_up(s->scratch_used, 8);
    if (bytes > sizeof s->scratch - at) {
        s->bad = 1;
        return NULL;
    }
    s->scratch_used = at + bytes;
    return memset(s->scratch + at, 0, bytes);
}

const void *cdb_tc_take(cdb_tc_sects *s, size_t elem, uint64_t *count) {
    if (s->bad || s->at == s->n || s->bytes[s->at] % elem) {
        s->bad = 1;
        return NULL;
    }
    *count = s->bytes[s->at] / elem;
    return s->p[s->at++];
}

const void *cdb_tc_take_n(cdb_tc_sects *s, size_t elem, uint64_t count) {
    uint64_t got;
    const void *p = cdb_tc_take(s, elem, &got);
    if (p && got != count) s->bad = 1;
    return s->bad ? NULL : p;
}

/* The sections' offsets (from the payload's start) and the payload's size for h's
** sizes. -1 when a size is out of range (nothing then overflows). */
static int layout(const tc_header *h, uint64_t off[CDB_TC_MAX_SECT], uint64_t *payload) {
    uint64_t end = 0;
    if (h->n_sect > CDB_TC_MAX_SECT) return -1;
    for (uint32_t i = 0; i < h->n_sect; i++) {
        if (h->sect_bytes[i] > TC_MAX_SECT_BYTES) return -1;
        off[i] = align_up(end, TC_ALIGN);
        end = off[i] + h->sect_bytes[i];
    }
    for (uint32_t i = h->n_sect; i < CDB_TC_MAX_SECT; i++)
        if (h->sect_bytes[i]) return -1;
    *payload = end;
    return 0;
}

static uint64_t meta_sum(const tc_header *h) {
    tc_header c = *h;
    c.meta_sum = 0;
    return XXH3_64bits(&c, sizeof c);
}

/* The key as 32 hex digits (NUL-padded to 40). */
static void key_hex(const uint64_t sum[2], char key[40]) {
    memset(key, 0, 40);
    snprintf(key, 33, "%016llx%016llx", (unsigned long long)sum[0], (unsigned long long)sum[1]);
}

/* XXH3-128 over the kind's name and each source's length and bytes, into sum; -1 when
** one cannot be read (the plain open then says why). st: each source's identity before
** its bytes were read; *recordable: each is on disk (fsynced) and was not changed
** meanwhile. */
static int sources_hash(const char *kind, char files[2][4096], int n, uint64_t sum[2],
                        struct stat st[2], int *recordable) {
    XXH3_state_t *s = XXH3_createState();
    XXH128_hash_t h;
    int rc = -1;
    if (!s) return -1;
    XXH3_128bits_reset(s);
    XXH3_128bits_update(s, kind, strlen(kind));
    *recordable = 1;
    for (int i = 0; i < n; i++) {
        static const uint64_t zero[2] = {0, 0};
        struct stat after;
        uint64_t len;
        void *p = NULL;
        int fd = open(files[i], O_RDONLY | O_CLOEXEC);
        if (fd < 0) goto done;
        if (fstat(fd, &st[i]) != 0 || !S_ISREG(st[i].st_mode)) {
            close(fd);
            goto done;
        }
        len = (uint64_t)st[i].st_size;
        if (len && (p = mmap(NULL, (size_t)len, PROT_READ, MAP_PRIVATE, fd, 0)) == MAP_FAILED) {
            close(fd);
            goto done;
        }
        XXH3_128bits_update(s, &len, sizeof len);
        if (len) {
            XXH3_128bits_update(s, p, (size_t)len);
            munmap(p, (size_t)len);
        }
        /* the record vouches for these bytes: on disk, and not changed meanwhile */
        if (fsync(fd) != 0 || fstat(fd, &after) != 0) {
            *recordable = 0;
        } else {
            cdb_stamp before = cdb_stamp_of(&st[i], zero), now = cdb_stamp_of(&after, zero);
            if (memcmp(&before, &now, sizeof now)) *recordable = 0;
        }
        close(fd);
    }
    h = XXH3_128bits_digest(s);
    sum[0] = h.high64, sum[1] = h.low64;
    rc = 0;
done:
    XXH3_freeState(s);
    return rc;
}

/* The record of the sources' key: "<dir>/<XXH3-64 of the kind and the paths>-<kind>.src",
** one cdb_stamp per source (its identity) whose payload sum is the key. */
static void record_path(const char *dir, const char *kind, char files[2][4096], int n,
                        char *out, size_t size) {
    XXH64_hash_t id = XXH3_64bits(kind, strlen(kind));
    for (int i = 0; i < n; i++) id = XXH3_64bits_withSeed(files[i], strlen(files[i]), id);
    snprintf(out, size, "%s/%016llx-%s%s", dir, (unsigned long long)id, kind, TC_SRC_SUFFIX);
}

typedef struct tc_record {
    cdb_stamp s[2];
    int n;
} tc_record;

static int fill_record(int fd, void *ud) {
    const tc_record *r = ud;
    return cdb_cache_write_all(fd, r->s, (size_t)r->n * sizeof r->s[0]);
}

/* The key of the sources (files[0..n)) into key: from their record in dir when each
** still has the identity recorded there (the bytes are then those that were hashed:
** core/stamp.c's argument, the sources fsynced before the record was written), else by
** hashing them, and the record is written. -1 when a source cannot be read. */
static int sources_key(const char *dir, const char *kind, char files[2][4096], int n,
                       char key[40]) {
    char rec[4096 + 128], why[256];
    tc_record r;
    struct stat st[2];
    uint64_t sum[2];
    int fd, ok = 1;
    record_path(dir, kind, files, n, rec, sizeof rec);
    if ((fd = cdb_open_regular(rec, 0)) >= 0) {
        ok = pread(fd, r.s, sizeof r.s, 0) == (ssize_t)((size_t)n * sizeof r.s[0]);
        close(fd);
        for (int i = 0; ok && i < n; i++) {
            cdb_stamp want;
            ok = stat(files[i], &st[i]) == 0;
            want = cdb_stamp_of(&st[i], r.s[0].payload_sum);
            ok = ok && !memcmp(&want, &r.s[i], sizeof want);
        }
        if (ok) {
            key_hex(r.s[0].payload_sum, key);
            return 0;
        }
    }
    if (sources_hash(kind, files, n, sum, st, &ok) != 0) return -1;
    key_hex(sum, key);
    if (!ok) return 0;
    r.n = n;
    for (int i = 0; i < n; i++) r.s[i] = cdb_stamp_of(&st[i], sum);
    if (cdb_cache_publish(dir, rec, fill_record, &r, why, sizeof why) == 0)
        cdb_cache_prune(dir, TC_SRC_SUFFIX, TC_KEEP_SRC);
    return 0;
}

typedef struct tc_open {
    const tc_kind *kind;
    char dir[4096], path[4096 + 64];
    char key[40];          /* NUL-padded as in the header */
    char refused[200];     /* why the file there was not used ("": none there) */
    int stamped;           /* the payload hash was skipped: the stamp vouched for it */
    cdb_stamp stamp_due;   /* magic[0] != 0: hashed whole; stamp it */
} tc_open;

/* Maps and validates o->path; a tokenizer over its tables, or NULL (o->refused says
** why; "" when there is no file). */
static void *open_file(tc_open *o) {
    tc_header h;
    struct stat st;
    uint64_t off[CDB_TC_MAX_SECT], payload;
    unsigned char *map = NULL, *pl;
    cdb_tc_sects sects;
    void *t = NULL;
    int fd = cdb_cache_open_header(o->path, &h, sizeof h, &st, o->refused, sizeof o->refused);
#define REFUSE(...) CDB_CACHE_REFUSE(o->refused, __VA_ARGS__)
    if (fd < 0) return NULL;
    if (memcmp(h.magic, TC_MAGIC, 8)) REFUSE("not a clipdb tokenizer cache");
    if (h.format != TC_FORMAT || h.kind != o->kind->id)
        REFUSE("format %u kind %u, this clipdb's is %u kind %u", h.format, h.kind, TC_FORMAT,
               o->kind->id);
    if (memcmp(h.key, o->key, sizeof h.key)) REFUSE("stale: written for another vocabulary");
    if (meta_sum(&h) != h.meta_sum) REFUSE("damaged header (checksum)");
    if (layout(&h, off, &payload) != 0) REFUSE("damaged header (sizes)");
    if (h.payload_off != align_up(sizeof h, TC_PAGE) || h.payload_bytes != payload ||
        (uint64_t)st.st_size != h.payload_off + h.payload_bytes)
        REFUSE("truncated or padded: %lld bytes, the header says %llu", (long long)st.st_size,
               (unsigned long long)(h.payload_off + payload));
    /* under a valid stamp only the pages a search touches are read in; else the payload
    ** is hashed whole, faster with its pages mapped in one go */
    o->stamped = cdb_stamp_matches(o->path, &st, h.payload_sum);
    map = mmap(NULL, (size_t)st.st_size, PROT_READ,
               MAP_PRIVATE | (o->stamped ? 0 : MAP_POPULATE), fd, 0);
    if (map == MAP_FAILED) {
        map = NULL;
        REFUSE("mmap: %s", strerror(errno));
    }
    pl = map + h.payload_off;
    for (size_t i = sizeof h; i < h.payload_off; i++) /* every byte of the file is checked */
        if (map[i]) REFUSE("damaged (padding)");
    for (uint32_t i = 0; i < h.n_sect; i++)
        for (uint64_t b = i ? off[i - 1] + h.sect_bytes[i - 1] : 0; b < off[i]; b++)
            if (pl[b]) REFUSE("damaged (padding)");
    if (!o->stamped) {
        XXH128_hash_t sum = XXH3_128bits(pl, (size_t)payload);
        if (sum.high64 != h.payload_sum[0] || sum.low64 != h.payload_sum[1])
            REFUSE("damaged (payload checksum)");
        o->stamp_due = cdb_stamp_of(&st, h.payload_sum);
    }
    memset(&sects, 0, sizeof sects);
    sects.n = (int)h.n_sect;
    sects.proven = o->stamped;
    for (uint32_t i = 0; i < h.n_sect; i++) {
        sects.p[i] = pl + off[i];
        sects.bytes[i] = h.sect_bytes[i];
    }
    if (o->kind->adopt(&sects, map, (size_t)st.st_size, &t) != CDB_OK) {
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

/* Writes t's tables to o->path (the header, then each section at its offset in the
** payload); 0 on success, else -1 with why. */
static int write_file(const tc_open *o, const void *t, char *why, size_t why_size) {
    cdb_tc_sects s;
    tc_header h;
    cdb_cache_piece pv[CDB_TC_MAX_SECT + 1]; /* the header, the sections */
    uint64_t off[CDB_TC_MAX_SECT], payload;
    XXH3_state_t *xs;
    XXH128_hash_t sum;
    static const char zeros[TC_ALIGN];
    uint64_t at = 0;
    memset(&s, 0, sizeof s);
    memset(&h, 0, sizeof h);
    if (o->kind->sects(t, &s) != 0 || s.bad) {
        snprintf(why, why_size, "tables that do not fit a file");
        return -1;
    }
    memcpy(h.magic, TC_MAGIC, 8);
    h.format = TC_FORMAT;
    h.kind = o->kind->id;
    memcpy(h.key, o->key, sizeof h.key);
    h.n_sect = (uint32_t)s.n;
    for (int i = 0; i < s.n; i++) h.sect_bytes[i] = s.bytes[i];
    if (layout(&h, off, &payload) != 0) {
        snprintf(why, why_size, "tables too large");
        return -1;
    }
    h.payload_off = align_up(sizeof h, TC_PAGE);
    h.payload_bytes = payload;
    if (!(xs = XXH3_createState())) {
        snprintf(why, why_size, "out of memory");
        return -1;
    }
    XXH3_128bits_reset(xs);
    for (int i = 0; i < s.n; i++) {
        XXH3_128bits_update(xs, zeros, (size_t)(off[i] - at));
        XXH3_128bits_update(xs, s.p[i], (size_t)s.bytes[i]);
        pv[1 + i] = (cdb_cache_piece){s.p[i], (size_t)s.bytes[i], h.payload_off + off[i]};
        at = off[i] + s.bytes[i];
    }
    sum = XXH3_128bits_digest(xs);
    XXH3_freeState(xs);
    h.payload_sum[0] = sum.high64;
    h.payload_sum[1] = sum.low64;
    h.meta_sum = meta_sum(&h);
    pv[0] = (cdb_cache_piece){&h, sizeof h, 0};
    if (cdb_cache_publish(o->dir, o->path, cdb_cache_fill_pieces,
                          &(cdb_cache_pieces){pv, s.n + 1}, why, why_size))
        return -1;
    cdb_cache_prune(o->dir, TC_SUFFIX, TC_KEEP);
    return 0;
}

/* kind's tokenizer of path through the cache in dir (see cdb_tok_bpe_open_cached). */
static cdb_status open_cached(const tc_kind *kind, const char *path, const char *dir, void **out,
                              char *status, size_t status_size) {
    tc_open *o = NULL;
    char files[2][4096], why[256], sink[8];
    int n = 0;
    cdb_status rc;
    if (!status || !status_size) status = sink, status_size = sizeof sink;
    snprintf(status, status_size, "off");
    if (!out || !path || !*path || kind->sources(path, files, &n) != 0 ||
        !(o = calloc(1, sizeof *o)) || cdb_cache_dir_pick(dir, o->dir, sizeof o->dir) != 0 ||
        sources_key(o->dir, kind->name, files, n, o->key) != 0) {
        free(o);
        return kind->build(path, out); /* its errors, or no cache */
    }
    o->kind = kind;
    snprintf(o->path, sizeof o->path, "%s/%s-%s-f%u%s", o->dir, o->key, kind->name, TC_FORMAT,
             TC_SUFFIX);
    if ((*out = open_file(o)) != NULL) {
        snprintf(status, status_size, "%s", o->stamped ? "hit (stamped)" : "hit");
        if (o->stamp_due.magic[0]) cdb_stamp_write(o->path, &o->stamp_due);
        cdb_stamp_touch(o->path); /* recently used (prune) */
        rc = CDB_OK;
    } else if ((rc = kind->build(path, out)) == CDB_OK) {
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

/* ---- CLIP's BPE: its dims, then the seven tables of cdb_tok_bpe_tables ------------- */

static cdb_status bpe_build(const char *path, void **out) {
    return cdb_tok_bpe_open(path, (cdb_tok_bpe **)out);
}

/* The tables' sizes for the counts of d. -1 when a count is out of range. */
static int bpe_sizes(const cdb_tok_bpe_dims *d, uint64_t size[7]) {
    if (d->n_vocab < 1 || d->n_vocab > (1 << 24) || d->arena_bytes < 1 ||
        d->arena_bytes >= UINT32_MAX || d->hcap > (1u << 26) || d->mcap > (1u << 26))
        return -1;
    size[0] = (uint64_t)d->n_vocab * 4;
    size[1] = d->arena_bytes;
    size[2] = size[3] = d->hcap * 4;
    size[4] = d->mcap * 8;
    size[5] = size[6] = d->mcap * 4;
    return 0;
}

static int bpe_sects(const void *tok, cdb_tc_sects *out) {
    cdb_tok_bpe_tables tb;
    cdb_tok_bpe_dims *d = cdb_tc_scratch(out, sizeof *d);
    uint64_t size[7];
    cdb_tok_bpe_tables_of(tok, &tb);
    if (!d || bpe_sizes(&tb.d, size) != 0) return -1;
    *d = tb.d;
    cdb_tc_put(out, d, sizeof *d);
    cdb_tc_put(out, tb.str, size[0]);
    cdb_tc_put(out, tb.arena, size[1]);
    cdb_tc_put(out, tb.hslot, size[2]);
    cdb_tc_put(out, tb.hfull, size[3]);
    cdb_tc_put(out, tb.mkey, size[4]);
    cdb_tc_put(out, tb.mrank, size[5]);
    cdb_tc_put(out, tb.mres, size[6]);
    return 0;
}

static cdb_status bpe_adopt(cdb_tc_sects *in, void *map, size_t map_size, void **out) {
    cdb_tok_bpe_tables tb;
    uint64_t size[7];
    const cdb_tok_bpe_dims *d = cdb_tc_take_n(in, sizeof *d, 1);
    if (!d || bpe_sizes(d, size) != 0)
        return cdb_seterr(CDB_CORRUPT, "tokenizer tables: bad counts");
    tb.d = *d;
    tb.str = cdb_tc_take_n(in, 1, size[0]);
    tb.arena = cdb_tc_take_n(in, 1, size[1]);
    tb.hslot = cdb_tc_take_n(in, 1, size[2]);
    tb.hfull = cdb_tc_take_n(in, 1, size[3]);
    tb.mkey = cdb_tc_take_n(in, 1, size[4]);
    tb.mrank = cdb_tc_take_n(in, 1, size[5]);
    tb.mres = cdb_tc_take_n(in, 1, size[6]);
    if (in->bad || in->at != in->n)
        return cdb_seterr(CDB_CORRUPT, "tokenizer tables: sizes do not match the counts");
    return cdb_tok_bpe_from_tables(&tb, in->proven, map, map_size, (cdb_tok_bpe **)out);
}

static void bpe_free(void *t) { cdb_tok_bpe_free(t); }

static const tc_kind k_clip_bpe = {"clipbpe", 1, cdb_tok_bpe_sources, bpe_build, bpe_sects,
                                   bpe_adopt, bpe_free};

cdb_status cdb_tok_bpe_open_cached(const char *path, const char *dir, cdb_tok_bpe **out,
                                   char *status, size_t status_size) {
    return open_cached(&k_clip_bpe, path, dir, (void **)out, status, status_size);
}

/* ---- tokenizer.json: the sections of cdb_tok_hf_sects ------------------------------- */

static int hf_sources(const char *path, char files[2][4096], int *n) {
    *n = 1;
    return snprintf(files[0], sizeof files[0], "%s", path) >= (int)sizeof files[0] ? -1 : 0;
}

static cdb_status hf_build(const char *path, void **out) {
    return cdb_tok_hf_open(path, (cdb_tok_hf **)out);
}

static int hf_sects(const void *tok, cdb_tc_sects *out) { return cdb_tok_hf_sects(tok, out); }

static cdb_status hf_adopt(cdb_tc_sects *in, void *map, size_t map_size, void **out) {
    return cdb_tok_hf_from_sects(in, map, map_size, (cdb_tok_hf **)out);
}

static void hf_free(void *t) { cdb_tok_hf_free(t); }

static const tc_kind k_hf_json = {"hfjson", 2, hf_sources, hf_build, hf_sects, hf_adopt,
                                  hf_free};

cdb_status cdb_tok_hf_open_cached(const char *path, const char *dir, cdb_tok_hf **out,
                                  char *status, size_t status_size) {
    return open_cached(&k_hf_json, path, dir, (void **)out, status, status_size);
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
