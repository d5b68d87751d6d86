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
** retried, a folder is missing or unreadable, a model's weights are missing; reindex:
** a vector set it ran still lacks vectors of ok files), 1 the
** run failed (a full disk included: its own message and hint), 130 interrupted
** (what was committed stays). A database bound to the bundled model gets one hint on
** stderr from init, and from an ingest that encoded real photos (bundled_hint).
** `reindex --repair` first turns what cdb_db_verify and
** the deep check find into pending work (cdb_db_repair) that the rescan redoes.
*/
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

#define FREE_SPACE_HINT \
    "free space on the disk that holds the database, then run the same command again: " \
    "what was committed is kept, the rest is redone"

/* A run that failed because the disk is full (the engine's detail code or status). */
static int disk_full(cdb_status rc) {
    return rc != CDB_OK && (cdb_engine_errcode() == CDB_ENGINE_E_DISK_FULL || rc == CDB_NOSPACE);
}

/* --thumb-size N: 0 or CDB_ENGINE_THUMB_MIN..MAX (the value stays *px when absent). */
static int thumb_size_opt(const char *cmd, cli_args *a, long *px) {
    if (cdb_cli_get_int(a, "thumb-size", *px, 0, CDB_ENGINE_THUMB_MAX, px))
        return cdb_cli_usage_error(cmd, "%s", a->err);
    if (*px > 0 && *px < CDB_ENGINE_THUMB_MIN)
        return cdb_cli_usage_error(cmd, "--thumb-size: %ld is too small (0 for none, or %d to %d)",
                                   *px, CDB_ENGINE_THUMB_MIN, CDB_ENGINE_THUMB_MAX);
    return CLI_EXIT_OK;
}

/* --max-pixels N: the database's pixel limit, 0 for the default (-1 when absent). */
static int max_pixels_opt(const char *cmd, cli_args *a, long *px) {
    if (cdb_cli_get_int(a, "max-pixels", -1, 0, 1L << 40, px))
        return cdb_cli_usage_error(cmd, "%s", a->err);
    return CLI_EXIT_OK;
}

/* Records --max-pixels (when given) in the database before a run. */
static int apply_max_pixels(cdb_engine *e, long px) {
    int64_t requeued = 0;
    char b[32];
    if (px < 0) return CLI_EXIT_OK;
    if (cdb_engine_set_max_pixels(e, px, &requeued) != CDB_OK) return cdb_cli_engine_fail(NULL);
    if (requeued && !cdb_cli_quiet())
        fprintf(stderr, "clipdb: %s photo%s refused for %s size read again\n",
                cdb_out_fmt_count(requeued, b, sizeof b), requeued == 1 ? "" : "s",
                requeued == 1 ? "its" : "their");
    return CLI_EXIT_OK;
}

/* The new user's hint (stderr, once) when the database's default model is the bundled
** one: init says it at once, ingest when its run encoded real photos. */
static void bundled_hint(cdb_engine *e) {
    cdb_engine_model m;
    if (cdb_cli_quiet() || cdb_engine_find_model(e, NULL, &m) != CDB_OK) return;
    if (cdb_cli_model_is_bundled(e, m.id)) cdb_cli_hint("%s", CDB_CLI_BUNDLED_HINT);
}

int cdb_cli_cmd_init(int argc, char **argv) {
    static const cli_optspec spec[] = {{"db", 0, CLI_VALUE},       {"model", 0, CLI_VALUE},
                                       {"thumb-size", 0, CLI_VALUE}, {"quiet", 'q', CLI_FLAG},
                                       {"help", 'h', CLI_FLAG},      {"max-pixels", 0, CLI_VALUE},
                                       {0}};
    cli_args a;
    int rc;
    long thumb = CDB_ENGINE_THUMB_DEFAULT, max_px = -1;
    if (!cdb_cli_begin("init", &a, spec, argc, argv, &rc)) goto done;
    if ((rc = thumb_size_opt("init", &a, &thumb)) != CLI_EXIT_OK) goto done;
    if ((rc = max_pixels_opt("init", &a, &max_px)) != CLI_EXIT_OK) goto done;
    if (a.n_pos) {
        rc = cdb_cli_usage_error("init", "unexpected argument '%s' (the folder goes in --db)",
                                 a.pos[0]);
        goto done;
    }
    {
        const char *src, *msrc;
        const char *dir = cdb_cli_db_path(cdb_cli_get(&a, "db"), &src);
        const char *mpath = cdb_cli_model_path(cdb_cli_get(&a, "model"), &msrc);
        cdb_engine_create_info info;
        cdb_engine_create_params cp = cdb_engine_create_params_default();
        if (!mpath) {
            char probe[4200];
            FILE *f;
            snprintf(probe, sizeof probe, "%s/catalog.db", dir);
            if ((f = fopen(probe, "rb"))) { /* "already exists" wins, as before */
                fclose(f);
                cdb_engine_create(dir, "", NULL);
                rc = cdb_cli_engine_fail(dir);
                goto done;
            }
            rc = cdb_cli_error("no --model, no CLIPDB_MODEL, and no bundled model was found",
                               "no model to bind the database to");
            cdb_cli_hint("pass --model PATH (a model folder or a .safetensors file)");
            goto done;
        }
        cp.thumb_size = (int)thumb;
        cp.max_pixels = max_px > 0 ? max_px : 0;
        if (cdb_engine_create_with(dir, mpath, &cp, &info) != CDB_OK) {
            rc = cdb_cli_engine_fail(dir);
            goto done;
        }
        if (!cdb_cli_quiet()) {
            cdb_engine *e = NULL;
            printf("Created the database %s (model %s, %d dimensions, %s)\n", cdb_cli_esc(dir),
                   cdb_cli_esc(info.model_name), info.dim, msrc);
            cdb_cli_flush_stdout();
            if (cdb_engine_open(dir, NULL, &e) == CDB_OK) bundled_hint(e);
            cdb_engine_close(e);
        }
        if (!info.text) { /* said even with --quiet: every text search would fail */
            cdb_cli_warn("model %s cannot encode text (%s): text searches will fail, image "
                         "searches (search --image) work",
                         info.model_name,
                         info.has_tower ? "no tokenizer came with it, and the standard "
                                          "vocabulary is missing or does not fit it"
                                        : "it has no text tower");
            if (info.has_tower)
                cdb_cli_hint("a model folder holds its tokenizer files (vocab.json and "
                             "merges.txt): pass the folder as --model");
        }
        rc = CLI_EXIT_OK;
    }
done:
    cdb_cli_args_free(&a);
    return rc;
}

/* Options shared by ingest and reindex. */
typedef struct run_opts {
    cdb_engine_run_params rp;
    cdb_k_device device;
    int wait, json;
    long max_pixels; /* -1: keep the database's setting */
} run_opts;

/* --part I/N: part I (1..N) of an N-way partition (cdb_engine_run_params); 0/0 absent. */
static int part_opt(const char *cmd, cli_args *a, int *index, int *count) {
    const char *v = cdb_cli_get(a, "part");
    char *end = NULL;
    long i, n;
    *index = *count = 0;
    if (!v) return CLI_EXIT_OK;
    errno = 0;
    i = strtol(v, &end, 10);
    if (end != v && *end == '/' && end[1] >= '0' && end[1] <= '9') {
        const char *ns = end + 1;
        n = strtol(ns, &end, 10);
        if (!errno && !*end && n >= 1 && n <= CLI_MAX_PARTS && i >= 1 && i <= n) {
            *index = (int)i;
            *count = (int)n;
            return CLI_EXIT_OK;
        }
    }
    return cdb_cli_usage_error(cmd, "--part: expected I/N with 1 <= I <= N <= %d (part I of N, "
                               "counted from 1), got '%s'", CLI_MAX_PARTS, v);
}

static int parse_run_opts(const char *cmd, cli_args *a, run_opts *o) {
    long batch, threads, mem;
    int rc;
    static const char *const modes[] = {"exact", "fast", NULL};
    if (cdb_cli_get_int(a, "batch", 32, 1, 4096, &batch) ||
        cdb_cli_get_int(a, "threads", 0, 0, 1024, &threads) ||
        cdb_cli_get_int(a, "decode-memory", 0, 1, 1L << 30, &mem))
        return cdb_cli_usage_error(cmd, "%s", a->err);
    memset(o, 0, sizeof *o);
    if ((rc = max_pixels_opt(cmd, a, &o->max_pixels)) != CLI_EXIT_OK) return rc;
    o->rp = cdb_engine_run_params_default();
    o->rp.decode_memory_mb = mem;
    o->rp.batch = cdb_cli_get(a, "batch") ? (int)batch : 0; /* 0: the engine sizes it */
    o->rp.threads = threads ? (int)threads : cdb_default_threads();
    if ((rc = cdb_cli_device(cmd, cdb_cli_get(a, "device"), &o->device)) != CLI_EXIT_OK) return rc;
    o->wait = cdb_cli_has(a, "wait") > 0;
    o->json = cdb_cli_has(a, "json") > 0;
    if ((o->rp.decode = cdb_cli_get_choice(a, "decode", modes, -1)) < 0 && cdb_cli_get(a, "decode"))
        return cdb_cli_usage_error(cmd, "%s", a->err);
    return part_opt(cmd, a, &o->rp.part_index, &o->rp.part_count);
}

/* ---- the summary ---------------------------------------------------------------------- */

/* ", 3 symlinks skipped": a count the JSON always has, in the line when not zero; one
** and many: what follows the count (the same for words with no plural). */
static size_t extra_count(char *buf, size_t size, size_t o, int64_t n, const char *one,
                          const char *many) {
    char b[32];
    if (!n || o >= size) return o;
    return o + (size_t)snprintf(buf + o, size - o, ", %s %s", cdb_out_fmt_count(n, b, 32),
                                n == 1 ? one : many);
}

static void summary_line(const char *label, const cdb_engine_summary *s) {
    char b[9][32], dur[32], retry[64] = "", more[256] = "", touched[64] = "";
    double rate = s->seconds > 0 ? (double)(s->found) / s->seconds : 0;
    size_t o = 0;
    extra_count(retry, sizeof retry, 0, s->retry, "to retry", "to retry");
    if (s->touched) /* among the unchanged: only their time changed */
        snprintf(touched, sizeof touched, " (%s touched)", cdb_out_fmt_count(s->touched, b[8], 32));
    o = extra_count(more, sizeof more, o,
                    s->walk_errors > s->missing_roots ? s->walk_errors - s->missing_roots : 0,
                    "unreadable while walking", "unreadable while walking");
    o = extra_count(more, sizeof more, o, s->missing_roots, "folder unavailable",
                    "folders unavailable");
    extra_count(more, sizeof more, o, s->links_skipped, "symlink skipped", "symlinks skipped");
    printf("%s: %s file%s: %s added, %s changed, %s moved, %s deleted, %s error%s%s, "
           "%s unchanged%s, %s %s%s (%s, %.1f files/s)%s\n",
           label, cdb_out_fmt_count(s->found, b[0], 32), s->found == 1 ? "" : "s",
           cdb_out_fmt_count(s->added, b[1], 32), cdb_out_fmt_count(s->changed, b[2], 32),
           cdb_out_fmt_count(s->moved, b[3], 32), cdb_out_fmt_count(s->deleted, b[4], 32),
           cdb_out_fmt_count(s->errors, b[5], 32), s->errors == 1 ? "" : "s", retry,
           cdb_out_fmt_count(s->unchanged + s->touched, b[6], 32), touched,
           cdb_out_fmt_count(s->skipped, b[7], 32), s->skipped == 1 ? "not an image" : "not images",
           more,
           cdb_cli_fmt_duration(s->seconds, dur, sizeof dur), rate,
           /* also for a Ctrl-C that came after the last batch: the exit status is 130
           ** and stderr says "interrupted" then too, so the summary agrees with them */
           s->interrupted || cdb_cli_interrupted() ? " [interrupted]" : "");
}

static void summary_fields(cdb_json *j, const cdb_engine_summary *s) {
    cdb_json_key(j, "found"); cdb_json_int(j, s->found);
    cdb_json_key(j, "added"); cdb_json_int(j, s->added);
    cdb_json_key(j, "changed"); cdb_json_int(j, s->changed);
    cdb_json_key(j, "moved"); cdb_json_int(j, s->moved);
    cdb_json_key(j, "touched"); cdb_json_int(j, s->touched);
    cdb_json_key(j, "deleted"); cdb_json_int(j, s->deleted);
    cdb_json_key(j, "unchanged"); cdb_json_int(j, s->unchanged);
    cdb_json_key(j, "errors"); cdb_json_int(j, s->errors);
    cdb_json_key(j, "retry"); cdb_json_int(j, s->retry);
    cdb_json_key(j, "not_images"); cdb_json_int(j, s->skipped);
    cdb_json_key(j, "walk_errors"); cdb_json_int(j, s->walk_errors);
    cdb_json_key(j, "missing_folders"); cdb_json_int(j, s->missing_roots);
    cdb_json_key(j, "symlinks_skipped"); cdb_json_int(j, s->links_skipped);
    cdb_json_key(j, "decode_peak_pixels"); cdb_json_int(j, s->decode_peak_pixels);
    cdb_json_key(j, "decode_waits"); cdb_json_int(j, s->decode_waits);
    cdb_json_key(j, "seconds"); cdb_json_num(j, s->seconds, 3);
}

/* 1 when a set the run brought up to date still lacks vectors (reindex counts them). */
static int incomplete(const cdb_engine_run_report *r) {
    for (int i = 0; i < r->n_sets; i++)
        if (r->sets[i].n_missing) return 1;
    return 0;
}

/* The summary (stdout) and the exit code of a run that started. */
static int report(const char *cmd, const cdb_engine_run_report *r, cdb_status rc, int json) {
    static const cdb_engine_summary none;
    const cdb_engine_summary *s = r->n_sets ? &r->sets[0].sum : &none;
    int code = rc != CDB_OK        ? CLI_EXIT_FAIL
               : cdb_cli_interrupted() ? CLI_EXIT_INTERRUPTED
               : r->partial        ? CLI_EXIT_PARTIAL
                                   : CLI_EXIT_OK;
    const char *status = code == CLI_EXIT_OK            ? "ok"
                         : code == CLI_EXIT_PARTIAL     ? "partial"
                         : code == CLI_EXIT_INTERRUPTED ? "interrupted"
                                                        : "failed";
    const char *index_note = r->index_note[0] ? r->index_note : NULL;
    const char *repair_note = r->repair_note[0] ? r->repair_note : NULL;
    if (json) {
        cdb_json j;
        cdb_cli_json_doc(&j, cmd);
        cdb_json_key(&j, "status"); cdb_json_str(&j, status);
        cdb_json_key(&j, "exit_code"); cdb_json_int(&j, code);
        cdb_json_key(&j, "model"); cdb_json_str(&j, r->n_sets ? r->sets[0].model.name : "");
        summary_fields(&j, s);
        cdb_json_key(&j, "interrupted"); cdb_json_bool(&j, cdb_cli_interrupted());
        cdb_json_key(&j, "sets"); /* every vector set this run brought up to date */
        cdb_json_begin_array(&j);
        for (int i = 0; i < r->n_sets; i++) {
            cdb_json_begin_object(&j);
            cdb_json_key(&j, "model"); cdb_json_str(&j, r->sets[i].model.name);
            cdb_json_key(&j, "model_id"); cdb_json_int(&j, r->sets[i].model.id);
            cdb_json_key(&j, "ran"); cdb_json_bool(&j, r->sets[i].ran);
            if (r->sets[i].ran) summary_fields(&j, &r->sets[i].sum);
            if (r->sets[i].ran && !strcmp(cmd, "reindex")) {
                cdb_json_key(&j, "files_without_vector");
                cdb_json_int(&j, r->sets[i].n_missing);
            }
            cdb_json_end_object(&j);
        }
        cdb_json_end_array(&j);
        if (repair_note) {
            cdb_json_key(&j, "repair");
            cdb_json_str(&j, repair_note);
        }
        if (index_note) {
            cdb_json_key(&j, "index");
            cdb_json_str(&j, index_note);
        }
        if (rc != CDB_OK) {
            cdb_json_key(&j, "error");
            cdb_json_str(&j, cdb_errmsg());
        }
        cdb_json_end_object(&j);
        cdb_json_done(&j);
    } else {
        summary_line(cmd, s);
        for (int i = 1; i < r->n_sets; i++) {
            char label[200];
            if (!r->sets[i].ran) continue;
            snprintf(label, sizeof label, "%s [%s]", cmd, r->sets[i].model.name);
            summary_line(label, &r->sets[i].sum);
        }
        if (repair_note) printf("repair: %s\n", repair_note);
        if (index_note) printf("index: %s\n", index_note);
    }
    cdb_cli_flush_stdout();
    if (disk_full(rc)) {
        /* exit 1 like any failure, but say what to do: nothing committed is lost */
        cdb_cli_error_status(rc, "%s stopped: no space left on device", cmd);
        cdb_cli_hint(FREE_SPACE_HINT);
    } else if (rc != CDB_OK) {
        cdb_cli_error_status(rc, "%s failed", cmd);
    } else if (cdb_cli_interrupted()) {
        cdb_cli_hint("interrupted: what was done is saved; run it again to finish");
    } else {
        for (int i = 0; i < r->n_sets; i++)
            if (r->sets[i].n_missing) {
                char b[32];
                cdb_cli_warn("model '%s' still has no vector for %s file%s",
                             r->sets[i].model.name, cdb_out_fmt_count(r->sets[i].n_missing, b, 32),
                             r->sets[i].n_missing == 1 ? "" : "s");
            }
        if (r->errors || r->retry || s->walk_errors)
            cdb_cli_hint("run 'clipdb errors' to see what failed%s",
                         r->retry ? "; files that failed for a passing reason are retried by the "
                                    "next run"
                                  : "");
        else if (incomplete(r))
            cdb_cli_hint("run 'clipdb reindex --repair' to complete every set");
    }
    return code;
}

/* ---- ingest ----------------------------------------------------------------------------- */

int cdb_cli_cmd_ingest(int argc, char **argv) {
    static const cli_optspec spec[] = {
        {"db", 0, CLI_VALUE},       {"model", 0, CLI_VALUE},  {"device", 0, CLI_VALUE},
        {"batch", 0, CLI_VALUE},    {"threads", 0, CLI_VALUE}, {"follow-symlinks", 0, CLI_FLAG},
        {"no-follow-symlinks", 0, CLI_FLAG}, {"no-exif", 0, CLI_FLAG},   {"wait", 0, CLI_FLAG},
        {"exif", 0, CLI_FLAG},      {"decode", 0, CLI_VALUE}, {"max-pixels", 0, CLI_VALUE},
        {"decode-memory", 0, CLI_VALUE}, {"exclude", 0, CLI_VALUE}, {"part", 0, CLI_VALUE},
        {"json", 0, CLI_FLAG},      {"quiet", 'q', CLI_FLAG},  {"help", 'h', CLI_FLAG},   {0}};
    cli_args a;
    run_opts o;
    int rc, *is_file = NULL;
    char **abs = NULL;
    cdb_engine *e = NULL;
    cdb_engine_run_report *r = NULL;
    cdb_status st;
    if (!cdb_cli_begin("ingest", &a, spec, argc, argv, &rc)) goto done;
    if (a.n_pos == 0) {
        rc = cdb_cli_usage_error("ingest", "no PATH given");
        goto done;
    }
    if ((rc = parse_run_opts("ingest", &a, &o)) != CLI_EXIT_OK) goto done;
    if (cdb_cli_has(&a, "follow-symlinks") && cdb_cli_has(&a, "no-follow-symlinks")) {
        rc = cdb_cli_usage_error("ingest",
                                 "--follow-symlinks and --no-follow-symlinks exclude each other");
        goto done;
    }
    o.rp.follow_symlinks = cdb_cli_has(&a, "follow-symlinks")      ? 1
                           : cdb_cli_has(&a, "no-follow-symlinks") ? 0
                                                               : -1;
    if (cdb_cli_has(&a, "exif") && cdb_cli_has(&a, "no-exif")) {
        rc = cdb_cli_usage_error("ingest", "--exif and --no-exif exclude each other");
        goto done;
    }
    o.rp.no_exif = cdb_cli_has(&a, "no-exif") ? 1 : cdb_cli_has(&a, "exif") ? 0 : -1;
    o.rp.model = cdb_cli_get(&a, "model");
    const char **excludes = NULL;
    o.rp.n_excludes = cdb_cli_get_all(&a, "exclude", &excludes);
    o.rp.excludes = excludes;
    for (int i = 0; i < o.rp.n_excludes; i++)
        if (!excludes[i][0] || strpbrk(excludes[i], "\r\n")) {
            rc = cdb_cli_usage_error("ingest", "--exclude: expected one rule (a glob), got '%s'",
                                     excludes[i]);
            goto done;
        }
    /* every PATH checks out before the database is even opened */
    if (!(is_file = calloc((size_t)a.n_pos, sizeof *is_file)) || !(r = calloc(1, sizeof *r))) {
        rc = cdb_cli_error("out of memory", "cannot ingest");
        goto done;
    }
    if (cdb_engine_check_paths(a.pos, a.n_pos, &abs, is_file) != CDB_OK) {
        rc = cdb_cli_engine_fail(NULL);
        goto done;
    }
    if ((rc = cdb_cli_engine_open(cdb_cli_get(&a, "db"), 1, o.wait, o.device, 0, &e)) !=
        CLI_EXIT_OK)
        goto done;
    if ((rc = apply_max_pixels(e, o.max_pixels)) != CLI_EXIT_OK) goto done;
    st = cdb_engine_ingest(e, (const char *const *)abs, a.n_pos, &o.rp, r);
    if (st != CDB_OK && !r->started) {
        rc = cdb_cli_engine_fail(cdb_cli_get(&a, "model"));
        goto done;
    }
    rc = report("ingest", r, st, o.json);
    for (int i = 0; i < r->n_sets; i++)
        if (r->sets[i].sum.real_photos > 0) {
            bundled_hint(e);
            break;
        }
done:
    cdb_engine_close(e);
    cdb_engine_paths_free(abs, a.n_pos);
    free(is_file);
    free(r);
    cdb_cli_args_free(&a);
    return rc;
}

/* ---- reindex ------------------------------------------------------------------------------ */

int cdb_cli_cmd_reindex(int argc, char **argv) {
    static const cli_optspec spec[] = {
        {"db", 0, CLI_VALUE},     {"full", 0, CLI_FLAG},    {"device", 0, CLI_VALUE},
        {"batch", 0, CLI_VALUE},  {"threads", 0, CLI_VALUE}, {"wait", 0, CLI_FLAG},
        {"json", 0, CLI_FLAG},    {"quiet", 'q', CLI_FLAG},  {"help", 'h', CLI_FLAG},
        {"repair", 0, CLI_FLAG},  {"model", 0, CLI_VALUE},   {"sample", 0, CLI_VALUE},
        {"decode", 0, CLI_VALUE}, {"thumb-size", 0, CLI_VALUE}, {"accept-root", 0, CLI_VALUE},
        {"max-pixels", 0, CLI_VALUE}, {"decode-memory", 0, CLI_VALUE}, {"part", 0, CLI_VALUE},
        {0}};
    cli_args a;
    run_opts o;
    int rc;
    long thumb = -1;
    const char **accept = NULL;
    cdb_engine *e = NULL;
    cdb_engine_run_report *r = NULL;
    cdb_status st;
    if (!cdb_cli_begin("reindex", &a, spec, argc, argv, &rc)) goto done;
    if (a.n_pos) {
        rc = cdb_cli_usage_error("reindex", "unexpected argument '%s' (reindex rescans the "
                                        "recorded folders; use ingest to add one)",
                             a.pos[0]);
        goto done;
    }
    if ((rc = parse_run_opts("reindex", &a, &o)) != CLI_EXIT_OK) goto done;
    if (cdb_cli_get_double(&a, "sample", CDB_ENGINE_DEEP_SAMPLE, 0, 1, &o.rp.sample)) {
        rc = cdb_cli_usage_error("reindex", "%s", a.err);
        goto done;
    }
    if ((rc = thumb_size_opt("reindex", &a, &thumb)) != CLI_EXIT_OK) goto done;
    o.rp.full = cdb_cli_has(&a, "full") > 0;
    o.rp.repair = cdb_cli_has(&a, "repair") > 0;
    o.rp.model = cdb_cli_get(&a, "model");
    o.rp.n_accept_roots = cdb_cli_get_all(&a, "accept-root", &accept);
    o.rp.accept_roots = accept;
    if (!(r = calloc(1, sizeof *r))) {
        rc = cdb_cli_error("out of memory", "cannot reindex");
        goto done;
    }
    if ((rc = cdb_cli_engine_open(cdb_cli_get(&a, "db"), 1, o.wait, o.device, 0, &e)) !=
        CLI_EXIT_OK)
        goto done;
    if (thumb >= 0 && cdb_engine_set_thumb_size(e, (int)thumb) != CDB_OK) {
        rc = cdb_cli_engine_fail(NULL);
        goto done;
    }
    if ((rc = apply_max_pixels(e, o.max_pixels)) != CLI_EXIT_OK) goto done;
    st = cdb_engine_reindex(e, &o.rp, r);
    if (st != CDB_OK && !r->started) {
        rc = cdb_cli_engine_fail(cdb_cli_get(&a, "model"));
        goto done;
    }
    rc = report("reindex", r, st, o.json);
done:
    cdb_engine_close(e);
    free(r);
    cdb_cli_args_free(&a);
    return rc;
}
