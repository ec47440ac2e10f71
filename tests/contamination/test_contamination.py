"""``frostgym contamination``: a synthetic training file with known leaks (verbatim and
lightly edited) among unrelated lines, read as JSONL, Parquet and a datasets directory,
gives every leaked task its figures and flags no clean one; bad input is counted or refused
in one line; the report is the same bytes for the same input whatever the workers or
chunks; frostgym's own splits hold no copy of each other's questions."""

from __future__ import annotations

import json
import random
import string
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from frostgym.cli import app
from frostgym.contamination import ngrams
from frostgym.contamination.check import check_texts, check_training
from frostgym.contamination.evalset import EvalTask, eval_tasks
from frostgym.contamination.hygiene import split_hygiene
from frostgym.contamination.minhash import NearDuplicates
from frostgym.contamination.reading import TrainingSource, document_text
from frostgym.contamination.report import Parameters, Report
from frostgym.contamination.synthetic import Leak, light_edit, write_training_file
from frostgym.core.errors import ContaminationInputError
from frostgym.envs.registry import make_env
from frostgym.envs.specs import EnvSpec

MATH, SQL, ARITHMETIC = "frostgym/Math-v0", "frostgym/SQL-v0", "frostgym/Arithmetic-v0"


@pytest.fixture(scope="module")
def tasks() -> list[EvalTask]:
    return eval_tasks([EnvSpec(MATH), EnvSpec(SQL), EnvSpec(ARITHMETIC)], ("test",))


@pytest.fixture(scope="module")
def templates() -> dict[str, str]:
    """Math-v0's task id -> its GSM template: a task of a leaked task's template is a near
    copy of it (another name or number), which the check may rightly flag."""
    source = make_env(MATH, "test", {}).source
    return {task.task_id: task.metadata["template"] for task in source.tasks("test")}


@pytest.fixture(scope="module")
def leaked_file(tmp_path_factory: pytest.TempPathFactory, tasks: list[EvalTask]) -> tuple[Path, list[Leak]]:
    by_env = {env: [t for t in tasks if t.env == env] for env in (MATH, SQL, ARITHMETIC)}
    # Arithmetic-v0 stays clean: a changed number there makes another question, not a near copy
    chosen = by_env[MATH][3:200:20] + by_env[SQL][5:80:25]
    vocabulary = sorted({token.decode() for task in tasks for token in ngrams.tokens(task.text)})
    path = tmp_path_factory.mktemp("train") / "train.jsonl"
    leaks = write_training_file(path, [(t.task_id, t.text) for t in chosen], vocabulary, lines=4000, seed=3)
    return path, leaks


@pytest.fixture(scope="module")
def report(leaked_file: tuple[Path, list[Leak]], tasks: list[EvalTask]) -> Report:
    return check_training(TrainingSource(leaked_file[0]), tasks)


def test_every_leak_is_found_and_no_clean_task_flagged(
    report: Report, leaked_file: tuple[Path, list[Leak]], templates: dict[str, str]
) -> None:
    leaks = {leak.task_id: leak for leak in leaked_file[1]}
    assert {leak.edit for leak in leaks.values()} >= {"verbatim", "punctuation, case, a number changed"}
    by_id = {task.task_id: task for task in report.tasks}
    for task_id, leak in leaks.items():
        found = by_id[task_id]
        assert found.contaminated, (leak, found)
        assert found.train_line == leak.line
        if leak.edit == "verbatim":
            assert found.ngram_overlap == found.ngram_coverage == found.minhash_similarity == 1.0
        else:
            assert found.minhash_similarity >= 0.6 or found.ngram_overlap >= 0.5
    leaked_templates = {templates[t] for t in leaks if t in templates}
    false = [
        t for t in report.contaminated if t.task_id not in leaks and templates.get(t.task_id) not in leaked_templates
    ]
    assert false == []
    # the unrelated lines share words with every task, never a 13-gram
    clean = [t for t in report.tasks if t.task_id not in leaks and t.task_id not in templates]
    assert max(t.ngram_overlap for t in clean) == 0.0


def test_the_summary_counts_flagged_tasks_per_env_and_split(report: Report) -> None:
    for group in report.summary:
        members = [t for t in report.tasks if (t.env, t.split) == (group.env, group.split)]
        assert group.tasks == len(members) and group.contaminated == sum(t.contaminated for t in members)
        assert group.share == round(group.contaminated / group.tasks, 6)
    assert report.training.lines == report.training.documents == 4000 and report.training.skipped == {}


@pytest.mark.slow
def test_an_instruction_every_task_repeats_is_no_evidence() -> None:
    fractions = eval_tasks([EnvSpec("frostgym/Fractions-v0")], ("test",))
    other = "Compute (7/9) * (5/8), working strictly from left to right. Give the result as a fraction in lowest terms."
    kept = check_texts([other], fractions)
    counted = check_texts([other], fractions, Parameters(max_gram_tasks=len(fractions)))
    assert sum(o.ngram_overlap > 0 for o in counted) == len(fractions)  # the instruction's 13-grams, in every task
    assert sum(o.ngram_overlap > 0 for o in kept) < len(fractions) / 10
    assert all(k.ngrams < c.ngrams for k, c in zip(kept, counted, strict=True))


def test_the_similarity_is_datasketchs_estimate(tasks: list[EvalTask]) -> None:
    sets = [ngrams.shingles(ngrams.tokens(task.text)) for task in tasks[:300]]
    near = NearDuplicates(sets)
    edited = ngrams.shingles(ngrams.tokens(light_edit(tasks[7].text, 0)[0]))
    found = dict(near.similar(edited))
    assert found[7] >= 0.6
    for task, similarity in found.items():
        assert similarity == near.signature(edited).jaccard(near.signature(sets[task]))


def test_light_edits_change_one_token() -> None:
    text = "There are 66 fifth-graders at Maple Grove School. 33 of them are girls."
    for number in range(2):
        edited, what = light_edit(text, number)
        before, after = ngrams.tokens(text), ngrams.tokens(edited)
        assert len(before) == len(after) and sum(a != b for a, b in zip(before, after, strict=True)) == 1, what


@pytest.mark.slow
def test_the_same_input_gives_the_same_report_whatever_the_workers_and_chunks(
    leaked_file: tuple[Path, list[Leak]], tasks: list[EvalTask], report: Report
) -> None:
    chunked = check_training(TrainingSource(leaked_file[0], chunk_bytes=50_000), tasks, workers=2)
    assert json.dumps(chunked.to_json()) == json.dumps(report.to_json())
    texts = [json.loads(line)["text"] for line in leaked_file[0].read_text().splitlines()]
    assert check_texts(texts, tasks) == list(report.tasks)


@pytest.mark.slow
def test_parquet_and_datasets_directories_give_the_same_figures(
    tmp_path: Path, leaked_file: tuple[Path, list[Leak]], tasks: list[EvalTask], report: Report
) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    texts = [json.loads(line)["text"] for line in leaked_file[0].read_text().splitlines()]
    chat = [[{"role": "user", "content": text}] for text in texts]  # the chat shape, read as its contents
    pq.write_table(pa.table({"messages": chat}), tmp_path / "train.parquet", row_group_size=1500)
    from_parquet = check_training(TrainingSource(tmp_path / "train.parquet"), tasks)
    assert from_parquet.tasks == report.tasks and from_parquet.training.format == "parquet"
    datasets = pytest.importorskip("datasets")
    datasets.DatasetDict({"train": datasets.Dataset.from_dict({"body": texts})}).save_to_disk(str(tmp_path / "ds"))
    from_dir = check_training(TrainingSource(tmp_path / "ds", text_field="body"), tasks)
    assert from_dir.tasks == report.tasks and from_dir.training.lines == 4000


def test_bad_lines_are_skipped_and_counted(tmp_path: Path, tasks: list[EvalTask]) -> None:
    question = next(t for t in tasks if t.env == SQL)
    lines = [
        json.dumps({"text": "an unrelated line"}).encode(),
        b"{not json",
        b"[1, 2]",
        json.dumps({"title": "no text"}).encode(),
        b"",
        json.dumps({"prompt": question.text, "completion": "SELECT 1"}).encode(),
        json.dumps(
            {"messages": [{"role": "user", "content": "hello"}, {"role": "assistant", "content": None}]}
        ).encode(),
        b'{"text": "\xff\xfe not UTF-8"}',
    ]
    path = tmp_path / "train.jsonl"
    path.write_bytes(b"\n".join(lines))
    found = check_training(TrainingSource(path), tasks)
    read = found.training
    assert (read.lines, read.documents) == (8, 3)
    assert read.skipped == {"no text in field 'text'": 1, "not JSON": 2, "not a JSON object": 1}
    assert [line for line, _ in read.skipped_examples] == [2, 3, 4, 8]
    flagged = {t.task_id: t for t in found.contaminated}
    assert list(flagged) == [question.task_id] and flagged[question.task_id].train_line == 6


def test_document_text_reads_the_usual_shapes() -> None:
    assert document_text({"text": "a"}, "text") == "a"
    assert document_text({"prompt": "q", "completion": "a"}, "text") == "q\na"
    assert document_text({"messages": [{"content": "q"}, {"content": "a"}]}, "text") == "q\na"
    assert document_text({"messages": "not a list"}, "text") is None
    assert document_text({"text": 3}, "text") is None


def test_input_that_cannot_be_read_is_refused_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(ContaminationInputError, match="does not exist"):
        TrainingSource(tmp_path / "missing.jsonl")
    (tmp_path / "train.csv").write_text("text\nhello\n")
    with pytest.raises(ContaminationInputError, match="unknown training data format"):
        TrainingSource(tmp_path / "train.csv")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ContaminationInputError, match="not a datasets directory"):
        TrainingSource(tmp_path / "empty")
    (tmp_path / "bad.parquet").write_bytes(b"PAR1 no")
    pytest.importorskip("pyarrow")
    with pytest.raises(ContaminationInputError, match="not a readable Parquet file"):
        list(TrainingSource(tmp_path / "bad.parquet").chunks())
    runner = CliRunner()
    result = runner.invoke(app, ["contamination", "--train", str(tmp_path / "train.csv"), "--env", SQL])
    assert result.exit_code == 2 and "unknown training data format" in result.output
    result = runner.invoke(app, ["contamination", "--env", SQL])
    assert result.exit_code == 2 and "--train" in result.output


def test_the_command_prints_the_table_and_writes_the_json(tmp_path: Path, tasks: list[EvalTask]) -> None:
    question = next(t for t in tasks if t.env == SQL)
    path = tmp_path / "train.jsonl"
    path.write_text(json.dumps({"text": f"Q: {question.text} A: SELECT 1"}) + "\n" + json.dumps({"text": "x"}) + "\n")
    out = tmp_path / "report.json"
    result = CliRunner().invoke(
        app, ["contamination", "--train", str(path), "--env", SQL, "--split", "test", "--json", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert "1 of 157 tasks contaminated" in result.output and question.task_id in result.output
    data = json.loads(out.read_text())
    assert [{k: group[k] for k in ("env", "split", "tasks", "contaminated", "share")} for group in data["summary"]] == [
        {"env": SQL, "split": "test", "tasks": 157, "contaminated": 1, "share": 0.006369}
    ]
    record = next(r for r in data["tasks"] if r["contaminated"])
    assert {k: record[k] for k in ("task_id", "env", "split", "ngram_overlap", "train_line")} == {
        "task_id": question.task_id,
        "env": SQL,
        "split": "test",
        "ngram_overlap": 1.0,
        "train_line": 1,
    }
    assert data["training"]["lines"] == 2 and len(data["training"]["sha256"]) == 64


def test_tokens_are_the_same_on_the_fast_path_and_the_unicode_path() -> None:
    rng = random.Random(7)
    alphabet = string.printable + "\x00\x1c\x1f\x7f"
    for _ in range(2000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60)))
        assert ngrams.tokens(text) == ngrams.unicode_tokens(text), repr(text)
    assert ngrams.tokens("Compute (3/2) \u2212 (1/2)\uff01 3\u00d74") == ngrams.tokens("compute 3 / 2 - 1 / 2 3*4")
    assert ngrams.tokens("Compute (3/2) + (1/2).") != ngrams.tokens("Compute (3/2) - (1/2).")
    assert ngrams.tokens("Ein Caf\u00e9, s'il vous pla\u00eet!") == [
        b"ein",
        "caf\u00e9".encode(),
        b"s",
        b"il",
        b"vous",
        "pla\u00eet".encode(),
    ]


@pytest.mark.slow
def test_frostgyms_splits_share_no_question(tmp_path: Path) -> None:
    """At 300 train draws per generator. (At 20,000, three Math-v0 test questions are train
    draws with another currency sign: ``frostgym contamination --self``, README.)"""
    specs = [EnvSpec(env) for env in (ARITHMETIC, "frostgym/Fractions-v0", MATH, SQL, "frostgym/ToolsHTTP-v0")]
    pairs = list(split_hygiene(specs, Parameters(), train_samples=300))
    assert {(p.train_split, p.eval_split) for p in pairs if p.env == MATH} == {
        ("train", "dev"),
        ("train", "test"),
        ("train", "private"),
        ("dev", "test"),
        ("dev", "private"),
        ("test", "private"),
    }
    assert all(p.exact == 0 for p in pairs), [p for p in pairs if p.exact]
    # no near copy either where questions are not instances of shared templates
    assert all(p.contaminated == 0 for p in pairs if p.env in (ARITHMETIC, SQL)), pairs


# -- documents longer than a window ------------------------------------------------------


def _filler(rng: random.Random, words: list[str], chars: int) -> str:
    """About ``chars`` characters of unrelated words, with escapes JSON must write (a
    newline, a quote, a backslash) and a non-ASCII word now and then."""
    out: list[str] = []
    length = 0
    while length < chars:
        word = rng.choice(words)
        roll = rng.random()
        word = word + ("\n" if roll < 0.05 else ' "q"' if roll < 0.07 else " c:\\d" if roll < 0.08 else " caf\u00e9")
        out.append(word)
        length += len(word) + 1
    return " ".join(out)[:chars].rstrip()


@pytest.mark.slow
def test_a_leak_in_a_line_longer_than_a_window_is_found_even_across_a_cut(
    tmp_path: Path, tasks: list[EvalTask], templates: dict[str, str]
) -> None:
    from frostgym.contamination.windows import WINDOW, windows

    math = [t for t in tasks if t.env == MATH]
    inside, across, in_chat = math[10], math[30], math[50]
    words = sorted({token.decode() for task in tasks for token in ngrams.tokens(task.text)})
    rng = random.Random(5)
    # the first window ends at the last whitespace before character WINDOW: inside ``across``
    before = _filler(rng, words, WINDOW - len(across.text) // 2)
    text = " ".join([before, across.text, _filler(rng, words, WINDOW // 2), inside.text, _filler(rng, words, WINDOW)])
    system = _filler(rng, words, int(WINDOW * 0.7))
    user = " ".join([_filler(rng, words, WINDOW - len(system) - 2 - len(in_chat.text) // 2), in_chat.text, "thanks"])
    chat = [{"role": "system", "content": system}, {"role": "user", "content": user}]
    for document, leak in ((text, across), (f"{system}\n{user}", in_chat)):
        cuts, at = [], 0
        for part in windows(document):
            at += len(part.text)
            cuts.append(at)
        start = document.index(leak.text)
        assert any(start < cut < start + len(leak.text) for cut in cuts), "the leak must straddle a cut"
    lines = [
        json.dumps({"text": "a short line"}),
        json.dumps({"id": 7, "meta": {"tags": [1, 2.5, None, True]}, "text": text}),
        json.dumps({"text": "another short line"}),
        json.dumps({"messages": chat}, ensure_ascii=False),
    ]
    path = tmp_path / "train.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert min(len(lines[1].encode()), len(lines[3].encode())) > WINDOW

    report = check_training(TrainingSource(path), tasks, workers=2)
    by_id = {t.task_id: t for t in report.tasks}
    for leak, line in ((inside, 2), (across, 2), (in_chat, 4)):
        found = by_id[leak.task_id]
        assert found.contaminated and found.ngram_overlap == 1.0 and found.train_line == line, found
    leaked = {inside.task_id, across.task_id, in_chat.task_id}
    leaked_templates = {templates[t] for t in leaked}
    others = [t for t in report.contaminated if t.task_id not in leaked]
    assert [t for t in others if templates[t.task_id] not in leaked_templates] == []
    assert (report.training.lines, report.training.documents, report.training.skipped) == (4, 4, {})

    # a document's n-gram figures do not depend on where it is cut: windows of 4 KiB, or read whole
    figures = [(t.task_id, t.ngram_overlap, t.ngram_coverage, t.contaminated) for t in report.tasks]
    small = check_training(TrainingSource(path, window=4096), tasks)
    whole = check_training(TrainingSource(path, window=8 * WINDOW), tasks)
    for other in (small, whole):
        assert [(t.task_id, t.ngram_overlap, t.ngram_coverage, t.contaminated) for t in other.tasks] == figures
    # the same texts held in memory, or read from Parquet, give the same report
    texts = ["a short line", text, "another short line", f"{system}\n{user}"]
    assert check_texts(texts, tasks) == list(report.tasks)
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    pq.write_table(pa.table({"text": texts}), tmp_path / "train.parquet")
    assert check_training(TrainingSource(tmp_path / "train.parquet"), tasks).tasks == report.tasks


def test_a_long_line_is_judged_and_read_as_orjson_reads_it(tmp_path: Path) -> None:
    """Read through a window of 64 bytes, each line below is a long one (``longline``); its
    verdict and its text must be those of ``orjson.loads`` and ``document_text``."""
    import orjson

    rng = random.Random(11)
    alphabet = ["a", "b", " ", "  ", "\n", '"', "\\", "/", "\t", "\u00e9", "\u4e2d", "\U0001f600", "\x7f", "\u2028"]

    def noise(n: int) -> str:
        return "".join(rng.choice(alphabet) for _ in range(n))

    pad = "x" * 80
    lines: list[bytes] = [
        json.dumps({"text": noise(300)}).encode(),  # \\uXXXX escapes and surrogate pairs
        json.dumps({"text": noise(300)}, ensure_ascii=False).encode(),
        json.dumps({"meta": {"deep": [[[]], {"text": "not this"}]}, "text": "Q: " + noise(200)}).encode(),
        json.dumps({"text": None, "messages": [{"role": "u", "content": noise(90)}, 3, {"content": None}]}).encode(),
        b'{"messages": [{"content": "' + pad.encode() + b'", "content": "last wins"}, {"content": ""}]}',
        json.dumps({"completion": "C " + pad, "prompt": "P " + pad}).encode(),  # the prompt comes first
        json.dumps({"te\u0078t": pad}).encode().replace(b"text", b"te\\u0078t"),  # an escaped name
        json.dumps({"text": "", "pad": pad}).encode(),  # an empty text is a document
        json.dumps({"text": 3, "messages": [{"content": pad}], "x": pad}).encode(),  # no text
        json.dumps({"messages": [{"role": "u"}], "pad": pad}).encode(),  # no text
        json.dumps([pad, pad]).encode(),  # not an object
        b" " * 100 + b"\x0b",  # blank
        b'{"text": "' + pad.encode() + b'\\ud800"}',  # a lone surrogate
        b'{"text": "' + pad.encode() + b'\xff"}',  # not UTF-8
        b'{"text": "' + pad.encode() + b'\\x"}',  # a bad escape
        b'{"text": "' + pad.encode() + b'"} trailing',
        b'{"text": "' + pad.encode() + b'", "n": 1e400}',  # infinite as a double
        b'{"text": "' + pad.encode() + b'", "n": 01}',
        b'{"text": "' + pad.encode() + b'", "d": ' + b"[" * 1023 + b"]" * 1023 + b"}",  # 1,024 levels
        b'{"text": "' + pad.encode() + b'", "d": ' + b"[" * 1024 + b"]" * 1024 + b"}",  # 1,025
        b'{"text": "' + pad.encode() + b'"',  # cut short
    ]
    for _ in range(30):
        good = json.dumps({"text": noise(rng.randint(70, 400))}, ensure_ascii=rng.random() < 0.5).encode()
        at = rng.randrange(len(good))
        lines += [good, good[:at] + bytes([rng.randrange(256)]) + good[at + 1 :]]
    path = tmp_path / "train.jsonl"
    path.write_bytes(b"\n".join(lines))

    texts: dict[int, list[str]] = {}
    for chunk in TrainingSource(path, window=64).chunks():
        assert all(len(line) <= 64 for line in chunk.raw.split(b"\n")), chunk  # longer lines come as parts
        if chunk.part is not None:
            texts.setdefault(chunk.first, []).append(chunk.part.text)
    for number, line in enumerate(lines, start=1):
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError:
            record = None
        expected = document_text(record, "text") if isinstance(record, dict) else None
        assert ("".join(texts[number]) if number in texts else None) == expected, (number, line[:60])
    # and the counts a whole read gives
    windowed, read_whole = (check_training(TrainingSource(path, window=w), []).training for w in (64, 1 << 20))
    assert (windowed.lines, windowed.documents, windowed.skipped) == (
        read_whole.lines,
        read_whole.documents,
        read_whole.skipped,
    )
    assert read_whole.skipped["not JSON"] >= 9 and windowed.skipped_examples == read_whole.skipped_examples


def test_long_lines_are_cut_from_the_stream_in_bounded_chunks(tmp_path: Path) -> None:
    import hashlib

    lines = [json.dumps({"text": f"short line {n}"}) for n in range(300)]
    lines[40] = json.dumps({"text": "long " * 3000})  # 15 KB: within a block of short lines
    lines[41] = json.dumps({"text": "and longer " * 4000})  # 44 KB: past several blocks
    lines[299] = json.dumps({"text": "the last " * 2000})  # at the end, with no newline
    path = tmp_path / "train.jsonl"
    path.write_text("\n".join(lines))
    source = TrainingSource(path, chunk_bytes=1000, window=4096)
    numbers: list[int] = []
    for chunk in source.chunks():
        assert len(chunk.raw) <= 1000 + 4096
        if chunk.part is not None:
            numbers += [] if numbers and numbers[-1] == chunk.first else [chunk.first]
    assert numbers == [41, 42, 300]
    assert source.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    read = check_training(TrainingSource(path, chunk_bytes=1000, window=4096), []).training
    assert (read.lines, read.documents, read.skipped) == (300, 300, {})


def test_windows_give_every_token_once_with_the_tokens_before_them() -> None:
    from frostgym.contamination.windows import CARRIED, windows

    rng = random.Random(3)
    spaced = ["alpha", "Beta", "x+y", "3/4", "caf\u00e9", "\u0391\u03a3", "e\u0301t", "\u4e2d\u6587", "\u2103"]
    for trial in range(200):
        if trial % 3 == 2:  # no whitespace at all: CJK with fullwidth commas, a composed accent
            text = "".join(rng.choice(["\u4e2d\u6587", "\uff0c", "e\u0301", "\u3002", "ab"]) for _ in range(600))
        else:
            text = "".join(rng.choice(spaced) + rng.choice([" ", "\n", ", ", "\u3000"]) for _ in range(500))
        size = rng.choice([64, 100, 257, 1000])
        own: list[bytes] = []
        for part in windows(text, size):
            assert len(part.text) <= size or part.last
            assert not part.drop_first and not part.drop_last  # always a safe place to cut here
            assert part.carried == tuple(own[-CARRIED:])  # the tokens just before the window
            own += part.tokens()[len(part.carried) :]
        assert own == ngrams.tokens(text), trial
    # a run with no place to cut: split there, its halves left out, nothing carried across
    blob = "Q" * 300
    parts = list(windows("the cat " + blob + " sat down", 100))
    assert parts[0].drop_last and parts[1].drop_first and parts[1].carried == ()
    assert [t for p in parts for t in p.tokens()] == [b"the", b"cat", b"sat", b"down"]


_PEAK_RSS = """
import resource, subprocess, sys
subprocess.run([sys.executable, "-m", "frostgym.cli", *sys.argv[1:]], check=True, stdout=subprocess.DEVNULL)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


@pytest.mark.slow
def test_memory_does_not_grow_with_one_long_line(tmp_path: Path) -> None:
    """A real ``frostgym contamination`` process (with its workers) on a file that is one
    line of 8 MiB, then of 64 MiB: its peak RSS must not grow with the line (read whole,
    the 64 MiB line alone would cost a GB)."""
    words = ["add", "the", "sum", "of", "7", "+", "12", "what"]
    block = " ".join(random.Random(2).choice(words) for _ in range(50_000))
    peaks = []
    for mib in (8, 64):
        path = tmp_path / f"line{mib}.jsonl"
        with path.open("w") as stream:
            stream.write('{"text": "')
            written = 0
            while written < mib << 20:
                stream.write(block + " ")
                written += len(block) + 1
            stream.write('"}\n')
        args = ["contamination", "--train", str(path), "--env", ARITHMETIC, "--split", "test", "--workers", "2"]
        done = subprocess.run([sys.executable, "-c", _PEAK_RSS, *args], capture_output=True, text=True, check=True)
        peaks.append(int(done.stdout.split()[-1]) / 1024)  # MiB
        path.unlink()
    small, large = peaks
    assert large - small < 24, f"peak RSS {small:.0f} MiB with an 8 MiB line, {large:.0f} MiB with 64 MiB"
