"""`python -m k3spec`: the `k3spec` command (runs this checkout's code, not an installed copy)."""

from .cli import main

main()
