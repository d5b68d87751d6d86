/*
** cmd_hub.c: models from the Hugging Face Hub, over the engine's hub client
** (engine/engine.h, "models from the Hugging Face Hub"): `clipdb models get NAME|ORG/REPO
** [--revision REV]` prints the snapshot folder on stdout, `clipdb models get --list` the
** short names clipdb knows, and cdb_cli_resolve_model turns the `hf:ORG/REPO` a user
** gives for --model or $CLIPDB_MODEL into that folder (from the cache, fetched when
** missing). The download's progress bar is drawn on stderr when it is a terminal.
*/
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

/* ---- progress ---------------------------------------------------------------------------- */

typedef struct hub_bar {
    int live;            /* stderr is a terminal and not --quiet */
    int drawn;
    int64_t t0_ns, last_ns, done0;
} hub_bar;

static void bar_progress(void *ud, const cdb_engine_hub_progress *p) {
    hub_bar *b = ud;
    int64_t now = cdb_now_ns();
    char done[32], total[32], rate[32];
    double el;
    if (!b->live) return;
    if (p->phase == CDB_ENGINE_PROGRESS_START) {
        b->t0_ns = now;
        b->done0 = p->done;
    } else if (p->phase == CDB_ENGINE_PROGRESS_UPDATE && b->drawn && now - b->last_ns < 100000000LL) {
        return;
    }
    el = (double)(now - b->t0_ns) / 1e9;
    fprintf(stderr, "\r\033[Kget [%d/%d] %s: %s", p->index, p->count, cdb_cli_esc(p->file),
            cdb_cli_fmt_bytes(p->done, done, sizeof done));
    if (p->total >= 0) {
        fprintf(stderr, " / %s", cdb_cli_fmt_bytes(p->total, total, sizeof total));
        if (p->total > 0) fprintf(stderr, " (%d%%)", (int)(100.0 * (double)p->done / (double)p->total));
    }
    if (el > 0.2)
        fprintf(stderr, ", %s/s",
                cdb_cli_fmt_bytes((int64_t)((double)(p->done - b->done0) / el), rate, sizeof rate));
    fflush(stderr);
    b->drawn = 1;
    b->last_ns = now;
}

static void bar_end(hub_bar *b) {
    if (b->live && b->drawn) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
    }
    b->drawn = 0;
}

static int stop_on_signal(void *ud) {
    (void)ud;
    return cdb_cli_interrupted();
}

static cdb_engine_hub_params hub_params(hub_bar *b) {
    cdb_engine_hub_params p = cdb_engine_hub_params_default();
    memset(b, 0, sizeof *b);
    b->live = cdb_cli_stderr_is_tty() && !cdb_cli_quiet();
    p.progress = bar_progress;
    p.should_stop = stop_on_signal;
    p.ud = b;
    return p;
}

/* The error of a failed get, with the hint its case calls for. */
static int hub_fail(cdb_status rc) {
    cdb_engine_err code = cdb_engine_errcode();
    const char *m = cdb_errmsg();
    if (rc == CDB_INTERRUPTED) {
        cdb_cli_error(NULL, "%s", m && *m ? m : "interrupted");
        cdb_cli_hint("run the same command again: the download resumes where it stopped");
        return CLI_EXIT_INTERRUPTED;
    }
    cdb_cli_error(NULL, "%s", m && *m ? m : cdb_status_str(rc));
    switch (code) {
    case CDB_ENGINE_E_HUB_AUTH:
        cdb_cli_hint("set HF_TOKEN to a token of an account that may read it "
                     "(https://huggingface.co/settings/tokens)");
        break;
    case CDB_ENGINE_E_HUB_NOT_FOUND:
        cdb_cli_hint("check the name ('clipdb models get --list' shows the short names) and "
                     "the revision");
        break;
    case CDB_ENGINE_E_HUB_OFFLINE:
        cdb_cli_hint("unset HF_HUB_OFFLINE to download it");
        break;
    case CDB_ENGINE_E_HUB_CHECKSUM:
        cdb_cli_hint("run the same command again; if it fails again, the server or a proxy "
                     "alters the file");
        break;
    case CDB_ENGINE_E_HUB_NETWORK:
        cdb_cli_hint("check the connection (and HF_ENDPOINT); a download cut short resumes "
                     "when run again");
        break;
    case CDB_ENGINE_E_DISK_FULL:
        cdb_cli_hint("free space in the cache (or point HF_HUB_CACHE elsewhere), then run it "
                     "again: the download resumes");
        break;
    default: break;
    }
    return CLI_EXIT_FAIL;
}

/* ---- --model hf:ORG/REPO ------------------------------------------------------------------ */

const char *cdb_cli_resolve_model(const char *given, const char *source) {
    /* the last answer, kept for the process: a command may ask more than once
    ** (cdb_cli_model_path), and is told once (a failure is not printed again) */
    static char *last_given, *resolved;
    static int failed;
    hub_bar b;
    cdb_engine_hub_params p;
    char *path = NULL;
    cdb_status rc;
    if (!given || strncmp(given, "hf:", 3)) return given;
    if (last_given && !strcmp(last_given, given)) return failed ? NULL : resolved;
    p = hub_params(&b);
    rc = cdb_engine_model_path(given, &p, &path);
    bar_end(&b);
    free(last_given);
    cdb_free(resolved);
    resolved = NULL;
    last_given = strdup(given);
    failed = rc != CDB_OK;
    if (rc != CDB_OK) {
        cdb_errctx(rc, "%s %s", source, given);
        hub_fail(rc);
        return NULL;
    }
    resolved = path;
    return resolved;
}

/* ---- models get ------------------------------------------------------------------------------ */

static int print_list(int json) {
    int n;
    const cdb_engine_hub_model *k = cdb_engine_hub_known(&n);
    if (json) {
        cdb_json j;
        cdb_cli_json_init(&j, stdout, 1);
        cdb_json_begin_array(&j);
        for (int i = 0; i < n; i++) {
            cdb_json_begin_object(&j);
            cdb_json_key(&j, "name"); cdb_json_str(&j, k[i].name);
            cdb_json_key(&j, "repo"); cdb_json_str(&j, k[i].repo);
            cdb_json_key(&j, "download"); cdb_json_str(&j, k[i].download);
            cdb_json_key(&j, "ram"); cdb_json_str(&j, k[i].ram);
            cdb_json_key(&j, "recall"); cdb_json_str(&j, k[i].recall);
            cdb_json_key(&j, "runs"); cdb_json_bool(&j, k[i].needs == NULL);
            cdb_json_key(&j, "needs"); cdb_json_str(&j, k[i].needs);
            cdb_json_end_object(&j);
        }
        cdb_json_end_array(&j);
        cdb_json_done(&j);
        return CLI_EXIT_OK;
    }
    printf("%-26s %-34s %8s %7s %6s\n", "NAME", "REPOSITORY", "DOWNLOAD", "RAM", "RECALL");
    for (int i = 0; i < n; i++) {
        printf("%-26s %-34s %8s %7s %6s", k[i].name, k[i].repo, k[i].download, k[i].ram,
               k[i].recall);
        if (k[i].needs) printf("  (needs %s)", k[i].needs);
        putchar('\n');
    }
    printf("\nDOWNLOAD: the files fetched; RAM: the weights loaded in fp32 on the CPU;\n"
           "RECALL: Crossmodal-3600 text-to-image recall as Immich publishes it ('-': none).\n"
           "Any other Hugging Face repository: clipdb models get ORG/NAME.\n");
    return CLI_EXIT_OK;
}

int cdb_cli_cmd_models_get(int argc, char **argv) {
    static const cli_optspec spec[] = {{"revision", 0, CLI_VALUE}, {"list", 0, CLI_FLAG},
                                       {"json", 0, CLI_FLAG},      {"help", 'h', CLI_FLAG},
                                       {"quiet", 'q', CLI_FLAG},   {0}};
    cli_args a;
    int rc = CLI_EXIT_FAIL;
    hub_bar b;
    cdb_engine_hub_params p;
    char *folder = NULL;
    cdb_status st;
    if (!cdb_cli_begin("models", &a, spec, argc, argv, &rc)) goto done;
    if (cdb_cli_has(&a, "list")) {
        if (a.n_pos || cdb_cli_get(&a, "revision")) {
            rc = cdb_cli_usage_error("models", "--list takes no model and no --revision");
            goto done;
        }
        rc = print_list(cdb_cli_has(&a, "json") > 0);
        goto done;
    }
    if (a.n_pos != 1) {
        rc = a.n_pos ? cdb_cli_usage_error("models", "unexpected argument '%s'", a.pos[1])
                     : cdb_cli_usage_error("models", "models get needs a model: a short name "
                                                     "(--list) or ORG/NAME");
        goto done;
    }
    cdb_cli_signals_install();
    cdb_cli_signals_message("\nclipdb: interrupted; stopping the download (it resumes when run "
                            "again)\n");
    p = hub_params(&b);
    p.revision = cdb_cli_get(&a, "revision");
    st = cdb_engine_hub_get(a.pos[0], &p, &folder);
    bar_end(&b);
    if (st != CDB_OK) {
        rc = hub_fail(st);
        goto done;
    }
    if (cdb_cli_has(&a, "json")) {
        cdb_json j;
        cdb_cli_json_doc(&j, NULL);
        cdb_json_key(&j, "model"); cdb_json_str(&j, a.pos[0]);
        cdb_json_path(&j, "folder", folder);
        cdb_json_key(&j, "downloaded"); cdb_json_int(&j, p.n_fetched);
        cdb_json_end_object(&j);
        cdb_json_done(&j);
    } else {
        printf("%s\n", cdb_cli_esc(folder));
    }
    rc = CLI_EXIT_OK;
done:
    cdb_free(folder);
    cdb_cli_args_free(&a);
    return rc;
}
