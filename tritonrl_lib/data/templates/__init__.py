"""Op templates: for every op family of tasks/families.py, a generator of (reference, solution) pairs.

`render_example(family, seed, index)` is the entry point: it draws the shape, dtype and style of
example `index` of `family` from a random stream keyed by (seed, family, index), so an example
does not depend on which other families are generated, or in what order.
"""

from __future__ import annotations

import random

from ...tasks.families import all_families, category_of, level_of_category
from . import (channel, conv, elementwise, epilogue, epilogue_reduce, loss, matmul, pooling, reduce_conv, reduce_norm,
               reduce_rows, rowwise)
from .base import DEFAULT_STYLE, DTYPES, Example, Style, TemplateInfo, draw_style


def _collect() -> dict[str, TemplateInfo]:
    out: dict[str, TemplateInfo] = {}
    for module in (elementwise, rowwise, matmul, pooling, conv, loss, channel, epilogue, epilogue_reduce, reduce_rows,
                   reduce_conv, reduce_norm):
        for info in module.templates():
            if info.family in out:
                raise RuntimeError(f"two templates for family {info.family!r}")
            out[info.family] = info
    return out


TEMPLATES: dict[str, TemplateInfo] = _collect()


def covered_families() -> list[str]:
    """Families of the shared vocabulary that have a template, in vocabulary order."""
    return [f for f in all_families() if f in TEMPLATES]


def missing_families() -> list[str]:
    return [f for f in all_families() if f not in TEMPLATES]


def level_of_family(family: str) -> int:
    return level_of_category(category_of(family))


def render_example(family: str, seed: int, index: int, half_share: float = 0.25) -> Example:
    """Example `index` of `family`, deterministic in (seed, family, index). Index 0 uses the plain
    house style; later ones vary it. About `half_share` of examples use a half-precision dtype
    where the template supports one."""
    info = TEMPLATES.get(family)
    if info is None:
        raise KeyError(f"no template for op family {family!r}; templated families: {', '.join(TEMPLATES)}")
    rng = random.Random(f"{seed}:{family}:{index}")
    style = DEFAULT_STYLE if index == 0 else draw_style(rng)
    halves = [d for d in info.dtypes if d != "float32"]
    dtype = rng.choice(halves) if halves and index > 0 and rng.random() < half_share else "float32"
    return info.render(rng, dtype, style)


__all__ = ["TEMPLATES", "DTYPES", "Example", "Style", "TemplateInfo", "covered_families", "missing_families",
           "level_of_family", "render_example"]
