/*
** image.c: image decoding for the encoder. stb_image (compiled in image_stb.c)
** decodes JPEG (baseline, progressive), PNG, BMP, GIF (first frame), TGA and
** binary PNM from memory; this file decides, from each format's own header, what
** PIL 9.4 would call the image's mode, so that preprocess.c can resize it the way
** PIL does:
**
**   PNG  gray -> 1 channel (1-bit gray: nearest, as PIL's mode "1"), gray+alpha
**        -> 2, RGB -> 3, RGBA -> 4, palette -> is_palette (alpha kept when tRNS
**        has one), 16-bit kept as 16-bit. A tRNS colour key on gray/RGB is dropped
**        (PIL keeps mode L/RGB and convert("RGB") ignores it).
**   JPEG gray -> 1, YCbCr/RGB -> 3, CMYK/YCCK (Adobe) -> 3 (stb converts).
**   GIF  palette; pixels stb leaves transparent get the colour of the transparent
**        palette entry, as PIL's P -> RGB conversion gives.
**   BMP  32-bit BI_RGB -> 3 (PIL reads it as BGRX), <= 8-bit palettes -> L when
**        the palette is PIL's greyscale ramp, else palette.
**   TGA  colour-mapped -> palette.
**   PNM  P5/P6; maxval != 255 rescaled like PIL's PpmDecoder (round half even);
**        16-bit gray stays 16-bit (PIL mode "I").
**
** Safety: the declared size is read from each header and checked against
** max_pixels before any pixel is decoded (CDB_TOO_LARGE), so a tiny hostile file
** can never make stb allocate gigabytes. Before stb sees the data, PNG chunk and
** JPEG segment lengths must fit the buffer, JPEG Huffman tables and sampling
** factors must be sane, and uncompressed BMP/TGA/PNM pixel data must be present:
** each guards a known stb 2.27 defect (out-of-bounds writes/reads, uninitialized
** output); docs/images.md lists them. Then payload_check refuses files too small
** to hold the image they declare (stb allocates it whole and fills what is
** missing): the PNG zlib stream is inflated once here, bounded by the exact raw
** size, and JPEG, GIF and RLE TGA data must meet a lower bound on compressed
** size. JPEG EXIF orientation (1-8) is applied like
** PIL's ImageOps.exif_transpose when params ask for it.
**
** Reentrant: no globals (stb's failure reason is thread-local).
*/
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <stb_image.h>
#include <zlib.h>

#include "encoder/encoder.h"

#define IMG_MAX_FILE_BYTES ((int64_t)1 << 30) /* stb takes an int length */
#define IMG_MAX_SIDE (1 << 24)                  /* stb's STBI_MAX_DIMENSIONS */

typedef enum img_fmt {
    FMT_UNKNOWN = 0,
    FMT_JPEG,
    FMT_PNG,
    FMT_GIF,
    FMT_BMP,
    FMT_PNM,
    FMT_TGA
} img_fmt;

static const char *fmt_name(img_fmt f) {
    switch (f) {
    case FMT_JPEG: return "JPEG";
    case FMT_PNG: return "PNG";
    case FMT_GIF: return "GIF";
    case FMT_BMP: return "BMP";
    case FMT_PNM: return "PNM";
    case FMT_TGA: return "TGA";
    default: return "unknown";
    }
}

/* What the format headers say beyond stb's (w, h, comp). */
typedef struct img_info {
    img_fmt fmt;
    int want_channels; /* channels to ask stb for (0 = stb's own) */
    int is_palette;    /* resize with nearest (PIL "P" or "1") */
    int orientation;   /* JPEG EXIF orientation, 1 when absent */
    int64_t decl_w, decl_h; /* size the header declares (0: not parsed here) */
    int jpeg_comp;     /* JPEG SOF component count */
    int pnm_maxval;    /* PNM only */
    size_t pnm_data;   /* offset of the first sample */
    int gif_trans;     /* GIF transparent index, -1 none */
    uint8_t gif_rgb[3];/* its colour */
    int png_depth, png_ctype, png_interlace, png_cgbi; /* IHDR; CgBI: Apple's raw deflate */
    int64_t jpeg_min_bits;  /* entropy-coded bits any valid file of this frame holds */
    int64_t gif_frame_px;   /* first frame's pixels, -1: no frame found */
    int64_t gif_lzw_bytes;  /* its LZW sub-block payload, as far as the file goes */
} img_info;

static uint32_t rd_be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static uint32_t rd_le32(const uint8_t *p) {
    return (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0];
}
static unsigned rd_le16(const uint8_t *p) { return (unsigned)p[1] << 8 | p[0]; }
static unsigned rd_be16(const uint8_t *p) { return (unsigned)p[0] << 8 | p[1]; }

static img_fmt sniff(const uint8_t *b, size_t n) {
    if (n >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF) return FMT_JPEG;
    if (n >= 8 && !memcmp(b, "\x89PNG\r\n\x1a\n", 8)) return FMT_PNG;
    if (n >= 6 && (!memcmp(b, "GIF87a", 6) || !memcmp(b, "GIF89a", 6))) return FMT_GIF;
    if (n >= 2 && b[0] == 'B' && b[1] == 'M') return FMT_BMP;
    if (n >= 2 && b[0] == 'P' && b[1] >= '1' && b[1] <= '7') return FMT_PNM;
    /* TGA has no magic: image type 1, 2, 3, 9, 10, 11 and a sane colour map type. */
    if (n >= 18 && b[1] <= 1 &&
        (b[2] == 1 || b[2] == 2 || b[2] == 3 || b[2] == 9 || b[2] == 10 || b[2] == 11))
        return FMT_TGA;
    return FMT_UNKNOWN;
}

/* ---- EXIF orientation (JPEG APP1) ------------------------------------------ */

/* Orientation tag from a TIFF block (after "Exif\0\0"); 1 when absent or malformed. */
static int exif_orientation(const uint8_t *t, size_t n) {
    int le;
    uint32_t ifd;
    unsigned count;
    if (n < 8) return 1;
    if (t[0] == 'I' && t[1] == 'I') le = 1;
    else if (t[0] == 'M' && t[1] == 'M') le = 0;
    else return 1;
    if ((le ? rd_le16(t + 2) : rd_be16(t + 2)) != 42) return 1;
    ifd = le ? rd_le32(t + 4) : rd_be32(t + 4);
    if (ifd > n - 2 || ifd < 8) return 1;
    count = le ? rd_le16(t + ifd) : rd_be16(t + ifd);
    for (unsigned i = 0; i < count; i++) {
        size_t e = (size_t)ifd + 2 + (size_t)i * 12;
        unsigned tag, type, v;
        if (e + 12 > n) return 1;
        tag = le ? rd_le16(t + e) : rd_be16(t + e);
        if (tag != 0x0112) continue;
        type = le ? rd_le16(t + e + 2) : rd_be16(t + e + 2);
        if (type == 3) /* SHORT, stored left-justified in the value field */
            v = le ? rd_le16(t + e + 8) : rd_be16(t + e + 8);
        else if (type == 4) /* LONG: tolerated */
            v = le ? rd_le32(t + e + 8) : rd_be32(t + e + 8);
        else
            return 1;
        return (v >= 1 && v <= 8) ? (int)v : 1;
    }
    return 1;
}

/* Walks every JPEG marker segment (skipping entropy-coded data): refuses the
** coding processes stb cannot decode with a precise reason, checks segment lengths
** and Huffman tables (stb 2.27 writes past its tables when a DHT declares more than
** 256 codes), records the first SOF's size and components, and reads EXIF. */
static cdb_status jpeg_dht_check(const uint8_t *p, long L, unsigned *defined /* IN/OUT */) {
    while (L > 0) {
        long sum = 0;
        if (L < 17) return cdb_seterr(CDB_CORRUPT, "JPEG: truncated Huffman table");
        if ((p[0] >> 4) > 1 || (p[0] & 15) > 3)
            return cdb_seterr(CDB_CORRUPT, "JPEG: bad Huffman table id 0x%02X", p[0]);
        for (int k = 1; k <= 16; k++) sum += p[k];
        if (sum > 256)
            return cdb_seterr(CDB_CORRUPT, "JPEG: Huffman table declares %ld codes (max 256)", sum);
        if (17 + sum > L) return cdb_seterr(CDB_CORRUPT, "JPEG: Huffman table past its segment");
        *defined |= 1u << ((p[0] >> 4) * 4 + (p[0] & 15)); /* bit class*4 + id */
        p += 17 + sum;
        L -= 17 + sum;
    }
    return CDB_OK;
}

/* A scan header (SOS) must name only Huffman tables some earlier DHT defined: stb
** 2.27 keeps its tables in uninitialized memory and decodes with whatever is there,
** reading far out of bounds (found by fuzz_image: a progressive AC refinement scan
** whose AC table is defined only after it). Which tables a scan decodes with:
** sequential scans use the DC and the AC table of every component; progressive DC
** scans (Ss = 0) the DC table in the first pass only (Ah = 0; refinement bits are
** raw); progressive AC scans (Ss > 0) the AC table. */
static cdb_status jpeg_sos_check(const uint8_t *p, unsigned L, unsigned defined,
                                 int progressive) {
    unsigned ns = L >= 1 ? p[0] : 0;
    if (ns < 1 || ns > 4 || L < 1 + 2 * ns + 3)
        return cdb_seterr(CDB_CORRUPT, "JPEG: bad scan header (%u components, %u bytes)", ns, L);
    unsigned ss = p[1 + 2 * ns], ah = p[3 + 2 * ns] >> 4;
    int need_dc = !progressive || (ss == 0 && ah == 0);
    int need_ac = !progressive || ss > 0;
    for (unsigned c = 0; c < ns; c++) {
        unsigned td = p[2 + 2 * c] >> 4, ta = p[2 + 2 * c] & 15;
        if (td > 3 || ta > 3)
            return cdb_seterr(CDB_CORRUPT, "JPEG: bad Huffman table selector 0x%02X in a scan",
                              p[2 + 2 * c]);
        if (need_dc && !(defined & (1u << td)))
            return cdb_seterr(CDB_CORRUPT, "JPEG: a scan uses DC Huffman table %u before any "
                              "definition of it", td);
        if (need_ac && !(defined & (1u << (4 + ta))))
            return cdb_seterr(CDB_CORRUPT, "JPEG: a scan uses AC Huffman table %u before any "
                              "definition of it", ta);
    }
    return CDB_OK;
}

static cdb_status jpeg_scan(const uint8_t *b, size_t n, img_info *ii) {
    size_t i = 2;
    int seen_sof = 0, seen_sos = 0, seen_exif = 0, progressive = 0;
    unsigned huff = 0; /* Huffman tables defined so far (jpeg_dht_check) */
    cdb_status rc;
    while (i + 4 <= n) {
        unsigned m, len;
        if (b[i] != 0xFF) return cdb_seterr(CDB_CORRUPT, "JPEG: bad marker at byte %zu", i);
        m = b[i + 1];
        if (m == 0xFF) { i++; continue; } /* fill byte */
        if (m == 0xD8 || (m >= 0xD0 && m <= 0xD7) || m == 0x01) { i += 2; continue; }
        if (m == 0xD9) break;
        len = rd_be16(b + i + 2);
        if (len < 2 || i + 2 + len > n)
            return cdb_seterr(CDB_CORRUPT, "JPEG: segment 0x%02X length %u runs past the end of "
                              "the file (%zu bytes; truncated?)", m, len, n);
        if (m == 0xE1 && len >= 8 && !memcmp(b + i + 4, "Exif\0\0", 6) && !seen_exif) {
            /* PIL keeps only the first Exif segment (info["exif"]) */
            ii->orientation = exif_orientation(b + i + 10, len - 8);
            seen_exif = 1;
        }
        if (m == 0xC4 && (rc = jpeg_dht_check(b + i + 4, (long)len - 2, &huff)) != CDB_OK)
            return rc;
        if (m == 0xDA && (rc = jpeg_sos_check(b + i + 4, len - 2, huff, progressive)) != CDB_OK)
            return rc;
        if (m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC && !seen_sof) {
            if (m == 0xC3 || m == 0xC7 || m == 0xCB || m == 0xCF)
                return cdb_seterr(CDB_UNSUPPORTED, "JPEG: lossless JPEG (SOF%u) is not supported",
                                  m - 0xC0);
            if (m >= 0xC9)
                return cdb_seterr(CDB_UNSUPPORTED, "JPEG: arithmetic coding (SOF%u) is not "
                                  "supported", m - 0xC0);
            if (m == 0xC5 || m == 0xC6)
                return cdb_seterr(CDB_UNSUPPORTED, "JPEG: hierarchical JPEG (SOF%u) is not "
                                  "supported", m - 0xC0);
            if (len < 8) return cdb_seterr(CDB_CORRUPT, "JPEG: short frame header");
            if (b[i + 4] != 8)
                return cdb_seterr(CDB_UNSUPPORTED, "JPEG: %u-bit samples are not supported "
                                  "(8-bit only)", b[i + 4]);
            if (b[i + 9] != 1 && b[i + 9] != 3 && b[i + 9] != 4)
                return cdb_seterr(CDB_UNSUPPORTED, "JPEG: %u colour components are not supported",
                                  b[i + 9]);
            /* Sampling factors 1..4 that divide the maximum: stb 2.27's upsamplers
            ** read out of bounds on fractional ratios (stb issue #1178; 2.28
            ** added this same check). */
            if (len != 8u + 3u * b[i + 9])
                return cdb_seterr(CDB_CORRUPT, "JPEG: frame header length %u for %u components",
                                  len, b[i + 9]);
            {
                unsigned hmax = 1, vmax = 1;
                for (unsigned c = 0; c < b[i + 9]; c++) {
                    unsigned hv = b[i + 11 + 3 * c], hs = hv >> 4, vs = hv & 15;
                    if (hs < 1 || hs > 4 || vs < 1 || vs > 4)
                        return cdb_seterr(CDB_CORRUPT, "JPEG: bad sampling factors %ux%u", hs, vs);
                    if (hs > hmax) hmax = hs;
                    if (vs > vmax) vmax = vs;
                }
                for (unsigned c = 0; c < b[i + 9]; c++) {
                    unsigned hv = b[i + 11 + 3 * c];
                    if (hmax % (hv >> 4) || vmax % (hv & 15))
                        return cdb_seterr(CDB_UNSUPPORTED, "JPEG: fractional chroma subsampling "
                                          "(%ux%u of %ux%u) is not supported", hv >> 4, hv & 15,
                                          hmax, vmax);
                }
            }
            ii->decl_h = rd_be16(b + i + 5);
            ii->decl_w = rd_be16(b + i + 7);
            ii->jpeg_comp = b[i + 9];
            progressive = m == 0xC2;
            /* Every data unit (8x8 block) of every component has its DC coefficient
            ** Huffman-coded in some scan (sequential, or the progressive DC-first
            ** scan), and a Huffman code is at least 1 bit: the entropy-coded data holds
            ** at least one bit per data unit (component c: ceil(ceil(w*Hc/Hmax)/8) x
            ** ceil(ceil(h*Vc/Vmax)/8) units; MCU padding only adds). AC scans may cost
            ** almost nothing (EOBRUN), so this is the only bound counted. */
            {
                unsigned hmax = 1, vmax = 1;
                int64_t w = ii->decl_w, h = ii->decl_h, bits = 0;
                for (unsigned c = 0; c < b[i + 9]; c++) {
                    unsigned hv = b[i + 11 + 3 * c];
                    if ((hv >> 4) > hmax) hmax = hv >> 4;
                    if ((hv & 15) > vmax) vmax = hv & 15;
                }
                for (unsigned c = 0; c < b[i + 9]; c++) {
                    unsigned hv = b[i + 11 + 3 * c];
                    int64_t cw = (w * (hv >> 4) + hmax - 1) / hmax;
                    int64_t ch = (h * (hv & 15) + vmax - 1) / vmax;
                    bits += ((cw + 7) / 8) * ((ch + 7) / 8);
                }
                ii->jpeg_min_bits = bits;
            }
            seen_sof = 1;
        }
        i += 2 + len;
        if (m == 0xDA) { /* entropy-coded data follows: skip to the next real marker */
            seen_sos = 1;
            while (i + 1 < n && !(b[i] == 0xFF && b[i + 1] != 0 && b[i + 1] != 0xFF &&
                                  !(b[i + 1] >= 0xD0 && b[i + 1] <= 0xD7)))
                i++;
        }
    }
    if (!seen_sof || !seen_sos)
        return cdb_seterr(CDB_CORRUPT, "JPEG: no %s in %zu bytes (truncated or corrupt)",
                          seen_sof ? "scan" : "frame header", n);
    return CDB_OK;
}

/* PNG: walks every chunk so that no declared length exceeds the file, and reads
** IHDR's bit depth / colour type and whether a tRNS chunk exists. */
static cdb_status png_scan(const uint8_t *b, size_t n, img_info *ii) {
    size_t i = 8;
    int depth = -1, ctype = -1, has_trns = 0, seen_iend = 0;
    while (i + 12 <= n) {
        uint32_t len = rd_be32(b + i);
        const uint8_t *type = b + i + 4;
        if (len > n - i - 12)
            return cdb_seterr(CDB_CORRUPT, "PNG: chunk '%.4s' declares %u bytes but only %zu "
                              "remain (truncated or corrupt)", (const char *)type, len,
                              n - i - 12);
        if (!memcmp(type, "IHDR", 4) && len >= 13) {
            ii->decl_w = rd_be32(b + i + 8);
            ii->decl_h = rd_be32(b + i + 12);
            depth = b[i + 8 + 8];
            ctype = b[i + 8 + 9];
            ii->png_interlace = b[i + 8 + 12];
        } else if (!memcmp(type, "CgBI", 4) && depth < 0) {
            ii->png_cgbi = 1; /* stb then reads IDAT as raw deflate */
        } else if (!memcmp(type, "tRNS", 4)) {
            has_trns = 1;
        } else if (!memcmp(type, "IEND", 4)) {
            seen_iend = 1;
            break;
        }
        i += 12 + (size_t)len;
    }
    if (depth < 0) return cdb_seterr(CDB_CORRUPT, "PNG: missing IHDR");
    if (ii->decl_w == 0 || ii->decl_h == 0)
        return cdb_seterr(CDB_CORRUPT, "PNG: invalid size %lldx%lld", (long long)ii->decl_w,
                          (long long)ii->decl_h);
    if (!seen_iend) return cdb_seterr(CDB_CORRUPT, "PNG: no IEND chunk (truncated file)");
    ii->png_depth = depth;
    ii->png_ctype = ctype;
    switch (ctype) {
    case 0: ii->want_channels = 1; ii->is_palette = depth == 1; break;
    case 2: ii->want_channels = 3; break;
    case 3: ii->want_channels = has_trns ? 4 : 3; ii->is_palette = 1; break;
    case 4: ii->want_channels = 2; break;
    case 6: ii->want_channels = 4; break;
    default: return cdb_seterr(CDB_CORRUPT, "PNG: invalid colour type %d", ctype);
    }
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
    ii->decl_w = rd_le16(b + 6);
    ii->decl_h = rd_le16(b + 8);
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
            ii->gif_frame_px = (int64_t)rd_le16(b + i + 5) * rd_le16(b + i + 7);
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
    hsize = rd_le32(b + 14);
    if (hsize == 12) {
        ii->decl_w = rd_le16(b + 18);
        ii->decl_h = rd_le16(b + 20);
        bpp = rd_le16(b + 24);
    } else {
        if (n < 54 || hsize < 40) return cdb_seterr(CDB_CORRUPT, "BMP: bad header size %u", hsize);
        ii->decl_w = (int32_t)rd_le32(b + 18);
        ii->decl_h = (int32_t)rd_le32(b + 22);
        if (ii->decl_h < 0) ii->decl_h = -ii->decl_h; /* top-down */
        bpp = rd_le16(b + 28);
        comp = rd_le32(b + 30);
        colors = rd_le32(b + 46);
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
        if ((int64_t)rd_le32(b + 10) + stride * ii->decl_h > (int64_t)n)
            return cdb_seterr(CDB_CORRUPT, "BMP: pixel data truncated (%zu bytes, need %lld)", n,
                              (long long)(rd_le32(b + 10) + stride * ii->decl_h));
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
    ii->decl_w = rd_le16(b + 12);
    ii->decl_h = rd_le16(b + 14);
    if (b[2] == 1 || b[2] == 9) {
        ii->is_palette = 1;
        ii->want_channels = 3;
    }
    if (b[2] == 1 || b[2] == 2 || b[2] == 3) {
        int64_t cmap = b[1] ? (int64_t)rd_le16(b + 5) * ((b[7] + 7) / 8) : 0;
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

/* Bytes of filtered scanlines (one filter byte per row) PNG's zlib stream must
** inflate to: the image, or the sum of the 7 Adam7 passes; -1 for a depth/colour
** type combination stb will refuse itself. */
static int64_t png_raw_bytes(const img_info *ii) {
    static const int x0[7] = {0, 4, 0, 2, 0, 1, 0}, y0[7] = {0, 0, 4, 0, 2, 0, 1};
    static const int dx[7] = {8, 8, 4, 4, 2, 2, 1}, dy[7] = {8, 8, 8, 4, 4, 2, 2};
    int64_t w = ii->decl_w, h = ii->decl_h, total = 0;
    int samples, bits;
    switch (ii->png_ctype) {
    case 0: case 3: samples = 1; break;
    case 2: samples = 3; break;
    case 4: samples = 2; break;
    case 6: samples = 4; break;
    default: return -1;
    }
    if (ii->png_depth != 1 && ii->png_depth != 2 && ii->png_depth != 4 && ii->png_depth != 8 &&
        ii->png_depth != 16)
        return -1;
    bits = samples * ii->png_depth;
    if (ii->png_interlace != 1) return h * (1 + (w * bits + 7) / 8);
    for (int p = 0; p < 7; p++) {
        int64_t pw = (w - x0[p] + dx[p] - 1) / dx[p], ph = (h - y0[p] + dy[p] - 1) / dy[p];
        if (pw > 0 && ph > 0) total += ph * (1 + (pw * bits + 7) / 8);
    }
    return total;
}

/* PNG: stb inflates all IDAT data into one buffer before it compares the result
** with the image size (stb 2.27 accepts extra data, stb issue #276), so a 1x1 PNG
** can inflate to gigabytes. Inflate it here first, streaming into a small buffer
** that is thrown away, and refuse when the output passes the exact raw size plus
** a slack (1/8 + 64 KiB, for encoders that leave extra zero rows), when it is
** short (truncated: stb refuses too, and PIL raises), or when zlib finds an error
** (PIL inflates with zlib). The zlib header is checked as stb does and the rest
** inflated raw, so the Adler-32 trailer is not checked (stb does not check it). */
static cdb_status png_inflate_check(const uint8_t *b, size_t n, const img_info *ii) {
    int64_t want = png_raw_bytes(ii), limit, got = 0;
    size_t i = 8;
    int zrc = Z_OK, header = ii->png_cgbi ? 2 : 0; /* zlib header bytes still to skip */
    uint8_t hdr[2], out[1 << 14];
    z_stream z;
    cdb_status rc = CDB_OK;
    if (want < 0) return CDB_OK; /* bad IHDR: stb's own error is clearer */
    limit = want + want / 8 + 65536;
    memset(&z, 0, sizeof z);
    if (inflateInit2(&z, -15) != Z_OK) return cdb_seterr(CDB_NOMEM, "PNG: out of memory");
    while (i + 12 <= n && zrc != Z_STREAM_END) {
        uint32_t len = rd_be32(b + i); /* fits: png_scan checked every length */
        const uint8_t *d = b + i + 8;
        if (!memcmp(b + i + 4, "IEND", 4)) break;
        i += 12 + (size_t)len;
        if (memcmp(d - 4, "IDAT", 4)) continue;
        while (len > 0 && header < 2) {
            hdr[header++] = *d++;
            len--;
            if (header == 2 && ((hdr[0] & 15) != 8 || (hdr[0] * 256 + hdr[1]) % 31 ||
                                (hdr[1] & 32))) {
                rc = cdb_seterr(CDB_CORRUPT, "PNG: bad zlib header %02X %02X", hdr[0], hdr[1]);
                goto done;
            }
        }
        z.next_in = (Bytef *)d;
        z.avail_in = len;
        do { /* a full buffer may leave output pending even with no input left */
            z.next_out = out;
            z.avail_out = sizeof out;
            zrc = inflate(&z, Z_NO_FLUSH);
            got += (int64_t)(sizeof out - z.avail_out);
            if (zrc == Z_MEM_ERROR) {
                rc = cdb_seterr(CDB_NOMEM, "PNG: out of memory");
                goto done;
            }
            if (zrc != Z_OK && zrc != Z_STREAM_END && zrc != Z_BUF_ERROR) {
                rc = cdb_seterr(CDB_CORRUPT, "PNG: image data is not valid deflate (%s) after "
                                "%lld bytes", z.msg ? z.msg : "zlib error", (long long)got);
                goto done;
            }
            if (got > limit) {
                rc = cdb_seterr(CDB_CORRUPT, "PNG: image data inflates to more than %lld bytes, "
                                "%lldx%lld needs %lld (zlib bomb?)", (long long)limit,
                                (long long)ii->decl_w, (long long)ii->decl_h, (long long)want);
                goto done;
            }
            if (zrc == Z_BUF_ERROR && z.avail_out > 0) break; /* needs more input */
        } while ((z.avail_in > 0 || z.avail_out == 0) && zrc != Z_STREAM_END);
    }
    if (got < want)
        rc = cdb_seterr(CDB_CORRUPT, "PNG: image data inflates to %lld bytes, %lldx%lld needs "
                        "%lld (truncated)", (long long)got, (long long)ii->decl_w,
                        (long long)ii->decl_h, (long long)want);
done:
    inflateEnd(&z);
    return rc;
}

static cdb_status payload_check(const uint8_t *b, size_t n, const img_info *ii) {
    int64_t px = ii->decl_w * ii->decl_h;
    switch (ii->fmt) {
    case FMT_PNG: return png_inflate_check(b, n, ii);
    case FMT_JPEG:
        /* at least one bit per data unit (jpeg_scan), stb zero-fills missing scan data */
        if ((int64_t)n * 8 < ii->jpeg_min_bits)
            return cdb_seterr(CDB_CORRUPT, "JPEG: %zu bytes cannot hold a %lldx%lld image (at "
                              "least %lld bytes of scan data; truncated?)", n,
                              (long long)ii->decl_w, (long long)ii->decl_h,
                              (long long)((ii->jpeg_min_bits + 7) / 8));
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
            int64_t bpp = (b[16] + 7) / 8, cmap = b[1] ? (int64_t)rd_le16(b + 5) * ((b[7] + 7) / 8) : 0;
            int64_t have = (int64_t)n - 18 - b[0] - cmap, need = (px + 127) / 128 * (1 + bpp);
            if (have < need)
                return cdb_seterr(CDB_CORRUPT, "TGA: %lld bytes of RLE data cannot hold %lldx%lld "
                                  "pixels (at least %lld; truncated?)", (long long)have,
                                  (long long)ii->decl_w, (long long)ii->decl_h, (long long)need);
        }
        return CDB_OK;
    default: return CDB_OK; /* BMP, PNM: uncompressed data is checked by their scans */
    }
}

static cdb_status stb_error(img_fmt f) {
    const char *why = stbi_failure_reason();
    if (!why) why = "decode failed";
    if (strstr(why, "outofmem") || strstr(why, "Out of memory"))
        return cdb_seterr(CDB_NOMEM, "%s: out of memory while decoding", fmt_name(f));
    if (strstr(why, "not supported") || strstr(why, "unsupported") || strstr(why, "Unsupported") ||
        strstr(why, "only"))
        return cdb_seterr(CDB_UNSUPPORTED, "%s: %s", fmt_name(f), why);
    if (strstr(why, "too large") || strstr(why, "Very large"))
        return cdb_seterr(CDB_TOO_LARGE, "%s: %s", fmt_name(f), why);
    return cdb_seterr(CDB_CORRUPT, "%s: corrupt or truncated data (%s)", fmt_name(f), why);
}

/* Format sniffing + the format's own header checks; fills ii including the
** declared size (stb's probe as the fallback: it tries every format and would
** report only the last failure, hiding the real reason). */
static cdb_status scan_header(const uint8_t *b, size_t n, img_info *ii) {
    cdb_status rc = CDB_OK;
    int w = 0, h = 0, comp = 0;
    memset(ii, 0, sizeof *ii);
    ii->orientation = 1;
    ii->gif_trans = -1;
    ii->fmt = sniff(b, n);
    switch (ii->fmt) {
    case FMT_UNKNOWN:
        return cdb_seterr(CDB_UNSUPPORTED, "image: not a JPEG, PNG, GIF, BMP, TGA or PNM file");
    case FMT_JPEG: rc = jpeg_scan(b, n, ii); break;
    case FMT_PNG: rc = png_scan(b, n, ii); break;
    case FMT_GIF: gif_scan(b, n, ii); break;
    case FMT_BMP: rc = bmp_scan(b, n, ii); break;
    case FMT_PNM: rc = pnm_scan(b, n, ii); break;
    case FMT_TGA: rc = tga_scan(b, n, ii); break;
    }
    if (rc != CDB_OK) return rc;

    if (ii->decl_w > 0 && ii->decl_h > 0) {
        if (ii->fmt != FMT_JPEG) ii->jpeg_comp = 0;
    } else {
        if (!stbi_info_from_memory(b, (int)n, &w, &h, &comp)) return stb_error(ii->fmt);
        if (ii->fmt == FMT_JPEG) ii->jpeg_comp = comp;
        ii->decl_w = w;
        ii->decl_h = h;
    }
    if (ii->decl_w <= 0 || ii->decl_h <= 0)
        return cdb_seterr(CDB_CORRUPT, "%s: invalid size %lldx%lld", fmt_name(ii->fmt),
                          (long long)ii->decl_w, (long long)ii->decl_h);
    return CDB_OK;
}

/* ---- public API ------------------------------------------------------------- */

cdb_image_params cdb_image_params_default(void) {
    cdb_image_params p;
    p.max_pixels = CDB_IMAGE_DEFAULT_MAX_PIXELS;
    p.apply_exif = 1;
    return p;
}

cdb_status cdb_image_probe(const void *buf, size_t n, int *width /* OUT */, int *height /* OUT */) {
    img_info ii;
    cdb_status rc;
    if (!buf || !width || !height) return cdb_seterr(CDB_INVALID, "image_probe: NULL argument");
    if (n == 0) return cdb_seterr(CDB_CORRUPT, "image: empty file (0 bytes)");
    if (n > (size_t)IMG_MAX_FILE_BYTES)
        return cdb_seterr(CDB_TOO_LARGE, "image: %zu bytes is over the 1 GiB limit", n);
    if ((rc = scan_header(buf, n, &ii)) != CDB_OK) return rc;
    if (ii.decl_w > INT_MAX || ii.decl_h > INT_MAX)
        return cdb_seterr(CDB_TOO_LARGE, "%s: declared size %lldx%lld is absurd", fmt_name(ii.fmt),
                          (long long)ii.decl_w, (long long)ii.decl_h);
    *width = (int)ii.decl_w;
    *height = (int)ii.decl_h;
    return CDB_OK;
}

/* ImageOps.exif_transpose: out(x, y) = in(sx, sy) per orientation. */
static cdb_status apply_orientation(cdb_image *img, int o) {
    int w = img->width, h = img->height, ow = (o >= 5) ? h : w, oh = (o >= 5) ? w : h;
    size_t px = (size_t)img->channels * (img->bits / 8);
    uint8_t *src = img->pixels, *dst = cdb_malloc((size_t)w * h * px);
    if (!dst) return cdb_seterr(CDB_NOMEM, "image: out of memory for EXIF rotation");
    for (int y = 0; y < oh; y++)
        for (int x = 0; x < ow; x++) {
            int sx, sy;
            switch (o) {
            case 2: sx = w - 1 - x; sy = y; break;          /* FLIP_LEFT_RIGHT */
            case 3: sx = w - 1 - x; sy = h - 1 - y; break;  /* ROTATE_180 */
            case 4: sx = x; sy = h - 1 - y; break;          /* FLIP_TOP_BOTTOM */
            case 5: sx = y; sy = x; break;                  /* TRANSPOSE */
            case 6: sx = y; sy = h - 1 - x; break;          /* ROTATE_270 (90 cw) */
            case 7: sx = w - 1 - y; sy = h - 1 - x; break;  /* TRANSVERSE */
            case 8: sx = w - 1 - y; sy = x; break;          /* ROTATE_90 (90 ccw) */
            default: sx = x; sy = y; break;
            }
            memcpy(dst + ((size_t)y * ow + x) * px, src + ((size_t)sy * w + sx) * px, px);
        }
    cdb_free(img->pixels);
    img->pixels = dst;
    img->width = ow;
    img->height = oh;
    return CDB_OK;
}

cdb_status cdb_image_decode(const void *buf, size_t n, const cdb_image_params *p,
                            cdb_image **out /* OUT */) {
    cdb_status rc = CDB_OK;
    cdb_image_params prm = p ? *p : cdb_image_params_default();
    const uint8_t *b = buf;
    img_info ii;
    cdb_image *img = NULL;
    int w = 0, h = 0, got = 0, is16;
    void *pix = NULL;

    if (!out) return cdb_seterr(CDB_INVALID, "image_decode: NULL out");
    *out = NULL;
    if (!buf && n) return cdb_seterr(CDB_INVALID, "image_decode: NULL buffer");
    if (n == 0) return cdb_seterr(CDB_CORRUPT, "image: empty file (0 bytes)");
    if (n > (size_t)IMG_MAX_FILE_BYTES)
        return cdb_seterr(CDB_TOO_LARGE, "image: %zu bytes is over the 1 GiB limit", n);
    if (prm.max_pixels < 0) return cdb_seterr(CDB_INVALID, "image_decode: negative max_pixels");
    if (prm.max_pixels == 0) prm.max_pixels = CDB_IMAGE_DEFAULT_MAX_PIXELS;

    if ((rc = scan_header(b, n, &ii)) != CDB_OK) return rc;
    /* Declared size first: nothing is decoded for a bomb. Two 32-bit sides (PNG's
    ** IHDR) can overflow even an int64 product (found by fuzz_image): saturate. */
    int64_t decl_px;
    if (__builtin_mul_overflow(ii.decl_w, ii.decl_h, &decl_px)) decl_px = INT64_MAX;
    if (decl_px > prm.max_pixels)
        return cdb_seterr(CDB_TOO_LARGE, "%s: %lldx%lld = %lld pixels exceeds the limit of %lld "
                          "(decompression bomb?)", fmt_name(ii.fmt), (long long)ii.decl_w,
                          (long long)ii.decl_h, (long long)decl_px, (long long)prm.max_pixels);
    if (ii.decl_w > IMG_MAX_SIDE || ii.decl_h > IMG_MAX_SIDE)
        return cdb_seterr(CDB_TOO_LARGE, "%s: declared size %lldx%lld is absurd",
                          fmt_name(ii.fmt), (long long)ii.decl_w, (long long)ii.decl_h);
    if ((rc = payload_check(b, n, &ii)) != CDB_OK) return rc;
    if (ii.fmt == FMT_JPEG) ii.want_channels = ii.jpeg_comp == 1 ? 1 : 3;
    if (ii.want_channels < 0 || ii.want_channels > 4)
        return cdb_seterr(CDB_UNSUPPORTED, "%s: %d channels", fmt_name(ii.fmt), ii.want_channels);

    is16 = (ii.fmt == FMT_PNG || ii.fmt == FMT_PNM) && stbi_is_16_bit_from_memory(b, (int)n);
    if (is16)
        pix = stbi_load_16_from_memory(b, (int)n, &w, &h, &got, ii.want_channels);
    else
        pix = stbi_load_from_memory(b, (int)n, &w, &h, &got, ii.want_channels);
    if (!pix) return stb_error(ii.fmt);
    if (ii.want_channels == 0) ii.want_channels = got; /* the format's own count */
    if (ii.want_channels < 1 || ii.want_channels > 4 || (int64_t)w * h > prm.max_pixels) {
        stbi_image_free(pix);
        return cdb_seterr(CDB_CORRUPT, "%s: decoder returned %dx%d with %d channels",
                          fmt_name(ii.fmt), w, h, ii.want_channels);
    }

    img = cdb_calloc(1, sizeof *img);
    if (!img) {
        stbi_image_free(pix);
        return cdb_seterr(CDB_NOMEM, "image: out of memory");
    }
    img->width = w;
    img->height = h;
    img->channels = ii.want_channels;
    img->bits = is16 ? 16 : 8;
    img->is_palette = ii.is_palette;
    img->pixels = pix;

    if (ii.fmt == FMT_GIF && ii.gif_trans >= 0) {
        uint8_t *q = pix;
        for (size_t i = 0; i < (size_t)w * h; i++, q += 4)
            if (q[3] == 0) memcpy(q, ii.gif_rgb, 3);
    }
    if (ii.fmt == FMT_PNM && is16) {
        /* PNM samples are big-endian; stb 2.27 returns them unswapped (later stb
        ** versions swap). Decide from the first sample whose two bytes differ. */
        uint16_t *q = pix;
        size_t ns = (size_t)w * h * img->channels;
        for (size_t i = 0; i < ns; i++) {
            const uint8_t *f = b + ii.pnm_data + 2 * i;
            if (f[0] == f[1]) continue;
            if (q[i] != (uint16_t)(f[0] << 8 | f[1]))
                for (size_t k = 0; k < ns; k++) q[k] = (uint16_t)(q[k] << 8 | q[k] >> 8);
            break;
        }
    }
    if (ii.fmt == FMT_PNM && ii.pnm_maxval != 255 &&
        !(ii.pnm_maxval == 65535 && img->channels == 1)) {
        /* PIL 9.4's PpmDecoder: min(out_max, round(v / maxval * out_max)) in double
        ** with Python's round half to even (rint), out_max = 65535 for gray with
        ** maxval > 255 (mode "I"), else 255. */
        size_t ns = (size_t)w * h * img->channels;
        int out16 = img->channels == 1 && ii.pnm_maxval > 255;
        double mv = ii.pnm_maxval, omax = out16 ? 65535.0 : 255.0;
        void *d = cdb_malloc(ns * (out16 ? 2 : 1));
        if (!d) {
            rc = cdb_seterr(CDB_NOMEM, "image: out of memory");
            goto done;
        }
        for (size_t i = 0; i < ns; i++) {
            unsigned v = is16 ? ((uint16_t *)pix)[i] : ((uint8_t *)pix)[i];
            double r = rint((double)v / mv * omax);
            if (r > omax) r = omax;
            if (out16)
                ((uint16_t *)d)[i] = (uint16_t)r;
            else
                ((uint8_t *)d)[i] = (uint8_t)r;
        }
        cdb_free(pix);
        img->pixels = d;
        img->bits = out16 ? 16 : 8;
    }
    if (prm.apply_exif && ii.orientation >= 2 && ii.orientation <= 8)
        rc = apply_orientation(img, ii.orientation);

done:
    if (rc != CDB_OK) {
        cdb_image_free(img);
        return rc;
    }
    *out = img;
    return CDB_OK;
}

cdb_status cdb_image_load(const char *path, const cdb_image_params *p, cdb_image **out /* OUT */) {
    cdb_status rc = CDB_OK;
    FILE *f = NULL;
    uint8_t *buf = NULL;
    struct stat st;
    size_t n;
    if (!path || !out) return cdb_seterr(CDB_INVALID, "image_load: NULL argument");
    *out = NULL;
    f = fopen(path, "rb");
    if (!f) return cdb_seterr(errno == ENOENT ? CDB_NOTFOUND : CDB_IO, "open %s: %s", path,
                              strerror(errno));
    if (fstat(fileno(f), &st) != 0) {
        rc = cdb_seterr(CDB_IO, "stat %s: %s", path, strerror(errno));
        goto done;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = cdb_seterr(CDB_INVALID, "%s: not a regular file", path);
        goto done;
    }
    if ((int64_t)st.st_size > IMG_MAX_FILE_BYTES) {
        rc = cdb_seterr(CDB_TOO_LARGE, "%s: %lld bytes is over the 1 GiB limit", path,
                        (long long)st.st_size);
        goto done;
    }
    n = (size_t)st.st_size;
    buf = cdb_malloc(n ? n : 1);
    if (!buf) {
        rc = cdb_seterr(CDB_NOMEM, "%s: out of memory (%zu bytes)", path, n);
        goto done;
    }
    if (n && fread(buf, 1, n, f) != n) {
        rc = cdb_seterr(CDB_IO, "read %s: %s", path, ferror(f) ? strerror(errno) : "short read");
        goto done;
    }
    rc = cdb_image_decode(buf, n, p, out);
    if (rc != CDB_OK) rc = cdb_errctx(rc, "%s", path);
done:
    if (f) fclose(f);
    cdb_free(buf);
    return rc;
}

void cdb_image_free(cdb_image *img) {
    if (!img) return;
    cdb_free(img->pixels); /* stb allocates with cdb_malloc (image_stb.c) */
    cdb_free(img);
}
