/*
** image_jpeg.c: JPEG through libjpeg-turbo (Debian's libjpeg62-turbo 2.1.5, the
** library and version Debian 12's PIL 9.4 decodes with), set up exactly as PIL's
** JpegDecode.c + JpegImagePlugin.py do, so that the pixels are PIL's bit for bit:
**
**   - libjpeg's defaults: dct_method JDCT_ISLOW, do_fancy_upsampling TRUE, no block
**     smoothing change; jpeg_color_space left to libjpeg's guess (JFIF/Adobe
**     markers: PIL passes jpegmode "").
**   - The mode from the SOF component count only: 1 -> L (JCS_GRAYSCALE), 3 -> RGB
**     (JCS_RGB; libjpeg converts YCbCr, or takes RGB as is), 4 -> CMYK (JCS_CMYK;
**     libjpeg converts Adobe YCCK to CMYK), read with PIL's rawmode "CMYK;I": every
**     sample inverted (PIL "assumes Adobe conventions" for every 4-component file).
**     The CMYK image stays CMYK (cdb_image.is_cmyk): PIL resizes it in CMYK and
**     convert("RGB") runs after the crop (preprocess.c).
**   - Fast mode is PIL's Image.draft("RGB", (size, size)): scale_denom 8, 4 or 2, the
**     largest s with min(w // size, h // size) >= s; libjpeg then decodes in the DCT
**     domain (still ISLOW, still fancy upsampling: PIL's draft flag stays 0). At 1/8
**     a progressive file is decoded from its DC scans only (dc_only_stream): the
**     same bytes, a fraction of the entropy decoding.
**   - Arithmetic coding, progressive, restart markers: libjpeg-turbo decodes them.
**     12-bit, lossless and hierarchical JPEG are refused before libjpeg sees them,
**     as PIL refuses 12-bit ("cannot handle 12-bit layers").
**
** Errors: libjpeg's error_exit longjmps back here (jpeg_destroy_decompress frees
** everything libjpeg allocated; the pixel buffer is freed here), so there is no
** partial image and no leak. Warnings are ignored, as PIL ignores them, except
** "premature end of file": PIL's suspending source raises "image file is
** truncated", and so a truncated file is CDB_CORRUPT here. Progressive files with
** more than 500 scans are refused (libjpeg-turbo's own TJFLAG_LIMITSCANS bound: a
** few KB of scans can otherwise cost minutes of CPU).
**
** Reentrant: all state lives in the call.
*/
#include <setjmp.h>
#include <stddef.h>
#include <stdio.h> /* jpeglib.h needs FILE */
#include <string.h>

#include <jerror.h>
#include <jpeglib.h>
#include <jpegint.h> /* struct jpeg_inverse_dct: the DC tap below */

#include "encoder/image_int.h"

#define JPEG_MAX_SCANS 500


/* ---- marker pre-scan ----------------------------------------------------------- */

static cdb_status dht_check(const uint8_t *p, long L) {
    while (L > 0) {
        long sum = 0;
        if (L < 17) return cdb_seterr(CDB_CORRUPT, "JPEG: truncated Huffman table");
        if ((p[0] >> 4) > 1 || (p[0] & 15) > 3)
            return cdb_seterr(CDB_CORRUPT, "JPEG: bad Huffman table id 0x%02X", p[0]);
        for (int k = 1; k <= 16; k++) sum += p[k];
        if (sum > 256)
            return cdb_seterr(CDB_CORRUPT, "JPEG: Huffman table declares %ld codes (max 256)", sum);
        if (17 + sum > L) return cdb_seterr(CDB_CORRUPT, "JPEG: Huffman table past its segment");
        p += 17 + sum;
        L -= 17 + sum;
    }
    return CDB_OK;
}

/* The frame header: process, precision, components, sampling factors, and the
** least entropy-coded data any valid file with this frame holds. */
static cdb_status sof_parse(const uint8_t *s, unsigned m, unsigned len, img_jpeg_hdr *h) {
    unsigned nc, hmax = 1, vmax = 1;
    int64_t bits = 0;
    if (m == 0xC3 || m == 0xC7 || m == 0xCB || m == 0xCF)
        return cdb_seterr(CDB_UNSUPPORTED, "JPEG: lossless JPEG (SOF%u) is not supported",
                          m - 0xC0);
    if (m == 0xC5 || m == 0xC6 || m == 0xCD || m == 0xCE)
        return cdb_seterr(CDB_UNSUPPORTED, "JPEG: hierarchical JPEG (SOF%u) is not supported",
                          m - 0xC0);
    if (len < 6) return cdb_seterr(CDB_CORRUPT, "JPEG: short frame header");
    if (s[0] != 8)
        return cdb_seterr(CDB_UNSUPPORTED, "JPEG: %u-bit samples are not supported (8-bit only, "
                          "as PIL)", s[0]);
    nc = s[5];
    if (nc != 1 && nc != 3 && nc != 4)
        return cdb_seterr(CDB_UNSUPPORTED, "JPEG: %u colour components are not supported", nc);
    if (len != 6u + 3u * nc)
        return cdb_seterr(CDB_CORRUPT, "JPEG: frame header length %u for %u components", len + 2, nc);
    for (unsigned c = 0; c < nc; c++) {
        unsigned hv = s[7 + 3 * c], hs = hv >> 4, vs = hv & 15;
        if (hs < 1 || hs > 4 || vs < 1 || vs > 4)
            return cdb_seterr(CDB_CORRUPT, "JPEG: bad sampling factors %ux%u", hs, vs);
        if (hs > hmax) hmax = hs;
        if (vs > vmax) vmax = vs;
    }
    /* libjpeg upsamples by integral factors only (JERR_FRACT_SAMPLE_NOTIMPL) */
    for (unsigned c = 0; c < nc; c++) {
        unsigned hv = s[7 + 3 * c];
        if (hmax % (hv >> 4) || vmax % (hv & 15))
            return cdb_seterr(CDB_UNSUPPORTED, "JPEG: fractional chroma subsampling (%ux%u of "
                              "%ux%u) is not supported", hv >> 4, hv & 15, hmax, vmax);
    }
    h->h = cdb_img_be16(s + 1);
    h->w = cdb_img_be16(s + 3);
    h->comps = (int)nc;
    h->progressive = m == 0xC2 || m == 0xCA;
    h->arithmetic = m == 0xC9 || m == 0xCA;
    /* Every 8x8 data unit of every component has its DC coefficient entropy-coded
    ** (at least 1 bit) in a sequential scan or the progressive DC-first scan; MCU
    ** padding only adds. AC scans may cost almost nothing (EOBRUN). */
    for (unsigned c = 0; c < nc; c++) {
        unsigned hv = s[7 + 3 * c];
        int64_t cw = (h->w * (hv >> 4) + hmax - 1) / hmax;
        int64_t ch = (h->h * (hv & 15) + vmax - 1) / vmax;
        bits += ((cw + 7) / 8) * ((ch + 7) / 8);
    }
    h->min_bits = bits;
    return CDB_OK;
}

cdb_status cdb_img_jpeg_scan(const uint8_t *b, size_t n, img_jpeg_hdr *h /* OUT */) {
    size_t i = 2;
    int seen_sof = 0, seen_sos = 0, seen_exif = 0;
    cdb_status rc;
    memset(h, 0, sizeof *h);
    h->orientation = 1;
    while (i + 4 <= n && !seen_sos) {
        unsigned m, len;
        if (b[i] != 0xFF) { i++; continue; } /* junk between markers: PIL and libjpeg skip it */
        m = b[i + 1];
        if (m == 0xFF) { i++; continue; } /* fill byte */
        if (m == 0xD8 || (m >= 0xD0 && m <= 0xD7) || m == 0x01 || m == 0x00) { i += 2; continue; }
        if (m == 0xD9) break;
        len = cdb_img_be16(b + i + 2);
        if (len < 2 || i + 2 + len > n)
            return cdb_seterr(CDB_CORRUPT, "JPEG: segment 0x%02X length %u runs past the end of "
                              "the file (%zu bytes; truncated?)", m, len, n);
        if (m == 0xE1 && len >= 8 && !memcmp(b + i + 4, "Exif\0\0", 6) && !seen_exif) {
            /* PIL keeps only the first Exif segment (info["exif"]) */
            h->orientation = cdb_img_exif_orientation(b + i + 10, len - 8);
            seen_exif = 1;
        }
        if (m == 0xC4 && (rc = dht_check(b + i + 4, (long)len - 2)) != CDB_OK) return rc;
        if (m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC && !seen_sof) {
            if ((rc = sof_parse(b + i + 4, m, len - 2, h)) != CDB_OK) return rc;
            seen_sof = 1;
        }
        if (m == 0xDA) seen_sos = 1;
        i += 2 + len;
    }
    if (!seen_sof || !seen_sos)
        return cdb_seterr(CDB_CORRUPT, "JPEG: no %s in %zu bytes (truncated or corrupt)",
                          seen_sof ? "scan" : "frame header", n);
    if (h->w <= 0 || h->h <= 0)
        return cdb_seterr(CDB_CORRUPT, "JPEG: invalid size %lldx%lld", (long long)h->w,
                          (long long)h->h);
    return CDB_OK;
}

/* ---- libjpeg glue ------------------------------------------------------------------ */

typedef struct jerr {
    struct jpeg_error_mgr pub;
    jmp_buf jb;
    int truncated;
    int rows_done; /* every scanline read: only the trailer is left */
    char msg[JMSG_LENGTH_MAX];
} jerr;

static void on_error(j_common_ptr c) {
    jerr *e = (jerr *)c->err;
    (*c->err->format_message)(c, e->msg);
    longjmp(e->jb, 1);
}

/* Warnings (level -1) are ignored as PIL ignores them, except the end of data that
** libjpeg papers over with a fake EOI: PIL calls that file truncated, unless every
** row was already read (a missing EOI: PIL's jpeg_finish_decompress suspends and
** it keeps the image). */
static void on_message(j_common_ptr c, int level) {
    jerr *e = (jerr *)c->err;
    if (level >= 0) return; /* trace messages */
    if (c->err->msg_code == JWRN_JPEG_EOF && !e->rows_done) {
        e->truncated = 1;
        (*c->err->format_message)(c, e->msg);
        longjmp(e->jb, 1);
    }
    c->err->num_warnings++;
}

static void on_output(j_common_ptr c) { (void)c; }

typedef struct jprogress {
    struct jpeg_progress_mgr pub;
    jerr *err;
} jprogress;

static void on_progress(j_common_ptr c) {
    j_decompress_ptr d = (j_decompress_ptr)c;
    if (d->input_scan_number > JPEG_MAX_SCANS) {
        jerr *e = ((jprogress *)c->progress)->err;
        snprintf(e->msg, sizeof e->msg, "more than %d progressive scans (CPU bomb?)",
                 JPEG_MAX_SCANS);
        longjmp(e->jb, 1);
    }
}

static cdb_status map_error(const jerr *e) {
    int code = e->pub.msg_code;
    if (e->truncated)
        return cdb_seterr(CDB_CORRUPT, "JPEG: image file is truncated (%s)", e->msg);
    switch (code) {
    case JERR_OUT_OF_MEMORY:
        return cdb_seterr(CDB_NOMEM, "JPEG: out of memory while decoding (%s)", e->msg);
    case JERR_SOF_UNSUPPORTED: case JERR_BAD_PRECISION: case JERR_FRACT_SAMPLE_NOTIMPL:
    case JERR_NOT_COMPILED: case JERR_ARITH_NOTIMPL: case JERR_CONVERSION_NOTIMPL:
        return cdb_seterr(CDB_UNSUPPORTED, "JPEG: %s", e->msg);
    default: return cdb_seterr(CDB_CORRUPT, "JPEG: corrupt data (%s)", e->msg);
    }
}

/* Fast mode at 1/8 on a progressive file: a copy of the stream without the AC scans
** of its full-resolution components (SOS with Ss > 0 naming a component whose
** sampling factors are the maximum, and their entropy-coded data). At 1/8 such a
** component goes through libjpeg's 1x1 IDCT, which reads only each block's DC
** coefficient, and the DC scans (first pass and refinements) determine that
** completely. Subsampled components keep their AC scans: libjpeg-turbo gives them a
** larger IDCT (2x2 for 4:2:0 chroma) to save upsampling work, which reads low AC
** coefficients too. Block smoothing is switched off (for the full file it does
** nothing: its coefficient bits are all final), so the output is the full file's
** 1/8 decode byte for byte (tests: fast_prog_s64 against PIL's draft, and
** test_photos on real progressive photos). Luma AC scans are most of a progressive
** file's bytes and of its decode time. NULL when out of memory or when nothing can
** be dropped (the caller then decodes the whole file). */
static uint8_t *dc_only_stream(const uint8_t *b, size_t n, size_t *out_n) {
    uint8_t *o = cdb_malloc(n + 2);
    size_t i = 2, k = 2;
    unsigned full_res[256] = {0}; /* component id -> 1 when not subsampled */
    int dropped = 0;
    if (!o) return NULL;
    memcpy(o, b, 2);
    while (i + 4 <= n) {
        unsigned m = b[i + 1], len;
        size_t start = i, end;
        int drop = 0;
        if (b[i] != 0xFF) { i++; continue; }
        if (m == 0xFF) { i++; continue; }
        if (m == 0xD9) break;
        if ((m >= 0xD0 && m <= 0xD7) || m == 0x01 || m == 0x00) { i += 2; continue; }
        len = cdb_img_be16(b + i + 2);
        if (len < 2 || i + 2 + len > n) break;
        end = i + 2 + len;
        if ((m == 0xC2 || m == 0xCA) && len >= 8) {
            unsigned nc = b[i + 9], hmax = 0, vmax = 0;
            for (unsigned c = 0; c < nc && 10 + 3 * c + 2 < 2 + len; c++) {
                unsigned hv = b[i + 11 + 3 * c];
                if ((hv >> 4) > hmax) hmax = hv >> 4;
                if ((hv & 15) > vmax) vmax = hv & 15;
            }
            for (unsigned c = 0; c < nc && 10 + 3 * c + 2 < 2 + len; c++) {
                unsigned hv = b[i + 11 + 3 * c];
                full_res[b[i + 10 + 3 * c]] = (hv >> 4) == hmax && (hv & 15) == vmax;
            }
        }
        if (m == 0xDA) {
            unsigned ns = b[i + 4];
            if (ns == 1 && len >= 2 + 1 + 2 + 3)
                drop = b[i + 7] > 0 && full_res[b[i + 5]]; /* Ss > 0, full-resolution */
            while (end + 1 < n && !(b[end] == 0xFF && b[end + 1] != 0 &&
                                    !(b[end + 1] >= 0xD0 && b[end + 1] <= 0xD7)))
                end++;
            if (end + 1 >= n) end = n;
        }
        if (drop) {
            dropped = 1;
        } else {
            memcpy(o + k, b + start, end - start);
            k += end - start;
        }
        i = end;
    }
    if (!dropped) {
        cdb_free(o);
        return NULL;
    }
    o[k++] = 0xFF;
    o[k++] = 0xD9;
    *out_n = k;
    return o;
}

/* ---- the DC tap: a JPEG's perceptual hash from the decode's own entropy decoding ----
** (encoder.h, cdb_image_phash). libjpeg hands every block of coefficients to the
** component's inverse DCT method (cinfo->idct, jpegint.h, set by jpeg_start_decompress);
** the tap stands in front of component 0's, keeps the block's DC term as a pixel of the
** 1/8 image and calls libjpeg's own. The block's place: its column from output_col, its
** row from the iMCU row being output (jdcoefct.c: output_iMCU_row is advanced after each
** one, in the single- and the multi-scan paths alike) and the offset of output_buf from
** the first row pointer met in that iMCU row (a component's blocks are handed over top row
** first). Each block must be met exactly once, else the decode gives no hash. Cost: a few
** instructions per 8x8 block of component 0, then the hash of a plane of w/8 x h/8
** (bench_phash_jpeg). */
typedef struct dc_tap {
    inverse_DCT_method_ptr idct; /* libjpeg's method for component 0 */
    uint16_t *plane;             /* w x h; 0xFFFF: not met yet */
    JDIMENSION w, h, imcu;       /* imcu: the iMCU row base is from */
    JSAMPARRAY base;
    size_t n_met;
    int bad;                     /* a block out of place, or met twice */
} dc_tap;

static void dc_tap_idct(j_decompress_ptr ci, jpeg_component_info *c, JCOEFPTR blk,
                        JSAMPARRAY out, JDIMENSION col) {
    dc_tap *t = ci->client_data;
    if (!t->base || ci->output_iMCU_row != t->imcu) t->base = out, t->imcu = ci->output_iMCU_row;
    JDIMENSION x = col / (JDIMENSION)c->DCT_scaled_size;
    ptrdiff_t r = (out - t->base) / c->DCT_scaled_size;
    size_t y = (size_t)t->imcu * (size_t)c->v_samp_factor + (size_t)r;
    if (r < 0 || r >= c->v_samp_factor || x >= t->w || y >= t->h ||
        t->plane[y * t->w + x] != 0xFFFF || !c->quant_table) {
        t->bad = 1;
    } else { /* libjpeg's jpeg_idct_1x1: DESCALE(DC * Q0, 3) + 128, range-limited */
        long v = (long)blk[0] * (long)c->quant_table->quantval[0];
        v = (v + 4 >= 0 ? (v + 4) / 8 : -((-(v + 4) + 7) / 8)) + 128;
        t->plane[y * t->w + x] = (uint16_t)(v < 0 ? 0 : v > 255 ? 255 : v);
        t->n_met++;
    }
    t->idct(ci, c, blk, out, col);
}

/* Puts the tap in front of component 0's IDCT (after jpeg_start_decompress) when the
** JPEG's first component is its luma; else leaves t->plane NULL (no hash). */
static void dc_tap_start(j_decompress_ptr ci, dc_tap *t) {
    jpeg_component_info *c = &ci->comp_info[0];
    size_t n = (size_t)c->width_in_blocks * c->height_in_blocks;
    memset(t, 0, sizeof *t);
    if ((ci->jpeg_color_space != JCS_YCbCr && ci->jpeg_color_space != JCS_GRAYSCALE) ||
        !ci->idct || !ci->idct->inverse_DCT[0] || !c->component_needed || n == 0 ||
        !(t->plane = cdb_malloc(n * sizeof *t->plane)))
        return;
    memset(t->plane, 0xFF, n * sizeof *t->plane);
    t->w = c->width_in_blocks;
    t->h = c->height_in_blocks;
    t->idct = ci->idct->inverse_DCT[0];
    ci->client_data = t;
    ci->idct->inverse_DCT[0] = dc_tap_idct;
}

/* img->phash from the tap's plane, every block met: the DC image oriented as the decode
** (orientation o when apply_exif), cdb_image_phash. The plane stays the caller's. */
static void dc_tap_finish(dc_tap *t, cdb_image *img, int o, int apply_exif) {
    cdb_image *dc = NULL;
    size_t n = (size_t)t->w * t->h;
    if (t->plane && !t->bad && t->n_met == n &&
        cdb_img_new((int)t->w, (int)t->h, 1, 8, "JPEG", &dc) == CDB_OK) {
        for (size_t i = 0; i < n; i++) ((uint8_t *)dc->pixels)[i] = (uint8_t)t->plane[i];
        if ((!apply_exif || o < 2 || cdb_img_orient(dc, o) == CDB_OK) &&
            cdb_image_phash(dc, &img->phash) == CDB_OK)
            img->has_phash = 1;
    }
    cdb_image_free(dc);
}

/* PIL's draft scale: the largest s in {8, 4, 2} with min(w // t, h // t) >= s. */
static int draft_scale(int64_t w, int64_t h, int t) {
    int64_t k;
    if (t <= 0) return 1;
    k = w / t < h / t ? w / t : h / t;
    return k >= 8 ? 8 : k >= 4 ? 4 : k >= 2 ? 2 : 1;
}

cdb_status cdb_img_jpeg_decode(const uint8_t *b, size_t n, const img_opts *o,
                               cdb_image **out /* OUT */) {
    struct jpeg_decompress_struct ci;
    jerr je;
    jprogress jp;
    img_jpeg_hdr hdr;
    uint8_t *volatile dc = NULL;
    dc_tap tap;
    uint16_t *volatile tap_plane = NULL; /* tap.plane, freed at done (also after a longjmp) */
    volatile size_t dc_n = 0;
    cdb_image *volatile img = NULL;
    volatile int created = 0;
    cdb_status rc = CDB_OK;
    int scale;

    *out = NULL;
    memset(&tap, 0, sizeof tap);
    if ((rc = cdb_img_jpeg_scan(b, n, &hdr)) != CDB_OK) return rc;
    if ((rc = cdb_img_check_size("JPEG", hdr.w, hdr.h, o->max_pixels)) != CDB_OK) return rc;
    /* libjpeg zero-fills nothing silently here (truncation is an error), but it would
    ** allocate the whole output before finding out: refuse a file that cannot hold
    ** the image it declares first. */
    if ((int64_t)n * 8 < hdr.min_bits)
        return cdb_seterr(CDB_CORRUPT, "JPEG: %zu bytes cannot hold a %lldx%lld image (at "
                          "least %lld bytes of scan data; truncated?)", n, (long long)hdr.w,
                          (long long)hdr.h, (long long)((hdr.min_bits + 7) / 8));
    scale = o->fast ? draft_scale(hdr.w, hdr.h, o->target_size) : 1;

    memset(&ci, 0, sizeof ci);
    memset(&je, 0, sizeof je);
    ci.err = jpeg_std_error(&je.pub);
    je.pub.error_exit = on_error;
    je.pub.emit_message = on_message;
    je.pub.output_message = on_output;
    if (setjmp(je.jb)) {
        rc = map_error(&je);
        goto done;
    }
    jpeg_create_decompress(&ci);
    created = 1;
    jp.pub.progress_monitor = on_progress;
    jp.err = &je;
    ci.progress = &jp.pub;
    if (scale == 8 && hdr.progressive) {
        size_t k = 0;
        dc = dc_only_stream(b, n, &k);
        dc_n = k;
    }
    if (dc)
        jpeg_mem_src(&ci, dc, (unsigned long)dc_n);
    else
        jpeg_mem_src(&ci, b, (unsigned long)n);
    (void)jpeg_read_header(&ci, TRUE);
    if ((int64_t)ci.image_width != hdr.w || (int64_t)ci.image_height != hdr.h ||
        ci.num_components != hdr.comps) {
        rc = cdb_seterr(CDB_CORRUPT, "JPEG: two frame headers disagree (%ux%u, %d components)",
                        ci.image_width, ci.image_height, ci.num_components);
        goto done;
    }
    /* PIL's rawmode for its mode: L, RGB, CMYK;I. */
    ci.out_color_space = hdr.comps == 1 ? JCS_GRAYSCALE : hdr.comps == 3 ? JCS_RGB : JCS_CMYK;
    if (scale > 1) {
        ci.scale_num = 1;
        ci.scale_denom = (unsigned)scale;
    }
    if (dc) ci.do_block_smoothing = FALSE; /* see dc_only_stream */
    (void)jpeg_start_decompress(&ci);
    if (o->phash) {
        dc_tap_start(&ci, &tap);
        tap_plane = tap.plane;
    }
    if (ci.output_components != hdr.comps || ci.output_width == 0 || ci.output_height == 0) {
        rc = cdb_seterr(CDB_CORRUPT, "JPEG: decoder gives %ux%u with %d components",
                        ci.output_width, ci.output_height, ci.output_components);
        goto done;
    }
    {
        cdb_image *im = NULL;
        size_t stride = (size_t)ci.output_width * (size_t)hdr.comps;
        if ((rc = cdb_img_new((int)ci.output_width, (int)ci.output_height, hdr.comps, 8, "JPEG",
                              &im)) != CDB_OK)
            goto done;
        img = im;
        im->full_width = (int)hdr.w;
        im->full_height = (int)hdr.h;
        im->scale_denom = scale;
        im->is_cmyk = hdr.comps == 4;
        while (ci.output_scanline < ci.output_height) {
            JSAMPROW rows[16];
            JDIMENSION k, y = ci.output_scanline;
            unsigned want = ci.output_height - y < 16 ? ci.output_height - y : 16;
            for (unsigned r = 0; r < want; r++)
                rows[r] = (JSAMPROW)((uint8_t *)im->pixels + (size_t)(y + r) * stride);
            k = jpeg_read_scanlines(&ci, rows, want);
            if (k == 0) {
                rc = cdb_seterr(CDB_CORRUPT, "JPEG: decoder stopped at row %u of %u", y,
                                ci.output_height);
                goto done;
            }
        }
        /* PIL finishes the decompression: markers after the last scan are parsed
        ** and a bad one is an error there too */
        je.rows_done = 1;
        (void)jpeg_finish_decompress(&ci);
        if (im->is_cmyk) { /* PIL's unpacker "CMYK;I" */
            uint8_t *p = im->pixels;
            for (size_t i = 0; i < stride * ci.output_height; i++) p[i] = (uint8_t)(255 - p[i]);
        }
    }
    if (o->apply_exif && hdr.orientation >= 2) rc = cdb_img_orient(img, hdr.orientation);
    if (rc == CDB_OK && tap.plane) dc_tap_finish(&tap, img, hdr.orientation, o->apply_exif);

done:
    if (created) jpeg_destroy_decompress(&ci);
    cdb_free(tap_plane);
    cdb_free(dc);
    if (rc != CDB_OK) {
        cdb_image_free(img);
        return rc;
    }
    *out = img;
    return CDB_OK;
}

/* ---- GPU ingest: nvJPEG or the CPU ------------------------------------------------ */

cdb_decoder cdb_image_pick_decoder(const void *buf, size_t n, cdb_decode_mode mode,
                                   int nvjpeg_usable, const char **why) {
    const uint8_t *b = buf;
    img_jpeg_hdr h;
    const char *w;
    cdb_decoder d = CDB_DECODER_CPU;
    if (mode != CDB_DECODE_FAST)
        w = "exact decode: PIL's pixels are libjpeg-turbo's";
    else if (!nvjpeg_usable)
        w = "nvJPEG is not available";
    else if (!b || n < 3 || b[0] != 0xFF || b[1] != 0xD8 || b[2] != 0xFF)
        w = "not a JPEG";
    else if (cdb_img_jpeg_scan(b, n, &h) != CDB_OK)
        w = "a JPEG the marker scan refuses";
    else if (h.progressive)
        w = "progressive JPEG";
    else if (h.arithmetic)
        w = "arithmetic-coded JPEG";
    else if (h.comps == 4)
        w = "CMYK/YCCK JPEG";
    else if (h.orientation != 1)
        w = "EXIF-rotated JPEG"; /* nvJPEG does not rotate; the CPU decoder does */
    else
        d = CDB_DECODER_NVJPEG, w = "sequential Huffman JPEG";
    if (why) *why = w;
    return d;
}
