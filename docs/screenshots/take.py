#!/usr/bin/env python3
"""Retake the screenshots in docs/screenshots/ from a small real study.

    python docs/screenshots/take.py

In a scratch folder under /tmp (removed at the end unless --keep) this script runs the smoke
profile: `seedvar train` for seeds 0, 1 and 2, `seedvar aggregate`, `seedvar report` and a
2-trial `seedvar sweep`; starts `mlflow ui` with the command `seedvar report` printed and
`optuna-dashboard`, on free local ports; in headless Chromium with a new profile (nothing in
localStorage) opens the runs-table link `seedvar report` printed, the path a user takes, and
sets the table's rows and columns in the page, then each other surface, and saves PNGs (in
this folder, or --out); stops the servers and the browser on the way out, error or not.

Needs the project installed with the dev extra (mlflow, optuna-dashboard) in the Python that
runs it, and Chromium (Debian: `apt-get install chromium`). It drives Chromium over the
DevTools protocol on a pipe (`--remote-debugging-pipe`), so nothing beyond the standard
library and the project's own dependencies is needed: no Node, no Playwright. The code that
runs is this checkout's (src/ goes first on PYTHONPATH).
"""

from __future__ import annotations

import argparse
import base64
import fcntl
import json
import os
import re
import select
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
OUT = Path(__file__).resolve().parent
SEEDS = [0, 1, 2]
WIDTH, HEIGHT = 1600, 1000

# the runs table's columns, chosen in its Columns menu as a user would: MNLI accuracy and
# the HANS non-entailed heuristics, McCoy et al.'s headline subcase (subject/object swap)
# among them, in place of attributes that would push them out of a 1600 px window
RUN_METRICS = [
    "mnli/matched_accuracy",
    "hans/lexical_nonent",
    "hans/subseq_nonent",
    "hans/constituent_nonent",
    "hans/ln_subject/object_swap",
]
HIDDEN_ATTRIBUTES = ["Dataset", "Source", "Models"]
# widths in pixels, set by dragging the column headers' edges, in the table's order (metrics
# by name): what fits at 1600 px
COLUMN_WIDTHS = {
    "attributes.`Run Name`": 240,
    "metrics.`hans/constituent_nonent`": 165,
    "metrics.`hans/lexical_nonent`": 140,
    "metrics.`hans/ln_subject/object_swap`": 190,
    "metrics.`hans/subseq_nonent`": 135,
    "metrics.`mnli/matched_accuracy`": 160,
}

SWEEP_OVERRIDES = [
    "sweep.seeds_per_trial=2",
    "sweep.space.learning_rate={low: 1.0e-4, high: 3.0e-3, log: true}",
    # the default space also draws 2-4 epochs and up to 3,000 HANS training pairs: pinned
    # here so that the sweep takes seconds
    "sweep.space.epochs={choices: [1]}",
    "sweep.space.batch_size={choices: [16]}",
    "sweep.space.augment_examples={low: 0, high: 0}",
]


def log(message: str) -> None:
    print(f"[take] {message}", flush=True)


def tool(name: str) -> str:
    """An executable next to this Python (its virtual environment) or else on PATH."""
    beside = Path(sys.executable).parent / name
    if beside.exists():
        return str(beside)
    found = shutil.which(name)
    if not found:
        sys.exit(f"take: {name} not found; install the project with its dev extra")
    return found


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Processes:
    """Background processes, each in its own process group, stopped in reverse order."""

    def __init__(self) -> None:
        self.running: list[tuple[str, subprocess.Popen]] = []

    def start(self, name: str, args: list[str], **kwargs: Any) -> subprocess.Popen:
        process = subprocess.Popen(args, start_new_session=True, **kwargs)
        self.running.append((name, process))
        return process

    def stop_all(self) -> None:
        while self.running:
            name, process = self.running.pop()
            if process.poll() is not None:
                continue
            try:
                os.killpg(process.pid, signal.SIGTERM)
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
            except ProcessLookupError:
                pass
            log(f"stopped {name}")


def run_step(args: list[str], cwd: Path, env: dict[str, str], logs: Path, name: str) -> None:
    log(" ".join([Path(args[0]).name, *args[1:]]))
    log_file = logs / f"{name}.log"
    with log_file.open("w") as out:
        result = subprocess.run(args, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
    if result.returncode:
        tail = log_file.read_text(errors="replace")[-3000:]
        sys.exit(f"take: {name} failed ({result.returncode}); end of {log_file}:\n{tail}")


def make_study(scratch: Path, env: dict[str, str], logs: Path) -> None:
    seedvar = tool("seedvar")
    (scratch / "data").symlink_to(REPO / "data")
    seeds = "seeds=[" + ",".join(map(str, SEEDS)) + "]"
    for seed in SEEDS:
        run_step(
            [seedvar, "train", "--profile", "smoke", "--seed", str(seed)],
            scratch,
            env,
            logs,
            f"train-{seed}",
        )
    run_step(
        [seedvar, "aggregate", "--profile", "smoke", "--set", seeds],
        scratch,
        env,
        logs,
        "aggregate",
    )
    run_step(
        [seedvar, "report", "--profile", "smoke", "--set", seeds], scratch, env, logs, "report"
    )
    sweep = [seedvar, "sweep", "--profile", "smoke", "--trials", "2"]
    for override in SWEEP_OVERRIDES:
        sweep += ["--set", override]
    run_step(sweep, scratch, env, logs, "sweep")


def wait_http(url: str, process: subprocess.Popen, name: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            sys.exit(f"take: {name} exited ({process.returncode}) before answering {url}")
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                if response.status == 200:
                    log(f"{name} answers at {url}")
                    return
        except OSError:
            pass
        time.sleep(1)
    sys.exit(f"take: {name} did not answer {url} within {timeout:.0f} s")


# headless, as root, on a closed network (no connection attempts): also tests/test_mlflow_ui.py
HEADLESS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


class Chromium:
    """Headless Chromium driven over the DevTools protocol on a pipe (fds 3 and 4)."""

    FLAGS = [
        *HEADLESS,
        "--disable-dev-shm-usage",
        "--hide-scrollbars",
        "--remote-debugging-pipe",
    ]

    def __init__(self, executable: str, profile: Path, processes: Processes, logs: Path):
        to_child_read, self._write = os.pipe()
        self._read, from_child_write = os.pipe()

        def place_pipes() -> None:  # in the child: its ends become fds 3 (in) and 4 (out)
            high_in = fcntl.fcntl(to_child_read, fcntl.F_DUPFD, 10)
            high_out = fcntl.fcntl(from_child_write, fcntl.F_DUPFD, 10)
            os.dup2(high_in, 3)
            os.dup2(high_out, 4)

        args = [
            executable,
            *self.FLAGS,
            f"--user-data-dir={profile}",
            f"--window-size={WIDTH},{HEIGHT}",
            "about:blank",
        ]
        self.process = processes.start(
            "chromium",
            args,
            preexec_fn=place_pipes,
            close_fds=False,
            stdout=(logs / "chromium.log").open("w"),
            stderr=subprocess.STDOUT,
        )
        os.close(to_child_read)
        os.close(from_child_write)
        self._buffer = b""
        self._next_id = 0
        self.session = ""
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        self.call("Page.enable")
        self.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False},
        )

    def call(self, method: str, params: dict | None = None, timeout: float = 60) -> dict:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if self.session and not method.startswith("Target."):
            message["sessionId"] = self.session
        os.write(self._write, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            while b"\0" in self._buffer:
                raw, self._buffer = self._buffer.split(b"\0", 1)
                reply = json.loads(raw)
                if reply.get("id") == self._next_id:
                    if "error" in reply:
                        raise RuntimeError(f"{method}: {reply['error']}")
                    return reply.get("result", {})
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._read], [], [], left)[0]:
                raise TimeoutError(f"Chromium did not answer {method} within {timeout} s")
            chunk = os.read(self._read, 1 << 20)
            if not chunk:
                raise RuntimeError(f"Chromium closed the pipe during {method}")
            self._buffer += chunk

    def evaluate(self, expression: str) -> Any:
        result = self.call(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
        )
        return result.get("result", {}).get("value")

    def goto(self, url: str) -> None:
        self.call("Page.navigate", {"url": url})

    def wait_for(self, predicate: str, what: str, timeout: float = 90, settle: float = 4) -> None:
        """Poll a JavaScript expression until it is true, then let the page settle."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if self.evaluate(f"Boolean({predicate})"):
                    time.sleep(settle)
                    return
            except RuntimeError:
                pass  # a navigation in progress
            time.sleep(0.5)
        text = self.evaluate("document.body ? document.body.innerText.slice(0, 500) : ''")
        sys.exit(f"take: {what} not shown within {timeout:.0f} s; the page says:\n{text}")

    def click(self, target: str, by_expression: bool = False) -> bool:
        """Click the middle of an element (a CSS selector, or a JavaScript expression)."""
        element = target if by_expression else f"document.querySelector({json.dumps(target)})"
        box = self.evaluate(
            f"(() => {{ const e = {element}; if (!e) return null; "
            "e.scrollIntoView({block: 'nearest'}); "
            "const r = e.getBoundingClientRect(); "
            "return [r.left + r.width / 2, r.top + r.height / 2]; })()"
        )
        if not box:
            log(f"  warning: nothing to click at {target}")
            return False
        for kind in ("mousePressed", "mouseReleased"):
            self.call(
                "Input.dispatchMouseEvent",
                {"type": kind, "x": box[0], "y": box[1], "button": "left", "clickCount": 1},
            )
        time.sleep(0.3)
        return True

    def drag(self, target: str, dx: float) -> bool:
        """Drag an element (a JavaScript expression) `dx` pixels to the right, held a
        quarter of its width in from its left (a column's resize handle straddles the next
        column's header, which a press there would sort by)."""
        box = self.evaluate(
            f"(() => {{ const e = {target}; if (!e) return null; "
            "const r = e.getBoundingClientRect(); "
            "return [r.left + r.width / 4, r.top + r.height / 2]; })()"
        )
        if not box:
            log(f"  warning: nothing to drag at {target}")
            return False
        x, y = box
        mouse = {"x": x, "y": y, "button": "left", "clickCount": 1}
        self.call("Input.dispatchMouseEvent", {**mouse, "type": "mousePressed"})
        for step in range(1, 11):
            moved = {**mouse, "x": x + dx * step / 10, "buttons": 1}
            self.call("Input.dispatchMouseEvent", {**moved, "type": "mouseMoved"})
            time.sleep(0.05)
        self.call("Input.dispatchMouseEvent", {**mouse, "x": x + dx, "type": "mouseReleased"})
        time.sleep(0.3)
        return True

    def type_text(self, text: str) -> None:
        self.call("Input.insertText", {"text": text})

    KEYS = {"Enter": (13, "\r"), "Escape": (27, "")}

    def press(self, key: str) -> None:
        code, text = self.KEYS[key]
        for kind in ("keyDown", "keyUp"):
            self.call(
                "Input.dispatchKeyEvent",
                {
                    "type": kind,
                    "key": key,
                    "code": key,
                    "windowsVirtualKeyCode": code,
                    **({"text": text} if text and kind == "keyDown" else {}),
                },
            )
        time.sleep(0.3)

    def screenshot(self, path: Path) -> None:
        data = self.call("Page.captureScreenshot", {"format": "png"})["data"]
        path.write_bytes(base64.b64decode(data))
        log(f"wrote {path} ({path.stat().st_size // 1024} KB)")


def body_has(*texts: str) -> str:
    return " && ".join(f"document.body.innerText.includes({json.dumps(t)})" for t in texts)


NO_SPINNER = "!document.querySelector('[class*=spinner i], [aria-busy=true]')"
CLOSE_ASSISTANT = (
    "document.querySelector('[data-component-id=\"mlflow.assistant.chat_panel.close\"]')?.click()"
)


class MLflowPages:
    """The MLflow UI of the scratch study as a user meets it: the browser's profile is new
    (nothing in localStorage), the first page is the runs-table link that `seedvar report`
    printed, and the table's columns and rows are set in the page; the assistant is closed."""

    def __init__(self, scratch: Path, browser: Chromium, url: str, link: str):
        import mlflow

        self.browser, self.url, self.link = browser, url, link
        client = mlflow.MlflowClient(f"sqlite:///{scratch / 'mlruns' / 'mlflow.db'}")
        self.experiment_id = client.get_experiment_by_name("seedvar").experiment_id
        runs = client.search_runs([self.experiment_id])
        self.study = next(r for r in runs if r.data.tags.get("seedvar.role") == "study")
        self.seeds = sorted(
            (r for r in runs if r.data.tags.get("mlflow.parentRunId") == self.study.info.run_id),
            key=lambda r: r.info.run_name,
        )
        self.parents = [
            r.info.run_name for r in runs if r.data.tags.get("seedvar.role") in ("study", "trial")
        ]

    def open(self, route: str, ready: str, what: str, then: str = "true") -> None:
        """Open a page of the model-training workflow (as the UI's own links do), wait for
        `ready`, close the assistant panel (it opens on a first visit), then wait for `then`."""
        joiner = "&" if "?" in route else "?"
        self._show(f"{self.url}/#{route}{joiner}workflowType=machine_learning", ready, what, then)

    def _show(self, url: str, ready: str, what: str, then: str = "true") -> None:
        self.browser.goto(url)
        self.browser.wait_for(f"({ready}) && {NO_SPINNER}", what, settle=2)
        self.browser.evaluate(CLOSE_ASSISTANT)
        self.browser.wait_for(then, what)

    def runs_table(self, path: Path) -> None:
        """The printed link; then, as a user does: the study's and the sweep trials' rows
        expanded to their seeds, the MNLI and HANS columns chosen in the Columns menu, widened
        to show their names (the table renders a column only once it has room)."""
        browser, study = self.browser, self.study.info.run_name
        self._show(self.link, body_has(study), "the runs table from the printed link")
        route = browser.evaluate("location.hash")
        if not route.startswith(f"#/experiments/{self.experiment_id}/runs"):
            sys.exit(f"take: the printed link {self.link} opened {route}, not the runs table")
        if "/overview" in browser.evaluate(
            "[...document.querySelectorAll('aside a')].map(a => a.getAttribute('href')).join()"
        ):
            sys.exit("take: the printed link opened the GenAI pages, not model training")
        for parent in self.parents:  # its row's + button: its seeds below it
            expand = (
                "[...document.querySelectorAll('[role=gridcell] a')]"
                f".find(a => a.innerText.trim() === {json.dumps(parent)})"
                "?.closest('[role=gridcell]').querySelector('button')"
            )
            browser.click(expand, by_expression=True)
        browser.wait_for(body_has(*(r.info.run_name for r in self.seeds)), "the seeds", settle=1)
        browser.click("[data-testid='column-selection-dropdown']")
        browser.wait_for("document.querySelector('[data-testid=column-selector-tree]')", "Columns")
        for title in HIDDEN_ATTRIBUTES:
            self._column(title, False)
        for title in RUN_METRICS:
            self._column(title, True)
        browser.press("Escape")
        browser.wait_for(
            "!document.querySelector('[data-testid=column-selector-tree]')", "the closed menu"
        )
        for column, width in COLUMN_WIDTHS.items():
            header = (
                "[...document.querySelectorAll('.ag-header-cell')]"
                f".find(e => e.getAttribute('col-id') === {json.dumps(column)})"
            )
            browser.wait_for(header, f"the column {column}", timeout=30, settle=0.2)
            for _ in range(3):  # a drag that the table took in part is done again
                now = browser.evaluate(f"{header}.getBoundingClientRect().width")
                if abs(width - now) < 3:
                    break
                browser.drag(f"{header}.querySelector('.ag-header-cell-resize')", width - now)
                time.sleep(0.5)
        browser.call(  # away from the headers, whose tooltips would show
            "Input.dispatchMouseEvent", {"type": "mouseMoved", "x": 5, "y": HEIGHT - 5}
        )
        browser.wait_for(body_has("hans/ln_subject/object_swap"), "the chosen columns")
        browser.screenshot(path)

    def _column(self, title: str, shown: bool) -> None:
        """Tick (`shown`) or clear a column in the open Columns menu: searched for by its
        name first, since the menu lists only what fits."""
        browser = self.browser
        browser.evaluate("document.querySelector(\"input[placeholder='Search columns']\").select()")
        browser.type_text(title)
        node = (
            "[...document.querySelectorAll('[class*=tree-treenode]')].find(n => "
            f"n.querySelector('[class*=tree-title]')?.innerText.trim() === {json.dumps(title)})"
        )
        browser.wait_for(node, f"the column {title} in the Columns menu", timeout=15, settle=0.5)
        box = f"({node}).querySelector('[class*=tree-checkbox]')"
        if browser.evaluate(f"{box}.className.includes('checkbox-checked')") != shown:
            browser.click(box, by_expression=True)
        checked = f"{box}.className.includes('checkbox-checked')"
        browser.wait_for(checked if shown else f"!{checked}", f"the column {title}", settle=0.3)

    def seed_run(self, path: Path) -> None:
        seed = self.seeds[0]
        self.open(
            f"/experiments/{self.experiment_id}/runs/{seed.info.run_id}",
            body_has(seed.info.run_name, "Metrics ("),
            "the seed run's page",
        )
        # the metrics list starts with system metrics: filter it to the HANS ones
        if self.browser.click("input[placeholder='Search metrics']"):
            self.browser.type_text("hans/")
            self.browser.wait_for(body_has("hans/ln_subject/object_swap"), "HANS metrics", settle=2)
        self.browser.screenshot(path)

    def _choose(self, field: str, option: str) -> None:
        """Pick `option` in a multiple-choice select: open it, type, click the option."""
        browser = self.browser
        browser.press("Escape")  # a click on an open select would close it
        # its search box, not its middle, where a chosen option's remove cross may lie
        browser.click(f"({field}).querySelector('input')", by_expression=True)
        browser.type_text(option)
        item = (
            "[...document.querySelectorAll('[class*=select-item-option]:not([class*=content])')]"
            f".find(e => e.innerText.trim() === {json.dumps(option)})"
        )
        browser.wait_for(item, f"the option {option}", timeout=15, settle=0.5)
        browser.click(item, by_expression=True)

    def compare(self, path: Path) -> None:
        ids = json.dumps([r.info.run_id for r in self.seeds])
        experiments = json.dumps([self.experiment_id])
        query = urllib.parse.urlencode({"runs": ids, "experiments": experiments})
        self.open(
            f"/compare-runs?{query}",
            body_has(*(r.info.run_name for r in self.seeds)),
            "the compare view",
        )
        # the parallel-coordinates plot starts on a few differing params and one metric
        # (component state, not in the URL): pick the seed and the MNLI and HANS metrics
        browser = self.browser
        if browser.click("[data-testid='clear-button']"):
            time.sleep(1)
            for label, keys in (("Parameters:", COMPARE_PARAMS), ("Metrics:", COMPARE_METRICS)):
                field = (
                    "[...document.querySelectorAll('div')].find(d => d.innerText === "
                    f"{json.dumps(label)}).nextElementSibling"
                )
                for key in keys:
                    self._choose(field, key)
                chosen = browser.evaluate(
                    f"[...({field}).querySelectorAll('[class*=selection-item-content]')]"
                    ".map(e => e.innerText.trim())"
                )
                if chosen != keys:
                    sys.exit(f"take: the compare plot's {label} {chosen}, not {keys}")
            browser.press("Escape")
            browser.click("h2")  # close any open list
            time.sleep(3)
        browser.screenshot(path)


COMPARE_PARAMS = ["train.seed"]
COMPARE_METRICS = [
    "train/loss",
    "val/mnli_matched_accuracy",
    "mnli/matched_accuracy",
    "hans/lexical_nonent",
    "hans/subseq_nonent",
    "hans/constituent_nonent",
]


def optuna_dashboard(browser: Chromium, url: str, path: Path) -> None:
    with urllib.request.urlopen(f"{url}/api/studies", timeout=30) as response:
        study = json.load(response)["study_summaries"][0]
    browser.goto(f"{url}/dashboard/studies/{study['study_id']}")
    browser.wait_for(
        f"{body_has(study['study_name'])} && document.querySelector('svg, canvas')",
        "the Optuna study page",
        settle=6,
    )
    browser.screenshot(path)


def printed_mlflow(scratch: Path) -> tuple[str, list[str]]:
    """The runs-table link and the `mlflow ui` command that `seedvar report` printed."""
    printed = (scratch / "logs" / "report.log").read_text()
    link = re.search(r"^MLflow runs table: (\S+)$", printed, re.MULTILINE)
    command = re.search(r"^  \(start the UI first: (mlflow ui .+)\)$", printed, re.MULTILINE)
    if not (link and command):
        sys.exit(f"take: `seedvar report` printed no MLflow link and command:\n{printed}")
    return link.group(1), shlex.split(command.group(1))


def on_port(link: str, port: int) -> str:
    """`link` on 127.0.0.1:`port` (the script's free port, not `mlflow ui`'s 5000)."""
    return urllib.parse.urlsplit(link)._replace(netloc=f"127.0.0.1:{port}").geturl()


def take_screenshots(
    scratch: Path, browser: Chromium, mlflow_url: str, link: str, dashboard_url: str, out: Path
) -> None:
    mlflow_pages = MLflowPages(scratch, browser, mlflow_url, link)
    mlflow_pages.runs_table(out / "mlflow-runs.png")
    mlflow_pages.seed_run(out / "mlflow-seed-run.png")
    mlflow_pages.compare(out / "mlflow-compare.png")
    optuna_dashboard(browser, dashboard_url, out / "optuna-dashboard.png")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder")
    parser.add_argument(
        "--reuse",
        type=Path,
        metavar="DIR",
        help="skip the study: photograph the one a --keep run left in DIR",
    )
    parser.add_argument("--out", type=Path, default=OUT, help=f"where the PNGs go (default: {OUT})")
    parser.add_argument(
        "--chromium",
        default=shutil.which("chromium") or "chromium",
        help="the Chromium executable (default: chromium on PATH)",
    )
    args = parser.parse_args()
    if not Path(args.chromium).exists() and not shutil.which(args.chromium):
        sys.exit("take: Chromium not found; on Debian: apt-get install chromium")

    if args.reuse:
        scratch, args.keep = args.reuse.resolve(), True
    else:
        scratch = Path(tempfile.mkdtemp(prefix="seedvar-screenshots-", dir="/tmp"))
    logs = scratch / "logs"
    logs.mkdir(exist_ok=True)
    log(f"scratch folder {scratch}")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "src"), env.get("PYTHONPATH")]))
    sys.path.insert(0, str(REPO / "src"))
    # the runs record git's commit and dirtiness from their working folder: point git at this
    # checkout (seedvar only reads it: rev-parse and status), not at the scratch folder
    git_dir = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--absolute-git-dir"], capture_output=True, text=True
    )
    if git_dir.returncode == 0:
        env.update(GIT_DIR=git_dir.stdout.strip(), GIT_WORK_TREE=str(REPO))
    processes = Processes()

    def on_signal(signum: int, _frame: Any) -> None:
        raise SystemExit(f"take: stopped by signal {signum}")

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    try:
        if not args.reuse:
            make_study(scratch, env, logs)

        mlflow_port, dashboard_port = free_port(), free_port()
        mlflow_url = f"http://127.0.0.1:{mlflow_port}"
        dashboard_url = f"http://127.0.0.1:{dashboard_port}"
        # the command and link a user is given, on a free port
        link, command = printed_mlflow(scratch)
        command[0] = tool(command[0])
        command[command.index("--port") + 1] = str(mlflow_port)
        mlflow_ui = processes.start(
            "mlflow ui",
            [*command, "--workers", "1"],
            cwd=scratch,
            env=env,
            stdout=(logs / "mlflow-ui.log").open("w"),
            stderr=subprocess.STDOUT,
        )
        dashboard = processes.start(
            "optuna-dashboard",
            [
                tool("optuna-dashboard"),
                f"sqlite:///{scratch / 'sweeps' / 'optuna.db'}",
                "--host",
                "127.0.0.1",
                "--port",
                str(dashboard_port),
            ],
            cwd=scratch,
            env=env,
            stdout=(logs / "optuna-dashboard.log").open("w"),
            stderr=subprocess.STDOUT,
        )
        wait_http(f"{mlflow_url}/health", mlflow_ui, "mlflow ui")
        wait_http(f"{dashboard_url}/api/studies", dashboard, "optuna-dashboard")

        profile = Path(tempfile.mkdtemp(prefix="chromium-", dir=scratch))
        browser = Chromium(args.chromium, profile, processes, logs)
        args.out.mkdir(parents=True, exist_ok=True)
        take_screenshots(
            scratch, browser, mlflow_url, on_port(link, mlflow_port), dashboard_url, args.out
        )
    finally:
        processes.stop_all()
        if args.keep:
            log(f"kept {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
