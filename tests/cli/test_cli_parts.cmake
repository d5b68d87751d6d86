# Issue 29's guarantee: N = 1, 3, 8 parts ingested and merged export what one process's
# ingest exports; reindex of the parts after moves, edits and deletions, merged again,
# what one process's reindex exports; merge killed at a random write and rerun (the
# kill shim of test_cli_kill.cmake). Runs the clipdb binary with a model (skips
# without one); under a minute.
target_link_libraries(test_cli_parts PRIVATE cdb_world cdb_db SQLite::SQLite3 ZLIB::ZLIB m)
add_dependencies(test_cli_parts clipdb test_cli_kill_shim)
set_tests_properties(test_cli_parts PROPERTIES LABELS "cli" TIMEOUT 600)
target_compile_definitions(test_cli_parts PRIVATE
  CDB_KILL_SHIM="$<TARGET_FILE:test_cli_kill_shim>")
# paths are built in fixed buffers far larger than the temporary folder's names
target_compile_options(test_cli_parts PRIVATE -Wno-format-truncation)
