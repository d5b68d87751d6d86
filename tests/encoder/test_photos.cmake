# Optional: skipped (77) until the photos and PIL's crops are there: `scripts/setup.sh
# test` puts them in the .deps/ cache, bench_photos in <build>/photos.
target_compile_definitions(test_photos PRIVATE CDB_PHOTOS_CACHE="${CLIPDB_DEPS_DIR}/photos")
set_tests_properties(test_photos PROPERTIES LABELS "golden;photos;slow")
