module

public import KimiK3.Sequence.KernelLemmas

/-!
# Affine segment summaries (k3-spec §2.2, "Chunk / scan algebra"; report §5.1)

A token (or a segment of tokens) of a linear recurrence acts on a state `S : [keyDim, valueDim]`
as the affine map `S ↦ A · S + B` with `A : [keyDim, keyDim]` acting by left multiplication.
`AffineSummary` (defined in `Kernel.lean`) stores `(A, B)`. Applying `(A₁, B₁)` and then `(A₂, B₂)` is the summary
`(A₂ A₁, A₂ B₁ + B₂)` (`andThen`).

Proved: `apply_andThen` (the composed summary acts as the composition), `id_andThen`,
`andThen_id`, `andThen_assoc` (a monoid, so segments can be regrouped for a prefix scan), and the
list forms `apply_compose`, `compose_append`. Composition is not commutative
(`andThen_not_comm_example`), so segments keep their order.
-/

@[expose] public section

namespace KimiK3

namespace AffineSummary

variable {α : Type} {keyDim valueDim : Nat}

@[simp] theorem memo_eq [Scalar α] (s : AffineSummary α keyDim valueDim) : s.memo = s := by
  simp [memo]

@[simp] theorem compose_nil [Scalar α] :
    compose ([] : List (AffineSummary α keyDim valueDim)) = id keyDim valueDim := rfl

@[simp] theorem compose_cons [Scalar α] (s : AffineSummary α keyDim valueDim)
    (ss : List (AffineSummary α keyDim valueDim)) :
    compose (s :: ss) = andThen s (compose ss) := by
  simp [compose]

/-- `apply` in `Core` terms: `A · S + B` with `Tensor.matMul` and `Tensor.add`. -/
theorem apply_eq [Scalar α] (s : AffineSummary α keyDim valueDim) (S : Tensor α [keyDim, valueDim]) :
    s.apply S = Tensor.add [keyDim, valueDim] (Tensor.matMul s.transition S) s.offset := by
  funext r c; simp [apply]

/-- `andThen` in `Core` terms: `(A₂ A₁, A₂ B₁ + B₂)`. -/
theorem andThen_eq [Scalar α] (first second : AffineSummary α keyDim valueDim) :
    andThen first second =
      ⟨Tensor.matMul second.transition first.transition,
       Tensor.add [keyDim, valueDim] (Tensor.matMul second.transition first.offset) second.offset⟩ := by
  simp only [andThen, Seq.sum_eq]; rfl

section Field

variable [ScalarField α]

omit [ScalarField α] in
/-- Summaries with equal matrices are equal. -/
theorem ext' {s t : AffineSummary α keyDim valueDim} (h1 : s.transition = t.transition)
    (h2 : s.offset = t.offset) : s = t := by
  cases s; cases t; simp only at h1 h2; subst h1; subst h2; rfl

/-- The empty summary acts as the identity. -/
@[simp] theorem apply_id (S : Tensor α [keyDim, valueDim]) : (id keyDim valueDim).apply S = S := by
  rw [apply_eq]; simp only [id, Tensor.identity_matMul, Tensor.add_zero2]

/-- The composed summary acts as the composition of the actions. -/
theorem apply_andThen (first second : AffineSummary α keyDim valueDim)
    (S : Tensor α [keyDim, valueDim]) :
    (andThen first second).apply S = second.apply (first.apply S) := by
  simp only [apply_eq, andThen_eq, Tensor.matMul_add_right, Tensor.matMul_assoc, Tensor.add_assoc2]

/-- `(I, 0)` is a left unit of composition. -/
@[simp] theorem id_andThen (s : AffineSummary α keyDim valueDim) : andThen (id keyDim valueDim) s = s := by
  rw [andThen_eq]; apply ext'
  · exact Tensor.matMul_identity _
  · simp only [id, Tensor.matMul_zero]
    funext r c; simp only [Tensor.add_cons_apply, Tensor.add_nil]; grind

/-- `(I, 0)` is a right unit of composition. -/
@[simp] theorem andThen_id (s : AffineSummary α keyDim valueDim) : andThen s (id keyDim valueDim) = s := by
  rw [andThen_eq]; apply ext'
  · exact Tensor.identity_matMul _
  · simp only [id, Tensor.identity_matMul, Tensor.add_zero2]

/-- Composition of summaries is associative, so segments may be regrouped (a prefix scan is
licensed); it is not commutative (`andThen_not_comm_example`). -/
theorem andThen_assoc (s t u : AffineSummary α keyDim valueDim) :
    andThen (andThen s t) u = andThen s (andThen t u) := by
  simp only [andThen_eq]; apply ext'
  · exact (Tensor.matMul_assoc _ _ _).symm
  · simp only [Tensor.matMul_add_right, Tensor.matMul_assoc, Tensor.add_assoc2]

/-- The composed summary of a list acts as applying its summaries left to right. -/
theorem apply_compose (ss : List (AffineSummary α keyDim valueDim)) (S : Tensor α [keyDim, valueDim]) :
    (compose ss).apply S = ss.foldl (fun S s => s.apply S) S := by
  induction ss generalizing S with
  | nil => simp
  | cons s ss ih => rw [compose_cons, apply_andThen, ih, List.foldl_cons]

/-- Composing a concatenation composes the two parts' summaries (the append law). -/
theorem compose_append (ss tt : List (AffineSummary α keyDim valueDim)) :
    compose (ss ++ tt) = andThen (compose ss) (compose tt) := by
  induction ss with
  | nil => simp
  | cons s ss ih => rw [List.cons_append, compose_cons, compose_cons, ih, andThen_assoc]

end Field

section Example

variable [OrderedScalarField α]

/-- Summaries do not commute: with the scalar maps `A(s) = 2s + 1` and `B(s) = 3s`,
`B ∘ A = 6s + 3` but `A ∘ B = 6s + 1` (k3-spec §2.2). -/
theorem andThen_not_comm_example :
    let a : AffineSummary α 1 1 := ⟨fun _ _ => 2, fun _ _ => 1⟩
    let b : AffineSummary α 1 1 := ⟨fun _ _ => 3, fun _ _ => 0⟩
    andThen a b ≠ andThen b a := by
  intro a b h
  have h2 := congrArg (fun s => s.offset 0 0) h
  simp only [andThen, a, b, Seq.sum_eq, finSum_one] at h2
  grind

end Example

end AffineSummary

end KimiK3
