/*
** fuzz_snapshot.c: libFuzzer target for the vector snapshot file (index/snapshot.c,
** cdb_index_snap_open), which searches map beside the index. At start-up a valid
** snapshot of 300 vectors (dim 8, ids with gaps) is written with cdb_index_snap_write.
** Each input damages a copy of it, as fuzz_packcache does:
**   first byte % 3 == 0: the file is replaced by the rest of the input;
**   == 1: the rest is patches of 5 bytes (u32 offset modulo the size, then the byte);
**   == 2: the file is cut at a u32 offset (modulo its size + 1), then patched as 1.
** No stamp lies beside it (every checksum runs). Then it is opened for the vector set
** and dim it was written for: a file that opens must be the valid one, byte for byte
** (a damaged snapshot is never used), and every id must map to its own vector. The
** open must also never read outside the file (ASan) whatever the header says.
*/
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_util.h"
#include "index/index.h"

#define N 300
#define DIM 8

static char g_path[512];
static unsigned char *g_valid;
static size_t g_valid_n;

static cdb_status src_read(void *ctx, int64_t pos, int64_t n, int64_t *ids, uint16_t *vecs) {
    (void)ctx;
    for (int64_t i = 0; i < n; i++) {
        ids[i] = 5 * (pos + i) + 2;
        for (int d = 0; d < DIM; d++) vecs[i * DIM + d] = (uint16_t)(0x3000 + (pos + i) * 7 + d);
    }
    return CDB_OK;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    cdb_index_source src = {N, src_read, NULL};
    char stamp[600];
    (void)argc, (void)argv;
    fuzz_quiet();
    snprintf(g_path, sizeof g_path, "%s/model_3.snap", fuzz_tmpdir("snap"));
    if (cdb_index_snap_write(g_path, 3, DIM, 99, &src) != CDB_OK) abort();
    if (!(g_valid = fuzz_read_file(g_path, &g_valid_n))) abort();
    snprintf(stamp, sizeof stamp, "%s.ok", g_path);
    unlink(stamp);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    unsigned char *f = NULL;
    size_t fn = g_valid_n;
    cdb_index_snap *s = NULL;
    if (n == 0) return 0;
    if (!(f = fuzz_damage(g_valid, g_valid_n, data + 1, n - 1, data[0] % 3, &fn))) return 0;
    if (fuzz_write_file(g_path, f, fn) != 0) abort();
    if (cdb_index_snap_open(g_path, 3, DIM, 0, &s) == CDB_OK) {
        const int64_t *ids = cdb_index_snap_ids(s);
        const uint16_t *v = cdb_index_snap_vecs(s);
        FUZZ_CHECK(fn == g_valid_n && !memcmp(f, g_valid, fn),
                   "a snapshot other than the valid one opened (%zu bytes)", fn);
        FUZZ_CHECK(cdb_index_snap_count(s) == N && cdb_index_snap_watermark(s) == 99,
                   "count %lld", (long long)cdb_index_snap_count(s));
        for (int64_t i = 0; i < N; i++)
            FUZZ_CHECK(cdb_index_snap_find(s, ids[i]) == v + i * DIM, "id %lld", (long long)ids[i]);
        cdb_index_snap_close(s);
    }
    free(f);
    return 0;
}
