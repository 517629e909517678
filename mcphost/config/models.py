"""The config file's shape: pydantic models with a default for every key, and no unknown keys."""

from __future__ import annotations

import functools
import re
from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator

from mcphost.intent import AgentToolTable, BoundedPattern, OperationType, ToolVariant
from mcphost.paths import data_dir
from mcphost.policy import Action, ArgCondition, ConditionKind, NoEditor, Policy, Remember, Rule, RuleSet

SERVER_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"


class StrictModel(BaseModel):
    # A typo such as `strict_server_validaton` must be an error, never a silently ignored key. Likewise every
    # boolean and number field says `strict=True`: lax pydantic would read "off" as false, 1 as true and
    # `prompt_timeout = false` as 0, guessing at what a person meant. Not model-wide strictness: the choices
    # (`write = "ask"`) are enums, which TOML can only give as strings.
    model_config = ConfigDict(extra="forbid", frozen=True)


class IntentDeclarationConfig(StrictModel):
    strict_server_validation: bool = Field(
        default=True,
        strict=True,
        description="true: a call whose variant contradicts the server's annotations is rejected; "
        "false: it passes with a warning.",
    )


# The policy's own defaults are the config's: one place says what an absent key means.
_POLICY = Policy()


# The `[permissions]` table. Its keys are the fields of `mcphost.policy.Policy`, matched by name (a comment, not a
# docstring: a docstring would become the table's description in the published schema).
class PermissionsConfig(StrictModel):
    read: Action = Field(default=_POLICY.read, description="What happens to call_tool_read calls.")
    write: Action = Field(default=_POLICY.write, description="What happens to call_tool_write calls.")
    destructive: Action = Field(default=_POLICY.destructive, description="What happens to call_tool_destructive calls.")
    prompt_timeout: float = Field(
        default=_POLICY.prompt_timeout,
        strict=True,
        gt=0,
        description="Seconds a prompt waits for an answer; then the call ends as expired.",
    )
    no_editor: NoEditor = Field(
        default=_POLICY.no_editor,
        description="ask/confirm with nobody attached to answer: deny, or elicit via MCP.",
    )

    remember_read: Remember = Field(
        default=_POLICY.remember_read,
        description="The longest a person's approval of a read call may be remembered.",
    )
    remember_write: Remember = Field(
        default=_POLICY.remember_write,
        description="The longest a person's approval of a write call may be remembered.",
    )
    remember_destructive: Remember = Field(
        default=_POLICY.remember_destructive,
        description='The longest a person\'s approval of a destructive call may be remembered: "always" only '
        "when you set it here.",
    )
    batch_window: float = Field(
        default=_POLICY.batch_window,
        strict=True,
        ge=0,
        le=10,
        description="Seconds during which one agent session's prompts gather into one batch (allow all, deny all, "
        "or one by one) in editors that show batches; 0 shows every prompt on its own at once.",
    )

    def to_policy(self) -> Policy:
        return self.policy

    @functools.cached_property
    def policy(self) -> Policy:
        # Made once per loaded config (the model is frozen), not once per call.
        # By name: a key the policy does not have (or lacks) is a TypeError here, never a silent shift.
        return Policy(**{name: getattr(self, name) for name in type(self).model_fields})


class AnnotationOverride(StrictModel):
    title: str | None = None
    readOnlyHint: bool | None = Field(default=None, strict=True)
    destructiveHint: bool | None = Field(default=None, strict=True)
    idempotentHint: bool | None = Field(default=None, strict=True)
    openWorldHint: bool | None = Field(default=None, strict=True)


class ToolOverride(StrictModel):
    annotations: AnnotationOverride = Field(
        default_factory=AnnotationOverride,
        description="Replaces the hints the server gives for this tool (keys left out keep the server's value).",
    )


class ServerConfig(StrictModel):
    """One upstream MCP server: stdio (`command`) or streamable HTTP (`url`)."""

    command: str | None = Field(default=None, description="Executable of a stdio server.")
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict, description="Extra environment for a stdio server.")
    cwd: str | None = None
    url: str | None = Field(default=None, description="Endpoint of a streamable HTTP server.")
    headers: dict[str, str] = Field(default_factory=dict, description="HTTP headers sent to an HTTP server.")
    enabled: bool = Field(default=True, strict=True)
    trust_annotations: bool = Field(
        default=True, strict=True, description="false: treat all of this server's tools as unannotated."
    )
    tools: dict[str, ToolOverride] = Field(default_factory=dict, description="Per-tool corrections.")
    connect_timeout: float = Field(
        default=30.0, strict=True, gt=0, description="Seconds to wait for the server to start."
    )
    call_timeout: float = Field(default=300.0, strict=True, gt=0, description="Seconds one tool call may take.")
    protocol: Literal["auto", "legacy", "2026-07-28"] = Field(
        default="auto",
        description="MCP revision to speak: auto (a stdio server: the initialize handshake, else 2026-07-28; an "
        "HTTP server: 2026-07-28 if it speaks it, else the handshake), legacy (the handshake only), or 2026-07-28 "
        "(no handshake at all).",
    )
    max_result_bytes: int = Field(
        default=10 * 1024 * 1024,
        strict=True,
        gt=0,
        description="The largest answer (its JSON) accepted from this server for one call; a larger one is refused "
        "with an error and recorded with its size.",
    )

    @model_validator(mode="after")
    def _one_transport(self) -> ServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError("set exactly one of `command` (a stdio server) or `url` (a streamable HTTP server)")
        if self.url is not None and not re.match(r"^https?://", self.url):
            raise ValueError(f"url must start with http:// or https://, got {self.url!r}")
        return self

    @property
    def transport(self) -> str:
        return "stdio" if self.command is not None else "http"


class DaemonConfig(StrictModel):
    port: Annotated[int, Field(ge=0, le=65535)] = Field(
        default=0, strict=True, description="Port of the agent HTTP endpoint on 127.0.0.1; 0 picks a free port."
    )


class LogConfig(StrictModel):
    """The activity log at <data dir>/activity.jsonl."""

    on_failure: Literal["refuse", "continue"] = Field(
        default="refuse",
        description='A call\'s record cannot be made durable (disk full, log unwritable): "refuse" ends the call '
        'with AUDIT_UNAVAILABLE before it is forwarded; "continue" lets it run, its record kept in memory until '
        "the log can be written again.",
    )

    fsync: bool = Field(
        default=True,
        strict=True,
        description="true: a call's result reaches the agent only after its record is on disk (fsync, grouped "
        "under load); false: records reach the OS at once and the disk when it flushes (faster, a power loss "
        "can cost the last records).",
    )
    max_bytes: int = Field(
        default=20 * 1024 * 1024,
        strict=True,
        ge=0,
        description="Rotate the live file before it grows past this many bytes; 0 never rotates.",
    )
    keep: int = Field(
        default=5, strict=True, ge=1, le=1000, description="Rotated files kept (activity.jsonl.1 is the newest)."
    )
    arguments_max_bytes: int = Field(
        default=4096,
        strict=True,
        ge=0,
        description="Stored arguments (after redaction) larger than this are kept as a truncated preview; "
        "0 stores none.",
    )
    response_preview_bytes: int = Field(
        default=512,
        strict=True,
        ge=0,
        description="Bytes of the tool's answer kept as a preview (after redaction); 0 keeps none.",
    )
    redact_keys: list[str] = Field(
        default_factory=list,
        description="More argument names whose values never reach the log, beside the built-in credential names.",
    )


_TABLE = AgentToolTable()


# The `[hooks]` table: how the agent's own tools (Bash, Edit, an MCP server of its own) that reach `mcphost hook`
# map onto read / write / destructive. A person's names and patterns come first; the built-in table after them.
class HooksConfig(StrictModel):
    read: list[str] = Field(
        default_factory=list, description="Tool names judged as reads (e.g. a custom Bash-free tool)."
    )
    write: list[str] = Field(default_factory=list, description="Tool names judged as writes.")
    destructive: list[str] = Field(default_factory=list, description="Tool names judged as destructive.")
    shell: list[str] = Field(
        default_factory=list,
        description="Tool names whose input `command` is a shell command, judged by the command patterns.",
    )
    destructive_commands: list[str] = Field(
        default_factory=list,
        description="Regular expressions (Python syntax, searched anywhere in the command): a shell command that "
        "matches one is destructive. Checked before the built-in ones (rm, git push --force, DROP TABLE, ...).",
    )
    read_commands: list[str] = Field(
        default_factory=list,
        description="Regular expressions matched against the whole command: a command without shell operators "
        "(; & | redirection, substitution) that matches one is a read. Checked before the built-in ones (ls, "
        "cat, git status, ...).",
    )
    unknown: OperationType = Field(
        default=_TABLE.unknown, description="What a tool in no list (and no MCP tool mcphost knows) is judged as."
    )
    builtin: bool = Field(
        default=_TABLE.builtin,
        strict=True,
        description="false: only the names and patterns above count, none of the built-in table.",
    )
    mcphost_servers: list[str] = Field(
        default_factory=lambda: ["mcphost"],
        description="The names under which the agent knows mcphost itself: its tools are decided when the call "
        "reaches mcphost, so the hook lets them through without a second prompt.",
    )

    @field_validator("destructive_commands", "read_commands")
    @classmethod
    def _patterns(cls, patterns: list[str]) -> list[str]:
        for pattern in patterns:
            BoundedPattern(pattern)  # ValueError, as the engine that searches with it reads it
        return patterns

    def to_table(self) -> AgentToolTable:
        return AgentToolTable(
            read=tuple(self.read),
            write=tuple(self.write),
            destructive=tuple(self.destructive),
            shell=tuple(self.shell),
            destructive_commands=tuple(self.destructive_commands),
            read_commands=tuple(self.read_commands),
            unknown=self.unknown,
            builtin=self.builtin,
        )


# The record types of the activity log (`mcphost.activity.record.RecordType`; a unit test keeps the two the same).
ExportedRecordType = Literal[
    "tool_call",
    "tool_call_started",
    "hook_decision",
    "config_reload",
    "config_error",
    "upstream_connected",
    "upstream_lost",
    "annotations_changed",
]
EXPORTED_RECORD_TYPES: tuple[ExportedRecordType, ...] = get_args(ExportedRecordType)


# The `[export.otlp]` table: the activity stream, as it is written (redacted), sent on to an OpenTelemetry collector.
class OtlpExportConfig(StrictModel):
    enabled: bool = Field(default=True, strict=True, description="false: keep the table but export nothing.")
    endpoint: str = Field(
        default="http://127.0.0.1:4318",
        description="The collector's OTLP http/protobuf base URL; records go to <endpoint>/v1/traces and "
        "<endpoint>/v1/logs.",
    )
    headers: dict[str, str] = Field(
        default_factory=dict,
        description="HTTP headers sent with every export, e.g. Authorization for a hosted backend.",
    )
    records: list[ExportedRecordType] = Field(
        default_factory=lambda: list(EXPORTED_RECORD_TYPES),
        description="Which record types are exported: tool_call and hook_decision as spans, the others as logs.",
    )
    timeout: float = Field(
        default=10.0,
        strict=True,
        gt=0,
        le=300,
        description="Seconds one batch may take to reach the collector, retries included; then it is dropped "
        "(and counted in `mcphost status`).",
    )
    capture_content: bool = Field(
        default=False,
        strict=True,
        description="true: spans also carry the tool's arguments and the start of its answer, redacted as in the "
        "activity log (gen_ai.tool.call.arguments, mcphost.response_preview).",
    )
    resource: dict[str, str] = Field(
        default_factory=dict,
        description='More resource attributes on everything exported, e.g. { "user.email" = "ana@example.com", '
        '"deployment.environment.name" = "dev" }.',
    )

    @field_validator("endpoint")
    @classmethod
    def _http_url(cls, endpoint: str) -> str:
        if not re.match(r"^https?://[^/?#]+", endpoint):
            raise ValueError(f"endpoint must be an http:// or https:// URL, got {endpoint!r}")
        if "?" in endpoint or "#" in endpoint:
            raise ValueError(f"endpoint is a base URL (no query or fragment), got {endpoint!r}")
        return endpoint


class ExportConfig(StrictModel):
    otlp: OtlpExportConfig | None = Field(
        default=None, description="The activity stream as OpenTelemetry spans and logs, over OTLP http/protobuf."
    )


# One argument's condition in a rule: exactly one of these keys.
class ArgConditionConfig(StrictModel):
    glob: str | None = Field(default=None, description="A glob on the argument's text: * ? [...] (* spans /).")
    regex: str | None = Field(
        default=None, description="A regular expression (Python syntax) searched in the text: anchor it with ^ $."
    )
    inside: str | None = Field(
        default=None,
        description="A directory: the argument is a path inside it, after resolving ~, .. and symlinks (a "
        "relative path is taken against the workspace the daemon was started in).",
    )
    equals: Any = Field(default=None, description="The argument is exactly this value (true is not 1).")
    one_of: list[Any] | None = Field(default=None, description="The argument is exactly one of these values.")

    # Compiled by the validation, and kept: a regex takes most of a millisecond to compile, and a config may hold
    # thousands of them.
    _condition: ArgCondition | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _exactly_one(self) -> ArgConditionConfig:
        given = [kind for kind in ConditionKind if getattr(self, kind.value) is not None]
        if len(given) != 1:
            names = ", ".join(kind.value for kind in ConditionKind)
            raise ValueError(f"give exactly one of {names} (got {', '.join(k.value for k in given) or 'none'})")
        # A regex that does not compile is an error now, not at the first call.
        self._condition = ArgCondition.of(given[0], getattr(self, given[0].value))
        return self

    def condition(self) -> ArgCondition:
        if self._condition is None:  # made without validation (model_construct)
            kind = next(kind for kind in ConditionKind if getattr(self, kind.value) is not None)
            self._condition = ArgCondition.of(kind, getattr(self, kind.value))
        return self._condition


# A `[[rules]]` table: checked in order before the per-variant default of [permissions]; the first match decides.
class RuleConfig(StrictModel):
    tool: str = Field(default="*", description='A glob on "server:tool", e.g. "files:*" or "github:delete_*".')
    variant: OperationType | list[OperationType] | None = Field(
        default=None, description="read, write or destructive, or a list of them; absent: every variant."
    )
    client: str = Field(default="*", description="A glob on the agent's client name as its MCP client reports it.")
    args: dict[str, ArgConditionConfig] = Field(
        default_factory=dict,
        description="Argument name -> one condition; all must hold, and a call without the argument does not "
        "match. Absent: any arguments.",
    )
    action: Action = Field(description="allow | ask | confirm | deny")
    reason: str | None = Field(
        default=None, max_length=1000, description="Shown to the person and, on deny, to the agent."
    )
    allow_destructive: bool = Field(
        default=False,
        strict=True,
        description='Required beside action = "allow" on a rule that matches destructive calls.',
    )

    @model_validator(mode="after")
    def _destructive_needs_consent(self) -> RuleConfig:
        if self.action is Action.ALLOW and not self.allow_destructive and OperationType.DESTRUCTIVE in self.variants():
            raise ValueError(
                'this rule allows destructive calls: add allow_destructive = true beside action = "allow", or name '
                'the variants it allows (variant = "write" or ["read", "write"])'
            )
        return self

    def variants(self) -> list[OperationType]:
        if self.variant is None:
            return list(OperationType)
        return [self.variant] if isinstance(self.variant, OperationType) else list(self.variant)

    def to_rule(self, index: int) -> Rule:
        return Rule.of(
            index,
            tool=self.tool,
            variants=None if self.variant is None else [ToolVariant.for_operation(v) for v in self.variants()],
            client=self.client,
            args={name: condition.condition() for name, condition in self.args.items()},
            action=self.action,
            reason=self.reason,
        )


class Config(StrictModel):
    intent_declaration: IntentDeclarationConfig = Field(default_factory=IntentDeclarationConfig)
    permissions: PermissionsConfig = Field(default_factory=PermissionsConfig)
    rules: list[RuleConfig] = Field(
        default_factory=list, description="[[rules]]: checked in order before [permissions]; the first match wins."
    )
    servers: dict[str, ServerConfig] = Field(default_factory=dict)
    log: LogConfig = Field(default_factory=LogConfig)
    daemon: DaemonConfig = Field(default_factory=DaemonConfig)
    hooks: HooksConfig = Field(default_factory=HooksConfig)
    export: ExportConfig = Field(default_factory=ExportConfig)

    @functools.cached_property
    def compiled_rules(self) -> RuleSet:
        """The rules, compiled and indexed once per loaded config (a reload loads a new one). A tuple of Rule."""
        return RuleSet(rule.to_rule(index) for index, rule in enumerate(self.rules))

    @field_validator("servers")
    @classmethod
    def _server_names(cls, servers: dict[str, ServerConfig]) -> dict[str, ServerConfig]:
        for name in servers:
            if not re.match(SERVER_NAME_PATTERN, name):
                raise ValueError(
                    f"server name {name!r} is not allowed: use letters, digits, '_', '-' and '.' "
                    "(no ':', which separates server and tool)"
                )
        return servers

    def enabled_servers(self) -> dict[str, ServerConfig]:
        return {name: server for name, server in self.servers.items() if server.enabled}


def effective_annotations(server: ServerConfig | None, tool: str, reported: dict[str, Any] | None) -> dict[str, Any]:
    """The hints mcphost acts on: the server's, unless the config distrusts or corrects them."""
    if server is None:
        return dict(reported or {})
    base: dict[str, Any] = dict(reported or {}) if server.trust_annotations else {}
    override = server.tools.get(tool)
    if override is not None:
        base.update(override.annotations.model_dump(exclude_none=True))
    return base


def launch_spec(server: ServerConfig) -> ServerConfig:
    """`server` as mcphost starts it. A stdio server is handed the data dir unless its `env` names one: mcphost's
    own servers (the bundled todo server) keep their files where the host keeps its own, which a child that
    inherits only a few variables (not `XDG_DATA_HOME`) could not work out. Two configs whose servers have the same
    launch spec start the same processes, so switching between them restarts nothing."""
    if server.command is None or "MCPHOST_DATA_DIR" in server.env:
        return server
    return server.model_copy(update={"env": {"MCPHOST_DATA_DIR": str(data_dir()), **server.env}})
