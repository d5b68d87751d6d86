/*
** shard.c: the shard files (shards/NNNN.db): creating them as the current one
** fills, opening them with an identity check (shard id + database uuid, so a shard
** copied from another database or replaced behind our back is refused), the quick
** on-disk check used to detect deleted or truncated shards, and the read paths over
** vectors: the ordered multi-shard iterator and lookup by file ids for re-rank,
** and cdb_db_flush (shards made durable before the catalog).
** On-disk layout: db/README.md.
*/
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "db/db_int.h"
#include "kernels/kernels.h"

static const char k_shard_schema[] =
    "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value);"
    /* One B-tree, clustered by file: a file's vectors (all models) sit together,
    ** deletes by file are a key-prefix range, and the common one-model case
    ** iterates in file order with no second index to maintain. */
    "CREATE TABLE IF NOT EXISTS vectors(file_id INTEGER NOT NULL, model_id INTEGER NOT NULL,"
    " vec BLOB NOT NULL, PRIMARY KEY(file_id, model_id)) WITHOUT ROWID;";

/* ---- background checkpoints -------------------------------------------------------
** A WAL hook on each writer connection (catalog and shards) replaces SQLite's
** autocheckpoint: past the same WAL size it queues the database file's path, and one
** thread per writer handle runs a PASSIVE checkpoint of it on a fresh connection
** (same synchronous mode: WAL fsynced before the copy, database file after). A
** passive checkpoint never blocks the writer, which appends meanwhile; when a
** checkpoint has caught up, the writer's next transaction restarts the WAL, as
** with autocheckpoint. The checkpointer holds no connection between runs; closing
** a shard or the handle first waits for a run in progress (ckpt_quiesce). */
#define CKPT_QUEUE 8

/* ---- files this process has SQLite connections to ------------------------------------
** POSIX record locks belong to the process and a file: closing any descriptor of a
** file drops every lock the process holds on it, those of SQLite's connections
** included. cdb_shard_check_file reads a shard's header with its own descriptor, so it
** must not while any connection of this process (another cdb_db handle, a reader
** pool, the checkpointer) has the file open: then a writer in another process would
** see no readers and overwrite pages they are reading. This registry counts them. */

#define OPEN_FILES_MAX 512
static pthread_mutex_t g_open_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    uint64_t dev, ino;
    int n;
} g_open[OPEN_FILES_MAX];

static void open_files_add(uint64_t dev, uint64_t ino, int delta) {
    int free_slot = -1;
    pthread_mutex_lock(&g_open_mu);
    for (int i = 0; i < OPEN_FILES_MAX; i++) {
        if (g_open[i].n && g_open[i].dev == dev && g_open[i].ino == ino) {
            g_open[i].n += delta;
            pthread_mutex_unlock(&g_open_mu);
            return;
        }
        if (!g_open[i].n && free_slot < 0) free_slot = i;
    }
    if (delta > 0 && free_slot >= 0) {
        g_open[free_slot].dev = dev;
        g_open[free_slot].ino = ino;
        g_open[free_slot].n = delta;
    }
    pthread_mutex_unlock(&g_open_mu);
}

/* 1 when a connection of this process may have the file open (or the registry is
** full: then nothing is known, and the answer is the safe one). */
static int open_files_has(uint64_t dev, uint64_t ino) {
    int has = 0, used = 0;
    pthread_mutex_lock(&g_open_mu);
    for (int i = 0; i < OPEN_FILES_MAX; i++) {
        used += g_open[i].n > 0;
        has |= g_open[i].n > 0 && g_open[i].dev == dev && g_open[i].ino == ino;
    }
    pthread_mutex_unlock(&g_open_mu);
    return has || used == OPEN_FILES_MAX;
}

/* Registers the file behind path as open (delta +1) or closed (-1). */
static void open_files_path(const char *path, int delta, uint64_t *dev, uint64_t *ino) {
    struct stat sb;
    if (delta > 0) {
        if (stat(path, &sb) != 0) return;
        *dev = (uint64_t)sb.st_dev;
        *ino = (uint64_t)sb.st_ino;
    }
    if (*ino) open_files_add(*dev, *ino, delta);
}

typedef struct db_ckpt {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    int started, stop, running;
    int n_queued;
    char *queued[CKPT_QUEUE]; /* paths waiting for a checkpoint */
    int sync;                 /* cdb_db_sync of the handle */
} db_ckpt;

static void *ckpt_main(void *arg) {
    db_ckpt *k = arg;
    pthread_mutex_lock(&k->mu);
    for (;;) {
        while (!k->stop && k->n_queued == 0) pthread_cond_wait(&k->cv, &k->mu);
        if (k->stop) break;
        char *path = k->queued[0];
        memmove(k->queued, k->queued + 1, (size_t)(k->n_queued - 1) * sizeof *k->queued);
        k->n_queued--;
        k->running = 1;
        pthread_mutex_unlock(&k->mu);
        sqlite3 *c = NULL;
        uint64_t dev = 0, ino = 0;
        open_files_path(path, +1, &dev, &ino);
        int s = sqlite3_open_v2(path, &c, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL);
        if (s == SQLITE_OK)
            s = sqlite3_exec(c, k->sync == CDB_DB_SYNC_NORMAL ? "PRAGMA synchronous=NORMAL"
                                                               : "PRAGMA synchronous=FULL",
                             NULL, NULL, NULL);
        if (s == SQLITE_OK) s = sqlite3_wal_checkpoint_v2(c, "main", SQLITE_CHECKPOINT_PASSIVE,
                                                          NULL, NULL);
        /* BUSY: another checkpoint runs; anything else: the WAL grows until the next
        ** request, as when an autocheckpoint fails. Neither loses a commit. */
        if (s != SQLITE_OK && (s & 0xff) != SQLITE_BUSY)
            CDB_LOG_WARN("db: background checkpoint of %s: %s", path,
                         c ? sqlite3_errmsg(c) : sqlite3_errstr(s));
        sqlite3_close_v2(c);
        open_files_path(NULL, -1, &dev, &ino);
        cdb_free(path);
        pthread_mutex_lock(&k->mu);
        k->running = 0;
        pthread_cond_broadcast(&k->cv);
    }
    pthread_mutex_unlock(&k->mu);
    return NULL;
}

/* Waits for a checkpoint in progress and drops the queued ones. */
static void ckpt_quiesce(cdb_db *db) {
    db_ckpt *k = db->ckpt;
    if (!k) return;
    pthread_mutex_lock(&k->mu);
    while (k->n_queued > 0) cdb_free(k->queued[--k->n_queued]);
    while (k->running) pthread_cond_wait(&k->cv, &k->mu);
    pthread_mutex_unlock(&k->mu);
}

static void ckpt_stop(cdb_db *db) {
    db_ckpt *k = db->ckpt;
    if (!k) return;
    ckpt_quiesce(db);
    pthread_mutex_lock(&k->mu);
    k->stop = 1;
    pthread_cond_broadcast(&k->cv);
    pthread_mutex_unlock(&k->mu);
    if (k->started) pthread_join(k->thread, NULL);
    pthread_cond_destroy(&k->cv);
    pthread_mutex_destroy(&k->mu);
    cdb_free(k);
    db->ckpt = NULL;
}

/* Frames (pages) of WAL that trigger a checkpoint: the catalog's as set at open
** (wal_autocheckpoint=10000, db.c), shards' SQLite's default 1000 (16 MiB). */
#define CKPT_FRAMES_CATALOG 10000
#define CKPT_FRAMES_SHARD 1000

/* The WAL hook (ud: the cdb_db, which outlives its connections). */
static int ckpt_on_commit(void *ud, sqlite3 *conn, const char *name, int n_frames) {
    cdb_db *db = ud;
    db_ckpt *k = db->ckpt;
    const char *path = sqlite3_db_filename(conn, name);
    if (n_frames < (conn == db->cat ? CKPT_FRAMES_CATALOG : CKPT_FRAMES_SHARD)) return SQLITE_OK;
    if (!k || !path || !*path) { /* no checkpointer (closing): checkpoint here */
        sqlite3_wal_checkpoint_v2(conn, name, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
        return SQLITE_OK;
    }
    pthread_mutex_lock(&k->mu);
    int dup = 0;
    for (int i = 0; i < k->n_queued; i++) dup |= !strcmp(k->queued[i], path);
    if (!dup && k->n_queued < CKPT_QUEUE) {
        char *p = cdb_strdup(path);
        if (p) k->queued[k->n_queued++] = p;
    }
    if (!k->started && !k->stop)
        k->started = pthread_create(&k->thread, NULL, ckpt_main, k) == 0;
    if (!k->started) { /* no thread: checkpoint here, as autocheckpoint would */
        while (k->n_queued > 0) cdb_free(k->queued[--k->n_queued]);
        pthread_mutex_unlock(&k->mu);
        sqlite3_wal_checkpoint_v2(conn, name, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
        return SQLITE_OK;
    }
    pthread_cond_signal(&k->cv);
    pthread_mutex_unlock(&k->mu);
    return SQLITE_OK;
}

cdb_status cdb_shard_ckpt_attach(cdb_db *db, sqlite3 *conn) {
    if (db->readonly) return CDB_OK;
    if (!db->ckpt) {
        db_ckpt *k = cdb_calloc(1, sizeof *k);
        if (!k) return cdb_seterr(CDB_NOMEM, "out of memory");
        pthread_mutex_init(&k->mu, NULL);
        pthread_cond_init(&k->cv, NULL);
        k->sync = db->sync;
        db->ckpt = k;
    }
    sqlite3_wal_hook(conn, ckpt_on_commit, db); /* replaces the autocheckpoint */
    return CDB_OK;
}

void cdb_shard_path(const cdb_db *db, int32_t id, char *buf, size_t len) {
    snprintf(buf, len, "%s/shards/%04d.db", db->dir, (int)id);
}

static void shard_close(db_shard *sh) {
    /* Closing does not lose the durability promise of cdb_db_flush. The caller
    ** has quiesced the checkpointer (a repair may replace the file next). */
    if (sh->conn && sh->unsynced) (void)cdb_sql_fsync_conn(sh->conn);
    sqlite3_finalize(sh->st_put);
    sqlite3_finalize(sh->st_del);
    sqlite3_finalize(sh->st_get);
    if (sh->conn) sqlite3_close_v2(sh->conn);
    open_files_path(NULL, -1, &sh->dev, &sh->ino);
    memset(sh, 0, sizeof *sh);
}

void cdb_shard_close_one(cdb_db *db, int32_t id) {
    ckpt_quiesce(db);
    if (id > 0 && id < db->n_shards_alloc) shard_close(&db->shards[id]);
}

void cdb_shard_close_all(cdb_db *db) {
    ckpt_stop(db);
    for (int i = 0; i < db->n_shards_alloc; i++) shard_close(&db->shards[i]);
    cdb_free(db->shards);
    db->shards = NULL;
    db->n_shards_alloc = 0;
}

static uint32_t be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

int cdb_shard_check_file(cdb_db *db, int32_t id, char *msg, size_t msg_len) {
    char path[4096];
    struct stat sb;
    uint8_t hdr[100];
    cdb_shard_path(db, id, path, sizeof path);
    if (stat(path, &sb) != 0) {
        snprintf(msg, msg_len, "shard %s is missing (%s)", path, strerror(errno));
        return CDB_DB_SHARD_MISSING;
    }
    if (open_files_has((uint64_t)sb.st_dev, (uint64_t)sb.st_ino))
        return 0; /* SQLite has it open here: its own reads report a damaged file */
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? pread(fd, hdr, sizeof hdr, 0) : -1;
    if (fd >= 0) close(fd);
    if (n != (ssize_t)sizeof hdr || memcmp(hdr, "SQLite format 3", 16) != 0) {
        snprintf(msg, msg_len, "shard %s is truncated or not a SQLite file (%lld bytes)", path,
                 (long long)sb.st_size);
        return CDB_DB_SHARD_DAMAGED;
    }
    uint32_t page = (uint32_t)hdr[16] << 8 | hdr[17];
    if (page == 1) page = 65536;
    uint32_t pages = be32(hdr + 28);
    /* The in-header page count is valid only when the change counter matches
    ** version-valid-for (SQLite file format, section 1.3.7). And a checkpoint cut
    ** short (a full disk) leaves the file behind its new header while the WAL still
    ** holds every page: with frames in the WAL, SQLite reads them from there, and a
    ** page missing from both is reported by the read that needs it. */
    char wal[4200];
    struct stat wb;
    snprintf(wal, sizeof wal, "%s-wal", path);
    int wal_has_frames = stat(wal, &wb) == 0 && wb.st_size > 32;
    if (!wal_has_frames && be32(hdr + 24) == be32(hdr + 92) &&
        (int64_t)sb.st_size < (int64_t)page * pages) {
        snprintf(msg, msg_len, "shard %s is truncated: %lld bytes, its header says %lld", path,
                 (long long)sb.st_size, (long long)page * pages);
        return CDB_DB_SHARD_DAMAGED;
    }
    return 0;
}

static cdb_status shard_slot(cdb_db *db, int32_t id, db_shard **out) {
    if (id <= 0) return cdb_seterr(CDB_INVALID, "bad shard id %d", (int)id);
    if (id >= db->n_shards_alloc) {
        int n = db->n_shards_alloc ? db->n_shards_alloc : 8;
        while (n <= id) n *= 2;
        db_shard *s = cdb_realloc(db->shards, (size_t)n * sizeof *s);
        if (!s) return cdb_seterr(CDB_NOMEM, "out of memory");
        memset(s + db->n_shards_alloc, 0, (size_t)(n - db->n_shards_alloc) * sizeof *s);
        db->shards = s;
        db->n_shards_alloc = n;
    }
    *out = &db->shards[id];
    return CDB_OK;
}

/* Reads the shard's identity; CDB_CORRUPT when it is not shard `id` of this db. */
static cdb_status shard_check_identity(cdb_db *db, db_shard *sh, int32_t id, const char *path) {
    sqlite3_stmt *st = NULL;
    int64_t sid = -1;
    char uuid[64] = "";
    cdb_status rc = cdb_sql_prepare(sh->conn, "SELECT key, value FROM meta", &st);
    if (rc != CDB_OK)
        return cdb_errctx(CDB_CORRUPT, "shard %s is damaged or not a clipdb shard", path);
    int s;
    while ((s = sqlite3_step(st)) == SQLITE_ROW) {
        const char *k = (const char *)sqlite3_column_text(st, 0);
        if (k && !strcmp(k, "shard_id")) sid = sqlite3_column_int64(st, 1);
        if (k && !strcmp(k, "uuid") && sqlite3_column_text(st, 1))
            snprintf(uuid, sizeof uuid, "%s", (const char *)sqlite3_column_text(st, 1));
    }
    if (s != SQLITE_DONE) rc = cdb_sql_err(sh->conn, s, "read shard identity");
    sqlite3_finalize(st);
    if (rc != CDB_OK) return cdb_errctx(CDB_CORRUPT, "shard %s is damaged", path);
    if (sid != id || strcmp(uuid, db->uuid ? db->uuid : ""))
        return cdb_seterr(CDB_CORRUPT,
                          "shard %s does not belong to this database (shard id %lld, uuid %s); "
                          "was it replaced? run `clipdb verify`",
                          path, (long long)sid, uuid);
    return CDB_OK;
}

static cdb_status shard_prepare(db_shard *sh) {
    cdb_status rc = cdb_sql_prepare(
        sh->conn, "INSERT OR REPLACE INTO vectors(file_id, model_id, vec) VALUES(?2, ?1, ?3)",
        &sh->st_put);
    /* ?1 = file; ?2 = a model to keep (0: none) */
    if (rc == CDB_OK)
        rc = cdb_sql_prepare(sh->conn, "DELETE FROM vectors WHERE file_id=?1 AND model_id<>?2",
                        &sh->st_del);
    if (rc == CDB_OK)
        rc = cdb_sql_prepare(sh->conn, "SELECT vec FROM vectors WHERE file_id=?2 AND model_id=?1",
                        &sh->st_get);
    return rc;
}

static cdb_status shard_open_conn(cdb_db *db, db_shard *sh, int32_t id, int create) {
    char path[4096];
    cdb_shard_path(db, id, path, sizeof path);
    cdb_status rc;
    /* registered before the open: the header check of another handle must not read
    ** while this connection takes its locks */
    open_files_path(path, +1, &sh->dev, &sh->ino);
    rc = cdb_sql_open_conn(db, path, create, &sh->conn);
    if (!sh->ino) open_files_path(path, +1, &sh->dev, &sh->ino); /* created just now */
    if (rc != CDB_OK) rc = cdb_errctx(rc, "open shard");
    if (rc == CDB_OK) rc = cdb_sql_configure_conn(db, sh->conn);
    if (rc == CDB_OK) rc = cdb_shard_ckpt_attach(db, sh->conn);
    sh->id = id;
    return rc;
}

/* Whether shard id has its connection open (a file check would be redundant). */
static int shard_is_open(const cdb_db *db, int32_t id) {
    return id > 0 && id < db->n_shards_alloc && db->shards[id].conn != NULL;
}

cdb_status cdb_shard_get(cdb_db *db, int32_t id, db_shard **out) {
    char path[4096], msg[512];
    db_shard *sh = NULL;
    cdb_status rc = shard_slot(db, id, &sh);
    if (rc != CDB_OK) return rc;
    if (sh->conn) {
        *out = sh;
        return CDB_OK;
    }
    cdb_shard_path(db, id, path, sizeof path);
    if (cdb_shard_check_file(db, id, msg, sizeof msg))
        return cdb_seterr(CDB_CORRUPT, "%s (changed behind clipdb's back?): run `clipdb verify`",
                          msg);
    if ((rc = shard_open_conn(db, sh, id, 0)) == CDB_OK &&
        (rc = shard_check_identity(db, sh, id, path)) == CDB_OK)
        rc = shard_prepare(sh);
    if (rc != CDB_OK) {
        shard_close(sh);
        return rc;
    }
    *out = sh;
    return CDB_OK;
}

static int claim_cmp(const void *a_, const void *b_) {
    const db_claim *a = a_, *b = b_;
    if (a->shard != b->shard) return a->shard < b->shard ? -1 : 1;
    if (a->file_id != b->file_id) return a->file_id < b->file_id ? -1 : 1;
    return a->model_id < b->model_id ? -1 : a->model_id > b->model_id;
}

/* The n claims of one shard (sorted by file), in one read transaction. */
static cdb_status check_shard_claims(cdb_db *db, db_claim *c, size_t n, int unreadable) {
    db_shard *sh = NULL;
    cdb_status rc = CDB_OK;
    int began = 0;
    for (size_t i = 0; i < n; i++) c[i].present = 0;
    if (c[0].shard <= 0) return CDB_OK; /* no shard: no vector */
    if ((rc = cdb_shard_get(db, c[0].shard, &sh)) != CDB_OK) {
        if (unreadable == DB_UNREADABLE_FAIL) return rc;
        cdb_clearerr();
        for (size_t i = 0; i < n; i++) c[i].present = unreadable == DB_UNREADABLE_PRESENT;
        return CDB_OK;
    }
    if (sqlite3_get_autocommit(sh->conn)) {
        if ((rc = cdb_sql_exec(sh->conn, "BEGIN")) != CDB_OK) return rc;
        began = 1;
    }
    for (size_t i = 0; i < n && rc == CDB_OK; i++) {
        sqlite3_reset(sh->st_get);
        sqlite3_bind_int64(sh->st_get, 1, c[i].model_id);
        sqlite3_bind_int64(sh->st_get, 2, c[i].file_id);
        int s = sqlite3_step(sh->st_get);
        c[i].present = s == SQLITE_ROW;
        if (s != SQLITE_ROW && s != SQLITE_DONE)
            rc = cdb_errctx(cdb_sql_err(sh->conn, s, "look up vector"), "shard %04d",
                            (int)c[0].shard);
    }
    sqlite3_reset(sh->st_get);
    if (began) sqlite3_exec(sh->conn, "COMMIT", NULL, NULL, NULL); /* a read: cannot fail */
    return rc;
}

cdb_status cdb_shard_check_claims(cdb_db *db, db_claim *c, size_t n, int unreadable) {
    cdb_status rc = CDB_OK;
    if (n > 1) qsort(c, n, sizeof *c, claim_cmp);
    for (size_t i = 0, j; i < n && rc == CDB_OK; i = j) {
        for (j = i + 1; j < n && c[j].shard == c[i].shard;) j++;
        rc = check_shard_claims(db, c + i, j - i, unreadable);
    }
    return rc;
}

/* The count(*) that sql answers in the SQLite file at path, or -1 when the file
** cannot be opened or the query fails (a file that is not ours: left alone). */
static int64_t file_count(const char *path, const char *sql) {
    sqlite3 *c = NULL;
    sqlite3_stmt *st = NULL;
    int64_t n = -1;
    if (sqlite3_open_v2(path, &c, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(c, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        n = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close_v2(c);
    return n;
}

/* 1 when path is a SQLite file with no tables: a creation that died before its
** one transaction committed (the schema and identity commit together). */
static int shard_is_blank(const char *path) {
    return file_count(path, "SELECT count(*) FROM sqlite_master") == 0;
}

cdb_status cdb_shard_create(cdb_db *db, int32_t id) {
    char path[4096], sql[256];
    struct stat sb;
    db_shard *sh = NULL;
    cdb_status rc = shard_slot(db, id, &sh);
    if (rc != CDB_OK) return rc;
    ckpt_quiesce(db);
    shard_close(sh);
    cdb_shard_path(db, id, path, sizeof path);
    if (stat(path, &sb) == 0 && sb.st_size > 0 && !shard_is_blank(path)) {
        /* A leftover from a creation whose catalog transaction rolled back: adopt
        ** it if it is ours, never overwrite a stranger. */
        if ((rc = cdb_shard_get(db, id, &sh)) != CDB_OK)
            return cdb_errctx(CDB_CORRUPT, "cannot create shard %d: %s exists", (int)id, path);
    } else {
        if ((rc = shard_open_conn(db, sh, id, 1)) != CDB_OK) goto fail;
        /* 16 KiB pages: ~15 vectors of 512-d per leaf instead of 3, fewer splits. */
        if ((rc = cdb_sql_exec(sh->conn, "PRAGMA page_size=16384; PRAGMA journal_mode=WAL")) != CDB_OK)
            goto fail;
        if ((rc = cdb_sql_begin(sh->conn)) != CDB_OK) goto fail;
        if ((rc = cdb_sql_exec(sh->conn, k_shard_schema)) != CDB_OK) goto fail;
        snprintf(sql, sizeof sql,
                 "INSERT OR REPLACE INTO meta VALUES('shard_id', %d);"
                 "INSERT OR REPLACE INTO meta VALUES('schema_version', %d);",
                 (int)id, CDB_DB_SHARD_SCHEMA_VERSION);
        if ((rc = cdb_sql_exec(sh->conn, sql)) != CDB_OK) goto fail;
        sqlite3_stmt *st = NULL;
        if ((rc = cdb_sql_prepare(sh->conn, "INSERT OR REPLACE INTO meta VALUES('uuid', ?1)", &st)) !=
            CDB_OK)
            goto fail;
        sqlite3_bind_text(st, 1, db->uuid, -1, SQLITE_STATIC);
        int s = sqlite3_step(st);
        sqlite3_finalize(st);
        if (s != SQLITE_DONE) {
            rc = cdb_sql_err(sh->conn, s, "create shard");
            goto fail;
        }
        if ((rc = cdb_sql_commit(sh->conn)) != CDB_OK) goto fail;
        /* Move the header into the main file so a truncation is detectable at once. */
        if ((rc = cdb_sql_exec(sh->conn, "PRAGMA wal_checkpoint(TRUNCATE)")) != CDB_OK) goto fail;
        snprintf(path, sizeof path, "%s/shards", db->dir);
        cdb_sql_fsync_dir(path);
        if ((rc = shard_prepare(sh)) != CDB_OK) goto fail;
    }
    sqlite3_stmt *ins = NULL;
    if ((rc = cdb_sql_prepare(db->cat,
                         "INSERT OR IGNORE INTO shards(id, bytes_reserved, sealed, created_ns)"
                         " VALUES(?1, 0, 0, ?2)",
                         &ins)) != CDB_OK)
        return rc;
    sqlite3_bind_int(ins, 1, id);
    sqlite3_bind_int64(ins, 2, cdb_sql_wall_ns());
    int s = sqlite3_step(ins);
    sqlite3_finalize(ins);
    if (s != SQLITE_DONE) return cdb_sql_err(db->cat, s, "register shard");
    CDB_LOG_INFO("db: created shard %s/shards/%04d.db", db->dir, (int)id);
    return CDB_OK;
fail:
    shard_close(sh);
    return cdb_errctx(rc, "create shard %d", (int)id);
}

/* 1 when the shard file at path holds no vector (blank, or our schema and nothing
** in it); 0 when it holds some or cannot be read (then it is left alone). */
static int shard_is_empty(const char *path) {
    return shard_is_blank(path) || file_count(path, "SELECT count(*) FROM vectors") == 0;
}

/* Whether the catalog lists shard id. */
static int shard_registered(cdb_db *db, int32_t id) {
    sqlite3_stmt *st = NULL;
    int found = 0;
    if (cdb_sql_prepare(db->cat, "SELECT 1 FROM shards WHERE id=?1", &st) != CDB_OK) return 1;
    sqlite3_bind_int(st, 1, id);
    found = sqlite3_step(st) != SQLITE_DONE; /* an error counts as listed: kept */
    sqlite3_finalize(st);
    return found;
}

void cdb_shard_sweep_unlisted(cdb_db *db) {
    char dir[4096], path[4200];
    struct dirent *d;
    DIR *dh;
    snprintf(dir, sizeof dir, "%s/shards", db->dir);
    if (!(dh = opendir(dir))) return;
    while ((d = readdir(dh))) {
        static const char *const sfx[] = {"-wal", "-shm", ""};
        char tail = 0;
        int id = 0;
        if (sscanf(d->d_name, "%d.d%c", &id, &tail) != 2 || tail != 'b' || id <= 0 ||
            strlen(d->d_name) != 7 || shard_is_open(db, id) || shard_registered(db, id))
            continue;
        cdb_shard_path(db, id, path, sizeof path);
        if (!shard_is_empty(path)) continue;
        CDB_LOG_INFO("db: removing %s: an empty shard a killed run created", path);
        for (int i = 0; i < 3; i++) { /* the main file last */
            char p[4300];
            snprintf(p, sizeof p, "%s%s", path, sfx[i]);
            unlink(p);
        }
    }
    closedir(dh);
    cdb_sql_fsync_dir(dir);
}

cdb_status cdb_shard_alloc_flush(cdb_db *db, db_shard_alloc *a) {
    sqlite3_stmt *st = NULL;
    if (!a->cur || !a->pending) return CDB_OK;
    cdb_status rc = cdb_sql_stmt(db, ST_SHARD_RESERVE, &st);
    if (rc != CDB_OK) return rc;
    sqlite3_bind_int(st, 1, a->cur);
    sqlite3_bind_int64(st, 2, a->pending);
    int s = sqlite3_step(st);
    sqlite3_reset(st);
    if (s != SQLITE_DONE) return cdb_sql_err(db->cat, s, "reserve shard space");
    a->pending = 0;
    return CDB_OK;
}

cdb_status cdb_shard_for_new(cdb_db *db, db_shard_alloc *a, int64_t need, int32_t *id) {
    sqlite3_stmt *st = NULL;
    cdb_status rc;
    if (!a->cur) {
        if ((rc = cdb_sql_stmt(db, ST_SHARD_CURRENT, &st)) != CDB_OK) return rc;
        int s = sqlite3_step(st);
        if (s == SQLITE_ROW) {
            a->max_id = sqlite3_column_int(st, 0);
            if (!sqlite3_column_int(st, 2)) {
                a->cur = a->max_id;
                a->used = sqlite3_column_int64(st, 1);
            }
        } else if (s != SQLITE_DONE) {
            sqlite3_reset(st);
            return cdb_sql_err(db->cat, s, "choose shard");
        }
        sqlite3_reset(st);
    }
    if (a->cur && a->used > 0 && a->used + need > db->shard_capacity) {
        char sql[96];
        if ((rc = cdb_shard_alloc_flush(db, a)) != CDB_OK) return rc;
        snprintf(sql, sizeof sql, "UPDATE shards SET sealed=1 WHERE id=%d", (int)a->cur);
        if ((rc = cdb_sql_exec(db->cat, sql)) != CDB_OK) return rc;
        a->cur = 0;
    }
    if (!a->cur) {
        a->cur = ++a->max_id;
        a->used = 0;
        if ((rc = cdb_shard_create(db, a->cur)) != CDB_OK) return rc;
    }
    a->used += need;
    a->pending += need;
    *id = a->cur;
    return CDB_OK;
}

/* Decodes a stored blob (dim little-endian binary16 values) to fp32. SQLite hands
** out blobs at any byte offset, so unaligned ones go through an aligned copy. */
void cdb_shard_decode_blob(const void *blob, int dim, float *out) {
    if (((uintptr_t)blob & 1) == 0) {
        cdb_k_f16_to_f32((const uint16_t *)blob, out, (size_t)dim);
        return;
    }
    uint16_t tmp[256];
    for (int i = 0; i < dim; i += 256) {
        int n = dim - i < 256 ? dim - i : 256;
        memcpy(tmp, (const uint8_t *)blob + (size_t)i * 2, (size_t)n * 2);
        cdb_k_f16_to_f32(tmp, out + i, (size_t)n);
    }
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
        if ((rc = cdb_sql_fsync_conn(sh->conn)) == CDB_OK) sh->unsynced = 0;
    }
    if (rc == CDB_OK) {
        snprintf(path, sizeof path, "%s/shards", db->dir);
        cdb_sql_fsync_dir(path);
        rc = cdb_sql_fsync_conn(db->cat);
    }
    if (rc == CDB_OK) {
        cdb_sql_fsync_dir(db->dir);
        db->synced_changes = changes;
    }
    return rc;
}

/* ---- reading ----------------------------------------------------------------------- */

/* The vector width of a registered model (read here, not through catalog.c, which
** sits above shard.c). */
static cdb_status model_dim(cdb_db *db, int64_t model_id, int *dim) {
    int64_t n = 0, d = 0;
    cdb_status rc = cdb_sql_count(db, "SELECT count(*) FROM models WHERE id=?1", model_id, &n);
    if (rc == CDB_OK && n == 0)
        return cdb_seterr(CDB_NOTFOUND, "model %lld is not registered", (long long)model_id);
    if (rc == CDB_OK) rc = cdb_sql_count(db, "SELECT dim FROM models WHERE id=?1", model_id, &d);
    if (rc == CDB_OK) *dim = (int)d;
    return rc;
}

typedef struct iter_src {
    sqlite3_stmt *st;
    int32_t shard;
    int live; /* st is positioned on a row */
    int64_t file_id;
} iter_src;

struct cdb_db_iter {
    cdb_db *db;
    int64_t model_id;
    int dim;
    int n_src;
    iter_src *src;
};

static cdb_status src_step(cdb_db_iter *it, iter_src *s) {
    int r = sqlite3_step(s->st);
    if (r == SQLITE_ROW) {
        s->live = 1;
        s->file_id = sqlite3_column_int64(s->st, 0);
        return CDB_OK;
    }
    s->live = 0;
    if (r == SQLITE_DONE) return CDB_OK;
    return cdb_errctx(cdb_sql_err(sqlite3_db_handle(s->st), r, "read vectors"), "shard %04d",
                      (int)s->shard);
}

static cdb_status iter_new(cdb_db *db, int64_t model_id, int *n_unreadable,
                           cdb_db_iter **out) {
    sqlite3_stmt *st = NULL;
    cdb_db_iter *it = NULL;
    int cap = 0;
    *out = NULL;
    cdb_status rc;
    it = cdb_calloc(1, sizeof *it);
    if (!it) return cdb_seterr(CDB_NOMEM, "out of memory");
    it->db = db;
    it->model_id = model_id;
    if ((rc = model_dim(db, model_id, &it->dim)) != CDB_OK) goto fail;
    if ((rc = cdb_sql_prepare(db->cat, "SELECT id FROM shards ORDER BY id", &st)) != CDB_OK) goto fail;
    int s;
    while ((s = sqlite3_step(st)) == SQLITE_ROW) {
        db_shard *sh = NULL;
        int32_t id = sqlite3_column_int(st, 0);
        char msg[512];
        if (n_unreadable && cdb_shard_check_file(db, id, msg, sizeof msg)) {
            CDB_LOG_WARN("db: %s: its vectors are left out", msg);
            (*n_unreadable)++;
            continue;
        }
        if ((rc = cdb_shard_get(db, id, &sh)) != CDB_OK) {
            /* damaged inside (a header that looks right): left out as well */
            if (!n_unreadable || rc != CDB_CORRUPT) goto fail;
            CDB_LOG_WARN("db: %s: its vectors are left out", cdb_errmsg());
            cdb_clearerr();
            rc = CDB_OK;
            (*n_unreadable)++;
            continue;
        }
        if (it->n_src == cap) {
            cap = cap ? cap * 2 : 8;
            iter_src *n = cdb_realloc(it->src, (size_t)cap * sizeof *n);
            if (!n) {
                rc = cdb_seterr(CDB_NOMEM, "out of memory");
                goto fail;
            }
            it->src = n;
        }
        iter_src *src = &it->src[it->n_src];
        memset(src, 0, sizeof *src);
        src->shard = id;
        if ((rc = cdb_sql_prepare(sh->conn,
                             "SELECT file_id, vec FROM vectors WHERE model_id=?1 ORDER BY file_id",
                             &src->st)) != CDB_OK)
            goto fail;
        it->n_src++;
        sqlite3_bind_int64(src->st, 1, model_id);
        if ((rc = src_step(it, src)) != CDB_OK) goto fail;
    }
    if (s != SQLITE_DONE) {
        rc = cdb_sql_err(db->cat, s, "list shards");
        goto fail;
    }
    sqlite3_finalize(st);
    *out = it;
    return CDB_OK;
fail:
    sqlite3_finalize(st);
    cdb_db_iter_free(it);
    return rc;
}

cdb_status cdb_db_iter_new(cdb_db *db, int64_t model_id, cdb_db_iter **out) {
    return iter_new(db, model_id, NULL, out);
}

cdb_status cdb_db_iter_new_skipping(cdb_db *db, int64_t model_id, int *n_unreadable,
                                    cdb_db_iter **out) {
    *n_unreadable = 0;
    return iter_new(db, model_id, n_unreadable, out);
}

cdb_status cdb_db_iter_read(cdb_db_iter *it, int cap, int64_t *ids, float *f32, uint16_t *f16,
                            int *n_out) {
    int n = 0;
    size_t want = (size_t)it->dim * 2;
    *n_out = 0;
    while (n < cap) {
        iter_src *best = NULL;
        for (int i = 0; i < it->n_src; i++)
            if (it->src[i].live && (!best || it->src[i].file_id < best->file_id))
                best = &it->src[i];
        if (!best) break;
        const void *blob = sqlite3_column_blob(best->st, 1);
        size_t len = (size_t)sqlite3_column_bytes(best->st, 1);
        if (!blob || len != want)
            return cdb_seterr(CDB_CORRUPT,
                              "shard %04d: vector of file %lld has %zu bytes, want %zu: run "
                              "`clipdb verify`",
                              (int)best->shard, (long long)best->file_id, len, want);
        if (ids) ids[n] = best->file_id;
        /* Blobs are little-endian binary16; this build assumes a little-endian host. */
        if (f16) memcpy(f16 + (size_t)n * it->dim, blob, want);
        if (f32) cdb_shard_decode_blob(blob, it->dim, f32 + (size_t)n * it->dim);
        n++;
        cdb_status rc = src_step(it, best);
        if (rc != CDB_OK) return rc;
    }
    *n_out = n;
    return CDB_OK;
}

void cdb_db_iter_free(cdb_db_iter *it) {
    if (!it) return;
    for (int i = 0; i < it->n_src; i++) sqlite3_finalize(it->src[i].st);
    cdb_free(it->src);
    cdb_free(it);
}

/* One file's vector into row (fp32, decoded) or row16 (fp16 as stored); one of them
** is NULL. skip_unreadable: a missing or damaged shard is found = UNREADABLE. */
static cdb_status get_one(cdb_db *db, int64_t model_id, int dim, int64_t file_id, float *row,
                          uint16_t *row16, int skip_unreadable, uint8_t *found) {
    sqlite3_stmt *st = NULL;
    int32_t shard = 0;
    cdb_status rc;
    char msg[512];
    *found = 0;
    if (row) memset(row, 0, (size_t)dim * sizeof *row);
    if (row16) memset(row16, 0, (size_t)dim * sizeof *row16);
    if ((rc = cdb_sql_stmt(db, ST_FILE_BY_ID, &st)) != CDB_OK) return rc;
    sqlite3_bind_int64(st, 1, file_id);
    int s = sqlite3_step(st);
    if (s == SQLITE_ROW) shard = sqlite3_column_int(st, 3);
    sqlite3_reset(st);
    if (s != SQLITE_ROW && s != SQLITE_DONE) return cdb_sql_err(db->cat, s, "look up file");
    if (shard <= 0) return CDB_OK;
    db_shard *sh = NULL;
    if (skip_unreadable && !shard_is_open(db, shard) &&
        cdb_shard_check_file(db, shard, msg, sizeof msg)) {
        *found = CDB_DB_FOUND_UNREADABLE;
        return CDB_OK;
    }
    if ((rc = cdb_shard_get(db, shard, &sh)) != CDB_OK) {
        if (!skip_unreadable || rc != CDB_CORRUPT) return rc;
        cdb_clearerr(); /* damaged inside: as one that fails its file check */
        *found = CDB_DB_FOUND_UNREADABLE;
        return CDB_OK;
    }
    if (sqlite3_get_autocommit(sh->conn) && (rc = cdb_sql_exec(sh->conn, "BEGIN")) != CDB_OK) return rc;
    sqlite3_reset(sh->st_get);
    sqlite3_bind_int64(sh->st_get, 1, model_id);
    sqlite3_bind_int64(sh->st_get, 2, file_id);
    s = sqlite3_step(sh->st_get);
    if (s == SQLITE_ROW) {
        const void *blob = sqlite3_column_blob(sh->st_get, 0);
        size_t len = (size_t)sqlite3_column_bytes(sh->st_get, 0);
        if (!blob || len != (size_t)dim * 2)
            rc = cdb_seterr(CDB_CORRUPT, "shard %04d: vector of file %lld has %zu bytes, want %d",
                            (int)shard, (long long)file_id, len, dim * 2);
        else {
            if (row) cdb_shard_decode_blob(blob, dim, row);
            if (row16) memcpy(row16, blob, (size_t)dim * 2); /* little-endian host */
            *found = 1;
        }
    } else if (s != SQLITE_DONE) {
        rc = cdb_sql_err(sh->conn, s, "read vector");
    }
    sqlite3_reset(sh->st_get);
    return rc;
}

/* Commits the read transactions vectors_get opened (catalog + shards). */
static void end_reads(cdb_db *db) {
    for (int i = 1; i < db->n_shards_alloc; i++)
        if (db->shards[i].conn && !sqlite3_get_autocommit(db->shards[i].conn))
            sqlite3_exec(db->shards[i].conn, "COMMIT", NULL, NULL, NULL);
    if (!sqlite3_get_autocommit(db->cat)) sqlite3_exec(db->cat, "COMMIT", NULL, NULL, NULL);
}

/* The vectors of n files into out32 (decoded) or out16 (as stored). One read
** snapshot per database file for the whole call: consistent, and no lock round trip
** per id. */
static cdb_status vectors_get(cdb_db *db, int64_t model_id, const int64_t *file_ids, int n,
                              float *out32, uint16_t *out16, int skip_unreadable,
                              uint8_t *found) {
    int dim = 0;
    cdb_status rc = model_dim(db, model_id, &dim);
    if (rc != CDB_OK) return rc;
    if ((rc = cdb_sql_exec(db->cat, "BEGIN")) != CDB_OK) return rc;
    for (int i = 0; i < n && rc == CDB_OK; i++)
        rc = get_one(db, model_id, dim, file_ids[i], out32 ? out32 + (size_t)i * dim : NULL,
                     out16 ? out16 + (size_t)i * dim : NULL, skip_unreadable, &found[i]);
    end_reads(db);
    return rc;
}

cdb_status cdb_db_vectors_get(cdb_db *db, int64_t model_id, const int64_t *file_ids, int n,
                              float *out, uint8_t *found) {
    return vectors_get(db, model_id, file_ids, n, out, NULL, 0, found);
}

cdb_status cdb_db_vectors_get_f16(cdb_db *db, int64_t model_id, const int64_t *file_ids, int n,
                                  uint16_t *out, uint8_t *found) {
    return vectors_get(db, model_id, file_ids, n, NULL, out, 1, found);
}
