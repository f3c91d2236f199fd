"""Lazy, strict reading of a hub-format checkpoint for `difftest checkpoint`: one layer's tensors
at a time, straight from the safetensors shards that `model.safetensors.index.json` names.

Only the index (JSON) and the shards' headers are read up front; `read` memory-maps a shard with
`safetensors.safe_open` (never pickle / `torch.load`) and copies out exactly the tensors asked
for. Every fault names the file and the tensor: a missing shard, an index entry whose shard has no
such tensor, a tensor whose shape disagrees with what the configuration implies
(`pybridge.adapter`'s rules), a corrupt shard. Nothing is ever written into the checkpoint folder.

MXFP4 routed experts (the released layout, `pybridge.mxfp4`: `<module>.weight_packed` and
`<module>.weight_scale`, both uint8) are read as their codes, unchanged; the pair is checked by
pybridge's `mxfp4.tensor_problems` (the loader's own checks), each problem naming the tensor and
the shard: a missing scale tensor, a dtype other than uint8, a packed or scale shape other than
the configuration's, the E8M0 NaN code 255. Decoding is the caller's (`pybridge.mxfp4.dequantize`).
A float expert where config.json declares MXFP4 (or the reverse) is named as such.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open

from pybridge import adapter, mxfp4
from pybridge.checkpoint import INDEX_NAME, PACKED, VISION_PREFIXES, _canonical
from pybridge.errors import CheckpointError


def is_mxfp4(rule: adapter.Rule) -> bool:
    """Whether `rule` maps an MXFP4 layer (`adapter.mxfp4_linear`: hub `weight_packed`, `weight_scale`)."""
    return rule.hub[0].endswith(PACKED)


class LazyCheckpoint:
    """The tensor → shard map of a checkpoint folder, and `read` for a few tensors at a time.

    `bytes_read` counts the tensor bytes copied out of the shards so far."""

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)
        if not self.folder.is_dir():
            raise CheckpointError(f"{self.folder}: checkpoint directory does not exist")
        self.index = self.folder / INDEX_NAME
        self.where: dict[str, tuple[str, str]] = {}  # canonical name -> (shard file, name in the shard)
        self.bytes_read = 0
        self._open: dict[str, object] = {}
        self._keys: dict[str, set[str]] = {}  # the tensors each opened shard holds
        if self.index.exists():
            self._read_index()
        else:  # a single-file or index-less checkpoint: the shards' headers list their tensors
            shards = sorted(p.name for p in self.folder.glob("*.safetensors"))
            if not shards:
                raise CheckpointError(f"{self.folder}: no {INDEX_NAME} and no *.safetensors files")
            for shard in shards:
                self._handle(shard, "(header)")
                for raw in sorted(k for k in self._keys[shard] if not k.startswith(VISION_PREFIXES)):
                    self._add(_canonical(raw), shard, raw, self.folder / shard)

    def _read_index(self) -> None:
        try:
            weight_map = json.loads(self.index.read_text(encoding="utf-8"))["weight_map"]
            items = [(str(k), str(v)) for k, v in weight_map.items()]
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, AttributeError) as e:
            raise CheckpointError(f"{self.index}: malformed index ({e.__class__.__name__}: {e})") from None
        for raw, shard in items:
            if not raw.startswith(VISION_PREFIXES):
                self._add(_canonical(raw), shard, raw, self.index)

    def _add(self, name: str, shard: str, raw: str, source: Path) -> None:
        if name in self.where and self.where[name] != (shard, raw):
            raise CheckpointError(f"{source}: tensor '{raw}' listed twice ({self.where[name][0]} and {shard})")
        self.where[name] = (shard, raw)

    def _handle(self, shard: str, tensor: str):
        if shard not in self._open:
            path = self.folder / shard
            if not path.is_file():
                raise CheckpointError(f"{self.index}: shard '{shard}' (holding tensor '{tensor}') does not exist")
            try:
                self._open[shard] = safe_open(str(path), framework="pt")
                self._keys[shard] = set(self._open[shard].keys())
            except (SafetensorError, OSError, ValueError, RuntimeError) as e:
                raise CheckpointError(f"{path}: corrupt or unreadable safetensors file ({e}) "
                                      f"while reading tensor '{tensor}'") from None
        return self._open[shard]

    def read(self, rules: Iterable[adapter.Rule], config: Path) -> dict[str, torch.Tensor]:
        """The hub tensors of `rules` (canonical names), each checked against the shape the
        rule derives from the configuration `config`; MXFP4 pairs as uint8 codes, checked by
        `mxfp4.tensor_problems`."""
        out: dict[str, torch.Tensor] = {}
        for rule in rules:
            quantized = is_mxfp4(rule)
            if quantized and rule.hub[0] in self.where and rule.hub[1] not in self.where:  # a missing scale
                packed = rule.hub[0]
                raise CheckpointError(self._problems(packed, self._get(packed, rule.hub_shapes[0], config), None))
            for name, shape in zip(rule.hub, rule.hub_shapes):
                t = self._get(name, shape, config)
                shard, raw = self.where[name]
                if quantized and t.dtype != torch.uint8:
                    raise CheckpointError(f"{self.folder / shard}: MXFP4 tensor '{raw}' has dtype {t.dtype}, expected "
                                          f"torch.uint8 (config.json declares '{mxfp4.FORMAT}')")
                if not quantized and not t.is_floating_point():
                    raise CheckpointError(f"{self.folder / shard}: tensor '{raw}' has dtype {t.dtype}, expected a "
                                          "floating-point dtype")
                out[name] = t
            if quantized:
                problems = self._problems(rule.hub[0], out[rule.hub[0]], out[rule.hub[1]])
                if problems:
                    raise CheckpointError(problems)
        return out

    def _problems(self, packed_name: str, packed: torch.Tensor, scale: torch.Tensor | None) -> str:
        """pybridge's checks of one MXFP4 pair (`mxfp4.tensor_problems`), the shard named."""
        shard = self.folder / self.where[packed_name][0]
        base = self.where[packed_name][1].removesuffix(PACKED)
        return "; ".join(mxfp4.tensor_problems(base + ".weight", packed, scale, str(shard)))

    def _missing(self, name: str, shape: tuple[int, ...], config: Path) -> CheckpointError:
        where = self.index if self.index.exists() else self.folder
        msg = f"{where}: no tensor '{name}' (the configuration {config} needs it, shape {list(shape)})"
        if name.endswith(PACKED) and name.removesuffix(PACKED) + ".weight" in self.where:
            msg += (f"; the checkpoint has '{name.removesuffix(PACKED)}.weight' instead: config.json declares "
                    f"'{mxfp4.FORMAT}', but this expert is not quantized")
        elif name.endswith(".weight") and name.removesuffix(".weight") + PACKED in self.where:
            msg += (f"; the checkpoint has '{name.removesuffix('.weight')}{PACKED}' (MXFP4-packed) instead, but "
                    f"config.json declares no quantization_config with format '{mxfp4.FORMAT}'")
        return CheckpointError(msg)

    def _get(self, name: str, shape: tuple[int, ...], config: Path) -> torch.Tensor:
        """One tensor, its presence, shape and readability checked; counted in `bytes_read`."""
        if name not in self.where:
            raise self._missing(name, shape, config)
        shard, raw = self.where[name]
        f = self._handle(shard, raw)
        path = self.folder / shard
        if raw not in self._keys[shard]:
            raise CheckpointError(f"{path}: the index places tensor '{raw}' in this shard, which has no such tensor")
        try:
            got = list(f.get_slice(raw).get_shape())
            if got != list(shape):
                raise CheckpointError(f"{path}: tensor '{raw}' has shape {got}, but the configuration {config} "
                                      f"implies {list(shape)}")
            t = f.get_tensor(raw)
        except (SafetensorError, OSError, ValueError, RuntimeError) as e:
            raise CheckpointError(f"{path}: corrupt or unreadable safetensors file ({e}) "
                                  f"while reading tensor '{raw}'") from None
        self.bytes_read += t.numel() * t.element_size()
        return t

    def dtype(self) -> torch.dtype:
        """The dtype of the checkpoint's first layer norm weight (the checkpoint's storage dtype)."""
        name = next((n for n in self.where if n.endswith("input_layernorm.weight")), next(iter(self.where)))
        shard, raw = self.where[name]
        try:
            return _DTYPES.get(self._handle(shard, raw).get_slice(raw).get_dtype(), torch.float32)
        except (SafetensorError, OSError, ValueError, RuntimeError) as e:
            raise CheckpointError(f"{self.folder / shard}: corrupt or unreadable ({e}) while reading tensor '{raw}'") from None


_DTYPES = {"BF16": torch.bfloat16, "F16": torch.float16, "F32": torch.float32, "F64": torch.float64}
