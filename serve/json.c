/*
** json.c: how the server answers. Documents are built with jansson and written
** compact, UTF-8; scores as `clipdb search --json` prints them (the shortest form
** with 9 significant digits, so the same fp32 value reads back); paths that are not
** UTF-8 carry U+FFFD in "path" and the exact bytes in "path_b64": the CLI's rule, from
** output/output.h, as are the U+FFFD repair and base64.
** Errors are {"error": {"code": "...", "message": "..."}} with their HTTP status;
** an engine failure maps its detail code to the status (404 unknown id, 400 bad
** query, 503 busy, 500 the rest).
*/
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/serve_int.h"

void cdb_srv_resp_init(srv_resp *o) {
    memset(o, 0, sizeof *o);
    o->fd = -1;
    o->status = 200;
}

void cdb_srv_resp_clear(srv_resp *o) {
    free(o->body);
    o->body = NULL;
}

void cdb_srv_json(srv_resp *o, int status, json_t *j) {
    free(o->body);
    o->body = j ? json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(9)) : NULL;
    json_decref(j);
    if (!o->body) { /* out of memory while writing: still a well-formed answer */
        static const char oom[] =
            "{\"error\":{\"code\":\"internal\",\"message\":\"out of memory\"}}";
        o->static_body = (const unsigned char *)oom;
        o->len = sizeof oom - 1;
        o->status = 500;
    } else {
        o->len = strlen(o->body);
        o->status = status;
    }
    o->content_type = "application/json; charset=utf-8";
}

void cdb_srv_json_fresh(srv_resp *o, json_t *j) {
    cdb_srv_json(o, 200, j);
    o->cache = "no-store";
}

json_t *cdb_srv_json_bytes(const char *s) {
    cdb_buf fixed = {0};
    json_t *j;
    if (!s) return json_null();
    if (cdb_out_utf8_repair(&fixed, s, strlen(s))) return NULL;
    j = json_stringn(fixed.data ? fixed.data : "", fixed.len);
    cdb_buf_free(&fixed);
    return j;
}

void cdb_srv_json_path(json_t *obj, const char *key, const char *s) {
    json_object_set_new(obj, key, cdb_srv_json_bytes(s));
    if (cdb_out_path_needs_b64(s)) {
        size_t n = strlen(s);
        char k[128], *b = malloc(cdb_out_base64_len(n) + 1);
        cdb_out_path_b64_key(key, k, sizeof k);
        if (b) json_object_set_new(obj, k, json_string(cdb_out_base64(s, n, b)));
        free(b);
    }
}

json_t *cdb_srv_json_float(float v) {
    if (!isfinite(v)) return json_null();
    return json_real((double)v); /* written with %.9g: see cdb_srv_json */
}

int cdb_srv_parse_int(const char *s, long lo, long hi, long *out) {
    char *end;
    long v;
    if (!s || !*s) return -1;
    errno = 0;
    v = strtol(s, &end, 10);
    if (errno || *end || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

int cdb_srv_parse_float(const char *s, double lo, double hi, double *out) {
    char *end;
    double v;
    if (!s || !*s) return -1;
    errno = 0;
    v = strtod(s, &end);
    if (errno || *end || !(v >= lo && v <= hi)) return -1;
    *out = v;
    return 0;
}

void cdb_srv_error(srv_resp *o, int status, const char *code, const char *fmt, ...) {
    char msg[1200];
    va_list ap;
    json_t *err = json_object(), *doc = json_object();
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    json_object_set_new(err, "code", json_string(code));
    json_object_set_new(err, "message", cdb_srv_json_bytes(msg));
    json_object_set_new(doc, "error", err);
    cdb_srv_json(o, status, doc);
}

void cdb_srv_engine_error(srv_resp *o) {
    const char *m = cdb_errmsg();
    switch (cdb_engine_errcode()) {
    case CDB_ENGINE_E_UNKNOWN_ID: cdb_srv_error(o, 404, "not_found", "%s", m); break;
    case CDB_ENGINE_E_NO_THUMB: cdb_srv_error(o, 404, "no_thumbnail", "%s", m); break;
    case CDB_ENGINE_E_NO_PREVIEW: cdb_srv_error(o, 404, "no_preview", "%s", m); break;
    case CDB_ENGINE_E_FILE_GONE: cdb_srv_error(o, 404, "gone", "%s", m); break;
    case CDB_ENGINE_E_FILE_CHANGED: cdb_srv_error(o, 409, "changed", "%s", m); break;
    case CDB_ENGINE_E_QUERY:
    case CDB_ENGINE_E_QUERY_ZERO: cdb_srv_error(o, 400, "bad_query", "%s", m); break;
    case CDB_ENGINE_E_QUERY_IMAGE: cdb_srv_error(o, 400, "bad_image", "%s", m); break;
    case CDB_ENGINE_E_NO_TEXT: cdb_srv_error(o, 400, "no_text_model", "%s", m); break;
    case CDB_ENGINE_E_BUSY: cdb_srv_error(o, 503, "busy", "%s", m); break;
    default: /* the client gets it, and so does the log: nothing the client did */
        CDB_LOG_WARN("serve: internal error: %s", m && *m ? m : "(no message)");
        cdb_srv_error(o, 500, "internal", "%s", m && *m ? m : "internal error");
        break;
    }
}

/* jansson's error, in words of our own (its wording is not an API). */
static const char *json_problem(const json_error_t *err) {
    switch (json_error_code(err)) {
    case json_error_invalid_utf8: return "text that is not UTF-8";
    case json_error_null_character:
    case json_error_null_byte_in_key: return "a NUL character in a string";
    case json_error_stack_overflow: return "nested too deeply";
    case json_error_premature_end_of_input: return "it ends too early";
    case json_error_end_of_input_expected: return "more after the end of the document";
    case json_error_duplicate_key: return "a key given twice";
    case json_error_numeric_overflow: return "a number too large";
    case json_error_out_of_memory: return "out of memory";
    default: return "invalid JSON";
    }
}

json_t *cdb_srv_body_object(const srv_req *r, size_t flags, srv_resp *o) {
    json_error_t err;
    json_t *doc = json_loadb(r->body ? r->body : "", r->body_len, flags, &err);
    if (!doc) {
        cdb_srv_error(o, 400, "bad_json", "the body is not valid JSON (%s, at line %d column %d)",
                      json_problem(&err), err.line, err.column);
        return NULL;
    }
    if (!json_is_object(doc)) {
        cdb_srv_error(o, 400, "bad_json", "the body must be a JSON object");
        json_decref(doc);
        return NULL;
    }
    return doc;
}

int cdb_srv_buf_append(char **b, size_t *len, size_t *cap, const void *data, size_t n) {
    if (*len + n + 1 > *cap) {
        size_t nc = *cap ? *cap : 4096;
        char *nb;
        while (nc < *len + n + 1) nc *= 2;
        if (!(nb = realloc(*b, nc))) return -1;
        *b = nb;
        *cap = nc;
    }
    memcpy(*b + *len, data, n);
    *len += n;
    (*b)[*len] = '\0';
    return 0;
}
