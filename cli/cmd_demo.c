/*
** cmd_demo.c: `clipdb demo [DIR]`: clipdb's whole job on a fresh machine, through
** the real modules. It generates a library of shape images with true captions
** (world/) in DIR/photos, creates a database in DIR/clipdb bound to the model
** (the bundled one by default), ingests the library with the ingest pipeline,
** builds the index, runs a handful of text queries through the same search path
** as `clipdb search`, prints each hit with its score and whether it truly matches
** the query (judged by cdb_world_scene_matches from the generator's own record of
** the scene), and ends with precision@1 and precision@k.
*/
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"

#if CDB_CLI_HAVE_DB && CDB_CLI_HAVE_INDEX && CDB_CLI_HAVE_ENCODER && CDB_CLI_HAVE_WORLD
#define CLI_DEMO_WIRED 1
#include "db/db.h"
#include "encoder/encoder.h"
#include "index/index.h"
#include "world/world.h"
#else
#define CLI_DEMO_WIRED 0
#endif

#define NO_MODULES "the world generator, database, index and encoder modules are not all linked into this build"

#if CLI_DEMO_WIRED
/* Single-object queries shown: shapes alone, then color + shape pairs
** (cdb_world_query_make's CDB_WORLD_Q_SINGLE enumeration: 8 shapes, then 80 pairs). */
static const int g_demo_queries[] = {0, 3, 6, 8 + 0 * 8 + 1, 8 + 4 * 8 + 0, 8 + 3 * 8 + 3,
                                     8 + 1 * 8 + 5, 8 + 6 * 8 + 6};

/* Scene index from a generated file name ".../img_0000123.png"; -1 if not one. */
static int64_t scene_index(const char *path) {
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    if (strncmp(b, "img_", 4)) return -1;
    return strtoll(b + 4, NULL, 10);
}
#endif

int cli_cmd_demo(int argc, char **argv) {
    static const cli_optspec spec[] = {{"count", 0, CLI_VALUE},  {"seed", 0, CLI_VALUE},
                                       {"k", 'k', CLI_VALUE},    {"model", 0, CLI_VALUE},
                                       {"threads", 0, CLI_VALUE}, {"device", 0, CLI_VALUE},
                                       {"quiet", 'q', CLI_FLAG}, {"help", 'h', CLI_FLAG},
                                       {0}};
    cli_args a;
    int rc;
    long count, seed, k, threads;
    if (!cli_begin("demo", &a, spec, argc, argv, &rc)) goto done;
    if (a.n_pos > 1) {
        rc = cli_usage_error("demo", "expected at most one DIR, got %d", a.n_pos);
        goto done;
    }
    if (cli_get_int(&a, "count", 500, 1, 10000000, &count) ||
        cli_get_int(&a, "seed", 1, 0, 0x7fffffffL, &seed) ||
        cli_get_int(&a, "k", 5, 1, 1000, &k) ||
        cli_get_int(&a, "threads", 0, 0, 1024, &threads)) {
        rc = cli_usage_error("demo", "%s", a.err);
        goto done;
    }
#if CLI_DEMO_WIRED
    {
        char dir[PATH_MAX], photos[PATH_MAX + 16], dbdir[PATH_MAX + 16], dur[32];
        const char *msrc, *dev_text;
        const char *mpath = cli_model_path(cli_get(&a, "model"), &msrc);
        int device = cli_device(cli_get(&a, "device"), &dev_text);
        cdb_world_library_params lp = cdb_world_library_params_default();
        cdb_db *db = NULL;
        cdb_db_params dp = cdb_db_params_default();
        cdb_model *m = NULL;
        cdb_model_params mp = cdb_model_params_default();
        cdb_status st;
        int64_t model_id = 0, t0 = cdb_now_ns();
        char *info = NULL;
        cli_ingest_opts o;
        cli_ingest_root root;
        cli_library lib = {0};
        cli_ingest_summary sum;
        cli_index_result ires;
        int n_q = (int)(sizeof g_demo_queries / sizeof g_demo_queries[0]);
        int top1 = 0, dim;
        int64_t topk = 0, shown = 0;
        float *q = NULL;
        cdb_hit *hits = NULL;
        if (device < 0) {
            rc = cli_usage_error("demo", "bad device '%s' (expected auto, cpu or cuda)", dev_text);
            goto d_done;
        }
        if (!mpath) {
            rc = cli_error("no --model, no CLIPDB_MODEL, and no bundled model was found",
                           "no model for the demo");
            goto d_done;
        }
        if (a.n_pos) {
            snprintf(dir, sizeof dir, "%s", a.pos[0]);
            if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
                rc = cli_error(strerror(errno), "cannot create %s", dir);
                goto d_done;
            }
        } else {
            const char *t = getenv("TMPDIR");
            snprintf(dir, sizeof dir, "%s/clipdb-demo-XXXXXX", t && *t ? t : "/tmp");
            if (!mkdtemp(dir)) {
                rc = cli_error(strerror(errno), "cannot create a temporary folder");
                goto d_done;
            }
        }
        snprintf(photos, sizeof photos, "%s/photos", dir);
        snprintf(dbdir, sizeof dbdir, "%s/clipdb", dir);
        {
            char probe[PATH_MAX + 32];
            struct stat sb;
            snprintf(probe, sizeof probe, "%s/catalog.db", dbdir);
            if (stat(probe, &sb) == 0) {
                rc = cli_error("the demo needs a fresh folder", "%s already holds a demo database", dir);
                cli_hint("give another DIR, or none for a temporary one");
                goto d_done;
            }
        }
        /* 1. the library */
        printf("1. Generating %ld images (seed %ld) in %s\n", count, seed, photos);
        fflush(stdout);
        lp.n_threads = (int)threads;
        if ((st = cdb_world_generate(photos, (uint64_t)seed, 0, count, &lp)) != CDB_OK) {
            rc = cli_error_status(st, "cannot generate the library");
            goto d_done;
        }
        /* 2. the database, bound to the model */
        mp.device = (cdb_device_kind)device;
        if ((st = cdb_model_open(mpath, &mp, &m)) != CDB_OK) {
            rc = cli_error_status(st, "cannot load the model %s", mpath);
            goto d_done;
        }
        dim = cdb_model_get_info(m)->embed_dim;
        printf("2. Creating the database %s (model %s, %d dims, %s)\n", dbdir,
               cdb_model_get_info(m)->name, dim, msrc);
        fflush(stdout);
        dp.create = 1;
        if ((st = cdb_db_open(dbdir, &dp, &db)) != CDB_OK) {
            rc = cli_error_status(st, "cannot create the database %s", dbdir);
            goto d_done;
        }
        info = cli_model_info_json(mpath, m);
        if ((st = cdb_db_model_register(db, cdb_model_get_info(m)->hash,
                                        cdb_model_get_info(m)->name, dim, info, &model_id)) != CDB_OK ||
            (st = cdb_db_model_set_default(db, model_id)) != CDB_OK) {
            rc = cli_error_status(st, "cannot record the model");
            goto d_done;
        }
        /* 3. ingest */
        memset(&o, 0, sizeof o);
        o.batch = 32;
        o.threads = threads ? (int)threads : cdb_default_threads();
        o.device = device;
        o.follow_symlinks = -1;
        {
            char abs[PATH_MAX];
            if (realpath(photos, abs)) snprintf(photos, sizeof photos, "%s", abs);
        }
        memset(&root, 0, sizeof root);
        root.path = photos;
        root.kind = CDB_DB_ROOT_FOLDER;
        if ((st = cdb_db_root_add(db, photos, &root.root_id)) != CDB_OK ||
            (st = cli_library_load(db, &lib)) != CDB_OK) {
            rc = cli_error_status(st, "cannot record the folder");
            goto d_done;
        }
        printf("3. Ingesting\n");
        fflush(stdout);
        st = cli_pipeline_run(db, dbdir, m, model_id, &lib, &root, 1, &o, &sum);
        if (st != CDB_OK) {
            rc = cli_error_status(st, "ingest failed");
            goto d_done;
        }
        if (sum.interrupted) {
            rc = CLI_EXIT_INTERRUPTED;
            goto d_done;
        }
        printf("   %lld images encoded, %lld errors, %s (%.1f images/s)\n", (long long)sum.added,
               (long long)sum.errors, cli_fmt_duration(sum.seconds, dur, sizeof dur),
               sum.seconds > 0 ? (double)sum.added / sum.seconds : 0.0);
        /* 4. index */
        if ((st = cli_index_build(db, model_id, dim, CDB_INDEX_AUTO, &ires)) != CDB_OK) {
            rc = cli_error_status(st, "cannot build the index");
            goto d_done;
        }
        printf("4. Built a %s index over %lld vectors\n", cdb_index_kind_name(ires.info.kind),
               (long long)ires.n_vectors);
        /* 5. queries */
        printf("5. Searching (a hit is 'yes' when the image truly shows the query)\n");
        q = malloc(sizeof *q * (size_t)dim);
        hits = malloc(sizeof *hits * (size_t)k);
        if (!q || !hits) {
            rc = cli_error("out of memory", "demo");
            goto d_done;
        }
        for (int qi = 0; qi < n_q; qi++) {
            cdb_world_query wq;
            char text[256];
            const char *texts[1];
            int n_out = 0;
            if ((st = cdb_world_query_make((uint64_t)seed, g_demo_queries[qi], CDB_WORLD_Q_SINGLE, &wq)) != CDB_OK ||
                (st = cdb_world_query_text(&wq, text, sizeof text)) != CDB_OK) {
                rc = cli_error_status(st, "cannot make the demo queries");
                goto d_done;
            }
            texts[0] = text;
            if ((st = cdb_encode_texts(m, texts, 1, 1, q)) != CDB_OK) {
                rc = cli_error_status(st, "cannot encode '%s'", text);
                goto d_done;
            }
            if ((rc = cli_search_vector(db, model_id, dim, q, (int)k, -1.0f, hits, &n_out)) != CLI_EXIT_OK)
                goto d_done;
            printf("\n   \"%s\"\n", text);
            for (int i = 0; i < n_out; i++) {
                char *path = NULL;
                cdb_world_scene sc;
                char caption[256] = "?";
                int64_t idx;
                int match = 0;
                cdb_db_file_path(db, hits[i].id, &path);
                idx = path ? scene_index(path) : -1;
                if (idx >= 0 && cdb_world_scene_make((uint64_t)seed, idx, &lp.scene, &sc) == CDB_OK) {
                    match = cdb_world_scene_matches(&sc, &wq);
                    cdb_world_caption(&sc, caption, sizeof caption);
                }
                printf("   %2d  %.4f  %-3s  %s  (%s)\n", i + 1, (double)hits[i].score,
                       match ? "yes" : "no", path ? strrchr(path, '/') + 1 : "?", caption);
                if (i == 0) top1 += match;
                topk += match;
                shown++;
                cdb_free(path);
            }
        }
        printf("\nprecision@1 = %.2f (%d/%d queries), precision@%ld = %.2f (%lld/%lld hits); "
               "total %s\n",
               n_q ? (double)top1 / n_q : 0.0, top1, n_q, k,
               shown ? (double)topk / (double)shown : 0.0, (long long)topk, (long long)shown,
               cli_fmt_duration((double)(cdb_now_ns() - t0) / 1e9, dur, sizeof dur));
        printf("The demo library and database stay in %s; try:\n"
               "  clipdb search --db %s \"a red star\"\n", dir, dbdir);
        rc = CLI_EXIT_OK;
    d_done:
        cli_library_free(&lib);
        free(q);
        free(hits);
        free(info);
        cdb_db_close(db);
        cdb_model_close(m);
    }
#else
    rc = cli_not_available("demo", NO_MODULES);
#endif
done:
    cli_args_free(&a);
    return rc;
}
