#!/usr/bin/env bash
# Installs the system tools the tests use, when they are missing: arguments are TOOL or
# TOOL:DEBIAN_PACKAGE. The tests fail with a message naming this script when a tool is absent;
# they never skip.
set -euo pipefail
need=()
for spec in "$@"; do
  tool=${spec%%:*}
  pkg=${spec#*:}
  command -v "$tool" >/dev/null 2>&1 || need+=("$pkg")
done
if ((${#need[@]})); then
  sudo=""
  [[ $(id -u) == 0 ]] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}"
fi
