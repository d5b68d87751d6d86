/*
** db.c: opening and closing a clipdb database directory: the writer lock file,
** the catalog connection (WAL, synchronous mode), the schema version check that
** refuses newer databases and runs the migrations (schema.c), and the handle's
** accessors. The top of db/'s layering (db_int.h). On-disk layout: db/README.md.
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
        return cdb_seterr(cdb_errno_status(e), "write %s: %s", path, strerror(e));
    }
    db->lock_fd = fd;
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
            rc = cdb_seterr(cdb_errno_status(errno), "mkdir %s: %s", dir, strerror(errno));
            goto fail;
        }
    }
    snprintf(path, sizeof path, "%s/shards", dir);
    if (!db->readonly && mkdir(path, 0755) != 0 && errno != EEXIST) {
        rc = cdb_seterr(cdb_errno_status(errno), "mkdir %s: %s", path, strerror(errno));
        goto fail;
    }
    if (!db->readonly && (rc = lock_acquire(db, p->lock_wait_ms)) != CDB_OK) goto fail;

    snprintf(path, sizeof path, "%s/catalog.db", dir);
    if ((rc = cdb_sql_open_conn(db, path, p->create, &db->cat)) != CDB_OK) {
        rc = cdb_errctx(rc, "open catalog");
        goto fail;
    }
    if ((rc = cdb_sql_configure_conn(db, db->cat)) != CDB_OK) goto fail;
    /* Nothing is written before the version check: a newer database stays as is. */
    if ((rc = cdb_schema_read_version(db, &version)) != CDB_OK) goto fail;
    if (version > CDB_DB_SCHEMA_VERSION) {
        char *by = NULL;
        if (cdb_sql_meta_get_text(db, "last_writer", &by) != CDB_OK) by = NULL;
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
    if (!db->readonly && (rc = cdb_sql_exec(db->cat, "PRAGMA journal_mode=WAL")) != CDB_OK) goto fail;
    /* Catalog pages are rewritten by every batch (steps 1 and 3): checkpoint less
    ** often (40 MiB of WAL) so each hot page is copied back once per checkpoint,
    ** not once per few batches. */
    if (!db->readonly && (rc = cdb_sql_exec(db->cat, "PRAGMA wal_autocheckpoint=10000")) != CDB_OK)
        goto fail;
    if (version > 0) {
        if ((rc = cdb_sql_meta_get_text(db, "uuid", &db->uuid)) != CDB_OK) goto fail;
        int64_t cap = 0;
        if (p->shard_capacity_bytes <= 0 && cdb_sql_meta_get_int(db, "shard_capacity", &cap) == CDB_OK &&
            cap > 0)
            db->shard_capacity = cap;
    }
    if (version < CDB_DB_SCHEMA_VERSION && (rc = cdb_schema_migrate(db, version)) != CDB_OK) goto fail;
    if (!db->readonly && version > 0) cdb_shard_sweep_unlisted(db);
    *out = db;
    return CDB_OK;
fail:
    cdb_db_close(db);
    return rc;
}

void cdb_db_close(cdb_db *db) {
    if (!db) return;
    if (!db->readonly && db->cat && db->uuid && cdb_db_flush(db) != CDB_OK)
        CDB_LOG_WARN("db: %s: could not make the last commits durable: %s", db->dir,
                     cdb_errmsg());
    for (int i = 0; i < ST_COUNT_; i++) sqlite3_finalize(db->st[i]);
    cdb_thumbs_close(db);
    cdb_shard_close_all(db);
    if (db->cat) sqlite3_close_v2(db->cat);
    if (db->lock_fd >= 0) close(db->lock_fd); /* releases the OFD lock */
    free(db->dir);
    cdb_free(db->uuid);
    cdb_free(db);
}

int cdb_db_owns_name(const char *name) {
    static const char *const own[] = {"catalog.db", "thumbs.db", "lock",  "shards",
                                      "index",      "previews",  "parts", "slurm"};
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++) {
        size_t n = strlen(own[i]);
        if (!strncmp(name, own[i], n) && (name[n] == '\0' || (i < 2 && name[n] == '-')))
            return 1;
    }
    return 0;
}

const char *cdb_db_dir(const cdb_db *db) { return db->dir; }
const char *cdb_db_uuid(const cdb_db *db) { return db->uuid ? db->uuid : ""; }
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

int cdb_db_part_of(const char *root, const char *relpath, int n) {
    char small[4096], *buf;
    size_t nr = strlen(root) + 1, nl = strlen(relpath); /* root with its NUL: the 0x00 */
    uint8_t d[CDB_DB_HASH_BYTES];
    uint64_t h = 0;
    if (n <= 1) return 1;
    if (!(buf = nr + nl <= sizeof small ? small : malloc(nr + nl))) return 0; /* out of memory: no part owns it, the caller says so */
    memcpy(buf, root, nr);
    memcpy(buf + nr, relpath, nl);
    cdb_db_hash_buf(buf, nr + nl, d);
    if (buf != small) free(buf);
    for (int i = 0; i < 8; i++) h = h << 8 | d[i];
    return (int)(h % (uint64_t)n) + 1;
}
