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

import copy
import json
from collections.abc import Mapping, Sequence
from typing import Any

from frostgym.core.env import Reply
from frostgym.core.grade import call_grader
from frostgym.core.messages import Message, message
from frostgym.core.splits import Split
from frostgym.core.tasks import Task
from frostgym.envs.tools.base import ToolCallingEnv
from frostgym.graders.tool_ast import DEFAULT_CONFIG, ToolGraderConfig, grade_tool_calls, plain
from frostgym.tools.bfcl_data import CATEGORIES, bfcl_source, check_categories
from frostgym.tools.calls import ToolCall, parse_reply, render_calls

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
_LANGUAGE_NAME = {"python": "Python 3", "java": "Java 8 SDK", "javascript": "JavaScript"}
#: BFCL's type names as JSON Schema types (after bfcl_eval's GORILLA_TO_OPENAPI table).
_OPENAI_TYPES = {
    "dict": "object",
    "object": "object",
    "HashMap": "object",
    "Hashtable": "object",
    "float": "number",
    "double": "number",
    "number": "number",
    "integer": "integer",
    "byte": "integer",
    "short": "integer",
    "long": "integer",
    "Bigint": "integer",
    "string": "string",
    "String": "string",
    "char": "string",
    "any": "string",
    "Any": "string",
    "boolean": "boolean",
    "Boolean": "boolean",
    "bool": "boolean",
    "array": "array",
    "Array": "array",
    "ArrayList": "array",
    "tuple": "array",
    "list": "array",
    "Queue": "array",
    "Stack": "array",
}


def _schema(node: Any) -> Any:
    """A BFCL parameter schema as JSON Schema: types renamed, nested schemas too."""
    if isinstance(node, list):
        return [_schema(item) for item in node]
    if not isinstance(node, Mapping):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "type" and isinstance(value, str):
            out[key] = _OPENAI_TYPES.get(value, "string")
        elif key == "properties" and isinstance(value, Mapping):
            out[key] = {name: _schema(prop) for name, prop in value.items()}
        elif key in ("items", "additionalProperties"):
            out[key] = _schema(value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def openai_tools(functions: Sequence[Mapping[str, Any]], language: str = "python") -> list[dict[str, Any]]:
    """OpenAI ``{"type": "function", "function": {...}}`` tools for BFCL function docs.
    Names keep their dots (the grader also takes dots written as underscores); Java and
    JavaScript docs say their declared type in each description, as BFCL's prompts do."""
    tools = []
    for function in functions:
        parameters = _schema(function.get("parameters", {}))
        parameters["type"] = "object"
        if language != "python":
            for name, prop in parameters.get("properties", {}).items():
                declared = function["parameters"]["properties"][name].get("type", "any")
                prop["description"] = (
                    f"{prop.get('description', '')} ({_LANGUAGE_NAME[language]} type {declared})".strip()
                )
        tools.append(
            {
                "type": "function",
                "function": {
                    "name": function["name"],
                    "description": function.get("description", ""),
                    "parameters": parameters,
                },
            }
        )
    return tools


class ToolsEnv(ToolCallingEnv):
    family = "tools"
    env_version = "1.1.0"  # 1.1: replies and call arguments bounded (frostgym.tools.calls), too_long

    def __init__(
        self,
        *,
        split: Split = "test",
        categories: str | Sequence[str] | None = None,
        render_mode: str | None = None,
        grader_config: ToolGraderConfig = DEFAULT_CONFIG,
    ) -> None:
        chosen = check_categories(categories)
        source = bfcl_source(None if chosen == CATEGORIES else chosen)
        super().__init__(source, split=split, max_turns=1, render_mode=render_mode)
        self.categories = chosen
        self.grader_config = grader_config
        #: The current episode's functions as OpenAI tools (empty before the first reset).
        self.tools: list[dict[str, Any]] = []

    def first_messages(self, task: Task) -> list[Message]:
        meta = task.metadata
        self.tools = openai_tools(meta["functions"], meta["language"])
        listing = "\n".join(json.dumps(tool, ensure_ascii=False) for tool in self.tools)
        system = SYSTEM_PROMPT.format(language=_LANGUAGE_NAME[meta["language"]], tools=listing)
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
        calls = tuple(plain(call.to_dict()) for call in parsed.calls)
        return Reply(grade=grade, done=True, tool_calls=calls)

    def oracle_action(self) -> str:
        """The gold calls (first allowed value of every argument that may not be omitted)
        in Hermes tags; for an irrelevance task, a reply that calls nothing."""
        gold = json.loads(self.task.answer)
        if not gold:
            return IRRELEVANT_REPLY
        return render_calls([ToolCall(call["name"], call["arguments"]) for call in gold])
