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
/* Room in *p, an array of *cap elements of elem bytes, for need of them: the room
** doubles (from 64) until it holds them. 0, or -1 when out of memory (*p and *cap
** kept). The tokenizers' growing buffers. */
int cdb_tok_grow(void **p, size_t *cap, size_t need, size_t elem);

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

/* The files cdb_tok_bpe_open(path) reads, in its order (1: an OpenAI .txt[.gz]; 2:
** vocab.json, merges.txt): into files[0..*n). 0 on success; -1 when path is a folder
** with neither layout (*n == 1) or a name is too long. */
int cdb_tok_bpe_sources(const char *path, char files[2][4096], int *n /* OUT */);

/* A tokenizer's tables as flat arrays (what the tokenizer cache, tokcache.c, stores).
** str[id]: the offset of id's NUL-terminated string in arena, UINT32_MAX for an id
** with no string; hslot / hfull: the string hash (open addressing, hcap a power of
** two; slot value id + 1, 0 empty; hfull the high half of the string's FNV-1a);
** mkey / mrank / mres: the merge hash ((left << 32 | right) + 1, 0 empty; its rank
** and the merged id). The layout is tokenizer.c's: a change to it, to the hashes or
** to how a vocabulary becomes tables must bump tokcache.c's TC_FORMAT. */
typedef struct cdb_tok_bpe_dims {
    int32_t n_vocab, n_merges, sot, eot;
    int32_t byte_id[256], byte_id_w[256]; /* each byte's symbol, and with "</w>" */
    uint64_t arena_bytes, hcap, mcap;
} cdb_tok_bpe_dims;

typedef struct cdb_tok_bpe_tables {
    cdb_tok_bpe_dims d;
    const uint32_t *str;           /* d.n_vocab */
    const char *arena;             /* d.arena_bytes */
    const uint32_t *hslot, *hfull; /* d.hcap each */
    const uint64_t *mkey;          /* d.mcap */
    const int32_t *mrank, *mres;   /* d.mcap each */
} cdb_tok_bpe_tables;

/* tok's tables, borrowed (they live as long as tok). */
void cdb_tok_bpe_tables_of(const cdb_tok_bpe *tok, cdb_tok_bpe_tables *out /* OUT */);
/* A tokenizer over tables it borrows (read only), after checking every bound the
** encoder relies on, so that no table content can make it read out of bounds, loop
** forever or hand out an id past the vocabulary: counts, a NUL-terminated arena,
** string offsets, hash sizes (powers of two, each hash with an empty slot), slot ids
** and merge results. proven (cdb_tc_sects.proven): these exact bytes passed every check
** before, so the checks that pass over whole tables are skipped. It cannot check that
** the tables are the ones a vocabulary gives (the cache's checksum does). On success
** *out owns map (munmap'ed by cdb_tok_bpe_free; NULL: the tables must outlive *out).
** CDB_CORRUPT (which bound), CDB_NOMEM. */
cdb_status cdb_tok_bpe_from_tables(const cdb_tok_bpe_tables *tb, int proven, void *map,
                                   size_t map_size, cdb_tok_bpe **out /* OUT */);

/* ---- the tokenizer cache (tokcache.c) ----------------------------------------------
** cdb_tok_bpe_open(path) through a file of the tables in the encoder's cache folder
** (encoder_int.h, cachedir.c), keyed by the XXH3-128 of the vocabulary files' bytes:
** a hit maps and validates the file instead of building the tables (22 ms for the
** standard vocabulary); a miss, or a file refused for any reason, builds them as
** cdb_tok_bpe_open does and writes the file. Ids are the same either way. dir: NULL
** for the default folder. status (may be NULL): "hit", "hit (stamped)", "written",
** "rebuilt: <why the file was refused>", "not written: <why>", as the packed matrix
** cache says. Errors: cdb_tok_bpe_open's (a cache problem is never one).
** cdb_tok_hf_open_cached (tok_hf_int.h) is the same for a tokenizer.json. */
cdb_status cdb_tok_bpe_open_cached(const char *path, const char *dir, cdb_tok_bpe **out /* OUT */,
                                   char *status, size_t status_size);

/* A tokenizer's tables as the cache file holds them: a list of byte ranges (sections),
** in an order each kind of tokenizer fixes. Writing, the kind puts its tables (borrowed
** until the write ends; small headers go in the list's scratch); reading, it takes
** them back in the same order, each checked to hold a whole number of elements, and
** then checks every bound its tokenizer relies on. bad: a put past the limit, a take
** past the end or of the wrong size (sticky). proven: set by the cache when a valid stamp
** (core.h's cdb_stamp) proves that these exact bytes were hashed and passed every check
** of this format before (a stamp is written only after both): a kind may then skip the
** checks that pass over whole tables (the stamp's identity, inode and ctime, changes with
** any write to the file, so the bytes are those that passed), and the file is mapped
** without reading it all in. */
#define CDB_TC_MAX_SECT 48
typedef struct cdb_tc_sects {
    int n, at, bad, proven;
    const void *p[CDB_TC_MAX_SECT];
    uint64_t bytes[CDB_TC_MAX_SECT];
    _Alignas(8) unsigned char scratch[4096];
    size_t scratch_used;
} cdb_tc_sects;
void cdb_tc_put(cdb_tc_sects *s, const void *p, uint64_t bytes);
/* bytes of zeroed, 8-aligned memory that lives as long as s; NULL (bad) when full. */
void *cdb_tc_scratch(cdb_tc_sects *s, size_t bytes);
/* The next section and its count of elem-byte elements; NULL (and bad) when there is
** none or its size is not a multiple of elem. */
const void *cdb_tc_take(cdb_tc_sects *s, size_t elem, uint64_t *count /* OUT */);
/* cdb_tc_take, and NULL (bad) unless it holds exactly count elements. */
const void *cdb_tc_take_n(cdb_tc_sects *s, size_t elem, uint64_t count);

/* For the fuzz target and tests: recomputes, in place, the checksums of a tokenizer cache
** file's bytes (file[0..n)), so that damage reaches the checks behind them. -1 when n
** is shorter than a header. */
int cdb_tok_cache_reseal(void *file, size_t n);

#endif /* CDB_TOK_INT_H */
