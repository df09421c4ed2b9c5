"""Inventory drift: tools, prompts, resources and templates added, removed or changed.

The inventory of a capture is what its ``tools/list``, ``prompts/list``, ``resources/list``
and ``resources/templates/list`` answers listed (every page, the last listing of an item
wins). A kind is compared only when both captures listed it: a capture that never asked
for prompts says nothing about prompts.

Classification, for a client written against the baseline:

* an item removed is breaking, an item added compatible;
* ``inputSchema`` (what the client sends): a property removed, a new required property, a
  property that became required, a changed type, an ``enum`` that lost values and
  ``additionalProperties`` that became ``false`` are breaking; a new optional property, a
  property no longer required and an ``enum`` that gained values are compatible;
* ``outputSchema`` (what the client reads) the other way round: a property removed, a
  property no longer required, a changed type and an ``enum`` that gained values are
  breaking; a new property or a newly required one compatible; an ``outputSchema`` that
  disappeared is breaking, a new one compatible;
* ``x-mcp-header``: a declaration removed or renamed is breaking (whatever routes on
  ``Mcp-Param-{Name}`` stops seeing it, and a client holding the old listing sends a header
  the server no longer reads); a new declaration is compatible (clients mirror what the
  listing they read declares, SEP-2243 "Custom Headers from Tool Parameters");
* annotations: a hint that now promises less (``readOnlyHint`` no longer true,
  ``destructiveHint`` or ``openWorldHint`` no longer false, ``idempotentHint`` no longer
  true, defaults as the schema gives them) is breaking for a client that decides on them;
  a hint that promises more is compatible;
* prompt arguments like input properties; any other difference (a description, a title,
  a MIME type) is ``changed``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from mcp_tap.core.hashing import canonical_json
from mcp_tap.drift.answers import final_response
from mcp_tap.drift.model import Area, Change, Severity
from mcp_tap.replay import recorded_answer

# method -> (kind, result key, identifying field)
LISTINGS: Final[dict[str, tuple[str, str, str]]] = {
    "tools/list": ("tool", "tools", "name"),
    "prompts/list": ("prompt", "prompts", "name"),
    "resources/list": ("resource", "resources", "uri"),
    "resources/templates/list": ("template", "resourceTemplates", "uriTemplate"),
}

# hint -> the value the schema defaults it to, and the value that promises the most.
_HINTS: Final[dict[str, tuple[bool, bool]]] = {
    "readOnlyHint": (False, True),
    "destructiveHint": (True, False),
    "idempotentHint": (False, True),
    "openWorldHint": (True, False),
}
_B, _C, _X = Severity.BREAKING, Severity.COMPATIBLE, Severity.CHANGED

Inventory = dict[str, dict[str, dict[str, Any]]]
"""kind -> identifier -> the listed item."""


def inventory(records: Iterable[Mapping[str, Any]], hop: str | None = None) -> Inventory:
    """The items the listings of ``records`` returned, by kind (kinds never listed are absent)."""
    found: Inventory = {}
    for record in records:
        add_listing(found, record, hop)
    return found


def add_listing(found: Inventory, record: Mapping[str, Any], hop: str | None = None) -> None:
    """Add the items one record's listing answer returned (if it is one) to ``found``."""
    if record.get("kind") != "exchange" or (hop is not None and record.get("hop") != hop):
        return
    listing = LISTINGS.get(str(record.get("method")))
    if listing is None:
        return
    answer = recorded_answer(record)
    if answer is None or answer.truncated:
        return
    response = final_response(answer.messages)
    result = response.get("result") if response else None
    if not isinstance(result, dict) or not isinstance(result.get(listing[1]), list):
        return
    kind, key, ident = listing
    items = found.setdefault(kind, {})
    for item in result[key]:
        if isinstance(item, dict) and isinstance(item.get(ident), str):
            items[item[ident]] = item


def _same(a: Any, b: Any) -> bool:
    return canonical_json(a) == canonical_json(b)


def _short(value: Any) -> Any:
    """A value small enough to show in a change, else ``None``."""
    return value if len(canonical_json(value)) <= 200 else None


class _Collector:
    """Gathers the changes of one item under one subject."""

    def __init__(self, subject: str) -> None:
        self.subject = subject
        self.changes: list[Change] = []

    def add(self, severity: Severity, aspect: str, message: str,
            baseline: Any = None, candidate: Any = None) -> None:
        self.changes.append(Change(Area.INVENTORY, severity, self.subject, aspect,
                                   f"{self.subject}: {message}", _short(baseline),
                                   _short(candidate)))


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _required(schema: Mapping[str, Any]) -> set[str]:
    value = schema.get("required")
    return {v for v in value if isinstance(v, str)} if isinstance(value, list) else set()


def _schema_changes(old: Mapping[str, Any], new: Mapping[str, Any], where: str,
                    sends: bool, out: _Collector) -> None:
    """Compare two object schemas; ``sends``: the client sends this data (input) or reads it."""
    old_props, new_props = _obj(old.get("properties")), _obj(new.get("properties"))
    old_req, new_req = _required(old), _required(new)
    for name in sorted(old_props.keys() - new_props.keys()):
        out.add(_B, f"{where}.properties", f"{where} property {name} removed")
    for name in sorted(new_props.keys() - old_props.keys()):
        if sends and name in new_req:
            out.add(_B, f"{where}.required", f"new required {where} property {name}")
        else:
            out.add(_C, f"{where}.properties", f"new {where} property {name}")
    for name in sorted(old_props.keys() & new_props.keys()):
        path = f"{where}.{name}"
        if name in new_req and name not in old_req:
            out.add(_B if sends else _C, f"{where}.required", f"{path} became required")
        elif name in old_req and name not in new_req:
            out.add(_C if sends else _B, f"{where}.required", f"{path} is no longer required")
        _property_changes(_obj(old_props[name]), _obj(new_props[name]), path, sends, out)
    old_extra, new_extra = old.get("additionalProperties"), new.get("additionalProperties")
    if sends and new_extra is False and old_extra is not False:
        out.add(_B, f"{where}.additionalProperties",
                f"{where} no longer accepts properties it does not list")
    elif sends and old_extra is False and new_extra is not False:
        out.add(_C, f"{where}.additionalProperties", f"{where} now accepts unlisted properties")


def _property_changes(old: Mapping[str, Any], new: Mapping[str, Any], path: str,
                      sends: bool, out: _Collector) -> None:
    handled = {"properties", "required", "additionalProperties", "type", "enum",
               "x-mcp-header"}
    if not _same(old.get("type"), new.get("type")):
        out.add(_B, f"{path}.type", f"{path} type changed", old.get("type"), new.get("type"))
    old_enum, new_enum = old.get("enum"), new.get("enum")
    if isinstance(old_enum, list) and isinstance(new_enum, list):
        lost = [v for v in old_enum if v not in new_enum]
        gained = [v for v in new_enum if v not in old_enum]
        if lost:
            out.add(_B if sends else _C, f"{path}.enum", f"{path} no longer allows {lost}")
        if gained:
            out.add(_C if sends else _B, f"{path}.enum", f"{path} now allows {gained}")
    elif isinstance(new_enum, list) and old_enum is None:
        out.add(_B if sends else _C, f"{path}.enum", f"{path} is now limited to {new_enum}")
    elif isinstance(old_enum, list) and new_enum is None:
        out.add(_C if sends else _B, f"{path}.enum", f"{path} is no longer limited to a list")
    if "properties" in old or "properties" in new:
        _schema_changes(old, new, path, sends, out)
    rest_old = {k: v for k, v in old.items() if k not in handled}
    rest_new = {k: v for k, v in new.items() if k not in handled}
    for key in sorted(rest_old.keys() | rest_new.keys()):
        if not _same(rest_old.get(key), rest_new.get(key)):
            out.add(_X, f"{path}.{key}", f"{path} {key} changed",
                    rest_old.get(key), rest_new.get(key))


def mcp_headers(schema: Any, prefix: str = "") -> dict[str, str]:
    """Property path -> ``x-mcp-header`` name, for every property of ``schema`` declaring one."""
    found: dict[str, str] = {}
    for name, prop in _obj(_obj(schema).get("properties")).items():
        path = f"{prefix}{name}"
        header = _obj(prop).get("x-mcp-header")
        if isinstance(header, str):
            found[path] = header
        found.update(mcp_headers(prop, path + "."))
    return found


def _header_changes(old: Any, new: Any, out: _Collector) -> None:
    before, after = mcp_headers(old), mcp_headers(new)
    for path in sorted(before.keys() | after.keys()):
        was, now = before.get(path), after.get(path)
        if was == now:
            continue
        if now is None:
            out.add(_B, "x-mcp-header", f"argument {path} is no longer mirrored as "
                    f"Mcp-Param-{was}", was, None)
        elif was is None:
            out.add(_C, "x-mcp-header", f"argument {path} is now mirrored as Mcp-Param-{now}",
                    None, now)
        elif was.lower() != now.lower():
            out.add(_B, "x-mcp-header", f"argument {path} header renamed from "
                    f"Mcp-Param-{was} to Mcp-Param-{now}", was, now)
        else:
            out.add(_X, "x-mcp-header", f"argument {path} header spelling changed", was, now)


def _annotation_changes(old: Any, new: Any, out: _Collector) -> None:
    before, after = _obj(old), _obj(new)
    for hint, (default, best) in _HINTS.items():
        was = before.get(hint, default)
        now = after.get(hint, default)
        if was == now:
            continue
        if was is best:
            out.add(_B, f"annotations.{hint}", f"{hint} went from {was} to {now}", was, now)
        else:
            out.add(_C, f"annotations.{hint}", f"{hint} went from {was} to {now}", was, now)
    for key in sorted((before.keys() | after.keys()) - _HINTS.keys()):
        if not _same(before.get(key), after.get(key)):
            out.add(_X, f"annotations.{key}", f"annotation {key} changed",
                    before.get(key), after.get(key))


def _tool_changes(old: dict[str, Any], new: dict[str, Any], out: _Collector) -> None:
    _schema_changes(_obj(old.get("inputSchema")), _obj(new.get("inputSchema")),
                    "inputSchema", True, out)
    _header_changes(old.get("inputSchema"), new.get("inputSchema"), out)
    old_out, new_out = old.get("outputSchema"), new.get("outputSchema")
    if isinstance(old_out, dict) and not isinstance(new_out, dict):
        out.add(_B, "outputSchema", "outputSchema removed (structured results are no longer "
                "promised)")
    elif isinstance(new_out, dict) and not isinstance(old_out, dict):
        out.add(_C, "outputSchema", "outputSchema added")
    elif isinstance(old_out, dict) and isinstance(new_out, dict):
        _schema_changes(old_out, new_out, "outputSchema", False, out)
    _annotation_changes(old.get("annotations"), new.get("annotations"), out)
    _other_fields(old, new, {"inputSchema", "outputSchema", "annotations", "name"}, out)


def _arguments(prompt: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    args = prompt.get("arguments")
    if not isinstance(args, list):
        return {}
    return {a["name"]: a for a in args if isinstance(a, dict) and isinstance(a.get("name"), str)}


def _prompt_changes(old: dict[str, Any], new: dict[str, Any], out: _Collector) -> None:
    before, after = _arguments(old), _arguments(new)
    for name in sorted(before.keys() - after.keys()):
        out.add(_B, "arguments", f"argument {name} removed")
    for name in sorted(after.keys() - before.keys()):
        if after[name].get("required") is True:
            out.add(_B, "arguments.required", f"new required argument {name}")
        else:
            out.add(_C, "arguments", f"new optional argument {name}")
    for name in sorted(before.keys() & after.keys()):
        was, now = before[name].get("required") is True, after[name].get("required") is True
        if now and not was:
            out.add(_B, "arguments.required", f"argument {name} became required")
        elif was and not now:
            out.add(_C, "arguments.required", f"argument {name} is no longer required")
    _other_fields(old, new, {"arguments", "name"}, out)


def _other_fields(old: Mapping[str, Any], new: Mapping[str, Any], handled: set[str],
                  out: _Collector) -> None:
    for key in sorted((old.keys() | new.keys()) - handled):
        if key == "_meta":
            continue  # bookkeeping, not contract
        if not _same(old.get(key), new.get(key)):
            out.add(_X, key, f"{key} changed", old.get(key), new.get(key))


def inventory_changes(baseline: Inventory, candidate: Inventory) -> list[Change]:
    """The inventory drift from ``baseline`` to ``candidate`` (kinds listed on both sides)."""
    changes: list[Change] = []
    for kind, _key, ident in LISTINGS.values():
        if kind not in baseline or kind not in candidate:
            continue
        before, after = baseline[kind], candidate[kind]
        for name in sorted(before.keys() - after.keys()):
            changes.append(Change(Area.INVENTORY, _B, f"{kind} {name}", "removed",
                                  f"{kind} {name} removed"))
        for name in sorted(after.keys() - before.keys()):
            changes.append(Change(Area.INVENTORY, _C, f"{kind} {name}", "added",
                                  f"{kind} {name} added"))
        for name in sorted(before.keys() & after.keys()):
            out = _Collector(f"{kind} {name}")
            if kind == "tool":
                _tool_changes(before[name], after[name], out)
            elif kind == "prompt":
                _prompt_changes(before[name], after[name], out)
            else:
                _other_fields(before[name], after[name], {ident}, out)
            changes.extend(out.changes)
    return changes
