"""Fixtures for the crash suite: real qcluster process groups, killed with SIGKILL."""
from tests.support.cluster import cluster_factory  # noqa: F401  (fixture)
