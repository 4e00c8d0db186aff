"""Shared type aliases, the frozen-pytree decorator used by every container of the package, and the
routing of flat keyword shorthands into option records (`grouped_options`).

`Array` is any array-like a JAX function accepts (jax.Array, numpy array, Python scalar); shapes and units
are written in docstrings (`x: [n, 3] m`). `pytree_dataclass` makes a frozen dataclass a pytree whose
fields are data (traced, differentiated) except those named in `meta` (static: hashable Python values,
part of the compiled program's identity).
"""

from __future__ import annotations

import collections.abc
import dataclasses
from typing import Any, Iterator

import jax

Array = Any


def pytree_dataclass(cls=None, *, meta=()):
    """Freeze `cls` and register it as a pytree whose fields are data, except those named in `meta`.

    Args:
        cls: the class to decorate; None when the decorator is called with arguments
            (`@pytree_dataclass(meta=("n",))`).
        meta: names of the fields that are static (hashable Python values, part of the compiled program's
            identity) instead of data.

    Returns:
        The frozen dataclass registered as a pytree, or, when `cls` is None, the decorator that makes one.
    """

    def wrap(c):
        c = dataclasses.dataclass(frozen=True)(c)
        names = [f.name for f in dataclasses.fields(c)]
        c.__pytree_meta__ = tuple(meta)  # named_leaves skips them
        return jax.tree_util.register_dataclass(
            c, data_fields=[n for n in names if n not in meta], meta_fields=list(meta)
        )

    return wrap if cls is None else wrap(cls)


# Dotted paths name the leaves of a tree of dataclasses: "cloth.tri_ke" is `params.cloth.tri_ke`.


def named_leaves(tree, prefix: str) -> Iterator[tuple[str, Array]]:
    """(dotted name, value) of every data field of a dataclass tree, depth first, each name starting with
    `prefix` ("Params.cloth.tri_ke"); None branches and static fields (bool, str, a dataclass that is not a
    pytree, a `pytree_dataclass`'s meta fields) are skipped; an ode branch that is a dict, list or tuple names its leaves by their keys
    ("Params.ode['k']"); the leaves of the bodies dict of kinds defined outside the package are named by dotted
    paths that `get_path` follows ("Params.bodies.chain.ke").

    Args:
        tree: a dataclass instance (a tree of dataclasses such as Params).
        prefix: the start of every name ("Params"); "" names the leaves by their paths alone ("cloth.tri_ke").

    Returns:
        An iterator of (dotted name, leaf value) pairs.
    """
    meta = getattr(type(tree), "__pytree_meta__", ())
    for f in dataclasses.fields(tree):
        value = getattr(tree, f.name)
        name = f"{prefix}.{f.name}" if prefix else f.name
        if value is None or isinstance(value, (bool, str)) or f.name in meta:
            continue
        if dataclasses.is_dataclass(value) and jax.tree_util.all_leaves([value]):
            continue  # a dataclass that is no pytree is static (an ODE body's system)
        if dataclasses.is_dataclass(value):
            yield from named_leaves(value, name)
        elif f.name == "ode" and isinstance(value, (dict, list, tuple)):  # a user's pytree (an ODE body's)
            for path, leaf in jax.tree_util.tree_leaves_with_path(value):
                yield name + jax.tree_util.keystr(path), leaf
        elif f.name == "bodies" and isinstance(value, dict):  # kinds defined outside the package: dotted paths
            for path, leaf in jax.tree_util.tree_leaves_with_path(value):
                yield name + "".join(f".{k.key}" if isinstance(k, jax.tree_util.DictKey)
                                     else jax.tree_util.keystr((k,)) for k in path), leaf
        else:
            yield name, value


def get_path(tree, path: str):
    """The value at dotted `path` ("cloth.tri_ke") of a dataclass tree; a dict on the way is entered by key
    ("bodies.chain.ke": `Params.bodies["chain"].ke`).

    Args:
        tree: a dataclass instance (a tree of dataclasses such as Params).
        path: dotted field names (or dict keys) from `tree` to the value ("cloth.tri_ke").

    Returns:
        The value found at `path` (a leaf or a sub-tree).
    """
    for part in path.split("."):
        tree = tree[part] if isinstance(tree, dict) else getattr(tree, part)
    return tree


def replace_paths(tree, values: dict):
    """A copy of a dataclass tree with the leaves at dotted paths replaced: {"cloth.tri_ke": array, ...}.

    Args:
        tree: a dataclass instance (a tree of dataclasses such as Params; a dict on the way is entered by key, as
            in `get_path`); not modified.
        values: {dotted path: new value}; each path names a field of `tree` as in `get_path`.

    Returns:
        A new tree of the same dataclasses with those values in place (the other fields shared with `tree`).
    """
    nested: dict = {}
    for path, value in values.items():
        head, _, rest = path.partition(".")
        nested.setdefault(head, {})[rest] = value
    if isinstance(tree, dict):
        return {**tree, **{head: sub[""] if "" in sub else replace_paths(tree[head], sub)
                           for head, sub in nested.items()}}
    updates = {head: sub[""] if "" in sub else replace_paths(getattr(tree, head), sub) for head, sub in nested.items()}
    return dataclasses.replace(tree, **updates)


def is_concrete(*values) -> bool:
    """True when no leaf of `values` is a tracer (so it can be inspected on the host).

    Args:
        *values: any pytrees (arrays, dataclasses, Python scalars).

    Returns:
        bool, True when every leaf is a concrete value.
    """
    return not any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves(values))


def grouped_options(where: str, groups: dict, flat: dict, shorthands: dict, *, override: bool = False) -> dict:
    """The option records of a call that takes a few frozen records (`Scene.build(contact=Contact(...))`) and,
    as shorthands, their fields under flat keyword names (`Scene.build(contact_ke=...)`).

    Args:
        where: the function's name for the messages ("Scene.build").
        groups: {group keyword: (the record of defaults, the record given or None)}.
        flat: {flat keyword: value}, the shorthands given.
        shorthands: {flat keyword: (group keyword, field name)}, every shorthand the call takes.
        override: False: a shorthand given together with its record is a TypeError; True: it replaces that
            field of the record given (what `dataclasses.replace` on a record of records needs).

    Returns:
        {group keyword: record}: each record given (its shorthands applied where `override`), else the record of
        defaults with the shorthands given.

    Raises:
        TypeError: an unknown keyword (naming the valid ones), a record of the wrong class, or a shorthand given
            together with its record (unless `override`).
    """
    unknown = [name for name in flat if name not in shorthands]
    if unknown:
        valid = ", ".join(sorted([*groups, *shorthands]))
        raise TypeError(f"{where}() got an unexpected keyword argument {unknown[0]!r}; valid: {valid}")
    routed: dict = {group: {} for group in groups}
    for name, value in flat.items():
        group, field = shorthands[name]
        routed[group][field] = value
    out = {}
    for group, (default, given) in groups.items():
        kind = type(default).__name__
        if given is None:
            given = default
        elif not isinstance(given, type(default)):
            raise TypeError(f"{where}({group}=...) takes a {kind}, got {type(given).__name__}")
        elif routed[group] and not override:
            names = ", ".join(name for name in flat if shorthands[name][0] == group)
            raise TypeError(f"{where}() got {names} and {group}=...: give them in {group}={kind}(...) "
                            "or as keywords, not both")
        out[group] = dataclasses.replace(given, **routed[group]) if routed[group] else given
    return out


def registered(table: dict, key: str, entry, kind: type, what: str, *, last: bool = False):
    """Put `entry` in the registry `table` under `key` after checking its type; the one way every registry of
    the package (drawings, overlays, window parts and refusals) takes a new entry.

    Args:
        table: the registry, {key: entry}, changed in place.
        key: the entry's key (a body kind's name, a part's key).
        entry: the entry.
        kind: the type every entry must have.
        what: what the entry is, with where its type lives, for the TypeError ("a drawing must be a
            render.drawings.Drawing").
        last: move the key to the end (registries whose order matters) instead of keeping its place.

    Returns:
        `entry`.
    """
    if not isinstance(entry, kind):
        raise TypeError(f"{what}, got {type(entry).__name__}")
    if last:
        table.pop(key, None)
    table[key] = entry
    return entry


class FrozenMap(collections.abc.Mapping):
    """A read-only, hashable mapping {name: hashable value}, e.g. an experiment's looks and options of its body kinds
    (`sysid.experiment.Experiment`), which key its compiled functions. Equal when their items are.

    Args:
        items: a mapping or (name, value) pairs; values must be hashable.
    """

    def __init__(self, items=()):
        self._items = dict(items)

    def __getitem__(self, key):
        return self._items[key]

    def __iter__(self):
        return iter(self._items)

    def __len__(self):
        return len(self._items)

    def __hash__(self):
        return hash(tuple(sorted(self._items.items(), key=lambda kv: kv[0])))

    def __repr__(self):
        return f"FrozenMap({self._items!r})"
