"""Every Python block of the README and of the documentation site runs as written (one test each, so that the
test workers share them), in a temporary folder, the blocks of one page not sharing names; and then checks
itself:

- every number it leaves behind is finite: the floats and float arrays of every name the block defines,
  looked for inside lists, dicts, dataclasses and pytrees (a trajectory, a Params tree, a fit's result);
- what the page says it prints, it prints: the comment on the line where a `print(...)` call ends starts
  with that call's output, numbers to the digits written (`print(x.shape)  # (61, 121, 3): ...`);
- a comment `NAME [d0, d1, ...]` about an array the block defines (`grad.cloth.tri_ke [200]`) states its
  shape.

The conventions are in tests/docs/docs_pages.py and docs/development.md.
"""

import ast
import dataclasses
import io
import re
import sys
import tokenize
import types

import jax
import numpy as np
import pytest

from docs_pages import PAGES, ROOT, blocks, starts_with

BLOCKS = [b for page in PAGES for b in blocks(page) if b.lang == "python"]


def test_docs_have_python_examples():
    assert BLOCKS, "the docs have no Python example"
    assert any(b.page.name == "README.md" for b in BLOCKS), "the README has no Python example"


def test_every_fence_names_its_language():
    """An unlabelled block of commands would escape the command checks (test_docs_commands.py)."""
    unlabelled = [b.where for page in PAGES for b in blocks(page) if not b.lang]
    assert not unlabelled, f"fenced blocks without a language (```text, ```sh, ...): {unlabelled}"


def comments(code: str) -> dict[int, str]:
    """Each line's comment, without its `#`."""
    return {tok.start[0]: tok.string[1:].strip() for tok in tokenize.generate_tokens(io.StringIO(code).readline)
            if tok.type == tokenize.COMMENT}


def print_claims(code: str) -> list[tuple[range, str]]:
    """(the lines of a print call, the comment on its last line) for every print call with such a comment."""
    notes, out = comments(code), []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
            if node.end_lineno in notes:
                out.append((range(node.lineno, node.end_lineno + 1), notes[node.end_lineno]))
    return out


def numbers(value, path: str, seen: dict, depth: int = 0):
    """(path, float array) for every float the value holds, looking inside containers, dataclasses and pytrees.
    `seen` keeps what it has visited (alive, so that no new object takes a visited one's id)."""
    if id(value) in seen or depth > 12 or isinstance(value, (bool, int, str, bytes, type(None), type,
                                                             types.ModuleType, types.FunctionType,
                                                             types.BuiltinFunctionType)):
        return
    seen[id(value)] = value
    if isinstance(value, (float, complex)):
        yield path, np.asarray(value)
    elif isinstance(value, (np.ndarray, np.generic, jax.Array)):
        if np.issubdtype(value.dtype, np.inexact):  # not ints, bools or PRNG keys
            yield path, np.asarray(value)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from numbers(item, f"{path}[{key!r}]", seen, depth + 1)
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from numbers(item, f"{path}[{i}]", seen, depth + 1)
    elif dataclasses.is_dataclass(value):
        for field in dataclasses.fields(value):
            yield from numbers(getattr(value, field.name, None), f"{path}.{field.name}", seen, depth + 1)
    else:
        leaves = jax.tree_util.tree_leaves(value)
        if not (len(leaves) == 1 and leaves[0] is value):
            for i, leaf in enumerate(leaves):
                yield from numbers(leaf, f"{path}<leaf {i}>", seen, depth + 1)


def not_finite(namespace: dict) -> list[str]:
    out, seen = [], {}
    for name, value in namespace.items():
        if name.startswith("__"):
            continue
        for path, array in numbers(value, name, seen):
            bad = int(np.size(array) - np.count_nonzero(np.isfinite(array)))
            if bad:
                out.append(f"{path}: {bad} of {np.size(array)} values not finite")
    return out


def shape_claims(code: str, namespace: dict) -> list[str]:
    """What differs between the shapes the comments state (`NAME [d0, d1]`) and the arrays' shapes."""
    out = []
    for note in comments(code).values():
        for name, dims in re.findall(r"([A-Za-z_]\w*(?:\.\w+)*) \[(\d+(?:, *\d+)*)\]", note):
            first, *rest = name.split(".")
            if first not in namespace:
                continue  # a word, not a name of the block
            value = namespace[first]
            for attr in rest:
                value = getattr(value, attr)
            want = tuple(int(d) for d in dims.split(","))
            if tuple(np.shape(value)) != want:
                out.append(f"the comment says {name} {list(want)}, its shape is {list(np.shape(value))}")
    return out


@pytest.mark.parametrize("block", BLOCKS, ids=[f"{b.page.relative_to(ROOT)}:{b.line}" for b in BLOCKS])
def test_python_block_runs_and_checks_its_numbers(block, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    printed: dict[int, list[str]] = {}
    filename = f"{block.page}:python block at line {block.line}"

    def recording_print(*args, sep=" ", end="\n", file=None, flush=False):
        frame = sys._getframe(1)
        while frame is not None and frame.f_code.co_filename != filename:
            frame = frame.f_back
        text = sep.join(str(a) for a in args)
        if frame is not None and file is None:
            printed.setdefault(frame.f_lineno, []).append(text)
        print(text, end=end, file=file, flush=flush)

    namespace = {"__name__": "docs", "print": recording_print}
    exec(compile(block.code, filename, "exec"), namespace)
    del namespace["print"]

    problems = not_finite(namespace)
    for lines, claim in print_claims(block.code):
        outputs = [text for line in lines for text in printed.get(line, [])]
        if not outputs:
            problems.append(f"line {lines.start}: the print the comment describes never ran")
        problems += [f"line {lines.start}: {d}" for d in map(lambda o: starts_with(claim, o), outputs) if d]
    problems += shape_claims(block.code, namespace)
    assert not problems, f"{block.where}:\n" + "\n".join(problems)


@pytest.mark.parametrize("claim,output,ok", [
    ("(61, 121, 3): the initial frame", "(61, 121, 3)", True),
    ("(61, 121, 3)", "(61, 120, 3)", False),
    ("0.073 0.00048", "0.07312 0.000481", True),
    ("0.073 0.00048", "0.07412 0.000481", False),
    ("1.2e-07", "1.25e-07", True),
    ("{'a': 1.0}", "{'a': 1.0000004}", True),
    ("1.0", "nan", False),
])
def test_print_claims_read_numbers_to_their_last_digit(claim, output, ok):
    assert (starts_with(claim, output) is None) == ok
