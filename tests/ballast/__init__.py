"""Tests of the ballast package: settings, URLs and the health probes."""
