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
#include <faiss/IndexIVFPQ.h>
#include <faiss/clone_index.h>
#include <faiss/impl/AuxIndexStructures.h>
#include <faiss/impl/DistanceComputer.h>
#include <faiss/impl/io.h>
#include <faiss/index_io.h>
#include <faiss/invlists/OnDiskInvertedLists.h>
#include <faiss/utils/Heap.h>

#include "kernels/kernels.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <omp.h>

#include <algorithm>
#include <atomic>
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
    return cdb_seterr(CDB_ERROR, "faiss: %s failed: %s", what, cdb_index_faiss_reason_(e.what()));
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

/* An IVF index whose coarse quantizer clipdb walks: IVF at the top (not inside a
** pre-transform), an HNSW quantizer over flat centroids, all under inner product. */
struct walkable {
    faiss::IndexIVF *ivf = nullptr;
    faiss::IndexHNSW *hq = nullptr;
    faiss::IndexFlat *cents = nullptr;
};

bool walkable_of(FaissIndex *fx, walkable *w) {
    faiss::Index *top = reinterpret_cast<faiss::Index *>(fx);
    w->ivf = dynamic_cast<faiss::IndexIVF *>(top);
    w->hq = w->ivf ? dynamic_cast<faiss::IndexHNSW *>(w->ivf->quantizer) : nullptr;
    w->cents = w->hq ? dynamic_cast<faiss::IndexFlat *>(w->hq->storage) : nullptr;
    return w->cents && w->ivf->metric_type == faiss::METRIC_INNER_PRODUCT &&
           w->hq->metric_type == faiss::METRIC_INNER_PRODUCT &&
           w->cents->ntotal == (faiss::Index::idx_t)w->ivf->nlist;
}

/* The k nearest lists of one query (lists, dis: k each, best first, dis as FAISS's
** HNSW holds them: minus the inner product): IndexHNSW::search's steps for one query. */
void walk_one(const walkable &w, centroid_ip_dc &dc, faiss::VisitedTable &vt, const float *q,
              faiss::Index::idx_t k, faiss::Index::idx_t *lists, float *dis) {
    dc.set_query(q);
    faiss::maxheap_heapify(k, dis, lists);
    w.hq->hnsw.search(dc, (int)k, lists, dis, vt);
    faiss::maxheap_reorder(k, dis, lists);
}

/* Each of x[n]'s list (the nearest centroid by the walk, as IndexIVF::add_with_ids's
** quantizer->assign finds it), the vectors shared out over `threads` OpenMP threads.
** false when a thread failed (out of memory). */
bool walk_assign(const walkable &w, int64_t n, const float *x, faiss::Index::idx_t *lists,
                 int threads) {
    std::atomic<bool> ok{true};
#pragma omp parallel num_threads(threads)
    {
        try {
            centroid_ip_dc dc(w.cents->get_xb(), (size_t)w.ivf->d);
            faiss::VisitedTable vt((int)w.cents->ntotal);
#pragma omp for schedule(dynamic, 64)
            for (int64_t i = 0; i < n; i++) {
                float dis;
                walk_one(w, dc, vt, x + (size_t)i * w.ivf->d, 1, lists + i, &dis);
            }
        } catch (...) {
            ok = false;
        }
    }
    return ok;
}

/* IndexIVFPQ::add_core_o's codes, computed here: each vector's residual to its list's
** centroid (x - the centroid, as compute_residual forms it), then for each of the PQ's M
** sub-vectors its nearest centroid, found by cdb_k_nearest_l2_t_f32 (AVX2) with FAISS's
** own roundings (its generic build sums each distance with a scalar loop): the same
** bytes. 8-bit codes only (false otherwise: FAISS encodes). */
bool pq_encode(const walkable &w, int64_t n, const float *x, const faiss::Index::idx_t *lists,
               uint8_t *codes, int threads) {
    auto *ivpq = dynamic_cast<faiss::IndexIVFPQ *>(w.ivf);
    if (!ivpq || !ivpq->by_residual || ivpq->pq.nbits != 8 || ivpq->code_size != ivpq->pq.M)
        return false;
    const faiss::ProductQuantizer &pq = ivpq->pq;
    const size_t d = (size_t)w.ivf->d, m_n = pq.M, dsub = pq.dsub, ksub = pq.ksub;
    std::vector<float> yt(m_n * dsub * ksub); /* per sub-quantizer: dsub rows of ksub */
    for (size_t m = 0; m < m_n; m++)
        for (size_t k = 0; k < ksub; k++)
            for (size_t j = 0; j < dsub; j++)
                yt[(m * dsub + j) * ksub + k] = pq.get_centroids(m, k)[j];
    const float *cents = w.cents->get_xb();
    std::atomic<bool> ok{true};
#pragma omp parallel num_threads(threads)
    {
        try {
            std::vector<float> r(d);
#pragma omp for schedule(static)
            for (int64_t i = 0; i < n; i++) {
                const float *xi = x + (size_t)i * d;
                if (lists[i] < 0) continue; /* FAISS stores no entry for it */
                const float *c = cents + (size_t)lists[i] * d;
                for (size_t j = 0; j < d; j++) r[j] = xi[j] - c[j];
                for (size_t m = 0; m < m_n; m++)
                    codes[(size_t)i * m_n + m] = (uint8_t)cdb_k_nearest_l2_t_f32(
                        r.data() + m * dsub, yt.data() + m * dsub * ksub, ksub, dsub);
            }
        } catch (...) {
            ok = false;
        }
    }
    if (!ok) throw std::bad_alloc();
    return true;
}

} // namespace

extern "C" cdb_status cdb_ivf_add_(FaissIndex *fx, int64_t n, const float *x,
                                   const int64_t *ids, int threads, int *handled) {
    using idx_t = faiss::Index::idx_t;
    walkable w;
    *handled = 0;
    if (!walkable_of(fx, &w) || w.ivf->direct_map.type != faiss::DirectMap::NoMap ||
        !w.ivf->is_trained)
        return CDB_OK; /* another shape: FAISS's own add */
    if (threads < 1) threads = 1;
    try {
        std::vector<idx_t> lists((size_t)n);
        if (!walk_assign(w, n, x, lists.data(), threads)) throw std::bad_alloc();
        std::vector<uint8_t> codes;
        codes.resize((size_t)n * w.ivf->code_size);
        if (!pq_encode(w, n, x, lists.data(), codes.data(), threads)) {
            w.ivf->add_core(n, x, ids, lists.data()); /* FAISS encodes, lists given */
        } else { /* add_core_o's tail: the entries in input order, then the count */
            for (int64_t i = 0; i < n; i++)
                if (lists[(size_t)i] >= 0)
                    w.ivf->invlists->add_entry((size_t)lists[(size_t)i], ids[i],
                                               codes.data() + (size_t)i * w.ivf->code_size);
            w.ivf->ntotal += n;
        }
    } catch (const std::exception &e) {
        return fail("add", e);
    }
    *handled = 1;
    return CDB_OK;
}

extern "C" cdb_status cdb_ivf_search_one_(FaissIndex *fx, const float *q, int64_t k,
                                          float *D, int64_t *L, int *handled) {
    using idx_t = faiss::Index::idx_t;
    walkable w;
    *handled = 0;
    if (!walkable_of(fx, &w) || w.ivf->nprobe < 1)
        return CDB_OK; /* another shape (e.g. inside a pre-transform): FAISS's own search */
    faiss::IndexIVF *ivf = w.ivf;
    try {
        idx_t nprobe = std::min((idx_t)ivf->nprobe, (idx_t)ivf->nlist);
        std::vector<idx_t> lists(nprobe);
        std::vector<float> dis(nprobe);
        centroid_ip_dc dc(w.cents->get_xb(), (size_t)ivf->d);
        faiss::VisitedTable vt((int)w.cents->ntotal);
        walk_one(w, dc, vt, q, nprobe, lists.data(), dis.data());
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

extern "C" cdb_status cdb_ivf_list_(FaissIndex *fx, int list, int64_t *n, size_t *code_size,
                                    int64_t *ids, uint8_t *codes) {
    faiss::IndexIVF *ivf = ivf_of(fx);
    if (!ivf || list < 0 || (size_t)list >= ivf->nlist)
        return cdb_seterr(CDB_INVALID, "list %d: no such inverted list", list);
    try {
        const faiss::InvertedLists *il = ivf->invlists;
        size_t len = il->list_size((size_t)list);
        *n = (int64_t)len, *code_size = il->code_size;
        if (ids && len) {
            faiss::InvertedLists::ScopedIds got(il, (size_t)list);
            memcpy(ids, got.get(), len * sizeof *ids);
        }
        if (codes && len) {
            faiss::InvertedLists::ScopedCodes got(il, (size_t)list);
            memcpy(codes, got.get(), len * il->code_size);
        }
    } catch (const std::exception &e) {
        return fail("reading an inverted list", e);
    }
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

extern "C" cdb_status cdb_ivf_lists_name_(FaissIndex *fx, const char *index_path,
                                          char **saved) {
    faiss::IndexIVF *ivf = ivf_of(fx);
    auto *od = ivf ? dynamic_cast<faiss::OnDiskInvertedLists *>(ivf->invlists) : nullptr;
    *saved = nullptr;
    if (!od) return CDB_OK;
    const std::string &name = od->filename;
    size_t ls = name.find_last_of('/');
    const char *is = strrchr(index_path, '/');
    std::string lists_dir = ls == std::string::npos ? "." : name.substr(0, ls);
    std::string index_dir = is ? std::string(index_path, (size_t)(is - index_path)) : ".";
    char a[PATH_MAX], b[PATH_MAX];
    if (lists_dir.empty()) lists_dir = "/";
    if (index_dir.empty()) index_dir = "/";
    if (!realpath(lists_dir.c_str(), a) || !realpath(index_dir.c_str(), b) || strcmp(a, b))
        return cdb_seterr(CDB_INVALID, "the lists file %s is not in the folder of the index "
                          "file %s: an index names its lists file by its name in its own folder",
                          name.c_str(), index_path);
    if (!(*saved = strdup(name.c_str()))) return cdb_seterr(CDB_NOMEM, "lists name");
    od->filename = name.substr(ls == std::string::npos ? 0 : ls + 1);
    return CDB_OK;
}

extern "C" void cdb_ivf_lists_name_restore_(FaissIndex *fx, char *saved) {
    faiss::IndexIVF *ivf = ivf_of(fx);
    auto *od = ivf ? dynamic_cast<faiss::OnDiskInvertedLists *>(ivf->invlists) : nullptr;
    if (od && saved) od->filename = saved;
    free(saved);
}

extern "C" cdb_status cdb_ivf_read_(FILE *f, const char *index_path, FaissIndex **out) {
    *out = nullptr;
    try {
        faiss::FileIOReader reader(f); /* reads on from f's position; f stays open */
        reader.name = index_path;
        /* FAISS prints the lists file's new name on stdout: quieted */
        quiet_stdout quiet;
        *out = reinterpret_cast<FaissIndex *>(
            faiss::read_index(&reader, faiss::IO_FLAG_ONDISK_SAME_DIR));
    } catch (const std::exception &e) {
        return fail("read_index", e);
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
