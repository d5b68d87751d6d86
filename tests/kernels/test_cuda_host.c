/*
** test_cuda_host.c: the host-side logic of the GPU path, which runs everywhere
** (no GPU, no driver, CLIPDB_CUDA=OFF): `--device` parsing and resolution, batch
** size from free memory, the out-of-memory retry loop and all-or-nothing buffer
** groups over a fake allocator, PIL resize plans, and the "no device" paths of
** the public CUDA entry points; and that the resize plan the GPU kernel runs
** gives the same bytes as the encoder's PIL-exact preprocessing.
*/
#include "cdb_test.h"
#include "encoder/encoder.h"
#include "kernels/cuda/cuda_int.h"
#include "kernels/kernels.h"

/* ---- device strings --------------------------------------------------------- */

CDB_TEST(device_parse_forms) {
    cdb_k_device_spec d;
    CHECK_OK(cdb_k_device_parse("auto", &d));
    CHECK_EQ_INT(d.kind, CDB_K_BACKEND_AUTO);
    CHECK_OK(cdb_k_device_parse("cpu", &d));
    CHECK_EQ_INT(d.kind, CDB_K_BACKEND_CPU);
    CHECK_OK(cdb_k_device_parse("cuda", &d));
    CHECK_EQ_INT(d.kind, CDB_K_BACKEND_CUDA);
    CHECK_EQ_INT(d.index, 0);
    CHECK_OK(cdb_k_device_parse("cuda:3", &d));
    CHECK_EQ_INT(d.kind, CDB_K_BACKEND_CUDA);
    CHECK_EQ_INT(d.index, 3);
    CHECK_OK(cdb_k_device_parse("  CUDA:12 \n", &d));
    CHECK_EQ_INT(d.index, 12);
    CHECK_OK(cdb_k_device_parse("Cpu", &d));
    CHECK_EQ_INT(d.kind, CDB_K_BACKEND_CPU);
}

CDB_TEST(device_parse_rejects) {
    static const char *bad[] = {"", "gpu", "cuda:", "cuda:-1", "cuda:1x", "cuda:99999",
                                "cuda: 1", "cpu0", "cuda0", "auto:1", "cuda:1:2",
                                "a-very-long-device-string-that-overflows"};
    cdb_k_device_spec d;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_RC(cdb_k_device_parse(bad[i], &d), CDB_INVALID);
        CHECK_MSG(strstr(cdb_errmsg(), "auto, cpu, cuda or cuda:N") != NULL,
                  "message for \"%s\" lacks the accepted forms: %s", bad[i], cdb_errmsg());
    }
    CHECK_RC(cdb_k_device_parse(NULL, &d), CDB_INVALID);
}

CDB_TEST(device_str_roundtrip) {
    char buf[32];
    cdb_k_device_spec d = {CDB_K_BACKEND_CUDA, 7}, e;
    CHECK_EQ_STR(cdb_k_device_str(d, buf, sizeof buf), "cuda:7");
    CHECK_OK(cdb_k_device_parse(buf, &e));
    CHECK_EQ_INT(e.kind, d.kind);
    CHECK_EQ_INT(e.index, d.index);
    d.kind = CDB_K_BACKEND_CPU;
    CHECK_EQ_STR(cdb_k_device_str(d, buf, sizeof buf), "cpu");
    d.kind = CDB_K_BACKEND_AUTO;
    CHECK_EQ_STR(cdb_k_device_str(d, buf, sizeof buf), "auto");
}

CDB_TEST(device_resolve_injected) {
    cdb_k_device_spec want, got;
    /* auto: GPU when present, else CPU, never an error */
    want.kind = CDB_K_BACKEND_AUTO;
    want.index = 0;
    CHECK_OK(cdb_k_device_resolve_with(want, 2, NULL, &got));
    CHECK_EQ_INT(got.kind, CDB_K_BACKEND_CUDA);
    CHECK_EQ_INT(got.index, 0);
    CHECK_OK(cdb_k_device_resolve_with(want, 0, "no NVIDIA driver", &got));
    CHECK_EQ_INT(got.kind, CDB_K_BACKEND_CPU);
    /* cpu: always cpu */
    want.kind = CDB_K_BACKEND_CPU;
    CHECK_OK(cdb_k_device_resolve_with(want, 4, NULL, &got));
    CHECK_EQ_INT(got.kind, CDB_K_BACKEND_CPU);
    /* cuda with none: clear message with the reason and the way out */
    want.kind = CDB_K_BACKEND_CUDA;
    want.index = 0;
    CHECK_RC(cdb_k_device_resolve_with(want, 0, "no NVIDIA driver", &got), CDB_UNSUPPORTED);
    CHECK_MSG(strstr(cdb_errmsg(), "no NVIDIA driver") && strstr(cdb_errmsg(), "--device cpu"),
              "message: %s", cdb_errmsg());
    CHECK_EQ_INT(got.kind, CDB_K_BACKEND_CPU);
    /* cuda:N beyond the count */
    want.index = 2;
    CHECK_RC(cdb_k_device_resolve_with(want, 2, NULL, &got), CDB_UNSUPPORTED);
    CHECK_MSG(strstr(cdb_errmsg(), "cuda:2") && strstr(cdb_errmsg(), "only 2"), "message: %s",
              cdb_errmsg());
    want.index = 1;
    CHECK_OK(cdb_k_device_resolve_with(want, 2, NULL, &got));
    CHECK_EQ_INT(got.kind, CDB_K_BACKEND_CUDA);
    CHECK_EQ_INT(got.index, 1);
}

/* On this machine (CI: no GPU) the real probe must answer cleanly either way. */
CDB_TEST(device_resolve_real) {
    cdb_k_device_spec want = {CDB_K_BACKEND_AUTO, 0}, got;
    int n = cdb_k_cuda_device_count();
    const char *why = cdb_k_cuda_unusable_reason();
    CHECK(n >= 0);
    CHECK(why != NULL);
    CHECK_OK(cdb_k_device_resolve(want, &got));
    if (n == 0 || *why) {
        CHECK_EQ_INT(got.kind, CDB_K_BACKEND_CPU);
        CHECK(*why != 0);
        want.kind = CDB_K_BACKEND_CUDA;
        CHECK_RC(cdb_k_device_resolve(want, &got), CDB_UNSUPPORTED);
        CHECK(strstr(cdb_errmsg(), why) != NULL);
    } else {
        CHECK_EQ_INT(got.kind, CDB_K_BACKEND_CUDA);
    }
    if (!cdb_k_cuda_built()) CHECK_EQ_INT(n, 0);
}

/* ---- graceful "no device" paths ---------------------------------------------- */

CDB_TEST(no_device_paths) {
    cdb_k_backend *be = (cdb_k_backend *)1;
    cdb_k_cuda_ingest *ing = (cdb_k_cuda_ingest *)1;
    float mean[3] = {0, 0, 0}, std[3] = {1, 1, 1};
    size_t f = 1, t = 1;
    if (cdb_k_cuda_device_count() > 0 && !*cdb_k_cuda_unusable_reason())
        CDB_SKIP("a usable GPU is present; covered by tests/gpu");
    CHECK_RC(cdb_k_backend_cuda_new(0, &be), CDB_UNSUPPORTED);
    CHECK(be == NULL);
    CHECK(strlen(cdb_errmsg()) > 0);
    CHECK_RC(cdb_k_backend_cuda_new(5, &be), CDB_UNSUPPORTED);
    CHECK_RC(cdb_k_cuda_ingest_new(NULL, 224, mean, std, 8, 0, &ing), cdb_k_cuda_built()
                                                                          ? CDB_INVALID
                                                                          : CDB_UNSUPPORTED);
    CHECK(ing == NULL);
    cdb_k_cuda_ingest_free(NULL);
    if (!cdb_k_cuda_built()) {
        CHECK_RC(cdb_k_backend_cuda_mem(NULL, &f, &t), CDB_UNSUPPORTED);
        CHECK_EQ_INT(f, 0);
        CHECK_EQ_INT(t, 0);
    }
}

/* ---- batch sizing ------------------------------------------------------------- */

CDB_TEST(batch_from_memory) {
    size_t per = cdb_k_vit_bytes_per_image(224, 32, 768, 12, 3072);
    CHECK(per > 0);
    /* ViT-B/32 activations: a few MB per image, not KB, not GB */
    CHECK_MSG(per > (1u << 20) && per < (64u << 20), "per image %zu", per);
    CHECK_EQ_INT(cdb_k_vit_bytes_per_image(0, 32, 768, 12, 3072), 0);
    /* exact arithmetic: (1000 - 100) - 90 = 810 -> 81 items of 10 -> 80 (multiple of 8) */
    CHECK_EQ_INT(cdb_k_batch_from_memory(1000, 100, 10, 1000), 80);
    CHECK_EQ_INT(cdb_k_batch_from_memory(1000, 100, 10, 50), 48);
    CHECK_EQ_INT(cdb_k_batch_from_memory(1000, 100, 10, 7), 7);
    CHECK_EQ_INT(cdb_k_batch_from_memory(200, 100, 10, 1000), 9); /* < 16: not rounded */
    CHECK_EQ_INT(cdb_k_batch_from_memory(100, 100, 10, 1000), 0);
    CHECK_EQ_INT(cdb_k_batch_from_memory(50, 100, 10, 1000), 0);
    CHECK_EQ_INT(cdb_k_batch_from_memory(1000, 0, 0, 1000), 0);
    CHECK_EQ_INT(cdb_k_batch_from_memory(1000, 0, 10, 0), 0);
    /* an 80 GB card with 1 GB of weights fits the 256 the benchmark uses */
    CHECK(cdb_k_batch_from_memory((size_t)80 << 30, (size_t)1 << 30, per, 256) == 256);
    /* and a 2 GB card far fewer, but some */
    {
        int b = cdb_k_batch_from_memory((size_t)2 << 30, (size_t)1 << 30, per, 4096);
        CHECK_MSG(b >= 8 && b < 4096, "2 GB card: batch %d", b);
    }
}

/* ---- OOM retry with a fake allocator -------------------------------------------- */

typedef struct fake_dev {
    size_t budget, used, peak;
    int n_alloc, n_free, fail_all;
    size_t per_item; /* bytes one item's buffers need in the fake batch fn */
    int calls, oom_calls, items_done, max_n_ok;
    int next_start;   /* checks that ranges come in order without gaps */
    int fail_other_at; /* start at which fn returns CDB_DEVICE (-1: never) */
} fake_dev;

static cdb_status fake_alloc(void *ud, size_t bytes, void **out) {
    fake_dev *f = (fake_dev *)ud;
    if (f->fail_all || f->used + bytes > f->budget) {
        *out = NULL;
        return cdb_seterr(CDB_NOMEM, "fake device: %zu bytes requested, %zu free", bytes,
                          f->budget - f->used);
    }
    *out = malloc(bytes + sizeof(size_t));
    if (!*out) return CDB_NOMEM;
    *(size_t *)*out = bytes;
    f->used += bytes;
    if (f->used > f->peak) f->peak = f->used;
    f->n_alloc++;
    return CDB_OK;
}

static void fake_free(void *ud, void *p) {
    fake_dev *f = (fake_dev *)ud;
    f->used -= *(size_t *)p;
    f->n_free++;
    free(p);
}

/* A batch: three buffers sized by n, as the pipeline's (pixels, activations, out). */
static cdb_status fake_batch(void *ud, int start, int n) {
    fake_dev *f = (fake_dev *)ud;
    cdb_k_allocator a = {fake_alloc, fake_free, f};
    size_t bytes[3] = {f->per_item * n / 2, f->per_item * n / 4, f->per_item * n / 4 + 1};
    void *p[3];
    cdb_status rc;
    f->calls++;
    if (start != f->next_start) return cdb_seterr(CDB_ERROR, "range %d, expected %d", start, f->next_start);
    if (start == f->fail_other_at) return cdb_seterr(CDB_DEVICE, "fake kernel failure");
    rc = cdb_k_alloc_group(&a, bytes, 3, p);
    if (rc == CDB_NOMEM) {
        f->oom_calls++;
        return rc;
    }
    if (rc != CDB_OK) return rc;
    f->items_done += n;
    if (n > f->max_n_ok) f->max_n_ok = n;
    f->next_start = start + n;
    cdb_k_free_group(&a, p, 3);
    return CDB_OK;
}

static fake_dev fake_new(size_t budget, size_t per_item) {
    fake_dev f;
    memset(&f, 0, sizeof f);
    f.budget = budget;
    f.per_item = per_item;
    f.fail_other_at = -1;
    return f;
}

CDB_TEST(oom_retry_shrinks_and_finishes) {
    /* budget fits 37 items: batch 256 -> 128 -> 64 -> 32 fits */
    fake_dev f = fake_new(37 * 1000 + 1, 1000);
    int used = 0;
    CHECK_OK(cdb_k_run_batched(1000, 256, fake_batch, &f, &used));
    CHECK_EQ_INT(used, 32);
    CHECK_EQ_INT(f.items_done, 1000);
    CHECK_EQ_INT(f.oom_calls, 3);
    CHECK_EQ_INT(f.max_n_ok, 32);
    CHECK_EQ_INT(f.n_alloc, f.n_free); /* nothing leaked, failed groups included */
    CHECK_EQ_INT(f.used, 0);
    CHECK(f.peak <= f.budget);
}

CDB_TEST(oom_retry_no_shrink_when_fits) {
    fake_dev f = fake_new((size_t)1 << 30, 1000);
    int used = 0;
    CHECK_OK(cdb_k_run_batched(1000, 256, fake_batch, &f, &used));
    CHECK_EQ_INT(used, 256);
    CHECK_EQ_INT(f.oom_calls, 0);
    CHECK_EQ_INT(f.calls, 4); /* 256 + 256 + 256 + 232 */
    CHECK_EQ_INT(f.items_done, 1000);
}

CDB_TEST(oom_retry_gives_up_at_one) {
    fake_dev f = fake_new(10, 1000); /* not even one item */
    int used = 0;
    CHECK_RC(cdb_k_run_batched(100, 64, fake_batch, &f, &used), CDB_NOMEM);
    CHECK(strstr(cdb_errmsg(), "batch 1") != NULL);
    CHECK_EQ_INT(f.items_done, 0);
    CHECK_EQ_INT(f.oom_calls, 7); /* 64 32 16 8 4 2 1 */
    CHECK_EQ_INT(f.n_alloc, f.n_free);
}

CDB_TEST(oom_retry_other_errors_stop) {
    fake_dev f = fake_new((size_t)1 << 30, 1000);
    f.fail_other_at = 20;
    CHECK_RC(cdb_k_run_batched(100, 10, fake_batch, &f, NULL), CDB_DEVICE);
    CHECK_EQ_INT(f.items_done, 20);
    CHECK_EQ_INT(f.calls, 3);
}

CDB_TEST(oom_retry_edges) {
    fake_dev f = fake_new((size_t)1 << 30, 10);
    CHECK_OK(cdb_k_run_batched(0, 8, fake_batch, &f, NULL));
    CHECK_EQ_INT(f.calls, 0);
    CHECK_OK(cdb_k_run_batched(5, 0, fake_batch, &f, NULL)); /* batch < 1 means 1 */
    CHECK_EQ_INT(f.items_done, 5);
    CHECK_RC(cdb_k_run_batched(5, 8, NULL, &f, NULL), CDB_INVALID);
}

CDB_TEST(alloc_group_all_or_nothing) {
    fake_dev f = fake_new(100, 0);
    cdb_k_allocator a = {fake_alloc, fake_free, &f};
    size_t ok[3] = {10, 20, 30}, big[3] = {40, 40, 40};
    void *p[3] = {(void *)1, (void *)1, (void *)1};
    CHECK_OK(cdb_k_alloc_group(&a, ok, 3, p));
    CHECK(p[0] && p[1] && p[2]);
    CHECK_EQ_INT(f.used, 60);
    cdb_k_free_group(&a, p, 3);
    CHECK(!p[0] && !p[1] && !p[2]);
    CHECK_EQ_INT(f.used, 0);
    CHECK_RC(cdb_k_alloc_group(&a, big, 3, p), CDB_NOMEM);
    CHECK(!p[0] && !p[1] && !p[2]);
    CHECK_EQ_INT(f.used, 0);
    CHECK_EQ_INT(f.n_alloc, f.n_free);
    cdb_k_free_group(&a, p, 3); /* NULLs are fine */
    CHECK_RC(cdb_k_alloc_group(NULL, ok, 3, p), CDB_INVALID);
}

/* ---- PIL resize plans ---------------------------------------------------------- */

CDB_TEST(resize_dims_and_crop) {
    int w, h;
    cdb_kc_resize_dims(640, 480, 224, &w, &h);
    CHECK_EQ_INT(h, 224);
    CHECK_EQ_INT(w, 298); /* int(224 * 640 / 480) = int(298.67) */
    cdb_kc_resize_dims(100, 333, 224, &w, &h);
    CHECK_EQ_INT(w, 224);
    CHECK_EQ_INT(h, 745); /* int(745.92) */
    cdb_kc_resize_dims(224, 224, 224, &w, &h);
    CHECK_EQ_INT(w, 224);
    CHECK_EQ_INT(h, 224);
    /* torchvision: int(round((in - crop) / 2.0)), Python rounds half to even */
    CHECK_EQ_INT(cdb_kc_center_offset(298, 224), 37);
    CHECK_EQ_INT(cdb_kc_center_offset(225, 224), 0); /* round(0.5) = 0 */
    CHECK_EQ_INT(cdb_kc_center_offset(227, 224), 2); /* round(1.5) = 2 */
    CHECK_EQ_INT(cdb_kc_center_offset(229, 224), 2); /* round(2.5) = 2 */
    CHECK_EQ_INT(cdb_kc_center_offset(231, 224), 4); /* round(3.5) = 4 */
    CHECK_EQ_INT(cdb_kc_center_offset(224, 224), 0);
}

CDB_TEST(pil_coeffs_properties) {
    int sizes[][2] = {{640, 224}, {224, 224}, {100, 224}, {1000, 7}, {3, 224}, {1, 5}, {299, 298}};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        int in = sizes[s][0], out = sizes[s][1], ks = 0;
        int32_t *bounds = NULL, *kk = NULL;
        CHECK_OK(cdb_k_pil_coeffs(in, out, 0, out, 0, &ks, &bounds, &kk));
        for (int i = 0; i < out; i++) {
            long long sum = 0;
            CHECK(bounds[2 * i] >= 0 && bounds[2 * i + 1] >= 1);
            CHECK(bounds[2 * i] + bounds[2 * i + 1] <= in);
            CHECK(bounds[2 * i + 1] <= ks);
            for (int k = 0; k < ks; k++) sum += kk[(size_t)i * ks + k];
            /* normalized weights, rounded per tap: sum within a few units of 2^22 */
            CHECK_MSG(llabs(sum - (1LL << 22)) <= ks, "%d->%d pos %d: sum %lld", in, out, i, sum);
        }
        if (in == out) /* identity: one tap of exactly 1.0 */
            for (int i = 0; i < out; i++) {
                int hits = 0;
                for (int k = 0; k < ks; k++) {
                    int32_t v = kk[(size_t)i * ks + k];
                    if (v == (1 << 22)) hits++;
                    else CHECK_EQ_INT(v, 0);
                }
                CHECK_EQ_INT(hits, 1);
            }
        cdb_free(bounds);
        cdb_free(kk);
    }
    {
        int ks;
        int32_t *b, *k;
        CHECK_RC(cdb_k_pil_coeffs(0, 5, 0, 5, 0, &ks, &b, &k), CDB_INVALID);
    }
}

/* Invariants of the plan run on the CPU (bit equality with the encoder's PIL
** reference, cdb_image_preprocess, is checked in tests/gpu/test_cuda_kernels.c,
** which links the encoder). */
CDB_TEST(plan_cpu_constant_and_identity) {
    int dims[][2] = {{640, 480}, {224, 224}, {225, 300}, {31, 17}, {1000, 224}};
    for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++) {
        int w = dims[d][0], h = dims[d][1], size = 224;
        cdb_kc_resize_plan p;
        uint8_t *img = malloc((size_t)w * h * 3), *crop = malloc((size_t)size * size * 3);
        CHECK(img && crop);
        CHECK_OK(cdb_kc_resize_plan_new(w, h, size, &p));
        CHECK(p.row0 >= 0 && p.row0 + p.n_rows <= h);
        /* constant image stays constant (weights sum to one, clipped) */
        for (size_t i = 0; i < (size_t)w * h * 3; i++) img[i] = (uint8_t)(i % 3 == 0 ? 7 : i % 3 == 1 ? 128 : 250);
        cdb_kc_resize_plan_run_cpu(&p, img, crop);
        for (size_t i = 0; i < (size_t)size * size; i++) {
            CHECK_MSG(crop[i * 3] == 7 && crop[i * 3 + 1] == 128 && crop[i * 3 + 2] == 250,
                      "%dx%d: pixel %zu = %d %d %d", w, h, i, crop[i * 3], crop[i * 3 + 1],
                      crop[i * 3 + 2]);
        }
        /* same size: the transform is the identity (PIL skips both passes) */
        if (w == size && h == size) {
            for (size_t i = 0; i < (size_t)w * h * 3; i++) img[i] = (uint8_t)(i * 2654435761u >> 24);
            cdb_kc_resize_plan_run_cpu(&p, img, crop);
            CHECK(memcmp(img, crop, (size_t)w * h * 3) == 0);
        }
        cdb_kc_resize_plan_free(&p);
        free(img);
        free(crop);
    }
}

CDB_TEST(plan_rejects_empty) {
    cdb_kc_resize_plan p;
    CHECK_RC(cdb_kc_resize_plan_new(0, 10, 224, &p), CDB_INVALID);
    CHECK_RC(cdb_kc_resize_plan_new(10, 10, 0, &p), CDB_INVALID);
    cdb_kc_resize_plan_free(&p);
}

/* ---- the plan vs the encoder's PIL-exact reference ----------------------------- */

static uint8_t *rand_image(int w, int h, uint64_t seed) {
    uint8_t *img = malloc((size_t)w * h * 3);
    uint64_t s = seed | 1;
    for (size_t i = 0; i < (size_t)w * h * 3; i++) {
        /* smooth + noise, so both the filter and the clipping are exercised */
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        img[i] = (uint8_t)(((i / 3) % (size_t)w * 255 / (size_t)w + (s >> 58) * 4) & 0xff);
        if ((s >> 20) % 97 == 0) img[i] = (s >> 30) & 1 ? 255 : 0; /* hard edges: overshoot */
    }
    return img;
}

static const int g_dims[][2] = {{640, 480}, {480, 640}, {224, 224}, {225, 224}, {223, 301},
                                {31, 17},   {600, 13},  {13, 600}, {1, 1},     {4032, 3024}};

CDB_TEST(resize_plan_matches_encoder_reference) {
    /* The plan the GPU kernel runs vs encoder/preprocess.c (PIL-exact): same bytes. */
    cdb_preprocess_params pp = cdb_preprocess_params_default();
    for (size_t d = 0; d < sizeof g_dims / sizeof g_dims[0]; d++) {
        int w = g_dims[d][0], h = g_dims[d][1], size = pp.size;
        uint8_t *rgb = rand_image(w, h, 77 + d), *c1 = malloc((size_t)size * size * 3),
                *c2 = malloc((size_t)size * size * 3);
        float *px = malloc((size_t)3 * size * size * 4);
        cdb_image img;
        cdb_kc_resize_plan plan;
        memset(&img, 0, sizeof img);
        img.width = w, img.height = h, img.channels = 3, img.bits = 8, img.pixels = rgb;
        CHECK_OK(cdb_image_preprocess(&img, &pp, px, c1));
        CHECK_OK(cdb_kc_resize_plan_new(w, h, size, &plan));
        cdb_kc_resize_plan_run_cpu(&plan, rgb, c2);
        {
            size_t diff = 0, first = 0;
            for (size_t i = 0; i < (size_t)size * size * 3; i++)
                if (c1[i] != c2[i] && diff++ == 0) first = i;
            CHECK_MSG(diff == 0, "%dx%d: %zu bytes differ from the encoder's crop (first at %zu: %d vs %d)",
                      w, h, diff, first, c2[first], c1[first]);
        }
        cdb_kc_resize_plan_free(&plan);
        free(rgb), free(c1), free(c2), free(px);
    }
}

CDB_TEST_MAIN(device_parse_forms, device_parse_rejects, device_str_roundtrip,
              device_resolve_injected, device_resolve_real, no_device_paths, batch_from_memory,
              oom_retry_shrinks_and_finishes, oom_retry_no_shrink_when_fits,
              oom_retry_gives_up_at_one, oom_retry_other_errors_stop, oom_retry_edges,
              alloc_group_all_or_nothing, resize_dims_and_crop, pil_coeffs_properties,
              plan_cpu_constant_and_identity, plan_rejects_empty,
              resize_plan_matches_encoder_reference)
