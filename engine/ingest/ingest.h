/*
** ingest.h: the ingest part of engine/, over library/, search/ and base/: ingest and
** reindex as library calls (run.c), the pipeline that runs them, the walk.
**
** - run.c:      ingest and reindex: one pipeline pass per vector set, the run record;
**               the ingest PATHs checked.
** - pipeline.c: the stages (readers, encoder, writer) and the driver.
** - scan.c:     the walker's side (targets, change checks, walk problems, the deletion
**               pass, the roots' bookkeeping).
** - job.c:      the job and the pipeline's context, all the two halves share.
** - walk.c:     walking a folder root.
** - queue.c:    the bounded queues between the pipeline's stages.
** - budget.c:   decoded pixels in flight.
**
** Every job carries its own root id, relative path and full path from the walk to
** the shard: no stage looks a path up in shared state that changes as the walk
** moves on (the corruption of issue 13: two folders with the same file names).
*/
#ifndef CDB_ENGINE_INGEST_H
#define CDB_ENGINE_INGEST_H

#include <pthread.h>
#include <stdatomic.h>

#include "engine/library/library.h"

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
    const char *path;         /* the full path (the one stat'ed), borrowed likewise; may be
                                 NULL with error */
    int64_t size, mtime_ns, ctime_ns;
    uint64_t dev, ino;
    const char *error;        /* non-NULL: this entry could not be walked (err = errno) */
    int err;
    int dangling;             /* with error: a symbolic link whose target is not there */
} eng_walk_entry;

/* cdb_eng_path_under, strictly, of path and dir resolved first (links followed); 0
** also when either cannot be resolved (walk.c). */
int cdb_eng_path_inside(const char *path, const char *dir);

typedef struct eng_walk_stats {
    int64_t n_files, n_dirs, n_hidden, n_links_skipped, n_loops, n_special, n_errors;
    int64_t n_links_covered; /* followed links not entered: the target is in the library */
    int64_t n_same_file;     /* files met again under another name (links, hard links) */
    int64_t n_excluded;      /* entries left out by rules (.clipdbignore, --exclude, forget) */
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
    /* The root's stored rules (cdb_db_root_excludes: --exclude, forgotten subfolders),
    ** or NULL; prefix: the walked folder's path relative to the root (NULL: the root).
    ** The walk adds the rules of every .clipdbignore file it meets (and of those in the
    ** folders between the root and the walked folder) and leaves out what either says
    ** is excluded, never entering a left-out folder (ignore/ignore.h). */
    const struct cdb_ignore *rules;
    const char *prefix;
    /* Called (when set) with the folder, relative to the root, of each .clipdbignore file
    ** the walk reads (rel borrowed for the call): what `folders` lists. */
    void (*on_ignore_file)(const char *rel, void *ud);
    void *ignore_ud;
} eng_walk_opts;

/* Walks root (a folder) as described in walk.c; in skip_dir itself, the database's own
** entries are left out (cdb_db_owns_name). Returns 0 when done, 1 when fn stopped it,
** 2 when root lies inside skip_dir (nothing walked), -1 when root cannot be read (errno). */
int cdb_eng_walk(const char *root, const eng_walk_opts *o, eng_walk_fn fn, void *ud,
             eng_walk_stats *st /* OUT */);

/* ---- decoded pixels in flight (budget.c) ---------------------------------------------- */

typedef struct eng_budget {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int64_t limit;      /* pixels */
    int64_t in_flight, peak;
    int64_t n_waits;    /* decodes that had to wait for others to finish */
    int64_t kept, kept_limit, kept_peak; /* bytes of images kept for the device */
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
/* Decoded images kept for the device transform (a GPU ingest) wait in the encoder's
** batch after their decode has given its pixels back: they are bounded by a pool of
** their own, half the budget's bytes. Keeping never waits (a reader that waited on the
** encoder while the encoder waited for a fuller batch would deadlock): 1 when bytes fit
** and are counted, 0 when the image must be preprocessed on the CPU instead. */
int cdb_eng_budget_keep(eng_budget *b, int64_t bytes);
void cdb_eng_budget_unkeep(eng_budget *b, int64_t bytes); /* once the image is encoded */

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
    int part_index, part_count; /* the share walked (cdb_db_part_of); 0/0: every file */
} eng_ingest_opts;

/* Runs the pipeline over the targets with the writer handle db (opened on db_dir),
** encoding with model (registered as model_id); lib: the database's roots (link
** coverage, move sources). Fills *sum. Returns CDB_OK also when files failed
** (sum->errors, sum->retry) or when stopped (sum->interrupted); an error (message in
** cdb_errmsg) only when the run itself failed. */
cdb_status cdb_eng_pipeline_run(cdb_db *db, const char *db_dir, cdb_model *model, int64_t model_id,
                            const eng_library *lib, const eng_target *roots, int n_roots,
                            const eng_ingest_opts *o, cdb_engine_summary *sum /* OUT */);

typedef enum job_kind {
    R_IMAGE = 1, /* decoded; pixels, then vec */
    R_ERROR,     /* permanent failure: reason (quarantined) */
    R_RETRY,     /* transient failure: reason (left pending, retried next run) */
    R_KEEP,      /* transient failure of a file whose row is current: nothing to write */
    R_TOUCH,     /* same content, new metadata (or a first identity: RESTAT) */
    R_MOVE,      /* content of file move_from, now at (root_id, relpath) */
    R_SKIP,      /* not an image */
    R_GONE,      /* vanished between the walk and the read: the deletion pass decides */
    R_THUMB      /* an unchanged ok file whose thumbnail was missing: thumb (may be empty) */
} job_kind;

/* One file's trip through the pipeline (job, then result: the same struct). */
typedef struct job {
    int64_t root_id;
    char *relpath;        /* heap; "" for a file root's file */
    char *path;           /* heap: the full path, what the readers open */
    int64_t file_id;      /* catalog row at this path (0: none) */
    int was_ok;           /* that row was ok (so a re-encode counts as "changed") */
    int was_pending;      /* that row was pending (it may hold a vector already) */
    int for_model;        /* ok, but no vector of this model yet: "added" */
    int row_current;      /* the walk's stat equals the row's and the row is ok */
    int has_old_hash;
    uint8_t old_hash[CDB_DB_HASH_BYTES];
    int sniff;            /* not an image extension: check the magic bytes first */
    int no_exif;          /* the root's setting: decode without the EXIF orientation */
    cdb_db_file_meta meta;
    job_kind kind;        /* 0 until a reader decides (R_TOUCH when the walker does) */
    int64_t move_from;    /* R_MOVE: the file id that moved */
    char reason[256];     /* R_ERROR, R_RETRY */
    float *pixels;        /* R_IMAGE, before encoding: preprocessed here, or NULL and */
    cdb_image *img;       /* the decoded image, transformed on the device, or NULL and */
    int64_t img_bytes;    /* img's bytes, counted in the budget's pool of kept images */
    unsigned char *file;  /* the file's bytes, decoded by nvJPEG (file_len bytes) */
    size_t file_len;
    float *vec;           /* R_IMAGE, after encoding */
    int thumb_only;       /* the walker found it unchanged but without its thumbnail or
                             its metadata: re-read, not encoded (R_THUMB) */
    int want_thumb;       /* thumb_only: its thumbnail is missing (decode for it) */
    int want_photo;       /* thumb_only: its metadata was never read (parse the bytes) */
    int has_photo;        /* photo holds what its bytes say (R_IMAGE, R_THUMB) */
    cdb_photo_meta photo;
    eng_phash phash;      /* with photo: its perceptual hash, when computed */
    int real_photo;       /* R_IMAGE: no mark of the generated world (a real photo) */
    eng_thumb thumb;      /* R_IMAGE, R_THUMB: made from the decoded image (may be empty) */
} job;

/* Per target: what its walk found and could not read. */
typedef struct target_state {
    int walked;           /* walked to the end: its deletion pass may run */
    int64_t n_found;      /* regular files met */
    int64_t n_met;        /* visible entries of any kind the walk met (files, folders,
                             links, FIFOs, files met again under another name, entries
                             it could not read): 0 is an empty folder */
    cdb_db_walk_problem *probs; /* relpath/reason heap */
    unsigned char *shields; /* per problem: 1 when rows at or under its relpath are kept */
    int n_probs, cap_probs;
    char **ignores;       /* the folders whose .clipdbignore the walk read (heap) */
    int n_ignores, cap_ignores;
    int ignores_oom;      /* one was lost: the recorded list is left as it was */
} target_state;

typedef struct pipe_ctx {
    cdb_db *db;           /* writer handle (writer thread, then the deletion pass) */
    const char *db_dir;
    cdb_model *model;
    int64_t model_id;
    const eng_library *lib;
    const eng_ingest_opts *o;
    const cdb_preprocess_params *pp;
    int dim;
    const eng_target *targets;
    int n_targets;
    target_state *ts;
    int cur;              /* target being walked */
    cdb_db *rdb;          /* walker's read-only handle */
    int in_walk;          /* the walker holds a read snapshot of rdb (scan.c) */
    int n_snapshot;       /* files looked up in the current snapshot */
    struct scan_level *levels; /* the walk's folders whose rows are read, from the root to
                                  the current one (scan.c's merge join) */
    int n_levels, cap_levels;
    int64_t *photo_missing; /* ok files without a current metadata row (sorted; the
                             walker's, loaded at its first look: cdb_scan_needs_photo) */
    int64_t n_photo_missing;
    int photo_missing_loaded;
    eng_queue *q1, *q2, *q3;
    cdb_engine_summary *sum;
    const cdb_engine_events *ev; /* progress, warnings, stop (calling thread only) */
    const char *label;           /* the progress label */
    int64_t prog_total;          /* -1 while unknown */
    atomic_int stop;             /* the caller asked to stop (polled on the calling thread) */
    /* counters shared by the threads */
    atomic_llong n_done, n_errors, n_found;
    atomic_int abort;     /* a fatal error: stop everything */
    atomic_int readers_left, writer_done;
    /* stage times (ns): readers add up; the walker, encoder and writer own theirs */
    atomic_llong ns_read, ns_decode, ns_preprocess;
    int64_t ns_walk_blocked, ns_encode, ns_encode_wait, ns_store, n_batches;
    int dev_pp;           /* the model transforms images on its device: readers keep
                             decoded images (cdb_model_transforms_on_device) */
    int dev_jpeg;         /* ... and decodes JPEGs there: readers keep the bytes of the
                             JPEGs nvJPEG takes (fast mode; thumbnails from a DCT-scaled
                             CPU decode) */
    int enc_batch;        /* items per encoder call: o->batch, halved for the rest of the
                             run when the device runs out of memory (cdb_k_run_batched) */
    eng_budget budget;    /* decoded pixels in flight across the readers */
    atomic_llong n_kept;  /* images kept decoded for the device transform */
    pthread_mutex_t mu;   /* guards claimed[], seen, fatal */
    int64_t *claimed;     /* file ids taken by a move in this run */
    int n_claimed;
    size_t cap_claimed;
    cdb_status fatal_rc;  /* the first fatal error, kept with its status */
    char fatal[512];
    eng_devino_set *walked_dirs, *walked_files; /* shared by the run's walks (walk.c) */
    uint8_t *seen;        /* bitset of catalog file ids met by the walk or moved by this
                             run (under mu: the walker and the writer both mark) */
    int64_t seen_bits;
    int64_t max_id_before;/* ids above it were created by this run */
} pipe_ctx;

/* ---- the job and the context (job.c) ---- */

/* The first fatal error wins; everything stops. Returns rc. */
cdb_status cdb_pipe_fatal(pipe_ctx *c, cdb_status rc, const char *fmt, ...) CDB_PRINTF(3, 4);
/* 1 once the run must stop: asked to (events.should_stop) or a fatal error. Any thread. */
int cdb_pipe_stopping(pipe_ctx *c);
/* Polls events.should_stop and reports progress. The calling thread only. */
void cdb_pipe_tick(pipe_ctx *c);
void cdb_job_free(job *j);

/* scan.c */
/* Records that file id is accounted for by this run (met by the walk, or moved to
** a path it met): the deletion pass leaves it alone. Thread-safe. */
void cdb_scan_mark_seen(pipe_ctx *c, int64_t id);

/* Walks every target (the calling thread), queueing jobs on c->q1. */
void cdb_scan_walk_all(pipe_ctx *c);
/* After the stages have drained: deletions, walk problems and root statuses (first
** pass only). Returns CDB_OK or the error that stopped it (also set as fatal). */
cdb_status cdb_scan_finish(pipe_ctx *c);
/* Files the walks will meet (for the progress line's total). */
int64_t cdb_scan_count_files(const pipe_ctx *c);
void cdb_scan_free(pipe_ctx *c);

#endif /* CDB_ENGINE_INGEST_H */
