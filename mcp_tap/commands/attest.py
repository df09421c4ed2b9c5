"""``mcp-tap attest PAYLOAD --signer ID --hmac-key-env VAR`` (or a key file, or Ed25519).

Signs rollback evidence the way ``mcp-tap gate`` verifies it (see
:mod:`mcp_tap.gate.attest`), so a release controller needs no other tool. The HMAC key is
read from an environment variable or a file, never from the command line, where it would
show in the process list and shell history. ``--generate-ed25519-key FILE`` writes a new
private key (mode 0600) and prints the public key for the policy's ``[rollback.ed25519_keys]``.
Exit 0 on success, 2 for bad input (a payload the gate would reject included).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

import orjson

from mcp_tap.errors import InputError
from mcp_tap.files import file_argument, read_file
from mcp_tap.gate.attest import attest_ed25519, attest_hmac
from mcp_tap.gate.rollback import read_hmac_key_file
from mcp_tap.keys import ed25519_public_hex, generate_ed25519_key, load_ed25519_private_key
from mcp_tap.outputs.printable import printable_lines

NAME = "attest"
HELP = "attest rollback evidence with HMAC-SHA-256 or Ed25519 for `mcp-tap gate`"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``attest`` arguments to ``parser``."""
    parser.add_argument("payload", nargs="?", type=file_argument, metavar="PAYLOAD",
                        help="rollback evidence JSON (an existing attestation is replaced)")
    parser.add_argument("--signer", metavar="ID",
                        help="the release-controller identity, e.g. release-controller@prod")
    key = parser.add_mutually_exclusive_group()
    key.add_argument("--hmac-key-env", metavar="VAR",
                     help="HMAC-SHA-256 with the key in environment variable VAR")
    key.add_argument("--hmac-key-file", type=file_argument, metavar="FILE",
                     help="HMAC-SHA-256 with the key in FILE (one trailing newline ignored)")
    key.add_argument("--ed25519-key", type=file_argument, metavar="FILE",
                     help="Ed25519 with the private key in FILE (PKCS#8 PEM or 64 hex digits)")
    key.add_argument("--generate-ed25519-key", type=file_argument, metavar="FILE",
                     help="write a new Ed25519 private key to FILE and print its public key")
    parser.add_argument("--out", type=file_argument, metavar="FILE",
                        help="write the attested payload to FILE instead of stdout")
    parser.add_argument("--json", action="store_true",
                        help="print the result as one JSON object on one line")


def _generate(path: Path, as_json: bool) -> int:
    pem, public = generate_ed25519_key()
    try:
        # O_EXCL: never overwrite a key that may already be in use; 0600: it is a secret.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:
        raise InputError(f"cannot create key file {path}: {exc.strerror or exc}") from exc
    with os.fdopen(fd, "wb") as handle:
        handle.write(pem)
    if as_json:
        sys.stdout.write(orjson.dumps({"privateKeyFile": str(path), "publicKey": public})
                         .decode() + "\n")
    else:
        sys.stdout.write(f"wrote {path}\npublic key: {public}\n")
    return 0


def _generate_alone(args: argparse.Namespace) -> None:
    """Refuse attest arguments next to ``--generate-ed25519-key``, which would be ignored."""
    extra = [name for name, value in (("PAYLOAD", args.payload), ("--signer", args.signer),
                                      ("--out", args.out)) if value is not None]
    if extra:
        raise InputError(f"--generate-ed25519-key only writes a new key; it cannot be combined "
                         f"with {', '.join(extra)} (attest in a second run)")


def _payload(path: Path) -> dict[str, Any]:
    raw = read_file(path, "payload")
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InputError(f"payload {path} is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise InputError(f"payload {path} must be a JSON object")
    return data


def _hmac_key(args: argparse.Namespace) -> bytes:
    if args.hmac_key_env is not None:
        value = os.environ.get(args.hmac_key_env)
        if not value:
            raise InputError(f"environment variable {args.hmac_key_env} is not set")
        return value.encode("utf-8")
    key: bytes = read_hmac_key_file(args.hmac_key_file)
    return key


def run(args: argparse.Namespace) -> int:
    """Run ``attest``; return 0, or raise InputError (exit 2)."""
    if args.generate_ed25519_key is not None:
        _generate_alone(args)
        return _generate(args.generate_ed25519_key, args.json)
    if args.payload is None:
        raise InputError("attest needs a PAYLOAD file")
    if not args.signer:
        raise InputError("attest needs --signer")
    payload = _payload(args.payload)
    if args.ed25519_key is not None:
        private = load_ed25519_private_key(args.ed25519_key)
        attested = attest_ed25519(payload, args.signer, private)
        note = f"ed25519 public key {ed25519_public_hex(private)}"
    elif args.hmac_key_env is not None or args.hmac_key_file is not None:
        attested = attest_hmac(payload, args.signer, _hmac_key(args))
        note = "hmac-sha256"
    else:
        raise InputError("attest needs --hmac-key-env, --hmac-key-file or --ed25519-key")
    option = 0 if args.json else orjson.OPT_INDENT_2
    text = orjson.dumps(attested, option=option).decode() + "\n"
    if args.out is None:
        sys.stdout.write(text)
        return 0
    try:
        args.out.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot write {args.out}: {exc.strerror or exc}") from exc
    if args.json:
        sys.stdout.write(orjson.dumps({"out": str(args.out), "signer": args.signer,
                                       "algorithm": attested["attestation"]["algorithm"]})
                         .decode() + "\n")
    else:
        sys.stdout.write(printable_lines(
            [f"attested {args.payload} as {args.signer} ({note}) -> {args.out}"]))
    return 0
