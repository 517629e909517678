"""The agent-facing MCP server: four tools, thin handlers over `Gateway`."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import hmac
import itertools
import json
import logging
import secrets
import time
import uuid
import weakref
from collections.abc import Awaitable, Callable, Container, Mapping
from typing import Any

import mcp_types as types
import orjson
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.shared.inbound import InboundModernRoute, classify_inbound_request
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS, PROTOCOL_VERSION_META_KEY, SERVER_INFO_META_KEY
from mcp_types.methods import serialize_server_result, validate_client_request
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION, MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from mcphost import __version__
from mcphost.approval.approvals import Elicit, Elicited, InputRequired
from mcphost.errors import ErrorCode, GatewayError
from mcphost.gateway.service import CallContext, CallOutcome, Gateway
from mcphost.gateway.tools import LEGACY_CALL_TOOL, LEGACY_CALL_TOOL_MESSAGE, RETRIEVE_TOOLS, tool_definitions
from mcphost.intent import ToolVariant
from mcphost.pipes import dump_line, id_key, valid_id
from mcphost.serve.stdio import CallCut, Outbox, Send
from mcphost.upstream.connection import Encodings, plain_text_result

logger = logging.getLogger(__name__)

INSTRUCTIONS = (
    "mcphost gives you the tools of several MCP servers behind a permission check. Find a tool with "
    "retrieve_tools, then call it with the variant its call_with field names (call_tool_read, call_tool_write or "
    "call_tool_destructive), repeating that intent in intent.operation_type."
)

_VARIANTS = {variant.value: variant for variant in ToolVariant}
WARNING_PREFIX = "mcphost warning: "


def error_data(err: GatewayError) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": err.message}], "structuredContent": err.to_payload(), "isError": True}


def outcome_data(outcome: CallOutcome) -> dict[str, Any]:
    """The tool result for a call's outcome, JSON-ready: the upstream's answer as it sent it, or the error."""
    if outcome.asked is not None:
        return input_required_data(outcome.asked)
    if outcome.error is not None:
        data = error_data(outcome.error)
    else:
        assert outcome.data is not None
        data = outcome.data
    if outcome.warnings:
        # A warning the agent cannot see is no warning: it rides along as its own text block.
        warning = {"type": "text", "text": WARNING_PREFIX + "; ".join(outcome.warnings)}
        data = {**data, "content": [*(data.get("content") or []), warning]}
    return data


_NO_ENCODINGS: Encodings = {}  # an answer with no large part, or none from an upstream


async def call_result(gateway: Gateway, name: str, arguments: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    """The result of the agent's tools/call of `name`, JSON-ready; never raises for anything the agent sent."""
    return (await call_answer(gateway, name, arguments, ctx))[0]


async def call_answer(
    gateway: Gateway, name: str, arguments: dict[str, Any], ctx: CallContext
) -> tuple[dict[str, Any], Encodings]:
    """`call_result`, and the encodings of its large parts that the agent's answer can be written with
    (`response_line`)."""
    try:
        variant = _VARIANTS.get(name)
        if variant is not None:
            outcome = await gateway.call(variant, arguments, ctx)
            answered = outcome.answer
            return outcome_data(outcome), answered.encodings if answered is not None else _NO_ENCODINGS
        if name == RETRIEVE_TOOLS:
            answer = await gateway.retrieve_tools(arguments)
            # Compact: the agent's model reads every byte of it as tokens (indented, a tenth and more of them are
            # layout, and the writing took Python's pure-Python encoder: 0.3 ms for ten tools with their schemas).
            # ASCII: what an upstream hides in a description (bidi controls, zero-width characters) shows as escapes.
            text = json.dumps(answer, separators=(",", ":"))
            return {"content": [{"type": "text", "text": text}]}, _NO_ENCODINGS
        if name == LEGACY_CALL_TOOL:
            err = GatewayError(ErrorCode.TOOL_NOT_FOUND, LEGACY_CALL_TOOL_MESSAGE, {"tool": "call_tool"})
        else:
            err = GatewayError(
                ErrorCode.TOOL_NOT_FOUND,
                f"Tool '{name}' not found. mcphost offers retrieve_tools, call_tool_read, call_tool_write "
                "and call_tool_destructive; upstream tools are called through them as name='server:tool'.",
                {"tool": name},
            )
    except GatewayError as caught:
        err = caught
    except Exception as exc:  # the session outlives any one bad call
        logger.exception("tool %s failed", name)
        err = GatewayError(ErrorCode.UPSTREAM_ERROR, f"mcphost failed: {type(exc).__name__}: {exc}")
    return error_data(err), _NO_ENCODINGS


def response_line(request_id: Any, kind: str, answer: dict[str, Any], encodings: Encodings = _NO_ENCODINGS) -> bytes:
    """The JSON-RPC response as one line (`dump_line`); a result's text blocks' texts and structured content that
    `encodings` holds go in as written there, not written again."""
    message = {"jsonrpc": "2.0", "id": request_id, kind: answer}
    if encodings and kind == "result":
        swapped = dict(answer)
        content = answer.get("content")
        if type(content) is list:
            swapped["content"] = [_with_encoded_text(block, encodings) for block in content]
        structured = answer.get("structuredContent")
        known = encodings.get(id(structured))
        if known is not None and known[0] is structured:
            swapped["structuredContent"] = known[1]
        try:
            return orjson.dumps({**message, "result": swapped}) + b"\n"
        except (orjson.JSONEncodeError, TypeError):
            pass  # what orjson refuses elsewhere in the message (an id past 64 bits): Python's encoder, on the original
    return dump_line(message)


def _with_encoded_text(block: Any, encodings: Encodings) -> Any:
    text = block.get("text") if type(block) is dict else None
    known = encodings.get(id(text)) if text is not None else None
    return {**block, "text": known[1]} if known is not None and known[0] is text else block


def client_name(info: Any) -> str | None:
    """What records call the agent's client, from its initialize `clientInfo`."""
    if isinstance(info, dict):
        name, version = info.get("name"), info.get("version")
        return f"{name if isinstance(name, str) else ''} {version if isinstance(version, str) else ''}".strip() or None
    if info is not None:
        return f"{info.name} {info.version}".strip()
    return None


class Sessions:
    """A stable id per agent session, for the activity log and for "allow for this session".

    The id must be one the agent cannot choose, or copying another agent's id (it shows in records and prompts)
    would take over that agent's session approvals. So it is, in order: the one fixed for the connection (one agent
    per `mcphost mcp` process, or per relay connection to the daemon's agent socket); the transport's session, which
    the daemon's session manager minted (only sessions it knows reach the server), under a name derived from its id;
    else the handshake connection. Stateless 2026-era HTTP requests have none: a header such as `mcp-session-id`
    names nothing the daemon gave out.
    """

    def __init__(self, fixed: str | None = None) -> None:
        self._fixed = fixed
        self._ids: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
        self._naming_key = secrets.token_bytes(32)

    def name_of(self, transport_id: str) -> str:
        """What records and prompts call a transport session: derived from its id, never the id itself. The id is
        what a request names to be served inside the session; whoever read it in a record could do just that."""
        digest = hmac.new(self._naming_key, transport_id.encode(), hashlib.sha256).hexdigest()
        return f"http-{digest[:24]}"

    def session_id(self, ctx: ServerRequestContext[Any, Any]) -> str | None:
        if self._fixed is not None:
            return self._fixed
        connection = getattr(ctx.session, "_connection", None)
        transport_id = getattr(connection, "session_id", None)
        if transport_id:
            return self.name_of(str(transport_id))
        if connection is None or getattr(connection, "protocol_version", None) in MODERN_PROTOCOL_VERSIONS:
            # 2026-era HTTP is one exchange per request: there is no session to name, and a fresh id per call
            # would only pretend there were.
            return None
        try:
            found = self._ids.get(connection)
            if found is None:
                found = self._ids[connection] = uuid.uuid4().hex[:12]
        except TypeError:
            return None
        return found

    def context(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams, rounds: InputRounds
    ) -> CallContext:
        info = getattr(getattr(ctx.session, "client_params", None), "client_info", None)
        return CallContext(
            session_id=self.session_id(ctx), client=client_name(info), elicit=_elicitation(ctx, params, rounds)
        )


APPROVAL_INPUT = "mcphost_approval"  # the key of mcphost's question in an input-required result
# How long a question's sealed state is accepted at all; within that, [permissions] prompt_timeout decides.
ROUND_STATE_TTL_S = 24 * 3600.0


def question_digest(message: str, schema: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps([message, schema], sort_keys=True).encode("utf-8", "surrogatepass")).hexdigest()


def input_required_data(asked: InputRequired) -> dict[str, Any]:
    """The result of a 2026-era call that ends to ask its question: the client puts it to its user and repeats the
    call with the answer and this `requestState` (sealed by the SDK's boundary on the way out, so a client can
    neither read nor forge it)."""
    state = {"q": question_digest(asked.message, asked.schema), "t": time.time(), "n": secrets.token_hex(16)}
    request = {"mode": "form", "message": asked.message, "requestedSchema": asked.schema}
    return {
        "resultType": "input_required",
        "inputRequests": {APPROVAL_INPUT: {"method": "elicitation/create", "params": request}},
        "requestState": json.dumps(state),
    }


class InputRounds:
    """The answers 2026-era clients bring back in a repeated call. A question's state is good for one answer to
    that same question (the repeated call's tool and arguments are bound by the SDK's seal), within the prompt's
    time: an answer cannot be replayed for a second call, nor carried over to another."""

    def __init__(self) -> None:
        self._spent: dict[str, float] = {}

    def asker(self, params: types.CallToolRequestParams) -> Elicit:
        opened = _open_state(params.request_state)
        response = (params.input_responses or {}).get(APPROVAL_INPUT)

        async def ask(message: str, schema: dict[str, Any]) -> bool | Elicited:
            if opened is not None and response is not None and opened[0] == question_digest(message, schema):
                nonce, issued = opened[1], opened[2]
                if self._spend(nonce, issued):
                    return Elicited(approved(response), asked_ms=max(0.0, (time.time() - issued) * 1000))
            raise InputRequired(message, schema)

        return ask

    def _spend(self, nonce: str, issued: float) -> bool:
        now = time.time()
        self._spent = {n: t for n, t in self._spent.items() if now - t < ROUND_STATE_TTL_S}
        if nonce in self._spent or now - issued >= ROUND_STATE_TTL_S:
            return False
        self._spent[nonce] = issued
        return True


def _open_state(state: str | None) -> tuple[str, str, float] | None:
    """(question digest, nonce, issued at) of a state this process minted; the boundary has checked its seal."""
    if state is None:
        return None
    try:
        fields = json.loads(state)
        question, nonce, issued = fields["q"], fields["n"], fields["t"]
    except (ValueError, KeyError, TypeError):
        return None
    if not isinstance(question, str) or not isinstance(nonce, str) or not isinstance(issued, int | float):
        return None
    return question, nonce, float(issued)


def approved(response: Any) -> bool:
    """Whether the client's answer to the yes/no form is yes."""
    if isinstance(response, types.ElicitResult):
        content = response.content or {}
        return response.action == "accept" and content.get("approve") is True
    return False


def _elicitation(
    ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams, rounds: InputRounds
) -> Elicit | None:
    """A yes/no question through the agent's client, when that client declared form elicitation: a request of
    ours on a handshake-era session, the input-required round trip on a 2026-era one."""
    capabilities = getattr(ctx.session, "client_capabilities", None)
    if capabilities is None or getattr(capabilities, "elicitation", None) is None:
        return None
    if getattr(ctx.session, "protocol_version", None) in MODERN_PROTOCOL_VERSIONS:
        return rounds.asker(params)
    if not getattr(ctx.session, "can_send_request", True):
        # Declared, but this channel cannot carry a request of ours now: asking would fail and read as the user's
        # "no"; nobody can be asked, so the call ends as NO_APPROVER.
        return None
    session, request_id = ctx.session, ctx.request_id

    async def ask(message: str, schema: dict[str, Any]) -> bool:
        result = await session.elicit_form(message, schema, related_request_id=request_id)
        content = result.content or {}
        return result.action == "accept" and content.get("approve") is True

    return ask


def build_server(gateway: Gateway, *, session_id: str | None = None, sessions: Sessions | None = None) -> Server[Any]:
    """The MCP server over `gateway`; `session_id` when it serves exactly one agent (stdio, a relay's connection);
    `sessions` when the HTTP shortcut must name sessions as the server does."""
    tools = [types.Tool.model_validate(tool) for tool in tool_definitions()]
    sessions = sessions or Sessions(fixed=session_id)
    rounds = InputRounds()

    async def on_list_tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def on_call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        data = await call_result(gateway, params.name, params.arguments or {}, sessions.context(ctx, params, rounds))
        if data.get("resultType") == "input_required":
            return types.InputRequiredResult.model_validate(data)
        return types.CallToolResult.model_validate(data)

    # What a 2026-era HTTP call's `Mcp-Param-*` headers are checked against. Without it the SDK runs the whole
    # tools/list handler, and dumps all four definitions, for every such call only to read one schema back.
    schemas = {tool.name: tool.input_schema for tool in tools}
    server: Server[Any] = Server(
        "mcphost",
        version=__version__,
        title="mcphost",
        instructions=INSTRUCTIONS,
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
        get_tool_input_schema=schemas.get,
    )
    server.middleware.append(RequestStateBoundary(_round_state_security(), default_audience="mcphost"))
    return server


@functools.cache
def _round_state_security() -> RequestStateSecurity:
    # One key per process: a repeated call may arrive on another connection (stateless HTTP opens one per request).
    return RequestStateSecurity.ephemeral(ttl=ROUND_STATE_TTL_S)


def stdio_session_id() -> str:
    return f"stdio-{uuid.uuid4().hex[:12]}"


ASK_ID_PREFIX = "mcphost-ask-"


class DirectCalls:
    """tools/call for one session over a newline-delimited stream, past the SDK's dispatch: the call is parsed,
    run and answered here (the same `call_result` the SDK's handler runs), which takes the SDK's per-message models
    and tasks off the busiest path. Everything else, the handshake included, goes to the SDK session; this only
    watches the handshake for the client's name and capabilities.

    It takes calls in a session opened with `initialize`, and asks through the agent's client (elicitation) as the
    SDK does. On a 2026-era stream (its first request carries the protocol version in `_meta`, and the SDK serves it
    so) it takes calls checked and shaped as the SDK checks and shapes them (`modern_call`, `sdk_result`), except
    those of a client that can be asked while the config may ask it: that one gets the SDK's input-required round
    trip, whose state only the SDK's boundary seals. It answers cancellation as the SDK does (the call is cut short
    and recorded as cancelled; no answer is sent).
    """

    def __init__(self, gateway: Gateway, session_id: str, send: Send, server_info: dict[str, Any]) -> None:
        self._gateway = gateway
        self._session_id = session_id
        self._send = send
        self._server_info = server_info
        self._modern: bool | None = None  # the stream's era, as the SDK decides it from the first request
        self._version: str | None = None  # the handshake's, as the SDK settles it: None until a session opens
        self._client: str | None = None
        self._elicits = False
        self._running: dict[str, CallCut] = {}
        self._asked: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._ask_ids = itertools.count()
        self._made_context: CallContext | None = None  # what every call of the session shares, made once it opens

    @classmethod
    def factory(cls, gateway: Gateway, session_id: str, server: Server[Any]) -> Callable[[Outbox], DirectCalls]:
        server_info = server.server_info_stamp
        return lambda out: cls(gateway, session_id, out.put, server_info)

    def take(self, message: dict[str, Any], line: bytes) -> CallCut | bool:
        method = message.get("method")
        if self._modern is None and method is not None and "id" in message:
            # The SDK serves the stream in the era of the first request it reads, so that one is its own.
            self._modern = method != "initialize" and _enveloped(message.get("params"))
            if method == "tools/call":
                return False
        if method == "tools/call":
            return self._call(message)
        if method is None:
            return self._answered(message)
        if method == "initialize":
            params = message.get("params")
            if isinstance(params, dict) and not _enveloped(params):
                # The SDK opens no session for an `initialize` it cannot read, and refuses the calls that follow.
                self._version = negotiated_version(params)
                self._client = client_name(params.get("clientInfo"))
                capabilities = params.get("capabilities")
                self._elicits = isinstance(capabilities, dict) and capabilities.get("elicitation") is not None
                self._made_context = None
        elif method == "notifications/cancelled":
            params = message.get("params")
            if isinstance(params, dict):
                cut = self._running.get(id_key(params.get("requestId")))
                if cut is not None:
                    cut.cancel()
        return False

    def _call(self, message: dict[str, Any]) -> CallCut | bool:
        if self._modern:
            modern = modern_call(message, clients_asked=self._gateway.asks_agents_clients())
            if modern is None:
                return False
            request_id, name, arguments, version, client = modern
            context = CallContext(session_id=self._session_id, client=client, elicit=None)
            info = self._server_info
            return self._start(request_id, name, arguments, lambda: context, lambda d: sdk_result(version, d, info))
        settled = self._version
        if settled is None:
            return False
        call = shortcut_call(message, settled)
        if call is None:
            return False
        request_id, name, arguments = call
        info = self._server_info
        return self._start(request_id, name, arguments, self._context, lambda d: sdk_result(settled, d, info))

    def _start(
        self,
        request_id: Any,
        name: str,
        arguments: dict[str, Any],
        context: Callable[[], CallContext],
        wire: Callable[[dict[str, Any]], tuple[str, dict[str, Any]]],
    ) -> CallCut | bool:
        """The call's job, answered with what `wire` makes of its result ("result" or "error", and the member)."""
        key = id_key(request_id)
        if key in self._running:
            return False

        async def run(cut: CallCut) -> None:
            # Cancelled (the agent's notifications/cancelled, or the session's end), the call ends here unanswered;
            # cut by the host stopping under an agent still there, it is answered with why.
            try:
                data, encodings = await call_answer(self._gateway, name, arguments, context())
            except asyncio.CancelledError:
                if cut.why is not None:
                    error = {"code": INTERNAL_ERROR, "message": f"tools/call: {cut.why}"}
                    # An agent that stopped reading meanwhile gets nothing, and the cancellation goes on as it came.
                    with contextlib.suppress(Exception):
                        await self._send(response_line(request_id, "error", error), answers=request_id, ok=False)
                raise
            finally:
                self._running.pop(key, None)
            kind, answer = wire(data)
            await self._send(response_line(request_id, kind, answer, encodings), answers=request_id)

        # Known from now, started on a later turn: the agent's cancellation may come in between (the same read).
        taken = self._running[key] = CallCut(run)
        return taken

    def _context(self) -> CallContext:
        made = self._made_context
        if made is None:
            elicit = self._ask if self._elicits else None
            made = self._made_context = CallContext(session_id=self._session_id, client=self._client, elicit=elicit)
        return made

    def _answered(self, message: dict[str, Any]) -> bool:
        return answered(self._asked, message)

    async def _ask(self, message: str, schema: dict[str, Any]) -> bool:
        return await ask_client(self._asked, self._ask_ids, message, schema, lambda m: self._send(dump_line(m)))


_MODERN_META = PROTOCOL_VERSION_META_KEY


def _enveloped(params: Any) -> bool:
    """Whether a request's params carry the 2026-era envelope: its protocol version in `_meta`, as the SDK tells."""
    meta = params.get("_meta") if isinstance(params, dict) else None
    return isinstance(meta, dict) and _MODERN_META in meta


def negotiated_version(params: dict[str, Any]) -> str | None:
    """The protocol version the SDK settles on for a handshake-era `initialize` with these params (the client's own
    when the SDK speaks it, else its latest), or None when the SDK cannot read them and answers with an error."""
    try:
        requested = types.InitializeRequestParams.model_validate(params, by_name=False).protocol_version
    except ValidationError:
        return None
    return requested if requested in HANDSHAKE_PROTOCOL_VERSIONS else LATEST_HANDSHAKE_VERSION


async def ask_client(
    asked: dict[str, asyncio.Future[dict[str, Any]]],
    ids: itertools.count[int],
    message: str,
    schema: dict[str, Any],
    send: Callable[[dict[str, Any]], Awaitable[None]],
) -> bool:
    """Put a yes/no question to the agent's user through its client (elicitation/create, form mode), as the SDK's
    `elicit_form` does; the answer arrives in `asked` under the request's id."""
    request_id = f"{ASK_ID_PREFIX}{next(ids)}"
    waiting: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
    asked[request_id] = waiting
    params = {"mode": "form", "message": message, "requestedSchema": schema}
    try:
        await send({"jsonrpc": "2.0", "id": request_id, "method": "elicitation/create", "params": params})
        reply = await waiting
    finally:
        asked.pop(request_id, None)
    error = reply.get("error")
    if error is not None:
        raise RuntimeError(f"the client refused the elicitation: {error}")
    result = reply.get("result")
    if not isinstance(result, dict):
        return False
    content = result.get("content") or {}
    return result.get("action") == "accept" and isinstance(content, dict) and content.get("approve") is True


def answered(asked: dict[str, asyncio.Future[dict[str, Any]]], message: dict[str, Any]) -> bool:
    """Whether `message` is the client's answer to a question of ours (then it is delivered)."""
    request_id = message.get("id")
    waiting = asked.get(request_id) if isinstance(request_id, str) else None
    if waiting is None:
        return False
    if not waiting.done():
        waiting.set_result(message)
    return True


def shortcut_call(message: dict[str, Any], version: str) -> tuple[Any, str, dict[str, Any]] | None:
    """(id, tool name, arguments) of a tools/call a shortcut may answer: one of the handshake era that the SDK would
    serve as it is in a session of `version`. What is malformed, or anything the SDK might read otherwise (a member
    beside the request's own, `_meta` or another param it checks), the SDK answers, with the error it names;
    2026-era requests (their protocol version in `_meta`) are the SDK's too."""
    request_id, params = message.get("id"), message.get("params")
    if not plain_request(message) or not valid_id(request_id) or not isinstance(params, dict):
        return None
    name, arguments = params.get("name"), params.get("arguments")
    if arguments is None:
        arguments = {}
    if not isinstance(name, str) or not isinstance(arguments, dict) or _enveloped(params):
        return None
    if not _plain_params(params) and not _sdk_reads(version, params):
        return None
    return request_id, name, arguments


def plain_request(message: dict[str, Any]) -> bool:
    """Whether `message` is a JSON-RPC 2.0 request of a request's members only, which the SDK's reading of a message
    takes for a request whatever else it holds: one with `error` beside `method`, say, it takes for a response."""
    return message.get("jsonrpc") == "2.0" and _REQUEST_MEMBERS.issuperset(message)


_REQUEST_MEMBERS = frozenset({"jsonrpc", "id", "method", "params"})
_PLAIN_PARAMS = frozenset({"name", "arguments", "_meta"})


def _plain_params(params: dict[str, Any]) -> bool:
    """Whether tools/call params are what the SDK reads as they are in every handshake-era version (a test holds the
    SDK's checks to it): a name and arguments (checked by the caller), and a `_meta` of a progress token at most,
    which clients that show progress send with every call. Any other takes the SDK's checks (`_sdk_reads`)."""
    if not _PLAIN_PARAMS.issuperset(params):
        return False
    if "_meta" not in params:
        return True
    meta = params["_meta"]
    return type(meta) is dict and meta.keys() == _PROGRESS_ONLY and type(meta["progressToken"]) in (str, int)


_PROGRESS_ONLY = frozenset({"progressToken"})


def _sdk_reads(version: str, params: dict[str, Any]) -> bool:
    """Whether the SDK takes these tools/call params in a session of `version`: the schema of that version (which
    it checks first) and the handler's model."""
    try:
        validate_client_request("tools/call", version, params)
        types.CallToolRequestParams.model_validate(params, by_name=False)
    except ValidationError:
        return False
    return True


def modern_call(
    message: dict[str, Any], headers: Mapping[str, str] | None = None, *, clients_asked: bool = True
) -> tuple[Any, str, dict[str, Any], str, str | None] | None:
    """(id, tool name, arguments, protocol version, the client's name for records) of a 2026-era tools/call a
    shortcut may answer: one the SDK would take as it is (its envelope and its params valid for that version, and
    over HTTP its routing `headers` agreeing with them), and no repeat of a call that asked (`requestState`,
    `inputResponses`). A client that declares elicitation is the SDK's while the config may ask it
    (`clients_asked`, `Gateway.asks_agents_clients`): only the SDK's boundary seals the state of a call that asks;
    under any other config nothing would ask it, and its call is answered as any other. Everything else is the SDK's,
    with the answer it gives."""
    request_id, params = message.get("id"), message.get("params")
    if not plain_request(message) or not valid_id(request_id) or not isinstance(params, dict):
        return None
    if _ROUND_KEYS & params.keys():
        return None
    route = classify_inbound_request(message, headers=headers)
    if not isinstance(route, InboundModernRoute):
        return None
    if not _envelope_valid(route.protocol_version, params):
        return None
    capabilities, info = route.client_capabilities, route.client_info
    if not isinstance(capabilities, dict) or (clients_asked and capabilities.get("elicitation") is not None):
        return None
    name, arguments = params.get("name"), params.get("arguments")
    if not isinstance(name, str) or not isinstance(arguments, dict | None):
        return None
    # The SDK names the client only from a full envelope (its info and capabilities both there).
    return request_id, name, arguments or {}, route.protocol_version, client_name(info) if info is not None else None


_ROUND_KEYS = frozenset({"requestState", "inputResponses"})
# (protocol version, a `_meta` as orjson writes it) the SDK's schema has taken: a client sends the same envelope
# with every call, and the schema's verdict on a call is its verdict on the envelope once the name and arguments
# pass (its params model ignores other members, and the round's keys are turned away before it is asked).
_VALID_ENVELOPES: set[tuple[str, bytes]] = set()
_ENVELOPES_KEPT = 256
_ENVELOPE_KEPT_BYTES = 4096


def _envelope_valid(version: str, params: dict[str, Any]) -> bool:
    """Whether the SDK's schema for `version` takes these tools/call params (no round keys among them), its
    verdict on their envelope remembered: on most calls, two type checks and one dump of `_meta` in place of a
    validation of the whole params (a test holds the two ways together)."""
    name, arguments, meta = params.get("name"), params.get("arguments"), params.get("_meta")
    key = None
    if type(name) is str and (arguments is None or type(arguments) is dict) and type(meta) is dict:
        try:
            dumped = orjson.dumps(meta)
        except orjson.JSONEncodeError:
            dumped = b"null"
        # orjson writes NaN and infinities as null: an envelope holding a null is not remembered, nor one larger
        # than any client's (what is kept stays small whatever a client sends).
        if len(dumped) <= _ENVELOPE_KEPT_BYTES and b"null" not in dumped:
            key = (version, dumped)
            if key in _VALID_ENVELOPES:
                return True
    try:
        validate_client_request("tools/call", version, params)
    except (ValidationError, KeyError, ValueError):
        return False
    if key is not None:
        if len(_VALID_ENVELOPES) >= _ENVELOPES_KEPT:
            _VALID_ENVELOPES.clear()
        _VALID_ENVELOPES.add(key)
    return True


def sdk_result(version: str, data: dict[str, Any], server_info: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """("result", a tool result on the wire of `version`), made as the SDK's path makes it (the handler's
    `CallToolResult`, its dump sieved by that version's schema: only the fields it has, nulls dropped, `isError`
    always; in the 2026 era `resultType` and the server's `_meta` stamp too); or ("error", what that path answers for a
    result it cannot take). What the upstream answered is in the call's record either way."""
    modern = version in MODERN_PROTOCOL_VERSIONS
    if version in _TEXT_SHAPED:
        shaped = _text_result(data, modern)
        if shaped is not None:
            if modern:
                shaped["_meta"] = {SERVER_INFO_META_KEY: server_info}
            return "result", shaped
    try:
        dumped = types.CallToolResult.model_validate(data).model_dump(by_alias=True, mode="json", exclude_none=True)
    except ValidationError:
        # `build_server`'s handler raises it; the SDK answers every handler's ValidationError so.
        return "error", {"code": INVALID_PARAMS, "message": "Invalid request parameters", "data": ""}
    try:
        shaped = serialize_server_result("tools/call", version, dumped)
    except (ValidationError, KeyError, ValueError):
        logger.exception("a tool result does not fit the %s schema", version)
        return "error", {"code": INTERNAL_ERROR, "message": "Handler returned an invalid result"}
    if not modern:
        return "result", shaped
    meta = shaped.get("_meta")
    if meta is None:
        shaped["_meta"] = {SERVER_INFO_META_KEY: server_info}
    elif isinstance(meta, dict) and meta.get(SERVER_INFO_META_KEY) is None:
        shaped["_meta"] = {**meta, SERVER_INFO_META_KEY: server_info}
    return "result", shaped


# The versions whose shaping of a text result `_text_result` makes without the models; a test holds the two ways
# together for each. A version added to the SDK takes the models' way until it is added here.
_TEXT_SHAPED = frozenset({"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"})


def _text_result(data: dict[str, Any], modern: bool) -> dict[str, Any] | None:
    """What the models make of a result that is text blocks, a plain `isError` and an object of structured content
    only (most results, warnings included), made directly: two pydantic validations and two dumps less on every such
    call. None for anything else (its own `_meta` too, which the stamp would join), which takes the models' way."""
    structured = data.get("structuredContent", {})
    if "_meta" in data or type(structured) is not dict or not plain_text_result(data):
        return None
    blocks = [{"text": block["text"], "type": "text"} for block in data.get("content", ())]
    shaped = {"content": blocks, "isError": data.get("isError", False)}
    if modern:
        shaped["resultType"] = "complete"
    if "structuredContent" in data:
        shaped["structuredContent"] = structured  # the models pass an object's members through as they are
    return shaped


class HttpCalls:
    """tools/call over HTTP, past the SDK's session and event stream: the HTTP app hands over the parsed request and
    sends what this returns. In a handshake-era session the SDK's manager knows (`answer`), the session's name is the
    one the SDK path gives it (`Sessions.name_of`), and its client's name and capabilities come from its
    `initialize`, which the app shows this on the way in; a 2026-era single exchange (`answer_modern`) has none."""

    def __init__(self, gateway: Gateway, sessions: Sessions, server: Server[Any]) -> None:
        self._gateway = gateway
        self.asks_agents_clients = gateway.asks_agents_clients
        self._sessions = sessions
        self.info = server.server_info_stamp  # what the SDK stamps on a 2026-era result's `_meta`
        # Per open session: its name (an HMAC of its id, made once), its client's name, whether that client elicits,
        # and the protocol version its handshake settled on.
        self._clients: dict[str, tuple[str, str | None, bool, str]] = {}
        self._running: dict[tuple[str, str], CallCut] = {}
        self._asked: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._ask_ids = itertools.count()

    def opened(self, transport_id: str, initialize: dict[str, Any]) -> None:
        params = initialize.get("params")
        params = params if isinstance(params, dict) else {}
        capabilities = params.get("capabilities")
        elicits = isinstance(capabilities, dict) and capabilities.get("elicitation") is not None
        name = self._sessions.name_of(transport_id)
        # The SDK opened the session, so it read these params: its version is never None here.
        version = negotiated_version(params) or LATEST_HANDSHAKE_VERSION
        self._clients[transport_id] = (name, client_name(params.get("clientInfo")), elicits, version)

    def closed(self, transport_id: str, ended: bool = False) -> None:
        """Forget a session; `ended`: its client ended it (DELETE), and its calls still running are cancelled, as the
        SDK cancels those it runs (each is recorded as cancelled, and answered as a cancelled call is)."""
        self._clients.pop(transport_id, None)
        if ended:
            for (session, _), cut in list(self._running.items()):
                if session == transport_id:
                    cut.cancel()

    def keep_only(self, open_sessions: Container[str]) -> None:
        """Forget every session but these (the ones the SDK's manager still holds)."""
        for transport_id in [known for known in self._clients if known not in open_sessions]:
            del self._clients[transport_id]

    def version_of(self, transport_id: str) -> str | None:
        """The protocol version of an open session's handshake (None: no session this saw open)."""
        known = self._clients.get(transport_id)
        return None if known is None else known[3]

    def answered(self, message: dict[str, Any]) -> bool:
        return answered(self._asked, message)

    def cancel(self, transport_id: str, message: dict[str, Any]) -> None:
        params = message.get("params")
        if isinstance(params, dict):
            cut = self._running.get((transport_id, id_key(params.get("requestId"))))
            if cut is not None:
                cut.cancel()

    async def answer(
        self,
        transport_id: str,
        request_id: Any,
        name: str,
        arguments: dict[str, Any],
        emit: Callable[[dict[str, Any]], Awaitable[None]],
    ) -> bytes | None:
        """The JSON-RPC response to the call as a line (`response_line`), or None when the client cancelled it.
        `emit` sends a message of ours on this request's stream (a question through the agent's client) before the
        response."""
        known = self._clients.get(transport_id)
        if known is None:
            known = (self._sessions.name_of(transport_id), None, False, LATEST_HANDSHAKE_VERSION)
        session, client, elicits, version = known

        async def ask(message: str, schema: dict[str, Any]) -> bool:
            return await ask_client(self._asked, self._ask_ids, message, schema, emit)

        ctx = CallContext(session_id=session, client=client, elicit=ask if elicits else None)
        key = (transport_id, id_key(request_id))
        cut = self._running[key] = CallCut.of_current()
        try:
            data, encodings = await call_answer(self._gateway, name, arguments, ctx)
        except asyncio.CancelledError:
            if not cut.cut or cut.task is None:
                raise  # not the client's: the server stopping
            cut.task.uncancel()  # the request goes on, to answer 202
            return None
        finally:
            self._running.pop(key, None)
        kind, answer = sdk_result(version, data, self.info)
        return response_line(request_id, kind, answer, encodings)

    async def answer_modern(
        self, request_id: Any, name: str, arguments: dict[str, Any], version: str, client: str | None
    ) -> tuple[bytes, int | None]:
        """The JSON-RPC response to a 2026-era call (`modern_call`) as a line, and its error's code if it is one, as
        the SDK's single exchange makes it: no session (one exchange is not one), and nobody to ask (a client that
        could be asked is taken only while the config asks no agent's client). A call cut short (its client gone)
        raises the cancellation, after the gateway has recorded it."""
        # A client that could be asked is taken only while the config asks no client: nothing would ask it. (A
        # config changed to ask clients between the claim and the call's start reads as one nobody can be asked:
        # the call ends as NO_APPROVER, and its repeat goes the SDK's way.)
        context = CallContext(session_id=None, client=client, elicit=None)
        data, encodings = await call_answer(self._gateway, name, arguments, context)
        kind, answer = sdk_result(version, data, self.info)
        return response_line(request_id, kind, answer, encodings), answer["code"] if kind == "error" else None
