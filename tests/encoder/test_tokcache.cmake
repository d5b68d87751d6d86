# test_tokcache: a damaged, truncated, stale or foreign tokenizer cache file is refused
# and rewritten, and the ids always equal those of the tokenizer built without a cache.
target_link_libraries(test_tokcache PRIVATE PkgConfig::JANSSON)
set_tests_properties(test_tokcache PROPERTIES LABELS "unit")
