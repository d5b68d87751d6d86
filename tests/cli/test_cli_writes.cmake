# kill -9 and a full disk during init, forget, move and index build, then a rerun:
# the clean result. Runs the clipdb binary with a model (skips without one) and the
# kill shim of test_cli_kill.cmake; mounts a tmpfs when it can (root).
target_link_libraries(test_cli_writes PRIVATE cdb_world SQLite::SQLite3 m)
add_dependencies(test_cli_writes clipdb test_cli_kill_shim)
set_tests_properties(test_cli_writes PROPERTIES LABELS "cli;slow" TIMEOUT 900)
target_compile_definitions(test_cli_writes PRIVATE
  CDB_KILL_SHIM="$<TARGET_FILE:test_cli_kill_shim>")
