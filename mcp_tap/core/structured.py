"""A tool result's ``structuredContent`` against the ``outputSchema`` its tool declared.

server/tools "Output Schema": if a tool provides an output schema, servers MUST provide
structured results that conform to it. The schema is the server's own (learnt from
``tools/list``, as input schemas are), so it is validated with ``jsonschema`` by its
declared dialect (2020-12 without ``$schema``, basic/index "Schema Dialect"), never with a
compiling validator: a compiler turns an untrusted schema into code. ``$ref`` is never
fetched from the network (basic/index "``$ref`` Resolution"): a schema whose reference does
not resolve locally, or that is not a valid schema of its dialect, is not judged (the
server's schema is then the problem, which ``response.payload.tools-list`` owns).
Validators are kept in a bounded LRU keyed by the schema's JSON; schemas past
``MAX_SCHEMA_BYTES`` are not judged (a bound the same page asks validators to apply).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Final

import jsonschema
import orjson
from jsonschema.exceptions import SchemaError
from referencing.exceptions import Unresolvable

from mcp_tap.core.catalog import finding
from mcp_tap.core.findings import Finding

MAX_SCHEMA_BYTES: Final = 65536
MAX_VALIDATORS: Final = 256
_VALIDATORS: OrderedDict[bytes, Any] = OrderedDict()
_INVALID = object()  # a schema that is not valid in its dialect: never judged


def _validator(schema: dict[str, Any]) -> Any:
    try:
        key = orjson.dumps(schema)
    except TypeError:
        return _INVALID
    if len(key) > MAX_SCHEMA_BYTES:
        return _INVALID
    found = _VALIDATORS.get(key)
    if found is not None:
        _VALIDATORS.move_to_end(key)
        return found
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
        made: Any = cls(schema)
    except SchemaError:
        made = _INVALID
    _VALIDATORS[key] = made
    if len(_VALIDATORS) > MAX_VALIDATORS:
        _VALIDATORS.popitem(last=False)
    return made


def structured_problem(output_schema: Any, result: Any) -> str:
    """Why ``result`` (a complete ``tools/call`` result) breaks its tool's ``outputSchema``,
    or ``""``. A result with ``isError: true`` owes no structured content."""
    if not isinstance(output_schema, dict) or not isinstance(result, dict):
        return ""
    if "structuredContent" not in result:
        if result.get("isError") is True:
            return ""
        return "the tool declares an outputSchema, but the result has no structuredContent"
    validator = _validator(output_schema)
    if validator is _INVALID:
        return ""
    try:
        error = next(iter(validator.iter_errors(result["structuredContent"])), None)
    except Unresolvable:
        return ""  # a $ref outside the schema: never fetched, so not judged
    if error is None:
        return ""
    path = "".join(f"[{p!r}]" for p in error.absolute_path)
    return f"structuredContent{path} does not conform to the tool's outputSchema: {error.message}"


def check_structured(output_schema: Any, result: Any, where: str) -> list[Finding]:
    """The ``response.payload.structured-content`` finding for one tool result, if any."""
    problem = structured_problem(output_schema, result)
    return [finding("response.payload.structured-content", problem, where)] if problem else []
