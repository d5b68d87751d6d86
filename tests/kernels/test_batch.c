/*
** test_batch.c: the host-side batch planning of kernels/batch.c, with the device's
** memory figures and its out-of-memory failures injected (no GPU needed):
**  - cdb_k_batch_from_free against a brute-force search (the largest batch whose
**    bytes fit after the reserve), on random and edge inputs;
**  - cdb_k_run_batched over a fake device that fails with CDB_NOMEM above a capacity:
**    every item done exactly once and in order, no successful batch above the
**    capacity, the batch size left at the first halving that fits; other errors and a
**    single item out of memory stop the run with the items done before it.
*/
#include <stdlib.h>
#include <string.h>

#include "cdb_test.h"
#include "kernels/kernels.h"

static uint64_t g_rng = 0x2545F4914F6CDD1Dull;
static uint64_t rnd(void) { return cdb_test_xorshift(&g_rng); }

/* The oracle: the largest b in [1, max] with fixed + b * per <= free - free / 8, else 1. */
static int brute_batch(size_t fr, size_t fixed, size_t per, int max) {
    size_t usable = fr - fr / 8;
    int best = 1;
    if (max < 1) max = 1;
    if (per == 0) return max;
    for (int b = 1; b <= max; b++)
        if (fixed <= usable && (size_t)b * per <= usable - fixed) best = b;
    return best;
}

CDB_TEST(batch_from_free_is_the_largest_that_fits) {
    const size_t GiB = (size_t)1 << 30;
    /* an H200's 139 GiB free, 12 MB per ViT-B/32 image, 1 GiB fixed: capped */
    CHECK_EQ_INT(cdb_k_batch_from_free(139 * GiB, GiB, 12u << 20, 1024), 1024);
    CHECK_EQ_INT(cdb_k_batch_from_free(8 * GiB, GiB, 12u << 20, 4096),
                 brute_batch(8 * GiB, GiB, 12u << 20, 4096));
    CHECK_EQ_INT(cdb_k_batch_from_free(0, 0, 100, 256), 1);         /* nothing free */
    CHECK_EQ_INT(cdb_k_batch_from_free(1000, 5000, 1, 256), 1);     /* fixed > free */
    CHECK_EQ_INT(cdb_k_batch_from_free(1000, 0, 0, 77), 77);        /* no per-item cost */
    CHECK_EQ_INT(cdb_k_batch_from_free(1 << 20, 0, 1, 0), 1);       /* max < 1 */
    CHECK_EQ_INT(cdb_k_batch_from_free(800, 0, 100, 256), 7);       /* 800 - 100 = 700 */
    for (int t = 0; t < 20000; t++) {
        size_t fr = (size_t)(rnd() % 5000), fixed = (size_t)(rnd() % 3000);
        size_t per = (size_t)(rnd() % 300);
        int max = (int)(rnd() % 70) - 2;
        CHECK_EQ_INT(cdb_k_batch_from_free(fr, fixed, per, max), brute_batch(fr, fixed, per, max));
    }
}

/* A fake device: batches of more than cap items fail with CDB_NOMEM (after writing
** garbage, as a half-run batch might); fail_at >= 0 makes item fail_at fail with
** fail_rc whenever it is in a batch. */
typedef struct fake {
    int cap, fail_at, n_calls, max_ok;
    cdb_status fail_rc;
    int *done_count; /* per item: times it was in a successful batch */
    int next;        /* the first item not yet done: batches must start there */
    int in_order;
} fake;

static cdb_status fake_run(void *ctx, int first, int count) {
    fake *f = ctx;
    f->n_calls++;
    if (first != f->next) f->in_order = 0;
    if (f->fail_at >= first && f->fail_at < first + count)
        return cdb_seterr(f->fail_rc, "injected failure at item %d", f->fail_at);
    if (count > f->cap) return cdb_seterr(CDB_NOMEM, "injected: %d items > %d", count, f->cap);
    for (int i = first; i < first + count; i++) f->done_count[i]++;
    if (count > f->max_ok) f->max_ok = count;
    f->next = first + count;
    return CDB_OK;
}

CDB_TEST(run_batched_halves_on_out_of_memory) {
    static const int cases[][3] = {{10, 8, 3}, {1000, 256, 100}, {7, 1, 1},  {5, 64, 64},
                                   {0, 4, 1},  {257, 256, 1},    {99, 7, 6}, {64, 64, 63}};
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
        int n = cases[t][0], batch = cases[t][1], cap = cases[t][2], done = -1, want = batch;
        fake f = {cap, -1, 0, 0, CDB_OK, calloc((size_t)n + 1, sizeof(int)), 0, 1};
        /* the first size of the halving sequence batch, ceil(batch/2), ... that fits */
        while (want > cap && want > 1) want = (want + 1) / 2;
        CHECK_OK(cdb_k_run_batched(n, &batch, fake_run, &f, &done));
        CHECK_EQ_INT(done, n);
        CHECK(f.in_order);
        CHECK(f.max_ok <= cap);
        for (int i = 0; i < n; i++) CHECK_MSG(f.done_count[i] == 1, "item %d done %d times", i,
                                              f.done_count[i]);
        if (n >= cases[t][1]) CHECK_EQ_INT(batch, want); /* else it halved from n */
        CHECK(batch >= 1 && batch <= cases[t][1]);
        free(f.done_count);
    }
}

CDB_TEST(run_batched_stops_on_other_errors) {
    int n = 20, batch = 8, done = -1;
    fake f = {100, 13, 0, 0, CDB_DEVICE, calloc(21, sizeof(int)), 0, 1};
    /* a device error at item 13: items 0..7 done, the batch 8..15 fails, no halving */
    CHECK_RC(cdb_k_run_batched(n, &batch, fake_run, &f, &done), CDB_DEVICE);
    CHECK_EQ_INT(done, 8);
    CHECK_EQ_INT(batch, 8);
    CHECK_EQ_INT(f.n_calls, 2);
    free(f.done_count);
    /* out of memory with one item (capacity 0): halved down to 1, then given up */
    {
        fake g = {0, -1, 0, 0, CDB_OK, calloc(9, sizeof(int)), 0, 1};
        batch = 8;
        CHECK_RC(cdb_k_run_batched(8, &batch, fake_run, &g, &done), CDB_NOMEM);
        CHECK_EQ_INT(done, 0);
        CHECK_EQ_INT(batch, 1);
        CHECK_EQ_INT(g.n_calls, 4); /* 8, 4, 2, 1 */
        free(g.done_count);
    }
    batch = 0;
    CHECK_RC(cdb_k_run_batched(3, &batch, fake_run, &f, NULL), CDB_INVALID);
    batch = 2;
    CHECK_RC(cdb_k_run_batched(-1, &batch, fake_run, &f, NULL), CDB_INVALID);
    CHECK_RC(cdb_k_run_batched(3, &batch, NULL, &f, NULL), CDB_INVALID);
}

CDB_TEST_MAIN(batch_from_free_is_the_largest_that_fits, run_batched_halves_on_out_of_memory,
              run_batched_stops_on_other_errors)
