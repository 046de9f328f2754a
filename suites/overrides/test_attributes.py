"""attributes: where the tree may read or change an attribute, from the cached summaries."""

from __future__ import annotations

import ast
from pathlib import Path

from harness.overrides import codec
from harness.overrides.discover import discover
from harness.overrides.evidence.attributes import Stores, modules_naming, named_on_other_objects
from harness.overrides.model.resolve import Project
from harness.overrides.summary import attribute_names, summarize


def test_other_objects_are_told_from_self_and_cls_in_the_text() -> None:
    assert named_on_other_objects("obj.x = 1", "x") and named_on_other_objects("myself.x", "x")
    assert not named_on_other_objects("self.x = 1\ncls.x\nobj.xy", "x")
    assert named_on_other_objects("(self).x", "x") and named_on_other_objects("self .x", "x")
    assert not named_on_other_objects("self. x\ncls.\t x", "x")


def test_the_names_a_file_writes_after_a_dot_or_passes_to_setattr() -> None:
    names = attribute_names(
        "self.a = x.b\nmyself.c\nsetattr(o,\n  'd', 1)\ncls.e\nobj . f()\n# g.h in a comment\n"
    )
    assert names.dotted == {"a", "b", "c", "e", "f", "h"}
    assert names.by_name == {"d"}


def test_the_names_survive_the_cache_and_a_file_that_does_not_parse() -> None:
    summary = summarize(b"def f(:\n    obj.flag = 1\n")
    assert summary.parse_failures and "flag" in summary.names.dotted
    back = codec.loads(codec.dumps(summarize(b"x.y = 1\nsetattr(a, 'z', 2)\n")))
    assert back.names.dotted == {"y"} and back.names.by_name == {"z"}


def test_modules_naming_finds_only_the_files_that_name_it(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("class A:\n    def f(self):\n        self.x = 1\n")
    (tmp_path / "b.py").write_text("def g(o):\n    o.x = 2\n")
    (tmp_path / "c.py").write_text("def h(o):\n    setattr(o, 'x', 3)\n")
    files, _ = discover([str(tmp_path)], cwd=str(tmp_path))
    summaries = {f.display: summarize(Path(f.path).read_bytes()) for f in files}
    project = Project([(f, summaries[f.display]) for f in files])
    shown = {m.file.display for m in modules_naming(project, "x")}
    assert shown == {"a.py", "b.py"}
    on_others = [
        m
        for m in modules_naming(project, "x")
        if named_on_other_objects(project.text(m.file.path) or "", "x")
    ]
    assert [m.file.display for m in on_others] == ["b.py"]
    assert {m.file.display for m in modules_naming(project, "x", by_name=True)} == {
        "a.py",
        "b.py",
        "c.py",
    }


def test_the_text_of_a_file_is_the_bytes_the_run_read(tmp_path: Path) -> None:
    """Evidence reads a file's text from what the run read (decoded as UTF-8, undecodable
    bytes replaced, newlines universal), not from the disk again; a file outside what it read
    (an installed module) is read when asked; one that cannot be read has no text."""
    path = tmp_path / "a.py"
    path.write_bytes(b"x = 1\n")
    files, _ = discover([str(tmp_path)], cwd=str(tmp_path))
    read = {str(path): b"y = 2\r\nz = '\xff'\r"}
    project = Project([(f, summarize(b"")) for f in files], sources=read)
    assert project.text(str(path)) == "y = 2\nz = '\ufffd'\n"
    other = tmp_path / "b.py"
    other.write_bytes(b"w = 3\n")
    assert project.text(str(other)) == "w = 3\n"
    assert project.text(str(tmp_path / "missing.py")) is None


def _stores(tmp_path: Path, files: dict[str, str]) -> Stores:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    found, _ = discover([str(tmp_path)], cwd=str(tmp_path))
    project = Project([(f, summarize(Path(f.path).read_bytes())) for f in found])

    def tree_of(path: str) -> ast.Module:
        try:
            return ast.parse(project.text(path) or "")
        except SyntaxError:
            return ast.Module(body=[], type_ignores=[])

    return Stores(project, tree_of)


def test_a_store_on_self_counts_only_when_any_object_does(tmp_path: Path) -> None:
    stores = _stores(tmp_path, {"a.py": "class A:\n    def f(self):\n        self.x = 1\n"})
    assert stores.stored("x") and not stores.stored("x", others=True)
    assert not stores.stored("y")


def test_reads_do_not_count_and_deletes_and_named_setters_do(tmp_path: Path) -> None:
    stores = _stores(
        tmp_path,
        {
            "a.py": "def f(o):\n    return o.read == 0\n",
            "b.py": "def g(o):\n    del o.gone\n",
            "c.py": "def h(o):\n    delattr(o, 'dropped')\n    setattr(self, 'put', 1)\n",
        },
    )
    assert not stores.stored("read", others=True)
    assert stores.stored("gone", others=True)
    assert stores.stored("dropped", others=True) and stores.stored("put", others=True)


def test_a_file_naming_it_that_does_not_parse_counts_as_storing_it(tmp_path: Path) -> None:
    stores = _stores(tmp_path, {"a.py": "def f(:\n    obj.flag == 1\n"})
    assert stores.stored("flag", others=True)
