# bench_phash_jpeg writes the copies it measures with libjpeg.
target_link_libraries(bench_phash_jpeg PRIVATE PkgConfig::LIBJPEG)
