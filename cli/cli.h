/*
** cli.h: private declarations shared by the files of the clipdb program (cli/).
** Not a module contract: nothing outside cli/ includes it.
**
** - args.c:    the option parser (long/short options, repeated options, `--`).
** - output.c:  error and hint lines, colors, the progress line, JSON writing.
** - config.c:  where the database and the model are (flags, environment, defaults).
** - signals.c: the SIGINT flag that long-running pipelines poll.
** - usage.c:   the help text of every command (the golden files are their spec).
** - cmd_*.c:   one file per group of subcommands; main.c dispatches to them.
**
** Exit codes (documented in `clipdb --help` and the README) are the CLI_EXIT_*
** values below; every command returns one of them.
*/
#ifndef CDB_CLI_H
#define CDB_CLI_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>

#include "core/core.h"
#include "db/db.h"
#include "encoder/encoder.h"

/* Which modules this build links (set by cli/CMakeLists.txt as they land). */
#ifndef CDB_CLI_HAVE_ENCODER
#define CDB_CLI_HAVE_ENCODER 0
#endif
#ifndef CDB_CLI_HAVE_DB
#define CDB_CLI_HAVE_DB 0
#endif
#ifndef CDB_CLI_HAVE_INDEX
#define CDB_CLI_HAVE_INDEX 0
#endif
#ifndef CDB_CLI_HAVE_WORLD
#define CDB_CLI_HAVE_WORLD 0
#endif

/* ---- exit codes ---------------------------------------------------------------- */
enum {
    CLI_EXIT_OK = 0,          /* success */
    CLI_EXIT_FAIL = 1,        /* the command could not do its job */
    CLI_EXIT_USAGE = 2,       /* unknown option, missing or bad argument */
    CLI_EXIT_PARTIAL = 3,     /* done, but some files failed (see `clipdb errors`) */
    CLI_EXIT_INTERRUPTED = 130 /* Ctrl-C: stopped after the current batch, work kept */
};

/* ---- option parser (args.c) -------------------------------------------------------
** A command describes its options with a table ending in {0}. Parsing accepts
** `--name=value`, `--name value`, `-k value`, `-kvalue`, bundled short flags (`-qv`),
** `--` (everything after is positional) and a lone `-` (positional). Options and
** positionals may be interleaved. Values point into argv (not copied). */

typedef enum cli_argkind {
    CLI_FLAG = 0,  /* no value; may be repeated (counted) */
    CLI_VALUE = 1, /* one value; the last occurrence wins */
    CLI_MULTI = 2  /* one value per occurrence, all kept in order (--not A --not B) */
} cli_argkind;

typedef struct cli_optspec {
    const char *name;   /* long name without dashes, e.g. "min-score"; NULL ends the table */
    char short_name;    /* e.g. 'k', or 0 */
    cli_argkind kind;
} cli_optspec;

#define CLI_MAX_OPTS 48

typedef struct cli_args {
    const cli_optspec *spec;
    int n_spec;
    int count[CLI_MAX_OPTS];         /* occurrences of each option */
    const char **vals[CLI_MAX_OPTS]; /* CLI_VALUE/CLI_MULTI: values in order (heap) */
    int *argi[CLI_MAX_OPTS];         /* argv index of each value (keeps the order of
                                        interleaved options, e.g. --text/--image) */
    const char **pos;                /* positionals in order (heap) */
    int n_pos;
    char err[256];                   /* why parsing failed (for the usage error) */
} cli_args;

/* Parses argv[0..argc) (argv[0] is the first argument, not the program name).
** Returns 0, or -1 with a message in a->err ("unknown option --foo", "option -k
** needs a value", "option --quiet takes no value"). Free with cli_args_free. */
int cli_args_parse(cli_args *a, const cli_optspec *spec, int argc, char **argv);
void cli_args_free(cli_args *a);

/* Lookups by long name. An unknown name is a programming error (asserts). */
int cli_has(const cli_args *a, const char *name);            /* occurrence count */
const char *cli_get(const cli_args *a, const char *name);    /* last value or NULL */
int cli_get_all(const cli_args *a, const char *name, const char ***vals /* OUT */);

/* Strict numeric parsing of an option value; 0 on success, -1 with a->err set
** ("--batch: expected an integer in [1, 4096], got 'x'"). Absent: *out = def. */
int cli_get_int(cli_args *a, const char *name, long def, long lo, long hi, long *out /* OUT */);
int cli_get_double(cli_args *a, const char *name, double def, double lo, double hi,
                   double *out /* OUT */);
/* Value must be one of the NULL-terminated choices; returns its index, def when
** absent, -1 with a->err set when not one of them. */
int cli_get_choice(cli_args *a, const char *name, const char *const *choices, int def);

/* ---- output (output.c) ------------------------------------------------------------- */

/* Set once by main: colors on stderr when it is a terminal and NO_COLOR is unset. */
void cli_output_init(int quiet);
int cli_quiet(void);
int cli_stderr_is_tty(void);

/* `clipdb: error: <what> (<why>)`, why may be NULL. Always returns CLI_EXIT_FAIL
** so callers can write `return cli_error(...)`. */
int cli_error(const char *why, const char *fmt, ...) CDB_PRINTF(2, 3);
/* `clipdb: error: <what> (<cdb_errmsg() or the status string>)`. */
int cli_error_status(cdb_status rc, const char *fmt, ...) CDB_PRINTF(2, 3);
/* `clipdb: warning: ...` */
void cli_warn(const char *fmt, ...) CDB_PRINTF(1, 2);
/* `hint: ...` under an error. */
void cli_hint(const char *fmt, ...) CDB_PRINTF(1, 2);
/* A usage error: the error line, the command's usage lines, a pointer to --help.
** Returns CLI_EXIT_USAGE. cmd may be NULL (top level). */
int cli_usage_error(const char *cmd, const char *fmt, ...) CDB_PRINTF(2, 3);
/* A command whose module is not in this build yet: says so, returns CLI_EXIT_FAIL. */
int cli_not_available(const char *cmd, const char *what);

/* Progress: one live line on stderr, only when stderr is a terminal and not
** --quiet; redrawn at most 10 times a second. total < 0: not known yet. */
typedef struct cli_progress {
    const char *label;
    int64_t total, done, errors, skipped;
    int64_t t0_ns, last_draw_ns;
    int live;   /* drawing enabled */
    int drawn;  /* a line is on screen (needs clearing) */
} cli_progress;
void cli_progress_start(cli_progress *p, const char *label, int64_t total);
void cli_progress_update(cli_progress *p); /* redraws if due */
void cli_progress_end(cli_progress *p);    /* clears the live line */
/* "1,234" into buf; returns buf. */
const char *cli_fmt_count(int64_t n, char *buf, size_t size);
/* "1.2 s", "3 min 4 s" ... */
const char *cli_fmt_duration(double seconds, char *buf, size_t size);
/* "12.3 MB" */
const char *cli_fmt_bytes(int64_t n, char *buf, size_t size);

/* JSON writing to a FILE, with automatic commas and optional indentation.
** Strings are escaped per RFC 8259 (", \, control characters; "/" is not
** escaped). Bytes that are not valid UTF-8 are rendered as U+FFFD in strings;
** cli_json_path additionally writes "<key>_b64": the exact bytes in base64, only
** when the path is not valid UTF-8 (as ripgrep's JSON does), so no path is lost. */
typedef struct cli_json {
    FILE *f;
    int depth;
    int pretty;
    int need_comma[64];
    int after_key;
} cli_json;
void cli_json_init(cli_json *j, FILE *f, int pretty);
void cli_json_begin_object(cli_json *j);
void cli_json_end_object(cli_json *j);
void cli_json_begin_array(cli_json *j);
void cli_json_end_array(cli_json *j);
void cli_json_key(cli_json *j, const char *key);
void cli_json_str(cli_json *j, const char *s);          /* NULL writes null */
void cli_json_strn(cli_json *j, const char *s, size_t n);
void cli_json_int(cli_json *j, int64_t v);
void cli_json_num(cli_json *j, double v, int decimals); /* NaN/Inf write null */
void cli_json_float(cli_json *j, float v);              /* shortest round-trip %.9g */
void cli_json_bool(cli_json *j, int v);
void cli_json_null(cli_json *j);
void cli_json_path(cli_json *j, const char *key, const char *path);
void cli_json_done(cli_json *j); /* final newline */
/* Writes s as a JSON string literal (quotes included) to f. Exposed for tests. */
void cli_json_write_string(FILE *f, const char *s, size_t n);
int cli_utf8_valid(const char *s, size_t n);

/* ---- ingest options (cmd_ingest.c -> pipeline.c) ----------------------------------- */

/* The encoder call of the pipeline: cdb_encode_pixels by default; tests inject
** failures through it (a transient error for one batch, an unusable vector). */
typedef cdb_status (*cli_encode_fn)(void *ud, cdb_model *m, const float *pixels, int n,
                                    float *out /* OUT n * dim */);

typedef struct cli_ingest_opts {
    int batch;           /* images per encoder batch */
    int threads;         /* reader/decoder threads */
    int device;          /* cdb_device_kind */
    int follow_symlinks; /* ingest: -1 keep each root's setting, 0 no, 1 yes */
    int no_exif;         /* ingest: -1 keep each root's setting, 0 EXIF applied, 1 ignored */
    int wait;            /* wait for the writer lock */
    int json;            /* summary as JSON */
    int full;            /* reindex --full */
    const char *label;   /* progress line label: "ingest", "reindex" */
    /* A later pass of one run, for another model's vectors: the first pass did the
    ** deletions, moves and root bookkeeping, and reported the walk's problems. */
    int secondary;
    int decode_req;       /* --decode: -1 keep each set's mode, 0 exact, 1 fast */
    int decode;           /* this pass's vector set: 0 exact, 1 fast (cdb_decode_mode) */
    int reencode;         /* this set's decode mode changed: every photo encoded again */
    cli_encode_fn encode; /* NULL: cdb_encode_pixels */
    void *encode_ud;
} cli_ingest_opts;

/* ---- bounded queue (queue.c) -------------------------------------------------------- */

typedef struct cli_queue cli_queue;
cli_queue *cli_queue_new(int cap); /* NULL on OOM */
void cli_queue_free(cli_queue *q);
int cli_queue_push(cli_queue *q, void *item); /* blocks while full; -1 once closed */
void *cli_queue_pop(cli_queue *q);            /* blocks while empty; NULL once closed and empty */
void *cli_queue_try_pop(cli_queue *q);        /* NULL when empty */
void cli_queue_close(cli_queue *q);

/* ---- walking roots (walk.c) -------------------------------------------------------- */

typedef struct cli_walk_entry {
    const char *relpath;      /* relative to the root, '/'-separated; borrowed for the call */
    int64_t size, mtime_ns, ctime_ns;
    uint64_t dev, ino;
    const char *error;        /* non-NULL: this entry could not be walked (err = errno) */
    int err;
} cli_walk_entry;

typedef struct cli_walk_stats {
    int64_t n_files, n_dirs, n_hidden, n_links_skipped, n_loops, n_special, n_errors;
    int64_t n_links_covered; /* followed links not entered: the target is in the library */
    int64_t n_same_file;     /* files met again under another name (links, hard links) */
} cli_walk_stats;

/* Called for every regular file (and every walk error); nonzero stops the walk. */
typedef int (*cli_walk_fn)(const cli_walk_entry *e, void *ud);

/* A set of (device, inode) pairs (walk.c). */
typedef struct cli_devino_set cli_devino_set;
cli_devino_set *cli_devino_new(void); /* NULL on OOM */
void cli_devino_free(cli_devino_set *s);
int cli_devino_add(cli_devino_set *s, uint64_t dev, uint64_t ino); /* 1 new, 0 present, -1 OOM */

typedef struct cli_walk_opts {
    int follow_symlinks;
    const char *skip_dir; /* a folder never entered (the database's own), or NULL */
    /* With follow_symlinks: 1 when the link at path (a full path) leads to what the
    ** library holds at its real path, so the link is not followed. NULL: follow all. */
    int (*link_covered)(const char *path, void *ud);
    void *link_ud;
    /* Folders and multiply-reachable files met so far (NULL: this walk's own): the
    ** walks of one run share them, so a folder or file reachable from two roots (a
    ** bind mount, a hard link, links) is met once. */
    cli_devino_set *dirs, *files;
} cli_walk_opts;

/* Walks root (a folder) as described in walk.c. Returns 0 when done, 1 when fn
** stopped it, -1 when root cannot be read (errno). */
int cli_walk(const char *root, const cli_walk_opts *o, cli_walk_fn fn, void *ud,
             cli_walk_stats *st /* OUT */);
/* 1 when the name has an image extension (case-insensitive). */
int cli_image_ext(const char *name);
/* The image format whose signature starts b ("jpeg", "png", ...), or NULL. */
const char *cli_image_magic(const unsigned char *b, size_t n);

/* ---- ingest pipeline (pipeline.c) --------------------------------------------------- */

/* One thing a run scans: a whole root, or a part of a folder root. */
typedef struct cli_ingest_root {
    int64_t root_id;
    const char *path;      /* the root's absolute path (a folder, or a file root's file) */
    int kind;              /* CDB_DB_ROOT_FOLDER | CDB_DB_ROOT_FILE */
    int follow_symlinks;   /* the root's settings */
    int no_exif;
    const char *sub;       /* NULL: the whole root; else a folder or file inside it
                              (relative path): only that part is walked, and only
                              that part's deleted files are marked deleted */
    int sub_is_file;
    int named;             /* the user named this one file: retried even if quarantined */
    int reencode;          /* the decode settings changed: every photo is encoded again */
} cli_ingest_root;

typedef struct cli_ingest_summary {
    int64_t found;          /* regular files met by the walks */
    int64_t unchanged;      /* skipped without reading (same size and mtime) */
    int64_t added, changed; /* encoded: new files / files whose content changed */
    int64_t moved;          /* kept their vector under a new path */
    int64_t touched;        /* metadata updated, same content */
    int64_t deleted;        /* gone from disk, marked deleted */
    int64_t errors;         /* unusable images, recorded (see `clipdb errors`) */
    int64_t retry;          /* transient failures, left pending for the next run */
    int64_t skipped;        /* not images */
    int64_t walk_errors;    /* folders or entries that could not be read, missing roots */
    int64_t missing_roots;  /* roots whose path is gone (kept as they are) */
    int64_t unreachable;    /* gone files whose place is not mounted (kept as they are) */
    int64_t links_skipped, loops, links_covered;
    double seconds;
    int interrupted;
    /* Where the time went (ns, monotonic clock). Busy time per stage, summed over
    ** the stage's threads, waits excluded; encode is the time inside
    ** cdb_encode_pixels (one thread), encode_wait the encoder waiting for images. */
    int64_t ns_walk;       /* walker: walking + catalog change checks */
    int64_t ns_read;       /* readers: open + read + hash + move lookups */
    int64_t ns_decode;     /* readers: image decode */
    int64_t ns_preprocess; /* readers: resize + crop + normalize */
    int64_t ns_encode, ns_encode_wait;
    int64_t ns_store;      /* writer: staging + commits */
    int64_t n_batches;     /* encoder batches run */
} cli_ingest_summary;

struct cdb_db;
struct cdb_model;

/* ---- reading photos (imagefile.c) -------------------------------------------------- */

typedef enum cli_fail {
    CLI_FAIL_NONE = 0,
    CLI_FAIL_GONE,      /* not there any more (deleted or moved since the walk) */
    CLI_FAIL_NOT_IMAGE, /* sniffed: no image signature */
    CLI_FAIL_TRANSIENT, /* I/O, permission, memory: retry later */
    CLI_FAIL_PERMANENT  /* the bytes cannot be used: quarantine until the file changes */
} cli_fail;
/* size, mtime, ctime, dev, ino of a stat into m. */
void cli_stat_meta(const struct stat *st, cdb_db_file_meta *m);
/* Reads the whole file at path: *buf (malloc'd, the caller frees) and meta's stat
** fields and hash. sniff: the name is not an image's; the first bytes decide
** (CLI_FAIL_NOT_IMAGE). On failure reason gets one line. */
cli_fail cli_read_photo(const char *path, int sniff, unsigned char **buf /* OUT */,
                       cdb_db_file_meta *meta /* OUT */, char *reason, size_t reason_size);
/* Decodes buf (decode: 0 exact, PIL's pixels; 1 fast, cdb_decode_mode) and
** preprocesses it into pixels (3 * pp->size^2); *width, *height: the image's full
** size after EXIF orientation. ns (may be NULL): += decode and preprocess ns. */
cli_fail cli_decode_photo(const unsigned char *buf, size_t n, int apply_exif, int decode,
                           const cdb_preprocess_params *pp, float *pixels /* OUT */,
                           int32_t *width /* OUT */, int32_t *height /* OUT */, int64_t ns[2],
                           char *reason, size_t reason_size);

/* ---- the library: recorded roots (library.c) ----------------------------------------- */

typedef struct cli_root {
    int64_t id;
    char *path;            /* heap */
    int kind;              /* CDB_DB_ROOT_FOLDER | CDB_DB_ROOT_FILE */
    int follow_symlinks, no_exif;
    uint64_t dev_recorded; /* st_dev at its last scan (0: unknown) */
    uint64_t dev_now;      /* st_dev now (0: the path is not there) */
    int present;           /* the path exists now, with the recorded kind */
} cli_root;

typedef struct cli_library {
    cli_root *r;
    int n;
    char *db_dir; /* the database folder's real path: never part of the library */
} cli_library;

/* Reads the roots of db and stats each. Free with cli_library_free. */
cdb_status cli_library_load(struct cdb_db *db, cli_library *lib /* OUT */);
void cli_library_free(cli_library *lib);
const cli_root *cli_library_root(const cli_library *lib, int64_t root_id); /* NULL: unknown */
/* 1 when the real path of `path` (a symbolic link, say) is in the library at its own
** path: inside a folder root, not under a hidden folder, not in the database folder;
** or a file root. */
int cli_library_covers(const cli_library *lib, const char *path);
/* 1 when the file recorded at path (root root_id, st_dev file_dev, 0 = unknown) is
** gone from a place that is still there: deleted, moved or renamed. 0 when it is
** there, or when its place is not reachable: the nearest folder above it that
** exists is on another device than the file was (a drive or share not mounted). */
int cli_library_gone(const cli_library *lib, int64_t root_id, const char *path,
                     uint64_t file_dev);
/* Folds every root that lies inside a folder root into it (cdb_db_root_adopt; legacy
** databases could record both), then reloads lib. *n_adopted (may be NULL). */
cdb_status cli_library_normalize(struct cdb_db *db, int64_t model_id, cli_library *lib,
                                 int *n_adopted /* OUT */);

/* What `ingest PATH...` scans: each PATH (real, absolute; a folder or a regular
** file) is the whole of a recorded root, a part of one, or a new root; a new folder
** root adopts the roots inside it. follow, no_exif: -1 keep the roots' setting, else
** record it on every root named. Duplicates and PATHs inside another PATH are
** dropped; a PATH hidden inside a recorded folder is refused (CDB_INVALID).
** *targets: heap array of n_targets, strings owned by it (cli_targets_free). */
cdb_status cli_library_resolve(struct cdb_db *db, int64_t model_id, cli_library *lib,
                               char *const *paths, const int *is_file, int n, int follow,
                               int no_exif, cli_ingest_root **targets /* OUT */,
                               int *n_targets /* OUT */);
/* Every root, whole (reindex). */
cdb_status cli_library_all(const cli_library *lib, cli_ingest_root **targets /* OUT */,
                           int *n_targets /* OUT */);
void cli_targets_free(cli_ingest_root *t, int n);

/* ---- opening a database and its model (session.c) ------------------------------------ */

/* Opens the database of --db/CLIPDB_DB/./clipdb as writer or reader (wait: wait for
** the writer lock). On failure prints the error and a hint; returns a CLI_EXIT_*. */
int cli_open_db(const char *flag_db, int writer, int wait, struct cdb_db **out /* OUT */);
/* The model for a command: --model (registered in the database when register_it,
** else it must be known there) or the database's default model. Prints errors.
** *is_default: the model is the database's default. Returns a CLI_EXIT_*. */
int cli_db_model(struct cdb_db *db, const char *model_flag, int vision, int text, int device,
                 int register_it, struct cdb_model **out /* OUT */, int64_t *model_id /* OUT */,
                 int *is_default /* OUT */);
/* Loads the registered model dm from the path recorded with it (or $CLIPDB_MODEL /
** the bundled model when that has the same weights). quiet: print nothing when it
** cannot be found. Returns a CLI_EXIT_*. */
int cli_load_db_model(struct cdb_db *db, const cdb_db_model *dm, int vision, int text, int device,
                      int quiet, struct cdb_model **out /* OUT */);
/* A registered model named by number, name, weights hash (or 6+ leading hex
** digits), or a model path (its weights hash). Prints errors; returns a CLI_EXIT_*. */
int cli_find_db_model(struct cdb_db *db, const char *spec, cdb_db_model *out /* OUT */);
/* Threads for models opened by cli_db_model (0: the encoder's default). A search
** of one short text runs fastest on one thread: no OpenMP team to wake. */
void cli_set_model_threads(int n);
/* The info JSON stored with a model at registration (path, name, hash, dims); free(). */
char *cli_model_info_json(const char *path, const struct cdb_model *m);
/* Runs the pipeline over the targets with the writer handle db (opened on db_dir),
** encoding with model (registered as model_id); lib: the database's roots (link
** coverage, move sources). Fills *sum. Returns CDB_OK also when files failed
** (sum->errors, sum->retry) or on Ctrl-C (sum->interrupted); an error (message in
** cdb_errmsg) only when the run itself failed. */
cdb_status cli_pipeline_run(struct cdb_db *db, const char *db_dir, struct cdb_model *model,
                            int64_t model_id, const cli_library *lib,
                            const cli_ingest_root *roots, int n_roots,
                            const cli_ingest_opts *o, cli_ingest_summary *sum /* OUT */);

/* ---- index glue (indexing.c; needs db/ and index/) --------------------------------- */
#if CDB_CLI_HAVE_DB && CDB_CLI_HAVE_INDEX
#include "index/index.h"

/* <db>/index/model_<id>.cdbidx */
void cli_index_path(struct cdb_db *db, int64_t model_id, char *buf, size_t size);

typedef struct cli_fetch_ctx {
    struct cdb_db *db;
    int64_t model_id;
    int dim;
} cli_fetch_ctx;
/* cdb_index_fetch_fn over the store (ctx: cli_fetch_ctx). */
cdb_status cli_fetch_vectors(void *ctx, const int64_t *ids, size_t n, uint16_t *vecs,
                             uint8_t *found);
/* Every stored vector of the model, fp16, in id order. Heap arrays (free()). */
cdb_status cli_read_all_vectors(struct cdb_db *db, int64_t model_id, int dim,
                                int64_t **ids /* OUT */, uint16_t **vecs /* OUT */,
                                int64_t *n /* OUT */);
/* Sorted, distinct ids whose vectors were added (removed = 0) or removed (1)
** after generation `since`. Heap (free()). */
cdb_status cli_ids_since(struct cdb_db *db, int64_t model_id, int64_t since, int removed,
                         int64_t **ids /* OUT */, size_t *n /* OUT */);

typedef struct cli_index_result {
    int action;        /* 0 none (up to date), 1 added, 2 rebuilt */
    int64_t n_vectors; /* covered after */
    int64_t n_added;
    int64_t n_removed; /* deleted or changed vectors taken out */
    double seconds;
    char why[256];
    cdb_index_info info;
} cli_index_result;
/* Searches the model's vectors for q (dim floats): the index's candidates (when
** there is an index) plus an exact pass over vectors stored since it was built
** (over all vectors when there is none), re-ranked exactly. out: want slots;
** *n_out filled. Prints errors; returns a CLI_EXIT_* (cmd_search.c). */
int cli_search_vector(struct cdb_db *db, int64_t model_id, int dim, const float *q, int want,
                      float min_score, cdb_hit *out /* OUT */, int *n_out /* OUT */);
/* Builds the model's index from the store and saves it (kind: cdb_index_kind). */
cdb_status cli_index_build(struct cdb_db *db, int64_t model_id, int dim, int kind,
                           cli_index_result *res /* OUT */);
/* Brings the index up to date (adds or rebuilds, as the index module decides;
** creates it when missing and there are vectors). */
cdb_status cli_index_refresh(struct cdb_db *db, int64_t model_id, int dim, int force_rebuild,
                             cli_index_result *res /* OUT */);
#endif

/* ---- the deep check (deep.c) --------------------------------------------------------- */

/* Fraction of the files `verify --deep` re-encodes by default. */
#define CLI_DEEP_SAMPLE 0.05
/* Re-reads every ok file and compares its bytes with the recorded hash, and
** re-encodes a sample (the files whose id hashes below `sample`, the same sample
** every time) with model m (the database's model_id), comparing the vector with the
** stored one: equal within one fp16 ulp per element, or 2^-20 near zero (the vector
** may have been stored by another ISA path or by the CUDA backend, which round
** differently; on one CPU path the encoder is batch-invariant). Problems are added to r
** (CDB_DB_FILE_CHANGED, CDB_DB_VECTOR_MISMATCH, each naming the path);
** informational counts go to *info (may be NULL). Files whose stat changed since
** they were stored are stale, not problems (the next reindex updates them). */
typedef struct cli_deep_info {
    int64_t n_files, n_hashed, n_encoded, n_stale, n_gone, n_unreadable;
    int64_t max_ulp; /* largest element difference among the re-encoded vectors */
} cli_deep_info;
cdb_status cli_deep_check(struct cdb_db *db, struct cdb_model *m, int64_t model_id,
                          double sample, cdb_db_report *r, cli_deep_info *info /* OUT */);

/* ---- search query language (query.c) ----------------------------------------------- */

typedef struct cli_term {
    char *text;    /* heap */
    double weight; /* +1, -1, or an explicit "2*" weight with its sign */
} cli_term;
/* Parses "beach + sunset - people" / "2*beach" (see query.c). 0, or -1 with err set.
** *terms: free with cli_query_free. */
int cli_query_parse(const char *q, cli_term **terms /* OUT */, int *n_terms /* OUT */,
                    char *err, size_t errsz);
void cli_query_free(cli_term *terms, int n);

/* ---- .npy files (npy.c) ------------------------------------------------------------
** descr: "<f4" (float32), "<f2" (float16), "<i8" (int64). Little-endian hosts only.
** Return 0, or -1 with errno set. */
int cli_npy_header(FILE *f, const char *descr, const int64_t *shape, int ndim);
int cli_npy_write(const char *path, const char *descr, const int64_t *shape, int ndim,
                  const void *data, size_t elem_bytes);

/* ---- configuration (config.c) ------------------------------------------------------ */

/* The database directory: --db, then CLIPDB_DB, then ./clipdb. *source names which. */
const char *cli_db_path(const char *flag_value, const char **source /* OUT, may be NULL */);
/* --db given before the command (`clipdb --db X stats`); a command's own --db wins. */
void cli_set_global_db(const char *dir);
int cli_global_db_given(void); /* 1 when --db came before the command */
/* The model: --model, then CLIPDB_MODEL, then the bundled default (first folder
** under <source>/models, then the installed share dir). NULL when none found.
** The result stays valid until the next call. */
const char *cli_model_path(const char *flag_value, const char **source /* OUT */);
/* --device, then CLIPDB_DEVICE, then auto. Returns 0 (auto), 1 (cpu), 2 (cuda) as
** cdb_device_kind, or -1 when the value is not one of auto|cpu|cuda. */
int cli_device(const char *flag_value, const char **text /* OUT */);

/* ---- signals (signals.c) ----------------------------------------------------------- */

/* Installs the SIGINT/SIGTERM handler: the first signal sets the flag (pipelines
** finish the current batch and commit); a second one exits at once (130). */
void cli_signals_install(void);
int cli_interrupted(void);

/* ---- help texts (usage.c) ---------------------------------------------------------- */

/* The full --help text of a command (NULL: top level), or NULL if unknown. */
const char *cli_help_text(const char *cmd);
/* Prints the "usage:" lines of the help text (up to the first blank line). */
void cli_print_usage_lines(FILE *f, const char *cmd);

/* ---- commands ---------------------------------------------------------------------- */

/* Each gets argv after the command name; returns a CLI_EXIT_* code. */
typedef int (*cli_cmd_fn)(int argc, char **argv);

int cli_cmd_version(int argc, char **argv);
int cli_cmd_models(int argc, char **argv);
int cli_cmd_tokenize(int argc, char **argv);
int cli_cmd_embed(int argc, char **argv);
int cli_cmd_preprocess(int argc, char **argv);
int cli_cmd_init(int argc, char **argv);
int cli_cmd_ingest(int argc, char **argv);
int cli_cmd_reindex(int argc, char **argv);
int cli_cmd_search(int argc, char **argv);
int cli_cmd_index(int argc, char **argv);
int cli_cmd_stats(int argc, char **argv);
int cli_cmd_verify(int argc, char **argv);
int cli_cmd_errors(int argc, char **argv);
int cli_cmd_export(int argc, char **argv);
int cli_cmd_folders(int argc, char **argv);
int cli_cmd_forget(int argc, char **argv);
int cli_cmd_move(int argc, char **argv);
/* `models` with a database: lists its vector sets, or (make_default) makes one the
** default once its set is complete (cmd_admin.c). */
int cli_models_db(const char *db_flag, const char *make_default, int json);
int cli_cmd_demo(int argc, char **argv);

/* Common prologue of every command: parses argv with spec, handles --help (prints
** the help, returns CLI_EXIT_OK via *exit_code) and --quiet. Returns 1 when the
** command should go on, 0 when it should return *exit_code. */
int cli_begin(const char *cmd, cli_args *a, const cli_optspec *spec, int argc, char **argv,
              int *exit_code /* OUT */);

#endif /* CDB_CLI_H */
