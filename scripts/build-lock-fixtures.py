#!/usr/bin/env python3
"""Build fixtures/lock: two small wheels of real nvcc-built libraries from fixtures/bin, and, for
each, a PEP 751 lockfile (`pylock.toml`, `pylock.next.toml`: wheels by relative `path`, with size
and sha256, as PEP 751 allows) and a requirements file in pip's hash-checking mode
(`--find-links wheels`). These are the README's offline demo; the tests also run lockfiles the real
uv and pip write against a loopback index (tests/it/lock.rs).

demo-kernels 1.0.0 carries libmulti.so (sm_75 ... sm_90 and compute_90 PTX); 1.1.0 carries
libsm100f.so (Blackwell only): upgrading from one to the other drops every pre-Blackwell GPU,
which `cudalint diff` shows. Deterministic wheels (sorted members, fixed dates).

Usage: scripts/build-lock-fixtures.py
"""
import base64
import hashlib
import os
import shutil
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "fixtures", "lock")
TAG = "py3-none-manylinux_2_28_x86_64"


def record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def wheel(version, libs):
    dist = f"demo_kernels-{version}"
    path = os.path.join(OUT, "wheels", f"{dist}-{TAG}.whl")
    members = {"demo_kernels/__init__.py": b'"""Kernels for the cudalint lockfile demo."""\n'}
    for lib in libs:
        members[f"demo_kernels/{lib}"] = open(os.path.join(ROOT, "fixtures", "bin", lib), "rb").read()
    members[f"{dist}.dist-info/METADATA"] = (
        f"Metadata-Version: 2.1\nName: demo-kernels\nVersion: {version}\nRequires-Python: >=3.9\n"
    ).encode()
    members[f"{dist}.dist-info/WHEEL"] = f"Wheel-Version: 1.0\nGenerator: cudalint-fixtures\nRoot-Is-Purelib: false\nTag: {TAG}\n".encode()
    rec = [record_line(n, d) for n, d in sorted(members.items())] + [f"{dist}.dist-info/RECORD,,"]
    members[f"{dist}.dist-info/RECORD"] = ("\n".join(rec) + "\n").encode()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for n in sorted(members):
            info = zipfile.ZipInfo(n, date_time=(2026, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, members[n])
    return path


def locks(name, path, version):
    data = open(path, "rb").read()
    sha, size, file = hashlib.sha256(data).hexdigest(), len(data), os.path.basename(path)
    open(os.path.join(OUT, name), "w").write(
        'lock-version = "1.0"\ncreated-by = "scripts/build-lock-fixtures.py"\nrequires-python = ">=3.9"\n\n'
        '[[packages]]\nname = "demo-kernels"\n'
        f'version = "{version}"\n'
        f'wheels = [{{ path = "wheels/{file}", size = {size}, hashes = {{ sha256 = "{sha}" }} }}]\n'
    )
    req = name.replace("pylock", "requirements").replace(".toml", ".txt")
    open(os.path.join(OUT, req), "w").write(
        f"--no-index\n--find-links wheels\ndemo-kernels=={version} \\\n    --hash=sha256:{sha}\n"
    )


def main():
    shutil.rmtree(OUT, ignore_errors=True)
    locks("pylock.toml", wheel("1.0.0", ["libmulti.so"]), "1.0.0")
    locks("pylock.next.toml", wheel("1.1.0", ["libsm100f.so"]), "1.1.0")
    print(OUT)


main()
