#!/usr/bin/env python3
"""Build fixtures/demo/demo-image.tar: a `docker save`-style archive (Docker 25+ layout: OCI
blobs plus manifest.json) of a small CUDA application image made from the real fixture libraries.

Layer 1 (gzip): CUDA 12.9 runtime (the real libcudart from the nvidia-cuda-runtime-cu12 wheel,
with its SONAME symlinks), the app's libraries, and a driver library that should not be there.
Layer 2 (plain tar): deletes libdebug.so with a whiteout, adds libsm100f.so.
Deterministic: fixed mtimes, sorted entries, gzip without a timestamp.
"""
import gzip
import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
bin_dir = os.path.join(root, "fixtures/bin")
tools = subprocess.run([os.path.join(root, "scripts/fetch-cuda-tools.sh")], check=True,
                       capture_output=True, text=True).stdout.strip()
cudart = os.path.join(tools, "cu12/nvidia/cuda_runtime/lib/libcudart.so.12")
out = os.path.join(root, "fixtures/demo/demo-image.tar")


def layer(entries):
    """entries: (path, kind, data_or_target) -> uncompressed tar bytes"""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for path, kind, data in entries:
            ti = tarfile.TarInfo(path)
            ti.mtime = 0
            ti.uid = ti.gid = 0
            if kind == "dir":
                ti.type, ti.mode = tarfile.DIRTYPE, 0o755
                t.addfile(ti)
            elif kind == "link":
                ti.type, ti.linkname, ti.mode = tarfile.SYMTYPE, data, 0o777
                t.addfile(ti)
            else:
                ti.size, ti.mode = len(data), 0o755 if kind == "exe" else 0o644
                t.addfile(ti, io.BytesIO(data))
    return buf.getvalue()


def fixture(name):
    with open(os.path.join(bin_dir, name), "rb") as f:
        return f.read()


with open(cudart, "rb") as f:
    cudart_bytes = f.read()

l1 = layer([
    ("usr", "dir", None), ("usr/local", "dir", None), ("usr/local/cuda", "dir", None),
    ("usr/local/cuda/lib64", "dir", None),
    ("usr/local/cuda/lib64/libcudart.so", "link", "libcudart.so.12"),
    ("usr/local/cuda/lib64/libcudart.so.12", "link", "libcudart.so.12.9.79"),
    ("usr/local/cuda/lib64/libcudart.so.12.9.79", "file", cudart_bytes),
    ("usr/lib", "dir", None), ("usr/lib/x86_64-linux-gnu", "dir", None),
    # A host-only ELF under the driver's file name: images must not ship the driver.
    ("usr/lib/x86_64-linux-gnu/libcuda.so.1", "link", "libcuda.so.535.104.05"),
    ("usr/lib/x86_64-linux-gnu/libcuda.so.535.104.05", "file", fixture("libplain.so")),
    ("opt", "dir", None), ("opt/app", "dir", None), ("opt/app/lib", "dir", None),
    ("opt/app/lib/libdebug.so", "exe", fixture("libdebug.so")),
    ("opt/app/lib/libhidden.so", "exe", fixture("libhidden.so")),
    ("opt/app/lib/libsm90a.so", "exe", fixture("libsm90a.so")),
    ("opt/app/lib/libstatic.a", "file", fixture("libstatic.a")),
])
l2 = layer([
    ("opt", "dir", None), ("opt/app", "dir", None), ("opt/app/lib", "dir", None),
    ("opt/app/lib/.wh.libdebug.so", "file", b""),
    ("opt/app/lib/libsm100f.so", "exe", fixture("libsm100f.so")),
])
l1_gz = gzip.compress(l1, compresslevel=9, mtime=0)


def sha(b):
    return "sha256:" + hashlib.sha256(b).hexdigest()


config = {
    "architecture": "amd64",
    "os": "linux",
    "config": {
        "Env": [
            "PATH=/usr/local/cuda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "CUDA_VERSION=12.9.1",
            "NV_CUDA_CUDART_VERSION=12.9.79-1",
            "NVIDIA_REQUIRE_CUDA=cuda>=12.9 brand=tesla,driver>=535,driver<536",
            "NVIDIA_VISIBLE_DEVICES=all",
            "LD_LIBRARY_PATH=/usr/local/cuda/lib64:/opt/app/lib",
        ],
        "Cmd": ["/bin/sh"],
    },
    "rootfs": {"type": "layers", "diff_ids": [sha(l1), sha(l2)]},
    "history": [{"created_by": "COPY cuda runtime and app"}, {"created_by": "RUN rm libdebug.so; COPY libsm100f.so"}],
}
config_bytes = json.dumps(config, sort_keys=True, separators=(",", ":")).encode()
manifest = {
    "schemaVersion": 2,
    "mediaType": "application/vnd.oci.image.manifest.v1+json",
    "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": sha(config_bytes), "size": len(config_bytes)},
    "layers": [
        {"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": sha(l1_gz), "size": len(l1_gz)},
        {"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": sha(l2), "size": len(l2)},
    ],
}
manifest_bytes = json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode()
index = {
    "schemaVersion": 2,
    "mediaType": "application/vnd.oci.image.index.v1+json",
    "manifests": [{
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "digest": sha(manifest_bytes), "size": len(manifest_bytes),
        "annotations": {"io.containerd.image.name": "docker.io/library/cudalint-demo:latest",
                        "org.opencontainers.image.ref.name": "latest"},
    }],
}
docker_manifest = [{
    "Config": "blobs/sha256/" + sha(config_bytes)[7:],
    "RepoTags": ["cudalint-demo:latest"],
    "Layers": ["blobs/sha256/" + sha(l1_gz)[7:], "blobs/sha256/" + sha(l2)[7:]],
}]

members = [
    ("blobs", "dir", None), ("blobs/sha256", "dir", None),
    ("blobs/sha256/" + sha(config_bytes)[7:], "file", config_bytes),
    ("blobs/sha256/" + sha(l1_gz)[7:], "file", l1_gz),
    ("blobs/sha256/" + sha(l2)[7:], "file", l2),
    ("blobs/sha256/" + sha(manifest_bytes)[7:], "file", manifest_bytes),
    ("index.json", "file", json.dumps(index, sort_keys=True).encode()),
    ("manifest.json", "file", json.dumps(docker_manifest, sort_keys=True).encode()),
    ("oci-layout", "file", b'{"imageLayoutVersion":"1.0.0"}'),
]
with open(out, "wb") as f:
    f.write(layer(members))
print(out, os.path.getsize(out), file=sys.stderr)
