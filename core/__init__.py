"""Ground-floor code every app may use: it imports no app (errors, field paths, the API base)."""
