/*
** ingest.c: a clipdb example. Creates the database DB bound to MODEL when there is
** none, ingests the PATHs into it with a progress line on stderr, and prints what the
** run did.
**
**   usage: ingest DB MODEL PATH...
**
** Build it against an installed clipdb (README.md, "Use as a library"):
**   cc ingest.c $(pkg-config --cflags --libs clipdb) -o ingest
*/
#include <clipdb.h>

#include <inttypes.h>
#include <stdio.h>

/* Prints the failure of what (status, then the library's sentence); returns 1. */
static int fail(clipdb_status st, const char *what) {
    fprintf(stderr, "ingest: %s: %s: %s\n", what, clipdb_status_str(st), clipdb_errmsg());
    return 1;
}

/* The progress callback: a line per 100 files. Returning nonzero would stop the run. */
static int progress(void *ud, const char *label, int64_t done, int64_t total, int64_t errors) {
    int64_t *last = ud;
    if (done - *last >= 100 || (total >= 0 && done == total && done != *last)) {
        fprintf(stderr, "%s: %" PRId64 " of %" PRId64 " files (%" PRId64 " failed)\n", label,
                done, total, errors);
        *last = done;
    }
    return 0;
}

int main(int argc, char **argv) {
    static const struct {
        clipdb_report_field f;
        const char *name;
    } fields[] = {{CLIPDB_REPORT_FOUND, "found"},         {CLIPDB_REPORT_ADDED, "added"},
                  {CLIPDB_REPORT_CHANGED, "changed"},     {CLIPDB_REPORT_UNCHANGED, "unchanged"},
                  {CLIPDB_REPORT_MOVED, "moved"},         {CLIPDB_REPORT_DELETED, "deleted"},
                  {CLIPDB_REPORT_ERRORS, "errors"},       {CLIPDB_REPORT_RETRY, "retry"},
                  {CLIPDB_REPORT_SKIPPED, "skipped"},     {CLIPDB_REPORT_PARTIAL, "partial"},
                  {CLIPDB_REPORT_INTERRUPTED, "interrupted"}};
    clipdb_options *opt;
    clipdb *db = NULL;
    clipdb_report *rep = NULL;
    clipdb_status st;
    int64_t last = 0;
    if (argc < 4) {
        fprintf(stderr, "usage: ingest DB MODEL PATH...\n");
        return 2;
    }
    if (!(opt = clipdb_options_new())) return fail(CLIPDB_NOMEM, "setting up");
    /* wait for another writer rather than fail */
    if ((st = clipdb_options_set_lock_wait_ms(opt, -1)) != CLIPDB_OK) return fail(st, "options");
    st = clipdb_open(argv[1], opt, &db);
    if (st == CLIPDB_NOTFOUND) { /* no database yet: make one bound to MODEL */
        if ((st = clipdb_create(argv[1], argv[2])) != CLIPDB_OK)
            return fail(st, "cannot create the database");
        st = clipdb_open(argv[1], opt, &db);
    }
    clipdb_options_free(opt);
    if (st != CLIPDB_OK) return fail(st, "cannot open the database");
    st = clipdb_ingest(db, (const char *const *)argv + 3, argc - 3, progress, &last, &rep);
    if (st != CLIPDB_OK) {
        clipdb_report_free(rep);
        clipdb_close(db);
        return fail(st, "cannot ingest");
    }
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        printf("%s %" PRId64 "\n", fields[i].name, clipdb_report_get(rep, fields[i].f));
    clipdb_report_free(rep);
    clipdb_close(db);
    return 0;
}
