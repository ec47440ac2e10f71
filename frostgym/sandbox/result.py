"""How one sandboxed job ended, in terms a grader can map to its own statuses."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, get_args

# A lost server or a job that could not be set up has no termination: ``SandboxJob.finish``
# raises ``ServerLostError`` (infrastructure) instead.
Termination = Literal["exited", "timeout", "memory_exceeded", "output_exceeded", "crashed"]
TERMINATIONS: tuple[Termination, ...] = get_args(Termination)


@dataclass(frozen=True)
class ErrorInfo:
    """An exception raised by untrusted code, as plain text (never the object)."""

    type: str
    message: str

    @classmethod
    def from_wire(cls, data: Any) -> ErrorInfo:
        if not isinstance(data, dict):
            return cls("ProtocolError", "malformed error report")
        return cls(str(data.get("type", "Error"))[:200], str(data.get("message", ""))[:2000])


@dataclass(frozen=True)
class JobResult:
    """``termination`` says how the process ended; ``load_error`` whether the code even
    loaded. ``exit_code``/``signal`` are the raw facts behind the classification."""

    termination: Termination
    backend: str
    exit_code: int | None = None
    signal: int | None = None
    load_error: ErrorInfo | None = None
    load_stage: str | None = None
    cpu_seconds: float = 0.0
    wall_seconds: float = 0.0
    max_rss_kb: int = 0
    output: str = ""
    output_truncated: bool = False
    detail: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.termination == "exited" and self.load_error is None
