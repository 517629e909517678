"""The two-key intent model, as plain functions over plain data (no I/O).

An agent declares its intent twice: by the tool variant it calls and by `intent.operation_type`. This module
parses the declaration in each of the forms agents send, checks the two keys against each other, and checks
the result against what the upstream server says about the tool.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from mcphost.errors import ErrorCode, GatewayError

MAX_REASON_LENGTH = 1000


class OperationType(StrEnum):
    READ = "read"
    WRITE = "write"
    DESTRUCTIVE = "destructive"


class DataSensitivity(StrEnum):
    PUBLIC = "public"
    INTERNAL = "internal"
    PRIVATE = "private"
    UNKNOWN = "unknown"


class ToolVariant(StrEnum):
    READ = "call_tool_read"
    WRITE = "call_tool_write"
    DESTRUCTIVE = "call_tool_destructive"

    @property
    def operation(self) -> OperationType:
        return _VARIANT_OPERATION[self]

    @classmethod
    def for_operation(cls, operation: OperationType) -> ToolVariant:
        return _OPERATION_VARIANT[operation]


_VARIANT_OPERATION = {
    ToolVariant.READ: OperationType.READ,
    ToolVariant.WRITE: OperationType.WRITE,
    ToolVariant.DESTRUCTIVE: OperationType.DESTRUCTIVE,
}
_OPERATION_VARIANT = {op: variant for variant, op in _VARIANT_OPERATION.items()}
# Members by value, for the per-call path: `ToolVariant(value)` runs two frames of the enum machinery's Python.
VARIANTS_BY_VALUE: dict[str, ToolVariant] = {str(variant): variant for variant in ToolVariant}
_OPERATIONS_BY_VALUE: dict[str, OperationType] = {str(op): op for op in OperationType}
_SENSITIVITIES_BY_VALUE: dict[str, DataSensitivity] = {str(level): level for level in DataSensitivity}

FLAT_INTENT_KEYS = ("intent_operation_type", "intent_data_sensitivity", "intent_reason")


@dataclass(frozen=True, slots=True)
class IntentDeclaration:
    operation_type: OperationType
    data_sensitivity: DataSensitivity | None = None
    reason: str | None = None

    def to_dict(self) -> dict[str, str]:
        # str() of a StrEnum is its value, without `.value`'s Python-level property: every call makes this dict.
        out = {"operation_type": str(self.operation_type)}
        if self.data_sensitivity is not None:
            out["data_sensitivity"] = str(self.data_sensitivity)
        if self.reason is not None:
            out["reason"] = self.reason
        return out


@dataclass(frozen=True, slots=True)
class Annotations:
    """The behaviour hints an upstream server gave for a tool (None: the server said nothing)."""

    read_only: bool | None = None
    destructive: bool | None = None

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any] | None) -> Annotations:
        if not raw:
            return cls()
        ro, de = raw.get("readOnlyHint"), raw.get("destructiveHint")
        return cls(read_only=ro if isinstance(ro, bool) else None, destructive=de if isinstance(de, bool) else None)


def recommended_variant(annotations: Annotations) -> ToolVariant:
    """The variant mcphost tells agents to use: destructive wins over read-only; unannotated means write."""
    if annotations.destructive:
        return ToolVariant.DESTRUCTIVE
    if annotations.read_only:
        return ToolVariant.READ
    return ToolVariant.WRITE


_RANK = {ToolVariant.READ: 0, ToolVariant.WRITE: 1, ToolVariant.DESTRUCTIVE: 2}


def stricter_variant(declared: ToolVariant, recommended: ToolVariant) -> ToolVariant:
    """The variant whose permission governs a call: the agent's, or the server's reading of the tool if stricter."""
    return recommended if _RANK[recommended] > _RANK[declared] else declared


def _error(code: ErrorCode, message: str, variant: ToolVariant, **details: Any) -> GatewayError:
    return GatewayError(code, message, {"variant": variant.value, **details})


def raw_intent(arguments: Mapping[str, Any]) -> Any:
    """The intent as the agent sent it: the `intent` value, or the flat `intent_*` keys gathered up."""
    if "intent" in arguments and arguments["intent"] is not None:
        return arguments["intent"]
    flat = {key.removeprefix("intent_"): arguments[key] for key in FLAT_INTENT_KEYS if key in arguments}
    return flat or None


def parse_intent(raw: Any, variant: ToolVariant) -> IntentDeclaration:
    """Accept the canonical object, a JSON string of it, or the gathered flat form; reject anything else."""
    if raw is None or raw == "":
        raise _error(ErrorCode.MISSING_INTENT, f"intent parameter is required for {variant.value}", variant)
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except (json.JSONDecodeError, RecursionError) as exc:
            # RecursionError: brackets nested past the parser's recursion, which came out as a fault of mcphost's own.
            why = exc.msg if isinstance(exc, json.JSONDecodeError) else "it nests too deep to read"
            raise _error(
                ErrorCode.MISSING_OPERATION_TYPE,
                "intent.operation_type is required (intent was a string that is not a JSON object: "
                f'{why}); send intent as {{"operation_type": "{variant.operation.value}"}}',
                variant,
            ) from None
    if type(raw) is not dict and not isinstance(raw, Mapping):  # a dict, nearly always: no ABC check
        raise _error(
            ErrorCode.MISSING_OPERATION_TYPE,
            f"intent.operation_type is required (intent must be an object such as "
            f'{{"operation_type": "{variant.operation.value}"}}, not {type(raw).__name__})',
            variant,
        )

    op = raw.get("operation_type")
    if op is None or op == "":
        raise _error(ErrorCode.MISSING_OPERATION_TYPE, "intent.operation_type is required", variant)
    operation = _OPERATIONS_BY_VALUE.get(op) if isinstance(op, str) else None
    if operation is None:
        raise _error(
            ErrorCode.INVALID_OPERATION_TYPE,
            f"Invalid intent.operation_type '{op}': must be read, write, or destructive",
            variant,
            operation_type=op,
        )

    sens_raw = raw.get("data_sensitivity")
    sensitivity: DataSensitivity | None = None
    if sens_raw is not None and sens_raw != "":
        sensitivity = _SENSITIVITIES_BY_VALUE.get(sens_raw) if isinstance(sens_raw, str) else None
        if sensitivity is None:
            raise _error(
                ErrorCode.INVALID_SENSITIVITY,
                f"Invalid intent.data_sensitivity '{sens_raw}': must be public, internal, private, or unknown",
                variant,
            )

    reason = raw.get("reason")
    if reason is not None and not isinstance(reason, str):
        reason = json.dumps(reason)
    if reason is not None and len(reason) > MAX_REASON_LENGTH:
        raise _error(
            ErrorCode.REASON_TOO_LONG,
            f"intent.reason exceeds maximum length of {MAX_REASON_LENGTH} characters",
            variant,
            length=len(reason),
        )
    return IntentDeclaration(operation, sensitivity, reason or None)


def check_two_keys(variant: ToolVariant, intent: IntentDeclaration) -> None:
    """Key one is the variant, key two is `intent.operation_type`: they must agree."""
    if intent.operation_type is not variant.operation:
        raise _error(
            ErrorCode.INTENT_MISMATCH,
            f"Intent mismatch: tool is {variant.value} but intent declares {intent.operation_type.value}",
            variant,
            operation_type=intent.operation_type.value,
            recommended_variant=ToolVariant.for_operation(intent.operation_type).value,
        )


@dataclass(frozen=True, slots=True)
class AnnotationVerdict:
    warnings: tuple[str, ...] = ()


def check_annotations(
    variant: ToolVariant, tool_name: str, annotations: Annotations, *, strict: bool
) -> AnnotationVerdict:
    """The server-annotation half of the matrix; `strict=False` turns a mismatch into a warning."""
    recommended = recommended_variant(annotations)
    if variant is ToolVariant.DESTRUCTIVE:
        return AnnotationVerdict()
    if annotations.destructive:
        message = f"Tool '{tool_name}' is marked destructive by server, use call_tool_destructive"
        if strict:
            raise _error(
                ErrorCode.SERVER_MISMATCH, message, variant, tool=tool_name, recommended_variant=recommended.value
            )
        return AnnotationVerdict((f"{message} (allowed: strict_server_validation is off)",))
    if variant is ToolVariant.WRITE and annotations.read_only:
        return AnnotationVerdict(
            (f"Tool '{tool_name}' is marked read-only by server; call_tool_read is enough for it",)
        )
    return AnnotationVerdict()


def validate_call(
    variant: ToolVariant,
    raw: Any,
    tool_name: str,
    annotations: Annotations,
    *,
    strict: bool,
) -> tuple[IntentDeclaration, AnnotationVerdict]:
    """The whole intent check for one call, in the order the contract gives: parse, two keys, annotations."""
    intent = parse_intent(raw, variant)
    check_two_keys(variant, intent)
    return intent, check_annotations(variant, tool_name, annotations, strict=strict)


# ---- the agent's own tools (hooks): what a Bash command, an Edit or an MCP tool named in a hook amounts to


class AgentToolKind(StrEnum):
    """How a tool of the agent's own is judged: by its name alone, or by what its input says."""

    READ = "read"
    WRITE = "write"
    DESTRUCTIVE = "destructive"
    SHELL = "shell"  # the input's command decides: destructive patterns, then read-only commands, else write
    PATCH = "patch"  # a patch: destructive when it deletes a file, else write
    PASS = "pass"  # left to the agent: questions to its user, plan mode (an allow would answer them wrongly)


# Claude Code (PascalCase), VS Code's model-facing names (snake_case), Copilot CLI (lower case) and Codex. Tools
# whose only effect is on the agent's own state (todo lists, subagents, tool search) count as reads: each tool
# a subagent then uses is asked about on its own.
def _names(words: str) -> list[str]:
    return words.split()


BUILTIN_AGENT_TOOLS: dict[str, AgentToolKind] = {
    **dict.fromkeys(
        _names(
            # Claude Code
            "Read Glob Grep LS NotebookRead WebFetch WebSearch TodoRead TodoWrite ListMcpResourcesTool "
            "ReadMcpResourceTool ReadMcpResourceDirTool ToolSearch LSP Agent Task TaskCreate TaskGet TaskList "
            "TaskOutput TaskUpdate ListAgents BashOutput Monitor WaitForMcpServers CronList Skill "
            # VS Code
            "read_file list_dir file_search grep_search semantic_search get_errors get_changed_files fetch_webpage "
            "get_terminal_output view_image github_repo test_failure get_search_view_results manage_todo_list "
            "runSubagent memory "
            # Copilot CLI
            "view glob grep web_fetch task"
        ),
        AgentToolKind.READ,
    ),
    **dict.fromkeys(
        _names(
            "Edit Write MultiEdit NotebookEdit CronCreate CronDelete KillBash TaskStop "
            "create_file replace_string_in_file multi_replace_string_in_file insert_edit_into_file edit_notebook_file "
            "run_notebook_cell create_directory create_and_run_task run_task runTests run_vscode_command "
            "install_extension create_new_workspace editFiles createFile edit create"
        ),
        AgentToolKind.WRITE,
    ),
    **dict.fromkeys(
        _names("Bash PowerShell run_in_terminal runTerminalCommand bash powershell shell exec_command local_shell"),
        AgentToolKind.SHELL,
    ),
    "apply_patch": AgentToolKind.PATCH,
    **dict.fromkeys(
        _names("AskUserQuestion ExitPlanMode EnterPlanMode EndConversation vscode_askQuestions ask_user"),
        AgentToolKind.PASS,
    ),
}

# Commands that delete or overwrite what cannot be had back: searched anywhere in the command, so `cd x && rm -r y`
# and `$(rm y)` count. A command word is one not glued to a letter, `-` or `.` (`docker run --rm` is no `rm`).
BUILTIN_DESTRUCTIVE_COMMANDS: dict[str, str] = {
    "rm": r"(?<![\w.-])(rm|rmdir|unlink|shred|srm|wipefs|mkfs(\.\w+)?|fdisk|sfdisk|parted)(?![\w.-])",
    "dd of=": r"(?<![\w.-])dd(?![\w.-])[^\n;|&]*\bof=",
    "find -delete": r"(?<![\w.-])find(?![\w.-])[^\n;|&]*\s-(delete|exec(dir)?\s+(rm|shred|unlink))(?![\w-])",
    "truncate": r"(?<![\w.-])truncate(?![\w.-])",
    # git takes any unambiguous start of a long option (`--forc`, `--har`), and short flags together (`-fu`).
    "git push --force": r"\bgit\s+push\b[^\n;|&]*(\s(-[a-zA-Z]*[fd][a-zA-Z]*|--(for|de|mir|pru)[\w-]*)(?=[\s=]|$)"
    r"|\s\+\S|\s:\S)",
    "git reset --hard": r"\bgit\s+reset\b[^\n;|&]*\s--(ha|me|ke)[\w-]*(?=[\s=]|$)",
    "git clean": r"\bgit\s+clean\b[^\n;|&]*\s-\w*[fdx]",
    "git checkout --": r"\bgit\s+checkout\b[^\n;|&]*\s(-f|--force|--)(?=\s|$)",
    "git restore": r"\bgit\s+restore\b(?![^\n;|&]*--staged)",
    "git branch -D": r"\bgit\s+branch\b[^\n;|&]*\s(-D|-d|--delete)(?=\s|$)",
    "git history rewrite": r"\bgit\s+(stash\s+(drop|clear)|tag\s+(-d|--delete)|filter-branch|filter-repo"
    r"|update-ref\s+-d|gc\s+--prune)\b",
    "DROP TABLE": r"(?i)\b(drop\s+(table|database|schema|view|index|user|role)|truncate\s+table|delete\s+from)\b",
    "FLUSHALL": r"(?i)\b(flushall|flushdb)\b",
    "kubectl delete": r"\b(kubectl|oc)\b[^\n;|&]*\sdelete(?=\s|$)",
    "docker rm": r"\bdocker\s+(rm|rmi|(system|volume|container|image|network|builder)\s+(prune|rm))\b",
    "terraform destroy": r"\bterraform\b[^\n;|&]*\sdestroy(?=\s|$)",
    "terraform apply -destroy": r"\bterraform\s+apply\b[^\n;|&]*-destroy",
    "cloud delete": r"\b(helm\s+(uninstall|delete)|gh\s+(repo|release)\s+delete|aws\s+s3\s+(rm|rb)"
    r"|gsutil\s+(rm|rb))\b",
    "rsync --delete": r"\brsync\b[^\n;|&]*\s--(del|remove-source)[\w-]*",
    "tar --remove-files": r"\btar\b[^\n;|&]*\s--remove-files",
    "Remove-Item": r"(?i)\b(remove-item|format-volume|clear-disk|clear-content)\b|(?i:\b(rd|rmdir|del|erase)\s+/[sqf])",
}

# Commands that only look, matched against the whole command when it holds no shell operator (no `;`, `&`, `|`,
# redirection, substitution or newline), its words as the shell reads them (unquoted: `'-delete'` is `-delete`):
# anything cleverer is a write, and asked about as one. Each excludes the flags that make its command write or run
# another program (find's -delete and -fprint, git's --output and -O, rg's --pre, tree's -o).
BUILTIN_READ_COMMANDS: tuple[str, ...] = (
    r"(ls|ll|la|dir|pwd|whoami|id|uname|which|type|stat|du|df|wc|nl|realpath|basename"
    r"|dirname|cat|head|tail|less|more|grep|egrep|fgrep|ag|md5sum|sha1sum|sha256sum|echo|printf)(\s+\S+)*",
    r"(date|file)(?!.*\s(-s|--set|-C|--compile)\S*(\s|$))(\s+\S+)*",
    r"hostname(\s+-\S+)*",  # a name after it sets it
    r"rg(?!.*\s--pre(=|\s|$))(\s+\S+)*",
    r"tree(?!.*\s(-[a-zA-Z]*[oR]|--output)\S*(\s|$))(\s+\S+)*",
    r"find(?!.*\s-(exec|execdir|ok|okdir|delete|fprint\w*|fls)(\s|$))(\s+\S+)*",
    r"git\s+(status|log|diff|show|blame|ls-files|ls-tree|rev-parse|describe|shortlog|cat-file|grep)"
    r"(?!.*\s(--ou|--ope|-O|--ext-diff)\S*(\s|$))(\s+\S+)*",
    r"git\s+branch(\s+(-a|-r|-v|-vv|--all|--remotes|--verbose|--list|--show-current|--merged|--no-merged))*",
    r"git\s+remote(\s+(-v|--verbose|show\s+\S+|get-url\s+\S+))?",
    r"(?i)(get-childitem|get-content|get-location|get-item|select-string|test-path)(\s+\S+)*",
)
_SHELL_OPERATORS = re.compile(r"[;&|<>`$(){}\n\r\\]")
# The shell's quoting, taken away for the destructive patterns' second look: `r''m`, `"rm"`, `r\m` are all `rm` to
# it, and so is `${X:-rm}` when X is unset.
_QUOTING = str.maketrans("", "", "'\"\\")
_DEFAULTED = re.compile(r"\$\{\w+:?[-=]([^}]*)\}")
# git's global options (`-C path`, `-c name=value`, `--no-pager`, `--git-dir=...`), taken away for that look too, so
# that `git -C repo push -f` is `git push -f` to the patterns. Each option reads one way only (`-C` and `-c` take
# the next word) and the run ends at the first word that is none: one pass, whatever the command.
_GIT_GLOBALS = re.compile(r"\bgit(?:\s+(?:-[Cc]\s+\S+|-(?![Cc]\s)\S+))+(?=\s)")
# Codex's parser reads the marker after any indentation.
_PATCH_DELETES = re.compile(r"^[ \t]*\*\*\* Delete File:", re.MULTILINE)
# Claude Code and Codex: mcp__<server>__<tool>; VS Code: mcp_<server>_<tool> (its server label, lower-cased).


def _mcp_double(name: str) -> tuple[str, str] | None:
    """`^mcp__(?P<server>.+?)__(?P<tool>.+)$` read with string methods: the expression tried each `__` and read the
    rest of the name each time, where a line break stops `.`: a hook's megabyte name took minutes on the daemon's loop.
    A test holds the two together."""
    if not name.startswith("mcp__"):
        return None
    rest = name[5:-1] if name.endswith("\n") else name[5:]
    if "\n" in rest:
        return None
    at = rest.find("__", 1)
    while at != -1:
        if at + 2 < len(rest):
            return rest[:at], rest[at + 2 :]
        at = rest.find("__", at + 1)
    return None


# How long one of the person's own patterns (a rule's regex, a [hooks] command pattern) may search the agent's text. A
# pattern with nested repetition, such as (a|aa)+$, can take time that doubles with each character an agent adds, and
# a search holds the process (the daemon's every call and editor) until it ends. The `regex` engine stops at this
# bound, where `re` cannot be stopped at all; it also finishes at once on many patterns that `re` takes exponential
# time on ((\w+\s?)*$, (a+)+b). mcphost's own patterns are written to take linear time and stay on `re`.
REGEX_SECONDS = 0.1


class RegexTimedOut(Exception):
    """A person's pattern ran past REGEX_SECONDS on the agent's text: it can say neither yes nor no."""


class BoundedPattern:
    """A person's regular expression, searched in an agent's text for REGEX_SECONDS at most (RegexTimedOut past
    it). `search` and `fullmatch` answer a match object or None, as `re`'s do."""

    __slots__ = ("_pattern", "source")

    def __init__(self, source: str) -> None:
        """Raises ValueError for a pattern that does not compile."""
        import regex  # here: its 24 ms of import are paid only by a config with a pattern of its own

        try:
            self._pattern = regex.compile(source)
        except (regex.error, TypeError) as exc:
            raise ValueError(f"{source!r} is not a regular expression: {exc}") from None
        self.source = source

    def search(self, text: str) -> object:
        try:
            return self._pattern.search(text, timeout=REGEX_SECONDS)
        except TimeoutError:
            raise RegexTimedOut from None

    def fullmatch(self, text: str) -> object:
        try:
            return self._pattern.fullmatch(text, timeout=REGEX_SECONDS)
        except TimeoutError:
            raise RegexTimedOut from None


@dataclass(frozen=True, slots=True)
class AgentToolTable:
    """The `[hooks]` table, as plain data: a person's names and patterns first, then the built-in ones."""

    read: tuple[str, ...] = ()
    write: tuple[str, ...] = ()
    destructive: tuple[str, ...] = ()
    shell: tuple[str, ...] = ()
    destructive_commands: tuple[str, ...] = ()
    read_commands: tuple[str, ...] = ()
    unknown: OperationType = OperationType.WRITE
    builtin: bool = True

    def kind(self, name: str) -> tuple[AgentToolKind | None, str]:
        for kind, names in (
            (AgentToolKind.DESTRUCTIVE, self.destructive),
            (AgentToolKind.WRITE, self.write),
            (AgentToolKind.READ, self.read),
            (AgentToolKind.SHELL, self.shell),
        ):
            if name in names:
                return kind, f"hooks.{kind.value}"
        if self.builtin and name in BUILTIN_AGENT_TOOLS:
            return BUILTIN_AGENT_TOOLS[name], "built-in table"
        return None, ""

    def compiled(
        self,
    ) -> tuple[list[tuple[str, CommandPattern | BoundedPattern]], list[tuple[str, re.Pattern[str] | BoundedPattern]]]:
        return _compile(self.destructive_commands, self.read_commands, self.builtin)


@functools.lru_cache(maxsize=16)
def _compile(
    destructive: tuple[str, ...], read: tuple[str, ...], builtin: bool
) -> tuple[list[tuple[str, CommandPattern | BoundedPattern]], list[tuple[str, re.Pattern[str] | BoundedPattern]]]:
    """The person's patterns (bounded: the agent writes the text) first, then mcphost's own."""
    mine: list[tuple[str, CommandPattern | BoundedPattern]] = [(repr(p), BoundedPattern(p)) for p in destructive]
    if builtin:
        mine += [(name, CommandPattern.of(p)) for name, p in BUILTIN_DESTRUCTIVE_COMMANDS.items()]
    reads: list[tuple[str, re.Pattern[str] | BoundedPattern]] = [(repr(p), BoundedPattern(p)) for p in read]
    if builtin:
        reads += [(repr(p), re.compile(p)) for p in BUILTIN_READ_COMMANDS]
    return mine, reads


_COMMAND_ENDS = r"\n;|&"  # a newline, `;`, `|` or `&`
_GAP = f"[^{_COMMAND_ENDS}]*"  # the rest of a command, as the built-in patterns write it
_PAST_GAP = re.compile(f"[{_COMMAND_ENDS}]")


@dataclass(frozen=True, slots=True)
class CommandPattern:
    """A destructive-command pattern, searched for in a command. One shaped as a command word, then the rest of its
    command (`_GAP`), then a flag (`git reset ... --hard`), or as a word with no flag in the rest of its command
    (`git restore`, not `--staged`), is searched in time that grows with the command: `search` tries every place the
    word is and reads the rest of its command each time, so a line of `git reset ` repeated took minutes a megabyte,
    on the daemon's loop. Where the pattern fails at one place, it fails at every later one whose word ends before
    what made it fail (the rest of its command, or the flag found in it): those are skipped. A test holds each to
    `search`."""

    pattern: re.Pattern[str]
    word: re.Pattern[str] | None = None  # what the pattern opens with, when it is so shaped
    unless: re.Pattern[str] | None = None  # the flag that must not follow, for the second shape

    @classmethod
    def of(cls, source: str) -> CommandPattern:
        pattern = re.compile(source)
        head, gap, rest = source.partition(_GAP)
        if gap and head.endswith("(?!") and rest.endswith(")"):
            word, flag = head.removesuffix("(?!"), rest.removesuffix(")")
            if _balanced(word) and _balanced(flag):
                return cls(pattern, re.compile(word), re.compile(flag))
        elif gap and _balanced(head) and _balanced(rest):
            return cls(pattern, re.compile(head))
        return cls(pattern)

    def search(self, command: str) -> bool:
        word = self.word
        if word is None:
            return self.pattern.search(command) is not None
        failed_until = -1  # where what made the last place fail ends
        for found in word.finditer(command):
            if found.end() <= failed_until:
                continue
            past = _PAST_GAP.search(command, found.end())
            end = len(command) if past is None else past.start()
            flag = None if self.unless is None else self.unless.search(command, found.end(), end)
            if flag is None and self.pattern.match(command, found.start()) is not None:
                return True
            failed_until = end if flag is None else flag.start()
        return False


def _balanced(regex: str) -> bool:
    """Whether `regex` closes every group it opens and is no alternation at its top (escapes and sets aside): the
    part of a pattern before or after its gap, for the pattern to be that part, the gap, then the rest."""
    depth = 0
    for char in _REGEX_SETS.sub("", _REGEX_ESCAPES.sub("", regex)):
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth < 0:
                return False
        elif char == "|" and depth == 0:
            return False
    return depth == 0


_REGEX_ESCAPES = re.compile(r"\\.")
_REGEX_SETS = re.compile(r"\[[^\]]*\]")


@dataclass(frozen=True, slots=True)
class AgentToolClass:
    """What an agent's tool call amounts to. `operation` None: mcphost leaves it to the agent."""

    operation: OperationType | None
    because: str  # for the record and the person: which table entry or pattern said so
    # A shell tool's: the part of its input that says what runs (`{"command": ...}`), all a remembered allow may be
    # keyed on (its `description` says nothing of what runs), and whether it is one plain command, with no operator
    # or expansion a pattern's glob could reach past (`npm test*` must not cover `npm test; curl ... | sh`).
    runs: dict[str, Any] | None = None
    plain: bool = False


def mcp_tool_name(name: str, servers: Iterable[str] = ()) -> tuple[str, str] | None:
    """(server, tool) of an MCP tool as an agent names it in a hook: `mcp__github__create_issue` (Claude Code,
    Codex), or `mcp_github_create_issue` (VS Code) when `github` is one of `servers`."""
    found = _mcp_double(name)
    if found is not None:
        return found
    if name.startswith("mcp_"):
        rest = name[4:]
        for server in sorted(servers, key=len, reverse=True):
            label = re.sub(r"[^a-z0-9_.-]", "_", server.lower())
            if rest.startswith(label + "_") and len(rest) > len(label) + 1:
                return server, rest[len(label) + 1 :]
    return None


def classify_agent_tool(
    name: str,
    tool_input: Mapping[str, Any],
    table: AgentToolTable,
    mcp_annotations: Mapping[str, Any] | None = None,
) -> AgentToolClass:
    """The variant an agent's own tool call is judged as. `mcp_annotations`: the hints of the MCP tool `name`
    names, when mcphost knows its server (None: not an MCP tool mcphost knows)."""
    kind, source = table.kind(name)
    if kind is None and mcp_annotations is not None:
        variant = recommended_variant(Annotations.from_mapping(mcp_annotations))
        hints = (
            "read-only"
            if variant is ToolVariant.READ
            else "destructive"
            if variant is ToolVariant.DESTRUCTIVE
            else "not read-only"
        )
        return AgentToolClass(variant.operation, f"the MCP server marks the tool {hints}")
    if kind is None:
        return AgentToolClass(table.unknown, f"not in the hooks table: hooks.unknown = {table.unknown.value}")
    if kind is AgentToolKind.PASS:
        return AgentToolClass(None, f"{name} is a question to the agent's user ({source}): left to the agent")
    if kind is AgentToolKind.PATCH:
        text = _first_text(tool_input, ("input", "command", "patch"))
        if _PATCH_DELETES.search(text):
            return AgentToolClass(OperationType.DESTRUCTIVE, "the patch deletes a file")
        return AgentToolClass(OperationType.WRITE, f"{name} edits files ({source})")
    if kind is AgentToolKind.SHELL:
        key = _first_key(tool_input, _COMMAND_KEYS)
        judged = shell_command_class(_first_text(tool_input, _COMMAND_KEYS), table)
        # No command where one is looked for: the whole input is what runs, for all anyone can tell.
        runs = {key: tool_input[key]} if key is not None else dict(tool_input)
        given = runs.get(key) if key is not None else None
        plain = isinstance(given, str) and len(given) <= MAX_SEARCHED_COMMAND and _shell_words(given) is not None
        return AgentToolClass(judged.operation, judged.because, runs, plain)
    return AgentToolClass(OperationType(kind.value), f"{name} is a {kind.value} tool ({source})")


# The longest shell command searched: each pattern reads a command at some 30 ns a character, on the daemon's loop
# that every agent's call and editor shares (a 10 MB command held it for 5 s). What an agent runs in a shell is far
# shorter; a file's worth of heredoc is a write the Write tool makes instead.
MAX_SEARCHED_COMMAND = 128 * 1024


def shell_command_class(command: str, table: AgentToolTable) -> AgentToolClass:
    if len(command) > MAX_SEARCHED_COMMAND:
        return AgentToolClass(
            OperationType.DESTRUCTIVE,
            f"the command is {len(command)} characters long, more than mcphost searches ({MAX_SEARCHED_COMMAND}): "
            "what it does cannot be told, so it counts as destructive",
        )
    destructive, read = table.compiled()
    unquoted = _GIT_GLOBALS.sub("git", _DEFAULTED.sub(r"\1", command).translate(_QUOTING))
    for pattern, compiled in destructive:
        try:
            if compiled.search(command) or (unquoted != command and compiled.search(unquoted)):
                why = f"the command matches the destructive pattern {pattern}"
                return AgentToolClass(OperationType.DESTRUCTIVE, why)
        except RegexTimedOut:
            # The stricter reading of a pattern that cannot tell: it matched.
            return AgentToolClass(
                OperationType.DESTRUCTIVE,
                f"the destructive pattern {pattern} searched the command for more than {REGEX_SECONDS} s and was "
                "stopped, so it counts as matching: simplify the pattern (nested repetition such as (a|aa)+ can take "
                "time that grows exponentially with the text)",
            )
    words = _shell_words(command)
    if words:
        for _name, only_reads in read:
            try:
                if only_reads.fullmatch(words):
                    return AgentToolClass(OperationType.READ, "a command that only reads")
            except RegexTimedOut:
                continue  # the stricter reading of a pattern that cannot tell: this command is no read by it
    return AgentToolClass(OperationType.WRITE, "a shell command: write unless it only reads or it destroys")


def _shell_words(command: str) -> str | None:
    """The command's words as the shell reads them, joined by spaces; None when it holds a shell operator or quotes
    that do not close (then it is no read, whatever its words)."""
    stripped = command.strip()
    if not stripped or _SHELL_OPERATORS.search(stripped):
        return None
    if "'" not in stripped and '"' not in stripped:
        return stripped
    import shlex

    try:
        return " ".join(shlex.split(stripped))
    except ValueError:
        return None


_COMMAND_KEYS = ("command", "cmd", "script")


def _first_key(tool_input: Mapping[str, Any], keys: tuple[str, ...]) -> str | None:
    """The first of `keys` holding text, or an argv (a list of texts)."""
    for key in keys:
        value = tool_input.get(key)
        if isinstance(value, str) or (isinstance(value, list) and all(isinstance(v, str) for v in value)):
            return key
    return None


def _first_text(tool_input: Mapping[str, Any], keys: tuple[str, ...]) -> str:
    key = _first_key(tool_input, keys)
    if key is None:
        return ""
    value = tool_input[key]
    return value if isinstance(value, str) else " ".join(value)  # argv form


# The event of a call Claude Code's `--permission-prompt-tool` asks about (`mcphost permission-server`): asked only
# where Claude Code would ask its user, in a run where nobody can be asked, and answered allow or deny, no "pass".
PERMISSION_PROMPT_EVENT = "permission-prompt-tool"


@dataclass(frozen=True, slots=True)
class AgentToolUse:
    """One tool call an agent's hook asks about, whichever agent and dialect it came in."""

    agent: str  # claude-code | vscode | codex | copilot-cli
    event: str  # PreToolUse | PermissionRequest | permission-prompt-tool
    tool_name: str
    tool_input: Mapping[str, Any]
    session_id: str | None = None
    tool_use_id: str | None = None
    cwd: str | None = None
