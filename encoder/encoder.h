/*
** encoder.h: clipdb's CLIP encoder (models, tokenizer, image preprocessing, image
** and text towers). The module's whole public contract.
*/
#ifndef CDB_ENCODER_H
#define CDB_ENCODER_H

#include "core/core.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
}
#endif
#endif /* CDB_ENCODER_H */
