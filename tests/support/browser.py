"""Headless Chromium driven over the DevTools protocol on a pipe (--remote-debugging-pipe).

No port, no websocket library, no driver binary: Chromium reads commands from fd 3 and writes answers
to fd 4, one JSON message per NUL-terminated frame. Enough of the protocol to load a page, collect
console errors, exceptions and network requests, query the DOM and take a screenshot.
"""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--hide-scrollbars", "--mute-audio")
DEADLINE_S = 60.0  # an upper bound on one answer, so a wedged browser fails the test instead of hanging it


def chromium_path() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    raise RuntimeError("no chromium on PATH: run scripts/setup --test, which installs Debian's chromium")


class Browser:
    def __init__(self, profile: Path) -> None:
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()

        def wire_fds() -> None:  # in the child: the protocol's fds 3 (commands in) and 4 (answers out)
            # Copies first: a pipe end may already be fd 3 or 4, and os.pipe() ends close on exec, which
            # dup2 onto itself would not undo (os.dup2 makes its target inheritable).
            commands, answers = os.dup(to_child_r), os.dup(from_child_w)
            os.dup2(commands, 3)
            os.dup2(answers, 4)

        self.proc = subprocess.Popen(
            [chromium_path(), *FLAGS, f"--user-data-dir={profile}", "--remote-debugging-pipe", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=wire_fds, close_fds=False,
        )
        os.close(to_child_r)
        os.close(from_child_w)
        self._buf = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []
        self.session: str | None = None

    # ---- the protocol ---------------------------------------------------------------------------
    def _read_message(self) -> dict[str, Any]:
        end = time.monotonic() + DEADLINE_S
        while b"\0" not in self._buf:
            left = end - time.monotonic()
            ready, _, _ = select.select([self._from_child], [], [], max(0.0, left))
            if not ready:
                raise TimeoutError(f"chromium sent nothing for {DEADLINE_S:.0f} s")
            chunk = os.read(self._from_child, 1 << 20)
            if not chunk:
                raise RuntimeError(f"chromium closed the DevTools pipe (exit code {self.proc.poll()})")
            self._buf += chunk
        frame, self._buf = self._buf.split(b"\0", 1)
        msg: dict[str, Any] = json.loads(frame)
        return msg

    def send(self, method: str, params: dict[str, Any] | None = None, *, browser: bool = False) -> dict[str, Any]:
        self._next_id += 1
        msg: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if self.session and not browser:
            msg["sessionId"] = self.session
        os.write(self._to_child, json.dumps(msg).encode() + b"\0")
        while True:
            answer = self._read_message()
            if answer.get("id") == self._next_id:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                result: dict[str, Any] = answer.get("result", {})
                return result
            if "method" in answer:
                self.events.append(answer)

    def wait_event(self, method: str) -> dict[str, Any]:
        for e in self.events:
            if e["method"] == method:
                self.events.remove(e)
                return e
        while True:
            msg = self._read_message()
            if msg.get("method") == method:
                return msg
            if "method" in msg:
                self.events.append(msg)

    # ---- pages ------------------------------------------------------------------------------------
    def open(self, path: Path, width: int = 1400, height: int = 1000) -> None:
        """A fresh tab showing the file; returns once its load event fired."""
        target = self.send("Target.createTarget", {"url": "about:blank"}, browser=True)["targetId"]
        self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True},
                                 browser=True)["sessionId"]
        self.events.clear()
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable")
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
        self.send("Page.navigate", {"url": path.resolve().as_uri()})
        self.wait_event("Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        out = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in out:
            raise RuntimeError(f"page script failed: {out['exceptionDetails']}")
        return out["result"].get("value")

    def errors(self) -> list[str]:
        """Console errors, uncaught exceptions and log errors seen since the page opened."""
        out = []
        for e in self.events:
            p = e.get("params", {})
            if e["method"] == "Runtime.exceptionThrown":
                out.append(str(p.get("exceptionDetails")))
            elif e["method"] == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append(str(p.get("args")))
            elif e["method"] == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                out.append(str(p["entry"].get("text")))
        return out

    def requests(self) -> list[str]:
        return [e["params"]["request"]["url"] for e in self.events if e["method"] == "Network.requestWillBeSent"]

    def screenshot(self, path: Path) -> None:
        """The whole page, not just the viewport."""
        size = self.evaluate("[document.documentElement.scrollWidth, document.documentElement.scrollHeight]")
        width, height = (int(v) for v in size)
        shot = self.send("Page.captureScreenshot", {
            "format": "png", "captureBeyondViewport": True,
            "clip": {"x": 0, "y": 0, "width": width, "height": height, "scale": 1},
        })
        path.write_bytes(base64.b64decode(shot["data"]))

    def print_pdf(self) -> bytes:
        """The page as the browser prints it (A4), so a report's print layout is exercised too."""
        out = self.send("Page.printToPDF", {"paperWidth": 8.27, "paperHeight": 11.69, "printBackground": True})
        return base64.b64decode(out["data"])

    def close(self) -> None:
        try:
            if self.proc.poll() is None:
                self.session = None
                self.send("Browser.close", browser=True)
        except (RuntimeError, TimeoutError, OSError):
            pass
        finally:
            try:
                self.proc.wait(timeout=DEADLINE_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            os.close(self._to_child)
            os.close(self._from_child)
