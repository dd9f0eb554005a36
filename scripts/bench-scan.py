#!/usr/bin/env python3
"""Benchmark: `cudalint scan` on a large image (>= 2 GB uncompressed) against the floor.

Builds, under bench-work/scan/, an image of three layers:
  base  ordinary files of this machine's /usr (tens of thousands of files, ~1 GB),
  cuda  the CUDA libraries of the nvidia-cublas, nvidia-cudnn-cu12 and nvidia-cufft wheels,
        laid out as pip installs them (~2 GB),
  app   the fixture libraries, and a whiteout,
in three forms: an OCI layout with gzip layers, one with zstd layers, and a docker-archive
(`docker save` layout, uncompressed layers). Then prints, in one run:
  - scan wall time vs `gzip -dc` / `zstd -dc` of the same layers to /dev/null,
  - bytes read from the docker-archive vs its size, and its scan time,
  - the same docker-archive piped through standard input,
  - peak RSS of every scan;
then an image of 8 zstd `--long=27` and 8 xz `dict=128MiB` layers of 150 MB of real library
bytes each (the windows fill), scanned at --jobs 1, 4, 8 and 16: time, peak RSS, same inventory;
then an image of 6 zstd `--long=27` layers each holding a whole 1 GB library (TensorFlow 2.21's
libtensorflow_cc.so.2, from its wheel pinned by sha256: a fatbin-heavy file larger than any
window, whose tables the one-pass reader must keep), at the same --jobs.
Goals (exit 1 when one is missed): gzip <= 0.3x `gzip -dc`, zstd <= 1.0x `zstd -dc`, peak RSS
<= 256 MiB everywhere, --jobs 8 <= 1.05x --jobs 1 on the long windows.
Times are medians of 3 runs with a warm page cache. usage: scripts/bench-scan.py [--rebuild]
(CUDALINT_BIN=path measures that binary instead of building this checkout's release build.)
"""
import glob
import gzip
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile

sys.path.insert(0, os.path.dirname(__file__))
import benchlib  # noqa: E402
from benchlib import best_of, mib  # noqa: E402

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
work = os.path.join(root, "bench-work")
scan_dir = os.path.join(work, "scan")
WHEELS = ["nvidia-cublas==13.1.0.3", "nvidia-cudnn-cu12==9.10.2.21", "nvidia-cufft==12.0.0.61"]
BASE_LIMIT = 1 << 30


def sha_file(p):
    h = hashlib.sha256()
    with open(p, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return "sha256:" + h.hexdigest()


def build_layers():
    os.makedirs(os.path.join(work, "wheels"), exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "-d",
                    os.path.join(work, "wheels")] + WHEELS, check=True)
    os.makedirs(scan_dir, exist_ok=True)
    # base: ordinary files, symlinks included, up to BASE_LIMIT bytes.
    total = 0
    with tarfile.open(os.path.join(scan_dir, "base.tar"), "w", format=tarfile.PAX_FORMAT) as t:
        for top in ["/usr/share", "/usr/lib", "/usr/bin"]:
            for dirpath, dirs, files in os.walk(top):
                dirs.sort()
                for name in sorted(files):
                    p = os.path.join(dirpath, name)
                    try:
                        if total > BASE_LIMIT and not os.path.islink(p):
                            continue
                        t.add(p, arcname=p.lstrip("/"), recursive=False)
                        if not os.path.islink(p):
                            total += os.path.getsize(p)
                    except OSError:
                        pass
    # cuda: the wheels' files as pip lays them out.
    site = "usr/local/lib/python3.11/site-packages/"
    with tarfile.open(os.path.join(scan_dir, "cuda.tar"), "w", format=tarfile.PAX_FORMAT) as t:
        for whl in sorted(glob.glob(os.path.join(work, "wheels/*.whl"))):
            with zipfile.ZipFile(whl) as z:
                for info in z.infolist():
                    if info.is_dir():
                        continue
                    ti = tarfile.TarInfo(site + info.filename)
                    ti.size, ti.mode, ti.mtime = info.file_size, 0o755, 0
                    with z.open(info) as f:
                        t.addfile(ti, f)
    # app: fixture libraries, and a whiteout of a base file.
    with tarfile.open(os.path.join(scan_dir, "app.tar"), "w", format=tarfile.PAX_FORMAT) as t:
        for name in ["libmulti.so", "libsm90a.so", "libhidden.so"]:
            t.add(os.path.join(root, "fixtures/bin", name), arcname="opt/app/lib/" + name)
        ti = tarfile.TarInfo("usr/share/.wh.doc")
        t.addfile(ti)


LAYERS = ["base", "cuda", "app"]


def compress_layers():
    for n in LAYERS:
        src = os.path.join(scan_dir, n + ".tar")
        if not os.path.exists(src + ".gz"):
            with open(src + ".gz", "wb") as out:
                subprocess.run(["gzip", "-6", "-c", src], stdout=out, check=True)
        if not os.path.exists(src + ".zst"):
            subprocess.run(["zstd", "-q", "-3", "-T0", "-f", src, "-o", src + ".zst"], check=True)


def oci_layout(dest, ext, media):
    shutil.rmtree(dest, ignore_errors=True)
    os.makedirs(os.path.join(dest, "blobs/sha256"))
    diff_ids, layers = [], []
    for n in LAYERS:
        tar_p = os.path.join(scan_dir, n + ".tar")
        blob_p = tar_p + ext
        d = sha_file(blob_p)
        os.link(blob_p, os.path.join(dest, "blobs/sha256", d[7:]))
        diff_ids.append(sha_file(tar_p))
        layers.append({"mediaType": media, "digest": d, "size": os.path.getsize(blob_p)})
    return write_layout(dest, diff_ids, layers, {"Env": ["CUDA_VERSION=12.9.1"]})


def write_layout(dest, diff_ids, layers, env=None):
    """The config, manifest, index.json and oci-layout of an OCI layout whose layer blobs are in
    place under `dest`; returns the config's bytes."""
    image = {"architecture": "amd64", "os": "linux"}
    if env is not None:
        image["config"] = env
    image["rootfs"] = {"type": "layers", "diff_ids": diff_ids}
    config = json.dumps(image).encode()
    cd = "sha256:" + hashlib.sha256(config).hexdigest()
    open(os.path.join(dest, "blobs/sha256", cd[7:]), "wb").write(config)
    manifest = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                           "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": cd,
                                      "size": len(config)}, "layers": layers}).encode()
    md = "sha256:" + hashlib.sha256(manifest).hexdigest()
    open(os.path.join(dest, "blobs/sha256", md[7:]), "wb").write(manifest)
    json.dump({"schemaVersion": 2, "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json",
                                                  "digest": md, "size": len(manifest)}]},
              open(os.path.join(dest, "index.json"), "w"))
    open(os.path.join(dest, "oci-layout"), "w").write('{"imageLayoutVersion":"1.0.0"}')
    return config


def docker_archive(dest, config):
    with tarfile.open(dest, "w") as t:
        names = []
        for i, n in enumerate(LAYERS):
            name = f"{i:064x}/layer.tar"
            t.add(os.path.join(scan_dir, n + ".tar"), arcname=name)
            names.append(name)
        cfg = hashlib.sha256(config).hexdigest() + ".json"
        ti = tarfile.TarInfo(cfg)
        ti.size = len(config)
        t.addfile(ti, __import__("io").BytesIO(config))
        m = json.dumps([{"Config": cfg, "RepoTags": ["bench:latest"], "Layers": names}]).encode()
        ti = tarfile.TarInfo("manifest.json")
        ti.size = len(m)
        t.addfile(ti, __import__("io").BytesIO(m))


def stats_of(cmd, stdin=None):
    env = dict(os.environ, CUDALINT_STATS="1")
    out = subprocess.run(cmd, env=env, stdin=open(stdin, "rb") if stdin else None,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=True).stderr
    return int(__import__("re").search(r"cudalint-stats: rchar=(\d+)", out).group(1))


def main():
    if "--rebuild" in sys.argv:
        shutil.rmtree(scan_dir, ignore_errors=True)
    if not os.path.exists(os.path.join(scan_dir, "app.tar")):
        print("building the image layers ...", file=sys.stderr)
        build_layers()
    compress_layers()
    config = oci_layout(os.path.join(scan_dir, "oci-gzip"), ".gz", "application/vnd.oci.image.layer.v1.tar+gzip")
    oci_layout(os.path.join(scan_dir, "oci-zstd"), ".zst", "application/vnd.oci.image.layer.v1.tar+zstd")
    archive = os.path.join(scan_dir, "docker-archive.tar")
    if not os.path.exists(archive):
        docker_archive(archive, config)
    cudalint = benchlib.cudalint_binary(root)

    size = {n: os.path.getsize(os.path.join(scan_dir, n + ".tar")) for n in LAYERS}
    print(f"image: {len(LAYERS)} layers, {mib(sum(size.values()))} uncompressed "
          f"({', '.join(f'{n} {mib(s)}' for n, s in size.items())}); {os.cpu_count()} CPUs")
    rows, missed = [], []
    for kind, ext, tool in [("gzip", ".gz", ["gzip", "-dc"]), ("zstd", ".zst", ["zstd", "-dc"])]:
        floor = 0.0
        for n in LAYERS:
            w, _ = best_of(3, tool + [os.path.join(scan_dir, n + ".tar" + ext)])
            floor += w
        w, rss = best_of(3, [cudalint, "scan", "--quiet", "--gpu", "H100", "--format", "json", "-o", "/dev/null",
                             "oci:" + os.path.join(scan_dir, "oci-" + kind)])
        rows.append((f"scan oci ({kind})", w, rss, f"{' '.join(tool)} of the layers: {floor:.2f} s -> ratio {w / floor:.2f}"))
        show(rows[-1])
        goal = {"gzip": 0.3, "zstd": 1.0}[kind]
        if w / floor > goal:
            missed.append(f"scan oci ({kind}): {w / floor:.2f}x the decompressor, goal <= {goal}x")
    asize = os.path.getsize(archive)
    w, rss = best_of(3, [cudalint, "scan", "--quiet", "--gpu", "H100", "--format", "json", "-o", "/dev/null", archive])
    read = stats_of([cudalint, "scan", "--quiet", "--gpu", "H100", "--format", "json", "-o", "/dev/null", archive])
    rows.append(("scan docker-archive", w, rss, f"read {mib(read)} of {mib(asize)} = {100 * read / asize:.1f}%"))
    show(rows[-1])
    w, rss = best_of(3, [cudalint, "scan", "--quiet", "--gpu", "H100", "--format", "json", "-o", "/dev/null", "-"], stdin=archive)
    rows.append(("scan - < docker-archive", w, rss, "one pass over standard input"))
    show(rows[-1])
    w2, rss2 = best_of(3, [cudalint, "scan", "--quiet", "--gpu", "H100", "--verify", "always", "--format", "json", "-o", "/dev/null", archive])
    rows.append(("scan docker-archive --verify always", w2, rss2, "every layer hashed"))
    show(rows[-1])
    for name, _, rss, _ in rows:
        if rss > 256 << 20:
            missed.append(f"{name}: peak RSS {mib(rss)} > 256 MiB")
    long_windows(cudalint, missed)
    big_libraries(cudalint, missed)
    for m in missed:
        print(f"goal missed: {m}", file=sys.stderr)
    sys.exit(1 if missed else 0)


LONG = 8  # layers of each kind
SLICE = 150_000_000


def long_window_layout():
    """16 layers whose windows fill: slices of the largest library of the cuda layer."""
    dest = os.path.join(work, "long")
    if os.path.exists(os.path.join(dest, "index.json")):
        return dest
    shutil.rmtree(dest, ignore_errors=True)
    os.makedirs(os.path.join(dest, "blobs/sha256"))
    with tarfile.open(os.path.join(scan_dir, "cuda.tar")) as t:
        big = max((m for m in t.getmembers() if m.isfile()), key=lambda m: m.size)
        data = t.extractfile(big).read()
    diff_ids, layers = [], []
    for i in range(2 * LONG):
        at = (i * 37_000_000) % max(1, len(data) - SLICE)
        chunk = data[at:at + SLICE]
        bio = __import__("io").BytesIO()
        with tarfile.open(fileobj=bio, mode="w", format=tarfile.PAX_FORMAT) as t:
            ti = tarfile.TarInfo(f"opt/long/part{i:02}.bin")
            ti.size = len(chunk)
            t.addfile(ti, __import__("io").BytesIO(chunk))
        tar_b = bio.getvalue()
        diff_ids.append("sha256:" + hashlib.sha256(tar_b).hexdigest())
        if i % 2 == 0:  # from a pipe: the content size unknown, the whole window declared
            cmd, media = ["zstd", "-q", "-1", "--long=27", "-T2", "-c"], "application/vnd.oci.image.layer.v1.tar+zstd"
        else:
            cmd, media = ["xz", "-q", "-T2", "--lzma2=preset=0,dict=128MiB", "-c"], "application/vnd.oci.image.layer.v1.tar+gzip"
        blob = subprocess.run(cmd, input=tar_b, capture_output=True, check=True).stdout
        d = "sha256:" + hashlib.sha256(blob).hexdigest()
        open(os.path.join(dest, "blobs/sha256", d[7:]), "wb").write(blob)
        layers.append({"mediaType": media, "digest": d, "size": len(blob)})
    write_layout(dest, diff_ids, layers)
    return dest


def long_windows(cudalint, missed):
    dest = long_window_layout()
    print(f"long windows: {LONG} zstd --long=27 and {LONG} xz dict=128MiB layers of {mib(SLICE)} each", flush=True)
    times, outputs = {}, set()
    for jobs in [1, 4, 8, 16]:
        cmd = [cudalint, "scan", "--quiet", "--jobs", str(jobs), "--format", "inventory", "-o", "/dev/null", "oci:" + dest]
        w, rss = best_of(3, cmd)
        inv = subprocess.run(cmd[:-3] + ["oci:" + dest], capture_output=True, check=True).stdout
        outputs.add(hashlib.sha256(inv).hexdigest())
        times[jobs] = w
        show((f"scan long windows --jobs {jobs}", w, rss, ""))
        if rss > 256 << 20:
            missed.append(f"long windows --jobs {jobs}: peak RSS {mib(rss)} > 256 MiB")
    if len(outputs) != 1:
        missed.append("long windows: the inventory differs between --jobs values")
    if times[8] > 1.05 * times[1]:
        missed.append(f"long windows: --jobs 8 took {times[8]:.2f} s, over 1.05x --jobs 1 ({times[1]:.2f} s)")


BIG = 6  # layers, each a whole >= 800 MB library
TF_WHEEL = ("tensorflow==2.21.0 --hash=sha256:9056fbc9ba04235810b71ae6cbd958a196e8804fb53bbcffbf3e23b56155f124",
            "tensorflow/libtensorflow_cc.so.2")


def big_library_layout():
    """BIG zstd --long=27 layers (from a pipe: the whole 128 MiB window declared), each holding
    TensorFlow's 1 GB libtensorflow_cc.so.2 under its own path, streamed from the wheel."""
    dest = os.path.join(work, "big")
    if os.path.exists(os.path.join(dest, "index.json")):
        return dest
    wheels = os.path.join(work, "wheels-big")
    os.makedirs(wheels, exist_ok=True)
    req = os.path.join(wheels, "requirements.txt")
    open(req, "w").write(TF_WHEEL[0] + "\n")
    if not glob.glob(os.path.join(wheels, "tensorflow-*.whl")):
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
                        "--platform", "manylinux_2_27_x86_64", "--python-version", "3.11", "--require-hashes",
                        "-r", req, "-d", wheels], check=True)
    whl = glob.glob(os.path.join(wheels, "tensorflow-*.whl"))[0]
    shutil.rmtree(dest, ignore_errors=True)
    os.makedirs(os.path.join(dest, "blobs/sha256"))
    diff_ids, layers = [], []
    for i in range(BIG):
        tar_p = os.path.join(dest, "layer.tar")
        with zipfile.ZipFile(whl) as z, tarfile.open(tar_p, "w", format=tarfile.PAX_FORMAT) as t:
            info = z.getinfo(TF_WHEEL[1])
            ti = tarfile.TarInfo(f"opt/big{i}/libtensorflow_cc.so.2")
            ti.size, ti.mode = info.file_size, 0o755
            with z.open(info) as f:
                t.addfile(ti, f)
        diff_ids.append(sha_file(tar_p))
        blob_p = os.path.join(dest, "blob")
        with open(tar_p, "rb") as src, open(blob_p, "wb") as out:
            subprocess.run(["zstd", "-q", "-1", "--long=27", "-T2", "-c"], stdin=src, stdout=out, check=True)
        d = sha_file(blob_p)
        os.rename(blob_p, os.path.join(dest, "blobs/sha256", d[7:]))
        layers.append({"mediaType": "application/vnd.oci.image.layer.v1.tar+zstd", "digest": d,
                       "size": os.path.getsize(os.path.join(dest, "blobs/sha256", d[7:]))})
        os.remove(tar_p)
    write_layout(dest, diff_ids, layers)
    return dest


def big_libraries(cudalint, missed):
    dest = big_library_layout()
    print(f"big libraries: {BIG} zstd --long=27 layers, each a whole 1 GB library", flush=True)
    outputs = set()
    for jobs in [1, 4, 8, 16]:
        cmd = [cudalint, "scan", "--quiet", "--jobs", str(jobs), "--format", "inventory", "-o", "/dev/null", "oci:" + dest]
        w, rss = best_of(3, cmd)
        inv = subprocess.run(cmd[:-3] + ["oci:" + dest], capture_output=True, check=True).stdout
        outputs.add(hashlib.sha256(inv).hexdigest())
        show((f"scan big libraries --jobs {jobs}", w, rss, ""))
        if rss > 256 << 20:
            missed.append(f"big libraries --jobs {jobs}: peak RSS {mib(rss)} > 256 MiB")
    if len(outputs) != 1:
        missed.append("big libraries: the inventory differs between --jobs values")


def show(row):
    name, w, rss, note = row
    print(f"{name:38} {w:7.2f} s  peak RSS {mib(rss):>10}  {note}", flush=True)


if __name__ == "__main__":
    main()
