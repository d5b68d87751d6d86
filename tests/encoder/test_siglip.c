/*
** test_siglip.c: SigLIP / SigLIP2 FixRes against the PyTorch reference forwards of
** scripts/siglip_torch.py (fixtures: scripts/make_siglip_fixtures.py, provenance in
** tests/golden/README.md), in both layouts: Hugging Face (config.json +
** preprocessor_config.json, F32 weights in two shards) and an OpenCLIP hub folder
** (open_clip_config.json, timm 'visual.trunk.*' + 'text.*', F16). Token ids go in
** directly (cdb_encode_tokens): the fixture folders carry no tokenizer, and such a
** folder still opens (the text entry point says so; test_tok_spm adds a vocabulary).
** Also: PIL's squash resize, byte-exact, the NaFlex refusal, and the model's
** probability (logit_scale is a log).
*/
#include "encoder/encoder.h"

#define CDB_TEST_TMP_TAG "siglip"
#include "model_test_util.h"

#define GOLD CDB_SOURCE_DIR "/tests/golden/models"
#define PRE CDB_SOURCE_DIR "/tests/golden/siglip_preprocess"
#define MIN_COS 0.99999      /* the bar */
#define TIGHT_COS 0.99999999 /* tells exact from tanh GELU here (1 - cos >= 4e-7) */
#define IMG 48
#define CTX 16
#define E 64

typedef struct fixture {
    const char *name, *naming;
    cdb_act vision_act, text_act;
    cdb_interp interp;
    double rescale;
    float logit_scale, logit_bias;
} fixture;

static const fixture k_fixtures[] = {
    {"siglip_hf", "hf", CDB_ACT_GELU_TANH, CDB_ACT_GELU_TANH, CDB_INTERP_BICUBIC,
     0.00392156862745098, 2.5525851f, -9.5f},
    {"siglip_oc", "openclip-timm", CDB_ACT_GELU, CDB_ACT_GELU_TANH, CDB_INTERP_BILINEAR, 0,
     2.3027344f, -9.9921875f},
};

/* Min cosine of n rows against the expected ones; -2 when encoding failed. */
static double min_cos(const float *got, const float *exp, int n) {
    double c = 2;
    for (int i = 0; i < n; i++) c = fmin(c, cosine(got + (size_t)i * E, exp + (size_t)i * E, E));
    return c;
}

static void run_fixture(cdb_test_ctx *cdb_t_, const fixture *fx) {
    char path[512];
    cdb_model_params p = cdb_model_params_default();
    cdb_model *m = NULL;
    const cdb_model_info *in;
    size_t n_tok, n_px, n_et, n_ei, n_ep;
    int32_t *tok = NULL;
    float *px = NULL, *et = NULL, *ei = NULL, *ep = NULL, *got = NULL, *one = NULL;
    double ct = -2, ci = -2, cp = -2, other = 2;
    int nt, ni, same = 1;

    snprintf(path, sizeof path, "%s/%s", GOLD, fx->name);
    CHECK_OK(cdb_model_open(path, &p, &m));
    if (!m) return;
    in = cdb_model_get_info(m);
    CHECK_EQ_STR(in->family, "SigLIP");
    CHECK_EQ_STR(in->naming, fx->naming);
    CHECK_EQ_INT(in->has_vision, 1);
    CHECK_EQ_INT(in->has_text, 1);
    CHECK_EQ_INT(in->image_size, IMG);
    CHECK_EQ_INT(in->patch_size, 8);
    CHECK_EQ_INT(in->vision_width, 64);
    CHECK_EQ_INT(in->vision_heads, 4);
    CHECK_EQ_INT(in->vision_mlp_width, 176);
    CHECK_EQ_INT(in->text_width, 48);
    CHECK_EQ_INT(in->text_heads, 3);
    CHECK_EQ_INT(in->text_mlp_width, 96);
    CHECK_EQ_INT(in->context_length, CTX);
    CHECK_EQ_INT(in->vocab_size, 300);
    CHECK_EQ_INT(in->embed_dim, E);
    CHECK_EQ_INT((int)in->act, (int)fx->vision_act);
    CHECK_EQ_INT((int)in->text_act, (int)fx->text_act);
    CHECK(fabsf(in->vision_ln_eps - 1e-6f) < 1e-12f && fabsf(in->text_ln_eps - 1e-6f) < 1e-12f);
    CHECK(in->has_logit_scale && in->has_logit_bias);
    CHECK_MSG(fabsf(in->logit_scale - fx->logit_scale) < 1e-5f &&
                  fabsf(in->logit_bias - fx->logit_bias) < 1e-5f,
              "%s: logit_scale %.7g bias %.7g", fx->name, in->logit_scale, in->logit_bias);
    CHECK_EQ_INT((int)in->preprocess.resize, (int)CDB_RESIZE_SQUASH);
    CHECK_EQ_INT((int)in->preprocess.interp, (int)fx->interp);
    CHECK(in->preprocess.rescale_factor == fx->rescale);
    CHECK(in->preprocess.mean[0] == 0.5f && in->preprocess.std[2] == 0.5f);
    /* the fixture folders carry no tokenizer file: they open, text as ids only (with a
    ** .model beside them, text works: test_tok_spm) */
    CHECK(cdb_model_tokenizer(m) == NULL);
    {
        const char *texts[1] = {"a photo of a cat"};
        float v[E];
        CHECK_EQ_INT(cdb_encode_texts(m, texts, 1, 1, v), CDB_UNSUPPORTED);
        CHECK_MSG(strstr(cdb_errmsg(), "no SigLIP tokenizer") != NULL, "%s", cdb_errmsg());
    }

    tok = test_read_file(GOLD "/siglip_tokens.i32", &n_tok);
    px = test_read_file(GOLD "/siglip_pixels.f32", &n_px);
    et = read_golden_f32(GOLD, fx->name, "text", &n_et);
    ei = read_golden_f32(GOLD, fx->name, "image", &n_ei);
    ep = read_golden_f32(GOLD, fx->name, "photo", &n_ep);
    nt = (int)(n_tok / (4 * CTX));
    ni = (int)(n_px / (4 * 3 * IMG * IMG));
    got = malloc((size_t)(nt > ni ? nt : ni) * E * sizeof(float));
    one = malloc(E * sizeof(float));
    if (!tok || !px || !et || !ei || !ep || !got || !one || n_et != (size_t)nt * E * 4 ||
        n_ei != (size_t)ni * E * 4 || n_ep != E * 4 || nt < 2 || ni < 2) {
        CHECK_MSG(0, "%s: fixture files missing or misshapen (tests/golden/README.md)", fx->name);
        goto done;
    }
    if (cdb_encode_tokens(m, tok, nt, 0, got) == CDB_OK) {
        ct = min_cos(got, et, nt);
        for (int i = 0; i < nt; i++) /* one at a time: the batch's bits */
            if (cdb_encode_tokens(m, tok + (size_t)i * CTX, 1, 0, one) != CDB_OK ||
                memcmp(one, got + (size_t)i * E, E * sizeof(float)))
                same = 0;
    }
    if (cdb_encode_pixels(m, px, ni, 0, got) == CDB_OK) {
        ci = min_cos(got, ei, ni);
        for (int i = 0; i < ni; i++)
            if (cdb_encode_pixels(m, px + (size_t)i * 3 * IMG * IMG, 1, 0, one) != CDB_OK ||
                memcmp(one, got + (size_t)i * E, E * sizeof(float)))
                same = 0;
    }
    /* the PNG through decoding, the config's squash resize and rescale, and the tower */
    if (cdb_encode_image_file(m, GOLD "/siglip_photo.png", NULL, 0, one) == CDB_OK)
        cp = min_cos(one, ep, 1);
    printf("     %s: 1 - cosine vs the PyTorch reference: texts %.2g, images %.2g, PNG %.2g\n",
           fx->name, 1 - ct, 1 - ci, 1 - cp);
    CHECK_MSG(ct >= MIN_COS && ci >= MIN_COS && cp >= MIN_COS,
              "%s: min cosine texts %.9f images %.9f PNG %.9f (-2: failed: %s)", fx->name, ct, ci,
              cp, cdb_errmsg());
    CHECK_MSG(ct >= TIGHT_COS && ci >= TIGHT_COS && cp >= TIGHT_COS,
              "%s: min cosine %.10f / %.10f / %.10f < %.8f", fx->name, ct, ci, cp, TIGHT_COS);
    CHECK_MSG(same, "%s: one at a time differs from the batch", fx->name);

    /* The fixture tells the GELUs apart: forcing the other one fails the tight bound. */
    cdb_model_close(m);
    m = NULL;
    p.act = fx->vision_act == CDB_ACT_GELU ? CDB_ACT_GELU_TANH : CDB_ACT_GELU;
    snprintf(path, sizeof path, "%s/%s", GOLD, fx->name);
    if (cdb_model_open(path, &p, &m) == CDB_OK && cdb_encode_pixels(m, px, ni, 0, got) == CDB_OK)
        other = min_cos(got, ei, ni);
    CHECK_MSG(other < TIGHT_COS, "%s: the other GELU still reaches cosine %.10f", fx->name, other);
done:
    cdb_model_close(m);
    free(tok), free(px), free(et), free(ei), free(ep), free(got), free(one);
}

CDB_TEST(golden_siglip_hf_sharded) { run_fixture(cdb_t_, &k_fixtures[0]); }

CDB_TEST(golden_siglip_openclip_timm) { run_fixture(cdb_t_, &k_fixtures[1]); }

/* The image tower alone, and inspect-only, describe the same model. */
CDB_TEST(siglip_load_parts) {
    for (size_t f = 0; f < 2; f++) {
        char path[512];
        cdb_model_params p = cdb_model_params_default();
        cdb_model *m = NULL;
        snprintf(path, sizeof path, "%s/%s", GOLD, k_fixtures[f].name);
        p.load_text = 0;
        CHECK_OK(cdb_model_open(path, &p, &m));
        if (m) {
            CHECK_EQ_INT(cdb_model_get_info(m)->has_text, 0);
            CHECK_EQ_INT(cdb_model_get_info(m)->embed_dim, E);
        }
        cdb_model_close(m);
        m = NULL;
        p = cdb_model_params_default();
        p.inspect_only = 1;
        CHECK_OK(cdb_model_open(path, &p, &m));
        if (m) {
            CHECK_EQ_STR(cdb_model_get_info(m)->family, "SigLIP");
            CHECK(cdb_model_get_info(m)->has_logit_bias);
        }
        cdb_model_close(m);
    }
}

/* NaFlex: a config.json saying siglip2 (Siglip2Model) is refused with a message. */
/* The model's probability (cdb_model_match_probability) reads logit_scale as the log
** it is stored as: scripts/make_siglip_fixtures.py sets the Hugging Face model's to
** log(10) + 0.25 (a scale of 10 e^0.25 = 12.84) and keeps OpenCLIP's initial log(10)
** (F16), as both references do (their forward multiplies by logit_scale.exp()). Read
** as a plain factor it would give sigmoid(2.55 - 9.5) ~ 0.001 at cos 1, not 0.966. A
** CLIP model (no bias) has none. */
CDB_TEST(siglip_probability) {
    static const double scale[2] = {12.840254166877415 /* 10 e^0.25 */, 10.0};
    static const float cosines[] = {-1.0f, -0.2f, 0.0f, 0.3f, 0.6f, 0.74f, 1.0f};
    for (size_t f = 0; f < 2; f++) {
        char path[512];
        cdb_model_params p = cdb_model_params_default();
        cdb_model *m = NULL;
        p.inspect_only = 1;
        snprintf(path, sizeof path, "%s/%s", GOLD, k_fixtures[f].name);
        CHECK_OK(cdb_model_open(path, &p, &m));
        if (!m) continue;
        for (size_t i = 0; i < sizeof cosines / sizeof cosines[0]; i++) {
            double want = 1 / (1 + exp(-(scale[f] * cosines[i] + k_fixtures[f].logit_bias)));
            float got = -1;
            CHECK(cdb_model_match_probability(cdb_model_get_info(m), cosines[i], &got));
            /* F16's rounding of log(10) moves OpenCLIP's scale by 2e-4 of itself */
            CHECK_MSG(fabs(got - want) <= 3e-3 * want + 1e-6, "%s: cos %g: %.7g, want %.7g",
                      k_fixtures[f].name, cosines[i], got, want);
        }
        cdb_model_close(m);
    }
    {
        cdb_model_params p = cdb_model_params_default();
        cdb_model *m = NULL;
        float got = -1;
        p.inspect_only = 1;
        CHECK_OK(cdb_model_open(GOLD "/openai_qgelu", &p, &m));
        if (m) CHECK(!cdb_model_match_probability(cdb_model_get_info(m), 0.5f, &got));
        CHECK(got == -1);
        cdb_model_close(m);
    }
}

CDB_TEST(siglip2_naflex_refused) {
    char dir[300], src[512], dst[400];
    cdb_model *m = NULL;
    json_t *cfg = json_pack("{s:s, s:[s]}", "model_type", "siglip2", "architectures",
                            "Siglip2Model");
    snprintf(dir, sizeof dir, "%s/naflex", tmpdir());
    CHECK(mkdir(dir, 0755) == 0);
    for (int k = 1; k <= 2; k++) {
        snprintf(src, sizeof src, "%s/siglip_hf/model-%05d-of-00002.safetensors", GOLD, k);
        snprintf(dst, sizeof dst, "%s/model-%05d-of-00002.safetensors", dir, k);
        CHECK(symlink(src, dst) == 0);
    }
    CHECK(write_json(dir, "config.json", cfg)); /* takes cfg */
    CHECK_EQ_INT(cdb_model_open(dir, NULL, &m), CDB_UNSUPPORTED);
    CHECK_MSG(strstr(cdb_errmsg(), "NaFlex") != NULL, "%s", cdb_errmsg());
    CHECK(m == NULL);
}

/* PIL's resize to size x size (no crop), bicubic and bilinear, byte-exact, in the
** image's own mode then RGB (OpenCLIP's order); and both float paths. */
CDB_TEST(squash_resize_matches_pil) {
    FILE *f = fopen(PRE "/manifest.txt", "r");
    char line[512];
    int n_cases = 0;
    CHECK(f != NULL);
    if (!f) return;
    while (fgets(line, sizeof line, f)) {
        char in_name[128], exp_name[128], path[512];
        int size, interp;
        cdb_image *img = NULL;
        if (line[0] == '#' || sscanf(line, "%127s %d %d %127s", in_name, &size, &interp, exp_name) != 4)
            continue;
        snprintf(path, sizeof path, "%s/%s", PRE, in_name);
        CHECK_OK(cdb_image_load(path, NULL, &img));
        if (!img) continue;
        cdb_preprocess_params pp = cdb_preprocess_params_default();
        size_t n_exp;
        uint8_t *exp, *rgb = malloc((size_t)size * size * 3);
        float *px = malloc((size_t)3 * size * size * sizeof(float));
        pp.size = size;
        pp.interp = interp ? CDB_INTERP_BILINEAR : CDB_INTERP_BICUBIC;
        pp.resize = CDB_RESIZE_SQUASH;
        snprintf(path, sizeof path, "%s/%s", PRE, exp_name);
        exp = test_read_file(path, &n_exp);
        CHECK_OK(cdb_image_preprocess(img, &pp, px, rgb));
        CHECK_MSG(exp && n_exp == (size_t)size * size * 3 && !memcmp(exp, rgb, n_exp),
                  "%s: squash %d %s differs from PIL", in_name, size, interp ? "bilinear" : "bicubic");
        n_cases++;
        free(exp), free(rgb), free(px);
        cdb_image_free(img);
    }
    fclose(f);
    CHECK_MSG(n_cases >= 24, "%d cases", n_cases);
    /* floats: Hugging Face's rescale and torchvision's ToTensor, each as its reference */
    for (int hf = 0; hf < 2; hf++) {
        cdb_image *img = NULL;
        cdb_preprocess_params pp = cdb_preprocess_params_default();
        float px[3 * 48 * 48];
        size_t n;
        float *exp =
            test_read_file(hf ? PRE "/rgb_61x37_s48_hf.f32" : PRE "/rgb_61x37_s48_oc.f32", &n);
        double max_d = 0;
        pp.size = 48;
        pp.resize = CDB_RESIZE_SQUASH;
        pp.rescale_factor = hf ? 0.00392156862745098 : 0;
        for (int c = 0; c < 3; c++) pp.mean[c] = pp.std[c] = 0.5f;
        CHECK_OK(cdb_image_load(PRE "/rgb_61x37.png", NULL, &img));
        CHECK_OK(cdb_image_preprocess(img, &pp, px, NULL));
        CHECK(exp && n == sizeof px);
        for (size_t i = 0; exp && i < n / 4; i++) max_d = fmax(max_d, fabs(px[i] - exp[i]));
        CHECK_MSG(max_d == 0, "%s floats: max |diff| %g", hf ? "HF" : "OpenCLIP", max_d);
        free(exp);
        cdb_image_free(img);
    }
}

CDB_TEST_MAIN(golden_siglip_hf_sharded, golden_siglip_openclip_timm, siglip_load_parts,
              siglip_probability, siglip2_naflex_refused, squash_resize_matches_pil)
