/*
** core.h: the conventions every clipdb module shares, and nothing else.
**
** - cdb_status: the one return type of every fallible call (X-macro list, so the
**   enum and its strings can never drift apart).
** - A thread-local detail message for the last failure (cdb_errmsg), set with
**   cdb_seterr(), which also returns the status so callers write
**   `return cdb_seterr(CDB_IO, "open %s: %s", path, strerror(errno));`.
** - Logging to a callback (default: stderr, level from CLIPDB_LOG).
** - One allocator pair (cdb_malloc/cdb_free) for memory handed across the API.
** - Version macros and cdb_default_threads().
** - cdb_data_path(): where clipdb's data files are (the bundled models, the
**   standard vocabulary), installed or in the source tree.
**
** Library code never calls exit()/abort() on bad input and never writes to stdout.
** Thread-safety: everything here may be called from any thread. cdb_log_set()
** should be called once before other threads start.
*/
#ifndef CDB_CORE_H
#define CDB_CORE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CDB_VERSION_MAJOR 0
#define CDB_VERSION_MINOR 1
#define CDB_VERSION_PATCH 0
#define CDB_VERSION_STRING "0.1.0"
#define CDB_VERSION_NUMBER (CDB_VERSION_MAJOR * 10000 + CDB_VERSION_MINOR * 100 + CDB_VERSION_PATCH)

/* Version of the library actually linked (may differ from the header's). */
int cdb_libversion_number(void);
const char *cdb_libversion(void);

#if defined(__GNUC__) || defined(__clang__)
#define CDB_PRINTF(fmt_idx, arg_idx) __attribute__((format(printf, fmt_idx, arg_idx)))
#define CDB_DEPRECATED(fn, msg) fn __attribute__((deprecated(msg)))
#define CDB_WARN_UNUSED __attribute__((warn_unused_result))
#else
#define CDB_PRINTF(fmt_idx, arg_idx)
#define CDB_DEPRECATED(fn, msg) fn
#define CDB_WARN_UNUSED
#endif

/* X(name, string). Append only: the numeric values are part of the ABI. */
#define CDB_STATUS_MAP(X)                                                    \
    X(CDB_OK, "ok")                                                          \
    X(CDB_ERROR, "error")                                                    \
    X(CDB_NOMEM, "out of memory")                                            \
    X(CDB_IO, "I/O error")                                                   \
    X(CDB_CORRUPT, "corrupt data")                                           \
    X(CDB_INVALID, "invalid argument")                                       \
    X(CDB_NOTFOUND, "not found")                                             \
    X(CDB_DIM_MISMATCH, "dimension mismatch")                                \
    X(CDB_UNSUPPORTED, "unsupported")                                        \
    X(CDB_DEVICE, "device error")                                            \
    X(CDB_BUSY, "busy")                                                      \
    X(CDB_TOO_LARGE, "too large")                                            \
    X(CDB_INTERRUPTED, "interrupted")                                        \
    X(CDB_NOSPACE, "no space left on device")                                \
    X(CDB_VERSION, "version mismatch")

typedef enum cdb_status {
#define CDB_X_ENUM(name, str) name,
    CDB_STATUS_MAP(CDB_X_ENUM)
#undef CDB_X_ENUM
    CDB_STATUS_COUNT_
} cdb_status;

/* Static string naming rc, never NULL ("unknown status" for out-of-range values). */
const char *cdb_status_str(cdb_status rc);

/* Detail of the last failure on this thread, e.g. "open /x/catalog.db: Permission
** denied". Never NULL ("" when none). Valid until the next cdb_seterr() on this
** thread; copy it if you need it longer. */
const char *cdb_errmsg(void);

/* Records a formatted detail message for this thread and returns rc unchanged.
** Messages longer than 1 KiB are truncated. */
cdb_status cdb_seterr(cdb_status rc, const char *fmt, ...) CDB_PRINTF(2, 3);

/* Prepends "<context>: " to this thread's message (for adding the file/call a lower
** layer did not know) and returns rc. */
cdb_status cdb_errctx(cdb_status rc, const char *fmt, ...) CDB_PRINTF(2, 3);

/* For a "<what> (<why>)" sentence: why past its leading "<context>: " parts that what
** already says as a whole word (a path, "model m1", "image"), so each thing is named
** once: what "cannot read the image a.jpg", why "a.jpg: image: not a JPEG..." gives
** "not a JPEG...". The last part is always kept. A pointer into why (NULL: why). */
const char *cdb_err_unsaid(const char *what, const char *why);
/* cdb_err_unsaid, and also without the " (<x>)" groups of why whose x what already
** says as a whole word (SQLite's file name, a path a lower layer appended): what
** "shard /d/0002.db is damaged", why "read: disk image is malformed (/d/0002.db)"
** gives "read: disk image is malformed". Into out (size bytes); returns out. */
char *cdb_err_said_once(const char *what, const char *why, char *out, size_t size);

/* The status of a failed system call's errno: CDB_NOSPACE for a full disk or quota
** (ENOSPC, EDQUOT), CDB_NOMEM for ENOMEM, CDB_IO otherwise. Callers pass errno as it
** was right after the call, so a disk-full failure keeps its status on every path. */
cdb_status cdb_errno_status(int e);

/* Clears this thread's message. */
void cdb_clearerr(void);

/* ---- logging ---------------------------------------------------------------- */

typedef enum cdb_log_level {
    CDB_LOG_LEVEL_DEBUG = 0,
    CDB_LOG_LEVEL_INFO,
    CDB_LOG_LEVEL_WARN,
    CDB_LOG_LEVEL_ERROR,
    CDB_LOG_LEVEL_OFF
} cdb_log_level;

typedef void (*cdb_log_fn)(cdb_log_level lvl, const char *msg, void *ud);

/* Installs the log sink. fn == NULL restores the default: stderr, threshold from
** the CLIPDB_LOG environment variable (debug|info|warn|error|off; default warn). */
void cdb_log_set(cdb_log_fn fn, void *ud);
/* Messages below lvl are dropped before formatting. */
void cdb_log_set_level(cdb_log_level lvl);
cdb_log_level cdb_log_get_level(void);
void cdb_log(cdb_log_level lvl, const char *fmt, ...) CDB_PRINTF(2, 3);

#define CDB_LOG_DEBUG(...) cdb_log(CDB_LOG_LEVEL_DEBUG, __VA_ARGS__)
#define CDB_LOG_INFO(...) cdb_log(CDB_LOG_LEVEL_INFO, __VA_ARGS__)
#define CDB_LOG_WARN(...) cdb_log(CDB_LOG_LEVEL_WARN, __VA_ARGS__)
#define CDB_LOG_ERROR(...) cdb_log(CDB_LOG_LEVEL_ERROR, __VA_ARGS__)

/* ---- memory ----------------------------------------------------------------- */

/* Memory returned across the public API is allocated with cdb_malloc and must be
** released with cdb_free (NULL is fine). */
void *cdb_malloc(size_t n);
void *cdb_calloc(size_t n, size_t size);
void *cdb_realloc(void *p, size_t n);
char *cdb_strdup(const char *s);
void cdb_free(void *p);

/* ---- misc ------------------------------------------------------------------- */

/* Threads to use when a params field says 0: CLIPDB_THREADS if set, else the
** number of online CPUs (at least 1). */
int cdb_default_threads(void);

/* Monotonic clock in nanoseconds. */
int64_t cdb_now_ns(void);

/* ---- UTF-8 ------------------------------------------------------------------ */

/* Length (1..4) of the valid UTF-8 sequence at s, of the n >= 1 bytes there, or 0
** when it is not one (a stray continuation byte, an overlong form, a surrogate, a
** code point above U+10FFFF, a sequence cut short by n): utf8proc's reading. */
size_t cdb_utf8_seq_len(const unsigned char *s, size_t n);
/* 1 when the n bytes at s are valid UTF-8 throughout, else 0. */
int cdb_utf8_valid(const char *s, size_t n);

/* FNV-1a over n bytes, with the offset basis clipdb has always used (1469598103934665603:
** the tokenizer cache's hash tables are laid out by it, so it must not change). A fast
** name for bytes, never a checksum of data that can be damaged or forged. */
static inline uint64_t cdb_fnv1a64(const void *p, size_t n) {
    const unsigned char *b = (const unsigned char *)p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* ---- data files ------------------------------------------------------------- */

/* The one lookup of clipdb's data files: `name` is a path relative to the data
** folder ("models", "data/bpe_simple_vocab_16e6.txt.gz"). Looks first in the
** installed data folder, found relative to the running program: the folder of
** /proc/self/exe (symlinks resolved) joined with CDB_DATA_FROM_BIN, which CMake sets
** from GNUInstallDirs (e.g. "../share/clipdb": <prefix>/bin/clipdb reads
** <prefix>/share/clipdb/<name>, wherever the prefix was installed or moved to).
** Then, for a program run from its build folder, in the source tree it was built
** from (CDB_DATA_SOURCE_DIR), whose layout the installed folder mirrors.
** On success writes the canonical absolute path (realpath) into buf and returns
** buf; *where (may be NULL) is set to "installed" or "source tree". Returns NULL
** when neither exists, or the path does not fit in size bytes (*where = "none").
** Logs the outcome at debug level (CLIPDB_LOG=debug). Thread-safe; no state. */
const char *cdb_data_path(const char *name, char *buf, size_t size, const char **where);

/* ---- files clipdb writes beside others' and reads from folders it may not own (file.c) --
** A folder clipdb writes into (a database, a cache) may be writable by someone else, who
** can plant a link or a FIFO at a name clipdb is about to use. These two never follow a
** link at the last component and never block on a FIFO or a device. */
/* Creates "<path>.tmp.<pid>.<n>" (n: the first free number from a per-process counter)
** with O_EXCL | O_NOFOLLOW, mode 0666 less the umask, its name in tmp (size bytes): never
** a file or link someone else put at the name. The descriptor (read and write,
** O_CLOEXEC), or -1 with errno (ENAMETOOLONG when the name does not fit). Its pid is the
** one cdb_tmp_owner_pid reads back, so a sweep can tell a dead writer's leftover. */
int cdb_tmp_create(const char *path, char *tmp, size_t size);
/* The pid of a temporary name "<base>.tmp.<pid>[.<n>]" given the part after "<base>.tmp.",
** or -1 when it is not one. */
long cdb_tmp_owner_pid(const char *after_tmp);
/* Opens path for reading (O_RDONLY plus extra_flags, 0 for most) only when it is a
** regular file: a link at the last component (O_NOFOLLOW: ELOOP), a FIFO, socket or
** device (EINVAL, found by fstat after a non-blocking open, so a FIFO with no writer
** never blocks) give -1 with errno. The descriptor is blocking again and O_CLOEXEC. */
int cdb_open_regular(const char *path, int extra_flags);
/* 1 when dir is a folder (not a link) of this user's that no one else can write to (group
** write only for this user's own group): a folder whose files clipdb trusts or runs, which
** anyone else could otherwise forge, swap or redirect. 0 otherwise (errno from lstat). */
int cdb_dir_private(const char *dir);

/* ---- libraries loaded at run time (dynlib.c) ------------------------------------------
** Libraries clipdb opens with dlopen() on first use instead of linking: cuBLAS and nvJPEG
** (a binary built with CUDA starts on a machine without them), and libheif, libtiff,
** libraw, libcurl, libcrypto and the SentencePiece shim, whose loading (their own
** dependencies' constructors: x265, aom, de265, GnuTLS, protobuf, Lerc, lcms2) cost every
** clipdb process about 25 ms before any command ran, although most commands never decode
** a HEIC, TIFF or camera file, download or read a .model file. */
typedef struct cdb_dynlib_spec {
    const char *what;              /* its name in messages: "cuBLAS 13", "libheif" */
    const char *env;               /* a variable whose value (a path) is tried first; may be NULL */
    const char *const *candidates; /* then these, in order (names or paths, as dlopen takes) */
    int n_candidates;
    const char *const *symbols;    /* every symbol the caller uses */
    int n_symbols;
} cdb_dynlib_spec;
/* Opens the first loadable library of s and resolves s->symbols into syms[0 ..
** n_symbols) (caller's array). CDB_UNSUPPORTED, nothing left open, when none loads
** (the message: what, every attempt's dlerror, the variable to set) or a symbol is
** missing (the message names it). *handle: for dlclose, or kept for the process. */
cdb_status cdb_dynlib_open(const cdb_dynlib_spec *s, void **handle /* OUT */,
                           void **syms /* OUT */);
/* For an X-macro list of a library's functions F(X): `struct { F(CDB_DYNLIB_PTR) } api;`
** declares the table cdb_dynlib_open fills (the header's own prototypes give the types),
** `{F(CDB_DYNLIB_NAME)}` the symbols' names in the same order. */
#define CDB_DYNLIB_PTR(f) __typeof__(f) *f;
#define CDB_DYNLIB_NAME(f) #f,
/* A library opened on the first cdb_dynlib_get, once per process (the table stays
** filled; the library is never closed). Initialize as {spec, &table}. */
typedef struct cdb_dynlib_lazy {
    cdb_dynlib_spec spec;
    void *table; /* a struct of F(CDB_DYNLIB_PTR) */
    int tried;
    cdb_status rc;
    char err[512];
} cdb_dynlib_lazy;
/* CDB_OK once the library is loaded; else its cdb_dynlib_open status and message, again
** at every call. Any thread. */
cdb_status cdb_dynlib_get(cdb_dynlib_lazy *l);
/* Declares (static) the table `tbl` for the X-macro list F of a library's functions,
** and the cdb_dynlib_lazy `lazy` that fills it from the first of the candidates (the
** string literals after env) that loads; what and env as in cdb_dynlib_spec:
**   CDB_DYNLIB_LAZY(tf_lib, tf, TIFF_FNS, "libtiff", "CLIPDB_LIBTIFF", "libtiff.so.6",
**                   "libtiff.so");
** then cdb_dynlib_get(&tf_lib) before the first tf.TIFFOpen(...). */
#define CDB_DYNLIB_LAZY(lazy, tbl, F, what, env, ...)                                      \
    static struct {                                                                        \
        F(CDB_DYNLIB_PTR)                                                                  \
    } tbl;                                                                                 \
    static const char *const lazy##_names[] = {__VA_ARGS__};                               \
    static const char *const lazy##_syms[] = {F(CDB_DYNLIB_NAME)};                         \
    static cdb_dynlib_lazy lazy = {                                                        \
        .spec = {what, env, lazy##_names,                                                  \
                 (int)(sizeof lazy##_names / sizeof *lazy##_names), lazy##_syms,           \
                 (int)(sizeof lazy##_syms / sizeof *lazy##_syms)},                         \
        .table = &tbl}

/* ---- the stamp of a checked cache file (stamp.c) ---------------------------------------
** <file>.ok: the identity (device, inode, size, mtime, ctime) of a cache file whose payload
** was hashed whole and matched the sum its header names. An open whose file still has
** that identity and that sum may skip the payload hash (stamp.c says why that is safe);
** every other check of the file still runs. Best effort: a stamp that cannot be written
** or read only costs the next open its hash. Any thread. */
typedef struct cdb_stamp {
    char magic[8];
    uint64_t dev, ino, size;
    int64_t mtime_ns, ctime_ns;
    uint64_t payload_sum[2]; /* the cache's own sum (a 64-bit one: [1] = 0) */
    uint64_t sum;            /* XXH3-64 of the fields above */
} cdb_stamp;
struct stat;
/* The stamp of a file with stat st whose payload has that sum. */
cdb_stamp cdb_stamp_of(const struct stat *st, const uint64_t payload_sum[2]);
/* 1 when file's stamp names exactly this identity (st) and payload sum, else 0. */
int cdb_stamp_matches(const char *file, const struct stat *st, const uint64_t payload_sum[2]);
/* Stamps file: fsyncs it, and writes its stamp when it still is the file due describes
** (the one that was hashed whole); 0 when written. The caller removes temporaries a
** killed writer left ("<file>.ok.tmp.<pid>"). */
int cdb_stamp_write(const char *file, const cdb_stamp *due);
/* Marks file recently used: its stamp's mtime (never the file's: its ctime is stamped). */
void cdb_stamp_touch(const char *file);
/* "<file>.ok" into out; -1 when it does not fit. */
int cdb_stamp_path(const char *file, char *out, size_t size);

#ifdef __cplusplus
}
#endif
#endif /* CDB_CORE_H */
