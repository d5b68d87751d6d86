/*
** create.c: creating a database bound to a model (`clipdb init`), all or nothing.
**
** The catalog is built, the model recorded and the settings applied in a temporary
** folder beside the target (".<name>.clipdb-init-<pid>", same file system), which
** is then put in place by rename: a kill -9 or a full disk at any moment leaves
** either no database or a whole one, never a catalog without a model. Where the
** target does not exist or is an empty folder, the temporary folder replaces it
** (rename(2) replaces an empty directory atomically; the folder's mode is kept).
** Where it holds other files (the user's), only catalog.db is renamed into it, last,
** after the empty shards/ folder: a database exists exactly when catalog.db does,
** and nothing of the user's is touched. A temporary folder left by a killed init is
** removed by the next init of that target (only the names clipdb creates in it, and
** only when no running clipdb holds its writer lock).
*/
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/library/library.h"

/* What init finds at the target folder. */
typedef enum target_kind {
    TARGET_ABSENT, /* nothing there: the temporary folder is renamed into place */
    TARGET_EMPTY,  /* an empty folder: replaced by the temporary folder */
    TARGET_IN_USE  /* a folder with other files: catalog.db is moved into it */
} target_kind;

/* A write that failed: a full disk gets its own wording (and detail code). */
static cdb_status write_fail(cdb_status rc, const char *what, const char *dir) {
    if (cdb_eng_disk_full(rc))
        return cdb_eng_fail(rc, CDB_ENGINE_E_DISK_FULL, "%s %s: no space left on device", what,
                            dir);
    return cdb_eng_fail(rc, CDB_ENGINE_E_NONE, "%s %s", what, dir);
}

/* Makes the entries of folder path durable (a rename or a new name in it). */
static void sync_dir(const char *path) {
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return;
    if (fsync(fd) != 0) CDB_LOG_WARN("fsync %s: %s", path, strerror(errno));
    close(fd);
}

/* Splits dir into its parent folder and last name (trailing slashes dropped).
** Returns 0 when dir has no usable last name (e.g. "/"). */
static int split_path(const char *dir, char *parent, size_t psize, char *base, size_t bsize) {
    char tmp[PATH_MAX];
    size_t n = strlen(dir);
    const char *slash;
    if (n == 0 || n >= sizeof tmp) return 0;
    memcpy(tmp, dir, n + 1);
    while (n > 1 && tmp[n - 1] == '/') tmp[--n] = '\0';
    slash = strrchr(tmp, '/');
    if (!slash) {
        snprintf(parent, psize, ".");
        snprintf(base, bsize, "%s", tmp);
    } else {
        snprintf(parent, psize, "%.*s", slash == tmp ? 1 : (int)(slash - tmp), tmp);
        snprintf(base, bsize, "%s", slash + 1);
    }
    return *base && strcmp(base, ".") && strcmp(base, "..") && strlen(base) < NAME_MAX - 32;
}

/* Removes a temporary folder of an init: only the names clipdb creates in it. */
static void remove_temp(const char *tmp) {
    static const char *const files[] = {"catalog.db", "catalog.db-wal", "catalog.db-shm",
                                        "catalog.db-journal", "lock"};
    char p[2 * PATH_MAX];
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", tmp, files[i]);
        unlink(p);
    }
    snprintf(p, sizeof p, "%s/shards", tmp);
    rmdir(p);
    if (rmdir(tmp) != 0 && errno != ENOENT)
        CDB_LOG_WARN("init: could not remove the temporary folder %s: %s", tmp, strerror(errno));
}

/* Removes the temporary folders that killed inits of base left in parent (those whose
** writer lock no running process holds). */
static void remove_stale_temps(const char *parent, const char *base) {
    char prefix[NAME_MAX + 1], p[PATH_MAX + NAME_MAX + 2];
    size_t np;
    struct dirent *d;
    DIR *dh = opendir(parent);
    if (!dh) return;
    np = (size_t)snprintf(prefix, sizeof prefix, ".%s.clipdb-init-", base);
    while ((d = readdir(dh))) {
        int pid = 0, held = 0;
        if (strncmp(d->d_name, prefix, np)) continue;
        snprintf(p, sizeof p, "%s/%s", parent, d->d_name);
        cdb_db_lock_info(p, &pid, &held);
        if (held) continue;
        CDB_LOG_INFO("init: removing %s, left by an init that did not finish", p);
        remove_temp(p);
    }
    closedir(dh);
}

/* 1 when path is a folder with nothing in it. */
static int empty_folder(const char *path) {
    struct dirent *d;
    int n = 0;
    DIR *dh = opendir(path);
    if (!dh) return 0;
    while ((d = readdir(dh)))
        n += strcmp(d->d_name, ".") && strcmp(d->d_name, "..");
    closedir(dh);
    return n == 0;
}

/* What is at dir; CDB_INVALID (message set) when a database cannot be made there. */
static cdb_status look_at_target(const char *dir, target_kind *kind) {
    struct stat st;
    struct dirent *d;
    DIR *dh;
    *kind = TARGET_ABSENT;
    if (stat(dir, &st) != 0) {
        if (errno == ENOENT) return CDB_OK;
        return cdb_eng_failw(cdb_errno_status(errno), CDB_ENGINE_E_NONE, strerror(errno),
                             "cannot create a database at %s", dir);
    }
    if (!S_ISDIR(st.st_mode))
        return cdb_eng_failw(CDB_INVALID, CDB_ENGINE_E_NONE, "it is a file: a database is a folder",
                             "cannot create a database at %s", dir);
    if (!(dh = opendir(dir)))
        return cdb_eng_failw(cdb_errno_status(errno), CDB_ENGINE_E_NONE, strerror(errno),
                             "cannot create a database at %s", dir);
    *kind = TARGET_EMPTY;
    while ((d = readdir(dh))) {
        char p[PATH_MAX + NAME_MAX + 2];
        if (!strcmp(d->d_name, ".") || !strcmp(d->d_name, "..")) continue;
        *kind = TARGET_IN_USE;
        if (!cdb_db_owns_name(d->d_name)) continue;
        /* a name the database uses: only an empty shards/ folder or a lock file (what
        ** an init or an open of an older clipdb leaves), and the parts and job scripts
        ** of `slurm ingest` (which the merge makes the database beside) can stay */
        snprintf(p, sizeof p, "%s/%s", dir, d->d_name);
        if (!strcmp(d->d_name, "lock") || (!strcmp(d->d_name, "shards") && empty_folder(p)) ||
            !strcmp(d->d_name, "parts") || !strcmp(d->d_name, "slurm"))
            continue;
        closedir(dh);
        return cdb_eng_failw(CDB_INVALID, CDB_ENGINE_E_NONE, NULL,
                             "cannot create a database at %s: it holds %s, a name the database "
                             "would use (move it away first)",
                             dir, d->d_name);
    }
    closedir(dh);
    return CDB_OK;
}

/* Records the model and the settings in the new catalog at tmp. */
/* What goes into a new catalog: its models and settings (the writer db, opened on the
** temporary folder); *model_id: the default model's. */
typedef cdb_status (*fill_fn)(cdb_db *db, void *ud, int64_t *model_id);

typedef struct model_fill {
    const char *model_path;
    cdb_model *m;
    const cdb_engine_create_params *cp;
} model_fill;

/* The model at model_path, the settings of cp. */
static cdb_status fill_model(cdb_db *db, void *ud, int64_t *model_id) {
    const model_fill *f = ud;
    const cdb_model_info *mi = cdb_model_get_info(f->m);
    char *info = cdb_eng_model_info_json(f->model_path, f->m);
    cdb_status rc = info ? CDB_OK : cdb_seterr(CDB_NOMEM, "out of memory");
    if (rc == CDB_OK)
        rc = cdb_db_model_register(db, mi->hash, mi->name, mi->embed_dim, info, model_id);
    if (rc == CDB_OK) rc = cdb_db_model_set_default(db, *model_id);
    if (rc == CDB_OK && f->cp && f->cp->thumb_size != CDB_ENGINE_THUMB_DEFAULT)
        rc = cdb_db_set_thumb_size(db, f->cp->thumb_size);
    if (rc == CDB_OK && f->cp && f->cp->max_pixels > 0)
        rc = cdb_db_set_max_pixels(db, f->cp->max_pixels, 0, NULL);
    free(info);
    return rc;
}

typedef struct like_fill {
    cdb_db *src, *db;
    int64_t default_id; /* the new catalog's default model */
    int want_default;   /* registering the default (1), then the others (0) */
    cdb_status rc;
} like_fill;

cdb_status cdb_eng_model_copy(cdb_db *from, const cdb_db_model *dm, cdb_db *to, int64_t *id) {
    char *info = NULL;
    cdb_db_model had;
    cdb_status rc = cdb_db_model_find(to, dm->weights_hash, &had);
    if (rc == CDB_OK) {
        *id = had.id;
        return CDB_OK;
    }
    if (rc != CDB_NOTFOUND) return rc;
    cdb_clearerr();
    rc = cdb_db_model_info(from, dm->id, &info);
    if (rc == CDB_OK) rc = cdb_db_model_register(to, dm->weights_hash, dm->name, dm->dim, info, id);
    if (rc == CDB_OK) rc = cdb_db_model_set_decode(to, *id, dm->decode, dm->decode_settled);
    cdb_free(info);
    return rc;
}

static int copy_model(const cdb_db_model *dm, void *ud_) {
    like_fill *f = ud_;
    int64_t id = 0;
    if (dm->is_default != f->want_default) return 0;
    f->rc = cdb_eng_model_copy(f->src, dm, f->db, &id);
    if (f->rc == CDB_OK && dm->is_default) f->default_id = id;
    return f->rc != CDB_OK;
}

/* The models (the default first) and settings of the database src. */
static cdb_status fill_like(cdb_db *db, void *ud, int64_t *model_id) {
    like_fill f = {ud, db, 0, 1, CDB_OK};
    int px = 0;
    int64_t max_px = 0;
    cdb_status rc = CDB_OK;
    for (f.want_default = 1; f.want_default >= 0 && rc == CDB_OK; f.want_default--) {
        rc = cdb_db_models_foreach(f.src, copy_model, &f);
        if (rc == CDB_OK) rc = f.rc;
    }
    if (rc == CDB_OK && !f.default_id)
        rc = cdb_seterr(CDB_NOTFOUND, "%s has no model", cdb_db_dir(f.src));
    if (rc == CDB_OK) rc = cdb_db_model_set_default(db, *model_id = f.default_id);
    if (rc == CDB_OK) rc = cdb_db_thumb_size(f.src, &px);
    if (rc == CDB_OK) rc = cdb_db_set_thumb_size(db, px);
    if (rc == CDB_OK) rc = cdb_db_max_pixels(f.src, &max_px);
    if (rc == CDB_OK && max_px > 0) rc = cdb_db_set_max_pixels(db, max_px, 0, NULL);
    return rc;
}

static cdb_status build_catalog(const char *tmp, fill_fn fill, void *ud, int64_t *model_id) {
    cdb_db *db = NULL;
    cdb_db_params p = cdb_db_params_default();
    cdb_status rc;
    p.create = 1;
    p.sync = CDB_DB_SYNC_FULL; /* durable before it is renamed into place */
    if ((rc = cdb_db_open(tmp, &p, &db)) != CDB_OK) return rc;
    rc = fill(db, ud, model_id);
    if (rc == CDB_OK) rc = cdb_db_flush(db);
    cdb_db_close(db);
    return rc;
}

/* Puts the finished temporary folder tmp in place at dir. */
static cdb_status install(const char *tmp, const char *dir, const char *parent, target_kind kind) {
    char from[2 * PATH_MAX], to[2 * PATH_MAX];
    struct stat st;
    if (kind != TARGET_IN_USE) {
        if (kind == TARGET_EMPTY && stat(dir, &st) == 0) chmod(tmp, st.st_mode & 07777);
        if (rename(tmp, dir) != 0)
            return cdb_seterr(cdb_errno_status(errno), "rename %s to %s: %s", tmp, dir,
                              strerror(errno));
        sync_dir(parent);
        return CDB_OK;
    }
    snprintf(to, sizeof to, "%s/shards", dir);
    if (mkdir(to, 0755) != 0 && errno != EEXIST)
        return cdb_seterr(cdb_errno_status(errno), "mkdir %s: %s", to, strerror(errno));
    snprintf(from, sizeof from, "%s/catalog.db", tmp);
    snprintf(to, sizeof to, "%s/catalog.db", dir);
    if (rename(from, to) != 0)
        return cdb_seterr(cdb_errno_status(errno), "rename %s to %s: %s", from, to,
                          strerror(errno));
    sync_dir(dir);
    remove_temp(tmp);
    return CDB_OK;
}

cdb_engine_create_params cdb_engine_create_params_default(void) {
    return (cdb_engine_create_params){.thumb_size = CDB_ENGINE_THUMB_DEFAULT};
}

cdb_status cdb_engine_create(const char *dir, const char *model_path, cdb_engine_create_info *out) {
    return cdb_engine_create_with(dir, model_path, NULL, out);
}

/* Creates the database at dir (all or nothing: the top of the file) with what fill
** puts in its catalog. */
static cdb_status create_at(const char *dir, fill_fn fill, void *ud, int64_t *model_id) {
    char probe[PATH_MAX + 16], parent[PATH_MAX], base[NAME_MAX + 1], tmp[PATH_MAX + NAME_MAX];
    struct stat st;
    target_kind kind;
    cdb_status rc;
    snprintf(probe, sizeof probe, "%s/catalog.db", dir);
    if (stat(probe, &st) == 0)
        return cdb_eng_failw(CDB_INVALID, CDB_ENGINE_E_EXISTS, "it would be replaced",
                             "a database already exists at %s", dir);
    if (!split_path(dir, parent, sizeof parent, base, sizeof base))
        return cdb_eng_failw(CDB_INVALID, CDB_ENGINE_E_NONE, "not a folder name",
                             "cannot create a database at %s", dir);
    if ((rc = look_at_target(dir, &kind)) != CDB_OK) return rc;
    remove_stale_temps(parent, base);
    snprintf(tmp, sizeof tmp, "%s/.%s.clipdb-init-%d", parent, base, (int)getpid());
    rc = build_catalog(tmp, fill, ud, model_id);
    if (rc == CDB_OK) rc = install(tmp, dir, parent, kind);
    if (rc != CDB_OK) {
        remove_temp(tmp);
        write_fail(rc, "cannot create a database at", dir);
    }
    return rc;
}

cdb_status cdb_engine_create_with(const char *dir, const char *model_path,
                                  const cdb_engine_create_params *cp,
                                  cdb_engine_create_info *out) {
    cdb_model *m = NULL;
    cdb_model_params mp = cdb_model_params_default();
    cdb_status rc;
    int64_t model_id = 0;
    char probe[PATH_MAX + 16];
    struct stat st;
    cdb_eng_clear();
    snprintf(probe, sizeof probe, "%s/catalog.db", dir);
    if (stat(probe, &st) == 0) /* before the model is loaded */
        return cdb_eng_failw(CDB_INVALID, CDB_ENGINE_E_EXISTS, "it would be replaced",
                             "a database already exists at %s", dir);
    mp.load_vision = 0; /* only the identity and sizes are needed */
    if ((rc = cdb_model_open(model_path, &mp, &m)) != CDB_OK)
        return cdb_eng_fail(rc, CDB_ENGINE_E_MODEL_LOAD, "cannot load the model %s", model_path);
    model_fill f = {model_path, m, cp};
    rc = create_at(dir, fill_model, &f, &model_id);
    if (rc == CDB_OK && out) {
        const cdb_model_info *mi = cdb_model_get_info(m);
        memset(out, 0, sizeof *out);
        snprintf(out->model_name, sizeof out->model_name, "%s", mi->name);
        out->dim = mi->embed_dim;
        out->model_id = model_id;
        out->has_tower = mi->has_text;
        out->text = mi->has_text && cdb_model_tokenizer(m) != NULL;
    }
    cdb_model_close(m);
    return rc;
}

cdb_status cdb_engine_create_like(const char *dir, const char *src_dir) {
    cdb_db_params p = cdb_db_params_default();
    cdb_db *src = NULL;
    int64_t model_id = 0;
    cdb_status rc;
    cdb_eng_clear();
    p.readonly = 1;
    if ((rc = cdb_db_open(src_dir, &p, &src)) != CDB_OK)
        return cdb_eng_fail(rc, rc == CDB_NOTFOUND ? CDB_ENGINE_E_NO_DATABASE : CDB_ENGINE_E_NONE,
                            "cannot open the database %s", src_dir);
    rc = create_at(dir, fill_like, src, &model_id);
    cdb_db_close(src);
    return rc;
}
