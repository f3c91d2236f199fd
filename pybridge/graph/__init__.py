"""Exported Lean graphs (`k3spec.graph.v1`): loader, torch.fx compiler, reference interpreter."""
