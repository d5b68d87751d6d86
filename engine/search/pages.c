/*
** pages.c: the hits' order and the page a search gives (search.c collects the best
** hits_needed, page_hits cuts the page: sort=time and taken order a page, or a window
** every page of the query cuts from), and the search over several databases
** (cdb_engine_search_many): the query made once, each database asked for its best hits
** by score, unpaged, and the hits merged, collapsed over all their files, and paged as
** one database's would be. The merge is cdb_engine_hits_merge (a server's peers too).
*/
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/search/search.h"

/* ---- order and page ------------------------------------------------------------------ */

int cdb_engine_hit_cmp_score(const cdb_engine_hit *a, const cdb_engine_hit *b) {
    int c;
    if (a->score != b->score) return a->score > b->score ? -1 : 1;
    if ((c = strcmp(a->path, b->path))) return c;
    return (a->db > b->db) - (a->db < b->db);
}

int cdb_eng_by_score(const void *a, const void *b) { return cdb_engine_hit_cmp_score(a, b); }

/* Equal times: by path, then database (not by id: ids differ between databases). */
static int by_path(const cdb_engine_hit *x, const cdb_engine_hit *y) {
    int c = strcmp(x->path, y->path);
    return c ? c : (x->db > y->db) - (x->db < y->db);
}

static int by_time(const void *a, const void *b) {
    const cdb_engine_hit *x = a, *y = b;
    if (x->mtime_ns != y->mtime_ns) return x->mtime_ns > y->mtime_ns ? -1 : 1;
    return by_path(x, y);
}

/* Capture time, newest first (ties: by_path); by_taken_asc oldest first. */
static int by_taken(const void *a, const void *b) {
    const cdb_engine_hit *x = a, *y = b;
    int64_t u = x->photo.taken_key_ms, v = y->photo.taken_key_ms;
    if (u != v) return u > v ? -1 : 1;
    return by_path(x, y);
}

static int by_taken_asc(const void *a, const void *b) {
    const cdb_engine_hit *x = a, *y = b;
    int64_t u = x->photo.taken_key_ms, v = y->photo.taken_key_ms;
    if (u != v) return u < v ? -1 : 1;
    return by_path(x, y);
}

/* The order a sort other than by score puts hits in (NULL: by score). */
static int (*sort_order(const cdb_engine_search_params *p))(const void *, const void *) {
    switch (p->sort) {
    case CDB_ENGINE_SORT_TIME: return by_time;
    case CDB_ENGINE_SORT_TAKEN: return by_taken;
    case CDB_ENGINE_SORT_TAKEN_ASC: return by_taken_asc;
    default: return NULL;
    }
}

/* 1 when the hits put in time order are a window wider than the page. */
static int time_window(const cdb_engine_search_params *p) {
    return sort_order(p) && p->sort_window > 0;
}

/* How many of the best hits a search collects: the page's, or the time window. */
int cdb_eng_hits_needed(const cdb_engine_search_params *p) {
    if (!time_window(p)) return p->k + p->offset;
    return p->sort_window;
}

/* The page: hits[0..*n) in the order asked (by time: the whole set collected first),
** p->offset of them skipped, at most p->k kept. */
void cdb_eng_page_hits(cdb_engine_hit *hits, int *n, const cdb_engine_search_params *p) {
    if (*n == 0) return; /* hits may be NULL then */
    int skip = p->offset < *n ? p->offset : *n;
    if (time_window(p) && *n > 1) qsort(hits, (size_t)*n, sizeof *hits, sort_order(p));
    for (int i = 0; i < skip; i++) cdb_eng_hit_clear(&hits[i]);
    memmove(hits, hits + skip, sizeof *hits * (size_t)(*n - skip));
    *n -= skip;
    for (int i = p->k; i < *n; i++) cdb_eng_hit_clear(&hits[i]);
    if (*n > p->k) *n = p->k;
    if (!time_window(p) && sort_order(p) && *n > 1)
        qsort(hits, (size_t)*n, sizeof *hits, sort_order(p));
}

/* ---- several databases ------------------------------------------------------------------ */

/* What each database is asked for: the best cdb_eng_hits_needed(p) by score, unpaged (the
** merge pages them as one database would). */
static cdb_engine_search_params part_params(const cdb_engine_search_params *p) {
    cdb_engine_search_params pp = *p;
    pp.k = cdb_eng_hits_needed(p);
    pp.offset = 0;
    pp.sort = CDB_ENGINE_SORT_SCORE;
    pp.sort_window = 0;
    return pp;
}

/* Appends part's hits to *all (heap, *n), each marked with database index db; part
** keeps no hit (its paths move). */
static cdb_status take_hits(cdb_engine_result *part, int db, cdb_engine_hit **all, int *n) {
    cdb_engine_hit *na = realloc(*all, sizeof **all * (size_t)(*n + part->n + 1));
    if (!na) return cdb_eng_failw(CDB_NOMEM, CDB_ENGINE_E_NONE, "out of memory", "cannot search");
    *all = na;
    for (int i = 0; i < part->n; i++) {
        na[*n] = part->hits[i];
        na[(*n)++].db = db;
    }
    part->n = 0;
    return CDB_OK;
}

cdb_engine_search_params cdb_engine_part_params(const cdb_engine_search_params *p) {
    return part_params(p);
}

void cdb_engine_hits_merge(cdb_engine_hit *hits, int *n, const cdb_engine_search_params *p) {
    int need = cdb_eng_hits_needed(p);
    if (*n > 1) qsort(hits, (size_t)*n, sizeof *hits, cdb_eng_by_score);
    for (int i = need; i < *n; i++) cdb_eng_hit_clear(&hits[i]);
    if (*n > need) *n = need;
    cdb_eng_page_hits(hits, n, p);
}

/* 1 for the failures of the query itself (said as they are: no database to name). */
static int query_error(cdb_engine_err code) {
    return code == CDB_ENGINE_E_QUERY || code == CDB_ENGINE_E_QUERY_ZERO ||
           code == CDB_ENGINE_E_QUERY_IMAGE || code == CDB_ENGINE_E_NO_TEXT ||
           code == CDB_ENGINE_E_MODEL_MISMATCH;
}

/* Every database's best pp->k hits for the query, appended to *all (heap, *n_all), each
** marked with its database; truncated[i] (n) set when database i gave pp->k of them (it
** may have more). out gets the model and generation of the handle that made the query
** vector (es[qu->like_db], searched first). */
static cdb_status gather_hits(cdb_engine *const *es, int n, const cdb_engine_query *qu,
                              const cdb_engine_term *terms, int n_terms,
                              const cdb_engine_search_params *pp, eng_shared_q *sq,
                              cdb_engine_result *out, cdb_engine_hit **all, int *n_all,
                              unsigned char *truncated /* OUT n */) {
    cdb_engine_result part;
    cdb_status st = CDB_OK;
    memset(&part, 0, sizeof part);
    for (int j = 0; j < n && st == CDB_OK; j++) {
        int i = j == 0 ? qu->like_db : j <= qu->like_db ? j - 1 : j;
        if ((st = cdb_eng_search_retried(es[i], qu, terms, n_terms, pp, sq, &part)) != CDB_OK) {
            if (n > 1 && !query_error(cdb_engine_errcode()))
                st = cdb_eng_fail(st, cdb_engine_errcode(), "cannot search %s", es[i]->dir);
            break;
        }
        if (j == 0) {
            memcpy(out->model, part.model, sizeof out->model);
            out->model_id = part.model_id;
            out->generation = part.generation;
        }
        truncated[i] = part.n >= pp->k;
        st = take_hits(&part, i, all, n_all);
        cdb_engine_result_free(&part);
    }
    cdb_engine_result_free(&part);
    return st;
}

/* The copy groups of the union of es[0..n)'s files (their vector sets that p names, of
** the query's weights), cached with es[0]'s. *out: cdb_eng_groups_unref. */
static cdb_status many_groups(cdb_engine *const *es, int n, const cdb_engine_search_params *p,
                              eng_groups **out) {
    eng_groups_part *parts = calloc((size_t)n, sizeof *parts);
    eng_reader **rd = calloc((size_t)n, sizeof *rd);
    eng_model *mod = NULL;
    int dim = 0;
    cdb_status st = parts && rd ? CDB_OK
                                : cdb_eng_failw(CDB_NOMEM, CDB_ENGINE_E_NONE, "out of memory",
                                                "cannot search");
    *out = NULL;
    for (int i = 0; st == CDB_OK && i < n; i++) {
        int64_t gen = 0;
        if ((st = cdb_eng_reader_get(es[i], &rd[i])) != CDB_OK ||
            (st = cdb_eng_model_get(es[i], rd[i]->db, p->model, 0, 0, -1, &mod)) != CDB_OK)
            break;
        if ((st = cdb_db_generation(rd[i]->db, &gen)) != CDB_OK) {
            st = cdb_eng_fail(st, CDB_ENGINE_E_NONE, "cannot read the database's generation");
            break;
        }
        parts[i].db = rd[i]->db;
        parts[i].model_id = mod->model_id;
        if (i == 0) dim = mod->dm.dim;
        st = cdb_eng_groups_key(es[i], rd[i]->db, gen, &parts[i].key);
    }
    if (st == CDB_OK) st = cdb_eng_groups_cached(es[0], parts[0].model_id, 1, parts, n, dim, out);
    for (int i = 0; rd && i < n; i++)
        if (rd[i]) cdb_eng_reader_put(es[i], rd[i]);
    free(parts);
    free(rd);
    return st;
}

/* The merged hits[0..*n) (each database's best, by score) cut where they stop being the
** whole ranking's (after the first last hit of a database that may have more: truncated)
** and collapsed by g. Returns 1 when that gives `need` groups or is all there is. */
static int merge_collapsed(const eng_groups *g, cdb_engine_hit *hits, int *n,
                           const unsigned char *truncated, int n_db, int need,
                           cdb_status *st /* OUT */) {
    int cut = *n, more = 0;
    unsigned char *seen = calloc((size_t)n_db, 1);
    if (!seen) {
        *st = cdb_eng_failw(CDB_NOMEM, CDB_ENGINE_E_NONE, "out of memory", "cannot search");
        return 1;
    }
    if (*n > 1) qsort(hits, (size_t)*n, sizeof *hits, cdb_eng_by_score);
    for (int i = *n - 1; i >= 0; i--) { /* each truncated database's last hit */
        int d = hits[i].db;
        if (!truncated[d] || seen[d]) continue;
        seen[d] = more = 1;
        if (i + 1 < cut) cut = i + 1;
    }
    free(seen);
    for (int i = cut; i < *n; i++) cdb_eng_hit_clear(&hits[i]);
    *n = cut;
    *st = cdb_eng_collapse(g, hits, n);
    return *st != CDB_OK || *n >= need || !more;
}

cdb_status cdb_engine_search_many(cdb_engine *const *es, int n, const cdb_engine_query *qu,
                                  const cdb_engine_search_params *p, cdb_engine_result *out) {
    cdb_engine_search_params defaults = cdb_engine_search_params_default(), pp;
    cdb_engine_term *parsed = NULL;
    const cdb_engine_term *terms = NULL;
    cdb_engine_hit *all = NULL;
    unsigned char *truncated = NULL;
    eng_groups *groups = NULL;
    eng_shared_q sq;
    int n_terms = 0, n_all = 0;
    cdb_status st;
    cdb_eng_clear();
    memset(out, 0, sizeof *out);
    memset(&sq, 0, sizeof sq);
    if (!p) p = &defaults;
    if (n < 1 || !es)
        return cdb_eng_code(cdb_seterr(CDB_INVALID, "no database to search"), CDB_ENGINE_E_QUERY);
    if (qu->like_db < 0 || qu->like_db >= n)
        return cdb_eng_code(cdb_seterr(CDB_INVALID, "like_db %d names no database of the %d",
                                       qu->like_db, n),
                            CDB_ENGINE_E_QUERY);
    if ((st = cdb_eng_prepare_query(qu, p, &terms, &parsed, &n_terms)) != CDB_OK) goto done;
    if (!(truncated = calloc((size_t)n, 1))) {
        st = cdb_eng_failw(CDB_NOMEM, CDB_ENGINE_E_NONE, "out of memory", "cannot search");
        goto done;
    }
    pp = part_params(p);
    /* collapsed over several: each database's hits uncollapsed, merged, then the groups of
    ** all their files; 4x more hits from each while the cut is short of the groups */
    pp.collapse = p->collapse && n == 1;
    for (int64_t fetch = pp.k;; fetch *= 4) {
        pp.k = (int)fetch;
        if ((st = gather_hits(es, n, qu, terms, n_terms, &pp, &sq, out, &all, &n_all,
                              truncated)) != CDB_OK)
            goto done;
        if (!p->collapse || n == 1) break;
        if (!groups && (st = many_groups(es, n, p, &groups)) != CDB_OK) goto done;
        if (merge_collapsed(groups, all, &n_all, truncated, n, cdb_eng_hits_needed(p), &st) ||
            fetch * 4 > INT32_MAX / 4)
            break;
        for (int i = 0; i < n_all; i++) cdb_eng_hit_clear(&all[i]);
        n_all = 0;
    }
    if (st != CDB_OK) goto done;
    cdb_engine_hits_merge(all, &n_all, p);
    cdb_eng_set_probabilities(sq.mod, qu, n_terms, all, n_all, out);
    out->hits = all;
    out->n = n_all;
    all = NULL;
    n_all = 0;
done:
    for (int i = 0; i < n_all; i++) cdb_eng_hit_clear(&all[i]);
    free(all);
    free(truncated);
    free(sq.q);
    cdb_eng_groups_unref(groups);
    cdb_engine_terms_free(parsed, parsed ? n_terms : 0);
    return st;
}
