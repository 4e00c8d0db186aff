"""The registry of estimable quantities: `Quantity` (name, Params leaf, unit, transform, aliases, how its
default is read from a built scene and how a value expands to per-element arrays), `register`, and the
name lookups (`canonical`, and `unknown_quantity` for a name it does not know). The built-in components
register theirs in `sysid.builtin`; `sysid.quantities` holds what theta does with them."""

from __future__ import annotations

import dataclasses
import difflib
from typing import Any, Callable, Optional



Array = Any


@dataclasses.dataclass(frozen=True)
class Quantity:
    """A named physical quantity a fit can estimate.

    name: canonical name ("stiffness"); field: the dotted path it sets ("cloth.tri_ke"; "particles.v" of
    the initial State; "camera");
    unit; transform: the space it is fitted in ("log", "identity", see fit.transforms);
    aliases: names accepted for it (the canonical name included); doc: one line for users.
    read: `read(topology, params, state0) -> value`, the scene's own value (None: not read from the scene).
    expand: `expand(experiment, value) -> {path: array}`, the updates of `container` for `value` (already
      in the scene's dtype); traceable. None: applied elsewhere (the camera pose, by `camera_for`).
    container: "params", "state", "camera" or "render": what `expand`'s fields belong to (a params quantity
      may also move the initial state: its paths that start with "state." do; the camera's pose and the
      render's blur are applied where the frames are rendered, `camera_for` and `blur_for`).
    applies: `applies(topology) -> bool`, whether a scene has what the quantity sets (None: always);
      `default_theta` reads only those that apply.
    key: its key in scene files' [material] and [initial] (None: the canonical name; "" : none, it has a
      section of its own, the camera's pose); file_type: the TOML type there ("float", "float[3]" for one
      velocity of every particle, "float[4]", "float[]" for one value per particle).
    auto: whether `default_theta` gives it unasked (particle_mass restates every mass "mass" already does).
    """

    name: str
    field: str
    unit: str
    transform: Any
    aliases: tuple[str, ...]
    doc: str
    read: Optional[Callable] = None
    expand: Optional[Callable] = None
    container: str = "params"
    applies: Optional[Callable] = None
    key: Optional[str] = None
    file_type: str = "float"
    auto: bool = True

    @property
    def file_key(self) -> str:
        """Its key in scene files' [material] and [initial] ("" when it has none)."""
        return self.name if self.key is None else self.key


#: Estimable quantities, by canonical name, in registration order. Positive scalars are fitted in log space.
QUANTITIES: dict[str, Quantity] = {}
#: Known inputs that live in theta but are never estimated.
KNOWN_INPUTS = ("push",)


def register(quantity: Quantity) -> Quantity:
    """Add `quantity` to the registry; ValueError when its name or an alias is taken by another.

    Args:
        quantity: the Quantity to add (replaces one of the same name).

    Returns:
        `quantity`, unchanged.
    """
    for q in QUANTITIES.values():
        if q.name == quantity.name:
            continue
        clash = ({quantity.name, *quantity.aliases}) & ({q.name, *q.aliases})
        if clash:
            raise ValueError(f"quantity {quantity.name!r}: {sorted(clash)} already name {q.name!r}")
    QUANTITIES[quantity.name] = quantity
    return quantity


def unregister(name: str) -> None:
    """Remove the quantity called `name` from the registry (nothing when there is none).

    Args:
        name: the quantity's canonical name.
    """
    QUANTITIES.pop(name, None)


def canonical(name: str) -> str:
    """Canonical quantity name for `name` or one of its aliases; ValueError listing the choices.

    Args:
        name: a quantity's name or alias (case and surrounding spaces ignored).

    Returns:
        the canonical name, a key of `QUANTITIES`.
    """
    key = name.strip().lower()
    for q in QUANTITIES.values():
        if key == q.name or key in q.aliases:
            return q.name
    raise unknown_quantity(name, {a: q.name for q in QUANTITIES.values() for a in q.aliases})


def unknown_quantity(name: str, names) -> ValueError:
    """The error for a quantity `name` that is none of `names`: the closest first ("did you mean"), then every
    canonical name.

    Args:
        name: the name asked for.
        names: the names accepted: canonical names, or a mapping of the names accepted to the canonical ones.

    Returns:
        the ValueError (not raised).
    """
    names = names if isinstance(names, dict) else {n: n for n in names}
    key = name.strip().lower()
    canonical_names = sorted(set(names.values()))
    # The canonical names first, then the other names and the last words of the names ("mass" of "body_mass").
    words = {**{n.rsplit("_", 1)[-1]: n for n in canonical_names}, **names}
    close = [*difflib.get_close_matches(key, canonical_names, n=3, cutoff=0.6),
             *(words[a] for a in difflib.get_close_matches(key, list(words), n=3, cutoff=0.6))]
    close = list(dict.fromkeys(close))[:3]
    hint = f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""
    return ValueError(f"unknown quantity {name!r}{hint}; choose from {', '.join(canonical_names)}")


def canonical_theta(theta: dict) -> dict:
    """theta with every quantity under its canonical name ("mass" -> "particles.mass"); known inputs and
    private entries (a leading underscore) pass unchanged.

    Args:
        theta: {quantity name or alias: value}.

    Returns:
        a new dict {canonical name: value} with the same values.
    """
    return {k if k in KNOWN_INPUTS or k.startswith("_") else canonical(k): v for k, v in theta.items()}


def transforms_for(names) -> dict[str, str]:
    """The transform each quantity is fitted in.

    Args:
        names: canonical quantity names.

    Returns:
        dict {name: transform} (`Quantity.transform`, e.g. "log", "identity").
    """
    return {n: QUANTITIES[n].transform for n in names}

