module

/-!
# List combinators of the language model (k3-spec §2.5)

The loops of the model over tokens and over layers, written with their own recursion and calling
nothing but their function arguments (why: `Core/README.md`, "Toolchain constraints"); the model's
`@[macro_inline]` definitions pass their per-layer and per-token work to these combinators as
closures. Each combinator equals its `List` counterpart (`Streaming.lean`).
-/

@[expose] public section

namespace KimiK3

namespace ModelList

variable {β γ δ σ ℓ : Type}

/-- `f` applied to every element (equal to `List.map`). -/
def map (f : β → γ) : List β → List γ
  | [] => []
  | x :: xs => f x :: map f xs

/-- `f` applied to corresponding elements, cut at the shorter list (equal to `List.zipWith`). -/
def zipWith (f : β → γ → δ) : List β → List γ → List δ
  | x :: xs, y :: ys => f x y :: zipWith f xs ys
  | _, _ => []

/-- Thread `x` through the elements of a list, first element first (a left fold with the
element as first argument). -/
def foldl (f : β → γ → γ) : List β → γ → γ
  | [], x => x
  | l :: ls, x => foldl f ls (f l x)

/-- **One token through a stack of layers**: layer `l` with its state `s` maps the carried
value `x` to a new state and a new carried value; returns the final carried value and the new
states in layer order. Layers without a state (or states without a layer) are cut off. -/
def scanLayers (f : ℓ → σ → γ → σ × γ) : List ℓ → List σ → γ → γ × List σ
  | l :: ls, s :: ss, x =>
    let r := f l s x
    let rest := scanLayers f ls ss r.2
    (rest.1, r.1 :: rest.2)
  | _, _, x => (x, [])

end ModelList

end KimiK3
