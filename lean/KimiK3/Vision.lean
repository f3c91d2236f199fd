module

public import KimiK3.Vision.Config
public import KimiK3.Vision.Embed

/-!
# MoonViT-V2 (k3-spec §2.9, §7)

The vision encoder as the released checkpoint has it, its projector and the splice into the
text embeddings; see `Vision/README.md`.
-/
