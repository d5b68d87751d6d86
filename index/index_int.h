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
    cdb_stamp loaded;       /* cdb_index_load: the file read whole and found intact */
    int has_loaded;         /* loaded is set (cdb_index_stamp) */
};

/* IVF-HNSW-PQ's training (plan.c, applied in index.c): points per list in the sample,
** k-means iterations, and the share of the lists probed (nlist / this, at least 16). */
#define IVF_HNSW_TRAIN_PER_LIST 20
#define IVF_HNSW_KMEANS_ITER 10
#define IVF_HNSW_PROBE_DIV 128

/* index.c: merges ids[n] (any order, repeats allowed) into the sorted distinct
** coverage array. */
cdb_status cdb_index_cover_(cdb_index *ix, const int64_t *ids, int64_t n);

/* index.c: fsync of path's folder (best effort: some filesystems refuse), after a
** rename into it. */
cdb_status cdb_index_fsync_dir_(const char *path);
/* index.c: removes "<path>.tmp.<pid>" files whose writer is gone (killed before its
** rename). Best effort. */
void cdb_index_remove_stale_temps_(const char *path);

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

/* ---- ivf.cc: FAISS's C++ API behind C functions (no exception crosses them) ---- */

#ifdef __cplusplus
extern "C" {
#endif
/* One query's top k (D, L as faiss_Index_search gives them) from an IVF index with an
** HNSW coarse quantizer under inner product: the quantizer's graph is walked as FAISS
** walks it (HNSW::search, the same efSearch) with cdb_k_dot_f32 for the distances, then
** FAISS scans the lists found (search_preassigned). *handled 0 (and nothing done) for an
** index of another shape: the caller uses faiss_Index_search. */
cdb_status cdb_ivf_search_one_(FaissIndex *fx, const float *q, int64_t k, float *D /* OUT */,
                               int64_t *L /* OUT */, int *handled /* OUT */);
/* 1 when fx is an IVF index (maybe inside a pre-transform such as OPQ). */
int cdb_ivf_is_ivf_(FaissIndex *fx);
/* 1 when fx's inverted lists are an OnDiskInvertedLists file. */
int cdb_ivf_is_ondisk_(FaissIndex *fx);
/* CDB_OK unless fx's lists are on disk in a file shorter than FAISS will map, or with a
** list past its end (CDB_CORRUPT): FAISS maps the file without checking, and a read past
** its end is a SIGBUS. */
cdb_status cdb_ivf_ondisk_check_(FaissIndex *fx);
/* k-means settings of an IVF index's coarse training (0 keeps FAISS's). */
cdb_status cdb_ivf_set_training_(FaissIndex *fx, int niter, int min_per_centroid);
/* A deep copy of fx (trained quantizer, codebooks and entries). */
cdb_status cdb_ivf_clone_(FaissIndex *fx, FaissIndex **out /* OUT */);
/* Renames the ids in fx's inverted lists: an entry with id from[i] gets to[i]; an entry
** whose id is not in from (sorted ascending) is dropped. Entries keep their order. */
cdb_status cdb_ivf_remap_ids_(FaissIndex *fx, const int64_t *from, const int64_t *to,
                              size_t n);
/* Moves the entries of parts[n] into dst (all IVF, same trained quantizer and codebooks:
** checked). lists_path NULL: into dst's lists in memory; else into a new
** OnDiskInvertedLists file at lists_path holding dst's entries and the parts', which
** becomes dst's lists. The parts are left empty. */
cdb_status cdb_ivf_merge_(FaissIndex *dst, FaissIndex *const *parts, int n_parts,
                          const char *lists_path);
/* Moves fx's lists into a new OnDiskInvertedLists file at lists_path. */
cdb_status cdb_ivf_to_ondisk_(FaissIndex *fx, const char *lists_path);
#ifdef __cplusplus
}
#endif

#endif
