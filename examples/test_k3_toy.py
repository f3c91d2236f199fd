"""The README's example: checking an implementation in its own test suite (difftest's pytest plugin).

    pytest -p difftest.pytest_plugin examples/test_k3_toy.py     # (the plugin loads itself once installed)
"""

from k3_toy import adapter


def test_toy_kda_recurrence(k3spec_conforms):
    k3spec_conforms("kda_recurrence", adapter, dtype=["float64", "float32"], cases=1)


def test_toy_expert(k3spec_conforms):
    k3spec_conforms("expert", "k3_toy:adapter", cases=2)
