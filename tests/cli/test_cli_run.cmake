# Runs the clipdb binary: build it first.
target_link_libraries(test_cli_run PRIVATE util)
add_dependencies(test_cli_run clipdb)
set_tests_properties(test_cli_run PROPERTIES LABELS "cli;unit")
