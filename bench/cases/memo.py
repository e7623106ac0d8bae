"""Two-session cases."""
