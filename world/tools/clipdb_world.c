/*
** clipdb_world.c: the `clipdb-world` tool, a thin command line over world.h for the
** training and evaluation scripts (the clipdb CLI calls world.h itself).
**
**   clipdb-world generate DIR [--seed S] [--n N] [--first F] [--variants K]
**                [--min-side A] [--max-side B] [--square] [--png-fraction F] [--threads T]
**   clipdb-world queries [--kind single|compositional] [--seed S] [--n N]
**                [--library-seed L --library-n M  (+ the same scene flags)]
**
** `queries` prints one JSON object per line: {"text", "query"} and, when a library is
** named, "relevant": the indices of the library's scenes that match (the ground truth,
** from cdb_world_scene_matches; no image is rendered). Exit 0 on success, 1 on error,
** 2 on bad usage.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "world/world.h"

static void usage(FILE *f) {
    fputs("usage: clipdb-world generate DIR [--seed S] [--n N] [--first F] [--variants K]\n"
          "                    [--min-side A] [--max-side B] [--square] [--png-fraction F]\n"
          "                    [--threads T]\n"
          "       clipdb-world queries [--kind single|compositional] [--seed S] [--n N]\n"
          "                    [--library-seed L --library-n M] [scene flags as above]\n",
          f);
}

typedef struct opts {
    const char *dir;
    uint64_t seed, library_seed;
    long long n, first, library_n;
    int kind, have_library;
    cdb_world_library_params lib;
} opts;

static int parse(int argc, char **argv, int cmd_generate, opts *o) {
    o->seed = 1;
    o->n = 100;
    o->first = 0;
    o->kind = CDB_WORLD_Q_SINGLE;
    o->lib = cdb_world_library_params_default();
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEED_VALUE() do { if (!v) { fprintf(stderr, "clipdb-world: %s needs a value\n", a); return 0; } i++; } while (0)
        if (!strcmp(a, "--seed")) { NEED_VALUE(); o->seed = strtoull(v, NULL, 0); }
        else if (!strcmp(a, "--n")) { NEED_VALUE(); o->n = atoll(v); }
        else if (!strcmp(a, "--first")) { NEED_VALUE(); o->first = atoll(v); }
        else if (!strcmp(a, "--variants")) { NEED_VALUE(); o->lib.n_variants = atoi(v); }
        else if (!strcmp(a, "--min-side")) { NEED_VALUE(); o->lib.scene.min_side = atoi(v); }
        else if (!strcmp(a, "--max-side")) { NEED_VALUE(); o->lib.scene.max_side = atoi(v); }
        else if (!strcmp(a, "--png-fraction")) { NEED_VALUE(); o->lib.scene.png_fraction = (float)atof(v); }
        else if (!strcmp(a, "--threads")) { NEED_VALUE(); o->lib.n_threads = atoi(v); }
        else if (!strcmp(a, "--square")) { o->lib.scene.square_only = 1; }
        else if (!strcmp(a, "--library-seed")) { NEED_VALUE(); o->library_seed = strtoull(v, NULL, 0); o->have_library = 1; }
        else if (!strcmp(a, "--library-n")) { NEED_VALUE(); o->library_n = atoll(v); }
        else if (!strcmp(a, "--kind")) {
            NEED_VALUE();
            if (!strcmp(v, "single")) o->kind = CDB_WORLD_Q_SINGLE;
            else if (!strcmp(v, "compositional")) o->kind = CDB_WORLD_Q_COMPOSITIONAL;
            else { fprintf(stderr, "clipdb-world: unknown kind '%s'\n", v); return 0; }
        }
        else if (cmd_generate && a[0] != '-' && !o->dir) o->dir = a;
        else { fprintf(stderr, "clipdb-world: unexpected argument '%s'\n", a); return 0; }
#undef NEED_VALUE
    }
    if (cmd_generate && !o->dir) { fprintf(stderr, "clipdb-world: generate needs DIR\n"); return 0; }
    if (o->n < 0 || o->first < 0 || o->library_n < 0) { fprintf(stderr, "clipdb-world: negative count\n"); return 0; }
    return 1;
}

static int cmd_queries(const opts *o) {
    cdb_world_scene *scenes = NULL;
    char text[1024];
    char *json = NULL;
    int ret = 1;
    if (o->have_library) {
        if (!(scenes = cdb_calloc((size_t)(o->library_n ? o->library_n : 1), sizeof *scenes))) goto oom;
        for (long long i = 0; i < o->library_n; i++)
            if (cdb_world_scene_make(o->library_seed, i, &o->lib.scene, &scenes[i]) != CDB_OK) goto fail;
    }
    for (long long k = 0; k < o->n; k++) {
        cdb_world_query q;
        if (cdb_world_query_make(o->seed, k, o->kind, &q) != CDB_OK) goto fail;
        if (cdb_world_query_text(&q, text, sizeof text) != CDB_OK) goto fail;
        if (cdb_world_query_json(&q, &json) != CDB_OK) goto fail;
        printf("{\"text\":\"%s\",\"query\":%s", text, json);
        cdb_free(json);
        json = NULL;
        if (o->have_library) {
            int first = 1;
            fputs(",\"relevant\":[", stdout);
            for (long long i = 0; i < o->library_n; i++)
                if (cdb_world_scene_matches(&scenes[i], &q)) {
                    printf("%s%lld", first ? "" : ",", i);
                    first = 0;
                }
            fputs("]", stdout);
        }
        fputs("}\n", stdout);
    }
    ret = 0;
    goto done;
oom:
    cdb_seterr(CDB_NOMEM, "out of memory");
fail:
    fprintf(stderr, "clipdb-world: error: %s\n", cdb_errmsg());
done:
    cdb_free(scenes);
    return ret;
}

int main(int argc, char **argv) {
    opts o;
    memset(&o, 0, sizeof o);
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "generate")) {
        if (!parse(argc, argv, 1, &o)) { usage(stderr); return 2; }
        int64_t t0 = cdb_now_ns();
        cdb_status rc = cdb_world_generate(o.dir, o.seed, o.first, o.n, &o.lib);
        if (rc != CDB_OK) {
            fprintf(stderr, "clipdb-world: error: %s: %s\n", cdb_status_str(rc), cdb_errmsg());
            return 1;
        }
        fprintf(stderr, "clipdb-world: %lld image%s in %s (%.2f s)\n", o.n, o.n == 1 ? "" : "s",
                o.dir, (double)(cdb_now_ns() - t0) * 1e-9);
        return 0;
    }
    if (!strcmp(argv[1], "queries")) {
        if (!parse(argc, argv, 0, &o)) { usage(stderr); return 2; }
        return cmd_queries(&o);
    }
    fprintf(stderr, "clipdb-world: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
