# It runs the clipdb program (init, index build, search, serve) as whole processes.
add_dependencies(bench_serve clipdb)
target_link_libraries(bench_serve PRIVATE PkgConfig::JANSSON Threads::Threads)
target_compile_options(bench_serve PRIVATE -Wno-format-truncation)
