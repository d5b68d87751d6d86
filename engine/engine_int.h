/*
** engine_int.h: what the files of engine/ share. Not a module contract: nothing
** outside engine/ includes it (engine/engine.h is the contract).
**
** - engine.c:    the handle, its reader pool and model cache, error detail codes,
**                creating a database, finding and loading its models.
** - walk.c:      walking a folder root; telling images from other files.
** - queue.c:     the bounded queues between the pipeline's stages.
** - imagefile.c: reading and decoding one photo, failures classified.
** - rowfile.c:   the one way from a catalog row to a photo's bytes.
** - library.c:   the library model: recorded roots, what an ingest PATH means.
** - pipeline.c, scan.c (pipeline_int.h): the ingest pipeline.
** - run.c:       ingest and reindex: one pipeline pass per vector set, the run record.
** - indexing.c:  index files: build, refresh, the store callbacks a search uses.
** - search.c:    the query language's terms to one vector, the search, its filters,
**                and the per-model search state that keeps searches fresh.
** - query.c:     the query language's parser.
** - deep.c, verify.c: verify (deep), stats.
** - files.c:     files by id (originals, thumbnails), errors, the vectors for export.
** - thumbs.c:    thumbnails (made from the decoded image, stored by db/).
** - preview.c:   the viewer's large JPEGs of originals, cached in <db>/previews/.
** - folders.c:   listing, forgetting and moving roots.
*/
#ifndef CDB_ENGINE_INT_H
#define CDB_ENGINE_INT_H

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>

#include "core/core.h"
#include "db/db.h"
#include "encoder/encoder.h"
#include "engine/engine.h"
#include "index/index.h"

/* ---- errors (engine.c) ----------------------------------------------------------- */

/* Clears this thread's detail code (every public entry point does first). */
void cdb_eng_clear(void);
/* Sets the detail code and returns rc. */
cdb_status cdb_eng_code(cdb_status rc, cdb_engine_err code);
/* errmsg = "<what> (<the current errmsg, or rc's string when empty>)", the code set:
** the "what failed (why)" sentence of every failed public call; the leading contexts
** of why that what says already are dropped (cdb_err_unsaid). Returns rc. */
cdb_status cdb_eng_fail(cdb_status rc, cdb_engine_err code, const char *fmt, ...) CDB_PRINTF(3, 4);
/* errmsg = "<what> (<why>)" from explicit parts (why NULL or "": just what; why
** trimmed as above). */
cdb_status cdb_eng_failw(cdb_status rc, cdb_engine_err code, const char *why, const char *fmt, ...)
    CDB_PRINTF(4, 5);
/* "1,234,567" into buf (as the CLI prints counts); returns buf. */
const char *cdb_eng_fmt_count(int64_t n, char *buf, size_t size);
/* 1 when rc (with the current errmsg) means the disk is full. */
int cdb_eng_disk_full(cdb_status rc);

/* ---- work a killed writer left (folders.c) --------------------------------------- */

/* Finishes a move or a forget that a killed run began (their notes in the catalog say
** which): the roots still at its path, then for a move the folding of roots, for a
** forget the indexes and the space. CDB_OK when there was none. Writer. */
cdb_status cdb_eng_finish_leftovers(cdb_engine *e);

/* ---- events ------------------------------------------------------------------------ */

void cdb_eng_warn(const cdb_engine_events *ev, const char *fmt, ...) CDB_PRINTF(2, 3);
int cdb_eng_should_stop(const cdb_engine_events *ev); /* polls ev->should_stop (calling thread) */
void cdb_eng_progress(const cdb_engine_events *ev, cdb_engine_phase ph, const char *label,
                  int64_t done, int64_t total, int64_t errors);

/* ---- bounded queue (queue.c) --------------------------------------------------------- */

typedef struct eng_queue eng_queue;
eng_queue *cdb_eng_queue_new(int cap); /* NULL on OOM */
void cdb_eng_queue_free(eng_queue *q);
int cdb_eng_queue_push(eng_queue *q, void *item); /* blocks while full; -1 once closed */
void *cdb_eng_queue_pop(eng_queue *q); /* blocks while empty; NULL once closed and empty */
void *cdb_eng_queue_try_pop(eng_queue *q);        /* NULL when empty */
void cdb_eng_queue_close(eng_queue *q);

/* ---- walking roots (walk.c) -------------------------------------------------------- */

typedef struct eng_walk_entry {
    const char *relpath;      /* relative to the root, '/'-separated; borrowed for the call */
    int64_t size, mtime_ns, ctime_ns;
    uint64_t dev, ino;
    const char *error;        /* non-NULL: this entry could not be walked (err = errno) */
    int err;
    int dangling;             /* with error: a symbolic link whose target is not there */
} eng_walk_entry;

/* CDB_OK when this user (the effective ids) may write what a writer of the database
** at dir writes (index_only: what 'index build' writes: index/, or the folder when
** there is none yet); else CDB_IO with E_READ_ONLY and a message that names the first
** folder or file that is not writable, and why (a read-only filesystem, or this user,
** named). A dir without catalog.db passes: opening it says there is no database. */
cdb_status cdb_eng_check_writable(const char *dir, int index_only);
/* The login name of uid into buf ("uid N" when it has none). */
void cdb_eng_user_name(unsigned uid, char *buf, size_t size);

/* The bytes of the files in the folder tree dir: what `stats` says the database takes,
** and what `forget` measures before and after (verify.c). SQLite's shared-memory
** files (*-shm: an index of the WAL, there only while a connection is open) are not
** counted, so the figure does not depend on who has the database open. */
int64_t cdb_eng_disk_bytes(const char *dir);

/* 1 when path (resolved, '/'-separated, no trailing slash) is dir or lies under it;
** strictly: under it only (library.c). */
int cdb_eng_path_under(const char *path, const char *dir, int strictly);
/* cdb_eng_path_under, strictly, of path and dir resolved first (links followed); 0
** also when either cannot be resolved (walk.c). */
int cdb_eng_path_inside(const char *path, const char *dir);

typedef struct eng_walk_stats {
    int64_t n_files, n_dirs, n_hidden, n_links_skipped, n_loops, n_special, n_errors;
    int64_t n_links_covered; /* followed links not entered: the target is in the library */
    int64_t n_same_file;     /* files met again under another name (links, hard links) */
} eng_walk_stats;

/* Called for every regular file (and every walk error); nonzero stops the walk. */
typedef int (*eng_walk_fn)(const eng_walk_entry *e, void *ud);

/* A set of (device, inode) pairs (walk.c). */
typedef struct eng_devino_set eng_devino_set;
eng_devino_set *cdb_eng_devino_new(void); /* NULL on OOM */
void cdb_eng_devino_free(eng_devino_set *s);
int cdb_eng_devino_add(eng_devino_set *s, uint64_t dev,
                       uint64_t ino); /* 1 new, 0 present, -1 OOM */

typedef struct eng_walk_opts {
    int follow_symlinks;
    const char *skip_dir; /* a folder never entered (the database's own), or NULL */
    /* With follow_symlinks: 1 when the link at path (a full path) leads to what the
    ** library holds at its real path, so the link is not followed. NULL: follow all. */
    int (*link_covered)(const char *path, void *ud);
    void *link_ud;
    /* Folders and multiply-reachable files met so far (NULL: this walk's own): the
    ** walks of one run share them, so a folder or file reachable from two roots (a
    ** bind mount, a hard link, links) is met once. */
    eng_devino_set *dirs, *files;
} eng_walk_opts;

/* Walks root (a folder) as described in walk.c; in skip_dir itself, the database's own
** entries are left out (cdb_db_owns_name). Returns 0 when done, 1 when fn stopped it,
** 2 when root lies inside skip_dir (nothing walked), -1 when root cannot be read (errno). */
int cdb_eng_walk(const char *root, const eng_walk_opts *o, eng_walk_fn fn, void *ud,
             eng_walk_stats *st /* OUT */);
/* 1 when the name has an image extension (case-insensitive). */
int cdb_eng_image_ext(const char *name);
/* The image format whose signature starts b ("jpeg", "png", ...), or NULL. */
const char *cdb_eng_image_magic(const unsigned char *b, size_t n);

/* ---- reading photos (imagefile.c) -------------------------------------------------- */

typedef enum eng_readfail {
    ENG_FAIL_NONE = 0,
    ENG_FAIL_GONE,      /* not there any more (deleted or moved since the walk) */
    ENG_FAIL_NOT_IMAGE, /* sniffed: no image signature */
    ENG_FAIL_TRANSIENT, /* I/O, permission, memory: retry later */
    ENG_FAIL_PERMANENT  /* the bytes cannot be used: quarantine until the file changes */
} eng_readfail;
/* size, mtime, ctime, dev, ino of a stat into m. */
void cdb_eng_stat_meta(const struct stat *st, cdb_db_file_meta *m);
/* Reads the whole file at path: *buf (malloc'd, the caller frees) and meta's stat
** fields and hash. sniff: the name is not an image's; the first bytes decide
** (ENG_FAIL_NOT_IMAGE). On failure reason gets one line. */
eng_readfail cdb_eng_read_photo(const char *path, int sniff, unsigned char **buf /* OUT */,
                        cdb_db_file_meta *meta /* OUT */, char *reason, size_t reason_size);
/* Reads the whole of fd, an open regular file whose stat is st (the caller keeps
** fd): as cdb_eng_read_photo after its open, sniff and all. */
eng_readfail cdb_eng_read_photo_fd(int fd, const struct stat *st, int sniff,
                                   unsigned char **buf /* OUT */, cdb_db_file_meta *meta /* OUT */,
                                   char *reason, size_t reason_size);

/* ---- the one way from a catalog row to a photo's bytes (rowfile.c) ------------------ */

typedef struct eng_row_ref {
    const char *root;      /* the root's recorded path: a folder, or a file root's file */
    const char *relpath;   /* inside it, '/'-separated; "" for a file root's file */
    int follow_symlinks;   /* the root's setting: its walks recorded photos through links */
    const cdb_db_file_meta *rec; /* the row: size, mtime_ns, dev, ino (0: unrecorded) */
} eng_row_ref;

typedef enum eng_open_rc {
    ENG_OPEN_OK = 0,
    ENG_OPEN_GONE,    /* nothing at the path (ENOENT, ENOTDIR): moved or deleted */
    ENG_OPEN_CHANGED, /* something else is there: a symbolic link (the photo or a folder
                         above it), a FIFO, socket, device or folder, another file, or
                         the file with another size or mtime */
    ENG_OPEN_ERROR    /* permission, I/O, no descriptors left: why says */
} eng_open_rc;

/* Opens the recorded photo ref names, read-only, never blocking and never following
** a link (unless the root follows them): *fd (the caller closes it, blocking mode)
** only when it is a regular file whose device, inode, size and mtime are the row's;
** *st (may be NULL) its fstat. Else *fd = -1 and why (may be NULL) gets a few words
** ("a FIFO now"). The walk and the rules: rowfile.c. Thread-safe. */
eng_open_rc cdb_eng_open_row(const eng_row_ref *ref, int *fd /* OUT */,
                             struct stat *st /* OUT, may be NULL */, char *why, size_t why_size);
/* cdb_eng_open_row of ok file id of db: *f the row (cdb_db_file_clear), *path (may be
** NULL; cdb_free) its full path, for showing only. CDB_NOTFOUND with E_UNKNOWN_ID (not
** an ok file), E_FILE_GONE or E_FILE_CHANGED (the message says to run reindex);
** CDB_IO when it cannot be opened. On failure nothing is left to free. */
cdb_status cdb_eng_open_file_id(cdb_db *db, int64_t id, cdb_db_file *f /* OUT */,
                                char **path /* OUT */, int *fd /* OUT */,
                                struct stat *st /* OUT, may be NULL */);

/* A thumbnail made while decoding (thumbs.c): JPEG bytes, heap. */
typedef struct eng_thumb {
    unsigned char *jpeg;
    size_t n;
    int32_t width, height;
} eng_thumb;
/* Decodes buf (decode: 0 exact, PIL's pixels; 1 fast, cdb_decode_mode; a photo of
** more than max_pixels pixels is refused, 0: CDB_IMAGE_DEFAULT_MAX_PIXELS) and
** preprocesses it into pixels (3 * pp->size^2); *width, *height: the image's full
** size after EXIF orientation. ns (may be NULL): += decode and preprocess ns.
** thumb_px > 0: also a thumbnail of the decoded image into *thumb (long side <=
** thumb_px); failing to make one is not a failure of the photo (thumb->jpeg NULL).
** pixels NULL: decode for the thumbnail only (no preprocessing). */
eng_readfail cdb_eng_decode_photo(const unsigned char *buf, size_t n, int apply_exif, int decode,
                              int64_t max_pixels, const cdb_preprocess_params *pp,
                              float *pixels /* OUT */, int32_t *width /* OUT */,
                              int32_t *height /* OUT */, int64_t ns[2],
                              int thumb_px, eng_thumb *thumb /* OUT, may be NULL */,
                              char *reason, size_t reason_size);
/* Reads fd, the recorded photo f of db opened the one way (cdb_eng_open_file_id; st
** its fstat), and decodes it for a picture of it: fast (a JPEG may shrink while its
** short side stays >= target), EXIF as its root says, the database's pixel limit.
** *img: cdb_image_free. On failure reason gets one line (files.c). */
cdb_status cdb_eng_decode_original(cdb_db *db, const cdb_db_file *f, int fd, const struct stat *st,
                                   int target, cdb_image **img /* OUT */, char *reason,
                                   size_t reason_size);
/* The MIME type of a file by its first bytes (static). */
const char *cdb_eng_mime(const unsigned char *head, size_t n);

/* ---- thumbnails (thumbs.c) ----------------------------------------------------------- */

/* A JPEG (quality 80) of img scaled down to long side <= px (area-averaged; never
** up). CDB_OK with the bytes in *t (heap: cdb_eng_thumb_clear). */
cdb_status cdb_eng_thumb_make(const cdb_image *img, int px, eng_thumb *t /* OUT */);
/* The same at another JPEG quality (1-100): the viewer's previews (preview.c). */
cdb_status cdb_eng_jpeg_make(const cdb_image *img, int px, int quality, eng_thumb *t /* OUT */);
void cdb_eng_thumb_clear(eng_thumb *t);
/* The thumbnail's size for a w x h image: long side min(px, itself), aspect kept. */
void cdb_eng_thumb_dims(int w, int h, int px, int *ow, int *oh);
/* img (any channels/bits: as thumbnails convert them) scaled by area averaging to
** ow x oh (each at most the image's, >= 1) packed 8-bit RGB into out (ow * oh * 3). */
cdb_status cdb_eng_thumb_scale(const cdb_image *img, int ow, int oh, uint8_t *out);

/* ---- the library: recorded roots (library.c) ----------------------------------------- */

typedef struct eng_root {
    int64_t id;
    char *path;            /* heap */
    int kind;              /* CDB_DB_ROOT_FOLDER | CDB_DB_ROOT_FILE */
    int follow_symlinks, no_exif;
    uint64_t dev_recorded; /* st_dev at its last scan (0: unknown) */
    uint64_t dev_now;      /* st_dev now (0: the path is not there) */
    cdb_db_root_ident ident_recorded; /* at its last complete scan (all 0: unknown) */
    cdb_db_root_ident ident_now;
    int exists;            /* the path exists now, with the recorded kind */
    int foreign;           /* it exists, but its folder is not the one recorded (an empty
                              mount point, another filesystem or folder): unavailable */
    int same_by_ident;     /* the folder was recognized by more than its device number
                              (so a new st_dev is the same filesystem renumbered) */
    int accepted;          /* the user said its folder as it is now is the truth
                              (reindex --accept-root): not foreign, never "empty" */
    int present;           /* exists and not foreign: the recorded folder is there */
} eng_root;

typedef struct eng_library {
    eng_root *r;
    int n;
    char *db_dir; /* the database folder's real path: never part of the library */
} eng_library;

/* One thing a run scans: a whole root, or a part of a folder root. */
typedef struct eng_target {
    int64_t root_id;
    const char *path;      /* the root's absolute path (a folder, or a file root's file) */
    int kind;              /* CDB_DB_ROOT_FOLDER | CDB_DB_ROOT_FILE */
    int follow_symlinks;   /* the root's settings */
    int no_exif;
    const char *sub;       /* NULL: the whole root; else a folder or file inside it
                              (relative path): only that part is walked, and only
                              that part's deleted files are marked deleted */
    int sub_is_file;
    int named;             /* the user named this one file: retried even if quarantined */
    int reencode;          /* the decode settings changed: every photo is encoded again */
} eng_target;

/* Reads the roots of db and stats each. Free with cdb_eng_library_free. */
cdb_status cdb_eng_library_load(cdb_db *db, eng_library *lib /* OUT */);
/* 1 when a folder with identity `now` (st_dev dev_now) is the root's recorded one
** (rec, dev_recorded; all 0: never recorded, anything goes); *strong: recognized by
** more than the device number, so a new st_dev is the same filesystem renumbered
** (after a reboot). The rule: library.c. */
int cdb_eng_root_matches(const cdb_db_root_ident *rec, uint64_t dev_recorded,
                         const cdb_db_root_ident *now, uint64_t dev_now, int *strong /* OUT */);
/* Marks the recorded root at path (as recorded, or its real path) accepted: its
** folder as it is now is the truth (reindex --accept-root). CDB_NOTFOUND when no
** root is recorded there. */
cdb_status cdb_eng_library_accept(eng_library *lib, const char *path);
void cdb_eng_library_free(eng_library *lib);
const eng_root *cdb_eng_library_root(const eng_library *lib, int64_t root_id); /* NULL: unknown */
/* 1 when the real path of `path` (a symbolic link, say) is in the library at its own
** path: inside a folder root, not under a hidden folder, not in the database folder;
** or a file root. */
int cdb_eng_library_covers(const eng_library *lib, const char *path);
/* 1 when the file recorded at path (root root_id, st_dev file_dev, 0 = unknown) is
** gone from a place that is still there: deleted, moved or renamed. Deleted needs
** evidence: the file is absent (ENOENT, ENOTDIR), its root is present (the recorded
** folder, not another one at its path) and the nearest folder above it that exists
** is on the filesystem the file was recorded on (its st_dev, or the root's recorded
** st_dev where the root was recognized under a new device number). 0 otherwise: it
** is there, nothing could be learnt (EACCES, EIO), or its place is not reachable (a
** drive or share inside the root that is not mounted). */
int cdb_eng_library_gone(const eng_library *lib, int64_t root_id, const char *path,
                     uint64_t file_dev);
/* Folds every root that lies inside a folder root into it (cdb_db_root_adopt; legacy
** databases could record both), then reloads lib. *n_adopted (may be NULL). */
cdb_status cdb_eng_library_normalize(cdb_db *db, int64_t model_id, eng_library *lib,
                                 int *n_adopted /* OUT */);
/* What `ingest PATH...` scans: each PATH (real, absolute; a folder or a regular
** file) is the whole of a recorded root, a part of one, or a new root; a new folder
** root adopts the roots inside it. follow, no_exif: -1 keep the roots' setting, else
** record it on every root named. Duplicates and PATHs inside another PATH are
** dropped; a PATH hidden inside a recorded folder is refused (CDB_INVALID). ev: where
** a warning goes. *targets: heap array of n_targets (cdb_eng_targets_free). */
cdb_status cdb_eng_library_resolve(cdb_db *db, int64_t model_id, eng_library *lib,
                               char *const *paths, const int *is_file, int n, int follow,
                               int no_exif, const cdb_engine_events *ev,
                               eng_target **targets /* OUT */, int *n_targets /* OUT */);
/* Every root, whole (reindex). */
cdb_status cdb_eng_library_all(const eng_library *lib, eng_target **targets /* OUT */,
                           int *n_targets /* OUT */);
void cdb_eng_targets_free(eng_target *t, int n);

/* ---- decoded pixels in flight (budget.c) ---------------------------------------------- */

typedef struct eng_budget {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int64_t limit;      /* pixels */
    int64_t in_flight, peak;
    int64_t n_waits;    /* decodes that had to wait for others to finish */
} eng_budget;
/* A quarter of the machine's memory (at least 256 MiB, at most 16 GiB), in pixels. */
int64_t cdb_eng_budget_default_pixels(void);
/* mb megabytes of decoded photos in pixels (0 for mb <= 0). */
int64_t cdb_eng_budget_pixels_of_mb(int64_t mb);
/* pixels <= 0: the default. */
void cdb_eng_budget_init(eng_budget *b, int64_t pixels);
void cdb_eng_budget_destroy(eng_budget *b);
/* Takes pixels, waiting while others' in flight plus these would pass the limit (a
** photo over the whole limit goes alone). Any thread. */
void cdb_eng_budget_take(eng_budget *b, int64_t pixels);
void cdb_eng_budget_give(eng_budget *b, int64_t pixels);

/* ---- the ingest pipeline (pipeline.c) ------------------------------------------------- */

typedef struct eng_ingest_opts {
    int batch;           /* images per encoder batch */
    int threads;         /* reader/decoder threads */
    int full;            /* reindex --full */
    const char *label;   /* progress label: "ingest", "reindex" */
    /* A later pass of one run, for another model's vectors: the first pass did the
    ** deletions, moves and root bookkeeping, and reported the walk's problems. */
    int secondary;
    int decode;           /* this pass's vector set: 0 exact, 1 fast (cdb_decode_mode) */
    int reencode;         /* this set's decode mode changed: every photo encoded again */
    int thumb_px;         /* thumbnails to make and backfill (long side), 0: none */
    int64_t max_pixels;   /* photos with more pixels are refused (the database's setting) */
    int64_t decode_budget;/* decoded pixels in flight across the readers; 0: the default */
    cdb_engine_encode_fn encode; /* NULL: cdb_encode_pixels */
    void *encode_ud;
    const cdb_engine_events *ev; /* progress, warnings, stop (may be NULL) */
} eng_ingest_opts;

/* Runs the pipeline over the targets with the writer handle db (opened on db_dir),
** encoding with model (registered as model_id); lib: the database's roots (link
** coverage, move sources). Fills *sum. Returns CDB_OK also when files failed
** (sum->errors, sum->retry) or when stopped (sum->interrupted); an error (message in
** cdb_errmsg) only when the run itself failed. */
cdb_status cdb_eng_pipeline_run(cdb_db *db, const char *db_dir, cdb_model *model, int64_t model_id,
                            const eng_library *lib, const eng_target *roots, int n_roots,
                            const eng_ingest_opts *o, cdb_engine_summary *sum /* OUT */);

/* ---- index glue (indexing.c) ----------------------------------------------------------- */

/* <db>/index/model_<id>.cdbidx */
void cdb_eng_index_path(cdb_db *db, int64_t model_id, char *buf, size_t size);

typedef struct eng_fetch_ctx {
    cdb_db *db;
    int64_t model_id;
    int dim;
    int n_unreadable; /* ids whose shard is missing or damaged (left out); one thread */
} eng_fetch_ctx;
/* cdb_index_fetch_fn over the store (ctx: eng_fetch_ctx). */
cdb_status cdb_eng_fetch_vectors(void *ctx, const int64_t *ids, size_t n, uint16_t *vecs,
                             uint8_t *found);
/* Every stored vector of the model, fp16, in id order. Heap arrays (free()).
** n_unreadable NULL: an unreadable shard fails the call (index builds, verify); else
** its vectors are left out and the shards left out counted (searches). */
cdb_status cdb_eng_read_all_vectors(cdb_db *db, int64_t model_id, int dim, int64_t **ids /* OUT */,
                                    uint16_t **vecs /* OUT */, int64_t *n /* OUT */,
                                    int *n_unreadable /* OUT, may be NULL */);
/* Sorted, distinct ids whose vectors were added (removed = 0) or removed (1)
** after generation `since`. Heap (free()). */
cdb_status cdb_eng_ids_since(cdb_db *db, int64_t model_id, int64_t since, int removed,
                         int64_t **ids /* OUT */, size_t *n /* OUT */);

typedef struct eng_index_result {
    int action;        /* 0 none (up to date), 1 added, 2 rebuilt */
    int64_t n_vectors; /* covered after */
    int64_t n_added;
    int64_t n_removed; /* deleted or changed vectors taken out */
    double seconds;
    char why[256];
    cdb_index_info info;
} eng_index_result;
/* Builds the model's index from the store and saves it (kind: cdb_index_kind). */
cdb_status cdb_eng_index_build(cdb_db *db, int64_t model_id, int dim, int kind,
                           eng_index_result *res /* OUT */);
/* Brings the index up to date (adds or rebuilds, as the index module decides;
** creates it when missing and there are vectors). */
cdb_status cdb_eng_index_refresh(cdb_db *db, int64_t model_id, int dim, int force_rebuild,
                             eng_index_result *res /* OUT */);
/* Every model's index after files went away (their removals are logged); a failure
** is warned about (searches stay correct): returns 1 then, else 0; -1 when the
** models cannot be listed (errmsg set). */
int cdb_eng_refresh_all_indexes(cdb_db *db, const cdb_engine_events *ev);

/* ---- the deep check (deep.c) --------------------------------------------------------- */

typedef struct eng_deep_info {
    int64_t n_files, n_hashed, n_encoded, n_stale, n_gone, n_unreadable;
    int64_t max_ulp; /* largest element difference among the re-encoded vectors */
} eng_deep_info;
/* Re-reads every ok file and compares its bytes with the recorded hash, and
** re-encodes a sample (the files whose id hashes below `sample`, the same sample
** every time) with model m (the database's model_id), comparing the vector with the
** stored one: equal within one fp16 ulp per element, or 2^-20 near zero (the CPU
** encoder is batch- and thread-invariant on one ISA path, but a vector may have been
** stored by another path or by CUDA, so bit-equality cannot be asked). Problems are
** added to r (CDB_DB_FILE_CHANGED, CDB_DB_VECTOR_MISMATCH, each naming the path);
** informational counts go to *info (may be NULL). Files whose stat changed since
** they were stored are stale, not problems (the next reindex updates them). */
cdb_status cdb_eng_deep_check(cdb_db *db, cdb_model *m, int64_t model_id, double sample,
                          cdb_db_report *r, const cdb_engine_events *ev,
                          eng_deep_info *info /* OUT */);

/* ---- the handle (engine.c) -------------------------------------------------------------- */

/* A loaded model, kept until the handle closes. */
/* Concurrent text queries encoded together (textbatch.c). */
typedef struct eng_textbatch {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct tb_req *head, **tail; /* waiting, in arrival order */
    int leaders, max_leaders;    /* batches being encoded; at most one per core */
} eng_textbatch;

typedef struct eng_model {
    char *spec;          /* the model path it was asked by; NULL: the database's default */
    int64_t model_id;
    int vision, text;    /* the towers loaded */
    int threads;         /* the model's threads (0: every core) */
    pthread_mutex_t encode_mu; /* several threads per encode: one encode at a time, so
                                  that concurrent requests do not oversubscribe the cores */
    struct eng_qcache *qcache; /* recent text queries' vectors (search.c) */
    eng_textbatch tbatch;      /* its text encodes (textbatch.c) */
    cdb_model *m;
    cdb_db_model dm;
    struct eng_model *next;
} eng_model;

/* The catalog's files as a commit leaves them (engine.c). */
typedef struct eng_db_state {
    uint64_t cat_ino;
    int64_t cat_size, cat_mtime_ns, wal_size, wal_mtime_ns;
    int shm;
} eng_db_state;

/* A database reader for one thread at a time (the pool). */
typedef struct eng_reader {
    cdb_db *db;
    eng_db_state at_open; /* reopened when the database changed since (reader_stale) */
    int64_t gen_at_open;  /* the catalog's generation then */
    struct eng_reader *next;
} eng_reader;

typedef struct eng_vset eng_vset;     /* search.c */
typedef struct eng_search_state {     /* per vector set searched */
    int64_t model_id;
    pthread_mutex_t mu;  /* serializes refreshes of cur */
    eng_vset *cur;
    int warned_ix;       /* the unusable index was warned about */
    struct eng_search_state *next;
} eng_search_state;

struct cdb_engine {
    char *dir;
    cdb_engine_params p;
    char *fallback_model;
    cdb_db *db;          /* the handle's own: writer, or reader for exclusive calls */
    pthread_mutex_t mu;  /* guards the lists below */
    pthread_mutex_t load_mu; /* one model load at a time */
    eng_reader *idle;    /* readers not in use */
    eng_model *models;
    eng_search_state *searches;
    pthread_mutex_t preview_mu; /* previews decoding now: at most CDB_ENGINE_PREVIEW_DECODES */
    pthread_cond_t preview_cv;
    int n_previewing;
};

/* A reader for this thread's call (reopened when an immutable snapshot went stale);
** give it back with cdb_eng_reader_put. */
cdb_status cdb_eng_reader_get(cdb_engine *e, eng_reader **out /* OUT */);
void cdb_eng_reader_put(cdb_engine *e, eng_reader *r);
/* Whether a writer committed since r was opened. What r read meanwhile may mix
** files read live with files read as snapshots from before the commit (a shard no
** writer had open yet): such a result serves its request but is not kept. */
int cdb_eng_reader_changed(const cdb_engine *e, const eng_reader *r);
/* Closes r instead of giving it back (a reader whose reads went wrong). */
void cdb_eng_reader_discard(eng_reader *r);
/* The default model's record, or the one registered under the weights of the model
** at path (loaded with the towers asked for, kept). *m: NULL unless towers were asked.
** Errors as cdb_engine_load_model. db: the caller's handle. */
cdb_status cdb_eng_model_get(cdb_engine *e, cdb_db *db, const char *path, int vision, int text,
                         int threads /* -1: model_threads */, eng_model **out /* OUT */);
/* Loads the registered model dm from the path recorded with it (or the fallback model
** when that has the same weights): E_WEIGHTS_MISSING. quiet: only CDB_NOTFOUND, no
** message. */
cdb_status cdb_eng_load_db_model(cdb_engine *e, cdb_db *db, const cdb_db_model *dm, int vision,
                             int text, int quiet, cdb_model **out /* OUT */);
/* A model spec (number, name, hash prefix, path) to its record. */
cdb_status cdb_eng_find_db_model(cdb_engine *e, cdb_db *db, const char *spec,
                             cdb_db_model *out /* OUT */);
/* The info JSON stored with a model at registration (path, name, hash, dims); free(). */
char *cdb_eng_model_info_json(const char *path, const cdb_model *m);
void cdb_eng_model_to_public(const cdb_db_model *dm, cdb_engine_model *out /* OUT */);
/* The threads a search encodes its query with: with example images model_threads (0:
** every core); texts alone on one (what the CLI always did). The same rule for the
** CLI and a server's request threads, so they compute the same query vectors. */
int cdb_eng_search_threads(const cdb_engine *e, cdb_db *db, const char *spec, int images);
/* Gives this thread the OpenMP thread count BLAS sizes its GEMMs by (0: every core),
** before an encode on a thread the engine did not start. */
void cdb_eng_bind_threads(int threads);
/* The writer handle (CDB_INVALID on a reader engine). */
cdb_status cdb_eng_writer(cdb_engine *e, const char *what);

/* search.c: frees every vector set's search state; a model slot's query cache. */
void cdb_eng_search_states_free(cdb_engine *e);
struct eng_qcache;
void cdb_eng_qcache_free(struct eng_qcache *c);

/* textbatch.c: texts[n] encoded (L2-normalized) into out (n * embed_dim) with the
** texts of concurrent calls in one batch; the same bits as alone. Thread-safe. */
void cdb_eng_textbatch_init(eng_textbatch *tb, int max_batches /* 0: one per core */);
void cdb_eng_textbatch_destroy(eng_textbatch *tb);
cdb_status cdb_eng_encode_texts(eng_model *mod, const char *const *texts, int n,
                                float *out /* OUT n * dim */);

#endif /* CDB_ENGINE_INT_H */
