# bench_encoder prints the OpenBLAS core it runs on (openblas_get_corename): linked here,
# while clipdb itself opens OpenBLAS only on a BLAS call (index/blas/blas_lazy.c).
target_link_libraries(bench_encoder PRIVATE ${OPENBLAS_LIB})
