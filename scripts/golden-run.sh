#!/usr/bin/env bash
# The golden run (issue 46 item 1): every committed fixture through every subcommand and every
# format, each output (stdout, stderr, exit code) in its own file under DIR, with what varies by
# run normalised, so that a refactor proves itself byte for byte:
#
#   scripts/golden-run.sh --bin OLD/cudalint golden-before   # the commit before the change
#   scripts/golden-run.sh golden-after                       # this checkout's debug build
#   scripts/golden-run.sh --compare golden-before golden-after
#
# --compare exits 1 and lists every file that differs; a step lands when nothing does, or when
# each difference is an intended change with its own test. Normalised (DIR/NORMALISED lists them
# too): the scratch directory a lockfile is copied into (-> $SCRATCH), ISO-8601 timestamps
# (-> <time>), UUIDs (-> <uuid>), JUnit and JSON durations (-> <secs>). Not covered, with why: `registry`
# summaries and `serve` (they need a registry; tests/it/registry.rs and serve.rs), images the
# tests build in temporary directories, `--on-device` (a GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

bin="$root/target/debug/cudalint"
if [[ ${1:-} == --bin ]]; then
  bin=$(realpath "$2")
  shift 2
fi
if [[ ${1:-} == --compare ]]; then
  [[ $# == 3 ]] || { echo "usage: $0 --compare DIR_BEFORE DIR_AFTER" >&2; exit 2; }
  if diff -rq "$2" "$3" >/dev/null; then
    echo "golden run: $(find "$2" -type f | wc -l) outputs, identical"
    exit 0
  fi
  echo "golden run: outputs differ:" >&2
  diff -rq "$2" "$3" >&2 || true
  exit 1
fi
[[ $# == 1 ]] || { echo "usage: $0 [--bin PATH] DIR | --compare DIR_BEFORE DIR_AFTER" >&2; exit 2; }
out=$(realpath -m "$1")
if [[ ! -x $bin ]]; then
  echo "golden run: no cudalint at $bin (cargo build first, or --bin PATH)" >&2
  exit 2
fi
rm -rf "$out"
mkdir -p "$out"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

cat >"$out/NORMALISED" <<'EOF'
scratch directory of lockfile copies -> $SCRATCH
ISO-8601 timestamps -> <time>
UUIDs -> <uuid>
JUnit time="…" and JSON "duration…"/"elapsed…" seconds -> <secs>
EOF

normalise() {
  sed -E \
    -e "s#$scratch#\$SCRATCH#g" \
    -e 's#[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?(Z|[+-][0-9]{2}:[0-9]{2})#<time>#g' \
    -e 's#[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}#<uuid>#g' \
    -e 's#time="[0-9.]+"#time="<secs>"#g' \
    -e 's#"(duration|elapsed)([a-z_]*)": *[0-9.]+#"\1\2": "<secs>"#g'
}

# run NAME ARGS...: cudalint ARGS in $scratch/work, stdout/stderr/exit code under NAME.
run() {
  local name=$1
  shift
  local rc=0
  (cd "$scratch/work" && NO_COLOR=1 COLUMNS=100 "$bin" "$@" >"$scratch/stdout" 2>"$scratch/stderr") || rc=$?
  mkdir -p "$(dirname "$out/$name")"
  normalise <"$scratch/stdout" >"$out/$name.out"
  normalise <"$scratch/stderr" >"$out/$name.err"
  echo "$rc" >"$out/$name.rc"
}

# The environment a CI job may set must not leak into the run.
unset CUDALINT_GPU CUDALINT_DRIVER CUDALINT_FAIL_ON CUDALINT_FORMAT CUDALINT_OUTPUT CUDALINT_CONFIG \
  CUDALINT_PLATFORM CUDALINT_PYTHON CUDALINT_IMAGE_SRC CUDALINT_MEMORY DOCKER_HOST CONTAINER_HOST \
  CONTAINERD_ADDRESS CONTAINERD_NAMESPACE
mkdir -p "$scratch/work"
cp -r fixtures "$scratch/work/fixtures"
# Lockfiles name their wheels relative to themselves; no cudalint.toml is found above.
targets=(--gpu T4,A100,L4,H100,B200,RTX5090 --driver 570.86.15)
scan_formats=(text json sarif junit markdown html cyclonedx inventory listing)

images=(fixtures/demo/demo-image.tar fixtures/images/buildah-history.tar)
for f in fixtures/bin/* fixtures/verdict/*; do
  case $f in *.txt | *.rc) continue ;; esac
  images+=("$f")
done
locks=(fixtures/lock/pylock.toml fixtures/lock/requirements.txt)

n=0
for img in "${images[@]}" "${locks[@]}"; do
  extra=()
  case $img in fixtures/lock/*) extra=(--python 3.11) ;; esac
  for fmt in "${scan_formats[@]}"; do
    run "scan/$img/$fmt" scan --quiet "${targets[@]}" "${extra[@]}" --format "$fmt" "$img"
    n=$((n + 1))
  done
  for fmt in text json markdown html; do
    run "support/$img/$fmt" support --quiet "${extra[@]}" --format "$fmt" "$img"
    n=$((n + 1))
  done
done
for f in fixtures/bin/* fixtures/verdict/*; do
  case $f in *.txt | *.rc) continue ;; esac
  for fmt in text json; do
    run "inspect/$f/$fmt" inspect --format "$fmt" "$f"
    run "inspect-cubins/$f/$fmt" inspect --cubins --format "$fmt" "$f"
    n=$((n + 2))
  done
done
for fmt in text json markdown; do
  run "diff/lock/$fmt" diff --quiet --python 3.11 --format "$fmt" fixtures/lock/pylock.toml fixtures/lock/pylock.next.toml
  run "diff/images/$fmt" diff --quiet --format "$fmt" fixtures/images/buildah-history.tar fixtures/demo/demo-image.tar
  n=$((n + 2))
done
# The manifests' images, each mapped to the demo image (the suite's own are built in temp dirs).
maps=()
for ref in registry.example.com/ml/multi-arch:1.4.0 registry.example.com/ml/triton-server:25.01-py3 \
  registry.example.com/ml/llm-hopper:2.0 registry.example.com/ml/blackwell-kernels:0.9; do
  maps+=(--image "$ref=docker-archive:fixtures/demo/demo-image.tar")
done
for fmt in text json sarif junit markdown; do
  run "audit/$fmt" audit --quiet --no-cache fixtures/k8s/manifests --nodes fixtures/k8s/nodes.json "${maps[@]}" --format "$fmt"
  n=$((n + 1))
done
for fmt in text json; do
  run "gpus/$fmt" gpus --format "$fmt"
  run "rules/$fmt" rules --format "$fmt"
  run "version/$fmt" version --format "$fmt"
  n=$((n + 3))
done
for code in $("$bin" rules --format json | python3 -c 'import json,sys; print(" ".join(r["code"] for r in json.load(sys.stdin)["rules"]))'); do
  run "explain/$code" explain "$code"
  n=$((n + 1))
done
echo "golden run: $n outputs of $bin in $out"
