module

public import KimiK3.Sequence.KDAWYChunk
public import KimiK3.Exec.RatScalar

/-!
# The WY/UT chunk form on an exact example (k3-spec §2.2)

A head with two key rows and one value column, incoming state `S₀ = [1; 2]`, three tokens

* `q = (1, 0)`, `k = (1, 0)`, `v = 3`, `α = (1/2, 1)`, `β = 1/2`;
* `q = (0, 1)`, `k = (1, 1)`, `v = −1`, `α = (1/2, 1/2)`, `β = 1/4`;
* `q = (1, 1)`, `k = (0, 1)`, `v = 2`, `α = (1, 1/2)`, `β = 1`.

The token recurrence by hand (exact fractions, also `fractions.Fraction` in Python) reads
`7/4, 9/32, 69/32` and ends in `[5/32; 2]`. Evaluated at `Rat` in the kernel (`decide +kernel`):
the WY/UT form as one chunk of three (`wyChunk_example`), as chunks `[2, 1]`
(`wyChunkedRun_example`), and the token-by-token scan (`run_example`) all give these numbers.
-/

@[expose] public section

noncomputable section

namespace KimiK3

namespace KDA

namespace WYExample

/-- The vector `(a, b)`. -/
def vec2 (a b : Rat) : Tensor Rat [2] := fun i => if i.val = 0 then a else b

/-- The three tokens of the example. -/
def tokens : List (Input Rat 2 1) :=
  [⟨vec2 1 0, vec2 1 0, fun _ => 3, vec2 (1 / 2) 1, 1 / 2⟩,
   ⟨vec2 0 1, vec2 1 1, fun _ => -1, vec2 (1 / 2) (1 / 2), 1 / 4⟩,
   ⟨vec2 1 1, vec2 0 1, fun _ => 2, vec2 1 (1 / 2), 1⟩]

/-- The incoming state `[1; 2]`. -/
def S₀ : State Rat 2 1 := fun i _ => if i.val = 0 then 1 else 2

/-- A run's outputs and final state as a list of numbers: `o_0, o_1, o_2, S[0,0], S[1,0]`. -/
def flat (r : State Rat 2 1 × List (Tensor Rat [1])) : List Rat :=
  r.2.map (fun o => o 0) ++ [r.1 0 0, r.1 1 0]

/-- The WY/UT form, one chunk of three tokens. -/
theorem wyChunk_example : flat (wyChunk S₀ tokens) = [7 / 4, 9 / 32, 69 / 32, 5 / 32, 2] := by
  decide +kernel

/-- The WY/UT form, chunks of two and one tokens. -/
theorem wyChunkedRun_example :
    flat (wyChunkedRun S₀ [tokens.take 2, tokens.drop 2]) = [7 / 4, 9 / 32, 69 / 32, 5 / 32, 2] := by
  decide +kernel

/-- The token-by-token scan. -/
theorem run_example : flat (CausalScan.run step S₀ tokens) = [7 / 4, 9 / 32, 69 / 32, 5 / 32, 2] := by
  decide +kernel

end WYExample

end KDA

end KimiK3

end
