/*
** signals.c: Ctrl-C handling. The first SIGINT (or SIGTERM) only sets a flag; the
** ingest/reindex pipelines poll it between batches, stop reading new files, let
** the batch in flight reach the database, commit, and exit 130. A second signal
** means "now": the default action runs (committed work is safe by the database's
** write order, DESIGN.md).
*/
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"

static volatile sig_atomic_t g_interrupted;
static const char *g_msg = "\nclipdb: interrupted; finishing the current batch "
                           "(press Ctrl-C again to stop now)\n";

static void on_signal(int sig) {
    if (g_interrupted) {
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    g_interrupted = 1;
    (void)!write(STDERR_FILENO, g_msg, strlen(g_msg));
}

void cdb_cli_signals_message(const char *msg) { g_msg = msg; }

void cdb_cli_signals_install(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

int cdb_cli_interrupted(void) { return g_interrupted != 0; }
