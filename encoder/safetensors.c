/*
** safetensors.c: maps a .safetensors file read-only and validates all of it before
** any tensor byte is touched. Layout: u64 little-endian header length N, N bytes of
** JSON (an object: name -> {"dtype", "shape", "data_offsets": [begin, end]}, plus an
** optional "__metadata__" object of strings), then the data area; offsets are
** relative to the data area. Checks: N within the file and <= 100 MiB, valid JSON
** with no duplicate keys, every entry well formed, known dtype, shape entries
** non-negative with no overflow, end - begin == prod(shape) * dtype size, end inside
** the data area, and no two tensors overlapping. A truncated, corrupt or hostile
** file gets CDB_CORRUPT naming the tensor and the rule; nothing reads out of bounds.
*/
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "encoder/encoder_int.h"

static const struct {
    const char *name;
    cdb_st_dtype dt;
    size_t size;
} k_dtypes[] = {
    {"F32", CDB_ST_F32, 4},   {"F16", CDB_ST_F16, 2},   {"BF16", CDB_ST_BF16, 2},
    {"F64", CDB_ST_F64, 8},   {"I64", CDB_ST_I64, 8},   {"I32", CDB_ST_I32, 4},
    {"I16", CDB_ST_I16, 2},   {"I8", CDB_ST_I8, 1},     {"U8", CDB_ST_U8, 1},
    {"BOOL", CDB_ST_BOOL, 1}, {"U16", CDB_ST_U16, 2},   {"U32", CDB_ST_U32, 4},
    {"U64", CDB_ST_U64, 8},   {"F8_E4M3", CDB_ST_F8_E4M3, 1}, {"F8_E5M2", CDB_ST_F8_E5M2, 1},
};

size_t cdb_st_dtype_size(cdb_st_dtype dt) {
    for (size_t i = 0; i < sizeof k_dtypes / sizeof k_dtypes[0]; i++)
        if (k_dtypes[i].dt == dt) return k_dtypes[i].size;
    return 0;
}

static int by_name(const void *a, const void *b) {
    return strcmp(((const cdb_st_tensor *)a)->name, ((const cdb_st_tensor *)b)->name);
}

static int by_offset(const void *a, const void *b) {
    const cdb_st_tensor *x = *(const cdb_st_tensor *const *)a, *y = *(const cdb_st_tensor *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset ? 1 : 0;
}

/* A JSON integer in [0, max], else -1. */
static int64_t json_uint(const json_t *v, int64_t max) {
    json_int_t x;
    if (!json_is_integer(v)) return -1;
    x = json_integer_value(v);
    if (x < 0 || x > max) return -1;
    return (int64_t)x;
}

/* Validates one header entry into t (name not set). */
static cdb_status parse_entry(const char *path, const char *name, json_t *e, size_t data_size,
                              cdb_st_tensor *t) {
    json_t *jd = json_object_get(e, "dtype"), *js = json_object_get(e, "shape"),
           *jo = json_object_get(e, "data_offsets");
    const char *dn;
    size_t i, esize = 0, nd;
    int64_t n = 1, b0, b1;
    if (!json_is_object(e))
        return cdb_seterr(CDB_CORRUPT, "%s: tensor '%s': header entry is not an object", path, name);
    if (!json_is_string(jd) || !json_is_array(js) || !json_is_array(jo))
        return cdb_seterr(CDB_CORRUPT, "%s: tensor '%s': needs string dtype, array shape and "
                          "array data_offsets", path, name);
    if (json_object_size(e) != 3)
        return cdb_seterr(CDB_CORRUPT, "%s: tensor '%s': unexpected keys in header entry", path,
                          name);
    dn = json_string_value(jd);
    for (i = 0; i < sizeof k_dtypes / sizeof k_dtypes[0]; i++)
        if (!strcmp(dn, k_dtypes[i].name)) {
            t->dtype = k_dtypes[i].dt;
            t->dtype_name = k_dtypes[i].name;
            esize = k_dtypes[i].size;
        }
    if (!esize)
        return cdb_seterr(CDB_UNSUPPORTED, "%s: tensor '%s': unknown dtype '%.32s'", path, name,
                          dn);
    nd = json_array_size(js);
    if (nd > CDB_ST_MAX_DIMS)
        return cdb_seterr(CDB_CORRUPT, "%s: tensor '%s': %zu dims (max %d)", path, name, nd,
                          CDB_ST_MAX_DIMS);
    t->n_dims = (int)nd;
    for (i = 0; i < nd; i++) {
        int64_t d = json_uint(json_array_get(js, i), INT64_MAX);
        if (d < 0)
            return cdb_seterr(CDB_CORRUPT, "%s: tensor '%s': shape[%zu] is not a non-negative "
                              "integer", path, name, i);
        t->shape[i] = d;
        if (__builtin_mul_overflow(n, d, &n))
            return cdb_seterr(CDB_CORRUPT, "%s: tensor '%s': shape overflows", path, name);
    }
    t->n_elems = n;
    if (json_array_size(jo) != 2)
        return cdb_seterr(CDB_CORRUPT, "%s: tensor '%s': data_offsets needs 2 entries", path, name);
    b0 = json_uint(json_array_get(jo, 0), INT64_MAX);
    b1 = json_uint(json_array_get(jo, 1), INT64_MAX);
    if (b0 < 0 || b1 < 0 || b1 < b0)
        return cdb_seterr(CDB_CORRUPT, "%s: tensor '%s': bad data_offsets", path, name);
    if ((uint64_t)b1 > data_size)
        return cdb_seterr(CDB_CORRUPT, "%s: tensor '%s': data_offsets [%lld, %lld] past the end "
                          "of the data (%zu bytes; file truncated?)", path, name, (long long)b0,
                          (long long)b1, data_size);
    {
        int64_t want;
        if (__builtin_mul_overflow(n, (int64_t)esize, &want) || want != b1 - b0)
            return cdb_seterr(CDB_CORRUPT, "%s: tensor '%s': %lld bytes for %lld %s elements",
                              path, name, (long long)(b1 - b0), (long long)n, t->dtype_name);
    }
    t->offset = (size_t)b0; /* relative for now */
    t->n_bytes = (size_t)(b1 - b0);
    return CDB_OK;
}

cdb_status cdb_st_open(const char *path, cdb_st_file **out) {
    cdb_status rc = CDB_OK;
    cdb_st_file *f = NULL;
    json_t *root = NULL;
    json_error_t jerr;
    const char *key;
    json_t *val;
    cdb_st_tensor **order = NULL;
    struct stat st;
    uint64_t hlen = 0;
    size_t data_off, data_size, names_len = 0;
    int fd = -1, i;
    char *np;

    *out = NULL;
    f = calloc(1, sizeof *f);
    if (!f || !(f->path = strdup(path))) {
        rc = cdb_seterr(CDB_NOMEM, "safetensors");
        goto cleanup;
    }
    f->map = MAP_FAILED;
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        rc = cdb_seterr(errno == ENOENT ? CDB_NOTFOUND : CDB_IO, "open %s: %s", path,
                        strerror(errno));
        goto cleanup;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        rc = cdb_seterr(CDB_IO, "%s: not a regular file", path);
        goto cleanup;
    }
    f->size = (size_t)st.st_size;
    if (f->size < 8) {
        rc = cdb_seterr(CDB_CORRUPT, "%s: %zu bytes, too short for a safetensors header", path,
                        f->size);
        goto cleanup;
    }
    f->map = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (f->map == MAP_FAILED) {
        rc = cdb_seterr(CDB_IO, "mmap %s: %s", path, strerror(errno));
        goto cleanup;
    }
    for (i = 0; i < 8; i++) hlen |= (uint64_t)((const unsigned char *)f->map)[i] << (8 * i);
    if (hlen < 2 || hlen > CDB_ST_MAX_HEADER || hlen > f->size - 8) {
        rc = cdb_seterr(CDB_CORRUPT, "%s: header length %llu invalid for a %zu-byte file (not "
                        "safetensors, or truncated)", path, (unsigned long long)hlen, f->size);
        goto cleanup;
    }
    if (((const char *)f->map)[8] != '{') {
        rc = cdb_seterr(CDB_CORRUPT, "%s: header is not a JSON object", path);
        goto cleanup;
    }
    data_off = 8 + (size_t)hlen;
    data_size = f->size - data_off;
    root = json_loadb((const char *)f->map + 8, (size_t)hlen, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        rc = cdb_seterr(CDB_CORRUPT, "%s: bad header JSON at byte %d: %s", path, jerr.position,
                        jerr.text);
        goto cleanup;
    }
    if (!json_is_object(root)) {
        rc = cdb_seterr(CDB_CORRUPT, "%s: header is not a JSON object", path);
        goto cleanup;
    }
    json_object_foreach(root, key, val) {
        if (!strcmp(key, "__metadata__")) {
            const char *mk;
            json_t *mv;
            if (!json_is_object(val)) {
                rc = cdb_seterr(CDB_CORRUPT, "%s: __metadata__ is not an object", path);
                goto cleanup;
            }
            json_object_foreach(val, mk, mv) {
                if (!json_is_string(mv)) {
                    rc = cdb_seterr(CDB_CORRUPT, "%s: __metadata__['%s'] is not a string", path, mk);
                    goto cleanup;
                }
            }
            f->metadata_json = json_dumps(val, JSON_COMPACT | JSON_SORT_KEYS);
            continue;
        }
        f->n_tensors++;
        names_len += strlen(key) + 1;
    }
    f->tensors = calloc(f->n_tensors ? f->n_tensors : 1, sizeof *f->tensors);
    f->names = malloc(names_len ? names_len : 1);
    order = calloc(f->n_tensors ? f->n_tensors : 1, sizeof *order);
    if (!f->tensors || !f->names || !order) {
        rc = cdb_seterr(CDB_NOMEM, "%s: %d tensors", path, f->n_tensors);
        goto cleanup;
    }
    i = 0;
    np = f->names;
    json_object_foreach(root, key, val) {
        cdb_st_tensor *t;
        if (!strcmp(key, "__metadata__")) continue;
        t = &f->tensors[i];
        if ((rc = parse_entry(path, key, val, data_size, t)) != CDB_OK) goto cleanup;
        strcpy(np, key);
        t->name = np;
        np += strlen(key) + 1;
        order[i] = t;
        i++;
    }
    /* No overlaps: sorted by begin, each must start at or after the previous end
    ** (empty tensors overlap nothing). */
    qsort(order, f->n_tensors, sizeof *order, by_offset);
    {
        size_t end = 0;
        const char *prev = NULL;
        for (i = 0; i < f->n_tensors; i++) {
            if (order[i]->n_bytes == 0) continue;
            if (order[i]->offset < end) {
                rc = cdb_seterr(CDB_CORRUPT, "%s: tensors '%s' and '%s' overlap", path, prev,
                                order[i]->name);
                goto cleanup;
            }
            end = order[i]->offset + order[i]->n_bytes;
            prev = order[i]->name;
        }
    }
    for (i = 0; i < f->n_tensors; i++) {
        f->tensors[i].offset += data_off;
        f->tensors[i].data = (const char *)f->map + f->tensors[i].offset;
    }
    qsort(f->tensors, f->n_tensors, sizeof *f->tensors, by_name);
    *out = f;
    f = NULL;

cleanup:
    if (fd >= 0) close(fd);
    json_decref(root);
    free(order);
    cdb_st_close(f);
    return rc;
}

const cdb_st_tensor *cdb_st_find(const cdb_st_file *f, const char *name) {
    cdb_st_tensor key;
    if (!f || !f->n_tensors) return NULL;
    key.name = name;
    return bsearch(&key, f->tensors, f->n_tensors, sizeof key, by_name);
}

void cdb_st_close(cdb_st_file *f) {
    if (!f) return;
    if (f->map && f->map != MAP_FAILED) munmap(f->map, f->size);
    free(f->tensors);
    free(f->names);
    free(f->metadata_json); /* json_dumps uses malloc (jansson's default allocator) */
    free(f->path);
    free(f);
}
