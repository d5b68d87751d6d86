# kill -9 during ingest, then a rerun: the clean result, bit for bit. Runs the
# clipdb binary with a model (skips without one), reads the SQLite files directly;
# about a minute ($CLIPDB_KILL_SECONDS sets the budget).
target_link_libraries(test_cli_kill PRIVATE cdb_world SQLite::SQLite3)
add_dependencies(test_cli_kill clipdb)
set_tests_properties(test_cli_kill PROPERTIES LABELS "cli;slow" TIMEOUT 900)
# The LD_PRELOAD shim that kills clipdb just before its N-th write or sync (a test
# tool, never linked into clipdb).
add_library(test_cli_kill_shim MODULE ${CMAKE_CURRENT_SOURCE_DIR}/kill_shim.c)
target_link_libraries(test_cli_kill_shim PRIVATE ${CMAKE_DL_LIBS})
add_dependencies(test_cli_kill test_cli_kill_shim)
target_compile_definitions(test_cli_kill PRIVATE CDB_KILL_SHIM="$<TARGET_FILE:test_cli_kill_shim>")
