"""Differential testing of the Lean reference, exported graphs and the PyTorch K3 model."""
