/*
** base.h: the ground of engine/, under every part: the handle (its reader pool, its
** model cache), the error conventions of every public call, the events a call reports
** through. Not a module contract: nothing outside engine/ includes it (engine.h is).
**
** - errors.c: errors, events, threads.
** - handle.c: opening and closing the handle, the reader pool, the writer.
** - models.c: the models a handle has loaded, finding and loading a database's models.
** - grow.c: the arrays the engine collects rows into.
*/
#ifndef CDB_ENGINE_BASE_H
#define CDB_ENGINE_BASE_H

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
#include "output/output.h" /* cdb_out_fmt_count: counts in messages as the CLI prints them */

/* ---- errors (errors.c) ------------------------------------------------------------ */

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
/* 1 when rc (with the current errmsg) means the disk is full. */
int cdb_eng_disk_full(cdb_status rc);

/* ---- events (errors.c) ------------------------------------------------------------------- */

void cdb_eng_warn(const cdb_engine_events *ev, const char *fmt, ...) CDB_PRINTF(2, 3);
int cdb_eng_should_stop(const cdb_engine_events *ev); /* polls ev->should_stop (calling thread) */
void cdb_eng_progress(const cdb_engine_events *ev, cdb_engine_phase ph, const char *label,
                  int64_t done, int64_t total, int64_t errors);

/* ---- arrays (grow.c) ------------------------------------------------------------------ */

/* Room in *p, an array of *cap elements of elem bytes, for one more after its first n:
** 0, or -1 when out of memory (*p and *cap kept). The room doubles (from 16). */
int cdb_eng_grow(void **p, size_t *cap, size_t n, size_t elem);

/* Rows collected one at a time (in a catalog callback): v holds n of them, the caller's
** type. oom is sticky: set when a row found no memory (the caller then fails). */
typedef struct eng_rows {
    void *v;
    size_t n, cap;
    int oom;
} eng_rows;
/* Room for one more row of elem bytes at the end: its address (zeroed, counted in n), or
** NULL with oom set. */
void *cdb_eng_rows_add(eng_rows *r, size_t elem);

/* ---- the database folder (handle.c) ---------------------------------------------- */

/* CDB_OK when this user (the effective ids) may write what a writer of the database
** at dir writes (index_only: what 'index build' writes: index/, or the folder when
** there is none yet); else CDB_IO with E_READ_ONLY and a message that names the first
** folder or file that is not writable, and why (a read-only filesystem, or this user,
** named). A dir without catalog.db passes: opening it says there is no database. */
cdb_status cdb_eng_check_writable(const char *dir, int index_only);
/* The login name of uid into buf ("uid N" when it has none). */
void cdb_eng_user_name(unsigned uid, char *buf, size_t size);

/* ---- the handle (handle.c, models.c) -------------------------------------------------------- */

/* A loaded model, kept until the handle closes. */
/* Concurrent text queries encoded together (search/textbatch.c). */
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
    struct eng_qcache *qcache; /* recent text queries' vectors (search/search.c) */
    eng_textbatch tbatch;      /* its text encodes (search/textbatch.c) */
    cdb_model *m;
    cdb_db_model dm;
    struct eng_model *next;
} eng_model;

/* The catalog's files as a commit leaves them (handle.c). */
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

struct eng_search_state; /* a vector set's search state (search/search.h) */

struct cdb_engine {
    char *dir;
    cdb_engine_params p;
    char *fallback_model;
    cdb_db *db;          /* the handle's own: writer, or reader for exclusive calls */
    pthread_mutex_t mu;  /* guards the lists below */
    pthread_mutex_t load_mu; /* one model load at a time */
    eng_reader *idle;    /* readers not in use */
    eng_model *models;
    struct eng_search_state *searches;
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

/* A model slot's text batcher, initialized and destroyed with the slot (models.c). */
void cdb_eng_textbatch_init(eng_textbatch *tb, int max_batches /* 0: one per core */);
void cdb_eng_textbatch_destroy(eng_textbatch *tb);
/* Opening and closing the handle alone (the façade, engine.c, adds what the parts do
** at open and close): CDB_OK with *out, or the "what (why)" failure. Closing frees
** the readers and the handle; the models go first (cdb_eng_models_free). */
cdb_status cdb_eng_handle_open(const char *dir, const cdb_engine_params *p,
                               cdb_engine **out /* OUT */);
void cdb_eng_handle_close(cdb_engine *e);
/* Closes every model the handle loaded (models.c). */
void cdb_eng_models_free(cdb_engine *e);

#endif /* CDB_ENGINE_BASE_H */
