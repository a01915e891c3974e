"""Every main page works under the Content-Security-Policy the app sends (ballast/csp.py):
the header is there, Chromium reports no violation (``securitypolicyviolation`` events,
console CSP errors) while each page loads and draws, and the builder and the run page are
screenshotted under it (artifacts/csp-*.png)."""
from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import Page

from ballast.csp import POLICY
from tests.support.browser import screenshot, sign_in
from tests.support.specs import chain, graph, node, publish, run_local, transform

pytestmark = pytest.mark.django_db(transaction=True)

# Installed before any page script: records every violation the page's document reports.
RECORD_VIOLATIONS = """
window.__csp = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.__csp.push({directive: e.violatedDirective, blocked: e.blockedURI, sample: e.sample});
});
"""


def test_every_main_page_loads_under_the_policy_with_no_violation(live_server: Any, page: Page) -> None:
    User.objects.create_superuser("ada", "ada@localhost", "pw-ada-csp-1")
    version = publish(graph([node("start", "start"), transform("double", y="2"), node("end", "end")], chain("start", "double", "end")))
    run = run_local(version)
    console: list[str] = []
    page.on("console", lambda msg: console.append(msg.text) if "Content Security Policy" in msg.text else None)
    page.add_init_script(RECORD_VIOLATIONS)
    sign_in(page, live_server.url, "ada", "pw-ada-csp-1")
    pages = {
        "graphs": "/graphs/",
        "builder": f"/graphs/{version.graph_id}/",
        "run": f"/runs/{run.pk}/",
        "approvals": "/approvals/",
        "costs": "/costs/",
        "audit": "/audit/",
    }
    seen: dict[str, Any] = {}
    for name, path in pages.items():
        response = page.goto(f"{live_server.url}{path}")
        assert response is not None and response.headers.get("content-security-policy") == POLICY, name
        page.locator("#app h1, #app .react-flow").first.wait_for()
        page.wait_for_load_state("networkidle")
        if name in ("builder", "run"):
            screenshot(page, f"csp-{name}")
        seen[name] = page.evaluate("window.__csp")
    # The builder's forms validate with ajv, which compiles schemas with new Function():
    # starting a run from the builder's Run dialog validates its input form under the policy.
    page.goto(f"{live_server.url}/graphs/{version.graph_id}/")
    page.get_by_role("button", name="Run", exact=True).click()
    page.get_by_role("dialog").get_by_role("button", name="Start run").click()
    page.wait_for_url(re.compile(r"/runs/\d+/$"))
    seen["run dialog"] = page.evaluate("window.__csp")
    assert seen == {name: [] for name in [*pages, "run dialog"]}, seen
    assert console == [], console
    # The listener does see a violation: an injected inline script is blocked and reported.
    page.evaluate("() => { const s = document.createElement('script'); s.textContent = 'window.__ran = 1'; document.body.appendChild(s); }")
    page.wait_for_function("window.__csp.length > 0")
    assert page.evaluate("window.__csp")[0]["directive"].startswith("script-src")
    assert page.evaluate("window.__ran") is None
