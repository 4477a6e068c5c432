/* The names and collectives of config/algs.h's list, for the settings, the
 * tuning table and the dispatcher alike. */
#include "config/algs.h"

#define ALGS_NAME(id, name, colls)  #name,
#define ALGS_COLLS(id, name, colls) colls,
static const char *const algs_names[] = {CORE_ALG_LIST(ALGS_NAME) "auto"};
static const unsigned algs_colls[] = {CORE_ALG_LIST(ALGS_COLLS) ALGS_ALL};

const char *core_alg_name(int alg)
{
    return alg >= 0 && alg < CORE_ALG_COUNT ? algs_names[alg] : "?";
}

int core_alg_serves(int alg, int coll)
{
    return alg >= 0 && alg < CORE_ALG_COUNT && coll >= 0 && coll < 6 &&
           (algs_colls[alg] & (1u << coll)) != 0;
}
