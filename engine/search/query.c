/*
** query.c: the search query language. The words of the query are joined with
** spaces and split into terms at standalone "+" and "-" words:
**     beach + sunset - people      ->  +1 "beach", +1 "sunset", -1 "people"
**     2*beach + 0.5*sunset         ->  +2 "beach", +0.5 "sunset"
** A "+"/"-" inside a word ("t-shirt", "-3") is part of the text. A leading "-"
** negates the first term. The weight may also be written "2 * beach" or "beach*2"
** (or "beach * 2"); it must be a finite, nonzero number. The search encodes each term, and scores images against
** the normalized weighted sum (search.c); a "not" text is a term with weight -1. Only
** the weights' ratios matter: any finite weights work ("1e308*a + 1e308*b" is "a + b").
*/
#include <ctype.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/search/search.h"

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

/* s[0..n) is a whole number (strtod), into *v. */
static int is_number(const char *s, size_t n, double *v) {
    char buf[64], *end;
    if (n == 0 || n >= sizeof buf) return 0;
    memcpy(buf, s, n);
    buf[n] = '\0';
    *v = strtod(buf, &end);
    return *end == '\0';
}

/* A term's text that still holds its weight in the spaced or suffix form: "2 * beach"
** (the weight prefix of a first word "2" followed by "*") and "beach*2" / "beach * 2".
** Moves it into *weight (multiplying what a "2*" prefix gave) and trims the text. */
static void weight_forms(char *text, double *weight) {
    size_t len = strlen(text);
    char *star;
    double v;
    if (len > 2 && (star = strchr(text, '*')) && star > text && star[-1] == ' ' &&
        star[1] == ' ' && is_number(text, (size_t)(star - text - 1), &v) && star[2]) {
        memmove(text, star + 2, strlen(star + 2) + 1); /* "2 * beach" */
        *weight *= v;
        return;
    }
    if ((star = strrchr(text, '*')) && star > text && star[1] &&
        is_number(star + 1 + (star[1] == ' '), strlen(star + 1 + (star[1] == ' ')), &v)) {
        char *end = star; /* "beach*2", "beach * 2" */
        while (end > text && end[-1] == ' ') end--;
        if (end > text) {
            *end = '\0';
            *weight *= v;
        }
    }
}

/* Ends the term in *text: its weight forms read, the weight checked (-2: err says
** why), appended to *t with sign * weight (-1: out of memory). */
static int flush(cdb_engine_term **t, int *n, char **text, double sign, double weight, char *err,
                 size_t errsz) {
    cdb_engine_term *nt;
    weight_forms(*text, &weight);
    if (isinf(weight)) { /* "1e309*a": beyond a double */
        snprintf(err, errsz,
                 "the weight of '%s' is infinite or overflows (beyond %g): only the "
                 "weights' ratios matter, so smaller numbers say the same (as in 2*%s)",
                 *text, DBL_MAX, *text);
        return -2;
    }
    if (!isfinite(weight) || weight == 0) {
        snprintf(err, errsz,
                 "the weight of '%s' is %g: a weight is a finite number other than 0 (as in 2*%s)",
                 *text, weight, *text);
        return -2;
    }
    if (!(nt = realloc(*t, sizeof **t * (size_t)(*n + 1)))) return -1;
    *t = nt;
    nt[*n].text = *text;
    nt[*n].weight = sign * weight;
    (*n)++;
    *text = NULL;
    return 0;
}

cdb_status cdb_engine_query_parse(const char *q, cdb_engine_term **terms, int *n_terms) {
    char err[256]; /* the CLI's "bad query: ..." has always been cut at 255 bytes */
    const size_t errsz = sizeof err;
    cdb_engine_term *t = NULL;
    int n = 0, last_op = 0, f;
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
                if ((f = flush(&t, &n, &text, sign, weight, err, errsz)) != 0)
                    goto flush_failed;
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
    if (text && (f = flush(&t, &n, &text, sign, weight, err, errsz)) != 0) goto flush_failed;
    if (n == 0) {
        snprintf(err, errsz, "empty query");
        goto fail;
    }
    *terms = t;
    *n_terms = n;
    return CDB_OK;
flush_failed:
    if (f == -2) goto fail;
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
