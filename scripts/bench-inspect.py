#!/usr/bin/env python3
"""Benchmark: `cudalint inspect` vs `cuobjdump --list-elf --list-ptx` on a large real library.

Fetches the nvidia-cublas wheel (libcublasLt.so, ~520 MB, thousands of fatbin containers plus
hundreds hidden in .cask_resource) into bench-work/, builds cudalint in release mode (or measures
$CUDALINT_BIN), and prints wall time (paired runs: each tool once per round, 7 rounds after a
warm-up round; the median) and peak RSS of both tools. Exits 1 when inspect is less than 20x
faster than cuobjdump (the goal of issue 34).

usage: scripts/bench-inspect.py [LIBRARY]
"""
import glob
import os
import subprocess
import sys
import zipfile

sys.path.insert(0, os.path.dirname(__file__))
from benchlib import cudalint_binary, mib, paired  # noqa: E402

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

cudalint = cudalint_binary(root)

size = os.path.getsize(lib)
print(f"library: {lib} ({mib(size)})")
rows = [
    ("cudalint inspect", [cudalint, "inspect", lib]),
    ("cudalint inspect --cubins", [cudalint, "inspect", "--cubins", lib]),
    ("cuobjdump --list-elf --list-ptx", [cuobjdump, "--list-elf", "--list-ptx", lib]),
]
results = {}
for (name, _), (wall, rss) in zip(rows, paired(7, [cmd for _, cmd in rows])):
    results[name] = (wall, rss)
    print(f"{name:34} {wall:8.3f} s   peak RSS {mib(rss)}")
base = results["cuobjdump --list-elf --list-ptx"][0]
for name in ("cudalint inspect", "cudalint inspect --cubins"):
    print(f"speed-up of {name}: {base / results[name][0]:.1f}x")
if base / results["cudalint inspect"][0] < 20:
    sys.exit("goal missed: inspect is less than 20x cuobjdump")
