"""``frostgym calibrate``: where an agent stands on each level of an env.

Why its own module: the command parses, prints and writes JSON; the probes and the choice
of level are ``frostgym.evaluate.calibrate``'s.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from frostgym.commands.options import finite_float
from frostgym.core.errors import FrostgymError
from frostgym.envs.levels import env_levels, task_source_class
from frostgym.envs.specs import parse_one_env_spec
from frostgym.evaluate.calibrate import DEFAULT_TARGET, LevelProbe, nearest_level, probe_levels


def calibrate_cmd(
    env: Annotated[
        str, typer.Option(help="One env id, with its own arguments if any: 'frostgym/SQL-v0\\[max_turns=3]'.")
    ],
    out: Annotated[Path, typer.Option(help="Directory for the probe cards (DIR/level-N).")],
    agent: Annotated[str, typer.Option(help="oracle | random | smollm2 | hf:PATH | openai:BASE_URL#MODEL")] = "smollm2",
    levels: Annotated[str | None, typer.Option(help="Levels to probe, comma-separated (default: all).")] = None,
    episodes: Annotated[int, typer.Option(min=1, help="Tasks per level (one episode each).")] = 30,
    split: Annotated[str, typer.Option(help="The split to probe.")] = "dev",
    target: Annotated[
        float, typer.Option(parser=finite_float(min=0.0, max=1.0), help="The pass rate to look for.")
    ] = DEFAULT_TARGET,
    seed: Annotated[int, typer.Option(min=0, help="Run seed of every probe.")] = 0,
    temperature: Annotated[
        float, typer.Option(parser=finite_float(min=0.0), help="Sampling temperature; 0 is greedy.")
    ] = 0.0,
    max_new_tokens: Annotated[int, typer.Option(min=1, help="Most tokens a model may generate per turn.")] = 512,
    model_batch_size: Annotated[int, typer.Option(min=1, help="Prompts per model forward batch.")] = 16,
    resume: Annotated[bool, typer.Option(help="Finish the probe cards a killed calibration left in --out.")] = False,
    json_out: Annotated[Path | None, typer.Option("--json", help="Also write the probes as JSON here.")] = None,
) -> None:
    """Probe an agent on every level of an env and print its pass@1 per level (95% Wilson
    interval) and the level whose pass rate is nearest --target."""
    from frostgym.agents.sampling import SamplingParams
    from frostgym.agents.spec import make_agent

    try:
        spec = parse_one_env_spec(env)
        if "level" in spec.kwargs:
            raise typer.BadParameter("the levels to probe go in --levels, not in --env")
        known = [level.level for level in env_levels(spec.env_id)]
        if not known:
            note = task_source_class(spec.env_id).levels_note
            raise typer.BadParameter(f"{spec.env_id} has no levels to calibrate on" + (f": {note}" if note else ""))
        chosen = known if levels is None else [int(x) for x in levels.split(",") if x.strip()]
        unknown = sorted(set(chosen) - set(known))
        if unknown:
            raise typer.BadParameter(f"{spec.env_id} has no level {unknown}; its levels are {known}")
        sampling = SamplingParams(temperature=temperature, max_new_tokens=max_new_tokens, seed=seed)
        policy = make_agent(agent, seed=seed, sampling=sampling, batch_size=model_batch_size)
    except (ValueError, FrostgymError) as error:
        raise typer.BadParameter(str(error)) from error
    console = Console() if Console().is_terminal else Console(width=160)
    console.print(f"probing {agent} on {spec} at levels {chosen}, {episodes} tasks each ({split} split)")
    probes = probe_levels(
        spec,
        policy,
        chosen,
        agent_spec=agent,
        sampling=sampling.to_dict(),
        episodes=episodes,
        out=out,
        split=split,
        seed=seed,
        resume=resume,
        on_level=lambda p: console.print(f"  level {p.level}: {p.passed}/{p.episodes} passed"),
    )
    best = nearest_level(probes, target)
    console.print(_table(probes, best))
    if best is None:
        console.print("no level has a pass rate")
    else:
        console.print(f"nearest {target:g}: level {best.level} (pass@1 {best.pass_rate:.3f})")
    if json_out is not None:
        data = {
            "env": str(spec),
            "agent": agent,
            "target": target,
            "nearest": None if best is None else best.level,
            "levels": [p.as_json_data() for p in probes],
        }
        json_out.write_text(json.dumps(data, indent=1) + "\n")


def _table(probes: list[LevelProbe], best: LevelProbe | None) -> Table:
    table = Table("level", "episodes", "passed", "pass@1", "95% interval", "")
    for probe in probes:
        rate = "-" if probe.pass_rate is None else f"{probe.pass_rate:.3f}"
        interval = "-" if probe.interval is None else f"[{probe.interval.low:.3f}, {probe.interval.high:.3f}]"
        mark = "<- nearest" if best is not None and probe.level == best.level else ""
        table.add_row(str(probe.level), str(probe.episodes), str(probe.passed), rate, interval, mark)
    return table
