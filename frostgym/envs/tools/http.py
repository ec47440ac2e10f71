"""``HTTPToolsEnv`` (``frostgym/ToolsHTTP-v0``): answer a request by calling REST tools
whose responses are replayed from committed vcrpy cassettes.

Protocol (also in the system message): a reply with tool calls (Hermes
``<tool_call>{"name", "arguments"}</tool_call>`` blocks, python call syntax, or a
structured ``{"tool_calls": [...]}`` action) has every call run, in order, and gets one
``<tool_response>`` per call back; a reply without calls is the final answer and is
graded. Calls never touch a network: an unknown tool or bad arguments get an error
result, and a request the cassettes do not hold gets a ``replay_miss`` error result,
which also marks the episode as a ``replay_miss`` drop (``info["drop"]``) for the runner.
A reply over ``frostgym.tools.calls.MAX_CALL_TEXT`` characters is not read: it ends the
episode, graded ``too_long``. At most ``MAX_CALLS_PER_REPLY`` calls of a reply are read
(``frostgym.tools.calls``), and the first ``MAX_CALLS_PER_TURN`` of them run.
"""

from __future__ import annotations

import json
from typing import Any

from frostgym.core.env import Reply
from frostgym.core.episode import Drop
from frostgym.core.grade import call_grader
from frostgym.core.messages import Message, message
from frostgym.core.splits import Split
from frostgym.core.tasks import Task
from frostgym.envs.tools.base import ToolCallingEnv
from frostgym.envs.tools.tasks import HTTPToolsSource, http_tools_source
from frostgym.graders.tool_http import (
    DEFAULT_CONFIG,
    CallTrace,
    ToolHTTPGraderConfig,
    gold_calls_made,
    grade_tool_http,
)
from frostgym.tools.calls import ToolCall, as_json_data, parse_reply, render_calls
from frostgym.tools.http.arguments import check_arguments
from frostgym.tools.http.clients import TOOL_BY_NAME, tool_schemas
from frostgym.tools.http.replay import CallResult, run_call
from frostgym.tools.responses import ToolResponse, tool_responses

#: Calls past this many in one reply are answered with an error, not run (and not dropped).
MAX_CALLS_PER_TURN = 32
SYSTEM_PROMPT = """You are a helpful assistant with access to HTTP API tools. Today is Friday 2024-03-15.

To use tools, reply with one or more calls, each written as
<tool_call>{{"name": "<tool name>", "arguments": {{<arguments as JSON>}}}}</tool_call>
Several calls in one reply all run, in order; each result comes back in a <tool_response> block.
When you know the answer, reply without any tool call and give your final answer inside <answer></answer>.
You have {turns} turns in total.

Available tools (OpenAI function schemas):
<tools>
{tools}
</tools>"""


class HTTPToolsEnv(ToolCallingEnv):
    """A request per episode, answered by calling replayed REST tools, then a final
    answer that is checked (protocol above). No call reaches a network.

    Arguments:
        split: ``dev``, ``test`` and ``private`` hold the fixed tasks (shared out by a hash
            of the prompt, 30/50/20); there is no ``train``, so asking for it raises.
        level: 1 (one call, or none), 2 (dependent calls in turn) or 3 (parallel calls),
            or None for every task. A level serves only its own tasks, in the splits they
            always had, under ids that name it (``tools_http~L2/dev/3``). ``ValueError``
            lists the levels for one that is not.
        task_config: the source's ``HTTPToolsConfig`` (``{"kinds": ["single"]}``), or with
            ``level`` a mapping of fields set on that level's config; another config tags
            the ids with a hash.
        max_turns: replies per episode, calls and final answer included.
        grader_config: the answer and call checks (``frostgym.graders.tool_http``).
        render_mode: None or ``"ansi"``.

    A request the cassettes do not hold is answered with an error result and marks the
    episode a ``replay_miss`` drop (``info["drop"]``).

    ``reset`` and ``step`` raise what every ``FrozenEnv`` does (see its docstring); a
    structured tool call that is not JSON data is an ``InvalidActionError`` too. Wrong or
    unreadable replies are graded failures, never exceptions.
    """

    family = "tools"
    env_version = "1.1.0"  # what each version changed: CHANGELOG.md
    source: HTTPToolsSource

    def __init__(
        self,
        *,
        level: int | None = None,
        task_config: object = None,
        split: Split = "dev",
        max_turns: int = 8,
        render_mode: str | None = None,
        grader_config: ToolHTTPGraderConfig = DEFAULT_CONFIG,
    ) -> None:
        super().__init__(
            http_tools_source(task_config, level), split=split, max_turns=max_turns, render_mode=render_mode
        )
        self.grader_config = grader_config
        self.tools: list[dict[str, Any]] = tool_schemas()
        self._offered: frozenset[str] = frozenset(TOOL_BY_NAME)
        self._made: list[tuple[str, dict[str, Any]]] = []
        self._failed: list[tuple[str, str]] = []
        self._malformed = 0

    # -- FrozenEnv hooks ---------------------------------------------------------------------
    def contract_limits(self) -> dict[str, Any]:
        return {"max_calls_per_turn": MAX_CALLS_PER_TURN}

    def tool_access(self) -> dict[str, Any]:
        """Every tool a task may be offered, marked by its request (``HttpTool.writes``):
        POST and DELETE write, GET reads."""
        tools = sorted(TOOL_BY_NAME.values(), key=lambda tool: tool.name)
        return {
            "read_only": [tool.name for tool in tools if not tool.writes],
            "writing": [tool.name for tool in tools if tool.writes],
        }

    def first_messages(self, task: Task) -> list[Message]:
        names = list(task.metadata["tools"])
        self.tools = tool_schemas(names)
        self._offered = frozenset(names)
        self._made, self._failed, self._malformed = [], [], 0
        listing = "\n".join(json.dumps(schema, ensure_ascii=False) for schema in self.tools)
        return [
            message("system", SYSTEM_PROMPT.format(turns=self.max_turns, tools=listing)),
            message("user", task.prompt),
        ]

    def respond(self, task: Task, text: str, turn: int, last_turn: bool) -> Reply:
        parsed = parse_reply(text)
        self._malformed += len(parsed.problems)
        if not parsed.attempted:  # a final answer, or a reply too long to read (graded too_long)
            return self._final(task, text)
        if last_turn:
            return self._final(task, None)  # out of turns while still calling tools: no answer
        results = [self._run(call, i) for i, call in enumerate(parsed.calls)]
        contents: list[ToolResponse] = [r.to_dict() for r in results]
        contents += [{"error": "malformed_call", "position": p.position, "message": p.message} for p in parsed.problems]
        left = self.max_turns - turn - 1
        feedback = message("user", tool_responses(contents, f"{left} turn(s) left"))
        misses = [r for r in results if r.error == "replay_miss"]
        return Reply(
            grade=None,
            done=False,
            feedback=feedback,
            tool_calls=tuple(as_json_data(c.to_dict()) for c in parsed.calls),  # python literals as JSON data
            tool_results=tuple(r.to_dict() for r in results),
            drop=Drop("replay_miss", "step", str(misses[0].content)) if misses else None,
        )

    def oracle_action(self) -> str:
        """The first gold round not yet made in this episode (so the oracle also
        finishes an episode another policy started), then the gold answer."""
        task = self.task
        calls = list(task.metadata["gold_calls"])
        start = 0
        for size in task.metadata["gold_rounds"]:
            chosen = calls[start : start + size]
            start += size
            if gold_calls_made(chosen, self._made) < len(chosen):
                return render_calls([ToolCall(c["name"], dict(c["arguments"])) for c in chosen])
        return task.answer

    # -- helpers -----------------------------------------------------------------------------
    def _run(self, call: ToolCall, position: int) -> CallResult:
        if position >= MAX_CALLS_PER_TURN:
            result = CallResult(call.name, None, f"not run: at most {MAX_CALLS_PER_TURN} calls per reply", "too_many")
        else:
            result = run_call(call.name, call.arguments, self._offered)
        if result.error is None:  # the arguments passed the schema check, so defaults can be filled
            self._made.append((call.name, check_arguments(TOOL_BY_NAME[call.name].parameters, call.arguments)))
        else:
            self._failed.append((call.name, result.error))
        return result

    def _final(self, task: Task, text: str | None) -> Reply:
        writing = tuple(sorted(name for name in self._offered if TOOL_BY_NAME[name].writes))
        trace = CallTrace(
            made=tuple(self._made), malformed=self._malformed, failed=tuple(self._failed), writing=writing
        )
        grade = call_grader(grade_tool_http, text, task.metadata, trace, self.grader_config)
        misses = trace.replay_misses
        drop = None
        if misses:
            drop = Drop("replay_miss", "step", f"{len(misses)} tool request(s) had no recorded response")
        return Reply(grade=grade, done=True, drop=drop)
