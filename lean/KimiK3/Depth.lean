module

public import KimiK3.Depth.Kernel
public import KimiK3.Depth.BlockState
public import KimiK3.Depth.Graph
public import KimiK3.Depth.AttnResGraph
public import KimiK3.Depth.AttnRes
public import KimiK3.Depth.AttnResBridge

/-!
# KimiK3.Depth

Block Attention Residuals (k3-spec §2.4, §2.5): the depth block state, retrieval, its typed
graph and their properties. See `Depth/README.md`.
-/
