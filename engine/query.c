/*
** query.c: the search query language. The words of the query are joined with
** spaces and split into terms at standalone "+" and "-" words:
**     beach + sunset - people      ->  +1 "beach", +1 "sunset", -1 "people"
**     2*beach + 0.5*sunset         ->  +2 "beach", +0.5 "sunset"
** A "+"/"-" inside a word ("t-shirt", "-3") is part of the text. A leading "-"
** negates the first term. The search encodes each term, and scores images against
** the normalized weighted sum (search.c); a "not" text is a term with weight -1.
*/
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine_int.h"

static int append_word(char **text, size_t *len, const char *w, size_t wn) {
    char *t = realloc(*text, *len + wn + 2);
    if (!t) return -1;
    if (*len) t[(*len)++] = ' ';
    memcpy(t + *len, w, wn);
    *len += wn;
    t[*len] = '\0';
    *text = t;
    return 0;
}

/* "2*beach" -> weight 2, rest "beach"; 0 when the word has no weight prefix. */
static int weight_prefix(const char *w, size_t n, double *weight, size_t *skip) {
    char buf[64], *end;
    const char *star = memchr(w, '*', n);
    size_t k;
    if (!star || star == w || (size_t)(star - w) >= sizeof buf) return 0;
    k = (size_t)(star - w);
    memcpy(buf, w, k);
    buf[k] = '\0';
    *weight = strtod(buf, &end);
    if (*end) return 0;
    *skip = k + 1;
    return 1;
}

static int flush(cdb_engine_term **t, int *n, char **text, double w) {
    cdb_engine_term *nt = realloc(*t, sizeof **t * (size_t)(*n + 1));
    if (!nt) return -1;
    *t = nt;
    nt[*n].text = *text;
    nt[*n].weight = w;
    (*n)++;
    *text = NULL;
    return 0;
}

cdb_status cdb_engine_query_parse(const char *q, cdb_engine_term **terms, int *n_terms) {
    char err[256]; /* the CLI's "bad query: ..." has always been cut at 255 bytes */
    const size_t errsz = sizeof err;
    cdb_engine_term *t = NULL;
    int n = 0, last_op = 0;
    char *text = NULL;
    size_t len = 0;
    double sign = 1.0, weight = 1.0;
    const char *p = q;
    cdb_eng_clear();
    *terms = NULL;
    *n_terms = 0;
    for (;;) {
        const char *w;
        size_t wn;
        while (*p && isspace((unsigned char)*p)) p++;
        w = p;
        while (*p && !isspace((unsigned char)*p)) p++;
        wn = (size_t)(p - w);
        if (wn == 0) break;
        if (wn == 1 && (*w == '+' || *w == '-')) { /* an operator */
            if (last_op) {
                snprintf(err, errsz, "two operators in a row in '%s'", q);
                goto fail;
            }
            if (text) {
                if (flush(&t, &n, &text, sign * weight)) goto nomem;
                len = 0;
                weight = 1.0;
            }
            sign = *w == '-' ? -1.0 : 1.0;
            last_op = 1;
            continue;
        }
        last_op = 0;
        if (!text) { /* first word of a term: an optional "N*" weight */
            size_t skip = 0;
            double wt;
            if (weight_prefix(w, wn, &wt, &skip)) {
                weight = wt;
                w += skip;
                wn -= skip;
                if (wn == 0) {
                    snprintf(err, errsz, "a weight needs a term after '*' in '%s'", q);
                    goto fail;
                }
            }
        }
        if (append_word(&text, &len, w, wn)) goto nomem;
    }
    if (last_op) {
        snprintf(err, errsz, "'%s' ends with an operator", q);
        goto fail;
    }
    if (text && flush(&t, &n, &text, sign * weight)) goto nomem;
    if (n == 0) {
        snprintf(err, errsz, "empty query");
        goto fail;
    }
    *terms = t;
    *n_terms = n;
    return CDB_OK;
nomem:
    free(text);
    cdb_engine_terms_free(t, n);
    return cdb_eng_code(cdb_seterr(CDB_NOMEM, "out of memory"), CDB_ENGINE_E_NONE);
fail:
    free(text);
    cdb_engine_terms_free(t, n);
    return cdb_eng_code(cdb_seterr(CDB_INVALID, "%s", err), CDB_ENGINE_E_QUERY);
}

void cdb_engine_terms_free(cdb_engine_term *terms, int n) {
    for (int i = 0; i < n; i++) free(terms[i].text);
    free(terms);
}
