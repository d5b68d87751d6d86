# Hostile file names through the binary's human and machine output (reads --json with
# jansson).
target_link_libraries(test_cli_escape PRIVATE PkgConfig::JANSSON)
add_dependencies(test_cli_escape clipdb)
set_tests_properties(test_cli_escape PROPERTIES LABELS "cli" TIMEOUT 300)
