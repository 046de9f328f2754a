"""configs: ``getattr(config, "x", <falsy>)`` conditions decided against the config's class."""

from __future__ import annotations

from pathlib import Path

from harness.overrides.checker import CheckOptions, check
from harness.overrides.findings import Finding, Severity

CONFIGS = """\
from dataclasses import dataclass, field


@dataclass
class Config:
    mode: str = "a"


@dataclass
class LoraConfig(Config):
    target_parameters: list = field(default_factory=list)


@dataclass
class IA3Config(Config):
    feedforward: bool = False
"""

TUNERS = """\
from configs import Config, IA3Config


class Base:
    def inject(self, config):
        self._prepare(config)
        if getattr(config, "target_parameters", []):
            self._inject_parameters(config)

    def _prepare(self, config: Config): ...

    def _inject_parameters(self, config):
        self._create(config, parameter_name="w")

    def _create(self, config, parameter_name=None): ...


class IA3Model(Base):
    def _prepare(self, config: IA3Config): ...

    def _create(self, config): ...
"""


def _one(tmp_path: Path, configs: str = CONFIGS, tuners: str = TUNERS) -> Finding:
    (tmp_path / "configs.py").write_text(configs, encoding="utf-8")
    (tmp_path / "tuners.py").write_text(tuners, encoding="utf-8")
    result = check([str(tmp_path)], options=CheckOptions(cache_dir=None, cwd=str(tmp_path)))
    assert len(result.findings) == 1, result.findings
    return result.findings[0]


def _error(finding: Finding) -> None:
    assert finding.severity is Severity.ERROR, finding.evidence
    assert finding.evidence is not None
    assert finding.evidence.guards == ('getattr(config, "target_parameters", [])',)


def test_a_config_class_without_the_field_decides_the_condition(tmp_path: Path) -> None:
    finding = _one(tmp_path)
    assert finding.severity is Severity.WARNING and finding.evidence is not None
    said = finding.evidence.unreached
    assert said is not None
    assert 'it runs only if getattr(config, "target_parameters", []) (at tuners.py:8)' in said
    assert "config is an instance of IA3Config (IA3Model._prepare() annotates it)" in said
    assert "no class of its hierarchy defines target_parameters" in said


def test_hasattr_is_decided_the_same_way(tmp_path: Path) -> None:
    tuners = TUNERS.replace(
        'getattr(config, "target_parameters", [])', 'hasattr(config, "target_parameters")'
    )
    finding = _one(tmp_path, tuners=tuners)
    assert finding.severity is Severity.WARNING and finding.evidence is not None
    assert "no class of its hierarchy defines target_parameters" in str(finding.evidence.unreached)


def _latent(finding: Finding, said: str = "the class the code names for config, ") -> None:
    """Undecided, but the path needs a feature test the code does not say this class passes."""
    assert finding.severity is Severity.WARNING, finding.evidence
    assert finding.evidence is not None
    assert finding.evidence.guards == ('getattr(config, "target_parameters", [])',)
    why = str(finding.evidence.untyped)
    assert 'it runs only if getattr(config, "target_parameters", []) (at tuners.py:' in why, why
    assert "a test for objects with target_parameters" in why and said in why, why
    assert "the code does not show that one gets there (latent)" in finding.message


def test_the_base_annotation_alone_is_latent(tmp_path: Path) -> None:
    _latent(
        _one(tmp_path, tuners=TUNERS.replace("config: IA3Config", "config")),
        "the code does not name the class of config for IA3Model",
    )


def test_no_named_class_is_latent(tmp_path: Path) -> None:
    tuners = TUNERS.replace("config: IA3Config", "config").replace("config: Config", "config")
    _latent(_one(tmp_path, tuners=tuners), "the code does not name the class of config for")


def test_a_truthy_default_decides_nothing(tmp_path: Path) -> None:
    tuners = TUNERS.replace('"target_parameters", [])', '"target_parameters", [1])')
    finding = _one(tmp_path, tuners=tuners)
    assert finding.severity is Severity.ERROR


def test_a_subclass_of_the_config_class_with_the_field_keeps_the_error(tmp_path: Path) -> None:
    """Issue 29: an annotation names its class or any subclass of it; the caller may pass the
    subclass that has the field, so the test may hold: the error stands, its guard shown."""
    configs = CONFIGS + "\n\nclass Special(IA3Config):\n    target_parameters = ['w']\n"
    _error(_one(tmp_path, configs=configs))


def test_a_config_class_with_an_unknown_base_is_latent(tmp_path: Path) -> None:
    configs = CONFIGS.replace("class Config:", "class Config(Mixin):").replace(
        "from dataclasses", "from elsewhere import Mixin\nfrom dataclasses"
    )
    _latent(_one(tmp_path, configs=configs), "names for config, IA3Config, lacks it")


def test_a_config_class_with_getattr_decides_nothing(tmp_path: Path) -> None:
    configs = CONFIGS + "\n    def __getattr__(self, name):\n        return [name]\n"
    _error(_one(tmp_path, configs=configs))


def test_a_field_assigned_in_init_decides_nothing(tmp_path: Path) -> None:
    configs = CONFIGS.replace(
        "    feedforward: bool = False\n",
        "    feedforward: bool = False\n\n"
        "    def __post_init__(self):\n        self.target_parameters = ['w']\n",
    )
    _error(_one(tmp_path, configs=configs))


def test_a_field_set_before_the_test_keeps_the_error(tmp_path: Path) -> None:
    tuners = TUNERS.replace(
        "        self._prepare(config)\n",
        "        config.target_parameters = ['w']\n        self._prepare(config)\n",
    )
    _error(_one(tmp_path, tuners=tuners))


def test_a_field_written_elsewhere_is_latent(tmp_path: Path) -> None:
    tuners = TUNERS + "\n\ndef fill(config):\n    config.target_parameters = ['w']\n"
    _latent(_one(tmp_path, tuners=tuners), "names for config, IA3Config, lacks it")


def test_a_rebound_name_is_latent(tmp_path: Path) -> None:
    tuners = TUNERS.replace(
        "        self._prepare(config)\n",
        "        self._prepare(config)\n        config = make(config)\n",
    )
    _latent(_one(tmp_path, tuners=tuners), "the code does not name the class of config for")


def test_a_private_method_of_a_class_with_an_unread_base_is_reached_at_the_trees_calls(
    tmp_path: Path,
) -> None:
    """``Base(nn.Module)``: ``_inject_parameters`` is not an entry only because the MRO is not
    read; the path runs through ``inject``, whose condition is decided."""
    tuners = TUNERS.replace("class Base:", "class Base(Module):").replace(
        "from configs", "from elsewhere import Module\nfrom configs"
    )
    finding = _one(tmp_path, tuners=tuners)
    assert finding.severity is Severity.WARNING and finding.evidence is not None
    assert "no class of its hierarchy defines target_parameters" in str(finding.evidence.unreached)


def test_a_private_method_the_tree_never_calls_stays_an_entry_with_an_unread_base(
    tmp_path: Path,
) -> None:
    tuners = (
        TUNERS.replace("class Base:", "class Base(Module):")
        .replace("from configs", "from elsewhere import Module\nfrom configs")
        .replace("            self._inject_parameters(config)\n", "            pass\n")
    )
    finding = _one(tmp_path, tuners=tuners)
    assert finding.severity is Severity.ERROR and finding.evidence is not None
    assert finding.evidence.guards == ()


def test_getattr_in_a_base_of_the_config_class_decides_nothing(tmp_path: Path) -> None:
    configs = CONFIGS.replace(
        '    mode: str = "a"\n',
        '    mode: str = "a"\n\n    def __getattr__(self, name):\n        return [name]\n',
    )
    _error(_one(tmp_path, configs=configs))


def test_an_unknown_class_decorator_decides_nothing(tmp_path: Path) -> None:
    configs = CONFIGS.replace(
        "@dataclass\nclass IA3Config", "@register\n@dataclass\nclass IA3Config"
    )
    _error(
        _one(
            tmp_path, configs=configs.replace("from dataclasses", "register = id\nfrom dataclasses")
        )
    )


def test_a_condition_of_the_calls_own_function_is_decided_too(tmp_path: Path) -> None:
    tuners = TUNERS.replace(
        '        if getattr(config, "target_parameters", []):\n            self._inject_parameters(config)\n',
        "        self._inject_parameters(config)\n",
    ).replace(
        '        self._create(config, parameter_name="w")\n',
        "        self._prepare(config)\n"
        '        if getattr(config, "target_parameters", None) is not None:\n'
        '            self._create(config, parameter_name="w")\n',
    )
    finding = _one(tmp_path, tuners=tuners)
    assert finding.severity is Severity.WARNING, finding.evidence
    assert "config is an instance of IA3Config" in str(
        finding.evidence and finding.evidence.unreached
    )


def test_a_feature_test_on_self_is_a_state_test_and_keeps_the_error(tmp_path: Path) -> None:
    tuners = TUNERS.replace('getattr(config, "target_parameters", [])', 'hasattr(self, "hooks")')
    finding = _one(tmp_path, tuners=tuners)
    assert finding.severity is Severity.ERROR and finding.evidence is not None
    assert finding.evidence.guards == ('hasattr(self, "hooks")',)


def test_a_base_class_whose_subclass_has_the_field_keeps_the_error(tmp_path: Path) -> None:
    """Issue 29: ``Base._prepare(config: Config)`` names ``Config`` or any subclass, and
    ``LoraConfig(Config)`` has the field: the test may hold, so the error stands."""
    tuners = TUNERS.replace("    def _prepare(self, config: IA3Config): ...\n\n", "")
    _error(_one(tmp_path, tuners=tuners))


def test_the_narrowest_class_named_decides(tmp_path: Path) -> None:
    """The override names ``IA3Config``, the base ``Config``: the object is an ``IA3Config``,
    whose hierarchy lacks the field, whatever ``Config``'s other subclasses have."""
    configs = CONFIGS.replace("class IA3Config(Config):", "class IA3Config(Config):\n    x = 1")
    tuners = TUNERS.replace(
        "self._prepare(config)", "self._prepare(config)\n        self._use(config)"
    )
    tuners = tuners.replace(
        "    def _prepare(self, config: Config): ...",
        "    def _prepare(self, config: Config): ...\n\n    def _use(self, config: Config): ...",
    )
    finding = _one(tmp_path, configs=configs, tuners=tuners)
    assert finding.severity is Severity.WARNING and finding.evidence is not None
    assert "an instance of IA3Config" in str(finding.evidence.unreached)
