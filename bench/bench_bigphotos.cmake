# bench_bigphotos writes its 150 MP JPEGs with libjpeg (tests/big_jpeg.h).
target_link_libraries(bench_bigphotos PRIVATE PkgConfig::LIBJPEG)
