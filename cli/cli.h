/*
** cli.h: private declarations shared by the files of the clipdb program (cli/).
** Not a module contract: nothing outside cli/ includes it.
**
** - args.c:    the option parser (long/short options, repeated options, `--`).
** - output.c:  error and hint lines, colors, the progress line, JSON writing.
** - config.c:  where the database and the model are (flags, environment, defaults).
** - signals.c: the SIGINT flag that long-running pipelines poll.
** - usage.c:   the help text of every command (the golden files are their spec).
** - session.c: opening the engine (engine/engine.h) with the CLI's messages, hints and
**              events (progress line, warnings, Ctrl-C).
** - cmd_parts.c: `merge` and `slurm ingest` (a library ingested in parts).
** - cmd_hub.c: `models get` and the hf:ORG/NAME model paths (the Hugging Face Hub).
** - cmd_*.c:   one file per group of subcommands; main.c dispatches to them. Every
**              database command is a thin layer over the engine: parse, call, print.
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
#include "engine/engine.h"
#include "output/output.h"

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
#define CLI_MAX_PARTS 100000 /* --part I/N, slurm --parts N: the largest N */

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
    int unknown_argi;                /* argv index of the unknown option parsing failed
                                        at (e.g. a global option after the command);
                                        -1 when none */
} cli_args;

/* Parses argv[0..argc) (argv[0] is the first argument, not the program name).
** Returns 0, or -1 with a message in a->err ("unknown option --foo", "option -k
** needs a value", "option --quiet takes no value"). Free with cdb_cli_args_free. */
int cdb_cli_args_parse(cli_args *a, const cli_optspec *spec, int argc, char **argv);
void cdb_cli_args_free(cli_args *a);

/* Lookups by long name. An unknown name is a programming error (asserts). */
int cdb_cli_has(const cli_args *a, const char *name);            /* occurrence count */
const char *cdb_cli_get(const cli_args *a, const char *name);    /* last value or NULL */
int cdb_cli_get_all(const cli_args *a, const char *name, const char ***vals /* OUT */);

/* Strict numeric parsing of an option value; 0 on success, -1 with a->err set
** ("--batch: expected an integer in [1, 4096], got 'x'"). Absent: *out = def. */
int cdb_cli_get_int(cli_args *a, const char *name, long def, long lo, long hi, long *out /* OUT */);
int cdb_cli_get_double(cli_args *a, const char *name, double def, double lo, double hi,
                       double *out /* OUT */);
/* Value must be one of the NULL-terminated choices; returns its index, def when
** absent, -1 with a->err set when not one of them. */
int cdb_cli_get_choice(cli_args *a, const char *name, const char *const *choices, int def);

/* ---- output (output.c) ------------------------------------------------------------- */

/* Set once by main: colors on stderr when it is a terminal and NO_COLOR is unset. */
void cdb_cli_output_init(int quiet);
/* Called once by main: the library's log lines go through the CLI's (escaped as
** cdb_cli_esc does), and with on every stderr line (errors, warnings, hints, the log)
** starts with the local time, "2026-12-01T03:00:05+0100 ": --log-time or
** CLIPDB_LOG_TIME=1 (cron logs). */
void cdb_cli_output_log_time(int on);
/* s as human output shows it, so that a file name cannot steer the terminal or forge a
** line: C0 controls, DEL, C1 controls (U+0080..U+009F), line and paragraph separators
** and bidirectional controls, and bytes that are not valid UTF-8, each byte as \xHH
** (lowercase; \n, \r, \t by name); everything else, backslashes too, as it is. s
** itself when it is printable ASCII; else a buffer of this thread's that stays valid
** for the next 7 calls (enough for one printf). Error, warning and hint lines and the
** library's log are escaped so by output.c itself. Machine output (--json, -0 and
** --paths0 lists, export files) never is: it keeps the exact bytes. */
const char *cdb_cli_esc(const char *s);
/* fflush(stdout), remembering why the first failed write failed (errno is gone by
** the time main reports it). 0 or -1. */
int cdb_cli_flush_stdout(void);
/* Remembers e (an errno; 0: EIO) as why a write to stdout failed, unless a reason is
** kept already: for a write that fails before the flush. main says it once, when the
** command returns ("cannot write to standard output (<why>)"). Returns -1. */
int cdb_cli_stdout_failed(int e);
/* The errno of the first failed cdb_cli_flush_stdout(), 0 if none. */
int cdb_cli_stdout_errno(void);
int cdb_cli_quiet(void);
int cdb_cli_stderr_is_tty(void);

/* `clipdb: error: <what> (<why>)`, why may be NULL; the leading contexts of why that
** what says already (the path it names) are left out (cdb_err_unsaid). Always returns
** CLI_EXIT_FAIL so callers can write `return cdb_cli_error(...)`. */
int cdb_cli_error(const char *why, const char *fmt, ...) CDB_PRINTF(2, 3);
/* `clipdb: error: <what> (<cdb_errmsg() or the status string>)`. */
int cdb_cli_error_status(cdb_status rc, const char *fmt, ...) CDB_PRINTF(2, 3);
/* `clipdb: warning: ...` */
void cdb_cli_warn(const char *fmt, ...) CDB_PRINTF(1, 2);
/* `hint: ...` under an error. */
void cdb_cli_hint(const char *fmt, ...) CDB_PRINTF(1, 2);
/* A usage error: the error line, the command's usage lines, a pointer to --help.
** Returns CLI_EXIT_USAGE. cmd may be NULL (top level). */
int cdb_cli_usage_error(const char *cmd, const char *fmt, ...) CDB_PRINTF(2, 3);

/* Progress: one live line on stderr, only when stderr is a terminal and not
** --quiet; redrawn at most 10 times a second. total < 0: not known yet. */
typedef struct cli_progress {
    const char *label;
    int64_t total, done, errors, skipped;
    int64_t t0_ns, last_draw_ns;
    int live;   /* drawing enabled */
    int drawn;  /* a line is on screen (needs clearing) */
} cli_progress;
void cdb_cli_progress_start(cli_progress *p, const char *label, int64_t total);
void cdb_cli_progress_update(cli_progress *p); /* redraws if due */
void cdb_cli_progress_end(cli_progress *p);    /* clears the live line */
/* Counts: cdb_out_fmt_count (output/output.h), "1,234". */
/* "1.2 s", "3 min 4 s" ... */
const char *cdb_cli_fmt_duration(double seconds, char *buf, size_t size);
/* "12.3 MB" */
const char *cdb_cli_fmt_bytes(int64_t n, char *buf, size_t size);

/* JSON: output/output.h's writer (cdb_json_*). A command's document on stdout starts
** with cdb_cli_json_init (cdb_json_init, and notes that a document was begun, which
** cdb_cli_json_failure needs). */
void cdb_cli_json_init(cdb_json *j, FILE *f, int pretty);
/* A command's JSON document on stdout: cdb_cli_json_init (pretty), its object begun, and
** its first key "command": command unless command is NULL. */
void cdb_cli_json_doc(cdb_json *j, const char *command);
/* A photo's metadata as keys of the open object: "taken", "taken_source", and what it
** records of "make", "model", "lens", "lat", "lon", "alt" (search --json, export). */
void cdb_cli_json_photo(cdb_json *j, const cdb_engine_photo *p);
/* --json on a failed run: cdb_cli_begin calls cdb_cli_json_requested(cmd) when a
** command that takes --json got it (also when its arguments are then refused), and
** main calls cdb_cli_json_failure(rc) when the command returns. A run that failed
** (rc != 0) without having begun a JSON document on stdout then prints one:
** {"command", "status": "error", "exit_code": rc, "message": the first error line
** (without "clipdb: error: "), "hint": the hint under it, when there was one}. */
void cdb_cli_json_requested(const char *cmd);
void cdb_cli_json_failure(int rc);

/* ---- the engine, as the CLI uses it (session.c) --------------------------------------
** Every database command runs over engine/engine.h. These helpers open it with the
** CLI's messages and hints, and turn the engine's events into the progress line,
** warnings and Ctrl-C. */

/* Opens the database of --db/CLIPDB_DB/./clipdb as writer (1) or reader (0) (wait: wait
** for the writer lock), or CLI_WRITER_IF_FREE: the writer when that opens at once, else
** a reader (another clipdb writes, or this user cannot), with the device and model
** threads given (threads 0: the encoder's default). On failure prints the error and a
** hint; returns a CLI_EXIT_*. */
#define CLI_WRITER_IF_FREE 2
int cdb_cli_engine_open(const char *flag_db, int writer, int wait, cdb_k_device device,
                        int model_threads, cdb_engine **out /* OUT */);
/* Databases given together (--db repeated): CLI_EXIT_OK, or the usage error of cmd
** printed when two of dirs[0..n) are one folder (its photos would count twice). */
int cdb_cli_dbs_distinct(const char *cmd, const char *const *dirs, int n);
/* Prints the engine's last failure (cdb_errmsg: "what (why)") and the hint its
** cdb_engine_errcode() calls for; arg fills hints that name something (the --model
** given, the database folder). Returns CLI_EXIT_USAGE for a query that cannot mean
** anything (malformed, or its terms cancel out), else CLI_EXIT_FAIL. */
int cdb_cli_engine_fail(const char *arg);
/* The hint for the engine's last failure alone (none for most codes). */
void cdb_cli_engine_hint(const char *arg);
/* The events every command passes to the engine: progress on stderr (a terminal only),
** warnings as `clipdb: warning:` lines, Ctrl-C as a stop. */
cdb_engine_events cdb_cli_engine_events(void);

/* ---- .npy files (npy.c) ------------------------------------------------------------
** descr: "<f4" (float32), "<f2" (float16), "<i8" (int64). Little-endian hosts only.
** Return 0, or -1 with errno set. cdb_cli_npy_write's path "-" is standard output; a
** failed write there is kept for main to report (cdb_cli_stdout_failed). */
int cdb_cli_npy_header(FILE *f, const char *descr, const int64_t *shape, int ndim);
int cdb_cli_npy_write(const char *path, const char *descr, const int64_t *shape, int ndim,
                      const void *data, size_t elem_bytes);

/* ---- configuration (config.c) ------------------------------------------------------ */

/* The database directory: --db, then CLIPDB_DB, then ./clipdb. *source names which. */
const char *cdb_cli_db_path(const char *flag_value, const char **source /* OUT, may be NULL */);
/* --db given before the command (`clipdb --db X stats`); a command's own --db wins. */
void cdb_cli_set_global_db(const char *dir);
int cdb_cli_global_db_given(void); /* 1 when --db came before the command */
/* The model: --model, then CLIPDB_MODEL, then the bundled default (first folder
** under <source>/models, then the installed share dir). NULL when none found.
** The result stays valid until the next call. */
const char *cdb_cli_model_path(const char *flag_value, const char **source /* OUT */);
/* 1 when model model_id of e's database is the bundled default model (the one
** cdb_cli_model_path falls back to, compared by weights hash), else 0. */
int cdb_cli_model_is_bundled(cdb_engine *e, int64_t model_id);
/* What a new user is told when the bundled model meets real photos (one line: the
** CLI's hint; the page says the same in its banner). */
#define CDB_CLI_BUNDLED_HINT                                                              \
    "the bundled model knows only generated shapes, not real photos: 'clipdb models get " \
    "ViT-B-16-SigLIP2' gets a real one"
/* The device: --device, then $CLIPDB_DEVICE, then auto, parsed by
** cdb_k_device_parse (auto, cpu, cuda, cuda:N; lowercase). CLI_EXIT_OK, or prints
** cmd's usage error (the value, where it came from, the accepted forms) and returns
** CLI_EXIT_USAGE. Whether the device exists is found out when a model is loaded. */
int cdb_cli_device(const char *cmd, const char *flag_value, cdb_k_device *out /* OUT */);
/* The CPU, for commands that encode nothing or only a query's text there. */
#define CLI_DEVICE_CPU ((cdb_k_device){CDB_K_DEVICE_CPU, 0})

/* ---- signals (signals.c) ----------------------------------------------------------- */

/* Installs the SIGINT/SIGTERM handler: the first signal sets the flag (pipelines
** finish the current batch and commit); a second one exits at once (130). */
void cdb_cli_signals_install(void);
int cdb_cli_interrupted(void);
/* What the first signal prints (a static string; the default speaks of batches). */
void cdb_cli_signals_message(const char *msg);

/* ---- help texts (usage.c) ---------------------------------------------------------- */

/* The full --help text of a command (NULL: top level), or NULL if unknown. */
const char *cdb_cli_help_text(const char *cmd);
/* Prints the "usage:" lines of the help text (up to the first blank line). */
void cdb_cli_print_usage_lines(FILE *f, const char *cmd);

/* ---- commands ---------------------------------------------------------------------- */

/* Each gets argv after the command name; returns a CLI_EXIT_* code. */
typedef int (*cli_cmd_fn)(int argc, char **argv);

int cdb_cli_cmd_models(int argc, char **argv);
int cdb_cli_cmd_tokenize(int argc, char **argv);
int cdb_cli_cmd_embed(int argc, char **argv);
int cdb_cli_cmd_preprocess(int argc, char **argv);
int cdb_cli_cmd_init(int argc, char **argv);
int cdb_cli_cmd_ingest(int argc, char **argv);
int cdb_cli_cmd_reindex(int argc, char **argv);
int cdb_cli_cmd_merge(int argc, char **argv);
int cdb_cli_cmd_slurm(int argc, char **argv);
/* `index train --out FILE PART...` and `index add-part --db PART --trained FILE`: the steps
** of an index built in parts on a cluster (cmd_parts.c), from `index`'s parsed arguments. */
int cdb_cli_index_train(cli_args *a, cdb_engine_index_kind kind);
int cdb_cli_index_add_part(cli_args *a);
int cdb_cli_cmd_search(int argc, char **argv);
int cdb_cli_cmd_index(int argc, char **argv);
int cdb_cli_cmd_stats(int argc, char **argv);
int cdb_cli_cmd_verify(int argc, char **argv);
int cdb_cli_cmd_errors(int argc, char **argv);
int cdb_cli_cmd_export(int argc, char **argv);
int cdb_cli_cmd_folders(int argc, char **argv);
int cdb_cli_cmd_forget(int argc, char **argv);
int cdb_cli_cmd_move(int argc, char **argv);
int cdb_cli_cmd_duplicates(int argc, char **argv);
/* `models` with a database: lists its vector sets, or (make_default) makes one the
** default once its set is complete (cmd_admin.c). */
int cdb_cli_models_db(const char *db_flag, const char *make_default, int json);
/* `models get` (cmd_hub.c): a model from the Hugging Face Hub, or --list. */
int cdb_cli_cmd_models_get(int argc, char **argv);
/* A model path as given (source: "--model", "CLIPDB_MODEL"): "hf:ORG/NAME[@REV]" (or
** "hf:SHORT") is the snapshot folder in the Hugging Face cache, fetched when missing
** (a progress bar on a terminal); anything else is returned as it is. NULL after
** printing the error and its hint. The result stays valid until the next call. */
const char *cdb_cli_resolve_model(const char *given, const char *source);
int cdb_cli_cmd_demo(int argc, char **argv);
int cdb_cli_cmd_serve(int argc, char **argv);

/* Common prologue of every command: parses argv with spec, handles --help (prints
** the help, returns CLI_EXIT_OK via *exit_code) and --quiet. Returns 1 when the
** command should go on, 0 when it should return *exit_code. */
int cdb_cli_begin(const char *cmd, cli_args *a, const cli_optspec *spec, int argc, char **argv,
                  int *exit_code /* OUT */);

#endif /* CDB_CLI_H */
