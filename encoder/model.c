/*
** model.c: the MODEL section of encoder.h. Opens a model (a folder or a single
** .safetensors file), hashes its weights (XXH3-128 over the files' bytes in name
** order: the model's identity; skipped when the caller passes a hash recorded with
** the files' unchanged stat key), recognizes the key naming (OpenAI/OpenCLIP
** state_dict or Hugging Face CLIPModel; the image tower a ViT or OpenAI's
** ModifiedResNet, its BatchNorms folded into the convolutions here; timm towers
** are refused), reads the architecture from tensor shapes, the activation / heads /
** preprocessing from config.json, open_clip_config.json or preprocessor_config.json
** (params override; assumed defaults are named in info.act_source and logged),
** validates every tensor's dtype and shape, and uploads the weights to a backend
** in the layout encoder/clip.c expects (nn.Linear [out, in]; q/k/v as one matrix,
** HF's concatenated, except the vision tower's last block: q and k|v; OpenAI's x @
** proj projections transposed; the matrices mapped instead from the packed matrix cache,
** packcache.c, when it holds them). Also picks the tokenizer and
** implements the encode_* entry points (validation + normalization around the
** graph in clip.c). With params.inspect_only the same validation runs but nothing
** is hashed, widened or uploaded (no backend): a model of any size is described
** from its headers and configs alone.
*/
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "encoder/encoder_int.h"

/* NAMING_OC_SIGLIP: an OpenCLIP SigLIP folder (CustomTextCLIP): timm's image tower
** 'visual.trunk.*' and a text tower 'text.*' in OpenAI's block naming. */
typedef enum naming { NAMING_OPENAI = 0, NAMING_HF = 1, NAMING_OC_SIGLIP = 2 } naming;

typedef struct load_ctx {
    cdb_model *m;
    naming nm;
    int siglip;         /* the SigLIP family (HF SiglipModel, or NAMING_OC_SIGLIP) */
    const char *dir;    /* model folder, or NULL for a single file */
    json_t *hf_cfg;     /* config.json */
    json_t *oc_cfg;     /* open_clip_config.json */
    json_t *pp_cfg;     /* preprocessor_config.json */
    cdb_k_act vact, tact;     /* the towers' activations (pick_act) */
    float veps, teps;         /* the towers' LayerNorm eps (pick_eps) */
    int dtype_seen[3];  /* F32, F16, BF16 */
    int inspect;        /* params.inspect_only: validate shapes, touch no weight byte */
    int64_t n_params;   /* elements of the tensors fetched by get_t */
    int tok_cache;      /* open the tokenizer through the tokenizer cache (tok_cache_on) */
    const char *tok_cache_dir;
} load_ctx;

/* A transformer block's tensor names, after its prefix, without ".weight"/".bias". */
typedef struct block_names {
    const char *ln1, *ln2, *attn_out, *mlp_fc, *mlp_proj;
    const char *in_proj_w, *in_proj_b; /* the [3W, W] q|k|v tensor and its bias; NULL:
                                       ** Hugging Face's self_attn.{q,k,v}_proj */
} block_names;

static const block_names k_blocks_openai = {"ln_1", "ln_2", "attn.out_proj", "mlp.c_fc",
                                            "mlp.c_proj", "attn.in_proj_weight",
                                            "attn.in_proj_bias"};
static const block_names k_blocks_hf = {"layer_norm1", "layer_norm2", "self_attn.out_proj",
                                        "mlp.fc1", "mlp.fc2", NULL, NULL};
static const block_names k_blocks_timm = {"norm1", "norm2", "attn.proj", "mlp.fc1", "mlp.fc2",
                                          "attn.qkv.weight", "attn.qkv.bias"};

/* Every tensor name that differs between the namings the loader reads (the
** ModifiedResNet tower exists in OpenAI naming only). Tower names are prefixes
** without ".weight"/".bias"; a block's names follow its prefix (block_fmt % i). */
typedef struct tensor_names {
    const char *v_patch, *v_pos, *v_cls, *v_ln_pre, *v_ln_post, *v_proj, *v_block_fmt;
    const char *t_tok, *t_pos, *t_ln_final, *t_proj, *t_block_fmt;
    const char *t_head;  /* SigLIP: the text projection, a Linear with bias */
    const block_names *vb, *tb;
    int proj_transposed; /* OpenAI's projections are [width, embed] (x @ proj); HF's are
                         ** Linear weights [embed, width], as the graph wants */
} tensor_names;

static const tensor_names k_names[3] = {
    [NAMING_OPENAI] = {
        .v_patch = "visual.conv1.weight", .v_pos = "visual.positional_embedding",
        .v_cls = "visual.class_embedding", .v_ln_pre = "visual.ln_pre",
        .v_ln_post = "visual.ln_post", .v_proj = "visual.proj",
        .v_block_fmt = "visual.transformer.resblocks.%d.",
        .t_tok = "token_embedding.weight", .t_pos = "positional_embedding",
        .t_ln_final = "ln_final", .t_proj = "text_projection",
        .t_block_fmt = "transformer.resblocks.%d.",
        .vb = &k_blocks_openai, .tb = &k_blocks_openai, .proj_transposed = 1,
    },
    [NAMING_HF] = {
        .v_patch = "vision_model.embeddings.patch_embedding.weight",
        .v_pos = "vision_model.embeddings.position_embedding.weight",
        .v_cls = "vision_model.embeddings.class_embedding",
        .v_ln_pre = "vision_model.pre_layrnorm", /* sic: Hugging Face's spelling */
        .v_ln_post = "vision_model.post_layernorm", .v_proj = "visual_projection.weight",
        .v_block_fmt = "vision_model.encoder.layers.%d.",
        .t_tok = "text_model.embeddings.token_embedding.weight",
        .t_pos = "text_model.embeddings.position_embedding.weight",
        .t_ln_final = "text_model.final_layer_norm", .t_proj = "text_projection.weight",
        .t_block_fmt = "text_model.encoder.layers.%d.", .t_head = "text_model.head",
        .vb = &k_blocks_hf, .tb = &k_blocks_hf, .proj_transposed = 0,
    },
    [NAMING_OC_SIGLIP] = { /* the image tower: k_siglip_vision */
        .t_tok = "text.token_embedding.weight", .t_pos = "text.positional_embedding",
        .t_ln_final = "text.ln_final", .t_block_fmt = "text.transformer.resblocks.%d.",
        .t_head = "text.text_projection", .vb = &k_blocks_timm, .tb = &k_blocks_openai,
        .proj_transposed = 0,
    },
};

/* SigLIP's image tower: Hugging Face's SiglipVisionTransformer, timm's
** VisionTransformer(class_token=False, global_pool='map'). The head's in-projection
** is one q|k|v tensor (HF: nn.MultiheadAttention) or q and k|v (timm's
** AttentionPoolLatent). */
typedef struct siglip_vnames {
    const char *patch, *pos, *ln_post, *block_fmt, *head;
    const char *probe, *in_proj_w, *in_proj_b, *q, *kv, *out, *ln, *fc, *proj;
} siglip_vnames;

static const siglip_vnames k_siglip_vision[2] = {
    { /* Hugging Face */
        "vision_model.embeddings.patch_embedding",
        "vision_model.embeddings.position_embedding.weight", "vision_model.post_layernorm",
        "vision_model.encoder.layers.%d.", "vision_model.head.", "probe",
        "attention.in_proj_weight", "attention.in_proj_bias", NULL, NULL, "attention.out_proj",
        "layernorm", "mlp.fc1", "mlp.fc2",
    },
    { /* timm, in an OpenCLIP folder */
        "visual.trunk.patch_embed.proj", "visual.trunk.pos_embed", "visual.trunk.norm",
        "visual.trunk.blocks.%d.", "visual.trunk.attn_pool.", "latent", NULL, NULL, "q", "kv",
        "proj", "norm", "mlp.fc1", "mlp.fc2",
    },
};

cdb_model_params cdb_model_params_default(void) {
    cdb_model_params p;
    memset(&p, 0, sizeof p);
    p.act = CDB_ACT_DEFAULT;
    p.load_vision = 1;
    p.load_text = 1;
    p.device.kind = CDB_K_DEVICE_CPU;
    return p;
}

/* ---- tensors ---------------------------------------------------------------- */

static const cdb_st_tensor *find(const cdb_model *m, const char *name) {
    for (int i = 0; i < m->n_files; i++) {
        const cdb_st_tensor *t = cdb_st_find(m->files[i], name);
        if (t) return t;
    }
    return NULL;
}

static int has_prefix_key(const cdb_model *m, const char *prefix) {
    size_t n = strlen(prefix);
    for (int i = 0; i < m->n_files; i++)
        for (int j = 0; j < m->files[i]->n_tensors; j++)
            if (!strncmp(m->files[i]->tensors[j].name, prefix, n)) return 1;
    return 0;
}

/* The tensor `name` (printf-style), checked to be a float type with the given
** dims (-1: any; the dim's value is returned through dims[]). */
static cdb_status vget_t(load_ctx *c, const cdb_st_tensor **out, int nd, int64_t *dims,
                         const char *fmt, va_list ap) {
    char name[256];
    const cdb_st_tensor *t;
    vsnprintf(name, sizeof name, fmt, ap);
    *out = NULL;
    t = find(c->m, name);
    if (!t) return cdb_seterr(CDB_CORRUPT, "missing tensor '%s'", name);
    if (t->dtype != CDB_ST_F32 && t->dtype != CDB_ST_F16 && t->dtype != CDB_ST_BF16)
        return cdb_seterr(CDB_UNSUPPORTED, "tensor '%s': dtype %s (F32, F16 or BF16 expected)",
                          name, t->dtype_name);
    if (t->n_dims != nd)
        return cdb_seterr(CDB_CORRUPT, "tensor '%s': %d dims, expected %d", name, t->n_dims, nd);
    for (int i = 0; i < nd; i++) {
        if (dims[i] >= 0 && t->shape[i] != dims[i])
            return cdb_seterr(CDB_CORRUPT, "tensor '%s': shape[%d] = %lld, expected %lld", name,
                              i, (long long)t->shape[i], (long long)dims[i]);
        if (t->shape[i] <= 0 || t->shape[i] > (1 << 24))
            return cdb_seterr(CDB_CORRUPT, "tensor '%s': shape[%d] = %lld out of range", name, i,
                              (long long)t->shape[i]);
        dims[i] = t->shape[i];
    }
    c->dtype_seen[t->dtype]++;
    c->n_params += t->n_elems; /* each tensor is fetched once */
    *out = t;
    return CDB_OK;
}

static cdb_status get_t(load_ctx *c, const cdb_st_tensor **out, int nd, int64_t *dims,
                        const char *fmt, ...) CDB_PRINTF(5, 6);
static cdb_status get_t(load_ctx *c, const cdb_st_tensor **out, int nd, int64_t *dims,
                        const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    cdb_status rc = vget_t(c, out, nd, dims, fmt, ap);
    va_end(ap);
    return rc;
}

static cdb_k_dtype kdt(cdb_st_dtype d) {
    return d == CDB_ST_F16 ? CDB_K_F16 : d == CDB_ST_BF16 ? CDB_K_BF16 : CDB_K_F32;
}

/* A tensor that was copied or converted is not read again: drop its file pages
** from our RSS (they stay in the page cache; a later read would fault them back). */
static void drop_pages(const cdb_st_tensor *t) {
    long pg = sysconf(_SC_PAGESIZE); /* per call: a cached static would be a data race */
    uintptr_t a = (uintptr_t)t->data, b = a + t->n_bytes;
    if (pg <= 0) return;
    a = (a + (uintptr_t)pg - 1) & ~((uintptr_t)pg - 1);
    b &= ~((uintptr_t)pg - 1);
    if (b > a) madvise((void *)a, b - a, MADV_DONTNEED);
}

/* The next matrix of the load, rows x cols, from the packed matrix cache: 1 when it
** was there (*out set; the caller skips its own conversion), else 0. Shapes are
** checked before the call: the cache only saves the packing. */
static int take_cached(load_ctx *c, int64_t rows, int64_t cols, cdb_k_buf **out) {
    if (!c->m->pc || rows <= 0 || cols <= 0 || rows > INT32_MAX || cols > INT32_MAX) return 0;
    if (!cdb_pack_cache_take(c->m->pc, (int)rows, (int)cols, out)) return 0;
    cdb_pack_cache_note(c->m->pc, *out, (int)rows, (int)cols);
    return 1;
}

/* A gemm operand W [rows, cols] from host fp32/f16/bf16: uploaded with its shape,
** so the CPU backend packs it once, here, for its GEMM (or maps the panels packed by
** an earlier open, from the packed matrix cache). */
static cdb_status upload_matrix(load_ctx *c, const void *src, cdb_k_dtype dt, int64_t rows,
                                int64_t cols, int flags, cdb_k_buf **out) {
    cdb_k_backend *be = c->m->be;
    cdb_status rc;
    if (rows <= 0 || cols <= 0 || rows > INT32_MAX || cols > INT32_MAX)
        return cdb_seterr(CDB_CORRUPT, "matrix of %lld x %lld", (long long)rows,
                          (long long)cols);
    if (take_cached(c, rows, cols, out)) return CDB_OK;
    rc = cdb_k_matrix_upload(be, src, dt, (int)rows, (int)cols, flags, out);
    if (rc == CDB_OK) cdb_pack_cache_note(c->m->pc, *out, (int)rows, (int)cols);
    return rc;
}

/* Rows [row0, row0 + rows) of t (a matrix [shape[0], the rest flattened], a conv
** weight too; a vector's rows are its elements) uploaded as a matrix or a vector of
** their own. The caller drops t's pages (drop_uploaded) when it has uploaded all it
** uploads of t. */
static cdb_status upload_rows(load_ctx *c, const cdb_st_tensor *t, int64_t row0, int64_t rows,
                              cdb_k_wrole role, cdb_k_buf **out) {
    int64_t cols = t->shape[0] ? t->n_elems / t->shape[0] : 0;
    const unsigned char *src;
    if (c->inspect) { /* validated by get_t; nothing is read */
        *out = NULL;
        return CDB_OK;
    }
    src = (const unsigned char *)t->data + (size_t)(row0 * cols) * cdb_st_dtype_size(t->dtype);
    if (role == CDB_K_W_MATRIX)
        return upload_matrix(c, src, kdt(t->dtype), rows, cols, CDB_K_UPLOAD_BORROW, out);
    return cdb_k_weight_upload(c->m->be, src, kdt(t->dtype), (size_t)(rows * cols), role,
                               CDB_K_UPLOAD_BORROW, out);
}

/* t's file pages dropped once uploaded in a role: F32 vectors may be used in place;
** matrices are packed (CPU) or copied (GPU), other dtypes widened, except an F16/BF16
** token table, read in place (CDB_K_W_TABLE): its rows fault back in as texts use them. */
static void drop_uploaded(const load_ctx *c, const cdb_st_tensor *t, cdb_k_wrole role) {
    if (!c->inspect && (t->dtype != CDB_ST_F32 || role == CDB_K_W_MATRIX)) drop_pages(t);
}

static cdb_status upload(load_ctx *c, const cdb_st_tensor *t, cdb_k_wrole role, cdb_k_buf **out) {
    cdb_status rc = upload_rows(c, t, 0, t->shape[0], role, out);
    drop_uploaded(c, t, role);
    return rc;
}

/* get_t + upload: the tensor `fmt` checked against dims (as get_t) into *buf. */
static cdb_status fetch_upload(load_ctx *c, cdb_k_buf **buf, cdb_k_wrole role, int nd,
                               int64_t *dims, const char *fmt, ...) CDB_PRINTF(6, 7);
static cdb_status fetch_upload(load_ctx *c, cdb_k_buf **buf, cdb_k_wrole role, int nd,
                               int64_t *dims, const char *fmt, ...) {
    const cdb_st_tensor *t;
    va_list ap;
    va_start(ap, fmt);
    cdb_status rc = vget_t(c, &t, nd, dims, fmt, ap);
    va_end(ap);
    return rc == CDB_OK ? upload(c, t, role, buf) : rc;
}

/* A LayerNorm's weight and bias, `prefix`.weight / .bias, both [W]. */
static cdb_status fetch_layernorm(load_ctx *c, const char *prefix, const char *name, int64_t W,
                                  cdb_k_buf **g, cdb_k_buf **b) {
    int64_t d[1] = {W};
    cdb_status rc = fetch_upload(c, g, CDB_K_W_PARAM, 1, d, "%s%s.weight", prefix, name);
    if (rc == CDB_OK) rc = fetch_upload(c, b, CDB_K_W_PARAM, 1, d, "%s%s.bias", prefix, name);
    return rc;
}

/* A Linear layer's weight [*out_dim (or -1: any, returned), in_dim] and bias [*out_dim]. */
static cdb_status fetch_linear(load_ctx *c, const char *prefix, const char *name, int *out_dim,
                               int64_t in_dim, cdb_k_buf **w, cdb_k_buf **b) {
    int64_t d[2] = {*out_dim, in_dim};
    cdb_status rc = fetch_upload(c, w, CDB_K_W_MATRIX, 2, d, "%s%s.weight", prefix, name);
    if (rc != CDB_OK) return rc;
    *out_dim = (int)d[0];
    return fetch_upload(c, b, CDB_K_W_PARAM, 1, d, "%s%s.bias", prefix, name);
}

static float *widen(const cdb_st_tensor *t) {
    float *f = malloc((size_t)t->n_elems * sizeof(float));
    const unsigned char *s = t->data;
    if (!f) return NULL;
    for (int64_t i = 0; i < t->n_elems; i++) {
        if (t->dtype == CDB_ST_F32) {
            memcpy(&f[i], s + 4 * i, 4);
        } else {
            uint16_t h = (uint16_t)(s[2 * i] | (s[2 * i + 1] << 8));
            if (t->dtype == CDB_ST_F16) {
                f[i] = cdb_k_f16_to_f32_1(h);
            } else {
                uint32_t u = (uint32_t)h << 16;
                memcpy(&f[i], &u, 4);
            }
        }
    }
    return f;
}

/* proj: OpenAI stores [width, embed] used as x @ proj; the graph wants [embed, width]. */
static cdb_status upload_transposed(load_ctx *c, const cdb_st_tensor *t, cdb_k_buf **out) {
    int64_t r = t->shape[0], k = t->shape[1];
    float *src, *dst;
    cdb_status rc = CDB_OK;
    if (c->inspect) {
        *out = NULL;
        return CDB_OK;
    }
    if (take_cached(c, k, r, out)) return CDB_OK;
    src = widen(t);
    dst = malloc((size_t)t->n_elems * sizeof(float));
    if (!src || !dst) {
        rc = cdb_seterr(CDB_NOMEM, "transposing '%s'", t->name);
    } else {
        for (int64_t i = 0; i < r; i++)
            for (int64_t j = 0; j < k; j++) dst[j * r + i] = src[i * k + j];
        rc = upload_matrix(c, dst, CDB_K_F32, k, r, 0, out);
    }
    free(src);
    free(dst);
    drop_pages(t);
    return rc;
}

/* n_t same-sized tensors (weights or biases) concatenated along rows: HF's q, k, v;
** the ResNet attention pool's k, v. */
static cdb_status upload_concat(load_ctx *c, const cdb_st_tensor *const *t, int n_t,
                                cdb_k_wrole role, cdb_k_buf **out) {
    size_t n = (size_t)t[0]->n_elems;
    float *dst;
    cdb_status rc = CDB_OK;
    if (c->inspect) {
        *out = NULL;
        return CDB_OK;
    }
    if (role == CDB_K_W_MATRIX &&
        take_cached(c, (int64_t)n_t * t[0]->shape[0], t[0]->n_elems / t[0]->shape[0], out))
        return CDB_OK;
    dst = malloc((size_t)n_t * n * sizeof(float));
    if (!dst) return cdb_seterr(CDB_NOMEM, "%s concat", t[0]->name);
    for (int i = 0; i < n_t; i++) {
        float *w = widen(t[i]);
        if (!w) {
            free(dst);
            return cdb_seterr(CDB_NOMEM, "%s concat", t[0]->name);
        }
        memcpy(dst + i * n, w, n * sizeof(float));
        free(w);
        drop_pages(t[i]);
    }
    if (role == CDB_K_W_MATRIX) /* rows of the n_t tensors stacked */
        rc = upload_matrix(c, dst, CDB_K_F32, (int64_t)n_t * t[0]->shape[0],
                           t[0]->n_elems / t[0]->shape[0], 0, out);
    else
        rc = cdb_k_weight_upload(c->m->be, dst, CDB_K_F32, (size_t)n_t * n, role, 0,
                                 out);
    free(dst);
    return rc;
}

/* Blocks 0, 1, ... while block_fmt % i followed by `probe` names a tensor. */
static int count_layers(const cdb_model *m, const char *block_fmt, const char *probe) {
    char pre[192], name[192 + 64];
    int n = 0;
    for (;;) {
        snprintf(pre, sizeof pre, block_fmt, n);
        snprintf(name, sizeof name, "%s%s", pre, probe);
        if (!find(m, name)) return n;
        n++;
    }
}

/* HF's q_proj, k_proj, v_proj: one matrix (qkv_w, qkv_b), or with split_q q and k|v. */
static cdb_status load_in_proj_hf(load_ctx *c, const char *pre, int W, int split_q,
                                  cdb_clip_block *b) {
    const cdb_st_tensor *w[3], *bb[3];
    static const char *qkv[3] = {"q", "k", "v"};
    cdb_status rc = CDB_OK;
    for (int i = 0; i < 3 && rc == CDB_OK; i++) {
        int64_t d[2] = {W, W};
        rc = get_t(c, &w[i], 2, d, "%sself_attn.%s_proj.weight", pre, qkv[i]);
        if (rc == CDB_OK) rc = get_t(c, &bb[i], 1, d, "%sself_attn.%s_proj.bias", pre, qkv[i]);
    }
    if (rc != CDB_OK) return rc;
    if (!split_q) {
        rc = upload_concat(c, w, 3, CDB_K_W_MATRIX, &b->qkv_w);
        return rc == CDB_OK ? upload_concat(c, bb, 3, CDB_K_W_PARAM, &b->qkv_b) : rc;
    }
    rc = upload(c, w[0], CDB_K_W_MATRIX, &b->q_w);
    if (rc == CDB_OK) rc = upload(c, bb[0], CDB_K_W_PARAM, &b->q_b);
    if (rc == CDB_OK) rc = upload_concat(c, w + 1, 2, CDB_K_W_MATRIX, &b->kv_w);
    return rc == CDB_OK ? upload_concat(c, bb + 1, 2, CDB_K_W_PARAM, &b->kv_b) : rc;
}

/* A block's in-projection: q|k|v as one matrix (qkv_w, qkv_b), or, with split_q, as
** q and k|v (q_w, q_b, kv_w, kv_b: the same rows). OpenAI's in_proj (timm's qkv) is
** one tensor, pre`in_w` with its bias pre`in_b`: its rows are uploaded in one or two
** parts; in_w NULL: Hugging Face's three. */
static cdb_status load_in_proj(load_ctx *c, const char *pre, const char *in_w, const char *in_b,
                               int W, int split_q, cdb_clip_block *b) {
    const cdb_st_tensor *w, *bb;
    int64_t d[2] = {3 * W, W};
    cdb_status rc;
    if (!in_w) return load_in_proj_hf(c, pre, W, split_q, b);
    rc = get_t(c, &w, 2, d, "%s%s", pre, in_w);
    if (rc == CDB_OK) rc = get_t(c, &bb, 1, d, "%s%s", pre, in_b);
    if (rc != CDB_OK) return rc;
    if (!split_q) {
        rc = upload_rows(c, w, 0, 3 * (int64_t)W, CDB_K_W_MATRIX, &b->qkv_w);
        if (rc == CDB_OK) rc = upload_rows(c, bb, 0, 3 * (int64_t)W, CDB_K_W_PARAM, &b->qkv_b);
    } else {
        rc = upload_rows(c, w, 0, W, CDB_K_W_MATRIX, &b->q_w);
        if (rc == CDB_OK) rc = upload_rows(c, w, W, 2 * (int64_t)W, CDB_K_W_MATRIX, &b->kv_w);
        if (rc == CDB_OK) rc = upload_rows(c, bb, 0, W, CDB_K_W_PARAM, &b->q_b);
        if (rc == CDB_OK) rc = upload_rows(c, bb, W, 2 * (int64_t)W, CDB_K_W_PARAM, &b->kv_b);
    }
    drop_uploaded(c, w, CDB_K_W_MATRIX);
    drop_uploaded(c, bb, CDB_K_W_PARAM);
    return rc;
}

static cdb_status load_block(load_ctx *c, const block_names *n, const char *pre, int W,
                             int split_q, cdb_clip_block *b, int *mlp) {
    cdb_status rc = fetch_layernorm(c, pre, n->ln1, W, &b->ln1_g, &b->ln1_b);
    if (rc == CDB_OK) rc = fetch_layernorm(c, pre, n->ln2, W, &b->ln2_g, &b->ln2_b);
    if (rc == CDB_OK) rc = load_in_proj(c, pre, n->in_proj_w, n->in_proj_b, W, split_q, b);
    if (rc != CDB_OK) return rc;
    int out_w = W, fc_w = *mlp > 0 ? *mlp : -1, proj_w = W;
    rc = fetch_linear(c, pre, n->attn_out, &out_w, W, &b->out_w, &b->out_b);
    if (rc == CDB_OK) rc = fetch_linear(c, pre, n->mlp_fc, &fc_w, W, &b->fc_w, &b->fc_b);
    if (rc == CDB_OK) rc = fetch_linear(c, pre, n->mlp_proj, &proj_w, fc_w, &b->proj_w, &b->proj_b);
    if (rc == CDB_OK) *mlp = fc_w;
    return rc;
}

/* ---- configs ---------------------------------------------------------------- */

/* dir/name parsed into *out (NULL when the file does not exist). A config that
** exists but is not a JSON object is an error naming the file: falling back to
** defaults would silently change the activation or the heads (a GELU model run as
** QuickGELU gives wrong embeddings). */
static cdb_status load_json(const char *dir, const char *name, json_t **out) {
    char path[4096];
    json_error_t e;
    struct stat st;
    *out = NULL;
    if (!dir) return CDB_OK;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (stat(path, &st) != 0) return CDB_OK;
    json_t *j = json_load_file(path, 0, &e);
    if (!j)
        return cdb_seterr(CDB_CORRUPT, "%s: not valid JSON at line %d: %s; fix or remove it",
                          path, e.line, e.text);
    if (!json_is_object(j)) {
        json_decref(j);
        return cdb_seterr(CDB_CORRUPT, "%s: not a JSON object; fix or remove it", path);
    }
    *out = j;
    return CDB_OK;
}

/* obj[k1][k2]... (NULL-terminated path), or NULL. */
static json_t *jget(json_t *o, ...) {
    va_list ap;
    const char *k;
    va_start(ap, o);
    while (o && (k = va_arg(ap, const char *)) != NULL) o = json_object_get(o, k);
    va_end(ap);
    return o;
}

/* A key of one tower's section of config.json: "<tower>_config_dict" first (older
** transformers configs, e.g. LAION's, carry both, and CLIPConfig lets the _dict
** override), then "<tower>_config". NULL when neither has it. */
static json_t *hf_tower_key(const load_ctx *c, int vision, const char *key) {
    json_t *v = jget(c->hf_cfg, vision ? "vision_config_dict" : "text_config_dict", key, NULL);
    if (!v || json_is_null(v)) v = jget(c->hf_cfg, vision ? "vision_config" : "text_config", key, NULL);
    return v && !json_is_null(v) ? v : NULL;
}

static int act_from_str(const char *s, cdb_k_act *out) {
    if (!s) return 0;
    if (!strcmp(s, "quick_gelu")) *out = CDB_K_ACT_QUICK_GELU;
    else if (!strcmp(s, "gelu")) *out = CDB_K_ACT_GELU;
    /* transformers' gelu_pytorch_tanh (SigLIP's) and gelu_new: the same tanh formula */
    else if (!strcmp(s, "gelu_pytorch_tanh") || !strcmp(s, "gelu_new")) *out = CDB_K_ACT_GELU_TANH;
    else return 0;
    return 1;
}

static cdb_act act_public(cdb_k_act a) {
    return a == CDB_K_ACT_GELU ? CDB_ACT_GELU
           : a == CDB_K_ACT_GELU_TANH ? CDB_ACT_GELU_TANH : CDB_ACT_QUICK_GELU;
}

/* open_clip_config.json's vision_cfg / text_cfg (under model_cfg in hub folders). */
static json_t *oc_tower_cfg(const load_ctx *c, int vision) {
    const char *k = vision ? "vision_cfg" : "text_cfg";
    json_t *cfg = jget(c->oc_cfg, "model_cfg", k, NULL);
    return cfg ? cfg : jget(c->oc_cfg, k, NULL);
}

/* timm's SigLIP image towers built with act_layer='gelu_tanh' (timm's
** vision_transformer.py at aa4b585: vit_base_patch32_siglip_256, ..._512 of L/16, every
** so400m_patch16 and giantopt_patch16 one, with or without _gap); every other
** vit_*_siglip_* model has timm's default, exact nn.GELU. */
static int timm_gelu_tanh(const char *name) {
    static const char *const k_tanh[] = {
        "vit_base_patch32_siglip_", "vit_large_patch16_siglip_512",
        "vit_large_patch16_siglip_gap_512", "vit_so400m_patch16_siglip_",
        "vit_giantopt_patch16_siglip_"};
    for (size_t i = 0; i < sizeof k_tanh / sizeof k_tanh[0]; i++)
        if (!strncmp(name, k_tanh[i], strlen(k_tanh[i]))) return 1;
    return 0;
}

/* The towers' activations (c->vact, c->tact): the flag for both; else config.json's
** hidden_act per tower (one tower's for both when only it says; SigLIP's default
** gelu_pytorch_tanh when neither does); else open_clip_config.json (CLIP: quick_gelu
** for both, else GELU; SigLIP: the timm model's activation for the image tower,
** text_cfg.act_kwargs.approximate "tanh" or exact GELU for the text tower); else
** QuickGELU (OpenAI CLIP). */
static cdb_status pick_act(load_ctx *c, const cdb_model_params *p) {
    cdb_model *m = c->m;
    const char *src = NULL;
    if (p->act == CDB_ACT_QUICK_GELU || p->act == CDB_ACT_GELU || p->act == CDB_ACT_GELU_TANH) {
        c->vact = p->act == CDB_ACT_GELU        ? CDB_K_ACT_GELU
                  : p->act == CDB_ACT_GELU_TANH ? CDB_K_ACT_GELU_TANH
                                                : CDB_K_ACT_QUICK_GELU;
        c->tact = c->vact;
        src = "flag";
    } else if (c->hf_cfg) {
        json_t *v = hf_tower_key(c, 1, "hidden_act");
        json_t *t = hf_tower_key(c, 0, "hidden_act");
        cdb_k_act av = CDB_K_ACT_NONE, at = CDB_K_ACT_NONE;
        int hv = act_from_str(json_string_value(v), &av), ht = act_from_str(json_string_value(t), &at);
        if ((v && !hv) || (t && !ht))
            return cdb_seterr(CDB_UNSUPPORTED, "config.json: hidden_act '%s' not supported",
                              json_string_value(v && !hv ? v : t));
        if (hv || ht) {
            c->vact = hv ? av : at;
            c->tact = ht ? at : av;
            src = "config.json";
        } else if (c->siglip) {
            c->vact = c->tact = CDB_K_ACT_GELU_TANH;
            src = "config.json (no hidden_act: SiglipConfig's default gelu_pytorch_tanh)";
        }
    }
    if (!src && c->oc_cfg && c->siglip) {
        const char *tm = json_string_value(json_object_get(oc_tower_cfg(c, 1), "timm_model_name"));
        json_t *ap = jget(oc_tower_cfg(c, 0), "act_kwargs", "approximate", NULL);
        c->vact = tm && timm_gelu_tanh(tm) ? CDB_K_ACT_GELU_TANH : CDB_K_ACT_GELU;
        c->tact = json_is_string(ap) && !strcmp(json_string_value(ap), "tanh") ? CDB_K_ACT_GELU_TANH
                                                                             : CDB_K_ACT_GELU;
        if (!tm)
            CDB_LOG_WARN("model %s: open_clip_config.json names no timm_model_name; assuming "
                         "timm's exact GELU for the image tower", m->name);
        src = "open_clip_config.json (image: the timm model's; text: act_kwargs)";
    } else if (!src && c->oc_cfg) {
        json_t *q = jget(c->oc_cfg, "model_cfg", "quick_gelu", NULL);
        if (!q) q = json_object_get(c->oc_cfg, "quick_gelu");
        c->vact = c->tact = json_is_true(q) ? CDB_K_ACT_QUICK_GELU : CDB_K_ACT_GELU;
        src = q ? "open_clip_config.json" : "open_clip_config.json (no quick_gelu: GELU, as OpenCLIP)";
    }
    if (!src && c->siglip) {
        c->vact = c->tact = CDB_K_ACT_GELU_TANH;
        src = "default (assumed gelu_pytorch_tanh, as Hugging Face's SigLIP)";
        CDB_LOG_INFO("model %s: no config names the activation; assuming SigLIP's tanh GELU",
                     m->name);
    }
    if (!src) {
        c->vact = c->tact = CDB_K_ACT_QUICK_GELU;
        src = "default (assumed QuickGELU, as OpenAI CLIP)";
        CDB_LOG_INFO("model %s: no config names the activation; assuming QuickGELU", m->name);
    }
    m->act = c->vact;
    m->act_source = strdup(src);
    m->info.act = act_public(c->vact);
    m->info.text_act = act_public(c->tact);
    m->info.act_source = m->act_source ? m->act_source : "";
    return CDB_OK;
}

/* The towers' LayerNorm eps (c->veps, c->teps): CLIP's 1e-5; SigLIP's from config.json
** (layer_norm_eps, default 1e-6 as SiglipConfig's) or, in an OpenCLIP folder, timm's
** 1e-6 for the image tower and text_cfg.norm_kwargs.eps (default nn.LayerNorm's 1e-5). */
static cdb_status pick_eps(load_ctx *c) {
    c->veps = c->teps = 1e-5f;
    if (!c->siglip) goto done;
    if (c->nm == NAMING_HF) {
        for (int v = 0; v < 2; v++) {
            json_t *e = hf_tower_key(c, v, "layer_norm_eps");
            double x = json_is_number(e) ? json_number_value(e) : 1e-6;
            if (!(x > 0 && x < 1))
                return cdb_seterr(CDB_CORRUPT, "config.json: layer_norm_eps %g invalid", x);
            *(v ? &c->veps : &c->teps) = (float)x;
        }
    } else {
        json_t *e = jget(oc_tower_cfg(c, 0), "norm_kwargs", "eps", NULL);
        double x = json_is_number(e) ? json_number_value(e) : 1e-5;
        if (!(x > 0 && x < 1))
            return cdb_seterr(CDB_CORRUPT, "open_clip_config.json: norm_kwargs eps %g invalid", x);
        c->veps = 1e-6f;
        c->teps = (float)x;
    }
done:
    c->m->info.vision_ln_eps = c->veps;
    c->m->info.text_ln_eps = c->teps;
    return CDB_OK;
}

/* heads: config.json num_attention_heads (the tower's _dict, then its config),
** open_clip_config heads / head_width,
** else 16 for the known ViT-H/g/bigG vision widths, else width / 64 (CLIP's head
** width; right for every OpenAI model and every OpenCLIP text tower). */
static cdb_status pick_heads(load_ctx *c, int vision, int width, int *heads) {
    json_t *h = hf_tower_key(c, vision, "num_attention_heads");
    json_int_t v = 0; /* configs are untrusted: any value is range-checked below */
    int n = 0;
    if (json_is_integer(h)) v = json_integer_value(h);
    if (!v) {
        json_t *cfg = oc_tower_cfg(c, vision);
        json_t *hw = json_object_get(cfg, "head_width"), *hh = json_object_get(cfg, "heads");
        if (json_is_integer(hh)) {
            v = json_integer_value(hh);
        } else if (json_is_integer(hw)) {
            json_int_t w = json_integer_value(hw);
            if (w <= 0 || w > width)
                return cdb_seterr(CDB_CORRUPT, "open_clip_config.json: head_width %lld invalid "
                                  "for width %d", (long long)w, width);
            v = width / w;
        }
    }
    if (v < 0 || v > width)
        return cdb_seterr(CDB_CORRUPT, "%s: %lld heads invalid for width %d",
                          vision ? "vision" : "text", (long long)v, width);
    n = (int)v;
    if (!n && vision && c->nm == NAMING_OC_SIGLIP) {
        /* timm's SigLIP towers: B 12 heads, L 16 (both width / 64), SO400M (1152) and
        ** giant-opt (1536) 16 */
        const char *tm = json_string_value(json_object_get(oc_tower_cfg(c, 1), "timm_model_name"));
        if (tm && (strstr(tm, "so400m") || strstr(tm, "giantopt"))) n = 16;
    }
    if (!n && vision && (width == 1280 || width == 1408 || width == 1664)) {
        /* OpenCLIP's ViT-H/14, ViT-g/14, ViT-bigG/14 image towers use head widths 80,
        ** 88 and 104: 16 heads each, not width / 64. */
        n = 16;
        CDB_LOG_INFO("vision width %d: assuming 16 heads (OpenCLIP ViT-H/g/bigG)", width);
    }
    if (!n) {
        if (width % 64)
            return cdb_seterr(CDB_UNSUPPORTED, "%s width %d is not a multiple of 64 and no config "
                              "gives the number of heads", vision ? "vision" : "text", width);
        n = width / 64;
    }
    if (n <= 0 || width % n)
        return cdb_seterr(CDB_CORRUPT, "%s: %d heads do not divide width %d",
                          vision ? "vision" : "text", n, width);
    *heads = n;
    return CDB_OK;
}

static int json_floats3(json_t *a, float out[3]) {
    if (!json_is_array(a) || json_array_size(a) != 3) return 0;
    for (int i = 0; i < 3; i++) {
        json_t *v = json_array_get(a, i);
        if (!json_is_number(v)) return 0;
        out[i] = (float)json_number_value(v);
    }
    return 1;
}

/* The image transform: CLIP's (short side + center crop, OpenAI's mean/std) unless
** the configs say otherwise; SigLIP's squash to size x size with mean = std = 0.5 as
** its defaults. preprocessor_config.json: image_mean/std, resample (2 bilinear, 3
** bicubic), do_rescale + rescale_factor (Hugging Face's rescale arithmetic);
** open_clip_config.json's preprocess_cfg: mean/std, interpolation, resize_mode. */
static void pick_preprocess(load_ctx *c) {
    cdb_preprocess_params *pp = &c->m->info.preprocess;
    const cdb_preprocess_params clip = cdb_preprocess_params_default(); /* CLIP's mean/std */
    const char *family = c->siglip ? "SigLIP" : "OpenAI CLIP";
    int have = 0;
    for (int i = 0; i < 3; i++) {
        pp->mean[i] = c->siglip ? 0.5f : clip.mean[i];
        pp->std[i] = c->siglip ? 0.5f : clip.std[i];
    }
    pp->interp = CDB_INTERP_BICUBIC;
    pp->size = c->m->info.image_size;
    pp->resize = c->siglip ? CDB_RESIZE_SQUASH : CDB_RESIZE_SHORT_CROP;
    pp->rescale_factor = 0;
    if (c->pp_cfg) {
        json_t *r = json_object_get(c->pp_cfg, "resample");
        json_t *rf = json_object_get(c->pp_cfg, "rescale_factor");
        json_t *sz = json_object_get(c->pp_cfg, "size");
        json_t *h = json_object_get(sz, "height"), *w = json_object_get(sz, "width");
        have = json_floats3(json_object_get(c->pp_cfg, "image_mean"), pp->mean) +
               json_floats3(json_object_get(c->pp_cfg, "image_std"), pp->std);
        if (json_is_integer(r) && json_integer_value(r) == 2) pp->interp = CDB_INTERP_BILINEAR;
        if (json_is_integer(r) && json_integer_value(r) != 2 && json_integer_value(r) != 3)
            CDB_LOG_WARN("model %s: preprocessor_config.json resample %lld is not bicubic (3) "
                         "or bilinear (2); using bicubic", c->m->name,
                         (long long)json_integer_value(r));
        if (c->siglip && json_is_number(rf) && json_number_value(rf) > 0 &&
            !json_is_false(json_object_get(c->pp_cfg, "do_rescale")))
            pp->rescale_factor = json_number_value(rf);
        if (c->siglip && json_is_integer(h) && json_is_integer(w) &&
            (json_integer_value(h) != pp->size || json_integer_value(w) != pp->size))
            CDB_LOG_WARN("model %s: preprocessor_config.json size %lldx%lld, the model's %d; "
                         "using %d", c->m->name, (long long)json_integer_value(w),
                         (long long)json_integer_value(h), pp->size, pp->size);
    } else if (c->oc_cfg) {
        json_t *cfg = json_object_get(c->oc_cfg, "preprocess_cfg");
        json_t *in = json_object_get(cfg, "interpolation");
        json_t *rm = json_object_get(cfg, "resize_mode");
        have = json_floats3(json_object_get(cfg, "mean"), pp->mean) +
               json_floats3(json_object_get(cfg, "std"), pp->std);
        if (json_is_string(in) && !strcmp(json_string_value(in), "bilinear"))
            pp->interp = CDB_INTERP_BILINEAR;
        if (json_is_string(rm) && !strcmp(json_string_value(rm), "squash"))
            pp->resize = CDB_RESIZE_SQUASH;
        else if (json_is_string(rm) && !strcmp(json_string_value(rm), "shortest"))
            pp->resize = CDB_RESIZE_SHORT_CROP;
        else if (json_is_string(rm))
            CDB_LOG_WARN("model %s: open_clip_config.json resize_mode '%s' not supported; "
                         "using %s", c->m->name, json_string_value(rm),
                         pp->resize == CDB_RESIZE_SQUASH ? "squash" : "shortest");
    }
    for (int i = 0; i < 3; i++)
        if (!isfinite(pp->mean[i]) || !isfinite(pp->std[i]) || !(pp->std[i] > 0)) {
            CDB_LOG_WARN("model %s: preprocessing mean/std in the config unusable; using "
                         "%s's", c->m->name, family);
            for (int k = 0; k < 3; k++) {
                pp->mean[k] = c->siglip ? 0.5f : clip.mean[k];
                pp->std[k] = c->siglip ? 0.5f : clip.std[k];
            }
            have = 0;
            break;
        }
    if (have < 2)
        CDB_LOG_INFO("model %s: no preprocessing config; assuming %s's mean/std, "
                     "bicubic, size %d", c->m->name, family, pp->size);
}

/* ---- towers ----------------------------------------------------------------- */

/* A tower's projection to the embedding, from width W to *E dims (returned), as the
** graph's [E, W] matrix whatever the naming stores. */
static cdb_status fetch_projection(load_ctx *c, const char *name, int W, int *E, cdb_k_buf **out) {
    const tensor_names *n = &k_names[c->nm];
    const cdb_st_tensor *t;
    int64_t d[2] = {-1, W};
    cdb_status rc;
    if (!n->proj_transposed) {
        rc = fetch_upload(c, out, CDB_K_W_MATRIX, 2, d, "%s", name);
        if (rc == CDB_OK) *E = (int)d[0];
        return rc;
    }
    d[0] = W, d[1] = -1;
    if ((rc = get_t(c, &t, 2, d, "%s", name)) != CDB_OK) return rc;
    *E = (int)d[1];
    return upload_transposed(c, t, out);
}

/* A transformer tower's heads and blocks (block_fmt % i for i = 0 .. layers - 1). */
static cdb_status load_blocks(load_ctx *c, int vision, const block_names *bn,
                              const char *block_fmt, int W, cdb_clip_tower *x) {
    const char *what = vision ? "vision" : "text";
    char pre[128];
    cdb_status rc;
    char probe[48];
    snprintf(probe, sizeof probe, "%s.weight", bn->ln1);
    x->layers = count_layers(c->m, block_fmt, probe);
    if (x->layers == 0)
        return cdb_seterr(CDB_CORRUPT, "%s tower has no transformer blocks", what);
    if ((rc = pick_heads(c, vision, W, &x->heads)) != CDB_OK) return rc;
    x->blocks = calloc(x->layers, sizeof *x->blocks);
    if (!x->blocks) return cdb_seterr(CDB_NOMEM, "%s blocks", what);
    x->mlp_width = 0;
    for (int i = 0; i < x->layers; i++) {
        snprintf(pre, sizeof pre, block_fmt, i);
        /* the last block computes its pooled rows' queries only: a CLIP vision tower's
        ** class token, SigLIP's bidirectional text tower's last position (SigLIP's image
        ** head attends over every token, and a causal CLIP text block keeps its one
        ** q|k|v product) */
        int split_q = i == x->layers - 1 && (vision ? !c->siglip : c->siglip);
        if ((rc = load_block(c, bn, pre, W, split_q, &x->blocks[i], &x->mlp_width)) != CDB_OK)
            return rc;
    }
    return CDB_OK;
}

/* A ViT image tower's info, once its blocks are loaded: a G x G grid of P pixels. */
static void vit_info(cdb_model *m, int G, int P) {
    const cdb_clip_tower *v = &m->vision;
    m->info.image_size = G * P;
    m->info.patch_size = P;
    m->info.vision_mlp_width = v->mlp_width;
    m->info.vision_width = v->width;
    m->info.vision_layers = v->layers;
    m->info.vision_heads = v->heads;
    m->info.vision_family = "ViT";
    m->info.has_vision = 1;
}

/* A ViT's grid of G x G patches of P pixels: the image size G * P within what
** preprocessing accepts (16384; ViT-L/14-336 is 24 * 14), and the size the caller asks. */
static cdb_status check_grid(int G, int P, const cdb_model_params *p) {
    if ((int64_t)G * P > 16384)
        return cdb_seterr(CDB_CORRUPT, "vision tower: %d x %d patches of %d pixels (image size "
                          "%lld > 16384)", G, G, P, (long long)G * P);
    if (p->image_size_override && p->image_size_override != G * P)
        return cdb_seterr(CDB_UNSUPPORTED, "image size %d requested, but the positional "
                          "embedding fixes it at %d", p->image_size_override, G * P);
    return CDB_OK;
}

/* The patch embedding `name` [W, 3, P, P] (a square patch) into v->patch_w, its width
** and patch size returned; the tower's activation and eps set from the configs. */
static cdb_status fetch_patch(load_ctx *c, const char *name, cdb_clip_tower *v, int *W, int *P) {
    const cdb_st_tensor *t;
    int64_t d[4] = {-1, 3, -1, -1};
    cdb_status rc;
    v->act = c->vact;
    v->ln_eps = c->veps;
    if ((rc = get_t(c, &t, 4, d, "%s", name)) != CDB_OK) return rc;
    *W = (int)d[0];
    *P = (int)d[2];
    if (d[2] != d[3])
        return cdb_seterr(CDB_CORRUPT, "'%s': non-square patch %lldx%lld", t->name,
                          (long long)d[2], (long long)d[3]);
    return upload(c, t, CDB_K_W_MATRIX, &v->patch_w);
}

static cdb_status load_vision(load_ctx *c, const cdb_model_params *p) {
    cdb_model *m = c->m;
    cdb_clip_tower *v = &m->vision;
    const tensor_names *n = &k_names[c->nm];
    cdb_status rc = CDB_OK;
    int64_t d[2];
    int W, P, G, S, E;

    if ((rc = fetch_patch(c, n->v_patch, v, &W, &P)) != CDB_OK) return rc;
    d[0] = -1, d[1] = W;
    if ((rc = fetch_upload(c, &v->pos, CDB_K_W_EMBED, 2, d, "%s", n->v_pos)) != CDB_OK) return rc;
    S = (int)d[0];
    G = (int)lround(sqrt((double)(S - 1)));
    if (S < 2 || G * G != S - 1)
        return cdb_seterr(CDB_CORRUPT, "vision positional embedding has %d rows, not 1 + a square",
                          S);
    /* image_size = G * P, and the graph indexes 3 * size * size pixels in int */
    if ((rc = check_grid(G, P, p)) != CDB_OK) return rc;
    d[0] = W;
    if ((rc = fetch_upload(c, &v->cls, CDB_K_W_EMBED, 1, d, "%s", n->v_cls)) != CDB_OK) return rc;
    if ((rc = fetch_layernorm(c, "", n->v_ln_pre, W, &v->ln_pre_g, &v->ln_pre_b)) != CDB_OK ||
        (rc = fetch_layernorm(c, "", n->v_ln_post, W, &v->ln_post_g, &v->ln_post_b)) != CDB_OK ||
        (rc = fetch_projection(c, n->v_proj, W, &E, &v->proj)) != CDB_OK)
        return rc;
    m->info.embed_dim = E;
    v->width = W;
    if ((rc = load_blocks(c, 1, n->vb, n->v_block_fmt, W, v)) != CDB_OK) return rc;
    vit_info(m, G, P);
    return CDB_OK;
}

/* SigLIP's image tower (k_siglip_vision: Hugging Face or timm naming). The grid comes
** from the positional embedding ([N, W], timm's [1, N, W]), N a square; the MLP width
** from the blocks' fc1; the head's MLP must have the blocks' width (both references
** build it from the same config). Its embedding is the head's output: embed_dim = W. */
static cdb_status load_vision_siglip(load_ctx *c, const cdb_model_params *p) {
    cdb_model *m = c->m;
    cdb_clip_tower *v = &m->vision;
    const siglip_vnames *n = &k_siglip_vision[c->nm == NAMING_OC_SIGLIP];
    cdb_clip_block *h = &v->head;
    cdb_status rc = CDB_OK;
    int64_t d[4];
    int W, P, G, N, nd, out_w, fc_w, proj_w;
    char name[96];

    snprintf(name, sizeof name, "%s.weight", n->patch);
    if ((rc = fetch_patch(c, name, v, &W, &P)) != CDB_OK) return rc;
    d[0] = W;
    if ((rc = fetch_upload(c, &v->patch_b, CDB_K_W_PARAM, 1, d, "%s.bias", n->patch)) != CDB_OK)
        return rc;
    nd = c->nm == NAMING_OC_SIGLIP ? 3 : 2; /* timm's pos_embed [1, N, W] */
    d[0] = 1, d[nd - 2] = -1, d[nd - 1] = W;
    if ((rc = fetch_upload(c, &v->pos, CDB_K_W_EMBED, nd, d, "%s", n->pos)) != CDB_OK) return rc;
    N = (int)d[nd - 2];
    G = (int)lround(sqrt((double)N));
    if (G * G != N)
        return cdb_seterr(CDB_CORRUPT, "vision positional embedding has %d rows, not a square", N);
    if ((rc = check_grid(G, P, p)) != CDB_OK) return rc;
    if ((rc = fetch_layernorm(c, "", n->ln_post, W, &v->ln_post_g, &v->ln_post_b)) != CDB_OK)
        return rc;
    v->width = W;
    if ((rc = load_blocks(c, 1, k_names[c->nm].vb, n->block_fmt, W, v)) != CDB_OK) return rc;
    /* the MAP head */
    d[0] = 1, d[1] = 1, d[2] = W;
    if ((rc = fetch_upload(c, &v->probe, CDB_K_W_EMBED, 3, d, "%s%s", n->head, n->probe)) != CDB_OK)
        return rc;
    if (n->in_proj_w) {
        if ((rc = load_in_proj(c, n->head, n->in_proj_w, n->in_proj_b, W, 1, h)) != CDB_OK)
            return rc;
    } else {
        int qo = W, kvo = 2 * W;
        if ((rc = fetch_linear(c, n->head, n->q, &qo, W, &h->q_w, &h->q_b)) != CDB_OK ||
            (rc = fetch_linear(c, n->head, n->kv, &kvo, W, &h->kv_w, &h->kv_b)) != CDB_OK)
            return rc;
    }
    out_w = W, fc_w = v->mlp_width, proj_w = W;
    if ((rc = fetch_linear(c, n->head, n->out, &out_w, W, &h->out_w, &h->out_b)) != CDB_OK ||
        (rc = fetch_layernorm(c, n->head, n->ln, W, &h->ln2_g, &h->ln2_b)) != CDB_OK ||
        (rc = fetch_linear(c, n->head, n->fc, &fc_w, W, &h->fc_w, &h->fc_b)) != CDB_OK ||
        (rc = fetch_linear(c, n->head, n->proj, &proj_w, fc_w, &h->proj_w, &h->proj_b)) != CDB_OK)
        return rc;
    m->info.embed_dim = W;
    vit_info(m, G, P);
    return CDB_OK;
}

/* ---- the ModifiedResNet image tower -------------------------------------------- */

#define BN_EPS 1e-5 /* torch.nn.BatchNorm2d's default, as OpenAI's ModifiedResNet */

/* A convolution wname [cout, cin, k, k] (*cout, *cin < 0: any, returned) and its
** BatchNorm bn.{weight, bias, running_mean, running_var} [cout], folded in double
** into cv: w' = w * s, b' = beta - mean * s with s = gamma / sqrt(var + eps), the
** columns reordered to (ky, kx, cin) for the NHWC im2col. The running statistics
** are buffers, not parameters: not counted in info.n_params (OpenCLIP's totals). */
static cdb_status load_rn_conv(load_ctx *c, const char *wname, const char *bn, int *cout,
                               int *cin, int k, int stride, int pad, cdb_rn_conv *cv) {
    static const char *bn_keys[4] = {"weight", "bias", "running_mean", "running_var"};
    const cdb_st_tensor *tw, *tb[4];
    cdb_status rc = CDB_OK;
    int64_t d[4] = {*cout, *cin, k, k};
    float *w = NULL, *f[4] = {NULL, NULL, NULL, NULL}, *wf = NULL, *bf = NULL;
    int co, ci;

    if ((rc = get_t(c, &tw, 4, d, "%s", wname)) != CDB_OK) goto cleanup;
    co = (int)d[0];
    ci = (int)d[1];
    for (int i = 0; i < 4; i++) {
        d[0] = co;
        if ((rc = get_t(c, &tb[i], 1, d, "%s.%s", bn, bn_keys[i])) != CDB_OK) goto cleanup;
        if (i >= 2) c->n_params -= tb[i]->n_elems;
    }
    *cout = co, *cin = ci;
    cv->cout = co, cv->cin = ci, cv->k = k, cv->stride = stride, cv->pad = pad;
    if (c->inspect) goto cleanup; /* validated; nothing is read */
    w = widen(tw);
    for (int i = 0; i < 4; i++) f[i] = widen(tb[i]);
    wf = malloc((size_t)tw->n_elems * sizeof *wf);
    bf = malloc((size_t)co * sizeof *bf);
    if (!w || !f[0] || !f[1] || !f[2] || !f[3] || !wf || !bf) {
        rc = cdb_seterr(CDB_NOMEM, "folding '%s' into '%s'", bn, wname);
        goto cleanup;
    }
    for (int o = 0; o < co; o++) {
        double var = f[3][o], sc;
        if (!(var + BN_EPS > 0)) { /* also NaN */
            rc = cdb_seterr(CDB_CORRUPT, "tensor '%s.running_var'[%d] = %g: a variance must "
                            "be >= 0", bn, o, var);
            goto cleanup;
        }
        sc = (double)f[0][o] / sqrt(var + BN_EPS);
        bf[o] = (float)((double)f[1][o] - (double)f[2][o] * sc);
        for (int i = 0; i < ci; i++)
            for (int ky = 0; ky < k; ky++)
                for (int kx = 0; kx < k; kx++)
                    wf[(((size_t)o * k + ky) * k + kx) * ci + i] =
                        (float)(w[(((size_t)o * ci + i) * k + ky) * k + kx] * sc);
    }
    rc = upload_matrix(c, wf, CDB_K_F32, co, tw->n_elems / co, 0, &cv->w);
    if (rc == CDB_OK)
        rc = cdb_k_weight_upload(c->m->be, bf, CDB_K_F32, (size_t)co, CDB_K_W_PARAM, 0,
                                 &cv->b);
    drop_pages(tw);
    for (int i = 0; i < 4; i++) drop_pages(tb[i]);
cleanup:
    free(w);
    for (int i = 0; i < 4; i++) free(f[i]);
    free(wf);
    free(bf);
    return rc;
}

/* One convolution of a Bottleneck (block prefix pre): pre`name`.weight with its
** BatchNorm pre`bn`, stride 1 (the anti-aliasing pool does the striding), "same"
** padding for k = 3. */
static cdb_status load_block_conv(load_ctx *c, const char *pre, const char *name,
                                  const char *bn, int cout, int cin, int k, cdb_rn_conv *cv) {
    char wn[128], bnn[128];
    snprintf(wn, sizeof wn, "%s%s.weight", pre, name);
    snprintf(bnn, sizeof bnn, "%s%s", pre, bn);
    return load_rn_conv(c, wn, bnn, &cout, &cin, k, 1, k / 2, cv);
}

/* OpenAI's ModifiedResNet, its architecture read from the shapes as OpenAI's
** build_model reads it: blocks per stage from the layerN.M keys, the base width from
** layer1.0.conv1, the grid from the attention pool's positional embedding (image size
** = 32 x grid); heads = 32 * width / head_width, head_width from
** open_clip_config.json's vision_cfg (OpenCLIP) else 64 (OpenAI). Every tensor's
** shape follows from those, and is checked. */
static cdb_status load_vision_rn(load_ctx *c, const cdb_model_params *p) {
    cdb_model *m = c->m;
    cdb_rn_tower *t = &m->rn;
    cdb_status rc = CDB_OK;
    const cdb_st_tensor *tk[2], *tv[2];
    int64_t d[2];
    int W, PW, S, G, hw = 64, inpl, idx = 0, co, ci;
    char fmt[64], wn[128];
    json_t *jhw;

    m->vision_rn = 1;
    for (int s = 0; s < 4; s++) {
        snprintf(fmt, sizeof fmt, "visual.layer%d.%%d.", s + 1);
        t->stage_blocks[s] = count_layers(m, fmt, "conv1.weight");
        if (t->stage_blocks[s] == 0) {
            rc = cdb_seterr(CDB_CORRUPT, "ResNet image tower: no 'visual.layer%d.0.conv1.weight' "
                            "(ModifiedResNet has 4 stages)", s + 1);
            goto cleanup;
        }
        t->n_blocks += t->stage_blocks[s];
    }
    {
        const cdb_st_tensor *w0 = find(m, "visual.layer1.0.conv1.weight");
        if (w0->n_dims != 4 || w0->shape[0] < 2 || w0->shape[0] % 2 || w0->shape[0] > 16384) {
            rc = cdb_seterr(CDB_CORRUPT, "'%s': %d dims, %lld outputs (an even base width <= "
                            "16384 expected)", w0->name, w0->n_dims, (long long)w0->shape[0]);
            goto cleanup;
        }
        W = (int)w0->shape[0];
    }
    t->width = W;
    PW = 32 * W;
    /* the stem: 3x3 stride 2 (3 -> W/2), 3x3 (W/2 -> W/2), 3x3 (W/2 -> W) */
    co = W / 2, ci = 3;
    if ((rc = load_rn_conv(c, "visual.conv1.weight", "visual.bn1", &co, &ci, 3, 2, 1,
                           &t->stem[0])) != CDB_OK)
        goto cleanup;
    co = W / 2, ci = W / 2;
    if ((rc = load_rn_conv(c, "visual.conv2.weight", "visual.bn2", &co, &ci, 3, 1, 1,
                           &t->stem[1])) != CDB_OK)
        goto cleanup;
    co = W, ci = W / 2;
    if ((rc = load_rn_conv(c, "visual.conv3.weight", "visual.bn3", &co, &ci, 3, 1, 1,
                           &t->stem[2])) != CDB_OK)
        goto cleanup;
    t->blocks = calloc((size_t)t->n_blocks, sizeof *t->blocks);
    if (!t->blocks) {
        rc = cdb_seterr(CDB_NOMEM, "ResNet blocks");
        goto cleanup;
    }
    inpl = W;
    for (int s = 0; s < 4; s++) {
        const int planes = W << s;
        for (int j = 0; j < t->stage_blocks[s]; j++, idx++) {
            cdb_rn_block *b = &t->blocks[idx];
            const char *pre = fmt;
            int need_down, has_down;
            b->stride = s > 0 && j == 0 ? 2 : 1;
            snprintf(fmt, sizeof fmt, "visual.layer%d.%d.", s + 1, j);
            if ((rc = load_block_conv(c, pre, "conv1", "bn1", planes, inpl, 1, &b->c1)) ||
                (rc = load_block_conv(c, pre, "conv2", "bn2", planes, planes, 3, &b->c2)) ||
                (rc = load_block_conv(c, pre, "conv3", "bn3", 4 * planes, planes, 1, &b->c3)))
                goto cleanup;
            need_down = b->stride > 1 || inpl != 4 * planes;
            snprintf(wn, sizeof wn, "%sdownsample.0.weight", pre);
            has_down = find(m, wn) != NULL;
            if (has_down != need_down) {
                rc = cdb_seterr(CDB_CORRUPT, "'%s' %s: ModifiedResNet has a downsample exactly "
                                "where a block changes stride or width", wn,
                                has_down ? "present" : "missing");
                goto cleanup;
            }
            if (need_down && (rc = load_block_conv(c, pre, "downsample.0", "downsample.1",
                                                   4 * planes, inpl, 1, &b->down)))
                goto cleanup;
            inpl = 4 * planes;
        }
    }
    /* the attention pool over layer4's 32 * W channels */
    d[0] = -1, d[1] = PW;
    rc = fetch_upload(c, &t->pos, CDB_K_W_EMBED, 2, d, "visual.attnpool.positional_embedding");
    if (rc != CDB_OK) goto cleanup;
    S = (int)d[0];
    G = (int)lround(sqrt((double)(S - 1)));
    if (S < 2 || G * G != S - 1) {
        rc = cdb_seterr(CDB_CORRUPT, "attention pool positional embedding has %d rows, not 1 + "
                        "a square", S);
        goto cleanup;
    }
    if ((int64_t)G * 32 > 16384) {
        rc = cdb_seterr(CDB_CORRUPT, "ResNet tower: a %dx%d grid (image size %lld > 16384)", G, G,
                        (long long)G * 32);
        goto cleanup;
    }
    if (p->image_size_override && p->image_size_override != G * 32) {
        rc = cdb_seterr(CDB_UNSUPPORTED, "image size %d requested, but the attention pool's "
                        "positional embedding fixes it at %d", p->image_size_override, G * 32);
        goto cleanup;
    }
    co = PW;
    if ((rc = fetch_linear(c, "visual.attnpool.", "q_proj", &co, PW, &t->q_w, &t->q_b)) != CDB_OK)
        goto cleanup;
    for (int i = 0; i < 2; i++) {
        const char *nm = i ? "v_proj" : "k_proj";
        d[0] = PW, d[1] = PW;
        if ((rc = get_t(c, &tk[i], 2, d, "visual.attnpool.%s.weight", nm)) != CDB_OK) goto cleanup;
        d[0] = PW;
        if ((rc = get_t(c, &tv[i], 1, d, "visual.attnpool.%s.bias", nm)) != CDB_OK) goto cleanup;
    }
    if ((rc = upload_concat(c, tk, 2, CDB_K_W_MATRIX, &t->kv_w)) != CDB_OK) goto cleanup;
    if ((rc = upload_concat(c, tv, 2, CDB_K_W_PARAM, &t->kv_b)) != CDB_OK) goto cleanup;
    co = -1;
    if ((rc = fetch_linear(c, "visual.attnpool.", "c_proj", &co, PW, &t->c_w, &t->c_b)) != CDB_OK)
        goto cleanup;
    m->info.embed_dim = co;
    jhw = jget(c->oc_cfg, "model_cfg", "vision_cfg", "head_width", NULL);
    if (!jhw) jhw = jget(c->oc_cfg, "vision_cfg", "head_width", NULL);
    if (json_is_integer(jhw)) {
        json_int_t v = json_integer_value(jhw); /* untrusted: range-checked */
        if (v <= 0 || v > PW || PW % v) {
            rc = cdb_seterr(CDB_CORRUPT, "open_clip_config.json: head_width %lld does not divide "
                            "the attention pool's width %d", (long long)v, PW);
            goto cleanup;
        }
        hw = (int)v;
    }
    t->grid = G;
    t->pool_width = PW;
    t->heads = PW / hw;
    m->info.image_size = 32 * G;
    m->info.patch_size = 32;
    m->info.vision_width = W;
    m->info.vision_layers = t->n_blocks;
    m->info.vision_heads = t->heads;
    m->info.vision_mlp_width = 0;
    memcpy(m->info.vision_stage_blocks, t->stage_blocks, sizeof t->stage_blocks);
    m->info.vision_pool_width = PW;
    m->info.vision_family = "ResNet";
    m->info.has_vision = 1;
cleanup:
    return rc;
}

static cdb_status load_text(load_ctx *c) {
    cdb_model *m = c->m;
    cdb_clip_tower *x = &m->text;
    const tensor_names *n = &k_names[c->nm];
    cdb_status rc;
    int64_t d[2] = {-1, -1};
    int W, E;

    if ((rc = fetch_upload(c, &x->tok_emb, CDB_K_W_TABLE, 2, d, "%s", n->t_tok)) != CDB_OK)
        return rc;
    m->info.vocab_size = (int)d[0];
    W = (int)d[1];
    d[0] = -1, d[1] = W;
    if ((rc = fetch_upload(c, &x->pos, CDB_K_W_EMBED, 2, d, "%s", n->t_pos)) != CDB_OK) return rc;
    m->info.context_length = (int)d[0];
    x->act = c->tact;
    x->ln_eps = c->teps;
    x->pool_last = c->siglip;
    if ((rc = fetch_layernorm(c, "", n->t_ln_final, W, &x->ln_post_g, &x->ln_post_b)) != CDB_OK)
        return rc;
    if (c->siglip) { /* a Linear with bias: HF's text_model.head, OpenCLIP's text_projection */
        E = -1;
        rc = fetch_linear(c, n->t_head, "", &E, W, &x->proj, &x->proj_b);
    } else {
        rc = fetch_projection(c, n->t_proj, W, &E, &x->proj);
    }
    if (rc != CDB_OK) return rc;
    if (m->info.has_vision && E != m->info.embed_dim)
        return cdb_seterr(CDB_CORRUPT, "text projection gives %d dims, image %s %d", E,
                          c->siglip ? "head" : "projection", m->info.embed_dim);
    m->info.embed_dim = E;
    x->width = W;
    if ((rc = load_blocks(c, 0, n->tb, n->t_block_fmt, W, x)) != CDB_OK) return rc;
    m->info.text_width = W;
    m->info.text_mlp_width = x->mlp_width;
    m->info.text_layers = x->layers;
    m->info.text_heads = x->heads;
    m->info.has_text = 1;
    return CDB_OK;
}

static void free_tower(cdb_k_backend *be, cdb_clip_tower *t) {
    if (be && t->blocks) /* no backend (inspect only, or failed early): no buffers */
        for (int i = 0; i < t->layers; i++) {
            cdb_clip_block *b = &t->blocks[i];
            cdb_k_buf *all[] = {b->ln1_g, b->ln1_b, b->qkv_w, b->qkv_b, b->out_w, b->out_b,
                                b->ln2_g, b->ln2_b, b->fc_w,  b->fc_b,  b->proj_w, b->proj_b,
                                b->q_w,   b->q_b,   b->kv_w,  b->kv_b};
            for (size_t j = 0; j < sizeof all / sizeof all[0]; j++) cdb_k_buf_free(be, all[j]);
        }
    if (be) {
        cdb_clip_block *h = &t->head;
        cdb_k_buf *all[] = {h->q_w,   h->q_b,   h->kv_w,  h->kv_b, h->out_w,  h->out_b,
                            h->ln2_g, h->ln2_b, h->fc_w,  h->fc_b, h->proj_w, h->proj_b,
                            t->probe, t->patch_b, t->proj_b};
        for (size_t j = 0; j < sizeof all / sizeof all[0]; j++) cdb_k_buf_free(be, all[j]);
    }
    free(t->blocks);
    if (be) {
        cdb_k_buf *rest[] = {t->ln_pre_g, t->ln_pre_b, t->ln_post_g, t->ln_post_b, t->proj,
                             t->patch_w,  t->cls,      t->pos,       t->tok_emb};
        for (size_t j = 0; j < sizeof rest / sizeof rest[0]; j++) cdb_k_buf_free(be, rest[j]);
    }
    memset(t, 0, sizeof *t);
}

/* ---- files, hash, tokenizer -------------------------------------------------- */

static int ends_with(const char *s, const char *suf) {
    size_t n = strlen(s), k = strlen(suf);
    return n >= k && !strcmp(s + n - k, suf);
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The weights files of a folder: model.safetensors / open_clip_model.safetensors
** when present, else every *.safetensors (sharded checkpoints), in name order. */
static cdb_status list_weights(const char *dir, char ***out, int *n_out) {
    static const char *preferred[] = {"open_clip_model.safetensors", "model.safetensors"};
    char **v = NULL;
    int n = 0, cap = 0;
    DIR *d;
    struct dirent *e;
    struct stat st;
    char path[4096];
    *out = NULL;
    *n_out = 0;
    for (size_t i = 0; i < sizeof preferred / sizeof preferred[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, preferred[i]);
        if (stat(path, &st) == 0) {
            v = malloc(sizeof *v);
            if (!v || !(v[0] = strdup(path))) return cdb_seterr(CDB_NOMEM, "model files");
            *out = v;
            *n_out = 1;
            return CDB_OK;
        }
    }
    d = opendir(dir);
    if (!d) return cdb_seterr(CDB_IO, "opendir %s: %s", dir, strerror(errno));
    while ((e = readdir(d)) != NULL) {
        if (!ends_with(e->d_name, ".safetensors")) continue;
        if (n == cap) {
            char **nv = realloc(v, (cap = cap ? 2 * cap : 8) * sizeof *v);
            if (!nv) break;
            v = nv;
        }
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (!(v[n] = strdup(path))) break;
        n++;
    }
    closedir(d);
    if (n == 0) {
        free(v);
        return cdb_seterr(CDB_NOTFOUND, "%s: no .safetensors file in the model folder", dir);
    }
    qsort(v, n, sizeof *v, cmp_str);
    *out = v;
    *n_out = n;
    return CDB_OK;
}

static void hash_files(cdb_model *m) {
    XXH3_state_t *s = XXH3_createState();
    XXH128_hash_t h;
    if (!s) return;
    XXH3_128bits_reset(s);
    for (int i = 0; i < m->n_files; i++) {
        /* In 64 MiB steps, dropping each from our RSS once hashed (what is used later
        ** faults back in from the page cache, what is converted is read once): the
        ** hash of a 5 GB ViT-bigG/14 never holds more than one step resident. */
        const size_t step = (size_t)64 << 20;
        const unsigned char *base = m->files[i]->map;
        for (size_t off = 0; off < m->files[i]->size; off += step) {
            size_t n = m->files[i]->size - off < step ? m->files[i]->size - off : step;
            XXH3_128bits_update(s, base + off, n);
            madvise((void *)(base + off), n, MADV_DONTNEED); /* off is page-aligned */
        }
    }
    h = XXH3_128bits_digest(s);
    XXH3_freeState(s);
    snprintf(m->info.hash, sizeof m->info.hash, "%016llx%016llx", (unsigned long long)h.high64,
             (unsigned long long)h.low64);
}

/* The weights files' key: XXH3-128 over (dev, inode, size, mtime, ctime) of each
** file in order, as hex; "" when one cannot be stat'ed. Any rewrite, replacement
** or touch of a file changes it (ctime cannot be set back by the user). */
static void files_key(char *const *paths, int n, char out[33]) {
    XXH3_state_t *s = XXH3_createState();
    XXH128_hash_t h;
    out[0] = '\0';
    if (!s) return;
    XXH3_128bits_reset(s);
    for (int i = 0; i < n; i++) {
        struct stat st;
        int64_t v[7];
        if (stat(paths[i], &st) != 0) {
            XXH3_freeState(s);
            return;
        }
        v[0] = (int64_t)st.st_dev;
        v[1] = (int64_t)st.st_ino;
        v[2] = (int64_t)st.st_size;
        v[3] = (int64_t)st.st_mtim.tv_sec;
        v[4] = (int64_t)st.st_mtim.tv_nsec;
        v[5] = (int64_t)st.st_ctim.tv_sec;
        v[6] = (int64_t)st.st_ctim.tv_nsec;
        XXH3_128bits_update(s, v, sizeof v);
    }
    h = XXH3_128bits_digest(s);
    XXH3_freeState(s);
    snprintf(out, 33, "%016llx%016llx", (unsigned long long)h.high64,
             (unsigned long long)h.low64);
}

/* Whether msg names path, or a file in it ("m1/vocab.json"): a model's error that
** does gets no "model <path>: " context (the path would be said twice). */
static int names_path(const char *msg, const char *path) {
    size_t n = strlen(path);
    for (const char *p = msg; n && (p = strstr(p, path)); p++)
        if ((p == msg || p[-1] == ' ') && strchr("/: ", p[n])) return 1;
    return 0;
}

static int is_hex32(const char *s) {
    if (!s) return 0;
    for (int i = 0; i < 32; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
    return s[32] == '\0';
}

/* SigLIP2's NaFlex checkpoints (native aspect ratio, a variable number of patches):
** Hugging Face's Siglip2Model (model_type "siglip2", a Linear patch embedding over
** flattened patches), OpenCLIP's NaFlexVit towers ('visual.trunk.embeds.*', a
** "naflex" timm model). Refused with a message that names the FixRes alternative. */
static cdb_status check_naflex(load_ctx *c, const char *path) {
    const char *mt = json_string_value(json_object_get(c->hf_cfg, "model_type"));
    const char *tm = json_string_value(json_object_get(oc_tower_cfg(c, 1), "timm_model_name"));
    const cdb_st_tensor *pe = find(c->m, "vision_model.embeddings.patch_embedding.weight");
    if ((mt && !strcmp(mt, "siglip2")) || (pe && pe->n_dims == 2) ||
        has_prefix_key(c->m, "visual.trunk.embeds.") || (tm && strstr(tm, "naflex")))
        return cdb_seterr(CDB_UNSUPPORTED, "%s: a SigLIP2 NaFlex model (variable resolution "
                          "and aspect ratio) is not supported; use a fixed-resolution (FixRes) "
                          "SigLIP2 checkpoint such as google/siglip2-base-patch16-224 or "
                          "timm/ViT-B-16-SigLIP2", path);
    return CDB_OK;
}

/* One scalar tensor (shape [] or [1], a float type) as a float; 0 when absent or not
** a scalar. */
static int read_scalar(const cdb_model *m, const char *name, float *out) {
    const cdb_st_tensor *t = find(m, name);
    float *f;
    *out = 0;
    if (!t || t->n_elems != 1 ||
        (t->dtype != CDB_ST_F32 && t->dtype != CDB_ST_F16 && t->dtype != CDB_ST_BF16))
        return 0;
    if (!(f = widen(t))) return 0;
    *out = f[0];
    free(f);
    return isfinite(*out);
}

/* logit_scale and logit_bias: top-level tensors in every layout (OpenCLIP's are 0-d,
** Hugging Face's [1]). Not counted in n_params (as OpenCLIP's totals exclude them). */
static void read_logit_params(cdb_model *m) {
    m->info.has_logit_scale = read_scalar(m, "logit_scale", &m->info.logit_scale);
    m->info.has_logit_bias = read_scalar(m, "logit_bias", &m->info.logit_bias);
}

/* The tokenizer at path, through the tokenizer cache when the open uses it. */
static cdb_status open_tok(const load_ctx *c, const char *path, cdb_tok_pipeline pipe,
                           cdb_tok **out) {
    if (c->tok_cache) return cdb_tok_open_cached(path, pipe, c->tok_cache_dir, out);
    return cdb_tok_open_pipeline(path, pipe, out);
}

/* SigLIP's tokenizer: p->tokenizer_path, else the folder's spiece.model (SigLIP),
** tokenizer.model (Gemma, SigLIP2) or, without those, its tokenizer.json, through the
** pipeline of the layout's reference: transformers' for a Hugging Face folder,
** OpenCLIP's HFTokenizer(clean='canonicalize') for a timm hub folder
** (docs/tokenizer.md). A folder without any, or whose tokenizer.json uses a component
** clipdb does not implement, opens with text as ids; a broken one is an error. Never
** CLIP's BPE: its ids would be meaningless to a SigLIP text tower. */
static cdb_status open_siglip_tokenizer(load_ctx *c, const cdb_model_params *p) {
    cdb_model *m = c->m;
    const char *src = p->tokenizer_path ? p->tokenizer_path : c->dir;
    cdb_tok_pipeline pipe = c->nm == NAMING_OC_SIGLIP ? CDB_TOK_PIPE_OPENCLIP : CDB_TOK_PIPE_AUTO;
    cdb_status rc;
    m->tok = NULL;
    if (c->oc_cfg) {
        json_t *clean = jget(oc_tower_cfg(c, 0), "tokenizer_kwargs", "clean", NULL);
        if (clean && (!json_is_string(clean) ||
                      strcmp(json_string_value(clean), "canonicalize") != 0)) {
            CDB_LOG_INFO("model %s: open_clip_config.json asks for a text cleaning other than "
                         "'canonicalize', which clipdb does not reproduce; text must be given "
                         "as token ids", m->name);
            return CDB_OK;
        }
    }
    if (!src) {
        CDB_LOG_INFO("model %s: a single file has no SigLIP tokenizer beside it; text must be "
                     "given as token ids (or name the tokenizer)", m->name);
        return CDB_OK;
    }
    rc = open_tok(c, src, pipe, &m->tok);
    if (rc != CDB_OK) {
        if (p->tokenizer_path || (rc != CDB_NOTFOUND && rc != CDB_UNSUPPORTED)) return rc;
        CDB_LOG_INFO("model %s: no SigLIP tokenizer (%s); text must be given as token ids",
                     m->name, cdb_errmsg());
        cdb_clearerr();
        return CDB_OK;
    }
    if (cdb_tok_kind_of(m->tok) == CDB_TOK_KIND_CLIP_BPE) {
        cdb_tok_free(m->tok);
        m->tok = NULL;
        return cdb_seterr(CDB_INVALID, "model %s: %s is a CLIP vocabulary; a SigLIP text "
                          "tower needs its SentencePiece or tokenizer.json tokenizer", m->name,
                          src);
    }
    if (cdb_tok_vocab_size(m->tok) > m->info.vocab_size) {
        int n = cdb_tok_vocab_size(m->tok);
        cdb_tok_free(m->tok);
        m->tok = NULL;
        return cdb_seterr(CDB_CORRUPT, "model %s: the tokenizer in %s has %d tokens, the "
                          "model's embedding %d", m->name, src, n, m->info.vocab_size);
    }
    return CDB_OK;
}

int cdb_model_match_probability(const cdb_model_info *mi, float cos, float *p) {
    float z;
    if (!mi || !mi->has_logit_scale || !mi->has_logit_bias) return 0;
    z = expf(mi->logit_scale) * cos + mi->logit_bias;
    *p = 1.0f / (1.0f + expf(-z)); /* z far below 0: expf(-z) = inf, p = 0 */
    return 1;
}

static cdb_status open_tokenizer(load_ctx *c, const cdb_model_params *p) {
    cdb_model *m = c->m;
    char path[4096];
    struct stat st;
    const char *env = getenv("CLIPDB_VOCAB");
    const char *explicit_path = NULL;
    cdb_status rc;
    if (c->siglip) return open_siglip_tokenizer(c, p);
    if (p->tokenizer_path) {
        explicit_path = p->tokenizer_path;
    } else if (c->dir) {
        snprintf(path, sizeof path, "%s/vocab.json", c->dir);
        if (stat(path, &st) == 0) explicit_path = c->dir;
        snprintf(path, sizeof path, "%s/bpe_simple_vocab_16e6.txt.gz", c->dir);
        if (!explicit_path && stat(path, &st) == 0) explicit_path = path;
    }
    if (explicit_path) {
        if ((rc = open_tok(c, explicit_path, CDB_TOK_PIPE_AUTO, &m->tok)) != CDB_OK)
            return rc; /* "tokenizer: <its file>: why": no context to add */
    } else {
        char found[4096];
        const char *def = env && *env ? env : cdb_data_path(CDB_STD_VOCAB, found, sizeof found, NULL);
        if (!def) {
            CDB_LOG_WARN("model %s: no tokenizer (the standard vocabulary %s is neither "
                         "installed with clipdb nor in its source tree; set CLIPDB_VOCAB); "
                         "text must be given as token ids", m->name, CDB_STD_VOCAB);
            m->tok = NULL;
            return CDB_OK;
        }
        if (open_tok(c, def, CDB_TOK_PIPE_AUTO, &m->tok) != CDB_OK) {
            CDB_LOG_WARN("model %s: no tokenizer (standard vocabulary %s: %s); text must be "
                         "given as token ids", m->name, def, cdb_errmsg());
            m->tok = NULL;
            cdb_clearerr();
            return CDB_OK;
        }
        if (cdb_tok_vocab_size(m->tok) > m->info.vocab_size) {
            /* A model with its own small vocabulary and no tokenizer files. */
            CDB_LOG_INFO("model %s: the standard vocabulary %s (%d tokens) does not fit "
                         "the model's %d-token embedding; text must be given as token ids",
                         m->name, def, cdb_tok_vocab_size(m->tok), m->info.vocab_size);
            cdb_tok_free(m->tok);
            m->tok = NULL;
            return CDB_OK;
        }
    }
    if (cdb_tok_vocab_size(m->tok) > m->info.vocab_size)
        CDB_LOG_WARN("model %s: tokenizer has %d tokens, the model's embedding %d",
                     m->name, cdb_tok_vocab_size(m->tok), m->info.vocab_size);
    if (cdb_tok_eot_id(m->tok) >= 0 && cdb_tok_eot_id(m->tok) < m->info.vocab_size)
        m->eot_id = cdb_tok_eot_id(m->tok);
    return CDB_OK;
}

/* ---- public API ----------------------------------------------------------------- */

/* m->pc per params.pack_cache (encoder.h): AUTO is on for text-only opens (a query's)
** unless $CLIPDB_PACK_CACHE is "0". info.pack_cache says why when it is off. */
/* The tokenizer cache (cdb_tok_open_cached) follows the packed matrix cache's policy
** (a query's open), in its folder, unless $CLIPDB_TOK_CACHE is "0". */
static int tok_cache_on(const cdb_model_params *p) {
    const char *env = getenv("CLIPDB_TOK_CACHE");
    if (env && !strcmp(env, "0")) return 0;
    return p->pack_cache == CDB_PACK_CACHE_ON ||
           (p->pack_cache == CDB_PACK_CACHE_AUTO && !p->load_vision && p->load_text);
}

static void begin_pack_cache(cdb_model *m, const cdb_model_params *p) {
    const char *env = getenv("CLIPDB_PACK_CACHE");
    char why[160];
    int on = p->pack_cache == CDB_PACK_CACHE_ON ||
             (p->pack_cache == CDB_PACK_CACHE_AUTO && !p->load_vision && p->load_text &&
              !(env && !strcmp(env, "0")));
    m->info.pack_cache = "off";
    if (!on) return;
    m->pc = cdb_pack_cache_begin(m->be, p->pack_cache_dir, m->info.hash,
                                 !p->load_vision ? "text" : !p->load_text ? "image" : "both",
                                 why, sizeof why);
    if (!m->pc) CDB_LOG_DEBUG("model %s: no packed matrix cache: %s", m->name, why);
}

cdb_status cdb_model_open(const char *path, const cdb_model_params *params, cdb_model **out) {
    cdb_model_params p = params ? *params : cdb_model_params_default();
    cdb_status rc = CDB_OK;
    cdb_model *m = NULL;
    load_ctx c;
    char **paths = NULL;
    int n_paths = 0;
    struct stat st;
    const char *base;
    int add_ctx = 0;
    char key0[33], key1[33];

    memset(&c, 0, sizeof c);
    c.inspect = p.inspect_only != 0;
    *out = NULL;
    if (!path) return cdb_seterr(CDB_INVALID, "model path is NULL");
    if (stat(path, &st) != 0)
        return cdb_seterr(errno == ENOENT ? CDB_NOTFOUND : CDB_IO, "model %s: %s", path,
                          strerror(errno));
    m = calloc(1, sizeof *m);
    if (!m) return cdb_seterr(CDB_NOMEM, "model");
    c.m = m;
    base = strrchr(path, '/');
    base = base && base[1] ? base + 1 : path;
    m->name = strdup(base);
    m->info.name = m->name ? m->name : "";
    m->info.description = "";
    m->info.pack_cache = "off";
    m->info.pack_cache_path = "";
    m->info.tok_cache = "off";
    c.tok_cache = tok_cache_on(&p);
    c.tok_cache_dir = p.pack_cache_dir;
    if (S_ISDIR(st.st_mode)) {
        c.dir = path;
        if ((rc = list_weights(path, &paths, &n_paths)) != CDB_OK) goto cleanup;
    } else {
        paths = malloc(sizeof *paths);
        if (!paths || !(paths[0] = strdup(path))) {
            rc = cdb_seterr(CDB_NOMEM, "model");
            goto cleanup;
        }
        n_paths = 1;
    }
    m->files = calloc(n_paths, sizeof *m->files);
    if (!m->files) {
        rc = cdb_seterr(CDB_NOMEM, "model");
        goto cleanup;
    }
    files_key(paths, n_paths, key0); /* before mapping: a later change shows as a mismatch */
    for (int i = 0; i < n_paths; i++) {
        if ((rc = cdb_st_open(paths[i], &m->files[i])) != CDB_OK) goto cleanup; /* names the file */
        m->n_files++;
    }
    add_ctx = 1;

    /* Naming and family. SigLIP: Hugging Face's SiglipModel (its heads, or its
    ** post_layernorm without a class token), OpenCLIP's timm tower with a MAP head or
    ** its 'text.*' tower. NaFlex (Siglip2Model, timm's NaFlexVit) is refused. */
    if ((rc = load_json(c.dir, "config.json", &c.hf_cfg)) != CDB_OK ||
        (rc = load_json(c.dir, "open_clip_config.json", &c.oc_cfg)) != CDB_OK ||
        (rc = load_json(c.dir, "preprocessor_config.json", &c.pp_cfg)) != CDB_OK)
        goto cleanup;
    if ((rc = check_naflex(&c, path)) != CDB_OK) goto cleanup;
    if (find(m, "vision_model.head.probe") || find(m, "text_model.head.weight")) {
        c.siglip = 1;
        c.nm = NAMING_HF;
    } else if (find(m, "visual.trunk.attn_pool.latent") || find(m, "text.token_embedding.weight")) {
        c.siglip = 1;
        c.nm = NAMING_OC_SIGLIP;
    } else if (p.load_vision && has_prefix_key(m, "visual.trunk.")) {
        rc = cdb_seterr(CDB_UNSUPPORTED, "%s: a timm image tower ('visual.trunk.*': OpenCLIP's "
                        "timm-based ResNets such as timm-resnet50d / timm-resnetaa50d / "
                        "timm-resnetblur50, or ConvNeXt): not supported; clipdb runs ViT and "
                        "OpenAI's ModifiedResNet (RN50, RN101, RN50x4, RN50x16, RN50x64) image "
                        "towers (load the text tower alone to use its text side)", path);
        goto cleanup;
    }
    if (c.siglip) {
        /* detected above */
    } else if (has_prefix_key(m, "vision_model.") || has_prefix_key(m, "text_model.")) {
        c.nm = NAMING_HF;
    } else if (has_prefix_key(m, "visual.") || find(m, "token_embedding.weight")) {
        c.nm = NAMING_OPENAI;
    } else {
        rc = cdb_seterr(CDB_CORRUPT, "%s: no CLIP tensors (neither OpenAI 'visual.*' / "
                        "'token_embedding.weight' nor Hugging Face 'vision_model.*' / "
                        "'text_model.*' keys)", path);
        goto cleanup;
    }
    m->info.naming = c.nm == NAMING_HF ? "hf" : c.nm == NAMING_OC_SIGLIP ? "openclip-timm" : "openai";
    m->siglip = c.siglip;
    m->info.family = c.siglip ? "SigLIP" : "CLIP";
    if ((rc = pick_act(&c, &p)) != CDB_OK || (rc = pick_eps(&c)) != CDB_OK) goto cleanup;
    read_logit_params(m);
    {
        const char *md = m->files[0]->metadata_json;
        json_t *j = md ? json_loads(md, 0, NULL) : NULL;
        const char *desc = json_string_value(json_object_get(j, "description"));
        if (desc) m->description = strdup(desc);
        json_decref(j);
        if (m->description) m->info.description = m->description;
    }

    /* The identity: the caller's known hash when the files are provably the ones it
    ** was computed from, else the hash of every byte. */
    if (key0[0] && is_hex32(p.known_hash) && p.known_files_key &&
        !strcmp(p.known_files_key, key0)) {
        memcpy(m->info.hash, p.known_hash, 33);
        m->info.hash_trusted = 1;
    } else if (!c.inspect) {
        hash_files(m);
    }
    files_key(paths, n_paths, key1);
    if (strcmp(key0, key1)) { /* changed while opening: hash what was mapped, record no key */
        if (m->info.hash_trusted && !c.inspect) hash_files(m);
        if (c.inspect) m->info.hash[0] = '\0';
        m->info.hash_trusted = 0;
        key0[0] = '\0';
    }
    memcpy(m->info.files_key, key0, sizeof key0);
    CDB_LOG_DEBUG("model %s: weights hash %s (%s)", m->name, m->info.hash,
                  m->info.hash_trusted ? "recorded; files unchanged"
                  : c.inspect ? "not computed: inspect only" : "computed");

    m->info.inspect_only = c.inspect;
    if (!c.inspect) {
        cdb_k_backend_params bp = cdb_k_backend_params_default();
        bp.device = p.device;
        bp.n_threads = p.n_threads;
        if ((rc = cdb_k_backend_new(&bp, &m->be)) != CDB_OK) goto cleanup;
        begin_pack_cache(m, &p);
    }

    m->info.vision_family = "";
    if (p.load_vision && c.siglip &&
        (find(m, "vision_model.embeddings.patch_embedding.weight") ||
         find(m, "visual.trunk.patch_embed.proj.weight"))) {
        if (!find(m, "vision_model.head.probe") && !find(m, "visual.trunk.attn_pool.latent")) {
            rc = cdb_seterr(CDB_UNSUPPORTED, "%s: a SigLIP image tower without its attention-"
                            "pooling head (vision_use_head false, or timm's global_pool other "
                            "than 'map'): it gives no embedding", path);
            goto cleanup;
        }
        if ((rc = load_vision_siglip(&c, &p)) != CDB_OK) goto cleanup;
    } else if (p.load_vision && c.nm == NAMING_OPENAI &&
        (has_prefix_key(m, "visual.layer1.") || has_prefix_key(m, "visual.attnpool."))) {
        if ((rc = load_vision_rn(&c, &p)) != CDB_OK) goto cleanup; /* ModifiedResNet */
    } else if (p.load_vision && (find(m, "visual.conv1.weight") ||
                                 find(m, "vision_model.embeddings.patch_embedding.weight"))) {
        if ((rc = load_vision(&c, &p)) != CDB_OK) goto cleanup;
    }
    if (p.load_text && (find(m, "token_embedding.weight") ||
                        find(m, "text_model.embeddings.token_embedding.weight") ||
                        find(m, "text.token_embedding.weight"))) {
        if ((rc = load_text(&c)) != CDB_OK) goto cleanup;
    }
    if (!m->info.has_vision && !m->info.has_text) {
        rc = cdb_seterr(CDB_CORRUPT, "%s: no %s tower found", path,
                        p.load_vision && p.load_text ? "image or text"
                        : p.load_vision              ? "image"
                        : p.load_text                ? "text" : "requested");
        goto cleanup;
    }
    {
        int n = 0;
        for (int i = 0; i < 3; i++) n += c.dtype_seen[i] > 0;
        m->info.weights_dtype = n > 1 ? "mixed" : c.dtype_seen[1] ? "F16"
                                : c.dtype_seen[2] ? "BF16" : "F32";
    }
    m->info.n_params = c.n_params;
    m->info.weights_f32_bytes = c.n_params * (int64_t)sizeof(float);
    if (!m->info.has_vision) m->info.act = m->info.text_act;
    if (m->info.has_vision) pick_preprocess(&c);
    m->eot_id = m->info.vocab_size - 1;
    if (m->info.has_text && (rc = open_tokenizer(&c, &p)) != CDB_OK) goto cleanup;
    cdb_pack_cache_end(m->pc);
    m->info.pack_cache = m->pc ? cdb_pack_cache_status(m->pc) : m->info.pack_cache;
    m->info.pack_cache_path = cdb_pack_cache_path(m->pc);
    if (m->tok) m->info.tok_cache = cdb_tok_cache_status(m->tok);
    *out = m;
    m = NULL;

cleanup:
    if (rc != CDB_OK && rc != CDB_NOMEM && add_ctx && !names_path(cdb_errmsg(), path))
        cdb_errctx(rc, "model %s", path);
    json_decref(c.hf_cfg);
    json_decref(c.oc_cfg);
    json_decref(c.pp_cfg);
    for (int i = 0; i < n_paths; i++) free(paths[i]);
    free(paths);
    cdb_model_close(m);
    return rc;
}

void cdb_model_close(cdb_model *m) {
    if (!m) return;
    free_tower(m->be, &m->vision);
    cdb_rn_tower_free(m->be, &m->rn);
    free_tower(m->be, &m->text);
    cdb_k_backend_free(m->be);
    cdb_pack_cache_free(m->pc); /* after the buffers that borrowed its mapping */
    cdb_tok_free(m->tok);
    for (int i = 0; i < m->n_files; i++) cdb_st_close(m->files[i]);
    free(m->files);
    free(m->name);
    free(m->description);
    free(m->act_source);
    free(m);
}

const cdb_model_info *cdb_model_get_info(const cdb_model *m) { return m ? &m->info : NULL; }

const cdb_tok *cdb_model_tokenizer(const cdb_model *m) { return m ? m->tok : NULL; }

/* Each row through kernels' one normalization (the store's too, so a stored vector
** is fp16 of this output). A row it refuses (zero, NaN, Inf) is left as it is: the
** finiteness check and the store refuse it with their own words. */
static void l2_normalize(float *v, int n, int dim) {
    for (int i = 0; i < n; i++) (void)cdb_k_normalize_f32(v + (size_t)i * dim, (size_t)dim, NULL);
}

cdb_status cdb_encode_finish(const cdb_model *m, float *out, int n, int normalize) {
    size_t total = (size_t)n * m->info.embed_dim;
    for (size_t i = 0; i < total; i++)
        if (!isfinite(out[i]))
            return cdb_seterr(CDB_ERROR, "encoder produced a non-finite value (bad weights?)");
    if (normalize) l2_normalize(out, n, m->info.embed_dim);
    return CDB_OK;
}

cdb_status cdb_encode_tokens(cdb_model *m, const int32_t *ids, int n, int normalize, float *out) {
    cdb_status rc;
    if (!m || (!ids && n) || (!out && n) || n < 0) return cdb_seterr(CDB_INVALID, "encode_tokens: bad arguments");
    if (!m->info.has_text) return cdb_seterr(CDB_INVALID, "model %s: text tower not loaded", m->name);
    if (m->info.inspect_only)
        return cdb_seterr(CDB_INVALID, "model %s: opened for inspection only", m->name);
    if (n == 0) return CDB_OK;
    if ((rc = cdb_clip_text_forward(m, ids, n, out)) != CDB_OK) return rc;
    return cdb_encode_finish(m, out, n, normalize);
}

cdb_status cdb_encode_texts(cdb_model *m, const char *const *texts, int n, int normalize,
                            float *out) {
    cdb_status rc = CDB_OK;
    int32_t *ids;
    int ctx;
    if (!m || (!texts && n) || n < 0) return cdb_seterr(CDB_INVALID, "encode_texts: bad arguments");
    if (!m->info.has_text) return cdb_seterr(CDB_INVALID, "model %s: text tower not loaded", m->name);
    if (!m->tok && m->siglip)
        return cdb_seterr(CDB_UNSUPPORTED, "model %s: no SigLIP tokenizer (its folder needs "
                          "spiece.model, tokenizer.model or a tokenizer.json clipdb can read): "
                          "text must be given as token ids", m->name);
    if (!m->tok)
        return cdb_seterr(CDB_UNSUPPORTED, "model %s: no tokenizer (set CLIPDB_VOCAB or the "
                          "tokenizer path)", m->name);
    if (n == 0) return CDB_OK;
    ctx = m->info.context_length;
    ids = malloc((size_t)n * ctx * sizeof *ids);
    if (!ids) return cdb_seterr(CDB_NOMEM, "token ids");
    for (int i = 0; i < n && rc == CDB_OK; i++)
        rc = cdb_tok_tokenize(m->tok, texts[i] ? texts[i] : "", texts[i] ? strlen(texts[i]) : 0,
                              ctx, ids + (size_t)i * ctx, NULL, NULL);
    if (rc == CDB_OK) rc = cdb_encode_tokens(m, ids, n, normalize, out);
    free(ids);
    return rc;
}

cdb_status cdb_encode_pixels(cdb_model *m, const float *pixels, int n, int normalize, float *out) {
    cdb_status rc;
    if (!m || (!pixels && n) || (!out && n) || n < 0)
        return cdb_seterr(CDB_INVALID, "encode_pixels: bad arguments");
    if (!m->info.has_vision)
        return cdb_seterr(CDB_INVALID, "model %s: image tower not loaded", m->name);
    if (m->info.inspect_only)
        return cdb_seterr(CDB_INVALID, "model %s: opened for inspection only", m->name);
    if (n == 0) return CDB_OK;
    if ((rc = cdb_clip_image_forward(m, pixels, n, out)) != CDB_OK) return rc;
    return cdb_encode_finish(m, out, n, normalize);
}

cdb_status cdb_encode_image_file(cdb_model *m, const char *path, const cdb_image_params *ip,
                                 int normalize, float *out) {
    cdb_status rc;
    cdb_image *img = NULL;
    float *px = NULL;
    int sz;
    if (!m || !path || !out) return cdb_seterr(CDB_INVALID, "encode_image_file: bad arguments");
    if (!m->info.has_vision)
        return cdb_seterr(CDB_INVALID, "model %s: image tower not loaded", m->name);
    sz = m->info.preprocess.size;
    if ((rc = cdb_image_load(path, ip, &img)) != CDB_OK) goto cleanup; /* names the path */
    px = malloc((size_t)3 * sz * sz * sizeof(float));
    if (!px) {
        rc = cdb_seterr(CDB_NOMEM, "pixels");
        goto cleanup;
    }
    if ((rc = cdb_image_preprocess(img, &m->info.preprocess, px, NULL)) != CDB_OK) goto cleanup;
    rc = cdb_encode_pixels(m, px, 1, normalize, out);
cleanup:
    if (rc != CDB_OK && img) cdb_errctx(rc, "%s", path); /* once: the load's errors have it */
    cdb_image_free(img);
    free(px);
    return rc;
}
