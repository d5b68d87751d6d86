/*
** image_raw.c: camera RAW files (DNG, CR2, CR3, NEF, ARW, RAF, ORF, RW2, PEF, SRW...)
** through libraw 0.20 (Debian's libraw20, the thread-safe libraw_r build). What a
** CLIP model needs is the picture the camera showed, not a new development of the
** sensor data, so:
**
**   - the embedded preview when it is full-size (its long side at least 90% of the
**     image's) or, in fast mode, when its short side covers target_size: a JPEG
**     preview is decoded by image_jpeg.c (PIL's settings), a bitmap one copied;
**     cdb_image.source = "embedded preview";
**   - otherwise libraw's half-size demosaic (half_size, camera white balance, 8-bit
**     sRGB output, libraw's auto-brightness): cdb_image.source = "half-size demosaic",
**     scale_denom 2.
**   The RAW's orientation (libraw's flip) is applied to either (the preview's own
**   EXIF, if any, is ignored so it is never applied twice).
**
** Safety: the raw sensor size is checked against max_pixels before libraw unpacks
** anything; libraw's raw-memory cap is set; libraw reports errors as return codes
** (no exceptions cross into C). Reentrant: one libraw_data_t per call.
*/
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "encoder/image_int.h"

#if CDB_HAVE_RAW
#include <libraw/libraw.h>

/* libraw is opened on first use (core.h, cdb_dynlib_open: it and lcms2 cost every
** clipdb process about a millisecond of loading although few commands decode a camera
** file), its entry points called through lr_api. The soname is the one the headers
** describe: the code reads libraw_data_t's fields. */
#define RAW_STR_(x) #x
#define RAW_STR(x) RAW_STR_(x)
#define RAW_FNS(X) \
    X(libraw_close) \
    X(libraw_dcraw_clear_mem) \
    X(libraw_dcraw_make_mem_image) \
    X(libraw_dcraw_make_mem_thumb) \
    X(libraw_dcraw_process) \
    X(libraw_init) \
    X(libraw_open_buffer) \
    X(libraw_strerror) \
    X(libraw_unpack) \
    X(libraw_unpack_thumb)
CDB_DYNLIB_LAZY(lr_lib, lr_api, RAW_FNS, "libraw", "CLIPDB_LIBRAW",
                "libraw_r.so." RAW_STR(LIBRAW_SHLIB_CURRENT), "libraw_r.so");

/* No default callbacks: they print to stderr. 0.20 spells these enum values
** LIBRAW_OPIONS_NO_{MEMERR,DATAERR}_CALLBACK, later versions LIBRAW_OPTIONS_...:
** their values, 1 and 2, are the same in both. */
#define RAW_INIT_FLAGS 3

/* dcraw's flip codes -> EXIF orientation: 3 rotate 180, 5 rotate 90 ccw, 6 rotate 90 cw. */
static int flip_to_orientation(int flip) {
    switch (flip) {
    case 3: return 3;
    case 5: return 8;
    case 6: return 6;
    default: return 1;
    }
}

static cdb_status raw_fail(int err, const char *what) {
    cdb_status rc = err == LIBRAW_UNSUFFICIENT_MEMORY ? CDB_NOMEM
                    : err == LIBRAW_FILE_UNSUPPORTED   ? CDB_UNSUPPORTED
                                                       : CDB_CORRUPT;
    return cdb_seterr(rc, "RAW: %s (%s)", what, lr_api.libraw_strerror(err));
}

static cdb_status open_raw(const uint8_t *b, size_t n, libraw_data_t **out) {
    libraw_data_t *lr;
    int err;
    *out = NULL;
    if (cdb_dynlib_get(&lr_lib) != CDB_OK)
        return cdb_seterr(CDB_UNSUPPORTED, "RAW: %s", lr_lib.err);
    lr = lr_api.libraw_init(RAW_INIT_FLAGS);
    if (!lr) return cdb_seterr(CDB_NOMEM, "RAW: out of memory");
    lr->params.max_raw_memory_mb = 2048;
    /* libraw does not write through the buffer; its API just is not const */
    if ((err = lr_api.libraw_open_buffer(lr, (void *)(uintptr_t)b, n)) != LIBRAW_SUCCESS) {
        lr_api.libraw_close(lr);
        return raw_fail(err, "cannot identify the camera file");
    }
    *out = lr;
    return CDB_OK;
}

cdb_status cdb_img_raw_probe(const uint8_t *b, size_t n, int *w, int *h) {
    libraw_data_t *lr = NULL;
    cdb_status rc = open_raw(b, n, &lr);
    if (rc != CDB_OK) return rc;
    *w = lr->sizes.width;
    *h = lr->sizes.height;
    lr_api.libraw_close(lr);
    if (*w <= 0 || *h <= 0) return cdb_seterr(CDB_CORRUPT, "RAW: invalid size %dx%d", *w, *h);
    return CDB_OK;
}

/* libraw's processed image (RGB 8-bit bitmap) into a cdb_image. */
static cdb_status from_bitmap(const libraw_processed_image_t *p, cdb_image **out) {
    cdb_status rc;
    if (p->type != LIBRAW_IMAGE_BITMAP || p->bits != 8 || (p->colors != 3 && p->colors != 1) ||
        p->width == 0 || p->height == 0 ||
        p->data_size < (unsigned)p->width * p->height * p->colors)
        return cdb_seterr(CDB_CORRUPT, "RAW: libraw returned an unusable bitmap");
    if ((rc = cdb_img_new(p->width, p->height, p->colors, 8, "RAW", out)) != CDB_OK) return rc;
    memcpy((*out)->pixels, p->data, (size_t)p->width * p->height * p->colors);
    return CDB_OK;
}

cdb_status cdb_img_raw_decode(const uint8_t *b, size_t n, const img_opts *o, cdb_image **out) {
    libraw_data_t *lr = NULL;
    libraw_processed_image_t *p = NULL;
    cdb_image *img = NULL;
    cdb_status rc;
    int err = 0, fw, fh, tw, th, use_thumb, orient;

    *out = NULL;
    if ((rc = open_raw(b, n, &lr)) != CDB_OK) return rc;
    if ((rc = cdb_img_check_size("RAW", lr->sizes.raw_width, lr->sizes.raw_height,
                                 o->max_pixels)) != CDB_OK ||
        (rc = cdb_img_check_size("RAW", lr->sizes.width, lr->sizes.height, o->max_pixels)) !=
            CDB_OK)
        goto done;
    fw = lr->sizes.width;
    fh = lr->sizes.height;
    orient = flip_to_orientation(lr->sizes.flip);
    tw = lr->thumbnail.twidth;
    th = lr->thumbnail.theight;
    {
        int tlong = tw > th ? tw : th, tshort = tw < th ? tw : th, ilong = fw > fh ? fw : fh;
        /* the thumbnail's format is known only once it is unpacked */
        use_thumb = tw > 0 && th > 0 &&
                    ((int64_t)tlong * 10 >= (int64_t)ilong * 9 ||
                     (o->fast && tshort >= o->target_size));
    }
    if (use_thumb && (err = lr_api.libraw_unpack_thumb(lr)) == LIBRAW_SUCCESS &&
        (p = lr_api.libraw_dcraw_make_mem_thumb(lr, &err)) != NULL &&
        (p->type == LIBRAW_IMAGE_JPEG || p->type == LIBRAW_IMAGE_BITMAP)) {
        if (p->type == LIBRAW_IMAGE_JPEG) {
            img_opts jo = *o;
            jo.apply_exif = 0;
            rc = cdb_img_jpeg_decode(p->data, p->data_size, &jo, &img);
            if (rc != CDB_OK) rc = cdb_errctx(rc, "RAW: embedded preview");
        } else {
            rc = from_bitmap(p, &img);
        }
        if (rc != CDB_OK) goto done;
        img->format = "RAW";
        img->source = "embedded preview";
    } else {
        /* no usable preview: a half-size demosaic */
        if (p) lr_api.libraw_dcraw_clear_mem(p);
        p = NULL;
        lr->params.half_size = 1;
        lr->params.use_camera_wb = 1;
        lr->params.output_bps = 8;
        if ((err = lr_api.libraw_unpack(lr)) != LIBRAW_SUCCESS) {
            rc = raw_fail(err, "cannot unpack the sensor data");
            goto done;
        }
        if ((err = lr_api.libraw_dcraw_process(lr)) != LIBRAW_SUCCESS) {
            rc = raw_fail(err, "cannot demosaic");
            goto done;
        }
        if (!(p = lr_api.libraw_dcraw_make_mem_image(lr, &err))) {
            rc = raw_fail(err, "cannot produce the image");
            goto done;
        }
        if ((rc = from_bitmap(p, &img)) != CDB_OK) goto done;
        img->source = "half-size demosaic";
        img->scale_denom = 2;
        orient = 1; /* make_mem_image already applied the flip */
    }
    if (orient >= 2) rc = cdb_img_orient(img, orient);
    if (rc == CDB_OK) {
        int swap = lr->sizes.flip == 5 || lr->sizes.flip == 6; /* sizes are before the flip */
        img->full_width = swap ? fh : fw;
        img->full_height = swap ? fw : fh;
    }
done:
    if (p) lr_api.libraw_dcraw_clear_mem(p);
    lr_api.libraw_close(lr);
    if (rc != CDB_OK) {
        cdb_image_free(img);
        return rc;
    }
    *out = img;
    return CDB_OK;
}

/* libraw's metadata: what it parsed of the camera file's EXIF and maker notes. Its
** timestamp is the camera's wall clock made a time_t by mktime() in this process's
** zone; localtime_r() gives the wall clock back. */
void cdb_img_raw_meta(const uint8_t *b, size_t n, cdb_photo_meta *m) {
    libraw_data_t *lr = NULL;
    const libraw_gps_info_t *g;
    if (open_raw(b, n, &lr) != CDB_OK) return;
    if (lr->other.timestamp > 0) {
        struct tm tm;
        char dt[32];
        time_t ts = lr->other.timestamp;
        if (localtime_r(&ts, &tm)) {
            int k = snprintf(dt, sizeof dt, "%04d:%02d:%02d %02d:%02d:%02d", tm.tm_year + 1900,
                             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
            if (k > 0 && (size_t)k < sizeof dt)
                cdb_meta_set_taken(m, CDB_TAKEN_RAW, dt, (size_t)k, NULL, 0, NULL, 0, 0);
        }
    }
    cdb_meta_set_text(m->make, sizeof m->make, lr->idata.make, sizeof lr->idata.make);
    cdb_meta_set_text(m->model, sizeof m->model, lr->idata.model, sizeof lr->idata.model);
    cdb_meta_set_text(m->lens, sizeof m->lens, lr->lens.Lens, sizeof lr->lens.Lens);
    g = &lr->other.parsed_gps;
    if (g->gpsparsed) {
        double lat[3] = {g->latitude[0], g->latitude[1], g->latitude[2]};
        double lon[3] = {g->longitude[0], g->longitude[1], g->longitude[2]};
        cdb_meta_set_gps(m, lat, g->latref, lon, g->longref);
        cdb_meta_set_alt(m, g->altitude, g->altref == 1);
    }
    lr_api.libraw_close(lr);
}

#else /* !CDB_HAVE_RAW */

void cdb_img_raw_meta(const uint8_t *b, size_t n, cdb_photo_meta *m) { (void)b, (void)n, (void)m; }

CDB_IMG_BUILT_WITHOUT(raw, "RAW", "libraw")
#endif
