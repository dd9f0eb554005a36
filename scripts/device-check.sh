#!/usr/bin/env bash
# On-device check: load every module of the fixtures and of the demo image (and of any extra
# images or files given as arguments) on this machine's GPU(s), launch their kernels, and print
# one table row per module and GPU: static verdict next to what the driver did; then run the
# run-time compilers of the given images for the GPU's architecture (scripts/toolchain-check.py).
#
#   scripts/device-check.sh [IMAGE-OR-FILE...]
#
# Builds in release mode when cargo is here; on a GPU node without Rust, set CUDALINT_BIN to a
# carried x86-64 build (or leave one at target/release/cudalint). Reports (JSON and text) go to
# $OUT when set (the device tool's output folder), else to a temporary folder. Exit status: 0 when
# every run finished, the canary ran and no module's driver outcome disagrees with its static
# verdict; 1 otherwise. Bounded: each scan is killed after DEVICE_CHECK_TIMEOUT seconds (default
# 120), well inside the 5 minutes the whole check may take on one GPU.
set -euo pipefail
cd "$(dirname "$0")/.."

bin=${CUDALINT_BIN:-}
if [ -z "$bin" ]; then
    if command -v cargo >/dev/null 2>&1; then
        cargo build --release --locked --quiet
        bin=target/release/cudalint
    elif [ -x target/release/cudalint ]; then
        bin=target/release/cudalint
    else
        echo "device-check: no cargo and no target/release/cudalint; build here or set CUDALINT_BIN" >&2
        exit 1
    fi
fi
out=${OUT:-$(mktemp -d)}
limit=${DEVICE_CHECK_TIMEOUT:-120}
mkdir -p "$out"

echo "== $("$bin" --version) ($bin)"
if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi --query-gpu=index,name,compute_cap,driver_version --format=csv,noheader || true
fi

targets=("dir:fixtures/bin" "fixtures/demo/demo-image.tar" "$@")
status=0
jsons=()
for i in "${!targets[@]}"; do
    t=${targets[$i]}
    base=$(basename "${t#*:}")
    name=$(printf '%02d-%s' "$i" "${base//[^A-Za-z0-9._-]/_}")
    start=$(date +%s%N)
    rc=0
    # Exit 1 is the gate failing on findings (the fixtures are built to fail it); 2 is an error.
    timeout "$limit" "$bin" scan "$t" --deep --quiet --on-device --launch --launch-timeout 20 \
        --format json --output "$out/$name.json" --format text --output "$out/$name.txt" \
        2>"$out/$name.err" || rc=$?
    took=$(awk -v a="$start" -v b="$(date +%s%N)" 'BEGIN { printf "%.1f", (b - a) / 1e9 }')
    echo "== $t: exit $rc, ${took} s"
    if [ "$rc" -ge 2 ]; then
        status=1
        sed 's/^/   /' "$out/$name.err" >&2
        continue
    fi
    jsons+=("$out/$name.json")
done

if [ "${#jsons[@]}" -gt 0 ]; then
    python3 - "${jsons[@]}" <<'EOF' || status=1
import json, sys

head = ("binary", "module", "gpu", "static verdict", "driver result", "native/JIT", "JIT ms", "launches", "")
bad = False
total = disagreements = 0
for path in sys.argv[1:]:
    with open(path) as f:
        doc = json.load(f)
    print(f"\n== {doc['image']['name']} ({path.rsplit('/', 1)[-1]})")
    dev = doc.get("device") or {}
    for d in dev.get("devices", []):
        print(f"   GPU {d['index']}: {d['name']}, sm_{d['cc'].replace('.', '')}, driver CUDA {d['driver_cuda']}")
    for c in dev.get("canary", []):
        print(f"   canary on GPU {c['device']}: {'ok' if c['ok'] else 'FAILED'}: {c['detail']}")
        bad |= not c["ok"]
    for s in dev.get("skipped", []):
        print(f"   not loaded: {s['binary'].split('/')[-1]} {s['module']}: {s['reason']}")
    rows = []
    for m in dev.get("modules", []):
        launches = m.get("launches", [])
        counts = {}
        for l in launches:
            counts[l["status"]] = counts.get(l["status"], 0) + 1
        drv = m["driver"]
        rows.append((
            m["binary"].split("/")[-1],
            m["module"],
            str(m["device"]),
            (m["static_result"] + " " + m["static_image"]).strip(),
            "ok" if drv["result"] == 0 else (drv["error"] if m["how"] == "crashed" else f"{drv['error']} ({drv['result']})"),
            m["how"],
            f"{m['jit_ms']:.1f}" if m["jit_ms"] > 0 else "-",
            " ".join(f"{n} {k}" for k, n in sorted(counts.items())) or "-",
            "DISAGREES: " + m["disagreement"] if m["disagrees"] else "agrees",
        ))
        bad |= m["disagrees"]
        bad |= any(l.get("detail", "").endswith("NO_BINARY_FOR_GPU") for l in launches)
    rows.sort()
    total += len(rows)
    disagreements += sum(r[-1] != "agrees" for r in rows)
    widths = [max(len(r[i]) for r in rows + [head]) for i in range(len(head))]
    for r in [head] + rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
print(f"\n{total} module load(s); {disagreements} disagreement(s)")
sys.exit(1 if bad else 0)
EOF
fi
# Run-time compilers (Triton's ptxas, NVRTC) of the images given as arguments, run for this GPU's
# compute capability and compared with the static verdict (scripts/toolchain-check.py).
if [ "$#" -gt 0 ] && command -v nvidia-smi >/dev/null 2>&1; then
    cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n 1 | tr -d ' ')
    for t in "$@"; do
        echo "== run-time compilers of $t on compute capability $cc"
        timeout "$limit" python3 scripts/toolchain-check.py "$t" --arch "$cc" --cudalint "$bin" || status=1
    done
fi
echo "reports in $out"
exit $status
