module

public import KimiK3.Sequence.Kernel
public import KimiK3.Core.ScalarFacts

/-!
# KDA retention: bounded decay (k3-spec §2.2 step 5, report Eq. 5)

The per-key-channel retention of KDA is `α = exp(g)` with the bounded log-decay
`g = g_min · σ(e^{s} · z)`, where `g_min < 0` is the log-decay floor (`−5` in K3), `s` a learned
log-scale and `z` the decay logit. Because the sigmoid lies strictly in `(0, 1)`, `g` lies
strictly in `(g_min, 0)` and so `e^{g_min} < α < 1` (`retention_bounds`); at the paper's
`g_min = −5` this is `paper_retention_bounds`. Proved from the scalar laws only (`retention` is defined in `Kernel.lean`).
-/

@[expose] public section

namespace KimiK3

namespace KDA

variable {α : Type}

section Laws

variable [ScalarLaws α]

/-- The log-decay lies strictly between the floor and zero when the floor is negative. -/
theorem logDecay_bounds {logFloor : α} (h : logFloor < 0) (logScale logit : α) :
    logFloor < logDecay logFloor logScale logit ∧ logDecay logFloor logScale logit < 0 := by
  unfold logDecay
  have h0 := sigmoid_pos (Scalar.exp logScale * logit)
  have h1 := sigmoid_lt_one (Scalar.exp logScale * logit)
  have hn : (0 : α) < -logFloor := by grind
  have a := Lean.Grind.OrderedRing.mul_lt_mul_of_pos_left h1 hn
  have b := Lean.Grind.OrderedRing.mul_lt_mul_of_pos_left h0 hn
  constructor <;> grind

/-- **Retention bounds** (report Eq. 5): for a negative floor `g_min`,
`e^{g_min} < α < 1`. -/
theorem retention_bounds {logFloor : α} (h : logFloor < 0) (logScale logit : α) :
    Scalar.exp logFloor < retention logFloor logScale logit ∧
      retention logFloor logScale logit < 1 := by
  have ⟨h1, h2⟩ := logDecay_bounds h logScale logit
  unfold retention
  refine ⟨ScalarLaws.exp_lt_exp h1, ?_⟩
  rw [← ScalarLaws.exp_zero (α := α)]
  exact ScalarLaws.exp_lt_exp h2

/-- **`paper_retention_bounds`** (report Eq. 5, `g_min = −5`): `e^{−5} < α < 1` for every
log-scale and logit. -/
theorem paper_retention_bounds (logScale logit : α) :
    Scalar.exp (-5 : α) < retention (-5) logScale logit ∧ retention (-5) logScale logit < 1 :=
  retention_bounds (by grind) logScale logit

/-- Retention is positive. -/
theorem retention_pos (logFloor logScale logit : α) : 0 < retention logFloor logScale logit :=
  ScalarLaws.exp_pos _

end Laws

end KDA

end KimiK3
