"""Production-style PyTorch implementation of the Kimi K3 text model.

Modules: `config` (hub config.json), `kda`, `mla`, `attnres`, `moe`, `model`
(full model + greedy `generate`), `checkpoint` (strict safetensors loading),
`reference` (plain per-token implementation used by the tests).
"""

from pybridge.config import K3Config, load_config
from pybridge.errors import CheckpointError, ConfigError, InputError, K3Error
from pybridge.model import KimiK3ForCausalLM

__all__ = [
    "K3Config",
    "load_config",
    "KimiK3ForCausalLM",
    "K3Error",
    "ConfigError",
    "CheckpointError",
    "InputError",
]
