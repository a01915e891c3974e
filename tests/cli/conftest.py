"""Fixtures for the CLI process tests: real qcluster process groups."""
from tests.support.cluster import cluster_factory  # noqa: F401  (fixture)
