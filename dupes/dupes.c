/*
** dupes.c: duplicate groups (dupes.h). Copies (exact and near) are the components of
** a union-find over exact edges (equal content hashes) and near edges (phash AND
** cosine), the near edges taken closest first, and a merge refused when the two
** components hold distinct shots (each component remembers the one camera and capture
** time it has seen). Pairs and bursts are union-finds of their own over sorted keys.
** Tested against a brute-force grouping by transitive closure (tests/dupes).
*/
#include "dupes/dupes.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

cdb_dupes_params cdb_dupes_params_default(void)
{
    cdb_dupes_params p = {.phash_bits = 12, .min_cosine = 0.9f, .pair_ms = 1000,
                          .burst_ms = 3000};
    return p;
}

static const char *const kind_names[CDB_DUPES_KINDS] = {"exact", "near", "pair", "burst"};

const char *cdb_dupes_kind_name(cdb_dupes_kind k)
{
    return (unsigned)k < CDB_DUPES_KINDS ? kind_names[k] : "unknown";
}

int cdb_dupes_kind_parse(const char *name)
{
    for (int k = 0; name && k < CDB_DUPES_KINDS; k++)
        if (strcmp(name, kind_names[k]) == 0)
            return k;
    return -1;
}

void cdb_dupes_groups_free(cdb_dupes_groups *g)
{
    if (!g)
        return;
    cdb_free(g->kind);
    cdb_free(g->keep);
    cdb_free(g->start);
    cdb_free(g->member);
    cdb_free(g);
}

/* ---- union-find with a shot signature per component ---------------------------- */

typedef struct uf {
    size_t *parent;
    int64_t *sig_ms;      /* the component's capture time, when sig_has */
    const char **sig_cam; /* its camera, or NULL */
    unsigned char *sig_has, *near;
} uf;

static size_t uf_find(uf *u, size_t i)
{
    while (u->parent[i] != i) {
        u->parent[i] = u->parent[u->parent[i]];
        i = u->parent[i];
    }
    return i;
}

static int known(const char *s)
{
    return s && *s;
}

/* Can the components a and b (roots) be one picture? Not when both know a capture
** time and the times differ, or both know a camera and the cameras differ. */
static int same_shot(const uf *u, size_t a, size_t b)
{
    if (u->sig_has[a] && u->sig_has[b] && u->sig_ms[a] != u->sig_ms[b])
        return 0;
    if (known(u->sig_cam[a]) && known(u->sig_cam[b]) && strcmp(u->sig_cam[a], u->sig_cam[b]))
        return 0;
    return 1;
}

static void uf_union(uf *u, size_t a, size_t b)
{
    a = uf_find(u, a), b = uf_find(u, b);
    if (a == b)
        return;
    if (b < a) {
        size_t t = a;
        a = b, b = t;
    }
    u->parent[b] = a;
    if (!u->sig_has[a] && u->sig_has[b])
        u->sig_has[a] = 1, u->sig_ms[a] = u->sig_ms[b];
    if (!known(u->sig_cam[a]))
        u->sig_cam[a] = u->sig_cam[b];
    u->near[a] |= u->near[b];
}

static void uf_free(uf *u)
{
    free(u->parent);
    free(u->sig_ms);
    free(u->sig_cam);
    free(u->sig_has);
    free(u->near);
}

static int uf_init(uf *u, const cdb_dupes_item *items, size_t n)
{
    size_t m = n ? n : 1;
    u->parent = malloc(m * sizeof *u->parent);
    u->sig_ms = malloc(m * sizeof *u->sig_ms);
    u->sig_cam = malloc(m * sizeof *u->sig_cam);
    u->sig_has = calloc(m, 1);
    u->near = calloc(m, 1);
    if (!u->parent || !u->sig_ms || !u->sig_cam || !u->sig_has || !u->near) {
        uf_free(u);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        u->parent[i] = i;
        u->sig_has[i] = items && items[i].has_taken;
        u->sig_ms[i] = items ? items[i].taken_ms : 0;
        u->sig_cam[i] = items ? items[i].camera : NULL;
    }
    return 0;
}

/* ---- the keep --------------------------------------------------------------------- */

/* < 0 when a is the better keeper. */
static int keep_cmp(const cdb_dupes_item *a, const cdb_dupes_item *b)
{
    int64_t pa = (int64_t)a->width * a->height, pb = (int64_t)b->width * b->height;
    if (pa != pb)
        return pa > pb ? -1 : 1;
    if (a->format != b->format)
        return a->format < b->format ? -1 : 1;
    if (a->has_taken != b->has_taken)
        return a->has_taken ? -1 : 1;
    if (a->bytes != b->bytes)
        return a->bytes > b->bytes ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

/* ---- edges ------------------------------------------------------------------------ */

typedef struct edge {
    size_t a, b;
    int bits;
    float cosine;
} edge;

static int edge_cmp(const void *x, const void *y)
{
    const edge *a = x, *b = y;
    if (a->bits != b->bits)
        return a->bits - b->bits;
    if (a->cosine != b->cosine)
        return a->cosine > b->cosine ? -1 : 1;
    if (a->a != b->a)
        return a->a < b->a ? -1 : 1;
    return (a->b > b->b) - (a->b < b->b);
}

float cdb_dupes_cosine(const float *x, const float *y, int dim)
{
    double s = 0;
    for (int k = 0; k < dim; k++)
        s += (double)x[k] * y[k];
    return (float)s;
}

/* The near edges (closest first) in *out: the phash pairs within phash_bits
** (cdb_dupes_phash_pairs) among the items with a phash and a vector, then the cosine.
** 0, or -1 out of memory. */
static int near_edges(const cdb_dupes_item *it, size_t n, int dim, const cdb_dupes_params *p,
                      edge **out, size_t *n_out)
{
    size_t m = 0, n_pairs = 0, ne = 0;
    size_t *idx = malloc((n ? n : 1) * sizeof *idx);
    uint64_t *h = malloc((n ? n : 1) * sizeof *h);
    cdb_dupes_pair *pairs = NULL;
    edge *e = NULL;
    int rc = -1;
    if (!idx || !h)
        goto done;
    for (size_t i = 0; i < n; i++)
        if (it[i].has_phash && it[i].vec) {
            idx[m] = i;
            h[m++] = it[i].phash;
        }
    if (cdb_dupes_phash_pairs(h, m, p->phash_bits, &pairs, &n_pairs) != CDB_OK)
        goto done;
    if (!(e = malloc((n_pairs ? n_pairs : 1) * sizeof *e)))
        goto done;
    for (size_t k = 0; k < n_pairs; k++) {
        size_t a = idx[pairs[k].a], b = idx[pairs[k].b];
        float c = cdb_dupes_cosine(it[a].vec, it[b].vec, dim);
        if (c >= p->min_cosine)
            e[ne++] = (edge){a, b, pairs[k].bits, c};
    }
    if (ne)
        qsort(e, ne, sizeof *e, edge_cmp);
    rc = 0;
done:
    if (rc) {
        free(e);
        e = NULL;
    }
    *out = e;
    *n_out = ne;
    free(idx);
    free(h);
    cdb_free(pairs);
    return rc;
}

/* ---- sorted keys for exact, pair and burst (qsort_r: items as the context) ---------- */

static int by_hash(const void *x, const void *y, void *ctx)
{
    const cdb_dupes_item *it = ctx;
    size_t a = *(const size_t *)x, b = *(const size_t *)y;
    int c = memcmp(it[a].hash, it[b].hash, CDB_DUPES_HASH_BYTES);
    return c ? c : (a > b) - (a < b);
}

static int by_stem(const void *x, const void *y, void *ctx)
{
    const cdb_dupes_item *it = ctx;
    size_t a = *(const size_t *)x, b = *(const size_t *)y;
    int c = strcmp(it[a].stem, it[b].stem);
    return c ? c : (a > b) - (a < b);
}

static int by_camera_time(const void *x, const void *y, void *ctx)
{
    const cdb_dupes_item *it = ctx;
    size_t a = *(const size_t *)x, b = *(const size_t *)y;
    int c = strcmp(it[a].camera, it[b].camera);
    if (c)
        return c;
    int64_t ta = it[a].taken_ms, tb = it[b].taken_ms;
    return ta != tb ? (ta > tb) - (ta < tb) : (a > b) - (a < b);
}

static int64_t abs64(int64_t x)
{
    return x < 0 ? -x : x;
}

/* ---- the groups -------------------------------------------------------------------- */

typedef struct builder {
    cdb_dupes_groups *g;
    size_t cap_groups, cap_members;
} builder;

typedef struct rooted {
    size_t root, index;
} rooted;

static int by_root(const void *x, const void *y)
{
    const rooted *a = x, *b = y;
    if (a->root != b->root)
        return (a->root > b->root) - (a->root < b->root);
    return (a->index > b->index) - (a->index < b->index);
}

/* Room for one more group of count members. 0 or -1 out of memory. */
static int reserve(builder *bd, size_t count)
{
    cdb_dupes_groups *g = bd->g;
    if (g->n_groups + 1 >= bd->cap_groups) {
        size_t cap = bd->cap_groups * 2 + 8;
        cdb_dupes_kind *kd = cdb_realloc(g->kind, cap * sizeof *kd);
        if (kd)
            g->kind = kd;
        size_t *kp = cdb_realloc(g->keep, cap * sizeof *kp);
        if (kp)
            g->keep = kp;
        size_t *st = cdb_realloc(g->start, (cap + 1) * sizeof *st);
        if (st)
            g->start = st;
        if (!kd || !kp || !st)
            return -1;
        bd->cap_groups = cap;
    }
    if (g->start[g->n_groups] + count > bd->cap_members) {
        size_t cap = (bd->cap_members + count) * 2;
        size_t *mb = cdb_realloc(g->member, cap * sizeof *mb);
        if (!mb)
            return -1;
        g->member = mb;
        bd->cap_members = cap;
    }
    return 0;
}

/* Appends the components of u with two members or more, among the indices idx[0..m)
** (0..m) when idx is NULL), as groups of kind `kind`, or, when kind < 0, exact or near
** as the component's near flag says. 0 or -1 out of memory. */
static int add_components(builder *bd, uf *u, const cdb_dupes_item *it, const size_t *idx,
                          size_t m, int kind)
{
    rooted *r = malloc((m ? m : 1) * sizeof *r);
    if (!r)
        return -1;
    for (size_t k = 0; k < m; k++) {
        r[k].index = idx ? idx[k] : k;
        r[k].root = uf_find(u, r[k].index);
    }
    qsort(r, m, sizeof *r, by_root);
    int rc = 0;
    for (size_t k = 0, e; k < m && rc == 0; k = e) {
        for (e = k + 1; e < m && r[e].root == r[k].root;)
            e++;
        if (e - k < 2)
            continue;
        if ((rc = reserve(bd, e - k)) != 0)
            break;
        cdb_dupes_groups *g = bd->g;
        size_t at = g->start[g->n_groups], best = r[k].index;
        for (size_t l = k; l < e; l++) {
            g->member[at++] = r[l].index;
            if (keep_cmp(&it[r[l].index], &it[best]) < 0)
                best = r[l].index;
        }
        g->kind[g->n_groups] = kind >= 0 ? (cdb_dupes_kind)kind
                               : u->near[r[k].root] ? CDB_DUPES_NEAR : CDB_DUPES_EXACT;
        g->keep[g->n_groups] = best;
        g->start[++g->n_groups] = at;
    }
    free(r);
    return rc;
}

/* Orders the groups by kind, then by first member (the order dupes.h promises). */
static int order_groups(cdb_dupes_groups *g, size_t n_items)
{
    size_t n = g->n_groups, total = g->start[n];
    rooted *o = malloc((n ? n : 1) * sizeof *o); /* root: kind, then first member */
    size_t *member = cdb_malloc((total ? total : 1) * sizeof *member);
    size_t *start = cdb_malloc((n + 1) * sizeof *start), *keep = NULL;
    cdb_dupes_kind *kind = NULL;
    if (n) {
        keep = cdb_malloc(n * sizeof *keep);
        kind = cdb_malloc(n * sizeof *kind);
    }
    if (!o || !member || !start || (n && (!keep || !kind))) {
        free(o);
        cdb_free(member), cdb_free(start), cdb_free(keep), cdb_free(kind);
        return -1;
    }
    for (size_t k = 0; k < n; k++) {
        o[k].root = (size_t)g->kind[k] * (n_items + 1) + g->member[g->start[k]];
        o[k].index = k;
    }
    qsort(o, n, sizeof *o, by_root);
    start[0] = 0;
    for (size_t k = 0; k < n; k++) {
        size_t src = o[k].index, len = g->start[src + 1] - g->start[src];
        memcpy(member + start[k], g->member + g->start[src], len * sizeof *member);
        start[k + 1] = start[k] + len;
        keep[k] = g->keep[src];
        kind[k] = g->kind[src];
    }
    free(o);
    cdb_free(g->member), cdb_free(g->start), cdb_free(g->keep), cdb_free(g->kind);
    g->member = member, g->start = start, g->keep = keep, g->kind = kind;
    return 0;
}

cdb_status cdb_dupes_find(const cdb_dupes_item *it, size_t n, int dim,
                          const cdb_dupes_params *p, cdb_dupes_groups **out)
{
    if (!out || (!it && n))
        return cdb_seterr(CDB_INVALID, "cdb_dupes_find: NULL argument");
    *out = NULL;
    cdb_dupes_params def = cdb_dupes_params_default();
    if (!p)
        p = &def;
    if (p->phash_bits < 0 || p->phash_bits > 64 || p->pair_ms < 0 || p->burst_ms < 0 ||
        !(p->min_cosine >= -1.0f && p->min_cosine <= 1.0f))
        return cdb_seterr(CDB_INVALID, "cdb_dupes_find: parameters out of range");
    for (size_t i = 0; i < n; i++)
        if (it[i].vec && dim <= 0)
            return cdb_seterr(CDB_INVALID, "cdb_dupes_find: vectors with dim %d", dim);
    cdb_status rc = CDB_NOMEM;
    uf copies = {0}, pairs = {0}, bursts = {0};
    edge *edges = NULL;
    size_t n_edges = 0, m, *idx = malloc((n ? n : 1) * sizeof *idx);
    size_t *keeper = malloc((n ? n : 1) * sizeof *keeper);
    builder bd = {0};
    bd.g = cdb_malloc(sizeof *bd.g);
    if (bd.g)
        memset(bd.g, 0, sizeof *bd.g);
    if (!idx || !keeper || !bd.g || uf_init(&copies, it, n) || uf_init(&pairs, NULL, n) ||
        uf_init(&bursts, NULL, n))
        goto done;
    bd.g->start = cdb_malloc(sizeof *bd.g->start);
    if (!bd.g->start)
        goto done;
    bd.g->start[0] = 0;
    bd.cap_groups = 1;

    /* exact: equal content hashes */
    m = 0;
    for (size_t i = 0; i < n; i++)
        if (it[i].has_hash)
            idx[m++] = i;
    qsort_r(idx, m, sizeof *idx, by_hash, (void *)it);
    for (size_t k = 1; k < m; k++)
        if (!memcmp(it[idx[k]].hash, it[idx[k - 1]].hash, CDB_DUPES_HASH_BYTES))
            uf_union(&copies, idx[k - 1], idx[k]);
    /* near: closest first, never joining two distinct shots */
    if (near_edges(it, n, dim, p, &edges, &n_edges))
        goto done;
    for (size_t k = 0; k < n_edges; k++) {
        size_t a = uf_find(&copies, edges[k].a), b = uf_find(&copies, edges[k].b);
        if (a == b || !same_shot(&copies, a, b))
            continue;
        uf_union(&copies, a, b);
        copies.near[uf_find(&copies, a)] = 1;
    }
    if (add_components(&bd, &copies, it, NULL, n, -1))
        goto done;
    for (size_t i = 0; i < n; i++) /* each copy group's keep, by root */
        keeper[i] = SIZE_MAX;
    for (size_t g = 0; g < bd.g->n_groups; g++)
        keeper[uf_find(&copies, bd.g->keep[g])] = bd.g->keep[g];
    /* pair: one stem, a RAW and a non-RAW with capture times within pair_ms */
    m = 0;
    for (size_t i = 0; i < n; i++)
        if (known(it[i].stem) && it[i].has_taken)
            idx[m++] = i;
    qsort_r(idx, m, sizeof *idx, by_stem, (void *)it);
    for (size_t k = 0; k < m;) {
        size_t e = k + 1;
        while (e < m && strcmp(it[idx[e]].stem, it[idx[k]].stem) == 0)
            e++;
        for (size_t a = k; a < e; a++)
            for (size_t b = k; b < e; b++)
                if (it[idx[a]].format == CDB_DUPES_FMT_RAW &&
                    it[idx[b]].format != CDB_DUPES_FMT_RAW &&
                    abs64(it[idx[a]].taken_ms - it[idx[b]].taken_ms) <= p->pair_ms)
                    uf_union(&pairs, idx[a], idx[b]);
        k = e;
    }
    if (add_components(&bd, &pairs, it, idx, m, CDB_DUPES_PAIR))
        goto done;
    /* burst: one shot per copy group (its keep), one camera, each within burst_ms */
    m = 0;
    for (size_t i = 0; i < n; i++) {
        if (!known(it[i].camera) || !it[i].has_taken)
            continue;
        size_t k = keeper[uf_find(&copies, i)];
        if (k == SIZE_MAX || k == i)
            idx[m++] = i;
    }
    qsort_r(idx, m, sizeof *idx, by_camera_time, (void *)it);
    for (size_t k = 1; k < m; k++)
        if (strcmp(it[idx[k]].camera, it[idx[k - 1]].camera) == 0 &&
            it[idx[k]].taken_ms - it[idx[k - 1]].taken_ms <= p->burst_ms)
            uf_union(&bursts, idx[k - 1], idx[k]);
    if (add_components(&bd, &bursts, it, idx, m, CDB_DUPES_BURST) || order_groups(bd.g, n))
        goto done;
    rc = CDB_OK;
done:
    if (rc == CDB_OK) {
        *out = bd.g;
    } else {
        cdb_dupes_groups_free(bd.g);
        cdb_seterr(rc, "cdb_dupes_find: out of memory");
    }
    uf_free(&copies);
    uf_free(&pairs);
    uf_free(&bursts);
    free(edges);
    free(idx);
    free(keeper);
    return rc;
}
