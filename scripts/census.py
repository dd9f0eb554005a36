#!/usr/bin/env python3
"""The census of real CUDA wheels: every ELF file of the wheels pinned in tests/census/wheels.txt,
installed as pip lays it out, read by cudalint three ways and checked against the reference tools.

For each wheel (fetched once into the cache with pip --require-hashes, unpacked one at a time into
a temporary site-packages tree, removed after):
  (a) seek = stream = dir: `scan dir:TREE`, the same tree as a `docker save` archive piped to
      `scan -` (built while it is written, never on disk) and `inspect --all` of every ELF file give
      the same inventory for every file (dir and stream exactly; inspect as a lean scan shows it:
      no static cudart version from machine code, hidden containers' kernels "assumed");
  (b) SONAME and the CUDA libraries of DT_NEEDED (`cuda_needed`, kept by is_cuda_library on the
      `[[library]]` rows of rules/knowledge/libraries.toml, read from there) equal `readelf -d`;
  (c) the fatbin entries of every ELF file, (kind, arch) with their counts, equal NVIDIA's
      `cuobjdump -all -lelf -lptx` (scripts/fetch-cuda-tools.sh pins it); where cuobjdump stops on
      a file, a note says so, and what it listed before must be among cudalint's entries;
  (d) no problem that makes CL015 (incomplete analysis): no problem outside library-managed data in
      any of the three inventories, and no CL015 finding in the scans' verdicts.
Each ELF file's layouts (LAYOUTS: where its dynamic string table, .dynamic and relocations sit,
RELR, patchelf's appended segment, LLD, a first segment over 64 MiB) come from readelf, so a
failure names them.

Prints a table (package, ELF files, layouts, seconds, mismatches) and every failure, sorted; exits
1 when any check failed (after printing all of them), 2 when the census could not run.

Usage: census.py CUDALINT_BIN [--only NAME[==VERSION] ...] [--json OUT]
                 [--cuobjdump PATH | --no-cuobjdump] [--cuobjdump-max-mib N]
Wheels are cached in $CUDALINT_CENSUS_WHEELS, else wheels/ of the test cache, shared with the stacks (about 8 GB); a wheel's
tree takes up to 2 GB under $TMPDIR while it is checked.
"""
import argparse
import collections
import copy
import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PINS = os.path.join(ROOT, "tests/census/wheels.txt")
LIBRARIES_TOML = os.path.join(ROOT, "rules/knowledge/libraries.toml")
PYTHON = "3.11"
PREFIX = "usr/local"
SITE = f"{PREFIX}/lib/python{PYTHON}/site-packages"
BUF = 4 << 20
MIB = 1 << 20
# What an ImageFile has beyond the inspect schema's File: where it is in the image, not what it is.
IMAGE_ONLY = ("layer", "step", "hardlinks", "symlinks", "package")
# Each layout, by what readelf shows of the file (offsets are file offsets; DT_* map through PT_LOAD).
LAYOUTS = {
    "dynstr-after-dynamic": "DT_STRTAB lies after PT_DYNAMIC in the file",
    "dynstr-beyond-8MiB": "DT_STRTAB lies more than 8 MiB into the file",
    "dynstr-larger-than-8MiB": "DT_STRSZ is over 8 MiB",
    "dynstr-after-fatbin": "DT_STRTAB lies after .nv_fatbin",
    "rela-beyond-8MiB": "DT_RELA lies more than 8 MiB into the file",
    "rela-larger-than-8MiB": "DT_RELASZ is over 8 MiB",
    "relr": "DT_RELR present",
    "patchelf-appended-segment": "a PT_LOAD past the section header table (linkers write that table last)",
    "dynamic-in-appended-segment": "PT_DYNAMIC itself in such an appended PT_LOAD",
    "lld": ".comment names LLD as the linker",
    "first-segment-over-64MiB": "the first PT_LOAD is over 64 MiB",
    "no-section-table": "no section header table",
}


def fail(msg):
    print(f"census: {msg}", file=sys.stderr)
    sys.exit(2)


def load_stack_builder():
    """scripts/build-stack-image.py, for pip's install scheme (`entries`)."""
    spec = importlib.util.spec_from_file_location("build_stack_image", os.path.join(ROOT, "scripts/build-stack-image.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# ---------------------------------------------------------------------------------------------
# Pins and the wheel cache


class Pin:
    def __init__(self, name, version, sha256, line):
        self.name, self.version, self.sha256, self.line = name, version, sha256, line

    @property
    def label(self):
        return f"{self.name}=={self.version}"

    def stem(self):
        return re.sub(r"[-_.]+", "_", self.name).lower() + "-" + self.version + "-"


def read_pins(path):
    pins = []
    for raw in open(path):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = re.fullmatch(r"([A-Za-z0-9._-]+)==(\S+)\s+--hash=sha256:([0-9a-f]{64})", line)
        if not m:
            fail(f"{path}: not a `name==version --hash=sha256:HEX` line: {line}")
        pins.append(Pin(m.group(1), m.group(2), m.group(3), line))
    return pins


def select(pins, only):
    """The pins --only names (a project name, any spelling, or NAME==VERSION), in file order."""
    if not only:
        return pins
    norm = lambda s: re.sub(r"[-_.]+", "-", s).lower()
    key = lambda o: (norm(o.split("==")[0]), o.split("==")[1] if "==" in o else None)
    hit = lambda o, p: key(o)[0] == norm(p.name) and key(o)[1] in (None, p.version)
    unknown = [o for o in only if not any(hit(o, p) for p in pins)]
    if unknown:
        fail(f"--only {' '.join(unknown)}: not pinned in {os.path.relpath(PINS, ROOT)}")
    return [p for p in pins if any(hit(o, p) for o in only)]


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(BUF):
            h.update(chunk)
    return h.hexdigest()


def cached(pin, cache):
    found = sorted(w for w in os.listdir(cache) if w.lower().startswith(pin.stem()) and w.endswith(".whl"))
    return [os.path.join(cache, w) for w in found]


def fetch(pins, cache):
    """Each pinned wheel in the cache, its sha256 checked; missing ones downloaded by pip with
    --require-hashes (one call per wheel: two versions of one project are not one install)."""
    os.makedirs(cache, exist_ok=True)
    out = {}
    started = time.monotonic()
    downloaded = 0
    for pin in pins:
        for path in cached(pin, cache):
            if sha256_file(path) != pin.sha256:
                print(f"census: {os.path.basename(path)} in the cache is not the pinned wheel; fetching it again", file=sys.stderr)
                os.remove(path)
        if not cached(pin, cache):
            with tempfile.NamedTemporaryFile("w", suffix=".txt") as req:
                req.write(pin.line + "\n")
                req.flush()
                cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--no-deps",
                       "--only-binary=:all:", "--python-version", PYTHON, "--implementation", "cp",
                       "--abi", "cp" + PYTHON.replace(".", ""), "--require-hashes", "-r", req.name, "-d", cache]
                # pip takes the platform tags it is given literally: every glibc level a wheel may carry.
                for n in range(40, 4, -1):
                    cmd += ["--platform", f"manylinux_2_{n}_x86_64"]
                for legacy in ("manylinux2014", "manylinux2010", "manylinux1"):
                    cmd += ["--platform", f"{legacy}_x86_64"]
                cmd += ["--platform", "any"]
                print(f"census: downloading {pin.label} from PyPI", file=sys.stderr)
                if subprocess.run(cmd).returncode != 0:
                    fail(f"could not download {pin.label} from PyPI into {cache} (is PyPI reachable? pip's message "
                         f"is above); the census fetches each pinned wheel once, about 8 GB for all of them")
                downloaded += 1
        found = cached(pin, cache)
        if len(found) != 1:
            fail(f"expected one wheel for {pin.label} in {cache}, found {found}")
        out[pin.label] = found[0]
    return out, downloaded, time.monotonic() - started


# ---------------------------------------------------------------------------------------------
# The installed tree, and the same tree as a docker-save archive on a pipe


def unpack(wheel, tree, builder):
    """The wheel's files under TREE as pip installs them (site-packages, .data/ by its scheme)."""
    files = {}
    for path, z, info in builder.entries(wheel, SITE, PREFIX, PYTHON):
        files[path] = (z, info)
    for path in sorted(files):
        z, info = files[path]
        dest = os.path.join(tree, path)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        with open(dest, "wb") as f:
            if z is None:
                f.write(info)
                mode = 0o644
            else:
                with z.open(info) as src:
                    shutil.copyfileobj(src, f, BUF)
                mode = 0o755 if (info.external_attr >> 16) & 0o111 else 0o644
        os.chmod(dest, mode)
    return sorted(files)


def tar_header(name, size, mode, dir_=False):
    ti = tarfile.TarInfo(name)
    ti.size, ti.mode, ti.mtime, ti.uid, ti.gid, ti.uname, ti.gname = size, mode, 0, 0, 0, "", ""
    if dir_:
        ti.type = tarfile.DIRTYPE
    return ti.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape")


def pad(size):
    return b"\0" * (-size % 512)


def layer_plan(tree):
    """(header, file on disk or None, size) for every directory and file of TREE, sorted as bytes,
    and the size of the layer tar they make (so the archive's header can come first)."""
    entries = []
    for dirpath, dirnames, filenames in os.walk(tree):
        rel = os.path.relpath(dirpath, tree)
        for d in dirnames:
            entries.append((os.path.normpath(os.path.join(rel, d)), None))
        for f in filenames:
            entries.append((os.path.normpath(os.path.join(rel, f)), os.path.join(dirpath, f)))
    entries.sort(key=lambda e: e[0].encode())
    plan, total = [], 0
    for name, src in entries:
        if src is None:
            hdr, size = tar_header(name, 0, 0o755, dir_=True), 0
        else:
            st = os.stat(src)
            size = st.st_size
            hdr = tar_header(name, size, st.st_mode & 0o777)
        plan.append((hdr, src, size))
        total += len(hdr) + size + len(pad(size))
    return plan, total + 1024


def write_docker_archive(out, tree, tag):
    """A legacy `docker save` archive of one image whose one layer is TREE, written to OUT as it is
    made: `<id>/layer.tar`, `<config>.json`, `manifest.json`, in that order (docker's own). Nothing
    is held in memory beyond one read buffer; the layer's diff_id is hashed as it passes."""
    plan, size = layer_plan(tree)
    layer_id = hashlib.sha256(tag.encode()).hexdigest()
    layer_name = f"{layer_id}/layer.tar"
    out.write(tar_header(layer_id, 0, 0o755, dir_=True))
    out.write(tar_header(layer_name, size, 0o644))
    h, written = hashlib.sha256(), 0

    def emit(b):
        nonlocal written
        h.update(b)
        out.write(b)
        written += len(b)

    for hdr, src, n in plan:
        emit(hdr)
        if src is not None:
            got = 0
            with open(src, "rb") as f:
                while chunk := f.read(BUF):
                    got += len(chunk)
                    emit(chunk)
            if got != n:
                raise RuntimeError(f"{src} changed size while archived")
            emit(pad(n))
    emit(b"\0" * 1024)
    assert written == size, (written, size)
    out.write(pad(size))
    config = {
        "architecture": "amd64", "os": "linux", "config": {},
        "rootfs": {"type": "layers", "diff_ids": ["sha256:" + h.hexdigest()]},
        "history": [{"created_by": f"pip install {tag}"}],
    }
    cb = json.dumps(config, sort_keys=True, separators=(",", ":")).encode()
    cname = hashlib.sha256(cb).hexdigest() + ".json"
    manifest = json.dumps([{"Config": cname, "RepoTags": [f"census/{tag}"], "Layers": [layer_name]}],
                          sort_keys=True, separators=(",", ":")).encode()
    for name, data in ((cname, cb), ("manifest.json", manifest)):
        out.write(tar_header(name, len(data), 0o644))
        out.write(data)
        out.write(pad(len(data)))
    out.write(b"\0" * 1024)


# ---------------------------------------------------------------------------------------------
# cudalint


SCAN_FLAGS = ["--no-cache", "--quiet", "--gpu", "H100", "--driver", "580.65.06", "--fail-on", "never"]


def scan_dir(binary, tree, work, timeout):
    inv, lint, err = (os.path.join(work, f"dir.{x}") for x in ("inventory.json", "lint.json", "stderr"))
    with open(err, "wb") as e:
        try:
            rc = subprocess.run([binary, "scan", f"dir:{tree}", *SCAN_FLAGS, "--format", f"inventory={inv}",
                                 "--format", f"json={lint}"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=e, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
    return reports(rc, inv, lint, err)


def scan_stream(binary, tree, tag, work, timeout):
    inv, lint, err = (os.path.join(work, f"stream.{x}") for x in ("inventory.json", "lint.json", "stderr"))
    with open(err, "wb") as e:
        p = subprocess.Popen([binary, "scan", "-", *SCAN_FLAGS, "--format", f"inventory={inv}",
                              "--format", f"json={lint}"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=e)
        timer = threading.Timer(timeout, p.kill)
        timer.start()
        try:
            write_docker_archive(p.stdin, tree, tag)
            p.stdin.close()
        except BrokenPipeError:
            pass  # it stopped reading: its exit status and message say why
        rc = p.wait()
        timed_out = not timer.is_alive()
        timer.cancel()
    return reports("timeout" if timed_out else rc, inv, lint, err)


def reports(rc, inv, lint, err):
    stderr = open(err, "rb").read().decode(errors="replace").strip()
    if rc != 0:
        return None, None, f"exit {rc}: {stderr[-2000:]}"
    return json.load(open(inv)), json.load(open(lint)), None


def inspect(binary, paths, timeout):
    """`inspect --all --format json` of PATHS (several per call): {path: File}, [errors]."""
    files, errors = {}, []
    for i in range(0, len(paths), 256):
        chunk = paths[i:i + 256]
        try:
            p = subprocess.run([binary, "inspect", "--all", "--format", "json", *chunk], capture_output=True,
                               timeout=timeout)
        except subprocess.TimeoutExpired:
            errors += [{"path": c, "message": "inspect timed out"} for c in chunk]
            continue
        try:
            doc = json.loads(p.stdout)
        except ValueError:
            errors += [{"path": c, "message": f"inspect exit {p.returncode}: {p.stderr.decode(errors='replace')[-500:]}"}
                       for c in chunk]
            continue
        for f in doc["files"]:
            files[f["path"]] = f
        errors += doc.get("errors", [])
    return files, errors


def cuda_library_table():
    """The `[[library]]` rows of rules/knowledge/libraries.toml: (prefix, named), for is_cuda_library."""
    try:
        import tomllib
    except ImportError:  # Python before 3.11
        fail("the census reads rules/knowledge/libraries.toml with tomllib: it needs Python 3.11 or newer")
    with open(LIBRARIES_TOML, "rb") as f:
        rows = [(r["prefix"], r.get("named", "any")) for r in tomllib.load(f).get("library", [])]
    if len(rows) < 10:
        fail(f"could not read the library table of {LIBRARIES_TOML} (is_cuda_library); found {rows}")
    return rows


def is_cuda_library(name, table):
    """src/inspect/libraries.rs `is_cuda_library`, on the same rows (by file-name prefix)."""
    return any(name.startswith(p) and (named == "any" or (named == "shared" and name[len(p):].startswith(".so")))
               for p, named in table)


# ---------------------------------------------------------------------------------------------
# readelf and cuobjdump


def readelf(path):
    """Header, sections, program headers and dynamic entries by `readelf -hlSdW`."""
    p = subprocess.run(["readelf", "-hlSdW", path], capture_output=True, text=True, errors="replace")
    info = {"shoff": 0, "shnum": 0, "sections": {}, "phdrs": [], "dynamic": [], "needed": [], "soname": None,
            "warnings": sorted({l.strip() for l in p.stderr.splitlines() if l.strip()})}
    block = None
    for line in p.stdout.splitlines():
        if line.startswith("Section Headers:"):
            block = "s"
        elif line.startswith("Program Headers:"):
            block = "p"
        elif line.startswith(" Section to Segment mapping:") or line.startswith("Key to Flags:"):
            block = None
        elif line.startswith("Dynamic section at offset"):
            block = "d"
        if m := re.match(r"\s*Start of section headers:\s+(\d+)", line):
            info["shoff"] = int(m.group(1))
        elif m := re.match(r"\s*Number of section headers:\s+(\d+)", line):
            info["shnum"] = int(m.group(1))
        elif block == "s" and (m := re.match(r"\s*\[\s*(\d+)\]\s+(.*?)\s+(\S+)\s+([0-9a-f]{8,16})\s+([0-9a-f]+)\s+([0-9a-f]+)\s", line)):
            if int(m.group(1)) > 0:
                info["sections"].setdefault(m.group(2), (int(m.group(5), 16), int(m.group(6), 16), m.group(3)))
        elif block == "p" and (m := re.match(r"\s+(\S+)\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)", line)):
            info["phdrs"].append({"type": m.group(1), "offset": int(m.group(2), 16), "vaddr": int(m.group(3), 16),
                                  "filesz": int(m.group(5), 16), "memsz": int(m.group(6), 16)})
        elif block == "d" and (m := re.match(r"\s*0x([0-9a-f]+)\s+\((\w+)\)\s+(.*)$", line)):
            tag, value = m.group(2), m.group(3).strip()
            info["dynamic"].append((tag, value))
            if tag == "NEEDED" and (n := re.match(r"Shared library: \[(.*)\]$", value)):
                info["needed"].append(n.group(1))
            elif tag == "SONAME" and (n := re.match(r"Library soname: \[(.*)\]$", value)):
                info["soname"] = n.group(1)
    return info


def vaddr_to_offset(info, vaddr):
    for ph in info["phdrs"]:
        if ph["type"] == "LOAD" and ph["vaddr"] <= vaddr < ph["vaddr"] + ph["filesz"]:
            return ph["offset"] + vaddr - ph["vaddr"]
    return None


def dyn_addr(info, tag):
    for t, value in info["dynamic"]:
        if t == tag and (m := re.match(r"0x([0-9a-f]+)", value)):
            return int(m.group(1), 16)
    return None


def dyn_value(info, tag):
    for t, value in info["dynamic"]:
        if t == tag and (m := re.match(r"(\d+) \(bytes\)", value)):
            return int(m.group(1))
    return None


def comment(path, info):
    sec = info["sections"].get(".comment")
    if not sec or sec[2] == "NOBITS":
        return b""
    with open(path, "rb") as f:
        f.seek(sec[0])
        return f.read(min(sec[1], 1 << 16))


def layouts(path, info):
    """Which of LAYOUTS the file exercises, by its headers as readelf prints them."""
    out = set()
    loads = sorted((ph for ph in info["phdrs"] if ph["type"] == "LOAD"), key=lambda ph: ph["offset"])
    dyn = next((ph for ph in info["phdrs"] if ph["type"] == "DYNAMIC"), None)
    strtab = dyn_addr(info, "STRTAB")
    strtab_off = vaddr_to_offset(info, strtab) if strtab is not None else None
    if strtab_off is None and ".dynstr" in info["sections"]:
        strtab_off = info["sections"][".dynstr"][0]
    if dyn and strtab_off is not None and strtab_off > dyn["offset"]:
        out.add("dynstr-after-dynamic")
    if strtab_off is not None and strtab_off > 8 * MIB:
        out.add("dynstr-beyond-8MiB")
    if (dyn_value(info, "STRSZ") or 0) > 8 * MIB:
        out.add("dynstr-larger-than-8MiB")
    fatbin = info["sections"].get(".nv_fatbin")
    if fatbin and strtab_off is not None and strtab_off > fatbin[0]:
        out.add("dynstr-after-fatbin")
    rela = dyn_addr(info, "RELA")
    rela_off = vaddr_to_offset(info, rela) if rela is not None else None
    if rela_off is not None and rela_off > 8 * MIB:
        out.add("rela-beyond-8MiB")
    if (dyn_value(info, "RELASZ") or 0) > 8 * MIB:
        out.add("rela-larger-than-8MiB")
    if any(t == "RELR" for t, _ in info["dynamic"]):
        out.add("relr")
    # Linkers write the section header table last; patchelf appends a segment after it, for the
    # dynamic string table (and sometimes .dynamic itself) it rewrites. (A PT_LOAD after the one
    # holding PT_DYNAMIC is no sign: LLD's .data segment follows its RELRO one.)
    appended = [ph for ph in loads if info["shoff"] > 0 and ph["offset"] >= info["shoff"]]
    if appended:
        out.add("patchelf-appended-segment")
    if dyn and any(ph["offset"] <= dyn["offset"] < ph["offset"] + ph["filesz"] for ph in appended):
        out.add("dynamic-in-appended-segment")
    if b"Linker: LLD" in comment(path, info):
        out.add("lld")
    if loads and loads[0]["filesz"] > 64 * MIB:
        out.add("first-segment-over-64MiB")
    if info["shnum"] == 0:
        out.add("no-section-table")
    return sorted(out)


def cuobjdump_list(cuobjdump, path, timeout):
    """(kind, arch) counts of `cuobjdump -all -lelf -lptx` (as tests/it/cuobjdump.rs parses it),
    None; or None, (what it listed before it stopped, its message) when it cannot read the file."""
    try:
        p = subprocess.run([cuobjdump, "-all", "-lelf", "-lptx", path], capture_output=True, text=True,
                           errors="replace", timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, (collections.Counter(), "cuobjdump timed out")
    text = p.stdout + p.stderr
    listed = collections.Counter()
    for line in p.stdout.splitlines():
        kind, sep, rest = line.partition(" file ")
        if sep and ": " in rest:
            parts = rest.split(": ", 1)[1].rsplit(".", 2)
            if len(parts) == 3:
                listed[(kind.strip(), parts[1])] += 1
    if p.returncode != 0 and "does not contain device code" not in text:
        fatal = [l for l in p.stderr.splitlines() if "fatal" in l] or p.stderr.splitlines()[-1:] or [f"exit {p.returncode}"]
        return None, (listed, f"{' '.join(fatal[0].split())} after listing {sum(listed.values())} entries")
    return listed, None


def entries_listed(f):
    """(kind, arch) counts of the registered containers' entries as cuobjdump names them: an ELF
    entry by its own bytes, where 'f' is not recorded (docs/cuda-binaries.md §1.6)."""
    listed = collections.Counter()

    def walk(e):
        if e["kind"] == "elf":
            listed[("ELF", f"sm_{e['sm']}{e['suffix'].replace('none', '').replace('f', '')}")] += 1
        elif e["kind"] == "ptx":
            listed[("PTX", f"sm_{e['sm']}{e['suffix'].replace('none', '')}")] += 1
        for i in e.get("images") or []:
            walk(i)

    for c in f.get("containers") or []:
        for e in c.get("entries") or []:
            walk(e)
    for m in f.get("members") or []:
        listed.update(entries_listed(m))
    return listed


# ---------------------------------------------------------------------------------------------
# Comparing


def brief(v, n=160):
    s = json.dumps(v, sort_keys=True)
    return s if len(s) <= n else s[:n] + "…"


def diff(a, b, where="", out=None, limit=6):
    """Where two JSON values differ: [(path, a, b)], the first LIMIT."""
    out = [] if out is None else out
    if len(out) >= limit:
        return out
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            diff(a.get(k, "<absent>"), b.get(k, "<absent>"), f"{where}.{k}" if where else k, out, limit)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            diff(x, y, f"{where}[{i}]", out, limit)
    elif a != b:
        if isinstance(a, list) and isinstance(b, list):
            out.append((where, f"{len(a)} items {brief(a)}", f"{len(b)} items {brief(b)}"))
        else:
            out.append((where, brief(a), brief(b)))
    return out


def lean_view(f):
    """An inspect File as a lean scan reports it (docs/schema.md, `scan --deep`): no static cudart
    version read from machine code, hidden containers' payloads not read (kernels "assumed", no
    cubin header). Nothing else may differ."""
    f = copy.deepcopy(f)
    if (f.get("cudart") or {}).get("source") == "machine-code":
        del f["cudart"]
    for c in f.get("hidden_containers") or []:
        c["kernels"] = "assumed"
        for e in c.get("entries") or []:
            e.pop("cubin", None)
    return f


def without(f, keys):
    return {k: v for k, v in f.items() if k not in keys}


def problems(v, where=""):
    """Every problem anywhere in a File: (where, message, library_managed)."""
    out = []
    if isinstance(v, dict):
        for k in sorted(v):
            w = f"{where}.{k}" if where else k
            if k == "problems" and isinstance(v[k], list):
                for p in v[k]:
                    out.append((where or "file", p.get("message", brief(p)), bool(p.get("library_managed"))))
            else:
                out += problems(v[k], w)
    elif isinstance(v, list):
        for i, x in enumerate(v):
            out += problems(x, f"{where}[{i}]")
    return out


class Census:
    def __init__(self, args):
        self.args = args
        self.failures = []  # (check, wheel, path, message)
        self.notes = []
        self.rows = []
        self.library_table = cuda_library_table()

    def failure(self, check, pin, path, message, lay=()):
        tag = f" [{', '.join(lay)}]" if lay else ""
        self.failures.append((check, pin.label, path, message + tag))

    def run_wheel(self, pin, wheel, builder):
        a = self.args
        t0 = time.monotonic()
        seconds = collections.OrderedDict()
        work = tempfile.mkdtemp(prefix="cudalint-census-", dir=a.tmp)
        try:
            tree = os.path.join(work, "tree")
            t = time.monotonic()
            unpack(wheel, tree, builder)
            seconds["unpack"] = time.monotonic() - t
            elf = []
            for dirpath, _, filenames in os.walk(tree):
                for n in filenames:
                    p = os.path.join(dirpath, n)
                    if os.path.isfile(p) and not os.path.islink(p):
                        with open(p, "rb") as f:
                            if f.read(4) == b"\x7fELF":
                                elf.append("/" + os.path.relpath(p, tree))
            elf.sort()
            self.check(pin, tree, work, elf, seconds, t0)
        finally:
            shutil.rmtree(work, ignore_errors=True)

    def check(self, pin, tree, work, elf, seconds, t0):
        a = self.args
        short = lambda p: p[len("/" + SITE + "/"):] if p.startswith("/" + SITE + "/") else p
        before = len(self.failures)
        info, lay = {}, {}
        t = time.monotonic()
        for p in elf:
            info[p] = readelf(tree + p)
            lay[p] = layouts(tree + p, info[p])
        seconds["readelf"] = time.monotonic() - t
        if not elf:
            self.notes.append((pin.label, "", "no ELF file in this wheel"))
        # (a) three reads of the same files
        t = time.monotonic()
        dir_inv, dir_lint, dir_err = scan_dir(a.binary, tree, work, a.timeout) if elf else ({"files": []}, {"findings": []}, None)
        seconds["scan dir"] = time.monotonic() - t
        t = time.monotonic()
        st_inv, st_lint, st_err = scan_stream(a.binary, tree, pin.label, work, a.timeout) if elf else ({"files": []}, {"findings": []}, None)
        seconds["scan stream"] = time.monotonic() - t
        for what, err in (("scan dir:", dir_err), ("scan - (docker save on stdin)", st_err)):
            if err:
                self.failure("a", pin, "", f"{what} did not finish: {err}")
        dir_files = {f["path"]: f for f in (dir_inv or {"files": []})["files"]}
        st_files = {f["path"]: f for f in (st_inv or {"files": []})["files"]}
        listed = sorted(set(dir_files) | set(st_files))
        t = time.monotonic()
        targets = sorted(set(elf) | set(listed))
        by_given, errors = inspect(a.binary, [tree + p for p in targets], a.timeout)
        seconds["inspect"] = time.monotonic() - t
        insp = {p: by_given.get(tree + p) for p in targets}
        for e in errors:
            path = e.get("path", "")
            self.failure("a", pin, short(path[len(tree):] if path.startswith(tree) else path), f"inspect could not read it: {e.get('message')}")
        if dir_inv is not None and st_inv is not None:
            for p in listed:
                d, s = dir_files.get(p), st_files.get(p)
                if d is None or s is None:
                    self.failure("a", pin, short(p), f"listed by {'stream' if d is None else 'dir'} only", lay.get(p, ()))
                    continue
                # Which layer, and the Dockerfile step that made it, are the image's, not the file's.
                for w, x, y in diff(without(d, ("layer", "step")), without(s, ("layer", "step"))):
                    self.failure("a", pin, short(p), f"dir vs stream: {w}: {x} vs {y}", lay.get(p, ()))
        if dir_inv is not None:
            for p in targets:
                i, d = insp.get(p), dir_files.get(p)
                if i is None:
                    continue
                if d is None:
                    if i.get("containers") or i.get("hidden_containers") or i.get("hidden_cubins") or i.get("problems"):
                        self.failure("a", pin, short(p), "inspect finds device code or problems the scan does not list", lay.get(p, ()))
                    continue
                for w, x, y in diff(without(lean_view(i), ("path",)), without(d, ("path",) + IMAGE_ONLY)):
                    self.failure("a", pin, short(p), f"inspect vs dir: {w}: {x} vs {y}", lay.get(p, ()))
        # (b) SONAME and DT_NEEDED
        for p in elf:
            i = insp.get(p)
            if i is None or i.get("format") != "elf":
                if i is not None:
                    self.failure("b", pin, short(p), f"inspect reads it as {i.get('format')}, not an ELF file", lay[p])
                continue
            e = i.get("elf") or {}
            if e.get("soname") != info[p]["soname"]:
                self.failure("b", pin, short(p), f"SONAME {e.get('soname')!r}, readelf {info[p]['soname']!r}", lay[p])
            want = sorted(n for n in info[p]["needed"] if is_cuda_library(n, self.library_table))
            if sorted(e.get("cuda_needed") or []) != want:
                self.failure("b", pin, short(p), f"cuda_needed {e.get('cuda_needed')}, readelf's CUDA NEEDED {want}", lay[p])
        # (c) fatbin entries
        t = time.monotonic()
        for p in elf:
            i = insp.get(p)
            size = os.path.getsize(tree + p)
            if i is None or a.cuobjdump is None:
                continue
            if a.cuobjdump_max_mib is not None and size > a.cuobjdump_max_mib * MIB:
                self.notes.append((pin.label, short(p), f"not compared with cuobjdump: {size / MIB:.0f} MiB, over --cuobjdump-max-mib"))
                continue
            theirs, err = cuobjdump_list(a.cuobjdump, tree + p, a.timeout)
            if err:
                err = (err[0], err[1].replace(tree + "/", "/"))
            mine = entries_listed(i)
            if theirs is None:
                partial, err = err
                self.notes.append((pin.label, short(p), f"cuobjdump cannot read it ({err}); cudalint lists "
                                   f"{sum(mine.values())} ELF/PTX entries, {len(mine)} kinds"))
                if partial - mine:
                    self.failure("c", pin, short(p), f"cuobjdump listed {sorted((partial - mine).items())} before it stopped, "
                                 f"which cudalint does not", lay[p])
                continue
            if mine != theirs:
                only_mine = sorted((mine - theirs).items())
                only_theirs = sorted((theirs - mine).items())
                fmt = lambda xs: ", ".join(f"{k} {arch}×{n}" for (k, arch), n in xs) or "nothing"
                self.failure("c", pin, short(p), f"entries: cudalint has {sum(mine.values())}, cuobjdump {sum(theirs.values())}; "
                             f"only cudalint: {fmt(only_mine)}; only cuobjdump: {fmt(only_theirs)}", lay[p])
        seconds["cuobjdump"] = time.monotonic() - t
        # (d) no problem that is CL015
        seen = collections.defaultdict(set)
        for source, files in (("inspect", {p: f for p, f in insp.items() if f}), ("dir", dir_files), ("stream", st_files)):
            for p, f in files.items():
                for where, msg, managed in problems(f):
                    if not managed:
                        seen[(p, f"{where}: {msg}")].add(source)
        for source, lint in (("dir", dir_lint), ("stream", st_lint)):
            for f in (lint or {}).get("findings", []):
                if f.get("rule") == "CL015":
                    seen[(f.get("path") or "", f"CL015: {f.get('message')}")].add(source)
        for (p, msg), sources in sorted(seen.items()):
            self.failure("d", pin, short(p), f"{msg} ({', '.join(sorted(sources))})", lay.get(p, ()))
        seconds["total"] = time.monotonic() - t0
        counts = collections.Counter(l for p in elf for l in lay[p])
        mine = self.failures[before:]
        by_check = collections.Counter(f[0] for f in mine)
        self.rows.append({
            "wheel": pin.label, "sha256": pin.sha256, "elf_files": len(elf),
            "elf_bytes": sum(os.path.getsize(tree + p) for p in elf),
            "layouts": {k: sorted(short(p) for p in elf if k in lay[p]) for k in LAYOUTS if counts[k]},
            "seconds": {k: round(v, 1) for k, v in seconds.items()},
            "failures": {c: by_check[c] for c in "abcd"},
            "files": [{"path": short(p), "size": os.path.getsize(tree + p), "layouts": lay[p], "soname": info[p]["soname"],
                       "needed": info[p]["needed"], "readelf_warnings": info[p]["warnings"]} for p in elf],
        })
        row = self.rows[-1]
        print(f"census: {pin.label}: {len(elf)} ELF files, {row['seconds']['total']:.0f} s, "
              f"{len(mine)} failures", file=sys.stderr, flush=True)

    def report(self, fetch_seconds, downloaded):
        rows = self.rows
        head = ("package", "ELF files", "layouts", "seconds", "cuobjdump s", "(a)", "(b)", "(c)", "(d)")
        table = []
        for r in rows:
            lay = ", ".join(f"{k} {len(v)}" for k, v in r["layouts"].items()) or "-"
            f = r["failures"]
            table.append((r["wheel"], str(r["elf_files"]), lay, f"{r['seconds']['total']:.0f}",
                          f"{r['seconds'].get('cuobjdump', 0):.0f}", *(str(f[c]) for c in "abcd")))
        total = lambda k: sum(r["seconds"].get(k, 0) for r in rows)
        tl = collections.Counter()
        for r in rows:
            tl.update({k: len(v) for k, v in r["layouts"].items()})
        table.append(("total", str(sum(r["elf_files"] for r in rows)),
                      ", ".join(f"{k} {tl[k]}" for k in LAYOUTS if tl[k]) or "-", f"{total('total'):.0f}",
                      f"{total('cuobjdump'):.0f}", *(str(sum(r["failures"][c] for r in rows)) for c in "abcd")))
        width = [max(len(x[i]) for x in [head] + table) for i in range(len(head))]
        line = lambda x: "| " + " | ".join(c.ljust(width[i]) for i, c in enumerate(x)) + " |"
        print(line(head))
        print("|" + "|".join("-" * (w + 2) for w in width) + "|")
        for x in table:
            print(line(x))
        print()
        print(f"wheels: {len(rows)} ({downloaded} downloaded, {fetch_seconds:.0f} s to fetch and verify); "
              f"seconds by step: " + ", ".join(f"{k} {total(k):.0f}" for k in
                                               ("unpack", "readelf", "scan dir", "scan stream", "inspect", "cuobjdump")))
        print()
        print("Files by layout:")
        for k, what in LAYOUTS.items():
            files = sorted(f"{r['wheel']} {p}" for r in rows for p in r["layouts"].get(k, []))
            print(f"  {k} ({len(files)}): {what}")
            for f in files:
                print(f"    {f}")
        if self.notes:
            print()
            print("Notes:")
            for wheel, path, msg in sorted(self.notes):
                print(f"  {wheel} {path}: {msg}")
        print()
        names = {"a": "seek = stream = dir", "b": "SONAME/NEEDED = readelf", "c": "entries = cuobjdump", "d": "no CL015"}
        if not self.failures:
            print("Failures: none")
        for c in "abcd":
            mine = sorted(f for f in self.failures if f[0] == c)
            if mine:
                print(f"Failures ({c}) {names[c]}: {len(mine)}")
                for _, wheel, path, msg in mine:
                    print(f"  {wheel} {path}: {msg}")
        if self.args.json:
            doc = {"schema": "cudalint.census/v1", "binary": self.args.binary, "wheels": rows,
                   "notes": [{"wheel": w, "path": p, "message": m} for w, p, m in sorted(self.notes)],
                   "failures": [{"check": c, "wheel": w, "path": p, "message": m} for c, w, p, m in sorted(self.failures)],
                   "fetch_seconds": round(fetch_seconds, 1), "downloaded": downloaded}
            with open(self.args.json, "w") as f:
                json.dump(doc, f, indent=1, sort_keys=True)
                f.write("\n")


def find_cuobjdump():
    out = subprocess.run([os.path.join(ROOT, "scripts/fetch-cuda-tools.sh")], capture_output=True, text=True)
    if out.returncode != 0:
        fail(f"scripts/fetch-cuda-tools.sh failed (PyPI must be reachable): {out.stderr.strip()[-1000:]}")
    path = os.path.join(out.stdout.strip(), "cu13/nvidia/cu13/bin/cuobjdump")
    if not os.access(path, os.X_OK):
        fail(f"no cuobjdump at {path}")
    return path


def default_cache():
    """The stack images' wheel cache (tests/it/stock_stack.rs: `wheels/` of the test cache): one copy
    of the wheels both pin (torch 2.7.0, TensorFlow 2.21.0, cuDNN 9.28, cuSPARSELt 0.6.3), reused
    by a fresh checkout."""
    if os.environ.get("CUDALINT_CENSUS_WHEELS"):
        return os.environ["CUDALINT_CENSUS_WHEELS"]
    base = os.environ.get("CUDALINT_TEST_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "cudalint-test")
    return os.path.join(base, "wheels")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("binary", help="the cudalint binary")
    ap.add_argument("--only", nargs="+", metavar="NAME", help="only these pins (NAME or NAME==VERSION)")
    ap.add_argument("--json", metavar="OUT", help="also write the whole census as JSON")
    ap.add_argument("--pins", default=PINS, help="the pinned wheels (default: tests/census/wheels.txt)")
    ap.add_argument("--cache", default=default_cache(),
                    help="where the wheels are kept (default: $CUDALINT_CENSUS_WHEELS, else wheels/ in the test "
                         "cache: $CUDALINT_TEST_CACHE, else ~/.cache/cudalint-test, shared with the stack images)")
    ap.add_argument("--tmp", default=None, help="where a wheel's tree is unpacked (default: $TMPDIR)")
    ap.add_argument("--cuobjdump", help="NVIDIA's cuobjdump (default: the one scripts/fetch-cuda-tools.sh pins)")
    ap.add_argument("--no-cuobjdump", action="store_true", help="skip check (c)")
    ap.add_argument("--cuobjdump-max-mib", type=float, metavar="N",
                    help="compare with cuobjdump only files up to N MiB (it reads a 1 GB library in about 15 s)")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds any one command may take (default 1800)")
    a = ap.parse_args()
    a.binary = os.path.abspath(a.binary)
    if not os.access(a.binary, os.X_OK):
        fail(f"{a.binary} is not an executable cudalint")
    if shutil.which("readelf") is None:
        fail("readelf (binutils) is not installed")
    a.cuobjdump = None if a.no_cuobjdump else (a.cuobjdump or find_cuobjdump())
    pins = select(read_pins(a.pins), a.only)
    wheels, downloaded, fetch_seconds = fetch(pins, a.cache)
    builder = load_stack_builder()
    census = Census(a)
    for pin in pins:
        census.run_wheel(pin, wheels[pin.label], builder)
    census.report(fetch_seconds, downloaded)
    sys.exit(1 if census.failures else 0)


if __name__ == "__main__":
    main()
