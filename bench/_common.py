"""Shared by the bench/compare_*.py scripts: run RLX and a peer as processes, time a peer's
loop, read the medians they print, and print the machine, the load and the `RATIO <workload>
<x>` lines (x = peer time / RLX time, > 1: RLX faster) that every compare script ends with.

One place for the timing rule: a warm-up call, then at least 5 reps and at least `secs`
seconds, and the median (`PEER_TIMER`, for a peer's inline Python script; the RLX bench
examples follow the same rule in Rust).
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CACHE = os.environ.get("RLX_CACHE", os.path.join(os.path.expanduser("~"), ".cache", "rlx"))

# Prepended to a peer's inline script (`peer_cmd`): `timed_ms(f, secs)` -> (median ms, reps).
PEER_TIMER = r'''
import time as _time
def timed_ms(f, secs=1.0):
    f(); ts = []; st = _time.perf_counter()
    while len(ts) < 5 or _time.perf_counter() - st < secs:
        t0 = _time.perf_counter(); f(); ts.append(_time.perf_counter() - t0)
    return sorted(ts)[len(ts) // 2] * 1e3, len(ts)
'''


def peer_cmd(script, *args):
    """The command that runs an inline peer script (with `timed_ms` defined) in this Python."""
    return [sys.executable, "-c", PEER_TIMER + script, *map(str, args)]


def run(cmd, env=None, unset=(), cwd=None):
    """Run `cmd` (extra `env` variables, `unset` ones removed, in `cwd`, default the caller's
    directory); its stdout, or exit with its stderr when it fails."""
    e = dict(os.environ)
    for k in unset:
        e.pop(k, None)
    e.update(env or {})
    out = subprocess.run(cmd, env=e, capture_output=True, text=True, cwd=cwd)
    if out.returncode != 0:
        sys.exit(f"command failed: {' '.join(map(str, cmd))}\n{out.stderr}")
    return out.stdout


def build(package, example=None):
    """`cargo build --release` of a package (or one of its examples); the binary's path."""
    cmd = ["cargo", "build", "--release", "-q", "-p", package]
    if example:
        cmd += ["--example", example]
    run(cmd, cwd=ROOT)
    if example:
        return os.path.join(ROOT, "target", "release", "examples", example)
    return os.path.join(ROOT, "target", "release", "rlx")


def build_c(name, why):
    """`bench/<name>.c` compiled (`cc -O3 -march=native -pthread`: AVX-512 where this CPU has it)
    into a temporary directory; its
    path, or None (with a message naming `why` it was wanted) when there is no C compiler."""
    cc = shutil.which("cc")
    if not cc:
        print(f"SKIP {why}: no C compiler (cc)", file=sys.stderr)
        return None
    exe = os.path.join(tempfile.mkdtemp(), name)
    run([cc, "-O3", "-march=native", "-pthread", os.path.join(ROOT, "bench", name + ".c"), "-o", exe])
    return exe


def median_ms(text, who=""):
    """The number in the `<who> median <ms> ms` line a bench process prints."""
    m = re.search((re.escape(who) + " " if who else "") + r"median ([0-9.]+) ms", text)
    if not m:
        sys.exit(f"no '{who} median ... ms' line in:\n{text}")
    return float(m.group(1))


def pin(threads=1):
    """`taskset -c 0` for a 1-thread run (when taskset exists); nothing otherwise."""
    return ["taskset", "-c", "0"] if threads == 1 and shutil.which("taskset") else []


def machine():
    """`# machine: <cpu>, <n> cpus`."""
    with open("/proc/cpuinfo") as f:
        cpu = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), "?")
    return f"# machine: {cpu}, {os.cpu_count()} cpus"


def load():
    """The `uptime` line (load averages), to record next to the numbers."""
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def print_ratios(ratios, digits=2):
    """One `RATIO <workload> <x>` line per (workload, x), x = peer time / RLX time."""
    for name, x in ratios:
        print(f"RATIO {name} {x:.{digits}f}")
