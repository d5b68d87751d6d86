/*
** backend_int.h: private pieces shared by the two CPU backends of the BACKEND
** interface (backend_cpu.c, the optimized one, and backend_cpu_ref.c, the scalar
** reference): the buffer layout and the dtype widening.
*/
#ifndef CDB_KERNELS_CPU_BACKEND_INT_H
#define CDB_KERNELS_CPU_BACKEND_INT_H

#include "kernels/backend_impl.h"

/* A CPU buffer: n fp32 values at data; or, for a matrix of the optimized backend
** (matrix_upload), data NULL and the rows x cols matrix (n = rows * cols) packed in
** column panels of nr at packed (gemm_int.h); or, for an F16/BF16 table of the
** optimized backend (CDB_K_W_TABLE), data NULL and n elements of half_dt at half. */
struct cdb_k_buf {
    float *data;
    size_t n;
    int owned; /* 0: borrowed from the caller (weight_upload with CDB_K_UPLOAD_BORROW) */
    float *packed;
    int rows, cols, nr;
    const void *half;    /* the table's 2-byte elements (any alignment) or NULL */
    cdb_k_dtype half_dt; /* CDB_K_F16 or CDB_K_BF16 */
    int packed_borrowed; /* 1: packed lies in the caller's memory (matrix_borrow_packed) */
};

/* 64-byte aligned (from 4 MiB: 2 MiB aligned, offered to huge pages), free() it; NULL
** when out of memory. */
float *cdb_k_cpu_alloc_f32(size_t n);
/* A new buffer of n floats that owns data (from malloc or cdb_k_cpu_alloc_f32: freed
** with free); data == NULL, or no memory for the buffer, gives CDB_NOMEM (data freed). */
cdb_status cdb_k_cpu_buf_own(float *data, size_t n, cdb_k_buf **out);
/* Widens n elements of dt (any alignment, little-endian) to fp32. */
void cdb_k_cpu_convert_to_f32(const void *src, cdb_k_dtype dt, float *dst, size_t n);

#endif
