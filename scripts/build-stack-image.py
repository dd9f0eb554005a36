#!/usr/bin/env python3
"""Build an OCI image layout whose one layer is a Python stack exactly as `pip install` lays it
out under /usr/local: every wheel of a pinned dependency closure (name==version --hash=sha256:…
lines, as pip's --require-hashes takes them), fetched from PyPI by scripts/fetch-test-wheels.sh
conventions (cached, verified by pip), unpacked into site-packages with pip's scheme (purelib and
platlib to site-packages, `.data/scripts` to bin, `.data/data` to the prefix, `.data/headers`
to include), with pip's INSTALLER file. Members are streamed from the wheels into the layer, so
a 1 GB library is never held in memory and never unpacked to disk.

Deterministic (sorted entries, mtime 0, uid/gid 0, PAX); idempotent: a layout whose stamp names
the same closure is kept as is.

Usage: build-stack-image.py CLOSURE.txt OUT_DIR [--python 3.11] [--env K=V ...]
Prints OUT_DIR. Fails loudly when PyPI cannot be reached or a hash does not match.
"""
import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile

BUF = 4 << 20


class HashingWriter:
    def __init__(self, f):
        self.f, self.h, self.n = f, hashlib.sha256(), 0

    def write(self, b):
        self.h.update(b)
        self.n += len(b)
        return self.f.write(b)

    def tell(self):
        return self.n

    def flush(self):
        self.f.flush()


def sha(b):
    return "sha256:" + hashlib.sha256(b).hexdigest()


def fetch(closure, wheels, python="3.11"):
    """The closure's wheels in `wheels` (pip verifies each hash), as paths."""
    os.makedirs(wheels, exist_ok=True)
    reqs = [l.split()[0] for l in open(closure) if l.strip() and not l.startswith("#")]
    def present(req):
        name, version = req.split("==")
        stem = name.replace("-", "_").lower() + "-" + version + "-"
        return [os.path.join(wheels, w) for w in os.listdir(wheels) if w.lower().startswith(stem) and w.endswith(".whl")]
    missing = [r for r in reqs if not present(r)]
    if missing:
        cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--no-deps",
               "--only-binary=:all:", "--python-version", python, "--implementation", "cp",
               "--abi", "cp" + python.replace(".", ""),
               "--require-hashes", "-r", closure, "-d", wheels]
        # pip takes the tags it is given literally: every glibc level a wheel may be tagged with.
        # (vLLM 0.20 ships manylinux_2_35 only; cryptography 50 manylinux_2_34.)
        for n in range(35, 4, -1):
            cmd += ["--platform", f"manylinux_2_{n}_x86_64"]
        for legacy in ("manylinux2014", "manylinux2010", "manylinux1"):
            cmd += ["--platform", f"{legacy}_x86_64"]
        cmd += ["--platform", "any"]
        if subprocess.run(cmd).returncode != 0:
            raise SystemExit(f"build-stack-image: could not download the pinned wheels of {closure} from PyPI (see above)")
    out = []
    for r in reqs:
        p = present(r)
        if len(p) != 1:
            raise SystemExit(f"build-stack-image: expected one wheel for {r} in {wheels}, found {p}")
        out.append(p[0])
    return out


def entries(wheel, site, prefix, python):
    """(path in the layer, ZipInfo) for every member, by pip's install scheme."""
    z = zipfile.ZipFile(wheel)
    data = None
    for i in z.infolist():
        top = i.filename.split("/", 1)[0]
        if top.endswith(".data"):
            data = top
    for i in z.infolist():
        if i.is_dir():
            continue
        name = i.filename
        if data and name.startswith(data + "/"):
            kind, rest = name[len(data) + 1:].split("/", 1)
            dest = {"purelib": site, "platlib": site, "scripts": prefix + "/bin", "data": prefix,
                    "headers": f"{prefix}/include/python{python}/" + data[: -len(".data")].split("-")[0]}[kind]
            yield dest + "/" + rest, z, i
        else:
            yield site + "/" + name, z, i
        if name.endswith(".dist-info/RECORD"):
            yield site + "/" + name[: -len("RECORD")] + "INSTALLER", None, b"pip\n"


def write_layer(wheels, fileobj, python):
    prefix = "usr/local"
    site = f"{prefix}/lib/python{python}/site-packages"
    files = {}
    for w in wheels:
        for path, z, info in entries(w, site, prefix, python):
            files[path] = (z, info)
    dirs = set()
    for p in files:
        parts = p.split("/")
        for n in range(1, len(parts)):
            dirs.add("/".join(parts[:n]))
    with tarfile.open(fileobj=fileobj, mode="w", format=tarfile.PAX_FORMAT, bufsize=BUF) as t:
        for p in sorted(set(files) | dirs, key=lambda s: s.encode()):
            ti = tarfile.TarInfo(p)
            ti.mtime, ti.uid, ti.gid, ti.uname, ti.gname = 0, 0, 0, "", ""
            if p in dirs and p not in files:
                ti.type, ti.mode = tarfile.DIRTYPE, 0o755
                t.addfile(ti)
                continue
            z, info = files[p]
            if z is None:
                ti.size, ti.mode = len(info), 0o644
                t.addfile(ti, __import__("io").BytesIO(info))
                continue
            mode = (info.external_attr >> 16) & 0o777
            ti.mode = 0o755 if mode & 0o111 else 0o644
            ti.size = info.file_size
            with z.open(info) as f:
                t.addfile(ti, f)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("closure")
    ap.add_argument("out")
    ap.add_argument("--python", default="3.11")
    ap.add_argument("--env", action="append", default=[])
    ap.add_argument("--wheels", default=os.environ.get("CUDALINT_WHEELS"))
    a = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    wheels_dir = a.wheels or os.path.join(root, ".tools/wheels")
    stamp = hashlib.sha256((open(a.closure).read() + repr((a.python, a.env))).encode()).hexdigest()
    stamp_file = os.path.join(a.out, ".stamp")
    if os.path.exists(stamp_file) and open(stamp_file).read() == stamp:
        print(a.out)
        return
    wheels = fetch(a.closure, wheels_dir, a.python)
    shutil.rmtree(a.out, ignore_errors=True)
    blobs = os.path.join(a.out, "blobs", "sha256")
    os.makedirs(blobs)
    tmp = os.path.join(blobs, ".layer.partial")
    with open(tmp, "wb") as f:
        hw = HashingWriter(f)
        write_layer(wheels, hw, a.python)
        hw.flush()
    layer_hex, layer_size = hw.h.hexdigest(), hw.n
    os.rename(tmp, os.path.join(blobs, layer_hex))
    names = [os.path.basename(w).split("-")[0] + "==" + os.path.basename(w).split("-")[1] for w in wheels]
    config = {
        "architecture": "amd64", "os": "linux",
        "config": {"Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"] + a.env},
        "rootfs": {"type": "layers", "diff_ids": ["sha256:" + layer_hex]},
        "history": [{"created_by": "RUN pip install " + " ".join(names)}],
    }
    cb = json.dumps(config, sort_keys=True, separators=(",", ":")).encode()
    manifest = {
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": sha(cb), "size": len(cb)},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": "sha256:" + layer_hex,
                    "size": layer_size}],
    }
    mb = json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode()
    for b in (cb, mb):
        with open(os.path.join(blobs, hashlib.sha256(b).hexdigest()), "wb") as f:
            f.write(b)
    index = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
             "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": sha(mb),
                            "size": len(mb), "annotations": {"org.opencontainers.image.ref.name": "latest"}}]}
    with open(os.path.join(a.out, "index.json"), "w") as f:
        json.dump(index, f, sort_keys=True)
    with open(os.path.join(a.out, "oci-layout"), "w") as f:
        json.dump({"imageLayoutVersion": "1.0.0"}, f)
    with open(stamp_file, "w") as f:
        f.write(stamp)
    print(a.out)


if __name__ == "__main__":
    main()
