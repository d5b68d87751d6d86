/*
** tok_hf_text.c: the text side of the tokenizer.json backend (tok_hf_int.h): UTF-8
** helpers, the patterns of Replace and Split (PCRE2), the normalizers and the
** pre-tokenizers, each as @huggingface/tokenizers 0.2.0 (the reference) runs it.
**
** Text is UTF-8 throughout. The reference works on JavaScript strings (UTF-16) with JS
** regular expressions; the equivalences this file relies on:
** - JS's /u regexes iterate code points, as PCRE2 in UTF mode does; the reference's
**   translation of Oniguruma patterns to JS (\s = White_Space, \d = Nd, \w = its
**   word class, '.' = [^\n], line anchors, dropped possessive '+', (?i:) as ASCII
**   folding) is reproduced in PCRE2 syntax by re_translate();
** - global matching advances one code point after an empty match (JS's matchAll and
**   replaceAll in /u mode), and split() follows the JS algorithm (captures included);
** - the builtin patterns written without /u (Whitespace, WhitespaceSplit) only use
**   classes that never split a surrogate pair, so code points give the same pieces.
** Unicode data: utf8proc (normalization forms, categories, case), PCRE2 (properties).
*/
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <jansson.h>
#include <pcre2.h>
#include <utf8proc.h>

#include "encoder/tok_hf_int.h"
#include "encoder/tok_int.h"

/* ---- buffers and UTF-8 ------------------------------------------------------------ */

static void buf_reserve(hf_buf *b, size_t need) {
    if (!b->oom && cdb_tok_grow((void **)&b->p, &b->cap, b->n + need, 1) != 0) b->oom = 1;
}

void hf_buf_add(hf_buf *b, const char *s, size_t n) {
    buf_reserve(b, n + 1);
    if (b->oom) return;
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

void hf_buf_add_cp(hf_buf *b, uint32_t cp) {
    char tmp[4];
    hf_buf_add(b, tmp, cdb_tok_utf8_put(cp, tmp));
}

void hf_buf_free(hf_buf *b) {
    cdb_free(b->p);
    memset(b, 0, sizeof *b);
}

void hf_list_add(hf_list *l, const char *s, size_t n) {
    if (l->oom) return;
    if (cdb_tok_grow((void **)&l->off, &l->cap, l->n + 2, sizeof *l->off) != 0) {
        l->oom = 1;
        return;
    }
    if (l->n == 0) l->off[0] = l->s.n;
    hf_buf_add(&l->s, s, n);
    if (l->s.oom) {
        l->oom = 1;
        return;
    }
    l->off[++l->n] = l->s.n;
}

void hf_list_free(hf_list *l) {
    hf_buf_free(&l->s);
    cdb_free(l->off);
    memset(l, 0, sizeof *l);
}

size_t hf_utf8_next(const char *s, size_t n, uint32_t *cp) {
    utf8proc_int32_t c = 0;
    utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n, &c);
    if (k <= 0) { // not reached on the well-formed text this file handles
        *cp = 0xFFFD;
        return 1;
    }
    *cp = (uint32_t)c;
    return (size_t)k;
}

/* The length of the maximal subpart of a well-formed sequence at s[0..n), at least 1
** (WHATWG's UTF-8 decoder, which replaces each such subpart with one U+FFFD). */
static size_t maximal_subpart(const uint8_t *s, size_t n) {
    uint8_t b = s[0];
    size_t need;
    uint8_t lo = 0x80, hi = 0xBF;
    if (b >= 0xC2 && b <= 0xDF)
        need = 1;
    else if (b >= 0xE0 && b <= 0xEF) {
        need = 2;
        if (b == 0xE0) lo = 0xA0;
        if (b == 0xED) hi = 0x9F;
    } else if (b >= 0xF0 && b <= 0xF4) {
        need = 3;
        if (b == 0xF0) lo = 0x90;
        if (b == 0xF4) hi = 0x8F;
    } else
        return 1;
    size_t k = 1;
    while (k <= need && k < n) {
        uint8_t c = s[k];
        if (c < (k == 1 ? lo : 0x80) || c > (k == 1 ? hi : 0xBF)) break;
        k++;
    }
    return k;
}

void hf_utf8_lossy(const char *text, size_t len, hf_buf *out) {
    const uint8_t *s = (const uint8_t *)text;
    size_t i = 0, start = 0;
    buf_reserve(out, len + 1);
    while (i < len) {
        utf8proc_int32_t c;
        utf8proc_ssize_t k = utf8proc_iterate(s + i, (utf8proc_ssize_t)(len - i), &c);
        if (k > 0) {
            i += (size_t)k;
            continue;
        }
        hf_buf_add(out, text + start, i - start);
        hf_buf_add_cp(out, 0xFFFD);
        i += maximal_subpart(s + i, len - i);
        start = i;
    }
    hf_buf_add(out, text + start, len - start);
}

int hf_js_space(uint32_t c) {
    return (c >= 9 && c <= 13) || c == 0x20 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
           c == 0x205F || c == 0x3000 || c == 0xFEFF;
}

void hf_js_trim(const char *s, size_t n, int left, int right, size_t *a, size_t *b) {
    size_t i = 0, j = n;
    uint32_t c;
    if (left) {
        while (i < n) {
            size_t k = hf_utf8_next(s + i, n - i, &c);
            if (!hf_js_space(c)) break;
            i += k;
        }
    }
    if (right) {
        while (j > i) {
            size_t p = j - 1;
            while (p > i && ((uint8_t)s[p] & 0xC0) == 0x80) p--;
            hf_utf8_next(s + p, j - p, &c);
            if (!hf_js_space(c)) break;
            j = p;
        }
    }
    *a = i;
    *b = j;
}

/* ---- patterns: Oniguruma -> PCRE2, as the reference's rewrite_oniguruma_to_js ------ */

#define WS_CLASS "\\p{White_Space}"
#define WORD_IN "\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}"
#define WORD_CHARS WORD_IN "\\x{B2}\\x{B3}\\x{B9}\\x{BC}-\\x{BE}"
#define WORD_CLASS "[" WORD_CHARS "]"
#define NON_WORD_CLASS "[^" WORD_CHARS "]"
#define LINE_START "(?:(?<![\\s\\S])|(?<=\\n))"
#define LINE_END "(?:(?=\\n)|(?![\\s\\S]))"
/* JS's own \s (used by the reference's builtin patterns): adds U+FEFF, lacks U+0085. */
#define JS_SPACES                                                                                  \
    "\\x{9}-\\x{D}\\x{20}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}"                    \
    "\\x{202F}\\x{205F}\\x{3000}\\x{FEFF}"

struct hf_pattern {
    char *lit; /* a String pattern: the literal */
    size_t lit_n;
    int lit_capture;  /* the reference wraps it in a group ("(escaped)") */
    pcre2_code *code; /* a Regex pattern */
};

/* The control-character escapes Oniguruma and JS read alike, in a class or out of one. */
static const char *control_escape(char d) {
    switch (d) {
    case 'a': return "\\x07";
    case 'e': return "\\x1B";
    case 'n': return "\\n";
    case 'r': return "\\r";
    case 't': return "\\t";
    case 'f': return "\\f";
    case 'v': return "\\x0B";
    default: return NULL;
    }
}

static const char *escape_rewrite(char d) {
    switch (d) {
    case 'A': return "(?<![\\s\\S])";
    case 'z': return "(?![\\s\\S])";
    case 'Z': return "(?=\\n?(?![\\s\\S]))";
    case 'h': return "[0-9A-Fa-f]";
    case 'H': return "[^0-9A-Fa-f]";
    case 'w': return WORD_CLASS;
    case 'W': return NON_WORD_CLASS;
    case 'd': return "\\p{Nd}";
    case 'D': return "\\P{Nd}";
    case 's': return WS_CLASS;
    case 'S': return "\\P{White_Space}";
    case 'b':
        return "(?:(?<!" WORD_CLASS ")(?=" WORD_CLASS ")|(?<=" WORD_CLASS ")(?!" WORD_CLASS "))";
    case 'B':
        return "(?:(?<!" WORD_CLASS ")(?!" WORD_CLASS ")|(?<=" WORD_CLASS ")(?=" WORD_CLASS "))";
    case '\n': return "\\n";
    case '\r': return "\\r";
    case '\t': return "\\t";
    case '\f': return "\\f";
    case '\v': return "\\x0B";
    default: return control_escape(d);
    }
}

static const char *class_escape_rewrite(char d) {
    switch (d) {
    case 'h': return "0-9A-Fa-f";
    case 'w': return WORD_IN;
    case 'd': return "\\p{Nd}";
    case 'D': return "\\P{Nd}";
    case 's': return WS_CLASS;
    case 'S': return "\\P{White_Space}";
    default: return control_escape(d);
    }
}

static int is_hex_str(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!strchr("0123456789abcdefABCDEF", s[i]) || !s[i]) return 0;
    return 1;
}

/* A braced or fixed-width escape at re[i] (\p{..} \P{..} \x{..} \u{..} \xHH \uHHHH):
** appends its PCRE2 form, returns its length, 0 if it is none of them. */
static size_t escape_codepoint(const char *re, size_t i, int in_class, hf_buf *o) {
    char d = re[i + 1];
    if ((d == 'p' || d == 'P' || d == 'x' || d == 'u') && re[i + 2] == '{') {
        const char *end = strchr(re + i + 3, '}');
        if (!end) return 0;
        size_t bn = (size_t)(end - (re + i + 3));
        const char *body = re + i + 3;
        if (d == 'x' || d == 'u') {
            hf_buf_add(o, "\\x{", 3);
            hf_buf_add(o, body, bn);
            hf_buf_add(o, "}", 1);
        } else if (bn == 4 && !memcmp(body, "Word", 4)) {
            if (in_class && d == 'P') return 0; // the reference refuses it too
            hf_buf_add(o,
                       in_class   ? WORD_IN
                       : d == 'p' ? WORD_CLASS
                                  : NON_WORD_CLASS,
                       strlen(in_class   ? WORD_IN
                              : d == 'p' ? WORD_CLASS
                                         : NON_WORD_CLASS));
        } else {
            hf_buf_add(o, re + i, bn + 4);
        }
        return bn + 4;
    }
    if (d == 'x' && is_hex_str(re + i + 2, 2)) {
        hf_buf_add(o, re + i, 4);
        return 4;
    }
    if (d == 'u' && is_hex_str(re + i + 2, 4)) {
        hf_buf_add(o, "\\x{", 3);
        hf_buf_add(o, re + i + 2, 4);
        hf_buf_add(o, "}", 1);
        return 6;
    }
    return 0;
}

static size_t char_len(const char *s) {
    uint8_t b = (uint8_t)s[0];
    return b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
}

/* A character class at re[i] == '['; returns the index after it, 0 if unsupported
** (nested classes, intersections, POSIX brackets: rare in tokenizer files). */
static size_t translate_class(const char *re, size_t i, hf_buf *o) {
    size_t j = i + 1;
    hf_buf_add(o, "[", 1);
    if (re[j] == '^') hf_buf_add(o, "^", 1), j++;
    while (re[j] && re[j] != ']') {
        if (re[j] == '[' || (re[j] == '&' && re[j + 1] == '&')) return 0;
        if (re[j] == '\\') {
            if (!re[j + 1]) return 0;
            size_t k = escape_codepoint(re, j, 1, o);
            if (k) {
                j += k;
                continue;
            }
            const char *rw = class_escape_rewrite(re[j + 1]);
            if (rw)
                hf_buf_add(o, rw, strlen(rw));
            else if (((uint8_t)re[j + 1] & 0x80) == 0 && !strchr("0123456789", re[j + 1]) &&
                     !((re[j + 1] | 0x20) >= 'a' && (re[j + 1] | 0x20) <= 'z'))
                hf_buf_add(o, re + j, 2);
            else if ((uint8_t)re[j + 1] & 0x80) {
                hf_buf_add(o, re + j + 1, char_len(re + j + 1));
                j += char_len(re + j + 1) - 1;
            } else
                return 0; // an escape the translation does not know
            j += 2;
            continue;
        }
        size_t k = char_len(re + j);
        hf_buf_add(o, re + j, k);
        j += k;
    }
    if (re[j] != ']') return 0;
    hf_buf_add(o, "]", 1);
    return j + 1;
}

/* The reference's normalize_bloom_split_char_class: "[^(\s|[X])]" -> "[^()|\sX]". */
static void bloom_fix(const char *re, hf_buf *o) {
    const char *pre = "[^(\\s|[";
    size_t i = 0, pn = strlen(pre);
    while (re[i]) {
        if (!strncmp(re + i, pre, pn)) {
            const char *x = re + i + pn;
            size_t k = 0;
            while (x[k] && x[k] != ']') k++;
            if (k > 0 && x[k] == ']' && x[k + 1] == ')' && x[k + 2] == ']') {
                hf_buf_add(o, "[^()|\\s", 7);
                hf_buf_add(o, x, k);
                hf_buf_add(o, "]", 1);
                i += pn + k + 3;
                continue;
            }
        }
        hf_buf_add(o, re + i, 1);
        i++;
    }
}

/* Appends an atom, remembering where it starts (a {n,m}+ quantifier wraps it). */
static void emit(hf_buf *o, const char *s, size_t n, long *atom, int *last_q) {
    *atom = (long)o->n;
    hf_buf_add(o, s, n);
    *last_q = 0;
}

static cdb_status re_translate(const char *re, hf_buf *o) {
    size_t i = 0;
    long atom = -1; /* where the last atom starts in o */
    int last_q = 0, fold = 0, depth = 0;
    struct {
        long atom;
        int fold;
    } st[256];
#define EMIT(str, len) emit(o, (str), (len), &atom, &last_q)
    while (re[i]) {
        char c = re[i];
        if (c == '\\') {
            if (!re[i + 1]) return cdb_seterr(CDB_UNSUPPORTED, "a regex ends in '\\'");
            long at = (long)o->n;
            size_t k = escape_codepoint(re, i, 0, o);
            if (k) {
                if (fold && (re[i + 1] == 'x' || re[i + 1] == 'u'))
                    return cdb_seterr(CDB_UNSUPPORTED, "a code point escape inside (?i:)");
                atom = at, last_q = 0, i += k;
                continue;
            }
            char d = re[i + 1];
            if (d == 'c' && ((d | 0x20) >= 'a')) {
                EMIT(re + i, 3);
                i += 3;
                continue;
            }
            size_t dn = char_len(re + i + 1);
            i += 1 + dn;
            if (d == 'G') continue;
            const char *rw = escape_rewrite(d);
            if (rw)
                EMIT(rw, strlen(rw));
            else if ((uint8_t)d & 0x80)
                EMIT(re + i - dn, dn);
            else if ((d >= '0' && d <= '9') || ((d | 0x20) >= 'a' && (d | 0x20) <= 'z'))
                return cdb_seterr(CDB_UNSUPPORTED, "regex escape \\%c", d);
            else {
                char e[2] = {'\\', d};
                EMIT(e, 2);
            }
            continue;
        }
        switch (c) {
        case '[': {
            if (fold) return cdb_seterr(CDB_UNSUPPORTED, "a character class inside (?i:)");
            long at = (long)o->n;
            size_t j = translate_class(re, i, o);
            if (!j) return cdb_seterr(CDB_UNSUPPORTED, "regex character class at %zu", i);
            atom = at, last_q = 0, i = j;
            continue;
        }
        case ']':
            EMIT("\\]", 2);
            i++;
            continue;
        case '.':
            EMIT("[^\\n]", 5);
            i++;
            continue;
        case '^':
            EMIT(LINE_START, strlen(LINE_START));
            i++;
            continue;
        case '$':
            EMIT(LINE_END, strlen(LINE_END));
            i++;
            continue;
        case '(': {
            const char *pfx = "(";
            size_t pn = 1;
            if (depth >= 256) return cdb_seterr(CDB_UNSUPPORTED, "regex nesting too deep");
            st[depth].atom = (long)o->n;
            st[depth].fold = fold;
            depth++;
            if (!strncmp(re + i, "(?i:", 4))
                pfx = "(?:", pn = 4, fold = 1;
            else if (!strncmp(re + i, "(?>", 3))
                pfx = "(?:", pn = 3;
            else if (!strncmp(re + i, "(?<=", 4) || !strncmp(re + i, "(?<!", 4))
                pn = 4, pfx = NULL;
            else if (!strncmp(re + i, "(?:", 3) || !strncmp(re + i, "(?=", 3) ||
                     !strncmp(re + i, "(?!", 3))
                pn = 3, pfx = NULL;
            else if (re[i + 1] == '?')
                return cdb_seterr(CDB_UNSUPPORTED, "regex group (?%c", re[i + 2]);
            hf_buf_add(o, pfx ? pfx : re + i, pfx ? strlen(pfx) : pn);
            last_q = 0;
            i += pn;
            continue;
        }
        case ')':
            hf_buf_add(o, ")", 1);
            if (depth > 0) {
                depth--;
                atom = st[depth].atom;
                fold = st[depth].fold;
            } else
                atom = -1, fold = 0;
            last_q = 0;
            i++;
            continue;
        case '|':
            hf_buf_add(o, "|", 1);
            atom = -1;
            last_q = 0;
            i++;
            continue;
        case '{': {
            size_t j = i + 1, a = 0, b = 0;
            while (re[j] >= '0' && re[j] <= '9') j++, a++;
            int comma = re[j] == ',';
            if (comma) {
                j++;
                while (re[j] >= '0' && re[j] <= '9') j++, b++;
            }
            if (re[j] != '}' || (a == 0 && (!comma || b == 0)) || atom < 0) {
                EMIT("\\{", 2);
                i++;
                continue;
            }
            hf_buf body = {0};
            if (a == 0) hf_buf_add(&body, "0", 1);
            hf_buf_add(&body, re + i + 1, j - i - 1);
            i = j + 1;
            if (re[i] == '+' || re[i] == '*') {
                hf_buf t = {0};
                hf_buf_add(&t, "(?:", 3);
                hf_buf_add(&t, o->p + atom, o->n - (size_t)atom);
                hf_buf_add(&t, "{", 1);
                hf_buf_add(&t, body.p, body.n);
                hf_buf_add(&t, "})", 2);
                hf_buf_add(&t, re + i, 1);
                o->n = (size_t)atom;
                hf_buf_add(o, t.p, t.n);
                o->oom |= t.oom;
                hf_buf_free(&t);
                i++;
            } else {
                hf_buf_add(o, "{", 1);
                hf_buf_add(o, body.p, body.n);
                hf_buf_add(o, "}", 1);
            }
            o->oom |= body.oom;
            hf_buf_free(&body);
            last_q = 1;
            continue;
        }
        case '}':
            EMIT("\\}", 2);
            i++;
            continue;
        case '+':
            if (!last_q) hf_buf_add(o, "+", 1);
            last_q = !last_q ? 1 : last_q;
            i++;
            continue;
        case '*':
        case '?':
            hf_buf_add(o, re + i, 1);
            last_q = 1;
            i++;
            continue;
        default: {
            size_t k = char_len(re + i);
            if (fold && ((c | 0x20) >= 'a' && (c | 0x20) <= 'z')) {
                char cls[4] = {'[', (char)(c | 0x20), (char)(c & ~0x20), ']'};
                EMIT(cls, 4);
            } else
                EMIT(re + i, k);
            i += k;
        }
        }
    }
#undef EMIT
    return o->oom ? cdb_seterr(CDB_NOMEM, "out of memory") : CDB_OK;
}

static pcre2_code *re_compile(const char *pcre, cdb_status *rc, const char *what) {
    int err = 0;
    PCRE2_SIZE at = 0;
    pcre2_code *code =
        pcre2_compile((PCRE2_SPTR)pcre, PCRE2_ZERO_TERMINATED, PCRE2_UTF, &err, &at, NULL);
    if (!code) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(err, msg, sizeof msg);
        *rc = cdb_seterr(CDB_UNSUPPORTED, "regex %s: %s at %zu", what, (char *)msg, (size_t)at);
    }
    return code;
}

cdb_status hf_pattern_new(const char *string, const char *regex, int capture, hf_pattern **out) {
    cdb_status rc = CDB_OK;
    *out = NULL;
    if (!string && !regex) return CDB_OK;
    hf_pattern *p = cdb_calloc(1, sizeof *p);
    if (!p) return cdb_seterr(CDB_NOMEM, "out of memory");
    if (string) {
        p->lit_n = strlen(string);
        p->lit = cdb_malloc(p->lit_n + 1);
        if (!p->lit) {
            cdb_free(p);
            return cdb_seterr(CDB_NOMEM, "out of memory");
        }
        memcpy(p->lit, string, p->lit_n + 1);
        p->lit_capture = capture;
    } else {
        hf_buf fixed = {0}, pc = {0};
        bloom_fix(regex, &fixed);
        if (fixed.oom) rc = cdb_seterr(CDB_NOMEM, "out of memory");
        if (!rc) rc = re_translate(fixed.p ? fixed.p : "", &pc);
        if (!rc) p->code = re_compile(pc.p ? pc.p : "", &rc, regex);
        hf_buf_free(&fixed);
        hf_buf_free(&pc);
    }
    if (rc) {
        hf_pattern_free(p);
        return rc;
    }
    *out = p;
    return CDB_OK;
}

void hf_pattern_free(hf_pattern *p) {
    if (!p) return;
    cdb_free(p->lit);
    pcre2_code_free(p->code);
    cdb_free(p);
}

/* One match of p in s[0..n) at or after `from`: [*a, *b). md holds the groups. */
static int pat_find(const hf_pattern *p, pcre2_match_data *md, const char *s, size_t n, size_t from,
                    size_t *a, size_t *b) {
    if (p->lit) {
        if (p->lit_n == 0) { // an empty literal matches everywhere
            if (from > n) return 0;
            *a = *b = from;
            return 1;
        }
        for (size_t i = from; i + p->lit_n <= n; i++) {
            if (!memcmp(s + i, p->lit, p->lit_n)) {
                *a = i;
                *b = i + p->lit_n;
                return 1;
            }
        }
        return 0;
    }
    if (from > n) return 0;
    int r = pcre2_match(p->code, (PCRE2_SPTR)s, n, from, PCRE2_NO_UTF_CHECK, md, NULL);
    if (r < 0) return 0;
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
    *a = ov[0];
    *b = ov[1];
    return 1;
}

static size_t step_cp(const char *s, size_t n, size_t i) {
    if (i >= n) return i + 1;
    return i + char_len(s + i);
}

typedef struct pat_iter {
    const hf_pattern *p;
    pcre2_match_data *md;
    const char *s;
    size_t n, next;
} pat_iter;

static void it_init(pat_iter *it, const hf_pattern *p, const char *s, size_t n) {
    memset(it, 0, sizeof *it);
    it->p = p;
    it->s = s;
    it->n = n;
    if (p->code) it->md = pcre2_match_data_create_from_pattern(p->code, NULL);
}

/* The next match of JS's global matching (matchAll / replaceAll / match with /g). */
static int it_next(pat_iter *it, size_t *a, size_t *b) {
    if (it->p->code && !it->md) return 0;
    if (!pat_find(it->p, it->md, it->s, it->n, it->next, a, b)) return 0;
    it->next = *b == *a ? step_cp(it->s, it->n, *b) : *b;
    return 1;
}

static void it_done(pat_iter *it) { pcre2_match_data_free(it->md); }

/* JS's s.replaceAll(p, content) (content without '$' patterns: checked at load). */
static void pat_replace(const hf_pattern *p, const char *content, const char *s, size_t n,
                        hf_buf *out) {
    pat_iter it;
    size_t a, b, prev = 0, cn = strlen(content);
    it_init(&it, p, s, n);
    while (it_next(&it, &a, &b)) {
        hf_buf_add(out, s + prev, a - prev);
        hf_buf_add(out, content, cn);
        prev = b;
    }
    hf_buf_add(out, s + prev, n - prev);
    if (p->code && !it.md) out->oom = 1;
    it_done(&it);
}

/* ---- normalizers --------------------------------------------------------------------- */

enum {
    N_SEQ,
    N_BERT,
    N_PRECOMPILED,
    N_REPLACE,
    N_NFC,
    N_NFD,
    N_NFKC,
    N_NFKD,
    N_STRIP,
    N_STRIP_ACCENTS,
    N_LOWERCASE,
    N_PREPEND
};

struct hf_norm {
    hf_step s; /* content: Replace's content, Prepend's prepend */
    int clean_text, chinese, lowercase, strip_accents; /* BertNormalizer; strip: -1 null */
    int left, right;                                   /* Strip */
};

static const char *jstr(json_t *o, const char *key) {
    json_t *v = json_object_get(o, key);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

static int jbool(json_t *o, const char *key, int dflt) {
    json_t *v = json_object_get(o, key);
    if (json_is_boolean(v)) return json_is_true(v);
    if (!v || json_is_null(v)) return dflt;
    return 1; // JS truthiness of anything else present
}

static char *dup_str(const char *s) {
    size_t n = strlen(s);
    char *d = cdb_malloc(n + 1);
    if (d) memcpy(d, s, n + 1);
    return d;
}

/* A {"String"|"Regex"} pattern object; capture: the reference's invert=false form. */
static cdb_status pattern_from(json_t *cfg, int capture, hf_pattern **out) {
    json_t *po = json_object_get(cfg, "pattern");
    *out = NULL;
    if (!json_is_object(po)) return CDB_OK;
    json_t *rx = json_object_get(po, "Regex"), *st = json_object_get(po, "String");
    if (rx && !json_is_string(rx)) return cdb_seterr(CDB_CORRUPT, "pattern.Regex is not a string");
    if (!rx && st && !json_is_string(st))
        return cdb_seterr(CDB_CORRUPT, "pattern.String is not a string");
    return hf_pattern_new(rx   ? NULL
                          : st ? json_string_value(st)
                               : NULL,
                          rx ? json_string_value(rx) : NULL, capture, out);
}

static cdb_status content_from(json_t *cfg, const char *key, char **out) {
    const char *c = jstr(cfg, key);
    if (!c) c = "";
    if (strchr(c, '$'))
        return cdb_seterr(CDB_UNSUPPORTED, "a Replace content with '$' (JS replacement patterns)");
    *out = dup_str(c);
    return *out ? CDB_OK : cdb_seterr(CDB_NOMEM, "out of memory");
}

/* ---- steps (tokenizer.json's {"type": ...} objects) ------------------------------- */

cdb_status hf_step_new(const hf_kind *k, json_t *cfg, hf_step **out) {
    cdb_status rc = CDB_OK;
    *out = NULL;
    if (!cfg || json_is_null(cfg)) return CDB_OK;
    const char *type = jstr(cfg, "type");
    int t = -1;
    for (int i = 0; type && i < k->n_names; i++)
        if (!strcmp(type, k->names[i])) t = i;
    if (t < 0) return cdb_seterr(CDB_UNSUPPORTED, "%s type '%s'", k->what, type ? type : "(none)");
    hf_step *s = cdb_calloc(1, k->size);
    if (!s) return cdb_seterr(CDB_NOMEM, "out of memory");
    s->type = t;
    if (t == k->seq) {
        json_t *arr = json_object_get(cfg, k->seq_key);
        size_t n = json_is_array(arr) ? json_array_size(arr) : 0;
        s->kids = cdb_calloc(n ? n : 1, sizeof *s->kids);
        if (!s->kids) rc = cdb_seterr(CDB_NOMEM, "out of memory");
        for (size_t i = 0; !rc && i < n; i++) {
            rc = hf_step_new(k, json_array_get(arr, i), &s->kids[s->n_kids]);
            if (!rc && s->kids[s->n_kids]) s->n_kids++;
        }
    } else if (t == k->replace) {
        rc = pattern_from(cfg, 0, &s->pat);
        if (!rc) rc = content_from(cfg, "content", &s->content);
    } else if (k->fill) {
        rc = k->fill(cfg, s);
    }
    if (rc) {
        hf_step_free(k, s);
        return rc;
    }
    *out = s;
    return CDB_OK;
}

void hf_step_free(const hf_kind *k, hf_step *s) {
    if (!s) return;
    for (size_t i = 0; i < s->n_kids; i++) hf_step_free(k, s->kids[i]);
    cdb_free(s->kids);
    hf_pattern_free(s->pat);
    cdb_free(s->content);
    if (k->clear) k->clear(s);
    cdb_free(s);
}

/* ---- normalizers, read ------------------------------------------------------------ */

static cdb_status norm_fill(json_t *cfg, hf_step *s) {
    hf_norm *n = (hf_norm *)s;
    switch (s->type) {
    case N_BERT: {
        n->clean_text = jbool(cfg, "clean_text", 0);
        n->chinese = jbool(cfg, "handle_chinese_chars", 0);
        n->lowercase = jbool(cfg, "lowercase", 0);
        json_t *sa = json_object_get(cfg, "strip_accents");
        n->strip_accents = json_is_boolean(sa)       ? json_is_true(sa)
                           : sa && !json_is_null(sa) ? 1
                                                     : -1;
        return CDB_OK;
    }
    case N_STRIP:
        n->left = jbool(cfg, "strip_left", 0);
        n->right = jbool(cfg, "strip_right", 0);
        return CDB_OK;
    case N_PREPEND: {
        const char *p = jstr(cfg, "prepend");
        if (!p) return cdb_seterr(CDB_CORRUPT, "Prepend normalizer without 'prepend'");
        if (!(s->content = dup_str(p))) return cdb_seterr(CDB_NOMEM, "out of memory");
        return CDB_OK;
    }
    default: return CDB_OK;
    }
}

static const char *const k_norm_names[] = {
    "Sequence", "BertNormalizer", "Precompiled", "Replace",      "NFC",       "NFD",
    "NFKC",     "NFKD",           "Strip",       "StripAccents", "Lowercase", "Prepend"};
static const hf_kind k_norm = {"normalizer", k_norm_names,
                               (int)(sizeof k_norm_names / sizeof *k_norm_names), N_SEQ,
                               N_REPLACE, "normalizers", sizeof(hf_norm), norm_fill, NULL};

cdb_status hf_norm_new(json_t *cfg, hf_norm **out) {
    hf_step *s = NULL;
    cdb_status rc = hf_step_new(&k_norm, cfg, &s);
    *out = (hf_norm *)s;
    return rc;
}

void hf_norm_free(hf_norm *n) { hf_step_free(&k_norm, n ? &n->s : NULL); }

static void unicode_form(const char *s, size_t n, int flags, hf_buf *out) {
    utf8proc_uint8_t *r = NULL;
    utf8proc_ssize_t k = utf8proc_map((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n, &r,
                                      (utf8proc_option_t)(UTF8PROC_STABLE | flags));
    if (k < 0)
        out->oom = 1; // only UTF8PROC_ERROR_NOMEM on well-formed input
    else
        hf_buf_add(out, (const char *)r, (size_t)k);
    free(r);
}
#define F_NFC UTF8PROC_COMPOSE
#define F_NFD UTF8PROC_DECOMPOSE
#define F_NFKC (UTF8PROC_COMPOSE | UTF8PROC_COMPAT)
#define F_NFKD (UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT)

static int cat(uint32_t c) { return utf8proc_category((utf8proc_int32_t)c); }
static int is_mark(uint32_t c) {
    int k = cat(c);
    return k == UTF8PROC_CATEGORY_MN || k == UTF8PROC_CATEGORY_MC || k == UTF8PROC_CATEGORY_ME;
}

/* Appends s[0..n) without the code points drop() picks. */
static void filter_cps(const char *s, size_t n, int (*drop)(uint32_t), hf_buf *out) {
    size_t i = 0, start = 0;
    while (i < n) {
        uint32_t c;
        size_t k = hf_utf8_next(s + i, n - i, &c);
        if (drop(c)) {
            hf_buf_add(out, s + start, i - start);
            start = i + k;
        }
        i += k;
    }
    hf_buf_add(out, s + start, n - start);
}

static int is_mn(uint32_t c) { return cat(c) == UTF8PROC_CATEGORY_MN; }

/* JS's String.prototype.toLowerCase (full mappings, final sigma): Python's lower()
** of text_clean.c has the same definition. */
static void js_lower(const char *s, size_t n, hf_buf *out) {
    uint32_t *cp = cdb_malloc((n + 1) * sizeof *cp), *lo = NULL;
    size_t m = 0, nl = 0;
    if (!cp) {
        out->oom = 1;
        return;
    }
    for (size_t i = 0; i < n;) i += hf_utf8_next(s + i, n - i, &cp[m++]);
    if (cdb_tok_lower32(cp, m, &lo, &nl) != CDB_OK)
        out->oom = 1;
    else
        for (size_t i = 0; i < nl; i++) hf_buf_add_cp(out, lo[i]);
    cdb_free(cp);
    cdb_free(lo);
}

static void bert_normalize(const hf_norm *nm, const char *s, size_t n, hf_buf *out) {
    hf_buf a = {0}, b = {0};
    if (nm->clean_text) {
        for (size_t i = 0; i < n;) {
            uint32_t c;
            i += hf_utf8_next(s + i, n - i, &c);
            int k = cat(c);
            int control = c != '\t' && c != '\n' && c != '\r' &&
                          (k == UTF8PROC_CATEGORY_CC || k == UTF8PROC_CATEGORY_CF ||
                           k == UTF8PROC_CATEGORY_CO || k == UTF8PROC_CATEGORY_CS);
            if (c == 0 || c == 0xFFFD || control) continue;
            // /^\s$/ without /u: one UTF-16 unit, so astral characters are never spaces
            hf_buf_add_cp(&a, c < 0x10000 && hf_js_space(c) ? ' ' : c);
        }
    } else
        hf_buf_add(&a, s, n);
    if (nm->chinese) { // BMP ranges only: the reference tests UTF-16 units
        for (size_t i = 0; i < a.n;) {
            uint32_t c;
            size_t k = hf_utf8_next(a.p + i, a.n - i, &c);
            int cjk = (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
                      (c >= 0xF900 && c <= 0xFAFF);
            if (cjk) hf_buf_add(&b, " ", 1);
            hf_buf_add(&b, a.p + i, k);
            if (cjk) hf_buf_add(&b, " ", 1);
            i += k;
        }
        hf_buf_free(&a);
        a = b;
        memset(&b, 0, sizeof b);
    }
    int strip = nm->lowercase ? nm->strip_accents != 0 : nm->strip_accents == 1;
    if (nm->lowercase) {
        js_lower(a.p ? a.p : "", a.n, &b);
        hf_buf_free(&a);
        a = b;
        memset(&b, 0, sizeof b);
    }
    if (strip) {
        unicode_form(a.p ? a.p : "", a.n, F_NFD, &b);
        filter_cps(b.p ? b.p : "", b.n, is_mn, out);
    } else
        hf_buf_add(out, a.p ? a.p : "", a.n);
    out->oom |= a.oom | b.oom;
    hf_buf_free(&a);
    hf_buf_free(&b);
}

static int precompiled_drop(uint32_t c) {
    return (c >= 1 && c <= 8) || c == 0xB || (c >= 0xE && c <= 0x1F) || c == 0x7F || c == 0x8F ||
           c == 0x9F;
}
static int precompiled_space(uint32_t c) {
    return c == 9 || c == 0xA || c == 0xC || c == 0xD || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200F) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
           c == 0x205F || c == 0x2581 || c == 0x3000 || c == 0xFEFF || c == 0xFFFD;
}

/* The reference's Precompiled: not the charsmap but its approximation (control
** characters dropped, spaces unified, NFKC except around U+FF5E). */
static void precompiled(const char *s, size_t n, hf_buf *out) {
    hf_buf a = {0};
    for (size_t i = 0; i < n;) {
        uint32_t c;
        size_t k = hf_utf8_next(s + i, n - i, &c);
        if (precompiled_space(c))
            hf_buf_add(&a, " ", 1);
        else if (!precompiled_drop(c))
            hf_buf_add(&a, s + i, k);
        i += k;
    }
    size_t start = 0;
    for (size_t i = 0; i <= a.n; i++) { // parts between U+FF5E (EF BD 9E) are NFKC'd alone
        int sep = i + 3 <= a.n && !memcmp(a.p + i, "\xEF\xBD\x9E", 3);
        if (!sep && i < a.n) continue;
        unicode_form(a.p ? a.p + start : "", i - start, F_NFKC, out);
        if (sep) hf_buf_add(out, "\xEF\xBD\x9E", 3), i += 2;
        start = i + 1;
    }
    out->oom |= a.oom;
    hf_buf_free(&a);
}

void hf_norm_apply(const hf_norm *nm, const char *s, size_t n, hf_buf *out) {
    size_t a, b;
    switch (nm->s.type) {
    case N_SEQ: {
        hf_buf cur = {0}, nxt = {0};
        hf_buf_add(&cur, s, n);
        for (size_t i = 0; i < nm->s.n_kids; i++) {
            nxt.n = 0;
            hf_norm_apply((const hf_norm *)nm->s.kids[i], cur.p, cur.n, &nxt);
            hf_buf t = cur;
            cur = nxt;
            nxt = t;
        }
        hf_buf_add(out, cur.p, cur.n);
        out->oom |= cur.oom | nxt.oom;
        hf_buf_free(&cur);
        hf_buf_free(&nxt);
        break;
    }
    case N_BERT: bert_normalize(nm, s, n, out); break;
    case N_PRECOMPILED: precompiled(s, n, out); break;
    case N_REPLACE:
        if (nm->s.pat)
            pat_replace(nm->s.pat, nm->s.content, s, n, out);
        else
            hf_buf_add(out, s, n);
        break;
    case N_NFC: unicode_form(s, n, F_NFC, out); break;
    case N_NFD: unicode_form(s, n, F_NFD, out); break;
    case N_NFKC: unicode_form(s, n, F_NFKC, out); break;
    case N_NFKD: unicode_form(s, n, F_NFKD, out); break;
    case N_STRIP:
        hf_js_trim(s, n, nm->left, nm->right, &a, &b);
        hf_buf_add(out, s + a, b - a);
        break;
    case N_STRIP_ACCENTS: filter_cps(s, n, is_mark, out); break;
    case N_LOWERCASE: js_lower(s, n, out); break;
    case N_PREPEND:
        hf_buf_add(out, nm->s.content, strlen(nm->s.content));
        hf_buf_add(out, s, n);
        break;
    }
}

/* ---- pre-tokenizers ------------------------------------------------------------------ */

enum {
    P_SEQ,
    P_BERT,
    P_WHITESPACE,
    P_WHITESPACE_SPLIT,
    P_METASPACE,
    P_BYTELEVEL,
    P_SPLIT,
    P_PUNCT,
    P_DIGITS,
    P_REPLACE,
    P_FIXED
};

#define PUNCT "\\p{P}\\x{21}-\\x{2F}\\x{3A}-\\x{40}\\x{5B}-\\x{60}\\x{7B}-\\x{7E}"

struct hf_pretok {
    hf_step s; /* pat: the regex or literal this step matches; content: Replace's */
    char *rep; /* Metaspace: replacement, str_rep */
    char *str_rep;
    int prepend; /* Metaspace: 0 never, 1 always, 2 first */
    int invert, removed, prefix_space, use_regex, length;
};

static cdb_status builtin(const char *pcre, hf_pattern **out) {
    cdb_status rc = CDB_OK;
    hf_pattern *p = cdb_calloc(1, sizeof *p);
    if (!p) return cdb_seterr(CDB_NOMEM, "out of memory");
    p->code = re_compile(pcre, &rc, pcre);
    if (rc) {
        cdb_free(p);
        return rc;
    }
    *out = p;
    return CDB_OK;
}

static cdb_status pretok_fill(json_t *cfg, hf_step *s) {
    hf_pretok *p = (hf_pretok *)s;
    cdb_status rc = CDB_OK;
    switch (s->type) {
    case P_BERT: rc = builtin("[^" JS_SPACES PUNCT "]+|[" PUNCT "]", &s->pat); break;
    case P_WHITESPACE: rc = builtin("[A-Za-z0-9_]+|[^A-Za-z0-9_" JS_SPACES "]+", &s->pat); break;
    case P_WHITESPACE_SPLIT: rc = builtin("[^" JS_SPACES "]+", &s->pat); break;
    case P_PUNCT: rc = builtin("[^" PUNCT "]+|[" PUNCT "]+", &s->pat); break;
    case P_DIGITS:
        rc = builtin(jbool(cfg, "individual_digits", 0) ? "[^0-9]+|[0-9]" : "[^0-9]+|[0-9]+",
                     &s->pat);
        break;
    case P_BYTELEVEL:
        p->prefix_space = jbool(cfg, "add_prefix_space", 0);
        p->use_regex = jbool(cfg, "use_regex", 1);
        rc = builtin("'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" JS_SPACES
                     "\\p{L}\\p{N}]+|[" JS_SPACES "]+(?![^" JS_SPACES "])|[" JS_SPACES "]+",
                     &s->pat);
        break;
    case P_METASPACE: {
        const char *r = jstr(cfg, "replacement"), *sr = jstr(cfg, "str_rep");
        const char *ps = jstr(cfg, "prepend_scheme");
        if (!r) r = "\xE2\x96\x81";
        if (!sr || !*sr) sr = r;
        p->prepend = !ps || !strcmp(ps, "always") ? 1 : !strcmp(ps, "first") ? 2 : 0;
        p->rep = dup_str(r);
        p->str_rep = dup_str(sr);
        if (!p->rep || !p->str_rep) rc = cdb_seterr(CDB_NOMEM, "out of memory");
        break;
    }
    case P_SPLIT: {
        const char *beh = jstr(cfg, "behavior");
        p->invert = jbool(cfg, "invert", 1);
        p->removed = beh && !strcasecmp(beh, "removed");
        rc = pattern_from(cfg, !p->invert, &s->pat);
        break;
    }
    case P_FIXED: {
        json_t *l = json_object_get(cfg, "length");
        p->length = json_is_integer(l) ? (int)json_integer_value(l) : 0;
        if (p->length <= 0)
            rc = cdb_seterr(CDB_UNSUPPORTED, "FixedLength without a positive length");
        break;
    }
    default: break;
    }
    return rc;
}

static void pretok_clear(hf_step *s) {
    hf_pretok *p = (hf_pretok *)s;
    cdb_free(p->rep);
    cdb_free(p->str_rep);
}

static const char *const k_pretok_names[] = {
    "Sequence",  "BertPreTokenizer", "Whitespace", "WhitespaceSplit",
    "Metaspace", "ByteLevel",        "Split",      "Punctuation",
    "Digits",    "Replace",          "FixedLength"};
static const hf_kind k_pretok = {"pre-tokenizer", k_pretok_names,
                                 (int)(sizeof k_pretok_names / sizeof *k_pretok_names), P_SEQ,
                                 P_REPLACE, "pretokenizers", sizeof(hf_pretok), pretok_fill,
                                 pretok_clear};

cdb_status hf_pretok_new(json_t *cfg, hf_pretok **out) {
    hf_step *s = NULL;
    cdb_status rc = hf_step_new(&k_pretok, cfg, &s);
    *out = (hf_pretok *)s;
    return rc;
}

void hf_pretok_free(hf_pretok *p) { hf_step_free(&k_pretok, p ? &p->s : NULL); }

/* JS's text.match(/g): every match, in order (empty ones too; callers filter). */
static void match_all(const hf_pattern *pat, const char *s, size_t n, int keep_empty,
                      hf_list *out) {
    pat_iter it;
    size_t a, b;
    it_init(&it, pat, s, n);
    while (it_next(&it, &a, &b))
        if (b > a || keep_empty) hf_list_add(out, s + a, b - a);
    if (pat->code && !it.md) out->oom = 1;
    it_done(&it);
}

/* The reference's regex_split: the text between matches and the non-empty matches. */
static void isolated_split(const hf_pattern *pat, const char *s, size_t n, hf_list *out) {
    pat_iter it;
    size_t a, b, prev = 0;
    it_init(&it, pat, s, n);
    while (it_next(&it, &a, &b)) {
        if (prev < a) hf_list_add(out, s + prev, a - prev);
        if (b > a) hf_list_add(out, s + a, b - a);
        prev = b;
    }
    if (prev < n) hf_list_add(out, s + prev, n - prev);
    if (pat->code && !it.md) out->oom = 1;
    it_done(&it);
}

/* JS's text.split(regex).filter(x => x): pieces between matches plus each match's
** capture groups (a String pattern with invert=false is one group: the match). */
static void js_split(const hf_pattern *pat, const char *s, size_t n, hf_list *out) {
    pcre2_match_data *md = pat->code ? pcre2_match_data_create_from_pattern(pat->code, NULL) : NULL;
    size_t p = 0, q = 0, a, b;
    if (pat->code && !md) {
        out->oom = 1;
        return;
    }
    while (q < n && pat_find(pat, md, s, n, q, &a, &b)) {
        if (b == p) { // an empty match where the last piece ended: move on
            q = step_cp(s, n, a);
            continue;
        }
        if (a > p) hf_list_add(out, s + p, a - p);
        if (pat->lit && pat->lit_capture && b > a) hf_list_add(out, s + a, b - a);
        if (md) {
            uint32_t ng = pcre2_get_ovector_count(md);
            PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
            for (uint32_t g = 1; g < ng; g++)
                if (ov[2 * g] != PCRE2_UNSET && ov[2 * g + 1] > ov[2 * g])
                    hf_list_add(out, s + ov[2 * g], ov[2 * g + 1] - ov[2 * g]);
        }
        p = q = b;
    }
    if (p < n) hf_list_add(out, s + p, n - p);
    pcre2_match_data_free(md);
}

/* GPT-2's bytes_to_unicode: printable Latin-1 bytes map to themselves, the other 68
** (0x00-0x20, 0x7F-0xA0, 0xAD) to U+0100.. in byte order. */
static uint32_t byte_char(uint8_t b) {
    if (b <= 0x20) return 0x100 + b;
    if (b >= 0x7F && b <= 0xA0) return 0x100 + 33 + (uint32_t)(b - 0x7F);
    if (b == 0xAD) return 0x143;
    return b;
}

static void bytelevel_piece(const char *s, size_t n, hf_list *out) {
    hf_buf b = {0};
    for (size_t i = 0; i < n; i++) hf_buf_add_cp(&b, byte_char((uint8_t)s[i]));
    hf_list_add(out, b.p ? b.p : "", b.n);
    out->oom |= b.oom;
    hf_buf_free(&b);
}

/* The reference's FixedLength: slices of `len` UTF-16 units. A slice that cuts a surrogate
** pair ends with the high half and the next starts with the low one; each lone half is
** written as U+FFFD, the character (and the bytes, EF BF BD) JS's TextEncoder gives it. */
static void fixed_length(int len, const char *s, size_t n, hf_list *out) {
    hf_buf cur = {0};
    int units = 0;
    for (size_t i = 0; i < n;) {
        uint32_t c;
        size_t k = hf_utf8_next(s + i, n - i, &c);
        int halves = c >= 0x10000 && units + 2 > len;
        if (halves)
            hf_buf_add_cp(&cur, 0xFFFD);
        else
            hf_buf_add(&cur, s + i, k);
        units += c >= 0x10000 && !halves ? 2 : 1;
        i += k;
        if (units >= len) {
            hf_list_add(out, cur.p, cur.n);
            cur.n = 0;
            units = 0;
        }
        if (halves) { // the low half opens the next slice
            hf_buf_add_cp(&cur, 0xFFFD);
            if (++units >= len) {
                hf_list_add(out, cur.p, cur.n);
                cur.n = 0;
                units = 0;
            }
        }
    }
    if (cur.n) hf_list_add(out, cur.p, cur.n);
    out->oom |= cur.oom;
    hf_buf_free(&cur);
}

void hf_pretok_apply(const hf_pretok *pt, const char *s, size_t n, int section, hf_list *out) {
    size_t a, b;
    switch (pt->s.type) {
    case P_SEQ: {
        hf_list cur = {0}, nxt = {0};
        hf_list_add(&cur, s, n);
        for (size_t k = 0; k < pt->s.n_kids; k++) {
            hf_list_free(&nxt);
            const hf_pretok *kid = (const hf_pretok *)pt->s.kids[k];
            for (size_t i = 0; i < cur.n; i++)
                hf_pretok_apply(kid, HF_PIECE(&cur, i), HF_PLEN(&cur, i), section, &nxt);
            hf_list t = cur;
            cur = nxt;
            nxt = t;
            if (cur.oom) break;
        }
        for (size_t i = 0; i < cur.n; i++) hf_list_add(out, HF_PIECE(&cur, i), HF_PLEN(&cur, i));
        out->oom |= cur.oom | nxt.oom;
        hf_list_free(&cur);
        hf_list_free(&nxt);
        break;
    }
    case P_BERT:
        hf_js_trim(s, n, 1, 1, &a, &b);
        match_all(pt->s.pat, s + a, b - a, 0, out);
        break;
    case P_WHITESPACE:
    case P_WHITESPACE_SPLIT:
    case P_PUNCT:
    case P_DIGITS: match_all(pt->s.pat, s, n, 0, out); break;
    case P_BYTELEVEL: {
        hf_buf t = {0};
        if (pt->prefix_space && (n == 0 || s[0] != ' ')) hf_buf_add(&t, " ", 1);
        hf_buf_add(&t, s, n);
        if (pt->use_regex) {
            hf_list m = {0};
            match_all(pt->s.pat, t.p, t.n, 0, &m);
            for (size_t i = 0; i < m.n; i++) bytelevel_piece(HF_PIECE(&m, i), HF_PLEN(&m, i), out);
            out->oom |= m.oom;
            hf_list_free(&m);
        } else
            bytelevel_piece(t.p, t.n, out);
        out->oom |= t.oom;
        hf_buf_free(&t);
        break;
    }
    case P_METASPACE: {
        hf_buf t = {0};
        hf_pattern sp = {.lit = " ", .lit_n = 1};
        pat_replace(&sp, pt->str_rep, s, n, &t);
        size_t rn = strlen(pt->rep);
        int starts = t.n >= rn && !memcmp(t.p, pt->rep, rn);
        if (!starts && (pt->prepend == 1 || (pt->prepend == 2 && section == 0))) {
            hf_buf u = {0};
            hf_buf_add(&u, pt->str_rep, strlen(pt->str_rep));
            hf_buf_add(&u, t.p, t.n);
            hf_list_add(out, u.p, u.n);
            out->oom |= u.oom;
            hf_buf_free(&u);
        } else
            hf_list_add(out, t.p ? t.p : "", t.n);
        out->oom |= t.oom;
        hf_buf_free(&t);
        break;
    }
    case P_SPLIT:
        if (!pt->s.pat) break; // the reference returns no piece at all
        if (pt->invert)
            match_all(pt->s.pat, s, n, 0, out);
        else if (pt->removed)
            js_split(pt->s.pat, s, n, out);
        else
            isolated_split(pt->s.pat, s, n, out);
        break;
    case P_REPLACE:
        if (!pt->s.pat) {
            hf_list_add(out, s, n);
        } else {
            hf_buf t = {0};
            pat_replace(pt->s.pat, pt->s.content, s, n, &t);
            hf_list_add(out, t.p ? t.p : "", t.n);
            out->oom |= t.oom;
            hf_buf_free(&t);
        }
        break;
    case P_FIXED: fixed_length(pt->length, s, n, out); break;
    }
}

