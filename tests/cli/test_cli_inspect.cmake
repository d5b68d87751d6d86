# tokenize / preprocess on a sparse real-size model: runs the clipdb binary; writes the
# model's header with jansson (tests/encoder/model_test_util.h).
target_link_libraries(test_cli_inspect PRIVATE PkgConfig::JANSSON)
add_dependencies(test_cli_inspect clipdb)
set_tests_properties(test_cli_inspect PROPERTIES LABELS "cli" TIMEOUT 300)
