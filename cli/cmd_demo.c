/*
** cmd_demo.c: `clipdb demo [DIR]`: clipdb's whole job on a fresh machine, through
** the real modules. It generates a library of shape images with true captions
** (world/) in DIR/photos, creates a database in DIR/clipdb bound to the model
** (the bundled one by default), ingests the library, builds the index, runs a
** handful of text queries through the same search as `clipdb search` (all of it
** through engine/engine.h), prints each hit with its score and whether it truly matches
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

#if CDB_CLI_HAVE_WORLD
#define CLI_DEMO_WIRED 1
#include "world/world.h"
#else
#define CLI_DEMO_WIRED 0
#endif

#define NO_MODULES "the world generator is not linked into this build"

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
        const char *msrc;
        const char *mpath = cli_model_path(cli_get(&a, "model"), &msrc);
        cdb_k_device device;
        int dev_rc = cli_device("demo", cli_get(&a, "device"), &device);
        cdb_world_library_params lp = cdb_world_library_params_default();
        cdb_engine *e = NULL;
        cdb_engine_create_info ci;
        cdb_engine_run_params rp = cdb_engine_run_params_default();
        cdb_engine_run_report *rr = NULL;
        cdb_engine_index_report ires;
        cdb_status st;
        int64_t t0 = cdb_now_ns();
        int n_q = (int)(sizeof g_demo_queries / sizeof g_demo_queries[0]);
        int top1 = 0, dim;
        int64_t topk = 0, shown = 0;
        float *q = NULL;
        if (dev_rc != CLI_EXIT_OK) {
            rc = dev_rc;
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
        cli_flush_stdout();
        lp.n_threads = (int)threads;
        if ((st = cdb_world_generate(photos, (uint64_t)seed, 0, count, &lp)) != CDB_OK) {
            rc = cli_error_status(st, "cannot generate the library");
            goto d_done;
        }
        /* 2. the database, bound to the model */
        if ((st = cdb_engine_create(dbdir, mpath, &ci)) != CDB_OK) {
            rc = cli_engine_fail(dbdir);
            goto d_done;
        }
        dim = ci.dim;
        printf("2. Creating the database %s (model %s, %d dims, %s)\n", dbdir, ci.model_name, dim,
               msrc);
        cli_flush_stdout();
        if ((rc = cli_engine_open(dbdir, 1, 0, device, 0, &e)) != CLI_EXIT_OK) goto d_done;
        /* 3. ingest */
        rp.threads = threads ? (int)threads : cdb_default_threads();
        {
            char abs[PATH_MAX];
            if (realpath(photos, abs)) snprintf(photos, sizeof photos, "%s", abs);
        }
        printf("3. Ingesting\n");
        cli_flush_stdout();
        if (!(rr = calloc(1, sizeof *rr))) {
            rc = cli_error("out of memory", "demo");
            goto d_done;
        }
        {
            const char *paths[1] = {photos};
            st = cdb_engine_ingest(e, paths, 1, &rp, rr);
        }
        if (st != CDB_OK) {
            rc = rr->started ? cli_error_status(st, "ingest failed") : cli_engine_fail(NULL);
            goto d_done;
        }
        if (rr->interrupted || cli_interrupted()) {
            rc = CLI_EXIT_INTERRUPTED;
            goto d_done;
        }
        {
            const cdb_engine_summary *sum = &rr->sets[0].sum;
            printf("   %lld images encoded, %lld errors, %s (%.1f images/s)\n", (long long)sum->added,
                   (long long)sum->errors, cli_fmt_duration(sum->seconds, dur, sizeof dur),
                   sum->seconds > 0 ? (double)sum->added / sum->seconds : 0.0);
        }
        /* 4. index */
        if ((st = cdb_engine_index_build(e, NULL, CDB_ENGINE_INDEX_AUTO, &ires)) != CDB_OK) {
            rc = cli_engine_fail(NULL);
            goto d_done;
        }
        printf("4. Built the index: %s over %lld vectors\n", ires.kind, (long long)ires.n_vectors);
        /* 5. queries */
        printf("5. Searching (a hit is 'yes' when the image truly shows the query)\n");
        if (!(q = malloc(sizeof *q * (size_t)dim))) {
            rc = cli_error("out of memory", "demo");
            goto d_done;
        }
        for (int qi = 0; qi < n_q; qi++) {
            cdb_world_query wq;
            char text[256];
            cdb_engine_query eq;
            cdb_engine_search_params sp = cdb_engine_search_params_default();
            cdb_engine_result res;
            if ((st = cdb_world_query_make((uint64_t)seed, g_demo_queries[qi], CDB_WORLD_Q_SINGLE, &wq)) != CDB_OK ||
                (st = cdb_world_query_text(&wq, text, sizeof text)) != CDB_OK) {
                rc = cli_error_status(st, "cannot make the demo queries");
                goto d_done;
            }
            if (cdb_engine_encode_text(e, NULL, text, q) != CDB_OK) {
                rc = cli_engine_fail(NULL);
                goto d_done;
            }
            /* the text's own embedding, searched as it is */
            memset(&eq, 0, sizeof eq);
            eq.vector = q;
            eq.vector_dim = dim;
            sp.k = (int)k;
            if (cdb_engine_search(e, &eq, &sp, &res) != CDB_OK) {
                rc = cli_engine_fail(NULL);
                goto d_done;
            }
            printf("\n   \"%s\"\n", text);
            for (int i = 0; i < res.n; i++) {
                const char *path = res.hits[i].path;
                cdb_world_scene sc;
                char caption[256] = "?";
                int64_t idx = scene_index(path);
                int match = 0;
                if (idx >= 0 && cdb_world_scene_make((uint64_t)seed, idx, &lp.scene, &sc) == CDB_OK) {
                    match = cdb_world_scene_matches(&sc, &wq);
                    cdb_world_caption(&sc, caption, sizeof caption);
                }
                printf("   %2d  %.4f  %-3s  %s  (%s)\n", i + 1, (double)res.hits[i].score,
                       match ? "yes" : "no", strrchr(path, '/') ? strrchr(path, '/') + 1 : path,
                       caption);
                if (i == 0) top1 += match;
                topk += match;
                shown++;
            }
            cdb_engine_result_free(&res);
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
        free(q);
        free(rr);
        cdb_engine_close(e);
    }
#else
    rc = cli_not_available("demo", NO_MODULES);
#endif
done:
    cli_args_free(&a);
    return rc;
}
