/*
** engine.h: clipdb as a C library. What a user runs over one database: create it,
** ingest folders and files, reindex, search (text in the query language, example
** images, "more like this", raw embeddings), keep the vector index fresh, verify,
** and manage the recorded folders (list, forget, move), plus the thumbnails and
** originals of search hits by id. The module's whole contract: `clipdb` (cli/),
** `clipdb serve` (serve/) and the installed public API (lib/clipdb.h, what programs
** that embed clipdb use) use nothing else of it, and there is one search code path
** for all of them. This header is internal: it is not installed.
**
** A handle (cdb_engine) is one open database: a reader (searches, stats, folders,
** verify; never blocks and is never blocked by a writer, also on a
** database this user can only read) or the database's one writer (ingest,
** reindex, forget, move, index build). Models are loaded when first needed and kept.
**
** Conventions: every fallible call returns cdb_status; on failure cdb_errmsg()
** holds one complete sentence, "<what failed> (<why>)" (e.g. "cannot load the
** model /m (no such file)"), and cdb_engine_errcode() names the case where a caller
** may want to react to it (a hint, an HTTP status). Outputs come last (OUT).
** Memory handed out is freed by the matching _free function. The library never
** prints: warnings, progress and cancellation go through cdb_engine_events.
**
** Threading: on one handle, cdb_engine_search (and cdb_engine_search_many with the
** handle among its handles), cdb_engine_file_get, cdb_engine_thumb,
** cdb_engine_preview_get, cdb_engine_stats_get, cdb_engine_folders,
** cdb_engine_subfolders, cdb_engine_load_model and
** cdb_engine_encode_text may run
** concurrently from any number of threads (the handle keeps one database reader per
** thread that needs one, and shares the model and the index, which are immutable
** while searched). Every other call needs exclusive use of the handle. Callbacks
** run on the thread that called the engine.
**
** Freshness: a search sees every batch a concurrent writer (this process or
** another) has committed: vectors added since the index was built are searched
** exactly, deleted ones disappear, and an index file rebuilt by another process is
** loaded by the next search. Nothing is cached that a writer could make stale.
*/
#ifndef CDB_ENGINE_H
#define CDB_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "core/core.h"
#include "kernels/kernels.h" /* cdb_k_device, cdb_k_device_parse */

#ifdef __cplusplus
extern "C" {
#endif

#define CDB_ENGINE_API_VERSION 1

typedef struct cdb_engine cdb_engine;

/* ---- error detail --------------------------------------------------------------
** What cdb_engine_errcode() returns after a failed call on this thread (valid until
** the next engine call on this thread; CDB_ENGINE_E_NONE after a success or when
** the status says all there is). Append only. */
typedef enum cdb_engine_err {
    CDB_ENGINE_E_NONE = 0,
    CDB_ENGINE_E_NO_DATABASE,     /* no database at the directory (CDB_NOTFOUND) */
    CDB_ENGINE_E_EXISTS,          /* create: a database is already there */
    CDB_ENGINE_E_BUSY,            /* another writer holds the database (CDB_BUSY) */
    CDB_ENGINE_E_NEWER,           /* written by a newer clipdb / needs a writer's upgrade */
    CDB_ENGINE_E_NOT_INITIALIZED, /* the database has no model */
    CDB_ENGINE_E_MODEL_LOAD,      /* a model path given cannot be loaded */
    CDB_ENGINE_E_MODEL_NOT_IN_DB, /* a model given has no vectors in this database */
    CDB_ENGINE_E_WEIGHTS_MISSING, /* a registered model's weights are not found */
    CDB_ENGINE_E_MODEL_AMBIGUOUS, /* a model spec matches several registered models */
    CDB_ENGINE_E_MODEL_UNKNOWN,   /* a model spec matches none */
    CDB_ENGINE_E_QUERY,           /* a malformed query (syntax, empty, too long) */
    CDB_ENGINE_E_QUERY_ZERO,      /* the query's terms cancel out ("a - a") */
    CDB_ENGINE_E_QUERY_IMAGE,     /* an example image cannot be read or decoded */
    CDB_ENGINE_E_NO_TEXT,         /* the model cannot encode text (no text tower) */
    CDB_ENGINE_E_PATH,            /* a PATH to ingest does not exist */
    CDB_ENGINE_E_NOT_A_ROOT,      /* forget/move: the path is not a recorded root */
    CDB_ENGINE_E_PART_OF_ROOT,    /* forget/move: the path is a part of a folder root */
    CDB_ENGINE_E_MOVE_TARGET,     /* move: NEW does not exist or is of the wrong kind */
    CDB_ENGINE_E_MOVE_NOTHING,    /* move: none of the recorded files is under NEW */
    CDB_ENGINE_E_DISK_FULL,       /* a write failed: no space left on the device */
    CDB_ENGINE_E_NO_VECTORS,      /* index build: nothing to index yet */
    CDB_ENGINE_E_UNKNOWN_ID,      /* a file id that is not an ok file of the catalog */
    CDB_ENGINE_E_NO_THUMB,        /* thumbnails are off, or this file has none yet */
    CDB_ENGINE_E_SET_INCOMPLETE,  /* a model's vector set lacks files, per the catalog or
                                     its shards (make it the default after 'reindex
                                     --repair' completed it) */
    CDB_ENGINE_E_FILE_GONE,       /* a recorded photo is not at its path any more (moved
                                     or deleted since the last scan: reindex) */
    CDB_ENGINE_E_FILE_CHANGED,    /* something else is at a recorded photo's path (a link,
                                     FIFO, folder, another or a modified file: reindex) */
    CDB_ENGINE_E_NO_PREVIEW,      /* a photo's original cannot be decoded for a preview */
    CDB_ENGINE_E_READ_ONLY,       /* a write to a database this user can only read (its
                                     folder or files not writable, a read-only mount) */
    CDB_ENGINE_E_HUB_AUTH,        /* hub: 401/403, the repository needs a token (HF_TOKEN) */
    CDB_ENGINE_E_HUB_NOT_FOUND,   /* hub: 404, no such repository, revision or file, or
                                     an unknown short name */
    CDB_ENGINE_E_HUB_OFFLINE,     /* hub: HF_HUB_OFFLINE=1 and the model is not cached */
    CDB_ENGINE_E_HUB_CHECKSUM,    /* hub: a downloaded file is not what its ETag says */
    CDB_ENGINE_E_HUB_NETWORK,     /* hub: the server cannot be reached or kept failing */
    CDB_ENGINE_E_MODEL_MISMATCH   /* a search over several databases whose vector sets
                                     are of different models (weights) */
} cdb_engine_err;
cdb_engine_err cdb_engine_errcode(void);

/* ---- events: how the engine talks back ------------------------------------------ */

typedef enum cdb_engine_phase {
    CDB_ENGINE_PROGRESS_START = 0, /* label set, totals unknown (-1) or known */
    CDB_ENGINE_PROGRESS_UPDATE,    /* counters changed (may come thousands of times a
                                      second: rate-limit any drawing) */
    CDB_ENGINE_PROGRESS_END        /* the operation is over; clear any live display */
} cdb_engine_phase;

typedef struct cdb_engine_progress {
    cdb_engine_phase phase;
    const char *label;   /* "ingest", "reindex", "verify --deep"; borrowed */
    int64_t done;        /* files handled so far */
    int64_t total;       /* files to handle; -1 while unknown */
    int64_t errors;      /* files that failed so far */
} cdb_engine_progress;

typedef struct cdb_engine_events {
    /* A warning: one line, no prefix ("/photos is missing; its 12 files are kept as
    ** they are ..."). NULL: logged at warn level. */
    void (*warn)(void *ud, const char *msg);
    /* Progress of ingest, reindex and the deep check. NULL: none. */
    void (*progress)(void *ud, const cdb_engine_progress *p);
    /* Polled by long operations between files; nonzero asks them to stop: the batch
    ** in flight is committed, the report says interrupted. NULL: never stop. */
    int (*should_stop)(void *ud);
    void *ud;
    /* 1: walk the folders once before an ingest so that progress knows its total
    ** (costs a second walk; worth it for a live progress line with an ETA). */
    int count_first;
} cdb_engine_events;

/* ---- open / close ---------------------------------------------------------------- */

typedef struct cdb_engine_params {
    int writer;          /* 1: the database's one writer (ingest, reindex, forget, move,
                            index build); 0: a reader (default) */
    int lock_wait_ms;    /* writer: 0 fail at once if another writer holds the
                            database (CDB_BUSY, E_BUSY), > 0 wait up to, -1 forever */
    cdb_k_device device; /* where models run: auto (default: cuda:0 when usable, else
                            the CPU), cpu or cuda:N, as cdb_k_device_parse reads them;
                            cuda:N that is not there fails the model's load (E_MODEL_LOAD,
                            cdb_k_device_resolve's message) */
    int model_threads;   /* threads per encode call; 0: the encoder's default. A search
                            of one short text runs fastest on 1 (no thread team to wake) */
    int text_encoders;   /* text queries of concurrent searches are encoded together, in at
                            most this many batches at a time (one thread each); 0: one per
                            core. Fewer means larger batches (the weights read once for
                            more queries) but less parallel work */
    /* A model path tried when a registered model's weights are no longer where they
    ** were recorded (the CLI passes $CLIPDB_MODEL or the bundled model): used when
    ** its weights hash is the registered one. NULL: none. Copied. */
    const char *fallback_model;
    cdb_engine_events events;
} cdb_engine_params;
cdb_engine_params cdb_engine_params_default(void); /* p == NULL also means defaults */

/* Opens the database in dir. CDB_NOTFOUND (E_NO_DATABASE) when there is none,
** CDB_BUSY (E_BUSY) when another writer holds it, CDB_VERSION (E_NEWER),
** CDB_CORRUPT, CDB_IO: errmsg is the database layer's own text, so that callers
** can say "cannot open the database DIR (...)". */
cdb_status cdb_engine_open(const char *dir, const cdb_engine_params *p,
                           cdb_engine **out /* OUT */);
/* Closes the handle (a writer's work is made durable first). NULL is fine. */
void cdb_engine_close(cdb_engine *e);
/* The directory the handle was opened on. Borrowed: lives as long as e. */
const char *cdb_engine_dir(const cdb_engine *e);
/* The pid recorded in dir's writer lock (0: none) and whether a live writer holds
** it: for a message like "process 123 holds the lock". */
void cdb_engine_lock_info(const char *dir, int *pid /* OUT */, int *held /* OUT */);

/* ---- models ----------------------------------------------------------------------- */

typedef struct cdb_engine_model {
    int64_t id;            /* the model's number in this database */
    char weights_hash[80];
    char name[128];
    int dim;
    int is_default;        /* searches use the default model unless told otherwise */
    int decode;            /* its vector set's decode mode: 0 exact, 1 fast */
    int decode_settled;    /* 0: a decode change is not applied to every vector yet */
} cdb_engine_model;

typedef struct cdb_engine_create_info {
    char model_name[128];
    int dim;
    int64_t model_id;
    int text;      /* 1: the model can encode text (a text tower and a tokenizer) */
    int has_tower; /* 1: it has a text tower (text = 0 with it: no tokenizer found) */
} cdb_engine_create_info;

/* The settings a new database starts with. */
typedef struct cdb_engine_create_params {
    int thumb_size;     /* CDB_ENGINE_THUMB_DEFAULT, 0 (none) or THUMB_MIN..MAX */
    int64_t max_pixels; /* the pixel limit; 0: the encoder's default */
} cdb_engine_create_params;
cdb_engine_create_params cdb_engine_create_params_default(void);
/* Creates a new database in dir bound to the model at model_path (its identity and
** sizes are read; the weights are not loaded), with the settings of cp (NULL: the
** defaults). All or nothing (create.c): after a kill or a failure at any moment dir
** holds a whole database or none, and a rerun succeeds; dir may be absent, an empty
** folder or a folder of other files (left as they are). CDB_INVALID with E_EXISTS
** when dir already holds a database (nothing is changed); E_MODEL_LOAD; E_DISK_FULL. */
cdb_status cdb_engine_create_with(const char *dir, const char *model_path,
                                  const cdb_engine_create_params *cp,
                                  cdb_engine_create_info *out /* OUT, may be NULL */);
/* cdb_engine_create_with with the default settings. */
cdb_status cdb_engine_create(const char *dir, const char *model_path,
                             cdb_engine_create_info *out /* OUT, may be NULL */);

/* The registered model named by spec: its number, name, weights hash (or 6+ leading
** hex digits), or a model path (loaded to learn its weights hash); NULL or "": the
** default. E_MODEL_AMBIGUOUS, E_MODEL_UNKNOWN, E_MODEL_LOAD, E_MODEL_NOT_IN_DB,
** E_NOT_INITIALIZED. */
cdb_status cdb_engine_find_model(cdb_engine *e, const char *spec,
                                 cdb_engine_model *out /* OUT */);
/* Loads (and keeps) the towers a later call will need, so that the first search is
** not the one that pays for loading: model_path NULL = the default model; vision
** for image queries, text for text queries. E_WEIGHTS_MISSING, E_MODEL_LOAD,
** E_MODEL_NOT_IN_DB, E_NOT_INITIALIZED. *out (may be NULL) describes the model. */
cdb_status cdb_engine_load_model(cdb_engine *e, const char *model_path, int vision, int text,
                                 cdb_engine_model *out /* OUT, may be NULL */);
/* Encodes one text with a loaded model (cdb_engine_load_model first): dim floats,
** L2-normalized in fp32. */
cdb_status cdb_engine_encode_text(cdb_engine *e, const char *model_path, const char *text,
                                  float *out /* OUT dim */);
/* Makes model spec the default for searches, once its vector set is complete: every
** ok file has its vector, as the catalog claims and the shards confirm (reads the
** set's part of every shard); otherwise CDB_INVALID with E_SET_INCOMPLETE, naming how
** many files lack one. It must also encode text (E_NO_TEXT). Writer. */
cdb_status cdb_engine_set_default_model(cdb_engine *e, const char *spec,
                                        cdb_engine_model *out /* OUT, may be NULL */);

/* ---- the query language ---------------------------------------------------------- */

/* The longest query text accepted (all terms and "not" texts together): CLIP reads
** 77 tokens per term; 64 KiB is far beyond any useful query and bounds the work. */
#define CDB_ENGINE_QUERY_MAX_BYTES 65536

typedef struct cdb_engine_term {
    char *text;    /* heap, owned by the array */
    double weight; /* +1, -1, or an explicit "2*" weight with its sign */
} cdb_engine_term;
/* Splits a query into weighted terms at standalone "+" and "-" words:
**     beach + sunset - people      ->  +1 "beach", +1 "sunset", -1 "people"
**     2*beach + 0.5*sunset         ->  +2 "beach", +0.5 "sunset"
** "+"/"-" inside a word ("t-shirt", "-3") is text; a leading "-" negates the first
** term. CDB_INVALID (E_QUERY) with errmsg saying why ("two operators in a row in
** '...'", "empty query"). *terms: free with cdb_engine_terms_free. */
cdb_status cdb_engine_query_parse(const char *q, cdb_engine_term **terms /* OUT */,
                                  int *n_terms /* OUT */);
void cdb_engine_terms_free(cdb_engine_term *terms, int n);

/* ---- search ---------------------------------------------------------------------- */

/* What to look for. Every part given is one term of a weighted sum (each term's
** embedding normalized first, the sum normalized: cdb_index_query_combine), so text,
** example images and "more like this" combine freely. At least one part. */
typedef struct cdb_engine_query {
    const char *text;              /* the query language above; NULL: none */
    int text_literal;              /* 1: text is one term as it is (no +/- parsing) */
    const char *const *nots;       /* texts pushed away (weight -1 each) */
    int n_nots;
    const char *const *image_paths;/* example image files (weight +1 each) */
    int n_image_paths;
    const void *image;             /* an example image in memory (any decodable format) */
    size_t image_bytes;
    const int64_t *like_ids;       /* catalog file ids: their stored vectors ("more like
                                      this"; E_UNKNOWN_ID when one has no vector) */
    int n_like_ids;
    /* A raw embedding (clip-retrieval's embedding_input): dim floats of any non-zero
    ** norm. Alone, it is searched as given; with other parts it is one more term. */
    const float *vector;
    int vector_dim;
    int no_exif;                   /* 1: ignore the example images' EXIF orientation */
    /* text's terms when the caller parsed it already (cdb_engine_query_parse, to report
    ** a bad query before anything opens): used as they are, text not parsed again.
    ** NULL: the search parses text. */
    const cdb_engine_term *terms;
    int n_terms;
    /* Appended: cdb_engine_search_many only: the handle (index) whose photos like_ids
    ** name; its model makes the query vector. 0 by default. */
    int like_db;
} cdb_engine_query;

typedef enum cdb_engine_sort {
    CDB_ENGINE_SORT_SCORE = 0,     /* best first (ties: cdb_engine_hit_cmp_score) */
    CDB_ENGINE_SORT_TIME = 1,      /* the hits by file time, newest first */
    CDB_ENGINE_SORT_TAKEN = 2,     /* by capture time (the file time where a photo has
                                      none: cdb_engine_photo.taken_source), newest first */
    CDB_ENGINE_SORT_TAKEN_ASC = 3  /* the same, oldest first */
} cdb_engine_sort;

/* A place a search is limited to (cdb_engine_search_params.unders). */
typedef struct cdb_engine_under {
    const char *path;      /* an absolute path prefix, not empty */
    int folder;            /* 1: whole path components, 0: a plain prefix (as under_folder) */
} cdb_engine_under;

typedef struct cdb_engine_search_params {
    int k;                 /* hits wanted, >= 1 (default 10) */
    int offset;            /* best hits skipped first (paging); >= 0 */
    float min_score;       /* drop hits scoring below; default -1 (none) */
    /* Only files under this absolute path prefix (NULL: all). under_folder: 1 matches
    ** whole path components ("/a/b" holds "/a/b/c.jpg", not "/a/bc.jpg"), 0 a plain
    ** prefix of the path. Filtering happens after ranking: the engine asks the index
    ** for more until k hits pass or every vector has been seen. */
    const char *under;
    int under_folder;
    cdb_engine_sort sort;  /* TIME: see sort_window */
    const char *model;     /* a model path whose vector set to search; NULL: default */
    /* Appended: several places at once. With n_unders > 0 a hit passes when it is under
    ** any of unders[0..n_unders) or under `under` (when set); filtered after ranking as
    ** `under` is. Borrowed for the call. */
    const cdb_engine_under *unders;
    int n_unders;
    /* Appended: with sort = TIME, the set put in time order is the best sort_window hits
    ** (after min_score and the places), and offset/k page through that one ordering, so
    ** the pages of a query never overlap or skip (pages past the window are empty).
    ** 0: the best k + offset (the page's own hits, as before). The TAKEN sorts use it
    ** as TIME does. */
    int sort_window;
    /* Appended: photo metadata filters, as users type them (NULL or "": not set; the
    ** rules: docs/images.md "Metadata"). The hits are the best k among the photos that
    ** pass, never fewer or worse for the filter (the index searches within them). A text
    ** that does not parse is E_QUERY. They combine with the places and min_score. */
    const char *taken_after;  /* ISO 8601 date or date-time, inclusive */
    const char *taken_before; /* the same, exclusive */
    const char *camera;       /* a case-insensitive substring of the make or the model */
    const char *near;         /* "LAT,LON,KM" */
    int has_gps;              /* 1: only photos with a position */
    /* Appended: 1 collapses copies (the exact and near groups of cdb_engine_duplicates,
    ** decided from what the catalog keeps) into one hit, the best-ranked of its group
    ** that passes the filters, with the group's other files in copies; k and offset then
    ** count groups (more hits are fetched when collapsing removes some), one ordering
    ** for every page. 0 (the default here; the CLI and server turn it on): every hit. */
    int collapse;
} cdb_engine_search_params;
cdb_engine_search_params cdb_engine_search_params_default(void);

/* A place to search under, as `clipdb search --under` and the server's `under` both read
** it: a path naming an existing folder (symlinks resolved) matches whole path components
** of it; anything else (a file, a path that does not exist here) is a plain prefix of
** the absolute path it names (relative paths: from the working directory). abs: the
** path the engine compares (cap bytes, PATH_MAX is enough), for cdb_engine_under.path;
** *folder for cdb_engine_under.folder. Returns 1 when the path exists here, else 0. */
int cdb_engine_under_resolve(const char *given, char *abs /* OUT */, size_t cap,
                             int *folder /* OUT */);

/* What a photo's bytes say besides its pixels: capture time, camera, place. */
typedef struct cdb_engine_photo {
    char taken[40];          /* ISO 8601: the capture time ("2024-05-01T12:34:56", ".789",
                                "+02:00" when the offset is known), or the file time in UTC
                                ("...Z") where the photo has none */
    const char *taken_source; /* "original", "created", "xmp", "raw" (where the capture time
                                came from), or "file" (the file's mtime); static */
    int64_t taken_key_ms;     /* the instant it sorts by: UTC where the offset is known, else
                                the wall clock read as UTC */
    char make[64], model[64], lens[96]; /* "" when absent */
    int has_gps;
    double lat, lon;          /* degrees, north and east positive */
    int has_alt;
    double alt;               /* metres above sea level */
} cdb_engine_photo;

typedef struct cdb_engine_hit {
    int64_t id;            /* catalog file id (stable; what /api/file/ID serves) */
    float score;           /* cosine similarity, fp32-accumulated from the stored vector */
    char *path;            /* absolute path, bytes as the filesystem gave them */
    int64_t mtime_ns;
    int64_t size;          /* bytes */
    int32_t width, height; /* pixels after EXIF orientation; 0 = unknown */
    /* Appended: the model's own probability that the query text describes the photo,
    ** sigmoid(exp(logit_scale) * score + logit_bias), in fp32 from the fp32 score.
    ** Valid only when the result's has_probability is 1 (else 0). */
    float probability;
    /* Appended: the photo's metadata (docs/images.md "Metadata"). */
    cdb_engine_photo photo;
    /* Appended: which database the hit is in: the index of its handle in
    ** cdb_engine_search_many's handles (0 for cdb_engine_search). id is that
    ** database's; ids of different databases may be equal. */
    int db;
    /* Appended: with collapse, the other files of its copy group (heap, n_copies ids,
    ** ascending; freed with the result); NULL and 0 otherwise. */
    int64_t *copies;
    int n_copies;
    /* Appended: with collapse over several databases (cdb_engine_search_many), the
    ** database of each copy (heap, n_copies handle indices, as db; copies ascend by
    ** database, then id); NULL for one database (every copy is in the hit's). */
    int *copies_db;
} cdb_engine_hit;

typedef struct cdb_engine_result {
    cdb_engine_hit *hits;  /* n hits, best first (or by time) */
    int n;
    char model[128];       /* the vector set searched */
    int64_t model_id;
    int64_t generation;    /* the database generation the search saw */
    /* Appended. 1: every hit's probability is set. That is when the model has a logit
    ** bias (SigLIP, SigLIP2: trained with a sigmoid loss, so the formula is calibrated)
    ** and the query is text alone (terms and nots): its vector is a text embedding,
    ** and the probability is that of a text and an image matching. 0 for CLIP models
    ** and for queries with example images, "more like this" ids or a raw vector (an
    ** image-image cosine put through the formula is not a probability of anything). */
    int has_probability;
} cdb_engine_result;

/* Runs a search. Query text is checked against CDB_ENGINE_QUERY_MAX_BYTES and the
** language (E_QUERY); an unusable example image gives E_QUERY_IMAGE; terms that
** cancel out E_QUERY_ZERO; an unusable index is reported through events.warn and
** searched around (exactly over the stored vectors). A search with no hits is a
** success (n == 0). *out: free with cdb_engine_result_free. Concurrent calls OK. */
cdb_status cdb_engine_search(cdb_engine *e, const cdb_engine_query *q,
                             const cdb_engine_search_params *p,
                             cdb_engine_result *out /* OUT */);
void cdb_engine_result_free(cdb_engine_result *r); /* NULL is fine; zeroes *r */

/* The order of hits by score everywhere (one database or several): the higher score
** first; equal scores by path (bytes, strcmp), then by database (hit.db). Photos of
** the same bytes score the same, so without the path rule which of them a page holds
** would depend on ids, which differ between databases holding the same photos. */
int cdb_engine_hit_cmp_score(const cdb_engine_hit *a, const cdb_engine_hit *b);

/* One search over n databases (es[0..n), open handles, n >= 1): the hits and scores
** that one database holding all their photos would give (the same query, params,
** filters, places, sorts and paging), each hit's db naming its handle. The query is
** encoded once, by es[q->like_db]'s model (es[0]'s by default); every handle's vector
** set searched (p->model, or each one's default) must be of the same weights (hash),
** else CDB_INVALID with E_MODEL_MISMATCH naming the two databases. like_ids name
** photos of es[q->like_db] (E_QUERY when like_db is not in [0, n)). out->model,
** model_id and generation are those of the handle that made the query vector.
** With collapse, copies are grouped as one database holding all their files would
** group them (copies in two databases are one hit; copies_db names their databases).
** A failure in any database fails the call (its message names the database).
** Concurrent calls OK, as cdb_engine_search on each handle; a handle may appear once.
** *out: cdb_engine_result_free. */
cdb_status cdb_engine_search_many(cdb_engine *const *es, int n, const cdb_engine_query *q,
                                  const cdb_engine_search_params *p,
                                  cdb_engine_result *out /* OUT */);

/* The merge of cdb_engine_search_many, for hits from elsewhere too (a server's peers):
** each source asked with cdb_engine_part_params(p) (the best hits by score, unpaged),
** their hits put in one array (hit.db telling the sources apart, path set), then
** cdb_engine_hits_merge leaves hits[0..*n) the page p asks for, as one database
** holding them all would give it; the hits dropped have their paths cdb_free'd. */
cdb_engine_search_params cdb_engine_part_params(const cdb_engine_search_params *p);
void cdb_engine_hits_merge(cdb_engine_hit *hits, int *n /* IN/OUT */,
                           const cdb_engine_search_params *p);

/* ---- copies collapsed across servers (a front over its peers; search/collapse.c) ---- */

/* What the copy collapse decides by for one file (dupes/dupes.h: exact by content hash;
** near by phash AND the cosine of the vectors, never two distinct shots), so that a
** server can collapse hits gathered from others (serve --peer) as one database of all
** their files would. A file without a hash is never an exact copy, one without a phash
** or a vector never a near one. */
typedef struct cdb_engine_copy_facts {
    int64_t id;           /* the file's id in its database */
    int src;              /* the caller's name for that database (what copies_db holds) */
    uint8_t hash[16];     /* content hash (the catalog's XXH3-128) */
    int has_hash;
    uint64_t phash;       /* perceptual hash, stored by ingest or reindex */
    int has_phash;
    char camera[130];     /* "make model", "" when unknown */
    int64_t shot_ms;      /* capture time (wall clock, ms), when has_shot */
    int has_shot;
    const uint16_t *vec;  /* the stored embedding, dim IEEE binary16 (the caller checks the
                             length); NULL: never near */
    int part;             /* the answer it came in: cdb_engine_hits_rank's truncated */
} cdb_engine_copy_facts;

/* The copy facts of n files of the vector set model (NULL: the default) by id: out[i]
** for ids[i] (src and part 0); vec into *vecs (heap, free(); n * *dim halves, the rows
** of files with a phash and a readable vector), *dim the vector set's. A file not
** recorded has only its id. Concurrent calls OK. */
cdb_status cdb_engine_copy_facts_get(cdb_engine *e, const char *model, const int64_t *ids,
                                     int n, cdb_engine_copy_facts *out /* OUT n */,
                                     uint16_t **vecs /* OUT */, int *dim /* OUT */);

/* Every file of e's vector set (model; NULL: the default) that the collapse's groups
** would join to one of items[0..n) (their vectors of the set's dim), directly or
** through other files of e: the closure of the pairwise tests (the same content hash;
** or phashes within the near bound and the cosine of the vectors at least its minimum,
** computed as cdb_dupes_find does; the shot rule is the grouping's, left to it). The
** items' own files are among them when e holds them. *out (heap, free(); *n_out, src
** and part 0) with vec into *vecs (heap, free()), *dim the set's. Cost: the files are
** looked up in an index of their hashes and phashes (40 bytes a file, built from one
** read of the catalog and kept while the generation holds); each step of the closure
** compares its queries' phashes with every file's (or, for many queries, through a
** multi-index) and reads the vectors of those within the bound. Concurrent calls OK. */
cdb_status cdb_engine_copies_of(cdb_engine *e, const char *model,
                                const cdb_engine_copy_facts *items, int n,
                                cdb_engine_copy_facts **out /* OUT */, int *n_out /* OUT */,
                                uint16_t **vecs /* OUT */, int *dim /* OUT */);

/* How many files of e's vector set (model; NULL: the default) have a phash within the near
** bound of ph[i] (counts[i], at most CDB_ENGINE_CROWD_COUNT_MAX): what a front sums over
** its servers to decide, as one database of all their files would, that a phash is
** crowded (more than CDB_ENGINE_CROWD others within the bound: the sum less the file's
** own count exceeds it), which no server can decide from its own files. Cost: every file's
** phash compared with each of ph (a page's hits and their copies). Concurrent calls OK. */
#define CDB_ENGINE_CROWD 64 /* dupes.h's CDB_DUPES_CROWD */
#define CDB_ENGINE_CROWD_COUNT_MAX (CDB_ENGINE_CROWD + 2) /* enough to tell a crowd */
cdb_status cdb_engine_phash_near_counts(cdb_engine *e, const char *model, const uint64_t *ph,
                                        int n, int *counts /* OUT n */);

/* Hits gathered from several answers (a front server's own databases and its peers),
** each answer's best hits by score, with facts[i] for hits[i]: sorts both by score
** (cdb_engine_hit_cmp_score) and, when truncated is set, cuts them after the first hit
** that is the last of an answer that may have more (truncated[facts.part]): what is kept
** is then exactly the best of the whole ranking. *more: some answer may have more.
** CDB_NOMEM. */
cdb_status cdb_engine_hits_rank(cdb_engine_hit *hits, cdb_engine_copy_facts *facts,
                                int *n /* IN/OUT */, const unsigned char *truncated,
                                int *more /* OUT */);

/* Collapses ranked hits[0..*n) (facts[i] hits[i]'s) by the copy groups of their files and
** of others[0..n_others) (files that are no hits: cdb_engine_copies_of's), vectors of
** dim halves, each file once by (src, id): the dupes rule, exact and near joined, as
** cdb_engine_search_many groups files. Keeps the first hit of each group, its copies the
** group's other files (copies_db: their srcs), ascending (src, id); the hits' own copies
** are replaced; the others are cleared, facts following their hits. With every file of
** the hits' groups among them, the result is one database's. CDB_NOMEM. */
cdb_status cdb_engine_hits_collapse(cdb_engine_hit *hits, cdb_engine_copy_facts *facts,
                                    int *n /* IN/OUT */, const cdb_engine_copy_facts *others,
                                    int n_others, int dim);

/* The metadata of n files by id (out[i] for ids[i]; an id that is not recorded gets
** an empty record, taken_source ""), as search hits carry it. Concurrent calls OK. */
cdb_status cdb_engine_photos_get(cdb_engine *e, const int64_t *ids, int n,
                                 cdb_engine_photo *out /* OUT n */);

/* ---- files by id: what a search hit points at -------------------------------------- */

typedef struct cdb_engine_file {
    int64_t id;
    char *path;            /* heap: cdb_engine_file_clear */
    int64_t size, mtime_ns;
    int32_t width, height;
    const char *mime;      /* "image/jpeg", ... from the file's first bytes at lookup
                              ("application/octet-stream" when not recognized); static */
} cdb_engine_file;
/* The catalog's ok file with this id (never a path from elsewhere: an id that is not
** an ok file gives CDB_NOTFOUND with E_UNKNOWN_ID), checked on disk as
** cdb_engine_file_open does (its failures are this call's). out->path is for showing:
** never open it (what is there now may not be the photo); the bytes come from
** cdb_engine_file_open. Concurrent calls OK. */
cdb_status cdb_engine_file_get(cdb_engine *e, int64_t id, cdb_engine_file *out /* OUT */);
/* cdb_engine_file_get, and *fd: the photo opened read-only (the caller closes it),
** only when it is the file the catalog recorded: a regular file with the recorded
** device, inode, size and mtime, reached without following a symbolic link (unless
** its root follows them). Never blocks (a FIFO at the path is refused, not opened for
** good). CDB_NOTFOUND with E_FILE_GONE (nothing there: moved or deleted since the
** last scan) or E_FILE_CHANGED (a link, FIFO, socket, device, folder, another or a
** modified file: run reindex); CDB_IO when it cannot be opened (permissions). *fd is
** -1 and out empty on failure. Concurrent calls OK. */
cdb_status cdb_engine_file_open(cdb_engine *e, int64_t id, cdb_engine_file *out /* OUT */,
                                int *fd /* OUT */);
void cdb_engine_file_clear(cdb_engine_file *f); /* NULL is fine */

/* The stored JPEG thumbnail of file id (long side <= the database's thumbnail size),
** made at ingest from the decoded image. *jpeg: heap (cdb_free), *n bytes.
** A file that has none yet (made before thumbnails, or the file changed since: the
** next reindex makes it) gets one made from its original on the fly, not stored.
** CDB_NOTFOUND with E_UNKNOWN_ID (not an ok file) or E_NO_THUMB (thumbnails are off,
** or the original cannot be read). Concurrent calls OK. */
cdb_status cdb_engine_thumb(cdb_engine *e, int64_t id, void **jpeg /* OUT */,
                            size_t *n /* OUT */);
/* The thumbnail setting: long side in pixels, 0 = thumbnails off. Set (writer): the
** next ingest or reindex makes the missing ones and those of another size. */
#define CDB_ENGINE_THUMB_DEFAULT 384 /* the setting of a new database */
#define CDB_ENGINE_THUMB_MIN 32
#define CDB_ENGINE_THUMB_MAX 512
/* The pixel limit of the database's photos: one with more pixels is refused
** (quarantined until it changes or the limit is raised). Default
** CDB_IMAGE_DEFAULT_MAX_PIXELS, PIL's: it refuses above 2 x 89,478,485 pixels. */
cdb_status cdb_engine_max_pixels(cdb_engine *e, int64_t *px /* OUT */);
/* Sets it (0: the default; else 1 .. 2^40). Raising it requeues the photos refused
** for their size: the next ingest or reindex reads them again (*n_requeued, may be
** NULL). Writer. */
cdb_status cdb_engine_set_max_pixels(cdb_engine *e, int64_t px, int64_t *n_requeued /* OUT */);
cdb_status cdb_engine_thumb_size(cdb_engine *e, int *px /* OUT */);
cdb_status cdb_engine_set_thumb_size(cdb_engine *e, int px);

/* A large JPEG of a photo for a viewer, for the formats browsers do not show (HEIC,
** TIFF, camera RAW): long side min(px, the photo's), made on demand from the original
** opened as cdb_engine_file_open opens it (its failures are this call's: E_UNKNOWN_ID,
** E_FILE_GONE, E_FILE_CHANGED), decoded fast (a JPEG may shrink in the DCT domain, a
** RAW gives its embedded preview) and scaled by area averaging. Kept in a bounded
** cache, <db>/previews/ (CDB_ENGINE_PREVIEW_CACHE_MB, least recently used out first;
** not written on a database this user cannot write), under a key of the row (id,
** size, mtime, inode, content hash) and px: a photo that changed gets a new one. At
** most CDB_ENGINE_PREVIEW_DECODES decodes run at once per handle (a 100 MP HEIC
** takes ~400 MB to decode); the others wait. E_NO_PREVIEW (CDB_NOTFOUND) when the
** original cannot be decoded. Concurrent calls OK. */
#define CDB_ENGINE_PREVIEW_PX 2048      /* the server's long side */
#define CDB_ENGINE_PREVIEW_CACHE_MB 512
#define CDB_ENGINE_PREVIEW_DECODES 2
typedef struct cdb_engine_preview {
    void *jpeg;            /* heap (cdb_free); NULL when only the tag was asked for */
    size_t n;
    char tag[40];          /* hex; changes when the photo or px does (an HTTP ETag) */
} cdb_engine_preview;
/* tag_only: check the photo and give its tag (cheap: no decode, no cache read). px:
** 64 .. 8192. *out: cdb_engine_preview_clear. */
cdb_status cdb_engine_preview_get(cdb_engine *e, int64_t id, int px, int tag_only,
                                  cdb_engine_preview *out /* OUT */);
void cdb_engine_preview_clear(cdb_engine_preview *p); /* NULL is fine */

/* ---- ingest and reindex --------------------------------------------------------- */

/* The function the pipeline encodes a batch of preprocessed images with (n * 3 *
** size * size floats, CHW) into n * dim floats. A test hook: NULL means the model's
** image tower; tests inject failures through it. The model is the encoder's. */
struct cdb_model;
typedef cdb_status (*cdb_engine_encode_fn)(void *ud, struct cdb_model *m, const float *pixels,
                                           int n, float *out /* OUT n * dim */);

typedef struct cdb_engine_run_params {
    int batch;             /* images per encoder batch; 0 (default): 32 on the CPU, on a
                              GPU what its free memory allows (cdb_model_image_batch) */
    int threads;           /* reader/decoder threads; 0: cdb_default_threads() */
    int follow_symlinks;   /* ingest: -1 keep each root's setting (default), 0 no, 1 yes */
    int no_exif;           /* ingest: -1 keep each root's setting (default), 0 EXIF applied,
                              1 ignored */
    int decode;            /* -1 keep each vector set's mode (default), 0 exact, 1 fast */
    int full;              /* reindex: read every file again (default 0) */
    int repair;            /* reindex: verify (deeply) first and requeue what is lost,
                              bad or no longer matches its photo; the index is rebuilt */
    double sample;         /* repair: the fraction re-encoded (CDB_ENGINE_DEEP_SAMPLE) */
    /* ingest: a model path whose vectors are added beside the others (registered when
    ** new); reindex: the one vector set to bring up to date (a spec as
    ** cdb_engine_find_model takes). NULL: every set. */
    const char *model;
    cdb_engine_encode_fn encode; /* test hook (above) */
    void *encode_ud;
    /* reindex: recorded folder roots (their paths) whose folder as it is now is the
    ** truth: one that is not the folder recorded (another filesystem mounted there, a
    ** folder made anew) is scanned and recorded as the root's folder, and one that is
    ** empty has its files marked deleted. NULL/0: none (an unavailable or empty root
    ** keeps its files and vectors: exit 3). CDB_NOTFOUND for a path not recorded. */
    const char *const *accept_roots;
    int n_accept_roots;
    /* ingest, reindex: megabytes of decoded photos in flight across the decoder
    ** threads (a photo over it is decoded alone); 0: a quarter of the machine's
    ** memory, at least 256 MiB and at most 16 GiB. */
    int64_t decode_memory_mb;
    /* ingest: rules in gitignore syntax (ignore/ignore.h) recorded for the root of every
    ** PATH, applying below that PATH, now and at every later reindex (db.h's
    ** root_excludes): what they match is left out, and what was recorded there loses
    ** its vectors. NULL/0: none. */
    const char *const *excludes;
    int n_excludes;
    /* ingest, reindex: part part_index (1..part_count) of an n-way partition: only the
    ** files cdb_db_part_of gives to it are stored, and only those are judged (a file of
    ** another part is neither added nor taken for deleted). Recorded in the database at
    ** its first partitioned ingest; a later run with another partition is refused
    ** (CDB_INVALID), and a run that gives none uses the recorded one. 0/0: none. */
    int part_index, part_count;
} cdb_engine_run_params;
cdb_engine_run_params cdb_engine_run_params_default(void);

/* What one pass over the roots did for one vector set. */
typedef struct cdb_engine_summary {
    int64_t found;          /* regular files met by the walks */
    int64_t unchanged;      /* skipped without reading (same size and mtime) */
    int64_t added, changed; /* encoded: new files / files whose content changed */
    int64_t moved;          /* kept their vector under a new path */
    int64_t touched;        /* metadata updated, same content */
    int64_t deleted;        /* gone from disk, marked deleted */
    int64_t errors;         /* unusable images, recorded (quarantined until they change) */
    int64_t retry;          /* transient failures, left pending for the next run */
    int64_t skipped;        /* not images */
    int64_t walk_errors;    /* folders or entries that could not be read, missing roots */
    int64_t missing_roots;  /* roots unavailable: missing, empty, or not the folder
                               recorded (kept as they are) */
    int64_t unreachable;    /* gone files whose place is not mounted (kept as they are) */
    int64_t links_skipped, loops, links_covered;
    int64_t thumbs;         /* thumbnails made (new files, and unchanged ones that had none) */
    double seconds;
    int interrupted;
    /* Where the time went (ns, monotonic). Busy time per stage, summed over the
    ** stage's threads, waits excluded; encode is the time inside the image tower. */
    int64_t ns_walk, ns_read, ns_decode, ns_preprocess, ns_encode, ns_encode_wait, ns_store;
    int64_t n_batches;
    /* The decoders' budget (run params decode_memory_mb): the most decoded pixels in
    ** flight at once, and how many decodes waited for others to finish first. */
    int64_t decode_peak_pixels, decode_waits;
    /* Appended: of the photos encoded (added + changed), those that do not carry the
    ** generated world's mark (cdb_image_world_marked): real photos, which the bundled
    ** model does not know. */
    int64_t real_photos;
    /* Appended: a GPU ingest's decoded images kept for the device transform (readers ->
    ** encoder): the most bytes kept at once, never more than half the decoders' budget
    ** (cdb_eng_budget_keep), and how many images went to the device that way. */
    int64_t kept_peak_bytes, kept_images;
} cdb_engine_summary;

typedef struct cdb_engine_set_report {
    cdb_engine_model model;
    int ran;                /* 0: its weights were not found (the set is not current) */
    cdb_engine_summary sum;
    int64_t n_missing;      /* reindex: ok files this set still has no vector for after
                               the run (0: complete); any makes the run partial */
} cdb_engine_set_report;

#define CDB_ENGINE_MAX_SETS 64

typedef struct cdb_engine_run_report {
    cdb_engine_set_report sets[CDB_ENGINE_MAX_SETS]; /* [0]: the first pass (default set,
                               or reindex --model's): it did the deletions and moves */
    int n_sets;
    int started;            /* the passes began: a failure now is the run's own, and
                               cdb_errmsg holds its cause ("cannot commit ... (...)") */
    int interrupted;        /* stopped by events.should_stop */
    int partial;            /* some files failed or wait for a retry, a folder is missing
                               or unreadable, a set's weights are missing, or (reindex) a
                               set that ran is not complete (sets[i].n_missing) */
    int64_t errors, retry;  /* over every set */
    char index_note[1200];  /* reindex: what became of each index ("" when nothing) */
    char repair_note[200];  /* reindex --repair: "N problems found, ..." ("" otherwise) */
} cdb_engine_run_report;

/* The PATHs of an ingest, checked before anything is written: each must exist and be
** a folder, or a regular file that is named or shaped like an image. *abs: n real,
** absolute paths (free with cdb_engine_paths_free), is_file[n] (caller's). On the
** first bad PATH: CDB_NOTFOUND/CDB_INVALID with E_PATH, errmsg "cannot ingest X (why)",
** nothing allocated. Needs no handle (callers check before opening the database). */
cdb_status cdb_engine_check_paths(const char *const *paths, int n, char ***abs /* OUT */,
                                  int *is_file /* OUT n */);
void cdb_engine_paths_free(char **abs, int n);

/* Ingests paths (a folder is walked recursively, a file is recorded as itself; see the
** library model in README.md), then brings every other vector set up to date. Writer.
** CDB_OK also when files failed (report->partial) or on a stop (report->interrupted);
** an error only when the run itself failed (E_DISK_FULL when the disk is full:
** nothing committed is lost, a rerun finishes). report is filled in both cases. */
cdb_status cdb_engine_ingest(cdb_engine *e, const char *const *paths, int n,
                             const cdb_engine_run_params *p,
                             cdb_engine_run_report *report /* OUT */);
/* Rescans every recorded root, applies new / changed / moved / deleted files to every
** vector set, makes missing thumbnails, refreshes every index. Writer. As ingest. */
cdb_status cdb_engine_reindex(cdb_engine *e, const cdb_engine_run_params *p,
                              cdb_engine_run_report *report /* OUT */);

/* ---- merging parts (library/merge.c) ------------------------------------------------- */

typedef struct cdb_engine_merge_report {
    int n_parts;
    int64_t files;   /* the parts' files brought in (ok, quarantined, to retry), each once */
    int64_t vectors; /* vectors copied, every set */
    int64_t deleted; /* the database's rows marked deleted (gone from a part's share) */
    int64_t thumbs, photos; /* thumbnails and photo metadata rows copied */
    int64_t indexed;        /* vectors in the default model's index, built by the merge */
    int index_parts;        /* the parts its IVF lists were built in (0: built whole) */
    char index_kind[16];    /* its kind ("flat", "ivf-sq", ...); "" when none was built */
    int index_part_files;   /* of those, the parts whose lists came from their own index
                               (cdb_engine_index_add_part): no vector of theirs added again */
    int index_trained_file; /* 1: the index's quantizer came from the trained file */
} cdb_engine_merge_report;
/* Brings the databases parts[0..n) (each opened read-only; typically made by ingest
** --part I/N) into e's database (writer), as library/merge.c describes: roots, every
** vector set (fp16 bits kept), quarantined and pending files, thumbnails and photo
** metadata; a file already there is replaced; a part that records a partition is the
** truth for its share. Then every vector set's index is built (an IVF one in parts from
** one trained quantizer: merge_index.c) unless flags has CDB_ENGINE_MERGE_NO_INDEX.
** Crash-safe and idempotent (the batches' write order): after a kill, the same call
** again gives the same database. Roots nest as an ingest's do: a part's root inside
** another root (of a part or of the database) goes into it, one that holds roots of the
** database takes them over; a file in several parts is one row (the last part's).
** Refused, nothing written: a part's default model is not the database's (CDB_INVALID),
** two parts are one database or the same part of one partition, or a part is the
** database itself (CDB_INVALID), a part is not a database (CDB_NOTFOUND), or a shard of
** a part is missing or damaged (CDB_CORRUPT, naming the shard).
** trained (NULL: none): a file written by cdb_engine_index_train_parts. When it is there
** and usable, the default model's index is made from it: each part's own index
** (cdb_engine_index_add_part) has its ids renamed to the database's and its lists merged;
** a part whose index is missing, stale or not the rows merged from it has its vectors
** added again (a warning on the log says which and why). Absent or unusable: trained on
** the merged store as without it (a warning when it is unusable). */
#define CDB_ENGINE_MERGE_NO_INDEX 1u
cdb_status cdb_engine_merge(cdb_engine *e, const char *const *parts, int n, unsigned flags,
                            const char *trained, cdb_engine_merge_report *r /* OUT */);

/* The checks cdb_engine_merge refuses by, made before the database at db_dir exists
** (the first part's default model stands for its model): CDB_OK, or the refusal with
** its message, and nothing is written anywhere. What `merge` runs before it creates
** an absent database. */
cdb_status cdb_engine_merge_check(const char *db_dir, const char *const *parts, int n);
/* Creates a new database in dir bound to the models of the database at src_dir (every
** model record, the default first, and its thumbnail and pixel settings), all or
** nothing as cdb_engine_create_with: what `merge` makes when its database is absent. */
cdb_status cdb_engine_create_like(const char *dir, const char *src_dir);

/* ---- the index ---------------------------------------------------------------------- */

typedef enum cdb_engine_index_kind { /* cdb_index_kind values */
    CDB_ENGINE_INDEX_AUTO = 0, CDB_ENGINE_INDEX_FLAT, CDB_ENGINE_INDEX_HNSW,
    CDB_ENGINE_INDEX_IVF_SQ, CDB_ENGINE_INDEX_IVF_PQ,
    CDB_ENGINE_INDEX_IVF_HNSW_PQ = 6 /* 5 is a custom factory, not offered here */
} cdb_engine_index_kind;

typedef struct cdb_engine_train_report {
    char kind[16];     /* the kind planned for the parts' vectors together */
    int64_t vectors;   /* the parts' vectors of the default model */
    int64_t n_train;   /* the sample trained on (0: nothing trained) */
    int written;       /* 1: the trained index was written; 0: the kind has no inverted
                          lists (the merge builds it whole) and no file is left at out */
    char stamp[17];    /* the written file's stamp (hex), which names the parts' indexes */
} cdb_engine_train_report;
/* Step one of building an index in parts on a cluster: plans the default model's index
** for the vectors of the databases parts[0..n) together (kind: AUTO, or forced), and when
** the kind is IVF trains it, empty, on an evenly spread sample of them and writes it to
** out (atomically). Otherwise removes out. The parts are opened read-only; their default
** models must be one (CDB_INVALID); no vectors: CDB_NOTFOUND. */
cdb_status cdb_engine_index_train_parts(const char *const *parts, int n,
                                        cdb_engine_index_kind kind, const char *out,
                                        cdb_engine_train_report *r /* OUT */);

typedef struct cdb_engine_part_add_report {
    int trained_found; /* 0: no trained file (nothing done: the merge builds whole) */
    int64_t vectors;   /* added */
    char path[4200];   /* the part's index: <dir>/index/part.<stamp>.cdbidx */
} cdb_engine_part_add_report;
/* Step two, one per part (e is the part, a reader handle will do): adds the part's default
** model's vectors, with the part's file ids, to a copy of the trained index at trained and
** saves it in the part's folder under the trained file's stamp, with the part's generation
** as its watermark (how the merge tells that it is stale). The part's older part indexes
** are removed. An absent trained file is no error (trained_found 0). */
cdb_status cdb_engine_index_add_part(cdb_engine *e, const char *trained,
                                     cdb_engine_part_add_report *r /* OUT */);

typedef struct cdb_engine_index_report {
    int action;            /* 0 none (up to date), 1 added, 2 rebuilt (or removed) */
    int64_t n_vectors;     /* covered after */
    int64_t n_added, n_removed;
    double seconds;
    char model[128];       /* the vector set's model */
    char kind[16];         /* "flat", "hnsw", ... of the index now */
    char factory[128];
    char why[256];
    char path[4096];       /* the index file */
    int on_disk;           /* its inverted lists are in a file beside it */
} cdb_engine_index_report;
typedef struct cdb_engine_index_params {
    cdb_engine_index_kind kind; /* AUTO: picked by size */
    /* 1: the inverted lists of an IVF kind go to a file beside the index
    ** (model_<id>.ivfdata.*), which searches map instead of reading the lists into
    ** memory; a kind without lists (the plan's flat or HNSW) is E_USAGE. Later
    ** refreshes keep the lists on disk. */
    int on_disk;
} cdb_engine_index_params;
/* Builds the index of the model at model_path (NULL: the default model) from the stored
** vectors (p NULL: AUTO, in memory) and replaces the index file atomically, then the
** vector snapshot beside it (E_NO_VECTORS when there are no vectors). Works on a reader
** handle: the catalog is not written. */
cdb_status cdb_engine_index_build(cdb_engine *e, const char *model_path,
                                  const cdb_engine_index_params *p,
                                  cdb_engine_index_report *out /* OUT */);

typedef struct cdb_engine_index_info {
    char model[128];
    char path[4096];       /* the index file */
    int has_index;         /* 0: none yet (searches scan every vector exactly) */
    char kind[16], factory[128];
    int dim;
    int64_t covered, stored, not_covered, watermark, generation, bytes;
    int nlist, nprobe, ef_search, rerank_factor;
    char text[2048];       /* the index module's multi-line description */
    int on_disk;           /* its inverted lists are in a file beside it (mapped) */
} cdb_engine_index_info;
/* Describes the index of the model at model_path (NULL: the default). An unreadable
** index file is an error (CDB_CORRUPT, ...): 'index build' rebuilds it. */
cdb_status cdb_engine_index_describe(cdb_engine *e, const char *model_path,
                                     cdb_engine_index_info *out /* OUT */);

/* ---- stats ------------------------------------------------------------------------ */

typedef struct cdb_engine_model_stats {
    cdb_engine_model model;
    int64_t n_vectors;
    int64_t files_without_vector;
    int has_index;
    char index_kind[16];
    int64_t index_covered;
} cdb_engine_model_stats;

typedef struct cdb_engine_stats {
    int64_t files[5];      /* by state: [1] pending, [2] ok, [3] errors, [4] deleted */
    int64_t n_retry;       /* pending files with a transient failure to retry */
    int64_t n_roots, n_walk_problems, n_shards, generation, disk_bytes;
    int64_t n_shards_unreadable; /* missing, truncated or foreign shard files (quick check) */
    int thumb_size;        /* the thumbnail setting: long side in pixels, 0 = off */
    cdb_engine_model_stats *models; /* heap: cdb_engine_stats_free */
    int n_models;
    int real_photos;       /* appended: 1 once a run encoded a real photo (one without the
                              generated world's mark, cdb_engine_summary.real_photos) */
} cdb_engine_stats;
#define CDB_ENGINE_STATS_DISK 1u  /* add up the database's bytes on disk (walks its folder) */
#define CDB_ENGINE_STATS_INDEX 2u /* load each model's index to describe it */
/* Counts (one read each), and what `what` asks for. Concurrent calls OK. */
cdb_status cdb_engine_stats_get(cdb_engine *e, unsigned what, cdb_engine_stats *out /* OUT */);
void cdb_engine_stats_free(cdb_engine_stats *s);

/* ---- verify --------------------------------------------------------------------------- */

#define CDB_ENGINE_DEEP_SAMPLE 0.05

typedef struct cdb_engine_problem {
    const char *kind;      /* "shard-missing", "shard-damaged", "vector-missing",
                              "vector-bad", "vector-orphan", "file-without-vector",
                              "file-changed", "vector-mismatch", "index", "file-twice"
                              (a file recorded under two roots, one inside the other);
                              static */
    int32_t shard;
    int64_t model_id, file_id;
    char *path;            /* the file's path when file_id > 0 and it is known; heap */
    char *msg;             /* what is wrong; with a path, it does not name the file
                              again (print them together); heap */
} cdb_engine_problem;

typedef struct cdb_engine_verify_report {
    int64_t n_problems;    /* all found, index problems included (may exceed n_listed) */
    cdb_engine_problem *problems; /* the listed ones (heap), index problems last */
    int n_listed;
    int64_t n_more;        /* problems found beyond those listed (the database's list is
                              capped) */
    int64_t n_vectors_checked, n_files_ok, n_files_pending;
    int64_t n_lost, n_lost_files; /* vectors lost with missing or damaged shards */
    int deep;
    /* deep: */
    int64_t n_files, n_hashed, n_encoded, n_stale, n_gone, n_unreadable, max_ulp;
    /* Unfinished work, which is no damage (not in n_problems): the path of a forget and
    ** the old path of a move begun and not finished, by a run that was killed or runs
    ** now (heap; NULL when none): the next command that writes to the database finishes
    ** it; and the files pending without a failure (an ingest or reindex killed or
    ** running now; those to retry are not counted): the next reindex finishes them. */
    char *unfinished_forget, *unfinished_move;
    int64_t n_files_unfinished;
} cdb_engine_verify_report;
/* Checks every vector against the catalog and the shards (and the default model's
** index against the store); deep: also re-reads every photo (its bytes against the
** stored hash) and re-encodes a sample (the same files every time) comparing vectors.
** Problems are data: CDB_OK with out->n_problems > 0; so is unfinished work. */
cdb_status cdb_engine_verify(cdb_engine *e, int deep, double sample,
                             cdb_engine_verify_report *out /* OUT */);
void cdb_engine_verify_report_free(cdb_engine_verify_report *r);

/* ---- what could not be ingested -------------------------------------------------------- */

typedef struct cdb_engine_error_entry {
    const char *kind;      /* "error": unusable, quarantined until it changes; "retry": failed
                              for a passing reason, retried by the next run; "walk": what a
                              scan could not read (folders, broken links, missing roots). Static */
    int64_t id;            /* the file's id (0 for "walk") */
    char *path;            /* heap */
    char *reason;          /* heap */
    int64_t size;          /* bytes (0 for "walk") */
} cdb_engine_error_entry;
/* Every entry, errors first, then retries, then walk problems. Free with
** cdb_engine_errors_free. */
cdb_status cdb_engine_errors(cdb_engine *e, cdb_engine_error_entry **out /* OUT */,
                             int64_t *n /* OUT */);
void cdb_engine_errors_free(cdb_engine_error_entry *v, int64_t n);

/* ---- reading the stored vectors ------------------------------------------------------- */

typedef struct cdb_engine_vectors cdb_engine_vectors;
/* Iterates every stored vector of the model at model_path (NULL: the default) in file id
** order: those the catalog's vector directory claims, as stats counts them (a
** shard row a forget, move or deletion is taking away, or an addition has not finished,
** is left out). *model: its record; *count: the vectors stored when opened (more or
** fewer may come if a writer commits meanwhile). Exclusive use of the handle until
** closed. */
cdb_status cdb_engine_vectors_open(cdb_engine *e, const char *model_path,
                                   cdb_engine_vectors **out /* OUT */,
                                   cdb_engine_model *model /* OUT */, int64_t *count /* OUT */);
/* Up to cap vectors: ids[i], f32[i*dim..] (decoded exactly from fp16) and f16 (raw),
** each may be NULL; paths (may be NULL): paths[i] heap (free()), NULL when unknown.
** *n == 0: the end. */
cdb_status cdb_engine_vectors_read(cdb_engine_vectors *it, int cap, int64_t *ids /* OUT */,
                                   float *f32 /* OUT */, uint16_t *f16 /* OUT */,
                                   char **paths /* OUT */, int *n /* OUT */);
void cdb_engine_vectors_close(cdb_engine_vectors *it);

/* ---- duplicates (library/duplicates.c; dupes/dupes.h) ------------------------------------------ */

typedef struct cdb_engine_dup_file {
    int64_t id;
    char *path;            /* heap: cdb_engine_dups_free */
    int32_t width, height; /* full resolution, oriented */
    int64_t bytes;
    char taken[40];        /* capture time, ISO 8601 (cdb_photo_meta_taken_iso); "" unknown */
} cdb_engine_dup_file;
typedef struct cdb_engine_dup_group {
    int kind;                   /* cdb_dupes_kind: exact, near, pair, burst */
    int64_t keep;               /* the id suggested to keep (a suggestion: nothing is deleted) */
    int n_files;
    cdb_engine_dup_file *files; /* by id */
} cdb_engine_dup_group;
typedef struct cdb_engine_dups {
    int n_groups;
    cdb_engine_dup_group *groups; /* by kind, then first id */
    int64_t n_files;              /* files looked at: those with a vector of the default model */
    int64_t n_unreadable;         /* of those, files that could not be read or decoded now */
} cdb_engine_dups;
/* The duplicate groups of the library (kind: a cdb_dupes_kind, or -1 for all), as
** dupes.h defines them, from the default model's vectors and each photo's content hash,
** metadata and phash: the catalog's (photo_meta, schema 9) when the file on disk has the
** recorded size and mtime (no open), else read through cdb_engine_file_open and decoded
** cheaply (JPEG at 1/8); a changed file is refused there (counted unreadable). On a
** writer handle, what was read is stored (photo_meta), so the next run reads none of it.
** Never deletes a photo; a reader suffices. *out: cdb_engine_dups_free. */
cdb_status cdb_engine_duplicates(cdb_engine *e, int kind, cdb_engine_dups *out /* OUT */);
void cdb_engine_dups_free(cdb_engine_dups *d); /* NULL is fine; zeroes *d */

/* ---- the recorded folders -------------------------------------------------------------- */

typedef struct cdb_engine_folder {
    int64_t id;
    char *path;            /* heap */
    int is_file;           /* a single file root */
    const char *status;    /* "ok", "missing", "empty", "unavailable", "unreadable", "new"; static.
                              "missing" when the path is not there now */
    int64_t files;         /* live: ok + pending + errors */
    int64_t ok, errors, to_retry, walk_problems, vectors;
    int follow_symlinks, no_exif;
    int64_t scanned_ns;    /* wall clock of the last scan; 0: never */
    /* The rules the root keeps (ingest --exclude: "exclude", a forgotten subfolder:
    ** "forgotten"), each "kind\tbase\tpattern" (base: the folder below which it applies,
    ** relative to the root, "" for the root); heap, freed by cdb_engine_folders_free. */
    char **excludes;
    int n_excludes;
    /* The .clipdbignore files the root's last scans met (their rules live in the files
    ** themselves): absolute paths, byte order; heap, freed by cdb_engine_folders_free. */
    char **ignore_files;
    int n_ignore_files;
    /* The folders the last scans did not walk because rules that govern them (their own
    ** .clipdbignore or one above) could not be read in full: their recorded files were
    ** kept as they were. not_walked[i]: the folder's absolute path; not_walked_why[i]: the
    ** rules file's absolute path and what is wrong with it ("/p/a/.clipdbignore cannot be
    ** read (Permission denied)"). Heap, freed by cdb_engine_folders_free. */
    char **not_walked, **not_walked_why;
    int n_not_walked;
} cdb_engine_folder;
/* The recorded roots in id order. *out: cdb_engine_folders_free. Concurrent calls OK. */
cdb_status cdb_engine_folders(cdb_engine *e, cdb_engine_folder **out /* OUT */,
                              int *n /* OUT */);
void cdb_engine_folders_free(cdb_engine_folder *f, int n);

typedef struct cdb_engine_subfolder {
    char *path;            /* heap: the folder's absolute path */
    int64_t files;         /* ok photos in it and below it */
    int has_subfolders;    /* 1 when some of those are in folders below it */
} cdb_engine_subfolder;
/* The folders directly inside `under` (a recorded folder root, or a folder inside one,
** read as cdb_engine_under_resolve reads it) that hold ok photos, in byte order of
** their names: from the catalog's relative paths, not from the disk (so also for a
** root that is unavailable now). One pass over the rows under it. E_NOT_A_ROOT
** (CDB_NOTFOUND) when no folder root holds it. *out: cdb_engine_subfolders_free.
** Concurrent calls OK. */
cdb_status cdb_engine_subfolders(cdb_engine *e, const char *under,
                                 cdb_engine_subfolder **out /* OUT */, int *n /* OUT */);
void cdb_engine_subfolders_free(cdb_engine_subfolder *f, int n);

typedef struct cdb_engine_forgot {
    char *path;            /* heap */
    int is_file;
    int64_t files;         /* files that had vectors */
} cdb_engine_forgot;

typedef struct cdb_engine_forget_report {
    cdb_engine_forgot *roots; /* the roots forgotten (also those before a failure) */
    int n_roots;
    int64_t files, bytes_freed;
    int index_refresh_failed; /* a model's index could not be refreshed (warned):
                                 searches stay correct, 'index build' rebuilds it */
    char container[4096];  /* E_PART_OF_ROOT, or subfolder: the folder root that holds
                              the path */
    int already;           /* 1: the path was forgotten before (nothing left to do) */
    int subfolder;         /* 1: path was a folder inside the root `container`, now left
                              out of it (roots[0] is path) */
    char left_out_by[4096]; /* already, for a folder inside a root: the forgotten folder at
                               or above it ("" when an `ingest --exclude` rule covers it) */
    char link_to[4096];    /* path is a symbolic link: where it leads (its real path, or
                              the link's text when that is not there); "" when no link */
} cdb_engine_forget_report;
/* Removes the root at path, or every root inside it (path: a recorded folder or file;
** an unmounted one is matched by its absolute path), with their files, vectors and
** thumbnails, gives the space back and refreshes the indexes. path's folder is resolved
** (realpath: "..", links above it) but not its last component when that is a symbolic
** link: forget acts on the link itself, never on where it leads (out->link_to), so a
** link planted in a library cannot make it drop another folder; a link holds nothing
** recorded unless its root follows links (else E_NOT_A_ROOT). A folder inside a folder
** root (a trailing '/' and ".." resolved first) is left out of it instead: recorded
** as an exclusion of the root (cdb_engine_folders; reindex and ingest of the root skip
** it, `ingest` of that folder itself brings it back), its files, vectors, metadata and
** thumbnails removed (out->subfolder). It must be a folder on the disk or hold recorded
** files (else E_NOT_A_ROOT); a file inside a root is refused (E_PART_OF_ROOT); a
** folder left out already (by a forgotten folder at or above it, or an --exclude rule)
** is out->already. Writer. Rerunnable: a forget killed at any moment is finished by the
** next writer that opens the database, and the same forget again returns CDB_OK with
** out->already. E_NOT_A_ROOT, E_PART_OF_ROOT (out->container). *out:
** cdb_engine_forget_report_free. */
cdb_status cdb_engine_forget(cdb_engine *e, const char *path,
                             cdb_engine_forget_report *out /* OUT */);
void cdb_engine_forget_report_free(cdb_engine_forget_report *r);

typedef struct cdb_engine_move_report {
    char old_path[4096], new_path[4096]; /* as matched: absolute, normalized */
    int64_t files;         /* recorded files of the moved roots */
    int64_t present;       /* of them, found at the new place */
    char container[4096];  /* E_PART_OF_ROOT: the folder root that holds OLD */
    char bad_root[4096], bad_dest[4096]; /* E_MOVE_TARGET: root and its would-be path */
    int bad_dest_is_file;
    int already;           /* 1: OLD was moved to NEW before (nothing left to do) */
} cdb_engine_move_report;
/* Tells the database that the root(s) at old_path now live at new_path (which must
** exist, holding at least one of their recorded files): paths rewritten, vectors kept;
** the next reindex checks the files. Writer. Rerunnable: a move killed at any moment
** is finished by the next writer that opens the database, and the same move again
** returns CDB_OK with out->already. E_NOT_A_ROOT, E_PART_OF_ROOT,
** E_MOVE_TARGET, E_MOVE_NOTHING. */
cdb_status cdb_engine_move(cdb_engine *e, const char *old_path, const char *new_path,
                           cdb_engine_move_report *out /* OUT */);

/* ---- models from the Hugging Face Hub (hub.c) -----------------------------------------
** Downloads a model repository's files into huggingface_hub's own cache, so that a model
** a Python user downloaded is found here and the other way round:
**   <cache>/models--ORG--NAME/blobs/<etag>            the file's bytes (ETag: the LFS
**                                                     sha256, or the git blob sha1)
**   <cache>/models--ORG--NAME/snapshots/<commit>/<f>  -> ../../blobs/<etag> (relative)
**   <cache>/models--ORG--NAME/refs/<revision>         the commit the revision named
** The cache is $HF_HUB_CACHE, else $HUGGINGFACE_HUB_CACHE, else $HF_HOME/hub, else
** $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub. The server is
** $HF_ENDPOINT (default https://huggingface.co); the token $HF_TOKEN, else
** $HUGGING_FACE_HUB_TOKEN, else the file $HF_TOKEN_PATH or $HF_HOME/token (sent as a
** Bearer token to the endpoint only, never logged); HF_HUB_OFFLINE=1 (or
** TRANSFORMERS_OFFLINE=1): the cache only. Only the files a model needs are fetched
** (the weights in safetensors, configs, tokenizer files), each into blobs/<etag>.incomplete
** (resumed with Range after a dropped connection or an earlier run), checked against its
** ETag's hash, then renamed: a complete file's name never holds a partial one.
** Thread-safety: any thread; two processes fetching one file take turns (a lock file in
** <cache>/.locks, as huggingface_hub's). */

/* A short name clipdb knows (cdb_engine_hub_known): the repository it stands for and
** what users choose by. Strings are static. */
typedef struct cdb_engine_hub_model {
    const char *name;     /* "ViT-B-32" */
    const char *repo;     /* "openai/clip-vit-base-patch32" */
    const char *download; /* size of the files fetched, "605 MB" */
    const char *ram;      /* memory the weights take loaded in fp32 on the CPU, "0.6 GB" */
    const char *recall;   /* published Crossmodal-3600 recall (Immich's), or "-" */
    const char *needs;    /* NULL when this build runs it, else what it lacks
                             ("a Gemma tokenizer for text") */
} cdb_engine_hub_model;
/* The known models (n_out: how many); static, never NULL. */
const cdb_engine_hub_model *cdb_engine_hub_known(int *n_out /* OUT */);

typedef struct cdb_engine_hub_progress {
    cdb_engine_phase phase; /* START, UPDATE (bytes arrived), END of one file */
    const char *file;       /* the repository's file name; borrowed */
    int index, count;       /* this file is the index-th (1-based) of count to fetch */
    int64_t done;           /* bytes of it on disk (a resumed file starts above 0) */
    int64_t total;          /* its size; -1 when the server did not say */
} cdb_engine_hub_progress;

typedef struct cdb_engine_hub_params {
    const char *revision; /* branch, tag or 40-hex commit; NULL: "main" */
    int cache_first;      /* 1: a snapshot of the revision already in the cache is used
                             without asking the server (what --model hf:X does); 0: ask
                             the server what the revision is now (models get) */
    void (*progress)(void *ud, const cdb_engine_hub_progress *p); /* NULL: none */
    int (*should_stop)(void *ud); /* nonzero stops the download (CDB_INTERRUPTED); the
                                     .incomplete file is kept for the next run */
    void *ud;
    int n_fetched;        /* OUT: files downloaded by the call (0: all were cached) */
} cdb_engine_hub_params;
cdb_engine_hub_params cdb_engine_hub_params_default(void);

/* Fetches model (a short name of cdb_engine_hub_known, or ORG/NAME) into the cache and
** sets *folder to its snapshot folder (cdb_free). p: NULL for defaults; its n_fetched
** is written. Errors: CDB_INVALID (a malformed name or revision), CDB_NOTFOUND with
** E_HUB_NOT_FOUND (404) or E_HUB_OFFLINE, CDB_ERROR with E_HUB_AUTH, CDB_CORRUPT with
** E_HUB_CHECKSUM (the bad file is deleted), CDB_NOSPACE with E_DISK_FULL, CDB_IO with
** E_HUB_NETWORK, CDB_INTERRUPTED. */
cdb_status cdb_engine_hub_get(const char *model, cdb_engine_hub_params *p,
                              char **folder /* OUT */);

/* A model path as users give it: "hf:ORG/NAME" or "hf:SHORT" (optionally "@REV") is
** fetched as cdb_engine_hub_get with cache_first and *path is its snapshot folder;
** anything else is copied as it is. *path: cdb_free. */
cdb_status cdb_engine_model_path(const char *given, cdb_engine_hub_params *p,
                                 char **path /* OUT */);

#ifdef __cplusplus
}
#endif
#endif /* CDB_ENGINE_H */
