"""A stand-in for an external messaging service: a JSON-lines file that deduplicates messages by idempotency key, as a real API does with an Idempotency-Key header.

Each line is ``{"message_id", "channel", "text", "idempotency_key"}`` (a message sent) or
``{"reply_to", "text"}`` (a reply someone wrote). The file is ``BALLAST_EXAMPLE_OUTBOX``,
else ``var/example-outbox.jsonl``; any process that can read it sees the same service.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from django.conf import settings


def path() -> Path:
    """The outbox file: ``BALLAST_EXAMPLE_OUTBOX``, else ``var/example-outbox.jsonl``."""
    return Path(os.environ.get("BALLAST_EXAMPLE_OUTBOX") or Path(settings.VAR_DIR) / "example-outbox.jsonl")


def entries() -> list[dict[str, Any]]:
    """Every line of the outbox, oldest first (an empty list when there is no file)."""
    try:
        text = path().read_text()
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def send(channel: str, text: str, *, idempotency_key: str) -> dict[str, Any]:
    """Send ``text`` to ``channel`` once per ``idempotency_key``.

    Returns ``{"message_id": str, "duplicate": bool}``: a key seen before returns the first
    message's id with ``duplicate`` true and sends nothing, as a payment or messaging API
    answers a repeated Idempotency-Key. The check and the write hold a file lock, so two
    processes sending with one key send once."""
    message_id = "msg_" + hashlib.sha256(idempotency_key.encode()).hexdigest()[:16]
    target = path()
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        fh.seek(0)
        for line in fh:
            if line.strip() and json.loads(line).get("idempotency_key") == idempotency_key:
                return {"message_id": message_id, "duplicate": True}
        record = {"message_id": message_id, "channel": channel, "text": text, "idempotency_key": idempotency_key}
        fh.write(json.dumps(record) + "\n")
        fh.flush()
    return {"message_id": message_id, "duplicate": False}


def reply(message_id: str, text: str) -> None:
    """Write a reply to ``message_id`` (what a person in the channel would do)."""
    target = path()
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        fh.write(json.dumps({"reply_to": message_id, "text": text}) + "\n")


def reply_to(message_id: str) -> str | None:
    """The first reply to ``message_id``, or None while there is none."""
    for entry in entries():
        if entry.get("reply_to") == message_id:
            return str(entry["text"])
    return None
