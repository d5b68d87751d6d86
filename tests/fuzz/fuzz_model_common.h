/*
** fuzz_model_common.h: what fuzz_safetensors.c, fuzz_model_config.c and
** fuzz_packcache.c share: a private model folder with a tiny tokenizer (so a text tower
** does not make every run read the 1.4 MB standard vocabulary), opening with
** single-threaded CPU params, and the checks on a model that opened.
*/
#ifndef CDB_FUZZ_MODEL_COMMON_H
#define CDB_FUZZ_MODEL_COMMON_H

#include "encoder/encoder.h"
#include "fuzz_util.h"

static char g_dir[512], g_tok_path[600];

static inline void fuzz_model_setup(const char *tag) {
    snprintf(g_dir, sizeof g_dir, "%s", fuzz_tmpdir(tag));
    /* a plain merges file: header line + one merge (vocabulary: 256 bytes, 256 with
    ** </w>, 1 merge, 2 specials) */
    snprintf(g_tok_path, sizeof g_tok_path, "%s/tiny_merges.txt", g_dir);
    if (fuzz_write_file(g_tok_path, "#version: 0.2\nt h\n", 18) != 0) abort();
}

static inline cdb_model_params fuzz_model_params(void) {
    cdb_model_params p = cdb_model_params_default();
    p.device.kind = CDB_K_DEVICE_CPU;
    p.n_threads = 1;
    p.tokenizer_path = g_tok_path;
    return p;
}

/* Opens path; checks the result's invariants; closes. */
static inline void fuzz_model_open_check(const char *path, const cdb_model_params *p) {
    cdb_model *m = NULL;
    cdb_status rc = cdb_model_open(path, p, &m);
    if (getenv("FUZZ_VERBOSE"))
        fprintf(stderr, "model_open: %s%s%s\n", cdb_status_str(rc), rc ? ": " : "",
                rc ? cdb_errmsg() : "");
    if (rc != CDB_OK) {
        FUZZ_CHECK(m == NULL, "error %s left a model", cdb_status_str(rc));
        FUZZ_CHECK(rc == CDB_CORRUPT || rc == CDB_UNSUPPORTED || rc == CDB_IO ||
                       rc == CDB_NOMEM || rc == CDB_TOO_LARGE || rc == CDB_INVALID,
                   "model_open: unexpected status %s: %s", cdb_status_str(rc), cdb_errmsg());
        FUZZ_CHECK(cdb_errmsg()[0] != 0, "model_open failed (%s) without a message",
                   cdb_status_str(rc));
        return;
    }
    {
        const cdb_model_info *in = cdb_model_get_info(m);
        FUZZ_CHECK(in && (in->has_vision || in->has_text), "opened with no tower");
        FUZZ_CHECK(in->embed_dim > 0, "embed_dim %d", in->embed_dim);
        FUZZ_CHECK(in->act == CDB_ACT_GELU || in->act == CDB_ACT_QUICK_GELU, "act %d", in->act);
        FUZZ_CHECK(in->name && in->description && in->naming && in->weights_dtype &&
                       in->act_source,
                   "NULL info string");
        if (in->has_vision) {
            FUZZ_CHECK(in->image_size > 0 && in->patch_size > 0 &&
                           in->image_size % in->patch_size == 0 && in->vision_width > 0 &&
                           in->vision_layers > 0 && in->vision_heads > 0 &&
                           in->vision_width % in->vision_heads == 0,
                       "vision info %d/%d/%d/%d/%d", in->image_size, in->patch_size,
                       in->vision_width, in->vision_layers, in->vision_heads);
            FUZZ_CHECK(in->preprocess.size == in->image_size, "preprocess size %d vs %d",
                       in->preprocess.size, in->image_size);
        }
        if (in->has_text)
            FUZZ_CHECK(in->context_length > 0 && in->vocab_size > 0 && in->text_width > 0 &&
                           in->text_layers > 0 && in->text_heads > 0 &&
                           in->text_width % in->text_heads == 0,
                       "text info %d/%d/%d/%d/%d", in->context_length, in->vocab_size,
                       in->text_width, in->text_layers, in->text_heads);
    }
    cdb_model_close(m);
}

#endif
