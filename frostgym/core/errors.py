"""Every error frostgym raises on purpose, in one module under one base, ``FrostgymError``
(Gymnasium's ``error.py`` is the model). Bad agent *output* is never an exception: it becomes
an error observation and a graded failure. These are for misuse of the API, for failures a
runner records as an episode's drop (each declares its ``drop_class``), and for what stops a
command (a backend that is gone, a card that was edited), said in one line.

Each class also derives from the built-in a caller would catch without knowing frostgym
(``ValueError`` for a bad value, ``ConnectionError`` for a lost server, ...). Two kinds stay in
their modules, as they are not frostgym's to raise to a caller: the sandbox's own protocol
errors (``frostgym.sandbox.forkserver`` runs inside the sandbox, without frostgym) and the
replayed HTTP APIs' answers (``frostgym.tools.http.apis``), plus private control-flow
exceptions (a leading ``_``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

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


# -- misuse of the API: what a caller sent, or asked for, that cannot be -------------------


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


class EnvArgumentError(FrostgymError, ValueError):
    """An env was asked to be made with an argument it does not take, or with a value that is
    not of the argument's declared type (``frostgym.core.arguments``). The message names the
    argument and the type expected."""


class NonFiniteNumberError(FrostgymError, ValueError):
    """A number from outside (a request body, a JSON option) that is NaN or infinite
    (``frostgym.core.finite_json``)."""


class EnvSpecError(FrostgymError, ValueError):
    """An env spec that cannot be read: it says which one and why."""


class FixtureMismatchError(FrostgymError, RuntimeError):
    """The task data on this machine does not hash to the locked value.

    Raised instead of silently serving different episodes than other machines would.
    """


class ModelNotFoundError(FrostgymError, FileNotFoundError):
    """The model path does not exist locally; frostgym never downloads models."""


class ModelSpecError(FrostgymError, ValueError):
    """A spec given where frostgym calls a model itself (a user simulator, an LLM judge:
    ``frostgym.models``) that names no model: a scripted or replayed agent (``oracle``,
    ``random``, ``replay:``), an unknown spec, or an ``hf:`` directory that is missing. The
    message names the spec and why."""


class BFCLNotInstalledError(FrostgymError, ImportError):
    """bfcl-eval (its data files) is not installed in this environment."""


class MultiTurnNotSupportedError(FrostgymError, ValueError):
    """The env needs tool results between turns, which this integration does not provide."""


class PrivateSplitError(FrostgymError, ValueError):
    """A training helper was asked for the ``private`` split without ``allow_private=True``.
    The private split is held out to measure contamination and overfitting (a card's gap
    between public and private tasks); a model trained on it has no such measure left, so
    training on it takes an explicit opt-in (``frostgym.train.session.check_training_split``)."""


class UserError(FrostgymError):
    """Something the user can fix, said in one line by the command line (no traceback)."""


# -- failures a runner records as drops (each declares its ``drop_class``) -----------------


class GraderError(FrostgymError, RuntimeError):
    """A grader raised instead of returning a grade: a bug in the grader or its task
    data, never the agent's fault."""

    drop_class: DropClass | None = "grader_error"
    stage: Stage | None = "grade"


class SecondPartyError(FrostgymError, RuntimeError):
    """A model an env calls itself (a simulated customer) gave no reply: its call was not in
    the cache in ``replay`` mode (``replay_miss``) or failed (``infra_error``). Never the
    agent's failure: the episode is a drop of that class."""

    def __init__(self, message: str, drop_class: DropClass) -> None:
        super().__init__(message)
        self.drop_class = drop_class


class SandboxTimeoutError(FrostgymError, RuntimeError):
    """Untrusted code ran past its wall-clock or CPU limit and was killed."""

    drop_class: DropClass | None = "sandbox_timeout"


class SandboxMemoryError(FrostgymError, RuntimeError):
    """Untrusted code ran past its memory limit and was killed."""

    drop_class: DropClass | None = "sandbox_oom"


class SandboxCrashError(FrostgymError, RuntimeError):
    """The sandbox itself failed (could not start, lost its worker): infrastructure."""

    drop_class: DropClass | None = "infra_error"


class SandboxUnavailableError(SandboxCrashError):
    """This backend cannot run on this machine (missing tool, no engine, no privilege)."""


class ServerLostError(SandboxCrashError):
    """The fork server died, broke the protocol, or could not set a job up: the job has
    no verdict. Infrastructure, never the code's doing (a runner drops the episode as
    ``infra_error`` and retries it); the server is respawned for the next job."""


class RemoteEnvError(FrostgymError, RuntimeError):
    """An env exception that could not travel back as itself (it does not pickle). It keeps
    the original's drop class and stage, so the runner classifies it the same way."""

    def __init__(self, message: str, drop_class: DropClass | None, stage: Stage | None) -> None:
        super().__init__(message)
        if drop_class is not None:
            self.drop_class = drop_class
        if stage is not None:
            self.stage = stage


class JudgeError(FrostgymError, RuntimeError):
    """An LLM judge (``frostgym.graders.judge``) gave no verdict, so the episode has no grade:
    never a 0 for the agent. ``drop_class`` says why: ``grader_error`` for a reply that is not
    a verdict in the declared format, ``replay_miss`` for a call the judge cache does not hold
    in ``replay`` mode, ``infra_error`` for a call that failed. ``key`` is the judge call's
    key and ``reply`` the judge's raw reply (None when there was none)."""

    stage: Stage | None = "grade"

    def __init__(
        self, message: str, drop_class: DropClass, *, key: str | None = None, reply: str | None = None
    ) -> None:
        super().__init__(message)
        self.drop_class = drop_class
        self.key = key
        self.reply = reply

    def __reduce__(self) -> tuple[Any, ...]:  # keeps its drop class across processes
        return (_judge_error, (str(self), self.drop_class, self.key, self.reply))


def _judge_error(message: str, drop_class: DropClass, key: str | None, reply: str | None) -> JudgeError:
    return JudgeError(message, drop_class, key=key, reply=reply)


# -- backends: where a run's envs live -----------------------------------------------------


class BackendError(FrostgymError, ValueError):
    """A run's backend (``frostgym.run.backends``) cannot be opened: options that do not fit
    it, a missing extra, nothing answering at its address, no room for its workers. The
    message says what to do."""


class BackendLostError(FrostgymError, ConnectionError):
    """The place a run's envs live (an env server, a Ray cluster) can no longer be reached.

    Not a property of any episode, so never a drop: the runner stops, the card is closed as
    ``interrupted``, and a resume against the restored backend plays what is left. Raise it
    only once the backend itself is known to be gone (a failed health probe, a dead cluster);
    a single lost connection to a backend that still answers is an episode's ``infra_error``.
    """


class BackendRefusedError(FrostgymError, ConnectionError):
    """A backend (a Ray cluster, an env server) answers but refuses this client's credentials:
    a missing or wrong token. Nothing can run until the client is given the right one, so it
    is raised before a run starts, saying which credentials were sent (never their value)."""


# -- rollout cards and what reads them -----------------------------------------------------


class CardCorruptError(FrostgymError, RuntimeError):
    """A card file does not parse, holds a line that is not a record, or does not match
    the checksums its manifest recorded. The message names the file and line."""


class CardMismatchError(FrostgymError, ValueError):
    """``--resume`` was asked to finish a card planned with different options."""


class CardLockedError(FrostgymError, RuntimeError):
    """Another process holds the card's lock, so it is writing that card: a second writer
    would interleave its lines with the first's. ``pid`` is the holder's, as the lock file
    names it (None when it names none)."""

    def __init__(self, message: str, pid: int | None = None) -> None:
        super().__init__(message)
        self.pid = pid


class CardNotCompleteError(FrostgymError, ValueError):
    """A card that is not ``complete`` (interrupted, or still being written) was compared:
    its files hold only part of its plan, and more than the manifest it last closed with."""


class PlanMismatchError(FrostgymError, ValueError):
    """Two cards whose plans differ were compared without ``overlap``."""


class ExclusionError(FrostgymError, ValueError):
    """An exclusion file that cannot be read, or names a task its env does not have."""


class GateFileError(FrostgymError, ValueError):
    """A gates file that cannot be read as gates: named with its file and gate."""


class PriceFileError(FrostgymError, ValueError):
    """A price file that cannot be read as prices (named with its file and model), or a card
    whose model it does not price (``frostgym compare --prices``)."""


class ReportError(FrostgymError, ValueError):
    """The report cannot be made as asked (no card, gates without a baseline)."""


class ExportError(FrostgymError, ValueError):
    """The export cannot be written as asked (an output file of a format inspect does not read)."""


class InspectMissingError(FrostgymError, ImportError):
    """inspect_ai, which the export writes with, is not installed."""


# -- the env server and its clients --------------------------------------------------------


class ServeConfigError(FrostgymError, ValueError):
    """A server setting that cannot work (a limit below its minimum, an unknown env id)."""


class WireError(FrostgymError):
    """A request the server answers with an error: the HTTP ``status`` (a 4xx for anything the
    client sent, 500 only for an env that failed on a valid request), a ``code`` and a message;
    for an exception the env raised, its class name (``exception``), drop class and stage."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        exception: str | None = None,
        drop_class: str | None = None,
        stage: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.exception = exception
        self.error_drop_class = drop_class
        self.error_stage = stage

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"status": self.status, "code": self.code, "message": self.message}
        if self.exception is not None:
            body.update(exception=self.exception, drop_class=self.error_drop_class, stage=self.error_stage)
        return body


class ServedEnvError(FrostgymError, RuntimeError):
    """An error answer from an env server: ``status`` and ``code`` as the server sent them.
    An exception the remote env raised comes back as its own class when the client knows it
    (frostgym's errors, ``ValueError``, ``TypeError``, ``RuntimeError``), else as a subclass of
    this one with the same name; either way with the same message, drop class and stage."""

    status: int = 0
    code: str = ""


class RemoteConnectionError(FrostgymError, ConnectionError):
    """The server could not be reached, or the connection to it was lost (a runner files it as
    an ``infra_error``, and retries it)."""


# -- task data and training data read from outside -----------------------------------------


class ContaminationInputError(FrostgymError, ValueError):
    """A training file or report that cannot be read (missing, of an unknown format, not a
    report): the message names it and why."""


class TrainingLogError(FrostgymError, ValueError):
    """A trainer's per-step log that cannot be read (missing, not JSON, a step without an
    integer ``step`` or with a value that is not a number): the message names the file and
    the line (or the ``log_history`` entry) and why."""


class RubricError(FrostgymError, ValueError):
    """A judge rubric that cannot be used (``frostgym.graders.judge``): a TOML file that does
    not parse, a missing or unknown key, a criterion named twice, a weight or threshold out of
    range. The message names the file and the key."""


class LabelsError(FrostgymError, ValueError):
    """A labels file for ``frostgym judge-agreement`` that cannot be matched with its card: not
    there, a line that is not a label, an id named twice or not in the card, or a card with no
    judge grades. The message names the file and the line."""


class NotJSON(FrostgymError, ValueError):
    """The line is not JSON (as orjson would say): the reader skips it, as it skips any
    line orjson refuses."""


class ArgumentError(FrostgymError, ValueError):
    """The arguments do not fit the schema; the message is shown to the agent."""
