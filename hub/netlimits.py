"""Per-account limits on the connections a student's processes open to the hub's own ports.

Every account on the hub's machine can reach its loopback ports: the proxy, the hub's API,
the course's services, PostgreSQL. A student's kernel that opens connections as fast as they
are closed (a few lines of Python) kept the check service's single event loop and the proxy
busy with handshakes, and other students' checks waited seconds or were refused with 503
(benchmarks/bench_hub.py, 2026-12-06: 99th percentile 2.3 s through the service's own port,
2.6 s through the proxy). No server can tell such a connection from an honest one before it
has spent the work of reading it; the kernel can, since it knows which account opened it.

So :func:`apply` loads one nftables table, :data:`TABLE`, whose rules see each new TCP
connection to those ports on the loopback interface and the account that opens it. An account
of uid 1000 or more that is not exempt (the instructors) may have at most :data:`OPEN_AT_ONCE`
such connections open and open :data:`PER_SECOND` new ones a second (:data:`BURST` at once);
the kernel refuses the rest at once (a TCP reset: the caller sees "connection refused"),
before any server sees them. Accounts below uid 1000 (root, which runs the hub and the proxy;
PostgreSQL; the fetch service's account) and the exempt ones are not limited. Connections
from other machines (the students' browsers) do not pass the loopback interface and are not
limited here.
"""

from __future__ import annotations

import os
import shutil
import subprocess

TABLE = "rbtutor_limits"  # in the inet family
OPEN_AT_ONCE = 32  # connections to the hub's ports an account may hold open together
PER_SECOND = 50  # new connections to them an account may open a second, on average ...
BURST = 100  # ... and at once
FIRST_LIMITED_UID = 1000  # the accounts below are the system's (Debian's useradd starts people here)


class LimitsError(Exception):
    """The limits could not be put in force; the message says why."""


def ruleset(ports, exempt_uids) -> str:
    """The nftables table, in ``nft -f`` syntax: it replaces an earlier version of itself."""
    port_set = ", ".join(str(port) for port in sorted(set(ports)))
    exempt = "".join(f"        meta skuid {uid} accept\n" for uid in sorted(set(exempt_uids)))
    first = "ct state new tcp flags syn / syn,ack"  # the opening packet of a connection, as the client sends it
    return (f"table inet {TABLE}\ndelete table inet {TABLE}\n"  # declared first, so that the delete never fails
            f"table inet {TABLE} {{\n"
            "    set open { type uid; size 65535; flags dynamic; }\n"
            "    set fresh { type uid; size 65535; flags dynamic,timeout; timeout 1m; }\n"
            "    chain output {\n"
            "        type filter hook output priority filter; policy accept;\n"
            f"        oifname != \"lo\" accept\n"
            f"        tcp dport != {{ {port_set} }} accept\n"
            f"        meta skuid < {FIRST_LIMITED_UID} accept\n"
            f"{exempt}"
            f"        {first} add @open {{ meta skuid ct count over {OPEN_AT_ONCE} }} reject with tcp reset\n"
            f"        {first} update @fresh {{ meta skuid limit rate over {PER_SECOND}/second burst {BURST} packets }}"
            " reject with tcp reset\n"
            "    }\n}\n")


def _nft(*argv: str, text: str | None = None) -> subprocess.CompletedProcess:
    # sbin is not on every root's PATH (runuser, su without -)
    nft = shutil.which("nft") or next((p for p in ("/usr/sbin/nft", "/sbin/nft") if os.access(p, os.X_OK)), None)
    if nft is None:
        raise LimitsError("nft is missing (apt-get install -y nftables)")
    return subprocess.run([nft, *argv], input=text, capture_output=True, text=True)


def apply(ports, exempt_uids) -> None:
    """Put the limits in force for connections to ``ports``, every account but ``exempt_uids`` limited."""
    done = _nft("-f", "-", text=ruleset(ports, exempt_uids))
    if done.returncode != 0:
        raise LimitsError(f"nft refused the rules: {done.stderr.strip() or done.stdout.strip()}")


def remove() -> None:
    """Take the limits away (nothing happens when they are not in force, or nft is missing)."""
    if in_force():
        _nft("delete", "table", "inet", TABLE)


def in_force() -> bool:
    """Whether the table is loaded (False where nft is missing)."""
    try:
        return _nft("list", "table", "inet", TABLE).returncode == 0
    except LimitsError:
        return False
