# Issue 25's CLI items through the clipdb binary and a shell; needs a model (skips
# without one). Some cases need root (a read-only bind mount, another uid): they say
# so and skip without it.
target_link_libraries(test_cli_trial PRIVATE PkgConfig::JANSSON)
add_dependencies(test_cli_trial clipdb)
set_tests_properties(test_cli_trial PROPERTIES LABELS "cli" TIMEOUT 300)
