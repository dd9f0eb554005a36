"""Helpers shared by the benchmark scripts: timing a command with its peak RSS."""
import os
import resource
import subprocess
import time


def run(cmd, stdin=None, stdout=subprocess.DEVNULL):
    """Runs cmd; returns (wall seconds, peak RSS bytes of that child)."""
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:  # child: exec with redirected stdio
        if stdin is not None:
            fd = os.open(stdin, os.O_RDONLY)
            os.dup2(fd, 0)
        out = os.open(os.devnull, os.O_WRONLY)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.execvp(cmd[0], cmd)
    _, status, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) not in (0, 1):
        raise SystemExit(f"{' '.join(map(str, cmd))} failed: {status}")
    return wall, usage.ru_maxrss * 1024


def best_of(n, cmd, **kw):
    """Median wall time and max RSS over n runs after one warm-up run (page cache warm)."""
    run(cmd, **kw)
    runs = [run(cmd, **kw) for _ in range(n)]
    walls = sorted(w for w, _ in runs)
    return walls[len(walls) // 2], max(r for _, r in runs)


def mib(n):
    return f"{n / (1 << 20):.1f} MiB"
