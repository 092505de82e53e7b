"""The development set (`tasks/devset/`): 50 tasks written by hand for this project, in many hands'
styles, without reference to the SFT generator or to KernelBench (its README says how). It is what
SFT's settings (rank, epochs, data mix) are chosen on, so that choice never looks at the benchmark
reported on, nor rewards the generator's own surface form. The files hold full sizes; "small"
rewrites each task's constants to the manifest's interpreter-sized ones.
"""

from __future__ import annotations

import json
from pathlib import Path

from .kb_format import rewrite_constants
from .task import Task

DEVSET_DIR = Path(__file__).with_name("devset")
MANIFEST_PATH = DEVSET_DIR / "manifest.json"


def load_devset(size: str = "full") -> list[Task]:
    """Every development task (sorted by level, then name), at full or small sizes, each with its
    reference solution where the set has one."""
    entries = json.loads(MANIFEST_PATH.read_text(encoding="utf-8"))["tasks"]
    tasks = []
    for e in entries:
        source = (DEVSET_DIR / e["file"]).read_text(encoding="utf-8")
        if size == "small" and e.get("small"):
            source = rewrite_constants(source, e["small"])
        solution = (DEVSET_DIR / e["solution"]).read_text(encoding="utf-8") if e.get("solution") else None
        tasks.append(Task(id=e["id"], level=int(e["level"]), name=e["name"], source=source, category=e["category"],
                          origin="devset", description=e.get("description", ""), reference_solution=solution,
                          meta={"size": size}))
    return sorted(tasks, key=lambda t: (t.level, t.name))
