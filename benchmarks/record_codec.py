"""Which record library for the card's hot path: msgspec ``Struct`` or pydantic ``BaseModel``.

The card's hot path is per record: the runner encodes each episode record to its JSON line
(on the run's thread), and every reader (replay, regrade, compare, report, export) decodes
and validates each line back. This declares the episode record once in each library, the
same fields and rules (closed objects, ``sample >= 0``, a grade's shape), and times both
directions per record on the lines of a real card (by default a 10,000-episode oracle card of
``frostgym/Math-v0``, made first when ``--card`` is not given), beside frostgym's own path,
which is msgspec with the card's full declaration (``EpisodeRecord.encode`` with
``dumps_line``, and ``decode_line``). The codec it replaced (orjson and hand checks) is timed
by running this script at an earlier commit in a ``git worktree`` on the same card.

Run from the repository root: ``python benchmarks/record_codec.py [--card DIR] [--repeats 5]``
"""

from __future__ import annotations

import argparse
import gc
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Annotated, Any, Literal

import bench_common  # noqa: F401  (puts this checkout first on sys.path)
import msgspec
import orjson
import pydantic


# -- msgspec --------------------------------------------------------------------------------
class MsGrade(msgspec.Struct, forbid_unknown_fields=True):
    score: Annotated[float, msgspec.Meta(ge=0, le=1)]
    components: dict[str, Annotated[float, msgspec.Meta(ge=0, le=1)]]
    weights: dict[str, Annotated[float, msgspec.Meta(ge=0)]]
    required: list[str]
    grader: Annotated[str, msgspec.Meta(min_length=1)]
    grader_version: Annotated[str, msgspec.Meta(min_length=1)]
    label: str | None
    details: dict[str, Any] = {}


class MsMessage(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    role: Literal["system", "user", "assistant", "tool"]
    content: str
    name: str | msgspec.UnsetType = msgspec.UNSET
    tool_calls: list[dict[str, Any]] | msgspec.UnsetType = msgspec.UNSET
    tool_call_id: str | msgspec.UnsetType = msgspec.UNSET


class MsDelta(msgspec.Struct, forbid_unknown_fields=True):
    keep: Annotated[int, msgspec.Meta(ge=0)]
    new: list[MsMessage]


class MsStep(msgspec.Struct, forbid_unknown_fields=True):
    turn: Annotated[int, msgspec.Meta(ge=0)]
    agent_seed: Annotated[int, msgspec.Meta(ge=0)]
    action: str | dict[str, Any]
    agent: dict[str, Any]
    tool_calls: list[dict[str, Any]]
    tool_results: list[dict[str, Any]]
    grade: MsGrade | None
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any]
    observation: MsDelta
    agent_seconds: float
    env_seconds: float
    action_stored: dict[str, Any] | None = None


class MsEpisode(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    plan_id: str
    env_id: str
    task_id: str
    sample: Annotated[int, msgspec.Meta(ge=0)]
    difficulty: str | None
    tags: list[str]
    reward: float = 0.0
    grade: MsGrade | None = None
    episode_id: str
    split: str
    seed: Annotated[int, msgspec.Meta(ge=0)]
    seed_derivation: list[str | int]
    env_version: str
    fixture_sha256: str
    task_sha256: str
    attempts: int = 1
    started_at: float = 0.0
    wall_seconds: float = 0.0
    observation: list[MsMessage]
    steps: list[MsStep] = []


# -- pydantic --------------------------------------------------------------------------------
_closed = pydantic.ConfigDict(extra="forbid", strict=False)
Unit = Annotated[float, pydantic.Field(ge=0, le=1)]


class PyGrade(pydantic.BaseModel):
    model_config = _closed
    score: Unit
    components: dict[str, Unit]
    weights: dict[str, Annotated[float, pydantic.Field(ge=0)]]
    required: list[str]
    grader: Annotated[str, pydantic.Field(min_length=1)]
    grader_version: Annotated[str, pydantic.Field(min_length=1)]
    label: str | None
    details: dict[str, Any] = {}


class PyMessage(pydantic.BaseModel):
    model_config = _closed
    role: Literal["system", "user", "assistant", "tool"]
    content: str
    name: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None


class PyDelta(pydantic.BaseModel):
    model_config = _closed
    keep: Annotated[int, pydantic.Field(ge=0)]
    new: list[PyMessage]


class PyStep(pydantic.BaseModel):
    model_config = _closed
    turn: Annotated[int, pydantic.Field(ge=0)]
    agent_seed: Annotated[int, pydantic.Field(ge=0)]
    action: str | dict[str, Any]
    agent: dict[str, Any]
    tool_calls: list[dict[str, Any]]
    tool_results: list[dict[str, Any]]
    grade: PyGrade | None
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any]
    observation: PyDelta
    agent_seconds: float
    env_seconds: float
    action_stored: dict[str, Any] | None = None


class PyEpisode(pydantic.BaseModel):
    model_config = _closed
    plan_id: str
    env_id: str
    task_id: str
    sample: Annotated[int, pydantic.Field(ge=0)]
    difficulty: str | None
    tags: list[str]
    reward: float = 0.0
    grade: PyGrade | None = None
    episode_id: str
    split: str
    seed: Annotated[int, pydantic.Field(ge=0)]
    seed_derivation: list[str | int]
    env_version: str
    fixture_sha256: str
    task_sha256: str
    attempts: int = 1
    started_at: float = 0.0
    wall_seconds: float = 0.0
    observation: list[PyMessage]
    steps: list[PyStep] = []


def _per_record(run: Any, items: list[Any], repeats: int) -> float:
    """Median over ``repeats`` passes of the time per item, in microseconds."""
    times = []
    for _ in range(repeats):
        gc.collect()
        gc.disable()  # as the card's readers and writer run: no cyclic collection mid-card
        start = time.perf_counter()
        run(items)
        times.append((time.perf_counter() - start) / len(items) * 1e6)
        gc.enable()
    return statistics.median(times)


def _card(path: Path | None) -> Path:
    if path is not None:
        return path
    out = Path(tempfile.mkdtemp()) / "card"
    command = [sys.executable, "-m", "frostgym.cli", "eval", "--env", "frostgym/Math-v0", "--agent", "oracle"]
    command += ["--split", "test", "--episodes", "500", "--samples", "20", "--out", str(out)]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--card", type=Path, help="A card directory (default: make a 10,000-episode oracle card).")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    from frostgym.cards.store import dumps_line
    from frostgym.core.episode import decode_line

    lines = (_card(args.card) / "episodes.jsonl").read_bytes().splitlines()
    frost = [decode_line(line, "episode") for line in lines]
    ms_decoder = msgspec.json.Decoder(MsEpisode)
    ms_encoder = msgspec.json.Encoder()
    ms = [ms_decoder.decode(line) for line in lines]
    py = [PyEpisode.model_validate_json(line) for line in lines]
    assert orjson.loads(ms_encoder.encode(ms[0])) == orjson.loads(lines[0])
    assert orjson.loads(py[0].model_dump_json(exclude_unset=True)) == orjson.loads(lines[0])
    rows: dict[str, tuple[Any, Any, list[Any]]] = {
        "frostgym (msgspec records, full rules)": (
            lambda items: [r.encode(dumps_line) for r in items],
            lambda items: [decode_line(line, "episode") for line in items],
            frost,
        ),
        f"msgspec {msgspec.__version__} Struct": (
            lambda items: [ms_encoder.encode(r) for r in items],
            lambda items: [ms_decoder.decode(line) for line in items],
            ms,
        ),
        f"pydantic {pydantic.VERSION} BaseModel": (
            lambda items: [r.model_dump_json(exclude_unset=True) for r in items],
            lambda items: [PyEpisode.model_validate_json(line) for line in items],
            py,
        ),
    }
    print(f"{len(lines)} episode records, {sum(map(len, lines)) / len(lines):.0f} bytes a line; us per record")
    print(f"{'codec':42} {'encode':>8} {'decode+validate':>16}")
    for name, (encode, decode, records) in rows.items():
        enc = _per_record(encode, records, args.repeats)
        dec = _per_record(decode, lines, args.repeats)
        print(f"{name:42} {enc:8.2f} {dec:16.2f}")


if __name__ == "__main__":
    main()
