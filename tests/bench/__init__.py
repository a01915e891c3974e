"""Tests of the benchmark harness (bench/): statistics, rotation, targets, report."""
