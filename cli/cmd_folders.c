/*
** cmd_folders.c: managing the library's roots (the folders and single files
** ingested): `folders` lists them with their counts and last scan, `forget PATH`
** removes a root with its files and vectors and gives the space back, `move OLD
** NEW` tells clipdb a library moved (paths rewritten, vectors kept). The library
** model they act on: library.c, db/roots.c.
*/
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "index/index.h"

/* An absolute, normalized form of path for matching recorded roots: its real path
** when it exists, else made absolute and cleaned lexically ("." and ".." folded,
** repeated and trailing slashes dropped), since an unmounted folder has no real
** path. Heap (free). */
static char *normalized_path(const char *path) {
    char real[PATH_MAX], cwd[PATH_MAX], *out, *o;
    size_t cap;
    if (realpath(path, real)) return strdup(real);
    if (path[0] != '/' && !getcwd(cwd, sizeof cwd)) return NULL;
    cap = strlen(path) + (path[0] == '/' ? 0 : strlen(cwd)) + 3;
    if (!(out = malloc(cap))) return NULL;
    snprintf(out, cap, "%s/%s", path[0] == '/' ? "" : cwd, path);
    o = out; /* fold in place: o writes, p reads */
    for (const char *p = out; *p;) {
        while (*p == '/') p++;
        const char *e = p;
        while (*e && *e != '/') e++;
        size_t n = (size_t)(e - p);
        if (n == 0) break;
        if (n == 1 && p[0] == '.') {
        } else if (n == 2 && p[0] == '.' && p[1] == '.') {
            while (o > out && *--o != '/') {
            }
        } else {
            *o++ = '/';
            memmove(o, p, n);
            o += n;
        }
        p = e;
    }
    if (o == out) *o++ = '/';
    *o = '\0';
    return out;
}

static int within(const char *path, const char *dir) {
    size_t n = strlen(dir);
    return !strncmp(path, dir, n) && (path[n] == '\0' || path[n] == '/' || !strcmp(dir, "/"));
}

/* Indexes of the roots equal to or inside path; *n_out of them. Prints why when
** there is none (path unknown, or a part of one root). Returns a CLI_EXIT_*. */
static int roots_at(const cli_library *lib, const char *cmd, const char *path, int *idx,
                    int *n_out) {
    int n = 0;
    for (int i = 0; i < lib->n; i++)
        if (within(lib->r[i].path, path)) idx[n++] = i;
    *n_out = n;
    if (n) return CLI_EXIT_OK;
    for (int i = 0; i < lib->n; i++)
        if (lib->r[i].kind == CDB_DB_ROOT_FOLDER && within(path, lib->r[i].path)) {
            cli_error(NULL, "%s is a part of the folder %s, not a folder of its own", path,
                      lib->r[i].path);
            if (!strcmp(cmd, "move"))
                cli_hint("moves inside %s are found by 'clipdb reindex'; to move this part "
                         "elsewhere, ingest the new place: the vectors are kept",
                         lib->r[i].path);
            else
                cli_hint("'clipdb forget %s' forgets the whole folder", lib->r[i].path);
            return CLI_EXIT_FAIL;
        }
    cli_error(NULL, "%s is not a folder or file of this database", path);
    cli_hint("'clipdb folders' lists them");
    return CLI_EXIT_FAIL;
}

/* ---- folders --------------------------------------------------------------------------- */

static void fmt_time(int64_t ns, char *buf, size_t size) {
    time_t t = (time_t)(ns / 1000000000LL);
    struct tm tm;
    if (!ns || !localtime_r(&t, &tm) || !strftime(buf, size, "%Y-%m-%d %H:%M", &tm))
        snprintf(buf, size, "never");
}

typedef struct folders_ud {
    cdb_db *db;
    cli_json *j;
    int json;
    cdb_status rc;
} folders_ud;

static int on_folder(const cdb_db_root *r, void *ud_) {
    folders_ud *ud = ud_;
    cdb_db_root_counts c;
    char when[40], b[4][32];
    const char *status = r->status ? r->status : "new";
    struct stat sb;
    if (stat(r->path, &sb) != 0) status = "missing"; /* now, whatever the last scan said */
    if ((ud->rc = cdb_db_root_get_counts(ud->db, r->id, 0, &c)) != CDB_OK) return 1;
    int64_t live = c.files[CDB_DB_OK] + c.files[CDB_DB_PENDING] + c.files[CDB_DB_ERROR];
    int64_t problems = c.files[CDB_DB_ERROR] + c.n_retry + c.n_walk_problems;
    fmt_time(r->scanned_ns, when, sizeof when);
    if (ud->json) {
        cli_json *j = ud->j;
        cli_json_begin_object(j);
        cli_json_key(j, "id"); cli_json_int(j, r->id);
        cli_json_path(j, "path", r->path);
        cli_json_key(j, "kind"); cli_json_str(j, r->kind == CDB_DB_ROOT_FILE ? "file" : "folder");
        cli_json_key(j, "status"); cli_json_str(j, status);
        cli_json_key(j, "files"); cli_json_int(j, live);
        cli_json_key(j, "ok"); cli_json_int(j, c.files[CDB_DB_OK]);
        cli_json_key(j, "errors"); cli_json_int(j, c.files[CDB_DB_ERROR]);
        cli_json_key(j, "to_retry"); cli_json_int(j, c.n_retry);
        cli_json_key(j, "walk_problems"); cli_json_int(j, c.n_walk_problems);
        cli_json_key(j, "vectors"); cli_json_int(j, c.n_vectors);
        cli_json_key(j, "follow_symlinks"); cli_json_bool(j, r->follow_symlinks);
        cli_json_key(j, "exif"); cli_json_bool(j, !r->no_exif);
        cli_json_key(j, "last_scan_ns");
        if (r->scanned_ns) cli_json_int(j, r->scanned_ns);
        else cli_json_null(j);
        cli_json_end_object(j);
    } else {
        printf("%-8s %-6s %9s %9s %9s  %-16s  %s%s%s\n", status,
               r->kind == CDB_DB_ROOT_FILE ? "file" : "folder", cli_fmt_count(live, b[0], 32),
               cli_fmt_count(c.n_vectors, b[1], 32), cli_fmt_count(problems, b[2], 32), when,
               r->path, r->follow_symlinks ? "  (follows links)" : "",
               r->no_exif ? "  (EXIF orientation ignored)" : "");
    }
    return 0;
}

int cli_cmd_folders(int argc, char **argv) {
    static const cli_optspec spec[] = {{"db", 0, CLI_VALUE}, {"json", 0, CLI_FLAG},
                                       {"help", 'h', CLI_FLAG}, {0}};
    cli_args a;
    int rc;
    cdb_db *db = NULL;
    cli_json j;
    folders_ud ud;
    memset(&ud, 0, sizeof ud);
    if (!cli_begin("folders", &a, spec, argc, argv, &rc)) goto done;
    if (a.n_pos) {
        rc = cli_usage_error("folders", "unexpected argument '%s'", a.pos[0]);
        goto done;
    }
    if ((rc = cli_open_db(cli_get(&a, "db"), 0, 0, &db)) != CLI_EXIT_OK) goto done;
    ud.db = db;
    ud.j = &j;
    ud.json = cli_has(&a, "json") > 0;
    if (ud.json) {
        cli_json_init(&j, stdout, 1);
        cli_json_begin_object(&j);
        cli_json_key(&j, "folders");
        cli_json_begin_array(&j);
    } else {
        printf("%-8s %-6s %9s %9s %9s  %-16s  %s\n", "status", "kind", "files", "vectors",
               "problems", "last scan", "path");
    }
    cdb_status st = cdb_db_roots_foreach(db, on_folder, &ud);
    if (st == CDB_OK) st = ud.rc;
    if (ud.json) {
        cli_json_end_array(&j);
        cli_json_end_object(&j);
        cli_json_done(&j);
    }
    rc = st == CDB_OK ? CLI_EXIT_OK : cli_error_status(st, "cannot list the folders");
done:
    cdb_db_close(db);
    cli_args_free(&a);
    return rc;
}

/* ---- forget ------------------------------------------------------------------------------ */

/* forget and move: the writer handle, the default model, the roots. */
static int open_library(cli_args *a, cdb_db **db, cdb_db_model *dm, cli_library *lib) {
    cdb_status st;
    int rc = cli_open_db(cli_get(a, "db"), 1, cli_has(a, "wait") > 0, db);
    if (rc != CLI_EXIT_OK) return rc;
    if ((st = cdb_db_model_default(*db, dm)) != CDB_OK || (st = cli_library_load(*db, lib)) != CDB_OK)
        return cli_error_status(st, "cannot read the database");
    return CLI_EXIT_OK;
}

typedef struct model_list {
    cdb_db_model m[CDB_DB_MAX_MODELS];
    int n;
} model_list;

static int add_model(const cdb_db_model *m, void *ud) {
    model_list *l = ud;
    if (l->n < CDB_DB_MAX_MODELS) l->m[l->n++] = *m;
    return 0;
}

/* Every model's index after files went away (their removals are logged). */
static int refresh_all_indexes(cdb_db *db) {
    model_list l;
    cdb_status st;
    l.n = 0;
    if ((st = cdb_db_models_foreach(db, add_model, &l)) != CDB_OK)
        return cli_error_status(st, "cannot list the models");
    for (int i = 0; i < l.n; i++) {
        cli_index_result res;
        if ((st = cli_index_refresh(db, l.m[i].id, l.m[i].dim, 0, &res)) != CDB_OK) {
            cli_warn("the index of model '%s' could not be refreshed (%s); searches stay correct, "
                     "'clipdb index build' rebuilds it",
                     l.m[i].name, cdb_errmsg());
            return CLI_EXIT_PARTIAL;
        }
    }
    return CLI_EXIT_OK;
}

int cli_cmd_forget(int argc, char **argv) {
    static const cli_optspec spec[] = {{"db", 0, CLI_VALUE},  {"wait", 0, CLI_FLAG},
                                       {"quiet", 'q', CLI_FLAG}, {"help", 'h', CLI_FLAG}, {0}};
    cli_args a;
    int rc, n = 0, *idx = NULL;
    cdb_db *db = NULL;
    cdb_db_model dm;
    cli_library lib = {0};
    char *path = NULL, b[2][32];
    int64_t files = 0, freed = 0;
    cdb_status st;
    if (!cli_begin("forget", &a, spec, argc, argv, &rc)) goto done;
    if (a.n_pos != 1) {
        rc = cli_usage_error("forget", a.n_pos ? "one PATH at a time" : "no PATH given");
        goto done;
    }
    if (!(path = normalized_path(a.pos[0]))) {
        rc = cli_error(strerror(errno), "cannot forget %s", a.pos[0]);
        goto done;
    }
    if ((rc = open_library(&a, &db, &dm, &lib)) != CLI_EXIT_OK) goto done;
    if (!(idx = calloc((size_t)(lib.n ? lib.n : 1), sizeof *idx))) {
        rc = cli_error("out of memory", "cannot forget %s", path);
        goto done;
    }
    if ((rc = roots_at(&lib, "forget", path, idx, &n)) != CLI_EXIT_OK) goto done;
    for (int i = 0; i < n; i++) {
        const cli_root *r = &lib.r[idx[i]];
        int64_t k = 0;
        if ((st = cdb_db_root_forget(db, dm.id, r->id, &k)) != CDB_OK) {
            rc = cli_error_status(st, "cannot forget %s", r->path);
            goto done;
        }
        files += k;
        if (!cli_quiet())
            printf("Forgot %s (%s): %s file%s and %s\n", r->path,
                   r->kind == CDB_DB_ROOT_FILE ? "file" : "folder", cli_fmt_count(k, b[0], 32),
                   k == 1 ? "" : "s", k == 1 ? "its vectors" : "their vectors");
    }
    if ((st = cdb_db_compact(db, &freed)) != CDB_OK) {
        rc = cli_error_status(st, "forgotten, but the space could not be given back");
        goto done;
    }
    rc = refresh_all_indexes(db);
    if (!cli_quiet() && n > 1)
        printf("%d folders, %s files in all\n", n, cli_fmt_count(files, b[0], 32));
    if (!cli_quiet() && freed > 0) printf("Freed %s\n", cli_fmt_bytes(freed, b[1], 32));
done:
    free(idx);
    free(path);
    cli_library_free(&lib);
    cdb_db_close(db);
    cli_args_free(&a);
    return rc;
}

/* ---- move ------------------------------------------------------------------------------------ */

typedef struct there_ud {
    const char *root; /* the new place of the root */
    int64_t live, present;
} there_ud;

static int count_there(const cdb_db_file *f, void *ud_) {
    there_ud *ud = ud_;
    struct stat st;
    char *p = cdb_db_path_join(ud->root, f->relpath);
    ud->live++;
    if (p && lstat(p, &st) == 0) ud->present++;
    cdb_free(p);
    return 0;
}

int cli_cmd_move(int argc, char **argv) {
    static const cli_optspec spec[] = {{"db", 0, CLI_VALUE},  {"wait", 0, CLI_FLAG},
                                       {"quiet", 'q', CLI_FLAG}, {"help", 'h', CLI_FLAG}, {0}};
    cli_args a;
    int rc, n = 0, *idx = NULL;
    cdb_db *db = NULL;
    cdb_db_model dm;
    cli_library lib = {0};
    char *old = NULL, **dest = NULL, newp[PATH_MAX], b[2][32];
    there_ud there = {0};
    cdb_status st;
    if (!cli_begin("move", &a, spec, argc, argv, &rc)) goto done;
    if (a.n_pos != 2) {
        rc = cli_usage_error("move", "expected OLD and NEW");
        goto done;
    }
    if (!realpath(a.pos[1], newp)) {
        rc = cli_error(strerror(errno), "cannot move to %s", a.pos[1]);
        cli_hint("NEW must exist: move or mount the files first, then tell clipdb");
        goto done;
    }
    if (!(old = normalized_path(a.pos[0]))) {
        rc = cli_error(strerror(errno), "cannot move %s", a.pos[0]);
        goto done;
    }
    if ((rc = open_library(&a, &db, &dm, &lib)) != CLI_EXIT_OK) goto done;
    idx = calloc((size_t)(lib.n ? lib.n : 1), sizeof *idx);
    dest = calloc((size_t)(lib.n ? lib.n : 1), sizeof *dest);
    if (!idx || !dest) {
        rc = cli_error("out of memory", "cannot move %s", old);
        goto done;
    }
    if ((rc = roots_at(&lib, "move", old, idx, &n)) != CLI_EXIT_OK) goto done;
    /* where each root goes, and how many of its files are there */
    for (int i = 0; i < n; i++) {
        const cli_root *r = &lib.r[idx[i]];
        struct stat sb;
        const char *rest = r->path + strlen(old);
        if (!(dest[i] = cdb_db_path_join(newp, *rest == '/' ? rest + 1 : rest))) {
            rc = cli_error("out of memory", "cannot move %s", old);
            goto done;
        }
        if (stat(dest[i], &sb) != 0 ||
            (r->kind == CDB_DB_ROOT_FILE ? !S_ISREG(sb.st_mode) : !S_ISDIR(sb.st_mode))) {
            rc = cli_error(NULL, "%s would move to %s, which is not a %s", r->path, dest[i],
                           r->kind == CDB_DB_ROOT_FILE ? "file" : "folder");
            goto done;
        }
        there.root = dest[i];
        cdb_db_files_foreach(db, r->id, CDB_DB_MASK_OK | CDB_DB_MASK_PENDING | CDB_DB_MASK_ERROR,
                             count_there, &there);
    }
    if (there.live > 0 && there.present == 0) {
        rc = cli_error(NULL, "none of the %s recorded files of %s is under %s; nothing changed",
                       cli_fmt_count(there.live, b[0], 32), old, newp);
        cli_hint("check the paths (NEW is where the same files are now)");
        goto done;
    }
    for (int i = 0; i < n; i++)
        if ((st = cdb_db_root_set_path(db, lib.r[idx[i]].id, dest[i])) != CDB_OK) {
            rc = cli_error_status(st, "cannot move %s", lib.r[idx[i]].path);
            goto done;
        }
    /* NEW may lie inside a recorded folder, or hold recorded roots: fold them */
    cli_library_free(&lib);
    if ((st = cli_library_load(db, &lib)) != CDB_OK ||
        (st = cli_library_normalize(db, dm.id, &lib, NULL)) != CDB_OK) {
        rc = cli_error_status(st, "moved, but the folders could not be merged");
        goto done;
    }
    if (!cli_quiet()) {
        printf("Moved %s -> %s: %s files", old, newp, cli_fmt_count(there.live, b[0], 32));
        if (there.present < there.live)
            printf(" (%s not found there: the next reindex marks them deleted)",
                   cli_fmt_count(there.live - there.present, b[1], 32));
        printf("\n");
        fflush(stdout);
        cli_hint("the next 'clipdb reindex' checks the moved files (reading what changed, "
                 "encoding nothing again)");
    }
    rc = CLI_EXIT_OK;
done:
    for (int i = 0; dest && i < n; i++) cdb_free(dest[i]);
    free(dest);
    free(idx);
    free(old);
    cli_library_free(&lib);
    cdb_db_close(db);
    cli_args_free(&a);
    return rc;
}
