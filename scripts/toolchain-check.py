#!/usr/bin/env python3
"""Run the run-time compilers an image carries for one architecture and compare with cudalint's
static verdict (`compiler_checks` of `cudalint scan --format json`).

For each check cudalint made for the target, the compiler it names is taken out of the image (an
OCI layout, a docker-archive with uncompressed or gzip layers, or a `dir:` root) and run for that
architecture: ptxas assembles a one-kernel PTX for `--gpu-name <target_arch>`; NVRTC (through
ctypes, with its builtins beside it) compiles a one-kernel program for
`--gpu-architecture=<target_arch>`. One row per check: what cudalint said, what the tool did.

  scripts/toolchain-check.py IMAGE --arch 9.0 [--cudalint BIN]      (the GPU's compute capability)
  scripts/toolchain-check.py IMAGE --gpu H100

scripts/device-check.sh runs it with the GPU's own compute capability. Exit 1 when a tool's
outcome disagrees with the static verdict, 2 when something could not be run. Runs the image's
own compilers on this machine: use it on images you would run anyway.
"""
import argparse
import ctypes
import gzip
import json
import os
import subprocess
import sys
import tarfile
import tempfile

PTX = """.version {isa}
.target {target}
.address_size 64
.visible .entry k() {{ ret; }}
"""


def layers(image):
    """Uncompressed layer tars of an OCI layout or docker-archive, bottom first (file objects)."""
    if image.startswith("oci:"):
        root = image[4:]
        index = json.load(open(os.path.join(root, "index.json")))
        blob = lambda d: os.path.join(root, "blobs", *d.split(":", 1))
        manifest = json.load(open(blob(index["manifests"][0]["digest"])))
        return [open(blob(l["digest"]), "rb") for l in manifest["layers"]]
    arch = tarfile.open(image)
    manifest = json.load(arch.extractfile("manifest.json"))
    return [arch.extractfile(p) for p in manifest[0]["Layers"]]


def extract(image, paths, into):
    """The files at `paths` (absolute, in the image) under `into`, keeping their names; a later
    layer wins. Returns {path: local file}."""
    if image.startswith("dir:"):
        return {p: os.path.join(image[4:], p.lstrip("/")) for p in paths}
    want = {p.lstrip("/"): p for p in paths}
    # NVRTC needs its builtins, which sit beside it.
    beside = {os.path.dirname(p.lstrip("/")) for p in paths if "libnvrtc" in os.path.basename(p)}
    got = {}
    for f in layers(image):
        head = f.read(2)
        f.seek(0)
        stream = gzip.GzipFile(fileobj=f) if head == b"\x1f\x8b" else f
        with tarfile.open(fileobj=stream, mode="r|") as t:
            for m in t:
                name = m.name.lstrip("./")
                extra = os.path.dirname(name) in beside and os.path.basename(name).startswith("libnvrtc-builtins")
                if (name in want or extra) and m.isfile():
                    dest = os.path.join(into, name)
                    os.makedirs(os.path.dirname(dest), exist_ok=True)
                    with t.extractfile(m) as src, open(dest, "wb") as out:
                        while chunk := src.read(1 << 20):
                            out.write(chunk)
                    os.chmod(dest, 0o755)
                    if name in want:
                        got[want[name]] = dest
    return got


def run_ptxas(ptxas, target, work):
    # The newest PTX ISA this ptxas reads: it names it when given too new a one.
    probe = os.path.join(work, "probe.ptx")
    open(probe, "w").write(PTX.format(isa="99.9", target="sm_80"))
    msg = subprocess.run([ptxas, probe, "-o", os.devnull], capture_output=True, text=True).stderr
    isa = msg.split("current version is '")[1].split("'")[0] if "current version is" in msg else "7.8"
    src = os.path.join(work, "k.ptx")
    open(src, "w").write(PTX.format(isa=isa, target=target))
    r = subprocess.run([ptxas, "--gpu-name", target, src, "-o", os.path.join(work, "k.cubin")],
                       capture_output=True, text=True)
    return r.returncode == 0, (r.stderr.strip().splitlines() or ["ok"])[-1]


NVRTC_PROBE = r"""
import ctypes, sys
n = ctypes.CDLL(sys.argv[1])
prog = ctypes.c_void_p()
src = b'extern "C" __global__ void k(float *a) { a[threadIdx.x] *= 2.0f; }'
assert n.nvrtcCreateProgram(ctypes.byref(prog), src, b"k.cu", 0, None, None) == 0
opt = (ctypes.c_char_p * 1)(("--gpu-architecture=" + sys.argv[2]).encode())
print(n.nvrtcCompileProgram(prog, 1, opt))
"""


def run_nvrtc(lib, arch):
    # NVRTC opens its builtins by name: the loader must find them beside it from the start.
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.dirname(lib))
    r = subprocess.run([sys.executable, "-c", NVRTC_PROBE, lib, arch], capture_output=True, text=True, env=env)
    if r.returncode != 0:
        return False, "could not run: " + (r.stderr.strip().splitlines() or ["?"])[-1]
    rc = int(r.stdout.strip())
    return rc == 0, "ok" if rc == 0 else f"nvrtcCompileProgram returned {rc}"


# nvJitLink links PTX for an architecture with the ptxas inside it; its entry points are exported
# versioned (`__nvJitLinkCreate_12_8`), the newest being the library's own. Prints the first
# non-zero result (or 0).
NVJITLINK_PROBE = r"""
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
def newest(name):
    for major in range(20, 11, -1):
        for minor in range(20, -1, -1):
            f = getattr(lib, f"__{name}_{major}_{minor}", None)
            if f is not None:
                return f
    return getattr(lib, name)
h = ctypes.c_void_p()
opts = (ctypes.c_char_p * 1)(b"-arch=" + sys.argv[2].encode())
rc = newest("nvJitLinkCreate")(ctypes.byref(h), 1, opts)
if rc == 0:
    ptx = b".version 6.0\n.target sm_50\n.address_size 64\n.visible .entry k() { ret; }\n"
    rc = newest("nvJitLinkAddData")(h, 2, ptx, len(ptx), b"k.ptx")
    if rc == 0:
        rc = newest("nvJitLinkComplete")(h)
print(rc)
"""


def run_nvjitlink(lib, arch):
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.dirname(lib))
    r = subprocess.run([sys.executable, "-c", NVJITLINK_PROBE, lib, arch], capture_output=True, text=True, env=env)
    if r.returncode != 0:
        return False, "could not run: " + (r.stderr.strip().splitlines() or ["?"])[-1]
    rc = int(r.stdout.strip())
    return rc == 0, "ok" if rc == 0 else f"nvJitLink returned {rc}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("image")
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--arch")
    g.add_argument("--gpu")
    ap.add_argument("--cudalint", default=os.environ.get("CUDALINT_BIN", "target/release/cudalint"))
    a = ap.parse_args()
    target = ["--arch", a.arch] if a.arch else ["--gpu", a.gpu]
    scan = subprocess.run([a.cudalint, "scan", a.image, *target, "--quiet", "--format", "json"],
                          capture_output=True, text=True)
    if scan.returncode not in (0, 1):
        print(f"toolchain-check: cudalint scan failed: {scan.stderr}", file=sys.stderr)
        return 2
    checks = [c for c in json.loads(scan.stdout).get("compiler_checks", []) if c["known"]]
    if not checks:
        print("toolchain-check: the image names no run-time compiler cudalint judges")
        return 0
    disagree = 0
    with tempfile.TemporaryDirectory() as work:
        files = extract(a.image, sorted({c["path"] for c in checks}), work)
        print(f"{'consumer':<20} {'compiler':<14} {'asks for':<10} {'static':<8} {'tool':<8} detail")
        for c in checks:
            local = files.get(c["path"])
            if local is None:
                print(f"toolchain-check: {c['path']} not found in {a.image}", file=sys.stderr)
                return 2
            if c["kind"] == "nvrtc":
                ok, detail = run_nvrtc(local, c["target_arch"])
            elif c["kind"] == "nvjitlink":
                ok, detail = run_nvjitlink(local, c["target_arch"])
            elif c["kind"] == "nvptxcompiler":
                # Linked into another library, its entry points are usually not exported: not run.
                print(f"{c['consumer']:<20} {c['kind'] + ' ' + c['version']:<14} {c['target_arch']:<10} "
                      f"{'knows' if c['knows_target'] else 'no':<8} {'-':<8} not run (linked into {c['path']})")
                continue
            else:
                ok, detail = run_ptxas(local, c["target_arch"], work)
            # A verdict about loading (CuPy's clamped cubin for an older major) needs the GPU:
            # here only the compile is compared.
            load_only = "does not load" in c["why"]
            expect = c["knows_target"] or load_only
            same = ok == expect
            if load_only:
                detail += " (compiles; the static verdict is that the cubin does not load on this GPU)"
            disagree += not same
            print(f"{c['consumer']:<20} {c['kind'] + ' ' + c['version']:<14} {c['target_arch']:<10} "
                  f"{'knows' if c['knows_target'] else 'no':<8} {'ok' if ok else 'fails':<8} "
                  f"{detail}{'' if same else '   <-- DISAGREES'}")
    return 1 if disagree else 0


if __name__ == "__main__":
    sys.exit(main())
