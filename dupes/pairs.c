/*
** pairs.c: the pairs of perceptual hashes within a Hamming distance without comparing
** every two (dupes.h, cdb_dupes_phash_pairs): multi-index hashing (Norouzi, Punjani and
** Fleet, CVPR 2012). The 64 bits are four 16-bit bands. If two hashes differ in d <=
** max_bits bits and radii r_0..r_3 have sum(r_i + 1) >= max_bits + 1, some band i
** differs in at most r_i bits (else d >= sum(r_i + 1)): the pigeonhole principle. So each
** hash looks up, in each band's table (hashes by their 16-bit key), every key within r_i
** of its own, and a pair met in band i is kept only there: when no band before i is
** within its radius too (each pair once, with no set of seen pairs).
** Crowded hashes (dupes.h, CDB_DUPES_CROWD) are left out: each hash counts its own
** neighbours (before and after it) and stops at the first one past the bound, so a
** crowd costs O(n * CDB_DUPES_CROWD) pairs met, not O(n^2), and the pairs kept are
** those of uncrowded hashes (at most CDB_DUPES_CROWD each).
*/
#include <stdlib.h>
#include <string.h>

#include "dupes/dupes.h"

#define BANDS 4
#define KEYS 65536

static unsigned band_key(uint64_t h, int b)
{
    return (unsigned)(h >> (16 * b)) & 0xffffu;
}

/* Every 16-bit mask ordered by popcount; n_within[r]: how many have popcount <= r. */
typedef struct masks {
    uint16_t m[KEYS];
    size_t n_within[17];
} masks;

static void masks_init(masks *ms)
{
    size_t count[17] = {0}, at[17];
    for (unsigned x = 0; x < KEYS; x++)
        count[__builtin_popcount(x)]++;
    at[0] = 0;
    for (int r = 1; r <= 16; r++)
        at[r] = at[r - 1] + count[r - 1];
    for (int r = 0; r <= 16; r++)
        ms->n_within[r] = at[r] + count[r];
    for (unsigned x = 0; x < KEYS; x++)
        ms->m[at[__builtin_popcount(x)]++] = (uint16_t)x;
}

/* How many 16-bit masks have popcount <= r (masks.n_within[r]): sum of C(16, i), i <= r. */
static size_t masks_within(int r)
{
    size_t sum = 0, c = 1;
    for (int i = 0; i <= r; i++) {
        sum += c;
        c = c * (size_t)(16 - i) / (size_t)(i + 1);
    }
    return sum;
}

/* One band's table: the hashes with key k are order[start[k] .. start[k + 1]), ascending. */
typedef struct band {
    uint32_t *start; /* KEYS + 1 */
    uint32_t *order; /* n */
} band;

static int band_build(band *t, const uint64_t *h, size_t n, int b)
{
    t->start = calloc(KEYS + 1, sizeof *t->start);
    t->order = malloc((n ? n : 1) * sizeof *t->order);
    if (!t->start || !t->order)
        return -1;
    for (size_t i = 0; i < n; i++)
        t->start[band_key(h[i], b) + 1]++;
    for (size_t k = 0; k < KEYS; k++)
        t->start[k + 1] += t->start[k];
    uint32_t *fill = malloc(KEYS * sizeof *fill);
    if (!fill)
        return -1;
    memcpy(fill, t->start, KEYS * sizeof *fill);
    for (size_t i = 0; i < n; i++) /* a counting sort: ascending indices in each key */
        t->order[fill[band_key(h[i], b)]++] = (uint32_t)i;
    free(fill);
    return 0;
}

/* The answer being built, and deg[i]: hash i's neighbours within max_bits, counted up to
** CDB_DUPES_CROWD + 1 (crowded). */
typedef struct pairs {
    cdb_dupes_pair *p;
    size_t n, cap;
    uint8_t *deg;
    int count_only; /* cdb_dupes_phash_crowded: no pairs kept */
} pairs;

static int push(pairs *ps, size_t a, size_t b, int bits)
{
    if (ps->n == ps->cap) {
        size_t cap = ps->cap ? ps->cap * 2 : 256;
        cdb_dupes_pair *m = cdb_realloc(ps->p, cap * sizeof *m);
        if (!m)
            return -1;
        ps->p = m;
        ps->cap = cap;
    }
    ps->p[ps->n++] = (cdb_dupes_pair){a, b, bits};
    return 0;
}

/* Hash i's neighbour j within max_bits (any j != i, each once): counted, and kept when j
** is after i. 1 once i is crowded (its scan stops: its pairs are dropped), 0 to go on,
** -1 out of memory. */
static int meet(pairs *ps, size_t i, size_t j, int bits)
{
    if (++ps->deg[i] > CDB_DUPES_CROWD)
        return 1;
    return j > i && !ps->count_only && push(ps, i, j, bits) ? -1 : 0;
}

/* Every two compared: the answer when the balls would cost more than that. */
static int all_pairs(const uint64_t *h, size_t n, int max_bits, pairs *ps)
{
    for (size_t i = 0; i < n; i++) {
        size_t mark = ps->n;
        for (size_t j = 0; j < n; j++) {
            int bits = __builtin_popcountll(h[i] ^ h[j]), rc;
            if (j == i || bits > max_bits || (rc = meet(ps, i, j, bits)) == 0)
                continue;
            if (rc < 0)
                return -1;
            ps->n = mark; /* crowded */
            break;
        }
    }
    return 0;
}

/* 1 when band b is the first of the bands whose radius x's band is within. */
static int first_band(uint64_t x, int b, const int *radius)
{
    for (int e = 0; e < b; e++)
        if (radius[e] >= 0 && __builtin_popcount(band_key(x, e)) <= radius[e])
            return 0;
    return 1;
}

/* Hash i's neighbours through the band tables t (built for the bands with radius >= 0),
** each met once (in the first band within its radius). meet's answer. */
static int scan_one(const uint64_t *h, size_t i, int max_bits, const int *radius,
                    const masks *ms, const band *t, pairs *ps)
{
    for (int b = 0; b < BANDS; b++) {
        if (radius[b] < 0)
            continue;
        unsigned key = band_key(h[i], b);
        for (size_t m = 0; m < ms->n_within[radius[b]]; m++) {
            unsigned k = key ^ ms->m[m];
            for (uint32_t s = t[b].start[k]; s < t[b].start[k + 1]; s++) {
                size_t j = t[b].order[s];
                uint64_t x = h[i] ^ h[j];
                int bits = __builtin_popcountll(x), rc;
                if (j != i && bits <= max_bits && first_band(x, b, radius) &&
                    (rc = meet(ps, i, j, bits)) != 0)
                    return rc;
            }
        }
    }
    return 0;
}

static int indexed_pairs(const uint64_t *h, size_t n, int max_bits, const int *radius,
                         const masks *ms, const band *t, pairs *ps)
{
    for (size_t i = 0; i < n; i++) {
        size_t mark = ps->n;
        int rc = scan_one(h, i, max_bits, radius, ms, t, ps);
        if (rc < 0)
            return -1;
        if (rc > 0)
            ps->n = mark; /* crowded */
    }
    return 0;
}

/* Drops, in place, the pairs whose later hash turned out crowded (an uncrowded hash's
** scan ran whole, so its pairs with uncrowded later hashes are all there). */
static void drop_crowded(pairs *ps)
{
    size_t w = 0;
    for (size_t k = 0; k < ps->n; k++)
        if (ps->deg[ps->p[k].b] <= CDB_DUPES_CROWD)
            ps->p[w++] = ps->p[k];
    ps->n = w;
}

/* The enumeration behind both entry points: ps->deg (n bytes) filled, and unless
** ps->count_only the pairs of uncrowded hashes in ps->p. 0, or -1 out of memory. */
static int run(const uint64_t *h, size_t n, int max_bits, pairs *ps)
{
    /* radii with sum(r + 1) = max_bits + 1, spread evenly (-1: the band is not looked in) */
    int radius[BANDS], rc = 0;
    size_t lookups = 0;
    for (int b = 0; b < BANDS; b++) {
        radius[b] = (max_bits + 1) / BANDS + (b < (max_bits + 1) % BANDS) - 1;
        if (radius[b] > 16)
            radius[b] = 16;
    }
    masks *ms = NULL;
    band t[BANDS];
    memset(t, 0, sizeof t);
    for (int b = 0; b < BANDS; b++)
        lookups += radius[b] >= 0 ? masks_within(radius[b]) : 0;
    int indexed = lookups + n / KEYS * lookups < n;
    /* the 65,536 masks only for the index: a few hashes (a search's copies) are compared */
    if (indexed && !(ms = malloc(sizeof *ms)))
        return -1;
    if (indexed)
        masks_init(ms);
    for (int b = 0; b < BANDS && rc == 0 && indexed; b++)
        if (radius[b] >= 0)
            rc = band_build(&t[b], h, n, b);
    if (rc == 0)
        rc = indexed ? indexed_pairs(h, n, max_bits, radius, ms, t, ps)
                     : all_pairs(h, n, max_bits, ps);
    for (int b = 0; b < BANDS; b++) {
        free(t[b].start);
        free(t[b].order);
    }
    free(ms);
    return rc;
}

cdb_status cdb_dupes_phash_pairs(const uint64_t *h, size_t n, int max_bits,
                                 cdb_dupes_pair **out, size_t *n_out)
{
    if (!out || !n_out || (!h && n) || max_bits < 0 || max_bits > 64 || n > UINT32_MAX)
        return cdb_seterr(CDB_INVALID, "cdb_dupes_phash_pairs: bad argument");
    *out = NULL;
    *n_out = 0;
    pairs ps = {0};
    int rc = (ps.deg = calloc(n ? n : 1, 1)) ? run(h, n, max_bits, &ps) : -1;
    if (rc == 0)
        drop_crowded(&ps);
    free(ps.deg);
    if (rc) {
        cdb_free(ps.p);
        return cdb_seterr(CDB_NOMEM, "cdb_dupes_phash_pairs: out of memory");
    }
    *out = ps.p;
    *n_out = ps.n;
    return CDB_OK;
}

cdb_status cdb_dupes_phash_crowded(const uint64_t *h, size_t n, int max_bits,
                                   unsigned char *crowded)
{
    if ((n && (!h || !crowded)) || max_bits < 0 || max_bits > 64 || n > UINT32_MAX)
        return cdb_seterr(CDB_INVALID, "cdb_dupes_phash_crowded: bad argument");
    pairs ps = {.count_only = 1};
    int rc = (ps.deg = calloc(n ? n : 1, 1)) ? run(h, n, max_bits, &ps) : -1;
    for (size_t i = 0; rc == 0 && i < n; i++)
        crowded[i] = ps.deg[i] > CDB_DUPES_CROWD;
    free(ps.deg);
    return rc ? cdb_seterr(CDB_NOMEM, "cdb_dupes_phash_crowded: out of memory") : CDB_OK;
}
