/*
** bench_phash_pairs.c: the near-copy pairs of a library's perceptual hashes, found by
** comparing every two (what collapse.c and dupes.c did before, n^2/2 popcounts) and by
** cdb_dupes_phash_pairs' multi-index, in the same run, and the copy groups
** (cdb_dupes_find) built on the index.
**
**   bench_phash_pairs [N]     N photos (default 100000)
**
** The library: N photos, a fifth of them near copies of another (1 to 10 bits away, a
** vector close to its original's), the rest random 64-bit hashes and vectors (a real
** library's hashes are less spread: more of them share a band, and the index looks at
** more of them). Prints both times, the ratio, and checks that both found the same pairs.
** Then a crowd (the hashes 0..65535 over and over): its time and the pairs kept, which
** the crowd rule (dupes.h, CDB_DUPES_CROWD) keeps from growing with n^2.
*/
#include <math.h>
#include <stdint.h>

#include "bench_util.h"
#include "dupes/dupes.h"

#define DIM 32

static uint64_t g_rng = 28;
static uint64_t rnd64(void) {
    g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
    return g_rng;
}

int main(int argc, char **argv) {
    size_t n = argc > 1 ? (size_t)strtoull(argv[1], NULL, 10) : 100000;
    uint64_t *h = malloc(n * sizeof *h);
    float *vec = malloc(n * DIM * sizeof *vec);
    cdb_dupes_item *it = calloc(n, sizeof *it);
    if (!h || !vec || !it || n < 2) return 1;
    for (size_t i = 0; i < n; i++) {
        size_t of = i > 0 && rnd64() % 5 == 0 ? rnd64() % i : i;
        double s = 0;
        h[i] = rnd64();
        if (of != i) { /* a near copy of photo `of` */
            int bits = 1 + (int)(rnd64() % 10);
            h[i] = h[of];
            for (int k = 0; k < bits; k++) h[i] ^= 1ULL << (rnd64() % 64);
        }
        for (int k = 0; k < DIM; k++) {
            float base = of != i ? vec[of * DIM + k] : (float)(rnd64() % 2001) / 1000.0f - 1;
            vec[i * DIM + k] = base + (of != i ? (float)(rnd64() % 101) / 5000.0f : 0);
            s += (double)vec[i * DIM + k] * vec[i * DIM + k];
        }
        for (int k = 0; k < DIM; k++) vec[i * DIM + k] = (float)(vec[i * DIM + k] / sqrt(s));
        it[i].id = (int64_t)i + 1;
        it[i].phash = h[i];
        it[i].has_phash = 1;
        it[i].vec = vec + i * DIM;
        it[i].hash[0] = (uint8_t)i, it[i].hash[1] = (uint8_t)(i >> 8);
        it[i].hash[2] = (uint8_t)(i >> 16), it[i].hash[3] = (uint8_t)(i >> 24);
        it[i].has_hash = 1;
    }
    int bits = cdb_dupes_params_default().phash_bits;
    double t0 = now_s();
    size_t n_all = 0;
    for (size_t i = 0; i < n; i++) /* the comparison of every two, as it was */
        for (size_t j = i + 1; j < n; j++) n_all += __builtin_popcountll(h[i] ^ h[j]) <= bits;
    double t_all = now_s() - t0;
    cdb_dupes_pair *pairs = NULL;
    size_t n_ix = 0;
    t0 = now_s();
    if (cdb_dupes_phash_pairs(h, n, bits, &pairs, &n_ix) != CDB_OK) return 1;
    double t_ix = now_s() - t0;
    cdb_dupes_groups *g = NULL;
    t0 = now_s();
    if (cdb_dupes_find(it, n, DIM, NULL, &g) != CDB_OK) return 1;
    double t_groups = now_s() - t0;
    printf("photos %zu, phash pairs within %d bits: %zu (every two) %zu (index)%s\n", n, bits,
           n_all, n_ix, n_all == n_ix ? "" : "  MISMATCH");
    printf("every two compared:   %8.3f s\n", t_all);
    printf("multi-index:          %8.3f s   ratio %.1fx\n", t_ix, t_all / (t_ix > 0 ? t_ix : 1e-9));
    printf("groups (dupes_find, on the index): %.3f s, %zu groups\n", t_groups, g->n_groups);
    cdb_dupes_groups_free(g);
    cdb_free(pairs);
    /* a crowd: every hash within 16 bits of every other (blank or uniform images) */
    for (size_t i = 0; i < n; i++) h[i] = i & 0xffff;
    t0 = now_s();
    if (cdb_dupes_phash_pairs(h, n, bits, &pairs, &n_ix) != CDB_OK) return 1;
    printf("a crowd of %zu hashes within 16 bits: %.3f s, %zu pairs kept (n^2/2 = %.3g in "
           "reach; CDB_DUPES_CROWD %d)\n", n, now_s() - t0, n_ix, (double)n * (double)n / 2,
           CDB_DUPES_CROWD);
    cdb_free(pairs);
    free(h);
    free(vec);
    free(it);
    return n_all == n_ix ? 0 : 1;
}
