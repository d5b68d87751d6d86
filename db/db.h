/*
** db.h: clipdb's on-disk database (catalog + SQLite shards). The module's whole
** public contract; the layout, invariants and write order are in db/README.md.
**
** A database is a directory:
**     catalog.db       meta, models, roots, files, shards, runs, the vector directory
**     shards/NNNN.db   vectors: (model_id, file_id) -> fp16 blob, dim*2 bytes LE
**     lock             the writer lock (holds the writer's pid)
**
** Writes go through batches (cdb_db_batch_*). A commit runs the crash-safe write
** order of DESIGN.md: (1) one catalog transaction marks the batch's files pending,
** assigns shards and takes back the directory's claims to the vectors step 2 deletes
** or replaces with other content, (2) one transaction per touched shard upserts/
** deletes the vectors, (3) one catalog transaction marks them ok/error/deleted and
** records the vector sequence numbers. A crash at any point leaves at most `pending` rows; the
** next run lists them (cdb_db_files_foreach with CDB_DB_MASK_PENDING) and redoes
** them, and the upserts are idempotent.
**
** Threading: a cdb_db handle is used by one thread at a time (open one handle per
** thread). Any number of reader handles (params.readonly) may be open, in any
** processes, while one writer handle writes: readers never block and are never
** blocked (SQLite WAL). Only one writer handle per database exists at a time (lock
** file); a second fails at once with CDB_BUSY naming the holder's pid, or waits.
** Do not fork() while a writer handle is open (the child would share its lock).
** SQLITE_BUSY never escapes: it is retried with backoff for params.busy_timeout_ms
** and then reported as CDB_BUSY.
**
** Errors: every call returns cdb_status; SQLite's own message goes to cdb_errmsg().
*/
#ifndef CDB_DB_H
#define CDB_DB_H

#include <stddef.h>
#include <stdint.h>

#include "core/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Catalog schema version this build writes. A database with a larger version
** (written by a newer clipdb) is refused with CDB_VERSION and left untouched; a
** smaller one is migrated forward when opened by a writer. */
#define CDB_DB_SCHEMA_VERSION 10
#define CDB_DB_SHARD_SCHEMA_VERSION 1
#define CDB_DB_DEFAULT_SHARD_CAPACITY ((int64_t)256 << 20) /* bytes */

typedef struct cdb_db cdb_db;
typedef struct cdb_db_batch cdb_db_batch;
typedef struct cdb_db_iter cdb_db_iter;

/* ---- open / close ------------------------------------------------------------ */

typedef enum cdb_db_sync {
    /* fsync every commit of catalog and shards (SQLite synchronous=FULL): a power
    ** loss at any moment also keeps the write order on disk, so it can never leave
    ** an ok file without its vector. Slower: three fsyncs per batch commit. */
    CDB_DB_SYNC_FULL = 0,
    /* synchronous=NORMAL, the default (cdb_db_params_default): safe against kill -9
    ** and crashes of clipdb (nothing committed is lost, the write order holds).
    ** Commits are made durable at checkpoints and by cdb_db_flush, which
    ** cdb_db_run_finish and cdb_db_close (writer) call: a finished run is power-
    ** safe. A power loss or OS crash *during* a run may roll the catalog and a
    ** shard back independently; cdb_db_verify finds that and cdb_db_repair fixes it
    ** (db/README.md). */
    CDB_DB_SYNC_NORMAL = 1
} cdb_db_sync;

typedef struct cdb_db_params {
    int create;          /* 1: create the directory and catalog if absent (writer only) */
    int readonly;        /* 1: reader handle: takes no lock, never writes, and opens every
                            file read-only (SQLite mode=ro), so it works on a database
                            whose files or folder are not writable by this user or are
                            on a read-only mount. When such a database has no -shm file
                            (no writer has it open: SQLite cannot share a WAL index it
                            cannot create) it is opened immutable=1, a snapshot of the
                            database files; nothing is ever created there. */
    int lock_wait_ms;    /* writer lock: 0 fail at once (default), > 0 wait up to, -1 forever */
    int busy_timeout_ms; /* bounded retry with backoff on SQLITE_BUSY; 0 = 10000. A reader
                         ** retries a file that reads as malformed for min(this, 2 s) */
    int64_t shard_capacity_bytes; /* soft bound per shard; 0 = value stored at creation
                                     (CDB_DB_DEFAULT_SHARD_CAPACITY unless set then) */
    cdb_db_sync sync;    /* CDB_DB_SYNC_NORMAL (cdb_db_params_default) | CDB_DB_SYNC_FULL;
                            note a zeroed struct means FULL */
} cdb_db_params;

cdb_db_params cdb_db_params_default(void); /* p == NULL also means defaults */

/* Opens (or with p->create, creates) the database directory `dir`.
** Returns CDB_NOTFOUND when there is no database there and !create; CDB_BUSY
** when another writer holds the lock (message names its pid) and the wait ran out;
** CDB_VERSION when the database was written by a newer clipdb (nothing is
** changed) or, for a reader, when it needs a migration a writer must do first;
** CDB_CORRUPT when catalog.db is not a clipdb catalog; CDB_IO on file errors.
** A lock left by a killed process is taken over (logged at INFO). */
cdb_status cdb_db_open(const char *dir, const cdb_db_params *p, cdb_db **out /* OUT */);
/* Closes the handle and releases the writer lock. Free the handle's batches and
** iterators first. NULL is fine. */
void cdb_db_close(cdb_db *db);

/* Makes everything this writer committed so far durable against power loss:
** fsyncs the catalog's and every written shard's WAL and database files and the
** directories, shards first. With CDB_DB_SYNC_FULL every commit already is; with
** CDB_DB_SYNC_NORMAL call it at the end of a unit of work (cdb_db_run_finish and
** cdb_db_close do). Cheap when this handle wrote nothing since the last flush (no
** fsync at all). A no-op (CDB_OK) on readers. CDB_IO when an fsync fails. */
cdb_status cdb_db_flush(cdb_db *db);

/* The directory this handle was opened on (borrowed; lives as long as db). */
const char *cdb_db_dir(const cdb_db *db);
/* The database's identity, made when it was created (copies of its folder share it). */
const char *cdb_db_uuid(const cdb_db *db);
/* 1 when name, an entry of a database folder, is one of the database's own files or
** folders (catalog, shards, thumbnails, indexes, the lock, SQLite's -wal/-shm), which
** a walker of that folder must leave alone; 0 for anything else (photos kept there). */
int cdb_db_owns_name(const char *name);
int cdb_db_is_readonly(const cdb_db *db);

/* Pid recorded in dir's lock file (0 when none); for messages like "ingest running
** as pid N". *held is 1 when a live writer currently holds the lock. */
cdb_status cdb_db_lock_info(const char *dir, int *pid /* OUT */, int *held /* OUT */);

/* ---- content hash -------------------------------------------------------------- */

#define CDB_DB_HASH_BYTES 16
/* XXH3-128 of buf, canonical (big-endian) byte order, as stored in files.hash. */
void cdb_db_hash_buf(const void *buf, size_t n, uint8_t out[CDB_DB_HASH_BYTES]);
/* The part (1..n) of an n-way partition (`ingest --part I/N`) that owns the file at
** relpath under root (both as recorded: bytes, NUL-terminated): with h the first 8
** bytes, big-endian, of XXH3-128 over root's bytes, one 0x00 byte and relpath's bytes
** (the high 64 bits of XXH3-128; Python: int.from_bytes(xxhash.xxh3_128_digest(root +
** b"\0" + relpath)[:8], "big")), the part is h % n + 1. Stable across machines and
** runs; 1 when n <= 1; 0 when out of memory. */
int cdb_db_part_of(const char *root, const char *relpath, int n);

/* ---- models ---------------------------------------------------------------------- */

typedef struct cdb_db_model {
    int64_t id;
    char weights_hash[80]; /* as given at registration (e.g. hex XXH3-128 of weights) */
    char name[128];
    int dim;
    int is_default;
    int decode;            /* how its photos are decoded: 0 exact, 1 fast (cdb_decode_mode) */
    int decode_settled;    /* 0: the mode changed and not every vector is made with it yet */
} cdb_db_model;

/* Get-or-create the model with this weights hash. The first model registered
** becomes the default. info_json (may be NULL) is stored verbatim. Returns
** CDB_DIM_MISMATCH if the hash is known with another dim, CDB_UNSUPPORTED beyond
** CDB_DB_MAX_MODELS models. Writer only. */
#define CDB_DB_MAX_MODELS 64
cdb_status cdb_db_model_register(cdb_db *db, const char *weights_hash, const char *name,
                                 int dim, const char *info_json, int64_t *model_id /* OUT */);
/* CDB_NOTFOUND when absent. */
cdb_status cdb_db_model_get(cdb_db *db, int64_t model_id, cdb_db_model *out /* OUT */);
cdb_status cdb_db_model_find(cdb_db *db, const char *weights_hash, cdb_db_model *out /* OUT */);
/* The default model; CDB_NOTFOUND when no model is registered yet. */
cdb_status cdb_db_model_default(cdb_db *db, cdb_db_model *out /* OUT */);
cdb_status cdb_db_model_set_default(cdb_db *db, int64_t model_id);
/* Records how the model's vector set decodes photos (0 exact, 1 fast), and whether
** every vector of the set is made that way yet (settled). Writer only. */
cdb_status cdb_db_model_set_decode(cdb_db *db, int64_t model_id, int decode, int settled);
/* The model's info JSON (heap, cdb_free; NULL when none stored). */
cdb_status cdb_db_model_info(cdb_db *db, int64_t model_id, char **json /* OUT */);
/* Calls fn for each model in id order; fn returning nonzero stops (not an error). */
typedef int (*cdb_db_model_fn)(const cdb_db_model *m, void *ud);
cdb_status cdb_db_models_foreach(cdb_db *db, cdb_db_model_fn fn, void *ud);

/* ---- roots ------------------------------------------------------------------------- */

/* A root is a folder or a single file the user ingested, recorded by its absolute,
** normalized (realpath) path. The library model (DESIGN.md, cli/README.md): no root
** lies inside another, so every file belongs to exactly one root; a file root's one
** file has the empty relpath; a folder root's files have '/'-separated relpaths. */
typedef enum cdb_db_root_kind {
    CDB_DB_ROOT_FOLDER = 0,
    CDB_DB_ROOT_FILE = 1
} cdb_db_root_kind;

/* What tells a folder root's own folder from another one at the same path (an empty
** mount point, another filesystem mounted there, a folder made anew), recorded when
** a scan completes (the library model, engine/library/library.c, says how it is compared).
** Each field 0 = unknown (not recorded yet, or the filesystem does not give it). */
typedef struct cdb_db_root_ident {
    uint64_t fsid;     /* statfs f_fsid (from the filesystem's UUID on ext4 and btrfs) */
    uint64_t fstype;   /* statfs f_type (EXT4_SUPER_MAGIC, NFS_SUPER_MAGIC, ...) */
    uint64_t ino;      /* the folder's inode number */
    int64_t btime_ns;  /* the folder's birth time (statx), nanoseconds */
} cdb_db_root_ident;

typedef struct cdb_db_root {
    int64_t id;
    const char *path;        /* bytes, NUL-terminated; borrowed (callbacks) or heap (get) */
    cdb_db_root_kind kind;
    int follow_symlinks;     /* walks follow symbolic links (recorded with the root) */
    int no_exif;             /* photos decoded without their EXIF orientation */
    uint64_t dev;            /* st_dev of the path at the last scan; 0 = unknown */
    cdb_db_root_ident ident; /* the folder's identity at the last complete scan (schema 6) */
    int64_t scanned_ns;      /* wall clock of the last scan; 0 = never */
    const char *status;      /* last scan: "ok", "missing", "empty", "unavailable",
                                "unreadable"; NULL = never */
} cdb_db_root;

/* Get-or-create a folder root by its path (bytes, NUL-terminated; normally absolute).
** Writer only. */
cdb_status cdb_db_root_add(cdb_db *db, const char *path, int64_t *root_id /* OUT */);
/* Get-or-create a root of the given kind; a new root records follow_symlinks, an
** existing one keeps its settings (see cdb_db_root_set_options). CDB_INVALID when
** the path is recorded with the other kind. Writer only. */
cdb_status cdb_db_root_create(cdb_db *db, const char *path, cdb_db_root_kind kind,
                              int follow_symlinks, int64_t *root_id /* OUT */);
/* CDB_NOTFOUND when absent. *path is heap (cdb_free). */
cdb_status cdb_db_root_get(cdb_db *db, int64_t root_id, char **path /* OUT */);
/* ---- what a root leaves out (excludes.c) --------------------------------------------
** Rules in gitignore syntax (ignore/ignore.h), kept per root so that reindex applies
** them again: `ingest --exclude GLOB`, and the subfolders `forget` removed (an anchored
** folder rule, "/2019/private/"). A rule applies below `base`, a folder relative to the
** root ("" for the root itself): the folder a child root had when it was folded in. */
typedef enum cdb_db_exclude_kind {
    CDB_DB_EXCLUDE_GLOB = 1,  /* ingest --exclude GLOB */
    CDB_DB_EXCLUDE_FORGOT = 2 /* a subfolder forgotten: "/rel/path/" */
} cdb_db_exclude_kind;
typedef struct cdb_db_exclude {
    cdb_db_exclude_kind kind;
    char *base;    /* heap; "" = the root */
    char *pattern; /* heap; one gitignore rule */
} cdb_db_exclude;
/* Records a rule (writer); an equal rule already recorded is kept (CDB_OK). CDB_INVALID
** for an empty pattern, an unknown kind or a base with a leading or trailing '/';
** CDB_NOTFOUND when the root does not exist. */
cdb_status cdb_db_root_exclude_add(cdb_db *db, int64_t root_id, cdb_db_exclude_kind kind,
                                   const char *base, const char *pattern);
/* Removes a rule (writer). CDB_NOTFOUND when it was not recorded. */
cdb_status cdb_db_root_exclude_remove(cdb_db *db, int64_t root_id, cdb_db_exclude_kind kind,
                                      const char *base, const char *pattern);
/* The root's rules in the order they were recorded. *out: heap array of *n (NULL when
** none): cdb_db_excludes_free. */
cdb_status cdb_db_root_excludes(cdb_db *db, int64_t root_id, cdb_db_exclude **out /* OUT */,
                                int *n /* OUT */);
void cdb_db_excludes_free(cdb_db_exclude *v, int n); /* NULL is fine */

/* The .clipdbignore files a scan met (schema 9; for `folders`): each file's relative path
** ("" for the root's own, "2019/trips/.clipdbignore" below it is recorded as the folder
** "2019/trips"). A scan of the folder `under` (NULL or "": the whole root) replaces what
** was recorded at and below it with relpaths[0..n). Writer. */
cdb_status cdb_db_ignore_files_set(cdb_db *db, int64_t root_id, const char *under,
                                   const char *const *relpaths, int n);
/* The folders (relative to the root, byte order) whose .clipdbignore the root's scans
** met. *out: heap array of *n heap strings (NULL when none): cdb_db_ignore_files_free. */
cdb_status cdb_db_ignore_files(cdb_db *db, int64_t root_id, char ***out /* OUT */,
                               int *n /* OUT */);
void cdb_db_ignore_files_free(char **v, int n); /* NULL is fine */

/* The whole record; out->path and out->status are heap: cdb_db_root_clear. */
cdb_status cdb_db_root_info(cdb_db *db, int64_t root_id, cdb_db_root *out /* OUT */);
void cdb_db_root_clear(cdb_db_root *r); /* NULL is fine */
cdb_status cdb_db_root_find(cdb_db *db, const char *path, int64_t *root_id /* OUT */);
/* Calls fn for each root in id order (the record is borrowed for the call). */
typedef int (*cdb_db_root_fn)(const cdb_db_root *r, void *ud);
cdb_status cdb_db_roots_foreach(cdb_db *db, cdb_db_root_fn fn, void *ud);

/* Writer only, each one catalog transaction: */
/* The root's walk and decode settings; -1 keeps one as it is. */
cdb_status cdb_db_root_set_options(cdb_db *db, int64_t root_id, int follow_symlinks, int no_exif);
/* Records the outcome of a scan of the root: its device (0: leave as is), its
** identity (NULL: leave as is), the status word (see cdb_db_root) and the time. */
cdb_status cdb_db_root_set_scan(cdb_db *db, int64_t root_id, uint64_t dev,
                                const cdb_db_root_ident *ident, const char *status);
/* Rewrites the root's path (the library moved: `clipdb move`); its files, relpaths
** and vectors stay. CDB_INVALID when new_path is another root's path. */
cdb_status cdb_db_root_set_path(cdb_db *db, int64_t root_id, const char *new_path);

/* Folds root child into root parent, whose folder contains it (child's path is
** parent's path + "/" + prefix): every file row of child gets root parent and the
** relpath prefix + "/" + relpath (prefix alone for a file root's file); vectors stay
** where they are (ids do not change); child's walk problems and the child root are
** removed. Where both roots have a row for the same resulting path, the row with
** vectors wins: first a batch marks child's row deleted when both are live (ok or
** pending: the write order removes its vectors), then one catalog transaction drops
** the rows left without vectors and re-roots the rest. Safe to rerun after a crash.
** *n_files: rows re-rooted. The child's exclusions (cdb_db_root_excludes) move with
** it, their base prefixed. CDB_INVALID when child is not inside parent. */
cdb_status cdb_db_root_adopt(cdb_db *db, int64_t model_id, int64_t parent_id, int64_t child_id,
                             int64_t *n_files /* OUT, may be NULL */);
/* Removes a root and everything recorded under it: a batch marks every live file
** deleted (the write order removes their vectors and logs the removals for the
** index), then one catalog transaction drops the file rows, walk problems,
** exclusions and the root. Safe to rerun after a crash. *n_files: files that had vectors. Space in the
** shards is reclaimed by cdb_db_compact. */
cdb_status cdb_db_root_forget(cdb_db *db, int64_t model_id, int64_t root_id,
                              int64_t *n_files /* OUT, may be NULL */);
/* Removes what is recorded below the folder prefix of root_id (a relpath, no leading or
** trailing '/'): a batch marks its live files deleted (the write order removes their
** vectors and logs the removals), then one catalog transaction drops their file rows,
** photo metadata and walk problems. The root and its other rows stay; recording the
** folder as left out is the caller's (cdb_db_root_exclude_add). Safe to rerun after a
** crash. *n_files: files that had vectors. CDB_INVALID for an empty prefix. */
cdb_status cdb_db_root_forget_under(cdb_db *db, int64_t model_id, int64_t root_id,
                                    const char *prefix, int64_t *n_files /* OUT, may be NULL */);
/* Calls fn with the relpath (n bytes, NUL-terminated, borrowed for the call) of every
** file of root_id whose state is in mask and whose relpath lies under the folder
** prefix (its relpath, no trailing '/'; "" = the whole root), in byte order of the
** relpaths: a range of the (root_id, relpath) index, never the root's other rows.
** fn returning nonzero stops. For listing a root's folders from the catalog. */
typedef int (*cdb_db_relpath_fn)(const char *relpath, size_t n, void *ud);
cdb_status cdb_db_relpaths_under(cdb_db *db, int64_t root_id, const char *prefix,
                                 unsigned state_mask, cdb_db_relpath_fn fn, void *ud);
/* Live (ok, pending or error) files of a root. */
cdb_status cdb_db_root_count_live(cdb_db *db, int64_t root_id, int64_t *n /* OUT */);
/* Files of a root by state (indexed by cdb_db_file_state; [0] unused), those to
** retry, and its vectors of model_id (0 = the default model). One read transaction. */
typedef struct cdb_db_root_counts {
    int64_t files[5];
    int64_t n_retry, n_vectors, n_walk_problems;
} cdb_db_root_counts;
cdb_status cdb_db_root_get_counts(cdb_db *db, int64_t root_id, int64_t model_id,
                                  cdb_db_root_counts *out /* OUT */);

/* Rewrites every shard that holds free pages, and the catalog, to their minimum size
** (SQLite VACUUM), e.g. after cdb_db_root_forget. Writer only; needs free disk space
** about the size of the largest shard. *bytes_freed (may be NULL). */
cdb_status cdb_db_compact(cdb_db *db, int64_t *bytes_freed /* OUT */);
/* Folds the catalog's WAL into its file and truncates it (a checkpoint): the folder's
** size is then what it will be once this writer closes. Writer only. */
cdb_status cdb_db_catalog_checkpoint(cdb_db *db);

/* ---- walk problems -------------------------------------------------------------------- */

/* What a walk could not read (a folder without permission, a broken symbolic link,
** a missing root), kept per root until the next scan of that part of the root, so
** `clipdb errors` lists them. relpath "" means the root itself. */
typedef struct cdb_db_walk_problem {
    int64_t root_id;
    const char *relpath; /* borrowed for the call */
    const char *reason;
    int64_t seen_ns;
} cdb_db_walk_problem;
/* Replaces the problems recorded for root_id under `under` (a relpath prefix: the
** folder of a partial scan; NULL or "" = the whole root) by the n given (relpaths
** and reasons copied; root_id fields ignored). One transaction. Writer only. */
cdb_status cdb_db_walk_problems_set(cdb_db *db, int64_t root_id, const char *under,
                                    const cdb_db_walk_problem *p, int n);
typedef int (*cdb_db_walk_problem_fn)(const cdb_db_walk_problem *p, void *ud);
/* All recorded problems, by root then relpath (0 = all roots). */
cdb_status cdb_db_walk_problems_foreach(cdb_db *db, int64_t root_id, cdb_db_walk_problem_fn fn,
                                        void *ud);

/* ---- files ------------------------------------------------------------------------- */

typedef enum cdb_db_file_state {
    CDB_DB_PENDING = 1, /* being (re)written, or a transient failure (error text set:
                           I/O, permission, memory, device): the next run redoes it */
    CDB_DB_OK = 2,      /* metadata current; vectors present (see README) */
    CDB_DB_ERROR = 3,   /* the bytes cannot be used (a permanent failure): quarantined
                           until the file changes */
    CDB_DB_DELETED = 4  /* gone from disk; no vectors */
} cdb_db_file_state;
const char *cdb_db_file_state_str(cdb_db_file_state s); /* "pending", ... */

#define CDB_DB_MASK(state) (1u << (state))
#define CDB_DB_MASK_PENDING CDB_DB_MASK(CDB_DB_PENDING)
#define CDB_DB_MASK_OK CDB_DB_MASK(CDB_DB_OK)
#define CDB_DB_MASK_ERROR CDB_DB_MASK(CDB_DB_ERROR)
#define CDB_DB_MASK_DELETED CDB_DB_MASK(CDB_DB_DELETED)
#define CDB_DB_MASK_ALL 0x1Eu

/* What the caller knows about a file on disk. */
typedef struct cdb_db_file_meta {
    int64_t size;          /* bytes */
    int64_t mtime_ns;      /* st_mtim in ns */
    uint8_t hash[CDB_DB_HASH_BYTES]; /* cdb_db_hash_buf of the content */
    int has_hash;          /* 0: hash unknown (stored as NULL) */
    int32_t width, height; /* pixels after EXIF orientation; 0 = unknown */
    /* The file's identity when it was read (stat): a replacement with the same size
    ** and mtime (a new inode, or a new ctime) is a change. 0 = unknown (rows written
    ** before schema 5): then only size and mtime are compared. */
    uint64_t dev, ino;
    int64_t ctime_ns;
} cdb_db_file_meta;

typedef struct cdb_db_file {
    int64_t id, root_id;
    const char *relpath;   /* bytes (maybe non-UTF-8), NUL-terminated; see ownership below */
    cdb_db_file_meta meta;
    cdb_db_file_state state;
    const char *error;     /* one-line reason for CDB_DB_ERROR, else NULL */
    int32_t shard;         /* shard holding the file's vectors; 0 = none yet */
    int64_t created_ns, updated_ns; /* wall clock */
} cdb_db_file;

/* Looks up the file at (root_id, relpath). CDB_NOTFOUND when the path was never
** recorded. relpath/error in *out are heap copies freed by cdb_db_file_clear. */
cdb_status cdb_db_file_lookup(cdb_db *db, int64_t root_id, const char *relpath,
                              cdb_db_file *out /* OUT */);
cdb_status cdb_db_file_get(cdb_db *db, int64_t file_id, cdb_db_file *out /* OUT */);
/* A search's hit: cdb_db_file_get and, when path is not NULL, the file's full path (as
** cdb_db_file_path; cdb_free), and when photo is not NULL its metadata (as
** cdb_db_photos_get), in one statement prepared once per handle; model_id > 0:
** CDB_NOTFOUND also when the catalog's vector directory does not claim that model's
** vector for the file (a forget or move cut short is taking it away; an addition has
** not finished), as export and stats count vectors. */
struct cdb_db_photo;
cdb_status cdb_db_file_hit(cdb_db *db, int64_t file_id, int64_t model_id,
                           cdb_db_file *out /* OUT */, char **path /* OUT, may be NULL */,
                           struct cdb_db_photo *photo /* OUT, may be NULL */);
void cdb_db_file_clear(cdb_db_file *f); /* frees the heap copies; NULL is fine */

/* Full path of a file (cdb_db_path_join of its root and relpath), heap (cdb_free).
** CDB_NOTFOUND. */
cdb_status cdb_db_file_path(cdb_db *db, int64_t file_id, char **path /* OUT */);
/* root + "/" + relpath, or root alone for the empty relpath (a file root's file).
** Heap (cdb_free); NULL when out of memory. */
char *cdb_db_path_join(const char *root, const char *relpath);

/* Up to cap ids of files in state ok whose content hash is hash, in id order, in
** root_id (0: in any root) (move/rename detection: the caller checks which old path
** is gone). */
cdb_status cdb_db_files_by_hash(cdb_db *db, int64_t root_id, const uint8_t hash[CDB_DB_HASH_BYTES],
                                int64_t *ids /* OUT cap */, int cap, int *n_out /* OUT */);

/* Calls fn for every file of root_id (0 = all roots) whose state is in mask, in id
** order. The cdb_db_file passed to fn is borrowed for that call only. fn returning
** nonzero stops. fn must not write through the same handle. */
typedef int (*cdb_db_file_fn)(const cdb_db_file *f, void *ud);
/* The ok rows of one file recorded at more than one path: rows with the inode number,
** size and content hash of another ok row (rows without an identity left out), ordered
** by those, then id, so that a file's rows come together. SQLite groups them, so the
** caller's memory does not grow with the catalog. Same callback rules as below. */
cdb_status cdb_db_files_same_identity(cdb_db *db, cdb_db_file_fn fn, void *ud);
cdb_status cdb_db_files_foreach(cdb_db *db, int64_t root_id, unsigned state_mask,
                                cdb_db_file_fn fn, void *ud);

/* The order a walk meets the paths of one root (depth first, each folder's names in
** byte order): relpaths compared bytewise with '/' below every other byte, so "a/b"
** comes before "a.jpg". <0, 0 or >0, as strcmp. */
int cdb_db_walk_cmp(const char *a, const char *b);

/* The files of root_id whose state is in mask, one at a time in walk order
** (cdb_db_walk_cmp), sorted by SQLite's sorter, which keeps up to the cache size in
** memory and spills the rest to temporary files (the first cursor sets the handle's
** catalog connection to temp_store=FILE): the memory a cursor holds does not grow with
** the root. A cursor reads one snapshot of
** the catalog (a read transaction for its life); the handle may serve other reads
** meanwhile, and writes through it wait for the cursor to close. */
typedef struct cdb_db_files_cursor cdb_db_files_cursor;
cdb_status cdb_db_files_cursor_open(cdb_db *db, int64_t root_id, unsigned state_mask,
                                    cdb_db_files_cursor **out /* OUT */);
/* The next row into *f (borrowed: valid until the next call on c or its close), *has 1;
** at the end *has 0. */
cdb_status cdb_db_files_cursor_next(cdb_db_files_cursor *c, cdb_db_file *f /* OUT */,
                                    int *has /* OUT */);
void cdb_db_files_cursor_close(cdb_db_files_cursor *c); /* NULL is fine */

/* Change detection for one path found by a walk, from its stat alone (st: size,
** mtime_ns, dev, ino, ctime_ns; the hash is not looked at): what the ingest must do
** with it. "Same stat" means same size and mtime and, when the row records an
** identity, same (dev, ino, ctime). `out` (may be NULL) receives the recorded row
** when there is one (cdb_db_file_clear it). */
typedef enum cdb_db_change {
    CDB_DB_CHANGE_NEW = 1,     /* not recorded (or recorded as deleted): read, hash, encode */
    CDB_DB_CHANGE_SAME,        /* ok, same stat, has model's vector: skip unread */
    CDB_DB_CHANGE_MODIFIED,    /* ok but the stat differs: re-hash; same hash -> touch,
                                  else encode (same hash at another path -> move) */
    CDB_DB_CHANGE_NEEDS_VECTOR,/* ok and unchanged, but no vector for model_id yet: encode */
    CDB_DB_CHANGE_REDO,        /* pending (an interrupted run, or a transient failure
                                  to retry): encode again */
    CDB_DB_CHANGE_QUARANTINED, /* error, same stat: skip (quarantine) */
    CDB_DB_CHANGE_RETRY,       /* error, but the stat changed: try again */
    CDB_DB_CHANGE_RESTAT       /* ok, same size and mtime, has model's vector, but the row
                                  records no identity yet (schema < 5): record the stat
                                  (cdb_db_batch_touch with the stored hash), skip unread */
} cdb_db_change;
cdb_status cdb_db_classify(cdb_db *db, int64_t model_id, int64_t root_id, const char *relpath,
                           const cdb_db_file_meta *st, cdb_db_change *change /* OUT */,
                           cdb_db_file *out /* OUT, may be NULL */);
/* cdb_db_classify's rule on a row already read: row NULL when the path is not recorded;
** has_vector: the row's file has a vector of the model in question (read only for an ok
** row with the same stat). */
cdb_db_change cdb_db_change_of(const cdb_db_file *row, int has_vector, const cdb_db_file_meta *st);

/* A folder's recorded rows, read at once for a rescan's merge join: the rows of root_id
** directly in folder dir (relative to the root, "" or NULL for the root's own folder; not
** those of its subfolders), in name order (bytes as strcmp compares them: the walk's),
** by one range query over the catalog's (root, relpath) index that jumps over each
** subfolder's rows (so a tree's rows are each read once, whatever its depth). Every row
** comes with whether model_id has a vector of it and, when thumb_px > 0, whether its
** thumbnail is current at that size (cdb_db_thumb_current's rule; when the thumbnails
** cannot be read, all count as current: a cache never fails the listing). Reads as the other
** lookups do (in the handle's read snapshot, when it holds one). Memory: the folder's
** rows. f.relpath is the row's whole relpath; f.error, created_ns and updated_ns are not
** read (NULL, 0). */
typedef struct cdb_db_folder_row {
    cdb_db_file f;         /* relpath borrowed from the listing */
    int has_vector;
    int thumb_current;
} cdb_db_folder_row;
typedef struct cdb_db_folder cdb_db_folder;
cdb_status cdb_db_folder_read(cdb_db *db, int64_t root_id, const char *dir, int64_t model_id,
                              int thumb_px, cdb_db_folder **out /* OUT */);
/* The row named name (the last part of its relpath), or NULL. Asked in name order it is a
** merge (each row passed once); asked out of order it starts again from the first row.
** The row is borrowed from d. */
const cdb_db_folder_row *cdb_db_folder_find(cdb_db_folder *d, const char *name);
int64_t cdb_db_folder_count(const cdb_db_folder *d);
void cdb_db_folder_free(cdb_db_folder *d); /* NULL is fine */
/* A read snapshot held over many lookups (a rescan's questions per file: classify,
** thumbnail current): one read transaction on the catalog and on the thumbnails (when
** there are any) instead of one per statement, until cdb_db_read_end. Lookups meanwhile
** see the database as it was at the first of them, not later commits of other handles:
** end and begin again to move on (which also lets a checkpoint pass). Reader handles
** only (CDB_INVALID on a writer); calls that open a transaction of their own (counts,
** root listings) must wait for the end. Ending a handle without a snapshot is a no-op. */
cdb_status cdb_db_read_begin(cdb_db *db);
void cdb_db_read_end(cdb_db *db);

/* 1 when the stat fields of a walked file (st) match the row's (the rule above). */
int cdb_db_same_stat(const cdb_db_file_meta *row, const cdb_db_file_meta *st);

/* The largest file id handed out so far (0: none). Ids only grow (AUTOINCREMENT):
** rows with a larger id were inserted after this call. */
cdb_status cdb_db_max_file_id(cdb_db *db, int64_t *id /* OUT */);

/* Calls fn with the id of every row of root_id (any state), in no particular order, read
** from the (root, relpath) index alone: no row is read. For a pass that wants only the
** few rows a walk did not meet (cdb_db_file_get those). fn nonzero stops. */
cdb_status cdb_db_root_file_ids(cdb_db *db, int64_t root_id, int (*fn)(int64_t id, void *ud),
                                void *ud);

/* 1 in *has when the catalog's vector directory claims a stored vector of model_id for
** the file. Trusted for an ok file: the write order never leaves such a claim without
** its vector after a crash or a full disk (db/README.md); a power loss can, which
** cdb_db_verify finds. A pending file's claims may be stale (see the batch commit). */
cdb_status cdb_db_file_has_vector(cdb_db *db, int64_t model_id, int64_t file_id,
                                  int *has /* OUT */);

/* ---- writing: batches ---------------------------------------------------------------- */

/* A batch of file updates for one model, committed with the write order above.
** Typical size: a few hundred files. Writer only. Staging validates and encodes
** (normalize in fp32, round to fp16) immediately; nothing touches disk before
** cdb_db_batch_commit. */
cdb_status cdb_db_batch_new(cdb_db *db, int64_t model_id, cdb_db_batch **out /* OUT */);
void cdb_db_batch_free(cdb_db_batch *b); /* discards staged, uncommitted work; NULL ok */
int cdb_db_batch_count(const cdb_db_batch *b); /* staged operations */

/* Stages (root_id, relpath) as ok with meta and its embedding `vec` (dim fp32
** values of any scale; dim must equal the model's). The vector is L2-normalized
** in fp32 and rounded to fp16; CDB_INVALID (nothing staged) when it has NaN/Inf,
** is all zeros, or fails the unit-norm check after rounding — the caller then
** stages put_error for that file. If the content hash changed, the file's vectors
** for other models are dropped (they describe the old content). */
cdb_status cdb_db_batch_put(cdb_db_batch *b, int64_t root_id, const char *relpath,
                            const cdb_db_file_meta *meta, const float *vec, int dim);
/* The same with a vector already stored elsewhere (another database's shard: `merge`):
** dim fp16 values kept bit for bit; CDB_INVALID (nothing staged) when one is not finite
** or the norm is not 1 within 1e-3 (fp32 accumulation), as every stored vector is. */
cdb_status cdb_db_batch_put_f16(cdb_db_batch *b, int64_t root_id, const char *relpath,
                                const cdb_db_file_meta *meta, const uint16_t *v16, int dim);
/* Stages a file as unusable (quarantine) with a one-line reason (newlines are
** replaced by spaces); its vectors, if any, are removed. */
cdb_status cdb_db_batch_put_error(cdb_db_batch *b, int64_t root_id, const char *relpath,
                                  const cdb_db_file_meta *meta, const char *reason);
/* Stages a transient failure (I/O, permission, memory, device: nothing says the
** bytes are bad): the file is left pending with the reason as its error text, so
** the next run retries it; its vectors, if any, are removed (its content is not
** known). */
cdb_status cdb_db_batch_put_retry(cdb_db_batch *b, int64_t root_id, const char *relpath,
                                  const cdb_db_file_meta *meta, const char *reason);
/* Stages a recorded file as deleted; its vectors are removed. */
cdb_status cdb_db_batch_delete(cdb_db_batch *b, int64_t file_id);
/* Stages a move/rename of an ok file to new_relpath in the same root, with new
** meta; its vectors stay (no re-encode). A row already at new_relpath in state
** deleted or error is replaced; one in state ok or pending makes the commit fail
** with CDB_INVALID. */
cdb_status cdb_db_batch_move(cdb_db_batch *b, int64_t file_id, const char *new_relpath,
                             const cdb_db_file_meta *meta);
/* The same into another root (new_root_id; 0 = the file's own root). */
cdb_status cdb_db_batch_move_to(cdb_db_batch *b, int64_t file_id, int64_t new_root_id,
                                const char *new_relpath, const cdb_db_file_meta *meta);
/* Stages a metadata-only update (size/mtime/... changed, same content) of an ok file. */
cdb_status cdb_db_batch_touch(cdb_db_batch *b, int64_t file_id, const cdb_db_file_meta *meta);

/* Commits the staged operations (write order above) and empties the batch for
** reuse. file_ids (may be NULL) receives one file id per staged operation, in
** staging order. On failure nothing is lost that was committed before, the files
** touched are left pending at worst, and the batch keeps its operations (retry
** the commit or free it). */
cdb_status cdb_db_batch_commit(cdb_db_batch *b, int64_t *file_ids /* OUT count */);

/* Test hook: when set, commit calls it between its steps (after_step = 1, 2) and
** before step 1 (0); used by the crash tests to die at precise points. */
typedef void (*cdb_db_commit_hook)(int after_step, void *ud);
void cdb_db_set_commit_hook(cdb_db *db, cdb_db_commit_hook fn, void *ud);

/* Normalizes vec (dim fp32) into out (dim fp16) exactly as stored: scaled L2 norm
** in fp32, division in fp32, round-to-nearest-even, then validation (finite, unit
** norm within 1e-3 after decoding, fp32 accumulation). CDB_INVALID if refused. */
cdb_status cdb_db_encode_vector(const float *vec, int dim, uint16_t *out /* OUT dim */);

/* ---- reading vectors --------------------------------------------------------------- */

/* Iterates every stored vector of model_id in ascending file id, across shards.
** Vectors of pending files may appear (their last committed vector); files in
** state error/deleted never do. The iterator holds read snapshots until freed;
** do not write through the same handle while it is open. */
cdb_status cdb_db_iter_new(cdb_db *db, int64_t model_id, cdb_db_iter **out /* OUT */);
/* The same for searches: a shard file that is missing or damaged is left out instead
** of failing (its vectors are not read), counted in *n_unreadable. */
cdb_status cdb_db_iter_new_skipping(cdb_db *db, int64_t model_id, int *n_unreadable /* OUT */,
                                    cdb_db_iter **out /* OUT */);
/* Reads up to cap vectors: ids[i], and (each may be NULL) f32[i*dim..] decoded
** exactly from fp16, f16[i*dim..] raw. *n_out == 0 means the end. */
cdb_status cdb_db_iter_read(cdb_db_iter *it, int cap, int64_t *ids /* OUT cap */,
                            float *f32 /* OUT cap*dim */, uint16_t *f16 /* OUT cap*dim */,
                            int *n_out /* OUT */);
void cdb_db_iter_free(cdb_db_iter *it);

/* Vectors of n files for model_id (re-rank): out[i*dim..] decoded to fp32;
** found[i] = 0 (row zero-filled) when file i has no vector. */
cdb_status cdb_db_vectors_get(cdb_db *db, int64_t model_id, const int64_t *file_ids, int n,
                              float *out /* OUT n*dim */, uint8_t *found /* OUT n */);
/* The same for searches: the stored fp16 rows as they are, and a file whose shard is
** missing or damaged gets found[i] = CDB_DB_FOUND_UNREADABLE (row zero-filled)
** instead of failing the call, so the rest of the library can still be searched. */
#define CDB_DB_FOUND_UNREADABLE 2
cdb_status cdb_db_vectors_get_f16(cdb_db *db, int64_t model_id, const int64_t *file_ids, int n,
                                  uint16_t *out /* OUT n*dim */, uint8_t *found /* OUT n */);

/* ---- generations: what changed since the index was built ------------------------------ */

/* Every vector write or removal takes the next value of one database-wide,
** strictly increasing sequence. cdb_db_generation gives the latest value handed
** out (0 for a new database). An index built from vectors up to generation G
** catches up by applying removed_since(G) and then added_since(G): a replaced
** vector appears in both. fn returning nonzero stops. */
cdb_status cdb_db_generation(cdb_db *db, int64_t *gen /* OUT */);
typedef int (*cdb_db_seq_fn)(int64_t file_id, int64_t seq, void *ud);
cdb_status cdb_db_added_since(cdb_db *db, int64_t model_id, int64_t since, cdb_db_seq_fn fn,
                              void *ud);
cdb_status cdb_db_removed_since(cdb_db *db, int64_t model_id, int64_t since,
                                cdb_db_seq_fn fn, void *ud);
/* Forgets removal records with seq <= upto (after every index has caught up). */
cdb_status cdb_db_prune_removed(cdb_db *db, int64_t upto);

/* ---- counts, runs ------------------------------------------------------------------- */

typedef struct cdb_db_counts {
    int64_t files[5];  /* indexed by cdb_db_file_state; [0] unused */
    int64_t n_roots, n_models, n_shards;
    int64_t n_vectors; /* of the model asked for (0 = default model): the directory's
                          claims, those of pending files checked against their shards */
    int64_t generation;
    int64_t n_retry;   /* pending files with a transient failure to retry (in files[PENDING]) */
    int64_t n_missing; /* ok files without a vector of the model asked for */
    int64_t n_walk_problems;
} cdb_db_counts;
cdb_status cdb_db_get_counts(cdb_db *db, int64_t model_id, cdb_db_counts *out /* OUT */);
/* cdb_db_get_counts' n_missing alone: the ok files without a vector of model_id (0: the
** default model), without the other counts' scans. */
cdb_status cdb_db_count_missing(cdb_db *db, int64_t model_id, int64_t *n /* OUT */);
/* cdb_db_get_counts' n_vectors alone (what a search state checks itself against), without
** the scans the other counts take. */
cdb_status cdb_db_count_vectors(cdb_db *db, int64_t model_id, int64_t *n /* OUT */);
/* Every claim of the vector directory for an ok file and model_id (0 = the default
** model) checked against the file's shard (keys only, in chunks, one read per shard per
** chunk: it reads the set's part of every shard). *n_stale: ok files whose claimed
** vector is not there (a power loss, damage, an older clipdb's interrupted delete); a
** missing or damaged shard's claims all count. For decisions that must not rest on the
** catalog alone (making a set the default). */
cdb_status cdb_db_count_stale_claims(cdb_db *db, int64_t model_id, int64_t *n_stale /* OUT */);

/* Ingest/reindex history. kind: "ingest", "reindex", ...; status: "ok",
** "partial", "failed", ...; summary_json stored verbatim (may be NULL). */
cdb_status cdb_db_run_begin(cdb_db *db, const char *kind, int64_t *run_id /* OUT */);
cdb_status cdb_db_run_finish(cdb_db *db, int64_t run_id, const char *status,
                             const char *summary_json);
typedef struct cdb_db_run {
    int64_t id;
    const char *kind, *status, *summary_json; /* borrowed for the callback; may be NULL */
    int64_t started_ns, finished_ns;          /* finished_ns 0: unfinished (or killed) */
} cdb_db_run;
typedef int (*cdb_db_run_fn)(const cdb_db_run *r, void *ud);
/* The last `limit` runs (<= 0: all), newest first. */
cdb_status cdb_db_runs_foreach(cdb_db *db, int limit, cdb_db_run_fn fn, void *ud);

/* ---- thumbnails ----------------------------------------------------------------------- */

/* Small JPEGs of ok files, in <dir>/thumbs.db: a cache beside the catalog (db/README.md),
** never part of the write order: made by the ingest from the decoded image, checked
** against the file's content hash when read, dropped by cdb_db_thumbs_prune when stale.
** The size setting is the long side in pixels; 0 turns thumbnails off. */
#define CDB_DB_THUMB_DEFAULT 384
#define CDB_DB_THUMB_MIN 32
#define CDB_DB_THUMB_MAX 512

typedef struct cdb_db_thumb {
    int64_t file_id;
    uint8_t hash[CDB_DB_HASH_BYTES]; /* the content it was made from */
    int px;                  /* the size setting it was made at */
    int32_t width, height;   /* the thumbnail's pixels */
    const void *jpeg;        /* put: borrowed for the call; get: heap (cdb_db_thumb_clear) */
    size_t n_bytes;
} cdb_db_thumb;

/* The pixel limit photos are decoded under (settings.c): 0 = never set (the
** encoder's default, CDB_IMAGE_DEFAULT_MAX_PIXELS). */
cdb_status cdb_db_max_pixels(cdb_db *db, int64_t *px /* OUT */);
/* Sets it (0: back to the default); requeue (the caller's call: a limit higher than
** the one in force) also requeues the files quarantined for being over a limit
** (*n_requeued, may be NULL): the next run retries them. One transaction. Writer. */
cdb_status cdb_db_set_max_pixels(cdb_db *db, int64_t px, int requeue,
                                 int64_t *n_requeued /* OUT */);

/* Whether a run (ingest, reindex) has encoded a real photo into this database: one
** without the generated world's mark (cdb_image_world_marked), which the bundled model
** does not know. Recorded by the engine after such a run (meta "real_photos"), never
** cleared: what `clipdb serve` reads instead of rescanning the photos. */
cdb_status cdb_db_real_photos(cdb_db *db, int *seen /* OUT */);
cdb_status cdb_db_set_real_photos(cdb_db *db); /* Writer only. */
/* The partition the database holds (meta part_index, part_count): part *index (1..*count)
** of the files (cdb_db_part_of), or 0/0 for a whole library. */
cdb_status cdb_db_partition(cdb_db *db, int *index /* OUT */, int *count /* OUT */);
/* Records the partition (writer): 1 <= index <= count; CDB_INVALID otherwise. */
cdb_status cdb_db_set_partition(cdb_db *db, int index, int count);
/* Notes a write command keeps in the catalog (settings.c): the work it has begun and
** not finished, so that the next writer finishes it after a kill, and what it has
** done, so that running it again can say so. *value: heap (cdb_free), NULL when
** there is no note. Setting NULL removes the note; one transaction. Writer. */
cdb_status cdb_db_note_get(cdb_db *db, const char *key, char **value /* OUT */);
cdb_status cdb_db_note_set(cdb_db *db, const char *key, const char *value);

/* The setting (CDB_DB_THUMB_DEFAULT when never set). */
cdb_status cdb_db_thumb_size(cdb_db *db, int *px /* OUT */);
/* 0, or CDB_DB_THUMB_MIN..CDB_DB_THUMB_MAX (CDB_INVALID otherwise). Writer only. */
cdb_status cdb_db_set_thumb_size(cdb_db *db, int px);
/* Stores (replaces) n thumbnails in one transaction. Writer only. */
cdb_status cdb_db_thumbs_put(cdb_db *db, const cdb_db_thumb *t, int n);
/* The stored thumbnail of file_id, stale or not (compare out->hash with the file's);
** CDB_NOTFOUND when there is none (or no thumbs.db: a reader never creates it). */
cdb_status cdb_db_thumb_get(cdb_db *db, int64_t file_id, cdb_db_thumb *out /* OUT */);
void cdb_db_thumb_clear(cdb_db_thumb *t); /* NULL is fine */
/* 1 in *current when file_id has a thumbnail made from content hash at setting px. */
cdb_status cdb_db_thumb_current(cdb_db *db, int64_t file_id, const uint8_t hash[CDB_DB_HASH_BYTES],
                                int px, int *current /* OUT */);
/* Drops the thumbnails of files that are not ok or whose content changed (all of them
** when the setting is 0). Writer only. *n_dropped may be NULL. */
cdb_status cdb_db_thumbs_prune(cdb_db *db, int64_t *n_dropped /* OUT */);

/* ---- photo metadata (photos.c) -------------------------------------------------------
** What users search photos by besides content (capture time, camera, place), as the
** encoder reads it from a file's bytes (cdb_photo_meta_read), stored per file id in the
** catalog's table photo_meta (schema 7) with the content hash it was read from: a row is
** current while that hash is the file's hash, so a file whose content changed, or a
** row a crash left behind, is seen as not read (cdb_db_photos_missing) instead of
** describing other bytes. Written outside the batch write order, like thumbnails: the
** ingest stores the rows after the batch that made the files ok. */

typedef enum cdb_db_taken_source {
    CDB_DB_TAKEN_NONE = 0,     /* no capture time in the file */
    CDB_DB_TAKEN_ORIGINAL = 1, /* EXIF DateTimeOriginal (the encoder's cdb_taken_source) */
    CDB_DB_TAKEN_CREATED = 2,  /* EXIF CreateDate */
    CDB_DB_TAKEN_XMP = 3,      /* XMP */
    CDB_DB_TAKEN_RAW = 4,      /* libraw's timestamp */
    CDB_DB_TAKEN_FILE = 5      /* never stored: cdb_db_photos_get's stand-in, the file's
                                  mtime (a UTC instant: has_offset 1, offset 0) */
} cdb_db_taken_source;
/* "", "original", "created", "xmp", "raw", "file"; "" for values out of range. */
const char *cdb_db_taken_source_str(int source);

/* A point in time as photos record it: the wall clock in milliseconds since
** 1970-01-01T00:00 of that same clock, and its UTC offset when one is known
** (UTC = wall_ms - offset_min * 60000). */
typedef struct cdb_db_time {
    int64_t wall_ms;
    int has_offset;
    int offset_min;   /* -840..840 */
} cdb_db_time;

typedef struct cdb_db_photo {
    int64_t file_id;
    uint8_t hash[CDB_DB_HASH_BYTES]; /* put: the content the metadata was read from */
    int read;          /* get: 1 when a row read from the file's current content is stored */
    cdb_db_taken_source taken_source;
    cdb_db_time taken; /* valid when taken_source != NONE */
    char make[64], model[64], lens[96]; /* UTF-8, "" when absent */
    int has_gps;       /* lat -90..90, lon -180..180, degrees, north and east positive */
    double lat, lon;
    int has_alt;       /* alt: metres above sea level */
    double alt;
    /* Schema 9: the perceptual hash of the same content (cdb_image_phash of the decode
    ** `duplicates` makes), the decoded format (cdb_dupes_format's values: 0 RAW, 1 a
    ** camera format, 2 other) and the full oriented size; has_phash 0: not computed
    ** yet (the row then counts as missing: cdb_db_photos_missing). */
    int has_phash;
    uint64_t phash;
    int phash_format;
    int phash_width, phash_height;
} cdb_db_photo;

/* The instant of t in milliseconds for ordering: UTC when the offset is known, else
** the wall clock read as UTC (the photos of one camera keep their order). */
int64_t cdb_db_time_key(const cdb_db_time *t);

/* Stores (replaces) n rows, one transaction. CDB_INVALID (nothing stored) for a row
** without a file id, a taken_source out of 0..4, an offset out of range or a position
** out of range. Writer only. */
cdb_status cdb_db_photos_put(cdb_db *db, const cdb_db_photo *p, int n);
/* The metadata of n files: out[i] for file_ids[i]; found[i] (may be NULL) 0 when the
** file is not recorded (out[i] zeroed). A file without a current row (read = 0) or
** without a capture time gets taken_source CDB_DB_TAKEN_FILE and its mtime, so every
** recorded file has a time to sort and filter by. */
cdb_status cdb_db_photos_get(cdb_db *db, const int64_t *file_ids, int n,
                             cdb_db_photo *out /* OUT n */, uint8_t *found /* OUT n */);
/* Ids (heap, cdb_free; ascending) of the ok files of root_id (0: all roots) without a
** current row: never read (a database from before schema 8), read from content that
** has changed since, or without a perceptual hash (before schema 9, or an ingest, which
** left it to the reindex). What a reindex backfills. */
cdb_status cdb_db_photos_missing(cdb_db *db, int64_t root_id, int64_t **ids /* OUT */,
                                 int64_t *n /* OUT */);
/* Drops rows whose file is gone, quarantined or deleted, or whose content changed.
** Writer only. *n_dropped may be NULL. */
cdb_status cdb_db_photos_prune(cdb_db *db, int64_t *n_dropped /* OUT */);

/* A filter on photo metadata (docs/images.md "Metadata" states the rules):
** taken: after is inclusive (time >= after), before exclusive (time < before), a photo
**   without a capture time being compared by its file time (a UTC instant); the two
**   times are compared as UTC instants when both carry an offset, else as wall clocks
**   (a bound without an offset means the camera's clock; a photo without one is taken
**   to be in the bound's zone);
** camera: an ASCII case-insensitive substring of make or of model;
** near: within km of (lat, lon) on a sphere of radius CDB_DB_EARTH_KM (haversine);
** has_gps: only photos with a position. A zeroed struct passes every photo. */
#define CDB_DB_EARTH_KM 6371.0088
typedef struct cdb_db_photo_filter {
    int has_after, has_before;
    cdb_db_time after, before;
    const char *camera;          /* NULL or "": any */
    int has_near;
    double near_lat, near_lon, near_km;
    int has_gps;
} cdb_db_photo_filter;

/* 1 when the filter restricts anything. */
int cdb_db_photo_filter_active(const cdb_db_photo_filter *f);
/* 1 when p (as cdb_db_photos_get fills it) passes f. */
int cdb_db_photo_match(const cdb_db_photo_filter *f, const cdb_db_photo *p);
/* Ids (heap, cdb_free; ascending) of every ok file that passes f. One read of the
** files and their rows. */
cdb_status cdb_db_photos_select(cdb_db *db, const cdb_db_photo_filter *f,
                                int64_t **ids /* OUT */, int64_t *n /* OUT */);
/* Calls fn for every ok file's metadata (as cdb_db_photos_get fills it), in id order, in
** one statement; with_row_only: only files whose metadata was read. fn returns nonzero to
** stop (CDB_OK then). */
typedef int (*cdb_db_photo_fn)(const cdb_db_photo *p, void *ud);
cdb_status cdb_db_photos_foreach(cdb_db *db, int with_row_only, cdb_db_photo_fn fn, void *ud);

/* What copies are found by, for every ok file, in id order (cdb_db_photos_foreach's
** files): its content hash (as cdb_db_photo's: zeros when the file has none) and its
** perceptual hash when a current row holds one (has_phash: cdb_db_photo's read &&
** has_phash). One statement, 40 bytes a file: a search collapsing copies finds a page's
** copies from these without reading every file's metadata. *out: cdb_free (NULL when
** none). CDB_NOMEM, CDB_IO. */
typedef struct cdb_db_copy_key {
    int64_t file_id;
    uint8_t hash[CDB_DB_HASH_BYTES];
    int has_phash;
    uint64_t phash;
} cdb_db_copy_key;
cdb_status cdb_db_copy_keys(cdb_db *db, cdb_db_copy_key **out /* OUT */, size_t *n /* OUT */);

/* Parsers of what users type (CLI arguments, HTTP query strings): untrusted input,
** CDB_INVALID with a message naming the text for anything else. */
/* ISO 8601: YYYY-MM-DD, then optionally [T or space]HH:MM[:SS[.fraction]] and an
** offset (Z, +HH:MM, +HHMM, +HH, and '-'); years 0001..9999; a fraction's digits past
** milliseconds are dropped. A date alone is that day's 00:00. */
cdb_status cdb_db_time_parse(const char *s, cdb_db_time *out /* OUT */);
/* "LAT,LON,KM": decimal degrees (-90..90, -180..180) and a distance > 0 in km. */
cdb_status cdb_db_near_parse(const char *s, double *lat /* OUT */, double *lon /* OUT */,
                             double *km /* OUT */);

/* ---- verification --------------------------------------------------------------------- */

typedef enum cdb_db_problem_kind {
    CDB_DB_SHARD_MISSING = 1, /* shard file deleted or replaced behind clipdb's back */
    CDB_DB_SHARD_DAMAGED,     /* truncated / unreadable / not ours */
    CDB_DB_VECTOR_MISSING,    /* catalog says a vector exists; the shard lacks it */
    CDB_DB_VECTOR_BAD,        /* wrong size, NaN/Inf, or not unit norm */
    CDB_DB_VECTOR_ORPHAN,     /* in a shard without a catalog entry (or wrong shard) */
    CDB_DB_FILE_NO_VECTOR,    /* ok file lacking a vector for the default model */
    /* found by the deep check (cli: verify --deep), never by cdb_db_verify: */
    CDB_DB_FILE_CHANGED,      /* the file's bytes differ from its recorded hash, its stat
                                 does not show it (bit rot, a replace behind our back) */
    CDB_DB_VECTOR_MISMATCH    /* re-encoding the file gives another vector */
} cdb_db_problem_kind;

typedef struct cdb_db_problem {
    cdb_db_problem_kind kind;
    int32_t shard;    /* 0 when not shard-specific */
    int64_t model_id; /* 0 when n/a */
    int64_t file_id;  /* 0 when n/a */
    char msg[192];
} cdb_db_problem;

typedef struct cdb_db_report {
    int64_t n_problems;           /* all found (may exceed n_listed) */
    int n_listed;                 /* entries in problems[] (capped at 1000) */
    cdb_db_problem *problems;
    int64_t n_vectors_checked, n_files_ok, n_files_pending;
    int64_t n_lost, n_lost_files; /* cdb_db_verify: the catalog's vector directory entries
                                     in missing or damaged shards, and their files, all
                                     counted (the list is capped, these are not) */
} cdb_db_report;

/* Quick check: every shard the catalog lists exists, is not truncated (file size
** vs the page count in its header) and carries this database's identity. Problems
** go to *out (heap, cdb_db_report_free). Cheap: no vector is read. */
cdb_status cdb_db_check_shards(cdb_db *db, cdb_db_report **out /* OUT */);
/* Full check: the quick check, then every vector in every shard (size, finite,
** unit norm within 1e-3 in fp32) against the catalog's vector directory, both ways,
** and every ok file's default-model vector. Returns CDB_OK with the problems in
** *out (an empty list means healthy); fails only when it could not run. */
cdb_status cdb_db_verify(cdb_db *db, cdb_db_report **out /* OUT */);
void cdb_db_report_free(cdb_db_report *r);
/* An empty report, and adding a problem to one (for checks made outside db/, such as
** the deep check; repaired by cdb_db_repair like the others). */
cdb_status cdb_db_report_new(cdb_db_report **out /* OUT */);
void cdb_db_report_add(cdb_db_report *r, cdb_db_problem_kind kind, int32_t shard, int64_t model_id,
                       int64_t file_id, const char *fmt, ...) CDB_PRINTF(6, 7);
/* Repairs what verify found (writer only): files whose vectors are missing or bad
** (also all files of a missing/damaged shard) are marked pending and lose their
** shard entry so the next ingest re-encodes them; changed files and mismatched
** vectors (the deep check) are marked pending; orphan vectors are deleted.
** *n_fixed counts the files/vectors changed. */
cdb_status cdb_db_repair(cdb_db *db, const cdb_db_report *r, int64_t *n_fixed /* OUT */);
/* Removes the copies of damaged shards (shards/NNNN.db.damaged-*) that a repair moves
** aside (writer only). cdb_db_repair calls it once its catalog transaction committed;
** `reindex --repair` calls it first too, for the copy of a repair killed before that.
** Safe at any time: a damaged copy holds nothing clipdb reads, and the files whose
** vectors it held are pending or still claim the (now empty or missing) shard, which
** verify reports and the repair requeues. */
cdb_status cdb_db_drop_damaged(cdb_db *db);

#ifdef __cplusplus
}
#endif
#endif /* CDB_DB_H */
