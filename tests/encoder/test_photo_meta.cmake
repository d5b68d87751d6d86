# test_photo_meta: photos made and tagged at test time by photo_meta_make.py (Debian's
# python3-pil, heif-enc from libheif-examples, exiftool from libimage-exiftool-perl);
# the manifest is read with jansson.
target_link_libraries(test_photo_meta PRIVATE PkgConfig::JANSSON)
target_compile_definitions(test_photo_meta PRIVATE CDB_TEST_SRC="${CMAKE_CURRENT_SOURCE_DIR}")
set_tests_properties(test_photo_meta PROPERTIES LABELS "unit;oracle" TIMEOUT 300)
