"""`make lab` opens JupyterLab on the repository with its file browser at notebooks/, whether or not
the user is root: started for real, `/lab` and the root folder's listing fetched, stopped."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
VENV = Path(sys.executable).parent.parent  # the environment running the tests has JupyterLab

pytestmark = [pytest.mark.timeout(180),
              pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed"),
              pytest.mark.skipif(not (VENV / "bin" / "jupyter").exists(), reason="no jupyter in this environment")]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_make_lab_serves_the_lab_page(tmp_path):
    port = _free_port()
    stamp = VENV / ".tritonrl-installed"
    # -o: take the environment as installed (the test must not run pip); LAB_ARGS: no browser, a free
    # port, no token, and JupyterLab's own state under tmp_path
    cmd = ["make", "-o", str(stamp), "lab", f"VENV={VENV}", f"STAMP={stamp}",
           f"LAB_ARGS=--no-browser --ip=127.0.0.1 --port={port} --IdentityProvider.token= "
           f"--ServerApp.password= --ServerApp.port_retries=0"]
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
           "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "workspaces")}
    log = tmp_path / "lab.log"
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        deadline, status, body = time.monotonic() + 120, None, ""
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/lab", timeout=5) as r:
                    status, body = r.status, r.read().decode("utf-8", "replace")
                break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(1)
        text = log.read_text()
        assert status == 200, f"JupyterLab did not answer on /lab (exit {proc.poll()}):\n{text[-3000:]}"
        assert "JupyterLab" in body
        # the file browser opens at notebooks/ ...
        config = json.loads(re.search(r'<script id="jupyter-config-data" type="application/json">(.*?)</script>',
                                      body, re.S).group(1))
        assert config["preferredPath"].strip("/") == "notebooks", config.get("preferredPath")
        # ... of the repository: outputs/ (the runs and their reports) is one click up
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/contents/", timeout=10) as r:
            root = {item["name"]: item["type"] for item in json.loads(r.read())["content"]}
        assert root.get("notebooks") == "directory" and root.get("outputs") == "directory", sorted(root)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/contents/notebooks", timeout=10) as r:
            assert "02_sft.ipynb" in {item["name"] for item in json.loads(r.read())["content"]}
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # make and the server it started: their own process group
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_make_lab_allows_root_only_for_root():
    stamp = VENV / ".tritonrl-installed"
    dry = subprocess.run(["make", "-n", "-o", str(stamp), "lab", f"VENV={VENV}", f"STAMP={stamp}"], cwd=REPO,
                         capture_output=True, text=True, check=True).stdout
    assert "jupyter lab" in dry and ("--allow-root" in dry) == (os.geteuid() == 0)
