/*
** index.h: clipdb's vector index (FAISS through its C API) and exact fp32
** re-rank. The module's whole public contract; FAISS types never appear here.
**
** Model. A cdb_index maps int64 ids (>= 0, e.g. file ids) to unit vectors of dim
** elements under inner product. Vectors come in as the store's fp16 (IEEE binary16
** as uint16_t) and are widened to fp32 for FAISS, which may keep them as fp32
** (Flat), fp16 (SQfp16) or PQ codes. FAISS only proposes candidates: every score a
** search returns is recomputed as the fp32-accumulated dot product of the
** normalized query with the candidate's *stored* fp16 vector (kernels/kernels.h),
** clamped to [-1, 1]. So scores are cosines that do not depend on the index type,
** and the exact search over an fp16 array gives bit-identical scores.
**
** Decoupling from db/: vectors are read through callbacks (cdb_index_source for
** builds, cdb_index_fetch_fn for re-rank), so the index needs nothing from db/'s
** API. A fetch that reports an id as absent is how deleted files disappear.
**
** Freshness. The index records the set of ids it covers and a caller-defined
** 64-bit watermark (e.g. the store's change sequence at build time), both
** persisted in the same file. Vectors stored since (uncovered, or changed) are
** passed to cdb_index_search() as "extra" vectors, searched exactly and merged,
** so a photo is findable the moment it is stored. cdb_index_refresh_decide() says
** whether to add incrementally or rebuild; cdb_index_save() replaces the file
** atomically (temp name + fsync + rename), so a reader that loaded the old file
** keeps working and a reader that opens the path gets one whole version.
**
** Thread-safety: cdb_index_search() and the other const functions may run
** concurrently on one index; train/add/set_search_params need exclusive access.
** FAISS runs its own OpenMP threads for training and adding.
*/
#ifndef CDB_INDEX_H
#define CDB_INDEX_H

#include <stddef.h>
#include <stdint.h>

#include "core/core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cdb_index cdb_index;

/* One search result. */
typedef struct cdb_hit {
    int64_t id;  /* -1 in padding slots */
    float score; /* cosine in [-1, 1]; -INFINITY in padding slots */
} cdb_hit;

/* Index families. AUTO picks one by collection size and memory (cdb_index_plan). */
typedef enum cdb_index_kind {
    CDB_INDEX_AUTO = 0,
    CDB_INDEX_FLAT,   /* "IDMap,Flat": exact, fp32 copy; small collections */
    CDB_INDEX_HNSW,   /* "IDMap,HNSW32,Flat": graph over the fp32 vectors; medium */
    CDB_INDEX_IVF_SQ, /* "IVF<nlist>,SQfp16": inverted lists of fp16 codes; medium-large */
    CDB_INDEX_IVF_PQ, /* "IVF<nlist>,PQ<m>": compressed, re-ranked from the store; large */
    CDB_INDEX_CUSTOM, /* a user-forced factory string */
    /* "IVF<nlist>_HNSW32,PQ<m>np": IVF-PQ whose coarse quantizer is an HNSW graph over
    ** the centroids (many lists, found in O(log nlist)); very large collections. After
    ** CUSTOM: index files record the kind's number. */
    CDB_INDEX_IVF_HNSW_PQ
} cdb_index_kind;

/* Static lower-case name ("auto", "flat", "hnsw", "ivf-sq", "ivf-pq", "custom",
** "ivf-hnsw-pq"). */
const char *cdb_index_kind_name(cdb_index_kind kind);

typedef struct cdb_index_params {
    int dim;                 /* vector dimension, > 0 (required) */
    cdb_index_kind kind;     /* AUTO (default), or force a family with planned sizes */
    const char *factory;     /* non-empty: any FAISS factory string (inner product),
                                overrides kind; "IDMap," is prepended when the string
                                has neither IDMap nor IVF (ids need it). Copied. */
    size_t mem_budget_bytes; /* index memory allowed; 0 = a quarter of MemAvailable */
    int nprobe;              /* IVF lists probed per query; 0 = planned */
    int ef_search;           /* HNSW efSearch; 0 = planned */
    int rerank_factor;       /* R: FAISS returns k*R candidates to re-rank; 0 = planned */
} cdb_index_params;

/* Defaults: dim 0 (must be set), AUTO, no factory, planned values. */
cdb_index_params cdb_index_params_default(void);

/* What an index is (or would be): reportable in `clipdb index info`. */
typedef struct cdb_index_info {
    cdb_index_kind kind;
    char factory[128];    /* the FAISS factory string used */
    int dim;
    int64_t n_planned;    /* collection size the choice was made for */
    int64_t n_indexed;    /* vectors inside FAISS (0 for a plan) */
    int64_t n_covered;    /* distinct ids covered (0 for a plan) */
    int64_t n_train;      /* training sample size (0: needs no training) */
    int nlist;            /* IVF lists (0 if not IVF) */
    int pq_m;             /* PQ sub-quantizers (0 if not PQ) */
    int nprobe;           /* 0 if not IVF */
    int ef_search;        /* 0 if not HNSW */
    int rerank_factor;    /* R */
    size_t est_bytes;     /* estimated index memory */
    size_t mem_budget_bytes;
    uint64_t watermark;   /* caller-defined coverage mark (0 for a plan) */
    char reason[256];     /* why this choice, in words */
} cdb_index_info;

/* Chooses an index for n vectors of p->dim under p's memory budget, FAISS's
** guidelines for nlist (~4*sqrt(n), a power of two) and training (40 points per
** centroid, capped by n). Pure computation. CDB_INVALID for dim <= 0 or n < 0. */
cdb_status cdb_index_plan(int64_t n, const cdb_index_params *p, cdb_index_info *out /* OUT */);

/* Describes ix (plan fields plus current sizes and watermark). */
void cdb_index_get_info(const cdb_index *ix, cdb_index_info *out /* OUT */);

/* Human-readable multi-line description, snprintf-style: returns the length the
** full text needs (excluding NUL) and writes at most size bytes. */
int cdb_index_info_format(const cdb_index_info *info, char *buf, size_t size);

/* ---- building ------------------------------------------------------------------ */

/* Reads the vectors at positions [pos, pos + n) of a source of src->n vectors:
** ids[n] and vecs[n * dim] (fp16, unit-normalized). Return CDB_OK or an error
** (with cdb_seterr), which aborts the build. */
typedef cdb_status (*cdb_index_read_fn)(void *ctx, int64_t pos, int64_t n,
                                        int64_t *ids /* OUT */, uint16_t *vecs /* OUT */);

typedef struct cdb_index_source {
    int64_t n;              /* number of vectors */
    cdb_index_read_fn read; /* random access by position, any chunk size */
    void *ctx;
} cdb_index_source;

/* Plans for src->n (or builds p->factory / p->kind), trains on an evenly spread
** sample, adds everything in chunks, and returns a new index (free with
** cdb_index_free). The watermark starts at 0. */
cdb_status cdb_index_build(const cdb_index_params *p, const cdb_index_source *src,
                           cdb_index **out /* OUT */);

/* cdb_index_build over caller arrays ids[n], vecs[n * p->dim] (not retained). */
cdb_status cdb_index_build_arrays(const cdb_index_params *p, const int64_t *ids,
                                  const uint16_t *vecs, int64_t n, cdb_index **out /* OUT */);

/* Trains ix (when it needs it) on an evenly spread sample of src: info.n_train vectors
** in runs of 256 consecutive ones. Only the sample is held in memory. */
cdb_status cdb_index_train_source(cdb_index *ix, const cdb_index_source *src);

/* Adds every vector of src to a trained ix, 65536 at a time (each chunk widened to fp32
** alone): memory beyond the index's own stays bounded by one chunk. */
cdb_status cdb_index_add_source(cdb_index *ix, const cdb_index_source *src);

/* Lower level: an empty index planned for n_planned vectors. */
cdb_status cdb_index_new(const cdb_index_params *p, int64_t n_planned, cdb_index **out /* OUT */);
/* 1 when the index needs no (more) training. */
int cdb_index_is_trained(const cdb_index *ix);
/* Trains on n fp16 vectors (a representative sample; see info.n_train). */
cdb_status cdb_index_train(cdb_index *ix, const uint16_t *vecs, int64_t n);
/* Adds n vectors with their ids (>= 0; CDB_INVALID otherwise). Re-adding an id
** (a changed file) is allowed: searches report each id once, scored from the
** store. Requires a trained index. */
cdb_status cdb_index_add(cdb_index *ix, const int64_t *ids, const uint16_t *vecs, int64_t n);
/* An IVF index with an HNSW quantizer (ivf-hnsw-pq) is added to by clipdb: each vector's
** list found by the walk searches use (its dot kernel, the vectors shared out over the
** build's threads: OpenMP's, at most CLIPDB_THREADS), its PQ code computed to FAISS's
** bytes; the entries are FAISS's own add's. faiss_add 1: FAISS's own add
** (IndexIVF::add_with_ids) instead: bench_index's baseline and the tests' oracle. */
void cdb_index_set_faiss_add(cdb_index *ix, int faiss_add);

/* Takes ids out of the index (deleted files; changed ones, before their new vector
** is added): they are no longer covered. Flat and IVF indexes drop the entries;
** HNSW keeps them as tombstones (info.n_indexed - n_covered) that searches drop or
** re-rank from the store, until a rebuild. Ids not covered are ignored. */
cdb_status cdb_index_remove(cdb_index *ix, const int64_t *ids, int64_t n);

void cdb_index_free(cdb_index *ix); /* NULL is fine */

/* ---- building in parts (IVF kinds) ------------------------------------------------ */

/* A new index with trained's plan, trained quantizer and codebooks, and no vectors
** (watermark 0). Parts are built from copies of one trained index, each adding its
** own vectors (elsewhere: save the trained empty index, load it in each worker), and
** cdb_index_merge joins them without adding any vector again. CDB_INVALID when
** trained is not trained or not IVF. */
cdb_status cdb_index_clone_empty(const cdb_index *trained, cdb_index **out /* OUT */);

/* Moves the entries of parts[n_parts] into dst. All are IVF indexes copied from one
** trained index (cdb_index_clone_empty, or loaded from its file): the quantizers and
** codebooks are checked equal (CDB_ERROR with FAISS's reason otherwise). lists_path
** NULL: dst's inverted lists stay in memory; else they move, dst's entries and the
** parts', into a new FAISS OnDiskInvertedLists file at lists_path (it must not exist;
** cdb_index_save then records that path, so give one that every reader resolves
** alike: absolute, or next to the index file when readers run from its folder). The
** covered ids are the union; an id in two parts is covered once and searched once (the
** store has one vector per id). The parts are left empty (free them). The lists of the
** result are those a single cdb_index_add of the parts in order would give. */
cdb_status cdb_index_merge(cdb_index *dst, cdb_index *const *parts, int n_parts,
                           const char *lists_path);

/* trained's copies, one per source, each filled by cdb_index_add_source, then merged
** (as cdb_index_merge, lists_path likewise) into a new index: what a build from
** parts[0..n_parts) in order gives, with the vectors added once. */
cdb_status cdb_index_build_parts(const cdb_index *trained, const cdb_index_source *parts,
                                 int n_parts, const char *lists_path, cdb_index **out /* OUT */);

/* Renames ix's ids (an IVF index, lists in memory): the entry and the coverage of id
** from[i] become to[i]'s; entries of ids not in from are dropped (their vectors belong to
** no one now). from[n] strictly ascending, to[n] distinct and >= 0 (CDB_INVALID
** otherwise, nothing changed). What a part's index needs when its part's ids are renumbered
** by a merge. On a FAISS failure ix is left half renamed: free it. */
cdb_status cdb_index_remap_ids(cdb_index *ix, const int64_t *from, const int64_t *to, int64_t n);

/* Every entry of an IVF index (not inside a pre-transform): *ids[*n] and the list each
** lies in, *lists[*n], list by list in list order (an id added twice appears twice).
** Both heap arrays are the caller's (cdb_free). For tests and checks: the entries of
** two indexes compared. CDB_UNSUPPORTED for other kinds. */
cdb_status cdb_index_list_of_ids(const cdb_index *ix, int64_t **ids /* OUT */,
                                 int64_t **lists /* OUT */, int64_t *n /* OUT */);

/* As cdb_index_build_parts, with filled[n_filled] first: copies of trained already holding
** their vectors (a part's index saved by the process that added them, loaded, its ids
** renamed with cdb_index_remap_ids), whose entries move into the result as cdb_index_merge
** moves them (they are left empty: the caller frees them). n_filled + n_parts >= 1. */
cdb_status cdb_index_build_parts_with(const cdb_index *trained, cdb_index *const *filled,
                                      int n_filled, const cdb_index_source *parts, int n_parts,
                                      const char *lists_path, cdb_index **out /* OUT */);

/* Moves ix's inverted lists (IVF kinds) into a new OnDiskInvertedLists file at
** lists_path (as cdb_index_merge says), so that the index need not live in RAM: a
** loaded index maps that file (mmap) and pages in the lists a query probes.
** CDB_UNSUPPORTED for kinds without inverted lists. */
cdb_status cdb_index_lists_to_disk(cdb_index *ix, const char *lists_path);

/* 1 when ix's inverted lists live in a file (cdb_index_lists_to_disk, cdb_index_merge). */
int cdb_index_on_disk(const cdb_index *ix);
/* The entries of an IVF index's list `list` (0 <= list < nlist), in their order: their
** count into *n; with ids (and codes) not NULL, the ids (and the codes, code_size bytes
** each) copied there, room for *n of them. *code_size: the bytes of one code. CDB_INVALID
** for an index without lists or a list out of range. For tests and tools: a list's
** entries are what two builds are compared by. */
cdb_status cdb_index_list_entries(const cdb_index *ix, int list, int64_t *n /* OUT */,
                                  size_t *code_size /* OUT */, int64_t *ids /* OUT */,
                                  uint8_t *codes /* OUT */);

/* ---- persistence ---------------------------------------------------------------- */

/* Writes ix to path atomically: "<path>.tmp.<pid>", fsync, rename over path,
** fsync of the directory. One file holds the header, the covered ids, the
** watermark and the FAISS index. CDB_IO on failure (the old file is untouched). */
cdb_status cdb_index_save(const cdb_index *ix, const char *path);

/* Loads a file written by cdb_index_save. CDB_NOTFOUND if absent, CDB_CORRUPT or
** CDB_VERSION for foreign or damaged files. */
cdb_status cdb_index_load(const char *path, cdb_index **out /* OUT */);
/* The kind a file written by cdb_index_save holds, from its header alone (errors as
** cdb_index_load's). */
cdb_status cdb_index_file_kind(const char *path, cdb_index_kind *kind /* OUT */);

/* What a file written by cdb_index_save says of itself, read without FAISS (a header
** and the file's last bytes): enough to learn that an index is current without loading
** it (cdb_index_head_current). */
typedef struct cdb_index_head {
    cdb_index_kind kind;
    int dim, nlist;
    uint64_t watermark;
    int64_t n_covered, n_trained_for;
    /* 1: its stamp (<path>.ok, core.h's cdb_stamp, written by cdb_index_save and by
    ** cdb_index_stamp) names this very file (device, inode, size, mtime, ctime) and the
    ** checksum it ends with: every byte is as it was when it was last checked whole */
    int vouched;
} cdb_index_head;
/* The head of the file at path (errors as cdb_index_load's, for its header). */
cdb_status cdb_index_file_head(const char *path, cdb_index_head *out /* OUT */);
/* Stamps the file at path that cdb_index_load read whole into ix and found intact, when
** path still names that very file, so that cdb_index_file_head vouches for it. For a
** writer of the index's folder; best effort (a stamp not written costs the next refresh
** a load). */
void cdb_index_stamp(const cdb_index *ix, const char *path);
/* 1 when the index whose file has head h is current without a look inside: its stamp
** vouches for it, its watermark is watermark_now (the caller's mark of now: nothing was
** stored or removed since), it covers n_live ids, and its size calls for no rebuild (the
** plan for n_live picks its kind, IVF lists trained for enough: as
** cdb_index_refresh_decide). Deleted entries FAISS keeps (tombstones) are not known from
** the head: they are judged at the next refresh that finds a change. Else 0, with why. */
int cdb_index_head_current(const cdb_index_head *h, const cdb_index_params *p, int64_t n_live,
                           uint64_t watermark_now, char *why, size_t why_size);

/* ---- the vector snapshot (snapshot.c) ---------------------------------------------- */

/* A vector set's stored fp16 vectors as of a caller-defined watermark (e.g. the store's
** generation read before them), in one mapped file, for searches that would otherwise
** read them from the store: the flat scan and the re-rank's fetch. A cache, never the
** truth: ids it lacks, and ids written or removed after its watermark, are the caller's
** to read from the store. Immutable once open; any thread may read one. */
typedef struct cdb_index_snap cdb_index_snap;

/* Writes src's vectors (ids strictly ascending, >= 0: CDB_INVALID otherwise) with
** model_id, dim and watermark to path: "<path>.tmp.<pid>", fsync, rename over path,
** fsync of the folder, then the stamp "<path>.ok" (see cdb_index_snap_open). Memory:
** one chunk of src. On failure (I/O, src's error) path is untouched and the temporary
** removed. */
cdb_status cdb_index_snap_write(const char *path, int64_t model_id, int dim, uint64_t watermark,
                                const cdb_index_source *src);
/* As cdb_index_snap_write, with owner: the caller's number for the database the file
** belongs to, kept in the header (cdb_index_snap_owner), so that another database's
** snapshot copied in is told apart (cdb_index_snap_write writes 0). */
cdb_status cdb_index_snap_write_owned(const char *path, int64_t model_id, int dim,
                                      uint64_t watermark, uint32_t owner,
                                      const cdb_index_source *src);
uint32_t cdb_index_snap_owner(const cdb_index_snap *s); /* NULL: 0 */

/* Also hash the vectors when the stamp vouches for them (verify). */
#define CDB_INDEX_SNAP_VERIFY 1u
/* Write the stamp after a whole check passed (a writer: the next opens skip the hash). */
#define CDB_INDEX_SNAP_STAMP 2u

/* Maps path, checked: format, byte order, header checksum, exact size, model_id (< 0:
** any) and dim (<= 0: any), the ids' checksum and order, and the vectors' checksum
** unless the stamp <path>.ok names this very file (device, inode, size, mtime, ctime)
** and flags lacks CDB_INDEX_SNAP_VERIFY. CDB_NOTFOUND when absent, CDB_CORRUPT /
** CDB_VERSION / CDB_DIM_MISMATCH with the reason for a file not to use. */
cdb_status cdb_index_snap_open(const char *path, int64_t model_id, int dim, unsigned flags,
                               cdb_index_snap **out /* OUT */);
void cdb_index_snap_close(cdb_index_snap *s); /* NULL is fine */
int64_t cdb_index_snap_count(const cdb_index_snap *s);
int cdb_index_snap_dim(const cdb_index_snap *s);
uint64_t cdb_index_snap_watermark(const cdb_index_snap *s);
/* ids[count] ascending and vecs[count * dim], row i being ids[i]'s: borrowed, valid
** until s is closed. */
const int64_t *cdb_index_snap_ids(const cdb_index_snap *s);
const uint16_t *cdb_index_snap_vecs(const cdb_index_snap *s);
/* id's vector (dim fp16, borrowed as above), or NULL when s has none. O(log count). */
const uint16_t *cdb_index_snap_find(const cdb_index_snap *s, int64_t id);

/* ---- coverage ------------------------------------------------------------------- */

void cdb_index_set_watermark(cdb_index *ix, uint64_t watermark);
uint64_t cdb_index_watermark(const cdb_index *ix);
/* 1 if id was added to the index. O(log n). */
int cdb_index_covers(const cdb_index *ix, int64_t id);
int cdb_index_dim(const cdb_index *ix);
/* Distinct ids covered. */
int64_t cdb_index_count(const cdb_index *ix);

typedef enum cdb_index_refresh_action {
    CDB_INDEX_REFRESH_NONE = 0, /* up to date */
    CDB_INDEX_REFRESH_ADD,      /* cdb_index_add the uncovered vectors, then save */
    CDB_INDEX_REFRESH_REBUILD   /* cdb_index_build from the store, then save */
} cdb_index_refresh_action;

/* Decides how to refresh ix (NULL: none yet) for a store of n_live vectors, of
** which n_uncovered are not in the index and n_stale indexed ids were deleted or
** changed since. Rebuild when: no index; the automatic choice for n_live is a
** different family (and p does not force one); stale entries, with the tombstones
** left by earlier removals, pass 20% of the index; or an IVF index has grown past
** 4x the size it was trained for. Else ADD (cdb_index_remove the stale ids, then
** cdb_index_add the uncovered ones) when there is either. why (optional) receives
** the reason. */
cdb_status cdb_index_refresh_decide(const cdb_index *ix, const cdb_index_params *p,
                                    int64_t n_live, int64_t n_uncovered, int64_t n_stale,
                                    cdb_index_refresh_action *out /* OUT */, char *why,
                                    size_t why_size);

/* Changes search-time parameters (0 keeps the current value). Exclusive access. */
cdb_status cdb_index_set_search_params(cdb_index *ix, int nprobe, int ef_search,
                                       int rerank_factor);

/* ---- search ------------------------------------------------------------------- */

/* Copies the stored fp16 vectors of ids[n] into vecs[n * dim] and sets found[i]
** to 1, or to 0 for an id that is no longer stored (deleted): such candidates are
** dropped. Called once or a few times per search, from the searching thread. */
typedef cdb_status (*cdb_index_fetch_fn)(void *ctx, const int64_t *ids, size_t n,
                                         uint16_t *vecs /* OUT */, uint8_t *found /* OUT */);

typedef struct cdb_index_search_opts {
    int k;                          /* results wanted, > 0 */
    int rerank_factor;              /* 0 = the index's R */
    float min_score;                /* drop results scoring below; default -INFINITY */
    cdb_index_fetch_fn fetch;       /* required when searching an index */
    void *fetch_ctx;
    /* Vectors the index does not cover yet (or that changed): scored exactly and
    ** merged; an id here overrides the index's entry for it. Not retained. */
    const int64_t *extra_ids;
    const uint16_t *extra_vecs;     /* n_extra * dim fp16 */
    size_t n_extra;
    /* Ids that must not appear (deleted, filtered out), sorted ascending. */
    const int64_t *exclude_ids;
    size_t n_exclude;
    /* Appended: when include_ids is not NULL, only the n_include ids there (sorted
    ** ascending; n_include 0: none) may appear: the photos a filter passes. The hits are
    ** the top k among them, never fewer or worse because candidates the index picked
    ** were dropped afterwards: a set of at most scan_max ids (0: CDB_INDEX_SCAN_MAX) is
    ** scored exactly from the store (fetch), every one of its vectors; a larger set widens
    ** the index's candidates (k x the re-rank factor, scaled by ntotal / n_include, then
    ** x4) until k of them pass, every vector was seen, or (with min_score) the index's
    ** candidates fall below min_score. Exact on a flat index; on an approximate one as
    ** exact as an unfiltered search. */
    const int64_t *include_ids;
    size_t n_include;
    size_t scan_max;
    /* Appended: OpenMP threads for FAISS's part of the search (0: one). FAISS shares a
    ** search out by query, so one query gains nothing from more, and pays for waking
    ** them (bench_index --sweep). */
    int faiss_threads;
    /* 1: FAISS's own search of an IVF index's HNSW quantizer rather than clipdb's walk of
    ** it (the same graph and efSearch, clipdb's dot kernel): bench_index's baseline. */
    int faiss_plain;
} cdb_index_search_opts;

/* The largest filtered set cdb_index_search scores by fetching every vector of it
** (a few tens of ms from the store at 512-d); larger ones go through the index. */
#define CDB_INDEX_SCAN_MAX 20000

cdb_index_search_opts cdb_index_search_opts_default(void);

/* Top-k over the index (ix may be NULL: then only the extra vectors are searched)
** for one query q[dim] (any non-zero norm: it is normalized in fp32 here).
** out: caller-owned, k slots, best first (ties by smaller id); *n_out receives the
** number filled (<= k, fewer when min_score, deletions or a small collection
** leave fewer); the rest are padded with {-1, -INFINITY}. Each id appears once.
** CDB_INVALID for a NaN/Inf/zero query or bad options, CDB_DIM_MISMATCH when dim
** differs from the index's, FAISS failures as CDB_ERROR with FAISS's message, and
** fetch errors as returned by fetch. */
cdb_status cdb_index_search(const cdb_index *ix, const float *q, int dim,
                            const cdb_index_search_opts *o, cdb_hit *out /* OUT: k */,
                            int *n_out /* OUT */);

/* Exact search over an fp16 array (the store, or a slice of it): n_q queries
** (each normalized in fp32 first), vecs[n * dim] with ids[n] (NULL: ids are the
** positions). Scores are the same fp32-accumulated dots cdb_index_search
** returns. exclude_ids sorted ascending (may be NULL). out: n_q * k hits, row per
** query, padded as above. n_threads 0 = cdb_default_threads(). */
cdb_status cdb_index_exact_search(const float *q, int n_q, int dim, const int64_t *ids,
                                  const uint16_t *vecs, size_t n, int k, float min_score,
                                  const int64_t *exclude_ids, size_t n_exclude, int n_threads,
                                  cdb_hit *out /* OUT: n_q * k */);

/* ---- query helpers ---------------------------------------------------------------- */

/* 1 when the sorted array a[n] (NULL: empty) holds id. O(log n). */
int cdb_index_ids_have(const int64_t *a, size_t n, int64_t id);

/* CDB_OK if q[dim] is finite and non-zero; else CDB_INVALID naming the first bad
** element ("query element 3 is NaN"). */
cdb_status cdb_index_query_check(const float *q, int dim);

/* out = normalize(sum_t weights[t] * terms[t]) computed in double, rounded to fp32:
** weighted positive (w > 0) and negative (w < 0) terms, e.g. "beach + sunset -
** people" is weights {1, 1, -1}. Each term is normalized first, so weights are
** relative importances. CDB_INVALID for NaN/Inf inputs or weights, n_terms < 1,
** or a zero result (e.g. "a - a"). out may not alias terms. */
cdb_status cdb_index_query_combine(const float *terms, const float *weights, int n_terms,
                                   int dim, float *out /* OUT: dim */);

#ifdef __cplusplus
}
#endif
#endif /* CDB_INDEX_H */
