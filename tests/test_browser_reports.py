"""The HTML reports, opened in a real browser: headless Chromium (Debian's `chromium`), driven over the DevTools
protocol with a small client below (no Selenium, nothing downloaded at run time).

For the `analyze` report and the `squeeze --quick` report: every <img> has loaded (complete, natural size > 0),
the console has no error and no exception was thrown, the page has a table of contents and its sections come in
the agreed order (verdict first, then plots, then tables; checked where the report marks them), and a full-page
screenshot is written to runs/browser/ (kept as a CI artifact, never committed).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import require

ROOT = Path(__file__).resolve().parents[1]
SHOTS = ROOT / "runs" / "browser"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-extensions", "--disable-default-apps", "--mute-audio", "--hide-scrollbars",
         "--window-size=1280,900", "--remote-debugging-port=0", "--remote-allow-origins=*"]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]  # squeeze --quick takes minutes on 2 cores


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    require(False, "needs Chromium (apt-get install -y chromium; .ci/run installs it)")
    return ""


class Browser:
    """One headless Chromium with a fresh profile, and one DevTools websocket session on its first page."""

    def __init__(self) -> None:
        import tempfile

        from websockets.sync.client import connect

        self.profile = Path(tempfile.mkdtemp(prefix="searchgym-chromium-"))  # a fresh profile, removed on close
        self.proc = subprocess.Popen([_chromium(), *FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port_file = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not (port_file.exists() and port_file.read_text().strip()):
            if time.monotonic() > deadline or self.proc.poll() is not None:
                self.close()
                pytest.fail("Chromium did not start (no DevToolsActivePort)")
            time.sleep(0.1)
        port = port_file.read_text().split()[0]
        import httpx

        for _ in range(50):
            pages = [t for t in httpx.get(f"http://127.0.0.1:{port}/json").json() if t.get("type") == "page"]
            if pages:
                break
            time.sleep(0.1)
        self.ws = connect(pages[0]["webSocketDebuggerUrl"], max_size=None, open_timeout=30)
        self._id = 0
        self.events: list[dict[str, Any]] = []
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable")

    def call(self, method: str, timeout: float = 60, **params: Any) -> dict[str, Any]:
        self._id += 1
        self.ws.send(json.dumps({"id": self._id, "method": method, "params": params}))
        deadline = time.monotonic() + timeout
        while True:
            msg = json.loads(self.ws.recv(timeout=max(0.1, deadline - time.monotonic())))
            if msg.get("id") == self._id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            self.events.append(msg)

    def wait_event(self, method: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not any(e.get("method") == method for e in self.events):
            self.events.append(json.loads(self.ws.recv(timeout=max(0.1, deadline - time.monotonic()))))

    def open(self, url: str) -> None:
        self.events.clear()
        self.call("Page.navigate", url=url)
        self.wait_event("Page.loadEventFired")
        self.call("Runtime.evaluate", expression="new Promise(r => setTimeout(r, 300))", awaitPromise=True)

    def evaluate(self, expression: str) -> Any:
        res = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in res:
            raise RuntimeError(res["exceptionDetails"])
        return res["result"].get("value")

    def errors(self) -> list[str]:
        out = []
        for e in self.events:
            m, p = e.get("method"), e.get("params", {})
            if m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append("console: " + " ".join(str(a.get("value", a.get("description"))) for a in p["args"]))
            elif m == "Runtime.exceptionThrown":
                out.append("exception: " + json.dumps(p.get("exceptionDetails", {}))[:500])
            elif m == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                out.append("log: " + p["entry"].get("text", "") + " " + p["entry"].get("url", ""))
            elif m == "Network.loadingFailed":
                out.append("network: " + json.dumps(p)[:300])
        return out

    def screenshot(self, path: Path) -> None:
        metrics = self.call("Page.getLayoutMetrics")
        size = metrics.get("cssContentSize") or metrics["contentSize"]
        width, height = 1280, min(int(size["height"]) + 1, 16000)
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1,
                  mobile=False)
        shot = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(shot["data"]))

    def close(self) -> None:
        try:
            self.ws.close()
        except Exception:  # noqa: BLE001,S110 - closing anyway
            pass
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        shutil.rmtree(self.profile, ignore_errors=True)


@pytest.fixture(scope="module")
def browser():
    pytest.importorskip("websockets")
    b = Browser()
    yield b
    b.close()


IMAGES = """(() => { const imgs = [...document.images];
  return {n: imgs.length, broken: imgs.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.src.slice(0, 80))};
})()"""
# Where the verdict, the first plot and the first table sit in document order, and whether there is a table of
# contents (a nav, an element with id/class toc or contents, or a "contents" heading).
LAYOUT = """(() => {
  const all = [...document.body.querySelectorAll('*')];
  const pos = (el) => el ? all.indexOf(el) : -1;
  const heads = [...document.querySelectorAll('h1, h2, h3')].map(h => h.textContent.trim().toLowerCase());
  const toc = !!document.querySelector('nav, #toc, .toc, [id*="contents"], [class*="contents"]') ||
              heads.some(h => h.includes('contents'));
  const verdict = all.find(el => /verdict|headline|finding/i.test((el.id || '') + ' ' + (el.className || '')) ||
    (/^h[1-3]$/i.test(el.tagName) && /verdict|finding|headline|summary/i.test(el.textContent)));
  return {heads, toc, verdict: pos(verdict), firstImg: pos(document.querySelector('img')),
          firstTable: pos(document.querySelector('table')), title: document.title};
})()"""


def _load(browser: Browser, html: Path, name: str) -> dict[str, Any]:
    assert html.exists(), html
    browser.open(html.resolve().as_uri())
    images = browser.evaluate(IMAGES)
    layout = browser.evaluate(LAYOUT)
    errors = browser.errors()
    browser.screenshot(SHOTS / f"{name}.png")
    (SHOTS / f"{name}.json").write_text(json.dumps({"images": images, "layout": layout, "errors": errors}, indent=1))
    return {"images": images, "layout": layout, "errors": errors}


def _run(args: list[str], cwd: Path, timeout: int) -> None:
    env = dict(os.environ, MPLBACKEND="Agg", HF_HUB_OFFLINE="1")
    r = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 0, f"{' '.join(args)}\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}"


@pytest.fixture(scope="module")
def analyze_page(browser, tmp_path_factory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("analyze")
    cli = [sys.executable, "-m", "searchgym.cli"]
    for agent in ("question", "diverse"):
        _run([*cli, "rollout", "--agent", agent, "-n", "30", "--samples", "2", "--out", f"{agent}.jsonl"], tmp, 300)
    _run([*cli, "analyze", "question.jsonl", "diverse.jsonl", "--out", "report"], tmp, 300)
    return _load(browser, tmp / "report" / "report.html", "analyze")


@pytest.fixture(scope="module")
def squeeze_page(browser, tmp_path_factory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("squeeze")
    _run([sys.executable, "-m", "searchgym.cli", "squeeze", "--quick", "--out", "demo"], tmp, 1500)
    return _load(browser, tmp / "demo" / "report.html", "squeeze_quick")


@pytest.mark.parametrize("page", ["analyze_page", "squeeze_page"])
def test_report_images_load_and_console_is_clean(page, request):
    got = request.getfixturevalue(page)
    assert got["images"]["n"] > 0, f"{page}: the report has no image"
    assert not got["images"]["broken"], f"{page}: images that did not load: {got['images']['broken']}"
    assert not got["errors"], f"{page}: console errors: {got['errors']}"
    assert got["layout"]["heads"], f"{page}: the report has no headings"


# Readable at a glance: a table of contents, the verdict first, then the plots, then the tables.
@pytest.mark.parametrize("page", ["analyze_page", "squeeze_page"])
def test_report_reads_at_a_glance(page, request):
    lay = request.getfixturevalue(page)["layout"]
    assert lay["toc"], f"{page}: no table of contents"
    assert 0 <= lay["verdict"] < lay["firstImg"] < lay["firstTable"], f"{page}: order verdict/plots/tables: {lay}"
