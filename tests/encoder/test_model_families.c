/*
** test_model_families.c: every ViT CLIP size loads (issue #3): B/32, B/16, L/14,
** L/14-336, H/14 and bigG/14, in the key namings each exists in (OpenAI naming as
** OpenAI released them and as OpenCLIP ships H/14 and bigG with their
** open_clip_config.json; Hugging Face CLIPModel naming with config.json as on the
** hub, e.g. openai/clip-vit-large-patch14-336, laion/CLIP-ViT-bigG-14-laion2B-39B-b160k).
**
** Part 1, real sizes, no real weights: each case writes a safetensors file with the
** real tensor names, dtypes and shapes (F16 weights, F32 logit_scale, I64
** position_ids where HF files have them) and its real config files, whose data
** region is a hole (header written, then ftruncate to the full size: bigG is a
** 4.7 GiB file that uses no disk). clipdb opens it with params.inspect_only, which
** runs every header/offset/dtype/shape/config check of a full open without reading
** a weight byte, and the test compares every inferred field (widths, layers, heads,
** MLP widths, patch, image size, context, vocabulary, embed dim, activation and its
** source, preprocessing size) with the family's real architecture. Parameter counts
** are checked twice: against this file's formula and against OpenCLIP's published
** totals (151.28M ... 2539.57M), which pins the shape table itself. Peak RSS must
** stay flat (nothing is read), and a truncated or misshapen bigG must still fail.
** Config variants: none (a lone file), OpenCLIP's, transformers' (full sections,
** _dict-only sections as older configs), and bigG's HF weights in two shards.
**
** Part 2, the forward-graph features those sizes need, numerically: two small
** random models from tests/reference/make_family_fixtures.py (PyTorch, float64)
** with head width 20 / 8 (heads != width / 64, from the configs), MLP widths not
** 4 * width (as bigG's 8192 = 4.9231 * 1664), patch 14 and a 56-pixel input (17
** positions, as L/14-336's 577): cosine >= 0.99999 per embedding, as test_model.c.
**
** Also: an inspect-only open of the golden fixtures describes them exactly as a
** full open does, and cannot encode.
*/
#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cdb_test.h"
#include "encoder/encoder.h"
#define CDB_TEST_TMP_TAG "families"
#include "model_test_util.h"

#define GOLD CDB_SOURCE_DIR "/tests/golden/models"
#define MIN_COS 0.99999      /* the bar */
#define TIGHT_COS 0.99999999 /* tells QuickGELU from GELU here */

static const float k_openai_mean[3] = {0.48145466f, 0.4578275f, 0.40821073f};
static const float k_openai_std[3] = {0.26862954f, 0.26130258f, 0.27577711f};

/* ---- the families ---------------------------------------------------------------- */

typedef struct family {
    const char *name;     /* OpenCLIP's model name */
    const char *hf_repo;  /* the Hugging Face CLIPModel checkpoint of this size */
    int patch, image;
    int vw, vl, vheads, vmlp; /* image tower */
    int tw, tl, theads, tmlp; /* text tower */
    int embed;
    int openai;           /* 1: OpenAI-trained (QuickGELU); 0: LAION/OpenCLIP (GELU) */
    double published_m;   /* total parameters in millions (OpenCLIP's model profile,
                             logit_scale included) */
} family;

#define VOCAB 49408
#define CTX 77

static const family k_fam[] = {
    {"ViT-B-32", "openai/clip-vit-base-patch32", 32, 224, 768, 12, 12, 3072, 512, 12, 8, 2048,
     512, 1, 151.28},
    {"ViT-B-16", "openai/clip-vit-base-patch16", 16, 224, 768, 12, 12, 3072, 512, 12, 8, 2048,
     512, 1, 149.62},
    {"ViT-L-14", "openai/clip-vit-large-patch14", 14, 224, 1024, 24, 16, 4096, 768, 12, 12, 3072,
     768, 1, 427.62},
    {"ViT-L-14-336", "openai/clip-vit-large-patch14-336", 14, 336, 1024, 24, 16, 4096, 768, 12,
     12, 3072, 768, 1, 427.94},
    {"ViT-H-14", "laion/CLIP-ViT-H-14-laion2B-s32B-b79K", 14, 224, 1280, 32, 16, 5120, 1024, 24,
     16, 4096, 1024, 0, 986.11},
    {"ViT-bigG-14", "laion/CLIP-ViT-bigG-14-laion2B-39B-b160k", 14, 224, 1664, 48, 16, 8192,
     1280, 32, 20, 5120, 1280, 0, 2539.57},
};
enum { F_B32, F_B16, F_L14, F_L14_336, F_H14, F_BIGG, N_FAM };

/* One pre-LN residual block: ln_1, in_proj (3W x W + 3W), out_proj, ln_2, fc, proj. */
static int64_t block_params(int64_t w, int64_t m) { return 4 * w * w + 9 * w + 2 * m * w + m; }

/* What the towers use (logit_scale and position_ids excluded). */
static int64_t family_params(const family *f) {
    int64_t g = f->image / f->patch, w = f->vw, t = f->tw;
    int64_t v = w * 3 * f->patch * f->patch + w + (g * g + 1) * w + 2 * w +
                f->vl * block_params(w, f->vmlp) + 2 * w + w * f->embed;
    int64_t x = (int64_t)VOCAB * t + CTX * t + f->tl * block_params(t, f->tmlp) + 2 * t +
                t * f->embed;
    return v + x;
}



/* Mutations of the real layout, for the "still validated" checks. */
enum { MUT_NONE = 0, MUT_TRUNCATE = 1, MUT_BAD_MLP = 2 };


/* The family's state_dict in one naming, as a header; data = a hole. path2 (HF only,
** may be NULL): shard the text tower into a second file, as the hub's
** model-0000N-of-00002.safetensors. */
static int write_sparse2(const char *path, const char *path2, const family *f, int hf, int mut) {
    st_writer w2 = {json_object(), 0, NULL};
    st_writer w = {json_object(), 0, path2 ? &w2 : NULL};
    int64_t W = f->vw, T = f->tw, E = f->embed, P = f->patch, G = f->image / f->patch;
    int64_t S = G * G + 1;
    char pre[128];
    int ok;

    if (hf) {
        st_add(&w, "F16", 2, 4, (int64_t[]){W, 3, P, P},
               "vision_model.embeddings.patch_embedding.weight");
        T1(&w, W, "vision_model.embeddings.class_embedding");
        T2(&w, S, W, "vision_model.embeddings.position_embedding.weight");
        st_add(&w, "I64", 8, 2, (int64_t[]){1, S}, "vision_model.embeddings.position_ids");
        T1(&w, W, "vision_model.pre_layrnorm.weight");
        T1(&w, W, "vision_model.pre_layrnorm.bias");
        for (int i = 0; i < f->vl; i++) {
            snprintf(pre, sizeof pre, "vision_model.encoder.layers.%d.", i);
            add_block(&w, pre, W, mut == MUT_BAD_MLP && i == f->vl - 1 ? f->vmlp - 1 : f->vmlp, 1);
        }
        T1(&w, W, "vision_model.post_layernorm.weight");
        T1(&w, W, "vision_model.post_layernorm.bias");
        T2(&w, E, W, "visual_projection.weight");
        T2(&w, VOCAB, T, "text_model.embeddings.token_embedding.weight");
        T2(&w, CTX, T, "text_model.embeddings.position_embedding.weight");
        st_add(&w, "I64", 8, 2, (int64_t[]){1, CTX}, "text_model.embeddings.position_ids");
        for (int i = 0; i < f->tl; i++) {
            snprintf(pre, sizeof pre, "text_model.encoder.layers.%d.", i);
            add_block(&w, pre, T, f->tmlp, 1);
        }
        T1(&w, T, "text_model.final_layer_norm.weight");
        T1(&w, T, "text_model.final_layer_norm.bias");
        T2(&w, E, T, "text_projection.weight");
    } else {
        add_openai_vit(&w, W, P, G, f->vl, f->vmlp, mut == MUT_BAD_MLP ? f->vmlp - 1 : f->vmlp, E);
        add_openai_text(&w, VOCAB, CTX, T, f->tl, f->tmlp, E);
    }
    st_add(&w, "F32", 4, 0, NULL, "logit_scale");
    ok = write_header(path, &w, mut == MUT_TRUNCATE);
    if (path2) ok = write_header(path2, &w2, 0) && ok;
    else json_decref(w2.hdr);
    return ok;
}

static int write_sparse(const char *path, const family *f, int hf, int mut) {
    return write_sparse2(path, NULL, f, hf, mut);
}

/* ---- the configs, as the hub has them ------------------------------------------------ */

enum cfg_kind {
    CFG_NONE = 0,     /* a lone .safetensors file */
    CFG_OPENCLIP = 1, /* open_clip_config.json (hf-hub:laion/..., timm/...openai) */
    CFG_HF = 2,       /* config.json + preprocessor_config.json (transformers) */
    CFG_HF_DICT = 3,  /* config.json with only vision_config_dict / text_config_dict */
    CFG_HF_SHARDED = 4 /* config.json, weights in model-0000{1,2}-of-00002.safetensors */
};


static int write_configs(const char *dir, const family *f, int kind) {
    const char *act = f->openai ? "quick_gelu" : "gelu";
    if (kind == CFG_OPENCLIP) {
        /* OpenCLIP's model_configs/<name>.json wrapped as on the hub. H/14: head_width
        ** 80; bigG: head_width 104, mlp_ratio 4.9231 (int(1664 * 4.9231) = 8192). */
        json_t *vc = json_pack("{sisisisi}", "image_size", f->image, "layers", f->vl, "width",
                               f->vw, "patch_size", f->patch);
        json_t *mc;
        if (f->vw / f->vheads != 64) json_object_set_new(vc, "head_width", json_integer(f->vw / f->vheads));
        if (f->vmlp != 4 * f->vw) json_object_set_new(vc, "mlp_ratio", json_real(4.9231));
        mc = json_pack("{sisos{sisisisisi}}", "embed_dim", f->embed, "vision_cfg", vc, "text_cfg",
                       "context_length", CTX, "vocab_size", VOCAB, "width", f->tw, "heads",
                       f->theads, "layers", f->tl);
        if (f->openai) json_object_set_new(mc, "quick_gelu", json_true());
        return write_json(dir, "open_clip_config.json",
                          json_pack("{sos{soso}}", "model_cfg", mc, "preprocess_cfg", "mean",
                                    floats3(k_openai_mean), "std", floats3(k_openai_std)));
    }
    if (kind == CFG_HF || kind == CFG_HF_DICT || kind == CFG_HF_SHARDED) {
        json_t *tc = json_pack("{sssisisisisisisi}", "hidden_act", act, "hidden_size", f->tw,
                               "intermediate_size", f->tmlp, "num_attention_heads", f->theads,
                               "num_hidden_layers", f->tl, "max_position_embeddings", CTX,
                               "vocab_size", VOCAB, "projection_dim", f->embed);
        json_t *vc = json_pack("{sssisisisisisisi}", "hidden_act", act, "hidden_size", f->vw,
                               "intermediate_size", f->vmlp, "num_attention_heads", f->vheads,
                               "num_hidden_layers", f->vl, "image_size", f->image, "patch_size",
                               f->patch, "projection_dim", f->embed);
        json_t *root = json_pack("{s[s]sssssisf}", "architectures", "CLIPModel", "model_type",
                                 "clip", "_name_or_path", f->hf_repo, "projection_dim", f->embed,
                                 "logit_scale_init_value", 2.6592);
        if (kind == CFG_HF_DICT) {
            json_object_set_new(root, "text_config_dict", tc);
            json_object_set_new(root, "vision_config_dict", vc);
        } else if (f->openai) {
            /* openai/clip-vit-*: the full configs, null _dicts */
            json_object_set_new(root, "text_config", tc);
            json_object_set_new(root, "vision_config", vc);
            json_object_set_new(root, "text_config_dict", json_null());
            json_object_set_new(root, "vision_config_dict", json_null());
        } else {
            /* laion/CLIP-ViT-*: both, the _dicts holding the non-default fields */
            json_object_set_new(root, "text_config", json_deep_copy(tc));
            json_object_set_new(root, "vision_config", json_deep_copy(vc));
            json_object_del(tc, "max_position_embeddings");
            json_object_del(tc, "vocab_size");
            json_object_del(vc, "image_size");
            json_object_set_new(root, "text_config_dict", tc);
            json_object_set_new(root, "vision_config_dict", vc);
        }
        if (!write_json(dir, "config.json", root)) return 0;
        return write_json(dir, "preprocessor_config.json",
                          json_pack("{sisisisosososssb}", "crop_size", f->image, "size", f->image,
                                    "resample", 3, "image_mean", floats3(k_openai_mean),
                                    "image_std", floats3(k_openai_std), "do_normalize",
                                    json_true(), "do_center_crop", json_true(),
                                    "feature_extractor_type", "CLIPFeatureExtractor",
                                    "do_resize", 1));
    }
    return 1;
}

/* ---- part 1: every family, inspect-only -------------------------------------------------- */

typedef struct fcase {
    int fam, hf, cfg;
    cdb_act act;          /* what clipdb must pick */
    const char *act_src;  /* substring of info.act_source */
} fcase;

static const fcase k_cases[] = {
    /* OpenAI's four, OpenAI naming: a bare file (QuickGELU and width/64 heads are
    ** OpenAI's own values), and as OpenCLIP/timm ship them */
    {F_B32, 0, CFG_NONE, CDB_ACT_QUICK_GELU, "default"},
    {F_B32, 0, CFG_OPENCLIP, CDB_ACT_QUICK_GELU, "open_clip_config.json"},
    {F_B16, 0, CFG_NONE, CDB_ACT_QUICK_GELU, "default"},
    {F_B16, 0, CFG_OPENCLIP, CDB_ACT_QUICK_GELU, "open_clip_config.json"},
    {F_L14, 0, CFG_NONE, CDB_ACT_QUICK_GELU, "default"},
    {F_L14, 0, CFG_OPENCLIP, CDB_ACT_QUICK_GELU, "open_clip_config.json"},
    {F_L14_336, 0, CFG_NONE, CDB_ACT_QUICK_GELU, "default"},
    {F_L14_336, 0, CFG_OPENCLIP, CDB_ACT_QUICK_GELU, "open_clip_config.json"},
    /* OpenCLIP's H/14 and bigG/14 (laion2b), OpenAI naming + open_clip_config.json */
    {F_H14, 0, CFG_OPENCLIP, CDB_ACT_GELU, "open_clip_config.json"},
    {F_BIGG, 0, CFG_OPENCLIP, CDB_ACT_GELU, "open_clip_config.json"},
    /* Hugging Face CLIPModel, all six */
    {F_B32, 1, CFG_HF, CDB_ACT_QUICK_GELU, "config.json"},
    {F_B16, 1, CFG_HF, CDB_ACT_QUICK_GELU, "config.json"},
    {F_L14, 1, CFG_HF, CDB_ACT_QUICK_GELU, "config.json"},
    {F_L14_336, 1, CFG_HF, CDB_ACT_QUICK_GELU, "config.json"},
    {F_H14, 1, CFG_HF, CDB_ACT_GELU, "config.json"},
    {F_BIGG, 1, CFG_HF, CDB_ACT_GELU, "config.json"},
    /* older transformers configs: only the _dict sections */
    {F_H14, 1, CFG_HF_DICT, CDB_ACT_GELU, "config.json"},
    {F_BIGG, 1, CFG_HF_DICT, CDB_ACT_GELU, "config.json"},
    /* sharded, as laion/CLIP-ViT-bigG-14-laion2B-39B-b160k's HF weights */
    {F_BIGG, 1, CFG_HF_SHARDED, CDB_ACT_GELU, "config.json"},
    /* H/14 and bigG weights with no config at all: the shapes still give everything
    ** but the activation (assumed QuickGELU, named as assumed; these are GELU models)
    ** and the image heads (16, from the known ViT-H/g/bigG widths) */
    {F_H14, 0, CFG_NONE, CDB_ACT_QUICK_GELU, "default"},
    {F_BIGG, 1, CFG_NONE, CDB_ACT_QUICK_GELU, "default"},
};


/* The architecture in reports f's shapes, a vocabulary of vocab and a context of CTX,
** and preprocessing to f's image size. */
static void check_shapes(cdb_test_ctx *cdb_t_, const cdb_model_info *in, const family *f,
                         int vocab) {
    CHECK_EQ_INT(in->image_size, f->image);
    CHECK_EQ_INT(in->patch_size, f->patch);
    CHECK_EQ_INT(in->vision_width, f->vw);
    CHECK_EQ_INT(in->vision_layers, f->vl);
    CHECK_EQ_INT(in->vision_heads, f->vheads);
    CHECK_EQ_INT(in->vision_mlp_width, f->vmlp);
    CHECK_EQ_INT(in->context_length, CTX);
    CHECK_EQ_INT(in->vocab_size, vocab);
    CHECK_EQ_INT(in->text_width, f->tw);
    CHECK_EQ_INT(in->text_layers, f->tl);
    CHECK_EQ_INT(in->text_heads, f->theads);
    CHECK_EQ_INT(in->text_mlp_width, f->tmlp);
    CHECK_EQ_INT(in->embed_dim, f->embed);
    CHECK_EQ_INT(in->preprocess.size, f->image);
}

static void run_case(cdb_test_ctx *cdb_t_, const fcase *fc, int idx) {
    const family *f = &k_fam[fc->fam];
    char dir[512], file[600], file2[600];
    const char *open_path;
    cdb_model_params p = cdb_model_params_default();
    cdb_model *m = NULL;
    const cdb_model_info *in;
    struct stat st;
    int64_t want = family_params(f);
    float px[1];
    double ms = 0;
    long rss = 0;
    int64_t cached;

    CHECK(tmpdir()[0]);
    snprintf(dir, sizeof dir, "%s/case%02d", tmpdir(), idx);
    CHECK(mkdir(dir, 0700) == 0);
    snprintf(file, sizeof file, "%s/%s", dir,
             fc->cfg == CFG_NONE ? "weights.safetensors"
             : fc->cfg == CFG_OPENCLIP ? "open_clip_model.safetensors"
             : fc->cfg == CFG_HF_SHARDED ? "model-00001-of-00002.safetensors" : "model.safetensors");
    snprintf(file2, sizeof file2, "%s/model-00002-of-00002.safetensors", dir);
    CHECK(write_sparse2(file, fc->cfg == CFG_HF_SHARDED ? file2 : NULL, f, fc->hf, MUT_NONE));
    CHECK(write_configs(dir, f, fc->cfg));
    CHECK(stat(file, &st) == 0);
    /* The data really is a hole: at most a few blocks on disk. */
    CHECK_MSG((int64_t)st.st_blocks * 512 < ((int64_t)4 << 20), "%s: %lld bytes allocated",
              file, (long long)st.st_blocks * 512);
    open_path = fc->cfg == CFG_NONE ? file : dir;

    p.inspect_only = 1;
    p.n_threads = 1;
    CHECK_OK(open_measured(open_path, &p, &m, &rss, &ms));
    cached = cached_bytes(file);
    in = cdb_model_get_info(m);
    CHECK_EQ_STR(in->naming, fc->hf ? "hf" : "openai");
    CHECK_EQ_STR(in->weights_dtype, "F16");
    CHECK_EQ_INT(in->act, fc->act);
    CHECK_MSG(strstr(in->act_source, fc->act_src) != NULL, "%s: act_source '%s'", f->name,
              in->act_source);
    CHECK(in->has_vision && in->has_text);
    check_shapes(cdb_t_, in, f, VOCAB);
    CHECK_NEAR(in->preprocess.mean[0], k_openai_mean[0], 1e-7);
    CHECK_NEAR(in->preprocess.std[2], k_openai_std[2], 1e-7);
    CHECK_EQ_INT(in->preprocess.interp, CDB_INTERP_BICUBIC);
    CHECK_MSG(in->n_params == want, "%s: n_params %lld, want %lld", f->name,
              (long long)in->n_params, (long long)want);
    /* The published total (with logit_scale) to its 2 decimals: the table is real. */
    CHECK_MSG(fabs((double)(in->n_params + 1) / 1e6 - f->published_m) < 0.005,
              "%s: %.4fM parameters, published %.2fM", f->name,
              (double)(in->n_params + 1) / 1e6, f->published_m);
    CHECK(in->weights_f32_bytes == 4 * want);
    CHECK_EQ_INT(in->inspect_only, 1);
    CHECK_EQ_STR(in->hash, "");
    CHECK(strlen(in->files_key) == 32);
    CHECK(cdb_model_tokenizer(m) != NULL); /* the standard vocabulary fits 49408 */
    CHECK_RC(cdb_encode_pixels(m, px, 1, 1, px), CDB_INVALID);
    cdb_model_close(m);
    /* Nothing was read: a full open would add the fp32 weights (0.6 GB for B/32,
    ** 10 GB for bigG) and fault in the file. The bound leaves room for ASan's
    ** shadow and quarantine (an ordinary build grows by a few MB). */
    CHECK_MSG(rss < 512 * 1024, "%s: peak RSS grew by %ld KiB", f->name, rss);
    /* Nor streamed (a hash drops each step from the RSS, not from the page cache):
    ** only the header's pages (and the kernel's readahead around them) are cached. */
    CHECK_MSG(cached >= 0 && cached < ((int64_t)8 << 20), "%s: %lld bytes of the file cached",
              f->name, (long long)cached);
    printf("     %-12s %-6s %-22s %4d px %8.2fM params %5.2f GiB (sparse) %-10s open %3.0f ms "
           "+%.0f MiB, %.2f MiB read\n",
           f->name, fc->hf ? "hf" : "openai",
           fc->cfg == CFG_NONE ? "no config" : fc->cfg == CFG_OPENCLIP ? "open_clip_config.json"
           : fc->cfg == CFG_HF ? "config.json"
           : fc->cfg == CFG_HF_DICT ? "config.json (_dict)" : "config.json, 2 shards",
           f->image, (double)(want + 1) / 1e6, (double)st.st_size / (1 << 30),
           fc->act == CDB_ACT_GELU ? "gelu" : "quick_gelu", ms, (double)rss / 1024,
           (double)cached / (1 << 20));
    unlink(file);
    unlink(file2);
}

CDB_TEST(every_family_every_naming_inspects_exactly) {
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++) {
        cdb_test_ctx sub = {0, 0};
        run_case(&sub, &k_cases[i], (int)i);
        if (sub.failed) CDB_TEST_FAIL_("case %zu (%s, %s) failed", i, k_fam[k_cases[i].fam].name,
                                       k_cases[i].hf ? "hf" : "openai");
    }
}

/* An inspect-only open is not a weaker check: what a full open refuses, it refuses. */
CDB_TEST(inspect_still_validates_bigG) {
    const family *f = &k_fam[F_BIGG];
    char file[600];
    cdb_model_params p = cdb_model_params_default();
    cdb_model *m = NULL;
    p.inspect_only = 1;
    CHECK(tmpdir()[0]);
    for (int hf = 0; hf < 2; hf++) {
        snprintf(file, sizeof file, "%s/bigG_truncated_%d.safetensors", tmpdir(), hf);
        CHECK(write_sparse(file, f, hf, MUT_TRUNCATE));
        CHECK_RC(cdb_model_open(file, &p, &m), CDB_CORRUPT);
        CHECK(m == NULL && strstr(cdb_errmsg(), "truncated") != NULL);
        unlink(file);
        snprintf(file, sizeof file, "%s/bigG_bad_mlp_%d.safetensors", tmpdir(), hf);
        CHECK(write_sparse(file, f, hf, MUT_BAD_MLP));
        CHECK_RC(cdb_model_open(file, &p, &m), CDB_CORRUPT);
        CHECK(m == NULL && strstr(cdb_errmsg(), "shape[") != NULL);
        unlink(file);
    }
}

/* Not in ctest's way (skips unless asked): a full load of a sparse real-size file,
** to see the loader's memory plan. CLIPDB_FULL_LOAD=ViT-L-14 (or another family
** name; ViT-bigG-14 needs ~10.5 GB of RAM) ./test_model_families full_load_peak_rss
** Weights are zeros, so the embeddings are zeros: this measures memory, not math. */
CDB_TEST(full_load_peak_rss) {
    const char *want = getenv("CLIPDB_FULL_LOAD");
    char file[600], label[64];
    if (!want || !*want) CDB_SKIP("set CLIPDB_FULL_LOAD=ViT-L-14 (a family name) to run");
    const family *f = NULL;
    for (int i = 0; i < N_FAM && !f; i++) f = strcmp(k_fam[i].name, want) ? NULL : &k_fam[i];
    CHECK_MSG(f != NULL, "unknown family '%s'", want);
    for (int hf = 0; hf < 2; hf++) { /* the second's peak is not hidden by the first's */
        CHECK(tmpdir()[0]);
        snprintf(file, sizeof file, "%s/full_%d.safetensors", tmpdir(), hf);
        snprintf(label, sizeof label, "%s %s", f->name, hf ? "hf" : "openai");
        CHECK(write_sparse(file, f, hf, MUT_NONE));
        CHECK_CALL(full_load_measure(cdb_t_, file, label, 0));
    }
}

/* ---- inspect == full on the golden fixtures ------------------------------------------ */

CDB_TEST(inspect_matches_full_open) {
    static const char *models[] = {"openai_qgelu", "hf_gelu", "openai_f16.safetensors", "hf_bf16",
                                   "fam_openclip", "fam_hf"};
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        cdb_model *a = NULL, *b = NULL;
        float px[1];
        CHECK_CALL(open_full_and_inspect(cdb_t_, GOLD, models[i], &a, &b));
        const cdb_model_info *x = cdb_model_get_info(a), *y = cdb_model_get_info(b);
        CHECK_EQ_INT(x->inspect_only, 0);
        CHECK_EQ_INT(y->inspect_only, 1);
        CHECK_EQ_STR(y->hash, "");
        CHECK_EQ_INT(strlen(x->hash), 32);
#define SAME(field) CHECK_EQ_INT(x->field, y->field)
        SAME(embed_dim); SAME(image_size); SAME(patch_size); SAME(vision_width);
        SAME(vision_layers); SAME(vision_heads); SAME(vision_mlp_width); SAME(context_length);
        SAME(vocab_size); SAME(text_width); SAME(text_layers); SAME(text_heads);
        SAME(text_mlp_width); SAME(act); SAME(has_vision); SAME(has_text);
        SAME(preprocess.size); SAME(preprocess.interp);
#undef SAME
        CHECK(x->n_params == y->n_params && x->n_params > 0);
        CHECK_EQ_STR(x->act_source, y->act_source);
        CHECK_EQ_STR(x->naming, y->naming);
        CHECK_EQ_STR(x->weights_dtype, y->weights_dtype);
        CHECK_EQ_STR(x->files_key, y->files_key);
        CHECK(!memcmp(x->preprocess.mean, y->preprocess.mean, sizeof x->preprocess.mean));
        CHECK(!memcmp(x->preprocess.std, y->preprocess.std, sizeof x->preprocess.std));
        CHECK_RC(cdb_encode_pixels(b, px, 1, 1, px), CDB_INVALID);
        {
            int32_t ids[77] = {0};
            CHECK_RC(cdb_encode_tokens(b, ids, 1, 1, px), CDB_INVALID);
        }
        /* A caller's recorded hash is still honoured (the files are unchanged). */
        char path[600];
        cdb_model_params p = cdb_model_params_default();
        cdb_model_close(b);
        b = NULL;
        snprintf(path, sizeof path, "%s/%s", GOLD, models[i]);
        p.n_threads = 1;
        p.inspect_only = 1;
        p.known_hash = x->hash;
        p.known_files_key = x->files_key;
        CHECK_OK(cdb_model_open(path, &p, &b));
        CHECK_EQ_STR(cdb_model_get_info(b)->hash, x->hash);
        CHECK_EQ_INT(cdb_model_get_info(b)->hash_trusted, 1);
        cdb_model_close(a);
        cdb_model_close(b);
    }
}

/* ---- part 2: the graph features, against PyTorch ---------------------------------------- */


/* The shapes of tests/reference/make_family_fixtures.py. */
static const family k_fx = {
    .name = "make_family_fixtures.py", .patch = 14, .image = 56,
    .vw = 40, .vl = 2, .vheads = 2, /* head width 20: 40 / 64 is not even an integer */
    .vmlp = 196,                    /* int(40 * 4.9231), bigG's ratio */
    .tw = 48, .tl = 2, .theads = 6, /* head width 8: not 48 / 64 */
    .tmlp = 160, .embed = 24};
#define FX_VOCAB 300

static void run_family_fixture(cdb_test_ctx *cdb_t_, const char *name, const char *naming,
                               cdb_act act) {
    char path[600];
    cdb_model *m = NULL;
    const cdb_model_info *in;
    size_t n_tok, n_px, n_et, n_ei;
    int32_t *tokens = NULL;
    float *pixels = NULL, *exp_t = NULL, *exp_i = NULL, *got = NULL;
    int nt, ni, E = k_fx.embed;
    double min_t = 1, min_i = 1, min_other = 1;
    cdb_model_params p = cdb_model_params_default();

    p.n_threads = 1;
    snprintf(path, sizeof path, "%s/%s", GOLD, name);
    CHECK_OK(cdb_model_open(path, &p, &m));
    in = cdb_model_get_info(m);
    CHECK_EQ_STR(in->naming, naming);
    CHECK_EQ_INT(in->act, act);
    check_shapes(cdb_t_, in, &k_fx, FX_VOCAB);

    tokens = test_read_file(GOLD "/tokens.i32", &n_tok);
    pixels = test_read_file(GOLD "/fam_pixels.f32", &n_px);
    exp_t = read_golden_f32(GOLD, name, "text", &n_et);
    exp_i = read_golden_f32(GOLD, name, "image", &n_ei);
    if (!tokens || !pixels || !exp_t || !exp_i) {
        free(tokens), free(pixels), free(exp_t), free(exp_i);
        cdb_model_close(m);
        CDB_TEST_FAIL_("missing fixture files for %s (tests/golden/README.md)", name);
    }
    nt = (int)(n_tok / (4 * 77));
    ni = (int)(n_px / (4 * 3 * k_fx.image * k_fx.image));
    got = malloc((size_t)(nt > ni ? nt : ni) * E * sizeof(float));
    if (n_et != (size_t)nt * E * 4 || n_ei != (size_t)ni * E * 4 || ni < 2 || !got) {
        free(tokens), free(pixels), free(exp_t), free(exp_i), free(got);
        cdb_model_close(m);
        CDB_TEST_FAIL_("%s: fixture sizes do not match (%zu, %zu)", name, n_et, n_ei);
    }
    if (cdb_encode_tokens(m, tokens, nt, 0, got) == CDB_OK)
        for (int i = 0; i < nt; i++) min_t = fmin(min_t, cosine(got + i * E, exp_t + i * E, E));
    else
        min_t = -2;
    if (cdb_encode_pixels(m, pixels, ni, 0, got) == CDB_OK)
        for (int i = 0; i < ni; i++) min_i = fmin(min_i, cosine(got + i * E, exp_i + i * E, E));
    else
        min_i = -2;
    printf("     %s: max 1 - cosine vs PyTorch: text %.2g, image %.2g\n", name, 1 - min_t,
           1 - min_i);
    cdb_model_close(m);
    m = NULL;
    /* The fixture can tell the activations apart: forcing the other one must fail
    ** the tight bound. */
    p.act = act == CDB_ACT_GELU ? CDB_ACT_QUICK_GELU : CDB_ACT_GELU;
    snprintf(path, sizeof path, "%s/%s", GOLD, name);
    if (cdb_model_open(path, &p, &m) == CDB_OK && cdb_encode_pixels(m, pixels, ni, 0, got) == CDB_OK)
        for (int i = 0; i < ni; i++) min_other = fmin(min_other, cosine(got + i * E, exp_i + i * E, E));
    free(tokens), free(pixels), free(exp_t), free(exp_i), free(got);
    cdb_model_close(m);
    CHECK_MSG(min_other < TIGHT_COS, "%s: the wrong activation still reaches cosine %.10f", name,
              min_other);
    CHECK_MSG(min_t >= MIN_COS, "%s text: min cosine %.9f (-2: encode failed: %s)", name, min_t,
              cdb_errmsg());
    CHECK_MSG(min_i >= MIN_COS, "%s image: min cosine %.9f", name, min_i);
    /* The other activation moves these by 1 - cos ~ 2e-5..4e-5 (the script prints
    ** it); clipdb's fp32 path is within ~1e-12, so this bound proves the activation. */
    CHECK_MSG(min_t >= TIGHT_COS && min_i >= TIGHT_COS, "%s: min cosine %.10f / %.10f < %.8f",
              name, min_t, min_i, TIGHT_COS);
}

CDB_TEST(golden_openclip_head20_mlp4923_patch14_56px) {
    run_family_fixture(cdb_t_, "fam_openclip", "openai", CDB_ACT_GELU);
}

CDB_TEST(golden_hf_head20_mlp4923_patch14_56px) {
    run_family_fixture(cdb_t_, "fam_hf", "hf", CDB_ACT_QUICK_GELU);
}

CDB_TEST_MAIN(every_family_every_naming_inspects_exactly, inspect_still_validates_bigG,
              inspect_matches_full_open, full_load_peak_rss, golden_openclip_head20_mlp4923_patch14_56px,
              golden_hf_head20_mlp4923_patch14_56px)
