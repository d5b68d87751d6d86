/*
** settings.c: decoding settings a database keeps for every command that reads its
** photos (db.h): the pixel limit over which a photo is refused (0, never set, means
** the encoder's default); a fact about its photos: whether a run encoded a real photo
** (one without the generated world's mark). Kept in the meta table. And the write
** commands' notes (meta keys "note:<key>"): work begun that the next writer finishes
** after a kill.
*/
#include <stdio.h>

#include "db/db_int.h"

/* What a photo over the limit was quarantined with (encoder/image.c's wording). */
#define TOO_LARGE_TEXT "%pixels exceeds the limit of%"

/* A meta value, 0 when it was never set. */
static cdb_status meta_int(cdb_db *db, const char *key, int64_t *v) {
    cdb_status rc = cdb_sql_meta_get_int(db, key, v);
    if (rc != CDB_NOTFOUND) return rc;
    cdb_clearerr();
    *v = 0;
    return CDB_OK;
}

cdb_status cdb_db_max_pixels(cdb_db *db, int64_t *px) {
    int64_t v = 0;
    cdb_status rc = meta_int(db, "max_pixels", &v);
    if (rc == CDB_OK) *px = v > 0 ? v : 0;
    return rc;
}

cdb_status cdb_db_set_max_pixels(cdb_db *db, int64_t px, int requeue, int64_t *n_requeued) {
    sqlite3_stmt *st = NULL;
    cdb_status rc;
    if (n_requeued) *n_requeued = 0;
    if ((rc = cdb_sql_need_writer(db, "set_max_pixels")) != CDB_OK) return rc;
    if (px < 0) return cdb_seterr(CDB_INVALID, "pixel limit %lld: not a count", (long long)px);
    if ((rc = cdb_sql_begin(db->cat)) != CDB_OK) return rc;
    rc = cdb_sql_meta_set_int(db, "max_pixels", px);
    /* what the old limit refused is retried by the next run (pending with a reason:
    ** a failure to retry) */
    if (rc == CDB_OK && requeue)
        rc = cdb_sql_prepare(
            db->cat, "UPDATE files SET state=1 WHERE state=3 AND error LIKE '" TOO_LARGE_TEXT "'", &st);
    if (rc == CDB_OK && st) rc = cdb_sql_step_done(db->cat, st, "set_max_pixels");
    if (rc == CDB_OK && st && n_requeued) *n_requeued = sqlite3_changes(db->cat);
    return cdb_sql_end(db->cat, rc);
}

cdb_status cdb_db_real_photos(cdb_db *db, int *seen) {
    int64_t v = 0;
    cdb_status rc = meta_int(db, "real_photos", &v);
    if (rc == CDB_OK) *seen = v != 0;
    return rc;
}

cdb_status cdb_db_set_real_photos(cdb_db *db) {
    cdb_status rc = cdb_sql_need_writer(db, "set_real_photos");
    return rc == CDB_OK ? cdb_sql_meta_set_int(db, "real_photos", 1) : rc;
}

/* ---- partition ------------------------------------------------------------------- */

cdb_status cdb_db_partition(cdb_db *db, int *index, int *count) {
    int64_t i = 0, n = 0;
    cdb_status rc = meta_int(db, "part_index", &i);
    if (rc == CDB_OK) rc = meta_int(db, "part_count", &n);
    if (rc == CDB_OK && (n < 0 || i < 0 || i > n || (n > 0 && i == 0) || n > 1000000))
        rc = cdb_seterr(CDB_CORRUPT, "recorded partition %lld/%lld", (long long)i, (long long)n);
    *index = rc == CDB_OK ? (int)i : 0;
    *count = rc == CDB_OK ? (int)n : 0;
    return rc;
}

cdb_status cdb_db_set_partition(cdb_db *db, int index, int count) {
    cdb_status rc = cdb_sql_need_writer(db, "set_partition");
    if (rc != CDB_OK) return rc;
    if (count < 1 || index < 1 || index > count || count > 1000000)
        return cdb_seterr(CDB_INVALID, "partition %d/%d: expected 1 <= I <= N", index, count);
    if ((rc = cdb_sql_begin(db->cat)) != CDB_OK) return rc;
    rc = cdb_sql_meta_set_int(db, "part_index", index);
    if (rc == CDB_OK) rc = cdb_sql_meta_set_int(db, "part_count", count);
    return cdb_sql_end(db->cat, rc);
}

/* ---- notes ------------------------------------------------------------------------- */

#define NOTE_PREFIX "note:"

cdb_status cdb_db_note_get(cdb_db *db, const char *key, char **value) {
    sqlite3_stmt *st = NULL;
    char k[4200];
    int s;
    cdb_status rc = cdb_sql_prepare(db->cat, "SELECT value FROM meta WHERE key=?1", &st);
    *value = NULL;
    if (rc != CDB_OK) return rc;
    snprintf(k, sizeof k, NOTE_PREFIX "%s", key);
    sqlite3_bind_text(st, 1, k, -1, SQLITE_TRANSIENT);
    if ((s = sqlite3_step(st)) == SQLITE_ROW) {
        if (!(*value = cdb_sql_column_strdup(st, 0))) rc = cdb_seterr(CDB_NOMEM, "out of memory");
    } else if (s != SQLITE_DONE) {
        rc = cdb_sql_err(db->cat, s, "read note");
    }
    sqlite3_finalize(st);
    return rc;
}

cdb_status cdb_db_note_set(cdb_db *db, const char *key, const char *value) {
    sqlite3_stmt *st = NULL;
    char k[4200];
    cdb_status rc = cdb_sql_need_writer(db, "note");
    if (rc != CDB_OK) return rc;
    snprintf(k, sizeof k, NOTE_PREFIX "%s", key);
    if (value) return cdb_sql_meta_set_text(db, k, value);
    if ((rc = cdb_sql_prepare(db->cat, "DELETE FROM meta WHERE key=?1", &st)) != CDB_OK) return rc;
    sqlite3_bind_text(st, 1, k, -1, SQLITE_TRANSIENT);
    return cdb_sql_step_done(db->cat, st, "note");
}
