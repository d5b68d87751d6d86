/*
** index.h: clipdb's vector index (FAISS through its C API) and exact fp32
** re-rank. The module's whole public contract.
*/
#ifndef CDB_INDEX_H
#define CDB_INDEX_H

#include "core/core.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
}
#endif
#endif /* CDB_INDEX_H */
