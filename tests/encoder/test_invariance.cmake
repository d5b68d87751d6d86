# test_invariance: batch/thread invariance of the embeddings on the fixture models,
# on the default ISA path and again on the portable one (CLIPDB_ISA=scalar).
set_tests_properties(test_invariance PROPERTIES LABELS "unit;golden")
add_test(NAME test_invariance_scalar COMMAND test_invariance)
set_tests_properties(test_invariance_scalar PROPERTIES LABELS "unit;golden" TIMEOUT 600
  ENVIRONMENT "CLIPDB_ISA=scalar" WORKING_DIRECTORY ${CMAKE_BINARY_DIR})
