target_link_libraries(cdb_world PUBLIC cdb_core PRIVATE m)
target_include_directories(cdb_world PRIVATE ${STB_INCLUDE})

# clipdb-world: generate libraries and evaluation queries from the command line
# (used by scripts/train_default_model.py; the clipdb CLI calls world.h directly).
add_executable(clipdb-world ${CMAKE_CURRENT_SOURCE_DIR}/tools/clipdb_world.c)
target_link_libraries(clipdb-world PRIVATE cdb_world cdb_core)


if(CLIPDB_SANITIZE)
  # stb's JPEG writer left-shifts negative ints; see world/stb_write.c.
  set_source_files_properties(${CMAKE_CURRENT_SOURCE_DIR}/stb_write.c PROPERTIES
    COMPILE_OPTIONS "-fno-sanitize=shift-base")
endif()
