/*
** photos.c: photo metadata in the catalog (table photo_meta, schema 8; its perceptual
** hash, schema 9): rows per file
** id with the content hash they were read from, the filter users search by (capture
** time, camera, place) and the parsers of what they type for it. Calls only sql.c.
** The rules of the filter are stated once, in db.h (cdb_db_photo_filter) and
** docs/images.md "Metadata"; cdb_db_photo_match is their only implementation.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db/db_int.h"

#define MS_PER_MIN 60000
#define MAX_OFFSET_MIN 840

const char *cdb_db_taken_source_str(int source) {
    static const char *const names[] = {"", "original", "created", "xmp", "raw", "file"};
    return source >= 0 && source <= CDB_DB_TAKEN_FILE ? names[source] : "";
}

int64_t cdb_db_time_key(const cdb_db_time *t) {
    return t->has_offset ? t->wall_ms - (int64_t)t->offset_min * MS_PER_MIN : t->wall_ms;
}

/* ---- rows ------------------------------------------------------------------------- */

static cdb_status check_row(const cdb_db_photo *p, int i) {
    const char *why = NULL;
    if (p->file_id <= 0)
        why = "no file id";
    else if ((int)p->taken_source < CDB_DB_TAKEN_NONE || p->taken_source >= CDB_DB_TAKEN_FILE)
        why = "a capture-time source out of range";
    else if (p->taken.has_offset &&
             (p->taken.offset_min < -MAX_OFFSET_MIN || p->taken.offset_min > MAX_OFFSET_MIN))
        why = "a UTC offset beyond 14:00";
    else if (p->has_gps && !(p->lat >= -90 && p->lat <= 90 && p->lon >= -180 && p->lon <= 180))
        why = "a position out of range";
    else if (p->has_alt && !isfinite(p->alt))
        why = "an altitude that is not a number";
    else if (!memchr(p->make, 0, sizeof p->make) || !memchr(p->model, 0, sizeof p->model) ||
             !memchr(p->lens, 0, sizeof p->lens))
        why = "an unterminated text";
    return why ? cdb_seterr(CDB_INVALID, "photos_put: row %d has %s", i, why) : CDB_OK;
}

cdb_status cdb_db_photos_put(cdb_db *db, const cdb_db_photo *p, int n) {
    sqlite3_stmt *st = NULL;
    cdb_status rc;
    if ((rc = cdb_sql_need_writer(db, "photos_put")) != CDB_OK) return rc;
    for (int i = 0; i < n; i++)
        if ((rc = check_row(&p[i], i)) != CDB_OK) return rc;
    if (n <= 0) return CDB_OK;
    if ((rc = cdb_sql_begin(db->cat)) != CDB_OK) return rc;
    rc = cdb_sql_prepare(db->cat,
                         "INSERT OR REPLACE INTO photo_meta(file_id, hash, taken_source, taken_ms,"
                         " has_offset, offset_min, make, model, lens, has_gps, lat, lon, alt,"
                         " phash, phash_format, phash_width, phash_height) VALUES(?1, ?2, ?3,"
                         " ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)",
                         &st);
    for (int i = 0; rc == CDB_OK && i < n; i++) {
        const cdb_db_photo *r = &p[i];
        int taken = r->taken_source != CDB_DB_TAKEN_NONE;
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
        sqlite3_bind_int64(st, 1, r->file_id);
        sqlite3_bind_blob(st, 2, r->hash, CDB_DB_HASH_BYTES, SQLITE_STATIC);
        sqlite3_bind_int(st, 3, (int)r->taken_source);
        if (taken) sqlite3_bind_int64(st, 4, r->taken.wall_ms);
        sqlite3_bind_int(st, 5, taken && r->taken.has_offset);
        sqlite3_bind_int(st, 6, taken && r->taken.has_offset ? r->taken.offset_min : 0);
        sqlite3_bind_text(st, 7, r->make, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 8, r->model, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 9, r->lens, -1, SQLITE_STATIC);
        sqlite3_bind_int(st, 10, r->has_gps != 0);
        if (r->has_gps) {
            sqlite3_bind_double(st, 11, r->lat);
            sqlite3_bind_double(st, 12, r->lon);
        }
        if (r->has_alt) sqlite3_bind_double(st, 13, r->alt);
        if (r->has_phash) { /* the 64 bits as SQLite's signed integer */
            sqlite3_bind_int64(st, 14, (int64_t)r->phash);
            sqlite3_bind_int(st, 15, r->phash_format);
            sqlite3_bind_int(st, 16, r->phash_width);
            sqlite3_bind_int(st, 17, r->phash_height);
        }
        rc = cdb_sql_step_row(db->cat, st, "store photo metadata");
    }
    sqlite3_finalize(st);
    return cdb_sql_end(db->cat, rc);
}

static void copy_text(char *dst, size_t cap, sqlite3_stmt *st, int col) {
    const unsigned char *t = sqlite3_column_text(st, col);
    snprintf(dst, cap, "%s", t ? (const char *)t : "");
}

/* Floor division of ns to ms (mtimes before 1970 are negative). */
static int64_t ns_to_ms(int64_t ns) {
    return ns / 1000000 - (ns % 1000000 < 0);
}

void cdb_photos_read_row(sqlite3_stmt *st, int c, cdb_db_photo *p) {
    memset(p, 0, sizeof *p);
    p->file_id = sqlite3_column_int64(st, c);
    p->read = sqlite3_column_int(st, c + 2);
    if (sqlite3_column_bytes(st, c + 15) == CDB_DB_HASH_BYTES)
        memcpy(p->hash, sqlite3_column_blob(st, c + 15), CDB_DB_HASH_BYTES);
    if (p->read) {
        p->taken_source = (cdb_db_taken_source)sqlite3_column_int(st, c + 3);
        p->taken.wall_ms = sqlite3_column_int64(st, c + 4);
        p->taken.has_offset = sqlite3_column_int(st, c + 5);
        p->taken.offset_min = sqlite3_column_int(st, c + 6);
        copy_text(p->make, sizeof p->make, st, c + 7);
        copy_text(p->model, sizeof p->model, st, c + 8);
        copy_text(p->lens, sizeof p->lens, st, c + 9);
        p->has_gps = sqlite3_column_int(st, c + 10);
        p->lat = sqlite3_column_double(st, c + 11);
        p->lon = sqlite3_column_double(st, c + 12);
        p->has_alt = sqlite3_column_int(st, c + 13);
        p->alt = sqlite3_column_double(st, c + 14);
        if ((p->has_phash = sqlite3_column_int(st, c + 16))) {
            p->phash = (uint64_t)sqlite3_column_int64(st, c + 17);
            p->phash_format = sqlite3_column_int(st, c + 18);
            p->phash_width = sqlite3_column_int(st, c + 19);
            p->phash_height = sqlite3_column_int(st, c + 20);
        }
    }
    if (p->taken_source == CDB_DB_TAKEN_NONE) {
        p->taken_source = CDB_DB_TAKEN_FILE;
        p->taken.wall_ms = ns_to_ms(sqlite3_column_int64(st, c + 1));
        p->taken.has_offset = 1;
        p->taken.offset_min = 0;
    }
}

cdb_status cdb_db_photos_get(cdb_db *db, const int64_t *file_ids, int n, cdb_db_photo *out,
                             uint8_t *found) {
    sqlite3_stmt *st = NULL;
    cdb_status rc = cdb_sql_stmt(db, ST_PHOTO_GET, &st); /* prepared once per handle: a
                                                           ** search reads one per hit */
    for (int i = 0; rc == CDB_OK && i < n; i++) {
        sqlite3_reset(st);
        sqlite3_bind_int64(st, 1, file_ids[i]);
        int s = sqlite3_step(st);
        if (found) found[i] = s == SQLITE_ROW;
        if (s == SQLITE_ROW)
            cdb_photos_read_row(st, 0, &out[i]);
        else if (s == SQLITE_DONE)
            memset(&out[i], 0, sizeof out[i]);
        else
            rc = cdb_sql_err(db->cat, s, "read photo metadata");
    }
    if (st) sqlite3_reset(st);
    return rc;
}

/* Appends id to the growing array (*ids, *n, *cap). */
static cdb_status push_id(int64_t **ids, int64_t *n, int64_t *cap, int64_t id) {
    if (*n == *cap) {
        int64_t nc = *cap ? *cap * 2 : 256;
        int64_t *p = cdb_realloc(*ids, (size_t)nc * sizeof *p);
        if (!p) return cdb_seterr(CDB_NOMEM, "photo ids: out of memory");
        *ids = p;
        *cap = nc;
    }
    (*ids)[(*n)++] = id;
    return CDB_OK;
}

typedef struct id_array {
    int64_t *ids, n, cap;
    cdb_status rc;
} id_array;

static int push_missing(int64_t id, void *ud) {
    id_array *a = ud;
    return (a->rc = push_id(&a->ids, &a->n, &a->cap, id)) != CDB_OK;
}

cdb_status cdb_db_photos_missing(cdb_db *db, int64_t root_id, int64_t **ids, int64_t *n) {
    sqlite3_stmt *have = NULL;
    id_array a = {NULL, 0, 0, CDB_OK};
    /* a current row: of the file's content, with its phash */
    cdb_status rc = cdb_sql_prepare(db->cat, "SELECT file_id, hash, phash IS NOT NULL"
                                             " FROM photo_meta ORDER BY file_id", &have);
    *ids = NULL;
    *n = 0;
    if (rc != CDB_OK) return rc;
    rc = cdb_sql_ok_files_lacking(db, root_id, have, 1, push_missing, &a);
    sqlite3_finalize(have);
    if (rc == CDB_OK) rc = a.rc;
    *ids = a.ids;
    *n = a.n;
    if (rc != CDB_OK) {
        cdb_free(*ids);
        *ids = NULL;
        *n = 0;
    }
    return rc;
}

cdb_status cdb_db_photos_prune(cdb_db *db, int64_t *n_dropped) {
    cdb_status rc;
    if (n_dropped) *n_dropped = 0;
    if ((rc = cdb_sql_need_writer(db, "photos_prune")) != CDB_OK) return rc;
    rc = cdb_sql_exec(db->cat, "DELETE FROM photo_meta WHERE NOT EXISTS (SELECT 1 FROM files f"
                               " WHERE f.id = photo_meta.file_id AND f.state IN (1, 2)"
                               " AND f.hash = photo_meta.hash)");
    if (rc == CDB_OK && n_dropped) *n_dropped = sqlite3_changes(db->cat);
    return rc;
}

/* ---- the filter ---------------------------------------------------------------------- */

int cdb_db_photo_filter_active(const cdb_db_photo_filter *f) {
    return f && (f->has_after || f->has_before || (f->camera && f->camera[0]) || f->has_near ||
                 f->has_gps);
}

/* <0, 0, >0 as the photo's time t is before, at or after the bound b (db.h's rule). */
static int time_cmp(const cdb_db_time *t, const cdb_db_time *b) {
    int64_t x = t->wall_ms, y = b->wall_ms;
    if (t->has_offset && b->has_offset) {
        x = cdb_db_time_key(t);
        y = cdb_db_time_key(b);
    }
    return (x > y) - (x < y);
}

static unsigned char ascii_lower(unsigned char c) {
    return c >= 'A' && c <= 'Z' ? (unsigned char)(c + 32) : c;
}

/* 1 when needle (not empty) occurs in hay, ASCII letters compared without case. */
static int contains_nocase(const char *hay, const char *needle) {
    size_t nn = strlen(needle);
    for (const char *h = hay; *h; h++) {
        size_t i = 0;
        while (i < nn && h[i] && ascii_lower((unsigned char)h[i]) ==
                                     ascii_lower((unsigned char)needle[i]))
            i++;
        if (i == nn) return 1;
    }
    return 0;
}

/* Great-circle distance in km (haversine; the form stays exact at small distances). */
static double haversine_km(double lat1, double lon1, double lat2, double lon2) {
    const double rad = 3.14159265358979323846 / 180.0;
    double dlat = (lat2 - lat1) * rad, dlon = (lon2 - lon1) * rad;
    double a = sin(dlat / 2) * sin(dlat / 2) +
               cos(lat1 * rad) * cos(lat2 * rad) * sin(dlon / 2) * sin(dlon / 2);
    if (a > 1) a = 1;
    return 2 * CDB_DB_EARTH_KM * asin(sqrt(a));
}

int cdb_db_photo_match(const cdb_db_photo_filter *f, const cdb_db_photo *p) {
    if (!cdb_db_photo_filter_active(f)) return 1;
    if (f->has_after && time_cmp(&p->taken, &f->after) < 0) return 0;
    if (f->has_before && time_cmp(&p->taken, &f->before) >= 0) return 0;
    if (f->camera && f->camera[0] && !contains_nocase(p->make, f->camera) &&
        !contains_nocase(p->model, f->camera))
        return 0;
    if ((f->has_gps || f->has_near) && !p->has_gps) return 0;
    if (f->has_near && !(haversine_km(f->near_lat, f->near_lon, p->lat, p->lon) <= f->near_km))
        return 0;
    return 1;
}

cdb_status cdb_db_photos_foreach(cdb_db *db, int with_row_only, cdb_db_photo_fn fn, void *ud) {
    sqlite3_stmt *st = NULL;
    int s, stop = 0;
    cdb_status rc = cdb_sql_prepare(
        db->cat,
        with_row_only
            ? "SELECT " PHOTO_ROW_COLS " FROM files f JOIN photo_meta p ON p.file_id = f.id"
              " AND p.hash = f.hash WHERE f.state = 2 ORDER BY f.id"
            : "SELECT " PHOTO_ROW_COLS PHOTO_ROW_FROM " WHERE f.state = 2 ORDER BY f.id",
        &st);
    if (rc != CDB_OK) return rc;
    while (!stop && (s = sqlite3_step(st)) == SQLITE_ROW) {
        cdb_db_photo p;
        cdb_photos_read_row(st, 0, &p);
        stop = fn(&p, ud);
    }
    if (!stop && s != SQLITE_DONE) rc = cdb_sql_err(db->cat, s, "read photo metadata");
    sqlite3_finalize(st);
    return rc;
}

/* Room for one more key in *keys (capacity *cap). */
static cdb_status keys_grow(cdb_db_copy_key **keys, size_t n, size_t *cap) {
    if (n < *cap) return CDB_OK;
    size_t nc = *cap ? *cap * 2 : 1024;
    cdb_db_copy_key *k = cdb_realloc(*keys, nc * sizeof *k);
    if (!k) return cdb_seterr(CDB_NOMEM, "copy keys: out of memory");
    *keys = k;
    *cap = nc;
    return CDB_OK;
}

cdb_status cdb_db_copy_keys(cdb_db *db, cdb_db_copy_key **out, size_t *n) {
    sqlite3_stmt *st = NULL;
    size_t cap = 0;
    int s = SQLITE_DONE;
    *out = NULL;
    *n = 0;
    /* the files and rows of PHOTO_ROW_FROM, three of PHOTO_ROW_COLS' columns */
    cdb_status rc = cdb_sql_prepare(db->cat, "SELECT f.id, f.hash, p.phash" PHOTO_ROW_FROM
                                             " WHERE f.state = 2 ORDER BY f.id", &st);
    while (rc == CDB_OK && (s = sqlite3_step(st)) == SQLITE_ROW &&
           (rc = keys_grow(out, *n, &cap)) == CDB_OK) {
        cdb_db_copy_key *k = &(*out)[(*n)++];
        memset(k, 0, sizeof *k);
        k->file_id = sqlite3_column_int64(st, 0);
        if (sqlite3_column_bytes(st, 1) == CDB_DB_HASH_BYTES) /* as cdb_photos_read_row */
            memcpy(k->hash, sqlite3_column_blob(st, 1), CDB_DB_HASH_BYTES);
        if ((k->has_phash = sqlite3_column_type(st, 2) != SQLITE_NULL))
            k->phash = (uint64_t)sqlite3_column_int64(st, 2);
    }
    if (rc == CDB_OK && s != SQLITE_DONE) rc = cdb_sql_err(db->cat, s, "read copy keys");
    sqlite3_finalize(st);
    if (rc != CDB_OK) {
        cdb_free(*out);
        *out = NULL;
        *n = 0;
    }
    return rc;
}

typedef struct select_ud {
    const cdb_db_photo_filter *f;
    int64_t **ids, *n, cap;
    cdb_status rc;
} select_ud;

static int select_one(const cdb_db_photo *p, void *ud_) {
    select_ud *u = ud_;
    if (cdb_db_photo_match(u->f, p)) u->rc = push_id(u->ids, u->n, &u->cap, p->file_id);
    return u->rc != CDB_OK;
}

cdb_status cdb_db_photos_select(cdb_db *db, const cdb_db_photo_filter *f, int64_t **ids,
                                int64_t *n) {
    select_ud u = {f, ids, n, 0, CDB_OK};
    *ids = NULL;
    *n = 0;
    /* Only files with a row can pass a camera or place filter: the join narrows the scan. */
    int need_row = (f->camera && f->camera[0]) || f->has_near || f->has_gps;
    cdb_status rc = cdb_db_photos_foreach(db, need_row, select_one, &u);
    if (rc == CDB_OK) rc = u.rc;
    if (rc != CDB_OK) {
        cdb_free(*ids);
        *ids = NULL;
        *n = 0;
    }
    return rc;
}

/* ---- parsers ------------------------------------------------------------------------- */

/* Reads exactly n decimal digits at *s into *v, advancing *s. 0 when they are not there. */
static int digits(const char **s, int n, int *v) {
    int x = 0;
    for (int i = 0; i < n; i++) {
        char c = (*s)[i];
        if (c < '0' || c > '9') return 0;
        x = x * 10 + (c - '0');
    }
    *s += n;
    *v = x;
    return 1;
}

static int is_leap(int y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

static int days_in_month(int y, int m) {
    static const int dim[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return m == 2 && is_leap(y) ? 29 : dim[m - 1];
}

/* Days from 1970-01-01 to y-m-d of the proleptic Gregorian calendar (H. Hinnant's
** days_from_civil). */
static int64_t days_from_civil(int y, int m, int d) {
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

/* The offset at s (Z, +HH:MM, +HHMM, +HH or '-'), which must end the text. */
static int parse_offset(const char *s, cdb_db_time *t) {
    int h = 0, m = 0;
    if ((s[0] == 'Z' || s[0] == 'z') && !s[1]) {
        t->has_offset = 1;
        t->offset_min = 0;
        return 1;
    }
    if (s[0] != '+' && s[0] != '-') return 0;
    int sign = s[0] == '-' ? -1 : 1;
    s++;
    if (!digits(&s, 2, &h)) return 0;
    if (*s == ':' && !(s++, digits(&s, 2, &m))) return 0; /* +HH:MM */
    if (*s >= '0' && *s <= '9' && !digits(&s, 2, &m)) return 0; /* +HHMM */
    if (*s || m > 59 || h * 60 + m > MAX_OFFSET_MIN) return 0;
    t->has_offset = 1;
    t->offset_min = sign * (h * 60 + m);
    return 1;
}

cdb_status cdb_db_time_parse(const char *text, cdb_db_time *out) {
    const char *s = text;
    int y, mo, d, h = 0, mi = 0, sec = 0, ms = 0;
    cdb_db_time t = {0, 0, 0};
    if (!text || !out) return cdb_seterr(CDB_INVALID, "time_parse: NULL argument");
    int ok = digits(&s, 4, &y) && *s++ == '-' && digits(&s, 2, &mo) && *s++ == '-' &&
             digits(&s, 2, &d) && y >= 1 && mo >= 1 && mo <= 12 && d >= 1 &&
             d <= days_in_month(y, mo);
    if (ok && *s) {
        ok = (*s == 'T' || *s == 't' || *s == ' ') && (s++, digits(&s, 2, &h)) && *s++ == ':' &&
             digits(&s, 2, &mi) && h <= 23 && mi <= 59;
        if (ok && *s == ':') {
            s++;
            ok = digits(&s, 2, &sec) && sec <= 60;
            if (sec == 60) sec = 59; /* a leap second, read as the encoder reads one */
            if (ok && (*s == '.' || *s == ',')) {
                int nd = 0;
                for (s++; *s >= '0' && *s <= '9'; s++, nd++)
                    if (nd < 3) ms = ms * 10 + (*s - '0');
                for (int k = nd; k < 3; k++) ms *= 10;
                ok = nd >= 1 && nd <= 9;
            }
        }
        if (ok && *s) ok = parse_offset(s, &t);
    }
    if (!ok)
        return cdb_seterr(CDB_INVALID,
                          "'%.64s' is not an ISO 8601 date or date-time (YYYY-MM-DD or "
                          "YYYY-MM-DDTHH:MM[:SS][Z|+HH:MM])",
                          text);
    t.wall_ms = ((days_from_civil(y, mo, d) * 24 + h) * 60 + mi) * (int64_t)MS_PER_MIN +
                (int64_t)sec * 1000 + ms;
    *out = t;
    return CDB_OK;
}

/* A decimal number at *s (optional sign, digits, optional fraction; no exponent, no
** hex, no inf/nan), advancing *s past it. 0 when there is none. */
static int decimal(const char **s, double *v) {
    const char *p = *s;
    char buf[64];
    size_t n = 0;
    while (*p == ' ') p++;
    const char *start = p;
    if (*p == '+' || *p == '-') p++;
    int nd = 0;
    while (*p >= '0' && *p <= '9') p++, nd++;
    if (*p == '.')
        for (p++; *p >= '0' && *p <= '9'; p++) nd++;
    n = (size_t)(p - start);
    if (nd == 0 || n >= sizeof buf) return 0;
    memcpy(buf, start, n);
    buf[n] = '\0';
    /* strtod with '.' as the separator: clipdb never sets a numeric locale. */
    *v = strtod(buf, NULL);
    while (*p == ' ') p++;
    *s = p;
    return 1;
}

cdb_status cdb_db_near_parse(const char *text, double *lat, double *lon, double *km) {
    const char *s = text;
    double a = 0, b = 0, c = 0;
    if (!text || !lat || !lon || !km) return cdb_seterr(CDB_INVALID, "near_parse: NULL argument");
    int ok = decimal(&s, &a) && *s++ == ',' && decimal(&s, &b) && *s++ == ',' &&
             decimal(&s, &c) && !*s;
    if (!ok)
        return cdb_seterr(CDB_INVALID, "'%.64s' is not LAT,LON,KM (decimal degrees and km)",
                          text);
    if (!(a >= -90 && a <= 90) || !(b >= -180 && b <= 180))
        return cdb_seterr(CDB_INVALID, "'%.64s': latitude -90..90, longitude -180..180", text);
    if (!(c > 0) || !isfinite(c))
        return cdb_seterr(CDB_INVALID, "'%.64s': the distance must be more than 0 km", text);
    *lat = a;
    *lon = b;
    *km = c;
    return CDB_OK;
}
