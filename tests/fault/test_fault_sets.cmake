# test_fault_sets also kills clipdb at exact writes with the kill shim of tests/cli,
# and checks stored vectors with the library tests' oracle (tests/library/lib_util.h).
target_compile_options(test_fault_sets PRIVATE -Wno-format-truncation)
if(TARGET test_cli_kill_shim)
  add_dependencies(test_fault_sets test_cli_kill_shim)
  target_compile_definitions(test_fault_sets PRIVATE
    CDB_KILL_SHIM="$<TARGET_FILE:test_cli_kill_shim>")
endif()
