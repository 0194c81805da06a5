"""What every screen and widget builds on: the app as screens see it, background jobs, messages, and keys."""
