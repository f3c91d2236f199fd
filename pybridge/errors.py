"""Error types. Every user-facing failure is one of these, with a message naming the
file, config field or tensor at fault; the CLI prints the message and never a traceback."""


class K3Error(Exception):
    """Base class for all errors the bridge reports to users."""


class ConfigError(K3Error):
    """A config.json is missing, unreadable or has a bad field."""


class CheckpointError(K3Error):
    """Checkpoint tensors are missing, unexpected, mis-shaped or a shard is corrupt."""


class InputError(K3Error):
    """Bad runtime input (token ids out of range, empty prompt, ...)."""


class GraphError(K3Error):
    """A `k3spec.graph.v1` file is unreadable, malformed or inconsistent, or is bound to bad tensors."""
