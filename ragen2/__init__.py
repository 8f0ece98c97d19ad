"""ragen2."""
