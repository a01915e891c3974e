"""make up's last line says how to sign in: serve prints the admin login right after
"Ballast is up" (the password create_login printed is 20 lines up, among npm's and vite's output)."""
from __future__ import annotations

from pathlib import Path

import pytest

from runs.management.commands.serve import ready_lines


@pytest.fixture
def var_dir(tmp_path: Path, settings) -> Path:
    settings.VAR_DIR = tmp_path
    return tmp_path


def test_the_ready_line_is_followed_by_the_login(var_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BALLAST_ADMIN_USER", raising=False)
    (var_dir / "admin-password.txt").write_text("s3cret-Pw\n")
    lines = ready_lines("127.0.0.1:8000")
    assert lines[0].startswith("Ballast is up: http://127.0.0.1:8000/")
    assert lines[-1] == f"Sign in as admin / s3cret-Pw  (kept in {var_dir / 'admin-password.txt'})"


def test_without_the_password_file_it_says_how_to_set_one(var_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BALLAST_ADMIN_USER", "root")
    last = ready_lines("0.0.0.0:9000")[-1]
    assert last.startswith("Sign in as root ") and "manage.py changepassword root" in last
