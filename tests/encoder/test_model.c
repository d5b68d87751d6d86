/*
** test_model.c: model loading and the CPU forward pass against the PyTorch
** reference (tests/golden/models/, made by tests/reference/make_model_fixtures.py
** from scripts/clip_torch.py in float64): four tiny random-weight ViT CLIPs covering
** both key namings (OpenAI, Hugging Face), both activations (QuickGELU, exact GELU),
** F32/F16/BF16 and folder vs single file. Every text and image embedding must reach
** cosine >= 0.99999 with the reference. Also: model info from shapes and configs,
** the weights hash, params overrides, batch invariance, and loading errors
** (truncated, zero-byte, bad JSON, offsets past the end, overlaps, wrong dtypes and
** shapes, missing tensors, RN50-style keys) that must fail cleanly.
*/
#include <ftw.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cdb_test.h"
#include "encoder/encoder.h"
#include "kernels/kernels.h"
#include "model_test_util.h"

#define GOLD CDB_SOURCE_DIR "/tests/golden/models"
#define MIN_COS 0.99999    /* the bar */
#define TIGHT_COS 0.99999999 /* the fp32 CPU path reaches 1 - 1e-12 here; margin 1e4 */

static int write_all(const char *path, const void *buf, size_t n) {
    FILE *f = fopen(path, "wb");
    int ok;
    if (!f) return 0;
    ok = fwrite(buf, 1, n, f) == n;
    return fclose(f) == 0 && ok;
}

static double norm(const float *a, int n) {
    double s = 0;
    for (int i = 0; i < n; i++) s += (double)a[i] * a[i];
    return sqrt(s);
}

typedef struct golden_case {
    const char *model; /* relative to GOLD */
    const char *name;  /* expected files prefix */
    const char *naming, *dtype;
    cdb_act act;
    int vision_heads, text_heads, text_width;
} golden_case;

static const golden_case k_cases[] = {
    {"openai_qgelu", "openai_qgelu", "openai", "F32", CDB_ACT_QUICK_GELU, 4, 2, 32},
    {"hf_gelu", "hf_gelu", "hf", "F32", CDB_ACT_GELU, 4, 2, 32},
    {"openai_f16.safetensors", "openai_f16", "openai", "F16", CDB_ACT_QUICK_GELU, 1, 1, 64},
    {"hf_bf16", "hf_bf16", "hf", "BF16", CDB_ACT_QUICK_GELU, 4, 2, 32},
};

/* Row i of a batch's embeddings (raw got, normalized got_n; E floats a row) against the
** reference exp: cosine >= MIN_COS (the smallest so far in *min_c), the raw norm the
** reference's, the normalized row of unit norm and as close to the reference. */
static void check_row(cdb_test_ctx *cdb_t_, const char *name, const char *kind, int i,
                      const float *got, const float *got_n, const float *exp, int E,
                      double *min_c) {
    double c = cosine(got + i * E, exp + i * E, E);
    double rn = norm(got + i * E, E) / norm(exp + i * E, E);
    CHECK_MSG(c >= MIN_COS, "%s %s %d: cosine %.9f < %.5f", name, kind, i, c, MIN_COS);
    *min_c = fmin(*min_c, c);
    CHECK_MSG(fabs(rn - 1) < 1e-4, "%s %s %d: raw norm ratio %.7f", name, kind, i, rn);
    CHECK_NEAR(norm(got_n + i * E, E), 1.0, 1e-6);
    CHECK(cosine(got_n + i * E, exp + i * E, E) >= MIN_COS);
}

/* Runs one golden case; returns a failure description or NULL. */
static void run_golden(cdb_test_ctx *cdb_t_, const golden_case *gc) {
    char path[1024];
    cdb_model *m = NULL;
    const cdb_model_info *info;
    size_t n_tok, n_px, n_et, n_ei;
    int32_t *tokens;
    float *pixels, *exp_t, *exp_i, *got, *got_n, *one;
    int nt, ni, E;
    double min_t = 1, min_i = 1;

    snprintf(path, sizeof path, "%s/%s", GOLD, gc->model);
    CHECK_OK(cdb_model_open(path, NULL, &m));
    info = cdb_model_get_info(m);
    CHECK_EQ_STR(info->naming, gc->naming);
    CHECK_EQ_STR(info->weights_dtype, gc->dtype);
    CHECK_EQ_INT(info->act, gc->act);
    CHECK_EQ_INT(info->embed_dim, 48);
    CHECK_EQ_INT(info->image_size, 40);
    CHECK_EQ_INT(info->patch_size, 8);
    CHECK_EQ_INT(info->vision_width, 64);
    CHECK_EQ_INT(info->vision_layers, 2);
    CHECK_EQ_INT(info->vision_heads, gc->vision_heads);
    CHECK_EQ_INT(info->context_length, 77);
    CHECK_EQ_INT(info->vocab_size, 300);
    CHECK_EQ_INT(info->text_width, gc->text_width);
    CHECK_EQ_INT(info->text_layers, 2);
    CHECK_EQ_INT(info->text_heads, gc->text_heads);
    CHECK(info->has_vision && info->has_text);
    CHECK_EQ_INT(strlen(info->hash), 32);
    CHECK(strstr(info->description, "clipdb test fixture") != NULL);
    CHECK_EQ_INT(info->preprocess.size, 40);

    tokens = test_read_file(GOLD "/tokens.i32", &n_tok);
    pixels = test_read_file(GOLD "/pixels.f32", &n_px);
    exp_t = read_golden_f32(GOLD, gc->name, "text", &n_et);
    exp_i = read_golden_f32(GOLD, gc->name, "image", &n_ei);
    CHECK(tokens && pixels && exp_t && exp_i);
    E = info->embed_dim;
    nt = (int)(n_tok / (4 * 77));
    ni = (int)(n_px / (4 * 3 * 40 * 40));
    CHECK_EQ_INT(nt, 6);
    CHECK_EQ_INT(ni, 3);
    CHECK_EQ_INT(n_et, (size_t)nt * E * 4);
    CHECK_EQ_INT(n_ei, (size_t)ni * E * 4);
    got = malloc((size_t)(nt + ni) * E * sizeof(float));
    got_n = malloc((size_t)(nt + ni) * E * sizeof(float));
    one = malloc((size_t)E * sizeof(float));

    CHECK_OK(cdb_encode_tokens(m, tokens, nt, 0, got));
    CHECK_OK(cdb_encode_tokens(m, tokens, nt, 1, got_n));
    for (int i = 0; i < nt; i++) {
        check_row(cdb_t_, gc->name, "text", i, got, got_n, exp_t, E, &min_t);
        if (cdb_t_->failed) return;
        /* Alone (padded only to its own end token) == in the batch. */
        CHECK_OK(cdb_encode_tokens(m, tokens + i * 77, 1, 0, one));
        CHECK_MSG(cosine(one, got + i * E, E) > 0.9999999, "%s text %d: batch != alone",
                  gc->name, i);
    }
    CHECK_OK(cdb_encode_pixels(m, pixels, ni, 0, got));
    CHECK_OK(cdb_encode_pixels(m, pixels, ni, 1, got_n));
    for (int i = 0; i < ni; i++) {
        check_row(cdb_t_, gc->name, "image", i, got, got_n, exp_i, E, &min_i);
        if (cdb_t_->failed) return;
        CHECK_OK(cdb_encode_pixels(m, pixels + (size_t)i * 3 * 40 * 40, 1, 0, one));
        CHECK_MSG(cosine(one, got + i * E, E) > 0.9999999, "%s image %d: batch != alone",
                  gc->name, i);
    }
    printf("     %s: max 1 - cosine vs reference: text %.2g, image %.2g\n", gc->name, 1 - min_t,
           1 - min_i);
    /* Tighter than the spec's bar: QuickGELU vs GELU moves these fixtures' embeddings
    ** by 1 - cos ~ 1e-5..1e-4, so only this bound proves the activation right. */
    CHECK_MSG(min_t >= TIGHT_COS && min_i >= TIGHT_COS, "%s: min cosine %.10f / %.10f < %.7f",
              gc->name, min_t, min_i, TIGHT_COS);
    /* Out-of-vocabulary ids are refused, not read out of bounds. */
    {
        int32_t bad[77] = {298, 300, 299};
        CHECK_RC(cdb_encode_tokens(m, bad, 1, 1, one), CDB_INVALID);
        bad[1] = -1;
        CHECK_RC(cdb_encode_tokens(m, bad, 1, 1, one), CDB_INVALID);
    }
    free(tokens), free(pixels), free(exp_t), free(exp_i), free(got), free(got_n), free(one);
    cdb_model_close(m);
}

CDB_TEST(golden_openai_qgelu_f32) { run_golden(cdb_t_, &k_cases[0]); }
CDB_TEST(golden_hf_gelu_f32) { run_golden(cdb_t_, &k_cases[1]); }
CDB_TEST(golden_openai_f16_single_file) { run_golden(cdb_t_, &k_cases[2]); }
CDB_TEST(golden_hf_bf16) { run_golden(cdb_t_, &k_cases[3]); }

CDB_TEST(info_sources_and_hash) {
    cdb_model *a = NULL, *b = NULL, *c = NULL;
    cdb_model_params p = cdb_model_params_default();
    CHECK_OK(cdb_model_open(GOLD "/openai_qgelu", NULL, &a));
    {
        /* The F16 file copied into a folder as model.safetensors. */
        char dir[600], file[700];
        size_t n;
        void *bytes = test_read_file(GOLD "/openai_f16.safetensors", &n);
        CHECK(bytes && tmpdir()[0]);
        snprintf(dir, sizeof dir, "%s/as_folder", tmpdir());
        mkdir(dir, 0700);
        snprintf(file, sizeof file, "%s/model.safetensors", dir);
        CHECK(write_all(file, bytes, n));
        free(bytes);
        CHECK_OK(cdb_model_open(dir, NULL, &b));
    }
    CHECK_OK(cdb_model_open(GOLD "/openai_f16.safetensors", NULL, &c));
    /* Same bytes, same identity, whether opened as folder or file. */
    CHECK_EQ_STR(cdb_model_get_info(c)->hash, cdb_model_get_info(b)->hash);
    CHECK(strcmp(cdb_model_get_info(a)->hash, cdb_model_get_info(c)->hash) != 0);
    CHECK(strstr(cdb_model_get_info(a)->act_source, "open_clip_config.json") != NULL);
    CHECK(strstr(cdb_model_get_info(c)->act_source, "default") != NULL);
    CHECK_EQ_STR(cdb_model_get_info(c)->name, "openai_f16.safetensors");
    /* Preprocessing constants from the configs, OpenAI's when nothing says. */
    CHECK_NEAR(cdb_model_get_info(a)->preprocess.mean[0], 0.5, 1e-7);
    CHECK_NEAR(cdb_model_get_info(c)->preprocess.mean[0], 0.48145466, 1e-7);
    CHECK_NEAR(cdb_model_get_info(c)->preprocess.std[2], 0.27577711, 1e-7);
    /* The single file has no config: heads = width / 64, QuickGELU assumed. */
    CHECK_EQ_INT(cdb_model_get_info(c)->vision_heads, 1);
    cdb_model_close(a), cdb_model_close(b), cdb_model_close(c);
    a = b = c = NULL;
    CHECK_OK(cdb_model_open(GOLD "/hf_gelu", NULL, &a));
    CHECK_EQ_STR(cdb_model_get_info(a)->act_source, "config.json");
    CHECK_NEAR(cdb_model_get_info(a)->preprocess.std[1], 0.5, 1e-7);
    cdb_model_close(a);
    cdb_model_close(NULL);

    /* Flag overrides config; the output really changes. */
    p.act = CDB_ACT_GELU;
    CHECK_OK(cdb_model_open(GOLD "/openai_qgelu", &p, &a));
    CHECK_OK(cdb_model_open(GOLD "/openai_qgelu", NULL, &b));
    CHECK_EQ_STR(cdb_model_get_info(a)->act_source, "flag");
    CHECK_EQ_INT(cdb_model_get_info(a)->act, CDB_ACT_GELU);
    {
        size_t n;
        float ea[48], eb[48];
        float *px = test_read_file(GOLD "/pixels.f32", &n);
        CHECK(px != NULL);
        CHECK_OK(cdb_encode_pixels(a, px, 1, 1, ea));
        CHECK_OK(cdb_encode_pixels(b, px, 1, 1, eb));
        CHECK_MSG(cosine(ea, eb, 48) < TIGHT_COS, "act override: cosine %.9f", cosine(ea, eb, 48));
        free(px);
    }
    cdb_model_close(a), cdb_model_close(b);

    /* Vision only. */
    p = cdb_model_params_default();
    p.load_text = 0;
    CHECK_OK(cdb_model_open(GOLD "/hf_bf16", &p, &a));
    CHECK(cdb_model_get_info(a)->has_vision && !cdb_model_get_info(a)->has_text);
    CHECK(cdb_model_tokenizer(a) == NULL);
    {
        int32_t ids[77] = {298, 299};
        float e[48];
        CHECK_RC(cdb_encode_tokens(a, ids, 1, 1, e), CDB_INVALID);
    }
    cdb_model_close(a);
    p = cdb_model_params_default();
    p.image_size_override = 224;
    CHECK_RC(cdb_model_open(GOLD "/hf_bf16", &p, &a), CDB_UNSUPPORTED);
    CHECK(a == NULL);
    p = cdb_model_params_default();
    p.device.kind = CDB_K_DEVICE_CUDA;
    if (cdb_k_cuda_device_count() == 0) {
        CHECK_RC(cdb_model_open(GOLD "/hf_bf16", &p, &a), CDB_UNSUPPORTED);
    } else {
        /* The same graph on the GPU backend: DESIGN.md's CPU/GPU bar. */
        size_t n;
        float eg[3 * 48], ec[3 * 48];
        float *px = test_read_file(GOLD "/pixels.f32", &n);
        CHECK_OK(cdb_model_open(GOLD "/hf_bf16", &p, &a));
        CHECK_OK(cdb_model_open(GOLD "/hf_bf16", NULL, &b));
        CHECK_OK(cdb_encode_pixels(a, px, 3, 1, eg));
        CHECK_OK(cdb_encode_pixels(b, px, 3, 1, ec));
        for (int i = 0; i < 3; i++) CHECK(cosine(eg + i * 48, ec + i * 48, 48) >= 0.9995);
        free(px);
        cdb_model_close(a), cdb_model_close(b);
    }
}

/* ---- loading errors ---------------------------------------------------------- */

/* A raw file: u64 header length + header + data. */
static const char *raw_file(const char *name, const char *header, size_t hlen_claim,
                            const void *data, size_t n_data) {
    static char path[512];
    size_t hl = strlen(header);
    unsigned char *buf = malloc(8 + hl + n_data + 1);
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)((uint64_t)hlen_claim >> (8 * i));
    memcpy(buf + 8, header, hl);
    if (n_data) memcpy(buf + 8 + hl, data, n_data);
    snprintf(path, sizeof path, "%s/%s", tmpdir(), name);
    write_all(path, buf, 8 + hl + n_data);
    free(buf);
    return path;
}

static const char *raw(const char *name, const char *header, const void *data, size_t n) {
    return raw_file(name, header, strlen(header), data, n);
}

/* Expects cdb_model_open(path) to fail with want and a message containing needle. */
#define CHECK_OPEN_FAILS(path, want, needle)                                          \
    do {                                                                              \
        cdb_model *m_ = NULL;                                                         \
        CHECK_RC(cdb_model_open((path), NULL, &m_), (want));                          \
        CHECK(m_ == NULL);                                                            \
        CHECK_MSG(strstr(cdb_errmsg(), (needle)) != NULL, "message '%s' lacks '%s'", \
                  cdb_errmsg(), (needle));                                            \
    } while (0)

CDB_TEST(bad_files) {
    float data[8] = {0};
    char path[600];
    size_t n;
    unsigned char *good;
    CHECK(tmpdir()[0]);

    snprintf(path, sizeof path, "%s/zero.safetensors", tmpdir());
    CHECK(write_all(path, "", 0));
    CHECK_OPEN_FAILS(path, CDB_CORRUPT, "too short");
    snprintf(path, sizeof path, "%s/five.safetensors", tmpdir());
    CHECK(write_all(path, "\x10\0\0\0\0", 5));
    CHECK_OPEN_FAILS(path, CDB_CORRUPT, "too short");
    CHECK_OPEN_FAILS(raw("zerolen.safetensors", "", NULL, 0), CDB_CORRUPT, "header length 0");
    CHECK_OPEN_FAILS(raw("notjson.safetensors", "{not json   ", data, 8), CDB_CORRUPT,
                     "bad header JSON");
    CHECK_OPEN_FAILS(raw("array.safetensors", "[1,2,3]", data, 8), CDB_CORRUPT, "not a JSON object");
    CHECK_OPEN_FAILS(raw_file("hugelen.safetensors", "{}", 1u << 30, data, 8), CDB_CORRUPT,
                     "header length");
    CHECK_OPEN_FAILS(raw_file("hlen_past_end.safetensors", "{}", 100, data, 8), CDB_CORRUPT,
                     "header length");
    CHECK_OPEN_FAILS(raw("past_end.safetensors",
                         "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}",
                         data, 8),
                     CDB_CORRUPT, "past the end");
    CHECK_OPEN_FAILS(raw("size_mismatch.safetensors",
                         "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,16]}}",
                         data, 32),
                     CDB_CORRUPT, "bytes for 3 F32 elements");
    CHECK_OPEN_FAILS(raw("overlap.safetensors",
                         "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
                         "\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[8,24]}}",
                         data, 32),
                     CDB_CORRUPT, "overlap");
    CHECK_OPEN_FAILS(raw("dtype.safetensors",
                         "{\"a\":{\"dtype\":\"Q7\",\"shape\":[4],\"data_offsets\":[0,16]}}", data,
                         32),
                     CDB_UNSUPPORTED, "unknown dtype");
    CHECK_OPEN_FAILS(raw("negative.safetensors",
                         "{\"a\":{\"dtype\":\"F32\",\"shape\":[-4],\"data_offsets\":[0,16]}}",
                         data, 32),
                     CDB_CORRUPT, "shape[0]");
    CHECK_OPEN_FAILS(raw("float_off.safetensors",
                         "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0.5,16]}}",
                         data, 32),
                     CDB_CORRUPT, "data_offsets");
    CHECK_OPEN_FAILS(raw("overflow.safetensors",
                         "{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,16],"
                         "\"data_offsets\":[0,16]}}",
                         data, 32),
                     CDB_CORRUPT, "overflows");
    CHECK_OPEN_FAILS(raw("dup.safetensors",
                         "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
                         "\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[16,32]}}",
                         data, 32),
                     CDB_CORRUPT, "bad header JSON");
    CHECK_OPEN_FAILS(raw("meta.safetensors", "{\"__metadata__\":{\"x\":1}}", data, 8),
                     CDB_CORRUPT, "__metadata__");
    CHECK_OPEN_FAILS(raw("noclip.safetensors",
                         "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}",
                         data, 32),
                     CDB_CORRUPT, "no CLIP tensors");
    CHECK_OPEN_FAILS(GOLD "/does_not_exist", CDB_NOTFOUND, "does_not_exist");
    snprintf(path, sizeof path, "%s/emptydir", tmpdir());
    mkdir(path, 0700);
    CHECK_OPEN_FAILS(path, CDB_NOTFOUND, "no .safetensors");

    /* A real model cut at every eighth of its length. */
    good = test_read_file(GOLD "/openai_f16.safetensors", &n);
    CHECK(good != NULL);
    for (int k = 1; k < 8; k++) {
        snprintf(path, sizeof path, "%s/trunc%d.safetensors", tmpdir(), k);
        CHECK(write_all(path, good, n * k / 8));
        CHECK_OPEN_FAILS(path, CDB_CORRUPT, "");
    }
    free(good);
}

/* Rewrites a valid fixture's header with edit() and keeps its data. */
typedef void (*hdr_edit)(json_t *hdr);

static const char *rewrite(const char *src, const char *name, hdr_edit edit) {
    static char path[600];
    size_t n, hl;
    unsigned char *buf = test_read_file(src, &n);
    uint64_t old = 0;
    json_t *hdr;
    char *js;
    if (!buf) return "/nonexistent";
    for (int i = 0; i < 8; i++) old |= (uint64_t)buf[i] << (8 * i);
    hdr = json_loadb((const char *)buf + 8, (size_t)old, 0, NULL);
    edit(hdr);
    js = json_dumps(hdr, JSON_COMPACT);
    /* Data offsets are relative to the data area, so only the header changes. */
    hl = strlen(js);
    snprintf(path, sizeof path, "%s/%s", tmpdir(), name);
    {
        unsigned char *out = malloc(8 + hl + (n - 8 - old));
        for (int i = 0; i < 8; i++) out[i] = (unsigned char)((uint64_t)hl >> (8 * i));
        memcpy(out + 8, js, hl);
        memcpy(out + 8 + hl, buf + 8 + old, n - 8 - old);
        write_all(path, out, 8 + hl + (n - 8 - old));
        free(out);
    }
    free(js);
    json_decref(hdr);
    free(buf);
    return path;
}

static void ed_missing(json_t *h) { json_object_del(h, "visual.ln_post.weight"); }
static void ed_dtype(json_t *h) {
    json_object_set_new(json_object_get(h, "visual.ln_post.bias"), "dtype", json_string("I16"));
}
static void ed_shape(json_t *h) {
    json_object_set_new(json_object_get(h, "visual.ln_post.weight"), "shape",
                        json_pack("[i,i]", 2, 32));
}
static void ed_transposed(json_t *h) { /* [3W, W] claimed as [W, 3W]: same size */
    json_object_set_new(json_object_get(h, "visual.transformer.resblocks.1.attn.in_proj_weight"),
                        "shape", json_pack("[i,i]", 64, 192));
}
static void ed_rn50(json_t *h) { /* a ResNet key in a ViT: a ResNet missing its stages */
    json_t *v = json_object_get(h, "visual.conv1.weight");
    json_object_set(h, "visual.layer1.0.conv1.weight", v);
    json_object_del(h, "visual.conv1.weight");
}
static void ed_timm(json_t *h) { /* OpenCLIP's timm towers keep their weights under trunk */
    json_t *v = json_object_get(h, "visual.conv1.weight");
    json_object_set(h, "visual.trunk.conv1.weight", v);
    json_object_del(h, "visual.conv1.weight");
}
static void ed_past_end(json_t *h) {
    json_object_set_new(json_object_get(h, "visual.ln_post.weight"), "data_offsets",
                        json_pack("[I,I]", (json_int_t)1 << 40, ((json_int_t)1 << 40) + 128));
}
static void ed_pos(json_t *h) { /* 27 positional rows: not 1 + a square */
    json_t *t = json_object_get(h, "visual.positional_embedding");
    json_object_set_new(t, "shape", json_pack("[i,i]", 13, 64));
    json_t *o = json_object_get(t, "data_offsets");
    json_int_t b = json_integer_value(json_array_get(o, 0));
    json_object_set_new(t, "data_offsets", json_pack("[I,I]", b, b + 13 * 64 * 2));
}

CDB_TEST(bad_models) {
    const char *src = GOLD "/openai_f16.safetensors";
    CHECK(tmpdir()[0]);
    CHECK_OPEN_FAILS(rewrite(src, "missing.safetensors", ed_missing), CDB_CORRUPT,
                     "missing tensor 'visual.ln_post.weight'");
    CHECK_OPEN_FAILS(rewrite(src, "dtype.safetensors", ed_dtype), CDB_UNSUPPORTED, "dtype I16");
    CHECK_OPEN_FAILS(rewrite(src, "shape.safetensors", ed_shape), CDB_CORRUPT,
                     "visual.ln_post.weight");
    CHECK_OPEN_FAILS(rewrite(src, "transposed.safetensors", ed_transposed), CDB_CORRUPT,
                     "in_proj_weight");
    CHECK_OPEN_FAILS(rewrite(src, "rn50.safetensors", ed_rn50), CDB_CORRUPT,
                     "ModifiedResNet has 4 stages");
    CHECK_OPEN_FAILS(rewrite(src, "timm.safetensors", ed_timm), CDB_UNSUPPORTED, "timm");
    CHECK_OPEN_FAILS(rewrite(src, "past.safetensors", ed_past_end), CDB_CORRUPT, "past the end");
    CHECK_OPEN_FAILS(rewrite(src, "pos.safetensors", ed_pos), CDB_CORRUPT, "1 + a square");
    {
        /* Hostile configs beside good weights (found by tests/fuzz/fuzz_model_config). */
        static const char *cfgs[][2] = {
            {"{\"vision_cfg\": {\"head_width\": 4294967296}}", "head_width"},
            {"{\"vision_cfg\": {\"head_width\": 0}}", "head_width"},
            {"{\"model_cfg\": {\"text_cfg\": {\"heads\": -3}}}", "heads invalid"},
            {"{\"model_cfg\": {\"text_cfg\": {\"heads\": 7}}}", "do not divide"},
        };
        char dir[600], file[700];
        size_t n;
        void *w = test_read_file(src, &n);
        CHECK(w != NULL);
        snprintf(dir, sizeof dir, "%s/cfgdir", tmpdir());
        mkdir(dir, 0700);
        snprintf(file, sizeof file, "%s/model.safetensors", dir);
        CHECK(write_all(file, w, n));
        free(w);
        snprintf(file, sizeof file, "%s/open_clip_config.json", dir);
        for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++) {
            CHECK(write_all(file, cfgs[i][0], strlen(cfgs[i][0])));
            CHECK_OPEN_FAILS(dir, CDB_CORRUPT, cfgs[i][1]);
        }
        unlink(file);
        /* A config that is not a JSON object is an error naming the file, never
        ** defaults (a GELU model's config.json ignored would run it as QuickGELU). */
        static const char *names[] = {"config.json", "open_clip_config.json",
                                      "preprocessor_config.json"};
        static const char *bodies[][2] = {{"{\"hidden_act\": \"gelu\",", "not valid JSON"},
                                          {"[\"gelu\"]", "not a JSON object"}};
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
            for (size_t j = 0; j < sizeof bodies / sizeof bodies[0]; j++) {
                char want[200];
                snprintf(file, sizeof file, "%s/%s", dir, names[i]);
                CHECK(write_all(file, bodies[j][0], strlen(bodies[j][0])));
                snprintf(want, sizeof want, "/%s: %s", names[i], bodies[j][1]);
                CHECK_OPEN_FAILS(dir, CDB_CORRUPT, want);
                unlink(file);
            }
    }
}

/* The standard vocabulary (committed: data/), or NULL. */
static const char *std_vocab(void) {
    static char buf[4200];
    FILE *f;
    snprintf(buf, sizeof buf, "%s/data/bpe_simple_vocab_16e6.txt.gz", CDB_SOURCE_DIR);
    if ((f = fopen(buf, "rb")) != NULL) return fclose(f), buf;
    return NULL;
}

/* The F16 fixture with its token embedding replaced by a random [49408, 64] one
** appended to the data area: a model the standard vocabulary fits. */
static const char *full_vocab_model(void) {
    static char path[600];
    size_t n, hl, n_emb = (size_t)49408 * 64;
    unsigned char *buf = test_read_file(GOLD "/openai_f16.safetensors", &n), *out;
    uint64_t old = 0, rng = 7;
    json_t *hdr, *t;
    char *js;
    if (!buf) return NULL;
    for (int i = 0; i < 8; i++) old |= (uint64_t)buf[i] << (8 * i);
    hdr = json_loadb((const char *)buf + 8, (size_t)old, 0, NULL);
    t = json_object_get(hdr, "token_embedding.weight");
    json_object_set_new(t, "shape", json_pack("[i,i]", 49408, 64));
    json_object_set_new(t, "data_offsets",
                        json_pack("[I,I]", (json_int_t)(n - 8 - old),
                                  (json_int_t)(n - 8 - old + 2 * n_emb)));
    js = json_dumps(hdr, JSON_COMPACT);
    hl = strlen(js);
    out = malloc(8 + hl + (n - 8 - old) + 2 * n_emb);
    for (int i = 0; i < 8; i++) out[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    memcpy(out + 8, js, hl);
    memcpy(out + 8 + hl, buf + 8 + old, n - 8 - old);
    for (size_t i = 0; i < n_emb; i++) { /* F16 values in about [-0.03, 0.03] */
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        uint16_t h = (uint16_t)(0x2000 + ((rng >> 33) % 0x0800)) | (uint16_t)((rng >> 20) & 0x8000);
        memcpy(out + 8 + hl + (n - 8 - old) + 2 * i, &h, 2);
    }
    snprintf(path, sizeof path, "%s/full_vocab.safetensors", tmpdir());
    write_all(path, out, 8 + hl + (n - 8 - old) + 2 * n_emb);
    free(out), free(js), free(buf);
    json_decref(hdr);
    return path;
}

CDB_TEST(encode_texts) {
    const char *vocab = std_vocab(), *texts[3] = {"a dog on a beach", "", "A photo of a CAT."};
    cdb_model_params p = cdb_model_params_default();
    cdb_model *m = NULL;
    float e[3 * 48], r[48];
    int32_t ids[77];
    int eot = 0;
    if (!vocab) CDB_SKIP("standard vocabulary not found");
    /* A 300-token model: the standard vocabulary does not fit, so no tokenizer. */
    CHECK_OK(cdb_model_open(GOLD "/openai_qgelu", NULL, &m));
    CHECK(cdb_model_tokenizer(m) == NULL);
    CHECK_RC(cdb_encode_texts(m, texts, 1, 1, e), CDB_UNSUPPORTED);
    cdb_model_close(m);
    /* Forced: ids beyond the embedding are refused. */
    p.tokenizer_path = vocab;
    CHECK_OK(cdb_model_open(GOLD "/openai_qgelu", &p, &m));
    CHECK(cdb_model_tokenizer(m) != NULL);
    CHECK_RC(cdb_encode_texts(m, texts, 1, 1, e), CDB_INVALID);
    CHECK(strstr(cdb_errmsg(), "outside the vocabulary") != NULL);
    cdb_model_close(m);
    /* Full vocabulary: encode_texts == tokenize + encode_tokens, pooled at 49407. */
    CHECK(tmpdir()[0]);
    CHECK_OK(cdb_model_open(full_vocab_model(), NULL, &m));
    CHECK_EQ_INT(cdb_model_get_info(m)->vocab_size, 49408);
    CHECK(cdb_model_tokenizer(m) != NULL);
    CHECK_OK(cdb_encode_texts(m, texts, 3, 1, e));
    for (int i = 0; i < 3; i++) {
        CHECK_OK(cdb_tok_tokenize(cdb_model_tokenizer(m), texts[i], strlen(texts[i]), 77, ids,
                                  &eot, NULL));
        CHECK_EQ_INT(ids[eot], 49407);
        CHECK_OK(cdb_encode_tokens(m, ids, 1, 1, r));
        CHECK(cosine(r, e + i * 48, 48) > 0.9999999);
        CHECK_NEAR(norm(e + i * 48, 48), 1.0, 1e-6);
    }
    CHECK(cosine(e, e + 48, 48) < 0.999); /* different texts, different embeddings */
    cdb_model_close(m);
}

CDB_TEST(encode_image_file) {
    /* == decode + the model's preprocessing (config mean/std 0.5, size 40) + pixels. */
    const char *img_path = CDB_SOURCE_DIR "/tests/golden/images/bw_45x37.png";
    cdb_model *m = NULL;
    cdb_image *img = NULL;
    cdb_image_params ip = cdb_image_params_default();
    float e1[48], e2[48], *px = malloc(3 * 40 * 40 * sizeof(float));
    CHECK_OK(cdb_model_open(GOLD "/hf_gelu", NULL, &m));
    CHECK_OK(cdb_encode_image_file(m, img_path, &ip, 1, e1));
    CHECK_OK(cdb_image_load(img_path, &ip, &img));
    CHECK_OK(cdb_image_preprocess(img, &cdb_model_get_info(m)->preprocess, px, NULL));
    CHECK_OK(cdb_encode_pixels(m, px, 1, 1, e2));
    CHECK(cosine(e1, e2, 48) > 0.9999999);
    CHECK_RC(cdb_encode_image_file(m, GOLD "/tokens.i32", &ip, 1, e1),
             cdb_encode_image_file(m, GOLD "/tokens.i32", &ip, 1, e1)); /* stable error */
    CHECK(cdb_encode_image_file(m, GOLD "/tokens.i32", &ip, 1, e1) != CDB_OK);
    CHECK(strstr(cdb_errmsg(), "tokens.i32") != NULL);
    cdb_image_free(img);
    free(px);
    cdb_model_close(m);
}

CDB_TEST(header_mutations) {
    /* Random byte flips in the length prefix and header of a real model: any status
    ** is fine, a crash or an out-of-bounds read (under ASan) is not. */
    size_t n;
    unsigned char *good = test_read_file(GOLD "/openai_f16.safetensors", &n), *buf;
    uint64_t hl = 0, rng = 99;
    char path[600];
    int opened = 0;
    CHECK(good && tmpdir()[0]);
    for (int i = 0; i < 8; i++) hl |= (uint64_t)good[i] << (8 * i);
    buf = malloc(n);
    snprintf(path, sizeof path, "%s/mutant.safetensors", tmpdir());
    for (int it = 0; it < 300; it++) {
        cdb_model *m = NULL;
        memcpy(buf, good, n);
        for (int k = 0; k < 1 + it % 3; k++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            size_t at = (size_t)((rng >> 33) % (8 + hl));
            buf[at] = (unsigned char)(rng >> 13);
        }
        CHECK(write_all(path, buf, n));
        if (cdb_model_open(path, NULL, &m) == CDB_OK) {
            float px[3 * 40 * 40] = {0}, e[48];
            int32_t ids[77] = {298, 5, 299};
            opened++;
            (void)cdb_encode_pixels(m, px, 1, 1, e);
            (void)cdb_encode_tokens(m, ids, 1, 1, e);
            cdb_model_close(m);
        }
    }
    printf("     %d of 300 header mutants still opened\n", opened);
    /* NaN weights (F16 0xFFFF) open fine but must never produce NaN embeddings. */
    for (int it = 0; it < 20; it++) {
        cdb_model *m = NULL;
        float px[3 * 40 * 40] = {0}, e[48];
        int32_t ids[77] = {298, 5, 299};
        cdb_status s1, s2;
        memcpy(buf, good, n);
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        size_t at = 8 + hl + (size_t)((rng >> 33) % (n - 8 - hl - 1));
        at &= ~(size_t)1;
        buf[at] = buf[at + 1] = 0xFF;
        CHECK(write_all(path, buf, n));
        CHECK_OK(cdb_model_open(path, NULL, &m));
        s1 = cdb_encode_pixels(m, px, 1, 1, e);
        if (s1 == CDB_OK)
            for (int j = 0; j < 48; j++) CHECK(isfinite(e[j]));
        s2 = cdb_encode_tokens(m, ids, 1, 1, e);
        if (s2 == CDB_OK)
            for (int j = 0; j < 48; j++) CHECK(isfinite(e[j]));
        CHECK((s1 == CDB_OK || s1 == CDB_ERROR) && (s2 == CDB_OK || s2 == CDB_ERROR));
        cdb_model_close(m);
    }
    free(buf);
    free(good);
}

CDB_TEST(bad_arguments) {
    cdb_model *m = NULL;
    float e[48];
    CHECK_RC(cdb_model_open(NULL, NULL, &m), CDB_INVALID);
    CHECK_OK(cdb_model_open(GOLD "/openai_qgelu", NULL, &m));
    CHECK_RC(cdb_encode_pixels(m, NULL, 1, 1, e), CDB_INVALID);
    CHECK_RC(cdb_encode_tokens(m, NULL, 1, 1, e), CDB_INVALID);
    CHECK_OK(cdb_encode_pixels(m, NULL, 0, 1, NULL));
    CHECK(cdb_model_get_info(NULL) == NULL);
    cdb_model_close(m);
}

CDB_TEST_MAIN(golden_openai_qgelu_f32, golden_hf_gelu_f32, golden_openai_f16_single_file,
              golden_hf_bf16, info_sources_and_hash, bad_files, bad_models, encode_texts,
              encode_image_file, header_mutations, bad_arguments)
