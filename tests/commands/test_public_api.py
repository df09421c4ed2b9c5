"""The public API is what we mean it to be: names, the error tree, the command set."""

from __future__ import annotations

import subprocess
import sys

import pytest

import mcp_tap
from mcp_tap import cli
from mcp_tap.errors import BundleFormatError, InputError, TapError, UpstreamError


class TestPackage:
    """The top-level package."""

    def test_exports(self) -> None:
        """The package exports the gate, the evidence reader and verifier, the error tree."""
        assert sorted(mcp_tap.__all__) == [
            "Action", "BundleFormatError", "Decision", "GateRequest", "InputError", "Policy",
            "TapError", "UpstreamError", "VerifyReport", "__version__", "evaluate",
            "evaluate_files", "iter_records", "load_policy", "load_request", "verify_bundle",
        ]

    def test_every_export_resolves(self) -> None:
        """Every exported name resolves to the object its home module defines."""
        from mcp_tap import evidence, gate

        for name in mcp_tap.__all__:
            value = getattr(mcp_tap, name)
            home = getattr(gate, name, None) or getattr(evidence, name, None)
            assert home is None or value is home, name
        assert mcp_tap.evaluate is gate.evaluate
        assert mcp_tap.verify_bundle is evidence.verify_bundle

    def test_signatures(self) -> None:
        """The gate's entry points keep the keyword arguments callers rely on."""
        import inspect

        # Appended: full (read every record, not the sealed segments' tallies), then
        # rerun_sdk (run the SDK where a signed segment's tallies hold its outcome).
        assert list(inspect.signature(mcp_tap.evaluate).parameters) == [
            "request", "workers", "full", "rerun_sdk"]
        # Appended, never reordered: open_bundles (bundles still being written) came last.
        assert list(inspect.signature(mcp_tap.load_request).parameters) == [
            "evidence", "policy", "rollback", "baseline", "reports", "environ", "open_bundles"]
        assert [f for f in mcp_tap.GateRequest.__dataclass_fields__] == [
            "evidence", "policy", "rollback", "baseline", "reports", "environ", "open_bundles"]
        assert [str(a) for a in mcp_tap.Action] == ["promote", "rollback", "hold"]

    def test_gate_drift_source(self) -> None:
        """The gate package exports the drift source, its policy, and GateInputs takes it."""
        from mcp_tap import gate

        assert {"DriftPolicy", "capture_drift", "drift_source"} <= set(gate.__all__)
        assert all(getattr(gate, name) is not None for name in gate.__all__)
        assert list(gate.GateInputs.__dataclass_fields__)[-1] == "drift"
        assert gate.Policy().drift.block == ("inventory.breaking",)

    def test_unknown_name(self) -> None:
        """A name the package does not export is an AttributeError, as for any module."""
        with pytest.raises(AttributeError):
            _ = mcp_tap.no_such_name  # type: ignore[attr-defined]  # the point of the test

    def test_import_is_light(self) -> None:
        """Importing the package and the CLI loads neither aiohttp, pydantic nor mcp_types."""
        code = ("import sys, mcp_tap, mcp_tap.cli\n"
                "print(sorted({m.split('.')[0] for m in sys.modules} & "
                "{'aiohttp', 'pydantic', 'mcp_types', 'httpx', 'structlog'}))")
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True,
                              timeout=60)
        assert done.stdout.strip() == b"[]"

    def test_error_tree(self) -> None:
        """The exception tree is shallow and rooted at TapError, as the docstring draws it."""
        assert issubclass(InputError, TapError)
        assert issubclass(BundleFormatError, InputError)
        assert issubclass(UpstreamError, TapError)
        assert not issubclass(UpstreamError, InputError)
        assert TapError.__bases__ == (Exception,)


class TestFeaturePackages:
    """probe and replay became packages; the names their importers use stayed put."""

    PROBE = ("ACCEPT", "Answer", "BODY_LIMIT", "DEFAULT_TIMEOUT", "Expect", "HttpClient",
             "Inventory", "MAX_TIMEOUT", "ProbeCase", "ProbeReport", "ProbeResult",
             "check_timeout", "is_probeable", "legacy_extra_cases", "plan_cases", "run_probe")
    REPLAY = ("Answer", "Case", "CaseResult", "Change", "REPLAYED_HEADERS", "RecordSource",
              "ReplayOptions", "ReplayReport", "Skipped", "Target", "bundle_records", "collect",
              "compare", "differences", "fresh_id", "iter_cases", "iter_lines", "iter_replay",
              "normalise", "parse_ignore", "recorded_answer", "replay", "replay_headers",
              "select_cases")

    def test_exports(self) -> None:
        """Each package exports the names it exported as one module (replay adds streaming)."""
        import mcp_tap.probe
        import mcp_tap.replay

        assert tuple(sorted(mcp_tap.probe.__all__)) == self.PROBE
        assert tuple(sorted(mcp_tap.replay.__all__)) == self.REPLAY

    def test_defined_in_the_package(self) -> None:
        """Every exported function and class lives in a module of its own package."""
        import importlib
        import inspect

        for package in ("mcp_tap.probe", "mcp_tap.replay"):
            module = importlib.import_module(package)
            defined = [getattr(module, name) for name in module.__all__]
            defined = [v for v in defined if inspect.isfunction(v) or type(v) is type]
            assert len(defined) >= 10, package
            for value in defined:
                assert value.__module__.startswith(package + "."), (package, value)


class TestCommands:
    """The command-line contract of product.md."""

    def test_every_documented_command_exists(self) -> None:
        """Every command of the contract is offered by the parser."""
        parser = cli.build_parser()
        sub = next(a for a in parser._actions if a.dest == "command")  # argparse has no API
        offered = set(sub.choices)  # type: ignore[arg-type]
        assert {"proxy", "transcripts", "probe", "verify", "gate", "sdk-diff", "replay",
                "report", "attest", "demo"} <= offered

    def test_every_command_takes_json(self) -> None:
        """Every command except the long-running demo accepts --json."""
        parser = cli.build_parser()
        sub = next(a for a in parser._actions if a.dest == "command")
        for name, command in sub.choices.items():  # type: ignore[union-attr]
            if name == "demo":
                continue
            flags = {o for a in command._actions for o in a.option_strings}
            assert "--json" in flags, name

    def test_help_read_from_source_is_the_modules(self) -> None:
        """The name and help read from each command's source are the module's own."""
        import importlib

        for module_name in cli.COMMANDS:
            module = importlib.import_module(f"mcp_tap.commands.{module_name}")
            assert cli.describe(module_name) == (module.NAME, module.HELP), module_name

    def test_help_and_version_import_no_command(self) -> None:
        """--version and --help load no command module, and `gate --help` only the gate's."""
        code = ("import sys\nfrom mcp_tap import cli\n"
                "try:\n    cli.main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
                "print(sorted(m for m in sys.modules if m.startswith('mcp_tap.commands.')),"
                " file=sys.stderr)")
        for argv, loaded in ((["--version"], "[]"), (["--help"], "[]"),
                             (["gate", "--help"], "['mcp_tap.commands.gate']")):
            done = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True,
                                  check=True, timeout=60)
            assert done.stderr.decode().strip() == loaded, argv

    def test_closed_stdout_ends_quietly(self) -> None:
        """A reader that closes the pipe (`| head`) gets exit 1 and no traceback on stderr."""
        process = subprocess.Popen(
            [sys.executable, "-m", "mcp_tap", "transcripts", "--json"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert process.stdout is not None and process.stderr is not None
        process.stdout.close()  # before the first write: every write meets a closed pipe
        with process.stderr:
            err = process.stderr.read()
        assert (process.wait(timeout=60), err) == (1, b"")


_IMPORT_EACH = """
import importlib, pkgutil, sys
import mcp_tap
names = [m.name for m in pkgutil.walk_packages(mcp_tap.__path__, "mcp_tap.")
         if m.name != "mcp_tap.__main__"]  # running it is the CLI, not an import
failed = []
for name in names:
    for loaded in [m for m in sys.modules if m == "mcp_tap" or m.startswith("mcp_tap.")]:
        del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except Exception as exc:  # noqa: BLE001 - every failure is reported, not only the first
        failed.append(f"{name}: {type(exc).__name__}: {exc}")
print(len(names))
print("\\n".join(failed))
"""


class TestImports:
    def test_every_module_imports_first(self) -> None:
        """Each module imports on its own in a fresh state: no import cycle hides behind
        the order in which the commands happen to load them."""
        done = subprocess.run([sys.executable, "-c", _IMPORT_EACH], capture_output=True,
                              text=True, timeout=300, check=True)
        count, *failed = done.stdout.strip().split("\n")
        assert int(count) > 100
        assert [line for line in failed if line] == []
