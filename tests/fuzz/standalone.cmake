# Passed as CMAKE_PROJECT_INCLUDE by scripts/fuzz.sh only while tests/CMakeLists.txt
# does not list `fuzz` yet: includes tests/fuzz/CMakeLists.txt at the end of the
# top-level CMakeLists.txt, once every module target exists.
cmake_language(DEFER DIRECTORY ${CMAKE_SOURCE_DIR}
  CALL include ${CMAKE_SOURCE_DIR}/tests/fuzz/CMakeLists.txt)
