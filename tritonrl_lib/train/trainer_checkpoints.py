"""The Trainer's resumable checkpoints, `checkpoint-N/` inside its output folder (checkpoints/sft
for SFT, checkpoints/rl for GRPO): listing them, telling a complete one from one a kill cut short,
and finding the newest complete one to resume from. The Trainer names these folders; this module
only reads them."""

from __future__ import annotations

import json
import re
from pathlib import Path

CHECKPOINT_PREFIX = "checkpoint-"


def trainer_checkpoints(output_dir: Path) -> list[tuple[int, Path]]:
    """(step, folder) of every `checkpoint-N` folder, oldest first."""
    found = []
    if output_dir.is_dir():
        for p in output_dir.iterdir():
            m = re.fullmatch(rf"{CHECKPOINT_PREFIX}(\d+)", p.name)
            if m and p.is_dir():
                found.append((int(m.group(1)), p))
    return sorted(found)


def checkpoint_is_complete(folder: Path) -> bool:
    """The Trainer writes trainer_state.json last: a folder is complete when that file parses, names
    this folder's step, and the adapter, optimizer and scheduler it needs are there."""
    m = re.fullmatch(rf"{CHECKPOINT_PREFIX}(\d+)", folder.name)
    state = folder / "trainer_state.json"
    if not m or not state.is_file():
        return False
    try:
        step = json.loads(state.read_text()).get("global_step")
    except (json.JSONDecodeError, OSError):
        return False
    needed = ("adapter_config.json", "optimizer.pt", "scheduler.pt")
    has_weights = any((folder / w).is_file() for w in ("adapter_model.safetensors", "adapter_model.bin"))
    return step == int(m.group(1)) and has_weights and all((folder / n).is_file() for n in needed)


def latest_complete_checkpoint(output_dir: Path) -> Path | None:
    complete = [p for _, p in trainer_checkpoints(output_dir) if checkpoint_is_complete(p)]
    return complete[-1] if complete else None


def checkpoint_step(folder: Path) -> int:
    """The optimizer step a `checkpoint-N` folder was saved at."""
    m = re.fullmatch(rf"{CHECKPOINT_PREFIX}(\d+)", folder.name)
    if m is None:
        raise ValueError(f"{folder} is not a trainer checkpoint folder ({CHECKPOINT_PREFIX}N)")
    return int(m.group(1))
