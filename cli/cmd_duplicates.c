/*
** cmd_duplicates.c: `clipdb duplicates`: the library's duplicate groups (exact copies,
** near copies, RAW+JPEG pairs, bursts) with a suggested keep each, as a table, one
** JSON document (--json) or the paths of the files not suggested, NUL-separated
** (--paths0), for the user's own script. clipdb never deletes a photo. The groups:
** engine/library/duplicates.c over dupes/dupes.h.
*/
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "dupes/dupes.h"

static void print_json(const cdb_engine_dups *d)
{
    cdb_json j;
    cdb_cli_json_doc(&j, NULL);
    cdb_json_key(&j, "groups");
    cdb_json_begin_array(&j);
    for (int g = 0; g < d->n_groups; g++) {
        const cdb_engine_dup_group *dg = &d->groups[g];
        cdb_json_begin_object(&j);
        cdb_json_key(&j, "kind");
        cdb_json_str(&j, cdb_dupes_kind_name((cdb_dupes_kind)dg->kind));
        cdb_json_key(&j, "keep");
        cdb_json_int(&j, dg->keep);
        cdb_json_key(&j, "files");
        cdb_json_begin_array(&j);
        for (int i = 0; i < dg->n_files; i++) {
            const cdb_engine_dup_file *f = &dg->files[i];
            cdb_json_begin_object(&j);
            cdb_json_key(&j, "id");
            cdb_json_int(&j, f->id);
            cdb_json_path(&j, "path", f->path);
            cdb_json_key(&j, "width");
            cdb_json_int(&j, f->width);
            cdb_json_key(&j, "height");
            cdb_json_int(&j, f->height);
            cdb_json_key(&j, "bytes");
            cdb_json_int(&j, f->bytes);
            cdb_json_key(&j, "taken");
            cdb_json_str(&j, f->taken[0] ? f->taken : NULL);
            cdb_json_end_object(&j);
        }
        cdb_json_end_array(&j);
        cdb_json_end_object(&j);
    }
    cdb_json_end_array(&j);
    cdb_json_key(&j, "files");
    cdb_json_int(&j, d->n_files);
    cdb_json_key(&j, "unreadable");
    cdb_json_int(&j, d->n_unreadable);
    cdb_json_end_object(&j);
    cdb_json_done(&j);
}

static void print_table(const cdb_engine_dups *d)
{
    char b[32];
    for (int g = 0; g < d->n_groups; g++) {
        const cdb_engine_dup_group *dg = &d->groups[g];
        printf("%s%s (%d files)\n", g ? "\n" : "",
               cdb_dupes_kind_name((cdb_dupes_kind)dg->kind), dg->n_files);
        for (int i = 0; i < dg->n_files; i++) {
            const cdb_engine_dup_file *f = &dg->files[i];
            printf("  %s %5dx%-5d %9s  %-25s %s\n", f->id == dg->keep ? "keep" : "    ",
                   f->width, f->height, cdb_cli_fmt_bytes(f->bytes, b, sizeof b),
                   f->taken[0] ? cdb_cli_esc(f->taken) : "-", cdb_cli_esc(f->path));
        }
    }
    fprintf(stderr, "%d group%s among %lld files", d->n_groups, d->n_groups == 1 ? "" : "s",
            (long long)d->n_files);
    if (d->n_unreadable)
        fprintf(stderr, " (%lld could not be read now: run 'clipdb reindex')",
                (long long)d->n_unreadable);
    fprintf(stderr, ". Nothing was deleted: 'keep' is a suggestion.\n");
}

/* The files of each group but its keep, NUL-terminated; bursts only when asked for by
** --kind burst (their files are distinct photos). */
static void print_paths0(const cdb_engine_dups *d, int kind)
{
    for (int g = 0; g < d->n_groups; g++) {
        const cdb_engine_dup_group *dg = &d->groups[g];
        if (dg->kind == CDB_DUPES_BURST && kind != CDB_DUPES_BURST)
            continue;
        for (int i = 0; i < dg->n_files; i++)
            if (dg->files[i].id != dg->keep)
                fwrite(dg->files[i].path, 1, strlen(dg->files[i].path) + 1, stdout);
    }
}

int cdb_cli_cmd_duplicates(int argc, char **argv)
{
    static const cli_optspec spec[] = {{"db", 0, CLI_VALUE},      {"json", 0, CLI_FLAG},
                                       {"kind", 0, CLI_VALUE},    {"paths0", 0, CLI_FLAG},
                                       {"help", 'h', CLI_FLAG},   {0}};
    cli_args a;
    int rc, kind = -1;
    cdb_engine *e = NULL;
    cdb_engine_dups d = {0};
    if (!cdb_cli_begin("duplicates", &a, spec, argc, argv, &rc))
        goto done;
    if (a.n_pos) {
        rc = cdb_cli_usage_error("duplicates", "unexpected argument '%s'", a.pos[0]);
        goto done;
    }
    const char *k = cdb_cli_get(&a, "kind");
    if (k && (kind = cdb_dupes_kind_parse(k)) < 0) {
        rc = cdb_cli_usage_error("duplicates", "--kind: expected exact, near, pair or burst, "
                                 "got '%s'", k);
        goto done;
    }
    if (cdb_cli_has(&a, "json") && cdb_cli_has(&a, "paths0")) {
        rc = cdb_cli_usage_error("duplicates", "--json and --paths0 do not go together");
        goto done;
    }
    /* the writer when no other clipdb writes: what it reads is stored for the next run */
    if ((rc = cdb_cli_engine_open(cdb_cli_get(&a, "db"), CLI_WRITER_IF_FREE, 0, CLI_DEVICE_CPU,
                                  0, &e)) != CLI_EXIT_OK)
        goto done;
    if (cdb_engine_duplicates(e, kind, &d) != CDB_OK) {
        rc = cdb_cli_engine_fail(NULL);
        goto done;
    }
    if (cdb_cli_has(&a, "json"))
        print_json(&d);
    else if (cdb_cli_has(&a, "paths0"))
        print_paths0(&d, kind);
    else
        print_table(&d);
    rc = CLI_EXIT_OK;
done:
    cdb_engine_dups_free(&d);
    cdb_engine_close(e);
    cdb_cli_args_free(&a);
    return rc;
}
