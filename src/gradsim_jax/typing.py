"""Shared type aliases and the frozen-pytree decorator used by every container of the package.

`Array` is any array-like a JAX function accepts (jax.Array, numpy array, Python scalar); shapes and units
are written in docstrings (`x: [n, 3] m`). `pytree_dataclass` makes a frozen dataclass a pytree whose
fields are data (traced, differentiated) except those named in `meta` (static: hashable Python values,
part of the compiled program's identity).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax

Array = Any


def pytree_dataclass(cls=None, *, meta=()):
    """Freeze `cls` and register it as a pytree whose fields are data, except those named in `meta`."""

    def wrap(c):
        c = dataclasses.dataclass(frozen=True)(c)
        names = [f.name for f in dataclasses.fields(c)]
        return jax.tree_util.register_dataclass(
            c, data_fields=[n for n in names if n not in meta], meta_fields=list(meta)
        )

    return wrap if cls is None else wrap(cls)
