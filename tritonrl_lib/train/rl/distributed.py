"""RL over several processes of one host: this process's rank, and what the ranks share.

`accelerate launch` (or torchrun) starts one process per GPU (launch.py builds the command); each
runs the same trainer (best_of_n.py, grpo.py) with a `Ranks` made from the launcher's environment
(RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE). One process alone is `Ranks()`: every collective
below is then the identity, and the trainers behave exactly as they did before there were ranks.

What is whose:

- **The curriculum lives on rank 0.** Rank 0 draws each step's tasks and broadcasts their ids
  (`from_main`): every rank sees the same draw. Redraws of groups without signal work the same
  way (groups.py). Only rank 0 updates the curriculum and writes its log, so resuming reads one log.
- **Rollouts are split across ranks**: a step's slots (one task's group each) are shared out
  (`share`: round robin for best-of-N; GRPO takes the slots TRL's sampler hands each process).
  Each rank samples its groups with its own seeds (`seed_offset`) and verifies them in its own
  verifier pool (`pool_on_my_gpu`: the pool's workers see only this rank's GPU, so no GPU judges
  twice and every GPU of the host judges). The step's candidates are then gathered to every rank
  (`all_gather`): rank 0 logs them; best-of-N trains every rank on the same kept completions.
- **Rank 0 writes** the run's files (rl_log, curriculum log, rounds/, best/, the adapter) and the
  other ranks wait (`barrier`) where a file must exist before they go on. TRL's GRPOTrainer and the
  SFT trainer of best-of-N's rounds run data-parallel under accelerate's own process group (DDP:
  gradients averaged across ranks); their Trainer checkpoints are written the Trainer's way.

FSDP and DeepSpeed ZeRO-3 are refused for RL (`refuse_sharded_policy`): every rank samples on its
own with the lean engine, which needs the whole policy on its GPU, so sharding a frozen LoRA base
saves no memory at the rollout's peak and the engine cannot sample from sharded weights.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence, TypeVar

from ...core.config import ConfigError, RunConfig
from ...verify.sandbox.limits import HOST_POOLS_ENV

T = TypeVar("T")
SEED_STRIDE = 7_919_001  # rank r samples with seeds shifted by r * this (rank 0: the one-process seeds)


@dataclass(frozen=True)
class Ranks:
    """This process's place among the run's processes (one process: the defaults)."""

    world: int = 1
    rank: int = 0
    local_rank: int = 0
    local_world: int = 1
    device: str = "cpu"  # cpu | cuda: where this rank's policy lives

    # -- who is who -----------------------------------------------------------------

    @classmethod
    def from_env(cls, device: str) -> "Ranks":
        """The ranks a launcher started (its environment says which), joined to one process group:
        NCCL on GPUs, gloo on the CPU (accelerate's PartialState, which the Trainers reuse)."""
        world = int(os.environ.get("WORLD_SIZE", "1"))
        if world <= 1:
            return cls(device="cuda" if device.startswith("cuda") else "cpu")
        refuse_sharded_policy()
        rank = int(os.environ.get("RANK", "0"))
        local_rank = int(os.environ.get("LOCAL_RANK", str(rank)))
        local_world = int(os.environ.get("LOCAL_WORLD_SIZE", str(world)))
        on_gpu = device.startswith("cuda")
        from accelerate import PartialState

        if on_gpu:
            import torch

            torch.cuda.set_device(local_rank)  # "cuda" now means this rank's GPU: the policy loads there
        PartialState(cpu=not on_gpu)  # joins the process group
        return cls(world, rank, local_rank, local_world, "cuda" if on_gpu else "cpu")

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def seed_offset(self) -> int:
        return self.rank * SEED_STRIDE

    def share(self, n: int) -> list[int]:
        """This rank's slots of `n` (round robin: rank r takes r, r + world, ...)."""
        return list(range(self.rank, n, self.world))

    def say(self, echo: Callable[[str], None] | None) -> Callable[[str], None]:
        """`echo` (default: print) on rank 0; silence on the others (one voice per run)."""
        out = echo or (lambda s: print(s, flush=True))
        return out if self.is_main else (lambda s: None)

    # -- collectives (accelerate's; the identity for one process) --------------------

    def from_main(self, make: Callable[[], T]) -> T:
        """`make()` run on rank 0 only, its value handed to every rank."""
        value = make() if self.is_main else None
        if self.world == 1:
            return value  # type: ignore[return-value]
        from accelerate.utils import broadcast_object_list

        box = [value]
        broadcast_object_list(box, from_process=0)
        return box[0]

    def all_gather(self, value: T) -> list[T]:
        """Every rank's `value`, in rank order, on every rank."""
        if self.world == 1:
            return [value]
        import torch.distributed as dist

        out: list[Any] = [None] * self.world
        dist.all_gather_object(out, value)
        return out

    def barrier(self) -> None:
        if self.world > 1:
            from accelerate import PartialState

            PartialState().wait_for_everyone()

    def close(self) -> None:
        """Leave the process group once every rank is done (accelerate's own teardown): a process that
        exits with gloo's threads still running may abort ("terminate called without an active
        exception"), and a launcher reads that as a failed rank."""
        if self.world > 1:
            leave_process_group()

    def agree(self, value: T, what: str) -> T:
        """`value` as rank 0 has it; an error naming `what` when another rank computed otherwise (the
        ranks read the same files: a difference is a bug, never something to paper over)."""
        seen = self.all_gather(value)
        if any(v != seen[0] for v in seen[1:]):
            raise RuntimeError(f"RL ranks disagree on {what}: {seen}")
        return seen[0]

    # -- this rank's verifier pool ---------------------------------------------------

    def my_gpu(self) -> str | None:
        """The id (as CUDA_VISIBLE_DEVICES names it) of this rank's GPU; None on the CPU."""
        if self.device != "cuda":
            return None
        env = os.environ.get("CUDA_VISIBLE_DEVICES", "")
        ids = [x.strip() for x in env.split(",") if x.strip()]
        if not ids:
            import torch

            ids = [str(i) for i in range(torch.cuda.device_count())]
        return ids[self.local_rank % len(ids)]

    def pool_workers(self, cfg: RunConfig) -> int | None:
        """The workers of this rank's pool: the host's share of one rank. None (the pool decides, as
        with one process) unless several ranks share the host."""
        if self.local_world <= 1 or cfg.verify.workers:
            return None
        cores = os.cpu_count() or 1
        if self.device == "cuda":
            from ...verify.pool import workers_per_gpu_for_cores  # imports torch with the pool: RL only

            return cfg.verify.train_workers_per_gpu or workers_per_gpu_for_cores(self.local_world, cores)
        return max(1, min(4, cores // self.local_world))

    @contextlib.contextmanager
    def pool_on_my_gpu(self) -> Iterator[None]:
        """While a VerifierPool is made: CUDA_VISIBLE_DEVICES names this rank's GPU alone, so the
        pool (which reads it once, when made: `verify.pool.visible_gpus`) puts every worker there; and
        HOST_POOLS_ENV (verify/sandbox/limits.py) says how many ranks' pools share
        the host, so each budgets its share of the host's memory and cores (reference caches, torch
        threads), read once too. Nothing changes for one process; on the CPU only the share."""
        values = {}
        gpu = self.my_gpu() if self.world > 1 else None
        if gpu is not None:
            values["CUDA_VISIBLE_DEVICES"] = gpu
        if self.local_world > 1:
            values[HOST_POOLS_ENV] = str(self.local_world)
        before = {k: os.environ.get(k) for k in values}
        os.environ.update(values)
        try:
            yield
        finally:
            for k, v in before.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


SINGLE = Ranks()


def leave_process_group() -> None:
    """Ranks.close for a process that holds no Ranks (the RL entry, once its run returned); nothing when
    no process group was joined."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        from accelerate import PartialState

        state = PartialState()
        state.wait_for_everyone()
        state.destroy_process_group()


def refuse_sharded_policy() -> None:
    """FSDP / ZeRO-3 launches are refused for RL, with the reason and the way that works."""
    for var, name in (("ACCELERATE_USE_FSDP", "FSDP"), ("ACCELERATE_USE_DEEPSPEED", "DeepSpeed")):
        if os.environ.get(var, "").lower() in ("1", "true", "yes"):
            raise ConfigError(
                f"RL under {name}: every rank samples its own rollouts from the whole policy (the lean engine "
                "folds LoRA into its own copy of the weights), so a sharded policy saves no memory at the rollout's "
                "peak and cannot be sampled from. Launch with params/accelerate/ddp.yaml: a 7B policy in bf16 "
                "fits one 80 GB GPU per rank (43 GB peak measured, docs/PERFORMANCE.md), and -p load_in_8bit=true "
                "halves its weights on smaller GPUs (docs/MULTI_GPU.md)")


def check_grpo_split(cfg: RunConfig, world: int) -> None:
    """GRPO's step is `tasks_per_round` groups over all ranks, each rank a whole number of them."""
    if cfg.rl.method == "grpo" and cfg.rl.tasks_per_round % world:
        raise ConfigError(f"GRPO on {world} processes: tasks_per_round={cfg.rl.tasks_per_round} groups per step must "
                          f"split evenly across them (each process takes tasks_per_round / {world}); set "
                          f"tasks_per_round to a multiple of {world}")


def gathered_by_slot(views: Sequence[dict[str, T]], n_slots: int | None = None) -> dict[int, T]:
    """Ranks' {slot: item} maps as one, each slot from exactly one rank (and, given `n_slots`, every
    slot 0..n_slots-1 present): anything else is an error naming the slots, never a silent overwrite."""
    out: dict[int, T] = {}
    twice = []
    for view in views:
        for slot, item in view.items():
            if int(slot) in out:
                twice.append(int(slot))
            out[int(slot)] = item
    if twice:
        raise RuntimeError(f"RL step: slots {sorted(set(twice))} were handled by more than one rank")
    if n_slots is not None and sorted(out) != list(range(n_slots)):
        raise RuntimeError(f"RL step: the ranks handled slots {sorted(out)}, expected 0..{n_slots - 1}")
    return dict(sorted(out.items()))
