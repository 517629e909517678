"""`mcphost status`: the daemons running, their upstreams, attached editors and pending prompts."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mcphost import discovery
from mcphost.cli.channel import CONFIG, STATUS, ask
from mcphost.cli.common import add_output_flag, config_file_said, config_in_force, print_json, table_width
from mcphost.console import Column, Table, ascii_only, safe, safe_lines
from mcphost.discovery import NoDaemon


def register(p: argparse.ArgumentParser, parent: argparse.ArgumentParser) -> None:
    add_output_flag(p)
    p.add_argument("--wide", action="store_true", help="cut no cell to fit the terminal (a pipe is never cut)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:

    reports = _collect(discovery.running())
    # A daemon that is running yet cannot say how it is (hung, stopped, an older version): a script should know.
    code = 1 if any("error" in report for report in reports) else 0
    if args.output == "json":
        print_json({"daemons": reports})
        return code
    if not reports:
        print("No mcphost daemon is running. Start one with `mcphost serve`, or open VS Code with the extension.")
        return 0
    width = table_width(args)
    for report in reports:
        print(_describe(report, width))
    return code


def _collect(daemons: list[dict[str, Any]]) -> list[dict[str, Any]]:

    reports = []
    for info in daemons:
        report: dict[str, Any] = {
            "pid": info.get("pid"),
            "discovery_file": info.get("discovery_file"),
            "started_at": info.get("started_at"),
        }
        if isinstance(info.get("api"), dict):
            # The REST API's own token: scripts read history with it, and it opens nothing else.
            report["api"] = info["api"]
        if not info.get("editor_socket"):
            report["error"] = "this daemon has no editor socket (an older version?)"
            reports.append(report)
            continue
        try:
            report.update(ask(info, "mcphost status", STATUS))
        except NoDaemon as exc:
            report["error"] = f"cannot ask it for its status: {exc}"
        else:
            report["config_file"] = _config_file(info, report.get("config_path"))
        reports.append(report)
    return reports


def _config_file(info: dict[str, Any], path: Any) -> str:
    """Where the config the daemon runs on comes from: "present" (its file is there), "removed" (the file is gone, and
    the config the daemon last read from it stays in force, as it does while the file is deleted), "none" (no file,
    and the built-in default is in force), "unknown" (no file, and the daemon did not say). The daemon is asked only
    when the file is gone: whether it had read one is what this command cannot see."""
    if not isinstance(path, str):
        return "unknown"
    if Path(path).exists():
        return "present"
    try:
        shown = ask(info, "mcphost status", CONFIG)
    except NoDaemon:
        return "unknown"
    return config_file_said(shown)


def _config_line(report: dict[str, Any]) -> str:
    return config_in_force(str(report.get("config_path")), str(report.get("config_file", "present")))


INDENT = "    "
SERVERS = (
    Column("SERVER", flex=True, floor=12),
    Column("STATE"),
    Column("TOOLS", right=True),
    Column("PROTOCOL"),
    Column("ERROR", flex=True),
)
EDITORS = (Column("EDITOR", flex=True, floor=16), Column("VIA"), Column("SINCE"))
PROMPTS = (Column("VARIANT"), Column("TOOL", flex=True, floor=16), Column("EXPIRES"))


def _table(columns: tuple[Column, ...], rows: Sequence[Sequence[str]], width: int | None) -> list[str]:
    table = Table(columns, width=None if width is None else width - len(INDENT), ascii_only=ascii_only())
    return [INDENT + line for line in table.lines(rows)]


def _describe(report: dict[str, Any], width: int | None = None) -> str:
    # Every value may come from another program (a daemon of another version, an upstream's error): escaped.
    lines = [
        f"daemon {safe(report.get('pid'))} (mcphost {safe(report.get('version', '?'))}, started "
        f"{safe(report.get('started_at'))})"
    ]
    if "error" in report:
        lines.append(f"  {safe(report['error'])}")
        return "\n".join(lines)
    mcp = report.get("mcp") or {}
    lines.append(f"  agent endpoint  {safe(mcp.get('url'))}  (token: see {safe(report.get('discovery_file'))})")
    api = report.get("api") or {}
    if api.get("url"):
        lines.append(f"  REST API        {safe(api['url'])}  (its own token: see the same file)")
    lines.append(f"  editor socket   {safe(report.get('editor_socket'))}")
    lines.append(f"  config          {safe(_config_line(report))}")
    if report.get("config_error"):
        error = safe_lines(str(report["config_error"])) + "\nthe last good config stays in force until it is fixed"
        lines.append("  config error    " + error.replace("\n", "\n                  "))
    lines.append(f"  activity log    {safe(report.get('log_path'))}")
    if report.get("log_error"):
        lines.append(f"  log error       {safe(report['log_error'])}")
    export = report.get("export")
    if isinstance(export, dict):
        lines.extend(_export_lines(export))
    servers = report.get("servers") or []
    up = sum(1 for s in servers if s.get("state") == "connected")
    lines.append(f"  upstreams       {up}/{len(servers)} connected")
    if servers:
        listed = [
            (
                str(s.get("name")),
                str(s.get("state")),
                str(s.get("tools", "")),
                str(s.get("protocol") or ""),
                str(s.get("error") or ""),
            )
            for s in servers
        ]
        lines.extend(_table(SERVERS, listed, width))
    editors = report.get("editors") or []
    lines.append(f"  editors         {len(editors)} attached")
    if editors:
        attached = [(str(e.get("name")), str(e.get("transport")), str(e.get("attached_at"))) for e in editors]
        lines.extend(_table(EDITORS, attached, width))
    prompts = report.get("prompts") or []
    lines.append(f"  prompts         {safe(report.get('pending', 0))} pending")
    if prompts:
        waiting = [
            (str(p.get("variant")), f"{p.get('server')}:{p.get('tool')}", str(p.get("expires_at"))) for p in prompts
        ]
        lines.extend(_table(PROMPTS, waiting, width))
    return "\n".join(lines)


def _export_lines(export: dict[str, Any]) -> list[str]:
    """The OTLP export: where to, and what became of the records; the last problem while it may still hold."""
    counts = f"{safe(export.get('exported', 0))} exported, {safe(export.get('queued', 0))} queued, "
    counts += f"{safe(export.get('dropped', 0))} dropped"
    lines = [f"  OTLP export     {safe(export.get('endpoint'))}  ({counts})"]
    error, at = export.get("last_error"), export.get("last_error_at")
    if error:
        recovered = export.get("last_export_at") and at and str(export["last_export_at"]) > str(at)
        since = " (since recovered)" if recovered else ""
        lines.append(f"  export error    {safe(error)}  at {safe(at)}{since}")
    return lines
