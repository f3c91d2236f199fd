import Lake
open Lake DSL

package «kimi-k3-spec» where
  leanOptions := #[⟨`experimental.module, true⟩]

@[default_target]
lean_lib KimiK3 where
  srcDir := "lean"
  roots := #[`KimiK3]
  globs := #[.andSubmodules `KimiK3]
