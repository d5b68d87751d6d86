/*
** hub_parse.c: what the Hugging Face Hub client reads from a server or a user, with no
** I/O (contracts in hub_int.h): response header lines, the revision API's JSON (through
** jansson), a sharded checkpoint's index, the names of repositories, revisions and
** files, and URL quoting. Fuzzed by tests/fuzz/fuzz_hub.c.
*/
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "engine/hub/hub_int.h"

void cdb_hub_resp_reset(hub_resp *r) {
    memset(r, 0, sizeof *r);
    r->content_length = r->linked_size = r->range_start = r->range_total = -1;
}

static int ieq(const char *a, size_t alen, const char *b) {
    size_t bl = strlen(b);
    if (alen != bl) return 0;
    for (size_t i = 0; i < bl; i++)
        if (tolower((unsigned char)a[i]) != tolower((unsigned char)b[i])) return 0;
    return 1;
}

/* Copies v[0..len) into out when it fits with its NUL and holds no control byte. */
static void put_str(char *out, size_t cap, const char *v, size_t len) {
    if (len >= cap) return;
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)v[i] < 0x20 || v[i] == 0x7f) return;
    memcpy(out, v, len);
    out[len] = '\0';
}

/* A decimal of 1..18 digits (no sign) into *out; 0 or -1. */
static int parse_u63(const char *v, size_t len, int64_t *out) {
    int64_t x = 0;
    if (len == 0 || len > 18) return -1;
    for (size_t i = 0; i < len; i++) {
        if (v[i] < '0' || v[i] > '9') return -1;
        x = x * 10 + (v[i] - '0');
    }
    *out = x;
    return 0;
}

int cdb_hub_etag_normalize(const char *v, size_t len, char *out, size_t cap) {
    /* Python's lstrip("W/") strips any leading run of 'W' and '/', then strip('"'). */
    while (len && (*v == 'W' || *v == '/')) v++, len--;
    while (len && *v == '"') v++, len--;
    while (len && v[len - 1] == '"') len--;
    if (len == 0 || len >= cap) return -1;
    for (size_t i = 0; i < len; i++)
        if (!isalnum((unsigned char)v[i]) && v[i] != '-' && v[i] != '_') return -1;
    memcpy(out, v, len);
    out[len] = '\0';
    return 0;
}

static void parse_range(hub_resp *r, const char *v, size_t len) {
    /* bytes START-END/TOTAL (TOTAL may be '*') */
    const char *dash, *slash, *end = v + len;
    int64_t start, total;
    if (len < 6 || strncmp(v, "bytes ", 6)) return;
    v += 6;
    dash = memchr(v, '-', (size_t)(end - v));
    if (!dash || parse_u63(v, (size_t)(dash - v), &start)) return;
    slash = memchr(dash, '/', (size_t)(end - dash));
    if (!slash) return;
    r->range_start = start;
    if (parse_u63(slash + 1, (size_t)(end - slash - 1), &total) == 0) r->range_total = total;
}

void cdb_hub_header_line(hub_resp *r, const char *line, size_t len) {
    const char *colon, *v;
    size_t nlen, vlen;
    while (len && (line[len - 1] == '\n' || line[len - 1] == '\r')) len--;
    if (len >= 5 && !memcmp(line, "HTTP/", 5)) { /* HTTP/1.1 200 OK, HTTP/2 404 */
        const char *sp = memchr(line, ' ', len);
        int64_t st;
        cdb_hub_resp_reset(r);
        if (sp && (size_t)(line + len - sp) >= 4 && parse_u63(sp + 1, 3, &st) == 0)
            r->status = (long)st;
        return;
    }
    if (!(colon = memchr(line, ':', len))) return;
    nlen = (size_t)(colon - line);
    v = colon + 1;
    vlen = len - nlen - 1;
    while (vlen && (*v == ' ' || *v == '\t')) v++, vlen--;
    while (vlen && (v[vlen - 1] == ' ' || v[vlen - 1] == '\t')) vlen--;
    if (ieq(line, nlen, "etag")) {
        if (cdb_hub_etag_normalize(v, vlen, r->etag, sizeof r->etag)) r->etag[0] = '\0';
    } else if (ieq(line, nlen, "x-linked-etag")) {
        if (cdb_hub_etag_normalize(v, vlen, r->linked_etag, sizeof r->linked_etag))
            r->linked_etag[0] = '\0';
    } else if (ieq(line, nlen, "x-repo-commit")) {
        char c[64] = "";
        put_str(c, sizeof c, v, vlen);
        snprintf(r->commit, sizeof r->commit, "%s", cdb_hub_is_commit(c) ? c : "");
    } else if (ieq(line, nlen, "location")) {
        put_str(r->location, sizeof r->location, v, vlen);
    } else if (ieq(line, nlen, "x-error-code")) {
        put_str(r->error_code, sizeof r->error_code, v, vlen);
    } else if (ieq(line, nlen, "x-error-message")) {
        put_str(r->error_message, sizeof r->error_message, v, vlen);
    } else if (ieq(line, nlen, "content-length")) {
        if (parse_u63(v, vlen, &r->content_length)) r->content_length = -1;
    } else if (ieq(line, nlen, "x-linked-size")) {
        if (parse_u63(v, vlen, &r->linked_size)) r->linked_size = -1;
    } else if (ieq(line, nlen, "content-range")) {
        parse_range(r, v, vlen);
    }
}

int cdb_hub_is_commit(const char *s) {
    size_t i;
    for (i = 0; s[i]; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
    return i == 40;
}

static int word_char(char c) { return isalnum((unsigned char)c) || c == '_'; }

static int repo_part_valid(const char *p, size_t len) {
    if (len == 0 || !word_char(p[0]) || !word_char(p[len - 1])) return 0;
    for (size_t i = 0; i < len; i++)
        if (!word_char(p[i]) && p[i] != '-' && p[i] != '.') return 0;
    return 1;
}

int cdb_hub_repo_valid(const char *repo) {
    size_t len = strlen(repo);
    const char *slash = strchr(repo, '/');
    if (len == 0 || len > 96 || strstr(repo, "--") || strstr(repo, "..")) return -1;
    if (len >= 4 && !strcmp(repo + len - 4, ".git")) return -1;
    if (!slash) return repo_part_valid(repo, len) ? 0 : -1;
    if (strchr(slash + 1, '/')) return -1;
    return repo_part_valid(repo, (size_t)(slash - repo)) &&
                   repo_part_valid(slash + 1, len - (size_t)(slash - repo) - 1)
               ? 0
               : -1;
}

/* Each '/'-separated component non-empty and not "." or ".."; printable ASCII, no
** backslash (and no space when no_space). */
static int path_valid(const char *s, size_t max, int no_space) {
    size_t len = strlen(s);
    const char *c = s;
    if (len == 0 || len > max || s[0] == '/') return -1;
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch < 0x20 || ch >= 0x7f || ch == '\\' || (no_space && ch == ' ')) return -1;
    }
    for (;;) {
        const char *e = strchr(c, '/');
        size_t n = e ? (size_t)(e - c) : strlen(c);
        if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
            return -1;
        if (!e) return 0;
        c = e + 1;
    }
}

int cdb_hub_revision_valid(const char *rev) { return path_valid(rev, 255, 1); }

int cdb_hub_filename_valid(const char *name) { return path_valid(name, 1024, 0); }

int cdb_hub_quote(const char *s, const char *safe, char *out, size_t cap) {
    static const char hex[] = "0123456789ABCDEF";
    size_t k = 0;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (isalnum(c) || c == '_' || c == '.' || c == '-' || c == '~' ||
            (safe && strchr(safe, c))) {
            if (k + 1 >= cap) return -1;
            out[k++] = (char)c;
        } else {
            if (k + 3 >= cap) return -1;
            out[k++] = '%';
            out[k++] = hex[c >> 4];
            out[k++] = hex[c & 15];
        }
    }
    if (k >= cap) return -1;
    out[k] = '\0';
    return 0;
}

/* names[n] into one cdb_malloc'd block: the pointer array, then the strings. */
static int pack(const char **names, int n, char ***out) {
    size_t bytes = sizeof(char *) * (size_t)(n ? n : 1);
    char **arr, *p;
    for (int i = 0; i < n; i++) bytes += strlen(names[i]) + 1;
    if (!(arr = cdb_malloc(bytes))) return cdb_seterr(CDB_NOMEM, "out of memory"), -1;
    p = (char *)(arr + (n ? n : 1));
    for (int i = 0; i < n; i++) {
        size_t l = strlen(names[i]) + 1;
        memcpy(p, names[i], l);
        arr[i] = p;
        p += l;
    }
    *out = arr;
    return 0;
}

int cdb_hub_parse_revision(const char *json, size_t len, char commit[41], char ***files,
                           int *n_files) {
    json_error_t jerr;
    json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr), *sib, *sha;
    const char **names = NULL;
    int n = 0, rc = -1;
    *files = NULL;
    *n_files = 0;
    if (!root || !json_is_object(root)) {
        cdb_seterr(CDB_CORRUPT, "the revision API's answer is not a JSON object%s%s",
                   root ? "" : ": ", root ? "" : jerr.text);
        goto done;
    }
    sha = json_object_get(root, "sha");
    if (!json_is_string(sha) || !cdb_hub_is_commit(json_string_value(sha))) {
        cdb_seterr(CDB_CORRUPT, "the revision API's answer has no commit (\"sha\")");
        goto done;
    }
    sib = json_object_get(root, "siblings");
    if (!json_is_array(sib)) {
        cdb_seterr(CDB_CORRUPT, "the revision API's answer has no file list (\"siblings\")");
        goto done;
    }
    if (json_array_size(sib) > 100000) {
        cdb_seterr(CDB_CORRUPT, "the revision API lists %zu files", json_array_size(sib));
        goto done;
    }
    if (!(names = calloc(json_array_size(sib) + 1, sizeof *names))) {
        cdb_seterr(CDB_NOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < json_array_size(sib); i++) {
        json_t *f = json_object_get(json_array_get(sib, i), "rfilename");
        const char *s = json_string_value(f);
        if (s && strlen(s) == json_string_length(f) && cdb_hub_filename_valid(s) == 0)
            names[n++] = s;
    }
    if (pack(names, n, files) != 0) goto done;
    memcpy(commit, json_string_value(sha), 41);
    *n_files = n;
    rc = 0;
done:
    free(names);
    json_decref(root);
    return rc;
}

static int ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

int cdb_hub_parse_index(const char *json, size_t len, char ***shards, int *n_shards) {
    json_error_t jerr;
    json_t *root = json_loadb(json, len, 0, &jerr), *map, *v;
    const char **names = NULL, *key;
    int n = 0, rc = -1;
    *shards = NULL;
    *n_shards = 0;
    map = json_object_get(root, "weight_map");
    if (!json_is_object(map)) {
        cdb_seterr(CDB_CORRUPT, "model.safetensors.index.json has no \"weight_map\"");
        goto done;
    }
    if (!(names = calloc(json_object_size(map) + 1, sizeof *names))) {
        cdb_seterr(CDB_NOMEM, "out of memory");
        goto done;
    }
    json_object_foreach(map, key, v) {
        const char *s = json_string_value(v);
        int seen = 0;
        if (!s || strlen(s) != json_string_length(v) || strchr(s, '/') ||
            cdb_hub_filename_valid(s) || !ends_with(s, ".safetensors")) {
            cdb_seterr(CDB_CORRUPT, "model.safetensors.index.json: tensor %.80s is in a file "
                       "that is not a .safetensors file of the repository", key);
            goto done;
        }
        for (int i = 0; i < n && !seen; i++) seen = !strcmp(names[i], s);
        if (!seen) names[n++] = s;
    }
    if (n == 0) {
        cdb_seterr(CDB_CORRUPT, "model.safetensors.index.json names no file");
        goto done;
    }
    if (pack(names, n, shards) != 0) goto done;
    *n_shards = n;
    rc = 0;
done:
    free(names);
    json_decref(root);
    return rc;
}

/* The configs and tokenizer files a model folder may use (encoder/model.c, the
** tokenizers of DESIGN.md). */
static int is_side_file(const char *f) {
    static const char *names[] = {
        "config.json",          "preprocessor_config.json", "open_clip_config.json",
        "vocab.json",           "merges.txt",               "tokenizer.json",
        "tokenizer_config.json", "special_tokens_map.json", "spiece.model",
        "tokenizer.model",      "vocab.txt",                "bpe_simple_vocab_16e6.txt.gz",
        "model.safetensors.index.json"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(f, names[i])) return 1;
    return 0;
}

static int index_of(char *const *files, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (!strcmp(files[i], name)) return i;
    return -1;
}

void cdb_hub_select(char *const *files, int n, int *wanted, int *shards_pending) {
    int oc = index_of(files, n, "open_clip_model.safetensors");
    int hf = index_of(files, n, "model.safetensors");
    int ix = index_of(files, n, "model.safetensors.index.json");
    *shards_pending = 0;
    for (int i = 0; i < n; i++) {
        const char *f = files[i];
        wanted[i] = 0;
        if (strchr(f, '/')) continue; /* subfolders: other formats (onnx/, ...) */
        if (is_side_file(f)) wanted[i] = 1;
    }
    /* the weights, as the encoder picks them (encoder/model.c: weights_files) */
    if (oc >= 0) {
        wanted[oc] = 1;
        if (ix >= 0) wanted[ix] = 0; /* the index of weights not fetched */
    } else if (hf >= 0) {
        wanted[hf] = 1;
        if (ix >= 0) wanted[ix] = 0;
    } else if (ix >= 0) {
        *shards_pending = 1;
    } else {
        for (int i = 0; i < n; i++)
            if (!strchr(files[i], '/') && ends_with(files[i], ".safetensors")) wanted[i] = 1;
    }
}
