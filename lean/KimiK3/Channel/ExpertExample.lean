module

public import KimiK3.Channel.Expert
public import KimiK3.Core.ScalarFacts

/-!
# The toy expert of k3-spec §2.6, checked exactly

`Expert 2 2 1` with `x = [1, 2]`, `G = I`, `U = diag(2, 3)`, `D = [[1], [−1]]`, caps 4 and 25.
`toyExpert_forward` proves, over any scalar field, that the gate projection is `(1, 2)`, the up
projection `(2, 6)` and the output `SiTU(4, 25, 1, 2) − SiTU(4, 25, 2, 6)`
(≈ 1.429351 − 9.585417 = −8.156066 at `Float`; see `tests/test_channel.py`). This pins down the
`[in, out]` wiring of all three weights. `toyExpert_bound`: `|y₀| ≤ 100 · (|1| + |−1|) = 200`.
-/

@[expose] public section

namespace KimiK3

namespace ExpertExample

variable {α : Type}

/-- The toy expert: `G = I`, `U = diag(2, 3)`, `D = [[1], [−1]]`. -/
def toyExpert [Scalar α] : Expert α 2 2 1 where
  gateWeight := fun i j => if i.val = j.val then 1 else 0
  upWeight := fun i j => if i.val = j.val then (if i.val = 0 then 2 else 3) else 0
  downWeight := fun j _ => if j.val = 0 then 1 else -1

/-- The toy input `x = [1, 2]`. -/
def toyInput [Scalar α] : Tensor α [2] := fun i => if i.val = 0 then 1 else 2

/-- Exact value of the toy expert: `y₀ = SiTU(4, 25, 1, 2) − SiTU(4, 25, 2, 6)`. -/
theorem toyExpert_forward [ScalarField α] :
    (toyExpert (α := α)).forward 4 25 toyInput 0 = SiTU.scalar 4 25 1 2 - SiTU.scalar 4 25 2 6 := by
  rw [Expert.forward_apply]
  simp only [finSum_succ, finSum_zero, toyExpert, toyInput]
  simp
  have g0 : (0 : α) + 1 * 1 + 2 * 0 = 1 := by grind
  have g1 : (0 : α) + 1 * 0 + 2 * 1 = 2 := by grind
  have u0 : (0 : α) + 1 * 2 + 2 * 0 = 2 := by grind
  have u1 : (0 : α) + 1 * 0 + 2 * 3 = 6 := by grind
  first
    | (rw [g0, g1, u0, u1]; grind)
    | grind

/-- The output bound of the toy expert: `|y₀| ≤ 100 · (|1| + |−1|) = 200`. -/
theorem toyExpert_bound [ScalarLaws α] :
    Scalar.abs ((toyExpert (α := α)).forward 4 25 toyInput 0) ≤ 200 := by
  have h := Expert.abs_forward_le_paper (toyExpert (α := α)) toyInput 0
  have h1 : Scalar.abs (1 : α) = 1 := abs_of_nonneg (by have := zero_lt_one' (α := α); grind)
  have h2 : Scalar.abs (-1 : α) = 1 := by rw [abs_neg']; exact h1
  have hs : finSum 2 (fun j => Scalar.abs ((toyExpert (α := α)).downWeight j 0)) = 2 := by
    simp only [finSum_succ, finSum_zero, toyExpert]
    simp [h1, h2]
    grind
  rw [hs] at h; grind

end ExpertExample

end KimiK3
