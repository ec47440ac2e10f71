"""The verl adapter's tests (``verl_suite.py``), in a process of their own with verl on its path.

``make install`` puts verl 0.9.1 and what its agent loop imports in ``.venv/verl-site``, apart from
the venv's packages: hydra (which verl's loop imports) needs ANTLR 4.9, while the math grader's
parser (math-verify) runs on the venv's ANTLR 4.13, and a grader's dependencies must not change
because a trainer's adapter is installed. So only this child process sees verl's packages.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VERL_SITE = Path(sys.prefix) / "verl-site"


@pytest.mark.slow
def test_verl_suite_in_its_own_process() -> None:
    if not (VERL_SITE / "verl").is_dir():
        pytest.skip(f"verl is not installed in {VERL_SITE} (make install installs it)")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(VERL_SITE), os.environ.get("PYTHONPATH", "")])}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist"]
    command += ["tests/integrations/verl_suite.py"]
    run = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    assert " passed" in run.stdout and "skipped" not in run.stdout.splitlines()[-1], run.stdout[-2000:]
