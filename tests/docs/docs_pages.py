"""What the README and the site's pages show a user: their fenced code blocks, the shell commands in them and
in inline code, and what the pages say those print. Shared by the tests of tests/docs/.

The pages' conventions (docs/development.md, "Examples that check themselves"):

- Every fence names its language (```python, ```sh, ```toml, ```text): an unlabelled block of commands would
  be missed.
- In a ```python block, the comment on the line where a `print(...)` call ends starts with what that call
  prints; whatever follows is explanation (`print(x.shape)  # (61, 121, 3): the initial frame and 60 more`).
  A written number stands for every value within one unit of its last digit (`0.073` for 0.072 to 0.074);
  an integer must match exactly. A comment `NAME [d0, d1]` with NAME a name (or dotted attribute) of the
  block states that array's shape.
- A ```toml block whose first line is `# FILE.toml: ...` is a file the reader saves under that name; the
  commands after it on the page may use it.
- Words in capitals (`SCENE.toml`, `VIDEO.mp4`, `N`) stand for the reader's own files and numbers: such a
  command is checked (it parses, its flags exist) but not run.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = ROOT / ".venv" / "bin"

#: Languages of fenced blocks that hold shell commands.
SHELL = ("sh", "bash", "console", "shell")
#: The first words of inline code that make it a command (a backtick span such as `gradsim-jax fit ...`).
PROGRAMS = ("gradsim-jax", "make", "python", "python3", "pip", "source", ".venv/bin/python", ".venv/bin/pip",
            ".venv/bin/gradsim-jax")
#: Programs that start another command (a cluster's launcher): the command is what follows.
LAUNCHERS = ("srun",)
SHELL_KEYWORDS = ("for", "do", "done", "while", "if", "then", "else", "fi", "wait")
#: A word in capitals, with a file's extension or a path (SCENE.toml, VIDEO, RUNS/NAME): the reader's own.
PLACEHOLDER = re.compile(r"^[A-Z][A-Z0-9_]*(?:[./][A-Za-z0-9_.]+)*$")


def nav_pages() -> list[Path]:
    """The README, then every page of the site in the order of mkdocs.yml's navigation."""
    text = (ROOT / "mkdocs.yml").read_text()
    out = [ROOT / "README.md"]

    def walk(entries):
        for entry in entries:
            value = entry if isinstance(entry, str) else next(iter(entry.values()))
            if isinstance(value, str):
                out.append(ROOT / "docs" / value)
            else:
                walk(value)

    walk(yaml.safe_load(text[text.index("\nnav:"):])["nav"])
    return list(dict.fromkeys(out))


PAGES = nav_pages()


def name(page: Path) -> str:
    """The page's path in its repository (this one, or a clone of it: the folder with mkdocs.yml)."""
    root = next(p for p in page.resolve().parents if (p / "mkdocs.yml").exists())
    return str(page.resolve().relative_to(root))


@dataclasses.dataclass(frozen=True)
class Block:
    """A fenced code block: its page, the line of its opening fence (1-based), its language and text."""

    page: Path
    line: int
    lang: str
    code: str

    @property
    def where(self) -> str:
        return f"{name(self.page)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """The page's fenced code blocks, in order (an indented fence, in a list, counts too)."""
    out, lines, i = [], page.read_text().splitlines(), 0
    while i < len(lines):
        opened = re.match(r"^(\s*)```(\S*)\s*$", lines[i])
        if not opened:
            i += 1
            continue
        indent, start, body = len(opened.group(1)), i, []
        i += 1
        while i < len(lines) and not re.match(r"^\s*```\s*$", lines[i]):
            body.append(lines[i][indent:] if lines[i][:indent].isspace() else lines[i])
            i += 1
        out.append(Block(page, start + 1, opened.group(2), "\n".join(body) + "\n"))
        i += 1
    return out


def prose(page: Path) -> list[tuple[int, str]]:
    """The page's lines outside fenced blocks, with their line numbers (1-based)."""
    inside, out = False, []
    for number, line in enumerate(page.read_text().splitlines(), 1):
        if re.match(r"^\s*```", line):
            inside = not inside
        elif not inside:
            out.append((number, line))
    return out


@dataclasses.dataclass(frozen=True)
class Command:
    """One simple command a page shows: `argv` after the environment assignments (`env`) and a launcher,
    with a loop's variable replaced by its first value; `inline` for a backtick span in the prose."""

    page: Path
    line: int
    text: str
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()
    inline: bool = False

    @property
    def where(self) -> str:
        return f"{name(self.page)}:{self.line}"

    @property
    def placeholders(self) -> list[str]:
        """The words in capitals that stand for the reader's own files or numbers."""
        return [a for a in self.argv[1:] if PLACEHOLDER.match(a) and not a.startswith("-")]

    @property
    def shell(self) -> str:
        """The command as a line of shell, without a launcher (for the walk)."""
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.env)
        return (env + " " if env else "") + shlex.join(self.argv)


def split_commands(text: str, loop: dict | None = None) -> list[tuple[list[str], list[tuple[str, str]]]]:
    """The simple commands of one line of shell: (argv, environment assignments) each; control keywords
    dropped, a `for` loop's variable replaced by its first value (`loop` carries them from line to line), a
    launcher (`srun`) dropped."""
    lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|")
    lexer.whitespace_split, lexer.commenters = True, "#"
    words, out, current = list(lexer), [], []
    loop = {} if loop is None else loop
    for word in words + [";"]:
        if word and set(word) <= set(";&|"):
            if current:
                out.append(current)
            current = []
        else:
            current.append(word)
    commands = []
    for simple in out:
        if simple[0] == "for" and len(simple) >= 4 and simple[2] == "in":
            loop[simple[1]] = simple[3]
            continue
        while simple and simple[0] in ("do", "then", "else"):
            simple = simple[1:]
        if not simple or simple[0] in SHELL_KEYWORDS:
            continue
        env = []
        while simple and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", simple[0]):
            key, value = simple[0].split("=", 1)
            env.append((key, value))
            simple = simple[1:]
        while simple and simple[0] in LAUNCHERS:
            simple = simple[1:]
        if not simple:
            continue
        simple = [re.sub(r"\$\{?(\w+)\}?", lambda m: loop.get(m.group(1), m.group(0)), w) for w in simple]
        commands.append((simple, env))
    return commands


def block_commands(block: Block) -> list[Command]:
    """The commands of a shell block, backslash continuations joined; a `console` block's commands are its
    lines that start with `$ `."""
    out, number = [], block.line
    logical: list[tuple[int, str]] = []
    pending, first = "", 0
    for offset, line in enumerate(block.code.splitlines(), 1):
        if block.lang == "console":
            if not line.startswith("$ ") and not pending:
                continue
            line = line[2:] if line.startswith("$ ") else line
        if not pending:
            first = offset
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        logical.append((first, pending + line))
        pending = ""
    loop: dict = {}
    for offset, line in logical:
        if line.strip().startswith("#"):
            continue
        for argv, env in split_commands(line, loop):
            out.append(Command(block.page, number + offset, line.strip(), tuple(argv), tuple(env)))
    return out


def inline_commands(page: Path) -> list[Command]:
    """The commands written as inline code in the page's prose (`gradsim-jax demo cloth --help`)."""
    out = []
    for number, line in prose(page):
        for span in re.findall(r"`([^`\n]+)`", line):
            words = span.split()
            first = next((w for w in words if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", w)), "")
            if first not in PROGRAMS and first not in LAUNCHERS:
                continue
            for argv, env in split_commands(span):
                out.append(Command(page, number, span, tuple(argv), tuple(env), inline=True))
    return out


def commands(page: Path) -> list[Command]:
    """Every command of the page (its shell blocks and its inline code), in the order of its lines."""
    found = [c for b in blocks(page) if b.lang in SHELL for c in block_commands(b)] + inline_commands(page)
    return sorted(found, key=lambda c: c.line)


def saved_files(page: Path) -> dict[str, str]:
    """The files a page asks the reader to save: a ```toml block whose first line is `# NAME: ...`."""
    out = {}
    for block in blocks(page):
        first = block.code.splitlines()[0] if block.code.strip() else ""
        found = re.match(r"^#\s*([\w./-]+\.toml):", first)
        if block.lang == "toml" and found:
            out[found.group(1)] = block.code
    return out


NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
TOKEN = re.compile(rf"(?P<number>{NUMBER})|(?P<word>[A-Za-z_]\w*)|(?P<other>\S)")


def tokens(text: str) -> list[str]:
    return [m.group(0) for m in TOKEN.finditer(text)]


def close(written: str, value: str) -> bool:
    """Whether `value` (a number printed) is what `written` (a number on the page) says, to its last digit."""
    try:
        got = float(value)
    except ValueError:
        return False
    mantissa, _, exponent = written.lower().partition("e")
    if "." not in mantissa and not exponent:
        return got == int(written)
    decimals = len(mantissa.partition(".")[2])
    unit = 10.0 ** (int(exponent or 0) - decimals)
    return abs(got - float(written)) <= unit * (1 + 1e-9)


def starts_with(comment: str, printed: str) -> str | None:
    """None when the comment starts with the printed text (numbers to the digits written, spacing aside),
    else what differs."""
    want, got = tokens(comment), tokens(printed)
    if len(want) < len(got):
        return f"the page says {comment!r}, the block printed {printed!r}"
    for w, g in zip(want, got):
        number = re.fullmatch(NUMBER, w) and re.fullmatch(NUMBER, g)
        if not (close(w, g) if number else w == g):
            return f"the page says {comment!r}, the block printed {printed!r} ({w} against {g})"
    return None
