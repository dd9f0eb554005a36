#!/usr/bin/env bash
# The whole test suite, as CI runs it. Installs what the tests need on a fresh Debian machine
# (only where missing), then runs every test. Usage: scripts/test.sh [cargo test args...]
set -euo pipefail
cd "$(dirname "$0")/.."
"$(dirname "$0")/fetch-test-wheels.sh" >/dev/null
"$(dirname "$0")/install-test-deps.sh" skopeo podman containerd ctr:containerd dockerd:docker.io docker:docker.io docker-registry openssl xmllint:libxml2-utils chromium \
  groff:groff-base setpriv:util-linux mkfifo:coreutils tar flock:util-linux \
  gcc ld.bfd:binutils ld.gold:binutils objcopy:binutils ld.lld:lld patchelf llvm-objcopy:llvm \
  zstd xz:xz-utils readelf:binutils rpmbuild:rpm
# The wheel test (tests/it/install.rs) builds with maturin and installs into a venv.
python3 -c 'import ensurepip' 2>/dev/null || "$(dirname "$0")/install-test-deps.sh" python3-venv:python3-venv
command -v maturin >/dev/null || python3 -m pip install --quiet "maturin==1.16.0"
# The CycloneDX test (tests/it/cyclonedx.rs) enriches what the real `cyclonedx-py environment`
# writes: pinned, in its own venv under .tools (Debian's system pip refuses installs, PEP 668).
cdx=.tools/cyclonedx-py
if ! "$cdx/bin/cyclonedx-py" --version 2>/dev/null | grep -qx 7.5.0; then
  rm -rf "$cdx"
  python3 -m venv "$cdx"
  "$cdx/bin/pip" install --quiet --disable-pip-version-check "cyclonedx-bom==7.5.0"
fi
# The Kubernetes manifests in docs/kubernetes are validated against the API's OpenAPI schemas
# (tests/it/kubernetes.rs) by kubernetes-validate, which carries the schemas and works offline.
kv=.tools/kubernetes-validate
if ! "$kv/bin/kubernetes-validate" --version 2>/dev/null | grep -q "1.37.0"; then
  rm -rf "$kv"
  python3 -m venv "$kv"
  "$kv/bin/pip" install --quiet --disable-pip-version-check "kubernetes-validate==1.37.0"
fi
# Lockfiles the real lockers write (tests/it/lock.rs): uv and pip, pinned, in their own venv.
lk=.tools/lockers
if ! { "$lk/bin/uv" --version 2>/dev/null | grep -q "^uv 0.13.9" && "$lk/bin/pip" --version 2>/dev/null | grep -q "^pip 26.3 "; }; then
  rm -rf "$lk"
  python3 -m venv "$lk"
  "$lk/bin/pip" install --quiet --disable-pip-version-check "uv==0.13.9" "pip==26.3"
fi
# Every tier: the slow one (registries, Chromium, maturin, the real stacks) is behind a feature
# so that a plain `cargo test` stays quick.
cargo test --locked --all-targets --features slow-tests "$@"
cargo test --locked --doc
