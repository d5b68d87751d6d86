# test_tokenizer parses the golden file with jansson; the 1 MB cases take a few
# seconds on a busy 2-core machine.
target_link_libraries(test_tokenizer PRIVATE PkgConfig::JANSSON Threads::Threads)
set_tests_properties(test_tokenizer PROPERTIES LABELS "unit;golden" TIMEOUT 300)
# The same tests through the tokenizer cache (test_tokenizer.c, CDB_TEST_TOK_CACHE): the
# tables built and written (cold), then mapped from the file an earlier open wrote (warm).
foreach(mode cold warm)
  add_test(NAME test_tokenizer_cache_${mode} COMMAND test_tokenizer WORKING_DIRECTORY ${CMAKE_BINARY_DIR})
  set_tests_properties(test_tokenizer_cache_${mode} PROPERTIES LABELS "unit;golden" TIMEOUT 300
    ENVIRONMENT "CDB_TEST_TOK_CACHE=${mode};CLIPDB_CACHE_DIR=${CMAKE_BINARY_DIR}/test-cache")
endforeach()
