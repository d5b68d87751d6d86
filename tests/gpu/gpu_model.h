/*
** gpu_model.h: a ViT-B/32-shaped CLIP model with seeded random weights, written as an
** OpenAI-layout F16 .safetensors file (model_test_util.h's writer for the names and
** shapes, then every tensor filled here), so that the GPU tests and bench_gpu run the
** product's own graph (encoder/clip.c through cdb_model_open) on CUDA and on the CPU.
** Values: LayerNorm gains 1 + 0.1u, biases 0.02u, embeddings 0.1u, matrices u *
** sqrt(3 / fan_in) (u uniform in [-1, 1)): activations keep unit scale through the
** 12 blocks, as a trained model's do. Header-only, test code.
*/
#ifndef CDB_TESTS_GPU_GPU_MODEL_H
#define CDB_TESTS_GPU_GPU_MODEL_H

#include <stdint.h>

#define CDB_TEST_TMP_TAG "gpu"
#include "encoder/model_test_util.h"
#include "kernels/kernels.h"

/* ViT-B/32: 224 px, patch 32, width 768, 12 layers, MLP 3072, embed 512; its text
** tower: width 512, 12 layers, context 77, vocabulary 49408. */
#define GM_SIZE 224
#define GM_PATCH 32
#define GM_WIDTH 768
#define GM_EMBED 512

/* 1 when this build has CUDA and a usable device (driver, cuBLAS); NEED_GPU() skips a
** test (exit 77 when every test skips) otherwise. */
static inline int gpu_usable(void) {
    return cdb_k_cuda_built() && cdb_k_cuda_device_count() > 0 && !*cdb_k_cuda_unusable_reason();
}
#define NEED_GPU()                                                                     \
    do {                                                                               \
        if (!gpu_usable()) CDB_SKIP("no usable GPU: %s", cdb_k_cuda_unusable_reason()); \
    } while (0)

static inline float gm_rand(uint64_t *s) { /* uniform in [-1, 1) */
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return (float)((*s >> 40) / (double)(1 << 24)) * 2.0f - 1.0f;
}

/* The scale of tensor `name` of shape sh[0..nd) (see the file comment). */
static inline double gm_scale(const char *name, const json_int_t *sh, int nd, int *is_gain) {
    size_t len = strlen(name);
    int weight = len > 7 && !strcmp(name + len - 7, ".weight");
    *is_gain = 0;
    if (strstr(name, "embedding")) return 0.1;
    if (nd == 1) {
        *is_gain = weight && (strstr(name, "ln_") || strstr(name, "ln_final"));
        return *is_gain ? 0.1 : 0.02;
    }
    if (!strcmp(name, "visual.proj") || !strcmp(name, "text_projection"))
        return sqrt(3.0 / (double)sh[0]); /* [width, embed]: x @ proj */
    {
        json_int_t fan_in = 1;
        for (int i = 1; i < nd; i++) fan_in *= sh[i];
        return sqrt(3.0 / (double)fan_in);
    }
}

/* Fills every F16 tensor of the safetensors file at path (its header already written
** over a hole) with seeded random values. 1 on success. */
static inline int gm_fill(const char *path, uint64_t seed) {
    int fd = open(path, O_RDWR), ok = 0;
    struct stat st;
    uint8_t *map = MAP_FAILED;
    uint64_t hl = 0, s = seed | 1;
    json_t *hdr = NULL;
    const char *name;
    json_t *e;
    if (fd < 0 || fstat(fd, &st) != 0) goto out;
    map = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) goto out;
    for (int i = 0; i < 8; i++) hl |= (uint64_t)map[i] << (8 * i);
    hdr = json_loadb((const char *)map + 8, (size_t)hl, 0, NULL);
    if (!hdr) goto out;
    json_object_foreach(hdr, name, e) {
        json_t *sh = json_object_get(e, "shape"), *off = json_object_get(e, "data_offsets");
        json_int_t dims[4] = {1, 1, 1, 1}, a, b;
        int nd = sh ? (int)json_array_size(sh) : 0, gain;
        double sc;
        uint16_t *d;
        if (!off || strcmp(json_string_value(json_object_get(e, "dtype")), "F16"))
            continue; /* __metadata__, the F32 logit_scale */
        for (int i = 0; i < nd && i < 4; i++) dims[i] = json_integer_value(json_array_get(sh, i));
        a = json_integer_value(json_array_get(off, 0));
        b = json_integer_value(json_array_get(off, 1));
        sc = gm_scale(name, dims, nd, &gain);
        d = (uint16_t *)(map + 8 + hl + a);
        for (json_int_t i = 0; i < (b - a) / 2; i++)
            d[i] = cdb_k_f32_to_f16_1((float)(gain + sc * gm_rand(&s)));
    }
    ok = 1;
out:
    json_decref(hdr);
    if (map != MAP_FAILED) ok = munmap(map, (size_t)st.st_size) == 0 && ok;
    if (fd >= 0) ok = close(fd) == 0 && ok;
    return ok;
}

/* Writes the model to dir/vitb32_random_f16.safetensors (path: its name, >= 700
** bytes). 1 on success. */
static inline int gm_write_vitb32(const char *dir, uint64_t seed, char *path) {
    st_writer w = {json_object(), 0, NULL};
    const int64_t G = GM_SIZE / GM_PATCH;
    snprintf(path, 700, "%s/vitb32_random_f16.safetensors", dir);
    add_openai_vit(&w, GM_WIDTH, GM_PATCH, G, 12, 4 * GM_WIDTH, 4 * GM_WIDTH, GM_EMBED);
    add_openai_text(&w, 49408, 77, 512, 12, 2048, GM_EMBED);
    st_add(&w, "F32", 4, 0, NULL, "logit_scale"); /* a hole: 0.0f */
    return write_header(path, &w, 0) && gm_fill(path, seed);
}

#endif
