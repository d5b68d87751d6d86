/*
** index_int.h: private to index/. The cdb_index struct (a FAISS index plus the
** coverage record and search parameters) and helpers shared by index.c, plan.c
** and search.c. FAISS types are confined to index/.
*/
#ifndef CDB_INDEX_INT_H
#define CDB_INDEX_INT_H

#include <faiss/c_api/Index_c.h>

#include "index/index.h"

struct cdb_index {
    FaissIndex *fx;         /* owns */
    cdb_index_info info;    /* plan + parameters; sizes refreshed by get_info */
    int64_t *cov;           /* covered ids, sorted, distinct */
    int64_t n_cov, cap_cov;
    int64_t n_trained_for;  /* n_planned when trained (for refresh decisions) */
};

/* Maps a FAISS C API failure to a cdb_status with FAISS's message. */
cdb_status cdb_index_faiss_err_(int frc, const char *what);
/* plan.c: the memory an index of this kind and size takes (its estimate, in bytes). */
size_t cdb_index_estimate_bytes_(cdb_index_kind kind, int64_t n, int dim, int nlist, int pq_m);

/* Applies info.nprobe / info.ef_search to the FAISS index where they apply. */
cdb_status cdb_index_apply_params_(cdb_index *ix);

/* Fills the derived fields of a plan for a given kind (nlist, pq_m, ...). */
void cdb_index_plan_kind_(cdb_index_kind kind, int64_t n, int dim, cdb_index_info *out);

/* Kind implied by a user factory string (CUSTOM) plus the IDMap rule; writes the
** effective string into out->factory. */
cdb_status cdb_index_plan_custom_(const char *factory, int dim, int64_t n, cdb_index_info *out);

#endif
