"""Block Attention Residuals: retrieval and the per-layer commit (k3-spec §2.4–2.5)."""

from __future__ import annotations

import numpy as np
import torch

from difftest.components.base import TINY_CONFIG, Component, ErrorModel, t64, to_np
from difftest.inputs import gaussian, scale_for_kind
from pybridge import attnres
from pybridge.config import load_config


class AttnResComponent(Component):
    name = "attnres"
    summary = "AttnRes depth state over L layers (Lean BlockState.retrieve/finishLayer; attnres.retrieve, DepthState)"
    template = "attnres"
    lean_targets = ("KimiK3.Depth.Kernel",)
    kinds = ("random", "saturate", "tiny", "tie")
    default_sizes = {"D": 24, "L": 5, "B": 3}
    graph_file = None  # hook: fixtures/graphs/attnres_tiny.json (depth helper) joins here

    def shrink_sizes(self, sizes):
        return [{**sizes, "D": d, "L": l} for d, l in ((2, 1), (4, 2), (8, 4)) if d < sizes["D"] and l <= sizes["L"]]

    def sample(self, rng, kind, sizes):
        D, L = sizes["D"], sizes["L"]
        cfg = load_config(TINY_CONFIG)
        scale = scale_for_kind(kind)
        seq_out = gaussian(rng, (L, D), scale)
        chan_out = gaussian(rng, (L, D), scale)
        if kind == "tie":  # equal sources: equal scores, the mix must return the common value
            seq_out[:] = seq_out[0]
            chan_out[:] = 0.0
        # queries: saturate sharpens the depth softmax (scores up to ~10 sqrt(D))
        q = 10.0 if kind == "saturate" else 1.0
        return {
            "embedding": gaussian(rng, (D,), scale) if kind != "tie" else seq_out[0].copy(),
            "seq_out": seq_out, "chan_out": chan_out,
            "w_seq": gaussian(rng, (L, D), q), "w_chan": gaussian(rng, (L, D), q), "w_final": gaussian(rng, (D,), q),
            "eps": np.array(cfg.rms_norm_eps),
        }

    def torch_outputs(self, case, dtype, device):
        t = {k: t64(v).to(device=device, dtype=dtype) for k, v in case.tensors.items()}
        eps = float(case.tensors["eps"])
        depth = attnres.DepthState([t["embedding"]], block_size=case.sizes["B"])
        h_seq, h_chan = [], []
        for layer in range(case.sizes["L"]):
            h_seq.append(attnres.retrieve(depth.sources(), t["w_seq"][layer], eps))
            h_chan.append(attnres.retrieve(depth.add_sequence_output(t["seq_out"][layer]), t["w_chan"][layer], eps))
            depth.finish_layer(t["chan_out"][layer])
        final = attnres.retrieve(depth.sources(), t["w_final"], eps)
        return {"torch": {"h_seq": to_np(torch.stack(h_seq)), "h_chan": to_np(torch.stack(h_chan)), "final": to_np(final)}}

    def lean_output_shapes(self, case):
        D, L = case.sizes["D"], case.sizes["L"]
        return {"h_seq": (L, D), "h_chan": (L, D), "final": (D,)}

    def error_model(self, sizes):
        D, L, B = sizes["D"], sizes["L"], sizes["B"]
        sources = 2 + L // B
        # RMSNorm (D), score dot (D), softmax over the sources, the mix (sources); partial sums
        # add up to B layers; the softmax turns absolute score errors into relative weight
        # errors times 2 (scores are O(sqrt(D)) for unit queries)
        return ErrorModel(stores=12 + B, accum=2 * D + 2 * sources + B, amp=4.0)
