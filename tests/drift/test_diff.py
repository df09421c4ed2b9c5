"""``mcp-tap diff``: drift between two real captures, and each classification on its own.

The captures are real: the real ``mcp==2.3.0`` client, both eras, through the tap in front
of the real SDK demo origin (the baseline) and of ``tests/support/candidate_origin.py`` (the same
SDK server with ``echo`` removed, ``add`` given a new required argument and ``lookup``'s
header declaration dropped).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import orjson
import pytest
from captures import capture_releases
from ci_outputs import failures, junit, sarif
from cli_runs import cli, refused

from mcp_tap.drift import Area, Severity, diff_captures
from mcp_tap.drift.inventory import inventory, inventory_changes
from mcp_tap.evidence import iter_records, read_bundle


@pytest.fixture(scope="module")
def releases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Three real captures: the demo origin twice (one release) and the candidate once."""
    root = tmp_path_factory.mktemp("releases")

    return capture_releases(root)


def _records(path: Path) -> list[dict[str, Any]]:
    return read_bundle(path).records


def _keyed(diff: Any) -> set[tuple[str, str, str, str]]:
    return {(str(c.area), str(c.severity), c.subject, c.aspect) for c in diff.changes}


class TestDiffFormats:
    """``diff --format``: every change a case, a breaking one a located failure."""

    def _run(self, releases: dict[str, Path], fmt: str, capsys: pytest.CaptureFixture[str],
             candidate: str = "candidate") -> tuple[int, str]:
        code, out, err = cli(["diff", str(releases["baseline"]), str(releases[candidate]),
                              "--format", fmt], capsys)
        assert err == ""
        return code, out

    def test_junit(self, releases: dict[str, Path],
                   capsys: pytest.CaptureFixture[str]) -> None:
        """JUnit validates; the 7 breaking changes are the failures, typed by their area."""
        code, out = self._run(releases, "junit", capsys)
        suite = junit(out)
        found = failures(suite)
        assert code == 1 and suite.get("failures") == "7" and len(found) == 7
        assert suite.get("tests") == str(len(list(suite.iter("testcase"))))
        assert {f.get("type") for f in found.values()} == {"drift.inventory",
                                                           "drift.behaviour"}
        removed = found["inventory: tool echo removed"]
        assert removed.get("message") == "breaking: tool echo removed"
        behaviour = next(f for n, f in found.items() if n.startswith("behaviour: tools/call add"))
        assert "evidence: " in (behaviour.text or "") and "line " in (behaviour.text or "")

    def test_sarif(self, releases: dict[str, Path],
                   capsys: pytest.CaptureFixture[str]) -> None:
        """SARIF validates; each breaking change is an error located at its exchange's line."""
        code, out = self._run(releases, "sarif", capsys)
        run_ = sarif(out)
        results = run_["results"]
        assert code == 1 and len(results) == 7
        assert {r["level"] for r in results} == {"error"}
        rules = {d["id"]: d for d in run_["tool"]["driver"]["rules"]}
        assert {r["ruleId"] for r in results} == {"drift.inventory", "drift.behaviour"}
        assert all(rules[r["ruleId"]]["defaultConfiguration"]["level"] == "error"
                   for r in results)
        located = [r for r in results if r["ruleId"] == "drift.behaviour"]
        assert len(located) == 4
        for result in located:
            where = result["locations"][0]
            path = Path(where["physicalLocation"]["artifactLocation"]["uri"])
            line = where["physicalLocation"]["region"]["startLine"]
            exchange = where["logicalLocations"][0]["fullyQualifiedName"]
            record = orjson.loads(path.read_bytes().splitlines()[line - 1])
            assert record["exchangeId"] == exchange and record["method"] == "tools/call"
            assert path.is_relative_to(releases["candidate"])

    def test_markdown_and_clean(self, releases: dict[str, Path],
                                capsys: pytest.CaptureFixture[str]) -> None:
        """Markdown heads with the verdict; one release twice exits 0 with no failure."""
        code, out = self._run(releases, "markdown", capsys)
        assert code == 1 and out.startswith("### :x: mcp-tap diff: breaking")
        assert out.splitlines()[2].endswith(" passed, 7 failed, 0 skipped.")
        assert "| **FAIL** | inventory: tool echo removed | `drift.inventory` |" in out
        code, out = self._run(releases, "sarif", capsys, candidate="again")
        assert code == 0 and sarif(out)["results"] == []
        code, out = self._run(releases, "junit", capsys, candidate="again")
        assert code == 0 and junit(out).get("failures") == "0"

    def test_json_alias_and_conflict(self, releases: dict[str, Path],
                                     capsys: pytest.CaptureFixture[str]) -> None:
        """--format json is --json; giving both is a usage error (exit 2)."""
        _, by_format = self._run(releases, "json", capsys)
        _, by_alias, _ = cli(["diff", str(releases["baseline"]), str(releases["candidate"]),
                              "--json"], capsys)
        assert orjson.loads(by_format)["counts"] == orjson.loads(by_alias)["counts"]
        code, _, err = cli(["diff", str(releases["baseline"]), str(releases["candidate"]),
                            "--json", "--format", "markdown"], capsys)
        assert code == 2 and "not allowed with argument" in err


class TestRealReleases:
    """Two releases of a real SDK server, captured through the tap."""

    def test_the_candidate_breaks_clients(self, releases: dict[str, Path]) -> None:
        """A removed tool, a new required argument and a dropped header are breaking."""
        diff = diff_captures(_records(releases["baseline"]), _records(releases["candidate"]))
        keyed = _keyed(diff)
        assert ("inventory", "breaking", "tool echo", "removed") in keyed
        assert ("inventory", "breaking", "tool add", "inputSchema.required") in keyed
        assert ("inventory", "breaking", "tool lookup", "x-mcp-header") in keyed
        assert ("inventory", "compatible", "tool multiply", "added") in keyed
        assert ("behaviour", "breaking", 'tools/call add {"a":1,"b":2}', "outcome") in keyed
        assert ("behaviour", "breaking", 'tools/call add {"a":1,"b":2} (legacy)',
                "outcome") in keyed
        assert not diff.ok

    def test_streamed_sides_give_the_same_diff(self, releases: dict[str, Path]) -> None:
        """Records streamed from the bundles give the diff of the records in lists."""
        streamed = diff_captures(iter_records(releases["baseline"]),
                                 iter_records(releases["candidate"]))
        listed = diff_captures(_records(releases["baseline"]), _records(releases["candidate"]))
        assert streamed.to_json() == listed.to_json()
        assert streamed.changes and not streamed.over_bound

    def test_one_release_twice_has_no_drift(self, releases: dict[str, Path]) -> None:
        """Two captures of the same server differ in nothing but timing."""
        diff = diff_captures(_records(releases["baseline"]), _records(releases["again"]))
        assert diff.ok
        assert [c for c in diff.changes if c.area is not Area.HEALTH] == []
        assert diff.compared == 23
        assert diff.only_baseline == () and diff.only_candidate == ()

    def test_cli_exit_codes_and_json(self, releases: dict[str, Path],
                                     capsys: pytest.CaptureFixture[str]) -> None:
        """Exit 1 and the JSON shape on a breaking change; exit 0 on none."""
        code, out, err = cli(["diff", str(releases["baseline"]), str(releases["candidate"]),
                              "--json"], capsys)
        assert (code, err) == (1, "")
        data = orjson.loads(out)
        assert data["ok"] is False and data["counts"]["breaking"] == 7
        assert data["baseline"]["bundles"] == [str(releases["baseline"])]
        assert len(data["baseline"]["chainHeads"][0]) == 64
        assert data["health"]["candidate"]["samples"] == 23
        code, out, _ = cli(["diff", str(releases["baseline"]), str(releases["again"])], capsys)
        assert code == 0 and out.splitlines()[-1].startswith("ok: 0 breaking")

    def test_text_report(self, releases: dict[str, Path],
                         capsys: pytest.CaptureFixture[str]) -> None:
        """The text report has one section per area and ends in the verdict."""
        _code, out, _ = cli(["diff", str(releases["baseline"]), str(releases["candidate"])],
                            capsys)
        lines = out.splitlines()
        assert "inventory:" in lines and "behaviour:" in lines
        assert "  breaking   tool echo removed" in lines
        assert lines[-1].startswith("BREAKING: 7 breaking")


# -- classification on its own, on records shaped like the tap writes them ----------------


def _listing(tools: list[dict[str, Any]], method: str = "tools/list",
             key: str = "tools") -> dict[str, Any]:
    return _exchange(method, {}, {"result": {key: tools, "resultType": "complete"}})


def _exchange(method: str, params: dict[str, Any], answer: dict[str, Any],
              findings: list[dict[str, Any]] | None = None, ident: str = "x") -> dict[str, Any]:
    return {
        "kind": "exchange", "hop": "tap", "exchangeId": ident, "era": "modern",
        "method": method, "rpcId": 1,
        "ingress": {"httpMethod": "POST", "truncated": False, "receivedAt": 1.0,
                    "body": {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}},
        "origin": {"status": 200, "headers": [["content-type", "application/json"]],
                   "truncated": False, "ended": True, "endAt": 1.01,
                   "body": {"jsonrpc": "2.0", "id": 1, **answer}},
        "tapError": None, "findings": findings or [],
    }


TOOL: dict[str, Any] = {
    "name": "t",
    "inputSchema": {"type": "object", "properties": {
        "a": {"type": "integer"}, "mode": {"type": "string", "enum": ["x", "y"]},
        "r": {"type": "string", "x-mcp-header": "Region"}}, "required": ["a"]},
    "outputSchema": {"type": "object", "properties": {"v": {"type": "integer"}},
                     "required": ["v"]},
    "annotations": {"readOnlyHint": True},
}


def _tool_changes(edit: Any) -> set[tuple[str, str]]:
    new = copy.deepcopy(TOOL)
    edit(new)
    changes = inventory_changes(inventory([_listing([TOOL])]), inventory([_listing([new])]))
    return {(str(c.severity), c.aspect) for c in changes}


class TestToolClassification:
    """Each kind of tool change, classified for a client."""

    def test_new_optional_property_is_compatible(self) -> None:
        """A property the client may leave out breaks nobody."""
        assert _tool_changes(lambda t: t["inputSchema"]["properties"].update(
            b={"type": "string"})) == {("compatible", "inputSchema.properties")}

    def test_new_required_property_is_breaking(self) -> None:
        """A property every call must now send breaks old clients."""
        def edit(t: dict[str, Any]) -> None:
            t["inputSchema"]["properties"]["b"] = {"type": "string"}
            t["inputSchema"]["required"].append("b")
        assert _tool_changes(edit) == {("breaking", "inputSchema.required")}

    def test_input_property_removed_is_breaking(self) -> None:
        """A client still sending it may be refused."""
        assert _tool_changes(lambda t: t["inputSchema"]["properties"].pop("mode")) == {
            ("breaking", "inputSchema.properties")}

    def test_type_change_is_breaking(self) -> None:
        """An integer argument that became a string."""
        assert _tool_changes(lambda t: t["inputSchema"]["properties"]["a"].update(
            type="string")) == {("breaking", "inputSchema.a.type")}

    def test_enum_narrowed_and_widened(self) -> None:
        """Fewer allowed input values break, more do not."""
        narrow = _tool_changes(lambda t: t["inputSchema"]["properties"]["mode"].update(
            enum=["x"]))
        wide = _tool_changes(lambda t: t["inputSchema"]["properties"]["mode"].update(
            enum=["x", "y", "z"]))
        assert narrow == {("breaking", "inputSchema.mode.enum")}
        assert wide == {("compatible", "inputSchema.mode.enum")}

    def test_output_runs_the_other_way(self) -> None:
        """An output field no longer promised breaks a reader; a new one does not."""
        dropped = _tool_changes(lambda t: t["outputSchema"]["required"].clear())
        added = _tool_changes(lambda t: t["outputSchema"]["properties"].update(
            w={"type": "string"}))
        gone = _tool_changes(lambda t: t.pop("outputSchema"))
        assert dropped == {("breaking", "outputSchema.required")}
        assert added == {("compatible", "outputSchema.properties")}
        assert gone == {("breaking", "outputSchema")}

    def test_header_declarations(self) -> None:
        """A renamed or dropped x-mcp-header breaks; a new one is compatible."""
        renamed = _tool_changes(lambda t: t["inputSchema"]["properties"]["r"].update(
            {"x-mcp-header": "Zone"}))
        added = _tool_changes(lambda t: t["inputSchema"]["properties"]["a"].update(
            {"x-mcp-header": "A"}))
        assert renamed == {("breaking", "x-mcp-header")}
        assert added == {("compatible", "x-mcp-header")}

    def test_annotations(self) -> None:
        """A tool no longer read-only breaks a client that auto-approves read-only tools."""
        weaker = _tool_changes(lambda t: t["annotations"].update(readOnlyHint=False))
        stronger = _tool_changes(lambda t: t["annotations"].update(destructiveHint=False))
        assert weaker == {("breaking", "annotations.readOnlyHint")}
        assert stronger == {("compatible", "annotations.destructiveHint")}

    def test_prompt_arguments(self) -> None:
        """A prompt argument that became required is breaking."""
        old = _listing([{"name": "p", "arguments": [{"name": "n"}]}], "prompts/list",
                       "prompts")
        new = _listing([{"name": "p", "arguments": [{"name": "n", "required": True}]}],
                       "prompts/list", "prompts")
        changes = inventory_changes(inventory([old]), inventory([new]))
        assert [(c.severity, c.subject, c.aspect) for c in changes] == [
            (Severity.BREAKING, "prompt p", "arguments.required")]

    def test_a_kind_listed_on_one_side_only_is_not_compared(self) -> None:
        """A capture that never listed prompts says nothing about prompts."""
        prompts = _listing([{"name": "p"}], "prompts/list", "prompts")
        assert inventory_changes(inventory([prompts]), inventory([])) == []


class TestBehaviourAndRules:
    """Answers that drift, and rules newly broken or fixed."""

    def _diff(self, old: dict[str, Any], new: dict[str, Any]) -> set[tuple[str, str, str]]:
        diff = diff_captures([old], [new])
        return {(str(c.area), str(c.severity), c.aspect) for c in diff.changes
                if c.area is not Area.HEALTH}

    def test_error_code_change_is_breaking(self) -> None:
        """Clients branch on error codes; the message wording is not compared."""
        old = _exchange("tools/call", {"name": "t"}, {"error": {"code": -32602, "message": "a"}})
        new = _exchange("tools/call", {"name": "t"}, {"error": {"code": -32603, "message": "b"}})
        assert self._diff(old, new) == {("behaviour", "breaking", "error.code")}

    def test_result_type_change_is_breaking(self) -> None:
        """A complete answer that became a task."""
        old = _exchange("tools/call", {"name": "t"}, {"result": {"resultType": "complete"}})
        new = _exchange("tools/call", {"name": "t"}, {"result": {"resultType": "task"}})
        assert self._diff(old, new) == {("behaviour", "breaking", "resultType")}

    def test_payload_fields(self) -> None:
        """A field removed breaks, a field added is compatible, a value changed is changed."""
        old = _exchange("tools/call", {"name": "t"}, {"result": {"a": 1, "b": 2}})
        new = _exchange("tools/call", {"name": "t"}, {"result": {"a": 5, "c": 3}})
        assert self._diff(old, new) == {
            ("behaviour", "changed", "payload result.a"),
            ("behaviour", "breaking", "payload result.b"),
            ("behaviour", "compatible", "payload result.c")}

    def test_meta_and_id_are_not_drift(self) -> None:
        """Per-request metadata on the request and _meta on the answer are bookkeeping."""
        old = _exchange("tools/call", {"name": "t", "_meta": {"k": 1}},
                        {"result": {"a": 1, "_meta": {"v": "1"}}})
        new = _exchange("tools/call", {"name": "t", "_meta": {"k": 2}},
                        {"result": {"a": 1, "_meta": {"v": "2"}}})
        new["origin"]["body"]["id"] = 9
        assert self._diff(old, new) == set()

    def test_rule_newly_broken_and_fixed(self) -> None:
        """A rule the candidate breaks is breaking; one it no longer breaks is fixed."""
        finding = {"rule": "sse.id", "code": -32600, "boundary": "response", "message": "m"}
        other = {"rule": "response.id", "code": -32600, "boundary": "response", "message": "m"}
        old = _exchange("ping", {}, {"result": {}}, [other])
        new = _exchange("ping", {}, {"result": {}}, [finding])
        assert self._diff(old, new) == {("conformance", "breaking", "new"),
                                        ("conformance", "compatible", "fixed")}


class TestBadInput:
    """Bad input is one line and exit 2."""

    def test_missing_directory(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """A side that does not exist is named."""
        refused(["diff", str(tmp_path / "nope"), str(tmp_path)], capsys, "not a directory")

    def test_not_a_bundle(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """A directory without a bundle is refused."""
        refused(["diff", str(tmp_path), str(tmp_path)], capsys, "not an evidence bundle")

    def test_empty_capture(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """A bundle without exchanges has nothing to compare."""
        from releases import raw_bundle

        empty = raw_bundle(tmp_path / "e", [{"kind": "gap", "lost": 1, "reason": "r"}])
        refused(["diff", str(empty), str(empty)], capsys, "the baseline holds no exchange")

    def test_ambiguous_hops(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """Several hops need --hop; an unknown hop is named."""
        from releases import raw_bundle

        one, two = _exchange("ping", {}, {"result": {}}), _exchange("ping", {}, {"result": {}})
        two["hop"] = "edge"
        both = raw_bundle(tmp_path / "b", [one, two])
        refused(["diff", str(both), str(both)], capsys, "pass --hop")
        refused(["diff", str(both), str(both), "--hop", "nope"], capsys, "no exchange at hop")


def test_the_changes_per_box_of_each_side() -> None:
    """A capture with hop-comparison records: each side's changes per box, most important
    first, in the JSON and the text; a new hop rule in the candidate is conformance drift."""
    from mcp_tap.drift.diff import iter_lines

    def comparison(changes: list[dict[str, Any]], findings: list[dict[str, Any]]) -> Any:
        return {"kind": "hop-comparison", "box": "gw", "boxKind": "mcp-gateway",
                "between": ["edge", "origin"], "exchangeIds": ["e", "o"],
                "pairedBy": "traceparent", "findings": findings, "changes": changes}

    ident = {"class": "identity", "direction": "response", "kind": "changed",
             "meaning": "expected", "path": "/result/_meta/x"}
    widened = {"class": "capability-widened", "direction": "request", "kind": "added",
               "meaning": "hop.gateway.capability-widened",
               "path": "/params/_meta/io.modelcontextprotocol~1clientCapabilities/roots"}
    finding = {"rule": "hop.gateway.capability-widened", "strength": "should",
               "boundary": "hop", "code": None, "message": "m", "where": "box gw",
               "paths": [widened["path"]]}
    base = [_listing([TOOL]), comparison([ident], [])]
    cand = [_listing([TOOL]), comparison([ident, widened], [finding])]
    diff = diff_captures(base, cand)
    box = "gw, between hop edge and hop origin"
    rows = diff.to_json()["hopChanges"]["candidate"][box]["changes"]
    assert [(r["meaning"], r["path"], r["count"]) for r in rows] == [
        ("hop.gateway.capability-widened", widened["path"], 1),
        ("expected", "/result/_meta/x", 1)]
    lines = list(iter_lines(diff))
    at = lines.index("between hops (candidate):")
    assert lines[at + 1] == f"  box {box} (mcp-gateway): 1 pair(s)"
    assert lines[at + 2].split()[0] == "hop.gateway.capability-widened"
    assert [(c.area, c.severity, c.subject) for c in diff.changes] == [
        (Area.CONFORMANCE, Severity.BREAKING, "rule hop.gateway.capability-widened")]
