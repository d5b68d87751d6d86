/*
** sql.c: the bottom of db/: the SQLite helpers every other db/ file uses and that
** call nothing else in db/ (error mapping to cdb_status, statements and the
** catalog's statement cache, transactions, the meta table, opening and configuring
** connections, fsync of a database file), and the hash key the move index uses.
** Layering (each file calls only those below it): db.c -> schema.c -> verify.c,
** roots.c -> batch.c -> catalog.c -> shard.c -> sql.c. db/README.md.
*/
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "db/db_int.h"

/* ---- SQLite helpers ------------------------------------------------------------ */

cdb_status cdb_sql_err(sqlite3 *conn, int rc, const char *what) {
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
    /* An I/O error of a write or fsync that ran out of space (SQLite says SQLITE_FULL
    ** only for some paths) is a full disk too.
    ** Its message ("disk I/O error") then says so, e.g. for a -shm file SQLite could
    ** not grow opening a WAL database on a full disk. */
    if (st == CDB_IO && conn && cdb_errno_status(sqlite3_system_errno(conn)) == CDB_NOSPACE) {
        st = CDB_NOSPACE;
        msg = "no space left on the device";
    }
    if (st == CDB_BUSY)
        return cdb_seterr(st, "%s: %s (%s): still busy after the retry timeout", what, msg,
                          file && *file ? file : "sqlite");
    return cdb_seterr(st, "%s: %s (%s)", what, msg, file && *file ? file : "sqlite");
}

cdb_status cdb_sql_exec(sqlite3 *conn, const char *sql) {
    int rc = sqlite3_exec(conn, sql, NULL, NULL, NULL);
    return rc == SQLITE_OK ? CDB_OK : cdb_sql_err(conn, rc, "sql");
}

cdb_status cdb_sql_prepare(sqlite3 *conn, const char *sql, sqlite3_stmt **st) {
    int rc = sqlite3_prepare_v3(conn, sql, -1, SQLITE_PREPARE_PERSISTENT, st, NULL);
    return rc == SQLITE_OK ? CDB_OK : cdb_sql_err(conn, rc, "prepare");
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
    [ST_PHOTO_GET] = "SELECT " PHOTO_ROW_COLS PHOTO_ROW_FROM " WHERE f.id = ?1",
    [ST_FILE_GET] = "SELECT " FILE_COLS ", r.path, " PHOTO_ROW_COLS PHOTO_ROW_FROM
                    " LEFT JOIN roots r ON r.id = f.root_id WHERE f.id=?1 AND (?2 = 0 OR EXISTS"
                    " (SELECT 1 FROM vectors v WHERE v.model_id=?2 AND v.file_id=?1))",
    [ST_FILE_LOOKUP] = "SELECT " FILE_COLS " FROM files f WHERE root_id=?1 AND relpath=?2",
    [ST_FOLDER_ROWS] = "SELECT f.id, f.relpath, f.size, f.mtime_ns, f.hash, f.width, f.height,"
                       " f.state, f.shard, f.dev, f.ino, f.ctime_ns, EXISTS(SELECT 1 FROM vectors"
                       " v WHERE v.file_id = f.id AND v.model_id = ?3) FROM files f"
                       " WHERE f.root_id = ?1 AND f.relpath >= ?2 ORDER BY f.relpath",
    [ST_HKEY_PUT_RUN] = "INSERT OR IGNORE INTO hkeys_new(hkey, file_id) SELECT hkey, id FROM files"
                        " WHERE id BETWEEN ?1 AND ?2 AND hkey IS NOT NULL",
    [ST_FILE_MOVE] = "UPDATE files SET relpath=?2, size=?3, mtime_ns=?4, hash=?5, width=?6,"
                     " height=?7, updated_ns=?8, hkey=?20, dev=?21, ino=?22, ctime_ns=?23,"
                     " root_id=(CASE WHEN ?9 > 0 THEN ?9 ELSE root_id END) WHERE id=?1",
    [ST_FILE_TOUCH] = "UPDATE files SET size=?2, mtime_ns=?3, hash=?4, width=?5, height=?6,"
                      " updated_ns=?7, hkey=?20, dev=?21, ino=?22, ctime_ns=?23"
                      " WHERE id=?1 AND state=2",
};

cdb_status cdb_sql_stmt(cdb_db *db, int which, sqlite3_stmt **st) {
    if (!db->st[which]) {
        cdb_status rc = cdb_sql_prepare(db->cat, k_stmt_sql[which], &db->st[which]);
        if (rc != CDB_OK) return rc;
    }
    sqlite3_reset(db->st[which]);
    sqlite3_clear_bindings(db->st[which]);
    *st = db->st[which];
    return CDB_OK;
}

cdb_status cdb_sql_begin(sqlite3 *conn) {
    int rc = sqlite3_exec(conn, "BEGIN IMMEDIATE", NULL, NULL, NULL);
    return rc == SQLITE_OK ? CDB_OK : cdb_sql_err(conn, rc, "begin transaction");
}

cdb_status cdb_sql_commit(sqlite3 *conn) {
    int rc = sqlite3_exec(conn, "COMMIT", NULL, NULL, NULL);
    if (rc == SQLITE_OK) return CDB_OK;
    cdb_status st = cdb_sql_err(conn, rc, "commit");
    cdb_sql_rollback(conn);
    return st;
}

void cdb_sql_rollback(sqlite3 *conn) {
    if (conn && !sqlite3_get_autocommit(conn)) sqlite3_exec(conn, "ROLLBACK", NULL, NULL, NULL);
}

cdb_status cdb_sql_end(sqlite3 *conn, cdb_status rc) {
    if (rc == CDB_OK) return cdb_sql_commit(conn);
    cdb_sql_rollback(conn);
    return rc;
}

cdb_status cdb_sql_need_writer(const cdb_db *db, const char *what) {
    if (db->readonly)
        return cdb_seterr(CDB_INVALID, "%s: the database %s was opened read-only", what, db->dir);
    return CDB_OK;
}

int64_t cdb_sql_wall_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

cdb_status cdb_sql_meta_get_int(cdb_db *db, const char *key, int64_t *v) {
    sqlite3_stmt *st = NULL;
    cdb_status rc = cdb_sql_prepare(db->cat, "SELECT value FROM meta WHERE key=?1", &st);
    if (rc != CDB_OK) return rc;
    sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
    int s = sqlite3_step(st);
    if (s == SQLITE_ROW)
        *v = sqlite3_column_int64(st, 0);
    else if (s == SQLITE_DONE)
        rc = cdb_seterr(CDB_NOTFOUND, "meta key %s not found in %s/catalog.db", key, db->dir);
    else
        rc = cdb_sql_err(db->cat, s, "read meta");
    sqlite3_finalize(st);
    return rc;
}

cdb_status cdb_sql_meta_set_int(cdb_db *db, const char *key, int64_t v) {
    sqlite3_stmt *st = NULL;
    cdb_status rc =
        cdb_sql_prepare(db->cat, "INSERT OR REPLACE INTO meta(key, value) VALUES(?1, ?2)", &st);
    if (rc != CDB_OK) return rc;
    sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, v);
    int s = sqlite3_step(st);
    if (s != SQLITE_DONE) rc = cdb_sql_err(db->cat, s, "write meta");
    sqlite3_finalize(st);
    return rc;
}

cdb_status cdb_sql_meta_set_text(cdb_db *db, const char *key, const char *v) {
    sqlite3_stmt *st = NULL;
    cdb_status rc =
        cdb_sql_prepare(db->cat, "INSERT OR REPLACE INTO meta(key, value) VALUES(?1, ?2)", &st);
    if (rc != CDB_OK) return rc;
    sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, v, -1, SQLITE_STATIC);
    int s = sqlite3_step(st);
    if (s != SQLITE_DONE) rc = cdb_sql_err(db->cat, s, "write meta");
    sqlite3_finalize(st);
    return rc;
}

cdb_status cdb_sql_meta_get_text(cdb_db *db, const char *key, char **out) {
    sqlite3_stmt *st = NULL;
    cdb_status rc = cdb_sql_prepare(db->cat, "SELECT value FROM meta WHERE key=?1", &st);
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
        rc = cdb_sql_err(db->cat, s, "read meta");
    }
    sqlite3_finalize(st);
    return rc;
}

/* Bounded retry with exponential backoff (1, 2, 4, ... 64, then 100 ms) until
** busy_timeout_ms have been slept for this one wait; then SQLite returns BUSY,
** which cdb_sql_err turns into CDB_BUSY. */
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

/* A reader's first read: where a read-only open of a WAL database fails (no -shm
** and none can be created), SQLite says so at the first statement. A writer busy
** with a checkpoint or a WAL restart is waited for as everywhere else. */
static int probe_read(cdb_db *db, sqlite3 *conn) {
    sqlite3_busy_handler(conn, busy_cb, db);
    return sqlite3_exec(conn, "SELECT count(*) FROM sqlite_master", NULL, NULL, NULL);
}

/* A reader's open: shared (mode=ro) while a writer keeps the WAL index, else as an
** immutable snapshot. One try: an SQLite code. may_snapshot 0: a -shm exists, so a
** writer may be there and a failed shared open (SQLite's READONLY_RECOVERY /
** CANTINIT / CANTLOCK while the writer sets up its WAL index) is returned to be tried
** again instead of reading the file as a snapshot while it changes. */
static int open_reader_once(cdb_db *db, const char *path, int may_snapshot, sqlite3 **out) {
    char uri[8400], wal[4200];
    int s;
    /* Readers never write: mode=ro opens the files read-only and, while a writer (or
    ** the leftovers of a killed one) keeps a -shm file, shares the WAL index read-only,
    ** so they see every committed batch. */
    path_uri(path, "mode=ro", uri, sizeof uri);
    s = sqlite3_open_v2(uri, out, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX,
                        NULL);
    if (s == SQLITE_OK) s = probe_read(db, *out);
    if (s == SQLITE_OK) return s;
    if ((s & 0xff) != SQLITE_READONLY && (s & 0xff) != SQLITE_CANTOPEN) return s;
    if (!may_snapshot) {
        char shm[4200];
        snprintf(shm, sizeof shm, "%s-shm", path);
        if (access(shm, F_OK) == 0) return SQLITE_BUSY;
    }
    /* A read-only folder (or mount) and no writer: there is no -shm to share and none
    ** may be created. No -wal either means the database file is complete: read it
    ** as immutable (no locks, no -shm). A -wal that cannot be shared is a killed
    ** writer's: its last commits are not visible until a writer opens the database. */
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
    return s;
}

cdb_status cdb_sql_open_conn(cdb_db *db, const char *path, int create, sqlite3 **out) {
    int s;
    *out = NULL;
    if (!db->readonly) {
        int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | (create ? SQLITE_OPEN_CREATE : 0);
        s = sqlite3_open_v2(path, out, flags, NULL);
        return s == SQLITE_OK ? CDB_OK : cdb_sql_err(*out, s, "open");
    }
    /* A writer may be between its connections to this file right now (closing it:
    ** the last checkpoint copying pages in, its WAL going away): the file can then read
    ** as malformed for a moment. Such an open is tried again every 10 ms for up to
    ** two seconds, or the handle's busy timeout when that is shorter; a file that stays
    ** malformed is reported. */
    /* And while a -shm exists (a writer is there, or a killed one left it), the shared
    ** open is tried for the first half of that window before the snapshot read. */
    int tries = db->busy_timeout_ms / 10;
    tries = tries < 2 ? 2 : tries > 200 ? 200 : tries;
    for (int attempt = 0;; attempt++) {
        s = open_reader_once(db, path, attempt >= tries / 2, out);
        if (s == SQLITE_OK) return CDB_OK;
        if (((s & 0xff) != SQLITE_CORRUPT && (s & 0xff) != SQLITE_NOTADB && s != SQLITE_BUSY) ||
            attempt >= tries)
            return cdb_sql_err(*out, s, "open");
        sqlite3_close_v2(*out);
        *out = NULL;
        usleep(10000);
    }
}

cdb_status cdb_sql_configure_conn(cdb_db *db, sqlite3 *conn) {
    sqlite3_busy_handler(conn, busy_cb, db);
    sqlite3_extended_result_codes(conn, 1);
    /* 16 MiB page cache. No mmap: a shard truncated behind our back would SIGBUS.
    ** Statement journals (the multi-row statements of a commit's step 3) and temp
    ** b-trees in memory: otherwise each spills to a new temp file past 64 KiB. */
    cdb_status rc = cdb_sql_exec(conn, "PRAGMA cache_size=-16384; PRAGMA temp_store=MEMORY");
    if (rc != CDB_OK) return rc;
    if (db->readonly) return cdb_sql_exec(conn, "PRAGMA query_only=1");
    return cdb_sql_exec(conn, db->sync == CDB_DB_SYNC_NORMAL ? "PRAGMA synchronous=NORMAL"
                                                        : "PRAGMA synchronous=FULL");
}

/* ---- statements that return one value ------------------------------------------ */

/* Steps a one-shot statement expecting DONE; finalizes it. */
cdb_status cdb_sql_step_done(sqlite3 *conn, sqlite3_stmt *st, const char *what) {
    int s = sqlite3_step(st);
    cdb_status rc = s == SQLITE_DONE || s == SQLITE_ROW ? CDB_OK : cdb_sql_err(conn, s, what);
    sqlite3_finalize(st);
    return rc;
}

cdb_status cdb_sql_step_row(sqlite3 *conn, sqlite3_stmt *st, const char *what) {
    int s = sqlite3_step(st);
    return s == SQLITE_DONE ? CDB_OK : cdb_sql_err(conn, s, what);
}

cdb_status cdb_sql_delete_under(cdb_db *db, const char *table, int64_t root_id,
                                const char *under, const char *what) {
    char sql[256];
    sqlite3_stmt *del = NULL;
    size_t ul = under ? strlen(under) : 0;
    snprintf(sql, sizeof sql,
             "DELETE FROM %s WHERE root_id=?1 AND (?3 = 0 OR relpath=?2 OR"
             " substr(relpath, 1, ?3 + 1) = CAST(?2 || '/' AS BLOB))",
             table);
    cdb_status rc = cdb_sql_prepare(db->cat, sql, &del);
    if (rc != CDB_OK) return rc;
    sqlite3_bind_int64(del, 1, root_id);
    sqlite3_bind_blob(del, 2, ul ? under : "", (int)ul, SQLITE_STATIC);
    sqlite3_bind_int(del, 3, (int)ul);
    return cdb_sql_step_done(db->cat, del, what);
}

/* Heap copy of a BLOB/TEXT column as a NUL-terminated string (NULL on OOM). */
char *cdb_sql_column_strdup(sqlite3_stmt *st, int col) {
    const void *b = sqlite3_column_blob(st, col);
    int n = sqlite3_column_bytes(st, col);
    char *s = cdb_malloc((size_t)n + 1);
    if (!s) return NULL;
    if (n) memcpy(s, b, (size_t)n);
    s[n] = '\0';
    return s;
}

cdb_status cdb_sql_count(cdb_db *db, const char *sql, int64_t arg, int64_t *out) {
    sqlite3_stmt *st = NULL;
    cdb_status rc = cdb_sql_prepare(db->cat, sql, &st);
    if (rc != CDB_OK) return rc;
    if (sqlite3_bind_parameter_count(st) > 0) sqlite3_bind_int64(st, 1, arg);
    int s = sqlite3_step(st);
    if (s == SQLITE_ROW)
        *out = sqlite3_column_int64(st, 0);
    else
        rc = cdb_sql_err(db->cat, s, "count");
    sqlite3_finalize(st);
    return rc;
}

/* 1 when have's row (on file id) vouches for the ok file whose row is ok. */
static int vouches(sqlite3_stmt *have, sqlite3_stmt *ok, int64_t id, int by_hash) {
    int n;
    if (sqlite3_column_int64(have, 0) != id || !sqlite3_column_int(have, 2)) return 0;
    if (!by_hash) return 1;
    n = sqlite3_column_bytes(ok, 1);
    return n > 0 && n == sqlite3_column_bytes(have, 1) &&
           !memcmp(sqlite3_column_blob(ok, 1), sqlite3_column_blob(have, 1), (size_t)n);
}

cdb_status cdb_sql_ok_files_lacking(cdb_db *db, int64_t root_id, sqlite3_stmt *have, int by_hash,
                                    int (*fn)(int64_t id, void *ud), void *ud) {
    sqlite3_stmt *ok = NULL;
    int s, h = SQLITE_DONE, on_row = 0, at_end = 0;
    cdb_status rc = cdb_sql_prepare(db->cat,
                                    "SELECT id, hash FROM files WHERE state = 2"
                                    " AND (?1 = 0 OR root_id = ?1) ORDER BY id",
                                    &ok);
    if (rc != CDB_OK) return rc;
    sqlite3_bind_int64(ok, 1, root_id);
    while ((s = sqlite3_step(ok)) == SQLITE_ROW) {
        int64_t id = sqlite3_column_int64(ok, 0);
        while (!at_end && (!on_row || sqlite3_column_int64(have, 0) < id)) {
            on_row = (h = sqlite3_step(have)) == SQLITE_ROW;
            at_end = !on_row;
        }
        if (h != SQLITE_ROW && h != SQLITE_DONE) break;
        if (!(on_row && vouches(have, ok, id, by_hash)) && fn(id, ud)) {
            s = SQLITE_DONE;
            break;
        }
    }
    if (h != SQLITE_ROW && h != SQLITE_DONE) rc = cdb_sql_err(db->cat, h, "read beside the files");
    else if (s != SQLITE_DONE) rc = cdb_sql_err(db->cat, s, "read the ok files");
    sqlite3_finalize(ok);
    sqlite3_reset(have);
    return rc;
}

/* ---- durability ---------------------------------------------------------------------- */

void cdb_sql_fsync_dir(const char *path) {
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
}

/* fsync through SQLite's own descriptors, never one of ours: closing any descriptor
** of a file drops every POSIX lock this process holds on it, SQLite's too (a WAL
** connection's SHARED lock on the database file: without it, a connection closing in
** another process believes it is the last one and checkpoints and deletes the WAL
** under us). fsync flushes the file's dirty pages whichever descriptor wrote them. */
static cdb_status sync_file(sqlite3 *conn, int op, const char *what) {
    sqlite3_file *f = NULL;
    if (sqlite3_file_control(conn, "main", op, &f) != SQLITE_OK || !f || !f->pMethods)
        return CDB_OK; /* not open (no WAL yet): nothing of it to make durable */
    int r = f->pMethods->xSync(f, SQLITE_SYNC_FULL);
    if (r == SQLITE_OK) return CDB_OK;
    return cdb_seterr((r & 0xff) == SQLITE_FULL ? CDB_NOSPACE : CDB_IO, "fsync %s%s: %s",
                      sqlite3_db_filename(conn, "main"), what, sqlite3_errstr(r));
}

cdb_status cdb_sql_fsync_conn(sqlite3 *conn) {
    cdb_status rc = sync_file(conn, SQLITE_FCNTL_JOURNAL_POINTER, "-wal");
    return rc == CDB_OK ? sync_file(conn, SQLITE_FCNTL_FILE_POINTER, "") : rc;
}

/* The indexed move-detection key: the hash's first 8 bytes as a big-endian int64
** (files.hkey, schema v3). The full hash is compared after the index lookup. */
int64_t cdb_sql_hash_key(const uint8_t hash[CDB_DB_HASH_BYTES]) {
    uint64_t k = 0;
    for (int i = 0; i < 8; i++) k = k << 8 | hash[i];
    return (int64_t)k;
}

/* ---- compaction ------------------------------------------------------------------- */

static int64_t file_size(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 ? (int64_t)sb.st_size : 0;
}

/* The size of path's WAL file (path-wal), 0 when there is none. */
static int64_t wal_size(const char *path) {
    char wal[4200];
    snprintf(wal, sizeof wal, "%s-wal", path);
    return file_size(wal);
}

cdb_status cdb_sql_vacuum(sqlite3 *conn, const char *path, int64_t *freed) {
    sqlite3_stmt *st = NULL;
    int64_t free_pages = 0, before = file_size(path) + wal_size(path);
    cdb_status rc = cdb_sql_prepare(conn, "PRAGMA freelist_count", &st);
    if (rc != CDB_OK) return rc;
    if (sqlite3_step(st) == SQLITE_ROW) free_pages = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    /* Pages live in the WAL until a checkpoint: TRUNCATE folds them into the file and
    ** empties the WAL (always: a WAL grown by the deletes is space to give back too). */
    if ((rc = cdb_sql_exec(conn, "PRAGMA wal_checkpoint(TRUNCATE)")) != CDB_OK)
        return cdb_errctx(rc, "compact %s", path);
    if (free_pages == 0) {
        *freed += before - file_size(path) - wal_size(path);
        return CDB_OK;
    }
    if ((rc = cdb_sql_exec(conn, "VACUUM")) != CDB_OK) return cdb_errctx(rc, "compact %s", path);
    if ((rc = cdb_sql_exec(conn, "PRAGMA wal_checkpoint(TRUNCATE)")) != CDB_OK)
        return cdb_errctx(rc, "compact %s", path);
    *freed += before - file_size(path) - wal_size(path);
    return CDB_OK;
}
