#!/usr/bin/env bash
# Prepare the Soft-RoCE test bed: host tools, a stock Debian kernel (which has rdma_rxe, unlike
# the host's) and a tiny initramfs whose /init is tests/vm/init.
# Usage: tests/vm/prepare.sh [CACHE_DIR]     (default ${VMBED_CACHE:-$HOME/.cache/arcoll-vm})
# Leaves CACHE_DIR/vmlinuz and CACHE_DIR/initramfs.cpio.gz. Idempotent: a second run only checks.
# On failure the last line is "prepare: <reason>" (run.sh turns it into a skip).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
C=${1:-${VMBED_CACHE:-$HOME/.cache/arcoll-vm}}
die() {
    echo "prepare: $*" >&2
    exit 1
}
trap 'echo "prepare: failed (line $LINENO): $BASH_COMMAND" >&2' ERR

# Host side: qemu + busybox/cpio/kmod to build the initramfs; guest side (it runs the host's
# root filesystem): iproute2's rdma tool, the rxe verbs provider, perftest, the dev headers.
PKGS="qemu-system-x86 busybox-static cpio kmod iproute2 rdma-core ibverbs-providers
      ibverbs-utils perftest libibverbs-dev librdmacm-dev"
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
        missing="$missing $p"
done
if [ -n "$missing" ]; then
    [ "$(id -u)" -eq 0 ] || die "missing packages (need root to install):$missing"
    echo "prepare: installing$missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq || die "apt-get update failed"
    # shellcheck disable=SC2086
    apt-get install -y -qq --no-install-recommends $missing >/dev/null ||
        die "apt-get install failed:$missing"
fi

# The kernel ABI name (e.g. 6.1.0-56-amd64) moves with Debian point releases: ask apt which
# one the linux-image-amd64 meta-package points at now.
resolve_kernel() {
    apt-cache depends linux-image-amd64 2>/dev/null |
        awk '/Depends: linux-image-[0-9]/{sub(/^linux-image-/, "", $2); print $2; exit}'
}
K=$(resolve_kernel || true)
if [ -z "$K" ] && [ "$(id -u)" -eq 0 ]; then
    apt-get update -qq >/dev/null 2>&1 || true # fresh container: no package lists yet
    K=$(resolve_kernel || true)
fi
[ -n "$K" ] || die "cannot resolve the kernel of linux-image-amd64 (apt-cache depends)"

mkdir -p "$C"
KROOT=$C/kroot-$K
if [ ! -f "$KROOT/boot/vmlinuz-$K" ]; then
    deb=$(find "$C" -maxdepth 1 -name "linux-image-${K}_*.deb" | head -1)
    if [ -z "$deb" ]; then
        echo "prepare: downloading linux-image-$K"
        # as root apt would download as _apt, who cannot write a private cache dir
        sb=()
        [ "$(id -u)" -ne 0 ] || sb=(-o APT::Sandbox::User=root)
        (cd "$C" && apt-get download -q "${sb[@]}" "linux-image-$K" >/dev/null) ||
            die "apt-get download linux-image-$K failed"
        deb=$(find "$C" -maxdepth 1 -name "linux-image-${K}_*.deb" | head -1)
        [ -n "$deb" ] || die "apt-get download left no linux-image-$K .deb"
    fi
    rm -rf "$KROOT.tmp"
    dpkg -x "$deb" "$KROOT.tmp" || die "dpkg -x $deb failed"
    # The package ships no modules.dep: build it so modprobe can order the modules for us.
    depmod -b "$KROOT.tmp" "$K" || die "depmod failed"
    mv "$KROOT.tmp" "$KROOT"
fi

# The initramfs depends on the kernel, /init, this script and busybox: rebuild when any changes.
BUSYBOX=/bin/busybox # from busybox-static: the initramfs has no libc
[ -x $BUSYBOX ] || die "$BUSYBOX missing (package busybox-static)"
# Top-level modules; modprobe --show-depends expands each into dependency-ordered insmod lines.
# crc32_generic must precede rdma_rxe (its ICRC uses crc32 through the crypto API, which a
# bare insmod cannot autoload); rdma_ucm gives librdmacm (rdma_cm) its device node.
TOP="virtio_pci virtio_net 9pnet_virtio 9p crc32_generic rdma_rxe rdma_ucm"
stamp=$(cat "$HERE/init" "$0" $BUSYBOX | sha256sum | cut -c1-16)-$K
if [ "$(cat "$C/initramfs.stamp" 2>/dev/null)" = "$stamp" ] && [ -f "$C/initramfs.cpio.gz" ]; then
    exit 0
fi
echo "prepare: building initramfs for $K"
ST=$C/initramfs.stage
rm -rf "$ST"
mkdir -p "$ST"/{bin,dev,proc,sys,host,lib/mods}
cp $BUSYBOX "$ST/bin/busybox"
for m in $TOP; do
    modprobe -d "$KROOT" -S "$K" --show-depends "$m" || die "module $m not found in $K"
done | awk '$1 == "insmod" && !seen[$2]++ {print $2}' | while read -r ko; do
    b=$(basename "$ko")
    case $b in # newer Debian kernels compress modules; busybox insmod wants them plain
    *.ko.xz) xz -dc "$ko" >"$ST/lib/mods/${b%.xz}" ;;
    *.ko.zst) zstd -qdc "$ko" >"$ST/lib/mods/${b%.zst}" ;;
    *) cp "$ko" "$ST/lib/mods/" ;;
    esac
    echo "${b%.ko*}" >>"$ST/modules.order"
done
[ -s "$ST/modules.order" ] || die "no modules collected"
grep -qx rdma_rxe "$ST/modules.order" || die "rdma_rxe not in $K"
echo "prepare: modules in load order: $(tr '\n' ' ' <"$ST/modules.order")"
install -m 755 "$HERE/init" "$ST/init"
(cd "$ST" && find . | cpio -o -H newc --quiet | gzip -1) >"$C/initramfs.cpio.gz.tmp"
mv "$C/initramfs.cpio.gz.tmp" "$C/initramfs.cpio.gz"
ln -sfn "kroot-$K/boot/vmlinuz-$K" "$C/vmlinuz"
echo "$stamp" >"$C/initramfs.stamp"
rm -rf "$ST"
