"""Fixtures of the runs tests: the local HTTP server the http_request tool is tested against."""
from tests.support.http_server import server  # noqa: F401 (the fixture)
