module

public import KimiK3.Sequence.Retention
public import KimiK3.Core.Sum

/-!
# Accumulated KDA log-decay over a chunk (k3-spec §1 "KDA chunk length", report §2.1.1)

The kernel processes chunks of 16 tokens; because every per-token log-decay lies in
`(g_min, 0)`, the accumulated log-decay of a chunk of `n + 1` tokens lies in
`((n + 1) g_min, 0)` (`sum_logDecay_bounds`), so at `g_min = −5` a 16-token chunk stays above
`−80` (`paper_chunk_logDecay_gt`). (`finSum_lt_finSum` is in
`Core/Sum.lean`.)
-/

@[expose] public section

namespace KimiK3

variable {α : Type}

namespace KDA

/-- **Accumulated log-decay over a chunk** (k3-spec §1, §2.1.1): over `n + 1` tokens the summed
log-decay stays strictly above `(n + 1) · g_min` (and below `0`). -/
theorem sum_logDecay_bounds [ScalarLaws α] {logFloor : α} (hf : logFloor < 0) (n : Nat)
    (logScale logit : Fin (n + 1) → α) :
    ((n + 1 : Nat) : α) * logFloor < finSum (n + 1) (fun t => logDecay logFloor (logScale t) (logit t)) ∧
      finSum (n + 1) (fun t => logDecay logFloor (logScale t) (logit t)) < 0 := by
  constructor
  · rw [← finSum_const]
    exact finSum_lt_finSum (fun t => (logDecay_bounds hf (logScale t) (logit t)).1)
  · have := finSum_lt_finSum (f := fun t => logDecay logFloor (logScale t) (logit t))
      (g := fun _ => (0 : α)) (fun t => (logDecay_bounds hf (logScale t) (logit t)).2)
    rw [finSum_const_zero] at this; exact this

/-- **The paper's chunk bound**: over a 16-token chunk at `g_min = −5` the accumulated log-decay
stays strictly above `−80` (k3-spec §1, §2.1.1). -/
theorem paper_chunk_logDecay_gt (logScale logit : Fin 16 → α) [ScalarLaws α] :
    (-80 : α) < finSum 16 (fun t => logDecay (-5) (logScale t) (logit t)) := by
  have h := (sum_logDecay_bounds (α := α) (logFloor := -5) (by grind) 15 logScale logit).1
  have e : (((15 + 1 : Nat) : α)) * (-5) = -80 := by grind
  rw [e] at h; exact h

end KDA

end KimiK3
