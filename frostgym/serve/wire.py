"""The wire format: OpenEnv's request and response shapes, and how a frostgym episode travels in
them without losing a byte.

Why its own module: the server (``frostgym.serve.app``) writes these shapes and the client
(``frostgym.serve.remote``) reads them; one module keeps both sides, the JSON rules and the
mapping of errors to status codes in step. It imports no web framework.

- **Shapes** are OpenEnv's (``openenv-core`` 0.3.0): a reset or step answers
  ``{"observation": {...}, "reward": float | null, "done": bool}``. OpenEnv's clients keep only
  those three keys, so everything frostgym returns rides inside ``observation``: the chat
  ``messages``, the ``info`` dict, ``terminated`` and ``truncated`` (``done`` is either), and the
  episode's ``tools`` (a tool env's OpenAI schemas, null for the others), sent with every answer
  because an episode's tools can change from turn to turn (BFCL multi-turn).
- **JSON** is the standard library's: integers of any size stay integers, floats are written as
  their shortest repr (read back bit for bit), non-finite floats as ``NaN``/``Infinity`` (what
  Python's and OpenEnv's readers accept), text as UTF-8 (no ``\\u`` escapes). orjson is not used
  here: it writes NaN as null and refuses integers past 64 bits.
- **Gold.** A grade's ``details`` explain the grade against the gold (math writes ``gold``, the
  HTTP-tools grader quotes the expected number), so a server that does not trust its clients
  with gold (no ``--allow-oracle``) withholds ``details`` from ``grade`` and ``turn_grade``;
  scores, components, labels and grader versions are always sent.
- **Errors** are one dict, ``{"status", "code", "message"}`` plus, for an exception the env
  raised, its class name, drop class and stage, so a client raises the same class with the
  same message and a runner files the same drop as in process. ``code`` is OpenEnv's
  ``WSErrorCode`` where one fits. Bad input is always a 4xx.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Literal

import gymnasium

from frostgym.core.errors import (
    EpisodeNotActiveError,
    FrostgymError,
    InvalidActionError,
    NonFiniteNumberError,
    ServedEnvError,
    UnknownTaskError,
    WireError,
)
from frostgym.core.finite_json import loads_finite
from frostgym.core.messages import Observation

Phase = Literal["make", "reset", "step"]

#: Fields a reset may carry. ``episode_id`` is OpenEnv's and is accepted but not used: frostgym
#: derives an episode's id from its seed (``info["episode_id"]``). ``session_id`` is HTTP only.
RESET_FIELDS = frozenset({"seed", "episode_id", "env_id", "env_kwargs", "options", "task_id", "split", "session_id"})
#: Fields an HTTP step may carry (OpenEnv's ``timeout_s`` and ``request_id``, and ``session_id``).
STEP_FIELDS = frozenset({"action", "timeout_s", "request_id", "session_id"})
SESSION_ID_CHARS = 128

# OpenEnv's WSErrorCode values, and frostgym's where none fits.
INVALID_JSON = "INVALID_JSON"
UNKNOWN_TYPE = "UNKNOWN_TYPE"
VALIDATION_ERROR = "VALIDATION_ERROR"
EXECUTION_ERROR = "EXECUTION_ERROR"
CAPACITY_REACHED = "CAPACITY_REACHED"
SESSION_ERROR = "SESSION_ERROR"
UNAUTHORIZED = "UNAUTHORIZED"
FORBIDDEN = "FORBIDDEN"
NOT_FOUND = "NOT_FOUND"
EPISODE_NOT_ACTIVE = "EPISODE_NOT_ACTIVE"
STEP_TIMEOUT = "STEP_TIMEOUT"
TOO_LARGE = "TOO_LARGE"
CLIENT_GONE = "CLIENT_GONE"


# -- JSON ------------------------------------------------------------------------------------
def dumps(value: Any) -> str:
    """``value`` as compact JSON text (see the module docstring for the rules)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def loads(raw: bytes | str) -> Any:
    """The JSON value of ``raw``; ``WireError`` 400 for text that is not JSON, not UTF-8, nested
    past Python's recursion limit, or with an integer too long to read."""
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as error:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise WireError(400, INVALID_JSON, f"the body is not JSON: {_short(error)}") from None


def loads_request(raw: bytes | str) -> Any:
    """A request's JSON value, as ``loads`` reads it, but ``WireError`` 422 for a number that
    is not finite anywhere in it (``NaN``, ``Infinity``, ``1e999``): no number a client sends
    (a seed, a deadline, an env argument, an action's call arguments) may be one."""
    try:
        return loads_finite(raw)
    except NonFiniteNumberError as error:
        raise WireError(422, VALIDATION_ERROR, f"the body holds {error}: every number must be finite") from None
    except (ValueError, RecursionError) as error:
        raise WireError(400, INVALID_JSON, f"the body is not JSON: {_short(error)}") from None


def _short(error: BaseException, limit: int = 300) -> str:
    text = str(error)
    return text if len(text) <= limit else text[:limit] + "..."


# -- requests --------------------------------------------------------------------------------
@dataclass(frozen=True)
class ResetRequest:
    """A reset: the seed, the env to reset (None: the session's, or the server's only one) with
    the keyword arguments it is made with, the reset ``options`` (``task_id``, ``split``) and,
    over HTTP, the session."""

    seed: int | None = None
    env_id: str | None = None
    env_kwargs: dict[str, Any] | None = None
    options: dict[str, Any] | None = None
    session_id: str | None = None


@dataclass(frozen=True)
class StepRequest:
    """A step over HTTP: the action as sent (a ``{"content": ...}`` or ``{"tool_calls": ...}``
    dict, or a string), the client's own step deadline if any, and the session."""

    action: Any
    timeout_s: float | None = None
    session_id: str | None = None


def _object(data: Any, what: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise WireError(422, VALIDATION_ERROR, f"{what} must be a JSON object, got {_json_type(data)}")
    return data


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"


def _unknown(data: dict[str, Any], allowed: frozenset[str], what: str) -> None:
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise WireError(422, VALIDATION_ERROR, f"unknown {what} field(s) {unknown}; allowed: {sorted(allowed)}")


def _optional_str(data: dict[str, Any], key: str, limit: int = 1000) -> str | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value or len(value) > limit:
        raise WireError(422, VALIDATION_ERROR, f"{key} must be a non-empty string of at most {limit} characters")
    return value


def session_id_of(data: dict[str, Any]) -> str | None:
    """The ``session_id`` field of an HTTP request body (None: the default session)."""
    return _optional_str(data, "session_id", SESSION_ID_CHARS)


def parse_reset(data: Any) -> ResetRequest:
    """A reset request's fields (a missing body is ``{}``). ``WireError`` 422 for an unknown
    field or a wrong type: a seed that is not a non-negative integer, ``env_kwargs`` or
    ``options`` that are not objects, ``task_id``/``split`` given both at the top and in
    ``options``."""
    data = _object({} if data is None else data, "the reset body")
    _unknown(data, RESET_FIELDS, "reset")
    seed = data.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise WireError(422, VALIDATION_ERROR, f"seed must be a non-negative integer or null, got {seed!r:.100}")
    _optional_str(data, "episode_id", 255)
    kwargs = data.get("env_kwargs")
    if kwargs is not None:
        kwargs = dict(_object(kwargs, "env_kwargs"))
    options = data.get("options")
    options = {} if options is None else dict(_object(options, "options"))
    for key in ("task_id", "split"):
        if data.get(key) is not None:
            if key in options:
                raise WireError(422, VALIDATION_ERROR, f"{key} is given twice: at the top and in options")
            options[key] = data[key]
    return ResetRequest(
        seed=seed,
        env_id=_optional_str(data, "env_id"),
        env_kwargs=kwargs,
        options=options or None,
        session_id=session_id_of(data),
    )


def parse_step(data: Any) -> StepRequest:
    """An HTTP step request (``{"action": ..., "timeout_s": ..., "session_id": ...}``).
    ``WireError`` 422 for a missing action, an unknown field or a timeout that is not a
    positive number. The action itself is the env's to judge."""
    data = _object(data, "the step body")
    _unknown(data, STEP_FIELDS, "step")
    if "action" not in data:
        raise WireError(422, VALIDATION_ERROR, 'the step body needs an "action" (e.g. {"content": "..."})')
    timeout = data.get("timeout_s")
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, int | float) or not math.isfinite(timeout) or timeout <= 0
    ):
        raise WireError(
            422, VALIDATION_ERROR, f"timeout_s must be a finite positive number or null, got {timeout!r:.100}"
        )
    _optional_str(data, "request_id", 255)
    return StepRequest(data["action"], None if timeout is None else float(timeout), session_id_of(data))


def parse_make(data: Any) -> tuple[str | None, dict[str, Any] | None]:
    """A make request (``{"env_id": ..., "env_kwargs": {...}}``): make the session's env now,
    so a client learns at once that an id or an argument is refused."""
    data = _object({} if data is None else data, "the make body")
    _unknown(data, frozenset({"env_id", "env_kwargs", "session_id"}), "make")
    kwargs = data.get("env_kwargs")
    return _optional_str(data, "env_id"), None if kwargs is None else dict(_object(kwargs, "env_kwargs"))


# -- responses -------------------------------------------------------------------------------
def withhold_gold(info: dict[str, Any]) -> dict[str, Any]:
    """``info`` without the ``details`` of its ``grade`` and ``turn_grade`` (a copy; ``info``
    is not changed)."""
    out = dict(info)
    for key in ("grade", "turn_grade"):
        grade = out.get(key)
        if isinstance(grade, dict) and "details" in grade:
            out[key] = {k: v for k, v in grade.items() if k != "details"}
    return out


def result_payload(
    messages: Observation,
    info: dict[str, Any],
    *,
    reward: float | None,
    terminated: bool,
    truncated: bool,
    tools: list[dict[str, Any]] | None,
    reveal_gold: bool,
) -> dict[str, Any]:
    """A reset's (``reward`` None) or a step's answer in OpenEnv's shape."""
    return {
        "observation": {
            "messages": messages,
            "info": info if reveal_gold else withhold_gold(info),
            "terminated": terminated,
            "truncated": truncated,
            "tools": tools,
        },
        "reward": reward,
        "done": terminated or truncated,
    }


@dataclass(frozen=True)
class Result:
    """A reset's or step's answer as a client reads it."""

    messages: Observation
    info: dict[str, Any]
    reward: float
    terminated: bool
    truncated: bool
    tools: list[dict[str, Any]] | None


def read_result(payload: Any) -> Result:
    """The fields of a ``result_payload``; ``ValueError`` when ``payload`` is not one (a server
    that is not frostgym's)."""
    try:
        observation = payload["observation"]
        reward = payload["reward"]
        return Result(
            messages=observation["messages"],
            info=observation["info"],
            reward=0.0 if reward is None else float(reward),
            terminated=bool(observation["terminated"]),
            truncated=bool(observation["truncated"]),
            tools=observation["tools"],
        )
    except (KeyError, TypeError) as error:
        raise ValueError(f"not a frostgym env server's answer: {str(payload)[:200]}") from error


# -- errors ----------------------------------------------------------------------------------
def error_from(error: BaseException, phase: Phase) -> WireError:
    """The answer to ``error``, raised by an env while making it, resetting it or stepping it.
    What the caller sent wrong is a 4xx: an action of a type the env refuses (422), a step with
    no episode running (409), an unknown task id (404), and, while making or resetting, an
    argument or option the env refuses (422). Anything else is the env failing on a valid
    request: 500, with the exception's class, drop class and stage so a client can file it."""
    if isinstance(error, WireError):
        return error
    status, code = 500, EXECUTION_ERROR
    if isinstance(error, InvalidActionError):
        status, code = 422, VALIDATION_ERROR
    elif isinstance(error, EpisodeNotActiveError):
        status, code = 409, EPISODE_NOT_ACTIVE
    elif isinstance(error, UnknownTaskError):
        status, code = 404, NOT_FOUND
    elif phase != "step" and isinstance(error, ValueError | TypeError | gymnasium.error.Error):
        status, code = 422, VALIDATION_ERROR
    return WireError(
        status,
        code,
        str(error),
        exception=type(error).__name__,
        drop_class=getattr(error, "drop_class", None),
        stage=getattr(error, "stage", None),
    )


_BUILTIN = {cls.__name__: cls for cls in (ValueError, TypeError, RuntimeError)}
_NAMED: dict[str, type[ServedEnvError]] = {}


def _frostgym_errors() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    pending: list[type[BaseException]] = [FrostgymError]
    while pending:
        cls = pending.pop()
        found.setdefault(cls.__name__, cls)
        pending.extend(cls.__subclasses__())
    return found


def exception_from(body: Any) -> BaseException:
    """The exception a client raises for an error answer ``body`` (``WireError.to_json``)."""
    if not isinstance(body, dict):
        body = {"status": 0, "code": "", "message": str(body)[:500]}
    message = str(body.get("message", ""))
    name = body.get("exception")
    error: BaseException
    if not isinstance(name, str) or not name.isidentifier():
        error = ServedEnvError(f"env server answered {body.get('status')} {body.get('code')}: {message}")
    else:
        cls = _frostgym_errors().get(name) or _BUILTIN.get(name) or _named(name)
        error = cls.__new__(cls)
        Exception.__init__(error, message)
    declared_class, declared_stage = body.get("drop_class"), body.get("stage")
    if declared_class is not None and getattr(error, "drop_class", None) != declared_class:
        error.drop_class = declared_class  # type: ignore[attr-defined]
    if declared_stage is not None and getattr(error, "stage", None) != declared_stage:
        error.stage = declared_stage  # type: ignore[attr-defined]
    if isinstance(error, ServedEnvError):
        error.status = int(body.get("status") or 0)
        error.code = str(body.get("code", ""))
    return error


def _named(name: str) -> type[ServedEnvError]:
    """A ``ServedEnvError`` subclass called ``name``, made once per name: a runner then files
    the remote ``SomeError: text`` exactly as the local one."""
    named = _NAMED.get(name)
    if named is None:
        named = _NAMED[name] = type(name, (ServedEnvError,), {"__module__": __name__})
    return named


# -- schemas (GET /schema) ---------------------------------------------------------------------
_MESSAGE = {
    "type": "object",
    "properties": {"role": {"enum": ["system", "user", "assistant", "tool"]}, "content": {"type": "string"}},
    "required": ["role", "content"],
}
_TOOL_CALL = {
    "type": "object",
    "description": 'OpenAI style: {"type": "function", "function": {"name": ..., "arguments": "JSON text"}}, '
    'or {"name": ..., "arguments": {...}}',
}
#: OpenEnv's three schemas, then frostgym's reset fields.
SCHEMAS: dict[str, Any] = {
    "action": {
        "title": "Action",
        "description": "The assistant's reply: its text, or (tool envs) its tool calls. Any other JSON value is "
        "passed to the env, which answers 422 for a type it refuses.",
        "anyOf": [
            {"type": "string"},
            {
                "type": "object",
                "properties": {"content": {"type": "string"}, "tool_calls": {"type": "array", "items": _TOOL_CALL}},
            },
        ],
    },
    "observation": {
        "title": "Observation",
        "type": "object",
        "properties": {
            "messages": {"type": "array", "items": _MESSAGE, "description": "the conversation so far"},
            "info": {"type": "object", "description": "the env's info (frostgym.core.env.FrozenEnv), grade included"},
            "terminated": {"type": "boolean"},
            "truncated": {"type": "boolean"},
            "tools": {
                "anyOf": [{"type": "array", "items": {"type": "object"}}, {"type": "null"}],
                "description": "the episode's tools as OpenAI function schemas; null for an env without tools",
            },
        },
        "required": ["messages", "info", "terminated", "truncated", "tools"],
    },
    "state": {
        "title": "State",
        "type": "object",
        "properties": {
            "session_id": {"type": "string"},
            "episode_id": {"type": ["string", "null"]},
            "step_count": {"type": "integer"},
            "env_id": {"type": ["string", "null"]},
            "env_kwargs": {"type": "object"},
            "task_id": {"type": ["string", "null"]},
            "max_turns": {"type": ["integer", "null"]},
            "done": {"type": "boolean"},
        },
    },
    "reset": {
        "title": "Reset",
        "type": "object",
        "properties": {
            "seed": {"type": ["integer", "null"], "minimum": 0},
            "env_id": {"type": ["string", "null"], "description": "default: the session's env, or the only one served"},
            "env_kwargs": {
                "type": ["object", "null"],
                "description": "what the env is made with (split, level, max_turns, ...); null: the session's own",
            },
            "task_id": {"type": ["string", "null"]},
            "split": {"type": ["string", "null"], "description": "the split to draw from (a reset option)"},
            "options": {"type": ["object", "null"], "description": "gymnasium reset options: task_id, split"},
            "episode_id": {"type": ["string", "null"], "description": "accepted, not used: ids derive from the seed"},
            "session_id": {"type": ["string", "null"], "description": "HTTP only; default: the 'default' session"},
        },
        "additionalProperties": False,
    },
}
