"""Every shell command the README and the site show (```sh blocks and inline code such as `gradsim-jax demo
cloth --help`) works as written after the two set-up commands (`make demo`, `make test`) and
`source .venv/bin/activate`, from the repository's root.

In `make test` (a few seconds):

- every command is valid: its program exists once .venv is activated; a `gradsim-jax` command parses with
  the real parser (its subcommand, flags and values); the files it reads exist in the repository, are
  written by a command before it on the same page, or are saved from the page (a ```toml block headed
  `# NAME.toml: ...`); a python script it runs exists; a make target exists in the Makefile; a pip install
  installs this repository (it is on no package index) with extras it declares;
- the cheap ones run: every `--help` prints the command-line page's section for it (docs/cli.md), the
  first one through the installed `gradsim-jax` of an activated shell, and the example scene renders.

In `make test-all` (marked slow; 85 minutes page after page on a loaded 2-core machine), the walk: a fresh
`git clone` of the repository with the project's .venv linked in, and each page in the navigation's order, its
commands and Python blocks run as written, in order, in an activated bash (a demo shown on several pages runs
once): every exit status is 0 (or what an expect comment says), every Python block prints what its comments
say, a demo's run reproduces the table on its tutorial page, and each `<!-- expect ... -->` comment holds for
the command above it:

    <!-- expect runs/x/report.json: relative_error.mass < 1e-4; convergence.converged == true -->
    <!-- expect unchanged: docs/cli.md -->      (the command rewrote the file as it is in the repository)
    <!-- expect exit: 1 -->                     (the command's exit status, where the page says it fails)

Not run, with the reason `plan` gives: make targets (the set-up, the suite, the benchmarks, the site),
installs, the activation itself, the test suite, a bare mention of a program or subcommand, and commands
with words in capitals (SCENE.toml: the reader's own files).
"""

from __future__ import annotations

import contextlib
import io
import json
import operator
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from docs_pages import (PAGES, PLACEHOLDER, ROOT, VENV_BIN, Block, Command, blocks, commands, name, prose,
                        saved_files, starts_with, tokens)

sys.path.insert(0, str(ROOT / "tools"))

COMMANDS = [c for page in PAGES for c in commands(page)]
MAKE_TARGETS = set(re.findall(r"^([\w-]+):", (ROOT / "Makefile").read_text(), flags=re.M))


def _subcommand_needs_scene(argv) -> bool:
    return len(argv) >= 2 and argv[1] in ("fit", "render", "gradcheck", "horizon", "landscape")


def plan(c: Command) -> str:
    """"quick" (run in make test), "walk" (run in the slow walk) or the reason it is not run."""
    program = Path(c.argv[0]).name
    args = c.argv[1:]
    if program == "make":
        return "a make target (the set-up, the suite, the benchmarks, the site): checked in the Makefile"
    if program == "pip" or args[:2] == ("-m", "venv"):
        return "an installation"
    if program == "source":
        return "the activation"
    if "pytest" in args:
        return "the test suite"
    if program == "gradsim-jax" and ("--help" in args or "-h" in args):
        return "quick"
    if c.placeholders:
        return f"{', '.join(c.placeholders)} stand for the reader's own files"
    if not args or (program == "gradsim-jax" and (args == ("demo",) or (_subcommand_needs_scene(c.argv)
                                                                         and "arguments are required"
                                                                         in parse(args)[1]))):
        return "a mention of the program, of a subcommand or of its options"
    if program == "gradsim-jax" and args[0] == "render":
        return "quick"
    return "walk"


def parse(argv) -> tuple[object, str]:
    """(the parsed arguments or None, what the parser wrote) for a gradsim-jax command line."""
    from gradsim_jax.cli.app import build_parser

    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            return build_parser().parse_args(list(argv)), out.getvalue()
    except SystemExit as e:
        return (True if e.code == 0 else None), out.getvalue()


def parse_as_written(c: Command) -> tuple[object, str]:
    """Parse a gradsim-jax command; a synopsis's brackets dropped and its number words (N) read as 2. Inline
    code may mention a subcommand or an option without the arguments the command requires
    (`gradsim-jax fit --clip mass=1.0`): they are filled in, so that the rest is still checked."""
    argv = [a.strip("[]") for a in c.argv[1:]] if c.inline else list(c.argv[1:])
    argv = ["2" if re.fullmatch(r"[A-Z]", a) else a for a in argv]
    args, said = parse(argv)
    for _ in range(3):
        if args is not None or not c.inline or "arguments are required" not in said:
            break
        if "scene" in said.rsplit("required:", 1)[1] and _subcommand_needs_scene(c.argv):
            argv = [argv[0], "SCENE.toml", *argv[1:]]
        if "--out" in said.rsplit("required:", 1)[1]:
            argv = [*argv, "--out", "OUT"]
        args, said = parse(argv)
    return args, said


def reads(c: Command, args) -> list[str]:
    """The files and folders a command reads (its inputs), as written."""
    program = Path(c.argv[0]).name
    if program == "gradsim-jax" and args not in (None, True):
        return [getattr(args, key) for key in ("scene", "target", "mask") if getattr(args, key, None)]
    if program.startswith("python"):
        rest = [a for a in c.argv[1:] if not a.startswith("-")]
        if "-m" in c.argv:
            return [a for a in rest[1:] if "/" in a]
        return rest[:1]
    if program == "source":
        return list(c.argv[1:2])
    return []


def writes(c: Command, args) -> list[str]:
    """What a command writes that a later one may read: a gradsim-jax command's --out, a script's arguments."""
    program = Path(c.argv[0]).name
    if program == "gradsim-jax" and args not in (None, True) and getattr(args, "out", None):
        return [args.out]
    if program.startswith("python"):
        return [a for a in c.argv[2:] if not a.startswith("-")]
    return []


def problems(page: Path) -> list[str]:
    """What is wrong with the commands of a page, as written."""
    found, written = [], set(saved_files(page))
    path = f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}"
    for c in commands(page):
        program = c.argv[0]
        where = f"{c.where}: `{c.text}`"
        if program == "source" or "/" in program:
            exists = (ROOT / (c.argv[1] if program == "source" else program)).exists()
        else:
            exists = shutil.which(program, path=path) is not None
        if not exists:
            found.append(f"{where}: no program {program!r} after set-up (.venv activated)")
        args = None
        if Path(program).name == "gradsim-jax":
            args, said = parse_as_written(c)
            if args is None:
                found.append(f"{where}: {said.strip().splitlines()[-1] if said.strip() else 'does not parse'}")
        elif Path(program).name == "make":
            missing = [t for t in c.argv[1:] if t not in MAKE_TARGETS]
            if missing:
                found.append(f"{where}: no make target {missing}")
        elif Path(program).name == "pip" and "install" in c.argv:
            for spec in c.argv[c.argv.index("install") + 1:]:
                if spec.startswith("-"):
                    continue
                local = re.fullmatch(r"\.(?:\[([\w,-]+)\])?", spec)
                if "gradsim" in spec and not local:
                    found.append(f"{where}: gradsim-jax is on no package index: install the repository, "
                                 f"pip install -e '.[EXTRA]'")
                elif local and local.group(1):
                    declared = _extras()
                    found += [f"{where}: no extra {e!r} in pyproject.toml" for e in local.group(1).split(",")
                              if e not in declared]
        for item in reads(c, args):
            if PLACEHOLDER.match(item) or "$" in item:
                continue
            if not ((ROOT / item).exists() or any(item == w or item.startswith(w.rstrip("/") + "/") for w in written)):
                found.append(f"{where}: {item} neither exists nor is written by a command above it")
        written.update(writes(c, args))
    return found


def _extras() -> set[str]:
    import tomllib

    return set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])


def test_pages_show_commands():
    assert any(plan(c) == "walk" for c in COMMANDS) and any(plan(c) == "quick" for c in COMMANDS)
    assert {"demo", "test"} <= MAKE_TARGETS


@pytest.mark.parametrize("page", [p for p in PAGES if commands(p)], ids=name)
def test_every_command_is_valid_as_written(page):
    assert not problems(page), "\n".join(problems(page))


def test_the_pages_say_how_to_reach_the_installed_commands():
    """`make demo` installs into .venv: the set-up sections say to activate it (item 3 of issue 52)."""
    for page in (ROOT / "README.md", ROOT / "docs" / "getting-started.md"):
        activations = [c for c in commands(page) if c.argv == ("source", ".venv/bin/activate") and not c.inline]
        assert activations, f"{name(page)} does not show `source .venv/bin/activate`"
        setup = [c for c in commands(page) if c.argv[:2] in (("make", "demo"), ("make", "test"))]
        assert setup and setup[0].line < activations[0].line, name(page)


def cli_section(argv) -> str:
    """The help text docs/cli.md shows for `gradsim-jax ARGV --help`."""
    heading = " ".join(a for a in argv if not a.startswith("-")) or "gradsim-jax"
    text = (ROOT / "docs" / "cli.md").read_text()
    found = re.search(rf"^##+ {re.escape(heading)}\n\n(?:[^`#][^\n]*\n\n)?```text\n(.*?)\n```", text,
                      flags=re.M | re.S)
    assert found, f"docs/cli.md has no section {heading!r}"
    return found.group(1)


HELPS = sorted({c.argv[1:] for c in COMMANDS if plan(c) == "quick" and "--help" in c.argv})


def test_every_documented_help_prints_its_section_of_the_command_line_page(monkeypatch):
    """`gradsim-jax demo cloth --help` (each tutorial links it to docs/cli.md#demo-cloth) prints that section."""
    monkeypatch.setenv("COLUMNS", "100")  # the width docs/cli.md is written at
    assert len(HELPS) > 20
    differ = []
    for argv in HELPS:
        args, said = parse(argv)
        assert args is True, said
        if said.rstrip() != cli_section(argv):
            differ.append(" ".join(argv))
    assert not differ, f"docs/cli.md is out of date (python tools/cli_reference.py) for: {differ}"


def test_an_activated_shell_runs_gradsim_jax():
    """The first documented --help, in bash, after `source .venv/bin/activate` (what the pages tell a user)."""
    first = next(c for c in COMMANDS if plan(c) == "quick" and "--help" in c.argv)
    done = subprocess.run(["bash", "-c", f"source .venv/bin/activate && {first.shell}"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "100"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.rstrip() == cli_section(first.argv[1:])


RENDERS = {c.argv[2]: c for c in COMMANDS if plan(c) == "quick" and c.argv[1] == "render"}


@pytest.mark.parametrize("scene", sorted(RENDERS))
def test_documented_render_runs(scene, tmp_path, monkeypatch):
    """A render of a scene file the repository holds (or a page saves) writes the frames it says it wrote."""
    from gradsim_jax.cli import main
    from gradsim_jax.scenefile.extensions import LOADED_PLUGINS, unregister_body_kind
    from gradsim_jax.scenefile.schema import BODY_SECTIONS

    c = RENDERS[scene]
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    (tmp_path / "benchmarks").symlink_to(ROOT / "benchmarks")  # examples/blender_cloth reads its videos there
    for file, text in saved_files(c.page).items():
        (tmp_path / file).write_text(text)
    monkeypatch.chdir(tmp_path)
    kinds, plugins = set(BODY_SECTIONS), set(LOADED_PLUGINS)
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            assert main(list(c.argv[1:])) == 0
    finally:  # a scene's plugins (examples/extending) register body kinds for the process: take them back
        for name in set(BODY_SECTIONS) - kinds:
            unregister_body_kind(name)
        for key in set(LOADED_PLUGINS) - plugins:
            LOADED_PLUGINS.pop(key)
    said = re.search(r"rendered (\d+) frames of (\S+) to (\S+)", out.getvalue())
    assert said and Path(said.group(3)) == Path(c.argv[c.argv.index("--out") + 1]), out.getvalue()
    target = tmp_path / said.group(3)
    assert target.exists() and (target.is_file() or len(list(target.glob("*.png"))) == int(said.group(1)))


# ---------------------------------------------------------------------------------------------------------
# The walk (make test-all).

EXPECT = re.compile(r"<!--\s*expect\s+(.*?)-->", flags=re.S)
COMPARE = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq}


def expectations(page: Path) -> list[tuple[int, str]]:
    """(line, text) of each `<!-- expect ... -->` comment of the page's prose (not of its code)."""
    lines = dict(prose(page))
    text = "\n".join(re.sub(r"`[^`]*`", lambda m: " " * len(m.group(0)), lines.get(n, ""))
                     for n in range(1, max(lines, default=0) + 1))
    return [(text[:m.start()].count("\n") + 1, " ".join(m.group(1).split())) for m in EXPECT.finditer(text)]


def _is_demo(c: Command) -> bool:
    return c.argv[:2] == ("gradsim-jax", "demo") and plan(c) == "walk"


#: Each demo's command line -> the page whose walk runs it: the first to show it (a demo writes only its own
#: folder, so it runs once).
DEMO_PAGE = {}
for _page in PAGES:
    for _c in commands(_page):
        if _is_demo(_c):
            DEMO_PAGE.setdefault(_c.shell, name(_page))


def walk_steps(page: Path, page_name: str) -> list[object]:
    """The page's commands to run and its Python blocks, in the page's order (read from `page`, the page in
    the clone, whose lines the expect comments refer to)."""
    steps = [c for c in commands(page) if plan(c) in ("quick", "walk")
             and not (_is_demo(c) and DEMO_PAGE.get(c.shell, page_name) != page_name)]
    steps += [b for b in blocks(page) if b.lang == "python"]
    return sorted(steps, key=lambda s: s.line)


WALK = [name(page) for page in PAGES if walk_steps(page, name(page))]


@pytest.fixture(scope="session")
def clone(tmp_path_factory):
    """A fresh clone of the repository (its last commit), the project's .venv linked in: the state after the
    two set-up commands."""
    root = tmp_path_factory.mktemp("walk") / "gradsim-jax"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(root)], check=True)
    (root / ".venv").symlink_to(ROOT / ".venv")
    return root


def user_env() -> dict:
    """A user's environment: the suite's own settings (compiler options, pytest's) left out."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "GRADSIM_JAX", "COV_"))}


def run_in_shell(clone: Path, script: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", f"source .venv/bin/activate && {script}"], cwd=clone, input=stdin,
                          capture_output=True, text=True, timeout=3600, env=user_env())


def python_block_output(block: Block, printed: str) -> list[str]:
    """What differs between a block's stdout and its print comments (in order)."""
    from test_docs_code import print_claims

    lines, found, at = printed.splitlines(), [], 0
    for _, claim in sorted(print_claims(block.code), key=lambda pc: pc[0].start):
        while at < len(lines) and starts_with(claim, lines[at]) is not None:
            at += 1
        if at == len(lines):
            found.append(f"no line of its output starts with {claim!r}")
            at = 0
        else:
            at += 1
    return found


def json_value(data, key: str):
    value = data
    for part in key.split("."):
        value = value[int(part)] if isinstance(value, list) else value[part]
    return value


def check_expectation(clone: Path, text: str) -> list[str]:
    """What fails of one `<!-- expect ... -->` comment, in the clone."""
    target, _, checks = text.partition(":")
    target = target.strip()
    if target == "unchanged":
        done = subprocess.run(["git", "status", "--porcelain", "--", *checks.split()], cwd=clone,
                              capture_output=True, text=True)
        return [f"{line} (a command rewrote it otherwise)" for line in done.stdout.splitlines()]
    data = json.loads((clone / target).read_text())
    found = []
    for check in filter(None, (c.strip() for c in checks.split(";"))):
        key, op, want = re.fullmatch(r"(mean\([\w.]+\)|max\([\w.]+\)|[\w.]+)\s*(<=|>=|==|<|>)\s*(\S+)", check).groups()
        reduce = re.fullmatch(r"(mean|max)\(([\w.]+)\)", key)
        value = json_value(data, reduce.group(2) if reduce else key)
        if reduce:
            import numpy as np

            value = float(getattr(np, reduce.group(1))(np.asarray(value, float)))
        expected = json.loads(want)
        if not COMPARE[op](value, expected):
            found.append(f"{target}: {key} is {value}, the page says {op} {want}")
    return found


def _number(word: str) -> float | None:
    try:
        return float(word)
    except ValueError:
        return None


#: What a number measures, read from its column's header, its row's label or the words before it: an error
#: (lower is as good), a score (higher is as good), or a count or a time that depends on the machine.
ERROR = re.compile(r"error|loss|distance|rmse|largest", re.I)
SCORE = re.compile(r"iou|psnr|overlap", re.I)
IGNORED_AFTER = re.compile(r"^(s in|Adam|Levenberg|iterations|rounds|x )")


def _unit(written: str) -> float:
    """One unit of the last digit written where the page rounded to a fixed number of digits (`0.0032` -> 1e-4,
    `9.3e-08` -> 1e-9); 0 for a number of one significant digit, which `%g` may have shortened (`0.02`)."""
    mantissa, _, exponent = written.lower().lstrip("+-").partition("e")
    if len(mantissa.replace(".", "").lstrip("0")) < 2:
        return 0.0
    return 10.0 ** (int(exponent or 0) - len(mantissa.partition(".")[2]))


def number_difference(context: str, written: str, value: str) -> str | None:
    """None when the run's `value` agrees with the page's `written` number: an error no worse than 3 times the
    page's (or under 1e-5), a score no lower than 2 % below it, anything else within 2 % (or a unit of its last
    digit, where that is more)."""
    page, run = float(written), float(value)
    slack = max(0.02 * abs(page), _unit(written))
    if ERROR.search(context):
        ok = abs(run) <= max(3 * abs(page), 1e-5)
    elif SCORE.search(context):
        ok = run >= page - slack
    else:
        ok = abs(run - page) <= slack
    return None if ok else f"{value} where the page says {written} ({context.strip()})"


def _words_difference(context: str, old: str, new: str, skip_counts: bool) -> str | None:
    a, b = tokens(old), tokens(new)
    if len(a) != len(b):
        return f"{old.strip()!r} against {new.strip()!r}"
    for i, (x, y) in enumerate(zip(a, b)):
        if _number(x) is None or _number(y) is None:
            if x != y:
                return f"{old.strip()!r} against {new.strip()!r}"
            continue
        if skip_counts and IGNORED_AFTER.match(" ".join(a[i + 1:i + 3]) + " "):
            continue  # a wall time, a count of iterations, a ratio of two numbers compared elsewhere
        difference = number_difference(context + " " + " ".join(a[max(0, i - 4):i]), x, y)
        if difference:
            return difference
    return None


def compare_measured(page_text: str, new_text: str) -> list[str]:
    """What differs between a tutorial page's table of one run (and the lines after it that
    tools/demo_pages.py writes) and the same made from the walk's run: the same rows and words, and numbers
    that agree as `number_difference` says; wall times and counts of iterations aside."""
    found = []
    new_lines = [line for line in new_text.strip().splitlines() if line.strip()]
    page_lines = [line for line in page_text.strip().splitlines() if line.strip()][:len(new_lines)]  # then prose
    header: list[str] = []
    for old, new in zip(page_lines, new_lines):
        if not old.startswith("|"):
            header = []
            found += [d for d in [_words_difference("", old, new, skip_counts=True)] if d]
            continue
        old_cells, new_cells = old.strip("|").split("|"), new.strip("|").split("|")
        if set(old.replace("|", "").strip()) <= set("-: "):
            continue  # the separator
        if not header:
            header = [c.strip() for c in old_cells]
            found += [] if old == new else [f"the header {old!r} against {new!r}"]
            continue
        if len(old_cells) != len(new_cells):
            found.append(f"{old!r} against {new!r}")
            continue
        for i, (o, n) in enumerate(zip(old_cells, new_cells)):
            context = f"{header[0]} {header[i] if i < len(header) else ''} {old_cells[0]}"
            difference = _words_difference(context, o, n, skip_counts=False)
            if difference:
                found.append(f"{old_cells[0].strip()}: {difference}")
    return found


def check_demo_page(clone: Path, demo: str) -> list[str]:
    """A default run of `gradsim-jax demo NAME` against the table of its tutorial page (tools/demo_pages.py
    writes that table from a run's report.json; here from the walk's run)."""
    from demo_pages import _results

    page = (clone / "docs" / "tutorials" / f"{demo}.md").read_text()
    section = page.split("## Measured", 1)[1].split("**gradSim:**", 1)[0]
    table = section.strip().split("\n\n", 1)[1]  # after "One run of ... on a 2-core ...:"
    report = json.loads((clone / "runs" / demo / "report.json").read_text())
    return compare_measured(table, _results(demo, report))


@pytest.mark.slow  # every demo and every fit the pages show: 37 pages, 85 minutes one after another on 2 cores
@pytest.mark.parametrize("page", WALK)
def test_walk_runs_the_page_as_written_from_a_fresh_clone(page, clone):
    page_in_clone = clone / page
    for file, text in saved_files(page_in_clone).items():
        (clone / file).write_text(text)
    steps, expects = walk_steps(page_in_clone, page), expectations(page_in_clone)
    failures = []
    for i, step in enumerate(steps):
        end = steps[i + 1].line if i + 1 < len(steps) else 10 ** 9
        mine = [text for line, text in expects if step.line < line < end]
        status = next((int(t.split(":", 1)[1]) for t in mine if t.startswith("exit:")), 0)
        if isinstance(step, Command):
            done = run_in_shell(clone, step.shell)
            what = f"{step.where}: `{step.shell}`"
        else:
            done = run_in_shell(clone, "python -", stdin=step.code)
            what = f"{step.where}: the Python block"
        if done.returncode != status:
            failures.append(f"{what} exited with {done.returncode}, not {status}:\n{done.stderr[-3000:]}")
            continue
        if isinstance(step, Block):
            failures += [f"{what}: {d}" for d in python_block_output(step, done.stdout)]
        elif step.argv[:2] == ("gradsim-jax", "demo") and len(step.argv) == 3:
            failures += [f"{what}: {d}" for d in check_demo_page(clone, step.argv[2])]
        for text in mine:
            if not text.startswith("exit:"):
                failures += [f"{what}: {d}" for d in check_expectation(clone, text)]
    assert not failures, "\n\n".join(failures)


PAGE_TABLE = """| quantity | true | start | estimate | relative error |
|---|---:|---:|---:|---:|
| mass | 0.02 | 0.0270791 | 0.02 | 9.3e-08 |

Converged: yes; final loss 7.47e-12; 60 Adam iterations and 4 Levenberg-Marquardt steps; 29 s in all."""


@pytest.mark.parametrize("edit,ok", [
    ((), True),
    (("29 s in all", "90 s in all"), True),
    (("4 Levenberg", "7 Levenberg"), True),
    (("| 9.3e-08", "| 2.1e-07"), True),
    (("| 9.3e-08", "| 2.1e-04"), False),
    (("| 0.02 | 9.3e-08", "| 0.021 | 9.3e-08"), False),
    (("| 0.02 | 9.3e-08", "| 0.0201 | 9.3e-08"), True),
    (("0.0270791", "0.028"), False),
    (("yes", "no"), False),
    (("mass", "stiffness"), False),
])
def test_a_demo_run_is_compared_with_its_page_as_the_docstring_says(edit, ok):
    new = PAGE_TABLE.replace(*edit) if edit else PAGE_TABLE
    assert (not compare_measured(PAGE_TABLE, new)) == ok


def test_expect_comments_compare_json_values(tmp_path):
    (tmp_path / "r.json").write_text(json.dumps({"relative_error": {"mass": 2e-5, "v": [1e-4, 3e-4]},
                                                 "convergence": {"converged": True}}))
    assert not check_expectation(tmp_path, "r.json: relative_error.mass < 1e-4; convergence.converged == true; "
                                           "mean(relative_error.v) <= 2e-4")
    assert len(check_expectation(tmp_path, "r.json: relative_error.mass < 1e-5; max(relative_error.v) < 2e-4")) == 2


def test_walk_covers_every_runnable_command_and_expectation():
    """Every command is run (make test or the walk) or has its reason; every expect comment follows a step."""
    reasons = {plan(c) for c in COMMANDS} - {"quick", "walk"}
    assert all(r for r in reasons)
    steps = {page: walk_steps(page, name(page)) for page in PAGES}
    walked = {s.shell for page_steps in steps.values() for s in page_steps if isinstance(s, Command)}
    assert all(c.shell in walked for c in COMMANDS if plan(c) == "walk")
    for page in PAGES:
        for line, text in expectations(page):
            assert any(s.line < line for s in steps[page]), (name(page), line, text)
            assert re.match(r"(unchanged|exit|[\w./-]+\.json)\s*:", text), (name(page), line, text)
