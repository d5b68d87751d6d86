/*
** engine.c: the engine handle (engine.h): opening a database as reader or writer,
** the pool of reader handles that lets searches run on many threads at once, the
** models a handle has loaded, and the error
** conventions every public call follows (a complete "what (why)" sentence in
** cdb_errmsg plus a detail code).
**
** Models: a database remembers its models by weights hash; at registration the info
** JSON stores the model's absolute path ("path"), so later runs load the default
** model without being told where it is. If that path no longer holds the same
** weights, the caller's fallback model (the CLI: $CLIPDB_MODEL or the bundled one)
** is tried, and the hash decides. The info also holds the weights files' stat key
** ("files_key"): while the files at "path" keep it, the recorded hash is trusted and
** the weights are not read again to hash them.
**
** Readers for concurrent calls: one cdb_db per thread at a time (db/'s rule), kept in
** a free list. A file no writer had open when a reader opened it is read as an
** immutable snapshot (db/: nothing is created by a reader, not even a -shm), so a
** reader is reopened after any commit (reader_stale): a long-running server sees
** every new batch, also on a database it can only read.
*/
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>
#include <omp.h>

#include "engine/engine_int.h"

/* ---- errors --------------------------------------------------------------------------- */

static _Thread_local cdb_engine_err t_code;

cdb_engine_err cdb_engine_errcode(void) { return t_code; }
void cdb_eng_clear(void) { t_code = CDB_ENGINE_E_NONE; }

cdb_status cdb_eng_code(cdb_status rc, cdb_engine_err code) {
    t_code = code;
    return rc;
}

static cdb_status vfail(cdb_status rc, cdb_engine_err code, const char *why, const char *fmt,
                        va_list ap) {
    char what[1024], w[1024];
    vsnprintf(what, sizeof what, fmt, ap);
    /* a context why repeats (the path what names) is said once */
    if (why) cdb_err_said_once(what, why, w, sizeof w);
    else w[0] = '\0';
    if (w[0]) cdb_seterr(rc, "%s (%s)", what, w);
    else cdb_seterr(rc, "%s", what);
    /* a full disk is said as such by every command, whatever it was writing */
    t_code = code == CDB_ENGINE_E_NONE && cdb_eng_disk_full(rc) ? CDB_ENGINE_E_DISK_FULL : code;
    return rc;
}

cdb_status cdb_eng_fail(cdb_status rc, cdb_engine_err code, const char *fmt, ...) {
    const char *why = cdb_errmsg();
    va_list ap;
    cdb_status r;
    if (!why || !*why) why = cdb_status_str(rc);
    va_start(ap, fmt);
    r = vfail(rc, code, why, fmt, ap);
    va_end(ap);
    return r;
}

cdb_status cdb_eng_failw(cdb_status rc, cdb_engine_err code, const char *why, const char *fmt,
                         ...) {
    va_list ap;
    cdb_status r;
    va_start(ap, fmt);
    r = vfail(rc, code, why, fmt, ap);
    va_end(ap);
    return r;
}

/* Every layer maps a full disk to CDB_NOSPACE (SQLite's SQLITE_FULL and I/O errors
** with ENOSPC in db/, errno through cdb_errno_status elsewhere), and the pipeline
** passes its fatal status on unchanged: the status alone says it. */
int cdb_eng_disk_full(cdb_status rc) { return rc == CDB_NOSPACE; }

/* ---- events ------------------------------------------------------------------------------ */

void cdb_eng_warn(const cdb_engine_events *ev, const char *fmt, ...) {
    char *line = NULL;
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(&line, fmt, ap) < 0) line = NULL;
    va_end(ap);
    if (!line) return;
    if (ev && ev->warn) ev->warn(ev->ud, line);
    else CDB_LOG_WARN("%s", line);
    free(line);
}

int cdb_eng_should_stop(const cdb_engine_events *ev) {
    return ev && ev->should_stop && ev->should_stop(ev->ud);
}

void cdb_eng_progress(const cdb_engine_events *ev, cdb_engine_phase ph, const char *label,
                  int64_t done, int64_t total, int64_t errors) {
    cdb_engine_progress p;
    if (!ev || !ev->progress) return;
    p.phase = ph;
    p.label = label;
    p.done = done;
    p.total = total;
    p.errors = errors;
    ev->progress(ev->ud, &p);
}

/* BLAS (OpenBLAS, OpenMP build) sizes each GEMM by the calling thread's OpenMP thread
** count, not by the backend's setting, and a GEMM (or a kernel loop) split another
** way rounds the last bit of an embedding differently. So the engine, not its caller,
** decides how many threads encode a query (cdb_eng_search_threads) and binds them. */
void cdb_eng_bind_threads(int threads) {
    int n = threads > 0 ? threads : cdb_default_threads();
    if (omp_get_max_threads() != n) omp_set_num_threads(n);
}

int cdb_eng_search_threads(const cdb_engine *e, cdb_db *db, const char *spec, int images) {
    (void)db, (void)spec;
    /* a text alone on one thread: a few tokens, no thread team to wake, and on a busy
    ** machine (an ingest running) several threads wait for each other (measured with
    ** ViT-B/32: 2.5x slower under load, 2x faster idle) */
    return images ? e->p.model_threads : 1;
}

/* ---- params ------------------------------------------------------------------------------- */

cdb_engine_params cdb_engine_params_default(void) {
    cdb_engine_params p;
    memset(&p, 0, sizeof p);
    p.device.kind = CDB_K_DEVICE_AUTO;
    return p;
}

cdb_engine_run_params cdb_engine_run_params_default(void) {
    cdb_engine_run_params p;
    memset(&p, 0, sizeof p);
    p.batch = 32;
    p.follow_symlinks = -1;
    p.no_exif = -1;
    p.decode = -1;
    p.sample = CDB_ENGINE_DEEP_SAMPLE;
    return p;
}

/* ---- open / close ----------------------------------------------------------------------- */

/* 1 when path (a folder when dir) is there and this user may not write it; *err: why. */
static int unwritable(const char *path, int dir, int *err) {
    struct stat sb;
    if (stat(path, &sb) != 0) return 0;
    if (faccessat(AT_FDCWD, path, W_OK | (dir ? X_OK : 0), AT_EACCESS) == 0) return 0;
    *err = errno;
    return 1;
}

cdb_status cdb_eng_check_writable(const char *dir, int index_only) {
    static const char *const files[] = {"catalog.db", "thumbs.db", "lock", NULL};
    char p[PATH_MAX + 64], user[64];
    const char *bad = NULL; /* the folder or file of dir that is not writable */
    char what[300];
    int e = 0;
    struct stat sb;
    snprintf(p, sizeof p, "%s/catalog.db", dir);
    if (stat(p, &sb) != 0) return CDB_OK;
    if (!index_only && unwritable(dir, 1, &e)) bad = "";
    snprintf(p, sizeof p, "%s/index", dir);
    if (!bad && unwritable(p, 1, &e)) bad = "index/";
    else if (!bad && stat(p, &sb) != 0 && unwritable(dir, 1, &e)) bad = "";
    if (!index_only && !bad) {
        DIR *d;
        struct dirent *de;
        for (int i = 0; files[i] && !bad; i++) {
            snprintf(p, sizeof p, "%s/%s", dir, files[i]);
            if (unwritable(p, 0, &e)) bad = files[i];
        }
        snprintf(p, sizeof p, "%s/shards", dir);
        if (!bad && unwritable(p, 1, &e)) bad = "shards/";
        if (!bad && (d = opendir(p))) {
            while (!bad && (de = readdir(d))) {
                if (de->d_name[0] == '.') continue;
                snprintf(p, sizeof p, "%s/shards/%s", dir, de->d_name);
                if (unwritable(p, 0, &e)) {
                    snprintf(what, sizeof what, "its file shards/%.200s", de->d_name);
                    bad = what;
                }
            }
            closedir(d);
        }
    }
    if (!bad) return CDB_OK;
    if (e == EROFS)
        return cdb_eng_failw(CDB_IO, CDB_ENGINE_E_READ_ONLY, NULL,
                             "cannot write to the database %s: it is on a read-only filesystem",
                             dir);
    if (bad != what)
        snprintf(what, sizeof what, "its %s%s", strchr(bad, '/') || !*bad ? "folder " : "file ",
                 bad);
    if (!*bad) what[strlen(what) - 1] = '\0'; /* "its folder" */
    cdb_eng_user_name(geteuid(), user, sizeof user);
    return cdb_eng_failw(CDB_IO, CDB_ENGINE_E_READ_ONLY, NULL,
                         "cannot write to the database %s: %s is not writable by this user "
                         "(%s, uid %u)",
                         dir, what, user, (unsigned)geteuid());
}

void cdb_eng_user_name(unsigned uid, char *buf, size_t size) {
    struct passwd pw, *res = NULL;
    char tmp[4096];
    if (getpwuid_r((uid_t)uid, &pw, tmp, sizeof tmp, &res) == 0 && res)
        snprintf(buf, size, "%s", res->pw_name);
    else
        snprintf(buf, size, "uid %u", uid);
}

static cdb_status open_db(const char *dir, int writer, int wait_ms, cdb_db **out) {
    cdb_db_params p = cdb_db_params_default();
    cdb_status rc;
    p.readonly = !writer;
    p.lock_wait_ms = writer ? wait_ms : 0;
    if (writer && (rc = cdb_eng_check_writable(dir, 0)) != CDB_OK) return rc;
    rc = cdb_db_open(dir, &p, out);
    if (rc == CDB_NOTFOUND) return cdb_eng_code(rc, CDB_ENGINE_E_NO_DATABASE);
    if (rc == CDB_BUSY) return cdb_eng_code(rc, CDB_ENGINE_E_BUSY);
    if (rc == CDB_VERSION) return cdb_eng_code(rc, CDB_ENGINE_E_NEWER);
    return rc;
}

cdb_status cdb_engine_open(const char *dir, const cdb_engine_params *p, cdb_engine **out) {
    cdb_engine *e;
    cdb_status rc;
    cdb_eng_clear();
    *out = NULL;
    if (!dir || !*dir) return cdb_eng_code(cdb_seterr(CDB_INVALID, "no database directory given"),
                                       CDB_ENGINE_E_NONE);
    if (!(e = calloc(1, sizeof *e))) return cdb_seterr(CDB_NOMEM, "out of memory");
    e->p = p ? *p : cdb_engine_params_default();
    pthread_mutex_init(&e->mu, NULL);
    pthread_mutex_init(&e->load_mu, NULL);
    pthread_mutex_init(&e->preview_mu, NULL);
    pthread_cond_init(&e->preview_cv, NULL);
    if (!(e->dir = strdup(dir)) ||
        (e->p.fallback_model && !(e->fallback_model = strdup(e->p.fallback_model)))) {
        cdb_engine_close(e);
        return cdb_seterr(CDB_NOMEM, "out of memory");
    }
    e->p.fallback_model = e->fallback_model;
    if ((rc = open_db(dir, e->p.writer, e->p.lock_wait_ms, &e->db)) != CDB_OK) {
        cdb_engine_err code = t_code;
        char msg[1100];
        snprintf(msg, sizeof msg, "%s", cdb_errmsg());
        e->db = NULL;
        cdb_engine_close(e);
        cdb_seterr(rc, "%s", msg);
        return cdb_eng_code(rc, code);
    }
    /* work a killed writer left: finished by the next writer, whatever its command */
    if (e->p.writer && cdb_eng_finish_leftovers(e) != CDB_OK)
        cdb_eng_warn(&e->p.events, "a forget or move that an earlier run began could not be "
                     "finished (%s); the next run tries again", cdb_errmsg());
    cdb_eng_clear();
    cdb_clearerr();
    *out = e;
    return CDB_OK;
}

void cdb_engine_close(cdb_engine *e) {
    if (!e) return;
    cdb_eng_search_states_free(e);
    for (eng_model *m = e->models, *next; m; m = next) {
        next = m->next;
        cdb_model_close(m->m);
        cdb_eng_qcache_free(m->qcache);
        pthread_mutex_destroy(&m->encode_mu);
        cdb_eng_textbatch_destroy(&m->tbatch);
        free(m->spec);
        free(m);
    }
    for (eng_reader *r = e->idle, *next; r; r = next) {
        next = r->next;
        cdb_db_close(r->db);
        free(r);
    }
    cdb_db_close(e->db);
    pthread_mutex_destroy(&e->mu);
    pthread_mutex_destroy(&e->load_mu);
    pthread_mutex_destroy(&e->preview_mu);
    pthread_cond_destroy(&e->preview_cv);
    free(e->fallback_model);
    free(e->dir);
    free(e);
}

const char *cdb_engine_dir(const cdb_engine *e) { return e->dir; }

void cdb_engine_lock_info(const char *dir, int *pid, int *held) {
    *pid = 0;
    *held = 0;
    cdb_db_lock_info(dir, pid, held);
}

cdb_status cdb_eng_writer(cdb_engine *e, const char *what) {
    if (e->p.writer) return CDB_OK;
    return cdb_eng_code(cdb_seterr(CDB_INVALID, "%s needs the database's writer (open the engine "
                                            "with params.writer = 1)", what),
                    CDB_ENGINE_E_NONE);
}

/* ---- the reader pool --------------------------------------------------------------------- */

/* What a commit of any writer changes in the database folder: the catalog file, its
** write-ahead log, whether a -shm exists (a writer has it open). */
static void db_state(const cdb_engine *e, eng_db_state *st) {
    char p[4200];
    struct stat sb;
    memset(st, 0, sizeof *st);
    snprintf(p, sizeof p, "%s/catalog.db", e->dir);
    if (stat(p, &sb) == 0) {
        st->cat_ino = (uint64_t)sb.st_ino;
        st->cat_size = (int64_t)sb.st_size;
        st->cat_mtime_ns = (int64_t)sb.st_mtim.tv_sec * 1000000000LL + sb.st_mtim.tv_nsec;
    }
    snprintf(p, sizeof p, "%s/catalog.db-wal", e->dir);
    if (stat(p, &sb) == 0) {
        st->wal_size = (int64_t)sb.st_size + 1;
        st->wal_mtime_ns = (int64_t)sb.st_mtim.tv_sec * 1000000000LL + sb.st_mtim.tv_nsec;
    }
    snprintf(p, sizeof p, "%s/catalog.db-shm", e->dir);
    st->shm = access(p, F_OK) == 0;
}

static cdb_status reader_open(cdb_engine *e, eng_reader *r) {
    cdb_status rc;
    db_state(e, &r->at_open); /* before: a commit meanwhile makes it stale, never missed */
    if ((rc = open_db(e->dir, 0, 0, &r->db)) != CDB_OK) return rc;
    if (cdb_db_generation(r->db, &r->gen_at_open) != CDB_OK) r->gen_at_open = -1;
    return CDB_OK;
}

/* A reader may hold files as immutable snapshots (db/: a database file no writer had
** open is read so, catalog or shard), which a writer's later commits do not reach:
** after any commit the reader is reopened. A commit is seen as a change of the
** catalog's files; reopening costs about a millisecond, once per commit per reader. */
static int reader_stale(const cdb_engine *e, const eng_reader *r) {
    eng_db_state now;
    int64_t gen = -1;
    db_state(e, &now);
    if (memcmp(&now, &r->at_open, sizeof now) != 0) return 1;
    /* File times move in clock ticks of several ms and a restarted WAL keeps its size,
    ** so two commits can leave the stats equal; but then a writer was there when the
    ** catalog was opened (its -shm is unchanged), so the catalog is read live and its
    ** generation shows every commit. (The -shm itself is never opened here: closing
    ** a descriptor of it would drop SQLite's locks on it in this process.) */
    return cdb_db_generation(r->db, &gen) != CDB_OK || gen != r->gen_at_open;
}

cdb_status cdb_eng_reader_get(cdb_engine *e, eng_reader **out) {
    eng_reader *r;
    cdb_status rc;
    *out = NULL;
    pthread_mutex_lock(&e->mu);
    if ((r = e->idle)) e->idle = r->next;
    pthread_mutex_unlock(&e->mu);
    if (r && reader_stale(e, r)) {
        CDB_LOG_DEBUG("engine: %s was written: reopening a reader", e->dir);
        cdb_db_close(r->db);
        r->db = NULL;
        if ((rc = reader_open(e, r)) != CDB_OK) {
            free(r);
            return cdb_eng_fail(rc, t_code, "cannot open the database %s", e->dir);
        }
    }
    if (!r) {
        if (!(r = calloc(1, sizeof *r))) return cdb_seterr(CDB_NOMEM, "out of memory");
        if ((rc = reader_open(e, r)) != CDB_OK) {
            free(r);
            return cdb_eng_fail(rc, t_code, "cannot open the database %s", e->dir);
        }
    }
    r->next = NULL;
    *out = r;
    return CDB_OK;
}

int cdb_eng_reader_changed(const cdb_engine *e, const eng_reader *r) {
    return reader_stale(e, r);
}

void cdb_eng_reader_discard(eng_reader *r) {
    if (!r) return;
    cdb_db_close(r->db);
    free(r);
}

void cdb_eng_reader_put(cdb_engine *e, eng_reader *r) {
    if (!r) return;
    pthread_mutex_lock(&e->mu);
    r->next = e->idle;
    e->idle = r;
    pthread_mutex_unlock(&e->mu);
}

/* ---- models ------------------------------------------------------------------------------ */

void cdb_eng_model_to_public(const cdb_db_model *dm, cdb_engine_model *out) {
    memset(out, 0, sizeof *out);
    out->id = dm->id;
    snprintf(out->weights_hash, sizeof out->weights_hash, "%s", dm->weights_hash);
    snprintf(out->name, sizeof out->name, "%s", dm->name);
    out->dim = dm->dim;
    out->is_default = dm->is_default;
    out->decode = dm->decode;
    out->decode_settled = dm->decode_settled;
}

char *cdb_eng_model_info_json(const char *path, const cdb_model *m) {
    const cdb_model_info *mi = cdb_model_get_info(m);
    char abs[PATH_MAX];
    json_t *o = json_object();
    char *s;
    if (!realpath(path, abs)) snprintf(abs, sizeof abs, "%s", path);
    json_object_set_new(o, "path", json_string(abs));
    json_object_set_new(o, "name", json_string(mi->name ? mi->name : ""));
    json_object_set_new(o, "hash", json_string(mi->hash));
    if (mi->files_key[0]) json_object_set_new(o, "files_key", json_string(mi->files_key));
    json_object_set_new(o, "embed_dim", json_integer(mi->embed_dim));
    json_object_set_new(o, "image_size", json_integer(mi->image_size));
    json_object_set_new(o, "context_length", json_integer(mi->context_length));
    json_object_set_new(o, "naming", json_string(mi->naming ? mi->naming : ""));
    json_object_set_new(o, "weights_dtype",
                        json_string(mi->weights_dtype ? mi->weights_dtype : ""));
    s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(o);
    return s; /* free() */
}

/* known_hash/known_key: the identity recorded with the database's model and the
** weights files' key recorded with it (NULL: hash the weights). A failure that is
** not about the files (the device asked for cannot run: CDB_UNSUPPORTED, CDB_DEVICE)
** is kept in *dev_rc with its message in dev_why, so it is reported as itself. */
static cdb_model *try_open(cdb_engine *e, const char *path, int vision, int text, int threads,
                           const char *known_hash, const char *known_key, cdb_status *dev_rc,
                           char *dev_why, size_t why_size) {
    cdb_model_params mp = cdb_model_params_default();
    cdb_model *m = NULL;
    mp.known_hash = known_hash;
    mp.known_files_key = known_key;
    mp.n_threads = threads;
    mp.load_vision = vision;
    mp.load_text = text;
    mp.device = e->p.device;
    cdb_status rc = cdb_model_open(path, &mp, &m);
    if ((rc == CDB_UNSUPPORTED || rc == CDB_DEVICE) && *dev_rc == CDB_OK) {
        *dev_rc = rc;
        snprintf(dev_why, why_size, "%s", cdb_errmsg());
    }
    return rc == CDB_OK ? m : NULL;
}

static cdb_status load_db_model(cdb_engine *e, cdb_db *db, const cdb_db_model *dm, int vision,
                                int text, int threads, int quiet, cdb_model **out) {
    char *info = NULL;
    const char *path = NULL, *key = NULL;
    json_t *root = NULL;
    cdb_model *m = NULL;
    cdb_status rc = CDB_OK, dev_rc = CDB_OK;
    char dev_why[512] = "";
    *out = NULL;
    if (cdb_db_model_info(db, dm->id, &info) == CDB_OK && info) {
        root = json_loads(info, 0, NULL);
        path = json_string_value(json_object_get(root, "path"));
        key = json_string_value(json_object_get(root, "files_key"));
    }
    /* Unchanged files (same key as at registration) need no rehash. */
    if (path)
        m = try_open(e, path, vision, text, threads, dm->weights_hash, key, &dev_rc, dev_why,
                     sizeof dev_why);
    if (m && strcmp(cdb_model_get_info(m)->hash, dm->weights_hash)) {
        cdb_model_close(m);
        m = NULL;
    }
    if (!m && e->fallback_model) { /* the recorded path moved: try the fallback */
        m = try_open(e, e->fallback_model, vision, text, threads, NULL, NULL, &dev_rc, dev_why,
                     sizeof dev_why);
        if (m && strcmp(cdb_model_get_info(m)->hash, dm->weights_hash)) {
            cdb_model_close(m);
            m = NULL;
        }
    }
    if (!m && dev_rc != CDB_OK) { /* the weights may well be there: the device is not */
        rc = cdb_eng_failw(dev_rc, CDB_ENGINE_E_MODEL_LOAD, dev_why,
                           "cannot load the database's model '%s' on the device asked for",
                           dm->name);
    } else if (!m) {
        if (quiet) rc = cdb_eng_code(cdb_seterr(CDB_NOTFOUND, "weights not found"),
                                 CDB_ENGINE_E_WEIGHTS_MISSING);
        else
            rc = cdb_eng_failw(CDB_NOTFOUND, CDB_ENGINE_E_WEIGHTS_MISSING,
                           path ? path : "no path recorded",
                           "cannot find the database's model '%s' (weights %s)", dm->name,
                           dm->weights_hash);
    }
    json_decref(root);
    cdb_free(info);
    *out = m;
    return rc;
}

cdb_status cdb_eng_load_db_model(cdb_engine *e, cdb_db *db, const cdb_db_model *dm, int vision,
                             int text, int quiet, cdb_model **out) {
    return load_db_model(e, db, dm, vision, text, e->p.model_threads, quiet, out);
}

/* The model at path (towers as asked; text for its hash alone) and its record. */
static cdb_status path_model(cdb_engine *e, cdb_db *db, const char *path, int vision, int text,
                             int threads, cdb_k_device device, cdb_model **m_out,
                             cdb_db_model *dm) {
    cdb_model_params mp = cdb_model_params_default();
    cdb_model *m = NULL;
    cdb_status rc;
    *m_out = NULL;
    mp.n_threads = threads;
    mp.load_vision = vision;
    mp.load_text = text;
    mp.device = device;
    if ((rc = cdb_model_open(path, &mp, &m)) != CDB_OK)
        return cdb_eng_fail(rc, CDB_ENGINE_E_MODEL_LOAD, "cannot load the model %s", path);
    rc = cdb_db_model_find(db, cdb_model_get_info(m)->hash, dm);
    if (rc == CDB_NOTFOUND) {
        cdb_model_close(m);
        return cdb_eng_failw(CDB_NOTFOUND, CDB_ENGINE_E_MODEL_NOT_IN_DB,
                         "this database has no vectors from it", "model %s is not in the database",
                         path);
    }
    if (rc != CDB_OK) {
        cdb_model_close(m);
        return cdb_eng_fail(rc, CDB_ENGINE_E_NONE, "cannot register the model %s", path);
    }
    *m_out = m;
    return CDB_OK;
}

static cdb_status default_model(cdb_db *db, cdb_db_model *dm) {
    cdb_status rc = cdb_db_model_default(db, dm);
    if (rc == CDB_NOTFOUND)
        return cdb_eng_failw(rc, CDB_ENGINE_E_NOT_INITIALIZED, "it has no model",
                         "the database is not initialized");
    if (rc != CDB_OK)
        return cdb_eng_fail(rc, CDB_ENGINE_E_NONE, "cannot read the database's model");
    return CDB_OK;
}

static int same_spec(const char *a, const char *b) {
    return (!a && !b) || (a && b && !strcmp(a, b));
}

static eng_model *cached(cdb_engine *e, const char *path, int vision, int text, int threads) {
    eng_model *found = NULL;
    pthread_mutex_lock(&e->mu);
    for (eng_model *m = e->models; m && !found; m = m->next)
        if (same_spec(m->spec, path) && m->vision >= vision && m->text >= text &&
            (m->threads == threads || (!vision && !text)))
            found = m;
    pthread_mutex_unlock(&e->mu);
    return found;
}

cdb_status cdb_eng_model_get(cdb_engine *e, cdb_db *db, const char *path, int vision, int text,
                         int threads, eng_model **out) {
    eng_model *slot;
    cdb_status rc = CDB_OK;
    if (path && !*path) path = NULL;
    if (threads < 0) threads = e->p.model_threads;
    *out = NULL;
    if ((slot = cached(e, path, vision, text, threads))) {
        *out = slot;
        return CDB_OK;
    }
    pthread_mutex_lock(&e->load_mu);
    if ((slot = cached(e, path, vision, text, threads))) goto done;
    if (!(slot = calloc(1, sizeof *slot)) || (path && !(slot->spec = strdup(path)))) {
        rc = cdb_seterr(CDB_NOMEM, "out of memory");
        goto done;
    }
    slot->vision = vision;
    slot->text = text;
    slot->threads = threads;
    pthread_mutex_init(&slot->encode_mu, NULL);
    cdb_eng_textbatch_init(&slot->tbatch, e->p.text_encoders);
    if (path) {
        rc = path_model(e, db, path, vision, text, threads, e->p.device, &slot->m, &slot->dm);
    } else if ((rc = default_model(db, &slot->dm)) == CDB_OK && (vision || text)) {
        rc = load_db_model(e, db, &slot->dm, vision, text, threads, 0, &slot->m);
    }
    if (rc != CDB_OK) goto done;
    slot->model_id = slot->dm.id;
    pthread_mutex_lock(&e->mu);
    slot->next = e->models;
    e->models = slot;
    pthread_mutex_unlock(&e->mu);
done:
    pthread_mutex_unlock(&e->load_mu);
    if (rc != CDB_OK && slot) {
        cdb_model_close(slot->m);
        if (slot->tbatch.tail) { /* initialized (after the allocations) */
            pthread_mutex_destroy(&slot->encode_mu);
            cdb_eng_textbatch_destroy(&slot->tbatch);
        }
        free(slot->spec);
        free(slot);
        slot = NULL;
    }
    *out = slot;
    return rc;
}

typedef struct model_match {
    const char *spec;
    cdb_db_model found;
    int n;
} model_match;

/* A registered model by number, name or weights hash (or a prefix of 6+ hex digits). */
static int match_model(const cdb_db_model *m, void *ud_) {
    model_match *ud = ud_;
    char id[32];
    size_t sl = strlen(ud->spec);
    snprintf(id, sizeof id, "%lld", (long long)m->id);
    if (!strcmp(ud->spec, id) || !strcmp(ud->spec, m->name) ||
        (sl >= 6 && !strncmp(ud->spec, m->weights_hash, sl))) {
        ud->found = *m;
        ud->n++;
    }
    return 0;
}

cdb_status cdb_eng_find_db_model(cdb_engine *e, cdb_db *db, const char *spec, cdb_db_model *out) {
    model_match ud;
    struct stat sb;
    cdb_status st;
    memset(&ud, 0, sizeof ud);
    ud.spec = spec;
    if ((st = cdb_db_models_foreach(db, match_model, &ud)) != CDB_OK)
        return cdb_eng_fail(st, CDB_ENGINE_E_NONE, "cannot list the database's models");
    if (ud.n == 1) {
        *out = ud.found;
        return CDB_OK;
    }
    if (ud.n > 1)
        return cdb_eng_failw(CDB_INVALID, CDB_ENGINE_E_MODEL_AMBIGUOUS, "several models match",
                         "model '%s' is ambiguous", spec);
    if (stat(spec, &sb) == 0) { /* a model folder or file: its weights hash decides */
        cdb_model *m = NULL;
        cdb_db_model dm;
        const cdb_k_device cpu = {CDB_K_DEVICE_CPU, 0};
        if ((st = path_model(e, db, spec, 0, 1, e->p.model_threads, cpu, &m, &dm)) != CDB_OK)
            return st;
        cdb_model_close(m);
        if ((st = cdb_db_model_get(db, dm.id, out)) != CDB_OK)
            return cdb_eng_fail(st, CDB_ENGINE_E_NONE, "cannot read the model record");
        return CDB_OK;
    }
    return cdb_eng_failw(CDB_NOTFOUND, CDB_ENGINE_E_MODEL_UNKNOWN,
                     "no model of this database has that number, name or hash",
                     "unknown model '%s'", spec);
}

cdb_status cdb_engine_find_model(cdb_engine *e, const char *spec, cdb_engine_model *out) {
    cdb_db_model dm;
    cdb_status rc;
    cdb_eng_clear();
    rc = spec && *spec ? cdb_eng_find_db_model(e, e->db, spec, &dm) : default_model(e->db, &dm);
    if (rc == CDB_OK) cdb_eng_model_to_public(&dm, out);
    return rc;
}

cdb_status cdb_engine_load_model(cdb_engine *e, const char *model_path, int vision, int text,
                                 cdb_engine_model *out) {
    eng_reader *r = NULL;
    eng_model *m = NULL;
    cdb_status rc;
    cdb_eng_clear();
    if ((rc = cdb_eng_reader_get(e, &r)) != CDB_OK) return rc;
    /* as searches will ask for them (cdb_eng_search_threads): texts alone on one thread,
    ** with images on model_threads */
    if (text && (rc = cdb_eng_model_get(e, r->db, model_path, 0, 1,
                                    cdb_eng_search_threads(e, r->db, model_path, 0), &m)) != CDB_OK)
        goto put;
    if (vision || !text)
        rc = cdb_eng_model_get(e, r->db, model_path, vision, text && vision,
                           cdb_eng_search_threads(e, r->db, model_path, vision), &m);
put:
    cdb_eng_reader_put(e, r);
    if (rc == CDB_OK && out) cdb_eng_model_to_public(&m->dm, out);
    return rc;
}

cdb_status cdb_engine_encode_text(cdb_engine *e, const char *model_path, const char *text,
                                  float *out) {
    eng_reader *r = NULL;
    eng_model *m = NULL;
    cdb_status rc;
    const char *texts[1] = {text};
    cdb_eng_clear();
    if ((rc = cdb_eng_reader_get(e, &r)) != CDB_OK) return rc;
    rc = cdb_eng_model_get(e, r->db, model_path, 0, 1, -1, &m);
    cdb_eng_reader_put(e, r);
    if (rc != CDB_OK) return rc;
    cdb_eng_bind_threads(e->p.model_threads);
    if ((rc = cdb_encode_texts(m->m, texts, 1, 1, out)) != CDB_OK)
        return cdb_eng_fail(rc, CDB_ENGINE_E_NONE, "cannot encode '%s'", text);
    return CDB_OK;
}

const char *cdb_eng_fmt_count(int64_t n, char *buf, size_t size) {
    char tmp[32], o[48];
    uint64_t u = n < 0 ? (uint64_t)(-(n + 1)) + 1 : (uint64_t)n;
    int len = snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)u), k = 0;
    if (n < 0) o[k++] = '-';
    for (int i = 0; i < len; i++) {
        if (i && (len - i) % 3 == 0) o[k++] = ',';
        o[k++] = tmp[i];
    }
    o[k] = '\0';
    snprintf(buf, size, "%s", o);
    return buf;
}

cdb_status cdb_engine_set_default_model(cdb_engine *e, const char *spec, cdb_engine_model *out) {
    cdb_db_model dm;
    cdb_db_counts c;
    cdb_model *m = NULL;
    cdb_status st;
    int64_t stale = 0, holes;
    char b[32], b2[32];
    cdb_eng_clear();
    if ((st = cdb_eng_writer(e, "making a model the default")) != CDB_OK) return st;
    if ((st = cdb_eng_find_db_model(e, e->db, spec, &dm)) != CDB_OK) return st;
    memset(&c, 0, sizeof c);
    if ((st = cdb_db_get_counts(e->db, dm.id, &c)) != CDB_OK ||
        (st = cdb_db_count_stale_claims(e->db, dm.id, &stale)) != CDB_OK)
        return cdb_eng_fail(st, CDB_ENGINE_E_NONE, "cannot count the vectors of '%s'", dm.name);
    /* the default answers every search: it must know every photo, as its shards say
    ** (not only the catalog: a hole left by an older clipdb is only seen there) */
    if ((holes = c.n_missing + stale) > 0)
        return cdb_eng_failw(CDB_INVALID, CDB_ENGINE_E_SET_INCOMPLETE, NULL,
                         "model '%s' has no vector yet for %s file%s (of %s)", dm.name,
                         cdb_eng_fmt_count(holes, b, sizeof b), holes == 1 ? "" : "s",
                         cdb_eng_fmt_count(c.files[CDB_DB_OK], b2, sizeof b2));
    /* searches encode texts with the default: it needs a text tower and a tokenizer */
    cdb_k_device dev = e->p.device;
    e->p.device.kind = CDB_K_DEVICE_CPU;
    e->p.device.index = 0;
    st = cdb_eng_load_db_model(e, e->db, &dm, 0, 1, 1, &m);
    e->p.device = dev;
    if (st != CDB_OK)
        return cdb_eng_failw(CDB_UNSUPPORTED, CDB_ENGINE_E_NO_TEXT, NULL,
                         "model '%s' cannot encode text (no text tower or tokenizer where it is "
                         "recorded): text searches would fail", dm.name);
    cdb_model_close(m);
    if ((st = cdb_db_model_set_default(e->db, dm.id)) != CDB_OK)
        return cdb_eng_fail(st, CDB_ENGINE_E_NONE, "cannot make '%s' the default", dm.name);
    dm.is_default = 1;
    if (out) cdb_eng_model_to_public(&dm, out);
    return CDB_OK;
}

/* ---- checking ingest PATHs --------------------------------------------------------------- */

void cdb_engine_paths_free(char **abs, int n) {
    for (int i = 0; abs && i < n; i++) free(abs[i]);
    free(abs);
}

cdb_status cdb_engine_check_paths(const char *const *paths, int n, char ***abs_out, int *is_file) {
    char **abs = calloc((size_t)(n > 0 ? n : 1), sizeof *abs);
    cdb_eng_clear();
    *abs_out = NULL;
    if (!abs) return cdb_eng_failw(CDB_NOMEM, CDB_ENGINE_E_NONE, "out of memory", "cannot ingest");
    for (int i = 0; i < n; i++) {
        char buf[PATH_MAX];
        struct stat sb;
        if (!realpath(paths[i], buf) || stat(buf, &sb) != 0) {
            int err = errno;
            cdb_engine_paths_free(abs, n);
            return cdb_eng_failw(CDB_NOTFOUND, CDB_ENGINE_E_PATH, strerror(err), "cannot ingest %s",
                             paths[i]);
        }
        if (!S_ISDIR(sb.st_mode) && !S_ISREG(sb.st_mode)) {
            cdb_engine_paths_free(abs, n);
            return cdb_eng_failw(CDB_INVALID, CDB_ENGINE_E_NONE, "not a folder or a regular file",
                             "cannot ingest %s", paths[i]);
        }
        is_file[i] = S_ISREG(sb.st_mode);
        if (is_file[i] &&
            !cdb_image_name_is_image(buf)) { /* a single file is recorded: one that is a photo */
            unsigned char head[32];
            FILE *f = fopen(buf, "rb");
            size_t k = f ? fread(head, 1, sizeof head, f) : 0;
            if (f) fclose(f);
            if (!cdb_image_sniff(head, k, 1)) {
                cdb_engine_paths_free(abs, n);
                return cdb_eng_failw(CDB_INVALID, CDB_ENGINE_E_NONE,
                                 "neither its name nor its first bytes are an image's",
                                 "cannot ingest %s", paths[i]);
            }
        }
        if (!(abs[i] = strdup(buf))) {
            cdb_engine_paths_free(abs, n);
            return cdb_eng_failw(CDB_NOMEM, CDB_ENGINE_E_NONE, "out of memory", "cannot ingest");
        }
    }
    *abs_out = abs;
    return CDB_OK;
}
