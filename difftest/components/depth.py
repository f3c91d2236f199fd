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
    lean_targets = ("KimiK3.Exec.Kernel",)
    lean_default = True  # the executable spec (KimiK3.Exec)
    kinds = ("random", "saturate", "tiny", "tie")
    default_sizes = {"D": 24, "L": 5, "B": 3}
    graph_file = "attnres_tiny.json"  # one retrieval over 3 sources (branch `depth`); used where 3 are read

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
        out = {"h_seq": to_np(torch.stack(h_seq)), "h_chan": to_np(torch.stack(h_chan)), "final": to_np(final)}
        return {"torch": self.graph_rows(case, out)}

    def graph_fits(self, case):
        return case.sizes["D"] == self.default_sizes["D"]

    def source_lists(self, case) -> list[tuple[str, int, list[np.ndarray], np.ndarray]]:
        """Every retrieval of the case as (output, row, sources, query), with the commit rule
        of k3-spec §2.5 replayed in numpy (an independent bookkeeping of the depth state)."""
        t, B = case.tensors, case.sizes["B"]
        blocks, partial, count, out = [t["embedding"]], None, 0, []
        for layer in range(case.sizes["L"]):
            out.append(("h_seq", layer, blocks + ([partial] if count else []), t["w_seq"][layer]))
            after = t["seq_out"][layer] if count == 0 else partial + t["seq_out"][layer]
            out.append(("h_chan", layer, [*blocks, after], t["w_chan"][layer]))
            partial, count = after + t["chan_out"][layer], count + 1
            if count == B:
                blocks, partial, count = [*blocks, partial], None, 0
        out.append(("final", -1, blocks + ([partial] if count else []), t["w_final"]))
        return out

    def numpy_outputs(self, case):
        """Report Eq. 9–10 in plain NumPy on the replayed depth state (float64)."""
        eps = float(case.tensors["eps"])
        out: dict[str, list] = {"h_seq": [], "h_chan": [], "final": []}
        for output, _, sources, query in self.source_lists(case):
            v = np.stack(sources)
            scores = (v / np.sqrt(np.mean(v * v, axis=-1, keepdims=True) + eps)) @ query
            w = np.exp(scores - scores.max())
            out[output].append((w / w.sum()) @ v)
        res = {"h_seq": np.stack(out["h_seq"]), "h_chan": np.stack(out["h_chan"]), "final": out["final"][0]}
        return self.graph_rows(case, res)

    def graph_outputs(self, case, dtype, device):
        """The export retrieves over exactly as many sources as it was exported for; the
        retrievals of the case that read that many are compared (key `<output>_g`)."""
        from difftest.components.channel import compiled

        cg = compiled(self.graph_file, dtype, device)
        n = cg.graph.inputs[0].shape[0]
        rows: dict[str, list[np.ndarray]] = {}
        for output, _, sources, query in self.source_lists(case):
            if len(sources) == n:
                r = cg({"query": t64(query), "norm_gain": torch.ones(len(query), dtype=torch.float64)},
                       {"values": t64(np.stack(sources))})
                rows.setdefault(f"{output}_g", []).append(to_np(r["output"]))
        return {k: np.stack(v) for k, v in rows.items()}

    def graph_rows(self, case, out: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The rows of `out` that the graph computes (retrievals over its number of sources)."""
        if not self.graph_available(case):
            return out
        from difftest.components.channel import compiled

        n = compiled(self.graph_file, torch.float64, "cpu").graph.inputs[0].shape[0]
        rows: dict[str, list[np.ndarray]] = {}
        for output, row, sources, _ in self.source_lists(case):
            if len(sources) == n:
                rows.setdefault(f"{output}_g", []).append(out[output] if row < 0 else out[output][row])
        return {**out, **{k: np.stack(v) for k, v in rows.items()}}

    def lean_postprocess(self, case, out):
        return self.graph_rows(case, out)

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
