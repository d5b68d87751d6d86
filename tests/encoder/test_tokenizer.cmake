# test_tokenizer parses the golden file with jansson; the 1 MB cases take a few
# seconds on a busy 2-core machine.
target_link_libraries(test_tokenizer PRIVATE PkgConfig::JANSSON Threads::Threads)
set_tests_properties(test_tokenizer PROPERTIES LABELS "unit;golden" TIMEOUT 300)
