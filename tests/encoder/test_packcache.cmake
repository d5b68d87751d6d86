# test_packcache: the packed matrix cache gives the same bits as packing at load, and
# a damaged, truncated or stale cache file is refused and rewritten (model_test_util.h
# includes jansson).
target_link_libraries(test_packcache PRIVATE PkgConfig::JANSSON)
set_tests_properties(test_packcache PROPERTIES LABELS "unit;golden")
