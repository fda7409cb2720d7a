#!/usr/bin/env python3
"""Makes the seeds of the dwarf_read fuzz target (tests/fuzz/dwarf_read.c)
from a tiny shared library built with -O2 and debug information in several
forms, and writes them to the directory given (tests/fuzz/seeds/dwarf_read).

Usage: dwarf_read_seed.py OUTDIR   (needs gcc; clang for the last seed)

Each seed is the target's input: a 16-bit mask of the sections stored
compressed, the ten sections' sizes (32-bit), then their bytes as stored
in the file (compressed ones with their Elf64_Chdr)."""
import os
import struct
import subprocess
import sys
import tempfile

SECTIONS = [".debug_info", ".debug_abbrev", ".debug_str", ".debug_line_str", ".debug_addr",
            ".debug_str_offsets", ".debug_ranges", ".debug_rnglists", ".debug_line",
            ".debug_aranges"]
SHF_COMPRESSED = 0x800

SOURCE = r"""
struct point { int x, y; };
static inline __attribute__((always_inline)) int sq(int v) { return v * v; }
static inline __attribute__((always_inline)) int dist(struct point p) {
  return sq(p.x) + sq(p.y);
}
__attribute__((noinline)) static int far(const struct point *v, int n) {
  int best = 0;
  for (int i = 0; i < n; i++)
    if (dist(v[i]) > best)
      best = dist(v[i]);
    else if (__builtin_expect(v[i].x < 0, 0))
      best -= sq(v[i].y);
  return best;
}
int seed_entry(const struct point *v, int n) { return far(v, n) + dist(v[0]); }
"""

BUILDS = {
    "gcc-dwarf5.bin": ["gcc", "-O2", "-g"],
    "gcc-dwarf4.bin": ["gcc", "-O2", "-gdwarf-4"],
    "gcc-dwarf5-gz.bin": ["gcc", "-O2", "-g", "-gz=zlib"],
    "clang-dwarf5.bin": ["clang", "-O2", "-g"],  # no .debug_aranges, DW_FORM_addrx
}


def sections(path):
    data = open(path, "rb").read()
    assert data[:4] == b"\x7fELF" and data[4] == 2, "ELF64 only"
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    hdrs = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    strtab = hdrs[shstrndx]
    names = data[strtab[4]:strtab[4] + strtab[5]]
    out = {}
    for h in hdrs:
        name = names[h[0]:names.index(b"\0", h[0])].decode()
        out[name] = (data[h[4]:h[4] + h[5]], bool(h[2] & SHF_COMPRESSED))
    return out


def main():
    outdir = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "seed.c")
        with open(src, "w") as f:
            f.write(SOURCE)
        for name, cmd in BUILDS.items():
            lib = os.path.join(tmp, name + ".so")
            try:
                subprocess.run(cmd + ["-shared", "-fPIC", "-nostdlib", "-o", lib, src],
                               check=True, cwd=tmp)
            except (OSError, subprocess.CalledProcessError):
                print("skipped", name, "(", cmd[0], "failed )")
                continue
            secs = sections(lib)
            mask, sizes, body = 0, b"", b""
            for i, s in enumerate(SECTIONS):
                b, compressed = secs.get(s, (b"", False))
                mask |= compressed << i
                sizes += struct.pack("<I", len(b))
                body += b
            with open(os.path.join(outdir, name), "wb") as f:
                f.write(struct.pack("<H", mask) + sizes + body)
            print(name, 2 + len(sizes) + len(body), "bytes")


main()
