"""The notebooks' parameters, both ways, and what every numbered notebook calls after its `parameters` cell.

A notebook's parameters cell declares `profile`, `run` and the settings it exposes (None = the
profile's value). papermill injects its `-p` values as globals after that cell; `start(globals())`
turns every such plain-valued global into a config override, so a mistyped parameter
(`-p n_sample 10`) is an error naming the closest setting instead of a silently ignored variable.
The runner goes the other way: `papermill_parameters` turns a run's overrides into those globals.

`start` also readies the kernel for reading: third-party deprecation notices (transformers, TRL,
PEFT, ...: nothing a reader of the notebook can act on) are not shown, and progress bars are
plain text (tqdm without ipywidgets would otherwise warn in every notebook).
"""

from __future__ import annotations

import types
import warnings
from typing import Any, Mapping

from ..core.config import ConfigError, RunConfig, load_config, resolve_key
from ..core.paths import RunPaths

# Names a Jupyter kernel defines by itself.
_KERNEL_NAMES = {"In", "Out", "get_ipython", "exit", "quit", "open"}
# Parameters every notebook understands besides the config's own settings.
NOTEBOOK_PARAMS = ("profile", "run")
# Libraries whose FutureWarning / DeprecationWarning notices are for their callers' authors, not
# for whoever reads a notebook's outputs.
_THIRD_PARTY = r"(transformers|trl|peft|accelerate|datasets|huggingface_hub|torch|triton)(\.|$)"


def notebook_parameters(namespace: Mapping[str, Any]) -> dict[str, Any]:
    """The plain-valued globals of a notebook namespace: its parameters and papermill's injections."""
    out = {}
    for name, value in namespace.items():
        if name.startswith("_") or name in _KERNEL_NAMES:
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
    return cfg, paths
