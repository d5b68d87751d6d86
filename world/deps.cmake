target_link_libraries(cdb_world PUBLIC cdb_core PRIVATE m)
target_include_directories(cdb_world PRIVATE ${STB_INCLUDE})

# clipdb-world: generate libraries and evaluation queries from the command line
# (used by scripts/train_default_model.py; the clipdb CLI calls world.h directly).
add_executable(clipdb-world ${CMAKE_CURRENT_SOURCE_DIR}/tools/clipdb_world.c)
target_link_libraries(clipdb-world PRIVATE cdb_world cdb_core)

