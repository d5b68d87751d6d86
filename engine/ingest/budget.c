/*
** budget.c: a budget of decoded pixels in flight, shared by the ingest pipeline's
** decoder threads (ingest.h). A photo's pixels are taken before it is decoded
** and given back once it is preprocessed, so that several 150-megapixel photos
** decoded at once cannot exhaust memory however many threads a machine has: a
** decoder waits while the pixels in flight plus its own would pass the budget. One
** photo larger than the whole budget still goes, alone (never a deadlock: the
** decoder that waits has nothing in flight itself). Images kept decoded for the
** device transform have a pool of their own (cdb_eng_budget_keep).
*/
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "engine/ingest/ingest.h"

/* What a decode holds per pixel at its peak: the decoded image (3 bytes; 4 for
** CMYK or RGBA, 6-8 for 16-bit TIFF and PNG), a copy for the EXIF rotation, and the
** resize's and the thumbnail's rows (small). bench_bigphotos: 150-megapixel RGB
** JPEGs one at a time peak at 631 MB RSS, the process and model included (4.2 bytes
** per pixel); 8 leaves room for 16-bit and rotated photos. */
#define BYTES_PER_PIXEL 8

int64_t cdb_eng_budget_default_pixels(void) {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    int64_t ram = pages > 0 && page > 0 ? (int64_t)pages * page : (int64_t)8 << 30;
    int64_t bytes = ram / 4;
    if (bytes < (int64_t)256 << 20) bytes = (int64_t)256 << 20;
    if (bytes > (int64_t)16 << 30) bytes = (int64_t)16 << 30;
    return bytes / BYTES_PER_PIXEL;
}

int64_t cdb_eng_budget_pixels_of_mb(int64_t mb) {
    return mb <= 0 ? 0 : mb * (1 << 20) / BYTES_PER_PIXEL;
}

void cdb_eng_budget_init(eng_budget *b, int64_t pixels) {
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->cv, NULL);
    b->limit = pixels > 0 ? pixels : cdb_eng_budget_default_pixels();
    b->in_flight = b->peak = 0;
    b->n_waits = 0;
    b->kept = b->kept_peak = 0;
    b->kept_limit = b->limit * BYTES_PER_PIXEL / 2;
}

void cdb_eng_budget_destroy(eng_budget *b) {
    pthread_mutex_destroy(&b->mu);
    pthread_cond_destroy(&b->cv);
}

void cdb_eng_budget_take(eng_budget *b, int64_t pixels) {
    if (pixels <= 0) return;
    pthread_mutex_lock(&b->mu);
    if (b->in_flight > 0 && b->in_flight + pixels > b->limit) b->n_waits++;
    while (b->in_flight > 0 && b->in_flight + pixels > b->limit) pthread_cond_wait(&b->cv, &b->mu);
    b->in_flight += pixels;
    if (b->in_flight > b->peak) b->peak = b->in_flight;
    pthread_mutex_unlock(&b->mu);
}

void cdb_eng_budget_give(eng_budget *b, int64_t pixels) {
    if (pixels <= 0) return;
    pthread_mutex_lock(&b->mu);
    b->in_flight -= pixels;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
}

int cdb_eng_budget_keep(eng_budget *b, int64_t bytes) {
    int ok;
    pthread_mutex_lock(&b->mu);
    ok = bytes > 0 && b->kept + bytes <= b->kept_limit;
    if (ok) b->kept += bytes;
    if (b->kept > b->kept_peak) b->kept_peak = b->kept;
    pthread_mutex_unlock(&b->mu);
    return ok;
}

void cdb_eng_budget_unkeep(eng_budget *b, int64_t bytes) {
    if (bytes <= 0) return;
    pthread_mutex_lock(&b->mu);
    b->kept -= bytes;
    pthread_mutex_unlock(&b->mu);
}
