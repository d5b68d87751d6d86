/*
** test_db_excludes.c: the rules a root leaves out (db.h, db/excludes.c), against a
** model: a plain list of the rules recorded, in order, with duplicates dropped.
** Random adds and removes, then reopen; forget and adopt; the v6 -> v7 migration of
** a catalog made before the table existed.
*/
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

#include "cdb_test.h"
#include "db/db.h"
#include "db_test_util.h"

typedef struct rule {
    int kind;
    char base[16], pattern[16];
} rule;

/* The rules of root_id equal the model's list? */
static int same_as_model(cdb_db *db, int64_t root_id, const rule *m, int n_m)
{
    cdb_db_exclude *v = NULL;
    int n = 0, ok;
    if (cdb_db_root_excludes(db, root_id, &v, &n) != CDB_OK)
        return 0;
    ok = n == n_m;
    for (int i = 0; ok && i < n; i++)
        ok = (int)v[i].kind == m[i].kind && !strcmp(v[i].base, m[i].base) &&
             !strcmp(v[i].pattern, m[i].pattern);
    cdb_db_excludes_free(v, n);
    return ok;
}

static cdb_db *open_writer(const char *dir)
{
    cdb_db_params p = cdb_db_params_default();
    p.create = 1;
    cdb_db *db = NULL;
    return cdb_db_open(dir, &p, &db) == CDB_OK ? db : NULL;
}

CDB_TEST(excludes_match_model)
{
    char dir[256];
    tu_tmpdir(dir, sizeof dir, "excl");
    cdb_db *db = open_writer(dir);
    CHECK(db != NULL);
    int64_t a = 0, b = 0;
    CHECK_OK(cdb_db_root_add(db, "/photos/a", &a));
    CHECK_OK(cdb_db_root_add(db, "/photos/b", &b));
    static const char *const pats[] = {"*.tmp", "/private/", "!keep.tmp", "**/cache/**"};
    static const char *const bases[] = {"", "2019"};
    rule model[64];
    int n_model = 0;
    uint64_t seed = 28;
    for (int step = 0; step < 300; step++) {
        rule r = {1 + (int)(tu_splitmix(&seed) % 2), "", ""};
        snprintf(r.base, sizeof r.base, "%s", bases[tu_splitmix(&seed) % 2]);
        snprintf(r.pattern, sizeof r.pattern, "%s", pats[tu_splitmix(&seed) % 4]);
        int at = -1;
        for (int i = 0; i < n_model; i++)
            if (model[i].kind == r.kind && !strcmp(model[i].base, r.base) &&
                !strcmp(model[i].pattern, r.pattern))
                at = i;
        if (tu_splitmix(&seed) % 3) {
            CHECK_OK(cdb_db_root_exclude_add(db, a, (cdb_db_exclude_kind)r.kind, r.base,
                                             r.pattern));
            if (at < 0)
                model[n_model++] = r;
        } else {
            CHECK_RC(cdb_db_root_exclude_remove(db, a, (cdb_db_exclude_kind)r.kind, r.base,
                                                r.pattern), at < 0 ? CDB_NOTFOUND : CDB_OK);
            if (at >= 0) {
                memmove(&model[at], &model[at + 1], (size_t)(n_model - at - 1) * sizeof *model);
                n_model--;
            }
        }
        CHECK(same_as_model(db, a, model, n_model));
        CHECK(same_as_model(db, b, NULL, 0)); /* another root sees none of them */
    }
    cdb_db_close(db);
    db = open_writer(dir); /* they persist */
    CHECK(db != NULL);
    CHECK(same_as_model(db, a, model, n_model));
    /* bad arguments */
    CHECK_RC(cdb_db_root_exclude_add(db, a, CDB_DB_EXCLUDE_GLOB, "/x", "*.jpg"), CDB_INVALID);
    CHECK_RC(cdb_db_root_exclude_add(db, a, CDB_DB_EXCLUDE_GLOB, "x/", "*.jpg"), CDB_INVALID);
    CHECK_RC(cdb_db_root_exclude_add(db, a, CDB_DB_EXCLUDE_GLOB, "", ""), CDB_INVALID);
    CHECK_RC(cdb_db_root_exclude_add(db, a, (cdb_db_exclude_kind)9, "", "x"), CDB_INVALID);
    CHECK_RC(cdb_db_root_exclude_add(db, 999, CDB_DB_EXCLUDE_GLOB, "", "x"), CDB_NOTFOUND);
    cdb_db_close(db);
    tu_rmtree(dir);
}

CDB_TEST(excludes_follow_forget_and_adopt)
{
    char dir[256];
    tu_tmpdir(dir, sizeof dir, "excl2");
    cdb_db *db = open_writer(dir);
    CHECK(db != NULL);
    int64_t parent = 0, child = 0, model = 0;
    CHECK_OK(cdb_db_model_register(db, "w", "m", 4, NULL, &model));
    CHECK_OK(cdb_db_root_add(db, "/p", &parent));
    CHECK_OK(cdb_db_root_add(db, "/p/sub/dir", &child));
    CHECK_OK(cdb_db_root_exclude_add(db, parent, CDB_DB_EXCLUDE_GLOB, "", "*.tmp"));
    CHECK_OK(cdb_db_root_exclude_add(db, child, CDB_DB_EXCLUDE_GLOB, "", "*.tmp"));
    CHECK_OK(cdb_db_root_exclude_add(db, child, CDB_DB_EXCLUDE_FORGOT, "x", "/y/"));
    CHECK_OK(cdb_db_root_adopt(db, model, parent, child, NULL));
    rule want[3] = {{1, "", "*.tmp"}, {1, "sub/dir", "*.tmp"}, {2, "sub/dir/x", "/y/"}};
    CHECK(same_as_model(db, parent, want, 3));
    CHECK(same_as_model(db, child, NULL, 0));
    CHECK_OK(cdb_db_root_forget(db, model, parent, NULL));
    CHECK(same_as_model(db, parent, NULL, 0));
    cdb_db_close(db);
    tu_rmtree(dir);
}

CDB_TEST(excludes_migrate_from_v6)
{
    char dir[256], cat[300];
    tu_tmpdir(dir, sizeof dir, "excl3");
    cdb_db *db = open_writer(dir);
    CHECK(db != NULL);
    int64_t r = 0;
    CHECK_OK(cdb_db_root_add(db, "/p", &r));
    cdb_db_close(db);
    /* a catalog as clipdb left it before v7: no table, version 6 */
    snprintf(cat, sizeof cat, "%s/catalog.db", dir);
    sqlite3 *c = NULL;
    CHECK_EQ_INT(sqlite3_open(cat, &c), SQLITE_OK);
    CHECK_EQ_INT(sqlite3_exec(c, "DROP TABLE root_excludes;"
                                 "UPDATE meta SET value=6 WHERE key='schema_version';",
                              NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(c);
    db = open_writer(dir);
    CHECK(db != NULL);
    CHECK_OK(cdb_db_root_exclude_add(db, r, CDB_DB_EXCLUDE_GLOB, "", "*.tmp"));
    rule want[1] = {{1, "", "*.tmp"}};
    CHECK(same_as_model(db, r, want, 1));
    cdb_db_close(db);
    tu_rmtree(dir);
}

CDB_TEST_MAIN(excludes_match_model, excludes_follow_forget_and_adopt, excludes_migrate_from_v6)
