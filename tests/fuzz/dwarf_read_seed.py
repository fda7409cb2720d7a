#!/usr/bin/env python3
"""Makes the seeds of the dwarf_read fuzz target (tests/fuzz/dwarf_read.c)
from a tiny shared library built with -O2 and debug information in several
forms, and writes them to the directory given (tests/fuzz/seeds/dwarf_read).

Usage: dwarf_read_seed.py OUTDIR   (needs gcc; clang for the last seed)

Each seed is the target's input: a 16-bit mask of the sections stored
compressed, the ten sections' sizes (32-bit), then their bytes as stored
in the file (compressed ones with their Elf64_Chdr).

Two more are made from the -gz build with .debug_str compressed here (the
linker leaves small sections as they are), which dwarf_read.c inflates
whole: gcc-dwarf5-gz-str.bin, and compressed-size-claim.bin whose header
claims 64 GiB (the reader once allocated what the header said).
empty-abbrev-table.bin is kept as the fuzzer found it (a unit whose
abbreviation table is empty: qsort was handed NULL)."""
import os
import struct
import subprocess
import sys
import tempfile
import zlib

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


def write(outdir, name, mask, raw):
    data = struct.pack("<H", mask) + b"".join(struct.pack("<I", len(b)) for b in raw) + b"".join(raw)
    with open(os.path.join(outdir, name), "wb") as f:
        f.write(data)
    print(name, len(data), "bytes")


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
            mask = 0
            for i, s in enumerate(SECTIONS):
                mask |= secs.get(s, (b"", False))[1] << i
            write(outdir, name, mask, [secs.get(s, (b"", False))[0] for s in SECTIONS])
            if name == "gcc-dwarf5-gz.bin":
                raw = [secs.get(s, (b"", False))[0] for s in SECTIONS]
                s = raw[2]
                for claim, extra in ((len(s), "gcc-dwarf5-gz-str.bin"),
                                     (1 << 36, "compressed-size-claim.bin")):
                    chdr = struct.pack("<IIQQ", 1, 0, claim, 1)  # ELFCOMPRESS_ZLIB
                    write(outdir, extra, mask | 4, raw[:2] + [chdr + zlib.compress(s)] + raw[3:])


main()
