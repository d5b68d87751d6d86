/*
** test_big_photos.c: photos as large as cameras make them (issue 25, part 3), with
** the real binary. Written at test time (tests/big_jpeg.h), never committed.
**
**   pil_limit          PIL decodes up to 2 x 89,478,485 pixels (it only warns past
**                      89,478,485) and refuses above: a 100 MP and a 170 MP photo are
**                      stored with their own embeddings (clipdb embed of the file),
**                      a 179 MP one is refused with the usual message and listed in
**                      `errors`; `reindex --max-pixels` raising the limit reads it
**                      again, and the setting is the database's (kept for later runs)
**   decode_budget      `--decode-memory` bounds the decoded pixels in flight: the
**                      peak the run reports never passes the budget, except by a
**                      single photo larger than it, which goes alone
*/
#include "big_jpeg.h"
#include "lib_util.h"

#define PIL_MAX 89478485LL

static int has(const cli_run_result *r, const char *needle) {
    return (r->out && strstr(r->out, needle)) || (r->err && strstr(r->err, needle));
}

/* The integer after "key": in a JSON text, -1 when absent. */
static long long json_int(const char *text, const char *key) {
    char k[100];
    snprintf(k, sizeof k, "\"%s\": ", key);
    const char *p = text ? strstr(text, k) : NULL;
    return p ? atoll(p + strlen(k)) : -1;
}

/* A gray JPEG of about `pixels` pixels (w x h, w = 10000) at dir/name. */
static int write_photo(const char *dir, const char *name, int w, int h, unsigned seed, char *path,
                       size_t size) {
    snprintf(path, size, "%s/%s", dir, name);
    return big_jpeg_write(path, w, h, 1, 60, seed);
}

CDB_TEST(pil_limit) {
    char lib[700], db[700], p100[900], p170[900], p179[900];
    cli_run_result r;
    LU_NEED_SETUP();
    LU_PATHS("big", CLI_AT(lib, "lib"), CLI_AT(db, "db"));
    CHECK(lu_mkdirs(lib) == 0);
    /* 100,000,000 (PIL warns), 170,000,000 (still under 2 x PIL's), 179,000,000 (over) */
    CHECK(write_photo(lib, "p100.jpg", 10000, 10000, 1, p100, sizeof p100) == 0);
    CHECK(write_photo(lib, "p170.jpg", 10000, 17000, 2, p170, sizeof p170) == 0);
    CHECK(write_photo(lib, "p179.jpg", 10000, 17900, 3, p179, sizeof p179) == 0);
    CHECK(10000LL * 17000 <= 2 * PIL_MAX && 10000LL * 17900 > 2 * PIL_MAX && 10000LL * 10000 > PIL_MAX);
    CHECK(lu_init(db) == 0);
    CHECK(lu_expect((const char *[]){"ingest", "--db", db, lib, "--threads", "2", "--json", NULL},
                    3, &r) == 3);
    CHECK_MSG(json_int(r.out, "added") == 2 && json_int(r.out, "errors") == 1, "%s", r.out);
    cli_run_free(&r);
    CHECK(lu_db_is_exact(db, 2) == 0); /* each its own bytes' embedding (clipdb embed) */
    CHECK(lu_expect((const char *[]){"errors", "--db", db, NULL}, 0, &r) == 0);
    CHECK_MSG(has(&r, "p179.jpg") && has(&r, "179000000 pixels exceeds the limit of 178956970"),
              "%s", r.out);
    cli_run_free(&r);
    /* quarantined: a plain reindex leaves it */
    CHECK(lu_expect((const char *[]){"reindex", "--db", db, "--json", NULL}, 0, &r) == 0);
    CHECK_MSG(json_int(r.out, "added") == 0, "%s", r.out);
    cli_run_free(&r);
    /* a higher limit reads it again; a usage error for a limit that is not a count */
    CHECK(lu_expect((const char *[]){"reindex", "--db", db, "--max-pixels", "-5", NULL}, 2, NULL) == 2);
    CHECK(lu_expect((const char *[]){"reindex", "--db", db, "--max-pixels", "180000000", "--json",
                                     NULL},
                    0, &r) == 0);
    CHECK_MSG(json_int(r.out, "added") == 1 && has(&r, "1 photo refused for its size read again"),
              "%s%s", r.out, r.err);
    cli_run_free(&r);
    {
        lu_export e; /* (clipdb embed keeps the default limit: the oracle checked the others) */
        int count = 0;
        CHECK(lu_export_read(db, &e) == 0);
        CHECK_EQ_INT(e.n, 3);
        lu_export_find(&e, p179, &count);
        CHECK_EQ_INT(count, 1);
        lu_export_free(&e);
    }
    /* the setting stays: a changed photo over the default is still read */
    CHECK(write_photo(lib, "p179.jpg", 10000, 17900, 4, p179, sizeof p179) == 0);
    CHECK(lu_expect((const char *[]){"reindex", "--db", db, "--json", NULL}, 0, &r) == 0);
    CHECK_MSG(json_int(r.out, "changed") == 1 && json_int(r.out, "errors") == 0, "%s", r.out);
    cli_run_free(&r);
    lu_rm_rf(lib);
}

CDB_TEST(decode_budget) {
    char lib[700], db[700], p[900];
    cli_run_result r;
    LU_NEED_SETUP();
    LU_PATHS("budget", CLI_AT(lib, "lib"), CLI_AT(db, "db"));
    CHECK(lu_mkdirs(lib) == 0);
    /* 4 x 40 MP and one of 100 MP, a 300 MB budget (39.3 million pixels at 8 bytes) */
    for (int i = 0; i < 4; i++) {
        char name[32];
        snprintf(name, sizeof name, "m%d.jpg", i);
        CHECK(write_photo(lib, name, 8000, 5000, 10 + (unsigned)i, p, sizeof p) == 0);
    }
    CHECK(write_photo(lib, "huge.jpg", 10000, 10000, 20, p, sizeof p) == 0);
    CHECK(lu_init(db) == 0);
    CHECK(lu_expect((const char *[]){"ingest", "--db", db, lib, "--threads", "4",
                                     "--decode-memory", "300", "--json", NULL},
                    0, &r) == 0);
    long long peak = json_int(r.out, "decode_peak_pixels");
    long long budget = 300LL * 1048576 / 8;
    CHECK_MSG(json_int(r.out, "added") == 5, "%s", r.out);
    /* two 40 MP photos pass the budget: one at a time; the 100 MP one alone, the peak */
    CHECK_MSG(peak == 100000000LL, "peak %lld pixels in flight, budget %lld", peak, budget);
    cli_run_free(&r);
    CHECK(lu_db_is_exact(db, 5) == 0);
    lu_rm_rf(lib);
}

CDB_TEST_MAIN(pil_limit, decode_budget)
