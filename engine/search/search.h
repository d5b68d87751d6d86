/*
** search.h: the search part of engine/, over base/: the query language, the search
** and its per-vector-set state, text queries encoded together, the index glue.
**
** - search.c:    the query language's terms to one vector, the search, its filters,
**                and the per-model search state that keeps searches fresh.
** - pages.c:     the hits' order and page, and the search over several databases.
** - query.c:     the query language's parser.
** - textbatch.c: concurrent text queries encoded in one batch; cdb_engine_encode_text.
** - indexing.c:  index files: build, refresh, the store callbacks a search uses.
** - photos.c:    photo metadata: the catalog row from the encoder's reading, the
**                filter from users' texts, a photo's metadata as hits show it.
*/
#ifndef CDB_ENGINE_SEARCH_H
#define CDB_ENGINE_SEARCH_H

#include "engine/base/base.h"

/* ---- index glue (indexing.c) ----------------------------------------------------------- */

/* <db>/index/model_<id>.cdbidx */
void cdb_eng_index_path(cdb_db *db, int64_t model_id, char *buf, size_t size);

typedef struct eng_fetch_ctx {
    cdb_db *db;
    int64_t model_id;
    int dim;
    int n_unreadable; /* ids whose shard is missing or damaged (left out); one thread */
    /* NULL: every vector from the shards. Else the vector set's snapshot (borrowed),
    ** and dirty[n_dirty] (sorted; borrowed) the ids written or removed since its
    ** watermark (cdb_eng_snap_dirty), which are read from the shards with those it lacks. */
    const cdb_index_snap *snap;
    const int64_t *dirty;
    size_t n_dirty;
} eng_fetch_ctx;
/* cdb_index_fetch_fn over the store (ctx: eng_fetch_ctx): through the snapshot when
** the context has one, else cdb_eng_store_fetch. */
cdb_status cdb_eng_fetch_vectors(void *ctx, const int64_t *ids, size_t n, uint16_t *vecs,
                             uint8_t *found);
/* The shards alone (the snapshot not asked). */
cdb_status cdb_eng_store_fetch(eng_fetch_ctx *c, const int64_t *ids, size_t n, uint16_t *vecs,
                               uint8_t *found);
/* Every stored vector of the model, fp16, in id order. Heap arrays (free()).
** n_unreadable NULL: an unreadable shard fails the call (index builds, verify); else
** its vectors are left out and the shards left out counted (searches). */
cdb_status cdb_eng_read_all_vectors(cdb_db *db, int64_t model_id, int dim, int64_t **ids /* OUT */,
                                    uint16_t **vecs /* OUT */, int64_t *n /* OUT */,
                                    int *n_unreadable /* OUT, may be NULL */);
/* What is left of the iterator it: every vector, as cdb_eng_read_all_vectors. */
cdb_status cdb_eng_read_iter_vectors(cdb_db_iter *it, int dim, int64_t **ids /* OUT */,
                                     uint16_t **vecs /* OUT */, int64_t *n /* OUT */);
/* Sorted, distinct ids whose vectors were added (removed = 0) or removed (1)
** after generation `since`. Heap (free()). */
cdb_status cdb_eng_ids_since(cdb_db *db, int64_t model_id, int64_t since, int removed,
                         int64_t **ids /* OUT */, size_t *n /* OUT */);

/* ---- the vector snapshot beside the index (snapshot.c) ----------------------------- */

/* <db>/index/model_<id>.snap */
void cdb_eng_snap_path(cdb_db *db, int64_t model_id, char *buf, size_t size);
/* The model's snapshot, checked (cdb_index_snap_open with flags) and not past the
** database's generation (a restored or foreign file): CDB_NOTFOUND when there is none,
** another error with the reason when it is not to be used. */
cdb_status cdb_eng_snap_open(cdb_db *db, int64_t model_id, int dim, unsigned flags,
                             cdb_index_snap **out /* OUT */);
/* Sorted, distinct ids whose vectors were written or removed after generation since:
** those a snapshot of that watermark must not answer for. Heap (free()). */
cdb_status cdb_eng_snap_dirty(cdb_db *db, int64_t model_id, int64_t since,
                              int64_t **ids /* OUT */, size_t *n /* OUT */);
/* Writes the model's snapshot from the store (streamed, one chunk in memory), with the
** generation read before as its watermark. */
cdb_status cdb_eng_snap_write(cdb_db *db, int64_t model_id, int dim);
/* Writes it when force, when the one there is not usable, or when 1% of its ids (or
** 4,096) are dirty; else leaves it (searches read the dirty ids from the shards). */
cdb_status cdb_eng_snap_refresh(cdb_db *db, int64_t model_id, int dim, int force);
/* Deletes the snapshot and its stamp (no vectors left). */
void cdb_eng_snap_remove(cdb_db *db, int64_t model_id);
/* verify: the model's snapshot checked whole (every checksum) and against the shards
** (every id not dirty since its watermark: present in both, the same bytes). Up to max
** messages into msg; returns their number (0: no snapshot, or it agrees). */
int cdb_eng_snap_check(cdb_db *db, int64_t model_id, int dim, char (*msg)[256], int max);
/* cdb_eng_fetch_vectors for a context with a snapshot. */
cdb_status cdb_eng_snap_fetch(eng_fetch_ctx *c, const int64_t *ids, size_t n, uint16_t *vecs,
                              uint8_t *found);

typedef struct eng_index_result {
    int action;        /* 0 none (up to date), 1 added, 2 rebuilt */
    int64_t n_vectors; /* covered after */
    int64_t n_added;
    int64_t n_removed; /* deleted or changed vectors taken out */
    double seconds;
    char why[256];
    cdb_index_info info;
    int on_disk;       /* the index's lists are in a file */
} eng_index_result;
/* The model's stored vectors as an index source (cdb_index_build's), read through the
** store's ordered iterator a chunk at a time: positions are those of the iterator, which
** a first pass counts (src->n). Reads at increasing positions skip forward; a read
** before the last restarts the iteration. Close with cdb_eng_store_source_close. */
cdb_status cdb_eng_store_source_open(cdb_db *db, int64_t model_id, int dim,
                                     cdb_index_source *src /* OUT */);
void cdb_eng_store_source_close(cdb_index_source *src);
/* Where an index's inverted lists go (cdb_eng_index_build's on_disk). */
enum { ENG_LISTS_MEMORY = 0, ENG_LISTS_DISK, ENG_LISTS_DISK_IF_IVF };
/* Builds the model's index from the store, streamed (cdb_eng_store_source_open), and
** saves it (kind: cdb_index_kind), then the vector snapshot. on_disk: ENG_LISTS_DISK
** moves the lists to a new file <db>/index/model_<id>.ivfdata.<gen>.<pid> (by its
** absolute path: FAISS records it) and deletes the model's older ones once the index is
** saved (a search that mapped one keeps its pages); CDB_UNSUPPORTED for a kind without
** lists, which ENG_LISTS_DISK_IF_IVF keeps in memory instead. */
cdb_status cdb_eng_index_build(cdb_db *db, int64_t model_id, int dim, int kind, int on_disk,
                               eng_index_result *res /* OUT */);
/* Brings the index up to date (adds or rebuilds, as the index module decides;
** creates it when missing and there are vectors). */
cdb_status cdb_eng_index_refresh(cdb_db *db, int64_t model_id, int dim, int force_rebuild,
                             eng_index_result *res /* OUT */);
/* Every model's index after files went away (their removals are logged); a failure
** is warned about (searches stay correct): returns 1 then, else 0; -1 when the
** models cannot be listed (errmsg set). */
int cdb_eng_refresh_all_indexes(cdb_db *db, const cdb_engine_events *ev);

/* ---- search state (search.c) -------------------------------------------------------- */

typedef struct eng_vset eng_vset;     /* search.c */
typedef struct eng_groups eng_groups; /* collapse.c */
typedef struct eng_copy_index eng_copy_index; /* collapse.c */
typedef struct eng_search_state {     /* per vector set searched */
    int64_t model_id;
    pthread_mutex_t mu;  /* serializes refreshes of cur and groups */
    eng_vset *cur;
    eng_groups *groups;  /* the copy groups search results collapse (NULL: none built) */
    eng_groups *many;    /* those of the last search of several databases led by this one */
    eng_copy_index *copy_index; /* what cdb_engine_copies_of looks files up in (NULL: none
                                   built: only a server asked by a front builds one) */
    int collapsed;       /* 1 once a search collapsed copies (groups_get: the first
                            one groups its page's hits only) */
    int warned_ix;       /* the unusable index was warned about */
    struct eng_search_state *next;
} eng_search_state;

/* Frees every vector set's search state and every model slot's query cache (the
** façade, before the handle closes). */
void cdb_eng_search_release(cdb_engine *e);

/* textbatch.c: texts[n] encoded (L2-normalized) into out (n * embed_dim) with the
** texts of concurrent calls in one batch; the same bits as alone. Thread-safe. */
cdb_status cdb_eng_encode_texts(eng_model *mod, const char *const *texts, int n,
                                float *out /* OUT n * dim */);

/* ---- copies collapsed in search results (collapse.c) ---------------------------------- */

/* What a database's part of the groups was built for: its folder, its generation and
** how many of its files had no stored phash. */
typedef struct eng_groups_key {
    char *dir;
    int64_t gen, n_missing;
} eng_groups_key;
/* A database the groups are built over: its catalog (a reader), its vector set. */
typedef struct eng_groups_part {
    cdb_db *db;
    int64_t model_id;
    eng_groups_key key; /* dir borrowed */
} eng_groups_part;
/* The copy groups of the files of parts[0..n_parts) (their vector sets of dim floats,
** of one model's weights) as `duplicates` would make them of one database holding them
** all (exact and near joined), from the catalogs; a file is (its part's index, its id).
** Refs 1. Reference counted and immutable: any thread may use one. */
cdb_status cdb_eng_groups_build(const eng_groups_part *parts, int n_parts, int dim,
                                eng_groups **out /* OUT */);
/* The copy groups of the files ids[0..n) of part's database (its key unused) as
** cdb_eng_groups_build would give them: each one's group whole, and nothing else. A
** group is a component of the graph of exact and near edges (dupes.h), so it is found
** from its files out: the closure over the edges (every ok file's copy keys read in one
** statement, cdb_db_copy_keys; metadata and vectors of the closure's files only), then
** the dupes rule over the closure alone, which splits a component as it does in the
** whole library (its edges in the same order). What a one-shot search costs instead of
** the whole library's groups. Refs 1; reference counted and immutable. */
cdb_status cdb_eng_groups_build_page(const eng_groups_part *part, int dim, const int64_t *ids,
                                     int n, eng_groups **out /* OUT */);
eng_groups *cdb_eng_groups_ref(eng_groups *g);  /* NULL is fine; returns g */
void cdb_eng_groups_unref(eng_groups *g);       /* NULL is fine */
/* 1 when g was built for these keys (NULL g: 0). */
int cdb_eng_groups_current(const eng_groups *g, const eng_groups_key *key, int n);
/* Keeps, of hits[0..*n) in rank order, the first hit of each group (and every hit in
** none), each kept one with its group's other files as copies (heap; with copies_db
** when g spans several parts, hit.db naming the part); the others are cleared
** (cdb_eng_hit_clear). CDB_NOMEM. */
cdb_status cdb_eng_collapse(const eng_groups *g, cdb_engine_hit *hits, int *n);
/* Frees what a hit owns (its path, its copies). */
void cdb_eng_hit_clear(cdb_engine_hit *h);
/* Every ok file of part's database with what the closure of cdb_engine_copies_of looks
** up (content hash, phash; 40 bytes a file), from one read of the catalog, for the key
** it was built for. Refs 1; reference counted, immutable. */
cdb_status cdb_eng_copy_index_build(const eng_groups_part *part,
                                    eng_copy_index **out /* OUT */);
eng_copy_index *cdb_eng_copy_index_ref(eng_copy_index *x); /* NULL is fine; returns x */
void cdb_eng_copy_index_unref(eng_copy_index *x);          /* NULL is fine */
/* 1 when x was built for key (NULL x: 0). */
int cdb_eng_copy_index_current(const eng_copy_index *x, const eng_groups_key *key);
/* search.c: the copy index of db's vector set model_id, cached in e's search state while
** its key (generation, files without a phash) holds, else built anew. *out: unref. */
cdb_status cdb_eng_copy_index_get(cdb_engine *e, cdb_db *db, int64_t model_id,
                                  eng_copy_index **out /* OUT */);

/* ---- the search, as pages.c's search of several databases uses it (search.c) -------- */

/* The query vector of a search over several handles (cdb_engine_search_many): made
** once, by the first handle's model, then searched as it is in every other handle's
** vector set of the same weights. */
typedef struct eng_shared_q {
    float *q;                  /* dim floats (heap); NULL until the first handle made it */
    int dim;
    char weights_hash[sizeof ((cdb_db_model *)0)->weights_hash];
    const char *db;            /* the first handle's folder (messages) */
    eng_model *mod;            /* the first handle's model (probabilities) */
} eng_shared_q;

/* The limits checked and the text parsed once (or by the caller), not per attempt:
** *terms the caller's or *parsed (free with cdb_engine_terms_free(*parsed, *n_terms)). */
cdb_status cdb_eng_prepare_query(const cdb_engine_query *qu, const cdb_engine_search_params *p,
                                 const cdb_engine_term **terms /* OUT */,
                                 cdb_engine_term **parsed /* OUT */, int *n_terms /* OUT */);
/* cdb_engine_search on one handle (sq: the query vector several handles share; NULL
** for one), run once more on a newly opened reader when a snapshot read explains the
** failure. */
cdb_status cdb_eng_search_retried(cdb_engine *e, const cdb_engine_query *qu,
                                  const cdb_engine_term *terms, int n_terms,
                                  const cdb_engine_search_params *p, eng_shared_q *sq,
                                  cdb_engine_result *out);
/* The model's probability for each hit (cdb_engine_result.has_probability says when):
** a model with a logit bias, and a query of text alone (its towers are loaded then). */
void cdb_eng_set_probabilities(const eng_model *mod, const cdb_engine_query *qu, int n_terms,
                               cdb_engine_hit *hits, int n, cdb_engine_result *out);
/* What db's part of the copy groups is built for: its generation and its files without
** a stored phash (the key's dir is e->dir, borrowed). */
cdb_status cdb_eng_groups_key(cdb_engine *e, cdb_db *db, int64_t gen, eng_groups_key *key);
/* The copy groups over parts[0..n) (collapse.c), cached in the search state of e's
** vector set model_id (many: the groups of several databases, else of one): the cached
** ones while they were built for the parts' keys, else built anew (and cached).
** *out: cdb_eng_groups_unref. */
cdb_status cdb_eng_groups_cached(cdb_engine *e, int64_t model_id, int many,
                                 const eng_groups_part *parts, int n, int dim,
                                 eng_groups **out /* OUT */);

/* ---- the hits' order and page (pages.c) ------------------------------------------------ */

/* qsort's form of cdb_engine_hit_cmp_score. */
int cdb_eng_by_score(const void *a, const void *b);
/* How many of the best hits a search collects: the page's, or the time window. */
int cdb_eng_hits_needed(const cdb_engine_search_params *p);
/* The page: hits[0..*n) in the order asked (by time: the whole set collected first),
** p->offset of them skipped, at most p->k kept. */
void cdb_eng_page_hits(cdb_engine_hit *hits, int *n, const cdb_engine_search_params *p);

/* ---- photo metadata (photos.c): the row ingest stores from the bytes it read, the
** filter from what users type, the capture time as text ------------------------------ */

/* A photo's perceptual hash as `duplicates` and search's collapsing compare it (has 0:
** not computed), with the format and full oriented size of the decode it came from. */
typedef struct eng_phash {
    int has;
    uint64_t hash;    /* cdb_image_phash */
    int format;       /* cdb_dupes_format's values: 0 RAW, 1 JPEG/HEIF/TIFF, 2 other */
    int width, height;
} eng_phash;
/* The one way a phash is made: a fast decode to 64 pixels (a JPEG scaled in the DCT
** domain, a RAW's preview) with EXIF orientation, then cdb_image_phash, or for a YCbCr or
** grayscale JPEG its DC hash (encoder.h: the same value from any libjpeg decode of it);
** every stored and every computed phash is this one, so a cached one equals a fresh one.
** Not cheap next to an ingest's own decode (bench_photos: a quarter of a large JPEG's
** exact decode, the entropy decoding being whole), so ingest does not call it: it takes
** the hash of its own decode where that gives this one (cdb_eng_phash_of_decoded: every
** YCbCr JPEG, exact or fast) and leaves the rest to reindex and duplicates. 0, or -1
** when the bytes cannot be decoded (out->has 0). */
int cdb_eng_phash_of(const unsigned char *buf, size_t n, eng_phash *out);
/* The phash of img, an image decoded with (fast, target_size, apply_exif) and
** cdb_image_params.phash set, when that decode gives cdb_eng_phash_of's hash: EXIF
** applied, the full image within the default pixel limit, and a JPEG whose DC hash the
** decode kept (img->has_phash: any scale, exact or fast), a format whose fast decode does
** not depend on the target (PNG, GIF, BMP, TGA, PSD, PNM, TIFF: whole), or another JPEG
** or a WebP decoded fast at the same DCT scale (a target of 64, or 1/8 from a target of 64
** or more). 0, or -1 (out->has 0) for any other decode: HEIF, AVIF, RAW, an exact or a
** finer decode of those. */
int cdb_eng_phash_of_decoded(const cdb_image *img, int fast, int target_size, int apply_exif,
                             eng_phash *out);

/* The catalog row of file_id (content hash) for the metadata m read from its bytes and
** its phash (NULL or ph->has 0: not computed). */
void cdb_eng_photo_row(const cdb_photo_meta *m, const eng_phash *ph, int64_t file_id,
                       const uint8_t hash[CDB_DB_HASH_BYTES], cdb_db_photo *out /* OUT */);

/* The filter from its texts (NULL or "": not set): after and before as ISO 8601,
** camera, near as LAT,LON,KM, and has_gps. CDB_INVALID with E_QUERY and a message
** naming the field ("taken after: ...") when a text does not parse. out->camera
** borrows camera. */
cdb_status cdb_eng_photo_filter(const char *after, const char *before, const char *camera,
                                const char *near, int has_gps, cdb_db_photo_filter *out /* OUT */);

/* The photo's time as ISO 8601 ("2024-05-01T12:34:56", ".789", "+02:00" / "Z"); file
** times (taken_source FILE) are UTC and end in "Z". buf >= 40 bytes. Returns buf. */
char *cdb_eng_taken_iso(const cdb_db_photo *p, char *buf /* OUT */, size_t cap);

/* The metadata of file id as hits and exports show it (empty, taken_source "", when
** the file is not recorded or cannot be read: it is shown, not searched by). */
void cdb_eng_photo_get(cdb_db *db, int64_t id, cdb_engine_photo *out /* OUT */);
/* The engine's form of ph (as cdb_db_photos_get fills it); NULL: a file not recorded. */
void cdb_eng_photo_from_db(const cdb_db_photo *ph, cdb_engine_photo *out /* OUT */);

#endif /* CDB_ENGINE_SEARCH_H */
