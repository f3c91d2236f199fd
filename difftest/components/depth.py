"""Block Attention Residuals: retrieval and the per-layer commit (k3-spec §2.4–2.5), N tokens."""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from difftest import numpy_ref as ref
from difftest.case import Case
from difftest.components.base import F64, ErrorModel, ExecComponent, LowpCheck, compiled, round_to, rounded, t64, to_np
from difftest.inputs import gaussian, magnitude
from pybridge import attnres


class AttnResComponent(ExecComponent):
    name = "attnres"
    summary = "AttnRes depth state over L layers, N tokens (Lean BlockState.retrieve/finishLayer; attnres.retrieve, DepthState)"
    template = "attnres"
    kinds = {
        "random": "unit-scale layer outputs and queries",
        "sharp": "queries ×10: peaked depth softmax",
        "tie": "equal sources: equal scores, the mix must return the common value",
        "small": "layer outputs ×1e-3",
        "large": "layer outputs ×1e3",
        "eps": "sources of RMS ~√ε: the RMSNorm ε dominates the scores",
    }
    default_sizes = {"D": 24, "L": 5, "B": 3, "N": 2}
    graph_file = "attnres_tiny.json"  # one retrieval over 3 sources; used where 3 are read

    def sizes_for_kind(self, kind, thorough=False):
        return {**self.default_sizes, "L": 13, "B": 4} if thorough else dict(self.default_sizes)

    def shrink_sizes(self, sizes):
        return [{**sizes, "D": d, "L": l, "N": 1} for d, l in ((2, 1), (4, 2), (8, 4)) if d < sizes["D"] and l <= sizes["L"]]

    def sample(self, rng, kind, sizes):
        D, L, n = sizes["D"], sizes["L"], sizes["N"]
        scale = magnitude(kind) * (np.sqrt(self.own_config()["attn_res_eps"]) if kind == "eps" else 1.0)
        seq_out = gaussian(rng, (L, n, D), scale)
        chan_out = gaussian(rng, (L, n, D), scale)
        embedding = gaussian(rng, (n, D), scale)
        if kind == "tie":
            seq_out[:] = seq_out[0]
            chan_out[:] = 0.0
            embedding = seq_out[0].copy()
        q = 10.0 if kind == "sharp" else 1.0
        return {"embedding": embedding, "seq_out": seq_out, "chan_out": chan_out,
                "w_seq": gaussian(rng, (L, D), q), "w_chan": gaussian(rng, (L, D), q), "w_final": gaussian(rng, (D,), q)}

    def torch_outputs(self, case, dtype, device):
        t = {k: t64(v).to(device=device, dtype=dtype) for k, v in case.tensors.items()}
        eps = self.torch_eps()
        depth = attnres.DepthState([t["embedding"]], block_size=case.sizes["B"])
        h_seq, h_chan = [], []
        for layer in range(case.sizes["L"]):
            h_seq.append(attnres.retrieve(depth.sources(), t["w_seq"][layer], eps))
            h_chan.append(attnres.retrieve(depth.add_sequence_output(t["seq_out"][layer]), t["w_chan"][layer], eps))
            depth.finish_layer(t["chan_out"][layer])
        final = attnres.retrieve(depth.sources(), t["w_final"], eps)
        out = {"h_seq": to_np(torch.stack(h_seq)), "h_chan": to_np(torch.stack(h_chan)), "final": to_np(final)}
        return {"torch": self.graph_rows(case, out)}

    @staticmethod
    def torch_eps() -> float:
        from difftest.components.base import torch_config

        return torch_config().attn_res_norm_eps

    def source_lists(self, case: Case, row: int) -> list[tuple[str, int, list[np.ndarray], np.ndarray]]:
        """Every retrieval of token `row` as (output, layer, sources, query), with the commit rule
        of k3-spec §2.5 replayed in NumPy (an independent bookkeeping of the depth state)."""
        t = case.tensors
        depth, out = ref.Depth([t["embedding"][row]]), []
        for layer in range(case.sizes["L"]):
            out.append(("h_seq", layer, depth.sources(), t["w_seq"][layer]))
            out.append(("h_chan", layer, depth.with_sequence_output(t["seq_out"][layer, row]), t["w_chan"][layer]))
            depth.finish(t["chan_out"][layer, row], case.sizes["B"])
        out.append(("final", -1, depth.sources(), t["w_final"]))
        return out

    def numpy_outputs(self, case):
        """Report Eq. 9–10 in plain NumPy on the replayed depth state (float64)."""
        eps, ones = self.own_config()["attn_res_eps"], np.ones(case.sizes["D"])
        rows: dict[str, list] = {"h_seq": [], "h_chan": [], "final": []}
        for row in range(case.sizes["N"]):
            per: dict[str, list] = {"h_seq": [], "h_chan": [], "final": []}
            for output, _, sources, query in self.source_lists(case, row):
                per[output].append(ref.retrieve(np.stack(sources), query, ones, eps))
            for k, v in per.items():
                rows[k].append(np.stack(v))
        res = {"h_seq": np.stack(rows["h_seq"], 1), "h_chan": np.stack(rows["h_chan"], 1), "final": np.stack(rows["final"])[:, 0]}
        return self.graph_rows(case, res)

    def graph_fits(self, case):
        return case.sizes["D"] == self.default_sizes["D"]

    def graph_outputs(self, case, device):
        """The export retrieves over exactly as many sources as it was exported for; the
        retrievals of the case that read that many are compared (key `<output>_g`)."""
        cg = compiled(self.graph_file, F64, device)
        n = cg.graph.inputs[0].shape[0]
        rows: dict[str, list[np.ndarray]] = {}
        for row in range(case.sizes["N"]):
            for output, _, sources, query in self.source_lists(case, row):
                if len(sources) == n:
                    r = cg({"query": t64(query), "norm_gain": torch.ones(len(query), dtype=F64)}, {"values": t64(np.stack(sources))})
                    rows.setdefault(f"{output}_g", []).append(to_np(r["output"]))
        return {k: np.stack(v) for k, v in rows.items()}

    def graph_rows(self, case, out: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """`out` plus the rows the graph computes (retrievals over its number of sources)."""
        if not self.graph_available(case):
            return out
        n = compiled(self.graph_file, F64, "cpu").graph.inputs[0].shape[0]
        rows: dict[str, list[np.ndarray]] = {}
        for row in range(case.sizes["N"]):
            for output, layer, sources, _ in self.source_lists(case, row):
                if len(sources) == n:
                    rows.setdefault(f"{output}_g", []).append(out[output][row] if layer < 0 else out[output][layer, row])
        return {**out, **{k: np.stack(v) for k, v in rows.items()}}

    def lean_case(self, case):
        t = case.tensors
        return dataclasses.replace(case, sizes={**case.sizes, "N": 1}, tensors={
            **t, "embedding": t["embedding"][0], "seq_out": t["seq_out"][:, 0], "chan_out": t["chan_out"][:, 0]})

    def lean_slice(self, case, out):
        """Token 0 of the outputs a leg has (the graph leg has only its `<output>_g` rows, the
        retrievals over its exported source count, which the Lean view does not name)."""
        cols = {"h_seq": lambda v: v[:, 0], "h_chan": lambda v: v[:, 0], "final": lambda v: v[0]}
        return {k: f(out[k]) for k, f in cols.items() if k in out}

    def lean_output_shapes(self, case):
        D, L = case.sizes["D"], case.sizes["L"]
        return {"h_seq": (L, D), "h_chan": (L, D), "final": (D,)}

    def lowp_checks(self, case, dtype, device):
        """Each retrieval on the reference's own sources at that point (the NumPy depth state of
        the rounded case, each source rounded to the storage dtype) and the rounded query."""
        rc = rounded(case, dtype)
        eps, torch_eps, ones = self.own_config()["attn_res_eps"], self.torch_eps(), np.ones(case.sizes["D"])
        got: dict[str, list] = {}
        want: dict[str, list] = {}
        for row in range(case.sizes["N"]):
            for output, _, sources, query in self.source_lists(rc, row):
                stored = [round_to(s, dtype) for s in sources]
                want.setdefault(output, []).append(ref.retrieve(np.stack(stored), query, ones, eps))
                got.setdefault(output, []).append(to_np(attnres.retrieve(
                    [t64(s).to(device=device, dtype=dtype) for s in stored], t64(query).to(device=device, dtype=dtype), torch_eps)))
        model = self.retrieval_model(case.sizes)
        return [LowpCheck("torch", "numpy", k, np.stack(got[k]), np.stack(want[k]), model) for k in got]

    def retrieval_model(self, sizes) -> ErrorModel:
        """One retrieval over at most 2 + L/B sources: RMSNorm (D), score dot (D), softmax over the
        sources, the mix; the softmax turns absolute score errors into relative weight errors
        times 2 (scores are O(√D) for unit queries)."""
        sources = 2 + sizes["L"] // sizes["B"]
        return ErrorModel(stores=12, accum=2 * sizes["D"] + 2 * sources, amp=4.0)

    def error_model(self, sizes):
        # a retrieval (above) on sources whose partial sums add up to B layers
        r = self.retrieval_model(sizes)
        return ErrorModel(stores=r.stores + sizes["B"], accum=r.accum + sizes["B"], amp=r.amp)
