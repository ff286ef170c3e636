#!/usr/bin/env python3
"""Regenerate the `devices` block of compat/gpus.toml: NVIDIA PCI device ID -> compute capability.

Upstream: the PCI ID Repository's pci.ids (https://pci-ids.ucw.cz/, mirrored at
https://github.com/pciutils/pciids; Debian ships it in the `hwdata` package as /usr/share/misc/pci.ids).
Each NVIDIA (vendor 10de) device line reads "<id>  <chip> [<marketing name> / <name>]", e.g.
"139b  GM107M [GeForce GTX 960M]".

The join, in two steps, uses no fact that is not in one of the two sources:
  1. name: a device whose marketing name is, after tfgpu's GPU-name normalisation
     (tfgpu.kb.knowledge.normalize_gpu_name), a model of compat/gpus.toml `models` (NVIDIA's CUDA GPUs page)
     gets that model's compute capability (via = "name").
  2. chip: a compute capability belongs to the silicon, so when more than half of the named devices
     of a chip family (GM107, GA104, ...; the chip column without its M/GL/GLM variant suffix) that
     step 1 resolved agree on one value, the chip's other devices get it too (via = "chip"): "GM107M
     [GeForce GTX 960M]" gets GM107's 5.0 from the GeForce GTX 750 Ti / Quadro K2200 / Tesla M10 rows,
     not the GeForce GTX 960's (GM206) 5.2. A named device whose chip's majority says otherwise (pci.ids
     lists "0fc5 GK107 [GeForce GT 1030]"; the GT 1030 is a GP108 part) gets neither value. A chip
     without such a majority gets nothing from this step.
A device whose own names disagree, or that neither step resolves, has no capability: tfgpu then says
"unknown" rather than guess. Such a device is still listed (cc = "", via = "unresolved") when it shares
a marketing name with a resolved one, so that the name alone stays ambiguous ("GeForce GT 730" is
GF108 or GK208). Audio functions, bridges, USB controllers and NVSwitches are skipped.

Usage:
  python3 scripts/update_gpu_ids.py [--pci-ids PATH]            # print a unified diff (exit 1 if stale)
  python3 scripts/update_gpu_ids.py [--pci-ids PATH] --force    # write compat/gpus.toml
PATH defaults to $TFGPU_PCI_IDS, then /usr/share/hwdata/pci.ids, /usr/share/misc/pci.ids; without any
the script says so and skips (exit 0). Needs tfgpu importable (nox -s update_compat sets PYTHONPATH).

Output is deterministic (rows by device ID).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

import tomllib

from tfgpu.kb.gpunames import normalize_gpu_name

sys.path.insert(0, str(Path(__file__).resolve().parent))  # scripts/_table_io.py
from _table_io import replace_block, skip_or_fail, write_or_diff

ROOT = Path(__file__).resolve().parent.parent
GPUS_TOML = ROOT / "compat" / "gpus.toml"
DEFAULT_PATHS = ("/usr/share/hwdata/pci.ids", "/usr/share/misc/pci.ids")
SOURCE = "pci-ids"
NOT_A_GPU = re.compile(r"audio|usb|bridge|pcie host|root port|nvswitch|reserved|smbus|controller|memory", re.I)
CHIP = re.compile(r"^((?:GF|GK|GM|GP|GV|TU|GA|AD|GH|GB)\d{2,3}B?)(?:GLM|GL|GM|M)?$")
BLOCK = re.compile(r"^devices = \[\n.*?^\]\n", re.M | re.S)
BLOCK_ANCHOR = "# [sources] comes last"


def parse_pci_ids(text: str) -> tuple[str, list[tuple[str, str, str]]]:
    """pci.ids -> (its Version header, [(device id, chip column, description)] of vendor 10de)."""
    version = ""
    if m := re.search(r"^#\s*Version:\s*(\S+)", text, re.M):
        version = m.group(1)
    out = []
    in_nvidia = False
    for line in text.splitlines():
        if re.match(r"^[0-9a-f]{4}  ", line):
            in_nvidia = line.startswith("10de  ")
            continue
        if not in_nvidia or not line.startswith("\t") or line.startswith("\t\t"):
            continue
        m = re.match(r"^\t([0-9a-f]{4})  (.*)$", line)
        if m:
            desc = m.group(2).strip()
            chip = desc.split("[", 1)[0].strip()
            out.append((m.group(1), chip, desc))
    return version, out


def chip_family(chip_column: str) -> str | None:
    """"GM107GLM" -> "GM107", "GB203M / GN22" -> "GB203", "GK208BM" -> "GK208" (a B after a three-digit chip is
    a revision of the same die: pci.ids lists GK110B next to GK110, GK208B next to GK208, TU117B next to TU117),
    "GB10B" -> "GB10B" (Tegra: its own family)."""
    first = chip_column.split("/", 1)[0].strip().split(" ", 1)[0]
    m = CHIP.match(first)
    if not m:
        return None
    family = m.group(1)
    return family[:-1] if re.fullmatch(r"[A-Z]{2}\d{3}B", family) else family


def marketing_names(desc: str) -> list[str]:
    """The bracketed names of a description, split on " / "; a fragment that is only a number
    ("GeForce GT 640M / 645M") borrows the first name's words before its number."""
    m = re.search(r"\[([^\]]+)\]\s*$", desc)
    if not m:
        return []
    parts = [p.strip() for p in m.group(1).split(" / ") if p.strip()]
    out = []
    for part in parts:
        if out and re.match(r"^\d", part):
            head = re.match(r"^(.*?)\s*\d", out[0])
            part = f"{head.group(1)} {part}" if head and head.group(1) else part
        out.append(part)
    return [p for p in out if normalize_gpu_name(p)]


def build_rows(devices: list[tuple[str, str, str]], models: dict[str, str]) -> list[dict[str, str]]:
    gpus = [(dev_id, chip, desc) for dev_id, chip, desc in devices if not NOT_A_GPU.search(desc)]
    named: dict[str, set[str]] = {}
    for dev_id, _chip, desc in gpus:
        named[dev_id] = {models[k] for k in (normalize_gpu_name(n) for n in marketing_names(desc)) if k in models}
    votes: dict[str, list[str]] = {}
    for dev_id, chip, _desc in gpus:
        family = chip_family(chip)
        if family and len(named[dev_id]) == 1:
            votes.setdefault(family, []).extend(named[dev_id])
    chip_cc = {family: top for family, ccs in votes.items()
               for top in [max(set(ccs), key=ccs.count)] if ccs.count(top) * 2 > len(ccs)}
    rows, unresolved = [], []
    for dev_id, chip, desc in gpus:
        family = chip_family(chip)
        ccs = named[dev_id]
        family_cc = chip_cc.get(family or "")
        row = {"id": dev_id, "chip": family or chip, "pci_name": desc}
        if len(ccs) == 1 and family_cc in (None, *ccs):  # NVIDIA's table names it; its chip agrees
            rows.append({**row, "cc": next(iter(ccs)), "via": "name"})
        elif not ccs and family_cc:
            rows.append({**row, "cc": family_cc, "via": f"chip {family}"})
        else:  # unnamed on an unresolved chip, or its names and chip disagree
            unresolved.append({**row, "cc": "", "via": "unresolved"})
    # An unresolved device that shares a marketing name with a resolved one is listed with no capability,
    # so that the name alone resolves to nothing: "GeForce GT 730" is GF108 (2.1) or GK208 (3.5).
    resolved_names = {normalize_gpu_name(n) for r in rows for n in marketing_names(r["pci_name"])}
    rows += [r for r in unresolved if resolved_names & {normalize_gpu_name(n) for n in marketing_names(r["pci_name"])}]
    return sorted(rows, key=lambda r: r["id"])


def _vkey(version: str) -> tuple[int, ...]:
    """pci.ids versions are dates: "2026.08.22"."""
    return tuple(int(p) for p in re.findall(r"\d+", version))


def _q(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def render_block(rows: list[dict[str, str]], version: str) -> str:
    lines = [f"# GENERATED by scripts/update_gpu_ids.py from pci.ids version {version}: do not edit by hand.",
             "devices = ["]
    for r in rows:
        lines.append(f'  {{ id = {_q(r["id"])}, chip = {_q(r["chip"])}, cc = {_q(r["cc"])}, via = {_q(r["via"])}, '
                     f'pci_name = {_q(r["pci_name"])}, source = "{SOURCE}" }},')
    lines.append("]")
    return "\n".join(lines) + "\n"


def regenerate(text: str, block: str) -> str:
    """Put ``block`` (with its comment line) in place of the current one, or before [sources]."""
    text = re.sub(r"^# GENERATED by scripts/update_gpu_ids\.py.*\n", "", text, flags=re.M)
    return replace_block(text, BLOCK, block, BLOCK_ANCHOR, GPUS_TOML)


def table_models(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for row in tomllib.loads(text)["models"]:
        for name in (row["name"], *(a.strip() for a in str(row.get("aliases", "")).split(",") if a.strip())):
            out[normalize_gpu_name(name)] = str(row["cc"])
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pci-ids", help="a pci.ids file (default: $TFGPU_PCI_IDS, then the hwdata paths)")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--force", action="store_true", help="write compat/gpus.toml")
    mode.add_argument("--check", action="store_true", help="print a diff; exit 1 when out of date (default)")
    ap.add_argument("--allow-older", action="store_true", help="regenerate from a pci.ids older than the table's")
    ap.add_argument("--file", default=str(GPUS_TOML), help=argparse.SUPPRESS)
    args, _unknown = ap.parse_known_args(argv)  # nox update_compat passes every script the same posargs
    given = args.pci_ids or os.environ.get("TFGPU_PCI_IDS") or ""
    if given and not Path(given).is_file():
        print(f"update_gpu_ids: {given} is not a pci.ids file", file=sys.stderr)
        return 2
    candidates = [given, *DEFAULT_PATHS]
    source = next((c for c in candidates if c and Path(c).is_file()), None)
    if source is None:
        return skip_or_fail("update_gpu_ids", "no pci.ids (--pci-ids, TFGPU_PCI_IDS, or apt-get install hwdata)")
    version, devices = parse_pci_ids(Path(source).read_text(encoding="utf-8", errors="replace"))
    path = Path(args.file)
    old = path.read_text(encoding="utf-8")
    made_from = re.search(r"^# GENERATED by scripts/update_gpu_ids\.py from pci\.ids version (\S+):", old, re.M)
    if made_from and _vkey(version) < _vkey(made_from.group(1)) and not args.allow_older:
        print(f"update_gpu_ids: {source} is pci.ids {version or '(no version)'}, older than the "
              f"{made_from.group(1)} the table was made from; skipped (--pci-ids a newer file, or --allow-older)")
        return 0
    rows = build_rows(devices, table_models(old))
    new = regenerate(old, render_block(rows, version))
    return write_or_diff(path, old, new, force=args.force, what=f"devices block ({len(rows)} devices, pci.ids {version})")


if __name__ == "__main__":
    sys.exit(main())
