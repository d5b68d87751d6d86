/*
** test_db_folder.c: a folder's rows for a rescan's merge join (cdb_db_folder_read), against
** brute force. Random relative paths (names from bytes that sort on both sides of '/':
** ' ', '-', '.', '0', 0x01, 0xFF, so subfolders' rows interleave with a folder's own in
** the catalog's order) are stored in two roots; for every folder, the listing must be
** exactly the paths whose parent is that folder, in strcmp order of their names, each
** with the row cdb_db_file_lookup gives, the vector claim cdb_db_file_has_vector gives and
** the thumbnail currency cdb_db_thumb_current gives (some thumbnails current, some made
** from another hash, some at another size; the ids of one folder close together or far
** apart, the two ways thumbs.c reads them). cdb_db_folder_find then finds every name in
** order, none of the names that are not there, and a name asked out of order too. Then
** cdb_db_thumbs_prune (a merge of two scans in id order) keeps exactly the thumbnails
** that a lookup of each file and of its thumbnail says are current.
** The catalog-wide merges of the ok files with another table in id order
** (cdb_sql_ok_files_lacking): the ok files without a vector of a model
** (cdb_db_count_missing, cdb_db_get_counts' n_missing) and those without a current photo
** row (cdb_db_photos_missing, of every root and of each) equal what a lookup of each file,
** its claim and its photo row says: vectors of every file, of every third, of none; photo
** rows current, of another hash, without a phash, or none; deleted files among them, and
** a claim left to a deleted file by hand (it vouches for nothing).
*/
#include <sqlite3.h>

#include "cdb_test.h"
#include "db/db.h"
#include "db_test_util.h"

#define DIM 16
#define N_PATHS 600

static const char *const k_parts[] = {"a", "b", "a b", "a-b", "a.b", "a0", "\x01", "\xff",
                                      "ab", "a.jpg", "b.jpg", "\xff" "x"};
#define N_PARTS (int)(sizeof k_parts / sizeof k_parts[0])

typedef struct path_t {
    char rel[64];
    int64_t root;
} path_t;

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The parent folder of rel ("" at the top) into dir. */
static void parent_of(const char *rel, char *dir, size_t size) {
    const char *s = strrchr(rel, '/');
    snprintf(dir, size, "%.*s", s ? (int)(s - rel) : 0, rel);
}

/* 1 when some path is rel itself or lies under rel/ (a path cannot be both a file and a
** folder of the same root). */
static int clashes(const path_t *p, int n, int64_t root, const char *rel) {
    size_t rl = strlen(rel);
    for (int i = 0; i < n; i++) {
        if (p[i].root != root) continue;
        size_t pl = strlen(p[i].rel);
        if (!strcmp(p[i].rel, rel)) return 1;
        if (pl > rl && !strncmp(p[i].rel, rel, rl) && p[i].rel[rl] == '/') return 1;
        if (rl > pl && !strncmp(rel, p[i].rel, pl) && rel[pl] == '/') return 1;
    }
    return 0;
}

/* Checks the listing of folder dir of root against brute force over the n paths (a
** failure is the test's: cdb_t_). */
static void check_folder(cdb_test_ctx *cdb_t_, cdb_db *db, int64_t model, int64_t root,
                         const char *dir, int px, const path_t *p, int n) {
    const char *want[N_PATHS];
    int k = 0;
    char pd[64];
    cdb_db_folder *d = NULL;
    for (int i = 0; i < n; i++) {
        parent_of(p[i].rel, pd, sizeof pd);
        if (p[i].root == root && !strcmp(pd, dir)) want[k++] = strrchr(p[i].rel, '/')
                                                             ? strrchr(p[i].rel, '/') + 1
                                                             : p[i].rel;
    }
    qsort(want, (size_t)k, sizeof *want, cmp_str);
    CHECK_OK(cdb_db_folder_read(db, root, dir, model, px, &d));
    CHECK_MSG(cdb_db_folder_count(d) == k, "folder '%s': %lld rows, want %d", dir,
              (long long)cdb_db_folder_count(d), k);
    for (int i = 0; i < k; i++) {
        char rel[64];
        cdb_db_file f;
        int has = 0, cur = 0;
        const cdb_db_folder_row *r = cdb_db_folder_find(d, want[i]);
        CHECK_MSG(r != NULL, "folder '%s': %s not found", dir, want[i]);
        snprintf(rel, sizeof rel, "%s%s%s", dir, *dir ? "/" : "", want[i]);
        CHECK_MSG(!strcmp(r->f.relpath, rel), "%s != %s", r->f.relpath, rel);
        CHECK_OK(cdb_db_file_lookup(db, root, rel, &f));
        CHECK_EQ_INT(r->f.id, f.id);
        CHECK_EQ_INT(r->f.state, f.state);
        CHECK_EQ_INT(r->f.meta.size, f.meta.size);
        CHECK_EQ_INT(r->f.meta.mtime_ns, f.meta.mtime_ns);
        CHECK_EQ_INT(r->f.meta.has_hash, f.meta.has_hash);
        CHECK(!memcmp(r->f.meta.hash, f.meta.hash, CDB_DB_HASH_BYTES));
        CHECK_OK(cdb_db_file_has_vector(db, model, f.id, &has));
        CHECK_EQ_INT(r->has_vector, has);
        if (px > 0 && f.state == CDB_DB_OK) /* only an ok file's thumbnail counts */
            CHECK_OK(cdb_db_thumb_current(db, f.id, f.meta.hash, px, &cur));
        CHECK_MSG(r->thumb_current == cur, "%s: thumbnail current %d, want %d", rel,
                  r->thumb_current, cur);
        /* the same name again is out of order: found from the start */
        CHECK(i % 7 || cdb_db_folder_find(d, want[i]) == r);
        cdb_db_file_clear(&f);
    }
    CHECK(cdb_db_folder_find(d, "no such name") == NULL);
    if (k) CHECK(cdb_db_folder_find(d, want[0]) != NULL); /* out of order: from the start */
    cdb_db_folder_free(d);
}

CDB_TEST(folder_rows_match_brute_force) {
    static path_t p[N_PATHS];
    char dir[256];
    cdb_db *db = NULL;
    cdb_db_params prm = cdb_db_params_default();
    int64_t m1 = 0, m2 = 0, roots[2], n_ids = 0;
    uint64_t seed = 29;
    int n = 0;
    float v[DIM];
    prm.sync = CDB_DB_SYNC_NORMAL;
    CHECK_OK(tu_create(dir, sizeof dir, "folder", prm, &db));
    CHECK_OK(cdb_db_model_register(db, "hash-m1", "m1", DIM, "{}", &m1));
    CHECK_OK(cdb_db_model_register(db, "hash-m2", "m2", DIM, "{}", &m2));
    CHECK_OK(cdb_db_root_add(db, "/photos", &roots[0]));
    CHECK_OK(cdb_db_root_add(db, "/more", &roots[1]));
    while (n < N_PATHS) {
        char rel[64] = "";
        int depth = 1 + (int)(tu_splitmix(&seed) % 3);
        int64_t root = roots[tu_splitmix(&seed) % 5 == 0];
        for (int d = 0; d < depth; d++) {
            const char *part = k_parts[tu_splitmix(&seed) % N_PARTS];
            size_t l = strlen(rel);
            snprintf(rel + l, sizeof rel - l, "%s%s", d ? "/" : "", part);
        }
        if (clashes(p, n, root, rel)) continue;
        snprintf(p[n].rel, sizeof p[n].rel, "%s", rel);
        p[n++].root = root;
    }
    /* in three batches, 1,500 files of another root between the second and the third: a
    ** folder's ids far apart */
    for (int part = 0; part < 3; part++) {
        cdb_db_batch *b = NULL;
        int from = part * N_PATHS / 3, to = (part + 1) * N_PATHS / 3;
        CHECK_OK(cdb_db_batch_new(db, m1, &b));
        for (int i = from; i < to; i++) {
            cdb_db_file_meta m = tu_meta(100 + i, 200 + i, (uint64_t)i);
            tu_vec((uint64_t)i, 1.0f, v, DIM);
            CHECK_OK(cdb_db_batch_put(b, p[i].root, p[i].rel, &m, v, DIM));
        }
        CHECK_OK(cdb_db_batch_commit(b, NULL));
        cdb_db_batch_free(b);
        if (part == 1) {
            int64_t filler = 0;
            CHECK_OK(cdb_db_root_add(db, "/filler", &filler));
            CHECK_OK(cdb_db_batch_new(db, m1, &b));
            for (int i = 0; i < 1500; i++) {
                char rel[32];
                cdb_db_file_meta m = tu_meta(1, 1, (uint64_t)(100000 + i));
                snprintf(rel, sizeof rel, "f%d.jpg", i);
                tu_vec((uint64_t)i, 1.0f, v, DIM);
                CHECK_OK(cdb_db_batch_put(b, filler, rel, &m, v, DIM));
            }
            CHECK_OK(cdb_db_batch_commit(b, NULL));
            cdb_db_batch_free(b);
        }
    }
    /* model 2 has a vector of every third file; some files quarantined, some deleted */
    {
        cdb_db_batch *b = NULL;
        CHECK_OK(cdb_db_batch_new(db, m2, &b));
        for (int i = 0; i < N_PATHS; i += 3) {
            cdb_db_file_meta m = tu_meta(100 + i, 200 + i, (uint64_t)i);
            tu_vec((uint64_t)i + 7, 1.0f, v, DIM);
            CHECK_OK(cdb_db_batch_put(b, p[i].root, p[i].rel, &m, v, DIM));
        }
        CHECK_OK(cdb_db_batch_commit(b, NULL));
        cdb_db_batch_free(b);
        CHECK_OK(cdb_db_batch_new(db, m1, &b));
        for (int i = 1; i < N_PATHS; i += 11) {
            cdb_db_file f;
            CHECK_OK(cdb_db_file_lookup(db, p[i].root, p[i].rel, &f));
            CHECK_OK(cdb_db_batch_delete(b, f.id));
            cdb_db_file_clear(&f);
        }
        CHECK_OK(cdb_db_batch_commit(b, NULL));
        cdb_db_batch_free(b);
    }
    /* thumbnails: current at 64 px, of another hash, at another size, or none */
    for (int i = 0; i < N_PATHS; i++) {
        static const uint8_t jpeg[] = {0xFF, 0xD8, 0xFF, 0xD9};
        cdb_db_file f;
        cdb_db_thumb t;
        int kind = (int)(tu_splitmix(&seed) % 4);
        if (kind == 3) continue;
        CHECK_OK(cdb_db_file_lookup(db, p[i].root, p[i].rel, &f));
        memset(&t, 0, sizeof t);
        t.file_id = f.id;
        memcpy(t.hash, f.meta.hash, CDB_DB_HASH_BYTES);
        if (kind == 1) t.hash[0] ^= 1;
        t.px = kind == 2 ? 128 : 64;
        t.width = t.height = 1;
        t.jpeg = jpeg;
        t.n_bytes = sizeof jpeg;
        CHECK_OK(cdb_db_thumbs_put(db, &t, 1));
        cdb_db_file_clear(&f);
        n_ids++;
    }
    CHECK(n_ids > 0);
    /* every folder of both roots (the parents of every path, and theirs), both models */
    for (int r = 0; r < 2; r++) {
        check_folder(cdb_t_, db, m1, roots[r], "", 64, p, n);
        check_folder(cdb_t_, db, m2, roots[r], "", 0, p, n);
    }
    for (int i = 0; i < n; i++) {
        char pd[64];
        memcpy(pd, p[i].rel, sizeof pd); /* both 64 bytes */
        while (strrchr(pd, '/')) {
            *strrchr(pd, '/') = '\0';
            check_folder(cdb_t_, db, i % 2 ? m1 : m2, p[i].root, pd, i % 3 ? 64 : 0, p, n);
            if (cdb_t_->failed) return;
        }
    }
    /* a folder that holds nothing, and one that is a file's name */
    check_folder(cdb_t_, db, m1, roots[0], "no such folder", 64, p, n);
    check_folder(cdb_t_, db, m1, roots[0], p[0].rel, 64, p, n);
    /* the prune keeps exactly the thumbnails of ok files made from their hash (any size),
    ** the truth from each file's row and thumbnail read one by one beforehand */
    {
        static int keep[N_PATHS], had[N_PATHS];
        int64_t want_dropped = 0, dropped = -1;
        for (int i = 0; i < n; i++) {
            cdb_db_file f;
            cdb_db_thumb t;
            CHECK_OK(cdb_db_file_lookup(db, p[i].root, p[i].rel, &f));
            had[i] = cdb_db_thumb_get(db, f.id, &t) == CDB_OK;
            keep[i] = had[i] && f.state == CDB_DB_OK &&
                      !memcmp(t.hash, f.meta.hash, CDB_DB_HASH_BYTES);
            want_dropped += had[i] && !keep[i];
            if (had[i]) cdb_db_thumb_clear(&t);
            cdb_db_file_clear(&f);
        }
        cdb_clearerr();
        CHECK(want_dropped > 0);
        CHECK_OK(cdb_db_thumbs_prune(db, &dropped));
        CHECK_EQ_INT(dropped, want_dropped);
        for (int i = 0; i < n; i++) {
            cdb_db_file f;
            cdb_db_thumb t;
            CHECK_OK(cdb_db_file_lookup(db, p[i].root, p[i].rel, &f));
            int has = cdb_db_thumb_get(db, f.id, &t) == CDB_OK;
            CHECK_MSG(has == keep[i], "%s: thumbnail %s", p[i].rel, has ? "kept" : "dropped");
            if (has) cdb_db_thumb_clear(&t);
            cdb_db_file_clear(&f);
        }
    }
    /* thumbnails that cannot be read (thumbs.db damaged, as a killed writer or a bad disk
    ** may leave it) never fail a rescan's listing: a cache, counted current */
    {
        char thumbs[300];
        cdb_db *rd = NULL;
        cdb_db_params rp = cdb_db_params_default();
        cdb_db_folder *d = NULL;
        FILE *f;
        cdb_db_close(db);
        db = NULL;
        snprintf(thumbs, sizeof thumbs, "%s/thumbs.db", dir);
        CHECK((f = fopen(thumbs, "wb")) != NULL);
        fputs("not a database at all, as far as SQLite can tell", f);
        fclose(f);
        rp.readonly = 1;
        CHECK_OK(cdb_db_open(dir, &rp, &rd));
        CHECK_OK(cdb_db_folder_read(rd, roots[0], "", m1, 64, &d));
        CHECK(cdb_db_folder_count(d) > 0);
        for (int i = 0; i < n; i++)
            if (p[i].root == roots[0] && !strchr(p[i].rel, '/')) {
                const cdb_db_folder_row *r = cdb_db_folder_find(d, p[i].rel);
                CHECK(r != NULL && r->thumb_current == 1);
            }
        cdb_db_folder_free(d);
        cdb_db_close(rd);
    }
    tu_close_rm(&db, dir);
}

/* The oracle of the merges: file id's row, claim of model and photo row, looked up one by
** one. *hole: an ok file without a vector of model; *no_photo: an ok file without a photo
** row of its content with a phash. */
static void truth_of(cdb_test_ctx *cdb_t_, cdb_db *db, int64_t model, int64_t id, int *hole,
                     int *no_photo) {
    cdb_db_file f;
    cdb_db_photo ph;
    uint8_t found = 0;
    int has = 0;
    CHECK_OK(cdb_db_file_get(db, id, &f));
    CHECK_OK(cdb_db_file_has_vector(db, model, id, &has));
    CHECK_OK(cdb_db_photos_get(db, &id, 1, &ph, &found));
    *hole = f.state == CDB_DB_OK && !has;
    *no_photo = f.state == CDB_DB_OK && !(found && ph.read && ph.has_phash);
    cdb_db_file_clear(&f);
}

CDB_TEST(ok_files_lacking_match_lookups) {
    enum { N = 900 };
    char dir[256];
    cdb_db *db = NULL;
    cdb_db_params prm = cdb_db_params_default();
    int64_t m[3], roots[2], ids[N];
    uint64_t seed = 7;
    float v[DIM];
    prm.sync = CDB_DB_SYNC_NORMAL;
    CHECK_OK(tu_create(dir, sizeof dir, "lacking", prm, &db));
    CHECK_OK(cdb_db_model_register(db, "hash-all", "all", DIM, "{}", &m[0]));
    CHECK_OK(cdb_db_model_register(db, "hash-third", "third", DIM, "{}", &m[1]));
    CHECK_OK(cdb_db_model_register(db, "hash-none", "none", DIM, "{}", &m[2]));
    CHECK_OK(cdb_db_root_add(db, "/a", &roots[0]));
    CHECK_OK(cdb_db_root_add(db, "/b", &roots[1]));
    for (int k = 0; k < 2; k++) { /* model 0 stores every file, model 1 every third */
        cdb_db_batch *b = NULL;
        CHECK_OK(cdb_db_batch_new(db, m[k], &b));
        for (int i = k ? 2 : 0; i < N; i += k ? 3 : 1) {
            char rel[32];
            cdb_db_file_meta fm = tu_meta(100 + i, 200 + i, (uint64_t)i);
            snprintf(rel, sizeof rel, "d%d/f%04d.jpg", i % 7, i);
            tu_vec((uint64_t)(i + k), 1.0f, v, DIM);
            CHECK_OK(cdb_db_batch_put(b, roots[i % 5 == 0], rel, &fm, v, DIM));
        }
        CHECK_OK(cdb_db_batch_commit(b, NULL));
        cdb_db_batch_free(b);
    }
    for (int i = 0; i < N; i++) {
        char rel[32];
        cdb_db_file f;
        snprintf(rel, sizeof rel, "d%d/f%04d.jpg", i % 7, i);
        CHECK_OK(cdb_db_file_lookup(db, roots[i % 5 == 0], rel, &f));
        ids[i] = f.id;
        cdb_db_file_clear(&f);
    }
    /* photo rows: current, of another hash, without a phash, or none */
    for (int i = 0; i < N; i++) {
        cdb_db_photo ph;
        cdb_db_file f;
        int kind = (int)(tu_splitmix(&seed) % 4);
        if (kind == 3) continue;
        CHECK_OK(cdb_db_file_get(db, ids[i], &f));
        memset(&ph, 0, sizeof ph);
        ph.file_id = ids[i];
        memcpy(ph.hash, f.meta.hash, CDB_DB_HASH_BYTES);
        if (kind == 1) ph.hash[3] ^= 1;
        ph.has_phash = kind != 2;
        ph.phash = (uint64_t)i;
        CHECK_OK(cdb_db_photos_put(db, &ph, 1));
        cdb_db_file_clear(&f);
    }
    { /* some deleted; one claim of a deleted file put back by hand */
        cdb_db_batch *b = NULL;
        sqlite3 *c = NULL;
        char sql[200], cat[300];
        CHECK_OK(cdb_db_batch_new(db, m[0], &b));
        for (int i = 4; i < N; i += 13) CHECK_OK(cdb_db_batch_delete(b, ids[i]));
        CHECK_OK(cdb_db_batch_commit(b, NULL));
        cdb_db_batch_free(b);
        snprintf(cat, sizeof cat, "%s/catalog.db", dir);
        snprintf(sql, sizeof sql, "INSERT OR IGNORE INTO vectors(model_id, file_id, seq)"
                                  " VALUES(%lld, %lld, 1)", (long long)m[2], (long long)ids[4]);
        CHECK(sqlite3_open(cat, &c) == SQLITE_OK);
        CHECK(sqlite3_exec(c, sql, NULL, NULL, NULL) == SQLITE_OK);
        sqlite3_close(c);
    }
    for (int k = 0; k < 3; k++) {
        int64_t want = 0, got = -1, want_photo[2] = {0, 0};
        int64_t *miss = NULL, n_miss = 0, at = 0;
        cdb_db_counts cn;
        for (int i = 0; i < N; i++) {
            int hole = 0, no_photo = 0;
            truth_of(cdb_t_, db, m[k], ids[i], &hole, &no_photo);
            want += hole;
            want_photo[i % 5 == 0] += no_photo;
        }
        CHECK(want > 0 || k == 0);
        CHECK_OK(cdb_db_count_missing(db, m[k], &got));
        CHECK_EQ_INT(got, want);
        CHECK_OK(cdb_db_get_counts(db, m[k], &cn));
        CHECK_EQ_INT(cn.n_missing, want);
        if (k) continue;
        /* every root, then each: exactly the ids the lookups name, ascending */
        for (int r = -1; r < 2; r++) {
            CHECK_OK(cdb_db_photos_missing(db, r < 0 ? 0 : roots[r], &miss, &n_miss));
            CHECK_EQ_INT(n_miss, r < 0 ? want_photo[0] + want_photo[1] : want_photo[r]);
            at = 0;
            for (int i = 0; i < N; i++) {
                int hole = 0, no_photo = 0;
                if (r >= 0 && (i % 5 == 0) != r) continue;
                truth_of(cdb_t_, db, m[k], ids[i], &hole, &no_photo);
                if (no_photo) CHECK(at < n_miss && miss[at++] == ids[i]);
            }
            cdb_free(miss);
        }
        CHECK(want_photo[0] > 0 && want_photo[1] > 0);
    }
    tu_close_rm(&db, dir);
}

CDB_TEST_MAIN(folder_rows_match_brute_force, ok_files_lacking_match_lookups)
