target_link_libraries(test_cli_unit PRIVATE cdb_cli PkgConfig::JANSSON)
set_tests_properties(test_cli_unit PROPERTIES LABELS "cli;unit")
