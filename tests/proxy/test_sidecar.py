"""The deployable sidecar: single-hop environment overrides, the image's files, the lock."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from mcp_tap.errors import InputError
from mcp_tap.proxy.options import load_options

REPO_ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = (REPO_ROOT / "Dockerfile").read_text()
ORIGIN = "http://origin:9000"


def _instructions() -> list[tuple[str, str]]:
    """The Dockerfile's instructions (continuations joined, comments dropped)."""
    text = re.sub(r"\\\n\s*", " ", DOCKERFILE)
    out = []
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            word, _, rest = line.strip().partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def _image_env() -> dict[str, str]:
    env: dict[str, str] = {}
    for word, rest in _instructions():
        if word == "ENV":
            env.update(dict(item.split("=", 1) for item in shlex.split(rest)))
    return env


def _last(word: str) -> str:
    return [rest for w, rest in _instructions() if w == word][-1]


def _config(tmp_path: Path, hops: str) -> str:
    path = tmp_path / "tap.toml"
    path.write_text(hops, encoding="utf-8")
    return str(path)


ONE_HOP = '[[hop]]\nname = "edge"\nlisten = "127.0.0.1:8080"\nupstream = "http://127.0.0.1:9000"\n'


class TestHopEnvironment:
    """``MCP_TAP_HOP_LISTEN`` / ``MCP_TAP_HOP_UPSTREAM`` / ``MCP_TAP_HOP_NAME``."""

    def test_listen_and_upstream_from_the_environment(self) -> None:
        """Both variables make the single hop, named tap."""
        env = {"MCP_TAP_HOP_LISTEN": "127.0.0.1:8181", "MCP_TAP_HOP_UPSTREAM": ORIGIN + "/"}
        (hop,) = load_options(None, env=env).hops
        assert (hop.name, hop.listen, hop.upstream) == ("tap", "127.0.0.1:8181", ORIGIN)

    def test_a_flag_wins_and_the_other_half_comes_from_the_environment(self) -> None:
        """--upstream with the image's MCP_TAP_HOP_LISTEN is a whole hop; flags win."""
        env = {"MCP_TAP_HOP_LISTEN": "0.0.0.0:8080", "MCP_TAP_HOP_NAME": "sidecar"}
        (hop,) = load_options(None, env=env, upstream=ORIGIN).hops
        assert (hop.name, hop.listen, hop.upstream) == ("sidecar", "0.0.0.0:8080", ORIGIN)
        (hop,) = load_options(None, env=env, listen="127.0.0.1:1", upstream=ORIGIN, hop="x").hops
        assert (hop.name, hop.listen) == ("x", "127.0.0.1:1")

    def test_the_environment_overrides_the_files_one_hop(self, tmp_path: Path) -> None:
        """With one [[hop]] in the file, a variable replaces just its field."""
        env = {"MCP_TAP_HOP_UPSTREAM": ORIGIN}
        (hop,) = load_options(_config(tmp_path, ONE_HOP), env=env).hops
        assert (hop.name, hop.listen, hop.upstream) == ("edge", "127.0.0.1:8080", ORIGIN)

    def test_two_hops_in_the_file_are_ambiguous(self, tmp_path: Path) -> None:
        """MCP_TAP_HOP_* cannot say which of two [[hop]] tables it means."""
        two = ONE_HOP + ONE_HOP.replace('"edge"', '"inner"').replace("8080", "8081")
        with pytest.raises(InputError, match=r"describe one hop but the config file has 2"):
            load_options(_config(tmp_path, two), env={"MCP_TAP_HOP_UPSTREAM": ORIGIN})

    def test_listen_alone_says_what_is_missing(self) -> None:
        """Without an upstream anywhere, the error names MCP_TAP_HOP_UPSTREAM."""
        with pytest.raises(InputError, match=r"^MCP_TAP_HOP_UPSTREAM is not set"):
            load_options(None, env={"MCP_TAP_HOP_LISTEN": "0.0.0.0:8080"})

    def test_bad_values_are_bad_input_naming_the_variable(self) -> None:
        """A bad listen or upstream names the variable it came from."""
        with pytest.raises(InputError, match=r"^MCP_TAP_HOP_LISTEN: '8080' is not HOST:PORT"):
            load_options(None, env={"MCP_TAP_HOP_LISTEN": "8080", "MCP_TAP_HOP_UPSTREAM": ORIGIN})
        with pytest.raises(InputError, match=r"MCP_TAP_HOP_UPSTREAM"):
            load_options(None, env={"MCP_TAP_HOP_LISTEN": ":1", "MCP_TAP_HOP_UPSTREAM": "ftp://x"})

    def test_a_misspelt_hop_variable_is_exit_2(self, tmp_path: Path) -> None:
        """MCP_TAP_HOP_LISTN is an error naming the known variables, not silently ignored."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_TAP_")}
        env.update(PYTHONPATH=str(REPO_ROOT), MCP_TAP_HOP_LISTN="0.0.0.0:8080")
        done = subprocess.run(
            [sys.executable, "-m", "mcp_tap", "proxy", "--upstream", ORIGIN],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert (done.returncode, done.stdout) == (2, "")
        assert done.stderr == (
            "mcp-tap: error: environment variable MCP_TAP_HOP_LISTN names no hop option; "
            "known: MCP_TAP_HOP_LISTEN, MCP_TAP_HOP_NAME, MCP_TAP_HOP_UPSTREAM\n"
        )

    def test_hop_comparison_variables_are_not_hop_variables(self) -> None:
        """MCP_TAP_HOP_COMPARISON_* still belong to [hop_comparison]."""
        env = {"MCP_TAP_HOP_COMPARISON_WINDOW_S": "5"}
        opts = load_options(None, env=env, listen="127.0.0.1:0", upstream=ORIGIN)
        assert opts.hop_comparison.window_s == 5.0


class TestImage:
    """What the Dockerfile runs and ships."""

    def test_the_default_command_listens_where_p_reaches(self) -> None:
        """The image's environment and default command give a hop on 0.0.0.0:8080."""
        assert json.loads(_last("ENTRYPOINT")) == ["mcp-tap"]
        assert json.loads(_last("CMD")) == ["proxy"]
        opts = load_options(None, env={**_image_env(), "MCP_TAP_HOP_UPSTREAM": ORIGIN})
        (hop,) = opts.hops
        assert (hop.listen, hop.upstream) == ("0.0.0.0:8080", ORIGIN)
        assert opts.admin.listen == "0.0.0.0:9464"
        assert opts.evidence.dir == "/evidence"
        assert set(_last("EXPOSE").split()) == {"8080", "9464"}

    def test_it_runs_as_a_numeric_non_root_user_owning_the_evidence(self) -> None:
        """USER is numeric and non-root, and /evidence is made its own and group-writable."""
        user, _, group = _last("USER").partition(":")
        assert user.isdigit() and int(user) != 0 and group == "0"
        run = " ".join(rest for w, rest in _instructions() if w == "RUN")
        assert f"chown {user}:0 /evidence" in run and "chmod 2775 /evidence" in run

    def test_dependencies_come_from_the_lock_with_hashes(self) -> None:
        """The runtime installs the lock with --require-hashes, the wheel with --no-deps."""
        runs = [rest for w, rest in _instructions() if w == "RUN"]
        assert "pip install --no-deps --require-hashes -r requirements.lock" in runs
        assert any(r.startswith("pip install --no-deps /wheels/") for r in runs)

    def test_oci_labels(self) -> None:
        """The image carries the OCI annotations a registry and a scanner read."""
        labels = " ".join(rest for w, rest in _instructions() if w == "LABEL")
        for key in ("title", "description", "version", "revision", "created", "licenses"):
            assert f"org.opencontainers.image.{key}=" in labels

    def test_dockerignore_lets_in_exactly_what_is_copied(self) -> None:
        """Everything is ignored except the sources the Dockerfile copies."""
        patterns = (REPO_ROOT / ".dockerignore").read_text().split("\n")
        patterns = [p for p in patterns if p and not p.startswith("#")]
        assert patterns[0] == "*"
        allowed = {p[1:].rstrip("/") for p in patterns if p.startswith("!")}
        copied = set()
        for word, rest in _instructions():
            if word == "COPY" and not rest.startswith("--from"):
                copied.update(p.rstrip("/") for p in rest.split()[:-1])
        assert copied == allowed


class TestLock:
    """``requirements.lock`` pins every dependency the image installs."""

    def test_every_dependency_is_pinned_with_hashes_and_satisfies_pyproject(self) -> None:
        """Each runtime, [otel] and [speed] requirement has one == pin in range, hashed."""
        project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
        wanted = [Requirement(r) for r in project["dependencies"]]
        for extra in ("otel", "speed"):
            wanted += [Requirement(r) for r in project["optional-dependencies"][extra]]
        text = (REPO_ROOT / "requirements.lock").read_text()
        blocks = re.findall(
            # (an environment marker may follow the pin: uvloop's "; sys_platform != ...")
            r"^([A-Za-z0-9_.-]+)==(\S+)(?: ;[^\\\n]*)? \\\n"
            r"((?:\s+--hash=sha256:[0-9a-f]{64}.*\n)+)",
            text,
            flags=re.M,
        )
        pins = {canonicalize_name(name): version for name, version, _ in blocks}
        assert len(pins) == text.count("=="), "a pin without hashes"
        for req in wanted:
            name = canonicalize_name(req.name)
            assert name in pins, f"{req.name} is not in requirements.lock"
            assert req.specifier.contains(pins[name], prereleases=True), (req, pins[name])
