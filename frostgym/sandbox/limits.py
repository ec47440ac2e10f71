"""What a task may use. One set of numbers, enforced the same way by every backend."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

MiB = 1024 * 1024


@dataclass(frozen=True)
class SandboxLimits:
    """Limits for one task.

    The CPU budget is the limit that decides ``timeout``: CPU seconds do not stretch when
    the machine is loaded, wall seconds do (evalplus #5, #294). The wall limit only
    catches code that sleeps or blocks; by default it is twice the CPU budget plus 2 s.
    """

    cpu_seconds: float = 3.0
    wall_seconds: float | None = None
    memory_bytes: int = 512 * MiB
    processes: int = 16
    open_files: int = 64
    file_bytes: int = 8 * MiB
    output_bytes: int = 64 * 1024
    value_bytes: int = 8 * MiB

    def __post_init__(self) -> None:
        if self.cpu_seconds <= 0:
            raise ValueError("cpu_seconds must be positive")
        if self.wall_seconds is not None and self.wall_seconds <= 0:
            raise ValueError("wall_seconds must be positive")
        for name in ("memory_bytes", "processes", "open_files", "file_bytes", "output_bytes", "value_bytes"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive")

    @property
    def wall_budget(self) -> float:
        return self.wall_seconds if self.wall_seconds is not None else 2 * self.cpu_seconds + 2.0

    def wire(self) -> dict[str, Any]:
        """The form the fork server reads."""
        data = asdict(self)
        data["wall_seconds"] = self.wall_budget
        return data
