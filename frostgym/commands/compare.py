"""``frostgym compare`` and ``frostgym trend``: the decision between checkpoints, on the command line.

Why its own module: the command only parses, prints and maps the result to an exit code;
everything it reports is computed by ``frostgym.compare``. Exit codes are the contract CI
gates on: 0 promote (or no gates given), 1 block, 2 an error (a plan mismatch, an
unreadable card or gates file), with the reason in one line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from frostgym.commands.options import finite_float
from frostgym.compare.compare import compare_cards
from frostgym.compare.diagnostics import DIAGNOSTIC_METRICS
from frostgym.compare.gates import read_gates
from frostgym.compare.prices import read_prices
from frostgym.compare.tables import capability_line, comparison_tables
from frostgym.compare.training_log import TrainingLog, TrainingRules, training_diagnostics
from frostgym.compare.trend import TrendRow, trend
from frostgym.core.errors import FrostgymError

EXIT_PROMOTE, EXIT_BLOCK, EXIT_ERROR = 0, 1, 2


def _console() -> Console:
    console = Console()
    return console if console.is_terminal else Console(width=160)


def compare_cmd(
    base: Annotated[Path, typer.Argument(help="The baseline card directory.")],
    cand: Annotated[Path, typer.Argument(help="The candidate card directory.")],
    gate: Annotated[Path | None, typer.Option(help="A gates TOML file (see examples/gates.toml).")] = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="Also write the comparison as JSON here.")] = None,
    overlap: Annotated[
        bool, typer.Option(help="Compare only the episodes both plans share when the plans differ.")
    ] = False,
    prices: Annotated[
        Path | None,
        typer.Option(
            help="A price table TOML (per model id: input_per_million, output_per_million, USD): adds "
            "cost_per_episode; a card whose model it does not price is an error."
        ),
    ] = None,
) -> None:
    """Compare CAND against BASE episode by episode: every view with its paired delta, 95%
    bootstrap interval (clustered by task) and McNemar p for pass@1; outcome transitions,
    costs and diagnostics; with several samples per task, both pass@k curves, the reach sets and
    whether the candidate expanded what it can solve or compressed it; with --gate, a
    decision. Exit 0 promote, 1 block, 2 error."""
    console = _console()
    try:
        gates = read_gates(gate) if gate is not None else None
        table = read_prices(prices) if prices is not None else None
        comparison = compare_cards(base, cand, gates, overlap=overlap, prices=table)
    except (FrostgymError, OSError) as error:
        console.print(f"[red]error:[/red] {escape(str(error))}", highlight=False, soft_wrap=True)
        raise typer.Exit(EXIT_ERROR) from None
    _warn_cards(console, base, cand)
    pairing = comparison.pairing
    if pairing.base_only or pairing.cand_only:
        console.print(
            f"comparing {pairing.paired} shared episodes; only in base: {pairing.base_only}, "
            f"only in cand: {pairing.cand_only}"
        )
    for side, (model, price) in (comparison.prices or {}).items():
        console.print(
            f"price ({side}): {model}: ${price.input_per_million:g} input, "
            f"${price.output_per_million:g} output per million tokens",
            highlight=False,
            soft_wrap=True,
            markup=False,
        )
    for shown in comparison_tables(comparison):
        console.print(shown)
    console.print(capability_line(comparison), highlight=False, soft_wrap=True, markup=False)
    if json_out is not None:
        text = json.dumps(comparison.to_json(), indent=1, ensure_ascii=False, allow_nan=False)
        json_out.write_text(text + "\n", encoding="utf-8")
    if comparison.decision is not None:
        console.print(f"decision: {comparison.decision.upper()}")
        raise typer.Exit(EXIT_PROMOTE if comparison.decision == "promote" else EXIT_BLOCK)


def _warn_cards(console: Console, base: Path, cand: Path) -> None:
    """What to know before the tables: a warning line per side whose card declares its
    agent trained on the private split; the base's role (``frostgym eval --baseline-role``);
    and a warning line per part of the evaluation contract the two cards differ in
    (``frostgym.cards.contract.contract_differences``: max_turns, a limit, the tools, the
    agent's budgets), since their episodes were then not played under the same rules."""
    from frostgym.cards.card import CARD_FILE
    from frostgym.cards.contract import contract_differences, read_contract
    from frostgym.cards.store import read_json
    from frostgym.cards.summary import card_warnings

    cards = {side: read_json(directory / CARD_FILE) for side, directory in (("base", base), ("cand", cand))}
    for side, card in cards.items():  # compare_cards read them already
        for warning in card_warnings(card):
            console.print(f"[yellow]warning: {side}: {escape(warning)}[/yellow]", highlight=False, soft_wrap=True)
    role = read_contract(cards["base"])["baseline_role"]
    console.print(f"base role: {escape(str(role or 'not declared'))}", highlight=False, soft_wrap=True)
    for difference in contract_differences(cards["base"], cards["cand"]):
        console.print(f"[yellow]warning: contract: {escape(difference)}[/yellow]", highlight=False, soft_wrap=True)


_TRAINING = "Training log (with --training-log)"


def trend_cmd(
    cards: Annotated[
        list[Path] | None, typer.Argument(help="Card directories in checkpoint order (optional with --training-log).")
    ] = None,
    held_out: Annotated[
        list[str] | None, typer.Option("--held-out", help="An env id kept out of training (repeatable).")
    ] = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="Also write the rows as JSON here.")] = None,
    training_log: Annotated[
        Path | None,
        typer.Option(
            "--training-log",
            help="The trainer's per-step log: steps.jsonl (examples/grpo_math.py), TRL's trainer_state.json, "
            "or a directory holding one. Prints KL and entropy per window of steps, with their flags.",
        ),
    ] = None,
    window: Annotated[
        int,
        typer.Option(
            "--training-window", min=1, help="Steps per trailing mean of the flags.", rich_help_panel=_TRAINING
        ),
    ] = TrainingRules.window,
    entropy_fraction: Annotated[
        float,
        typer.Option(
            parser=finite_float(min=0.0, max=1.0),
            help="Entropy collapse: the trailing mean below this share of the first window's.",
            rich_help_panel=_TRAINING,
        ),
    ] = TrainingRules.entropy_fraction,
    entropy_floor: Annotated[
        float,
        typer.Option(
            parser=finite_float(min=0.0),
            help="Entropy collapse: the trailing mean below this (nats/token).",
            rich_help_panel=_TRAINING,
        ),
    ] = TrainingRules.entropy_floor,
    kl_max: Annotated[
        float,
        typer.Option(
            parser=finite_float(min=0.0),
            help="KL blow-up: the trailing mean above this (nats/token).",
            rich_help_panel=_TRAINING,
        ),
    ] = TrainingRules.kl_max,
    kl_growth: Annotated[
        float,
        typer.Option(
            parser=finite_float(min=1.0),
            help="KL blow-up: the trailing mean over this many times the window's before it (see --kl-growth-floor).",
            rich_help_panel=_TRAINING,
        ),
    ] = TrainingRules.kl_growth,
    kl_growth_floor: Annotated[
        float,
        typer.Option(
            parser=finite_float(min=0.0),
            help="KL blow-up: the growth rule counts from this trailing mean on (nats/token).",
            rich_help_panel=_TRAINING,
        ),
    ] = TrainingRules.kl_growth_floor,
) -> None:
    """One row per card of the views and diagnostics, flagging where the public reward rose
    while the private split or a held-out env fell; with --training-log, the trainer's KL to
    the reference and policy entropy per window of steps, flagging an entropy collapse or a
    KL blow-up (rules in docs/compare.md#trend)."""
    console = _console()
    try:
        if not cards and training_log is None:
            raise FrostgymError("give card directories, --training-log, or both")
        rules = TrainingRules(window, entropy_fraction, entropy_floor, kl_max, kl_growth, kl_growth_floor)
        log = training_diagnostics(training_log, rules) if training_log is not None else None
        rows = trend(cards, held_out or []) if cards else []
    except (FrostgymError, OSError, ValueError) as error:
        console.print(f"[red]error:[/red] {escape(str(error))}", highlight=False, soft_wrap=True)
        raise typer.Exit(EXIT_ERROR) from None
    if cards:
        _trend_table(console, rows, held_out or [])
    if log is not None:
        _training_table(console, log)
    if json_out is not None:
        data: dict[str, object] = {"diagnostics": list(DIAGNOSTIC_METRICS), "rows": [row.to_json() for row in rows]}
        if log is not None:
            data["training_log"] = log.to_json()
        json_out.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def _trend_table(console: Console, rows: list[TrendRow], held_out: list[str]) -> None:
    shown = ("mean_reward", "pass@1")
    table = Table("card", "episodes", *shown, "public", "private", *held_out, "hacking", "truncated", "flags")
    for row in rows:
        values = [row.views.get(name) for name in shown]
        table.add_row(
            row.card,
            str(row.episodes),
            *(_num(v) for v in values),
            _num(row.public_reward),
            _num(row.private_reward),
            *(_num(row.held_out_reward[env]) for env in held_out),
            _num(row.diagnostics["reward_hacking_rate"]),
            _num(row.diagnostics["truncation_rate"]),
            "; ".join(row.flags) or "-",
        )
    console.print(table)


def _training_table(console: Console, log: TrainingLog) -> None:
    """The log's windows (mean reward, KL, entropy) and then each flag on a line of its own."""
    table = Table("steps", "reward", "kl", "entropy", "flags", title=f"Training log: {escape(log.source)}")
    for window in log.windows():
        table.add_row(
            f"{window.first}-{window.last}" if window.steps > 1 else str(window.first),
            _num(window.reward),
            _num(window.kl),
            _num(window.entropy),
            ", ".join(flag.kind for flag in window.flags) or "-",
        )
    console.print(table)
    if not log.has("kl"):
        console.print("no KL in the log (no reference model, --beta 0): no KL flag", highlight=False)
    for flag in log.flags:
        console.print(f"[yellow]flag: {escape(flag.message)}[/yellow]", highlight=False, soft_wrap=True)
    if not log.flags:
        console.print(f"no training flag ({len(log.steps)} steps)", highlight=False)


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"
