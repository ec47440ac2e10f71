"""``ToolsEnv`` (``frostgym/Tools-v0``): BFCL's single-turn function calling.

Protocol (also told to the agent in the system message, with the tools as OpenAI
function schemas; the same schemas are on ``env.tools`` for chat templates that take them):
- The reply calls the functions the question needs, as ``<tool_call>{"name": …,
  "arguments": {…}}</tool_call>`` blocks or in BFCL's Python call syntax
  (``[f(a=1), g(b="x")]``); a structured ``{"content", "tool_calls"}`` action is turned
  into the equivalent tagged text. Reasoning in ``<think>`` is never read for calls.
- When no offered function fits (the irrelevance categories), the right reply calls nothing.
- One turn: the reply is graded at once by ``frostgym.graders.tool_ast`` (BFCL's AST rules);
  nothing is executed. A reply over ``frostgym.tools.calls.MAX_CALL_TEXT`` characters is
  graded ``too_long`` without being read.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from frostgym.core.env import Reply
from frostgym.core.grade import call_grader
from frostgym.core.messages import Message, message
from frostgym.core.splits import Split
from frostgym.core.tasks import Task
from frostgym.envs.levels import level_config
from frostgym.envs.tools.base import ToolCallingEnv
from frostgym.envs.tools.tasks import BFCLSource, bfcl_source
from frostgym.graders.tool_ast import DEFAULT_CONFIG, ToolGraderConfig, grade_tool_calls
from frostgym.tools.bfcl_data import CATEGORIES, check_categories
from frostgym.tools.calls import ToolCall, as_json_data, parse_reply, render_calls
from frostgym.tools.schemas import LANGUAGE_NAMES, bfcl_tool

SYSTEM_PROMPT = (
    "You are an expert in composing function calls. You are given a question and a set of functions. "
    "Based on the question, make the function call(s) that achieve its purpose. "
    "If none of the functions can be used, say so and call none. "
    'Call a function with a block <tool_call>{{"name": "function_name", "arguments": {{...}}}}</tool_call>; '
    "put one block per call, and as many calls in your reply as the question needs. "
    "Python call syntax, [function_name(arg=value), other_function(arg=value)], is accepted too. "
    "Your reply is graded at once: there is no second turn and no function result.\n\n"
    "The functions ({language} syntax):\n<tools>\n{tools}\n</tools>"
)
IRRELEVANT_REPLY = "None of the available functions fits this request, so I will not call any of them."


class ToolsEnv(ToolCallingEnv):
    """A BFCL single-turn entry per episode: one reply, graded on its calls (protocol above).

    Arguments:
        split: only ``test`` has tasks (BFCL's published set; ``bfcl/test/i`` is the i-th
            entry in ``CATEGORIES`` order); another split makes ``reset`` raise.
        categories: a category name or several (``frostgym.tools.bfcl_data.CATEGORIES``),
            or None for all: ``reset`` draws only from those, while a ``task_id`` may name
            any entry. ``UnknownTaskError`` for an unknown category.
        level: BFCL's category groups as levels, or None: 1 simple, 2 multiple, 3 parallel,
            4 parallel_multiple, each with its live twin (``BFCLSource.levels``). A level
            is a preset of ``categories`` (give one or the other, else ``ValueError``):
            ids keep BFCL's numbering and the lock stays the benchmark's.
            ``ValueError`` lists the levels for one that is not.
        grader_config: the AST grader's options (``frostgym.graders.tool_ast``).
        render_mode: None or ``"ansi"``.

    Constructing it needs the pinned ``bfcl-eval`` (``BFCLNotInstalledError`` without it).

    ``reset`` and ``step`` raise what every ``FrozenEnv`` does (see its docstring); a
    structured tool call that is not JSON data is an ``InvalidActionError`` too. Wrong or
    unreadable replies are graded failures, never exceptions.
    """

    family = "tools"
    env_version = "1.1.0"  # what each version changed: CHANGELOG.md

    def __init__(
        self,
        *,
        split: Split = "test",
        level: int | None = None,
        categories: str | Sequence[str] | None = None,
        render_mode: str | None = None,
        grader_config: ToolGraderConfig = DEFAULT_CONFIG,
    ) -> None:
        if level is not None:
            if categories is not None:
                raise ValueError("ToolsEnv takes a level or categories, not both")
            categories = level_config(BFCLSource, level)
        chosen = check_categories(categories)
        source = bfcl_source(None if chosen == CATEGORIES else chosen)
        super().__init__(source, split=split, max_turns=1, render_mode=render_mode)
        self.categories = chosen
        self.grader_config = grader_config
        #: The current episode's functions as OpenAI tools (empty before the first reset).
        self.tools: list[dict[str, Any]] = []

    def tool_access(self) -> dict[str, Any]:
        """Each task's own BFCL functions, shown and graded on the calls written, never run."""
        return {"read_only": [], "writing": [], "described_only": True}

    def first_messages(self, task: Task) -> list[Message]:
        meta = task.metadata
        self.tools = [bfcl_tool(function, meta["language"]) for function in meta["functions"]]
        listing = "\n".join(json.dumps(tool, ensure_ascii=False) for tool in self.tools)
        system = SYSTEM_PROMPT.format(language=LANGUAGE_NAMES[meta["language"]], tools=listing)
        # A BFCL system message joins ours: chat templates want one system message, first.
        extra = [str(m["content"]) for m in meta["messages"] if m["role"] == "system"]
        messages = [message("system", "\n\n".join([system, *extra]))]
        messages += [message(m["role"], str(m["content"])) for m in meta["messages"] if m["role"] != "system"]
        return messages

    def respond(self, task: Task, text: str, turn: int, last_turn: bool) -> Reply:
        meta = task.metadata
        parsed = parse_reply(text)
        grade = call_grader(
            grade_tool_calls,
            parsed,
            meta["functions"],
            meta["possible_answer"],
            meta["category"],
            meta["language"],
            self.grader_config,
        )
        calls = tuple(as_json_data(call.to_dict()) for call in parsed.calls)
        return Reply(grade=grade, done=True, tool_calls=calls)

    def oracle_action(self) -> str:
        """The gold calls (first allowed value of every argument that may not be omitted)
        in Hermes tags; for an irrelevance task, a reply that calls nothing."""
        gold = json.loads(self.task.answer)
        if not gold:
            return IRRELEVANT_REPLY
        return render_calls([ToolCall(call["name"], call["arguments"]) for call in gold])
