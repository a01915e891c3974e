"""Every selector the live run-page tests use, in one place, so they follow the page when it changes.

The run page shows the run's graph (a read-only canvas, each node's card named "node <id>:
<state>"), a timeline and a step inspector, and below them a step table (one row per step;
the status cell carries ``data-node``), a heading with the run's status badge, a "Live" /
"Reconnecting…" status line and the event log (``table[aria-label='Run events']``, one row
per event with ``data-seq``). The tests read a step's state from the step table (every step,
child steps too, is a row there, while the canvas marks only graph nodes);
:meth:`RunPageView.canvas_node` reads a node's card on the canvas.
"""
from __future__ import annotations

from playwright.sync_api import Locator, Page

from tests.support.browser import PATIENT_MS

# Generous ceilings for live updates on a loaded 2-core CI machine: expect() polls and
# returns as soon as the page shows the state, so a long ceiling costs nothing when all is well.
LIVE_TIMEOUT_MS = PATIENT_MS


class RunPageView:
    """The run page of run ``run_id`` as the tests read it (Playwright locators only)."""

    def __init__(self, page: Page, base_url: str, run_id: int) -> None:
        self.page = page
        self.base_url = base_url
        self.run_id = run_id

    @property
    def url(self) -> str:
        return f"{self.base_url}/runs/{self.run_id}/"

    def open(self) -> RunPageView:
        self.page.goto(self.url)
        return self

    # ------------------------------------------------------------------ the run

    def heading(self) -> Locator:
        """The page heading: "Run #<id>" and the run's status badge ("running", "interrupted", ...)."""
        return self.page.get_by_role("heading", name=f"Run #{self.run_id}")

    def interrupted_notice(self) -> Locator:
        """The notice shown while a running step's worker has stopped heartbeating."""
        return self.page.get_by_role("status").filter(has_text="Interrupted.")

    def connection(self, text: str) -> Locator:
        """The live-connection line when it reads ``text`` ("Live", "Reconnecting")."""
        return self.page.get_by_role("status").filter(has_text=text)

    # ------------------------------------------------------------------ steps (nodes)

    def node_state(self, node_id: str) -> Locator:
        """Where the state of ``node_id``'s step is shown (its status badge)."""
        return self.page.locator(f"td[data-node='{node_id}']")

    def canvas_node(self, node_id: str, state: str) -> Locator:
        """``node_id``'s card on the canvas while it shows ``state`` (pending, running, interrupted, ...)."""
        return self.page.get_by_role("group", name=f"node {node_id}: {state}", exact=True)

    def node_row(self, node_id: str) -> Locator:
        """Everything the page shows about ``node_id``'s step."""
        return self.page.locator("tr", has=self.node_state(node_id))

    def node_attempts(self, node_id: str) -> Locator:
        """The step's attempt count as shown ("1 / 3": attempt number / max attempts)."""
        return self.node_row(node_id).locator("td").nth(3)

    # ------------------------------------------------------------------ the event log

    def event_rows(self) -> Locator:
        return self.page.locator("table[aria-label='Run events'] tbody tr")

    def shown_seqs(self) -> list[int]:
        """The seq of every event row, top to bottom."""
        return [int(v) for v in self.event_rows().evaluate_all("rows => rows.map(r => r.dataset.seq)")]

    def event_text(self, text: str) -> Locator:
        return self.page.locator("table[aria-label='Run events']").get_by_text(text)

    # ------------------------------------------------------------------ no reload

    def mark_loaded(self) -> None:
        """Tag this document; :meth:`not_reloaded` is true while the same document is shown."""
        self.page.evaluate("window.__notReloaded = true")

    def not_reloaded(self) -> bool:
        return self.page.evaluate("window.__notReloaded === true") is True
