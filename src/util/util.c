/* Utilities every layer may call (util/util.h). */
#include "util/util.h"

#include <string.h>
#include <time.h>

#include "arcoll.h"

uint64_t core_time_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

uint64_t core_time_coarse_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

const char *arcoll_strerror(int status)
{
    switch (status) {
    case ARCOLL_OK: return "success";
    case ARCOLL_INPROGRESS: return "in progress";
    case ARCOLL_ERR_INVALID: return "invalid argument";
    case ARCOLL_ERR_NOMEM: return "out of memory";
    case ARCOLL_ERR_TIMEOUT: return "timed out waiting for a peer";
    case ARCOLL_ERR_PEER: return "a peer process is gone";
    case ARCOLL_ERR_MISMATCH: return "message sizes differ across ranks";
    case ARCOLL_ERR_UNSUPPORTED: return "not supported";
    case ARCOLL_ERR_BOOTSTRAP: return "bootstrap (PMIx or out-of-band) failure";
    case ARCOLL_ERR_CHANNEL: return "transport failure";
    case ARCOLL_ERR_STATE: return "invalid state (not initialized, finalized, busy or failed)";
    case ARCOLL_ERR_CONFIG: return "invalid configuration";
    default: return "unknown status";
    }
}

#ifdef ARCOLL_FAULTS
int wire_fault_one_bank;
int wire_fault_no_epoch;
int wire_fault_reg_fail;
int wire_fault_bad_rkey;
int wire_fault_hello_drop;
int wire_fault_heapmr_fail;
int eng_fault_fail_call;
int wire_fault_zc_stall;

void core_faults_set(const char *f)
{
    wire_fault_no_epoch = f != NULL && strstr(f, "no_epoch") != NULL;
    wire_fault_one_bank = f != NULL && strstr(f, "one_bank") != NULL;
    wire_fault_reg_fail = f != NULL && strstr(f, "reg_fail") != NULL;
    wire_fault_heapmr_fail = f != NULL && strstr(f, "heapmr_fail") != NULL;
    wire_fault_bad_rkey = f != NULL && strstr(f, "bad_rkey") != NULL;
    eng_fault_fail_call = f != NULL && strstr(f, "fail_call") != NULL;
    wire_fault_zc_stall = f != NULL && strstr(f, "zc_stall") != NULL;
    wire_fault_hello_drop = f == NULL                             ? 0
                            : strstr(f, "hello_drop_all") != NULL ? 2
                            : strstr(f, "hello_drop") != NULL     ? 1
                                                                  : 0;
}
#endif
