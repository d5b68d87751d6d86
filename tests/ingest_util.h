/*
** ingest_util.h: one ingest of a folder into an open writer, in this process, for the
** tests and benchmarks that drive the engine directly (bench/ingest_child.h,
** test_encoder_faults, fuzz_serve). Header-only test code.
*/
#ifndef CDB_TESTS_INGEST_UTIL_H
#define CDB_TESTS_INGEST_UTIL_H

#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"

/* cdb_engine_ingest of the one folder lib into e (opened as the writer) with rp; *sum,
** when sum is not NULL: the first vector set's summary (all zero when the run failed).
** The run's report, large, lives on the heap for the call only. */
static inline cdb_status cdb_test_ingest(cdb_engine *e, const char *lib,
                                         const cdb_engine_run_params *rp,
                                         cdb_engine_summary *sum) {
    cdb_engine_run_report *r = calloc(1, sizeof *r);
    const char *paths[1] = {lib};
    cdb_status rc;
    if (sum) memset(sum, 0, sizeof *sum);
    if (!r) return cdb_seterr(CDB_NOMEM, "out of memory");
    if ((rc = cdb_engine_ingest(e, paths, 1, rp, r)) == CDB_OK && sum) *sum = r->sets[0].sum;
    free(r);
    return rc;
}

#endif
