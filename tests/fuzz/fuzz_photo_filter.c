/*
** fuzz_photo_filter.c: libFuzzer target for the parsers of the photo filters users type
** (db/photos.c): cdb_db_time_parse (--taken-after / --taken-before, the API's
** taken_after / taken_before) and cdb_db_near_parse (--near, the API's near). Both read
** untrusted text from the command line and from HTTP query strings.
**
** Input: the text, split at the first NUL: the part before goes to the time parser, the
** part after (or the whole input when there is no NUL) to the near parser. Invariants:
** an accepted time has an offset within 14:00 and prints back (as YYYY-MM-DDTHH:MM:SS.mmm
** with its offset) to a text that parses to the same value; an accepted place is in
** range with a distance > 0 and finite; the filter built from them matches a photo at
** that place and time (the near distance and the after bound include it), and a
** before bound at that time excludes it.
*/
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "db/db.h"
#include "fuzz_util.h"

/* Civil date of a day count from 1970-01-01 (H. Hinnant's civil_from_days). */
static void civil(int64_t z, int *y, int *m, int *d) {
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = (int)(yoe + era * 400 + (*m <= 2));
}

static void check_time(const char *text) {
    cdb_db_time t;
    if (cdb_db_time_parse(text, &t) != CDB_OK) return;
    FUZZ_CHECK(!t.has_offset || (t.offset_min >= -840 && t.offset_min <= 840), "offset %d",
               t.offset_min);
    int64_t ms = t.wall_ms, days = ms / 86400000 - (ms % 86400000 < 0);
    int64_t rest = ms - days * 86400000;
    int y, m, d;
    civil(days, &y, &m, &d);
    char back[64];
    int n = snprintf(back, sizeof back, "%04d-%02d-%02dT%02d:%02d:%02d.%03d", y, m, d,
                     (int)(rest / 3600000), (int)(rest / 60000 % 60), (int)(rest / 1000 % 60),
                     (int)(rest % 1000));
    if (t.has_offset)
        snprintf(back + n, sizeof back - (size_t)n, "%c%02d:%02d", t.offset_min < 0 ? '-' : '+',
                 abs(t.offset_min) / 60, abs(t.offset_min) % 60);
    cdb_db_time u;
    FUZZ_CHECK(cdb_db_time_parse(back, &u) == CDB_OK, "'%s' printed back as '%s'", text, back);
    FUZZ_CHECK(u.wall_ms == t.wall_ms && u.has_offset == t.has_offset &&
                   u.offset_min == t.offset_min,
               "'%s' -> '%s' reads differently", text, back);
    /* The photo taken at that time passes after=t and fails before=t. */
    cdb_db_photo p = {.taken_source = CDB_DB_TAKEN_ORIGINAL, .taken = t};
    cdb_db_photo_filter after = {.has_after = 1, .after = t}, before = {.has_before = 1,
                                                                         .before = t};
    FUZZ_CHECK(cdb_db_photo_match(&after, &p), "'%s': after excludes its own time", text);
    FUZZ_CHECK(!cdb_db_photo_match(&before, &p), "'%s': before includes its own time", text);
}

static void check_near(const char *text) {
    double lat, lon, km;
    if (cdb_db_near_parse(text, &lat, &lon, &km) != CDB_OK) return;
    FUZZ_CHECK(lat >= -90 && lat <= 90 && lon >= -180 && lon <= 180, "'%s': %g,%g", text, lat,
               lon);
    FUZZ_CHECK(km > 0 && isfinite(km), "'%s': km %g", text, km);
    cdb_db_photo p = {.has_gps = 1, .lat = lat, .lon = lon};
    cdb_db_photo_filter f = {.has_near = 1, .near_lat = lat, .near_lon = lon, .near_km = km};
    FUZZ_CHECK(cdb_db_photo_match(&f, &p), "'%s': the place is not near itself", text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 4096) return 0;
    char *buf = malloc(size + 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    buf[size] = '\0';
    size_t first = strlen(buf);
    check_time(buf);
    check_near(first < size ? buf + first + 1 : buf);
    free(buf);
    return 0;
}
