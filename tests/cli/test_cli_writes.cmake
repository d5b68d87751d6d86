# kill -9 and a full disk during init, forget, move, index build, reindex --repair,
# models --default, ingest --model and models get (a Hub stand-in on 127.0.0.1, as
# tests/hub's), then a rerun: the clean result. Runs the clipdb binary with a model
# (skips without one) and the kill shim of test_cli_kill.cmake; mounts a tmpfs when it
# can (root).
pkg_check_modules(CDB_WRITES_MHD REQUIRED IMPORTED_TARGET libmicrohttpd)
target_link_libraries(test_cli_writes PRIVATE cdb_world SQLite::SQLite3 m
  PkgConfig::CDB_WRITES_MHD PkgConfig::LIBCRYPTO Threads::Threads)
add_dependencies(test_cli_writes clipdb test_cli_kill_shim)
set_tests_properties(test_cli_writes PROPERTIES LABELS "cli;slow" TIMEOUT 900)
target_compile_definitions(test_cli_writes PRIVATE
  CDB_KILL_SHIM="$<TARGET_FILE:test_cli_kill_shim>")
# hub_server.h is test_hub's header of static functions: not all of them used here
target_compile_options(test_cli_writes PRIVATE -Wno-unused-function -Wno-format-truncation)
