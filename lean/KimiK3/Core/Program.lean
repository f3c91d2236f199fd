module

public import KimiK3.Core.Kernel

/-!
# Graph programs: shared bindings, then several outputs (data)

A `Model`'s outputs are independent terms, so a value that two outputs need is computed (and
exported) twice. A `Program` binds its intermediate values once (`Lets`, a chain of `let1`s)
and reads all outputs from the final context; the JSON exporter (`Program.toJson`,
`Core/Json.lean`) emits each binding once. This file holds the two data types only; their
meaning (`Lets.eval`, `Program.eval`, `Program.toModel`) and its theorems are in
`Graph/Program.lean`.
-/

@[expose] public section

namespace KimiK3

/-- A chain of bindings from context `Γ` to context `Δ`: each binding evaluates a term once and
pushes its value as the new first entry. -/
inductive Lets (α : Type) : List Shape → List Shape → Type where
  /-- No binding. -/
  | nil {Γ : List Shape} : Lets α Γ Γ
  /-- Bind `t`, then continue in the extended context. -/
  | bind {Γ Δ : List Shape} {s : Shape} : Term α Γ s → Lets α (s :: Γ) Δ → Lets α Γ Δ

/-- A graph program: named parameters and inputs (context: parameters first), shared bindings,
and named outputs read from the final context. -/
structure Program (α : Type) where
  /-- Weights, in context order. -/
  params : Signature
  /-- Activations, after the parameters. -/
  inputs : Signature
  /-- Named outputs. -/
  outputs : Signature
  /-- The final context. -/
  ctx : List Shape
  /-- The shared bindings. -/
  lets : Lets α (Shape.appendList params.shapes inputs.shapes) ctx
  /-- One term per output over the final context. -/
  body : Args α ctx outputs.shapes

end KimiK3
