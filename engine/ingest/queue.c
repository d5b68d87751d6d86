/*
** queue.c: a bounded, blocking FIFO of pointers connecting the pipeline's stages.
** push blocks while full, pop blocks while empty; after close, push fails and pop
** drains what is left then returns NULL. The bound is what keeps ingest memory
** flat however large the library is.
*/
#include <pthread.h>
#include <stdlib.h>

#include "engine/ingest/ingest.h"

struct eng_queue {
    pthread_mutex_t mu;
    pthread_cond_t not_empty, not_full;
    void **items;
    int cap, head, n, closed;
};

eng_queue *cdb_eng_queue_new(int cap) {
    eng_queue *q = calloc(1, sizeof *q);
    if (!q) return NULL;
    if (!(q->items = calloc((size_t)cap, sizeof *q->items))) {
        free(q);
        return NULL;
    }
    q->cap = cap;
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->not_empty, NULL);
    pthread_cond_init(&q->not_full, NULL);
    return q;
}

void cdb_eng_queue_free(eng_queue *q) {
    if (!q) return;
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->not_empty);
    pthread_cond_destroy(&q->not_full);
    free(q->items);
    free(q);
}

int cdb_eng_queue_push(eng_queue *q, void *item) {
    pthread_mutex_lock(&q->mu);
    while (q->n == q->cap && !q->closed) pthread_cond_wait(&q->not_full, &q->mu);
    if (q->closed) {
        pthread_mutex_unlock(&q->mu);
        return -1;
    }
    q->items[(q->head + q->n) % q->cap] = item;
    q->n++;
    pthread_cond_signal(&q->not_empty);
    pthread_mutex_unlock(&q->mu);
    return 0;
}

/* The head item, or NULL when empty; q->mu held. */
static void *take_locked(eng_queue *q) {
    void *item;
    if (q->n == 0) return NULL;
    item = q->items[q->head];
    q->head = (q->head + 1) % q->cap;
    q->n--;
    pthread_cond_signal(&q->not_full);
    return item;
}

void *cdb_eng_queue_pop(eng_queue *q) {
    void *item;
    pthread_mutex_lock(&q->mu);
    while (q->n == 0 && !q->closed) pthread_cond_wait(&q->not_empty, &q->mu);
    item = take_locked(q);
    pthread_mutex_unlock(&q->mu);
    return item;
}

void *cdb_eng_queue_try_pop(eng_queue *q) {
    void *item;
    pthread_mutex_lock(&q->mu);
    item = take_locked(q);
    pthread_mutex_unlock(&q->mu);
    return item;
}

void cdb_eng_queue_close(eng_queue *q) {
    pthread_mutex_lock(&q->mu);
    q->closed = 1;
    pthread_cond_broadcast(&q->not_empty);
    pthread_cond_broadcast(&q->not_full);
    pthread_mutex_unlock(&q->mu);
}
