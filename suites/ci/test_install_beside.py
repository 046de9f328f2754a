"""ci/install_beside.py: harness installs into vLLM's image without moving what the image holds."""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
import sys
import venv
from collections.abc import Sequence
from pathlib import Path

import packaging
import pytest
from packaging.requirements import Requirement

from ci import install_beside as beside

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def no_real_pip(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    """A fast test that reached the real pip would install into this venv: fail it instead."""
    if request.node.get_closest_marker("integration") is not None:
        return

    def refuse(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        raise AssertionError(f"a fast test ran the real pip: {list(argv)}")

    monkeypatch.setattr(beside, "_pip", refuse)


def _pins(version: str) -> dict[str, str]:
    """vLLM ``version``'s pins, as if its image held them."""
    pins: dict[str, str] = {}
    for line in (ROOT / f"ci/constraints-vllm-{version}.txt").read_text().splitlines():
        pin = line.partition("#")[0].strip()
        if pin:
            name, _, wanted = pin.partition("==")
            pins[name] = wanted
    return pins


def test_the_gpu_steps_extras_follow_their_references_once() -> None:
    names = [r.name for r in beside.requirements(beside._project(), ["gpu", "eval", "test"])]
    assert sorted(names) == sorted(
        ["torch", "numpy", "rich", "matplotlib", "flashinfer-python", "nvidia-ml-py"]
        + ["lm-eval", "pytest", "hypothesis", "pyyaml", "packaging"]
        + (["tomli"] if sys.version_info < (3, 11) else [])
    )


def test_an_unknown_extra_is_named() -> None:
    with pytest.raises(beside.BesideError, match="has no extra 'gpus' \\(it has dev, engine"):
        beside.requirements(beside._project(), ["gpus"])


@pytest.mark.parametrize("version", ["0.9.0", "0.34.0"])
def test_each_vllm_releases_image_keeps_its_torch_flashinfer_and_numpy(version: str) -> None:
    pins = _pins(version)
    wanted = beside.requirements(beside._project(), ["gpu", "eval"])
    result = beside.plan(wanted, pins.get)
    assert result.conflicts == []
    for name in ("torch", "flashinfer-python", "numpy", "lm-eval"):
        assert f"{name} {pins[name]}" in result.kept
    assert sorted(Requirement(m).name for m in result.missing) == [
        "matplotlib",
        "nvidia-ml-py",
        "rich",
    ]


def test_a_version_outside_a_range_is_a_conflict_not_an_upgrade() -> None:
    result = beside.plan(
        [Requirement("flashinfer-python>=0.2.5,<0.8")], {"flashinfer-python": "0.8.1"}.get
    )
    assert result.conflicts == ["flashinfer-python 0.8.1 (wanted: flashinfer-python<0.8,>=0.2.5)"]
    assert result.kept == [] and result.missing == []


class FakePip:
    """Records pip's argv (and the constraints it was given); answers with ``returncodes``."""

    def __init__(self, *returncodes: int, stderr: str = "") -> None:
        self.calls: list[list[str]] = []
        self.constraints: list[str] = []
        self.returncodes = list(returncodes)
        self.stderr = stderr

    def __call__(self, argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        self.calls.append(list(argv))
        if "-c" in argv:
            self.constraints = Path(argv[argv.index("-c") + 1]).read_text().splitlines()
        return subprocess.CompletedProcess(list(argv), self.returncodes.pop(0), "", self.stderr)


@pytest.fixture
def image(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The installed versions ``install`` sees: vLLM 0.34.0's pins, no rich, matplotlib or NVML."""
    held = _pins("0.34.0")
    monkeypatch.setattr(beside, "installed_version", held.get)
    monkeypatch.setattr(beside, "frozen", lambda: [f"{n}=={v}" for n, v in sorted(held.items())])
    return held


def test_what_is_missing_is_added_with_everything_installed_pinned(image: dict[str, str]) -> None:
    pip = FakePip(0, 0)
    result = beside.install(["gpu", "eval"], run=pip)
    (add, own) = pip.calls
    assert add[:4] == ["install", "-q", "-c", add[3]]
    assert sorted(add[4:]) == ["matplotlib>=3.8", "nvidia-ml-py>=12", "rich>=13"]
    assert "torch==2.14.0" in pip.constraints and "flashinfer-python==0.7.3" in pip.constraints
    assert own == ["install", "-q", "--no-deps", str(ROOT)]
    assert "torch 2.14.0" in result.kept


def test_nothing_missing_installs_this_package_alone(
    image: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    image.update({"rich": "15.0.0", "matplotlib": "3.11.2", "nvidia-ml-py": "13.615.71"})
    pip = FakePip(0)
    assert beside.install(["gpu"], run=pip).missing == []
    assert pip.calls == [["install", "-q", "--no-deps", str(ROOT)]]


def test_a_conflict_installs_nothing(image: dict[str, str]) -> None:
    image["flashinfer-python"] = "0.9.0"
    pip = FakePip()
    with pytest.raises(beside.BesideError) as raised:
        beside.install(["gpu"], run=pip)
    assert pip.calls == []
    assert str(raised.value) == (
        "this environment's flashinfer-python 0.9.0 (wanted: flashinfer-python<0.8,>=0.2.5): "
        "harness does not move it (nothing was installed)"
    )


def test_pip_that_would_move_something_is_one_line(
    image: dict[str, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pip = FakePip(1, stderr="Collecting rich\nERROR: ResolutionImpossible: for help visit ...\n")
    monkeypatch.setattr(beside, "_pip", pip)
    assert beside.main(["gpu"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("ci/install_beside.py: pip cannot add ")
    assert err.rstrip().endswith(
        "without moving what is installed: ERROR: ResolutionImpossible: for help visit ..."
    )


@pytest.mark.parametrize("argv", [[], ["gpu", "eval"], ["--help"]])
def test_usage(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert beside.main(argv) == 2
    assert capsys.readouterr().err.startswith("usage: python3 ci/install_beside.py EXTRAS")


def _dist_info(site: Path, name: str, version: str) -> None:
    info = site / f"{name}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


def test_the_pins_are_ones_pip_reads_for_every_installed_distribution(tmp_path: Path) -> None:
    """Current pip refuses ``==`` before a version PEP 440 cannot parse (the whole constraints
    file, so any install); one project under two spellings is pinned once, at the version
    ``import``-time lookup and pip see (the first on the path)."""
    first, second = tmp_path / "first", tmp_path / "second"
    _dist_info(first, "zope_interface", "6.0")
    _dist_info(second, "Zope.Interface", "5.0")
    _dist_info(first, "vendor_build", "1.0-custom")
    dists = importlib.metadata.distributions(path=[str(first), str(second)])
    assert sorted(beside.frozen(dists)) == ["vendor-build===1.0-custom", "zope-interface==6.0"]


def test_no_pip_in_the_image_is_said_as_such(tmp_path: Path) -> None:
    """An image without pip (``python3 -m pip``): one line that says so, not that pip 'cannot add
    ... without moving what is installed'."""
    image = tmp_path / "image"
    venv.create(image, with_pip=False)
    vendored = tmp_path / "vendored"
    shutil.copytree(Path(packaging.__file__).parent, vendored / "packaging")
    python = image / "bin" / "python"
    out = subprocess.run(
        [str(python), str(ROOT / "ci/install_beside.py"), "engine"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(vendored)},
    )
    assert out.returncode == 1, out.stderr
    assert out.stderr == (
        f"ci/install_beside.py: {python} has no pip (python3 -m ensurepip adds it): "
        "nothing was installed\n"
    )


# --- in a real environment (the package index: integration) ------------------------------------


def _fake_distribution(site: Path, name: str, version: str) -> None:
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "INSTALLER").write_text("fake\n")


@pytest.mark.integration
def test_in_a_fresh_environment_it_adds_and_refuses_without_moving(tmp_path: Path) -> None:
    env_dir = tmp_path / "image"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    clean = {k: v for k, v in os.environ.items() if k not in ("PIP_NO_INDEX", "PYTHONPATH")}

    def run(*argv: str | Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(a) for a in argv], capture_output=True, text=True, env=clean, timeout=900
        )

    assert run(python, "-m", "pip", "install", "-q", "packaging").returncode == 0
    site = Path(
        run(python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))").stdout.strip()
    )
    _fake_distribution(site, "flashinfer-python", "0.9.0")  # newer than the gpu extra admits
    _fake_distribution(site, "pytest", "8.0.0")  # what the image has: kept

    refused = run(python, ROOT / "ci/install_beside.py", "gpu")
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert refused.stderr.strip().splitlines() == [
        "ci/install_beside.py: this environment's flashinfer-python 0.9.0 (wanted: "
        "flashinfer-python<0.8,>=0.2.5): harness does not move it (nothing was installed)"
    ]

    added = run(python, ROOT / "ci/install_beside.py", "test")
    assert added.returncode == 0, added.stdout + added.stderr
    assert "kept pytest 8.0.0" in added.stderr
    versions = run(python, "-m", "pip", "list", "--format=freeze").stdout.splitlines()
    assert "pytest==8.0.0" in versions and "flashinfer-python==0.9.0" in versions  # not moved
    assert "attn-metadata-harness==0.1.0" in versions
    assert any(v.startswith("hypothesis==") for v in versions)
    assert run(python, "-c", "import harness.overrides").returncode == 0
