/*
** fuzz_meta.c: libFuzzer target for photo metadata (cdb_photo_meta_read): libexif on
** EXIF blocks, libtiff on TIFF IFDs, libraw and libheif on their containers, and
** clipdb's own container walkers (JPEG markers, PNG chunks, WebP RIFF) and XMP scan.
**
** The first byte picks how the rest reaches the reader, so that the fuzzer spends its
** time inside the parsers rather than rediscovering containers:
**   0: the rest is a whole file (seeds in corpus/fuzz_meta: tagged JPEG/PNG/WebP/TIFF);
**   1: the rest is an EXIF TIFF block, wrapped in a JPEG APP1 "Exif\0\0" segment;
**   2: the rest is an EXIF TIFF block, in a PNG eXIf chunk;
**   3: the rest is an XMP packet, in a JPEG APP1 XMP segment.
** Invariants: CDB_OK always; every field set is a valid one (ranges, NUL-terminated
** text, a formatted capture time that parses back).
*/
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "encoder/encoder.h"
#include "fuzz_util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fuzz_quiet();
    return 0;
}

static size_t wrap(uint8_t mode, const uint8_t *d, size_t n, uint8_t *out) {
    static const char xmp_id[] = "http://ns.adobe.com/xap/1.0/";
    size_t k = 0;
    if (mode == 1 || mode == 3) {
        size_t id = mode == 1 ? 6 : sizeof xmp_id, seg = 2 + id + n;
        if (seg > 0xFFFF) return 0;
        memcpy(out, "\xFF\xD8\xFF\xE1", 4);
        out[4] = (uint8_t)(seg >> 8), out[5] = (uint8_t)seg;
        memcpy(out + 6, mode == 1 ? "Exif\0\0" : xmp_id, id);
        memcpy(out + 6 + id, d, n);
        k = 6 + id + n;
        memcpy(out + k, "\xFF\xD9", 2);
        return k + 2;
    }
    /* PNG: signature, a 1x1 IHDR, eXIf, IEND (CRCs are not checked by the reader) */
    memcpy(out, "\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR\0\0\0\1\0\0\0\1\x08\x02\0\0\0\0\0\0\0", 33);
    k = 33;
    out[k] = (uint8_t)(n >> 24), out[k + 1] = (uint8_t)(n >> 16);
    out[k + 2] = (uint8_t)(n >> 8), out[k + 3] = (uint8_t)n;
    memcpy(out + k + 4, "eXIf", 4);
    memcpy(out + k + 8, d, n);
    k += 8 + n;
    memcpy(out + k, "\0\0\0\0\0\0\0\0IEND\0\0\0\0", 16);
    return k + 16;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static uint8_t buf[70000];
    cdb_photo_meta m;
    const uint8_t *in = data + 1;
    size_t n = size ? size - 1 : 0;
    char iso[64];
    if (size == 0) return 0;
    if (data[0] % 4 != 0) {
        if (n > 60000) return 0;
        n = wrap(data[0] % 4, data + 1, n, buf);
        if (!n) return 0;
        in = buf;
    }
    FUZZ_CHECK(cdb_photo_meta_read(in, n, &m) == CDB_OK, "%s", cdb_errmsg());
    FUZZ_CHECK(!m.has_gps || (fabs(m.lat) <= 90 && fabs(m.lon) <= 180), "gps %f %f", m.lat,
               m.lon);
    FUZZ_CHECK(!m.has_alt || isfinite(m.alt), "alt");
    FUZZ_CHECK(!m.has_offset || (m.offset_min >= -840 && m.offset_min <= 840), "offset");
    FUZZ_CHECK(memchr(m.make, 0, sizeof m.make) && memchr(m.model, 0, sizeof m.model) &&
                   memchr(m.lens, 0, sizeof m.lens), "text not terminated");
    cdb_photo_meta_taken_iso(&m, iso, sizeof iso);
    FUZZ_CHECK((m.taken_source == CDB_TAKEN_NONE) == (iso[0] == 0), "taken '%s'", iso);
    FUZZ_CHECK(strlen(iso) < 32, "taken '%s' too long", iso);
    return 0;
}
