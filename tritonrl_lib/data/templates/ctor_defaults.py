"""Defaults on a Level-2 reference's trailing constructor arguments (`eps=1e-05, bias_shape=(16, 1, 1)`).

20 of KernelBench's 100 Level-2 modules give their trailing arguments defaults, some of them tuples
(`bias_shape=(1,)`). A model that never saw one miscounts the signature's brackets when it copies it:
held-out KernelBench `97_` was answered `divide_value=1.0)):` in every sample of three trainings. A share
of the chain references take defaults on a trailing run of the chain's own arguments; get_init_inputs
still passes every argument, so a default is never what the module runs with.
"""

from __future__ import annotations

import random

DEFAULTS_SHARE = 0.3  # references whose trailing chain arguments have defaults


def trailing_defaults(rng: random.Random, params: list[tuple[str, str]], own: list[tuple[str, str]],
                      values: dict[str, object]) -> dict[str, str]:
    """{argument: its default as written} for a trailing run of `params` that are all `own` (the chain's
    arguments) with a value in `values`; {} in most references. A value that is an expression of other
    constants (`(out_channels, 1, 1)`) is written as the literal it comes to."""
    if rng.random() >= DEFAULTS_SHARE:
        return {}
    run: list[str] = []
    for param in reversed(params):
        if param not in own or param[0] not in values:
            break
        run.append(param[0])
    if not run:
        return {}
    names = run[: rng.randint(1, len(run))]
    numbers = {k: v for k, v in values.items() if isinstance(v, (int, float))}
    out = {}
    for n in names:
        v = values[n]
        if not isinstance(v, (int, float)):  # a shape written from the size constants
            v = eval(repr(v), {"__builtins__": {}}, numbers)  # noqa: S307 (the template's own text)
        out[n] = repr(tuple(v) if isinstance(v, list) else v)
    return out
