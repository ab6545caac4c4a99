"""index.html renders in a real headless browser: the leaderboard table and every image."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from perrec_eval.cli import main

BROWSER = next((shutil.which(name) for name in ("chromium", "chromium-browser") if shutil.which(name)), None)
needs_browser = pytest.mark.skipif(
    BROWSER is None, reason="needs Debian's chromium for a headless render: apt-get install -y chromium"
)
# Appended to a copy of the page (the page itself has no script): once everything has loaded, write each
# image's natural width and the number of leaderboard rows into the DOM that --dump-dom prints.
PROBE = """<script>
window.addEventListener("load", function () {
  var widths = Array.prototype.map.call(document.images, function (img) { return img.naturalWidth; });
  document.body.setAttribute("data-image-widths", widths.join(","));
  var rows = document.querySelectorAll("table.board tbody tr").length;
  document.body.setAttribute("data-board-rows", String(rows));
});
</script>"""


def _chromium(*args: str) -> subprocess.CompletedProcess:
    command = [BROWSER, "--headless", "--disable-gpu", "--no-sandbox", "--hide-scrollbars", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=True)


@pytest.fixture(scope="module")
def page(runs, tmp_path_factory):
    out = tmp_path_factory.mktemp("html") / "report"
    assert main(["report", str(runs["baselines"]), "--out", str(out), "--resamples", "500"]) == 0
    return out / "index.html"


def test_html_page_is_static_and_self_contained(page):
    text = page.read_text()
    assert "<script" not in text and not re.search(r'(src|href)="(https?:)?//', text)
    sources = re.findall(r'<img src="([^"]+)"', text)
    assert sources and all(src.startswith("plots/") and (page.parent / src).is_file() for src in sources)


@needs_browser
def test_html_renders_table_and_images_in_chromium(page):
    probe = page.with_name("probe.html")
    probe.write_text(page.read_text().replace("</body>", PROBE + "</body>"), encoding="utf-8")
    dom = _chromium("--virtual-time-budget=10000", "--dump-dom", probe.as_uri()).stdout
    widths = re.search(r'data-image-widths="([^"]*)"', dom).group(1).split(",")
    assert len(widths) == len(re.findall(r"<img ", page.read_text())) and all(int(w) > 0 for w in widths)
    assert re.search(r'data-board-rows="(\d+)"', dom).group(1) == "7"  # 5 baselines, floor, min. detectable Δ
    assert "history-affinity" in dom


@needs_browser
def test_html_screenshot_is_not_blank(page, tmp_path):
    import matplotlib.image

    shot = tmp_path / "page.png"
    _chromium("--window-size=1280,1600", f"--screenshot={shot}", page.as_uri())
    pixels = matplotlib.image.imread(shot)
    assert pixels.shape[:2] == (1600, 1280)
    assert pixels.std() > 0.05  # text, tables and plots, not an empty white page
