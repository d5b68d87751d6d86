/*
** grow.c: the arrays engine/ collects catalog rows into (one element at a time, in
** callbacks): room that doubles, so that n rows cost O(n) copying.
*/
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/base/base.h"

int cdb_eng_grow(void **p, size_t *cap, size_t n, size_t elem) {
    size_t nc;
    void *q;
    if (n < *cap) return 0;
    nc = *cap ? *cap * 2 : 16;
    if (nc > SIZE_MAX / elem || !(q = realloc(*p, elem * nc))) return -1;
    *p = q;
    *cap = nc;
    return 0;
}

void *cdb_eng_rows_add(eng_rows *r, size_t elem) {
    if (cdb_eng_grow(&r->v, &r->cap, r->n, elem) != 0) {
        r->oom = 1;
        return NULL;
    }
    return memset((char *)r->v + elem * r->n++, 0, elem);
}
