/*
** fuzz_peer.c: libFuzzer target for what a peer server answers `clipdb serve --peer`
** (serve/peers.c, cdb_srv_peer_parse): the input is the body of a peer's /api/search
** answer, untrusted; the first byte picks how many hits were asked for (0..63).
** Invariants: a parse either fails with nothing returned, or returns at most the hits
** asked for, each with a positive id, a finite score in [-1, 1], a NUL-terminated path
** of the length the JSON gave, a known taken_source, database numbers in range, and
** db = first_db + its index (the merge finds its remote by it); then the hits go
** through the merge (cdb_engine_hits_merge) as a search's would, which frees them.
*/
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "serve/serve_int.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fuzz_quiet();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    cdb_engine_hit *hits = NULL;
    srv_remote *rem = NULL;
    int n_hits = -1, max_hits, first_db = 3;
    cdb_engine_search_params p = cdb_engine_search_params_default();
    if (n == 0) return 0;
    max_hits = data[0] % 64;
    if (cdb_srv_peer_parse((const char *)data + 1, n - 1, max_hits, first_db, &hits, &rem,
                           &n_hits) != 0) {
        if (hits || rem || n_hits != 0) abort();
        return 0;
    }
    if (n_hits < 0 || n_hits > max_hits || (n_hits && (!hits || !rem))) abort();
    for (int i = 0; i < n_hits; i++) {
        const cdb_engine_hit *h = &hits[i];
        const char *ts = h->photo.taken_source;
        if (h->id <= 0 || !isfinite(h->score) || h->score < -1.0f || h->score > 1.0f) abort();
        if (!h->path || strlen(h->path) >= 4096 || h->db != first_db + i) abort();
        if (rem[i].id != h->id || rem[i].db < 0 || rem[i].db >= CDB_SERVE_MAX_DBS) abort();
        if (!ts || (*ts && strcmp(ts, "original") && strcmp(ts, "created") &&
                    strcmp(ts, "xmp") && strcmp(ts, "raw") && strcmp(ts, "file")))
            abort();
        if (memchr(h->photo.taken, '\0', sizeof h->photo.taken) == NULL) abort();
    }
    p.k = 1 + data[0] % 7;
    p.offset = data[0] % 3;
    p.sort = (cdb_engine_sort)(data[0] % 4);
    cdb_engine_hits_merge(hits, &n_hits, &p);
    if (n_hits > p.k) abort();
    for (int i = 0; i < n_hits; i++) cdb_free(hits[i].path);
    free(hits);
    free(rem);
    return 0;
}
