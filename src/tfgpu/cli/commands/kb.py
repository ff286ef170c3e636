"""`tfgpu kb status` and `tfgpu kb update`: which knowledge the doctor uses and how old it is; newer knowledge
without a new tfgpu release (tfgpu.tools.kbupdate: verified, loaded by the knowledge base's own loader, never code)."""

from __future__ import annotations

from typing import Any, Optional

import typer

from tfgpu.cli.options import typer_option

kb_app = typer.Typer(
    name="kb", no_args_is_help=True, add_completion=False,
    help="The knowledge base: which data is in use and how old it is; fetch newer data (tfgpu kb update).",
)


def _days(age: Any) -> str:
    if not isinstance(age, int):
        return "age unknown"
    return "1 day old" if age == 1 else f"{age} days old"


@kb_app.command("status")
def status(json_out: bool = typer_option("json", help="Print the versioned JSON document (tfgpu.kb-status/1).")) -> int:
    """Say which knowledge is in use (bundled with tfgpu, or fetched by `tfgpu kb update`) and how old it is."""
    import datetime as dt

    from tfgpu.kb.freshness import STALE_DAYS
    from tfgpu.render import output
    from tfgpu.tools.kbupdate import status as kb_status

    doc = kb_status(dt.date.today())
    if json_out:
        output.write_json(doc)
        return 0
    used = doc["in_use"]
    rows: list[list[Any]] = [[("knowledge in use: ", "bold"), f"{used['source']} {used['data_version']} "
                              f"(data of {used['date']}, {_days(used['age_days'])})", f"  {used['path']}"]]
    bundled = doc["bundled"]
    rows.append([f"bundled with tfgpu: {bundled['data_version']} ({_days(bundled['age_days'])})"])
    for f in doc["fetched"]:
        rows.append([f"fetched: {f['data_version']} from {f.get('url') or '?'} on {f.get('fetched') or '?'} "
                     f"(sha256 {str(f.get('sha256') or '?')[:16]}...)"])
    if not doc["fetched"]:
        rows.append([f"fetched: none (in {doc['store']})"])
    if doc["only_bundled"]:
        rows.append([("TFGPU_KB_DATA=bundled: fetched knowledge is ignored", "yellow")])
    if used["stale"]:
        rows.append([(f"older than {STALE_DAYS} days: `tfgpu kb update` fetches newer knowledge", "yellow")])
    output.lines(rows)
    return 0


@kb_app.command("update")
def update(
    source: Optional[str] = typer.Option(
        None, "--from", metavar="URL",
        help="The knowledge index to read: an https URL, a local index.json or its directory (default: "
             "TFGPU_KB_URL, else the project's).",
    ),
    sha256: Optional[str] = typer.Option(
        None, "--sha256", metavar="SHA256", help="Refuse the index unless it has this sha256 (from the release notes)."),
    json_out: bool = typer_option("json", help="Print the versioned JSON document (tfgpu.kb-update/1): what happened."),
) -> int:
    """Fetch newer knowledge and use it from now on: verified (sha256 from the index), read by tfgpu's own loader.

    Exit 0 updated or already up to date; 1 when the index or bundle cannot be fetched; 2 when either is refused
    (tampered, truncated, older than the knowledge in use, or data the loader refuses). The knowledge in use stays
    as it was unless everything checked out."""
    from tfgpu.render import output
    from tfgpu.tools.kbupdate import update as kb_update

    result = kb_update(source, pinned=sha256)
    if json_out:
        output.write_json(result)
    elif result["updated"]:
        output.say(("updated: ", "bold green"), f"knowledge {result['data_version']} (was {result['previous']['source']} "
                   f"{result['previous']['data_version']}), sha256 {result['sha256']}, in {result['path']}")
    else:
        output.say(f"already up to date: knowledge {result['data_version']} is in use ({result['previous']['source']})")
    return 0


def register(app: typer.Typer) -> None:
    app.add_typer(kb_app, name="kb")
