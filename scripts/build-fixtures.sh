#!/usr/bin/env bash
# Build the committed fixtures in fixtures/bin/ with NVIDIA's own tools (fetched from PyPI by
# scripts/fetch-cuda-tools.sh; no GPU needed), and store beside each one what NVIDIA's cuobjdump
# says about it. The tests compare cudalint with those listings; they never need a toolkit.
#
#   NAME.cuobjdump.txt   cuobjdump -all -symbols NAME   (every entry header, plus the symbols of
#                                                        each cubin: ENTRY functions = kernels)
#   NAME.list.txt        cuobjdump -all -lelf -lptx NAME
#   NAME.cuobjdump.rc    cuobjdump's exit code when it refuses or fails (files it cannot read)
#
# Usage: scripts/build-fixtures.sh            (rebuild everything; commit the result)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tools=$("$root/scripts/fetch-cuda-tools.sh")
cu13=$tools/cu13/nvidia/cu13
ptxas129=$tools/cu12/nvidia/cuda_nvcc/bin/ptxas
ptxas118=$tools/cu11/nvidia/cuda_nvcc/bin/ptxas
nvfatbin129=$tools/cu12/nvidia/nvfatbin/lib/libnvfatbin.so.12
export PATH=$cu13/bin:$PATH
src=$root/fixtures/src
out=$root/fixtures/bin
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rm -rf "$out"
mkdir -p "$out"
cd "$work"

nvcc_so() { # output, extra nvcc args...   (shared library from vecadd.cu + saxpy.cu)
  local o=$1; shift
  nvcc -shared -Xcompiler -fPIC -cudart shared -frandom-seed=cudalint "$@" \
    "$src/vecadd.cu" "$src/saxpy.cu" -o "$out/$o"
}

# --- host shared libraries built by nvcc 13.5 ------------------------------------------------
# Several SASS targets plus PTX, statically linked cudart (nvcc's default): the cudart version
# heuristic has something to find, and nvcc adds its kernel-less device-link stub container.
nvcc -shared -Xcompiler -fPIC -frandom-seed=cudalint \
  -gencode arch=compute_75,code=sm_75 -gencode arch=compute_80,code=sm_80 \
  -gencode arch=compute_86,code=sm_86 -gencode arch=compute_90,code='[sm_90,compute_90]' \
  "$src/vecadd.cu" "$src/saxpy.cu" -o "$out/libmulti.so"
nvcc_so libsm90a.so -gencode arch=compute_90a,code='[sm_90a,compute_90a]'
nvcc_so libsm100f.so -gencode arch=compute_100f,code='[sm_100f,compute_100f]' \
  -gencode arch=compute_103a,code=sm_103a
nvcc_so libdebug.so -G -gencode arch=compute_80,code='[sm_80,compute_80]'
nvcc_so libzstd.so --compress-mode=size -gencode arch=compute_80,code=sm_80 \
  -gencode arch=compute_90,code='[sm_90,compute_90]'
nvcc_so libnocompress.so --no-compress -gencode arch=compute_80,code='[sm_80,compute_80]'
nvcc_so libconcat.so --concat -gencode arch=compute_80,code=sm_80 -gencode arch=compute_86,code=sm_86 \
  -gencode arch=compute_90,code=sm_90
# Relocatable device code: an object with __nv_relfatbin, and a library linked from two of them.
nvcc -dc -Xcompiler -fPIC -frandom-seed=cudalint -gencode arch=compute_80,code='[sm_80,compute_80]' \
  "$src/rdc_main.cu" -o "$out/rdc_main.o"
nvcc -dc -Xcompiler -fPIC -frandom-seed=cudalint -gencode arch=compute_80,code='[sm_80,compute_80]' \
  "$src/rdc_dev.cu" -o rdc_dev.o
nvcc -shared -Xcompiler -fPIC -cudart shared -rdc=true -gencode arch=compute_80,code='[sm_80,compute_80]' \
  "$out/rdc_main.o" rdc_dev.o -o "$out/librdc.so"
# Two modules with different architecture lists (the flash-attention pattern): vecadd.cu for
# sm_80 and sm_90, saxpy.cu for sm_90 only. On an 8.x GPU only the first module runs.
nvcc -c -Xcompiler -fPIC -frandom-seed=cudalint -gencode arch=compute_80,code=sm_80 \
  -gencode arch=compute_90,code=sm_90 "$src/vecadd.cu" -o partial_a.o
nvcc -c -Xcompiler -fPIC -frandom-seed=cudalint -gencode arch=compute_90,code=sm_90 "$src/saxpy.cu" -o partial_b.o
nvcc -shared -cudart shared partial_a.o partial_b.o -o "$out/libpartial.so"
# The CUDA 12.9 runtime as NVIDIA ships it, under its real file name (the SONAME link points here).
cp "$tools/cu12/nvidia/cuda_runtime/lib/libcudart.so.12" "$out/libcudart.so.12.9.79"
# A static archive, read member by member: one member with sm_80, one with sm_86 + compute_86.
nvcc -c -Xcompiler -fPIC -frandom-seed=cudalint -gencode arch=compute_80,code=sm_80 \
  "$src/vecadd.cu" -o vecadd.o
nvcc -c -Xcompiler -fPIC -frandom-seed=cudalint -gencode arch=compute_86,code='[sm_86,compute_86]' \
  "$src/saxpy.cu" -o saxpy.o
ar rcsD "$out/libstatic.a" vecadd.o saxpy.o

# --- PTX and standalone cubins ---------------------------------------------------------------
nvcc -ptx -arch=compute_80 "$src/vecadd.cu" -o "$out/vecadd.ptx"
# Older ptxas cannot read PTX ISA 9.5; the kernels use nothing newer, so only the header moves.
sed -e 's/^\.version .*/.version 8.8/' "$out/vecadd.ptx" > vecadd88.ptx
sed -e 's/^\.version .*/.version 7.8/' -e 's/^\.target .*/.target sm_35/' "$out/vecadd.ptx" > vecadd35.ptx
"$ptxas129" -arch=sm_80 vecadd88.ptx -o "$out/abi7_sm80.cubin"
"$ptxas129" -arch=sm_90a vecadd88.ptx -o "$out/abi7_sm90a.cubin"
"$ptxas129" -arch=sm_100a vecadd88.ptx -o "$out/abi8_sm100a_cu129.cubin"
"$ptxas118" -arch=sm_35 vecadd35.ptx -o "$out/abi7_sm35.cubin"
ptxas -arch=sm_90a "$out/vecadd.ptx" -o "$out/abi8_sm90a.cubin"
ptxas -arch=sm_100f "$out/vecadd.ptx" -o "$out/abi8_sm100f.cubin"
ptxas -arch=sm_120 "$out/vecadd.ptx" -o "$out/abi8_sm120.cubin"

# --- standalone fatbins ----------------------------------------------------------------------
nvcc -fatbin -frandom-seed=cudalint -gencode arch=compute_80,code='[sm_80,compute_80]' \
  "$src/vecadd.cu" -o "$out/vecadd.fatbin"
# Everything ZSTD-compressed, cubins included (--compress-mode=size).
nvcc -fatbin -frandom-seed=cudalint --compress-mode=size -gencode arch=compute_80,code='[sm_80,compute_80]' \
  "$src/vecadd.cu" -o "$out/zstd-all.fatbin"
# CUDA 12-era fatbin through libnvfatbin 12.9: LZ4 for PTX (default) and cubins (-compress-all).
python3 "$root/scripts/nvfatbin.py" "$nvfatbin129" "$out/lz4.fatbin" -compress-all \
  --cubin 80="$out/abi7_sm80.cubin" --ptx 80=vecadd88.ptx

# --- device code hidden as data (bin2c), and a host-only library ------------------------------
nvcc -fatbin -gencode arch=compute_80,code='[sm_80,compute_80]' "$src/vecadd.cu" -o hidden_rodata.fatbin
nvcc -fatbin -gencode arch=compute_90,code=sm_90 "$src/saxpy.cu" -o hidden_lrodata.fatbin
nvcc -fatbin -gencode arch=compute_89,code=sm_89 "$src/saxpy.cu" -o hidden_cask.fatbin
nvcc -cubin -gencode arch=compute_86,code=sm_86 "$src/saxpy.cu" -o hidden_sm86.cubin
# bin2c writes a plain array; make it const and 8-aligned like a real embedded image, and put
# one of them into the section name cuBLASLt uses.
b2c() { # name file [section]
  local attr='__attribute__((aligned(8)))'
  [[ -n ${3:-} ]] && attr="$attr __attribute__((section(\"$3\")))"
  bin2c -n "$1" "$2" | sed "s/^unsigned char $1\[\]/const unsigned char $1[] $attr/"
}
b2c fatbin_rodata hidden_rodata.fatbin > rodata.c
b2c cubin_sm86 hidden_sm86.cubin >> rodata.c
b2c fatbin_cask hidden_cask.fatbin .cask_resource >> rodata.c
b2c fatbin_lrodata hidden_lrodata.fatbin > lrodata.c
cat >> rodata.c <<'C'
const void *hidden_image(int i) {
  extern const unsigned char fatbin_lrodata[];
  const void *images[] = {fatbin_rodata, cubin_sm86, fatbin_cask, fatbin_lrodata};
  return images[i & 3];
}
C
gcc -O1 -fPIC -c rodata.c -o rodata.o
gcc -O1 -fPIC -mcmodel=medium -mlarge-data-threshold=1024 -c lrodata.c -o lrodata.o
gcc -shared rodata.o lrodata.o -o "$out/libhidden.so"
for f in hidden_rodata.fatbin hidden_lrodata.fatbin hidden_cask.fatbin hidden_sm86.cubin; do
  cp "$f" "$out/libhidden.$f"
done
gcc -O1 -shared -fPIC "$src/plain.c" -o "$out/libplain.so"
# NVIDIA's bin2c as shipped: its release banner stands in for a ptxas's in the rule cases.
cp "$cu13/bin/bin2c" "$out/nvidia-bin2c-13.5"

# --- damaged copies (made from the real files above; see fixtures/README.md) ------------------
python3 "$root/scripts/damage-fixtures.py" "$out"

# --- what NVIDIA's tool says -----------------------------------------------------------------
cd "$out"
for f in *; do
  case $f in *.txt|*.rc) continue ;; esac
  rc=0
  cuobjdump -all -symbols "$f" > "$f.cuobjdump.txt" 2>&1 || rc=$?
  cuobjdump -all -lelf -lptx "$f" > "$f.list.txt" 2>&1 || rc=$?
  if [[ $rc != 0 ]]; then echo "$rc" > "$f.cuobjdump.rc"; fi
  # cuobjdump names files by absolute path in some messages; keep the listings machine-independent.
  sed -i "s#$out/##g" "$f.cuobjdump.txt" "$f.list.txt"
done
cuobjdump --version | tail -n 2 > TOOL-VERSIONS.txt
"$ptxas129" --version | tail -n 2 >> TOOL-VERSIONS.txt
"$ptxas118" --version | tail -n 2 >> TOOL-VERSIONS.txt
nvcc --version | tail -n 2 >> TOOL-VERSIONS.txt
du -sh "$out"
