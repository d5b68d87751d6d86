/*
** test_decoder_pick.c: cdb_image_pick_decoder, the choice between nvJPEG and the CPU
** decoders in a GPU ingest. The inputs are written here by libjpeg-turbo with the
** settings that make each case (the oracle: what libjpeg was asked to write), plus a
** PNG fixture: baseline and extended-sequential gray/RGB JPEGs go to nvJPEG in fast
** mode only and only when nvJPEG is usable; progressive, arithmetic-coded, CMYK and
** EXIF-rotated JPEGs, truncated headers, PNG and non-images always go to the CPU.
** Then cdb_encode_files where nvJPEG is not usable (no GPU here): every file decoded by
** the CPU decoders, on both routes, equal bit for bit to cdb_image_decode +
** cdb_image_preprocess + cdb_encode_pixels file by file, in both decode modes; a file
** that does not decode gets the decoder's status and a zero row, and the others are
** unaffected.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdb_test.h"
#include "encoder/encoder_int.h"
#include "jpeg_test_util.h"

enum { J_BASELINE, J_GRAY, J_PROGRESSIVE, J_ARITH, J_CMYK, J_OPTIMIZED, J_ROTATED };

/* A 40 x 24 JPEG of kind k in memory (free with free()). */
static unsigned char *jpeg_of(int k, unsigned long *n) {
    static const int flags[] = {0, 0, CDB_TJ_PROGRESSIVE, CDB_TJ_ARITH, 0, CDB_TJ_OPTIMIZED,
                                CDB_TJ_ROTATED};
    return cdb_test_jpeg(40, 24, k == J_GRAY ? 1 : k == J_CMYK ? 4 : 3, flags[k], n);
}

static cdb_decoder pick(const void *b, size_t n, cdb_decode_mode m, int nv, const char *want) {
    const char *why = NULL;
    cdb_decoder d = cdb_image_pick_decoder(b, n, m, nv, &why);
    if (!why || !strstr(why, want)) {
        fprintf(stderr, "    why '%s', expected it to say '%s'\n", why ? why : "(null)", want);
        return (cdb_decoder)-1;
    }
    return d;
}

CDB_TEST(nvjpeg_for_sequential_huffman_jpegs_in_fast_mode) {
    static const int kinds[] = {J_BASELINE, J_GRAY, J_OPTIMIZED};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        unsigned long n = 0;
        unsigned char *j = jpeg_of(kinds[i], &n);
        CHECK(j && n > 100 && j[0] == 0xFF && j[1] == 0xD8);
        CHECK(pick(j, n, CDB_DECODE_FAST, 1, "sequential") == CDB_DECODER_NVJPEG);
        CHECK(pick(j, n, CDB_DECODE_EXACT, 1, "exact") == CDB_DECODER_CPU);
        CHECK(pick(j, n, CDB_DECODE_FAST, 0, "not available") == CDB_DECODER_CPU);
        CHECK(cdb_image_pick_decoder(j, n, CDB_DECODE_FAST, 1, NULL) == CDB_DECODER_NVJPEG);
        /* cut inside the header: the scan refuses it, the CPU decoder will say why */
        CHECK(pick(j, 30, CDB_DECODE_FAST, 1, "refuses") == CDB_DECODER_CPU);
        free(j);
    }
}

CDB_TEST(cpu_for_progressive_arithmetic_cmyk_and_other_formats) {
    static const struct { int kind; const char *why; } cases[] = {
        {J_PROGRESSIVE, "progressive"}, {J_ARITH, "arithmetic"}, {J_CMYK, "CMYK"},
        {J_ROTATED, "EXIF-rotated"}};
    char path[4096];
    FILE *f;
    unsigned char png[64];
    size_t npng;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        unsigned long n = 0;
        unsigned char *j = jpeg_of(cases[i].kind, &n);
        CHECK(j && n > 100);
        CHECK(pick(j, n, CDB_DECODE_FAST, 1, cases[i].why) == CDB_DECODER_CPU);
        CHECK(pick(j, n, CDB_DECODE_EXACT, 1, "exact") == CDB_DECODER_CPU);
        free(j);
    }
    snprintf(path, sizeof path, "%s/tests/golden/models/siglip_photo.png", CDB_SOURCE_DIR);
    f = fopen(path, "rb");
    CHECK(f != NULL);
    npng = fread(png, 1, sizeof png, f);
    fclose(f);
    CHECK(npng == sizeof png && !memcmp(png, "\x89PNG", 4));
    CHECK(pick(png, npng, CDB_DECODE_FAST, 1, "not a JPEG") == CDB_DECODER_CPU);
    CHECK(pick("\xFF\xD8", 2, CDB_DECODE_FAST, 1, "not a JPEG") == CDB_DECODER_CPU);
    CHECK(pick(NULL, 0, CDB_DECODE_FAST, 1, "not a JPEG") == CDB_DECODER_CPU);
}

/* The whole file at path (free with free()). */
static unsigned char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    unsigned char *b = NULL;
    long sz;
    if (!f) return NULL;
    if (fseek(f, 0, SEEK_END) == 0 && (sz = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (b = malloc((size_t)sz)) && fread(b, 1, (size_t)sz, f) != (size_t)sz) {
        free(b);
        b = NULL;
    }
    *n = b ? (size_t)sz : 0;
    fclose(f);
    return b;
}

CDB_TEST(encode_files_without_nvjpeg) {
    enum { NF = 9 };
    static const int kinds[] = {J_BASELINE, J_GRAY, J_PROGRESSIVE, J_ROTATED, J_CMYK,
                                J_OPTIMIZED};
    const void *bufs[NF];
    size_t lens[NF];
    unsigned char *own[NF];
    cdb_model *m = NULL;
    const cdb_model_info *mi;
    float *want, *got, *px;
    int E, sz, n_bad = 0;
    memset(own, 0, sizeof own);
    for (int i = 0; i < 8; i++) { /* file 7: a baseline JPEG cut in its entropy-coded data */
        unsigned long n = 0;
        own[i] = i < 6 ? jpeg_of(kinds[i], &n) : i == 7 ? jpeg_of(J_BASELINE, &n) : NULL;
        lens[i] = i == 7 ? 200 : n;
    }
    own[6] = slurp(CDB_SOURCE_DIR "/tests/golden/models/siglip_photo.png", &lens[6]);
    own[8] = malloc(16);
    memcpy(own[8], "not an image....", 16), lens[8] = 16;
    for (int i = 0; i < NF; i++) {
        CHECK(own[i] != NULL);
        bufs[i] = own[i];
    }
    CHECK_OK(cdb_model_open(CDB_SOURCE_DIR "/tests/golden/models/openai_qgelu", NULL, &m));
    mi = cdb_model_get_info(m);
    E = mi->embed_dim, sz = mi->preprocess.size;
    want = calloc((size_t)NF * E, sizeof *want);
    got = malloc(sizeof *got * (size_t)NF * E);
    px = malloc(sizeof *px * 3 * (size_t)sz * sz);
    CHECK(want && got && px);
    for (int mode = 0; mode <= 1; mode++) {
        cdb_image_params ip = cdb_image_params_default();
        cdb_status want_rc[NF];
        ip.decode = mode ? CDB_DECODE_FAST : CDB_DECODE_EXACT;
        ip.target_size = sz;
        for (int i = 0; i < NF; i++) { /* the oracle: one file at a time */
            cdb_image *img = NULL;
            want_rc[i] = cdb_image_decode(bufs[i], lens[i], &ip, &img);
            memset(want + (size_t)i * E, 0, sizeof *want * (size_t)E);
            if (want_rc[i] == CDB_OK) {
                CHECK_OK(cdb_image_preprocess(img, &mi->preprocess, px, NULL));
                CHECK_OK(cdb_encode_pixels(m, px, 1, 1, want + (size_t)i * E));
            }
            cdb_image_free(img);
        }
        CHECK(want_rc[7] != CDB_OK && want_rc[8] != CDB_OK);
        for (int route = 0; route <= 2; route++) {
            cdb_status rc[NF];
            cdb_decoder used[NF];
            memset(got, 0xFF, sizeof *got * (size_t)NF * E);
            if (route < 2)
                CHECK_OK(cdb_encode_files_route(m, bufs, lens, NF, &ip, 1, got, rc, used, route));
            else
                CHECK_OK(cdb_encode_files(m, bufs, lens, NF, &ip, 1, got, rc, NULL));
            for (int i = 0; i < NF; i++) {
                CHECK_EQ_INT(rc[i], want_rc[i]);
                if (route < 2) CHECK_EQ_INT(used[i], CDB_DECODER_CPU);
                CHECK_MSG(!memcmp(want + (size_t)i * E, got + (size_t)i * E, sizeof *got * E),
                          "mode %d route %d file %d differs", mode, route, i);
                n_bad += rc[i] != CDB_OK;
            }
        }
    }
    CHECK_EQ_INT(n_bad, 2 * 3 * 2);
    {
        cdb_status rc[1];
        CHECK_RC(cdb_encode_files(m, bufs, lens, 1, NULL, 1, got, NULL, NULL), CDB_INVALID);
        CHECK_RC(cdb_encode_files(NULL, bufs, lens, 1, NULL, 1, got, rc, NULL), CDB_INVALID);
        CHECK_OK(cdb_encode_files(m, NULL, NULL, 0, NULL, 1, NULL, NULL, NULL));
    }
    for (int i = 0; i < NF; i++) free(own[i]);
    free(want), free(got), free(px);
    cdb_model_close(m);
}

CDB_TEST_MAIN(nvjpeg_for_sequential_huffman_jpegs_in_fast_mode,
              cpu_for_progressive_arithmetic_cmyk_and_other_formats,
              encode_files_without_nvjpeg)
