"""``MultiTurnToolsEnv``: BFCL's multi-turn episodes against its stateful tool classes.

Protocol (also told to the agent in the system message):

- The system message lists the functions (OpenAI JSON format; also ``env.tools``), then
  the first user request follows.
- A reply that calls functions (Hermes ``<tool_call>{...}</tool_call>`` blocks, BFCL's
  python call syntax, or a structured ``{"content", "tool_calls"}`` action) has every
  call run in order, never truncated; the results come back in one user message of
  ``<tool_response>`` blocks, one per call in the same order. A call that cannot be read
  or fails gets an error result.
- A reply without any call ends the user turn: the turn is graded (``info["turn_grade"]``)
  and the next request is shown; at a miss_func turn, BFCL's "I have updated some more
  functions" message brings the held-out functions, whose schemas it shows. After the
  last turn the episode ends with the final grade.
- A turn has at most ``max_steps_per_turn`` replies (BFCL's limit is 20); the reply that
  uses up the budget ends the turn, which then fails (``turn_limit``). A reply over
  ``frostgym.tools.calls.MAX_CALL_TEXT`` characters is not read: it ends the turn, which
  fails (``too_long``). A reply with more than ``MAX_CALLS_PER_REPLY`` calls runs none.

Since BFCL scores an entry all or nothing, by default the episode ends at the first
failed turn (``stop_on_failure``): the rest could not change the score.
"""

from __future__ import annotations

import json
from typing import Any

from frostgym.core.env import Reply
from frostgym.core.errors import GraderError
from frostgym.core.grade import Grade, call_grader
from frostgym.core.messages import Message, message
from frostgym.core.splits import Split
from frostgym.core.tasks import Task
from frostgym.envs.levels import level_config
from frostgym.envs.tools.base import ToolCallingEnv
from frostgym.envs.tools.tasks import BFCLMultiTurnSource, bfcl_multi_turn_source
from frostgym.graders.tool_state import TurnEvidence, TurnVerdict, check_turn, grade_episode, grade_turn
from frostgym.tools.bfcl_multi_turn import (
    ADDED_FUNCTIONS_PROMPT,
    CATEGORIES,
    CLASSES,
    STATELESS_CLASSES,
    CallOutcome,
    MultiTurnEntry,
    ToolWorld,
    entry_for,
    gold_trace,
    load_entries,
    tools_for,
)
from frostgym.tools.calls import MAX_CALLS_PER_REPLY as MAX_CALLS_PER_REPLY  # re-exported
from frostgym.tools.calls import ParsedReply, as_json_data, parse_reply, render_calls
from frostgym.tools.responses import ToolResponse, result_content, tool_responses

SYSTEM_PROMPT = """You are an assistant that carries out the user's requests by calling functions.

To call functions, reply with one or more blocks like
<tool_call>{{"name": "function_name", "arguments": {{"argument": "value"}}}}</tool_call>
(python call syntax also works: [function_name(argument="value"), other_function()]).
All calls in one reply run in order, and you see each result in the next message.
A request may need several replies with calls. When the request is done, or cannot be done
with these functions or the information you have, reply without any function call: that
ends your turn, and the user may then ask something else. You have at most {steps} replies
per request.

Functions (OpenAI JSON format):
{tools}"""
CLOSE_TURN = "Done."
DECLINE_TURN = (
    "I cannot complete this request with the functions and information I have. Please provide what is missing."
)
# More calls than MAX_CALLS_PER_REPLY (the parser's bound, 64, imported above) in one reply
# are refused as a whole; BFCL's longest gold turn has 34.
MAX_SHOWN_RESULT_CHARS = 8_000
DEFAULT_STEPS_PER_TURN = 20


def _max_user_turns() -> int:
    return max(len(e.turns) for c in CATEGORIES for e in load_entries(c))


class MultiTurnToolsEnv(ToolCallingEnv):
    """A BFCL multi-turn entry per episode, run on BFCL's tool classes (protocol above).

    Arguments:
        split: only ``test`` has tasks (all 800 entries, ``bfcl_mt/<category>/test/<n>``);
            another split makes ``reset`` raise.
        categories: a non-empty subset of ``CATEGORIES`` (``ValueError`` otherwise):
            ``reset`` draws only from those, while a ``task_id`` may name any entry.
        level: this id has no levels (its categories are perturbations of the same
            conversations, not a ladder); anything but None is a ``ValueError``.
        max_steps_per_turn: replies per user turn, in [2, 100] (``ValueError`` otherwise).
        max_turns: replies per episode; by default never binding before the per-turn limit.
        stop_on_failure: end the episode at the first failed turn (BFCL scores all or nothing).
        render_mode: None or ``"ansi"``.

    Constructing it needs the pinned ``bfcl-eval``.

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
        categories: tuple[str, ...] | list[str] | str = CATEGORIES,
        max_steps_per_turn: int = DEFAULT_STEPS_PER_TURN,
        max_turns: int | None = None,
        stop_on_failure: bool = True,
        render_mode: str | None = None,
    ) -> None:
        level_config(BFCLMultiTurnSource, level)  # none: raises for any level
        if not 2 <= max_steps_per_turn <= 100:
            raise ValueError(f"max_steps_per_turn must be in [2, 100], got {max_steps_per_turn}")
        chosen = (categories,) if isinstance(categories, str) else tuple(categories)
        if not chosen or not set(chosen) <= set(CATEGORIES):
            raise ValueError(f"categories must be a non-empty subset of {CATEGORIES}, got {categories!r}")
        source = bfcl_multi_turn_source(tuple(c for c in CATEGORIES if c in chosen))
        if max_turns is None:
            max_turns = _max_user_turns() * max_steps_per_turn  # never binds before the per-turn caps
        super().__init__(source, split=split, max_turns=max_turns, render_mode=render_mode)
        self.max_steps_per_turn = max_steps_per_turn
        self.stop_on_failure = stop_on_failure
        self.tools: list[dict[str, Any]] = []
        self._entry: MultiTurnEntry | None = None
        self._world: ToolWorld | None = None
        self._user_turn = 0
        self._steps_in_turn = 0
        self._turn_calls = 0
        self._turn_malformed = 0
        self._malformed = 0
        self._results: list[str] = []
        self._verdicts: list[TurnVerdict] = []

    # -- the evaluation contract -------------------------------------------------------------
    def contract_limits(self) -> dict[str, Any]:
        return {"max_steps_per_turn": self.max_steps_per_turn}

    def tool_access(self) -> dict[str, Any]:
        """By BFCL class, each offering its methods as tools: the stateless ones
        (``STATELESS_CLASSES``: MathAPI) read, every other class holds the state its calls
        change and the grade compares (files, messages, bookings, orders, the vehicle)."""
        return {
            "read_only": sorted(STATELESS_CLASSES),
            "writing": sorted(set(CLASSES) - STATELESS_CLASSES),
        }

    # -- episode start ------------------------------------------------------------------
    def first_messages(self, task: Task) -> list[Message]:
        entry = entry_for(task)
        self._entry = entry
        self._world = ToolWorld(entry)
        self._user_turn = self._steps_in_turn = self._turn_calls = self._turn_malformed = self._malformed = 0
        self._results = []
        self._verdicts = []
        offered = entry.offered(0)
        self.tools = tools_for(offered)
        system = SYSTEM_PROMPT.format(steps=self.max_steps_per_turn, tools=json.dumps(self.tools, indent=1))
        return [message("system", system), message("user", self._turn_text(0))]

    def _turn_text(self, turn: int) -> str:
        entry = self._current_entry()
        added = entry.missed_functions.get(turn)
        if added:
            schemas = json.dumps(tools_for(list(added)), indent=1)
            return f"{ADDED_FUNCTIONS_PROMPT}\n\nNew functions (OpenAI JSON format):\n{schemas}"
        return "\n\n".join(content for _, content in entry.turns[turn]) or ADDED_FUNCTIONS_PROMPT

    # -- actions ------------------------------------------------------------------------
    def respond(self, task: Task, text: str, turn: int, last_turn: bool) -> Reply:
        parsed = parse_reply(text)
        self._steps_in_turn += 1
        if parsed.too_long:  # not read: the turn fails unread, and no call counts as made
            self._turn_malformed += 1
            self._malformed += 1
            return self._close_turn(hit_limit=False, last_turn=last_turn, too_long=True)
        if parsed.attempted == 0:
            return self._close_turn(hit_limit=False, last_turn=last_turn)
        outcomes, problems = self._run(parsed)
        calls = tuple({"name": o.name, "arguments": as_json_data(o.arguments)} for o in outcomes)
        results = tuple({"name": o.name, "content": o.shown(MAX_SHOWN_RESULT_CHARS), "ok": o.ok} for o in outcomes)
        if self._steps_in_turn >= self.max_steps_per_turn or last_turn:
            closed = self._close_turn(hit_limit=True, last_turn=last_turn)
            return Reply(closed.grade, closed.done, closed.feedback, calls, results)
        left = self.max_steps_per_turn - self._steps_in_turn
        feedback = message("user", _responses(outcomes, problems, left))
        return Reply(grade=None, done=False, feedback=feedback, tool_calls=calls, tool_results=results)

    def _run(self, parsed: ParsedReply) -> tuple[list[CallOutcome], list[str]]:
        world = self._current_world()
        problems = [f"call {p.position + 1}: {p.message}" for p in parsed.problems]
        self._turn_malformed += len(parsed.problems)
        self._malformed += len(parsed.problems)
        if parsed.attempted > MAX_CALLS_PER_REPLY:
            self._turn_malformed += 1
            self._malformed += 1
            problems.append(f"{parsed.written} calls in one reply; at most {MAX_CALLS_PER_REPLY} are run, so none ran")
            return [], problems
        # Every method of the involved classes runs, offered yet or not, as in BFCL (see
        # frostgym.tools.bfcl_multi_turn: one gold answer calls a held-out function).
        outcomes = [world.execute(call) for call in parsed.calls]
        self._turn_calls += len(outcomes)
        self._results.extend(o.text for o in outcomes)
        return outcomes, problems

    # -- turns --------------------------------------------------------------------------
    def _close_turn(self, *, hit_limit: bool, last_turn: bool, too_long: bool = False) -> Reply:
        entry = self._current_entry()
        gold = gold_trace(entry.bfcl_id)[self._user_turn]
        evidence = TurnEvidence(
            turn=self._user_turn,
            gold_calls=len(gold.calls),
            gold_results=gold.results,
            gold_state=gold.state,
            agent_state=self._current_world().snapshot(),
            agent_results_so_far=tuple(self._results),
            agent_calls=self._turn_calls,
            malformed=self._turn_malformed,
            hit_step_limit=hit_limit,
            too_long=too_long,
        )
        verdict = _checked(evidence)
        self._verdicts.append(verdict)
        total = len(entry.turns)
        finished = self._user_turn + 1 >= total
        if finished or last_turn or (self.stop_on_failure and not verdict.passed):
            return Reply(grade=self._final_grade(), done=True)
        self._user_turn += 1
        self._steps_in_turn = self._turn_calls = self._turn_malformed = 0
        self.tools = tools_for(entry.offered(self._user_turn))
        turn_grade = call_grader(grade_turn, verdict, total)
        return Reply(grade=turn_grade, done=False, feedback=message("user", self._turn_text(self._user_turn)))

    def _final_grade(self) -> Grade:
        entry_turns = len(self._current_entry().turns)
        return call_grader(grade_episode, self._verdicts, entry_turns, self._malformed, self.world.snapshot())

    def oracle_action(self) -> str:
        """The turn's gold calls in one reply (while the turn has run no call), then a
        reply without calls to close it (declining, at a turn whose gold is empty)."""
        entry = self._current_entry()
        calls = gold_trace(entry.bfcl_id)[self._user_turn].calls
        if self._turn_calls == 0 and calls:
            return render_calls(calls)
        return CLOSE_TURN if calls else DECLINE_TURN

    # -- helpers ------------------------------------------------------------------------
    def _current_entry(self) -> MultiTurnEntry:
        if self._entry is None:
            raise RuntimeError("no episode: call reset() first")
        return self._entry

    def _current_world(self) -> ToolWorld:
        if self._world is None:
            raise RuntimeError("no episode: call reset() first")
        return self._world

    @property
    def world(self) -> ToolWorld:
        """The current episode's tool instances (for inspection; stepping changes them)."""
        return self._current_world()

    def _info(self) -> dict[str, Any]:
        info = super()._info()
        info["user_turn"] = self._user_turn
        info["user_turns"] = len(self._entry.turns) if self._entry is not None else 0
        return info


def _checked(evidence: TurnEvidence) -> TurnVerdict:
    """``check_turn``, with its failures filed as the grader's (``GraderError``), never the agent's."""
    try:
        return check_turn(evidence)
    except Exception as error:
        raise GraderError(f"check_turn raised {type(error).__name__}: {error}") from error


def _responses(outcomes: list[CallOutcome], problems: list[str], left: int) -> str:
    """One ``<tool_response>`` block per call, in call order, then unreadable calls."""
    contents: list[ToolResponse] = []
    for outcome in outcomes:
        contents.append({"name": outcome.name, "content": result_content(outcome.shown(MAX_SHOWN_RESULT_CHARS))})
    contents.extend(f"Error: {problem}" for problem in problems)
    return tool_responses(contents, f"{left} repl{'y' if left == 1 else 'ies'} left for this request")
