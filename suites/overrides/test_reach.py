"""reach: whether the method holding a call can run for the subclass (cycles, super chains)."""

from __future__ import annotations

from pathlib import Path

from harness.overrides.checker import CheckOptions, check
from harness.overrides.evidence.reach import quoted_names
from harness.overrides.findings import Finding, Severity

CYCLE = """\
class Base:
    def {entry}(self):
        return self._a(3)

    def _a(self, n):
        return self._b(n - 1) if n else None

    def _b(self, n):
        self.step(1, scale=2)
        return self._a(n)

    def step(self, x, scale=1):
        return x * scale


class Sub(Base):
{override}    def step(self, x):
        return x
"""


def _findings(tmp_path: Path, source: str) -> list[Finding]:
    (tmp_path / "m.py").write_text(source, encoding="utf-8")
    return check([str(tmp_path)], options=CheckOptions(cache_dir=None, cwd=str(tmp_path))).findings


def test_mutually_recursive_private_methods_reached_from_a_public_one(tmp_path: Path) -> None:
    (finding,) = _findings(tmp_path, CYCLE.format(entry="run", override=""))
    assert finding.severity is Severity.ERROR


def test_the_same_cycle_reached_only_from_an_overridden_method(tmp_path: Path) -> None:
    source = CYCLE.format(entry="_start", override="    def _start(self):\n        return None\n\n")
    source += "\n\ndef main(b: Base):\n    return b._start()\n"
    (finding,) = _findings(tmp_path, source)
    assert finding.severity is Severity.WARNING
    assert finding.evidence is not None and finding.evidence.unreached is not None


def test_a_super_chain_reaches_the_base_method(tmp_path: Path) -> None:
    source = (
        "class Base:\n    def setup(self):\n        self.step(1, scale=2)\n\n"
        "    def step(self, x, scale=1):\n        return x\n\n\n"
        "class Mid(Base):\n    def setup(self):\n        super().setup()\n\n\n"
        "class Leaf(Mid):\n    def step(self, x):\n        return x\n\n"
        "    def __init__(self):\n        self.setup()\n"
    )
    (finding,) = _findings(tmp_path, source)
    assert finding.severity is Severity.ERROR  # Mid.setup runs Base.setup through super()


UNTYPED = """\
class Base:
    def execute(self):
        return self.load_batch()

    def load_batch(self):
        return self._make_key(1, b=2)

    def _make_key(self, a, b=0):
        return a, b


class Sub(Base):
    def execute(self):
        return None

    def _make_key(self, a, bb=0):
        return a, bb


def drive(other):
    return other.runner.load_batch()
"""


def test_a_private_method_reached_only_through_an_untyped_receiver_is_a_warning_saying_so(
    tmp_path: Path,
) -> None:
    (finding,) = _findings(tmp_path, UNTYPED.replace("load_batch", "_load_batch"))
    assert finding.severity is Severity.WARNING
    assert finding.evidence is not None and finding.evidence.untyped is not None
    assert "Base._load_batch() is called only on objects whose class is unknown" in (
        finding.evidence.untyped
    )
    assert "the code does not show that one gets there (latent)" in finding.message


def test_a_public_method_called_on_an_untyped_receiver_is_reachable(tmp_path: Path) -> None:
    """Issue 29: ``other.runner.load_batch()`` may hold a ``Sub``; a call of the same name
    on another object (``Base.execute``'s, which ``Sub`` overrides) does not hide it."""
    (finding,) = _findings(tmp_path, UNTYPED)
    assert finding.severity is Severity.ERROR and finding.evidence is not None
    assert finding.evidence.untyped is None


def test_the_same_method_called_on_the_subclass_itself_is_an_error(tmp_path: Path) -> None:
    (finding,) = _findings(tmp_path, UNTYPED + "\n\ndef main():\n    return Sub().load_batch()\n")
    assert finding.severity is Severity.ERROR


def test_a_dispatcher_overridden_without_super_does_not_reach_its_branches(
    tmp_path: Path,
) -> None:
    source = (
        "class Base:\n    def forward(self, x):\n        return self.forward_cpu(x, fast=True)\n\n"
        "    def forward_cpu(self, x, fast=False):\n        return x\n\n\n"
        "class Sub(Base):\n    def forward(self, x):\n        return x\n\n"
        "    def forward_cpu(self, x, quick=False):\n        return x\n"
    )
    (finding,) = _findings(tmp_path, source)
    assert finding.severity is Severity.WARNING


def test_a_base_init_the_subclass_never_calls_starts_no_path(tmp_path: Path) -> None:
    source = (
        "class Base:\n    def __init__(self):\n        self._setup(1, size=2)\n\n"
        "    def _setup(self, a, size=0):\n        return a\n\n\n"
        "class Sub(Base):\n    def __init__(self):\n        self.x = 1\n\n"
        "    def _setup(self, a, width=0):\n        return a\n"
    )
    (finding,) = _findings(tmp_path, source)
    assert finding.severity is Severity.WARNING
    called = source.replace("self.x = 1", "super().__init__()")
    (finding,) = _findings(tmp_path, called)
    assert finding.severity is Severity.ERROR


IDENTITY = """\
class Base:
    def run(self, x):
        if type(self).decode {op} Base.decode:
            return None
        return self.decode(x, fast=True)

    def decode(self, x, fast=False):
        return x


class Sub(Base):
    def decode(self, x, quick=False):
        return x
"""


def test_an_identity_guard_on_the_method_excludes_its_overrides(tmp_path: Path) -> None:
    (finding,) = _findings(tmp_path, IDENTITY.format(op="is not"))
    assert finding.severity is Severity.WARNING
    assert finding.evidence is not None and finding.evidence.unreached is not None
    (finding,) = _findings(tmp_path, IDENTITY.format(op="is"))
    assert finding.severity is Severity.ERROR


def test_the_path_through_a_cycle_and_a_super_chain_lists_each_hops_condition(
    tmp_path: Path,
) -> None:
    source = (
        "class Base:\n    def setup(self, n):\n        if n > 1:\n            self.step(1, scale=2)\n\n"
        "    def step(self, x, scale=1):\n        return x\n\n\n"
        "class Mid(Base):\n    def setup(self, n):\n        if n:\n            super().setup(n)\n\n\n"
        "class Leaf(Mid):\n    def step(self, x):\n        return x\n\n"
        "    def __init__(self, ok):\n        if ok:\n            self.setup(2)\n"
    )
    (finding,) = _findings(tmp_path, source)
    assert finding.severity is Severity.ERROR and finding.evidence is not None
    assert finding.evidence.guards == ("ok", "n", "n > 1")


ESCAPE = """\
class Base:
    def make(self, ts):
        plot = self._ts_plot if ts else self._plot
        return plot(1, 2)

    def _ts_plot(self, ax, data):
        return self._plot(ax, data.index, data, style=None)

    @classmethod
    def _plot(cls, ax, x, y, style=None):
        return ax


class Hist(Base):
{make}    @classmethod
    def _plot(cls, ax, y, style=None):
        return ax
"""


def test_a_name_escaping_only_in_a_method_the_subclass_overrides_does_not_reach_it(
    tmp_path: Path,
) -> None:
    # As pandas 2.2.3's LinePlot._make_plot (`plotf = self._ts_plot`) and HistPlot.
    overridden = "    def make(self, ts):\n        return self._plot(1, 2)\n\n"
    (finding,) = _findings(tmp_path, ESCAPE.format(make=overridden))
    assert finding.severity is Severity.WARNING
    assert finding.evidence is not None and finding.evidence.unreached == (
        "Base._ts_plot() runs only from Base.make() (as self._ts_plot), which Hist overrides "
        "without calling super()"
    )
    (finding,) = _findings(tmp_path, ESCAPE.format(make=""))
    assert finding.severity is Severity.ERROR  # Hist runs Base.make, where _ts_plot escapes
    chained = overridden.replace("return self._plot(1, 2)", "return super().make(ts)")
    (finding,) = _findings(tmp_path, ESCAPE.format(make=chained))
    assert finding.severity is Severity.ERROR  # through super(), Base.make runs for a Hist


def test_a_name_escaping_in_the_class_body_always_reaches_it(tmp_path: Path) -> None:
    overridden = "    def make(self, ts):\n        return self._plot(1, 2)\n\n"
    source = ESCAPE.format(make=overridden).replace(
        "class Base:\n", "class Base:\n    handler = property(lambda self: self._ts_plot)\n\n"
    )
    (finding,) = _findings(tmp_path, source)
    assert finding.severity is Severity.ERROR


def test_a_name_escaping_after_a_string_holding_a_hash_reaches_it(tmp_path: Path) -> None:
    overridden = "    def make(self, ts):\n        return self._plot(1, 2)\n\n"
    for body, severity in (
        ('    handler = register("issue #", lambda self: self._ts_plot)\n', Severity.ERROR),
        ("    handler = register('#', lambda self: self._ts_plot)  # 'x'\n", Severity.ERROR),
        ('    handler = register("issue")  # lambda self: self._ts_plot\n', Severity.WARNING),
    ):
        source = ESCAPE.format(make=overridden).replace("class Base:\n", "class Base:\n" + body)
        (finding,) = _findings(tmp_path, source)
        assert finding.severity is severity, body


UNREAD = """\
import torch.nn as nn


class Layer(nn.Module):
    def update_layer(self, name, init):
        if init:
            self.init_weights(name)

    def init_weights(self, name):
        self.reset_parameters(name, True)

    def reset_parameters(self, name, init):
        return name


class Ada(Layer):
{update}    def reset_parameters(self, name):
        return name
"""


def test_an_unread_bases_public_method_reached_only_through_overridden_methods_is_latent(
    tmp_path: Path,
) -> None:
    # As PEFT 0.21.2's LoraLayer.lora_ga_init (reached from update_layer) and AdaLoraLayer.
    overridden = "    def update_layer(self, name, init):\n        return name\n\n"
    (finding,) = _findings(tmp_path, UNREAD.format(update=overridden))
    assert finding.severity is Severity.WARNING
    assert finding.evidence is not None and finding.evidence.untyped is not None
    assert finding.evidence.untyped.startswith(
        "Layer.init_weights() runs only if a base (nn.Module), which the checker did not read, "
        "calls it (Layer.init_weights() runs only from Layer.update_layer(), which Ada overrides "
        "without calling super())"
    )
    (finding,) = _findings(tmp_path, UNREAD.format(update=""))
    assert finding.severity is Severity.ERROR and finding.evidence is not None
    assert finding.evidence.guards == ("init",)
    uncalled = UNREAD.format(update=overridden).replace("self.init_weights(name)", "pass")
    (finding,) = _findings(tmp_path, uncalled)
    assert finding.severity is Severity.ERROR  # called nowhere in the tree: an entry point


LOOKUP = """\
class Base:
    names = ("a", "b")

    def run(self):
        return self._dispatch()

    def sizes(self):
        return [{lookup} for n in self.names]

    def _dispatch(self):
        return self._make(1, fast=True)

    def _make(self, a, fast=False):
        return a


class Sub(Base):
    def run(self):
        return None

    def _make(self, a, quick=False):
        return a
"""


def test_a_computed_getattr_on_self_dispatches_only_when_its_value_may_be_called(
    tmp_path: Path,
) -> None:
    # As PEFT 0.21.2's BaseTunerLayer (`getattr(self, layer_name)` over adapter_layer_names).
    (finding,) = _findings(tmp_path, LOOKUP.format(lookup="len(getattr(self, n))"))
    assert finding.severity is Severity.WARNING
    (finding,) = _findings(tmp_path, LOOKUP.format(lookup="getattr(self, n)()"))
    assert finding.severity is Severity.ERROR  # any method may be looked up and called
    # As statsmodels 0.15.0's Model._get_init_kwds: attribute values collected into a dict.
    (finding,) = _findings(tmp_path, LOOKUP.format(lookup="{n: getattr(self, n, None)}"))
    assert finding.severity is Severity.WARNING
    # A table of methods of one family: `_dispatch` is not in it, `_make` is.
    table = LOOKUP.format(lookup='getattr(self, "_d" + n)').replace("_dispatch", "_d_ispatch")
    (finding,) = _findings(tmp_path, table)
    assert finding.severity is Severity.ERROR


WILDCARD = """\
class Handler:
    def _execute(self):
        return getattr(self, self.verb)()

    def clear_all(self):
        self.clear(1, expires=2)

    def clear(self, name, expires=None):
        return name


class Sub(Handler):
    def clear(self, name):
        return name


def serve(handler):
    return handler._execute()
"""


def test_a_lookup_of_any_name_run_only_through_untyped_objects_leaves_entry_points_alone(
    tmp_path: Path,
) -> None:
    # As tornado 6.6.1's RequestHandler._execute (`getattr(self, self.request.method.lower())`).
    (finding,) = _findings(tmp_path, WILDCARD)
    assert finding.severity is Severity.ERROR  # clear_all is public and nothing calls it
    called = (
        WILDCARD + "\n\nclass Other(Handler):\n    def reset(self):\n        self.clear_all()\n"
    )
    (finding,) = _findings(tmp_path, called)
    assert finding.severity is Severity.WARNING  # reached only untyped, by the lookup
    assert finding.evidence is not None and finding.evidence.untyped == (
        "Handler.clear_all() runs only if a getattr(self, <any name>) in Handler._execute(), "
        "reached only through objects whose class is unknown, finds it"
    )


HOOK = """\
import torch.nn as nn


class Op(nn.Module):
    def __init__(self):
        super().__init__()
        self._fwd = self.pick()

    def pick(self):
        return self.forward_cpu

    def forward(self, x):
        return self._fwd(x, 1)

    def forward_cpu(self, x, y):
        return self.native(x, y, True)

    def native(self, x, y, fused=False):
        return x


class Runner(Op):
    def run(self, x):
        return self.forward(x)


class Rope(Op):
    def native(self, x, y):
        return x


class A(nn.Module):
{body}

class B(nn.Module):
{body}
"""


def test_a_method_most_direct_children_of_an_unread_base_define_is_that_bases_hook(
    tmp_path: Path,
) -> None:
    # As vLLM 0.33.0's CustomOp.forward (nn.Module.__call__ calls it) and
    # Ernie4_5_VLRotaryEmbedding.forward_native: a known true positive of the primer.
    (finding,) = _findings(
        tmp_path, HOOK.format(body="    def forward(self, x):\n        return x\n")
    )
    assert finding.severity is Severity.ERROR
    # Few of them define `forward`: nothing says nn.Module calls it; the tree calls it only
    # from Runner.run, so for a Rope it is latent.
    (finding,) = _findings(
        tmp_path, HOOK.format(body="    def other(self, x):\n        return x\n")
    )
    assert finding.severity is Severity.WARNING


def test_quoted_names_are_words_between_two_quotes_of_one_kind() -> None:
    text = (
        "BACKENDS = {\"cpu\": \"forward_cpu\", 'cuda': '_forward_cuda'}\n"
        "# Can't and \"Doesn't\" are prose; so is 'mixed\"\n"
        "KEYS = ('a b', \"2x\", '')\n"
    )
    assert quoted_names(text) == {"cpu", "forward_cpu", "cuda", "_forward_cuda"}
