/*
** output.h: how clipdb writes text for machines and people, once for every front end
** (the CLI's --json and summaries, the server's answers; the engine's messages may use
** the count format too, which is why this module sits just above core/).
**
** - cdb_buf: a growable byte buffer.
** - JSON: a streaming writer (automatic commas, optional two-space indentation) into a
**   cdb_buf, optionally drained into a FILE after every call. Strings are escaped per
**   RFC 8259: `"` and `\`, \n \r \t \b \f by name, the other C0 controls and DEL as
**   \u00xx (lowercase hex); "/" is not escaped. Bytes that are not valid UTF-8 become
**   U+FFFD, one per byte (cdb_utf8_seq_len's reading), so the output is always UTF-8.
**   Floats print with %.9g (the shortest text that reads back as the same fp32 value)
**   and always as a JSON real ("1.0", never "1").
** - The path rule: a path is written as "<key>": its text (U+FFFD for bad bytes), and,
**   only when the path is not valid UTF-8, "<key>_b64": its exact bytes in base64
**   (RFC 4648, padded), as ripgrep's JSON does, so no path is lost. A consumer that
**   needs exact bytes uses <key>_b64 when present, else <key>.
** - base64 (standard alphabet, padded) and its decoder (also URL-safe, padding optional).
** - Counts with thousands separators: "1,234,567".
**
** Memory: cdb_buf and the writer use malloc/realloc; out of memory is sticky (`oom`)
** and later appends are dropped, so callers check once at the end.
** Thread-safety: no global state; one writer or buffer per thread.
*/
#ifndef CDB_OUTPUT_H
#define CDB_OUTPUT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- growable buffer ---------------------------------------------------------- */

/* Zero-initialize ({0}) to start empty. data is NUL-terminated whenever len > 0. */
typedef struct cdb_buf {
    char *data;
    size_t len, cap;
    int oom; /* an append failed for memory: what followed it was dropped */
} cdb_buf;

/* Append n bytes / a C string / a formatted string. 0, or -1 when out of memory. */
int cdb_buf_put(cdb_buf *b, const void *p, size_t n);
int cdb_buf_puts(cdb_buf *b, const char *s);
int cdb_buf_printf(cdb_buf *b, const char *fmt, ...) CDB_PRINTF(2, 3);
/* Forgets the contents, keeps the memory. */
void cdb_buf_reset(cdb_buf *b);
/* Frees the memory; b is empty afterwards (NULL is fine). */
void cdb_buf_free(cdb_buf *b);

/* ---- text encodings ------------------------------------------------------------ */

/* "1,234,567" (and "-1,234") into buf (size bytes; 27 always suffice); returns buf. */
const char *cdb_out_fmt_count(int64_t n, char *buf, size_t size);

/* Appends the n bytes at s with each byte that does not start a valid UTF-8 sequence
** replaced by U+FFFD (EF BF BD). 0, or -1 when out of memory. */
int cdb_out_utf8_repair(cdb_buf *b, const char *s, size_t n);

/* Length of the base64 text of n bytes, without the NUL: (n + 2) / 3 * 4. */
size_t cdb_out_base64_len(size_t n);
/* Writes the base64 text (standard alphabet, "=" padding) of the n bytes at src to
** dst, which holds cdb_out_base64_len(n) + 1 bytes; NUL-terminated. Returns dst. */
char *cdb_out_base64(const void *src, size_t n, char *dst);
/* Decodes standard or URL-safe base64 of len chars (padding optional, blanks skipped;
** the text ends at its padding: what follows is ignored). Returns malloc'd bytes
** (free()) and their count in *n, or NULL for text that is not base64 (a foreign
** character before the padding, more than two "=", a lone 6-bit tail) or no memory. */
unsigned char *cdb_out_base64_decode(const char *s, size_t len, size_t *n /* OUT */);

/* The path rule: 1 when path is not NULL and not valid UTF-8, so its exact bytes go
** out beside its text under cdb_out_path_b64_key(key); else 0. */
int cdb_out_path_needs_b64(const char *path);
/* "<key>_b64" into buf (size bytes, truncated to fit); returns buf. */
const char *cdb_out_path_b64_key(const char *key, char *buf, size_t size);

/* ---- JSON writer ---------------------------------------------------------------- */

/* Nesting deeper than this is written, but the commas of the levels past it are
** tracked as one level (clipdb writes at most 6). */
#define CDB_JSON_MAX_DEPTH 63

typedef struct cdb_json {
    cdb_buf out;    /* the text written (and not yet drained into sink) */
    FILE *sink;     /* NULL: the text stays in out */
    int pretty;     /* newline + two spaces per level; ": " after keys */
    int depth;
    int after_key;  /* the next value follows a key: no comma, no newline */
    unsigned char need_comma[CDB_JSON_MAX_DEPTH + 1];
    int sink_errno; /* the first failed write into sink (0: none) */
} cdb_json;

/* Starts a document. With a sink, each call below appends to out, writes it into sink
** and frees it (so the text reaches the FILE in the order of the calls, between
** whatever else the caller writes to it, and the writer holds no memory between
** calls: nothing to free); without one, the text accumulates in j->out. */
void cdb_json_init(cdb_json *j, FILE *sink, int pretty);
/* Frees j->out (the writer holds nothing else; not needed with a sink). */
void cdb_json_free(cdb_json *j);

void cdb_json_begin_object(cdb_json *j);
void cdb_json_end_object(cdb_json *j);
void cdb_json_begin_array(cdb_json *j);
void cdb_json_end_array(cdb_json *j);
void cdb_json_key(cdb_json *j, const char *key);
void cdb_json_str(cdb_json *j, const char *s); /* NULL writes null */
void cdb_json_strn(cdb_json *j, const char *s, size_t n);
void cdb_json_int(cdb_json *j, int64_t v);
void cdb_json_num(cdb_json *j, double v, int decimals); /* "%.*f"; NaN/Inf write null */
void cdb_json_float(cdb_json *j, float v);              /* %.9g, always a real; NaN: null */
void cdb_json_bool(cdb_json *j, int v);
void cdb_json_null(cdb_json *j);
/* The path rule: key and the text of path (null for NULL), then key_b64 and the
** exact bytes when cdb_out_path_needs_b64(path). key is at most 120 bytes. */
void cdb_json_path(cdb_json *j, const char *key, const char *path);
/* Ends the document with a newline. */
void cdb_json_done(cdb_json *j);

/* Appends the n bytes at s as one JSON string literal, quotes included, escaped as
** the writer escapes (the writer's own string routine). 0, or -1 out of memory. */
int cdb_json_quote(cdb_buf *b, const char *s, size_t n);

#ifdef __cplusplus
}
#endif
#endif /* CDB_OUTPUT_H */
