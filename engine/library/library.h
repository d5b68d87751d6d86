/*
** library.h: the library part of engine/, over search/ and base/: the recorded roots,
** the one way from a catalog row to a photo's bytes, reading and decoding photos,
** thumbnails and previews, files by id, verify, folders (forget, move).
**
** - library.c:   the library model: recorded roots, what an ingest PATH means.
** - imagefile.c: reading and decoding one photo, failures classified.
** - rowfile.c:   the one way from a catalog row to a photo's bytes.
** - thumbs.c:    thumbnails (made from the decoded image, stored by db/).
** - files.c:     files by id (originals, thumbnails), errors, the vectors for export.
** - preview.c:   the viewer's large JPEGs of originals, cached in <db>/previews/.
** - deep.c, verify.c: verify (deep), stats.
** - folders.c:   listing, forgetting and moving roots.
** - create.c:    creating a database bound to a model (or like another database).
** - merge.c:     merging databases made in parts (ingest --part I/N).
** - part_index.c: an index built in parts on a cluster: the trained index, each part's.
** - merge_index.c: the merged database's index, built in parts.
** - duplicates.c: the duplicate groups (dupes/dupes.h over the default model's vectors
**                 and each photo's bytes).
*/
#ifndef CDB_ENGINE_LIBRARY_H
#define CDB_ENGINE_LIBRARY_H

#include "engine/search/search.h"

/* ---- work a killed writer left (folders.c) ---------------------------------- */

/* Finishes a move or a forget that a killed run began (their notes in the catalog say
** which): the roots still at its path, then for a move the folding of roots, for a
** forget the indexes and the space. CDB_OK when there was none. Writer. */
cdb_status cdb_eng_finish_leftovers(cdb_engine *e);
/* What cdb_eng_finish_leftovers would finish: *forget the path of a forget, *move the
** old path of a move, begun and not finished (heap, cdb_free; NULL when none). */
cdb_status cdb_eng_leftovers(cdb_db *db, char **forget /* OUT */, char **move /* OUT */);

/* ---- folders not walked (the ingest walk, folders.c) ------------------------------- */

/* How the reason of a walk problem starts when a folder was not walked because its
** rules (a .clipdbignore there or above it) could not be read in full: the walk
** (ingest/walk.c) writes it, `folders` (cdb_engine_folder.not_walked) lists those. */
#define CDB_ENG_NOT_WALKED "not walked: "

/* ---- models (create.c) ---------------------------------------------------------------- */

/* Model dm of the database from, registered in the writer to (its record: weights hash,
** name, dim, info, decode mode) unless to has it already; *id: its id in to. */
cdb_status cdb_eng_model_copy(cdb_db *from, const cdb_db_model *dm, cdb_db *to,
                              int64_t *id /* OUT */);

/* ---- the index of a merged database (merge_index.c) --------------------------------- */

/* A part's own index, for the merge (cdb_engine_index_add_part made it): where it is and
** how the part's file ids became the database's. */
typedef struct eng_part_index {
    const char *dir;     /* the part's folder */
    cdb_db *db;          /* the part (a reader): its generation says if the index is stale */
    const int64_t *from; /* the part's file ids whose rows the merge took from it, ascending */
    const int64_t *to;   /* the database's id of each */
    int64_t n;
} eng_part_index;

/* What cdb_eng_index_build_split did. */
typedef struct eng_split_result {
    int built_in;      /* the parts an IVF index was built in, 0 when it was built whole */
    int from_files;    /* of those, the parts whose lists came from their own index */
    int trained_file;  /* 1: the quantizer came from the trained file */
} eng_split_result;

/* Builds and saves the model's index as cdb_eng_index_build does (kind: cdb_index_kind),
** except that an IVF kind is built in parts from one trained index: the stored vectors
** of file id i go to part part_of[i] - 1 (ids >= n_part_of or with 0: a last part of
** their own), each part into a copy of the trained index, whose inverted lists are then
** merged (cdb_index_build_parts). Same entries as a single build from that trained index.
** trained (NULL: none) and pi[n_parts] (NULL: none): the trained index file and each
** part's own index made from it (cdb_engine_index_add_part), whose ids are renamed
** (pi's from -> to) and whose lists are merged instead of adding the part's vectors; a
** part index that is missing, stale (its part's generation moved on) or whose ids are not
** exactly that part's group is not used: its vectors are added again, with a warning on the
** log. A trained file that is absent or unusable: trained here on the whole store (the
** plan decides the kind), a warning when it was there. CDB_NOTFOUND when the model has no
** vectors (nothing written). */
cdb_status cdb_eng_index_build_split(cdb_db *db, int64_t model_id, int dim, int kind,
                                     const uint8_t *part_of, int64_t n_part_of, int n_parts,
                                     const char *trained, const eng_part_index *pi,
                                     eng_index_result *res /* OUT */,
                                     eng_split_result *split /* OUT */);

/* The stamp of the trained index file at path: FNV-1a of its bytes, 16 hex digits. */
cdb_status cdb_eng_trained_stamp(const char *path, char stamp[17] /* OUT */);

/* cdb_engine_index_add_part over the part's handle db (a reader will do). */
cdb_status cdb_eng_part_index_add(cdb_db *db, const char *trained,
                                  cdb_engine_part_add_report *r /* OUT */);

/* <part_dir>/index/part.<stamp>.cdbidx: a part's index made from the trained index whose
** file has that stamp. */
void cdb_eng_part_index_path(const char *part_dir, const char *stamp, char *buf, size_t size);

/* ---- paths and sizes (library.c, verify.c) ------------------------------------------ */

/* The bytes of the files in the folder tree dir: what `stats` says the database takes,
** and what `forget` measures before and after (verify.c). SQLite's shared-memory
** files (*-shm: an index of the WAL, there only while a connection is open) are not
** counted, so the figure does not depend on who has the database open. */
int64_t cdb_eng_disk_bytes(const char *dir);

/* 1 when path (resolved, '/'-separated, no trailing slash) is dir or lies under it;
** strictly: under it only (library.c). */
int cdb_eng_path_under(const char *path, const char *dir, int strictly);
/* 1 when a component of rel (a relpath, '/'-separated) starts with '.': a walk of the
** folder rel lies in skips it (library.c). */
int cdb_eng_rel_hidden(const char *rel);

/* ---- reading photos (imagefile.c) -------------------------------------------------- */

typedef enum eng_readfail {
    ENG_FAIL_NONE = 0,
    ENG_FAIL_GONE,      /* not there any more (deleted or moved since the walk) */
    ENG_FAIL_NOT_IMAGE, /* sniffed: no image signature */
    ENG_FAIL_TRANSIENT, /* I/O, permission, memory: retry later */
    ENG_FAIL_PERMANENT  /* the bytes cannot be used: quarantine until the file changes */
} eng_readfail;
/* size, mtime, ctime, dev, ino of a stat into m. */
void cdb_eng_stat_meta(const struct stat *st, cdb_db_file_meta *m);
/* Reads the whole file at path: *buf (malloc'd, the caller frees) and meta's stat
** fields and hash. sniff: the name is not an image's; the first bytes decide
** (ENG_FAIL_NOT_IMAGE). On failure reason gets one line. */
eng_readfail cdb_eng_read_photo(const char *path, int sniff, unsigned char **buf /* OUT */,
                        cdb_db_file_meta *meta /* OUT */, char *reason, size_t reason_size);
/* Reads the whole of fd, an open regular file whose stat is st (the caller keeps
** fd): as cdb_eng_read_photo after its open, sniff and all. */
eng_readfail cdb_eng_read_photo_fd(int fd, const struct stat *st, int sniff,
                                   unsigned char **buf /* OUT */, cdb_db_file_meta *meta /* OUT */,
                                   char *reason, size_t reason_size);

/* ---- the one way from a catalog row to a photo's bytes (rowfile.c) ------------------ */

typedef struct eng_row_ref {
    const char *root;      /* the root's recorded path: a folder, or a file root's file */
    const char *relpath;   /* inside it, '/'-separated; "" for a file root's file */
    int follow_symlinks;   /* the root's setting: its walks recorded photos through links */
    const cdb_db_file_meta *rec; /* the row: size, mtime_ns, dev, ino (0: unrecorded) */
} eng_row_ref;

typedef enum eng_open_rc {
    ENG_OPEN_OK = 0,
    ENG_OPEN_GONE,    /* nothing at the path (ENOENT, ENOTDIR): moved or deleted */
    ENG_OPEN_CHANGED, /* something else is there: a symbolic link (the photo or a folder
                         above it), a FIFO, socket, device or folder, another file, or
                         the file with another size or mtime */
    ENG_OPEN_ERROR    /* permission, I/O, no descriptors left: why says */
} eng_open_rc;

/* Opens the recorded photo ref names, read-only, never blocking and never following
** a link (unless the root follows them): *fd (the caller closes it, blocking mode)
** only when it is a regular file whose device, inode, size and mtime are the row's;
** *st (may be NULL) its fstat. Else *fd = -1 and why (may be NULL) gets a few words
** ("a FIFO now"). The walk and the rules: rowfile.c. Thread-safe. */
eng_open_rc cdb_eng_open_row(const eng_row_ref *ref, int *fd /* OUT */,
                             struct stat *st /* OUT, may be NULL */, char *why, size_t why_size);
/* cdb_eng_open_row of ok file id of db: *f the row (cdb_db_file_clear), *path (may be
** NULL; cdb_free) its full path, for showing only. CDB_NOTFOUND with E_UNKNOWN_ID (not
** an ok file), E_FILE_GONE or E_FILE_CHANGED (the message says to run reindex);
** CDB_IO when it cannot be opened. On failure nothing is left to free. */
cdb_status cdb_eng_open_file_id(cdb_db *db, int64_t id, cdb_db_file *f /* OUT */,
                                char **path /* OUT */, int *fd /* OUT */,
                                struct stat *st /* OUT, may be NULL */);

/* A thumbnail made while decoding (thumbs.c): JPEG bytes, heap. */
typedef struct eng_thumb {
    unsigned char *jpeg;
    size_t n;
    int32_t width, height;
} eng_thumb;
/* Decodes buf (decode: 0 exact, PIL's pixels; 1 fast, cdb_decode_mode; a photo of
** more than max_pixels pixels is refused, 0: CDB_IMAGE_DEFAULT_MAX_PIXELS) and
** preprocesses it into pixels (3 * pp->size^2); *width, *height: the image's full
** size after EXIF orientation. ns (may be NULL): += decode and preprocess ns.
** thumb_px > 0: also a thumbnail of the decoded image into *thumb (long side <=
** thumb_px); failing to make one is not a failure of the photo (thumb->jpeg NULL).
** pixels NULL: decode for the thumbnail only (no preprocessing). keep (may be NULL):
** the decoded image itself instead of pixels when the device transform takes it
** (cdb_image_device_ready; the caller bounds what it keeps, and preprocesses what it
** cannot keep with cdb_eng_preprocess_kept); else NULL and pixels written.
** cdb_image_free it. ph (may be NULL): the phash of the decode when it is the phash's
** own (cdb_eng_phash_of_decoded), else ph->has 0. */
eng_readfail cdb_eng_decode_photo(const unsigned char *buf, size_t n, int apply_exif, int decode,
                              int64_t max_pixels, const cdb_preprocess_params *pp,
                              float *pixels /* OUT */, cdb_image **keep /* OUT */,
                              int32_t *width /* OUT */,
                              int32_t *height /* OUT */, int64_t ns[2],
                              int thumb_px, eng_thumb *thumb /* OUT, may be NULL */,
                              eng_phash *ph /* OUT, may be NULL */,
                              char *reason, size_t reason_size);
/* The CPU preprocessing of an image cdb_eng_decode_photo kept for the device, into pixels
** (3 x pp->size^2 floats), as it would have done itself; *img is freed and NULLed. */
eng_readfail cdb_eng_preprocess_kept(cdb_image **img, const cdb_preprocess_params *pp,
                                     float *pixels, char *reason, size_t reason_size);
/* Reads fd, the recorded photo f of db opened the one way (cdb_eng_open_file_id; st
** its fstat), and decodes it for a picture of it: fast (a JPEG may shrink while its
** short side stays >= target), EXIF as its root says, the database's pixel limit.
** *img: cdb_image_free. On failure reason gets one line (files.c). */
cdb_status cdb_eng_decode_original(cdb_db *db, const cdb_db_file *f, int fd, const struct stat *st,
                                   int target, cdb_image **img /* OUT */, char *reason,
                                   size_t reason_size);

/* ---- thumbnails (thumbs.c) ----------------------------------------------------------- */

/* A JPEG (quality 80) of img scaled down to long side <= px (area-averaged; never
** up). CDB_OK with the bytes in *t (heap: cdb_eng_thumb_clear). */
cdb_status cdb_eng_thumb_make(const cdb_image *img, int px, eng_thumb *t /* OUT */);
/* The same at another JPEG quality (1-100): the viewer's previews (preview.c). */
cdb_status cdb_eng_jpeg_make(const cdb_image *img, int px, int quality, eng_thumb *t /* OUT */);
void cdb_eng_thumb_clear(eng_thumb *t);
/* The thumbnail's size for a w x h image: long side min(px, itself), aspect kept. */
void cdb_eng_thumb_dims(int w, int h, int px, int *ow, int *oh);
/* img (any channels/bits: as thumbnails convert them) scaled by area averaging to
** ow x oh (each at most the image's, >= 1) packed 8-bit RGB into out (ow * oh * 3). */
cdb_status cdb_eng_thumb_scale(const cdb_image *img, int ow, int oh, uint8_t *out);

/* ---- the library: recorded roots (library.c) ----------------------------------------- */

typedef struct eng_root {
    int64_t id;
    char *path;            /* heap */
    int kind;              /* CDB_DB_ROOT_FOLDER | CDB_DB_ROOT_FILE */
    int follow_symlinks, no_exif;
    uint64_t dev_recorded; /* st_dev at its last scan (0: unknown) */
    uint64_t dev_now;      /* st_dev now (0: the path is not there) */
    cdb_db_root_ident ident_recorded; /* at its last complete scan (all 0: unknown) */
    cdb_db_root_ident ident_now;
    int exists;            /* the path exists now, with the recorded kind */
    int foreign;           /* it exists, but its folder is not the one recorded (an empty
                              mount point, another filesystem or folder): unavailable */
    int same_by_ident;     /* the folder was recognized by more than its device number
                              (so a new st_dev is the same filesystem renumbered) */
    int accepted;          /* the user said its folder as it is now is the truth
                              (reindex --accept-root): not foreign, never "empty" */
    int present;           /* exists and not foreign: the recorded folder is there */
} eng_root;

typedef struct eng_library {
    eng_root *r;
    int n;
    char *db_dir; /* the database folder's real path: never part of the library */
} eng_library;

/* One thing a run scans: a whole root, or a part of a folder root. */
typedef struct eng_target {
    int64_t root_id;
    const char *path;      /* the root's absolute path (a folder, or a file root's file) */
    int kind;              /* CDB_DB_ROOT_FOLDER | CDB_DB_ROOT_FILE */
    int follow_symlinks;   /* the root's settings */
    int no_exif;
    const char *sub;       /* NULL: the whole root; else a folder or file inside it
                              (relative path): only that part is walked, and only
                              that part's deleted files are marked deleted */
    int sub_is_file;
    int named;             /* the user named this one file: retried even if quarantined */
    int reencode;          /* the decode settings changed: every photo is encoded again */
} eng_target;

/* ingest of folders that `forget` left out (folders.c): each target t[0..n) that is a
** folder or file inside its root drops the forgotten-folder rule naming exactly that
** folder, so the walk takes it in again. A target inside a forgotten folder (not the
** folder itself) fails with CDB_INVALID and a message naming the folder to ingest
** instead: taking in part of a left-out folder would leave the rest of it out with no
** rule saying so. Writer. */
cdb_status cdb_eng_unforget(cdb_db *db, const eng_target *t, int n);

/* Reads the roots of db and stats each. Free with cdb_eng_library_free. */
cdb_status cdb_eng_library_load(cdb_db *db, eng_library *lib /* OUT */);
/* 1 when a folder with identity `now` (st_dev dev_now) is the root's recorded one
** (rec, dev_recorded; all 0: never recorded, anything goes); *strong: recognized by
** more than the device number, so a new st_dev is the same filesystem renumbered
** (after a reboot). The rule: library.c. */
int cdb_eng_root_matches(const cdb_db_root_ident *rec, uint64_t dev_recorded,
                         const cdb_db_root_ident *now, uint64_t dev_now, int *strong /* OUT */);
/* Marks the recorded root at path (as recorded, or its real path) accepted: its
** folder as it is now is the truth (reindex --accept-root). CDB_NOTFOUND when no
** root is recorded there. */
cdb_status cdb_eng_library_accept(eng_library *lib, const char *path);
void cdb_eng_library_free(eng_library *lib);
const eng_root *cdb_eng_library_root(const eng_library *lib, int64_t root_id); /* NULL: unknown */
/* 1 when the real path of `path` (a symbolic link, say) is in the library at its own
** path: inside a folder root, not under a hidden folder, not in the database folder;
** or a file root. */
int cdb_eng_library_covers(const eng_library *lib, const char *path);
/* 1 when the file recorded at path (root root_id, st_dev file_dev, 0 = unknown) is
** gone from a place that is still there: deleted, moved or renamed. Deleted needs
** evidence: the file is absent (ENOENT, ENOTDIR), its root is present (the recorded
** folder, not another one at its path) and the nearest folder above it that exists
** is on the filesystem the file was recorded on (its st_dev, or the root's recorded
** st_dev where the root was recognized under a new device number). 0 otherwise: it
** is there, nothing could be learnt (EACCES, EIO), or its place is not reachable (a
** drive or share inside the root that is not mounted). */
int cdb_eng_library_gone(const eng_library *lib, int64_t root_id, const char *path,
                     uint64_t file_dev);
/* Folds every root that lies inside a folder root into it (cdb_db_root_adopt; legacy
** databases could record both), then reloads lib. *n_adopted (may be NULL). */
cdb_status cdb_eng_library_normalize(cdb_db *db, int64_t model_id, eng_library *lib,
                                 int *n_adopted /* OUT */);
/* What `ingest PATH...` scans: each PATH (real, absolute; a folder or a regular
** file) is the whole of a recorded root, a part of one, or a new root; a new folder
** root adopts the roots inside it. follow, no_exif: -1 keep the roots' setting, else
** record it on every root named. Duplicates and PATHs inside another PATH are
** dropped; a PATH hidden inside a recorded folder is refused (CDB_INVALID). ev: where
** a warning goes. *targets: heap array of n_targets (cdb_eng_targets_free). */
cdb_status cdb_eng_library_resolve(cdb_db *db, int64_t model_id, eng_library *lib,
                               char *const *paths, const int *is_file, int n, int follow,
                               int no_exif, const cdb_engine_events *ev,
                               eng_target **targets /* OUT */, int *n_targets /* OUT */);
/* Every root, whole (reindex). */
cdb_status cdb_eng_library_all(const eng_library *lib, eng_target **targets /* OUT */,
                           int *n_targets /* OUT */);
void cdb_eng_targets_free(eng_target *t, int n);

/* ---- the deep check (deep.c) --------------------------------------------------------- */

typedef struct eng_deep_info {
    int64_t n_files, n_hashed, n_encoded, n_stale, n_gone, n_unreadable;
    int64_t max_ulp; /* largest element difference among the re-encoded vectors */
} eng_deep_info;
/* Re-reads every ok file and compares its bytes with the recorded hash, and
** re-encodes a sample (the files whose id hashes below `sample`, the same sample
** every time) with model m (the database's model_id), comparing the vector with the
** stored one: equal within one fp16 ulp per element, or 2^-20 near zero (the CPU
** encoder is batch- and thread-invariant on one ISA path, but a vector may have been
** stored by another path or by CUDA, so bit-equality cannot be asked). Problems are
** added to r (CDB_DB_FILE_CHANGED, CDB_DB_VECTOR_MISMATCH, each naming the path);
** informational counts go to *info (may be NULL). Files whose stat changed since
** they were stored are stale, not problems (the next reindex updates them). */
cdb_status cdb_eng_deep_check(cdb_db *db, cdb_model *m, int64_t model_id, double sample,
                          cdb_db_report *r, const cdb_engine_events *ev,
                          eng_deep_info *info /* OUT */);

#endif /* CDB_ENGINE_LIBRARY_H */
