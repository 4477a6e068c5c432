/*
 * libdegrade.so: puts a rank in the environment container runtimes give
 * (tests/integ/run.sh, "degraded"), before main, by LD_PRELOAD:
 *
 *   DEGRADE=cma    a seccomp filter that fails process_vm_writev and
 *                  process_vm_readv with EPERM (Docker's default profile
 *                  does so without CAP_SYS_PTRACE);
 *   DEGRADE=proc   the process is not dumpable and has no CAP_SYS_PTRACE, so
 *                  its peers can neither open /proc/<pid>/fd/N of it nor
 *                  write into it with process_vm_writev (a user's program
 *                  that calls prctl(PR_SET_DUMPABLE, 0), or a hardened
 *                  runtime).
 *
 * arcoll must still initialize and run every collective, on the copy path
 * and named segments, with one warning (docs/reliability.md).
 */
#include <errno.h>
#include <linux/audit.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static void degrade_fail(const char *what)
{
    fprintf(stderr, "degrade: %s failed: %s\n", what, strerror(errno));
    _exit(3);
}

/* EPERM for the two cross-memory calls, everything else allowed. */
static void degrade_cma(void)
{
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_process_vm_writev, 2, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_process_vm_readv, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
    };
    struct sock_fprog prog = {.len = sizeof(f) / sizeof(f[0]), .filter = f};

    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        degrade_fail("prctl(PR_SET_NO_NEW_PRIVS)");
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) != 0)
        degrade_fail("prctl(PR_SET_SECCOMP)");
}

/* Not dumpable, and CAP_SYS_PTRACE gone from the effective set (root keeps
 * the others): the kernel's ptrace access check fails for the peers. */
static void degrade_proc(void)
{
    struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct d[2];

    if (syscall(SYS_capget, &h, d) != 0)
        degrade_fail("capget");
    d[CAP_SYS_PTRACE / 32].effective &= ~(1u << (CAP_SYS_PTRACE % 32));
    d[CAP_SYS_PTRACE / 32].permitted &= ~(1u << (CAP_SYS_PTRACE % 32));
    if (syscall(SYS_capset, &h, d) != 0)
        degrade_fail("capset");
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0)
        degrade_fail("prctl(PR_SET_DUMPABLE)");
}

__attribute__((constructor)) static void degrade_init(void)
{
    const char *m = getenv("DEGRADE");

    if (m == NULL)
        return;
    if (strstr(m, "cma") != NULL)
        degrade_cma();
    if (strstr(m, "proc") != NULL)
        degrade_proc();
}
