/*
** fuzz_peer.c: libFuzzer target for what a peer server answers `clipdb serve --peer`
** (serve/peers.c, cdb_srv_peer_parse; serve/copies.c, cdb_srv_copies_answer_parse): the
** input is the body of a peer's answer, untrusted. The first byte picks what: below 128,
** a /api/search answer with that byte % 64 hits asked for (with bit 6 set, checked
** against a filter: min_score 0.25, under "/a" or "/b/", and with bit 0 has_gps); from
** 128, a /api/copies_of answer, with vectors of (byte % 8) + 1 dimensions expected.
** Invariants of a search answer: a parse either fails with nothing returned, or returns
** at most the hits asked for, each with a positive id, a finite score in [-1, 1], a
** NUL-terminated path of the length the JSON gave, a known taken_source, database
** numbers in range, no (db, id) twice, what the filter asks (score, place, position),
** a count of dropped hits >= 0, and db = first_db + its index (the merge finds its remote by it);
** then the hits go through the merge (cdb_engine_hits_merge) as a search's would, which
** frees them. Of the copy facts (each hit's, each file's): the id is its own, the camera
** NUL-terminated, a vector either absent or of 1..4,096 halves none of which is an
** infinity or a NaN (of the dim expected, for a copies_of file), and the facts written
** again (cdb_srv_copy_facts_json) and read back are the same bits. A copies_of answer's
** near counts of the 8 items asked about are each within [0, CDB_ENGINE_CROWD_COUNT_MAX].
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

/* f (a vector of n halves, or none) written and read back: the same facts. */
static void check_facts(const cdb_engine_copy_facts *f, const uint16_t *vec, int n) {
    cdb_engine_copy_facts g, w = *f;
    uint16_t *v2 = NULL;
    int n2 = 0;
    FUZZ_CHECK(memchr(f->camera, '\0', sizeof f->camera) != NULL, "camera not terminated");
    FUZZ_CHECK((vec == NULL) == (n == 0) && n >= 0 && n <= 4096, "vector of %d halves", n);
    for (int i = 0; i < n; i++)
        FUZZ_CHECK((vec[i] & 0x7c00) != 0x7c00, "half %d is %#x: not finite", i, vec[i]);
    w.vec = vec;
    json_t *j = cdb_srv_copy_facts_json(&w, n);
    char *s = json_dumps(j, JSON_COMPACT);
    json_t *back = s ? json_loads(s, 0, NULL) : NULL;
    FUZZ_CHECK(back != NULL, "facts written are not JSON");
    cdb_srv_copy_facts_parse(back, &g, &v2, &n2);
    FUZZ_CHECK(g.has_hash == f->has_hash && (!f->has_hash || !memcmp(g.hash, f->hash, 16)) &&
                   g.has_phash == f->has_phash && (!f->has_phash || g.phash == f->phash) &&
                   g.has_shot == f->has_shot && (!f->has_shot || g.shot_ms == f->shot_ms) &&
                   !strcmp(g.camera, f->camera),
               "facts read back differ");
    FUZZ_CHECK(n2 == n && (n == 0 || !memcmp(v2, vec, sizeof *vec * (size_t)n)),
               "vector read back differs (%d halves, %d sent)", n2, n);
    free(v2);
    json_decref(back);
    free(s);
    json_decref(j);
}

static void copies_answer(const uint8_t *data, size_t n, int dim) {
    cdb_engine_copy_facts *files = NULL;
    void *keep = NULL;
    int n_files = -1, base = 5, counts[8];
    if (cdb_srv_copies_answer_parse((const char *)data, n, base, dim, 8, counts, &files,
                                    &n_files, &keep)) {
        cdb_srv_copies_free(keep);
        return;
    }
    FUZZ_CHECK(n_files >= 0 && n_files <= SRV_COPIES_MAX_FILES, "%d files", n_files);
    for (int i = 0; i < 8; i++)
        FUZZ_CHECK(counts[i] >= 0 && counts[i] <= CDB_ENGINE_CROWD_COUNT_MAX, "count %d: %d", i,
                   counts[i]);
    for (int i = 0; i < n_files; i++) {
        const cdb_engine_copy_facts *f = &files[i];
        FUZZ_CHECK(f->id > 0 && f->src >= base && f->src < base + CDB_SERVE_MAX_DBS,
                   "file %d: id %lld src %d", i, (long long)f->id, f->src);
        for (int j = 0; j < i; j++)
            FUZZ_CHECK(files[j].id != f->id || files[j].src != f->src, "file %d twice", i);
        check_facts(f, f->vec, f->vec ? dim : 0);
    }
    cdb_srv_copies_free(keep);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    cdb_engine_hit *hits = NULL;
    srv_remote *rem = NULL;
    int n_hits = -1, max_hits, first_db = 3, n_dropped = -1;
    cdb_engine_search_params p = cdb_engine_search_params_default();
    srv_peer_filter filter = {0.25f, "/a", "/b/", 0}, *f = NULL;
    if (n == 0) return 0;
    if (data[0] >= 128) {
        copies_answer(data + 1, n - 1, data[0] % 8 + 1);
        return 0;
    }
    max_hits = data[0] % 64;
    if (data[0] & 64) {
        filter.has_gps = data[0] & 1;
        f = &filter;
    }
    if (cdb_srv_peer_parse((const char *)data + 1, n - 1, max_hits, first_db, f, &hits, &rem,
                           &n_hits, &n_dropped) != 0) {
        if (hits || rem || n_hits != 0 || n_dropped != 0) abort();
        return 0;
    }
    if (n_hits < 0 || n_hits > max_hits || (n_hits && (!hits || !rem)) || n_dropped < 0)
        abort();
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
        for (int j = 0; j < i; j++)
            FUZZ_CHECK(rem[j].id != rem[i].id || rem[j].db != rem[i].db, "hit %d twice", i);
        FUZZ_CHECK(!f || (h->score >= f->min_score &&
                          (!strncmp(h->path, "/a", 2) || !strncmp(h->path, "/b/", 3)) &&
                          (!f->has_gps || h->photo.has_gps)),
                   "hit %d (score %g, path %s) fails the filter", i, h->score, h->path);
        FUZZ_CHECK(rem[i].facts.id == h->id && !rem[i].facts.vec, "hit %d's facts", i);
        check_facts(&rem[i].facts, rem[i].vec, rem[i].vec_n);
        cdb_srv_peer_hit_free(NULL, &rem[i]);
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
