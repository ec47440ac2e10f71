"""How a step's token ids are stored on the card: plain JSON lists of ints, or base64 of
little-endian int32.

A trainer reads each turn's prompt ids, completion ids and the completion's logprobs from the
card (``frostgym.core.episode.TokenTrace``). This measures both forms on one turn of a
realistic size (a 200-token prompt, a 64-token completion), for two vocabularies:

- ``smollm2``: real ids, from SmolLM2's tokenizer (vocab 49,152) on frostgym prompts (each
  id family's reset observation run through the chat template) and on what an oracle replies:
  the distribution a card really holds;
- ``vocab-151936``: ids drawn by a Zipf law over the id (s = 1.1; BPE vocabularies put
  the frequent merges first, so small ids are the common ones), Qwen2's vocabulary size, and
  ``uniform-151936``, every id equally likely: the worst case for decimal digits.

Per form: bytes per token on disk (the JSON value as the card's encoder writes it, commas and
quotes included), and the microseconds to encode one turn's ids and decode them back to a
Python ``list[int]`` with msgspec (what the card's writer and reader run; the compact form's
base64 and int32 packing on top). The logprobs of the 64 completion tokens are measured the
same way (JSON floats as the card writes them, against base64 of float32), since they sit
beside the ids. Best of ``--repeats`` passes of ``--turns`` turns each.

Run from the repository root: ``python benchmarks/token_storage.py [--json PATH]``
"""

from __future__ import annotations

import argparse
import array
import base64
import random
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import bench_common
import msgspec

PROMPT, COMPLETION = 200, 64
_ENCODER = msgspec.json.Encoder()


class AsLists(msgspec.Struct):
    prompt_ids: list[int]
    completion_ids: list[int]


class AsBase64(msgspec.Struct):
    prompt_ids: str
    completion_ids: str


_LISTS = msgspec.json.Decoder(AsLists)
_BASE64 = msgspec.json.Decoder(AsBase64)
_FLOATS = msgspec.json.Decoder(list[float])
_TEXT = msgspec.json.Decoder(str)
Turn = tuple[list[int], list[int]]


def _pack(values: list[Any], code: str) -> str:
    packed = array.array(code, values)
    if sys.byteorder != "little":
        packed.byteswap()
    return base64.b64encode(packed.tobytes()).decode("ascii")


def _unpack(text: str, code: str) -> list[Any]:
    packed = array.array(code)
    packed.frombytes(base64.b64decode(text))
    if sys.byteorder != "little":
        packed.byteswap()
    return packed.tolist()


def lists_encode(turn: Turn) -> bytes:
    return _ENCODER.encode(AsLists(turn[0], turn[1]))


def lists_decode(data: bytes) -> Turn:
    turn = _LISTS.decode(data)
    return turn.prompt_ids, turn.completion_ids


def base64_encode(turn: Turn) -> bytes:
    return _ENCODER.encode(AsBase64(_pack(turn[0], "i"), _pack(turn[1], "i")))


def base64_decode(data: bytes) -> Turn:
    turn = _BASE64.decode(data)
    return _unpack(turn.prompt_ids, "i"), _unpack(turn.completion_ids, "i")


def floats_encode(values: list[float]) -> bytes:
    return _ENCODER.encode(values)


def floats_decode(data: bytes) -> list[float]:
    return _FLOATS.decode(data)


def shortest_float32(values: list[float]) -> list[float]:
    """Each value as the shortest decimal that reads back as the same float32 (9 significant
    digits at most, against float64's 17): what a float32 logprob needs, no less."""
    import numpy

    return [float(str(v)) for v in numpy.asarray(values, dtype=numpy.float32)]


def float32_encode(values: list[float]) -> bytes:
    return _ENCODER.encode(_pack(values, "f"))


def float32_decode(data: bytes) -> list[float]:
    return _unpack(_TEXT.decode(data), "f")


#: Each form: (encode a turn, decode it, the bytes of its values alone: what a token costs).
FORMS: dict[str, tuple[Callable[[Any], bytes], Callable[[bytes], Any], Callable[[Any], int]]] = {
    "JSON list of ints": (
        lists_encode,
        lists_decode,
        lambda turn: len(_ENCODER.encode(turn[0])) + len(_ENCODER.encode(turn[1])),
    ),
    "base64 int32 LE": (
        base64_encode,
        base64_decode,
        lambda turn: len(_ENCODER.encode(_pack(turn[0], "i"))) + len(_ENCODER.encode(_pack(turn[1], "i"))),
    ),
}
LOGPROB_FORMS: dict[str, tuple[Callable[[Any], bytes], Callable[[bytes], Any], Callable[[Any], int]]] = {
    "JSON floats": (floats_encode, floats_decode, lambda values: len(floats_encode(values))),
    "JSON floats, float32 shortest": (
        lambda values: floats_encode(shortest_float32(values)),
        lambda data: array.array("f", floats_decode(data)).tolist(),
        lambda values: len(floats_encode(shortest_float32(values))),
    ),
    "base64 float32 LE": (float32_encode, float32_decode, lambda values: len(float32_encode(values))),
}


# -- the ids ---------------------------------------------------------------------------------
def smollm2_turns(n: int, rng: random.Random) -> list[tuple[list[int], list[int]]]:
    """(prompt, completion) id pairs from SmolLM2's tokenizer on frostgym's own prompts and
    oracle replies: each a window of the real token stream of the right length."""
    from transformers import AutoTokenizer

    import frostgym  # noqa: F401  (registers the ids)
    from frostgym.agents.smollm2 import ensure_converted
    from frostgym.envs.registry import ENTRIES, make_env

    tokenizer: Any = AutoTokenizer.from_pretrained(ensure_converted(), local_files_only=True)
    prompts: list[int] = []
    replies: list[int] = []
    for env_id in (e.id for e in ENTRIES):
        try:
            env = make_env(env_id, "test", {})
        except Exception:  # an env that needs what this machine lacks: the others suffice
            continue
        try:
            for seed in range(4):
                observation, _ = env.reset(seed=seed)
                text = tokenizer.apply_chat_template(observation, add_generation_prompt=True, tokenize=False)
                prompts += tokenizer(text, add_special_tokens=False).input_ids
                action = env.oracle_action()
                reply = action if isinstance(action, str) else str(action)
                replies += [*tokenizer(reply, add_special_tokens=False).input_ids, tokenizer.eos_token_id]
        except Exception:
            pass
        finally:
            env.close()
    turns = []
    for _ in range(n):
        p = rng.randrange(0, len(prompts) - PROMPT)
        c = rng.randrange(0, len(replies) - COMPLETION)
        turns.append((prompts[p : p + PROMPT], replies[c : c + COMPLETION]))
    return turns


def zipf_ids(count: int, vocab: int, rng: random.Random, s: float = 1.1) -> list[int]:
    weights = [1.0 / (rank + 1) ** s for rank in range(vocab)]
    cumulative = list(_accumulate(weights))
    return rng.choices(range(vocab), cum_weights=cumulative, k=count)


def _accumulate(values: Sequence[float]) -> list[float]:
    total, out = 0.0, []
    for value in values:
        total += value
        out.append(total)
    return out


def synthetic_turns(n: int, vocab: int, rng: random.Random, *, zipf: bool) -> list[tuple[list[int], list[int]]]:
    draw = (lambda k: zipf_ids(k, vocab, rng)) if zipf else (lambda k: [rng.randrange(vocab) for _ in range(k)])
    stream = draw(n * (PROMPT + COMPLETION))
    return [
        (stream[i : i + PROMPT], stream[i + PROMPT : i + PROMPT + COMPLETION])
        for i in range(0, len(stream), PROMPT + COMPLETION)
    ]


def logprob_turns(n: int, rng: random.Random) -> list[list[float]]:
    """Completion logprobs as a model's float32 math gives them (most near 0, a tail of
    unlikely picks), widened to Python floats as the agents record them."""
    out = []
    for _ in range(n):
        values = [-rng.expovariate(1.5) for _ in range(COMPLETION)]
        out.append(array.array("f", values).tolist())
    return out


# -- timing ----------------------------------------------------------------------------------
def measure(
    items: list[Any],
    form: tuple[Callable[[Any], bytes], Callable[[bytes], Any], Callable[[Any], int]],
    repeats: int,
    tokens: int,
) -> dict[str, float]:
    encode, decode, value_bytes = form
    encoded = [encode(item) for item in items]
    assert all(decode(e) == item for e, item in zip(encoded, items, strict=True)), "the form does not round-trip"
    best_encode = best_decode = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        for item in items:
            encode(item)
        best_encode = min(best_encode, time.perf_counter() - started)
        started = time.perf_counter()
        for data in encoded:
            decode(data)
        best_decode = min(best_decode, time.perf_counter() - started)
    return {
        "bytes_per_token": sum(value_bytes(item) for item in items) / tokens,
        "encode_us_per_turn": best_encode / len(items) * 1e6,
        "decode_us_per_turn": best_decode / len(items) * 1e6,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=2000, help="turns per pass (default 2000)")
    parser.add_argument("--repeats", type=int, default=7, help="passes, best kept (default 7)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="also write every figure here")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    vocabularies = {
        "smollm2 (49152, real ids)": smollm2_turns(args.turns, rng),
        "vocab-151936 (Zipf)": synthetic_turns(args.turns, 151936, rng, zipf=True),
        "uniform-151936": synthetic_turns(args.turns, 151936, rng, zipf=False),
    }
    results: list[dict[str, Any]] = []
    rows = []
    tokens = args.turns * (PROMPT + COMPLETION)
    for vocab, turns in vocabularies.items():
        for form, codec in FORMS.items():
            figures = measure(list(turns), codec, args.repeats, tokens)
            results.append({"what": "ids", "ids": vocab, "form": form, **figures})
            rows.append(_row(vocab, form, figures))
    logprobs = logprob_turns(args.turns, rng)
    for form, codec in LOGPROB_FORMS.items():
        figures = measure(logprobs, codec, args.repeats, args.turns * COMPLETION)
        results.append({"what": "logprobs", "ids": "64 completion tokens", "form": form, **figures})
        rows.append(_row("logprobs (64 tokens)", form, figures))
    headers = ["ids", "form", "bytes/token", "encode us/turn", "decode us/turn"]
    print(f"one turn = {PROMPT} prompt + {COMPLETION} completion ids; best of {args.repeats} x {args.turns} turns")
    print(bench_common.format_table(headers, rows, [False, False, True, True, True]))
    if args.json:
        bench_common.write_json(
            args.json,
            {
                "machine": bench_common.machine_info(["msgspec", "transformers"]),
                "turns": args.turns,
                "repeats": args.repeats,
                "results": results,
            },
        )


def _row(vocab: str, form: str, figures: dict[str, float]) -> list[str]:
    return [
        vocab,
        form,
        f"{figures['bytes_per_token']:.2f}",
        f"{figures['encode_us_per_turn']:.2f}",
        f"{figures['decode_us_per_turn']:.2f}",
    ]


if __name__ == "__main__":
    main()
