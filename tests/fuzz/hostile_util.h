/*
** hostile_util.h: helpers for the hostile-input tests (test_hostile_*.c): peak
** memory, wall time, and running one check in a child process so that a crash
** (SIGSEGV, SIGFPE, an abort) is reported as that check's failure with the signal,
** instead of taking the whole test program down.
*/
#ifndef CDB_HOSTILE_UTIL_H
#define CDB_HOSTILE_UTIL_H

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Peak resident set size of this process so far, in MiB (never decreases). */
static inline double hostile_peak_rss_mb(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0;
}

static inline double hostile_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Runs fn(arg) in a child. Returns 0 when it exited 0; otherwise prints why and
** returns 1 (exit status) or 2 (killed by a signal). fn returns 0 for success. */
static inline int hostile_in_child(const char *what, int (*fn)(void *), void *arg) {
    int status = 0;
    pid_t pid;
    fflush(stdout);
    fflush(stderr);
    pid = fork();
    if (pid < 0) return 1;
    if (pid == 0) _exit(fn(arg) ? 1 : 0);
    if (waitpid(pid, &status, 0) < 0) return 1;
    if (WIFSIGNALED(status)) {
        fprintf(stderr, "    %s: killed by signal %d (%s)\n", what, WTERMSIG(status),
                strsignal(WTERMSIG(status)));
        return 2;
    }
    if (WEXITSTATUS(status) != 0) {
        fprintf(stderr, "    %s: failed (exit %d)\n", what, WEXITSTATUS(status));
        return 1;
    }
    return 0;
}

#endif
