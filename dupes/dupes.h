/*
** dupes.h: duplicate groups of a photo library, as a pure function over arrays (what
** `clipdb duplicates` prints; the engine gathers the arrays from the catalog, the
** shards and the decoded pixels). Four kinds:
** - exact: the same content hash;
** - near: the same picture resized, recompressed, converted, slightly cropped, with
**   EXIF stripped or rotated: perceptual hashes within a few bits AND CLIP vectors
**   close, and never two distinct shots (both capture times known and different, or
**   both cameras known and different: a burst frame is not a copy of the next one).
**   A near group holds the exact copies of its pictures too;
** - pair: RAW + JPEG (or HEIF, ...) of one shot: the same stem (path without the
**   extension), a RAW and a non-RAW, capture times both known and within pair_ms;
** - burst: distinct shots of one camera with capture times within burst_ms of the
**   previous one; reported as a burst, never as a duplicate (a burst's members are the
**   suggested keepers of their copy groups, one per shot).
** Each group suggests a `keep`: the largest resolution, then the original format (RAW,
** then a camera format, then the rest), then the one with a capture time, then the
** larger file, then the smaller id. A suggestion only: clipdb never deletes a photo.
**
** Cost: near pairs are found through cdb_dupes_phash_pairs (a multi-index of the
** perceptual hashes, not every two of them), the cosine only for the pairs within
** phash_bits; a crowded hash (CDB_DUPES_CROWD) is in no near group.
** Thread-safety: no state; concurrent calls are fine.
*/
#ifndef CDB_DUPES_H
#define CDB_DUPES_H

#include <stddef.h>
#include <stdint.h>

#include "core/core.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CDB_DUPES_HASH_BYTES 16 /* the catalog's content hash (XXH3-128) */

/* How original a file's format is, most original first (the keep's tie-break). */
typedef enum cdb_dupes_format {
    CDB_DUPES_FMT_RAW = 0,    /* camera RAW (DNG, CR2, NEF, ...) */
    CDB_DUPES_FMT_CAMERA = 1, /* what cameras write: JPEG, HEIF, TIFF */
    CDB_DUPES_FMT_OTHER = 2   /* PNG, WebP, AVIF, GIF, BMP, ...: usually a conversion */
} cdb_dupes_format;

/* One photo. Pointers are borrowed for the call only. */
typedef struct cdb_dupes_item {
    int64_t id;                          /* the catalog's file id (the last tie-break) */
    uint8_t hash[CDB_DUPES_HASH_BYTES];  /* content hash */
    int has_hash;                        /* 0: unknown, never exact */
    uint64_t phash;                      /* cdb_image_phash of the decoded pixels */
    int has_phash;                       /* 0: unknown, never near */
    const float *vec;                    /* dim floats, L2-normalized; NULL: never near */
    const char *camera;                  /* make and model; NULL or "": unknown */
    int64_t taken_ms;                    /* capture time (cdb_photo_meta.taken_ms) */
    int has_taken;
    const char *stem;                    /* path without its extension; NULL: no pair */
    int64_t bytes;                       /* file size */
    int width, height;                   /* full resolution, oriented */
    cdb_dupes_format format;
} cdb_dupes_item;

typedef struct cdb_dupes_params {
    int phash_bits;   /* near: perceptual hashes differ in at most this many bits */
    float min_cosine; /* near: and the vectors' cosine is at least this */
    int pair_ms;      /* pair: capture times at most this far apart */
    int burst_ms;     /* burst: each shot at most this long after the previous one */
} cdb_dupes_params;
/* phash_bits 12, min_cosine 0.9, pair_ms 1000, burst_ms 3000. bench_duplicates (150
** scenes, 1,300 files, the bundled model) measured true copies (resized, q=60, WebP, 2%
** crop, EXIF stripped or rotated) within 10 bits and cosine >= 0.974; the 250 pairs of
** distinct scenes within 12 bits had cosines <= 0.72. */
cdb_dupes_params cdb_dupes_params_default(void);

typedef enum cdb_dupes_kind {
    CDB_DUPES_EXACT = 0,
    CDB_DUPES_NEAR = 1,
    CDB_DUPES_PAIR = 2,
    CDB_DUPES_BURST = 3
} cdb_dupes_kind;
#define CDB_DUPES_KINDS 4
/* "exact", "near", "pair", "burst" (static); the kind of a name, or -1. */
const char *cdb_dupes_kind_name(cdb_dupes_kind k);
int cdb_dupes_kind_parse(const char *name);

/* The groups found: group g has kind[g], suggests items[keep[g]] and holds
** items[member[start[g]]] .. items[member[start[g + 1] - 1]] (indices into the items
** array, ascending, at least two). Groups come by kind, then by their first member. */
typedef struct cdb_dupes_groups {
    size_t n_groups;
    cdb_dupes_kind *kind; /* n_groups */
    size_t *keep;         /* n_groups */
    size_t *start;        /* n_groups + 1 */
    size_t *member;       /* start[n_groups] */
} cdb_dupes_groups;

/* Groups items[0..n) (vectors of dim floats; dim > 0 when any vec is set). p == NULL
** means defaults. *out: free with cdb_dupes_groups_free. CDB_INVALID (NULL items with
** n > 0, dim <= 0 with vectors, parameters out of range), CDB_NOMEM. */
cdb_status cdb_dupes_find(const cdb_dupes_item *items, size_t n, int dim,
                          const cdb_dupes_params *p, cdb_dupes_groups **out /* OUT */);
void cdb_dupes_groups_free(cdb_dupes_groups *g); /* NULL is fine */

/* The cosine a near edge is decided by (x, y: dim floats, L2-normalized): their dot
** product accumulated in double, as cdb_dupes_find computes it. */
float cdb_dupes_cosine(const float *x, const float *y, int dim);

/* A pair of hashes within the distance asked for: indices a < b, bits = their Hamming
** distance. */
typedef struct cdb_dupes_pair {
    size_t a, b;
    int bits;
} cdb_dupes_pair;
/* A hash within max_bits of more than this many others is crowded: it names no picture
** (a blank, a uniform or a document-like image, say; bursts of one scene too) and takes
** part in no near pair, so a library of such images costs memory in proportion to its
** size, not to its square. Exact copies are still found by their content hash. */
#define CDB_DUPES_CROWD 64

/* Every pair a < b of hashes[0..n) at Hamming distance <= max_bits (0..64) whose two
** hashes are not crowded (CDB_DUPES_CROWD: neighbours counted among hashes[0..n)), each
** once, in no particular order: exactly the pairs a comparison of every two would give,
** less those with a crowded end. At most n * CDB_DUPES_CROWD / 2 pairs. Found
** by multi-index hashing: the 64 bits are four 16-bit bands, and two hashes within
** max_bits agree within r_i bits in some band i, for any radii with sum(r_i + 1) >
** max_bits; each hash looks up, in a table of each band, the keys within r_i of its
** own. Cost per hash: the sum of the balls' sizes (about 1,100 lookups for 12 bits)
** plus the hashes met there (n / 65536 per lookup for spread hashes); when that is more
** than n, every two are compared. Memory: O(n) plus the answer. A crowd costs each of
** its hashes CDB_DUPES_CROWD + 1 neighbours met, not all of them. *out: cdb_free (NULL when none). CDB_INVALID, CDB_NOMEM. */
cdb_status cdb_dupes_phash_pairs(const uint64_t *hashes, size_t n, int max_bits,
                                 cdb_dupes_pair **out /* OUT */, size_t *n_out /* OUT */);

/* crowded[i] = 1 when hashes[i] is crowded among hashes[0..n) (CDB_DUPES_CROWD), else 0:
** what cdb_dupes_phash_pairs leaves out, for a caller that keeps the hashes to pair them
** later with others (a copy index asked about a peer's files). CDB_INVALID, CDB_NOMEM. */
cdb_status cdb_dupes_phash_crowded(const uint64_t *hashes, size_t n, int max_bits,
                                   unsigned char *crowded /* OUT: n */);

#ifdef __cplusplus
}
#endif

#endif /* CDB_DUPES_H */
