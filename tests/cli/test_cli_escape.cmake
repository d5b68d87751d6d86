# Hostile file names through the binary's human and machine output, and cdb_cli_esc in
# process (cdb_cli); reads --json with jansson.
target_link_libraries(test_cli_escape PRIVATE cdb_cli PkgConfig::JANSSON)
add_dependencies(test_cli_escape clipdb)
set_tests_properties(test_cli_escape PROPERTIES LABELS "cli" TIMEOUT 300)
