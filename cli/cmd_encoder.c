/*
** cmd_encoder.c: the commands that use the encoder alone, with no database:
** `models` (what a model is), `tokenize` (token ids), `embed` (fp32 embeddings of
** texts and images, JSON or .npy) and `preprocess` (the image tower's input as
** .npy). They exist so users and tests can check each stage against a reference.
**
** CDB_CLI_HAVE_ENCODER (set by cli/CMakeLists.txt) says whether the encoder
** library is linked; without it these commands parse their options and then say
** that the encoder is not in this build (exit 1).
*/
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "encoder/encoder.h"

#define NO_ENCODER "the encoder module is not linked into this build"

/* Resolves and opens the model; on failure prints the error (+ hint), returns NULL. */
static cdb_model *open_model(const char *flag, int load_vision, int load_text,
                             cdb_k_device device, const char **path_out) {
#if CDB_CLI_HAVE_ENCODER
    const char *src;
    const char *path = cli_model_path(flag, &src);
    cdb_model_params mp = cdb_model_params_default();
    cdb_model *m = NULL;
    cdb_status rc;
    if (!path) {
        cli_error("no --model, no CLIPDB_MODEL, and no bundled model was found",
                  "no model to use");
        cli_hint("pass --model PATH (a model folder or a .safetensors file)");
        return NULL;
    }
    mp.load_vision = load_vision;
    mp.load_text = load_text;
    mp.device = device;
    rc = cdb_model_open(path, &mp, &m);
    if (rc != CDB_OK) {
        cli_error_status(rc, "cannot load the model %s", path);
        if (strcmp(src, "--model")) cli_hint("the model came from %s; pass --model to use another", src);
        return NULL;
    }
    if (path_out) *path_out = path;
    return m;
#else
    (void)flag, (void)load_vision, (void)load_text, (void)device, (void)path_out;
    return NULL;
#endif
}

/* ---- models ------------------------------------------------------------------------- */

int cli_cmd_models(int argc, char **argv) {
    static const cli_optspec spec[] = {{"model", 0, CLI_VALUE}, {"json", 0, CLI_FLAG},
                                       {"help", 'h', CLI_FLAG},  {"db", 0, CLI_VALUE},
                                       {"default", 0, CLI_VALUE}, {"quiet", 'q', CLI_FLAG},
                                       {0}};
    cli_args a;
    int rc = CLI_EXIT_FAIL;
    cdb_model *m = NULL;
    const char *path = NULL, *src = NULL;
    if (!cli_begin("models", &a, spec, argc, argv, &rc)) goto done;
    if (a.n_pos) {
        rc = cli_usage_error("models", "unexpected argument '%s'", a.pos[0]);
        goto done;
    }
    if (cli_get(&a, "db") || cli_get(&a, "default") || cli_global_db_given()) { /* a database's */
        if (cli_get(&a, "model")) {
            rc = cli_usage_error("models", "--model describes a model file; with --db or "
                                           "--default, name the model in --default");
            goto done;
        }
        rc = cli_models_db(cli_get(&a, "db"), cli_get(&a, "default"), cli_has(&a, "json") > 0);
        goto done;
    }
    if (!CDB_CLI_HAVE_ENCODER) {
        rc = cli_not_available("models", NO_ENCODER);
        goto done;
    }
    cli_model_path(cli_get(&a, "model"), &src);
    if (!(m = open_model(cli_get(&a, "model"), 1, 1, CLI_DEVICE_CPU, &path))) goto done;
#if CDB_CLI_HAVE_ENCODER
    {
        const cdb_model_info *mi = cdb_model_get_info(m);
        const cdb_preprocess_params *pp = &mi->preprocess;
        const char *act = mi->act == CDB_ACT_GELU ? "gelu" : "quick_gelu";
        if (cli_has(&a, "json")) {
            cli_json j;
            cli_json_init(&j, stdout, 1);
            cli_json_begin_object(&j);
            cli_json_key(&j, "name"); cli_json_str(&j, mi->name);
            cli_json_path(&j, "path", path);
            cli_json_key(&j, "source"); cli_json_str(&j, src);
            cli_json_key(&j, "description"); cli_json_str(&j, mi->description);
            cli_json_key(&j, "hash"); cli_json_str(&j, mi->hash);
            cli_json_key(&j, "embed_dim"); cli_json_int(&j, mi->embed_dim);
            cli_json_key(&j, "naming"); cli_json_str(&j, mi->naming);
            cli_json_key(&j, "weights_dtype"); cli_json_str(&j, mi->weights_dtype);
            cli_json_key(&j, "activation"); cli_json_str(&j, act);
            cli_json_key(&j, "activation_source"); cli_json_str(&j, mi->act_source);
            cli_json_key(&j, "vision");
            cli_json_begin_object(&j);
            cli_json_key(&j, "family"); cli_json_str(&j, mi->vision_family);
            cli_json_key(&j, "image_size"); cli_json_int(&j, mi->image_size);
            cli_json_key(&j, "patch_size"); cli_json_int(&j, mi->patch_size);
            cli_json_key(&j, "width"); cli_json_int(&j, mi->vision_width);
            cli_json_key(&j, "layers"); cli_json_int(&j, mi->vision_layers);
            cli_json_key(&j, "heads"); cli_json_int(&j, mi->vision_heads);
            cli_json_end_object(&j);
            cli_json_key(&j, "text");
            cli_json_begin_object(&j);
            cli_json_key(&j, "context_length"); cli_json_int(&j, mi->context_length);
            cli_json_key(&j, "vocab_size"); cli_json_int(&j, mi->vocab_size);
            cli_json_key(&j, "width"); cli_json_int(&j, mi->text_width);
            cli_json_key(&j, "layers"); cli_json_int(&j, mi->text_layers);
            cli_json_key(&j, "heads"); cli_json_int(&j, mi->text_heads);
            cli_json_end_object(&j);
            cli_json_key(&j, "preprocess");
            cli_json_begin_object(&j);
            cli_json_key(&j, "size"); cli_json_int(&j, pp->size);
            cli_json_key(&j, "interpolation");
            cli_json_str(&j, pp->interp == CDB_INTERP_BILINEAR ? "bilinear" : "bicubic");
            cli_json_key(&j, "mean");
            cli_json_begin_array(&j);
            for (int c = 0; c < 3; c++) cli_json_float(&j, pp->mean[c]);
            cli_json_end_array(&j);
            cli_json_key(&j, "std");
            cli_json_begin_array(&j);
            for (int c = 0; c < 3; c++) cli_json_float(&j, pp->std[c]);
            cli_json_end_array(&j);
            cli_json_end_object(&j);
            cli_json_end_object(&j);
            cli_json_done(&j);
        } else {
            printf("model:        %s (%s)\n", mi->name, src);
            printf("path:         %s\n", path);
            if (mi->description && *mi->description) printf("description:  %s\n", mi->description);
            printf("weights:      %s, %s naming, hash %s\n", mi->weights_dtype, mi->naming,
                   mi->hash);
            printf("embedding:    %d dims\n", mi->embed_dim);
            if (!strcmp(mi->vision_family, "ResNet"))
                printf("image tower:  ResNet, %dx%d input, width %d, blocks %d-%d-%d-%d, "
                       "attention pool %d wide, %d heads\n", mi->image_size, mi->image_size,
                       mi->vision_width, mi->vision_stage_blocks[0], mi->vision_stage_blocks[1],
                       mi->vision_stage_blocks[2], mi->vision_stage_blocks[3],
                       mi->vision_pool_width, mi->vision_heads);
            else
                printf("image tower:  %s, %dx%d input, patch %d, width %d, %d layers, %d heads\n",
                       mi->has_vision ? mi->vision_family : "none", mi->image_size,
                       mi->image_size, mi->patch_size, mi->vision_width, mi->vision_layers,
                       mi->vision_heads);
            printf("text tower:   context %d, vocab %d, width %d, %d layers, %d heads\n",
                   mi->context_length, mi->vocab_size, mi->text_width, mi->text_layers,
                   mi->text_heads);
            printf("activation:   %s (%s)\n", act, mi->act_source);
            printf("preprocess:   %s to %d, mean %.4f %.4f %.4f, std %.4f %.4f %.4f\n",
                   pp->interp == CDB_INTERP_BILINEAR ? "bilinear" : "bicubic", pp->size,
                   (double)pp->mean[0], (double)pp->mean[1], (double)pp->mean[2],
                   (double)pp->std[0], (double)pp->std[1], (double)pp->std[2]);
        }
        rc = CLI_EXIT_OK;
    }
#endif
done:
#if CDB_CLI_HAVE_ENCODER
    cdb_model_close(m);
#endif
    cli_args_free(&a);
    return rc;
}

/* ---- tokenize ----------------------------------------------------------------------- */

int cli_cmd_tokenize(int argc, char **argv) {
    static const cli_optspec spec[] = {{"model", 0, CLI_VALUE}, {"json", 0, CLI_FLAG},
                                       {"verbose", 0, CLI_FLAG}, {"help", 'h', CLI_FLAG},
                                       {0}};
    cli_args a;
    int rc = CLI_EXIT_FAIL;
    cdb_model *m = NULL;
    if (!cli_begin("tokenize", &a, spec, argc, argv, &rc)) goto done;
    if (a.n_pos == 0) {
        rc = cli_usage_error("tokenize", "no TEXT given");
        goto done;
    }
    if (!CDB_CLI_HAVE_ENCODER) {
        rc = cli_not_available("tokenize", NO_ENCODER);
        goto done;
    }
    if (!(m = open_model(cli_get(&a, "model"), 0, 1, CLI_DEVICE_CPU, NULL))) goto done;
#if CDB_CLI_HAVE_ENCODER
    {
        const cdb_tok *tok = cdb_model_tokenizer(m);
        int ctx = cdb_model_get_info(m)->context_length, json = cli_has(&a, "json");
        int verbose = cli_has(&a, "verbose");
        int32_t *ids = calloc((size_t)ctx, sizeof *ids);
        cli_json j;
        if (!tok || !ids) {
            free(ids);
            rc = cli_error(tok ? "out of memory" : "the model has no tokenizer",
                           "cannot tokenize");
            goto done;
        }
        if (json) {
            cli_json_init(&j, stdout, 1);
            cli_json_begin_object(&j);
            cli_json_key(&j, "context_length");
            cli_json_int(&j, ctx);
            cli_json_key(&j, "texts");
            cli_json_begin_array(&j);
        }
        rc = CLI_EXIT_OK;
        for (int t = 0; t < a.n_pos; t++) {
            const char *text = a.pos[t];
            int eot = 0, trunc = 0;
            char *clean = NULL;
            cdb_status st = cdb_tok_tokenize(tok, text, strlen(text), ctx, ids, &eot, &trunc);
            if (st != CDB_OK) {
                rc = cli_error_status(st, "cannot tokenize text %d", t + 1);
                break;
            }
            if (verbose) cdb_tok_clean(text, strlen(text), &clean);
            if (json) {
                cli_json_begin_object(&j);
                cli_json_key(&j, "text"); cli_json_str(&j, text);
                if (verbose) { cli_json_key(&j, "clean"); cli_json_str(&j, clean); }
                cli_json_key(&j, "ids");
                cli_json_begin_array(&j);
                j.pretty = 0;
                for (int i = 0; i < ctx; i++) cli_json_int(&j, ids[i]);
                cli_json_end_array(&j);
                j.pretty = 1;
                if (verbose) {
                    cli_json_key(&j, "tokens");
                    cli_json_begin_array(&j);
                    j.pretty = 0;
                    for (int i = 0; i <= eot; i++) cli_json_str(&j, cdb_tok_token_str(tok, ids[i]));
                    cli_json_end_array(&j);
                    j.pretty = 1;
                }
                cli_json_key(&j, "eot_index"); cli_json_int(&j, eot);
                cli_json_key(&j, "truncated"); cli_json_bool(&j, trunc);
                cli_json_end_object(&j);
            } else {
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
                if (trunc) cli_warn("text %d was truncated to %d tokens", t + 1, ctx);
            }
            cdb_free(clean);
        }
        if (json) {
            cli_json_end_array(&j);
            cli_json_end_object(&j);
            cli_json_done(&j);
        }
        free(ids);
    }
#endif
done:
#if CDB_CLI_HAVE_ENCODER
    cdb_model_close(m);
#endif
    cli_args_free(&a);
    return rc;
}

/* ---- embed -------------------------------------------------------------------------- */

/* Images per cdb_encode_pixels call, as ingest's default batch. The encoder is batch-
** invariant (encoder.h), so the rows are the bytes each image gives alone. */
#define EMBED_BATCH 32

#if CDB_CLI_HAVE_ENCODER
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
    if (!px) return cli_error("out of memory", "cannot embed");
    for (int b = 0; b < n && rc == CLI_EXIT_OK; b += EMBED_BATCH) {
        int nb = n - b < EMBED_BATCH ? n - b : EMBED_BATCH;
        for (int i = 0; i < nb && rc == CLI_EXIT_OK; i++) {
            cdb_image *img = NULL;
            if ((st = cdb_image_load(images[b + i], ip, &img)) != CDB_OK ||
                (st = cdb_image_preprocess(img, &mi->preprocess, px + (size_t)i * px_floats,
                                           NULL)) != CDB_OK)
                rc = cli_error_status(st, "cannot embed %s", images[b + i]);
            cdb_image_free(img);
        }
        if (rc == CLI_EXIT_OK &&
            (st = cdb_encode_pixels(m, px, nb, normalize, out + (size_t)b * mi->embed_dim)) !=
                CDB_OK)
            rc = nb == 1 ? cli_error_status(st, "cannot embed %s", images[b])
                         : cli_error_status(st, "cannot embed the images %s ... %s", images[b],
                                            images[b + nb - 1]);
    }
    free(px);
    return rc;
}
#endif

int cli_cmd_embed(int argc, char **argv) {
    static const cli_optspec spec[] = {
        {"model", 0, CLI_VALUE},  {"text", 0, CLI_MULTI},   {"image", 0, CLI_MULTI},
        {"format", 0, CLI_VALUE}, {"raw", 0, CLI_FLAG},     {"out", 0, CLI_VALUE},
        {"device", 0, CLI_VALUE}, {"no-exif", 0, CLI_FLAG}, {"help", 'h', CLI_FLAG},
        {0}};
    static const char *const formats[] = {"json", "npy", NULL};
    cli_args a;
    int rc = CLI_EXIT_FAIL, fmt, n_text, n_img;
    const char **texts, **images, *out;
    cdb_k_device device;
    cdb_model *m = NULL;
    if (!cli_begin("embed", &a, spec, argc, argv, &rc)) goto done;
    n_text = cli_get_all(&a, "text", &texts);
    n_img = cli_get_all(&a, "image", &images);
    out = cli_get(&a, "out");
    if ((fmt = cli_get_choice(&a, "format", formats, 0)) < 0) {
        rc = cli_usage_error("embed", "%s", a.err);
        goto done;
    }
    if (a.n_pos) {
        rc = cli_usage_error("embed", "unexpected argument '%s' (use --text or --image)",
                             a.pos[0]);
        goto done;
    }
    if (n_text + n_img == 0) {
        rc = cli_usage_error("embed", "nothing to embed: give --text TEXT or --image PATH");
        goto done;
    }
    if (fmt == 1 && !out) {
        rc = cli_usage_error("embed", "--format npy needs --out FILE");
        goto done;
    }
    if (!CDB_CLI_HAVE_ENCODER) {
        rc = cli_not_available("embed", NO_ENCODER);
        goto done;
    }
    if ((rc = cli_device("embed", cli_get(&a, "device"), &device)) != CLI_EXIT_OK) goto done;
    rc = CLI_EXIT_FAIL;
    if (!(m = open_model(cli_get(&a, "model"), n_img > 0, n_text > 0, device, NULL))) goto done;
#if CDB_CLI_HAVE_ENCODER
    {
        const cdb_model_info *mi = cdb_model_get_info(m);
        int dim = mi->embed_dim, n = n_text + n_img, normalize = !cli_has(&a, "raw");
        /* argv positions of --text (spec[1]) and --image (spec[2]): keep the given order */
        int *ti = a.argi[1], *ii = a.argi[2];
        float *vec = calloc((size_t)n * (size_t)dim, sizeof *vec);
        float *tvec = calloc((size_t)(n_text ? n_text : 1) * (size_t)dim, sizeof *tvec);
        float *ivec = calloc((size_t)(n_img ? n_img : 1) * (size_t)dim, sizeof *ivec);
        cdb_image_params ip = cdb_image_params_default();
        int t = 0, i = 0, row = 0;
        cdb_status st = CDB_OK;
        if (!vec || !tvec || !ivec) {
            rc = cli_error("out of memory", "cannot embed");
            goto embed_done;
        }
        ip.apply_exif = !cli_has(&a, "no-exif");
        if (n_text && (st = cdb_encode_texts(m, texts, n_text, normalize, tvec)) != CDB_OK) {
            rc = cli_error_status(st, "cannot embed the texts");
            goto embed_done;
        }
        if (n_img && (rc = embed_images(m, images, n_img, &ip, normalize, ivec)) != CLI_EXIT_OK)
            goto embed_done;
        while (t < n_text || i < n_img) {
            if (i >= n_img || (t < n_text && ti[t] < ii[i])) {
                memcpy(vec + (size_t)row * dim, tvec + (size_t)t * dim, sizeof *vec * dim);
                t++;
            } else {
                memcpy(vec + (size_t)row * dim, ivec + (size_t)i * dim, sizeof *vec * dim);
                i++;
            }
            row++;
        }
        if (fmt == 1) {
            int64_t shape[2] = {n, dim};
            if (cli_npy_write(out, "<f4", shape, 2, vec, sizeof *vec) != 0) {
                rc = cli_error(strerror(errno), "cannot write %s", out);
                goto embed_done;
            }
        } else {
            FILE *f = out ? fopen(out, "w") : stdout;
            cli_json j;
            if (!f) {
                rc = cli_error(strerror(errno), "cannot write %s", out);
                goto embed_done;
            }
            cli_json_init(&j, f, 1);
            cli_json_begin_object(&j);
            cli_json_key(&j, "model"); cli_json_str(&j, mi->name);
            cli_json_key(&j, "dim"); cli_json_int(&j, dim);
            cli_json_key(&j, "normalized"); cli_json_bool(&j, normalize);
            cli_json_key(&j, "inputs");
            cli_json_begin_array(&j);
            for (t = 0, i = 0; t < n_text || i < n_img;) {
                cli_json_begin_object(&j);
                if (i >= n_img || (t < n_text && ti[t] < ii[i])) {
                    cli_json_key(&j, "text");
                    cli_json_str(&j, texts[t++]);
                } else {
                    cli_json_path(&j, "image", images[i++]);
                }
                cli_json_end_object(&j);
            }
            cli_json_end_array(&j);
            cli_json_key(&j, "embeddings");
            cli_json_begin_array(&j);
            for (int r = 0; r < n; r++) {
                cli_json_begin_array(&j);
                j.pretty = 0;
                for (int d = 0; d < dim; d++) cli_json_float(&j, vec[(size_t)r * dim + d]);
                cli_json_end_array(&j);
                j.pretty = 1;
            }
            cli_json_end_array(&j);
            cli_json_end_object(&j);
            cli_json_done(&j);
            if (out && fclose(f) != 0) {
                rc = cli_error(strerror(errno), "cannot write %s", out);
                goto embed_done;
            }
        }
        rc = CLI_EXIT_OK;
    embed_done:
        free(vec);
        free(tvec);
        free(ivec);
    }
#endif
done:
#if CDB_CLI_HAVE_ENCODER
    cdb_model_close(m);
#endif
    cli_args_free(&a);
    return rc;
}

/* ---- preprocess --------------------------------------------------------------------- */

int cli_cmd_preprocess(int argc, char **argv) {
    static const cli_optspec spec[] = {{"model", 0, CLI_VALUE}, {"out", 0, CLI_VALUE},
                                       {"no-exif", 0, CLI_FLAG}, {"help", 'h', CLI_FLAG},
                                       {0}};
    cli_args a;
    int rc = CLI_EXIT_FAIL;
    const char *out;
    cdb_model *m = NULL;
    if (!cli_begin("preprocess", &a, spec, argc, argv, &rc)) goto done;
    out = cli_get(&a, "out");
    if (a.n_pos != 1) {
        rc = a.n_pos ? cli_usage_error("preprocess", "expected one IMAGE, got %d", a.n_pos)
                     : cli_usage_error("preprocess", "no IMAGE given");
        goto done;
    }
    if (!out) {
        rc = cli_usage_error("preprocess", "missing --out FILE.npy");
        goto done;
    }
    if (!CDB_CLI_HAVE_ENCODER) {
        rc = cli_not_available("preprocess", NO_ENCODER);
        goto done;
    }
    if (!(m = open_model(cli_get(&a, "model"), 1, 0, CLI_DEVICE_CPU, NULL))) goto done;
#if CDB_CLI_HAVE_ENCODER
    {
        const cdb_preprocess_params *pp = &cdb_model_get_info(m)->preprocess;
        cdb_image_params ip = cdb_image_params_default();
        cdb_image *img = NULL;
        float *px = NULL;
        int64_t shape[3] = {3, pp->size, pp->size};
        cdb_status st;
        ip.apply_exif = !cli_has(&a, "no-exif");
        if ((st = cdb_image_load(a.pos[0], &ip, &img)) != CDB_OK) {
            rc = cli_error_status(st, "cannot read the image %s", a.pos[0]);
            goto pp_done;
        }
        if (!(px = malloc(sizeof *px * 3 * (size_t)pp->size * (size_t)pp->size))) {
            rc = cli_error("out of memory", "cannot preprocess %s", a.pos[0]);
            goto pp_done;
        }
        if ((st = cdb_image_preprocess(img, pp, px, NULL)) != CDB_OK) {
            rc = cli_error_status(st, "cannot preprocess %s", a.pos[0]);
            goto pp_done;
        }
        if (cli_npy_write(out, "<f4", shape, 3, px, sizeof *px) != 0) {
            rc = cli_error(strerror(errno), "cannot write %s", out);
            goto pp_done;
        }
        rc = CLI_EXIT_OK;
    pp_done:
        free(px);
        cdb_image_free(img);
    }
#endif
done:
#if CDB_CLI_HAVE_ENCODER
    cdb_model_close(m);
#endif
    cli_args_free(&a);
    return rc;
}
