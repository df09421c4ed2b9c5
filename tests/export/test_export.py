"""``mcp-tap export`` (HAR 1.2, JSON lines) and ``mcp-tap redact`` on real captures.

The capture is the real ``mcp==2.3.0`` client in both eras through the tap in front of the
real SDK demo origin, plus one raw request carrying a value only a stricter policy hides.
The HAR is validated with ``har-validator`` (the HAR 1.2 JSON schemas of the ``har-schema``
npm package, checked by ajv) under the Node 22 the conformance suite uses, and parsed by a
page in headless Chromium.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
from pathlib import Path

import httpx
import orjson
import pytest
from captures import DEFAULT_CALLS, client_calls
from cli_runs import cli, refused
from conformance import ensure_installed
from peers import raw_modern_request, run_origin
from taps import hop_url, running_tap, tap_options

from mcp_tap.evidence import read_bundle, record_digest, verify_bundle

SECRET = "s3cr3t-ticket-4711"
HAR_VALIDATOR = "har-validator@5.1.5"


@pytest.fixture(scope="module")
def capture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One real capture: SDK calls in both eras and a raw request with a ticket in it."""
    root = tmp_path_factory.mktemp("capture")

    async def go() -> Path:
        with run_origin() as url:
            options = tap_options(root / "ev", upstream=url.removesuffix("/mcp"))
            async with running_tap(options) as tap:
                tapped = hop_url(tap)
                for era in ("modern", "legacy"):
                    await client_calls(tapped, era, DEFAULT_CALLS)
                headers, body = raw_modern_request(
                    "tools/call", {"name": "echo", "arguments": {"text": "hi",
                                                                 "ticket": SECRET}})
                async with httpx.AsyncClient() as client:
                    answer = await client.post(tapped, json=body,
                                               headers={**headers, "X-Ticket": SECRET})
                    assert answer.status_code == 200
            return tap.bundle_dir

    return asyncio.run(go())


def _har(capture: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    out = tmp_path / "capture.har"
    code, stdout, err = cli(["export", str(capture), "--format", "har", "--out", str(out)],
                            capsys)
    assert (code, stdout, err) == (0, "", "")
    return out


@pytest.fixture(scope="module")
def validator(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Node 22 and har-validator installed under .cache/har (npm, once)."""
    node = ensure_installed().node
    root = Path(__file__).resolve().parents[2] / ".cache" / "har"
    if not (root / "node_modules" / "har-validator").is_dir():
        npm = node.parent.parent / "lib" / "node_modules" / "npm" / "bin" / "npm-cli.js"
        env = {**os.environ, "PATH": f"{node.parent}{os.pathsep}{os.environ.get('PATH', '')}",
               "npm_config_update_notifier": "false"}
        root.mkdir(parents=True, exist_ok=True)
        done = subprocess.run([str(node), str(npm), "install", "--prefix", str(root),
                               "--ignore-scripts", "--no-audit", "--no-fund", HAR_VALIDATOR],
                              env=env, capture_output=True, text=True, timeout=600, check=False)
        assert done.returncode == 0, done.stdout + done.stderr
    return node, root


def _validate(validator: tuple[Path, Path], har: Path) -> subprocess.CompletedProcess[str]:
    node, root = validator
    script = ("const v=require('har-validator');const h=JSON.parse(require('fs')"
              ".readFileSync(process.argv[1],'utf8'));v.har(h).then(()=>{console.log('valid '"
              "+h.log.entries.length)}).catch(e=>{console.log(JSON.stringify(e.errors));"
              "process.exit(1)})")
    return subprocess.run([str(node), "-e", script, str(har)], cwd=root, capture_output=True,
                          text=True, timeout=120, check=False,
                          env={**os.environ, "NODE_PATH": str(root / "node_modules")})


class TestHar:
    """The HAR export of a real capture."""

    def test_validates_against_the_har_1_2_schema(
            self, capture: Path, validator: tuple[Path, Path], tmp_path: Path,
            capsys: pytest.CaptureFixture[str]) -> None:
        """har-validator accepts every entry; one entry per exchange."""
        har = _har(capture, tmp_path, capsys)
        result = _validate(validator, har)
        exchanges = read_bundle(capture).exchanges()
        assert result.returncode == 0, result.stdout + result.stderr
        assert result.stdout.strip() == f"valid {len(exchanges)}"

    def test_the_validator_rejects_a_broken_har(
            self, capture: Path, validator: tuple[Path, Path], tmp_path: Path,
            capsys: pytest.CaptureFixture[str]) -> None:
        """The schema check can fail: an entry without timings is refused."""
        har = _har(capture, tmp_path, capsys)
        data = json.loads(har.read_text())
        del data["log"]["entries"][0]["timings"]
        har.write_text(json.dumps(data))
        result = _validate(validator, har)
        assert result.returncode == 1 and "timings" in result.stdout

    def test_entries_hold_redacted_bodies_timings_and_sse(
            self, capture: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """Bodies are the redacted record's, timings add up, SSE events are the content."""
        data = json.loads(_har(capture, tmp_path, capsys).read_text())
        entries = data["log"]["entries"]
        for item in entries:
            assert item["time"] == pytest.approx(sum(item["timings"].values()), abs=0.01)
        streams = [e for e in entries if e["_mcpTap"].get("sse")]
        legacy_call = next(e for e in streams if e["_mcpTap"]["method"] == "tools/call"
                           and "counted to 3" in e["response"]["content"]["text"])
        text = legacy_call["response"]["content"]["text"]
        assert text.count("data: ") == len(legacy_call["_mcpTap"]["sse"]) == 4
        assert legacy_call["response"]["content"]["mimeType"] == "text/event-stream"
        # The SDK client leaves the stream once the response is in: whole, so no comment.
        assert "comment" not in legacy_call["response"]["content"]
        ms = [event["ms"] for event in legacy_call["_mcpTap"]["sse"]]
        assert ms == sorted(ms) and ms[0] >= 0
        exchanges = read_bundle(capture).exchanges()
        first = exchanges[0]
        match = next(e for e in entries if e["_mcpTap"]["exchangeId"] == first["exchangeId"])
        assert json.loads(match["request"]["postData"]["text"]) == first["ingress"]["body"]
        assert data["log"]["_mcpTap"]["lost"] == 0

    def test_loads_in_headless_chromium(self, capture: Path, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
        """A page in Chromium parses the HAR, each body and each SSE stream."""
        binary = shutil.which("chromium") or "/usr/bin/chromium"
        if not Path(binary).exists():
            if os.environ.get("MCP_TAP_SKIP_BROWSER") == "1":
                pytest.skip("MCP_TAP_SKIP_BROWSER=1 and chromium is not installed")
            pytest.fail("headless Chromium is required (apt-get install -y chromium)")
        har = _har(capture, tmp_path, capsys).read_text()
        page = tmp_path / "har.html"
        page.write_text(_PAGE.replace("HAR_JSON", har.replace("</", "<\\/")))
        result = subprocess.run(
            [binary, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-background-networking", "--disable-component-update",
             f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", page.as_uri()],
            capture_output=True, text=True, timeout=180, check=False)
        assert result.returncode == 0, result.stderr[-2000:]
        entries = len(read_bundle(capture).exchanges())
        assert f'<p id="result">ok {entries} entries' in result.stdout, result.stdout[-2000:]


_PAGE = """<!doctype html><html><body><p id="result">not run</p>
<script id="har" type="application/json">HAR_JSON</script>
<script>
const out = document.getElementById("result");
try {
  const har = JSON.parse(document.getElementById("har").textContent);
  const problems = []; let events = 0;
  if (har.log.version !== "1.2") problems.push("version " + har.log.version);
  for (const e of har.log.entries) {
    if (isNaN(Date.parse(e.startedDateTime))) problems.push("date " + e.startedDateTime);
    new URL(e.request.url);
    if (e.request.postData) JSON.parse(e.request.postData.text);
    const c = e.response.content;
    if (c.mimeType === "text/event-stream" && c.text) {
      const got = c.text.split("\\n\\n").filter(b => b.trim()).map(
        b => JSON.parse(b.split("\\n").filter(l => l.startsWith("data: ")).map(
          l => l.slice(6)).join("\\n")));
      if (got.length !== (e._mcpTap.sse || []).length) problems.push("sse " + got.length);
      events += got.length;
    } else if (c.text) { JSON.parse(c.text); }
  }
  out.textContent = problems.length ? "FAILED " + problems.join("; ")
    : "ok " + har.log.entries.length + " entries, " + events + " events";
} catch (err) { out.textContent = "FAILED " + err; }
</script></body></html>"""


class TestJsonl:
    """Plain record export."""

    def test_every_record_as_stored(self, capture: Path, tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
        """One line per record, in order, each digest still verifies."""
        code, out, err = cli(["export", str(capture), "--format", "jsonl"], capsys)
        assert (code, err) == (0, "")
        lines = [orjson.loads(line) for line in out.splitlines()]
        stored = read_bundle(capture).records
        assert lines == stored
        assert all(record_digest(r) == r["digest"] for r in lines)


def _policy(tmp_path: Path) -> Path:
    path = tmp_path / "strict.toml"
    path.write_text('[redaction]\nextra_keys = ["ticket", "X-Ticket"]\n\n'
                    '[[redaction.argument]]\nmethod = "tools/call"\ntool = "lookup"\n'
                    'argument = "query"\n')
    return path


def _all_bytes(root: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(root.iterdir()) if p.is_file())


class TestRedact:
    """A stricter policy applied after the fact."""

    def test_derived_bundle_hides_the_value_and_verifies(
            self, capture: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """The ticket is gone from every byte, the bundle verifies and names its source."""
        assert SECRET.encode() in _all_bytes(capture)  # the default policy kept it
        out = tmp_path / "derived"
        code, stdout, err = cli(["redact", str(capture), "--policy", str(_policy(tmp_path)),
                                 "--out", str(out)], capsys)
        assert (code, err) == (0, ""), err
        assert stdout.startswith(f"derived {out} from {capture.name}")
        assert SECRET.encode() not in _all_bytes(out)
        report = verify_bundle(out)
        assert report.ok, report.problems
        meta = json.loads((out / "bundle.json").read_text())
        source = json.loads((capture / "bundle.json").read_text())
        derived = meta["derivedFrom"]
        assert derived["bundle"] == capture.name
        assert derived["chainHead"] == source["closed"]["chainHead"]
        assert derived["records"] == len(read_bundle(capture).records)
        assert derived["policy"]["extraKeys"] == ["X-Ticket", "ticket"]
        assert meta["closed"]["records"] == derived["records"]

    def test_digests_of_hidden_bodies_are_dropped(
            self, capture: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """The SHA-256 of the bytes that held the ticket does not reach the new bundle."""
        out = tmp_path / "derived"
        cli(["redact", str(capture), "--policy", str(_policy(tmp_path)), "--out", str(out)],
            capsys)
        source = next(r for r in read_bundle(capture).exchanges()
                      if SECRET.encode() in orjson.dumps(r["ingress"]["body"]))
        derived = next(r for r in read_bundle(out).exchanges()
                       if r["exchangeId"] == source["exchangeId"])
        assert derived["ingress"]["bodyDigest"] is None
        assert derived["ingress"]["body"]["params"]["arguments"]["ticket"] == "[REDACTED]"
        assert dict(derived["ingress"]["headers"])["X-Ticket"] == "[REDACTED]"
        assert source["ingress"]["bodyDigest"].encode() not in _all_bytes(out)
        lookups = [r for r in read_bundle(out).exchanges() if r["method"] == "tools/call"
                   and r["ingress"]["body"]["params"]["name"] == "lookup"]
        assert lookups and all(r["ingress"]["body"]["params"]["arguments"]["query"]
                               == "[REDACTED]" for r in lookups)

    def test_refuses_a_damaged_source(self, capture: Path, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
        """A source that does not verify is not laundered into a fresh chain."""
        copy = tmp_path / "copy"
        shutil.copytree(capture, copy)
        segment = next(copy.glob("segment-*.jsonl"))
        segment.write_bytes(segment.read_bytes().replace(b'"hello"', b'"HELLO"', 1))
        refused(["redact", str(copy), "--policy", str(_policy(tmp_path)), "--out",
                 str(tmp_path / "out")], capsys, "does not verify")
        assert not (tmp_path / "out").exists()


class TestBadInput:
    """Bad input to export and redact: one line, exit 2."""

    @pytest.mark.parametrize(("text", "fragment"), [
        ("[redaction\n", "not valid TOML"),
        ("[other]\n", "has no [redaction] table"),
        ('[redaction]\nextra_keys = "x"\n', "extra_keys must be a list"),
        ('[redaction]\nextra_keys = ["--"]\n', "has no letters or digits"),
    ])
    def test_bad_policy(self, text: str, fragment: str, capture: Path, tmp_path: Path,
                        capsys: pytest.CaptureFixture[str]) -> None:
        """A policy file that is not a [redaction] table is named."""
        policy = tmp_path / "p.toml"
        policy.write_text(text)
        refused(["redact", str(capture), "--policy", str(policy), "--out",
                 str(tmp_path / "o")], capsys, fragment)

    def test_out_already_holds_a_bundle(self, capture: Path, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
        """The derived bundle never overwrites one."""
        refused(["redact", str(capture), "--policy", str(_policy(tmp_path)), "--out",
                 str(capture)], capsys, "already holds an evidence bundle")

    def test_export_needs_a_bundle_and_a_format(self, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
        """A missing bundle, a format not offered, an unwritable output."""
        refused(["export", str(tmp_path), "--format", "har"], capsys, "not an evidence bundle")
        refused(["export", str(tmp_path), "--format", "pcap"], capsys, "invalid choice")

    def test_export_unwritable_out(self, capture: Path, tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
        """An output path in a missing directory is named."""
        refused(["export", str(capture), "--format", "jsonl", "--out",
                 str(tmp_path / "no" / "x.jsonl")], capsys, "cannot write")

    def test_a_bundle_unreadable_midway_leaves_the_output_as_it_was(
            self, capture: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """A record that fails to parse after lines went out: one line, old file kept."""
        damaged = tmp_path / "damaged"
        shutil.copytree(capture, damaged)
        segment = sorted(damaged.glob("segment-*.jsonl"))[-1]
        lines = segment.read_bytes().splitlines(keepends=True)
        assert len(lines) > 1
        segment.write_bytes(b"".join(lines[:-1]) + b"{not json\n")
        out = tmp_path / "x.jsonl"
        out.write_bytes(b"previous export\n")
        refused(["export", str(damaged), "--format", "jsonl", "--out", str(out)], capsys,
                "segment-")
        assert out.read_bytes() == b"previous export\n"
        assert not (tmp_path / "x.jsonl.partial").exists()




class TestSummaries:
    """The summaries of export (--summary-format) and redact (--format), text or JSON."""

    def test_export_summary(self, capture: Path, tmp_path: Path,
                            capsys: pytest.CaptureFixture[str]) -> None:
        """The summary counts what the file holds; without --out it is refused."""
        out = tmp_path / "c.jsonl"
        code, stdout, _ = cli(["export", str(capture), "--format", "jsonl", "--out", str(out),
                               "--json"], capsys)
        summary = json.loads(stdout)
        assert code == 0 and summary["records"] == len(out.read_bytes().splitlines())
        assert summary["bytes"] == out.stat().st_size
        refused(["export", str(capture), "--format", "har", "--json"], capsys, "give --out")

    def test_redact_summary(self, capture: Path, tmp_path: Path,
                            capsys: pytest.CaptureFixture[str]) -> None:
        """The summary names the source's chain head and the records changed."""
        code, stdout, _ = cli(["redact", str(capture), "--policy", str(_policy(tmp_path)),
                               "--out", str(tmp_path / "d"), "--json"], capsys)
        summary = json.loads(stdout)
        assert code == 0 and summary["changed"] >= 3 and summary["digestsDropped"] >= 1
        assert summary["derivedFrom"]["bundle"] == capture.name

    def test_export_summary_formats(self, capture: Path, tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
        """--summary-format json is --json; text is one line; --format still picks the file."""
        out = tmp_path / "c.har"
        argv = ["export", str(capture), "--format", "har", "--out", str(out)]
        code, by_alias, _ = cli([*argv, "--json"], capsys)
        first = json.loads(by_alias)
        code, by_flag, _ = cli([*argv, "--summary-format", "json"], capsys)
        assert code == 0 and json.loads(by_flag) == first
        assert json.loads(out.read_bytes())["log"]["version"] == "1.2"
        code, text, err = cli([*argv, "--summary-format", "text"], capsys)
        assert (code, err) == (0, "")
        assert text == (f"exported {first['records']} records ({first['exchanges']} exchanges) "
                        f"from 1 bundle(s) to {out} as har: {first['bytes']} bytes\n")
        code, quiet, _ = cli(argv, capsys)
        assert (code, quiet) == (0, "")  # no summary unless asked, as before
        refused(["export", str(capture), "--format", "har", "--summary-format", "text"],
                capsys, "give --out")
        code, _, err = cli([*argv, "--json", "--summary-format", "json"], capsys)
        assert code == 2 and "not allowed with argument" in err

    def test_redact_summary_formats(self, capture: Path, tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
        """redact --format json is --json; --format text is the one line; jsonl is refused."""
        policy = str(_policy(tmp_path))
        code, by_flag, _ = cli(["redact", str(capture), "--policy", policy,
                                "--out", str(tmp_path / "a"), "--format", "json"], capsys)
        code, by_alias, _ = cli(["redact", str(capture), "--policy", policy,
                                 "--out", str(tmp_path / "b"), "--json"], capsys)
        flag, alias = json.loads(by_flag), json.loads(by_alias)
        assert code == 0 and flag["changed"] == alias["changed"] >= 3
        assert flag["derivedFrom"]["chainHead"] == alias["derivedFrom"]["chainHead"]
        code, text, _ = cli(["redact", str(capture), "--policy", policy,
                             "--out", str(tmp_path / "c"), "--format", "text"], capsys)
        assert code == 0 and text.startswith(f"derived {tmp_path / 'c'} from {capture.name}")
        assert text.count("\n") == 1
        code, _, err = cli(["redact", str(capture), "--policy", policy,
                            "--out", str(tmp_path / "d"), "--format", "sarif"], capsys)
        assert code == 2 and "invalid choice: 'sarif'" in err
