/*
 * Elementwise reduction kernels of allreduce and reduce_scatter_block: the
 * arithmetic only, no communication.
 *
 * Semantics, the same on every rank and every build:
 *   - int32/int64 sum and prod wrap modulo 2^bits (two's complement), as
 *     uint64 does; no signed overflow is ever evaluated.
 *   - float/double min and max: a NaN in either operand gives a NaN (which
 *     NaN when both are is unspecified); +0 and -0 compare equal, and then
 *     the value already in inout stays.
 *   - float/double sum and prod: one IEEE operation per element, in the
 *     current rounding mode (no reassociation, no fused multiply-add).
 *   - band, bor, bxor: integer dtypes only (reduce_check rejects the rest).
 */
#ifndef ARCOLL_ENGINE_REDUCE_H
#define ARCOLL_ENGINE_REDUCE_H

#include <stddef.h>

#include "arcoll.h"

/* ARCOLL_OK if op is defined on dtype, else ARCOLL_ERR_INVALID after logging
 * why, prefixed by what (the calling collective, e.g. "allreduce"). The
 * log sets the process-wide last error: [serialized]. */
int reduce_check(arcoll_dtype_t dtype, arcoll_op_t op, const char *what);

/* Lower-case names for messages ("int32", "bxor"); "invalid" for a value
 * outside the enum. [any] */
const char *reduce_dtype_name(arcoll_dtype_t dtype);
const char *reduce_op_name(arcoll_op_t op);

/* inout[i] = inout[i] op in[i] for i < count. Requires reduce_check(dtype,
 * op) == ARCOLL_OK (otherwise nothing is written). inout and in must not
 * overlap. Either pointer may have any alignment: aligned ones take the
 * vectorized loop directly, misaligned ones are staged through an aligned
 * stack block with memcpy. [any] */
void reduce_apply(arcoll_dtype_t dtype, arcoll_op_t op, void *inout, const void *in, size_t count);

#endif
