"""verify/cuda_wait.py: the wait mode a candidate's process asks of the CUDA driver. On a machine
without a driver it must say so and leave the process as it was; with one (GPU tests) the mode
must really be set before the context exists, and a context then created keeps it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tritonrl_lib.config import ConfigError, load_config
from tritonrl_lib.verify import cuda_wait

try:
    import ctypes

    ctypes.CDLL("libcuda.so.1")
    HAVE_DRIVER = True
except OSError:
    HAVE_DRIVER = False


def test_unset_or_auto_leaves_the_driver_default(monkeypatch):
    monkeypatch.delenv(cuda_wait.ENV, raising=False)
    assert cuda_wait.apply_from_env().startswith("auto")
    monkeypatch.setenv(cuda_wait.ENV, "auto")
    assert cuda_wait.apply_from_env().startswith("auto")


def test_an_unknown_mode_is_skipped_and_named(monkeypatch):
    monkeypatch.setenv(cuda_wait.ENV, "yield")
    msg = cuda_wait.apply_from_env()
    assert msg.startswith("skipped") and "'yield'" in msg and "block" in msg


@pytest.mark.skipif(HAVE_DRIVER, reason="checks the machine without a CUDA driver")
def test_without_a_driver_block_is_skipped_not_raised(monkeypatch):
    monkeypatch.setenv(cuda_wait.ENV, "block")
    assert cuda_wait.apply_from_env().startswith("skipped: no CUDA driver")


def test_the_setting_is_checked(tmp_path):
    assert load_config("smoke", overrides={"outputs_dir": str(tmp_path)}).verify.cuda_wait == "block"
    with pytest.raises(ConfigError, match="cuda_wait"):
        load_config("smoke", overrides={"outputs_dir": str(tmp_path), "verify.cuda_wait": "busy"})


@pytest.mark.gpu
@pytest.mark.skipif(not HAVE_DRIVER, reason="needs a CUDA driver and GPU")
def test_on_a_gpu_the_context_is_created_with_blocking_sync():
    # a fresh process, as a candidate's child is: set the mode, create the context, read its flags back
    code = (
        "import ctypes, os; os.environ['TRITONRL_CUDA_WAIT'] = 'block'\n"
        "from tritonrl_lib.verify import cuda_wait\n"
        "print(cuda_wait.apply_from_env())\n"
        "import torch; torch.cuda.init(); torch.zeros(1, device='cuda'); torch.cuda.synchronize()\n"
        "lib = ctypes.CDLL('libcuda.so.1'); dev = ctypes.c_int(); lib.cuDeviceGet(ctypes.byref(dev), 0)\n"
        "f, a = ctypes.c_uint(), ctypes.c_int(); lib.cuDevicePrimaryCtxGetState(dev, ctypes.byref(f), ctypes.byref(a))\n"
        "print(f.value & 0x7, a.value)\n"
        "print(cuda_wait.apply_from_env())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    first, flags, later = out.stdout.strip().splitlines()
    assert first == "block" and flags == "4 1"  # CU_CTX_SCHED_BLOCKING_SYNC, context active
    assert later == "skipped: the CUDA context already exists"
