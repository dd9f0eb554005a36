#!/usr/bin/env python3
"""Facts for the open-world census truth (tests/census/open_world.toml), from NVIDIA's cuobjdump,
readelf and the bytes of each member of a wheel (read from the zip, one member at a time under
$TMPDIR). Prints JSON; the truth file is written by hand from it and from the package's loader.

usage: CUOBJDUMP=PATH census_open_facts.py WHEEL > facts.json
(cuobjdump: the one scripts/fetch-cuda-tools.sh pins, .tools/cu13/nvidia/cu13/bin/cuobjdump)"""
import collections, json, os, re, struct, subprocess, sys, tempfile, zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CUOBJDUMP = os.environ.get("CUOBJDUMP", os.path.join(ROOT, ".tools/cu13/nvidia/cu13/bin/cuobjdump"))
BANNER = re.compile(rb"Cuda compilation tools, release (\d+\.\d+), V([\x00-\xff]{0,12}?)(?=[\x00\n\r ])")
MARKERS = {b"NVRTC_ERROR_INVALID_OPTION": "nvrtc", b"NVJITLINK_ERROR": "nvjitlink"}
SONAMES = re.compile(rb"lib(?:nvrtc|nvJitLink|nvptxcompiler)[A-Za-z0-9_.%\-]*\.so[0-9.%d]*")
PY = re.compile(r"nvrtc|nvjitlink|NVRTC|nvJitLink|\bnvcc\b|\bptxas\b|load_nvidia_dynamic_lib|tileiras")

def sections(path):
    out = subprocess.run(["readelf", "-SW", path], capture_output=True, text=True).stdout
    secs = []
    for m in re.finditer(r"\]\s+(\S+)\s+\S+\s+[0-9a-f]+\s+([0-9a-f]+)\s+([0-9a-f]+)", out):
        secs.append((m.group(1), int(m.group(2), 16), int(m.group(3), 16)))
    return secs

def section_of(secs, off):
    for n, o, s in secs:
        if o <= off < o + s and n != "NULL":
            return n
    return "?"

def needed(path):
    out = subprocess.run(["readelf", "-dW", path], capture_output=True, text=True).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)

def cubin_arch(b):
    abi, flags = b[8], struct.unpack_from("<I", b, 48)[0]
    sm = (flags >> 8) & 0xFF if abi >= 8 else flags & 0xFF
    suffix = ""
    if (abi < 8 and flags & 0x800) or (abi >= 8 and flags & 0x8):
        suffix = "a"
    m = re.search(rb"-arch[ =]sm_(\d+)([af]?)", b)
    if m and int(m.group(1)) == sm and m.group(2):
        suffix = m.group(2).decode()
    return f"sm_{sm}{suffix}"

def cuobj(path):
    p = subprocess.run([CUOBJDUMP, "-all", "-lelf", "-lptx", path], capture_output=True, text=True, timeout=600)
    sass, ptx = collections.Counter(), collections.Counter()
    for line in p.stdout.splitlines():
        m = re.match(r"(ELF|PTX) file\s+\d+: .*\.(sm_\w+|compute_\w+)\.(cubin|ptx)$", line)
        if m:
            (sass if m.group(1) == "ELF" else ptx)[m.group(2)] += 1
    return sass, ptx, p.returncode

def walk_fatbins(data, secs):
    """(kind, arch) counts from the .nv_fatbin section's containers (CUDA-BINARIES.md 2.1-2.4): for
    files cuobjdump stops on."""
    sass, ptx = collections.Counter(), collections.Counter()
    for n, o, size in secs:
        if n != ".nv_fatbin":
            continue
        pos, end = o, o + size
        while pos + 16 <= end:
            if data[pos:pos + 4] != b"\x50\xed\x55\xba":
                pos += 8
                continue
            hs, fat = struct.unpack_from("<HQ", data, pos + 6)
            e, cend = pos + hs, pos + hs + fat
            while e + 0x40 <= cend:
                kind, _, ehs, psize = struct.unpack_from("<HHIQ", data, e)
                arch = struct.unpack_from("<I", data, e + 0x1C)[0]
                flags = struct.unpack_from("<Q", data, e + 0x28)[0]
                suf = "a" if flags & 0x100000 else "f" if flags & 0x200000 else ""
                if kind == 2: sass[f"sm_{arch}{suf}"] += 1
                elif kind == 1: ptx[f"sm_{arch}{suf}"] += 1
                else: ptx[f"kind{kind}_{arch}{suf}"] += 1
                if ehs == 0: break
                e += ehs + psize
            pos = cend
    return sass, ptx

def main(wheel):
    z = zipfile.ZipFile(wheel)
    facts = {"wheel": os.path.basename(wheel), "device": {}, "loose": collections.Counter(), "banners": [],
             "needed": {}, "sonames": {}, "py": {}, "executables": []}
    tmp = tempfile.mkdtemp()
    for info in z.infolist():
        name = info.filename
        if name.endswith("/"):
            continue
        if name.endswith(".py"):
            text = z.read(info).decode("utf-8", "replace")
            hits = [f"{i+1}: {l.strip()[:150]}" for i, l in enumerate(text.splitlines()) if PY.search(l)
                    and not l.strip().startswith("#")]
            if hits:
                facts["py"][name] = hits
            continue
        with z.open(info) as f:
            head = f.read(64)
        if name.endswith(".ptx") or head.startswith(b"//") and b".version" in z.read(info)[:4096]:
            t = z.read(info)
            tg = re.findall(rb"\.target\s+(\w+)", t)
            ver = re.findall(rb"\.version\s+([\d.]+)", t)
            facts["loose"][f"ptx {tg[0].decode() if tg else '?'} isa {ver[0].decode() if ver else '?'}"] += 1
            facts["device"][name] = {"ptx": [tg[0].decode() if tg else "?"]}
            continue
        if not head.startswith(b"\x7fELF") and head[:4] not in (b"\x50\xed\x55\xba", b"\xb1\x43\x62\x46"):
            continue
        path = os.path.join(tmp, "m")
        with z.open(info) as f, open(path, "wb") as o:
            while True:
                c = f.read(1 << 22)
                if not c: break
                o.write(c)
        data = open(path, "rb").read()
        if head.startswith(b"\x7fELF") and struct.unpack_from("<H", head, 18)[0] == 190:
            a = cubin_arch(data)
            facts["loose"][f"cubin {a}"] += 1
            facts["device"][name] = {"sass": [a]}
            continue
        if head.startswith(b"\x7fELF"):
            secs = sections(path)
            n = [x for x in needed(path) if re.match(r"lib(nvrtc|nvJitLink|nvptxcompiler|cudart|cuda)\b", x)]
            if n: facts["needed"][name] = n
            s = sorted(set(x.decode() for x in SONAMES.findall(data)))
            if s: facts["sonames"][name] = s
            for m in BANNER.finditer(data):
                sec = section_of(secs, m.start())
                window = data[max(0, m.start() - (1 << 20)): m.start() + (1 << 20)]
                mk = [v for k, v in MARKERS.items() if k in data]
                facts["banners"].append({"file": name, "release": m.group(1).decode(),
                    "v": m.group(2).decode("latin1"), "section": sec, "offset": m.start(),
                    "markers_in_file": mk})
            if re.search(r"/(ptxas|nvcc|nvlink|tileiras)$", name):
                facts["executables"].append(name)
        sass, ptx, rc = cuobj(path)
        if rc != 0 and head.startswith(b"\x7fELF"):
            s2, p2 = walk_fatbins(data, secs)
            facts.setdefault("cuobjdump_stopped", {})[name] = {"listed": sum(sass.values()) + sum(ptx.values()),
                                                               "walked": sum(s2.values()) + sum(p2.values())}
            sass, ptx = s2, p2
        if sass or ptx:
            facts["device"][name] = {"sass": sorted(sass), "ptx": sorted(ptx), "sass_n": sum(sass.values()),
                                     "ptx_n": sum(ptx.values())}
    facts["loose"] = dict(sorted(facts["loose"].items()))
    # Loose kernels summarised, not listed one by one.
    loose_files = [k for k, v in facts["device"].items() if "sass_n" not in v]
    if len(loose_files) > 40:
        for k in loose_files:
            del facts["device"][k]
        facts["loose_files"] = len(loose_files)
    json.dump(facts, sys.stdout, indent=1, sort_keys=True)

if __name__ == "__main__":
    main(sys.argv[1])
