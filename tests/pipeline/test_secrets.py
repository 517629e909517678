"""No secret reaches the disk or a prompt: every kind of credential, planted in every field an agent or an upstream
controls, accepted calls and rejected ones alike; then every file the host wrote is searched for it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mcphost.gateway.service import CallContext
from mcphost.intent import ToolVariant
from tests.pipeline.conftest import ScriptedApprover

ARGUMENTS_MAX_BYTES = 4096  # [log] arguments_max_bytes by default

# (kind, what is planted, a part of it that must never be found again)
SECRETS = [
    ("aws access key", "AKIAQWERTYUIOPASDFGH", "QWERTYUIOPASDFGH"),
    ("github token", "ghp_" + "Ab3" * 12, "Ab3Ab3Ab3Ab3Ab3"),
    (
        "jwt",
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJwbGFudGVkIn0.c2lnbmF0dXJlLXRoYXQtaXMtbG9uZy1lbm91Z2g",
        "c2lnbmF0dXJlLXRoYXQtaXMtbG9uZy1lbm91Z2g",
    ),
    (
        "private key",
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEplantedKEYmaterialQWxhZGRpbjpvcGVuIHNlc2FtZQ==\n"
        "-----END RSA PRIVATE KEY-----",
        "MIIEplantedKEYmaterial",
    ),
    ("bearer header", "Authorization: Bearer zXq9PlantedBearer77Tok", "zXq9PlantedBearer77Tok"),
    ("password", "password=correcthorsebatterystaple9", "correcthorsebatterystaple9"),
    # Split at its first `:` as a `server:tool` name, a URL leaves `//user:...@host` (no scheme) for the tool.
    ("url password", "https://agent:Plant3dUrlPassw0rdX@example.com/x", "Plant3dUrlPassw0rdX"),
    (
        "slack webhook",
        "https://hooks.slack.com/services/T0PLANT/B0PLANT/plantedWebhookSecret42x",
        "plantedWebhookSecret42",
    ),
    ("password in JSON", '{"password": "correcthorsebattery42"}', "correcthorsebattery42"),
]


def places(secret: str) -> dict[str, tuple[ToolVariant, dict[str, Any]]]:
    """Every field of a call an agent controls, each holding `secret` (the upstream echoes `text` back)."""
    read = {"operation_type": "read"}
    write = {"operation_type": "write"}
    return {
        "tool name": (ToolVariant.READ, {"name": f"probe:{secret}", "intent": read}),
        "server name": (ToolVariant.READ, {"name": f"{secret}:read_notes", "intent": read}),
        "operation_type": (ToolVariant.READ, {"name": "probe:read_notes", "intent": {"operation_type": secret}}),
        "data_sensitivity": (
            ToolVariant.READ,
            {"name": "probe:read_notes", "intent": {**read, "data_sensitivity": secret}},
        ),
        "reason": (ToolVariant.WRITE, {"name": "probe:plain_echo", "intent": {**write, "reason": f"use {secret}"}}),
        "flat reason": (
            ToolVariant.WRITE,
            {"name": "probe:plain_echo", "intent_operation_type": "write", "intent_reason": f"use {secret}"},
        ),
        "intent as a string": (
            ToolVariant.WRITE,
            {"name": "probe:plain_echo", "intent": json.dumps({**write, "reason": secret})},
        ),
        "unknown parameter name": (ToolVariant.READ, {"name": "probe:read_notes", "intent": read, secret: 1}),
        "argument name": (ToolVariant.WRITE, {"name": "probe:plain_echo", "intent": write, "args": {secret: "x"}}),
        "argument value (echoed by the upstream)": (
            ToolVariant.WRITE,
            {"name": "probe:plain_echo", "intent": write, "args": {"text": secret}},
        ),
        "nested argument value": (
            ToolVariant.WRITE,
            {"name": "probe:plain_echo", "intent": write, "args": {"text": "x", "deep": {"list": [secret]}}},
        ),
        "args_json": (
            ToolVariant.WRITE,
            {"name": "probe:plain_echo", "intent": write, "args_json": json.dumps({"text": secret})},
        ),
        "wrong variant for the intent": (ToolVariant.READ, {"name": "probe:plain_echo", "intent": {**write, "x": 1}}),
        # The preview of arguments too large to keep whole is cut at [log] arguments_max_bytes: the cut goes through
        # the middle of an argument's name, as JSON text `{"pad":"BB…","<secret>":1}` puts it.
        "argument name across the preview's cut": (
            ToolVariant.WRITE,
            {
                "name": "probe:plain_echo",
                "intent": write,
                "args": {"pad": "B" * (ARGUMENTS_MAX_BYTES - 14 - len(json.dumps(secret)) // 2), secret: 1},
            },
        ),
        # An upstream's answer that quotes JSON as a string: the secret's quotes are escaped there.
        "JSON text in an argument (echoed)": (
            ToolVariant.WRITE,
            {"name": "probe:plain_echo", "intent": write, "args": {"text": json.dumps({"body": secret})}},
        ),
    }


@pytest.mark.parametrize(("kind", "secret", "needle"), SECRETS, ids=[s[0] for s in SECRETS])
async def test_a_planted_secret_reaches_no_file_and_no_prompt(
    in_process: Any, tmp_path: Path, kind: str, secret: str, needle: str
) -> None:
    person = ScriptedApprover()
    async with in_process() as env:
        env.host.broker.attach(person)
        for variant, arguments in places(secret).values():
            await env.host.gateway.call(variant, arguments, CallContext(session_id="s", client=f"agent {secret}"))
        env.host.activity.close()
    calls = [r for r in env.box.records() if r["type"] == "tool_call"]
    assert len(calls) == len(places(secret)), "every call, rejected or not, leaves a record"
    assert any(r["status"] == "success" for r in calls) and any(r["status"] == "rejected" for r in calls)
    assert person.asked, "some calls were put to the person"
    leaked_to_disk = [
        p for p in sorted(env.box.root.rglob("*")) if p.is_file() and needle in p.read_text("utf-8", "replace")
    ]
    leaked_to_prompts = [r.tool for r in person.asked if needle in r.model_dump_json()]
    assert leaked_to_disk == [] and leaked_to_prompts == []
