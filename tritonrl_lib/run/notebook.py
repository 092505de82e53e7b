"""The notebooks' parameters, both ways, and what every numbered notebook calls after its `parameters` cell.

A notebook's parameters cell declares `profile`, `run` and the settings it exposes (None = the
profile's value). papermill injects its `-p` values as globals after that cell; `start(globals())`
turns every such plain-valued global into a config override, so a mistyped parameter
(`-p n_sample 10`) is an error naming the closest setting instead of a silently ignored variable.
The runner goes the other way: `papermill_parameters` turns a run's overrides into those globals.

`start` also readies the kernel for reading: third-party deprecation notices (transformers, TRL,
PEFT, ...: nothing a reader of the notebook can act on) are not shown, nor bitsandbytes' notice
that an optional package for CPU 4-bit kernels is missing; progress bars are plain text (tqdm
without ipywidgets would otherwise warn in every notebook).

A notebook names its step before calling `start` (`STEP = "03_rl"`). Run on its own (papermill,
JupyterLab) rather than by `tritonrl run`, it then leaves a note for the next `tritonrl run`, and warns
before any work when `tritonrl run` had finished that step in the same run folder
(`run_state.note_alone_run`). It warns rather than writing somewhere else: a notebook reads what the
earlier steps wrote in its run folder, so a folder of its own would have nothing to start from.
"""

from __future__ import annotations

import os
import sys
import types
import warnings
from typing import Any, Mapping

from . import state as run_state
from ..core.config import ConfigError, RunConfig, load_config, resolve_key
from ..core.paths import RunPaths
from ..model.load import silence_missing_kernels_notice

# Names a Jupyter kernel defines by itself.
_KERNEL_NAMES = {"In", "Out", "get_ipython", "exit", "quit", "open"}
# Parameters every notebook understands besides the config's own settings.
NOTEBOOK_PARAMS = ("profile", "run")
# The global a notebook names its pipeline step with (not a parameter).
STEP = "STEP"
# Libraries whose FutureWarning / DeprecationWarning notices are for their callers' authors, not
# for whoever reads a notebook's outputs.
_THIRD_PARTY = r"(transformers|trl|peft|accelerate|datasets|huggingface_hub|torch|triton)(\.|$)"


def notebook_parameters(namespace: Mapping[str, Any]) -> dict[str, Any]:
    """The plain-valued globals of a notebook namespace: its parameters and papermill's injections."""
    out = {}
    for name, value in namespace.items():
        if name.startswith("_") or name in _KERNEL_NAMES or name == STEP:
            continue
        if isinstance(value, (types.ModuleType, types.FunctionType, type)) or callable(value):
            continue
        out[name] = value
    return out


def papermill_parameters(cfg: RunConfig, overrides: Mapping[str, Any]) -> dict[str, Any]:
    """What the runner passes a notebook: profile, run and each override under its bare name
    (the names `start` reads back)."""
    params: dict[str, Any] = {"profile": cfg.profile, "run": cfg.run_name}
    for key, value in overrides.items():
        path = resolve_key(key)
        if path[-1] in NOTEBOOK_PARAMS:
            continue
        params[path[-1]] = value
    return params


def quiet_kernel() -> None:
    """Keep notebook outputs to what the reader can use (see the module docstring)."""
    for category in (FutureWarning, DeprecationWarning):
        warnings.filterwarnings("ignore", category=category, module=_THIRD_PARTY)
    # tqdm.auto picks text bars when ipywidgets is missing, and says so once per kernel
    warnings.filterwarnings("ignore", message="IProgress not found")
    silence_missing_kernels_notice()  # before anything imports transformers (and with it bitsandbytes)


def start(namespace: Mapping[str, Any]) -> tuple[RunConfig, RunPaths]:
    """Resolve the run's config from the notebook's parameters; create the run's folders."""
    quiet_kernel()
    params = notebook_parameters(namespace)
    profile = params.pop("profile", None)
    run = params.pop("run", None)
    overrides = {k: v for k, v in params.items() if v is not None}
    if run:
        overrides["run"] = run
    try:
        cfg = load_config(profile, overrides=overrides)
    except ConfigError as e:
        # Name the notebook's own parameter vocabulary in the message: that is what the user typed.
        raise ConfigError(f"{e}\n(notebook parameters are RunConfig settings; "
                          "see `tritonrl config --list`)") from None
    paths = cfg.paths.ensure()
    cfg.save(paths.config_snapshot)
    step = namespace.get(STEP)
    if isinstance(step, str) and step and os.environ.get(run_state.RUNNER_STEP) != step:
        warning = run_state.note_alone_run(cfg, paths, step)
        if warning:
            print(warning, file=sys.stderr, flush=True)
    return cfg, paths
