"""JSON-RPC 2.0 classification and envelope rules.

A message is a request (method + id), a notification (method, no id), a response (id +
result/error) or invalid. Request ids are strings or integers; ``null``, booleans and floats
are not (JSON-RPC allows ``null`` only in error responses to unidentifiable requests, and
MCP forbids it in requests).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

import orjson

from mcp_tap.core.fastinit import fast_init, new_twin


class Kind(StrEnum):
    """What a JSON value is as a JSON-RPC message."""

    REQUEST = "request"
    NOTIFICATION = "notification"
    RESPONSE = "response"
    INVALID = "invalid"


# The members as module constants (see eras.ERA_MODERN: a cheaper look-up on Python 3.11).
KIND_REQUEST: Final = Kind.REQUEST
KIND_NOTIFICATION: Final = Kind.NOTIFICATION
KIND_RESPONSE: Final = Kind.RESPONSE
KIND_INVALID: Final = Kind.INVALID


class _ClassifiedTwin:
    """Classified's layout (fast_init checks it): make_classified builds one, then retypes it."""

    __slots__ = ("kind", "message", "problem")


def make_classified(kind: Kind, message: Any, problem: str = "") -> Classified:
    """``Classified(kind, message, problem)`` without ``type.__call__``."""
    made = new_twin(_ClassifiedTwin)
    made.kind = kind
    made.message = message
    made.problem = problem
    made.__class__ = Classified
    built: Classified = made
    return built


@fast_init(make_classified)  # made per exchange: see core/fastinit.py
@dataclass(frozen=True, slots=True)
class Classified:
    """A classified message: its kind, and for invalid ones why."""

    kind: Kind
    message: Any
    problem: str = ""

    @property
    def method(self) -> str | None:
        """The method of a request or notification."""
        if isinstance(self.message, dict):
            m = self.message.get("method")
            return m if isinstance(m, str) else None
        return None

    @property
    def id(self) -> Any:
        """The id member (``None`` when absent)."""
        return self.message.get("id") if isinstance(self.message, dict) else None


def is_valid_id(value: Any) -> bool:
    """Whether ``value`` is a valid MCP request id: a string or an integer (not a boolean)."""
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def same_id(a: Any, b: Any) -> bool:
    """Whether two ids are equal in value **and** JSON type (``"6"`` != ``6``, ``True`` != 1)."""
    # bool cannot be subclassed, so an exact type match also keeps True apart from 1.
    return type(a) is type(b) and a == b


def json_type(value: Any) -> str:
    """The JSON type name of a decoded value, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def parse_json(data: bytes | str) -> Any:
    """Decode JSON with orjson; raises ``ValueError`` (orjson.JSONDecodeError) on bad input."""
    return orjson.loads(data)


def classify(message: Any) -> Classified:
    """Classify one decoded JSON value as a JSON-RPC 2.0 message (never raises)."""
    kind, problem = kind_of(message)
    return make_classified(kind, message, problem)



def kind_of(message: Any) -> tuple[Kind, str]:
    """:func:`classify` without the :class:`Classified`: the kind and, if invalid, why."""
    if not isinstance(message, dict):
        return KIND_INVALID, f"a JSON-RPC message must be an object, got {json_type(message)}"
    if message.get("jsonrpc") != "2.0":
        return KIND_INVALID, f'jsonrpc must be "2.0", got {message.get("jsonrpc")!r}'
    if "method" in message:
        method = message["method"]
        if not isinstance(method, str) or not method:
            return KIND_INVALID, "method must be a non-empty string"
        if "params" in message and not isinstance(message["params"], dict):
            return KIND_INVALID, "params must be an object"
        if "result" in message or "error" in message:
            return KIND_INVALID, "a request must not carry result or error"
        if "id" not in message:
            return KIND_NOTIFICATION, ""
        if not is_valid_id(message["id"]):
            return (
                KIND_INVALID,
                f"a request id must be a string or an integer, got {json_type(message['id'])}",
            )
        return KIND_REQUEST, ""
    if "result" in message or "error" in message or "id" in message:
        return KIND_RESPONSE, ""
    return KIND_INVALID, "neither a request, a notification nor a response"


def first_error_code(messages: tuple[Any, ...]) -> int | None:
    """The integer ``error.code`` of the first JSON-RPC error among ``messages`` (None: none
    is an error, or none carries an integer code; a bool is not one)."""
    for m in messages:
        if isinstance(m, dict) and isinstance(m.get("error"), dict):
            code = m["error"].get("code")
            if isinstance(code, int) and not isinstance(code, bool):
                return code
    return None
