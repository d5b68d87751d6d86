/*
** blas_lazy.c: the BLAS and LAPACK entry points FAISS calls (Debian's static libfaiss.a),
** defined here as forwarders to OpenBLAS (its OpenMP build, which carries LAPACK too),
** opened on the first call through cdb_dynlib_lazy (core.h) instead of linked.
**
** Why: loading OpenBLAS, LAPACK, gfortran and quadmath cost every clipdb process about
** 5 ms of CPU (an empty program linked with clipdb's libraries: 10 ms, 5 ms without
** these), although FAISS calls BLAS only to train an index and to search batches of 20
** queries or more: a one-shot `clipdb search` calls none of them.
**
** The 13 functions are exactly the undefined BLAS / LAPACK symbols of libfaiss.a
** (`nm -u`), and each prototype is FAISS 1.7.3's own extern "C" declaration, copied
** (checked against the v1.7.3 tag: sgemm_, sgeqrf_, sorgqr_ in utils/utils.cpp and
** utils/distances.cpp; dgemm_, ssyrk_, dsyev_, sgesvd_, dgesvd_ in VectorTransform.cpp;
** sgetrf_, sgetri_, dgetrf_, dgetri_ (void) in impl/LocalSearchQuantizer.cpp; sgelsd_
** in impl/ResidualQuantizer.cpp), with FINTEGER = int as its CMake build defines it: the
** forwarders pass exactly the arguments FAISS passes, so the callee sees the call it
** saw when linked. The library is the configured one (CDB_OPENBLAS_SO: the OpenMP
** build; the pthread build fights OpenMP's threads), else $CLIPDB_LIBOPENBLAS. Loading
** it cannot fail where clipdb was installed with its dependencies; if it does, FAISS's
** call has no status to return a failure through, so the first BLAS call ends the
** process with a message saying what is missing and how to name it (need_blas).
*/
#include <stdio.h>
#include <unistd.h>

#include "core/core.h"

typedef int fint; /* FAISS's FINTEGER */

int sgemm_(const char *ta, const char *tb, fint *m, fint *n, fint *k, const float *al, const float
           *a, fint *lda, const float *b, fint *ldb, float *be, float *c, fint *ldc);
int dgemm_(const char *ta, const char *tb, fint *m, fint *n, fint *k, const double *al, const
           double *a, fint *lda, const double *b, fint *ldb, double *be, double *c, fint *ldc);
int ssyrk_(const char *uplo, const char *t, fint *n, fint *k, float *al, float *a, fint *lda,
           float *be, float *c, fint *ldc);
int sgeqrf_(fint *m, fint *n, float *a, fint *lda, float *tau, float *w, fint *lw, fint *info);
int sorgqr_(fint *m, fint *n, fint *k, float *a, fint *lda, float *tau, float *w, fint *lw, fint
            *info);
int sgesvd_(const char *ju, const char *jv, fint *m, fint *n, float *a, fint *lda, float *s, float
            *u, fint *ldu, float *vt, fint *ldvt, float *w, fint *lw, fint *info);
int dgesvd_(const char *ju, const char *jv, fint *m, fint *n, double *a, fint *lda, double *s,
            double *u, fint *ldu, double *vt, fint *ldvt, double *w, fint *lw, fint *info);
void sgetrf_(fint *m, fint *n, float *a, fint *lda, fint *ipiv, fint *info);
void dgetrf_(fint *m, fint *n, double *a, fint *lda, fint *ipiv, fint *info);
void sgetri_(fint *n, float *a, fint *lda, fint *ipiv, float *w, fint *lw, fint *info);
void dgetri_(fint *n, double *a, fint *lda, fint *ipiv, double *w, fint *lw, fint *info);
int dsyev_(const char *jz, const char *uplo, fint *n, double *a, fint *lda, double *wr, double *w,
           fint *lw, fint *info);
int sgelsd_(fint *m, fint *n, fint *nrhs, float *a, fint *lda, float *b, fint *ldb, float *s,
            float *rcond, fint *rank, float *w, fint *lw, fint *iw, fint *info);

#define BLAS_FNS(X) \
    X(sgemm_) X(dgemm_) X(ssyrk_) X(sgeqrf_) X(sorgqr_) X(sgesvd_) X(dgesvd_) X(sgetrf_)  \
    X(dgetrf_) X(sgetri_) X(dgetri_) X(dsyev_) X(sgelsd_)
static struct {
    BLAS_FNS(CDB_DYNLIB_PTR)
} bl;
static const char *const bl_names[] = {CDB_OPENBLAS_SO, "libopenblas.so.0"};
static const char *const bl_syms[] = {BLAS_FNS(CDB_DYNLIB_NAME)};
static cdb_dynlib_lazy bl_lib = {
    .spec = {"OpenBLAS", "CLIPDB_LIBOPENBLAS", bl_names, 2, bl_syms,
             sizeof bl_syms / sizeof *bl_syms},
    .table = &bl};

static void need_blas(void) {
    if (cdb_dynlib_get(&bl_lib) == CDB_OK) return;
    fprintf(stderr,
            "clipdb: error: building or searching this index needs BLAS and LAPACK from "
            "OpenBLAS, which could not be loaded: %s\n"
            "hint: install Debian's libopenblas0-openmp, or set CLIPDB_LIBOPENBLAS to the path "
            "of a libopenblas.so.0 (its OpenMP build)\n",
            bl_lib.err);
    _exit(70); /* EX_SOFTWARE: FAISS's call cannot fail and cannot go on without it; no
                  exit handlers while another thread may be inside FAISS */
}

int sgemm_(const char *ta, const char *tb, fint *m, fint *n, fint *k, const float *al, const float
           *a, fint *lda, const float *b, fint *ldb, float *be, float *c, fint *ldc) {
    need_blas();
    return bl.sgemm_(ta, tb, m, n, k, al, a, lda, b, ldb, be, c, ldc);
}

int dgemm_(const char *ta, const char *tb, fint *m, fint *n, fint *k, const double *al, const
           double *a, fint *lda, const double *b, fint *ldb, double *be, double *c, fint *ldc) {
    need_blas();
    return bl.dgemm_(ta, tb, m, n, k, al, a, lda, b, ldb, be, c, ldc);
}

int ssyrk_(const char *uplo, const char *t, fint *n, fint *k, float *al, float *a, fint *lda,
           float *be, float *c, fint *ldc) {
    need_blas();
    return bl.ssyrk_(uplo, t, n, k, al, a, lda, be, c, ldc);
}

int sgeqrf_(fint *m, fint *n, float *a, fint *lda, float *tau, float *w, fint *lw, fint *info) {
    need_blas();
    return bl.sgeqrf_(m, n, a, lda, tau, w, lw, info);
}

int sorgqr_(fint *m, fint *n, fint *k, float *a, fint *lda, float *tau, float *w, fint *lw, fint
            *info) {
    need_blas();
    return bl.sorgqr_(m, n, k, a, lda, tau, w, lw, info);
}

int sgesvd_(const char *ju, const char *jv, fint *m, fint *n, float *a, fint *lda, float *s, float
            *u, fint *ldu, float *vt, fint *ldvt, float *w, fint *lw, fint *info) {
    need_blas();
    return bl.sgesvd_(ju, jv, m, n, a, lda, s, u, ldu, vt, ldvt, w, lw, info);
}

int dgesvd_(const char *ju, const char *jv, fint *m, fint *n, double *a, fint *lda, double *s,
            double *u, fint *ldu, double *vt, fint *ldvt, double *w, fint *lw, fint *info) {
    need_blas();
    return bl.dgesvd_(ju, jv, m, n, a, lda, s, u, ldu, vt, ldvt, w, lw, info);
}

void sgetrf_(fint *m, fint *n, float *a, fint *lda, fint *ipiv, fint *info) {
    need_blas();
    bl.sgetrf_(m, n, a, lda, ipiv, info);
}

void dgetrf_(fint *m, fint *n, double *a, fint *lda, fint *ipiv, fint *info) {
    need_blas();
    bl.dgetrf_(m, n, a, lda, ipiv, info);
}

void sgetri_(fint *n, float *a, fint *lda, fint *ipiv, float *w, fint *lw, fint *info) {
    need_blas();
    bl.sgetri_(n, a, lda, ipiv, w, lw, info);
}

void dgetri_(fint *n, double *a, fint *lda, fint *ipiv, double *w, fint *lw, fint *info) {
    need_blas();
    bl.dgetri_(n, a, lda, ipiv, w, lw, info);
}

int dsyev_(const char *jz, const char *uplo, fint *n, double *a, fint *lda, double *wr, double *w,
           fint *lw, fint *info) {
    need_blas();
    return bl.dsyev_(jz, uplo, n, a, lda, wr, w, lw, info);
}

int sgelsd_(fint *m, fint *n, fint *nrhs, float *a, fint *lda, float *b, fint *ldb, float *s,
            float *rcond, fint *rank, float *w, fint *lw, fint *iw, fint *info) {
    need_blas();
    return bl.sgelsd_(m, n, nrhs, a, lda, b, ldb, s, rcond, rank, w, lw, iw, info);
}
