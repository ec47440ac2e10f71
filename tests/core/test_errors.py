"""Every exception class the package defines for callers is a ``FrostgymError``, so one
``except FrostgymError`` catches all that frostgym raises on purpose; each keeps its stdlib
(or httpx) base too, so code that caught it by that base still does.

Exempt, and why:
- ``frostgym.sandbox.forkserver``'s ``FrameError`` and ``ValueTooLarge``: the module runs
  inside the sandbox as a standard-library-only script (it imports nothing from frostgym).
  The host client catches them wherever they cross into the host and raises its own
  (``CallError``, ``ServerLostError``, ``SandboxUnavailableError``) instead.
- ``frostgym.code.harness.CandidateFailed``: a ``BaseException`` on purpose, so a test's
  own ``except Exception`` cannot swallow it; ``run_tests`` catches it and counts a failure.
- Private classes (a leading underscore): a module's own control flow, never raised to a caller.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import pkgutil
import sys

import httpx
import pytest

import frostgym
from frostgym.code.harness import CandidateFailed
from frostgym.core.errors import ArgumentError, FrostgymError, RemoteEnvError, SandboxUnavailableError, ServerLostError
from frostgym.sandbox.client import CallError
from frostgym.sandbox.forkserver import FrameError, ValueTooLarge
from frostgym.sandbox.result import ErrorInfo
from frostgym.tools.http.apis.common import ApiError
from frostgym.tools.http.arguments import check_arguments
from frostgym.tools.http.transports import NetworkBlockedError, offline_client
from tests.code_helpers import FAST_LIMITS, open_sandbox

EXEMPT: frozenset[type[BaseException]] = frozenset({FrameError, ValueTooLarge, CandidateFailed})


#: Modules built on a package installed apart from the venv (verl, in ``.venv/verl-site``: see
#: docs/trainers/verl.md), walked only where that package imports.
APART: dict[str, str] = {"frostgym.integrations.verl": "verl"}


def _public_exception_classes() -> list[type[BaseException]]:
    for info in pkgutil.walk_packages(frostgym.__path__, "frostgym."):
        try:
            importlib.import_module(info.name)
        except ImportError:
            if info.name not in APART or importlib.util.find_spec(APART[info.name]) is not None:
                raise
    found = []
    for name, module in sorted(sys.modules.items()):
        if name != "frostgym" and not name.startswith("frostgym."):
            continue
        for attribute, value in vars(module).items():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__ == name
                and not attribute.startswith("_")
            ):
                found.append(value)
    return found


def test_every_public_exception_class_is_a_frostgym_error() -> None:
    classes = _public_exception_classes()
    assert len(classes) > 20  # the walk found the package's errors, not nothing
    outside = [
        f"{c.__module__}.{c.__qualname__}" for c in classes if c not in EXEMPT and not issubclass(c, FrostgymError)
    ]
    assert not outside, f"not FrostgymError subclasses: {outside}"


@pytest.mark.parametrize(
    ("error", "base"),
    [
        (RemoteEnvError("x", "infra_error", None), RuntimeError),
        (ArgumentError("x"), ValueError),
        (NetworkBlockedError("x"), httpx.TransportError),
        (SandboxUnavailableError("x"), RuntimeError),
        (ServerLostError("x"), RuntimeError),
        (CallError(ErrorInfo("KeyError", "x")), Exception),
        (ApiError(404, "not_found", "x"), Exception),
    ],
)
def test_each_keeps_its_old_base(error: BaseException, base: type[BaseException]) -> None:
    assert isinstance(error, FrostgymError) and isinstance(error, base)


def test_a_remote_env_error_keeps_the_drop_class_it_carries() -> None:
    error = RemoteEnvError("ValueError: boom", "grader_error", "grade")
    assert error.drop_class == "grader_error" and error.stage == "grade"


def test_argument_errors_reach_a_caller_as_frostgym_errors() -> None:
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    with pytest.raises(FrostgymError, match="missing required argument"):
        check_arguments(schema, {})


def test_a_request_past_replay_raises_a_frostgym_error_that_httpx_callers_still_catch() -> None:
    with offline_client() as client, pytest.raises(NetworkBlockedError) as raised:
        client.get("https://api.weather.frostgym.test/v1/current?city=Oslo")
    assert isinstance(raised.value, FrostgymError) and isinstance(raised.value, httpx.TransportError)


def test_wire_errors_never_cross_into_the_host() -> None:
    """An argument the wire cannot carry, and a value the job returns over the limit, come
    back as ``CallError`` (the forkserver's ``FrameError`` stays inside the client)."""
    box = open_sandbox("jail")
    try:
        with box.job("def f(x):\n    return x\ndef big():\n    return 'x' * 10**7\n", FAST_LIMITS) as job:
            with pytest.raises(CallError, match="ArgumentError"):
                job.call("f", object())
            with pytest.raises(CallError) as raised:
                job.call("big")
        assert isinstance(raised.value, FrostgymError) and not isinstance(raised.value, FrameError)
        assert job.finish().termination == "output_exceeded"
    finally:
        box.close()
