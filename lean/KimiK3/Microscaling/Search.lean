module

public import KimiK3.Microscaling.Kernel

/-!
# Binary search for the boundary of a predicate

`firstFalse p lo hi` (`Kernel.lean`) finds, by bisection, the least `k ∈ [lo, hi)` with
`p k = false`, or `hi` when `p` holds on all of `[lo, hi)`, for a predicate `p` that is antitone
on `[lo, hi)` (true on an initial segment, then false). The rounding functions and scale rules
of this folder are such searches; the theorems they need are `firstFalse_mem` (in `Kernel.lean`,
which the encoders' bounds use), `firstFalse_spec` and `firstFalse_eq_of`.
-/

@[expose] public section

namespace KimiK3.Microscaling

/-- **Specification.** For `p` antitone on `[lo, hi)`, `p` holds on `[lo, k)` for the result `k`,
and `p k = false` when `k < hi`. -/
theorem firstFalse_spec (p : Nat → Bool) (lo hi : Nat)
    (hanti : ∀ i j, lo ≤ i → i ≤ j → j < hi → p j = true → p i = true) :
    (∀ i, lo ≤ i → i < firstFalse p lo hi → p i = true) ∧
      (firstFalse p lo hi < hi → p (firstFalse p lo hi) = false) := by
  rw [firstFalse]
  split
  · rename_i h
    split
    · rename_i hm
      have hmem := firstFalse_mem p ((lo + hi) / 2 + 1) hi (by omega)
      obtain ⟨h3, h4⟩ := firstFalse_spec p ((lo + hi) / 2 + 1) hi
        (fun i j hi' hij hj => hanti i j (by omega) hij hj)
      refine ⟨fun i hi1 hi2 => ?_, h4⟩
      by_cases hc : i ≤ (lo + hi) / 2
      · exact hanti i ((lo + hi) / 2) hi1 hc (by omega) hm
      · exact h3 i (by omega) hi2
    · rename_i hm
      have hmem := firstFalse_mem p lo ((lo + hi) / 2) (by omega)
      obtain ⟨h3, h4⟩ := firstFalse_spec p lo ((lo + hi) / 2)
        (fun i j hi' hij hj => hanti i j hi' hij (by omega))
      refine ⟨h3, fun _ => ?_⟩
      by_cases hc : firstFalse p lo ((lo + hi) / 2) < (lo + hi) / 2
      · exact h4 hc
      · have e : firstFalse p lo ((lo + hi) / 2) = (lo + hi) / 2 := by omega
        rw [e]; simpa using hm
  · exact ⟨fun i h1 h2 => absurd h2 (by omega), fun h => absurd h (by omega)⟩
termination_by hi - lo
decreasing_by all_goals omega

/-- **Characterization.** For `p` antitone on `[0, n)`, the search from `0` returns the `k ≤ n`
such that `p` holds below `k` and fails at `k` (when `k < n`). -/
theorem firstFalse_eq_of (p : Nat → Bool) (n k : Nat) (hk : k ≤ n)
    (hanti : ∀ i j, i ≤ j → j < n → p j = true → p i = true)
    (hbelow : ∀ i, i < k → p i = true) (hat : k < n → p k = false) : firstFalse p 0 n = k := by
  have hmem := firstFalse_mem p 0 n (Nat.zero_le n)
  obtain ⟨h3, h4⟩ := firstFalse_spec p 0 n (fun i j _ hij hj => hanti i j hij hj)
  rcases Nat.lt_trichotomy (firstFalse p 0 n) k with hlt | heq | hgt
  · have e1 := hbelow _ hlt
    have e2 := h4 (by omega)
    rw [e1] at e2; exact absurd e2 (by decide)
  · exact heq
  · have e1 := h3 k (Nat.zero_le k) hgt
    have e2 := hat (by omega)
    rw [e1] at e2; exact absurd e2 (by decide)

end KimiK3.Microscaling
