"""An evaluation record's sample rows: what a verdict's error keeps when it is long."""

from __future__ import annotations

from tritonrl_lib.eval import metrics as M
from tritonrl_lib.verify.verdict import Verdict


def test_a_long_error_keeps_where_it_happened_and_the_exception_itself():
    tb = ("runtime_error on the original inputs:\nTraceback (most recent call last):\n"
          + "".join(f'  File "jit.py", line {i}, in run\n    kernel = self.compile(src)\n' for i in range(30))
          + "ValueError: grid dimension 1 is 65536, above the limit of 65535")
    row = M.sample_row(Verdict(task_id="t", stage="compile", reason="runtime_error", error=tb),
                       task_id="t", level=1, sample=0, model_stage="sft")
    assert len(row["error"]) <= M.ERROR_CHARS
    assert row["error"].startswith("runtime_error on the original inputs:")
    assert row["error"].endswith("above the limit of 65535")
    short = M.sample_row(Verdict(task_id="t", stage="compile", reason="runtime_error", error="boom"),
                         task_id="t", level=1, sample=0, model_stage="sft")
    assert short["error"] == "boom"
