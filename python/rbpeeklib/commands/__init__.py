"""The `ruby ...` commands, written once for both debuggers (see base.py)."""
