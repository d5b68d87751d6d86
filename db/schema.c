/*
** schema.c: the catalog's schema: its version check and the forward migrations
** (append only; each runs in one transaction with its schema_version bump).
** Tables and invariants: db/README.md.
*/
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "db/db_int.h"


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
        cdb_sql_prepare(db->cat, "SELECT 1 FROM pragma_table_info('files') WHERE name='hkey'", &st);
    if (rc != CDB_OK) return rc;
    has_col = sqlite3_step(st) == SQLITE_ROW;
    sqlite3_finalize(st);
    if (!has_col && (rc = cdb_sql_exec(db->cat, "ALTER TABLE files ADD COLUMN hkey INTEGER")) != CDB_OK)
        return rc;
    rc = cdb_sql_prepare(db->cat, "SELECT id, hash FROM files WHERE length(hash)=16", &rd);
    if (rc == CDB_OK) rc = cdb_sql_prepare(db->cat, "UPDATE files SET hkey=?2 WHERE id=?1", &up);
    while (rc == CDB_OK && (s = sqlite3_step(rd)) == SQLITE_ROW) {
        sqlite3_reset(up);
        sqlite3_bind_int64(up, 1, sqlite3_column_int64(rd, 0));
        sqlite3_bind_int64(up, 2, cdb_sql_hash_key(sqlite3_column_blob(rd, 1)));
        if ((s = sqlite3_step(up)) != SQLITE_DONE) break;
    }
    if (rc == CDB_OK && s != SQLITE_DONE) rc = cdb_sql_err(db->cat, s, "migrate v3");
    sqlite3_finalize(rd);
    sqlite3_finalize(up);
    if (rc == CDB_OK) rc = cdb_sql_exec(db->cat, k_schema_v3_index);
    return rc;
}

/* v1 -> v2 also fills the new directory from what the shards hold (all at seq 1). */
static cdb_status migrate_v2_fill(cdb_db *db) {
    sqlite3_stmt *sh = NULL, *ins = NULL, *rd = NULL;
    cdb_status rc = cdb_sql_prepare(db->cat, "SELECT id FROM shards ORDER BY id", &sh);
    if (rc == CDB_OK)
        rc = cdb_sql_prepare(db->cat,
                        "INSERT OR IGNORE INTO vectors(model_id, file_id, seq) VALUES(?1, ?2, 1)",
                        &ins);
    int64_t n = 0;
    while (rc == CDB_OK) {
        int s = sqlite3_step(sh);
        if (s == SQLITE_DONE) break;
        if (s != SQLITE_ROW) {
            rc = cdb_sql_err(db->cat, s, "migrate v2");
            break;
        }
        db_shard *shard = NULL;
        if ((rc = cdb_shard_get(db, sqlite3_column_int(sh, 0), &shard)) != CDB_OK) break;
        if ((rc = cdb_sql_prepare(shard->conn, "SELECT model_id, file_id FROM vectors", &rd)) != CDB_OK)
            break;
        while ((s = sqlite3_step(rd)) == SQLITE_ROW) {
            sqlite3_reset(ins);
            sqlite3_bind_int64(ins, 1, sqlite3_column_int64(rd, 0));
            sqlite3_bind_int64(ins, 2, sqlite3_column_int64(rd, 1));
            if ((s = sqlite3_step(ins)) != SQLITE_DONE) break;
            n++;
        }
        if (s != SQLITE_DONE) rc = cdb_sql_err(db->cat, s, "migrate v2: copy shard directory");
        sqlite3_finalize(rd);
        rd = NULL;
    }
    if (rc == CDB_OK && n > 0) rc = cdb_sql_meta_set_int(db, "generation", 1);
    sqlite3_finalize(sh);
    sqlite3_finalize(ins);
    return rc;
}

/* Schema v4: move detection finds files by hkey through a two-level index
** instead of an index on files. A B-tree on a random key dirties about one page
** per new file once it outgrows a commit, and each dirty page is written to the
** WAL and checkpointed again: the largest cost of storing a new file. New keys go
** to hkeys_new, small enough that a commit dirties only a few of its pages; a
** merge folds it into hkeys in key order (batch.c, hkeys_maybe_merge), one pass over
** hkeys for thousands of keys. Invariant: every ok files row with a hash has
** (hkey, id) in hkeys or hkeys_new (batch.c adds it in the commit's step 3, where
** a file becomes ok or an ok file gets new meta). Entries are never removed (a
** file whose content changed keeps its old key too): lookups check the files row
** (root, full hash, state ok), so a stale entry never matches. (Not triggers: a
** statement with a trigger runs with a statement journal, which copies every
** page it writes: slower than the index it replaces.) */
static const char k_schema_v4[] =
    "DROP INDEX IF EXISTS files_hkey;"
    "CREATE TABLE IF NOT EXISTS hkeys(hkey INTEGER NOT NULL, file_id INTEGER NOT NULL,"
    " PRIMARY KEY(hkey, file_id)) WITHOUT ROWID;"
    "CREATE TABLE IF NOT EXISTS hkeys_new(hkey INTEGER NOT NULL, file_id INTEGER NOT NULL,"
    " PRIMARY KEY(hkey, file_id)) WITHOUT ROWID;"
    "INSERT OR IGNORE INTO hkeys(hkey, file_id) SELECT hkey, id FROM files"
    " WHERE hkey IS NOT NULL ORDER BY hkey, id;";

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
    cdb_status rc = cdb_sql_prepare(db->cat, sql, &st);
    if (rc != CDB_OK) return rc;
    int has = sqlite3_step(st) == SQLITE_ROW;
    sqlite3_finalize(st);
    if (has) return CDB_OK;
    snprintf(sql, sizeof sql, "ALTER TABLE %s ADD COLUMN %s %s", table, col, type);
    return cdb_sql_exec(db->cat, sql);
}

static cdb_status migrate_v5(cdb_db *db) {
    cdb_status rc = CDB_OK;
    for (size_t i = 0; i < sizeof k_v5_columns / sizeof k_v5_columns[0] && rc == CDB_OK; i++)
        rc = add_column(db, k_v5_columns[i][0], k_v5_columns[i][1], k_v5_columns[i][2]);
    if (rc == CDB_OK)
        rc = cdb_sql_exec(db->cat,
                     "CREATE TABLE IF NOT EXISTS walk_problems(id INTEGER PRIMARY KEY,"
                     " root_id INTEGER NOT NULL, relpath BLOB NOT NULL, reason TEXT NOT NULL,"
                     " seen_ns INTEGER NOT NULL);"
                     "CREATE INDEX IF NOT EXISTS walk_problems_root ON walk_problems(root_id,"
                     " relpath);");
    return rc;
}

/* v6: the filesystem boundary (issue 25). A folder root records its folder's identity
** (cdb_db_root_ident) when a scan completes, so that an empty mount point, another
** filesystem mounted at the root's path or a folder made anew there is not taken for
** the recorded folder with every file deleted. NULL until the next complete scan. */
static const char *const k_v6_columns[][3] = {
    {"roots", "fsid", "INTEGER"},
    {"roots", "fstype", "INTEGER"},
    {"roots", "ino", "INTEGER"},
    {"roots", "btime_ns", "INTEGER"},
};

static cdb_status migrate_v6(cdb_db *db) {
    cdb_status rc = CDB_OK;
    for (size_t i = 0; i < sizeof k_v6_columns / sizeof k_v6_columns[0] && rc == CDB_OK; i++)
        rc = add_column(db, k_v6_columns[i][0], k_v6_columns[i][1], k_v6_columns[i][2]);
    return rc;
}

/* v7: what each root leaves out (issue 28 part 5; excludes.c): `ingest --exclude` globs
** and the subfolders `forget` removed, so that reindex leaves them out again. */
static const char k_schema_v7[] =
    "CREATE TABLE IF NOT EXISTS root_excludes(id INTEGER PRIMARY KEY,"
    " root_id INTEGER NOT NULL, kind INTEGER NOT NULL, base TEXT NOT NULL DEFAULT '',"
    " pattern TEXT NOT NULL, UNIQUE(root_id, kind, base, pattern));";
/* v8: photo metadata (issue 28), one row per file read (photos.c): the capture time as
** the camera's wall clock in ms with its UTC offset when known, its source, camera,
** lens and position, and the content hash it was read from (a row describes the
** file only while that is the file's hash). Rows of older databases are filled by
** the next reindex, which reads the files' bytes without encoding them again. */
static const char k_schema_v8[] =
    "CREATE TABLE IF NOT EXISTS photo_meta(file_id INTEGER PRIMARY KEY, hash BLOB NOT NULL,"
    " taken_source INTEGER NOT NULL DEFAULT 0, taken_ms INTEGER,"
    " has_offset INTEGER NOT NULL DEFAULT 0, offset_min INTEGER NOT NULL DEFAULT 0,"
    " make TEXT NOT NULL DEFAULT '', model TEXT NOT NULL DEFAULT '',"
    " lens TEXT NOT NULL DEFAULT '', has_gps INTEGER NOT NULL DEFAULT 0, lat REAL, lon REAL,"
    " alt REAL);";

/* v9 (issue 28): the perceptual hash `duplicates` and search's collapsing compare, kept
** with the metadata read from the same content (photo_meta.hash: never used once the
** file's content changed), with the format and full oriented size of the decode it came
** from; NULL until computed (by the first duplicates run that can write, or the
** reindex that backfills it; since v10 ingest stores a JPEG's). And the .clipdbignore
** files each root's last scan met (`folders`). */
static const char *const k_v9_columns[][3] = {
    {"photo_meta", "phash", "INTEGER"},
    {"photo_meta", "phash_format", "INTEGER"},
    {"photo_meta", "phash_width", "INTEGER"},
    {"photo_meta", "phash_height", "INTEGER"},
};
static const char k_schema_v9[] =
    "CREATE TABLE IF NOT EXISTS ignore_files(root_id INTEGER NOT NULL, relpath BLOB NOT NULL,"
    " PRIMARY KEY(root_id, relpath)) WITHOUT ROWID;";

static cdb_status migrate_v9(cdb_db *db) {
    cdb_status rc = CDB_OK;
    for (size_t i = 0; i < sizeof k_v9_columns / sizeof k_v9_columns[0] && rc == CDB_OK; i++)
        rc = add_column(db, k_v9_columns[i][0], k_v9_columns[i][1], k_v9_columns[i][2]);
    return rc == CDB_OK ? cdb_sql_exec(db->cat, k_schema_v9) : rc;
}

/* v10 (issue 28): a YCbCr or grayscale JPEG's phash is now its DC hash (encoder.h,
** cdb_image_phash), which every decode of it gives, so ingest stores it; the hashes
** stored before were cdb_image_phash of a 1/8 decode's RGB, a few bits away. Two
** definitions must never be compared: the stored phashes of JPEG-like decodes
** (phash_format 1: JPEG, HEIF, TIFF) are cleared, and the next reindex (or a duplicates
** run that can write) recomputes them from the files' bytes, as for a v8 row. */
static const char k_schema_v10[] =
    "UPDATE photo_meta SET phash = NULL, phash_format = NULL, phash_width = NULL,"
    " phash_height = NULL WHERE phash IS NOT NULL AND phash_format = 1;";

cdb_status cdb_schema_migrate(cdb_db *db, int64_t from) {
    cdb_status rc = CDB_OK;
    for (int64_t v = from + 1; v <= CDB_DB_SCHEMA_VERSION && rc == CDB_OK; v++) {
        if ((rc = cdb_sql_begin(db->cat)) != CDB_OK) return rc;
        if (v == 1) {
            char uuid[33];
            uint8_t rnd[16];
            int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
            if (fd < 0 || read(fd, rnd, sizeof rnd) != (ssize_t)sizeof rnd) {
                int64_t t = cdb_sql_wall_ns() ^ ((int64_t)getpid() << 32);
                for (int i = 0; i < 16; i++) rnd[i] = (uint8_t)(t >> ((i % 8) * 8)) ^ (uint8_t)i;
            }
            if (fd >= 0) close(fd);
            for (int i = 0; i < 16; i++) snprintf(uuid + 2 * i, 3, "%02x", rnd[i]);
            rc = cdb_sql_exec(db->cat, k_schema_v1);
            if (rc == CDB_OK) rc = cdb_sql_meta_set_text(db, "uuid", uuid);
            if (rc == CDB_OK) rc = cdb_sql_meta_set_text(db, "created_by", CDB_VERSION_STRING);
            if (rc == CDB_OK) rc = cdb_sql_meta_set_int(db, "created_ns", cdb_sql_wall_ns());
            if (rc == CDB_OK) rc = cdb_sql_meta_set_int(db, "shard_capacity", db->shard_capacity);
            if (rc == CDB_OK) {
                cdb_free(db->uuid);
                db->uuid = cdb_strdup(uuid);
            }
        } else if (v == 2) {
            rc = cdb_sql_exec(db->cat, k_schema_v2);
            if (rc == CDB_OK) rc = migrate_v2_fill(db);
        } else if (v == 3) {
            rc = migrate_v3(db);
        } else if (v == 4) {
            rc = cdb_sql_exec(db->cat, k_schema_v4);
        } else if (v == 5) {
            rc = migrate_v5(db);
        } else if (v == 6) {
            rc = migrate_v6(db);
        } else if (v == 7) {
            rc = cdb_sql_exec(db->cat, k_schema_v7);
        } else if (v == 8) {
            rc = cdb_sql_exec(db->cat, k_schema_v8);
        } else if (v == 9) {
            rc = migrate_v9(db);
        } else if (v == 10) {
            rc = cdb_sql_exec(db->cat, k_schema_v10);
        }
        if (rc == CDB_OK) rc = cdb_sql_meta_set_int(db, "schema_version", v);
        if (rc == CDB_OK) rc = cdb_sql_meta_set_text(db, "last_writer", CDB_VERSION_STRING);
        if (rc == CDB_OK)
            rc = cdb_sql_commit(db->cat);
        else
            cdb_sql_rollback(db->cat);
        if (rc == CDB_OK && v > 1 && from > 0)
            CDB_LOG_INFO("db: migrated %s/catalog.db to schema %d", db->dir, (int)v);
    }
    return rc;
}

/* Schema version of the open catalog: 0 for an empty file, CDB_CORRUPT for a
** SQLite file that is not a clipdb catalog. Reads only. */
cdb_status cdb_schema_read_version(cdb_db *db, int64_t *v) {
    sqlite3_stmt *st = NULL;
    cdb_status rc = cdb_sql_prepare(db->cat, "SELECT count(*) FROM sqlite_master", &st);
    if (rc != CDB_OK) return cdb_errctx(rc, "%s/catalog.db", db->dir);
    int s = sqlite3_step(st);
    int64_t n = s == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
    if (s != SQLITE_ROW) rc = cdb_sql_err(db->cat, s, "read catalog");
    sqlite3_finalize(st);
    if (rc != CDB_OK) return rc;
    if (n == 0) {
        *v = 0;
        return CDB_OK;
    }
    rc = cdb_sql_meta_get_int(db, "schema_version", v);
    if (rc != CDB_OK)
        return cdb_seterr(CDB_CORRUPT, "%s/catalog.db is not a clipdb catalog (%s)", db->dir,
                          cdb_errmsg());
    return CDB_OK;
}
