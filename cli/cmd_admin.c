/*
** cmd_admin.c: the commands that look after a database: `index build|info`,
** `stats`, `verify`, `errors` and `export`. They read the database through a
** reader handle (never blocking an ingest), except `index build`, which takes no
** writer lock either: the index file is replaced atomically and the catalog is
** not written.
*/
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"

#if CDB_CLI_HAVE_DB
#include "db/db.h"
#include "kernels/kernels.h"
#endif
#if CDB_CLI_HAVE_INDEX
#include "index/index.h"
#endif
#if CDB_CLI_HAVE_ENCODER
#include "encoder/encoder.h"
#endif

#define NO_DB "the database module (db/) is not linked into this build"
#define NO_INDEX "the database and index modules are not both linked into this build"

#if CDB_CLI_HAVE_DB
/* Bytes used by a folder tree (files only). */
static int64_t du(const char *dir) {
    DIR *d = opendir(dir);
    struct dirent *e;
    int64_t total = 0;
    if (!d) return 0;
    while ((e = readdir(d))) {
        char p[4096];
        struct stat st;
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (lstat(p, &st) != 0) continue;
        if (S_ISDIR(st.st_mode)) total += du(p);
        else if (S_ISREG(st.st_mode)) total += (int64_t)st.st_size;
    }
    closedir(d);
    return total;
}

/* The model named by --model (loaded to learn its hash) or the default one,
** without loading weights when none is named. */
static int pick_model(cdb_db *db, const char *flag, cdb_db_model *out) {
    cdb_status st;
    if (flag && *flag) {
#if CDB_CLI_HAVE_ENCODER
        struct cdb_model *m = NULL;
        int64_t id = 0;
        int rc = cli_db_model(db, flag, 0, 1, 1, 0, &m, &id, NULL);
        cdb_model_close(m);
        if (rc != CLI_EXIT_OK) return rc;
        if ((st = cdb_db_model_get(db, id, out)) != CDB_OK)
            return cli_error_status(st, "cannot read the model record");
        return CLI_EXIT_OK;
#else
        return cli_not_available("--model", "the encoder module is not linked into this build");
#endif
    }
    st = cdb_db_model_default(db, out);
    if (st == CDB_NOTFOUND) {
        cli_error("it has no model", "the database is not initialized");
        cli_hint("run 'clipdb init' (it binds the database to a model)");
        return CLI_EXIT_FAIL;
    }
    if (st != CDB_OK) return cli_error_status(st, "cannot read the database's model");
    return CLI_EXIT_OK;
}
#endif

/* ---- index ------------------------------------------------------------------------- */

int cli_cmd_index(int argc, char **argv) {
    static const cli_optspec spec[] = {{"db", 0, CLI_VALUE},     {"model", 0, CLI_VALUE},
                                       {"type", 0, CLI_VALUE},   {"json", 0, CLI_FLAG},
                                       {"quiet", 'q', CLI_FLAG}, {"help", 'h', CLI_FLAG},
                                       {0}};
    /* same order as cdb_index_kind */
    static const char *const types[] = {"auto", "flat", "hnsw", "ivf-sq", "ivf-pq", NULL};
    cli_args a;
    int rc, type;
    if (!cli_begin("index", &a, spec, argc, argv, &rc)) goto done;
    if (a.n_pos == 0) {
        rc = cli_usage_error("index", "missing subcommand (build or info)");
        goto done;
    }
    if (strcmp(a.pos[0], "build") && strcmp(a.pos[0], "info")) {
        rc = cli_usage_error("index", "unknown subcommand '%s' (expected build or info)",
                             a.pos[0]);
        goto done;
    }
    if (a.n_pos > 1) {
        rc = cli_usage_error("index", "unexpected argument '%s'", a.pos[1]);
        goto done;
    }
    if ((type = cli_get_choice(&a, "type", types, 0)) < 0) {
        rc = cli_usage_error("index", "%s", a.err);
        goto done;
    }
#if CDB_CLI_HAVE_DB && CDB_CLI_HAVE_INDEX
    {
        cdb_db *db = NULL;
        cdb_db_model dm;
        char path[4096];
        cdb_status st;
        int json = cli_has(&a, "json") > 0;
        if ((rc = cli_open_db(cli_get(&a, "db"), 0, 0, &db)) != CLI_EXIT_OK) goto i_done;
        if ((rc = pick_model(db, cli_get(&a, "model"), &dm)) != CLI_EXIT_OK) goto i_done;
        cli_index_path(db, dm.id, path, sizeof path);
        if (!strcmp(a.pos[0], "build")) {
            cli_index_result res;
            char dur[32], cnt[32];
            st = cli_index_build(db, dm.id, dm.dim, type, &res);
            if (st != CDB_OK) {
                rc = cli_error_status(st, "cannot build the index");
                goto i_done;
            }
            if (json) {
                cli_json j;
                cli_json_init(&j, stdout, 1);
                cli_json_begin_object(&j);
                cli_json_key(&j, "model"); cli_json_str(&j, dm.name);
                cli_json_key(&j, "type"); cli_json_str(&j, cdb_index_kind_name(res.info.kind));
                cli_json_key(&j, "factory"); cli_json_str(&j, res.info.factory);
                cli_json_key(&j, "vectors"); cli_json_int(&j, res.n_vectors);
                cli_json_key(&j, "seconds"); cli_json_num(&j, res.seconds, 3);
                cli_json_path(&j, "path", path);
                cli_json_end_object(&j);
                cli_json_done(&j);
            } else if (!cli_quiet()) {
                printf("Built a %s index (%s) of %s vectors for model %s in %s\n",
                       cdb_index_kind_name(res.info.kind), res.info.factory,
                       cli_fmt_count(res.n_vectors, cnt, sizeof cnt), dm.name,
                       cli_fmt_duration(res.seconds, dur, sizeof dur));
            }
            rc = CLI_EXIT_OK;
        } else {
            cdb_index *ix = NULL;
            cdb_index_info info;
            cdb_db_counts counts;
            int64_t *added = NULL;
            size_t n_added = 0, n_uncov = 0;
            st = cdb_index_load(path, &ix);
            if (st == CDB_NOTFOUND) {
                if (json) {
                    printf("{\n  \"model\": ");
                    cli_json_write_string(stdout, dm.name, strlen(dm.name));
                    printf(",\n  \"index\": null\n}\n");
                } else {
                    printf("model %s: no index yet (searches scan every vector exactly)\n", dm.name);
                }
                cli_hint("'clipdb index build' creates one; 'clipdb reindex' keeps it fresh");
                rc = CLI_EXIT_OK;
                goto i_done;
            }
            if (st != CDB_OK) {
                rc = cli_error_status(st, "cannot read the index %s", path);
                cli_hint("'clipdb index build' rebuilds it from the stored vectors");
                goto i_done;
            }
            cdb_index_get_info(ix, &info);
            memset(&counts, 0, sizeof counts);
            cdb_db_get_counts(db, dm.id, &counts);
            if (cli_ids_since(db, dm.id, (int64_t)info.watermark, 0, &added, &n_added) == CDB_OK)
                for (size_t i = 0; i < n_added; i++)
                    if (!cdb_index_covers(ix, added[i])) n_uncov++;
            free(added);
            if (json) {
                struct stat sb;
                cli_json j;
                cli_json_init(&j, stdout, 1);
                cli_json_begin_object(&j);
                cli_json_key(&j, "model"); cli_json_str(&j, dm.name);
                cli_json_key(&j, "index");
                cli_json_begin_object(&j);
                cli_json_key(&j, "type"); cli_json_str(&j, cdb_index_kind_name(info.kind));
                cli_json_key(&j, "factory"); cli_json_str(&j, info.factory);
                cli_json_key(&j, "dim"); cli_json_int(&j, info.dim);
                cli_json_key(&j, "covered"); cli_json_int(&j, info.n_covered);
                cli_json_key(&j, "stored"); cli_json_int(&j, counts.n_vectors);
                cli_json_key(&j, "not_covered"); cli_json_int(&j, (int64_t)n_uncov);
                cli_json_key(&j, "watermark"); cli_json_int(&j, (int64_t)info.watermark);
                cli_json_key(&j, "generation"); cli_json_int(&j, counts.generation);
                cli_json_key(&j, "nlist"); cli_json_int(&j, info.nlist);
                cli_json_key(&j, "nprobe"); cli_json_int(&j, info.nprobe);
                cli_json_key(&j, "ef_search"); cli_json_int(&j, info.ef_search);
                cli_json_key(&j, "rerank_factor"); cli_json_int(&j, info.rerank_factor);
                cli_json_key(&j, "bytes");
                cli_json_int(&j, stat(path, &sb) == 0 ? (int64_t)sb.st_size : 0);
                cli_json_end_object(&j);
                cli_json_path(&j, "path", path);
                cli_json_end_object(&j);
                cli_json_done(&j);
            } else {
                char text[2048], b1[32], b2[32], b3[32];
                cdb_index_info_format(&info, text, sizeof text);
                printf("model %s: index %s\n%s%s", dm.name, path, text,
                       text[0] && text[strlen(text) - 1] != '\n' ? "\n" : "");
                printf("coverage: %s of %s stored vectors indexed; %s newer ones searched exactly\n",
                       cli_fmt_count(info.n_covered, b1, sizeof b1),
                       cli_fmt_count(counts.n_vectors, b2, sizeof b2),
                       cli_fmt_count((int64_t)n_uncov, b3, sizeof b3));
            }
            cdb_index_free(ix);
            rc = CLI_EXIT_OK;
        }
    i_done:
        cdb_db_close(db);
    }
#else
    rc = cli_not_available("index", NO_INDEX);
#endif
done:
    cli_args_free(&a);
    return rc;
}

/* ---- stats ------------------------------------------------------------------------- */

#if CDB_CLI_HAVE_DB
typedef struct stats_ud {
    cdb_db *db;
    cli_json *j;
    int json;
} stats_ud;

static int on_model_stats(const cdb_db_model *m, void *ud_) {
    stats_ud *ud = ud_;
    cdb_db_counts c;
    char b[32];
    memset(&c, 0, sizeof c);
    cdb_db_get_counts(ud->db, m->id, &c);
    if (ud->json) {
        cli_json_begin_object(ud->j);
        cli_json_key(ud->j, "id"); cli_json_int(ud->j, m->id);
        cli_json_key(ud->j, "name"); cli_json_str(ud->j, m->name);
        cli_json_key(ud->j, "weights_hash"); cli_json_str(ud->j, m->weights_hash);
        cli_json_key(ud->j, "dim"); cli_json_int(ud->j, m->dim);
        cli_json_key(ud->j, "default"); cli_json_bool(ud->j, m->is_default);
        cli_json_key(ud->j, "vectors"); cli_json_int(ud->j, c.n_vectors);
        cli_json_key(ud->j, "files_without_vector"); cli_json_int(ud->j, c.n_missing);
        cli_json_key(ud->j, "decode"); cli_json_str(ud->j, m->decode ? "fast" : "exact");
#if CDB_CLI_HAVE_INDEX
        {
            char path[4096];
            cdb_index *ix = NULL;
            cli_index_path(ud->db, m->id, path, sizeof path);
            cli_json_key(ud->j, "index");
            if (cdb_index_load(path, &ix) == CDB_OK) {
                cdb_index_info info;
                cdb_index_get_info(ix, &info);
                cli_json_begin_object(ud->j);
                cli_json_key(ud->j, "type"); cli_json_str(ud->j, cdb_index_kind_name(info.kind));
                cli_json_key(ud->j, "covered"); cli_json_int(ud->j, info.n_covered);
                cli_json_end_object(ud->j);
                cdb_index_free(ix);
            } else {
                cli_json_null(ud->j);
            }
        }
#endif
        cli_json_end_object(ud->j);
    } else {
        printf("  %s %s (%d dims): %s vectors", m->is_default ? "*" : " ", m->name, m->dim,
               cli_fmt_count(c.n_vectors, b, sizeof b));
        if (c.n_missing) /* 'clipdb reindex' completes the set */
            printf(" (%s files without one)", cli_fmt_count(c.n_missing, b, sizeof b));
        if (m->decode) printf(", fast decode%s", m->decode_settled ? "" : " (not every vector yet)");
#if CDB_CLI_HAVE_INDEX
        {
            char path[4096], b2[32];
            cdb_index *ix = NULL;
            cli_index_path(ud->db, m->id, path, sizeof path);
            if (cdb_index_load(path, &ix) == CDB_OK) {
                cdb_index_info info;
                cdb_index_get_info(ix, &info);
                printf(", index %s covering %s", cdb_index_kind_name(info.kind),
                       cli_fmt_count(info.n_covered, b2, sizeof b2));
                cdb_index_free(ix);
            } else {
                printf(", no index");
            }
        }
#endif
        printf("\n");
    }
    return 0;
}
#endif

int cli_models_db(const char *db_flag, const char *make_default, int json) {
    cdb_db *db = NULL;
    cdb_db_model dm;
    cdb_db_counts c;
    cdb_status st;
    int rc;
    if ((rc = cli_open_db(db_flag, make_default != NULL, 0, &db)) != CLI_EXIT_OK) return rc;
    if (make_default) {
        char b[32], b2[32];
        if ((rc = cli_find_db_model(db, make_default, &dm)) != CLI_EXIT_OK) goto done;
        memset(&c, 0, sizeof c);
        if ((st = cdb_db_get_counts(db, dm.id, &c)) != CDB_OK) {
            rc = cli_error_status(st, "cannot count the vectors of '%s'", dm.name);
            goto done;
        }
        /* the default answers every search: it must know every photo */
        if (c.n_missing) {
            rc = cli_error(NULL, "model '%s' has no vector yet for %s of the %s files", dm.name,
                           cli_fmt_count(c.n_missing, b, sizeof b),
                           cli_fmt_count(c.files[CDB_DB_OK], b2, sizeof b2));
            cli_hint("run 'clipdb reindex --model %s' to complete its set first", make_default);
            goto done;
        }
        { /* searches encode texts with the default: it needs a text tower and a tokenizer */
            cdb_model *m = NULL;
            if ((rc = cli_load_db_model(db, &dm, 0, 1, CDB_DEVICE_CPU, 1, &m)) != CLI_EXIT_OK) {
                rc = cli_error(NULL, "model '%s' cannot encode text (no text tower or tokenizer "
                                     "where it is recorded): text searches would fail", dm.name);
                goto done;
            }
            cdb_model_close(m);
        }
        if ((st = cdb_db_model_set_default(db, dm.id)) != CDB_OK) {
            rc = cli_error_status(st, "cannot make '%s' the default", dm.name);
            goto done;
        }
        if (!cli_quiet()) printf("The default model is now %s (%d dims)\n", dm.name, dm.dim);
        rc = CLI_EXIT_OK;
        goto done;
    }
    if (json) {
        cli_json j;
        stats_ud ud = {db, &j, 1};
        cli_json_init(&j, stdout, 1);
        cli_json_begin_object(&j);
        cli_json_key(&j, "models");
        cli_json_begin_array(&j);
        st = cdb_db_models_foreach(db, on_model_stats, &ud);
        cli_json_end_array(&j);
        cli_json_end_object(&j);
        cli_json_done(&j);
    } else {
        stats_ud ud = {db, NULL, 0};
        printf("models of %s (* = default):\n", cdb_db_dir(db));
        st = cdb_db_models_foreach(db, on_model_stats, &ud);
    }
    rc = st == CDB_OK ? CLI_EXIT_OK : cli_error_status(st, "cannot list the models");
done:
    cdb_db_close(db);
    return rc;
}

/* stats, verify, errors: --db, --json, no positionals. */
static int simple_args(const char *cmd, cli_args *a, const cli_optspec *spec, int argc,
                       char **argv, int *rc) {
    if (!cli_begin(cmd, a, spec, argc, argv, rc)) return 0;
    if (a->n_pos) {
        *rc = cli_usage_error(cmd, "unexpected argument '%s'", a->pos[0]);
        return 0;
    }
    return 1;
}

int cli_cmd_stats(int argc, char **argv) {
    static const cli_optspec spec[] = {{"db", 0, CLI_VALUE},     {"json", 0, CLI_FLAG},
                                       {"quiet", 'q', CLI_FLAG}, {"help", 'h', CLI_FLAG},
                                       {0}};
    cli_args a;
    int rc;
    if (!simple_args("stats", &a, spec, argc, argv, &rc)) goto done;
#if CDB_CLI_HAVE_DB
    {
        cdb_db *db = NULL;
        cdb_db_counts c;
        cdb_status st;
        int json = cli_has(&a, "json") > 0;
        int64_t disk;
        if ((rc = cli_open_db(cli_get(&a, "db"), 0, 0, &db)) != CLI_EXIT_OK) goto s_done;
        memset(&c, 0, sizeof c);
        if ((st = cdb_db_get_counts(db, 0, &c)) != CDB_OK) {
            rc = cli_error_status(st, "cannot count");
            goto s_done;
        }
        disk = du(cdb_db_dir(db));
        if (json) {
            cli_json j;
            stats_ud ud = {db, &j, 1};
            cli_json_init(&j, stdout, 1);
            cli_json_begin_object(&j);
            cli_json_path(&j, "database", cdb_db_dir(db));
            cli_json_key(&j, "files");
            cli_json_begin_object(&j);
            for (int s = CDB_DB_PENDING; s <= CDB_DB_DELETED; s++) {
                cli_json_key(&j, cdb_db_file_state_str((cdb_db_file_state)s));
                cli_json_int(&j, c.files[s]);
            }
            cli_json_key(&j, "to_retry"); cli_json_int(&j, c.n_retry);
            cli_json_end_object(&j);
            cli_json_key(&j, "roots"); cli_json_int(&j, c.n_roots);
            cli_json_key(&j, "walk_problems"); cli_json_int(&j, c.n_walk_problems);
            cli_json_key(&j, "shards"); cli_json_int(&j, c.n_shards);
            cli_json_key(&j, "generation"); cli_json_int(&j, c.generation);
            cli_json_key(&j, "disk_bytes"); cli_json_int(&j, disk);
            cli_json_key(&j, "models");
            cli_json_begin_array(&j);
            st = cdb_db_models_foreach(db, on_model_stats, &ud);
            cli_json_end_array(&j);
            cli_json_end_object(&j);
            cli_json_done(&j);
        } else {
            char b[6][32];
            stats_ud ud = {db, NULL, 0};
            printf("database:  %s\n", cdb_db_dir(db));
            printf("files:     %s ok, %s pending, %s errors, %s deleted",
                   cli_fmt_count(c.files[CDB_DB_OK], b[0], 32),
                   cli_fmt_count(c.files[CDB_DB_PENDING], b[1], 32),
                   cli_fmt_count(c.files[CDB_DB_ERROR], b[2], 32),
                   cli_fmt_count(c.files[CDB_DB_DELETED], b[3], 32));
            if (c.n_retry)
                printf(" (%s to retry)", cli_fmt_count(c.n_retry, b[0], 32));
            printf("\nfolders:   %s", cli_fmt_count(c.n_roots, b[4], 32));
            if (c.n_walk_problems)
                printf(" (%s problems: 'clipdb errors')", cli_fmt_count(c.n_walk_problems, b[0], 32));
            printf("\n");
            printf("shards:    %s\n", cli_fmt_count(c.n_shards, b[5], 32));
            printf("disk:      %s\n", cli_fmt_bytes(disk, b[0], 32));
            printf("models:    (* = default)\n");
            st = cdb_db_models_foreach(db, on_model_stats, &ud);
        }
        rc = st == CDB_OK ? CLI_EXIT_OK : cli_error_status(st, "cannot list the models");
    s_done:
        cdb_db_close(db);
    }
#else
    rc = cli_not_available("stats", NO_DB);
#endif
done:
    cli_args_free(&a);
    return rc;
}

/* ---- verify ------------------------------------------------------------------------ */

#if CDB_CLI_HAVE_DB
static const char *problem_name(int kind) {
    switch (kind) {
    case CDB_DB_SHARD_MISSING: return "shard-missing";
    case CDB_DB_SHARD_DAMAGED: return "shard-damaged";
    case CDB_DB_VECTOR_MISSING: return "vector-missing";
    case CDB_DB_VECTOR_BAD: return "vector-bad";
    case CDB_DB_VECTOR_ORPHAN: return "vector-orphan";
    case CDB_DB_FILE_NO_VECTOR: return "file-without-vector";
    case CDB_DB_FILE_CHANGED: return "file-changed";
    case CDB_DB_VECTOR_MISMATCH: return "vector-mismatch";
    default: return "problem";
    }
}
#endif

int cli_cmd_verify(int argc, char **argv) {
    static const cli_optspec spec[] = {{"db", 0, CLI_VALUE},     {"json", 0, CLI_FLAG},
                                       {"quiet", 'q', CLI_FLAG}, {"help", 'h', CLI_FLAG},
                                       {"deep", 0, CLI_FLAG},    {"sample", 0, CLI_VALUE},
                                       {0}};
    cli_args a;
    int rc;
    double sample = CLI_DEEP_SAMPLE;
    if (!simple_args("verify", &a, spec, argc, argv, &rc)) goto done;
    if (cli_get_double(&a, "sample", CLI_DEEP_SAMPLE, 0, 1, &sample)) {
        rc = cli_usage_error("verify", "%s", a.err);
        goto done;
    }
    if (cli_get(&a, "sample") && !cli_has(&a, "deep")) {
        rc = cli_usage_error("verify", "--sample goes with --deep");
        goto done;
    }
    {
        cdb_db *db = NULL;
        cdb_model *m = NULL;
        int64_t model_id = 0;
        cdb_db_report *r = NULL;
        cdb_status st;
        int json = cli_has(&a, "json") > 0, deep = cli_has(&a, "deep") > 0;
        cli_deep_info di;
        int64_t idx_problems = 0;
        char idx_msg[8][256];
        int n_idx_msg = 0;
        memset(&di, 0, sizeof di);
        if ((rc = cli_open_db(cli_get(&a, "db"), 0, 0, &db)) != CLI_EXIT_OK) goto v_done;
        if (deep && (rc = cli_db_model(db, NULL, 1, 0, CDB_DEVICE_CPU, 0, &m, &model_id, NULL)) !=
                        CLI_EXIT_OK)
            goto v_done;
        if ((st = cdb_db_verify(db, &r)) != CDB_OK ||
            (deep && (st = cli_deep_check(db, m, model_id, sample, r, &di)) != CDB_OK)) {
            rc = cli_error_status(st, "cannot verify the database");
            goto v_done;
        }
#if CDB_CLI_HAVE_INDEX
        { /* the default model's index covers only stored vectors */
            cdb_db_model dm;
            if (cdb_db_model_default(db, &dm) == CDB_OK) {
                char path[4096];
                cdb_index *ix = NULL;
                cli_index_path(db, dm.id, path, sizeof path);
                st = cdb_index_load(path, &ix);
                if (st == CDB_OK) {
                    int64_t *ids = NULL, *removed = NULL;
                    uint16_t *vecs = NULL;
                    int64_t n = 0, n_covered_stored = 0;
                    size_t n_removed = 0;
                    if (cli_read_all_vectors(db, dm.id, dm.dim, &ids, &vecs, &n) == CDB_OK) {
                        for (int64_t i = 0; i < n; i++) n_covered_stored += cdb_index_covers(ix, ids[i]);
                        cli_ids_since(db, dm.id, (int64_t)cdb_index_watermark(ix), 1, &removed,
                                      &n_removed);
                        /* covered ids that are not stored must have been removed since */
                        if (cdb_index_count(ix) - n_covered_stored > (int64_t)n_removed) {
                            idx_problems++;
                            snprintf(idx_msg[n_idx_msg++], 256,
                                     "index covers %lld ids that are not stored and were not "
                                     "removed since it was built",
                                     (long long)(cdb_index_count(ix) - n_covered_stored -
                                                 (int64_t)n_removed));
                        }
                        if (cdb_index_dim(ix) != dm.dim) {
                            idx_problems++;
                            snprintf(idx_msg[n_idx_msg++], 256, "index dim %d != model dim %d",
                                     cdb_index_dim(ix), dm.dim);
                        }
                    }
                    free(ids);
                    free(vecs);
                    free(removed);
                    cdb_index_free(ix);
                } else if (st != CDB_NOTFOUND) {
                    idx_problems++;
                    snprintf(idx_msg[n_idx_msg++], 256, "index unreadable: %.200s", cdb_errmsg());
                }
            }
        }
#endif
        /* vectors lost with missing/damaged shards: what 'reindex --repair' re-encodes */
        int64_t n_lost = 0, n_lost_files = 0;
        for (int i = 0; i < r->n_listed; i++) {
            const cdb_db_problem *p = &r->problems[i];
            int first = 1;
            if (p->kind != CDB_DB_VECTOR_MISSING || p->shard <= 0 || !strstr(p->msg, "lost with shard"))
                continue;
            n_lost++;
            for (int k = 0; k < i && first; k++)
                first = !(r->problems[k].kind == CDB_DB_VECTOR_MISSING &&
                          r->problems[k].file_id == p->file_id && strstr(r->problems[k].msg, "lost with shard"));
            n_lost_files += first;
        }
        if (json) {
            cli_json j;
            cli_json_init(&j, stdout, 1);
            cli_json_begin_object(&j);
            cli_json_key(&j, "ok"); cli_json_bool(&j, r->n_problems + idx_problems == 0);
            cli_json_key(&j, "problems_found"); cli_json_int(&j, r->n_problems + idx_problems);
            cli_json_key(&j, "vectors_checked"); cli_json_int(&j, r->n_vectors_checked);
            cli_json_key(&j, "files_ok"); cli_json_int(&j, r->n_files_ok);
            cli_json_key(&j, "files_pending"); cli_json_int(&j, r->n_files_pending);
            cli_json_key(&j, "vectors_lost"); cli_json_int(&j, n_lost);
            cli_json_key(&j, "files_lost"); cli_json_int(&j, n_lost_files);
            cli_json_key(&j, "problems_listed_all"); cli_json_bool(&j, r->n_problems == r->n_listed);
            if (deep) {
                cli_json_key(&j, "deep");
                cli_json_begin_object(&j);
                cli_json_key(&j, "files"); cli_json_int(&j, di.n_files);
                cli_json_key(&j, "rehashed"); cli_json_int(&j, di.n_hashed);
                cli_json_key(&j, "reencoded"); cli_json_int(&j, di.n_encoded);
                cli_json_key(&j, "stale"); cli_json_int(&j, di.n_stale);
                cli_json_key(&j, "gone"); cli_json_int(&j, di.n_gone);
                cli_json_key(&j, "unreadable"); cli_json_int(&j, di.n_unreadable);
                cli_json_key(&j, "max_ulp"); cli_json_int(&j, di.max_ulp);
                cli_json_key(&j, "sample"); cli_json_num(&j, sample, 4);
                cli_json_end_object(&j);
            }
            cli_json_key(&j, "problems");
            cli_json_begin_array(&j);
            for (int i = 0; i < r->n_listed; i++) {
                const cdb_db_problem *p = &r->problems[i];
                cli_json_begin_object(&j);
                cli_json_key(&j, "kind"); cli_json_str(&j, problem_name(p->kind));
                cli_json_key(&j, "shard"); cli_json_int(&j, p->shard);
                cli_json_key(&j, "model_id"); cli_json_int(&j, p->model_id);
                cli_json_key(&j, "file_id"); cli_json_int(&j, p->file_id);
                char *path = NULL;
                if (p->file_id > 0 && cdb_db_file_path(db, p->file_id, &path) == CDB_OK)
                    cli_json_path(&j, "path", path);
                cdb_free(path);
                cli_json_key(&j, "message"); cli_json_str(&j, p->msg);
                cli_json_end_object(&j);
            }
            for (int i = 0; i < n_idx_msg; i++) {
                cli_json_begin_object(&j);
                cli_json_key(&j, "kind"); cli_json_str(&j, "index");
                cli_json_key(&j, "message"); cli_json_str(&j, idx_msg[i]);
                cli_json_end_object(&j);
            }
            cli_json_end_array(&j);
            cli_json_end_object(&j);
            cli_json_done(&j);
        } else {
            char b1[32], b2[32];
            for (int i = 0; i < r->n_listed; i++) {
                const cdb_db_problem *p = &r->problems[i];
                char *path = NULL;
                /* name the photo (the deep check's messages start with it already) */
                if (p->file_id > 0 && p->kind != CDB_DB_FILE_CHANGED &&
                    p->kind != CDB_DB_VECTOR_MISMATCH && cdb_db_file_path(db, p->file_id, &path) == CDB_OK)
                    printf("%s: %s: %s\n", problem_name(p->kind), path, p->msg);
                else
                    printf("%s: %s\n", problem_name(p->kind), p->msg);
                cdb_free(path);
            }
            for (int i = 0; i < n_idx_msg; i++) printf("index: %s\n", idx_msg[i]);
            if (r->n_problems > r->n_listed)
                printf("... and %lld more\n", (long long)(r->n_problems - r->n_listed));
            if (n_lost)
                printf("lost: %s%lld vector%s of %lld file%s (in missing or damaged shards)\n",
                       r->n_problems > r->n_listed ? "at least " : "", (long long)n_lost,
                       n_lost == 1 ? "" : "s", (long long)n_lost_files, n_lost_files == 1 ? "" : "s");
            if (deep && !cli_quiet()) {
                char b3[32], b4[32];
                printf("deep: %s files re-read and hashed, %s re-encoded (largest difference %lld "
                       "fp16 ulp)",
                       cli_fmt_count(di.n_hashed, b1, sizeof b1),
                       cli_fmt_count(di.n_encoded, b2, sizeof b2), (long long)di.max_ulp);
                if (di.n_stale || di.n_gone || di.n_unreadable)
                    printf("; not checked: %s changed since the last scan, %s gone, %s unreadable "
                           "(the next reindex updates them)",
                           cli_fmt_count(di.n_stale, b3, sizeof b3),
                           cli_fmt_count(di.n_gone, b4, sizeof b4),
                           cli_fmt_count(di.n_unreadable, b1, sizeof b1));
                printf("\n");
            }
            if (r->n_problems + idx_problems == 0 && !cli_quiet())
                printf("ok: %s files, %s vectors checked, no problems\n",
                       cli_fmt_count(r->n_files_ok, b1, sizeof b1),
                       cli_fmt_count(r->n_vectors_checked, b2, sizeof b2));
        }
        if (r->n_problems + idx_problems) {
            rc = cli_error(NULL, "%lld problem%s found", (long long)(r->n_problems + idx_problems),
                           r->n_problems + idx_problems == 1 ? "" : "s");
            cli_hint("'clipdb reindex --repair' re-encodes the files whose vectors are missing, "
                     "lost or bad");
        } else {
            rc = CLI_EXIT_OK;
        }
    v_done:
        cdb_db_report_free(r);
        cdb_model_close(m);
        cdb_db_close(db);
    }
done:
    cli_args_free(&a);
    return rc;
}

/* ---- errors ------------------------------------------------------------------------ */

/* What `errors` lists, in this order: files that cannot be used (kind "error",
** quarantined until they change), files that failed for a passing reason (kind
** "retry": the next run tries them again), and what the walks could not read
** (kind "walk": unreadable folders, broken links, missing folders). */
typedef struct errors_ud {
    cli_library lib;
    cli_json *j;
    int json, nul;
    int64_t n;
    const char *kind;
} errors_ud;

static void error_line(errors_ud *ud, int64_t id, const char *path, const char *reason,
                       int64_t size) {
    if (ud->json) {
        cli_json_begin_object(ud->j);
        cli_json_key(ud->j, "kind"); cli_json_str(ud->j, ud->kind);
        if (id) {
            cli_json_key(ud->j, "id");
            cli_json_int(ud->j, id);
        }
        cli_json_path(ud->j, "path", path);
        cli_json_key(ud->j, "reason"); cli_json_str(ud->j, reason);
        if (id) {
            cli_json_key(ud->j, "size");
            cli_json_int(ud->j, size);
        }
        cli_json_end_object(ud->j);
    } else {
        printf("%s\t%s%s%c", path, strcmp(ud->kind, "retry") ? "" : "will retry: ", reason,
               ud->nul ? '\0' : '\n');
    }
    ud->n++;
}

static char *root_join(const errors_ud *ud, int64_t root_id, const char *relpath) {
    const cli_root *r = cli_library_root(&ud->lib, root_id);
    return cdb_db_path_join(r ? r->path : "?", relpath);
}

static int on_error_file(const cdb_db_file *f, void *ud_) {
    errors_ud *ud = ud_;
    char *full;
    if (f->state == CDB_DB_PENDING && !f->error) return 0; /* work of an interrupted run */
    if (!(full = root_join(ud, f->root_id, f->relpath))) return 1;
    error_line(ud, f->id, full, f->error ? f->error : "", f->meta.size);
    free(full);
    return 0;
}

static int on_walk_problem(const cdb_db_walk_problem *p, void *ud_) {
    errors_ud *ud = ud_;
    char *full = root_join(ud, p->root_id, p->relpath);
    if (!full) return 1;
    error_line(ud, 0, full, p->reason, 0);
    free(full);
    return 0;
}

int cli_cmd_errors(int argc, char **argv) {
    static const cli_optspec spec[] = {{"db", 0, CLI_VALUE},    {"json", 0, CLI_FLAG},
                                       {"null", '0', CLI_FLAG}, {"help", 'h', CLI_FLAG},
                                       {0}};
    cli_args a;
    int rc;
    cdb_db *db = NULL;
    cdb_status st;
    cli_json j;
    errors_ud ud;
    memset(&ud, 0, sizeof ud);
    if (!simple_args("errors", &a, spec, argc, argv, &rc)) goto done;
    ud.json = cli_has(&a, "json") > 0;
    ud.nul = cli_has(&a, "null") > 0;
    ud.j = &j;
    if ((rc = cli_open_db(cli_get(&a, "db"), 0, 0, &db)) != CLI_EXIT_OK) goto done;
    if ((st = cli_library_load(db, &ud.lib)) != CDB_OK) {
        rc = cli_error_status(st, "cannot list the errors");
        goto done;
    }
    if (ud.json) {
        cli_json_init(&j, stdout, 1);
        cli_json_begin_object(&j);
        cli_json_key(&j, "errors");
        cli_json_begin_array(&j);
    }
    ud.kind = "error";
    st = cdb_db_files_foreach(db, 0, CDB_DB_MASK_ERROR, on_error_file, &ud);
    ud.kind = "retry";
    if (st == CDB_OK) st = cdb_db_files_foreach(db, 0, CDB_DB_MASK_PENDING, on_error_file, &ud);
    ud.kind = "walk";
    if (st == CDB_OK) st = cdb_db_walk_problems_foreach(db, 0, on_walk_problem, &ud);
    if (ud.json) {
        cli_json_end_array(&j);
        cli_json_key(&j, "count");
        cli_json_int(&j, ud.n);
        cli_json_end_object(&j);
        cli_json_done(&j);
    }
    fflush(stdout);
    rc = st == CDB_OK ? CLI_EXIT_OK : cli_error_status(st, "cannot list the errors");
done:
    cli_library_free(&ud.lib);
    cdb_db_close(db);
    cli_args_free(&a);
    return rc;
}

/* ---- export ------------------------------------------------------------------------ */

int cli_cmd_export(int argc, char **argv) {
    static const cli_optspec spec[] = {{"db", 0, CLI_VALUE},     {"model", 0, CLI_VALUE},
                                       {"format", 0, CLI_VALUE}, {"dtype", 0, CLI_VALUE},
                                       {"out", 0, CLI_VALUE},    {"quiet", 'q', CLI_FLAG},
                                       {"help", 'h', CLI_FLAG},  {0}};
    static const char *const formats[] = {"npy", "jsonl", NULL};
    static const char *const dtypes[] = {"fp16", "fp32", NULL};
    cli_args a;
    int rc, fmt, dtype;
    const char *out;
    if (!cli_begin("export", &a, spec, argc, argv, &rc)) goto done;
    if (a.n_pos) {
        rc = cli_usage_error("export", "unexpected argument '%s' (the folder goes in --out)",
                             a.pos[0]);
        goto done;
    }
    if ((fmt = cli_get_choice(&a, "format", formats, 0)) < 0 ||
        (dtype = cli_get_choice(&a, "dtype", dtypes, 0)) < 0) {
        rc = cli_usage_error("export", "%s", a.err);
        goto done;
    }
    if (!(out = cli_get(&a, "out"))) {
        rc = cli_usage_error("export", "missing --out DIR");
        goto done;
    }
#if CDB_CLI_HAVE_DB
    {
        cdb_db *db = NULL;
        cdb_db_model dm;
        cdb_db_iter *it = NULL;
        cdb_status st;
        FILE *fv = NULL, *fi = NULL, *fp = NULL;
        char p_vec[4096], p_ids[4096], p_paths[4096], p_paths0[4096];
        FILE *fp0 = NULL;
        int64_t n = 0, shape[2];
        long hdr_end_v = 0, hdr_end_i = 0;
        const int chunk = 1024;
        int64_t *ids = NULL;
        uint16_t *v16 = NULL;
        float *v32 = NULL;
        cdb_db_counts counts;
        if ((rc = cli_open_db(cli_get(&a, "db"), 0, 0, &db)) != CLI_EXIT_OK) goto x_done;
        if ((rc = pick_model(db, cli_get(&a, "model"), &dm)) != CLI_EXIT_OK) goto x_done;
        if (mkdir(out, 0777) != 0 && errno != EEXIST) {
            rc = cli_error(strerror(errno), "cannot create %s", out);
            goto x_done;
        }
        memset(&counts, 0, sizeof counts);
        cdb_db_get_counts(db, dm.id, &counts);
        ids = malloc(sizeof *ids * chunk);
        v16 = malloc(sizeof *v16 * (size_t)chunk * (size_t)dm.dim);
        v32 = malloc(sizeof *v32 * (size_t)chunk * (size_t)dm.dim);
        if (!ids || !v16 || !v32) {
            rc = cli_error("out of memory", "cannot export");
            goto x_done;
        }
        if (fmt == 0) {
            snprintf(p_vec, sizeof p_vec, "%s/vectors.npy", out);
            snprintf(p_ids, sizeof p_ids, "%s/ids.npy", out);
            snprintf(p_paths, sizeof p_paths, "%s/paths.txt", out);
            snprintf(p_paths0, sizeof p_paths0, "%s/paths0.txt", out);
            fv = fopen(p_vec, "wb");
            fi = fopen(p_ids, "wb");
            fp = fopen(p_paths, "wb");
            fp0 = fopen(p_paths0, "wb");
            shape[0] = counts.n_vectors; /* rewritten at the end with the true count */
            shape[1] = dm.dim;
            if (!fv || !fi || !fp || !fp0 || cli_npy_header(fv, dtype ? "<f4" : "<f2", shape, 2) ||
                cli_npy_header(fi, "<i8", shape, 1)) {
                rc = cli_error(strerror(errno), "cannot write in %s", out);
                goto x_done;
            }
            hdr_end_v = ftell(fv);
            hdr_end_i = ftell(fi);
        } else {
            snprintf(p_vec, sizeof p_vec, "%s/vectors.jsonl", out);
            if (!(fv = fopen(p_vec, "wb"))) {
                rc = cli_error(strerror(errno), "cannot write %s", p_vec);
                goto x_done;
            }
        }
        if ((st = cdb_db_iter_new(db, dm.id, &it)) != CDB_OK) {
            rc = cli_error_status(st, "cannot read the vectors");
            goto x_done;
        }
        for (;;) {
            int got = 0;
            st = cdb_db_iter_read(it, chunk, ids, v32, v16, &got);
            if (st != CDB_OK) {
                rc = cli_error_status(st, "cannot read the vectors");
                goto x_done;
            }
            if (got == 0) break;
            for (int i = 0; i < got; i++) {
                char *path = NULL;
                cdb_db_file_path(db, ids[i], &path);
                if (fmt == 0) {
                    /* one line per row: a newline in a name is written as \n there;
                    ** paths0.txt has the exact bytes, NUL after each */
                    for (const char *c = path ? path : ""; *c; c++) {
                        if (*c == '\n') fputs("\\n", fp);
                        else if (*c == '\r') fputs("\\r", fp);
                        else fputc(*c, fp);
                    }
                    fputc('\n', fp);
                    fputs(path ? path : "", fp0);
                    fputc('\0', fp0);
                } else {
                    cli_json j;
                    cli_json_init(&j, fv, 0);
                    cli_json_begin_object(&j);
                    cli_json_key(&j, "id"); cli_json_int(&j, ids[i]);
                    cli_json_path(&j, "path", path ? path : "");
                    cli_json_key(&j, "vector");
                    cli_json_begin_array(&j);
                    for (int d = 0; d < dm.dim; d++) cli_json_float(&j, v32[(size_t)i * dm.dim + d]);
                    cli_json_end_array(&j);
                    cli_json_end_object(&j);
                    cli_json_done(&j);
                }
                cdb_free(path);
            }
            if (fmt == 0) {
                if (dtype) fwrite(v32, sizeof *v32 * (size_t)dm.dim, (size_t)got, fv);
                else fwrite(v16, sizeof *v16 * (size_t)dm.dim, (size_t)got, fv);
                fwrite(ids, sizeof *ids, (size_t)got, fi);
            }
            n += got;
        }
        if (fmt == 0 && n != counts.n_vectors) { /* fix the shapes in place */
            shape[0] = n;
            rewind(fv);
            rewind(fi);
            if (cli_npy_header(fv, dtype ? "<f4" : "<f2", shape, 2) || ftell(fv) != hdr_end_v ||
                cli_npy_header(fi, "<i8", shape, 1) || ftell(fi) != hdr_end_i) {
                rc = cli_error("the header changed size", "cannot finish %s", p_vec);
                goto x_done;
            }
        }
        int close_failed = 0; /* close all three even when one fails */
        if (fv && fclose(fv)) close_failed = 1;
        if (fi && fclose(fi)) close_failed = 1;
        if (fp && fclose(fp)) close_failed = 1;
        if (fp0 && fclose(fp0)) close_failed = 1;
        if (close_failed) {
            fv = fi = fp = fp0 = NULL;
            rc = cli_error(strerror(errno), "cannot write in %s", out);
            goto x_done;
        }
        fv = fi = fp = fp0 = NULL;
        if (!cli_quiet()) {
            char b[32];
            printf("Exported %s vectors (%s, %d dims, model %s) to %s\n",
                   cli_fmt_count(n, b, sizeof b), dtype ? "fp32" : "fp16", dm.dim, dm.name, out);
        }
        rc = CLI_EXIT_OK;
    x_done:
        if (fv) fclose(fv);
        if (fi) fclose(fi);
        if (fp) fclose(fp);
        if (fp0) fclose(fp0);
        cdb_db_iter_free(it);
        free(ids);
        free(v16);
        free(v32);
        cdb_db_close(db);
    }
#else
    (void)fmt, (void)dtype;
    rc = cli_not_available("export", NO_DB);
#endif
done:
    cli_args_free(&a);
    return rc;
}
