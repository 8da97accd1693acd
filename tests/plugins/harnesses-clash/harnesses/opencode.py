class OpenCode:
    """Not a benchctl harness."""
