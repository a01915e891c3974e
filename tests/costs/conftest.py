"""Fixtures: the local OpenAI/Anthropic protocol server and providers pointed at it."""
from tests.support.llm_server import llm_server, sdk_providers  # noqa: F401
