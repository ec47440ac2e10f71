"""``frostgym eval``: play an agent on envs into a rollout card, with progress, on a local,
Ray or remote backend.

Why its own module: the command reads its options into a plan (``frostgym.evaluate``'s
``card_config``), an agent and a backend, then runs with the progress display of
``frostgym.commands.progress``; what stops it is said in one line.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import gymnasium
import typer
from rich.markup import escape

from frostgym.cards.contract import BaselineRole
from frostgym.commands.common import console, json_object
from frostgym.commands.options import finite_float
from frostgym.commands.progress import RunProgress, TokenMeter, load_agent
from frostgym.core.errors import BackendError, BackendLostError, UserError
from frostgym.core.splits import parse_splits
from frostgym.envs.specs import env_options, parse_env_specs
from frostgym.evaluate.exclusions import UnknownPolicy
from frostgym.run.backends import check_backend_options, open_backend

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
TRAINED_ON_PRIVATE_HELP = (
    "Declare that the agent's model was trained on the private split (allow_private=True in frostgym's training "
    "helpers): the card records it, and summary and compare warn that its private-split scores measure nothing."
)
BASELINE_ROLE_HELP = (
    "What this card stands for as the base of a comparison: previous (the checkpoint before), sft (the SFT model "
    "the run started from), production (the model serving now) or other; recorded in the card, printed by compare."
)
TASK_CONFIG_HELP = (
    "The task generator's config as a JSON object, e.g. '{\"max_operand\": 9}' for Arithmetic-v0; "
    "unknown keys are refused. Its tasks get tagged ids; envs without a config refuse the option."
)


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
    batch_size: Annotated[int, typer.Option(min=1, help="Most episodes in flight (a batched agent: per call).")] = 64,
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
    model_batch_size: Annotated[
        int, typer.Option(min=1, help="In-process model (smollm2, hf:): prompts per forward pass.")
    ] = 16,
    concurrency: Annotated[
        int,
        typer.Option(
            min=1,
            help="openai agent: most requests in flight; each episode's request goes out as soon as it needs one,"
            " and the number in flight adapts to the server's latency and 429/503 answers below this.",
        ),
    ] = 16,
    fixed_concurrency: Annotated[
        bool,
        typer.Option(
            "--fixed-concurrency",
            help="openai agent: keep --concurrency requests in flight from the start, without adapting.",
        ),
    ] = False,
    token_ids: Annotated[
        bool,
        typer.Option(
            "--token-ids",
            help="openai agent: ask the server (vLLM) for token ids and logprobs and record them on each step"
            " (the hf agents always do).",
        ),
    ] = False,
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
    trained_on_private: Annotated[bool, typer.Option("--trained-on-private", help=TRAINED_ON_PRIVATE_HELP)] = False,
    baseline_role: Annotated[BaselineRole | None, typer.Option(help=BASELINE_ROLE_HELP)] = None,
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
    from frostgym.envs.registry import entry
    from frostgym.evaluate.run_to_card import card_config, run_to_card
    from frostgym.run.runner import RunOptions

    if all_tasks and episodes is not None:
        raise typer.BadParameter("pass --episodes N or --all, not both")
    try:
        check_backend_options(backend, address, ray_actors)
    except BackendError as error:
        raise typer.BadParameter(str(error)) from error
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
            env_kwargs["task_config"] = json_object(task_config, "--task-config")
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
            trained_on_private=trained_on_private,
        )
        policy = load_agent(  # says what it does: converting and loading a model can take minutes
            console,
            agent,
            _TOKENS,
            sampling=sampling,
            seed=seed,
            batch_size=model_batch_size,
            request_timeout_s=request_timeout,
            concurrency=concurrency,
            adaptive_concurrency=not fixed_concurrency,
            token_ids=token_ids,
        )
    except (ValueError, KeyError, gymnasium.error.Error) as error:
        raise typer.BadParameter(str(error)) from error
    with contextlib.ExitStack() as stack:
        try:
            envs = stack.enter_context(
                open_backend(
                    backend, address=address, env_ids=env_ids, ray_actors=ray_actors, prefetch_oracle=agent == "oracle"
                )
            )
        except BackendError as error:
            raise typer.BadParameter(str(error)) from error
        # BackendRefusedError (a cluster refusing this driver's token) is ``main``'s one line, exit 2
        _run_with_progress(
            lambda **hooks: run_to_card(
                out, policy, config, options, resume=resume, envs=envs, baseline_role=baseline_role, **hooks
            ),
            out,
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
    from frostgym.evaluate.exclusions import describe_unknown, identity_record, read_exclusions, resolve

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
    line every few seconds elsewhere: ``frostgym.commands.progress``), then print the summary;
    Ctrl-C leaves a resumable card."""
    from frostgym.cards.card import load_card_summary
    from frostgym.cards.summary import print_summary
    from frostgym.core.errors import CardMismatchError

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
    card, drops = load_card_summary(out)  # not its episodes: a long run's would take gigabytes
    print_summary(console, card, drops)
    console.print(f"card written to {out}")
