"""A minimal 64-bit little-endian ELF shared object with a .dynamic section, for tests of the loader's view
(DT_NEEDED, DT_RPATH, DT_RUNPATH, DT_SONAME). The layout is the ELF specification's (System V gABI): the
header, then .dynstr, .dynamic and .shstrtab, then the section header table (no program headers: the reader
under test, tfgpu.facts.binscan.read_links, reads sections; it is checked against `readelf -d` on real objects)."""

from __future__ import annotations

import struct
from pathlib import Path

DT = {"needed": 1, "soname": 14, "rpath": 15, "runpath": 29}


def elf_bytes(needed: list[str], *, runpath: str | None = None, rpath: str | None = None,
              soname: str | None = None) -> bytes:
    strtab = b"\0"
    offsets: dict[str, int] = {}

    def add(s: str) -> int:
        nonlocal strtab
        if s not in offsets:
            offsets[s] = len(strtab)
            strtab += s.encode() + b"\0"
        return offsets[s]

    entries = [(DT["needed"], add(n)) for n in needed]
    for key, value in (("soname", soname), ("rpath", rpath), ("runpath", runpath)):
        if value is not None:
            entries.append((DT[key], add(value)))
    dynamic = b"".join(struct.pack("<qQ", t, v) for t, v in entries) + struct.pack("<qQ", 0, 0)
    shstr = b"\0.dynstr\0.dynamic\0.shstrtab\0"
    off_str = 64
    off_dyn = off_str + len(strtab)
    off_dyn += (-off_dyn) % 8
    off_sh = off_dyn + len(dynamic)
    off_sht = off_sh + len(shstr)
    off_sht += (-off_sht) % 8
    header = b"\x7fELF" + bytes([2, 1, 1, 0]) + b"\0" * 8
    header += struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, 0, off_sht, 0, 64, 0, 0, 64, 4, 3)

    def sh(name: int, stype: int, off: int, size: int, link: int = 0, entsize: int = 0) -> bytes:
        return struct.pack("<IIQQQQIIQQ", name, stype, 0, 0, off, size, link, 0, 1, entsize)

    sht = sh(0, 0, 0, 0) + sh(1, 3, off_str, len(strtab)) + sh(9, 6, off_dyn, len(dynamic), link=1, entsize=16) \
        + sh(18, 3, off_sh, len(shstr))
    body = bytearray(off_sht + len(sht))
    body[0:64] = header
    body[off_str:off_str + len(strtab)] = strtab
    body[off_dyn:off_dyn + len(dynamic)] = dynamic
    body[off_sh:off_sh + len(shstr)] = shstr
    body[off_sht:] = sht
    return bytes(body)


def write_elf(path: Path, needed: list[str], **kw: str | None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(elf_bytes(needed, **kw))
    return path
