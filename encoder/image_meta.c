/*
** image_meta.c: photo metadata (capture time, camera, lens, GPS) from a file's bytes,
** for the catalog's filters and sorting (encoder.h, docs/images.md "Metadata").
**
** Where each format keeps it, and who reads it:
**   JPEG  the first APP1 "Exif\0\0" segment, the first APP1 XMP packet     libexif
**   PNG   the first eXIf chunk, an uncompressed iTXt "XML:com.adobe.xmp"  libexif
**   WebP  the RIFF "EXIF" chunk (raw TIFF or "Exif\0\0" + TIFF), "XMP "   libexif
**   HEIF  the primary image's Exif and XMP items (image_heif.c finds them) libexif
**   TIFF  the file's own IFD0, Exif and GPS IFDs, IFD0's XMP (image_tiff.c) libtiff
**   RAW   the camera file's metadata as libraw parses it (image_raw.c)    libraw
** libexif reads at most 64 KiB of a block (the size of a JPEG segment), which every
** block above fits; a TIFF file's IFDs may lie anywhere in it (libtiff writes IFD0
** after the pixels), hence libtiff for TIFF files.
**
** The capture time: EXIF DateTimeOriginal with SubSecTimeOriginal and
** OffsetTimeOriginal; else CreateDate (DateTimeDigitized) with its own; else XMP's
** exif:DateTimeOriginal, xmp:CreateDate, photoshop:DateCreated. IFD0's DateTime is the
** time the file was last changed, not taken, and is not used.
**
** Hostile input: every block is bounded by its container before libexif sees it,
** libexif bounds-checks each IFD entry, and every value is validated before it is
** kept (cdb_meta_set_*). Nothing here can fail the photo: metadata is best effort.
*/
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <libexif/exif-data.h>
#include <utf8proc.h>

#include "encoder/image_int.h"

/* ---- validating setters (image_int.h) ----------------------------------------------- */

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

/* Reads exactly k decimal digits at s[*i]; -1 when they are not there. */
static int digits(const char *s, size_t len, size_t *i, int k) {
    int v = 0;
    for (int j = 0; j < k; j++, (*i)++) {
        if (*i >= len || s[*i] < '0' || s[*i] > '9') return -1;
        v = v * 10 + (s[*i] - '0');
    }
    return v;
}

/* Days from 1970-01-01 to y-m-d, proleptic Gregorian (H. Hinnant's days_from_civil). */
static int64_t days_from_civil(int64_t y, int m, int d) {
    int64_t era, yoe, doy, doe;
    y -= m <= 2;
    era = (y >= 0 ? y : y - 399) / 400;
    yoe = y - era * 400;
    doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static int days_in_month(int y, int m) {
    static const int dm[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return m == 2 ? 28 + leap : dm[m - 1];
}

/* "+HH:MM", "-HH:MM", "+HHMM" or "Z" at s[*i]; 1 and *min when valid. */
static int parse_offset(const char *s, size_t len, size_t *i, int *min) {
    int sign, hh, mm;
    if (*i < len && s[*i] == 'Z') {
        (*i)++;
        *min = 0;
        return 1;
    }
    if (*i >= len || (s[*i] != '+' && s[*i] != '-')) return 0;
    sign = s[(*i)++] == '-' ? -1 : 1;
    if ((hh = digits(s, len, i, 2)) < 0) return 0;
    if (*i < len && s[*i] == ':') (*i)++;
    if ((mm = digits(s, len, i, 2)) < 0 || hh > 14 || mm > 59 || hh * 60 + mm > 840) return 0;
    *min = sign * (hh * 60 + mm);
    return 1;
}

/* Milliseconds from a fraction's digits: "5" -> 500, "05" -> 50, "1234" -> 123. */
static int frac_ms(const char *s, size_t len, size_t *i) {
    int ms = 0, k = 0;
    for (; *i < len && s[*i] >= '0' && s[*i] <= '9'; (*i)++, k++)
        if (k < 3) ms = ms * 10 + (s[*i] - '0');
    if (k == 0) return -1;
    for (; k < 3; k++) ms *= 10;
    return ms;
}

static size_t trim_len(const char *s, size_t len) {
    size_t k = 0;
    while (k < len && s[k]) k++; /* EXIF ASCII stops at its NUL */
    while (k > 0 && is_space(s[k - 1])) k--;
    return k;
}

void cdb_meta_set_taken(cdb_photo_meta *m, cdb_taken_source src, const char *dt, size_t dt_len,
                        const char *subsec, size_t subsec_len, const char *offset,
                        size_t offset_len, int iso) {
    size_t i = 0, n;
    int y, mo, d, hh = 0, mi = 0, ss = 0, ms = 0, off = 0, has_off = 0;
    if (m->taken_source != CDB_TAKEN_NONE || !dt) return;
    n = trim_len(dt, dt_len);
    while (i < n && is_space(dt[i])) i++;
    if ((y = digits(dt, n, &i, 4)) < 0 || i >= n || (dt[i] != ':' && dt[i] != '-')) return;
    i++;
    if ((mo = digits(dt, n, &i, 2)) < 0 || i >= n || (dt[i] != ':' && dt[i] != '-')) return;
    i++;
    if ((d = digits(dt, n, &i, 2)) < 0) return;
    if (i < n) { /* the time; XMP may give a date alone (taken as its midnight) */
        if (dt[i] != ' ' && dt[i] != 'T') return;
        i++;
        if ((hh = digits(dt, n, &i, 2)) < 0 || i >= n || dt[i++] != ':') return;
        if ((mi = digits(dt, n, &i, 2)) < 0) return;
        if (i < n && dt[i] == ':') {
            i++;
            if ((ss = digits(dt, n, &i, 2)) < 0) return;
        } else if (!iso) {
            return; /* EXIF always has seconds */
        }
        if (iso && i < n && (dt[i] == '.' || dt[i] == ',')) {
            i++;
            if ((ms = frac_ms(dt, n, &i)) < 0) return;
        }
        if (iso && i < n) {
            if (!parse_offset(dt, n, &i, &off)) return;
            has_off = 1;
        }
        if (i != n) return;
    } else if (!iso) {
        return;
    }
    if (y < 1000 || mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, mo) || hh > 23 ||
        mi > 59 || ss > 60)
        return;
    if (subsec) {
        size_t k = 0, sn = trim_len(subsec, subsec_len);
        while (k < sn && is_space(subsec[k])) k++;
        if (k < sn) {
            int v = frac_ms(subsec, sn, &k);
            if (v >= 0 && k == sn) ms = v;
        }
    }
    if (offset && !has_off) {
        size_t k = 0, on = trim_len(offset, offset_len);
        while (k < on && is_space(offset[k])) k++;
        if (parse_offset(offset, on, &k, &off) && k == on) has_off = 1;
    }
    if (ss == 60) ss = 59; /* a leap second: the instant it belongs to, as ms cannot say it */
    m->taken_source = src;
    m->taken_ms = ((days_from_civil(y, mo, d) * 86400 + hh * 3600 + mi * 60 + ss) * 1000) + ms;
    m->has_offset = has_off;
    m->offset_min = has_off ? off : 0;
}

static int dms_ok(const double v[3]) {
    for (int k = 0; k < 3; k++)
        if (!isfinite(v[k]) || v[k] < 0) return 0;
    return 1;
}

void cdb_meta_set_gps(cdb_photo_meta *m, const double lat[3], char lat_ref, const double lon[3],
                      char lon_ref) {
    double la, lo;
    if (m->has_gps || !dms_ok(lat) || !dms_ok(lon)) return;
    la = lat[0] + lat[1] / 60.0 + lat[2] / 3600.0;
    lo = lon[0] + lon[1] / 60.0 + lon[2] / 3600.0;
    if (lat_ref == 'S' || lat_ref == 's') la = -la;
    if (lon_ref == 'W' || lon_ref == 'w') lo = -lo;
    if (!(fabs(la) <= 90.0) || !(fabs(lo) <= 180.0)) return;
    m->has_gps = 1;
    m->lat = la;
    m->lon = lo;
}

void cdb_meta_set_alt(cdb_photo_meta *m, double alt, int below_sea_level) {
    if (m->has_alt || !isfinite(alt) || fabs(alt) > 1e6) return;
    m->has_alt = 1;
    m->alt = below_sea_level ? -fabs(alt) : alt;
}

void cdb_meta_set_text(char *dst, size_t cap, const char *src, size_t len) {
    size_t n, i = 0, o = 0;
    int utf8 = 1;
    if (dst[0] || !src || cap < 2) return;
    n = trim_len(src, len);
    while (i < n && is_space(src[i])) i++;
    for (size_t k = i; k < n && utf8;) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t r = utf8proc_iterate((const utf8proc_uint8_t *)src + k,
                                              (utf8proc_ssize_t)(n - k), &cp);
        if (r <= 0 || cp < 0x20) utf8 = 0; /* control characters: not text, take as Latin-1 */
        else k += (size_t)r;
    }
    for (; i < n; i++) {
        unsigned char c = (unsigned char)src[i];
        size_t w = 1;
        if (utf8) {
            while (i + w < n && ((unsigned char)src[i + w] & 0xC0) == 0x80) w++;
            if (o + w > cap - 1) break;
            memcpy(dst + o, src + i, w);
            o += w;
            i += w - 1;
        } else {
            if (c < 0x20 || c == 0x7F) c = ' ';
            if (o + (c < 0x80 ? 1 : 2) > cap - 1) break;
            if (c < 0x80) {
                dst[o++] = (char)c;
            } else {
                dst[o++] = (char)(0xC0 | c >> 6);
                dst[o++] = (char)(0x80 | (c & 0x3F));
            }
        }
    }
    while (o > 0 && is_space(dst[o - 1])) o--;
    dst[o] = 0;
}

/* ---- EXIF blocks through libexif --------------------------------------------------- */

/* An entry's bytes if it is text (ASCII, or UNDEFINED as some writers store offsets). */
static const char *exif_text(ExifData *ed, ExifIfd ifd, ExifTag tag, size_t *len) {
    ExifEntry *e = exif_content_get_entry(ed->ifd[ifd], tag);
    if (!e || !e->data || !e->size ||
        (e->format != EXIF_FORMAT_ASCII && e->format != EXIF_FORMAT_UNDEFINED))
        return NULL;
    *len = e->size;
    return (const char *)e->data;
}

static int exif_rationals(ExifData *ed, ExifTag tag, int k, double *out) {
    ExifEntry *e = exif_content_get_entry(ed->ifd[EXIF_IFD_GPS], tag);
    ExifByteOrder o = exif_data_get_byte_order(ed);
    if (!e || !e->data || e->format != EXIF_FORMAT_RATIONAL || e->components < (unsigned)k ||
        e->size < (unsigned)(8 * k))
        return 0;
    for (int j = 0; j < k; j++) {
        ExifRational r = exif_get_rational(e->data + 8 * j, o);
        if (r.denominator == 0) return 0;
        out[j] = (double)r.numerator / (double)r.denominator;
    }
    return 1;
}

static char exif_ref(ExifData *ed, ExifTag tag) {
    size_t len = 0;
    const char *s = exif_text(ed, EXIF_IFD_GPS, tag, &len);
    return s && len ? s[0] : 0;
}

static void exif_taken(ExifData *ed, cdb_photo_meta *m, cdb_taken_source src, ExifTag dt_tag,
                       ExifTag sub_tag, ExifTag off_tag) {
    size_t dl = 0, sl = 0, ol = 0;
    const char *dt = exif_text(ed, EXIF_IFD_EXIF, dt_tag, &dl);
    const char *sub = exif_text(ed, EXIF_IFD_EXIF, sub_tag, &sl);
    const char *off = exif_text(ed, EXIF_IFD_EXIF, off_tag, &ol);
    cdb_meta_set_taken(m, src, dt, dl, sub, sl, off, ol, 0);
}

static void exif_set_text(ExifData *ed, ExifIfd ifd, ExifTag tag, char *dst, size_t cap) {
    size_t len = 0;
    const char *s = exif_text(ed, ifd, tag, &len);
    if (s) cdb_meta_set_text(dst, cap, s, len);
}

/* t: a TIFF-structured EXIF block (no "Exif\0\0"), n bytes. */
static void read_exif_block(cdb_photo_meta *m, const uint8_t *t, size_t n) {
    uint8_t *buf;
    ExifData *ed;
    double lat[3], lon[3], alt;
    if (n < 8) return;
    if (n > 0xFFFE - 6) n = 0xFFFE - 6; /* libexif's own cap (a JPEG segment's size) */
    if (!(buf = cdb_malloc(n + 6))) return;
    memcpy(buf, "Exif\0\0", 6);
    memcpy(buf + 6, t, n);
    if (!(ed = exif_data_new())) {
        cdb_free(buf);
        return;
    }
    /* read as stored: no tags added or "fixed", maker notes left alone */
    exif_data_unset_option(ed, EXIF_DATA_OPTION_FOLLOW_SPECIFICATION);
    exif_data_set_option(ed, EXIF_DATA_OPTION_DONT_CHANGE_MAKER_NOTE);
    exif_data_load_data(ed, buf, (unsigned)(n + 6));
    exif_taken(ed, m, CDB_TAKEN_ORIGINAL, EXIF_TAG_DATE_TIME_ORIGINAL,
               EXIF_TAG_SUB_SEC_TIME_ORIGINAL, EXIF_TAG_OFFSET_TIME_ORIGINAL);
    exif_taken(ed, m, CDB_TAKEN_CREATED, EXIF_TAG_DATE_TIME_DIGITIZED,
               EXIF_TAG_SUB_SEC_TIME_DIGITIZED, EXIF_TAG_OFFSET_TIME_DIGITIZED);
    exif_set_text(ed, EXIF_IFD_0, EXIF_TAG_MAKE, m->make, sizeof m->make);
    exif_set_text(ed, EXIF_IFD_0, EXIF_TAG_MODEL, m->model, sizeof m->model);
    exif_set_text(ed, EXIF_IFD_EXIF, EXIF_TAG_LENS_MODEL, m->lens, sizeof m->lens);
    if (exif_rationals(ed, (ExifTag)EXIF_TAG_GPS_LATITUDE, 3, lat) &&
        exif_rationals(ed, (ExifTag)EXIF_TAG_GPS_LONGITUDE, 3, lon))
        cdb_meta_set_gps(m, lat, exif_ref(ed, (ExifTag)EXIF_TAG_GPS_LATITUDE_REF), lon,
                         exif_ref(ed, (ExifTag)EXIF_TAG_GPS_LONGITUDE_REF));
    if (exif_rationals(ed, (ExifTag)EXIF_TAG_GPS_ALTITUDE, 1, &alt)) {
        ExifEntry *r = exif_content_get_entry(ed->ifd[EXIF_IFD_GPS],
                                              (ExifTag)EXIF_TAG_GPS_ALTITUDE_REF);
        int below = r && r->data && r->size >= 1 && r->format == EXIF_FORMAT_BYTE && r->data[0];
        cdb_meta_set_alt(m, alt, below);
    }
    exif_data_unref(ed);
    cdb_free(buf);
}

/* ---- XMP: the capture time only ----------------------------------------------------- */

static const uint8_t *find_bytes(const uint8_t *h, size_t n, const char *needle, size_t k) {
    if (k == 0 || n < k) return NULL;
    for (size_t i = 0; i + k <= n; i++)
        if (h[i] == (uint8_t)needle[0] && !memcmp(h + i, needle, k)) return h + i;
    return NULL;
}

/* The value of XMP property `name` (e.g. "exif:DateTimeOriginal"), as an attribute
** (name="v") or a simple element (<name>v</name>); NULL when absent. */
static const char *xmp_value(const uint8_t *x, size_t n, const char *name, size_t *len) {
    size_t k = strlen(name);
    const uint8_t *p = x, *end = x + n;
    while ((p = find_bytes(p, (size_t)(end - p), name, k)) != NULL) {
        const uint8_t *v = p + k, *q;
        int element = p > x && p[-1] == '<';
        p += k;
        if (element && v < end && *v == '>') {
            v++;
            if (!(q = memchr(v, '<', (size_t)(end - v)))) return NULL;
        } else if (!element && v + 1 < end && v[0] == '=' && (v[1] == '"' || v[1] == '\'')) {
            char quote = (char)v[1];
            v += 2;
            if (!(q = memchr(v, quote, (size_t)(end - v)))) return NULL;
        } else {
            continue;
        }
        *len = (size_t)(q - v);
        return (const char *)v;
    }
    return NULL;
}

static void read_xmp(cdb_photo_meta *m, const uint8_t *x, size_t n) {
    static const char *const names[] = {"exif:DateTimeOriginal", "xmp:CreateDate",
                                        "photoshop:DateCreated"};
    for (size_t i = 0; i < sizeof names / sizeof *names && m->taken_source == CDB_TAKEN_NONE;
         i++) {
        size_t len = 0;
        const char *v = xmp_value(x, n, names[i], &len);
        if (v) cdb_meta_set_taken(m, CDB_TAKEN_XMP, v, len, NULL, 0, NULL, 0, 1);
    }
}

/* ---- where each container keeps its blocks ------------------------------------------ */

typedef struct blocks {
    const uint8_t *exif, *xmp;
    size_t exif_len, xmp_len;
} blocks;

static const char XMP_JPEG_ID[] = "http://ns.adobe.com/xap/1.0/"; /* + NUL */

static void jpeg_blocks(const uint8_t *b, size_t n, blocks *bl) {
    size_t i = 2;
    while (i + 4 <= n) {
        unsigned marker, len;
        if (b[i] != 0xFF) return;
        marker = b[i + 1];
        if (marker == 0xFF) { i++; continue; } /* fill byte */
        if (marker == 0xD8 || marker == 0x01 || (marker >= 0xD0 && marker <= 0xD7)) {
            i += 2;
            continue;
        }
        if (marker == 0xDA || marker == 0xD9) return; /* the scan: no metadata after it */
        len = cdb_img_be16(b + i + 2);
        if (len < 2 || i + 2 + len > n) return;
        if (marker == 0xE1) {
            const uint8_t *d = b + i + 4;
            size_t dl = len - 2;
            if (!bl->exif && dl >= 6 && !memcmp(d, "Exif\0\0", 6)) {
                bl->exif = d + 6, bl->exif_len = dl - 6;
            } else if (!bl->xmp && dl >= sizeof XMP_JPEG_ID &&
                       !memcmp(d, XMP_JPEG_ID, sizeof XMP_JPEG_ID)) {
                bl->xmp = d + sizeof XMP_JPEG_ID, bl->xmp_len = dl - sizeof XMP_JPEG_ID;
            }
        }
        i += 2 + len;
    }
}

/* iTXt "XML:com.adobe.xmp": keyword NUL, compression flag, method, language NUL,
** translated keyword NUL, text. Compressed packets are not read. */
static void png_itxt_xmp(const uint8_t *d, size_t dl, blocks *bl) {
    static const char key[] = "XML:com.adobe.xmp";
    const uint8_t *p, *end = d + dl;
    if (bl->xmp || dl < sizeof key + 2 || memcmp(d, key, sizeof key)) return;
    p = d + sizeof key;
    if (p[0] != 0) return; /* compressed */
    p += 2;
    for (int field = 0; field < 2; field++) {
        const uint8_t *z = memchr(p, 0, (size_t)(end - p));
        if (!z) return;
        p = z + 1;
    }
    bl->xmp = p, bl->xmp_len = (size_t)(end - p);
}

static void png_blocks(const uint8_t *b, size_t n, blocks *bl) {
    size_t i = 8;
    while (i + 12 <= n) {
        uint32_t len = cdb_img_be32(b + i);
        const uint8_t *type = b + i + 4, *d = b + i + 8;
        if (len > n - i - 12) return;
        if (!memcmp(type, "eXIf", 4) && !bl->exif) bl->exif = d, bl->exif_len = len;
        if (!memcmp(type, "iTXt", 4)) png_itxt_xmp(d, len, bl);
        if (!memcmp(type, "IEND", 4)) return;
        i += 12 + (size_t)len;
    }
}

static void webp_blocks(const uint8_t *b, size_t n, blocks *bl) {
    bl->exif = cdb_img_webp_exif(b, n, &bl->exif_len);
    bl->xmp = cdb_img_webp_chunk(b, n, "XMP ", &bl->xmp_len);
}

cdb_status cdb_photo_meta_read(const void *buf, size_t n, cdb_photo_meta *out) {
    const uint8_t *b = buf;
    blocks bl = {0};
    uint8_t *own_exif = NULL, *own_xmp = NULL; /* copies the TIFF and HEIF readers make */
    if (!out || (!buf && n)) return cdb_seterr(CDB_INVALID, "photo_meta_read: bad arguments");
    memset(out, 0, sizeof *out);
    switch (cdb_img_sniff(b, n)) {
    case FMT_JPEG: jpeg_blocks(b, n, &bl); break;
    case FMT_PNG: png_blocks(b, n, &bl); break;
    case FMT_WEBP: webp_blocks(b, n, &bl); break;
    case FMT_TIFF:
        cdb_img_tiff_meta(b, n, out, &own_xmp, &bl.xmp_len);
        bl.xmp = own_xmp;
        break;
    case FMT_RAW: cdb_img_raw_meta(b, n, out); break;
    case FMT_HEIF:
    case FMT_AVIF:
        cdb_img_heif_meta_blocks(b, n, &own_exif, &bl.exif_len, &own_xmp, &bl.xmp_len);
        bl.exif = own_exif, bl.xmp = own_xmp;
        break;
    default: break; /* GIF, BMP, TGA, PSD, PNM: no EXIF */
    }
    if (bl.exif) read_exif_block(out, bl.exif, bl.exif_len);
    if (bl.xmp) read_xmp(out, bl.xmp, bl.xmp_len);
    cdb_free(own_exif);
    cdb_free(own_xmp);
    return CDB_OK;
}

char *cdb_photo_meta_taken_iso(const cdb_photo_meta *m, char *buf, size_t cap) {
    int64_t ms = m->taken_ms, days, secs, z, era, doe, yoe, doy, mp, y, mo, d;
    size_t k;
    if (!cap) return buf;
    buf[0] = 0;
    if (m->taken_source == CDB_TAKEN_NONE) return buf;
    days = ms >= 0 ? ms / 86400000 : -((-ms + 86399999) / 86400000);
    secs = (ms - days * 86400000) / 1000;
    /* civil_from_days (H. Hinnant) */
    z = days + 719468;
    era = (z >= 0 ? z : z - 146096) / 146097;
    doe = z - era * 146097;
    yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    mp = (5 * doy + 2) / 153;
    d = doy - (153 * mp + 2) / 5 + 1;
    mo = mp < 10 ? mp + 3 : mp - 9;
    y = yoe + era * 400 + (mo <= 2);
    k = (size_t)snprintf(buf, cap, "%04lld-%02lld-%02lldT%02lld:%02lld:%02lld", (long long)y,
                         (long long)mo, (long long)d, (long long)(secs / 3600),
                         (long long)(secs / 60 % 60), (long long)(secs % 60));
    if (k < cap && ms % 1000)
        k += (size_t)snprintf(buf + k, cap - k, ".%03lld", (long long)((ms % 1000 + 1000) % 1000));
    if (k < cap && m->has_offset) {
        int o = m->offset_min < 0 ? -m->offset_min : m->offset_min;
        if (m->offset_min == 0) snprintf(buf + k, cap - k, "Z");
        else snprintf(buf + k, cap - k, "%c%02d:%02d", m->offset_min < 0 ? '-' : '+', o / 60,
                      o % 60);
    }
    return buf;
}
