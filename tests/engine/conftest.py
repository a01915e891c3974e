"""Fixtures for the engine tests: real qcluster process groups (tests/support/cluster.py)."""
from tests.support.cluster import cluster_factory  # noqa: F401  (fixture)
