/*
** test_library.c: the everyday library flows of issue 13, each as a user does it
** with the real binary, each checked against the oracle of lib_util.h (a file's
** stored vector is the embedding of its own bytes, every path is stored once):
**
**   same_names_in_two_folders        `ingest cam1 cam2` (and `reindex`) with the same
**                                    file names: no photo gets another's vector
**   nested_roots_no_duplicates       a folder then its parent, the same folder twice
**   single_file_is_its_own_root      `ingest dir/a.jpg` records the file, not dir
**   index_follows_deletes_and_edits  the index drops deleted and changed ids
**   readonly_database                every read command on a folder it cannot write
**   renamed_folders                  inside a root (moves), a root itself (missing,
**                                    then `clipdb move`, or `ingest` of the new name)
**   transient_failures_are_retried   a permission error is retried, a named
**                                    quarantined file is retried
**   symlinks                         followed only when not already in the library,
**                                    remembered; a dangling link is listed; a link
**                                    whose photo is deleted loses its row
**   forget_and_missing_roots         `forget` gives the space back; a missing root
**                                    keeps its files; nothing re-encoded on return
**   second_model_kept_current        both vector sets complete after reindex;
**                                    `models --default`
**   same_size_same_mtime_replace     a new inode / ctime is a change
**   no_change_rescan_finds_every_row the rescan's per-folder merge join over names that
**                                    sort on both sides of '/', nested roots
*/
#include <signal.h>
#include <sys/wait.h>

#include "lib_util.h"

#define N 30

static int count_files_in(const char *out, const char *needle) {
    int n = 0;
    for (const char *p = out; (p = strstr(p, needle)); p++) n++;
    return n;
}

/* Runs verify and returns its exit code. */
static int verify(const char *db) {
    return lu_expect((const char *[]){"verify", "--db", db, "--quiet", NULL}, 0, NULL);
}

CDB_TEST(same_names_in_two_folders) {
    char cam1[700], cam2[700], db[700], p[900];
    LU_NEED_SETUP();
    LU_PATHS("same", CLI_AT(cam1, "cam1"), CLI_AT(cam2, "cam2"), CLI_AT(db, "db"));
    CHECK_EQ_INT(lu_generate(cam1, 101, 0, N), 0);
    CHECK_EQ_INT(lu_generate(cam2, 202, 0, N), 0); /* the same names, other photos */
    CHECK_EQ_INT(lu_init(db), 0);
    /* many readers and small batches: the walk is far ahead of the readers */
    CHECK_EQ_INT(lu_expect((const char *[]){"ingest", "--db", db, cam1, cam2, "--threads", "4",
                                            "--batch", "3", "--quiet", NULL},
                           0, NULL),
                 0);
    CHECK_EQ_INT(lu_db_is_exact(db, 2 * N), 0);
    for (int i = 0; i < N; i += 7) {
        CHECK_EQ_INT(lu_search_finds_itself(db, lu_img(cam1, i, p, sizeof p)), 0);
        CHECK_EQ_INT(lu_search_finds_itself(db, lu_img(cam2, i, p, sizeof p)), 0);
    }
    /* the nightly job over both recorded folders, after an edit in each: the same
    ** names get other photos' bytes */
    char q[900];
    CHECK_EQ_INT(lu_copy(lu_img(cam2, 9, q, sizeof q), lu_img(cam1, 0, p, sizeof p)), 0);
    CHECK_EQ_INT(lu_copy(lu_img(cam1, 8, q, sizeof q), lu_img(cam2, 1, p, sizeof p)), 0);
    CHECK_EQ_INT(lu_expect((const char *[]){"reindex", "--db", db, "--threads", "4", "--batch", "2",
                                            "--quiet", NULL},
                           0, NULL),
                 0);
    CHECK_EQ_INT(lu_db_is_exact(db, 2 * N), 0);
    CHECK_EQ_INT(verify(db), 0);
}

CDB_TEST(nested_roots_no_duplicates) {
    char x[700], y[700], db[700];
    cli_run_result r;
    LU_NEED_SETUP();
    LU_PATHS("nest", CLI_AT(x, "P/x"), CLI_AT(y, "P/x/y"), CLI_AT(db, "db"));
    CHECK_EQ_INT(lu_generate(y, 11, 0, 8), 0);
    CHECK_EQ_INT(lu_generate(x, 12, 100, 4), 0);
    CHECK_EQ_INT(lu_db_of(db, (const char *[]){y, NULL}, 0), 0);
    /* the parent takes the child over: its 8 photos are not encoded again */
    CHECK_EQ_INT(lu_expect((const char *[]){"ingest", "--db", db, x, NULL}, 0, &r), 0);
    CHECK_MSG(strstr(r.out, " 4 added") && strstr(r.out, " 8 unchanged"), "%s", r.out);
    cli_run_free(&r);
    CHECK_EQ_INT(lu_db_is_exact(db, 12), 0);
    CHECK_EQ_INT(lu_expect((const char *[]){"ingest", "--db", db, x, x, y, NULL}, 0, &r), 0);
    CHECK_MSG(strstr(r.out, " 0 added"), "%s", r.out);
    cli_run_free(&r);
    CHECK_EQ_INT(lu_expect((const char *[]){"folders", "--db", db, NULL}, 0, &r), 0);
    CHECK_EQ_INT(count_files_in(r.out, "folder "), 1);
    cli_run_free(&r);
    CHECK_EQ_INT(lu_expect((const char *[]){"reindex", "--db", db, "--quiet", NULL}, 0, NULL), 0);
    CHECK_EQ_INT(lu_db_is_exact(db, 12), 0);
    CHECK_EQ_INT(verify(db), 0);
}

CDB_TEST(single_file_is_its_own_root) {
    char dir[700], db[700], a[900];
    cli_run_result r;
    LU_NEED_SETUP();
    LU_PATHS("single", CLI_AT(dir, "Downloads"), CLI_AT(db, "db"));
    CHECK_EQ_INT(lu_generate(dir, 21, 0, 6), 0);
    CHECK_EQ_INT(lu_init(db), 0);
    lu_img(dir, 2, a, sizeof a);
    CHECK_EQ_INT(lu_expect((const char *[]){"ingest", "--db", db, a, "--quiet", NULL}, 0, NULL), 0);
    CHECK_EQ_INT(lu_expect((const char *[]){"reindex", "--db", db, "--quiet", NULL}, 0, NULL), 0);
    CHECK_EQ_INT(lu_db_is_exact(db, 1), 0); /* not the rest of the folder */
    CHECK_EQ_INT(lu_expect((const char *[]){"folders", "--db", db, NULL}, 0, &r), 0);
    CHECK_MSG(strstr(r.out, " file ") && strstr(r.out, a), "%s", r.out);
    cli_run_free(&r);
    /* the folder, later: it takes the file root over, the file is not encoded again */
    CHECK_EQ_INT(lu_expect((const char *[]){"ingest", "--db", db, dir, NULL}, 0, &r), 0);
    CHECK_MSG(strstr(r.out, " 5 added") && strstr(r.out, " 1 unchanged"), "%s", r.out);
    cli_run_free(&r);
    CHECK_EQ_INT(lu_db_is_exact(db, 6), 0);
    CHECK_EQ_INT(verify(db), 0);
}

CDB_TEST(index_follows_deletes_and_edits) {
    char lib[700], db[700], p[900], q[900];
    cli_run_result r;
    LU_NEED_SETUP();
    LU_PATHS("drift", CLI_AT(lib, "photos"), CLI_AT(db, "db"));
    CHECK_EQ_INT(lu_generate_db(lib, 31, 12, db, 1), 0);
    remove(lu_img(lib, 3, p, sizeof p));
    CHECK_EQ_INT(lu_copy(lu_img(lib, 5, q, sizeof q), lu_img(lib, 4, p, sizeof p)), 0); /* edit */
    CHECK_EQ_INT(lu_expect((const char *[]){"reindex", "--db", db, NULL}, 0, &r), 0);
    CHECK_MSG(strstr(r.out, "1 changed") && strstr(r.out, "1 deleted"), "%s", r.out);
    cli_run_free(&r);
    CHECK_EQ_INT(verify(db), 0); /* the index covers exactly what is stored */
    CHECK_EQ_INT(lu_expect((const char *[]){"index", "info", "--db", db, "--json", NULL}, 0, &r), 0);
    CHECK_MSG(strstr(r.out, "\"covered\": 11"), "%s", r.out);
    cli_run_free(&r);
    CHECK_EQ_INT(lu_expect((const char *[]){"reindex", "--db", db, NULL}, 0, &r), 0);
    CHECK_MSG(strstr(r.out, "index: up to date"), "%s", r.out);
    cli_run_free(&r);
    CHECK_EQ_INT(lu_search_finds_itself(db, lu_img(lib, 4, p, sizeof p)), 0);
    CHECK_EQ_INT(lu_db_is_exact(db, 11), 0);
}

/* Runs clipdb as user nobody (when root: the copies of lu_reader_kit, so a checkout
** nobody cannot enter works) on a database it can only read; as this user otherwise. */
static int run_as_reader(const char *const *args, cli_run_result *r) {
    const char *all[40] = {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                           lu_reader_bin};
    int n = getuid() == 0 ? 5 : 0;
    if (n == 0) return cli_run(args, r);
    if (lu_reader_kit() != 0) return -1000;
    for (int i = 0; args[i] && n < 39; i++) all[n++] = args[i];
    all[n] = NULL;
    /* cli_run_in runs CLIPDB_BIN with args: run setpriv through a shell-free exec */
    pid_t pid;
    int po[2], pe[2], st = 0;
    memset(r, 0, sizeof *r);
    if (pipe(po) || pipe(pe)) return -1000;
    if ((pid = fork()) == 0) {
        dup2(po[1], 1);
        dup2(pe[1], 2);
        close(po[0]), close(pe[0]), close(po[1]), close(pe[1]);
        setenv("NO_COLOR", "1", 1);
        unsetenv("CLIPDB_DB");
        lu_reader_env();
        execv(all[0], (char *const *)all);
        _exit(127);
    }
    close(po[1]);
    close(pe[1]);
    char buf[65536];
    ssize_t k;
    r->out = calloc(1, 1);
    r->err = calloc(1, 1);
    while ((k = read(po[0], buf, sizeof buf)) > 0) cli_run_append_(&r->out, &r->out_len, buf, (size_t)k);
    while ((k = read(pe[0], buf, sizeof buf)) > 0) cli_run_append_(&r->err, &r->err_len, buf, (size_t)k);
    close(po[0]);
    close(pe[0]);
    waitpid(pid, &st, 0);
    return r->exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int listing(const char *dir, char *out, size_t size) {
    char cmd[4000];
    snprintf(cmd, sizeof cmd, "ls -la --time-style=+ %s %s/shards %s/index 2>&1 | md5sum", dir, dir,
             dir);
    FILE *f = popen(cmd, "r");
    if (!f) return -1;
    size_t k = fread(out, 1, size - 1, f);
    out[k] = '\0';
    return pclose(f);
}

CDB_TEST(readonly_database) {
    char lib[700], db[700], ro[700], p[900], cmd[6000], before[256], after[256], out[800];
    cli_run_result r;
    LU_NEED_SETUP();
    LU_PATHS("ro", CLI_AT(lib, "photos"), CLI_AT(db, "db"), CLI_AT(ro, "shared.clipdb"),
             CLI_AT(out, "out"));
    CHECK_EQ_INT(lu_generate_db(lib, 41, 10, db, 1), 0);
    /* a copy another account can read and not write (no -wal, no -shm: closed) */
    snprintf(cmd, sizeof cmd,
             "cp -a %s %s && chmod a+rx %s %s/ro && chmod -R a+rX %s && chmod -R a-w %s && mkdir -p %s "
             "&& chmod 777 %s",
             db, ro, lu_tmp, lu_tmp, lu_tmp, ro, out, out);
    CHECK_EQ_INT(system(cmd), 0);
    CHECK_EQ_INT(listing(ro, before, sizeof before), 0);
    const char *cmds[][8] = {
        {"search", "--db", ro, "a red circle", "-k", "3", NULL},
        {"search", "--db", ro, "--image", lu_img(lib, 1, p, sizeof p), NULL},
        {"stats", "--db", ro, NULL},
        {"verify", "--db", ro, NULL},
        {"verify", "--db", ro, "--deep", "--sample", "1", NULL},
        {"errors", "--db", ro, NULL},
        {"folders", "--db", ro, NULL},
        {"export", "--db", ro, "--out", out, NULL},
        {"index", "info", "--db", ro, NULL},
        {"models", "--db", ro, NULL},
    };
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        int rc = run_as_reader(cmds[i], &r);
        CHECK_MSG(rc == 0, "clipdb %s %s: exit %d\n%s%s", cmds[i][0], cmds[i][1], rc, r.out, r.err);
        cli_run_free(&r);
    }
    /* writers are refused with a message, not a crash */
    const char *wr[] = {"reindex", "--db", ro, NULL};
    CHECK_EQ_INT(run_as_reader(wr, &r), 1);
    cli_run_free(&r);
    CHECK_EQ_INT(listing(ro, after, sizeof after), 0);
    CHECK_MSG(!strcmp(before, after), "the readers changed the database folder");
    snprintf(cmd, sizeof cmd, "chmod -R u+w %s", ro);
    CHECK_EQ_INT(system(cmd), 0);
}

CDB_TEST(renamed_folders) {
    char root[700], a[700], a2[700], a3[700], sub[700], sub2[700], db[700];
    cli_run_result r;
    LU_NEED_SETUP();
    LU_PATHS("ren", CLI_AT(root, "L"), CLI_AT(a, "L/a"), CLI_AT(a2, "L/a2"), CLI_AT(a3, "L/a3"),
             CLI_AT(sub, "L/b/trip"), CLI_AT(sub2, "L/b/trip-2024"), CLI_AT(db, "db"));
    CHECK_EQ_INT(lu_generate(a, 51, 0, 6), 0);
    CHECK_EQ_INT(lu_generate(sub, 52, 0, 6), 0);
    char b[700];
    lu_path(b, sizeof b, "ren/L/b");
    CHECK_EQ_INT(lu_db_of(db, (const char *[]){a, b, NULL}, 0), 0);
    /* a folder renamed inside a recorded folder: its photos moved, nothing encoded */
    CHECK_EQ_INT(rename(sub, sub2), 0);
    CHECK_EQ_INT(lu_expect((const char *[]){"reindex", "--db", db, NULL}, 0, &r), 0);
    CHECK_MSG(strstr(r.out, "6 moved") && strstr(r.out, " 0 added"), "%s", r.out);
    cli_run_free(&r);
    CHECK_EQ_INT(lu_db_is_exact(db, 12), 0);
    /* a recorded folder renamed: missing, its photos kept, one line, exit 3 */
    CHECK_EQ_INT(rename(a, a2), 0);
    CHECK_EQ_INT(lu_expect((const char *[]){"reindex", "--db", db, NULL}, 3, &r), 3);
    CHECK_MSG(count_files_in(r.err, "is missing") == 1, "%s", r.err);
    cli_run_free(&r);
    CHECK_EQ_INT(lu_export_count(db), 12);
    CHECK_EQ_INT(lu_expect((const char *[]){"errors", "--db", db, NULL}, 0, &r), 0);
    CHECK_MSG(strstr(r.out, a) && strstr(r.out, "missing"), "%s", r.out);
    cli_run_free(&r);
    CHECK_EQ_INT(lu_expect((const char *[]){"move", "--db", db, a, a2, "--quiet", NULL}, 0, NULL), 0);
    CHECK_EQ_INT(lu_expect((const char *[]){"reindex", "--db", db, NULL}, 0, &r), 0);
    CHECK_MSG(strstr(r.out, " 0 added"), "%s", r.out);
    cli_run_free(&r);
    CHECK_EQ_INT(lu_db_is_exact(db, 12), 0);
    /* renamed again, and this time the new name is ingested without `clipdb move`: a
    ** new folder (a missing root's rows stay as they are: it may come back), and the
    ** old root stays listed as missing with its photos until it is forgotten */
    CHECK_EQ_INT(rename(a2, a3), 0);
    CHECK_EQ_INT(lu_expect((const char *[]){"ingest", "--db", db, a3, NULL}, 0, &r), 0);
    CHECK_MSG(strstr(r.out, "6 added") && strstr(r.out, " 0 moved"), "%s", r.out);
    cli_run_free(&r);
    CHECK_EQ_INT(lu_expect((const char *[]){"reindex", "--db", db, NULL}, 3, &r), 3);
    CHECK_MSG(strstr(r.err, "is missing"), "%s", r.err);
    cli_run_free(&r);
    CHECK_EQ_INT(lu_expect((const char *[]){"forget", "--db", db, a2, "--quiet", NULL}, 0, NULL), 0);
    CHECK_EQ_INT(lu_expect((const char *[]){"folders", "--db", db, NULL}, 0, &r), 0);
    CHECK_MSG(!strstr(r.out, a2) && strstr(r.out, a3), "%s", r.out);
    cli_run_free(&r);
    CHECK_EQ_INT(lu_expect((const char *[]){"reindex", "--db", db, "--quiet", NULL}, 0, NULL), 0);
    CHECK_EQ_INT(lu_db_is_exact(db, 12), 0);
    (void)root;
}

CDB_TEST(transient_failures_are_retried) {
    char lib[700], db[700], p[900], env[900], logf[800], logv[900];
    cli_run_result r;
    LU_NEED_SETUP();
    if (!CDB_FAULT_SHIM[0]) CDB_SKIP("no fault shim");
    LU_PATHS("retry", CLI_AT(lib, "photos"), CLI_AT(db, "db"), CLI_AT(logf, "fault.log"));
    CHECK_EQ_INT(lu_generate(lib, 61, 0, 8), 0);
    CHECK_EQ_INT(lu_init(db), 0);
    lu_img(lib, 3, p, sizeof p);
    snprintf(env, sizeof env, "CDB_FAULT_EACCES_MATCH=%s", strrchr(p, '/'));
    snprintf(logv, sizeof logv, "CDB_FAULT_LOG=%s", logf);
    const char *fault_env[] = {"LD_PRELOAD=" CDB_FAULT_SHIM, env, logv, NULL};
    CHECK_EQ_INT(lu_run_env((const char *[]){"ingest", "--db", db, lib, NULL}, fault_env, &r), 3);
    CHECK_MSG(strstr(r.out, "7 added") && strstr(r.out, "1 to retry"), "%s%s", r.out, r.err);
    cli_run_free(&r);
    char *log = cli_read_file(logf, NULL);
    CHECK_MSG(log && strstr(log, "EACCES"), "the fault was not injected");
    free(log);
    CHECK_EQ_INT(lu_expect((const char *[]){"errors", "--db", db, NULL}, 0, &r), 0);
    CHECK_MSG(strstr(r.out, p) && strstr(r.out, "will retry: ") && strstr(r.out, "Permission denied"),
              "%s", r.out);
    cli_run_free(&r);
    /* readable again (same size, same times): the next run stores it */
    CHECK_EQ_INT(lu_expect((const char *[]){"reindex", "--db", db, NULL}, 0, &r), 0);
    CHECK_MSG(strstr(r.out, "1 added"), "%s", r.out);
    cli_run_free(&r);
    CHECK_EQ_INT(lu_db_is_exact(db, 8), 0);
    /* a named file is retried even when quarantined */
    char bad[900];
    snprintf(bad, sizeof bad, "%s/broken.jpg", lib);
    CHECK_EQ_INT(lu_write(bad, "\xff\xd8\xff\xe0 not really", 15), 0);
    CHECK_EQ_INT(lu_expect((const char *[]){"reindex", "--db", db, NULL}, 3, &r), 3);
    CHECK_MSG(strstr(r.out, "1 error,"), "%s", r.out);
    cli_run_free(&r);
    CHECK_EQ_INT(lu_expect((const char *[]){"reindex", "--db", db, NULL}, 0, &r), 0); /* skipped */
    cli_run_free(&r);
    CHECK_EQ_INT(lu_expect((const char *[]){"ingest", "--db", db, bad, NULL}, 3, &r), 3);
    CHECK_MSG(strstr(r.out, "1 error,") && strstr(r.out, "0 unchanged"), "%s", r.out);
    cli_run_free(&r);
    CHECK_EQ_INT(verify(db), 0);
}

CDB_TEST(symlinks) {
    char lib[700], real[700], links[700], out[700], db[700], p[900], q[900];
    cli_run_result r;
    LU_NEED_SETUP();
    LU_PATHS("links", CLI_AT(lib, "S"), CLI_AT(real, "S/real"), CLI_AT(links, "S/links"),
             CLI_AT(out, "outside"), CLI_AT(db, "db"));
    CHECK_EQ_INT(lu_generate(real, 71, 0, 4), 0);
    CHECK_EQ_INT(lu_generate(out, 72, 10, 2), 0);
    CHECK_EQ_INT(lu_mkdirs(links), 0);
    snprintf(p, sizeof p, "%s/photo.jpg", links);
    CHECK_EQ_INT(symlink(lu_img(real, 0, q, sizeof q), p), 0); /* a photo already in the library */
    snprintf(p, sizeof p, "%s/again", links);
    CHECK_EQ_INT(symlink(real, p), 0);                          /* a folder already in it */
    snprintf(p, sizeof p, "%s/elsewhere", links);
    CHECK_EQ_INT(symlink(out, p), 0);                           /* photos that are not */
    snprintf(p, sizeof p, "%s/gone.jpg", links);
    CHECK_EQ_INT(symlink("/nonexistent/gone.jpg", p), 0);       /* a dangling link */
    CHECK_EQ_INT(lu_init(db), 0);
    CHECK_EQ_INT(lu_expect((const char *[]){"ingest", "--db", db, "--follow-symlinks", lib, NULL}, 3,
                           &r),
                 3);
    cli_run_free(&r);
    CHECK_EQ_INT(lu_db_is_exact(db, 6), 0); /* 4 at their real paths + 2 through the link */
    snprintf(p, sizeof p, "%s/elsewhere/img_0000010", links);
    lu_export e;
    CHECK_EQ_INT(lu_export_read(db, &e), 0);
    int through = 0;
    for (int i = 0; i < e.n; i++) through += strstr(e.paths[i], p) != NULL;
    CHECK_EQ_INT(through, 1);
    lu_export_free(&e);
    CHECK_EQ_INT(lu_expect((const char *[]){"errors", "--db", db, NULL}, 0, &r), 0);
    CHECK_MSG(strstr(r.out, "gone.jpg") && strstr(r.out, "broken symbolic link"), "%s", r.out);
    cli_run_free(&r);
    /* the nightly job follows them too (the setting is the folder's) */
    CHECK_EQ_INT(lu_expect((const char *[]){"reindex", "--db", db, NULL}, 3, &r), 3);
    CHECK_MSG(strstr(r.out, " 0 deleted") && strstr(r.out, " 0 added"), "%s", r.out);
    cli_run_free(&r);
    CHECK_EQ_INT(lu_db_is_exact(db, 6), 0);
    /* no longer followed: the photos reached through the link are dropped */
    snprintf(p, sizeof p, "%s/gone.jpg", links);
    remove(p);
    CHECK_EQ_INT(lu_expect((const char *[]){"ingest", "--db", db, "--no-follow-symlinks", lib, NULL},
                           0, &r),
                 0);
    CHECK_MSG(strstr(r.out, "2 deleted"), "%s", r.out);
    cli_run_free(&r);
    CHECK_EQ_INT(lu_db_is_exact(db, 4), 0);
    CHECK_EQ_INT(lu_expect((const char *[]){"errors", "--db", db, NULL}, 0, &r), 0);
    CHECK_MSG(r.out[0] == '\0', "errors after the link was removed: %s", r.out);
    cli_run_free(&r);
    /* a followed link whose photo is then deleted: the photo is gone, so is its row
    ** (the link itself is still there, and reported as broken) */
    char out2[700];
    lu_path(out2, sizeof out2, "links/outside2");
    CHECK_EQ_INT(lu_generate(out2, 73, 20, 1), 0);
    snprintf(p, sizeof p, "%s/one.jpg", links);
    CHECK_EQ_INT(symlink(lu_img(out2, 20, q, sizeof q), p), 0);
    CHECK_EQ_INT(lu_expect((const char *[]){"ingest", "--db", db, "--follow-symlinks", lib, NULL}, 0,
                           &r),
                 0);
    cli_run_free(&r);
    CHECK_EQ_INT(lu_db_is_exact(db, 7), 0); /* 4 + 2 through the folder link + one.jpg */
    CHECK_EQ_INT(remove(q), 0);
    CHECK_EQ_INT(lu_expect((const char *[]){"reindex", "--db", db, NULL}, 3, &r), 3);
    CHECK_MSG(strstr(r.out, " 1 deleted"), "%s", r.out);
    cli_run_free(&r);
    CHECK_EQ_INT(lu_db_is_exact(db, 6), 0);
    CHECK_EQ_INT(lu_expect((const char *[]){"errors", "--db", db, NULL}, 0, &r), 0);
    CHECK_MSG(strstr(r.out, "one.jpg") && strstr(r.out, "broken symbolic link"), "%s", r.out);
    cli_run_free(&r);
}

static int64_t du_bytes(const char *dir) {
    char cmd[1200], out[64] = "";
    snprintf(cmd, sizeof cmd, "du -sb %s | cut -f1", dir);
    FILE *f = popen(cmd, "r");
    if (!f) return -1;
    if (!fgets(out, sizeof out, f)) out[0] = '\0';
    pclose(f);
    return atoll(out);
}

CDB_TEST(forget_and_missing_roots) {
    char big[700], small[700], db[700], moved[700];
    cli_run_result r;
    LU_NEED_SETUP();
    LU_PATHS("forget", CLI_AT(big, "big"), CLI_AT(small, "small"), CLI_AT(moved, "small.away"),
             CLI_AT(db, "db"));
    CHECK_EQ_INT(lu_generate(big, 81, 0, 60), 0);
    CHECK_EQ_INT(lu_generate(small, 82, 0, 5), 0);
    CHECK_EQ_INT(lu_db_of(db, (const char *[]){big, small, NULL}, 1), 0);
    int64_t before = du_bytes(db);
    CHECK_EQ_INT(lu_expect((const char *[]){"forget", "--db", db, big, NULL}, 0, &r), 0);
    CHECK_MSG(strstr(r.out, "60 files"), "%s", r.out);
    cli_run_free(&r);
    int64_t after = du_bytes(db);
    CHECK_MSG(after < before, "forget freed no space: %lld -> %lld bytes", (long long)before,
              (long long)after);
    CHECK_EQ_INT(verify(db), 0);
    CHECK_EQ_INT(lu_db_is_exact(db, 5), 0);
    CHECK_EQ_INT(lu_expect((const char *[]){"index", "info", "--db", db, "--json", NULL}, 0, &r), 0);
    CHECK_MSG(strstr(r.out, "\"covered\": 5"), "%s", r.out);
    cli_run_free(&r);
    /* a recorded folder that is gone (a drive not mounted) is never "all deleted" */
    CHECK_EQ_INT(rename(small, moved), 0);
    CHECK_EQ_INT(lu_expect((const char *[]){"reindex", "--db", db, NULL}, 3, &r), 3);
    CHECK_MSG(strstr(r.out, " 0 deleted"), "%s", r.out);
    cli_run_free(&r);
    CHECK_EQ_INT(lu_export_count(db), 5);
    CHECK_EQ_INT(lu_expect((const char *[]){"folders", "--db", db, NULL}, 0, &r), 0);
    CHECK_MSG(strstr(r.out, "missing"), "%s", r.out);
    cli_run_free(&r);
    /* back again: nothing is read or encoded again */
    CHECK_EQ_INT(rename(moved, small), 0);
    CHECK_EQ_INT(lu_expect((const char *[]){"reindex", "--db", db, NULL}, 0, &r), 0);
    CHECK_MSG(strstr(r.out, " 0 added") && strstr(r.out, " 5 unchanged"), "%s", r.out);
    cli_run_free(&r);
    CHECK_EQ_INT(lu_db_is_exact(db, 5), 0);
    /* forgetting a folder forgotten before says it is done already (exit 0, issue
    ** 32: the same forget again, e.g. after a kill); one never recorded is an error */
    CHECK_EQ_INT(lu_expect((const char *[]){"forget", "--db", db, big, NULL}, 0, &r), 0);
    CHECK_MSG(strstr(r.out, "was forgotten already: nothing to do"), "%s", r.out);
    cli_run_free(&r);
    CHECK_EQ_INT(lu_expect((const char *[]){"forget", "--db", db, moved, NULL}, 1, NULL), 1);
}

CDB_TEST(second_model_kept_current) {
    char lib[700], db[700], m2[700];
    cli_run_result r;
    LU_NEED_SETUP();
    snprintf(m2, sizeof m2, "%s/tests/golden/models/hf_gelu", CDB_SOURCE_DIR);
    LU_PATHS("models", CLI_AT(lib, "photos"), CLI_AT(db, "db"));
    CHECK_EQ_INT(lu_generate_db(lib, 91, 6, db, 0), 0);
    CHECK_EQ_INT(lu_expect((const char *[]){"ingest", "--db", db, "--model", m2, lib, NULL}, 0, &r), 0);
    CHECK_MSG(strstr(r.out, "[hf_gelu]") && strstr(r.out, "6 added"), "%s", r.out);
    cli_run_free(&r);
    CHECK_EQ_INT(lu_generate(lib, 92, 100, 3), 0);
    /* not complete yet: cannot become the default */
    CHECK_EQ_INT(lu_expect((const char *[]){"ingest", "--db", db, "--model", lu_model, lib, "--quiet",
                                            NULL},
                           0, NULL),
                 0);
    CHECK_EQ_INT(lu_expect((const char *[]){"models", "--db", db, NULL}, 0, &r), 0);
    CHECK_MSG(!strstr(r.out, "without"), "both sets complete after ingest: %s", r.out);
    cli_run_free(&r);
    CHECK_EQ_INT(lu_generate(lib, 93, 200, 2), 0);
    CHECK_EQ_INT(lu_expect((const char *[]){"reindex", "--db", db, "--model", "1", "--quiet", NULL},
                           0, NULL),
                 0);
    CHECK_EQ_INT(lu_expect((const char *[]){"models", "--db", db, "--default", "hf_gelu", NULL}, 1,
                           &r),
                 1);
    CHECK_MSG(strstr(r.err, "no vector yet for 2"), "%s", r.err);
    cli_run_free(&r);
    CHECK_EQ_INT(lu_expect((const char *[]){"reindex", "--db", db, NULL}, 0, &r), 0);
    CHECK_MSG(strstr(r.out, "reindex [hf_gelu]") && strstr(r.out, "2 added"), "%s", r.out);
    cli_run_free(&r);
    CHECK_EQ_INT(lu_expect((const char *[]){"models", "--db", db, "--default", "hf_gelu", NULL}, 0,
                           NULL),
                 0);
    CHECK_EQ_INT(lu_expect((const char *[]){"stats", "--db", db, NULL}, 0, &r), 0);
    CHECK_MSG(strstr(r.out, "* hf_gelu (48 dims): 11 vectors") &&
                  strstr(r.out, "shapes-vit-tiny (128 dims): 11 vectors"),
              "%s", r.out);
    cli_run_free(&r);
    CHECK_EQ_INT(verify(db), 0);
}

CDB_TEST(same_size_same_mtime_replace) {
    char lib[700], db[700], a[900], tmp[900];
    size_t n1 = 0, n2 = 0;
    cli_run_result r;
    LU_NEED_SETUP();
    LU_PATHS("replace", CLI_AT(lib, "photos"), CLI_AT(db, "db"));
    CHECK_EQ_INT(lu_generate(lib, 95, 0, 3), 0);
    unsigned char *x = lu_ppm(48, 40, 1, &n1), *y = lu_ppm(48, 40, 2, &n2), *z = lu_ppm(48, 40, 3, &n2);
    CHECK(x && y && z && n1 == n2);
    snprintf(a, sizeof a, "%s/scan.ppm", lib);
    CHECK_EQ_INT(lu_write(a, x, n1), 0);
    CHECK_EQ_INT(lu_db_of(db, (const char *[]){lib, NULL}, 0), 0);
    int64_t mt = lu_mtime(a);
    /* rewritten in place, the mtime set back: only the ctime says so */
    CHECK_EQ_INT(lu_write(a, y, n2), 0);
    CHECK_EQ_INT(lu_set_mtime(a, mt), 0);
    CHECK_EQ_INT(lu_expect((const char *[]){"reindex", "--db", db, NULL}, 0, &r), 0);
    CHECK_MSG(strstr(r.out, "1 changed"), "%s", r.out);
    cli_run_free(&r);
    CHECK_EQ_INT(lu_db_is_exact(db, 4), 0);
    /* replaced by another file (a new inode), same size, same mtime */
    snprintf(tmp, sizeof tmp, "%s/.incoming", lib);
    CHECK_EQ_INT(lu_write(tmp, z, n2), 0);
    CHECK_EQ_INT(lu_set_mtime(tmp, mt), 0);
    CHECK_EQ_INT(rename(tmp, a), 0);
    CHECK_EQ_INT(lu_expect((const char *[]){"reindex", "--db", db, NULL}, 0, &r), 0);
    CHECK_MSG(strstr(r.out, "1 changed"), "%s", r.out);
    cli_run_free(&r);
    CHECK_EQ_INT(lu_db_is_exact(db, 4), 0);
    CHECK_EQ_INT(lu_search_finds_itself(db, a), 0);
    free(x);
    free(y);
    free(z);
}

/* The rescan's merge join (scan.c, cdb_db_folder_read) in a tree whose names sort on both
** sides of '/' (a folder "a" among files "a.jpg", "a b/...", "a-1.jpg", "a0/..."), several
** levels deep, under a root nested in another: a reindex that finds nothing changed
** counts every photo unchanged (a row the join failed to find would be read again and
** counted otherwise); a new folder and a new file between the old names are the only
** additions; a deleted file in a folder the walk returns to is the only deletion. */
static const char *const k_join_paths[] = {
    "a.jpg", "a/y.jpg", "a/c.jpg", "a/c/d/e.jpg", "a/c d/f.jpg", "a b/x.jpg", "a-1.jpg",
    "a.b/w.jpg", "a0/z.jpg", "b.jpg", "a/c/g.jpg", "a/c.d/h.jpg", "a/c0.jpg"};
#define N_JOIN (int)(sizeof k_join_paths / sizeof *k_join_paths)

CDB_TEST(no_change_rescan_finds_every_row) {
    char pool[700], top[700], db[700], src[900], dst[1200], want[64];
    cli_run_result r;
    LU_NEED_SETUP();
    lu_path(pool, sizeof pool, "join/pool");
    lu_path(top, sizeof top, "join/top");
    lu_path(db, sizeof db, "join/db");
    CHECK_EQ_INT(lu_generate(pool, 31, 0, N_JOIN + 2), 0);
    for (int i = 0; i < N_JOIN; i++) {
        snprintf(dst, sizeof dst, "%s/%s", top, k_join_paths[i]);
        *strrchr(dst, '/') = '\0';
        CHECK_EQ_INT(lu_mkdirs(dst), 0);
        snprintf(dst, sizeof dst, "%s/%s", top, k_join_paths[i]);
        CHECK_EQ_INT(lu_copy(lu_img(pool, i, src, sizeof src), dst), 0);
    }
    CHECK_EQ_INT(lu_init(db), 0);
    snprintf(dst, sizeof dst, "%s/a/c", top); /* a root first, then its parent's parent */
    CHECK_EQ_INT(lu_expect((const char *[]){"ingest", "--db", db, dst, "--quiet", NULL}, 0, NULL),
                 0);
    CHECK_EQ_INT(lu_expect((const char *[]){"ingest", "--db", db, top, "--quiet", NULL}, 0, NULL),
                 0);
    CHECK_EQ_INT(lu_db_is_exact(db, N_JOIN), 0);
    CHECK_EQ_INT(lu_expect((const char *[]){"reindex", "--db", db, NULL}, 0, &r), 0);
    snprintf(want, sizeof want, " %d unchanged", N_JOIN);
    CHECK_MSG(strstr(r.out, " 0 added, 0 changed, 0 moved, 0 deleted") && strstr(r.out, want),
              "%s", r.out);
    cli_run_free(&r);
    /* new between the old names: a folder "a.a" and a file "a/c-"; "a/c.jpg" deleted */
    snprintf(dst, sizeof dst, "%s/a.a", top);
    CHECK_EQ_INT(lu_mkdirs(dst), 0);
    snprintf(dst, sizeof dst, "%s/a.a/n.jpg", top);
    CHECK_EQ_INT(lu_copy(lu_img(pool, N_JOIN, src, sizeof src), dst), 0);
    snprintf(dst, sizeof dst, "%s/a/c-.jpg", top);
    CHECK_EQ_INT(lu_copy(lu_img(pool, N_JOIN + 1, src, sizeof src), dst), 0);
    snprintf(dst, sizeof dst, "%s/a/c.jpg", top);
    CHECK_EQ_INT(unlink(dst), 0);
    CHECK_EQ_INT(lu_expect((const char *[]){"reindex", "--db", db, NULL}, 0, &r), 0);
    snprintf(want, sizeof want, " %d unchanged", N_JOIN - 1);
    CHECK_MSG(strstr(r.out, " 2 added, 0 changed, 0 moved, 1 deleted") && strstr(r.out, want),
              "%s", r.out);
    cli_run_free(&r);
    CHECK_EQ_INT(lu_db_is_exact(db, N_JOIN + 1), 0);
    CHECK_EQ_INT(verify(db), 0);
}

CDB_TEST_MAIN_TMP(lu_tmp, lu_rm_rf, same_names_in_two_folders, nested_roots_no_duplicates,
                  single_file_is_its_own_root, index_follows_deletes_and_edits, readonly_database,
                  renamed_folders, transient_failures_are_retried, symlinks,
                  forget_and_missing_roots, second_model_kept_current, same_size_same_mtime_replace,
                  no_change_rescan_finds_every_row)
