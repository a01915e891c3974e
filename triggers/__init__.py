"""Webhook triggers: a graph's runs started by signed HTTP deliveries (issue 26, item 1)."""
