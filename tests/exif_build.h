/*
** exif_build.h: writing EXIF metadata into a JPEG in tests, byte by byte (no library of
** clipdb's, so that what the test wrote is its own truth): a little-endian TIFF block
** with IFD0 (Make, Model), the Exif IFD (DateTimeOriginal, OffsetTimeOriginal) and the
** GPS IFD (latitude and longitude as degree/minute/second rationals with their refs),
** inserted as an APP1 "Exif\0\0" segment right after the JPEG's SOI. Uses file_build.h.
*/
#ifndef CDB_TEST_EXIF_BUILD_H
#define CDB_TEST_EXIF_BUILD_H

#include <math.h>
#include <stdio.h>

#include "file_build.h"

typedef struct eb_meta {
    int has_time;              /* DateTimeOriginal */
    int y, mo, d, h, mi, s;
    int has_offset, offset_min; /* OffsetTimeOriginal */
    const char *make, *model;   /* NULL: not written */
    int has_gps;
    double lat, lon;            /* degrees, north and east positive */
} eb_meta;

/* One IFD entry (12 bytes), its value written at *data (an offset from the TIFF header)
** when it does not fit in 4 bytes. */
typedef struct eb_entry {
    uint16_t tag, type;
    uint32_t count;
    uint8_t value[64];
    uint32_t n_value;
} eb_entry;

static inline eb_entry eb_ascii(uint16_t tag, const char *s) {
    eb_entry e;
    memset(&e, 0, sizeof e);
    e.tag = tag, e.type = 2;
    e.n_value = (uint32_t)strlen(s) + 1;
    if (e.n_value > sizeof e.value) e.n_value = sizeof e.value;
    memcpy(e.value, s, e.n_value - 1);
    e.count = e.n_value;
    return e;
}

static inline eb_entry eb_long(uint16_t tag, uint32_t v) {
    eb_entry e;
    memset(&e, 0, sizeof e);
    e.tag = tag, e.type = 4, e.count = 1, e.n_value = 4;
    for (int i = 0; i < 4; i++) e.value[i] = (uint8_t)(v >> (8 * i));
    return e;
}

/* Three RATIONALs: degrees, minutes, seconds x 10000 / 10000 of |deg|. */
static inline eb_entry eb_dms(uint16_t tag, double deg) {
    eb_entry e;
    uint32_t v[6];
    double a = fabs(deg), d = floor(a), m = floor((a - d) * 60);
    double s = ((a - d) * 60 - m) * 60;
    memset(&e, 0, sizeof e);
    e.tag = tag, e.type = 5, e.count = 3, e.n_value = 24;
    v[0] = (uint32_t)d, v[1] = 1, v[2] = (uint32_t)m, v[3] = 1;
    v[4] = (uint32_t)llround(s * 10000), v[5] = 10000;
    for (int k = 0; k < 6; k++)
        for (int i = 0; i < 4; i++) e.value[4 * k + i] = (uint8_t)(v[k] >> (8 * i));
    return e;
}

/* The degrees eb_dms stores for deg, as a reader computes them from the rationals. */
static inline double eb_dms_value(double deg) {
    double a = fabs(deg), d = floor(a), m = floor((a - d) * 60);
    double s = (double)llround((((a - d) * 60 - m) * 60) * 10000) / 10000.0;
    double v = d + m / 60.0 + s / 3600.0;
    return deg < 0 ? -v : v;
}

/* Writes an IFD at b (whose first byte is TIFF offset base) of n entries (tags
** ascending), values past it; next IFD 0. */
static inline void eb_ifd(buf *b, size_t base, const eb_entry *e, int n) {
    uint32_t data = (uint32_t)(b->n - base) + 2 + 12 * (uint32_t)n + 4;
    put_le16(b, (unsigned)n);
    for (int i = 0; i < n; i++) {
        put_le16(b, e[i].tag);
        put_le16(b, e[i].type);
        put_le32(b, e[i].count);
        if (e[i].n_value <= 4) {
            uint8_t v[4] = {0, 0, 0, 0};
            memcpy(v, e[i].value, e[i].n_value);
            put(b, v, 4);
        } else {
            put_le32(b, data);
            data += e[i].n_value + (e[i].n_value & 1);
        }
    }
    put_le32(b, 0);
    for (int i = 0; i < n; i++)
        if (e[i].n_value > 4) {
            put(b, e[i].value, e[i].n_value);
            if (e[i].n_value & 1) put(b, "", 1);
        }
}

/* Size of an IFD eb_ifd writes. */
static inline uint32_t eb_ifd_size(const eb_entry *e, int n) {
    uint32_t s = 2 + 12 * (uint32_t)n + 4;
    for (int i = 0; i < n; i++)
        if (e[i].n_value > 4) s += e[i].n_value + (e[i].n_value & 1);
    return s;
}

/* jpeg (n bytes, starting with SOI) with an APP1 EXIF segment of m after the SOI, in
** *out (heap; free). 0, or -1 when jpeg does not start with SOI. */
static inline int eb_jpeg_with_exif(const uint8_t *jpeg, size_t n, const eb_meta *m, buf *out) {
    eb_entry ifd0[4], exif[2], gps[4];
    int n0 = 0, ne = 0, ng = 0;
    char t[64], o[16];
    if (n < 2 || jpeg[0] != 0xFF || jpeg[1] != 0xD8) return -1;
    if (m->make) ifd0[n0++] = eb_ascii(0x010F, m->make);
    if (m->model) ifd0[n0++] = eb_ascii(0x0110, m->model);
    if (m->has_time) {
        snprintf(t, sizeof t, "%04d:%02d:%02d %02d:%02d:%02d", m->y, m->mo, m->d, m->h, m->mi,
                 m->s);
        exif[ne++] = eb_ascii(0x9003, t);
        if (m->has_offset) {
            int a = m->offset_min < 0 ? -m->offset_min : m->offset_min;
            snprintf(o, sizeof o, "%c%02d:%02d", m->offset_min < 0 ? '-' : '+', a / 60, a % 60);
            exif[ne++] = eb_ascii(0x9011, o);
        }
    }
    if (m->has_gps) {
        gps[ng++] = eb_ascii(1, m->lat < 0 ? "S" : "N");
        gps[ng++] = eb_dms(2, m->lat);
        gps[ng++] = eb_ascii(3, m->lon < 0 ? "W" : "E");
        gps[ng++] = eb_dms(4, m->lon);
    }
    /* IFD0 points at the Exif and GPS IFDs, which follow it. */
    int has_exif = ne > 0, has_gps = ng > 0;
    uint32_t ifd0_size = eb_ifd_size(ifd0, n0) + 12 * (uint32_t)(has_exif + has_gps);
    uint32_t exif_at = 8 + ifd0_size, gps_at = exif_at + (has_exif ? eb_ifd_size(exif, ne) : 0);
    if (has_exif) ifd0[n0++] = eb_long(0x8769, exif_at);
    if (has_gps) ifd0[n0++] = eb_long(0x8825, gps_at);
    buf tiff = {0};
    put(&tiff, "II*\0", 4);
    put_le32(&tiff, 8);
    eb_ifd(&tiff, 0, ifd0, n0);
    if (has_exif) eb_ifd(&tiff, 0, exif, ne);
    if (has_gps) eb_ifd(&tiff, 0, gps, ng);
    memset(out, 0, sizeof *out);
    put(out, jpeg, 2);
    put_be16(out, 0xFFE1);
    put_be16(out, (unsigned)(2 + 6 + tiff.n));
    put(out, "Exif\0\0", 6);
    put(out, tiff.p, tiff.n);
    put(out, jpeg + 2, n - 2);
    free(tiff.p);
    return 0;
}

#endif /* CDB_TEST_EXIF_BUILD_H */
