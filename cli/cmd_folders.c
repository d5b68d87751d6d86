/*
** cmd_folders.c: managing the library's roots (the folders and single files
** ingested): `folders` lists them with their counts and last scan, `forget PATH`
** removes a root with its files and vectors and gives the space back, `move OLD
** NEW` tells clipdb a library moved (paths rewritten, vectors kept). The library
** model they act on: engine/library/folders.c, engine/library/library.c, db/roots.c.
*/
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"

/* ---- folders --------------------------------------------------------------------------- */

static void fmt_time(int64_t ns, char *buf, size_t size) {
    time_t t = (time_t)(ns / 1000000000LL);
    struct tm tm;
    if (!ns || !localtime_r(&t, &tm) || !strftime(buf, size, "%Y-%m-%d %H:%M", &tm))
        snprintf(buf, size, "never");
}


/* key: an array of objects {"path" (the path rule), "reason" when reasons is not NULL}. */
static void json_paths(cdb_json *j, const char *key, char *const *paths, char *const *reasons,
                       int n) {
    cdb_json_key(j, key);
    cdb_json_begin_array(j);
    for (int i = 0; i < n; i++) {
        cdb_json_begin_object(j);
        cdb_json_path(j, "path", paths[i]);
        if (reasons) {
            cdb_json_key(j, "reason");
            cdb_json_str(j, reasons[i]);
        }
        cdb_json_end_object(j);
    }
    cdb_json_end_array(j);
}
static void print_folder(const cdb_engine_folder *f, cdb_json *j) {
    char when[40], b[4][32];
    int64_t problems = f->errors + f->to_retry + f->walk_problems;
    fmt_time(f->scanned_ns, when, sizeof when);
    if (j) {
        cdb_json_begin_object(j);
        cdb_json_key(j, "id"); cdb_json_int(j, f->id);
        cdb_json_path(j, "path", f->path);
        cdb_json_key(j, "kind"); cdb_json_str(j, f->is_file ? "file" : "folder");
        cdb_json_key(j, "status"); cdb_json_str(j, f->status);
        cdb_json_key(j, "files"); cdb_json_int(j, f->files);
        cdb_json_key(j, "ok"); cdb_json_int(j, f->ok);
        cdb_json_key(j, "errors"); cdb_json_int(j, f->errors);
        cdb_json_key(j, "to_retry"); cdb_json_int(j, f->to_retry);
        cdb_json_key(j, "walk_problems"); cdb_json_int(j, f->walk_problems);
        cdb_json_key(j, "vectors"); cdb_json_int(j, f->vectors);
        cdb_json_key(j, "follow_symlinks"); cdb_json_bool(j, f->follow_symlinks);
        cdb_json_key(j, "exif"); cdb_json_bool(j, !f->no_exif);
        cdb_json_key(j, "last_scan_ns");
        if (f->scanned_ns) cdb_json_int(j, f->scanned_ns);
        else cdb_json_null(j);
        cdb_json_key(j, "excludes");
        cdb_json_begin_array(j);
        for (int i = 0; i < f->n_excludes; i++) {
            char *kind = f->excludes[i], *base = strchr(kind, '\t'), *pat = strrchr(kind, '\t');
            cdb_json_begin_object(j);
            cdb_json_key(j, "kind");
            cdb_json_strn(j, kind, (size_t)(base - kind));
            *pat = '\0'; /* base as a string of its own; both hold a path's bytes */
            cdb_json_path(j, "base", base + 1);
            *pat = '\t';
            cdb_json_path(j, "pattern", pat + 1);
            cdb_json_end_object(j);
        }
        cdb_json_end_array(j);
        json_paths(j, "ignore_files", f->ignore_files, NULL, f->n_ignore_files);
        json_paths(j, "not_walked", f->not_walked, f->not_walked_why, f->n_not_walked);
        cdb_json_end_object(j);
    } else {
        printf("%-8s %-6s %9s %9s %9s  %-16s  %s%s%s\n", f->status, f->is_file ? "file" : "folder",
               cdb_out_fmt_count(f->files, b[0], 32), cdb_out_fmt_count(f->vectors, b[1], 32),
               cdb_out_fmt_count(problems, b[2], 32), when, cdb_cli_esc(f->path),
               f->follow_symlinks ? "  (follows links)" : "",
               f->no_exif ? "  (EXIF orientation ignored)" : "");
        for (int i = 0; i < f->n_excludes; i++) {
            char *kind = f->excludes[i], *base = strchr(kind, '\t'), *pat = strrchr(kind, '\t');
            *pat = '\0'; /* base and pattern as strings of their own, for cdb_cli_esc */
            printf("%*s left out: %s%s%s  (%.*s)\n", 16, "", cdb_cli_esc(pat + 1),
                   base + 1 == pat ? "" : "  below ", cdb_cli_esc(base + 1), (int)(base - kind),
                   kind);
            *pat = '\t';
        }
        for (int i = 0; i < f->n_ignore_files; i++)
            printf("%*s left out: the rules in %s  (.clipdbignore)\n", 16, "",
                   cdb_cli_esc(f->ignore_files[i]));
        for (int i = 0; i < f->n_not_walked; i++)
            printf("%*s not walked: %s, since %s\n", 16, "", cdb_cli_esc(f->not_walked[i]),
                   cdb_cli_esc(f->not_walked_why[i]));
    }
}

int cdb_cli_cmd_folders(int argc, char **argv) {
    static const cli_optspec spec[] = {{"db", 0, CLI_VALUE}, {"json", 0, CLI_FLAG},
                                       {"help", 'h', CLI_FLAG}, {0}};
    cli_args a;
    int rc, n = 0, json;
    cdb_engine *e = NULL;
    cdb_engine_folder *f = NULL;
    cdb_json j;
    if (!cdb_cli_begin("folders", &a, spec, argc, argv, &rc)) goto done;
    if (a.n_pos) {
        rc = cdb_cli_usage_error("folders", "unexpected argument '%s'", a.pos[0]);
        goto done;
    }
    if ((rc = cdb_cli_engine_open(cdb_cli_get(&a, "db"), 0, 0, CLI_DEVICE_CPU, 0, &e)) !=
        CLI_EXIT_OK)
        goto done;
    json = cdb_cli_has(&a, "json") > 0;
    cdb_status st = cdb_engine_folders(e, &f, &n);
    if (json) {
        cdb_cli_json_doc(&j, NULL);
        cdb_json_key(&j, "folders");
        cdb_json_begin_array(&j);
    } else {
        printf("%-8s %-6s %9s %9s %9s  %-16s  %s\n", "status", "kind", "files", "vectors",
               "problems", "last scan", "path");
    }
    for (int i = 0; st == CDB_OK && i < n; i++) print_folder(&f[i], json ? &j : NULL);
    if (json) {
        cdb_json_end_array(&j);
        cdb_json_end_object(&j);
        cdb_json_done(&j);
    }
    rc = st == CDB_OK ? CLI_EXIT_OK : cdb_cli_engine_fail(NULL);
done:
    cdb_engine_folders_free(f, n);
    cdb_engine_close(e);
    cdb_cli_args_free(&a);
    return rc;
}

/* ---- forget ------------------------------------------------------------------------------ */

/* A path that is not a root of its own: why, and what to do (cmd: forget or move). */
static int not_a_root(const char *cmd, const char *container) {
    cdb_cli_engine_fail(NULL);
    if (cdb_engine_errcode() != CDB_ENGINE_E_PART_OF_ROOT) return CLI_EXIT_FAIL;
    if (!strcmp(cmd, "move"))
        cdb_cli_hint("moves inside %s are found by 'clipdb reindex'; to move this part "
                 "elsewhere, ingest the new place: the vectors are kept",
                 container);
    else if (!strstr(cdb_errmsg(), " is a file inside ")) /* a photo: the message says how */
        cdb_cli_hint("'clipdb forget %s' forgets the whole folder", container);
    return CLI_EXIT_FAIL;
}

/* forget and move change the catalog: their options, and the writer they open (waiting
** for another writer with --wait). */
static const cli_optspec k_edit_spec[] = {{"db", 0, CLI_VALUE},  {"wait", 0, CLI_FLAG},
                                          {"quiet", 'q', CLI_FLAG}, {"help", 'h', CLI_FLAG}, {0}};

static int open_writer(cli_args *a, cdb_engine **e) {
    return cdb_cli_engine_open(cdb_cli_get(a, "db"), 1, cdb_cli_has(a, "wait") > 0,
                               CLI_DEVICE_CPU, 0, e);
}

int cdb_cli_cmd_forget(int argc, char **argv) {
    cli_args a;
    int rc;
    cdb_engine *e = NULL;
    cdb_engine_forget_report r;
    char b[2][32];
    cdb_status st;
    memset(&r, 0, sizeof r);
    if (!cdb_cli_begin("forget", &a, k_edit_spec, argc, argv, &rc)) goto done;
    if (a.n_pos != 1) {
        rc = cdb_cli_usage_error("forget", a.n_pos ? "one PATH at a time" : "no PATH given");
        goto done;
    }
    if ((rc = open_writer(&a, &e)) != CLI_EXIT_OK) goto done;
    st = cdb_engine_forget(e, a.pos[0], &r);
    for (int i = 0; i < r.n_roots && !cdb_cli_quiet() && r.subfolder; i++)
        printf("Forgot %s (a folder in %s): %s file%s and %s; reindex and ingest of %s "
               "leave it out from now on\n", cdb_cli_esc(r.roots[i].path),
               cdb_cli_esc(r.container), cdb_out_fmt_count(r.roots[i].files, b[0], 32),
               r.roots[i].files == 1 ? "" : "s",
               r.roots[i].files == 1 ? "its vectors" : "their vectors", cdb_cli_esc(r.container));
    for (int i = 0; i < r.n_roots && !cdb_cli_quiet() && !r.subfolder; i++)
        printf("Forgot %s (%s): %s file%s and %s\n", cdb_cli_esc(r.roots[i].path),
               r.roots[i].is_file ? "file" : "folder",
               cdb_out_fmt_count(r.roots[i].files, b[0], 32), r.roots[i].files == 1 ? "" : "s",
               r.roots[i].files == 1 ? "its vectors" : "their vectors");
    if (st != CDB_OK) {
        rc = cdb_engine_errcode() == CDB_ENGINE_E_PART_OF_ROOT ||
                     cdb_engine_errcode() == CDB_ENGINE_E_NOT_A_ROOT
                 ? not_a_root("forget", r.container)
                 : cdb_cli_engine_fail(NULL);
        goto done;
    }
    rc = r.index_refresh_failed ? CLI_EXIT_PARTIAL : CLI_EXIT_OK;
    if (!cdb_cli_quiet() && r.already && r.left_out_by[0])
        printf("%s is left out already: %s was forgotten; nothing to do\n",
               cdb_cli_esc(a.pos[0]), cdb_cli_esc(r.left_out_by));
    else if (!cdb_cli_quiet() && r.already && r.container[0])
        printf("%s is left out already by an --exclude rule of %s; nothing to do\n",
               cdb_cli_esc(a.pos[0]), cdb_cli_esc(r.container));
    else if (!cdb_cli_quiet() && r.already)
        printf("%s was forgotten already: nothing to do\n", cdb_cli_esc(a.pos[0]));
    if (!cdb_cli_quiet() && r.n_roots > 1)
        printf("%d folders, %s file%s in all\n", r.n_roots, cdb_out_fmt_count(r.files, b[0], 32),
               r.files == 1 ? "" : "s");
    if (!cdb_cli_quiet() && r.bytes_freed > 0)
        printf("Freed %s\n", cdb_cli_fmt_bytes(r.bytes_freed, b[1], 32));
    if (!cdb_cli_quiet() && r.subfolder) {
        cdb_cli_flush_stdout();
        cdb_cli_hint("'clipdb ingest %s' takes it in again", r.roots[0].path);
    }
done:
    cdb_engine_forget_report_free(&r);
    cdb_engine_close(e);
    cdb_cli_args_free(&a);
    return rc;
}

/* ---- move ------------------------------------------------------------------------------------ */

int cdb_cli_cmd_move(int argc, char **argv) {
    cli_args a;
    int rc;
    cdb_engine *e = NULL;
    cdb_engine_move_report *r = NULL;
    char b[2][32];
    if (!cdb_cli_begin("move", &a, k_edit_spec, argc, argv, &rc)) goto done;
    if (a.n_pos != 2) {
        rc = cdb_cli_usage_error("move", "expected OLD and NEW");
        goto done;
    }
    if (!(r = calloc(1, sizeof *r))) {
        rc = cdb_cli_error("out of memory", "cannot move %s", a.pos[0]);
        goto done;
    }
    { /* NEW must exist before anything is opened */
        char newp[PATH_MAX];
        if (!realpath(a.pos[1], newp)) {
            rc = cdb_cli_error(strerror(errno), "cannot move to %s", a.pos[1]);
            cdb_cli_hint("NEW must exist: move or mount the files first, then tell clipdb");
            goto done;
        }
    }
    if ((rc = open_writer(&a, &e)) != CLI_EXIT_OK) goto done;
    if (cdb_engine_move(e, a.pos[0], a.pos[1], r) != CDB_OK) {
        cdb_engine_err code = cdb_engine_errcode();
        if (code == CDB_ENGINE_E_PART_OF_ROOT || code == CDB_ENGINE_E_NOT_A_ROOT)
            rc = not_a_root("move", r->container);
        else if (code == CDB_ENGINE_E_MOVE_TARGET && !r->bad_root[0]) {
            rc = cdb_cli_engine_fail(NULL);
            cdb_cli_hint("NEW must exist: move or mount the files first, then tell clipdb");
        } else
            rc = cdb_cli_engine_fail(NULL);
        goto done;
    }
    if (!cdb_cli_quiet() && r->already) {
        printf("%s was moved to %s already: nothing to do\n", cdb_cli_esc(r->old_path),
               cdb_cli_esc(r->new_path));
    } else if (!cdb_cli_quiet()) {
        printf("Moved %s -> %s: %s file%s", cdb_cli_esc(r->old_path), cdb_cli_esc(r->new_path),
               cdb_out_fmt_count(r->files, b[0], 32), r->files == 1 ? "" : "s");
        if (r->present < r->files)
            printf(" (%s not found there: the next reindex marks %s deleted)",
                   cdb_out_fmt_count(r->files - r->present, b[1], 32),
                   r->files - r->present == 1 ? "it" : "them");
        printf("\n");
        cdb_cli_flush_stdout();
        cdb_cli_hint("the next 'clipdb reindex' checks the moved files (reading what changed, "
                 "encoding nothing again)");
    }
    rc = CLI_EXIT_OK;
done:
    free(r);
    cdb_engine_close(e);
    cdb_cli_args_free(&a);
    return rc;
}
