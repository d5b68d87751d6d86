/*
** session.c: what most database commands do first and last, over engine/engine.h:
** open the database (writer or reader) with the right error and hint for each
** failure (no database here, held by another writer, written by a newer clipdb,
** ...), print an engine failure with the hint its detail code calls for, and hand
** the engine the CLI's events: the live progress line (stderr, a terminal only),
** warnings, and Ctrl-C as a request to stop after the current batch.
*/
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"

int cdb_cli_engine_open(const char *flag_db, int writer, int wait, cdb_k_device device,
                        int model_threads, cdb_engine **out) {
    const char *src, *msrc;
    const char *dir = cdb_cli_db_path(flag_db, &src);
    cdb_engine_params p = cdb_engine_params_default();
    cdb_status rc;
    *out = NULL;
    p.writer = writer;
    p.lock_wait_ms = wait ? -1 : 0;
    p.device = device;
    p.model_threads = model_threads;
    /* a registered model whose recorded path moved: $CLIPDB_MODEL or the bundled one */
    p.fallback_model = cdb_cli_model_path(NULL, &msrc);
    p.events = cdb_cli_engine_events();
    if (writer == CLI_WRITER_IF_FREE) { /* the writer, else (busy, read-only) a reader */
        p.writer = 1;
        p.lock_wait_ms = 0;
        if (cdb_engine_open(dir, &p, out) == CDB_OK) return CLI_EXIT_OK;
        p.writer = 0;
    }
    rc = cdb_engine_open(dir, &p, out);
    if (rc == CDB_OK) return CLI_EXIT_OK;
    if (rc == CDB_NOTFOUND) {
        struct stat sb;
        cdb_cli_error(strcmp(src, "default") ? src : "the default is ./clipdb",
                      "no database at %s", dir);
        if (stat(dir, &sb) == 0 && !S_ISDIR(sb.st_mode)) { /* init there would fail too */
            cdb_cli_hint("%s is a file: a database is a folder (--db DIR, e.g. --db photos.clipdb)",
                         dir);
            return CLI_EXIT_FAIL;
        }
        cdb_cli_hint("run 'clipdb init%s%s' to create one, or pass --db DIR",
                     strcmp(src, "default") ? " --db " : "", strcmp(src, "default") ? dir : "");
        return CLI_EXIT_FAIL;
    }
    if (rc == CDB_BUSY) {
        int pid = 0, held = 0;
        cdb_cli_error_status(rc, "the database %s is being written by another clipdb", dir);
        cdb_engine_lock_info(dir, &pid, &held);
        if (pid) cdb_cli_hint("process %d holds the lock; pass --wait to wait for it", pid);
        else cdb_cli_hint("pass --wait to wait for the other writer");
        return CLI_EXIT_FAIL;
    }
    if (cdb_engine_errcode() == CDB_ENGINE_E_READ_ONLY) {
        cdb_cli_error(NULL, "%s", cdb_errmsg());
        cdb_cli_engine_hint(NULL);
        return CLI_EXIT_FAIL;
    }
    if (rc == CDB_VERSION) {
        cdb_cli_error_status(rc, "cannot open the database %s", dir);
        cdb_cli_hint("it was written by a newer clipdb (or needs an upgrade a writer does first)");
        return CLI_EXIT_FAIL;
    }
    return cdb_cli_error_status(rc, "cannot open the database %s", dir);
}

int cdb_cli_dbs_distinct(const char *cmd, const char *const *dirs, int n) {
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++) {
            char a[PATH_MAX], b[PATH_MAX];
            if (realpath(dirs[i], a) && realpath(dirs[j], b) && !strcmp(a, b))
                return cdb_cli_usage_error(cmd, "--db %s and --db %s are one database", dirs[i],
                                           dirs[j]);
        }
    return CLI_EXIT_OK;
}

#define FREE_SPACE_HINT \
    "free space on the disk that holds the database, then run the same command again: " \
    "what was committed is kept, the rest is redone"

void cdb_cli_engine_hint(const char *arg) {
    switch (cdb_engine_errcode()) {
    case CDB_ENGINE_E_NOT_INITIALIZED:
        cdb_cli_hint("run 'clipdb init' (it binds the database to a model)");
        break;
    case CDB_ENGINE_E_WEIGHTS_MISSING:
        cdb_cli_hint("pass --model PATH (the same weights the database was created with)");
        break;
    case CDB_ENGINE_E_MODEL_NOT_IN_DB:
        cdb_cli_hint("run 'clipdb ingest --model %s PATH...' first, or drop --model",
                     arg ? arg : "");
        break;
    case CDB_ENGINE_E_MODEL_AMBIGUOUS:
        cdb_cli_hint("name it by its number or full hash ('clipdb stats' lists them)");
        break;
    case CDB_ENGINE_E_MODEL_UNKNOWN:
        cdb_cli_hint("'clipdb stats' lists the database's models");
        break;
    case CDB_ENGINE_E_QUERY_ZERO: cdb_cli_hint("the terms may cancel out (e.g. \"a - a\")"); break;
    case CDB_ENGINE_E_DISK_FULL: cdb_cli_hint(FREE_SPACE_HINT); break;
    case CDB_ENGINE_E_PATH: cdb_cli_hint("nothing was ingested: every PATH must exist"); break;
    case CDB_ENGINE_E_EXISTS:
        cdb_cli_hint("use it as it is ('clipdb stats --db %s'), or choose another --db",
                     arg ? arg : "");
        break;
    case CDB_ENGINE_E_SET_INCOMPLETE:
        cdb_cli_hint("run 'clipdb reindex --repair' to complete its set first");
        break;
    case CDB_ENGINE_E_NOT_A_ROOT: cdb_cli_hint("'clipdb folders' lists them"); break;
    case CDB_ENGINE_E_READ_ONLY:
        cdb_cli_hint("reading it works (search, stats, verify, export); to write, run as the "
                     "user that owns it, or give this user write access to its folder and files");
        break;
    case CDB_ENGINE_E_MOVE_NOTHING:
        cdb_cli_hint("check the paths (NEW is where the same files are now)");
        break;
    case CDB_ENGINE_E_MODEL_MISMATCH:
        cdb_cli_hint("databases searched together need vectors of one model: pass --model "
                     "PATH when each holds it beside others ('clipdb stats' lists them)");
        break;
    default: break;
    }
}

int cdb_cli_engine_fail(const char *arg) {
    const char *m = cdb_errmsg();
    cdb_engine_err code = cdb_engine_errcode();
    cdb_cli_error(NULL, "%s", m && *m ? m : "failed");
    cdb_cli_engine_hint(arg);
    /* a query that cannot mean anything is the caller's argument, like a bad option */
    return code == CDB_ENGINE_E_QUERY || code == CDB_ENGINE_E_QUERY_ZERO ? CLI_EXIT_USAGE
                                                                         : CLI_EXIT_FAIL;
}

/* ---- events ------------------------------------------------------------------------ */

static cli_progress g_prog; /* the one live line (commands run one at a time) */

static void on_progress(void *ud, const cdb_engine_progress *p) {
    (void)ud;
    switch (p->phase) {
    case CDB_ENGINE_PROGRESS_START: cdb_cli_progress_start(&g_prog, p->label, p->total); break;
    case CDB_ENGINE_PROGRESS_UPDATE:
        g_prog.done = p->done;
        g_prog.total = p->total;
        g_prog.errors = p->errors;
        cdb_cli_progress_update(&g_prog);
        break;
    case CDB_ENGINE_PROGRESS_END: cdb_cli_progress_end(&g_prog); break;
    }
}

static void on_warn(void *ud, const char *msg) {
    (void)ud;
    cdb_cli_progress_end(&g_prog); /* the live line is cleared first, redrawn by the next update */
    cdb_cli_warn("%s", msg);
}

static int on_stop(void *ud) {
    (void)ud;
    return cdb_cli_interrupted();
}

cdb_engine_events cdb_cli_engine_events(void) {
    cdb_engine_events ev;
    memset(&ev, 0, sizeof ev);
    ev.warn = on_warn;
    ev.progress = on_progress;
    ev.should_stop = on_stop;
    ev.count_first = cdb_cli_stderr_is_tty() && !cdb_cli_quiet(); /* a live line: show the total */
    return ev;
}
