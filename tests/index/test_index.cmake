# FAISS's OpenMP threads busy-wait by default; on a loaded 2-core machine that made
# k-means training ~20x slower (measured). Passive waiting keeps the test short.
set_tests_properties(test_index PROPERTIES ENVIRONMENT "OMP_WAIT_POLICY=passive" TIMEOUT 900)
