"""A headless Chromium driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`: JSON messages
ended by NUL on file descriptors 3 and 4), with the standard library only: no driver package, no browser
download, the system's Chromium (Debian: `apt-get install chromium`). Enough to load a page at a window size,
evaluate JavaScript in it and take a screenshot."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    "--hide-scrollbars",
    "--remote-debugging-pipe",
)


def find_chromium() -> str | None:
    return next(filter(None, map(shutil.which, ("chromium", "chromium-browser"))), None)


# Puts the pipe ends given as arguments on 3 and 4, then runs the command: by way of descriptors above 9, so that
# putting one on 3 cannot overwrite the other (a preexec_fn could deadlock in a process with threads, and the
# shell cannot name a descriptor above 9).
_ON_3_AND_4 = """import fcntl, os, sys
ends = [fcntl.fcntl(int(fd), fcntl.F_DUPFD, 10) for fd in sys.argv[1:3]]
for fd, target in zip(ends, (3, 4)):
    os.dup2(fd, target)
    os.close(fd)
os.execv(sys.argv[3], sys.argv[3:])"""


class Browser:
    """One headless browser with one page of `width` x `height` CSS pixels; a context manager."""

    def __init__(self, exe: str, profile: Path, width: int, height: int, timeout: float = 60) -> None:
        self.timeout = timeout
        cmd_r, cmd_w = os.pipe()  # commands: Chromium reads them on its fd 3
        res_r, res_w = os.pipe()  # replies and events: Chromium writes them on its fd 4
        args = [exe, *FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}", "about:blank"]
        profile.mkdir(parents=True, exist_ok=True)
        self.log = profile / "chromium.log"
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", _ON_3_AND_4, str(cmd_r), str(res_w), *args],
                pass_fds=(cmd_r, res_w),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
            )
        os.close(cmd_r)
        os.close(res_w)
        self._out, self._in = cmd_w, res_r
        self._buffer = b""
        self._events: list[dict[str, Any]] = []
        self._next = 0
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        self.call("Page.enable", session=self.session)
        metrics = {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}
        self.call("Emulation.setDeviceMetricsOverride", metrics, session=self.session)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for fd in (self._out, self._in):
            with contextlib.suppress(OSError):  # already closed
                os.close(fd)
        try:
            self.proc.wait(10)  # a browser driven over a pipe quits when the pipe closes
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)

    def open(self, url: str) -> None:
        """Load `url` and wait for its load event."""
        self._events.clear()
        self.call("Page.navigate", {"url": url}, session=self.session)
        self._wait(lambda m: m.get("method") == "Page.loadEventFired" and m.get("sessionId") == self.session)

    def evaluate(self, expression: str) -> Any:  # noqa: ANN401 - whatever the expression returns
        params = {"expression": expression, "returnByValue": True}
        reply = self.call("Runtime.evaluate", params, session=self.session)
        if "exceptionDetails" in reply:
            raise RuntimeError(f"the page's script failed: {reply['exceptionDetails']}")
        return reply["result"].get("value")

    def screenshot(self, path: Path) -> None:
        data = self.call("Page.captureScreenshot", {"format": "png"}, session=self.session)["data"]
        path.write_bytes(base64.b64decode(data))

    def call(self, method: str, params: dict[str, Any] | None = None, session: str | None = None) -> dict[str, Any]:
        self._next += 1
        message: dict[str, Any] = {"id": self._next, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        try:
            os.write(self._out, json.dumps(message).encode() + b"\0")
        except BrokenPipeError:
            raise RuntimeError(self._gone()) from None
        reply = self._wait(lambda m, wanted=self._next: m.get("id") == wanted)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    def _gone(self) -> str:
        tail = self.log.read_text(errors="replace").strip().splitlines()[-5:]
        return f"Chromium exited (status {self.proc.poll()}): " + " | ".join(tail)

    def _wait(self, matches: Any) -> dict[str, Any]:  # noqa: ANN401 - a predicate on a message
        """The first message (kept events included) that `matches`; fails after the timeout."""
        deadline = time.monotonic() + self.timeout
        while True:
            for i, message in enumerate(self._events):
                if matches(message):
                    return self._events.pop(i)
            while b"\0" not in self._buffer:
                left = deadline - time.monotonic()
                if left <= 0 or not _readable(self._in, left):
                    raise TimeoutError(f"Chromium did not answer within {self.timeout:g}s")
                chunk = os.read(self._in, 1 << 20)
                if not chunk:
                    raise RuntimeError(self._gone())
                self._buffer += chunk
            raw, self._buffer = self._buffer.split(b"\0", 1)
            self._events.append(json.loads(raw))


def _readable(fd: int, seconds: float) -> bool:
    """poll, not select: select() refuses descriptors above 1024, which a long test worker's process can reach."""
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLHUP)
    return bool(poller.poll(seconds * 1000))
