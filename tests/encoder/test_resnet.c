/*
** test_resnet.c: OpenAI's ModifiedResNet image towers (issue 17).
**
** Part 1, the numbers: three tiny ResNet CLIPs of RN50's structure from
** tests/reference/make_resnet_fixtures.py (scripts/clip_torch.py's ModifiedResNet in
** float64): stem, anti-aliased Bottlenecks (stride-1 and stride-2 shortcuts, identity
** shortcuts), attention pooling with 4 and 6 heads (the latter from
** open_clip_config.json's head_width), 2x2 and 3x3 grids (64 and 96 pixels),
** calibrated and perturbed BatchNorm statistics (so the folding at load is
** exercised), F32 folders and an OpenAI-style F16/F32 single file. Every image and
** text embedding must reach cosine >= 0.99999 (the bar) and 1 - 1e-8 (what an
** fp32 path reaches; it tells the text activations apart: forcing the other one
** must fall below it). Batches equal single images (to rounding: gemm blocking).
**
** Part 2, the real sizes with no real weights: RN50, RN101, RN50x4, RN50x16, RN50x64
** written as sparse safetensors files (real names, shapes, OpenAI's dtypes: F16
** convolutions and linear layers, F32 BatchNorms and positional embedding, I64
** num_batches_tracked in the OpenCLIP folders) with no config, with an
** RN50-quickgelu-style open_clip_config.json and with a plain RN50-style one, opened
** inspect-only: every inferred field (stage blocks, widths, heads, grid, image size,
** text widths 512/640/768/1024, embed dim, activation and its source, preprocessing
** size) and the parameter count against the formula and OpenCLIP's published totals
** (102.01M ... 623.26M). Nothing may be read.
**
** Part 3, what must be refused: a missing or extra downsample, a misshapen
** BatchNorm, a truncated file, a negative running variance, a timm tower
** ('visual.trunk.*'), an image size the positional embedding contradicts.
*/
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cdb_test.h"
#include "encoder/encoder.h"
#define CDB_TEST_TMP_TAG "resnet"
#include "model_test_util.h"

#define GOLD CDB_SOURCE_DIR "/tests/golden/models"
#define MIN_COS 0.99999      /* the bar */
#define TIGHT_COS 0.99999999 /* what fp32 reaches; tells QuickGELU from GELU */
#define VOCAB 49408
#define CTX 77

/* ---- part 1: the fixtures against PyTorch ----------------------------------------- */

typedef struct rn_fixture {
    const char *name;    /* under tests/golden/models */
    int image, width, blocks[4], heads, text_width, text_heads;
    cdb_act act;
    const char *act_src; /* substring of info.act_source */
    const char *dtype;   /* info.weights_dtype */
} rn_fixture;

static const rn_fixture k_fix[] = {
    {"rn_qgelu", 64, 8, {1, 2, 1, 1}, 4, 64, 1, CDB_ACT_QUICK_GELU, "open_clip_config.json", "F32"},
    {"rn_gelu", 96, 6, {2, 1, 2, 1}, 6, 64, 2, CDB_ACT_GELU, "open_clip_config.json", "F32"},
    {"rn_openai_f16.safetensors", 64, 8, {1, 1, 1, 1}, 4, 64, 1, CDB_ACT_QUICK_GELU, "default",
     "mixed"},
};
#define FX_EMBED 48
#define FX_VOCAB 300

static void run_fixture(cdb_test_ctx *cdb_t_, const rn_fixture *fx) {
    char path[600], stem[128];
    cdb_model *m = NULL;
    const cdb_model_info *in;
    cdb_model_params p = cdb_model_params_default();
    size_t n_tok, n_px, n_et, n_ei;
    int32_t *tokens = NULL;
    float *pixels = NULL, *exp_t = NULL, *exp_i = NULL, *got = NULL, *one = NULL;
    int nt, ni, E = FX_EMBED, n_blocks = 0;
    double min_t = 1, min_i = 1, min_other = 1, min_single = 1;

    snprintf(stem, sizeof stem, "%s", fx->name);
    if (strstr(stem, ".safetensors")) *strstr(stem, ".safetensors") = 0;
    p.n_threads = 2;
    snprintf(path, sizeof path, "%s/%s", GOLD, fx->name);
    CHECK_OK(cdb_model_open(path, &p, &m));
    in = cdb_model_get_info(m);
    for (int s = 0; s < 4; s++) n_blocks += fx->blocks[s];
    CHECK_EQ_STR(in->vision_family, "ResNet");
    CHECK_EQ_STR(in->naming, "openai");
    CHECK_EQ_STR(in->weights_dtype, fx->dtype);
    CHECK_EQ_INT(in->act, fx->act);
    CHECK_MSG(strstr(in->act_source, fx->act_src) != NULL, "%s: act_source '%s'", fx->name,
              in->act_source);
    CHECK_EQ_INT(in->image_size, fx->image);
    CHECK_EQ_INT(in->patch_size, 32);
    CHECK_EQ_INT(in->preprocess.size, fx->image);
    CHECK_EQ_INT(in->vision_width, fx->width);
    CHECK_EQ_INT(in->vision_layers, n_blocks);
    for (int s = 0; s < 4; s++) CHECK_EQ_INT(in->vision_stage_blocks[s], fx->blocks[s]);
    CHECK_EQ_INT(in->vision_pool_width, 32 * fx->width);
    CHECK_EQ_INT(in->vision_heads, fx->heads);
    CHECK_EQ_INT(in->vision_mlp_width, 0);
    CHECK_EQ_INT(in->text_width, fx->text_width);
    CHECK_EQ_INT(in->text_heads, fx->text_heads);
    CHECK_EQ_INT(in->embed_dim, FX_EMBED);
    CHECK_EQ_INT(in->vocab_size, FX_VOCAB);

    tokens = test_read_file(GOLD "/tokens.i32", &n_tok);
    snprintf(path, sizeof path, "%s/rn_pixels%d.f32", GOLD, fx->image);
    pixels = test_read_file(path, &n_px);
    exp_t = read_golden_f32(GOLD, stem, "text", &n_et);
    exp_i = read_golden_f32(GOLD, stem, "image", &n_ei);
    nt = (int)(n_tok / (4 * CTX));
    ni = (int)(n_px / (4 * 3 * (size_t)fx->image * fx->image));
    got = malloc((size_t)(nt > ni ? nt : ni) * E * sizeof(float));
    one = malloc((size_t)E * sizeof(float));
    if (!tokens || !pixels || !exp_t || !exp_i || !got || !one || n_et != (size_t)nt * E * 4 ||
        n_ei != (size_t)ni * E * 4 || ni < 2) {
        free(tokens), free(pixels), free(exp_t), free(exp_i), free(got), free(one);
        cdb_model_close(m);
        CDB_TEST_FAIL_("%s: fixture files missing or of the wrong size (tests/golden/models/"
                       "README.md)", fx->name);
    }
    if (cdb_encode_tokens(m, tokens, nt, 0, got) == CDB_OK)
        for (int i = 0; i < nt; i++) min_t = fmin(min_t, cosine(got + i * E, exp_t + i * E, E));
    else
        min_t = -2;
    if (cdb_encode_pixels(m, pixels, ni, 0, got) == CDB_OK) {
        for (int i = 0; i < ni; i++) min_i = fmin(min_i, cosine(got + i * E, exp_i + i * E, E));
        /* one image at a time gives the batch's embeddings */
        for (int i = 0; i < ni; i++)
            if (cdb_encode_pixels(m, pixels + (size_t)i * 3 * fx->image * fx->image, 1, 0, one) ==
                CDB_OK)
                min_single = fmin(min_single, cosine(one, got + i * E, E));
            else
                min_single = -2;
    } else {
        min_i = -2;
    }
    printf("     %s: max 1 - cosine vs PyTorch (float64): image %.2g, text %.2g; single vs "
           "batch %.2g\n", fx->name, 1 - min_i, 1 - min_t, 1 - min_single);
    cdb_model_close(m);
    m = NULL;
    /* The text fixture tells the activations apart (the image tower has ReLU only). */
    p.act = fx->act == CDB_ACT_GELU ? CDB_ACT_QUICK_GELU : CDB_ACT_GELU;
    snprintf(path, sizeof path, "%s/%s", GOLD, fx->name);
    if (cdb_model_open(path, &p, &m) == CDB_OK &&
        cdb_encode_tokens(m, tokens, nt, 0, got) == CDB_OK)
        for (int i = 0; i < nt; i++)
            min_other = fmin(min_other, cosine(got + i * E, exp_t + i * E, E));
    cdb_model_close(m);
    free(tokens), free(pixels), free(exp_t), free(exp_i), free(got), free(one);
    CHECK_MSG(min_i >= MIN_COS, "%s image: min cosine %.9f (-2: encode failed)", fx->name, min_i);
    CHECK_MSG(min_t >= MIN_COS, "%s text: min cosine %.9f (-2: encode failed)", fx->name, min_t);
    CHECK_MSG(min_i >= TIGHT_COS && min_t >= TIGHT_COS, "%s: min cosine %.10f / %.10f < %.8f",
              fx->name, min_i, min_t, TIGHT_COS);
    CHECK_MSG(min_single >= 1 - 1e-9, "%s: one image at a time: cosine %.15f", fx->name,
              min_single);
    CHECK_MSG(min_other < TIGHT_COS, "%s: the other text activation still reaches %.10f",
              fx->name, min_other);
}

CDB_TEST(golden_rn_qgelu_64px_4heads) { run_fixture(cdb_t_, &k_fix[0]); }
CDB_TEST(golden_rn_gelu_96px_head_width_32) { run_fixture(cdb_t_, &k_fix[1]); }
CDB_TEST(golden_rn_openai_f16_single_file) { run_fixture(cdb_t_, &k_fix[2]); }

/* An inspect-only open describes a ResNet exactly as a full open does; a text-only
** open leaves the image tower out. */
CDB_TEST(inspect_and_text_only_match_full_open) {
    for (size_t i = 0; i < sizeof k_fix / sizeof k_fix[0]; i++) {
        char path[600];
        cdb_model_params p = cdb_model_params_default();
        cdb_model *a = NULL, *b = NULL, *t = NULL;
        float px[1];
        CHECK_CALL(open_full_and_inspect(cdb_t_, GOLD, k_fix[i].name, &a, &b));
        const cdb_model_info *x = cdb_model_get_info(a), *y = cdb_model_get_info(b);
#define SAME(field) CHECK_EQ_INT(x->field, y->field)
        SAME(embed_dim); SAME(image_size); SAME(patch_size); SAME(vision_width);
        SAME(vision_layers); SAME(vision_heads); SAME(vision_pool_width); SAME(text_width);
        SAME(text_layers); SAME(text_heads); SAME(act); SAME(preprocess.size);
        for (int s = 0; s < 4; s++) SAME(vision_stage_blocks[s]);
#undef SAME
        CHECK(x->n_params == y->n_params && x->n_params > 0);
        CHECK_EQ_STR(x->vision_family, y->vision_family);
        CHECK_EQ_STR(x->weights_dtype, y->weights_dtype);
        CHECK_RC(cdb_encode_pixels(b, px, 1, 1, px), CDB_INVALID);
        snprintf(path, sizeof path, "%s/%s", GOLD, k_fix[i].name);
        p.n_threads = 1;
        p.load_vision = 0;
        CHECK_OK(cdb_model_open(path, &p, &t));
        CHECK_EQ_INT(cdb_model_get_info(t)->has_vision, 0);
        CHECK_EQ_STR(cdb_model_get_info(t)->vision_family, "");
        CHECK_EQ_INT(cdb_model_get_info(t)->text_width, x->text_width);
        cdb_model_close(a);
        cdb_model_close(b);
        cdb_model_close(t);
    }
}

/* ---- part 2: the real sizes, sparse ------------------------------------------------ */

typedef struct rn_family {
    const char *name; /* OpenAI's / OpenCLIP's name */
    int image, width, blocks[4];
    int tw, theads, embed; /* text width and heads (12 layers each), embedding */
    double published_m;    /* OpenCLIP's total (docs/model_profile.csv, logit_scale included) */
} rn_family;

static const rn_family k_rn[] = {
    {"RN50", 224, 64, {3, 4, 6, 3}, 512, 8, 1024, 102.01},
    {"RN101", 224, 64, {3, 4, 23, 3}, 512, 8, 512, 119.69},
    {"RN50x4", 288, 80, {4, 6, 10, 6}, 640, 10, 640, 178.30},
    {"RN50x16", 384, 96, {6, 8, 18, 8}, 768, 12, 768, 290.98},
    {"RN50x64", 448, 128, {3, 15, 36, 10}, 1024, 16, 1024, 623.26},
};
enum { R_50, R_101, R_50X4, R_50X16, R_50X64, N_RN };

static int64_t conv_bn_params(int64_t cout, int64_t cin, int64_t k) {
    return cout * cin * k * k + 2 * cout; /* + BatchNorm gain and shift (not its statistics) */
}

/* Parameters the towers use (logit_scale and the BatchNorm statistics excluded). */
static int64_t rn_params(const rn_family *f) {
    int64_t w = f->width, pw = 32 * w, g = f->image / 32, t = f->tw, inpl = w, n;
    n = conv_bn_params(w / 2, 3, 3) + conv_bn_params(w / 2, w / 2, 3) + conv_bn_params(w, w / 2, 3);
    for (int s = 0; s < 4; s++) {
        int64_t P = w << s;
        for (int j = 0; j < f->blocks[s]; j++) {
            n += conv_bn_params(P, inpl, 1) + conv_bn_params(P, P, 3) + conv_bn_params(4 * P, P, 1);
            if (j == 0) n += conv_bn_params(4 * P, inpl, 1); /* every stage's first block */
            inpl = 4 * P;
        }
    }
    n += (g * g + 1) * pw + 3 * (pw * pw + pw) + (int64_t)f->embed * pw + f->embed;
    n += (int64_t)VOCAB * t + CTX * t + 12 * (4 * t * t + 9 * t + 8 * t * t + 4 * t) + 2 * t +
         t * f->embed;
    return n;
}

enum { MUT_NONE = 0, MUT_TRUNCATE, MUT_NO_DOWNSAMPLE, MUT_EXTRA_DOWNSAMPLE, MUT_BAD_BN, MUT_TIMM };

/* OpenAI's dtypes (convert_weights): convolutions, linear layers, projections F16;
** BatchNorms and the attention pool's positional embedding F32. */
static void add_conv_bn(st_writer *w, const char *wname, const char *bn, int64_t cout,
                        int64_t cin, int64_t k, int nbt, int bad_bn) {
    st_add(w, "F16", 2, 4, (int64_t[]){cout, cin, k, k}, "%s", wname);
    st_add(w, "F32", 4, 1, (int64_t[]){cout}, "%s.weight", bn);
    st_add(w, "F32", 4, 1, (int64_t[]){cout}, "%s.bias", bn);
    st_add(w, "F32", 4, 1, (int64_t[]){cout}, "%s.running_mean", bn);
    st_add(w, "F32", 4, 1, (int64_t[]){cout - (bad_bn != 0)}, "%s.running_var", bn);
    if (nbt) st_add(w, "I64", 8, 0, NULL, "%s.num_batches_tracked", bn);
}

/* The family's OpenAI state_dict as a header over a hole. nbt: with OpenCLIP's I64
** num_batches_tracked buffers. */
static int write_rn_sparse(const char *path, const rn_family *f, int nbt, int mut) {
    st_writer w = {json_object(), 0, NULL};
    int64_t W = f->width, PW = 32 * W, G = f->image / 32, T = f->tw, E = f->embed, inpl = W;
    char pre[96], wn[128], bn[128];
    if (mut == MUT_TIMM) { /* OpenCLIP's TimmModel: trunk + head */
        st_add(&w, "F16", 2, 4, (int64_t[]){64, 3, 7, 7}, "visual.trunk.conv1.weight");
        T2(&w, E, 2048, "visual.head.proj.weight");
    } else {
        add_conv_bn(&w, "visual.conv1.weight", "visual.bn1", W / 2, 3, 3, nbt, 0);
        add_conv_bn(&w, "visual.conv2.weight", "visual.bn2", W / 2, W / 2, 3, nbt, 0);
        add_conv_bn(&w, "visual.conv3.weight", "visual.bn3", W, W / 2, 3, nbt, mut == MUT_BAD_BN);
        for (int s = 0; s < 4; s++) {
            int64_t P = W << s;
            for (int j = 0; j < f->blocks[s]; j++) {
                snprintf(pre, sizeof pre, "visual.layer%d.%d.", s + 1, j);
#define CB(name, bnn, co, ci, k)                                             \
    snprintf(wn, sizeof wn, "%s%s.weight", pre, name);                      \
    snprintf(bn, sizeof bn, "%s%s", pre, bnn);                              \
    add_conv_bn(&w, wn, bn, co, ci, k, nbt, 0)
                CB("conv1", "bn1", P, inpl, 1);
                CB("conv2", "bn2", P, P, 3);
                CB("conv3", "bn3", 4 * P, P, 1);
                if ((j == 0 && !(mut == MUT_NO_DOWNSAMPLE && s == 1)) ||
                    (mut == MUT_EXTRA_DOWNSAMPLE && s == 0 && j == 1)) {
                    CB("downsample.0", "downsample.1", 4 * P, inpl, 1);
                }
#undef CB
                inpl = 4 * P;
            }
        }
        st_add(&w, "F32", 4, 2, (int64_t[]){G * G + 1, PW}, "visual.attnpool.positional_embedding");
        T2(&w, PW, PW, "visual.attnpool.q_proj.weight");
        T1(&w, PW, "visual.attnpool.q_proj.bias");
        T2(&w, PW, PW, "visual.attnpool.k_proj.weight");
        T1(&w, PW, "visual.attnpool.k_proj.bias");
        T2(&w, PW, PW, "visual.attnpool.v_proj.weight");
        T1(&w, PW, "visual.attnpool.v_proj.bias");
        T2(&w, E, PW, "visual.attnpool.c_proj.weight");
        T1(&w, E, "visual.attnpool.c_proj.bias");
    }
    add_openai_text(&w, VOCAB, CTX, T, 12, 4 * T, E);
    st_add(&w, "F32", 4, 0, NULL, "logit_scale");
    return write_header(path, &w, mut == MUT_TRUNCATE);
}

enum { CFG_NONE = 0, CFG_QUICKGELU = 1, CFG_PLAIN = 2 };

/* OpenCLIP's model_configs/RN50-quickgelu.json (quick_gelu: true) or RN50.json (no
** quick_gelu: GELU), wrapped as open_clip_config.json. */
static int write_rn_config(const char *dir, const rn_family *f, int kind) {
    json_t *layers = json_pack("[iiii]", f->blocks[0], f->blocks[1], f->blocks[2], f->blocks[3]);
    json_t *mc = json_pack("{sis{sisosisn}s{sisisisisi}}", "embed_dim", f->embed, "vision_cfg",
                           "image_size", f->image, "layers", layers, "width", f->width,
                           "patch_size", "text_cfg", "context_length", CTX, "vocab_size", VOCAB,
                           "width", f->tw, "heads", f->theads, "layers", 12);
    if (kind == CFG_QUICKGELU) json_object_set_new(mc, "quick_gelu", json_true());
    return write_json(dir, "open_clip_config.json",
                      json_pack("{sos{soso}}", "model_cfg", mc, "preprocess_cfg", "mean",
                                json_pack("[fff]", 0.48145466, 0.4578275, 0.40821073), "std",
                                json_pack("[fff]", 0.26862954, 0.26130258, 0.27577711)));
}

static void run_rn_case(cdb_test_ctx *cdb_t_, const rn_family *f, int cfg, int idx) {
    char dir[512], file[600];
    cdb_model_params p = cdb_model_params_default();
    cdb_model *m = NULL;
    const cdb_model_info *in;
    struct stat st;
    int64_t want = rn_params(f), cached;
    long rss = 0;
    double ms = 0;
    float px[1];
    int n_blocks = 0, heads;

    CHECK(tmpdir()[0]);
    snprintf(dir, sizeof dir, "%s/rn%02d", tmpdir(), idx);
    CHECK(mkdir(dir, 0700) == 0);
    snprintf(file, sizeof file, "%s/%s", dir,
             cfg == CFG_NONE ? "weights.safetensors" : "open_clip_model.safetensors");
    CHECK(write_rn_sparse(file, f, cfg != CFG_NONE, MUT_NONE));
    if (cfg != CFG_NONE) CHECK(write_rn_config(dir, f, cfg));
    CHECK(stat(file, &st) == 0);
    CHECK_MSG((int64_t)st.st_blocks * 512 < ((int64_t)4 << 20), "%s: %lld bytes allocated",
              file, (long long)st.st_blocks * 512);
    p.inspect_only = 1;
    p.n_threads = 1;
    CHECK_OK(open_measured(cfg == CFG_NONE ? file : dir, &p, &m, &rss, &ms));
    cached = cached_bytes(file);
    in = cdb_model_get_info(m);
    for (int s = 0; s < 4; s++) n_blocks += f->blocks[s];
    CHECK_EQ_STR(in->vision_family, "ResNet");
    CHECK_EQ_STR(in->naming, "openai");
    CHECK_EQ_STR(in->weights_dtype, "mixed"); /* F16 convolutions, F32 BatchNorms */
    CHECK(in->has_vision && in->has_text);
    CHECK_EQ_INT(in->image_size, f->image);
    CHECK_EQ_INT(in->patch_size, 32);
    CHECK_EQ_INT(in->vision_width, f->width);
    CHECK_EQ_INT(in->vision_layers, n_blocks);
    for (int s = 0; s < 4; s++) CHECK_EQ_INT(in->vision_stage_blocks[s], f->blocks[s]);
    CHECK_EQ_INT(in->vision_heads, f->width * 32 / 64);
    CHECK_EQ_INT(in->vision_pool_width, 32 * f->width);
    CHECK_EQ_INT(in->vision_mlp_width, 0);
    CHECK_EQ_INT(in->context_length, CTX);
    CHECK_EQ_INT(in->vocab_size, VOCAB);
    CHECK_EQ_INT(in->text_width, f->tw);
    CHECK_EQ_INT(in->text_layers, 12);
    CHECK_EQ_INT(in->text_heads, f->theads);
    CHECK_EQ_INT(in->text_mlp_width, 4 * f->tw);
    CHECK_EQ_INT(in->embed_dim, f->embed);
    CHECK_EQ_INT(in->preprocess.size, f->image);
    CHECK_EQ_INT(in->preprocess.interp, CDB_INTERP_BICUBIC);
    CHECK_EQ_INT(in->act, cfg == CFG_PLAIN ? CDB_ACT_GELU : CDB_ACT_QUICK_GELU);
    CHECK_MSG(strstr(in->act_source, cfg == CFG_NONE ? "default" : "open_clip_config.json") != NULL,
              "%s: act_source '%s'", f->name, in->act_source);
    CHECK_MSG(in->n_params == want, "%s: n_params %lld, want %lld", f->name,
              (long long)in->n_params, (long long)want);
    CHECK_MSG(fabs((double)(in->n_params + 1) / 1e6 - f->published_m) < 0.005,
              "%s: %.4fM parameters, published %.2fM", f->name, (double)(in->n_params + 1) / 1e6,
              f->published_m);
    CHECK(in->weights_f32_bytes == 4 * want);
    CHECK_EQ_INT(in->inspect_only, 1);
    CHECK_EQ_STR(in->hash, "");
    CHECK(cdb_model_tokenizer(m) != NULL);
    CHECK_RC(cdb_encode_pixels(m, px, 1, 1, px), CDB_INVALID);
    heads = in->vision_heads;
    cdb_model_close(m);
    CHECK_MSG(rss < 512 * 1024, "%s: peak RSS grew by %ld KiB", f->name, rss);
    CHECK_MSG(cached >= 0 && cached < ((int64_t)8 << 20), "%s: %lld bytes of the file cached",
              f->name, (long long)cached);
    printf("     %-8s %-26s %3d px, blocks %d-%d-%d-%d, %2d heads, text %4d/%2d, %7.2fM params "
           "%.2f GiB (sparse) %-10s open %3.0f ms\n", f->name,
           cfg == CFG_NONE ? "no config" : cfg == CFG_QUICKGELU ? "RN*-quickgelu config"
                                                                : "RN* config (GELU)",
           f->image, f->blocks[0], f->blocks[1], f->blocks[2], f->blocks[3], heads,
           f->tw, f->theads, (double)(want + 1) / 1e6, (double)st.st_size / (1 << 30),
           cfg == CFG_PLAIN ? "gelu" : "quick_gelu", ms);
    unlink(file);
}

CDB_TEST(every_rn_size_inspects_exactly) {
    int idx = 0;
    for (int i = 0; i < N_RN; i++)
        for (int cfg = 0; cfg < 3; cfg++, idx++) {
            cdb_test_ctx sub = {0, 0};
            run_rn_case(&sub, &k_rn[i], cfg, idx);
            if (sub.failed) CDB_TEST_FAIL_("%s (config kind %d) failed", k_rn[i].name, cfg);
        }
}

/* ---- part 3: refusals ---------------------------------------------------------------- */

static void expect_refused(cdb_test_ctx *cdb_t_, int fam, int mut, cdb_status want,
                           const char *msg_part) {
    char file[600];
    cdb_model_params p = cdb_model_params_default();
    cdb_model *m = NULL;
    p.inspect_only = 1;
    snprintf(file, sizeof file, "%s/mut%d.safetensors", tmpdir(), mut);
    CHECK(write_rn_sparse(file, &k_rn[fam], 1, mut));
    CHECK_RC(cdb_model_open(file, &p, &m), want);
    CHECK(m == NULL);
    CHECK_MSG(strstr(cdb_errmsg(), msg_part) != NULL, "mutation %d: '%s' lacks '%s'", mut,
              cdb_errmsg(), msg_part);
    unlink(file);
}

CDB_TEST(malformed_resnets_are_refused) {
    CHECK(tmpdir()[0]);
    expect_refused(cdb_t_, R_50X64, MUT_TRUNCATE, CDB_CORRUPT, "truncated");
    expect_refused(cdb_t_, R_50, MUT_NO_DOWNSAMPLE, CDB_CORRUPT,
                   "layer2.0.downsample.0.weight' missing");
    expect_refused(cdb_t_, R_50, MUT_EXTRA_DOWNSAMPLE, CDB_CORRUPT,
                   "layer1.1.downsample.0.weight' present");
    expect_refused(cdb_t_, R_50, MUT_BAD_BN, CDB_CORRUPT, "visual.bn3.running_var");
    expect_refused(cdb_t_, R_50, MUT_TIMM, CDB_UNSUPPORTED, "timm");
    {
        /* a timm tower's text side still opens alone */
        char file[600];
        cdb_model_params p = cdb_model_params_default();
        cdb_model *m = NULL;
        p.inspect_only = 1;
        p.load_vision = 0;
        snprintf(file, sizeof file, "%s/timm_text.safetensors", tmpdir());
        CHECK(write_rn_sparse(file, &k_rn[R_50], 0, MUT_TIMM));
        CHECK_OK(cdb_model_open(file, &p, &m));
        CHECK_EQ_INT(cdb_model_get_info(m)->has_vision, 0);
        cdb_model_close(m);
        unlink(file);
    }
}

/* Data-level refusals need real bytes: the F32 fixture with one running variance
** rewritten, and an image size its positional embedding contradicts. */
CDB_TEST(negative_running_var_and_size_override) {
    char src[600], dst[600];
    size_t n;
    unsigned char *buf = NULL;
    uint64_t hl = 0;
    json_t *hdr = NULL, *off;
    cdb_model_params p = cdb_model_params_default();
    cdb_model *m = NULL;
    FILE *f;
    const float neg = -1.0f;

    snprintf(src, sizeof src, "%s/rn_qgelu/open_clip_model.safetensors", GOLD);
    p.image_size_override = 96;
    CHECK_RC(cdb_model_open(src, &p, &m), CDB_UNSUPPORTED);
    CHECK(strstr(cdb_errmsg(), "fixes it at 64") != NULL);
    p.image_size_override = 64;
    CHECK_OK(cdb_model_open(src, &p, &m));
    cdb_model_close(m);
    m = NULL;
    p.image_size_override = 0;

    buf = test_read_file(src, &n);
    CHECK(buf != NULL && n > 8);
    for (int i = 0; i < 8; i++) hl |= (uint64_t)buf[i] << (8 * i);
    CHECK(hl < n);
    hdr = json_loadb((const char *)buf + 8, (size_t)hl, 0, NULL);
    off = json_object_get(json_object_get(hdr, "visual.layer3.0.bn2.running_var"), "data_offsets");
    CHECK(json_is_array(off));
    memcpy(buf + 8 + hl + (size_t)json_integer_value(json_array_get(off, 0)) + 4 * 3, &neg, 4);
    json_decref(hdr);
    CHECK(tmpdir()[0]);
    snprintf(dst, sizeof dst, "%s/negvar.safetensors", tmpdir());
    f = fopen(dst, "wb");
    CHECK(f != NULL);
    CHECK(fwrite(buf, 1, n, f) == n);
    fclose(f);
    free(buf);
    CHECK_RC(cdb_model_open(dst, &p, &m), CDB_CORRUPT);
    CHECK_MSG(strstr(cdb_errmsg(), "visual.layer3.0.bn2.running_var'[3] = -1") != NULL, "'%s'",
              cdb_errmsg());
    p.inspect_only = 1; /* nothing is read: the shapes are fine */
    CHECK_OK(cdb_model_open(dst, &p, &m));
    cdb_model_close(m);
    unlink(dst);
}

/* On request only (it needs the RAM): a full load of a sparse real-size ResNet, to
** see the loader's memory plan (BatchNorm folding). CLIPDB_FULL_LOAD=RN50 (or another
** name) ./test_resnet full_load_peak_rss. Zero weights, so zero embeddings. */
CDB_TEST(full_load_peak_rss) {
    const char *want = getenv("CLIPDB_FULL_LOAD");
    char file[600];
    if (!want || !*want) CDB_SKIP("set CLIPDB_FULL_LOAD=RN50 (a family name) to run");
    const rn_family *f = NULL;
    for (int i = 0; i < N_RN && !f; i++) f = strcmp(k_rn[i].name, want) ? NULL : &k_rn[i];
    if (!f) CDB_SKIP("CLIPDB_FULL_LOAD=%s is not a ResNet family", want);
    CHECK(tmpdir()[0]);
    snprintf(file, sizeof file, "%s/full.safetensors", tmpdir());
    CHECK(write_rn_sparse(file, f, 0, MUT_NONE));
    full_load_measure(cdb_t_, file, f->name, f->image);
}

CDB_TEST_MAIN(golden_rn_qgelu_64px_4heads, golden_rn_gelu_96px_head_width_32,
              golden_rn_openai_f16_single_file, inspect_and_text_only_match_full_open,
              every_rn_size_inspects_exactly, malformed_resnets_are_refused,
              negative_running_var_and_size_override, full_load_peak_rss)
