add_dependencies(bench_reindex clipdb)  # it runs the clipdb program as a whole process
