#!/usr/bin/env bash
# Fetch NVIDIA's own compilers and cuobjdump from PyPI wheels (they run without a GPU) into
# $CUDALINT_TOOLS (default: .tools/ in the repository). Versions are pinned so fixtures are
# reproducible. Prints the directory on success. Idempotent: a finished install is kept.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tools=${CUDALINT_TOOLS:-$root/.tools}
mkdir -p "$tools"
py=${PYTHON:-python3}

install() { # dir stamp packages...
  local dir=$1 stamp=$2; shift 2
  if [[ -f $tools/$dir/.done-$stamp ]]; then return; fi
  rm -rf "${tools:?}/$dir"
  "$py" -m pip install --quiet --disable-pip-version-check --no-deps --target "$tools/$dir" "$@" >&2
  touch "$tools/$dir/.done-$stamp"
}

# CUDA 13.5: nvcc, ptxas, fatbinary, nvlink, cicc, cuobjdump, cudart, headers.
install cu13 13.5.37-a nvidia-cuda-nvcc==13.5.37 nvidia-nvvm==13.5.37 nvidia-cuda-runtime==13.5.37 \
  nvidia-cuda-crt==13.5.37 nvidia-cuda-cccl==13.2.86 nvidia-cuda-cuobjdump==13.5.37
# CUDA 12.9: ptxas (ABI-7 cubins below sm_100, 'a' flag 0x8 in ABI 8), libnvfatbin (LZ4 fatbins), cudart 12.
install cu12 12.9-a nvidia-cuda-nvcc-cu12==12.9.86 nvidia-nvfatbin-cu12==12.9.82 nvidia-cuda-runtime-cu12==12.9.79
# CUDA 11.8: ptxas that still accepts sm_35 (which cuobjdump 13.5 refuses to list).
install cu11 11.8.89-a nvidia-cuda-nvcc-cu11==11.8.89

# NVRTC 11.8 (its [[nvrtc]] row, CuPy's cupy-cuda11x), and NVIDIA's static nvPTXCompiler (linked into
# a test library: a compiler found by its bytes inside another library).
install nvrtc11 11.8.89-a nvidia-cuda-nvrtc-cu11==11.8.89
install ptxcomp 13.0.88-a nvidia-nvptxcompiler==13.0.88

# nvcc -cudart shared links against libcudart.so, which the wheel ships only under its SONAME.
cu13=$tools/cu13/nvidia/cu13
ln -sf libcudart.so.13 "$cu13/lib/libcudart.so"
echo "$tools"
