"""A test case: seeded inputs of one component, and how they are written for Lean."""

from __future__ import annotations

import hashlib
import json
import struct
from dataclasses import dataclass, field

import numpy as np


@dataclass
class Case:
    """Inputs of one component run (every tensor float64, weights in the spec's `[in, out]` layout).

    `kind` names the generator ("random" or an adversarial one), `seed` and `sizes` determine the
    tensors, `simplify` is the value simplification the shrinker applied (0: none).
    """

    component: str
    index: int
    kind: str
    seed: int
    sizes: dict[str, int]
    tensors: dict[str, np.ndarray] = field(repr=False)
    simplify: int = 0

    @property
    def label(self) -> str:
        sizes = ",".join(f"{k}={v}" for k, v in self.sizes.items())
        extra = f", simplify={self.simplify}" if self.simplify else ""
        return f"{self.component}#{self.index} ({self.kind}, seed {self.seed}, {sizes}{extra})"

    def digest(self) -> str:
        """A hash of everything that determines the case's values."""
        h = hashlib.sha256(json.dumps([self.component, self.kind, self.sizes], sort_keys=True).encode())
        for name in sorted(self.tensors):
            t = np.ascontiguousarray(self.tensors[name], dtype=np.float64)
            h.update(name.encode() + str(t.shape).encode() + t.tobytes())
        return h.hexdigest()

    def reproducer(self) -> dict:
        """The seed and the exact inputs (float64 bit patterns as hex), enough to rerun the case."""
        return {
            "component": self.component,
            "index": self.index,
            "kind": self.kind,
            "seed": self.seed,
            "sizes": self.sizes,
            "simplify": self.simplify,
            "tensors": {
                name: {"shape": list(t.shape), "float64_hex": hex_bits(t)} for name, t in self.tensors.items()
            },
        }


    @classmethod
    def from_reproducer(cls, doc: dict) -> Case:
        """The exact case a `reproducer()` document describes."""
        tensors = {name: from_hex_bits(t["float64_hex"], t["shape"]) for name, t in doc["tensors"].items()}
        return cls(doc["component"], int(doc.get("index", 0)), doc["kind"], int(doc["seed"]), dict(doc["sizes"]),
                   tensors, int(doc.get("simplify", 0)))


def hex_bits(t: np.ndarray) -> str:
    """The float64 bit patterns of `t` (row-major), 16 lowercase hex digits each, big-endian."""
    flat = np.ascontiguousarray(t, dtype=np.float64).reshape(-1)
    return flat.astype(">f8").tobytes().hex()


def from_hex_bits(text: str, shape: list[int]) -> np.ndarray:
    """Inverse of `hex_bits`."""
    return np.frombuffer(bytes.fromhex(text), dtype=">f8").astype(np.float64).reshape(shape)


def float_bits(x: float) -> int:
    """The float64 bit pattern of `x` as an unsigned integer (exact in Lean's `Float.ofBits`)."""
    return struct.unpack("<Q", struct.pack("<d", float(x)))[0]


def bits_float(b: int) -> float:
    return struct.unpack("<d", struct.pack("<Q", int(b)))[0]
