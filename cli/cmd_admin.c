/*
** cmd_admin.c: the commands that look after a database: `index build|info`,
** `stats`, `models --db` (and --default), `verify`, `errors` and `export`, over
** engine/engine.h. They read the database through a reader (never blocking an
** ingest), except `models --default` (a writer); `index build` takes no writer lock
** either: the index file is replaced atomically and the catalog is not written.
*/
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"

/* ---- index ------------------------------------------------------------------------- */

static int index_build(cdb_engine *e, const char *model, const cdb_engine_index_params *p,
                       int json) {
    cdb_engine_index_report r;
    char dur[32], cnt[32];
    if (cdb_engine_index_build(e, model, p, &r) != CDB_OK) return cdb_cli_engine_fail(model);
    if (json) {
        cdb_json j;
        cdb_cli_json_doc(&j, NULL);
        cdb_json_key(&j, "model"); cdb_json_str(&j, r.model);
        cdb_json_key(&j, "type"); cdb_json_str(&j, r.kind);
        cdb_json_key(&j, "factory"); cdb_json_str(&j, r.factory);
        cdb_json_key(&j, "vectors"); cdb_json_int(&j, r.n_vectors);
        cdb_json_key(&j, "on_disk"); cdb_json_bool(&j, r.on_disk);
        cdb_json_key(&j, "seconds"); cdb_json_num(&j, r.seconds, 3);
        cdb_json_path(&j, "path", r.path);
        cdb_json_end_object(&j);
        cdb_json_done(&j);
    } else if (!cdb_cli_quiet()) {
        printf("Built the index of model %s: %s (%s) over %s vector%s in %s%s\n",
               cdb_cli_esc(r.model), r.kind, r.factory,
               cdb_out_fmt_count(r.n_vectors, cnt, sizeof cnt),
               r.n_vectors == 1 ? "" : "s", cdb_cli_fmt_duration(r.seconds, dur, sizeof dur),
               r.on_disk ? ", lists on disk" : "");
    }
    return CLI_EXIT_OK;
}

static int index_info(cdb_engine *e, const char *model, int json) {
    cdb_engine_index_info *in = calloc(1, sizeof *in);
    int rc = CLI_EXIT_OK;
    if (!in) return cdb_cli_error("out of memory", "cannot describe the index");
    if (cdb_engine_index_describe(e, model, in) != CDB_OK) {
        rc = cdb_cli_engine_fail(model);
        if (in->path[0]) cdb_cli_hint("'clipdb index build' rebuilds it from the stored vectors");
        goto done;
    }
    if (!in->has_index) {
        if (json) {
            cdb_json j;
            cdb_cli_json_doc(&j, NULL);
            cdb_json_key(&j, "model");
            cdb_json_str(&j, in->model);
            cdb_json_key(&j, "index");
            cdb_json_null(&j);
            cdb_json_end_object(&j);
            cdb_json_done(&j);
        } else {
            printf("model %s: no index yet (searches scan every vector exactly)\n",
                   cdb_cli_esc(in->model));
        }
        cdb_cli_hint("'clipdb index build' creates one; 'clipdb reindex' keeps it fresh");
        goto done;
    }
    if (json) {
        cdb_json j;
        cdb_cli_json_doc(&j, NULL);
        cdb_json_key(&j, "model"); cdb_json_str(&j, in->model);
        cdb_json_key(&j, "index");
        cdb_json_begin_object(&j);
        cdb_json_key(&j, "type"); cdb_json_str(&j, in->kind);
        cdb_json_key(&j, "factory"); cdb_json_str(&j, in->factory);
        cdb_json_key(&j, "dim"); cdb_json_int(&j, in->dim);
        cdb_json_key(&j, "covered"); cdb_json_int(&j, in->covered);
        cdb_json_key(&j, "stored"); cdb_json_int(&j, in->stored);
        cdb_json_key(&j, "not_covered"); cdb_json_int(&j, in->not_covered);
        cdb_json_key(&j, "watermark"); cdb_json_int(&j, in->watermark);
        cdb_json_key(&j, "generation"); cdb_json_int(&j, in->generation);
        cdb_json_key(&j, "nlist"); cdb_json_int(&j, in->nlist);
        cdb_json_key(&j, "nprobe"); cdb_json_int(&j, in->nprobe);
        cdb_json_key(&j, "ef_search"); cdb_json_int(&j, in->ef_search);
        cdb_json_key(&j, "rerank_factor"); cdb_json_int(&j, in->rerank_factor);
        cdb_json_key(&j, "bytes"); cdb_json_int(&j, in->bytes);
        cdb_json_key(&j, "lists_on_disk"); cdb_json_bool(&j, in->on_disk);
        cdb_json_end_object(&j);
        cdb_json_path(&j, "path", in->path);
        cdb_json_end_object(&j);
        cdb_json_done(&j);
    } else {
        char b1[32], b2[32], b3[32];
        printf("model %s: index %s\n%s%s", cdb_cli_esc(in->model), cdb_cli_esc(in->path), in->text,
               in->text[0] && in->text[strlen(in->text) - 1] != '\n' ? "\n" : "");
        if (in->nlist > 0) /* IVF kinds: where the inverted lists are */
            printf("lists: %s\n", in->on_disk ? "on disk (a file beside the index, mapped)"
                                               : "in memory");
        printf("coverage: %s of %s stored vector%s indexed; %s newer %s searched exactly\n",
               cdb_out_fmt_count(in->covered, b1, sizeof b1),
               cdb_out_fmt_count(in->stored, b2, sizeof b2), in->stored == 1 ? "" : "s",
               cdb_out_fmt_count(in->not_covered, b3, sizeof b3),
               in->not_covered == 1 ? "one" : "ones");
    }
done:
    free(in);
    return rc;
}

int cdb_cli_cmd_index(int argc, char **argv) {
    static const cli_optspec spec[] = {{"db", 0, CLI_VALUE},      {"model", 0, CLI_VALUE},
                                       {"type", 0, CLI_VALUE},    {"json", 0, CLI_FLAG},
                                       {"on-disk", 0, CLI_FLAG},  {"quiet", 'q', CLI_FLAG},
                                       {"out", 0, CLI_VALUE},     {"trained", 0, CLI_VALUE},
                                       {"help", 'h', CLI_FLAG},   {0}};
    /* kinds[i] is the cdb_engine_index_kind of types[i] */
    static const char *const types[] = {"auto",   "flat",        "hnsw", "ivf-sq",
                                        "ivf-pq", "ivf-hnsw-pq", NULL};
    static const cdb_engine_index_kind kinds[] = {
        CDB_ENGINE_INDEX_AUTO,   CDB_ENGINE_INDEX_FLAT,  CDB_ENGINE_INDEX_HNSW,
        CDB_ENGINE_INDEX_IVF_SQ, CDB_ENGINE_INDEX_IVF_PQ, CDB_ENGINE_INDEX_IVF_HNSW_PQ};
    cli_args a;
    int rc, type;
    cdb_engine *e = NULL;
    if (!cdb_cli_begin("index", &a, spec, argc, argv, &rc)) goto done;
    if (a.n_pos == 0) {
        rc = cdb_cli_usage_error("index", "missing subcommand (build, info, train or add-part)");
        goto done;
    }
    if ((type = cdb_cli_get_choice(&a, "type", types, 0)) < 0) {
        rc = cdb_cli_usage_error("index", "%s", a.err);
        goto done;
    }
    if (!strcmp(a.pos[0], "train") || !strcmp(a.pos[0], "add-part")) { /* cmd_parts.c */
        rc = !strcmp(a.pos[0], "train") ? cdb_cli_index_train(&a, kinds[type])
                                        : cdb_cli_index_add_part(&a);
        goto done;
    }
    if (strcmp(a.pos[0], "build") && strcmp(a.pos[0], "info")) {
        rc = cdb_cli_usage_error("index", "unknown subcommand '%s' (expected build, info, "
                                 "train or add-part)", a.pos[0]);
        goto done;
    }
    if (a.n_pos > 1) {
        rc = cdb_cli_usage_error("index", "unexpected argument '%s'", a.pos[1]);
        goto done;
    }
    if ((rc = cdb_cli_engine_open(cdb_cli_get(&a, "db"), 0, 0, CLI_DEVICE_CPU, 0, &e)) !=
        CLI_EXIT_OK)
        goto done;
    if (!strcmp(a.pos[0], "build")) {
        cdb_engine_index_params p = {kinds[type], cdb_cli_has(&a, "on-disk") > 0};
        rc = index_build(e, cdb_cli_get(&a, "model"), &p, cdb_cli_has(&a, "json") > 0);
    } else
        rc = index_info(e, cdb_cli_get(&a, "model"), cdb_cli_has(&a, "json") > 0);
done:
    cdb_engine_close(e);
    cdb_cli_args_free(&a);
    return rc;
}

/* ---- stats ------------------------------------------------------------------------- */

static void print_model_stats(const cdb_engine_model_stats *m, cdb_json *j) {
    char b[32], b2[32];
    if (j) {
        cdb_json_begin_object(j);
        cdb_json_key(j, "id"); cdb_json_int(j, m->model.id);
        cdb_json_key(j, "name"); cdb_json_str(j, m->model.name);
        cdb_json_key(j, "weights_hash"); cdb_json_str(j, m->model.weights_hash);
        cdb_json_key(j, "dim"); cdb_json_int(j, m->model.dim);
        cdb_json_key(j, "default"); cdb_json_bool(j, m->model.is_default);
        cdb_json_key(j, "vectors"); cdb_json_int(j, m->n_vectors);
        cdb_json_key(j, "files_without_vector"); cdb_json_int(j, m->files_without_vector);
        cdb_json_key(j, "decode"); cdb_json_str(j, m->model.decode ? "fast" : "exact");
        cdb_json_key(j, "index");
        if (m->has_index) {
            cdb_json_begin_object(j);
            cdb_json_key(j, "type"); cdb_json_str(j, m->index_kind);
            cdb_json_key(j, "covered"); cdb_json_int(j, m->index_covered);
            cdb_json_end_object(j);
        } else {
            cdb_json_null(j);
        }
        cdb_json_end_object(j);
        return;
    }
    printf("  %s %s (%d dims): %s vector%s", m->model.is_default ? "*" : " ",
           cdb_cli_esc(m->model.name), m->model.dim, cdb_out_fmt_count(m->n_vectors, b, sizeof b),
           m->n_vectors == 1 ? "" : "s");
    if (m->files_without_vector) /* 'clipdb reindex' completes the set */
        printf(" (%s file%s without one)", cdb_out_fmt_count(m->files_without_vector, b, sizeof b),
               m->files_without_vector == 1 ? "" : "s");
    if (m->model.decode)
        printf(", fast decode%s", m->model.decode_settled ? "" : " (not every vector yet)");
    if (m->has_index)
        printf(", index %s covering %s", m->index_kind,
               cdb_out_fmt_count(m->index_covered, b2, sizeof b2));
    else
        printf(", no index");
    printf("\n");
}

int cdb_cli_models_db(const char *db_flag, const char *make_default, int json) {
    cdb_engine *e = NULL;
    cdb_engine_stats s;
    int rc;
    memset(&s, 0, sizeof s);
    if ((rc = cdb_cli_engine_open(db_flag, make_default != NULL, 0, CLI_DEVICE_CPU, 0, &e)) !=
        CLI_EXIT_OK)
        return rc;
    if (make_default) {
        cdb_engine_model m;
        if (cdb_engine_set_default_model(e, make_default, &m) != CDB_OK) {
            rc = cdb_cli_engine_fail(make_default);
            goto done;
        }
        if (!cdb_cli_quiet())
            printf("The default model is now %s (%d dims)\n", cdb_cli_esc(m.name), m.dim);
        rc = CLI_EXIT_OK;
        goto done;
    }
    if (cdb_engine_stats_get(e, CDB_ENGINE_STATS_INDEX, &s) != CDB_OK) {
        rc = cdb_cli_engine_fail(NULL);
        goto done;
    }
    if (json) {
        cdb_json j;
        cdb_cli_json_doc(&j, NULL);
        cdb_json_key(&j, "models");
        cdb_json_begin_array(&j);
        for (int i = 0; i < s.n_models; i++) print_model_stats(&s.models[i], &j);
        cdb_json_end_array(&j);
        cdb_json_end_object(&j);
        cdb_json_done(&j);
    } else {
        printf("models of %s (* = default):\n", cdb_cli_esc(cdb_engine_dir(e)));
        for (int i = 0; i < s.n_models; i++) print_model_stats(&s.models[i], NULL);
    }
    rc = CLI_EXIT_OK;
done:
    cdb_engine_stats_free(&s);
    cdb_engine_close(e);
    return rc;
}

/* stats, verify, errors: --db, --json, no positionals. */
static int simple_args(const char *cmd, cli_args *a, const cli_optspec *spec, int argc,
                       char **argv, int *rc) {
    if (!cdb_cli_begin(cmd, a, spec, argc, argv, rc)) return 0;
    if (a->n_pos) {
        *rc = cdb_cli_usage_error(cmd, "unexpected argument '%s'", a->pos[0]);
        return 0;
    }
    return 1;
}

static const char *const k_states[] = {"", "pending", "ok", "error", "deleted"};

int cdb_cli_cmd_stats(int argc, char **argv) {
    static const cli_optspec spec[] = {{"db", 0, CLI_VALUE},     {"json", 0, CLI_FLAG},
                                       {"quiet", 'q', CLI_FLAG}, {"help", 'h', CLI_FLAG},
                                       {0}};
    cli_args a;
    int rc;
    cdb_engine *e = NULL;
    cdb_engine_stats s;
    memset(&s, 0, sizeof s);
    if (!simple_args("stats", &a, spec, argc, argv, &rc)) goto done;
    if ((rc = cdb_cli_engine_open(cdb_cli_get(&a, "db"), 0, 0, CLI_DEVICE_CPU, 0, &e)) !=
        CLI_EXIT_OK)
        goto done;
    if (cdb_engine_stats_get(e, CDB_ENGINE_STATS_DISK | CDB_ENGINE_STATS_INDEX, &s) != CDB_OK) {
        rc = cdb_cli_engine_fail(NULL);
        goto done;
    }
    if (cdb_cli_has(&a, "json")) {
        cdb_json j;
        cdb_cli_json_doc(&j, NULL);
        cdb_json_path(&j, "database", cdb_engine_dir(e));
        cdb_json_key(&j, "files");
        cdb_json_begin_object(&j);
        for (int st = 1; st <= 4; st++) {
            cdb_json_key(&j, k_states[st]);
            cdb_json_int(&j, s.files[st]);
        }
        cdb_json_key(&j, "to_retry"); cdb_json_int(&j, s.n_retry);
        cdb_json_end_object(&j);
        cdb_json_key(&j, "roots"); cdb_json_int(&j, s.n_roots);
        cdb_json_key(&j, "walk_problems"); cdb_json_int(&j, s.n_walk_problems);
        cdb_json_key(&j, "shards"); cdb_json_int(&j, s.n_shards);
        cdb_json_key(&j, "shards_unreadable"); cdb_json_int(&j, s.n_shards_unreadable);
        cdb_json_key(&j, "generation"); cdb_json_int(&j, s.generation);
        cdb_json_key(&j, "disk_bytes"); cdb_json_int(&j, s.disk_bytes);
        cdb_json_key(&j, "models");
        cdb_json_begin_array(&j);
        for (int i = 0; i < s.n_models; i++) print_model_stats(&s.models[i], &j);
        cdb_json_end_array(&j);
        cdb_json_end_object(&j);
        cdb_json_done(&j);
    } else {
        char b[6][32];
        printf("database:  %s\n", cdb_cli_esc(cdb_engine_dir(e)));
        printf("files:     %s ok, %s pending, %s error%s, %s deleted",
               cdb_out_fmt_count(s.files[2], b[0], 32), cdb_out_fmt_count(s.files[1], b[1], 32),
               cdb_out_fmt_count(s.files[3], b[2], 32), s.files[3] == 1 ? "" : "s",
               cdb_out_fmt_count(s.files[4], b[3], 32));
        if (s.n_retry) printf(" (%s to retry)", cdb_out_fmt_count(s.n_retry, b[0], 32));
        printf("\nfolders:   %s", cdb_out_fmt_count(s.n_roots, b[4], 32));
        if (s.n_walk_problems)
            printf(" (%s problem%s: 'clipdb errors')",
                   cdb_out_fmt_count(s.n_walk_problems, b[0], 32),
                   s.n_walk_problems == 1 ? "" : "s");
        printf("\n");
        printf("shards:    %s", cdb_out_fmt_count(s.n_shards, b[5], 32));
        if (s.n_shards_unreadable)
            printf(" (%s missing or damaged: run 'clipdb verify')",
                   cdb_out_fmt_count(s.n_shards_unreadable, b[0], 32));
        printf("\n");
        printf("disk:      %s\n", cdb_cli_fmt_bytes(s.disk_bytes, b[0], 32));
        printf("models:    (* = default)\n");
        for (int i = 0; i < s.n_models; i++) print_model_stats(&s.models[i], NULL);
    }
    rc = CLI_EXIT_OK;
done:
    cdb_engine_stats_free(&s);
    cdb_engine_close(e);
    cdb_cli_args_free(&a);
    return rc;
}

/* ---- verify ------------------------------------------------------------------------ */

static void verify_json(const cdb_engine_verify_report *r, double sample) {
    cdb_json j;
    cdb_cli_json_doc(&j, NULL);
    cdb_json_key(&j, "ok"); cdb_json_bool(&j, r->n_problems == 0);
    cdb_json_key(&j, "problems_found"); cdb_json_int(&j, r->n_problems);
    cdb_json_key(&j, "vectors_checked"); cdb_json_int(&j, r->n_vectors_checked);
    cdb_json_key(&j, "files_ok"); cdb_json_int(&j, r->n_files_ok);
    cdb_json_key(&j, "files_pending"); cdb_json_int(&j, r->n_files_pending);
    cdb_json_key(&j, "vectors_lost"); cdb_json_int(&j, r->n_lost);
    cdb_json_key(&j, "files_lost"); cdb_json_int(&j, r->n_lost_files);
    cdb_json_key(&j, "problems_listed_all"); cdb_json_bool(&j, r->n_more == 0);
    cdb_json_key(&j, "unfinished");
    cdb_json_begin_object(&j);
    cdb_json_key(&j, "files_pending"); cdb_json_int(&j, r->n_files_unfinished);
    cdb_json_path(&j, "forget", r->unfinished_forget); /* null when none */
    cdb_json_path(&j, "move", r->unfinished_move);
    cdb_json_end_object(&j);
    if (r->deep) {
        cdb_json_key(&j, "deep");
        cdb_json_begin_object(&j);
        cdb_json_key(&j, "files"); cdb_json_int(&j, r->n_files);
        cdb_json_key(&j, "rehashed"); cdb_json_int(&j, r->n_hashed);
        cdb_json_key(&j, "reencoded"); cdb_json_int(&j, r->n_encoded);
        cdb_json_key(&j, "stale"); cdb_json_int(&j, r->n_stale);
        cdb_json_key(&j, "gone"); cdb_json_int(&j, r->n_gone);
        cdb_json_key(&j, "unreadable"); cdb_json_int(&j, r->n_unreadable);
        cdb_json_key(&j, "max_ulp"); cdb_json_int(&j, r->max_ulp);
        cdb_json_key(&j, "sample"); cdb_json_num(&j, sample, 4);
        cdb_json_end_object(&j);
    }
    cdb_json_key(&j, "problems");
    cdb_json_begin_array(&j);
    for (int i = 0; i < r->n_listed; i++) {
        const cdb_engine_problem *p = &r->problems[i];
        cdb_json_begin_object(&j);
        cdb_json_key(&j, "kind"); cdb_json_str(&j, p->kind);
        if (strcmp(p->kind, "index")) {
            cdb_json_key(&j, "shard"); cdb_json_int(&j, p->shard);
            cdb_json_key(&j, "model_id"); cdb_json_int(&j, p->model_id);
            cdb_json_key(&j, "file_id"); cdb_json_int(&j, p->file_id);
            if (p->path) cdb_json_path(&j, "path", p->path);
        }
        cdb_json_key(&j, "message"); cdb_json_str(&j, p->msg);
        cdb_json_end_object(&j);
    }
    cdb_json_end_array(&j);
    cdb_json_end_object(&j);
    cdb_json_done(&j);
}

/* The unfinished work verify found, one line each with what finishes it: no damage. */
static void verify_unfinished(const cdb_engine_verify_report *r) {
    char b[32];
    if (r->unfinished_forget)
        printf("unfinished: the forget of %s (cut short, or running now); the next command "
               "that writes to the database finishes it, e.g. 'clipdb reindex'\n",
               cdb_cli_esc(r->unfinished_forget));
    if (r->unfinished_move)
        printf("unfinished: the move of %s (cut short, or running now); the next command "
               "that writes to the database finishes it, e.g. 'clipdb reindex'\n",
               cdb_cli_esc(r->unfinished_move));
    if (r->n_files_unfinished > 0)
        printf("unfinished: %s file%s pending (an ingest or reindex cut short, or running "
               "now); 'clipdb reindex' finishes %s\n",
               cdb_out_fmt_count(r->n_files_unfinished, b, sizeof b),
               r->n_files_unfinished == 1 ? "" : "s", r->n_files_unfinished == 1 ? "it" : "them");
}

static void verify_text(const cdb_engine_verify_report *r) {
    char b1[32], b2[32];
    for (int i = 0; i < r->n_listed; i++) {
        const cdb_engine_problem *p = &r->problems[i];
        /* name the photo (the deep check's messages start with it already) */
        if (p->path && strcmp(p->kind, "file-changed") && strcmp(p->kind, "vector-mismatch"))
            printf("%s: %s: %s\n", p->kind, cdb_cli_esc(p->path), cdb_cli_esc(p->msg));
        else
            printf("%s: %s\n", p->kind, cdb_cli_esc(p->msg));
    }
    if (r->n_more) printf("... and %lld more\n", (long long)r->n_more);
    if (r->n_lost)
        printf("lost: %s vector%s of %s file%s (in missing or damaged shards)\n",
               cdb_out_fmt_count(r->n_lost, b1, sizeof b1), r->n_lost == 1 ? "" : "s",
               cdb_out_fmt_count(r->n_lost_files, b2, sizeof b2),
               r->n_lost_files == 1 ? "" : "s");
    if (r->deep && !cdb_cli_quiet()) {
        char b3[32], b4[32];
        printf("deep: %s file%s re-read and hashed, %s re-encoded (largest difference %lld "
               "fp16 ulp)",
               cdb_out_fmt_count(r->n_hashed, b1, sizeof b1), r->n_hashed == 1 ? "" : "s",
               cdb_out_fmt_count(r->n_encoded, b2, sizeof b2), (long long)r->max_ulp);
        if (r->n_stale || r->n_gone || r->n_unreadable)
            printf("; not checked: %s changed since the last scan, %s gone, %s unreadable "
                   "(the next reindex updates them)",
                   cdb_out_fmt_count(r->n_stale, b3, sizeof b3),
                   cdb_out_fmt_count(r->n_gone, b4, sizeof b4),
                   cdb_out_fmt_count(r->n_unreadable, b1, sizeof b1));
        printf("\n");
    }
    verify_unfinished(r);
    if (r->n_problems == 0 && !cdb_cli_quiet())
        printf("ok: %s file%s, %s vector%s checked, no problems%s\n",
               cdb_out_fmt_count(r->n_files_ok, b1, sizeof b1), r->n_files_ok == 1 ? "" : "s",
               cdb_out_fmt_count(r->n_vectors_checked, b2, sizeof b2),
               r->n_vectors_checked == 1 ? "" : "s",
               r->unfinished_forget || r->unfinished_move || r->n_files_unfinished
                   ? " (work unfinished: above)" : "");
}

int cdb_cli_cmd_verify(int argc, char **argv) {
    static const cli_optspec spec[] = {{"db", 0, CLI_VALUE},     {"json", 0, CLI_FLAG},
                                       {"quiet", 'q', CLI_FLAG}, {"help", 'h', CLI_FLAG},
                                       {"deep", 0, CLI_FLAG},    {"sample", 0, CLI_VALUE},
                                       {0}};
    cli_args a;
    int rc;
    double sample = CDB_ENGINE_DEEP_SAMPLE;
    cdb_engine *e = NULL;
    cdb_engine_verify_report r;
    memset(&r, 0, sizeof r);
    if (!simple_args("verify", &a, spec, argc, argv, &rc)) goto done;
    if (cdb_cli_get_double(&a, "sample", CDB_ENGINE_DEEP_SAMPLE, 0, 1, &sample)) {
        rc = cdb_cli_usage_error("verify", "%s", a.err);
        goto done;
    }
    if (cdb_cli_get(&a, "sample") && !cdb_cli_has(&a, "deep")) {
        rc = cdb_cli_usage_error("verify", "--sample goes with --deep");
        goto done;
    }
    if ((rc = cdb_cli_engine_open(cdb_cli_get(&a, "db"), 0, 0, CLI_DEVICE_CPU, 0, &e)) !=
        CLI_EXIT_OK)
        goto done;
    if (cdb_engine_verify(e, cdb_cli_has(&a, "deep") > 0, sample, &r) != CDB_OK) {
        rc = cdb_cli_engine_fail(NULL);
        goto done;
    }
    if (cdb_cli_has(&a, "json")) verify_json(&r, sample);
    else verify_text(&r);
    if (r.n_problems) {
        rc = cdb_cli_error(NULL, "%lld problem%s found", (long long)r.n_problems,
                           r.n_problems == 1 ? "" : "s");
        cdb_cli_hint("'clipdb reindex --repair' re-encodes the files whose vectors are missing, "
                 "lost or bad");
    } else {
        rc = CLI_EXIT_OK;
    }
done:
    cdb_engine_verify_report_free(&r);
    cdb_engine_close(e);
    cdb_cli_args_free(&a);
    return rc;
}

/* ---- errors ------------------------------------------------------------------------ */

/* What `errors` lists, in this order: files that cannot be used (kind "error",
** quarantined until they change), files that failed for a passing reason (kind
** "retry": the next run tries them again), and what the walks could not read
** (kind "walk": unreadable folders, broken links, missing folders). */
int cdb_cli_cmd_errors(int argc, char **argv) {
    static const cli_optspec spec[] = {{"db", 0, CLI_VALUE},    {"json", 0, CLI_FLAG},
                                       {"null", '0', CLI_FLAG}, {"help", 'h', CLI_FLAG},
                                       {0}};
    cli_args a;
    int rc, json, nul;
    cdb_engine *e = NULL;
    cdb_engine_error_entry *v = NULL;
    int64_t n = 0;
    cdb_json j;
    if (!simple_args("errors", &a, spec, argc, argv, &rc)) goto done;
    json = cdb_cli_has(&a, "json") > 0;
    nul = cdb_cli_has(&a, "null") > 0;
    if ((rc = cdb_cli_engine_open(cdb_cli_get(&a, "db"), 0, 0, CLI_DEVICE_CPU, 0, &e)) !=
        CLI_EXIT_OK)
        goto done;
    if (cdb_engine_errors(e, &v, &n) != CDB_OK) {
        rc = cdb_cli_engine_fail(NULL);
        goto done;
    }
    if (json) {
        cdb_cli_json_doc(&j, NULL);
        cdb_json_key(&j, "errors");
        cdb_json_begin_array(&j);
    }
    for (int64_t i = 0; i < n; i++) {
        const cdb_engine_error_entry *x = &v[i];
        if (json) {
            cdb_json_begin_object(&j);
            cdb_json_key(&j, "kind"); cdb_json_str(&j, x->kind);
            if (x->id) {
                cdb_json_key(&j, "id");
                cdb_json_int(&j, x->id);
            }
            cdb_json_path(&j, "path", x->path);
            cdb_json_key(&j, "reason"); cdb_json_str(&j, x->reason);
            if (x->id) {
                cdb_json_key(&j, "size");
                cdb_json_int(&j, x->size);
            }
            cdb_json_end_object(&j);
        } else {
            printf("%s\t%s%s%c", nul ? x->path : cdb_cli_esc(x->path),
                   strcmp(x->kind, "retry") ? "" : "will retry: ",
                   nul ? x->reason : cdb_cli_esc(x->reason), nul ? '\0' : '\n');
        }
    }
    if (json) {
        cdb_json_end_array(&j);
        cdb_json_key(&j, "count");
        cdb_json_int(&j, n);
        cdb_json_end_object(&j);
        cdb_json_done(&j);
    }
    cdb_cli_flush_stdout();
    rc = CLI_EXIT_OK;
done:
    cdb_engine_errors_free(v, n);
    cdb_engine_close(e);
    cdb_cli_args_free(&a);
    return rc;
}

/* ---- export ------------------------------------------------------------------------ */

/* The files an export writes in its --out folder. npy: vectors.npy, ids.npy, paths.txt,
** paths0.txt and photos.jsonl (the rows' metadata); jsonl: vectors.jsonl alone (fv), the
** metadata in each row. */
typedef struct export_out {
    int jsonl, fp32, dim;
    const char *dir;
    cdb_engine *e;             /* for the rows' photo metadata */
    FILE *fv, *fi, *fp, *fp0, *fm;
    char p_vec[4096], p_ids[4096], p_paths[4096], p_paths0[4096], p_meta[4096];
    long hdr_end_v, hdr_end_i; /* where the .npy headers end (rewritten in place) */
    int64_t n;                 /* rows written */
} export_out;

/* Opens x's files; the .npy headers say n_stored rows (fixed by export_finish when the
** count differs). CLI_EXIT_OK or the error printed. */
static int export_open(export_out *x, int64_t n_stored) {
    int64_t shape[2] = {n_stored, x->dim};
    if (x->jsonl) {
        snprintf(x->p_vec, sizeof x->p_vec, "%s/vectors.jsonl", x->dir);
        if (!(x->fv = fopen(x->p_vec, "wb")))
            return cdb_cli_error(strerror(errno), "cannot write %s", x->p_vec);
        return CLI_EXIT_OK;
    }
    snprintf(x->p_vec, sizeof x->p_vec, "%s/vectors.npy", x->dir);
    snprintf(x->p_ids, sizeof x->p_ids, "%s/ids.npy", x->dir);
    snprintf(x->p_paths, sizeof x->p_paths, "%s/paths.txt", x->dir);
    snprintf(x->p_paths0, sizeof x->p_paths0, "%s/paths0.txt", x->dir);
    x->fv = fopen(x->p_vec, "wb");
    x->fi = fopen(x->p_ids, "wb");
    x->fp = fopen(x->p_paths, "wb");
    x->fp0 = fopen(x->p_paths0, "wb");
    snprintf(x->p_meta, sizeof x->p_meta, "%s/photos.jsonl", x->dir);
    x->fm = fopen(x->p_meta, "wb");
    if (!x->fv || !x->fi || !x->fp || !x->fp0 || !x->fm ||
        cdb_cli_npy_header(x->fv, x->fp32 ? "<f4" : "<f2", shape, 2) ||
        cdb_cli_npy_header(x->fi, "<i8", shape, 1))
        return cdb_cli_error(strerror(errno), "cannot write in %s", x->dir);
    x->hdr_end_v = ftell(x->fv);
    x->hdr_end_i = ftell(x->fi);
    return CLI_EXIT_OK;
}

/* One row's path in paths.txt (one line per row: a newline, carriage return or
** backslash in a name is written as \n, \r or \\ there, so that two names never
** give one line) and paths0.txt (the exact bytes, NUL after each). */
static void export_path(export_out *x, const char *path) {
    for (const char *c = path; *c; c++) {
        if (*c == '\n') fputs("\\n", x->fp);
        else if (*c == '\r') fputs("\\r", x->fp);
        else if (*c == '\\') fputs("\\\\", x->fp);
        else fputc(*c, x->fp);
    }
    fputc('\n', x->fp);
    fputs(path, x->fp0);
    fputc('\0', x->fp0);
}

/* One row of photos.jsonl: {"id", "taken", "taken_source", ...} (cdb_cli_json_photo). */
static void export_meta_row(export_out *x, int64_t id, const cdb_engine_photo *ph) {
    cdb_json j;
    cdb_cli_json_init(&j, x->fm, 0);
    cdb_json_begin_object(&j);
    cdb_json_key(&j, "id"); cdb_json_int(&j, id);
    cdb_cli_json_photo(&j, ph);
    cdb_json_end_object(&j);
    cdb_json_done(&j);
}

/* One row of vectors.jsonl: {"id", "path", "vector", "taken", ...}. */
static void export_jsonl_row(export_out *x, int64_t id, const char *path, const float *v,
                             const cdb_engine_photo *ph) {
    cdb_json j;
    cdb_cli_json_init(&j, x->fv, 0);
    cdb_json_begin_object(&j);
    cdb_json_key(&j, "id"); cdb_json_int(&j, id);
    cdb_json_path(&j, "path", path);
    cdb_cli_json_photo(&j, ph);
    cdb_json_key(&j, "vector");
    cdb_json_begin_array(&j);
    for (int d = 0; d < x->dim; d++) cdb_json_float(&j, v[d]);
    cdb_json_end_array(&j);
    cdb_json_end_object(&j);
    cdb_json_done(&j);
}

/* Writes got rows (ids, their vectors in fp32 and fp16, their paths: taken and freed). */
static void export_rows(export_out *x, int got, const int64_t *ids, const float *v32,
                        const uint16_t *v16, char **paths, cdb_engine_photo *ph) {
    if (cdb_engine_photos_get(x->e, ids, got, ph) != CDB_OK)
        memset(ph, 0, sizeof *ph * (size_t)got); /* shown, not vital: empty records */
    for (int i = 0; i < got; i++) {
        char *path = paths[i];
        paths[i] = NULL;
        if (x->jsonl) {
            export_jsonl_row(x, ids[i], path ? path : "", v32 + (size_t)i * x->dim, &ph[i]);
        } else {
            export_path(x, path ? path : "");
            export_meta_row(x, ids[i], &ph[i]);
        }
        free(path);
    }
    if (!x->jsonl) {
        if (x->fp32) fwrite(v32, sizeof *v32 * (size_t)x->dim, (size_t)got, x->fv);
        else fwrite(v16, sizeof *v16 * (size_t)x->dim, (size_t)got, x->fv);
        fwrite(ids, sizeof *ids, (size_t)got, x->fi);
    }
    x->n += got;
}

/* Closes x's files (NULL ones skipped); 0, or -1 when one failed to close (all are). */
static int export_close(export_out *x) {
    int failed = 0;
    FILE **f[5] = {&x->fv, &x->fi, &x->fp, &x->fp0, &x->fm};
    for (int i = 0; i < 5; i++) {
        if (*f[i] && fclose(*f[i])) failed = 1;
        *f[i] = NULL;
    }
    return failed ? -1 : 0;
}

/* The .npy shapes fixed in place when the rows written are not the n_stored the
** headers said, then every file closed. CLI_EXIT_OK or the error printed. */
static int export_finish(export_out *x, int64_t n_stored) {
    if (!x->jsonl && x->n != n_stored) {
        int64_t shape[2] = {x->n, x->dim};
        rewind(x->fv);
        rewind(x->fi);
        if (cdb_cli_npy_header(x->fv, x->fp32 ? "<f4" : "<f2", shape, 2) ||
            ftell(x->fv) != x->hdr_end_v || cdb_cli_npy_header(x->fi, "<i8", shape, 1) ||
            ftell(x->fi) != x->hdr_end_i)
            return cdb_cli_error("the header changed size", "cannot finish %s", x->p_vec);
    }
    if (export_close(x) != 0) return cdb_cli_error(strerror(errno), "cannot write in %s", x->dir);
    return CLI_EXIT_OK;
}

/* Reads every vector of it, a chunk at a time, into x's files. CLI_EXIT_OK or the
** error printed. */
static int export_all(cdb_engine_vectors *it, export_out *x) {
    const int chunk = 1024;
    int64_t *ids = malloc(sizeof *ids * chunk);
    uint16_t *v16 = malloc(sizeof *v16 * (size_t)chunk * (size_t)x->dim);
    float *v32 = malloc(sizeof *v32 * (size_t)chunk * (size_t)x->dim);
    char **paths = calloc((size_t)chunk, sizeof *paths);
    cdb_engine_photo *ph = malloc(sizeof *ph * chunk);
    int rc = CLI_EXIT_OK, got = 0;
    if (!ids || !v16 || !v32 || !paths || !ph)
        rc = cdb_cli_error("out of memory", "cannot export");
    while (rc == CLI_EXIT_OK) {
        if (cdb_engine_vectors_read(it, chunk, ids, v32, v16, paths, &got) != CDB_OK)
            rc = cdb_cli_engine_fail(NULL);
        else if (got == 0)
            break;
        else
            export_rows(x, got, ids, v32, v16, paths, ph);
    }
    free(ph);
    free(ids);
    free(v16);
    free(v32);
    free(paths);
    return rc;
}

/* 1 when the folder out is the database's folder db or lies inside it (links
** followed; an out not made yet is its parent's real path plus its name). */
static int out_in_database(const char *out, const char *db) {
    char rd[PATH_MAX], ro[PATH_MAX], parent[PATH_MAX];
    size_t n;
    if (!realpath(db, rd)) return 0;
    if (!realpath(out, ro)) {
        char *slash, *base;
        snprintf(parent, sizeof parent, "%s", out);
        for (n = strlen(parent); n > 1 && parent[n - 1] == '/'; n--) parent[n - 1] = '\0';
        slash = strrchr(parent, '/');
        base = slash ? slash + 1 : parent;
        if (!*base || !strcmp(base, ".") || !strcmp(base, "..")) return 0;
        if (slash) *slash = '\0';
        if (!realpath(slash ? (*parent ? parent : "/") : ".", ro) ||
            strlen(ro) + strlen(base) + 2 > sizeof ro)
            return 0;
        if (strcmp(ro, "/")) strcat(ro, "/");
        strcat(ro, base);
    }
    n = strlen(rd);
    return !strncmp(ro, rd, n) && (ro[n] == '\0' || ro[n] == '/');
}

/* After an export in one format, the other format's files of an earlier export into
** the same folder go: a reader must not take them for this one's. */
static void export_drop_other(const export_out *x) {
    static const char *const npy[] = {"vectors.npy", "ids.npy", "paths.txt", "paths0.txt",
                                      "photos.jsonl", NULL};
    static const char *const jsonl[] = {"vectors.jsonl", NULL};
    for (const char *const *f = x->jsonl ? npy : jsonl; *f; f++) {
        char p[4200];
        snprintf(p, sizeof p, "%s/%s", x->dir, *f);
        if (unlink(p) != 0 && errno != ENOENT)
            cdb_cli_warn("%s is left from an earlier export (%s)", p, strerror(errno));
    }
}

int cdb_cli_cmd_export(int argc, char **argv) {
    static const cli_optspec spec[] = {{"db", 0, CLI_VALUE},     {"model", 0, CLI_VALUE},
                                       {"format", 0, CLI_VALUE}, {"dtype", 0, CLI_VALUE},
                                       {"out", 0, CLI_VALUE},    {"quiet", 'q', CLI_FLAG},
                                       {"help", 'h', CLI_FLAG},  {0}};
    static const char *const formats[] = {"npy", "jsonl", NULL};
    static const char *const dtypes[] = {"fp16", "fp32", NULL};
    cli_args a;
    int rc, fmt, dtype;
    cdb_engine *e = NULL;
    cdb_engine_model dm;
    cdb_engine_vectors *it = NULL;
    int64_t n_stored = 0;
    export_out *x = calloc(1, sizeof *x);
    if (!cdb_cli_begin("export", &a, spec, argc, argv, &rc)) goto done;
    if (a.n_pos) {
        rc = cdb_cli_usage_error("export", "unexpected argument '%s' (the folder goes in --out)",
                                 a.pos[0]);
        goto done;
    }
    if ((fmt = cdb_cli_get_choice(&a, "format", formats, 0)) < 0 ||
        (dtype = cdb_cli_get_choice(&a, "dtype", dtypes, 0)) < 0) {
        rc = cdb_cli_usage_error("export", "%s", a.err);
        goto done;
    }
    if (!cdb_cli_get(&a, "out")) {
        rc = cdb_cli_usage_error("export", "missing --out DIR");
        goto done;
    }
    if (!strcmp(cdb_cli_get(&a, "out"), "-")) {
        rc = cdb_cli_usage_error("export", "--out names a folder for the export's files; it cannot "
                             "be standard output (-)");
        goto done;
    }
    if (fmt == 1 && cdb_cli_get(&a, "dtype")) {
        rc = cdb_cli_usage_error("export",
                                 "--dtype is for npy: jsonl writes each stored fp16 value "
                                 "as a decimal that reads back to it as float32 or float16");
        goto done;
    }
    if (!x) {
        rc = cdb_cli_error("out of memory", "cannot export");
        goto done;
    }
    x->dir = cdb_cli_get(&a, "out");
    x->jsonl = fmt == 1;
    x->fp32 = dtype == 1;
    if ((rc = cdb_cli_engine_open(cdb_cli_get(&a, "db"), 0, 0, CLI_DEVICE_CPU, 0, &e)) !=
        CLI_EXIT_OK)
        goto done;
    if (cdb_engine_vectors_open(e, cdb_cli_get(&a, "model"), &it, &dm, &n_stored) != CDB_OK) {
        rc = cdb_cli_engine_fail(cdb_cli_get(&a, "model"));
        goto done;
    }
    if (out_in_database(x->dir, cdb_engine_dir(e))) {
        rc = cdb_cli_usage_error("export", "--out %s is in the database's own folder %s: "
                                 "export to a folder outside it", x->dir, cdb_engine_dir(e));
        goto done;
    }
    if (mkdir(x->dir, 0777) != 0 && errno != EEXIST) {
        rc = cdb_cli_error(strerror(errno), "cannot create %s", x->dir);
        goto done;
    }
    x->dim = dm.dim;
    x->e = e;
    if ((rc = export_open(x, n_stored)) != CLI_EXIT_OK || (rc = export_all(it, x)) != CLI_EXIT_OK ||
        (rc = export_finish(x, n_stored)) != CLI_EXIT_OK)
        goto done;
    export_drop_other(x);
    if (!cdb_cli_quiet()) {
        char b[32];
        printf("Exported %s vector%s (%s, %d dims, model %s) to %s\n",
               cdb_out_fmt_count(x->n, b, sizeof b), x->n == 1 ? "" : "s",
               x->jsonl ? "jsonl" : x->fp32 ? "fp32" : "fp16", dm.dim, cdb_cli_esc(dm.name),
               cdb_cli_esc(x->dir));
    }
done:
    if (x) export_close(x);
    free(x);
    cdb_engine_vectors_close(it);
    cdb_engine_close(e);
    cdb_cli_args_free(&a);
    return rc;
}
