"""KernelBench's constructor for the Level-1 convolutions (conv.py): trailing parameters with defaults.

KernelBench writes its Level-1 convolution modules as `__init__(self, in_channels: int, out_channels: int,
kernel_size: int, stride: int = 1, padding: int = 0, dilation: int = 1, groups: int = 1, bias: bool = False)`
(transposed ones with `output_padding: int = 0` after the padding; tuple-typed `stride: tuple = (1, 1)`
beside a tuple kernel size; depthwise ones without `out_channels` and `groups`; the pointwise one with only
`bias`) and its `get_init_inputs()` passes a leading prefix: the required sizes, sometimes some of the
defaulted settings as module-level constants, the rest taking their defaults. A model trained only on
constructors that take every setting as a required parameter (and get passed all of them) writes
`ModelNew.__init__(self, in_channels, out_channels, kernel_size, stride, padding, bias)` and fails to build
on those tasks, or uses `dilation` where its signature has none. About half the examples draw this form;
the settings a prefix leaves out are, in those examples, at their defaults.
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass

KB_SHARE = 0.5  # examples with KernelBench's constructor
PLAIN_SHARE = 0.5  # of those, a plain convolution (every setting at its default: `[in, out, kernel_size]`)
BIAS_KEPT = 0.4  # of those drawn with a bias, the ones keeping it (KernelBench's bias is nearly always off)
TUPLE_SHARE = 0.6  # with an asymmetric kernel, tuple-typed settings (`stride: tuple = (1, 1)`)
DROP_SHARE = 0.25  # a setting at its default left out of the signature (KernelBench's dilated ones have no groups)
EXTRA_SHARES = (0.55, 0.25, 0.2)  # defaulted settings passed beyond the last one needed: 0, 1, 2

# the settings a kind's constructor takes, in KernelBench's order (`bias` last, always)
ORDER = {"standard": ("stride", "padding", "dilation", "groups"),
         "transposed": ("stride", "padding", "output_padding", "dilation", "groups"),
         "depthwise": ("stride", "padding", "dilation"),
         "separable": ("stride", "padding", "dilation"),
         "pointwise": ()}
DEFAULTS = {"stride": 1, "padding": 0, "output_padding": 0, "dilation": 1, "groups": 1, "bias": False}
ALWAYS = ("stride", "padding")  # never left out of a signature


@dataclass(frozen=True)
class Ctor:
    """A KernelBench constructor's defaulted parameters and what get_init_inputs passes of them."""

    params: list[tuple[str, str]]  # (name, annotation), in order; `bias` last
    defaults: dict[str, str]  # name -> its default as written
    passed: list[tuple[str, object]]  # the leading defaulted parameters get_init_inputs passes: (constant, value)

    @property
    def settings(self) -> list[str]:
        """The parameters other than `bias`."""
        return [n for n, _ in self.params if n != "bias"]

    def forms(self, settings: list[tuple[str, object, object]]) -> tuple[list[str], dict[str, str], list[str]]:
        """(the nn.ConvNd call's keyword arguments, setting -> how the reference refers to it, the
        constructor's lines storing the settings) for the (name, value, default) settings of the kind:
        those of the signature by name, the others (left out) as their defaults."""
        exprs = {"groups": "1", **{n: repr(d) for n, _, d in settings}, **{n: n for n in self.settings}}
        kwargs = [f"{n}={n}" for n in self.settings] + ["bias=bias"]
        return kwargs, exprs, [f"self.{n} = {n}" for n in self.settings]


def draw_kind(rng: random.Random, setup):
    """(KernelBench constructor or not, the setup): in that form, a share of the setups become plain
    convolutions and most lose their bias, as KernelBench's do."""
    if rng.random() >= KB_SHARE:
        return False, setup
    if setup.kind != "pointwise" and rng.random() < PLAIN_SHARE:
        setup = dataclasses.replace(setup, stride=1, padding=0, dilation=1, groups=1, out_pad=0)
    if setup.bias and rng.random() >= BIAS_KEPT:
        setup = dataclasses.replace(setup, bias=False)
    return True, setup


def draw_ctor(rng: random.Random, setup, tuple_kernel: bool) -> Ctor:
    """The defaulted parameters of the setup's kind and the prefix get_init_inputs passes: every parameter
    up to the last one off its default, and sometimes one or two more at their defaults (never `bias` at
    its default); everything after takes the default, which is the setup's value there."""
    values = {"stride": setup.stride, "padding": setup.padding, "output_padding": setup.out_pad,
              "dilation": setup.dilation, "groups": setup.groups, "bias": setup.bias}
    as_tuple = tuple_kernel and rng.random() < TUPLE_SHARE
    names = [n for n in ORDER[setup.kind]
             if n in ALWAYS or values[n] != DEFAULTS[n] or rng.random() >= DROP_SHARE] + ["bias"]

    def typed(name: str, value: object) -> tuple[str, object]:
        if name == "bias":
            return "bool", value
        if name == "groups" or not as_tuple:
            return "int", value
        return "tuple", (value,) * setup.nd

    params = [(n, typed(n, 0)[0]) for n in names]
    defaults = {n: repr(typed(n, DEFAULTS[n])[1]) for n in names}
    needed = max((i + 1 for i, n in enumerate(names) if values[n] != DEFAULTS[n]), default=0)
    extra = rng.choices(range(len(EXTRA_SHARES)), weights=EXTRA_SHARES)[0]
    count = max(needed, min(needed + extra, len(names) - 1))  # a bias at its default is never passed
    passed = [(n, typed(n, values[n])[1]) for n in names[:count]]
    return Ctor(params, defaults, passed)
