/*
** errors.c: the error conventions every public call of the engine follows (a complete
** "what (why)" sentence in cdb_errmsg plus a detail code), the events a call reports
** through (warnings, progress, stop), and the threads an encode is bound to.
*/
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <omp.h>

#include "engine/base/base.h"

/* ---- errors --------------------------------------------------------------------------- */

static _Thread_local cdb_engine_err t_code;

cdb_engine_err cdb_engine_errcode(void) { return t_code; }
void cdb_eng_clear(void) { t_code = CDB_ENGINE_E_NONE; }

cdb_status cdb_eng_code(cdb_status rc, cdb_engine_err code) {
    t_code = code;
    return rc;
}

static cdb_status vfail(cdb_status rc, cdb_engine_err code, const char *why, const char *fmt,
                        va_list ap) {
    char what[1024], w[1024];
    vsnprintf(what, sizeof what, fmt, ap);
    /* a context why repeats (the path what names) is said once */
    if (why) cdb_err_said_once(what, why, w, sizeof w);
    else w[0] = '\0';
    if (w[0]) cdb_seterr(rc, "%s (%s)", what, w);
    else cdb_seterr(rc, "%s", what);
    /* a full disk is said as such by every command, whatever it was writing */
    t_code = code == CDB_ENGINE_E_NONE && cdb_eng_disk_full(rc) ? CDB_ENGINE_E_DISK_FULL : code;
    return rc;
}

cdb_status cdb_eng_fail(cdb_status rc, cdb_engine_err code, const char *fmt, ...) {
    const char *why = cdb_errmsg();
    va_list ap;
    cdb_status r;
    if (!why || !*why) why = cdb_status_str(rc);
    va_start(ap, fmt);
    r = vfail(rc, code, why, fmt, ap);
    va_end(ap);
    return r;
}

cdb_status cdb_eng_failw(cdb_status rc, cdb_engine_err code, const char *why, const char *fmt,
                         ...) {
    va_list ap;
    cdb_status r;
    va_start(ap, fmt);
    r = vfail(rc, code, why, fmt, ap);
    va_end(ap);
    return r;
}

/* Every layer maps a full disk to CDB_NOSPACE (SQLite's SQLITE_FULL and I/O errors
** with ENOSPC in db/, errno through cdb_errno_status elsewhere), and the pipeline
** passes its fatal status on unchanged: the status alone says it. */
int cdb_eng_disk_full(cdb_status rc) { return rc == CDB_NOSPACE; }

/* ---- events ------------------------------------------------------------------------------ */

void cdb_eng_warn(const cdb_engine_events *ev, const char *fmt, ...) {
    char *line = NULL;
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(&line, fmt, ap) < 0) line = NULL;
    va_end(ap);
    if (!line) return;
    if (ev && ev->warn) ev->warn(ev->ud, line);
    else CDB_LOG_WARN("%s", line);
    free(line);
}

int cdb_eng_should_stop(const cdb_engine_events *ev) {
    return ev && ev->should_stop && ev->should_stop(ev->ud);
}

void cdb_eng_progress(const cdb_engine_events *ev, cdb_engine_phase ph, const char *label,
                  int64_t done, int64_t total, int64_t errors) {
    cdb_engine_progress p;
    if (!ev || !ev->progress) return;
    p.phase = ph;
    p.label = label;
    p.done = done;
    p.total = total;
    p.errors = errors;
    ev->progress(ev->ud, &p);
}

/* BLAS (OpenBLAS, OpenMP build) sizes each GEMM by the calling thread's OpenMP thread
** count, not by the backend's setting, and a GEMM (or a kernel loop) split another
** way rounds the last bit of an embedding differently. So the engine, not its caller,
** decides how many threads encode a query (cdb_eng_search_threads) and binds them. */
void cdb_eng_bind_threads(int threads) {
    int n = threads > 0 ? threads : cdb_default_threads();
    if (omp_get_max_threads() != n) omp_set_num_threads(n);
}

int cdb_eng_search_threads(const cdb_engine *e, cdb_db *db, const char *spec, int images) {
    (void)db, (void)spec;
    /* a text alone on one thread: a few tokens, no thread team to wake, and on a busy
    ** machine (an ingest running) several threads wait for each other (measured with
    ** ViT-B/32: 2.5x slower under load, 2x faster idle) */
    return images ? e->p.model_threads : 1;
}

const char *cdb_eng_fmt_count(int64_t n, char *buf, size_t size) {
    char tmp[32], o[48];
    uint64_t u = n < 0 ? (uint64_t)(-(n + 1)) + 1 : (uint64_t)n;
    int len = snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)u), k = 0;
    if (n < 0) o[k++] = '-';
    for (int i = 0; i < len; i++) {
        if (i && (len - i) % 3 == 0) o[k++] = ',';
        o[k++] = tmp[i];
    }
    o[k] = '\0';
    snprintf(buf, size, "%s", o);
    return buf;
}
