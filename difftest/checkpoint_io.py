"""Lazy, strict reading of a hub-format checkpoint for `difftest checkpoint`: one layer's tensors
at a time, straight from the safetensors shards that `model.safetensors.index.json` names.

Only the index (JSON) and the shards' headers are read up front; `read` memory-maps a shard with
`safetensors.safe_open` (never pickle / `torch.load`) and copies out exactly the tensors asked
for. Every fault names the file and the tensor: a missing shard, an index entry whose shard has no
such tensor, a tensor whose shape disagrees with what the configuration implies
(`pybridge.adapter`'s rules), a corrupt shard. Nothing is ever written into the checkpoint folder.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open

from pybridge import adapter
from pybridge.checkpoint import INDEX_NAME, VISION_PREFIXES, _canonical
from pybridge.errors import CheckpointError


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
        rule derives from the configuration `config`."""
        out: dict[str, torch.Tensor] = {}
        for rule in rules:
            for name, shape in zip(rule.hub, rule.hub_shapes):
                if name not in self.where:
                    raise CheckpointError(f"{self.index if self.index.exists() else self.folder}: no tensor '{name}' "
                                          f"(the configuration {config} needs it, shape {list(shape)})")
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
                if not t.is_floating_point():
                    raise CheckpointError(f"{path}: tensor '{raw}' has dtype {t.dtype}, expected a floating-point "
                                          "dtype (MXFP4-packed experts are not decoded here)")
                self.bytes_read += t.numel() * t.element_size()
                out[name] = t
        return out

    def dtype(self) -> torch.dtype:
        """The dtype of the checkpoint's first layer norm weight (the checkpoint's storage dtype)."""
        name = next((n for n in self.where if n.endswith("input_layernorm.weight")), next(iter(self.where)))
        shard, raw = self.where[name]
        try:
            return _DTYPES.get(self._handle(shard, raw).get_slice(raw).get_dtype(), torch.float32)
        except (SafetensorError, OSError, ValueError, RuntimeError) as e:
            raise CheckpointError(f"{self.folder / shard}: corrupt or unreadable ({e}) while reading tensor '{raw}'") from None


_DTYPES = {"BF16": torch.bfloat16, "F16": torch.float16, "F32": torch.float32, "F64": torch.float64}
