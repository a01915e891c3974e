"""``manage.py recompute_costs [--since DATE] [--run ID] [--batch-size N] [--dry-run]``: re-price recorded LLM usage with the current price data."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from decimal import ROUND_HALF_UP, Decimal
from typing import Any, TypedDict

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from audit.chain import audit
from runs.engine.api import run_cost_adjust
from runs.management.commands.cost_report import _parse_date
from runs.models import AttemptStatus, Run, Step, StepAttempt
from runs.providers import UnknownProvider, get_provider
from runs.providers.base import LLMProvider
from runs.reports.formatting import format_usd
from runs.vocabulary import Usage

ACTOR = "recompute_costs"
# Decimal places of the cost columns: a cost that rounds to what is stored is unchanged.
STORED = Decimal(1).scaleb(-StepAttempt._meta.get_field("cost_usd").decimal_places)


def _usage(data: dict[str, Any]) -> Usage:
    """The Usage of a stored usage JSON. Usage recorded before cache writes were counted
    apart has no ``cache_write_tokens``: its writes are inside ``input_tokens`` and are
    priced as plain input, as they were (the split was not stored, so it cannot be
    recovered)."""
    return Usage(
        provider=str(data.get("provider", "")),
        model=str(data.get("model", "")),
        input_tokens=int(data.get("input_tokens") or 0),
        output_tokens=int(data.get("output_tokens") or 0),
        cached_input_tokens=int(data.get("cached_input_tokens") or 0),
        reasoning_tokens=int(data.get("reasoning_tokens") or 0),
        cache_write_tokens=int(data.get("cache_write_tokens") or 0),
        cache_write_1h_tokens=int(data.get("cache_write_1h_tokens") or 0),
    )


def _stored(value: Decimal | None) -> Decimal | None:
    return None if value is None else value.quantize(STORED, rounding=ROUND_HALF_UP)


def _same(exact: Decimal | None, stored: Decimal | None) -> bool:
    """Whether a stored cost already is ``exact`` (rounded to the column as PostgreSQL
    does, half up; SQLite keeps a float: within half a micro-dollar either way)."""
    if exact is None or stored is None:
        return exact is stored
    return abs(exact - stored) <= STORED / 2


class Repricer:
    """Prices usage JSON with the registered providers (one instance per provider name);
    ``None`` for a provider no longer registered (its rows are left alone)."""

    def __init__(self) -> None:
        self._providers: dict[str, LLMProvider | None] = {}

    def provider(self, name: str) -> LLMProvider | None:
        if name not in self._providers:
            try:
                self._providers[name] = get_provider(name)
            except UnknownProvider:
                self._providers[name] = None
        return self._providers[name]

    def price(self, usage_data: dict[str, Any], at: datetime | None) -> tuple[bool, Decimal | None, str]:
        """(known provider?, cost or None when the price is unknown, price version)."""
        usage = _usage(usage_data)
        provider = self.provider(usage.provider)
        if provider is None:
            return False, None, ""
        cost = provider.price(usage.model, usage, at=at)
        return True, cost, provider.price_version(usage.model) if cost is not None else ""


def recompute_batch(attempt_ids: list[int], repricer: Repricer, *, dry_run: bool = False) -> dict[str, Any]:
    """Re-price one batch of attempts, their steps and their runs' totals in ONE transaction.

    Each changed StepAttempt gets the new ``cost_usd`` and ``price_version`` (also written
    into its usage JSON); a step whose final usage is one of them is updated the same way;
    each run's ``cost_usd`` moves by the sum of its attempts' changes (under the run's row
    lock, as the engine's commits take it, and with its version bumped, so a run in flight
    keeps a consistent total).
    One audit entry per changed run (actor_type "system") records the steps, attempts and
    old and new totals. With ``dry_run`` the transaction is rolled back.

    Returns ``{"attempts": changed, "steps": changed, "runs": {run_id: delta}, "skipped":
    attempts whose provider is not registered}``.
    """
    summary: dict[str, Any] = {"attempts": 0, "steps": 0, "runs": {}, "skipped": 0}
    with transaction.atomic():
        rows = list(
            StepAttempt.objects.filter(pk__in=attempt_ids, usage__isnull=False)
            .select_related("step")
            .order_by("step__run_id", "id")
        )
        run_ids = sorted({a.step.run_id for a in rows})
        # Lock the runs in id order (the engine locks one run per commit): no deadlock.
        locked = {r.pk: r for r in Run.objects.select_for_update().filter(pk__in=run_ids).order_by("pk")}
        deltas: dict[int, Decimal] = defaultdict(Decimal)
        changes: dict[int, dict[str, list]] = defaultdict(lambda: {"attempts": [], "steps": []})
        for attempt in rows:
            assert attempt.usage is not None  # the query's usage__isnull=False
            known, cost, version = repricer.price(attempt.usage, attempt.started_at)
            if not known:
                summary["skipped"] += 1
                continue
            new, old = _stored(cost), attempt.cost_usd
            usage = dict(attempt.usage)
            if _same(cost, old) and usage.get("price_version", "") == version:
                continue
            usage["price_version"] = version
            StepAttempt.objects.filter(pk=attempt.pk).update(cost_usd=new, price_version=version, usage=usage)
            deltas[attempt.step.run_id] += (new or 0) - (old or 0)
            changes[attempt.step.run_id]["attempts"].append(
                {"attempt": attempt.pk, "step": attempt.step_id, "old": _text(old), "new": _text(new)}
            )
            summary["attempts"] += 1
            step = attempt.step
            # A step's own cost is its successful attempt's (failed attempts' costs count
            # in the run total only).
            if attempt.status == AttemptStatus.SUCCEEDED and step.usage:
                step_usage = dict(step.usage)
                step_usage["price_version"] = version
                Step.objects.filter(pk=step.pk).update(cost_usd=new, price_version=version, usage=step_usage)
                changes[step.run_id]["steps"].append(step.pk)
                summary["steps"] += 1
        for run_id in sorted(changes):
            run = locked[run_id]
            delta = deltas[run_id]
            # Through the engine's writer: it bumps the run's version, so a worker holding a
            # snapshot of this run re-reads it instead of writing back the old total.
            run_cost_adjust(run_id, delta)
            audit(
                ACTOR,
                "cost.recompute",
                run,
                actor_type="system",
                old_cost_usd=_text(run.cost_usd),
                new_cost_usd=_text(run.cost_usd + delta),
                attempts=changes[run_id]["attempts"],
                steps=changes[run_id]["steps"],
            )
            summary["runs"][run_id] = delta
        if dry_run:
            transaction.set_rollback(True)
    return summary


class _Totals(TypedDict):
    """What :class:`Command` sums over the batches."""

    attempts: int
    steps: int
    runs: set[int]
    skipped: int
    delta: Decimal


def _text(value: Decimal | None) -> str | None:
    return None if value is None else str(value)


class Command(BaseCommand):
    help = (
        "Recompute the USD cost of every recorded LLM attempt (and its step and run totals) from its "
        "token usage with the current price data (genai-prices for real models), one transaction per "
        "batch, audited. Attempts of providers that are no longer registered are left alone."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--since", help="only attempts started on or after this ISO date")
        parser.add_argument("--run", type=int, help="only this run")
        parser.add_argument("--batch-size", type=int, default=500)
        parser.add_argument("--dry-run", action="store_true", help="report what would change, write nothing")

    def handle(self, *args: Any, since: str | None, run: int | None, batch_size: int, dry_run: bool, **options: Any) -> None:
        if batch_size < 1:
            raise CommandError("--batch-size must be at least 1")
        qs = StepAttempt.objects.filter(usage__isnull=False)
        if since:
            qs = qs.filter(started_at__gte=_parse_date(since, "--since"))
        if run is not None:
            qs = qs.filter(step__run_id=run)
        ids = list(qs.order_by("id").values_list("id", flat=True))
        repricer = Repricer()
        totals: _Totals = {"attempts": 0, "steps": 0, "runs": set(), "skipped": 0, "delta": Decimal(0)}
        for start in range(0, len(ids), batch_size):
            summary = recompute_batch(ids[start : start + batch_size], repricer, dry_run=dry_run)
            totals["attempts"] += summary["attempts"]
            totals["steps"] += summary["steps"]
            totals["skipped"] += summary["skipped"]
            totals["runs"] |= set(summary["runs"])
            totals["delta"] += sum(summary["runs"].values(), Decimal(0))
        verb = "would change" if dry_run else "changed"
        self.stdout.write(
            f"{len(ids)} attempt(s) with usage; {verb} {totals['attempts']} attempt(s), {totals['steps']} step(s), "
            f"{len(totals['runs'])} run(s); total cost delta {format_usd(totals['delta'])}"
            + (f"; {totals['skipped']} skipped (provider not registered)" if totals["skipped"] else "")
        )
