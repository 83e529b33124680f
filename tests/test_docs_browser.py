"""The built documentation site, opened page by page in a real headless Chromium.

Every page renders with its main content and no JavaScript error, every link and source inside the
site resolves to a file of the built site (and every anchor to an element of its page), every image
loads, the toolkit page shows the plots its build drew, the families table sorts and filters, and
the search finds a value. The site is served on the loopback interface, and any request leaving it
is refused and fails the test: the site must need nothing from outside.

The browser is a Chromium binary driven by Playwright (the `playwright` package of the dev group):
Debian's `chromium`, installed by `bash scripts/fetch_browser.sh`, or the binary NNTERP_CHROMIUM names.
Where none is found the tests fail under CI (``.ci/run`` sets NNTERP_REQUIRE_BROWSER; a CI variable counts too) and are
skipped elsewhere, saying how to install it.
"""

from __future__ import annotations

import functools
import html.parser
import importlib.util
import http.server
import os
import shutil
import threading
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
INSTALL = "bash scripts/fetch_browser.sh (Debian's chromium), or set NNTERP_CHROMIUM to a Chromium or Chrome binary"
#: flags for a closed network: without the background ones Chromium keeps dialling Google's hosts
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
#: every page of the site, by its Markdown source; the URL mkdocs gives it
PAGES = sorted(path.name for path in DOCS.glob("*.md"))


def url_path(page: str) -> str:
    return "" if page == "index.md" else page.removesuffix(".md") + "/"


def chromium() -> str | None:
    """The Chromium binary to drive: NNTERP_CHROMIUM, else the first one installed."""
    named = os.environ.get("NNTERP_CHROMIUM")
    if named:
        return named
    for candidate in ("/usr/lib/chromium/chromium", "/usr/bin/chromium", "/usr/bin/chromium-browser"):
        if os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("chromium") or shutil.which("google-chrome")


def missing(what: str) -> None:
    """No browser to test with: a failure under CI, a skip that says how to install it elsewhere."""
    message = f"{what}; install it with: {INSTALL}"
    if os.environ.get("NNTERP_REQUIRE_BROWSER") or os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def _docs_site():
    """tests/test_docs_site.py, for its ``built_site``: one build per session shared with that test."""
    spec = importlib.util.spec_from_file_location("docs_site_build", Path(__file__).with_name("test_docs_site.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The site as the strict build writes it (the toolkit's plots drawn by docs/hooks/plots.py)."""
    directory, outcome = _docs_site().built_site(tmp_path_factory)
    assert outcome["returncode"] == 0, outcome["stderr"]
    return directory


@pytest.fixture(scope="module")
def server(site):
    """The built site served on 127.0.0.1, on a free port: its origin, e.g. http://127.0.0.1:41234."""
    handler = functools.partial(Quiet, directory=str(site))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass


@pytest.fixture(scope="module")
def browser():
    executable = chromium()
    if executable is None or not os.access(executable, os.X_OK):
        missing("no Chromium found for the documentation's browser test")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing("the playwright package is not installed (uv sync installs it with the dev group)")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, args=FLAGS)
        yield launched
        launched.close()


class Opened:
    """One page as the browser shows it, with every error it reported and every request that left the site."""

    def __init__(self, browser, origin: str, path: str):
        self.origin = origin
        self.errors: list[str] = []
        self.outside: list[str] = []
        self.context = browser.new_context()
        self.context.route("**/*", self._only_the_site)
        self.page = self.context.new_page()
        self.page.on("pageerror", lambda error: self.errors.append(f"uncaught: {error}"))
        self.page.on("console", lambda message: message.type == "error" and self.errors.append(f"console: {message.text}"))
        self.page.on("requestfailed", lambda request: self.errors.append(f"request failed: {request.url} ({request.failure})"))
        self.page.on("response", lambda response: response.status >= 400 and self.errors.append(f"{response.status}: {response.url}"))
        self.response = self.page.goto(f"{origin}/{path}", wait_until="load")
        self.page.wait_for_load_state("networkidle")

    def _only_the_site(self, route):
        if route.request.url.startswith(self.origin + "/"):
            route.continue_()
        else:
            self.outside.append(route.request.url)
            route.abort()

    def close(self):
        self.context.close()


@pytest.fixture
def opened(browser, server):
    pages: list[Opened] = []

    def open_page(path: str) -> Opened:
        pages.append(Opened(browser, server, path))
        return pages[-1]

    yield open_page
    for page in pages:
        page.close()


class Ids(html.parser.HTMLParser):
    """Every id (and a's name) of an HTML file: what a fragment may point at."""

    def __init__(self):
        super().__init__()
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if value and (name == "id" or (name == "name" and tag == "a")):
                self.ids.add(value)


@functools.cache
def ids_of(file: Path) -> frozenset[str]:
    parser = Ids()
    parser.feed(file.read_text(errors="replace"))
    return frozenset(parser.ids)


def target(site: Path, path: str) -> Path:
    """The built file a site URL's path is served from."""
    file = site / unquote(path).lstrip("/")
    return file / "index.html" if file.is_dir() else file


#: everything a page links to or loads: links, images, scripts, stylesheets, sources
REFERENCES = """() => Array.from(document.querySelectorAll('a[href], link[href], img[src], script[src], source[src], iframe[src]'))
    .map(element => element.href || element.src)"""


@pytest.mark.parametrize("page", PAGES)
def test_each_page_renders_with_no_error_and_no_broken_link(site, opened, page):
    shown = opened(url_path(page))
    assert shown.response is not None and shown.response.status == 200, page
    # the main content is there: the page's own title and its text, rendered by the theme
    article = shown.page.locator("article.md-content__inner")
    assert article.count() == 1, f"{page}: no main content"
    assert article.locator("h1").count() >= 1, f"{page}: the content has no title"
    assert len(article.inner_text()) > 200, f"{page}: the content is nearly empty"
    assert not shown.errors, f"{page}: the browser reported {shown.errors}"
    assert not shown.outside, f"{page}: asked for something outside the site: {shown.outside}"

    broken = []
    for reference in shown.page.evaluate(REFERENCES):
        if not reference.startswith(shown.origin + "/"):
            continue  # a link out of the site (the theme's credit, nnsight, transformers): not fetched here
        parts = urlsplit(reference)
        file = target(site, parts.path)
        if not file.is_file():
            broken.append(f"{reference}: no {file.relative_to(site)} in the built site")
        elif parts.fragment and file.suffix == ".html" and unquote(parts.fragment) not in ids_of(file):
            broken.append(f"{reference}: no #{parts.fragment} on {file.relative_to(site)}")
    assert not broken, f"{page}: broken links:\n" + "\n".join(broken)

    images = shown.page.evaluate("() => Array.from(document.images).map(image => [image.currentSrc, image.complete, image.naturalWidth])")
    unloaded = [source for source, complete, width in images if not complete or width == 0]
    assert not unloaded, f"{page}: images that did not load: {unloaded}"


def test_the_toolkit_page_shows_the_plots_its_example_draws(site, opened):
    shown = opened("toolkit/")
    images = shown.page.evaluate(
        "() => Array.from(document.querySelectorAll('article img')).map(image => [image.getAttribute('src'), image.naturalWidth, image.naturalHeight])"
    )
    plots = {Path(source).name: (width, height) for source, width, height in images if "img/toolkit/" in source}
    assert set(plots) == {"lens.png", "pattern.png", "sweep.png"}, images
    for name, (width, height) in plots.items():
        assert width > 100 and height > 100, (name, width, height)
        assert (site / "img" / "toolkit" / name).stat().st_size > 1000, name
    # the code is highlighted and has the theme's copy button
    assert shown.page.locator("article .highlight code .kn").count() > 0
    assert shown.page.locator('article button.md-code__button[data-md-type="copy"]').count() > 0


def test_the_families_table_sorts_by_a_header_and_filters_by_words(opened):
    shown = opened("families/")
    table = shown.page.locator("article table").first
    rows = table.locator("tbody tr")
    total = rows.count()
    assert total > 100

    def column(index: int) -> list[str]:
        return table.evaluate(
            "(table, index) => Array.from(table.tBodies[0].rows).filter(row => !row.hidden).map(row => row.cells[index].textContent.trim())",
            index,
        )

    # "checks passed" (28/28, 20/22 ...) sorts by its number, up on the first click and down on the second
    header = table.locator("thead th").nth(4)
    header.click()
    assert header.get_attribute("aria-sort") == "ascending"
    passed = [int(cell.split("/")[0]) for cell in column(4)]
    assert passed == sorted(passed) and passed[0] < passed[-1]
    header.click()
    assert header.get_attribute("aria-sort") == "descending"
    passed = [int(cell.split("/")[0]) for cell in column(4)]
    assert passed == sorted(passed, reverse=True)
    # the model types sort by name, and the rows stay whole
    names = table.locator("thead th").first
    names.click()
    ascending = column(0)
    assert sorted(ascending) == sorted(column(0)) and len(ascending) == total
    assert ascending[0] < ascending[-1]
    assert [row[:2] for row in zip(column(0), column(1))] == [row[:2] for row in zip(ascending, column(1))]

    box = shown.page.locator("article .nnterp-filter input").first
    # the rows kept hold every word typed, anywhere in the row
    box.fill("mamba pass")
    kept = table.evaluate("table => Array.from(table.tBodies[0].rows).filter(row => !row.hidden).map(row => row.textContent)")
    assert 0 < len(kept) < total
    assert all("mamba" in row and "pass" in row for row in kept), kept
    assert "mamba" in column(0)
    assert f"{len(kept)} of {total} rows" in shown.page.locator("article .nnterp-filter-count").first.inner_text()
    box.fill("")
    assert len(column(0)) == total
    assert not shown.errors, shown.errors


def test_the_search_finds_a_value(opened):
    shown = opened("")
    shown.page.keyboard.press("/")  # the theme's shortcut to the search box
    shown.page.locator("input.md-search__input").press_sequentially("attention_probabilities")
    results = shown.page.locator(".md-search-result__item a")
    results.first.wait_for(timeout=15_000)
    # the value's reference entry on the values page is among what it finds
    found = shown.page.evaluate("() => Array.from(document.querySelectorAll('.md-search-result__item a')).map(link => link.href)")
    assert any("/values/" in href and href.endswith("#nnterp.Attention.attention_probabilities") for href in found), found
    assert not shown.errors, shown.errors
