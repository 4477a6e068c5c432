/* coll_test under mpirun (PMIx bootstrap): tests/integ/coll_test.c. */
#include "coll_test.h"

int main(int argc, char **argv)
{
    return coll_test_main(argc, argv, NULL);
}
