/*
** fuzz_safetensors.c: libFuzzer target for the safetensors header + metadata parser
** and the model validation built on it. The input is a whole .safetensors file:
**   1. cdb_st_open (encoder/encoder_int.h, the format parser on its own): on success
**      every tensor must lie inside the file, with n_bytes = n_elems * dtype size,
**      and its first and last bytes are read (a bad offset faults here);
**   2. cdb_model_open on a folder holding it as model.safetensors, beside a
**      config.json giving 2 heads per tower (so the tiny seed models open): key
**      namings, shapes, dtypes, towers, metadata description, hashing.
** Fuzzes encoder internals through encoder_int.h on purpose, as a test would.
*/
#include <stdint.h>
#include <string.h>

#include "encoder/encoder_int.h"
#include "fuzz_model_common.h"

static char g_model[700], g_file[700];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    char cfg[700];
    static const char k_cfg[] =
        "{\"vision_config\": {\"num_attention_heads\": 2}, \"text_config\": "
        "{\"num_attention_heads\": 2}}";
    (void)argc, (void)argv;
    fuzz_quiet();
    fuzz_model_setup("st");
    snprintf(g_model, sizeof g_model, "%s/model", g_dir);
    if (mkdir(g_model, 0755) != 0) abort();
    snprintf(cfg, sizeof cfg, "%s/config.json", g_model);
    if (fuzz_write_file(cfg, k_cfg, sizeof k_cfg - 1) != 0) abort();
    snprintf(g_file, sizeof g_file, "%s/model.safetensors", g_model);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    cdb_st_file *f = NULL;
    cdb_status rc;
    cdb_model_params p = fuzz_model_params();

    if (fuzz_write_file(g_file, data, n) != 0) abort();

    rc = cdb_st_open(g_file, &f);
    if (rc == CDB_OK) {
        volatile uint8_t sink = 0;
        FUZZ_CHECK(f && f->size == n && f->n_tensors >= 0, "bad file object");
        for (int i = 0; i < f->n_tensors; i++) {
            const cdb_st_tensor *t = &f->tensors[i];
            size_t es = cdb_st_dtype_size(t->dtype);
            FUZZ_CHECK(t->name && t->dtype_name && es > 0, "tensor %d: no name/dtype", i);
            FUZZ_CHECK(t->n_dims >= 0 && t->n_dims <= CDB_ST_MAX_DIMS, "'%s': %d dims", t->name,
                       t->n_dims);
            FUZZ_CHECK(t->n_elems >= 0 && (size_t)t->n_elems * es == t->n_bytes,
                       "'%s': %lld elems * %zu != %zu bytes", t->name, (long long)t->n_elems, es,
                       t->n_bytes);
            FUZZ_CHECK(t->offset <= n && t->n_bytes <= n - t->offset,
                       "'%s': [%zu, +%zu) outside a %zu-byte file", t->name, t->offset,
                       t->n_bytes, n);
            FUZZ_CHECK(cdb_st_find(f, t->name) == t, "'%s' not found by name", t->name);
            if (t->n_bytes) {
                const uint8_t *d = t->data;
                FUZZ_CHECK(d == (const uint8_t *)f->map + t->offset, "'%s': data != map+offset",
                           t->name);
                sink ^= d[0];
                sink ^= d[t->n_bytes - 1];
            }
            if (i) FUZZ_CHECK(strcmp(f->tensors[i - 1].name, t->name) < 0, "not sorted at %d", i);
        }
        (void)sink;
        cdb_st_close(f);
    } else {
        FUZZ_CHECK(f == NULL, "error left a file");
        FUZZ_CHECK(rc == CDB_CORRUPT || rc == CDB_UNSUPPORTED || rc == CDB_IO || rc == CDB_NOMEM,
                   "st_open: unexpected status %s: %s", cdb_status_str(rc), cdb_errmsg());
        return 0; /* cdb_model_open would stop at the same place */
    }

    fuzz_model_open_check(g_model, &p);
    return 0;
}
