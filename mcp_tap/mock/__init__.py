"""Serve a capture as a mock MCP server: the answer book (sans-IO) and the aiohttp server."""

from mcp_tap.mock.book import AnswerBook, Miss, RecordedAnswer, RecordedEvent
from mcp_tap.mock.server import PACINGS, MockServer

__all__ = ["PACINGS", "AnswerBook", "Miss", "MockServer", "RecordedAnswer", "RecordedEvent"]
