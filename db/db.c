/*
** db.c: opening and closing a clipdb database directory: the writer lock file,
** the catalog connection (WAL, synchronous mode, busy handler with backoff), the
** schema version check and forward migrations, and the SQLite helpers the other
** db/ files share (error mapping, statement cache, transactions).
** On-disk layout and invariants: db/README.md.
*/
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "db/db_int.h"

/* ---- SQLite helpers ------------------------------------------------------------ */

cdb_status db_sqlerr(sqlite3 *conn, int rc, const char *what) {
    const char *msg = conn ? sqlite3_errmsg(conn) : sqlite3_errstr(rc);
    const char *file = conn ? sqlite3_db_filename(conn, "main") : NULL;
    cdb_status st;
    switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED: st = CDB_BUSY; break;
    case SQLITE_NOMEM: st = CDB_NOMEM; break;
    case SQLITE_FULL: st = CDB_NOSPACE; break;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB: st = CDB_CORRUPT; break;
    case SQLITE_IOERR:
    case SQLITE_CANTOPEN:
    case SQLITE_READONLY:
    case SQLITE_PERM: st = CDB_IO; break;
    case SQLITE_CONSTRAINT:
    case SQLITE_RANGE:
    case SQLITE_TOOBIG: st = CDB_INVALID; break;
    case SQLITE_INTERRUPT: st = CDB_INTERRUPTED; break;
    default: st = CDB_ERROR; break;
    }
    if (st == CDB_BUSY)
        return cdb_seterr(st, "%s: %s (%s): still busy after the retry timeout", what, msg,
                          file && *file ? file : "sqlite");
    return cdb_seterr(st, "%s: %s (%s)", what, msg, file && *file ? file : "sqlite");
}

cdb_status db_exec(sqlite3 *conn, const char *sql) {
    int rc = sqlite3_exec(conn, sql, NULL, NULL, NULL);
    return rc == SQLITE_OK ? CDB_OK : db_sqlerr(conn, rc, "sql");
}

cdb_status db_prepare(sqlite3 *conn, const char *sql, sqlite3_stmt **st) {
    int rc = sqlite3_prepare_v3(conn, sql, -1, SQLITE_PREPARE_PERSISTENT, st, NULL);
    return rc == SQLITE_OK ? CDB_OK : db_sqlerr(conn, rc, "prepare");
}

static const char *const k_stmt_sql[ST_COUNT_] = {
    [ST_FILE_BY_PATH] = "SELECT id, state, hash, shard FROM files WHERE root_id=?1 AND relpath=?2",
    [ST_FILE_BY_ID] = "SELECT id, state, hash, shard, root_id FROM files WHERE id=?1",
    /* A recorded path is left alone (sqlite3_changes() == 0): the caller looks it up. */
    [ST_FILE_INSERT] = "INSERT INTO files(root_id, relpath, size, mtime_ns, hash, width, height,"
                       " state, shard, created_ns, updated_ns, hkey, dev, ino, ctime_ns)"
                       " VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, 1, ?8, ?9, ?9, ?20, ?21, ?22, ?23)"
                       " ON CONFLICT(root_id, relpath) DO NOTHING",
    [ST_FILE_SET_PENDING] = "UPDATE files SET state=1, shard=?2, updated_ns=?3 WHERE id=?1",
    [ST_FILE_SET_OK_NEW] = "UPDATE files SET state=2, updated_ns=?2 WHERE id=?1",
    [ST_FILE_SET_OK] = "UPDATE files SET state=2, size=?2, mtime_ns=?3, hash=?4, width=?5,"
                       " height=?6, error=NULL, updated_ns=?7, hkey=?20, dev=?21, ino=?22,"
                       " ctime_ns=?23 WHERE id=?1",
    /* ?9: the final state, 3 (error) or 1 (pending: a transient failure to retry) */
    [ST_FILE_SET_ERROR] = "UPDATE files SET state=?9, size=?2, mtime_ns=?3, hash=?4, width=?5,"
                          " height=?6, error=?8, updated_ns=?7, hkey=?20, dev=?21, ino=?22,"
                          " ctime_ns=?23 WHERE id=?1",
    [ST_FILE_SET_DELETED] = "UPDATE files SET state=4, error=NULL, updated_ns=?2 WHERE id=?1",
    [ST_DIR_GET] = "SELECT seq FROM vectors WHERE model_id=?1 AND file_id=?2",
    [ST_DIR_PUT] = "INSERT OR REPLACE INTO vectors(model_id, file_id, seq) VALUES(?1, ?2, ?3)",
    [ST_DIR_DEL] = "DELETE FROM vectors WHERE model_id=?1 AND file_id=?2",
    [ST_DIR_OF_FILE] = "SELECT model_id, seq FROM vectors WHERE file_id=?1",
    [ST_TOMB_PUT] = "INSERT INTO removed(seq, model_id, file_id) VALUES(?1, ?2, ?3)",
    [ST_SHARD_RESERVE] = "UPDATE shards SET bytes_reserved = bytes_reserved + ?2 WHERE id=?1",
    [ST_SHARD_CURRENT] = "SELECT id, bytes_reserved, sealed FROM shards ORDER BY id DESC LIMIT 1",
    [ST_FILE_RUN_OK] = "UPDATE files SET state=2, updated_ns=?3 WHERE id BETWEEN ?1 AND ?2"
                       " AND state=1",
    [ST_DIR_PUT_RUN] = "INSERT OR REPLACE INTO vectors(model_id, file_id, seq)"
                       " SELECT ?1, id, id + ?4 FROM files WHERE id BETWEEN ?2 AND ?3 ORDER BY id",
    [ST_HKEYS_LEVELS] = "SELECT (SELECT count(*) FROM hkeys_new), (SELECT max(id) FROM files)",
    [ST_HKEY_PUT] = "INSERT OR IGNORE INTO hkeys_new(hkey, file_id) VALUES(?1, ?2)",
    [ST_HKEY_PUT_RUN] = "INSERT OR IGNORE INTO hkeys_new(hkey, file_id) SELECT hkey, id FROM files"
                        " WHERE id BETWEEN ?1 AND ?2 AND hkey IS NOT NULL",
};

cdb_status db_stmt(cdb_db *db, int which, sqlite3_stmt **st) {
    if (!db->st[which]) {
        cdb_status rc = db_prepare(db->cat, k_stmt_sql[which], &db->st[which]);
        if (rc != CDB_OK) return rc;
    }
    sqlite3_reset(db->st[which]);
    sqlite3_clear_bindings(db->st[which]);
    *st = db->st[which];
    return CDB_OK;
}

cdb_status db_begin(sqlite3 *conn) {
    int rc = sqlite3_exec(conn, "BEGIN IMMEDIATE", NULL, NULL, NULL);
    return rc == SQLITE_OK ? CDB_OK : db_sqlerr(conn, rc, "begin transaction");
}

cdb_status db_commit(sqlite3 *conn) {
    int rc = sqlite3_exec(conn, "COMMIT", NULL, NULL, NULL);
    if (rc == SQLITE_OK) return CDB_OK;
    cdb_status st = db_sqlerr(conn, rc, "commit");
    db_rollback(conn);
    return st;
}

void db_rollback(sqlite3 *conn) {
    if (conn && !sqlite3_get_autocommit(conn)) sqlite3_exec(conn, "ROLLBACK", NULL, NULL, NULL);
}

cdb_status db_writer(const cdb_db *db, const char *what) {
    if (db->readonly)
        return cdb_seterr(CDB_INVALID, "%s: the database %s was opened read-only", what, db->dir);
    return CDB_OK;
}

int64_t db_wall_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

cdb_status db_meta_get_int(cdb_db *db, const char *key, int64_t *v) {
    sqlite3_stmt *st = NULL;
    cdb_status rc = db_prepare(db->cat, "SELECT value FROM meta WHERE key=?1", &st);
    if (rc != CDB_OK) return rc;
    sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
    int s = sqlite3_step(st);
    if (s == SQLITE_ROW)
        *v = sqlite3_column_int64(st, 0);
    else if (s == SQLITE_DONE)
        rc = cdb_seterr(CDB_NOTFOUND, "meta key %s not found in %s/catalog.db", key, db->dir);
    else
        rc = db_sqlerr(db->cat, s, "read meta");
    sqlite3_finalize(st);
    return rc;
}

cdb_status db_meta_set_int(cdb_db *db, const char *key, int64_t v) {
    sqlite3_stmt *st = NULL;
    cdb_status rc =
        db_prepare(db->cat, "INSERT OR REPLACE INTO meta(key, value) VALUES(?1, ?2)", &st);
    if (rc != CDB_OK) return rc;
    sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, v);
    int s = sqlite3_step(st);
    if (s != SQLITE_DONE) rc = db_sqlerr(db->cat, s, "write meta");
    sqlite3_finalize(st);
    return rc;
}

static cdb_status meta_set_text(cdb_db *db, const char *key, const char *v) {
    sqlite3_stmt *st = NULL;
    cdb_status rc =
        db_prepare(db->cat, "INSERT OR REPLACE INTO meta(key, value) VALUES(?1, ?2)", &st);
    if (rc != CDB_OK) return rc;
    sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, v, -1, SQLITE_STATIC);
    int s = sqlite3_step(st);
    if (s != SQLITE_DONE) rc = db_sqlerr(db->cat, s, "write meta");
    sqlite3_finalize(st);
    return rc;
}

static cdb_status meta_get_text(cdb_db *db, const char *key, char **out) {
    sqlite3_stmt *st = NULL;
    cdb_status rc = db_prepare(db->cat, "SELECT value FROM meta WHERE key=?1", &st);
    if (rc != CDB_OK) return rc;
    sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
    int s = sqlite3_step(st);
    if (s == SQLITE_ROW) {
        const char *t = (const char *)sqlite3_column_text(st, 0);
        *out = cdb_strdup(t ? t : "");
        if (!*out) rc = cdb_seterr(CDB_NOMEM, "out of memory");
    } else if (s == SQLITE_DONE) {
        rc = cdb_seterr(CDB_CORRUPT, "%s/catalog.db: meta key %s missing", db->dir, key);
    } else {
        rc = db_sqlerr(db->cat, s, "read meta");
    }
    sqlite3_finalize(st);
    return rc;
}

/* Bounded retry with exponential backoff (1, 2, 4, ... 64, then 100 ms) until
** busy_timeout_ms have been slept for this one wait; then SQLite returns BUSY,
** which db_sqlerr turns into CDB_BUSY. */
static int busy_cb(void *ud, int n) {
    const cdb_db *db = ud;
    int64_t slept = 0;
    for (int k = 0; k < n; k++) slept += k < 7 ? (1 << k) : 100;
    if (slept >= db->busy_timeout_ms) return 0;
    int ms = n < 7 ? (1 << n) : 100;
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    return 1;
}

/* "file:" URI of a path, with everything but unreserved characters and '/'
** percent-encoded (SQLite decodes %HH; '?', '#' and '%' would otherwise end or
** garble the path). */
static void path_uri(const char *path, const char *query, char *buf, size_t size) {
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    o += (size_t)snprintf(buf, size, "file:");
    for (const unsigned char *p = (const unsigned char *)path; *p && o + 4 < size; p++) {
        int plain = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                    (*p >= '0' && *p <= '9') || strchr("/-._~", *p);
        if (plain) {
            buf[o++] = (char)*p;
        } else {
            buf[o++] = '%';
            buf[o++] = hex[*p >> 4];
            buf[o++] = hex[*p & 15];
        }
    }
    snprintf(buf + o, size > o ? size - o : 0, "?%s", query);
}

static int busy_cb(void *ud, int n);

/* A reader's first read: where a read-only open of a WAL database fails (no -shm
** and none can be created), SQLite says so at the first statement. A writer busy
** with a checkpoint or a WAL restart is waited for as everywhere else. */
static int probe_read(cdb_db *db, sqlite3 *conn) {
    sqlite3_busy_handler(conn, busy_cb, db);
    return sqlite3_exec(conn, "SELECT count(*) FROM sqlite_master", NULL, NULL, NULL);
}

cdb_status db_open_conn(cdb_db *db, const char *path, int create, sqlite3 **out) {
    char uri[8400];
    int s;
    *out = NULL;
    if (!db->readonly) {
        int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | (create ? SQLITE_OPEN_CREATE : 0);
        s = sqlite3_open_v2(path, out, flags, NULL);
        return s == SQLITE_OK ? CDB_OK : db_sqlerr(*out, s, "open");
    }
    /* Readers never write: mode=ro opens the files read-only and, while a writer (or
    ** the leftovers of a killed one) keeps a -shm file, shares the WAL index read-only,
    ** so they see every committed batch. */
    path_uri(path, "mode=ro", uri, sizeof uri);
    s = sqlite3_open_v2(uri, out, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX,
                        NULL);
    if (s == SQLITE_OK) s = probe_read(db, *out);
    if (s == SQLITE_OK) return CDB_OK;
    if ((s & 0xff) != SQLITE_READONLY && (s & 0xff) != SQLITE_CANTOPEN)
        return db_sqlerr(*out, s, "open");
    /* A read-only folder (or mount) and no writer: there is no -shm to share and none
    ** may be created. No -wal either means the database file is complete: read it
    ** as immutable (no locks, no -shm). A -wal that cannot be shared is a killed
    ** writer's: its last commits are not visible until a writer opens the database. */
    char wal[4200];
    snprintf(wal, sizeof wal, "%s-wal", path);
    if (access(wal, F_OK) == 0)
        CDB_LOG_WARN("db: %s is read-only and has a write-ahead log that cannot be shared; "
                     "reading without its last commits (open it once for writing to fold them in)",
                     path);
    sqlite3_close_v2(*out);
    *out = NULL;
    path_uri(path, "immutable=1", uri, sizeof uri);
    s = sqlite3_open_v2(uri, out, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX,
                        NULL);
    if (s == SQLITE_OK) s = probe_read(db, *out);
    if (s == SQLITE_OK) CDB_LOG_DEBUG("db: %s opened immutable (read-only, no writer)", path);
    return s == SQLITE_OK ? CDB_OK : db_sqlerr(*out, s, "open");
}

cdb_status db_configure_conn(cdb_db *db, sqlite3 *conn) {
    sqlite3_busy_handler(conn, busy_cb, db);
    sqlite3_extended_result_codes(conn, 1);
    /* 16 MiB page cache. No mmap: a shard truncated behind our back would SIGBUS.
    ** Statement journals (the multi-row statements of a commit's step 3) and temp
    ** b-trees in memory: otherwise each spills to a new temp file past 64 KiB. */
    cdb_status rc = db_exec(conn, "PRAGMA cache_size=-16384; PRAGMA temp_store=MEMORY");
    if (rc != CDB_OK) return rc;
    if (db->readonly) return db_exec(conn, "PRAGMA query_only=1");
    return db_exec(conn, db->sync == CDB_DB_SYNC_NORMAL ? "PRAGMA synchronous=NORMAL"
                                                        : "PRAGMA synchronous=FULL");
}

/* ---- writer lock ----------------------------------------------------------------- */

/* Open-file-description locks (Linux) conflict between two handles of one process
** too, and vanish with the process that holds them: a lock file whose pid is dead
** is simply lockable again ("stale lock taken over"). */
#ifdef F_OFD_SETLK
#define DB_SETLK F_OFD_SETLK
#define DB_GETLK F_OFD_GETLK
#else
#define DB_SETLK F_SETLK
#define DB_GETLK F_GETLK
#endif

static int lock_read_pid(int fd) {
    char buf[32] = {0};
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    return n > 0 ? atoi(buf) : 0;
}

cdb_status cdb_db_lock_info(const char *dir, int *pid, int *held) {
    char path[4096];
    snprintf(path, sizeof path, "%s/lock", dir);
    *pid = 0;
    *held = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) return CDB_OK;
        return cdb_seterr(CDB_IO, "open %s: %s", path, strerror(errno));
    }
    *pid = lock_read_pid(fd);
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    if (fcntl(fd, DB_GETLK, &fl) == 0) *held = fl.l_type != F_UNLCK;
    close(fd);
    return CDB_OK;
}

static cdb_status lock_acquire(cdb_db *db, int wait_ms) {
    char path[4096];
    snprintf(path, sizeof path, "%s/lock", db->dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return cdb_seterr(CDB_IO, "open %s: %s", path, strerror(errno));
    int64_t t0 = cdb_now_ns();
    for (;;) {
        struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
        if (fcntl(fd, DB_SETLK, &fl) == 0) break;
        if (errno != EAGAIN && errno != EACCES) {
            int e = errno;
            close(fd);
            return cdb_seterr(CDB_IO, "lock %s: %s", path, strerror(e));
        }
        int64_t waited_ms = (cdb_now_ns() - t0) / 1000000;
        if (wait_ms == 0 || (wait_ms > 0 && waited_ms >= wait_ms)) {
            int pid = lock_read_pid(fd);
            close(fd);
            if (wait_ms == 0)
                return cdb_seterr(CDB_BUSY,
                                  "database %s is in use by another writer (pid %d); wait for "
                                  "it to finish or pass --wait",
                                  db->dir, pid);
            return cdb_seterr(CDB_BUSY,
                              "database %s is still in use by another writer (pid %d) after "
                              "waiting %d ms",
                              db->dir, pid, wait_ms);
        }
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
    int old = lock_read_pid(fd);
    if (old > 0 && old != (int)getpid())
        CDB_LOG_INFO("db: took over the writer lock of %s left by pid %d (no longer running)",
                     db->dir, old);
    char buf[32];
    int n = snprintf(buf, sizeof buf, "%d\n", (int)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, buf, (size_t)n, 0) != n) {
        int e = errno;
        close(fd);
        return cdb_seterr(CDB_IO, "write %s: %s", path, strerror(e));
    }
    db->lock_fd = fd;
    return CDB_OK;
}

/* ---- schema and migrations ---------------------------------------------------------- */

/* Migration N brings a catalog from schema N-1 to N. Append only; each runs in one
** transaction together with the schema_version bump. */
static const char k_schema_v1[] =
    "CREATE TABLE meta(key TEXT PRIMARY KEY, value);"
    "CREATE TABLE models(id INTEGER PRIMARY KEY, weights_hash TEXT NOT NULL UNIQUE,"
    " name TEXT NOT NULL, dim INTEGER NOT NULL CHECK(dim > 0), info TEXT,"
    " is_default INTEGER NOT NULL DEFAULT 0, created_ns INTEGER NOT NULL);"
    "CREATE TABLE roots(id INTEGER PRIMARY KEY, path BLOB NOT NULL UNIQUE,"
    " created_ns INTEGER NOT NULL);"
    "CREATE TABLE files(id INTEGER PRIMARY KEY AUTOINCREMENT,"
    " root_id INTEGER NOT NULL REFERENCES roots(id), relpath BLOB NOT NULL,"
    " size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, hash BLOB,"
    " width INTEGER NOT NULL DEFAULT 0, height INTEGER NOT NULL DEFAULT 0,"
    " state INTEGER NOT NULL CHECK(state BETWEEN 1 AND 4), error TEXT, shard INTEGER,"
    " created_ns INTEGER NOT NULL, updated_ns INTEGER NOT NULL, UNIQUE(root_id, relpath));"
    "CREATE INDEX files_hash ON files(root_id, hash);"
    "CREATE INDEX files_state ON files(state);"
    "CREATE TABLE shards(id INTEGER PRIMARY KEY, bytes_reserved INTEGER NOT NULL DEFAULT 0,"
    " sealed INTEGER NOT NULL DEFAULT 0, created_ns INTEGER NOT NULL);"
    "CREATE TABLE runs(id INTEGER PRIMARY KEY, kind TEXT NOT NULL, status TEXT, summary TEXT,"
    " started_ns INTEGER NOT NULL, finished_ns INTEGER);";

/* v2: the vector directory (which (model, file) has a vector, with its sequence
** number) and the removal log, for incremental index updates and verify. */
static const char k_schema_v2[] =
    "CREATE TABLE vectors(model_id INTEGER NOT NULL, file_id INTEGER NOT NULL,"
    " seq INTEGER NOT NULL, PRIMARY KEY(file_id, model_id)) WITHOUT ROWID;"
    "CREATE INDEX vectors_seq ON vectors(model_id, seq);"
    "CREATE TABLE removed(seq INTEGER PRIMARY KEY, model_id INTEGER NOT NULL,"
    " file_id INTEGER NOT NULL);"
    "CREATE INDEX removed_model ON removed(model_id, seq);"
    "INSERT OR IGNORE INTO meta(key, value) VALUES('generation', 0);";

/* v3: move detection looks files up by an 8-byte integer prefix of the hash
** (files.hkey) instead of the 16-byte blob: a random insert into a much smaller
** index per stored file (the main cost of storing a new file; db/README.md). */
static const char k_schema_v3_index[] =
    "DROP INDEX IF EXISTS files_hash;"
    "CREATE INDEX IF NOT EXISTS files_hkey ON files(root_id, hkey);"
    /* Only unfinished/error/deleted files are indexed by state: storing an ok file
    ** no longer adds an entry (counts of ok = all - the others). */
    "DROP INDEX IF EXISTS files_state;"
    "CREATE INDEX IF NOT EXISTS files_notok ON files(state) WHERE state<>2;";

static cdb_status migrate_v3(cdb_db *db) {
    sqlite3_stmt *st = NULL, *rd = NULL, *up = NULL;
    int has_col = 0, s;
    /* The column may exist already (a catalog whose version was set back). */
    cdb_status rc =
        db_prepare(db->cat, "SELECT 1 FROM pragma_table_info('files') WHERE name='hkey'", &st);
    if (rc != CDB_OK) return rc;
    has_col = sqlite3_step(st) == SQLITE_ROW;
    sqlite3_finalize(st);
    if (!has_col && (rc = db_exec(db->cat, "ALTER TABLE files ADD COLUMN hkey INTEGER")) != CDB_OK)
        return rc;
    rc = db_prepare(db->cat, "SELECT id, hash FROM files WHERE length(hash)=16", &rd);
    if (rc == CDB_OK) rc = db_prepare(db->cat, "UPDATE files SET hkey=?2 WHERE id=?1", &up);
    while (rc == CDB_OK && (s = sqlite3_step(rd)) == SQLITE_ROW) {
        sqlite3_reset(up);
        sqlite3_bind_int64(up, 1, sqlite3_column_int64(rd, 0));
        sqlite3_bind_int64(up, 2, db_hash_key(sqlite3_column_blob(rd, 1)));
        if ((s = sqlite3_step(up)) != SQLITE_DONE) break;
    }
    if (rc == CDB_OK && s != SQLITE_DONE) rc = db_sqlerr(db->cat, s, "migrate v3");
    sqlite3_finalize(rd);
    sqlite3_finalize(up);
    if (rc == CDB_OK) rc = db_exec(db->cat, k_schema_v3_index);
    return rc;
}

/* v1 -> v2 also fills the new directory from what the shards hold (all at seq 1). */
static cdb_status migrate_v2_fill(cdb_db *db) {
    sqlite3_stmt *sh = NULL, *ins = NULL, *rd = NULL;
    cdb_status rc = db_prepare(db->cat, "SELECT id FROM shards ORDER BY id", &sh);
    if (rc == CDB_OK)
        rc = db_prepare(db->cat,
                        "INSERT OR IGNORE INTO vectors(model_id, file_id, seq) VALUES(?1, ?2, 1)",
                        &ins);
    int64_t n = 0;
    while (rc == CDB_OK) {
        int s = sqlite3_step(sh);
        if (s == SQLITE_DONE) break;
        if (s != SQLITE_ROW) {
            rc = db_sqlerr(db->cat, s, "migrate v2");
            break;
        }
        db_shard *shard = NULL;
        if ((rc = db_shard_get(db, sqlite3_column_int(sh, 0), &shard)) != CDB_OK) break;
        if ((rc = db_prepare(shard->conn, "SELECT model_id, file_id FROM vectors", &rd)) != CDB_OK)
            break;
        while ((s = sqlite3_step(rd)) == SQLITE_ROW) {
            sqlite3_reset(ins);
            sqlite3_bind_int64(ins, 1, sqlite3_column_int64(rd, 0));
            sqlite3_bind_int64(ins, 2, sqlite3_column_int64(rd, 1));
            if ((s = sqlite3_step(ins)) != SQLITE_DONE) break;
            n++;
        }
        if (s != SQLITE_DONE) rc = db_sqlerr(db->cat, s, "migrate v2: copy shard directory");
        sqlite3_finalize(rd);
        rd = NULL;
    }
    if (rc == CDB_OK && n > 0) rc = db_meta_set_int(db, "generation", 1);
    sqlite3_finalize(sh);
    sqlite3_finalize(ins);
    return rc;
}

/* v5: the library model (issue 13). Roots know their kind (a folder, or a single
** file whose row has the empty relpath), whether walks follow symbolic links, and
** the outcome of their last scan; files record their identity (dev, inode, ctime)
** so a same-size, same-mtime replacement is seen; walk problems are kept per root
** for `clipdb errors`. Old rows get NULL identities: compared by size and mtime
** until the next scan records them without reading the files. Columns that exist
** already (a catalog whose version was set back) are left as they are. */
static const char *const k_v5_columns[][3] = {
    {"roots", "kind", "INTEGER NOT NULL DEFAULT 0"},
    {"roots", "follow_symlinks", "INTEGER NOT NULL DEFAULT 0"},
    {"roots", "no_exif", "INTEGER NOT NULL DEFAULT 0"},
    {"roots", "dev", "INTEGER"},
    {"roots", "scanned_ns", "INTEGER"},
    {"roots", "status", "TEXT"},
    {"files", "dev", "INTEGER"},
    {"files", "ino", "INTEGER"},
    {"files", "ctime_ns", "INTEGER"},
    {"models", "decode", "INTEGER NOT NULL DEFAULT 0"},
    {"models", "decode_settled", "INTEGER NOT NULL DEFAULT 1"},
};

static cdb_status add_column(cdb_db *db, const char *table, const char *col, const char *type) {
    sqlite3_stmt *st = NULL;
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT 1 FROM pragma_table_info('%s') WHERE name='%s'", table, col);
    cdb_status rc = db_prepare(db->cat, sql, &st);
    if (rc != CDB_OK) return rc;
    int has = sqlite3_step(st) == SQLITE_ROW;
    sqlite3_finalize(st);
    if (has) return CDB_OK;
    snprintf(sql, sizeof sql, "ALTER TABLE %s ADD COLUMN %s %s", table, col, type);
    return db_exec(db->cat, sql);
}

static cdb_status migrate_v5(cdb_db *db) {
    cdb_status rc = CDB_OK;
    for (size_t i = 0; i < sizeof k_v5_columns / sizeof k_v5_columns[0] && rc == CDB_OK; i++)
        rc = add_column(db, k_v5_columns[i][0], k_v5_columns[i][1], k_v5_columns[i][2]);
    if (rc == CDB_OK)
        rc = db_exec(db->cat,
                     "CREATE TABLE IF NOT EXISTS walk_problems(id INTEGER PRIMARY KEY,"
                     " root_id INTEGER NOT NULL, relpath BLOB NOT NULL, reason TEXT NOT NULL,"
                     " seen_ns INTEGER NOT NULL);"
                     "CREATE INDEX IF NOT EXISTS walk_problems_root ON walk_problems(root_id,"
                     " relpath);");
    return rc;
}

static cdb_status migrate(cdb_db *db, int64_t from) {
    cdb_status rc = CDB_OK;
    for (int64_t v = from + 1; v <= CDB_DB_SCHEMA_VERSION && rc == CDB_OK; v++) {
        if ((rc = db_begin(db->cat)) != CDB_OK) return rc;
        if (v == 1) {
            char uuid[33];
            uint8_t rnd[16];
            int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
            if (fd < 0 || read(fd, rnd, sizeof rnd) != (ssize_t)sizeof rnd) {
                int64_t t = db_wall_ns() ^ ((int64_t)getpid() << 32);
                for (int i = 0; i < 16; i++) rnd[i] = (uint8_t)(t >> ((i % 8) * 8)) ^ (uint8_t)i;
            }
            if (fd >= 0) close(fd);
            for (int i = 0; i < 16; i++) snprintf(uuid + 2 * i, 3, "%02x", rnd[i]);
            rc = db_exec(db->cat, k_schema_v1);
            if (rc == CDB_OK) rc = meta_set_text(db, "uuid", uuid);
            if (rc == CDB_OK) rc = meta_set_text(db, "created_by", CDB_VERSION_STRING);
            if (rc == CDB_OK) rc = db_meta_set_int(db, "created_ns", db_wall_ns());
            if (rc == CDB_OK) rc = db_meta_set_int(db, "shard_capacity", db->shard_capacity);
            if (rc == CDB_OK) {
                cdb_free(db->uuid);
                db->uuid = cdb_strdup(uuid);
            }
        } else if (v == 2) {
            rc = db_exec(db->cat, k_schema_v2);
            if (rc == CDB_OK) rc = migrate_v2_fill(db);
        } else if (v == 3) {
            rc = migrate_v3(db);
        } else if (v == 4) {
            rc = db_migrate_v4(db);
        } else if (v == 5) {
            rc = migrate_v5(db);
        }
        if (rc == CDB_OK) rc = db_meta_set_int(db, "schema_version", v);
        if (rc == CDB_OK) rc = meta_set_text(db, "last_writer", CDB_VERSION_STRING);
        if (rc == CDB_OK)
            rc = db_commit(db->cat);
        else
            db_rollback(db->cat);
        if (rc == CDB_OK && v > 1 && from > 0)
            CDB_LOG_INFO("db: migrated %s/catalog.db to schema %d", db->dir, (int)v);
    }
    return rc;
}

/* Schema version of the open catalog: 0 for an empty file, CDB_CORRUPT for a
** SQLite file that is not a clipdb catalog. Reads only. */
static cdb_status read_schema_version(cdb_db *db, int64_t *v) {
    sqlite3_stmt *st = NULL;
    cdb_status rc = db_prepare(db->cat, "SELECT count(*) FROM sqlite_master", &st);
    if (rc != CDB_OK) return cdb_errctx(rc, "%s/catalog.db", db->dir);
    int s = sqlite3_step(st);
    int64_t n = s == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
    if (s != SQLITE_ROW) rc = db_sqlerr(db->cat, s, "read catalog");
    sqlite3_finalize(st);
    if (rc != CDB_OK) return rc;
    if (n == 0) {
        *v = 0;
        return CDB_OK;
    }
    rc = db_meta_get_int(db, "schema_version", v);
    if (rc != CDB_OK)
        return cdb_seterr(CDB_CORRUPT, "%s/catalog.db is not a clipdb catalog (%s)", db->dir,
                          cdb_errmsg());
    return CDB_OK;
}

/* ---- open / close -------------------------------------------------------------------- */

cdb_db_params cdb_db_params_default(void) {
    cdb_db_params p;
    memset(&p, 0, sizeof p);
    p.sync = CDB_DB_SYNC_NORMAL; /* + cdb_db_flush at run end / close: db/README.md */
    return p;
}

static int is_dir(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

cdb_status cdb_db_open(const char *dir, const cdb_db_params *p, cdb_db **out) {
    cdb_db_params defp = cdb_db_params_default();
    cdb_status rc = CDB_OK;
    char path[4096];
    cdb_db *db = NULL;
    int64_t version = 0;
    *out = NULL;
    if (!p) p = &defp;
    if (!dir || !*dir) return cdb_seterr(CDB_INVALID, "cdb_db_open: empty directory name");
    if (p->create && p->readonly)
        return cdb_seterr(CDB_INVALID, "cdb_db_open: create needs a writer (readonly set)");
    db = cdb_calloc(1, sizeof *db);
    if (!db) return cdb_seterr(CDB_NOMEM, "out of memory");
    db->lock_fd = -1;
    db->readonly = p->readonly;
    db->busy_timeout_ms = p->busy_timeout_ms > 0 ? p->busy_timeout_ms : 10000;
    db->sync = p->sync;
    db->shard_capacity =
        p->shard_capacity_bytes > 0 ? p->shard_capacity_bytes : CDB_DB_DEFAULT_SHARD_CAPACITY;
    db->dir = strdup(dir);
    if (!db->dir) {
        rc = cdb_seterr(CDB_NOMEM, "out of memory");
        goto fail;
    }

    snprintf(path, sizeof path, "%s/catalog.db", dir);
    if (!is_dir(dir) || access(path, F_OK) != 0) {
        if (!p->create) {
            rc = cdb_seterr(CDB_NOTFOUND,
                            "no clipdb database at %s (create one with `clipdb init`)", dir);
            goto fail;
        }
        if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
            rc = cdb_seterr(CDB_IO, "mkdir %s: %s", dir, strerror(errno));
            goto fail;
        }
    }
    snprintf(path, sizeof path, "%s/shards", dir);
    if (!db->readonly && mkdir(path, 0755) != 0 && errno != EEXIST) {
        rc = cdb_seterr(CDB_IO, "mkdir %s: %s", path, strerror(errno));
        goto fail;
    }
    if (!db->readonly && (rc = lock_acquire(db, p->lock_wait_ms)) != CDB_OK) goto fail;

    snprintf(path, sizeof path, "%s/catalog.db", dir);
    if ((rc = db_open_conn(db, path, p->create, &db->cat)) != CDB_OK) {
        rc = cdb_errctx(rc, "open catalog");
        goto fail;
    }
    if ((rc = db_configure_conn(db, db->cat)) != CDB_OK) goto fail;
    /* Nothing is written before the version check: a newer database stays as is. */
    if ((rc = read_schema_version(db, &version)) != CDB_OK) goto fail;
    if (version > CDB_DB_SCHEMA_VERSION) {
        char *by = NULL;
        if (meta_get_text(db, "last_writer", &by) != CDB_OK) by = NULL;
        rc = cdb_seterr(CDB_VERSION,
                        "database %s has schema version %lld (last written by clipdb %s); this "
                        "clipdb %s supports up to %d: upgrade clipdb (nothing was changed)",
                        dir, (long long)version, by ? by : "?", CDB_VERSION_STRING,
                        CDB_DB_SCHEMA_VERSION);
        cdb_free(by);
        goto fail;
    }
    if (version < CDB_DB_SCHEMA_VERSION && db->readonly) {
        rc = cdb_seterr(CDB_VERSION,
                        "database %s has schema version %lld and needs a migration to %d; open "
                        "it once for writing (e.g. clipdb ingest) with this clipdb",
                        dir, (long long)version, CDB_DB_SCHEMA_VERSION);
        if (version == 0)
            rc = cdb_seterr(CDB_NOTFOUND, "no clipdb database at %s (empty catalog)", dir);
        goto fail;
    }
    if (!db->readonly && (rc = db_exec(db->cat, "PRAGMA journal_mode=WAL")) != CDB_OK) goto fail;
    /* Catalog pages are rewritten by every batch (steps 1 and 3): checkpoint less
    ** often (40 MiB of WAL) so each hot page is copied back once per checkpoint,
    ** not once per few batches. */
    if (!db->readonly && (rc = db_exec(db->cat, "PRAGMA wal_autocheckpoint=10000")) != CDB_OK)
        goto fail;
    if (version > 0) {
        if ((rc = meta_get_text(db, "uuid", &db->uuid)) != CDB_OK) goto fail;
        int64_t cap = 0;
        if (p->shard_capacity_bytes <= 0 && db_meta_get_int(db, "shard_capacity", &cap) == CDB_OK &&
            cap > 0)
            db->shard_capacity = cap;
    }
    if (version < CDB_DB_SCHEMA_VERSION && (rc = migrate(db, version)) != CDB_OK) goto fail;
    *out = db;
    return CDB_OK;
fail:
    cdb_db_close(db);
    return rc;
}

void db_fsync_dir(const char *path) {
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
}

static cdb_status fsync_path(const char *path, int must_exist) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT && !must_exist) return CDB_OK;
        return cdb_seterr(CDB_IO, "open %s: %s", path, strerror(errno));
    }
    /* fsync flushes the file's dirty pages whichever descriptor wrote them. */
    int r = fsync(fd), e = errno;
    close(fd);
    return r == 0 ? CDB_OK : cdb_seterr(CDB_IO, "fsync %s: %s", path, strerror(e));
}

cdb_status db_fsync_db_file(const char *path) {
    char wal[4200];
    snprintf(wal, sizeof wal, "%s-wal", path);
    cdb_status rc = fsync_path(wal, 0);
    if (rc == CDB_OK) rc = fsync_path(path, 1);
    return rc;
}

cdb_status cdb_db_flush(cdb_db *db) {
    char path[4200];
    cdb_status rc = CDB_OK;
    if (!db || db->readonly || !db->cat) return CDB_OK;
    int64_t changes = sqlite3_total_changes64(db->cat);
    int shards_dirty = 0;
    for (int i = 1; i < db->n_shards_alloc; i++) shards_dirty |= db->shards[i].unsynced;
    if (changes == db->synced_changes && !shards_dirty) return CDB_OK; /* nothing new */
    /* Shards before the catalog: an ok row must never be durable without its vector. */
    for (int i = 1; i < db->n_shards_alloc && rc == CDB_OK; i++) {
        db_shard *sh = &db->shards[i];
        if (!sh->conn || !sh->unsynced) continue;
        db_shard_path(db, sh->id, path, sizeof path);
        if ((rc = db_fsync_db_file(path)) == CDB_OK) sh->unsynced = 0;
    }
    if (rc == CDB_OK) {
        snprintf(path, sizeof path, "%s/shards", db->dir);
        db_fsync_dir(path);
        snprintf(path, sizeof path, "%s/catalog.db", db->dir);
        rc = db_fsync_db_file(path);
    }
    if (rc == CDB_OK) {
        db_fsync_dir(db->dir);
        db->synced_changes = changes;
    }
    return rc;
}

void cdb_db_close(cdb_db *db) {
    if (!db) return;
    if (!db->readonly && db->cat && db->uuid && cdb_db_flush(db) != CDB_OK)
        CDB_LOG_WARN("db: %s: could not make the last commits durable: %s", db->dir,
                     cdb_errmsg());
    for (int i = 0; i < ST_COUNT_; i++) sqlite3_finalize(db->st[i]);
    db_thumbs_close(db);
    db_shard_close_all(db);
    if (db->cat) sqlite3_close_v2(db->cat);
    if (db->lock_fd >= 0) close(db->lock_fd); /* releases the OFD lock */
    free(db->dir);
    cdb_free(db->uuid);
    cdb_free(db);
}

const char *cdb_db_dir(const cdb_db *db) { return db->dir; }
int cdb_db_is_readonly(const cdb_db *db) { return db->readonly; }

void cdb_db_set_commit_hook(cdb_db *db, cdb_db_commit_hook fn, void *ud) {
    db->hook = fn;
    db->hook_ud = ud;
}

void cdb_db_hash_buf(const void *buf, size_t n, uint8_t out[CDB_DB_HASH_BYTES]) {
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, XXH3_128bits(buf, n));
    memcpy(out, c.digest, CDB_DB_HASH_BYTES);
}
