"""Construction-time checks of the config dataclasses (``__post_init__``), shared by every section.

A broken rule raises :class:`ragen2.errors.ConfigError` with one line naming the key, the value and what is
allowed, e.g. ``trainer.kl_type='k4': must be one of k1, k2, k3``.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from typing import Any

from ragen2.errors import ConfigError


def validate(section: str, cfg: Any, rules: list[tuple[str, Any, str]]) -> None:
    """Check a config section on construction; the first broken rule raises :class:`ConfigError`.

    Every scalar field is first checked against its annotated type (``int``, ``float``, ``bool``, ``str``),
    then each rule ``(field, predicate(value) -> bool, what is allowed)`` runs on its field's value.
    """
    hints = typing.get_type_hints(type(cfg))
    for f in dataclasses.fields(cfg):
        value, tp = getattr(cfg, f.name), hints[f.name]
        ok = {bool: lambda v: isinstance(v, bool),
              int: lambda v: isinstance(v, int) and not isinstance(v, bool),
              float: lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
              str: lambda v: isinstance(v, str)}.get(tp)
        if ok is not None and not ok(value):
            raise ConfigError(f"{section}.{f.name}={value!r}: expected {'a number' if tp is float else tp.__name__}")
        if tp is float and not math.isfinite(value):
            raise ConfigError(f"{section}.{f.name}={value!r}: expected a finite number")
    for name, predicate, allowed in rules:
        value = getattr(cfg, name)
        if not predicate(value):
            raise ConfigError(f"{section}.{name}={value!r}: must be {allowed}")


def one_of(options: tuple[str, ...]) -> tuple[Any, str]:
    return (lambda v: v in options), f"one of {', '.join(options)}"


def at_least(low: float) -> tuple[Any, str]:
    return (lambda v: v >= low), f">= {low:g}"


def between(low: float, high: float, *, open_low: bool = False, open_high: bool = False) -> tuple[Any, str]:
    def ok(v):
        return (v > low if open_low else v >= low) and (v < high if open_high else v <= high)

    return ok, f"in {'(' if open_low else '['}{low:g}, {high:g}{')' if open_high else ']'}"
