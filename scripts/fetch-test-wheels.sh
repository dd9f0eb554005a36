#!/usr/bin/env bash
# Fetch the public wheels some tests judge as real packages (NVIDIA's own builds, with their own
# dist-info records), pinned by version and sha256, into $CUDALINT_WHEELS (default
# .tools/wheels/). Prints the directory. Idempotent; fails loudly when PyPI cannot be reached.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${CUDALINT_WHEELS:-$root/.tools/wheels}
mkdir -p "$dir"
req=$dir/requirements.txt
cat > "$req" <<'REQ'
nvidia-nvjpeg-cu12==12.4.0.76 --hash=sha256:3888f10b32fbd58e80166c48e01073732d752fa5f167b7cb5b9615f1c6375a20
REQ
if ! ls "$dir"/nvidia_nvjpeg_cu12-12.4.0.76-*.whl >/dev/null 2>&1; then
  if ! "${PYTHON:-python3}" -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
      --platform manylinux2014_x86_64 --require-hashes -r "$req" -d "$dir" >&2; then
    echo "fetch-test-wheels: could not download the pinned wheels from PyPI (see above)" >&2
    exit 1
  fi
fi
echo "$dir"
