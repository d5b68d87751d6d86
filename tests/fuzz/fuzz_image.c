/*
** fuzz_image.c: libFuzzer target for image decoding + preprocessing from arbitrary
** bytes: cdb_image_probe, cdb_image_world_marked, cdb_image_pick_decoder (a GPU
** ingest's nvJPEG-or-CPU choice), cdb_image_decode (with and without EXIF orientation,
** and in fast mode) and cdb_image_preprocess (bicubic and bilinear, three output sizes).
** Every format is reached through the same entry point (sniffing by content): JPEG
** (libjpeg-turbo), WebP (libwebp), TIFF (libtiff), HEIC/AVIF (libheif), RAW (libraw),
** PNG/GIF/BMP/TGA/PSD/PNM (stb); seeds for each in corpus/fuzz_image.
**
** max_pixels is lowered to 4 Mpx so that a fuzzed 8000x8000 header is refused
** quickly (the default limit itself is exercised by tests/fuzz/test_hostile_image.c).
** Invariants: a decoded image has sane fields and is no larger than max_pixels;
** probe agrees with the decoded size (up to the EXIF transpose); preprocess either
** succeeds with finite outputs inside the normalized [0,1] range or refuses cleanly; the
** JPEG DC hash (asked for with EXIF applied) is one value whatever decodes it: the exact
** decode's and the fast decode's agree when both give one, and only JPEGs give one.
*/
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "encoder/encoder.h"
#include "fuzz_util.h"

#define FUZZ_MAX_PIXELS (4LL << 20)

/* LeakSanitizer's built-in suppressions for this target (scripts/fuzz.sh passes no
** suppressions file): libheif 1.15 + libdav1d leak 40 bytes per corrupt AVIF they
** fail to decode, reproduced with libheif alone (tests/fuzz/lsan.supp has the details). */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) { return "leak:libdav1d.so\n"; }

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fuzz_quiet();
    return 0;
}

static void check_preprocess(const cdb_image *img, int size, cdb_interp interp) {
    static float out[3 * 37 * 37];
    static uint8_t crop[37 * 37 * 3];
    cdb_preprocess_params pp = cdb_preprocess_params_default();
    cdb_status rc;
    pp.size = size;
    pp.interp = interp;
    rc = cdb_image_preprocess(img, &pp, out, crop);
    FUZZ_CHECK(rc == CDB_OK || rc == CDB_NOMEM, "preprocess %dx%d c%d b%d pal%d size %d: %s: %s",
               img->width, img->height, img->channels, img->bits, img->is_palette, size,
               cdb_status_str(rc), cdb_errmsg());
    if (rc != CDB_OK) return;
    for (int c = 0; c < 3; c++) {
        /* (x - mean) / std for x in [0, 1], with a little slack for rounding */
        float lo = (0.0f - pp.mean[c]) / pp.std[c] - 1e-4f, hi = (1.0f - pp.mean[c]) / pp.std[c] + 1e-4f;
        for (int i = 0; i < size * size; i++) {
            float v = out[c * size * size + i];
            FUZZ_CHECK(isfinite(v) && v >= lo && v <= hi, "pixel %d of channel %d = %g", i, c, v);
            FUZZ_CHECK(fabsf(v - ((float)crop[i * 3 + c] / 255.0f - pp.mean[c]) / pp.std[c]) < 1e-4f,
                       "crop and tensor disagree at %d/%d", i, c);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    cdb_image_params ip = cdb_image_params_default();
    cdb_image *img = NULL;
    int pw = -1, ph = -1, probed, has_dc[3] = {0, 0, 0};
    uint64_t dc[3] = {0, 0, 0};
    cdb_status rc;

    probed = cdb_image_probe(data, n, &pw, &ph) == CDB_OK;
    if (probed) FUZZ_CHECK(pw > 0 && ph > 0, "probe gave %dx%d", pw, ph);
    /* the generated world's mark (what an ingest checks every photo for): any bytes */
    FUZZ_CHECK(cdb_image_world_marked(data, n) <= 1, "world mark: not 0 or 1");
    {
        const char *why = NULL;
        cdb_decoder d = cdb_image_pick_decoder(data, n, CDB_DECODE_FAST, 1, &why);
        FUZZ_CHECK(why && *why, "pick_decoder gave no reason");
        FUZZ_CHECK(d == CDB_DECODER_CPU || (n >= 3 && data[0] == 0xFF && data[1] == 0xD8),
                   "nvJPEG chosen for bytes that are not a JPEG");
        FUZZ_CHECK(cdb_image_pick_decoder(data, n, CDB_DECODE_EXACT, 1, NULL) == CDB_DECODER_CPU,
                   "nvJPEG chosen in exact mode");
    }

    for (int pass = 0; pass < 3; pass++) {
        int exif = pass > 0, fast = pass == 2;
        ip.max_pixels = FUZZ_MAX_PIXELS;
        ip.apply_exif = exif;
        ip.decode = fast ? CDB_DECODE_FAST : CDB_DECODE_EXACT;
        ip.target_size = 16;
        ip.phash = exif; /* the DC tap of a JPEG's decode, exact (pass 1) and fast (2) */
        rc = cdb_image_decode(data, n, &ip, &img);
        if (rc != CDB_OK) {
            FUZZ_CHECK(img == NULL, "error %s left an image", cdb_status_str(rc));
            FUZZ_CHECK(rc == CDB_CORRUPT || rc == CDB_UNSUPPORTED || rc == CDB_TOO_LARGE ||
                           rc == CDB_NOMEM,
                       "decode: unexpected status %s: %s", cdb_status_str(rc), cdb_errmsg());
            FUZZ_CHECK(cdb_errmsg()[0] != 0, "decode failed (%s) without a message",
                       cdb_status_str(rc));
            return 0;
        }
        FUZZ_CHECK(img && img->pixels, "decode OK without pixels");
        FUZZ_CHECK(img->width > 0 && img->height > 0 &&
                       (int64_t)img->width * img->height <= FUZZ_MAX_PIXELS,
                   "decoded size %dx%d", img->width, img->height);
        FUZZ_CHECK(img->channels >= 1 && img->channels <= 4, "channels %d", img->channels);
        FUZZ_CHECK(img->bits == 8 || img->bits == 16, "bits %d", img->bits);
        FUZZ_CHECK(img->scale_denom >= 1 && img->scale_denom <= 8 && img->format && img->source,
                   "scale_denom %d, format/source set", img->scale_denom);
        FUZZ_CHECK(img->channels == 4 || !img->is_cmyk, "CMYK with %d channels", img->channels);
        FUZZ_CHECK(!img->has_phash || (ip.phash && !strcmp(img->format, "JPEG")),
                   "a DC hash not asked for, or of a %s", img->format);
        has_dc[pass] = img->has_phash;
        dc[pass] = img->phash;
        /* the full size is the probed one (up to the EXIF/irot transpose); camera
        ** RAW and HEIF previews may be smaller than the file's main image */
        if (probed && !fast && strcmp(img->format, "RAW"))
            FUZZ_CHECK((img->width == pw && img->height == ph) ||
                           (img->width == ph && img->height == pw),
                       "probe %dx%d, decode %dx%d", pw, ph, img->width, img->height);
        if (probed && strcmp(img->format, "RAW"))
            FUZZ_CHECK((img->full_width == pw && img->full_height == ph) ||
                           (img->full_width == ph && img->full_height == pw),
                       "probe %dx%d, full size %dx%d", pw, ph, img->full_width, img->full_height);
        if (fast) {
            check_preprocess(img, 16, CDB_INTERP_BICUBIC);
        } else if (!exif) {
            check_preprocess(img, 37, CDB_INTERP_BICUBIC);
        } else {
            check_preprocess(img, 8, CDB_INTERP_BILINEAR);
            check_preprocess(img, 1, CDB_INTERP_BICUBIC);
        }
        /* touch every sample so ASan sees the whole buffer */
        {
            size_t bytes = (size_t)img->width * img->height * img->channels * (img->bits / 8);
            volatile uint8_t sink = 0;
            const uint8_t *p = img->pixels;
            for (size_t i = 0; i < bytes; i += 61) sink ^= p[i];
            sink ^= p[bytes - 1];
            (void)sink;
        }
        cdb_image_free(img);
        img = NULL;
    }
    FUZZ_CHECK(!has_dc[1] || !has_dc[2] || dc[1] == dc[2],
               "DC hash %016llx (exact decode) != %016llx (fast decode)",
               (unsigned long long)dc[1], (unsigned long long)dc[2]);
    return 0;
}
