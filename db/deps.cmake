target_link_libraries(cdb_db PUBLIC cdb_kernels cdb_core PRIVATE SQLite::SQLite3 PkgConfig::XXHASH)
