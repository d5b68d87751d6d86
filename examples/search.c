/*
** search.c: a clipdb example. Searches a database for a text and prints one line per
** hit: rank, score, file id, width x height, path.
**
**   usage: search DB [-k N] [--min-score S] [--under PATH]... TEXT...
**
** Build it against an installed clipdb (README.md, "Use as a library"):
**   cc search.c $(pkg-config --cflags --libs clipdb) -o search
*/
#include <clipdb.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Prints the failure of what (status, then the library's sentence); returns 1. */
static int fail(clipdb_status st, const char *what) {
    fprintf(stderr, "search: %s: %s: %s\n", what, clipdb_status_str(st), clipdb_errmsg());
    return 1;
}

/* The words from argv[i] on, joined by spaces (the query text). */
static char *join(char **argv, int i, int argc) {
    size_t len = 1;
    char *s;
    for (int j = i; j < argc; j++) len += strlen(argv[j]) + 1;
    if (!(s = calloc(len, 1))) return NULL;
    for (int j = i; j < argc; j++) {
        if (j > i) strcat(s, " ");
        strcat(s, argv[j]);
    }
    return s;
}

int main(int argc, char **argv) {
    clipdb_options *opt = clipdb_options_new();
    clipdb_search_params *sp = clipdb_search_params_new();
    clipdb *db = NULL;
    clipdb_hits *hits = NULL;
    clipdb_status st = CLIPDB_OK;
    char *text = NULL;
    int i = 2, rc = 1;
    if (argc < 3) {
        fprintf(stderr, "usage: search DB [-k N] [--min-score S] [--under PATH]... TEXT...\n"
                        "(libclipdb %s, number %d; built with clipdb.h %s)\n",
                clipdb_version(), clipdb_version_number(), CLIPDB_VERSION_STRING);
        return 2;
    }
    if (!opt || !sp) return fail(CLIPDB_NOMEM, "setting up");
    for (; i + 1 < argc && st == CLIPDB_OK; i += 2) {
        if (!strcmp(argv[i], "-k")) st = clipdb_search_params_set_k(sp, atoi(argv[i + 1]));
        else if (!strcmp(argv[i], "--min-score"))
            st = clipdb_search_params_set_min_score(sp, atof(argv[i + 1]));
        else if (!strcmp(argv[i], "--under")) st = clipdb_search_params_add_under(sp, argv[i + 1]);
        else break;
    }
    /* a search encodes one short text: the CPU, one thread, is the fastest place */
    if (st == CLIPDB_OK) st = clipdb_options_set_device(opt, "cpu");
    if (st == CLIPDB_OK) st = clipdb_options_set_threads(opt, 1);
    if (st != CLIPDB_OK) {
        rc = fail(st, "bad option");
    } else if (!(text = join(argv, i, argc)) || !*text) {
        fprintf(stderr, "search: no TEXT given\n");
    } else if ((st = clipdb_open(argv[1], opt, &db)) != CLIPDB_OK) {
        rc = fail(st, "cannot open the database");
    } else if ((st = clipdb_search_text(db, text, sp, &hits)) != CLIPDB_OK) {
        rc = fail(st, "cannot search");
    } else {
        for (int h = 0; h < clipdb_hits_count(hits); h++)
            printf("%d\t%.6f\t%lld\t%dx%d\t%s\n", h + 1, (double)clipdb_hits_score(hits, h),
                   (long long)clipdb_hits_id(hits, h), clipdb_hits_width(hits, h),
                   clipdb_hits_height(hits, h), clipdb_hits_path(hits, h));
        rc = 0;
    }
    clipdb_hits_free(hits);
    clipdb_close(db);
    clipdb_search_params_free(sp);
    clipdb_options_free(opt);
    free(text);
    return rc;
}
