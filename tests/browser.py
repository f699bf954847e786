"""Open a report in headless Chromium (Playwright driving Debian's /usr/bin/chromium) and read
back what a reader would see: console errors, uncaught exceptions, dialogs, the plotly plots,
and whether any planted payload ran.

Playwright's own browser download is never used: ``executable_path`` points at the system
Chromium (``scripts/browser-setup.sh`` installs both). Without them the tests skip, or fail
when ``BIASSCOPE_REQUIRE_BROWSER=1``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from require import missing_modules, require

CHROMIUM = os.environ.get("BIASSCOPE_CHROMIUM", "/usr/bin/chromium")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage")
INSTALL = "scripts/browser-setup.sh <venv>/bin/python (Debian chromium + playwright)"

# Model text that would run if a report let it through as markup: every one sets the marker
# or opens a dialog; the tests assert neither happened.
PAYLOADS = (
    "<script>window.__pwned = 1; alert('script')</script>",
    "</script><script>window.__pwned = 1; alert('breakout')</script>",
    "<img src=x onerror=\"window.__pwned = 1; alert('img')\">",
    "<a href=\"javascript:window.__pwned = 1; alert('link')\">click me</a>",
    "<svg onload=\"window.__pwned = 1\"></svg>",
)
PAYLOAD = " ".join(PAYLOADS)

# What the page holds after load: the plots, and any element a payload could have made.
INSPECT = """() => {
  const plots = [...document.querySelectorAll('.js-plotly-plot')];
  return {
    pwned: typeof window.__pwned !== 'undefined',
    plots: plots.length,
    plotsWithSvg: plots.filter(p => p.querySelector('.main-svg')).length,
    plotsWithData: plots.filter(p => Array.isArray(p.data) && p.data.length).length,
    figureDivs: document.querySelectorAll('div[id^="biasscope-figure-"]').length,
    hostileScripts: [...document.querySelectorAll('script')]
      .filter(s => /^\\s*window\\.__pwned/.test(s.textContent)).length,
    hostileImages: [...document.querySelectorAll('img')].length,
    handlers: [...document.querySelectorAll('*')].filter(el => [...el.attributes].some(
      a => a.name.toLowerCase().startsWith('on'))).map(el => el.outerHTML.slice(0, 200)),
    jsLinks: [...document.querySelectorAll('*')].filter(el => [...el.attributes].some(
      a => /href$/i.test(a.name) && /^\\s*javascript:/i.test(a.value)))
      .map(el => el.outerHTML.slice(0, 200)),
    text: document.body.innerText,
    // Layout: nothing wider than the viewport (a table may scroll inside its wrapper), and
    // every text on a figure (ticks, axis titles, legend, annotations) inside the figure.
    firstFigureTop: (document.querySelector('div[id^="biasscope-figure-"]') ||
      document.body).getBoundingClientRect().top + window.scrollY,
    pageWidth: document.documentElement.scrollWidth,
    viewport: document.documentElement.clientWidth,
    tooWide: [...document.body.querySelectorAll('*')].filter(el => {
      if (el.closest('.table-wrap') && !el.classList.contains('table-wrap')) return false;
      if (el.closest('svg')) return false;  // plotly's layers: the figure's div is checked
      const r = el.getBoundingClientRect();
      return r.width > 0 && (r.right > document.documentElement.clientWidth + 1 || r.left < -1);
    }).map(el => el.tagName + '.' + el.getAttribute('class') + ': ' + el.textContent.slice(0, 60)),
    // Content cut off: a box that hides or scrolls what it holds. A table may scroll
    // inside its .table-wrap, with its first two columns in view.
    cutOff: [...document.body.querySelectorAll('*')].filter(el => {
      if (el.closest('svg') || el.closest('.js-plotly-plot')) return false;
      const style = getComputedStyle(el);
      const clips = v => v !== 'visible';
      const wide = clips(style.overflowX) && el.scrollWidth > el.clientWidth + 1;
      const tall = clips(style.overflowY) && el.scrollHeight > el.clientHeight + 1;
      if (!(wide || tall)) return false;
      if (el.classList.contains('table-wrap') && !tall) {
        const box = el.getBoundingClientRect();
        const first = [...el.querySelectorAll('tr:first-child > *')].slice(0, 2);
        return first.some(c => c.getBoundingClientRect().right > box.right + 1);
      }
      return true;
    }).map(el => el.tagName + '.' + el.getAttribute('class') + ' (' + el.scrollWidth + ' in ' +
                 el.clientWidth + ' px): ' + el.textContent.slice(0, 60)),
    scrollingTables: [...document.querySelectorAll('.table-wrap')]
      .filter(el => el.scrollWidth > el.clientWidth + 1)
      .map(el => el.scrollWidth + ' in ' + el.clientWidth + ' px: ' + el.textContent.slice(0, 60)),
    // Point labels on a figure drawn over one another.
    overlappingLabels: plots.flatMap(p => {
      const boxes = [...p.querySelectorAll('.textpoint text')]
        .filter(t => t.textContent.trim()).map(t => [t.textContent, t.getBoundingClientRect()]);
      const out = [];
      boxes.forEach(([a, r], i) => boxes.slice(i + 1).forEach(([b, q]) => {
        if (r.left < q.right - 1 && q.left < r.right - 1 && r.top < q.bottom - 1 &&
            q.top < r.bottom - 1) out.push(p.id + ': ' + a + ' / ' + b);
      }));
      return out;
    }),
    clippedText: plots.flatMap(p => {
      const box = p.getBoundingClientRect();
      return [...p.querySelectorAll('.main-svg text, .main-svg .legendtext')].filter(t => {
        const r = t.getBoundingClientRect();
        return r.width > 0 && t.textContent.trim() && (r.left < box.left - 1 ||
          r.right > box.right + 1 || r.top < box.top - 1 || r.bottom > box.bottom + 1);
      }).map(t => p.id + ': ' + t.textContent.slice(0, 60));
    }),
  };
}"""

# Hover the first point of every trace of every plot: hover labels render data text too.
HOVER = """() => {
  let hovered = 0;
  for (const gd of document.querySelectorAll('.js-plotly-plot')) {
    (gd.data || []).forEach((trace, i) => {
      const subplot = (trace.xaxis || 'x') + (trace.yaxis || 'y');
      if (trace.hoverinfo === 'skip' || !(trace.x || trace.y || []).length) return;
      // A heatmap's point is its [row, column]; any other trace's its index.
      const point = trace.type === 'heatmap' ? [0, 0] : 0;
      Plotly.Fx.hover(gd, [{curveNumber: i, pointNumber: point}], subplot);
      hovered++;
    });
  }
  return hovered;
}"""


def require_browser() -> None:
    """Skip unless Playwright and Chromium are here; fail if BIASSCOPE_REQUIRE_BROWSER=1."""
    missing = missing_modules("playwright")
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        missing.append(CHROMIUM)
    require(missing, "BIASSCOPE_REQUIRE_BROWSER", f"run {INSTALL}")


@contextmanager
def chromium() -> Iterator[Any]:
    """A headless Chromium with a fresh profile, offline-friendly flags, closed afterwards."""
    from playwright.sync_api import sync_playwright

    profile = tempfile.mkdtemp(prefix="biasscope-chromium-")
    try:
        with sync_playwright() as pw:
            context = pw.chromium.launch_persistent_context(
                profile, executable_path=CHROMIUM, headless=True, args=list(FLAGS),
                viewport={"width": 1280, "height": 900}, offline=True)
            try:
                yield context
            finally:
                context.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)


@dataclass
class Opened:
    """What a report did in the browser."""

    screenshot: Path
    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    dom: dict[str, Any] = field(default_factory=dict)
    hovered: int = 0


def open_report(context: Any, report: Path, shots: Path, name: str) -> Opened:
    """Load ``report``, let plotly draw, hover every trace, screenshot the whole page into
    ``shots`` (and ``$BIASSCOPE_ARTIFACTS``), and return what happened."""
    shots.mkdir(parents=True, exist_ok=True)
    opened = Opened(screenshot=shots / f"{name}.png")
    page = context.new_page()
    page.on("console", lambda m: m.type == "error" and opened.console_errors.append(m.text))
    page.on("pageerror", lambda e: opened.page_errors.append(str(e)))

    def dialog(d: Any) -> None:
        opened.dialogs.append(f"{d.type}: {d.message}")
        d.dismiss()

    page.on("dialog", dialog)
    page.on("request", lambda r: r.url.startswith("file:") or opened.requests.append(r.url))
    try:
        page.goto(report.resolve().as_uri(), wait_until="load")
        page.wait_for_function(
            "() => [...document.querySelectorAll('div[id^=\"biasscope-figure-\"]')]"
            ".every(d => d.querySelector('.main-svg'))", timeout=15_000)
        opened.hovered = int(page.evaluate(HOVER))
        page.screenshot(path=str(opened.screenshot), full_page=True)
        opened.dom = page.evaluate(INSPECT)
    finally:
        page.close()
    artifacts = os.environ.get("BIASSCOPE_ARTIFACTS")
    if artifacts:
        Path(artifacts).mkdir(parents=True, exist_ok=True)
        shutil.copy2(opened.screenshot, Path(artifacts) / opened.screenshot.name)
    return opened
