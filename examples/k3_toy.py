"""A toy implementation of two K3 components, written as a user would, with its difftest adapter.

`ToyK3` implements `kda_recurrence` (a plain token loop) and `expert` (the SiTU expert) in
torch; `adapter` is what `difftest run --impl k3_toy:adapter` and `pytest --k3-impl k3_toy:adapter`
check. Computes in float64 for float64 inputs and in float32 otherwise.
"""

from __future__ import annotations

import torch

from difftest.adapters import Call, NotCovered


def kda_loop(q, k, v, alpha, beta, state):
    """S ← (I − β k kᵀ) Diag(α) S + β k vᵀ, o = Sᵀ q, per batch row and head, token by token."""
    outs = []
    for t in range(q.shape[1]):
        decayed = alpha[:, t, :, :, None] * state
        kt, bt = k[:, t], beta[:, t, :, None]
        correction = torch.einsum("bhk,bhkv->bhv", kt, decayed)
        state = decayed + bt[..., None] * kt[..., None] * (v[:, t] - correction)[:, :, None, :]
        outs.append(torch.einsum("bhk,bhkv->bhv", q[:, t], state))
    return torch.stack(outs, 1), state


def situ_expert(x, gate_w, up_w, down_w, gate_cap, up_cap):
    g, u = x @ gate_w, x @ up_w
    return (gate_cap * torch.tanh(g / gate_cap) * torch.sigmoid(g) * up_cap * torch.tanh(u / up_cap)) @ down_w


class ToyK3:
    name = "toy"
    description = "examples/k3_toy.py: a plain-torch KDA recurrence and SiTU expert"
    mla = NotCovered("the toy has no attention")

    @staticmethod
    def _work(call: Call) -> torch.dtype:
        return torch.float64 if call.dtype == torch.float64 else torch.float32

    def kda_recurrence(self, call: Call) -> dict[str, torch.Tensor]:
        w = self._work(call)
        t = {name: x.to(w) for name, x in call.tensors.items()}
        o, state = kda_loop(t["q"], t["k"], t["v"], t["retention"], t["beta"], t["state"])
        return {"o": o.to(call.dtype), "state": state}

    def expert(self, call: Call) -> dict[str, torch.Tensor]:
        w, cfg = self._work(call), call.config()
        t = {name: x.to(w) for name, x in call.tensors.items()}
        y = situ_expert(t["x"], t["gateWeight"], t["upWeight"], t["downWeight"], cfg.situ_gate_cap, cfg.situ_up_cap)
        return {"y": y.to(call.dtype)}


adapter = ToyK3()
