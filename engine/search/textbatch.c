/*
** textbatch.c: the text queries of concurrent searches encoded together.
**
** A text query is a few tokens, so its encode is dominated by reading the text
** tower's weight matrices (about 150 MB for ViT-B/32) rather than by arithmetic.
** Requests that arrive while others are being encoded wait in a queue; whoever finds
** a free encoder slot takes everything queued (up to TB_MAX_TEXTS texts) and encodes
** it in one batch, so the weights are read once for all of them. There are as many
** slots as cores, each batch runs on one thread (the engine's rule for texts: no
** thread team to wake, and no waiting on each other when the machine is busy).
**
** The bits do not change: on the CPU each row of a batch is what the text gives
** alone (encoder.h), so a search answers the same whether it was batched or not. A
** batch that fails is encoded again request by request, so each request gets its own
** error. One request alone (the CLI) becomes a batch of one at once.
*/
#include <stdlib.h>
#include <string.h>

#include "engine/search/search.h"

#define TB_MAX_TEXTS 64

typedef struct tb_req {
    const char *const *texts;
    int n;
    float *out;      /* n * dim */
    cdb_status rc;
    char err[512];   /* the failure's message, for the requester's thread */
    int done;
    struct tb_req *next;
} tb_req;

/* Takes queued requests (at least one, at most TB_MAX_TEXTS texts unless the first is
** larger) off the queue. Called with tb->mu held. */
static tb_req *take(eng_textbatch *tb) {
    tb_req *first = tb->head, *last = first;
    int n = first->n;
    while (last->next && n + last->next->n <= TB_MAX_TEXTS) {
        last = last->next;
        n += last->n;
    }
    tb->head = last->next;
    if (!tb->head) tb->tail = &tb->head;
    last->next = NULL;
    return first;
}

static void encode_one(cdb_model *m, tb_req *r) {
    r->rc = cdb_encode_texts(m, r->texts, r->n, 1, r->out);
    if (r->rc != CDB_OK) snprintf(r->err, sizeof r->err, "%s", cdb_errmsg());
}

/* Encodes the requests of one batch (outside the lock). */
static void encode_batch(cdb_model *m, int dim, tb_req *batch) {
    int n = 0, k = 0;
    const char **texts;
    float *emb;
    cdb_status rc;
    for (tb_req *r = batch; r; r = r->next) n += r->n;
    texts = malloc(sizeof *texts * (size_t)n);
    emb = malloc(sizeof *emb * (size_t)n * (size_t)dim);
    if (!texts || !emb || !batch->next) { /* one request, or no memory to join them */
        free(texts);
        free(emb);
        for (tb_req *r = batch; r; r = r->next) encode_one(m, r);
        return;
    }
    int n_req = 0;
    for (tb_req *r = batch; r; r = r->next, n_req++)
        for (int i = 0; i < r->n; i++) texts[k++] = r->texts[i];
    CDB_LOG_DEBUG("engine: %d texts of %d searches encoded in one batch", n, n_req);
    cdb_eng_bind_threads(1);
    rc = cdb_encode_texts(m, texts, n, 1, emb);
    k = 0;
    for (tb_req *r = batch; r; r = r->next) {
        if (rc == CDB_OK) {
            memcpy(r->out, emb + (size_t)k * dim, sizeof *emb * (size_t)r->n * (size_t)dim);
            r->rc = CDB_OK;
        } else {
            encode_one(m, r); /* whose text failed: each is told its own error */
        }
        k += r->n;
    }
    free(texts);
    free(emb);
}

cdb_status cdb_eng_encode_texts(eng_model *mod, const char *const *texts, int n, float *out) {
    eng_textbatch *tb = &mod->tbatch;
    int dim = cdb_model_get_info(mod->m)->embed_dim;
    tb_req req = {texts, n, out, CDB_OK, "", 0, NULL};
    if (n <= 0) return CDB_OK;
    pthread_mutex_lock(&tb->mu);
    *tb->tail = &req;
    tb->tail = &req.next;
    while (!req.done) {
        if (tb->leaders < tb->max_leaders && tb->head) {
            tb_req *batch = take(tb);
            tb->leaders++;
            pthread_mutex_unlock(&tb->mu);
            cdb_eng_bind_threads(1);
            encode_batch(mod->m, dim, batch);
            pthread_mutex_lock(&tb->mu);
            for (tb_req *r = batch, *next; r; r = next) {
                next = r->next;
                r->next = NULL;
                r->done = 1;
            }
            tb->leaders--;
            pthread_cond_broadcast(&tb->cv);
        } else {
            pthread_cond_wait(&tb->cv, &tb->mu);
        }
    }
    pthread_mutex_unlock(&tb->mu);
    return req.rc == CDB_OK ? CDB_OK : cdb_seterr(req.rc, "%s", req.err);
}

cdb_status cdb_engine_encode_text(cdb_engine *e, const char *model_path, const char *text,
                                  float *out) {
    eng_reader *r = NULL;
    eng_model *m = NULL;
    cdb_status rc;
    const char *texts[1] = {text};
    cdb_eng_clear();
    if ((rc = cdb_eng_reader_get(e, &r)) != CDB_OK) return rc;
    rc = cdb_eng_model_get(e, r->db, model_path, 0, 1, -1, &m);
    cdb_eng_reader_put(e, r);
    if (rc != CDB_OK) return rc;
    cdb_eng_bind_threads(e->p.model_threads);
    if ((rc = cdb_encode_texts(m->m, texts, 1, 1, out)) != CDB_OK)
        return cdb_eng_fail(rc, CDB_ENGINE_E_NONE, "cannot encode '%s'", text);
    return CDB_OK;
}
