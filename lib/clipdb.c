/*
** clipdb.c: the public API (clipdb.h) as a thin layer over engine/engine.h (databases)
** and encoder/encoder.h (models). It owns no logic of its own: it turns opaque
** parameter objects into the engine's structs, copies results into opaque objects
** with getters, and keeps one rule for errors (the status, and cdb_errmsg's sentence).
** Only the functions marked CLIPDB_API in clipdb.h are exported from libclipdb.so
** (lib/clipdb.map and -fvisibility=hidden).
*/
#include "lib/clipdb.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "encoder/encoder.h"
#include "engine/engine.h"
#include "kernels/kernels.h"

/* clipdb_status mirrors cdb_status value for value: a status passes through as it is. */
#define SAME_STATUS(pub, internal) _Static_assert((int)(pub) == (int)(internal), #pub);
SAME_STATUS(CLIPDB_OK, CDB_OK)
SAME_STATUS(CLIPDB_ERROR, CDB_ERROR)
SAME_STATUS(CLIPDB_NOMEM, CDB_NOMEM)
SAME_STATUS(CLIPDB_IO, CDB_IO)
SAME_STATUS(CLIPDB_CORRUPT, CDB_CORRUPT)
SAME_STATUS(CLIPDB_INVALID, CDB_INVALID)
SAME_STATUS(CLIPDB_NOTFOUND, CDB_NOTFOUND)
SAME_STATUS(CLIPDB_DIM_MISMATCH, CDB_DIM_MISMATCH)
SAME_STATUS(CLIPDB_UNSUPPORTED, CDB_UNSUPPORTED)
SAME_STATUS(CLIPDB_DEVICE, CDB_DEVICE)
SAME_STATUS(CLIPDB_BUSY, CDB_BUSY)
SAME_STATUS(CLIPDB_TOO_LARGE, CDB_TOO_LARGE)
SAME_STATUS(CLIPDB_INTERRUPTED, CDB_INTERRUPTED)
SAME_STATUS(CLIPDB_NOSPACE, CDB_NOSPACE)
SAME_STATUS(CLIPDB_VERSION, CDB_VERSION)
_Static_assert(CLIPDB_VERSION_NUMBER == CDB_VERSION_NUMBER,
               "clipdb.h's version is core.h's (CMakeLists.txt's project version)");

#define PUB(st) ((clipdb_status)(st))

/* Makes this thread's message (a lower layer's) the why of "<what> (<why>)", what
** formatted from fmt, naming each thing once (cdb_err_unsaid); returns rc. */
static cdb_status CDB_PRINTF(2, 3) restate(cdb_status rc, const char *fmt, ...) {
    char what[1200], why[1200];
    va_list ap;
    snprintf(why, sizeof why, "%s", cdb_errmsg());
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (!*why) return cdb_seterr(rc, "%s", what);
    return cdb_seterr(rc, "%s (%s)", what, cdb_err_unsaid(what, why));
}

const char *clipdb_version(void) { return cdb_libversion(); }
int clipdb_version_number(void) { return cdb_libversion_number(); }
const char *clipdb_status_str(clipdb_status st) { return cdb_status_str((cdb_status)st); }
const char *clipdb_errmsg(void) { return cdb_errmsg(); }

/* ---- options ------------------------------------------------------------------------ */

struct clipdb_options {
    cdb_k_device device;
    int threads;
    int lock_wait_ms;
};

/* The defaults clipdb_options_new documents (also what a NULL options pointer means). */
static clipdb_options options_default(void) {
    clipdb_options o;
    memset(&o, 0, sizeof o);
    cdb_k_device_parse("auto", &o.device);
    return o;
}

clipdb_options *clipdb_options_new(void) {
    clipdb_options *o = malloc(sizeof *o);
    if (o) *o = options_default();
    return o;
}

void clipdb_options_free(clipdb_options *o) { free(o); }

clipdb_status clipdb_options_set_device(clipdb_options *o, const char *device) {
    if (!o || !device) return PUB(cdb_seterr(CDB_INVALID, "set_device: no options or device"));
    return PUB(cdb_k_device_parse(device, &o->device));
}

clipdb_status clipdb_options_set_threads(clipdb_options *o, int threads) {
    if (!o || threads < 0)
        return PUB(cdb_seterr(CDB_INVALID, "set_threads: %d threads (0 or more)", threads));
    o->threads = threads;
    return CLIPDB_OK;
}

clipdb_status clipdb_options_set_lock_wait_ms(clipdb_options *o, int ms) {
    if (!o || ms < -1)
        return PUB(cdb_seterr(CDB_INVALID, "set_lock_wait_ms: %d (-1, 0 or more)", ms));
    o->lock_wait_ms = ms;
    return CLIPDB_OK;
}

/* ---- databases ----------------------------------------------------------------------- */

struct clipdb {
    char *dir;
    clipdb_options opt;
    cdb_engine *rd; /* searches */
    cdb_engine *wr; /* ingest and reindex; opened by the first of them */
    /* The run in flight (exclusive use of the handle): its callback and whether it
    ** asked to stop. */
    clipdb_progress_fn progress;
    void *progress_ud;
    int stop;
};

clipdb_status clipdb_create(const char *dir, const char *model_path) {
    if (!dir || !*dir || !model_path || !*model_path)
        return PUB(cdb_seterr(CDB_INVALID, "clipdb_create needs a folder and a model path"));
    return PUB(cdb_engine_create(dir, model_path, NULL));
}

static void on_progress(void *ud, const cdb_engine_progress *p) {
    clipdb *db = ud;
    if (db->progress && p->phase != CDB_ENGINE_PROGRESS_END &&
        db->progress(db->progress_ud, p->label, p->done, p->total, p->errors))
        db->stop = 1;
}

static int on_should_stop(void *ud) { return ((clipdb *)ud)->stop; }

/* Opens db->dir as a reader or as the writer, the engine's message made a sentence
** that names the folder. */
static cdb_status engine_open(clipdb *db, int writer, cdb_engine **out) {
    cdb_engine_params p = cdb_engine_params_default();
    cdb_status rc;
    p.writer = writer;
    p.lock_wait_ms = db->opt.lock_wait_ms;
    p.device = db->opt.device;
    p.model_threads = db->opt.threads;
    p.events.progress = on_progress;
    p.events.should_stop = on_should_stop;
    p.events.ud = db;
    if ((rc = cdb_engine_open(db->dir, &p, out)) == CDB_OK) return rc;
    if (rc == CDB_NOTFOUND) return restate(rc, "no database at %s", db->dir);
    if (rc == CDB_BUSY)
        return restate(rc, "the database %s is being written by another process", db->dir);
    return restate(rc, "cannot open the database %s", db->dir);
}

clipdb_status clipdb_open(const char *dir, const clipdb_options *o, clipdb **out) {
    clipdb *db;
    cdb_status rc;
    if (!out) return PUB(cdb_seterr(CDB_INVALID, "clipdb_open: no place for the handle"));
    *out = NULL;
    if (!dir || !*dir) return PUB(cdb_seterr(CDB_INVALID, "clipdb_open: no folder given"));
    if (!(db = calloc(1, sizeof *db)) || !(db->dir = strdup(dir))) {
        free(db);
        return PUB(cdb_seterr(CDB_NOMEM, "cannot open the database %s (out of memory)", dir));
    }
    db->opt = o ? *o : options_default();
    if ((rc = engine_open(db, 0, &db->rd)) != CDB_OK) {
        clipdb_close(db);
        return PUB(rc);
    }
    *out = db;
    return CLIPDB_OK;
}

void clipdb_close(clipdb *db) {
    if (!db) return;
    cdb_engine_close(db->wr);
    cdb_engine_close(db->rd);
    free(db->dir);
    free(db);
}

/* ---- ingest and reindex ------------------------------------------------------------ */

struct clipdb_report {
    cdb_engine_run_report r;
};

int64_t clipdb_report_get(const clipdb_report *rep, clipdb_report_field f) {
    const cdb_engine_summary *s;
    if (!rep) return 0;
    if (f == CLIPDB_REPORT_PARTIAL) return rep->r.partial;
    if (f == CLIPDB_REPORT_INTERRUPTED) return rep->r.interrupted;
    if (!rep->r.n_sets) return 0;
    s = &rep->r.sets[0].sum;
    switch (f) {
    case CLIPDB_REPORT_FOUND: return s->found;
    case CLIPDB_REPORT_ADDED: return s->added;
    case CLIPDB_REPORT_CHANGED: return s->changed;
    case CLIPDB_REPORT_UNCHANGED: return s->unchanged;
    case CLIPDB_REPORT_MOVED: return s->moved;
    case CLIPDB_REPORT_DELETED: return s->deleted;
    case CLIPDB_REPORT_ERRORS: return s->errors;
    case CLIPDB_REPORT_RETRY: return s->retry;
    case CLIPDB_REPORT_SKIPPED: return s->skipped;
    default: return 0;
    }
}

void clipdb_report_free(clipdb_report *r) { free(r); }

/* Runs an ingest (paths given) or a reindex (paths NULL) on the writer handle, opened
** first when this is the handle's first run. *report as clipdb_ingest says. */
static cdb_status run(clipdb *db, char **paths, int n, clipdb_progress_fn progress, void *ud,
                      clipdb_report **report) {
    cdb_engine_run_params rp = cdb_engine_run_params_default();
    clipdb_report *rep;
    cdb_status rc;
    if (!db->wr && (rc = engine_open(db, 1, &db->wr)) != CDB_OK) return rc;
    if (!(rep = calloc(1, sizeof *rep)))
        return cdb_seterr(CDB_NOMEM, "cannot run on %s (out of memory)", db->dir);
    db->progress = progress;
    db->progress_ud = ud;
    db->stop = 0;
    rc = paths ? cdb_engine_ingest(db->wr, (const char *const *)paths, n, &rp, &rep->r)
               : cdb_engine_reindex(db->wr, &rp, &rep->r);
    db->progress = NULL;
    db->progress_ud = NULL;
    if (report && (rc == CDB_OK || rep->r.started)) *report = rep;
    else free(rep);
    return rc;
}

clipdb_status clipdb_ingest(clipdb *db, const char *const *paths, int n,
                            clipdb_progress_fn progress, void *ud, clipdb_report **report) {
    char **abs = NULL;
    int *is_file;
    cdb_status rc;
    if (report) *report = NULL;
    if (!db || !paths || n <= 0)
        return PUB(cdb_seterr(CDB_INVALID, "clipdb_ingest: no database or no paths"));
    if (!(is_file = calloc((size_t)n, sizeof *is_file)))
        return PUB(cdb_seterr(CDB_NOMEM, "cannot ingest (out of memory)"));
    rc = cdb_engine_check_paths(paths, n, &abs, is_file);
    free(is_file);
    if (rc != CDB_OK) return PUB(rc);
    rc = run(db, abs, n, progress, ud, report);
    cdb_engine_paths_free(abs, n);
    return PUB(rc);
}

clipdb_status clipdb_reindex(clipdb *db, clipdb_progress_fn progress, void *ud,
                             clipdb_report **report) {
    if (report) *report = NULL;
    if (!db) return PUB(cdb_seterr(CDB_INVALID, "clipdb_reindex: no database"));
    return PUB(run(db, NULL, 0, progress, ud, report));
}

/* ---- the index ---------------------------------------------------------------------- */

struct clipdb_index_params {
    cdb_engine_index_params p;
};

clipdb_index_params *clipdb_index_params_new(void) {
    return calloc(1, sizeof(clipdb_index_params));
}

void clipdb_index_params_free(clipdb_index_params *p) { free(p); }

clipdb_status clipdb_index_params_set_type(clipdb_index_params *p, const char *type) {
    static const struct {
        const char *name;
        cdb_engine_index_kind kind;
    } types[] = {{"auto", CDB_ENGINE_INDEX_AUTO},
                 {"flat", CDB_ENGINE_INDEX_FLAT},
                 {"hnsw", CDB_ENGINE_INDEX_HNSW},
                 {"ivf-sq", CDB_ENGINE_INDEX_IVF_SQ},
                 {"ivf-pq", CDB_ENGINE_INDEX_IVF_PQ},
                 {"ivf-hnsw-pq", CDB_ENGINE_INDEX_IVF_HNSW_PQ}};
    for (size_t i = 0; p && type && i < sizeof types / sizeof *types; i++)
        if (!strcmp(type, types[i].name)) {
            p->p.kind = types[i].kind;
            return CLIPDB_OK;
        }
    return PUB(cdb_seterr(CDB_INVALID, "set_type: '%s' is not an index type (auto, flat, hnsw, "
                                       "ivf-sq, ivf-pq, ivf-hnsw-pq)", type ? type : "(null)"));
}

clipdb_status clipdb_index_params_set_on_disk(clipdb_index_params *p, int on_disk) {
    if (!p || (on_disk != 0 && on_disk != 1))
        return PUB(cdb_seterr(CDB_INVALID, "set_on_disk: %d (0 or 1)", on_disk));
    p->p.on_disk = on_disk;
    return CLIPDB_OK;
}

clipdb_status clipdb_index_build(clipdb *db, const clipdb_index_params *p) {
    cdb_engine_index_report r;
    if (!db) return PUB(cdb_seterr(CDB_INVALID, "clipdb_index_build: no database"));
    return PUB(cdb_engine_index_build(db->rd, NULL, p ? &p->p : NULL, &r));
}

/* ---- search ------------------------------------------------------------------------- */

struct clipdb_search_params {
    int k;
    double min_score;
    char **unders;
    int n_unders;
    char *taken_after, *taken_before, *camera, *near; /* heap; NULL: not set */
    int has_gps;
    cdb_engine_sort sort;
    int collapse;
};

clipdb_search_params *clipdb_search_params_new(void) {
    clipdb_search_params *p = calloc(1, sizeof *p);
    if (p) {
        p->k = 10;
        p->min_score = -1.0;
    }
    return p;
}

void clipdb_search_params_free(clipdb_search_params *p) {
    if (!p) return;
    for (int i = 0; i < p->n_unders; i++) free(p->unders[i]);
    free(p->unders);
    free(p->taken_after), free(p->taken_before), free(p->camera), free(p->near);
    free(p);
}

clipdb_status clipdb_search_params_set_k(clipdb_search_params *p, int k) {
    if (!p || k < 1) return PUB(cdb_seterr(CDB_INVALID, "set_k: k is %d (1 or more)", k));
    p->k = k;
    return CLIPDB_OK;
}

clipdb_status clipdb_search_params_set_min_score(clipdb_search_params *p, double min_score) {
    if (!p || !(min_score >= -1.0 && min_score <= 1.0))
        return PUB(cdb_seterr(CDB_INVALID, "set_min_score: %g is not in -1 .. 1", min_score));
    p->min_score = min_score;
    return CLIPDB_OK;
}

clipdb_status clipdb_search_params_add_under(clipdb_search_params *p, const char *path) {
    char **u;
    if (!p || !path || !*path) return PUB(cdb_seterr(CDB_INVALID, "add_under: no path"));
    if (!(u = realloc(p->unders, sizeof *u * (size_t)(p->n_unders + 1))))
        return PUB(cdb_seterr(CDB_NOMEM, "add_under: out of memory"));
    p->unders = u;
    if (!(u[p->n_unders] = strdup(path)))
        return PUB(cdb_seterr(CDB_NOMEM, "add_under: out of memory"));
    p->n_unders++;
    return CLIPDB_OK;
}

/* *dst = a copy of src (NULL or "": none). 0, or -1 when out of memory. */
static int set_text(char **dst, const char *src) {
    char *c = src && *src ? strdup(src) : NULL;
    if (src && *src && !c) return -1;
    free(*dst);
    *dst = c;
    return 0;
}

clipdb_status clipdb_search_params_set_filter(clipdb_search_params *p, const char *taken_after,
                                              const char *taken_before, const char *camera,
                                              const char *near, int has_gps) {
    if (!p) return PUB(cdb_seterr(CDB_INVALID, "set_filter: no parameters"));
    if (set_text(&p->taken_after, taken_after) || set_text(&p->taken_before, taken_before) ||
        set_text(&p->camera, camera) || set_text(&p->near, near))
        return PUB(cdb_seterr(CDB_NOMEM, "set_filter: out of memory"));
    p->has_gps = has_gps != 0;
    return CLIPDB_OK;
}

clipdb_status clipdb_search_params_set_sort(clipdb_search_params *p, const char *order) {
    static const char *const names[] = {"score", "time", "taken", "taken-asc"};
    static const cdb_engine_sort sorts[] = {CDB_ENGINE_SORT_SCORE, CDB_ENGINE_SORT_TIME,
                                            CDB_ENGINE_SORT_TAKEN, CDB_ENGINE_SORT_TAKEN_ASC};
    for (int i = 0; p && order && i < 4; i++)
        if (!strcmp(order, names[i])) {
            p->sort = sorts[i];
            return CLIPDB_OK;
        }
    return PUB(cdb_seterr(CDB_INVALID, "set_sort: '%s' is not score, time, taken or taken-asc",
                          order ? order : "(null)"));
}

clipdb_status clipdb_search_params_set_collapse(clipdb_search_params *p, int collapse) {
    if (!p) return PUB(cdb_seterr(CDB_INVALID, "set_collapse: no parameters"));
    p->collapse = collapse != 0;
    return CLIPDB_OK;
}

struct clipdb_hits {
    cdb_engine_result r;
};

/* The search of clipdb_search_text (n == 1) and clipdb_search_text_many, named `fn`
** in its messages. */
static clipdb_status search_text(const char *fn, clipdb *const *dbs, int n, const char *text,
                                 const clipdb_search_params *p, clipdb_hits **out) {
    static const clipdb_search_params defaults = {10, -1.0, NULL, 0, NULL, NULL, NULL, NULL,
                                                  0, CDB_ENGINE_SORT_SCORE, 0};
    cdb_engine_query q;
    cdb_engine_search_params sp = cdb_engine_search_params_default();
    cdb_engine_under *u = NULL;
    cdb_engine **es = NULL;
    char (*abs)[PATH_MAX] = NULL;
    clipdb_hits *h = NULL;
    cdb_status rc = CDB_OK;
    if (!out) return PUB(cdb_seterr(CDB_INVALID, "%s: no place for the hits", fn));
    *out = NULL;
    if (!dbs || n < 1 || !text)
        return PUB(cdb_seterr(CDB_INVALID, "%s: no database or text", fn));
    for (int i = 0; i < n; i++)
        if (!dbs[i]) return PUB(cdb_seterr(CDB_INVALID, "%s: database %d is NULL", fn, i));
    if (!p) p = &defaults;
    if (!(h = calloc(1, sizeof *h)) || !(es = calloc((size_t)n, sizeof *es)) ||
        (p->n_unders && (!(u = calloc((size_t)p->n_unders, sizeof *u)) ||
                         !(abs = calloc((size_t)p->n_unders, sizeof *abs))))) {
        rc = cdb_seterr(CDB_NOMEM, "cannot search (out of memory)");
        goto done;
    }
    for (int i = 0; i < p->n_unders; i++) { /* as `clipdb search --under` reads them */
        cdb_engine_under_resolve(p->unders[i], abs[i], PATH_MAX, &u[i].folder);
        u[i].path = abs[i];
    }
    for (int i = 0; i < n; i++) es[i] = dbs[i]->rd;
    memset(&q, 0, sizeof q);
    q.text = text;
    sp.k = p->k;
    sp.min_score = (float)p->min_score;
    sp.unders = u;
    sp.n_unders = p->n_unders;
    sp.taken_after = p->taken_after;
    sp.taken_before = p->taken_before;
    sp.camera = p->camera;
    sp.near = p->near;
    sp.has_gps = p->has_gps;
    sp.sort = p->sort;
    sp.collapse = p->collapse;
    if ((rc = n == 1 ? cdb_engine_search(es[0], &q, &sp, &h->r)
                     : cdb_engine_search_many(es, n, &q, &sp, &h->r)) == CDB_OK) {
        *out = h;
        h = NULL;
    }
done:
    free(h);
    free(es);
    free(u);
    free(abs);
    return PUB(rc);
}

clipdb_status clipdb_search_text(clipdb *db, const char *text, const clipdb_search_params *p,
                                 clipdb_hits **out) {
    return search_text("clipdb_search_text", &db, 1, text, p, out);
}

clipdb_status clipdb_search_text_many(clipdb *const *dbs, int n, const char *text,
                                      const clipdb_search_params *p, clipdb_hits **out) {
    return search_text("clipdb_search_text_many", dbs, n, text, p, out);
}

/* Hit i of h, or NULL when i is out of range. */
static const cdb_engine_hit *hit(const clipdb_hits *h, int i) {
    return h && i >= 0 && i < h->r.n ? &h->r.hits[i] : NULL;
}

int clipdb_hits_count(const clipdb_hits *h) { return h ? h->r.n : 0; }
int64_t clipdb_hits_id(const clipdb_hits *h, int i) { return hit(h, i) ? hit(h, i)->id : 0; }
const char *clipdb_hits_path(const clipdb_hits *h, int i) {
    return hit(h, i) ? hit(h, i)->path : NULL;
}
const char *clipdb_hits_taken(const clipdb_hits *h, int i) {
    return hit(h, i) ? hit(h, i)->photo.taken : NULL;
}
const char *clipdb_hits_taken_source(const clipdb_hits *h, int i) {
    return hit(h, i) ? hit(h, i)->photo.taken_source : NULL;
}
const char *clipdb_hits_make(const clipdb_hits *h, int i) {
    return hit(h, i) ? hit(h, i)->photo.make : NULL;
}
const char *clipdb_hits_model(const clipdb_hits *h, int i) {
    return hit(h, i) ? hit(h, i)->photo.model : NULL;
}
float clipdb_hits_score(const clipdb_hits *h, int i) { return hit(h, i) ? hit(h, i)->score : 0; }
int clipdb_hits_db(const clipdb_hits *h, int i) { return hit(h, i) ? hit(h, i)->db : -1; }
int clipdb_hits_width(const clipdb_hits *h, int i) { return hit(h, i) ? hit(h, i)->width : 0; }
int clipdb_hits_height(const clipdb_hits *h, int i) { return hit(h, i) ? hit(h, i)->height : 0; }

int clipdb_hits_copies(const clipdb_hits *h, int i) {
    return hit(h, i) ? hit(h, i)->n_copies : 0;
}
int64_t clipdb_hits_copy_id(const clipdb_hits *h, int i, int j) {
    const cdb_engine_hit *x = hit(h, i);
    return x && j >= 0 && j < x->n_copies ? x->copies[j] : 0;
}
int clipdb_hits_copy_db(const clipdb_hits *h, int i, int j) {
    const cdb_engine_hit *x = hit(h, i);
    if (!x || j < 0 || j >= x->n_copies) return -1;
    return x->copies_db ? x->copies_db[j] : x->db;
}

void clipdb_hits_free(clipdb_hits *h) {
    if (!h) return;
    cdb_engine_result_free(&h->r);
    free(h);
}

/* ---- models ------------------------------------------------------------------------ */

struct clipdb_model {
    cdb_model *m;
};

clipdb_status clipdb_model_open(const char *path, const clipdb_options *o, clipdb_model **out) {
    clipdb_options opt = o ? *o : options_default();
    cdb_model_params mp = cdb_model_params_default();
    clipdb_model *cm;
    cdb_status rc;
    if (!out) return PUB(cdb_seterr(CDB_INVALID, "clipdb_model_open: no place for the model"));
    *out = NULL;
    if (!path || !*path) return PUB(cdb_seterr(CDB_INVALID, "clipdb_model_open: no path"));
    if (!(cm = calloc(1, sizeof *cm)))
        return PUB(cdb_seterr(CDB_NOMEM, "cannot load the model %s (out of memory)", path));
    mp.device = opt.device;
    mp.n_threads = opt.threads;
    if ((rc = cdb_model_open(path, &mp, &cm->m)) != CDB_OK) {
        free(cm);
        return PUB(restate(rc, "cannot load the model %s", path));
    }
    *out = cm;
    return CLIPDB_OK;
}

void clipdb_model_close(clipdb_model *m) {
    if (!m) return;
    cdb_model_close(m->m);
    free(m);
}

int clipdb_model_dim(const clipdb_model *m) { return m ? cdb_model_get_info(m->m)->embed_dim : 0; }
const char *clipdb_model_name(const clipdb_model *m) {
    return m ? cdb_model_get_info(m->m)->name : NULL;
}

clipdb_status clipdb_embed_texts(clipdb_model *m, const char *const *texts, int n, unsigned flags,
                                 float *out) {
    if (!m || n < 0 || (n && (!texts || !out)))
        return PUB(cdb_seterr(CDB_INVALID, "clipdb_embed_texts: bad arguments"));
    for (int i = 0; i < n; i++)
        if (!texts[i])
            return PUB(cdb_seterr(CDB_INVALID, "clipdb_embed_texts: text %d is NULL", i));
    return PUB(cdb_encode_texts(m->m, texts, n, !(flags & CLIPDB_EMBED_RAW), out));
}

/* One image at a time: the encoder is batch-invariant on the CPU (encoder.h), so each
** row has the bits of `clipdb embed`'s batches of 32. */
clipdb_status clipdb_embed_images(clipdb_model *m, const char *const *paths, int n,
                                  unsigned flags, float *out) {
    cdb_image_params ip = cdb_image_params_default();
    int dim;
    if (!m || n < 0 || (n && (!paths || !out)))
        return PUB(cdb_seterr(CDB_INVALID, "clipdb_embed_images: bad arguments"));
    ip.apply_exif = !(flags & CLIPDB_EMBED_NO_EXIF);
    dim = cdb_model_get_info(m->m)->embed_dim;
    for (int i = 0; i < n; i++) {
        cdb_status rc;
        if (!paths[i])
            return PUB(cdb_seterr(CDB_INVALID, "clipdb_embed_images: path %d is NULL", i));
        rc = cdb_encode_image_file(m->m, paths[i], &ip, !(flags & CLIPDB_EMBED_RAW),
                                   out + (size_t)i * (size_t)dim);
        if (rc != CDB_OK) return PUB(restate(rc, "cannot embed %s", paths[i]));
    }
    return CLIPDB_OK;
}
