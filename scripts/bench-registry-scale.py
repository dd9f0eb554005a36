#!/usr/bin/env python3
"""Benchmark: registry-wide scans split over shards, with and without a shared layer cache.

Builds a synthetic registry on loopback (CNCF distribution, Debian package docker-registry;
images pushed with skopeo) of many repositories and tags over shared real layers:
  - an "os" layer (ordinary files) and a "cuda" layer (the real CUDA fixture binaries from
    fixtures/bin, copied under several directories), shared by every image;
  - a "framework" layer per repository (real fixture libraries), shared by its tags;
  - a small app layer per tag (a real fixture library and a VERSION file);
  - plus multi-arch indexes (amd64 and arm64 manifests).
The default registry is 3 repositories x 17 tags + 2 indexes (53 images); --large makes it 12
repositories x 25 tags + 2 indexes (302 images).

Then it runs `cudalint registry` as: 1 process; N shards each with its own cache (pods on
different nodes); N shards sharing one cache directory (a shared volume), all shards started at
once; N shards each with its own cache sharing analyses through the registry
(--analysis-store), and prints per run: wall time, CPU time of all processes together, layers pulled and
layers analysed (summed from the shards' summary.json `stats`), and the unique layers.
usage: scripts/bench-registry-scale.py [--large] [--shards N]
"""
import argparse
import gzip
import hashlib
import io
import json
import os
import random
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
bin_dir = os.path.join(root, "fixtures/bin")


def sha(b):
    return "sha256:" + hashlib.sha256(b).hexdigest()


def tar_of(entries):
    """entries: [(path, bytes)] -> deterministic tar bytes"""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for path, data in sorted(entries):
            ti = tarfile.TarInfo(path)
            ti.size = len(data)
            ti.mtime = 1700000000
            ti.mode = 0o755
            t.addfile(ti, io.BytesIO(data))
    return buf.getvalue()


def gz(b):
    return gzip.compress(b, compresslevel=6, mtime=0)


def fixture_libs():
    names = sorted(n for n in os.listdir(bin_dir) if n.endswith((".so", ".cubin", ".fatbin")) and "damaged" not in n)
    return [(n, open(os.path.join(bin_dir, n), "rb").read()) for n in names]


class Layout:
    """One OCI layout holding every image; each pushed by its ref name."""

    def __init__(self, d):
        self.d = d
        os.makedirs(os.path.join(d, "blobs/sha256"), exist_ok=True)
        open(os.path.join(d, "oci-layout"), "w").write('{"imageLayoutVersion":"1.0.0"}')
        self.refs = []
        self.compressed = {}

    def blob(self, b):
        p = os.path.join(self.d, "blobs/sha256", sha(b)[7:])
        if not os.path.exists(p):
            open(p, "wb").write(b)
        return {"digest": sha(b), "size": len(b)}

    def manifest(self, arch, layers):
        """layers: [(tar bytes, gzip?)] -> manifest bytes"""
        descs, diff_ids = [], []
        for t, comp in layers:
            # Shared layers are compressed once (gzip of the big ones dominates the build).
            key = (sha(t), comp)
            if key not in self.compressed:
                self.compressed[key] = gz(t) if comp else t
            b = self.compressed[key]
            d = self.blob(b)
            d["mediaType"] = "application/vnd.oci.image.layer.v1.tar" + ("+gzip" if comp else "")
            descs.append(d)
            diff_ids.append(sha(t))
        config = json.dumps({"architecture": arch, "os": "linux", "rootfs": {"type": "layers", "diff_ids": diff_ids}}).encode()
        c = self.blob(config)
        c["mediaType"] = "application/vnd.oci.image.config.v1+json"
        m = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json", "config": c,
                        "layers": descs}).encode()
        self.blob(m)
        return m

    def ref(self, name, doc, media_type):
        self.refs.append({"mediaType": media_type, "digest": sha(doc), "size": len(doc),
                          "annotations": {"org.opencontainers.image.ref.name": name}})

    def save(self):
        json.dump({"schemaVersion": 2, "manifests": self.refs}, open(os.path.join(self.d, "index.json"), "w"))


def build(work, repos, tags):
    rnd = random.Random(13)
    libs = fixture_libs()
    words = [f"w{i:04d}" for i in range(5000)]
    os_files = [(f"usr/share/doc/pkg{i:03d}/README", " ".join(rnd.choice(words) for _ in range(12000)).encode())
                for i in range(300)]
    os_layer = tar_of(os_files)
    cuda_layer = tar_of([(f"usr/local/cuda/lib{k}/{n}", b) for k in range(24) for n, b in libs])
    lay = Layout(os.path.join(work, "layout"))
    images = []
    for r in range(repos):
        repo = f"team{r}/trainer"
        fw = tar_of([(f"opt/fw{r}/lib{k}/{n}", b) for k in range(4) for n, b in libs[: 6 + r % 5]])
        for t in range(tags):
            app = tar_of([(f"opt/app/{libs[(r + t) % len(libs)][0]}", libs[(r + t) % len(libs)][1]),
                          ("opt/app/VERSION", f"{repo} {t}\n".encode())])
            m = lay.manifest("amd64", [(os_layer, True), (cuda_layer, True), (fw, True), (app, False)])
            name = f"r{r}-t{t}"
            lay.ref(name, m, "application/vnd.oci.image.manifest.v1+json")
            images.append((name, f"{repo}:1.{t}"))
    for i in range(2):
        ms = []
        for arch in ["amd64", "arm64"]:
            app = tar_of([("opt/multi/VERSION", f"multi {i} {arch}\n".encode()), (f"opt/multi/{libs[i][0]}", libs[i][1])])
            m = lay.manifest(arch, [(os_layer, True), (cuda_layer, True), (app, False)])
            ms.append({"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": sha(m), "size": len(m),
                       "platform": {"architecture": arch, "os": "linux"}})
        idx = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": ms}).encode()
        lay.blob(idx)
        lay.ref(f"multi{i}", idx, "application/vnd.oci.image.index.v1+json")
        images.append((f"multi{i}", f"multi/app:{i}"))
    lay.save()
    return lay.d, images


def run_shards(cudalint, host, work, label, n, shared, store=None):
    """Starts n shards at once (n == 1: one unsharded process); returns the row. store: an
    --analysis-store repository (then every shard has its own cache)."""
    out = os.path.join(work, label)
    shutil.rmtree(out, ignore_errors=True)
    procs = []
    t0 = time.perf_counter()
    for k in range(n):
        cache = os.path.join(out, "cache" if shared else f"cache{k}")
        cmd = [cudalint, "registry", host, "--quiet", "--gpu", "H100", "--cache-dir", cache,
               "--output-dir", os.path.join(out, f"shard{k}")]
        if n > 1:
            cmd += ["--shard", f"{k}/{n}"]
        if store:
            # Signed and verified, as shards sharing a store run (docs/trust.md).
            cmd += ["--analysis-store", store, "--sign-key", os.path.join(work, "sign.key"),
                    "--verify-key", os.path.join(work, "sign.pub")]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
    cpu = 0.0
    for p in procs:
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        cpu += usage.ru_utime + usage.ru_stime
        if p.returncode not in (0, 1):
            raise SystemExit(f"{label}: exit {p.returncode}: {p.stderr.read().decode()}")
    wall = time.perf_counter() - t0
    stats = {"layers_pulled": 0, "layers_analysed": 0, "lock_waits": 0, "stale_locks": 0, "store_hits": 0,
             "store_claim_waits": 0}
    images = 0
    for k in range(n):
        s = json.load(open(os.path.join(out, f"shard{k}", "summary.json")))
        images += len(s["images"])
        for key in stats:
            stats[key] += s.get("stats", {}).get(key, 0)
    return label, wall, cpu, images, stats


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--large", action="store_true", help="12 repositories x 25 tags instead of 3 x 17")
    ap.add_argument("--shards", type=int, default=4)
    ap.add_argument("--cudalint", help="binary to run (default: cargo build --release)")
    a = ap.parse_args()
    repos, tags = (12, 25) if a.large else (3, 17)
    cudalint = benchlib.cudalint_binary(root, a.cudalint)
    work = tempfile.mkdtemp(prefix="cudalint-bench-scale-")
    try:
        with benchlib.loopback_registry(work) as host:
            measure(a, cudalint, work, host, repos, tags)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def measure(a, cudalint, work, host, repos, tags):
    """Pushes the images and runs the shard configurations."""
    layout, images = build(work, repos, tags)
    key = os.path.join(work, "sign.key")
    subprocess.run(["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", key], check=True)
    subprocess.run(["openssl", "pkey", "-in", key, "-pubout", "-out", os.path.join(work, "sign.pub")], check=True)
    for ref, dest in images:
        # Layers kept as built (no recompression), so digests are the layout's.
        subprocess.run(["skopeo", "--insecure-policy", "copy", "-q", "--all", "--dest-tls-verify=false",
                        "--dest-compress=false", f"oci:{layout}:{ref}", f"docker://{host}/{dest}"], check=True)
    blobs = sum(os.path.getsize(os.path.join(layout, "blobs/sha256", b)) for b in os.listdir(os.path.join(layout, "blobs/sha256")))
    print(f"{len(images)} images ({repos} repositories x {tags} tags + 2 multi-arch indexes) in a loopback registry, "
          f"{blobs / (1 << 20):.1f} MiB of blobs; {os.cpu_count()} CPUs; {a.shards} shards")
    rows = [run_shards(cudalint, host, work, "1 process", 1, True),
            run_shards(cudalint, host, work, f"{a.shards} shards, own caches", a.shards, False),
            run_shards(cudalint, host, work, f"{a.shards} shards, shared dir", a.shards, True),
            run_shards(cudalint, host, work, f"{a.shards} shards, own caches + registry store", a.shards, False,
                       store=f"{host}/cudalint/analyses")]
    unique = rows[0][4]["layers_analysed"]
    print(f"unique layers (one process, one cache): {unique}")
    print()
    print("| run | wall | CPU (all processes) | images | layers pulled | layers analysed | lock / claim waits "
          "| store hits |")
    print("|---|---|---|---|---|---|---|---|")
    for label, wall, cpu, n, s in rows:
        print(f"| {label} | {wall:.1f} s | {cpu:.1f} s | {n} | {s['layers_pulled']} | {s['layers_analysed']} "
              f"| {s['lock_waits'] + s['store_claim_waits']} | {s['store_hits']} |")


if __name__ == "__main__":
    main()
