"""RunConfig: profiles, overrides, errors that name the fix, RunPaths."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

from tritonrl_lib.core.config import (SECTIONS, ConfigError, _leaf_paths, available_profiles, load_config,
                                 parse_cli_overrides)


def test_profiles_exist_and_load():
    assert {"cpu", "gpu", "qwen7b", "smoke"} <= set(available_profiles())
    for name in ("cpu", "gpu", "gpu_long", "qwen7b", "smoke"):
        cfg = load_config(name)
        assert cfg.profile == name
        assert cfg.run_name == name


def test_qwen7b_is_the_source_setup():
    cfg = load_config("qwen7b")
    m = cfg.model
    assert m.model == "Qwen/Qwen2.5-Coder-7B-Instruct"
    assert m.load_in_8bit and not m.load_in_4bit
    assert (m.lora_r, m.lora_alpha, m.lora_dropout) == (16, 32, 0.05)
    assert m.lora_target_modules == ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    assert cfg.sft.per_device_batch_size == 2
    assert cfg.sft.max_samples == 1000


def _settings(cfg) -> dict:
    out = {}
    for f in dataclasses.fields(cfg):
        v = getattr(cfg, f.name)
        out.update({f"{f.name}.{k}": x for k, x in _settings(v).items()} if dataclasses.is_dataclass(v) else {f.name: v})
    return out


def test_gpu_long_is_the_gpu_profile_with_the_measured_rl_run_on_top():
    """gpu_long takes every setting of gpu (base: gpu) and changes only what the run that showed RL above
    SFT used: a change to gpu reaches it too."""
    gpu, long = _settings(load_config("gpu")), _settings(load_config("gpu_long"))
    changed = {k: long[k] for k in gpu if gpu[k] != long[k]}
    # (expected_minutes: its own measured duration, not a setting of the work)
    assert changed == {"profile": "gpu_long", "expected_minutes": 47.0, "model.lora_r": 16, "model.lora_alpha": 32,
                       "sft.epochs": 3, "sft.time_budget_s": 300, "rl.rounds": 16,
                       "eval.num_tasks": 67, "eval.eval_k": 8, "eval.heldout_sets": ["tasks"]}


def test_a_profile_builds_on_a_base(tmp_path):
    (tmp_path / "mine.yaml").write_text("base: smoke\nrl:\n  n_samples: 3\n")
    cfg = load_config(str(tmp_path / "mine.yaml"))
    smoke = load_config("smoke")
    assert (cfg.profile, cfg.rl.n_samples) == ("mine", 3)  # its own name, not the base's `profile: smoke`
    assert (cfg.model.model, cfg.rl.rounds, cfg.device) == (smoke.model.model, smoke.rl.rounds, smoke.device)
    # a base given as a file beside it, two levels deep; later layers win, command-line overrides last
    (tmp_path / "top.yaml").write_text("base: mine.yaml\nrl:\n  rounds: 5\n")
    top = load_config(str(tmp_path / "top.yaml"), cli=["rounds=7"])
    assert (top.profile, top.rl.n_samples, top.rl.rounds, top.model.model) == ("top", 3, 7, "tiny")


@pytest.mark.parametrize("text,match", [
    ("base: smok\n", r"base profile 'smok' not found .*did you mean 'smoke'"),
    ("base: [gpu]\n", "base must name a profile"),
    ("base: loop.yaml\n", r"in a loop \(loop\.yaml -> loop\.yaml\)"),
])
def test_a_bad_base_is_named(tmp_path, text, match):
    (tmp_path / "loop.yaml").write_text(text)
    with pytest.raises(ConfigError, match=match):
        load_config(str(tmp_path / "loop.yaml"))


def test_a_loop_through_two_profiles_is_named(tmp_path):
    (tmp_path / "a.yaml").write_text("base: b.yaml\n")
    (tmp_path / "b.yaml").write_text("base: a.yaml\n")
    with pytest.raises(ConfigError, match=r"a\.yaml -> b\.yaml -> a\.yaml"):
        load_config(str(tmp_path / "a.yaml"))


def test_smoke_uses_tiny_model_and_cpu_embedded():
    assert load_config("smoke").model.model == "tiny"
    assert load_config("cpu").model.model == "embedded"
    assert load_config("gpu").model.model == "embedded"


def test_auto_profile_follows_gpu(monkeypatch):
    import tritonrl_lib.core.config as config

    monkeypatch.setattr(config, "gpu_available", lambda: False)
    assert load_config("auto").profile == "cpu"
    monkeypatch.setattr(config, "gpu_available", lambda: True)
    assert load_config(None).profile == "gpu"


def test_leaf_names_unique_so_bare_keys_work():
    names = list(_leaf_paths())
    assert len(names) == len(set(names))
    # `model` is both a section and its main leaf (model.model): `-p model=tiny` and `model: tiny` work
    assert [s for s in SECTIONS if s in names] == ["model"]
    assert load_config("cpu", overrides={"model": "tiny"}).model.model == "tiny"


def test_overrides_bare_dotted_and_cli_in_order():
    cfg = load_config("smoke", overrides={"n_samples": 6, "sft.learning_rate": 1e-3},
                      cli=["rl.n_samples=8", "lora_target_modules=q_proj,k_proj", "packing=false"])
    assert cfg.rl.n_samples == 8  # cli applies after the dict
    assert cfg.sft.learning_rate == 1e-3
    assert cfg.model.lora_target_modules == ["q_proj", "k_proj"]
    assert cfg.sft.packing is False


def test_cli_values_are_typed():
    assert parse_cli_overrides(["a=10", "b=0.5", "c=true", "d=hello", "e=[1, 2]"]) == {
        "a": 10, "b": 0.5, "c": True, "d": "hello", "e": [1, 2]}
    with pytest.raises(ConfigError, match="not key=value"):
        parse_cli_overrides(["n_samples"])


@pytest.mark.parametrize("key,hint", [("n_sample", "n_samples"), ("rl.n_sampels", "n_samples"),
                                      ("learning_rat", "learning_rate"), ("lora_rank", "lora_r")])
def test_unknown_key_names_closest(key, hint):
    with pytest.raises(ConfigError) as e:
        load_config("smoke", overrides={key: 1})
    assert repr(key) in str(e.value) and repr(hint) in str(e.value)


@pytest.mark.parametrize("key,value,expected", [("n_samples", "ten", "int"), ("n_samples", 2.5, "int"),
                                                ("learning_rate", "fast", "float"), ("packing", "maybe", "bool"),
                                                ("n_samples", True, "int"), ("model", 3.5j, "str"),
                                                ("lora_target_modules", 5, "list of str")])
def test_wrong_type_names_expected(key, value, expected):
    with pytest.raises(ConfigError, match=f"expects {expected}"):
        load_config("smoke", overrides={key: value})


def test_choices_and_ranges_are_checked():
    with pytest.raises(ConfigError, match="did you mean 'grpo'"):
        load_config("smoke", overrides={"method": "grp"})
    with pytest.raises(ConfigError, match="top_k=5 exceeds n_samples=2"):
        load_config("smoke", overrides={"top_k": 5})
    with pytest.raises(ConfigError, match="between 0 and 1"):
        load_config("smoke", overrides={"curriculum_start_p": 1.5})
    with pytest.raises(ConfigError, match="choose one"):
        load_config("smoke", overrides={"load_in_8bit": True, "load_in_4bit": True})
    with pytest.raises(ConfigError, match="eval.baselines_measure='all' is not one of off, solved"):
        load_config("smoke", overrides={"baselines_measure": "all"})


def test_an_unquoted_off_in_yaml_is_told_to_be_quoted(tmp_path):
    profile = tmp_path / "p.yaml"
    profile.write_text("base: smoke\neval:\n  baselines_measure: off\nverify:\n  timing: on\n")
    with pytest.raises(ConfigError, match=r"as booleans; quote it \(.*baselines_measure: \"off\"\)"):
        load_config(str(profile))
    profile.write_text("base: smoke\neval:\n  baselines_measure: 'off'\nverify:\n  timing: 'on'\n")
    cfg = load_config(str(profile))
    assert (cfg.eval.baselines_measure, cfg.verify.timing) == ("off", "on")


def test_unknown_profile_suggests(tmp_path):
    with pytest.raises(ConfigError, match="did you mean 'smoke'"):
        load_config("smok")


def test_yaml_profile_file_errors_name_the_file(tmp_path):
    bad = tmp_path / "mine.yaml"
    bad.write_text("rl:\n  n_sample: 3\n")
    with pytest.raises(ConfigError, match=r"mine\.yaml: unknown setting 'rl\.n_sample'"):
        load_config(str(bad))
    bad.write_text("rl: 3\n")
    with pytest.raises(ConfigError, match="must be a mapping"):
        load_config(str(bad))
    good = tmp_path / "mine2.yaml"
    good.write_text(yaml.safe_dump({"model": {"model": "tiny"}, "n_samples": 4}))
    cfg = load_config(str(good))
    assert (cfg.profile, cfg.model.model, cfg.rl.n_samples) == ("mine2", "tiny", 4)


def test_runpaths_derive_everything_from_run_root(tmp_path):
    cfg = load_config("smoke", overrides={"outputs_dir": str(tmp_path), "run": "r1"})
    p = cfg.paths
    assert p.root == tmp_path / "r1"
    r3 = p.rl_round(3)
    every = [p.sft_train, p.difficulty_labels, p.split, p.sft_checkpoint, p.rl_checkpoint, p.rl_best,
             p.eval_file("sft"), p.chart("funnel"), p.report_html, p.sft_log, p.rl_log, p.curriculum_log,
             p.timings, p.config_snapshot, p.notebooks_dir, p.rl_state, p.rl_best_adapter, r3.samples, r3.meta,
             r3.kept, r3.adapter, r3.trainer_dir]
    assert all(tmp_path / "r1" in q.parents for q in every)
    # the RL folder's files stay inside checkpoints/rl, one folder per best-of-N round
    assert all(p.rl_checkpoint in q.parents for q in (p.rl_state, p.rl_best, p.rl_best_adapter, r3.samples))
    assert r3.dir == p.rl_checkpoint / "rounds" / "round-003" != p.rl_round(4).dir
    assert p.checkpoint("rl") == p.rl_checkpoint == tmp_path / "r1" / "checkpoints" / "rl"
    assert p.checkpoint("sft") == tmp_path / "r1" / "checkpoints" / "sft"
    with pytest.raises(ConfigError):
        p.checkpoint("rl_final")
    p.ensure()
    assert p.data_dir.is_dir() and p.charts_dir.is_dir()


def test_relative_outputs_dir_is_under_project_root():
    cfg = load_config("smoke")
    assert cfg.paths.root == Path(__file__).resolve().parent.parent / "outputs" / "smoke"


def test_run_name_must_be_plain():
    with pytest.raises(ConfigError, match="plain folder name"):
        load_config("smoke", overrides={"run": "../escape"})


def test_config_roundtrips_through_yaml(tmp_path):
    cfg = load_config("qwen7b", overrides={"n_samples": 12})
    cfg.save(tmp_path / "c.yaml")
    data = yaml.safe_load((tmp_path / "c.yaml").read_text())
    assert data["rl"]["n_samples"] == 12
    assert data["model"] == dataclasses.asdict(load_config("qwen7b").model)
    # the flat view is what papermill and -p use; every value round-trips as an override
    again = load_config("qwen7b", overrides=cfg.flat())
    assert again.to_dict() == cfg.to_dict()


def test_family_weights_and_heldout_levels_are_checked_with_a_fix_named():
    cfg = load_config("smoke", overrides={"sft_family_weights": "epilogue_chain:3,relu:2",
                                          "heldout_family_levels": [1]})
    assert cfg.data.sft_family_weights == ["epilogue_chain:3", "relu:2"] and cfg.data.heldout_family_levels == [1]
    with pytest.raises(ConfigError, match="family_or_category:N"):
        load_config("smoke", overrides={"sft_family_weights": "epilogue_chain"})
    with pytest.raises(ConfigError, match="N >= 1"):
        load_config("smoke", overrides={"sft_family_weights": "epilogue_chain:0"})
    # the command line's comma form of a list of ints, as YAML's list form
    assert load_config("smoke", overrides={"heldout_family_levels": "1,2"}).data.heldout_family_levels == [1, 2]
    assert load_config("smoke", overrides={"heldout_family_levels": "1"}).data.heldout_family_levels == [1]
    with pytest.raises(ConfigError, match="levels are 1 and 2"):
        load_config("smoke", overrides={"heldout_family_levels": [0]})
