"""What a candidate's process costs on this machine before any candidate code runs: importing torch,
creating a CUDA context, ending a process that holds one (the worker waits for that before it
reports a verdict), filling fresh shared memory (outputs travel in memfds), drawing inputs on the CPU.

    python benchmarks/process_costs.py --out DIR     # DIR/process_costs.json
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

CHILD = r"""
import os, sys, time
import torch
dev = sys.argv[1]
gib = float(sys.argv[2])
if dev == "cuda":
    x = torch.empty(int(gib * (1 << 30)) // 4, device="cuda")
    x.fill_(1.0)
    torch.cuda.synchronize()
else:
    x = torch.ones(int(gib * (1 << 30)) // 4)
print("ready", flush=True)
if sys.argv[3] == "exit":
    sys.stdin.readline()
    os._exit(0)
time.sleep(600)
"""


def process_end_seconds(device: str, gib: float, how: str) -> float:
    """From asking a process that holds `gib` GiB (on the device) to end, to its exit status."""
    p = subprocess.Popen([sys.executable, "-c", CHILD, device, str(gib), how], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    t0 = time.perf_counter()
    if how == "exit":
        p.stdin.write("\n")
        p.stdin.flush()
    else:
        os.kill(p.pid, signal.SIGKILL)
    p.wait()
    return time.perf_counter() - t0


def start_seconds(device: str) -> dict:
    code = ("import time; t0 = time.perf_counter(); import torch; t1 = time.perf_counter(); "
            f"torch.zeros(1, device='{device}'); torch.cuda.synchronize() if '{device}' == 'cuda' else None; "
            "t2 = time.perf_counter(); print(t1 - t0, t2 - t1)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.split()
    return {"import_torch_s": float(out[0]), "first_tensor_s": float(out[1])}


WARM = r"""
import time
t0 = time.perf_counter()
import torch
t1 = time.perf_counter()
torch.cuda.set_device(0)
torch.zeros(1, device="cuda"); torch.cuda.synchronize()
t2 = time.perf_counter()
x = torch.ones(64, 64, device="cuda"); y = x @ x; torch.cuda.synchronize()
t3 = time.perf_counter()
torch.nn.functional.conv2d(torch.ones(1, 4, 8, 8, device="cuda"), torch.ones(4, 4, 3, 3, device="cuda"))
torch.cuda.synchronize()
t4 = time.perf_counter()
print(t1 - t0, t2 - t1, t3 - t2, t4 - t3)
"""


def spare_warm_seconds() -> dict:
    """What a spare child's warm-up (child.warm_child) spends on each step, in a fresh process."""
    out = subprocess.run([sys.executable, "-c", WARM], capture_output=True, text=True).stdout.split()
    keys = ("import_torch_s", "cuda_context_s", "cublas_first_matmul_s", "cudnn_first_conv_s")
    return {k: round(float(v), 4) for k, v in zip(keys, out)}


CONTEXT = r"""
import sys, time
import torch
sys.stdin.readline()  # all start together
t0 = time.perf_counter()
torch.zeros(1, device="cuda"); torch.cuda.synchronize()
print(time.perf_counter() - t0, flush=True)
"""


def concurrent_contexts(n: int, env_extra: dict | None = None) -> dict:
    """`n` processes (torch already imported) create their CUDA contexts at the same moment: each
    one's seconds and the wall time of all (the driver creates contexts one at a time?)."""
    env = {**os.environ, **(env_extra or {})}
    procs = [subprocess.Popen([sys.executable, "-c", CONTEXT], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True, env=env) for _ in range(n)]
    time.sleep(6.0)  # every one has imported torch
    t0 = time.perf_counter()
    for p in procs:
        p.stdin.write("\n")
        p.stdin.flush()
    each = [float(p.stdout.readline() or "nan") for p in procs]
    wall = time.perf_counter() - t0
    for p in procs:
        p.wait()
    return {"n": n, "env": env_extra or {}, "wall_s": round(wall, 3), "each_s": sorted(round(x, 3) for x in each)}


def memfd_fill_seconds(mib: int) -> dict:
    import numpy as np

    n = mib << 20
    src = np.ones(n // 4, dtype=np.float32)
    out = {}
    for label, flags in (("fault_in", mmap.MAP_SHARED), ("populate", mmap.MAP_SHARED | mmap.MAP_POPULATE)):
        fd = os.memfd_create("cost", os.MFD_ALLOW_SEALING)
        os.ftruncate(fd, n)
        t0 = time.perf_counter()
        m = mmap.mmap(fd, n, flags=flags, prot=mmap.PROT_READ | mmap.PROT_WRITE)
        np.frombuffer(m, dtype=np.float32)[:] = src
        out[label] = round(time.perf_counter() - t0, 4)
        m.close()
        os.close(fd)
    dst = np.zeros_like(src)
    t0 = time.perf_counter()
    dst[:] = src
    out["copy_into_touched_memory"] = round(time.perf_counter() - t0, 4)
    return out


def randn_seconds(numel: int) -> float:
    import torch

    torch.manual_seed(0)
    t0 = time.perf_counter()
    torch.randn(numel)
    return time.perf_counter() - t0


def read(path: str) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError as e:
        return f"unreadable ({e.strerror})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default=None, help="cuda or cpu (default: cuda where there is one)")
    ap.add_argument("--quick", action="store_true", help="skip the process-end measurements (~1 min)")
    args = ap.parse_args()
    import torch

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    result = {"device": device, "cpus": os.cpu_count(),
              "shmem_thp": read("/sys/kernel/mm/transparent_hugepage/shmem_enabled"),
              "start": [start_seconds(device) for _ in range(3)],
              "memfd_fill_200mib": [memfd_fill_seconds(200) for _ in range(3)],
              "randn_8m_s": [round(randn_seconds(8 << 20), 4) for _ in range(3)], "end": {}}
    if device == "cuda":
        result["spare_warm"] = [spare_warm_seconds() for _ in range(3)]
        result["concurrent_contexts"] = [concurrent_contexts(1), concurrent_contexts(8)] + [
            concurrent_contexts(8, {"CUDA_DEVICE_MAX_CONNECTIONS": str(c)}) for c in (1, 2, 4)]
        print(result["concurrent_contexts"], flush=True)
    for gib in (() if args.quick else (0.0, 1.0, 4.0)):
        for how in ("exit", "kill"):
            result["end"][f"{how}_{gib:g}gib"] = [round(process_end_seconds(device, gib, how), 4) for _ in range(3)]
    print(json.dumps(result, indent=1))
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "process_costs.json").write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
