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

#endif /* CDB_TOK_INT_H */
