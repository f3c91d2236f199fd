"""Code generation around the Lean core: export typed graphs to JSON and run Lean checks.

The offline Lean interpreter can only run code defined in the file it elaborates (not code of
imported modules), so every run here elaborates one generated file: the sources of the
executable Lean modules (`bundle.py`) followed by generated `#eval` commands (`export.py`).
"""
