/*
** ivf.cc: what index/ needs from FAISS's C++ API that its C API lacks, behind the C
** functions declared in index_int.h (the cdb_ivf_* group): one query's search through
** an HNSW coarse quantizer with clipdb's dot kernel, the k-means settings of an IVF
** index's training, its inverted lists moved to an OnDiskInvertedLists file (mmapped
** when the index is read back), the merge of several parts' inverted lists into one
** index (IndexIVF::merge_from in memory, OnDiskInvertedLists::merge_from on disk), the
** renaming of a part's ids in its lists, and copies of an index. The second C++ file in
** clipdb's own code, for the same reason as encoder/tok_spm.cc: no C equivalent exists.
**
** A FaissIndex* of the C API is a faiss::Index* (the C API's casts are reinterpret
** casts). Every FAISS call is inside a try block: no C++ exception crosses into C; a
** failure is a cdb_status with FAISS's message.
*/
#include "index/index_int.h"

#include <faiss/Clustering.h>
#include <faiss/IVFlib.h>
#include <faiss/IndexFlat.h>
#include <faiss/IndexHNSW.h>
#include <faiss/IndexIVF.h>
#include <faiss/clone_index.h>
#include <faiss/impl/AuxIndexStructures.h>
#include <faiss/impl/DistanceComputer.h>
#include <faiss/invlists/OnDiskInvertedLists.h>
#include <faiss/utils/Heap.h>

#include "kernels/kernels.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <new>
#include <vector>

namespace {

faiss::IndexIVF *ivf_of(FaissIndex *fx) {
    return faiss::ivflib::try_extract_index_ivf(reinterpret_cast<faiss::Index *>(fx));
}

/* An IVF index inside a pre-transform (OPQ) counts its vectors twice: the wrapper
** follows the IVF index's count. */
void sync_ntotal(FaissIndex *fx) {
    faiss::Index *top = reinterpret_cast<faiss::Index *>(fx);
    faiss::IndexIVF *ivf = faiss::ivflib::try_extract_index_ivf(top);
    if (ivf && top != ivf) top->ntotal = ivf->ntotal;
}

/* OnDiskInvertedLists says "creating file ..." / "resizing ... to N bytes" with printf
** at every resize, and a library must not write to stdout (a `--json` answer would
** carry it): fd 1 points at /dev/null for the life of this guard. Not for threads
** that print meanwhile; index/ writes lists only from the building thread. */
struct quiet_stdout {
    int saved = -1;
    quiet_stdout() {
        int null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
        std::fflush(stdout);
        if (null_fd < 0) return;
        if ((saved = dup(STDOUT_FILENO)) >= 0 && dup2(null_fd, STDOUT_FILENO) < 0) {
            close(saved);
            saved = -1;
        }
        close(null_fd);
    }
    ~quiet_stdout() {
        if (saved < 0) return;
        std::fflush(stdout);
        dup2(saved, STDOUT_FILENO);
        close(saved);
    }
};

cdb_status fail(const char *what, const std::exception &e) {
    if (dynamic_cast<const std::bad_alloc *>(&e))
        return cdb_seterr(CDB_NOMEM, "faiss: %s: out of memory", what);
    return cdb_seterr(CDB_ERROR, "faiss: %s failed: %s", what, e.what());
}

/* Minus the inner product of the query with a centroid, as FAISS's HNSW minimizes it
** for an inner-product index (IndexHNSW's NegativeDistanceComputer), computed by
** cdb_k_dot_f32 (AVX2) where Debian's generic FAISS build runs a scalar loop. */
struct centroid_ip_dc : faiss::DistanceComputer {
    const float *xb, *q = nullptr;
    size_t d;
    centroid_ip_dc(const float *xb_, size_t d_) : xb(xb_), d(d_) {}
    void set_query(const float *x) override { q = x; }
    float operator()(faiss::Index::idx_t i) override {
        return -cdb_k_dot_f32(q, xb + (size_t)i * d, d);
    }
    float symmetric_dis(faiss::Index::idx_t i, faiss::Index::idx_t j) override {
        return -cdb_k_dot_f32(xb + (size_t)i * d, xb + (size_t)j * d, d);
    }
};

} // namespace

extern "C" cdb_status cdb_ivf_search_one_(FaissIndex *fx, const float *q, int64_t k,
                                          float *D, int64_t *L, int *handled) {
    using idx_t = faiss::Index::idx_t;
    faiss::Index *top = reinterpret_cast<faiss::Index *>(fx);
    faiss::IndexIVF *ivf = dynamic_cast<faiss::IndexIVF *>(top);
    faiss::IndexHNSW *hq = ivf ? dynamic_cast<faiss::IndexHNSW *>(ivf->quantizer) : nullptr;
    faiss::IndexFlat *cents = hq ? dynamic_cast<faiss::IndexFlat *>(hq->storage) : nullptr;
    *handled = 0;
    if (!cents || ivf->metric_type != faiss::METRIC_INNER_PRODUCT ||
        hq->metric_type != faiss::METRIC_INNER_PRODUCT || cents->ntotal != (idx_t)ivf->nlist ||
        ivf->nprobe < 1)
        return CDB_OK; /* another shape (e.g. inside a pre-transform): FAISS's own search */
    try {
        idx_t nprobe = std::min((idx_t)ivf->nprobe, (idx_t)ivf->nlist);
        std::vector<idx_t> lists(nprobe);
        std::vector<float> dis(nprobe);
        centroid_ip_dc dc(cents->get_xb(), (size_t)ivf->d);
        faiss::VisitedTable vt((int)cents->ntotal);
        /* IndexHNSW::search's steps for one query, the distances from dc */
        dc.set_query(q);
        faiss::maxheap_heapify(nprobe, dis.data(), lists.data());
        hq->hnsw.search(dc, (int)nprobe, lists.data(), dis.data(), vt);
        faiss::maxheap_reorder(nprobe, dis.data(), lists.data());
        for (float &x : dis) x = -x; /* back to inner products */
        ivf->invlists->prefetch_lists(lists.data(), (int)nprobe);
        ivf->search_preassigned(1, q, k, lists.data(), dis.data(), D, L, false);
    } catch (const std::exception &e) {
        return fail("search", e);
    }
    *handled = 1;
    return CDB_OK;
}

extern "C" cdb_status cdb_ivf_set_training_(FaissIndex *fx, int niter, int min_per_centroid) {
    faiss::IndexIVF *ivf = ivf_of(fx);
    if (!ivf) return cdb_seterr(CDB_INVALID, "not an IVF index");
    if (niter > 0) ivf->cp.niter = niter;
    if (min_per_centroid > 0) ivf->cp.min_points_per_centroid = min_per_centroid;
    return CDB_OK;
}

extern "C" int cdb_ivf_is_ivf_(FaissIndex *fx) { return ivf_of(fx) != nullptr; }

extern "C" int cdb_ivf_is_ondisk_(FaissIndex *fx) {
    faiss::IndexIVF *ivf = ivf_of(fx);
    return ivf && dynamic_cast<faiss::OnDiskInvertedLists *>(ivf->invlists) != nullptr;
}

extern "C" cdb_status cdb_ivf_ondisk_check_(FaissIndex *fx) {
    faiss::IndexIVF *ivf = ivf_of(fx);
    auto *od = ivf ? dynamic_cast<faiss::OnDiskInvertedLists *>(ivf->invlists) : nullptr;
    if (!od) return CDB_OK;
    struct stat st;
    if (stat(od->filename.c_str(), &st) != 0)
        return cdb_seterr(CDB_CORRUPT, "the lists file %s: %s", od->filename.c_str(),
                          strerror(errno));
    if (!S_ISREG(st.st_mode))
        return cdb_seterr(CDB_CORRUPT, "the lists file %s is not a regular file",
                          od->filename.c_str());
    if ((uint64_t)st.st_size < (uint64_t)od->totsize)
        return cdb_seterr(CDB_CORRUPT, "the lists file %s is truncated (%lld of %zu bytes)",
                          od->filename.c_str(), (long long)st.st_size, od->totsize);
    size_t entry = od->code_size + sizeof(faiss::Index::idx_t);
    for (size_t l = 0; l < od->lists.size(); l++) {
        const auto &li = od->lists[l];
        if (li.size > li.capacity || li.capacity > od->totsize / (entry ? entry : 1) ||
            li.offset > od->totsize - li.capacity * entry)
            return cdb_seterr(CDB_CORRUPT, "the lists file %s: list %zu lies outside it",
                              od->filename.c_str(), l);
    }
    return CDB_OK;
}

extern "C" cdb_status cdb_ivf_clone_(FaissIndex *fx, FaissIndex **out) {
    *out = nullptr;
    try {
        *out = reinterpret_cast<FaissIndex *>(
            faiss::clone_index(reinterpret_cast<faiss::Index *>(fx)));
    } catch (const std::exception &e) {
        return fail("clone_index", e);
    }
    return CDB_OK;
}

extern "C" cdb_status cdb_ivf_remap_ids_(FaissIndex *fx, const int64_t *from, const int64_t *to,
                                         size_t n) {
    using idx_t = faiss::Index::idx_t;
    faiss::IndexIVF *ivf = ivf_of(fx);
    if (!ivf) return cdb_seterr(CDB_INVALID, "renaming ids: not an IVF index");
    if (ivf->direct_map.type != faiss::DirectMap::NoMap)
        return cdb_seterr(CDB_UNSUPPORTED, "renaming ids: the index keeps a direct map");
    try {
        faiss::InvertedLists *il = ivf->invlists;
        size_t cs = il->code_size, kept = 0;
        std::vector<idx_t> ids;
        std::vector<uint8_t> codes;
        for (size_t l = 0; l < il->nlist; l++) {
            size_t sz = il->list_size(l);
            if (!sz) continue;
            ids.clear();
            codes.clear();
            { /* the kept entries, renamed, in their order */
                faiss::InvertedLists::ScopedIds li(il, l);
                faiss::InvertedLists::ScopedCodes lc(il, l);
                for (size_t j = 0; j < sz; j++) {
                    const int64_t *p = std::lower_bound(from, from + n, (int64_t)li[j]);
                    if (p == from + n || *p != (int64_t)li[j]) continue;
                    ids.push_back((idx_t)to[p - from]);
                    codes.insert(codes.end(), lc.get() + j * cs, lc.get() + (j + 1) * cs);
                }
            }
            if (!ids.empty()) il->update_entries(l, 0, ids.size(), ids.data(), codes.data());
            if (ids.size() != sz) il->resize(l, ids.size());
            kept += ids.size();
        }
        ivf->ntotal = (idx_t)kept;
        sync_ntotal(fx);
    } catch (const std::exception &e) {
        return fail("renaming the ids of inverted lists", e);
    }
    return CDB_OK;
}

extern "C" cdb_status cdb_ivf_merge_(FaissIndex *dst, FaissIndex *const *parts, int n_parts,
                                     const char *lists_path) {
    faiss::IndexIVF *d = ivf_of(dst);
    std::vector<const faiss::InvertedLists *> ils;
    if (!d) return cdb_seterr(CDB_INVALID, "merge: the destination is not an IVF index");
    try {
        for (int i = 0; i < n_parts; i++) {
            faiss::IndexIVF *p = ivf_of(parts[i]);
            if (!p) return cdb_seterr(CDB_INVALID, "merge: part %d is not an IVF index", i);
            d->check_compatible_for_merge(*p);
            ils.push_back(p->invlists);
        }
        if (!lists_path) { /* in memory: each part's entries move into dst's lists */
            for (int i = 0; i < n_parts; i++) {
                d->merge_from(*ivf_of(parts[i]), 0);
                sync_ntotal(parts[i]);
            }
            sync_ntotal(dst);
            return CDB_OK;
        }
        /* On disk: one file holding dst's lists and every part's, list by list. */
        quiet_stdout quiet;
        ils.insert(ils.begin(), d->invlists);
        auto *od = new faiss::OnDiskInvertedLists(d->nlist, d->code_size, lists_path);
        size_t ntotal = 0;
        try {
            ntotal = od->merge_from(ils.data(), (int)ils.size());
        } catch (...) {
            delete od;
            throw;
        }
        d->replace_invlists(od, true);
        d->ntotal = (faiss::Index::idx_t)ntotal;
        for (int i = 0; i < n_parts; i++) { /* the parts' entries now live in the file */
            faiss::IndexIVF *p = ivf_of(parts[i]);
            p->invlists->reset();
            p->ntotal = 0;
            sync_ntotal(parts[i]);
        }
        sync_ntotal(dst);
    } catch (const std::exception &e) {
        return fail("merge of inverted lists", e);
    }
    return CDB_OK;
}

extern "C" cdb_status cdb_ivf_to_ondisk_(FaissIndex *fx, const char *lists_path) {
    faiss::IndexIVF *d = ivf_of(fx);
    if (!d) return cdb_seterr(CDB_UNSUPPORTED, "on-disk lists need an IVF index");
    try {
        quiet_stdout quiet;
        auto *od = new faiss::OnDiskInvertedLists(d->nlist, d->code_size, lists_path);
        const faiss::InvertedLists *one = d->invlists;
        try {
            od->merge_from(&one, 1);
        } catch (...) {
            delete od;
            throw;
        }
        d->replace_invlists(od, true);
    } catch (const std::exception &e) {
        return fail("moving the inverted lists to disk", e);
    }
    return CDB_OK;
}
