"""What the ``frostgym`` command prints when something is wrong, or when nobody is at a
terminal: a card another process is writing is named with that process's pid, in one line
(exit 2); a card whose files fail their checksums is refused before anything is replayed
(exit 2); and help sent to a pipe is wrapped, never cut. Each test runs the real command in
a process of its own, on cards real runs wrote."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli_process import run_cli

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
MATH = "frostgym/Arithmetic-v0"
EVAL = ["eval", "--env", MATH, "--episodes", "10", "--seed", "4"]
#: Box-drawing characters rich draws panels with: not part of any text.
BOX = "│╭╮╰╯─"


def _cli(*args: str, timeout: float = 120, **env: str) -> subprocess.CompletedProcess[str]:
    """``frostgym ARGS`` with stdout and stderr pipes and no terminal size in the environment."""
    environ = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "TERMINAL_WIDTH", "LINES")}
    return run_cli(*args, timeout=timeout, env={**environ, **env})


def _edit_wall_seconds(path: Path, line: int) -> None:
    """Change the 1-based ``line``'s wall time: a field replay does not compare, so the
    edited episode replays exactly as it reads."""
    lines = path.read_bytes().splitlines(keepends=True)
    start = lines[line - 1].index(b'"wall_seconds":') + len(b'"wall_seconds":')
    end = lines[line - 1].index(b",", start)
    lines[line - 1] = lines[line - 1][:start] + b"9.5" + lines[line - 1][end:]
    path.write_bytes(b"".join(lines))


# -- a card another process is writing ------------------------------------------------------

HOLD = """
import sys, time
from pathlib import Path
from frostgym.cards.card import CardWriter, read_card_json
from frostgym.run.plan import PlannedEpisode

out = Path(sys.argv[1])
card = read_card_json(out)
plan = [PlannedEpisode.from_dict(entry) for entry in card["plan"]["episodes"]]
writer = CardWriter.resume(out, config=card["config"], plan=plan)
print("holding", flush=True)
time.sleep(300)
"""


def test_resume_of_a_card_another_process_writes_names_its_pid_in_one_line(tmp_path: Path) -> None:
    out = tmp_path / "card"
    made = _cli(*EVAL, "--out", str(out))
    assert made.returncode == 0, made.stderr
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(out)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "holding\n", holder.stderr
        started = time.monotonic()
        refused = _cli(*EVAL, "--out", str(out), "--resume")
        assert time.monotonic() - started < 60  # refused at once (it takes ~2 s), not after the holder
        assert holder.poll() is None  # still holding the card
    finally:
        holder.kill()
        holder.wait()
    output = refused.stdout + refused.stderr
    assert refused.returncode == 2, output
    assert "Traceback" not in output and "BlockingIOError" not in output and "RuntimeError" not in output
    named = [line for line in refused.stderr.splitlines() if f"pid {holder.pid}" in line]
    assert len(named) == 1 and "is being written by another frostgym process" in named[0], refused.stderr
    assert named[0].startswith("error:") and str(out) in named[0]
    again = _cli(*EVAL, "--out", str(out), "--resume")  # the holder gone, the card is free again
    assert again.returncode == 0, again.stderr


# -- replay of a card whose files fail their checksums ----------------------------------------


def test_replay_of_an_edited_card_is_refused_before_anything_is_called_identical(tmp_path: Path) -> None:
    out = tmp_path / "card"
    made = _cli(*EVAL, "--out", str(out))
    assert made.returncode == 0, made.stderr
    assert _cli("replay", str(out)).returncode == 0
    _edit_wall_seconds(out / "episodes.jsonl", 3)
    result = _cli("replay", str(out))
    output = result.stdout + result.stderr
    assert result.returncode == 2, output  # the README's exit code for a checksum mismatch
    assert "identical" not in output and "diverged" not in output and "Traceback" not in output, output
    lines = [line for line in output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and "episodes.jsonl" in lines[0], output
    assert "checksum" in lines[0] or "differs" in lines[0], output


# -- help to a pipe -------------------------------------------------------------------------

#: In a process whose stdout is a pipe: every command's help, as ``frostgym PATH --help``
#: prints it, with the help texts it must show; one JSON line per command.
SWEEP = """
import contextlib, io, json, sys
from typer.main import get_command
from frostgym.cli import app

def walk(command, path):
    yield path, command
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        yield from walk(sub, [*path, name])

real = sys.stdout
for path, command in walk(get_command(app), []):
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.suppress(SystemExit):
        app([*path, "--help"], prog_name="frostgym")
    texts = [param.help for param in command.params if getattr(param, "help", None)]
    texts.append((command.help or "").split("\\n\\n")[0])
    real.write(json.dumps({"path": path, "help": printed.getvalue(), "texts": texts}) + "\\n")
"""


def _tokens(text: str) -> list[str]:
    for char in BOX:
        text = text.replace(char, " ")
    return text.split()


def _missing(expected: str, printed: str) -> list[str]:
    """The words of ``expected`` (a help text as written: rich markup escapes, ``\\[``, read
    as what they print) that ``printed`` does not show whole."""
    shown = set(_tokens(printed))
    return [word for word in _tokens(expected.replace("\\[", "[")) if word not in shown]


def test_eval_help_to_a_pipe_is_wrapped_never_cut() -> None:
    result = _cli("eval", "--help")
    assert result.returncode == 0, result.stderr
    assert "…" not in result.stdout, result.stdout
    flat = " ".join(_tokens(result.stdout))
    assert "remote: envs on a frostgym serve --allow-oracle server (token: FROSTGYM_SERVE_TOKEN)." in flat
    assert "pip install frostgym[ray]" in flat  # brackets are text, not rich markup
    assert "'frostgym/Arithmetic-v0[level=1],frostgym/SQL-v0[level=2,max_turns=3]'" in flat
    assert "--exclude-unknown" in flat


def test_every_commands_help_to_a_pipe_shows_every_option_whole() -> None:
    result = subprocess.run(
        [sys.executable, "-c", SWEEP],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={k: v for k, v in os.environ.items() if k not in ("COLUMNS", "TERMINAL_WIDTH", "LINES")},
    )
    assert result.returncode == 0, result.stderr
    commands = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(commands) > 10 and any(c["path"] == ["eval"] for c in commands)
    for command in commands:
        where = "frostgym " + " ".join(command["path"])
        assert "…" not in command["help"], f"{where} --help:\n{command['help']}"
        for text in command["texts"]:
            missing = _missing(text, command["help"])
            assert not missing, f"{where} --help does not show {missing} of {text!r}:\n{command['help']}"
