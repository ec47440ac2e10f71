"""Exceptions a caller can catch by kind. Bad agent *output* is never an exception:
it becomes an error observation and a graded failure. These are for misuse of the API."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gymnasium.error import ResetNeeded

if TYPE_CHECKING:
    from frostgym.core.episode import DropClass, Stage


class FrostgymError(Exception):
    """Base class of every error raised on purpose by frostgym.

    An error that ends an episode declares how a runner files it (``Drop``): its
    ``drop_class`` (None: the default of the stage it was raised at, ``infra_error`` for
    the env, ``agent_error`` for the agent) and its ``stage`` (None: where it was raised).
    A class declares them; an instance may carry its own (an error from another process).
    """

    drop_class: DropClass | None = None
    stage: Stage | None = None


class InvalidActionError(FrostgymError, TypeError):
    """The action is not of a type the env accepts (e.g. an int instead of a string).

    The episode state is left untouched, so the caller can fix the call and step again.
    A runner files it as the agent's failure: its policy emitted the unusable action.
    """

    drop_class: DropClass | None = "agent_error"


class EpisodeNotActiveError(FrostgymError, ResetNeeded):
    """``step`` was called before ``reset`` or after the episode ended."""


class UnknownTaskError(FrostgymError, KeyError):
    """A task id or split that this env does not have."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0]) if self.args else ""


class FixtureMismatchError(FrostgymError, RuntimeError):
    """The task data on this machine does not hash to the locked value.

    Raised instead of silently serving different episodes than other machines would.
    """


# -- failures a runner records as drops (each declares its ``drop_class``) ------------------


class GraderError(FrostgymError, RuntimeError):
    """A grader raised instead of returning a grade: a bug in the grader or its task
    data, never the agent's fault."""

    drop_class: DropClass | None = "grader_error"
    stage: Stage | None = "grade"


class SandboxTimeoutError(FrostgymError, RuntimeError):
    """Untrusted code ran past its wall-clock or CPU limit and was killed."""

    drop_class: DropClass | None = "sandbox_timeout"


class SandboxMemoryError(FrostgymError, RuntimeError):
    """Untrusted code ran past its memory limit and was killed."""

    drop_class: DropClass | None = "sandbox_oom"


class SandboxCrashError(FrostgymError, RuntimeError):
    """The sandbox itself failed (could not start, lost its worker): infrastructure."""

    drop_class: DropClass | None = "infra_error"


class BackendLostError(FrostgymError, ConnectionError):
    """The place a run's envs live (an env server, a Ray cluster) can no longer be reached.

    Not a property of any episode, so never a drop: the runner stops, the card is closed as
    ``interrupted``, and a resume against the restored backend plays what is left. Raise it
    only once the backend itself is known to be gone (a failed health probe, a dead cluster);
    a single lost connection to a backend that still answers is an episode's ``infra_error``.
    """


class EnvArgumentError(FrostgymError, ValueError):
    """An env was asked to be made with an argument it does not take, or with a value that is
    not of the argument's declared type (``frostgym.core.arguments``). The message names the
    argument and the type expected."""


class CardLockedError(FrostgymError, RuntimeError):
    """Another process holds the card's lock, so it is writing that card: a second writer
    would interleave its lines with the first's. ``pid`` is the holder's, as the lock file
    names it (None when it names none)."""

    def __init__(self, message: str, pid: int | None = None) -> None:
        super().__init__(message)
        self.pid = pid


class BackendRefusedError(FrostgymError, ConnectionError):
    """A backend (a Ray cluster, an env server) answers but refuses this client's credentials:
    a missing or wrong token. Nothing can run until the client is given the right one, so it
    is raised before a run starts, saying which credentials were sent (never their value)."""
