"""Every Python block of the README and of the documentation site runs as written (one test each, so the
test workers share them), in a temporary folder; the blocks of one page do not share names."""

import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
BLOCKS = [(page, i, code) for page in PAGES
          for i, code in enumerate(re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.S))]


def test_docs_have_python_examples():
    assert BLOCKS, "the docs have no Python example"
    assert any(page.name == "README.md" for page, _, _ in BLOCKS), "the README has no Python example"


@pytest.mark.parametrize("page,index,code", BLOCKS,
                         ids=[f"{p.relative_to(ROOT)}:{i}" for p, i, _ in BLOCKS])
def test_python_block_runs(page, index, code, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    exec(compile(code, f"{page}:python block {index}", "exec"), {"__name__": "docs"})
