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
#include "world/world.h"

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

/* One demo run: where it is, what it generates, and the tally of its queries. */
typedef struct demo_run {
    char dir[PATH_MAX], photos[PATH_MAX + 16], dbdir[PATH_MAX + 16];
    long count, seed, k, threads;
    cdb_world_library_params lp;
    int dim;
    int top1;             /* queries whose first hit truly matches */
    int64_t topk, shown;  /* hits that truly match, hits shown */
} demo_run;

/* d->dir: DIR (created if needed) or a new temporary folder; then the photos and
** database paths inside it, refusing a folder that already holds a demo database.
** CLI_EXIT_OK or the error printed. */
static int demo_dir(const char *given, demo_run *d) {
    char probe[PATH_MAX + 32];
    struct stat sb;
    if (given) {
        snprintf(d->dir, sizeof d->dir, "%s", given);
        if (mkdir(d->dir, 0777) != 0 && errno != EEXIST)
            return cdb_cli_error(strerror(errno), "cannot create %s", d->dir);
    } else {
        const char *t = getenv("TMPDIR");
        snprintf(d->dir, sizeof d->dir, "%s/clipdb-demo-XXXXXX", t && *t ? t : "/tmp");
        if (!mkdtemp(d->dir))
            return cdb_cli_error(strerror(errno), "cannot create a temporary folder");
    }
    snprintf(d->photos, sizeof d->photos, "%s/photos", d->dir);
    snprintf(d->dbdir, sizeof d->dbdir, "%s/clipdb", d->dir);
    snprintf(probe, sizeof probe, "%s/catalog.db", d->dbdir);
    if (stat(probe, &sb) == 0) {
        cdb_cli_error("the demo needs a fresh folder", "%s already holds a demo database", d->dir);
        cdb_cli_hint("give another DIR, or none for a temporary one");
        return CLI_EXIT_FAIL;
    }
    return CLI_EXIT_OK;
}

/* Steps 1 and 2: the library in d->photos, the database in d->dbdir bound to the model
** at mpath (found from msrc), opened as writer on device into *e. CLI_EXIT_OK or the
** error printed. */
static int demo_create(demo_run *d, const char *mpath, const char *msrc, cdb_k_device device,
                       cdb_engine **e /* OUT */) {
    cdb_engine_create_info ci;
    cdb_status st;
    printf("1. Generating %ld image%s (seed %ld) in %s\n", d->count, d->count == 1 ? "" : "s",
           d->seed, d->photos);
    cdb_cli_flush_stdout();
    d->lp.n_threads = (int)d->threads;
    if ((st = cdb_world_generate(d->photos, (uint64_t)d->seed, 0, d->count, &d->lp)) != CDB_OK)
        return cdb_cli_error_status(st, "cannot generate the library");
    if ((st = cdb_engine_create(d->dbdir, mpath, &ci)) != CDB_OK)
        return cdb_cli_engine_fail(d->dbdir);
    d->dim = ci.dim;
    printf("2. Creating the database %s (model %s, %d dims, %s)\n", d->dbdir, ci.model_name,
           d->dim, msrc);
    cdb_cli_flush_stdout();
    return cdb_cli_engine_open(d->dbdir, 1, 0, device, 0, e);
}

/* Step 3: ingests d->photos (made absolute, as stored). CLI_EXIT_OK, CLI_EXIT_INTERRUPTED
** or the error printed. */
static int demo_ingest(cdb_engine *e, demo_run *d) {
    cdb_engine_run_params rp = cdb_engine_run_params_default();
    cdb_engine_run_report *rr = calloc(1, sizeof *rr);
    const char *paths[1] = {d->photos};
    char abs[PATH_MAX], dur[32];
    cdb_status st;
    int rc = CLI_EXIT_OK;
    rp.threads = d->threads ? (int)d->threads : cdb_default_threads();
    if (realpath(d->photos, abs)) snprintf(d->photos, sizeof d->photos, "%s", abs);
    printf("3. Ingesting\n");
    cdb_cli_flush_stdout();
    if (!rr) return cdb_cli_error("out of memory", "demo");
    st = cdb_engine_ingest(e, paths, 1, &rp, rr);
    if (st != CDB_OK) {
        rc = rr->started ? cdb_cli_error_status(st, "ingest failed") : cdb_cli_engine_fail(NULL);
    } else if (rr->interrupted || cdb_cli_interrupted()) {
        rc = CLI_EXIT_INTERRUPTED;
    } else {
        const cdb_engine_summary *sum = &rr->sets[0].sum;
        printf("   %lld image%s encoded, %lld error%s, %s (%.1f images/s)\n",
               (long long)sum->added, sum->added == 1 ? "" : "s", (long long)sum->errors,
               sum->errors == 1 ? "" : "s", cdb_cli_fmt_duration(sum->seconds, dur, sizeof dur),
               sum->seconds > 0 ? (double)sum->added / sum->seconds : 0.0);
    }
    free(rr);
    return rc;
}

/* Prints the hits of query wq, each judged against the generator's record of its
** scene, and adds them to d's tally. */
static void demo_print_hits(demo_run *d, const cdb_world_query *wq, const char *text,
                            const cdb_engine_result *res) {
    printf("\n   \"%s\"\n", text);
    for (int i = 0; i < res->n; i++) {
        const char *path = res->hits[i].path;
        cdb_world_scene sc;
        char caption[256] = "?";
        int64_t idx = scene_index(path);
        int match = 0;
        if (idx >= 0 && cdb_world_scene_make((uint64_t)d->seed, idx, &d->lp.scene, &sc) == CDB_OK) {
            match = cdb_world_scene_matches(&sc, wq);
            cdb_world_caption(&sc, caption, sizeof caption);
        }
        printf("   %2d  %.4f  %-3s  %s  (%s)\n", i + 1, (double)res->hits[i].score,
               match ? "yes" : "no", strrchr(path, '/') ? strrchr(path, '/') + 1 : path, caption);
        if (i == 0) d->top1 += match;
        d->topk += match;
        d->shown++;
    }
}

/* Step 5, one query: g_demo_queries[qi] as text, encoded, searched as its own
** embedding, printed. q: d->dim floats of scratch. CLI_EXIT_OK or the error printed. */
static int demo_query(cdb_engine *e, demo_run *d, int qi, float *q) {
    cdb_world_query wq;
    char text[256];
    cdb_engine_query eq;
    cdb_engine_search_params sp = cdb_engine_search_params_default();
    cdb_engine_result res;
    cdb_status st;
    if ((st = cdb_world_query_make((uint64_t)d->seed, g_demo_queries[qi], CDB_WORLD_Q_SINGLE,
                                   &wq)) != CDB_OK ||
        (st = cdb_world_query_text(&wq, text, sizeof text)) != CDB_OK)
        return cdb_cli_error_status(st, "cannot make the demo queries");
    if (cdb_engine_encode_text(e, NULL, text, q) != CDB_OK) return cdb_cli_engine_fail(NULL);
    /* the text's own embedding, searched as it is */
    memset(&eq, 0, sizeof eq);
    eq.vector = q;
    eq.vector_dim = d->dim;
    sp.k = (int)d->k;
    if (cdb_engine_search(e, &eq, &sp, &res) != CDB_OK) return cdb_cli_engine_fail(NULL);
    demo_print_hits(d, &wq, text, &res);
    cdb_engine_result_free(&res);
    return CLI_EXIT_OK;
}

/* Steps 4 and 5: the index, then every demo query, then the precision line and where
** the demo stays. CLI_EXIT_OK or the error printed. */
static int demo_search(cdb_engine *e, demo_run *d, int64_t t0) {
    int n_q = (int)(sizeof g_demo_queries / sizeof g_demo_queries[0]), rc = CLI_EXIT_OK;
    cdb_engine_index_report ires;
    char dur[32];
    float *q;
    if (cdb_engine_index_build(e, NULL, NULL, &ires) != CDB_OK)
        return cdb_cli_engine_fail(NULL);
    printf("4. Built the index: %s over %lld vector%s\n", ires.kind, (long long)ires.n_vectors,
           ires.n_vectors == 1 ? "" : "s");
    printf("5. Searching (a hit is 'yes' when the image truly shows the query)\n");
    if (!(q = malloc(sizeof *q * (size_t)d->dim))) return cdb_cli_error("out of memory", "demo");
    for (int qi = 0; qi < n_q && rc == CLI_EXIT_OK; qi++) rc = demo_query(e, d, qi, q);
    free(q);
    if (rc != CLI_EXIT_OK) return rc;
    printf("\nprecision@1 = %.2f (%d/%d queries), precision@%ld = %.2f (%lld/%lld hits); "
           "total %s\n",
           n_q ? (double)d->top1 / n_q : 0.0, d->top1, n_q, d->k,
           d->shown ? (double)d->topk / (double)d->shown : 0.0, (long long)d->topk,
           (long long)d->shown,
           cdb_cli_fmt_duration((double)(cdb_now_ns() - t0) / 1e9, dur, sizeof dur));
    printf("The demo library and database stay in %s; try:\n"
           "  clipdb search --db %s \"a red star\"\n", d->dir, d->dbdir);
    return CLI_EXIT_OK;
}

int cdb_cli_cmd_demo(int argc, char **argv) {
    static const cli_optspec spec[] = {{"count", 0, CLI_VALUE},  {"seed", 0, CLI_VALUE},
                                       {"k", 'k', CLI_VALUE},    {"model", 0, CLI_VALUE},
                                       {"threads", 0, CLI_VALUE}, {"device", 0, CLI_VALUE},
                                       {"quiet", 'q', CLI_FLAG}, {"help", 'h', CLI_FLAG},
                                       {0}};
    cli_args a;
    int rc;
    cdb_k_device device;
    const char *msrc, *mpath;
    int64_t t0 = cdb_now_ns();
    cdb_engine *e = NULL;
    demo_run *d = calloc(1, sizeof *d);
    if (!cdb_cli_begin("demo", &a, spec, argc, argv, &rc)) goto done;
    if (!d) {
        rc = cdb_cli_error("out of memory", "demo");
        goto done;
    }
    if (a.n_pos > 1) {
        rc = cdb_cli_usage_error("demo", "expected at most one DIR, got %d", a.n_pos);
        goto done;
    }
    if (cdb_cli_get_int(&a, "count", 500, 1, 10000000, &d->count) ||
        cdb_cli_get_int(&a, "seed", 1, 0, 0x7fffffffL, &d->seed) ||
        cdb_cli_get_int(&a, "k", 5, 1, 1000, &d->k) ||
        cdb_cli_get_int(&a, "threads", 0, 0, 1024, &d->threads)) {
        rc = cdb_cli_usage_error("demo", "%s", a.err);
        goto done;
    }
    mpath = cdb_cli_model_path(cdb_cli_get(&a, "model"), &msrc);
    if ((rc = cdb_cli_device("demo", cdb_cli_get(&a, "device"), &device)) != CLI_EXIT_OK) goto done;
    if (!mpath) {
        rc = cdb_cli_error("no --model, no CLIPDB_MODEL, and no bundled model was found",
                           "no model for the demo");
        goto done;
    }
    d->lp = cdb_world_library_params_default();
    if ((rc = demo_dir(a.n_pos ? a.pos[0] : NULL, d)) != CLI_EXIT_OK ||
        (rc = demo_create(d, mpath, msrc, device, &e)) != CLI_EXIT_OK ||
        (rc = demo_ingest(e, d)) != CLI_EXIT_OK)
        goto done;
    rc = demo_search(e, d, t0);
done:
    cdb_engine_close(e);
    free(d);
    cdb_cli_args_free(&a);
    return rc;
}
