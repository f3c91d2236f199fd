"""Command line: `python -m pybridge generate | make-random-checkpoint | make-random-draft | check-config ...`.

Every K3Error (bad config field, bad tensor, corrupt shard, bad input) is printed as one
`error: ...` message with exit status 2; no traceback."""

import sys

import click
import torch

from pybridge.errors import ConfigError, InputError, K3Error

DTYPES = {"float32": torch.float32, "float64": torch.float64}


def _parse_ids(text: str) -> list[int]:
    try:
        ids = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise InputError(f"--prompt-ids must be comma-separated integers, got {text!r}") from None
    if not ids:
        raise InputError("--prompt-ids is empty")
    return ids


@click.group()
def cli() -> None:
    """Kimi K3 PyTorch bridge."""


@cli.command()
@click.option("--checkpoint", required=True, help="Directory with config.json and *.safetensors shards.")
@click.option("--prompt-ids", required=True, help="Comma-separated token ids, e.g. 1,2,3.")
@click.option("--max-new-tokens", default=16, show_default=True, type=click.IntRange(min=0))
@click.option("--dtype", type=click.Choice(sorted(DTYPES)), default="float32", show_default=True)
@click.option("--kda-impl", type=click.Choice(["auto", "chunk", "recurrent", "fla"]), default="auto", show_default=True)
@click.option("--speculative", default=0, show_default=True, type=click.IntRange(min=0),
              help="Draft this many tokens per step with the EAGLE-3 draft of --draft (0: serial decoding).")
@click.option("--draft", "draft_dir", default=None, help="Draft checkpoint directory (make-random-draft).")
def generate(checkpoint: str, prompt_ids: str, max_new_tokens: int, dtype: str, kda_impl: str, speculative: int,
             draft_dir: str | None) -> None:
    """Greedy generation; prints the new token ids, comma-separated (the same with --speculative)."""
    from pybridge.checkpoint import load_checkpoint

    ids = _parse_ids(prompt_ids)
    model = load_checkpoint(checkpoint, DTYPES[dtype])
    model.set_kda_impl(kda_impl)
    if speculative:
        from pybridge.eagle import load_draft
        from pybridge.speculative import EagleProposer, speculative_generate

        if draft_dir is None:
            raise InputError("--speculative needs --draft (a draft checkpoint directory)")
        proposer = EagleProposer(model, load_draft(draft_dir, DTYPES[dtype]))
        new = speculative_generate(model, proposer, torch.tensor([ids]), max_new_tokens, speculative)
    else:
        new = model.generate(torch.tensor([ids]), max_new_tokens)
    click.echo(",".join(str(t) for t in new[0].tolist()))


@cli.command("make-random-checkpoint")
@click.option("--config", "config_path", required=True, help="Hub-format config.json.")
@click.option("--out", required=True, help="Output directory.")
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--shards", default=2, show_default=True, type=click.IntRange(min=1))
@click.option("--quantize", type=click.Choice(["none", "mxfp4"]), default="none", show_default=True,
              help="mxfp4: routed experts as released (compressed-tensors mxfp4-pack-quantized).")
def make_random_checkpoint(config_path: str, out: str, seed: int, shards: int, quantize: str) -> None:
    """Write a random checkpoint (config.json + safetensors shards + index; the vision tower and
    projector too when the config has a vision_config)."""
    from pybridge.checkpoint import random_model, save_checkpoint
    from pybridge.config import load_config
    from pybridge.moonvit import random_moonvit

    cfg = load_config(config_path)
    vision = random_moonvit(cfg.vision, seed, torch.float32) if cfg.vision is not None else None
    model = random_model(cfg, seed, quantize=None if quantize == "none" else quantize)
    click.echo(str(save_checkpoint(model, config_path, out, shards, vision)))


@cli.command("make-random-draft")
@click.option("--config", "config_path", required=True, help="Hub-format config.json with the draft's fields.")
@click.option("--out", required=True, help="Output directory.")
@click.option("--seed", default=0, show_default=True, type=int)
def make_random_draft(config_path: str, out: str, seed: int) -> None:
    """Write a random EAGLE-3 draft checkpoint (fusion fc = [0 0 I])."""
    from pybridge.eagle import load_draft_config, random_draft, save_draft

    click.echo(str(save_draft(random_draft(load_draft_config(config_path), seed), config_path, out)))


@cli.command("check-config")
@click.argument("path")
def check_config_cmd(path: str) -> None:
    """Compare a hub config.json (or its folder) with the K3 report's configuration.

    Prints every broken well-formedness condition (Lean `Config.WF`, MX block 32) and every
    mismatch by field, and exits 1 if there is any; 0 when the file is well formed and all
    report-stated fields agree."""
    import json
    from pathlib import Path

    from pybridge.config_kimi_linear import is_kimi_linear
    from pybridge.paper_check import check_config

    file = Path(path) / "config.json" if Path(path).is_dir() else Path(path)
    try:
        raw = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        raw = None  # check_config reports it
    if isinstance(raw, dict) and isinstance(raw.get("text_config", raw), dict) and is_kimi_linear(raw.get("text_config", raw)):
        raise ConfigError(f"{path}: selects the Kimi Linear variant (model_type 'kimi_linear' without K3's fields); "
                          "check-config compares a config with the K3 report only")
    result = check_config(path)
    for problem in result.wf_problems:
        click.echo(f"{result.path}: not well formed: {problem}")
    for m in result.mismatches:
        click.echo(m.message(result.path))
    click.echo(
        f"{result.path}: {result.checked} report-stated fields checked, {len(result.mismatches)} mismatches; "
        f"not stated in the report (unchecked): {', '.join(result.unverifiable) or 'none'}"
        + (f"; vision fields not checked: {result.vision_unchecked}" if result.vision_unchecked else "")
    )
    if result.mismatches or result.wf_problems:
        sys.exit(1)


def main() -> None:
    try:
        cli.main(standalone_mode=False)
    except click.exceptions.Abort:
        sys.exit(1)
    except click.ClickException as e:
        e.show()
        sys.exit(e.exit_code)
    except K3Error as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(2)


if __name__ == "__main__":
    main()

