/*
** encoder_int.h: private declarations of the encoder's MODEL section, shared by
** safetensors.c (the file format), model.c (key namings, architecture, configs,
** tokenizer, the public API), clip.c (the ViT and text forward graph) and resnet.c
** (the ModifiedResNet image graph). Not installed; no other module includes it.
*/
#ifndef CDB_ENCODER_INT_H
#define CDB_ENCODER_INT_H

#include "encoder/encoder.h"
#include "kernels/kernels.h"

/* The standard CLIP vocabulary when a model brings none: this data file, found by
** cdb_data_path() (installed with clipdb, else the source tree); CLIPDB_VOCAB
** overrides it at run time. */
#define CDB_STD_VOCAB "data/bpe_simple_vocab_16e6.txt.gz"

/* ---- safetensors (safetensors.c) ---------------------------------------------- */

typedef enum cdb_st_dtype {
    CDB_ST_F32 = 0, CDB_ST_F16, CDB_ST_BF16, /* the float types a model may use */
    CDB_ST_F64, CDB_ST_I64, CDB_ST_I32, CDB_ST_I16, CDB_ST_I8, CDB_ST_U8, CDB_ST_BOOL,
    CDB_ST_U16, CDB_ST_U32, CDB_ST_U64, CDB_ST_F8_E4M3, CDB_ST_F8_E5M2
} cdb_st_dtype;

#define CDB_ST_MAX_DIMS 8
#define CDB_ST_MAX_HEADER (100u << 20) /* the reference implementation's limit */

typedef struct cdb_st_tensor {
    const char *name;       /* owned by the file */
    cdb_st_dtype dtype;
    const char *dtype_name; /* "F32", ... (static) */
    int n_dims;
    int64_t shape[CDB_ST_MAX_DIMS];
    int64_t n_elems;
    size_t offset;          /* from the start of the file */
    size_t n_bytes;
    const void *data;       /* inside the mapping; valid while the file is open */
} cdb_st_tensor;

typedef struct cdb_st_file {
    char *path;
    void *map;
    size_t size;
    int n_tensors;
    cdb_st_tensor *tensors; /* sorted by name */
    char *names;            /* storage for tensor names */
    char *metadata_json;    /* "__metadata__" re-serialized, or NULL */
} cdb_st_file;

/* Maps and validates a whole file: u64 header length, a JSON object (jansson,
** duplicate keys refused) of {dtype, shape, data_offsets} entries, every offset
** inside the data area, sizes = prod(shape) * dtype size, no two tensors
** overlapping. No tensor byte is read. Errors: CDB_IO (open/mmap), CDB_CORRUPT
** (format, with the tensor name), CDB_UNSUPPORTED (unknown dtype). */
cdb_status cdb_st_open(const char *path, cdb_st_file **out /* OUT */);
void cdb_st_close(cdb_st_file *f);
/* NULL when absent. */
const cdb_st_tensor *cdb_st_find(const cdb_st_file *f, const char *name);
size_t cdb_st_dtype_size(cdb_st_dtype dt);

/* ---- model (model.c) ------------------------------------------------------------ */

typedef struct cdb_clip_block {
    cdb_k_buf *ln1_g, *ln1_b, *qkv_w, *qkv_b, *out_w, *out_b;
    cdb_k_buf *ln2_g, *ln2_b, *fc_w, *fc_b, *proj_w, *proj_b;
    /* The vision tower's last block only (its qkv_w and qkv_b are then NULL): the
    ** in-projection as q [W, W] and k|v [2W, W], so that only the class token's query
    ** is computed (clip.c, run_last_block_pooled). */
    cdb_k_buf *q_w, *q_b, *kv_w, *kv_b;
} cdb_clip_block;

typedef struct cdb_clip_tower {
    int width, layers, heads, mlp_width;
    cdb_k_act act;                    /* the MLPs' activation */
    float ln_eps;                     /* every LayerNorm's eps (CLIP: 1e-5) */
    cdb_clip_block *blocks;
    cdb_k_buf *ln_pre_g, *ln_pre_b;   /* vision only (NULL: none, SigLIP) */
    cdb_k_buf *ln_post_g, *ln_post_b; /* ln_post (vision) / ln_final (text) */
    cdb_k_buf *proj;                  /* [embed_dim, width], nn.Linear layout (NULL: none,
                                         SigLIP's image tower: its head gives the embedding) */
    cdb_k_buf *proj_b;                /* the projection's bias (SigLIP's text head) or NULL */
    /* vision */
    cdb_k_buf *patch_w; /* [width, 3*patch*patch] */
    cdb_k_buf *patch_b; /* [width] (SigLIP) or NULL */
    cdb_k_buf *cls;     /* [width]; NULL: no class token (SigLIP) */
    cdb_k_buf *pos;     /* [n_pos, width] */
    /* SigLIP's MAP head (probe != NULL; clip.c, siglip_image_forward): the probe's
    ** query (q_w, q_b) attends over every token's k|v (kv_w, kv_b) after ln_post, then
    ** out_w/out_b; that row r becomes r + mlp(ln(r)) with ln2_g/ln2_b and fc/proj. The
    ** block's other fields are unused. */
    cdb_k_buf *probe;   /* [width] */
    cdb_clip_block head;
    /* text */
    cdb_k_buf *tok_emb; /* [vocab, width]; CDB_K_W_TABLE: F16/BF16 stays so on the CPU */
    int pool_last;      /* 1: bidirectional, pooled at the last position (SigLIP); 0:
                           causal, pooled at the end token (CLIP) */
} cdb_clip_tower;

/* ModifiedResNet (OpenAI's RN50 ... RN50x64 image towers). Convolutions run as
** gemm over NHWC activations; every BatchNorm is folded into its convolution at
** load (model.c, in double): w' = w * gamma / sqrt(var + eps), b' = beta - mean *
** gamma / sqrt(var + eps), eps 1e-5. */
typedef struct cdb_rn_conv {
    cdb_k_buf *w; /* [cout, k*k*cin]: columns in (ky, kx, cin) order, the im2col order */
    cdb_k_buf *b; /* [cout]: the folded BatchNorm shift */
    int cin, cout, k, stride, pad;
} cdb_rn_conv;

typedef struct cdb_rn_block {
    cdb_rn_conv c1, c2, c3; /* 1x1 -> 3x3 (pad 1) -> 1x1 (4x channels) */
    cdb_rn_conv down;       /* the shortcut's 1x1 (down.w NULL: identity shortcut) */
    int stride;             /* 2: avg pool after c2 and before down (anti-aliasing) */
} cdb_rn_block;

typedef struct cdb_rn_tower {
    int width;              /* base width: the stem's output, layer1's planes */
    int stage_blocks[4];    /* Bottlenecks per stage (RN50: 3 4 6 3) */
    int n_blocks;
    cdb_rn_conv stem[3];    /* 3x3 stride 2, 3x3, 3x3 (ReLU after each), then avg pool 2 */
    cdb_rn_block *blocks;   /* n_blocks, stage after stage */
    int grid, pool_width, heads; /* attention pool: grid^2 + 1 tokens, 32 * width wide */
    cdb_k_buf *pos;         /* [grid^2 + 1, pool_width] */
    cdb_k_buf *q_w, *q_b;   /* [pool_width, pool_width], [pool_width] */
    cdb_k_buf *kv_w, *kv_b; /* k_proj | v_proj rows: [2 * pool_width, pool_width], [2 * ...] */
    cdb_k_buf *c_w, *c_b;   /* c_proj: [embed_dim, pool_width], [embed_dim] */
} cdb_rn_tower;

/* ---- the cache folder (cachedir.c) ---------------------------------------------------
** What the packed matrix cache and the tokenizer cache share: the folder, the stamp
** rule (core.h's cdb_stamp) and the size policy (cachedir.c says why each is safe).
** Best effort throughout: a cache that cannot be written or stamped only costs the next
** open its rebuild. */

/* The folder: dir when given, else $CLIPDB_CACHE_DIR/packed, $XDG_CACHE_HOME/clipdb/packed,
** $HOME/.cache/clipdb/packed. 0 when one is named (out: links above its last component
** resolved, so later opens do not walk them again), -1 when none, too long, or not safe:
** an existing folder that is a link, another user's, or writable by anyone else (group
** write only for our own group) is no cache, nor is one under a folder that anyone but us
** and root could rename entries of (no sticky bit): someone else could forge its files
** (their sums catch damage, not tampering) or redirect our writes and prunes. */
int cdb_cache_dir_pick(const char *dir, char *out, size_t size);
/* mkdir -p of dir (0777 & umask); 0 when made or there and safe (as above, every folder
** above it included), else -1. */
int cdb_cache_dir_make(const char *dir);
/* write(2) all of p (EINTR retried); 0 on success. */
int cdb_cache_write_all(int fd, const void *p, size_t n);
struct stat;
/* Opens the cache file path (no link, no FIFO: cdb_open_regular), its stat in st and its
** first hsize bytes in h: the descriptor, or -1 with why ("" when there is no file). */
int cdb_cache_open_header(const char *path, void *h, size_t hsize, struct stat *st, char *why,
                          size_t why_size);
/* Refuses a cache file being opened: its reason, printf-style, in the char array why;
** then to the opener's `done:`. */
#define CDB_CACHE_REFUSE(why, ...)                                   \
    do {                                                             \
        snprintf(why, sizeof why, __VA_ARGS__);                      \
        goto done;                                                   \
    } while (0)
/* A cache file as pieces: n bytes of p at byte `at` of the file; ascending, apart. */
typedef struct cdb_cache_piece {
    const void *p;
    size_t n;
    uint64_t at;
} cdb_cache_piece;
typedef struct cdb_cache_pieces {
    const cdb_cache_piece *v;
    int n;
} cdb_cache_pieces;
/* cdb_cache_publish's fill for ud, a cdb_cache_pieces: each piece at its offset, zeros
** between; -1 when a write fails or a piece starts before the end of the one before. */
int cdb_cache_fill_pieces(int fd, void *ud);
/* Creates dir if needed, has fill write a private temporary file in it (0 on success),
** renames that over path (atomic). 0 on success, else -1 with why. */
int cdb_cache_publish(const char *dir, const char *path, int (*fill)(int fd, void *ud), void *ud,
                      char *why, size_t why_size);
/* Keeps the keep most recently used files of dir ending in suffix; removes the others
** with their stamps, stamps without a file, and temporary files over an hour old. */
void cdb_cache_prune(const char *dir, const char *suffix, int keep);

/* ---- the packed matrix cache (packcache.c) ----------------------------------------- */

typedef struct cdb_pack_cache cdb_pack_cache;

/* Starts an open's use of the cache file for (hash, towers: "text", "image" or
** "both") in be's matrix layout, in dir (NULL: the default folder, encoder.h): the file
** is mapped and validated whole if it is there. NULL (why says) when the backend has
** no packed layout, there is no hash or no folder; the open then runs without. */
cdb_pack_cache *cdb_pack_cache_begin(cdb_k_backend *be, const char *dir, const char *hash,
                                     const char *towers, char *why, size_t why_size);
/* The open's next matrix: 1 with *out borrowed from the mapping when the validated
** file holds a rows x cols matrix at this place of the sequence; else 0 (the caller
** packs it; from the first 0 on every call gives 0 and the file is rewritten). pc may
** be NULL (0). */
int cdb_pack_cache_take(cdb_pack_cache *pc, int rows, int cols, cdb_k_buf **out /* OUT */);
/* Records the matrix the open just made (taken or packed), in order, for the
** rewrite; b must live until cdb_pack_cache_end. pc may be NULL. */
void cdb_pack_cache_note(cdb_pack_cache *pc, const cdb_k_buf *b, int rows, int cols);
/* After a successful open: writes the file (a temporary file renamed over it) unless
** every matrix came from it; sets the status. The mapping stays until _free. */
void cdb_pack_cache_end(cdb_pack_cache *pc);
/* cdb_model_info.pack_cache and pack_cache_path ("off" and "" for NULL). */
const char *cdb_pack_cache_status(const cdb_pack_cache *pc);
const char *cdb_pack_cache_path(const cdb_pack_cache *pc);
/* Unmaps the file: after every buffer taken from it is freed. NULL ok. */
void cdb_pack_cache_free(cdb_pack_cache *pc);

struct cdb_model {
    cdb_model_info info;
    cdb_k_backend *be;
    cdb_k_act act;
    int n_files;
    cdb_st_file **files;
    cdb_clip_tower vision, text;
    int vision_rn;   /* 1: the image tower is rn (ModifiedResNet), not vision (ViT) */
    cdb_rn_tower rn;
    cdb_tok *tok;
    int eot_id; /* pooling token: the tokenizer's end token, else vocab_size - 1 */
    int siglip; /* the SigLIP family (info.family "SigLIP") */
    cdb_pack_cache *pc; /* the packed matrix cache this open used, or NULL */
    /* storage for the info strings */
    char *name, *description, *act_source;
};

/* ---- graph (clip.c) ------------------------------------------------------------- */

/* Raw (unnormalized) embeddings, n * embed_dim floats. Inputs already validated
** for shape; ids are checked against the vocabulary here. */
cdb_status cdb_clip_image_forward(cdb_model *m, const float *pixels, int n, float *out /* OUT */);
/* Device bytes one image of a ViT image forward occupies: its rows of activation
** scratch, its pixels and its patch matrix; 0 for a ResNet tower. */
size_t cdb_clip_image_item_bytes(const cdb_model *m);
/* Where an image forward's pixels come from: host CHW floats (pixels), or, when pixels
** is NULL, fill, which writes images [first, first + count) of the call, CHW floats,
** into px[0 .. count) (a buffer of the model's backend; cdb_k_preprocess_u8 on a GPU). */
typedef struct cdb_pixsrc {
    const float *pixels;
    cdb_status (*fill)(void *ud, cdb_k_backend *be, int first, int count, cdb_k_buf *px);
    void *ud;
} cdb_pixsrc;
/* cdb_clip_image_forward from src (a ResNet tower takes host pixels only: CDB_INVALID
** for a fill). */
cdb_status cdb_clip_image_forward_src(cdb_model *m, const cdb_pixsrc *src, int n,
                                      float *out /* OUT */);
/* cdb_encode_images with the route chosen (encode_images.c): on_backend 1 transforms
** the 8-bit gray/RGB images with cdb_k_preprocess_u8 on the model's backend, 0 runs
** cdb_image_preprocess on the host. cdb_encode_images picks cdb_k_preprocess_on_device;
** tests force the backend route on the CPU, where it must give the same bits. */
cdb_status cdb_encode_images_route(cdb_model *m, const cdb_image *const *imgs, int n,
                                   int normalize, float *out /* OUT */, int on_backend);
/* cdb_encode_files with the route chosen as cdb_encode_images_route's (on the CPU the
** backend route decodes every file on the CPU; nvJPEG needs a GPU backend). */
cdb_status cdb_encode_files_route(cdb_model *m, const void *const *bufs, const size_t *lens,
                                  int n, const cdb_image_params *ip, int normalize,
                                  float *out /* OUT */, cdb_status *item_rc /* OUT */,
                                  cdb_decoder *used /* OUT */, int on_backend);
/* The embeddings' checks and normalization every image encode call ends with
** (model.c): CDB_ERROR on a non-finite value, then L2 rows when normalize. */
cdb_status cdb_encode_finish(const cdb_model *m, float *out, int n, int normalize);
cdb_status cdb_clip_text_forward(cdb_model *m, const int32_t *ids, int n, float *out /* OUT */);

/* ---- ModifiedResNet graph (resnet.c) ----------------------------------------------- */

/* The ResNet image tower on n preprocessed images (NCHW, image_size square): raw
** embeddings, n * embed_dim floats. cdb_clip_image_forward calls it for m->vision_rn. */
cdb_status cdb_rn_image_forward(cdb_model *m, const float *pixels, int n, float *out /* OUT */);
/* Frees the tower's buffers (be may be NULL: nothing was uploaded) and zeroes it. */
void cdb_rn_tower_free(cdb_k_backend *be, cdb_rn_tower *t);

/* ---- the transform's plan (preprocess.c) ---------------------------------------------
** What cdb_image_preprocess computes before touching a pixel, for a w x h image: the
** resized size, the crop offsets, PIL's coefficients of each pass that runs and the
** normalization table. The one place they are computed: cdb_image_preprocess runs
** on it, and so does the device's transform (kernels/cuda/pp_elem.h's arithmetic). */
typedef struct cdb_pp_plan {
    int w, h, size;
    int64_t nw, nh;  /* resized size */
    int left, top;   /* crop offsets in the resized image */
    int need_h, need_v; /* the width / height changes: that pass runs */
    int y0, y1;      /* need_h: source rows [y0, y1) the horizontal pass reads */
    int kh, kv;      /* taps per output of each pass (0: it does not run, or no coeffs) */
    int *bh, *bv;    /* per output: first source index, tap count; bv relative to y0 when
                        need_h (it reads the horizontal pass's rows), else to row 0 */
    int32_t *kkh, *kkv;
    float lut[3][256]; /* ToTensor (or HF's rescale) then Normalize, per byte value */
} cdb_pp_plan;
/* Validates p (CDB_INVALID as cdb_image_preprocess), fills *pl; coeffs = 0 leaves
** kh, kv at 0 and the tables NULL (palette images, resized with nearest). Free with
** cdb_pp_plan_free (also after a failure). */
cdb_status cdb_pp_plan_make(int w, int h, const cdb_preprocess_params *p, int coeffs,
                            cdb_pp_plan *pl /* OUT */);
void cdb_pp_plan_free(cdb_pp_plan *pl);
/* The geometry cdb_k_preprocess_u8 runs for a pl->w x pl->h image of nch (1 or 3)
** packed channels over pl (tables borrowed from pl: keep it until the op returns). */
void cdb_pp_plan_geom(const cdb_pp_plan *pl, int nch, cdb_k_pp_geom *g /* OUT */);

#endif
