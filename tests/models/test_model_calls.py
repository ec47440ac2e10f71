"""frostgym.models on real parts: calls keyed by content, a cache file checked by its hashes,
and a FrozenModel that records from a real model and replays without one.

The models are real: the OpenAI agent against the loopback chat server (``tests.chat_server``:
``echo`` answers with the last message, ``broken`` with a 400), and a tiny random Llama saved
as an ``hf:`` directory for the in-process path (marked slow)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from frostgym.agents.sampling import SamplingParams
from frostgym.core.errors import FrostgymError, ModelSpecError
from frostgym.models import (
    CACHE_MODES,
    FrozenModel,
    ModelCache,
    ModelCall,
    directory_sha256,
    pin_model,
)
from tests.chat_server import ChatServer

ROOT = Path(__file__).resolve().parents[2]
GREEDY = SamplingParams(max_new_tokens=8)
SAMPLED = SamplingParams(temperature=0.8, top_p=0.9, max_new_tokens=8, seed=3)
MESSAGES = [{"role": "system", "content": "You are a user."}, {"role": "user", "content": "Book a table."}]
TOOLS = [{"type": "function", "function": {"name": "book", "parameters": {"type": "object", "properties": {}}}}]


def openai_call(content: str = "hello", *, seed: int = 0, sampling: SamplingParams = GREEDY) -> ModelCall:
    return ModelCall.build(
        pin_model("openai:http://127.0.0.1:1/v1#echo"),
        [{"role": "user", "content": content}],
        sampling=sampling,
        seed=seed,
    )


# -- keys -------------------------------------------------------------------------------------


KEY_SCRIPT = """
import json, sys
from frostgym.agents.sampling import SamplingParams
from frostgym.models import ModelCall, pin_model
messages = [{"content": m["content"], "role": m["role"]} for m in json.loads(sys.argv[1])]
tools = [{"function": t["function"], "type": t["type"]} for t in json.loads(sys.argv[2])]
call = ModelCall.build(pin_model("openai:http://elsewhere:8000/v1#judge"), messages,
                       sampling=SamplingParams(temperature=0.8, top_p=0.9, max_new_tokens=8, seed=3),
                       seed=11, tools=tools)
print(call.key)
"""


def test_a_key_is_the_same_in_another_process_whatever_the_dict_order_and_the_url() -> None:
    here = ModelCall.build(
        pin_model("openai:http://127.0.0.1:1/v1#judge"), MESSAGES, sampling=SAMPLED, seed=11, tools=TOOLS
    )
    done = subprocess.run(
        [sys.executable, "-c", KEY_SCRIPT, json.dumps(MESSAGES), json.dumps(TOOLS)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert done.stdout.strip() == here.key
    assert len(here.key) == 64
    assert here.request()["model"] == {"spec": "openai", "model": "judge"}
    assert here.request()["tools"] == TOOLS


def test_a_key_changes_with_what_decides_the_reply() -> None:
    base = openai_call()
    assert openai_call().key == base.key
    assert openai_call("hello!").key != base.key
    assert openai_call(sampling=SamplingParams(max_new_tokens=9)).key != base.key
    other_model = ModelCall.build(
        pin_model("openai:http://127.0.0.1:1/v1#other"),
        [{"role": "user", "content": "hello"}],
        sampling=GREEDY,
        seed=0,
    )
    assert other_model.key != base.key
    with_tools = ModelCall.build(base.model, base.messages, sampling=GREEDY, seed=0, tools=TOOLS)
    assert with_tools.key != base.key


def test_a_greedy_key_ignores_the_seed_and_a_sampled_key_includes_it() -> None:
    assert openai_call(seed=1).key == openai_call(seed=2).key
    assert "seed" not in openai_call(seed=1).request()["sampling"]
    assert openai_call(seed=1, sampling=SAMPLED).key != openai_call(seed=2, sampling=SAMPLED).key
    assert openai_call(seed=1, sampling=SAMPLED).key == openai_call(seed=1, sampling=SAMPLED).key
    assert set(openai_call(sampling=SAMPLED).request()["sampling"]) == {
        "temperature",
        "top_p",
        "max_new_tokens",
        "stop",
        "seed",
    }
    reseeded = SamplingParams(temperature=0.8, top_p=0.9, max_new_tokens=8, seed=4)
    assert openai_call(seed=1, sampling=SAMPLED).key != openai_call(seed=1, sampling=reseeded).key


def test_an_hf_pin_is_the_content_of_its_directory(tmp_path: Path) -> None:
    model = tmp_path / "model"
    (model / "sub").mkdir(parents=True)
    (model / "config.json").write_text('{"a": 1}')
    (model / "sub" / "weights.bin").write_bytes(b"\x00\x01")
    copy = tmp_path / "copy"
    shutil.copytree(model, copy)
    assert pin_model(f"hf:{model}") == pin_model(f"hf:{copy}") == {"spec": "hf", "sha256": directory_sha256(model)}
    (copy / "sub" / "weights.bin").write_bytes(b"\x00\x02")
    assert pin_model(f"hf:{copy}") != pin_model(f"hf:{model}")
    with pytest.raises(ModelSpecError, match="no model directory"):
        pin_model(f"hf:{tmp_path / 'missing'}")


@pytest.mark.parametrize("spec", ["oracle", "random", "replay:cards/x", "gpt-4", "openai:http://x", "hf:"])
def test_a_spec_that_is_not_a_model_is_refused(spec: str) -> None:
    with pytest.raises(ModelSpecError) as raised:
        FrozenModel(spec, cache=ModelCache(), mode="record", sampling=GREEDY)
    assert isinstance(raised.value, FrostgymError) and isinstance(raised.value, ValueError)
    assert repr(spec) in str(raised.value)


def test_an_unknown_mode_is_refused() -> None:
    assert CACHE_MODES == ("replay", "record", "live")
    with pytest.raises(ValueError, match="unknown cache mode"):
        FrozenModel("openai:http://x/v1#m", cache=ModelCache(), mode="offline", sampling=GREEDY)  # type: ignore[arg-type]


# -- the cache file ---------------------------------------------------------------------------


def filled_cache(path: Path, n: int = 3) -> list[ModelCall]:
    cache = ModelCache(path)
    calls = [openai_call(f"message {i}") for i in range(n)]
    for i, call in enumerate(calls):
        cache.put(call, f"reply {i}")
    return calls


def test_a_line_holds_the_key_the_request_the_reply_and_their_hash(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "dir" / "calls.jsonl"
    (call,) = filled_cache(path, 1)
    (line,) = path.read_text().splitlines()
    entry = json.loads(line)
    assert set(entry) == {"key", "request", "reply", "entry_sha256"}
    assert entry["key"] == call.key and entry["request"] == call.request() and entry["reply"] == "reply 0"
    reopened = ModelCache(path)
    assert reopened.get(call) == "reply 0" and reopened.rejected == []


def test_a_hand_edited_line_is_not_served(tmp_path: Path) -> None:
    path = tmp_path / "calls.jsonl"
    calls = filled_cache(path, 4)
    lines = path.read_text().splitlines()
    edited_reply = json.loads(lines[1])
    edited_reply["reply"] = "a better reply"
    edited_request = json.loads(lines[2])
    edited_request["request"]["messages"][0]["content"] = "message 9"
    lines[1], lines[2] = json.dumps(edited_reply), json.dumps(edited_request)
    lines.insert(3, "{not json")
    path.write_text("\n".join(lines) + "\n")
    cache = ModelCache(path)
    assert [number for number, _ in cache.rejected] == [2, 3, 4]
    assert "entry_sha256" in cache.rejected[0][1] and "key" in cache.rejected[1][1] and "JSON" in cache.rejected[2][1]
    assert cache.get(calls[0]) == "reply 0" and cache.get(calls[3]) == "reply 3"
    assert cache.get(calls[1]) is None and cache.get(calls[2]) is None
    assert len(cache) == 2


def test_the_cache_hash_ignores_line_order_and_follows_content(tmp_path: Path) -> None:
    path = tmp_path / "calls.jsonl"
    filled_cache(path, 5)
    before = ModelCache(path).sha256
    lines = path.read_text().splitlines()
    shuffled = tmp_path / "shuffled.jsonl"
    shuffled.write_text("\n".join(reversed(lines)) + "\n")
    assert ModelCache(shuffled).sha256 == before
    cache = ModelCache(shuffled)
    cache.put(openai_call("one more"), "reply")
    assert cache.sha256 != before
    assert ModelCache().sha256 != before


def test_a_torn_last_line_is_rejected_and_the_next_put_starts_a_new_line(tmp_path: Path) -> None:
    path = tmp_path / "calls.jsonl"
    calls = filled_cache(path, 2)
    path.write_text(path.read_text() + '{"key": "abc", "requ')
    cache = ModelCache(path)
    assert [number for number, _ in cache.rejected] == [3]
    late = openai_call("late")
    cache.put(late, "late reply")
    reopened = ModelCache(path)
    assert reopened.get(late) == "late reply" and reopened.get(calls[1]) == "reply 1"
    assert [number for number, _ in reopened.rejected] == [3]


def test_puts_from_many_threads_all_reach_the_file(tmp_path: Path) -> None:
    path = tmp_path / "calls.jsonl"
    cache = ModelCache(path)
    threads, per_thread = 8, 25

    def work(t: int) -> None:
        for i in range(per_thread):
            cache.put(openai_call(f"thread {t} call {i}"), f"reply {t}.{i}" * 20)

    workers = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert len(path.read_text().splitlines()) == threads * per_thread
    reopened = ModelCache(path)
    assert reopened.rejected == [] and len(reopened) == threads * per_thread
    assert reopened.sha256 == cache.sha256
    assert reopened.get(openai_call("thread 7 call 24")) == "reply 7.24" * 20


def test_an_in_memory_cache_writes_nothing_and_from_replies_serves_stored_calls(tmp_path: Path) -> None:
    memory = ModelCache()
    call = openai_call()
    memory.put(call, "kept")
    assert memory.get(call) == "kept" and memory.path is None
    stored = ModelCache.from_replies(
        [(c.request(), f"stored {i}") for i, c in enumerate(filled_cache(tmp_path / "c.jsonl"))]
    )
    assert stored.get(openai_call("message 2")) == "stored 2" and stored.path is None


# -- FrozenModel against a real OpenAI-compatible server -------------------------------------


def test_record_fills_the_file_and_replay_serves_it_without_a_model(tmp_path: Path) -> None:
    path = tmp_path / "calls.jsonl"
    with ChatServer() as server:
        spec = f"openai:{server.base_url}#echo"
        recorder = FrozenModel(spec, cache=ModelCache(path), mode="record", sampling=GREEDY)
        first = recorder.call(MESSAGES, seed=1)
        assert first.source == "live" and first.reply == "you said: Book a table." and first.drop_class is None
        again = recorder.call(MESSAGES, seed=2)  # greedy: another seed is the same call
        assert again.source == "cache" and again.key == first.key
        assert len(server.bodies) == 1
        assert len(path.read_text().splitlines()) == 1
    replayer = FrozenModel("openai:http://127.0.0.1:1/v1#echo", cache=ModelCache(path), mode="replay", sampling=GREEDY)
    served = replayer.call(MESSAGES, seed=5)
    assert served.source == "cache" and served.reply == first.reply and served.key == first.key
    assert not replayer.loaded
    described = replayer.describe()
    assert described == {
        "model": {"spec": "openai", "model": "echo"},
        "mode": "replay",
        "cache_sha256": ModelCache(path).sha256,
        "cache_path": str(path),
    }


def test_a_replay_miss_is_a_replay_miss_and_asks_nothing(tmp_path: Path) -> None:
    path = tmp_path / "calls.jsonl"
    with ChatServer() as server:
        model = FrozenModel(f"openai:{server.base_url}#echo", cache=ModelCache(path), mode="replay", sampling=GREEDY)
        outcome = model.call(MESSAGES, seed=0)
        assert server.bodies == []
    assert outcome.reply is None and outcome.source is None and outcome.drop_class == "replay_miss"
    assert outcome.error == f"no cached reply for model call {outcome.key[:16]} (replay mode)"
    assert not model.loaded and not path.exists()


def test_a_hand_edited_reply_is_a_replay_miss(tmp_path: Path) -> None:
    path = tmp_path / "calls.jsonl"
    with ChatServer() as server:
        FrozenModel(f"openai:{server.base_url}#echo", cache=ModelCache(path), mode="record", sampling=GREEDY).call(
            MESSAGES, seed=0
        )
    entry = json.loads(path.read_text())
    entry["reply"] = "you said: something else"
    path.write_text(json.dumps(entry) + "\n")
    cache = ModelCache(path)
    assert len(cache.rejected) == 1
    outcome = FrozenModel("openai:http://127.0.0.1:1/v1#echo", cache=cache, mode="replay", sampling=GREEDY).call(
        MESSAGES, seed=0
    )
    assert outcome.drop_class == "replay_miss"


def test_live_asks_the_model_every_time_and_records_every_reply(tmp_path: Path) -> None:
    path = tmp_path / "calls.jsonl"
    with ChatServer() as server:
        spec = f"openai:{server.base_url}#echo"
        FrozenModel(spec, cache=ModelCache(path), mode="record", sampling=GREEDY).call(MESSAGES, seed=0)
        live = FrozenModel(spec, cache=ModelCache(path), mode="live", sampling=GREEDY)
        outcomes = [live.call(MESSAGES, seed=0) for _ in range(2)]
        assert [o.source for o in outcomes] == ["live", "live"]
        assert len(server.bodies) == 3
    assert len(path.read_text().splitlines()) == 3
    assert ModelCache(path).rejected == [] and len(ModelCache(path)) == 1


def test_a_failing_model_is_an_infra_error_and_nothing_is_cached(tmp_path: Path) -> None:
    path = tmp_path / "calls.jsonl"
    with ChatServer() as server:
        model = FrozenModel(f"openai:{server.base_url}#broken", cache=ModelCache(path), mode="record", sampling=GREEDY)
        outcome = model.call(MESSAGES, seed=0)
    assert outcome.reply is None and outcome.drop_class == "infra_error" and outcome.error
    assert "400" in outcome.error or "bad request" in outcome.error
    assert not path.exists()


def test_a_tool_call_reply_is_kept_as_canonical_json(tmp_path: Path) -> None:
    with ChatServer() as server:
        model = FrozenModel(f"openai:{server.base_url}#tools", cache=ModelCache(), mode="record", sampling=GREEDY)
        outcome = model.call(MESSAGES, seed=0, tools=TOOLS)
        assert server.bodies[0]["tools"] == TOOLS
    assert outcome.source == "live" and outcome.reply is not None
    assert isinstance(json.loads(outcome.reply), dict)


# -- FrozenModel on an in-process transformers model ----------------------------------------


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer random Llama with SmolLM2's tokenizer, saved as a local model directory."""
    pytest.importorskip("torch", reason="the hf extra (torch, transformers) is not installed")
    pytest.importorskip("transformers", reason="the hf extra (torch, transformers) is not installed")
    from frostgym.agents.smollm2 import tiny_random_model

    model, tokenizer = tiny_random_model(0, max_positions=512)
    path = tmp_path_factory.mktemp("models") / "tiny-llama"
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


@pytest.mark.slow
@pytest.mark.parametrize("sampling", [GREEDY, SAMPLED], ids=["greedy", "sampled"])
def test_an_hf_model_records_and_replays_byte_identical_replies(
    tiny_model_dir: Path, tmp_path: Path, sampling: SamplingParams
) -> None:
    path = tmp_path / "calls.jsonl"
    spec = f"hf:{tiny_model_dir}"
    recorder = FrozenModel(spec, cache=ModelCache(path), mode="record", sampling=sampling)
    recorded = [recorder.call(MESSAGES, seed=seed) for seed in (1, 2)]
    # greedy: the seed is not part of the call, so the second is the first, served from the cache
    assert [o.source for o in recorded] == (["live", "cache"] if sampling is GREEDY else ["live", "live"])
    assert all(isinstance(o.reply, str) for o in recorded)
    assert recorder.loaded
    lines = path.read_bytes()
    replayer = FrozenModel(spec, cache=ModelCache(path), mode="replay", sampling=sampling)
    replayed = [replayer.call(MESSAGES, seed=seed) for seed in (1, 2)]
    assert [o.source for o in replayed] == ["cache", "cache"]
    assert [o.reply for o in replayed] == [o.reply for o in recorded]
    assert [o.key for o in replayed] == [o.key for o in recorded]
    assert not replayer.loaded and path.read_bytes() == lines
    # a second recording of the same calls, from a fresh model, gives the same replies
    fresh = FrozenModel(spec, cache=ModelCache(), mode="record", sampling=sampling)
    assert [fresh.call(MESSAGES, seed=seed).reply for seed in (1, 2)] == [o.reply for o in recorded]
