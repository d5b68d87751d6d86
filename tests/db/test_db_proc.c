/*
** test_db_proc.c: db/ behaviour across processes: writer lock contention (fail
** fast naming the holder's pid, or wait), a stale lock left by a SIGKILLed writer,
** readers during writes (never blocked, always consistent), and the crash-safety
** test: children running an ingest-like workload are SIGKILLed at random moments
** and at every step of the commit protocol, then a rerun redoes the pending rows
** and the result must equal a clean run bit for bit, nothing duplicated or missing.
** Also: whatever the process does to its own files (flush, verify, counts), SQLite's
** POSIX locks on them stay held (sqlite_locks_kept).
*/
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#include "cdb_test.h"
#include "db/db.h"
#include "db_test_util.h"

#define DIM 32

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

static cdb_status make_db(const char *dir, int64_t *model, int64_t *root) {
    cdb_db *db = NULL;
    cdb_db_params p = cdb_db_params_default();
    p.create = 1;
    cdb_status rc = cdb_db_open(dir, &p, &db);
    if (rc == CDB_OK) rc = cdb_db_model_register(db, "w", "m", DIM, NULL, model);
    if (rc == CDB_OK) rc = cdb_db_root_add(db, "/lib", root);
    cdb_db_close(db);
    return rc;
}

/* In a forked child: opens the database at dir (exit 2 when it cannot) and says so on
** the pipe end ready (exit 3 when it cannot); the handle, for the child to hold. */
static cdb_db *child_open_then_signal(const char *dir, int ready) {
    cdb_db *db = NULL;
    char c = 1;
    if (cdb_db_open(dir, NULL, &db) != CDB_OK) _exit(2);
    if (write(ready, &c, 1) != 1) _exit(3);
    return db;
}

/* ---- locks ----------------------------------------------------------------------- */

CDB_TEST(lock_contention) {
    char base[256], dir[300];
    int ready[2], go[2];
    int64_t model, root;
    tu_tmpdir(base, sizeof base, "lock");
    snprintf(dir, sizeof dir, "%s/db", base);
    CHECK_OK(make_db(dir, &model, &root));
    CHECK(pipe(ready) == 0 && pipe(go) == 0);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        cdb_db *db = child_open_then_signal(dir, ready[1]);
        char c;
        if (read(go[0], &c, 1) != 1) _exit(4);
        sleep_ms(300);
        cdb_db_close(db);
        _exit(0);
    }
    char c;
    CHECK(read(ready[0], &c, 1) == 1);
    cdb_db *db = NULL;
    int64_t t0 = cdb_now_ns();
    CHECK_RC(cdb_db_open(dir, NULL, &db), CDB_BUSY);
    CHECK((cdb_now_ns() - t0) < 500000000LL); /* fails at once */
    char want[64];
    snprintf(want, sizeof want, "pid %d", (int)pid);
    CHECK_MSG(strstr(cdb_errmsg(), want) != NULL, "message does not name the holder: %s",
              cdb_errmsg());
    int lpid = 0, held = 0;
    CHECK_OK(cdb_db_lock_info(dir, &lpid, &held));
    CHECK_EQ_INT(lpid, pid);
    CHECK_EQ_INT(held, 1);
    /* A reader is never blocked by the writer. */
    cdb_db_params rp = cdb_db_params_default();
    rp.readonly = 1;
    CHECK_OK(cdb_db_open(dir, &rp, &db));
    cdb_db_close(db);
    /* Waiting: the holder leaves after ~300 ms; a bounded wait gets the lock. */
    CHECK(write(go[1], &c, 1) == 1);
    cdb_db_params wp = cdb_db_params_default();
    wp.lock_wait_ms = 10000;
    t0 = cdb_now_ns();
    CHECK_OK(cdb_db_open(dir, &wp, &db));
    CHECK((cdb_now_ns() - t0) > 100000000LL);
    cdb_db_close(db);
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    /* Two writer handles in one process conflict too (OFD locks). */
    cdb_db *a = NULL, *b = NULL;
    CHECK_OK(cdb_db_open(dir, NULL, &a));
    CHECK_RC(cdb_db_open(dir, NULL, &b), CDB_BUSY);
    wp.lock_wait_ms = 200;
    CHECK_RC(cdb_db_open(dir, &wp, &b), CDB_BUSY);
    cdb_db_close(a);
    tu_rmtree(base);
}

CDB_TEST(stale_lock_taken_over) {
    char base[256], dir[300];
    int ready[2];
    int64_t model, root;
    tu_tmpdir(base, sizeof base, "stale");
    snprintf(dir, sizeof dir, "%s/db", base);
    CHECK_OK(make_db(dir, &model, &root));
    CHECK(pipe(ready) == 0);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        child_open_then_signal(dir, ready[1]); /* held until killed */
        for (;;) pause();
    }
    char c;
    CHECK(read(ready[0], &c, 1) == 1);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    int lpid = 0, held = 1;
    CHECK_OK(cdb_db_lock_info(dir, &lpid, &held));
    CHECK_EQ_INT(lpid, pid); /* the dead writer's pid is still in the file */
    CHECK_EQ_INT(held, 0);
    cdb_db *db = NULL;
    CHECK_OK(cdb_db_open(dir, NULL, &db));
    CHECK_OK(cdb_db_lock_info(dir, &lpid, &held));
    CHECK_EQ_INT(lpid, getpid());
    CHECK_EQ_INT(held, 1);
    cdb_db_close(db);
    tu_rmtree(base);
}

/* ---- reader during write ----------------------------------------------------------- */

static cdb_status put_batch(cdb_db *db, int64_t model, int64_t root, int from, int n) {
    cdb_db_batch *b = NULL;
    float v[DIM];
    char name[64];
    cdb_status rc = cdb_db_batch_new(db, model, &b);
    for (int i = from; i < from + n && rc == CDB_OK; i++) {
        cdb_db_file_meta m = tu_meta(i, i, (uint64_t)i);
        snprintf(name, sizeof name, "r%06d.jpg", i);
        tu_vec((uint64_t)i, 1.0f, v, DIM);
        rc = cdb_db_batch_put(b, root, name, &m, v, DIM);
    }
    if (rc == CDB_OK) rc = cdb_db_batch_commit(b, NULL);
    cdb_db_batch_free(b);
    return rc;
}

CDB_TEST(reader_during_write) {
    char base[256], dir[300];
    int64_t model, root;
    const int batches = 60, per = 50;
    tu_tmpdir(base, sizeof base, "rdw");
    snprintf(dir, sizeof dir, "%s/db", base);
    CHECK_OK(make_db(dir, &model, &root));
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        cdb_db *db = NULL;
        if (cdb_db_open(dir, NULL, &db) != CDB_OK) _exit(2);
        for (int k = 0; k < batches; k++) {
            if (put_batch(db, model, root, k * per, per) != CDB_OK) _exit(3);
            sleep_ms(5);
        }
        cdb_db_close(db);
        _exit(0);
    }
    cdb_db_params rp = cdb_db_params_default();
    rp.readonly = 1;
    int64_t last = 0, max_ns = 0;
    int reads = 0, done = 0, st = 0, busy_writer = 0;
    float *buf = malloc((size_t)batches * per * DIM * sizeof *buf);
    int64_t *ids = malloc((size_t)batches * per * sizeof *ids);
    CHECK(buf && ids);
    while (!done) {
        done = waitpid(pid, &st, WNOHANG) == pid;
        cdb_db *db = NULL;
        cdb_db_iter *it = NULL;
        int n = 0;
        int64_t t0 = cdb_now_ns();
        CHECK_OK(cdb_db_open(dir, &rp, &db));
        CHECK_OK(cdb_db_iter_new(db, model, &it));
        CHECK_OK(cdb_db_iter_read(it, batches * per, ids, buf, NULL, &n));
        cdb_db_iter_free(it);
        cdb_db_counts c;
        CHECK_OK(cdb_db_get_counts(db, model, &c));
        cdb_db_close(db);
        int64_t dt = cdb_now_ns() - t0;
        if (dt > max_ns) max_ns = dt;
        /* Whole batches only (one shard transaction per batch), never going back. */
        CHECK_MSG(n % per == 0, "reader saw a partial batch: %d vectors", n);
        CHECK(n >= last);
        for (int i = 1; i < n; i++) CHECK(ids[i] > ids[i - 1]);
        last = n;
        reads++;
        /* Only once the writer has committed (so it holds the lock): earlier, this
        ** probe could take the lock before the child's open and make it fail. */
        if (!done && last > 0 && reads % 8 == 0) {
            cdb_db *w = NULL;
            if (cdb_db_open(dir, NULL, &w) == CDB_BUSY) busy_writer++;
            cdb_db_close(w);
        }
    }
    free(buf);
    free(ids);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    CHECK_EQ_INT(last, batches * per);
    CHECK_MSG(reads >= 5, "only %d reads completed during the write", reads);
    CHECK(busy_writer > 0);
    fprintf(stderr, "    %d reads during the write, slowest %.1f ms\n", reads, max_ns / 1e6);
    CHECK_MSG(max_ns < 2000000000LL, "a read took %.0f ms", max_ns / 1e6);
    tu_rmtree(base);
}

/* ---- crash safety -------------------------------------------------------------------- */

/* The workload: N files; phase A ingests them (every 29th is unusable); phase B
** deletes every 7th, modifies every 11th, moves every 13th. The driver is
** state-driven and idempotent, like the ingest pipeline: it skips what the
** catalog already has right and redoes everything else, pending rows included. */
#define N_FILES 160
#define BATCH   16

enum { WANT_OK, WANT_ERROR, WANT_GONE };

typedef struct want {
    int kind;
    char path[64];
    char old_path[64]; /* moved: where it was; "" otherwise */
    uint64_t content;
} want;

static want desired(int i, int phase) {
    want w;
    memset(&w, 0, sizeof w);
    snprintf(w.path, sizeof w.path, "a/f%05d.jpg", i);
    w.kind = i % 29 == 0 ? WANT_ERROR : WANT_OK;
    w.content = (uint64_t)i;
    if (phase == 1 && w.kind == WANT_OK) {
        if (i % 7 == 3) {
            w.kind = WANT_GONE;
        } else if (i % 11 == 5) {
            w.content = (uint64_t)i + 100000;
        } else if (i % 13 == 6) {
            snprintf(w.old_path, sizeof w.old_path, "%s", w.path);
            snprintf(w.path, sizeof w.path, "moved/f%05d.jpg", i);
        }
    }
    return w;
}

/* Stages what file i needs; *n_ops counts staged operations. */
static cdb_status stage(cdb_db *db, cdb_db_batch *b, int64_t root, const want *w, int *n_ops) {
    cdb_db_file f, old;
    memset(&old, 0, sizeof old);
    cdb_db_file_meta m = tu_meta(100 + (int64_t)w->content, 7 + (int64_t)w->content, w->content);
    float v[DIM];
    cdb_status rc = cdb_db_file_lookup(db, root, w->path, &f);
    int found = rc == CDB_OK;
    if (rc != CDB_OK && rc != CDB_NOTFOUND) return rc;
    rc = CDB_OK;
    if (w->kind == WANT_GONE) {
        if (found && f.state != CDB_DB_DELETED) {
            rc = cdb_db_batch_delete(b, f.id);
            (*n_ops)++;
        }
    } else if (w->kind == WANT_ERROR) {
        if (!found || f.state != CDB_DB_ERROR || f.meta.size != m.size ||
            f.meta.mtime_ns != m.mtime_ns) {
            rc = cdb_db_batch_put_error(b, root, w->path, &m, "cannot decode: truncated");
            (*n_ops)++;
        }
    } else {
        int good =
            found && f.state == CDB_DB_OK && f.meta.has_hash && !memcmp(f.meta.hash, m.hash, 16);
        int old_found = 0;
        if (w->old_path[0]) {
            rc = cdb_db_file_lookup(db, root, w->old_path, &old);
            old_found = rc == CDB_OK;
            if (rc == CDB_NOTFOUND) rc = CDB_OK;
        }
        if (rc == CDB_OK && !good) {
            if (old_found && old.state == CDB_DB_OK && !memcmp(old.meta.hash, m.hash, 16) &&
                !found) {
                rc = cdb_db_batch_move(b, old.id, w->path, &m); /* keeps its vector */
                old_found = 0;
            } else {
                tu_vec(w->content, 1.0f + (float)(w->content % 5) * 1000.0f, v, DIM);
                rc = cdb_db_batch_put(b, root, w->path, &m, v, DIM);
            }
            (*n_ops)++;
        }
        if (rc == CDB_OK && old_found && old.state != CDB_DB_DELETED) {
            rc = cdb_db_batch_delete(b, old.id);
            (*n_ops)++;
        }
        cdb_db_file_clear(&old);
    }
    if (found) cdb_db_file_clear(&f);
    return rc;
}

static cdb_status drive_phase(cdb_db *db, int64_t model, int64_t root, int phase) {
    cdb_db_batch *b = NULL;
    int n_ops = 0;
    cdb_status rc = cdb_db_batch_new(db, model, &b);
    for (int i = 0; i < N_FILES && rc == CDB_OK; i++) {
        want w = desired(i, phase);
        rc = stage(db, b, root, &w, &n_ops);
        if (rc == CDB_OK && (n_ops >= BATCH || i == N_FILES - 1)) {
            rc = cdb_db_batch_commit(b, NULL);
            n_ops = 0;
        }
    }
    cdb_db_batch_free(b);
    return rc;
}

static int find_done_a(const cdb_db_run *r, void *ud) {
    if (r->kind && !strcmp(r->kind, "phase-a") && r->status && !strcmp(r->status, "ok"))
        *(int *)ud = 1;
    return 0;
}

/* The whole job; resumable: phase A is skipped once a run records it finished. */
static cdb_status drive(const char *dir, cdb_db_sync sync, cdb_db_commit_hook hook, void *ud) {
    cdb_db *db = NULL;
    cdb_db_params p = cdb_db_params_default();
    cdb_db_model m;
    int64_t root = 0, run = 0;
    int a_done = 0;
    p.sync = sync;
    cdb_status rc = cdb_db_open(dir, &p, &db);
    if (rc == CDB_OK) rc = cdb_db_model_default(db, &m);
    if (rc == CDB_OK) rc = cdb_db_root_find(db, "/lib", &root);
    if (rc == CDB_OK && hook) cdb_db_set_commit_hook(db, hook, ud);
    if (rc == CDB_OK) rc = cdb_db_runs_foreach(db, 0, find_done_a, &a_done);
    if (rc == CDB_OK && !a_done) {
        rc = cdb_db_run_begin(db, "phase-a", &run);
        if (rc == CDB_OK) rc = drive_phase(db, m.id, root, 0);
        if (rc == CDB_OK) rc = cdb_db_run_finish(db, run, "ok", NULL);
    }
    if (rc == CDB_OK) rc = cdb_db_run_begin(db, "phase-b", &run);
    if (rc == CDB_OK) rc = drive_phase(db, m.id, root, 1);
    if (rc == CDB_OK) rc = cdb_db_run_finish(db, run, "ok", NULL);
    cdb_db_close(db);
    return rc;
}

typedef struct kill_plan {
    int commit_no; /* die at this commit ... */
    int step;      /* ... at this hook point (0: before step 1, 1, 2: after) */
    int seen;
} kill_plan;

static void kill_hook(int after_step, void *ud) {
    kill_plan *k = ud;
    if (after_step == 0) k->seen++;
    if (k->seen == k->commit_no && after_step == k->step) raise(SIGKILL);
}

/* Everything observable about the final state, by path: state, hash, error, bits. */
typedef struct snap {
    int n;
    char path[N_FILES * 2][64];
    int state[N_FILES * 2];
    uint8_t hash[N_FILES * 2][16];
    float vec[N_FILES * 2][DIM]; /* decoded exactly from the stored fp16 */
    int has_vec[N_FILES * 2];
    int64_t counts[5], n_vectors, n_iter;
} snap;

typedef struct snap_ctx {
    snap *s;
    cdb_db *db;
    int64_t model;
    int err;
} snap_ctx;

static int snap_file(const cdb_db_file *f, void *ud) {
    snap_ctx *c = ud;
    snap *s = c->s;
    if (s->n >= N_FILES * 2) {
        c->err = 1;
        return 1;
    }
    int k = s->n++;
    snprintf(s->path[k], sizeof s->path[k], "%s", f->relpath);
    s->state[k] = f->state;
    memcpy(s->hash[k], f->meta.hash, 16);
    return 0;
}

static cdb_status take_snap(const char *dir, snap *s) {
    cdb_db *db = NULL;
    cdb_db_params p = cdb_db_params_default();
    cdb_db_model m;
    p.readonly = 1;
    memset(s, 0, sizeof *s);
    cdb_status rc = cdb_db_open(dir, &p, &db);
    if (rc == CDB_OK) rc = cdb_db_model_default(db, &m);
    snap_ctx c = {s, db, m.id, 0};
    if (rc == CDB_OK) rc = cdb_db_files_foreach(db, 0, CDB_DB_MASK_ALL, snap_file, &c);
    if (rc == CDB_OK && c.err) rc = cdb_seterr(CDB_ERROR, "too many files");
    for (int k = 0; k < s->n && rc == CDB_OK; k++) {
        /* exact stored bits through the iterator-independent path */
        cdb_db_file f;
        int64_t root = 0;
        float out[DIM];
        uint8_t found = 0;
        if ((rc = cdb_db_root_find(db, "/lib", &root)) != CDB_OK) break;
        if ((rc = cdb_db_file_lookup(db, root, s->path[k], &f)) != CDB_OK) break;
        rc = cdb_db_vectors_get(db, m.id, &f.id, 1, out, &found);
        cdb_db_file_clear(&f);
        s->has_vec[k] = found;
        if (found) memcpy(s->vec[k], out, sizeof out);
    }
    cdb_db_counts cn;
    if (rc == CDB_OK) rc = cdb_db_get_counts(db, m.id, &cn);
    if (rc == CDB_OK) {
        memcpy(s->counts, cn.files, sizeof s->counts);
        s->n_vectors = cn.n_vectors;
    }
    cdb_db_iter *it = NULL;
    if (rc == CDB_OK) rc = cdb_db_iter_new(db, m.id, &it);
    int got = 0;
    int64_t ids[64];
    while (rc == CDB_OK && (rc = cdb_db_iter_read(it, 64, ids, NULL, NULL, &got)) == CDB_OK &&
           got > 0)
        s->n_iter += got;
    cdb_db_iter_free(it);
    cdb_db_close(db);
    return rc;
}

CDB_TEST(kill9_anywhere_then_redo) {
    char base[256], ref[300], dir[300];
    int64_t model, root;
    static snap want_s, got_s;
    tu_tmpdir(base, sizeof base, "kill");
    snprintf(ref, sizeof ref, "%s/ref", base);
    CHECK_OK(make_db(ref, &model, &root));
    int64_t t0 = cdb_now_ns();
    kill_plan count = {-1, -1, 0}; /* never fires: counts the commits of a clean run */
    CHECK_OK(drive(ref, CDB_DB_SYNC_NORMAL, kill_hook, &count));
    int64_t clean_ns = cdb_now_ns() - t0;
    CHECK_OK(take_snap(ref, &want_s));
    CHECK(want_s.counts[CDB_DB_OK] > 100 && want_s.counts[CDB_DB_DELETED] > 15 &&
          want_s.counts[CDB_DB_ERROR] > 5);
    CHECK_EQ_INT(want_s.counts[CDB_DB_PENDING], 0);
    CHECK_EQ_INT(want_s.n_iter, want_s.n_vectors);

    uint64_t rng = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 16);
    if (getenv("CDB_TEST_SEED")) rng = strtoull(getenv("CDB_TEST_SEED"), NULL, 10);
    uint64_t seed0 = rng;
    int iters = 30, killed = 0, saw_pending = 0;
    int max_commits = count.seen;
    for (int it = 0; it < iters; it++) {
        snprintf(dir, sizeof dir, "%s/run%02d", base, it);
        CHECK_OK(make_db(dir, &model, &root));
        int kills = 1 + it % 4, last_step = -1;
        for (int k = 0; k < kills; k++) {
            kill_plan plan = {0, 0, 0};
            /* Earlier kills: at a random moment. The last: at a precise point of
            ** the commit protocol (before step 1 / after step 1 / after step 2),
            ** early in a resumed run or anywhere in a fresh one. */
            int by_hook = k == kills - 1;
            if (by_hook) {
                int span = kills == 1 ? max_commits : 3;
                plan.commit_no = 1 + (int)(tu_splitmix(&rng) % (uint64_t)span);
                plan.step = it % 3;
                last_step = plan.step;
            }
            pid_t pid = fork();
            CHECK(pid >= 0);
            if (pid == 0) {
                cdb_status rc = drive(dir, CDB_DB_SYNC_NORMAL, by_hook ? kill_hook : NULL, &plan);
                _exit(rc == CDB_OK ? 0 : 3);
            }
            if (!by_hook) {
                /* resumed runs have less left to do: aim earlier */
                int64_t span_us = clean_ns / 1000 / (k + 1) + 1000;
                int64_t delay_us = (int64_t)(tu_splitmix(&rng) % (uint64_t)span_us);
                struct timespec ts = {(time_t)(delay_us / 1000000),
                                      (long)(delay_us % 1000000) * 1000L};
                nanosleep(&ts, NULL);
                kill(pid, SIGKILL);
            }
            int st = 0;
            waitpid(pid, &st, 0);
            CHECK_MSG(!(WIFEXITED(st) && WEXITSTATUS(st) != 0), "child failed (seed %llu)",
                      (unsigned long long)seed0);
            if (WIFSIGNALED(st)) killed++;
        }
        /* Recovery: what the next run finds, then the rerun. */
        cdb_db_counts c;
        cdb_db *db = NULL;
        cdb_db_params rp = cdb_db_params_default();
        rp.readonly = 1;
        CHECK_OK(cdb_db_open(dir, &rp, &db));
        CHECK_OK(cdb_db_get_counts(db, 0, &c));
        if (c.files[CDB_DB_PENDING] > 0) saw_pending++;
        if (getenv("CDB_TEST_VERBOSE"))
            fprintf(stderr, "    iter %d: %d kills, last %s step %d, pending %lld\n", it, kills,
                    "hook", last_step, (long long)c.files[CDB_DB_PENDING]);
        cdb_db_report *r = NULL;
        CHECK_OK(cdb_db_verify(db, &r)); /* a crash leaves pending work, never damage */
        CHECK_MSG(r->n_problems == 0, "after kill (seed %llu): %s", (unsigned long long)seed0,
                  r->n_listed ? r->problems[0].msg : "");
        cdb_db_report_free(r);
        cdb_db_close(db);
        CHECK_OK(drive(dir, CDB_DB_SYNC_NORMAL, NULL, NULL));

        CHECK_OK(take_snap(dir, &got_s));
        CHECK_EQ_INT(got_s.counts[CDB_DB_PENDING], 0);
        CHECK_EQ_INT(got_s.n, want_s.n);
        for (int s = 1; s <= 4; s++) CHECK_EQ_INT(got_s.counts[s], want_s.counts[s]);
        CHECK_EQ_INT(got_s.n_vectors, want_s.n_vectors);
        CHECK_MSG(got_s.n_iter == want_s.n_iter, "iter %lld vectors, want %lld (duplicates?)",
                  (long long)got_s.n_iter, (long long)want_s.n_iter);
        for (int k = 0; k < want_s.n; k++) {
            int j = -1;
            for (int q = 0; q < got_s.n; q++)
                if (!strcmp(got_s.path[q], want_s.path[k])) {
                    j = q;
                    break;
                }
            CHECK_MSG(j >= 0, "%s missing after recovery", want_s.path[k]);
            CHECK_EQ_INT(got_s.state[j], want_s.state[k]);
            CHECK(!memcmp(got_s.hash[j], want_s.hash[k], 16));
            CHECK_EQ_INT(got_s.has_vec[j], want_s.has_vec[k]);
            CHECK_MSG(!memcmp(got_s.vec[j], want_s.vec[k], sizeof want_s.vec[k]),
                      "%s: vector bits differ from the clean run (seed %llu)", want_s.path[k],
                      (unsigned long long)seed0);
        }
        CHECK_OK(cdb_db_open(dir, &rp, &db));
        CHECK_OK(cdb_db_verify(db, &r));
        CHECK_MSG(r->n_problems == 0, "final verify: %s", r->n_listed ? r->problems[0].msg : "");
        cdb_db_report_free(r);
        cdb_db_close(db);
        tu_rmtree(dir);
    }
    fprintf(stderr,
            "    %d iterations, %d processes killed, %d left pending rows; clean run %.0f ms\n",
            iters, killed, saw_pending, clean_ns / 1e6);
    CHECK(killed >= iters / 2);
    CHECK(saw_pending > 0);
    tu_rmtree(base);
}

/* ---- SQLite's own locks survive what clipdb does to its files ----------------------- */

/* The pid holding a read lock on a WAL database file's SHARED range (SQLite's
** PENDING_BYTE + 2, 510 bytes), as another process sees it: 0 when none. Every open
** connection in WAL mode keeps one; closing any other descriptor of the file in the
** same process drops it (POSIX), and a closing connection elsewhere then thinks it is
** the last one and checkpoints and deletes the WAL under us. */
static pid_t shared_lock_holder(const char *path) {
    int fd[2];
    pid_t holder = -1, pid;
    if (pipe(fd) != 0 || (pid = fork()) < 0) return -1;
    if (pid == 0) {
        int f = open(path, O_RDWR | O_CLOEXEC);
        struct flock fl;
        memset(&fl, 0, sizeof fl);
        fl.l_type = F_WRLCK;
        fl.l_whence = SEEK_SET;
        fl.l_start = 0x40000000 + 2;
        fl.l_len = 510;
        pid_t h = f >= 0 && fcntl(f, F_GETLK, &fl) == 0 ? (fl.l_type == F_UNLCK ? 0 : fl.l_pid) : -1;
        if (write(fd[1], &h, sizeof h) != (ssize_t)sizeof h) _exit(1);
        _exit(0);
    }
    close(fd[1]);
    if (read(fd[0], &holder, sizeof holder) != (ssize_t)sizeof holder) holder = -1;
    close(fd[0]);
    waitpid(pid, NULL, 0);
    return holder;
}

CDB_TEST(sqlite_locks_kept) {
    char dir[256], cat[300], shard[300];
    int64_t model = 0, root = 0;
    cdb_db *db = NULL;
    cdb_db_params p = cdb_db_params_default();
    cdb_db_report *rep = NULL;
    cdb_db_counts counts;
    tu_tmpdir(dir, sizeof dir, "locks");
    strcat(dir, "/db");
    CHECK_OK(make_db(dir, &model, &root));
    snprintf(cat, sizeof cat, "%s/catalog.db", dir);
    snprintf(shard, sizeof shard, "%s/shards/0001.db", dir);
    CHECK_OK(cdb_db_open(dir, &p, &db));
    CHECK_OK(put_batch(db, model, root, 0, 20));
    CHECK_EQ_INT(shared_lock_holder(cat), getpid());
    CHECK_EQ_INT(shared_lock_holder(shard), getpid());
    CHECK_OK(cdb_db_flush(db)); /* fsyncs every file the batch wrote */
    CHECK_EQ_INT(shared_lock_holder(cat), getpid());
    CHECK_EQ_INT(shared_lock_holder(shard), getpid());
    CHECK_OK(put_batch(db, model, root, 20, 20));
    CHECK_OK(cdb_db_get_counts(db, model, &counts));
    CHECK_OK(cdb_db_verify(db, &rep));
    cdb_db_report_free(rep);
    CHECK_OK(cdb_db_flush(db));
    CHECK_EQ_INT(shared_lock_holder(cat), getpid());
    CHECK_EQ_INT(shared_lock_holder(shard), getpid());
    cdb_db_close(db);
    CHECK_EQ_INT(shared_lock_holder(cat), 0); /* the probe can see a lock's absence */
    *strrchr(dir, '/') = '\0';
    tu_rmtree(dir);
}

CDB_TEST_MAIN(lock_contention, stale_lock_taken_over, reader_during_write, kill9_anywhere_then_redo,
              sqlite_locks_kept)
