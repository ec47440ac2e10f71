"""The ``frostgym`` command line: it registers the commands, one module each in
``frostgym.commands``, and says what stops one in one line (``main``)."""

from __future__ import annotations

import sys

import typer
from rich.console import Console
from rich.markup import escape

from frostgym.commands.build_databases import build_databases_cmd
from frostgym.commands.calibrate import calibrate_cmd
from frostgym.commands.compare import compare_cmd, trend_cmd
from frostgym.commands.contamination import contamination_cmd
from frostgym.commands.eval import eval_cmd
from frostgym.commands.export import export_app
from frostgym.commands.headline import headline_cmd
from frostgym.commands.judge import judge_cmd
from frostgym.commands.judge_agreement import judge_agreement_cmd
from frostgym.commands.list_envs import list_envs
from frostgym.commands.lock import lock_cmd
from frostgym.commands.record_cassettes import record_cassettes_cmd
from frostgym.commands.regrade import regrade_cmd
from frostgym.commands.replay import replay_cmd
from frostgym.commands.report import report_cmd
from frostgym.commands.schema import schema_cmd
from frostgym.commands.serve import serve_cmd
from frostgym.commands.summary import summary_cmd
from frostgym.core.errors import FrostgymError

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Frozen, seeded Gymnasium envs for LLM agents.")
app.command("list")(list_envs)
app.command("eval")(eval_cmd)
app.command("summary")(summary_cmd)
app.command("replay")(replay_cmd)
app.command("regrade")(regrade_cmd)
app.command("judge")(judge_cmd)
app.command("judge-agreement")(judge_agreement_cmd)
app.command("schema")(schema_cmd)
app.command("lock")(lock_cmd)
app.command("build-databases")(build_databases_cmd)
app.command("record-cassettes")(record_cassettes_cmd)
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
