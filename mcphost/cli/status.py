"""`mcphost status`: the daemons running, their upstreams, attached editors and pending prompts."""

from __future__ import annotations

import argparse
from typing import Any

from mcphost import discovery
from mcphost.cli.channel import STATUS, ask
from mcphost.cli.common import add_output_flag, print_json
from mcphost.console import safe
from mcphost.discovery import NoDaemon


def register(p: argparse.ArgumentParser, parent: argparse.ArgumentParser) -> None:
    add_output_flag(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:

    reports = _collect(discovery.running())
    if args.output == "json":
        print_json({"daemons": reports})
        return 0
    if not reports:
        print("No mcphost daemon is running. Start one with `mcphost serve`, or open VS Code with the extension.")
        return 0
    for report in reports:
        print(_describe(report))
    return 0


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
        reports.append(report)
    return reports


def _describe(report: dict[str, Any]) -> str:

    lines = [f"daemon {report.get('pid')} (mcphost {report.get('version', '?')}, started {report.get('started_at')})"]
    if "error" in report:
        lines.append(f"  {report['error']}")
        return "\n".join(lines)
    mcp = report.get("mcp") or {}
    lines.append(f"  agent endpoint  {mcp.get('url')}  (token: see {report.get('discovery_file')})")
    api = report.get("api") or {}
    if api.get("url"):
        lines.append(f"  REST API        {api['url']}  (its own token: see the same file)")
    lines.append(f"  editor socket   {report.get('editor_socket')}")
    lines.append(f"  config          {report.get('config_path')}")
    if report.get("config_error"):
        lines.append("  config error    " + str(report["config_error"]).replace("\n", "\n                  "))
    lines.append(f"  activity log    {report.get('log_path')}")
    if report.get("log_error"):
        lines.append(f"  log error       {report['log_error']}")
    servers = report.get("servers") or []
    up = sum(1 for s in servers if s.get("state") == "connected")
    lines.append(f"  upstreams       {up}/{len(servers)} connected")
    for server in servers:
        error = f"  ({server['error']})" if server.get("error") else ""
        lines.append(f"    {server['name']:<16} {server['state']:<11} {server['tools']} tools{error}")
    editors = report.get("editors") or []
    lines.append(f"  editors         {len(editors)} attached")
    for editor in editors:
        lines.append(f"    {safe(editor['name'])} via {editor['transport']} since {editor['attached_at']}")
    prompts = report.get("prompts") or []
    lines.append(f"  prompts         {report.get('pending', 0)} pending")
    for prompt in prompts:
        lines.append(
            f"    {prompt['variant']} {safe(prompt['server'])}:{safe(prompt['tool'])} until {prompt['expires_at']}"
        )
    return "\n".join(lines)
