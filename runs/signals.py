"""Signals the engine sends inside its transactions, for apps that runs must not import."""
from django.dispatch import Signal

# Sent inside the transaction that moves a run to a terminal status (kwargs: run, status).
run_finished = Signal()
