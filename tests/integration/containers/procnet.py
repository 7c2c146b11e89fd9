"""Who listens where, from /proc (the host's view: containers run with host networking)."""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path

LISTEN = "0A"


def _address(hex_addr: str) -> str:
    """/proc/net/tcp{,6}'s little-endian hex address as text (127.0.0.1, ::1, 0.0.0.0);
    IPv4-mapped IPv6 addresses as their IPv4 address."""
    raw = bytes.fromhex(hex_addr)
    if len(raw) == 4:
        return str(ipaddress.IPv4Address(raw[::-1]))
    words = [raw[i : i + 4][::-1] for i in range(0, 16, 4)]
    v6 = ipaddress.IPv6Address(b"".join(words))
    return str(v6.ipv4_mapped or v6)  # a JVM's 127.0.0.1 is ::ffff:127.0.0.1


def listening_sockets() -> dict[str, tuple[str, int]]:
    """socket inode -> (address, port) of every listening TCP socket."""
    found = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == LISTEN:
                addr, port = fields[1].rsplit(":", 1)
                found[fields[9]] = (_address(addr), int(port, 16))
    return found


def _inodes(pid: int) -> set[str]:
    try:
        links = [os.readlink(fd) for fd in Path(f"/proc/{pid}/fd").iterdir()]
    except OSError:
        return set()
    return {link[8:-1] for link in links if link.startswith("socket:[")}


def listening_pids(port: int) -> set[int]:
    """Host pids with a socket listening on ``port``."""
    inodes = {inode for inode, (_, p) in listening_sockets().items() if p == port}
    pids = (int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit())
    return {pid for pid in pids if _inodes(pid) & inodes}


def listening_addresses(pids: set[int]) -> set[tuple[str, int]]:
    """(address, port) of every socket the processes ``pids`` listen on."""
    sockets = listening_sockets()
    owned = set().union(*(_inodes(pid) for pid in pids)) if pids else set()
    return {sockets[inode] for inode in owned if inode in sockets}
