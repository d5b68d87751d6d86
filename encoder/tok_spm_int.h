/*
** tok_spm_int.h: the C face of encoder/tok_spm.cc, a thin shim over Debian's
** libsentencepiece (SentencePiece .model files: SigLIP's spiece.model, a unigram
** vocabulary, and Gemma's tokenizer.model for SigLIP2, BPE with byte fallback).
** Private to encoder/: tok.c builds the reference text pipelines on top of it.
**
** No C++ exception crosses this interface: every failure is a cdb_status with its
** message set (cdb_seterr). A cdb_spm is immutable after open; encode calls may
** run concurrently (SentencePieceProcessor::Encode is const).
*/
#ifndef CDB_TOK_SPM_INT_H
#define CDB_TOK_SPM_INT_H

#include <stddef.h>
#include <stdint.h>

#include "core/core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cdb_spm cdb_spm;

/* The largest .model file accepted (Gemma's is 4.2 MB, mT5's 4.3 MB). */
#define CDB_SPM_MAX_FILE ((size_t)256 << 20)

/* Loads a serialized ModelProto from memory. no_dummy_prefix: 1 sets the
** normalizer's add_dummy_prefix to false, as transformers' SiglipTokenizer does
** (get_spm_processor: NormalizerSpec merged into the model), 0 keeps the file's.
** name: for messages only. Errors: CDB_CORRUPT (not a model libsentencepiece
** accepts, with its message), CDB_NOMEM, CDB_INVALID. */
cdb_status cdb_spm_open_mem(const void *data, size_t n, int no_dummy_prefix, const char *name,
                            cdb_spm **out /* OUT */);
/* The same from a file (CDB_NOTFOUND, CDB_IO, CDB_CORRUPT when over CDB_SPM_MAX_FILE). */
cdb_status cdb_spm_open(const char *path, int no_dummy_prefix, cdb_spm **out /* OUT */);
void cdb_spm_free(cdb_spm *s);

/* Ids of text (len bytes, need not be NUL-terminated; invalid UTF-8 is the
** library's business: it encodes each bad byte as U+FFFD). No bos/eos added.
** *ids: cdb_malloc'ed (non-NULL even when *n == 0), the caller cdb_frees it. */
cdb_status cdb_spm_encode(const cdb_spm *s, const char *text, size_t len,
                          int32_t **ids /* OUT */, size_t *n /* OUT */);

int cdb_spm_vocab_size(const cdb_spm *s);
/* Piece string of id (UTF-8, "▁" for spaces); NULL out of range. Borrowed. */
const char *cdb_spm_piece(const cdb_spm *s, int id);
/* Id of an exact piece, -1 when the vocabulary has no such piece. */
int cdb_spm_piece_id(const cdb_spm *s, const char *piece);
/* The model's own unk / bos / eos / pad ids (-1 where the model has none). */
int cdb_spm_unk_id(const cdb_spm *s);
int cdb_spm_bos_id(const cdb_spm *s);
int cdb_spm_eos_id(const cdb_spm *s);
int cdb_spm_pad_id(const cdb_spm *s);

#ifdef __cplusplus
}
#endif

#endif /* CDB_TOK_SPM_INT_H */
