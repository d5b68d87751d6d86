/*
** world.h: the generated "shapes" world: deterministic photo libraries with true
** captions, for the bundled default model, the demo and the benchmarks.
*/
#ifndef CDB_WORLD_H
#define CDB_WORLD_H

#include "core/core.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
}
#endif
#endif /* CDB_WORLD_H */
