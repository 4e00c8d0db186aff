"""The documentation site: it builds strictly (a broken link, a missing API name or a page outside the
navigation fails the build), it navigates from disk (site/index.html opened as a file, as the README says:
every link leads to a file, and Chromium's clicks on the navigation land on the pages they name), its
command-line page is the parser's own help, and a newcomer reaches every demo, every command and the "your
own video" guide within two clicks of the navigation. The site is built once (tests/docs/conftest.py)."""

import re
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

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


def test_site_builds_strictly(site):
    assert (site / "api" / "physics.html").read_text().count("simulate") > 3


class _Page(HTMLParser):
    """The addresses a page loads or links to (href, src, poster), its element ids and its title."""

    def __init__(self):
        super().__init__()
        self.urls, self.ids, self.title, self._in_title = [], set(), "", False

    def handle_starttag(self, tag, attrs):
        for key, value in attrs:
            if key in ("href", "src", "poster") and value:
                self.urls.append(value)
            elif key in ("id", "name") and value:
                self.ids.add(value)
        self._in_title = tag == "title"

    def handle_endtag(self, tag):
        self._in_title = False

    def handle_data(self, data):
        if self._in_title:
            self.title += data


def parsed(path: Path, cache: dict) -> _Page:
    if path not in cache:
        cache[path] = _Page()
        cache[path].feed(path.read_text())
    return cache[path]


def test_every_link_of_the_site_leads_to_a_file(site):
    """Opened from disk, a link to a folder shows the folder's listing, not its index.html: every address of
    every page (links, stylesheets, scripts, pictures, videos) must name a file, and an anchor one of the
    target page's ids. 404.html is left out: only a web server shows it."""
    cache, broken = {}, []
    pages = [p for p in sorted(site.rglob("*.html")) if p.name != "404.html"]
    for page in pages:
        for url in parsed(page, cache).urls:
            parts = urlsplit(url)
            if parts.scheme or parts.netloc:
                continue  # another site
            target = (page.parent / unquote(parts.path)).resolve() if parts.path else page
            where = f"{page.relative_to(site)}: {url}"
            if not target.is_file():
                broken.append(f"{where} -> {'a folder' if target.is_dir() else 'nothing'}")
            elif parts.fragment and target.suffix == ".html" and unquote(parts.fragment) not in parsed(target, cache).ids:
                broken.append(f"{where} -> no such anchor")
    assert len(pages) > 50
    assert not broken, f"{len(broken)} addresses lead nowhere from disk:\n" + "\n".join(broken[:40])


#: The first link of each top-level entry of the navigation (a page, or a section's first page) that is on
#: screen: (text, href, x, y), in the order of the sidebar. The other links are the same kind of link, and the
#: test above follows every one of them.
NAV_LINKS = """[...document.querySelectorAll('nav.md-nav--primary > ul > li')].map(item => {
  const a = item.querySelector('a.md-nav__link[href]');
  if (!a) return null;
  const r = a.getBoundingClientRect(), x = r.x + r.width / 2, y = r.y + r.height / 2;
  const hit = r.width > 0 && y < innerHeight ? document.elementFromPoint(x, y) : null;
  return hit && hit.closest('a') === a ? [a.textContent.trim(), a.getAttribute('href'), x, y] : null;
}).filter(link => link)"""


def test_chromium_clicks_through_the_navigation_from_disk(site):
    """Headless Chromium opens site/index.html as a file and clicks the first link of each top-level entry
    of the navigation, one after another, each from the page the last click led to: every click must land on
    the .html file the link names, with that page's title (a folder's listing is titled "Index of ...")."""
    from browser import DevTools

    cache, visited = {}, []
    with DevTools() as browser:
        browser.open(site / "index.html")
        labels = [text for text, *_ in browser.evaluate(NAV_LINKS)]
        assert len(labels) >= 8, labels
        for label in labels:
            here = {text: (href, x, y) for text, href, x, y in browser.evaluate(NAV_LINKS)}
            assert label in here, f"{label!r} is not in the navigation of {browser.evaluate('location.href')}"
            href, x, y = here[label]
            page = Path(unquote(urlsplit(browser.evaluate("location.href")).path))
            expected = (page.parent / unquote(urlsplit(href).path)).resolve()
            browser.click(x, y)
            title, location = browser.evaluate("[document.title, location.href]")
            assert location == expected.as_uri(), (label, href, location)
            assert expected.is_file(), (label, href, "not a file")
            assert title == parsed(expected, cache).title.strip(), (label, href, title)
            visited.append(expected)
    assert site / "getting-started.html" in visited and site / "howto" / "own-video.html" in visited


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
