# clipdb duplicates through the binary; draws its library with stb_image_write.
# The collapse oracle decodes (phash) and groups (dupes) the files itself.
target_link_libraries(test_cli_duplicates PRIVATE PkgConfig::JANSSON cdb_encoder cdb_dupes)
target_include_directories(test_cli_duplicates PRIVATE ${STB_INCLUDE})
add_dependencies(test_cli_duplicates clipdb)
set_tests_properties(test_cli_duplicates PROPERTIES LABELS "cli;slow" TIMEOUT 600)
