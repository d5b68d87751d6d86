/*
** encoder.h: clipdb's CLIP encoder: models (safetensors, both key namings), the
** tokenizers (CLIP BPE, SentencePiece), image decoding + PIL-exact preprocessing, and
** the image and text towers. The module's whole public contract; everything else in encoder/ is
** private.
**
** Precision: the CPU path runs fp32 weights and activations; every embedding is
** returned as fp32 and, unless raw output is asked for, L2-normalized in fp32.
**
** Threading: a cdb_tok is immutable after open and may be shared by threads. Image
** functions are reentrant. A cdb_model holds weights only; encode calls on one
** model may run concurrently (each call owns its scratch).
**
** Sections are owned by different files: TOKENIZER (tok.c, tokenizer.c, tok_spm.cc,
** text_clean.c), IMAGE (image.c, preprocess.c), MODEL (safetensors.c, model.c, clip.c).
*/
#ifndef CDB_ENCODER_H
#define CDB_ENCODER_H

#include <stddef.h>
#include <stdint.h>

#include "core/core.h"
#include "kernels/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ==== TOKENIZER ================================================================
** One cdb_tok, two backends chosen from the file (docs/tokenizer.md):
** - CLIP's byte-level BPE, identical to OpenAI CLIP's simple_tokenizer (cleaning
**   included: ftfy 6.3.1's fix_text, html.unescape twice, whitespace, Python's
**   str.lower());
** - SentencePiece .model files through libsentencepiece (SigLIP's spiece.model,
**   Gemma's tokenizer.model for SigLIP2), with the text pipeline of the reference
**   the model was released with: cleaning, start/end tokens, truncation and padding
**   to the full context, ids identical to that reference;
** - Hugging Face tokenizer.json files (tok_hf*.c): the file's own normalizer,
**   pre-tokenizer, model and post-processor, ids identical to npm's
**   @huggingface/tokenizers, truncated and padded to the full context as transformers
**   does (docs/tokenizer.md). */

typedef struct cdb_tok cdb_tok;

typedef enum cdb_tok_kind {
    CDB_TOK_KIND_CLIP_BPE = 0,
    CDB_TOK_KIND_SENTENCEPIECE = 1,
    CDB_TOK_KIND_HF_JSON = 2, /* a Hugging Face tokenizer.json */
} cdb_tok_kind;

/* The reference whose text pipeline a SentencePiece tokenizer follows. A tokenizer.json
** follows its own file; OPENCLIP adds canonicalize before it, the others nothing. */
typedef enum cdb_tok_pipeline {
    /* From the file's name: spiece.model -> SIGLIP_HF, any other .model -> GEMMA_HF. */
    CDB_TOK_PIPE_AUTO = 0,
    /* transformers' SiglipTokenizer: lowercase, punctuation removed, whitespace
    ** collapsed, no dummy prefix (encoded after "<unk>", which is then dropped),
    ** </s> appended, padded with </s>. */
    CDB_TOK_PIPE_SIGLIP_HF,
    /* transformers' GemmaTokenizerFast as a SigLIP2 repository configures it: the text
    ** as given (no lowercasing: the processor leaves that to the caller), <bos> /
    ** <eos> as tokenizer_config.json says, padded with <pad>. */
    CDB_TOK_PIPE_GEMMA_HF,
    /* OpenCLIP's HFTokenizer(clean='canonicalize') over the model's own normalizer
    ** (timm/ViT-*-SigLIP* hub folders, v1 and SigLIP2): ftfy + html.unescape,
    ** '_' -> ' ', punctuation removed, lowercase, whitespace collapsed; special
    ** tokens as the tokenizer files say. */
    CDB_TOK_PIPE_OPENCLIP,
} cdb_tok_pipeline;

/* Opens a vocabulary, the backend picked from the path:
** - a path ending in ".model", or a folder with spiece.model or tokenizer.model (and
**   no CLIP files): SentencePiece. Its special tokens: add_bos_token, add_eos_token,
**   pad/eos/bos/unk_token from tokenizer_config.json (then special_tokens_map.json)
**   beside the file, as transformers reads them; without those files, the defaults
**   of the pipeline's reference (docs/tokenizer.md);
** - otherwise CLIP's BPE: a bpe_simple_vocab_16e6.txt.gz-style merges file (gzip or
**   plain; merges 1..48894 as OpenAI CLIP reads them), or a folder / vocab.json path
**   with vocab.json + merges.txt beside it (ids and special tokens from vocab.json).
**   A folder without vocab.json may hold bpe_simple_vocab_16e6.txt.gz instead;
** - a path ending in "tokenizer.json", or a folder whose only tokenizer is
**   tokenizer.json: that file (special tokens from its post-processor; the pad token
**   from tokenizer_config.json / special_tokens_map.json, else its padding section,
**   else <pad>, else the end token).
** pipeline: ignored for CLIP's BPE. Errors: CDB_NOTFOUND (no such file, or a folder
** with none of these files), CDB_UNSUPPORTED (a tokenizer.json component clipdb does
** not implement),
** CDB_CORRUPT (bad gzip, JSON or .model, a malformed merge line, a byte symbol, merge
** result or special token missing from the vocabulary), CDB_IO, CDB_NOMEM,
** CDB_INVALID (NULL or empty path). out: owned by the caller, freed with cdb_tok_free
** (which accepts NULL). */
cdb_status cdb_tok_open_pipeline(const char *path, cdb_tok_pipeline pipeline,
                                 cdb_tok **out /* OUT */);
/* cdb_tok_open_pipeline(path, CDB_TOK_PIPE_AUTO, out). */
cdb_status cdb_tok_open(const char *path, cdb_tok **out /* OUT */);
/* cdb_tok_open_pipeline through the tokenizer cache: a CLIP BPE vocabulary's or a
** tokenizer.json's tables are mapped from a file in cache_dir (NULL: the packed matrix
** cache's folder, see cdb_model_params.pack_cache_dir) written by an earlier open of the
** same vocabulary bytes, instead of being built (22 ms for the standard CLIP vocabulary,
** 1.2 s for Gemma's tokenizer.json), and the file is written when it is missing or
** refused (damaged, truncated, foreign: never trusted). Ids are identical either way.
** SentencePiece files open as without. Errors: cdb_tok_open_pipeline's (a cache that
** cannot be read or written is none). */
cdb_status cdb_tok_open_cached(const char *path, cdb_tok_pipeline pipeline,
                               const char *cache_dir, cdb_tok **out /* OUT */);
/* What the open did with the tokenizer cache: "off" (not asked, or a SentencePiece
** file), "hit", "hit (stamped)", "written", "rebuilt: <why the file was
** refused>" or "not written: <why>". Lives as long as tok. */
const char *cdb_tok_cache_status(const cdb_tok *tok);
void cdb_tok_free(cdb_tok *tok);

cdb_tok_kind cdb_tok_kind_of(const cdb_tok *tok);
/* The pipeline a SentencePiece tokenizer runs (never AUTO); for a tokenizer.json,
** OPENCLIP or AUTO (the file's own); AUTO for CLIP's BPE. */
cdb_tok_pipeline cdb_tok_pipeline_of(const cdb_tok *tok);
int cdb_tok_vocab_size(const cdb_tok *tok);
/* The start token cdb_tok_tokenize puts first: <|startoftext|> (49406 in the standard
** vocab); SentencePiece: <bos> where the pipeline adds it, else -1; tokenizer.json:
** the token its post-processor puts just before the text, else -1. */
int cdb_tok_sot_id(const cdb_tok *tok);
/* The end token cdb_tok_tokenize appends: <|endoftext|> (49407 in the standard
** vocab); SentencePiece: </s> / <eos> where the pipeline adds it, else -1;
** tokenizer.json: the token its post-processor puts just after the text, else -1. */
int cdb_tok_eot_id(const cdb_tok *tok);
/* What fills the context after the text: 0 for CLIP (as clip.tokenize), the pad
** token for SentencePiece (</s> for SigLIP, <pad> for Gemma) and tokenizer.json (as
** cdb_tok_open says). */
int cdb_tok_pad_id(const cdb_tok *tok);
/* Token string (CLIP: byte-level unicode form, "</w>" suffix included;
** SentencePiece: the piece, "\u2581" for a space); NULL if out of range. Borrowed: lives
** as long as tok. */
const char *cdb_tok_token_str(const cdb_tok *tok, int id);

/* CLIP's text cleaning step alone (ftfy-like fixes, HTML unescape twice, whitespace
** collapse, strip, lowercase), for tests and `clipdb tokenize --verbose`.
** Invalid UTF-8 is replaced (U+FFFD per bad byte), never fatal; len bytes are read,
** NULs included (text may be NULL when len is 0). *out: NUL-terminated, cdb_free it.
** Thread-safe; linear time in practice (a 1 MB text takes well under a second). */
cdb_status cdb_tok_clean(const char *text, size_t len, char **out /* OUT */);

/* The text as the tokenizer's reference cleans it before encoding (CLIP: as
** cdb_tok_clean; SentencePiece: its pipeline's cleaning; tokenizer.json: canonicalize
** for OPENCLIP, else the text as given: the file's normalizer is not shown), for
** `clipdb tokenize
** --verbose`. *out: NUL-terminated, cdb_free it. */
cdb_status cdb_tok_clean_for(const cdb_tok *tok, const char *text, size_t len,
                             char **out /* OUT */);

/* Ids of text without start/end tokens (CLIP: special tokens written in the text, in
** any case, give their ids; SentencePiece: never, see docs/tokenizer.md;
** tokenizer.json: its added tokens written in the text do, as in the reference; the
** post-processor's own tokens around the text are left out). Writes at
** most max_ids ids (ids may be NULL when max_ids is 0); *n_ids gets the full count
** (which may exceed max_ids). */
cdb_status cdb_tok_encode(const cdb_tok *tok, const char *text, size_t len, int32_t *ids,
                          int max_ids, int *n_ids /* OUT */);

/* What a model sees, context_len ids (context_len >= 2, else CDB_INVALID):
** - CLIP: [sot, ids..., eot] padded with 0; when too long, keeps the first
**   context_len-2 ids then eot (as clip.tokenize(truncate=True)). *eot_index: the
**   first position holding eot, where CLIP pools (argmax of the ids: eot is the
**   largest standard id); earlier than the appended eot only when the text itself
**   spells <|endoftext|>. Only the ids that fit are BPE-encoded; the whole text is
**   still cleaned.
** - SentencePiece: [bos?] ids [eos?] padded with the pad id to the full length, as
**   the model was trained (SigLIP pools at the last position); when too long, the
**   first context_len - (bos + eos) ids are kept (transformers' truncation=True).
**   *eot_index: the position of the appended end token (of the last id where the
**   pipeline appends none; 0 for nothing at all).
** - tokenizer.json: the file's ids (its post-processor's specials included) padded with
**   the pad id; when too long, the text's ids are cut so that they and the specials
**   fit (the Rust crate's truncation, transformers' truncation=True). *eot_index: the
**   last position before the padding. CDB_INVALID when context_len cannot hold the
**   specials.
** ids: caller-owned, context_len entries. *truncated: 1 when ids were dropped. Both
** may be NULL. */
cdb_status cdb_tok_tokenize(const cdb_tok *tok, const char *text, size_t len, int context_len,
                            int32_t *ids /* OUT */, int *eot_index /* OUT */,
                            int *truncated /* OUT */);

/* ==== IMAGE ====================================================================
** Decoding from memory, by content (never by file name): JPEG through libjpeg-turbo
** with PIL's settings; WebP (libwebp), TIFF (libtiff), HEIC/HEIF and AVIF (libheif),
** camera RAW (libraw); PNG, GIF, BMP, TGA, PSD and PNM through stb_image. Then the
** reference CLIP transform: resize the short side with PIL's bicubic, center crop
** (torchvision offsets), convert to RGB, scale to [0,1], normalize with mean/std.
** Bit-exact with PIL 9.4 + torchvision wherever PIL decodes the format (JPEG, PNG,
** WebP, TIFF, ...); what is reproduced and where we differ: docs/images.md.
** All image functions are reentrant (no shared state). */

/* PIL's decompression-bomb rule: Image.MAX_IMAGE_PIXELS is 89,478,485; PIL only warns
** (DecompressionBombWarning) up to twice that and raises DecompressionBombError above
** it, so the pixels PIL decodes are up to 2 x 89,478,485 (every 100 MP camera frame,
** most panoramas). A database may set its own (cdb_engine_set_max_pixels). */
#define CDB_IMAGE_DEFAULT_MAX_PIXELS (2 * 89478485LL)

typedef enum cdb_interp {
    CDB_INTERP_BICUBIC = 0, /* PIL Image.BICUBIC (CLIP's default) */
    CDB_INTERP_BILINEAR = 1
} cdb_interp;

typedef enum cdb_decode_mode {
    CDB_DECODE_EXACT = 0, /* full-resolution decode: PIL's pixels (the default) */
    CDB_DECODE_FAST = 1   /* the cheapest decode that still covers target_size (below) */
} cdb_decode_mode;

typedef struct cdb_image_params {
    int64_t max_pixels; /* refuse images with more declared pixels; 0 = default; < 0 invalid */
    int apply_exif;     /* 1: apply the EXIF orientation 2-8 like PIL's ImageOps.exif_transpose
                           (JPEG APP1, WebP EXIF chunk, PNG eXIf, TIFF tag 274; default);
                           0: ignore (reference parity). HEIF's irot/imir and RAW
                           orientation are part of those formats and always applied. */
    /* Appended fields (zero = the previous behaviour). */
    cdb_decode_mode decode;
    /* CDB_DECODE_FAST: the model's input size (cdb_model_info.preprocess.size); 0 means
    ** 224. The decoder may shrink the image while decoding as long as its short side
    ** stays >= target_size: JPEG scales in the DCT domain by the largest s of 1/2,
    ** 1/4, 1/8 with min(w / t, h / t) >= 1/s (integer division), as PIL's
    ** Image.draft("RGB", (t, t)) picks it, giving PIL's draft pixels; camera RAW files without a large enough preview use
    ** libraw's half-size demosaic; WebP, HEIF and TIFF decode at full size (their
    ** libraries have no cheaper exact-enough path). Ignored in CDB_DECODE_EXACT. */
    int target_size;
    /* 1: also the perceptual hash where this decode gives it for free (cdb_image.has_phash:
    ** a YCbCr or grayscale JPEG, from the DC terms its own entropy decoding reads). */
    int phash;
} cdb_image_params;
cdb_image_params cdb_image_params_default(void);

/* A decoded image in its own mode (the mode PIL would give it), before any
** conversion. Rows top to bottom, channels interleaved, after EXIF rotation. */
typedef struct cdb_image {
    int width, height;
    int channels;       /* 1 gray, 2 gray+alpha, 3 RGB, 4 RGBA (or CMYK, see is_cmyk) */
    int bits;           /* 8, or 16 (16-bit PNG/TIFF, PNM gray maxval > 255): host-endian uint16_t */
    int is_palette;     /* resize with nearest, as PIL does for modes "P" and "1": palette
                           PNG/GIF/BMP/TGA/TIFF (expanded to RGB, RGBA when the palette has
                           transparency) and 1-bit gray/black-and-white images */
    void *pixels;       /* width*height*channels samples of uint8_t or uint16_t */
    /* Appended fields. */
    int is_cmyk;        /* channels == 4 holds PIL's mode "CMYK" (0 = no ink), not RGBA: a
                           4-component JPEG or a CMYK TIFF. cdb_image_preprocess resizes it
                           in CMYK and converts to RGB after the crop, as PIL does. */
    int full_width, full_height; /* the image's size at full resolution, after the
                           orientation: width/height times the decode's reduction (equal to
                           width/height unless scale_denom > 1). What a catalog records. */
    int scale_denom;    /* 1; 2, 4, 8: JPEG DCT scaling (fast mode); 2: RAW half-size */
    const char *format; /* static: "JPEG", "PNG", "GIF", "BMP", "TGA", "PSD", "PNM", "WebP",
                           "TIFF", "HEIF", "AVIF", "RAW" */
    const char *source; /* static: "decoded" (the file's own image), "embedded preview" or
                           "half-size demosaic" (camera RAW), "first frame" (animated
                           WebP/GIF...), "primary image" (HEIF/AVIF) */
    int has_phash;      /* 1: phash is the file's perceptual hash (cdb_image_params.phash) */
    uint64_t phash;     /* a JPEG's DC hash (see cdb_image_phash), whatever the decode's scale */
} cdb_image;

/* Reads the stored width/height from the header only (no pixel decode, no EXIF
** rotation, no max_pixels check). Errors as cdb_image_decode. */
cdb_status cdb_image_probe(const void *buf, size_t n, int *width /* OUT */,
                           int *height /* OUT */);

/* The mark of clipdb's generated world (world/): every image it writes carries it as
** the first comment a writer can put in: a JPEG's COM segment among the segments
** before the first table (after SOI and APPn), a PNG's tEXt chunk "Software" among the
** chunks before IDAT. A file without it did not come from the world as written (a real
** photo, a re-saved world image): what the bundled model's hint is about. */
#define CDB_IMAGE_WORLD_MARK "clipdb-world"
/* 1 when buf (a file's bytes) carries CDB_IMAGE_WORLD_MARK as above, else 0. Reads at
** most the first 4 KiB. */
int cdb_image_world_marked(const void *buf, size_t n);

/* Decodes buf, its format sniffed from the content: JPEG (baseline, progressive,
** arithmetic; gray, YCbCr/RGB, CMYK/YCCK), PNG, BMP, GIF (first frame), TGA, PSD (RGB
** composite), binary PNM P5/P6, WebP (lossy/lossless, first frame of an animation),
** TIFF (first page), HEIC/HEIF/AVIF (primary image), camera RAW (DNG, CR2, CR3, NEF,
** ARW, RAF, ORF, RW2, PEF, ...: the embedded full-size JPEG preview when there is one,
** else a half-size demosaic; cdb_image.source says which). p == NULL means defaults.
** Refuses images over max_pixels, or with a side over 2^24, before decoding pixels
** (CDB_TOO_LARGE); unsupported data (12-bit/lossless JPEG, RLE BMP, PBM, unknown
** formats, a format this build has no library for: "HEIC: this clipdb was built
** without libheif") gives CDB_UNSUPPORTED, corrupt or truncated data CDB_CORRUPT,
** with a one-line reason in cdb_errmsg(). buf: not retained; at most 1 GiB. *out:
** NULL on error (never a partial image), else free with cdb_image_free. */
cdb_status cdb_image_decode(const void *buf, size_t n, const cdb_image_params *p,
                            cdb_image **out /* OUT */);
/* Reads a regular file (CDB_NOTFOUND / CDB_IO on failure) and decodes it; every
** error message starts with the path, "<path>: <why>" ("a.jpg: No such file or
** directory", "a.jpg: image: not a JPEG, ..."). */
cdb_status cdb_image_load(const char *path, const cdb_image_params *p, cdb_image **out /* OUT */);
void cdb_image_free(cdb_image *img); /* NULL is fine */

/* ---- telling images from other files (image.c: the one sniffer of clipdb) --------- */
/* The format of buf by its content, as cdb_image_decode dispatches on it ("JPEG",
** "PNG", "GIF", "BMP", "PNM", "TGA", "PSD", "WebP", "TIFF", "HEIC", "AVIF", "RAW": the
** names cdb_image.format uses), or NULL. strict = 1 answers only for a signature that
** a file of another kind is unlikely to begin with: no TGA (it has no magic number), BMP
** only with a known DIB header size, PNM only as "P1".."P6", whitespace, then a digit
** or a comment. A
** walk asks strictly about a file whose name is no image's; the first 32 bytes are
** enough. Static string. */
const char *cdb_image_sniff(const void *buf, size_t n, int strict);
/* The MIME type of the image in buf by its strict signature ("image/jpeg", ...), or
** "application/octet-stream" (camera RAW and anything unrecognized). Static string. */
const char *cdb_image_mime(const void *buf, size_t n);
/* 1 when name's extension (case-insensitive) is one of the formats clipdb decodes,
** camera RAW included; 0 otherwise (no extension, a dot file). */
int cdb_image_name_is_image(const char *name);

/* The formats this build decodes, comma-separated ("JPEG, PNG, ..., HEIC, AVIF, RAW"),
** and the library behind each on request (detail = 1: "JPEG (libjpeg-turbo 2.1.5), ...").
** Static string. */
const char *cdb_image_formats(int detail);

/* ---- photo metadata (image_meta.c; docs/images.md "Metadata") ---------------------
** What users search photos by besides content, read from the file's bytes (no pixel
** decode): EXIF in a JPEG APP1, a PNG eXIf chunk, a WebP EXIF chunk and a HEIC/AVIF
** Exif item (libexif); TIFF's own IFDs (libtiff: a TIFF's IFDs may lie anywhere in
** the file, past the 64 KiB that libexif reads); camera RAW (libraw); XMP packets
** (JPEG, PNG iTXt, WebP, HEIF) for the capture time when EXIF has none. */
typedef enum cdb_taken_source {
    CDB_TAKEN_NONE = 0,
    CDB_TAKEN_ORIGINAL = 1,  /* EXIF DateTimeOriginal (+ OffsetTimeOriginal, SubSecTimeOriginal) */
    CDB_TAKEN_CREATED = 2,   /* EXIF CreateDate, a.k.a. DateTimeDigitized (+ its offset/subsec) */
    CDB_TAKEN_XMP = 3,       /* XMP exif:DateTimeOriginal, then xmp:CreateDate,
                                photoshop:DateCreated */
    CDB_TAKEN_RAW = 4        /* libraw's capture timestamp (camera RAW) */
} cdb_taken_source;

typedef struct cdb_photo_meta {
    cdb_taken_source taken_source; /* CDB_TAKEN_NONE: no valid capture time */
    int64_t taken_ms;   /* the camera's wall-clock date and time, as milliseconds since
                           1970-01-01T00:00:00 of that same wall clock (no zone applied) */
    int has_offset;     /* the time's UTC offset is known: UTC = taken_ms - offset_min * 60000 */
    int offset_min;     /* -840..840 */
    char make[64], model[64], lens[96]; /* UTF-8 (Latin-1 bytes converted), trimmed; "" when
                           absent; a longer value is cut at a character boundary */
    int has_gps;        /* lat, lon: degrees, north and east positive, validated ranges */
    double lat, lon;
    int has_alt;        /* alt: metres above sea level (negative below) */
    double alt;
} cdb_photo_meta;

/* Fills *out from buf (n bytes of an image file; the format sniffed as
** cdb_image_decode does). Metadata is best effort and never an error: a file with
** none, or with broken metadata (truncated or looping IFDs, huge counts, offsets out
** of the buffer, zero denominators, dates like "0000:00:00 00:00:00"), gives the fields
** it could validate and zeroes for the rest. CDB_INVALID only for NULL arguments. */
cdb_status cdb_photo_meta_read(const void *buf, size_t n, cdb_photo_meta *out /* OUT */);
/* The capture time as ISO 8601: "2024-05-01T12:34:56", ".789" when it has milliseconds,
** "+02:00" / "Z" when the offset is known; "" when there is none. buf: >= 32 bytes.
** Returns buf. */
char *cdb_photo_meta_taken_iso(const cdb_photo_meta *m, char *buf /* OUT */, size_t cap);

/* ---- perceptual hash (phash.c) ---------------------------------------------------
** A 64-bit DCT hash of the decoded pixels (imagehash's phash): gray (ITU-R 601 luma,
** alpha ignored, CMYK inverted through K), box-averaged to 32x32, the 2-D DCT-II's
** 8x8 lowest frequencies, bit (v * 8 + u) set where coefficient (v, u) is above their
** median by more than 1e-9 of the DC term (so a flat image hashes to 1). Resized,
** recompressed, re-encoded and slightly cropped copies of a picture differ in a few
** bits; distinct pictures in about half. Rotation is not undone here: hash the image
** as decoded with its EXIF orientation applied (the default), so a copy rotated
** through EXIF and the original agree. CDB_INVALID for a NULL or empty image. */
cdb_status cdb_image_phash(const cdb_image *img, uint64_t *out /* OUT */);
/* The perceptual hash of a YCbCr or grayscale JPEG (issue 28), one value whatever decodes
** it: cdb_image_phash of its DC image, the first component's DC terms as libjpeg's 1/8
** decode gives them (clamp(128 + round(DC * Q0 / 8)), one pixel per 8x8 block: the luma
** plane of Image.draft at 1/8), with the EXIF orientation applied. Every libjpeg decode
** reads those terms, so a decode asked for it (cdb_image_params.phash) at any scale,
** exact or fast, computes it from its own entropy decoding (cdb_image.has_phash) at about
** no cost, and so does a 1/8 decode (reindex, duplicates). Other JPEGs (RGB, CMYK, YCCK)
** and other formats have none here (has_phash 0): theirs is cdb_image_phash of a decode. */
/* Who decodes a file in a GPU ingest. */
typedef enum cdb_decoder {
    CDB_DECODER_CPU = 0,   /* cdb_image_decode: libjpeg-turbo and the other libraries */
    CDB_DECODER_NVJPEG = 1 /* nvJPEG, on the device */
} cdb_decoder;
/* The decoder for the file buf (n bytes) when a GPU ingest runs in mode (markers only,
** no pixel decoded; may overwrite cdb_errmsg()): nvJPEG when mode is CDB_DECODE_FAST,
** nvjpeg_usable is set and buf is a JPEG whose frame nvJPEG decodes on the device: a
** Huffman-coded sequential frame (SOF0 baseline, SOF1 extended), 8-bit, 1 or 3
** components, no EXIF orientation other than 1. Everything else goes to the CPU
** decoders: CDB_DECODE_EXACT (PIL's pixels are libjpeg-turbo's), EXIF-rotated JPEGs
** (nvJPEG does not rotate), progressive and arithmetic-coded JPEGs, CMYK/YCCK,
** the other formats, and a JPEG the marker scan refuses (cdb_image_decode says why).
** *why (may be NULL): a static phrase saying which case it was. */
cdb_decoder cdb_image_pick_decoder(const void *buf, size_t n, cdb_decode_mode mode,
                                   int nvjpeg_usable, const char **why /* OUT */);

typedef enum cdb_resize_mode {
    CDB_RESIZE_SHORT_CROP = 0, /* short side to size (long side truncated), center crop (CLIP) */
    CDB_RESIZE_SQUASH = 1      /* both sides to size, aspect ratio not kept, no crop (SigLIP:
                                  HF's SiglipImageProcessor, OpenCLIP's resize_mode "squash") */
} cdb_resize_mode;

typedef struct cdb_preprocess_params {
    int size;          /* output is size x size (model's image size) */
    float mean[3];
    float std[3];
    cdb_interp interp;
    /* Appended fields (zero = OpenAI CLIP's transform). */
    cdb_resize_mode resize;
    double rescale_factor; /* 0: torchvision's ToTensor, float32 v / 255.0f; > 0: Hugging
                              Face's rescale, float32((double)v * rescale_factor) (its
                              preprocessor_config.json's 1/255). Normalize is float32 either way. */
} cdb_preprocess_params;
/* OpenAI CLIP's constants at 224. */
cdb_preprocess_params cdb_preprocess_params_default(void);

/* The reference transform (p->resize: CLIP's short side + center crop, or SigLIP's
** squash to size x size, the same PIL resampling either way). out: caller-owned
** 3*size*size floats, CHW order.
** crop_rgb8 (optional, may be NULL): size*size*3 bytes, the uint8 RGB crop before
** scaling (HWC), for exact comparison with PIL. Resizes in the image's own mode
** (gray as gray, alpha premultiplied, palette with nearest, CMYK as CMYK then PIL's
** cmyk2rgb); 16-bit samples use their high byte. The resampling runs AVX2 code when
** the CPU has it (cdb_k_cpu_isa(); CLIPDB_ISA=scalar forces the scalar reference):
** the bytes are the same either way. size: 1..16384. CDB_INVALID for a malformed image or params
** (std == 0, non-finite mean/std), CDB_NOMEM. Only the crop window is computed. */
cdb_status cdb_image_preprocess(const cdb_image *img, const cdb_preprocess_params *p,
                                float *out /* OUT */, uint8_t *crop_rgb8 /* OUT */);

/* ==== MODEL ====================================================================
** A model is a folder (weights + tokenizer files + configs) or a single
** .safetensors file. Architecture is read from tensor shapes. */

typedef struct cdb_model cdb_model;

typedef enum cdb_act {
    CDB_ACT_DEFAULT = 0, /* from config; QuickGELU when nothing says (OpenAI CLIP) */
    CDB_ACT_QUICK_GELU = 1,
    CDB_ACT_GELU = 2,
    CDB_ACT_GELU_TANH = 3 /* GELU, tanh approximation (HF's gelu_pytorch_tanh: SigLIP) */
} cdb_act;

typedef struct cdb_model_params {
    cdb_act act;             /* override the activation */
    int load_vision;         /* 1 (default): load the image tower */
    int load_text;           /* 1 (default): load the text tower */
    int n_threads;           /* 0 = cdb_default_threads() */
    cdb_k_device device;     /* where the towers run (kernels.h; cdb_k_device_parse reads
                                "auto", "cpu", "cuda:N"); default cpu */
    const char *tokenizer_path; /* NULL: from the model folder, else the standard vocabulary */
    int image_size_override; /* 0: from config / shapes */
    /* Skipping the weights hash (reading every byte of a 577 MB ViT-B/32 costs a
    ** search more than the encode). A caller that recorded info.hash with
    ** info.files_key may pass both back: when the weights files' key (device, inode,
    ** size, mtime and ctime of each) is unchanged, info.hash is known_hash and the
    ** weights are not read to hash them; otherwise, or when either is NULL or
    ** malformed, they are hashed as usual. Borrowed for the call. */
    const char *known_hash;
    const char *known_files_key;
    /* 1: inspect only. Every file, header, dtype, shape and config is validated and
    ** info is filled in exactly as a full open would (architecture, activation,
    ** heads, preprocessing, tokenizer), but no weight byte is read, hashed, widened
    ** or uploaded and no backend is created: cost and memory are those of the
    ** headers, whatever the model's size (a 5 GB F16 ViT-bigG/14 opens in well
    ** under a second, most of it reading the tokenizer). info.inspect_only is set;
    ** info.hash is "" unless known_hash / known_files_key apply as above. Encode
    ** calls on such a model return CDB_INVALID; cdb_model_tokenizer works.
    ** Default 0 (a full load). */
    int inspect_only;
    /* Appended: the packed matrix cache (docs/models.md, "The packed matrix cache").
    ** Packing a tower's matrices for the CPU GEMM is most of what opening a model
    ** costs a one-shot `clipdb search`; the packed bytes can be kept in a file, named
    ** by the weights hash, the towers and the backend's layout, and mapped on later
    ** opens instead. A cache file is validated whole before any of it is used (its
    ** header, its size, an XXH3-128 over every packed byte, each matrix's shape
    ** against the one the loader asks for); one that fails is rebuilt, never used.
    ** Results are the same bits with or without it. pack_cache: CDB_PACK_CACHE_AUTO
    ** (0, the default: on for opens of the text tower alone, which is what a query
    ** loads, unless $CLIPDB_PACK_CACHE is "0"), CDB_PACK_CACHE_ON (any open),
    ** CDB_PACK_CACHE_OFF. pack_cache_dir: NULL for $CLIPDB_CACHE_DIR/packed, else
    ** $XDG_CACHE_HOME/clipdb/packed, else $HOME/.cache/clipdb/packed (created). Not
    ** the model's folder: that is often read-only (an installed model, the Hugging Face
    ** cache of another user). Borrowed for the call. */
    int pack_cache;
    const char *pack_cache_dir;
} cdb_model_params;
enum { CDB_PACK_CACHE_AUTO = 0, CDB_PACK_CACHE_ON = 1, CDB_PACK_CACHE_OFF = 2 };
cdb_model_params cdb_model_params_default(void);

typedef struct cdb_model_info {
    int embed_dim;
    int image_size, patch_size, vision_width, vision_layers, vision_heads;
    int context_length, vocab_size, text_width, text_layers, text_heads;
    cdb_act act;
    const char *act_source;     /* "config.json", "flag", "default (assumed)" ... */
    const char *naming;         /* "openai" or "hf" */
    const char *weights_dtype;  /* "F32", "F16", "BF16" */
    char hash[33];              /* hex, identity of the weights file(s) */
    const char *name;           /* folder or file name */
    const char *description;    /* from the model folder's metadata; may be "" */
    cdb_preprocess_params preprocess;
    int has_vision, has_text;
    char files_key[33];         /* hex key of the weights files' stat fields (see
                                   cdb_model_params.known_files_key); "" if they changed
                                   while opening */
    int hash_trusted;           /* 1: hash is the caller's known_hash, not computed */
    /* Appended fields. */
    int vision_mlp_width;       /* MLP hidden width, from the fc weights' shapes: 4 * width */
    int text_mlp_width;         /* for most CLIPs, 8192 for ViT-bigG/14's 1664-wide tower */
    int64_t n_params;           /* elements of every weight the loaded towers use
                                   (logit_scale and buffers such as position_ids excluded) */
    int64_t weights_f32_bytes;  /* n_params * 4: what the CPU backend holds once F16/BF16
                                   weights are widened (F32 files are used in place from the
                                   mapping instead; token tables stay F16/BF16) */
    int inspect_only;           /* 1: opened with params.inspect_only; cannot encode */
    /* Appended: the image tower's family. For a ResNet, image_size is 32 x the
    ** attention pool's grid, patch_size is 32 (the tower's total stride: image_size /
    ** grid), vision_width its base width (layer1.0.conv1's outputs, 64 for RN50, as
    ** OpenAI's build_model reads it), vision_layers the Bottleneck count (16 for
    ** RN50), vision_heads the attention pool's heads (32 * vision_width / 64, or
    ** open_clip_config.json's head_width), vision_mlp_width 0. */
    const char *vision_family;  /* "ViT", "ResNet" (OpenAI's ModifiedResNet); "" when no
                                   image tower is loaded */
    int vision_stage_blocks[4]; /* ResNet: Bottlenecks per stage (RN50: 3 4 6 3); ViT: 0 */
    int vision_pool_width;      /* ResNet: the attention pool's width, 32 * vision_width
                                   (2048 for RN50); ViT: 0 */
    /* Appended: the model family (docs/models.md). "CLIP" (OpenAI / OpenCLIP / HF
    ** CLIPModel) or "SigLIP" (SigLIP and SigLIP2 FixRes, one architecture: no class
    ** token, the image tower pooled by its MAP head with no projection after it, a
    ** bidirectional text tower pooled at its last position, a projection with bias). */
    const char *family;
    cdb_act text_act;           /* the text tower's activation; `act` is the image tower's
                                   (or the text tower's when no image tower is loaded). They
                                   differ in OpenCLIP's SigLIP2 folders: timm image towers
                                   with exact GELU, text towers with the tanh one */
    float vision_ln_eps, text_ln_eps; /* LayerNorm eps: 1e-5 (CLIP), from the config (SigLIP) */
    /* The checkpoint's score parameters: a pair's logit is exp(logit_scale) * cos +
    ** logit_bias (SigLIP: sigmoid of it is the model's probability that they match;
    ** CLIP has no bias). has_*: 0 when the weights lack the tensor (values 0 then). Read
    ** also when inspecting (two scalars). */
    float logit_scale, logit_bias;
    int has_logit_scale, has_logit_bias;
    /* Appended: what this open did with the packed matrix cache (params.pack_cache):
    ** "off" (not asked, inspect only, or a backend without packed matrices), "hit"
    ** (every packed matrix mapped from the cache file), "written" (none was there),
    ** "rebuilt: <why the file was refused>", or "not written: <why>". pack_cache_path:
    ** the cache file, "" when off. */
    const char *pack_cache;
    const char *pack_cache_path;
    /* Appended: what this open did with the tokenizer cache (cdb_tok_cache_status): on
    ** when the packed matrix cache's policy is (pack_cache ON, or AUTO for a text-only
    ** open), in its folder, unless $CLIPDB_TOK_CACHE is "0"; "off" otherwise. */
    const char *tok_cache;
} cdb_model_info;

/* Loads and validates a model (header, dtypes, shapes, offsets before any data is
** touched). path: a folder (model.safetensors / open_clip_model.safetensors, else
** every *.safetensors in name order; configs and tokenizer files beside it) or one
** .safetensors file (no configs read). Key naming (OpenAI/OpenCLIP or Hugging Face)
** is detected. The tokenizer: p->tokenizer_path, else the folder's vocab.json +
** merges.txt or bpe_simple_vocab_16e6.txt.gz, else the standard vocabulary
** (CLIPDB_VOCAB, else data/bpe_simple_vocab_16e6.txt.gz found by cdb_data_path():
** installed with clipdb, or in the source tree) when it fits the model's embedding;
** without one, text must come as ids. Weights in F32 are used from the mapping in
** place (CPU); F16/BF16 are widened to fp32 once, except the token embedding table,
** which stays F16/BF16 (its rows widened when a text uses them).
** Errors: CDB_NOTFOUND (no such path / no weights in the folder), CDB_IO,
** CDB_CORRUPT (bad file or missing/misshapen tensor; the message names it),
** CDB_UNSUPPORTED (timm image towers, 'visual.trunk.*', other than SigLIP's; SigLIP2
** NaFlex checkpoints; unknown dtypes or activations; a CUDA device that is not
** available: cdb_k_device_resolve's message,
** e.g. "cuda:0 is not available: this clipdb was built without CUDA"). out: close
** with cdb_model_close (NULL ok).
** Heads come from config.json (vision_config_dict / text_config_dict first, as
** transformers reads them, then vision_config / text_config), open_clip_config.json
** (heads, else width / head_width), else 16 for the ViT-H/g/bigG image widths
** (1280, 1408, 1664), else width / 64. Every ViT CLIP size loads in both namings:
** B/32, B/16, L/14, L/14-336, H/14, g/14, bigG/14; and OpenAI's ModifiedResNet
** image towers (RN50, RN101, RN50x4, RN50x16, RN50x64) in OpenAI/OpenCLIP naming,
** their BatchNorms (running statistics, eps 1e-5) folded into the convolutions at
** load; the tower's text activation comes from the configs as for a ViT
** (OpenCLIP's RN50-quickgelu: QuickGELU; RN50: GELU) (docs/models.md).
** SigLIP / SigLIP2 FixRes load in Hugging Face naming (SiglipModel: config.json's
** vision_config / text_config give heads, hidden_act and layer_norm_eps;
** preprocessor_config.json the size, resample, rescale and mean/std; the weights
** possibly sharded) and in OpenCLIP hub folders (open_clip_config.json, timm's
** 'visual.trunk.*' image tower and a 'text.*' tower; the image activation from the
** timm model's name, the text one from text_cfg.act_kwargs, eps from norm_kwargs
** (timm: 1e-6)); their preprocessing squashes to size x size. A SigLIP model's
** tokenizer: p->tokenizer_path, else the folder's spiece.model / tokenizer.model, else
** its tokenizer.json, with the pipeline of its layout's reference
** (CDB_TOK_PIPE_SIGLIP_HF / _GEMMA_HF for a Hugging Face folder, CDB_TOK_PIPE_OPENCLIP
** for a hub folder; docs/tokenizer.md); never CLIP's BPE. A folder with none, or whose
** tokenizer.json uses a component clipdb does not implement, opens without a tokenizer:
** its image tower works, text must come as ids; a broken tokenizer.json is
** CDB_CORRUPT. A vocabulary larger than the text embedding is CDB_CORRUPT.
** p->inspect_only: validate and describe without loading the weights (above). */
cdb_status cdb_model_open(const char *path, const cdb_model_params *p, cdb_model **out /* OUT */);
void cdb_model_close(cdb_model *m);
/* Borrowed: lives as long as m. */
const cdb_model_info *cdb_model_get_info(const cdb_model *m);

/* The model's probability that a text and an image whose embeddings have cosine cos
** match: sigmoid(exp(logit_scale) * cos + logit_bias), computed in fp32. logit_scale
** is what the checkpoints store, the log of the scale, in both SigLIP layouts (Hugging
** Face's SiglipModel and OpenCLIP's CustomTextCLIP apply exp() in their forward).
** Returns 1 with *p set; 0 (p untouched) when the model has no logit_bias or scale
** (CLIP: its scale calibrates a softmax over a batch of candidates, not one pair). */
int cdb_model_match_probability(const cdb_model_info *mi, float cos, float *p /* OUT */);
/* The model's tokenizer, or NULL if the text tower is not loaded. Borrowed. */
const cdb_tok *cdb_model_tokenizer(const cdb_model *m);

/* Text embeddings. out: caller-owned n*embed_dim floats. normalize: 1 for
** L2-normalized (fp32), 0 for raw. CDB_UNSUPPORTED when the model has no tokenizer
** (e.g. a SigLIP folder with no tokenizer clipdb reads: cdb_encode_tokens takes ids).
** All encode calls: CDB_INVALID when the tower is not loaded or an argument is bad;
** n == 0 is a no-op; a non-finite result gives CDB_ERROR (never returned as data).
** On the CPU, each input's row has the same bits whatever n, its position among the
** n and the thread count (on one ISA path, cdb_k_cpu_isa(); kernels.h); the CUDA
** backend makes no such promise. */
cdb_status cdb_encode_texts(cdb_model *m, const char *const *texts, int n, int normalize,
                            float *out /* OUT */);
/* From token ids (n * context_length, as cdb_tok_tokenize gives). CLIP pools at the
** first end token (the tokenizer's, else vocab_size - 1), argmax when none, as OpenAI
** CLIP; SigLIP at the last position (ids padded to context_length, as the model was
** trained: its tokenizer's job); every id must lie in [0, vocab_size) (CDB_INVALID
** otherwise). The entry point for models clipdb has no tokenizer for. */
cdb_status cdb_encode_tokens(cdb_model *m, const int32_t *ids, int n, int normalize,
                             float *out /* OUT */);
/* Image embeddings from preprocessed pixels (n * 3 * size * size, CHW). */
cdb_status cdb_encode_pixels(cdb_model *m, const float *pixels, int n, int normalize,
                             float *out /* OUT */);
/* Image embeddings from decoded images: the embeddings of cdb_image_preprocess (the
** model's preprocess params) followed by cdb_encode_pixels. On a backend with a device
** transform (cdb_k_preprocess_on_device: the CUDA backend) 8-bit gray and RGB images
** (not palette, CMYK or alpha) go up as bytes and are transformed there, bit for bit
** the CPU's floats (kernels.h, cdb_k_preprocess_u8); the others, and every image of a
** ResNet tower, are preprocessed on the host. Errors as cdb_encode_pixels, plus those
** of cdb_image_preprocess. */
cdb_status cdb_encode_images(cdb_model *m, const cdb_image *const *imgs, int n, int normalize,
                             float *out /* OUT */);
/* 1 when the device transform takes img as it is (8-bit gray or RGB, not palette or
** CMYK): a GPU ingest may hand it to cdb_encode_images instead of preprocessing it. */
int cdb_image_device_ready(const cdb_image *img);
/* 1 when cdb_encode_images transforms m's images on its device (a GPU backend, a ViT
** tower): an ingest then keeps the decoded images cdb_image_device_ready takes for it
** instead of preprocessing them. */
int cdb_model_transforms_on_device(const cdb_model *m);
/* 1 when, besides, cdb_encode_files decodes JPEGs on m's device (nvJPEG usable). */
int cdb_model_decodes_jpeg_on_device(const cdb_model *m);
/* Image embeddings from files' bytes (bufs[i], lens[i] bytes), decoded as ip says (NULL:
** defaults). On a backend with a device transform, in CDB_DECODE_FAST, the JPEGs
** cdb_image_pick_decoder gives to nvJPEG (when cdb_k_jpeg_on_device) are decoded and
** transformed on the device (used[i] = CDB_DECODER_NVJPEG; their pixels are nvJPEG's,
** not libjpeg-turbo's); every other file, and any nvJPEG fails, is decoded by
** cdb_image_decode and goes on as in cdb_encode_images (used[i] = CDB_DECODER_CPU).
** item_rc[i]: CDB_OK, or the CPU decode's or preprocessing's status for file i (its
** row of out is then zeros; the message is gone: decode it alone to see it). used may
** be NULL. Returns CDB_OK when the batch ran, else a call-level failure (device, memory,
** arguments, as cdb_encode_pixels) and out is undefined. */
cdb_status cdb_encode_files(cdb_model *m, const void *const *bufs, const size_t *lens, int n,
                            const cdb_image_params *ip, int normalize, float *out /* OUT */,
                            cdb_status *item_rc /* OUT */, cdb_decoder *used /* OUT */);
/* Images per encode call for m's image tower on a device with free_bytes of free
** memory: cdb_k_batch_from_free(free_bytes, 0, bytes one image's forward occupies (its
** activation scratch rows, pixels and patch matrix), max_batch), so that a batch fits
** beside the weights already loaded; what the estimate misses is caught by
** cdb_k_run_batched's halving. max_batch for a ResNet tower (it sizes its own chunks)
** and for NULL. Pure: tests give it made-up figures. */
int cdb_model_image_batch_for(const cdb_model *m, size_t free_bytes, int max_batch);
/* cdb_model_image_batch_for with the free memory of m's device now (cdb_k_device_memory);
** on the CPU, or when the device cannot say, cpu_batch. */
int cdb_model_image_batch(cdb_model *m, int cpu_batch, int max_batch);
/* Convenience: decode + preprocess + encode image files / memory buffers. */
cdb_status cdb_encode_image_file(cdb_model *m, const char *path, const cdb_image_params *ip,
                                 int normalize, float *out /* OUT */);

#ifdef __cplusplus
}
#endif
#endif /* CDB_ENCODER_H */
