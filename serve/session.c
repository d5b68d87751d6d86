/*
** session.c: the page's sign-in sessions. The cookie the page gets after POST
** /api/login is not the token: it is "EXPIRY.SID.MAC", where EXPIRY is a Unix time,
** SID 16 random hex digits naming the session, and MAC = HMAC-SHA256(key: the token,
** message: a random nonce drawn when the server starts || "EXPIRY.SID"), in hex. So
** the cookie proves the token was given without holding it, stops working at EXPIRY,
** and every cookie dies with the server (a new nonce) or with a new token. Sign-out
** (POST /api/logout) puts the SID on a list of revoked sessions kept until their
** expiry; when that list is full, the nonce is drawn again (everyone signs in again).
**
** Thread-safety: every call may run on any thread (one mutex).
*/
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "serve/serve_int.h"

#define SESS_MAX_REVOKED 4096

/* ---- SHA-256 (FIPS 180-4) and HMAC (RFC 2104) ------------------------------------------- */

typedef struct sha256 {
    uint32_t h[8];
    uint64_t n;            /* bytes hashed */
    unsigned char b[64];   /* a partial block */
} sha256;

static const uint32_t k_sha[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
    0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
    0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
    0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
    0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
    0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
    0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
    0xc67178f2};

static uint32_t ror(uint32_t x, int n) { return x >> n | x << (32 - n); }

static void sha_block(sha256 *s, const unsigned char *p) {
    uint32_t w[64], v[8];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ror(w[i - 15], 7) ^ ror(w[i - 15], 18) ^ w[i - 15] >> 3;
        uint32_t s1 = ror(w[i - 2], 17) ^ ror(w[i - 2], 19) ^ w[i - 2] >> 10;
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    memcpy(v, s->h, sizeof v);
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = v[7] + (ror(v[4], 6) ^ ror(v[4], 11) ^ ror(v[4], 25)) +
                      ((v[4] & v[5]) ^ (~v[4] & v[6])) + k_sha[i] + w[i];
        uint32_t t2 = (ror(v[0], 2) ^ ror(v[0], 13) ^ ror(v[0], 22)) +
                      ((v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]));
        memmove(v + 1, v, sizeof v[0] * 7);
        v[4] += t1;
        v[0] = t1 + t2;
    }
    for (int i = 0; i < 8; i++) s->h[i] += v[i];
}

static void sha_init(sha256 *s) {
    static const uint32_t h0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(s->h, h0, sizeof h0);
    s->n = 0;
}

static void sha_add(sha256 *s, const void *data, size_t n) {
    const unsigned char *p = data;
    while (n) {
        size_t at = (size_t)(s->n % 64), take = 64 - at < n ? 64 - at : n;
        memcpy(s->b + at, p, take);
        s->n += take;
        p += take;
        n -= take;
        if (s->n % 64 == 0) sha_block(s, s->b);
    }
}

static void sha_end(sha256 *s, unsigned char out[32]) {
    uint64_t bits = s->n * 8;
    unsigned char len[8];
    sha_add(s, "\x80", 1);
    while (s->n % 64 != 56) sha_add(s, "", 1);
    for (int i = 0; i < 8; i++) len[i] = (unsigned char)(bits >> (56 - 8 * i));
    sha_add(s, len, 8);
    for (int i = 0; i < 8; i++) {
        out[4 * i] = (unsigned char)(s->h[i] >> 24);
        out[4 * i + 1] = (unsigned char)(s->h[i] >> 16);
        out[4 * i + 2] = (unsigned char)(s->h[i] >> 8);
        out[4 * i + 3] = (unsigned char)s->h[i];
    }
}

/* HMAC-SHA256(key, a || b). */
static void hmac(const char *key, const void *a, size_t na, const void *b, size_t nb,
                 unsigned char out[32]) {
    unsigned char k[64], pad[64], inner[32];
    size_t kn = strlen(key);
    sha256 s;
    memset(k, 0, sizeof k);
    if (kn > 64) {
        sha_init(&s);
        sha_add(&s, key, kn);
        sha_end(&s, k);
    } else {
        memcpy(k, key, kn);
    }
    for (int i = 0; i < 64; i++) pad[i] = k[i] ^ 0x36;
    sha_init(&s);
    sha_add(&s, pad, 64);
    sha_add(&s, a, na);
    sha_add(&s, b, nb);
    sha_end(&s, inner);
    for (int i = 0; i < 64; i++) pad[i] = k[i] ^ 0x5c;
    sha_init(&s);
    sha_add(&s, pad, 64);
    sha_add(&s, inner, 32);
    sha_end(&s, out);
}

/* ---- sessions ---------------------------------------------------------------------------- */

typedef struct revoked {
    char sid[17];
    int64_t expiry;
} revoked;

struct srv_sessions {
    pthread_mutex_t mu;
    char *token;
    int ttl_s;
    unsigned char nonce[32];
    revoked *rev;
    int n_rev;
};

static int fill_random(void *buf, size_t n) {
    unsigned char *p = buf;
    while (n) {
        ssize_t k = getrandom(p, n, 0);
        if (k <= 0) return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

srv_sessions *cdb_srv_sessions_new(const char *token, int ttl_s) {
    srv_sessions *ss = calloc(1, sizeof *ss);
    if (!ss) return NULL;
    pthread_mutex_init(&ss->mu, NULL);
    ss->ttl_s = ttl_s > 0 ? ttl_s : 12 * 3600;
    if (!(ss->token = strdup(token ? token : "")) ||
        !(ss->rev = calloc(SESS_MAX_REVOKED, sizeof *ss->rev)) ||
        fill_random(ss->nonce, sizeof ss->nonce) != 0) {
        cdb_srv_sessions_free(ss);
        return NULL;
    }
    return ss;
}

void cdb_srv_sessions_free(srv_sessions *ss) {
    if (!ss) return;
    pthread_mutex_destroy(&ss->mu);
    if (ss->token) memset(ss->token, 0, strlen(ss->token));
    free(ss->token);
    free(ss->rev);
    free(ss);
}

int cdb_srv_sessions_ttl(const srv_sessions *ss) { return ss->ttl_s; }

static void to_hex(const unsigned char *b, size_t n, char *out) {
    static const char d[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = d[b[i] >> 4];
        out[2 * i + 1] = d[b[i] & 15];
    }
    out[2 * n] = '\0';
}

/* The MAC of "EXPIRY.SID" (len bytes of head) as 64 hex digits. Under ss->mu. */
static void mac_hex(srv_sessions *ss, const char *head, size_t len, char out[65]) {
    unsigned char m[32];
    hmac(ss->token, ss->nonce, sizeof ss->nonce, head, len, m);
    to_hex(m, sizeof m, out);
}

int cdb_srv_session_make(srv_sessions *ss, char *buf, size_t size) {
    unsigned char sid[8];
    char sidx[17], mac[65];
    int n;
    if (fill_random(sid, sizeof sid) != 0) return -1;
    to_hex(sid, sizeof sid, sidx);
    n = snprintf(buf, size, "%lld.%s", (long long)time(NULL) + ss->ttl_s, sidx);
    if (n < 0 || (size_t)n + 66 > size) return -1;
    pthread_mutex_lock(&ss->mu);
    mac_hex(ss, buf, (size_t)n, mac);
    pthread_mutex_unlock(&ss->mu);
    snprintf(buf + n, size - (size_t)n, ".%s", mac);
    return 0;
}

/* The fields of a cookie value: 0 when it has the shape "DIGITS.16HEX.64HEX". */
static int split(const char *v, int64_t *expiry, char sid[17], size_t *head_len) {
    const char *d1 = strchr(v ? v : "", '.'), *d2 = d1 ? strchr(d1 + 1, '.') : NULL;
    if (!d1 || !d2 || d1 == v || d1 - v > 18 || d2 - d1 != 17 || strlen(d2 + 1) != 64) return -1;
    *expiry = 0;
    for (const char *p = v; p < d1; p++) {
        if (*p < '0' || *p > '9') return -1;
        *expiry = *expiry * 10 + (*p - '0');
    }
    memcpy(sid, d1 + 1, 16);
    sid[16] = '\0';
    *head_len = (size_t)(d2 - v);
    return 0;
}

int cdb_srv_session_check(srv_sessions *ss, const char *value) {
    int64_t expiry;
    char sid[17], mac[65];
    size_t head;
    unsigned char d = 0;
    int ok;
    if (!ss || split(value, &expiry, sid, &head) != 0 || expiry <= (int64_t)time(NULL))
        return 0;
    pthread_mutex_lock(&ss->mu);
    mac_hex(ss, value, head, mac);
    for (int i = 0; i < 64; i++) d |= (unsigned char)(mac[i] ^ value[head + 1 + i]);
    ok = d == 0;
    for (int i = 0; ok && i < ss->n_rev; i++)
        if (!strcmp(ss->rev[i].sid, sid)) ok = 0;
    pthread_mutex_unlock(&ss->mu);
    return ok;
}

void cdb_srv_session_revoke(srv_sessions *ss, const char *value) {
    int64_t expiry, now = (int64_t)time(NULL);
    char sid[17];
    size_t head;
    if (!ss || !cdb_srv_session_check(ss, value) || split(value, &expiry, sid, &head) != 0)
        return;
    pthread_mutex_lock(&ss->mu);
    for (int i = 0; i < ss->n_rev;) /* forget what expired anyway */
        if (ss->rev[i].expiry <= now) ss->rev[i] = ss->rev[--ss->n_rev];
        else i++;
    if (ss->n_rev < SESS_MAX_REVOKED) {
        memcpy(ss->rev[ss->n_rev].sid, sid, sizeof sid);
        ss->rev[ss->n_rev++].expiry = expiry;
    } else if (fill_random(ss->nonce, sizeof ss->nonce) == 0) {
        ss->n_rev = 0; /* every session so far is void now */
    }
    pthread_mutex_unlock(&ss->mu);
}
