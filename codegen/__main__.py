"""Entry point for `python -m codegen`."""

from .cli import main

main()
