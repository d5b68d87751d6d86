/*
** clipdb.h: the installed public C API of clipdb (libclipdb.so.1 / libclipdb.a,
** `pkg-config clipdb`, `find_package(clipdb)`). Self-contained: it includes only
** <stddef.h> and <stdint.h>; every name starts with clipdb_ / CLIPDB_.
**
** What it covers: create a database bound to a model, open it, ingest files and
** folders (with a progress callback that can stop the run), reindex, search it with
** text (the query language of `clipdb search`: "beach + sunset - people"), and embed
** texts and images with a model, outside any database.
**
** Conventions
**   Status: every fallible call returns clipdb_status (CLIPDB_OK = 0). On failure,
**     clipdb_errmsg() holds one sentence saying what failed and why; it belongs to
**     the calling thread and is valid until its next clipdb call.
**   Ownership: everything the library returns is freed by the one function named for
**     it: clipdb_close, clipdb_model_close, clipdb_options_free,
**     clipdb_search_params_free, clipdb_hits_free, clipdb_report_free (each takes
**     NULL). Strings a getter returns are borrowed from their object and live as long
**     as it does. Inputs (paths, texts, options) are copied or only read during the
**     call: the caller may free them once it returns.
**   Growth: handles and parameter objects are opaque, set through setters and read
**     through getters, so later versions add fields without changing any size the
**     caller compiled in. Enum values are append-only.
**   Threading: one clipdb handle may run clipdb_search_text and
**     clipdb_search_text_many from any number of threads at once; every other call on
**     a handle (ingest, reindex, close) needs exclusive use of it. A clipdb_model runs one embed call at a time (callers
**     serialize); distinct models are independent. Parameter objects and results are
**     plain data: share them read-only, or not at all while one thread changes them.
**     Callbacks run on the thread that made the call. No global initialization.
**   The library never prints to stdout; warnings go to stderr, filtered by the
**   CLIPDB_LOG environment variable (debug|info|warn|error|off; default warn).
*/
#ifndef CLIPDB_H
#define CLIPDB_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) || defined(__clang__)
#define CLIPDB_API __attribute__((visibility("default")))
#else
#define CLIPDB_API
#endif

/* ---- versions ------------------------------------------------------------------ */

/* The version this header belongs to. clipdb_version*() say what is linked. */
#define CLIPDB_VERSION_MAJOR 0
#define CLIPDB_VERSION_MINOR 1
#define CLIPDB_VERSION_PATCH 0
#define CLIPDB_VERSION_STRING "0.1.0"
#define CLIPDB_VERSION_NUMBER \
    (CLIPDB_VERSION_MAJOR * 10000 + CLIPDB_VERSION_MINOR * 100 + CLIPDB_VERSION_PATCH)
/* The ABI generation: the N of libclipdb.so.N, raised when a change breaks callers. */
#define CLIPDB_ABI_VERSION 1

/* The linked library's version, "0.1.0" (static) and its CLIPDB_VERSION_NUMBER. */
CLIPDB_API const char *clipdb_version(void);
CLIPDB_API int clipdb_version_number(void);

/* ---- status and errors ------------------------------------------------------------- */

typedef enum clipdb_status {
    CLIPDB_OK = 0,
    CLIPDB_ERROR,          /* a failure with no more specific status */
    CLIPDB_NOMEM,          /* out of memory */
    CLIPDB_IO,             /* a file could not be read or written */
    CLIPDB_CORRUPT,        /* damaged data (a database file, a model file) */
    CLIPDB_INVALID,        /* a bad argument: a malformed query, an empty list ... */
    CLIPDB_NOTFOUND,       /* no database at the folder, a path that does not exist */
    CLIPDB_DIM_MISMATCH,   /* sizes that do not fit together */
    CLIPDB_UNSUPPORTED,    /* e.g. text with a model that has no tokenizer */
    CLIPDB_DEVICE,         /* the device asked for cannot run the model */
    CLIPDB_BUSY,           /* another writer holds the database */
    CLIPDB_TOO_LARGE,      /* an input over a limit (image pixels, query length) */
    CLIPDB_INTERRUPTED,    /* stopped by a callback */
    CLIPDB_NOSPACE,        /* the disk is full */
    CLIPDB_VERSION         /* written by a newer clipdb */
} clipdb_status;

/* A static string naming st ("not found"), never NULL. */
CLIPDB_API const char *clipdb_status_str(clipdb_status st);
/* The last failure's message on this thread ("" when none), e.g. "no database at
** /x (not found)". Borrowed: valid until this thread's next clipdb call. */
CLIPDB_API const char *clipdb_errmsg(void);

/* ---- options: how databases and models are opened -------------------------------- */

typedef struct clipdb_options clipdb_options;
/* Defaults: device "auto" (cuda:0 when usable, else the CPU), threads 0 (the
** number of cores), lock wait 0 (fail at once with CLIPDB_BUSY). NULL on no memory. */
CLIPDB_API clipdb_options *clipdb_options_new(void);
CLIPDB_API void clipdb_options_free(clipdb_options *o);
/* "auto", "cpu" or "cuda:N" (also "cuda" for cuda:0). CLIPDB_INVALID otherwise. */
CLIPDB_API clipdb_status clipdb_options_set_device(clipdb_options *o, const char *device);
/* Threads per encode call; 0: the number of cores. */
CLIPDB_API clipdb_status clipdb_options_set_threads(clipdb_options *o, int threads);
/* For the writer lock the first ingest or reindex takes: 0 fail at once if another
** writer holds it (CLIPDB_BUSY), > 0 wait up to ms milliseconds, -1 wait for good. */
CLIPDB_API clipdb_status clipdb_options_set_lock_wait_ms(clipdb_options *o, int ms);

/* ---- databases ------------------------------------------------------------------------ */

typedef struct clipdb clipdb;

/* Creates a new database in the folder dir (made when missing), bound to the model at
** model_path (a model folder or a .safetensors file; only its identity and sizes are
** read). CLIPDB_INVALID when dir already holds a database (nothing is changed). */
CLIPDB_API clipdb_status clipdb_create(const char *dir, const char *model_path);

/* Opens the database in dir as a reader (searches never block and are never blocked
** by a writer, in this process or another). The first clipdb_ingest or
** clipdb_reindex takes the database's one writer lock, held until clipdb_close.
** o: NULL for defaults; read during the call only. CLIPDB_NOTFOUND when there is no
** database there, CLIPDB_VERSION when a newer clipdb wrote it. */
CLIPDB_API clipdb_status clipdb_open(const char *dir, const clipdb_options *o,
                                     clipdb **out /* OUT */);
/* Closes the handle; what a writer committed is durable. NULL is fine. */
CLIPDB_API void clipdb_close(clipdb *db);

/* ---- ingest and reindex ------------------------------------------------------------- */

/* Called as a run goes: label ("ingest", "reindex"), files done so far, files to do
** (-1 while unknown) and files that failed so far. Return 0 to go on, nonzero to stop:
** the batch in flight is committed and the run returns CLIPDB_OK with
** CLIPDB_REPORT_INTERRUPTED set. It may be called thousands of times a second. */
typedef int (*clipdb_progress_fn)(void *ud, const char *label, int64_t done, int64_t total,
                                  int64_t errors);

/* What a run did (the default model's pass): a number per field. */
typedef enum clipdb_report_field {
    CLIPDB_REPORT_FOUND = 0,   /* regular files the walks met */
    CLIPDB_REPORT_ADDED,       /* new files encoded */
    CLIPDB_REPORT_CHANGED,     /* files whose content changed, encoded again */
    CLIPDB_REPORT_UNCHANGED,   /* skipped without reading (same size and time) */
    CLIPDB_REPORT_MOVED,       /* kept their vector under a new path */
    CLIPDB_REPORT_DELETED,     /* gone from disk */
    CLIPDB_REPORT_ERRORS,      /* unusable images (quarantined until they change) */
    CLIPDB_REPORT_RETRY,       /* passing failures, retried by the next run */
    CLIPDB_REPORT_SKIPPED,     /* not images */
    CLIPDB_REPORT_PARTIAL,     /* 1: something failed, waits for a retry or is missing */
    CLIPDB_REPORT_INTERRUPTED  /* 1: the progress callback stopped the run */
} clipdb_report_field;
typedef struct clipdb_report clipdb_report;
/* The field's value; 0 for a field this version does not know. */
CLIPDB_API int64_t clipdb_report_get(const clipdb_report *r, clipdb_report_field f);
CLIPDB_API void clipdb_report_free(clipdb_report *r);

/* Ingests paths[0..n) (a folder is walked recursively, a file is recorded as itself),
** encoding every new or changed image, then brings every other vector set of the
** database up to date. Every path must exist (CLIPDB_NOTFOUND naming the first that
** does not; nothing is written then). progress: NULL for none. CLIPDB_OK also when
** some files failed (CLIPDB_REPORT_PARTIAL) or the callback stopped it; an error
** only when the run itself failed (CLIPDB_NOSPACE: what was committed is kept, a
** rerun finishes). *report (report may be NULL): clipdb_report_free, set on success
** and on a failure after the run began (else NULL). */
CLIPDB_API clipdb_status clipdb_ingest(clipdb *db, const char *const *paths, int n,
                                       clipdb_progress_fn progress, void *ud,
                                       clipdb_report **report /* OUT */);
/* Rescans every folder and file ever ingested: new, changed, moved and deleted files
** are applied to every vector set, and the indexes refreshed. As clipdb_ingest. */
CLIPDB_API clipdb_status clipdb_reindex(clipdb *db, clipdb_progress_fn progress, void *ud,
                                        clipdb_report **report /* OUT */);

/* ---- the index ---------------------------------------------------------------------- */

typedef struct clipdb_index_params clipdb_index_params;
/* Defaults: type "auto" (picked by size), inverted lists in memory. NULL on no memory. */
CLIPDB_API clipdb_index_params *clipdb_index_params_new(void);
CLIPDB_API void clipdb_index_params_free(clipdb_index_params *p);
/* "auto", "flat", "hnsw", "ivf-sq", "ivf-pq" or "ivf-hnsw-pq" (`clipdb index build
** --type`); CLIPDB_INVALID for another. */
CLIPDB_API clipdb_status clipdb_index_params_set_type(clipdb_index_params *p,
                                                      const char *type);
/* 1: an IVF type's inverted lists go to a file beside the index, which searches map
** instead of holding the lists in memory (`--on-disk`); later refreshes keep them there.
** 0 (default): in memory. */
CLIPDB_API clipdb_status clipdb_index_params_set_on_disk(clipdb_index_params *p,
                                                         int on_disk);
/* Builds the index of the database's default model from its stored vectors (p: NULL
** for defaults) and swaps it in atomically; searches use it from then on. Ingest and
** reindex keep it fresh by themselves: this is for a type or placement of one's own.
** CLIPDB_NOTFOUND when there are no vectors yet, CLIPDB_UNSUPPORTED for lists on disk
** with a type that has none. */
CLIPDB_API clipdb_status clipdb_index_build(clipdb *db, const clipdb_index_params *p);

/* ---- search ------------------------------------------------------------------------ */

typedef struct clipdb_search_params clipdb_search_params;
/* Defaults: k 10, no minimum score, everywhere. NULL on no memory. */
CLIPDB_API clipdb_search_params *clipdb_search_params_new(void);
CLIPDB_API void clipdb_search_params_free(clipdb_search_params *p);
/* Hits wanted, >= 1. */
CLIPDB_API clipdb_status clipdb_search_params_set_k(clipdb_search_params *p, int k);
/* Drops hits scoring below min_score (cosine similarity, -1 .. 1). */
CLIPDB_API clipdb_status clipdb_search_params_set_min_score(clipdb_search_params *p,
                                                            double min_score);
/* Limits hits to files under path (copied; repeat for several places: a hit passes
** when it is under any). An existing folder matches whole path components of its real
** path ("/a/b" holds "/a/b/c.jpg", not "/a/bc.jpg"); anything else is a plain prefix of
** the absolute path it names, as `clipdb search --under` reads it. */
CLIPDB_API clipdb_status clipdb_search_params_add_under(clipdb_search_params *p,
                                                        const char *path);

/* Photo metadata filters (docs/images.md "Metadata"), each text copied, checked when
** the search runs (CLIPDB_INVALID then when it does not parse; NULL or "" unsets):
** taken_after (inclusive) and taken_before (exclusive), ISO 8601 dates or date-times
** ("2024-05-01", "2024-05-01T18:30+02:00"); camera, a case-insensitive substring of the
** make or the model; near, "LAT,LON,KM"; has_gps 1: only photos with a position. A photo
** without a capture time counts by its file time. The hits are the best k among the
** photos that pass. */
CLIPDB_API clipdb_status clipdb_search_params_set_filter(clipdb_search_params *p,
                                                         const char *taken_after,
                                                         const char *taken_before,
                                                         const char *camera, const char *near,
                                                         int has_gps);
/* The hits' order: "score" (default, best first), "time" (file time, newest first),
** "taken" / "taken-asc" (capture time, newest / oldest first; the file time where a
** photo has none). The best k are chosen first, then ordered. */
CLIPDB_API clipdb_status clipdb_search_params_set_sort(clipdb_search_params *p,
                                                       const char *order);

/* 1: copies are one hit (the files `clipdb duplicates` groups as exact or near copies,
** as `clipdb search` shows them by default): the best-ranked of each group, with the
** others as its copies (clipdb_hits_copies), k counting such hits; over several
** databases, copies in two of them are one hit. 0 (the default): every file. */
CLIPDB_API clipdb_status clipdb_search_params_set_collapse(clipdb_search_params *p,
                                                           int collapse);

typedef struct clipdb_hits clipdb_hits;
/* Searches the database's default model's vectors for text in the query language
** ("a beach", "beach + sunset - people", "2*dog + cat"): the hits best first, each
** scored by the cosine similarity of its stored vector. p: NULL for defaults.
** CLIPDB_INVALID for a malformed or empty query (clipdb_errmsg says why). No hit is
** a success with clipdb_hits_count 0. *out: clipdb_hits_free. */
CLIPDB_API clipdb_status clipdb_search_text(clipdb *db, const char *text,
                                            const clipdb_search_params *p,
                                            clipdb_hits **out /* OUT */);
/* One search over the n open databases dbs[0..n) (n >= 1; each given once): the hits
** and scores one database holding all their photos would give (equal scores in path
** order, then by database), the query encoded once by dbs[0]'s model. Every
** database's default model must have the same weights, else CLIPDB_INVALID naming
** the two. The handles are borrowed for the call (not closed, not kept); each may be
** searched by other threads meanwhile. A failure in one fails the call, naming it.
** clipdb_hits_db says which database each hit is in (clipdb_hits_id is that
** database's id). *out: clipdb_hits_free. */
CLIPDB_API clipdb_status clipdb_search_text_many(clipdb *const *dbs, int n, const char *text,
                                                 const clipdb_search_params *p,
                                                 clipdb_hits **out /* OUT */);
CLIPDB_API int clipdb_hits_count(const clipdb_hits *h);
/* Hit i (0 .. count - 1, best first); an i out of range gives 0 / NULL. */
CLIPDB_API int64_t clipdb_hits_id(const clipdb_hits *h, int i);       /* the file's id */
CLIPDB_API const char *clipdb_hits_path(const clipdb_hits *h, int i); /* absolute; borrowed */
CLIPDB_API float clipdb_hits_score(const clipdb_hits *h, int i);
/* The index in dbs of clipdb_search_text_many of the hit's database (0 for
** clipdb_search_text); -1 for an i out of range. */
CLIPDB_API int clipdb_hits_db(const clipdb_hits *h, int i);
/* Pixels after EXIF orientation; 0 when unknown. */
CLIPDB_API int clipdb_hits_width(const clipdb_hits *h, int i);
CLIPDB_API int clipdb_hits_height(const clipdb_hits *h, int i);
/* The photo's capture time, ISO 8601 ("2024-05-01T12:34:56", "+02:00" when the offset
** is known), or its file time in UTC ("...Z"); and where it came from: "original",
** "created", "xmp", "raw", or "file". Camera make and model ("" when absent). Borrowed. */
CLIPDB_API const char *clipdb_hits_taken(const clipdb_hits *h, int i);
CLIPDB_API const char *clipdb_hits_taken_source(const clipdb_hits *h, int i);
CLIPDB_API const char *clipdb_hits_make(const clipdb_hits *h, int i);
CLIPDB_API const char *clipdb_hits_model(const clipdb_hits *h, int i);
/* With collapse: how many copies hit i stands for (0 without, or out of range), and
** copy j's (0 .. count - 1, ascending by database, then id) id and database (as
** clipdb_hits_db); out of range: 0 and -1. */
CLIPDB_API int clipdb_hits_copies(const clipdb_hits *h, int i);
CLIPDB_API int64_t clipdb_hits_copy_id(const clipdb_hits *h, int i, int j);
CLIPDB_API int clipdb_hits_copy_db(const clipdb_hits *h, int i, int j);
CLIPDB_API void clipdb_hits_free(clipdb_hits *h);

/* ---- models: embeddings outside any database ----------------------------------------- */

typedef struct clipdb_model clipdb_model;
/* Loads the model at path (a model folder or a .safetensors file) with both towers.
** o: NULL for defaults (its device and threads apply). */
CLIPDB_API clipdb_status clipdb_model_open(const char *path, const clipdb_options *o,
                                           clipdb_model **out /* OUT */);
CLIPDB_API void clipdb_model_close(clipdb_model *m);
/* The embedding's length, and the model's name (borrowed from m). */
CLIPDB_API int clipdb_model_dim(const clipdb_model *m);
CLIPDB_API const char *clipdb_model_name(const clipdb_model *m);

/* Flags of the embed calls (0: L2-normalized, EXIF orientation applied, as
** `clipdb embed` does by default). */
#define CLIPDB_EMBED_RAW 1u     /* not L2-normalized */
#define CLIPDB_EMBED_NO_EXIF 2u /* images: ignore the EXIF orientation */
/* Embeds texts[0..n) into out: n rows of clipdb_model_dim floats, the caller's
** memory. On the CPU each row has the bits `clipdb embed --text` gives it.
** CLIPDB_UNSUPPORTED when the model cannot encode text. */
CLIPDB_API clipdb_status clipdb_embed_texts(clipdb_model *m, const char *const *texts, int n,
                                            unsigned flags, float *out /* OUT n * dim */);
/* Embeds the image files paths[0..n) into out as clipdb_embed_texts; each row has the
** bits `clipdb embed --image` gives that image. The error names the image that failed. */
CLIPDB_API clipdb_status clipdb_embed_images(clipdb_model *m, const char *const *paths, int n,
                                             unsigned flags, float *out /* OUT n * dim */);

#ifdef __cplusplus
}
#endif
#endif /* CLIPDB_H */
