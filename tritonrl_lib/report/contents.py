"""What a report is made of: `RunData`, everything read from a run folder, and `Report`, the built
page's tables, charts and sentences. Both the builder (`build.py`) and the page (`html.py`) use them."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .steps import StepState


@dataclass
class RunData:
    records: dict[str, dict[str, Any]]
    sft_log: list[dict[str, Any]]
    rl_log: list[dict[str, Any]]
    curriculum_log: list[dict[str, Any]]
    timings: dict[str, dict[str, Any]]
    rl_best: dict[str, Any] | None
    missing: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)  # results left out: their inputs changed since
    caveats: list[str] = field(default_factory=list)  # results kept, made otherwise than this report's settings
    steps: dict[str, StepState] = field(default_factory=dict)  # how each notebook's last run ended


@dataclass
class Report:
    html_path: Path
    charts: dict[str, Path]  # the charts drawn, saved under charts/
    tables: dict[str, list[dict[str, Any]]]
    missing: list[str]
    headline: list[str]
    stale: list[str] = field(default_factory=list)
    caveats: list[str] = field(default_factory=list)
    no_chart: dict[str, str] = field(default_factory=dict)  # chart name -> why there is none
    description: list[str] = field(default_factory=list)  # what the run was
    demonstration: bool = False
    reference: dict[str, Any] | None = None  # a real GPU run's tables, shown beside a demonstration

    def frames(self):
        """The tables as pandas DataFrames (for display in a notebook)."""
        import pandas as pd

        return {name: pd.DataFrame(rows) for name, rows in self.tables.items()}
