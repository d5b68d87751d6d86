/*
** session.c: what most database commands do first: open the database (writer or
** reader, with the right error and hint for each failure: no database here, held
** by another writer, written by a newer clipdb, ...) and find the model to use.
**
** A database remembers its models by weights hash; at registration the CLI stores
** an info JSON with the model's absolute path ("path"), so later commands can load
** the database's default model without --model. If that path no longer holds the
** same weights, the bundled/CLIPDB_MODEL model is tried, and the hash decides.
** The info also holds the weights files' stat key ("files_key"): while the files
** at "path" keep it, the recorded hash is trusted and the weights are not reread.
*/
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"

#if CDB_CLI_HAVE_DB
#include <jansson.h>

#include "db/db.h"
#if CDB_CLI_HAVE_ENCODER
#include "encoder/encoder.h"
#endif

int cli_open_db(const char *flag_db, int writer, int wait, struct cdb_db **out) {
    const char *src;
    const char *dir = cli_db_path(flag_db, &src);
    cdb_db_params p = cdb_db_params_default();
    cdb_status rc;
    *out = NULL;
    p.readonly = !writer;
    p.lock_wait_ms = wait ? -1 : 0;
    rc = cdb_db_open(dir, &p, out);
    if (rc == CDB_OK) return CLI_EXIT_OK;
    if (rc == CDB_NOTFOUND) {
        cli_error(strcmp(src, "default") ? src : "the default is ./clipdb",
                  "no database at %s", dir);
        cli_hint("run 'clipdb init%s%s' to create one, or pass --db DIR",
                 strcmp(src, "default") ? " --db " : "", strcmp(src, "default") ? dir : "");
        return CLI_EXIT_FAIL;
    }
    if (rc == CDB_BUSY) {
        int pid = 0, held = 0;
        cdb_db_lock_info(dir, &pid, &held);
        cli_error_status(rc, "the database %s is being written by another clipdb", dir);
        if (pid) cli_hint("process %d holds the lock; pass --wait to wait for it", pid);
        else cli_hint("pass --wait to wait for the other writer");
        return CLI_EXIT_FAIL;
    }
    if (rc == CDB_VERSION) {
        cli_error_status(rc, "cannot open the database %s", dir);
        cli_hint("it was written by a newer clipdb (or needs an upgrade a writer does first)");
        return CLI_EXIT_FAIL;
    }
    return cli_error_status(rc, "cannot open the database %s", dir);
}

#if CDB_CLI_HAVE_ENCODER

char *cli_model_info_json(const char *path, const struct cdb_model *m) {
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
    json_object_set_new(o, "weights_dtype", json_string(mi->weights_dtype ? mi->weights_dtype : ""));
    s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(o);
    return s; /* free() */
}

static int g_model_threads; /* 0: the encoder's default */

void cli_set_model_threads(int n) { g_model_threads = n; }

/* known_hash/known_key: the identity recorded with the database's model and the
** weights files' key recorded with it (NULL: hash the weights). */
static cdb_model *try_open(const char *path, int vision, int text, int device,
                           const char *known_hash, const char *known_key) {
    cdb_model_params mp = cdb_model_params_default();
    cdb_model *m = NULL;
    mp.known_hash = known_hash;
    mp.known_files_key = known_key;
    mp.n_threads = g_model_threads;
    mp.load_vision = vision;
    mp.load_text = text;
    mp.device = (cdb_device_kind)device;
    if (cdb_model_open(path, &mp, &m) != CDB_OK) return NULL;
    return m;
}

int cli_load_db_model(struct cdb_db *db, const cdb_db_model *dm, int vision, int text, int device,
                      int quiet, struct cdb_model **out) {
    char *info = NULL;
    const char *path = NULL, *src, *key = NULL;
    json_t *root = NULL;
    cdb_model *m = NULL;
    *out = NULL;
    if (cdb_db_model_info(db, dm->id, &info) == CDB_OK && info) {
        root = json_loads(info, 0, NULL);
        path = json_string_value(json_object_get(root, "path"));
        key = json_string_value(json_object_get(root, "files_key"));
    }
    /* Unchanged files (same key as at registration) need no rehash. */
    if (path) m = try_open(path, vision, text, device, dm->weights_hash, key);
    if (m && strcmp(cdb_model_get_info(m)->hash, dm->weights_hash)) {
        cdb_model_close(m);
        m = NULL;
    }
    if (!m) { /* the recorded path moved: try CLIPDB_MODEL / the bundled model */
        const char *alt = cli_model_path(NULL, &src);
        if (alt) m = try_open(alt, vision, text, device, NULL, NULL);
        if (m && strcmp(cdb_model_get_info(m)->hash, dm->weights_hash)) {
            cdb_model_close(m);
            m = NULL;
        }
    }
    if (!m && !quiet) {
        cli_error(path ? path : "no path recorded",
                  "cannot find the database's model '%s' (weights %s)", dm->name,
                  dm->weights_hash);
        cli_hint("pass --model PATH (the same weights the database was created with)");
    }
    json_decref(root);
    cdb_free(info);
    if (!m) return CLI_EXIT_FAIL;
    *out = m;
    return CLI_EXIT_OK;
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

int cli_find_db_model(struct cdb_db *db, const char *spec, cdb_db_model *out) {
    model_match ud;
    struct stat sb;
    cdb_status st;
    memset(&ud, 0, sizeof ud);
    ud.spec = spec;
    if ((st = cdb_db_models_foreach(db, match_model, &ud)) != CDB_OK)
        return cli_error_status(st, "cannot list the database's models");
    if (ud.n == 1) {
        *out = ud.found;
        return CLI_EXIT_OK;
    }
    if (ud.n > 1) {
        cli_error("several models match", "model '%s' is ambiguous", spec);
        cli_hint("name it by its number or full hash ('clipdb stats' lists them)");
        return CLI_EXIT_FAIL;
    }
    if (stat(spec, &sb) == 0) { /* a model folder or file: its weights hash decides */
        cdb_model *m = NULL;
        int64_t id = 0;
        int rc = cli_db_model(db, spec, 0, 1, 1, 0, &m, &id, NULL);
        cdb_model_close(m);
        if (rc != CLI_EXIT_OK) return rc;
        if ((st = cdb_db_model_get(db, id, out)) != CDB_OK)
            return cli_error_status(st, "cannot read the model record");
        return CLI_EXIT_OK;
    }
    cli_error("no model of this database has that number, name or hash", "unknown model '%s'",
              spec);
    cli_hint("'clipdb stats' lists the database's models");
    return CLI_EXIT_FAIL;
}

int cli_db_model(struct cdb_db *db, const char *model_flag, int vision, int text, int device,
                 int register_it, struct cdb_model **out, int64_t *model_id, int *is_default) {
    cdb_db_model dm, def;
    cdb_status rc;
    cdb_model *m = NULL;
    int have_def;
    *out = NULL;
    have_def = cdb_db_model_default(db, &def) == CDB_OK;
    if (model_flag && *model_flag) {
        const cdb_model_info *mi;
        cdb_model_params mp = cdb_model_params_default();
        mp.n_threads = g_model_threads;
        mp.load_vision = vision;
        mp.load_text = text;
        mp.device = (cdb_device_kind)device;
        if ((rc = cdb_model_open(model_flag, &mp, &m)) != CDB_OK)
            return cli_error_status(rc, "cannot load the model %s", model_flag);
        mi = cdb_model_get_info(m);
        rc = cdb_db_model_find(db, mi->hash, &dm);
        if (rc == CDB_NOTFOUND && register_it) {
            char *info = cli_model_info_json(model_flag, m);
            rc = cdb_db_model_register(db, mi->hash, mi->name ? mi->name : "", mi->embed_dim,
                                       info, &dm.id);
            free(info);
            if (rc == CDB_OK) rc = cdb_db_model_get(db, dm.id, &dm);
        }
        if (rc == CDB_NOTFOUND) {
            cdb_model_close(m);
            cli_error("this database has no vectors from it", "model %s is not in the database",
                      model_flag);
            cli_hint("run 'clipdb ingest --model %s PATH...' first, or drop --model", model_flag);
            return CLI_EXIT_FAIL;
        }
        if (rc != CDB_OK) {
            cdb_model_close(m);
            return cli_error_status(rc, "cannot register the model %s", model_flag);
        }
    } else {
        int rc2;
        if (!have_def) {
            cli_error("it has no model", "the database is not initialized");
            cli_hint("run 'clipdb init' (it binds the database to a model)");
            return CLI_EXIT_FAIL;
        }
        dm = def;
        if ((rc2 = cli_load_db_model(db, &def, vision, text, device, 0, &m)) != CLI_EXIT_OK)
            return rc2;
    }
    *out = m;
    if (model_id) *model_id = dm.id;
    if (is_default) *is_default = have_def ? dm.id == def.id : 1;
    return CLI_EXIT_OK;
}

#endif /* CDB_CLI_HAVE_ENCODER */
#endif /* CDB_CLI_HAVE_DB */
