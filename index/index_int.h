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

/* The lists an IVF index probes per query (0: not IVF). nprobe follows nlist and the
** collection: the planned share of the lists (plan.c: nlist/32 and at least 8 for
** IVF-SQ, nlist/64 and at least 16 for IVF-PQ, or the user's), and every list while
** the lists hold fewer than 32 vectors on average (a small database: a scan of all
** of them costs no more than 32 codes per list, and the candidates, k times the
** re-rank factor, then come from every vector, so the exact re-rank returns brute
** force's top k). Applied at every build and load, so it follows ntotal as the index
** grows by refreshes. */
int cdb_index_nprobe_effective_(const cdb_index_info *info, int64_t ntotal);
/* Applies the effective nprobe and info.ef_search to the FAISS index where they apply. */
cdb_status cdb_index_apply_params_(cdb_index *ix);

/* Fills the derived fields of a plan for a given kind (nlist, pq_m, ...). */
void cdb_index_plan_kind_(cdb_index_kind kind, int64_t n, int dim, cdb_index_info *out);

/* Kind implied by a user factory string (CUSTOM) plus the IDMap rule; writes the
** effective string into out->factory. */
cdb_status cdb_index_plan_custom_(const char *factory, int dim, int64_t n, cdb_index_info *out);

#endif
