#!/usr/bin/env python3
"""Benchmark: registry scans with a shared base layer, cold and warm layer cache.

Starts a CNCF distribution registry (Debian package docker-registry) on loopback, pushes N=5
images with skopeo that share the two large layers built by scripts/bench-scan.py (ordinary
files ~1.1 GB and CUDA libraries ~1.8 GB, gzip) and differ in a small app layer, then prints in
one run:
  - cold cache: time and layer bytes downloaded to scan all N images (empty cache at start),
  - warm cache: the same again,
  - one image: cudalint pull+scan (no cache) vs `skopeo copy` of it to a local directory.
usage: scripts/bench-registry.py   (CUDALINT_BIN=path measures that binary)

With --store-stops it measures instead what an --analysis-store that goes away mid-run costs:
the registry of scripts/bench-registry-scale.py (--large: its large one) scanned by N shards
(--shards, default 4), each with its own cache, with no store; with a healthy store (a second
loopback registry); and with that store killed (SIGKILL: connections refused) or frozen
(SIGSTOP: connections taken, never answered) a third of the way into the run. Each shard
should notice the store once and analyse locally: the issue's bound is 1.5x the run without
a store.
usage: scripts/bench-registry.py --store-stops [--large] [--shards N]
"""
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import io
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
import importlib  # noqa: E402

bench_scan = importlib.import_module("bench-scan")
import benchlib  # noqa: E402
from benchlib import mib  # noqa: E402

root = bench_scan.root
scan_dir = bench_scan.scan_dir
N = 5


def sha(b):
    return "sha256:" + hashlib.sha256(b).hexdigest()


def app_layer(i):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        data = open(os.path.join(root, "fixtures/bin/libsm90a.so"), "rb").read()
        ti = tarfile.TarInfo(f"opt/app{i}/libapp.so")
        ti.size = len(data)
        t.addfile(ti, io.BytesIO(data))
        note = f"image {i}\n".encode()
        ti = tarfile.TarInfo(f"opt/app{i}/VERSION")
        ti.size = len(note)
        t.addfile(ti, io.BytesIO(note))
    return buf.getvalue()


def layout(dest, i):
    shutil.rmtree(dest, ignore_errors=True)
    os.makedirs(os.path.join(dest, "blobs/sha256"))
    layers, diff_ids = [], []
    for n in ["base", "cuda"]:
        blob = os.path.join(scan_dir, n + ".tar.gz")
        d = bench_scan.sha_file(blob)
        os.link(blob, os.path.join(dest, "blobs/sha256", d[7:]))
        layers.append({"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": d, "size": os.path.getsize(blob)})
        diff_ids.append(bench_scan.sha_file(os.path.join(scan_dir, n + ".tar")))
    app = app_layer(i)
    open(os.path.join(dest, "blobs/sha256", sha(app)[7:]), "wb").write(app)
    layers.append({"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": sha(app), "size": len(app)})
    diff_ids.append(sha(app))
    config = json.dumps({"architecture": "amd64", "os": "linux", "rootfs": {"type": "layers", "diff_ids": diff_ids}}).encode()
    open(os.path.join(dest, "blobs/sha256", sha(config)[7:]), "wb").write(config)
    manifest = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                           "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": sha(config), "size": len(config)},
                           "layers": layers}).encode()
    open(os.path.join(dest, "blobs/sha256", sha(manifest)[7:]), "wb").write(manifest)
    json.dump({"schemaVersion": 2, "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": sha(manifest),
                                                  "size": len(manifest), "annotations": {"org.opencontainers.image.ref.name": "latest"}}]},
              open(os.path.join(dest, "index.json"), "w"))
    open(os.path.join(dest, "oci-layout"), "w").write('{"imageLayoutVersion":"1.0.0"}')


def timed(cmd, **kw):
    t0 = time.perf_counter()
    out = subprocess.run(cmd, check=False, capture_output=True, text=True, **kw)
    if out.returncode not in (0, 1):
        raise SystemExit(f"{cmd}: {out.stderr}")
    return time.perf_counter() - t0, out


def main():
    if not os.path.exists(os.path.join(scan_dir, "cuda.tar.gz")):
        bench_scan.main()
    cudalint = benchlib.cudalint_binary(root)
    work = tempfile.mkdtemp(prefix="cudalint-bench-registry-")
    try:
        with benchlib.loopback_registry(work) as host:
            main_with(cudalint, work, host)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main_with(cudalint, work, host):
    """Pushes the images and measures."""
    for i in range(N):
        d = os.path.join(work, f"layout{i}")
        layout(d, i)
        # Keep the layers as they are (no recompression on push).
        subprocess.run(["skopeo", "--insecure-policy", "copy", "-q", "--dest-tls-verify=false", "--dest-compress=false",
                        f"oci:{d}:latest", f"docker://{host}/bench/app{i}:1"], check=True)
    total = sum(os.path.getsize(os.path.join(scan_dir, n + ".tar.gz")) for n in ["base", "cuda"])
    print(f"{N} images in a loopback registry sharing {mib(total)} of gzip layers, each with its own small app layer; "
          f"{os.cpu_count()} CPUs")
    cache = os.path.join(work, "cache")

    def run_all(label):
        t = 0.0
        down = 0
        for i in range(N):
            w, out = timed([cudalint, "scan", f"{host}/bench/app{i}:1", "--quiet", "--cache-dir", cache,
                            "--format", "inventory", "-o", os.path.join(work, "inv.json")])
            t += w
            down += json.load(open(os.path.join(work, "inv.json")))["stats"].get("downloaded_bytes", 0)
        print(f"{label:28} {t:7.2f} s   downloaded {mib(down)}")

    run_all("cold cache, all images")
    run_all("warm cache, all images")
    w1, _ = timed([cudalint, "scan", f"{host}/bench/app0:1", "--quiet", "--no-cache", "--format", "inventory", "-o", "/dev/null"])
    dest = os.path.join(work, "skopeo-dir")
    w2, _ = timed(["skopeo", "--insecure-policy", "copy", "-q", "--src-tls-verify=false", f"docker://{host}/bench/app0:1", f"dir:{dest}"])
    print(f"{'one image, cudalint pull+scan':28} {w1:7.2f} s")
    print(f"{'one image, skopeo copy to dir':28} {w2:7.2f} s   -> ratio {w1 / w2:.2f}")


def shards(cudalint, host, out, n, store=None, stop=None):
    """n shards at once, each its own cache; `stop` (seconds, signal) sends the store's
    registry that signal that long after the start. Returns (wall, summed stats, images)."""
    shutil.rmtree(out, ignore_errors=True)
    t0 = time.perf_counter()
    procs = []
    for k in range(n):
        cmd = [cudalint, "registry", host, "--quiet", "--gpu", "H100", "--cache-dir", os.path.join(out, f"cache{k}"),
               "--output-dir", os.path.join(out, f"shard{k}"), "--shard", f"{k}/{n}"]
        if store:
            cmd += ["--analysis-store", store[1], "--trust-unsigned"]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
    if stop:
        time.sleep(stop[0])
        store[0].send_signal(stop[1])
    notes = []
    for p in procs:
        _, err = p.communicate()
        if p.returncode not in (0, 1):
            raise SystemExit(f"shard: exit {p.returncode}: {err.decode()}")
        notes += [line for line in err.decode().splitlines() if "analysis store" in line]
    wall = time.perf_counter() - t0
    keys = ["layers_analysed", "store_hits", "store_lookups", "store_unreachable"]
    stats = dict.fromkeys(keys, 0)
    images = []
    for k in range(n):
        s = json.load(open(os.path.join(out, f"shard{k}", "summary.json")))
        images += s["images"]
        for key in keys:
            stats[key] += s["stats"].get(key, 0)
    return wall, stats, sorted(json.dumps(i, sort_keys=True) for i in images), notes


def store_stops(a):
    """--store-stops: see the module's docstring."""
    import signal
    scale = importlib.import_module("bench-registry-scale")
    cudalint = benchlib.cudalint_binary(root, a.cudalint)
    repos, tags = (12, 25) if a.large else (3, 17)
    work = tempfile.mkdtemp(prefix="cudalint-bench-store-")
    try:
        with benchlib.loopback_registry(work) as host:
            layout, images = scale.build(work, repos, tags)
            for ref, dest in images:
                subprocess.run(["skopeo", "--insecure-policy", "copy", "-q", "--all", "--dest-tls-verify=false",
                                "--dest-compress=false", f"oci:{layout}:{ref}", f"docker://{host}/{dest}"], check=True)
            print(f"{len(images)} images in a loopback registry; {os.cpu_count()} CPUs; {a.shards} shards, each its own "
                  f"cache; the store a second loopback registry")
            rows = []
            base, s, verdicts, _ = shards(cudalint, host, os.path.join(work, "none"), a.shards)
            rows.append(("no store", base, s, []))
            for label, sig in [("store healthy", None), ("store killed (SIGKILL) mid-run", signal.SIGKILL),
                               ("store frozen (SIGSTOP) mid-run", signal.SIGSTOP)]:
                store = benchlib.start_registry(os.path.join(work, "store-" + label.split()[1]))
                try:
                    stop = (base / 3, sig) if sig else None
                    wall, s, v, notes = shards(cudalint, host, os.path.join(work, label.split()[1]), a.shards,
                                               store=(store[0], f"{store[1]}/cudalint/analyses"), stop=stop)
                finally:
                    if sig == signal.SIGSTOP:
                        store[0].send_signal(signal.SIGCONT)
                    store[0].kill()
                    store[0].wait()
                if v != verdicts:
                    raise SystemExit(f"{label}: verdicts differ from the run without a store")
                rows.append((label, wall, s, notes))
            print()
            print("| run | wall | vs no store | layers analysed | store hits | store lookups | shards that bypassed the store |")
            print("|---|---|---|---|---|---|---|")
            for label, wall, s, _ in rows:
                print(f"| {label} | {wall:.1f} s | {wall / base:.2f}x | {s['layers_analysed']} | {s['store_hits']} "
                      f"| {s['store_lookups']} | {s['store_unreachable']} |")
            print()
            for label, _, _, notes in rows:
                for n in notes:
                    print(f"{label}: {n}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("--store-stops", action="store_true", help="measure an --analysis-store that goes away mid-run")
    ap.add_argument("--large", action="store_true", help="--store-stops: the large registry of bench-registry-scale")
    ap.add_argument("--shards", type=int, default=4)
    ap.add_argument("--cudalint", help="binary to run (default: $CUDALINT_BIN, else cargo build --release)")
    args = ap.parse_args()
    if args.store_stops:
        store_stops(args)
    else:
        main()
