"""The built app loads in a real browser: sign in, the home page mounts its React component."""
import pytest
from django.contrib.auth.models import User

from tests.support.browser import screenshot, sign_in

pytestmark = pytest.mark.django_db(transaction=True)


def test_sign_in_and_home_mounts(live_server, page):
    User.objects.create_user("ada", password="pw-ada-1")
    page.goto(f"{live_server.url}/")
    assert "/accounts/login/" in page.url
    sign_in(page, live_server.url, "ada", "pw-ada-1")
    page.locator("#app h1").wait_for()
    screenshot(page, "home")
