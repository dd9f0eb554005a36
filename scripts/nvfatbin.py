#!/usr/bin/env python3
"""Write a fatbin with NVIDIA's libnvfatbin (the CUDA 12 library that produces LZ4 entries).

usage: nvfatbin.py LIBNVFATBIN OUT [OPTION...] [--cubin ARCH=FILE]... [--ptx ARCH=FILE]...
OPTIONs (starting with '-') go to nvFatbinCreate, e.g. -compress-all, -g.
"""
import ctypes
import sys


def main() -> None:
    lib = ctypes.CDLL(sys.argv[1])
    out = sys.argv[2]
    opts, images = [], []
    args = iter(sys.argv[3:])
    for a in args:
        if a in ("--cubin", "--ptx"):
            arch, path = next(args).split("=", 1)
            images.append((a, arch, path))
        else:
            opts.append(a.encode())

    def check(rc: int, what: str) -> None:
        if rc != 0:
            lib.nvFatbinGetErrorString.restype = ctypes.c_char_p
            sys.exit(f"{what}: {lib.nvFatbinGetErrorString(rc).decode()}")

    handle = ctypes.c_void_p()
    argv = (ctypes.c_char_p * len(opts))(*opts)
    check(lib.nvFatbinCreate(ctypes.byref(handle), argv, ctypes.c_size_t(len(opts))), "create")
    for kind, arch, path in images:
        data = open(path, "rb").read()
        if kind == "--cubin":
            rc = lib.nvFatbinAddCubin(handle, data, ctypes.c_size_t(len(data)), arch.encode(), None)
        else:
            data += b"\0"
            rc = lib.nvFatbinAddPTX(handle, data, ctypes.c_size_t(len(data)), arch.encode(), None, None)
        check(rc, f"add {path}")
    size = ctypes.c_size_t()
    check(lib.nvFatbinSize(handle, ctypes.byref(size)), "size")
    buf = ctypes.create_string_buffer(size.value)
    check(lib.nvFatbinGet(handle, buf), "get")
    with open(out, "wb") as f:
        f.write(buf.raw)
    lib.nvFatbinDestroy(ctypes.byref(handle))


if __name__ == "__main__":
    main()
