#!/usr/bin/env bash
# The whole test suite, as CI runs it. Installs what the tests need on a fresh Debian machine
# (only where missing), then runs every test. Usage: scripts/test.sh [cargo test args...]
set -euo pipefail
cd "$(dirname "$0")/.."
"$(dirname "$0")/install-test-deps.sh" skopeo docker-registry openssl xmllint:libxml2-utils gcc ld.bfd:binutils \
  ld.gold:binutils objcopy:binutils ld.lld:lld patchelf llvm-objcopy:llvm
cargo test --locked --all-targets "$@"
cargo test --locked --doc
