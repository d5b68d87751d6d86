/*
** batch.c: host-side planning of batches on a device (kernels.h, BATCHING): the batch
** size that free device memory allows, and running a batch that halves on
** out-of-memory. Pure host logic, built in every configuration; tested with the
** memory figures and the out-of-memory failures injected (tests/kernels/test_batch.c).
*/
#include "kernels/kernels.h"

int cdb_k_batch_from_free(size_t free_bytes, size_t fixed_bytes, size_t per_item_bytes,
                          int max_batch) {
    size_t usable, items;
    if (max_batch < 1) max_batch = 1;
    if (per_item_bytes == 0) return max_batch;
    usable = free_bytes - free_bytes / 8; /* the reserve: see kernels.h */
    if (usable <= fixed_bytes) return 1;
    items = (usable - fixed_bytes) / per_item_bytes;
    if (items < 1) return 1;
    return items < (size_t)max_batch ? (int)items : max_batch;
}

cdb_status cdb_k_run_batched(int n, int *batch, cdb_k_batch_fn fn, void *ctx, int *done) {
    int first = 0;
    cdb_status rc = CDB_OK;
    if (done) *done = 0;
    if (n < 0 || !batch || *batch < 1 || !fn)
        return cdb_seterr(CDB_INVALID, "cdb_k_run_batched: n %d, batch %d, fn %s", n,
                          batch ? *batch : 0, fn ? "set" : "NULL");
    while (first < n) {
        int count = n - first < *batch ? n - first : *batch;
        rc = fn(ctx, first, count);
        if (rc == CDB_NOMEM && count > 1) {
            *batch = (count + 1) / 2; /* the same items again, half as many at a time */
            CDB_LOG_INFO("device out of memory at a batch of %d: batches of %d from now on",
                         count, *batch);
            continue;
        }
        if (rc != CDB_OK) break;
        first += count;
        if (done) *done = first;
    }
    return rc;
}
