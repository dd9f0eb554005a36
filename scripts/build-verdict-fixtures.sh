#!/usr/bin/env bash
# Build the verdict fixtures in fixtures/verdict/ with NVIDIA's own compilers (PyPI wheels via
# scripts/fetch-cuda-tools.sh; no GPU): libraries whose module layouts real packages use, for
# the verdict classes of the CI gate. Beside each, what cuobjdump lists (NAME.list.txt).
#
#   libperarch.so      one module per architecture (sm_80 | sm_90 | sm_100), as cuBLAS/NCCL ship
#   libgenmixed.so     two translation units built with different generic lists:
#                      {sm_80, sm_90} and {sm_86, sm_90} (the second lacks 8.0)
#   libstale.so        two translation units: {sm_75, sm_80, sm_86, sm_90} and a stale
#                      {sm_75, sm_80} (no 8.6 or 9.0, no PTX: fails on Hopper and newer)
#   libbigptx.so       sm_80 SASS + 1.2 MiB of compute_80 PTX (96 unrolled kernels): a JIT at
#                      first use that takes seconds, not milliseconds (CL003)
#   bigptx-cu129.fatbin the same kernels as a CUDA 12.9 fatbin (ptxas 12.9, libnvfatbin 12.9, PTX ISA
#                      8.8): what a CUDA 12 driver can JIT
#   libortlike.so      registered modules sm_75..sm_90 without PTX, plus bare sm_70 cubins kept
#                      as data (.rodata) for the library's own dispatch (onnxruntime's pattern)
#
# Usage: scripts/build-verdict-fixtures.sh   (commit the result)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tools=$("$root/scripts/fetch-cuda-tools.sh")
cu13=$tools/cu13/nvidia/cu13
ptxas129=$tools/cu12/nvidia/cuda_nvcc/bin/ptxas
export PATH=$cu13/bin:$PATH
src=$root/fixtures/src
out=$root/fixtures/verdict
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"
rm -f "$out"/*.so "$out"/*.fatbin "$out"/*.txt
cd "$work"

obj() { # output source gencode...
  local o=$1 s=$2; shift 2
  case $s in /*) ;; *) s=$src/$s ;; esac
  nvcc -c -Xcompiler -fPIC -frandom-seed=cudalint "$@" "$s" -o "$o"
}
g() { echo "-gencode arch=compute_$1,code=sm_$1"; }

# One module per architecture: each translation unit (same kernels) built for one SM only.
cp "$src/vecadd.cu" va80.cu; cp "$src/vecadd.cu" va90.cu; cp "$src/vecadd.cu" va100.cu
for n in 80 90 100; do sed -i -e "s/vec_/v${n}_/g" -e "s/vecadd_launch/launch${n}/" va$n.cu; done
obj pa80.o "$PWD/va80.cu" $(g 80)
obj pa90.o "$PWD/va90.cu" $(g 90)
obj pa100.o "$PWD/va100.cu" $(g 100)
nvcc -shared -cudart shared pa80.o pa90.o pa100.o -o "$out/libperarch.so"

# Two translation units, two generic lists; the second lacks sm_80.
obj gm_a.o vecadd.cu $(g 80) $(g 90)
obj gm_b.o saxpy.cu $(g 86) $(g 90)
nvcc -shared -cudart shared gm_a.o gm_b.o -o "$out/libgenmixed.so"

# A translation unit left on an older list than the rest of the library.
obj st_a.o vecadd.cu $(g 75) $(g 80) $(g 86) $(g 90)
obj st_b.o saxpy.cu $(g 75) $(g 80)
nvcc -shared -cudart shared st_a.o st_b.o -o "$out/libstale.so"

# Over 1 MiB of PTX (CL003's threshold) beside sm_80 SASS.
obj bp.o bigptx.cu -gencode "arch=compute_80,code=[sm_80,compute_80]"
nvcc -shared -cudart shared bp.o -o "$out/libbigptx.so"
nvcc -ptx -arch=compute_80 "$src/bigptx.cu" -o big.ptx
sed -e 's/^\.version .*/.version 8.8/' big.ptx > big88.ptx
"$ptxas129" -arch=sm_80 big88.ptx -o big80.cubin
python3 "$root/scripts/nvfatbin.py" "$tools/cu12/nvidia/nvfatbin/lib/libnvfatbin.so.12" "$out/bigptx-cu129.fatbin" \
  -compress-all --cubin 80=big80.cubin --ptx 80=big88.ptx

# Registered sm_75..sm_90 SASS, no PTX; bare sm_70 cubins (CUDA 12.9 ptxas: CUDA 13 has no sm_70)
# embedded as data the way a library keeps per-SM kernels it loads itself.
obj ort_a.o vecadd.cu $(g 75) $(g 80) $(g 86) $(g 89) $(g 90)
obj ort_b.o saxpy.cu $(g 75) $(g 80) $(g 86) $(g 89) $(g 90)
nvcc -ptx -arch=compute_75 "$src/vecadd.cu" -o va.ptx
sed -e 's/^\.version .*/.version 8.8/' -e 's/^\.target .*/.target sm_70/' va.ptx > va70.ptx
"$ptxas129" -arch=sm_70 va70.ptx -o sm70.cubin
{
  bin2c -n ort_sm70_a sm70.cubin | sed 's/^unsigned char ort_sm70_a\[\]/const unsigned char ort_sm70_a[] __attribute__((aligned(8)))/'
  bin2c -n ort_sm70_b sm70.cubin | sed 's/^unsigned char ort_sm70_b\[\]/const unsigned char ort_sm70_b[] __attribute__((aligned(8)))/'
  echo 'const void *ort_sm70(int i) { return i ? (const void *)ort_sm70_b : (const void *)ort_sm70_a; }'
} > ortdata.c
gcc -O1 -fPIC -c ortdata.c -o ortdata.o
nvcc -shared -cudart shared ort_a.o ort_b.o ortdata.o -o "$out/libortlike.so"

cd "$out"
for f in *.so *.fatbin; do
  cuobjdump -all -lelf -lptx "$f" > "$f.list.txt" 2>&1 || true
  sed -i "s#$out/##g" "$f.list.txt"
done
nvcc --version | tail -n 2 > TOOL-VERSIONS.txt
"$ptxas129" --version | tail -n 2 >> TOOL-VERSIONS.txt
du -sh "$out"
