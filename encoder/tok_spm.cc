/*
** tok_spm.cc: SentencePiece .model files through Debian's libsentencepiece, behind
** the C interface of tok_spm_int.h. C++ (as index/ivf.cc, over FAISS): the library's
** API is C++ (absl::string_view, util::Status, std::vector), so this file turns it
** into cdb_status + message and catches every exception at the boundary.
**
** Why the library and not a C port: the ids must equal python3-sentencepiece's,
** which is this same library (0.1.97 in Debian) underneath; the unigram Viterbi
** search, the BPE merge order with byte fallback, and the normalizer's compiled
** charsmap (nmt_nfkc: a double-array trie over precompiled NFKC rules) would each be
** a re-implementation to keep equal by testing alone, and the library is one
** Debian package away.
*/
#include "encoder/tok_spm_int.h"

#include <sentencepiece_processor.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>
#include <string>
#include <vector>

struct cdb_spm {
    sentencepiece::SentencePieceProcessor sp;
};

/* NormalizerSpec{add_dummy_prefix: false} as ModelProto field 3 (normalizer_spec,
** length-delimited): protobuf merges a repeated singular message field into the
** first, so appending these bytes is NormalizerSpec.MergeFrom, what transformers'
** SiglipTokenizer.get_spm_processor does with the parsed proto. Inside: field 3
** (add_dummy_prefix, varint) = 0. */
static const char k_no_dummy_prefix[] = {0x1A, 0x02, 0x18, 0x00};

extern "C" cdb_status cdb_spm_open_mem(const void *data, size_t n, int no_dummy_prefix,
                                       const char *name, cdb_spm **out) {
    if (!out) return cdb_seterr(CDB_INVALID, "cdb_spm_open_mem: out is NULL");
    *out = nullptr;
    if (!data && n) return cdb_seterr(CDB_INVALID, "cdb_spm_open_mem: NULL data");
    if (!name) name = "(memory)";
    cdb_spm *s = nullptr;
    try {
        std::string proto(static_cast<const char *>(data), n);
        if (no_dummy_prefix) proto.append(k_no_dummy_prefix, sizeof k_no_dummy_prefix);
        s = new cdb_spm;
        sentencepiece::util::Status st = s->sp.LoadFromSerializedProto(proto);
        if (!st.ok()) {
            delete s;
            return cdb_seterr(CDB_CORRUPT, "tokenizer: %s: not a SentencePiece model (%s)", name,
                              st.message());
        }
        if (s->sp.GetPieceSize() <= 0 || s->sp.GetPieceSize() >= (1 << 24)) {
            int size = s->sp.GetPieceSize();
            delete s;
            return cdb_seterr(CDB_CORRUPT, "tokenizer: %s: %d pieces", name, size);
        }
    } catch (const std::bad_alloc &) {
        delete s;
        return cdb_seterr(CDB_NOMEM, "tokenizer: %s: out of memory", name);
    } catch (...) {
        delete s;
        return cdb_seterr(CDB_CORRUPT, "tokenizer: %s: libsentencepiece failed to load it", name);
    }
    *out = s;
    return CDB_OK;
}

extern "C" cdb_status cdb_spm_open(const char *path, int no_dummy_prefix, cdb_spm **out) {
    if (!out) return cdb_seterr(CDB_INVALID, "cdb_spm_open: out is NULL");
    *out = nullptr;
    if (!path) return cdb_seterr(CDB_INVALID, "cdb_spm_open: path is NULL");
    FILE *f = std::fopen(path, "rb");
    if (!f)
        return cdb_seterr(errno == ENOENT ? CDB_NOTFOUND : CDB_IO, "tokenizer: %s: %s", path,
                          std::strerror(errno));
    cdb_status rc = CDB_OK;
    char *buf = nullptr;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n == cap) {
            if (cap >= CDB_SPM_MAX_FILE) {
                rc = cdb_seterr(CDB_CORRUPT, "tokenizer: %s: larger than %zu MB, not a "
                                "SentencePiece model", path, CDB_SPM_MAX_FILE >> 20);
                break;
            }
            cap = cap ? cap * 2 : (size_t)1 << 20;
            char *nb = static_cast<char *>(cdb_realloc(buf, cap));
            if (!nb) {
                rc = cdb_seterr(CDB_NOMEM, "tokenizer: %s: out of memory", path);
                break;
            }
            buf = nb;
        }
        size_t got = std::fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) {
            if (std::ferror(f)) rc = cdb_seterr(CDB_IO, "tokenizer: %s: read error", path);
            break;
        }
    }
    std::fclose(f);
    if (rc == CDB_OK) rc = cdb_spm_open_mem(buf, n, no_dummy_prefix, path, out);
    cdb_free(buf);
    return rc;
}

extern "C" void cdb_spm_free(cdb_spm *s) { delete s; }

extern "C" cdb_status cdb_spm_encode(const cdb_spm *s, const char *text, size_t len,
                                     int32_t **ids, size_t *n) {
    if (!s || !ids || !n || (!text && len))
        return cdb_seterr(CDB_INVALID, "cdb_spm_encode: invalid argument");
    *ids = nullptr;
    *n = 0;
    try {
        std::vector<int> v;
        sentencepiece::util::Status st =
            s->sp.Encode(absl::string_view(text ? text : "", len), &v);
        if (!st.ok())
            return cdb_seterr(CDB_INVALID, "tokenizer: SentencePiece: %s", st.message());
        int32_t *o = static_cast<int32_t *>(cdb_malloc((v.size() ? v.size() : 1) * sizeof *o));
        if (!o) return cdb_seterr(CDB_NOMEM, "tokenizer: out of memory");
        for (size_t i = 0; i < v.size(); i++) o[i] = v[i];
        *ids = o;
        *n = v.size();
    } catch (const std::bad_alloc &) {
        return cdb_seterr(CDB_NOMEM, "tokenizer: out of memory (%zu bytes of text)", len);
    } catch (...) {
        return cdb_seterr(CDB_INVALID, "tokenizer: SentencePiece failed on the text");
    }
    return CDB_OK;
}

extern "C" int cdb_spm_vocab_size(const cdb_spm *s) { return s ? s->sp.GetPieceSize() : 0; }

extern "C" const char *cdb_spm_piece(const cdb_spm *s, int id) {
    if (!s || id < 0 || id >= s->sp.GetPieceSize()) return nullptr;
    return s->sp.IdToPiece(id).c_str(); // a reference into the loaded model
}

extern "C" int cdb_spm_piece_id(const cdb_spm *s, const char *piece) {
    if (!s || !piece) return -1;
    try {
        int id = s->sp.PieceToId(piece); // the unk id when absent
        return s->sp.IdToPiece(id) == piece ? id : -1;
    } catch (...) {
        return -1;
    }
}

extern "C" int cdb_spm_unk_id(const cdb_spm *s) { return s ? s->sp.unk_id() : -1; }
extern "C" int cdb_spm_bos_id(const cdb_spm *s) { return s ? s->sp.bos_id() : -1; }
extern "C" int cdb_spm_eos_id(const cdb_spm *s) { return s ? s->sp.eos_id() : -1; }
extern "C" int cdb_spm_pad_id(const cdb_spm *s) { return s ? s->sp.pad_id() : -1; }
