"""The project's set-up files agree with each other."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent


def _name(req: str) -> str:
    return re.split(r"[<>=!~\[; ]", req.strip(), maxsplit=1)[0].lower().replace("_", "-")


def _pyproject_requirements() -> dict[str, str]:
    data = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    reqs = list(data["dependencies"])
    for extra, items in data["optional-dependencies"].items():
        reqs += [r for r in items if not r.startswith("tritonrl[")]
    return {_name(r): r for r in reqs}


def test_environment_yml_names_the_same_dependencies_as_pyproject():
    env = yaml.safe_load((REPO / "environment.yml").read_text())
    deps = env["dependencies"]
    assert "python=3.11" in deps
    pip = next(d["pip"] for d in deps if isinstance(d, dict) and "pip" in d)
    assert "-e .[all]" in pip  # installs the project itself
    listed = {_name(r): r for r in pip if not r.startswith("-")}
    project = _pyproject_requirements()
    assert set(listed) == set(project), (set(listed) ^ set(project))
    for name, req in project.items():
        if name == "torch":
            assert listed[name] == "torch==2.13.0"  # pinned, as the Makefile installs it
        else:
            assert listed[name] == req, f"{name}: environment.yml {listed[name]!r} vs pyproject {req!r}"


def test_all_extra_covers_every_extra():
    data = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras = set(data["optional-dependencies"]) - {"all"}
    (all_req,) = data["optional-dependencies"]["all"]
    assert set(re.search(r"\[(.*)\]", all_req).group(1).split(",")) == extras
    assert data["scripts"]["tritonrl"] == "tritonrl_lib.cli:main"


def test_ci_calls_the_readme_test_command():
    readme = (REPO / "README.md").read_text()
    ci = (REPO / ".ci" / "run").read_text()
    assert "make test" in readme and "make run" in readme
    assert "make test" in ci
    assert (REPO / ".ci" / "run").stat().st_mode & 0o111


def test_outputs_is_ignored_except_its_readme():
    ignore = (REPO / ".gitignore").read_text().splitlines()
    assert "outputs/*" in ignore and "!outputs/README.md" in ignore
    assert (REPO / "outputs" / "README.md").is_file()


def test_the_license_is_an_spdx_expression_the_build_backend_accepts_without_warning():
    """The table form (`license = {text = ...}`) made setuptools >= 77 warn at every install step."""
    import warnings

    setuptools = pytest.importorskip("setuptools")
    from setuptools.config.pyprojecttoml import read_configuration

    data = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert data["project"]["license"] == "Apache-2.0"
    assert not any(c.startswith("License ::") for c in data["project"].get("classifiers", []))  # PEP 639: not both
    (backend,) = [r for r in data["build-system"]["requires"] if _name(r) == "setuptools"]
    assert backend == "setuptools>=77"  # the first release that reads the SPDX string
    if int(setuptools.__version__.split(".")[0]) < 77:
        pytest.skip(f"setuptools {setuptools.__version__} here predates the SPDX string (builds use >= 77)")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        read_configuration(REPO / "pyproject.toml", expand=False)
    said = [str(w.message) for w in caught if "license" in str(w.message).lower()]
    assert not said, said
