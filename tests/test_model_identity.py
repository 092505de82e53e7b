"""An evaluation record names the model it judged by `model_identity`: the same weights copied
elsewhere must keep the name (or a resumed session evaluates again, minutes of GPU), and any change
of a weight must change it (or a stale record is reused)."""

from __future__ import annotations

import json
import os
import shutil

import torch
from safetensors.torch import save_file

from tritonrl_lib.eval.identity import model_identity, weights_identity


def _adapter(folder, scale: float = 1.0):
    folder.mkdir(parents=True)
    (folder / "adapter_config.json").write_text(json.dumps({"r": 4, "lora_alpha": 8}))
    (folder / "tritonrl_model.json").write_text(json.dumps({"stage": "sft"}))
    g = torch.Generator().manual_seed(0)
    save_file({"a": torch.randn(16, 4, generator=g) * scale, "b": torch.randn(4, 16, generator=g)},
              str(folder / "adapter_model.safetensors"))
    return folder


def test_a_copied_checkpoint_with_other_mtimes_is_the_same_model(tmp_path):
    first = _adapter(tmp_path / "a" / "sft")
    copy = tmp_path / "b" / "sft"
    shutil.copytree(first, copy)  # copy2: mtimes kept only as precisely as the filesystem allows
    st = (copy / "adapter_model.safetensors").stat()
    os.utime(copy / "adapter_model.safetensors", ns=(st.st_atime_ns, st.st_mtime_ns // 10**9 * 10**9 + 123))
    assert model_identity(str(copy)) == model_identity(str(first))


def test_one_changed_weight_is_another_model(tmp_path):
    first = _adapter(tmp_path / "a" / "sft")
    other = _adapter(tmp_path / "b" / "sft", scale=1.0 + 2 ** -10)  # same size, same layout
    assert (first / "adapter_model.safetensors").stat().st_size == (other / "adapter_model.safetensors").stat().st_size
    assert model_identity(str(other)) != model_identity(str(first))
    # rewritten in place with the same size and the same mtime as before: still noticed
    st = (first / "adapter_model.safetensors").stat()
    shutil.copyfile(other / "adapter_model.safetensors", first / "adapter_model.safetensors")
    os.utime(first / "adapter_model.safetensors", ns=(st.st_atime_ns, st.st_mtime_ns + 1))
    assert model_identity(str(first)) == model_identity(str(other))


def test_names_stand_for_themselves(tmp_path):
    assert model_identity("embedded") == "embedded"
    assert model_identity("Qwen/Qwen2.5-0.5B-Instruct") == "Qwen/Qwen2.5-0.5B-Instruct"


def _fixed_folder(folder):
    """A checkpoint folder of fixed bytes: every file either digest reads, and one neither does."""
    folder.mkdir(parents=True)
    (folder / "tritonrl_model.json").write_bytes(b'{"stage": "sft", "run": "r1"}')
    (folder / "adapter_config.json").write_bytes(b'{"r": 4, "lora_alpha": 8}')
    (folder / "config.json").write_bytes(b'{"hidden_size": 64}')
    (folder / "adapter_model.safetensors").write_bytes(bytes(range(256)) * 4)
    (folder / "extra.bin").write_bytes(b"\x00\x01weights")
    (folder / "README.md").write_bytes(b"not hashed")
    return folder


def test_identities_of_fixed_bytes_are_pinned(tmp_path):
    """Evaluation records already on disk hold these digests: a change to how a folder is hashed
    would make every earlier record look stale (or, worse, another model's record look current)."""
    full = _fixed_folder(tmp_path / "full")
    assert model_identity(str(full)) == "5091a7019ea81f4b"
    assert weights_identity(str(full)) == "185554fb168c65b9"
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "config.json").write_bytes(b'{"hidden_size": 64}')
    assert model_identity(str(bare)) == "c20b30bb36f28bd1"  # a folder without weights still has a model identity
    assert weights_identity(str(bare)) is None  # ... but no weights identity
    assert weights_identity(str(tmp_path / "absent")) is None


def test_weights_identity_ignores_the_marker_and_model_identity_does_not(tmp_path):
    first = _fixed_folder(tmp_path / "a")
    second = _fixed_folder(tmp_path / "b")
    (second / "tritonrl_model.json").write_bytes(b'{"stage": "rl", "run": "r2"}')
    (second / "README.md").write_bytes(b"other notes")
    assert weights_identity(str(second)) == weights_identity(str(first))
    assert model_identity(str(second)) != model_identity(str(first))
