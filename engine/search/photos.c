/*
** photos.c: photo metadata for the engine (search.h): the catalog row made from
** the encoder's reading, the filter from users' texts and the capture time as text.
** The ingest reads a photo's metadata from the bytes it holds (ingest/pipeline.c), and
** a reindex re-reads, without encoding, the unchanged files that have no row
** (ingest/scan.c), or no perceptual hash (computed here, the one way for reindex and
** duplicates). The rules of the filter are db's
** (db/db.h, cdb_db_photo_filter; docs/images.md "Metadata").
*/
#include <stdlib.h>
#include <string.h>

#include "engine/search/search.h"

static int format_of(const char *decoded) {
    if (!strcmp(decoded, "RAW")) return 0;
    if (!strcmp(decoded, "JPEG") || !strcmp(decoded, "HEIF") || !strcmp(decoded, "TIFF"))
        return 1;
    return 2;
}

int cdb_eng_phash_of(const unsigned char *buf, size_t n, eng_phash *out) {
    cdb_image_params ip = cdb_image_params_default();
    cdb_image *img = NULL;
    int rc = -1;
    memset(out, 0, sizeof *out);
    ip.decode = CDB_DECODE_FAST; /* the hash looks at 32x32: a 1/8 JPEG decode is plenty */
    ip.target_size = 64;
    ip.phash = 1; /* a JPEG's DC hash, whatever the scale (encoder.h) */
    if (cdb_image_decode(buf, n, &ip, &img) == CDB_OK &&
        (img->has_phash ? (out->hash = img->phash, CDB_OK)
                        : cdb_image_phash(img, &out->hash)) == CDB_OK) {
        out->has = 1;
        out->format = format_of(img->format);
        out->width = img->full_width;
        out->height = img->full_height;
        rc = 0;
    }
    cdb_image_free(img);
    return rc;
}

int cdb_eng_phash_of_decoded(const cdb_image *img, int fast, int target_size, int apply_exif,
                             eng_phash *out) {
    static const char *const whole[] = {"PNG", "GIF", "BMP", "TGA", "PSD", "PNM", "TIFF"};
    int same = 0;
    memset(out, 0, sizeof *out);
    if (!img || !img->format || !apply_exif ||
        (int64_t)img->full_width * img->full_height > CDB_IMAGE_DEFAULT_MAX_PIXELS)
        return -1;
    for (size_t i = 0; i < sizeof whole / sizeof *whole; i++)
        same |= !strcmp(img->format, whole[i]);
    if (!strcmp(img->format, "JPEG") || !strcmp(img->format, "WebP")) /* the draft scale */
        same = fast && (target_size == 64 || (target_size > 64 && img->scale_denom == 8));
    if (img->has_phash) /* a JPEG's DC hash: any decode's */
        out->hash = img->phash;
    else if (!same || cdb_image_phash(img, &out->hash) != CDB_OK)
        return -1;
    out->has = 1;
    out->format = format_of(img->format);
    out->width = img->full_width;
    out->height = img->full_height;
    return 0;
}

/* The camera (make, model, lens) and the place (GPS, altitude) of in into out: fields of
** the same names in cdb_photo_meta, cdb_db_photo and cdb_engine_photo (strings cut to
** out's arrays). */
#define COPY_CAMERA_AND_PLACE(out, in)                                     \
    do {                                                                   \
        snprintf((out)->make, sizeof (out)->make, "%s", (in)->make);       \
        snprintf((out)->model, sizeof (out)->model, "%s", (in)->model);    \
        snprintf((out)->lens, sizeof (out)->lens, "%s", (in)->lens);       \
        (out)->has_gps = (in)->has_gps;                                    \
        (out)->lat = (in)->lat;                                            \
        (out)->lon = (in)->lon;                                            \
        (out)->has_alt = (in)->has_alt;                                    \
        (out)->alt = (in)->alt;                                            \
    } while (0)

void cdb_eng_photo_row(const cdb_photo_meta *m, const eng_phash *ph, int64_t file_id,
                       const uint8_t hash[CDB_DB_HASH_BYTES], cdb_db_photo *out) {
    memset(out, 0, sizeof *out);
    out->file_id = file_id;
    memcpy(out->hash, hash, CDB_DB_HASH_BYTES);
    /* The encoder's sources are db's by value (CDB_TAKEN_ORIGINAL = CDB_DB_TAKEN_ORIGINAL,
    ** ...); anything else is no time. */
    out->taken_source = m->taken_source >= CDB_TAKEN_ORIGINAL && m->taken_source <= CDB_TAKEN_RAW
                            ? (cdb_db_taken_source)m->taken_source
                            : CDB_DB_TAKEN_NONE;
    out->taken.wall_ms = m->taken_ms;
    out->taken.has_offset = m->has_offset;
    out->taken.offset_min = m->has_offset ? m->offset_min : 0;
    COPY_CAMERA_AND_PLACE(out, m);
    if (ph && ph->has) {
        out->has_phash = 1;
        out->phash = ph->hash;
        out->phash_format = ph->format;
        out->phash_width = ph->width;
        out->phash_height = ph->height;
    }
}

cdb_status cdb_eng_photo_filter(const char *after, const char *before, const char *camera,
                                const char *near, int has_gps, cdb_db_photo_filter *out) {
    memset(out, 0, sizeof *out);
    if (after && *after) {
        if (cdb_db_time_parse(after, &out->after) != CDB_OK)
            return cdb_eng_fail(CDB_INVALID, CDB_ENGINE_E_QUERY, "taken after: %s", cdb_errmsg());
        out->has_after = 1;
    }
    if (before && *before) {
        if (cdb_db_time_parse(before, &out->before) != CDB_OK)
            return cdb_eng_fail(CDB_INVALID, CDB_ENGINE_E_QUERY, "taken before: %s",
                                cdb_errmsg());
        out->has_before = 1;
    }
    if (near && *near) {
        if (cdb_db_near_parse(near, &out->near_lat, &out->near_lon, &out->near_km) != CDB_OK)
            return cdb_eng_fail(CDB_INVALID, CDB_ENGINE_E_QUERY, "near: %s", cdb_errmsg());
        out->has_near = 1;
    }
    out->camera = camera && *camera ? camera : NULL;
    out->has_gps = has_gps != 0;
    return CDB_OK;
}

char *cdb_eng_taken_iso(const cdb_db_photo *p, char *buf, size_t cap) {
    cdb_photo_meta m;
    memset(&m, 0, sizeof m);
    m.taken_source = p->taken_source == CDB_DB_TAKEN_NONE ? CDB_TAKEN_NONE : CDB_TAKEN_ORIGINAL;
    m.taken_ms = p->taken.wall_ms;
    m.has_offset = p->taken.has_offset;
    m.offset_min = p->taken.offset_min;
    return cdb_photo_meta_taken_iso(&m, buf, cap);
}

void cdb_eng_photo_from_db(const cdb_db_photo *ph, cdb_engine_photo *out) {
    memset(out, 0, sizeof *out);
    out->taken_source = "";
    if (!ph) return;
    cdb_eng_taken_iso(ph, out->taken, sizeof out->taken);
    out->taken_source = cdb_db_taken_source_str(ph->taken_source);
    out->taken_key_ms = cdb_db_time_key(&ph->taken);
    COPY_CAMERA_AND_PLACE(out, ph);
}

void cdb_eng_photo_get(cdb_db *db, int64_t id, cdb_engine_photo *out) {
    cdb_db_photo ph;
    uint8_t found = 0;
    int ok = cdb_db_photos_get(db, &id, 1, &ph, &found) == CDB_OK && found;
    cdb_eng_photo_from_db(ok ? &ph : NULL, out);
}

cdb_status cdb_engine_photos_get(cdb_engine *e, const int64_t *ids, int n, cdb_engine_photo *out) {
    eng_reader *r = NULL;
    cdb_status st;
    cdb_eng_clear();
    if (n < 0 || (n > 0 && (!ids || !out)))
        return cdb_eng_fail(CDB_INVALID, CDB_ENGINE_E_NONE, "photos_get: bad arguments");
    if ((st = cdb_eng_reader_get(e, &r)) != CDB_OK) return st;
    for (int i = 0; i < n; i++) cdb_eng_photo_get(r->db, ids[i], &out[i]);
    cdb_eng_reader_put(e, r);
    return CDB_OK;
}
