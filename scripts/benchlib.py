"""Helpers shared by the benchmark scripts: timing a command with its peak RSS."""
import contextlib
import os
import resource
import socket
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


def paired(n, cmds, **kw):
    """Runs each of `cmds` once per round, n rounds after one warm-up round (so a slow moment of
    the machine falls on every command alike): per command, the median wall time and max RSS."""
    for c in cmds:
        run(c, **kw)
    runs = [[] for _ in cmds]
    for _ in range(n):
        for i, c in enumerate(cmds):
            runs[i].append(run(c, **kw))
    out = []
    for r in runs:
        walls = sorted(w for w, _ in r)
        out.append((walls[len(walls) // 2], max(x for _, x in r)))
    return out


def mib(n):
    return f"{n / (1 << 20):.1f} MiB"


def cudalint_binary(root, given=None):
    """The binary to measure: `given`, else $CUDALINT_BIN (another build, for before/after), else
    this checkout's release build (built now)."""
    given = given or os.environ.get("CUDALINT_BIN")
    if given:
        return given
    subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=root, check=True)
    return os.path.join(root, "target/release/cudalint")


def start_registry(d):
    """A CNCF distribution registry (Debian package docker-registry) on a free loopback port,
    storing under `d`; returns the process (to kill or stop) and its host:port."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    os.makedirs(d, exist_ok=True)
    cfg = os.path.join(d, "config.yml")
    with open(cfg, "w") as f:
        f.write(f"version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n"
                f"    rootdirectory: {d}/data\nhttp:\n  addr: 127.0.0.1:{port}\n")
    reg = subprocess.Popen(["docker-registry", "serve", cfg], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.1)
    return reg, f"127.0.0.1:{port}"


@contextlib.contextmanager
def loopback_registry(work):
    """start_registry(work) for the length of a `with`: yields its host:port, stops it on exit."""
    reg, host = start_registry(work)
    try:
        yield host
    finally:
        reg.kill()
        reg.wait()
