"""Fixtures: the local OpenAI/Anthropic protocol server, providers pointed at it, and real
qcluster process groups for the agent crash tests."""
from tests.support.cluster import cluster_factory  # noqa: F401
from tests.support.llm_server import llm_server, sdk_providers  # noqa: F401
