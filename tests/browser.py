"""Opening a page in a real browser: headless Chromium from the system's packages (Debian's `chromium`,
which `.ci/run` installs), either for the DOM of a loaded page (`loaded_dom`) or driven as a user drives it,
clicking (`DevTools`). Without it a test skips, except under CI (CI=true), where it fails."""

import fcntl
import json
import os
import re
import select
import shutil
import subprocess
import tempfile

import pytest

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync")


def chromium() -> str:
    """The Chromium executable; skips the test (fails it under CI) when there is none."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    message = "headless Chromium is not installed (apt-get install chromium)"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def loaded_dom(path, budget_ms: int = 8000) -> str:
    """The DOM of the local page `path` after it loaded and its scripts ran (`--dump-dom`)."""
    with tempfile.TemporaryDirectory() as profile:
        done = subprocess.run([chromium(), *FLAGS, f"--user-data-dir={profile}", f"--virtual-time-budget={budget_ms}",
                               "--dump-dom", path.resolve().as_uri()], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def body_data(dom: str, key: str):
    """The value of the body's data-KEY attribute in a dumped DOM, or None."""
    found = re.search(rf'<body[^>]*\bdata-{key}="([^"]*)"', dom)
    return found.group(1) if found else None


class DevTools:
    """A headless Chromium driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`: commands
    on the browser's file descriptor 3, answers and events on 4, JSON messages ended by a NUL byte), with one
    page open: enough to click a link as a user does and read where it led."""

    def __init__(self, width: int = 1400, height: int = 2400):
        executable = chromium()
        self._profile = tempfile.TemporaryDirectory()
        to_browser, self._commands = os.pipe()
        self._answers, from_browser = os.pipe()
        # Above 9 (bash takes such numbers, dash does not), so that the redirections to 3 and 4 cannot
        # overwrite one with the other.
        low = (to_browser, from_browser)
        to_browser, from_browser = (fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in low)
        for fd in low:
            os.close(fd)
        self._process = subprocess.Popen(
            ["bash", "-c", f'exec "$0" "$@" 3<&{to_browser} 4>&{from_browser}', executable, *FLAGS,
             f"--user-data-dir={self._profile.name}", "--remote-debugging-pipe", "about:blank"],
            pass_fds=(to_browser, from_browser), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_browser)
        os.close(from_browser)
        self._buffer, self._events, self._id = b"", [], 0
        target = self.send("Target.createTarget", url="about:blank")["targetId"]
        self._session = self.send("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        self.send("Page.enable", session=True)
        self.send("Emulation.setDeviceMetricsOverride", session=True, width=width, height=height,
                  deviceScaleFactor=1, mobile=False)

    def _message(self, timeout: float) -> dict:
        while b"\0" not in self._buffer:
            ready, _, _ = select.select([self._answers], [], [], timeout)
            if not ready:
                raise TimeoutError("Chromium did not answer")
            chunk = os.read(self._answers, 1 << 20)
            if not chunk:
                raise RuntimeError("Chromium closed its DevTools pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def send(self, method: str, session: bool = False, timeout: float = 30.0, **params):
        """Send one DevTools command (to the page's session when `session`) and return its result."""
        self._id += 1
        message = {"id": self._id, "method": method, "params": params}
        if session:
            message["sessionId"] = self._session
        os.write(self._commands, json.dumps(message).encode() + b"\0")
        while True:
            answer = self._message(timeout)
            if answer.get("id") == self._id:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                return answer.get("result", {})
            self._events.append(answer)

    def wait_for(self, event: str, timeout: float = 30.0) -> dict:
        """The next event of that name (of those not yet taken)."""
        while True:
            for i, seen in enumerate(self._events):
                if seen.get("method") == event:
                    return self._events.pop(i)
            self._events.append(self._message(timeout))

    def open(self, path) -> None:
        """Load a local file and wait for its load event."""
        self._events.clear()
        self.send("Page.navigate", session=True, url=path.resolve().as_uri())
        self.wait_for("Page.loadEventFired")

    def evaluate(self, expression: str):
        """The value of a JavaScript expression in the page."""
        result = self.send("Runtime.evaluate", session=True, expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(result["exceptionDetails"])
        return result["result"].get("value")

    def click(self, x: float, y: float) -> None:
        """A left click at (x, y) in the viewport, as a mouse makes it; waits for the page it loads."""
        self._events.clear()
        for kind in ("mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", session=True, type=kind, x=x, y=y, button="left", clickCount=1)
        self.wait_for("Page.loadEventFired")

    def close(self) -> None:
        try:
            self.send("Browser.close", timeout=10.0)
        except (OSError, RuntimeError, TimeoutError):
            pass
        try:
            self._process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        os.close(self._commands)
        os.close(self._answers)
        self._profile.cleanup()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
