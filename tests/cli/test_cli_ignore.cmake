# .clipdbignore through the binary, against git check-ignore (skips without git).
target_link_libraries(test_cli_ignore PRIVATE PkgConfig::JANSSON)
target_include_directories(test_cli_ignore PRIVATE ${STB_INCLUDE})
add_dependencies(test_cli_ignore clipdb)
set_tests_properties(test_cli_ignore PROPERTIES LABELS "cli;slow" TIMEOUT 600)
