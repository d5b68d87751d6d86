/*
** db_int.h: internals of the db/ module shared by its .c files (never included
** outside db/). The handle, shard connections, cached statements, and the small
** SQLite helpers that map SQLite errors to cdb_status at the module boundary.
*/
#ifndef CDB_DB_INT_H
#define CDB_DB_INT_H

#include <sqlite3.h>

#include "db/db.h"

/* Per-vector catalog/shard overhead assumed when filling shards (row header,
** index entry, page slack). */
#define DB_VEC_OVERHEAD 64

typedef struct db_shard {
    int32_t id;
    sqlite3 *conn;        /* NULL until first use */
    sqlite3_stmt *st_put; /* INSERT OR REPLACE (model, file, vec) */
    sqlite3_stmt *st_del; /* DELETE a file's vectors except model ?2 (0 = all) */
    sqlite3_stmt *st_get; /* SELECT vec for (model, file) */
    int unsynced;         /* committed writes not yet made durable by cdb_db_flush */
    uint64_t dev, ino;    /* the file while conn is open (the process-wide registry) */
} db_shard;

/* Cached catalog statements (prepared on first use). */
enum {
    ST_FILE_BY_PATH,
    ST_FILE_BY_ID,
    ST_FILE_INSERT,
    ST_FILE_SET_PENDING,
    ST_FILE_SET_OK,
    ST_FILE_SET_OK_NEW, /* row inserted by this commit's step 1: meta already right */
    ST_FILE_SET_ERROR,
    ST_FILE_SET_DELETED,
    ST_DIR_GET,
    ST_DIR_PUT,
    ST_DIR_DEL,
    ST_DIR_OF_FILE,
    ST_TOMB_PUT,
    ST_SHARD_RESERVE,
    ST_SHARD_CURRENT,
    ST_FILE_RUN_OK, /* ids ?1..?2, all inserted pending by this commit's step 1 */
    ST_DIR_PUT_RUN,
    ST_HKEYS_LEVELS, /* entries in hkeys_new, largest file id (schema v4) */
    ST_HKEY_PUT,     /* (hkey, file) into hkeys_new */
    ST_HKEY_PUT_RUN, /* the same for files ?1..?2 */
    ST_PHOTO_GET,    /* PHOTO_ROW_COLS of file ?1 (photos.c) */
    ST_FILE_GET,     /* FILE_COLS, the root's path and PHOTO_ROW_COLS of file ?1, if model
                        ?2 (0: any) has its vector claimed (catalog.c) */
    ST_FILE_LOOKUP,  /* FILE_COLS of (root ?1, relpath ?2): a rescan's question per file */
    ST_FILE_MOVE,    /* file ?1 to relpath ?2 (and root ?9 when > 0), its meta ?3.. */
    ST_FILE_TOUCH,   /* an ok file ?1's new meta ?2.. (same content) */
    ST_FOLDER_ROWS,  /* root ?1's rows from relpath ?2 on, in relpath order, each with whether
                        model ?3 has its vector (folder.c) */
    ST_COUNT_
};

struct cdb_db {
    char *dir;
    char *uuid;   /* identity written into every shard */
    sqlite3 *cat; /* catalog.db */
    int readonly;
    int lock_fd; /* -1 for readers */
    int busy_timeout_ms;
    cdb_db_sync sync;
    int64_t shard_capacity;
    sqlite3_stmt *st[ST_COUNT_];
    db_shard *shards; /* indexed by shard id; [0] unused */
    int64_t synced_changes; /* sqlite3_total_changes(cat) at the last cdb_db_flush */
    int n_shards_alloc;
    cdb_db_commit_hook hook;
    void *hook_ud;
    struct db_ckpt *ckpt; /* background checkpointer (shard.c); NULL until first needed */
    sqlite3 *thumbs;      /* thumbs.db (thumbs.c); NULL until first used */
    sqlite3_stmt *thumbs_current; /* on thumbs: cdb_db_thumb_current's, prepared once */
    sqlite3_stmt *thumbs_range;   /* on thumbs: cdb_thumbs_mark_current's, likewise */
    int walk_collation;   /* cat knows the collation cdb_walk, temp_store=FILE (catalog.c) */
};

/* Statements that write a file's meta bind files.hkey at this parameter, and its
** identity (dev, ino, ctime_ns) at the three after it. */
#define DB_P_HKEY 20
#define DB_P_DEV 21

/* Private symbols: every extern name in db/ starts with cdb_. The public API
** (db.h) is cdb_db_*; the files below share cdb_sql_* (sql.c), cdb_shard_*
** (shard.c), cdb_schema_* (schema.c) and cdb_photos_* (photos.c). Each file calls only
** the ones below it: db.c -> schema.c -> verify.c, roots.c -> batch.c -> catalog.c ->
** shard.c -> sql.c, db.c -> thumbs.c -> sql.c (thumbnails live in their own file,
** thumbs.db), catalog.c -> photos.c -> sql.c (photo metadata; catalog.c reads a hit's
** metadata in the hit's statement), and folder.c -> thumbs.c, sql.c (a rescan's rows of
** a folder). */

/* ---- SQLite helpers (sql.c: calls nothing else in db/) ---- */
cdb_status cdb_sql_err(sqlite3 *conn, int rc, const char *what);
cdb_status cdb_sql_exec(sqlite3 *conn, const char *sql);
/* The columns of a cdb_db_file, in the order catalog.c reads them, from `files f`. */
#define FILE_COLS                                                                          \
    "f.id, f.root_id, f.relpath, f.size, f.mtime_ns, f.hash, f.width, f.height, f.state,"   \
    " f.error, f.shard, f.created_ns, f.updated_ns, f.dev, f.ino, f.ctime_ns"
#define FILE_NCOLS 16

/* The columns every photo metadata read selects (photos.c), in this order, from files f
** LEFT JOIN photo_meta p (current rows only: the join requires the file's hash). */
#define PHOTO_ROW_COLS                                                                     \
    "f.id, f.mtime_ns, p.file_id IS NOT NULL, p.taken_source, p.taken_ms, p.has_offset,"   \
    " p.offset_min, p.make, p.model, p.lens, p.has_gps, p.lat, p.lon, p.alt IS NOT NULL,"   \
    " p.alt, f.hash, p.phash IS NOT NULL, p.phash, p.phash_format, p.phash_width,"         \
    " p.phash_height"
#define PHOTO_ROW_FROM                                                                     \
    " FROM files f LEFT JOIN photo_meta p ON p.file_id = f.id AND p.hash = f.hash"

cdb_status cdb_sql_prepare(sqlite3 *conn, const char *sql, sqlite3_stmt **st);
/* The cached catalog statement `which`, reset and with bindings cleared. */
cdb_status cdb_sql_stmt(cdb_db *db, int which, sqlite3_stmt **st);
cdb_status cdb_sql_begin(sqlite3 *conn); /* BEGIN IMMEDIATE (busy-retried) */
cdb_status cdb_sql_commit(sqlite3 *conn);
void cdb_sql_rollback(sqlite3 *conn); /* never fails; used on error paths */
/* Ends the transaction begun on conn: commits when rc is CDB_OK (the commit's status),
** else rolls back (rc). */
cdb_status cdb_sql_end(sqlite3 *conn, cdb_status rc);
cdb_status cdb_sql_need_writer(const cdb_db *db, const char *what); /* CDB_INVALID on readers */
int64_t cdb_sql_wall_ns(void); /* the wall clock written into catalog rows */
cdb_status cdb_sql_meta_get_int(cdb_db *db, const char *key, int64_t *v);
cdb_status cdb_sql_meta_set_int(cdb_db *db, const char *key, int64_t v);
/* A text meta value (heap copy); CDB_CORRUPT when the key is missing. */
cdb_status cdb_sql_meta_get_text(cdb_db *db, const char *key, char **out);
cdb_status cdb_sql_meta_set_text(cdb_db *db, const char *key, const char *v);
/* Steps a one-shot statement expecting DONE (or a row); finalizes it. */
cdb_status cdb_sql_step_done(sqlite3 *conn, sqlite3_stmt *st, const char *what);
/* Steps a statement run once per row (the caller resets it) expecting DONE. */
cdb_status cdb_sql_step_row(sqlite3 *conn, sqlite3_stmt *st, const char *what);
/* Deletes the rows of table (a per-root table: root_id, relpath) of root root_id at and
** below the folder under (relative; NULL or "": the whole root), as a scan of under
** replaces what was recorded there. */
cdb_status cdb_sql_delete_under(cdb_db *db, const char *table, int64_t root_id,
                                const char *under, const char *what);
/* Heap copy of a BLOB/TEXT column, NUL-terminated; NULL on OOM. */
char *cdb_sql_column_strdup(sqlite3_stmt *st, int col);
/* One integer from sql, with ?1 bound to arg when it has a parameter. */
cdb_status cdb_sql_count(cdb_db *db, const char *sql, int64_t arg, int64_t *out);
/* The ok files of root_id (0: every root) that have does not vouch for, in ascending id:
** fn(id, ud) for each (nonzero stops). have, a catalog statement the caller prepared and
** bound (stepped and reset here), yields (file_id, hash, usable) in ascending file_id, at
** most one row per file; a file lacks when it has no row, its row's usable is 0, or, with
** by_hash, the row's hash is not the file's (a file without a hash never matches). A merge
** of two scans in id order, not a lookup per file: at 10^5 files about half the CPU of
** SQLite's own anti-join (NOT EXISTS, LEFT JOIN). Both scans read one snapshot. */
cdb_status cdb_sql_ok_files_lacking(cdb_db *db, int64_t root_id, sqlite3_stmt *have, int by_hash,
                                    int (*fn)(int64_t id, void *ud), void *ud);
/* Opens one of the database's SQLite files: a writer read-write (create: may create
** it), a reader read-only, immutable when the file cannot be shared (cdb_db_params
** .readonly). */
cdb_status cdb_sql_open_conn(cdb_db *db, const char *path, int create, sqlite3 **out);
/* Busy handler with backoff, page cache, synchronous mode; query_only on readers. */
cdb_status cdb_sql_configure_conn(cdb_db *db, sqlite3 *conn);
/* fsyncs conn's database file and its WAL (when open) through SQLite's own
** descriptors; CDB_IO (CDB_NOSPACE) on failure. */
cdb_status cdb_sql_fsync_conn(sqlite3 *conn);
void cdb_sql_fsync_dir(const char *path);
/* Gives one connection's free space back: its WAL checkpointed into the file and
** emptied (TRUNCATE), then VACUUM when it has free pages. *freed += the bytes the
** file and its WAL shrank by (path: the database file, for measuring). Writer. */
cdb_status cdb_sql_vacuum(sqlite3 *conn, const char *path, int64_t *freed);
/* The move index's key: the hash's first 8 bytes as a big-endian int64. */
int64_t cdb_sql_hash_key(const uint8_t hash[CDB_DB_HASH_BYTES]);

/* ---- schema (schema.c) ---- */
/* Schema version of the open catalog: 0 for an empty file, CDB_CORRUPT for a
** SQLite file that is not a clipdb catalog. Reads only. */
cdb_status cdb_schema_read_version(cdb_db *db, int64_t *v);
/* Runs migrations from+1 .. CDB_DB_SCHEMA_VERSION, each in its own transaction. */
cdb_status cdb_schema_migrate(cdb_db *db, int64_t from);

/* ---- shards (shard.c) ---- */
/* The open connection for shard id (opened and identity-checked on first use).
** CDB_CORRUPT names the shard when it is missing, truncated or foreign. */
cdb_status cdb_shard_get(cdb_db *db, int32_t id, db_shard **out);
/* Creates the shard file for id (or adopts a valid leftover of a rolled-back
** creation) and its catalog row, inside the caller's catalog transaction. */
cdb_status cdb_shard_create(cdb_db *db, int32_t id);
/* Removes the shard files the catalog does not list and that hold no vector: what a
** run killed between creating a shard and the catalog commit that lists it leaves
** (the next writer's open calls it; the writer lock is held). */
void cdb_shard_sweep_unlisted(cdb_db *db);
/* Shard assignment during one step-1 transaction: the current shard is read once
** and reservations are summed in memory, then written by cdb_shard_alloc_flush. */
typedef struct db_shard_alloc {
    int32_t cur; /* 0 = not read yet */
    int32_t max_id;
    int64_t used;    /* bytes reserved in cur, including `pending` */
    int64_t pending; /* not yet written to the catalog */
} db_shard_alloc;
/* The shard new files go to, sealing the current one and creating the next when
** `need` more bytes would exceed the capacity; reserves need bytes in it. Inside
** the caller's catalog transaction. */
cdb_status cdb_shard_for_new(cdb_db *db, db_shard_alloc *a, int64_t need, int32_t *id);
cdb_status cdb_shard_alloc_flush(cdb_db *db, db_shard_alloc *a);
/* Quick on-disk check of one shard file; fills msg and returns a problem kind, or 0. */
int cdb_shard_check_file(cdb_db *db, int32_t id, char *msg, size_t msg_len);
void cdb_shard_close_all(cdb_db *db); /* stops the background checkpointer first */
/* Background checkpoints (writer handles): conn's WAL (the catalog's or a shard's)
** is checkpointed by a thread of this handle, on its own short-lived connection,
** at the same size as SQLite's autocheckpoint would, instead of by the commit that
** crossed the mark, so the writer never waits for a checkpoint's copying and
** fsyncs. Same checkpoints, same sync mode: durability and crash safety are
** unchanged. */
cdb_status cdb_shard_ckpt_attach(cdb_db *db, sqlite3 *conn);
void cdb_shard_close_one(cdb_db *db, int32_t id);
/* A claim of the catalog's vector directory: file_id has a vector of model_id in
** shard (its files.shard; 0 = none, never present). */
typedef struct db_claim {
    int32_t shard;
    int64_t model_id, file_id;
    int present; /* set by cdb_shard_check_claims */
} db_claim;
/* What cdb_shard_check_claims makes of a shard it cannot open (missing, damaged). */
enum { DB_UNREADABLE_FAIL, DB_UNREADABLE_ABSENT, DB_UNREADABLE_PRESENT };
/* Checks n claims against the shards: sorts c by (shard, file, model) and reads each
** shard once, in one read transaction (point lookups in key order). A shard that
** cannot be opened fails the call (CDB_CORRUPT, DB_UNREADABLE_FAIL) or has its claims
** set absent or present. */
cdb_status cdb_shard_check_claims(cdb_db *db, db_claim *c, size_t n, int unreadable);
void cdb_shard_path(const cdb_db *db, int32_t id, char *buf, size_t len);
void cdb_shard_decode_blob(const void *blob, int dim, float *out);

/* ---- photo metadata (photos.c) ---- */
/* Fills *p from the PHOTO_ROW_COLS of st's row, starting at column c; a file without a
** capture time gets its mtime. */
void cdb_photos_read_row(sqlite3_stmt *st, int c, cdb_db_photo *p);

/* ---- thumbnails (thumbs.c) ---- */
void cdb_thumbs_close(cdb_db *db);
/* Sets each row's thumb_current: an ok row with a hash whose thumbnail was made from that
** hash at px (cdb_db_thumb_current's rule); 0 for the others. */
cdb_status cdb_thumbs_mark_current(cdb_db *db, int px, cdb_db_folder_row *rows, int64_t n);
/* cdb_sql_vacuum of thumbs.db (none: nothing to do). Writer. */
cdb_status cdb_thumbs_vacuum(cdb_db *db, int64_t *freed);

#endif /* CDB_DB_INT_H */
