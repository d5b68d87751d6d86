# Rough edges through the clipdb binary and a shell; needs a model (skips without one).
add_dependencies(test_cli_edges clipdb)
set_tests_properties(test_cli_edges PROPERTIES LABELS "cli" TIMEOUT 300)
