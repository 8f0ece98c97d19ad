"""Open a notebook in a real JupyterLab with headless Chromium, run all its cells, check what a person sees.

papermill runs a notebook's code, but not what a reader meets: JupyterLab starts the kernel in the
notebook's own folder (so relative paths resolve from there, not from the repository root), and
ipywidgets controls render only in a browser with the widget manager loaded. This script is that reader:

1. it serves ``--root`` (default: the notebook's parent folder) with ``jupyter lab`` on a free localhost
   port, with a random token and throwaway settings, workspace and runtime folders;
2. headless Chromium (driven by selenium through Debian's chromedriver) opens the notebook, waits for its
   kernel, and clicks Run > Run All Cells, as a person would;
3. when the kernel is idle again it checks that every code cell ran (an execution count, none left at
   ``[*]`` or skipped after an error), that no output shows an error (a traceback or an ``...Error`` in
   the stderr outputs JupyterLab renders errors as), that an ipywidgets slider rendered (``.widget-slider`` in
   an output area) where the notebook makes one, and that its figures rendered (as many images in output areas
   as the notebook displays ``Image(...)`` calls, at least).

It prints a JSON report (``--screenshot PATH`` also saves what the browser shows) and exits 0 when every
check passes, 1 when one fails, 2 when it could not run.

Needs: Debian's ``chromium`` and ``chromium-driver`` (``/usr/bin/chromium``, ``/usr/bin/chromedriver``;
``make test-browser`` installs them), selenium (the ``browser`` extra), and JupyterLab, ipykernel and
ipywidgets in this Python's environment with the notebook's kernel registered (``make setup``). The
notebook must run **from its own folder**: whatever paths it reads or writes are resolved from there.
JupyterLab runs with autosave off, so the notebook file is never written, but the notebook's own code may
write files (figures, say, relative to its folder): point the script at a copy when that matters. ``-p NAME VALUE`` injects a parameter cell after the notebook's
``parameters`` cell (papermill's convention) into a temporary copy, e.g. to point a notebook whose
defaults are relative to the repository root at absolute paths while developing.

    python tests/browser_check.py notebooks/01_template_collapse.ipynb --screenshot /tmp/nb01.png
    python tests/browser_check.py /tmp/copy/notebooks/01_template_collapse.ipynb -p runs_root /tmp/runs

Chromium runs as root here, so it needs ``--no-sandbox``; the background-networking flags keep it from
calling out (this machine's closed network refuses those connections, and the errors slow it down).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-dev-shm-usage", "--window-size=1400,1000")
SLIDER = ".jp-OutputArea-output .widget-slider"
"""What an ipywidgets 8 slider renders as, inside a cell's output area."""
IMAGE = ".jp-OutputArea-output img"
"""A rendered image (a figure) inside a cell's output area."""
STDERR_OUTPUT = '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]'
"""JupyterLab renders both stderr streams and errors with this mime type; an error's text has a traceback."""
ERROR_TEXT = re.compile(r"Traceback \(most recent call last\)|^\s*\w*(Error|Exception)\b", re.MULTILINE)
LAB_SETTINGS = {
    # Every cell in the DOM (not only those in view), so that prompts and outputs can all be read.
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    # No autosave: the check must never write the notebook it opens (outputs would land in a committed file).
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
    # No news or update checks: nothing to fetch from outside, no toast over the page.
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false",
                                                                      "checkForUpdates": False},
}


class CheckError(RuntimeError):
    """The check could not run (no browser, the server did not start, the page never loaded)."""


@dataclass
class Report:
    """What the browser saw after Run All Cells."""

    notebook: str
    code_cells: int = 0
    executed: int = 0
    """Code cells with an execution count."""
    prompts: list[str] = field(default_factory=list)
    """Each code cell's prompt as shown: ``[3]:``, ``[*]:``, ``[ ]:``."""
    sliders: int = 0
    expected_sliders: int = 1
    """At least this many sliders must render (0 for a notebook without ipywidgets)."""
    images: int = 0
    expected_images: int = 0
    """At least this many images must render (the notebook's ``Image(...)`` displays)."""
    errors: list[str] = field(default_factory=list)
    """The start of every output that shows an error."""
    stderr_outputs: int = 0
    """Outputs on stderr in all (warnings among them; only those with an error count as errors)."""
    seconds: float = 0.0
    screenshot: str | None = None

    @property
    def ok(self) -> bool:
        return (self.code_cells > 0 and self.executed == self.code_cells and not self.errors
                and self.sliders >= self.expected_sliders and self.images >= self.expected_images)

    def failures(self) -> list[str]:
        out = []
        if self.executed != self.code_cells or not self.code_cells:
            out.append(f"{self.executed} of {self.code_cells} code cells ran (prompts {self.prompts})")
        if self.errors:
            out.append(f"{len(self.errors)} output(s) show an error: {self.errors[0][:300]!r}")
        if self.sliders < self.expected_sliders:
            out.append(f"no ipywidgets slider rendered ({SLIDER})")
        if self.images < self.expected_images:
            out.append(f"{self.images} of {self.expected_images} figures rendered ({IMAGE})")
        return out


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def inject_parameters(notebook: Path, params: dict[str, object], out: Path) -> Path:
    """Write a copy of ``notebook`` to ``out`` with a cell assigning ``params`` after its ``parameters`` cell."""
    import nbformat

    book = nbformat.read(notebook, as_version=4)
    tagged = [i for i, c in enumerate(book.cells) if "parameters" in c.metadata.get("tags", [])]
    where = tagged[0] + 1 if tagged else 0
    source = "# Parameters injected by tests/browser_check.py\n" + "".join(
        f"{name} = {value!r}\n" for name, value in params.items())
    book.cells.insert(where, nbformat.v4.new_code_cell(source, metadata={"tags": ["injected-parameters"]}))
    nbformat.write(book, out)
    return out


class JupyterLab:
    """``jupyter lab`` serving ``root`` on localhost, with its own settings and runtime folders; a context manager."""

    def __init__(self, root: Path, scratch: Path, *, jupyter: str | None = None, startup_s: float = 120.0) -> None:
        self.root, self.scratch, self.startup_s = Path(root).resolve(), Path(scratch), startup_s
        self.jupyter = jupyter or str(Path(sys.executable).with_name("jupyter"))
        self.port, self.token = free_port(), secrets.token_hex(16)
        self.log_path = self.scratch / "jupyterlab.log"
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> JupyterLab:
        settings = self.scratch / "lab-settings"
        for name, values in LAB_SETTINGS.items():
            path = settings / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(values))
        env = {**os.environ, "JUPYTER_CONFIG_DIR": str(self.scratch / "config"),
               "JUPYTER_RUNTIME_DIR": str(self.scratch / "runtime"), "JUPYTERLAB_SETTINGS_DIR": str(settings),
               "JUPYTERLAB_WORKSPACES_DIR": str(self.scratch / "workspaces")}
        cmd = [self.jupyter, "lab", "--no-browser", f"--port={self.port}", "--ip=127.0.0.1",
               f"--ServerApp.token={self.token}", f"--ServerApp.root_dir={self.root}",
               "--ServerApp.port_retries=0", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
        if os.geteuid() == 0:
            cmd.append("--allow-root")
        with open(self.log_path, "w") as log:
            self.process = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                                            cwd=self.root, start_new_session=True)
        try:
            self._wait_ready()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, 15)  # the server and the kernels it started
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, 9)
                self.process.wait()

    def api(self, path: str):
        """GET ``/api/<path>`` as JSON."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/api/{path}?token={self.token}", timeout=10) as r:
            return json.loads(r.read())

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.startup_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise CheckError(f"jupyter lab exited with {self.process.returncode}: {self.log_tail()}")
            try:
                self.api("status")
                return
            except OSError:
                time.sleep(0.5)
        raise CheckError(f"jupyter lab did not answer within {self.startup_s:.0f} s: {self.log_tail()}")

    def log_tail(self, chars: int = 2000) -> str:
        return self.log_path.read_text()[-chars:] if self.log_path.exists() else ""

    def lab_url(self, notebook: Path) -> str:
        rel = Path(notebook).resolve().relative_to(self.root).as_posix()
        return f"http://127.0.0.1:{self.port}/lab/tree/{urllib.parse.quote(rel)}?reset&token={self.token}"

    def kernels_idle(self) -> bool:
        """Whether a kernel runs and every kernel is idle (a server error while one starts reads as busy)."""
        try:
            kernels = self.api("kernels")
        except urllib.error.HTTPError:
            return False
        return bool(kernels) and all(k.get("execution_state") == "idle" for k in kernels)


OFFLINE_FLAGS = ("--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=http://127.0.0.1:9",
                 "--proxy-bypass-list=<-loopback>")
"""Chromium flags that cut it off the network: no host name resolves and every request goes to a closed local port
(a page that needs the network shows it as failed loads)."""


def make_driver(user_data_dir: Path, extra_flags: tuple[str, ...] = ()):
    """Headless Chromium through Debian's chromedriver (no driver download, a fresh profile); ``extra_flags`` are
    added to :data:`CHROMIUM_FLAGS` (:data:`OFFLINE_FLAGS`, say)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    for binary in (CHROMIUM, CHROMEDRIVER):
        if not Path(binary).exists():
            raise CheckError(f"{binary} is missing: apt-get install -y chromium chromium-driver")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*CHROMIUM_FLAGS, *extra_flags, f"--user-data-dir={user_data_dir}"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


def _wait(what: str, predicate, timeout_s: float, every_s: float = 0.5):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every_s)
    raise CheckError(f"timed out after {timeout_s:.0f} s waiting for {what}")


def _prompts(driver) -> list[str]:
    from selenium.webdriver.common.by import By

    cells = driver.find_elements(By.CSS_SELECTOR, ".jp-Notebook .jp-CodeCell .jp-InputArea-prompt")
    return [c.get_attribute("textContent").strip() for c in cells]


def run_all_cells(driver) -> None:
    """Run > Run All Cells, through the menu bar, with the notebook focused (the item acts on the current
    widget, and is disabled until the notebook and its kernel are ready)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    driver.find_element(By.CSS_SELECTOR, ".jp-NotebookPanel .jp-Cell").click()
    driver.find_element(By.TAG_NAME, "body").send_keys(Keys.ESCAPE)  # command mode, no menu left open
    menus = driver.find_elements(By.CSS_SELECTOR, "#jp-menu-panel .lm-MenuBar-item")
    run_menu = next((m for m in menus if m.text.strip() == "Run"), None)
    if run_menu is None:
        raise CheckError(f"no Run menu in the menu bar ({[m.text for m in menus]})")
    run_menu.click()

    # JupyterLab 4's Run menu lists "Run All Cells" as the command runmenu:run-all (notebook:run-all-cells
    # in other builds); the label is what a person clicks.
    def enabled_item():
        return [i for i in driver.find_elements(By.CSS_SELECTOR, ".lm-Menu-item")
                if i.get_attribute("data-command") in ("runmenu:run-all", "notebook:run-all-cells")
                and i.text.strip().startswith("Run All Cells")
                and "lm-mod-disabled" not in (i.get_attribute("class") or "")]

    _wait("an enabled Run All Cells in the Run menu", enabled_item, 20)[0].click()


def read_outputs(driver, report: Report) -> None:
    """Fill the report's prompts, error outputs and sliders from the page."""
    from selenium.webdriver.common.by import By

    report.prompts = _prompts(driver)
    report.code_cells = len(report.prompts)
    report.executed = sum(1 for p in report.prompts if re.fullmatch(r"\[\d+\]:", p))
    stderr = [e.get_attribute("textContent") for e in driver.find_elements(By.CSS_SELECTOR, STDERR_OUTPUT)]
    report.stderr_outputs = len(stderr)
    report.errors = [text.strip() for text in stderr if ERROR_TEXT.search(text)]
    report.sliders = len(driver.find_elements(By.CSS_SELECTOR, SLIDER))
    report.images = len(driver.find_elements(By.CSS_SELECTOR, IMAGE))


def expectations(notebook: Path) -> tuple[int, int]:
    """``(sliders, images)`` the notebook must show at least: a slider if its code uses ipywidgets, an image per
    ``Image(`` in its code (its figures)."""
    import nbformat

    code = "\n".join(c.source for c in nbformat.read(notebook, as_version=4).cells if c.cell_type == "code")
    return int("ipywidgets" in code), code.count("Image(")


def check(notebook: Path, *, root: Path | None = None, params: dict[str, object] | None = None,
          timeout_s: float = 600.0, screenshot: Path | None = None, slider_wait_s: float = 20.0,
          keep: Path | None = None) -> Report:
    """Run every cell of ``notebook`` in JupyterLab in headless Chromium and report what the page shows.

    Args:
        notebook: the ``.ipynb`` to open; it must lie under ``root``.
        root: the folder JupyterLab serves (default: the notebook's folder).
        params: parameters to inject (into a temporary copy beside the notebook, removed afterwards).
        timeout_s: the most time the cells may take, from Run All Cells to an idle kernel.
        screenshot: save a PNG of the page here (the first slider scrolled into view).
        slider_wait_s: how long to wait for a slider to render once the cells have run.
        keep: copy the server's log (``jupyterlab.log``) into this folder (and ``failure.png``, the page,
            when the check could not finish).

    Raises:
        CheckError: the browser, the server or the page could not be brought up.
    """
    from selenium.webdriver.common.by import By

    notebook = Path(notebook).resolve()
    root = Path(root).resolve() if root is not None else notebook.parent
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="browser-check-") as tmp:
        scratch = Path(tmp)
        target = notebook
        if params:
            # Not a dot file: JupyterLab does not serve hidden files.
            target = inject_parameters(notebook, params, notebook.with_name(f"{notebook.stem}.browser-check.ipynb"))
        try:
            with JupyterLab(root, scratch) as lab:
                driver = make_driver(scratch / "chromium-profile")
                try:
                    sliders, images = expectations(notebook)
                    report = Report(notebook=str(notebook), expected_sliders=sliders, expected_images=images)
                    driver.get(lab.lab_url(target))
                    _wait("the notebook to load", lambda: driver.find_elements(By.CSS_SELECTOR,
                                                                               ".jp-NotebookPanel .jp-CodeCell"), 120)
                    _wait("the kernel to start", lab.kernels_idle, 120)
                    def started() -> bool:  # a cell pending or run, or the kernel busy
                        prompts = _prompts(driver)
                        return (any(p == "[*]:" or re.fullmatch(r"\[\d+\]:", p) for p in prompts)
                                or not lab.kernels_idle())

                    for attempt in range(2):  # a click lost while the page settles is clicked again
                        run_all_cells(driver)
                        try:
                            _wait("the cells to start after Run All Cells", started, 20, every_s=0.2)
                            break
                        except CheckError:
                            if attempt:
                                raise

                    def finished() -> bool:
                        # Idle twice in a row with no cell pending: a later cell may be queued between two.
                        if not lab.kernels_idle() or any(p == "[*]:" for p in _prompts(driver)):
                            return False
                        time.sleep(1.0)
                        return lab.kernels_idle() and not any(p == "[*]:" for p in _prompts(driver))

                    _wait("the kernel to go idle after Run All Cells", finished, timeout_s)
                    if sliders:
                        try:
                            _wait("a slider", lambda: driver.find_elements(By.CSS_SELECTOR, SLIDER), slider_wait_s)
                        except CheckError:
                            pass  # reported below
                    read_outputs(driver, report)
                    if screenshot is not None:
                        sliders = driver.find_elements(By.CSS_SELECTOR, SLIDER)
                        if sliders:
                            driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", sliders[0])
                        driver.save_screenshot(str(screenshot))
                        report.screenshot = str(screenshot)
                except CheckError as err:
                    if keep is not None:
                        Path(keep).mkdir(parents=True, exist_ok=True)
                        driver.save_screenshot(str(Path(keep) / "failure.png"))
                    raise CheckError(f"{err}\n--- jupyter lab log (end) ---\n{lab.log_tail()}") from None
                finally:
                    driver.quit()
                    if keep is not None:
                        Path(keep).mkdir(parents=True, exist_ok=True)
                        shutil.copy(lab.log_path, Path(keep) / lab.log_path.name)
        finally:
            if target != notebook:
                target.unlink(missing_ok=True)
    report.seconds = round(time.monotonic() - start, 1)
    return report


def _parse_value(text: str):
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("notebook", type=Path, help="the notebook to open (it runs from its own folder)")
    p.add_argument("--root", type=Path, default=None, help="folder JupyterLab serves (default: the notebook's)")
    p.add_argument("-p", "--parameter", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                   help="inject a parameter (a Python literal, else a string) into a temporary copy")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds the cells may take")
    p.add_argument("--screenshot", type=Path, default=None, help="save a PNG of the page")
    p.add_argument("--keep", type=Path, default=None, help="copy the JupyterLab server's log into this folder")
    args = p.parse_args(argv)
    if shutil.which("jupyter", path=str(Path(sys.executable).parent)) is None:
        print(f"no jupyter beside {sys.executable}", file=sys.stderr)
        return 2
    try:
        report = check(args.notebook, root=args.root, params={k: _parse_value(v) for k, v in args.parameter},
                       timeout_s=args.timeout, screenshot=args.screenshot, keep=args.keep)
    except CheckError as err:
        print(f"browser check could not run: {err}", file=sys.stderr)
        return 2
    print(json.dumps({**asdict(report), "ok": report.ok, "failures": report.failures()}, indent=1))
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
