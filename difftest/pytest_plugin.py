"""pytest plugin (entry point `pytest11`): check an implementation of K3 components in a test suite.

    pytest --k3-impl my_pkg.k3:adapter      # one test per component the adapter implements
    pytest --k3-impl my_pkg.k3:adapter --k3-dtype float32

or, in a test, the `k3spec_conforms` fixture (`difftest.adapters.conform.conforms`):

    def test_my_kda(k3spec_conforms):
        k3spec_conforms("kda_recurrence", "my_pkg.k3:adapter", dtype="float32")

A failure's message is difftest's verdict with the shrunk reproducer (README, "Check your
implementation").
"""

from __future__ import annotations

from collections.abc import Callable

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("k3spec", "K3 spec conformance (difftest.adapters)")
    group.addoption("--k3-impl", action="append", default=[], metavar="SPEC",
                    help="check this implementation (package.module:object, entry point or built-in name) "
                         "on every component it implements")
    group.addoption("--k3-dtype", action="append", default=[], metavar="DTYPE",
                    help="dtype(s) of --k3-impl checks (default: those the adapter declares)")
    group.addoption("--k3-cases", type=int, default=None, metavar="N",
                    help="cases per component of --k3-impl checks (default: one of each input kind)")


@pytest.fixture
def k3spec_conforms(tmp_path) -> Callable[..., None]:
    """`conforms(component, impl, dtype=..., cases=...)`, its reports under the test's tmp_path."""
    from difftest.adapters.conform import conforms

    def check(component: str, impl, **kwargs) -> None:
        kwargs.setdefault("report_dir", tmp_path / "k3spec")
        conforms(component, impl, **kwargs)

    return check


class ConformanceItem(pytest.Item):
    """One component of one `--k3-impl` implementation."""

    def __init__(self, *, spec: str, component: str, **kwargs):
        super().__init__(**kwargs)
        self.spec, self.component = spec, component

    def runtest(self) -> None:
        from difftest.adapters.conform import conforms

        opt = self.config.option
        conforms(self.component, self.spec, dtype=opt.k3_dtype or None, cases=opt.k3_cases)

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, AssertionError):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style)

    def reportinfo(self):
        return self.path, None, f"k3spec {self.spec} {self.component}"


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    from difftest.adapters import AdapterError, load

    for spec in config.option.k3_impl:
        try:
            impl = load(spec)
        except AdapterError as exc:
            raise pytest.UsageError(f"--k3-impl: {exc}") from exc
        for component in impl.covered():
            items.append(ConformanceItem.from_parent(session, name=f"k3spec[{impl.name}-{component}]",
                                                     spec=spec, component=component))
