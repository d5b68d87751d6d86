/*
** clip_retrieval.c: clip-retrieval's back end API (clip_back), so that clip-front and
** ClipClient work against clipdb unchanged:
**
**   GET  /indices-list  -> ["<model name>"]: one index, the database's default vector set
**   POST /knn-service   {"text" | "image" (base64) | "image_url" | "embedding_input",
**                        "num_images", "num_result_ids", "indice_name", "modality", ...}
**        -> [{"id", "similarity", ["probability",] "url", "caption", "path", "thumb"}, ...]
**   POST /metadata      {"ids": [...], "indice_name"} -> [{"id", "metadata": {...}}]
**                       (metadata null for an unknown id; for a photo that is gone or
**                       changed since the last scan also "status" 404 / 409 and the
**                       "error" /api/file/ID would give)
**
** As clip_back, the body is read as JSON whatever its Content-Type (ClipClient sends
** none), unknown fields are ignored (deduplicate, use_safety_model, aesthetic_*,
** use_mclip: clipdb has no such models), and the first num_images results carry
** their metadata, the rest (up to num_result_ids) only id and similarity. "url" is
** the absolute URL of the original (/api/file/ID on this server), "caption" its file
** name. image_url is refused: the server fetches nothing from elsewhere. The same
** search as /api/search: text is one term, scores are cosines.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/serve_int.h"

#define CR_MAX_RESULTS 1000

void cdb_srv_base_url(const srv_ctx *c, const srv_req *r, char *buf, size_t size) {
    int ok = r->host && *r->host && strlen(r->host) < 256;
    for (const char *p = r->host; ok && *p; p++) /* host[:port], [v6]:port: nothing else */
        ok = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
             strchr(".-:[]", *p);
    if (ok) snprintf(buf, size, "http://%s", r->host);
    else if (strchr(c->bind_host, ':'))
        snprintf(buf, size, "http://[%s]:%d", c->bind_host, c->port);
    else snprintf(buf, size, "http://%s:%d", c->bind_host, c->port);
}

static json_t *metadata(const char *base, int64_t id, const char *path) {
    json_t *m = json_object();
    char url[600];
    const char *name = path ? (strrchr(path, '/') ? strrchr(path, '/') + 1 : path) : "";
    snprintf(url, sizeof url, "%s/api/file/%lld", base, (long long)id);
    json_object_set_new(m, "url", json_string(url));
    json_object_set_new(m, "caption", cdb_srv_json_bytes(name));
    cdb_srv_json_path(m, "path", path);
    snprintf(url, sizeof url, "%s/api/thumb/%lld", base, (long long)id);
    json_object_set_new(m, "thumb", json_string(url));
    return m;
}

static json_t *load_body(const srv_req *r, srv_resp *o) { return cdb_srv_body_object(r, 0, o); }

/* A positive integer field (absent: def); -1 when present and bad. */
static long count_field(json_t *doc, const char *key, long def) {
    json_t *v = json_object_get(doc, key);
    if (!v || json_is_null(v)) return def;
    if (!json_is_integer(v) || json_integer_value(v) < 1) return -1;
    return json_integer_value(v) > CR_MAX_RESULTS ? CR_MAX_RESULTS : (long)json_integer_value(v);
}

static void knn(srv_ctx *c, const srv_req *r, srv_resp *o) {
    json_t *doc = load_body(r, o), *v, *out;
    cdb_engine_query q;
    cdb_engine_search_params p = cdb_engine_search_params_default();
    cdb_engine_result res;
    unsigned char *image = NULL;
    float *vec = NULL;
    long num_images, num_ids;
    char base[600];
    memset(&q, 0, sizeof q);
    memset(&res, 0, sizeof res);
    if (!doc) return;
    num_images = count_field(doc, "num_images", 40);
    num_ids = count_field(doc, "num_result_ids", num_images);
    if (num_images < 0 || num_ids < 0) {
        cdb_srv_error(o, 400, "bad_request", "num_images and num_result_ids are positive integers");
        goto done;
    }
    if (num_ids < num_images) num_ids = num_images;
    if ((v = json_object_get(doc, "text")) && json_is_string(v) && json_string_length(v) > 0) {
        if (strlen(json_string_value(v)) != json_string_length(v)) {
            cdb_srv_error(o, 400, "bad_query", "a NUL character in the text");
            goto done;
        }
        q.text = json_string_value(v);
        q.text_literal = 1;
    } else if ((v = json_object_get(doc, "image")) && json_is_string(v) &&
               json_string_length(v) > 0) {
        size_t n = 0;
        const char *b64 = json_string_value(v);
        if (!strncmp(b64, "data:", 5) && strchr(b64, ',')) b64 = strchr(b64, ',') + 1;
        if (!(image = cdb_out_base64_decode(b64, strlen(b64), &n)) || !n) {
            cdb_srv_error(o, 400, "bad_image", "image is not base64 data");
            goto done;
        }
        q.image = image;
        q.image_bytes = n;
    } else if ((v = json_object_get(doc, "embedding_input")) && json_is_array(v)) {
        size_t n = json_array_size(v);
        if (n != (size_t)c->model.dim || !(vec = malloc(sizeof *vec * n))) {
            cdb_srv_error(o, 400, "bad_request", "embedding_input must have %d numbers",
                          c->model.dim);
            goto done;
        }
        for (size_t i = 0; i < n; i++) {
            json_t *x = json_array_get(v, i);
            if (!json_is_number(x)) {
                cdb_srv_error(o, 400, "bad_request", "embedding_input must hold numbers");
                goto done;
            }
            vec[i] = (float)json_number_value(x);
        }
        q.vector = vec;
        q.vector_dim = (int)n;
    } else if ((v = json_object_get(doc, "image_url")) && json_is_string(v)) {
        cdb_srv_error(o, 400, "unsupported",
                      "image_url is not supported: send the image itself (base64)");
        goto done;
    } else {
        cdb_srv_error(o, 400, "bad_query", "give text, image or embedding_input");
        goto done;
    }
    p.k = (int)num_ids;
    if (cdb_engine_search(c->e, &q, &p, &res) != CDB_OK) {
        cdb_srv_engine_error(o);
        goto done;
    }
    atomic_fetch_add(&c->n_search, 1);
    cdb_srv_base_url(c, r, base, sizeof base);
    out = json_array();
    for (int i = 0; i < res.n; i++) {
        json_t *x =
            i < num_images ? metadata(base, res.hits[i].id, res.hits[i].path) : json_object();
        json_object_set_new(x, "id", json_integer(res.hits[i].id));
        json_object_set_new(x, "similarity", cdb_srv_json_float(res.hits[i].score));
        if (res.has_probability) /* one more key: clip-front and ClipClient read theirs */
            json_object_set_new(x, "probability", cdb_srv_json_float(res.hits[i].probability));
        json_array_append_new(out, x);
    }
    cdb_srv_json_fresh(o, out);
done:
    cdb_engine_result_free(&res);
    free(image);
    free(vec);
    json_decref(doc);
}

static void meta(srv_ctx *c, const srv_req *r, srv_resp *o) {
    json_t *doc = load_body(r, o), *ids, *out;
    char base[600];
    if (!doc) return;
    ids = json_object_get(doc, "ids");
    if (!json_is_array(ids) || json_array_size(ids) > CR_MAX_RESULTS) {
        cdb_srv_error(o, 400, "bad_request", "ids must be a list of at most %d ids",
                      CR_MAX_RESULTS);
        json_decref(doc);
        return;
    }
    cdb_srv_base_url(c, r, base, sizeof base);
    out = json_array();
    for (size_t i = 0; i < json_array_size(ids); i++) {
        json_t *x = json_array_get(ids, i), *item = json_object();
        cdb_engine_file f;
        int64_t id = json_is_integer(x) ? (int64_t)json_integer_value(x) : 0;
        json_object_set(item, "id", x);
        if (id > 0 && cdb_engine_file_get(c->e, id, &f) == CDB_OK) {
            json_object_set_new(item, "metadata", metadata(base, id, f.path));
            cdb_engine_file_clear(&f);
        } else {
            json_object_set_new(item, "metadata", json_null()); /* as clip_back: unknown id */
            if (id > 0 && cdb_engine_errcode() != CDB_ENGINE_E_UNKNOWN_ID) {
                srv_resp e; /* why, as /api/file/ID would answer (gone, changed) */
                cdb_srv_resp_init(&e);
                cdb_srv_engine_error(&e);
                json_t *doc = e.body ? json_loadb(e.body, e.len, 0, NULL) : NULL;
                json_object_set(item, "error", json_object_get(doc, "error"));
                json_decref(doc);
                json_object_set_new(item, "status", json_integer(e.status));
                cdb_srv_resp_clear(&e);
            }
        }
        json_array_append_new(out, item);
    }
    json_decref(doc);
    cdb_srv_json_fresh(o, out);
}

int cdb_srv_clip_retrieval(srv_ctx *c, const srv_req *r, srv_resp *o) {
    const char *p = r->path ? r->path : "";
    int get = !strcmp(r->method, "GET") || !strcmp(r->method, "HEAD");
    int post = !strcmp(r->method, "POST");
    if (strcmp(p, "/knn-service") && strcmp(p, "/metadata") && strcmp(p, "/indices-list")) return 0;
    o->cors = c->cors_origin != NULL;
    if (!strcmp(p, "/indices-list")) {
        if (get) cdb_srv_json(o, 200, json_pack("[s]", c->model.name));
        else cdb_srv_error(o, 405, "method_not_allowed", "use GET here");
    } else if (!post) {
        cdb_srv_error(o, 405, "method_not_allowed", "use POST here");
    } else if (!strcmp(p, "/knn-service")) {
        knn(c, r, o);
    } else {
        meta(c, r, o);
    }
    o->cors = c->cors_origin != NULL;
    return 1;
}
