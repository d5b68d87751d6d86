/*
** test_db_header.c: db/db.h compiles on its own (included first, nothing
** before it) and its small pure helpers behave as documented.
*/
#include "db/db.h"

#include "cdb_test.h"

CDB_TEST(header_alone) {
    cdb_db_params p = cdb_db_params_default();
    CHECK_EQ_INT(p.create, 0);
    CHECK_EQ_INT(p.readonly, 0);
    CHECK_EQ_INT(p.lock_wait_ms, 0);
    CHECK_EQ_INT(p.sync, CDB_DB_SYNC_NORMAL); /* + cdb_db_flush at run end */
    CHECK_EQ_STR(cdb_db_file_state_str(CDB_DB_PENDING), "pending");
    CHECK_EQ_STR(cdb_db_file_state_str(CDB_DB_DELETED), "deleted");
    CHECK_EQ_INT(CDB_DB_MASK_ALL,
                 CDB_DB_MASK_PENDING | CDB_DB_MASK_OK | CDB_DB_MASK_ERROR | CDB_DB_MASK_DELETED);
    uint8_t a[CDB_DB_HASH_BYTES], b[CDB_DB_HASH_BYTES];
    cdb_db_hash_buf("abc", 3, a);
    cdb_db_hash_buf("abd", 3, b);
    CHECK(memcmp(a, b, sizeof a) != 0);
    cdb_db_hash_buf("abd", 3, a); /* deterministic */
    CHECK(!memcmp(a, b, sizeof a));
}

CDB_TEST_MAIN(header_alone)
