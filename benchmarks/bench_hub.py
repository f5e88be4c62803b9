"""The course hub under a class: log-ins to a ready JupyterLab, and the instant checks during a flood.

(a) **Log-ins.** 30 students log in within a minute (their starts spread evenly over 60 s) with
    the hub's own log-in form (PAM, real Unix accounts), each then waiting for their JupyterLab
    to answer; then each fetches problem03 through their lab's Assignment List. Reported: the
    seconds from the log-in to a ready JupyterLab (median, 95th percentile, largest), the
    fetch's seconds, each student server's memory (the PSS of its processes) and the machine's
    load. Target: the 95th percentile within 10 s.
(b) **Checks during a flood.** 100 students, each with a hub token, check answers of problem03 at
    a realistic rate (Poisson arrivals, one check per student every 10 s on average, for 60 s)
    while one more student floods, as in tests/test_checks.py but for the whole minute: checks on
    8 connections, back to back, over every answer id; 1,000 requests half-sent through the
    hub's proxy and 1,000 half request lines sent to the service itself, each sent again as soon
    as the far end lets it go (or at once when refused); meanwhile the instructor reloads the
    statistics page. The checkers and the flood are two processes, as the students' kernels
    would be, the flood as the flooding student's account (see checking()). Reported:
    the other students' check latency (median, 99th percentile, largest), what the flood got
    (judged, refused, let go), the CPU each part used, the load. Target: the 99th percentile
    within 200 ms. (The test claims only the order of events; the time is measured here.)

Needs root and the course hub's set-up (``sudo rbtutor hub up`` once); run it on a test machine,
not on a course's live hub: it writes its own class list (the demonstration's students and
``hb001`` ... ``hb101``), makes those accounts, generates and releases problem03, and starts
the hub. It takes the hub lock and leaves things as found: the hub stopped (started again if it
ran), the class list restored, the benchmark's accounts and hub users removed, the limits on
connections (hub/netlimits.py) lifted if they were not in force before. Loopback only;
bounded: at most 101 accounts, each phase at most a few minutes (the waits below).

Exit status: 1 when a target is missed or a phase fails; 0, with a line saying why, when it
cannot run here (not root, or the hub was never set up).

Run with ``make bench`` or ``sudo .venv/bin/python benchmarks/bench_hub.py``.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "hub"))
import hubctl  # noqa: E402

LOG_INS = 30  # students logging in
LOG_IN_WINDOW = 60.0  # s over which their log-ins start
CHECKERS = 100  # students checking at a realistic rate
CHECK_EVERY = 10.0  # s between one student's checks, on average
CHECK_SECONDS = 60.0  # how long the checking and the flood go on
READY_LIMIT = 240.0  # s a student waits for their JupyterLab before the phase fails
LOG_IN_TARGET = 10.0  # s, the 95th percentile from log-in to a ready JupyterLab
CHECK_TARGET = 0.200  # s, the 99th percentile of the other students' checks during the flood
HELD = 1000  # half-sent requests the flood keeps open through the proxy, and as many to the service itself
ASSIGNMENT = "problem03"
HUB_LOCK = Path("/tmp/rbtutor-hub.lock")  # as tests/test_hub.py: one course hub a machine
NAMES = [f"hb{n:03d}" for n in range(1, CHECKERS + 2)]  # the last one floods


def percentile(values: list[float], share: float) -> float:
    """The ``share`` quantile of ``values`` (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(share * len(ordered) + 0.5) - 1))]


def load() -> str:
    return "load {:.1f} {:.1f} {:.1f}".format(*os.getloadavg())


def as_instructor(*command: str) -> None:
    subprocess.run(hubctl.instructor_argv(*command), cwd=hubctl.course_folder(), check=True, capture_output=True,
                   text=True, timeout=900)


def server_memory_mb(user: str) -> float:
    """The proportional set size of every process of ``user`` (their server and what it started), MB."""
    import pwd

    uid, total = pwd.getpwnam(user).pw_uid, 0
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            owner = next(line.split()[1] for line in status.read_text().splitlines() if line.startswith("Uid:"))
            if owner != str(uid):
                continue
            rollup = (status.parent / "smaps_rollup").read_text()
        except (OSError, StopIteration):
            continue
        total += sum(int(line.split()[1]) for line in rollup.splitlines() if line.startswith("Pss:"))
    return total / 1024


#: the processes whose CPU time (b) reports, by a word of their command line
CPU_OWNERS = {"proxy": "configurable-http-proxy", "hub": "bin/jupyterhub", "check service": "rbtutor.course.checks",
              "check workers": "multiprocessing.spawn"}


def cpu_seconds() -> dict[str, float]:
    """CPU seconds used so far by the hub's parts (:data:`CPU_OWNERS`); the client processes say their own."""
    tick, used = os.sysconf("SC_CLK_TCK"), dict.fromkeys(CPU_OWNERS, 0.0)
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            command = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        seconds = (int(fields[11]) + int(fields[12])) / tick  # utime, stime
        for owner, word in CPU_OWNERS.items():
            if word in command:
                used[owner] += seconds
                break
    return used


async def log_in(client: httpx.AsyncClient, user: str, password: str) -> None:
    """The hub's log-in form, as a browser sends it."""
    await client.get(f"{hubctl.URL}/hub/login")
    reply = await client.post(f"{hubctl.URL}/hub/login", data={
        "username": user, "password": password, "_xsrf": client.cookies.get("_xsrf", path="/hub/")})
    if "jupyterhub-hub-login" not in client.cookies:
        raise RuntimeError(f"{user} could not log in: {reply.status_code} {reply.url}")


async def ready_lab(client: httpx.AsyncClient, user: str) -> None:
    """Ask for the user's JupyterLab until it answers with the lab's page (its server is starting)."""
    lab = f"{hubctl.URL}/user/{user}/lab"
    deadline = time.monotonic() + READY_LIMIT
    while time.monotonic() < deadline:
        reply = await client.get(lab, follow_redirects=True)
        if reply.status_code == 200 and reply.url.path == f"/user/{user}/lab" and "jupyter-config-data" in reply.text:
            return
        await asyncio.sleep(0.25)
    raise RuntimeError(f"{user}'s JupyterLab did not answer within {READY_LIMIT:.0f} s")


async def fetch(client: httpx.AsyncClient, user: str) -> None:
    xsrf = client.cookies.get("_xsrf", path=f"/user/{user}/") or client.cookies.get("_xsrf", path="/hub/")
    reply = await client.post(f"{hubctl.URL}/user/{user}/assignments/fetch", headers={"X-XSRFToken": xsrf},
                              data={"course_id": hubctl.COURSE_ID, "assignment_id": ASSIGNMENT})
    if reply.status_code != 200 or not (hubctl.home(user) / ASSIGNMENT).is_dir():
        raise RuntimeError(f"{user}'s fetch failed: {reply.status_code} {reply.text[:300]}")


async def one_student(user: str, password: str, delay: float) -> dict:
    await asyncio.sleep(delay)
    async with httpx.AsyncClient(timeout=READY_LIMIT) as client:
        started = time.monotonic()
        await log_in(client, user, password)
        await client.get(f"{hubctl.URL}/hub/spawn/{user}")  # what the hub's home page does after a log-in
        await ready_lab(client, user)
        ready = time.monotonic() - started
        started = time.monotonic()
        await fetch(client, user)
        return {"user": user, "ready": ready, "fetch": time.monotonic() - started}


async def log_ins(passwords: dict[str, str]) -> list[dict]:
    users = NAMES[:LOG_INS]
    spread = LOG_IN_WINDOW / LOG_INS
    return await asyncio.gather(*(one_student(u, passwords[u], n * spread) for n, u in enumerate(users)))


async def token_of(user: str, password: str) -> str:
    """A hub API token of ``user``'s own (as JupyterHub's token page makes one), good for an hour: the
    instructor's is not removed with the benchmark's accounts."""
    async with httpx.AsyncClient(timeout=60) as client:
        await log_in(client, user, password)
        reply = await client.post(f"{hubctl.URL}/hub/api/users/{user}/tokens",
                                  json={"note": "bench_hub", "expires_in": 3600},
                                  headers={"X-XSRFToken": client.cookies.get("_xsrf", path="/hub/")})
        reply.raise_for_status()
        return reply.json()["token"]


async def hold_half_sent(port: int, half: bytes, stop: float, statuses: dict) -> None:
    """Part of the flood: a request sent in part to 127.0.0.1:``port``; when the far end answers or
    closes it, the same again, until ``stop`` (``time.monotonic``); refused, again at once."""
    while (left := stop - time.monotonic()) > 0:
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:  # refused (by the hub's limits on an account's connections)
            statuses["refused"] = statuses.get("refused", 0) + 1
            continue
        try:
            writer.write(half)
            await writer.drain()
            await asyncio.wait_for(reader.read(), timeout=left)
            statuses["let go"] = statuses.get("let go", 0) + 1
        except (OSError, TimeoutError):
            statuses["held to the end"] = statuses.get("held to the end", 0) + 1
        finally:
            writer.close()


async def clients(kind: str, plan: dict) -> dict:
    """One side of (b), run in its own process: the realistic checkers (``kind`` "honest") or the flood
    ("flood"), for CHECK_SECONDS; what they got."""
    url = f"{hubctl.URL}/services/rbtutor-check/api/check"
    stop = time.monotonic() + CHECK_SECONDS
    latencies, statuses = [], {}
    limits = httpx.Limits(max_connections=400, max_keepalive_connections=400)
    async with httpx.AsyncClient(timeout=30, limits=limits) as client:
        async def check(token: str, answer: str) -> tuple[int, float]:
            started = time.monotonic()
            reply = await client.post(url, json={"id": answer, "value": random.uniform(-5, 5)},
                                      headers={"Authorization": f"token {token}"})
            return reply.status_code, time.monotonic() - started

        async def student(token: str) -> None:
            ids = plan["ids"]
            rng = random.Random(token)
            turn = rng.randrange(len(ids))  # the parts in turn: well within the checks allowed per part and hour
            while True:
                await asyncio.sleep(rng.expovariate(1 / CHECK_EVERY))
                if time.monotonic() > stop:
                    return
                turn += 1
                status, seconds = await check(token, ids[turn % len(ids)])
                latencies.append(seconds)
                statuses[status] = statuses.get(status, 0) + 1

        async def flooder(token: str, lane: int) -> None:
            ids, n = plan["flood_ids"], lane
            while time.monotonic() < stop:
                try:
                    status, _ = await check(token, ids[n % len(ids)])
                except httpx.TransportError:  # refused by the limits on the account's connections
                    status = "refused"
                statuses[status] = statuses.get(status, 0) + 1
                n += 8

        async def instructor(token: str) -> None:
            while time.monotonic() < stop:
                reply = await client.get(f"{hubctl.URL}/services/rbtutor-check/stats?format=csv",
                                         headers={"Authorization": f"token {token}"})
                statuses[f"statistics {reply.status_code}"] = statuses.get(f"statistics {reply.status_code}", 0) + 1

        *honest, flooding = plan["tokens"]
        if kind == "honest":
            await asyncio.gather(*(student(t) for t in honest),
                                 *([instructor(plan["instructor"])] if plan["flood"] else []))
        else:
            path = "/services/rbtutor-check/api/check"
            body_half = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: token {flooding}\r\n"
                         "Content-Type: application/json\r\nContent-Length: 200\r\n\r\n{\"id\": ").encode()
            line_half = f"POST {path} HTTP/1.1\r\nHost: 127.".encode()
            proxy, service = httpx.URL(hubctl.URL).port, httpx.URL(hubctl.CHECK_URL).port
            await asyncio.gather(*(flooder(flooding, lane) for lane in range(8)),
                                 *(hold_half_sent(proxy, body_half, stop, statuses) for _ in range(HELD)),
                                 *(hold_half_sent(service, line_half, stop, statuses) for _ in range(HELD)))
    used = os.times()
    return {"latencies": latencies, "statuses": statuses, "cpu": used.user + used.system}


def checking(tokens: dict[str, str], instructor: str, ids: list[str], flood_ids: list[str],
             flood: bool = True) -> dict:
    """The realistic checkers and (unless not ``flood``) the flood, side by side for CHECK_SECONDS; what each got.

    Each side is a process of its own, as the students' kernels would be on the hub: a flood
    that keeps its own process busy cannot slow the measuring clients down by sharing their
    event loop (it did, when both sides were one process). The flood runs as the flooding
    student's account, with the students' Python, as their kernel would: the hub's limits on
    each account's connections (hub/netlimits.py) apply to it. The honest clients run as root,
    which those limits leave alone: each of those students is far below them.
    """
    plan = json.dumps({"tokens": list(tokens.values()), "instructor": instructor, "ids": ids,
                       "flood_ids": flood_ids, "flood": flood})
    argv = {"honest": [sys.executable, __file__, "--clients", "honest"],
            "flood": ["runuser", "-u", NAMES[-1], "--", str(hubctl.STUDENT_VENV / "bin" / "python"), __file__,
                      "--clients", "flood"]}
    sides = {kind: subprocess.Popen(argv[kind], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd="/")
             for kind in ("honest", "flood")[:2 if flood else 1]}
    for side in sides.values():
        side.stdin.write(plan)
        side.stdin.close()
    got = {kind: json.loads(side.stdout.read()) for kind, side in sides.items()}  # each ends after CHECK_SECONDS
    for side in sides.values():
        side.wait()
    return {"latencies": got["honest"]["latencies"], "statuses": got["honest"]["statuses"],
            "flood": got.get("flood", {}).get("statuses", {}),
            "cpu": {f"the {kind} clients": side["cpu"] for kind, side in got.items()}}


def answer_ids() -> tuple[list[str], list[str]]:
    """Problem 3's answer ids (the realistic checks) and every answer id (the flood's)."""
    from rbtutor.problems import answer_key

    every = list(answer_key())
    return [i for i in every if i.startswith("p3.")], every


# --- set-up and clean-up

def write_class_list() -> str | None:
    """The benchmark's class list; the file it replaced (None: there was none)."""
    before = hubctl.CLASS_LIST.read_text() if hubctl.CLASS_LIST.exists() else None
    hubctl.CLASS_LIST.parent.mkdir(parents=True, exist_ok=True)
    hubctl.CLASS_LIST.write_text("# written by benchmarks/bench_hub.py, put back when it ends\n"
                                 + "\n".join([*hubctl.students(), *NAMES]) + "\n")
    return before


def forget_checks() -> None:
    """Remove the benchmark's students from the check service's counts (as the course's account, which
    owns them), so that a run within the hour of another starts with every check allowed."""
    from rbtutor.course.checks.core import STORE_FILE

    as_instructor("python", "-c", "import sys; from rbtutor.course.checks.core import WINDOW; "
                  "from rbtutor.course.checks.store import CheckStore; "
                  "CheckStore(sys.argv[1], WINDOW).forget(sys.argv[2:])", str(STORE_FILE), *NAMES)


def clean_up(before: str | None, was_running: bool, limited: bool) -> None:
    hubctl.stop()
    if not limited:  # the hub's start put the connection limits in force; they were not before
        hubctl.netlimits.remove()
    forget_checks()
    if before is None:
        hubctl.CLASS_LIST.unlink(missing_ok=True)
    else:
        hubctl.CLASS_LIST.write_text(before)
    for name in NAMES:
        if hubctl.user_exists(name):
            subprocess.run(["userdel", "--remove", name], capture_output=True)
    hubctl.forget_hub_users(NAMES)
    if hubctl.PASSWORDS.exists():
        known = json.loads(hubctl.PASSWORDS.read_text())
        hubctl.PASSWORDS.write_text(json.dumps({k: v for k, v in known.items() if k not in NAMES}, indent=1) + "\n")
    if was_running:
        hubctl.start()


def main() -> int:
    if os.geteuid() != 0:
        print("bench_hub: not run: it needs root (real accounts and the course hub): sudo .venv/bin/python "
              "benchmarks/bench_hub.py")
        return 0
    if not hubctl.VENV.exists() or not shutil.which("runuser"):
        print(f"bench_hub: not run: the course hub is not set up here ({hubctl.VENV} missing): sudo rbtutor hub up")
        return 0
    with open(HUB_LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        was_running = hubctl.hub_pid() is not None
        limited = hubctl.netlimits.in_force()
        before = write_class_list()
        try:
            return run()
        finally:
            clean_up(before, was_running, limited)


def run() -> int:
    hubctl.stop()
    passwords = hubctl.ensure_accounts()
    hubctl.up(start_hub=False)
    as_instructor("python", "-m", "rbtutor.course", "generate")
    as_instructor("python", "-m", "rbtutor.course", "release", ASSIGNMENT, "--force")
    for name in NAMES:  # a fetched copy from an earlier run would be kept, not fetched anew
        shutil.rmtree(hubctl.home(name) / ASSIGNMENT, ignore_errors=True)
    hubctl.start()
    missed = []
    print(f"bench_hub: {time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} cores, {load()}")

    # (a) log-ins
    started = time.monotonic()
    students = asyncio.run(log_ins(passwords))
    ready = [s["ready"] for s in students]
    fetches = [s["fetch"] for s in students]
    memory = [server_memory_mb(s["user"]) for s in students]
    print(f"(a) {LOG_INS} log-ins started over {LOG_IN_WINDOW:.0f} s, all done after {time.monotonic() - started:.0f} s"
          f" ({load()})")
    print(f"    log-in to a ready JupyterLab: median {statistics.median(ready):.1f} s, "
          f"95th percentile {percentile(ready, 0.95):.1f} s, largest {max(ready):.1f} s")
    print(f"    fetch of {ASSIGNMENT}: median {statistics.median(fetches):.1f} s, "
          f"95th percentile {percentile(fetches, 0.95):.1f} s")
    print(f"    memory of a student's server (PSS): median {statistics.median(memory):.0f} MB, "
          f"largest {max(memory):.0f} MB, all {sum(memory):.0f} MB")
    verdict = "PASS" if percentile(ready, 0.95) <= LOG_IN_TARGET else "FAIL"
    print(f"    target: 95th percentile <= {LOG_IN_TARGET:.0f} s: {verdict}")
    if verdict == "FAIL":
        missed.append("log-in")
    hubctl.stop()  # the servers of (a) stopped: (b) measures the service, not 30 idle labs beside it
    hubctl.start()

    # (b) checks during a flood
    async def tokens() -> dict[str, str]:
        got = await asyncio.gather(*(token_of(name, passwords[name]) for name in (*NAMES, teacher)))
        return dict(zip((*NAMES, teacher), got, strict=True))

    ids, every = answer_ids()
    forget_checks()
    teacher = hubctl.INSTRUCTORS[0]
    found = asyncio.run(tokens())
    teacher_token = found.pop(teacher)
    alone = checking(found, teacher_token, ids, every, flood=False)["latencies"]
    print(f"(b) {CHECKERS} students checking {ASSIGNMENT} (one check each {CHECK_EVERY:.0f} s on average) for "
          f"{CHECK_SECONDS:.0f} s, alone: {len(alone)} checks, latency median "
          f"{statistics.median(alone) * 1000:.0f} ms, 99th percentile {percentile(alone, 0.99) * 1000:.0f} ms "
          f"({load()})")
    before = cpu_seconds()
    result = checking(found, teacher_token, ids, every)
    used = {owner: seconds - before[owner] for owner, seconds in cpu_seconds().items()} | result["cpu"]
    latencies = result["latencies"]
    print(f"    the same beside one student flooding ({load()})")
    print(f"    their checks: {len(latencies)}, replies {dict(sorted(result['statuses'].items()))}; latency median "
          f"{statistics.median(latencies) * 1000:.0f} ms, 99th percentile {percentile(latencies, 0.99) * 1000:.0f} ms,"
          f" largest {max(latencies) * 1000:.0f} ms")
    print(f"    the flood's replies: {dict(sorted(result['flood'].items()))}")
    print("    CPU seconds in those " + f"{CHECK_SECONDS:.0f} s: " + ", ".join(f"{k} {v:.1f}" for k, v in used.items()))
    verdict = "PASS" if percentile(latencies, 0.99) <= CHECK_TARGET else "FAIL"
    print(f"    target: 99th percentile <= {CHECK_TARGET * 1000:.0f} ms: {verdict}")
    if verdict == "FAIL":
        missed.append("checks")
    if missed:
        print(f"bench_hub: missed: {', '.join(missed)}")
    return 1 if missed else 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--clients"]:  # one side of (b), started by checking(), its plan on stdin
        resource.setrlimit(resource.RLIMIT_NOFILE, (8192, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
        print(json.dumps(asyncio.run(clients(sys.argv[2], json.loads(sys.stdin.read())))))
        sys.exit(0)
    sys.exit(main())
