# test_sniff: files made at test time by sniff_make.py (Debian's python3-pil), whose
# own sniffing is the oracle.
target_compile_definitions(test_sniff PRIVATE CDB_TEST_SRC="${CMAKE_CURRENT_SOURCE_DIR}")
set_tests_properties(test_sniff PROPERTIES LABELS "unit;oracle")
