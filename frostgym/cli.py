"""The ``frostgym`` command line."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import gymnasium
import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from typer import rich_utils

from frostgym.commands.calibrate import calibrate_cmd
from frostgym.commands.compare import compare_cmd, trend_cmd
from frostgym.commands.contamination import contamination_cmd
from frostgym.commands.export import export_app
from frostgym.commands.headline import headline_cmd
from frostgym.commands.options import finite_float
from frostgym.commands.report import report_cmd
from frostgym.commands.serve import serve_cmd
from frostgym.core.env import FrozenEnv
from frostgym.core.errors import BackendLostError, BackendRefusedError, FrostgymError
from frostgym.core.splits import PUBLIC_SPLITS, parse_splits
from frostgym.core.tasks import TaskSource
from frostgym.envs.levels import env_levels
from frostgym.envs.registry import EnvEntry
from frostgym.envs.specs import EnvSpec, env_options, parse_env_specs, parse_one_env_spec
from frostgym.exclusions import UnknownPolicy
from frostgym.progress import RunProgress, TokenMeter, load_agent

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Frozen, seeded Gymnasium envs for LLM agents.")
console = Console()
if not console.is_terminal:  # logs and CI: rich would assume 80 columns and fold every table
    console = Console(width=160)
if not sys.stdout.isatty() and rich_utils.MAX_WIDTH is None:  # TERMINAL_WIDTH, when set, is the user's
    # Help (and usage errors) to a pipe or a file: at the 80 columns rich assumes there, a word
    # longer than an option's help column ends in "…". Never narrower than COLUMNS asks.
    _columns = os.environ.get("COLUMNS", "")
    rich_utils.MAX_WIDTH = max(160, int(_columns) if _columns.isdigit() else 0)


class UserError(FrostgymError):
    """Something the user can fix, said in one line by ``main`` (no traceback)."""


def _envs() -> list[tuple[EnvEntry, FrozenEnv]]:
    """One instance of every registered env: sources and families come from the envs
    themselves, so a new family needs no change here."""
    from frostgym.envs.registry import ENTRIES

    return [(e, _make(e.id)) for e in ENTRIES]


def _make(env_id: str, **kwargs: Any) -> FrozenEnv:
    """The env behind any gymnasium id (one registered outside frostgym too), unwrapped."""
    try:
        env = gymnasium.make(env_id, **kwargs).unwrapped
    except (TypeError, ValueError, gymnasium.error.Error) as error:
        raise typer.BadParameter(f"{env_id}: {error}") from error
    if not isinstance(env, FrozenEnv):
        raise typer.BadParameter(f"{env_id} is not a frostgym env")
    return env


def _json_object(text: str, option: str) -> dict[str, Any]:
    def refuse(constant: str) -> Any:
        raise ValueError(f"{constant} is not a finite number")

    try:
        value = json.loads(text, parse_constant=refuse)
    except ValueError as error:
        raise typer.BadParameter(f"{option} is not JSON: {error}") from error
    if not isinstance(value, dict):
        raise typer.BadParameter(f"{option} must be a JSON object, got {text!r}")
    return value


ENV_HELP = (
    "Env id, or several separated by commas, each with its own arguments in brackets if any: "
    "'frostgym/Arithmetic-v0\\[level=1],frostgym/SQL-v0\\[level=2,max_turns=3]' "
    "(values are JSON scalars, else strings)."
)
EXCLUDE_HELP = (
    "Tasks to leave out of the plan, declared in the card with their reasons: the JSON of frostgym contamination "
    "--json (its contaminated tasks), or one task a line, 'TASK_ID' or 'ENV_ID TASK_ID', then '# reason' if any."
)
EXCLUDE_UNKNOWN_HELP = (
    "What to do with --exclude entries that name an env of the run but no task of it (a typo, another "
    "config's id): error refuses the file, listing them; warn lists them in one line and goes on."
)
TWINS_HELP = (
    "Also play each planned task's twin (same structure, new values or names, id TASK~twin) with the same samples: "
    "summary and views show the gap between originals and twins (memorisation shows as originals >> twins)."
)
TASK_CONFIG_HELP = (
    "The task generator's config as a JSON object, e.g. '{\"max_operand\": 9}' for Arithmetic-v0; "
    "unknown keys are refused. Its tasks get tagged ids; envs without a config refuse the option."
)


@app.command("list")
def list_envs(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON (levels included) instead of a table.")] = False,
    levels: Annotated[
        bool, typer.Option("--levels", help="Also list each id's levels: what each is, its task counts, the default.")
    ] = False,
) -> None:
    """Registered env ids with family, difficulty and task counts per public split, and
    with --levels (always in --json) the levels each id takes as ``level=N``."""
    rows: list[dict[str, Any]] = []
    for e, env in _envs():
        rows.append(
            {
                "id": e.id,
                "family": env.family,
                "difficulty": env.source.difficulty,
                "tasks": _counts(env),
                "task_config": None if env.source.config_type is None else env.source.config_record(),
                "summary": e.summary,
                **_levels(e.id),
            }
        )
    if as_json:
        typer.echo(json.dumps(rows, indent=1))
        return
    table = Table("id", "family", "difficulty", *PUBLIC_SPLITS, "summary")
    for row in rows:
        table.add_row(row["id"], row["family"], row["difficulty"], *_shown(row["tasks"]), row["summary"])
    console.print(table)
    if levels:
        console.print(_levels_table(rows))


def _counts(env: FrozenEnv) -> dict[str, int | None]:
    """Tasks per public split that ``reset`` draws from (None: unbounded)."""
    return {split: env.source.drawable_size(split) for split in PUBLIC_SPLITS}


def _shown(counts: dict[str, int | None]) -> list[str]:
    return ["unbounded" if n is None else str(n) for n in counts.values()]


def _levels(env_id: str) -> dict[str, Any]:
    """An id's levels for ``list``: each with its summary and task counts, the default
    level (None: the default serves every level together, or there are none) and the note."""
    from frostgym.envs.levels import env_levels, task_source_class

    kind = task_source_class(env_id)
    found = [
        {
            "level": level.level,
            "summary": level.summary,
            "default": level.default,
            "tasks": _counts(_make(env_id, level=level.level)),
        }
        for level in env_levels(env_id)
    ]
    return {"levels": found, "default_level": kind.default_level, "levels_note": kind.levels_note}


def _levels_table(rows: list[dict[str, Any]]) -> Table:
    table = Table("id", "level", "what it is", *PUBLIC_SPLITS, "default")
    for row in rows:
        if not row["levels"]:
            table.add_row(row["id"], "-", row["levels_note"] or "no levels", *([""] * len(PUBLIC_SPLITS)), "")
            continue
        for level in row["levels"]:
            table.add_row(
                row["id"],
                str(level["level"]),
                level["summary"],
                *_shown(level["tasks"]),
                "default" if level["default"] else "",
            )
        if row["default_level"] is None and row["levels_note"]:
            table.add_row(row["id"], "all", row["levels_note"], *_shown(row["tasks"]), "default")
    return table


@app.command("eval")
def eval_cmd(
    env: Annotated[str, typer.Option(help=ENV_HELP)],
    out: Annotated[Path, typer.Option(help="Card directory to create (or to finish, with --resume).")],
    agent: Annotated[
        str, typer.Option(help="oracle | random | smollm2 | hf:PATH | openai:BASE_URL#MODEL | replay:DIR")
    ] = "oracle",
    episodes: Annotated[int | None, typer.Option(min=1, help="Tasks per env (default 20 unless --all).")] = None,
    all_tasks: Annotated[bool, typer.Option("--all", help="Every task of the split (finite splits only).")] = False,
    samples: Annotated[int, typer.Option(min=1, help="Episodes per task, each with its own seed (for pass@k).")] = 1,
    seed: Annotated[int, typer.Option(min=0, help="Run seed; every task choice and episode seed derives from it.")] = 0,
    split: Annotated[
        str, typer.Option(help="train | dev | test | private, or several comma-separated (test,private).")
    ] = "dev",
    resume: Annotated[bool, typer.Option(help="Finish the card in --out after a crash or Ctrl-C.")] = False,
    workers: Annotated[int, typer.Option(min=1, help="Threads stepping envs in parallel.")] = 1,
    batch_size: Annotated[int, typer.Option(min=1, help="Episodes in flight per batched agent call.")] = 64,
    retries: Annotated[int, typer.Option(min=0, help="Extra attempts for agent and infra errors.")] = 1,
    max_drops: Annotated[
        int | None, typer.Option(min=0, help="Cancel the rest of the plan once more episodes than this drop.")
    ] = None,
    k: Annotated[str, typer.Option(help="Extra k values for pass@k/pass^k/maj@k, comma-separated.")] = "",
    temperature: Annotated[
        float, typer.Option(parser=finite_float(min=0.0), help="Sampling temperature; 0 is greedy.")
    ] = 0.0,
    top_p: Annotated[float, typer.Option(parser=finite_float(min=0.0, max=1.0), help="Nucleus sampling mass.")] = 1.0,
    max_new_tokens: Annotated[int, typer.Option(min=1, help="Most tokens a model may generate per turn.")] = 512,
    model_batch_size: Annotated[int, typer.Option(min=1, help="Prompts per model forward batch.")] = 16,
    request_timeout: Annotated[
        float | None,
        typer.Option(
            metavar="SECONDS",
            parser=finite_float(min=0.001),
            help="openai agent: whole-request deadline, connect to last byte, per attempt (default 120).",
        ),
    ] = None,
    max_turns: Annotated[
        int | None, typer.Option(min=1, help="Override every env's turn limit (default: each env's own).")
    ] = None,
    task_config: Annotated[str | None, typer.Option(metavar="JSON", help=TASK_CONFIG_HELP)] = None,
    exclude: Annotated[Path | None, typer.Option(metavar="FILE", help=EXCLUDE_HELP)] = None,
    exclude_unknown: Annotated[UnknownPolicy, typer.Option(help=EXCLUDE_UNKNOWN_HELP)] = "error",
    twins: Annotated[bool, typer.Option("--twins", help=TWINS_HELP)] = False,
    backend: Annotated[
        str,
        typer.Option(
            help="local: envs in this process | ray: envs in Ray actors (pip install frostgym\\[ray]) | "
            "remote: envs on a frostgym serve --allow-oracle server (token: FROSTGYM_SERVE_TOKEN)."
        ),
    ] = "local",
    address: Annotated[
        str | None,
        typer.Option(
            help="With --backend ray: the cluster to join (auto, HOST:6379, ray://...); default a local Ray. "
            "With --backend remote: the server, http://HOST:PORT."
        ),
    ] = None,
    ray_actors: Annotated[
        int | None, typer.Option(min=1, help="With --backend ray: env worker actors (default: one per cluster CPU).")
    ] = None,
) -> None:
    """Run an agent on envs and write a rollout card: DIR/card.json, plan.json, episodes.jsonl, drops.jsonl."""
    from frostgym.agents.sampling import SamplingParams
    from frostgym.agents.spec import agent_summary
    from frostgym.cards.run import card_config, run_to_card
    from frostgym.envs.registry import entry
    from frostgym.runner import RunOptions

    if all_tasks and episodes is not None:
        raise typer.BadParameter("pass --episodes N or --all, not both")
    if backend not in ("local", "ray", "remote"):
        raise typer.BadParameter(f"--backend is local, ray or remote, got {backend!r}")
    if backend == "local" and (address is not None or ray_actors is not None):
        raise typer.BadParameter("--address and --ray-actors need --backend ray (or --address, --backend remote)")
    if backend == "remote" and (address is None or ray_actors is not None):
        raise typer.BadParameter("--backend remote needs --address http://HOST:PORT and takes no --ray-actors")
    if agent == "smollm2" or agent.startswith("hf:"):
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]  # the CLI prints its own progress
    try:
        sampling = SamplingParams(temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens, seed=seed)
        console.print(f"agent: {escape(agent_summary(agent, sampling))}", highlight=False, soft_wrap=True)
        specs = parse_env_specs(env)
        env_ids = [spec.env_id for spec in specs]
        for env_id in env_ids:
            entry(env_id)
        ks = [int(x) for x in k.split(",") if x.strip()]
        env_kwargs: dict[str, Any] = {} if max_turns is None else {"max_turns": max_turns}
        if task_config is not None:
            env_kwargs["task_config"] = _json_object(task_config, "--task-config")
        options = RunOptions(
            split=",".join(parse_splits(split)),
            env_kwargs=env_kwargs,
            env_options=env_options(specs),
            batch_size=batch_size,
            workers=workers,
            retries=retries,
            max_drops=max_drops,
        )
        config = card_config(
            env_ids=env_ids,
            agent_spec=agent,
            sampling=sampling.to_dict(),
            episodes=None if all_tasks else (episodes or 20),
            samples=samples,
            seed=seed,
            options=options,
            ks=ks,
            excluded=(
                None
                if exclude is None
                else _exclusions(exclude, env_ids, options.split, options.kwargs_for, exclude_unknown)
            ),
            twins=twins,
        )
        policy = load_agent(  # says what it does: converting and loading a model can take minutes
            console,
            agent,
            _TOKENS,
            sampling=sampling,
            seed=seed,
            batch_size=model_batch_size,
            request_timeout_s=request_timeout,
        )
    except (ValueError, KeyError, gymnasium.error.Error) as error:
        raise typer.BadParameter(str(error)) from error
    if backend == "local":
        _run_with_progress(lambda **hooks: run_to_card(out, policy, config, options, resume=resume, **hooks), out)
        return
    if backend == "remote":
        assert address is not None
        try:
            from frostgym.serve.backend import RemoteEnvs
            from frostgym.serve.config import token_from

            served = RemoteEnvs.connect(address, env_ids, token=token_from(None))
        except ImportError as error:
            raise typer.BadParameter(f"--backend remote needs: pip install 'frostgym[serve]' ({error})") from error
        except (ConnectionError, ValueError) as error:
            raise typer.BadParameter(f"--backend remote: {error}") from error
        with served:  # like ray, the card records no backend: it equals a local one
            _run_with_progress(
                lambda **hooks: run_to_card(out, policy, config, options, resume=resume, envs=served, **hooks), out
            )
        return
    try:
        from frostgym.integrations.ray_backend import RayEnvs
    except ImportError as error:
        raise typer.BadParameter(f"--backend ray needs ray: pip install 'frostgym[ray]' ({error})") from error
    # The card does not depend on the backend, so it records none: a ray card equals a local one.
    try:
        remote = RayEnvs.start(address, actors=ray_actors, prefetch_oracle=agent == "oracle")
    except BackendRefusedError as error:  # the cluster answers but refuses this driver's token: one line
        raise UserError(f"--backend ray: {error}") from None
    except (ConnectionError, RuntimeError) as error:  # no cluster there, or no room for the actors
        raise typer.BadParameter(f"--backend ray: {error}") from error
    with remote:
        _run_with_progress(
            lambda **hooks: run_to_card(out, policy, config, options, resume=resume, envs=remote, **hooks), out
        )


def _exclusions(
    path: Path,
    env_ids: list[str],
    split: str,
    kwargs_for: Callable[[str], dict[str, Any]],
    unknown: UnknownPolicy = "error",
) -> dict[str, Any]:
    """The card's record of the tasks ``--exclude`` takes out of this run's plan (said on the
    console); entries naming no task of the run's envs refuse the file, or with ``unknown``
    ``warn`` are said in one line and left out."""
    from frostgym.exclusions import describe_unknown, identity_record, read_exclusions, resolve

    listed = read_exclusions(path)
    resolved = resolve(listed, env_ids, split, kwargs_for, unknown=unknown)
    applied, unknowns = resolved.applied, resolved.unknown
    if unknowns:
        console.print(
            f"[yellow]--exclude {escape(str(path))}: going on without {escape(describe_unknown(unknowns))}[/yellow]",
            soft_wrap=True,
        )
    other = len(listed.entries) - len(applied) - len(unknowns)
    console.print(
        f"--exclude {escape(str(path))}: {len(applied)} tasks left out of the plan"
        + (f" ({other} entries name other envs or splits)" if listed.entries else ""),
        soft_wrap=True,  # one line, however long the path: logs grep it
    )
    return identity_record(listed, applied)


#: The tokens the eval's agent generates: ``eval`` wires its agent to it (``load_agent``)
#: and ``_run_with_progress`` shows it (one eval at a time in a process).
_TOKENS = TokenMeter()


def _run_with_progress(run: Any, out: Path) -> None:
    """Run with progress per episode and per generated token (a bar in a terminal, a plain
    line every few seconds elsewhere: ``frostgym.progress``), then print the summary;
    Ctrl-C leaves a resumable card."""
    from frostgym.cards.card import CardMismatchError, load_card
    from frostgym.cards.summary import print_summary

    progress = RunProgress(console, _TOKENS if _TOKENS.counting else None)
    try:
        with progress:
            run(on_plan=progress.on_plan, on_outcome=progress.on_outcome)
    except KeyboardInterrupt:
        console.print(f"[yellow]interrupted: finish the card with the same command plus --resume ({out})[/yellow]")
        raise typer.Exit(130) from None
    except BackendLostError as error:  # the envs' server or cluster is gone: the card is interrupted
        raise UserError(str(error)) from None
    except (CardMismatchError, FileExistsError, ValueError) as error:
        raise typer.BadParameter(str(error)) from error
    except OSError as error:  # a full disk, a vanished mount: the card is closed as interrupted if it could be
        again = "the same command plus --resume" if (out / "card.json").exists() else "the same command again"
        raise UserError(
            f"cannot write the card in {out}: {error.strerror or error}; fix that (free space), then run {again}"
        ) from error
    card, _, drops = load_card(out)
    print_summary(console, card, drops)
    console.print(f"card written to {out}")


@app.command("summary")
def summary_cmd(card_dir: Annotated[Path, typer.Argument(help="A card directory.")]) -> None:
    """Print a card's accounting, drops and headline views."""
    from frostgym.cards.card import load_card, summarize_card
    from frostgym.cards.summary import print_summary

    card, _, drops = load_card(card_dir)
    if "accounting" not in card:  # never closed: its run is going on, or was killed
        card = {**card, **summarize_card(card_dir, card, "running", torn="ignore")}
        console.print(
            f"[yellow]{card_dir} is still running, or its run was killed: figures from the files as they are now; "
            "finish it with the same eval command plus --resume[/yellow]"
        )
    print_summary(console, card, drops)


@app.command("replay")
def replay_cmd(card_dir: Annotated[Path, typer.Argument(help="A card directory.")]) -> None:
    """Re-run every recorded action in fresh envs with the recorded seeds; exit 1 on any
    difference in observations, tool results, info or grades, naming the first divergent step.
    A card whose files fail their checksums is refused first (exit 2): nothing is replayed."""
    from frostgym.cards.replay import replay_card

    report = replay_card(card_dir)  # CardCorruptError before any episode: ``main`` says it in one line, exit 2
    table = Table("env", "episodes", "identical", "diverged", "first divergence")
    by_env: dict[str, list[Any]] = {}
    for e in report.episodes:
        by_env.setdefault(e.env_id, []).append(e)
    for env_id, results in sorted(by_env.items()):
        bad = [e for e in results if e.divergence is not None]
        first = f"{bad[0].plan_id}: {bad[0].divergence}" if bad else ""
        same = sum(1 for e in results if e.divergence is None and e.not_replayable is None)
        table.add_row(env_id, str(len(results)), str(same), str(len(bad)), first)
    console.print(table)
    kept_short = [e for e in report.episodes if e.not_replayable is not None]
    if kept_short:
        console.print(
            f"{len(kept_short)} episodes were not replayed: the card keeps only a prefix of an over-long action "
            f"(first: {kept_short[0].plan_id}, {kept_short[0].not_replayable})"
        )
    if report.drops_not_replayed:
        console.print(f"{report.drops_not_replayed} dropped episodes have no final grade and were not replayed")
    if not report.ok:
        raise typer.Exit(1)
    console.print(f"replay identical: {len(report.episodes) - len(kept_short)} episodes")


@app.command("regrade")
def regrade_cmd(
    card_dir: Annotated[Path, typer.Argument(help="The card whose trajectories to regrade.")],
    out: Annotated[Path, typer.Option(help="Directory for the regraded card.")],
) -> None:
    """Apply today's graders to a card's recorded actions (no agent runs) and write a new
    card plus OUT/regrade.json, the per-episode grade diff."""
    from frostgym.cards.replay import regrade_card

    try:
        report = regrade_card(card_dir, out)
    except (FileExistsError, ValueError) as error:
        raise typer.BadParameter(str(error)) from error
    table = Table("compared", "unchanged", "changed", "graders before", "graders after")

    def fmt(graders: dict[str, list[str]]) -> str:
        return ", ".join(f"{name} {'/'.join(versions)}" for name, versions in graders.items())

    table.add_row(
        str(report["compared"]),
        str(report["unchanged"]),
        str(report["changed"]),
        fmt(report["graders_before"]),
        fmt(report["graders_after"]),
    )
    console.print(table)
    console.print(f"regraded card written to {out}; diff in {out / 'regrade.json'}")


@app.command("schema")
def schema_cmd(
    which: Annotated[str, typer.Argument(help="card | plan | episode | drop")] = "card",
) -> None:
    """Print the published JSON Schema of card.json, plan.json, an episodes.jsonl line or a drops.jsonl line."""
    from frostgym.cards.schema import SCHEMAS

    if which not in SCHEMAS:
        raise typer.BadParameter(f"expected one of {', '.join(SCHEMAS)}, got {which!r}")
    typer.echo(json.dumps(SCHEMAS[which], indent=1))


def _one_env_spec(text: str) -> EnvSpec:
    """The one env spec of ``text`` (``ID`` or ``ID[key=value,...]``), for commands that take one."""
    try:
        return parse_one_env_spec(text)
    except ValueError as error:
        raise typer.BadParameter(str(error)) from error


@app.command("lock")
def lock_cmd(
    write: Annotated[bool, typer.Option(help="Rewrite the lock files instead of checking them.")] = False,
    env: Annotated[
        str | None, typer.Option(help="Only this env id (any registered one, a family kept outside frostgym too).")
    ] = None,
    task_config: Annotated[
        str | None,
        typer.Option(metavar="JSON", help="With --env: that config of its task source (--write adds its entry)."),
    ] = None,
) -> None:
    """Check (or, after a reviewed data change, rewrite) the locked task-data hashes: each
    env's task source with its default config, each of its levels, and every other config
    its lock file holds.
    With --env, only that env's entries are checked or (--write) written into its lock."""
    from frostgym.core.fixture_lock import merge_lock, read_lock, write_lock

    if task_config is not None and env is None:
        raise typer.BadParameter("--task-config needs --env")
    spec = _one_env_spec(env) if env is not None else None
    made = [(spec.env_id, _make(spec.env_id, **spec.kwargs))] if spec is not None else [(e.id, m) for e, m in _envs()]
    # lock file -> (family, id prefix) -> source
    targets: dict[Path, dict[tuple[str, str], TaskSource]] = {}
    for env_id, instance in made:
        sources = targets.setdefault(instance.lock_file, {})
        if task_config is not None:
            kwargs = {
                **(spec.kwargs if spec is not None else {}),
                "task_config": _json_object(task_config, "--task-config"),
            }
            configured = _make(env_id, **kwargs).source
            sources[(instance.family, configured.id_prefix)] = configured
            continue
        sources[(instance.family, instance.source.id_prefix)] = instance.source
        for key, entry in read_lock(instance.lock_file).items():
            if key.startswith(f"{instance.source.name}~"):  # another config of this source
                other = _make(env_id, task_config=entry.get("config")).source
                sources[(instance.family, other.id_prefix)] = other
        if spec is None or "level" not in spec.kwargs:  # every declared level, locked yet or not
            for level in env_levels(env_id):
                if not level.default:
                    leveled = _make(env_id, **(spec.kwargs if spec is not None else {}), level=level.level).source
                    sources.setdefault((instance.family, leveled.id_prefix), leveled)
    bad = []
    for path, sources in sorted(targets.items()):
        if write:  # a whole file from every env, or one env's entries merged into it
            if env is None:
                write_lock(path, sources.values())
            else:
                for source in sources.values():
                    merge_lock(path, source)
            console.print(f"wrote {path}")
            continue
        locked = read_lock(path)
        for (family, prefix), source in sorted(sources.items()):
            entry = locked.get(prefix)
            verdict = "not locked" if entry is None else "ok" if entry == source.lock_record() else "MISMATCH"
            bad += [] if verdict == "ok" else [f"{family}/{prefix}"]
            console.print(f"{family}/{prefix}: {verdict}")
    if bad:
        raise typer.Exit(1)


@app.command("build-databases")
def build_databases_cmd(
    out: Annotated[Path, typer.Option(help="Directory to build the SQL fixture databases into.")],
) -> None:
    """Rebuild every SQL fixture database from its package and compare with the lock:
    the content hash always, the file hash byte for byte where the SQLite version matches."""
    import sqlite3

    from frostgym.sql.databases import DATABASES, build_database, content_sha256, file_sha256, read_db_lock

    lock = read_db_lock()
    table = Table("database", "content sha256", "file sha256", "verdict")
    failed = False
    for name, spec in DATABASES.items():
        path = build_database(spec, out / f"{name}.sqlite")
        content, file = content_sha256(path), file_sha256(path)
        expected = lock[name]
        same_sqlite = expected["sqlite_version"] == sqlite3.sqlite_version
        ok = content == expected["content_sha256"] and (file == expected["file_sha256"] or not same_sqlite)
        verdict = "identical" if ok and same_sqlite else "same content" if ok else "MISMATCH"
        if ok and not same_sqlite:
            verdict += (
                f" (file bytes not compared: SQLite {sqlite3.sqlite_version}, locked with {expected['sqlite_version']})"
            )
        failed |= not ok
        table.add_row(name, content[:16], file[:16], verdict)
    console.print(table)
    if failed:
        raise typer.Exit(1)


@app.command("record-cassettes")
def record_cassettes_cmd(
    check: Annotated[
        bool, typer.Option(help="Re-record into a temporary folder and compare with the committed cassettes.")
    ] = False,
    out: Annotated[
        Path | None, typer.Option(help="Write the cassettes here instead of the package's fixtures.")
    ] = None,
) -> None:
    """Re-record every ToolsHTTP-v0 cassette from the local fixture API server (loopback
    only), or, with --check, show that recording again gives identical files."""
    from frostgym.tools.http.record import check_cassettes, record_cassettes

    if check:
        problems = check_cassettes()
        for problem in problems:
            console.print(f"MISMATCH {problem}")
        if problems:
            raise typer.Exit(1)
        console.print("cassettes: re-recorded byte for byte identical to the committed ones")
        return
    for path in record_cassettes(out):
        console.print(f"wrote {path}")


app.command("compare")(compare_cmd)
app.command("trend")(trend_cmd)
app.command("calibrate")(calibrate_cmd)
app.command("contamination")(contamination_cmd)
app.add_typer(export_app, name="export")
app.command("report")(report_cmd)
app.command("headline")(headline_cmd)
app.command("serve")(serve_cmd)


def main() -> None:
    """The console entry point: errors a user can act on (a corrupt or edited card, a
    full disk, a card that is not there) print one line naming the file and exit 2."""
    try:
        app()
    except (FrostgymError, OSError) as error:  # one line on stderr, never folded, so logs can grep it
        Console(stderr=True, soft_wrap=True).print(f"[red]error:[/red] {escape(str(error))}", highlight=False)
        sys.exit(2)


if __name__ == "__main__":
    main()
