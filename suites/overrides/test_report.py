"""report: text, json, sarif and github formats of the same findings."""

from __future__ import annotations

import json
import re
from urllib.parse import unquote_to_bytes

import pytest

from harness.overrides.findings import Evidence, Finding, Severity
from harness.overrides.report import artifact_location, github, list_rules, render, sarif, text

FINDING = Finding(
    path="pkg/rocm_aiter_mla.py",
    line=3,
    col=5,
    code="HO101",
    symbol="renamed-parameter",
    severity=Severity.ERROR,
    message="AiterMLAMetadataBuilder._build_decode() renames parameter 'block_table_tensor'",
    class_name="pkg.rocm_aiter_mla.AiterMLAMetadataBuilder",
    method="_build_decode",
    base_class="pkg.common.MLACommonMetadataBuilder",
    base_path="pkg/common.py",
    base_line=2,
    params=("block_table_tensor", "block_table"),
    signature="def AiterMLAMetadataBuilder._build_decode(self, block_table, seq_lens)",
    base_signature="def MLACommonMetadataBuilder._build_decode(self, block_table_tensor, seq_lens)",
    evidence=Evidence(
        "pkg/common.py",
        4,
        16,
        "return self._build_decode(block_table_tensor=1, seq_lens=2)",
        "TypeError: AiterMLAMetadataBuilder._build_decode() got an unexpected keyword argument 'block_table_tensor'",
        "self",
    ),
)


def test_text_has_location_both_signatures_and_the_call() -> None:
    lines = text(FINDING).splitlines()
    assert lines[0].startswith("pkg/rocm_aiter_mla.py:3:5: HO101 renamed-parameter ")
    body = "\n".join(lines)
    assert FINDING.signature in body and FINDING.base_signature in body
    assert "pkg/common.py:4: return self._build_decode(" in body and "raises:   TypeError:" in body


def test_json_contract() -> None:
    (obj,) = json.loads(render([FINDING], "json"))
    for key in ("path", "line", "col", "code", "symbol", "severity", "class", "method",
                "base_class", "base_path", "base_line", "message", "evidence"):  # fmt: skip
        assert key in obj
    assert obj["evidence"]["path"] == "pkg/common.py" and obj["evidence"]["line"] == 4
    assert render([], "json") == "[]\n"


def test_sarif_shape() -> None:
    log = sarif([FINDING])
    assert log["version"] == "2.1.0" and "sarif" in log["$schema"]
    (run,) = log["runs"]
    rules = run["tool"]["driver"]["rules"]
    assert (
        rules[0]["id"] == "HO101"
        and rules[0]["shortDescription"]["text"]
        and rules[0]["help"]["markdown"]
    )
    (result,) = run["results"]
    assert result["ruleId"] == "HO101" and result["level"] == "error"
    assert rules[result["ruleIndex"]]["id"] == "HO101"
    region = result["locations"][0]["physicalLocation"]["region"]
    assert region == {"startLine": 3, "startColumn": 5}
    assert (
        result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
        == "pkg/rocm_aiter_mla.py"
    )
    assert [
        r["physicalLocation"]["artifactLocation"]["uri"] for r in result["relatedLocations"]
    ] == [
        "pkg/common.py",
        "pkg/common.py",
    ]


def test_github_annotation_escapes() -> None:
    line = github(FINDING)
    assert line.startswith(
        "::error file=pkg/rocm_aiter_mla.py,line=3,col=5,title=HO101 renamed-parameter::"
    )
    assert "\n" not in line and "%0A" in line
    warning = Finding("a,b.py", 1, 1, "HO401", "unparsable-file", Severity.WARNING, "50% bad: x")
    assert (
        github(warning)
        == "::warning file=a%2Cb.py,line=1,col=1,title=HO401 unparsable-file::50%25 bad: x"
    )


def test_list_rules_marks_optional_rules() -> None:
    listing = list_rules()
    assert "HO201  missing-override-decorator" in listing
    assert [line.split()[2] for line in listing.splitlines() if line.startswith("HO20")] == [
        "off",
        "off",
    ]


# SARIF URIs are RFC 3986 URI references (issue 12: spaces, %, #, non-ASCII, non-UTF-8).

_UNRESERVED = r"[A-Za-z0-9\-._~]"
_PCT = r"%[0-9A-F]{2}"
_SUB = r"[!$&'()*+,;=]"
_PCHAR = rf"(?:{_UNRESERVED}|{_PCT}|{_SUB}|[:@])"
_SEGMENT = rf"{_PCHAR}*"
_NZ = rf"{_PCHAR}+"
_NZ_NC = rf"(?:{_UNRESERVED}|{_PCT}|{_SUB}|@)+"
_AUTHORITY = rf"(?:{_UNRESERVED}|{_PCT}|{_SUB}|[:@])*"
_TAIL = rf"(?:\?(?:{_PCHAR}|[/?])*)?(?:#(?:{_PCHAR}|[/?])*)?"
_URI = rf"[A-Za-z][A-Za-z0-9+.\-]*:(?://{_AUTHORITY}(?:/{_SEGMENT})*|/(?:{_NZ}(?:/{_SEGMENT})*)?|{_NZ}(?:/{_SEGMENT})*|){_TAIL}"
_RELATIVE = rf"(?://{_AUTHORITY}(?:/{_SEGMENT})*|/(?:{_NZ}(?:/{_SEGMENT})*)?|{_NZ_NC}(?:/{_SEGMENT})*|){_TAIL}"
URI_REFERENCE = re.compile(rf"(?:{_URI}|{_RELATIVE})")


@pytest.mark.parametrize(
    "path",
    [
        "pkg/plain.py",
        "my dir/with space.py",
        "100%/done.py",
        "issue#12/a?b.py",
        "c:colon/first.py",
        "café/naïve.py",
        "bad\udcff/name.py",  # a non-UTF-8 byte, as os.fsdecode gives it
        "/abs/path with space.py",
    ],
)
def test_sarif_uris_are_rfc_3986_uri_references(path: str) -> None:
    location = artifact_location(path)
    uri = location["uri"]
    assert URI_REFERENCE.fullmatch(uri), uri
    relative = not path.startswith("/")
    assert ("uriBaseId" in location) is relative
    encoded = uri if relative else uri.removeprefix("file://")
    assert unquote_to_bytes(encoded) == path.encode("utf-8", "surrogateescape")
    if relative:
        assert ":" not in uri.split("/")[0]  # never read as a scheme
