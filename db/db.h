/*
** db.h: clipdb's on-disk database (catalog + SQLite shards). The module's whole
** public contract.
*/
#ifndef CDB_DB_H
#define CDB_DB_H

#include "core/core.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
}
#endif
#endif /* CDB_DB_H */
