/*
** cmd_parts.c: a library ingested in parts: `merge` (parts into one database, over
** cdb_engine_merge), `index train` and `index add-part` (an index built in parts: one
** trained index for all parts, each part's vectors added to a copy of it) and `slurm
** ingest` (the job scripts of a partitioned ingest on a Slurm cluster: an array of
** `ingest --part I/N` tasks, a job that trains the index, an array of `index add-part`
** tasks, then a job that merges the parts and their indexes' lists, written into the
** database folder and handed to sbatch).
**
** Exit codes: 0 done, 1 failed (a part that cannot be read, another model, sbatch
** failing), 2 usage.
*/
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cli.h"

/* ---- merge ------------------------------------------------------------------------ */

/* Creates the database at dir like the first part when it has no catalog yet, once
** the parts pass the merge's checks: a refused merge leaves nothing behind. */
static int create_if_absent(const char *dir, const char *const *parts, int n) {
    char probe[4200];
    struct stat st;
    snprintf(probe, sizeof probe, "%s/catalog.db", dir);
    if (stat(probe, &st) == 0) return CLI_EXIT_OK;
    if (cdb_engine_merge_check(dir, parts, n) != CDB_OK ||
        cdb_engine_create_like(dir, parts[0]) != CDB_OK)
        return cdb_cli_engine_fail(NULL);
    return CLI_EXIT_OK;
}

static void merge_report(const cdb_engine_merge_report *r, int json) {
    char b[5][32];
    if (json) {
        cdb_json j;
        cdb_cli_json_doc(&j, "merge");
        cdb_json_key(&j, "status"); cdb_json_str(&j, "ok");
        cdb_json_key(&j, "parts"); cdb_json_int(&j, r->n_parts);
        cdb_json_key(&j, "files"); cdb_json_int(&j, r->files);
        cdb_json_key(&j, "vectors"); cdb_json_int(&j, r->vectors);
        cdb_json_key(&j, "deleted"); cdb_json_int(&j, r->deleted);
        cdb_json_key(&j, "thumbnails"); cdb_json_int(&j, r->thumbs);
        cdb_json_key(&j, "photo_metadata"); cdb_json_int(&j, r->photos);
        if (r->index_kind[0]) {
            cdb_json_key(&j, "index");
            cdb_json_begin_object(&j);
            cdb_json_key(&j, "kind"); cdb_json_str(&j, r->index_kind);
            cdb_json_key(&j, "vectors"); cdb_json_int(&j, r->indexed);
            cdb_json_key(&j, "built_in_parts"); cdb_json_int(&j, r->index_parts);
            cdb_json_key(&j, "parts_from_own_index"); cdb_json_int(&j, r->index_part_files);
            cdb_json_key(&j, "trained_file"); cdb_json_bool(&j, r->index_trained_file);
            cdb_json_end_object(&j);
        }
        cdb_json_end_object(&j);
        cdb_json_done(&j);
    } else if (!cdb_cli_quiet()) {
        printf("merge: %d part%s: %s files, %s vectors, %s deleted, %s thumbnails, "
               "%s with photo metadata\n",
               r->n_parts, r->n_parts == 1 ? "" : "s", cdb_out_fmt_count(r->files, b[0], 32),
               cdb_out_fmt_count(r->vectors, b[1], 32), cdb_out_fmt_count(r->deleted, b[2], 32),
               cdb_out_fmt_count(r->thumbs, b[3], 32), cdb_out_fmt_count(r->photos, b[4], 32));
        if (r->index_parts)
            printf("index: %s, %s vectors, built in %d parts from one trained quantizer%s; "
                   "%d part%s lists from %s own index%s\n",
                   r->index_kind, cdb_out_fmt_count(r->indexed, b[0], 32), r->index_parts,
                   r->index_trained_file ? " (the trained file)" : "", r->index_part_files,
                   r->index_part_files == 1 ? "'s" : "s'",
                   r->index_part_files == 1 ? "its" : "their",
                   r->index_part_files == 1 ? "" : "es");
        else if (r->index_kind[0])
            printf("index: %s, %s vectors\n", r->index_kind,
                   cdb_out_fmt_count(r->indexed, b[0], 32));
    }
    cdb_cli_flush_stdout();
}

int cdb_cli_cmd_merge(int argc, char **argv) {
    static const cli_optspec spec[] = {{"db", 0, CLI_VALUE},  {"wait", 0, CLI_FLAG},
                                       {"json", 0, CLI_FLAG}, {"quiet", 'q', CLI_FLAG},
                                       {"no-index", 0, CLI_FLAG}, {"help", 'h', CLI_FLAG},
                                       {"trained", 0, CLI_VALUE}, {0}};
    cli_args a;
    int rc;
    cdb_engine *e = NULL;
    cdb_engine_merge_report r;
    if (!cdb_cli_begin("merge", &a, spec, argc, argv, &rc)) goto done;
    if (a.n_pos == 0) {
        rc = cdb_cli_usage_error("merge", "no PART given");
        goto done;
    }
    if ((rc = create_if_absent(cdb_cli_db_path(cdb_cli_get(&a, "db"), NULL),
                               (const char *const *)a.pos, a.n_pos)) !=
        CLI_EXIT_OK)
        goto done;
    if ((rc = cdb_cli_engine_open(cdb_cli_get(&a, "db"), 1, cdb_cli_has(&a, "wait") > 0,
                                  CLI_DEVICE_CPU, 0, &e)) != CLI_EXIT_OK)
        goto done;
    if (cdb_engine_merge(e, a.pos, a.n_pos,
                         cdb_cli_has(&a, "no-index") > 0 ? CDB_ENGINE_MERGE_NO_INDEX : 0,
                         cdb_cli_get(&a, "trained"), &r) != CDB_OK) {
        rc = cdb_cli_engine_fail(NULL);
        goto done;
    }
    merge_report(&r, cdb_cli_has(&a, "json") > 0);
    rc = CLI_EXIT_OK;
done:
    cdb_engine_close(e);
    cdb_cli_args_free(&a);
    return rc;
}

/* ---- index train, index add-part ------------------------------------------------------ */

int cdb_cli_index_train(cli_args *a, cdb_engine_index_kind kind) {
    cdb_engine_train_report r;
    const char *out = cdb_cli_get(a, "out");
    char b[2][32];
    if (!out || !*out) return cdb_cli_usage_error("index", "index train: missing --out FILE");
    if (a->n_pos < 2) return cdb_cli_usage_error("index", "index train: no PART given");
    if (cdb_engine_index_train_parts(a->pos + 1, a->n_pos - 1, kind, out, &r) != CDB_OK)
        return cdb_cli_engine_fail(NULL);
    if (cdb_cli_has(a, "json")) {
        cdb_json j;
        cdb_cli_json_doc(&j, "index train");
        cdb_json_key(&j, "type"); cdb_json_str(&j, r.kind);
        cdb_json_key(&j, "vectors"); cdb_json_int(&j, r.vectors);
        cdb_json_key(&j, "trained_on"); cdb_json_int(&j, r.n_train);
        cdb_json_key(&j, "file");
        if (r.written) cdb_json_str(&j, out);
        else cdb_json_null(&j);
        cdb_json_key(&j, "stamp"); cdb_json_str(&j, r.stamp);
        cdb_json_end_object(&j);
        cdb_json_done(&j);
    } else if (!cdb_cli_quiet()) {
        if (r.written)
            printf("index train: %s for %s vectors, trained on %s; %s (stamp %s)\n", r.kind,
                   cdb_out_fmt_count(r.vectors, b[0], 32), cdb_out_fmt_count(r.n_train, b[1], 32),
                   out, r.stamp);
        else
            printf("index train: %s for %s vectors has no inverted lists: nothing trained, "
                   "the merge builds it whole\n", r.kind, cdb_out_fmt_count(r.vectors, b[0], 32));
    }
    return cdb_cli_flush_stdout() ? CLI_EXIT_FAIL : CLI_EXIT_OK;
}

int cdb_cli_index_add_part(cli_args *a) {
    cdb_engine_part_add_report r;
    cdb_engine *e = NULL;
    const char *trained = cdb_cli_get(a, "trained");
    char b[32];
    int rc;
    if (!trained || !*trained)
        return cdb_cli_usage_error("index", "index add-part: missing --trained FILE");
    if (a->n_pos > 1) return cdb_cli_usage_error("index", "unexpected argument '%s'", a->pos[1]);
    if ((rc = cdb_cli_engine_open(cdb_cli_get(a, "db"), 0, 0, CLI_DEVICE_CPU, 0, &e)) !=
        CLI_EXIT_OK)
        return rc;
    if (cdb_engine_index_add_part(e, trained, &r) != CDB_OK) {
        rc = cdb_cli_engine_fail(NULL);
        goto done;
    }
    if (cdb_cli_has(a, "json")) {
        cdb_json j;
        cdb_cli_json_doc(&j, "index add-part");
        cdb_json_key(&j, "vectors"); cdb_json_int(&j, r.vectors);
        cdb_json_key(&j, "file");
        if (r.trained_found) cdb_json_str(&j, r.path);
        else cdb_json_null(&j);
        cdb_json_end_object(&j);
        cdb_json_done(&j);
    } else if (!cdb_cli_quiet()) {
        if (r.trained_found)
            printf("index add-part: %s vectors into %s\n", cdb_out_fmt_count(r.vectors, b, 32),
                   r.path);
        else
            printf("index add-part: no trained index at %s: nothing to add (the merge builds "
                   "the index whole)\n", trained);
    }
    rc = cdb_cli_flush_stdout() ? CLI_EXIT_FAIL : CLI_EXIT_OK;
done:
    cdb_engine_close(e);
    return rc;
}

/* ---- slurm ingest -------------------------------------------------------------------- */

/* s as one shell word ('...', a ' inside written '\''). */
static void sh_word(FILE *f, const char *s) {
    fputc('\'', f);
    for (; *s; s++) {
        if (*s == '\'') fputs("'\\''", f);
        else fputc(*s, f);
    }
    fputc('\'', f);
}

/* s as one word of an #SBATCH line: sbatch splits those lines itself, at blanks outside
** quotes, takes a backslash as escaping the next character, and ends the line at a `#`;
** every such character is escaped. (Line ends and '%', which sbatch expands in file names,
** cannot be carried: slurm_job_init refuses a database path with them.) */
static void sbatch_word(FILE *f, const char *s) {
    for (; *s; s++) {
        if (strchr(" \t\\\"'#", *s)) fputc('\\', f);
        fputc(*s, f);
    }
}

/* What the scripts need. */
typedef struct slurm_job {
    char exe[4096];        /* this clipdb, resolved */
    char db[4096];         /* the database folder, absolute */
    const char *model;     /* the model path every task uses (absolute when found) */
    char model_abs[4096];
    const char *device;    /* --device for the ingest tasks, or NULL */
    const char *index_type; /* --index-type for the train job, or NULL (auto) */
    int parts;
    char **roots;          /* absolute */
    int n_roots;
} slurm_job;

/* The array job: task I (1..N) ingests part I/N into <db>/parts/I. */
static void write_ingest_script(FILE *f, const slurm_job *j) {
    fprintf(f, "#!/bin/sh\n#SBATCH --job-name=clipdb-ingest\n#SBATCH --array=1-%d\n", j->parts);
    fputs("#SBATCH --output=", f);
    sbatch_word(f, j->db);
    fputs("/slurm/ingest-%a.log\n", f);
    fprintf(f, "# clipdb slurm ingest: part $SLURM_ARRAY_TASK_ID of %d, a database of its own\n"
               "set -eu\nI=\"$SLURM_ARRAY_TASK_ID\"\nCLIPDB=", j->parts);
    sh_word(f, j->exe);
    fputs("\nPART=", f);
    sh_word(f, j->db);
    fputs("/parts/\"$I\"\nmkdir -p \"$(dirname \"$PART\")\"\n"
          "[ -e \"$PART/catalog.db\" ] || \"$CLIPDB\" init --db \"$PART\" --model ", f);
    sh_word(f, j->model);
    fputs(" --quiet\n# exit 3 (some files quarantined or to retry) is a finished part\n"
          "rc=0\n\"$CLIPDB\" ingest --db \"$PART\" --part \"$I/", f);
    fprintf(f, "%d\" --quiet", j->parts);
    if (j->device) {
        fputs(" --device ", f);
        sh_word(f, j->device);
    }
    fputs(" --", f);
    for (int i = 0; i < j->n_roots; i++) {
        fputs(" \\\n    ", f);
        sh_word(f, j->roots[i]);
    }
    fputs(" || rc=$?\n[ \"$rc\" -eq 0 ] || [ \"$rc\" -eq 3 ]\n", f);
}

/* The start of a job script: its name, log, what it is, and $CLIPDB, $DB, $TRAINED. */
static void script_head(FILE *f, const slurm_job *j, const char *name, const char *array,
                        const char *log, const char *what) {
    fprintf(f, "#!/bin/sh\n#SBATCH --job-name=clipdb-%s\n%s#SBATCH --output=", name, array);
    sbatch_word(f, j->db);
    fprintf(f, "/slurm/%s\n", log);
    fprintf(f, "# clipdb slurm ingest: %s\nset -eu\nCLIPDB=", what);
    sh_word(f, j->exe);
    fputs("\nDB=", f);
    sh_word(f, j->db);
    fputs("\nTRAINED=\"$DB/parts/trained.cdbidx\"\n", f);
}

/* After every ingest task: the index planned for all the parts' vectors, trained (empty)
** on a sample of them, into $TRAINED; nothing (and no file) when the plan has no lists. */
static void write_train_script(FILE *f, const slurm_job *j) {
    script_head(f, j, "train", "", "train.log",
                "after every part: train one index on a sample of them all");
    fputs("\"$CLIPDB\" index train --out \"$TRAINED\" --quiet", f);
    if (j->index_type) {
        fputs(" --type ", f);
        sh_word(f, j->index_type);
    }
    for (int i = 1; i <= j->parts; i++) fprintf(f, " \\\n    \"$DB/parts/%d\"", i);
    fputs("\n", f);
}

/* After the train job: task I adds part I's vectors to a copy of the trained index, saved
** in the part (its own file ids; the merge renames them). */
static void write_add_script(FILE *f, const slurm_job *j) {
    char array[64];
    snprintf(array, sizeof array, "#SBATCH --array=1-%d\n", j->parts);
    script_head(f, j, "add", array, "add-%a.log",
                "part $SLURM_ARRAY_TASK_ID's vectors into a copy of the trained index");
    fputs("\"$CLIPDB\" index add-part --db \"$DB/parts/$SLURM_ARRAY_TASK_ID\" "
          "--trained \"$TRAINED\" --quiet\n", f);
}

/* After every add task: merge the parts and their indexes' lists (a part whose index is
** missing or stale is added again, the log says which). */
static void write_merge_script(FILE *f, const slurm_job *j) {
    script_head(f, j, "merge", "", "merge.log",
                "after every part's index: merge the parts and their inverted lists");
    fputs("\"$CLIPDB\" merge --db \"$DB\" --trained \"$TRAINED\"", f);
    for (int i = 1; i <= j->parts; i++) fprintf(f, " \\\n    \"$DB/parts/%d\"", i);
    fputs("\n", f);
}

/* Writes one script at path through a new temporary renamed over it (cdb_tmp_create: never
** through a link or into a file someone else put there); 0, or -1 with errno. */
static int write_script(const char *path, void (*fn)(FILE *, const slurm_job *),
                        const slurm_job *j) {
    char tmp[4400];
    int fd = cdb_tmp_create(path, tmp, sizeof tmp), err;
    FILE *f = fd < 0 ? NULL : fdopen(fd, "w");
    if (!f) {
        err = errno;
        if (fd >= 0) close(fd), unlink(tmp);
        errno = err;
        return -1;
    }
    fn(f, j);
    if (fclose(f) == 0 && rename(tmp, path) == 0) return 0;
    err = errno;
    unlink(tmp);
    errno = err;
    return -1;
}

/* Splits s into words as a shell would, quotes ('...', "...") and backslashes only: no
** expansion of any kind, so nothing in s is run. The words (NULL-ended, one allocation
** with their text) into *out, their count into *n; -1 on an unclosed quote or no memory. */
static int split_words(const char *s, char ***out, int *n) {
    size_t len = s ? strlen(s) : 0, cap = len / 2 + 2;
    char **w = malloc(cap * sizeof *w + len + 1), *o = (char *)(w + cap);
    int k = 0;
    if (!w) return -1;
    while (s && *s) {
        char q = 0; /* the open quote */
        while (*s == ' ' || *s == '\t' || *s == '\n') s++;
        if (!*s) break;
        w[k++] = o;
        for (; *s; s++) {
            if (!q && strchr(" \t\n", *s)) break;
            if (q == '\'' && *s != '\'') *o++ = *s;
            else if (q == '\'' || (!q && (*s == '\'' || *s == '"'))) q = q ? 0 : *s;
            else if (q == '"' && *s == '"') q = 0;
            else if (*s == '\\' && s[1] && (!q || strchr("\\\"$`", s[1]))) *o++ = *++s;
            else *o++ = *s;
        }
        *o++ = '\0';
        if (q) {
            free(w);
            return -1;
        }
    }
    w[k] = NULL;
    *out = w, *n = k;
    return 0;
}

/* Runs sbatch --parsable [dependency] ARGS... script (argv, no shell); the job id into
** id. 0, or -1 (printed). */
static int sbatch(const char *extra, const char *dependency, const char *script, char *id,
                  size_t size) {
    char **words = NULL, *argv[4096], drain[512];
    int n_words = 0, argc = 0, fds[2], st = -1;
    pid_t pid;
    ssize_t got = 0, r;
    if (split_words(extra, &words, &n_words) != 0)
        return cdb_cli_error(NULL, "cannot split the sbatch options (an unclosed quote?)");
    if (n_words > (int)(sizeof argv / sizeof *argv) - 5) {
        free(words);
        return cdb_cli_error(NULL, "too many sbatch options");
    }
    argv[argc++] = "sbatch";
    argv[argc++] = "--parsable";
    if (dependency) argv[argc++] = (char *)dependency;
    for (int i = 0; i < n_words; i++) argv[argc++] = words[i];
    argv[argc++] = (char *)script;
    argv[argc] = NULL;
    fflush(NULL);
    if (pipe(fds) != 0 || (pid = fork()) < 0) {
        free(words);
        return cdb_cli_error(strerror(errno), "cannot run sbatch");
    }
    if (pid == 0) {
        dup2(fds[1], STDOUT_FILENO);
        close(fds[0]), close(fds[1]);
        execvp("sbatch", argv);
        _exit(127);
    }
    free(words);
    close(fds[1]);
    while (got < (ssize_t)size - 1 && (r = read(fds[0], id + got, size - 1 - (size_t)got)) != 0)
        if (r > 0) got += r;
        else if (errno != EINTR) break;
    id[got] = '\0';
    while ((r = read(fds[0], drain, sizeof drain)) != 0) /* the rest: sbatch must not block */
        if (r < 0 && errno != EINTR) break;
    close(fds[0]);
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
    id[strcspn(id, ";\r\n")] = '\0'; /* "jobid[;cluster]" */
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || !id[0])
        return cdb_cli_error(NULL, "sbatch %s failed (exit status %d%s)", script,
                             WIFEXITED(st) ? WEXITSTATUS(st) : -1,
                             WIFEXITED(st) && WEXITSTATUS(st) == 127 ? ": not found" : "");
    return 0;
}

/* Fills j from the arguments; CLI_EXIT_OK or the error printed. */
static int slurm_job_init(cli_args *a, slurm_job *j, int *is_file) {
    const char *src = NULL;
    long parts;
    char **abs = NULL;
    memset(j, 0, sizeof *j);
    if (cdb_cli_get_int(a, "parts", 0, 1, CLI_MAX_PARTS, &parts))
        return cdb_cli_usage_error("slurm", "%s", a->err);
    if (!parts) return cdb_cli_usage_error("slurm", "missing --parts N");
    j->parts = (int)parts;
    if (a->n_pos < 2) return cdb_cli_usage_error("slurm", "no ROOT given");
    if (!realpath("/proc/self/exe", j->exe))
        return cdb_cli_error(strerror(errno), "cannot find this clipdb's path");
    {
        const char *dir = cdb_cli_db_path(cdb_cli_get(a, "db"), NULL);
        char parent[4096], *slash;
        if (!realpath(dir, j->db)) { /* not made yet: its parent's real path + its name */
            snprintf(parent, sizeof parent, "%s", dir);
            slash = strrchr(parent, '/');
            if (slash) *slash = '\0';
            if (!realpath(slash ? (*parent ? parent : "/") : ".", j->db) ||
                strlen(j->db) + strlen(slash ? slash + 1 : dir) + 2 > sizeof j->db)
                return cdb_cli_error(strerror(errno), "cannot resolve --db %s", dir);
            strcat(j->db, "/");
            strcat(j->db, slash ? slash + 1 : dir);
        }
    }
    for (const char *c = j->db; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f || *c == '%')
            return cdb_cli_usage_error("slurm", "the database path has a line end, a control "
                                                "character or a '%%', which a job script's "
                                                "#SBATCH lines cannot carry");
    if (!(j->model = cdb_cli_model_path(cdb_cli_get(a, "model"), &src)))
        return cdb_cli_error(NULL, "no model found: pass --model PATH");
    if (realpath(j->model, j->model_abs)) j->model = j->model_abs; /* else hf:ORG/NAME */
    j->device = cdb_cli_get(a, "device");
    {
        static const char *const types[] = {"auto",   "flat",        "hnsw", "ivf-sq",
                                            "ivf-pq", "ivf-hnsw-pq", NULL};
        int t = cdb_cli_get_choice(a, "index-type", types, 0);
        if (t < 0) return cdb_cli_usage_error("slurm", "%s", a->err);
        j->index_type = t ? types[t] : NULL;
    }
    if (cdb_engine_check_paths(a->pos + 1, a->n_pos - 1, &abs, is_file) != CDB_OK)
        return cdb_cli_engine_fail(NULL);
    j->roots = abs;
    j->n_roots = a->n_pos - 1;
    return CLI_EXIT_OK;
}

/* The four job scripts, in the order they run: each after the one before succeeded. */
static const struct slurm_step {
    const char *name; /* <db>/slurm/<name>.sbatch */
    void (*write)(FILE *, const slurm_job *);
} slurm_steps[] = {{"ingest", write_ingest_script},
                   {"train", write_train_script},
                   {"add", write_add_script},
                   {"merge", write_merge_script}};
#define N_STEPS ((int)(sizeof slurm_steps / sizeof slurm_steps[0]))

/* --dry-run: the scripts on stdout. */
static int slurm_print(const slurm_job *j) {
    for (int i = 0; i < N_STEPS; i++) {
        printf("%s# %s/slurm/%s.sbatch", i ? "\n" : "", j->db, slurm_steps[i].name);
        if (i) printf(" (submitted with --dependency=afterok:<the %s job's id>)",
                      slurm_steps[i - 1].name);
        printf("\n");
        slurm_steps[i].write(stdout, j);
    }
    return cdb_cli_flush_stdout() ? CLI_EXIT_FAIL : CLI_EXIT_OK;
}

/* Makes dir unless it is there; CLI_EXIT_OK when it is then a folder (not a link) of ours
** that no one else can write to, else the error printed: the scripts written in it run
** as this user on every node, so no one else may swap or edit them before sbatch reads
** them. */
static int own_folder(const char *dir) {
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return cdb_cli_error(strerror(errno), "cannot create %s", dir);
    if (!cdb_dir_private(dir))
        return cdb_cli_error(NULL, "%s is not a folder of this user's that only this user "
                             "can write to: its job scripts could be changed before they run",
                             dir);
    return CLI_EXIT_OK;
}

/* Writes the scripts into <db>/slurm/ and submits them, each depending on the one before.
** --sbatch goes to the ingest array (the GPU tasks), --merge-sbatch to the others. */
static int slurm_submit(cli_args *a, const slurm_job *j) {
    char dir[4200], path[N_STEPS][4300], id[N_STEPS][128], dep[200];
    snprintf(dir, sizeof dir, "%s/slurm", j->db);
    if (own_folder(j->db) != CLI_EXIT_OK || own_folder(dir) != CLI_EXIT_OK) return CLI_EXIT_FAIL;
    for (int i = 0; i < N_STEPS; i++) {
        snprintf(path[i], sizeof path[i], "%s/%s.sbatch", dir, slurm_steps[i].name);
        if (write_script(path[i], slurm_steps[i].write, j) != 0)
            return cdb_cli_error(strerror(errno), "cannot write %s", path[i]);
    }
    for (int i = 0; i < N_STEPS; i++) {
        if (i) snprintf(dep, sizeof dep, "--dependency=afterok:%s", id[i - 1]);
        if (sbatch(cdb_cli_get(a, i ? "merge-sbatch" : "sbatch"), i ? dep : NULL, path[i], id[i],
                   sizeof id[i]))
            return CLI_EXIT_FAIL;
    }
    if (cdb_cli_has(a, "json")) {
        cdb_json js;
        char key[32];
        cdb_cli_json_doc(&js, "slurm ingest");
        for (int i = 0; i < N_STEPS; i++) {
            snprintf(key, sizeof key, "%s_job", slurm_steps[i].name);
            cdb_json_key(&js, key);
            cdb_json_str(&js, id[i]);
        }
        cdb_json_key(&js, "parts"); cdb_json_int(&js, j->parts);
        cdb_json_end_object(&js);
        cdb_json_done(&js);
    } else {
        printf("slurm: ingest array job %s (%d tasks), then train job %s, add array job %s "
               "(%d tasks), merge job %s; scripts and logs in %s\n", id[0], j->parts, id[1],
               id[2], j->parts, id[3], dir);
    }
    return cdb_cli_flush_stdout() ? CLI_EXIT_FAIL : CLI_EXIT_OK;
}

int cdb_cli_cmd_slurm(int argc, char **argv) {
    static const cli_optspec spec[] = {
        {"db", 0, CLI_VALUE},     {"parts", 0, CLI_VALUE},        {"sbatch", 0, CLI_VALUE},
        {"model", 0, CLI_VALUE},  {"merge-sbatch", 0, CLI_VALUE}, {"device", 0, CLI_VALUE},
        {"dry-run", 0, CLI_FLAG}, {"json", 0, CLI_FLAG},          {"quiet", 'q', CLI_FLAG},
        {"help", 'h', CLI_FLAG},  {"index-type", 0, CLI_VALUE},   {0}};
    cli_args a;
    int rc, *is_file = NULL;
    slurm_job j;
    memset(&j, 0, sizeof j);
    if (!cdb_cli_begin("slurm", &a, spec, argc, argv, &rc)) goto done;
    if (a.n_pos == 0 || strcmp(a.pos[0], "ingest")) {
        rc = cdb_cli_usage_error("slurm", a.n_pos ? "unknown slurm command '%s' (slurm ingest)"
                                                  : "missing the command (slurm ingest)%s",
                                 a.n_pos ? a.pos[0] : "");
        goto done;
    }
    if (!(is_file = calloc((size_t)a.n_pos, sizeof *is_file))) {
        rc = cdb_cli_error("out of memory", "cannot write the jobs");
        goto done;
    }
    if ((rc = slurm_job_init(&a, &j, is_file)) != CLI_EXIT_OK) goto done;
    rc = cdb_cli_has(&a, "dry-run") ? slurm_print(&j) : slurm_submit(&a, &j);
done:
    cdb_engine_paths_free(j.roots, j.n_roots);
    free(is_file);
    cdb_cli_args_free(&a);
    return rc;
}
