/*
** excludes.c: the rules each root leaves out (db.h "what a root leaves out"): one row
** per rule in root_excludes (schema v7), in the order recorded; and the .clipdbignore
** files its last scan met (ignore_files, schema v9), to list them. The rules themselves
** are ignore/ignore.h's business; here they are only kept.
*/
#include <string.h>

#include "db/db_int.h"

static cdb_status check_rule(cdb_db_exclude_kind kind, const char *base, const char *pattern,
                             const char *what)
{
    size_t bl = base ? strlen(base) : 0;
    if (kind != CDB_DB_EXCLUDE_GLOB && kind != CDB_DB_EXCLUDE_FORGOT)
        return cdb_seterr(CDB_INVALID, "%s: no exclusion kind %d", what, (int)kind);
    if (!base || (bl && (base[0] == '/' || base[bl - 1] == '/')))
        return cdb_seterr(CDB_INVALID, "%s: base '%s' must be relative, without a trailing '/'",
                          what, base ? base : "(null)");
    if (!pattern || !*pattern)
        return cdb_seterr(CDB_INVALID, "%s: empty pattern", what);
    return CDB_OK;
}

/* Runs sql (writer) with (root, kind, base, pattern) bound as ?1..?4, after the checks
** both writes share. */
static cdb_status rule_exec(cdb_db *db, const char *sql, int64_t root_id,
                            cdb_db_exclude_kind kind, const char *base, const char *pattern,
                            const char *what)
{
    sqlite3_stmt *st = NULL;
    cdb_status rc = cdb_sql_need_writer(db, what);
    if (rc == CDB_OK)
        rc = check_rule(kind, base, pattern, what);
    if (rc == CDB_OK)
        rc = cdb_sql_prepare(db->cat, sql, &st);
    if (rc != CDB_OK)
        return rc;
    sqlite3_bind_int64(st, 1, root_id);
    sqlite3_bind_int(st, 2, (int)kind);
    sqlite3_bind_text(st, 3, base, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, pattern, -1, SQLITE_STATIC);
    return cdb_sql_step_done(db->cat, st, what);
}

cdb_status cdb_db_root_exclude_add(cdb_db *db, int64_t root_id, cdb_db_exclude_kind kind,
                                   const char *base, const char *pattern)
{
    int64_t n = 0;
    cdb_status rc = cdb_sql_count(db, "SELECT count(*) FROM roots WHERE id=?1", root_id, &n);
    if (rc == CDB_OK && n == 0)
        rc = cdb_seterr(CDB_NOTFOUND, "record exclusion: no root %lld", (long long)root_id);
    if (rc != CDB_OK)
        return rc;
    return rule_exec(db, "INSERT OR IGNORE INTO root_excludes(root_id, kind, base, pattern)"
                     " VALUES(?1, ?2, ?3, ?4)", root_id, kind, base, pattern,
                     "record exclusion");
}

cdb_status cdb_db_root_exclude_remove(cdb_db *db, int64_t root_id, cdb_db_exclude_kind kind,
                                      const char *base, const char *pattern)
{
    cdb_status rc = rule_exec(db, "DELETE FROM root_excludes WHERE root_id=?1 AND kind=?2"
                              " AND base=?3 AND pattern=?4", root_id, kind, base, pattern,
                              "remove exclusion");
    if (rc == CDB_OK && sqlite3_changes(db->cat) == 0)
        rc = cdb_seterr(CDB_NOTFOUND, "remove exclusion: '%s' is not recorded", pattern);
    return rc;
}

void cdb_db_excludes_free(cdb_db_exclude *v, int n)
{
    for (int i = 0; v && i < n; i++) {
        cdb_free(v[i].base);
        cdb_free(v[i].pattern);
    }
    cdb_free(v);
}

cdb_status cdb_db_root_excludes(cdb_db *db, int64_t root_id, cdb_db_exclude **out, int *n)
{
    sqlite3_stmt *st = NULL;
    cdb_db_exclude *v = NULL;
    int cnt = 0, cap = 0, s = SQLITE_DONE;
    *out = NULL;
    *n = 0;
    cdb_status rc = cdb_sql_prepare(db->cat,
                                    "SELECT kind, base, pattern FROM root_excludes"
                                    " WHERE root_id=?1 ORDER BY id", &st);
    if (rc != CDB_OK)
        return rc;
    sqlite3_bind_int64(st, 1, root_id);
    while (rc == CDB_OK && (s = sqlite3_step(st)) == SQLITE_ROW) {
        if (cnt == cap) {
            cap = cap ? cap * 2 : 8;
            cdb_db_exclude *m = cdb_realloc(v, (size_t)cap * sizeof *m);
            if (!m) {
                rc = cdb_seterr(CDB_NOMEM, "list exclusions: out of memory");
                break;
            }
            v = m;
        }
        cdb_db_exclude *e = &v[cnt++];
        e->kind = (cdb_db_exclude_kind)sqlite3_column_int(st, 0);
        e->base = cdb_sql_column_strdup(st, 1);
        e->pattern = cdb_sql_column_strdup(st, 2);
        if (!e->base || !e->pattern)
            rc = cdb_seterr(CDB_NOMEM, "list exclusions: out of memory");
    }
    if (rc == CDB_OK && s != SQLITE_DONE)
        rc = cdb_sql_err(db->cat, s, "list exclusions");
    sqlite3_finalize(st);
    if (rc != CDB_OK) {
        cdb_db_excludes_free(v, cnt);
        return rc;
    }
    *out = v;
    *n = cnt;
    return CDB_OK;
}

/* ---- the .clipdbignore files a scan met ------------------------------------------------ */

cdb_status cdb_db_ignore_files_set(cdb_db *db, int64_t root_id, const char *under,
                                   const char *const *relpaths, int n) {
    sqlite3_stmt *ins = NULL;
    cdb_status rc = cdb_sql_need_writer(db, "record .clipdbignore files");
    if (rc != CDB_OK || (rc = cdb_sql_begin(db->cat)) != CDB_OK) return rc;
    rc = cdb_sql_delete_under(db, "ignore_files", root_id, under, "record .clipdbignore files");
    if (rc == CDB_OK)
        rc = cdb_sql_prepare(db->cat, "INSERT OR IGNORE INTO ignore_files(root_id, relpath)"
                             " VALUES(?1, ?2)", &ins);
    for (int i = 0; rc == CDB_OK && i < n; i++) {
        sqlite3_reset(ins);
        sqlite3_bind_int64(ins, 1, root_id);
        sqlite3_bind_blob(ins, 2, relpaths[i], (int)strlen(relpaths[i]), SQLITE_STATIC);
        rc = cdb_sql_step_row(db->cat, ins, "record .clipdbignore files");
    }
    sqlite3_finalize(ins);
    return cdb_sql_end(db->cat, rc);
}

cdb_status cdb_db_ignore_files(cdb_db *db, int64_t root_id, char ***out, int *n) {
    sqlite3_stmt *st = NULL;
    char **v = NULL;
    int cnt = 0, cap = 0, s = SQLITE_DONE;
    *out = NULL;
    *n = 0;
    cdb_status rc = cdb_sql_prepare(db->cat, "SELECT relpath FROM ignore_files WHERE root_id=?1"
                                    " ORDER BY relpath", &st);
    if (rc != CDB_OK) return rc;
    sqlite3_bind_int64(st, 1, root_id);
    while (rc == CDB_OK && (s = sqlite3_step(st)) == SQLITE_ROW) {
        if (cnt == cap) {
            cap = cap ? cap * 2 : 8;
            char **m = cdb_realloc(v, (size_t)cap * sizeof *m);
            if (!m) {
                rc = cdb_seterr(CDB_NOMEM, "list .clipdbignore files: out of memory");
                break;
            }
            v = m;
        }
        if (!(v[cnt] = cdb_sql_column_strdup(st, 0)))
            rc = cdb_seterr(CDB_NOMEM, "list .clipdbignore files: out of memory");
        else
            cnt++;
    }
    if (rc == CDB_OK && s != SQLITE_DONE) rc = cdb_sql_err(db->cat, s, "list .clipdbignore files");
    sqlite3_finalize(st);
    if (rc != CDB_OK) {
        cdb_db_ignore_files_free(v, cnt);
        return rc;
    }
    *out = v;
    *n = cnt;
    return CDB_OK;
}

void cdb_db_ignore_files_free(char **v, int n) {
    for (int i = 0; v && i < n; i++) cdb_free(v[i]);
    cdb_free(v);
}
