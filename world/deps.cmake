target_link_libraries(cdb_world PUBLIC cdb_core PRIVATE m)
target_include_directories(cdb_world PRIVATE ${STB_INCLUDE})
