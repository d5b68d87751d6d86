# test_png compresses its own PNGs with zlib.
target_link_libraries(test_png PRIVATE ZLIB::ZLIB)
