"""Headless Chromium for the report tests, driven through the DevTools protocol over a pipe (standard library only).

``find_chromium()`` names Debian's ``chromium`` (or ``chromium-browser``, ``google-chrome``) on PATH, or None.
``Chromium()`` starts it headless, without sandbox, with a fresh profile directory and no network (every host
resolves to nothing: the reports' CDN scripts fail at once instead of hanging), and ``inspect(url)`` loads a page and
reports its images, links and visible text.
"""
from __future__ import annotations

import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from urllib.parse import unquote, urlparse

#: Run in the page once it has loaded: every image (waiting for those still loading), every link, the text.
INSPECT_JS = """(async () => {
  const images = [...document.images];
  await Promise.all(images.map(i => i.complete ? null : new Promise(r => { i.onload = r; i.onerror = r; })));
  return {
    images: images.map(i => ({src: i.getAttribute("src").slice(0, 120), complete: i.complete,
                              naturalWidth: i.naturalWidth})),
    links: [...document.links].map(a => a.href),
    text: document.body ? document.body.innerText : "",
  };
})()"""


def _pipe_fds(read_fd: int, write_fd: int) -> None:
    """In the child: the pipe ends at fds 3 and 4 (moved above 10 first, so that neither overwrites the other)."""
    high_r, high_w = fcntl.fcntl(read_fd, fcntl.F_DUPFD, 10), fcntl.fcntl(write_fd, fcntl.F_DUPFD, 10)
    os.dup2(high_r, 3)
    os.dup2(high_w, 4)


def find_chromium() -> str | None:
    return next(filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))), None)


class Chromium:
    """One headless browser; ``with Chromium() as c: c.inspect("file:///...")``."""

    def __init__(self, binary: str | None = None, timeout: float = 60.0):
        self.binary = binary or find_chromium()
        self.timeout = timeout
        self.profile = tempfile.mkdtemp(prefix="tirbench-chromium-")
        self.next_id = 0
        self.buffer = b""

    def __enter__(self) -> "Chromium":
        to_browser_r, self.to_browser = os.pipe()
        self.from_browser, from_browser_w = os.pipe()
        # --remote-debugging-pipe: the browser reads commands on fd 3 and writes replies and events on fd 4
        self.proc = subprocess.Popen(
            [self.binary, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
             f"--user-data-dir={self.profile}", "--remote-debugging-pipe", "--host-resolver-rules=MAP * ~NOTFOUND",
             "about:blank"],
            pass_fds=(3, 4), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=lambda: _pipe_fds(to_browser_r, from_browser_w))
        os.close(to_browser_r)
        os.close(from_browser_w)
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.send("Browser.close")
            self.proc.wait(timeout=10)
        except Exception:  # noqa: BLE001 - it is going away either way
            self.proc.kill()
            self.proc.wait()
        os.close(self.to_browser)
        os.close(self.from_browser)
        shutil.rmtree(self.profile, ignore_errors=True)

    def _message(self, deadline: float) -> dict:
        while b"\0" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.from_browser], [], [], left)[0]:
                raise TimeoutError("no answer from Chromium")
            chunk = os.read(self.from_browser, 1 << 20)
            if not chunk:
                raise RuntimeError("Chromium closed the DevTools pipe")
            self.buffer += chunk
        raw, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(raw)

    def send(self, method: str, params: dict | None = None, session: str | None = None,
             wait_for: str | None = None) -> dict:
        """Send one command and return its result; with ``wait_for``, also wait for that event of the session."""
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.to_browser, json.dumps(msg).encode() + b"\0")
        deadline, result, seen = time.monotonic() + self.timeout, None, wait_for is None
        while result is None or not seen:
            m = self._message(deadline)
            if m.get("id") == self.next_id:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                result = m["result"]
            elif wait_for and m.get("method") == wait_for and m.get("sessionId") == session:
                seen = True
        return result

    def inspect(self, url: str) -> dict:
        """Load ``url`` in a new tab; its images (src, complete, naturalWidth), links (absolute) and text."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        try:
            self.send("Page.enable", session=session)
            self.send("Page.navigate", {"url": url}, session=session, wait_for="Page.loadEventFired")
            res = self.send("Runtime.evaluate", {"expression": INSPECT_JS, "awaitPromise": True,
                                                 "returnByValue": True}, session=session)
        finally:
            self.send("Target.closeTarget", {"targetId": target})
        if "exceptionDetails" in res:
            raise RuntimeError(f"inspecting {url}: {res['exceptionDetails']}")
        return res["result"]["value"]


def check_reports(browser: Chromium, index: Path) -> list[Path]:
    """Open ``index`` and every HTML page it links: every image loads (natural width > 0), every link from the index
    is a file that exists, no page shows a Python traceback. Returns the pages linked."""
    page = browser.inspect(index.as_uri())
    pages = []
    for href in page["links"]:
        url = urlparse(href)
        path = Path(unquote(url.path))
        assert url.scheme == "file" and path.is_file(), f"{index.name}: link {href} does not resolve"
        if path.suffix == ".html":
            pages.append(path)
    for path, shown in [(index, page), *((p, browser.inspect(p.as_uri())) for p in pages)]:
        broken = [i["src"] for i in shown["images"] if not (i["complete"] and i["naturalWidth"] > 0)]
        assert not broken, f"{path.name}: images that do not load: {broken}"
        assert "Traceback (most recent call last)" not in shown["text"], f"{path.name} shows a Python traceback"
    return pages
