#!/usr/bin/env python3
"""Send human monitor commands to a running test guest (a debugging aid, not a test).

Usage: tests/vm/hmp.py BUILD/vm/GUEST/monitor.sock 'COMMAND' ['COMMAND' ...]

vm.sh gives every guest a monitor socket in its output dir. For a stalled NIC, compare the
guest's avail index (first word after the flags, read with xp) with qemu's last_avail_idx:
  info virtio                                   (device paths)
  info virtio-queue-status PATH 1               (queue 1 = TX of virtio-net)
  xp /2hx AVAIL_ADDR                            (flags, avail idx as the guest wrote them)
"""
import socket
import sys


def read_reply(sock):
    data = b""
    while not data.rstrip().endswith(b"(qemu)"):
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            break
        if not chunk:
            break
        data += chunk
    return data.decode(errors="replace")


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    sock = socket.socket(socket.AF_UNIX)
    sock.settimeout(3)
    sock.connect(sys.argv[1])
    read_reply(sock)  # the banner
    for cmd in sys.argv[2:]:
        sock.sendall(cmd.encode() + b"\n")
        reply = read_reply(sock)
        # The monitor echoes the typed line with cursor escapes: keep the lines after it.
        lines = reply.replace("\r", "").split("\n")[1:]
        print("\n".join(l for l in lines if l.strip() != "(qemu)"))


if __name__ == "__main__":
    main()
