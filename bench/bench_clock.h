/* The benchmarks' clock and skew wait (arcoll-bench, arcoll-mpi-lat). */
#ifndef ARCOLL_BENCH_CLOCK_H
#define ARCOLL_BENCH_CLOCK_H

#include <errno.h>
#include <math.h>
#include <time.h>

/* CLOCK_MONOTONIC in us: shared by all processes of one host. */
static inline double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* Wait until the absolute CLOCK_MONOTONIC time `until` (us). */
static inline void wait_until(double until, int spin)
{
    if (spin) {
        while (now_us() < until)
            ;
        return;
    }
    struct timespec ts = {(time_t)(until / 1e6), (long)(fmod(until, 1e6) * 1e3)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

#endif
