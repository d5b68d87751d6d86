/*
** test_decoder_pick.c: cdb_image_pick_decoder, the choice between nvJPEG and the CPU
** decoders in a GPU ingest. The inputs are written here by libjpeg-turbo with the
** settings that make each case (the oracle: what libjpeg was asked to write), plus a
** PNG fixture: baseline and extended-sequential gray/RGB JPEGs go to nvJPEG in fast
** mode only and only when nvJPEG is usable; progressive, arithmetic-coded and CMYK
** JPEGs, truncated headers, PNG and non-images always go to the CPU.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>

#include "cdb_test.h"
#include "encoder/encoder.h"

enum { J_BASELINE, J_GRAY, J_PROGRESSIVE, J_ARITH, J_CMYK, J_OPTIMIZED };

/* A 40 x 24 JPEG of kind k in memory (free with free()). */
static unsigned char *jpeg_of(int k, unsigned long *n) {
    struct jpeg_compress_struct ci;
    struct jpeg_error_mgr jerr;
    unsigned char *out = NULL, row[40 * 4];
    int comps = k == J_GRAY ? 1 : k == J_CMYK ? 4 : 3;
    ci.err = jpeg_std_error(&jerr);
    jpeg_create_compress(&ci);
    jpeg_mem_dest(&ci, &out, n);
    ci.image_width = 40;
    ci.image_height = 24;
    ci.input_components = comps;
    ci.in_color_space = comps == 1 ? JCS_GRAYSCALE : comps == 4 ? JCS_CMYK : JCS_RGB;
    jpeg_set_defaults(&ci);
    jpeg_set_quality(&ci, 90, TRUE);
    if (k == J_PROGRESSIVE) jpeg_simple_progression(&ci);
    if (k == J_ARITH) ci.arith_code = TRUE;
    if (k == J_OPTIMIZED) ci.optimize_coding = TRUE; /* still SOF0, own Huffman tables */
    jpeg_start_compress(&ci, TRUE);
    for (int y = 0; y < 24; y++) {
        JSAMPROW r = row;
        for (int x = 0; x < 40 * comps; x++) row[x] = (unsigned char)(x * 5 + y * 9);
        jpeg_write_scanlines(&ci, &r, 1);
    }
    jpeg_finish_compress(&ci);
    jpeg_destroy_compress(&ci);
    return out;
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
        {J_PROGRESSIVE, "progressive"}, {J_ARITH, "arithmetic"}, {J_CMYK, "CMYK"}};
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

CDB_TEST_MAIN(nvjpeg_for_sequential_huffman_jpegs_in_fast_mode,
              cpu_for_progressive_arithmetic_cmyk_and_other_formats)
