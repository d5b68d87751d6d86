/*
** cmd_encoder.c: the commands that use the encoder alone, with no database:
** `models` (what a model is), `tokenize` (token ids), `embed` (fp32 embeddings of
** texts and images, JSON or .npy) and `preprocess` (the image tower's input as
** .npy). They exist so users and tests can check each stage against a reference.
*/
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "encoder/encoder.h"
#include "kernels/kernels.h"

/* What open_model loads. */
enum {
    LOAD_VISION = 1,  /* the image tower (and its preprocessing) */
    LOAD_TEXT = 2,    /* the text tower (and its tokenizer) */
    LOAD_INSPECT = 4  /* describe only (cdb_model_params.inspect_only): the configs,
                      ** the tokenizer and the preprocessing, no weight byte read, no
                      ** backend; for the commands that do not encode */
};

/* Resolves and opens the model with what `load` asks for (LOAD_*); on failure prints
** the error (+ hint), returns NULL. */
static cdb_model *open_model(const char *flag, int load, cdb_k_device device,
                             const char **path_out) {
    const char *src;
    const char *path = cdb_cli_model_path(flag, &src);
    cdb_model_params mp = cdb_model_params_default();
    cdb_model *m = NULL;
    cdb_status rc;
    if (!path) {
        cdb_cli_error("no --model, no CLIPDB_MODEL, and no bundled model was found",
                      "no model to use");
        cdb_cli_hint("pass --model PATH (a model folder or a .safetensors file)");
        return NULL;
    }
    mp.load_vision = (load & LOAD_VISION) != 0;
    mp.load_text = (load & LOAD_TEXT) != 0;
    mp.inspect_only = (load & LOAD_INSPECT) != 0;
    mp.device = device;
    rc = cdb_model_open(path, &mp, &m);
    if (rc != CDB_OK) {
        cdb_k_device can;
        cdb_cli_error_status(rc, "cannot load the model %s", path);
        /* the device asked for cannot run (or start) here: another model would not help */
        if (device.kind == CDB_K_DEVICE_CUDA &&
            (rc == CDB_DEVICE || cdb_k_device_resolve(device, &can) != CDB_OK))
            cdb_cli_hint("pass --device cpu to run on the CPU");
        else if (strcmp(src, "--model"))
            cdb_cli_hint("the model came from %s; pass --model to use another", src);
        return NULL;
    }
    if (path_out) *path_out = path;
    return m;
}

/* ---- models ------------------------------------------------------------------------- */

static const char *act_name(const cdb_model_info *mi) {
    return mi->act == CDB_ACT_GELU        ? "gelu"
           : mi->act == CDB_ACT_GELU_TANH ? "gelu_tanh"
                                          : "quick_gelu";
}

static const char *text_act_name(const cdb_model_info *mi) {
    cdb_model_info t = *mi;
    t.act = mi->text_act;
    return act_name(&t);
}

static const char *interp_name(const cdb_preprocess_params *pp) {
    return pp->interp == CDB_INTERP_BILINEAR ? "bilinear" : "bicubic";
}

/* "key": [v0, v1, v2] */
static void json_floats3(cdb_json *j, const char *key, const float *v) {
    cdb_json_key(j, key);
    cdb_json_begin_array(j);
    for (int c = 0; c < 3; c++) cdb_json_float(j, v[c]);
    cdb_json_end_array(j);
}

/* The size both towers report (width, layers, heads), closing the tower's object. */
static void json_tower_end(cdb_json *j, int width, int layers, int heads) {
    cdb_json_key(j, "width"); cdb_json_int(j, width);
    cdb_json_key(j, "layers"); cdb_json_int(j, layers);
    cdb_json_key(j, "heads"); cdb_json_int(j, heads);
    cdb_json_end_object(j);
}

/* `models --json` of one model file: what it is, its towers and its preprocessing. */
static void model_json(const cdb_model_info *mi, const char *path, const char *src) {
    const cdb_preprocess_params *pp = &mi->preprocess;
    cdb_json j;
    cdb_cli_json_doc(&j, NULL);
    cdb_json_key(&j, "name"); cdb_json_str(&j, mi->name);
    cdb_json_path(&j, "path", path);
    cdb_json_key(&j, "source"); cdb_json_str(&j, src);
    cdb_json_key(&j, "description"); cdb_json_str(&j, mi->description);
    cdb_json_key(&j, "hash"); cdb_json_str(&j, mi->hash);
    cdb_json_key(&j, "embed_dim"); cdb_json_int(&j, mi->embed_dim);
    cdb_json_key(&j, "naming"); cdb_json_str(&j, mi->naming);
    cdb_json_key(&j, "weights_dtype"); cdb_json_str(&j, mi->weights_dtype);
    cdb_json_key(&j, "activation"); cdb_json_str(&j, act_name(mi));
    cdb_json_key(&j, "activation_source"); cdb_json_str(&j, mi->act_source);
    cdb_json_key(&j, "text_activation"); cdb_json_str(&j, text_act_name(mi));
    cdb_json_key(&j, "family"); cdb_json_str(&j, mi->family ? mi->family : "CLIP");
    if (mi->has_logit_scale) {
        cdb_json_key(&j, "logit_scale"); cdb_json_float(&j, mi->logit_scale);
    }
    if (mi->has_logit_bias) {
        cdb_json_key(&j, "logit_bias"); cdb_json_float(&j, mi->logit_bias);
    }
    cdb_json_key(&j, "vision");
    cdb_json_begin_object(&j);
    cdb_json_key(&j, "family"); cdb_json_str(&j, mi->vision_family);
    cdb_json_key(&j, "image_size"); cdb_json_int(&j, mi->image_size);
    cdb_json_key(&j, "patch_size"); cdb_json_int(&j, mi->patch_size);
    json_tower_end(&j, mi->vision_width, mi->vision_layers, mi->vision_heads);
    cdb_json_key(&j, "text");
    cdb_json_begin_object(&j);
    cdb_json_key(&j, "context_length"); cdb_json_int(&j, mi->context_length);
    cdb_json_key(&j, "vocab_size"); cdb_json_int(&j, mi->vocab_size);
    json_tower_end(&j, mi->text_width, mi->text_layers, mi->text_heads);
    cdb_json_key(&j, "preprocess");
    cdb_json_begin_object(&j);
    cdb_json_key(&j, "size"); cdb_json_int(&j, pp->size);
    cdb_json_key(&j, "interpolation"); cdb_json_str(&j, interp_name(pp));
    cdb_json_key(&j, "resize");
    cdb_json_str(&j, pp->resize == CDB_RESIZE_SQUASH ? "squash" : "shortest+center_crop");
    json_floats3(&j, "mean", pp->mean);
    json_floats3(&j, "std", pp->std);
    cdb_json_end_object(&j);
    cdb_json_end_object(&j);
    cdb_json_done(&j);
}

/* `models` of one model file, as text: one "field: value" line each. */
static void model_text(const cdb_model_info *mi, const char *path, const char *src) {
    const cdb_preprocess_params *pp = &mi->preprocess;
    printf("model:        %s (%s)\n", cdb_cli_esc(mi->name), src);
    printf("path:         %s\n", cdb_cli_esc(path));
    if (mi->description && *mi->description)
        printf("description:  %s\n", cdb_cli_esc(mi->description));
    printf("weights:      %s, %s naming, hash %s\n", mi->weights_dtype, mi->naming, mi->hash);
    printf("embedding:    %d dims\n", mi->embed_dim);
    if (!strcmp(mi->vision_family, "ResNet"))
        printf("image tower:  ResNet, %dx%d input, width %d, blocks %d-%d-%d-%d, "
               "attention pool %d wide, %d heads\n", mi->image_size, mi->image_size,
               mi->vision_width, mi->vision_stage_blocks[0], mi->vision_stage_blocks[1],
               mi->vision_stage_blocks[2], mi->vision_stage_blocks[3], mi->vision_pool_width,
               mi->vision_heads);
    else
        printf("image tower:  %s, %dx%d input, patch %d, width %d, %d layers, %d heads\n",
               mi->has_vision ? mi->vision_family : "none", mi->image_size, mi->image_size,
               mi->patch_size, mi->vision_width, mi->vision_layers, mi->vision_heads);
    printf("text tower:   context %d, vocab %d, width %d, %d layers, %d heads\n",
           mi->context_length, mi->vocab_size, mi->text_width, mi->text_layers, mi->text_heads);
    if (mi->act != mi->text_act)
        printf("activation:   %s (image), %s (text) (%s)\n", act_name(mi), text_act_name(mi),
               mi->act_source);
    else
        printf("activation:   %s (%s)\n", act_name(mi), mi->act_source);
    if (mi->family && strcmp(mi->family, "CLIP"))
        printf("family:       %s, logit scale %.6g (x%.4g), bias %.6g\n", mi->family,
               (double)mi->logit_scale, exp((double)mi->logit_scale), (double)mi->logit_bias);
    printf("preprocess:   %s%s to %d, mean %.4f %.4f %.4f, std %.4f %.4f %.4f\n", interp_name(pp),
           pp->resize == CDB_RESIZE_SQUASH ? " squash" : "", pp->size, (double)pp->mean[0],
           (double)pp->mean[1], (double)pp->mean[2],
           (double)pp->std[0], (double)pp->std[1], (double)pp->std[2]);
}

int cdb_cli_cmd_models(int argc, char **argv) {
    static const cli_optspec spec[] = {{"model", 0, CLI_VALUE}, {"json", 0, CLI_FLAG},
                                       {"help", 'h', CLI_FLAG},  {"db", 0, CLI_VALUE},
                                       {"default", 0, CLI_VALUE}, {"quiet", 'q', CLI_FLAG},
                                       {0}};
    cli_args a;
    int rc = CLI_EXIT_FAIL;
    cdb_model *m = NULL;
    const char *path = NULL, *src = NULL;
    if (argc > 0 && !strcmp(argv[0], "get")) return cdb_cli_cmd_models_get(argc - 1, argv + 1);
    if (!cdb_cli_begin("models", &a, spec, argc, argv, &rc)) goto done;
    if (a.n_pos) {
        rc = cdb_cli_usage_error("models", "unexpected argument '%s'", a.pos[0]);
        goto done;
    }
    if (cdb_cli_get(&a, "db") || cdb_cli_get(&a, "default") ||
        cdb_cli_global_db_given()) { /* a database's */
        if (cdb_cli_get(&a, "model")) {
            rc = cdb_cli_usage_error("models", "--model describes a model file; with --db or "
                                           "--default, name the model in --default");
            goto done;
        }
        rc = cdb_cli_models_db(cdb_cli_get(&a, "db"), cdb_cli_get(&a, "default"),
                               cdb_cli_has(&a, "json") > 0);
        goto done;
    }
    cdb_cli_model_path(cdb_cli_get(&a, "model"), &src);
    if (!(m = open_model(cdb_cli_get(&a, "model"), LOAD_VISION | LOAD_TEXT, CLI_DEVICE_CPU, &path)))
        goto done;
    if (cdb_cli_has(&a, "json")) model_json(cdb_model_get_info(m), path, src);
    else model_text(cdb_model_get_info(m), path, src);
    rc = CLI_EXIT_OK;
done:
    cdb_model_close(m);
    cdb_cli_args_free(&a);
    return rc;
}

/* ---- tokenize ----------------------------------------------------------------------- */

/* One text's entry of `tokenize --json`: its ids (ctx of them), with --verbose its
** cleaned text and token strings (up to the end token at eot). */
static void tokens_json(cdb_json *j, const cdb_tok *tok, const char *text, const char *clean,
                        const int32_t *ids, int ctx, int eot, int trunc, int verbose) {
    cdb_json_begin_object(j);
    cdb_json_key(j, "text"); cdb_json_str(j, text);
    if (verbose) { cdb_json_key(j, "clean"); cdb_json_str(j, clean); }
    cdb_json_key(j, "ids");
    cdb_json_begin_array(j);
    j->pretty = 0;
    for (int i = 0; i < ctx; i++) cdb_json_int(j, ids[i]);
    cdb_json_end_array(j);
    j->pretty = 1;
    if (verbose) {
        cdb_json_key(j, "tokens");
        cdb_json_begin_array(j);
        j->pretty = 0;
        for (int i = 0; i <= eot; i++) cdb_json_str(j, cdb_tok_token_str(tok, ids[i]));
        cdb_json_end_array(j);
        j->pretty = 1;
    }
    cdb_json_key(j, "eot_index"); cdb_json_int(j, eot);
    cdb_json_key(j, "truncated"); cdb_json_bool(j, trunc);
    cdb_json_end_object(j);
}

/* One text's line of ids, after (--verbose) "# text / # clean / # tokens" lines. */
static void tokens_text(const cdb_tok *tok, const char *text, const char *clean,
                        const int32_t *ids, int ctx, int eot, int verbose) {
    if (verbose) {
        printf("# text: %s\n# clean: %s\n# tokens:", text, clean ? clean : "");
        for (int i = 0; i <= eot; i++) {
            const char *ts = cdb_tok_token_str(tok, ids[i]);
            printf(" %s", ts ? ts : "?");
        }
        printf("\n");
    }
    for (int i = 0; i < ctx; i++) printf(i ? " %d" : "%d", (int)ids[i]);
    printf("\n");
}

/* Tokenizes texts[0..n) to ctx ids each and prints them (one JSON document, or a line
** each). CLI_EXIT_OK or the error printed (at the first text that fails). */
static int tokenize_all(const cdb_tok *tok, int ctx, const char *const *texts, int n, int json,
                        int verbose) {
    int32_t *ids = calloc((size_t)ctx, sizeof *ids);
    int rc = CLI_EXIT_OK;
    cdb_json j;
    if (!ids) return cdb_cli_error("out of memory", "cannot tokenize");
    if (json) {
        cdb_cli_json_doc(&j, NULL);
        cdb_json_key(&j, "context_length");
        cdb_json_int(&j, ctx);
        cdb_json_key(&j, "texts");
        cdb_json_begin_array(&j);
    }
    for (int t = 0; t < n; t++) {
        int eot = 0, trunc = 0;
        char *clean = NULL;
        cdb_status st = cdb_tok_tokenize(tok, texts[t], strlen(texts[t]), ctx, ids, &eot, &trunc);
        if (st != CDB_OK) {
            rc = cdb_cli_error_status(st, "cannot tokenize text %d", t + 1);
            break;
        }
        if (verbose) cdb_tok_clean_for(tok, texts[t], strlen(texts[t]), &clean);
        if (json) {
            tokens_json(&j, tok, texts[t], clean, ids, ctx, eot, trunc, verbose);
        } else {
            tokens_text(tok, texts[t], clean, ids, ctx, eot, verbose);
            if (trunc) cdb_cli_warn("text %d was truncated to %d tokens", t + 1, ctx);
        }
        cdb_free(clean);
    }
    if (json) {
        cdb_json_end_array(&j);
        cdb_json_end_object(&j);
        cdb_json_done(&j);
    }
    free(ids);
    return rc;
}

int cdb_cli_cmd_tokenize(int argc, char **argv) {
    static const cli_optspec spec[] = {{"model", 0, CLI_VALUE}, {"json", 0, CLI_FLAG},
                                       {"verbose", 0, CLI_FLAG}, {"help", 'h', CLI_FLAG},
                                       {0}};
    cli_args a;
    int rc = CLI_EXIT_FAIL;
    cdb_model *m = NULL;
    if (!cdb_cli_begin("tokenize", &a, spec, argc, argv, &rc)) goto done;
    if (a.n_pos == 0) {
        rc = cdb_cli_usage_error("tokenize", "no TEXT given");
        goto done;
    }
    if (!(m = open_model(cdb_cli_get(&a, "model"), LOAD_TEXT | LOAD_INSPECT, CLI_DEVICE_CPU, NULL)))
        goto done;
    if (!cdb_model_tokenizer(m)) {
        rc = cdb_cli_error("the model has no tokenizer", "cannot tokenize");
        goto done;
    }
    rc = tokenize_all(cdb_model_tokenizer(m), cdb_model_get_info(m)->context_length, a.pos,
                      a.n_pos, cdb_cli_has(&a, "json"), cdb_cli_has(&a, "verbose"));
done:
    cdb_model_close(m);
    cdb_cli_args_free(&a);
    return rc;
}

/* ---- embed -------------------------------------------------------------------------- */

/* Images per cdb_encode_pixels call, as ingest's default batch. The encoder is batch-
** invariant (encoder.h), so the rows are the bytes each image gives alone. */
#define EMBED_BATCH 32

/* Decodes, preprocesses and encodes images[0..n) in batches of EMBED_BATCH into
** out (n * embed_dim floats, in order). CLI_EXIT_OK, or the error printed (naming
** the image that failed to load, or the batch that failed to encode). */
static int embed_images(cdb_model *m, const char *const *images, int n,
                        const cdb_image_params *ip, int normalize, float *out /* OUT */) {
    const cdb_model_info *mi = cdb_model_get_info(m);
    size_t px_floats = (size_t)3 * mi->preprocess.size * mi->preprocess.size;
    float *px = malloc((size_t)(n < EMBED_BATCH ? n : EMBED_BATCH) * px_floats * sizeof *px);
    int rc = CLI_EXIT_OK;
    cdb_status st;
    if (!px) return cdb_cli_error("out of memory", "cannot embed");
    for (int b = 0; b < n && rc == CLI_EXIT_OK; b += EMBED_BATCH) {
        int nb = n - b < EMBED_BATCH ? n - b : EMBED_BATCH;
        for (int i = 0; i < nb && rc == CLI_EXIT_OK; i++) {
            cdb_image *img = NULL;
            if ((st = cdb_image_load(images[b + i], ip, &img)) != CDB_OK ||
                (st = cdb_image_preprocess(img, &mi->preprocess, px + (size_t)i * px_floats,
                                           NULL)) != CDB_OK)
                rc = cdb_cli_error_status(st, "cannot embed %s", images[b + i]);
            cdb_image_free(img);
        }
        if (rc == CLI_EXIT_OK &&
            (st = cdb_encode_pixels(m, px, nb, normalize, out + (size_t)b * mi->embed_dim)) !=
                CDB_OK)
            rc = nb == 1 ? cdb_cli_error_status(st, "cannot embed %s", images[b])
                         : cdb_cli_error_status(st, "cannot embed the images %s ... %s", images[b],
                                                images[b + nb - 1]);
    }
    free(px);
    return rc;
}

/* What `embed` embeds: texts and images, interleaved as they were given (ti[t] and
** ii[i]: the argv positions of each, in order). */
typedef struct embed_inputs {
    const char **texts, **images;
    int n_text, n_img;
    const int *ti, *ii;
} embed_inputs;

/* 1 when the next row (after t texts and i images) is a text. */
static int next_is_text(const embed_inputs *in, int t, int i) {
    return i >= in->n_img || (t < in->n_text && in->ti[t] < in->ii[i]);
}

/* Every input's embedding into vec (n_text + n_img rows of dim floats, in the order
** given). CLI_EXIT_OK or the error printed. */
static int embed_rows(cdb_model *m, const embed_inputs *in, const cdb_image_params *ip,
                      int normalize, float *vec /* OUT */) {
    int dim = cdb_model_get_info(m)->embed_dim, rc = CLI_EXIT_OK;
    float *tvec = calloc((size_t)(in->n_text ? in->n_text : 1) * (size_t)dim, sizeof *tvec);
    float *ivec = calloc((size_t)(in->n_img ? in->n_img : 1) * (size_t)dim, sizeof *ivec);
    cdb_status st;
    if (!tvec || !ivec) {
        rc = cdb_cli_error("out of memory", "cannot embed");
    } else if (in->n_text &&
               (st = cdb_encode_texts(m, in->texts, in->n_text, normalize, tvec)) != CDB_OK) {
        rc = cdb_cli_error_status(st, "cannot embed the texts");
    } else if (!in->n_img ||
               (rc = embed_images(m, in->images, in->n_img, ip, normalize, ivec)) == CLI_EXIT_OK) {
        for (int t = 0, i = 0, row = 0; t < in->n_text || i < in->n_img; row++) {
            const float *src = next_is_text(in, t, i) ? tvec + (size_t)t++ * dim
                                                      : ivec + (size_t)i++ * dim;
            memcpy(vec + (size_t)row * dim, src, sizeof *vec * dim);
        }
    }
    free(tvec);
    free(ivec);
    return rc;
}

/* The JSON document of `embed` to f: the model, the inputs, one array per row. */
static void embed_json(FILE *f, const cdb_model_info *mi, const embed_inputs *in, int normalize,
                       const float *vec) {
    int dim = mi->embed_dim, n = in->n_text + in->n_img;
    cdb_json j;
    cdb_cli_json_init(&j, f, 1);
    cdb_json_begin_object(&j);
    cdb_json_key(&j, "model"); cdb_json_str(&j, mi->name);
    cdb_json_key(&j, "dim"); cdb_json_int(&j, dim);
    cdb_json_key(&j, "normalized"); cdb_json_bool(&j, normalize);
    cdb_json_key(&j, "inputs");
    cdb_json_begin_array(&j);
    for (int t = 0, i = 0; t < in->n_text || i < in->n_img;) {
        cdb_json_begin_object(&j);
        if (next_is_text(in, t, i)) {
            cdb_json_key(&j, "text");
            cdb_json_str(&j, in->texts[t++]);
        } else {
            cdb_json_path(&j, "image", in->images[i++]);
        }
        cdb_json_end_object(&j);
    }
    cdb_json_end_array(&j);
    cdb_json_key(&j, "embeddings");
    cdb_json_begin_array(&j);
    for (int r = 0; r < n; r++) {
        cdb_json_begin_array(&j);
        j.pretty = 0;
        for (int d = 0; d < dim; d++) cdb_json_float(&j, vec[(size_t)r * dim + d]);
        cdb_json_end_array(&j);
        j.pretty = 1;
    }
    cdb_json_end_array(&j);
    cdb_json_end_object(&j);
    cdb_json_done(&j);
}

/* A failed write of the .npy file out (errno set): said here for a file; for "-",
** standard output, main says it once when the command returns (and a reader that
** went away, `| head`, is no failure of clipdb's, as for every command). */
static int npy_write_failed(const char *out) {
    if (strcmp(out, "-")) return cdb_cli_error(strerror(errno), "cannot write %s", out);
    return cdb_cli_stdout_errno() == EPIPE ? CLI_EXIT_OK : CLI_EXIT_FAIL;
}

/* Writes the rows as .npy (npy: to out, "-" for stdout) or JSON (to out; stdout when
** out is NULL or "-"). CLI_EXIT_OK or the error printed. */
static int embed_write(const char *out, int npy, const cdb_model_info *mi,
                       const embed_inputs *in, int normalize, const float *vec) {
    FILE *f;
    if (!npy && out && !strcmp(out, "-")) out = NULL;
    if (npy) {
        int64_t shape[2] = {in->n_text + in->n_img, mi->embed_dim};
        return cdb_cli_npy_write(out, "<f4", shape, 2, vec, sizeof *vec) != 0
                   ? npy_write_failed(out)
                   : CLI_EXIT_OK;
    }
    if (!(f = out ? fopen(out, "w") : stdout))
        return cdb_cli_error(strerror(errno), "cannot write %s", out);
    embed_json(f, mi, in, normalize, vec);
    if (out && fclose(f) != 0) return cdb_cli_error(strerror(errno), "cannot write %s", out);
    return CLI_EXIT_OK;
}

int cdb_cli_cmd_embed(int argc, char **argv) {
    static const cli_optspec spec[] = {
        {"model", 0, CLI_VALUE},  {"text", 0, CLI_MULTI},   {"image", 0, CLI_MULTI},
        {"format", 0, CLI_VALUE}, {"raw", 0, CLI_FLAG},     {"out", 0, CLI_VALUE},
        {"device", 0, CLI_VALUE}, {"no-exif", 0, CLI_FLAG}, {"help", 'h', CLI_FLAG},
        {0}};
    static const char *const formats[] = {"json", "npy", NULL};
    cli_args a;
    int rc = CLI_EXIT_FAIL, fmt, normalize;
    const char *out;
    embed_inputs in;
    cdb_image_params ip = cdb_image_params_default();
    cdb_k_device device;
    cdb_model *m = NULL;
    float *vec = NULL;
    if (!cdb_cli_begin("embed", &a, spec, argc, argv, &rc)) goto done;
    in.n_text = cdb_cli_get_all(&a, "text", &in.texts);
    in.n_img = cdb_cli_get_all(&a, "image", &in.images);
    in.ti = a.argi[1]; /* argv positions of --text (spec[1]) and --image (spec[2]) */
    in.ii = a.argi[2];
    out = cdb_cli_get(&a, "out");
    if ((fmt = cdb_cli_get_choice(&a, "format", formats, 0)) < 0) {
        rc = cdb_cli_usage_error("embed", "%s", a.err);
        goto done;
    }
    if (a.n_pos) {
        rc = cdb_cli_usage_error("embed", "unexpected argument '%s' (use --text or --image)",
                                 a.pos[0]);
        goto done;
    }
    if (in.n_text + in.n_img == 0) {
        rc = cdb_cli_usage_error("embed", "nothing to embed: give --text TEXT or --image PATH");
        goto done;
    }
    if (fmt == 1 && !out) {
        rc = cdb_cli_usage_error("embed", "--format npy needs --out FILE");
        goto done;
    }
    if ((rc = cdb_cli_device("embed", cdb_cli_get(&a, "device"), &device)) != CLI_EXIT_OK)
        goto done;
    rc = CLI_EXIT_FAIL;
    if (!(m = open_model(cdb_cli_get(&a, "model"),
                         (in.n_img ? LOAD_VISION : 0) | (in.n_text ? LOAD_TEXT : 0), device, NULL)))
        goto done;
    normalize = !cdb_cli_has(&a, "raw");
    ip.apply_exif = !cdb_cli_has(&a, "no-exif");
    if (!(vec = calloc((size_t)(in.n_text + in.n_img) * (size_t)cdb_model_get_info(m)->embed_dim,
                       sizeof *vec))) {
        rc = cdb_cli_error("out of memory", "cannot embed");
        goto done;
    }
    if ((rc = embed_rows(m, &in, &ip, normalize, vec)) == CLI_EXIT_OK)
        rc = embed_write(out, fmt == 1, cdb_model_get_info(m), &in, normalize, vec);
done:
    free(vec);
    cdb_model_close(m);
    cdb_cli_args_free(&a);
    return rc;
}

/* ---- preprocess --------------------------------------------------------------------- */

/* Decodes image, preprocesses it with pp and writes the 3 x size x size array to out
** ("-": stdout). CLI_EXIT_OK or the error printed. */
static int preprocess_to(const char *image, const cdb_preprocess_params *pp,
                         const cdb_image_params *ip, const char *out) {
    cdb_image *img = NULL;
    float *px = NULL;
    int64_t shape[3] = {3, pp->size, pp->size};
    int rc = CLI_EXIT_OK;
    cdb_status st;
    if ((st = cdb_image_load(image, ip, &img)) != CDB_OK)
        rc = cdb_cli_error_status(st, "cannot read the image %s", image);
    else if (!(px = malloc(sizeof *px * 3 * (size_t)pp->size * (size_t)pp->size)))
        rc = cdb_cli_error("out of memory", "cannot preprocess %s", image);
    else if ((st = cdb_image_preprocess(img, pp, px, NULL)) != CDB_OK)
        rc = cdb_cli_error_status(st, "cannot preprocess %s", image);
    else if (cdb_cli_npy_write(out, "<f4", shape, 3, px, sizeof *px) != 0)
        rc = npy_write_failed(out);
    free(px);
    cdb_image_free(img);
    return rc;
}

int cdb_cli_cmd_preprocess(int argc, char **argv) {
    static const cli_optspec spec[] = {{"model", 0, CLI_VALUE}, {"out", 0, CLI_VALUE},
                                       {"no-exif", 0, CLI_FLAG}, {"help", 'h', CLI_FLAG},
                                       {0}};
    cli_args a;
    int rc = CLI_EXIT_FAIL;
    const char *out;
    cdb_model *m = NULL;
    cdb_image_params ip = cdb_image_params_default();
    if (!cdb_cli_begin("preprocess", &a, spec, argc, argv, &rc)) goto done;
    out = cdb_cli_get(&a, "out");
    if (a.n_pos != 1) {
        rc = a.n_pos ? cdb_cli_usage_error("preprocess", "expected one IMAGE, got %d", a.n_pos)
                     : cdb_cli_usage_error("preprocess", "no IMAGE given");
        goto done;
    }
    if (!out) {
        rc = cdb_cli_usage_error("preprocess", "missing --out FILE.npy");
        goto done;
    }
    if (!(m = open_model(cdb_cli_get(&a, "model"), LOAD_VISION | LOAD_INSPECT, CLI_DEVICE_CPU,
                         NULL)))
        goto done;
    ip.apply_exif = !cdb_cli_has(&a, "no-exif");
    rc = preprocess_to(a.pos[0], &cdb_model_get_info(m)->preprocess, &ip, out);
done:
    cdb_model_close(m);
    cdb_cli_args_free(&a);
    return rc;
}
