"""The package's layers go one way (docs/architecture.md): every import of a gradsim_jax module goes down a
layer or stays inside its own package; none goes up or sideways, and no modules import each other round a
circle. The imports are read with `ast` (nothing is imported), including those inside functions."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = "gradsim_jax"

#: Layer of each part of the package, lowest first; a part imports only parts of lower layers (and itself).
#: "base" is the shared helpers that know nothing of physics (types, math, compilation options, files,
#: devices, the version); "api" is the package's own namespace, which re-exports for users only.
LAYERS = {
    "base": 0,
    "physics": 1,
    "geometry": 2, "render": 2,
    "fit": 3,
    "sysid": 4, "control": 4,
    "diagnostics": 5,
    "scenes": 6, "scenefile": 6,
    "cli": 7,
    "api": 8,
}
BASE = {"typing", "mathutil", "vectors", "compilation", "files", "parallel", "version"}


def modules() -> dict[str, Path]:
    found = {}
    for path in (SRC / PACKAGE).rglob("*.py"):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def part(module: str) -> str:
    """The layer part of a module: its subpackage, "base" or "api"."""
    parts = module.split(".")
    if len(parts) == 1:
        return "api"
    return "base" if parts[1] in BASE else parts[1]


def imports(name: str, path: Path, known: dict) -> dict[str, int]:
    """{imported gradsim_jax module: line} of one module (`from a import b` is an import of a.b when that is
    a module); imports under `if TYPE_CHECKING:` do not run and are left out."""
    tree = ast.parse(path.read_text(), str(path))
    skip = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for n in ast.walk(node))
    out: dict[str, int] = {}
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name in known and a.name != name:
                    out.setdefault(a.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            for a in node.names:
                target = f"{base}.{a.name}" if f"{base}.{a.name}" in known else base
                if target in known and target != name:
                    out.setdefault(target, node.lineno)
    return out


def graph() -> dict[str, dict[str, int]]:
    known = modules()
    return {name: imports(name, path, known) for name, path in known.items()}


def circles(g: dict) -> list[list[str]]:
    """Strongly connected groups of two or more modules (Tarjan, iterative)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], 0
    for root in g:
        if root in index:
            continue
        work = [(root, iter(g[root]))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(g[w])))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    group = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        group.append(w)
                        if w == v:
                            break
                    if len(group) > 1:
                        out.append(sorted(group))
    return out


def test_every_module_has_a_layer():
    unknown = sorted({part(m) for m in modules()} - set(LAYERS))
    assert not unknown, f"parts without a layer (add them to LAYERS and docs/architecture.md): {unknown}"


def test_imports_go_down():
    wrong = []
    for name, deps in graph().items():
        mine = part(name)
        for dep, line in deps.items():
            theirs = part(dep)
            if theirs != mine and LAYERS[theirs] >= LAYERS[mine]:
                how = "sideways" if LAYERS[theirs] == LAYERS[mine] else "up"
                wrong.append(f"{name}:{line} imports {dep} ({how}: {mine} {LAYERS[mine]} -> {theirs} "
                             f"{LAYERS[theirs]})")
    assert not wrong, "imports that do not go down a layer:\n" + "\n".join(sorted(wrong))


def test_no_import_circles():
    found = circles(graph())
    assert not found, "import circles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_the_checks_can_fail():
    """The readers see a circle and an upward import when there is one."""
    assert circles({"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}, "d": {"a": 1}}) == [["a", "b", "c"]]
    g = graph()
    assert "gradsim_jax.physics.types" in g["gradsim_jax.physics"]  # from-imports of submodules are read
    assert part("gradsim_jax.cli.fit") == "cli" and part("gradsim_jax.typing") == "base"
    assert part("gradsim_jax") == "api"


def test_rooms_of_one_job():
    """No module over ~500 lines (520) unless it is one algorithm (those are listed, with why)."""
    limit = 520
    one_algorithm = {
        # the tiled rasterizer: binning faces to tiles, per-pixel candidates, coverage, compositing, and the
        # dense reference renderer it is checked against
        "gradsim_jax.render.rasterize": 850,
        # the optax loop: jitted steps, per-field clipping, bounds, NaN back-off, checkpoints, bitwise resume
        "gradsim_jax.fit.fit": 600,
    }
    big = []
    for name, path in modules().items():
        n = len(path.read_text().splitlines())
        if n > one_algorithm.get(name, limit):
            big.append(f"{name}: {n} lines")
    assert not big, "modules over their size:\n" + "\n".join(big)


def test_fit_climbs_back_at_most_three_times(tmp_path):
    """`gradsim-jax fit` on a small scene, traced (tools/layer_walk.py): calls from a lower layer into a higher
    one happen only through functions handed down (the loss, the traced checks, the polish's residuals)."""
    import sys

    sys.path.insert(0, str(SRC.parent / "tools"))
    from layer_walk import fit_walk

    walk = fit_walk(tmp_path)
    assert walk["status"] == 0
    climbs = walk["climbs"]
    assert len(climbs) <= 3, climbs
    for pair in climbs:  # each climb is into sysid, from the optimizers of fit
        caller, callee = pair.split(" -> ")
        assert part(caller) == "fit" and part(callee) == "sysid", pair
    assert len(walk["entered"]) > 30  # the profiler saw the whole command


def test_public_names_say_what_they_are():
    """Every name of `gradsim_jax.__all__` has a docstring of more than one short phrase, and the package and
    the command line name what gradsim-jax does now (cloth, rigid and soft bodies, control)."""
    import inspect

    import gradsim_jax as gs
    from gradsim_jax.cli import build_parser

    short = [n for n in gs.__all__ if len(inspect.getdoc(getattr(gs, n)) or "") < 60]
    assert not short, f"public names without a real docstring: {short}"
    for text in (gs.__doc__, build_parser().description):
        for word in ("cloth", "rigid", "soft bod", "control"):
            assert word in text, (word, text[:200])


def _trees():
    for name, path in sorted(modules().items()):
        yield name, path, ast.parse(path.read_text(), str(path))


def private_imports() -> list[str]:
    """`from gradsim_jax.x import _name` (or `x._name` on an imported gradsim_jax module) anywhere in the package:
    a helper another module needs has a public name."""
    known = modules()
    found = []
    for name, path, tree in _trees():
        aliases = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
                    base = ".".join(anchor[: len(anchor) - (node.level - 1)] + ([base] if base else []))
                if not base.startswith(PACKAGE):
                    continue
                for a in node.names:
                    if f"{base}.{a.name}" in known:
                        aliases[a.asname or a.name] = f"{base}.{a.name}"
                    elif a.name.startswith("_") and not a.name.startswith("__"):
                        found.append(f"{name}:{node.lineno} imports {a.name} from {base}")
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.startswith(PACKAGE) and a.asname:
                        aliases[a.asname] = a.name
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases
                    and node.attr.startswith("_") and not node.attr.startswith("__")):
                found.append(f"{name}:{node.lineno} uses {node.value.id}.{node.attr}")
    return found


#: Functions allowed over 80 lines: each is one algorithm whose stages share too much state to name apart.
ONE_ALGORITHM_FUNCTIONS = {
    # Levenberg-Marquardt: damping schedule, step acceptance and the bounds' projection in one loop
    "gradsim_jax.sysid.polish.levenberg_marquardt",
    # the hand-written adjoint of the soft aggregation: every gradient shares the forward's intermediates
    "gradsim_jax.render.aggregate._aggregate_bwd",
}


def _functions(tree, prefix):
    """(qualified name, node, inside a class) of every function of a module, methods included."""
    out = []

    def visit(node, qual, in_class):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.append((f"{qual}.{child.name}", child, in_class))
                visit(child, f"{qual}.{child.name}", False)
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{qual}.{child.name}", True)
            else:
                visit(child, qual, in_class)

    visit(tree, prefix, False)
    return out


def function_lines(node) -> int:
    """Lines of a function from its `def` to its end, less its docstring (the docstring grows with the argument
    sections; what must fit on a screen is the code)."""
    lines = node.end_lineno - node.lineno + 1
    body = node.body
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
            and isinstance(body[0].value.value, str):
        lines -= body[0].end_lineno - body[0].lineno + 1
    return lines


def long_functions(limit: int = 80) -> list[str]:
    """Functions (methods and nested functions included) over `limit` lines of code, less those listed in
    ONE_ALGORITHM_FUNCTIONS."""
    found = []
    for name, _, tree in _trees():
        for qual, node, _ in _functions(tree, name):
            lines = function_lines(node)
            if lines > limit and qual not in ONE_ALGORITHM_FUNCTIONS:
                found.append(f"{qual}: {lines} lines")
    return found


def _public_functions(tree, prefix):
    """Module-level public functions and public methods of public classes (not properties, not dunders)."""
    out = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
            out.append((f"{prefix}.{node.name}", node))
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            for m in node.body:
                if (isinstance(m, ast.FunctionDef) and not m.name.startswith("_")
                        and not any("property" in ast.unparse(d) or "setter" in ast.unparse(d)
                                    for d in m.decorator_list)):
                    out.append((f"{prefix}.{node.name}.{m.name}", m))
    return out


def argument_gaps(qual: str, node) -> list[str]:
    """What a public function's docstring lacks: no `Args:` section, or the arguments the section does not name
    (`name:` or `name (` at the start of one of its lines; `*args:`/`**kwargs:` for those); [] when complete."""
    a = node.args
    names = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs if x.arg not in ("self", "cls")]
    names += [f"*{a.vararg.arg}"] if a.vararg else []
    names += [f"**{a.kwarg.arg}"] if a.kwarg else []
    if not names:
        return []
    doc = ast.get_docstring(node) or ""
    if "Args:" not in doc:
        return [f"{qual}: no Args section"]
    section = doc.split("Args:", 1)[1].splitlines()
    missing = [n for n in names
               if not any(line.strip().startswith((f"{n}:", f"{n} (")) for line in section)]
    return [f"{qual}: Args section lacks {missing}"] if missing else []


def undocumented_arguments() -> list[str]:
    """Public functions whose docstring has no `Args:` section naming each of their arguments (`argument_gaps`)."""
    found = []
    for name, _, tree in _trees():
        for qual, node in _public_functions(tree, name):
            found += argument_gaps(qual, node)
    return found


def test_no_private_name_crosses_a_module():
    found = private_imports()
    assert not found, "module-private names used by other modules (give them public names):\n" + "\n".join(found)


def test_functions_fit_on_a_screen():
    """No function has more than 80 lines of code (its docstring apart), outside ONE_ALGORITHM_FUNCTIONS: a long
    one becomes a short one naming its stages."""
    found = long_functions()
    assert not found, "functions over 80 lines (split them into named stages):\n" + "\n".join(found)


def test_every_public_function_documents_its_arguments():
    """Every public function and public method of the package has an `Args:` section naming each argument."""
    found = undocumented_arguments()
    assert not found, f"{len(found)} public functions without a full Args section:\n" + "\n".join(found)


def test_the_house_checks_can_fail():
    """The three readers above see a planted case: a private import, a long function, an undocumented one."""
    tree = ast.parse("from gradsim_jax.x import _hidden\n"
                     "def long():\n" + "    a = 1\n" * 81 +
                     "def bare(x, *args, y=1, **kw):\n    '''No sections.'''\n"
                     "def half(x, y):\n    '''Half.\n\n    Args:\n        x: a thing.\n    '''\n"
                     "def whole(x, y):\n    '''Whole.\n\n    Args:\n        x: a thing.\n        y: another.\n    '''\n")
    assert [q for q, n, _ in _functions(tree, "m") if function_lines(n) > 80] == ["m.long"]
    funcs = dict(_public_functions(tree, "m"))
    assert set(funcs) == {"m.long", "m.bare", "m.half", "m.whole"}
    gaps = {q: argument_gaps(q, n) for q, n in funcs.items()}
    assert gaps["m.bare"] == ["m.bare: no Args section"]
    assert gaps["m.half"] == ["m.half: Args section lacks ['y']"] and gaps["m.whole"] == [] and gaps["m.long"] == []
