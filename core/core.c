/*
** core.c: status strings, the thread-local error message, logging, allocation,
** version and thread-count helpers, the data-file lookup. See core.h for the
** contracts.
*/
#define _POSIX_C_SOURCE 200809L
#include "core.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <utf8proc.h>

#define CDB_ERRMSG_MAX 1024

static _Thread_local char tl_errmsg[CDB_ERRMSG_MAX];

int cdb_libversion_number(void) { return CDB_VERSION_NUMBER; }
const char *cdb_libversion(void) { return CDB_VERSION_STRING; }

const char *cdb_status_str(cdb_status rc) {
    switch (rc) {
#define CDB_X_STR(name, str) \
    case name:               \
        return str;
        CDB_STATUS_MAP(CDB_X_STR)
#undef CDB_X_STR
    default:
        return "unknown status";
    }
}

const char *cdb_errmsg(void) { return tl_errmsg; }

void cdb_clearerr(void) { tl_errmsg[0] = '\0'; }

cdb_status cdb_errno_status(int e) {
    if (e == ENOSPC || e == EDQUOT) return CDB_NOSPACE;
    return e == ENOMEM ? CDB_NOMEM : CDB_IO;
}

cdb_status cdb_seterr(cdb_status rc, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tl_errmsg, sizeof tl_errmsg, fmt, ap);
    va_end(ap);
    return rc;
}

cdb_status cdb_errctx(cdb_status rc, const char *fmt, ...) {
    char old[CDB_ERRMSG_MAX], said[CDB_ERRMSG_MAX];
    size_t n;
    va_list ap;
    memcpy(old, tl_errmsg, sizeof old);
    va_start(ap, fmt);
    vsnprintf(tl_errmsg, sizeof tl_errmsg, fmt, ap);
    va_end(ap);
    n = strlen(tl_errmsg);
    if (n + 2 < sizeof tl_errmsg) {
        memcpy(tl_errmsg + n, ": ", 3);
        n += 2;
        /* the old message less what the context says already (each thing is named
        ** once however deep the wrappers nest), or the status string when there was
        ** none; truncated */
        tl_errmsg[n - 2] = '\0';
        cdb_err_said_once(tl_errmsg, old, said, sizeof said);
        tl_errmsg[n - 2] = ':';
        const char *tail = said[0] ? said : cdb_status_str(rc);
        size_t room = sizeof tl_errmsg - n - 1, len = strlen(tail);
        if (len > room) len = room;
        memcpy(tl_errmsg + n, tail, len);
        tl_errmsg[n + len] = '\0';
    }
    return rc;
}

/* A character that may continue a word or a path ("m1" is not said by "m1/x"). */
static int word_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '/' || c == '.' || c == '_' || c == '-';
}

/* Whether what holds s[0..n) with no word or path character on either side. */
static int says_word(const char *what, const char *s, size_t n) {
    for (const char *p = what; *p; p++)
        if (!strncmp(p, s, n) && (p == what || !word_char(p[-1])) && !word_char(p[n])) return 1;
    return 0;
}

const char *cdb_err_unsaid(const char *what, const char *why) {
    const char *colon;
    if (!what || !why) return why;
    while ((colon = strstr(why, ": ")) && colon > why &&
           says_word(what, why, (size_t)(colon - why)))
        why = colon + 2;
    return why;
}

char *cdb_err_said_once(const char *what, const char *why, char *out, size_t size) {
    size_t o = 0;
    if (!size) return out;
    why = cdb_err_unsaid(what, why);
    for (const char *p = why; p && *p && o + 1 < size;) {
        const char *close;
        if (p[0] == ' ' && p[1] == '(' && (close = strchr(p + 2, ')')) &&
            says_word(what, p + 2, (size_t)(close - p - 2))) {
            p = close + 1; /* " (<x>)" with x said already */
            continue;
        }
        out[o++] = *p++;
    }
    out[o] = '\0';
    return out;
}

/* ---- logging ---------------------------------------------------------------- */

static cdb_log_fn g_log_fn;
static void *g_log_ud;
/* Read by every thread on every log call: atomic (relaxed: the level is a single
** word with no data published through it). -1: CLIPDB_LOG not read yet; two
** threads that both read it store the same value. */
static atomic_int g_log_level = -1;

static cdb_log_level level_from_env(void) {
    const char *s = getenv("CLIPDB_LOG");
    if (!s || !*s) return CDB_LOG_LEVEL_WARN;
    if (!strcasecmp(s, "debug")) return CDB_LOG_LEVEL_DEBUG;
    if (!strcasecmp(s, "info")) return CDB_LOG_LEVEL_INFO;
    if (!strcasecmp(s, "warn") || !strcasecmp(s, "warning")) return CDB_LOG_LEVEL_WARN;
    if (!strcasecmp(s, "error")) return CDB_LOG_LEVEL_ERROR;
    if (!strcasecmp(s, "off") || !strcasecmp(s, "none")) return CDB_LOG_LEVEL_OFF;
    return CDB_LOG_LEVEL_WARN;
}

void cdb_log_set(cdb_log_fn fn, void *ud) {
    g_log_fn = fn;
    g_log_ud = ud;
    if (!fn) atomic_store_explicit(&g_log_level, (int)level_from_env(), memory_order_relaxed);
}

void cdb_log_set_level(cdb_log_level lvl) {
    atomic_store_explicit(&g_log_level, (int)lvl, memory_order_relaxed);
}

cdb_log_level cdb_log_get_level(void) {
    int lvl = atomic_load_explicit(&g_log_level, memory_order_relaxed);
    if (lvl < 0) {
        int expected = -1;
        lvl = (int)level_from_env();
        /* A cdb_log_set_level racing with the first read wins. */
        if (!atomic_compare_exchange_strong_explicit(&g_log_level, &expected, lvl,
                                                     memory_order_relaxed, memory_order_relaxed))
            lvl = expected;
    }
    return (cdb_log_level)lvl;
}

static const char *level_name(cdb_log_level lvl) {
    switch (lvl) {
    case CDB_LOG_LEVEL_DEBUG: return "debug";
    case CDB_LOG_LEVEL_INFO: return "info";
    case CDB_LOG_LEVEL_WARN: return "warning";
    case CDB_LOG_LEVEL_ERROR: return "error";
    default: return "log";
    }
}

void cdb_log(cdb_log_level lvl, const char *fmt, ...) {
    char msg[2048];
    va_list ap;
    if (lvl < cdb_log_get_level() || lvl >= CDB_LOG_LEVEL_OFF) return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (g_log_fn)
        g_log_fn(lvl, msg, g_log_ud);
    else
        fprintf(stderr, "clipdb: %s: %s\n", level_name(lvl), msg);
}

/* ---- memory ----------------------------------------------------------------- */

void *cdb_malloc(size_t n) { return malloc(n ? n : 1); }
void *cdb_calloc(size_t n, size_t size) { return calloc(n ? n : 1, size ? size : 1); }
void *cdb_realloc(void *p, size_t n) { return realloc(p, n ? n : 1); }
void cdb_free(void *p) { free(p); }

char *cdb_strdup(const char *s) {
    size_t n;
    char *d;
    if (!s) return NULL;
    n = strlen(s) + 1;
    d = (char *)cdb_malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

/* ---- misc ------------------------------------------------------------------- */

int cdb_default_threads(void) {
    const char *s = getenv("CLIPDB_THREADS");
    long n;
    if (s && *s) {
        n = strtol(s, NULL, 10);
        if (n > 0 && n < 4096) return (int)n;
    }
    n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

int64_t cdb_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* ---- data files ------------------------------------------------------------- */

/* Set by core/CMakeLists.txt; these defaults keep a build without CMake working. */
#ifndef CDB_DATA_FROM_BIN
#define CDB_DATA_FROM_BIN "../share/clipdb"
#endif
#ifndef CDB_DATA_SOURCE_DIR
#define CDB_DATA_SOURCE_DIR "" /* no source-tree fallback */
#endif

/* The canonical path of base/name into buf when it exists and fits; 0 if so. */
static int data_found(const char *base, const char *name, char *buf, size_t size) {
    char joined[PATH_MAX], *canon;
    int n = snprintf(joined, sizeof joined, "%s/%s", base, name);
    struct stat st;
    if (n < 0 || (size_t)n >= sizeof joined || stat(joined, &st) != 0) return -1;
    if (!(canon = realpath(joined, NULL))) return -1;
    n = snprintf(buf, size, "%s", canon);
    free(canon);
    return n >= 0 && (size_t)n < size ? 0 : -1;
}

size_t cdb_utf8_seq_len(const unsigned char *s, size_t n) {
    utf8proc_int32_t cp;
    utf8proc_ssize_t k = n ? utf8proc_iterate(s, (utf8proc_ssize_t)n, &cp) : 0;
    return k > 0 ? (size_t)k : 0;
}

int cdb_utf8_valid(const char *s, size_t n) {
    for (size_t i = 0, k; i < n; i += k)
        if (!(k = cdb_utf8_seq_len((const unsigned char *)s + i, n - i))) return 0;
    return 1;
}

const char *cdb_data_path(const char *name, char *buf, size_t size, const char **where) {
    char exe[PATH_MAX], *slash;
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    const char *dummy;
    if (!where) where = &dummy;
    *where = "none";
    if (!name || !*name || !buf || !size) return NULL;
    if (n > 0 && (size_t)n < sizeof exe - 1) {
        exe[n] = '\0';
        if ((slash = strrchr(exe, '/'))) {
            size_t dir_len = (size_t)(slash - exe);
            if (snprintf(slash, sizeof exe - dir_len, "/%s", CDB_DATA_FROM_BIN) <
                    (int)(sizeof exe - dir_len) &&
                data_found(exe, name, buf, size) == 0) {
                *where = "installed";
                CDB_LOG_DEBUG("data %s: %s (installed, next to the program)", name, buf);
                return buf;
            }
        }
    }
    if (*CDB_DATA_SOURCE_DIR && data_found(CDB_DATA_SOURCE_DIR, name, buf, size) == 0) {
        *where = "source tree";
        CDB_LOG_DEBUG("data %s: %s (source tree)", name, buf);
        return buf;
    }
    CDB_LOG_DEBUG("data %s: not found (neither installed with the program nor in the "
                  "source tree)", name);
    return NULL;
}
