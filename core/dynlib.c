/*
** dynlib.c: loading a library at run time (core.h, cdb_dynlib_open: cuBLAS, nvJPEG,
** libheif, libcurl, the SentencePiece shim): the first of the path in an environment
** variable and a list of candidate names that dlopen() accepts, and every symbol the
** caller needs, or one message that names the library, every attempt and the variable
** to set. Its failure paths are tested on any machine (tests/kernels/test_device.c,
** with fake libraries).
*/
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

/* Appends "; what" (or "what" first) to err, keeping it terminated. */
static void add_err(char *err, size_t cap, const char *what) {
    size_t used = strlen(err);
    if (used + 3 < cap) snprintf(err + used, cap - used, "%s%s", used ? "; " : "", what);
}

cdb_status cdb_dynlib_open(const cdb_dynlib_spec *s, void **handle, void **syms) {
    char err[1536];
    const char *env = s->env ? getenv(s->env) : NULL;
    void *h = NULL;
    err[0] = 0;
    *handle = NULL;
    for (int i = -1; !h && i < s->n_candidates; i++) {
        const char *path = i < 0 ? env : s->candidates[i];
        const char *e;
        if (!path || !*path) continue;
        if ((h = dlopen(path, RTLD_NOW | RTLD_LOCAL))) break;
        e = dlerror();
        add_err(err, sizeof err, e ? e : path);
    }
    if (!h)
        return cdb_seterr(CDB_UNSUPPORTED, "%s could not be loaded (%s); install it or set %s="
                          "/path/to/%s", s->what, err[0] ? err : "no candidate",
                          s->env ? s->env : "its path", s->n_candidates ? s->candidates[0] : "");
    for (int i = 0; i < s->n_symbols; i++) {
        syms[i] = dlsym(h, s->symbols[i]);
        if (!syms[i]) {
            dlclose(h);
            return cdb_seterr(CDB_UNSUPPORTED, "%s has no symbol %s (a library of another "
                              "version?)", s->what, s->symbols[i]);
        }
    }
    *handle = h;
    return CDB_OK;
}
