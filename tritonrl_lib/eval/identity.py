"""Which model a run's model stage is, and its name by content: a checkpoint is named by its weights'
bytes (not its path or mtime), so a copied checkpoint keeps its evaluation records and a retrained
one does not.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from ..core.config import ConfigError, RunConfig
from ..core.digests import file_sha256
from ..core.paths import RunPaths
from ..model.load import checkpoint_complete
from .errors import EvalError

# "stage" alone means a verifier funnel step (Verdict.stage); a model stage is base, sft or rl.
MODEL_STAGES = ("base", "sft", "rl")
TRAINING_NOTEBOOK = {"sft": "02_sft", "rl": "03_rl"}  # the notebook that trains each model stage


class MissingCheckpoint(EvalError, FileNotFoundError):
    """A model stage's checkpoint is not there (or its save did not finish)."""

    def __init__(self, model_stage: str, path: Path):
        self.model_stage, self.path = model_stage, path
        nb = TRAINING_NOTEBOOK.get(model_stage, "")
        super().__init__(f"no finished {model_stage} checkpoint at {path}: train it first "
                         f"(notebooks/{nb}.ipynb, or `tritonrl run --only {nb}` with the same --params and --run)")


# --------------------------------------------------------------------------- models


def model_of(cfg: RunConfig, paths: RunPaths, model_stage: str) -> tuple[str, Path | None]:
    """(model spec, adapter folder or None) of a run's model stage; MissingCheckpoint when not trained."""
    if model_stage == "base":
        return cfg.model.model, None
    if model_stage not in MODEL_STAGES:
        raise ConfigError(f"eval stage {model_stage!r} is not one of {', '.join(MODEL_STAGES)}")
    folder = paths.checkpoint(model_stage)
    if not checkpoint_complete(folder):
        raise MissingCheckpoint(model_stage, folder)
    return str(folder), folder


_WEIGHT_DIGESTS: dict[tuple[str, int, int], str] = {}


def _weights_digest(f: Path) -> str:
    """The SHA-256 of a weights file, hashed once per process while its size and mtime hold."""
    st = f.stat()
    key = (str(f.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _WEIGHT_DIGESTS:
        _WEIGHT_DIGESTS[key] = file_sha256(f)
    return _WEIGHT_DIGESTS[key]


def _weights(p: Path) -> list[Path]:
    return sorted(p.glob("*.safetensors")) + sorted(p.glob("*.bin"))


def _folder_digest(p: Path, configs: tuple[str, ...], name_configs: bool) -> str:
    """The digest of a folder's `configs` (those present; their bytes, after their file name with
    `name_configs`) and its weights' names and bytes. Both identities below are this with their own
    arguments; the bytes fed in are fixed, since records saved earlier hold the results."""
    h = hashlib.sha256()
    for name in configs:
        f = p / name
        if f.is_file():
            h.update((name.encode() if name_configs else b"") + f.read_bytes())
    for f in _weights(p):
        h.update(f"{f.name}:{_weights_digest(f)}".encode())
    return h.hexdigest()[:16]


def model_identity(spec: str) -> str:
    """A hash of what a spec loads: a folder's config/marker and weights' bytes, or the spec string
    itself (`embedded`, `tiny`, a hub id: their content is fixed by name). The weights' content, not
    their mtime: a checkpoint copied to another machine (tar, cp, rsync keep mtimes to the second at
    best) is the same model, and its evaluation records still hold."""
    p = Path(spec).expanduser()
    if spec in ("embedded", "tiny") or not p.is_dir():
        return spec
    return _folder_digest(p, ("tritonrl_model.json", "adapter_config.json", "config.json"), name_configs=False)


def weights_identity(spec: str) -> str | None:
    """A hash of what a folder computes with: its model or adapter config and its weights' bytes,
    not its marker (which names the stage and run that saved it). Two folders with the same are the
    same model whatever trained them: an RL run that kept nothing saves the SFT adapter again. None
    for a spec that is not a folder of weights."""
    p = Path(spec).expanduser()
    if not p.is_dir() or not _weights(p):
        return None
    return _folder_digest(p, ("adapter_config.json", "config.json"), name_configs=True)
