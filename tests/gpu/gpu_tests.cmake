# tests/gpu: GPU tests and the GPU benchmark, built only with the CUDA backend.
# Included from tests/kernels/CMakeLists.txt. The programs exit 77 (ctest: skipped)
# on a machine without a usable GPU, so CI (nvcc, no GPU) builds and "passes" them;
# tests/gpu/run.sh runs them for real on a GPU machine.
if(CLIPDB_HAVE_CUDA AND TARGET cdb_encoder)
  cdb_add_test(test_cuda_kernels SOURCES ${CMAKE_SOURCE_DIR}/tests/gpu/test_cuda_kernels.c
    LIBS cdb_encoder cdb_kernels LABELS cuda TIMEOUT 300)
  target_include_directories(test_cuda_kernels PRIVATE ${CMAKE_SOURCE_DIR}/tests/gpu)
  target_link_libraries(test_cuda_kernels PRIVATE PkgConfig::JANSSON)
  # the ingest path: bytes up through pinned buffers, nvJPEG vs libjpeg-turbo
  cdb_add_test(test_cuda_ingest SOURCES ${CMAKE_SOURCE_DIR}/tests/gpu/test_cuda_ingest.c
    LIBS cdb_encoder cdb_kernels LABELS cuda TIMEOUT 300)
  target_include_directories(test_cuda_ingest PRIVATE ${CMAKE_SOURCE_DIR}/tests/gpu)
  target_link_libraries(test_cuda_ingest PRIVATE PkgConfig::JANSSON PkgConfig::LIBJPEG)
  add_executable(bench_gpu ${CMAKE_SOURCE_DIR}/bench/bench_gpu.c)
  target_link_libraries(bench_gpu PRIVATE cdb_encoder cdb_kernels cdb_core PkgConfig::JANSSON m)
  target_include_directories(bench_gpu PRIVATE ${CMAKE_SOURCE_DIR}/tests/gpu ${CMAKE_SOURCE_DIR}/tests)
  target_compile_definitions(bench_gpu PRIVATE CDB_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
  set_target_properties(bench_gpu PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bench)
endif()
