# test_decoder_pick writes its JPEGs (baseline, progressive, arithmetic, CMYK) with libjpeg.
target_link_libraries(test_decoder_pick PRIVATE PkgConfig::LIBJPEG)
