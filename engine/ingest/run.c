/*
** run.c: `ingest` and `reindex` as library calls. Both turn their folders into scan
** targets (library.c) and run the pipeline of pipeline.c once per vector set: the
** default model's pass first (it also records deletions and moves), then one pass
** for every other model the database holds, so each set stays complete. The run is
** recorded (cdb_db_run_begin/finish) with the first pass's summary.
**
** reindex also refreshes every set's index afterwards, and with repair first turns
** what cdb_db_verify and the deep check find into pending work (cdb_db_repair) that
** the rescan redoes. It is complete (not partial) only when every set it ran has a
** vector for every ok file.
**
** Errors: a failure before the passes start is a complete "what (why)" sentence (the
** model cannot be found, the folders cannot be recorded); a failure of the run itself
** (report->started) leaves its cause in cdb_errmsg, for "ingest failed (<cause>)".
*/
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "engine/ingest/ingest.h"

/* One vector set of a run: its model and what its pass did. s[0] is the first pass
** (deletions, moves, the roots' bookkeeping); the others only encode what their set
** lacks. */
typedef struct run_set {
    cdb_db_model dm;
    cdb_model *m;         /* NULL: its weights could not be found (the set is skipped) */
    int borrowed;         /* m is the handle's (cdb_engine_load_model), not the run's */
    cdb_engine_summary sum;
    int ran;
} run_set;

typedef struct run_plan {
    run_set *s;
    int n, cap;
} run_plan;

static void plan_free(run_plan *p) {
    for (int i = 0; i < p->n; i++)
        if (!p->s[i].borrowed) cdb_model_close(p->s[i].m);
    free(p->s);
    memset(p, 0, sizeof *p);
}

static int plan_has(const run_plan *p, int64_t id) {
    for (int i = 0; i < p->n; i++)
        if (p->s[i].dm.id == id) return 1;
    return 0;
}

/* Adds a set (m already loaded, or NULL: loaded here from its recorded path; left NULL
** when its weights are not found). Takes m. */
static cdb_status plan_add(cdb_engine *e, run_plan *p, const cdb_db_model *dm, cdb_model *m) {
    if (plan_has(p, dm->id)) {
        cdb_model_close(m);
        return CDB_OK;
    }
    if (p->n == p->cap) {
        int nc = p->cap ? p->cap * 2 : 4;
        run_set *s = realloc(p->s, sizeof *s * (size_t)nc);
        if (!s) {
            cdb_model_close(m);
            return cdb_eng_failw(CDB_NOMEM, CDB_ENGINE_E_NONE, "out of memory",
                                 "cannot plan the run");
        }
        p->s = s;
        p->cap = nc;
    }
    run_set *s = &p->s[p->n++];
    memset(s, 0, sizeof *s);
    s->dm = *dm;
    s->m = m;
    if (!s->m) { /* a model the handle loaded already (an image tower) is used as it is */
        pthread_mutex_lock(&e->mu);
        for (eng_model *c = e->models; c && !s->m; c = c->next)
            if (c->model_id == dm->id && c->vision && c->m) s->m = c->m;
        pthread_mutex_unlock(&e->mu);
        s->borrowed = s->m != NULL;
    }
    if (!s->m && cdb_eng_load_db_model(e, e->db, dm, 1, 0, 1, &s->m) != CDB_OK) s->m = NULL;
    return CDB_OK;
}

typedef struct models_ud {
    cdb_engine *e;
    run_plan *p;
    cdb_status rc;
} models_ud;

static int add_other_model(const cdb_db_model *m, void *ud_) {
    models_ud *ud = ud_;
    if (!plan_has(ud->p, m->id)) ud->rc = plan_add(ud->e, ud->p, m, NULL);
    return ud->rc != CDB_OK;
}

/* Every registered model after the ones already planned: each vector set current. */
static cdb_status plan_add_all(cdb_engine *e, run_plan *p) {
    models_ud ud = {e, p, CDB_OK};
    cdb_status st = cdb_db_models_foreach(e->db, add_other_model, &ud);
    if (st != CDB_OK)
        return cdb_eng_fail(st, CDB_ENGINE_E_NONE, "cannot list the database's models");
    return ud.rc;
}

static void summary_json(char *js, size_t size, const cdb_engine_summary *s) {
    snprintf(js, size,
             "{\"found\":%lld,\"added\":%lld,\"changed\":%lld,\"moved\":%lld,\"touched\":%lld,"
             "\"deleted\":%lld,\"errors\":%lld,\"retry\":%lld,\"unchanged\":%lld,"
             "\"not_images\":%lld,\"walk_errors\":%lld,\"seconds\":%.3f}",
             (long long)s->found, (long long)s->added, (long long)s->changed, (long long)s->moved,
             (long long)s->touched, (long long)s->deleted, (long long)s->errors,
             (long long)s->retry, (long long)s->unchanged, (long long)s->skipped,
             (long long)s->walk_errors, s->seconds);
}

static int set_partial(const run_set *s) {
    return !s->m || s->sum.errors || s->sum.retry || s->sum.walk_errors;
}

/* Records in the database that a pass encoded real photos (cdb_db_set_real_photos), so
** that the server knows without rescanning. A failure costs only the server's banner:
** logged, not the run's. */
static void record_real_photos(cdb_engine *e, const run_plan *p) {
    int seen = 0;
    for (int i = 0; i < p->n; i++)
        if (p->s[i].sum.real_photos > 0) {
            if (cdb_db_real_photos(e->db, &seen) == CDB_OK && !seen &&
                cdb_db_set_real_photos(e->db) != CDB_OK)
                CDB_LOG_WARN("cannot record that real photos were ingested (%s)", cdb_errmsg());
            return;
        }
}

/* Runs every set's pass, recorded as one run. Returns the first failure (the sets
** after it do not run). */
/* The largest batch sized from free device memory: the host holds two batches of
** inputs in its queues (a 224-pixel image's floats are 0.6 MB). */
#define ENG_AUTO_BATCH_MAX 512

static cdb_status run_passes(cdb_engine *e, const char *kind, const eng_library *lib,
                             const eng_target *t, int nt, run_plan *p,
                             const cdb_engine_run_params *rp, int *stopped) {
    int64_t run_id = 0;
    char js[600], why[1024] = "";
    cdb_status rc = CDB_OK;
    int partial = 0;
    const cdb_engine_events *ev = &e->p.events;
    eng_ingest_opts o0;
    memset(&o0, 0, sizeof o0);
    o0.batch = rp->batch > 0 ? rp->batch : 32;
    o0.threads = rp->threads > 0 ? rp->threads : cdb_default_threads();
    o0.full = rp->full;
    o0.label = kind;
    o0.encode = rp->encode;
    o0.encode_ud = rp->encode_ud;
    o0.ev = ev;
    if (cdb_db_thumb_size(e->db, &o0.thumb_px) != CDB_OK) o0.thumb_px = 0;
    if (cdb_db_max_pixels(e->db, &o0.max_pixels) != CDB_OK) o0.max_pixels = 0;
    o0.decode_budget = cdb_eng_budget_pixels_of_mb(rp->decode_memory_mb);
    o0.part_index = rp->part_index;
    o0.part_count = rp->part_count;
    cdb_db_run_begin(e->db, kind, &run_id);
    for (int i = 0; i < p->n && rc == CDB_OK && !cdb_eng_should_stop(ev); i++) {
        run_set *s = &p->s[i];
        eng_ingest_opts o = o0;
        if (!s->m) {
            cdb_eng_warn(ev,
                         "cannot find the weights of model '%s' (%.12s...): its vectors are not "
                         "brought up to date",
                         s->dm.name, s->dm.weights_hash);
            continue;
        }
        if (rp->batch <= 0) /* not given: 32 on the CPU, what free device memory allows */
            o.batch = cdb_model_image_batch(s->m, 32, ENG_AUTO_BATCH_MAX);
        o.secondary = i > 0;
        if (o.secondary) o.thumb_px = 0; /* one thumbnail per photo, by the first pass */
        /* the set's decode mode: a change is recorded first as unsettled, so an
        ** interrupted run's successor encodes the set again too */
        o.decode = rp->decode < 0 ? s->dm.decode : rp->decode;
        if (o.decode != s->dm.decode || !s->dm.decode_settled) {
            if ((rc = cdb_db_model_set_decode(e->db, s->dm.id, o.decode, 0)) != CDB_OK) break;
            o.reencode = 1;
        }
        rc =
            cdb_eng_pipeline_run(e->db, cdb_db_dir(e->db), s->m, s->dm.id, lib, t, nt, &o, &s->sum);
        s->ran = 1;
        if (rc == CDB_OK && o.reencode && !s->sum.interrupted && !s->sum.walk_errors &&
            !s->sum.retry)
            rc = cdb_db_model_set_decode(e->db, s->dm.id, o.decode, 1);
    }
    *stopped = cdb_eng_should_stop(ev);
    for (int i = 0; i < p->n; i++) partial |= set_partial(&p->s[i]);
    record_real_photos(e, p);
    summary_json(js, sizeof js, &p->s[0].sum);
    if (rc != CDB_OK) /* recording the run must not overwrite why it failed */
        snprintf(why, sizeof why, "%s", cdb_errmsg());
    if (run_id)
        cdb_db_run_finish(e->db, run_id,
                          rc != CDB_OK ? "failed"
                          : *stopped   ? "interrupted"
                          : partial    ? "partial"
                                       : "ok",
                          js);
    if (rc != CDB_OK)
        cdb_eng_code(cdb_seterr(rc, "%s", why),
                     cdb_eng_disk_full(rc) ? CDB_ENGINE_E_DISK_FULL : CDB_ENGINE_E_NONE);
    return rc;
}


/* After a reindex: every set's index brought up to date (forced: why a rebuild is
** forced, NULL when not); note: one line about each. */
static cdb_status refresh_indexes(cdb_engine *e, const run_plan *p, const char *forced,
                                  char *note, size_t size) {
    cdb_status st = CDB_OK;
    size_t o = 0;
    note[0] = '\0';
    for (int i = 0; i < p->n && st == CDB_OK; i++) {
        const run_set *s = &p->s[i];
        eng_index_result res;
        char b[32], b2[32], one[400];
        if (!s->ran) continue;
        st = cdb_eng_index_refresh(e->db, s->dm.id, s->dm.dim, forced != NULL, &res);
        if (st != CDB_OK)
            snprintf(one, sizeof one, "refresh failed: %s", cdb_errmsg());
        else if (res.action == 0)
            snprintf(one, sizeof one, "up to date (%s)", res.why);
        else if (res.action == 2 && res.n_vectors == 0)
            snprintf(one, sizeof one, "%s", res.why);
        else if (res.action == 1) /* the counts are its why ("4 new or changed, ...") */
            snprintf(one, sizeof one, "updated: %s added, %s removed",
                     cdb_out_fmt_count(res.n_added, b, sizeof b),
                     cdb_out_fmt_count(res.n_removed, b2, sizeof b2));
        else
            snprintf(one, sizeof one, "rebuilt %s over %s vector%s (%s)",
                     cdb_index_kind_name(res.info.kind),
                     cdb_out_fmt_count(res.n_vectors, b, sizeof b), res.n_vectors == 1 ? "" : "s",
                     forced ? forced : res.why);
        o += (size_t)snprintf(note + o, o < size ? size - o : 0, "%s%s%s%s", i ? "; " : "",
                              p->n > 1 ? s->dm.name : "", p->n > 1 ? ": " : "", one);
    }
    return st;
}

/* A database step of a run that failed: a full disk gets its own wording. */
static cdb_status step_fail(cdb_status rc, const char *what) {
    if (cdb_eng_disk_full(rc))
        return cdb_eng_fail(rc, CDB_ENGINE_E_DISK_FULL, "%s: no space left on device", what);
    return cdb_eng_fail(rc, cdb_engine_errcode(), "%s", what);
}

static void fill_report(const run_plan *p, int stopped, cdb_engine_run_report *r) {
    for (int i = 0; i < p->n && i < CDB_ENGINE_MAX_SETS; i++) {
        cdb_engine_set_report *s = &r->sets[r->n_sets++];
        cdb_eng_model_to_public(&p->s[i].dm, &s->model);
        s->ran = p->s[i].ran;
        s->sum = p->s[i].sum;
        r->partial |= set_partial(&p->s[i]);
        r->errors += p->s[i].sum.errors;
        r->retry += p->s[i].sum.retry;
    }
    r->interrupted = stopped;
}

/* After a reindex: the ok files each set that ran still lacks (the catalog's claims of
** ok files are trusted: the write order keeps them true, and the passes checked those
** of the pending files they redid against the shards). A set with holes makes the run
** partial: a reindex succeeds only when every set it ran is complete. */
static cdb_status count_holes(cdb_engine *e, const run_plan *p, cdb_engine_run_report *r) {
    for (int i = 0; i < p->n && i < r->n_sets; i++) {
        int64_t n_missing = 0;
        cdb_status st;
        if (!p->s[i].ran) continue;
        if ((st = cdb_db_count_missing(e->db, p->s[i].dm.id, &n_missing)) != CDB_OK)
            return step_fail(st, "cannot count the vectors of the sets");
        r->sets[i].n_missing = n_missing;
        r->partial |= n_missing > 0;
    }
    return CDB_OK;
}

/* ---- ingest ----------------------------------------------------------------------------- */

/* The model of an ingest: the one at path (registered when new), or the default. */
static cdb_status ingest_model(cdb_engine *e, const char *path, cdb_model **m, cdb_db_model *dm,
                               int *is_default) {
    cdb_db_model def;
    int have_def = cdb_db_model_default(e->db, &def) == CDB_OK;
    cdb_status rc;
    *m = NULL;
    if (path && *path) {
        cdb_model_params mp = cdb_model_params_default();
        const cdb_model_info *mi;
        mp.n_threads = e->p.model_threads;
        mp.load_vision = 1;
        mp.load_text = 0;
        mp.device = e->p.device;
        if ((rc = cdb_model_open(path, &mp, m)) != CDB_OK)
            return cdb_eng_fail(rc, CDB_ENGINE_E_MODEL_LOAD, "cannot load the model %s", path);
        mi = cdb_model_get_info(*m);
        rc = cdb_db_model_find(e->db, mi->hash, dm);
        if (rc == CDB_NOTFOUND) {
            char *info = cdb_eng_model_info_json(path, *m);
            rc = cdb_db_model_register(e->db, mi->hash, mi->name ? mi->name : "", mi->embed_dim,
                                       info, &dm->id);
            free(info);
            if (rc == CDB_OK) rc = cdb_db_model_get(e->db, dm->id, dm);
        }
        if (rc != CDB_OK) {
            cdb_model_close(*m);
            *m = NULL;
            return cdb_eng_fail(rc, CDB_ENGINE_E_NONE, "cannot register the model %s", path);
        }
    } else {
        if (!have_def)
            return cdb_eng_failw(CDB_NOTFOUND, CDB_ENGINE_E_NOT_INITIALIZED, "it has no model",
                             "the database is not initialized");
        *dm = def;
        if ((rc = cdb_eng_load_db_model(e, e->db, &def, 1, 0, 0, m)) != CDB_OK) return rc;
    }
    *is_default = have_def ? dm->id == def.id : 1;
    return CDB_OK;
}

/* 1 when the absolute path p is target t's folder: its root, or the folder in it. */
static int is_target_folder(const char *p, const eng_target *t) {
    size_t rl = strlen(t->path);
    if (!t->sub) return !strcmp(p, t->path);
    return !strncmp(p, t->path, rl) && p[rl] == '/' && !strcmp(p + rl + 1, t->sub);
}

/* ingest --exclude: each rule recorded for the root of every folder PATH, below it. */
static cdb_status record_excludes(cdb_engine *e, const eng_target *t, int nt, char *const *abs,
                                  int n, const cdb_engine_run_params *rp) {
    cdb_status st = CDB_OK;
    for (int i = 0; i < nt && st == CDB_OK && rp->n_excludes > 0; i++) {
        int given = 0;
        if (t[i].kind != CDB_DB_ROOT_FOLDER || t[i].sub_is_file) continue;
        for (int k = 0; k < n && !given; k++) given = is_target_folder(abs[k], &t[i]);
        for (int x = 0; given && x < rp->n_excludes && st == CDB_OK; x++)
            st = cdb_db_root_exclude_add(e->db, t[i].root_id, CDB_DB_EXCLUDE_GLOB,
                                         t[i].sub ? t[i].sub : "", rp->excludes[x]);
    }
    return st;
}

static int count_root(const cdb_db_root *r, void *ud) {
    (void)r;
    ++*(int *)ud;
    return 0;
}

/* The partition a run works on (cdb_engine_run_params): rp's, checked against the one
** recorded (and recorded by an ingest when none is), or the recorded one when rp gives
** none. *part: rp with the partition filled in. */
static cdb_status resolve_partition(cdb_engine *e, const char *kind,
                                    const cdb_engine_run_params *rp,
                                    cdb_engine_run_params *part /* OUT */) {
    int ri = 0, rn = 0, n_roots = 0;
    cdb_status st = cdb_db_partition(e->db, &ri, &rn);
    *part = *rp;
    if (st != CDB_OK) return st;
    if (rp->part_count <= 0) {
        part->part_index = ri;
        part->part_count = rn;
        return CDB_OK;
    }
    if (rp->part_index < 1 || rp->part_index > rp->part_count)
        return cdb_seterr(CDB_INVALID, "part %d/%d: expected 1 <= I <= N", rp->part_index,
                          rp->part_count);
    if (rn > 0 && (ri != rp->part_index || rn != rp->part_count))
        return cdb_seterr(CDB_INVALID, "the database holds part %d/%d, not %d/%d", ri, rn,
                          rp->part_index, rp->part_count);
    if (rn > 0) return CDB_OK;
    if ((st = cdb_db_roots_foreach(e->db, count_root, &n_roots)) != CDB_OK) return st;
    if (n_roots > 0 || strcmp(kind, "ingest"))
        return cdb_seterr(CDB_INVALID, "the database holds a whole library, not a part: a part "
                                       "is a database of its own (ingest --part into a new --db)");
    return cdb_db_set_partition(e->db, rp->part_index, rp->part_count);
}

cdb_status cdb_engine_ingest(cdb_engine *e, const char *const *paths, int n,
                             const cdb_engine_run_params *rp, cdb_engine_run_report *report) {
    cdb_engine_run_params defaults = cdb_engine_run_params_default(), parted;
    cdb_model *m = NULL;
    cdb_db_model dm, def;
    int is_default = 1, stopped = 0;
    char **abs = NULL;
    int *is_file = NULL;
    eng_library lib = {0};
    eng_target *targets = NULL;
    int n_targets = 0;
    run_plan plan = {0};
    cdb_status st;
    cdb_eng_clear();
    memset(report, 0, sizeof *report);
    if (!rp) rp = &defaults;
    if ((st = cdb_eng_writer(e, "ingest")) != CDB_OK) return st;
    if (n <= 0) return cdb_eng_code(cdb_seterr(CDB_INVALID, "no PATH given"), CDB_ENGINE_E_PATH);
    if ((st = resolve_partition(e, "ingest", rp, &parted)) != CDB_OK) return st;
    rp = &parted;
    if (!(is_file = calloc((size_t)n, sizeof *is_file)))
        return cdb_seterr(CDB_NOMEM, "out of memory");
    for (int i = 0; i < n; i++) /* before check_paths reads a first byte of any of them */
        if (cdb_eng_path_inside(paths[i], cdb_db_dir(e->db))) {
            st = cdb_eng_failw(CDB_INVALID, CDB_ENGINE_E_NONE,
                               "it is inside the database's own folder",
                               "cannot ingest %s", paths[i]);
            goto done;
        }
    if ((st = cdb_engine_check_paths(paths, n, &abs, is_file)) != CDB_OK) goto done;
    if ((st = ingest_model(e, rp->model, &m, &dm, &is_default)) != CDB_OK) goto done;
    if ((st = cdb_eng_library_load(e->db, &lib)) != CDB_OK ||
        (st = cdb_eng_library_normalize(e->db, dm.id, &lib, NULL)) != CDB_OK ||
        (st = cdb_eng_library_resolve(e->db, dm.id, &lib, abs, is_file, n, rp->follow_symlinks,
                                  rp->no_exif, &e->p.events, &targets, &n_targets)) != CDB_OK) {
        step_fail(st, "cannot record the folders to ingest");
        goto done;
    }
    if ((st = record_excludes(e, targets, n_targets, abs, n, rp)) != CDB_OK) {
        step_fail(st, "cannot record the --exclude rules");
        goto done;
    }
    if ((st = cdb_eng_unforget(e->db, targets, n_targets)) != CDB_OK) goto done;
    /* the default set first (it does the deletions and moves), then every other set,
    ** the path's one included: each vector set stays complete */
    if (!is_default && cdb_db_model_default(e->db, &def) == CDB_OK &&
        (st = plan_add(e, &plan, &def, NULL)) != CDB_OK)
        goto done;
    {
        cdb_db_model rec;
        if ((st = cdb_db_model_get(e->db, dm.id, &rec)) != CDB_OK) {
            step_fail(st, "cannot read the model record");
            goto done;
        }
        st = plan_add(e, &plan, &rec, m);
        m = NULL;
        if (st != CDB_OK) goto done;
    }
    if (!plan.s[0].m) { /* the default's weights are not where they were recorded */
        st = cdb_eng_load_db_model(e, e->db, &plan.s[0].dm, 1, 0, 0, &plan.s[0].m);
        if (st == CDB_OK) st = cdb_eng_fail(CDB_NOTFOUND, CDB_ENGINE_E_WEIGHTS_MISSING,
                                        "cannot find the database's model '%s'",
                                        plan.s[0].dm.name);
        goto done;
    }
    if ((st = plan_add_all(e, &plan)) != CDB_OK) goto done;
    report->started = 1;
    st = run_passes(e, "ingest", &lib, targets, n_targets, &plan, rp, &stopped);
    fill_report(&plan, stopped, report);
done:
    plan_free(&plan);
    cdb_model_close(m);
    cdb_eng_targets_free(targets, n_targets);
    cdb_eng_library_free(&lib);
    cdb_engine_paths_free(abs, n);
    free(is_file);
    return st;
}

/* ---- reindex ------------------------------------------------------------------------------ */

/* reindex --repair, before the rescan: verify the whole database (and re-read the
** files and re-encode a sample: cdb_eng_deep_check) and turn what it finds into work
** for the rescan (cdb_db_repair: files whose vectors are missing, lost with a deleted
** or damaged shard, bad, or no longer match the file become pending and are
** re-encoded from the image files; orphan vectors are deleted). Repeated while the
** report was longer than its listed part. `note`: a one-line summary. */
static cdb_status repair(cdb_engine *e, cdb_model *m, int64_t model_id, double sample, char *note,
                         size_t note_size, int64_t *n_fixed) {
    int64_t found = 0, fixed = 0;
    cdb_status drop = cdb_db_drop_damaged(e->db); /* a killed repair's copy */
    if (drop != CDB_OK) return step_fail(drop, "cannot repair the database");
    for (int round = 0; round < 1000; round++) {
        cdb_db_report *r = NULL;
        int64_t n = 0;
        int more;
        cdb_status st = cdb_db_verify(e->db, &r);
        if (st == CDB_OK && m && round == 0)
            st = cdb_eng_deep_check(e->db, m, model_id, sample, r, &e->p.events, NULL);
        if (st != CDB_OK) {
            cdb_db_report_free(r);
            return step_fail(st, "cannot verify the database");
        }
        found += r->n_problems;
        more = r->n_problems > r->n_listed;
        if (r->n_problems && (st = cdb_db_repair(e->db, r, &n)) != CDB_OK) {
            cdb_db_report_free(r);
            return step_fail(st, "cannot repair the database");
        }
        cdb_db_report_free(r);
        fixed += n;
        if (!more || n == 0) break;
    }
    *n_fixed = fixed;
    if ((found = found < 0 ? 0 : found) == 0)
        snprintf(note, note_size, "no problems found");
    else
        snprintf(note, note_size, "%lld problem%s found, %lld file%s and vector%s requeued",
                 (long long)found, found == 1 ? "" : "s", (long long)fixed, fixed == 1 ? "" : "s",
                 fixed == 1 ? "" : "s");
    return CDB_OK;
}

cdb_status cdb_engine_reindex(cdb_engine *e, const cdb_engine_run_params *rp,
                              cdb_engine_run_report *report) {
    cdb_engine_run_params defaults = cdb_engine_run_params_default(), parted;
    eng_library lib = {0};
    eng_target *targets = NULL;
    int n_targets = 0, stopped = 0;
    run_plan plan = {0};
    int64_t repaired = 0; /* files requeued by repair: the index is rebuilt */
    cdb_db_model dm;
    cdb_status st;
    cdb_eng_clear();
    memset(report, 0, sizeof *report);
    if (!rp) rp = &defaults;
    if ((st = cdb_eng_writer(e, "reindex")) != CDB_OK) return st;
    if ((st = resolve_partition(e, "reindex", rp, &parted)) != CDB_OK) return st;
    rp = &parted;
    if (rp->model && *rp->model) { /* only that set */
        if ((st = cdb_eng_find_db_model(e, e->db, rp->model, &dm)) != CDB_OK) goto done;
    } else if ((st = cdb_db_model_default(e->db, &dm)) != CDB_OK) {
        st = cdb_eng_failw(st, CDB_ENGINE_E_NOT_INITIALIZED, "it has no model",
                       "the database is not initialized");
        goto done;
    }
    if ((st = plan_add(e, &plan, &dm, NULL)) != CDB_OK) goto done;
    if (!plan.s[0].m) {
        st = cdb_eng_load_db_model(e, e->db, &dm, 1, 0, 0, &plan.s[0].m);
        if (st == CDB_OK) st = cdb_eng_fail(CDB_NOTFOUND, CDB_ENGINE_E_WEIGHTS_MISSING,
                                        "cannot find the database's model '%s'", dm.name);
        goto done;
    }
    if (!(rp->model && *rp->model) && (st = plan_add_all(e, &plan)) != CDB_OK) goto done;
    if ((st = cdb_eng_library_load(e->db, &lib)) != CDB_OK ||
        (st = cdb_eng_library_normalize(e->db, dm.id, &lib, NULL)) != CDB_OK ||
        (st = cdb_eng_library_all(&lib, &targets, &n_targets)) != CDB_OK) {
        step_fail(st, "cannot list the ingested folders");
        goto done;
    }
    for (int i = 0; i < rp->n_accept_roots; i++)
        if ((st = cdb_eng_library_accept(&lib, rp->accept_roots[i])) != CDB_OK) {
            st = cdb_eng_fail(st, CDB_ENGINE_E_NOT_A_ROOT, "cannot accept %s",
                              rp->accept_roots[i]);
            goto done;
        }
    if (rp->repair &&
        (st = repair(e, plan.s[0].m, dm.id, rp->sample, report->repair_note,
                     sizeof report->repair_note, &repaired)) != CDB_OK)
        goto done;
    report->started = 1;
    st = run_passes(e, "reindex", &lib, targets, n_targets, &plan, rp, &stopped);
    if (st == CDB_OK && !cdb_eng_should_stop(&e->p.events)) {
        int64_t dropped = 0; /* thumbnails of files gone or changed (a cache: never fatal) */
        if (cdb_db_thumbs_prune(e->db, &dropped) != CDB_OK)
            CDB_LOG_WARN("stale thumbnails not dropped: %s", cdb_errmsg());
    }
    if (st == CDB_OK &&
        !cdb_eng_should_stop(&e->p.events)) { /* the nightly job refreshes indexes */
        cdb_status ist = refresh_indexes(e, &plan,
                                         rp->full      ? "full rebuild asked"
                                         : repaired > 0 ? "after the repair"
                                                        : NULL,
                                         report->index_note, sizeof report->index_note);
        if (ist != CDB_OK) st = ist; /* the run failed */
    }
    fill_report(&plan, stopped, report);
    if (st == CDB_OK && !stopped) st = count_holes(e, &plan, report);
done:
    plan_free(&plan);
    cdb_eng_targets_free(targets, n_targets);
    cdb_eng_library_free(&lib);
    return st;
}

/* ---- settings the runs read --------------------------------------------------------- */

#define MAX_PIXELS_CAP ((int64_t)1 << 40)

cdb_status cdb_engine_max_pixels(cdb_engine *e, int64_t *px) {
    eng_reader *r = NULL;
    cdb_status st;
    cdb_eng_clear();
    if ((st = cdb_eng_reader_get(e, &r)) != CDB_OK) return st;
    st = cdb_db_max_pixels(r->db, px);
    cdb_eng_reader_put(e, r);
    if (st != CDB_OK) return cdb_eng_fail(st, CDB_ENGINE_E_NONE, "cannot read the pixel limit");
    if (*px == 0) *px = CDB_IMAGE_DEFAULT_MAX_PIXELS;
    return CDB_OK;
}

cdb_status cdb_engine_set_max_pixels(cdb_engine *e, int64_t px, int64_t *n_requeued) {
    int64_t old = 0;
    cdb_status st;
    cdb_eng_clear();
    if (n_requeued) *n_requeued = 0;
    if (px < 0 || px > MAX_PIXELS_CAP)
        return cdb_eng_fail(cdb_seterr(CDB_INVALID, "1 to %lld, or 0 for the default",
                                       (long long)MAX_PIXELS_CAP),
                            CDB_ENGINE_E_NONE, "cannot set the pixel limit to %lld", (long long)px);
    if ((st = cdb_eng_writer(e, "setting the pixel limit")) != CDB_OK) return st;
    if ((st = cdb_db_max_pixels(e->db, &old)) == CDB_OK) {
        int64_t was = old ? old : CDB_IMAGE_DEFAULT_MAX_PIXELS;
        int64_t now = px ? px : CDB_IMAGE_DEFAULT_MAX_PIXELS;
        st = cdb_db_set_max_pixels(e->db, px, now > was, n_requeued);
    }
    if (st != CDB_OK) return cdb_eng_fail(st, CDB_ENGINE_E_NONE, "cannot set the pixel limit");
    return CDB_OK;
}

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
