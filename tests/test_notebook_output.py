"""What the notebooks show beside their work: a chart's absence in words (never a `NoChart(...)` repr, nor a
Figure's), no notice about a package nothing here uses, and the lines that name each notebook's step."""

from __future__ import annotations

import ast
import json
import subprocess
import sys

import nbformat
import pytest

from notebook_fixtures import write_notebook
from tritonrl_lib.report.charts import NoChart, show
from tritonrl_lib.run.pipeline import discover_notebooks, notebooks_dir

pytestmark = pytest.mark.timeout(300)
NOTEBOOKS = discover_notebooks(notebooks_dir())


def test_a_nochart_reads_as_its_reason():
    from IPython.lib.pretty import pretty

    missing = NoChart("RL ran one round, and a curve needs at least two points")
    assert pretty(missing) == str(missing) == "(no chart: RL ran one round, and a curve needs at least two points)"


def test_show_prints_the_reason_once(capsys):
    assert isinstance(show(NoChart("nothing logged")), NoChart)
    assert capsys.readouterr().out == "(no chart: nothing logged)\n"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_committed_notebooks_name_their_step_stay_stripped_and_echo_no_chart(path):
    nb = nbformat.read(str(path), as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(not c.get("outputs") and c.get("execution_count") is None for c in code)  # committed stripped
    setup = code[1].source
    assert f'STEP = "{path.stem}"' in setup and setup.index("STEP =") < setup.index("start(globals())")
    for cell in code:
        body = ast.parse(cell.source).body
        last = body[-1] if body else None
        if isinstance(last, ast.Expr) and ast.unparse(last.value).startswith("charts.show("):
            # a cell ending in `charts.show(...)` would echo its return value under what show() displayed
            assert cell.source.rstrip().endswith(";"), cell.source


@pytest.mark.slow
def test_in_a_kernel_a_chart_cell_shows_its_reason_once_and_no_repr(tmp_path, run_dir):
    import papermill

    nb = write_notebook(tmp_path / "01_chart.ipynb", ["outputs_dir = None"], [
        "from tritonrl_lib.report import charts\n"
        "charts.show(charts.rl_chart([]), save_to=paths.chart('rl'));",
        "charts.NoChart('evaluated as the last expression')"])
    out = tmp_path / "out.ipynb"
    papermill.execute_notebook(str(nb), str(out), kernel_name="python3", progress_bar=False,
                               parameters={"outputs_dir": str(run_dir)})
    cells = json.loads(out.read_text())["cells"]
    chart, last = cells[-2], cells[-1]
    assert [o["output_type"] for o in chart["outputs"]] == ["stream"]
    assert "".join(chart["outputs"][0]["text"]).startswith("(no chart: ")
    assert "".join(last["outputs"][0]["data"]["text/plain"]) == "(no chart: evaluated as the last expression)"
    assert "NoChart(" not in json.dumps([c.get("outputs", []) for c in cells])


_IMPORTS = """
import sys
if sys.argv[1] == "ours":
    import tritonrl_lib.run.notebook  # what every notebook imports first
from transformers import TrainerCallback  # imports peft, which imports bitsandbytes
import logging
logging.getLogger("bitsandbytes.backends.cpu.ops").warning("another bitsandbytes warning")
"""
_NOTICE = "Failed to load CPU gemm_4bit_forward from kernels-community"


def test_bitsandbytes_notice_of_a_missing_optional_package_is_silenced_and_nothing_else():
    pytest.importorskip("bitsandbytes")
    ours = subprocess.run([sys.executable, "-c", _IMPORTS, "ours"], capture_output=True, text=True, timeout=240)
    assert ours.returncode == 0, ours.stderr
    assert _NOTICE not in ours.stderr and "another bitsandbytes warning" in ours.stderr
    plain = subprocess.run([sys.executable, "-c", _IMPORTS, "plain"], capture_output=True, text=True, timeout=240)
    if _NOTICE not in plain.stderr:
        pytest.skip("this CPU or bitsandbytes never gives the notice (it needs AVX512-BF16 and no `kernels`)")
