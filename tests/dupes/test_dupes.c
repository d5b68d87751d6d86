/*
** test_dupes.c: cdb_dupes_find (dupes/dupes.h) against a brute-force oracle.
**
** Random libraries of pictures, each with copies (the same bytes, or a few bits of
** phash and a little of the vector away, with or without its metadata), look-alikes
** (a phash within the threshold but another vector, or the other way round), RAW+JPEG
** stems and bursts of one camera. The oracle groups by transitive closure over all
** pairs (O(n^2) per relation, written from dupes.h's definitions, not from the union
** -find), picks the keep by sorting on dupes.h's tie-break list, and the two answers
** are compared group by group. The generator never makes two distinct shots near one
** another, so the closure needs no shot check; hand cases cover the refusals.
**
** cdb_dupes_phash_pairs (the multi-index that finds the near phash pairs) against every
** two hashes compared: random hashes with planted pairs at exactly the distance asked
** for and one more, their flipped bits spread over the bands every way (all in one band,
** one past a band's radius in each), and crowded bands (many hashes sharing a key).
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdb_test.h"
#include "dupes/dupes.h"

#define DIM 16
#define MAXN 80

static unsigned long long rng = 1;
static unsigned rnd(unsigned n)
{
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (unsigned)((rng >> 33) % n);
}
static float frnd(void)
{
    return (float)rnd(1 << 20) / (float)(1 << 20) * 2.0f - 1.0f;
}

static void normalize(float *v)
{
    double s = 0;
    for (int k = 0; k < DIM; k++)
        s += (double)v[k] * v[k];
    for (int k = 0; k < DIM; k++)
        v[k] = (float)(v[k] / sqrt(s));
}

typedef struct lib {
    cdb_dupes_item it[MAXN];
    float vec[MAXN][DIM];
    char stem[MAXN][16];
    int n;
} lib;

static const char *const cameras[] = {"Canon EOS R5", "Nikon Z6"};

/* A random library with the structure the header above describes. */
static void make_lib(lib *L, const cdb_dupes_params *p)
{
    memset(L, 0, sizeof *L);
    int n_pic = 4 + (int)rnd(20);
    int64_t clock_ms = 1700000000000LL;
    for (int pic = 0; pic < n_pic && L->n < MAXN - 6; pic++) {
        cdb_dupes_item base = {0};
        float bv[DIM];
        for (int k = 0; k < DIM; k++)
            bv[k] = frnd();
        normalize(bv);
        base.id = 1000 + L->n;
        for (int k = 0; k < CDB_DUPES_HASH_BYTES; k++)
            base.hash[k] = (uint8_t)rnd(256);
        base.has_hash = 1;
        base.phash = ((uint64_t)rnd(1u << 31) << 33) ^ ((uint64_t)rnd(1u << 31) << 2) ^ rnd(4);
        base.has_phash = rnd(10) != 0;
        base.camera = rnd(3) ? cameras[rnd(2)] : NULL;
        clock_ms += rnd(3) ? 500 + rnd(3000) : 60000 + rnd(100000); /* bursts, or not */
        base.taken_ms = clock_ms;
        base.has_taken = rnd(5) != 0;
        base.width = 1000 + (int)rnd(3) * 500;
        base.height = 800;
        base.bytes = 100000 + rnd(1000);
        base.format = (cdb_dupes_format)rnd(3);
        int n_copies = rnd(2) ? 0 : 1 + (int)rnd(3);
        for (int c = 0; c <= n_copies && L->n < MAXN - 2; c++) {
            int i = L->n++;
            cdb_dupes_item *x = &L->it[i];
            *x = base;
            x->id = 1000 + i;
            memcpy(L->vec[i], bv, sizeof bv);
            if (c > 0 && rnd(3) != 0) { /* a near copy, not the same bytes */
                x->hash[0] ^= (uint8_t)(1 + c);
                int flips = (int)rnd((unsigned)p->phash_bits + 1);
                for (int f = 0; f < flips; f++)
                    x->phash ^= (uint64_t)1 << rnd(64);
                for (int k = 0; k < DIM; k++)
                    L->vec[i][k] += 0.05f * frnd();
                normalize(L->vec[i]);
                x->width = base.width / (1 + (int)rnd(2));
                x->format = (cdb_dupes_format)rnd(3);
                x->bytes = base.bytes - 1 - rnd(500);
                if (rnd(3) == 0)
                    x->has_taken = 0, x->camera = NULL; /* EXIF stripped */
            }
            x->vec = rnd(20) ? L->vec[i] : NULL;
            snprintf(L->stem[i], sizeof L->stem[i], "s%d", i);
            x->stem = L->stem[i];
        }
        if (rnd(4) == 0 && L->n < MAXN) { /* a look-alike: near phash, another vector */
            int i = L->n++;
            L->it[i] = base;
            L->it[i].id = 1000 + i;
            L->it[i].hash[1] ^= 0x5a;
            L->it[i].taken_ms += 1 + rnd(2);
            for (int k = 0; k < DIM; k++)
                L->vec[i][k] = frnd();
            normalize(L->vec[i]);
            L->it[i].vec = L->vec[i];
            snprintf(L->stem[i], sizeof L->stem[i], "s%d", i);
            L->it[i].stem = L->stem[i];
        }
        if (rnd(5) == 0 && L->n < MAXN) { /* its RAW (or JPEG) twin: same stem */
            int i = L->n++, src = i - 1;
            L->it[i] = L->it[src];
            L->it[i].id = 1000 + i;
            L->it[i].hash[2] ^= 0x77;
            L->it[i].phash = ~L->it[i].phash; /* not near: only the pair links them */
            L->it[i].format = L->it[src].format == CDB_DUPES_FMT_RAW ? CDB_DUPES_FMT_CAMERA
                                                                      : CDB_DUPES_FMT_RAW;
            L->it[i].taken_ms += rnd(2) ? 0 : (int64_t)rnd(3000);
            memcpy(L->vec[i], L->vec[src], sizeof L->vec[i]);
            L->it[i].vec = L->vec[i];
            L->it[i].stem = L->stem[src];
        }
    }
}

/* ---- the oracle ----------------------------------------------------------------- */

typedef int (*relation)(const lib *L, int a, int b, const cdb_dupes_params *p);

/* Item a's phash has more than CDB_DUPES_CROWD others (with a phash and a vector)
** within phash_bits: it is in no near pair. */
static int crowded(const lib *L, int a, const cdb_dupes_params *p)
{
    int deg = 0;
    for (int b = 0; b < L->n; b++)
        deg += b != a && L->it[b].has_phash && L->it[b].vec &&
               __builtin_popcountll(L->it[a].phash ^ L->it[b].phash) <= p->phash_bits;
    return deg > CDB_DUPES_CROWD;
}

static int rel_copy(const lib *L, int a, int b, const cdb_dupes_params *p)
{
    const cdb_dupes_item *x = &L->it[a], *y = &L->it[b];
    if (x->has_hash && y->has_hash && !memcmp(x->hash, y->hash, CDB_DUPES_HASH_BYTES))
        return 1;
    if (!x->has_phash || !y->has_phash || !x->vec || !y->vec || crowded(L, a, p) ||
        crowded(L, b, p))
        return 0;
    double c = 0;
    for (int k = 0; k < DIM; k++)
        c += (double)x->vec[k] * y->vec[k];
    return __builtin_popcountll(x->phash ^ y->phash) <= p->phash_bits &&
           (float)c >= p->min_cosine;
}

static int rel_pair(const lib *L, int a, int b, const cdb_dupes_params *p)
{
    const cdb_dupes_item *x = &L->it[a], *y = &L->it[b];
    if (!x->stem || !y->stem || strcmp(x->stem, y->stem) || !x->has_taken || !y->has_taken)
        return 0;
    if ((x->format == CDB_DUPES_FMT_RAW) == (y->format == CDB_DUPES_FMT_RAW))
        return 0;
    return llabs(x->taken_ms - y->taken_ms) <= p->pair_ms;
}

static int rel_burst(const lib *L, int a, int b, const cdb_dupes_params *p)
{
    const cdb_dupes_item *x = &L->it[a], *y = &L->it[b];
    return x->camera && y->camera && !strcmp(x->camera, y->camera) && x->has_taken &&
           y->has_taken && llabs(x->taken_ms - y->taken_ms) <= p->burst_ms;
}

/* comp[i]: the smallest index of i's component under rel, among in[] (others -1). */
static void closure(const lib *L, relation rel, const int *in, const cdb_dupes_params *p,
                    int *comp)
{
    for (int i = 0; i < L->n; i++)
        comp[i] = in[i] ? i : -1;
    for (int changed = 1; changed;) {
        changed = 0;
        for (int a = 0; a < L->n; a++)
            for (int b = 0; b < L->n; b++)
                if (a != b && in[a] && in[b] && comp[b] < comp[a] && rel(L, a, b, p)) {
                    comp[a] = comp[b];
                    changed = 1;
                }
    }
}

/* The keep among members of component c: dupes.h's list, as a sort key. */
static int oracle_keep(const lib *L, const int *comp, int c)
{
    int best = -1;
    for (int i = 0; i < L->n; i++) {
        if (comp[i] != c)
            continue;
        const cdb_dupes_item *x = &L->it[i];
        if (best < 0) {
            best = i;
            continue;
        }
        const cdb_dupes_item *y = &L->it[best];
        long long kx[5] = {-(long long)x->width * x->height, x->format, -x->has_taken,
                           -x->bytes, x->id};
        long long ky[5] = {-(long long)y->width * y->height, y->format, -y->has_taken,
                           -y->bytes, y->id};
        for (int k = 0; k < 5; k++)
            if (kx[k] != ky[k]) {
                if (kx[k] < ky[k])
                    best = i;
                break;
            }
    }
    return best;
}

/* Expected groups as text lines "kind keep: m1 m2 ...", in dupes.h's order. */
static void oracle(const lib *L, const cdb_dupes_params *p, char *out, size_t cap)
{
    int all[MAXN], copy[MAXN], pair[MAXN], burst[MAXN], shot[MAXN], size[MAXN];
    size_t k = 0;
    out[0] = '\0';
    for (int i = 0; i < L->n; i++)
        all[i] = 1;
    closure(L, rel_copy, all, p, copy);
    for (int i = 0; i < L->n; i++) /* one shot per copy group: its keep */
        shot[i] = L->it[i].camera && L->it[i].has_taken && oracle_keep(L, copy, copy[i]) == i;
    closure(L, rel_pair, all, p, pair);
    closure(L, rel_burst, shot, p, burst);
    int *comps[4] = {copy, copy, pair, burst};
    for (int kind = 0; kind < 4; kind++) {
        int *comp = comps[kind];
        memset(size, 0, sizeof size);
        for (int i = 0; i < L->n; i++)
            if (comp[i] >= 0)
                size[comp[i]]++;
        for (int c = 0; c < L->n; c++) {
            if (size[c] < 2)
                continue;
            if (kind <= CDB_DUPES_NEAR) {
                int exact = 1;
                for (int i = 0; i < L->n; i++)
                    if (comp[i] == c && (!L->it[i].has_hash || !L->it[c].has_hash ||
                                         memcmp(L->it[i].hash, L->it[c].hash, 16)))
                        exact = 0;
                if (exact != (kind == CDB_DUPES_EXACT))
                    continue;
            }
            k += (size_t)snprintf(out + k, cap - k, "%s %d:", cdb_dupes_kind_name(kind),
                                  oracle_keep(L, comp, c));
            for (int i = 0; i < L->n; i++)
                if (comp[i] == c)
                    k += (size_t)snprintf(out + k, cap - k, " %d", i);
            k += (size_t)snprintf(out + k, cap - k, "\n");
        }
    }
}

static void format_groups(const cdb_dupes_groups *g, char *out, size_t cap)
{
    size_t k = 0;
    out[0] = '\0';
    for (size_t i = 0; i < g->n_groups; i++) {
        k += (size_t)snprintf(out + k, cap - k, "%s %zu:", cdb_dupes_kind_name(g->kind[i]),
                              g->keep[i]);
        for (size_t m = g->start[i]; m < g->start[i + 1]; m++)
            k += (size_t)snprintf(out + k, cap - k, " %zu", g->member[m]);
        k += (size_t)snprintf(out + k, cap - k, "\n");
    }
}

CDB_TEST(dupes_match_brute_force)
{
    static lib L;
    static char want[16384], got[16384];
    cdb_dupes_params p = cdb_dupes_params_default();
    int groups[4] = {0};
    for (int trial = 0; trial < 400; trial++) {
        rng = 1000 + (unsigned)trial;
        make_lib(&L, &p);
        cdb_dupes_groups *g = NULL;
        CHECK_OK(cdb_dupes_find(L.it, (size_t)L.n, DIM, &p, &g));
        format_groups(g, got, sizeof got);
        for (size_t i = 0; i < g->n_groups; i++)
            groups[g->kind[i]]++;
        cdb_dupes_groups_free(g);
        oracle(&L, &p, want, sizeof want);
        if (strcmp(want, got) != 0) {
            fprintf(stderr, "    trial %d (%d items):\n--- oracle\n%s--- clipdb\n%s", trial,
                    L.n, want, got);
            CHECK(0);
        }
    }
    printf("    groups: %d exact, %d near, %d pair, %d burst\n", groups[0], groups[1],
           groups[2], groups[3]);
    for (int k = 0; k < 4; k++) /* every kind exercised */
        CHECK(groups[k] > 20);
}

/* An item with the given phash, vector, camera and time (ms; < 0: none). */
static cdb_dupes_item item(int64_t id, uint64_t ph, const float *v, const char *cam,
                           int64_t t)
{
    cdb_dupes_item x = {0};
    x.id = id;
    x.hash[0] = (uint8_t)id;
    x.has_hash = 1;
    x.phash = ph;
    x.has_phash = 1;
    x.vec = v;
    x.camera = cam;
    x.taken_ms = t < 0 ? 0 : t;
    x.has_taken = t >= 0;
    x.width = 100, x.height = 100;
    x.format = CDB_DUPES_FMT_CAMERA;
    return x;
}

CDB_TEST(dupes_burst_is_never_near)
{
    /* two burst frames that look alike (same phash, same vector), one second apart,
    ** and a copy of the first with its EXIF stripped, one bit closer to the first */
    float v[DIM] = {1};
    cdb_dupes_item it[3] = {item(1, 0xF0F0, v, "Canon", 5000), item(2, 0xF0F1, v, "Canon", 6000),
                            item(3, 0xF0F0 ^ 0x100, v, NULL, -1)};
    it[2].width = 50; /* a smaller copy */
    cdb_dupes_groups *g = NULL;
    CHECK_OK(cdb_dupes_find(it, 3, DIM, NULL, &g));
    static char got[512];
    format_groups(g, got, sizeof got);
    cdb_dupes_groups_free(g);
    /* the copy joins the frame it is closest to; the frames stay apart, a burst */
    CHECK_EQ_STR(got, "near 0: 0 2\nburst 0: 0 1\n");
    /* different cameras at the same time: not one picture either */
    cdb_dupes_item two[2] = {item(1, 7, v, "Canon", 5000), item(2, 7, v, "Nikon", 5000)};
    CHECK_OK(cdb_dupes_find(two, 2, DIM, NULL, &g));
    CHECK_EQ_INT((int)g->n_groups, 0);
    cdb_dupes_groups_free(g);
}

CDB_TEST(dupes_edges)
{
    cdb_dupes_groups *g = NULL;
    CHECK_OK(cdb_dupes_find(NULL, 0, 0, NULL, &g));
    CHECK_EQ_INT((int)g->n_groups, 0);
    CHECK_EQ_INT((int)g->start[0], 0);
    cdb_dupes_groups_free(g);
    cdb_dupes_groups_free(NULL);
    float v[DIM] = {1};
    cdb_dupes_item it[1] = {item(1, 0, v, NULL, -1)};
    CHECK_RC(cdb_dupes_find(it, 1, 0, NULL, &g), CDB_INVALID);
    cdb_dupes_params p = cdb_dupes_params_default();
    p.phash_bits = 65;
    CHECK_RC(cdb_dupes_find(it, 1, DIM, &p, &g), CDB_INVALID);
    CHECK_EQ_INT(cdb_dupes_kind_parse("burst"), CDB_DUPES_BURST);
    CHECK_EQ_INT(cdb_dupes_kind_parse("copies"), -1);
    CHECK_EQ_STR(cdb_dupes_kind_name(CDB_DUPES_PAIR), "pair");
}

/* ---- the phash pairs --------------------------------------------------------------- */

static uint64_t rnd64(void)
{
    return ((uint64_t)rnd(1u << 31) << 33) ^ ((uint64_t)rnd(1u << 31) << 2) ^ rnd(4);
}

/* h with exactly d bits flipped, per[b] of them in band b (16-bit bands, sum d). */
static uint64_t flip(uint64_t h, const int *per)
{
    for (int b = 0; b < 4; b++) {
        uint64_t done = 0;
        for (int k = 0; k < per[b];) {
            uint64_t bit = 1ULL << (16 * b + (int)rnd(16));
            if (!(done & bit)) {
                done |= bit;
                h ^= bit;
                k++;
            }
        }
    }
    return h;
}

/* d flips spread over the bands: at random, all in one band, or in turn. */
static void spread(int d, int *per)
{
    int how = (int)rnd(3), b = (int)rnd(4);
    memset(per, 0, 4 * sizeof *per);
    for (int k = 0; k < d; k++) {
        if (how == 0)
            do
                b = (int)rnd(4);
            while (per[b] == 16);
        else if (how == 2 || per[b] == 16)
            b = (b + 1) % 4;
        while (per[b] == 16)
            b = (b + 1) % 4;
        per[b]++;
    }
}

static int pair_cmp(const void *x, const void *y)
{
    const cdb_dupes_pair *a = x, *b = y;
    if (a->a != b->a)
        return a->a < b->a ? -1 : 1;
    return (a->b > b->b) - (a->b < b->b);
}

/* deg[i]: how many of h[0..n) other than i are within d bits of h[i] (every two). */
static void crowd_degrees(const uint64_t *h, int n, int d, int *deg)
{
    for (int i = 0; i < n; i++) {
        deg[i] = 0;
        for (int j = 0; j < n; j++)
            deg[i] += j != i && __builtin_popcountll(h[i] ^ h[j]) <= d;
    }
}

CDB_TEST(phash_pairs_match_all_pairs)
{
    static uint64_t h[4000];
    static int deg[4000];
    int crowds = 0;
    static const int bits[] = {0, 1, 2, 3, 4, 5, 7, 8, 11, 12, 13, 16, 24, 64};
    int planted_at_d = 0;
    for (int t = 0; t < 28; t++) {
        int d = bits[t % 14], n = t < 14 ? 4000 : 1 + (int)rnd(1500), per[4];
        for (int i = 0; i < n; i++) {
            int r = (int)rnd(10);
            if (i > 0 && r < 4) { /* a near copy of an earlier one, at d or d + 1 */
                spread(d + (r & 1) > 64 ? 64 : d + (r & 1), per);
                h[i] = flip(h[rnd((unsigned)i)], per);
                planted_at_d += !(r & 1);
            } else if (i > 0 && r == 4) { /* crowds: the same low band as another */
                h[i] = (rnd64() & ~0xffffULL) | (h[rnd((unsigned)i)] & 0xffffULL);
            } else {
                h[i] = rnd64();
            }
        }
        cdb_dupes_pair *got = NULL, *want = NULL;
        size_t n_got = 0, n_want = 0;
        CHECK_OK(cdb_dupes_phash_pairs(h, (size_t)n, d, &got, &n_got));
        want = malloc(((size_t)n * (size_t)(n - 1) / 2 + 1) * sizeof *want);
        CHECK(want != NULL);
        crowd_degrees(h, n, d, deg);
        for (int i = 0; i < n; i++)
            for (int j = i + 1; j < n; j++) {
                int x = __builtin_popcountll(h[i] ^ h[j]);
                if (x <= d && deg[i] <= CDB_DUPES_CROWD && deg[j] <= CDB_DUPES_CROWD)
                    want[n_want++] = (cdb_dupes_pair){(size_t)i, (size_t)j, x};
            }
        static unsigned char crowded[4000];
        CHECK_OK(cdb_dupes_phash_crowded(h, (size_t)n, d, crowded));
        for (int i = 0; i < n; i++) {
            crowds += deg[i] > CDB_DUPES_CROWD;
            CHECK_MSG(crowded[i] == (deg[i] > CDB_DUPES_CROWD), "max_bits %d: hash %d has %d "
                      "neighbours, crowded says %d", d, i, deg[i], crowded[i]);
        }
        if (n_got)
            qsort(got, n_got, sizeof *got, pair_cmp);
        CHECK_MSG(n_got == n_want, "max_bits %d, n %d: %zu pairs, want %zu", d, n, n_got,
                  n_want);
        for (size_t k = 0; k < n_got && k < n_want; k++) {
            CHECK_MSG(got[k].a == want[k].a && got[k].b == want[k].b &&
                          got[k].bits == want[k].bits,
                      "max_bits %d: pair %zu is (%zu, %zu, %d), want (%zu, %zu, %d)", d, k,
                      got[k].a, got[k].b, got[k].bits, want[k].a, want[k].b, want[k].bits);
            if (got[k].a != want[k].a || got[k].b != want[k].b)
                break;
        }
        cdb_free(got);
        free(want);
    }
    CHECK(planted_at_d > 1000);
    CHECK(crowds > 1000); /* the wide radii crowd every hash, the narrow ones none */
    cdb_dupes_pair *p = NULL;
    size_t np = 9;
    CHECK_OK(cdb_dupes_phash_pairs(NULL, 0, 12, &p, &np));
    CHECK(p == NULL && np == 0);
    CHECK_RC(cdb_dupes_phash_pairs(h, 2, 65, &p, &np), CDB_INVALID);
    CHECK_RC(cdb_dupes_phash_pairs(h, 2, -1, &p, &np), CDB_INVALID);
}

/* A library whose hashes all lie within a few bits of one another (blank or uniform
** images; here the hashes 0..N-1, all within 16 bits) has N^2 / 2 pairs in reach: the
** answer must stay within the crowd rule's n * CDB_DUPES_CROWD / 2, the few uncrowded
** pairs planted far from the crowd must still be found, and a hash before the crowd
** that is near a crowded one (3 bits from the hash 0) must pair with nothing at 3 bits. */
CDB_TEST(phash_pairs_crowd_is_bounded)
{
    enum { EDGE = 4, N = 60000, FAR = 10, ALL = EDGE + N + 2 * FAR };
    uint64_t *h = malloc(ALL * sizeof *h);
    CHECK(h != NULL);
    for (size_t e = 0; e < EDGE; e++) /* 3 bits from 0, 6 from one another */
        h[e] = 7ULL << (20 + 3 * e);
    for (size_t i = 0; i < N; i++)
        h[EDGE + i] = i;
    for (size_t k = 0; k < FAR; k++) { /* ten random pairs (far from all else), 3 bits apart */
        h[EDGE + N + 2 * k] = rnd64() | 0xF000000000000000ULL;
        h[EDGE + N + 2 * k + 1] = h[EDGE + N + 2 * k] ^ 0x8000000000000003ULL;
    }
    for (int d = 3; d <= 12; d += 9) {
        cdb_dupes_pair *p = NULL;
        size_t np = 0, far = 0, crowd = 0;
        CHECK_OK(cdb_dupes_phash_pairs(h, ALL, d, &p, &np));
        CHECK_MSG(np <= (size_t)ALL * CDB_DUPES_CROWD / 2, "d %d: %zu pairs", d, np);
        for (size_t k = 0; k < np; k++) {
            CHECK(__builtin_popcountll(h[p[k].a] ^ h[p[k].b]) == p[k].bits && p[k].bits <= d);
            far += p[k].a >= EDGE + N;
            crowd += p[k].a < EDGE + N || p[k].b < EDGE + N;
        }
        CHECK_MSG(far == FAR, "d %d: %zu of the far pairs", d, far);
        if (d == 3) /* every hash of 0..N-1 has > 64 others within 3 bits */
            CHECK_MSG(crowd == 0, "d 3: %zu pairs with the crowd or its edge", crowd);
        cdb_free(p);
    }
    free(h);
}

CDB_TEST_MAIN(dupes_match_brute_force, dupes_burst_is_never_near, dupes_edges,
              phash_pairs_match_all_pairs, phash_pairs_crowd_is_bounded)
