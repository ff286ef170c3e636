"""Read GPU code and glibc needs out of shared objects: ELF / PE sections, CUDA fatbins, ELF symbol versions.

Pure parsers over bytes plus a streaming scanner that sees a shared object once, front to back (as it comes
out of a wheel's zip member), so that nothing larger than a fatbin entry header is ever held for the GPU
code. No CUDA toolkit is needed; `cuobjdump --list-elf / --list-ptx` reports the same entries (tests).

Formats (all little-endian):
- A fatbin container (what nvcc/fatbinary put in the `.nv_fatbin` section, one per compiled unit, 8-aligned)
  starts with magic 0xBA55ED50, u16 version (1), u16 header size (16), u64 size of the entries after it.
- Each entry: u16 kind (1 = PTX, 2 = ELF cubin = SASS), u16 version, u32 header size, u64 payload size,
  u32 compressed size, u32, u16 minor, u16 major, u32 arch (75 = sm_75 / compute_75), u32 name offset,
  u32 name length, u64 flags (0x2000 / 0x8000: payload compressed), ...; the payload follows the header.
- ELF: section headers at e_shoff (the end of the file); `.gnu.version_r` (SHT_GNU_verneed) names the
  symbol versions (GLIBC_2.23, GLIBCXX_3.4.22) each needed library must provide.
- PE (.pyd/.dll): the section table follows the optional header at the start of the file; the image
  keeps the first 8 bytes of a section name (".nv_fatb").
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import BinaryIO

FATBIN_MAGIC = b"\x50\xed\x55\xba"  # 0xBA55ED50, little-endian
FATBIN_KIND = {1: "ptx", 2: "sass"}
_MAX_ENTRY_HEADER = 4096
_MAX_CONTAINER = 1 << 34
SHT_DYNAMIC = 6
SHT_GNU_VERNEED = 0x6FFFFFFE
DT_NEEDED = 1
ELF_MAGIC = b"\x7fELF"
PE_MAGIC = b"MZ"
_TAIL = 4 << 20  # bytes kept before the section header table: .shstrtab lives there in every linker's layout


class FormatError(ValueError):
    """Bytes that do not have the structure their magic promised."""


@dataclass(frozen=True)
class FatbinEntry:
    kind: str  # "sass" (ELF cubin) or "ptx"
    arch: int  # 75 for sm_75 / compute_75
    compressed: bool = False


@dataclass(frozen=True)
class Container:
    offset: int  # where the container starts in its file
    size: int  # header + entries
    entries: tuple[FatbinEntry, ...]


# --------------------------------------------------------------------------- fatbin


def parse_container_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> tuple[int, int] | None:
    """(header size, entries size) of a fatbin container at ``pos``, or None if the bytes are not one."""
    if len(buf) - pos < 16 or bytes(buf[pos : pos + 4]) != FATBIN_MAGIC:
        return None
    _magic, ver, hsize, fsize = struct.unpack_from("<IHHQ", buf, pos)
    if ver != 1 or hsize < 16 or hsize > 256 or fsize == 0 or fsize > _MAX_CONTAINER:
        return None
    return hsize, fsize


def parse_entry_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> tuple[FatbinEntry, int] | None:
    """(entry, bytes to the next entry) of the fatbin entry header at ``pos``; None when it is not one."""
    if len(buf) - pos < 48:
        return None
    kind, _ver, hsize, size = struct.unpack_from("<HHIQ", buf, pos)
    (arch,) = struct.unpack_from("<I", buf, pos + 28)
    (flags,) = struct.unpack_from("<Q", buf, pos + 40)
    if kind not in FATBIN_KIND or hsize < 48 or hsize > _MAX_ENTRY_HEADER or arch > 10_000:
        return None
    return FatbinEntry(FATBIN_KIND[kind], arch, bool(flags & 0xA000)), hsize + size


def parse_fatbins(data: bytes | bytearray | memoryview, base: int = 0) -> list[Container]:
    """Every fatbin container in ``data`` (e.g. a whole `.nv_fatbin` section); ``base`` = its file offset."""
    scanner = FatbinScanner(base)
    scanner.feed(bytes(data))
    scanner.finish()
    return scanner.containers


class FatbinScanner:
    """Find fatbin containers in a byte stream fed front to back, reading only the entry headers.

    The payloads (cubins, PTX) are skipped without being kept, so a 2 GB shared object streams through
    a buffer of a few megabytes."""

    def __init__(self, base: int = 0) -> None:
        self.containers: list[Container] = []
        self._buf = bytearray()
        self._start = base  # file offset of _buf[0]
        self._end: int | None = None  # end of the container being read
        self._next = base  # file offset of the next entry header (in a container) or of the next search
        self._cstart = 0
        self._entries: list[FatbinEntry] = []

    def feed(self, chunk: bytes) -> None:
        self._buf += chunk
        self._run()
        # drop what no later step needs; keep 15 bytes so a container header split across chunks is found
        keep_from = self._next if self._end is not None else max(self._next, self._start + len(self._buf) - 15)
        drop = min(keep_from - self._start, len(self._buf))
        if drop > 0:
            del self._buf[:drop]
            self._start += drop

    def _run(self) -> None:
        buf_end = self._start + len(self._buf)
        while True:
            if self._end is None:
                i = self._buf.find(FATBIN_MAGIC, max(0, self._next - self._start))
                if i < 0:
                    self._next = max(self._next, buf_end - 3)
                    return
                if len(self._buf) - i < 16:
                    self._next = self._start + i
                    return
                head = parse_container_header(self._buf, i)
                if head is None:
                    self._next = self._start + i + 1
                    continue
                hsize, fsize = head
                self._cstart = self._start + i
                self._end = self._cstart + hsize + fsize
                self._next = self._cstart + hsize
                self._entries = []
                continue
            if self._next >= self._end:
                self.containers.append(Container(self._cstart, self._end - self._cstart, tuple(self._entries)))
                self._next, self._end = self._end, None
                continue
            rel = self._next - self._start
            if rel < 0 or len(self._buf) - rel < 48:
                return  # wait for more bytes (rel < 0 never happens: the buffer keeps _next)
            parsed = parse_entry_header(self._buf, rel)
            if parsed is None:  # not a real container after all: search on after its magic
                self._next, self._end = self._cstart + 1, None
                continue
            entry, step = parsed
            self._entries.append(entry)
            self._next += step
            if self._next > buf_end:
                return

    def finish(self) -> None:
        """End of stream: a container cut short is dropped (it was not one)."""
        self._end = None


# --------------------------------------------------------------------------- ELF


@dataclass(frozen=True)
class Section:
    name: str
    type: int
    offset: int
    size: int
    link: int
    info: int


def elf_header(head: bytes) -> tuple[int, int, int, int]:
    """(e_shoff, e_shentsize, e_shnum, e_shstrndx) of a 64-bit little-endian ELF header."""
    if len(head) < 64 or head[:4] != ELF_MAGIC:
        msg = "not an ELF file"
        raise FormatError(msg)
    if head[4] != 2 or head[5] != 1:
        msg = "only 64-bit little-endian ELF is read"
        raise FormatError(msg)
    shoff, = struct.unpack_from("<Q", head, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", head, 0x3A)
    return shoff, shentsize, shnum, shstrndx


def elf_sections(sht: bytes, shentsize: int, shstrtab: bytes | None) -> list[Section]:
    """The section headers in ``sht``; names from ``shstrtab`` ("" when it is not at hand)."""
    out = []
    for i in range(len(sht) // shentsize):
        name_off, stype, _flags, _addr, off, size, link, info = struct.unpack_from(
            "<IIQQQQII", sht, i * shentsize)
        name = ""
        if shstrtab is not None and name_off < len(shstrtab):
            end = shstrtab.find(b"\0", name_off)
            name = shstrtab[name_off : end if end >= 0 else None].decode("latin-1")
        out.append(Section(name, stype, off, size, link, info))
    return out


def _cstr(table: bytes, off: int) -> str:
    end = table.find(b"\0", off)
    return table[off : end if end >= 0 else len(table)].decode("latin-1")


def parse_verneed(data: bytes, count: int, dynstr: bytes) -> list[tuple[str, str]]:
    """(library, version) pairs of a `.gnu.version_r` section with ``count`` entries (its sh_info)."""
    out: list[tuple[str, str]] = []
    pos = 0
    for _ in range(count):
        if pos + 16 > len(data):
            break
        _ver, cnt, file_off, aux, nxt = struct.unpack_from("<HHIII", data, pos)
        lib = _cstr(dynstr, file_off)
        apos = pos + aux
        for _ in range(cnt):
            if apos + 16 > len(data):
                break
            _hash, _flags, _other, name_off, anext = struct.unpack_from("<IHHII", data, apos)
            out.append((lib, _cstr(dynstr, name_off)))
            if anext == 0:
                break
            apos += anext
        if nxt == 0:
            break
        pos += nxt
    return out


def parse_needed(dynamic: bytes, dynstr: bytes) -> list[str]:
    """DT_NEEDED library names of a `.dynamic` section."""
    out = []
    for pos in range(0, len(dynamic) - 15, 16):
        tag, val = struct.unpack_from("<qQ", dynamic, pos)
        if tag == 0:
            break
        if tag == DT_NEEDED:
            out.append(_cstr(dynstr, val))
    return out


_VER = re.compile(r"^(GLIBC|GLIBCXX|CXXABI)_(\d+(?:\.\d+)*)$")


def max_versions(pairs: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Highest GLIBC / GLIBCXX / CXXABI symbol version among (library, version) pairs."""
    best: dict[str, tuple[int, ...]] = {}
    for _lib, ver in pairs:
        m = _VER.match(ver)
        if m:
            key = tuple(int(p) for p in m.group(2).split("."))
            best[m.group(1)] = max(best.get(m.group(1), key), key)
    return {k: ".".join(map(str, v)) for k, v in sorted(best.items())}


# --------------------------------------------------------------------------- PE


def pe_sections(head: bytes) -> list[Section] | None:
    """Sections of a PE image from its first bytes, or None when more bytes are needed."""
    if len(head) < 0x40 or head[:2] != PE_MAGIC:
        msg = "not a PE file"
        raise FormatError(msg)
    (lfanew,) = struct.unpack_from("<I", head, 0x3C)
    if len(head) < lfanew + 24:
        return None
    if head[lfanew : lfanew + 4] != b"PE\0\0":
        msg = "no PE signature"
        raise FormatError(msg)
    nsec, = struct.unpack_from("<H", head, lfanew + 6)
    optsize, = struct.unpack_from("<H", head, lfanew + 20)
    table = lfanew + 24 + optsize
    if len(head) < table + 40 * nsec:
        return None
    out = []
    for i in range(nsec):
        raw = head[table + 40 * i : table + 40 * (i + 1)]
        name = raw[:8].rstrip(b"\0").decode("latin-1")
        _vsize, _vaddr, rawsize, rawptr = struct.unpack_from("<IIII", raw, 8)
        out.append(Section(name, 0, rawptr, rawsize, 0, 0))
    return out


# --------------------------------------------------------------------------- one shared object, streamed


@dataclass
class Ranges:
    """Byte ranges of a stream to keep, filled in as the stream passes them."""

    wanted: list[tuple[int, int]] = field(default_factory=list)
    got: dict[tuple[int, int], bytearray] = field(default_factory=dict)

    def want(self, start: int, end: int) -> None:
        if end > start and (start, end) not in self.got:
            self.wanted.append((start, end))
            self.got[(start, end)] = bytearray()

    def feed(self, chunk: bytes, offset: int) -> None:
        end = offset + len(chunk)
        for lo, hi in self.wanted:
            if hi <= offset or lo >= end:
                continue
            a, b = max(lo, offset), min(hi, end)
            buf = self.got[(lo, hi)]
            if len(buf) == a - lo:  # contiguous (the stream never goes back)
                buf += chunk[a - offset : b - offset]

    def get(self, start: int, end: int) -> bytes | None:
        """The bytes [start, end) if a kept range covers them completely."""
        for (lo, hi), buf in self.got.items():
            if lo <= start and end <= hi and len(buf) >= end - lo:
                return bytes(buf[start - lo : end - lo])
        return None

    def done_by(self) -> int:
        return max((hi for _lo, hi in self.wanted), default=0)


@dataclass
class ObjectScan:
    """What one shared object carries; ``need`` lists the byte ranges a second pass must supply."""

    kind: str = ""  # "elf", "pe" or "" (neither)
    containers: list[Container] = field(default_factory=list)  # those inside the fatbin section(s)
    found: list[Container] = field(default_factory=list)  # every container the stream held
    sections: list[Section] = field(default_factory=list)
    sht: tuple[bytes, int, int] | None = None  # ELF: section header table, entry size, .shstrtab index
    shstrtab: bytes | None = None
    stray: int = 0  # fatbin containers found outside them (embedded data)
    fatbin_sections: list[Section] = field(default_factory=list)
    versions: dict[str, str] = field(default_factory=dict)  # GLIBC / GLIBCXX / CXXABI maxima
    needed: list[str] = field(default_factory=list)
    need: list[tuple[int, int]] = field(default_factory=list)
    size: int = 0


class ObjectScanner:
    """Stream one shared object front to back: fatbins, section table, and the sections asked for."""

    def __init__(self) -> None:
        self.fat = FatbinScanner()
        self.ranges = Ranges()
        self.ranges.want(0, 4096)
        self._pos = 0
        self._head = b""
        self._kind = ""
        self._sht: tuple[int, int, int, int] | None = None

    @property
    def pos(self) -> int:
        """Bytes seen so far."""
        return self._pos

    def feed(self, chunk: bytes) -> None:
        if not chunk:
            return
        if not self._kind and self._pos + len(chunk) >= 64:
            head = bytes(self._head + chunk[: 64 - len(self._head)])
            if head[:4] == ELF_MAGIC:
                self._kind = "elf"
                self._sht = elf_header(head)
                shoff, entsize, num, _ = self._sht
                # the bytes before this chunk are in the (0, 4096) range already
                self.ranges.want(max(self._pos, shoff - _TAIL), shoff + entsize * num)
            elif head[:2] == PE_MAGIC:
                self._kind = "pe"
            else:
                self._kind = "other"
        elif not self._kind:
            self._head += chunk
        self.ranges.feed(chunk, self._pos)
        self.fat.feed(chunk)
        self._pos += len(chunk)

    def finish(self) -> ObjectScan:
        self.fat.finish()
        out = ObjectScan(kind=self._kind if self._kind != "other" else "", size=self._pos)
        out.found = list(self.fat.containers)
        if self._kind == "elf" and self._sht is not None:
            shoff, entsize, num, strndx = self._sht
            sht = self.ranges.get(shoff, shoff + entsize * num)
            if sht is None:
                msg = "ELF section header table not in the stream"
                raise FormatError(msg)
            out.sht = (sht, entsize, strndx)
        elif self._kind == "pe":
            out.sections = pe_sections(self.ranges.get(0, min(4096, self._pos)) or b"") or []
        complete(out, self.ranges)
        return out


def complete(out: ObjectScan, ranges: Ranges) -> None:
    """Fill in what ``ranges`` (the kept bytes of a pass over the object) tell: ELF section names, the
    symbol versions and DT_NEEDED libraries, which containers sit in the fatbin sections. ``out.need``
    lists the ranges still missing; a second pass that keeps them completes the scan."""
    out.need = []
    if out.sht is not None:
        sht, entsize, strndx = out.sht
        nameless = elf_sections(sht, entsize, None)
        names = nameless[strndx] if strndx < len(nameless) else None
        if out.shstrtab is None and names is not None:
            out.shstrtab = ranges.get(names.offset, names.offset + names.size)
            if out.shstrtab is None:
                out.need.append((names.offset, names.offset + names.size))
        out.sections = elf_sections(sht, entsize, out.shstrtab)
        for sec in out.sections:
            if sec.type not in (SHT_GNU_VERNEED, SHT_DYNAMIC) or sec.link >= len(out.sections):
                continue
            if (out.versions if sec.type == SHT_GNU_VERNEED else out.needed):
                continue  # read in an earlier pass
            strtab = out.sections[sec.link]
            body = ranges.get(sec.offset, sec.offset + sec.size)
            strings = ranges.get(strtab.offset, strtab.offset + strtab.size)
            if body is None or strings is None:
                out.need += [(sec.offset, sec.offset + sec.size), (strtab.offset, strtab.offset + strtab.size)]
            elif sec.type == SHT_GNU_VERNEED:
                out.versions = max_versions(parse_verneed(body, sec.info, strings))
            else:
                out.needed = parse_needed(body, strings)
    out.fatbin_sections = [s for s in out.sections if s.name in (".nv_fatbin", ".nv_fatb")]
    inside = [c for c in out.found if any(s.offset <= c.offset < s.offset + s.size for s in out.fatbin_sections)]
    out.containers, out.stray = inside, len(out.found) - len(inside)


def rescan(out: ObjectScan, chunks: Iterable[bytes]) -> None:
    """Second pass: keep the ranges ``out.need`` names from the object's bytes (only as far as they
    reach) and complete the scan with them."""
    ranges = Ranges()
    for lo, hi in out.need:
        ranges.want(lo, hi)
    pos, limit = 0, ranges.done_by()
    for chunk in chunks:
        ranges.feed(chunk, pos)
        pos += len(chunk)
        if pos >= limit:
            break
    complete(out, ranges)


def scan_object(chunks: Iterable[bytes]) -> ObjectScan:
    """Scan a shared object given as chunks in file order (one pass; see ObjectScan.need)."""
    scanner = ObjectScanner()
    for chunk in chunks:
        scanner.feed(chunk)
    return scanner.finish()


def scan_bytes(data: bytes, chunk: int = 1 << 20) -> ObjectScan:
    """Scan a whole shared object held in memory (two passes when the first leaves ranges out)."""
    result = scan_object(data[i : i + chunk] for i in range(0, len(data), chunk))
    if result.need:
        rescan(result, (data[i : i + chunk] for i in range(0, len(data), chunk)))
    return result


def summarize(containers: Iterable[Container]) -> dict[str, dict[int, tuple[int, int]]]:
    """Per kind ("sass"/"ptx") and arch: (containers carrying it, entries)."""
    out: dict[str, dict[int, tuple[int, int]]] = {"sass": {}, "ptx": {}}
    for c in containers:
        seen: set[tuple[str, int]] = set()
        for e in c.entries:
            n_cont, n_ent = out[e.kind].get(e.arch, (0, 0))
            first = (e.kind, e.arch) not in seen
            seen.add((e.kind, e.arch))
            out[e.kind][e.arch] = (n_cont + (1 if first else 0), n_ent + 1)
    return out


# --------------------------------------------------------------------------- an installed object's links

DT_SONAME = 14
DT_RPATH = 15
DT_RUNPATH = 29
_MAX_DYNAMIC = 1 << 20  # a .dynamic section or its string table larger than this is not a real one


@dataclass(frozen=True)
class Links:
    """What the dynamic loader reads from one ELF object: its DT_NEEDED names, DT_RPATH, DT_RUNPATH, DT_SONAME."""

    needed: tuple[str, ...] = ()
    rpath: str | None = None
    runpath: str | None = None
    soname: str | None = None


def parse_links(dynamic: bytes, string: Callable[[int], str]) -> Links:
    """The loader's entries of a `.dynamic` section (64-bit little-endian); ``string(offset)`` reads a name
    from its string table (a large library's table holds every exported symbol: tens of MB, never read whole)."""
    needed: list[str] = []
    values: dict[int, str] = {}
    for pos in range(0, len(dynamic) - 15, 16):
        tag, val = struct.unpack_from("<qQ", dynamic, pos)
        if tag == 0:
            break
        if tag == DT_NEEDED:
            needed.append(string(val))
        elif tag in (DT_SONAME, DT_RPATH, DT_RUNPATH):
            values[tag] = string(val)
    return Links(tuple(needed), values.get(DT_RPATH), values.get(DT_RUNPATH), values.get(DT_SONAME))


def read_links(fh: BinaryIO) -> Links:
    """The loader's entries of an ELF file opened for reading: reads its header, its section table, the
    `.dynamic` section and the few strings it names, by seeking (a 1 GB libtensorflow_cc.so costs a few kB).
    Raises FormatError for a file that is not a 64-bit little-endian ELF object or whose tables do not fit."""
    shoff, entsize, num, _ = elf_header(fh.read(64))
    if entsize < 64 or num == 0 or num > 65535:
        msg = "no section header table"
        raise FormatError(msg)
    fh.seek(shoff)
    sht = fh.read(entsize * num)
    if len(sht) < entsize * num:
        msg = "section header table past the end of the file"
        raise FormatError(msg)
    sections = elf_sections(sht, entsize, None)
    dyn = next((s for s in sections if s.type == SHT_DYNAMIC), None)
    if dyn is None:
        return Links()  # a static object: nothing for the loader
    if dyn.link >= len(sections) or dyn.size > _MAX_DYNAMIC:
        msg = "bad .dynamic section"
        raise FormatError(msg)
    strtab = sections[dyn.link]
    fh.seek(dyn.offset)
    dynamic = fh.read(dyn.size)

    def string(offset: int) -> str:
        if offset >= strtab.size:
            msg = "a .dynamic string outside its table"
            raise FormatError(msg)
        fh.seek(strtab.offset + offset)
        return _cstr(fh.read(min(4096, strtab.size - offset)), 0)

    return parse_links(dynamic, string)
