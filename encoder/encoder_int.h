/*
** encoder_int.h: private declarations of the encoder's MODEL section, shared by
** safetensors.c (the file format), model.c (key namings, architecture, configs,
** tokenizer, the public API) and clip.c (the forward graph). Not installed; no
** other module includes it.
*/
#ifndef CDB_ENCODER_INT_H
#define CDB_ENCODER_INT_H

#include "encoder/encoder.h"
#include "kernels/kernels.h"

/* The standard CLIP vocabulary when a model brings none. CMake defines it as an
** absolute path under the source tree; CLIPDB_VOCAB overrides it at run time. */
#ifndef CDB_DEFAULT_VOCAB
#define CDB_DEFAULT_VOCAB "data/bpe_simple_vocab_16e6.txt.gz"
#endif

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
} cdb_clip_block;

typedef struct cdb_clip_tower {
    int width, layers, heads, mlp_width;
    cdb_clip_block *blocks;
    cdb_k_buf *ln_pre_g, *ln_pre_b;   /* vision only */
    cdb_k_buf *ln_post_g, *ln_post_b; /* ln_post (vision) / ln_final (text) */
    cdb_k_buf *proj;                  /* [embed_dim, width], nn.Linear layout */
    /* vision */
    cdb_k_buf *patch_w; /* [width, 3*patch*patch] */
    cdb_k_buf *cls;     /* [width] */
    cdb_k_buf *pos;     /* [n_pos, width] */
    /* text */
    cdb_k_buf *tok_emb; /* [vocab, width] */
} cdb_clip_tower;

struct cdb_model {
    cdb_model_info info;
    cdb_k_backend *be;
    cdb_k_act act;
    int n_files;
    cdb_st_file **files;
    cdb_clip_tower vision, text;
    cdb_tok *tok;
    int eot_id; /* pooling token: the tokenizer's end token, else vocab_size - 1 */
    /* storage for the info strings */
    char *name, *description, *act_source;
};

/* ---- graph (clip.c) ------------------------------------------------------------- */

/* Raw (unnormalized) embeddings, n * embed_dim floats. Inputs already validated
** for shape; ids are checked against the vocabulary here. */
cdb_status cdb_clip_image_forward(cdb_model *m, const float *pixels, int n, float *out /* OUT */);
cdb_status cdb_clip_text_forward(cdb_model *m, const int32_t *ids, int n, float *out /* OUT */);

#endif
