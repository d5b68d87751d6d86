add_dependencies(bench_search clipdb)  # it runs the clipdb program as a whole process
