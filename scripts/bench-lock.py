#!/usr/bin/env python3
"""Benchmark: a lockfile scan with a cold and a warm cache (issue 44: the stock torch 2.8
closure's pylock, second run under 2 s).

Fetches the closure's wheels (tests/stacks/torch-2.8.0-cu128.txt, pinned by sha256, as
scripts/build-stack-image.py fetches them into $CUDALINT_WHEELS or .tools/wheels), serves them
on loopback (python3 -m http.server), writes the pylock.toml a locker would (each wheel's url,
size and sha256), then times `cudalint scan pylock.toml` with an empty cache directory (every
wheel downloaded, hashed and analysed) and again with that cache warm (the median of 3 runs:
each wheel's analysis is a layer cache entry, nothing is fetched, hashed or read).
usage: scripts/bench-lock.py [--closure FILE] [--wheels DIR] [--python 3.11]
       scripts/bench-lock.py --lock PATH    (any lockfile as it is, its wheels as it names them)
CUDALINT_BIN=path measures that binary (default: this checkout's release build).
"""
import argparse
import hashlib
import importlib
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
import benchlib  # noqa: E402

stack = importlib.import_module("build-stack-image")
root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


def serve(directory):
    """python3 -m http.server on a loopback port for `directory`: (process, base URL)."""
    p = subprocess.Popen([sys.executable, "-u", "-m", "http.server", "--bind", "127.0.0.1", "0", "--directory",
                          directory], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = p.stdout.readline()  # "Serving HTTP on 127.0.0.1 port 41234 (http://127.0.0.1:41234/) ..."
    port = line.split(" port ")[1].split()[0]
    return p, f"http://127.0.0.1:{port}"


def pylock(wheels, base):
    """A PEP 751 lock of `wheels`, each by its URL under `base`, size and sha256."""
    out = ['lock-version = "1.0"', 'created-by = "scripts/bench-lock.py"', ""]
    for w in wheels:
        name, version = os.path.basename(w).split("-")[:2]
        f = os.path.basename(w)
        out += ["[[packages]]", f'name = "{name}"', f'version = "{version}"',
                f'wheels = [{{ url = "{base}/{f}", size = {os.path.getsize(w)}, hashes = {{ sha256 = "{sha256(w)}" }} }}]',
                ""]
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--closure", default=os.path.join(root, "tests/stacks/torch-2.8.0-cu128.txt"))
    ap.add_argument("--wheels", default=os.environ.get("CUDALINT_WHEELS"))
    ap.add_argument("--python", default="3.11")
    ap.add_argument("--lock", help="a lockfile to scan as it is instead of the closure's")
    ap.add_argument("--gpu", default="H100,L4,B200")
    a = ap.parse_args()
    binary = benchlib.cudalint_binary(root)
    # A fixed key: the warm runs must trust the entries the cold run wrote.
    os.environ["CUDALINT_CACHE_KEY"] = "bench-lock: a fixed secret of 16 bytes or more"
    with tempfile.TemporaryDirectory() as work:
        server = None
        if a.lock:
            lock = os.path.abspath(a.lock)
            what = lock
        else:
            wheels = stack.fetch(a.closure, a.wheels or os.path.join(root, ".tools/wheels"), a.python)
            server, base = serve(os.path.dirname(wheels[0]))
            lock = os.path.join(work, "pylock.toml")
            with open(lock, "w") as f:
                f.write(pylock(wheels, base))
            total = sum(os.path.getsize(w) for w in wheels)
            what = f"{os.path.basename(a.closure)}: {len(wheels)} wheels, {total / 1e9:.2f} GB"
        try:
            cache = os.path.join(work, "cache")
            cmd = [binary, "scan", lock, "--gpu", a.gpu, "--python", a.python, "--cache-dir", cache, "--quiet"]
            cold, cold_rss = benchlib.run(cmd)
            warm = sorted(benchlib.run(cmd) for _ in range(3))
            print(what)
            print(f"cold cache (download, hash, analyse): {cold:.2f} s, peak {benchlib.mib(cold_rss)}")
            print(f"warm cache (median of 3):            {warm[1][0]:.2f} s, peak {benchlib.mib(warm[1][1])}")
        finally:
            if server:
                server.kill()
                server.wait()


if __name__ == "__main__":
    main()
