"""Reading Prometheus text expositions in tests: parsed families, one sample's value, and the metric names a Grafana dashboard's queries name."""
from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana" / "ballast-dashboard.json"

# PromQL words that look like metric names but are not (functions, aggregations, keywords).
_PROMQL_WORDS = {
    "sum", "rate", "irate", "increase", "histogram_quantile", "max", "min", "avg", "count", "by", "without",
    "topk", "bottomk", "clamp_min", "clamp_max", "le", "on", "ignoring", "group_left", "group_right", "or",
    "and", "unless", "time", "vector", "scalar", "abs", "delta", "deriv", "label_replace", "offset",
}


def parse(text: str) -> list[Metric]:
    """The families of a text exposition."""
    return list(text_string_to_metric_families(text))


def sample_value(families: Iterable[Metric], name: str, **labels: str) -> float:
    """The sum of the samples named ``name`` whose labels include ``labels`` (0 when none)."""
    return sum(
        sample.value
        for family in families
        for sample in family.samples
        if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items())
    )


def exposed_names(families: Iterable[Metric]) -> set[str]:
    """Every sample name a scrape exposes or declares: a counter family ``x`` as
    ``x_total``, a histogram as ``x_bucket``/``x_sum``/``x_count``, a gauge as ``x``
    (declared names count even before their first sample)."""
    suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "summary": ("_sum", "_count", "")}
    names: set[str] = set()
    for family in families:
        names |= {family.name + s for s in suffixes.get(family.type, ("",))}
        names |= {sample.name for sample in family.samples}
    return names


def dashboard_queries(path: Path = DASHBOARD) -> list[str]:
    """Every PromQL expression (``targets[].expr``) of a Grafana dashboard's panels, rows included."""
    board: dict[str, Any] = json.loads(path.read_text())
    panels = list(board["panels"])
    exprs: list[str] = []
    while panels:
        panel = panels.pop()
        panels.extend(panel.get("panels", []))
        exprs += [target["expr"] for target in panel.get("targets", []) if target.get("expr")]
    return exprs


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression names (identifiers outside label matchers,
    ``by (...)`` lists, strings and durations, that are not PromQL's own words)."""
    text = re.sub(r'"[^"]*"', "", expr)
    text = re.sub(r"\{[^}]*\}", "", text)  # label matchers
    text = re.sub(r"\b(by|without|on|ignoring)\s*\([^)]*\)", "", text)  # grouping label lists
    text = re.sub(r"\[[^\]]*\]", "", text)  # range durations
    words = set(re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", text))
    return {w for w in words if w not in _PROMQL_WORDS and not w.startswith("$")}
