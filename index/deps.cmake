target_link_libraries(cdb_index PUBLIC cdb_kernels cdb_core PRIVATE cdb_faiss PkgConfig::XXHASH)
