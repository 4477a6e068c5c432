#!/usr/bin/env bash
# Boot one test guest and wait for it to power off (console on stdout).
# Usage: tests/vm/vm.sh OUT_DIR IP/PREFIX HOSTNAME NET_ARGS [SCRIPT] [KEY=VALUE...]
#   OUT_DIR   host directory shared writable; the guest sees it at /tmp/vmout and leaves
#             guest.log (the script's output) and rc (its exit code) there
#   NET_ARGS  qemu network options for eth0, one word-split string, e.g.
#             "-nic user,model=virtio-net-pci" (default if empty); romfile= on the NIC
#             skips its iPXE boot ROM
#   SCRIPT    path as seen in the guest (the host root is /; /tmp is the guest's own, the
#             output dir is /tmp/vmout); none: interactive shell on the console
#   KEY=VALUE extra kernel cmdline words: arcoll_hosts=..., ARCOLL_*=, VM_*= (see init)
# Env: VMBED_CACHE (prepare.sh's cache), SMP (default 2), MEM (2G), ACCEL (auto|tcg|kvm),
#      VMBED_MAXCPUS (default: SMP, at least 2; see below),
#      VMBED_TIMEOUT (s, default 600), VMBED_RO (host dir to re-share read-only at
#      its own path, for directories under /tmp, /run or /var/tmp that the guest's tmpfs hides)
set -euo pipefail
[ $# -ge 4 ] || {
    sed -n '2,15p' "$0"
    exit 2
}
OUT=$1 IP=$2 NAME=$3 NET=${4:-"-nic user,model=virtio-net-pci"}
SCRIPT=${5:-}
shift $(($# < 5 ? $# : 5))
C=${VMBED_CACHE:-$HOME/.cache/arcoll-vm}
if [ ! -f "$C/vmlinuz" ] || [ ! -f "$C/initramfs.cpio.gz" ]; then
    echo "vm.sh: no kernel in $C: run tests/vm/prepare.sh first" >&2
    exit 2
fi
mkdir -p "$OUT"
rm -f "$OUT/rc" "$OUT/guest.log"

# KVM only with real VT-x/AMD-V: this kind of host exposes /dev/kvm through kvm_pvm, which
# cannot boot a stock kernel, so the default is qemu's software CPU (TCG, slow but real).
ACCEL=${ACCEL:-auto}
if [ "$ACCEL" = auto ]; then
    ACCEL=tcg
    if [ -d /sys/module/kvm_intel ] || [ -d /sys/module/kvm_amd ]; then ACCEL=kvm; fi
fi
# shellcheck disable=SC2054 # commas belong to qemu's option syntax
case $ACCEL in
kvm) CPU=(-accel kvm -cpu host) ;;
*) CPU=(-accel tcg,thread=multi -cpu max) ;;
esac

APPEND="console=ttyS0 quiet loglevel=4 panic=-1 arcoll_ip=$IP arcoll_host=$NAME"
[ -n "$SCRIPT" ] && APPEND="$APPEND arcoll_script=$SCRIPT"
RO=()
# shellcheck disable=SC2054
if [ -n "${VMBED_RO:-}" ]; then
    RO=(-fsdev "local,id=ro,path=$VMBED_RO,security_model=none,readonly=on,multidevs=remap"
        -device virtio-9p-pci,fsdev=ro,mount_tag=roshare)
    APPEND="$APPEND arcoll_ro=$VMBED_RO"
fi
[ $# -gt 0 ] && APPEND="$APPEND $*"

# At least 2 possible vCPUs, even for a 1-vCPU guest: qemu before 8.1 drops the guest's memory
# barriers when maxcpus is 1 (commit c914d46d0a, "tcg: Do not elide memory barriers for
# !CF_PARALLEL in system mode"), and virtio's kick/notification handshake with qemu's I/O
# thread then loses a kick now and then: the NIC's TX queue stalls for good ("NETDEV WATCHDOG:
# transmit queue 0 timed out"). maxcpus > 1 makes TCG emit the barriers; the spare vCPU stays
# offline.
SMP=${SMP:-2}
MAXCPUS=${VMBED_MAXCPUS:-$((SMP < 2 ? 2 : SMP))}
# The human monitor, for post-mortems of a live guest (tests/vm/hmp.py). A unix socket path
# holds at most 107 bytes: a deep output dir gets one in /tmp instead.
MON=$(cd "$OUT" && pwd)/monitor.sock
if [ ${#MON} -gt 100 ]; then
    MON=/tmp/arcoll-vm-$NAME-$$.sock
    echo "vm.sh: monitor socket $MON"
fi

# A guest that hangs must not hang CI: hard limit, then KILL if qemu ignores TERM.
# shellcheck disable=SC2086
exec timeout -k 10 "${VMBED_TIMEOUT:-600}" qemu-system-x86_64 "${CPU[@]}" \
    -m "${MEM:-2G}" -smp "$SMP,maxcpus=$MAXCPUS" -machine q35 -nographic -no-reboot \
    -monitor "unix:$MON,server=on,wait=off" \
    -kernel "$C/vmlinuz" -initrd "$C/initramfs.cpio.gz" -append "$APPEND" \
    -fsdev local,id=hostroot,path=/,security_model=none,readonly=on,multidevs=remap \
    -device virtio-9p-pci,fsdev=hostroot,mount_tag=hostroot \
    -fsdev "local,id=vmout,path=$(cd "$OUT" && pwd),security_model=none,multidevs=remap" \
    -device virtio-9p-pci,fsdev=vmout,mount_tag=vmout \
    "${RO[@]}" $NET
