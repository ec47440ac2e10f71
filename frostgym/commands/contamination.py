"""``frostgym contamination``: is an eval task in a training set, verbatim or nearly?

Why its own module: the command parses options, prints tables and writes the JSON; the
check is ``frostgym.contamination``'s, imported when the command runs (numpy and
datasketch are not needed by any other command). Input it cannot read (a missing file, an
unknown format, options out of range) exits 2 with the reason in one line; a bad line in
the training file is skipped and counted, never fatal.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from frostgym.commands.options import finite_float
from frostgym.core.errors import FrostgymError

if TYPE_CHECKING:
    from frostgym.contamination.hygiene import SplitPair
    from frostgym.contamination.report import Parameters, Report
    from frostgym.core.splits import Split
    from frostgym.envs.specs import EnvSpec

EXIT_ERROR = 2


def contamination_cmd(
    train: Annotated[
        Path | None,
        typer.Option(help="Training data: JSONL (.jsonl), Parquet (.parquet) or a datasets save_to_disk directory."),
    ] = None,
    env: Annotated[
        list[str] | None,
        typer.Option(help="Env ids to check (repeat, or comma-separate; 'ID\\[level=2]' for a level). Default: all."),
    ] = None,
    split: Annotated[str, typer.Option(help="Fixed splits to check, comma-separated.")] = "test,private",
    text_field: Annotated[str, typer.Option(help="The field (column) holding a document's text.")] = "text",
    ngram: Annotated[int, typer.Option(min=1, max=64, help="Words per n-gram.")] = 13,
    ngram_threshold: Annotated[
        float,
        typer.Option(
            parser=finite_float(min=0.0, max=1.0), help="Flag a task when this share of its n-grams is in one document."
        ),
    ] = 0.5,
    minhash_threshold: Annotated[
        float,
        typer.Option(
            parser=finite_float(min=0.0, max=1.0), help="Flag a task when its MinHash similarity reaches this."
        ),
    ] = 0.6,
    workers: Annotated[
        int | None, typer.Option(min=1, help="Processes scanning the training data (default: one per core).")
    ] = None,
    json_out: Annotated[
        Path | None, typer.Option("--json", help="Write the report here: one record per task plus the summary.")
    ] = None,
    self_check: Annotated[
        bool,
        typer.Option("--self", help="Check frostgym's own splits against each other instead of a training file."),
    ] = False,
    train_samples: Annotated[
        int, typer.Option(min=1, help="With --self: generated train tasks drawn per env.")
    ] = 20_000,
    show: Annotated[int, typer.Option(min=0, help="Contaminated tasks listed here (--json has all).")] = 30,
) -> None:
    """Report, for every task of the chosen envs and splits, its highest 13-gram overlap and
    MinHash similarity with one training document, the share of contaminated tasks per env
    and split, and which ones; or, with --self, how frostgym's own splits overlap."""
    console = Console() if Console().is_terminal else Console(width=160)
    try:
        from frostgym.contamination.evalset import all_env_specs
        from frostgym.contamination.report import Parameters
        from frostgym.core.splits import parse_splits
        from frostgym.envs.specs import parse_env_specs

        specs = [spec for text in env for spec in parse_env_specs(text)] if env else all_env_specs()
        parameters = Parameters(
            ngram=ngram,
            min_gram_tokens=min(Parameters.min_gram_tokens, ngram),
            ngram_threshold=ngram_threshold,
            minhash_threshold=minhash_threshold,
        )
        if self_check:
            if train is not None or json_out is not None:
                raise typer.BadParameter("--self checks frostgym's own splits: it takes no --train or --json")
            _self_check(console, specs, parameters, train_samples)
            return
        if train is None:
            raise typer.BadParameter("pass --train FILE (or --self)")
        _check(console, train, specs, parse_splits(split), parameters, text_field, workers, json_out, show)
    except (FrostgymError, ValueError, OSError) as error:
        Console(stderr=True, soft_wrap=True).print(f"[red]error:[/red] {escape(str(error))}", highlight=False)
        raise typer.Exit(EXIT_ERROR) from None


def _check(
    console: Console,
    train: Path,
    specs: list[EnvSpec],
    splits: tuple[Split, ...],
    parameters: Parameters,
    text_field: str,
    workers: int | None,
    json_out: Path | None,
    show: int,
) -> None:
    from frostgym.contamination.check import check_training, default_workers
    from frostgym.contamination.evalset import eval_tasks
    from frostgym.contamination.reading import TrainingSource

    source = TrainingSource(train, text_field=text_field)
    began = time.perf_counter()
    tasks = eval_tasks(specs, splits)
    report = check_training(source, tasks, parameters, workers=workers or default_workers())
    seconds = time.perf_counter() - began
    console.print(_summary_table(report))
    flagged = report.contaminated
    if flagged and show:
        console.print(_flagged_table(report, show))
    read = report.training
    skipped = ", ".join(f"{n} {reason}" for reason, n in read.skipped.items()) or "none"
    console.print(
        f"read {escape(read.path)} ({read.format}, {read.bytes / 2**20:.1f} MiB): {read.lines} lines, "
        f"{read.documents} documents, skipped {skipped}; {read.minhashed} documents MinHashed; "
        f"{len(report.tasks)} tasks checked in {seconds:.1f} s",
        soft_wrap=True,
    )
    for line, reason in read.skipped_examples:
        console.print(f"  skipped line {line}: {escape(reason)}")
    console.print(f"{len(flagged)} of {len(report.tasks)} tasks contaminated")
    if json_out is not None:
        report.write(json_out)
        console.print(f"report written to {escape(str(json_out))} (frostgym eval --exclude reads it)", soft_wrap=True)


def _summary_table(report: Report) -> Table:
    table = Table("env", "split", "tasks", "contaminated", "share", "without n-grams")
    for group in report.summary:
        table.add_row(
            group.env,
            group.split,
            str(group.tasks),
            str(group.contaminated),
            f"{group.share:.1%}",
            str(group.without_ngrams),
        )
    return table


def _flagged_table(report: Report, show: int) -> Table:
    flagged = report.contaminated
    title = f"contaminated tasks ({min(show, len(flagged))} of {len(flagged)} shown)"
    table = Table("env", "task", "n-gram overlap", "coverage", "MinHash", "train line", title=title)
    for task in flagged[:show]:
        table.add_row(
            task.env,
            task.task_id,
            f"{task.ngram_overlap:.2f}",
            f"{task.ngram_coverage:.2f}",
            f"{task.minhash_similarity:.2f}",
            "" if task.train_line is None else str(task.train_line),
        )
    return table


def _self_check(console: Console, specs: list[EnvSpec], parameters: Parameters, train_samples: int) -> None:
    from frostgym.contamination.hygiene import split_hygiene

    pairs: list[SplitPair] = []
    for pair in split_hygiene(specs, parameters, train_samples=train_samples):
        pairs.append(pair)
        console.print(f"  {pair.env}: {pair.train_split} -> {pair.eval_split} checked")
    table = Table(
        "env", "train side", "eval side", "train texts", "tasks", "exact copies", "flagged", "max n-gram", "max MinHash"
    )
    for pair in pairs:
        table.add_row(
            pair.env,
            pair.train_split,
            pair.eval_split,
            str(pair.train_documents),
            str(pair.tasks),
            str(pair.exact),
            f"{pair.contaminated} ({pair.contaminated / pair.tasks:.0%})",
            f"{pair.max_ngram_overlap:.2f}",
            f"{pair.max_minhash_similarity:.2f}",
        )
    console.print(table)
    console.print(
        "exact copies: eval tasks whose normalised text is a train-side text; flagged: near copies by the same "
        "measure as a training-file check (a template with other numbers counts)"
    )
