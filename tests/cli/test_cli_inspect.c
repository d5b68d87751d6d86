/*
** test_cli_inspect.c: `clipdb tokenize` and `clipdb preprocess` need a model's
** tokenizer and its preprocessing, never its weights, so they open it inspect-only
** (cdb_model_params.inspect_only): fast and small whatever the model's size.
**
** The model is a ViT-B/32 in OpenAI naming at its real shapes (F16, 151M parameters)
** whose data region is a hole (tests/encoder/model_test_util.h: a 300 MB file that
** uses no disk). A full load of one tower would widen its weights to fp32 (250 MB for
** the text tower, 350 MB for the image tower) and hash every byte of the mapping, so
** the child's peak RSS tells a tower load from an inspection: it must stay under
** 150 MB. The outputs are checked too: the standard vocabulary's ids for "a dog", and
** a 3 x 224 x 224 float32 array (the size B/32 reads from its shapes).
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdb_test.h"
#include "cli_run.h"
#include "core/core.h" /* CDB_PRINTF, for model_test_util.h */
#define CDB_TEST_TMP_TAG "cli_inspect"
#include "encoder/model_test_util.h"

#define VOCAB 49408
#define CTX 77
#define MAX_RSS_KB (150 * 1024)

static char g_model[300];

/* ViT-B/32's state_dict in OpenAI naming: a header over a hole, in DIR/model.safetensors. */
static int write_b32(const char *dir) {
    st_writer w = {json_object(), 0, NULL};
    char file[400];
    add_openai_vit(&w, 768, 32, 7, 12, 4 * 768, 4 * 768, 512);
    add_openai_text(&w, VOCAB, CTX, 512, 12, 4 * 512, 512);
    st_add(&w, "F32", 4, 0, NULL, "logit_scale");
    snprintf(file, sizeof file, "%s/model.safetensors", dir);
    return write_header(file, &w, 0);
}

static const char *sparse_model(void) {
    if (!g_model[0] && tmpdir()[0]) {
        snprintf(g_model, sizeof g_model, "%s/vit-b-32", tmpdir());
        if (mkdir(g_model, 0700) != 0 || !write_b32(g_model)) g_model[0] = '\0';
    }
    return g_model[0] ? g_model : NULL;
}

CDB_TEST(tokenize_reads_no_weights) {
    const char *model = sparse_model();
    cli_run_result r;
    CHECK(model != NULL);
    {
        const char *args[] = {"tokenize", "--model", model, "a dog", NULL};
        cli_run(args, &r);
    }
    CHECK_MSG(r.exit_code == 0, "exit %d: %s", r.exit_code, r.err);
    CHECK_MSG(!strncmp(r.out, "49406 320 1929 49407 0 0 ", 25), "%s", r.out);
    printf("     tokenize: peak RSS %ld KiB\n", r.max_rss_kb);
    CHECK_MSG(r.max_rss_kb > 0 && r.max_rss_kb < MAX_RSS_KB,
              "tokenize peaked at %ld KiB: it loaded the text tower", r.max_rss_kb);
    cli_run_free(&r);
}

CDB_TEST(preprocess_reads_no_weights) {
    const char *model = sparse_model();
    char out[400];
    size_t n = 0;
    char *npy;
    cli_run_result r;
    CHECK(model != NULL);
    snprintf(out, sizeof out, "%s/px.npy", tmpdir());
    {
        const char *args[] = {"preprocess", "--model", model, "--out", out,
                              CDB_SOURCE_DIR "/tests/golden/images/exif_o1_96x64.jpg", NULL};
        cli_run(args, &r);
    }
    CHECK_MSG(r.exit_code == 0, "exit %d: %s", r.exit_code, r.err);
    printf("     preprocess: peak RSS %ld KiB\n", r.max_rss_kb);
    CHECK_MSG(r.max_rss_kb > 0 && r.max_rss_kb < MAX_RSS_KB,
              "preprocess peaked at %ld KiB: it loaded the image tower", r.max_rss_kb);
    cli_run_free(&r);
    npy = cli_read_file(out, &n);
    CHECK(npy != NULL && n > 10);
    CHECK_MSG(strstr(npy + 10, "'shape': (3, 224, 224)") != NULL, "%.100s", npy + 10);
    CHECK(n > 3 * 224 * 224 * 4 && n - 3 * 224 * 224 * 4 <= 256); /* header + the floats */
    free(npy);
}

CDB_TEST_MAIN(tokenize_reads_no_weights, preprocess_reads_no_weights)
