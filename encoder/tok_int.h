/*
** tok_int.h: private interface between the two tokenizer files of encoder/:
** text_clean.c (ftfy-like cleaning, HTML unescape, whitespace, Python lower())
** and tokenizer.c (vocabulary loading, pre-tokenization, BPE). Not part of the
** module's contract; nothing outside encoder/ includes it.
*/
#ifndef CDB_TOK_INT_H
#define CDB_TOK_INT_H

#include <stddef.h>
#include <stdint.h>

#include "core/core.h"

/* The text cleanings of the references (docs/tokenizer.md), each a Python
** expression reproduced step by step. Input decoding is shared: invalid UTF-8
** becomes U+FFFD one byte at a time. */
typedef enum cdb_tok_clean_mode {
    /* OpenAI CLIP's simple_tokenizer (below: cdb_tok_clean32). */
    CDB_TOK_CLEAN_CLIP,
    /* OpenCLIP's clean='canonicalize': canonicalize_text(basic_clean(t)), that is
    ** ftfy.fix_text -> html.unescape x2 -> strip -> replace('_', ' ') -> remove
    ** string.punctuation -> lower -> " ".join(split()) -> strip. */
    CDB_TOK_CLEAN_CANONICALIZE,
    /* transformers' SiglipTokenizer up to its sp_model.encode: '\u2581' + t with
    ** every '\u2581' replaced by ' ' (tokenize), lower (do_lower_case), then
    ** canonicalize_text: remove string.punctuation -> re.sub(r'\s+', ' ') -> strip. */
    CDB_TOK_CLEAN_SIGLIP_HF,
    /* Nothing but the decoding (Gemma's tokenizer in transformers). */
    CDB_TOK_CLEAN_NONE,
} cdb_tok_clean_mode;

cdb_status cdb_tok_clean32_mode(const char *text, size_t len, cdb_tok_clean_mode mode,
                                uint32_t **out /* OUT */, size_t *n_out /* OUT */);

/* The whole cleaning pipeline of OpenAI CLIP's simple_tokenizer, ending in
** Python's str.lower(): ftfy.fix_text -> html.unescape x2 -> strip -> collapse
** \s+ -> strip -> lower. text: len bytes of UTF-8 (invalid sequences become
** U+FFFD). *out: n code points (never surrogates, never > 0x10FFFF), allocated
** with cdb_malloc (non-NULL even when *n_out == 0); the caller cdb_frees it. */
cdb_status cdb_tok_clean32(const char *text, size_t len, uint32_t **out /* OUT */,
                           size_t *n_out /* OUT */);

/* Python's str.lower() (full case mappings, final sigma), which is also JavaScript's
** String.prototype.toLowerCase(): s[0..n) -> *out (cdb_malloc'd, non-NULL), *n_out
** code points. Used by the tokenizer.json backend (tok_hf_text.c). CDB_NOMEM only. */
cdb_status cdb_tok_lower32(const uint32_t *s, size_t n, uint32_t **out /* OUT */,
                           size_t *n_out /* OUT */);

/* Writes cp as UTF-8 into dst (room for 4 bytes); returns the byte count. */
size_t cdb_tok_utf8_put(uint32_t cp, char *dst);

/* Character classes of the pre-tokenization pattern (Unicode general categories
** via utf8proc): \p{L}, \p{N}, and \s as the `regex` module defines it. */
int cdb_tok_is_letter(uint32_t cp);
int cdb_tok_is_number(uint32_t cp);
int cdb_tok_is_space(uint32_t cp);

/* ---- CLIP's BPE backend (tokenizer.c) ----------------------------------------
** The contracts of encoder.h's cdb_tok_open / _encode / _tokenize for a CLIP
** vocabulary; tok.c dispatches to these. */
typedef struct cdb_tok_bpe cdb_tok_bpe;
cdb_status cdb_tok_bpe_open(const char *path, cdb_tok_bpe **out /* OUT */);
void cdb_tok_bpe_free(cdb_tok_bpe *tok);
int cdb_tok_bpe_vocab_size(const cdb_tok_bpe *tok);
int cdb_tok_bpe_sot_id(const cdb_tok_bpe *tok);
int cdb_tok_bpe_eot_id(const cdb_tok_bpe *tok);
const char *cdb_tok_bpe_token_str(const cdb_tok_bpe *tok, int id);
cdb_status cdb_tok_bpe_encode(const cdb_tok_bpe *tok, const char *text, size_t len,
                              int32_t *ids, int max_ids, int *n_ids /* OUT */);
cdb_status cdb_tok_bpe_tokenize(const cdb_tok_bpe *tok, const char *text, size_t len,
                                int context_len, int32_t *ids /* OUT */,
                                int *eot_index /* OUT */, int *truncated /* OUT */);

#endif /* CDB_TOK_INT_H */
