/* Shared by the test launchers (fork_test.c, tcp_launch.c): did a rank end as
 * it should? Every rank must exit 0, except the one a "kill" test makes die by
 * SIGKILL. Prints why not, prefixed with the launcher's name. */
#ifndef ARCOLL_TESTS_LAUNCH_VERDICT_H
#define ARCOLL_TESTS_LAUNCH_VERDICT_H

#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>

static int launch_rank_ok(const char *who, int rank, int status, int expect_kill)
{
    if (expect_kill ? WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL
                    : WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return 1;
    if (WIFSIGNALED(status))
        fprintf(stderr, "%s: rank %d killed by signal %d%s\n", who, rank, WTERMSIG(status),
                expect_kill ? "" : " (unexpected)");
    else
        fprintf(stderr, "%s: rank %d exited with status %d%s\n", who, rank, WEXITSTATUS(status),
                expect_kill ? ", expected death by SIGKILL" : "");
    return 0;
}

#endif
