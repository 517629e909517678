"""What mcphost does with an agent's request, independent of how it arrived (MCP stdio, MCP HTTP, the CLI).

The MCP handlers and the CLI parse, call `Gateway`, and serialize; the decisions themselves are the pure
functions of `mcphost.intent` and `mcphost.policy`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.lowlevel
import mcp_types as types

from mcphost.activity.capture import capture_arguments, capture_response, response_text
from mcphost.activity.record import CallRecord, RecordType, Status, new_record_id, utc_now
from mcphost.activity.redact import redact_text
from mcphost.activity.writer import ActivityLog
from mcphost.approval.approvals import Approvals, CallFacts, Elicit, InputRequired
from mcphost.config import LoadedConfig, effective_annotations
from mcphost.config.models import LogConfig
from mcphost.errors import ErrorCode, GatewayError
from mcphost.gateway.arguments import check_input, encoded_call, parse_args, split_name
from mcphost.gateway.tools import DEFAULT_LIMIT, MAX_LIMIT, USAGE_INSTRUCTIONS
from mcphost.intent import (
    Annotations,
    ToolVariant,
    check_annotations,
    check_two_keys,
    parse_intent,
    raw_intent,
    recommended_variant,
)
from mcphost.pipes import json_size
from mcphost.policy import NoEditor
from mcphost.upstream.connection import (
    State,
    ToolResult,
    UpstreamCallFailed,
    UpstreamResultTooLarge,
    UpstreamServer,
    UpstreamTool,
    UpstreamUnavailable,
)
from mcphost.upstream.index import closest_names
from mcphost.upstream.manager import UpstreamManager

logger = logging.getLogger(__name__)

# A first call right after start waits this long at most for upstreams that are still starting.
STARTUP_WAIT_CAP = 30.0
# Seconds a tool's cached definition is trusted for a call that its annotations let through less strictly.
ANNOTATIONS_MAX_AGE = 5.0


@dataclass(frozen=True, slots=True)
class CallContext:
    """Who is calling: recorded with each call so the log can tell agents apart."""

    session_id: str | None = None
    client: str | None = None
    elicit: Elicit | None = None  # set when the agent's client declared elicitation


@dataclass(slots=True)
class CallOutcome:
    status: Status
    answer: ToolResult | None = None  # what the upstream answered, when it was reached
    error: GatewayError | None = None
    warnings: list[str] = field(default_factory=list)
    # The question for the agent's user, when the call ended to ask it (2026-07-28's input-required round trip).
    asked: InputRequired | None = None

    @property
    def result(self) -> types.CallToolResult | None:
        return self.answer.model if self.answer is not None else None

    @property
    def data(self) -> dict[str, Any] | None:
        """The upstream's answer, JSON-ready, as it sent it."""
        return self.answer.data if self.answer is not None else None


def _cut_short() -> bool:
    """Whether the running task has a cancellation on its way (asyncio's count of requests not yet withdrawn)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _recorded_intent(raw: Any) -> dict[str, str] | None:
    """What a rejected call declared, as text and kept small: the log must not grow by what an agent sends."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        return {"raw": str(raw)[:1000]}
    fields = {}
    for key in ("operation_type", "data_sensitivity", "reason"):
        value = raw.get(key)
        if value is not None:
            fields[key] = (value if isinstance(value, str) else json.dumps(value, default=str))[:1000]
    return fields


class Gateway:
    def __init__(
        self,
        config: Callable[[], LoadedConfig],
        upstreams: UpstreamManager,
        activity: ActivityLog,
        approvals: Approvals,
    ) -> None:
        self._config = config
        self.upstreams = upstreams
        self.activity = activity
        self.approvals = approvals
        self._calls = 0  # calls under way: a call alone writes its records without a thread round trip

    def asks_agents_clients(self) -> bool:
        """Whether the config in force may put a call's question to the agent's own client (`no_editor =
        "elicit"`): only then does it matter to a call whether that client can be asked."""
        return self._config().config.permissions.no_editor is NoEditor.ELICIT

    # ---- retrieve_tools

    async def retrieve_tools(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        query = arguments.get("query", "")
        if query is None:
            query = ""
        if not isinstance(query, str):
            raise GatewayError(ErrorCode.INVALID_ARGS, "query must be a string (what you want to do, in words)")
        limit = arguments.get("limit", DEFAULT_LIMIT)
        if limit is None:
            limit = DEFAULT_LIMIT
        if isinstance(limit, bool) or not isinstance(limit, int | float) or int(limit) != limit:
            raise GatewayError(ErrorCode.INVALID_ARGS, f"limit must be a whole number from 1 to {MAX_LIMIT}")
        limit = max(1, min(int(limit), MAX_LIMIT))
        await self._wait_for_startup()
        config = self._config().config
        index = self.upstreams.index()
        tools: list[dict[str, Any]] = []
        for hit in index.search(query, limit):
            server, _, name = hit.key.partition(":")
            tool = self.upstreams.find(server, name)
            if tool is None:
                continue
            annotations = effective_annotations(config.servers.get(server), name, tool.annotations)
            entry: dict[str, Any] = {
                "name": tool.qualified,
                "description": tool.description,
                "inputSchema": tool.input_schema,
                "score": hit.score,
                "server": server,
            }
            if annotations:
                entry["annotations"] = annotations
            entry["call_with"] = recommended_variant(Annotations.from_mapping(annotations)).value
            tools.append(entry)
        answer: dict[str, Any] = {"tools": tools, "usage_instructions": USAGE_INSTRUCTIONS}
        unhealthy = [s.to_dict() for s in self.upstreams.statuses() if s.state != State.CONNECTED.value]
        if unhealthy:
            answer["diagnostics"] = {"servers": unhealthy}
        return answer

    async def _wait_for_startup(self, names: list[str] | None = None) -> None:
        await self.upstreams.wait_ready(STARTUP_WAIT_CAP, names)

    # ---- call_tool_*

    async def call(self, variant: ToolVariant, arguments: Mapping[str, Any], ctx: CallContext) -> CallOutcome:
        """Validate, decide, forward, and record one call. Never raises for anything the agent sent; a call cut
        short (cancelled, the agent gone, the host stopping) is recorded as cancelled before the cancellation goes
        on. No call reaches the upstream without its record: a write or destructive call is on record as started
        before it is forwarded, and with `[log] on_failure = "refuse"` a call whose record cannot be made durable
        is refused (AUDIT_UNAVAILABLE)."""
        started = time.perf_counter()
        loaded = self._config()  # this call finishes under the config it started with
        # str() of these StrEnums is their value, a tenth of the cost of `.value` (a Python-level property).
        record = CallRecord(str(variant), ctx.session_id, ctx.client)
        outcome = CallOutcome(status=Status.SUCCESS)
        progress = _Progress()
        self._calls += 1
        try:
            await self._run(variant, arguments, ctx, loaded, record, outcome, progress)
        except BaseException:
            # Cancellation is a BaseException: it must not skip the record, and it must go on once it is written.
            self._calls -= 1
            progress.capture(record, loaded.config.log)
            record.status = Status.CANCELLED.value
            record.forwarded = progress.forwarded
            record.duration_ms = _ms_since(started)
            record.id, record.timestamp = new_record_id(), utc_now()
            with anyio.CancelScope(shield=True):
                await self.activity.write(record)
            raise
        self._calls -= 1
        progress.capture(record, loaded.config.log)
        record.status = str(outcome.status)
        record.warnings = list(outcome.warnings)
        record.duration_ms = _ms_since(started)
        if outcome.error is not None and progress.forwarded:
            record.forwarded = True
        # Stamped when written, not when started, so the file stays in time order however long calls take.
        record.id, record.timestamp = new_record_id(), utc_now()
        # The agent sees the result only once its record is on disk (when [log] fsync is on).
        durable = await self.activity.write(record, alone=self._calls == 0)
        if not durable and progress.forwarded and _refuses(loaded) and outcome.error is None:
            error = outcome.error = self._audit_unavailable(loaded, forwarded=True)
            outcome.status = Status.ERROR
            outcome.answer = None
            # Its line, held until the disk takes it, says what the agent was told: the result was withheld.
            record.status, record.forwarded = str(Status.ERROR), True
            record.error = {"code": error.code.value, "message": error.message}
            self.activity.amend(record)
        return outcome

    async def _run(
        self,
        variant: ToolVariant,
        arguments: Mapping[str, Any],
        ctx: CallContext,
        loaded: LoadedConfig,
        record: CallRecord,
        outcome: CallOutcome,
        progress: _Progress,
    ) -> None:
        log = loaded.config.log
        raw = raw_intent(arguments)
        try:
            # Before anything reads the input: what could not be recorded must never be forwarded.
            call_json, args_json = encoded_call(arguments)
            check_input(dict(arguments), variant, as_json=call_json)
            intent = parse_intent(raw, variant)
            declared = record.intent = intent.to_dict()
            check_two_keys(variant, intent)
            server, tool = split_name(arguments.get("name"), variant)
            record.server, record.tool = server, tool
            args = progress.args = parse_args(arguments, variant)
            if args is arguments.get("args"):
                progress.args_json = args_json
            upstream, upstream_tool = await self._resolve(loaded, server, tool, variant)
            annotations = effective_annotations(loaded.config.servers.get(server), tool, upstream_tool.annotations)
            if annotations:
                record.annotations = annotations
            hints = Annotations.from_mapping(annotations)
            call_with = str(recommended_variant(hints))
            record.call_with = call_with
            verdict = check_annotations(
                variant,
                upstream_tool.qualified,
                hints,
                strict=loaded.config.intent_declaration.strict_server_validation,
            )
            outcome.warnings.extend(verdict.warnings)
            authorization = await self.approvals.authorize(
                loaded,
                CallFacts(
                    variant=variant,
                    server=server,
                    tool=tool,
                    intent=declared,
                    annotations=annotations,
                    call_with=call_with,
                    description=upstream_tool.description,
                    input_schema=upstream_tool.input_schema,
                    arguments=args,
                    redact_keys=log.redact_keys,
                    warnings=list(outcome.warnings),
                    session_id=ctx.session_id,
                    client=ctx.client,
                ),
                ctx.elicit,
            )
            record.decision = authorization.decision
            outcome.warnings.extend(authorization.warnings)
            if authorization.error is not None:
                raise authorization.error
            if variant is not ToolVariant.READ:
                progress.capture(record, log)
                await self._record_start(loaded, record, outcome)
            elif (
                self.activity.last_error is not None
                and _refuses(loaded)
                and not await anyio.to_thread.run_sync(self.activity.recover)
            ):
                # A read has no start on record: while the log is known to fail, the disk is tried first (the
                # records held are written), and the read is not forwarded unless it takes them.
                raise self._audit_unavailable(loaded, forwarded=False)
            if _cut_short():
                # A call the agent cut short before it ever waited (its cancellation in the same read as its
                # request) would otherwise be cut only at its first wait, the upstream's answer: after it ran.
                await anyio.lowlevel.checkpoint()
            progress.forwarded = True

            def meanwhile() -> None:
                # Work for the record that the answer changes nothing in, done while the upstream works: a read's
                # arguments captured, the decision's part of the line made.
                progress.capture(record, log)
                record.settle()

            answered = await self._forward(upstream, tool, args, progress.args_json, meanwhile)
            outcome.answer = answered
            outcome.status = Status.ERROR if answered.is_error else Status.SUCCESS
            answer = answered.data
            record.response_bytes = answered.json_size()
            record.response_preview = capture_response(
                response_text(answer.get("content", []), answer.get("structuredContent")), log.response_preview_bytes
            )
            record.settle_response()
        except GatewayError as err:
            outcome.error = err
            outcome.status = _status_for(err.code)
            record.error = {"code": err.code.value, "message": err.message}
            if isinstance(err.details.get("response_bytes"), int):
                record.response_bytes = err.details["response_bytes"]
            if record.intent is None:
                record.intent = _recorded_intent(raw)
            name = arguments.get("name")
            if isinstance(name, str) and (record.server is None or record.server not in loaded.config.servers):
                # Named no server mcphost has: the name is the agent's text as a whole, and split at its first `:`
                # a credential across it (`https://user:pw@host`, `{"password": "..."}`) would be known in neither
                # half. So it is redacted whole, then split.
                record.server, _, tool_part = redact_text(name).partition(":")
                record.tool = tool_part or None
        except InputRequired as asked:
            # Not forwarded, not refused: the agent's client asks its user and repeats the call with the answer.
            outcome.status, outcome.asked = Status.ASKED, asked
            record.decision = asked.decision
        except Exception as exc:  # a bug must cost one call, never the session
            logger.exception("call %s failed unexpectedly", variant.value)
            bug = GatewayError(
                ErrorCode.UPSTREAM_ERROR, f"mcphost failed to complete the call: {type(exc).__name__}: {exc}"
            )
            outcome.error, outcome.status = bug, Status.ERROR
            record.error = {"code": bug.code.value, "message": bug.message}

    async def _record_start(self, loaded: LoadedConfig, record: CallRecord, outcome: CallOutcome) -> None:
        """Put a write or destructive call on record before it is forwarded: if the host dies mid-call, the log
        still says the call was made (its outcome unknown)."""
        start = record.copy()
        start.type = RecordType.TOOL_CALL_STARTED.value
        start.status = Status.STARTED.value
        start.warnings = list(outcome.warnings)
        start.id, start.timestamp = new_record_id(), utc_now()
        # Named before the wait: the start is in the file (or held in memory to be written) once `write` begins, and
        # an outcome written without its id (the call cancelled during the fsync, or refused because the start could
        # not be made durable) left that start alone, read as "outcome unknown" for a call that never ran.
        record.started_id = start.id
        durable = await self.activity.write(start, alone=self._calls == 1)
        if not durable and _refuses(loaded):
            raise self._audit_unavailable(loaded, forwarded=False)

    def _audit_unavailable(self, loaded: LoadedConfig, *, forwarded: bool) -> GatewayError:
        fate = (
            "The call ran upstream, but its record could not be made durable, so its result is withheld."
            if forwarded
            else "The call was not forwarded."
        )
        return GatewayError(
            ErrorCode.AUDIT_UNAVAILABLE,
            f"{fate} mcphost records every call before it lets it through, and the record cannot be made durable: "
            f"{self.activity.problem}. {_capitalized(self.activity.remedy)}; "
            f'calls resume by themselves. [log] on_failure = "continue" in {loaded.path} lets calls run meanwhile, '
            "their records kept in memory.",
            {"log": str(self.activity.path), "forwarded": forwarded},
        )

    async def _resolve(
        self, loaded: LoadedConfig, server: str, tool: str, variant: ToolVariant
    ) -> tuple[UpstreamServer, UpstreamTool]:
        """The connection and the tool a call goes to. The call keeps this connection even if a config change
        replaces it meanwhile: it finishes where it was validated."""
        upstream = self.upstreams.servers.get(server)
        qualified = f"{server}:{tool}"
        configured = loaded.config.servers.get(server)
        if configured is not None and not configured.enabled:
            raise GatewayError(
                ErrorCode.TOOL_NOT_FOUND,
                f"Tool '{qualified}' not found: server '{server}' is disabled (enabled = false in {loaded.path})",
                {"variant": variant.value, "tool": qualified},
            )
        if upstream is None:
            known = sorted(loaded.config.enabled_servers())
            raise GatewayError(
                ErrorCode.TOOL_NOT_FOUND,
                f"Tool '{qualified}' not found: there is no server '{server}' "
                f"(servers: {', '.join(known) or 'none configured'}). "
                + _suggest(qualified, [t.qualified for t in self.upstreams.all_tools()]),
                {"variant": variant.value, "tool": qualified, "servers": known},
            )
        await self._wait_for_startup([server])
        found = upstream.tools.get(tool)
        if found is None and upstream.state is State.CONNECTED:
            # A server may add a tool without telling anyone; look once more before saying no.
            try:
                await upstream.refresh()
            except Exception:
                logger.debug("refresh of %s before TOOL_NOT_FOUND failed", server, exc_info=True)
            found = upstream.tools.get(tool)
        if found is not None:
            if variant is not ToolVariant.DESTRUCTIVE:
                found = await self._current_definition(upstream, found, variant)
            return upstream, found
        if upstream.state is not State.CONNECTED:
            raise _not_connected(server, upstream.last_error or upstream.state.value, qualified)
        candidates = [t.qualified for t in self.upstreams.all_tools()]
        matches = closest_names(qualified, candidates)
        raise GatewayError(
            ErrorCode.TOOL_NOT_FOUND,
            f"Tool '{qualified}' not found. " + _suggest(qualified, candidates),
            {"variant": variant.value, "tool": qualified, "closest_matches": matches},
        )

    async def _current_definition(
        self, upstream: UpstreamServer, cached: UpstreamTool, variant: ToolVariant
    ) -> UpstreamTool:
        """A call that a read-only or non-destructive marking lets through less strictly must be judged on the marking
        the server gives now: a server may re-mark a tool destructive without announcing it (a silent rug pull)."""
        qualified = cached.qualified
        try:
            current = await upstream.fresh_tool(cached.name, ANNOTATIONS_MAX_AGE)
        except UpstreamUnavailable as exc:
            raise _not_connected(upstream.name, exc.reason, qualified) from None
        except UpstreamCallFailed as exc:
            raise GatewayError(
                ErrorCode.UPSTREAM_ERROR,
                f"Upstream server '{upstream.name}' could not be asked for the current definition of '{qualified}' "
                f"({exc.reason}), which mcphost checks before a {variant.value} call; the call was not made.",
                {"server": upstream.name, "tool": qualified},
            ) from None
        if current is None:
            raise GatewayError(
                ErrorCode.TOOL_NOT_FOUND,
                f"Tool '{qualified}' not found: server '{upstream.name}' no longer lists it. Use retrieve_tools.",
                {"variant": variant.value, "tool": qualified},
            )
        return current

    async def _forward(
        self,
        upstream: UpstreamServer,
        tool: str,
        args: dict[str, Any],
        args_json: bytes | None,
        meanwhile: Callable[[], None],
    ) -> ToolResult:
        server = upstream.name
        try:
            return await upstream.call_tool(tool, args, meanwhile, args_json)
        except UpstreamUnavailable as exc:
            raise _not_connected(server, exc.reason, f"{server}:{tool}") from None
        except UpstreamResultTooLarge as exc:
            raise GatewayError(
                ErrorCode.UPSTREAM_ERROR,
                f"Upstream server '{server}' answered the call to '{server}:{tool}' with {exc.size} bytes, more than "
                f"its max_result_bytes ({exc.limit}); the answer was dropped. The call itself may have taken effect. "
                "Ask for less (a filter, a page), or raise max_result_bytes for this server in the config.",
                {"server": server, "tool": f"{server}:{tool}", "response_bytes": exc.size, "limit": exc.limit},
            ) from None
        except UpstreamCallFailed as exc:
            raise GatewayError(
                ErrorCode.UPSTREAM_ERROR,
                f"Upstream server '{server}' failed during the call to '{server}:{tool}': {exc.reason}. "
                "The call may or may not have taken effect; check before retrying.",
                {"server": server, "tool": f"{server}:{tool}"},
            ) from None


def _not_connected(server: str, reason: str, qualified: str) -> GatewayError:
    return GatewayError(
        ErrorCode.UPSTREAM_ERROR,
        f"Upstream server '{server}' is not connected ({reason}); mcphost keeps retrying in the background, "
        "try again shortly",
        {"server": server, "tool": qualified},
    )


def _suggest(name: str, candidates: list[str]) -> str:
    matches = closest_names(name, candidates)
    if matches:
        return f"Closest matches: {', '.join(matches)}. Use retrieve_tools to search."
    return "Use retrieve_tools to search for tools."


@dataclass(slots=True)
class _Progress:
    forwarded: bool = False  # the call was handed to the upstream (so it may have taken effect)
    args: dict[str, Any] | None = None  # the tool's arguments, once read
    args_json: bytes | None = None  # and as compact JSON, where the checks wrote them so
    captured: bool = False

    def capture(self, record: CallRecord, log: LogConfig) -> None:
        """The arguments as the record keeps them (their size, and their redacted capture or its start), once:
        before a write or destructive call is on record as started, else while the upstream works, else (a call
        that ends before it is forwarded) before the record is written."""
        if self.captured or self.args is None:
            return
        self.captured = True
        try:
            record.request_bytes = len(self.args_json) if self.args_json is not None else json_size(self.args)
            record.arguments, record.arguments_preview = capture_arguments(
                self.args, log.arguments_max_bytes, log.redact_keys
            )
        except Exception as exc:  # a bug must cost the record its arguments, never the call its record
            logger.exception("the arguments of a call could not be captured")
            record.arguments, record.arguments_preview = None, f"[not recordable: {type(exc).__name__}]"


def _capitalized(text: str) -> str:
    return text[:1].upper() + text[1:]


def _refuses(loaded: LoadedConfig) -> bool:
    return loaded.config.log.on_failure == "refuse"


def _ms_since(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)


_STATUS_BY_CODE = {
    ErrorCode.PERMISSION_DENIED: Status.DENIED,
    ErrorCode.NO_APPROVER: Status.DENIED,
    ErrorCode.APPROVAL_TIMEOUT: Status.EXPIRED,
    ErrorCode.UPSTREAM_ERROR: Status.ERROR,
    ErrorCode.AUDIT_UNAVAILABLE: Status.ERROR,
}


def _status_for(code: ErrorCode) -> Status:
    return _STATUS_BY_CODE.get(code, Status.REJECTED)
