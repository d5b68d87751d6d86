/*
** text_clean.c: the text cleaning of OpenAI CLIP's simple_tokenizer, in C:
**
**   ftfy.fix_text(text)                 (ftfy 6.3.1, default configuration)
**   -> html.unescape(html.unescape(.))  (Python 3 html module, full HTML5 table)
**   -> strip -> regex.sub(r'\s+', ' ') -> strip -> str.lower()
**
** ftfy is reproduced step by step from its source: per-line segments, HTML entity
** unescaping ("auto": off once a '<' is seen), mojibake repair (the badness
** heuristic, the ten single-byte codecs it tries, restore_byte_a0,
** replace_lossy_sequences, utf-8-variants, decode_inconsistent_utf8, the
** Latin-1 -> Windows-1252 step, C1 controls), then ligatures, character width,
** curly quotes, line breaks, terminal escapes, control characters and NFC, all
** repeated until nothing changes. The data tables (entities, codecs, character
** categories, width map) are generated into tok_tables.h by
** scripts/gen_tok_tables.py. Unicode properties (categories, case mappings, NFC)
** come from utf8proc. docs/tokenizer.md lists what differs from Python.
**
** Text is processed as arrays of code points (uint32_t); every step is linear in
** the text length except the fix-until-stable loops, which ftfy also runs.
*/
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <utf8proc.h>

#include "encoder/encoder.h"
#include "encoder/tok_int.h"
#include "encoder/tok_tables.h"

/* ftfy's max_decode_length: segments longer than this are cut. */
#define CLEAN_MAX_SEGMENT 1000000
/* Safety bounds on ftfy's fix-until-unchanged loops (ftfy itself has none; real
** text converges in 2-3 rounds, each round that changes text must shrink or fix
** something) and on decode_inconsistent_utf8's recursion. */
#define CLEAN_MAX_ROUNDS 64
#define CLEAN_MAX_DEPTH 16

#define NOCHAR 0xFFFFFFFFu

/* ---- growable code point vector ------------------------------------------- */

typedef struct u32v {
    uint32_t *p;
    size_t n, cap;
    int oom; /* sticky: an allocation failed */
} u32v;

static void v_free(u32v *v) {
    cdb_free(v->p);
    v->p = NULL;
    v->n = v->cap = 0;
}

static int v_reserve(u32v *v, size_t need) {
    if (v->oom) return -1;
    if (cdb_tok_grow((void **)&v->p, &v->cap, need, sizeof *v->p) == 0) return 0;
    v->oom = 1;
    return -1;
}

static void v_push(u32v *v, uint32_t c) {
    if (v->n == v->cap && v_reserve(v, v->n + 1)) return;
    v->p[v->n++] = c;
}

static void v_append(u32v *v, const uint32_t *s, size_t n) {
    if (v_reserve(v, v->n + n)) return;
    if (n) memcpy(v->p + v->n, s, n * sizeof *s);
    v->n += n;
}

static void v_push_utf8(u32v *v, const char *s); /* below */

static int v_eq(const u32v *a, const u32v *b) {
    return a->n == b->n && (a->n == 0 || !memcmp(a->p, b->p, a->n * sizeof *a->p));
}

/* Replaces *dst by *src (moved); src becomes empty. */
static void v_move(u32v *dst, u32v *src) {
    int oom = dst->oom || src->oom;
    v_free(dst);
    *dst = *src;
    dst->oom = oom;
    memset(src, 0, sizeof *src);
}

/* ---- bytes vector (for encode/decode round trips) ------------------------- */

typedef struct bytev {
    uint8_t *p;
    size_t n, cap;
    int oom;
} bytev;

static void b_push(bytev *b, uint8_t c) {
    if (!b->oom && cdb_tok_grow((void **)&b->p, &b->cap, b->n + 1, 1) != 0) b->oom = 1;
    if (!b->oom) b->p[b->n++] = c;
}

static void b_free(bytev *b) {
    cdb_free(b->p);
    memset(b, 0, sizeof *b);
}

/* ---- UTF-8 ------------------------------------------------------------------ */

size_t cdb_tok_utf8_put(uint32_t c, char *d) {
    if (c < 0x80) {
        d[0] = (char)c;
        return 1;
    }
    if (c < 0x800) {
        d[0] = (char)(0xC0 | (c >> 6));
        d[1] = (char)(0x80 | (c & 0x3F));
        return 2;
    }
    if (c < 0x10000) {
        d[0] = (char)(0xE0 | (c >> 12));
        d[1] = (char)(0x80 | ((c >> 6) & 0x3F));
        d[2] = (char)(0x80 | (c & 0x3F));
        return 3;
    }
    d[0] = (char)(0xF0 | (c >> 18));
    d[1] = (char)(0x80 | ((c >> 12) & 0x3F));
    d[2] = (char)(0x80 | ((c >> 6) & 0x3F));
    d[3] = (char)(0x80 | (c & 0x3F));
    return 4;
}

/* Decodes one well-formed UTF-8 sequence at s[0..n) (no overlongs, surrogates or
** values above 0x10FFFF). Returns its length, or 0 when ill-formed. */
static size_t utf8_get(const uint8_t *s, size_t n, uint32_t *cp) {
    uint8_t b = s[0];
    if (b < 0x80) {
        *cp = b;
        return 1;
    }
    if (b >= 0xC2 && b <= 0xDF) {
        if (n < 2 || (s[1] & 0xC0) != 0x80) return 0;
        *cp = ((uint32_t)(b & 0x1F) << 6) | (s[1] & 0x3F);
        return 2;
    }
    if (b >= 0xE0 && b <= 0xEF) {
        if (n < 3 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80) return 0;
        if (b == 0xE0 && s[1] < 0xA0) return 0;  // overlong
        if (b == 0xED && s[1] >= 0xA0) return 0; // surrogate
        *cp = ((uint32_t)(b & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
        return 3;
    }
    if (b >= 0xF0 && b <= 0xF4) {
        if (n < 4 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80 || (s[3] & 0xC0) != 0x80)
            return 0;
        if (b == 0xF0 && s[1] < 0x90) return 0;
        if (b == 0xF4 && s[1] >= 0x90) return 0;
        *cp = ((uint32_t)(b & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) |
              ((uint32_t)(s[2] & 0x3F) << 6) | (s[3] & 0x3F);
        return 4;
    }
    return 0;
}

/* Input decoding: ill-formed bytes become U+FFFD one byte at a time (the input of
** the reference is a Python str, which cannot hold them, so any choice is ours). */
static void decode_lossy(const char *text, size_t len, u32v *out) {
    const uint8_t *s = (const uint8_t *)text;
    size_t i = 0;
    if (v_reserve(out, len)) return;
    while (i < len) {
        uint32_t cp;
        size_t k = utf8_get(s + i, len - i, &cp);
        if (!k) {
            cp = 0xFFFD;
            k = 1;
        }
        out->p[out->n++] = cp;
        i += k;
    }
}

static void v_push_utf8(u32v *v, const char *s) {
    size_t n = strlen(s), i = 0;
    while (i < n) {
        uint32_t cp;
        size_t k = utf8_get((const uint8_t *)s + i, n - i, &cp);
        if (!k) { // tables are valid UTF-8; be defensive anyway
            cp = 0xFFFD;
            k = 1;
        }
        v_push(v, cp);
        i += k;
    }
}

/* Python's bytes.decode("utf-8") (variants = 0) or ftfy's "utf-8-variants"
** (variants = 1: also CESU-8 surrogate pairs and Java's C0 80 for U+0000).
** Returns 0, or -1 where Python raises UnicodeDecodeError. */
static int decode_strict(const uint8_t *s, size_t n, int variants, u32v *out) {
    size_t i = 0;
    if (v_reserve(out, out->n + n)) return 0;
    while (i < n) {
        uint32_t cp;
        size_t k = utf8_get(s + i, n - i, &cp);
        if (!k && variants) {
            if (s[i] == 0xC0 && i + 1 < n && s[i + 1] == 0x80) {
                cp = 0;
                k = 2;
            } else if (i + 5 < n && s[i] == 0xED && s[i + 1] >= 0xA0 && s[i + 1] <= 0xAF &&
                       (s[i + 2] & 0xC0) == 0x80 && s[i + 3] == 0xED && s[i + 4] >= 0xB0 &&
                       s[i + 4] <= 0xBF && (s[i + 5] & 0xC0) == 0x80) {
                uint32_t hi = 0xD000 | ((uint32_t)(s[i + 1] & 0x3F) << 6) | (s[i + 2] & 0x3F);
                uint32_t lo = 0xD000 | ((uint32_t)(s[i + 4] & 0x3F) << 6) | (s[i + 5] & 0x3F);
                cp = 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
                k = 6;
            }
        }
        if (!k) return -1;
        out->p[out->n++] = cp;
        i += k;
    }
    return 0;
}

/* ---- character properties ------------------------------------------------- */

static uint32_t cat_mask(uint32_t c) {
    if (c < 0x80) return c == ' ' ? TT_UTF8_CONTINUATION : 0;
    size_t lo = 0, hi = TT_N_CATS;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (tt_cats[mid].cp < c) lo = mid + 1;
        else hi = mid;
    }
    return lo < TT_N_CATS && tt_cats[lo].cp == c ? tt_cats[lo].mask : 0;
}

/* Python's str.isspace(): bidi class WS/B/S or category Zs. */
static int py_isspace(uint32_t c) {
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
           c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
           c == 0x202F || c == 0x205F || c == 0x3000;
}

/* The `regex` module's \s: the Unicode White_Space property. */
int cdb_tok_is_space(uint32_t c) {
    return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
           c == 0x205F || c == 0x3000;
}

static int ucat(uint32_t c) {
    return c > 0x10FFFF ? UTF8PROC_CATEGORY_CN : (int)utf8proc_category((utf8proc_int32_t)c);
}

int cdb_tok_is_letter(uint32_t c) {
    if (c < 0x80) return (c | 0x20) >= 'a' && (c | 0x20) <= 'z';
    int k = ucat(c);
    return k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_LO;
}

int cdb_tok_is_number(uint32_t c) {
    if (c < 0x80) return c >= '0' && c <= '9';
    int k = ucat(c);
    return k >= UTF8PROC_CATEGORY_ND && k <= UTF8PROC_CATEGORY_NO;
}

/* Python re's \w for str: alphanumeric (letters, numbers) or '_'. */
static int py_isword(uint32_t c) {
    return c == '_' || cdb_tok_is_letter(c) || cdb_tok_is_number(c);
}

static int is_az(uint32_t c) { return c >= 'a' && c <= 'z'; }
static int is_azAZ(uint32_t c) { return is_az(c) || (c >= 'A' && c <= 'Z'); }

static int in_list(uint32_t c, const uint32_t *list, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (list[i] == c) return 1;
    return 0;
}
#define IN(c, ...) in_list((c), (const uint32_t[]){__VA_ARGS__}, \
                           sizeof((const uint32_t[]){__VA_ARGS__}) / sizeof(uint32_t))

/* ---- ftfy.badness.is_bad: BADNESS_RE.search ------------------------------- */

#define B_COMMON TT_COMMON
#define B_C1 TT_C1
#define B_BAD TT_BAD
#define B_LAW TT_LAW
#define B_CUR TT_CURRENCY
#define B_SP TT_START_PUNCTUATION
#define B_EP TT_END_PUNCTUATION
#define B_NUM TT_NUMERIC
#define B_KAO TT_KAOMOJI
#define B_UA TT_UPPER_ACCENTED
#define B_LA TT_LOWER_ACCENTED
#define B_UC TT_UPPER_COMMON
#define B_LC TT_LOWER_COMMON
#define B_BOX TT_BOX

/* Does one of BADNESS_RE's alternatives match at s[i]? The alternatives are
** transcribed in ftfy's order; `^` means i == 0 (no MULTILINE). */
static int bad_at(const uint32_t *s, size_t n, size_t i) {
    uint32_t c[7], m[7];
    for (int k = 0; k < 7; k++) {
        c[k] = i + k < n ? s[i + k] : NOCHAR;
        m[k] = c[k] == NOCHAR ? 0 : cat_mask(c[k]);
    }
    const uint32_t m0 = m[0], m1 = m[1], m2 = m[2];
    const uint32_t c0 = c[0], c1 = c[1], c2 = c[2];

    if (m0 & B_C1) return 1;
    if ((m0 & (B_BAD | B_LA | B_UA | B_BOX | B_SP | B_EP | B_CUR | B_NUM | B_LAW)) && (m1 & B_BAD))
        return 1;
    if (is_azAZ(c0) && (m1 & (B_LC | B_UC)) && (m2 & B_BAD)) return 1;
    if ((m0 & B_BAD) && (m1 & (B_LA | B_UA | B_BOX | B_SP | B_EP | B_CUR | B_NUM | B_LAW)))
        return 1;
    if ((m0 & (B_LA | B_LC | B_BOX | B_EP | B_CUR | B_NUM)) && (m1 & B_UA)) return 1;
    if ((m0 & (B_BOX | B_EP | B_CUR | B_NUM)) && (m1 & B_LA)) return 1;
    if ((m0 & (B_LA | B_BOX | B_EP)) && (m1 & B_CUR)) return 1;
    if (c0 != NOCHAR && py_isspace(c0) && (m1 & B_UA) && (m2 & B_CUR)) return 1;
    if ((m0 & (B_UA | B_BOX)) && (m1 & (B_NUM | B_LAW))) return 1;
    if ((m0 & (B_LA | B_UA | B_BOX | B_CUR | B_EP)) && (m1 & B_SP) && (m2 & B_NUM)) return 1;
    if ((m0 & (B_LA | B_UA | B_CUR | B_NUM | B_BOX | B_LAW)) && (m1 & B_EP) && (m2 & B_SP))
        return 1;
    if ((m0 & (B_CUR | B_NUM | B_BOX)) && (m1 & B_SP)) return 1;
    if (is_az(c0) && (m1 & B_UA) && (m2 & (B_SP | B_CUR))) return 1;
    if ((m0 & B_BOX) && (m1 & B_KAO)) return 1;
    if ((m0 & (B_LA | B_UA | B_CUR | B_NUM | B_SP | B_EP | B_LAW)) && (m1 & B_BOX)) return 1;
    if ((m0 & B_BOX) && (m1 & B_EP)) return 1;
    if ((m0 & (B_LA | B_UA)) && (m1 & (B_SP | B_EP)) && c2 != NOCHAR && py_isword(c2)) return 1;
    // The ligature oe when not followed by an unaccented Latin letter
    if ((c0 == 0x152 || c0 == 0x153) && c1 != NOCHAR && !is_azAZ(c1)) return 1;
    // Degree signs after capital letters
    if ((m0 & B_UA) && c1 == 0xB0) return 1;
    // Common Windows-1252 2-character mojibake
    if (IN(c0, 0xC2, 0xC3, 0xCE, 0xD0) && c1 != NOCHAR &&
        (IN(c1, 0x20AC, 0x153, 0x160, 0x161, 0xA2, 0xA3, 0x178, 0x17E, 0xA0, 0xAD, 0xAE, 0xA9,
            0xB0, 0xB7, 0xBB, 0x2013, 0x2014, 0xB4) ||
         (m1 & (B_SP | B_EP))))
        return 1;
    if (c0 == 0xD7 && (c1 == 0xB2 || c1 == 0xB3)) return 1;
    // Windows-1252 mojibake of Arabic words: four characters
    if ((c0 == 0xD8 || c0 == 0xD9) && (c2 == 0xD8 || c2 == 0xD9)) {
        int ok1 = (m1 & (B_COMMON | B_CUR | B_BAD | B_NUM | B_SP)) ||
                  (c1 != NOCHAR && IN(c1, 0x178, 0x160, 0xAE, 0xB0, 0xB5, 0xBB));
        int ok3 = (m[3] & (B_COMMON | B_CUR | B_BAD | B_NUM | B_SP)) ||
                  (c[3] != NOCHAR && IN(c[3], 0x178, 0x160, 0xAE, 0xB0, 0xB5, 0xBB));
        if (ok1 && ok3) return 1;
    }
    if (c0 == 0xE0 && c1 != NOCHAR && IN(c1, 0xB2, 0xB5, 0xB9, 0xBC, 0xBD, 0xBE)) return 1;
    // MacRoman mojibake
    if (c0 == 0x221A && c1 != NOCHAR &&
        IN(c1, 0xB1, 0x2202, 0x2020, 0x2260, 0xAE, 0x2122, 0xB4, 0x2264, 0x2265, 0xA5, 0xB5, 0xF8))
        return 1;
    if (c0 == 0x2248 && (c1 == 0xB0 || c1 == 0xA2)) return 1;
    if (c0 == 0x201A && c1 == 0xC4 && c2 != NOCHAR &&
        IN(c2, 0xEC, 0xEE, 0xEF, 0xF2, 0xF4, 0xFA, 0xF9, 0xFB, 0x2020, 0xB0, 0xA2, 0x3C0))
        return 1;
    if (c0 == 0x201A && (c1 == 0xE2 || c1 == 0xF3) && c2 != NOCHAR &&
        IN(c2, 0xE0, 0xE4, 0xB0, 0xEA))
        return 1;
    // Windows-1251 mojibake
    if (c0 == 0x432 && c1 == 0x402) return 1;
    if (IN(c0, 0x412, 0x413, 0x420, 0x421) &&
        ((m1 & (B_C1 | B_BAD | B_SP | B_EP | B_CUR)) || c1 == 0xB0 || c1 == 0xB5) &&
        c2 != NOCHAR && IN(c2, 0x412, 0x413, 0x420, 0x421))
        return 1;
    if (c0 == 0x413 && c1 == 0x45E && c2 == 0x412 && c[3] == 0x402 && c[4] == 0x412 &&
        c[5] != NOCHAR && c[5] != '\n' && c[6] != NOCHAR && (is_azAZ(c[6]) || c[6] == ' '))
        return 1;
    // Windows-1252 encodings of 'a grave' and 'a acute', and of \xa0 itself
    if (c0 == 0xC3 && (c1 == 0xA0 || c1 == 0xA1)) return 1;
    if (is_az(c0)) {
        if (py_isspace(c1) && (c2 == 0xC3 || c2 == 0xC2) && c[3] == ' ') return 1;
        if ((c1 == 0xC3 || c1 == 0xC2) && c2 == ' ') return 1;
    }
    if (i == 0 && (c0 == 0xC3 || c0 == 0xC2) && c1 == ' ') return 1;
    // A-circumflex before a character it encodes
    if ((is_az(c0) || IN(c0, '.', ',', '?', '!') || (m0 & B_EP)) && c1 == 0xC2 &&
        (c2 == ' ' || (m2 & (B_SP | B_EP))))
        return 1;
    // Windows-1253 mojibake
    if (c0 == 0x3B2 && c1 == 0x20AC && c2 != NOCHAR && IN(c2, 0x2122, 0xA0, 0x386, 0xAD, 0xAE, 0xB0))
        return 1;
    if (IN(c0, 0x392, 0x393, 0x39E, 0x39F) &&
        ((m1 & (B_C1 | B_BAD | B_SP | B_EP | B_CUR)) || c1 == 0xB0) && c2 != NOCHAR &&
        IN(c2, 0x392, 0x393, 0x39E, 0x39F))
        return 1;
    // Windows-1257 mojibake
    if (c0 == 0x101 && c1 == 0x20AC) return 1;
    return 0;
}

static int is_bad(const uint32_t *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        // Fast skip: an alternative that starts with an ASCII character needs a
        // non-ASCII one right after it or one further.
        if (s[i] < 0x80 && (i + 1 >= n || s[i + 1] < 0x80) && (i + 2 >= n || s[i + 2] < 0x80))
            continue;
        if (bad_at(s, n, i)) return 1;
    }
    return 0;
}

/* Indices into tt_codecs (ftfy's CHARMAP_ENCODINGS order). */
enum { CODEC_LATIN1 = 0, CODEC_SLOPPY_1252 = 1, CODEC_MACROMAN = 8 };

/* ---- HTML: Python's html.unescape and ftfy's unescape_html ------------------- */

static const tt_entity *entity_find(const tt_entity *tab, size_t n, const char *name) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int r = strcmp(tab[mid].name, name);
        if (r == 0) return &tab[mid];
        if (r < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

static int is_hex(uint32_t c) {
    return (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'f');
}
static int hexval(uint32_t c) { return c <= '9' ? (int)(c - '0') : (int)((c | 0x20) - 'a' + 10); }

/* html.unescape's numeric character reference rule. */
static void py_charref(u32v *out, uint64_t num) {
    if (num == 0) {
        v_push(out, 0xFFFD);
        return;
    }
    if (num == 0x0D) {
        v_push(out, 0x0D);
        return;
    }
    if (num >= 0x80 && num <= 0x9F) {
        v_push(out, tt_codecs[CODEC_SLOPPY_1252].hi[num - 0x80]);
        return;
    }
    if ((num >= 0xD800 && num <= 0xDFFF) || num > 0x10FFFF) {
        v_push(out, 0xFFFD);
        return;
    }
    if ((num >= 0x1 && num <= 0x8) || (num >= 0xE && num <= 0x1F) || num == 0x7F || num == 0xB ||
        (num >= 0xFDD0 && num <= 0xFDEF) || (num & 0xFFFE) == 0xFFFE)
        return; // _invalid_codepoints: dropped
    v_push(out, (uint32_t)num);
}

/* The text of in with every '&' that ref() reads as a reference replaced: ref(s, n, i,
** out) is at s[i] == '&'; it appends the replacement to out and returns the index just
** past the reference, or returns i (nothing appended) where none starts at i. */
typedef size_t (*amp_ref_fn)(const uint32_t *s, size_t n, size_t i, u32v *out);
static void unescape_amps(const u32v *in, u32v *out, amp_ref_fn ref) {
    const uint32_t *s = in->p;
    size_t n = in->n, i = 0;
    out->n = 0;
    while (i < n) {
        size_t end = s[i] == '&' ? ref(s, n, i, out) : i;
        if (end == i) v_push(out, s[i++]);
        else i = end;
    }
}

/* Python 3's html.unescape(s): the pattern
**   &(#[0-9]+;?|#[xX][0-9a-fA-F]+;?|[^\t\n\f <&#;]{1,32};?)
** with the WHATWG rules for numeric references and longest-prefix matching of
** named ones (which is how "&notanentity;" becomes "¬anentity;"). */
static size_t py_ref(const uint32_t *s, size_t n, size_t i, u32v *out) {
    size_t j = i + 1;
    if (j < n && s[j] == '#') {
        int hex = j + 1 < n && (s[j + 1] == 'x' || s[j + 1] == 'X');
        size_t d = j + 1 + (size_t)hex, k = d;
        uint64_t num = 0;
        while (k < n && (hex ? is_hex(s[k]) : (s[k] >= '0' && s[k] <= '9'))) {
            uint64_t v = hex ? (uint64_t)hexval(s[k]) : (uint64_t)(s[k] - '0');
            num = num * (hex ? 16 : 10) + v;
            if (num > 0x10FFFFull) num = 0x110000ull; // saturate: any larger is U+FFFD
            k++;
        }
        if (k == d) return i; // no digits: not a reference
        if (k < n && s[k] == ';') k++;
        py_charref(out, num);
        return k;
    }
    // named: [^\t\n\f <&#;]{1,32};?
    size_t k = j;
    while (k < n && k - j < 32 && s[k] != '\t' && s[k] != '\n' && s[k] != '\f' && s[k] != ' ' &&
           s[k] != '<' && s[k] != '&' && s[k] != '#' && s[k] != ';')
        k++;
    if (k == j) return i;
    if (k < n && s[k] == ';') k++;
    // s[j..k) is the name (with its ';' if any). Entity names are ASCII.
    char name[40];
    size_t len = k - j, ascii = 0;
    while (ascii < len && s[j + ascii] < 0x80) {
        name[ascii] = (char)s[j + ascii];
        ascii++;
    }
    const tt_entity *e = NULL;
    size_t x = 0;
    if (ascii == len) {
        name[len] = 0;
        e = entity_find(tt_html5, TT_N_HTML5, name);
        x = len;
    }
    if (!e) {
        // longest prefix s[:x] for x in range(len-1, 1, -1)
        size_t top = len - 1 < ascii ? len - 1 : ascii;
        for (x = top; x >= 2 && !e; x--) {
            name[x] = 0;
            e = entity_find(tt_html5, TT_N_HTML5, name);
            if (e) break;
        }
    }
    if (e) {
        v_push_utf8(out, e->value);
        v_append(out, s + j + x, len - x);
    } else {
        v_append(out, s + i, k - i);
    }
    return k;
}
static void py_html_unescape(const u32v *in, u32v *out) { unescape_amps(in, out, py_ref); }

/* ftfy.fixes.unescape_html: &#?[0-9A-Za-z]{1,24}; replaced when it is an HTML5
** entity ending in ';' (or one of ftfy's all-caps variants), or a numeric
** reference that html.unescape decodes completely. */
static size_t ftfy_ref(const uint32_t *s, size_t n, size_t i, u32v *out) {
    size_t j = i + 1;
    int num = j < n && s[j] == '#';
    if (num) j++;
    size_t k = j;
    while (k < n && k - j < 25 && ((s[k] >= '0' && s[k] <= '9') || is_azAZ(s[k])))
        k++;
    if (k == j || k - j > 24 || k >= n || s[k] != ';') return i;
    k++; // the ';'
    char name[32];
    size_t len = k - (i + 1);
    for (size_t t = 0; t < len; t++) name[t] = (char)s[i + 1 + t];
    name[len] = 0;
    const tt_entity *e = NULL;
    if (!num) {
        e = entity_find(tt_html5, TT_N_HTML5, name);
        if (!e) e = entity_find(tt_ftfy_upper, TT_N_FTFY_UPPER, name);
    }
    if (e) {
        v_push_utf8(out, e->value);
    } else if (num) {
        u32v m = {0}, r = {0};
        v_append(&m, s + i, k - i);
        py_html_unescape(&m, &r);
        int partial = 0;
        for (size_t t = 0; t < r.n; t++)
            if (r.p[t] == ';') partial = 1;
        if (m.oom || r.oom) out->oom = 1;
        if (partial) v_append(out, s + i, k - i);
        else v_append(out, r.p, r.n);
        v_free(&m);
        v_free(&r);
    } else {
        v_append(out, s + i, k - i);
    }
    return k;
}
static void ftfy_unescape_html(const u32v *in, u32v *out) { unescape_amps(in, out, ftfy_ref); }

/* ---- ftfy mojibake repair ------------------------------------------------------ */

/* Reverse maps of the codecs' upper halves, sorted by code point, built once. */
typedef struct rev_entry {
    uint16_t cp;
    uint8_t byte;
} rev_entry;
static rev_entry g_rev[TT_N_CODECS][128];
static pthread_once_t g_rev_once = PTHREAD_ONCE_INIT;

static int rev_cmp(const void *a, const void *b) {
    const rev_entry *x = a, *y = b;
    return (int)x->cp - (int)y->cp;
}

static void rev_init(void) {
    for (int k = 0; k < TT_N_CODECS; k++) {
        for (int b = 0; b < 128; b++) {
            g_rev[k][b].cp = tt_codecs[k].hi[b];
            g_rev[k][b].byte = (uint8_t)(0x80 + b);
        }
        qsort(g_rev[k], 128, sizeof(rev_entry), rev_cmp);
    }
}

/* Byte for c in codec k, or -1 when c cannot be encoded. This is exactly ftfy's
** possible_encoding() test: ASCII except 0x1A, plus the characters that bytes
** 0x80-0xFF and 0x1A decode to (0x1A is U+FFFD in the sloppy codecs). */
static int codec_byte(int k, uint32_t c) {
    const tt_codec *cd = &tt_codecs[k];
    if (c < 0x80) {
        if (c == 0x1A) return cd->sloppy ? -1 : 0x1A;
        return (int)c;
    }
    if (cd->sloppy && c == 0xFFFD) return 0x1A;
    if (c > 0xFFFF) return -1;
    size_t lo = 0, hi = 128;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (g_rev[k][mid].cp < c) lo = mid + 1;
        else hi = mid;
    }
    return lo < 128 && g_rev[k][lo].cp == c ? g_rev[k][lo].byte : -1;
}

static int cont_byte(int v) { return v >= 0x80 && v <= 0xBF; }
/* [\x80-\x84\x86-\x9f\xa1-\xbf] */
static int cont_no85a0(int v) { return cont_byte(v) && v != 0x85 && v != 0xA0; }

/* Length of an ALTERED_UTF8_RE match at b[i], or 0. */
static size_t altered_at(const uint8_t *b, size_t n, size_t i) {
    int x = b[i], b1 = i + 1 < n ? b[i + 1] : -1, b2 = i + 2 < n ? b[i + 2] : -1,
        b3 = i + 3 < n ? b[i + 3] : -1;
    if ((x == 0xC2 || x == 0xC3 || x == 0xC5 || x == 0xCE || x == 0xD0 || x == 0xD9) && b1 == ' ')
        return 2;
    if ((x == 0xE2 || x == 0xE3) && b1 == ' ' && cont_no85a0(b2)) return 3;
    if (x >= 0xE0 && x <= 0xE3 && cont_no85a0(b1) && b2 == ' ') return 3;
    if (x == 0xF0) {
        if (b1 == ' ' && cont_byte(b2) && cont_byte(b3)) return 4;
        if (cont_byte(b1) && b2 == ' ' && cont_byte(b3)) return 4;
        if (cont_byte(b1) && cont_byte(b2) && b3 == ' ') return 4;
    }
    return 0;
}

static int altered_search(const bytev *b) {
    for (size_t i = 0; i < b->n; i++)
        if (altered_at(b->p, b->n, i)) return 1;
    return 0;
}

static int starts_with(const uint8_t *b, size_t n, size_t i, const char *s) {
    size_t k = strlen(s);
    return i + k <= n && !memcmp(b + i, s, k);
}

/* ftfy.fixes.restore_byte_a0: "\xc3 " becomes "\xc3\xa0 " (A_GRAVE_WORD_RE, not
** before " ", "quele", "quela", "quilo", "s "), then in every ALTERED_UTF8_RE
** match the spaces become 0xA0. */
static void restore_byte_a0(bytev *b) {
    bytev t = {0};
    for (size_t i = 0; i < b->n; i++) {
        if (b->p[i] == 0xC3 && i + 1 < b->n && b->p[i + 1] == ' ' &&
            !(starts_with(b->p, b->n, i + 2, " ") || starts_with(b->p, b->n, i + 2, "quele") ||
              starts_with(b->p, b->n, i + 2, "quela") || starts_with(b->p, b->n, i + 2, "quilo") ||
              starts_with(b->p, b->n, i + 2, "s "))) {
            b_push(&t, 0xC3);
            b_push(&t, 0xA0);
            b_push(&t, ' ');
            i++;
            continue;
        }
        b_push(&t, b->p[i]);
    }
    bytev u = {0};
    for (size_t i = 0; i < t.n;) {
        size_t k = altered_at(t.p, t.n, i);
        if (k) {
            for (size_t j = 0; j < k; j++) b_push(&u, t.p[i + j] == ' ' ? 0xA0 : t.p[i + j]);
            i += k;
        } else {
            b_push(&u, t.p[i++]);
        }
    }
    int oom = t.oom || u.oom || b->oom;
    b_free(&t);
    b_free(b);
    *b = u;
    b->oom = oom;
}

static int sub_or_q(int v) { return v == 0x1A || v == '?'; }
static int sub_or_cont(int v) { return v == 0x1A || cont_byte(v); }

/* Length of a LOSSY_UTF8_RE match at b[i], or 0. */
static size_t lossy_at(const uint8_t *b, size_t n, size_t i) {
    int v[6];
    for (int k = 0; k < 6; k++) v[k] = i + (size_t)k < n ? b[i + (size_t)k] : -1;
    int x = v[0];
    if (x >= 0xC2 && x <= 0xDF && v[1] == 0x1A) return 2;
    if ((x == 0xC2 || x == 0xC3) && v[1] == '?') return 2;
    if (x == 0xED && v[1] >= 0xA0 && v[1] <= 0xAF && v[3] == 0xED && v[4] >= 0xB0 && v[4] <= 0xBF) {
        if (sub_or_q(v[2]) && (sub_or_q(v[5]) || cont_byte(v[5]))) return 6;
        if ((sub_or_q(v[2]) || cont_byte(v[2])) && sub_or_q(v[5])) return 6;
    }
    if (x >= 0xE0 && x <= 0xEF) {
        if (sub_or_q(v[1]) && sub_or_cont(v[2])) return 3;
        if (sub_or_cont(v[1]) && sub_or_q(v[2])) return 3;
    }
    if (x >= 0xF0 && x <= 0xF4) {
        if (sub_or_q(v[1]) && sub_or_cont(v[2]) && sub_or_cont(v[3])) return 4;
        if (sub_or_cont(v[1]) && sub_or_q(v[2]) && sub_or_cont(v[3])) return 4;
        if (sub_or_cont(v[1]) && sub_or_cont(v[2]) && sub_or_q(v[3])) return 4;
    }
    if (x == 0x1A) return 1;
    return 0;
}

/* ftfy.fixes.replace_lossy_sequences: each LOSSY_UTF8_RE match becomes U+FFFD. */
static void replace_lossy(bytev *b) {
    bytev u = {0};
    for (size_t i = 0; i < b->n;) {
        size_t k = lossy_at(b->p, b->n, i);
        if (k) {
            b_push(&u, 0xEF);
            b_push(&u, 0xBF);
            b_push(&u, 0xBD);
            i += k;
        } else {
            b_push(&u, b->p[i++]);
        }
    }
    int oom = u.oom || b->oom;
    b_free(b);
    *b = u;
    b->oom = oom;
}

static void fix_encoding(u32v *t, int depth);

/* End of the UTF8_DETECTOR_RE match starting at i (== i when none):
** ([first_of_2][cont] | [first_of_3][cont]{2} | [first_of_4][cont]{3})+ */
static size_t utf8_detect_at(const uint32_t *s, size_t n, size_t i) {
    static const uint32_t first[3] = {TT_UTF8_FIRST_OF_2, TT_UTF8_FIRST_OF_3,
                                      TT_UTF8_FIRST_OF_4};
    size_t j = i;
    while (j < n) {
        uint32_t m = cat_mask(s[j]);
        size_t adv = 0;
        // Alternatives in order: a character in several first_of sets tries 2, 3, 4.
        for (size_t len = 1; len <= 3 && !adv; len++) {
            if (!(m & first[len - 1]) || j + len >= n) continue;
            size_t k = 1;
            while (k <= len && (cat_mask(s[j + k]) & TT_UTF8_CONTINUATION)) k++;
            if (k > len) adv = len + 1;
        }
        if (!adv) break;
        j += adv;
    }
    return j;
}

/* ftfy.fixes.decode_inconsistent_utf8: fix each UTF-8-looking run on its own,
** when it is shorter than the whole text and looks bad. */
static void decode_inconsistent(const u32v *t, u32v *out, int depth) {
    const uint32_t *s = t->p;
    size_t n = t->n, i = 0;
    out->n = 0;
    while (i < n) {
        if (i == 0 || !(cat_mask(s[i - 1]) & TT_UTF8_CONTINUATION_STRICT)) {
            size_t j = utf8_detect_at(s, n, i);
            if (j > i) {
                if (j - i < n && depth < CLEAN_MAX_DEPTH && is_bad(s + i, j - i)) {
                    u32v sub = {0};
                    v_append(&sub, s + i, j - i);
                    fix_encoding(&sub, depth + 1);
                    if (sub.oom) out->oom = 1;
                    v_append(out, sub.p, sub.n);
                    v_free(&sub);
                } else {
                    v_append(out, s + i, j - i);
                }
                i = j;
                continue;
            }
        }
        v_push(out, s[i++]);
    }
}

/* ftfy's _fix_encoding_one_step_and_explain. Returns 1 with the new text in
** *out (possibly equal to t), or 0 when it leaves t alone. */
static int fix_encoding_step(const u32v *t, u32v *out, int depth) {
    const uint32_t *s = t->p;
    size_t n = t->n;
    int ascii = 1, possible_latin1 = 0, has_c1 = 0, ret = 0;
    bytev b = {0};
    out->n = 0;
    if (n == 0) return 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] >= 0x80) ascii = 0;
        if (s[i] >= 0x80 && s[i] <= 0x9F) has_c1 = 1;
    }
    if (ascii || !is_bad(s, n)) return 0;
    pthread_once(&g_rev_once, rev_init);

    for (int k = 0; k < TT_N_CODECS; k++) {
        int ok = 1;
        b.n = 0;
        for (size_t i = 0; i < n && ok; i++) {
            int x = codec_byte(k, s[i]);
            if (x < 0) ok = 0;
            else b_push(&b, (uint8_t)x);
        }
        if (!ok) continue;
        if (k == CODEC_LATIN1) possible_latin1 = 1;
        if (k != CODEC_MACROMAN && altered_search(&b)) restore_byte_a0(&b);
        if (tt_codecs[k].sloppy) replace_lossy(&b);
        if (b.oom) {
            out->oom = 1;
            goto done;
        }
        int variants = memchr(b.p, 0xED, b.n) != NULL || memchr(b.p, 0xC0, b.n) != NULL;
        out->n = 0;
        if (decode_strict(b.p, b.n, variants, out) == 0) {
            ret = 1;
            goto done;
        }
    }

    // Look for UTF-8 runs that remain, and fix them in isolation.
    decode_inconsistent(t, out, depth);
    if (!v_eq(t, out)) {
        ret = 1;
        goto done;
    }
    out->n = 0;

    // Latin-1 meant as Windows-1252 (ftfy never lists plain "windows-1252" as
    // possible, so this branch always runs for Latin-1 text).
    if (possible_latin1) {
        int fail = 0, changed = 0;
        for (size_t i = 0; i < n && !fail; i++) {
            uint32_t c = s[i];
            if (c >= 0x80 && c <= 0x9F) {
                if (c == 0x81 || c == 0x8D || c == 0x8F || c == 0x90 || c == 0x9D) fail = 1;
                c = tt_codecs[CODEC_SLOPPY_1252].hi[c - 0x80];
                changed = 1;
            }
            v_push(out, c);
        }
        if (!fail && changed) {
            ret = 1;
            goto done;
        }
        out->n = 0;
    }
    if (has_c1) { // fix_c1_controls
        for (size_t i = 0; i < n; i++) {
            uint32_t c = s[i];
            v_push(out, c >= 0x80 && c <= 0x9F ? tt_codecs[CODEC_SLOPPY_1252].hi[c - 0x80] : c);
        }
        ret = 1;
    }
done:
    b_free(&b);
    return ret;
}

/* ftfy.fix_encoding: one step at a time until the text stops changing. */
static void fix_encoding(u32v *t, int depth) {
    u32v o = {0};
    for (int round = 0; round < CLEAN_MAX_ROUNDS; round++) {
        int changed = fix_encoding_step(t, &o, depth);
        if (o.oom) t->oom = 1;
        if (!changed || t->oom || v_eq(t, &o)) break;
        v_move(t, &o);
    }
    v_free(&o);
}

/* ---- ftfy's other fixers ---------------------------------------------------- */

/* ftfy.chardata.LIGATURES */
static const struct {
    uint32_t from;
    uint32_t to[3];
} k_ligatures[] = {
    {0x0132, {'I', 'J', 0}},     {0x0133, {'i', 'j', 0}},    {0x0149, {0x02BC, 'n', 0}},
    {0x01C4, {'D', 0x017D, 0}},  {0x01C5, {'D', 0x017E, 0}}, {0x01C6, {'d', 0x017E, 0}},
    {0x01C7, {'L', 'J', 0}},     {0x01C8, {'L', 'j', 0}},    {0x01C9, {'l', 'j', 0}},
    {0x01CA, {'N', 'J', 0}},     {0x01CB, {'N', 'j', 0}},    {0x01CC, {'n', 'j', 0}},
    {0x01F1, {'D', 'Z', 0}},     {0x01F2, {'D', 'z', 0}},    {0x01F3, {'d', 'z', 0}},
    {0xFB00, {'f', 'f', 0}},     {0xFB01, {'f', 'i', 0}},    {0xFB02, {'f', 'l', 0}},
    {0xFB03, {'f', 'f', 'i'}},   {0xFB04, {'f', 'f', 'l'}},  {0xFB05, {0x017F, 't', 0}},
    {0xFB06, {'s', 't', 0}},
};

static int needs_map(uint32_t c) {
    return (c >= 0x0132 && c <= 0x01F3) || (c >= 0xFB00 && c <= 0xFB06) || c == 0x3000 ||
           (c >= 0xFF01 && c <= 0xFFEF);
}

/* fix_latin_ligatures then fix_character_width (two str.translate tables). */
static void fix_ligatures_width(u32v *t) {
    size_t i;
    for (i = 0; i < t->n && !needs_map(t->p[i]); i++) {}
    if (i == t->n) return;
    for (int pass = 0; pass < 2; pass++) {
        u32v o = {0};
        for (i = 0; i < t->n; i++) {
            uint32_t c = t->p[i];
            int done = 0;
            if (pass == 0) {
                for (size_t k = 0; k < sizeof k_ligatures / sizeof k_ligatures[0]; k++)
                    if (k_ligatures[k].from == c) {
                        for (int j = 0; j < 3 && k_ligatures[k].to[j]; j++)
                            v_push(&o, k_ligatures[k].to[j]);
                        done = 1;
                        break;
                    }
            } else if (c == 0x3000 || (c >= 0xFF01 && c <= 0xFFEF)) {
                size_t lo = 0, hi = TT_N_WIDTH;
                while (lo < hi) {
                    size_t mid = (lo + hi) / 2;
                    if (tt_width_map[mid].from < c) lo = mid + 1;
                    else hi = mid;
                }
                if (lo < TT_N_WIDTH && tt_width_map[lo].from == c) {
                    v_push(&o, tt_width_map[lo].to[0]);
                    if (tt_width_map[lo].to[1]) v_push(&o, tt_width_map[lo].to[1]);
                    done = 1;
                }
            }
            if (!done) v_push(&o, c);
        }
        v_move(t, &o);
    }
}

/* uncurl_quotes, fix_line_breaks, remove_terminal_escapes, remove_control_chars,
** in ftfy's order. */
static void fix_quotes_breaks_controls(u32v *t) {
    u32v o = {0};
    size_t i;
    // uncurl_quotes (in place)
    for (i = 0; i < t->n; i++) {
        uint32_t c = t->p[i];
        if (c == 0x02BC || (c >= 0x2018 && c <= 0x201B)) t->p[i] = '\'';
        else if (c >= 0x201C && c <= 0x201F) t->p[i] = '"';
    }
    // fix_line_breaks
    for (i = 0; i < t->n; i++) {
        uint32_t c = t->p[i];
        if (c == '\r') {
            if (i + 1 < t->n && t->p[i + 1] == '\n') i++;
            c = '\n';
        } else if (c == 0x2028 || c == 0x2029 || c == 0x85) {
            c = '\n';
        }
        v_push(&o, c);
    }
    v_move(t, &o);
    // remove_terminal_escapes: \033\[((?:\d|;)*)([a-zA-Z])
    for (i = 0; i < t->n; i++) {
        if (t->p[i] == 0x1B && i + 1 < t->n && t->p[i + 1] == '[') {
            size_t k = i + 2;
            while (k < t->n && (t->p[k] == ';' || ucat(t->p[k]) == UTF8PROC_CATEGORY_ND)) k++;
            if (k < t->n && is_azAZ(t->p[k])) {
                i = k;
                continue;
            }
        }
        v_push(&o, t->p[i]);
    }
    v_move(t, &o);
    // remove_control_chars (ftfy.chardata.CONTROL_CHARS)
    size_t w = 0;
    for (i = 0; i < t->n; i++) {
        uint32_t c = t->p[i];
        if (c <= 0x08 || c == 0x0B || (c >= 0x0E && c <= 0x1F) || c == 0x7F ||
            (c >= 0x206A && c <= 0x206F) || c == 0xFEFF || (c >= 0xFFF9 && c <= 0xFFFC))
            continue;
        t->p[w++] = c;
    }
    t->n = w;
}

/* unicodedata.normalize("NFC", .) through utf8proc. */
static void nfc(u32v *t) {
    size_t i, nb = 0;
    for (i = 0; i < t->n && t->p[i] < 0x300; i++) {}
    if (i == t->n || t->oom) return; // nothing below U+0300 changes under NFC
    char *u8 = cdb_malloc(t->n * 4 + 1);
    if (!u8) {
        t->oom = 1;
        return;
    }
    for (i = 0; i < t->n; i++) nb += cdb_tok_utf8_put(t->p[i], u8 + nb);
    utf8proc_uint8_t *res = NULL;
    utf8proc_ssize_t rn = utf8proc_map((const utf8proc_uint8_t *)u8, (utf8proc_ssize_t)nb, &res,
                                       UTF8PROC_STABLE | UTF8PROC_COMPOSE);
    cdb_free(u8);
    if (rn < 0) { // only UTF8PROC_ERROR_NOMEM is possible on valid input
        t->oom = 1;
        return;
    }
    u32v o = {0};
    decode_lossy((const char *)res, (size_t)rn, &o);
    free(res);
    v_move(t, &o);
}

/* One ftfy.fix_and_explain run over a segment. */
static void fix_segment(u32v *t, int unescape) {
    u32v orig = {0}, o = {0};
    for (int round = 0; round < CLEAN_MAX_ROUNDS && !t->oom; round++) {
        orig.n = 0;
        v_append(&orig, t->p, t->n);
        if (unescape) {
            ftfy_unescape_html(t, &o);
            v_move(t, &o);
        }
        fix_encoding(t, 0);
        // fix_c1_controls
        for (size_t i = 0; i < t->n; i++)
            if (t->p[i] >= 0x80 && t->p[i] <= 0x9F)
                t->p[i] = tt_codecs[CODEC_SLOPPY_1252].hi[t->p[i] - 0x80];
        fix_ligatures_width(t);
        fix_quotes_breaks_controls(t);
        // fix_surrogates: nothing to do, surrogates never get in
        nfc(t);
        if (orig.oom) t->oom = 1;
        if (v_eq(t, &orig)) break;
    }
    v_free(&orig);
    v_free(&o);
}

/* ftfy.fix_text: independent segments ending at '\n' (at most 10^6 code points);
** HTML unescaping stops for good at the first segment holding a '<'. */
static void ftfy_fix_text(u32v *t) {
    u32v out = {0}, seg = {0};
    int unescape = 1;
    size_t pos = 0;
    if (v_reserve(&out, t->n)) t->oom = 1;
    while (pos < t->n && !t->oom) {
        size_t brk = pos;
        while (brk < t->n && t->p[brk] != '\n') brk++;
        brk = brk < t->n ? brk + 1 : t->n;
        if (brk - pos > CLEAN_MAX_SEGMENT) brk = pos + CLEAN_MAX_SEGMENT;
        seg.n = 0;
        v_append(&seg, t->p + pos, brk - pos);
        for (size_t i = 0; unescape && i < seg.n; i++)
            if (seg.p[i] == '<') unescape = 0;
        fix_segment(&seg, unescape);
        if (seg.oom) t->oom = 1;
        v_append(&out, seg.p, seg.n);
        pos = brk;
    }
    v_free(&seg);
    v_move(t, &out);
}

/* ---- Python's str.lower() --------------------------------------------------- */

/* Unicode "Cased": Lowercase, Uppercase or Lt. utf8proc has no such property, so
** letters with a case mapping plus the Other_Lowercase/Other_Uppercase lists. */
static int is_cased(uint32_t c) {
    int k = ucat(c);
    if (k == UTF8PROC_CATEGORY_LU || k == UTF8PROC_CATEGORY_LL || k == UTF8PROC_CATEGORY_LT)
        return 1;
    if (utf8proc_tolower((utf8proc_int32_t)c) != (utf8proc_int32_t)c ||
        utf8proc_toupper((utf8proc_int32_t)c) != (utf8proc_int32_t)c)
        return 1;
    return c == 0xAA || c == 0xBA || (c >= 0x2B0 && c <= 0x2B8) || (c >= 0x2C0 && c <= 0x2C1) ||
           (c >= 0x2E0 && c <= 0x2E4) || c == 0x345 || c == 0x37A ||
           (c >= 0x1D2C && c <= 0x1D6A) || c == 0x1D78 || (c >= 0x1D9B && c <= 0x1DBF) ||
           c == 0x2071 || c == 0x207F || (c >= 0x2090 && c <= 0x209C) ||
           (c >= 0x2C7C && c <= 0x2C7D) || (c >= 0xA69C && c <= 0xA69D) || c == 0xA770 ||
           (c >= 0xA7F8 && c <= 0xA7F9) || (c >= 0xAB5C && c <= 0xAB5F) ||
           (c >= 0x1F130 && c <= 0x1F149) || (c >= 0x1F150 && c <= 0x1F169) ||
           (c >= 0x1F170 && c <= 0x1F189);
}

/* Unicode "Case_Ignorable": Mn, Me, Cf, Lm, Sk, and Word_Break MidLetter,
** MidNumLet and Single_Quote. */
static int is_case_ignorable(uint32_t c) {
    int k = ucat(c);
    if (k == UTF8PROC_CATEGORY_MN || k == UTF8PROC_CATEGORY_ME || k == UTF8PROC_CATEGORY_CF ||
        k == UTF8PROC_CATEGORY_LM || k == UTF8PROC_CATEGORY_SK)
        return 1;
    return c == 0x27 || c == 0x2E || c == 0x3A || c == 0xB7 || c == 0x387 || c == 0x55F ||
           c == 0x5F4 || c == 0x2018 || c == 0x2019 || c == 0x2024 || c == 0x2027 ||
           c == 0xFE13 || c == 0xFE52 || c == 0xFE55 || c == 0xFF07 || c == 0xFF0E || c == 0xFF1A;
}

/* CPython's handle_capital_sigma: final form when preceded by a cased letter and
** not followed by one (case-ignorable characters skipped both ways). */
static uint32_t lower_sigma(const uint32_t *s, size_t n, size_t i) {
    size_t j = i;
    uint32_t c = 0;
    int final_sigma = 0;
    while (j > 0) {
        c = s[--j];
        if (!is_case_ignorable(c)) {
            final_sigma = is_cased(c);
            break;
        }
    }
    if (final_sigma) {
        for (j = i + 1; j < n; j++) {
            c = s[j];
            if (!is_case_ignorable(c)) break;
        }
        final_sigma = j == n || !is_cased(c);
    }
    return final_sigma ? 0x3C2 : 0x3C3;
}

static void py_lower(u32v *t) {
    u32v o = {0};
    if (v_reserve(&o, t->n + 16)) {
        t->oom = 1;
        return;
    }
    for (size_t i = 0; i < t->n; i++) {
        uint32_t c = t->p[i];
        if (c < 0x80) {
            v_push(&o, c >= 'A' && c <= 'Z' ? c + 32 : c);
        } else if (c == 0x130) { // SpecialCasing: the only unconditional multi-char lower
            v_push(&o, 'i');
            v_push(&o, 0x307);
        } else if (c == 0x3A3) {
            v_push(&o, lower_sigma(t->p, t->n, i));
        } else {
            v_push(&o, (uint32_t)utf8proc_tolower((utf8proc_int32_t)c));
        }
    }
    v_move(t, &o);
}

cdb_status cdb_tok_lower32(const uint32_t *s, size_t n, uint32_t **out, size_t *n_out) {
    u32v t = {0};
    v_append(&t, s, n);
    if (!t.oom) py_lower(&t);
    if (t.oom || v_reserve(&t, 1)) {
        v_free(&t);
        return cdb_seterr(CDB_NOMEM, "cdb_tok_lower32: out of memory");
    }
    *out = t.p;
    *n_out = t.n;
    return CDB_OK;
}

/* ---- the whole pipeline --------------------------------------------------------- */

static void strip_py(u32v *t) {
    size_t a = 0, b = t->n;
    while (a < b && py_isspace(t->p[a])) a++;
    while (b > a && py_isspace(t->p[b - 1])) b--;
    if (a) memmove(t->p, t->p + a, (b - a) * sizeof *t->p);
    t->n = b - a;
}

/* Replaces each run of characters matching is_sp with one ' ' (regex.sub(r'\s+', ' ')
** or, with py_isspace, the same for `re` and " ".join(text.split()) before a strip). */
static void collapse_space(u32v *t, int (*is_sp)(uint32_t)) {
    size_t w = 0;
    int in_space = 0;
    for (size_t i = 0; i < t->n; i++) {
        if (is_sp(t->p[i])) {
            if (!in_space) t->p[w++] = ' ';
            in_space = 1;
        } else {
            t->p[w++] = t->p[i];
            in_space = 0;
        }
    }
    t->n = w;
}

/* text.translate(str.maketrans("", "", string.punctuation)): ASCII punctuation only. */
static void remove_punctuation(u32v *t) {
    size_t w = 0;
    for (size_t i = 0; i < t->n; i++) {
        uint32_t c = t->p[i];
        if (!(c < 0x80 && c > 0x20 && c != 0x7F && !is_azAZ(c) && !(c >= '0' && c <= '9')))
            t->p[w++] = c;
    }
    t->n = w;
}

/* OpenCLIP's basic_clean: ftfy.fix_text, html.unescape twice, strip. */
static void basic_clean(u32v *t, u32v *tmp) {
    ftfy_fix_text(t);
    py_html_unescape(t, tmp);
    py_html_unescape(tmp, t);
    strip_py(t);
}

/* The SIGLIP_HF steps of tok_int.h, in transformers' order. */
static void siglip_hf_clean(u32v *t, u32v *tmp) {
    tmp->n = 0;
    if (v_reserve(tmp, t->n + 1)) return;
    v_push(tmp, 0x2581);
    for (size_t i = 0; i < t->n; i++) v_push(tmp, t->p[i] == 0x2581 ? ' ' : t->p[i]);
    v_move(t, tmp);
    py_lower(t);
    remove_punctuation(t);
    collapse_space(t, py_isspace);
    strip_py(t);
}

cdb_status cdb_tok_clean32_mode(const char *text, size_t len, cdb_tok_clean_mode mode,
                                uint32_t **out, size_t *n_out) {
    u32v t = {0}, o = {0};
    cdb_status rc = CDB_OK;
    if (!out || !n_out || (!text && len))
        return cdb_seterr(CDB_INVALID, "cdb_tok_clean: NULL argument");
    *out = NULL;
    *n_out = 0;
    decode_lossy(text, len, &t);
    switch (mode) {
    case CDB_TOK_CLEAN_CLIP:
        basic_clean(&t, &o);
        collapse_space(&t, cdb_tok_is_space);
        strip_py(&t);
        py_lower(&t);
        break;
    case CDB_TOK_CLEAN_CANONICALIZE:
        basic_clean(&t, &o);
        for (size_t i = 0; i < t.n; i++)
            if (t.p[i] == '_') t.p[i] = ' ';
        remove_punctuation(&t);
        py_lower(&t);
        collapse_space(&t, py_isspace);
        strip_py(&t);
        break;
    case CDB_TOK_CLEAN_SIGLIP_HF:
        siglip_hf_clean(&t, &o);
        break;
    case CDB_TOK_CLEAN_NONE:
        break;
    }
    if (t.oom || o.oom || v_reserve(&t, 1)) {
        rc = cdb_seterr(CDB_NOMEM, "cdb_tok_clean: out of memory (%zu bytes of text)", len);
        goto done;
    }
    *out = t.p;
    *n_out = t.n;
    t.p = NULL;
done:
    v_free(&t);
    v_free(&o);
    return rc;
}

cdb_status cdb_tok_clean32(const char *text, size_t len, uint32_t **out, size_t *n_out) {
    return cdb_tok_clean32_mode(text, len, CDB_TOK_CLEAN_CLIP, out, n_out);
}

cdb_status cdb_tok_clean(const char *text, size_t len, char **out) {
    uint32_t *cp = NULL;
    size_t n = 0, nb = 0;
    cdb_status rc;
    if (!out) return cdb_seterr(CDB_INVALID, "cdb_tok_clean: out is NULL");
    *out = NULL;
    if ((rc = cdb_tok_clean32(text, len, &cp, &n)) != CDB_OK) return rc;
    char *s = cdb_malloc(n * 4 + 1);
    if (!s) {
        cdb_free(cp);
        return cdb_seterr(CDB_NOMEM, "cdb_tok_clean: out of memory");
    }
    for (size_t i = 0; i < n; i++) nb += cdb_tok_utf8_put(cp[i], s + nb);
    s[nb] = 0;
    cdb_free(cp);
    *out = s;
    return CDB_OK;
}
