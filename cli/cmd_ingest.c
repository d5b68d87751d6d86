/*
** cmd_ingest.c: the commands that write to a database: `init` (create one bound
** to a model), `ingest PATH...` and `reindex` (the nightly job). Both turn their
** folders into scan targets (library.c) and run the pipeline of pipeline.c once per
** vector set: the default model's pass first (it also records deletions and moves),
** then one pass for every other model the database holds, so each set stays
** complete. This file parses options, opens the database and the models, records
** the run, and prints the summary (stdout; the live progress line is on stderr).
**
** Exit codes: 0 everything processed, 3 partial (some files failed or are to be
** retried, a folder is missing or unreadable, a model's weights are missing), 1 the
** run failed (a full disk included: its own message and hint), 130 interrupted
** (what was committed stays). `reindex --repair` first turns what cdb_db_verify and
** the deep check find into pending work (cdb_db_repair) that the rescan redoes.
*/
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <libgen.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "index/index.h"

/* A run that failed because the disk is full. The pipeline reports its fatal
** errors as CDB_ERROR with the cause in the message (SQLite's SQLITE_FULL text,
** or strerror(ENOSPC)), so the message is checked as well as the status. */
static int disk_full(cdb_status rc) {
    const char *m = cdb_errmsg();
    if (rc == CDB_OK) return 0;
    return rc == CDB_NOSPACE || strstr(m, "database or disk is full") ||
           strstr(m, "No space left on device") || strstr(m, "no space left on device");
}

#define FREE_SPACE_HINT \
    "free space on the disk that holds the database, then run the same command again: " \
    "what was committed is kept, the rest is redone"

/* cli_error_status for the database steps of init/ingest/reindex: a full disk gets
** its own wording and a hint (the exit code stays 1). */
static int ingest_error(cdb_status st, const char *fmt, ...) CDB_PRINTF(2, 3);
static int ingest_error(cdb_status st, const char *fmt, ...) {
    char what[512];
    va_list ap;
    int full = disk_full(st);
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (!full) return cli_error_status(st, "%s", what);
    cli_error_status(st, "%s: no space left on device", what);
    cli_hint(FREE_SPACE_HINT);
    return CLI_EXIT_FAIL;
}


int cli_cmd_init(int argc, char **argv) {
    static const cli_optspec spec[] = {{"db", 0, CLI_VALUE}, {"model", 0, CLI_VALUE},
                                       {"quiet", 'q', CLI_FLAG}, {"help", 'h', CLI_FLAG},
                                       {0}};
    cli_args a;
    int rc;
    if (!cli_begin("init", &a, spec, argc, argv, &rc)) goto done;
    if (a.n_pos) {
        rc = cli_usage_error("init", "unexpected argument '%s' (the folder goes in --db)",
                             a.pos[0]);
        goto done;
    }
    {
        const char *src, *msrc;
        const char *dir = cli_db_path(cli_get(&a, "db"), &src);
        const char *mpath = cli_model_path(cli_get(&a, "model"), &msrc);
        char probe[PATH_MAX + 16];
        struct stat st;
        cdb_db *db = NULL;
        cdb_db_params p = cdb_db_params_default();
        cdb_model *m = NULL;
        cdb_model_params mp = cdb_model_params_default();
        cdb_status st_rc;
        int64_t model_id = 0;
        char *info = NULL;
        snprintf(probe, sizeof probe, "%s/catalog.db", dir);
        if (stat(probe, &st) == 0) {
            rc = cli_error("it would be replaced", "a database already exists at %s", dir);
            cli_hint("use it as it is ('clipdb stats --db %s'), or choose another --db", dir);
            goto done;
        }
        if (!mpath) {
            rc = cli_error("no --model, no CLIPDB_MODEL, and no bundled model was found",
                           "no model to bind the database to");
            cli_hint("pass --model PATH (a model folder or a .safetensors file)");
            goto done;
        }
        mp.load_vision = 0; /* only the identity and sizes are needed */
        if ((st_rc = cdb_model_open(mpath, &mp, &m)) != CDB_OK) {
            rc = cli_error_status(st_rc, "cannot load the model %s", mpath);
            goto done;
        }
        p.create = 1;
        if ((st_rc = cdb_db_open(dir, &p, &db)) != CDB_OK) {
            cdb_model_close(m);
            rc = ingest_error(st_rc, "cannot create a database at %s", dir);
            goto done;
        }
        info = cli_model_info_json(mpath, m);
        st_rc = cdb_db_model_register(db, cdb_model_get_info(m)->hash, cdb_model_get_info(m)->name,
                                      cdb_model_get_info(m)->embed_dim, info, &model_id);
        if (st_rc == CDB_OK) st_rc = cdb_db_model_set_default(db, model_id);
        if (st_rc != CDB_OK) {
            rc = ingest_error(st_rc, "cannot record the model in %s", dir);
        } else {
            if (!cli_quiet())
                printf("Created the database %s (model %s, %d dimensions, %s)\n", dir,
                       cdb_model_get_info(m)->name, cdb_model_get_info(m)->embed_dim, msrc);
            rc = CLI_EXIT_OK;
        }
        free(info);
        cdb_db_close(db);
        cdb_model_close(m);
    }
done:
    cli_args_free(&a);
    return rc;
}

/* Options shared by ingest and reindex, validated into a cli_ingest_opts. */
static int parse_run_opts(const char *cmd, cli_args *a, cli_ingest_opts *o) {
    long batch, threads;
    const char *dev_text;
    if (cli_get_int(a, "batch", 32, 1, 4096, &batch) ||
        cli_get_int(a, "threads", 0, 0, 1024, &threads))
        return cli_usage_error(cmd, "%s", a->err);
    memset(o, 0, sizeof *o);
    o->batch = (int)batch;
    o->threads = threads ? (int)threads : cdb_default_threads();
    o->device = cli_device(cli_get(a, "device"), &dev_text);
    if (o->device < 0)
        return cli_usage_error(cmd, "bad device '%s' (expected auto, cpu or cuda)", dev_text);
    o->wait = cli_has(a, "wait") > 0;
    o->json = cli_has(a, "json") > 0;
    o->follow_symlinks = -1;
    o->label = cmd;
    static const char *const modes[] = {"exact", "fast", NULL};
    if ((o->decode_req = cli_get_choice(a, "decode", modes, -1)) < 0 && cli_get(a, "decode"))
        return cli_usage_error(cmd, "%s", a->err);
    return CLI_EXIT_OK;
}

/* ---- a run: one pass per vector set ------------------------------------------------- */

/* One vector set of a run: its model and what its pass did. sets[0] is the first
** pass (deletions, moves, the roots' bookkeeping); the others only encode what their
** set lacks. */
typedef struct run_set {
    cdb_db_model dm;
    cdb_model *m;         /* NULL: its weights could not be found (the set is skipped) */
    cli_ingest_summary sum;
    cdb_status rc;
    int ran;
} run_set;

typedef struct run_plan {
    run_set *s;
    int n, cap;
} run_plan;

static void plan_free(run_plan *p) {
    for (int i = 0; i < p->n; i++) cdb_model_close(p->s[i].m);
    free(p->s);
    memset(p, 0, sizeof *p);
}

static int plan_has(const run_plan *p, int64_t id) {
    for (int i = 0; i < p->n; i++)
        if (p->s[i].dm.id == id) return 1;
    return 0;
}

/* Adds a set (m already loaded, or NULL: loaded here from its recorded path). */
static int plan_add(run_plan *p, cdb_db *db, const cdb_db_model *dm, cdb_model *m, int device) {
    if (plan_has(p, dm->id)) {
        cdb_model_close(m);
        return CLI_EXIT_OK;
    }
    if (p->n == p->cap) {
        int nc = p->cap ? p->cap * 2 : 4;
        run_set *s = realloc(p->s, sizeof *s * (size_t)nc);
        if (!s) {
            cdb_model_close(m);
            return cli_error("out of memory", "cannot plan the run");
        }
        p->s = s;
        p->cap = nc;
    }
    run_set *s = &p->s[p->n++];
    memset(s, 0, sizeof *s);
    s->dm = *dm;
    s->m = m;
    if (!s->m && cli_load_db_model(db, dm, 1, 0, device, 1, &s->m) != CLI_EXIT_OK) s->m = NULL;
    return CLI_EXIT_OK;
}

typedef struct models_ud {
    run_plan *p;
    cdb_db *db;
    int device, rc;
} models_ud;

static int add_other_model(const cdb_db_model *m, void *ud_) {
    models_ud *ud = ud_;
    if (!plan_has(ud->p, m->id)) ud->rc = plan_add(ud->p, ud->db, m, NULL, ud->device);
    return ud->rc != CLI_EXIT_OK;
}

/* Every registered model after the ones already planned: each vector set current. */
static int plan_add_all(run_plan *p, cdb_db *db, int device) {
    models_ud ud = {p, db, device, CLI_EXIT_OK};
    cdb_status st = cdb_db_models_foreach(db, add_other_model, &ud);
    if (st != CDB_OK) return cli_error_status(st, "cannot list the database's models");
    return ud.rc;
}

static void summary_json(char *js, size_t size, const cli_ingest_summary *s) {
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

/* Runs every set's pass, recorded as one run. Returns the first failure (the sets
** after it do not run). */
static cdb_status run_passes(const char *kind, cdb_db *db, const cli_library *lib,
                             const cli_ingest_root *t, int nt, run_plan *p,
                             const cli_ingest_opts *o0) {
    int64_t run_id = 0;
    char js[600], why[1024] = "";
    cdb_status rc = CDB_OK;
    int partial = 0;
    cdb_db_run_begin(db, kind, &run_id);
    for (int i = 0; i < p->n && rc == CDB_OK && !cli_interrupted(); i++) {
        run_set *s = &p->s[i];
        cli_ingest_opts o = *o0;
        if (!s->m) {
            cli_warn("cannot find the weights of model '%s' (%.12s...): its vectors are not "
                     "brought up to date", s->dm.name, s->dm.weights_hash);
            continue;
        }
        o.secondary = i > 0;
        /* the set's decode mode: a change is recorded first as unsettled, so an
        ** interrupted run's successor encodes the set again too */
        o.decode = o0->decode_req < 0 ? s->dm.decode : o0->decode_req;
        if (o.decode != s->dm.decode || !s->dm.decode_settled) {
            if ((rc = cdb_db_model_set_decode(db, s->dm.id, o.decode, 0)) != CDB_OK) break;
            o.reencode = 1;
        }
        rc = s->rc = cli_pipeline_run(db, cdb_db_dir(db), s->m, s->dm.id, lib, t, nt, &o, &s->sum);
        s->ran = 1;
        if (rc == CDB_OK && o.reencode && !s->sum.interrupted && !s->sum.walk_errors &&
            !s->sum.retry)
            rc = cdb_db_model_set_decode(db, s->dm.id, o.decode, 1);
    }
    for (int i = 0; i < p->n; i++) partial |= set_partial(&p->s[i]);
    summary_json(js, sizeof js, &p->s[0].sum);
    if (rc != CDB_OK) /* recording the run must not overwrite why it failed */
        snprintf(why, sizeof why, "%s", cdb_errmsg());
    if (run_id)
        cdb_db_run_finish(db, run_id,
                          rc != CDB_OK         ? "failed"
                          : cli_interrupted()  ? "interrupted"
                          : partial            ? "partial"
                                               : "ok",
                          js);
    if (rc != CDB_OK) cdb_seterr(rc, "%s", why);
    return rc;
}

/* ---- the summary ---------------------------------------------------------------------- */

static void summary_line(const char *label, const cli_ingest_summary *s) {
    char b[9][32], dur[32], retry[64] = "";
    double rate = s->seconds > 0 ? (double)(s->found) / s->seconds : 0;
    if (s->retry)
        snprintf(retry, sizeof retry, ", %s to retry", cli_fmt_count(s->retry, b[8], 32));
    printf("%s: %s files: %s added, %s changed, %s moved, %s deleted, %s errors%s, "
           "%s unchanged, %s not images (%s, %.1f files/s)%s\n",
           label, cli_fmt_count(s->found, b[0], 32), cli_fmt_count(s->added, b[1], 32),
           cli_fmt_count(s->changed, b[2], 32), cli_fmt_count(s->moved, b[3], 32),
           cli_fmt_count(s->deleted, b[4], 32), cli_fmt_count(s->errors, b[5], 32), retry,
           cli_fmt_count(s->unchanged + s->touched, b[6], 32), cli_fmt_count(s->skipped, b[7], 32),
           cli_fmt_duration(s->seconds, dur, sizeof dur), rate,
           s->interrupted ? " [interrupted]" : "");
}

static void summary_fields(cli_json *j, const cli_ingest_summary *s) {
    cli_json_key(j, "found"); cli_json_int(j, s->found);
    cli_json_key(j, "added"); cli_json_int(j, s->added);
    cli_json_key(j, "changed"); cli_json_int(j, s->changed);
    cli_json_key(j, "moved"); cli_json_int(j, s->moved);
    cli_json_key(j, "touched"); cli_json_int(j, s->touched);
    cli_json_key(j, "deleted"); cli_json_int(j, s->deleted);
    cli_json_key(j, "unchanged"); cli_json_int(j, s->unchanged);
    cli_json_key(j, "errors"); cli_json_int(j, s->errors);
    cli_json_key(j, "retry"); cli_json_int(j, s->retry);
    cli_json_key(j, "not_images"); cli_json_int(j, s->skipped);
    cli_json_key(j, "walk_errors"); cli_json_int(j, s->walk_errors);
    cli_json_key(j, "missing_folders"); cli_json_int(j, s->missing_roots);
    cli_json_key(j, "symlinks_skipped"); cli_json_int(j, s->links_skipped);
    cli_json_key(j, "seconds"); cli_json_num(j, s->seconds, 3);
}

/* The summary (stdout) and the exit code of a run. */
static int report(const char *cmd, const run_plan *p, cdb_status rc, int json,
                  const char *index_note, const char *repair_note) {
    const cli_ingest_summary *s = &p->s[0].sum;
    int partial = 0;
    for (int i = 0; i < p->n; i++) partial |= set_partial(&p->s[i]);
    int code = rc != CDB_OK        ? CLI_EXIT_FAIL
               : cli_interrupted() ? CLI_EXIT_INTERRUPTED
               : partial           ? CLI_EXIT_PARTIAL
                                   : CLI_EXIT_OK;
    const char *status = code == CLI_EXIT_OK        ? "ok"
                         : code == CLI_EXIT_PARTIAL ? "partial"
                         : code == CLI_EXIT_INTERRUPTED ? "interrupted"
                                                    : "failed";
    int64_t errors = 0, retry = 0;
    for (int i = 0; i < p->n; i++) {
        errors += p->s[i].sum.errors;
        retry += p->s[i].sum.retry;
    }
    if (json) {
        cli_json j;
        cli_json_init(&j, stdout, 1);
        cli_json_begin_object(&j);
        cli_json_key(&j, "command"); cli_json_str(&j, cmd);
        cli_json_key(&j, "status"); cli_json_str(&j, status);
        cli_json_key(&j, "exit_code"); cli_json_int(&j, code);
        cli_json_key(&j, "model"); cli_json_str(&j, p->s[0].dm.name);
        summary_fields(&j, s);
        cli_json_key(&j, "interrupted"); cli_json_bool(&j, cli_interrupted());
        cli_json_key(&j, "sets"); /* every vector set this run brought up to date */
        cli_json_begin_array(&j);
        for (int i = 0; i < p->n; i++) {
            cli_json_begin_object(&j);
            cli_json_key(&j, "model"); cli_json_str(&j, p->s[i].dm.name);
            cli_json_key(&j, "model_id"); cli_json_int(&j, p->s[i].dm.id);
            cli_json_key(&j, "ran"); cli_json_bool(&j, p->s[i].ran);
            if (p->s[i].ran) summary_fields(&j, &p->s[i].sum);
            cli_json_end_object(&j);
        }
        cli_json_end_array(&j);
        if (repair_note) {
            cli_json_key(&j, "repair");
            cli_json_str(&j, repair_note);
        }
        if (index_note) {
            cli_json_key(&j, "index");
            cli_json_str(&j, index_note);
        }
        if (rc != CDB_OK) {
            cli_json_key(&j, "error");
            cli_json_str(&j, cdb_errmsg());
        }
        cli_json_end_object(&j);
        cli_json_done(&j);
    } else {
        summary_line(cmd, s);
        for (int i = 1; i < p->n; i++) {
            char label[200];
            if (!p->s[i].ran) continue;
            snprintf(label, sizeof label, "%s [%s]", cmd, p->s[i].dm.name);
            summary_line(label, &p->s[i].sum);
        }
        if (repair_note) printf("repair: %s\n", repair_note);
        if (index_note) printf("index: %s\n", index_note);
    }
    fflush(stdout);
    if (disk_full(rc)) {
        /* exit 1 like any failure, but say what to do: nothing committed is lost */
        cli_error_status(rc, "%s stopped: no space left on device", cmd);
        cli_hint(FREE_SPACE_HINT);
    } else if (rc != CDB_OK) {
        cli_error_status(rc, "%s failed", cmd);
    } else if (cli_interrupted()) {
        cli_hint("interrupted: what was done is saved; run it again to finish");
    } else if (errors || retry || s->walk_errors) {
        cli_hint("run 'clipdb errors' to see what failed%s",
                 retry ? "; files that failed for a passing reason are retried by the next run"
                       : "");
    }
    return code;
}

/* After a reindex: every set's index brought up to date. */
static cdb_status refresh_indexes(cdb_db *db, const run_plan *p, int force, char *note,
                                  size_t size) {
    cdb_status st = CDB_OK;
    size_t o = 0;
    note[0] = '\0';
    for (int i = 0; i < p->n && st == CDB_OK; i++) {
        const run_set *s = &p->s[i];
        cli_index_result res;
        char b[32], b2[32], one[400];
        if (!s->ran) continue;
        st = cli_index_refresh(db, s->dm.id, s->dm.dim, force, &res);
        if (st != CDB_OK)
            snprintf(one, sizeof one, "refresh failed: %s", cdb_errmsg());
        else if (res.action == 0)
            snprintf(one, sizeof one, "up to date (%s)", res.why);
        else if (res.action == 2 && res.n_vectors == 0)
            snprintf(one, sizeof one, "%s", res.why);
        else if (res.action == 1)
            snprintf(one, sizeof one, "updated: %s added, %s removed (%s)",
                     cli_fmt_count(res.n_added, b, sizeof b),
                     cli_fmt_count(res.n_removed, b2, sizeof b2), res.why);
        else
            snprintf(one, sizeof one, "rebuilt %s over %s vectors (%s)",
                     cdb_index_kind_name(res.info.kind), cli_fmt_count(res.n_vectors, b, sizeof b),
                     res.why);
        o += (size_t)snprintf(note + o, o < size ? size - o : 0, "%s%s%s%s", i ? "; " : "",
                              p->n > 1 ? s->dm.name : "", p->n > 1 ? ": " : "", one);
    }
    return st;
}

/* ---- ingest ----------------------------------------------------------------------------- */

/* The PATHs as real, absolute paths of existing folders or regular files: nothing is
** written before every one of them checks out. */
static int real_paths(const cli_args *a, char **abs, int *is_file) {
    for (int i = 0; i < a->n_pos; i++) {
        char buf[PATH_MAX];
        struct stat sb;
        if (!realpath(a->pos[i], buf) || stat(buf, &sb) != 0) {
            cli_error(strerror(errno), "cannot ingest %s", a->pos[i]);
            cli_hint("nothing was ingested: every PATH must exist");
            return CLI_EXIT_FAIL;
        }
        if (!S_ISDIR(sb.st_mode) && !S_ISREG(sb.st_mode))
            return cli_error("not a folder or a regular file", "cannot ingest %s", a->pos[i]);
        is_file[i] = S_ISREG(sb.st_mode);
        if (is_file[i] && !cli_image_ext(buf)) { /* a single file is recorded: one that is a photo */
            unsigned char head[32];
            FILE *f = fopen(buf, "rb");
            size_t k = f ? fread(head, 1, sizeof head, f) : 0;
            if (f) fclose(f);
            if (!cli_image_magic(head, k))
                return cli_error("neither its name nor its first bytes are an image's",
                                 "cannot ingest %s", a->pos[i]);
        }
        if (!(abs[i] = strdup(buf))) return cli_error("out of memory", "cannot ingest");
    }
    return CLI_EXIT_OK;
}

int cli_cmd_ingest(int argc, char **argv) {
    static const cli_optspec spec[] = {
        {"db", 0, CLI_VALUE},       {"model", 0, CLI_VALUE},  {"device", 0, CLI_VALUE},
        {"batch", 0, CLI_VALUE},    {"threads", 0, CLI_VALUE}, {"follow-symlinks", 0, CLI_FLAG},
        {"no-follow-symlinks", 0, CLI_FLAG}, {"no-exif", 0, CLI_FLAG},   {"wait", 0, CLI_FLAG},
        {"exif", 0, CLI_FLAG},      {"decode", 0, CLI_VALUE},
        {"json", 0, CLI_FLAG},      {"quiet", 'q', CLI_FLAG},  {"help", 'h', CLI_FLAG},   {0}};
    cli_args a;
    cli_ingest_opts o;
    int rc;
    cdb_db *db = NULL;
    cdb_model *m = NULL;
    int64_t model_id = 0;
    int is_default = 1;
    char **abs = NULL;
    int *is_file = NULL;
    cli_library lib = {0};
    cli_ingest_root *targets = NULL;
    int n_targets = 0;
    run_plan plan = {0};
    cdb_status st = CDB_OK;
    cdb_db_model dm;
    if (!cli_begin("ingest", &a, spec, argc, argv, &rc)) goto done;
    if (a.n_pos == 0) {
        rc = cli_usage_error("ingest", "no PATH given");
        goto done;
    }
    if ((rc = parse_run_opts("ingest", &a, &o)) != CLI_EXIT_OK) goto done;
    if (cli_has(&a, "follow-symlinks") && cli_has(&a, "no-follow-symlinks")) {
        rc = cli_usage_error("ingest", "--follow-symlinks and --no-follow-symlinks exclude each other");
        goto done;
    }
    o.follow_symlinks = cli_has(&a, "follow-symlinks")      ? 1
                        : cli_has(&a, "no-follow-symlinks") ? 0
                                                            : -1;
    if (cli_has(&a, "exif") && cli_has(&a, "no-exif")) {
        rc = cli_usage_error("ingest", "--exif and --no-exif exclude each other");
        goto done;
    }
    o.no_exif = cli_has(&a, "no-exif") ? 1 : cli_has(&a, "exif") ? 0 : -1;
    abs = calloc((size_t)a.n_pos, sizeof *abs);
    is_file = calloc((size_t)a.n_pos, sizeof *is_file);
    if (!abs || !is_file) {
        rc = cli_error("out of memory", "cannot ingest");
        goto done;
    }
    if ((rc = real_paths(&a, abs, is_file)) != CLI_EXIT_OK) goto done;
    if ((rc = cli_open_db(cli_get(&a, "db"), 1, o.wait, &db)) != CLI_EXIT_OK) goto done;
    if ((rc = cli_db_model(db, cli_get(&a, "model"), 1, 0, o.device, 1, &m, &model_id,
                           &is_default)) != CLI_EXIT_OK)
        goto done;
    if ((st = cli_library_load(db, &lib)) != CDB_OK ||
        (st = cli_library_normalize(db, model_id, &lib, NULL)) != CDB_OK ||
        (st = cli_library_resolve(db, model_id, &lib, abs, is_file, a.n_pos, o.follow_symlinks, o.no_exif,
                                  &targets, &n_targets)) != CDB_OK) {
        rc = ingest_error(st, "cannot record the folders to ingest");
        goto done;
    }
    /* the default set first (it does the deletions and moves), then every other set,
    ** the --model one included: each vector set stays complete */
    if (!is_default && (st = cdb_db_model_default(db, &dm)) == CDB_OK &&
        (rc = plan_add(&plan, db, &dm, NULL, o.device)) != CLI_EXIT_OK)
        goto done;
    if ((st = cdb_db_model_get(db, model_id, &dm)) != CDB_OK) {
        rc = ingest_error(st, "cannot read the model record");
        goto done;
    }
    if ((rc = plan_add(&plan, db, &dm, m, o.device)) != CLI_EXIT_OK) goto done;
    m = NULL;
    if (!plan.s[0].m) { /* the default's weights are not where they were recorded */
        rc = cli_load_db_model(db, &plan.s[0].dm, 1, 0, o.device, 0, &plan.s[0].m);
        goto done;
    }
    if ((rc = plan_add_all(&plan, db, o.device)) != CLI_EXIT_OK) goto done;
    st = run_passes("ingest", db, &lib, targets, n_targets, &plan, &o);
    rc = report("ingest", &plan, st, o.json, NULL, NULL);
done:
    plan_free(&plan);
    cdb_model_close(m);
    cli_targets_free(targets, n_targets);
    cli_library_free(&lib);
    cdb_db_close(db);
    for (int i = 0; abs && i < a.n_pos; i++) free(abs[i]);
    free(abs);
    free(is_file);
    cli_args_free(&a);
    return rc;
}

/* ---- reindex ------------------------------------------------------------------------------ */

/* reindex --repair, before the rescan: verify the whole database (and, with deep,
** re-read the files and re-encode a sample: cli_deep_check) and turn what it finds
** into work for the rescan (cdb_db_repair: files whose vectors are missing, lost
** with a deleted or damaged shard, bad, or no longer match the file become pending
** and are re-encoded from the image files; orphan vectors are deleted). Repeated
** while the report was longer than its listed part. `note`: a one-line summary. */
static int repair(cdb_db *db, cdb_model *m, int64_t model_id, double sample, char *note,
                  size_t note_size, int64_t *n_fixed) {
    int64_t found = 0, fixed = 0;
    for (int round = 0; round < 1000; round++) {
        cdb_db_report *r = NULL;
        int64_t n = 0;
        int more;
        cdb_status st = cdb_db_verify(db, &r);
        if (st == CDB_OK && m && round == 0) st = cli_deep_check(db, m, model_id, sample, r, NULL);
        if (st != CDB_OK) {
            cdb_db_report_free(r);
            return ingest_error(st, "cannot verify the database");
        }
        found += r->n_problems;
        more = r->n_problems > r->n_listed;
        if (r->n_problems && (st = cdb_db_repair(db, r, &n)) != CDB_OK) {
            cdb_db_report_free(r);
            return ingest_error(st, "cannot repair the database");
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
    return CLI_EXIT_OK;
}

int cli_cmd_reindex(int argc, char **argv) {
    static const cli_optspec spec[] = {
        {"db", 0, CLI_VALUE},     {"full", 0, CLI_FLAG},    {"device", 0, CLI_VALUE},
        {"batch", 0, CLI_VALUE},  {"threads", 0, CLI_VALUE}, {"wait", 0, CLI_FLAG},
        {"json", 0, CLI_FLAG},    {"quiet", 'q', CLI_FLAG},  {"help", 'h', CLI_FLAG},
        {"repair", 0, CLI_FLAG},  {"model", 0, CLI_VALUE},   {"sample", 0, CLI_VALUE},
        {"decode", 0, CLI_VALUE},
        {0}};
    cli_args a;
    cli_ingest_opts o;
    int rc;
    cdb_db *db = NULL;
    cli_library lib = {0};
    cli_ingest_root *targets = NULL;
    int n_targets = 0;
    run_plan plan = {0};
    char note[1200] = "", repair_note[200] = "";
    int64_t repaired = 0; /* files requeued by --repair: the index is rebuilt */
    double sample = 0;
    cdb_db_model dm;
    cdb_status st;
    if (!cli_begin("reindex", &a, spec, argc, argv, &rc)) goto done;
    if (a.n_pos) {
        rc = cli_usage_error("reindex", "unexpected argument '%s' (reindex rescans the "
                                        "recorded folders; use ingest to add one)",
                             a.pos[0]);
        goto done;
    }
    if ((rc = parse_run_opts("reindex", &a, &o)) != CLI_EXIT_OK) goto done;
    if (cli_get_double(&a, "sample", CLI_DEEP_SAMPLE, 0, 1, &sample)) {
        rc = cli_usage_error("reindex", "%s", a.err);
        goto done;
    }
    o.full = cli_has(&a, "full") > 0;
    if ((rc = cli_open_db(cli_get(&a, "db"), 1, o.wait, &db)) != CLI_EXIT_OK) goto done;
    if (cli_get(&a, "model")) { /* only that set */
        if ((rc = cli_find_db_model(db, cli_get(&a, "model"), &dm)) != CLI_EXIT_OK) goto done;
    } else if ((st = cdb_db_model_default(db, &dm)) != CDB_OK) {
        rc = cli_error("it has no model", "the database is not initialized");
        cli_hint("run 'clipdb init' (it binds the database to a model)");
        goto done;
    }
    if ((rc = plan_add(&plan, db, &dm, NULL, o.device)) != CLI_EXIT_OK) goto done;
    if (!plan.s[0].m) {
        rc = cli_load_db_model(db, &dm, 1, 0, o.device, 0, &plan.s[0].m);
        goto done;
    }
    if (!cli_get(&a, "model") && (rc = plan_add_all(&plan, db, o.device)) != CLI_EXIT_OK)
        goto done;
    if ((st = cli_library_load(db, &lib)) != CDB_OK ||
        (st = cli_library_normalize(db, dm.id, &lib, NULL)) != CDB_OK ||
        (st = cli_library_all(&lib, &targets, &n_targets)) != CDB_OK) {
        rc = ingest_error(st, "cannot list the ingested folders");
        goto done;
    }
    if (cli_has(&a, "repair") > 0 &&
        (rc = repair(db, plan.s[0].m, dm.id, sample, repair_note, sizeof repair_note,
                     &repaired)) != CLI_EXIT_OK)
        goto done;
    st = run_passes("reindex", db, &lib, targets, n_targets, &plan, &o);
    if (st == CDB_OK && !cli_interrupted()) { /* the nightly job also refreshes the indexes */
        cdb_status ist = refresh_indexes(db, &plan, o.full || repaired > 0, note, sizeof note);
        if (ist != CDB_OK) st = ist; /* the run failed: exit 1 */
    }
    rc = report("reindex", &plan, st, o.json, note[0] ? note : NULL,
                repair_note[0] ? repair_note : NULL);
done:
    plan_free(&plan);
    cli_targets_free(targets, n_targets);
    cli_library_free(&lib);
    cdb_db_close(db);
    cli_args_free(&a);
    return rc;
}
