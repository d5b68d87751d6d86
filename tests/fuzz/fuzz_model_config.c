/*
** fuzz_model_config.c: libFuzzer target for the model folder's JSON configs
** (config.json, open_clip_config.json, preprocessor_config.json), read by
** cdb_model_open for the activation, the number of heads and the preprocessing.
** The input is the three files separated by NUL bytes (a missing or empty part means
** the file is absent); the weights are a fixed tiny width-64 model
** (tests/fuzz/data/clip_w64_f16.safetensors, copied at start-up).
*/
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz_model_common.h"

static char g_model[700];
static const char *const k_names[3] = {"config.json", "open_clip_config.json",
                                       "preprocessor_config.json"};

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    char src[4096], dst[800];
    size_t n = 0;
    void *w;
    (void)argc, (void)argv;
    fuzz_quiet();
    fuzz_model_setup("cfg");
    snprintf(g_model, sizeof g_model, "%s/model", g_dir);
    if (mkdir(g_model, 0755) != 0) abort();
    snprintf(src, sizeof src, "%s/tests/fuzz/data/clip_w64_f16.safetensors", fuzz_source_dir());
    if (!(w = fuzz_read_file(src, &n))) {
        fprintf(stderr, "fuzz_model_config: cannot read %s\n", src);
        abort();
    }
    snprintf(dst, sizeof dst, "%s/model.safetensors", g_model);
    if (fuzz_write_file(dst, w, n) != 0) abort();
    free(w);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    const uint8_t *p = data, *end = data + n;
    cdb_model_params mp = fuzz_model_params();
    for (int i = 0; i < 3; i++) {
        char path[800];
        const uint8_t *z = p < end ? memchr(p, 0, (size_t)(end - p)) : NULL;
        size_t len = p < end ? (size_t)((z ? z : end) - p) : 0;
        snprintf(path, sizeof path, "%s/%s", g_model, k_names[i]);
        if (len) {
            if (fuzz_write_file(path, p, len) != 0) abort();
        } else {
            unlink(path);
        }
        p = z ? z + 1 : end;
    }
    /* the first byte after the last part (if any) picks an activation override */
    if (p < end) mp.act = (cdb_act)(*p % 3);
    fuzz_model_open_check(g_model, &mp);
    return 0;
}
