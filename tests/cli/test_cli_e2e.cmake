# End to end through the clipdb binary; needs a model (skips without one) and
# generates its photo libraries with world/.
target_link_libraries(test_cli_e2e PRIVATE cdb_world cdb_output PkgConfig::JANSSON)
add_dependencies(test_cli_e2e clipdb)
set_tests_properties(test_cli_e2e PROPERTIES LABELS "cli;slow" TIMEOUT 900)
