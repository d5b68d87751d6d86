/*
** test_encode_images.c: cdb_encode_images, decoded images to embeddings, against its
** oracle: each image alone through cdb_image_preprocess and cdb_encode_pixels (the CPU
** backend gives an image the same bits alone or in any batch: kernels.h). Both routes
** run on the CPU: the host route, and the backend route a GPU takes
** (cdb_k_preprocess_u8 with the host emulation of the device kernels' arithmetic, the
** pixels written into the backend's buffer by the graph's fill, images the device does
** not take uploaded among them). Every embedding must equal the oracle's bit for bit,
** for a ViT (OpenAI layout), SigLIP (squash, HF rescale) and a ModifiedResNet (host
** pixels only), raw and normalized, with gray, RGB, palette, alpha, CMYK and 16-bit
** images mixed in one call, and across the host route's chunks. Also: the refusals,
** and the batch a device's free memory allows (cdb_model_image_batch_for) with made-up
** free-memory figures: 1 when nothing fits, the cap when everything does, exactly k
** when k images' bytes plus the reserve are free, never more as memory shrinks; the
** CPU keeps the caller's batch.
*/
#include <stdlib.h>
#include <string.h>

#include "cdb_test.h"
#include "encoder/encoder_int.h"

#define GOLD CDB_SOURCE_DIR "/tests/golden/models"
#define N_KINDS 9

static uint64_t g_rng = 0x2545F4914F6CDD1Dull;
static unsigned rnd(void) { return (unsigned)(cdb_test_xorshift(&g_rng) >> 32); }

/* Image kind k of a mixed set: 0 RGB 640x480, 1 gray 300x500, 2 RGB at the model's
** size, 3 RGB 3x2, 4 palette RGB, 5 RGBA, 6 CMYK, 7 16-bit RGB, 8 gray 1000x90. */
static cdb_image *make(int k, int size) {
    static const int dims[N_KINDS][3] = {{640, 480, 3}, {300, 500, 1}, {0, 0, 3},
                                         {3, 2, 3},     {97, 61, 3},   {120, 80, 4},
                                         {64, 96, 4},   {80, 50, 3},   {1000, 90, 1}};
    cdb_image *img = calloc(1, sizeof *img);
    size_t n;
    img->width = dims[k][0] ? dims[k][0] : size;
    img->height = dims[k][1] ? dims[k][1] : size;
    img->channels = dims[k][2];
    img->bits = k == 7 ? 16 : 8;
    img->is_palette = k == 4;
    img->is_cmyk = k == 6;
    img->full_width = img->width, img->full_height = img->height, img->scale_denom = 1;
    img->format = "test", img->source = "decoded";
    n = (size_t)img->width * img->height * img->channels * (img->bits / 8);
    img->pixels = malloc(n);
    for (size_t i = 0; i < n; i++)
        ((uint8_t *)img->pixels)[i] = (uint8_t)((i * 7 / 5 + i / 977) % 256 + rnd() % 37);
    if (k == 4) /* a palette image's pixels take few values */
        for (size_t i = 0; i < n; i++) ((uint8_t *)img->pixels)[i] &= 0xC0;
    return img;
}

static void free_img(cdb_image *img) {
    if (img) free(img->pixels);
    free(img);
}

/* Every route of cdb_encode_images on m equals the oracle, n images of kinds
** i % N_KINDS (rotated by shift). *rows_out: the number of rows compared. A test's
** helper: its CHECKs fail the calling test. */
static void check_model(cdb_test_ctx *cdb_t_, const char *name, int n, int shift,
                        int *rows_out) {
    char path[1024];
    cdb_model *m = NULL;
    const cdb_model_info *mi;
    cdb_image **imgs = calloc((size_t)n, sizeof *imgs);
    float *want, *got, *px;
    int rows = 0, E, sz;
    snprintf(path, sizeof path, "%s/%s", GOLD, name);
    CHECK_OK(cdb_model_open(path, NULL, &m));
    mi = cdb_model_get_info(m);
    E = mi->embed_dim, sz = mi->preprocess.size;
    want = malloc(sizeof(float) * (size_t)E * n);
    got = malloc(sizeof(float) * (size_t)E * n);
    px = malloc(sizeof(float) * 3 * (size_t)sz * sz);
    CHECK(imgs && want && got && px);
    for (int i = 0; i < n; i++) imgs[i] = make((i + shift) % N_KINDS, sz);
    for (int normalize = 0; normalize <= 1; normalize++) {
        for (int i = 0; i < n; i++) {
            CHECK_OK(cdb_image_preprocess(imgs[i], &mi->preprocess, px, NULL));
            CHECK_OK(cdb_encode_pixels(m, px, 1, normalize, want + (size_t)i * E));
        }
        for (int route = 0; route <= 2; route++) {
            memset(got, 0xFF, sizeof(float) * (size_t)E * n);
            if (route < 2)
                CHECK_OK(cdb_encode_images_route(m, (const cdb_image *const *)imgs, n, normalize,
                                                 got, route));
            else
                CHECK_OK(cdb_encode_images(m, (const cdb_image *const *)imgs, n, normalize,
                                           got));
            for (int i = 0; i < n; i++, rows++)
                CHECK_MSG(!memcmp(want + (size_t)i * E, got + (size_t)i * E,
                                  sizeof(float) * (size_t)E),
                          "%s: route %d normalize %d image %d (kind %d) differs", name, route,
                          normalize, i, (i + shift) % N_KINDS);
        }
    }
    for (int i = 0; i < n; i++) free_img(imgs[i]);
    free(imgs), free(want), free(got), free(px);
    cdb_model_close(m);
    *rows_out = rows;
}

CDB_TEST(vit_routes_equal_the_oracle) {
    int rows = 0;
    check_model(cdb_t_, "openai_qgelu", 2 * N_KINDS + 1, 0, &rows);
    CHECK_EQ_INT(rows, 6 * (2 * N_KINDS + 1));
}

CDB_TEST(siglip_routes_equal_the_oracle) {
    int rows = 0;
    check_model(cdb_t_, "siglip_hf", N_KINDS, 4, &rows);
    CHECK_EQ_INT(rows, 6 * N_KINDS);
}

CDB_TEST(resnet_routes_equal_the_oracle) {
    int rows = 0;
    check_model(cdb_t_, "rn_qgelu", N_KINDS, 2, &rows);
    CHECK_EQ_INT(rows, 6 * N_KINDS);
}

/* 70 images: more than the host route's chunk of 64, so its second chunk is checked. */
CDB_TEST(host_route_chunks) {
    int rows = 0;
    check_model(cdb_t_, "openai_qgelu", 70, 1, &rows);
    CHECK_EQ_INT(rows, 6 * 70);
}

CDB_TEST(refusals) {
    cdb_model *m = NULL;
    cdb_image *img, *bad;
    const cdb_image *two[2];
    float out[2048];
    CHECK_OK(cdb_model_open(GOLD "/openai_qgelu", NULL, &m));
    img = make(0, 32);
    bad = make(0, 32);
    bad->channels = 5; /* cdb_image_preprocess refuses it */
    two[0] = img, two[1] = NULL;
    CHECK_RC(cdb_encode_images(m, two, 2, 1, out), CDB_INVALID);
    CHECK_RC(cdb_encode_images(NULL, two, 1, 1, out), CDB_INVALID);
    CHECK_RC(cdb_encode_images(m, NULL, 1, 1, out), CDB_INVALID);
    CHECK_RC(cdb_encode_images(m, two, -1, 1, out), CDB_INVALID);
    CHECK(cdb_image_device_ready(img) && !cdb_image_device_ready(bad) &&
          !cdb_image_device_ready(NULL));
    CHECK_OK(cdb_encode_images(m, NULL, 0, 1, NULL));
    two[1] = bad;
    for (int route = 0; route <= 1; route++)
        CHECK_RC(cdb_encode_images_route(m, two, 2, 1, out, route), CDB_INVALID);
    free_img(img), free_img(bad);
    cdb_model_close(m);
}

/* cdb_k_preprocess_u8 checks every geometry before it writes anything. */
CDB_TEST(preprocess_u8_refuses_bad_geometry) {
    cdb_k_backend *be = NULL;
    cdb_k_buf *px = NULL;
    cdb_k_pp_geom g;
    uint8_t src[4 * 4 * 3] = {0};
    const uint8_t *s = src;
    float lut[3 * 256] = {0};
    int bh[2 * 2] = {0, 2, 3, 2}; /* output 1 reads source columns 3 and 4 of 4 */
    int32_t kk[2 * 2] = {1 << 21, 1 << 21, 1 << 21, 1 << 21};
    CHECK_OK(cdb_k_backend_cpu_ref_new(&be));
    CHECK_OK(cdb_k_buf_alloc(be, 3 * 2 * 2 * 2, &px));
    memset(&g, 0, sizeof g);
    g.w = 4, g.h = 4, g.nch = 3, g.stride = 12, g.size = 2, g.left = 1, g.top = 1, g.lut = lut;
    CHECK_OK(cdb_k_preprocess_u8(be, &g, &s, 1, px, 1)); /* a plain crop */
    CHECK_RC(cdb_k_preprocess_u8(be, &g, &s, 1, px, -1), CDB_INVALID);
    g.left = 3; /* the crop leaves the image */
    CHECK_RC(cdb_k_preprocess_u8(be, &g, &s, 1, px, 0), CDB_INVALID);
    g.left = 0, g.nch = 2;
    CHECK_RC(cdb_k_preprocess_u8(be, &g, &s, 1, px, 0), CDB_INVALID);
    g.nch = 3, g.kh = 2, g.bh = bh, g.kkh = kk, g.y0 = 1, g.rows = 2;
    CHECK_RC(cdb_k_preprocess_u8(be, &g, &s, 1, px, 0), CDB_INVALID);
    bh[2] = 2; /* now inside */
    CHECK_OK(cdb_k_preprocess_u8(be, &g, &s, 1, px, 0));
    g.rows = 4; /* rows past the image */
    CHECK_RC(cdb_k_preprocess_u8(be, &g, &s, 1, px, 0), CDB_INVALID);
    CHECK(!cdb_k_preprocess_on_device(be));
    CHECK(!cdb_k_preprocess_on_device(NULL));
    CHECK(!cdb_k_jpeg_on_device(be) && !cdb_k_jpeg_on_device(NULL));
    {
        size_t len = 4;
        cdb_status item = CDB_OK;
        CHECK_RC(cdb_k_jpeg_preprocess(be, &g, &s, &len, 1, px, 0, &item), CDB_UNSUPPORTED);
    }
    cdb_k_buf_free(be, px);
    cdb_k_backend_free(be);
}

CDB_TEST(batch_from_free_memory) {
    static const char *names[] = {"openai_qgelu", "siglip_hf", "rn_qgelu"};
    for (int mi = 0; mi < 3; mi++) {
        char path[1024];
        cdb_model *m = NULL;
        size_t item, px;
        int prev = 1;
        snprintf(path, sizeof path, "%s/%s", GOLD, names[mi]);
        CHECK_OK(cdb_model_open(path, NULL, &m));
        item = cdb_clip_image_item_bytes(m);
        px = (size_t)3 * m->info.image_size * m->info.image_size * sizeof(float);
        CHECK_EQ_INT(cdb_model_image_batch(m, 32, 4096), 32); /* the CPU: no device memory */
        CHECK(!cdb_model_transforms_on_device(m) && !cdb_model_decodes_jpeg_on_device(m));
        if (mi == 2) { /* ResNet: its own chunks, the cap */
            CHECK_EQ_INT(item, 0);
            CHECK_EQ_INT(cdb_model_image_batch_for(m, 0, 77), 77);
            cdb_model_close(m);
            continue;
        }
        CHECK(item > 2 * px); /* activations beside the pixels and the patch matrix */
        CHECK_EQ_INT(cdb_model_image_batch_for(m, 0, 4096), 1);
        CHECK_EQ_INT(cdb_model_image_batch_for(m, item, 4096), 1); /* the reserve eats it */
        CHECK_EQ_INT(cdb_model_image_batch_for(m, (size_t)1 << 50, 4096), 4096);
        CHECK_EQ_INT(cdb_model_image_batch_for(m, (size_t)1 << 50, 0), 1);
        for (int k = 1; k <= 300; k += 7) {
            /* free = k items + the reserve (an eighth of free): 8/7 of k items */
            size_t fr = (k * item * 8 + 6) / 7;
            CHECK_EQ_INT(cdb_model_image_batch_for(m, fr, 4096), k);
            CHECK_EQ_INT(cdb_model_image_batch_for(m, fr, k / 2 + 1), k / 2 + 1);
        }
        for (size_t fr = 0; fr < 200 * item; fr += item / 3 + 1) {
            int b = cdb_model_image_batch_for(m, fr, 4096);
            CHECK(b >= prev && (b == 1 || (size_t)b * item <= fr - fr / 8));
            prev = b;
        }
        cdb_model_close(m);
    }
    {
        cdb_k_backend *be = NULL;
        size_t fr = 1, tot = 1;
        CHECK_OK(cdb_k_backend_cpu_new(1, &be));
        CHECK_RC(cdb_k_device_memory(be, &fr, &tot), CDB_UNSUPPORTED);
        CHECK(fr == 0 && tot == 0);
        CHECK_RC(cdb_k_device_memory(NULL, NULL, NULL), CDB_INVALID);
        cdb_k_backend_free(be);
    }
}

CDB_TEST_MAIN(vit_routes_equal_the_oracle, siglip_routes_equal_the_oracle,
              resnet_routes_equal_the_oracle, host_route_chunks, refusals,
              preprocess_u8_refuses_bad_geometry, batch_from_free_memory)
