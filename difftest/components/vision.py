"""MoonViT-V2 (k3-spec §7, docs/vision.md): the patch embedding, one block, merge-and-project,
the whole encoder over several clips in one batch, and the multimodal prefill.

Legs: `numpy` (`difftest.numpy_vision`, difftest's own reader of `vision_config`), `torch`
(pybridge's `moonvit`, built from the case's spec tensors through `adapter.vision_to_hub`, its
configuration from pybridge's reader), the exported graphs on their clip of 2 frames of 6 × 4
(`vision_embed_tiny`, its bilinear and time inputs from `numpy_vision`; `vision_block_tiny`;
`vision_merge_project_tiny`, the erf GELU a graph node; for `vision_encoder`'s one-clip kind the
embedding, the whole encoder `vision_encoder_tiny` and merge-and-project in a row), the Lean
`Vision.embed` for `vision_embed` (template `vision_embed`), for `vision_block`,
`merge_project` and `vision_encoder` the executable Lean (`Exec.Vision`, templates of the same
names, `--lean-all`), for `vision_encoder` also `torch_reference` (`pybridge.moonvit_reference`,
one clip at a time); `multimodal_prefill` compares NumPy (`numpy_vision` features spliced into
`numpy_ref.Decoder`), torch (`pybridge.multimodal.prefill`) and, on its one-row one-clip kind
`short`, the executable Lean (the encoder as `vision_encoder`'s, then
`Exec.Vision.multimodalPrefillF`; template `multimodal_prefill`, `--lean-all`). Clips are
`(t, h, w)` grids; a case's sizes list them as `t0, h0, w0, t1, …`.

Low precision: each stage of the torch model (the embedding, each block, the final norm,
merge-and-project) on the NumPy reference's own input at that point rounded to the storage dtype,
its output stored once in that dtype, against the NumPy reference on the same rounded values.
"""

from __future__ import annotations

import dataclasses
from functools import cache

import numpy as np
import torch

from difftest import numpy_vision as nv
from difftest.case import Case
from difftest.components.base import (F64, Component, ErrorModel, LowpCheck, compiled, lean_float, round_to, rounded, t64,
                                      to_np, torch_config)
from difftest.inputs import gaussian, magnitude
from pybridge import adapter, moonvit

Grid = tuple[int, int, int]

#: measured Lean times of one bundle offline (`difftest run --component NAME --lean-all --no-cache
#: --dtype float64`, the Lean leg's wall time, quiet 2-core machine, 2026-12-06)
LEAN_NOTE_MERGE = "18.2 s a bundle offline (2 cases: one clip, three clips)"
LEAN_NOTE_ENCODER = "39.9 s a bundle offline (2 cases: five clips of 200 tokens, one of 48)"
LEAN_NOTE_PREFILL = "23.4 s a bundle offline (1 case: one 1-frame 2 × 4 clip, 5 prompt tokens)"
#: `multimodal_prefill`'s kind with a Lean leg: one prompt row, one short clip
LEAN_KIND = "short"


@cache
def vision_cfg() -> dict:
    """difftest's own reading of the tiny `vision_config` (the NumPy and graph legs)."""
    return nv.vision_reading()


def torch_vision():
    """pybridge's reading of the tiny `vision_config` (the torch leg)."""
    return torch_config().vision


def tokens(grids: list[Grid]) -> int:
    return sum(t * h * w for t, h, w in grids)


def grid_sizes(grids: list[Grid]) -> dict[str, int]:
    """The sizes of a case: `N` tokens in all, then each clip's `t{i}, h{i}, w{i}`."""
    return {"N": tokens(grids), **{f"{k}{i}": n for i, g in enumerate(grids) for k, n in zip("thw", g)}}


def grids_of(sizes: dict[str, int]) -> list[Grid]:
    n = sum(1 for k in sizes if k.startswith("t") and k[1:].isdigit())
    return [(sizes[f"t{i}"], sizes[f"h{i}"], sizes[f"w{i}"]) for i in range(n)]


# --- weights ------------------------------------------------------------------------------------

def embed_weights(rng: np.random.Generator, cfg: dict, scale: float = 1.0) -> dict[str, np.ndarray]:
    P, D = cfg["channels"] * cfg["patch"] ** 2, cfg["width"]
    return {"vision.patch_weight": gaussian(rng, (P, D), scale * P ** -0.5),
            "vision.pos_table": gaussian(rng, (cfg["table_rows"], cfg["table_cols"], D), scale)}


def block_weights(rng: np.random.Generator, cfg: dict, i: int, qk: float = 1.0) -> dict[str, np.ndarray]:
    D, A, K, M = cfg["width"], cfg["heads"], cfg["head_dim"], cfg["mlp"]
    pre = f"vision.blocks.{i}."
    return {pre + "norm0.scale": 1.0 + 0.1 * rng.standard_normal(D),
            pre + "attn.query": gaussian(rng, (D, A, K), qk * D ** -0.5),
            pre + "attn.key": gaussian(rng, (D, A, K), qk * D ** -0.5),
            pre + "attn.value": gaussian(rng, (D, A, K), D ** -0.5),
            pre + "attn.output": gaussian(rng, (A, K, D), (A * K) ** -0.5),
            pre + "norm1.scale": 1.0 + 0.1 * rng.standard_normal(D),
            pre + "mlp.fc0": gaussian(rng, (D, M), D ** -0.5),
            pre + "mlp.fc1": gaussian(rng, (M, D), M ** -0.5)}


def projector_weights(rng: np.random.Generator, cfg: dict) -> dict[str, np.ndarray]:
    E, T = cfg["merge"][0] * cfg["merge"][1] * cfg["width"], cfg["text_width"]
    return {"projector.first": gaussian(rng, (E, E), E ** -0.5), "projector.second": gaussian(rng, (E, T), E ** -0.5),
            "projector.post_norm.scale": 1.0 + 0.1 * rng.standard_normal(T)}


def hub_of(spec: dict[str, np.ndarray], dtype: torch.dtype = F64) -> dict[str, torch.Tensor]:
    """The checkpoint-named tensors of the spec tensors present (`adapter.vision_rules`)."""
    rules = [r for r in adapter.vision_rules(torch_vision()) if all(n in spec for n in r.spec)]
    return {k: v.to(dtype) for k, v in adapter.to_hub(rules, {n: t64(spec[n]) for r in rules for n in r.spec}).items()}


def sub_state(hub: dict[str, torch.Tensor], prefix: str) -> dict[str, torch.Tensor]:
    return {k[len(prefix):]: v for k, v in hub.items() if k.startswith(prefix)}


def loaded(module: torch.nn.Module, state: dict[str, torch.Tensor], dtype: torch.dtype, device: str) -> torch.nn.Module:
    module.to(F64).load_state_dict(state)
    return module.to(device=device, dtype=dtype)


def torch_block(spec: dict[str, np.ndarray], i: int, x_nd: torch.Tensor, grids: list[Grid], dtype: torch.dtype,
                device: str) -> torch.Tensor:
    """pybridge's `VisionBlock` i on packed clips (rotary tables and the block-diagonal mask as
    `VisionTower.forward` builds them); weights stored in `dtype`, computed in the compute dtype
    (`x_nd`'s: `MoonViT.encode` runs the tower in `compute_dtype`)."""
    vcfg = torch_vision()
    blk = loaded(moonvit.VisionBlock(vcfg), sub_state(hub_of(spec), f"vision_tower.encoder.blocks.{i}."), dtype, device)
    angles = torch.cat([moonvit.rope_angles(vcfg, h, w).repeat(t, 1) for t, h, w in grids]).to(x_nd)
    return blk(x_nd, angles.cos(), angles.sin(), moonvit.clip_mask(grids, x_nd.device))


def compute(dtype: torch.dtype) -> torch.dtype:
    return torch.promote_types(dtype, torch.float32)


def block_sizes(cfg: dict, grid: Grid) -> dict[str, int]:
    """The sizes of `Exec.Vision.Block` (`D A R V M`: width, heads, `R = K/4` rotary frequencies
    per axis, value width `K`, MLP width) and one clip's grid `t h w`."""
    t, h, w = grid
    K = cfg["head_dim"]
    if K % 4:
        raise ValueError(f"vision_config: head dim {K} is not a multiple of 4 (2-D RoPE needs 4R channels)")
    return {"D": cfg["width"], "A": cfg["heads"], "R": K // 4, "V": K, "M": cfg["mlp"], "t": t, "h": h, "w": w}


def lean_scalars(cfg: dict) -> dict[str, str]:
    """The norms' ε and the RoPE base θ as exact Lean `Float` literals (difftest's own reading of
    `vision_config`, as the NumPy leg uses them)."""
    return {"eps": lean_float(cfg["eps"]), "theta": lean_float(cfg["theta"])}


def lean_clips(cfg: dict, grids: list[Grid]) -> list[dict[str, int]]:
    """Each clip for the Lean templates: frames `t`, merged grid `hp × wp` (`h = hp·mH`,
    `w = wp·mW`) and its first token `start` in the packed batch."""
    kh, kw = cfg["merge"]
    out, start = [], 0
    for i, (t, h, w) in enumerate(grids):
        if h % kh or w % kw:
            raise ValueError(f"clip {i}: grid {h} × {w} is not a multiple of the merge {kh} × {kw}")
        out.append({"t": t, "hp": h // kh, "wp": w // kw, "start": start})
        start += t * h * w
    return out


def merged_tokens(cfg: dict, grids: list[Grid]) -> int:
    kh, kw = cfg["merge"]
    return sum((h // kh) * (w // kw) for _, h, w in grids)


def merge_sizes(cfg: dict, grids: list[Grid]) -> dict:
    """The sizes of `Exec.Vision.mergeProject` (width `D`, text width `T`, merge `mH × mW`) and the
    clips (`lean_clips`)."""
    kh, kw = cfg["merge"]
    return {"D": cfg["width"], "T": cfg["text_width"], "mH": kh, "mW": kw, "clips": lean_clips(cfg, grids)}


class VisionComponent(Component):
    """Shared parts: clips in the sizes, the spec tensors, the torch config."""

    def sizes_for_kind(self, kind, thorough=False):
        return grid_sizes(self.kind_grids[kind])

    kind_grids: dict[str, list[Grid]] = {}

    def own_config(self) -> dict:
        return vision_cfg()


# --- the patch embedding --------------------------------------------------------------------------

def graph_embedding(p: dict[str, np.ndarray], grid: Grid, cfg: dict, device: str) -> torch.Tensor:
    """The exported embedding graph (`vision_embed_tiny.json`: 2 frames of 6 × 4 patches) on the
    case's patches, its bilinear and time inputs from `numpy_vision`, float64."""
    t, h, w = grid
    out = compiled("vision_embed_tiny.json", F64, device)(
        {"patchWeight": t64(p["vision.patch_weight"]), "posTable": t64(p["vision.pos_table"])},
        {"patches": t64(p["patches"]), "rows": t64(nv.bilinear(cfg["table_rows"], h)),
         "cols": t64(nv.bilinear(cfg["table_cols"], w)), "time": t64(nv.time_rows(t, cfg["width"]))})
    return out["embedding"]


class VisionEmbedComponent(VisionComponent):
    name = "vision_embed"
    summary = ("MoonViT patch embedding: patches·W + bilinear position + time (t > 1) (Lean Vision.embed; "
               "graph vision_embed_tiny; moonvit.PatchEmbed)")
    template = "vision_embed"
    lean_targets = ("KimiK3.Exec.Kernel", "KimiK3.Vision.Embed")
    lean_note = "20.0 s a bundle offline (2 cases)"
    kinds = {
        "random": "2 frames of 6 × 4 patches (the graph's grid): both table axes resampled, time term",
        "single": "1 frame: no time term (not the f = 0 row)",
        "frames4": "4 frames (the whole time table) of a non-square 4 × 2 grid",
        "table": "the table's own 4 × 6 grid: the identity map",
        "larger": "10 × 8: larger than the table on both axes",
        "grid64": "a 64 × 64 grid (the paper table's size), 16× and 10.7× upsampling",
        "large": "patches, weights and table ×1e3",
    }
    kind_grids = {"random": [(2, 6, 4)], "single": [(1, 6, 4)], "frames4": [(4, 4, 2)], "table": [(1, 4, 6)],
                  "larger": [(2, 10, 8)], "grid64": [(1, 64, 64)], "large": [(2, 6, 4)]}
    default_sizes = grid_sizes([(2, 6, 4)])
    graph_file = "vision_embed_tiny.json"

    def sample(self, rng, kind, sizes):
        cfg = self.own_config()
        s = magnitude(kind)
        (t, h, w), = grids_of(sizes)
        return {"patches": gaussian(rng, (t * h * w, cfg["channels"] * cfg["patch"] ** 2), s), **embed_weights(rng, cfg, s)}

    def numpy_outputs(self, case):
        return {"embedding": nv.embed(case.tensors, case.tensors["patches"], grids_of(case.sizes)[0], self.own_config())}

    def torch_outputs(self, case, dtype, device):
        return {"torch": {"embedding": to_np(self.torch_embed(case, dtype, device))}}

    def torch_embed(self, case: Case, dtype: torch.dtype, device: str) -> torch.Tensor:
        pe = loaded(moonvit.PatchEmbed(torch_vision()), sub_state(hub_of(case.tensors), "vision_tower.patch_embed."),
                    dtype, device)
        x = t64(case.tensors["patches"]).to(device=device, dtype=compute(dtype))
        return pe(x, grids_of(case.sizes))

    def graph_outputs(self, case, device):
        (grid,) = grids_of(case.sizes)
        return {"embedding": to_np(graph_embedding(case.tensors, grid, self.own_config(), device))}

    def lean_context(self, case):
        cfg = self.own_config()
        (t, h, w), = grids_of(case.sizes)
        return {"g": {"t": t, "h": h, "w": w, "P": cfg["channels"] * cfg["patch"] ** 2, "D": cfg["width"],
                      "m1": cfg["table_rows"], "m2": cfg["table_cols"], "F": cfg["frames"]}}

    def lean_output_shapes(self, case):
        return {"embedding": (tokens(grids_of(case.sizes)), self.own_config()["width"])}

    def lowp_checks(self, case, dtype, device):
        rc = rounded(case, dtype)
        want = self.numpy_outputs(rc)["embedding"]
        return [LowpCheck("torch", "numpy", "embedding", to_np(self.torch_embed(rc, dtype, device)), want,
                          self.error_model(case.sizes))]

    def error_model(self, sizes):
        """Patch dot (P), the two resampling sums (m₁, m₂), the time add: inputs, weight, table,
        the two weight matrices, the row sum, the output. Its output is not stored in the
        storage dtype (`MoonViT.encode` keeps the tower's activations in the compute dtype):
        `out_stores` 0."""
        cfg = self.own_config()
        return ErrorModel(stores=8, accum=cfg["channels"] * cfg["patch"] ** 2 + cfg["table_rows"] + cfg["table_cols"] + 2,
                          amp=1.0, out_stores=0)


# --- one block -------------------------------------------------------------------------------------

def block_model(cfg: dict, n: int) -> ErrorModel:
    """RMSNorm (D), q/k/v (D), RoPE (2 products and a sum), scores (K), softmax over the clip's
    n tokens and the mix (n), the output (A·K), the residual; RMSNorm (D), fc0 (D), GELU_tanh,
    fc1 (M), the residual. amp: the softmax (2) times a norm (2). The tower keeps activations in
    the compute dtype between blocks (`MoonViT.encode`): `out_stores` 0."""
    D, K, A, M = cfg["width"], cfg["head_dim"], cfg["heads"], cfg["mlp"]
    return ErrorModel(stores=18, accum=3 * D + 2 + K + 2 * n + A * K + D + D + M + 2, amp=4.0, out_stores=0)


def graph_block_params(spec: dict[str, np.ndarray], i: int, cfg: dict) -> dict[str, torch.Tensor]:
    """Block `i`'s spec tensors as the block graph's parameters (`BlockGraph.parameters`): the pair
    components of the query and key (channel `2p + j`) as separate `[A, D, 2R]` tensors, the
    values `[A, D, K]`."""
    p = {k.removeprefix(f"vision.blocks.{i}."): t64(v) for k, v in spec.items() if k.startswith(f"vision.blocks.{i}.")}
    A, K = cfg["heads"], cfg["head_dim"]
    qp, kp = (p[n].reshape(-1, A, K // 2, 2).permute(3, 1, 0, 2) for n in ("attn.query", "attn.key"))
    return {"norm0": p["norm0.scale"], "query0": qp[0], "query1": qp[1], "key0": kp[0], "key1": kp[1],
            "value": p["attn.value"].permute(1, 0, 2), "output": p["attn.output"], "norm1": p["norm1.scale"],
            "fc0": p["mlp.fc0"], "fc1": p["mlp.fc1"]}


def graph_rope(grid: Grid, cfg: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """One clip's RoPE tables `[L, 2R]` (cos, sin) from `numpy_vision`, the graphs' inputs."""
    t, h, w = grid
    angles = t64(np.tile(nv.rope_angles(h, w, cfg), (t, 1)))
    return angles.cos(), angles.sin()


class VisionBlockComponent(VisionComponent):
    name = "vision_block"
    summary = ("MoonViT block: x + Attn_RoPE2D(RMSNorm x) over a clip, then x + MLP_GELU(RMSNorm x) "
               "(Lean Exec.Vision.Block.forward; graph vision_block_tiny; moonvit.VisionBlock)")
    #: the array-backed `Exec.Vision.Block.forward` (`Exec/Vision.lean`: equal to the reference
    #: `Vision.Block.forward`); the function-backed reference itself did not finish one block on a
    #: 1-frame 2 × 2 clip in 340 s offline
    template = "vision_block"
    lean_targets = ("KimiK3.Exec.Kernel",)
    lean_note = "20.7 s a bundle offline (2 cases: 48 and 24 tokens)"
    kinds = {
        "random": "2 frames of 6 × 4 patches",
        "single": "1 frame of 4 × 6",
        "frames4": "4 frames of a non-square 2 × 4 grid: one attention over all 32 tokens",
        "larger": "10 × 8 patches (beyond the table; RoPE angles up to 9 rad)",
        "sharp": "query and key weights ×4: peaked attention",
        "large": "block input ×1e3 (the norms take the scale out; the residual keeps it)",
        "eps": "block input of RMS ~√ε: the RMSNorm ε dominates",
    }
    kind_grids = {"random": [(2, 6, 4)], "single": [(1, 4, 6)], "frames4": [(4, 2, 4)], "larger": [(1, 10, 8)],
                  "sharp": [(2, 6, 4)], "large": [(2, 6, 4)], "eps": [(2, 6, 4)]}
    default_sizes = grid_sizes([(2, 6, 4)])

    def sample(self, rng, kind, sizes):
        cfg = self.own_config()
        scale = {"large": 1e3, "eps": np.sqrt(cfg["eps"])}.get(kind, 1.0)
        x = gaussian(rng, (tokens(grids_of(sizes)), cfg["width"]), scale)
        return {"x": x, **block_weights(rng, cfg, 0, 4.0 if kind == "sharp" else 1.0)}

    def numpy_outputs(self, case):
        return {"y": nv.block(case.tensors, 0, case.tensors["x"], grids_of(case.sizes)[0], self.own_config())}

    graph_file = "vision_block_tiny.json"

    def graph_outputs(self, case, device):
        """`BlockGraph.model` (one clip of 2 frames of 6 × 4)."""
        cfg = self.own_config()
        (grid,) = grids_of(case.sizes)
        cos, sin = graph_rope(grid, cfg)
        out = compiled(self.graph_file, F64, device)(graph_block_params(case.tensors, 0, cfg),
                                                     {"x": t64(case.tensors["x"]), "cos": cos, "sin": sin})
        return {"y": to_np(out["y"])}

    def torch_outputs(self, case, dtype, device):
        x = t64(case.tensors["x"]).to(device=device, dtype=compute(dtype))
        return {"torch": {"y": to_np(torch_block(case.tensors, 0, x, grids_of(case.sizes), dtype, device))}}

    def lean_context(self, case):
        return {"g": block_sizes(self.own_config(), grids_of(case.sizes)[0]), **lean_scalars(self.own_config())}

    def lean_output_shapes(self, case):
        return {"y": (tokens(grids_of(case.sizes)), self.own_config()["width"])}

    def lowp_checks(self, case, dtype, device):
        rc = rounded(case, dtype)
        got = self.torch_outputs(rc, dtype, device)["torch"]["y"]
        return [LowpCheck("torch", "numpy", "y", got, self.numpy_outputs(rc)["y"], self.error_model(case.sizes))]

    def error_model(self, sizes):
        return block_model(self.own_config(), max(t * h * w for t, h, w in grids_of(sizes)))


# --- merge and project -----------------------------------------------------------------------------

def merge_model(cfg: dict, frames: int) -> ErrorModel:
    """Temporal mean (t), space-to-depth (exact), first (E), GELU_erf, second (E), RMSNorm (T):
    amp: the norm (2) times GELU's condition (≤ 2 on unit inputs)."""
    E = cfg["merge"][0] * cfg["merge"][1] * cfg["width"]
    return ErrorModel(stores=10, accum=frames + 2 * E + cfg["text_width"] + 2, amp=4.0)


def graph_merge_project(p: dict[str, np.ndarray], y: torch.Tensor, device: str) -> np.ndarray:
    """The exported merge-and-project graph (`vision_merge_project_tiny.json`, `MergeGraph.model`:
    one clip of 2 frames of 6 × 4) on the encoder output `y`, float64."""
    out = compiled("vision_merge_project_tiny.json", F64, device)(
        {"first": t64(p["projector.first"]), "second": t64(p["projector.second"]),
         "norm": t64(p["projector.post_norm.scale"])}, {"features": y})
    return to_np(out["tokens"])


class MergeProjectComponent(VisionComponent):
    name = "merge_project"
    summary = ("temporal mean, 2 × 2 space-to-depth (channel (dh·2 + dw)·D + c), projector Linear → GELU_erf → "
               "Linear → RMSNorm, clip after clip (MoonViT.merge_project)")
    #: the array-backed `Exec.Vision.mergeProject` (`Exec/Vision.lean`: `mergeProject_eq`, equal to
    #: the reference `Vision.mergeProject`), clip after clip; the function-backed reference itself
    #: (the post-norm recomputes the whole projector for each output entry) did not finish one
    #: merged token (2 frames of 2 × 2) in 200 s
    template = "merge_project"
    lean_targets = ("KimiK3.Exec.Kernel",)
    lean_note = LEAN_NOTE_MERGE
    kinds = {
        "random": "2 frames of 6 × 4",
        "clips": "three clips of different grids and frame counts: (1, 4, 6), (3, 2, 8), (4, 4, 2)",
        "single": "1 frame (the mean is the frame)",
        "frames4": "4 frames of 2 × 2 (one merged token)",
        "large": "encoder output ×1e3: GELU in its linear and zero regions",
        "eps": "projector output of RMS ~√ε: the post-norm ε dominates",
    }
    kind_grids = {"random": [(2, 6, 4)], "clips": [(1, 4, 6), (3, 2, 8), (4, 4, 2)], "single": [(1, 4, 6)],
                  "frames4": [(4, 2, 2)], "large": [(2, 6, 4)], "eps": [(2, 6, 4)]}
    default_sizes = grid_sizes([(2, 6, 4)])

    def sample(self, rng, kind, sizes):
        cfg = self.own_config()
        y = gaussian(rng, (tokens(grids_of(sizes)), cfg["width"]), 1e3 if kind == "large" else 1.0)
        w = projector_weights(rng, cfg)
        if kind == "eps":
            w["projector.second"] *= 1e-3 * np.sqrt(cfg["projector_eps"])
        return {"y": y, **w}

    def numpy_outputs(self, case):
        return {"features": nv.merge_project(case.tensors, case.tensors["y"], grids_of(case.sizes), self.own_config())}

    graph_file = "vision_merge_project_tiny.json"

    def graph_outputs(self, case, device):
        """`MergeGraph.model` (one clip of 2 frames of 6 × 4; the erf GELU is a graph node)."""
        return {"features": graph_merge_project(case.tensors, t64(case.tensors["y"]), device)}

    def torch_outputs(self, case, dtype, device):
        return {"torch": {"features": to_np(self.torch_features(case, dtype, device))}}

    def lean_context(self, case):
        cfg = self.own_config()
        return {"g": merge_sizes(cfg, grids_of(case.sizes)), "eps": lean_float(cfg["projector_eps"])}

    def lean_output_shapes(self, case):
        cfg = self.own_config()
        return {"features": (merged_tokens(cfg, grids_of(case.sizes)), cfg["text_width"])}

    def torch_features(self, case: Case, dtype: torch.dtype, device: str) -> torch.Tensor:
        vit = moonvit.MoonViT(torch_vision())
        vit.mm_projector = loaded(vit.mm_projector, sub_state(hub_of(case.tensors), "mm_projector."), dtype, device)
        y = t64(case.tensors["y"]).to(device=device, dtype=compute(dtype))
        return vit.merge_project(y, grids_of(case.sizes)).to(dtype)

    def lowp_checks(self, case, dtype, device):
        rc = rounded(case, dtype)
        return [LowpCheck("torch", "numpy", "features", to_np(self.torch_features(rc, dtype, device)),
                          self.numpy_outputs(rc)["features"], self.error_model(case.sizes))]

    def error_model(self, sizes):
        return merge_model(self.own_config(), max(t for t, _, _ in grids_of(sizes)))


# --- the whole encoder, several clips in one batch --------------------------------------------------

class VisionEncoderComponent(VisionComponent):
    name = "vision_encoder"
    summary = ("MoonViT-V2 and its projector on several clips in one batch: torch batched varlen (block-diagonal "
               "mask) vs the per-clip plain reference vs NumPy (MoonViT.forward, moonvit_reference.features)")
    #: the library's patch embedding `Vision.embed` stored once per clip, then the executable
    #: `Exec.Vision.encode` and `mergeProject` (`Exec/Vision.lean`: `clipFeatures_eq`, the whole
    #: tower on one clip is `Vision.clipFeatures`), clip after clip
    template = "vision_encoder"
    lean_targets = ("KimiK3.Exec.Kernel", "KimiK3.Vision.Embed")
    lean_note = LEAN_NOTE_ENCODER
    kinds = {
        "random": "five clips in one batch: (1, 4, 6) the table's grid, (3, 2, 8), (4, 4, 2), (1, 8, 10) larger "
                  "than the table, (2, 4, 2)",
        "single": "one clip of 2 frames of 6 × 4",
        "large": "two clips, patches and the patch projection ×1e3",
    }
    kind_grids = {"random": [(1, 4, 6), (3, 2, 8), (4, 4, 2), (1, 8, 10), (2, 4, 2)], "single": [(2, 6, 4)],
                  "large": [(1, 4, 6), (2, 2, 4)]}
    default_sizes = grid_sizes(kind_grids["random"])

    def sample(self, rng, kind, sizes):
        cfg = self.own_config()
        s = magnitude(kind)
        out = {"patches": gaussian(rng, (tokens(grids_of(sizes)), cfg["channels"] * cfg["patch"] ** 2), s)}
        out.update(embed_weights(rng, cfg))
        out["vision.patch_weight"] *= s
        for i in range(cfg["layers"]):
            out.update(block_weights(rng, cfg, i))
        out["vision.final_norm.scale"] = 1.0 + 0.1 * rng.standard_normal(cfg["width"])
        out.update(projector_weights(rng, cfg))
        return out

    graph_file = "vision_encoder_tiny.json"

    def graph_fits(self, case):
        """The exports' clip: one clip of 2 frames of 6 × 4 (kind `single`)."""
        return grids_of(case.sizes) == [(2, 6, 4)]

    def graph_outputs(self, case, device):
        """Three exported graphs in a row on the one clip: the embedding (`vision_embed_tiny`), the
        whole encoder as one graph (`vision_encoder_tiny`, `EncoderGraph.program`: every block, then
        the final norm), merge and project (`vision_merge_project_tiny`)."""
        cfg, p = self.own_config(), case.tensors
        (grid,) = grids_of(case.sizes)
        cos, sin = graph_rope(grid, cfg)
        params = {f"blocks.{i}.{k}": v for i in range(cfg["layers"]) for k, v in graph_block_params(p, i, cfg).items()}
        params["final_norm"] = t64(p["vision.final_norm.scale"])
        x = graph_embedding(p, grid, cfg, device)
        encoded = compiled(self.graph_file, F64, device)(params, {"x": x, "cos": cos, "sin": sin})["y"]
        return {"encoded": to_np(encoded), "features": graph_merge_project(p, encoded, device)}

    def numpy_stages(self, case: Case) -> list[list[np.ndarray]]:
        """Per clip: the embedding, every block's output, the final norm (NumPy)."""
        p, cfg, start, out = case.tensors, self.own_config(), 0, []
        for g in grids_of(case.sizes):
            n = g[0] * g[1] * g[2]
            out.append(nv.encode(p, p["patches"][start:start + n], g, cfg))
            start += n
        return out

    def numpy_outputs(self, case):
        encoded = np.concatenate([s[-1] for s in self.numpy_stages(case)])
        return {"encoded": encoded,
                "features": nv.merge_project(case.tensors, encoded, grids_of(case.sizes), self.own_config())}

    def lean_context(self, case):
        cfg, grids = self.own_config(), grids_of(case.sizes)
        g = {**block_sizes(cfg, grids[0]), **merge_sizes(cfg, grids), "P": cfg["channels"] * cfg["patch"] ** 2,
             "m1": cfg["table_rows"], "m2": cfg["table_cols"], "F": cfg["frames"], "layers": cfg["layers"]}
        return {"g": g, **lean_scalars(cfg), "projEps": lean_float(cfg["projector_eps"])}

    def lean_output_shapes(self, case):
        cfg, grids = self.own_config(), grids_of(case.sizes)
        return {"encoded": (tokens(grids), cfg["width"]), "features": (merged_tokens(cfg, grids), cfg["text_width"])}

    def model(self, case: Case, dtype: torch.dtype, device: str) -> moonvit.MoonViT:
        return loaded(moonvit.MoonViT(torch_vision()), hub_of(case.tensors), dtype, device)

    def torch_outputs(self, case, dtype, device):
        from pybridge import moonvit_reference

        grids = grids_of(case.sizes)
        vit = self.model(case, dtype, device)
        x = t64(case.tensors["patches"]).to(device=device, dtype=dtype)
        encoded = vit.encode(x, grids)
        out = {"torch": {"encoded": to_np(encoded), "features": to_np(vit.merge_project(encoded, grids))}}
        if dtype == F64:
            sd = hub_of(case.tensors)
            out["torch_reference"] = {"features": to_np(moonvit_reference.features(torch_vision(), sd, x.cpu(), grids))}
        return out

    def lowp_checks(self, case, dtype, device):
        """Each stage on the NumPy reference's own input at that point, rounded to `dtype`: the
        embedding of the rounded patches, each block (per clip, in one batch), the final norm,
        merge-and-project of the rounded encoder output."""
        rc, cfg, grids = rounded(case, dtype), self.own_config(), grids_of(case.sizes)
        vit = self.model(rc, dtype, device)
        cd = compute(dtype)
        stages = self.numpy_stages(rc)
        checks = []

        emb = vit.vision_tower.patch_embed(t64(rc.tensors["patches"]).to(device=device, dtype=cd), grids)
        want = np.concatenate([nv.embed(rc.tensors, p, g, cfg) for p, g in self.clip_patches(rc)])
        checks.append(LowpCheck("torch", "numpy", "embedding", to_np(emb), want,
                                VisionEmbedComponent().error_model({})))
        n_max = max(t * h * w for t, h, w in grids)
        for i in range(cfg["layers"]):
            x_in = np.concatenate([round_to(s[i], dtype) for s in stages])
            got = torch_block(rc.tensors, i, t64(x_in).to(device=device, dtype=cd), grids, dtype, device)
            want, start = [], 0
            for g in grids:
                n = g[0] * g[1] * g[2]
                want.append(nv.block(rc.tensors, i, x_in[start:start + n], g, cfg))
                start += n
            checks.append(LowpCheck("torch", "numpy", f"block{i}", to_np(got), np.concatenate(want), block_model(cfg, n_max)))
        x_in = np.concatenate([round_to(s[-2], dtype) for s in stages])
        got = vit.vision_tower.encoder.final_layernorm(t64(x_in).to(device=device, dtype=cd))
        want = nv.rms_norm(x_in, cfg["eps"], rc.tensors["vision.final_norm.scale"])
        checks.append(LowpCheck("torch", "numpy", "final_norm", to_np(got), want,
                                ErrorModel(stores=4, accum=cfg["width"] + 2, amp=2.0, out_stores=0)))
        y_in = np.concatenate([round_to(s[-1], dtype) for s in stages])
        got = vit.merge_project(t64(y_in).to(device=device, dtype=cd), grids).to(dtype)
        checks.append(LowpCheck("torch", "numpy", "features", to_np(got), nv.merge_project(rc.tensors, y_in, grids, cfg),
                                merge_model(cfg, max(t for t, _, _ in grids))))
        return checks

    def clip_patches(self, case: Case) -> list[tuple[np.ndarray, Grid]]:
        out, start = [], 0
        for g in grids_of(case.sizes):
            n = g[0] * g[1] * g[2]
            out.append((case.tensors["patches"][start:start + n], g))
            start += n
        return out

    def error_model(self, sizes):
        """The stages added on the chain: embedding, the blocks, the final norm, merge-and-project
        (amp of one stage)."""
        cfg, grids = self.own_config(), grids_of(sizes)
        e = VisionEmbedComponent().error_model({})
        b = block_model(cfg, max(t * h * w for t, h, w in grids))
        m = merge_model(cfg, max(t for t, _, _ in grids))
        L = cfg["layers"]
        return ErrorModel(stores=e.stores + L * b.stores + 4 + m.stores,
                          accum=e.accum + L * b.accum + cfg["width"] + 2 + m.accum, amp=4.0)


__all__ = ["VisionEmbedComponent", "VisionBlockComponent", "MergeProjectComponent", "VisionEncoderComponent"]


# --- the multimodal prefill ----------------------------------------------------------------------

class MultimodalPrefillComponent(VisionComponent):
    name = "multimodal_prefill"
    summary = ("placeholders replaced by MoonViT's visual tokens in reading order, then the tiny text model "
               "(multimodal.prefill; NumPy: numpy_vision features spliced into numpy_ref.Decoder; Lean: the executable "
               "tower and Exec.Vision.multimodalPrefillF on the one-clip kind)")
    #: the kind `short` (one prompt row, one clip): the clip through the executable tower (the
    #: library's `Vision.embed` stored once, `Exec.Vision.encodeClipF`, `mergeProjectF`, as
    #: `vision_encoder`), its rows spliced into the row at the placeholder id and run through the
    #: executable language model from its initial state (`Exec.Vision.multimodalPrefillF`);
    #: `Exec.Vision.multimodalPrefill_clipFeatures_eq` (`lean/KimiK3/Exec/Multimodal.lean`) states
    #: that this is `Vision.multimodalPrefill` of `Vision.clipFeatures`. Outputs `features` and
    #: `logits` (every position of the row).
    template = "multimodal_prefill"
    lean_targets = ("KimiK3.Exec.Kernel", "KimiK3.Vision.Embed")
    lean_note = LEAN_NOTE_PREFILL
    lean_why_not = (f"Lean evaluates the kind {LEAN_KIND!r} only (one prompt row and one clip, the scope of "
                    "Exec.Vision.multimodalPrefill_clipFeatures_eq; one small case keeps the Lean run short)")
    kinds = {
        LEAN_KIND: "one row, one 1-frame 2 × 4 clip: text, placeholder, text, placeholder, text (the Lean leg's case)",
        "random": "two rows, two clips (1, 4, 6) and (2, 2, 4): 6 + 2 placeholders among text tokens",
        "leading": "one row starting with its placeholders, one clip of 4 frames (4, 2, 4)",
    }
    kind_grids = {LEAN_KIND: [(1, 2, 4)], "random": [(1, 4, 6), (2, 2, 4)], "leading": [(4, 2, 4)]}
    default_sizes = grid_sizes(kind_grids["random"])
    rows = {LEAN_KIND: 1, "random": 2, "leading": 1}

    def sample(self, rng, kind, sizes):
        enc = VisionEncoderComponent().sample(rng, "random", sizes)
        cfg, tcfg = self.own_config(), torch_config()
        kh, kw = cfg["merge"]
        visual = sum((h // kh) * (w // kw) for _, h, w in grids_of(sizes))
        ph = tcfg.media_placeholder_token_id
        B = self.rows[kind]
        T = visual // B + 3
        ids = rng.integers(0, tcfg.vocab_size // 2, (B, T))
        slots = [(b, j) for b in range(B) for j in range(T)]
        if kind == LEAN_KIND:  # every placeholder after text and before text: 1, 3, …
            chosen = [(0, 2 * j + 1) for j in range(visual)]
        elif kind == "leading":
            chosen = slots[:visual]
        else:
            chosen = sorted(map(tuple, np.array(slots)[rng.choice(len(slots), visual, replace=False)]))
        for b, j in chosen:
            ids[b, j] = ph
        return {"model_seed": np.array(float(rng.integers(0, 2**20))), "ids": ids.astype(np.float64), **enc}

    def lean_case(self, case):
        """The Lean leg's view of a `short` case (None for the other kinds): the case's ids and
        vision tensors (`vision.*`, `projector.*`, `patches`), then the seeded text model's
        (`DecoderStepComponent.lean_model`: spec names, stacked and folded as `decoder_step`'s
        Lean leg takes them); sizes: the clip's and the model's (`L`, `Exec.ModelDims`)."""
        from difftest.components.decoder import DecoderStepComponent, case_model

        grids, ids = grids_of(case.sizes), case.tensors["ids"]
        if case.kind != LEAN_KIND or len(grids) != 1 or ids.shape[0] != 1:
            return None
        model_tensors, model_sizes = DecoderStepComponent().lean_model(case_model(case.tensors))
        vision = {k: v for k, v in case.tensors.items() if k != "model_seed"}
        return dataclasses.replace(case, sizes={**case.sizes, **model_sizes}, tensors={**vision, **model_tensors})

    def lean_context(self, case):
        """`vision_encoder`'s context for the clip (`g`, `eps`, `theta`, `projEps`), `decoder_step`'s
        for the model (`cfg`, `layers`), the row's ids and the placeholder id `ph` (pybridge's
        reading of `media_placeholder_token_id`, as the NumPy leg: the prompt convention)."""
        from difftest.components.decoder import DecoderStepComponent

        dec = DecoderStepComponent()
        return {**VisionEncoderComponent().lean_context(case), "cfg": Component.lean_context(dec, case)["cfg"],
                "layers": dec.lean_schedule(case.sizes["L"]), "ids": [int(i) for i in case.tensors["ids"][0]],
                "ph": torch_config().media_placeholder_token_id}

    def lean_output_shapes(self, case):
        cfg, grids = self.own_config(), grids_of(case.sizes)
        return {"features": (merged_tokens(cfg, grids), cfg["text_width"]),
                "logits": case.tensors["ids"].shape + (case.sizes["vocab"],)}

    def numpy_outputs(self, case):
        from difftest.components.decoder import DecoderStepComponent, case_model

        feats = VisionEncoderComponent().numpy_outputs(case)["features"]
        ids = case.tensors["ids"].astype(np.int64)
        ph = torch_config().media_placeholder_token_id  # the prompt convention, not a computed value
        dec_comp, model = DecoderStepComponent(), case_model(case.tensors)
        logits, k = [], 0
        for row in ids:
            dec, out = dec_comp.decoder(model), []
            for tok in row:
                if tok == ph:
                    out.append(dec.step_embedding(feats[k]))
                    k += 1
                else:
                    out.append(dec.step(int(tok)))
            logits.append(np.stack(out))
        return {"features": feats, "logits": np.stack(logits)}

    def torch_outputs(self, case, dtype, device):
        from difftest.components.decoder import case_model
        from pybridge import multimodal

        model = case_model(case.tensors).to(device=device, dtype=dtype)
        vit = VisionEncoderComponent().model(case, dtype, device)
        ids = torch.tensor(case.tensors["ids"].astype(np.int64), device=device)
        patches = t64(case.tensors["patches"]).to(device=device, dtype=dtype)
        with torch.no_grad():
            logits, _ = multimodal.prefill(model, vit, ids, patches, grids_of(case.sizes))
            feats = vit(patches, grids_of(case.sizes))
        return {"torch": {"features": to_np(feats), "logits": to_np(logits)}}

    def lowp_checks(self, case, dtype, device):
        """The visual tokens (the stored features, as merge-and-project); the text model's stages
        at low precision are `decoder_step`'s checks."""
        checks = VisionEncoderComponent().lowp_checks(case, dtype, device)
        return [c for c in checks if c.output == "features"]

    def error_model(self, sizes):
        """The encoder's chain, then the text model's prefill over the row (decoder_step's chain
        at P = the row length)."""
        from difftest.components.decoder import DecoderStepComponent

        e = VisionEncoderComponent().error_model(sizes)
        d = DecoderStepComponent().error_model({"B": 1, "P": 16})
        return ErrorModel(stores=e.stores + d.stores, accum=e.accum + d.accum, amp=4.0)
