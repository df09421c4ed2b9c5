"""Tests for the one URL validator and the printable form of URLs (mcp_tap.urls)."""

from __future__ import annotations

import pytest

from mcp_tap.errors import InputError
from mcp_tap.urls import check_http_url, shown_url


class TestCheckHttpUrl:
    """check_http_url: http(s), a host, a port in 1-65535, or one InputError."""

    @pytest.mark.parametrize("url", ["http://h/mcp", "https://[::1]:8443/x",
                                     "http://127.0.0.1:9000", "http://u:p@h:9/mcp"])
    def test_usable_urls_pass_unchanged(self, url: str) -> None:
        """A usable URL is returned as given."""
        assert check_http_url(url, "--target") == url

    @pytest.mark.parametrize("url", ["http://[::1", "http://127.0.0.1:99999",
                                     "http://127.0.0.1:0/mcp", "ftp://h/", "http://h:abc/",
                                     "http:///mcp", "", "http://h/a b"])
    def test_unusable_urls_are_input_errors(self, url: str) -> None:
        """A malformed URL, another scheme, no host or a bad port is bad input."""
        with pytest.raises(InputError, match=r"^--target: .* is not an http:// or https:// URL"):
            check_http_url(url, "--target")

    def test_credentials_are_not_echoed(self) -> None:
        """The error message does not repeat a password in the URL."""
        with pytest.raises(InputError) as info:
            check_http_url("http://user:hunter22@h:99999/", "--target")
        assert "hunter22" not in str(info.value) and "***@h:99999" in str(info.value)


class TestShownUrl:
    """shown_url: userinfo replaced, everything else kept."""

    def test_userinfo_is_replaced(self) -> None:
        """user:password@ becomes ***@."""
        assert shown_url("http://u:p@127.0.0.1:9/mcp") == "http://***@127.0.0.1:9/mcp"

    def test_unparseable_url_still_loses_its_userinfo(self) -> None:
        """Even a URL urlsplit refuses loses its credentials."""
        assert shown_url("http://u:p@[::1/x") == "http://***@[::1/x"

    def test_plain_url_is_unchanged(self) -> None:
        """A URL without userinfo or query is returned as is."""
        assert shown_url("https://h:1/x") == "https://h:1/x"
        assert shown_url("https://h:1/x#frag") == "https://h:1/x#frag"

    def test_query_values_are_hidden(self) -> None:
        """A query's values may be credentials (``?token=...``, ``?api_key=...``): each is
        shown as ``***``, its name kept; an item without a name is a value too."""
        assert (shown_url("https://u:p@h:1/mcp?token=q-SECRET&api_key=k&v=1&q-SECRET2")
                == "https://***@h:1/mcp?token=***&api_key=***&v=***&***")
        assert shown_url("http://h/mcp?") == "http://h/mcp"
