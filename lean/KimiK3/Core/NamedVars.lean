module

public import KimiK3.Core.Kernel

/-!
# Named context variables for graph terms

A graph term refers to its context by de Bruijn index (`Var.here`, `Var.there …`); long terms
written that way need hand-counted indices. `Vars.all Γ` is every variable of the context `Γ`,
in order, as nested pairs ending in `()`, so a definition names them once with a pattern:

    let (queryDown, kvDown, …, x, ()) := Vars.all Γ

and its term refers to `.var x` by name. The indices are computed by `Vars.all`, a wrong shape is
a type error, and the terms built are the same constructors as hand-written ones (`Vars.all`
unfolds by `simp [Vars.all, Vars.from]`), so denotation proofs and the JSON export do not change.

`Vars.all` takes no type parameter, so generic definitions of other modules can call it (a
type-generic helper would not compile there: `Core/README.md`, "Toolchain constraints", 1).
-/

@[expose] public section

namespace KimiK3

/-- One variable of `Γ` for each entry `s₁, …, sₙ` of `Δ`: `Var Γ s₁ × (… × (Var Γ sₙ × Unit))`. -/
def Vars (Γ : List Shape) : List Shape → Type
  | [] => Unit
  | s :: Δ => Var Γ s × Vars Γ Δ

/-- The variables that `lift` makes of the entries of `Δ`, in order. -/
def Vars.from (Γ : List Shape) : (Δ : List Shape) → (∀ {s : Shape}, Var Δ s → Var Γ s) → Vars Γ Δ
  | [], _ => ()
  | _ :: Δ, lift => (lift .here, Vars.from Γ Δ (fun v => lift (.there v)))

/-- **Every variable of `Γ`, in order**: the first component is `Var.here`, the second
`Var.there .here`, and so on. -/
def Vars.all (Γ : List Shape) : Vars Γ Γ := Vars.from Γ Γ id

end KimiK3
