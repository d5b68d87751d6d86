# test_db edits catalog/shard files directly (simulated old/future schemas, damage).
target_link_libraries(test_db PRIVATE SQLite::SQLite3)
