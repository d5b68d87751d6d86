/*
** parts.c: an IVF index built in parts and its inverted lists on disk. One trained
** index is copied empty for every part; each part adds its own vectors; the parts'
** inverted lists are then moved into one index (in memory, or into one FAISS
** OnDiskInvertedLists file that a loaded index maps), so no vector is added twice and
** no process holds more than its part. The FAISS C++ calls are in ivf.cc.
**
** Why the result equals a single build: an IVF entry is the vector's list (its
** nearest centroid, from the shared quantizer) and its code (from the shared
** codebooks), both functions of the vector alone; merging appends each part's entries
** to the same lists in part order, which is the order a single add of the parts in
** sequence gives.
*/
#include <stdlib.h>
#include <string.h>

#include <faiss/c_api/IndexIVF_c.h>

#include "index/index_int.h"

static int is_ivf(const cdb_index *ix) { return ix && ix->fx && cdb_ivf_is_ivf_(ix->fx); }

cdb_status cdb_index_clone_empty(const cdb_index *trained, cdb_index **out) {
    cdb_index *ix = NULL;
    cdb_status rc;
    if (!out) return cdb_seterr(CDB_INVALID, "cdb_index_clone_empty: out is NULL");
    *out = NULL;
    if (!is_ivf(trained))
        return cdb_seterr(CDB_INVALID, "building in parts needs an IVF index (%s is not)",
                          trained ? trained->info.factory : "none");
    if (!faiss_Index_is_trained(trained->fx))
        return cdb_seterr(CDB_INVALID, "index %s is not trained yet", trained->info.factory);
    if (!(ix = cdb_calloc(1, sizeof *ix))) return cdb_seterr(CDB_NOMEM, "clone_empty");
    ix->info = trained->info;
    ix->info.watermark = 0;
    ix->n_trained_for = trained->n_trained_for;
    if ((rc = cdb_ivf_clone_(trained->fx, &ix->fx)) != CDB_OK) goto fail;
    if (faiss_Index_ntotal(ix->fx) > 0 && faiss_Index_reset(ix->fx) != 0) {
        rc = cdb_index_faiss_err_(1, "reset");
        goto fail;
    }
    if ((rc = cdb_index_apply_params_(ix)) != CDB_OK) goto fail;
    *out = ix;
    return CDB_OK;
fail:
    cdb_index_free(ix);
    return rc;
}

cdb_status cdb_index_merge(cdb_index *dst, cdb_index *const *parts, int n_parts,
                           const char *lists_path) {
    FaissIndex **fx = NULL;
    cdb_status rc = CDB_OK;
    if (!dst || n_parts < 0 || (n_parts > 0 && !parts))
        return cdb_seterr(CDB_INVALID, "cdb_index_merge: bad arguments");
    if (!is_ivf(dst)) return cdb_seterr(CDB_INVALID, "merge: %s is not IVF", dst->info.factory);
    if (lists_path && cdb_ivf_is_ondisk_(dst->fx))
        return cdb_seterr(CDB_INVALID, "merge: the destination's lists are already on disk");
    if (!(fx = cdb_malloc(((size_t)n_parts + 1) * sizeof *fx)))
        return cdb_seterr(CDB_NOMEM, "merge");
    for (int i = 0; i < n_parts; i++) {
        if (!parts[i] || parts[i] == dst || !is_ivf(parts[i])) {
            rc = cdb_seterr(CDB_INVALID, "merge: part %d is missing, the destination, or not IVF",
                            i);
            goto done;
        }
        if (parts[i]->info.dim != dst->info.dim) {
            rc = cdb_seterr(CDB_DIM_MISMATCH, "merge: part %d has dim %d, the index %d", i,
                            parts[i]->info.dim, dst->info.dim);
            goto done;
        }
        fx[i] = parts[i]->fx;
    }
    /* Coverage first (only memory can fail here); the lists move after, and the
    ** parts' coverage is cleared with them. */
    for (int i = 0; i < n_parts; i++)
        if ((rc = cdb_index_cover_(dst, parts[i]->cov, parts[i]->n_cov)) != CDB_OK) goto done;
    if ((rc = cdb_ivf_merge_(dst->fx, fx, n_parts, lists_path)) != CDB_OK) goto done;
    for (int i = 0; i < n_parts; i++) parts[i]->n_cov = 0;
    rc = cdb_index_apply_params_(dst); /* nprobe follows the size */
done:
    cdb_free(fx);
    return rc;
}

cdb_status cdb_index_build_parts_with(const cdb_index *trained, cdb_index *const *filled,
                                      int n_filled, const cdb_index_source *parts, int n_parts,
                                      const char *lists_path, cdb_index **out) {
    cdb_index **built = NULL, *dst = NULL;
    cdb_status rc = CDB_OK;
    int n_all_parts = n_filled + n_parts;
    int64_t n_all = 0;
    if (!out) return cdb_seterr(CDB_INVALID, "cdb_index_build_parts: out is NULL");
    *out = NULL;
    if (n_filled < 0 || n_parts < 0 || n_all_parts < 1 || (n_parts && !parts) ||
        (n_filled && !filled))
        return cdb_seterr(CDB_INVALID, "build_parts: no parts");
    if (!(built = cdb_calloc((size_t)n_all_parts, sizeof *built)))
        return cdb_seterr(CDB_NOMEM, "build_parts");
    if ((rc = cdb_index_clone_empty(trained, &dst)) != CDB_OK) goto done;
    for (int i = 0; i < n_filled; i++) {
        built[i] = filled[i];
        n_all += filled[i] ? cdb_index_count(filled[i]) : 0;
    }
    for (int i = 0; i < n_parts && rc == CDB_OK; i++) {
        cdb_index **b = &built[n_filled + i];
        if ((rc = cdb_index_clone_empty(trained, b)) != CDB_OK) break;
        rc = cdb_index_add_source(*b, &parts[i]);
        if (rc != CDB_OK) rc = cdb_errctx(rc, "part %d", i);
        n_all += parts[i].n;
    }
    if (rc == CDB_OK) rc = cdb_index_merge(dst, built, n_all_parts, lists_path);
    if (rc == CDB_OK) {
        dst->info.n_planned = n_all > trained->info.n_planned ? n_all : trained->info.n_planned;
        *out = dst;
        dst = NULL;
    }
done:
    for (int i = n_filled; built && i < n_all_parts; i++) cdb_index_free(built[i]);
    cdb_free(built);
    cdb_index_free(dst);
    return rc;
}

cdb_status cdb_index_build_parts(const cdb_index *trained, const cdb_index_source *parts,
                                 int n_parts, const char *lists_path, cdb_index **out) {
    return cdb_index_build_parts_with(trained, NULL, 0, parts, n_parts, lists_path, out);
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

cdb_status cdb_index_remap_ids(cdb_index *ix, const int64_t *from, const int64_t *to, int64_t n) {
    int64_t *sorted = NULL, *cov = NULL, n_new = 0;
    cdb_status rc = CDB_OK;
    if (!ix || n < 0 || (n > 0 && (!from || !to)))
        return cdb_seterr(CDB_INVALID, "cdb_index_remap_ids: bad arguments");
    if (!is_ivf(ix)) return cdb_seterr(CDB_UNSUPPORTED, "%s has no lists to rename ids in",
                                       ix->info.factory);
    if (cdb_ivf_is_ondisk_(ix->fx))
        return cdb_seterr(CDB_UNSUPPORTED, "renaming ids: the lists are on disk");
    for (int64_t i = 0; i < n; i++)
        if ((i && from[i] <= from[i - 1]) || to[i] < 0)
            return cdb_seterr(CDB_INVALID, "renaming ids: from not ascending or a new id < 0 "
                                           "(at %lld)", (long long)i);
    sorted = cdb_malloc(sizeof *sorted * (size_t)(n ? n : 1));
    cov = cdb_malloc(sizeof *cov * (size_t)(ix->n_cov ? ix->n_cov : 1));
    if (!sorted || !cov) {
        rc = cdb_seterr(CDB_NOMEM, "renaming %lld ids", (long long)n);
        goto done;
    }
    if (n) memcpy(sorted, to, sizeof *sorted * (size_t)n);
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_i64);
    for (int64_t i = 1; i < n; i++)
        if (sorted[i] == sorted[i - 1]) {
            rc = cdb_seterr(CDB_INVALID, "renaming ids: two ids become %lld", (long long)sorted[i]);
            goto done;
        }
    for (int64_t i = 0; i < ix->n_cov; i++) { /* the covered ids that stay, renamed */
        const int64_t *p = bsearch(&ix->cov[i], from, (size_t)n, sizeof *from, cmp_i64);
        if (p) cov[n_new++] = to[p - from];
    }
    if ((rc = cdb_ivf_remap_ids_(ix->fx, from, to, (size_t)n)) != CDB_OK) goto done;
    ix->n_cov = 0;
    rc = cdb_index_cover_(ix, cov, n_new);
done:
    cdb_free(sorted);
    cdb_free(cov);
    return rc;
}

cdb_status cdb_index_list_of_ids(const cdb_index *ix, int64_t **ids, int64_t **lists,
                                 int64_t *n) {
    FaissIndexIVF *ivf = ix ? faiss_IndexIVF_cast(ix->fx) : NULL;
    int64_t total = 0, k = 0, *pid = NULL, *pl = NULL;
    size_t nlist;
    if (!ids || !lists || !n) return cdb_seterr(CDB_INVALID, "cdb_index_list_of_ids: out NULL");
    *ids = *lists = NULL;
    *n = 0;
    if (!ivf) return cdb_seterr(CDB_UNSUPPORTED, "not an IVF index at the top level");
    nlist = faiss_IndexIVF_nlist(ivf);
    for (size_t l = 0; l < nlist; l++) total += (int64_t)faiss_IndexIVF_get_list_size(ivf, l);
    pid = cdb_malloc(sizeof *pid * (size_t)(total ? total : 1));
    pl = cdb_malloc(sizeof *pl * (size_t)(total ? total : 1));
    if (!pid || !pl) {
        cdb_free(pid);
        cdb_free(pl);
        return cdb_seterr(CDB_NOMEM, "list_of_ids: %lld entries", (long long)total);
    }
    for (size_t l = 0; l < nlist; l++) {
        size_t sz = faiss_IndexIVF_get_list_size(ivf, l);
        faiss_IndexIVF_invlists_get_ids(ivf, l, pid + k);
        for (size_t j = 0; j < sz; j++) pl[k + (int64_t)j] = (int64_t)l;
        k += (int64_t)sz;
    }
    *ids = pid;
    *lists = pl;
    *n = total;
    return CDB_OK;
}

cdb_status cdb_index_lists_to_disk(cdb_index *ix, const char *lists_path) {
    if (!ix || !lists_path || !*lists_path)
        return cdb_seterr(CDB_INVALID, "cdb_index_lists_to_disk: bad arguments");
    if (!is_ivf(ix))
        return cdb_seterr(CDB_UNSUPPORTED, "%s has no inverted lists to put on disk",
                          ix->info.factory);
    if (cdb_ivf_is_ondisk_(ix->fx)) return cdb_seterr(CDB_INVALID, "lists are already on disk");
    return cdb_ivf_to_ondisk_(ix->fx, lists_path);
}

int cdb_index_on_disk(const cdb_index *ix) { return is_ivf(ix) && cdb_ivf_is_ondisk_(ix->fx); }

cdb_status cdb_index_list_entries(const cdb_index *ix, int list, int64_t *n, size_t *code_size,
                                  int64_t *ids, uint8_t *codes) {
    if (!n || !code_size || !is_ivf(ix) || list < 0 || list >= ix->info.nlist)
        return cdb_seterr(CDB_INVALID, "list %d: no such inverted list", list);
    return cdb_ivf_list_(ix->fx, list, n, code_size, ids, codes);
}
