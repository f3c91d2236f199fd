"""A synthetic real-width checkpoint for `difftest checkpoint` tests and benchmarks.

The paper configuration (`fixtures/paper/config.json`: hidden 7,168, 96 MLA and KDA heads, MLA
latents 512 / 1,536, KDA head dims 128 / 128) with few layers and few experts: the layer schedule
of `layers` layers (1-based n is MLA iff n % 4 == 0 or n == layers, so 2 layers are one KDA and
one MLA layer), every layer MoE by default (`first_k_dense_replace` 0), a small vocabulary
(the layer check never reads the embedding or the head). Tensors are drawn tensor by tensor and
written shard by shard, so no model is ever held in memory; the tensor names and shapes are those
of `pybridge.adapter.model_rules` (the one hub ↔ spec mapping).

    python -m difftest.checkpoint_synth --out /tmp/k3-synth --layers 2 --experts 4

`--quantize mxfp4` writes the routed experts in the released MXFP4 layout (`pybridge.mxfp4`:
`weight_packed` uint8, two E2M1 codes per byte, and `weight_scale` uint8 E8M0 per 32 entries),
quantized by pybridge's quantizer through the adapter's rule (`adapter.mxfp4_linear`'s `to_hub`,
the one `make-random-checkpoint --quantize mxfp4` uses), and config.json's `quantization_config`
(`mxfp4.quantization_config`). The float draws are the same with and without it (same seed,
same order), so the unquantized checkpoint of the same seed is the quantized one's master
(`difftest checkpoint --master`).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import click
import torch
from safetensors.torch import save_file

from pybridge import adapter, mxfp4
from pybridge.checkpoint import INDEX_NAME, PACKED, check_mxfp4_widths
from pybridge.config import config_from_dict

PAPER_CONFIG = Path(__file__).resolve().parents[1] / "fixtures" / "paper" / "config.json"
DTYPES = {"bfloat16": torch.bfloat16, "float32": torch.float32}


def synthetic_config(layers: int = 2, experts: int = 4, top_k: int = 2, vocab: int = 256, shared: int | None = None,
                     expert_hidden: int | None = None, latent: int | None = None, first_dense: int = 0) -> dict:
    """The paper's config.json with `layers` layers, `experts` routed experts (top-`top_k`), a
    `vocab`-token vocabulary and the first `first_dense` layers dense; `shared`, `expert_hidden`
    (moe_intermediate_size) and `latent` (routed_expert_hidden_size) default to the paper's."""
    raw = json.loads(PAPER_CONFIG.read_text(encoding="utf-8"))
    for key in ("_notes", "vision_config", "media_placeholder_token_id"):  # text only: the layer check reads no vision
        raw.pop(key, None)
    lac = raw["linear_attn_config"]
    lac["kda_layers"] = [n for n in range(1, layers + 1) if not (n % 4 == 0 or n == layers)]
    lac["full_attn_layers"] = [n for n in range(1, layers + 1) if n % 4 == 0 or n == layers]
    raw.update(num_hidden_layers=layers, num_experts=experts, num_experts_per_token=top_k, vocab_size=vocab,
               first_k_dense_replace=first_dense)
    for key, value in (("num_shared_experts", shared), ("moe_intermediate_size", expert_hidden),
                       ("routed_expert_hidden_size", latent)):
        if value is not None:
            raw[key] = value
    raw["_notes"] = {"synthetic": "difftest.checkpoint_synth: the paper widths with few layers and experts, "
                                  "random weights (not a trained model)"}
    return raw


#: length of the pool of Gaussian draws the tensors are cut from (a prime, so the rows of a matrix
#: are distinct windows of the pool)
POOL = 4_000_037


def random_tensor(name: str, shape: tuple[int, ...], gen: torch.Generator, pool: torch.Tensor,
                  dtype: torch.dtype) -> torch.Tensor:
    """Weights of stable magnitude for `name` (the rules of `pybridge.checkpoint.init_random_`,
    per tensor, so the writer never builds a model): norm gains near 1, A_log = log U(1, 16),
    small biases, linear weights N(0, 1/fan_in), in `dtype`. Large tensors are a window of `pool`
    (N(0, 1) draws) at a random offset: drawing 10⁹ fresh normals takes minutes on a small CPU, a
    window copies at memory speed."""
    leaf, n = name.rsplit(".", 1)[-1], math.prod(shape)
    if "norm" in name:
        return (1.0 + 0.1 * torch.randn(shape, generator=gen)).to(dtype)
    if leaf == "A_log":
        return torch.empty(shape).uniform_(1.0, 16.0, generator=gen).log().to(dtype)
    if leaf in ("dt_bias", "e_score_correction_bias"):
        return (0.1 * torch.randn(shape, generator=gen)).to(dtype)
    fan_in = 1 if name == "model.embed_tokens.weight" else shape[-1]
    if n <= 4096:
        return (torch.randn(shape, generator=gen) / math.sqrt(fan_in)).to(dtype)
    start = int(torch.randint(0, POOL, (), generator=gen))
    return (pool.repeat(math.ceil((start + n) / POOL))[start : start + n].reshape(shape) * (fan_in ** -0.5)).to(dtype)


def rule_tensors(rule: adapter.Rule, gen: torch.Generator, pool: torch.Tensor, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    """The hub tensors of one rule: drawn (`random_tensor`); an MXFP4 layer's weight is drawn as
    the float `[out, in]` weight it quantizes, in `dtype`, then quantized by the rule's `to_hub`
    (`mxfp4.quantize`: ceil scale rule, ties to even)."""
    if not rule.hub[0].endswith(PACKED):
        return {n: random_tensor(n, s, gen, pool, dtype) for n, s in zip(rule.hub, rule.hub_shapes)}
    base = rule.hub[0].removesuffix(PACKED)
    w_oi = random_tensor(base + ".weight", rule.spec_shapes[0][::-1], gen, pool, dtype)
    return dict(zip(rule.hub, rule.to_hub(w_oi.T)))


def write_synthetic(out: str | Path, raw_config: dict, seed: int = 0, dtype: torch.dtype = torch.bfloat16,
                    quantize: str | None = None, shard_layers: int = 1) -> dict:
    """Write config.json, one shard per `shard_layers` layers (plus one for the embedding, head
    and final norms) and the index into `out`; `quantize="mxfp4"`: routed experts in the released
    MXFP4 layout. Returns {"bytes": size on disk, "tensors": n, "shards": n}."""
    if quantize not in (None, "mxfp4"):
        raise click.BadParameter(f"quantize={quantize!r}: known: mxfp4", param_hint="--quantize")
    cfg = config_from_dict(raw_config)
    if quantize:
        check_mxfp4_widths(cfg)
        raw_config = {**raw_config, "quantization_config": mxfp4.quantization_config()}
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(raw_config, indent=1) + "\n", encoding="utf-8")
    gen = torch.Generator().manual_seed(seed)
    pool = torch.randn(POOL, generator=gen).to(dtype)
    rules = adapter.model_rules(cfg, quantized=quantize == "mxfp4")
    groups: dict[str, list[adapter.Rule]] = {}
    for rule in rules:
        name = rule.hub[0]
        layer = int(name.split(".")[2]) if name.startswith("model.layers.") else -1
        key = "rest" if layer < 0 else f"layers{layer // shard_layers}"
        groups.setdefault(key, []).append(rule)
    n_shards, weight_map, size = len(groups), {}, 0
    for k, (key, group) in enumerate(groups.items()):
        fname = f"model-{k + 1:05d}-of-{n_shards:05d}.safetensors"
        tensors = {}
        for r in group:
            tensors.update(rule_tensors(r, gen, pool, dtype))
        save_file(tensors, str(out / fname), metadata={"format": "pt"})
        weight_map.update(dict.fromkeys(tensors, fname))
        size += (out / fname).stat().st_size
        del tensors
    (out / INDEX_NAME).write_text(json.dumps({"metadata": {"total_size": size}, "weight_map": weight_map}, indent=1),
                                  encoding="utf-8")
    return {"bytes": size, "tensors": len(weight_map), "shards": n_shards}


@click.command()
@click.option("--out", required=True, type=click.Path(file_okay=False, path_type=Path))
@click.option("--layers", default=2, show_default=True, type=click.IntRange(1, 93))
@click.option("--experts", default=4, show_default=True, type=click.IntRange(1, 896))
@click.option("--top-k", default=2, show_default=True, type=click.IntRange(1, 896))
@click.option("--shared", default=None, type=click.IntRange(1, 8), help="Shared experts (default: the paper's 2).")
@click.option("--expert-hidden", default=None, type=click.IntRange(1), help="moe_intermediate_size (default 3,072).")
@click.option("--latent", default=None, type=click.IntRange(1), help="routed_expert_hidden_size (default 3,584).")
@click.option("--vocab", default=256, show_default=True, type=click.IntRange(1))
@click.option("--first-dense", default=0, show_default=True, type=click.IntRange(0))
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--dtype", default="bfloat16", show_default=True, type=click.Choice(list(DTYPES)))
@click.option("--quantize", default=None, type=click.Choice(["mxfp4"]),
              help="Routed experts in MXFP4 (the released layout: weight_packed, weight_scale).")
def main(out, layers, experts, top_k, shared, expert_hidden, latent, vocab, first_dense, seed, dtype, quantize) -> None:
    """Write a synthetic checkpoint at the paper's widths."""
    raw = synthetic_config(layers, experts, top_k, vocab, shared, expert_hidden, latent, first_dense)
    info = write_synthetic(out, raw, seed, DTYPES[dtype], quantize)
    click.echo(f"{out}: {info['tensors']} tensors in {info['shards']} shards, {info['bytes'] / 1e9:.2f} GB")


if __name__ == "__main__":
    main()
