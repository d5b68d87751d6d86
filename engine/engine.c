/*
** engine.c: the façade of engine/ (engine.h): opening and closing a handle, over the
** parts below it. The parts and their arrows, each with one header:
**
**   engine.c  ->  ingest/  ->  library/  ->  search/  ->  base/
**                 (walk, scan,  (roots, photos  (query, text   (handle, readers,
**                  pipeline,     by id, verify,  batches,       models, errors,
**                  run)          folders)        index glue)    events)
**   hub/ (models from the Hugging Face Hub) -> base/
**
** Every public function of engine.h is defined in the part that does the work; only
** opening and closing touch several parts: a writer finishes what a killed run left
** (library/), and closing frees the searches' state (search/), then the models, before
** the handle.
*/
#include "engine/base/base.h"
#include "engine/library/library.h"
#include "engine/search/search.h"

cdb_status cdb_engine_open(const char *dir, const cdb_engine_params *p, cdb_engine **out) {
    cdb_engine *e;
    cdb_status rc = cdb_eng_handle_open(dir, p, &e);
    *out = NULL;
    if (rc != CDB_OK) return rc;
    /* work a killed writer left: finished by the next writer, whatever its command */
    if (e->p.writer && cdb_eng_finish_leftovers(e) != CDB_OK)
        cdb_eng_warn(&e->p.events, "a forget or move that an earlier run began could not be "
                     "finished (%s); the next run tries again", cdb_errmsg());
    cdb_eng_clear();
    cdb_clearerr();
    *out = e;
    return CDB_OK;
}

void cdb_engine_close(cdb_engine *e) {
    if (!e) return;
    cdb_eng_search_release(e);
    cdb_eng_models_free(e);
    cdb_eng_handle_close(e);
}
