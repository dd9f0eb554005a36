#!/usr/bin/env python3
"""Benchmark: `cudalint inspect` vs `cuobjdump --list-elf --list-ptx` on a large real library.

Fetches the nvidia-cublas wheel (libcublasLt.so, ~520 MB, thousands of fatbin containers plus
hundreds hidden in .cask_resource) into bench-work/, builds cudalint in release mode, and prints
wall time (median of 3, warm page cache) and peak RSS of both tools.

usage: scripts/bench-inspect.py [LIBRARY]
"""
import glob
import os
import subprocess
import sys
import zipfile

sys.path.insert(0, os.path.dirname(__file__))
from benchlib import best_of, mib  # noqa: E402

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
work = os.path.join(root, "bench-work")
tools = subprocess.run([os.path.join(root, "scripts/fetch-cuda-tools.sh")], check=True,
                       capture_output=True, text=True).stdout.strip()
cuobjdump = os.path.join(tools, "cu13/nvidia/cu13/bin/cuobjdump")

if len(sys.argv) > 1:
    lib = sys.argv[1]
else:
    lib = os.path.join(work, "cublas/nvidia/cu13/lib/libcublasLt.so.13")
    if not os.path.exists(lib):
        os.makedirs(os.path.join(work, "wheels"), exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "-d",
                        os.path.join(work, "wheels"), "nvidia-cublas==13.1.0.3"], check=True)
        whl = glob.glob(os.path.join(work, "wheels/nvidia_cublas-13.1.0.3-*.whl"))[0]
        with zipfile.ZipFile(whl) as z:
            z.extract("nvidia/cu13/lib/libcublasLt.so.13", os.path.join(work, "cublas"))

subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=root, check=True)
cudalint = os.path.join(root, "target/release/cudalint")

size = os.path.getsize(lib)
print(f"library: {lib} ({mib(size)})")
rows = [
    ("cudalint inspect", [cudalint, "inspect", lib]),
    ("cudalint inspect --cubins", [cudalint, "inspect", "--cubins", lib]),
    ("cuobjdump --list-elf --list-ptx", [cuobjdump, "--list-elf", "--list-ptx", lib]),
]
results = {}
for name, cmd in rows:
    wall, rss = best_of(3, cmd)
    results[name] = (wall, rss)
    print(f"{name:34} {wall:8.3f} s   peak RSS {mib(rss)}")
base = results["cuobjdump --list-elf --list-ptx"][0]
for name in ("cudalint inspect", "cudalint inspect --cubins"):
    print(f"speed-up of {name}: {base / results[name][0]:.1f}x")
