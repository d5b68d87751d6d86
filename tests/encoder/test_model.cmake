# test_model: golden embeddings vs the PyTorch reference + model-loading errors.
# Edits safetensors headers with jansson to build the hostile files.
target_link_libraries(test_model PRIVATE PkgConfig::JANSSON)
set_tests_properties(test_model PROPERTIES LABELS "unit;golden")
