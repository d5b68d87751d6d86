# bench_index compares against FAISS's IndexFlatIP directly, so it needs FAISS's C API.
target_link_libraries(bench_index PRIVATE cdb_faiss)
