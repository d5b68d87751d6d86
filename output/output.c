/*
** output.c: the growable buffer, the text encodings (counts, UTF-8 repair, base64) and
** the streaming JSON writer of output.h. The writer's bytes are the ones `clipdb
** --json` has always printed (tests/cli/golden holds them); tests/output checks the
** escaping, base64 and the path rule against Python's json and base64 modules.
*/
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "output/output.h"

/* ---- growable buffer ---------------------------------------------------------- */

/* Room for n more bytes and a NUL. */
static int reserve(cdb_buf *b, size_t n) {
    size_t need, cap;
    char *p;
    if (b->oom) return -1;
    if (n > SIZE_MAX - b->len - 1) return b->oom = 1, -1;
    need = b->len + n + 1;
    if (need <= b->cap) return 0;
    cap = b->cap ? b->cap : 256;
    while (cap < need) cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    if (!(p = realloc(b->data, cap))) return b->oom = 1, -1;
    b->data = p;
    b->cap = cap;
    return 0;
}

int cdb_buf_put(cdb_buf *b, const void *p, size_t n) {
    if (reserve(b, n)) return -1;
    if (n) memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

int cdb_buf_puts(cdb_buf *b, const char *s) { return cdb_buf_put(b, s, strlen(s)); }

int cdb_buf_printf(cdb_buf *b, const char *fmt, ...) {
    va_list ap;
    int n;
    char small[64];
    va_start(ap, fmt);
    n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) return -1;
    if ((size_t)n < sizeof small) return cdb_buf_put(b, small, (size_t)n);
    if (reserve(b, (size_t)n)) return -1;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return 0;
}

void cdb_buf_reset(cdb_buf *b) {
    b->len = 0;
    if (b->data) b->data[0] = '\0';
}

void cdb_buf_free(cdb_buf *b) {
    if (!b) return;
    free(b->data);
    memset(b, 0, sizeof *b);
}

/* ---- text encodings ------------------------------------------------------------ */

const char *cdb_out_fmt_count(int64_t n, char *buf, size_t size) {
    char digits[24], out[32];
    int len, neg = n < 0, o = 0;
    uint64_t u = neg ? (uint64_t)(-(n + 1)) + 1 : (uint64_t)n; /* INT64_MIN too */
    len = snprintf(digits, sizeof digits, "%llu", (unsigned long long)u);
    if (neg) out[o++] = '-';
    for (int i = 0; i < len; i++) {
        if (i && (len - i) % 3 == 0) out[o++] = ',';
        out[o++] = digits[i];
    }
    out[o] = '\0';
    snprintf(buf, size, "%s", out);
    return buf;
}

static const char k_fffd[] = "\xEF\xBF\xBD"; /* U+FFFD, for one byte that is not UTF-8 */

int cdb_out_utf8_repair(cdb_buf *b, const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, run = 0; /* u[run, i) is valid text not yet appended */
    while (i < n) {
        size_t k = u[i] < 0x80 ? 1 : cdb_utf8_seq_len(u + i, n - i);
        if (k) {
            i += k;
            continue;
        }
        if (cdb_buf_put(b, u + run, i - run) || cdb_buf_put(b, k_fffd, 3)) return -1;
        run = ++i;
    }
    return cdb_buf_put(b, u + run, n - run);
}

static const char k_b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t cdb_out_base64_len(size_t n) { return (n + 2) / 3 * 4; }

char *cdb_out_base64(const void *src, size_t n, char *dst) {
    const unsigned char *b = src;
    char *o = dst;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)b[i] << 16 | (i + 1 < n ? (unsigned)b[i + 1] << 8 : 0) |
                     (i + 2 < n ? b[i + 2] : 0);
        *o++ = k_b64[v >> 18 & 63];
        *o++ = k_b64[v >> 12 & 63];
        *o++ = i + 1 < n ? k_b64[v >> 6 & 63] : '=';
        *o++ = i + 2 < n ? k_b64[v & 63] : '=';
    }
    *o = '\0';
    return dst;
}

/* The 6-bit value of base64 character c (both alphabets), or -1. */
static int b64_value(unsigned char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+' || c == '-') return 62;
    if (c == '/' || c == '_') return 63;
    return -1;
}

unsigned char *cdb_out_base64_decode(const char *s, size_t len, size_t *n) {
    unsigned char *out = malloc(len / 4 * 3 + 3), *o = out;
    unsigned acc = 0;
    int bits = 0, pad = 0;
    if (!out) return NULL;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        int v;
        if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
        if (c == '=') {
            pad++;
            continue;
        }
        if (pad) break; /* data after padding: the text ends at the padding */
        if ((v = b64_value(c)) < 0) {
            free(out);
            return NULL;
        }
        acc = acc << 6 | (unsigned)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            *o++ = (unsigned char)(acc >> bits);
            acc &= (1u << bits) - 1;
        }
    }
    if (pad > 2 || bits >= 6) { /* a lone 6-bit tail cannot come from whole bytes */
        free(out);
        return NULL;
    }
    *n = (size_t)(o - out);
    return out;
}

int cdb_out_path_needs_b64(const char *path) {
    return path && !cdb_utf8_valid(path, strlen(path));
}

const char *cdb_out_path_b64_key(const char *key, char *buf, size_t size) {
    snprintf(buf, size, "%s_b64", key);
    return buf;
}

/* ---- JSON writer ---------------------------------------------------------------- */

int cdb_json_quote(cdb_buf *b, const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, run = 0; /* u[run, i) goes out as it is */
    if (cdb_buf_put(b, "\"", 1)) return -1;
    while (i < n) {
        unsigned c = u[i];
        const char *esc;
        char hex[8];
        if (c >= 0x20 && c < 0x7F && c != '"' && c != '\\') {
            i++;
            continue;
        }
        if (c >= 0x80) {
            size_t k = cdb_utf8_seq_len(u + i, n - i);
            if (k) {
                i += k;
                continue;
            }
            esc = k_fffd;
        } else {
            switch (c) {
            case '"': esc = "\\\""; break;
            case '\\': esc = "\\\\"; break;
            case '\n': esc = "\\n"; break;
            case '\r': esc = "\\r"; break;
            case '\t': esc = "\\t"; break;
            case '\b': esc = "\\b"; break;
            case '\f': esc = "\\f"; break;
            default: snprintf(hex, sizeof hex, "\\u%04x", c); esc = hex; break;
            }
        }
        if (cdb_buf_put(b, u + run, i - run) || cdb_buf_puts(b, esc)) return -1;
        run = ++i;
    }
    if (cdb_buf_put(b, u + run, n - run)) return -1;
    return cdb_buf_put(b, "\"", 1);
}

/* After each call: the text so far into the sink, when there is one. */
static void drain(cdb_json *j) {
    int oom = j->out.oom;
    if (!j->sink) return;
    if (j->out.len && fwrite(j->out.data, 1, j->out.len, j->sink) != j->out.len &&
        !j->sink_errno)
        j->sink_errno = errno ? errno : EIO;
    cdb_buf_free(&j->out); /* a writer with a sink holds no memory between calls */
    j->out.oom = oom;
}

void cdb_json_init(cdb_json *j, FILE *sink, int pretty) {
    memset(j, 0, sizeof *j);
    j->sink = sink;
    j->pretty = pretty;
}

void cdb_json_free(cdb_json *j) { cdb_buf_free(&j->out); }

static void indent(cdb_json *j) {
    if (!j->pretty) return;
    cdb_buf_put(&j->out, "\n", 1);
    for (int i = 0; i < j->depth; i++) cdb_buf_put(&j->out, "  ", 2);
}

/* Before any value: a comma if needed, then a newline+indent (not after a key). */
static void pre_value(cdb_json *j) {
    if (j->after_key) {
        j->after_key = 0;
        return;
    }
    if (j->depth > 0) {
        if (j->need_comma[j->depth]) cdb_buf_put(&j->out, ",", 1);
        j->need_comma[j->depth] = 1;
        indent(j);
    }
}

static void open_(cdb_json *j, char ch) {
    pre_value(j);
    cdb_buf_put(&j->out, &ch, 1);
    if (j->depth < CDB_JSON_MAX_DEPTH) j->depth++;
    j->need_comma[j->depth] = 0;
    drain(j);
}

static void close_(cdb_json *j, char ch) {
    int had = j->need_comma[j->depth];
    if (j->depth > 0) j->depth--;
    if (had) indent(j);
    cdb_buf_put(&j->out, &ch, 1);
    drain(j);
}

void cdb_json_begin_object(cdb_json *j) { open_(j, '{'); }
void cdb_json_end_object(cdb_json *j) { close_(j, '}'); }
void cdb_json_begin_array(cdb_json *j) { open_(j, '['); }
void cdb_json_end_array(cdb_json *j) { close_(j, ']'); }

void cdb_json_key(cdb_json *j, const char *key) {
    pre_value(j);
    cdb_json_quote(&j->out, key, strlen(key));
    cdb_buf_puts(&j->out, j->pretty ? ": " : ":");
    j->after_key = 1;
    drain(j);
}

void cdb_json_strn(cdb_json *j, const char *s, size_t n) {
    pre_value(j);
    cdb_json_quote(&j->out, s, n);
    drain(j);
}

void cdb_json_str(cdb_json *j, const char *s) {
    if (!s) cdb_json_null(j);
    else cdb_json_strn(j, s, strlen(s));
}

void cdb_json_int(cdb_json *j, int64_t v) {
    pre_value(j);
    cdb_buf_printf(&j->out, "%lld", (long long)v);
    drain(j);
}

void cdb_json_num(cdb_json *j, double v, int decimals) {
    pre_value(j);
    if (!isfinite(v)) cdb_buf_puts(&j->out, "null");
    else cdb_buf_printf(&j->out, "%.*f", decimals, v);
    drain(j);
}

/* Always a JSON real ("1.0", never "1"), so a score of exactly 1 still reads back as a
** floating-point number in typed parsers. */
void cdb_json_float(cdb_json *j, float v) {
    char buf[64];
    pre_value(j);
    if (!isfinite(v)) {
        cdb_buf_puts(&j->out, "null");
    } else {
        snprintf(buf, sizeof buf, "%.9g", (double)v);
        cdb_buf_puts(&j->out, buf);
        if (!strpbrk(buf, ".eE")) cdb_buf_puts(&j->out, ".0");
    }
    drain(j);
}

void cdb_json_bool(cdb_json *j, int v) {
    pre_value(j);
    cdb_buf_puts(&j->out, v ? "true" : "false");
    drain(j);
}

void cdb_json_null(cdb_json *j) {
    pre_value(j);
    cdb_buf_puts(&j->out, "null");
    drain(j);
}

void cdb_json_path(cdb_json *j, const char *key, const char *path) {
    char k2[128], small[256], *b64;
    size_t n;
    cdb_json_key(j, key);
    cdb_json_str(j, path);
    if (!cdb_out_path_needs_b64(path)) return;
    n = strlen(path);
    cdb_json_key(j, cdb_out_path_b64_key(key, k2, sizeof k2));
    pre_value(j);
    b64 = cdb_out_base64_len(n) < sizeof small ? small : malloc(cdb_out_base64_len(n) + 1);
    if (!b64) {
        j->out.oom = 1;
        return;
    }
    cdb_buf_put(&j->out, "\"", 1);
    cdb_buf_puts(&j->out, cdb_out_base64(path, n, b64));
    cdb_buf_put(&j->out, "\"", 1);
    if (b64 != small) free(b64);
    drain(j);
}

void cdb_json_done(cdb_json *j) {
    cdb_buf_put(&j->out, "\n", 1);
    drain(j);
}
