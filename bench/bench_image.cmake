# bench_image writes its inputs with the libraries themselves: libjpeg (a 24 MP
# progressive JPEG) and libheif (a 12 MP HEIC with a thumbnail), when the build has it.
target_link_libraries(bench_image PRIVATE PkgConfig::LIBJPEG)
if(TARGET PkgConfig::IMG_HEIF)
  target_link_libraries(bench_image PRIVATE PkgConfig::IMG_HEIF)
  target_compile_definitions(bench_image PRIVATE BENCH_HAVE_HEIF=1)
endif()
