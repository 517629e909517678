"""The agent's own tools mapped onto read / write / destructive: the pure core behind `mcphost hook`."""

from __future__ import annotations

import random
import re
import time
from typing import Any

import pytest

from mcphost.intent import (
    BUILTIN_DESTRUCTIVE_COMMANDS,
    MAX_SEARCHED_COMMAND,
    REGEX_SECONDS,
    AgentToolTable,
    CommandPattern,
    OperationType,
    classify_agent_tool,
    mcp_tool_name,
    shell_command_class,
)
from tests.helpers import runs_in_linear_time

R, W, D = OperationType.READ, OperationType.WRITE, OperationType.DESTRUCTIVE
TABLE = AgentToolTable()


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("ls -la", R),
        ("git status", R),
        ("git log --oneline -5", R),
        ("cat README.md", R),
        ("rg TODO src", R),
        ("find . -name '*.py'", R),
        ("git branch", R),
        ("npm test", W),
        ("echo hi > notes.txt", W),
        ("cat a | sh", W),
        ("ls; curl x | sh", W),
        ("git push origin main", W),
        ("git branch feature", W),
        ("docker run --rm alpine true", W),
        ("find . -name x -exec sed -i s/a/b/ {} +", W),
        ("git diff --output=patch.txt", W),
        ("rm -rf build", D),
        ("cd src && rm old.py", D),
        ("echo $(rm -r ~/x)", D),
        ("sudo rm /etc/hosts", D),
        ("git push --force origin main", D),
        ("git push -f", D),
        ("git push origin +main", D),
        ("git push origin :old-branch", D),
        ("git push --force-with-lease", D),
        ("git reset --hard HEAD~3", D),
        ("git clean -fdx", D),
        ("git checkout -- .", D),
        ("git branch -D topic", D),
        ("git stash drop", D),
        ("find . -name '*.tmp' -delete", D),
        ("dd if=/dev/zero of=/dev/sda", D),
        ('psql -c "DROP TABLE users"', D),
        ("sqlite3 app.db 'delete from sessions'", D),
        ("kubectl delete pod web-1", D),
        ("docker system prune -af", D),
        ("terraform destroy", D),
        ("terraform apply -auto-approve -destroy", D),
        ("terraform apply -auto-approve", W),
        ("git restore src/app.py", D),
        ("git restore --staged src/app.py", W),
        ("Remove-Item -Recurse -Force build", D),
        ("rd /s /q build", D),
        # Quoted, escaped or spelled another way, as the shell reads it still.
        ("find ftest '-delete'", D),
        ("r''m -rf ~", D),
        ('"rm" -rf ~', D),
        ("r\\m -rf ~", D),
        ("${RM:-rm} -rf ~", D),
        ("dd if=/dev/zero o''f=/dev/sda", D),
        ("git -C . push -f", D),
        ("git --git-dir=.git -c a=b push --forc origin", D),
        ("git push -uf origin main", D),
        ("git push --follow-tags", W),
        ("git reset --har", D),
        ("git -C repo reset --hard", D),
        ("git -C repo clean -fd", D),
        ("kubectl -n prod delete pod web-1", D),
        ("kubectl logs delete-job", W),
        ("terraform -chdir=infra destroy", D),
        ("rsync -a --delete src/ dst/", D),
        ("tar -czf x.tgz --remove-files logs", D),
        # Reads only while they only look: a flag that writes a file or runs a program makes a write.
        ("find . -maxdepth 0 '-fprint' victim", W),
        ("git diff '--output=/home/u/.bashrc'", W),
        ("git grep -O'touch /tmp/x' -e hello", W),
        ("git grep --open-files-in-pager=vi x", W),
        ("rg --pre ./evil.sh x", W),
        ("rg --pre=./evil.sh x", W),
        ("tree -o out.txt", W),
        ("tree -R -H . src", W),
        ("hostname evil", W),
        ("date -s 2020-01-01", W),
        ("file -C -m magic", W),
        ("grep -r 'foo bar' .", R),
        ("git log --format='%h %s'", R),
        ("tree src", R),
        ("hostname -f", R),
        ("date +%s", R),
        ("cat 'unclosed", W),
    ],
)
def test_shell_commands_are_read_only_when_they_only_look_destructive_when_they_delete(
    command: str, expected: OperationType
) -> None:
    assert shell_command_class(command, TABLE).operation is expected


def test_a_destructive_pattern_is_named_in_the_reason() -> None:
    assert shell_command_class("git push --force", TABLE).because.endswith("git push --force")


@pytest.mark.parametrize(
    ("tool", "tool_input", "expected"),
    [
        ("Read", {"file_path": "/a"}, R),
        ("Grep", {"pattern": "x"}, R),
        ("Glob", {"pattern": "*"}, R),
        ("LS", {"path": "/"}, R),
        ("WebFetch", {"url": "https://example.com", "prompt": "?"}, R),
        ("Edit", {"file_path": "/a"}, W),
        ("Write", {"file_path": "/a", "content": ""}, W),
        ("NotebookEdit", {"notebook_path": "/a.ipynb"}, W),
        ("Bash", {"command": "rm -rf /"}, D),
        ("Bash", {"command": "pytest -q"}, W),
        ("run_in_terminal", {"command": "git reset --hard", "explanation": "", "isBackground": False}, D),
        ("read_file", {"filePath": "/a"}, R),
        ("replace_string_in_file", {"filePath": "/a"}, W),
        ("bash", {"command": "ls"}, R),
        ("apply_patch", {"command": "*** Begin Patch\n*** Update File: a.py\n@@\n-x\n+y\n*** End Patch"}, W),
        ("apply_patch", {"input": "*** Begin Patch\n*** Delete File: a.py\n*** End Patch"}, D),
        # Codex reads the marker after any indentation.
        ("apply_patch", {"input": "*** Begin Patch\n  *** Delete File: a.py\n*** End Patch"}, D),
        ("apply_patch", {"input": "*** Begin Patch\n\t*** Delete File: a.py\n*** End Patch"}, D),
        ("SomeNewTool", {}, W),
    ],
)
def test_each_agents_tools_map_onto_the_three_variants(tool: str, tool_input: dict, expected: OperationType) -> None:
    assert classify_agent_tool(tool, tool_input, TABLE).operation is expected


def test_questions_to_the_agents_user_are_left_to_the_agent() -> None:
    for tool in ("AskUserQuestion", "ExitPlanMode", "vscode_askQuestions"):
        assert classify_agent_tool(tool, {}, TABLE).operation is None


def test_a_persons_table_comes_before_the_built_in_one() -> None:
    mine = AgentToolTable(read=("Bash",), destructive=("Edit",), unknown=OperationType.READ)
    assert classify_agent_tool("Bash", {"command": "rm -rf /"}, mine).operation is R
    assert classify_agent_tool("Edit", {}, mine).operation is D
    assert classify_agent_tool("Brand_new", {}, mine).operation is R


def test_a_persons_command_patterns_extend_the_built_in_ones() -> None:
    mine = AgentToolTable(destructive_commands=(r"\bmake\s+clean\b",), read_commands=(r"make\s+-n(\s+\S+)*",))
    assert shell_command_class("make clean", mine).operation is D
    assert shell_command_class("make -n all", mine).operation is R
    assert shell_command_class("make -n all; rm x", mine).operation is D
    assert shell_command_class("rm x", AgentToolTable(builtin=False)).operation is W


def test_a_persons_pattern_that_runs_past_its_time_is_read_the_stricter_way() -> None:
    # (a|aa)+ on a run of a's that does not end the text: time that doubles with about every character the agent
    # adds. Unbounded, this held the daemon's loop (some 10 s at 36 characters); stopped, the pattern cannot tell,
    # and counts as a destructive match, and as no read.
    slow = r"^(a|aa)+$"
    command = "a" * 36 + "!"
    started = time.perf_counter()
    destroys = shell_command_class(command, AgentToolTable(destructive_commands=(slow,), builtin=False))
    reads = shell_command_class(command, AgentToolTable(read_commands=(slow,), builtin=False))
    assert time.perf_counter() - started < 20 * REGEX_SECONDS + 1
    assert destroys.operation is D and "was stopped" in destroys.because and slow in destroys.because
    assert reads.operation is W
    # Within its time it answers as ever.
    assert shell_command_class("aaaa", AgentToolTable(read_commands=(slow,), builtin=False)).operation is R


def test_an_mcp_tool_is_judged_by_its_servers_annotations_when_mcphost_knows_them() -> None:
    assert classify_agent_tool("mcp__github__delete_repo", {}, TABLE, {"destructiveHint": True}).operation is D
    assert classify_agent_tool("mcp__github__get_issue", {}, TABLE, {"readOnlyHint": True}).operation is R
    assert classify_agent_tool("mcp__github__get_issue", {}, TABLE, {}).operation is W
    assert classify_agent_tool("mcp__unknown__anything", {}, TABLE).operation is W


def test_mcp_tool_names_of_every_agent_are_split_into_server_and_tool() -> None:
    assert mcp_tool_name("mcp__github__create_issue") == ("github", "create_issue")
    assert mcp_tool_name("mcp__plugin_x_fs__read__deep") == ("plugin_x_fs", "read__deep")
    assert mcp_tool_name("mcp_github_create_issue", ["github"]) == ("github", "create_issue")
    assert mcp_tool_name("mcp_my_server_list", ["My Server", "my"]) == ("My Server", "list")
    assert mcp_tool_name("mcp_github_create_issue") is None
    assert mcp_tool_name("Bash") is None


def test_a_destructive_pattern_finds_what_its_regular_expressions_search_finds() -> None:
    # Shaped patterns skip the places that would fail for the reason an earlier one in the same command failed.
    patterns = [(CommandPattern.of(source), re.compile(source)) for source in BUILTIN_DESTRUCTIVE_COMMANDS.values()]
    assert sum(1 for pattern, _ in patterns if pattern.word is not None) >= 9
    pieces = [
        "git",
        " ",
        "\t",
        "\n",
        ";",
        "|",
        "&",
        "reset",
        "checkout",
        "push",
        "restore",
        "branch",
        "clean",
        "x",
        "--hard",
        "--staged",
        "-f",
        "--force",
        "--",
        "-D",
        "+m",
        ":m",
        "terraform",
        "apply",
        "-destroy",
        "find",
        "-delete",
        "-exec rm",
        "dd",
        "of=",
        "-",
        ".",
        "=",
        "git reset ",
        "git restore ",
        "terraform apply ",
        "-C",
        "-c",
        "kubectl",
        "delete",
        "destroy",
        "rsync",
        "--delete",
        "--har",
    ]
    rng = random.Random(21)
    for _ in range(6_000):
        command = "".join(rng.choices(pieces, k=rng.randint(1, 24)))
        for pattern, plain in patterns:
            assert pattern.search(command) is (plain.search(command) is not None), (plain.pattern, command)


@pytest.mark.parametrize(
    ("source", "word", "unless"),
    [
        (r"a[^\n;|&]*(b|c)", r"a", None),
        (r"a(?![^\n;|&]*--x)", r"a", r"--x"),
        (r"a|b[^\n;|&]*c", None, None),  # an alternation: not a word then a gap
        (r"ab[^\n;|&]*c|d", None, None),
        (r"(a[^\n;|&]*b)", None, None),  # the gap inside a group
        (r"a(?![^\n;|&]*--x)y", None, None),  # something after the lookahead
        (r"\(a[^\n;|&]*b", r"\(a", None),  # an escaped bracket is no group
    ],
)
def test_only_a_pattern_that_is_a_word_then_the_rest_of_its_command_is_searched_by_words(
    source: str, word: str | None, unless: str | None
) -> None:
    pattern = CommandPattern.of(source)
    assert (pattern.word.pattern if pattern.word else None, pattern.unless.pattern if pattern.unless else None) == (
        word,
        unless,
    )


def test_the_longest_command_searched_of_repeated_command_words_is_judged_in_linear_time() -> None:
    # Each `git reset ` read the rest of the line with `search`: minutes a megabyte, on the daemon's loop. A hang
    # detector, not a timing (run apart so that a hang can be stopped).
    script = (
        "from mcphost.intent import AgentToolTable, MAX_SEARCHED_COMMAND, OperationType, shell_command_class\n"
        "table = AgentToolTable()\n"
        "for word in ('git reset ', 'find . ', 'terraform apply ', 'git -C . ', 'git -c ', 'kubectl -n x '):\n"
        "    command = word * (MAX_SEARCHED_COMMAND // len(word))\n"
        "    assert shell_command_class(command, table).operation is not OperationType.DESTRUCTIVE\n"
        "command = 'git restore ' * (MAX_SEARCHED_COMMAND // 12 - 1) + '--staged'\n"
        "assert shell_command_class(command, table).operation is OperationType.WRITE\n"
    )
    runs_in_linear_time(script)


def test_a_command_longer_than_is_searched_is_destructive_saying_why() -> None:
    # Searched, a 10 MB command held the daemon's loop for seconds: what is past the bound is not read at all.
    judged = shell_command_class("ls " + "a" * MAX_SEARCHED_COMMAND, TABLE)
    assert judged.operation is D and "more than mcphost searches" in judged.because


def test_an_mcp_tools_double_underscore_name_is_read_as_its_regular_expression_reads_it() -> None:
    expression = re.compile(r"^mcp__(?P<server>.+?)__(?P<tool>.+)$")
    rng = random.Random(22)
    pieces = ["mcp", "__", "_", "a", "b", "\n", "mcp__", " ", "é"]
    for _ in range(20_000):
        name = "".join(rng.choices(pieces, k=rng.randint(0, 10)))
        found = expression.match(name)
        assert mcp_tool_name(name) == ((found["server"], found["tool"]) if found else None), repr(name)


def test_a_megabyte_tool_name_is_read_in_linear_time() -> None:
    script = (
        "from mcphost.intent import mcp_tool_name\nassert mcp_tool_name('mcp__' + '__a' * 400_000 + '\\nx') is None\n"
    )
    runs_in_linear_time(script)


@pytest.mark.parametrize(
    ("tool_input", "runs", "plain"),
    [
        ({"command": "npm test", "description": "tests"}, {"command": "npm test"}, True),
        ({"command": "git commit -m 'a b'"}, {"command": "git commit -m 'a b'"}, True),
        ({"command": "npm test; sh x"}, {"command": "npm test; sh x"}, False),
        ({"command": "echo $HOME"}, {"command": "echo $HOME"}, False),
        ({"command": "echo 'open"}, {"command": "echo 'open"}, False),
        ({"command": "a" * (MAX_SEARCHED_COMMAND + 1)}, {"command": "a" * (MAX_SEARCHED_COMMAND + 1)}, False),
        # What is classified is what a grant is keyed on: the first key holding a command, not the first key.
        ({"command": 5, "cmd": "rm -rf ~"}, {"cmd": "rm -rf ~"}, True),
        ({"cmd": ["sh", "-c", "make"], "workdir": "/src"}, {"cmd": ["sh", "-c", "make"]}, False),
        ({"description": "no command"}, {"description": "no command"}, False),
    ],
)
def test_a_shell_tool_names_what_runs_and_whether_it_is_one_plain_command(
    tool_input: dict[str, Any], runs: dict[str, Any], plain: bool
) -> None:
    judged = classify_agent_tool("Bash", tool_input, TABLE)
    assert (judged.runs, judged.plain) == (runs, plain)
    assert classify_agent_tool("Edit", tool_input, TABLE).runs is None
