/*
** cmd_search.c: `clipdb search`, over cdb_engine_search (engine/search/search.c: the query
** language, example images, the index plus an exact pass over what it does not cover,
** the exact re-rank, --min-score, --under, --sort). This file parses the options,
** reads a query from stdin, and prints: one line per hit (rank, score to 4 decimals,
** path), --paths (bare paths; -0 for NUL), or --json (one document). Nothing but
** results goes to stdout. Standard input holds the query text ('-' among the words) or
** the example image (--image -), read once.
*/
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"

/* The most text a query may hold (all words plus --not texts), documented in
** 'clipdb search --help': the engine's limit. */
#define CLI_QUERY_MAX_BYTES CDB_ENGINE_QUERY_MAX_BYTES

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
    if (!buf) return cdb_cli_error("out of memory", "cannot search");
    while (got < CLI_QUERY_MAX_BYTES + 1) {
        ssize_t k = read(0, buf + got, CLI_QUERY_MAX_BYTES + 1 - got);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) {
            free(buf);
            return cdb_cli_error(strerror(errno), "cannot read the query from standard input");
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

/* The most bytes `--image -` reads from standard input: far beyond any photo's file
** (a 200 MP JPEG is ~100 MB), and a bound on the memory a pipe can make clipdb take. */
#define CLI_IMAGE_STDIN_MAX_BYTES ((size_t)1 << 30)

/* Reads the example image of `--image -` from standard input into *buf (heap, *n
** bytes). CLI_EXIT_OK, or the error printed (an empty or oversized input is a usage
** error). */
static int read_image_stdin(unsigned char **buf, size_t *n) {
    size_t cap = 1 << 20, got = 0;
    unsigned char *b = malloc(cap);
    *buf = NULL;
    *n = 0;
    if (!b) return cdb_cli_error("out of memory", "cannot read the image on standard input");
    for (;;) {
        ssize_t k;
        if (got == cap) {
            unsigned char *nb;
            if (cap >= CLI_IMAGE_STDIN_MAX_BYTES) {
                free(b);
                return cdb_cli_usage_error("search", "the image on standard input is larger than "
                                                     "%zu MiB", CLI_IMAGE_STDIN_MAX_BYTES >> 20);
            }
            if (!(nb = realloc(b, cap * 2))) {
                free(b);
                return cdb_cli_error("out of memory", "cannot read the image on standard input");
            }
            b = nb;
            cap *= 2;
        }
        k = read(0, b + got, cap - got);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) {
            int e = errno;
            free(b);
            return cdb_cli_error(strerror(e), "cannot read the image on standard input");
        }
        if (k == 0) break;
        got += (size_t)k;
    }
    if (!got) {
        free(b);
        return cdb_cli_usage_error("search", "--image -: standard input is empty (pipe an image "
                                             "into it: clipdb search --image - < photo.jpg)");
    }
    *buf = b;
    *n = got;
    return CLI_EXIT_OK;
}

/* The --image values without the '-' (standard input) among them, in *paths (heap)
** and *n_paths; *from_stdin when there was one. Two '-', or one beside a '-' query
** word, are usage errors (standard input is read once). CLI_EXIT_OK or the error
** printed. */
static int split_images(const cli_args *a, const char **images, int n_img, const char ***paths,
                        int *n_paths, int *from_stdin) {
    int dashes = 0, text_dash = 0;
    *paths = NULL;
    *n_paths = 0;
    *from_stdin = 0;
    for (int i = 0; i < n_img; i++) dashes += !strcmp(images[i], "-");
    for (int i = 0; i < a->n_pos; i++) text_dash |= !strcmp(a->pos[i], "-");
    if (dashes > 1)
        return cdb_cli_usage_error("search", "--image - (the image on standard input) given "
                                             "twice");
    if (dashes && text_dash)
        return cdb_cli_usage_error("search", "standard input holds either the query text ('-') "
                                             "or the image (--image -), not both");
    if (n_img && !(*paths = malloc(sizeof **paths * (size_t)n_img)))
        return cdb_cli_error("out of memory", "cannot search");
    for (int i = 0; i < n_img; i++)
        if (strcmp(images[i], "-")) (*paths)[(*n_paths)++] = images[i];
    *from_stdin = dashes;
    return CLI_EXIT_OK;
}

/* "key": [strings] (the query's example images and --not texts, as given). paths: the
** strings are paths, under the path rule as a list: when one is not valid UTF-8,
** "<key>_b64" follows, the exact bytes of each in base64 (null for the valid ones). */
static void json_strings(cdb_json *j, const char *key, const char *const *s, int n,
                         int paths) {
    char k2[128];
    int any = 0;
    if (!n) return;
    cdb_json_key(j, key);
    cdb_json_begin_array(j);
    for (int i = 0; i < n; i++) {
        cdb_json_str(j, s[i]);
        any |= paths && cdb_out_path_needs_b64(s[i]);
    }
    cdb_json_end_array(j);
    if (!any) return;
    cdb_json_key(j, cdb_out_path_b64_key(key, k2, sizeof k2));
    cdb_json_begin_array(j);
    for (int i = 0; i < n; i++) {
        size_t len = strlen(s[i]);
        char *b64 = cdb_out_path_needs_b64(s[i]) ? malloc(cdb_out_base64_len(len) + 1) : NULL;
        if (b64) cdb_json_str(j, cdb_out_base64(s[i], len, b64));
        else cdb_json_null(j); /* valid UTF-8 (or out of memory: then the text alone) */
        free(b64);
    }
    cdb_json_end_array(j);
}

/* --json: a kept hit's copies (collapse on): "duplicates": N and "copies": [ids], and
** over several databases "copies_db": [the database of each]. */
static void json_copies(cdb_json *j, const cdb_engine_hit *h, int n_db) {
    cdb_json_key(j, "duplicates");
    cdb_json_int(j, h->n_copies);
    cdb_json_key(j, "copies");
    cdb_json_begin_array(j);
    for (int i = 0; i < h->n_copies; i++) cdb_json_int(j, h->copies[i]);
    cdb_json_end_array(j);
    if (n_db < 2) return;
    cdb_json_key(j, "copies_db");
    cdb_json_begin_array(j);
    for (int i = 0; i < h->n_copies; i++) cdb_json_int(j, h->copies_db ? h->copies_db[i] : h->db);
    cdb_json_end_array(j);
}

/* dbs[n_db]: the databases searched, when more than one (each hit says which, in
** --json; the text forms are the same as for one). collapsed: hits carry their copies. */
static void print_hits(const cdb_engine_result *res, int json, int paths, int nul,
                       const cdb_engine_query *q, const char *const *images, int n_img,
                       const char *const *dbs, int n_db, int collapsed) {
    const cdb_engine_hit *h = res->hits;
    int n = res->n;
    if (json) {
        cdb_json j;
        cdb_cli_json_doc(&j, NULL);
        cdb_json_key(&j, "query");
        cdb_json_str(&j, q->text ? q->text : "");
        json_strings(&j, "images", images, n_img, 1); /* as given: '-' for standard input */
        json_strings(&j, "not", q->nots, q->n_nots, 0);
        if (n_db > 1) json_strings(&j, "databases", dbs, n_db, 1);
        cdb_json_key(&j, "model");
        cdb_json_str(&j, res->model);
        cdb_json_key(&j, "count");
        cdb_json_int(&j, n);
        cdb_json_key(&j, "hits");
        cdb_json_begin_array(&j);
        for (int i = 0; i < n; i++) {
            cdb_json_begin_object(&j);
            cdb_json_key(&j, "rank");
            cdb_json_int(&j, i + 1);
            cdb_json_key(&j, "score");
            cdb_json_float(&j, h[i].score);
            if (res->has_probability) { /* absent, not null, for models without a bias */
                cdb_json_key(&j, "probability");
                cdb_json_float(&j, h[i].probability);
            }
            cdb_json_key(&j, "id");
            cdb_json_int(&j, h[i].id);
            if (n_db > 1) { /* ids are per database */
                cdb_json_key(&j, "db");
                cdb_json_int(&j, h[i].db);
            }
            cdb_json_path(&j, "path", h[i].path);
            cdb_json_key(&j, "mtime_ns");
            cdb_json_int(&j, h[i].mtime_ns);
            cdb_cli_json_photo(&j, &h[i].photo);
            if (collapsed) json_copies(&j, &h[i], n_db);
            cdb_json_end_object(&j);
        }
        cdb_json_end_array(&j);
        cdb_json_end_object(&j);
        cdb_json_done(&j);
    } else if (paths) {
        for (int i = 0; i < n; i++) {
            fputs(h[i].path, stdout);
            fputc(nul ? '\0' : '\n', stdout);
        }
    } else {
        for (int i = 0; i < n; i++)
            printf("%d\t%.4f\t%s\n", i + 1, (double)h[i].score, cdb_cli_esc(h[i].path));
    }
    cdb_cli_flush_stdout();
}

/* The --under places of a search, as absolute paths (stored paths are absolute). */
typedef struct under_list {
    int n;
    cdb_engine_under *u;   /* n places, for cdb_engine_search_params.unders */
    char (*abs)[PATH_MAX]; /* the paths u[i].path points at */
    int *exists;           /* 1: the path exists here (its absolute form is realpath's) */
    const char **given;    /* as the user wrote them (for the notes) */
} under_list;

static void unders_free(under_list *l) {
    free(l->u);
    free(l->abs);
    free(l->exists);
    memset(l, 0, sizeof *l);
}

/* Each --under as the engine compares it (cdb_engine_under_resolve, the server's rule
** too). CLI_EXIT_OK or the error printed. */
static int unders_resolve(const char **given, int n, under_list *l /* OUT */) {
    memset(l, 0, sizeof *l);
    if (!n) return CLI_EXIT_OK;
    l->u = calloc((size_t)n, sizeof *l->u);
    l->abs = calloc((size_t)n, sizeof *l->abs);
    l->exists = calloc((size_t)n, sizeof *l->exists);
    if (!l->u || !l->abs || !l->exists) {
        unders_free(l);
        return cdb_cli_error("out of memory", "cannot search");
    }
    l->n = n;
    l->given = given;
    for (int i = 0; i < n; i++) {
        l->exists[i] = cdb_engine_under_resolve(given[i], l->abs[i], PATH_MAX, &l->u[i].folder);
        l->u[i].path = l->abs[i];
    }
    return CLI_EXIT_OK;
}

/* Why a search found nothing, when an option is the likely reason (stderr: the
** empty result itself stays the output). */
static void note_no_hits(const under_list *l, double min_score) {
    if (cdb_cli_quiet()) return;
    for (int i = 0; i < l->n; i++)
        if (!l->exists[i])
            cdb_cli_hint("--under %s does not exist, and no stored path starts with it",
                         l->given[i]);
        else
            cdb_cli_hint("no photo under %s matched", l->given[i]);
    if (min_score > -1.0) cdb_cli_hint("no hit scored --min-score %.4g or more", min_score);
}

/* The options checked before anything runs: -k, --min-score, --sort, the output
** flags, that there is a query, and that its text fits the limit (before any copy:
** bounded work and memory whatever the caller passes). CLI_EXIT_OK, or the usage
** error printed. */
static int check_search_args(cli_args *a, int n_img, const char **nots, int n_not,
                             long *k /* OUT */, long *offset /* OUT */,
                             double *min_score /* OUT */, int *sort /* OUT */) {
    static const char *const sorts[] = {"score", "time", "taken", "taken-asc", NULL};
    size_t total = 0;
    if (cdb_cli_get_int(a, "k", 10, 1, 100000, k) ||
        cdb_cli_get_int(a, "offset", 0, 0, 900000, offset) ||
        cdb_cli_get_double(a, "min-score", -1.0, -1.0, 1.0, min_score) ||
        (*sort = cdb_cli_get_choice(a, "sort", sorts, 0)) < 0)
        return cdb_cli_usage_error("search", "%s", a->err);
    if (cdb_cli_has(a, "json") && cdb_cli_has(a, "paths"))
        return cdb_cli_usage_error("search", "--json and --paths cannot be combined");
    if (cdb_cli_has(a, "null") && !cdb_cli_has(a, "paths"))
        return cdb_cli_usage_error("search", "-0/--null goes with --paths");
    if (a->n_pos == 0 && n_img == 0)
        return cdb_cli_usage_error("search", "no QUERY given (give text, or --image PATH)");
    for (int i = 0; i < a->n_pos; i++) total += strlen(a->pos[i]) + 1;
    for (int i = 0; i < n_not; i++) total += strlen(nots[i]) + 1;
    if (total > CLI_QUERY_MAX_BYTES)
        return cdb_cli_usage_error(
            "search", "query too long: %zu bytes of text (the limit is %d bytes, 64 KiB)", total,
            CLI_QUERY_MAX_BYTES);
    return CLI_EXIT_OK;
}

/* The query words with the '-' at a->pos[i_stdin] read from standard input (at most
** the limit is ever read; trailing newlines dropped), joined: *text (heap).
** CLI_EXIT_OK, or the error printed. */
static int words_with_stdin(cli_args *a, int i_stdin, char **text /* OUT */) {
    size_t got = 0;
    int too_long = 0, rc;
    char *joined;
    if ((rc = read_query_stdin(text, &got, &too_long)) != CLI_EXIT_OK) return rc;
    if (too_long)
        return cdb_cli_usage_error(
            "search",
            "query too long: more than %d bytes on standard input (the limit "
            "is %d bytes, 64 KiB)",
            CLI_QUERY_MAX_BYTES, CLI_QUERY_MAX_BYTES);
    while (got && ((*text)[got - 1] == '\n' || (*text)[got - 1] == '\r')) (*text)[--got] = '\0';
    if (!got || memchr(*text, '\0', got))
        return cdb_cli_usage_error("search", "%s query on standard input",
                                   got ? "a NUL byte in the" : "an empty");
    if (a->n_pos == 1) return CLI_EXIT_OK;
    /* echo red | clipdb search - + blue */
    a->pos[i_stdin] = *text;
    joined = join_words(a->pos, a->n_pos);
    a->pos[i_stdin] = "-";
    free(*text);
    if (!(*text = joined)) return cdb_cli_error("out of memory", "cannot search");
    return CLI_EXIT_OK; /* the joined query's length: the engine's limit check */
}

/* The query text: the words joined with spaces, a '-' among them standing for standard
** input. *text: heap, NULL when there are no words (an --image search). CLI_EXIT_OK,
** or the error printed. */
static int query_text(cli_args *a, char **text /* OUT */) {
    int i_stdin = -1;
    *text = NULL;
    for (int i = 0; i < a->n_pos; i++)
        if (!strcmp(a->pos[i], "-")) {
            if (i_stdin >= 0)
                return cdb_cli_usage_error("search",
                                           "'-' (the query from standard input) given twice");
            i_stdin = i;
        }
    if (i_stdin >= 0) return words_with_stdin(a, i_stdin, text);
    if (a->n_pos && !(*text = join_words(a->pos, a->n_pos)))
        return cdb_cli_error("out of memory", "cannot search");
    return CLI_EXIT_OK;
}

/* A search that found nothing in a database with no vector of the model searched:
** says so, and how to fill it (stderr). 1 when it said so. */
static int note_empty(cdb_engine *e, const cdb_engine_result *res) {
    cdb_engine_stats s;
    int said = 0;
    memset(&s, 0, sizeof s);
    if (cdb_engine_stats_get(e, 0, &s) != CDB_OK) return 0;
    for (int i = 0; i < s.n_models && !said; i++) {
        if (s.models[i].model.id != res->model_id || s.models[i].n_vectors) continue;
        said = 1;
        if (cdb_cli_quiet()) break;
        if (!s.files[1] && !s.files[2] && !s.files[3]) {
            cdb_cli_hint("the database %s is empty: add photos with 'clipdb ingest PATH'",
                         cdb_engine_dir(e));
        } else {
            cdb_cli_hint("no photo of %s has a vector of model %s yet", cdb_engine_dir(e),
                         res->model);
            cdb_cli_hint("'clipdb errors' says why; 'clipdb reindex%s%s' encodes what is missing",
                         s.models[i].model.is_default ? "" : " --model ",
                         s.models[i].model.is_default ? "" : res->model);
        }
    }
    cdb_engine_stats_free(&s);
    return said;
}

/* Opens the n databases dirs[0..n) (n == 0: the default one) as readers into es. On
** failure the ones opened are closed, the error printed. */
static int open_dbs(const char *const *dirs, int n, cdb_k_device device, cdb_engine **es) {
    int rc = CLI_EXIT_OK;
    for (int i = 0; i < (n ? n : 1) && rc == CLI_EXIT_OK; i++)
        if ((rc = cdb_cli_engine_open(n ? dirs[i] : NULL, 0, 0, device, 0, &es[i])) !=
            CLI_EXIT_OK)
            for (int j = 0; j < i; j++) cdb_engine_close(es[j]);
    return rc;
}

/* Opens the databases (--db, repeatable: one search over all of them, merged exactly),
** runs the search and prints the hits (or why there are none). */
static int run_search(cli_args *a, cdb_k_device device, const cdb_engine_query *q,
                      const cdb_engine_search_params *sp, const under_list *ul) {
    const char **images, **dbs;
    int n_img = cdb_cli_get_all(a, "image", &images);
    int n_db = cdb_cli_get_all(a, "db", &dbs);
    cdb_engine **es = calloc(n_db ? (size_t)n_db : 1, sizeof *es);
    cdb_engine_result res;
    int rc;
    memset(&res, 0, sizeof res);
    if (!es) return cdb_cli_error("out of memory", "cannot search");
    if ((rc = cdb_cli_dbs_distinct("search", dbs, n_db)) != CLI_EXIT_OK) {
        free(es);
        return rc;
    }
    /* the threads a query is encoded with are the engine's rule (one for the bundled
    ** model's few tokens, every core for a real CLIP): the server's scores are these */
    if ((rc = open_dbs(dbs, n_db, device, es)) != CLI_EXIT_OK) {
        free(es);
        return rc;
    }
    if ((n_db > 1 ? cdb_engine_search_many(es, n_db, q, sp, &res)
                  : cdb_engine_search(es[0], q, sp, &res)) != CDB_OK) {
        rc = cdb_cli_engine_fail(cdb_cli_get(a, "model"));
    } else {
        print_hits(&res, cdb_cli_has(a, "json") > 0, cdb_cli_has(a, "paths") > 0,
                   cdb_cli_has(a, "null") > 0, q, images, n_img, dbs, n_db, sp->collapse);
        if (res.n == 0 && (n_db > 1 || !note_empty(es[0], &res)))
            note_no_hits(ul, sp->min_score);
        rc = CLI_EXIT_OK;
    }
    cdb_engine_result_free(&res);
    for (int i = 0; i < (n_db ? n_db : 1); i++) cdb_engine_close(es[i]);
    free(es);
    return rc;
}

int cdb_cli_cmd_search(int argc, char **argv) {
    static const cli_optspec spec[] = {
        {"db", 0, CLI_MULTI},        {"k", 'k', CLI_VALUE},     {"image", 0, CLI_MULTI},
        {"not", 0, CLI_MULTI},       {"min-score", 0, CLI_VALUE}, {"under", 0, CLI_MULTI},
        {"sort", 0, CLI_VALUE},      {"model", 0, CLI_VALUE},   {"json", 0, CLI_FLAG},
        {"paths", 0, CLI_FLAG},      {"null", '0', CLI_FLAG},   {"device", 0, CLI_VALUE},
        {"no-exif", 0, CLI_FLAG},    {"quiet", 'q', CLI_FLAG},  {"help", 'h', CLI_FLAG},
        {"taken-after", 0, CLI_VALUE}, {"taken-before", 0, CLI_VALUE},
        {"camera", 0, CLI_VALUE},    {"near", 0, CLI_VALUE},    {"has-gps", 0, CLI_FLAG},
        {"offset", 0, CLI_VALUE},    {"no-collapse", 0, CLI_FLAG}, {0}};
    static const cdb_engine_sort sort_of[] = {CDB_ENGINE_SORT_SCORE, CDB_ENGINE_SORT_TIME,
                                              CDB_ENGINE_SORT_TAKEN, CDB_ENGINE_SORT_TAKEN_ASC};
    cli_args a;
    int rc, n_terms = 0, n_img, n_not, n_under, sort = 0;
    cdb_k_device device;
    long k = 10, offset = 0;
    double min_score = -1.0;
    const char **images, **nots, **unders, **image_paths = NULL;
    int n_image_paths = 0, image_stdin = 0;
    unsigned char *image = NULL;
    size_t image_bytes = 0;
    char *text = NULL;
    cdb_engine_term *terms = NULL;
    cdb_engine_query q;
    cdb_engine_search_params sp = cdb_engine_search_params_default();
    under_list ul;
    memset(&ul, 0, sizeof ul);
    if (!cdb_cli_begin("search", &a, spec, argc, argv, &rc)) goto done;
    n_img = cdb_cli_get_all(&a, "image", &images);
    n_not = cdb_cli_get_all(&a, "not", &nots);
    n_under = cdb_cli_get_all(&a, "under", &unders);
    if ((rc = check_search_args(&a, n_img, nots, n_not, &k, &offset, &min_score, &sort)) !=
            CLI_EXIT_OK ||
        (rc = split_images(&a, images, n_img, &image_paths, &n_image_paths, &image_stdin)) !=
            CLI_EXIT_OK ||
        (rc = query_text(&a, &text)) != CLI_EXIT_OK ||
        (image_stdin && (rc = read_image_stdin(&image, &image_bytes)) != CLI_EXIT_OK))
        goto done;
    if (text && cdb_engine_query_parse(text, &terms, &n_terms) != CDB_OK) {
        rc = cdb_cli_usage_error("search", "bad query: %s", cdb_errmsg());
        goto done;
    }
    if ((rc = cdb_cli_device("search", cdb_cli_get(&a, "device"), &device)) != CLI_EXIT_OK)
        goto done;
    if ((rc = unders_resolve(unders, n_under, &ul)) != CLI_EXIT_OK) goto done;
    q = (cdb_engine_query){.text = text,
                           .nots = nots,
                           .n_nots = n_not,
                           .image_paths = image_paths,
                           .n_image_paths = n_image_paths,
                           .image = image,
                           .image_bytes = image_bytes,
                           .no_exif = cdb_cli_has(&a, "no-exif") > 0,
                           .terms = terms, /* parsed once, above */
                           .n_terms = n_terms};
    sp.k = (int)k;
    sp.offset = (int)offset;
    sp.min_score = (float)min_score;
    sp.sort = sort_of[sort];
    sp.taken_after = cdb_cli_get(&a, "taken-after");
    sp.taken_before = cdb_cli_get(&a, "taken-before");
    sp.camera = cdb_cli_get(&a, "camera");
    sp.near = cdb_cli_get(&a, "near");
    sp.has_gps = cdb_cli_has(&a, "has-gps") > 0;
    sp.collapse = cdb_cli_has(&a, "no-collapse") <= 0;
    sp.model = cdb_cli_get(&a, "model");
    sp.unders = ul.u;
    sp.n_unders = ul.n;
    rc = run_search(&a, device, &q, &sp, &ul);
done:
    free(image);
    free(image_paths);
    unders_free(&ul);
    cdb_engine_terms_free(terms, n_terms);
    free(text);
    cdb_cli_args_free(&a);
    return rc;
}
