"""What every numbered notebook calls right after its `parameters` cell.

A notebook's parameters cell declares `profile`, `run` and the settings it exposes (None = the
profile's value). papermill injects its `-p` values as globals after that cell; `start(globals())`
turns every such plain-valued global into a config override, so a mistyped parameter
(`-p n_sample 10`) is an error naming the closest setting instead of a silently ignored variable.
"""

from __future__ import annotations

import types
from typing import Any, Mapping

from .config import ConfigError, RunConfig, RunPaths, load_config

# Names a Jupyter kernel defines by itself.
_KERNEL_NAMES = {"In", "Out", "get_ipython", "exit", "quit", "open"}
# Parameters every notebook understands besides the config's own settings.
NOTEBOOK_PARAMS = ("profile", "run")


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


def start(namespace: Mapping[str, Any]) -> tuple[RunConfig, RunPaths]:
    """Resolve the run's config from the notebook's parameters; create the run's folders."""
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
