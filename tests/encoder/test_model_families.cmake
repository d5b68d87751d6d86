# test_model_families: every ViT CLIP size (B/32 ... bigG/14) in both namings, from
# sparse real-shape files opened inspect-only, plus the graph features those sizes
# need against PyTorch. Writes the headers and configs with jansson.
target_link_libraries(test_model_families PRIVATE PkgConfig::JANSSON)
set_tests_properties(test_model_families PROPERTIES LABELS "unit;golden")
