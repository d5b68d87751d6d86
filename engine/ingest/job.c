/*
** job.c: the job and the pipeline's context (ingest.h), what the two halves of the
** ingest pipeline share: pipeline.c (the stages) and scan.c (the walker's side) both
** free jobs, stop on a fatal error, and report progress through these.
*/
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "engine/ingest/ingest.h"

void cdb_job_free(job *j) {
    if (!j) return;
    cdb_eng_thumb_clear(&j->thumb);
    free(j->relpath);
    free(j->path);
    free(j->pixels);
    free(j->vec);
    free(j);
}

cdb_status cdb_pipe_fatal(pipe_ctx *c, cdb_status rc, const char *fmt, ...) {
    va_list ap;
    pthread_mutex_lock(&c->mu);
    if (!c->fatal[0]) {
        va_start(ap, fmt);
        vsnprintf(c->fatal, sizeof c->fatal, fmt, ap);
        va_end(ap);
        c->fatal_rc = rc != CDB_OK ? rc : CDB_ERROR;
    }
    pthread_mutex_unlock(&c->mu);
    atomic_store(&c->abort, 1);
    return rc;
}

int cdb_pipe_stopping(pipe_ctx *c) { return atomic_load(&c->stop) || atomic_load(&c->abort); }

void cdb_pipe_tick(pipe_ctx *c) {
    if (cdb_eng_should_stop(c->ev)) atomic_store(&c->stop, 1);
    cdb_eng_progress(c->ev, CDB_ENGINE_PROGRESS_UPDATE, c->label, atomic_load(&c->n_done),
                 c->prog_total, atomic_load(&c->n_errors));
}
