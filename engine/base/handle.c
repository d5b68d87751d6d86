/*
** handle.c: the engine handle (engine.h): opening a database as reader or writer, and
** the pool of reader handles that lets searches run on many threads at once.
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

#include "engine/base/base.h"

/* ---- params ------------------------------------------------------------------------------- */

cdb_engine_params cdb_engine_params_default(void) {
    return (cdb_engine_params){.device.kind = CDB_K_DEVICE_AUTO};
}

cdb_engine_run_params cdb_engine_run_params_default(void) {
    return (cdb_engine_run_params){.batch = 0, /* from the device's free memory, 32 on the CPU */
                                   .follow_symlinks = -1,
                                   .no_exif = -1,
                                   .decode = -1,
                                   .sample = CDB_ENGINE_DEEP_SAMPLE};
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

cdb_status cdb_eng_handle_open(const char *dir, const cdb_engine_params *p, cdb_engine **out) {
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
        cdb_eng_handle_close(e);
        return cdb_seterr(CDB_NOMEM, "out of memory");
    }
    e->p.fallback_model = e->fallback_model;
    if ((rc = open_db(dir, e->p.writer, e->p.lock_wait_ms, &e->db)) != CDB_OK) {
        cdb_engine_err code = cdb_engine_errcode();
        char msg[1100];
        snprintf(msg, sizeof msg, "%s", cdb_errmsg());
        e->db = NULL;
        cdb_eng_handle_close(e);
        cdb_seterr(rc, "%s", msg);
        return cdb_eng_code(rc, code);
    }
    *out = e;
    return CDB_OK;
}

void cdb_eng_handle_close(cdb_engine *e) {
    if (!e) return;
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
            return cdb_eng_fail(rc, cdb_engine_errcode(), "cannot open the database %s", e->dir);
        }
    }
    if (!r) {
        if (!(r = calloc(1, sizeof *r))) return cdb_seterr(CDB_NOMEM, "out of memory");
        if ((rc = reader_open(e, r)) != CDB_OK) {
            free(r);
            return cdb_eng_fail(rc, cdb_engine_errcode(), "cannot open the database %s", e->dir);
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
