"""The verifier's test cases on disk (tests/verifier_cases): tasks and candidate solutions by name."""

from __future__ import annotations

from pathlib import Path

from tritonrl_lib.tasks.task import Task

CASES = Path(__file__).parent / "verifier_cases"


def task(name: str, level: int = 1) -> Task:
    """tests/verifier_cases/tasks/<name>.py as a Task of `level` (2 and up: the fusion policy)."""
    return Task(id=f"test/{name}", level=level, name=name, source=(CASES / "tasks" / f"{name}.py").read_text())


def candidate(name: str) -> str:
    """tests/verifier_cases/candidates/<name>.py, the solution's source."""
    return (CASES / "candidates" / f"{name}.py").read_text()


class PassEverything:
    """A verifier pool whose verdicts pass every candidate: what a caller keeps then is its own order alone."""

    size = 2

    def map(self, tasks, completions, progress=False, desc="verify"):
        from tritonrl_lib.verify.verdict import Verdict

        return [Verdict(correct=True, reason="ok") for _ in tasks]
