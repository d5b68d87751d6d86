/*
** models.c: the models a handle has loaded, and finding and loading a database's models.
**
** A database remembers its models by weights hash; at registration the info
** JSON stores the model's absolute path ("path"), so later runs load the default
** model without being told where it is. If that path no longer holds the same
** weights, the caller's fallback model (the CLI: $CLIPDB_MODEL or the bundled one)
** is tried, and the hash decides. The info also holds the weights files' stat key
** ("files_key"): while the files at "path" keep it, the recorded hash is trusted and
** the weights are not read again to hash them.
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

#include "engine/base/base.h"

/* ---- models ------------------------------------------------------------------------------ */

/* A model slot's text batcher (the batching: search/textbatch.c). */
void cdb_eng_textbatch_init(eng_textbatch *tb, int max_batches) {
    memset(tb, 0, sizeof *tb);
    pthread_mutex_init(&tb->mu, NULL);
    pthread_cond_init(&tb->cv, NULL);
    tb->tail = &tb->head;
    tb->max_leaders = max_batches > 0 ? max_batches : cdb_default_threads();
    if (tb->max_leaders < 1) tb->max_leaders = 1;
}

void cdb_eng_textbatch_destroy(eng_textbatch *tb) {
    pthread_cond_destroy(&tb->cv);
    pthread_mutex_destroy(&tb->mu);
}

void cdb_eng_models_free(cdb_engine *e) {
    for (eng_model *m = e->models, *next; m; m = next) {
        next = m->next;
        cdb_model_close(m->m);
        pthread_mutex_destroy(&m->encode_mu);
        cdb_eng_textbatch_destroy(&m->tbatch);
        free(m->spec);
        free(m);
    }
    e->models = NULL;
}

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
