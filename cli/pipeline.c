/*
** pipeline.c: the ingest pipeline shared by `ingest` and `reindex`.
**
**   walker (calling thread) -> Q1 -> readers x N -> Q2 -> encoder x 1 -> Q3 -> writer x 1
**
** - walker: walks each root (walk.c), looks every file up in the catalog through a
**   read-only handle, and skips without reading it when its size and mtime are
**   unchanged (state ok or error, and, for ok, a vector of this model exists).
**   Everything else becomes a job.
** - readers: read the whole file, hash it (XXH3-128), and decide: same hash as the
**   catalog's -> metadata-only update (touch); a new path whose content is an ok
**   file of the same root whose old path is gone -> move (keeps its vector); a file
**   that is neither named nor shaped like an image -> skipped; otherwise decode +
**   preprocess, or an error with a one-line reason.
** - encoder: batches preprocessed images (--batch), runs the image tower, gives
**   each item its own vector. Items are never positional: every result carries its
**   own path and vector, so a failed decode cannot shift another file's vector.
** - writer: stages results into cdb_db batches and commits them every
**   CLI_COMMIT_EVERY operations or every second, whichever comes first (the
**   crash-safe write order is db/'s), so a search sees new photos quickly.
**
** Queues are bounded, so memory stays flat whatever the library's size. After the
** walk, a deletion pass marks deleted the files of each fully walked root that
** are gone from disk. Ctrl-C: the walker stops, readers drop their queued jobs,
** the encoder flushes its partial batch and the writer commits; no deletion pass.
*/
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"

#if CDB_CLI_HAVE_DB && CDB_CLI_HAVE_ENCODER

#include "db/db.h"
#include "encoder/encoder.h"

#define CLI_COMMIT_EVERY 256
#define CLI_COMMIT_NS 1000000000LL /* also commit at least once a second */
#define CLI_MAX_FILE_BYTES ((int64_t)1 << 30)

typedef enum job_kind {
    R_IMAGE = 1, /* decoded; pixels, then vec */
    R_ERROR,     /* unusable: reason */
    R_TOUCH,     /* same content, new metadata */
    R_MOVE,      /* content of file_id, now at relpath */
    R_SKIP,      /* not an image */
    R_DROPPED    /* interrupted before processing */
} job_kind;

/* One file's trip through the pipeline (job, then result: the same struct). */
typedef struct job {
    int64_t root_id;
    char *relpath;        /* heap */
    int64_t file_id;      /* catalog row at this path (0: none) */
    int was_ok;           /* that row was ok (so a re-encode counts as "changed") */
    int for_model;        /* ok, but no vector of this (non-default) model yet: "added" */
    int has_old_hash;
    uint8_t old_hash[CDB_DB_HASH_BYTES];
    int sniff;            /* not an image extension: check the magic bytes first */
    cdb_db_file_meta meta;
    job_kind kind;
    int64_t move_from;    /* R_MOVE: the file id that moved */
    char reason[256];     /* R_ERROR */
    float *pixels;        /* R_IMAGE, before encoding */
    float *vec;           /* R_IMAGE, after encoding */
} job;

typedef struct pipe_ctx {
    cdb_db *db;           /* writer handle (writer thread, then the deletion pass) */
    const char *db_dir;
    cdb_model *model;
    int64_t model_id;
    int is_default_model;
    const cli_ingest_opts *o;
    const cdb_preprocess_params *pp;
    int dim;
    const char *root_path; /* root being walked */
    int64_t root_id;
    cdb_db *rdb;          /* walker's read-only handle */
    cli_queue *q1, *q2, *q3;
    cli_ingest_summary *sum;
    cli_progress *prog;
    /* counters shared by the threads */
    atomic_llong n_done, n_errors, n_found;
    atomic_int abort;     /* a fatal error: stop everything */
    atomic_int readers_left, writer_done;
    /* stage times (ns): readers add up; the walker, encoder and writer own theirs */
    atomic_llong ns_read, ns_decode, ns_preprocess;
    int64_t ns_walk_blocked, ns_encode, ns_encode_wait, ns_store, n_batches;
    pthread_mutex_t mu;   /* guards claimed[], fatal[] */
    int64_t *claimed;     /* file ids taken by a move in this run */
    int n_claimed, cap_claimed;
    char fatal[512];
    uint8_t *seen;        /* bitset of catalog file ids met by the walk */
    int64_t seen_bits;
} pipe_ctx;

static void job_free(job *j) {
    if (!j) return;
    free(j->relpath);
    free(j->pixels);
    free(j->vec);
    free(j);
}

static void set_fatal(pipe_ctx *c, const char *fmt, const char *a, const char *b) {
    pthread_mutex_lock(&c->mu);
    if (!c->fatal[0]) snprintf(c->fatal, sizeof c->fatal, fmt, a, b);
    pthread_mutex_unlock(&c->mu);
    atomic_store(&c->abort, 1);
}

static int stopping(pipe_ctx *c) { return cli_interrupted() || atomic_load(&c->abort); }

static void mark_seen(pipe_ctx *c, int64_t id) {
    if (id <= 0) return;
    if (id >= c->seen_bits) {
        int64_t nb = (id + 1) * 2;
        uint8_t *ns = realloc(c->seen, (size_t)((nb + 7) / 8));
        if (!ns) return;
        memset(ns + (c->seen_bits + 7) / 8, 0, (size_t)((nb + 7) / 8 - (c->seen_bits + 7) / 8));
        c->seen = ns;
        c->seen_bits = nb;
    }
    c->seen[id / 8] |= (uint8_t)(1u << (id % 8));
}

static int was_seen(const pipe_ctx *c, int64_t id) {
    return id > 0 && id < c->seen_bits && (c->seen[id / 8] >> (id % 8)) & 1;
}

/* Copies the shared counters into the progress line and redraws it if due. */
static void tick(pipe_ctx *c) {
    c->prog->done = atomic_load(&c->n_done);
    c->prog->errors = atomic_load(&c->n_errors);
    cli_progress_update(c->prog);
}

/* ---- walker ------------------------------------------------------------------------ */

typedef struct walk_ud {
    pipe_ctx *c;
    const char *prefix; /* relpaths are prefix + "/" + the walk's relpath */
} walk_ud;

static int on_file_(const cli_walk_entry *e, walk_ud *ud);

static int on_file(const cli_walk_entry *e, void *ud_) {
    walk_ud *ud = ud_;
    char rel[8192];
    cli_walk_entry e2;
    if (!ud->prefix) return on_file_(e, ud);
    e2 = *e;
    snprintf(rel, sizeof rel, "%s/%s", ud->prefix, e->relpath);
    e2.relpath = rel;
    return on_file_(&e2, ud);
}

static int on_file_(const cli_walk_entry *e, walk_ud *ud) {
    pipe_ctx *c = ud->c;
    cdb_db_file f;
    cdb_status rc;
    job *j;
    if (stopping(c)) return 1;
    if (e->error) {
        c->sum->walk_errors++;
        if (c->sum->walk_errors <= 10) {
            cli_progress_end(c->prog);
            cli_warn("%s/%s: %s (%s)", c->root_path, e->relpath, e->error, strerror(e->err));
        }
        return 0;
    }
    atomic_fetch_add(&c->n_found, 1);
    memset(&f, 0, sizeof f);
    rc = cdb_db_file_lookup(c->rdb, c->root_id, e->relpath, &f);
    if (rc != CDB_OK && rc != CDB_NOTFOUND) {
        set_fatal(c, "catalog lookup failed (%s%s)", cdb_errmsg(), "");
        return 1;
    }
    if (rc == CDB_OK) {
        mark_seen(c, f.id);
        if (!c->o->full && f.meta.size == e->size && f.meta.mtime_ns == e->mtime_ns &&
            (f.state == CDB_DB_OK || f.state == CDB_DB_ERROR)) {
            int has = 1;
            if (f.state == CDB_DB_OK && !c->is_default_model &&
                cdb_db_file_has_vector(c->rdb, c->model_id, f.id, &has) != CDB_OK)
                has = 0;
            if (has) {
                c->sum->unchanged++;
                atomic_fetch_add(&c->n_done, 1);
                cdb_db_file_clear(&f);
                tick(c);
                return 0;
            }
        }
    }
    if (!(j = calloc(1, sizeof *j)) || !(j->relpath = strdup(e->relpath))) {
        free(j);
        cdb_db_file_clear(&f);
        set_fatal(c, "out of memory%s%s", "", "");
        return 1;
    }
    j->root_id = c->root_id;
    j->meta.size = e->size;
    j->meta.mtime_ns = e->mtime_ns;
    if (rc == CDB_OK) {
        j->file_id = f.id;
        j->was_ok = f.state == CDB_DB_OK;
        /* same content as the stored ok row -> metadata only; with --full the
        ** content is re-checked but an identical hash still keeps the vector */
        if (f.state == CDB_DB_OK && f.meta.has_hash) {
            int has = 1;
            if (!c->is_default_model &&
                cdb_db_file_has_vector(c->rdb, c->model_id, f.id, &has) != CDB_OK)
                has = 0;
            if (has) {
                j->has_old_hash = 1;
                memcpy(j->old_hash, f.meta.hash, CDB_DB_HASH_BYTES);
            } else {
                j->for_model = 1;
            }
        }
    }
    j->sniff = !cli_image_ext(e->relpath) && !(rc == CDB_OK && f.state != CDB_DB_DELETED);
    cdb_db_file_clear(&f);
    int64_t t0 = cdb_now_ns();
    if (cli_queue_push(c->q1, j) != 0) {
        job_free(j);
        return 1;
    }
    c->ns_walk_blocked += cdb_now_ns() - t0; /* readers busy: not walking */
    tick(c);
    return 0;
}

/* ---- readers ----------------------------------------------------------------------- */

static int claim(pipe_ctx *c, int64_t id) {
    int ok = 1;
    pthread_mutex_lock(&c->mu);
    for (int i = 0; i < c->n_claimed; i++)
        if (c->claimed[i] == id) ok = 0;
    if (ok) {
        if (c->n_claimed == c->cap_claimed) {
            int nc = c->cap_claimed ? c->cap_claimed * 2 : 64;
            int64_t *p = realloc(c->claimed, sizeof *p * (size_t)nc);
            if (p) {
                c->claimed = p;
                c->cap_claimed = nc;
            }
        }
        if (c->n_claimed < c->cap_claimed) c->claimed[c->n_claimed++] = id;
        else ok = 0;
    }
    pthread_mutex_unlock(&c->mu);
    return ok;
}

/* An ok file of the same root with this content whose path is gone: a move. */
static int64_t find_moved(pipe_ctx *c, cdb_db *rdb, const job *j) {
    int64_t ids[16];
    int n = 0;
    if (cdb_db_files_by_hash(rdb, j->root_id, j->meta.hash, ids, 16, &n) != CDB_OK) return 0;
    for (int i = 0; i < n && i < 16; i++) {
        char *path = NULL;
        struct stat st;
        int gone;
        if (ids[i] == j->file_id) continue;
        if (cdb_db_file_path(rdb, ids[i], &path) != CDB_OK) continue;
        gone = lstat(path, &st) != 0 && (errno == ENOENT || errno == ENOTDIR);
        cdb_free(path);
        if (gone && claim(c, ids[i])) return ids[i];
    }
    return 0;
}

static void one_line(char *s) {
    for (; *s; s++)
        if (*s == '\n' || *s == '\r') *s = ' ';
}

static void fail(job *j, const char *fmt, const char *a) {
    j->kind = R_ERROR;
    snprintf(j->reason, sizeof j->reason, fmt, a);
    one_line(j->reason);
}

static void status_reason(job *j, const char *what, cdb_status rc) {
    const char *m = cdb_errmsg();
    j->kind = R_ERROR;
    snprintf(j->reason, sizeof j->reason, "%.40s: %.200s", what, m && *m ? m : cdb_status_str(rc));
    one_line(j->reason);
}

/* Reads, hashes and classifies one job; decodes and preprocesses an image. t0:
** when it started; *timed = 1 once the read time (up to the decode) is counted. */
static void process_(pipe_ctx *c, cdb_db *rdb, job *j, int64_t t0, int *timed) {
    char path[8192];
    unsigned char *buf = NULL;
    int fd;
    struct stat st;
    size_t got = 0;
    cdb_image *img = NULL;
    cdb_image_params ip = cdb_image_params_default();
    cdb_status rc;
    snprintf(path, sizeof path, "%s/%s", c->root_path, j->relpath);
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
        if (j->sniff) { j->kind = R_SKIP; return; }
        fail(j, "cannot open: %s", strerror(errno));
        return;
    }
    if (fstat(fd, &st) == 0) {
        j->meta.size = (int64_t)st.st_size;
        j->meta.mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
    }
    if (j->sniff) {
        unsigned char head[32];
        ssize_t k = pread(fd, head, sizeof head, 0);
        if (k <= 0 || !cli_image_magic(head, (size_t)k)) {
            close(fd);
            j->kind = R_SKIP;
            return;
        }
    }
    if (j->meta.size == 0) {
        close(fd);
        fail(j, "empty file%s", "");
        return;
    }
    if (j->meta.size > CLI_MAX_FILE_BYTES) {
        close(fd);
        fail(j, "file too large (over 1 GiB)%s", "");
        return;
    }
    if (!(buf = malloc((size_t)j->meta.size))) {
        close(fd);
        fail(j, "out of memory reading the file%s", "");
        return;
    }
    while (got < (size_t)j->meta.size) {
        ssize_t k = read(fd, buf + got, (size_t)j->meta.size - got);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        got += (size_t)k;
    }
    close(fd);
    if (got != (size_t)j->meta.size) {
        free(buf);
        fail(j, "cannot read: %s", got ? "file shrank while reading" : strerror(errno));
        return;
    }
    cdb_db_hash_buf(buf, got, j->meta.hash);
    j->meta.has_hash = 1;
    if (j->has_old_hash && !memcmp(j->old_hash, j->meta.hash, CDB_DB_HASH_BYTES)) {
        free(buf);
        j->kind = R_TOUCH;
        return;
    }
    if (!j->was_ok && (j->move_from = find_moved(c, rdb, j)) > 0) {
        free(buf);
        j->kind = R_MOVE;
        return;
    }
    ip.apply_exif = !c->o->no_exif;
    int64_t t1 = cdb_now_ns();
    atomic_fetch_add(&c->ns_read, t1 - t0);
    *timed = 1;
    rc = cdb_image_decode(buf, got, &ip, &img);
    free(buf);
    t0 = cdb_now_ns();
    atomic_fetch_add(&c->ns_decode, t0 - t1);
    if (rc != CDB_OK) {
        status_reason(j, "cannot decode", rc);
        return;
    }
    j->meta.width = img->width;
    j->meta.height = img->height;
    if (!(j->pixels = malloc(sizeof *j->pixels * 3 * (size_t)c->pp->size * (size_t)c->pp->size))) {
        cdb_image_free(img);
        fail(j, "out of memory preprocessing%s", "");
        return;
    }
    rc = cdb_image_preprocess(img, c->pp, j->pixels, NULL);
    cdb_image_free(img);
    atomic_fetch_add(&c->ns_preprocess, cdb_now_ns() - t0);
    if (rc != CDB_OK) {
        free(j->pixels);
        j->pixels = NULL;
        status_reason(j, "cannot preprocess", rc);
        return;
    }
    j->kind = R_IMAGE;
}

static void process(pipe_ctx *c, cdb_db *rdb, job *j) {
    int64_t t0 = cdb_now_ns();
    int timed = 0;
    process_(c, rdb, j, t0, &timed);
    if (!timed) atomic_fetch_add(&c->ns_read, cdb_now_ns() - t0); /* ended before a decode */
}

static void *reader_main(void *arg) {
    pipe_ctx *c = arg;
    cdb_db *rdb = NULL;
    cdb_db_params p = cdb_db_params_default();
    job *j;
    p.readonly = 1;
    if (cdb_db_open(c->db_dir, &p, &rdb) != CDB_OK) {
        set_fatal(c, "cannot open the database for reading (%s%s)", cdb_errmsg(), "");
        rdb = NULL;
    }
    while ((j = cli_queue_pop(c->q1))) {
        if (stopping(c) || !rdb) {
            job_free(j); /* interrupted: not processed, not counted */
            continue;
        }
        process(c, rdb, j);
        if (cli_queue_push(c->q2, j) != 0) job_free(j);
    }
    cdb_db_close(rdb);
    if (atomic_fetch_sub(&c->readers_left, 1) == 1) cli_queue_close(c->q2); /* the last one */
    return NULL;
}

/* ---- encoder ----------------------------------------------------------------------- */

static void encode_batch(pipe_ctx *c, job **b, int n, float *px, float *out) {
    size_t per = 3 * (size_t)c->pp->size * (size_t)c->pp->size;
    cdb_status rc;
    for (int i = 0; i < n; i++) memcpy(px + per * (size_t)i, b[i]->pixels, per * sizeof *px);
    int64_t t0 = cdb_now_ns();
    rc = cdb_encode_pixels(c->model, px, n, 1, out);
    c->ns_encode += cdb_now_ns() - t0;
    c->n_batches++;
    for (int i = 0; i < n; i++) {
        if (rc != CDB_OK && n > 1) { /* find the culprit: encode one by one */
            t0 = cdb_now_ns();
            rc = cdb_encode_pixels(c->model, b[i]->pixels, 1, 1, out + (size_t)i * c->dim);
            c->ns_encode += cdb_now_ns() - t0;
        }
        if (rc != CDB_OK) {
            status_reason(b[i], "cannot encode", rc);
        } else if ((b[i]->vec = malloc(sizeof(float) * (size_t)c->dim))) {
            memcpy(b[i]->vec, out + (size_t)i * c->dim, sizeof(float) * (size_t)c->dim);
        } else {
            fail(b[i], "out of memory%s", "");
        }
        free(b[i]->pixels);
        b[i]->pixels = NULL;
        if (n > 1 && rc != CDB_OK) rc = CDB_ERROR; /* keep going one by one */
        if (cli_queue_push(c->q3, b[i]) != 0) job_free(b[i]);
    }
}

static void *encoder_main(void *arg) {
    pipe_ctx *c = arg;
    int cap = c->o->batch, n = 0;
    job **b = calloc((size_t)cap, sizeof *b);
    float *px = malloc(sizeof *px * 3 * (size_t)c->pp->size * (size_t)c->pp->size * (size_t)cap);
    float *out = malloc(sizeof *out * (size_t)c->dim * (size_t)cap);
    job *j;
    if (!b || !px || !out) set_fatal(c, "out of memory for the encoder batch%s%s", "", "");
    for (;;) {
        int64_t t0 = cdb_now_ns();
        if (!(j = cli_queue_pop(c->q2))) break;
        c->ns_encode_wait += cdb_now_ns() - t0;
        if (j->kind != R_IMAGE || !b || !px || !out) {
            if (cli_queue_push(c->q3, j) != 0) job_free(j);
            continue;
        }
        b[n++] = j;
        if (n == cap) {
            encode_batch(c, b, n, px, out);
            n = 0;
        }
    }
    if (n) encode_batch(c, b, n, px, out); /* the partial last batch (also on Ctrl-C) */
    cli_queue_close(c->q3);
    free(b);
    free(px);
    free(out);
    return NULL;
}

/* ---- writer ------------------------------------------------------------------------ */

static int commit(pipe_ctx *c, cdb_db_batch *b) {
    cdb_status rc;
    if (cdb_db_batch_count(b) == 0) return 0;
    rc = cdb_db_batch_commit(b, NULL);
    if (rc != CDB_OK) {
        set_fatal(c, "cannot commit to the database (%s%s)", cdb_errmsg(), "");
        return -1;
    }
    return 0;
}

static void stage(pipe_ctx *c, cdb_db_batch *b, job *j) {
    cli_ingest_summary *s = c->sum;
    cdb_status rc = CDB_OK;
    switch (j->kind) {
    case R_IMAGE:
        rc = cdb_db_batch_put(b, j->root_id, j->relpath, &j->meta, j->vec, c->dim);
        if (rc == CDB_INVALID) {
            char why[300];
            snprintf(why, sizeof why, "the encoder gave an unusable vector: %s", cdb_errmsg());
            rc = cdb_db_batch_put_error(b, j->root_id, j->relpath, &j->meta, why);
            s->errors++;
            atomic_fetch_add(&c->n_errors, 1);
        } else if (j->was_ok && !j->for_model) {
            s->changed++;
        } else {
            s->added++;
        }
        break;
    case R_ERROR:
        rc = cdb_db_batch_put_error(b, j->root_id, j->relpath, &j->meta, j->reason);
        s->errors++;
        atomic_fetch_add(&c->n_errors, 1);
        break;
    case R_TOUCH:
        rc = cdb_db_batch_touch(b, j->file_id, &j->meta);
        s->touched++;
        break;
    case R_MOVE:
        rc = cdb_db_batch_move(b, j->move_from, j->relpath, &j->meta);
        s->moved++;
        break;
    case R_SKIP:
        s->skipped++;
        break;
    default:
        break;
    }
    if (rc != CDB_OK) set_fatal(c, "cannot stage %s (%s)", j->relpath, cdb_errmsg());
}

static void *writer_main(void *arg) {
    pipe_ctx *c = arg;
    cdb_db_batch *b = NULL;
    job *j;
    int64_t last = cdb_now_ns();
    if (cdb_db_batch_new(c->db, c->model_id, &b) != CDB_OK)
        set_fatal(c, "cannot start a database batch (%s%s)", cdb_errmsg(), "");
    while ((j = cli_queue_pop(c->q3))) {
        int64_t t0 = cdb_now_ns();
        if (b && !atomic_load(&c->abort)) {
            stage(c, b, j);
            atomic_fetch_add(&c->n_done, 1);
            if (cdb_db_batch_count(b) >= CLI_COMMIT_EVERY ||
                (cdb_db_batch_count(b) > 0 && cdb_now_ns() - last > CLI_COMMIT_NS)) {
                commit(c, b);
                last = cdb_now_ns();
            }
        }
        job_free(j);
        c->ns_store += cdb_now_ns() - t0;
    }
    int64_t t0 = cdb_now_ns();
    if (b && !atomic_load(&c->abort)) commit(c, b);
    c->ns_store += cdb_now_ns() - t0;
    cdb_db_batch_free(b);
    atomic_store(&c->writer_done, 1);
    return NULL;
}

/* ---- deletion pass -------------------------------------------------------------------- */

typedef struct del_ud {
    pipe_ctx *c;
    const char *root;
    const char *prefix; /* only relpaths under this folder (NULL: all) */
    int64_t *ids;
    int n, cap;
} del_ud;

static int on_known(const cdb_db_file *f, void *ud_) {
    del_ud *d = ud_;
    char path[8192];
    struct stat st;
    if (was_seen(d->c, f->id)) return 0;
    if (d->prefix) {
        size_t pl = strlen(d->prefix);
        if (strncmp(f->relpath, d->prefix, pl) || f->relpath[pl] != '/') return 0;
    }
    snprintf(path, sizeof path, "%s/%s", d->root, f->relpath);
    if (lstat(path, &st) == 0 || (errno != ENOENT && errno != ENOTDIR)) return 0;
    if (d->n == d->cap) {
        int nc = d->cap ? d->cap * 2 : 256;
        int64_t *p = realloc(d->ids, sizeof *p * (size_t)nc);
        if (!p) return 1;
        d->ids = p;
        d->cap = nc;
    }
    d->ids[d->n++] = f->id;
    return 0;
}

/* walked_empty: the walk found no file at all there. Then every known file looks
** deleted, which is what an unmounted drive or a missing network share looks like:
** nothing is marked deleted and a warning says why. */
static cdb_status delete_gone(pipe_ctx *c, int64_t root_id, const char *root,
                              const char *prefix, int walked_empty) {
    del_ud d = {c, root, prefix, NULL, 0, 0};
    cdb_db_batch *b = NULL;
    cdb_status rc = cdb_db_files_foreach(
        c->db, root_id, CDB_DB_MASK_OK | CDB_DB_MASK_ERROR | CDB_DB_MASK_PENDING, on_known, &d);
    if (rc == CDB_OK && d.n && walked_empty) {
        cli_warn("%s%s%s is empty now; its %d recorded files are left as they are "
                 "(unmounted?)", root, prefix ? "/" : "", prefix ? prefix : "", d.n);
        c->sum->walk_errors++;
        d.n = 0;
    }
    if (rc == CDB_OK && d.n) rc = cdb_db_batch_new(c->db, c->model_id, &b);
    for (int i = 0; rc == CDB_OK && i < d.n; i++) {
        rc = cdb_db_batch_delete(b, d.ids[i]);
        if (rc == CDB_OK && cdb_db_batch_count(b) >= CLI_COMMIT_EVERY)
            rc = cdb_db_batch_commit(b, NULL);
    }
    if (rc == CDB_OK && b) rc = cdb_db_batch_commit(b, NULL);
    if (rc == CDB_OK) c->sum->deleted += d.n;
    cdb_db_batch_free(b);
    free(d.ids);
    return rc;
}

/* ---- pre-count (only for a live progress line: gives done/total and an ETA) ---- */

static int count_one(const cli_walk_entry *e, void *ud) {
    if (!e->error) (*(int64_t *)ud)++;
    return cli_interrupted();
}

static int64_t count_files(const cli_ingest_root *roots, int n_roots, const cli_ingest_opts *o,
                           const char *db_dir) {
    int64_t n = 0;
    for (int r = 0; r < n_roots && !cli_interrupted(); r++) {
        cli_walk_stats ws;
        char base[8192];
        if (roots[r].sub && roots[r].sub_is_file) {
            n++;
            continue;
        }
        snprintf(base, sizeof base, "%s%s%s", roots[r].path, roots[r].sub ? "/" : "",
                 roots[r].sub ? roots[r].sub : "");
        cli_walk(base, o->follow_symlinks, db_dir, count_one, &n, &ws);
    }
    return n;
}

/* ---- driver --------------------------------------------------------------------------- */

cdb_status cli_pipeline_run(cdb_db *db, const char *db_dir, cdb_model *model, int64_t model_id,
                            int is_default_model, const cli_ingest_root *roots, int n_roots,
                            const cli_ingest_opts *o, cli_ingest_summary *sum) {
    pipe_ctx c;
    pthread_t *readers = NULL, enc, wri;
    int n_readers = o->threads > 0 ? o->threads : 1, started = 0, enc_ok = 0, wri_ok = 0;
    cdb_db_params rp = cdb_db_params_default();
    cli_progress prog;
    cdb_status rc = CDB_OK;
    int64_t t0 = cdb_now_ns();
    char *walked = calloc((size_t)(n_roots > 0 ? n_roots : 1), 1);
    int64_t *found_in = calloc((size_t)(n_roots > 0 ? n_roots : 1), sizeof *found_in);

    memset(&c, 0, sizeof c);
    memset(sum, 0, sizeof *sum);
    pthread_mutex_init(&c.mu, NULL);
    c.db = db;
    c.db_dir = db_dir;
    c.model = model;
    c.model_id = model_id;
    c.is_default_model = is_default_model;
    c.o = o;
    c.pp = &cdb_model_get_info(model)->preprocess;
    c.dim = cdb_model_get_info(model)->embed_dim;
    c.sum = sum;
    c.prog = &prog;
    rp.readonly = 1;
    cli_progress_start(&prog, o->label ? o->label : "ingest", -1);
    if (prog.live) prog.total = count_files(roots, n_roots, o, db_dir);
    if (!walked || !found_in) {
        free(walked);
        free(found_in);
        return cdb_seterr(CDB_NOMEM, "out of memory");
    }
    if ((rc = cdb_db_open(db_dir, &rp, &c.rdb)) != CDB_OK) goto done;
    c.q1 = cli_queue_new(4 * n_readers + 4);
    c.q2 = cli_queue_new(2 * o->batch + n_readers);
    c.q3 = cli_queue_new(2 * o->batch + 16);
    readers = calloc((size_t)n_readers, sizeof *readers);
    if (!c.q1 || !c.q2 || !c.q3 || !readers) {
        rc = cdb_seterr(CDB_NOMEM, "out of memory");
        goto done;
    }
    atomic_store(&c.readers_left, n_readers);
    for (; started < n_readers; started++)
        if (pthread_create(&readers[started], NULL, reader_main, &c)) break;
    if (started < n_readers) { /* count only the readers that run */
        atomic_fetch_sub(&c.readers_left, n_readers - started);
        if (!started) cli_queue_close(c.q2);
    }
    enc_ok = pthread_create(&enc, NULL, encoder_main, &c) == 0;
    wri_ok = pthread_create(&wri, NULL, writer_main, &c) == 0;
    if (!started || !enc_ok || !wri_ok) {
        set_fatal(&c, "cannot start the pipeline threads%s%s", "", "");
    } else {
        int64_t tw = cdb_now_ns();
        for (int r = 0; r < n_roots && !stopping(&c); r++) {
            walk_ud ud = {&c, NULL};
            cli_walk_stats ws;
            char base[8192];
            int w;
            c.root_path = roots[r].path;
            c.root_id = roots[r].root_id;
            snprintf(base, sizeof base, "%s%s%s", roots[r].path, roots[r].sub ? "/" : "",
                     roots[r].sub ? roots[r].sub : "");
            if (roots[r].sub && roots[r].sub_is_file) { /* one file: no walk, no deletions */
                struct stat sb;
                cli_walk_entry e;
                memset(&e, 0, sizeof e);
                e.relpath = roots[r].sub;
                if (stat(base, &sb) != 0) {
                    e.error = "cannot stat";
                    e.err = errno;
                } else {
                    e.size = (int64_t)sb.st_size;
                    e.mtime_ns = (int64_t)sb.st_mtim.tv_sec * 1000000000LL + sb.st_mtim.tv_nsec;
                }
                on_file_(&e, &ud);
                continue;
            }
            ud.prefix = roots[r].sub;
            w = cli_walk(base, o->follow_symlinks, db_dir, on_file, &ud, &ws);
            found_in[r] = ws.n_files;
            if (w < 0) {
                sum->walk_errors++;
                cli_progress_end(&prog);
                cli_warn("cannot read %s (%s); its files are left as they are", base,
                         strerror(errno));
                continue;
            }
            sum->links_skipped += ws.n_links_skipped;
            sum->loops += ws.n_loops;
            if (w == 0 && !stopping(&c)) walked[r] = 1;
        }
        sum->ns_walk = cdb_now_ns() - tw - c.ns_walk_blocked;
    }
    prog.total = atomic_load(&c.n_found);
    cli_queue_close(c.q1);
    if (!enc_ok) cli_queue_close(c.q3);
    while (wri_ok && !atomic_load(&c.writer_done)) { /* keep the progress line alive */
        struct timespec ts = {0, 50 * 1000000L};
        nanosleep(&ts, NULL);
        tick(&c);
    }
    for (int i = 0; i < started; i++) pthread_join(readers[i], NULL);
    if (enc_ok) pthread_join(enc, NULL);
    if (wri_ok) pthread_join(wri, NULL);
    /* files of fully walked roots that are gone from disk */
    for (int r = 0; r < n_roots && !stopping(&c); r++) {
        if (!walked[r]) continue;
        if ((rc = delete_gone(&c, roots[r].root_id, roots[r].path, roots[r].sub,
                              found_in[r] == 0)) != CDB_OK) {
            set_fatal(&c, "cannot record deleted files (%s%s)", cdb_errmsg(), "");
            break;
        }
    }
    rc = CDB_OK;
    if (atomic_load(&c.abort)) rc = cdb_seterr(CDB_ERROR, "%s", c.fatal);
done:
    cli_progress_end(&prog);
    sum->found = atomic_load(&c.n_found);
    sum->interrupted = cli_interrupted();
    sum->seconds = (double)(cdb_now_ns() - t0) / 1e9;
    sum->ns_read = atomic_load(&c.ns_read);
    sum->ns_decode = atomic_load(&c.ns_decode);
    sum->ns_preprocess = atomic_load(&c.ns_preprocess);
    sum->ns_encode = c.ns_encode;
    sum->ns_encode_wait = c.ns_encode_wait;
    sum->ns_store = c.ns_store;
    sum->n_batches = c.n_batches;
    cdb_db_close(c.rdb);
    cli_queue_free(c.q1);
    cli_queue_free(c.q2);
    cli_queue_free(c.q3);
    free(readers);
    free(walked);
    free(found_in);
    free(c.claimed);
    free(c.seen);
    pthread_mutex_destroy(&c.mu);
    return rc;
}

#endif /* CDB_CLI_HAVE_DB && CDB_CLI_HAVE_ENCODER */
