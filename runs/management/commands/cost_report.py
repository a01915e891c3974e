"""``manage.py cost_report [--since DATE] [--until DATE] [--by step|run|graph|model|day] [--csv] [--include-tests]``: LLM spend aggregated in the database."""

from __future__ import annotations

from datetime import date, datetime
from decimal import Decimal
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db.models import BigIntegerField, CharField, Count, F, Q, QuerySet, Sum, Value
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast, Coalesce, TruncDate
from django.utils import timezone

from runs.models import AttemptStatus, StepAttempt
from runs.reports.formatting import CsvWriter, format_decimal
from runs.reports.selectors import cost_rollups
from runs.selectors import RunFilter

GROUPINGS = ("step", "run", "graph", "model", "day")
MICRO = Decimal(1).scaleb(-StepAttempt._meta.get_field("cost_usd").decimal_places)  # the cost columns' precision

# Token counts live in the attempt's usage JSON. KeyTextTransform (->> on PostgreSQL,
# JSON_EXTRACT on SQLite) plus a cast keeps the sum in the database on both.
_TOKEN_KEYS = ("input_tokens", "cached_input_tokens", "cache_write_tokens", "output_tokens", "reasoning_tokens")


def _tokens(key: str) -> Any:
    return Coalesce(Sum(Cast(KeyTextTransform(key, "usage"), BigIntegerField())), Value(0))


def _group_fields(by: str) -> dict[str, Any]:
    """The GROUP BY expressions of a grouping, by output column name (``None``: a plain
    field of StepAttempt, grouped as it is)."""
    if by == "step":
        return {
            "run": F("step__run_id"),
            "step_id": None,
            "node": F("step__node_id"),
            "model": KeyTextTransform("model", "usage"),
        }
    if by == "run":
        return {"run": F("step__run_id"), "graph": F("step__run__graph_version__graph__name")}
    if by == "graph":
        return {"graph": F("step__run__graph_version__graph__name")}
    if by == "model":
        return {"provider": KeyTextTransform("provider", "usage"), "model": KeyTextTransform("model", "usage")}
    if by == "day":
        return {"day": TruncDate("started_at")}
    raise ValueError(by)


def _rollup_fields(by: str) -> dict[str, Any]:
    """The same groups over :class:`CostRollup` rows (the spend of pruned runs): a step
    or a run is gone, so its group reads None there (one "pruned runs" row per node and
    model, or per graph)."""
    none = Value(None, output_field=CharField())
    if by == "step":
        return {"run": none, "step_id": none, "node": F("node_id"), "model": F("model")}
    if by == "run":
        return {"run": none, "graph": F("graph__name")}
    if by == "graph":
        return {"graph": F("graph__name")}
    if by == "model":
        return {"provider": F("provider"), "model": F("model")}
    if by == "day":
        return {"day": F("day")}
    raise ValueError(by)


# A rollup's column for each of the report's columns (the rollup sums what the report counts).
_ROLLUP_COLUMNS = {
    "attempts": "attempts", "failed_attempts": "failed_attempts", "input_tokens": "input_tokens",
    "cached_input_tokens": "cached_input_tokens", "cache_write_tokens": "cache_write_tokens",
    "output_tokens": "output_tokens", "reasoning_tokens": "reasoning_tokens", "unpriced": "unpriced_attempts",
}  # fmt: skip


def _rolled_rows(*, by: str, since: datetime | None, until: datetime | None, include_tests: bool) -> list[dict[str, Any]]:
    """The rollup rows of pruned runs in the report's shape, one aggregate query. The time
    range counts the UTC days that lie wholly inside it (runs.reports.selectors.cost_rollups):
    a report bounded by whole days is the same before and after a prune."""
    rollups = cost_rollups(viewer=None, filters=RunFilter(start=since, end=until, include_tests=include_tests))
    groups = _rollup_fields(by)
    rows = list(
        rollups.annotate(**{f"g_{name}": expr for name, expr in groups.items()})
        .values(*(f"g_{name}" for name in groups))
        .annotate(**{column: Sum(field) for column, field in _ROLLUP_COLUMNS.items()}, usd=Sum("cost_usd"))
        .order_by()
    )
    out = []
    for row in rows:
        shaped = {name: row[f"g_{name}"] for name in groups}
        shaped.update({column: row[column] or 0 for column in _ROLLUP_COLUMNS})
        # No known price among the group's attempts: the spend is unknown, not $0 (as live rows).
        shaped["usd"] = None if shaped["attempts"] <= shaped["unpriced"] else Decimal(row["usd"] or 0)
        out.append(shaped)
    return out


def _merge(live: list[dict[str, Any]], rolled: list[dict[str, Any]], by: str) -> list[dict[str, Any]]:
    """Live and rollup rows of the same group added up, ordered by the group (None last)."""
    names = list(_group_fields(by))
    merged: dict[tuple[Any, ...], dict[str, Any]] = {tuple(row[n] for n in names): row for row in live}
    for row in rolled:
        have = merged.setdefault(tuple(row[n] for n in names), {**row, **{c: 0 for c in _ROLLUP_COLUMNS}, "usd": None})
        for column in _ROLLUP_COLUMNS:
            have[column] = (have[column] or 0) + row[column]
        if row["usd"] is not None:
            have["usd"] = (have["usd"] or Decimal(0)) + row["usd"]
    return sorted(merged.values(), key=lambda r: tuple((r[n] is None, "" if r[n] is None else r[n]) for n in names))


def cost_rows(*, by: str, since: datetime | None = None, until: datetime | None = None, include_tests: bool = False) -> list[dict[str, Any]]:
    """Spend per group, one dict per row (ordered by the group), computed with one
    aggregate query over every LLM attempt (StepAttempt rows with usage or a cost), including
    failed, retried and crash-interrupted attempts, and one over the cost rollups of the runs
    retention pruned (runs.models.CostRollup; their step and run read None), so totals are
    the same before and after a prune (for a range of whole UTC days, or none).

    Columns: the group's fields, ``attempts``, ``failed_attempts`` (failed or lost),
    the token sums (``input_tokens`` ... ``reasoning_tokens``), ``usd`` (Decimal sum of
    the known costs, None when none is known) and ``unpriced`` (attempts with usage but an unknown price: their
    cost is not in ``cost_usd``; never counted as $0 silently). ``since``/``until`` bound
    the attempts' start time (until exclusive). One-node test runs from the builder are
    left out unless ``include_tests``.
    """
    # The attempts the cost API and the rollups count (runs.reports.selectors.cost_attempts).
    qs: QuerySet = StepAttempt.objects.filter(Q(usage__isnull=False) | Q(cost_usd__isnull=False))
    if not include_tests:
        qs = qs.filter(step__run__is_test=False)
    if since is not None:
        qs = qs.filter(started_at__gte=since)
    if until is not None:
        qs = qs.filter(started_at__lt=until)
    groups = _group_fields(by)
    rows = (
        qs.annotate(**{name: expr for name, expr in groups.items() if expr is not None})
        .values(*groups)
        .annotate(
            attempts=Count("id"),
            failed_attempts=Count("id", filter=Q(status__in=(AttemptStatus.FAILED, AttemptStatus.LOST))),
            **{key: _tokens(key) for key in _TOKEN_KEYS},
            unpriced=Count("id", filter=Q(cost_usd__isnull=True)),
            usd=Sum("cost_usd"),
        )
        .order_by(*groups)
    )
    out = list(rows)
    for row in out:
        # SQLite keeps decimals as floating point and sums them so; report cents of a
        # cent as the columns store them on every database.
        if row["usd"] is not None:
            row["usd"] = Decimal(row["usd"]).quantize(MICRO)
    rolled = _rolled_rows(by=by, since=since, until=until, include_tests=include_tests)
    if not rolled:
        return out
    merged = _merge(out, rolled, by)
    for row in merged:
        if row["usd"] is not None:
            row["usd"] = Decimal(row["usd"]).quantize(MICRO)
    return merged


def totals(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Sums of the numeric columns over ``rows``."""
    out: dict[str, Any] = {"attempts": 0, "failed_attempts": 0, "unpriced": 0, "usd": Decimal(0)}
    out.update({key: 0 for key in _TOKEN_KEYS})
    for row in rows:
        for key in out:
            out[key] += row[key] or 0
    return out


def _parse_date(value: str, flag: str) -> datetime:
    """``YYYY-MM-DD`` (midnight) or an ISO datetime; naive values are in TIME_ZONE."""
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise CommandError(f"{flag}: not an ISO date or datetime: {value!r}") from None
    if parsed.tzinfo is None:
        parsed = timezone.make_aware(parsed, timezone.get_default_timezone())
    return parsed


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, Decimal):
        return format_decimal(value)  # every digit stored (no exponent, 0 as "0"): CSV totals add up exactly
    if isinstance(value, date):
        return value.isoformat()
    return str(value)


class Command(BaseCommand):
    help = (
        "Totals of LLM tokens and USD cost per step, run, graph, model or day, from every recorded "
        "attempt (retries and crash re-runs included) and the daily rollups of pruned runs, as a table or CSV."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--since", help="only attempts started on or after this date (YYYY-MM-DD or ISO datetime)")
        parser.add_argument("--until", help="only attempts started before this date")
        parser.add_argument("--by", choices=GROUPINGS, default="model", help="grouping (default: model)")
        parser.add_argument("--csv", action="store_true", dest="as_csv", help="write CSV instead of a table")
        parser.add_argument("--include-tests", action="store_true", help="also count one-node test runs from the builder")

    def handle(self, *args: Any, since: str | None, until: str | None, by: str, as_csv: bool, include_tests: bool = False, **options: Any) -> None:
        start = _parse_date(since, "--since") if since else None
        end = _parse_date(until, "--until") if until else None
        rows = cost_rows(by=by, since=start, until=end, include_tests=include_tests)
        columns = list(_group_fields(by)) + [
            "attempts",
            "failed_attempts",
            *_TOKEN_KEYS,
            "usd",
            "unpriced",
        ]
        if as_csv:
            writer = CsvWriter(self.stdout)
            writer.writerow(columns)
            for row in rows:
                writer.writerow([_cell(row[c]) for c in columns])
            return
        total = totals(rows)
        table = [columns] + [[_cell(row[c]) for c in columns] for row in rows]
        table.append(["TOTAL"] + [""] * (len(_group_fields(by)) - 1) + [_cell(total[c]) for c in columns[len(_group_fields(by)) :]])
        widths = [max(len(r[i]) for r in table) for i in range(len(columns))]
        numeric_from = len(_group_fields(by))
        for i, line in enumerate(table):
            self.stdout.write(
                "  ".join(c.rjust(w) if j >= numeric_from else c.ljust(w) for j, (c, w) in enumerate(zip(line, widths, strict=True))).rstrip()
            )
            if i == 0 or i == len(table) - 2:
                self.stdout.write("  ".join("-" * w for w in widths))
        if total["unpriced"]:
            self.stderr.write(
                f"note: {total['unpriced']} attempt(s) used a model with no known price; their cost is unknown and not in usd"
            )
