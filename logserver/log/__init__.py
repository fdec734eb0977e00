"""logserver/log."""
