/*
** pipeline_int.h: what the two halves of the ingest pipeline share (engine/ only):
** pipeline.c runs the stages (readers, encoder, writer) and the driver; scan.c is
** the walker's side (targets, change checks, walk problems, the deletion pass, the
** roots' bookkeeping). The job and the context below are their whole interface.
**
** Every job carries its own root id, relative path and full path from the walk to
** the shard: no stage looks a path up in shared state that changes as the walk
** moves on (the corruption of issue 13: two folders with the same file names).
*/
#ifndef CDB_ENGINE_PIPELINE_INT_H
#define CDB_ENGINE_PIPELINE_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "engine/engine_int.h"

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
    float *pixels;        /* R_IMAGE, before encoding */
    float *vec;           /* R_IMAGE, after encoding */
    int thumb_only;       /* the walker found it unchanged but without its thumbnail */
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
    int enc_batch;        /* items per encoder call: o->batch, halved for the rest of the
                             run when the device runs out of memory (cdb_k_run_batched) */
    eng_budget budget;    /* decoded pixels in flight across the readers */
    pthread_mutex_t mu;   /* guards claimed[], seen, fatal */
    int64_t *claimed;     /* file ids taken by a move in this run */
    int n_claimed, cap_claimed;
    cdb_status fatal_rc;  /* the first fatal error, kept with its status */
    char fatal[512];
    eng_devino_set *walked_dirs, *walked_files; /* shared by the run's walks (walk.c) */
    uint8_t *seen;        /* bitset of catalog file ids met by the walk or moved by this
                             run (under mu: the walker and the writer both mark) */
    int64_t seen_bits;
    int64_t max_id_before;/* ids above it were created by this run */
} pipe_ctx;

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

#endif /* CDB_ENGINE_PIPELINE_INT_H */
