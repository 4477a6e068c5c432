#include "engine/reduce.h"

#include <limits.h>
#include <stdalign.h>
#include <stdint.h>
#include <string.h>

#include "arcoll.h"
#include "util/log.h"

/*
 * Bytes per inner block. gcc -O2 vectorizes only loops whose trip count the
 * vector code covers entirely (the "very cheap" cost model), so each kernel
 * runs a constant-count inner loop per block and a scalar loop for the tail.
 * It is also the size of the stack staging blocks of the misaligned path.
 */
#define REDUCE_BLOCK 256

typedef void (*reduce_kernel_t)(void *restrict inout, const void *restrict in, size_t count);

/* One kernel: x is inout's element, y is in's, EXPR the result. */
#define REDUCE_KERNEL(name, T, EXPR)                                                   \
    static void name(void *restrict inout_, const void *restrict in_, size_t count)    \
    {                                                                                  \
        T *restrict a = inout_;                                                        \
        const T *restrict b = in_;                                                     \
        size_t i = 0;                                                                  \
        for (; count - i >= REDUCE_BLOCK / sizeof(T); i += REDUCE_BLOCK / sizeof(T)) { \
            for (size_t j = 0; j < REDUCE_BLOCK / sizeof(T); j++) {                    \
                T x = a[i + j], y = b[i + j];                                          \
                a[i + j] = (EXPR);                                                     \
            }                                                                          \
        }                                                                              \
        for (; i < count; i++) {                                                       \
            T x = a[i], y = b[i];                                                      \
            a[i] = (EXPR);                                                             \
        }                                                                              \
    }

/* Integer sum, prod and the bitwise ops act on the bits alone, so the signed
 * dtypes use the unsigned kernels: wrapping is then defined, and int32_t and
 * uint32_t may alias each other. uint32_t is unsigned int on every target we
 * build for, so x * y is not promoted to a signed int. */
_Static_assert(UINT32_MAX == UINT_MAX, "uint32_t arithmetic would promote to int");
#define REDUCE_BITS(T, sfx)                   \
    REDUCE_KERNEL(reduce_sum_##sfx, T, x + y) \
    REDUCE_KERNEL(reduce_prod_##sfx, T, x *y) \
    REDUCE_KERNEL(reduce_band_##sfx, T, x &y) \
    REDUCE_KERNEL(reduce_bor_##sfx, T, x | y) \
    REDUCE_KERNEL(reduce_bxor_##sfx, T, x ^ y)

/* Min and max do depend on the signedness. */
#define REDUCE_ORDER(T, sfx)                          \
    REDUCE_KERNEL(reduce_min_##sfx, T, y < x ? y : x) \
    REDUCE_KERNEL(reduce_max_##sfx, T, y > x ? y : x)

/* y != y: in's element is a NaN; a NaN in x fails y < x and stays. */
#define REDUCE_FLOAT(T, sfx)                                         \
    REDUCE_KERNEL(reduce_sum_##sfx, T, x + y)                        \
    REDUCE_KERNEL(reduce_prod_##sfx, T, x *y)                        \
    REDUCE_KERNEL(reduce_min_##sfx, T, y != y ? y : (y < x ? y : x)) \
    REDUCE_KERNEL(reduce_max_##sfx, T, y != y ? y : (y > x ? y : x))

REDUCE_BITS(uint32_t, u32)
REDUCE_BITS(uint64_t, u64)
REDUCE_ORDER(int32_t, i32)
REDUCE_ORDER(int64_t, i64)
REDUCE_ORDER(uint64_t, u64)
REDUCE_FLOAT(float, f32)
REDUCE_FLOAT(double, f64)

/* Rows in arcoll_op_t order; NULL: op not defined on dtype. */
_Static_assert(ARCOLL_SUM == 0 && ARCOLL_PROD == 1 && ARCOLL_MIN == 2 && ARCOLL_MAX == 3 &&
                   ARCOLL_BAND == 4 && ARCOLL_BOR == 5 && ARCOLL_BXOR == 6,
               "reduce_kernels assumes this order");
static const reduce_kernel_t reduce_kernels[ARCOLL_DTYPE_COUNT][ARCOLL_OP_COUNT] = {
    [ARCOLL_INT32] = {reduce_sum_u32, reduce_prod_u32, reduce_min_i32, reduce_max_i32,
                      reduce_band_u32, reduce_bor_u32, reduce_bxor_u32},
    [ARCOLL_INT64] = {reduce_sum_u64, reduce_prod_u64, reduce_min_i64, reduce_max_i64,
                      reduce_band_u64, reduce_bor_u64, reduce_bxor_u64},
    [ARCOLL_UINT64] = {reduce_sum_u64, reduce_prod_u64, reduce_min_u64, reduce_max_u64,
                       reduce_band_u64, reduce_bor_u64, reduce_bxor_u64},
    [ARCOLL_FLOAT] = {reduce_sum_f32, reduce_prod_f32, reduce_min_f32, reduce_max_f32},
    [ARCOLL_DOUBLE] = {reduce_sum_f64, reduce_prod_f64, reduce_min_f64, reduce_max_f64},
};

static const size_t reduce_align[ARCOLL_DTYPE_COUNT] = {
    [ARCOLL_INT32] = alignof(int32_t),   [ARCOLL_INT64] = alignof(int64_t),
    [ARCOLL_UINT64] = alignof(uint64_t), [ARCOLL_FLOAT] = alignof(float),
    [ARCOLL_DOUBLE] = alignof(double),
};

static const char *const reduce_dtype_names[ARCOLL_DTYPE_COUNT] = {
    [ARCOLL_INT32] = "int32", [ARCOLL_INT64] = "int64",   [ARCOLL_UINT64] = "uint64",
    [ARCOLL_FLOAT] = "float", [ARCOLL_DOUBLE] = "double",
};

static const char *const reduce_op_names[ARCOLL_OP_COUNT] = {
    [ARCOLL_SUM] = "sum",   [ARCOLL_PROD] = "prod", [ARCOLL_MIN] = "min",   [ARCOLL_MAX] = "max",
    [ARCOLL_BAND] = "band", [ARCOLL_BOR] = "bor",   [ARCOLL_BXOR] = "bxor",
};

/* Casts through unsigned so that a negative value is out of range too. */
static int reduce_dtype_valid(arcoll_dtype_t dtype)
{
    return (unsigned)dtype < ARCOLL_DTYPE_COUNT;
}

static int reduce_op_valid(arcoll_op_t op)
{
    return (unsigned)op < ARCOLL_OP_COUNT;
}

size_t arcoll_dtype_size(arcoll_dtype_t dtype)
{
    switch (dtype) {
    case ARCOLL_INT32: return sizeof(int32_t);
    case ARCOLL_INT64: return sizeof(int64_t);
    case ARCOLL_UINT64: return sizeof(uint64_t);
    case ARCOLL_FLOAT: return sizeof(float);
    case ARCOLL_DOUBLE: return sizeof(double);
    default: return 0;
    }
}

const char *reduce_dtype_name(arcoll_dtype_t dtype)
{
    return reduce_dtype_valid(dtype) ? reduce_dtype_names[dtype] : "invalid";
}

const char *reduce_op_name(arcoll_op_t op)
{
    return reduce_op_valid(op) ? reduce_op_names[op] : "invalid";
}

int reduce_check(arcoll_dtype_t dtype, arcoll_op_t op, const char *what)
{
    if (what == NULL)
        what = "reduce";
    if (!reduce_dtype_valid(dtype)) {
        log_err("%s: invalid dtype %d", what, (int)dtype);
        return ARCOLL_ERR_INVALID;
    }
    if (!reduce_op_valid(op)) {
        log_err("%s: invalid op %d", what, (int)op);
        return ARCOLL_ERR_INVALID;
    }
    if (reduce_kernels[dtype][op] == NULL) {
        log_err("%s: %s is not defined on %s", what, reduce_op_names[op],
                reduce_dtype_names[dtype]);
        return ARCOLL_ERR_INVALID;
    }
    return ARCOLL_OK;
}

void reduce_apply(arcoll_dtype_t dtype, arcoll_op_t op, void *inout, const void *in, size_t count)
{
    if (!reduce_dtype_valid(dtype) || !reduce_op_valid(op) || count == 0)
        return;
    reduce_kernel_t kernel = reduce_kernels[dtype][op];
    if (kernel == NULL)
        return;
    size_t align = reduce_align[dtype];
    int a_ok = (uintptr_t)inout % align == 0;
    int b_ok = (uintptr_t)in % align == 0;
    if (a_ok && b_ok) {
        kernel(inout, in, count);
        return;
    }

    /* A user buffer at an odd address: stage the misaligned side(s) through
     * aligned blocks, so that every typed access is aligned (UBSan's
     * -fsanitize=alignment, and targets that trap). */
    alignas(64) unsigned char a_tmp[REDUCE_BLOCK];
    alignas(64) unsigned char b_tmp[REDUCE_BLOCK];
    size_t size = arcoll_dtype_size(dtype);
    size_t per = REDUCE_BLOCK / size;
    unsigned char *a = inout;
    const unsigned char *b = in;
    for (size_t done = 0; done < count;) {
        size_t n = count - done < per ? count - done : per;
        size_t bytes = n * size;
        void *pa = a_ok ? (void *)a : memcpy(a_tmp, a, bytes);
        const void *pb = b_ok ? (const void *)b : memcpy(b_tmp, b, bytes);
        kernel(pa, pb, n);
        if (!a_ok)
            memcpy(a, a_tmp, bytes);
        a += bytes;
        b += bytes;
        done += n;
    }
}
