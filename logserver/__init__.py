"""logserver."""
