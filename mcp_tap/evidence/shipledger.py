"""The shipper's ledger (``.ship.json`` in a bundle directory): where the bundle goes and
what of it has reached the store, so that a later run uploads what a killed one still owed
(:meth:`mcp_tap.evidence.shipping.Shipper.resume`)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import orjson
import structlog

from mcp_tap.evidence.disk import open_private

LEDGER_FILE: Final = ".ship.json"
log = structlog.get_logger("mcp_tap.evidence")


@dataclass(slots=True)
class ShipLedger:
    """What of one bundle has reached the store (``.ship.json``).

    The file is JSON lines, each folded into the ones before (:meth:`load`): the first
    names the location, each later one what an upload job shipped. It grows by a line per
    job: rewritten whole, it grew with the bundle, and with small segments the rewrites
    came to more bytes than the evidence. Earlier versions wrote one object, no newline:
    that is read as a first line, and the next save writes the file anew.
    """

    location: str
    # file name -> what of it went: bundle.json's SHA-256, a sealed file's size
    shipped: dict[str, str] = field(default_factory=dict)
    done: bool = False
    unsaved: dict[str, str] = field(default_factory=dict)  # shipped since the last save
    appendable: bool = False  # the file holds this ledger's lines so far, newline-ended

    def ship(self, name: str, mark: str) -> None:
        """Note that ``name`` reached the store in the form ``mark``."""
        self.shipped[name] = self.unsaved[name] = mark

    @classmethod
    def load(cls, directory: Path) -> ShipLedger | None:
        """The ledger of ``directory`` (None: none, or no readable first line). A later
        line that does not parse (the end of one cut short by a crash) is skipped: the
        next run uploads such a file again, the same key and bytes, and skips none."""
        try:
            raw = (directory / LEDGER_FILE).read_bytes()
        except OSError:
            return None
        ledger: ShipLedger | None = None
        for line in raw.splitlines():
            try:
                data = orjson.loads(line)
                if ledger is None:
                    ledger = cls(str(data["location"]))
                ledger.shipped.update({str(k): str(v) for k, v in data["shipped"].items()})
                ledger.done = bool(data["done"])
            except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError):
                if ledger is None:
                    return None
        if ledger is not None:
            ledger.appendable = raw.endswith(b"\n")
        return ledger

    def save(self, directory: Path) -> None:
        """Write what is unsaved: the whole ledger as a new file the first time, then a
        line per call."""
        # Not fsynced: a ledger lost in a crash makes the next run upload a file again
        # (the same key, the same bytes), never skip one (a file enters the ledger only
        # after the store took it). Two fsyncs per segment were the shipper's largest cost
        # after the upload itself.
        path = directory / LEDGER_FILE
        if not self.appendable:
            tmp = path.with_name(path.name + ".tmp")
            with open_private(tmp) as out:
                out.write(orjson.dumps({"location": self.location, "shipped": self.shipped,
                                        "done": self.done}) + b"\n")
            os.replace(tmp, path)
            self.appendable = True
        else:
            with path.open("ab") as out:
                out.write(orjson.dumps({"shipped": self.unsaved, "done": self.done}) + b"\n")
        self.unsaved = {}


def save_ledger(ledger: ShipLedger, directory: Path) -> None:
    """:meth:`ShipLedger.save`, a failure logged: the shipper goes on."""
    try:
        ledger.save(directory)
    except OSError as exc:  # a full disk: the next run may ship a file twice, no more
        log.warning("shipping.ledger_failed", error=exc.strerror or str(exc))


__all__ = ["LEDGER_FILE", "ShipLedger", "save_ledger"]
