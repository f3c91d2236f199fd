module

public import KimiK3.Vision.Config
public import KimiK3.Vision.Embed
public import KimiK3.Vision.Block
public import KimiK3.Vision.Merge
public import KimiK3.Vision.Splice
public import KimiK3.Vision.EmbedGraph
public import KimiK3.Vision.MergeGraph
public import KimiK3.Vision.BlockGraph
public import KimiK3.Vision.BlockGraphEval
public import KimiK3.Vision.EncoderGraph

/-!
# MoonViT-V2 (k3-spec §2.9, §7)

The vision encoder as the released checkpoint has it, its projector and the splice into the
text embeddings; see `Vision/README.md`.
-/
