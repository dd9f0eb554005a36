#!/usr/bin/env python3
"""The open-world census: real CUDA wheels no knowledge row names, judged against the truth
written down before they were first scanned (tests/census/open_world.toml, issue 47 item 7).

usage: census_open.py CUDALINT_BIN [--only NAME[==VERSION]...] [--json OUT] [--timeout S]

Each pinned wheel (sha256 checked; fetched once by pip with --require-hashes if missing) is
scanned twice, for H100, L4, RTX 5090, B200 and V100 with the default driver:
  seek    `cudalint scan WHEEL.whl`: src/image/wheel.rs reads the zip's central directory and
          inflates each member in turn;
  stream  `cudalint scan -` reading a docker-save archive of the wheel installed as pip lays it
          out, made from the zip's members while it is written (never unpacked on disk): `scan -`
          reads tar archives only, and a zip cannot be read without its central directory.
The images of several wheels ([[image]]: the cupy-cuda11x + NVRTC 11.8 cases, with an image
Env) are streamed only.

Checks, each on its own (a failure names the check):
  scan      each scan gives a report (exit 0 with --fail-on never);
  cl015     no CL015 finding in either scan (the wheels are intact);
  same      seek = stream: the inventory's files, the findings, the headlines and the compilers
            read the same once the install prefix (usr/local/lib/python3.11/site-packages) is
            taken off the stream's paths;
  compiler  every compiler the truth lists (kind, version, path) is in the report's `compilers`;
  silent    no GPU whose truth is `fails` or `not-judged` reads a bare `runs`;
  device-code  no headline says "no device code" for a wheel whose truth lists device code;
  rule      the rule classes the truth's `rules` names for a GPU are among its findings;
  verdict   each GPU's class equals the truth's.
Classes read from `cudalint.lint/v3`: `fails` where the headline verdict is fails or accepted;
`not-judged` where a CL028 finding (issue 47 item 3's "not judged" warning) is left for that GPU
or the headline says "not judged"; else `runs` (runs, runs-jit).

Exit status: 0 every check passed, 1 some check failed (the table and the failures say which),
2 the census could not run (PyPI unreachable for a missing wheel). A scan that exits without a
report is a failed check (`scan`), and its GPUs fail `verdict`.
"""
import argparse
import collections
import hashlib
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRUTH = os.path.join(ROOT, "tests/census/open_world.toml")


def load(name, rel):
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, rel))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# scripts/census.py: the wheel cache, pins, pip's install scheme and tar headers, shared.
census = load("census", "scripts/census.py")
SITE, PREFIX, PYTHON, BUF = census.SITE, census.PREFIX, census.PYTHON, census.BUF
CLASSES = ("fails", "runs", "not-judged")


def fail(msg):
    print(f"census_open: {msg}", file=sys.stderr)
    sys.exit(2)


# ---------------------------------------------------------------------------------------------
# The installed tree as a docker-save archive, straight from the zips


def layer_plan(wheels, builder):
    """(name, zip or None, ZipInfo or bytes, size, mode) for every directory and file the wheels
    install, sorted as bytes, and the layer tar's size (so the archive's header can come first)."""
    files = {}
    for w in wheels:
        for path, z, info in builder.entries(w, SITE, PREFIX, PYTHON):
            files[path] = (z, info)
    dirs = set()
    for p in files:
        parts = p.split("/")
        for n in range(1, len(parts)):
            dirs.add("/".join(parts[:n]))
    plan, total = [], 0
    for name in sorted(set(files) | dirs, key=lambda s: s.encode()):
        if name in files:
            z, info = files[name]
            size = len(info) if z is None else info.file_size
            mode = 0o644 if z is None else (0o755 if (info.external_attr >> 16) & 0o111 else 0o644)
            hdr = census.tar_header(name, size, mode)
        else:
            z, info, size, hdr = None, None, 0, census.tar_header(name, 0, 0o755, dir_=True)
        plan.append((hdr, z, info, size))
        total += len(hdr) + size + len(census.pad(size))
    return plan, total + 1024


def write_archive(out, wheels, env, tag, builder):
    """A legacy `docker save` archive of one image of one layer (the wheels installed), its config
    carrying ENV, written to OUT as each member is inflated."""
    plan, size = layer_plan(wheels, builder)
    layer_id = hashlib.sha256(tag.encode()).hexdigest()
    layer_name = f"{layer_id}/layer.tar"
    out.write(census.tar_header(layer_id, 0, 0o755, dir_=True))
    out.write(census.tar_header(layer_name, size, 0o644))
    h, written = hashlib.sha256(), 0

    def emit(b):
        nonlocal written
        h.update(b)
        out.write(b)
        written += len(b)

    for hdr, z, info, n in plan:
        emit(hdr)
        if info is None:
            continue
        if z is None:
            emit(info)
        else:
            with z.open(info) as src:
                while chunk := src.read(BUF):
                    emit(chunk)
        emit(census.pad(n))
    emit(b"\0" * 1024)
    assert written == size, (written, size)
    out.write(census.pad(size))
    config = {"architecture": "amd64", "os": "linux", "config": {"Env": list(env)} if env else {},
              "rootfs": {"type": "layers", "diff_ids": ["sha256:" + h.hexdigest()]},
              "history": [{"created_by": f"pip install {tag}"}]}
    cb = json.dumps(config, sort_keys=True, separators=(",", ":")).encode()
    cname = hashlib.sha256(cb).hexdigest() + ".json"
    manifest = json.dumps([{"Config": cname, "RepoTags": [f"census/{re.sub(r'[^a-z0-9._-]', '-', tag.lower())}:1"],
                            "Layers": [layer_name]}], sort_keys=True, separators=(",", ":")).encode()
    for name, data in ((cname, cb), ("manifest.json", manifest)):
        out.write(census.tar_header(name, len(data), 0o644))
        out.write(data)
        out.write(census.pad(len(data)))
    out.write(b"\0" * 1024)


# ---------------------------------------------------------------------------------------------
# cudalint


def scan_args(gpus, work, tag):
    inv, lint = os.path.join(work, f"{tag}.inventory.json"), os.path.join(work, f"{tag}.lint.json")
    return inv, lint, ["--gpu", ",".join(gpus), "--no-cache", "--quiet", "--fail-on", "never",
                       "--format", f"inventory={inv}", "--format", f"json={lint}"]


def finish(rc, inv, lint, err):
    if rc != 0:
        return None, f"exit {rc}: {err.strip()[-2000:]}"
    return (json.load(open(inv)), json.load(open(lint))), None


def scan_seek(binary, wheel, gpus, work, timeout):
    inv, lint, flags = scan_args(gpus, work, "seek")
    try:
        p = subprocess.run([binary, "scan", wheel, *flags], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout} s"
    return finish(p.returncode, inv, lint, p.stderr.decode(errors="replace"))


def scan_stream(binary, wheels, env, tag, gpus, work, timeout, builder):
    inv, lint, flags = scan_args(gpus, work, "stream")
    with tempfile.TemporaryFile() as err:
        p = subprocess.Popen([binary, "scan", "-", *flags], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=err)
        timer = threading.Timer(timeout, p.kill)
        timer.start()
        try:
            write_archive(p.stdin, wheels, env, tag, builder)
            p.stdin.close()
        except BrokenPipeError:
            pass  # it stopped reading: its exit status and message say why
        rc = p.wait()
        timed_out = not timer.is_alive()
        timer.cancel()
        err.seek(0)
        msg = err.read().decode(errors="replace")
    if timed_out:
        return None, f"timed out after {timeout} s"
    return finish(rc, inv, lint, msg)


# ---------------------------------------------------------------------------------------------
# Reading the reports


INSTALLED = "/" + SITE + "/"


def rel(path):
    """A path as the wheel names it: the stream's install prefix and the seek's leading / off."""
    if not isinstance(path, str):
        return path
    if path.startswith(INSTALLED):
        return path[len(INSTALLED):]
    return path.lstrip("/")


def unprefixed(v):
    """V with every string's install prefix taken off (paths inside messages, hardlinks ...)."""
    if isinstance(v, dict):
        return {k: unprefixed(x) for k, x in v.items()}
    if isinstance(v, list):
        return [unprefixed(x) for x in v]
    if isinstance(v, str):
        return rel(v.replace(INSTALLED, "/"))
    return v


# What differs between the two transports by construction: where the bytes came from (layer
# digests, the source kind, the image's name and digests), not what they are.
TRANSPORT_KEYS = {"layer", "step"}


def files_view(inv):
    out = {}
    for f in inv.get("files") or []:
        out[rel(f["path"])] = unprefixed({k: v for k, v in f.items() if k not in TRANSPORT_KEYS and k != "path"})
    return out


def findings_view(lint):
    return sorted(json.dumps(unprefixed({k: v for k, v in f.items() if k not in TRANSPORT_KEYS | {"fingerprint"}}),
                             sort_keys=True) for f in lint.get("findings") or [])


def headlines_view(lint):
    return [(h["target"], h["verdict"], h["text"]) for h in lint.get("headlines") or []]


def compilers_view(lint):
    return sorted((c.get("kind"), c.get("version"), rel(c.get("path")), c.get("source")) for c in lint.get("compilers") or [])


def classes(lint, gpus):
    """Each GPU's class, and the rules of its error findings (what decided a `fails`)."""
    head = {h["target"]: h for h in lint.get("headlines") or []}
    out = {}
    for g in gpus:
        h = head.get(g)
        if h is None:
            out[g] = ("missing", [])
            continue
        mine = [f for f in lint.get("findings") or [] if f.get("target") in (None, g)]
        errors = sorted({f["rule"] for f in mine if f.get("severity") == "error"})
        if h["verdict"] in ("fails", "accepted"):
            out[g] = ("fails", errors)
        elif any(f["rule"] == "CL028" for f in mine) or "not judged" in h.get("text", ""):
            out[g] = ("not-judged", sorted({f["rule"] for f in mine if f.get("severity") == "warning"}))
        else:
            out[g] = ("runs", sorted({f["rule"] for f in mine if f.get("severity") == "warning"}))
    return out


def device_files(inv):
    """Files with device code in the inventory (modules of any kind, loose or registered)."""
    n = 0
    for f in inv.get("files") or []:
        if f.get("format") in ("cubin", "fatbin", "ptx") or f.get("containers") or f.get("hidden_containers") \
                or f.get("hidden_cubins"):
            n += 1
    return n


# ---------------------------------------------------------------------------------------------
# The census


class Census:
    def __init__(self, args, truth):
        self.args, self.truth = args, truth
        self.gpus = truth["gpus"]
        self.failures = []  # (check, subject, message)
        self.rows = []

    def failure(self, check, subject, message):
        self.failures.append((check, subject, message))

    def judge(self, subject, entry, lint, compilers_expected):
        """The checks that need one report: compiler, silent, verdict."""
        found = compilers_view(lint)
        for c in compilers_expected:
            hit = [f for f in found if f[0] == c["kind"] and f[1] == c["version"] and (f[2] or "").endswith(c["path"])]
            if not hit:
                self.failure("compiler", subject, f"{c['kind']} {c['version']} at {c['path']} is not in `compilers` "
                             f"(found: {[f'{k} {v} {p}' for k, v, p, _ in found] or 'none'})")
        got = classes(lint, self.gpus)
        heads = {h["target"]: h.get("text", "") for h in lint.get("headlines") or []}
        for g in self.gpus:
            if entry.get("device_files") and "no device code" in heads.get(g, ""):
                self.failure("device-code", subject, f"{g}: '{heads[g]}' where {entry['device_files']} files carry "
                             f"device code ({entry['device_code'][:160]})")
            mine = {f["rule"] for f in lint.get("findings") or [] if f.get("target") in (None, g)}
            for rule in entry.get("rules", {}).get(g, []):
                if rule not in mine:
                    self.failure("rule", subject, f"{g}: no {rule} finding ({entry['why'][g]}); findings: "
                                 f"{sorted(mine) or 'none'}")
            want, (cls, rules) = entry["expect"][g], got[g]
            if want not in CLASSES:
                fail(f"{subject}: expect.{g} = {want!r} is not one of {CLASSES}")
            if want in ("fails", "not-judged") and cls == "runs":
                self.failure("silent", subject, f"{g}: a bare `runs` where the truth says {want} ({entry['why'][g]})")
            if cls != want:
                text = next((h["text"] for h in lint.get("headlines") or [] if h["target"] == g), "?")
                self.failure("verdict", subject, f"{g}: {cls} {rules or ''} where the truth says {want}: "
                             f"{entry['why'][g]} | cudalint: {text}")
        return got, found

    def same(self, subject, seek, stream):
        (si, sl), (ti, tl) = seek, stream
        a, b = files_view(si), files_view(ti)
        for p in sorted(set(a) | set(b)):
            if p not in a or p not in b:
                self.failure("same", subject, f"{p}: only {'stream' if p in b else 'seek'} lists it")
            elif a[p] != b[p]:
                self.failure("same", subject, f"{p}: {census.diff(a[p], b[p], limit=3)} (seek, stream)")
        for what, x, y in (("findings", findings_view(sl), findings_view(tl)),
                           ("headlines", headlines_view(sl), headlines_view(tl)),
                           ("compilers", [c[:3] for c in compilers_view(sl)], [c[:3] for c in compilers_view(tl)])):
            if x != y:
                only_a = [v for v in x if v not in y][:3]
                only_b = [v for v in y if v not in x][:3]
                self.failure("same", subject, f"{what} differ: only seek {census.brief(only_a, 400)}; only stream "
                             f"{census.brief(only_b, 400)}")

    def cl015(self, subject, how, lint):
        for f in lint.get("findings") or []:
            if f["rule"] == "CL015":
                self.failure("cl015", subject, f"{how}: {f.get('path', '')}: {f['message'][:300]}")

    def run(self, wheels, builder):
        a = self.args
        for entry in self.truth.get("package", []):
            label = f"{entry['name']}=={entry['version']}"
            if label not in wheels:
                continue
            wheel = wheels[label]
            with tempfile.TemporaryDirectory(prefix="census-open-") as work:
                t = time.monotonic()
                seek, err_seek = scan_seek(a.binary, wheel, self.gpus, work, a.timeout)
                t_seek = time.monotonic() - t
                t = time.monotonic()
                stream, err_stream = scan_stream(a.binary, [wheel], [], label, self.gpus, work, a.timeout, builder)
                t_stream = time.monotonic() - t
            # A scan that gives no report is a finding of the census, not a reason to stop it: the
            # truth of every wheel here has a verdict to give.
            for how, err in (("seek", err_seek), ("stream", err_stream)):
                if err:
                    self.failure("scan", label, f"{how}: no report: {err}")
            for how, r in (("seek", seek), ("stream", stream)):
                if r:
                    self.cl015(label, how, r[1])
            if seek and stream:
                self.same(label, seek, stream)
            judged = seek or stream
            self.row(label, entry["kind"], entry["device_files"], entry, judged, t_seek, t_stream)
        for entry in self.truth.get("image", []):
            if a.only and not any(o in entry["wheels"] or o.split("==")[0] in [w.split("==")[0] for w in entry["wheels"]]
                                  for o in a.only):
                continue
            paths = [wheels[w] for w in entry["wheels"] if w in wheels]
            if len(paths) != len(entry["wheels"]):
                continue
            with tempfile.TemporaryDirectory(prefix="census-open-") as work:
                t = time.monotonic()
                stream, err = scan_stream(a.binary, paths, entry.get("env", []), entry["name"], self.gpus, work,
                                          a.timeout, builder)
                t_stream = time.monotonic() - t
            if err:
                self.failure("scan", entry["name"], f"stream: no report: {err}")
            else:
                self.cl015(entry["name"], "stream", stream[1])
            kind = "image: " + " + ".join(entry["wheels"]) + (" env " + " ".join(entry.get("env", [])) if entry.get("env") else "")
            self.row(entry["name"], kind, None, entry, stream, None, t_stream)

    def row(self, subject, kind, device_files_truth, entry, report, t_seek, t_stream):
        if report:
            got, found = self.judge(subject, entry, report[1], entry.get("compilers", []))
        else:
            got, found = {g: ("error", []) for g in self.gpus}, []
            for g in self.gpus:
                if entry["expect"][g] != "error":
                    self.failure("verdict", subject, f"{g}: no report where the truth says {entry['expect'][g]}: "
                                 f"{entry['why'][g]}")
        self.rows.append({"subject": subject, "kind": kind, "device_files": device_files_truth,
                          "device_files_seen": device_files(report[0]) if report else None,
                          "compilers": [f"{k} {v}" for k, v, _, _ in found],
                          "expect": entry["expect"], "got": {g: got[g][0] for g in self.gpus},
                          "rules": {g: got[g][1] for g in self.gpus},
                          "headlines": {h["target"]: h["text"] for h in (report[1].get("headlines") or [])} if report else {},
                          "seconds": {"seek": None if t_seek is None else round(t_seek, 1), "stream": round(t_stream, 1)}})

    def report(self):
        short = {"fails": "fails", "runs": "runs", "not-judged": "n-j", "missing": "?", "error": "exit"}
        head = ["package", "device files (truth/seen)", "compilers found", *self.gpus, "s (seek/stream)", "fails"]
        lines = [head]
        by_subject = collections.Counter(s for _, s, _ in self.failures)
        for r in self.rows:
            cells = []
            for g in self.gpus:
                want, got = r["expect"][g], r["got"][g]
                cells.append(short[got] if got == want else f"{short[got]}≠{short[want]}")
            s = r["seconds"]
            seen = "-" if r["device_files_seen"] is None else r["device_files_seen"]
            lines.append([r["subject"], f"{'-' if r['device_files'] is None else r['device_files']}/{seen}",
                          ", ".join(r["compilers"]) or "-", *cells,
                          f"{'-' if s['seek'] is None else s['seek']}/{s['stream']}", str(by_subject[r["subject"]])])
        widths = [max(len(str(l[i])) for l in lines) for i in range(len(head))]
        for l in lines:
            print("  ".join(str(c).ljust(w) for c, w in zip(l, widths)).rstrip())
        print("\ncells: cudalint's class (≠ the truth's where they differ); n-j = runs with things not judged; "
              "exit = no report (the scan exited non-zero)")
        checks = collections.Counter(c for c, _, _ in self.failures)
        print(f"\nfailures: {len(self.failures)} " + (str(dict(sorted(checks.items()))) if checks else ""))
        for c, s, m in sorted(self.failures):
            print(f"  [{c}] {s}: {m}")
        if self.args.json:
            with open(self.args.json, "w") as f:
                json.dump({"rows": self.rows, "failures": [{"check": c, "subject": s, "message": m}
                                                           for c, s, m in sorted(self.failures)]},
                          f, indent=1, sort_keys=True)
                f.write("\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("binary")
    ap.add_argument("--only", nargs="*", default=[], help="NAME or NAME==VERSION of the truth's packages")
    ap.add_argument("--json")
    ap.add_argument("--timeout", type=int, default=1800, help="seconds one scan may take")
    args = ap.parse_args()
    truth = tomllib.load(open(TRUTH, "rb"))
    pins = {}
    for e in truth["package"]:
        pins[f"{e['name']}=={e['version']}"] = census.Pin(e["name"], e["version"], e["sha256"],
                                                          f"{e['name']}=={e['version']} --hash=sha256:{e['sha256']}")
    norm = lambda s: re.sub(r"[-_.]+", "-", s).lower()
    wanted = set(pins)
    if args.only:
        wanted = {l for l in pins if any(norm(o.split("==")[0]) == norm(pins[l].name) and
                                         ("==" not in o or o.split("==")[1] == pins[l].version) for o in args.only)}
        for img in truth.get("image", []):
            if any(norm(o.split("==")[0]) in [norm(w.split("==")[0]) for w in img["wheels"]] for o in args.only):
                wanted |= set(img["wheels"])
    wheels, _, _ = census.fetch([pins[l] for l in sorted(wanted)], census.default_cache())
    for l, p in wheels.items():
        size = next(e["size"] for e in truth["package"] if f"{e['name']}=={e['version']}" == l)
        if os.path.getsize(p) != size:
            fail(f"{p}: {os.path.getsize(p)} bytes, the truth pins {size}")
    c = Census(args, truth)
    t = time.monotonic()
    c.run(wheels, census.load_stack_builder())
    c.report()
    print(f"\n{len(c.rows)} subjects in {time.monotonic() - t:.0f} s")
    sys.exit(1 if c.failures else 0)


if __name__ == "__main__":
    main()
