"""Tooling for the KimiK3 Lean library: toolchain install, `lean` wrapper, incremental build."""
