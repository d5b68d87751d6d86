/*
** bench_serve.c: `clipdb serve` against `clipdb search` as a whole process, in the
** same run, on the same databases. For the bundled model and for ViT-B/32-shaped
** weights, at 10,000 and 100,000 vectors (indexed, as `reindex` leaves a database):
**
**   cli     median wall time of `clipdb search --db DB QUERY` (exec, model load, text
**           encode, index load, search, print) over --runs runs, after one warm-up
**   http-1  one client on a keep-alive connection, back to back, for --seconds:
**           p50 / p99 latency and queries/s of GET /api/search?q=QUERY&k=10
**   http-8  eight such clients at once
**
** Bars (issue 15): HTTP p50 (1 client) <= 0.3 x the CLI's median; >= 150 queries/s
** with ViT-B/32 (8 clients) on this machine's cores; 0 errors. Every query is a
** different text (no cache could help), the server runs with --threads = cores.
**
** Databases: `clipdb init`, then random unit vectors under fake paths through db/'s
** batch API (a search's cost does not depend on what the vectors mean), then `clipdb
** index build`. ViT-B/32-shaped weights: --b32 FILE, $BENCH_WEIGHTS, or written here
** (random F32, OpenAI naming, 577 MB, under the build folder: made once).
**
** Usage: bench_serve [--n N[,N...]] [--seconds S] [--runs R] [--model PATH] [--b32 FILE]
**                    [--skip-b32] [--skip-bundled]
** Exit 0 unless something failed to run (a missed bar is printed, not an error).
*/
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>

#include "db/db.h"
#include "serve/serve_util.h"
#include "bench_db.h"
#include "bench_util.h"

#define MAX_LAT 2000000

static const char *k_words[] = {"red", "blue", "green", "yellow", "purple", "orange", "pink",
                                "brown", "black", "white", "circle", "square", "triangle",
                                "star", "heart", "arrow", "cross", "ring", "dog", "beach",
                                "sunset", "mountain", "city", "car", "tree", "house", "cat"};
#define N_WORDS ((int)(sizeof k_words / sizeof k_words[0]))

/* The i-th query: three words, each query text different. */
static void query_text(uint64_t i, char *buf, size_t size) {
    uint64_t x = i * 0x9E3779B97F4A7C15ULL + 12345;
    x ^= x >> 29;
    snprintf(buf, size, "a %s %s and a %s %llu", k_words[x % N_WORDS], k_words[(x >> 8) % N_WORDS],
             k_words[(x >> 16) % N_WORDS], (unsigned long long)(i % 997));
}

/* ---- databases -------------------------------------------------------------------- */

static uint64_t g_rng = 0x2545F4914F6CDD1DULL;
static float rnd(void) { /* uniform in [-1, 1): enough for random directions */
    g_rng ^= g_rng >> 12, g_rng ^= g_rng << 25, g_rng ^= g_rng >> 27;
    return (float)((double)((g_rng * 2685821657736338717ULL) >> 11) / 4503599627370496.0 - 1.0);
}

static int run_clipdb(const char *const *args, double *ms) {
    cli_run_result r;
    int64_t t0 = cdb_now_ns();
    int rc = cli_run(args, &r);
    if (ms) *ms = (double)(cdb_now_ns() - t0) / 1e6;
    if (rc != 0) {
        fprintf(stderr, "bench_serve: clipdb");
        for (int i = 0; args[i]; i++) fprintf(stderr, " %s", args[i]);
        fprintf(stderr, ": exit %d\n%s%s", rc, r.out, r.err);
    }
    cli_run_free(&r);
    return rc;
}

static int make_db(const char *dir, const char *model, int64_t n) {
    if (run_clipdb((const char *[]){"init", "--db", dir, "--model", model, "--thumb-size", "0", NULL},
                   NULL) != 0 ||
        bench_db_fill(dir, n, NULL, rnd, "bench_serve") != 0)
        return -1;
    return run_clipdb((const char *[]){"index", "build", "--db", dir, "--quiet", NULL}, NULL);
}

/* ---- ViT-B/32-shaped weights ------------------------------------------------------- */

typedef struct tensor {
    char name[96];
    int nd;
    int64_t shape[4];
    int kind; /* 0 normal * 0.02, 1 ones (LayerNorm weights), 2 zeros (biases) */
} tensor;

static int add_t(tensor *t, int n, int kind, const char *name, int nd, int64_t a, int64_t b,
                 int64_t c, int64_t d) {
    snprintf(t[n].name, sizeof t[n].name, "%s", name);
    t[n].nd = nd;
    t[n].shape[0] = a, t[n].shape[1] = b, t[n].shape[2] = c, t[n].shape[3] = d;
    t[n].kind = kind;
    return n + 1;
}

/* A LayerNorm of width W named pre: its weight (ones) and bias (zeros). */
static int add_ln(tensor *t, int n, const char *pre, int64_t W) {
    char k[96];
    snprintf(k, sizeof k, "%sweight", pre);
    n = add_t(t, n, 1, k, 1, W, 0, 0, 0);
    snprintf(k, sizeof k, "%sbias", pre);
    return add_t(t, n, 2, k, 1, W, 0, 0, 0);
}

static int add_block(tensor *t, int n, const char *pre, int64_t W, int64_t M) {
    char k[96];
#define B(kind, suffix, nd, a, b) (snprintf(k, sizeof k, "%s%s", pre, suffix), n = add_t(t, n, kind, k, nd, a, b, 0, 0))
    snprintf(k, sizeof k, "%sln_1.", pre);
    n = add_ln(t, n, k, W);
    B(0, "attn.in_proj_weight", 2, 3 * W, W);
    B(2, "attn.in_proj_bias", 1, 3 * W, 0);
    B(0, "attn.out_proj.weight", 2, W, W);
    B(2, "attn.out_proj.bias", 1, W, 0);
    snprintf(k, sizeof k, "%sln_2.", pre);
    n = add_ln(t, n, k, W);
    B(0, "mlp.c_fc.weight", 2, M, W);
    B(2, "mlp.c_fc.bias", 1, M, 0);
    B(0, "mlp.c_proj.weight", 2, W, M);
    B(2, "mlp.c_proj.bias", 1, W, 0);
#undef B
    return n;
}

/* The 12 residual blocks of a tower of width W and MLP width M, named pre<i>. */
static int add_blocks(tensor *t, int n, const char *pre, int64_t W, int64_t M) {
    char k[96];
    for (int i = 0; i < 12; i++) {
        snprintf(k, sizeof k, "%s%d.", pre, i);
        n = add_block(t, n, k, W, M);
    }
    return n;
}

/* Random ViT-B/32-shaped CLIP weights (OpenAI naming, F32 safetensors), through a
** temporary name and a rename. */
static int write_b32(const char *path) {
    static tensor t[512];
    int n = 0;
    char tmp[4200];
    json_t *hdr = json_object();
    int64_t off = 0;
    FILE *f;
    n = add_t(t, n, 0, "visual.conv1.weight", 4, 768, 3, 32, 32);
    n = add_t(t, n, 0, "visual.class_embedding", 1, 768, 0, 0, 0);
    n = add_t(t, n, 0, "visual.positional_embedding", 2, 50, 768, 0, 0);
    n = add_ln(t, n, "visual.ln_pre.", 768);
    n = add_blocks(t, n, "visual.transformer.resblocks.", 768, 3072);
    n = add_ln(t, n, "visual.ln_post.", 768);
    n = add_t(t, n, 0, "visual.proj", 2, 768, 512, 0, 0);
    n = add_t(t, n, 0, "token_embedding.weight", 2, 49408, 512, 0, 0);
    n = add_t(t, n, 0, "positional_embedding", 2, 77, 512, 0, 0);
    n = add_blocks(t, n, "transformer.resblocks.", 512, 2048);
    n = add_ln(t, n, "ln_final.", 512);
    n = add_t(t, n, 0, "text_projection", 2, 512, 512, 0, 0);
    n = add_t(t, n, 1, "logit_scale", 0, 0, 0, 0, 0);
    for (int i = 0; i < n; i++) {
        json_t *sh = json_array(), *e = json_object();
        int64_t cnt = 1;
        for (int d = 0; d < t[i].nd; d++) {
            json_array_append_new(sh, json_integer(t[i].shape[d]));
            cnt *= t[i].shape[d];
        }
        json_object_set_new(e, "dtype", json_string("F32"));
        json_object_set_new(e, "shape", sh);
        json_object_set_new(e, "data_offsets", json_pack("[II]", (json_int_t)off, (json_int_t)(off + cnt * 4)));
        json_object_set_new(hdr, t[i].name, e);
        off += cnt * 4;
    }
    json_object_set_new(hdr, "__metadata__", json_pack("{ss}", "description", "random ViT-B/32-shaped CLIP (bench_serve)"));
    char *h = json_dumps(hdr, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(hdr);
    size_t hl = strlen(h), pad = (8 - hl % 8) % 8;
    unsigned char len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)(hl + pad) >> (8 * i));
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    if (!(f = fopen(tmp, "wb"))) return -1;
    fwrite(len8, 1, 8, f);
    fwrite(h, 1, hl, f);
    fwrite("        ", 1, pad, f);
    free(h);
    float buf[8192];
    for (int i = 0; i < n; i++) {
        int64_t cnt = 1;
        for (int d = 0; d < t[i].nd; d++) cnt *= t[i].shape[d];
        while (cnt > 0) {
            int k = cnt > 8192 ? 8192 : (int)cnt;
            for (int j = 0; j < k; j++)
                buf[j] = t[i].kind == 1 ? 1.0f : t[i].kind == 2 ? 0.0f : rnd() * 0.035f;
            if (!strcmp(t[i].name, "logit_scale")) buf[0] = 4.6052f;
            fwrite(buf, 4, (size_t)k, f);
            cnt -= k;
        }
    }
    if (fclose(f) != 0) return -1;
    return rename(tmp, path);
}

/* ---- the CLI, as a whole process ------------------------------------------------------ */

static double cli_median(const char *db, int runs, uint64_t seed) {
    double t[64], ms;
    char q[256];
    if (runs > 64) runs = 64;
    query_text(seed, q, sizeof q);
    if (run_clipdb((const char *[]){"search", "--db", db, q, "-k", "10", NULL}, &ms) != 0) return -1;
    for (int i = 0; i < runs; i++) {
        query_text(seed + 1 + (uint64_t)i, q, sizeof q);
        if (run_clipdb((const char *[]){"search", "--db", db, q, "-k", "10", NULL}, &t[i]) != 0) return -1;
    }
    qsort(t, (size_t)runs, sizeof t[0], cmp_d);
    return t[runs / 2];
}

/* ---- HTTP clients ----------------------------------------------------------------------- */

typedef struct load {
    int port, clients;
    double seconds;
    atomic_llong next, done, errors, n_lat;
    double *lat_ms;
} load;

static void *client(void *arg) {
    load *L = arg;
    int fd = su_connect(L->port);
    int64_t until = cdb_now_ns() + (int64_t)(L->seconds * 1e9);
    while (cdb_now_ns() < until) {
        char q[256], enc[512], path[700];
        su_resp r;
        query_text((uint64_t)atomic_fetch_add(&L->next, 1) + 1000000, q, sizeof q);
        snprintf(path, sizeof path, "/api/search?q=%s&k=10", su_urlenc(q, enc, sizeof enc));
        if (fd < 0) fd = su_connect(L->port);
        int64_t t0 = cdb_now_ns();
        int rc = fd >= 0 ? su_request_on(fd, "GET", path, NULL, NULL, 0, &r, 30000) : -1;
        double ms = (double)(cdb_now_ns() - t0) / 1e6;
        if (rc != 0 || r.status != 200) {
            atomic_fetch_add(&L->errors, 1);
            if (fd >= 0) close(fd);
            fd = -1;
        } else {
            long long i = atomic_fetch_add(&L->n_lat, 1);
            if (i < MAX_LAT) L->lat_ms[i] = ms;
            atomic_fetch_add(&L->done, 1);
        }
        su_resp_free(&r);
    }
    if (fd >= 0) close(fd);
    return NULL;
}

typedef struct figures {
    double p50, p99, qps;
    long long n, errors;
} figures;

static figures run_load(int port, int clients, double seconds) {
    load L;
    pthread_t th[64];
    figures f;
    memset(&L, 0, sizeof L);
    memset(&f, 0, sizeof f);
    L.port = port;
    L.clients = clients;
    L.seconds = seconds;
    L.lat_ms = malloc(sizeof *L.lat_ms * MAX_LAT);
    int64_t t0 = cdb_now_ns();
    for (int i = 0; i < clients; i++) pthread_create(&th[i], NULL, client, &L);
    for (int i = 0; i < clients; i++) pthread_join(th[i], NULL);
    double el = (double)(cdb_now_ns() - t0) / 1e9;
    long long n = atomic_load(&L.n_lat) < MAX_LAT ? atomic_load(&L.n_lat) : MAX_LAT;
    qsort(L.lat_ms, (size_t)n, sizeof *L.lat_ms, cmp_d);
    f.n = atomic_load(&L.done);
    f.errors = atomic_load(&L.errors);
    f.qps = (double)f.n / el;
    f.p50 = n ? L.lat_ms[n / 2] : 0;
    f.p99 = n ? L.lat_ms[(size_t)((double)n * 0.99)] : 0;
    free(L.lat_ms);
    return f;
}

/* ---- one configuration -------------------------------------------------------------------- */

typedef struct result {
    char label[64];
    int64_t n;
    double cli_ms;
    figures one, eight;
    int b32;
} result;

static int bench_one(const char *name, const char *model, int64_t n, int b32, double seconds,
                     int runs, result *res) {
    char db[900], th[16];
    su_server s;
    double t_fill;
    int64_t t0 = cdb_now_ns();
    memset(res, 0, sizeof *res);
    snprintf(res->label, sizeof res->label, "%s", name);
    res->n = n;
    res->b32 = b32;
    snprintf(db, sizeof db, "%s/%s-%lld", lu_tmp, b32 ? "b32" : "bundled", (long long)n);
    if (make_db(db, model, n) != 0) return -1;
    t_fill = (double)(cdb_now_ns() - t0) / 1e9;
    if ((res->cli_ms = cli_median(db, runs, (uint64_t)n)) < 0) return -1;
    snprintf(th, sizeof th, "%d", cdb_default_threads());
    if (su_start(&s, (const char *[]){"--db", db, "--threads", th, "--quiet", NULL}) != 0) return -1;
    { /* warm-up: the first search builds the search state */
        su_resp r;
        su_get(s.port, "/api/search?q=warm%20up&k=10", &r);
        su_resp_free(&r);
    }
    res->one = run_load(s.port, 1, seconds);
    res->eight = run_load(s.port, 8, seconds);
    su_stop(&s);
    printf("  %-26s %7lld vectors (filled + indexed in %.0f s)\n", name, (long long)n, t_fill);
    printf("    cli (whole process)   median %8.1f ms\n", res->cli_ms);
    printf("    http, 1 client        p50 %6.2f ms  p99 %6.2f ms  %7.1f queries/s  %lld errors\n",
           res->one.p50, res->one.p99, res->one.qps, res->one.errors);
    printf("    http, 8 clients       p50 %6.2f ms  p99 %6.2f ms  %7.1f queries/s  %lld errors\n",
           res->eight.p50, res->eight.p99, res->eight.qps, res->eight.errors);
    printf("    ratio http p50 / cli  %.3f\n", res->one.p50 / res->cli_ms);
    fflush(stdout);
    return 0;
}

static const char *find_model(char *buf, size_t size) {
    const char *m = cli_find_model();
    if (m) snprintf(buf, size, "%s", m);
    return m ? buf : NULL;
}

int main(int argc, char **argv) {
    char mbuf[4096], b32[4096] = "", nlist[256] = "10000,100000";
    const char *model = NULL, *env_w = getenv("BENCH_WEIGHTS");
    double seconds = 5;
    int runs = 7, skip_b32 = 0, skip_bundled = 0, n_res = 0, bad = 0;
    result res[16];
    int64_t ns[8];
    int n_ns = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--n") && i + 1 < argc) snprintf(nlist, sizeof nlist, "%s", argv[++i]);
        else if (!strcmp(argv[i], "--seconds") && i + 1 < argc) seconds = atof(argv[++i]);
        else if (!strcmp(argv[i], "--runs") && i + 1 < argc) runs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--model") && i + 1 < argc) model = argv[++i];
        else if (!strcmp(argv[i], "--b32") && i + 1 < argc) snprintf(b32, sizeof b32, "%s", argv[++i]);
        else if (!strcmp(argv[i], "--skip-b32")) skip_b32 = 1;
        else if (!strcmp(argv[i], "--skip-bundled")) skip_bundled = 1;
        else {
            fprintf(stderr, "usage: bench_serve [--n N[,N...]] [--seconds S] [--runs R] [--model PATH] "
                            "[--b32 FILE] [--skip-b32] [--skip-bundled]\n");
            return 2;
        }
    }
    for (char *p = strtok(nlist, ","); p && n_ns < 8; p = strtok(NULL, ",")) ns[n_ns++] = atoll(p);
    if (!model) model = find_model(mbuf, sizeof mbuf);
    if (!model) {
        printf("bench_serve: no bundled model (models/<name>/): skipped\n");
        return 77;
    }
    if (!cli_tmpdir(lu_tmp, sizeof lu_tmp)) return 1;
    if (!skip_b32 && !b32[0]) {
        if (env_w && *env_w) snprintf(b32, sizeof b32, "%s", env_w);
        else snprintf(b32, sizeof b32, "%s/bench_data/vitb32_random_f32.safetensors", CDB_BINARY_DIR);
        if (access(b32, R_OK) != 0) {
            char dir[4200];
            snprintf(dir, sizeof dir, "%s/bench_data", CDB_BINARY_DIR);
            mkdir(dir, 0777);
            printf("writing ViT-B/32-shaped random weights (once): %s\n", b32);
            fflush(stdout);
            if (write_b32(b32) != 0) {
                fprintf(stderr, "bench_serve: cannot write %s\n", b32);
                return 1;
            }
        }
    }
    {
        double l[3] = {0, 0, 0};
        getloadavg(l, 3);
        printf("bench_serve: %d cores, load average %.2f; %.0f s per load run, %d CLI runs; "
               "GET /api/search?q=<a different text each time>&k=10\n",
               cdb_default_threads(), l[0], seconds, runs);
    }
    for (int i = 0; !skip_bundled && i < n_ns; i++) {
        char label[64];
        snprintf(label, sizeof label, "bundled model");
        if (bench_one(label, model, ns[i], 0, seconds, runs, &res[n_res]) == 0) n_res++;
        else bad = 1;
    }
    for (int i = 0; !skip_b32 && i < n_ns; i++) {
        char label[64];
        snprintf(label, sizeof label, "ViT-B/32-shaped");
        if (bench_one(label, b32, ns[i], 1, seconds, runs, &res[n_res]) == 0) n_res++;
        else bad = 1;
    }
    printf("\nsummary                       vectors   cli ms  http p50  ratio  qps(1)  qps(8)  p99(8)  errors\n");
    long long errors = 0;
    int met_ratio = 1, met_qps = 1, have_b32 = 0;
    for (int i = 0; i < n_res; i++) {
        result *r = &res[i];
        double ratio = r->one.p50 / r->cli_ms;
        printf("  %-26s %9lld %8.1f %9.2f %6.3f %7.1f %7.1f %7.2f %7lld\n", r->label, (long long)r->n,
               r->cli_ms, r->one.p50, ratio, r->one.qps, r->eight.qps, r->eight.p99,
               r->one.errors + r->eight.errors);
        errors += r->one.errors + r->eight.errors;
        met_ratio &= ratio <= 0.3;
        if (r->b32) {
            have_b32 = 1;
            met_qps &= r->eight.qps >= 150;
        }
    }
    printf("bar: HTTP p50 <= 0.3 x the CLI's: %s\n", met_ratio ? "MET" : "MISSED");
    if (have_b32)
        printf("bar: >= 150 queries/s with ViT-B/32 (8 clients, %d cores): %s\n", cdb_default_threads(),
               met_qps ? "MET" : "MISSED");
    printf("bar: 0 errors: %s (%lld)\n", errors == 0 ? "MET" : "MISSED", errors);
    lu_rm_rf(lu_tmp);
    return bad ? 1 : 0;
}
