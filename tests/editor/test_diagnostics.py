"""Config errors reach the editor as `textDocument/publishDiagnostics` on the config file's URI: when a save is
rejected, when an editor attaches while the file is broken, and cleared (an empty list) once it is fixed."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

import pytest
import pytest_asyncio
from lsprotocol import types as lsp

from mcphost.editor import protocol as p
from tests.editor.support import SOON, config_uri
from tests.editor_client import Editor, editor
from tests.helpers import Daemon, Sandbox, daemon

pytestmark = pytest.mark.asyncio(loop_scope="module")

# The bad key is indented and followed by blanks: the range runs from the key to the end of the line's content.
BROKEN_LINE = '    write = "maybe"   '


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def watched(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Daemon]:
    box = Sandbox(tmp_path_factory.mktemp("diagnostics"))
    box.write_config(good(box))
    async with daemon(box) as d:
        yield d


def good(box: Sandbox) -> str:
    return box.probe_server() + '[permissions]\nread = "allow"\nwrite = "ask"\n'


def broken(box: Sandbox) -> tuple[str, int]:
    """The broken text, and the 0-based line of the bad key."""
    text = box.probe_server() + f'[permissions]\nread = "allow"\n{BROKEN_LINE}\n'
    return text, text.splitlines().index(BROKEN_LINE)


def diagnostics(ed: Editor, uri: str) -> Sequence[lsp.Diagnostic] | None:
    return ed.client.diagnostics.get(uri)


def cleared(ed: Editor, uri: str) -> bool:
    """An empty list was published for the file (not merely nothing at all)."""
    found = diagnostics(ed, uri)
    return found is not None and len(found) == 0


def assert_points_at_the_bad_key(found: Sequence[lsp.Diagnostic] | None, line: int) -> None:
    assert found is not None and len(found) == 1, found
    (diagnostic,) = found
    assert diagnostic.range == lsp.Range(
        start=lsp.Position(line=line, character=4),
        end=lsp.Position(line=line, character=len(BROKEN_LINE.rstrip())),
    )
    assert diagnostic.severity == lsp.DiagnosticSeverity.Error
    assert "permissions.write" in diagnostic.message
    for allowed in ("'allow'", "'ask'", "'confirm'", "'deny'"):
        assert allowed in diagnostic.message
    assert "maybe" in diagnostic.message


async def test_saving_an_invalid_config_publishes_diagnostics_and_fixing_clears_them(watched: Daemon) -> None:
    box = watched.box
    uri = config_uri(box.config)
    async with editor(watched.editor_socket) as ed:
        assert diagnostics(ed, uri) is None  # a good config publishes nothing on attach
        text, line = broken(box)
        box.write_config(text)
        await ed.wait_for(lambda: bool(diagnostics(ed, uri)), SOON)
        assert_points_at_the_bad_key(diagnostics(ed, uri), line)
        status = p.StatusPayload.model_validate(await ed.request(p.STATUS))
        assert status.config_error is not None and "permissions.write" in status.config_error

        box.write_config(good(box))
        await ed.wait_for(lambda: cleared(ed, uri), SOON)
        assert (await ed.request(p.STATUS)).get("config_error") is None


async def test_an_editor_attaching_while_the_config_is_broken_gets_its_diagnostics(watched: Daemon) -> None:
    box = watched.box
    uri = config_uri(box.config)
    async with editor(watched.editor_socket, name="first") as first:
        text, line = broken(box)
        box.write_config(text)
        await first.wait_for(lambda: bool(diagnostics(first, uri)), SOON)  # the daemon has seen the save
        async with editor(watched.editor_socket, name="latecomer") as late:
            await late.wait_for(lambda: bool(diagnostics(late, uri)), SOON)
            assert_points_at_the_bad_key(diagnostics(late, uri), line)
            box.write_config(good(box))
            await late.wait_for(lambda: cleared(late, uri), SOON)
        await first.wait_for(lambda: cleared(first, uri), SOON)
