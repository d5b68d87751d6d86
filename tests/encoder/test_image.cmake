# test_image reads gzipped .npy fixtures (tests/golden/images) with zlib.
target_link_libraries(test_image PRIVATE ZLIB::ZLIB)
set_tests_properties(test_image PROPERTIES LABELS "unit;golden")
# stb_image_write.h (libstb-dev, next to stb_image.h) encodes the speed test's JPEG.
target_include_directories(test_image PRIVATE ${STB_INCLUDE})
