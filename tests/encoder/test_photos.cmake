# Optional: skipped (77) until bench_photos has fetched the photos and PIL's crops.
set_tests_properties(test_photos PROPERTIES LABELS "golden;photos;slow")
