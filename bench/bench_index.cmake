# bench_index compares against FAISS's IndexFlatIP directly, so it needs FAISS's C API;
# it streams the store through the engine's index source (engine/search/search.h).
target_link_libraries(bench_index PRIVATE cdb_faiss cdb_engine)
