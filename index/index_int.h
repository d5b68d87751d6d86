/*
** index_int.h: private to index/. The cdb_index struct (a FAISS index plus the
** coverage record and search parameters) and helpers shared by index.c, plan.c
** and search.c. FAISS types are confined to index/.
*/
#ifndef CDB_INDEX_INT_H
#define CDB_INDEX_INT_H

#include <stdio.h>

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
    int faiss_add;          /* 1: FAISS's own add, not cdb_ivf_add_ (cdb_index_set_faiss_add) */
};

/* IVF-HNSW-PQ's training (plan.c, applied in index.c): points per list in the sample,
** k-means iterations, and the share of the lists probed (nlist / this, at least 16). */
#define IVF_HNSW_TRAIN_PER_LIST 20
#define IVF_HNSW_KMEANS_ITER 10
#define IVF_HNSW_PROBE_DIV 128

#ifdef __cplusplus
extern "C" {
#endif

/* index.c: merges ids[n] (any order, repeats allowed) into the sorted distinct
** coverage array. */
cdb_status cdb_index_cover_(cdb_index *ix, const int64_t *ids, int64_t n);

/* index.c: fsync of path's folder (best effort: some filesystems refuse), after a
** rename into it. */
cdb_status cdb_index_fsync_dir_(const char *path);
/* index.c: removes "<path>.tmp.<pid>" files whose writer is gone (killed before its
** rename). Best effort. */
void cdb_index_remove_stale_temps_(const char *path);

/* FAISS's exception text without its C++ frame: "Error in void faiss::...() at
** ./faiss/Clustering.cpp:277: Error: 'nx >= k' failed: Number of training points..."
** becomes "Number of training points..." (a pointer into m). */
const char *cdb_index_faiss_reason_(const char *m);
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

/* One query's top k (D, L as faiss_Index_search gives them) from an IVF index with an
** HNSW coarse quantizer under inner product: the quantizer's graph is walked as FAISS
** walks it (HNSW::search, the same efSearch) with cdb_k_dot_f32 for the distances, then
** FAISS scans the lists found (search_preassigned). *handled 0 (and nothing done) for an
** index of another shape: the caller uses faiss_Index_search. */
cdb_status cdb_ivf_search_one_(FaissIndex *fx, const float *q, int64_t k, float *D /* OUT */,
                               int64_t *L /* OUT */, int *handled /* OUT */);
/* Adds x[n] with ids[n] to an IVF index of the shape cdb_ivf_search_one_ walks: each
** vector's list found by the same walk (k = 1), the vectors shared out over `threads`
** OpenMP threads, then, for 8-bit PQ codes of residuals, the codes computed with
** clipdb's kernel to FAISS's bytes and appended in input order (else FAISS's add_core
** with the lists given). The entries are the ones IndexIVF::add_with_ids gives, up to
** fp32 near-ties of two centroids (test_index `ivf_add_equals_faiss_add`). *handled 0
** (and nothing added) for another shape: the caller uses faiss_Index_add_with_ids. */
cdb_status cdb_ivf_add_(FaissIndex *fx, int64_t n, const float *x, const int64_t *ids,
                        int threads, int *handled /* OUT */);
/* cdb_index_list_entries on fx's lists (list checked by the caller). */
cdb_status cdb_ivf_list_(FaissIndex *fx, int list, int64_t *n, size_t *code_size, int64_t *ids,
                         uint8_t *codes);
/* An index with lists on disk names its lists file by the file's name alone, found at
** load in the index file's own folder (so a database folder can be moved): before
** fx is written to index_path, its lists file's name becomes its last component
** (*saved: the full name, for cdb_ivf_lists_name_restore_ after the write; NULL when
** fx's lists are not on disk). CDB_INVALID when the lists file is in another folder. */
cdb_status cdb_ivf_lists_name_(FaissIndex *fx, const char *index_path, char **saved /* OUT */);
/* Puts back the name cdb_ivf_lists_name_ saved (NULL: nothing) and frees it. */
void cdb_ivf_lists_name_restore_(FaissIndex *fx, char *saved);
/* FAISS's read_index from f's position, a lists file on disk taken from index_path's
** folder under its own name (FAISS's IO_FLAG_ONDISK_SAME_DIR) and mapped. A lists
** file missing there: CDB_ERROR with FAISS's message ("could not open ..."). */
cdb_status cdb_ivf_read_(FILE *f, const char *index_path, FaissIndex **out /* OUT */);
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
