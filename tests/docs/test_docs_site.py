"""The documentation site: it builds strictly (a broken link, a missing API name or a page outside the
navigation fails the build), its command-line page is the parser's own help, and a newcomer reaches every
demo, every command and the "your own video" guide within two clicks of the navigation."""

import re
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))


def nav():
    """mkdocs.yml's navigation, read without mkdocs' own YAML tags."""
    text = (ROOT / "mkdocs.yml").read_text()
    return yaml.safe_load(text[text.index("\nnav:"):])["nav"]


def top_pages(entries):
    """The pages one click away: the top entries of the navigation and each section's index page."""
    out = []
    for entry in entries:
        value = entry if isinstance(entry, str) else next(iter(entry.values()))
        if isinstance(value, str):
            out.append(value)
        else:
            out += [v for v in value if isinstance(v, str)]  # a section's index page
            out += [next(iter(v.values())) for v in value if isinstance(v, dict)
                    and isinstance(next(iter(v.values())), str)]
    return out


def test_site_builds_strictly(tmp_path):
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(tmp_path / "site")],
                          cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "site" / "api" / "physics" / "index.html").read_text().count("simulate") > 3


def test_cli_page_is_the_parsers_help():
    from cli_reference import PAGE, page

    assert PAGE.read_text() == page(), "docs/cli.md is out of date: run python tools/cli_reference.py"


def test_two_clicks_to_every_demo_command_and_the_video_guide():
    from gradsim_jax.cli import COMMANDS
    from gradsim_jax.scenes.catalog import CONTACT_DEMOS, CONTROL_DEMOS, FEM_DEMOS, ODE_DEMOS, RIGID_DEMOS

    one_click = top_pages(nav())
    assert "howto/own-video.md" in one_click and "cli.md" in one_click and "tutorials/index.md" in one_click
    tutorials = (ROOT / "docs" / "tutorials" / "index.md").read_text()
    demos = ["cloth", "cloth-control", *RIGID_DEMOS, "rigid-shape", *FEM_DEMOS, *CONTACT_DEMOS, *ODE_DEMOS,
             *CONTROL_DEMOS]
    for demo in demos:  # Tutorials -> the demo's page
        assert f"]({demo}.md)" in tutorials, demo
        assert (ROOT / "docs" / "tutorials" / f"{demo}.md").exists(), demo
    cli = (ROOT / "docs" / "cli.md").read_text()
    for command in COMMANDS:  # Command line -> the command's section
        assert re.search(rf"^## {command}$", cli, re.M), command
