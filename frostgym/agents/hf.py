"""``HFAgent``: any transformers causal LM from a local path, batched, CUDA or CPU.

- Prompts are the observation run through the model's chat template (with ``tools=``
  when the request carries tools), left-padded, and batched in order of length.
- Sampling is seeded per request: a logits processor draws each row's token with that
  row's own ``torch.Generator`` and hands ``generate`` a one-hot distribution, so the
  same request gives the same text whatever batch it lands in, and the global torch
  RNG is never touched. ``temperature == 0`` is plain greedy decoding.
- Stop strings end generation and are cut from the text, as in the OpenAI API.
- Token ids are always recorded (``AgentReply.tokens``, a ``TokenTrace``): the prompt ids
  the model was fed, without the batch's padding; the completion ids it generated, through
  its first end-of-sequence token, or through the token that completed a stop string (the
  text is cut before the stop string; the ids are what was sampled), or all
  ``max_new_tokens`` of them, never the padding ``generate`` gives a row that finished
  before the others; and each completion token's logprob under the distribution it was
  drawn from, taken inside the sampler (``logprobs_of="sampling"``: the temperature-scaled,
  top-p-truncated and renormalised distribution ``SeededSampler`` draws from), or, when
  greedy, the log-softmax of the final scores whose argmax was taken
  (``logprobs_of="model"``: temperature 1; a greedy pick's own distribution is a point mass).
- Logprobs in ``extra``, when ``sampling.logprobs`` asks for them, are of each chosen token
  under the model's raw (temperature 1) distribution: what KL and entropy diagnostics need.
- Nothing is ever downloaded: offline mode is forced and every load is ``local_files_only``.
- Timings: each reply's ``extra`` has ``latency_s`` (its batch's whole ``generate`` call, from
  tokenising the prompts), ``ttft_s`` (from that start to the decoding step that made its first
  token, as ``generate`` hands each step's tokens to the host: ``StepClock``) and ``tpot_s`` (the
  seconds per output token after the first: from its first token's step to its last token's,
  over its tokens but one; None for a one-token reply). A batch's rows share their first step,
  so they share ``ttft_s``; each row's ``tpot_s`` ends at its own last token. Exact on CPU and
  CUDA, where ``generate`` waits for every step's tokens; on Apple's ``mps`` transformers hands
  the tokens over a step late, so both read one step long.
- Progress: with ``on_tokens`` set, each decoding step's new tokens are reported as they
  are made (a streamer handed to ``generate``), and each batch's replies when it is done,
  so a display can show tokens/s and replies long before the episodes are done.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # before transformers / huggingface_hub read it
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, LogitsProcessor, LogitsProcessorList
from transformers.generation.streamers import BaseStreamer

from frostgym.agents.base import AgentReply, AgentRequest, TokenHook
from frostgym.agents.sampling import SamplingParams
from frostgym.core.episode import LogprobsOf, TokenTrace
from frostgym.core.errors import ModelNotFoundError
from frostgym.core.seeding import derive_seed


def default_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


class SeededSampler(LogitsProcessor):
    """Temperature and top-p sampling with one generator per row (see module docstring).
    ``logprobs`` gets, at each decoding step, each row's chosen token's logprob under the
    distribution it was drawn from (top-p's kept tokens renormalised)."""

    def __init__(self, temperature: float, top_p: float, seeds: Sequence[int], device: torch.device) -> None:
        self.temperature = temperature
        self.top_p = top_p
        self.generators = [torch.Generator(device=device).manual_seed(s) for s in seeds]
        self.logprobs: list[torch.Tensor] = []

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        scaled = scores.float() / self.temperature
        probs = torch.softmax(scaled, dim=-1)
        kept_mass = None
        if self.top_p < 1.0:
            sorted_probs, order = torch.sort(probs, descending=True, dim=-1)
            keep = torch.cumsum(sorted_probs, dim=-1) - sorted_probs < self.top_p  # always keeps the top token
            sorted_probs = sorted_probs * keep
            kept_mass = sorted_probs.sum(dim=-1)
            probs = torch.zeros_like(probs).scatter(-1, order, sorted_probs)
        chosen = torch.stack(
            [torch.multinomial(probs[i], 1, generator=g) for i, g in enumerate(self.generators)]
        ).squeeze(-1)
        rows = torch.arange(scores.shape[0], device=scores.device)
        chosen_logprobs = torch.log_softmax(scaled, dim=-1)[rows, chosen]  # not log(probs): exact for tiny p
        self.logprobs.append(chosen_logprobs if kept_mass is None else chosen_logprobs - kept_mass.log())
        one_hot = torch.full_like(scores, float("-inf"))
        one_hot[rows, chosen] = 0.0
        return one_hot  # type: ignore[return-value]


class GreedyLogprobs(LogitsProcessor):
    """Records, at each greedy decoding step, the log-softmax of the final scores at their
    argmax (the token ``generate`` then picks): the chosen token's logprob at temperature 1.
    Last in the processor list, so it sees the scores the pick is made from."""

    def __init__(self) -> None:
        self.logprobs: list[torch.Tensor] = []

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        self.logprobs.append(torch.log_softmax(scores.float(), dim=-1).max(dim=-1).values)
        return scores


class TokenCounter(BaseStreamer):
    """Hands each decoding step's new tokens to a ``TokenHook`` (as ``hook(tokens, 0)``) as
    ``generate`` makes them.

    ``generate`` gives a streamer the prompt first, then one token per row per step. A row
    counts as ``_completion_length`` counts its reply: its tokens through its first
    end-of-sequence token; the pad tokens a finished row is given after that are not
    counted, so the hook's total for a call is the replies' ``completion_tokens``."""

    def __init__(self, hook: TokenHook, eos_ids: set[int], pad_id: int) -> None:
        self.hook = hook
        self.eos = torch.tensor(sorted(eos_ids), dtype=torch.long)
        self.pad_id = pad_id
        self.prompt_seen = False
        self.ended: torch.Tensor | None = None

    def put(self, value: torch.Tensor) -> None:
        if not self.prompt_seen:
            self.prompt_seen = True
            return
        tokens = value.reshape(-1)
        if self.ended is None:
            self.ended = torch.zeros(tokens.shape[0], dtype=torch.bool)
        ends = torch.isin(tokens, self.eos)
        new = int((~self.ended & (ends | (tokens != self.pad_id))).sum())
        self.ended |= ends
        if new:
            self.hook(new, 0)

    def end(self) -> None:
        """Nothing is held back: every step was handed on as it came."""


class StepClock(BaseStreamer):
    """The ``time.perf_counter()`` at which ``generate`` handed each decoding step's tokens to
    the host (``stamps``; the prompt it is given first is not a step), passing every call on
    to ``then`` (a ``TokenCounter``) when one is given."""

    def __init__(self, then: TokenCounter | None = None) -> None:
        self.then = then
        self.stamps: list[float] = []
        self.prompt_seen = False

    def put(self, value: torch.Tensor) -> None:
        if self.prompt_seen:
            self.stamps.append(time.perf_counter())
        self.prompt_seen = True
        if self.then is not None:
            self.then.put(value)

    def end(self) -> None:
        if self.then is not None:
            self.then.end()

    def timings(self, started: float, count: int) -> tuple[float | None, float | None]:
        """(ttft_s, tpot_s) of a row of ``count`` generated tokens in a call that started at
        ``started`` (the module docstring); None where the steps do not tell."""
        if count < 1 or len(self.stamps) < count:
            return None, None
        first = self.stamps[0]
        return first - started, (self.stamps[count - 1] - first) / (count - 1) if count > 1 else None


class HFAgent:
    """A transformers causal LM as a policy, batched (see the module docstring for how).

    ``model`` and ``tokenizer`` are a loaded transformers model and its tokenizer (it must
    have a chat template; it is switched to left padding, and given the EOS token as pad
    token when it has none); ``sampling`` the decoding parameters (greedy by default);
    ``batch_size`` how many prompts go to ``generate`` at once; ``model_id`` the name
    ``describe`` records, and ``source`` what it records of where the weights come from
    (the embedded model's package and file: ``frostgym.agents.smollm2.model_source``).
    ``on_tokens``, None until a caller sets it, is told of each decoding step's new
    tokens (``TokenCounter``) and of each batch's replies once they are done: what a
    progress display counts. ``from_pretrained(path, ...)`` loads a local model directory
    and raises ``ModelNotFoundError`` when there is none: nothing is ever downloaded.

    ``act`` returns one ``AgentReply`` per request, in order: the completion text (stop
    strings cut), its prompt and completion token counts, ``finish_reason`` ``"stop"`` or
    ``"length"``, its ``tokens`` (prompt ids, completion ids and their logprobs: the module
    docstring says which ids and which logprobs), and in ``extra`` the latency, ``ttft_s`` and
    ``tpot_s`` (the module docstring), the batch size, the sampling parameters and, when
    ``sampling.logprobs`` is set, each completion token's raw logprob. It raises what the
    model raises (CUDA out of memory, a prompt longer than the model takes).

    Determinism: each request samples from its own generator, seeded from
    ``sampling.seed`` and the request's ``seed``, so the same request gives the same text
    whichever batch it is in, and the global torch RNG is never used. The same model,
    dtype, device and library versions are needed for the same text.
    """

    name = "hf"

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        sampling: SamplingParams | None = None,
        batch_size: int = 16,
        model_id: str = "",
        source: Mapping[str, Any] | None = None,
    ) -> None:
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.sampling = sampling or SamplingParams()
        self.batch_size = batch_size
        self.model_id = model_id
        self.source = dict(source) if source is not None else None
        self.on_tokens: TokenHook | None = None

    @classmethod
    def from_pretrained(
        cls,
        path: str | Path,
        *,
        device: str | None = None,
        dtype: torch.dtype | None = None,
        sampling: SamplingParams | None = None,
        batch_size: int = 16,
    ) -> HFAgent:
        """Load a model directory. bf16 on CUDA, float32 on CPU unless ``dtype`` says otherwise."""
        path = Path(path)
        if not path.is_dir():
            raise ModelNotFoundError(f"no model directory at {path}: frostgym loads models from local paths only")
        device = device or default_device()
        dtype = dtype or (torch.bfloat16 if device.startswith("cuda") else torch.float32)
        tokenizer: Any = AutoTokenizer.from_pretrained(path, local_files_only=True)
        model: Any = AutoModelForCausalLM.from_pretrained(path, local_files_only=True, dtype=dtype)
        model = model.to(device)
        return cls(model, tokenizer, sampling=sampling, batch_size=batch_size, model_id=str(path))

    @property
    def device(self) -> torch.device:
        return torch.device(next(self.model.parameters()).device)

    @property
    def context_length(self) -> int | None:
        """The most tokens (prompt and reply) the model takes: its config's
        ``max_position_embeddings``, None when it declares none."""
        length = getattr(getattr(self.model, "config", None), "max_position_embeddings", None)
        return length if isinstance(length, int) and not isinstance(length, bool) and length > 0 else None

    def describe(self) -> dict[str, Any]:
        described = {
            "spec": f"hf:{self.model_id}",
            "model": self.model_id,
            "device": str(self.device),
            "dtype": str(next(self.model.parameters()).dtype),
            "batch_size": self.batch_size,
            "sampling": self.sampling.to_dict(),
        }
        if self.source is not None:
            described["source"] = dict(self.source)
        return described

    def prompt(self, request: AgentRequest) -> str:
        kwargs: dict[str, Any] = {"add_generation_prompt": True, "tokenize": False}
        if request.tools:
            kwargs["tools"] = request.tools
        text = self.tokenizer.apply_chat_template(request.observation, **kwargs)
        return str(text)

    def act(self, requests: Sequence[AgentRequest]) -> list[AgentReply]:
        prompts = [self.prompt(r) for r in requests]
        lengths = [len(self.tokenizer(p, add_special_tokens=False).input_ids) for p in prompts]
        order = sorted(range(len(requests)), key=lambda i: (-lengths[i], i))
        replies: list[AgentReply | None] = [None] * len(requests)
        for start in range(0, len(order), self.batch_size):
            chunk = order[start : start + self.batch_size]
            for i, reply in zip(
                chunk, self._generate([prompts[i] for i in chunk], [requests[i] for i in chunk]), strict=True
            ):
                replies[i] = reply
        return [r for r in replies if r is not None]

    @torch.inference_mode()
    def _generate(self, prompts: list[str], requests: list[AgentRequest]) -> list[AgentReply]:
        params = self.sampling
        started = time.perf_counter()
        encoded = self.tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False).to(self.device)
        processors = LogitsProcessorList()
        recorder: SeededSampler | GreedyLogprobs
        if params.temperature > 0:
            seeds = [derive_seed("hf-sampling", params.seed, r.seed) for r in requests]
            recorder = SeededSampler(params.temperature, params.top_p, seeds, self.device)
        else:
            recorder = GreedyLogprobs()
        processors.append(recorder)
        eos_ids = set(_as_list(self.model.generation_config.eos_token_id)) | {self.tokenizer.eos_token_id}
        hook = self.on_tokens
        clock = StepClock(None if hook is None else TokenCounter(hook, eos_ids, self.tokenizer.pad_token_id))
        output = self.model.generate(
            **encoded,
            max_new_tokens=params.max_new_tokens,
            do_sample=False,
            logits_processor=processors,
            stop_strings=list(params.stop) or None,
            tokenizer=self.tokenizer,
            pad_token_id=self.tokenizer.pad_token_id,
            return_dict_in_generate=True,
            output_logits=params.logprobs,
            top_p=None,
            top_k=None,
            temperature=None,
            streamer=clock,
        )
        if hook is not None:
            hook(0, len(prompts))
        elapsed = time.perf_counter() - started
        prompt_width = encoded["input_ids"].shape[1]
        new_tokens = output.sequences[:, prompt_width:]
        step_logprobs = (
            torch.log_softmax(torch.stack(output.logits, dim=1).float(), dim=-1) if params.logprobs else None
        )
        chosen = torch.stack(recorder.logprobs, dim=1).cpu().tolist() if recorder.logprobs else None
        logprobs_of: LogprobsOf = "sampling" if params.temperature > 0 else "model"
        input_ids, attention = encoded["input_ids"].cpu(), encoded["attention_mask"].cpu().bool()
        replies = []
        for row in range(new_tokens.shape[0]):
            tokens = new_tokens[row].tolist()
            count, ended = _completion_length(tokens, eos_ids, self.tokenizer.pad_token_id)
            if params.stop and (through_stop := self._stop_end(tokens, count, params.stop)) < count:
                count, ended = through_stop, False  # what follows the stop string is padding
            text = self.tokenizer.decode(tokens[:count], skip_special_tokens=True)
            text, hit_stop = _cut_at_stop(text, params.stop)
            finish = "stop" if ended or hit_stop else "length"
            ttft, tpot = clock.timings(started, count)
            extra: dict[str, Any] = {
                "latency_s": elapsed,
                "ttft_s": ttft,
                "tpot_s": tpot,
                "batch_size": len(prompts),
                "sampling": params.to_dict(),
            }
            if step_logprobs is not None:
                extra["logprobs"] = [float(step_logprobs[row, t, tok]) for t, tok in enumerate(tokens[:count])]
            trace = TokenTrace(
                prompt_ids=input_ids[row][attention[row]].tolist(),
                completion_ids=tokens[:count],
                logprobs=None if chosen is None else chosen[row][:count],
                logprobs_of=None if chosen is None else logprobs_of,
            )
            replies.append(
                AgentReply(
                    action=text,
                    prompt_tokens=int(attention[row].sum()),
                    completion_tokens=count,
                    finish_reason=finish,
                    extra=extra,
                    tokens=trace,
                )
            )
        return replies

    def _stop_end(self, tokens: list[int], count: int, stop: tuple[str, ...]) -> int:
        """How many of a row's first ``count`` tokens were generated when a stop string may
        have ended it: through the first token whose text completes a stop string (what
        ``generate`` stopped at; a finished row is padded after it, and when the pad token is
        the end-of-sequence token that padding would read as a generated one), else
        ``count``. A binary search over decoded prefixes: a prefix's text only grows."""

        def stopped(k: int) -> bool:
            text = self.tokenizer.decode(tokens[:k], skip_special_tokens=True)
            return any(s and s in text for s in stop)

        if not stopped(count):
            return count
        low, high = 1, count  # stopped(high) holds
        while low < high:
            middle = (low + high) // 2
            if stopped(middle):
                high = middle
            else:
                low = middle + 1
        return high


def _as_list(value: int | list[int] | None) -> list[int]:
    if value is None:
        return []
    return [value] if isinstance(value, int) else list(value)


def _completion_length(tokens: list[int], eos_ids: set[int], pad_id: int) -> tuple[int, bool]:
    """Tokens the model really produced (through its end-of-sequence token) and whether it ended."""
    for i, token in enumerate(tokens):
        if token in eos_ids:
            return i + 1, True
    length = len(tokens)
    while length and tokens[length - 1] == pad_id and pad_id not in eos_ids:
        length -= 1
    return length, False


def _cut_at_stop(text: str, stop: tuple[str, ...]) -> tuple[str, bool]:
    cuts = [text.find(s) for s in stop if s and s in text]
    if not cuts:
        return text, False
    return text[: min(cuts)], True
