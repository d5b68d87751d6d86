/*
** image_scan.c: header scans and payload bounds for the formats stb_image decodes
** (PNG, GIF, BMP, PNM, TGA, PSD). Each scan reads what PIL 9.4 would call the
** image's mode from the format's own header (stb hides it), the declared size (for
** the bomb check in image.c), and refuses the inputs that reach a known stb 2.27
** defect; the payload bounds refuse small files that declare big images before
** stb allocates them (docs/images.md lists every rule and why):
**
**   PNG  gray -> 1 channel (1-bit gray: nearest, as PIL's mode "1"), gray+alpha
**        -> 2, RGB -> 3, RGBA -> 4, palette -> is_palette (alpha kept when tRNS
**        has one), 16-bit kept as 16-bit. A tRNS colour key on gray/RGB is dropped
**        (PIL keeps mode L/RGB and convert("RGB") ignores it). eXIf orientation read.
**   GIF  palette; the transparent index's colour (image_stb.c restores it).
**   BMP  32-bit BI_RGB -> 3 (PIL reads it as BGRX), <= 8-bit palettes -> L when
**        the palette is PIL's greyscale ramp, else palette.
**   TGA  colour-mapped -> palette.
**   PNM  P5/P6; maxval != 255 rescaled like PIL's PpmDecoder (image_stb.c).
**   PSD  the merged composite: 8-bit gray/RGB (stb's PSD reader), alpha dropped.
**
** Reentrant: pure functions of the buffer.
*/
#include <string.h>

#include "encoder/image_int.h"


/* PNG: walks every chunk so that no declared length exceeds the file, and reads
** IHDR's bit depth / colour type and whether a tRNS chunk exists. png_plain: the file
** is one image_png.c decodes (8-bit, not palette, not interlaced, standard methods,
** IHDR first and once, no PLTE/tRNS/CgBI or unknown critical chunk); stb takes the
** rest, with its own checks and quirks. */
static cdb_status png_scan(const uint8_t *b, size_t n, img_info *ii) {
    size_t i = 8;
    int depth = -1, ctype = -1, has_trns = 0, seen_iend = 0, plain = 1, methods = 0;
    while (i + 12 <= n) {
        uint32_t len = cdb_img_be32(b + i);
        const uint8_t *type = b + i + 4;
        if (len > n - i - 12)
            return cdb_seterr(CDB_CORRUPT, "PNG: chunk '%.4s' declares %u bytes but only %zu "
                              "remain (truncated or corrupt)", (const char *)type, len,
                              n - i - 12);
        if (!memcmp(type, "IHDR", 4) && len >= 13) {
            plain &= i == 8 && len == 13;
            ii->decl_w = cdb_img_be32(b + i + 8);
            ii->decl_h = cdb_img_be32(b + i + 12);
            depth = b[i + 8 + 8];
            ctype = b[i + 8 + 9];
            methods = b[i + 8 + 10] | b[i + 8 + 11];
            ii->png_interlace = b[i + 8 + 12];
        } else if (!memcmp(type, "CgBI", 4) && depth < 0) {
            ii->png_cgbi = 1; /* stb then reads IDAT as raw deflate */
        } else if (!memcmp(type, "tRNS", 4)) {
            has_trns = 1;
        } else if (!memcmp(type, "eXIf", 4)) {
            /* PIL: info["exif"] = the chunk; a later one replaces an earlier one */
            ii->orientation = cdb_img_exif_orientation(b + i + 8, len);
        } else if (!memcmp(type, "IEND", 4)) {
            seen_iend = 1;
            break;
        }
        /* after IHDR: IDAT, or an ancillary chunk (bit 5 of its first byte set) */
        if (i == 8) plain &= !memcmp(type, "IHDR", 4);
        else plain &= !memcmp(type, "IDAT", 4) || (type[0] & 32);
        plain &= memcmp(type, "tRNS", 4) != 0 && memcmp(type, "CgBI", 4) != 0;
        i += 12 + (size_t)len;
    }
    if (depth < 0) return cdb_seterr(CDB_CORRUPT, "PNG: missing IHDR");
    if (ii->decl_w == 0 || ii->decl_h == 0)
        return cdb_seterr(CDB_CORRUPT, "PNG: invalid size %lldx%lld", (long long)ii->decl_w,
                          (long long)ii->decl_h);
    if (!seen_iend) return cdb_seterr(CDB_CORRUPT, "PNG: no IEND chunk (truncated file)");
    ii->png_depth = depth;
    ii->png_ctype = ctype;
    ii->png_plain = plain && depth == 8 && ctype != 3 && !methods && ii->png_interlace == 0;
    switch (ctype) {
    case 0: ii->want_channels = 1; ii->is_palette = depth == 1; break;
    case 2: ii->want_channels = 3; break;
    case 3: ii->want_channels = has_trns ? 4 : 3; ii->is_palette = 1; break;
    case 4: ii->want_channels = 2; break;
    case 6: ii->want_channels = 4; break;
    default: return cdb_seterr(CDB_CORRUPT, "PNG: invalid colour type %d", ctype);
    }
    /* stb refuses an image of more than 2^30 bytes ("too large", reachable only with a
    ** raised max_pixels): such a file goes to stb for that verdict */
    if (ii->png_plain && (int64_t)(1 << 30) / ii->decl_w / ii->want_channels < ii->decl_h)
        ii->png_plain = 0;
    return CDB_OK;
}

/* GIF: finds the first frame's transparent index and its colour. */
static void gif_scan(const uint8_t *b, size_t n, img_info *ii) {
    const uint8_t *gct = NULL, *table = NULL;
    size_t i = 13, gct_n = 0, table_n = 0;
    int trans = -1;
    ii->is_palette = 1;
    ii->gif_trans = -1;
    ii->gif_frame_px = -1;
    if (n < 13) return;
    ii->decl_w = cdb_img_le16(b + 6);
    ii->decl_h = cdb_img_le16(b + 8);
    if (b[10] & 0x80) {
        gct_n = (size_t)2 << (b[10] & 7);
        gct = b + 13;
        i += 3 * gct_n;
    }
    while (i < n) {
        if (b[i] == 0x21 && i + 2 < n) { /* extension */
            unsigned label = b[i + 1];
            i += 2;
            if (label == 0xF9 && i + 5 < n && b[i] >= 4) {
                if (b[i + 1] & 1) trans = b[i + 4];
            }
            while (i < n && b[i] != 0) i += 1 + (size_t)b[i]; /* sub-blocks */
            i++;
        } else if (b[i] == 0x2C) { /* first image descriptor */
            if (i + 10 > n) return;
            if (b[i + 9] & 0x80) {
                table_n = (size_t)2 << (b[i + 9] & 7);
                table = b + i + 10;
            } else {
                table = gct;
                table_n = gct_n;
            }
            ii->gif_frame_px = (int64_t)cdb_img_le16(b + i + 5) * cdb_img_le16(b + i + 7);
            /* LZW data: code size byte, then sub-blocks up to a 0 (or the file's end) */
            {
                size_t k = i + 10 + (b[i + 9] & 0x80 ? 3 * table_n : 0) + 1;
                while (k < n && b[k] != 0) {
                    size_t len = b[k], have = n - k - 1;
                    ii->gif_lzw_bytes += (int64_t)(len < have ? len : have);
                    k += 1 + len;
                }
            }
            break;
        } else {
            return;
        }
    }
    if (trans >= 0 && table && (size_t)trans < table_n && table + 3 * (size_t)trans + 3 <= b + n) {
        ii->gif_trans = trans;
        memcpy(ii->gif_rgb, table + 3 * trans, 3);
        ii->want_channels = 4;
    } else {
        ii->want_channels = 3;
    }
}

/* BMP: PIL reads 32-bit BI_RGB as BGRX (alpha ignored) and <= 8-bit files as "L"
** when the palette is the identity grey ramp ("1" for a black/white pair). */
static cdb_status bmp_scan(const uint8_t *b, size_t n, img_info *ii) {
    uint32_t hsize, comp = 0, colors = 0;
    unsigned bpp;
    if (n < 30) return cdb_seterr(CDB_CORRUPT, "BMP: truncated header");
    hsize = cdb_img_le32(b + 14);
    if (hsize == 12) {
        ii->decl_w = cdb_img_le16(b + 18);
        ii->decl_h = cdb_img_le16(b + 20);
        bpp = cdb_img_le16(b + 24);
    } else {
        if (n < 54 || hsize < 40) return cdb_seterr(CDB_CORRUPT, "BMP: bad header size %u", hsize);
        ii->decl_w = (int32_t)cdb_img_le32(b + 18);
        ii->decl_h = (int32_t)cdb_img_le32(b + 22);
        if (ii->decl_h < 0) ii->decl_h = -ii->decl_h; /* top-down */
        bpp = cdb_img_le16(b + 28);
        comp = cdb_img_le32(b + 30);
        colors = cdb_img_le32(b + 46);
    }
    if (ii->decl_w <= 0 || ii->decl_h <= 0)
        return cdb_seterr(CDB_CORRUPT, "BMP: invalid size %lldx%lld", (long long)ii->decl_w,
                          (long long)ii->decl_h);
    if (ii->decl_w > IMG_MAX_SIDE || ii->decl_h > IMG_MAX_SIDE)
        return cdb_seterr(CDB_TOO_LARGE, "BMP: declared size %lldx%lld is absurd",
                          (long long)ii->decl_w, (long long)ii->decl_h);
    if (comp == 0 && bpp >= 1 && bpp <= 32) {
        /* stb reads missing pixel rows as zeros; PIL calls the file truncated. */
        int64_t stride = ((ii->decl_w * bpp + 31) / 32) * 4;
        if ((int64_t)cdb_img_le32(b + 10) + stride * ii->decl_h > (int64_t)n)
            return cdb_seterr(CDB_CORRUPT, "BMP: pixel data truncated (%zu bytes, need %lld)", n,
                              (long long)(cdb_img_le32(b + 10) + stride * ii->decl_h));
    }
    if (comp == 1 || comp == 2)
        return cdb_seterr(CDB_UNSUPPORTED, "BMP: RLE compression is not supported");
    if (comp != 0 && comp != 3 && comp != 6)
        return cdb_seterr(CDB_UNSUPPORTED, "BMP: compression %u is not supported", comp);
    if (bpp == 32 && comp == 0) ii->want_channels = 3;
    if (bpp >= 1 && bpp <= 8) {
        size_t entry = hsize == 12 ? 3 : 4, pal = 14 + (size_t)hsize;
        uint32_t nc = colors ? colors : (1u << bpp);
        int grey = 1;
        if (nc > 256) nc = 256;
        if (pal + entry * nc > n) return cdb_seterr(CDB_CORRUPT, "BMP: palette past end of file");
        for (uint32_t k = 0; k < nc && grey; k++) {
            unsigned v = (nc == 2) ? (k ? 255 : 0) : k;
            const uint8_t *e = b + pal + entry * k;
            if (e[0] != v || e[1] != v || e[2] != v) grey = 0;
        }
        if (grey && nc != 2) {
            ii->want_channels = 1;
        } else {
            ii->want_channels = grey ? 1 : 3;
            ii->is_palette = 1;
        }
    }
    return CDB_OK;
}

/* PNM: only binary P5/P6 (stb); header fields validated here (stb's integer
** parser has no overflow check). */
static cdb_status pnm_scan(const uint8_t *b, size_t n, img_info *ii) {
    size_t i = 2;
    long long v[3];
    if (b[1] != '5' && b[1] != '6')
        return cdb_seterr(CDB_UNSUPPORTED, "PNM: P%c is not supported (binary P5/P6 only)", b[1]);
    for (int f = 0; f < 3; f++) {
        for (;;) {
            while (i < n && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r' ||
                             b[i] == '\v' || b[i] == '\f'))
                i++;
            if (i < n && b[i] == '#') {
                while (i < n && b[i] != '\n' && b[i] != '\r') i++;
                continue;
            }
            break;
        }
        if (i >= n || b[i] < '0' || b[i] > '9')
            return cdb_seterr(CDB_CORRUPT, "PNM: malformed header");
        v[f] = 0;
        while (i < n && b[i] >= '0' && b[i] <= '9') {
            v[f] = v[f] * 10 + (b[i] - '0');
            if (v[f] > (1 << 24))
                return cdb_seterr(CDB_TOO_LARGE, "PNM: header value too large");
            i++;
        }
    }
    if (v[0] == 0 || v[1] == 0 || v[2] == 0 || v[2] > 65535)
        return cdb_seterr(CDB_CORRUPT, "PNM: bad size %lldx%lld or maxval %lld", v[0], v[1], v[2]);
    ii->pnm_maxval = (int)v[2];
    ii->decl_w = v[0];
    ii->decl_h = v[1];
    ii->pnm_data = i + 1;
    /* One whitespace byte ends the header; stb hands back uninitialized memory
    ** for missing samples, so a short file is refused here. */
    {
        int64_t need = v[0] * v[1] * (b[1] == '6' ? 3 : 1) * (v[2] > 255 ? 2 : 1);
        if ((int64_t)(n - i) - 1 < need)
            return cdb_seterr(CDB_CORRUPT, "PNM: pixel data truncated (%lld of %lld bytes)",
                              (long long)(n - i) - 1, (long long)need);
    }
    return CDB_OK;
}

/* TGA: colour-mapped types are PIL's "P"; uncompressed pixel data must be present
** (stb 2.27 returns uninitialized rows for a short file). */
static cdb_status tga_scan(const uint8_t *b, size_t n, img_info *ii) {
    ii->decl_w = cdb_img_le16(b + 12);
    ii->decl_h = cdb_img_le16(b + 14);
    if (b[2] == 1 || b[2] == 9) {
        ii->is_palette = 1;
        ii->want_channels = 3;
    }
    if (b[2] == 1 || b[2] == 2 || b[2] == 3) {
        int64_t cmap = b[1] ? (int64_t)cdb_img_le16(b + 5) * ((b[7] + 7) / 8) : 0;
        int64_t need = 18 + (int64_t)b[0] + cmap + ii->decl_w * ii->decl_h * ((b[16] + 7) / 8);
        if (need > (int64_t)n)
            return cdb_seterr(CDB_CORRUPT, "TGA: pixel data truncated (%zu bytes, need %lld)", n,
                              (long long)need);
    }
    return CDB_OK;
}

/* ---- payload bounds: small files that declare big images --------------------- */
/* stb allocates the full image and fills whatever the data does not cover (zeros,
** or stb's inflate output held whole in memory), so a few bytes declaring a size
** under max_pixels could still cost hundreds of MiB. These run after the
** max_pixels check, before stb sees the data, and refuse (CDB_CORRUPT) a file that
** cannot hold the image it declares. Every bound is one no valid file can break. */

cdb_status cdb_img_stb_payload_check(const uint8_t *b, size_t n, const img_info *ii) {
    int64_t px = ii->decl_w * ii->decl_h;
    switch (ii->fmt) {
    case FMT_PNG:
        /* zlib bombs: stb's allocations are capped while it decodes (image_stb.c) */
        return CDB_OK;
    case FMT_GIF:
        /* stb allocates the canvas before it finds a frame */
        if (ii->gif_frame_px < 0)
            return cdb_seterr(CDB_CORRUPT, "GIF: no image in %zu bytes (truncated?)", n);
        /* LZW: the dictionary entry at index e spells at most e - clear pixels, and a
        ** code naming it is at least log2(e + 1) bits wide, so one code of b bits
        ** gives at most 2^b - 2 pixels (entries stop at 4095, 8191 for 13-bit codes,
        ** i.e. at most 4095 pixels per code): under 342 pixels per bit, 2731 per
        ** byte. stb leaves pixels the data does not reach at the background. */
        if (ii->gif_lzw_bytes * 2731 < ii->gif_frame_px)
            return cdb_seterr(CDB_CORRUPT, "GIF: %lld bytes of LZW data cannot hold a %lld-pixel "
                              "frame (truncated?)", (long long)ii->gif_lzw_bytes,
                              (long long)ii->gif_frame_px);
        return CDB_OK;
    case FMT_TGA:
        /* RLE: one packet (1 header byte + one pixel value) covers at most 128
        ** pixels; stb reads past the end as zeros. Counted from the end of the
        ** header, ID and colour map. */
        if (b[2] >= 9) {
            int64_t bpp = (b[16] + 7) / 8, cmap = b[1] ? (int64_t)cdb_img_le16(b + 5) * ((b[7] + 7) / 8) : 0;
            int64_t have = (int64_t)n - 18 - b[0] - cmap, need = (px + 127) / 128 * (1 + bpp);
            if (have < need)
                return cdb_seterr(CDB_CORRUPT, "TGA: %lld bytes of RLE data cannot hold %lldx%lld "
                                  "pixels (at least %lld; truncated?)", (long long)have,
                                  (long long)ii->decl_w, (long long)ii->decl_h, (long long)need);
        }
        return CDB_OK;
    case FMT_PSD:
        /* raw: every sample present; RLE: one 2-byte packet covers at most 128
        ** samples of a row (stb reads past the end as zeros) */
        {
            int64_t rows = ii->decl_h * ii->psd_channels;
            int64_t need = ii->psd_rle ? rows * 2 + rows * ((ii->decl_w + 127) / 128) * 2
                                       : rows * ii->decl_w * (ii->psd_depth / 8);
            if ((int64_t)n - (int64_t)ii->psd_data < need)
                return cdb_seterr(CDB_CORRUPT, "PSD: %lld bytes of image data cannot hold "
                                  "%lldx%lld x %d channels (at least %lld; truncated?)",
                                  (long long)((int64_t)n - (int64_t)ii->psd_data),
                                  (long long)ii->decl_w, (long long)ii->decl_h,
                                  ii->psd_channels, (long long)need);
        }
        return CDB_OK;
    default: return CDB_OK; /* BMP, PNM: uncompressed data is checked by their scans */
    }
}

/* PSD: stb reads the merged composite of 8/16-bit RGB files only; PIL calls such a
** file RGB, or RGBA when it has exactly 4 channels. Section lengths must fit. */
static cdb_status psd_scan(const uint8_t *b, size_t n, img_info *ii) {
    size_t i = 26;
    unsigned ver, ch, depth, mode;
    if (n < 26) return cdb_seterr(CDB_CORRUPT, "PSD: truncated header");
    ver = (unsigned)b[4] << 8 | b[5];
    ch = (unsigned)b[12] << 8 | b[13];
    ii->decl_h = cdb_img_be32(b + 14);
    ii->decl_w = cdb_img_be32(b + 18);
    depth = (unsigned)b[22] << 8 | b[23];
    mode = (unsigned)b[24] << 8 | b[25];
    if (ver != 1)
        return cdb_seterr(CDB_UNSUPPORTED, "PSD: version %u is not supported (PSD 1 only)", ver);
    if (ch < 1 || ch > 16) return cdb_seterr(CDB_CORRUPT, "PSD: %u channels", ch);
    if (mode != 3)
        return cdb_seterr(CDB_UNSUPPORTED, "PSD: colour mode %u is not supported (RGB only)", mode);
    if (depth != 8 && depth != 16)
        return cdb_seterr(CDB_UNSUPPORTED, "PSD: %u-bit channels are not supported", depth);
    for (int s = 0; s < 3; s++) { /* colour mode data, image resources, layers and masks */
        uint32_t len;
        if (i + 4 > n) return cdb_seterr(CDB_CORRUPT, "PSD: truncated section %d", s);
        len = cdb_img_be32(b + i);
        if (len > n - i - 4)
            return cdb_seterr(CDB_CORRUPT, "PSD: section %d declares %u bytes past the end", s,
                              len);
        i += 4 + (size_t)len;
    }
    if (i + 2 > n) return cdb_seterr(CDB_CORRUPT, "PSD: no image data");
    ii->psd_rle = ((unsigned)b[i] << 8 | b[i + 1]) == 1;
    if (!ii->psd_rle && ((unsigned)b[i] << 8 | b[i + 1]) != 0)
        return cdb_seterr(CDB_UNSUPPORTED, "PSD: compression %u is not supported",
                          (unsigned)b[i] << 8 | b[i + 1]);
    ii->psd_data = i + 2;
    ii->psd_channels = (int)ch;
    ii->psd_depth = (int)depth;
    ii->want_channels = ch == 4 ? 4 : 3;
    return CDB_OK;
}

cdb_status cdb_img_stb_scan(const uint8_t *b, size_t n, img_info *ii /* IN/OUT */) {
    cdb_status rc = CDB_OK;
    ii->orientation = 1;
    ii->gif_trans = -1;
    switch (ii->fmt) {
    case FMT_PNG: rc = png_scan(b, n, ii); break;
    case FMT_GIF: gif_scan(b, n, ii); break;
    case FMT_BMP: rc = bmp_scan(b, n, ii); break;
    case FMT_PNM: rc = pnm_scan(b, n, ii); break;
    case FMT_TGA: rc = tga_scan(b, n, ii); break;
    case FMT_PSD: rc = psd_scan(b, n, ii); break;
    default: return cdb_seterr(CDB_INVALID, "image: %s is not an stb format",
                               cdb_img_fmt_name(ii->fmt));
    }
    if (rc != CDB_OK) return rc;
    if (ii->decl_w <= 0 || ii->decl_h <= 0)
        return cdb_seterr(CDB_CORRUPT, "%s: invalid size %lldx%lld", cdb_img_fmt_name(ii->fmt),
                          (long long)ii->decl_w, (long long)ii->decl_h);
    return CDB_OK;
}
