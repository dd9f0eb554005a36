#!/usr/bin/env python3
"""Make damaged copies of real fixtures (hostile-input tests). Each damage is one small, named
change to bytes NVIDIA's tools wrote; fixtures/README.md says what each file exercises."""
import os
import random
import struct
import subprocess
import sys

out = sys.argv[1]


def read(name: str) -> bytearray:
    with open(os.path.join(out, name), "rb") as f:
        return bytearray(f.read())


def write(name: str, data: bytes) -> None:
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)


def section(elf: bytes, wanted: str):
    """(offset, size) of a section, read from the ELF64 section table."""
    shoff, = struct.unpack_from("<Q", elf, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", elf, 0x3A)
    def sh(i):
        return struct.unpack_from("<IIQQQQIIQQ", elf, shoff + i * shentsize)
    stroff = sh(shstrndx)[4]
    for i in range(shnum):
        s = sh(i)
        name = elf[stroff + s[0]: elf.index(b"\0", stroff + s[0])].decode()
        if name == wanted:
            return s[4], s[5]
    raise SystemExit(f"no section {wanted}")


# A library cut off in the middle of its .nv_fatbin (an interrupted copy, a truncated layer).
multi = read("libmulti.so")
off, size = section(multi, ".nv_fatbin")
write("damaged-truncated.so", multi[: off + size // 2])

fat = read("vecadd.fatbin")
# Entry header size below the 0x40 minimum: a walker that trusts it loops or reads garbage.
d = bytearray(fat); struct.pack_into("<I", d, 16 + 4, 0x10); write("damaged-header-size.fatbin", d)
# Payload size pointing far past the end of the container (and of the file).
d = bytearray(fat); struct.pack_into("<Q", d, 16 + 8, 0x7FFF_FFFF_FFFF_FFF0); write("damaged-payload-size.fatbin", d)
# Container fat size larger than the file.
d = bytearray(fat); struct.pack_into("<Q", d, 8, 1 << 40); write("damaged-fat-size.fatbin", d)


def entries(buf: bytes):
    e, end = 16, 16 + struct.unpack_from("<Q", buf, 8)[0]
    while e + 0x40 <= end:
        kind, _, hs, ps = struct.unpack_from("<HHIQ", buf, e)
        yield e, kind, hs, ps
        e += hs + ps


# A ZSTD-compressed cubin with the bytes after its frame magic flipped (frame and block headers); and decompression bombs:
# a ZSTD frame of 256 MiB of zeros in place of that cubin, once with the header's original small
# uncompressed size, once with a 4 GiB one.
zfat = read("zstd-all.fatbin")
for e, kind, hs, ps in entries(zfat):
    if kind == 2:
        d = bytearray(zfat)
        csz, = struct.unpack_from("<I", d, e + 0x10)
        mid = e + hs + 4
        for i in range(mid, mid + 8):
            d[i] ^= 0x5A
        write("damaged-zstd.fatbin", d)
        bomb = subprocess.run(["zstd", "-19", "-c"], input=bytes(256 << 20), capture_output=True, check=True).stdout
        pad = (-len(bomb)) % 8
        out_bytes = b""
        for usz in (None, 0xFFFF_FFFF):
            hdr = bytearray(zfat[e:e + hs])
            struct.pack_into("<Q", hdr, 0x08, len(bomb) + pad)
            struct.pack_into("<I", hdr, 0x10, len(bomb))
            if usz is not None:
                struct.pack_into("<Q", hdr, 0x38, usz)
            body = bytes(hdr) + bomb + bytes(pad)
            out_bytes += struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(body)) + body
        write("damaged-bomb.fatbin", out_bytes)
        break

# An ELF header from a real library followed by random bytes; its section table lies past EOF.
rng = random.Random(190)
plain = read("libplain.so")
write("damaged-garbage.so", plain[:64] + bytes(rng.randrange(256) for _ in range(4096)))

# A cubin whose section table offset and count are absurd.
cub = read("abi8_sm90a.cubin")
struct.pack_into("<Q", cub, 0x28, 0xFFFF_FFFF_FFFF_0000)
struct.pack_into("<H", cub, 0x3C, 0xFFFF)
write("damaged-shoff.cubin", cub)

# The bare sm_86 cubin libhidden.so keeps as data in .rodata, with its symbol table's size absurd:
# data the library loads itself, damaged. Its problem is detail (inventory), never CL015.
hid = read("libhidden.so")
rodata, rsize = section(hid, ".rodata")
at = next(o for o in range(rodata, rodata + rsize, 8)
          if hid[o:o + 4] == b"\x7fELF" and struct.unpack_from("<H", hid, o + 0x12)[0] == 190)
shoff, = struct.unpack_from("<Q", hid, at + 0x28)
shentsize, shnum = struct.unpack_from("<HH", hid, at + 0x3A)
symtab = next(at + shoff + i * shentsize for i in range(shnum)
              if struct.unpack_from("<I", hid, at + shoff + i * shentsize + 4)[0] == 2)
struct.pack_into("<Q", hid, symtab + 0x20, 0x7FFF_FFFF)
write("damaged-hidden-cubin.so", hid)
