/*
** cmd_ingest.c: the commands that write to a database: `init` (create one bound
** to a model), `ingest PATH...` and `reindex` (the nightly job). Both ingest and
** reindex run the pipeline of pipeline.c; this file parses options, opens the
** database and the model, records the run, and prints the summary (stdout; the
** live progress line is on stderr).
**
** Exit codes: 0 everything processed, 3 some files failed (recorded as errors),
** 1 the run failed (a full disk included: its own message and hint), 130
** interrupted (what was committed stays). `reindex --repair` first turns what
** cdb_db_verify finds into pending work (cdb_db_repair) that the rescan redoes.
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

#if CDB_CLI_HAVE_DB
#include "db/db.h"
#endif
#if CDB_CLI_HAVE_ENCODER
#include "encoder/encoder.h"
#endif

#define NO_DB "the database module (db/) is not linked into this build"
#define NO_ENCODER "the encoder module is not linked into this build"

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

#if CDB_CLI_HAVE_DB && CDB_CLI_HAVE_ENCODER
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
#endif


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
#if CDB_CLI_HAVE_DB && CDB_CLI_HAVE_ENCODER
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
#else
    rc = cli_not_available("init", CDB_CLI_HAVE_DB ? NO_ENCODER : NO_DB);
#endif
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
    o->label = cmd;
    return CLI_EXIT_OK;
}

/* The summary (stdout) and the exit code of a run. */
static int report(const char *cmd, const cli_ingest_summary *s, cdb_status rc, int json,
                  const char *index_note, const char *repair_note) {
    int code = rc != CDB_OK        ? CLI_EXIT_FAIL
               : s->interrupted    ? CLI_EXIT_INTERRUPTED
               : (s->errors || s->walk_errors) ? CLI_EXIT_PARTIAL
                                   : CLI_EXIT_OK;
    const char *status = code == CLI_EXIT_OK        ? "ok"
                         : code == CLI_EXIT_PARTIAL ? "partial"
                         : code == CLI_EXIT_INTERRUPTED ? "interrupted"
                                                    : "failed";
    if (json) {
        cli_json j;
        cli_json_init(&j, stdout, 1);
        cli_json_begin_object(&j);
        cli_json_key(&j, "command"); cli_json_str(&j, cmd);
        cli_json_key(&j, "status"); cli_json_str(&j, status);
        cli_json_key(&j, "exit_code"); cli_json_int(&j, code);
        cli_json_key(&j, "found"); cli_json_int(&j, s->found);
        cli_json_key(&j, "added"); cli_json_int(&j, s->added);
        cli_json_key(&j, "changed"); cli_json_int(&j, s->changed);
        cli_json_key(&j, "moved"); cli_json_int(&j, s->moved);
        cli_json_key(&j, "touched"); cli_json_int(&j, s->touched);
        cli_json_key(&j, "deleted"); cli_json_int(&j, s->deleted);
        cli_json_key(&j, "unchanged"); cli_json_int(&j, s->unchanged);
        cli_json_key(&j, "errors"); cli_json_int(&j, s->errors);
        cli_json_key(&j, "not_images"); cli_json_int(&j, s->skipped);
        cli_json_key(&j, "walk_errors"); cli_json_int(&j, s->walk_errors);
        cli_json_key(&j, "symlinks_skipped"); cli_json_int(&j, s->links_skipped);
        cli_json_key(&j, "seconds"); cli_json_num(&j, s->seconds, 3);
        cli_json_key(&j, "interrupted"); cli_json_bool(&j, s->interrupted);
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
        char b[8][32], dur[32];
        double rate = s->seconds > 0 ? (double)(s->found) / s->seconds : 0;
        printf("%s: %s files: %s added, %s changed, %s moved, %s deleted, %s errors, "
               "%s unchanged, %s not images (%s, %.1f files/s)%s\n",
               cmd, cli_fmt_count(s->found, b[0], 32), cli_fmt_count(s->added, b[1], 32),
               cli_fmt_count(s->changed, b[2], 32), cli_fmt_count(s->moved, b[3], 32),
               cli_fmt_count(s->deleted, b[4], 32), cli_fmt_count(s->errors, b[5], 32),
               cli_fmt_count(s->unchanged + s->touched, b[6], 32),
               cli_fmt_count(s->skipped, b[7], 32), cli_fmt_duration(s->seconds, dur, sizeof dur),
               rate, s->interrupted ? " [interrupted]" : "");
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
    } else if (s->interrupted) {
        cli_hint("interrupted: what was done is saved; run it again to finish");
    } else if (s->errors) {
        cli_hint("run 'clipdb errors' to see why %s file%s failed", 
                                 s->errors == 1 ? "a" : "some", s->errors == 1 ? "" : "s");
    }
    return code;
}

#if CDB_CLI_HAVE_DB && CDB_CLI_HAVE_ENCODER
/* Records a run in the catalog around the pipeline. */
static cdb_status run_pipeline(const char *kind, cdb_db *db, cdb_model *m, int64_t model_id,
                               int is_default, const cli_ingest_root *roots, int n,
                               const cli_ingest_opts *o, cli_ingest_summary *sum) {
    int64_t run_id = 0;
    char js[512], why[1024] = "";
    cdb_status rc;
    cdb_db_run_begin(db, kind, &run_id);
    rc = cli_pipeline_run(db, cdb_db_dir(db), m, model_id, is_default, roots, n, o, sum);
    snprintf(js, sizeof js,
             "{\"found\":%lld,\"added\":%lld,\"changed\":%lld,\"moved\":%lld,\"touched\":%lld,"
             "\"deleted\":%lld,\"errors\":%lld,\"unchanged\":%lld,\"not_images\":%lld,"
             "\"seconds\":%.3f}",
             (long long)sum->found, (long long)sum->added, (long long)sum->changed,
             (long long)sum->moved, (long long)sum->touched, (long long)sum->deleted,
             (long long)sum->errors, (long long)sum->unchanged, (long long)sum->skipped,
             sum->seconds);
    if (rc != CDB_OK) /* recording the run must not overwrite why it failed */
        snprintf(why, sizeof why, "%s", cdb_errmsg());
    if (run_id)
        cdb_db_run_finish(db, run_id,
                          rc != CDB_OK         ? "failed"
                          : sum->interrupted   ? "interrupted"
                          : sum->errors        ? "partial"
                                               : "ok",
                          js);
    if (rc != CDB_OK) cdb_seterr(rc, "%s", why);
    return rc;
}
#endif

#if CDB_CLI_HAVE_DB && CDB_CLI_HAVE_ENCODER
typedef struct root_list {
    cli_ingest_root *r;
    int n, cap;
} root_list;

static int on_root(int64_t id, const char *path, void *ud) {
    root_list *l = ud;
    if (l->n == l->cap) {
        int nc = l->cap ? l->cap * 2 : 16;
        cli_ingest_root *p = realloc(l->r, sizeof *p * (size_t)nc);
        if (!p) return 1;
        l->r = p;
        l->cap = nc;
    }
    l->r[l->n].root_id = id;
    l->r[l->n].sub = NULL;
    l->r[l->n].sub_is_file = 0;
    if (!(l->r[l->n].path = strdup(path))) return 1;
    l->n++;
    return 0;
}
#endif

#if CDB_CLI_HAVE_DB && CDB_CLI_HAVE_ENCODER
/* The recorded root that holds abs (itself or an ancestor; the longest), or -1. */
static int containing_root(const root_list *l, const char *abs) {
    int best = -1;
    size_t best_len = 0;
    for (int i = 0; i < l->n; i++) {
        size_t n = strlen(l->r[i].path);
        if (strncmp(abs, l->r[i].path, n) || (abs[n] != '\0' && abs[n] != '/')) continue;
        if (best < 0 || n > best_len) {
            best = i;
            best_len = n;
        }
    }
    return best;
}
#endif

int cli_cmd_ingest(int argc, char **argv) {
    static const cli_optspec spec[] = {
        {"db", 0, CLI_VALUE},       {"model", 0, CLI_VALUE},  {"device", 0, CLI_VALUE},
        {"batch", 0, CLI_VALUE},    {"threads", 0, CLI_VALUE}, {"follow-symlinks", 0, CLI_FLAG},
        {"no-exif", 0, CLI_FLAG},   {"wait", 0, CLI_FLAG},     {"json", 0, CLI_FLAG},
        {"quiet", 'q', CLI_FLAG},   {"help", 'h', CLI_FLAG},   {0}};
    cli_args a;
    cli_ingest_opts o;
    int rc;
    if (!cli_begin("ingest", &a, spec, argc, argv, &rc)) goto done;
    if (a.n_pos == 0) {
        rc = cli_usage_error("ingest", "no PATH given");
        goto done;
    }
    if ((rc = parse_run_opts("ingest", &a, &o)) != CLI_EXIT_OK) goto done;
    o.follow_symlinks = cli_has(&a, "follow-symlinks") > 0;
    o.no_exif = cli_has(&a, "no-exif") > 0;
#if CDB_CLI_HAVE_DB && CDB_CLI_HAVE_ENCODER
    {
        cdb_db *db = NULL;
        cdb_model *m = NULL;
        int64_t model_id = 0;
        int is_default = 1;
        cli_ingest_root *roots = calloc((size_t)a.n_pos, sizeof *roots);
        char **abs = calloc((size_t)a.n_pos, sizeof *abs), **own = calloc((size_t)a.n_pos * 2, sizeof *own);
        int *is_file = calloc((size_t)a.n_pos, sizeof *is_file);
        root_list known = {0};
        cli_ingest_summary sum;
        cdb_status st = CDB_OK;
        if (!roots || !abs || !own || !is_file) {
            rc = cli_error("out of memory", "cannot ingest");
            goto ingest_done;
        }
        /* every PATH must exist before anything is written */
        for (int i = 0; i < a.n_pos; i++) {
            char buf[PATH_MAX];
            struct stat sb;
            if (!realpath(a.pos[i], buf) || stat(buf, &sb) != 0) {
                rc = cli_error(strerror(errno), "cannot ingest %s", a.pos[i]);
                goto ingest_done;
            }
            if (!S_ISDIR(sb.st_mode) && !S_ISREG(sb.st_mode)) {
                rc = cli_error("not a folder or a regular file", "cannot ingest %s", a.pos[i]);
                goto ingest_done;
            }
            is_file[i] = S_ISREG(sb.st_mode);
            if (!(abs[i] = strdup(buf))) {
                rc = cli_error("out of memory", "cannot ingest");
                goto ingest_done;
            }
        }
        if ((rc = cli_open_db(cli_get(&a, "db"), 1, o.wait, &db)) != CLI_EXIT_OK) goto ingest_done;
        if ((rc = cli_db_model(db, cli_get(&a, "model"), 1, 0, o.device, 1, &m, &model_id,
                               &is_default)) != CLI_EXIT_OK)
            goto ingest_done;
        if ((st = cdb_db_roots_foreach(db, on_root, &known)) != CDB_OK) {
            rc = ingest_error(st, "cannot list the ingested folders");
            goto ingest_done;
        }
        /* a PATH inside a recorded folder is ingested as that part of it (one copy of
        ** each file); otherwise it becomes a new root (a file: its folder, that file) */
        for (int i = 0; i < a.n_pos; i++) {
            int k = containing_root(&known, abs[i]);
            if (k >= 0) {
                size_t n = strlen(known.r[k].path);
                roots[i].root_id = known.r[k].root_id;
                roots[i].path = known.r[k].path;
                roots[i].sub = abs[i][n] ? abs[i] + n + 1 : NULL;
                roots[i].sub_is_file = is_file[i];
                continue;
            }
            if (is_file[i]) {
                char *d = strdup(abs[i]), *b = strdup(abs[i]);
                own[2 * i] = d ? strdup(dirname(d)) : NULL;
                own[2 * i + 1] = b ? strdup(basename(b)) : NULL;
                free(d);
                free(b);
            } else {
                own[2 * i] = strdup(abs[i]);
            }
            if (!own[2 * i] || (is_file[i] && !own[2 * i + 1])) {
                rc = cli_error("out of memory", "cannot ingest");
                goto ingest_done;
            }
            if ((st = cdb_db_root_add(db, own[2 * i], &roots[i].root_id)) != CDB_OK) {
                rc = ingest_error(st, "cannot record the folder %s", own[2 * i]);
                goto ingest_done;
            }
            roots[i].path = own[2 * i];
            roots[i].sub = own[2 * i + 1];
            roots[i].sub_is_file = is_file[i];
            if (!is_file[i]) on_root(roots[i].root_id, own[2 * i], &known); /* for later PATHs */
        }
        st = run_pipeline("ingest", db, m, model_id, is_default, roots, a.n_pos, &o, &sum);
        rc = report("ingest", &sum, st, o.json, NULL, NULL);
    ingest_done:
        cdb_model_close(m);
        cdb_db_close(db);
        for (int i = 0; own && i < 2 * a.n_pos; i++) free(own[i]);
        for (int i = 0; abs && i < a.n_pos; i++) free(abs[i]);
        for (int i = 0; i < known.n; i++) free((char *)known.r[i].path);
        free(known.r);
        free(own);
        free(abs);
        free(is_file);
        free(roots);
    }
#else
    (void)report;
    rc = cli_not_available("ingest", CDB_CLI_HAVE_DB ? NO_ENCODER : NO_DB);
#endif
done:
    cli_args_free(&a);
    return rc;
}


#if CDB_CLI_HAVE_DB && CDB_CLI_HAVE_ENCODER
/* reindex --repair, before the rescan: verify the whole database and turn what
** it finds into work for the rescan (cdb_db_repair: files whose vectors are
** missing, lost with a deleted or damaged shard, or bad become pending and are
** re-encoded from the image files; orphan vectors are deleted). Repeated while
** the report was longer than its listed part. `note` gets a one-line summary. */
static int repair(cdb_db *db, char *note, size_t note_size, int64_t *n_fixed) {
    int64_t found = 0, fixed = 0;
    for (int round = 0; round < 1000; round++) {
        cdb_db_report *r = NULL;
        int64_t n = 0;
        int more;
        cdb_status st = cdb_db_verify(db, &r);
        if (st != CDB_OK) return ingest_error(st, "cannot verify the database");
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
#endif

int cli_cmd_reindex(int argc, char **argv) {
    static const cli_optspec spec[] = {
        {"db", 0, CLI_VALUE},     {"full", 0, CLI_FLAG},    {"device", 0, CLI_VALUE},
        {"batch", 0, CLI_VALUE},  {"threads", 0, CLI_VALUE}, {"wait", 0, CLI_FLAG},
        {"json", 0, CLI_FLAG},    {"quiet", 'q', CLI_FLAG},  {"help", 'h', CLI_FLAG},
        {"repair", 0, CLI_FLAG},  {0}};
    cli_args a;
    cli_ingest_opts o;
    int rc;
    if (!cli_begin("reindex", &a, spec, argc, argv, &rc)) goto done;
    if (a.n_pos) {
        rc = cli_usage_error("reindex", "unexpected argument '%s' (reindex rescans the "
                                        "recorded folders; use ingest to add one)",
                             a.pos[0]);
        goto done;
    }
    if ((rc = parse_run_opts("reindex", &a, &o)) != CLI_EXIT_OK) goto done;
    o.full = cli_has(&a, "full") > 0;
#if CDB_CLI_HAVE_DB && CDB_CLI_HAVE_ENCODER
    {
        cdb_db *db = NULL;
        cdb_model *m = NULL;
        int64_t model_id = 0;
        int is_default = 1;
        root_list roots = {0};
        cli_ingest_summary sum;
        char note[400] = "", repair_note[200] = "";
        int64_t repaired = 0; /* files requeued by --repair: the index is rebuilt */
        cdb_status st;
        if ((rc = cli_open_db(cli_get(&a, "db"), 1, o.wait, &db)) != CLI_EXIT_OK) goto re_done;
        if ((rc = cli_db_model(db, NULL, 1, 0, o.device, 0, &m, &model_id, &is_default)) !=
            CLI_EXIT_OK)
            goto re_done;
        if ((st = cdb_db_roots_foreach(db, on_root, &roots)) != CDB_OK) {
            rc = ingest_error(st, "cannot list the ingested folders");
            goto re_done;
        }
        if (cli_has(&a, "repair") > 0) {
            if ((rc = repair(db, repair_note, sizeof repair_note, &repaired)) != CLI_EXIT_OK)
                goto re_done;
        }
        st = run_pipeline("reindex", db, m, model_id, is_default, roots.r, roots.n, &o, &sum);
#if CDB_CLI_HAVE_INDEX
        if (st == CDB_OK && !sum.interrupted) { /* the nightly job also refreshes the index */
            cli_index_result res;
            char b[32];
            cdb_status ist = cli_index_refresh(db, model_id, cdb_model_get_info(m)->embed_dim,
                                               o.full || repaired > 0, &res);
            if (ist != CDB_OK)
                snprintf(note, sizeof note, "refresh failed: %s", cdb_errmsg());
            else if (res.action == 0)
                snprintf(note, sizeof note, "up to date (%s)", res.why);
            else if (res.action == 1)
                snprintf(note, sizeof note, "added %s vectors (%s)",
                         cli_fmt_count(res.n_added, b, sizeof b), res.why);
            else
                snprintf(note, sizeof note, "rebuilt %s over %s vectors (%s)",
                         cdb_index_kind_name(res.info.kind),
                         cli_fmt_count(res.n_vectors, b, sizeof b), res.why);
            if (ist != CDB_OK) st = ist; /* the run failed: exit 1 */
        }
#endif
        rc = report("reindex", &sum, st, o.json, note[0] ? note : NULL,
                    repair_note[0] ? repair_note : NULL);
    re_done:
        cdb_model_close(m);
        cdb_db_close(db);
        for (int i = 0; i < roots.n; i++) free((char *)roots.r[i].path);
        free(roots.r);
    }
#else
    rc = cli_not_available("reindex", CDB_CLI_HAVE_DB ? NO_ENCODER : NO_DB);
#endif
done:
    cli_args_free(&a);
    return rc;
}
