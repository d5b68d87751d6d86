/*
** test_tokcache.c: the tokenizer cache (encoder/tokcache.c) never trusts its file.
**
** The oracle: the ids of the tokenizer built from the vocabulary files (cdb_tok_open,
** no cache) for a set of texts. A valid cache file is written once (cdb_tok_open_cached
** in a folder of the test's own); then, for each damage, the file is damaged, the
** tokenizer is opened through the cache again, and the open must succeed, say that it
** refused the file ("rebuilt: ..."), give the oracle's ids, and leave a valid file that
** the next open maps ("hit"). Damages: one byte flipped at each of ~300 places spread
** over the whole file (header, padding, every table), the file cut at many lengths
** (0 included), bytes appended, a byte flipped under a valid stamp (the stamp must not
** vouch for a file written since), and a foreign file under its name: another
** vocabulary's cache file (a swap), a packed matrix cache's magic, random bytes.
** The same for the cache files of three tokenizer.json fixtures (BPE with byte fallback,
** Unigram, WordPiece), with a CLIP BPE cache file swapped in as another kind's.
** Also: the standard vocabulary and a vocab.json + merges.txt one give their own files
** (the key is the vocabulary's bytes), and an edited vocabulary is not served the old
** file's tables, even when the edit keeps the file's size (the key, read from a record
** of the files' identity when they have not changed, is computed again).
*/
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cdb_test.h"
#include "read_file.h"
#include "encoder/encoder.h"
#include <jansson.h>

static char g_tmp[64];
static const char *const k_texts[] = {
    "a photo of a cat", "A Dog on the BEACH!!", "naïve café — 東京 🐈 x²", "",
    "<|startoftext|>hello<|endoftext|>", "don't you'll they've 1234567890",
    "Supercalifragilisticexpialidocious antidisestablishmentarianism"};
#define N_TEXTS (int)(sizeof k_texts / sizeof *k_texts)
#define CTX 77

static const char *tmpdir(void) {
    if (!g_tmp[0]) {
        strcpy(g_tmp, "/tmp/cdb_tokcache_test_XXXXXX");
        if (!mkdtemp(g_tmp)) return NULL;
    }
    return g_tmp;
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f) {
    (void)st, (void)flag, (void)f;
    return remove(p);
}

static void rm_tmp(const char *dir) { nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS); }

/* ids[N_TEXTS][CTX] of tok. */
static int ids_of(const cdb_tok *tok, int32_t ids[N_TEXTS][CTX]) {
    for (int i = 0; i < N_TEXTS; i++)
        if (cdb_tok_tokenize(tok, k_texts[i], strlen(k_texts[i]), CTX, ids[i], NULL, NULL))
            return -1;
    return 0;
}

/* Replaces p by n bytes of b (a new file, as a writer would leave it). */
static int write_all(const char *p, const void *b, size_t n) {
    FILE *f;
    unlink(p);
    if (!(f = fopen(p, "wb"))) return -1;
    int ok = fwrite(b, 1, n, f) == n;
    return fclose(f) == 0 && ok ? 0 : -1;
}

/* A .tok file of dir other than the one named not (may be ""), into out. */
static int find_tok(const char *dir, const char *not, char *out, size_t size) {
    DIR *d = opendir(dir);
    struct dirent *e;
    int rc = -1;
    while (d && rc && (e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n < 5 || strcmp(e->d_name + n - 4, ".tok")) continue;
        if (snprintf(out, size, "%s/%s", dir, e->d_name) < (int)size && strcmp(out, not)) rc = 0;
    }
    if (d) closedir(d);
    return rc;
}

/* Opens vocab through the cache in dir; checks the status starts with want and that
** the ids are ref's. */
static void check_open(cdb_test_ctx *cdb_t_, const char *vocab, const char *dir,
                       const char *want, int32_t ref[N_TEXTS][CTX], const char *what) {
    cdb_tok *t = NULL;
    int32_t ids[N_TEXTS][CTX];
    CHECK_MSG(cdb_tok_open_cached(vocab, CDB_TOK_PIPE_AUTO, dir, &t) == CDB_OK, "%s: %s", what,
              cdb_errmsg());
    CHECK_MSG(!strncmp(cdb_tok_cache_status(t), want, strlen(want)), "%s: status \"%s\", want %s",
              what, cdb_tok_cache_status(t), want);
    CHECK_OK(ids_of(t, ids));
    CHECK_MSG(!memcmp(ids, ref, sizeof ids), "%s: ids differ from the built tokenizer's", what);
    cdb_tok_free(t);
}

static const char *std_vocab(void) {
    static char p[4096];
    snprintf(p, sizeof p, "%s/data/bpe_simple_vocab_16e6.txt.gz", CDB_SOURCE_DIR);
    return p;
}

/* The damages of the file header, for the vocabulary vocab, whose cache files go in
** dir/name. foreign (may be NULL): another kind's cache file, swapped in under the name. */
static void damage_file(cdb_test_ctx *cdb_t_, const char *vocab, const char *name,
                        const char *foreign) {
    static int32_t ref[N_TEXTS][CTX];
    cdb_tok *t = NULL;
    char dir[256], file[1024], what[128], stamp[1100];
    unsigned char *good, *bad;
    size_t n = 0;
    CHECK(tmpdir());
    snprintf(dir, sizeof dir, "%s/%s", tmpdir(), name);
    CHECK_OK(cdb_tok_open(vocab, &t));
    CHECK_EQ_STR(cdb_tok_cache_status(t), "off");
    CHECK_OK(ids_of(t, ref));
    cdb_tok_free(t);
    check_open(cdb_t_, vocab, dir, "written", ref, "first open");
    check_open(cdb_t_, vocab, dir, "hit", ref, "second open");
    CHECK_OK(find_tok(dir, "", file, sizeof file));
    CHECK((good = test_read_file(file, &n)) != NULL && n > 8192);
    CHECK((bad = malloc(n + 64)));
    snprintf(stamp, sizeof stamp, "%s.ok", file);
    /* one byte flipped, ~300 places over the whole file */
    for (size_t at = 0, k = 0; at < n; at += n / 300 + (k++ % 7)) {
        memcpy(bad, good, n);
        bad[at] ^= (unsigned char)(1u << (k % 8));
        CHECK(write_all(file, bad, n) == 0);
        snprintf(what, sizeof what, "byte %zu of %zu flipped", at, n);
        check_open(cdb_t_, vocab, dir, "rebuilt:", ref, what);
        check_open(cdb_t_, vocab, dir, "hit", ref, "after the rebuild");
    }
    /* cut short (0 included), and padded */
    for (size_t len = 0; len < n; len = len * 3 + 1000) {
        CHECK(write_all(file, good, len) == 0);
        snprintf(what, sizeof what, "cut to %zu of %zu bytes", len, n);
        check_open(cdb_t_, vocab, dir, "rebuilt:", ref, what);
    }
    memcpy(bad, good, n);
    memset(bad + n, 0, 64);
    CHECK(write_all(file, bad, n + 64) == 0);
    check_open(cdb_t_, vocab, dir, "rebuilt:", ref, "64 zero bytes appended");
    /* under a stamp: a hit hashes the rebuilt file whole and stamps it, the next one
    ** skips the hash; a write in place (same inode and size, a new ctime) must not be
    ** vouched for */
    check_open(cdb_t_, vocab, dir, "hit", ref, "hashed");
    check_open(cdb_t_, vocab, dir, "hit (stamped)", ref, "stamped");
    {
        struct stat st;
        int fd = open(file, O_WRONLY);
        unsigned char c = good[n / 2] ^ 0x40; /* in a table (a padding byte is refused
                                                 before the stamp is looked at) */
        CHECK(stat(stamp, &st) == 0);
        CHECK(fd >= 0 && pwrite(fd, &c, 1, (off_t)(n / 2)) == 1);
        close(fd);
        check_open(cdb_t_, vocab, dir, "rebuilt: damaged (payload checksum)", ref,
                   "a table byte written under a stamp");
    }
    /* foreign files under the name: random bytes, a packed matrix cache's header, another
    ** kind's cache file */
    for (size_t i = 0; i < n; i++) bad[i] = (unsigned char)(i * 2654435761u >> 13);
    CHECK(write_all(file, bad, n) == 0);
    check_open(cdb_t_, vocab, dir, "rebuilt: not a clipdb tokenizer cache", ref, "random");
    memcpy(bad, good, n);
    memcpy(bad, "CDBPACK1", 8);
    CHECK(write_all(file, bad, n) == 0);
    check_open(cdb_t_, vocab, dir, "rebuilt: not a clipdb tokenizer cache", ref, "a .pack");
    if (foreign) {
        size_t fn = 0;
        unsigned char *f = test_read_file(foreign, &fn);
        CHECK(f && write_all(file, f, fn) == 0);
        free(f);
        check_open(cdb_t_, vocab, dir, "rebuilt: format 2 kind", ref, "another kind's file");
    }
    free(good);
    free(bad);
}

CDB_TEST(tokcache_damage) { damage_file(cdb_t_, std_vocab(), "damage", NULL); }

/* A tokenizer.json fixture (tests/golden/hf_tokenizer/) as dir/tokenizer.json. */
static const char *hf_copy(const char *fixture, char *out, size_t size) {
    char src[1024], dir[256];
    size_t n = 0;
    unsigned char *b;
    snprintf(src, sizeof src, "%s/tests/golden/hf_tokenizer/%s", CDB_SOURCE_DIR, fixture);
    snprintf(dir, sizeof dir, "%s/hf-%s", tmpdir(), fixture);
    snprintf(out, size, "%s/tokenizer.json", dir);
    if (mkdir(dir, 0777) != 0 || !(b = test_read_file(src, &n))) return NULL;
    int rc = write_all(out, b, n);
    free(b);
    return rc ? NULL : out;
}

/* The same damages to the cache file of a tokenizer.json: BPE with byte fallback and
** added tokens, Unigram (SigLIP's, with its normalizers), WordPiece (BERT's); a CLIP BPE
** cache file swapped in under the name is refused by its kind. */
CDB_TEST(tokcache_damage_hf) {
    static const char *const fixtures[] = {"bytefallback.json", "siglip.json", "bert.json"};
    char vocab[1024], clip[1024], name[64];
    CHECK(tmpdir());
    damage_file(cdb_t_, std_vocab(), "clip-for-hf", NULL);
    snprintf(name, sizeof name, "%s/clip-for-hf", tmpdir());
    CHECK_OK(find_tok(name, "", clip, sizeof clip));
    for (size_t i = 0; i < sizeof fixtures / sizeof *fixtures; i++) {
        CHECK(hf_copy(fixtures[i], vocab, sizeof vocab));
        snprintf(name, sizeof name, "damage-%s", fixtures[i]);
        damage_file(cdb_t_, vocab, name, clip);
    }
}

/* A tiny vocab.json + merges.txt vocabulary in dir: the special tokens, every byte's
** symbol (bytes_to_unicode of the reference) with and without "</w>", then extra
** (NULL-terminated), whose merges are merges. */
static void write_tiny_vocab(const char *dir, const char *const *extra, const char *merges) {
    json_t *v = json_object();
    char p[512], sym[16], *s;
    int id = 0;
    FILE *f;
    json_object_set_new(v, "<|startoftext|>", json_integer(id++));
    json_object_set_new(v, "<|endoftext|>", json_integer(id++));
    for (int b = 0, more = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
        unsigned cp = printable ? (unsigned)b : 256u + (unsigned)more++;
        if (cp < 0x80) {
            sym[0] = (char)cp, sym[1] = 0;
        } else {
            sym[0] = (char)(0xC0 | cp >> 6), sym[1] = (char)(0x80 | (cp & 0x3F)), sym[2] = 0;
        }
        json_object_set_new(v, sym, json_integer(id++));
        strcat(sym, "</w>");
        json_object_set_new(v, sym, json_integer(id++));
    }
    for (; *extra; extra++) json_object_set_new(v, *extra, json_integer(id++));
    s = json_dumps(v, 0);
    snprintf(p, sizeof p, "%s/vocab.json", dir);
    if ((f = fopen(p, "wb"))) fputs(s, f), fclose(f);
    snprintf(p, sizeof p, "%s/merges.txt", dir);
    if ((f = fopen(p, "wb"))) fputs(merges, f), fclose(f);
    free(s);
    json_decref(v);
}

/* Two vocabularies share a folder with a file each; a file under another vocabulary's
** name is refused; an edited vocabulary is not served its old tables. */
CDB_TEST(tokcache_keys) {
    static int32_t ref_std[N_TEXTS][CTX], ref_a[N_TEXTS][CTX], ref_b[N_TEXTS][CTX];
    char dir[256], va[256], file_std[1024], file_a[1024];
    cdb_tok *t = NULL;
    CHECK(tmpdir());
    snprintf(dir, sizeof dir, "%s/keys", tmpdir());
    snprintf(va, sizeof va, "%s/vocab-a", tmpdir());
    CHECK(mkdir(va, 0777) == 0);
    write_tiny_vocab(va, (const char *const[]){"he", "ll", "hell", "hello</w>", NULL},
                     "#version: 0.2\nh e\nl l\nhe ll\nhell o</w>\n");
    CHECK_OK(cdb_tok_open(va, &t));
    CHECK_OK(ids_of(t, ref_a));
    cdb_tok_free(t);
    CHECK_OK(cdb_tok_open(std_vocab(), &t));
    CHECK_OK(ids_of(t, ref_std));
    cdb_tok_free(t);
    check_open(cdb_t_, va, dir, "written", ref_a, "vocab-a");
    CHECK_OK(find_tok(dir, "", file_a, sizeof file_a));
    check_open(cdb_t_, std_vocab(), dir, "written", ref_std, "standard");
    check_open(cdb_t_, va, dir, "hit", ref_a, "vocab-a again");
    check_open(cdb_t_, std_vocab(), dir, "hit", ref_std, "standard again");
    /* swap: vocab-a's file under the standard vocabulary's name */
    CHECK_OK(find_tok(dir, file_a, file_std, sizeof file_std));
    {
        size_t n = 0;
        unsigned char *b = test_read_file(file_a, &n);
        CHECK(b && write_all(file_std, b, n) == 0);
        free(b);
    }
    check_open(cdb_t_, std_vocab(), dir, "rebuilt: stale", ref_std, "vocab-a's file swapped in");
    /* vocab-a edited: other merges, so other ids ("hello" is two tokens now) */
    write_tiny_vocab(va, (const char *const[]){"he", "ll", "hell", NULL},
                     "#version: 0.2\nh e\nl l\nhe ll\n");
    CHECK_OK(cdb_tok_open(va, &t));
    CHECK_OK(ids_of(t, ref_b));
    cdb_tok_free(t);
    CHECK(memcmp(ref_a, ref_b, sizeof ref_a) != 0); /* the edit changes ids */
    check_open(cdb_t_, va, dir, "written", ref_b, "vocab-a edited");
    /* an edit in place that keeps the size and the ids (merges.txt's version line): the
    ** key is of the bytes, so another file is written, although the record of the key
    ** (<id>-clipbpe.src) named the old bytes' */
    check_open(cdb_t_, va, dir, "hit", ref_b, "vocab-a edited, again");
    nanosleep(&(struct timespec){0, 30 * 1000 * 1000}, NULL); /* another ctime tick */
    {
        char p[512];
        snprintf(p, sizeof p, "%s/merges.txt", va);
        int fd = open(p, O_WRONLY);
        CHECK(fd >= 0 && pwrite(fd, "3", 1, 12) == 1); /* "#version: 0.2" -> 0.3 */
        close(fd);
    }
    check_open(cdb_t_, va, dir, "written", ref_b, "vocab-a's version line edited in place");
    check_open(cdb_t_, va, dir, "hit", ref_b, "vocab-a's version line edited, again");
}

/* A cache folder someone else controls is no cache: a link to another folder (writes and
** prunes would land there), one writable by others (its files could be forged: their
** sums catch damage, not tampering). And a FIFO at the cache file's name is refused at
** once and replaced, never an open that waits for a writer. */
CDB_TEST(tokcache_unsafe_folders) {
    static int32_t ref[N_TEXTS][CTX];
    char target[256], link[256], shared[256], fifo_dir[256], file[1024], inner[300], via[256];
    cdb_tok *t = NULL;
    CHECK(tmpdir());
    CHECK_OK(cdb_tok_open(std_vocab(), &t));
    CHECK_OK(ids_of(t, ref));
    cdb_tok_free(t);
    snprintf(target, sizeof target, "%s/victim", tmpdir());
    snprintf(link, sizeof link, "%s/linked", tmpdir());
    CHECK(mkdir(target, 0700) == 0 && symlink(target, link) == 0);
    check_open(cdb_t_, std_vocab(), link, "off", ref, "a link as the folder");
    CHECK(find_tok(target, "", file, sizeof file) != 0); /* nothing written there */
    snprintf(shared, sizeof shared, "%s/shared", tmpdir());
    CHECK(mkdir(shared, 0700) == 0 && chmod(shared, 0777) == 0);
    check_open(cdb_t_, std_vocab(), shared, "off", ref, "a folder writable by all");
    CHECK(find_tok(shared, "", file, sizeof file) != 0);
    /* our own folder inside one that others can rename entries of (no sticky bit): they
    ** could swap it for theirs between the check and the open */
    snprintf(inner, sizeof inner, "%s/ours", shared);
    CHECK(mkdir(inner, 0700) == 0);
    check_open(cdb_t_, std_vocab(), inner, "off", ref, "a folder under one writable by all");
    CHECK(find_tok(inner, "", file, sizeof file) != 0);
    CHECK(chmod(shared, 01777) == 0); /* sticky, as /tmp: others cannot rename our entries */
    check_open(cdb_t_, std_vocab(), inner, "written", ref, "under a sticky folder");
    /* a link above the folder is resolved once, the folder checked where it really is */
    snprintf(via, sizeof via, "%s/via", tmpdir());
    CHECK(symlink(shared, via) == 0);
    snprintf(inner, sizeof inner, "%s/ours", via);
    check_open(cdb_t_, std_vocab(), inner, "hit", ref, "through a link above it");
    snprintf(fifo_dir, sizeof fifo_dir, "%s/fifo", tmpdir());
    check_open(cdb_t_, std_vocab(), fifo_dir, "written", ref, "before the FIFO");
    CHECK_OK(find_tok(fifo_dir, "", file, sizeof file));
    CHECK(unlink(file) == 0 && mkfifo(file, 0600) == 0);
    check_open(cdb_t_, std_vocab(), fifo_dir, "rebuilt", ref, "a FIFO at the file's name");
}

CDB_TEST_MAIN_TMP(g_tmp, rm_tmp, tokcache_damage, tokcache_damage_hf, tokcache_keys,
                  tokcache_unsafe_folders)
