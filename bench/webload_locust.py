"""The locustfile of ``python -m bench web`` (bench/webload.py): one simulated user loads one
page of the browser app over and over, with no think time (a closed loop: each user sends
its next request when the last one answered), issuing the API reads the page makes.

Run by bench.webload in a process of its own (``locust --headless``); it never imports
Django. Read from the environment:

- ``BENCH_WEB_PAGE``: ``run_list``, ``inbox`` or ``run_page``;
- ``BENCH_WEB_TOKEN``: the API token every user sends (``Authorization: Token``);
- ``BENCH_WEB_RUNS``: run ids the run page picks from, ``id:w`` for a run waiting at a gate
  (the page then also reads its approvals).

Every page reads ``approvals/inbox/counts/`` as the top bar does. Requests are named by
route (``/api/v1/runs/<id>/``), so locust's per-name rows are per endpoint.
"""
from __future__ import annotations

import os
import random

from locust import FastHttpUser, constant, task

PAGE = os.environ.get("BENCH_WEB_PAGE", "run_list")
TOKEN = os.environ.get("BENCH_WEB_TOKEN", "")
RUNS = [(int(r.split(":")[0]), r.endswith(":w")) for r in os.environ.get("BENCH_WEB_RUNS", "").split(",") if r]


class BrowserUser(FastHttpUser):
    wait_time = constant(0)

    def on_start(self) -> None:
        self.headers = {"Authorization": f"Token {TOKEN}", "Accept": "application/json"}

    def get(self, path: str, name: str, expect: str = "") -> None:
        """GET ``path``; a failure unless it answers 200 with ``expect`` in its body."""
        with self.client.get(path, headers=self.headers, name=name, catch_response=True) as response:
            if response.status_code != 200:
                response.failure(f"{response.status_code}")
            elif expect and expect not in (response.text or ""):
                response.failure(f"no {expect!r} in the body")
            else:
                response.success()

    @task
    def page(self) -> None:
        if PAGE == "run_list":
            self.get("/api/v1/runs/?page_size=50", "/api/v1/runs/", '"results"')
        elif PAGE == "inbox":
            self.get("/api/v1/approvals/inbox/?list=group&page_size=50", "/api/v1/approvals/inbox/", '"results"')
        else:
            run, waiting = random.choice(RUNS)
            self.get(f"/api/v1/runs/{run}/", "/api/v1/runs/<id>/", '"steps"')
            self.get(f"/api/v1/runs/{run}/graph/", "/api/v1/runs/<id>/graph/", '"spec"')
            self.get("/api/v1/node-kinds/", "/api/v1/node-kinds/")
            self.get(f"/api/v1/runs/{run}/actions/", "/api/v1/runs/<id>/actions/")
            if waiting:
                self.get(f"/api/v1/approvals/of-run/{run}/", "/api/v1/approvals/of-run/<id>/")
        self.get("/api/v1/approvals/inbox/counts/", "/api/v1/approvals/inbox/counts/", '"group"')
