/*
** test_packcache.c: the packed matrix cache (encoder.h, params.pack_cache;
** encoder/packcache.c) changes no bit and is never used when it is not exactly what
** this open would have packed.
**
** The oracle is the same model opened with the cache off: every embedding of a cold
** open (the file written), of a cached open (every matrix mapped from it) and of a
** batch must equal it bit for bit, on the fixture models in OpenAI naming (the text
** projection transposed at load) and Hugging Face naming (q, k, v concatenated), text
** alone (the default: a query) and both towers (CDB_PACK_CACHE_ON). A hit packs
** nothing (cdb_k_cpu_packed_bytes does not move). Then the file is damaged: a payload
** byte flipped, a table byte flipped, truncated, emptied, another magic, and a stale
** file: the cache of weights that differ in one matrix element (same shapes; used,
** it would give that model's embeddings) put under this model's name. Each must be
** refused with its reason ("rebuilt: ..."), the embeddings must still equal the
** oracle's, and the next open must be a hit on the rewritten file. A folder that
** cannot be created gives "not written" and correct embeddings.
*/
#include "encoder/encoder.h"
#include "encoder/encoder_int.h"
#include "kernels/kernels.h"

#define CDB_TEST_TMP_TAG "packcache"
#include "model_test_util.h"

#define GOLD CDB_SOURCE_DIR "/tests/golden/models"
#define N_TEXT 9
#define N_IMG 3

static uint64_t g_rng = 0x2545F4914F6CDD1Dull;
static uint32_t rnd(void) { return (uint32_t)(cdb_test_xorshift(&g_rng) >> 32); }

typedef struct inputs {
    int32_t *ids;   /* N_TEXT x ctx */
    float *pixels;  /* N_IMG x 3 x S x S */
    int ctx, px, E;
} inputs;

static cdb_model *open_m(const char *path, int mode, int vision, const char *dir) {
    cdb_model_params p = cdb_model_params_default();
    cdb_model *m = NULL;
    p.n_threads = 2;
    p.pack_cache = mode;
    p.pack_cache_dir = dir;
    p.load_vision = vision;
    return cdb_model_open(path, &p, &m) == CDB_OK ? m : NULL;
}

/* Texts (and images with vision) one at a time, then all in one batch: out holds
** the alone rows, then the batch rows. */
static int encode_all(cdb_model *m, const inputs *in, int vision, float *out) {
    int E = in->E;
    float *o = out;
    for (int i = 0; i < N_TEXT; i++, o += E)
        if (cdb_encode_tokens(m, in->ids + (size_t)i * in->ctx, 1, 0, o) != CDB_OK) return -1;
    if (cdb_encode_tokens(m, in->ids, N_TEXT, 0, o) != CDB_OK) return -1;
    o += (size_t)N_TEXT * E;
    if (!vision) return 0;
    for (int i = 0; i < N_IMG; i++, o += E)
        if (cdb_encode_pixels(m, in->pixels + (size_t)i * in->px, 1, 0, o) != CDB_OK) return -1;
    return cdb_encode_pixels(m, in->pixels, N_IMG, 0, o) == CDB_OK ? 0 : -1;
}

static size_t n_out(const inputs *in, int vision) {
    return (size_t)2 * (N_TEXT + (vision ? N_IMG : 0)) * in->E;
}

static void make_inputs(cdb_model *m, inputs *in) {
    const cdb_model_info *info = cdb_model_get_info(m);
    int V = info->vocab_size, S = info->image_size;
    in->ctx = info->context_length, in->E = info->embed_dim, in->px = 3 * S * S;
    in->ids = calloc((size_t)N_TEXT * in->ctx, sizeof *in->ids);
    in->pixels = malloc((size_t)N_IMG * in->px * sizeof *in->pixels);
    for (int i = 0; i < N_TEXT; i++) { /* lengths 1 .. ctx - 1, the end token last */
        int len = 1 + (i * 11 + 3) % (in->ctx - 1);
        int32_t *r = in->ids + (size_t)i * in->ctx;
        for (int j = 0; j < len; j++) r[j] = (int32_t)(1 + rnd() % (uint32_t)(V - 3));
        r[len] = V - 1;
    }
    for (size_t i = 0; i < (size_t)N_IMG * in->px; i++)
        in->pixels[i] = (float)(rnd() % 4001) / 1000.0f - 2.0f;
}

/* Opens path with the cache in dir (mode, towers), checks its status starts with
** want and that every embedding equals ref; returns the status's first word or "". */
static void check_open(cdb_test_ctx *cdb_t_, const char *path, int mode, int vision,
                       const char *dir, const inputs *in, const float *ref, const char *want,
                       const char *what) {
    size_t packed0 = cdb_k_cpu_packed_bytes(), n = n_out(in, vision);
    cdb_model *m = open_m(path, mode, vision, dir);
    float *got = malloc(n * sizeof *got);
    CHECK_MSG(m != NULL, "%s: %s", what, cdb_errmsg());
    if (m) {
        const cdb_model_info *info = cdb_model_get_info(m);
        size_t packed = cdb_k_cpu_packed_bytes() - packed0;
        CHECK_MSG(!strncmp(info->pack_cache, want, strlen(want)), "%s: pack_cache '%s', want "
                  "'%s...'", what, info->pack_cache, want);
        if (!strncmp(want, "hit", 3))
            CHECK_MSG(packed == 0, "%s: a hit packed %zu bytes", what, packed);
        else
            CHECK_MSG(packed > 0, "%s: nothing packed without a usable cache", what);
        CHECK_MSG(encode_all(m, in, vision, got) == 0, "%s: %s", what, cdb_errmsg());
        CHECK_MSG(memcmp(got, ref, n * sizeof *got) == 0, "%s: embeddings differ from the "
                  "cache-off open's", what);
        printf("     %-52s %s\n", what, info->pack_cache);
    }
    free(got);
    cdb_model_close(m);
}

/* The cache file a hit used: its path (static), after opening once. */
static const char *cache_path(const char *model, int mode, int vision, const char *dir) {
    static char path[4096];
    cdb_model *m = open_m(model, mode, vision, dir);
    path[0] = '\0';
    if (m) snprintf(path, sizeof path, "%s", cdb_model_get_info(m)->pack_cache_path);
    cdb_model_close(m);
    return path;
}

static int flip_byte(const char *path, long off_from_end_or_start, int from_end) {
    int fd = open(path, O_RDWR);
    struct stat st;
    unsigned char b;
    off_t at;
    if (fd < 0 || fstat(fd, &st) != 0) return -1;
    at = from_end ? st.st_size - off_from_end_or_start : off_from_end_or_start;
    if (pread(fd, &b, 1, at) != 1) return -1;
    b ^= 0x5a;
    if (pwrite(fd, &b, 1, at) != 1) return -1;
    return close(fd);
}

static int copy_file(const char *from, const char *to) {
    size_t n;
    void *buf = test_read_file(from, &n);
    FILE *f = buf ? fopen(to, "wb") : NULL;
    int ok = f && fwrite(buf, 1, n, f) == n;
    if (f && fclose(f) != 0) ok = 0;
    free(buf);
    return ok ? 0 : -1;
}

/* A copy of the model folder `name` in the test folder with one element of a text
** matrix (its first block's MLP fc weight) changed: same shapes, another hash. */
static int perturbed_copy(const char *name, const char *fc, char *out, size_t size) {
    char from[2100], to[2100];
    cdb_st_file *f = NULL;
    const cdb_st_tensor *t;
    size_t off;
    snprintf(out, size, "%s/%s_changed", tmpdir(), name);
    if (mkdir(out, 0777) != 0) return -1;
    for (int i = 0; i < 4; i++) {
        static const char *files[4] = {"model.safetensors", "config.json",
                                       "open_clip_config.json", "preprocessor_config.json"};
        struct stat st;
        snprintf(from, sizeof from, "%s/%s/%s", GOLD, name, files[i]);
        snprintf(to, sizeof to, "%s/%s", out, files[i]);
        if (stat(from, &st) == 0 && copy_file(from, to) != 0) return -1;
    }
    snprintf(from, sizeof from, "%s/model.safetensors", out);
    if (cdb_st_open(from, &f) != CDB_OK || !(t = cdb_st_find(f, fc))) {
        cdb_st_close(f);
        return -1;
    }
    off = t->offset + t->n_bytes / 2;
    cdb_st_close(f);
    return flip_byte(from, (long)off, 0);
}

/* The pack cache's status of one text-alone open of model (static). */
static const char *status_of(const char *model, const char *dir) {
    static char status[320];
    cdb_model *m = open_m(model, CDB_PACK_CACHE_AUTO, 0, dir);
    snprintf(status, sizeof status, "%s", m ? cdb_model_get_info(m)->pack_cache : "(no model)");
    cdb_model_close(m);
    return status;
}

/* The stamp (packcache.c): a file checked whole once is then trusted by its identity, and
** only while that holds. path: the text-alone cache file of model, already checked. */
static void check_stamp(cdb_test_ctx *cdb_t_, const char *model, const char *dir,
                        const char *path, const inputs *in, const float *ref, const char *name) {
    char what[256], stamp[4200];
    struct stat st;
    snprintf(what, sizeof what, "%s: stamped", name);
    check_open(cdb_t_, model, CDB_PACK_CACHE_AUTO, 0, dir, in, ref, "hit (stamped)", what);
    /* a stamp that is not this file's: the payload is hashed again, then stamped anew */
    snprintf(stamp, sizeof stamp, "%s.ok", path);
    CHECK(truncate(stamp, 8) == 0);
    CHECK_EQ_STR(status_of(model, dir), "hit");
    CHECK_EQ_STR(status_of(model, dir), "hit (stamped)");
    /* bytes changed in place with the mtime set back: the ctime still tells */
    CHECK(stat(path, &st) == 0);
    CHECK(flip_byte(path, 4096 + 64 * 10, 1) == 0);
    {
        struct timespec t[2] = {st.st_atim, st.st_mtim};
        CHECK(utimensat(AT_FDCWD, path, t, 0) == 0);
    }
    snprintf(what, sizeof what, "%s: changed in place, mtime kept", name);
    check_open(cdb_t_, model, CDB_PACK_CACHE_AUTO, 0, dir, in, ref,
               "rebuilt: damaged (payload checksum)", what);
    CHECK_EQ_STR(status_of(model, dir), "hit");
    CHECK_EQ_STR(status_of(model, dir), "hit (stamped)");
}

static void run(cdb_test_ctx *cdb_t_, const char *name, const char *fc) {
    char model[1024], dir[1024], dir2[1024], changed[1024], what[256], blocked[1100];
    inputs in;
    float *ref[2], *ref_changed;
    const char *cp;
    cdb_model *m;
    snprintf(model, sizeof model, "%s/%s", GOLD, name);
    snprintf(dir, sizeof dir, "%s/%s_cache", tmpdir(), name);
    snprintf(dir2, sizeof dir2, "%s/%s_cache_changed", tmpdir(), name);
    m = open_m(model, CDB_PACK_CACHE_OFF, 1, NULL);
    CHECK_MSG(m != NULL, "%s: %s", name, cdb_errmsg());
    if (!m) return;
    CHECK_EQ_STR(cdb_model_get_info(m)->pack_cache, "off");
    make_inputs(m, &in);
    /* the oracle: the cache off, text alone and both towers */
    for (int v = 0; v < 2; v++) {
        cdb_model *mv = v ? m : open_m(model, CDB_PACK_CACHE_OFF, 0, NULL);
        ref[v] = malloc(n_out(&in, v) * sizeof(float));
        CHECK(mv && encode_all(mv, &in, v, ref[v]) == 0);
        if (mv != m) cdb_model_close(mv);
    }
    cdb_model_close(m);
    /* the alone rows and the batch rows are the same bits (within the oracle too) */
    CHECK(memcmp(ref[0], ref[0] + (size_t)N_TEXT * in.E, (size_t)N_TEXT * in.E * 4) == 0);
    CHECK(memcmp(ref[0], ref[0] + in.E, (size_t)in.E * 4) != 0); /* inputs differ */

    for (int v = 0; v < 2; v++) {
        int mode = v ? CDB_PACK_CACHE_ON : CDB_PACK_CACHE_AUTO;
        const char *tw = v ? "both towers, ON" : "text alone, AUTO";
        snprintf(what, sizeof what, "%s, %s: cold", name, tw);
        check_open(cdb_t_, model, mode, v, dir, &in, ref[v], "written", what);
        snprintf(what, sizeof what, "%s, %s: cached", name, tw);
        check_open(cdb_t_, model, mode, v, dir, &in, ref[v], "hit", what);
    }
    cp = cache_path(model, CDB_PACK_CACHE_AUTO, 0, dir);
    CHECK(cp[0] != '\0');
    {
        char path[4096];
        struct stat st;
        snprintf(path, sizeof path, "%s", cp);
        CHECK(stat(path, &st) == 0 && st.st_size > 4096);
        check_stamp(cdb_t_, model, dir, path, &in, ref[0], name);
        /* damaged in every way a file can be: refused, rebuilt, then a hit again */
        static const char *kinds[] = {"a payload byte flipped", "a table byte flipped",
                                      "truncated by 100 bytes", "emptied", "another magic",
                                      "one byte appended"};
        static const char *why[] = {"rebuilt: damaged (payload checksum)",
                                    "rebuilt: damaged header", "rebuilt: truncated",
                                    "rebuilt: truncated", "rebuilt: not a clipdb",
                                    "rebuilt: truncated or padded"};
        for (int k = 0; k < 6; k++) {
            int ok = 0;
            if (k == 0) ok = flip_byte(path, 4096 + 64 * 10, 1) == 0; /* inside the payload */
            if (k == 1) ok = flip_byte(path, 200, 0) == 0;            /* the table */
            if (k == 2) ok = truncate(path, st.st_size - 100) == 0;
            if (k == 3) ok = truncate(path, 0) == 0;
            if (k == 4) ok = flip_byte(path, 0, 0) == 0;
            if (k == 5) ok = truncate(path, st.st_size + 1) == 0;
            CHECK_MSG(ok, "damaging %s", path);
            snprintf(what, sizeof what, "%s: %s", name, kinds[k]);
            check_open(cdb_t_, model, CDB_PACK_CACHE_AUTO, 0, dir, &in, ref[0], why[k], what);
            snprintf(what, sizeof what, "%s: after the rebuild", name);
            check_open(cdb_t_, model, CDB_PACK_CACHE_AUTO, 0, dir, &in, ref[0], "hit", what);
        }
        /* stale: the cache of other weights with the same shapes under this name */
        CHECK(perturbed_copy(name, fc, changed, sizeof changed) == 0);
        m = open_m(changed, CDB_PACK_CACHE_OFF, 0, NULL);
        ref_changed = malloc(n_out(&in, 0) * sizeof(float));
        CHECK(m && encode_all(m, &in, 0, ref_changed) == 0);
        cdb_model_close(m);
        CHECK_MSG(memcmp(ref_changed, ref[0], n_out(&in, 0) * 4) != 0,
                  "the changed element does not change the embeddings: the stale case "
                  "would prove nothing");
        snprintf(what, sizeof what, "%s: the changed copy, cold", name);
        check_open(cdb_t_, changed, CDB_PACK_CACHE_AUTO, 0, dir2, &in, ref_changed, "written",
                   what);
        cp = cache_path(changed, CDB_PACK_CACHE_AUTO, 0, dir2);
        CHECK(strcmp(cp, path) != 0);
        {
            char other[4096];
            snprintf(other, sizeof other, "%s", cp);
            CHECK(copy_file(path, other) == 0); /* this model's cache, the copy's name */
        }
        snprintf(what, sizeof what, "%s: the changed copy, a stale file", name);
        check_open(cdb_t_, changed, CDB_PACK_CACHE_AUTO, 0, dir2, &in, ref_changed,
                   "rebuilt: stale", what);
        free(ref_changed);
    }
    /* a folder that cannot be made: still the same embeddings */
    snprintf(blocked, sizeof blocked, "%s/model.safetensors/packed", model);
    snprintf(what, sizeof what, "%s: no folder", name);
    check_open(cdb_t_, model, CDB_PACK_CACHE_AUTO, 0, blocked, &in, ref[0], "not written",
               what);
    free(ref[0]), free(ref[1]), free(in.ids), free(in.pixels);
}

CDB_TEST(openai_naming) { run(cdb_t_, "openai_qgelu", "transformer.resblocks.0.mlp.c_fc.weight"); }
CDB_TEST(hf_naming) { run(cdb_t_, "hf_gelu", "text_model.encoder.layers.0.mlp.fc1.weight"); }

CDB_TEST_MAIN(openai_naming, hf_naming)
