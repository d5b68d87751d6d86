/*
** cmd_search.c: `clipdb search`. Builds the query vector (text terms with
** weights, --image examples, --not terms; combined and normalized by
** cdb_index_query_combine), asks the model's index for candidates, plus an exact
** pass over the vectors stored since the index was built (or over everything
** when there is no index yet), re-ranks exactly in fp32 from the stored fp16
** vectors, filters (--min-score, --under), sorts (--sort) and prints: one line per
** hit (rank, score to 4 decimals, path), --paths (bare paths; -0 for NUL), or
** --json (one document). Nothing but results goes to stdout.
*/
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"

#if CDB_CLI_HAVE_DB && CDB_CLI_HAVE_INDEX && CDB_CLI_HAVE_ENCODER
#define CLI_SEARCH_WIRED 1
#include "db/db.h"
#include "encoder/encoder.h"
#include "index/index.h"
#else
#define CLI_SEARCH_WIRED 0
#endif

/* The most text a query may hold (all words plus --not texts), documented in
** 'clipdb search --help'. CLIP's text tower reads 77 tokens per term; 64 KiB is
** far beyond any useful query and keeps tokenizing cheap and memory bounded. */
#define CLI_QUERY_MAX_BYTES 65536

#define NO_MODULES "the database, index and encoder modules are not all linked into this build"

/* Joins the positionals with spaces (the query text); NULL when there are none. */
static char *join_words(const char **w, int n) {
    size_t len = 0, o = 0;
    char *s;
    if (n == 0) return NULL;
    for (int i = 0; i < n; i++) len += strlen(w[i]) + 1;
    if (!(s = malloc(len))) return NULL;
    for (int i = 0; i < n; i++) {
        size_t k = strlen(w[i]);
        if (i) s[o++] = ' ';
        memcpy(s + o, w[i], k);
        o += k;
    }
    s[o] = '\0';
    return s;
}

/* Reads the query text from stdin into *text (heap, NUL-terminated): at most
** CLI_QUERY_MAX_BYTES + 1 bytes are read; *too_long is set when there were more. */
static int read_query_stdin(char **text, size_t *len, int *too_long) {
    char *buf = malloc(CLI_QUERY_MAX_BYTES + 2);
    size_t got = 0;
    *text = NULL;
    *len = 0;
    *too_long = 0;
    if (!buf) return cli_error("out of memory", "cannot search");
    while (got < CLI_QUERY_MAX_BYTES + 1) {
        ssize_t k = read(0, buf + got, CLI_QUERY_MAX_BYTES + 1 - got);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) {
            free(buf);
            return cli_error(strerror(errno), "cannot read the query from standard input");
        }
        if (k == 0) break;
        got += (size_t)k;
    }
    buf[got] = '\0';
    *too_long = got > CLI_QUERY_MAX_BYTES;
    *text = buf;
    *len = got;
    return CLI_EXIT_OK;
}

#if CLI_SEARCH_WIRED

typedef struct hit {
    int64_t id;
    float score;
    char *path;
    int64_t mtime_ns;
} hit;

static int by_time(const void *a, const void *b) {
    const hit *x = a, *y = b;
    if (x->mtime_ns != y->mtime_ns) return x->mtime_ns > y->mtime_ns ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* The query vector: sum of weighted, normalized term embeddings, normalized. */
static int build_query(cdb_model *m, const cli_term *terms, int n_terms, const char **nots,
                       int n_not, const char **images, int n_img, int no_exif, float *q) {
    int dim = cdb_model_get_info(m)->embed_dim, n = n_terms + n_not + n_img, rc = CLI_EXIT_OK;
    float *emb = calloc((size_t)n * (size_t)dim, sizeof *emb), *w = calloc((size_t)n, sizeof *w);
    const char **texts = calloc((size_t)(n_terms + n_not + 1), sizeof *texts);
    cdb_image_params ip = cdb_image_params_default();
    cdb_status st;
    if (!emb || !w || !texts) {
        rc = cli_error("out of memory", "cannot build the query");
        goto done;
    }
    for (int i = 0; i < n_terms; i++) {
        texts[i] = terms[i].text;
        w[i] = (float)terms[i].weight;
    }
    for (int i = 0; i < n_not; i++) {
        texts[n_terms + i] = nots[i];
        w[n_terms + i] = -1.0f;
    }
    if (n_terms + n_not &&
        (st = cdb_encode_texts(m, texts, n_terms + n_not, 1, emb)) != CDB_OK) {
        rc = cli_error_status(st, "cannot encode the query text");
        goto done;
    }
    ip.apply_exif = !no_exif;
    for (int i = 0; i < n_img; i++) {
        int r = n_terms + n_not + i;
        if ((st = cdb_encode_image_file(m, images[i], &ip, 1, emb + (size_t)r * dim)) != CDB_OK) {
            rc = cli_error_status(st, "cannot use the query image %s", images[i]);
            goto done;
        }
        w[r] = 1.0f;
    }
    if ((st = cdb_index_query_combine(emb, w, n, dim, q)) != CDB_OK) {
        rc = cli_error_status(st, "cannot combine the query terms");
        if (st == CDB_INVALID) cli_hint("the terms may cancel out (e.g. \"a - a\")");
    }
done:
    free(emb);
    free(w);
    free(texts);
    return rc;
}

/* Top `want` hits for q (see cli.h). */
int cli_search_vector(cdb_db *db, int64_t model_id, int dim, const float *q, int want,
                      float min_score, cdb_hit *out, int *n_out) {
    char path[4096];
    cdb_index *ix = NULL;
    cdb_status st = CDB_OK;
    int64_t *extra_ids = NULL;
    uint16_t *extra_vecs = NULL;
    size_t n_extra = 0;
    cli_fetch_ctx fc = {db, model_id, dim};
    cdb_index_search_opts so = cdb_index_search_opts_default();
    int rc = CLI_EXIT_OK;
    cli_index_path(db, model_id, path, sizeof path);
    st = cdb_index_load(path, &ix);
    if (st == CDB_OK && cdb_index_dim(ix) != dim) {
        cdb_index_free(ix);
        ix = NULL;
        st = CDB_NOTFOUND;
    }
    if (st != CDB_OK) {
        int64_t n = 0;
        if (st != CDB_NOTFOUND)
            cli_warn("the index %s is unusable (%s); searching without it", path, cdb_errmsg());
        ix = NULL;
        /* no index: every stored vector is searched exactly */
        if ((st = cli_read_all_vectors(db, model_id, dim, &extra_ids, &extra_vecs, &n)) != CDB_OK) {
            rc = cli_error_status(st, "cannot read the stored vectors");
            goto done;
        }
        n_extra = (size_t)n;
    } else {
        /* vectors stored since the index was built are searched exactly */
        uint8_t *found = NULL;
        size_t k = 0;
        st = cli_ids_since(db, model_id, (int64_t)cdb_index_watermark(ix), 0, &extra_ids, &n_extra);
        if (st == CDB_OK && n_extra) {
            extra_vecs = malloc(sizeof *extra_vecs * n_extra * (size_t)dim);
            found = malloc(n_extra);
            if (!extra_vecs || !found) st = cdb_seterr(CDB_NOMEM, "out of memory");
            else st = cli_fetch_vectors(&fc, extra_ids, n_extra, extra_vecs, found);
            for (size_t i = 0; st == CDB_OK && i < n_extra; i++)
                if (found[i]) {
                    if (k != i) {
                        extra_ids[k] = extra_ids[i];
                        memmove(extra_vecs + k * (size_t)dim, extra_vecs + i * (size_t)dim,
                                sizeof *extra_vecs * (size_t)dim);
                    }
                    k++;
                }
            n_extra = k;
        }
        free(found);
        if (st != CDB_OK) {
            rc = cli_error_status(st, "cannot read the vectors added since the index was built");
            goto done;
        }
    }
    so.k = want;
    so.min_score = min_score;
    so.fetch = cli_fetch_vectors;
    so.fetch_ctx = &fc;
    so.extra_ids = extra_ids;
    so.extra_vecs = extra_vecs;
    so.n_extra = n_extra;
    if ((st = cdb_index_search(ix, q, dim, &so, out, n_out)) != CDB_OK)
        rc = cli_error_status(st, "search failed");
done:
    cdb_index_free(ix);
    free(extra_ids);
    free(extra_vecs);
    return rc;
}

static void print_hits(const hit *h, int n, int json, int paths, int nul, const char *query,
                       const char *model_name) {
    if (json) {
        cli_json j;
        cli_json_init(&j, stdout, 1);
        cli_json_begin_object(&j);
        cli_json_key(&j, "query");
        cli_json_str(&j, query);
        cli_json_key(&j, "model");
        cli_json_str(&j, model_name);
        cli_json_key(&j, "count");
        cli_json_int(&j, n);
        cli_json_key(&j, "hits");
        cli_json_begin_array(&j);
        for (int i = 0; i < n; i++) {
            cli_json_begin_object(&j);
            cli_json_key(&j, "rank");
            cli_json_int(&j, i + 1);
            cli_json_key(&j, "score");
            cli_json_float(&j, h[i].score);
            cli_json_key(&j, "id");
            cli_json_int(&j, h[i].id);
            cli_json_path(&j, "path", h[i].path);
            cli_json_key(&j, "mtime_ns");
            cli_json_int(&j, h[i].mtime_ns);
            cli_json_end_object(&j);
        }
        cli_json_end_array(&j);
        cli_json_end_object(&j);
        cli_json_done(&j);
    } else if (paths) {
        for (int i = 0; i < n; i++) {
            fputs(h[i].path, stdout);
            fputc(nul ? '\0' : '\n', stdout);
        }
    } else {
        for (int i = 0; i < n; i++) printf("%d\t%.4f\t%s\n", i + 1, (double)h[i].score, h[i].path);
    }
    fflush(stdout);
}

#endif /* CLI_SEARCH_WIRED */

int cli_cmd_search(int argc, char **argv) {
    static const cli_optspec spec[] = {
        {"db", 0, CLI_VALUE},        {"k", 'k', CLI_VALUE},     {"image", 0, CLI_MULTI},
        {"not", 0, CLI_MULTI},       {"min-score", 0, CLI_VALUE}, {"under", 0, CLI_VALUE},
        {"sort", 0, CLI_VALUE},      {"model", 0, CLI_VALUE},   {"json", 0, CLI_FLAG},
        {"paths", 0, CLI_FLAG},      {"null", '0', CLI_FLAG},   {"device", 0, CLI_VALUE},
        {"no-exif", 0, CLI_FLAG},    {"quiet", 'q', CLI_FLAG},  {"help", 'h', CLI_FLAG},
        {0}};
    static const char *const sorts[] = {"score", "time", NULL};
    cli_args a;
    int rc, n_terms = 0, n_img, n_not, sort;
    long k;
    double min_score;
    const char **images, **nots;
    char *text = NULL, err[256];
    cli_term *terms = NULL;
    if (!cli_begin("search", &a, spec, argc, argv, &rc)) goto done;
    n_img = cli_get_all(&a, "image", &images);
    n_not = cli_get_all(&a, "not", &nots);
    if (cli_get_int(&a, "k", 10, 1, 100000, &k) ||
        cli_get_double(&a, "min-score", -1.0, -1.0, 1.0, &min_score)) {
        rc = cli_usage_error("search", "%s", a.err);
        goto done;
    }
    if ((sort = cli_get_choice(&a, "sort", sorts, 0)) < 0) {
        rc = cli_usage_error("search", "%s", a.err);
        goto done;
    }
    if (cli_has(&a, "json") && cli_has(&a, "paths")) {
        rc = cli_usage_error("search", "--json and --paths cannot be combined");
        goto done;
    }
    if (cli_has(&a, "null") && !cli_has(&a, "paths")) {
        rc = cli_usage_error("search", "-0/--null goes with --paths");
        goto done;
    }
    if (a.n_pos == 0 && n_img == 0) {
        rc = cli_usage_error("search", "no QUERY given (give text, or --image PATH)");
        goto done;
    }
    { /* bounded work and memory whatever the caller passes: checked before any copy */
        size_t total = 0;
        for (int i = 0; i < a.n_pos; i++) total += strlen(a.pos[i]) + 1;
        for (int i = 0; i < n_not; i++) total += strlen(nots[i]) + 1;
        if (total > CLI_QUERY_MAX_BYTES) {
            rc = cli_usage_error("search",
                                 "query too long: %zu bytes of text (the limit is %d bytes, 64 KiB)",
                                 total, CLI_QUERY_MAX_BYTES);
            goto done;
        }
    }
    if (a.n_pos == 1 && !strcmp(a.pos[0], "-")) {
        /* the query text from standard input: at most the limit is ever read */
        size_t got = 0;
        int too_long = 0;
        if ((rc = read_query_stdin(&text, &got, &too_long)) != CLI_EXIT_OK) goto done;
        if (too_long) {
            rc = cli_usage_error("search",
                                 "query too long: more than %d bytes on standard input (the limit "
                                 "is %d bytes, 64 KiB)",
                                 CLI_QUERY_MAX_BYTES, CLI_QUERY_MAX_BYTES);
            goto done;
        }
        while (got && (text[got - 1] == '\n' || text[got - 1] == '\r')) text[--got] = '\0';
        if (!got || memchr(text, '\0', got)) {
            rc = cli_usage_error("search", "%s query on standard input",
                                 got ? "a NUL byte in the" : "an empty");
            goto done;
        }
    }
    if (a.n_pos) {
        if (!text && !(text = join_words(a.pos, a.n_pos))) {
            rc = cli_error("out of memory", "cannot search");
            goto done;
        }
        if (cli_query_parse(text, &terms, &n_terms, err, sizeof err) != 0) {
            rc = cli_usage_error("search", "bad query: %s", err);
            goto done;
        }
    }
#if CLI_SEARCH_WIRED
    {
        cdb_db *db = NULL;
        cdb_model *m = NULL;
        int64_t model_id = 0;
        int dim, device = cli_device(cli_get(&a, "device"), NULL), want, n_out = 0, n_hits = 0;
        float *q = NULL;
        cdb_hit *raw = NULL;
        hit *hits = NULL;
        const char *under = cli_get(&a, "under");
        char under_abs[PATH_MAX];
        size_t under_len = 0;
        int under_dir = 0; /* an existing folder: match whole path components */
        if (device < 0) {
            rc = cli_usage_error("search", "bad device (expected auto, cpu or cuda)");
            goto s_done;
        }
        if (under) { /* compare against absolute paths, as stored */
            struct stat sb;
            if (realpath(under, under_abs)) {
                under_dir = stat(under_abs, &sb) == 0 && S_ISDIR(sb.st_mode);
            } else { /* not an existing path: a plain prefix of absolute paths */
                char cwd[PATH_MAX];
                if (under[0] != '/' && getcwd(cwd, sizeof cwd))
                    snprintf(under_abs, sizeof under_abs, "%.*s/%s", (int)(sizeof under_abs / 2), cwd, under);
                else
                    snprintf(under_abs, sizeof under_abs, "%s", under);
            }
            under = under_abs;
            under_len = strlen(under);
        }
        if ((rc = cli_open_db(cli_get(&a, "db"), 0, 0, &db)) != CLI_EXIT_OK) goto s_done;
        if (n_img == 0) cli_set_model_threads(1); /* a few tokens: one thread is fastest */
        if ((rc = cli_db_model(db, cli_get(&a, "model"), n_img > 0, n_terms + n_not > 0, device,
                               0, &m, &model_id, NULL)) != CLI_EXIT_OK)
            goto s_done;
        dim = cdb_model_get_info(m)->embed_dim;
        if (!(q = malloc(sizeof *q * (size_t)dim))) {
            rc = cli_error("out of memory", "cannot search");
            goto s_done;
        }
        if ((rc = build_query(m, terms, n_terms, nots, n_not, images, n_img,
                              cli_has(&a, "no-exif") > 0, q)) != CLI_EXIT_OK)
            goto s_done;
        /* --under filters after ranking: ask for more until k survive or all are seen */
        for (want = under ? (int)k * 4 : (int)k;; want *= 4) {
            cdb_hit *nr = realloc(raw, sizeof *raw * (size_t)want);
            hit *nh = realloc(hits, sizeof *hits * (size_t)want);
            if (nr) raw = nr;
            if (nh) hits = nh;
            if (!nr || !nh) {
                rc = cli_error("out of memory", "cannot search");
                goto s_done;
            }
            for (int i = 0; i < n_hits; i++) cdb_free(hits[i].path);
            n_hits = 0;
            if ((rc = cli_search_vector(db, model_id, dim, q, want, (float)min_score, raw, &n_out)) !=
                CLI_EXIT_OK)
                goto s_done;
            for (int i = 0; i < n_out && n_hits < k; i++) {
                char *p = NULL;
                cdb_db_file f;
                if (cdb_db_file_path(db, raw[i].id, &p) != CDB_OK) continue; /* gone meanwhile */
                if (under && (strncmp(p, under, under_len) ||
                              (under_dir && p[under_len] != '/' && p[under_len] != '\0' &&
                               under[under_len - 1] != '/'))) {
                    cdb_free(p);
                    continue;
                }
                hits[n_hits].id = raw[i].id;
                hits[n_hits].score = raw[i].score;
                hits[n_hits].path = p;
                hits[n_hits].mtime_ns = 0;
                memset(&f, 0, sizeof f);
                if (cdb_db_file_get(db, raw[i].id, &f) == CDB_OK) hits[n_hits].mtime_ns = f.meta.mtime_ns;
                cdb_db_file_clear(&f);
                n_hits++;
            }
            if (!under || n_hits >= k || n_out < want || want > 1000000) break;
        }
        if (sort == 1 && n_hits > 1) qsort(hits, (size_t)n_hits, sizeof *hits, by_time);
        print_hits(hits, n_hits, cli_has(&a, "json") > 0, cli_has(&a, "paths") > 0,
                   cli_has(&a, "null") > 0, text ? text : "", cdb_model_get_info(m)->name);
        rc = CLI_EXIT_OK;
    s_done:
        for (int i = 0; i < n_hits; i++) cdb_free(hits[i].path);
        free(hits);
        free(raw);
        free(q);
        cdb_model_close(m);
        cdb_db_close(db);
    }
#else
    (void)n_not, (void)nots, (void)sort;
    rc = cli_not_available("search", NO_MODULES);
#endif
done:
    cli_query_free(terms, n_terms);
    free(text);
    cli_args_free(&a);
    return rc;
}
