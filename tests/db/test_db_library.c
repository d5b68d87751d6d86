/*
** test_db_library.c: the db/ side of the library model (issue 13), in one process:
** roots of both kinds with their settings and scan records; a file root's file (the
** empty relpath) and its path; adopting a nested root (rows re-rooted under the
** parent's path, vectors and ids kept, clashes resolved so no path is recorded
** twice and no vector is left behind); forgetting a root (every vector and row
** gone, the removals logged for the index); moves across roots; transient
** failures left pending with their reason (and classified for a retry);
** identity-based change detection (a new inode or ctime is a change, a row from
** before schema 5 is re-stat'ed unread); walk problems replaced per part of a
** root; compaction giving space back; and a read-only folder opened immutable.
** Every check is against what was staged, read back through the public API and,
** for vectors, cdb_db_verify.
*/
#include <errno.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <sqlite3.h>

#include "cdb_test.h"
#include "db_test_util.h"

#define DIM 32

typedef struct fixture {
    char dir[256];
    cdb_db *db;
    int64_t model;
} fixture;

static cdb_status fx_open(fixture *fx, const char *tag) {
    memset(fx, 0, sizeof *fx);
    return tu_create_with_model(fx->dir, sizeof fx->dir, tag, "lib", DIM, &fx->db, &fx->model);
}

static void fx_close(fixture *fx) { tu_close_rm(&fx->db, fx->dir); }

/* A stat identity for tests: dev 7, inode = ino, ctime = ino * 10. */
static cdb_db_file_meta meta_id(int64_t size, int64_t mtime, uint64_t content, uint64_t ino) {
    cdb_db_file_meta m = tu_meta(size, mtime, content);
    m.dev = 7;
    m.ino = ino;
    m.ctime_ns = (int64_t)ino * 10;
    return m;
}

/* Stores (root, rel) as ok with the vector of `seed`; returns its id. */
static int64_t put_one(fixture *fx, int64_t root, const char *rel, uint64_t seed) {
    cdb_db_batch *b = NULL;
    float v[DIM];
    int64_t id = 0;
    cdb_db_file_meta m = meta_id(1000 + (int64_t)seed, 5000 + (int64_t)seed, seed, seed + 100);
    tu_vec(seed, 1.0f, v, DIM);
    if (cdb_db_batch_new(fx->db, fx->model, &b) != CDB_OK ||
        cdb_db_batch_put(b, root, rel, &m, v, DIM) != CDB_OK ||
        cdb_db_batch_commit(b, &id) != CDB_OK)
        id = 0;
    cdb_db_batch_free(b);
    return id;
}

/* Commits files [from, to) of root in one batch of db for model, named by fmt (one %d),
** file i with the vector tu_vec(i + 1) and the identity meta_id(1000 + i, 5000 + i,
** i + 1, i + 100). */
static cdb_status put_range(cdb_db *db, int64_t model, int64_t root, const char *fmt, int from,
                            int to) {
    cdb_db_batch *b = NULL;
    cdb_status rc = cdb_db_batch_new(db, model, &b);
    for (int i = from; i < to && rc == CDB_OK; i++) {
        char rel[32];
        float v[DIM];
        cdb_db_file_meta m = meta_id(1000 + i, 5000 + i, (uint64_t)i + 1, (uint64_t)i + 100);
        snprintf(rel, sizeof rel, fmt, i);
        tu_vec((uint64_t)i + 1, 1.0f, v, DIM);
        rc = cdb_db_batch_put(b, root, rel, &m, v, DIM);
    }
    if (rc == CDB_OK) rc = cdb_db_batch_commit(b, NULL);
    cdb_db_batch_free(b);
    return rc;
}

/* The stored vector of file id equals tu_vec(seed) normalized (fp16 round trip). */
static int has_vector_of(fixture *fx, int64_t id, uint64_t seed) {
    float v[DIM], got[DIM], want[DIM];
    uint16_t enc[DIM];
    uint8_t found = 0;
    tu_vec(seed, 1.0f, v, DIM);
    if (cdb_db_encode_vector(v, DIM, enc) != CDB_OK) return 0;
    if (cdb_db_vectors_get(fx->db, fx->model, &id, 1, got, &found) != CDB_OK || !found) return 0;
    for (int i = 0; i < DIM; i++) {
        uint16_t h = enc[i];
        /* decode binary16 by hand (independent of db/'s decoder) */
        int e = (h >> 10) & 31, f = h & 1023;
        double x = e == 0 ? ldexp(f, -24) : ldexp(1024 + f, e - 25);
        want[i] = (float)((h & 0x8000) ? -x : x);
    }
    return !memcmp(got, want, sizeof got);
}

static int verify_clean(fixture *fx) {
    cdb_db_report *r = NULL;
    int ok = cdb_db_verify(fx->db, &r) == CDB_OK && r->n_problems == 0;
    if (r && r->n_problems) fprintf(stderr, "    verify: %s\n", r->problems[0].msg);
    cdb_db_report_free(r);
    return ok;
}

static int count_file(const cdb_db_file *f, void *ud) {
    (void)f;
    (*(int64_t *)ud)++;
    return 0;
}

static int count_state(fixture *fx, int64_t root, unsigned mask) {
    int64_t n = 0;
    return cdb_db_files_foreach(fx->db, root, mask, count_file, &n) == CDB_OK ? (int)n : -1;
}

static int on_removed(int64_t id, int64_t seq, void *ud) {
    (void)id, (void)seq;
    (*(int64_t *)ud)++;
    return 0;
}

static int count_wp(const cdb_db_walk_problem *p, void *ud) {
    (void)p;
    (*(int *)ud)++;
    return 0;
}

CDB_TEST(roots_of_both_kinds) {
    fixture fx;
    int64_t a = 0, f = 0, again = 0, x = 0;
    cdb_db_root r;
    CHECK_OK(fx_open(&fx, "roots"));
    CHECK_OK(cdb_db_root_create(fx.db, "/lib/a", CDB_DB_ROOT_FOLDER, 1, &a));
    CHECK_OK(cdb_db_root_create(fx.db, "/lib/b/x.jpg", CDB_DB_ROOT_FILE, 0, &f));
    CHECK_OK(cdb_db_root_create(fx.db, "/lib/a", CDB_DB_ROOT_FOLDER, 0, &again));
    CHECK_EQ_INT(again, a); /* get-or-create keeps the settings */
    CHECK_RC(cdb_db_root_create(fx.db, "/lib/a", CDB_DB_ROOT_FILE, 0, &x), CDB_INVALID);
    CHECK_OK(cdb_db_root_info(fx.db, a, &r));
    CHECK(!strcmp(r.path, "/lib/a") && r.kind == CDB_DB_ROOT_FOLDER && r.follow_symlinks == 1);
    CHECK(r.status == NULL && r.scanned_ns == 0);
    cdb_db_root_clear(&r);
    CHECK_OK(cdb_db_root_set_options(fx.db, a, 0, -1));
    cdb_db_root_ident id1 = {0x1234567890abcdefULL, 0xef53, 2, 1700000000123456789LL};
    CHECK_OK(cdb_db_root_set_scan(fx.db, a, 42, &id1, "missing"));
    /* dev 0 and no identity: keep the recorded ones */
    CHECK_OK(cdb_db_root_set_scan(fx.db, a, 0, NULL, "ok"));
    CHECK_OK(cdb_db_root_info(fx.db, a, &r));
    CHECK(r.follow_symlinks == 0 && r.dev == 42 && !strcmp(r.status, "ok") && r.scanned_ns > 0);
    CHECK(r.ident.fsid == id1.fsid && r.ident.fstype == id1.fstype && r.ident.ino == 2 &&
          r.ident.btime_ns == id1.btime_ns);
    cdb_db_root_clear(&r);
    /* a move forgets where the root was: the next scan records the new place */
    CHECK_OK(cdb_db_root_set_path(fx.db, a, "/lib/a2"));
    CHECK_OK(cdb_db_root_info(fx.db, a, &r));
    CHECK(r.dev == 0 && r.ident.ino == 0 && r.ident.fsid == 0 && r.ident.btime_ns == 0);
    cdb_db_root_clear(&r);
    CHECK_OK(cdb_db_root_set_path(fx.db, a, "/lib/a"));
    /* a file root's file: the empty relpath; its path is the root's */
    int64_t id = put_one(&fx, f, "", 1);
    char *path = NULL;
    CHECK(id > 0);
    CHECK_OK(cdb_db_file_path(fx.db, id, &path));
    CHECK_EQ_STR(path, "/lib/b/x.jpg");
    cdb_free(path);
    char *j = cdb_db_path_join("/lib/a", "s/t.png"), *k = cdb_db_path_join("/x.jpg", "");
    CHECK_EQ_STR(j, "/lib/a/s/t.png");
    CHECK_EQ_STR(k, "/x.jpg");
    cdb_free(j);
    cdb_free(k);
    /* moving a root rewrites only its path */
    CHECK_OK(cdb_db_root_set_path(fx.db, f, "/media/x.jpg"));
    CHECK_OK(cdb_db_file_path(fx.db, id, &path));
    CHECK_EQ_STR(path, "/media/x.jpg");
    cdb_free(path);
    CHECK_RC(cdb_db_root_set_path(fx.db, f, "/lib/a"), CDB_INVALID); /* another root's */
    CHECK(has_vector_of(&fx, id, 1));
    CHECK(verify_clean(&fx));
    fx_close(&fx);
}

CDB_TEST(adopt_moves_rows_keeps_vectors_and_resolves_clashes) {
    fixture fx;
    int64_t parent = 0, child = 0, file_root = 0, n = 0;
    CHECK_OK(fx_open(&fx, "adopt"));
    CHECK_OK(cdb_db_root_create(fx.db, "/p/x", CDB_DB_ROOT_FOLDER, 0, &parent));
    CHECK_OK(cdb_db_root_create(fx.db, "/p/x/y", CDB_DB_ROOT_FOLDER, 0, &child));
    CHECK_OK(cdb_db_root_create(fx.db, "/p/x/z/one.jpg", CDB_DB_ROOT_FILE, 0, &file_root));
    int64_t c1 = put_one(&fx, child, "a.jpg", 1), c2 = put_one(&fx, child, "s/b.jpg", 2);
    /* the parent already recorded y/a.jpg (the same file, scanned through the parent
    ** once): a clash of two live rows, and y/s/b.jpg as deleted: a dead clash */
    int64_t p1 = put_one(&fx, parent, "y/a.jpg", 11), p2 = put_one(&fx, parent, "y/s/b.jpg", 12);
    int64_t fr = put_one(&fx, file_root, "", 3);
    cdb_db_batch *b = NULL;
    CHECK_OK(cdb_db_batch_new(fx.db, fx.model, &b));
    CHECK_OK(cdb_db_batch_delete(b, p2));
    CHECK_OK(cdb_db_batch_commit(b, NULL));
    cdb_db_batch_free(b);
    CHECK(c1 > 0 && c2 > 0 && p1 > 0 && p2 > 0 && fr > 0);
    CHECK_RC(cdb_db_root_adopt(fx.db, fx.model, child, parent, &n), CDB_INVALID); /* not inside */
    CHECK_OK(cdb_db_root_adopt(fx.db, fx.model, parent, child, &n));
    CHECK_EQ_INT(n, 2);
    CHECK_OK(cdb_db_root_adopt(fx.db, fx.model, parent, file_root, &n));
    CHECK_RC(cdb_db_root_info(fx.db, child, &(cdb_db_root){0}), CDB_NOTFOUND);
    /* exactly one live row per path, every live row with its own vector */
    cdb_db_file f;
    CHECK_OK(cdb_db_file_lookup(fx.db, parent, "y/a.jpg", &f));
    CHECK_EQ_INT(f.id, p1); /* both live: the parent's row stayed, the child's went */
    cdb_db_file_clear(&f);
    CHECK(has_vector_of(&fx, p1, 11));
    CHECK_OK(cdb_db_file_lookup(fx.db, parent, "y/s/b.jpg", &f));
    CHECK_EQ_INT(f.id, c2); /* the child's live row replaced the parent's deleted one */
    CHECK_EQ_INT(f.state, CDB_DB_OK);
    cdb_db_file_clear(&f);
    CHECK(has_vector_of(&fx, c2, 2));
    CHECK_OK(cdb_db_file_lookup(fx.db, parent, "z/one.jpg", &f));
    CHECK_EQ_INT(f.id, fr);
    cdb_db_file_clear(&f);
    CHECK(has_vector_of(&fx, fr, 3));
    CHECK_EQ_INT(count_state(&fx, 0, CDB_DB_MASK_ALL), 3);
    CHECK_EQ_INT(count_state(&fx, parent, CDB_DB_MASK_OK), 3);
    cdb_db_counts c;
    CHECK_OK(cdb_db_get_counts(fx.db, fx.model, &c));
    CHECK_EQ_INT(c.n_vectors, 3);
    CHECK_EQ_INT(c.n_roots, 1);
    CHECK(verify_clean(&fx));
    fx_close(&fx);
}

CDB_TEST(forget_removes_everything_and_logs_it) {
    fixture fx;
    int64_t a = 0, keep = 0, n = 0, gen = 0, freed = -1;
    int64_t removed = 0;
    CHECK_OK(fx_open(&fx, "forget"));
    CHECK_OK(cdb_db_root_create(fx.db, "/a", CDB_DB_ROOT_FOLDER, 0, &a));
    CHECK_OK(cdb_db_root_create(fx.db, "/keep", CDB_DB_ROOT_FOLDER, 0, &keep));
    CHECK_OK(put_range(fx.db, fx.model, a, "f%04d.jpg", 0, 3000));
    int64_t k = put_one(&fx, keep, "k.jpg", 999);
    CHECK_OK(cdb_db_generation(fx.db, &gen));
    CHECK_OK(cdb_db_walk_problems_set(fx.db, a, NULL,
                                      &(cdb_db_walk_problem){0, "sub", "cannot open folder", 0}, 1));
    CHECK_OK(cdb_db_root_forget(fx.db, fx.model, a, &n));
    CHECK_EQ_INT(n, 3000);
    CHECK_OK(cdb_db_removed_since(fx.db, fx.model, gen, on_removed, &removed));
    CHECK_EQ_INT(removed, 3000); /* an index drops them */
    CHECK_RC(cdb_db_root_info(fx.db, a, &(cdb_db_root){0}), CDB_NOTFOUND);
    CHECK_EQ_INT(count_state(&fx, 0, CDB_DB_MASK_ALL), 1);
    cdb_db_counts c;
    CHECK_OK(cdb_db_get_counts(fx.db, fx.model, &c));
    CHECK_EQ_INT(c.n_vectors, 1);
    CHECK_EQ_INT(c.n_walk_problems, 0);
    CHECK(has_vector_of(&fx, k, 999));
    CHECK_OK(cdb_db_compact(fx.db, &freed));
    CHECK_MSG(freed > 0, "compact freed %lld bytes", (long long)freed);
    CHECK(verify_clean(&fx));
    fx_close(&fx);
}
CDB_TEST(move_across_roots_and_retry_rows) {
    fixture fx;
    int64_t a = 0, b_root = 0;
    cdb_db_batch *b = NULL;
    cdb_db_file f;
    cdb_db_change ch;
    CHECK_OK(fx_open(&fx, "move"));
    CHECK_OK(cdb_db_root_create(fx.db, "/a", CDB_DB_ROOT_FOLDER, 0, &a));
    CHECK_OK(cdb_db_root_create(fx.db, "/b", CDB_DB_ROOT_FOLDER, 0, &b_root));
    int64_t id = put_one(&fx, a, "x.jpg", 5);
    cdb_db_file_meta m = meta_id(1005, 6005, 5, 500);
    int64_t hits[4];
    int nh = 0;
    CHECK_OK(cdb_db_files_by_hash(fx.db, 0, m.hash, hits, 4, &nh)); /* any root */
    CHECK(nh == 1 && hits[0] == id);
    CHECK_OK(cdb_db_files_by_hash(fx.db, b_root, m.hash, hits, 4, &nh));
    CHECK_EQ_INT(nh, 0);
    CHECK_OK(cdb_db_batch_new(fx.db, fx.model, &b));
    CHECK_OK(cdb_db_batch_move_to(b, id, b_root, "in/x.jpg", &m));
    /* a transient failure of a new file, and one of a stored file */
    cdb_db_file_meta t = meta_id(10, 20, 77, 600);
    t.has_hash = 0;
    CHECK_OK(cdb_db_batch_put_retry(b, a, "locked.jpg", &t, "cannot open: Permission denied"));
    CHECK_OK(cdb_db_batch_commit(b, NULL));
    int64_t y = put_one(&fx, a, "y.jpg", 6);
    CHECK_OK(cdb_db_batch_put_retry(b, a, "y.jpg", &t, "cannot read: Input/output error"));
    CHECK_OK(cdb_db_batch_commit(b, NULL));
    cdb_db_batch_free(b);
    CHECK_OK(cdb_db_file_lookup(fx.db, b_root, "in/x.jpg", &f));
    CHECK_EQ_INT(f.id, id);
    CHECK(f.meta.ino == 500 && f.meta.dev == 7 && f.meta.ctime_ns == 5000);
    cdb_db_file_clear(&f);
    CHECK(has_vector_of(&fx, id, 5));
    CHECK_RC(cdb_db_file_lookup(fx.db, a, "x.jpg", &f), CDB_NOTFOUND);
    CHECK_OK(cdb_db_file_lookup(fx.db, a, "y.jpg", &f));
    CHECK(f.id == y && f.state == CDB_DB_PENDING && f.error && strstr(f.error, "Input/output"));
    cdb_db_file_clear(&f);
    uint8_t found = 1;
    float v[DIM];
    CHECK_OK(cdb_db_vectors_get(fx.db, fx.model, &y, 1, v, &found));
    CHECK_EQ_INT(found, 0); /* its content is unknown: no vector */
    /* pending rows are retried whatever their stat says */
    CHECK_OK(cdb_db_classify(fx.db, fx.model, a, "locked.jpg", &t, &ch, NULL));
    CHECK_EQ_INT(ch, CDB_DB_CHANGE_REDO);
    cdb_db_counts c;
    CHECK_OK(cdb_db_get_counts(fx.db, fx.model, &c));
    CHECK_EQ_INT(c.n_retry, 2);
    CHECK_EQ_INT(c.files[CDB_DB_PENDING], 2);
    CHECK(verify_clean(&fx));
    fx_close(&fx);
}

CDB_TEST(identity_is_part_of_the_stat) {
    fixture fx;
    int64_t a = 0;
    cdb_db_change ch;
    CHECK_OK(fx_open(&fx, "ident"));
    CHECK_OK(cdb_db_root_create(fx.db, "/a", CDB_DB_ROOT_FOLDER, 0, &a));
    CHECK(put_one(&fx, a, "x.jpg", 1) > 0); /* size 1001, mtime 5001, ino 101, ctime 1010 */
    cdb_db_file_meta st = meta_id(1001, 5001, 0, 101);
    CHECK_OK(cdb_db_classify(fx.db, fx.model, a, "x.jpg", &st, &ch, NULL));
    CHECK_EQ_INT(ch, CDB_DB_CHANGE_SAME);
    st.ino = 102; /* replaced by another file with the same size and mtime (mv) */
    CHECK_OK(cdb_db_classify(fx.db, fx.model, a, "x.jpg", &st, &ch, NULL));
    CHECK_EQ_INT(ch, CDB_DB_CHANGE_MODIFIED);
    st.ino = 101;
    st.ctime_ns = 1011; /* rewritten in place, mtime set back */
    CHECK_OK(cdb_db_classify(fx.db, fx.model, a, "x.jpg", &st, &ch, NULL));
    CHECK_EQ_INT(ch, CDB_DB_CHANGE_MODIFIED);
    st.ctime_ns = 1010;
    st.dev = 8;
    CHECK_OK(cdb_db_classify(fx.db, fx.model, a, "x.jpg", &st, &ch, NULL));
    CHECK_EQ_INT(ch, CDB_DB_CHANGE_MODIFIED);
    fx_close(&fx);
}

CDB_TEST(walk_problems_replaced_by_part) {
    fixture fx;
    int64_t a = 0;
    int n = 0;
    CHECK_OK(fx_open(&fx, "walkp"));
    CHECK_OK(cdb_db_root_create(fx.db, "/a", CDB_DB_ROOT_FOLDER, 0, &a));
    cdb_db_walk_problem p[3] = {{0, "s/locked", "cannot open folder", 0},
                                {0, "t/dangling.jpg", "broken symbolic link", 0},
                                {0, "s2/x", "cannot stat", 0}};
    CHECK_OK(cdb_db_walk_problems_set(fx.db, a, NULL, p, 3));
    CHECK_OK(cdb_db_walk_problems_foreach(fx.db, a, count_wp, &n));
    CHECK_EQ_INT(n, 3);
    /* a scan of the part "s" replaces only what lies under s (not s2) */
    CHECK_OK(cdb_db_walk_problems_set(fx.db, a, "s", NULL, 0));
    n = 0;
    CHECK_OK(cdb_db_walk_problems_foreach(fx.db, 0, count_wp, &n));
    CHECK_EQ_INT(n, 2);
    CHECK_OK(cdb_db_walk_problems_set(fx.db, a, NULL, NULL, 0));
    n = 0;
    CHECK_OK(cdb_db_walk_problems_foreach(fx.db, 0, count_wp, &n));
    CHECK_EQ_INT(n, 0);
    fx_close(&fx);
}
/* A reader on a folder it cannot write (a read-only mount, another user's database):
** modeled by a child process that drops root and opens a copy made read-only. */
CDB_TEST(readonly_folder_is_opened_without_writing) {
    fixture fx;
    int64_t a = 0;
    char cmd[2400];
    CHECK_OK(fx_open(&fx, "ro"));
    CHECK_OK(cdb_db_root_create(fx.db, "/a", CDB_DB_ROOT_FOLDER, 0, &a));
    for (int i = 0; i < 5; i++) {
        char rel[16];
        snprintf(rel, sizeof rel, "%d.jpg", i);
        CHECK(put_one(&fx, a, rel, (uint64_t)i + 1) > 0);
    }
    cdb_db_close(fx.db); /* a clean close leaves no -wal or -shm */
    fx.db = NULL;
    snprintf(cmd, sizeof cmd, "chmod a+rx %s/.. && chmod -R a+rX,a-w %s && ls -a %s %s/shards > %s.before",
             fx.dir, fx.dir, fx.dir, fx.dir, fx.dir);
    CHECK_EQ_INT(system(cmd), 0);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        cdb_db_params p = cdb_db_params_default();
        cdb_db *db = NULL;
        cdb_db_counts c;
        int64_t ids[5] = {1, 2, 3, 4, 5};
        float v[5 * DIM];
        uint8_t found[5];
        if (getuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) _exit(10);
        if (access(fx.dir, W_OK) == 0) _exit(11); /* the setup did not make it read-only */
        p.readonly = 1;
        if (cdb_db_open(fx.dir, &p, &db) != CDB_OK) {
            fprintf(stderr, "    open: %s\n", cdb_errmsg());
            _exit(12);
        }
        if (cdb_db_get_counts(db, 0, &c) != CDB_OK || c.files[CDB_DB_OK] != 5) _exit(13);
        if (cdb_db_vectors_get(db, 1, ids, 5, v, found) != CDB_OK) _exit(14);
        for (int i = 0; i < 5; i++)
            if (!found[i]) _exit(15);
        cdb_db_close(db);
        _exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "reader child: status %d", st);
    snprintf(cmd, sizeof cmd, "ls -a %s %s/shards | cmp -s - %s.before && chmod -R u+w %s", fx.dir,
             fx.dir, fx.dir, fx.dir);
    CHECK_MSG(system(cmd) == 0, "the reader created files in the database folder");
    snprintf(cmd, sizeof cmd, "%s.before", fx.dir);
    remove(cmd);
    fx_close(&fx);
}

/* A checkpoint cut short by a full disk: the shard file is behind the page count
** in its (already rewritten) header while the WAL still holds every page. Neither
** the quick check nor verify may call it truncated: every vector reads back. */
CDB_TEST(shard_behind_its_header_with_the_wal) {
    fixture fx;
    int64_t a = 0;
    char shard[300], copy[400], cmd[4000];
    CHECK_OK(fx_open(&fx, "ckpt"));
    CHECK_OK(cdb_db_root_create(fx.db, "/a", CDB_DB_ROOT_FOLDER, 0, &a));
    CHECK_OK(put_range(fx.db, fx.model, a, "a%04d.jpg", 0, 400));
    cdb_db_close(fx.db); /* checkpointed: batch A is in the file, no WAL */
    fx.db = NULL;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) { /* batch B into the WAL, then gone without a checkpoint */
        cdb_db *db = NULL;
        if (cdb_db_open(fx.dir, NULL, &db) != CDB_OK) _exit(2);
        _exit(put_range(db, fx.model, a, "a%04d.jpg", 400, 800) == CDB_OK ? 0 : 3);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    /* what a full checkpoint would write first: page 1 with the new page count */
    snprintf(shard, sizeof shard, "%s/shards/0001.db", fx.dir);
    snprintf(copy, sizeof copy, "%s.full", shard);
    snprintf(cmd, sizeof cmd,
             "cp %s %s && cp %s-wal %s-wal && sqlite3 %s 'PRAGMA wal_checkpoint(TRUNCATE)' >/dev/null"
             " && dd if=%s of=%s bs=1 skip=24 seek=24 count=8 conv=notrunc status=none"
             " && dd if=%s of=%s bs=1 skip=92 seek=92 count=8 conv=notrunc status=none",
             shard, copy, shard, copy, copy, copy, shard, copy, shard);
    if (system("command -v sqlite3 >/dev/null 2>&1") != 0) {
        /* no sqlite3 shell: the same with the library */
        sqlite3 *c = NULL;
        snprintf(cmd, sizeof cmd, "cp %s %s && cp %s-wal %s-wal", shard, copy, shard, copy);
        CHECK_EQ_INT(system(cmd), 0);
        CHECK_EQ_INT(sqlite3_open(copy, &c), SQLITE_OK);
        CHECK_EQ_INT(sqlite3_exec(c, "PRAGMA wal_checkpoint(TRUNCATE)", NULL, NULL, NULL), SQLITE_OK);
        sqlite3_close(c);
        snprintf(cmd, sizeof cmd,
                 "dd if=%s of=%s bs=1 skip=24 seek=24 count=8 conv=notrunc status=none"
                 " && dd if=%s of=%s bs=1 skip=92 seek=92 count=8 conv=notrunc status=none",
                 copy, shard, copy, shard);
    }
    CHECK_EQ_INT(system(cmd), 0);
    struct stat s1, s2;
    CHECK(stat(shard, &s1) == 0 && stat(copy, &s2) == 0 && s1.st_size < s2.st_size);
    CHECK_OK(cdb_db_open(fx.dir, NULL, &fx.db));
    cdb_db_report *r = NULL;
    CHECK_OK(cdb_db_check_shards(fx.db, &r));
    CHECK_MSG(r->n_problems == 0, "quick check: %s", r->n_listed ? r->problems[0].msg : "");
    cdb_db_report_free(r);
    CHECK(verify_clean(&fx));
    cdb_db_counts c;
    CHECK_OK(cdb_db_get_counts(fx.db, fx.model, &c));
    CHECK_EQ_INT(c.n_vectors, 800);
    for (int64_t id = 1; id <= 800; id += 97) CHECK(has_vector_of(&fx, id, (uint64_t)id));
    snprintf(cmd, sizeof cmd, "%s-wal", copy);
    remove(cmd);
    remove(copy);
    fx_close(&fx);
}

CDB_TEST_MAIN(shard_behind_its_header_with_the_wal, roots_of_both_kinds, adopt_moves_rows_keeps_vectors_and_resolves_clashes,
              forget_removes_everything_and_logs_it, move_across_roots_and_retry_rows,
              identity_is_part_of_the_stat, walk_problems_replaced_by_part,
              readonly_folder_is_opened_without_writing)
