module

public import KimiK3.Microscaling.RoundingModel

/-!
# Rounded sums and dot products (Higham §3.1, §4.2)

`roundedSum fl n x` is recursive summation with every addition rounded by `fl`
(`ŝ₁ = x₀`, `ŝ_{k+1} = fl(ŝ_k + x_k)`: `n − 1` rounded additions, as in Higham §4.2);
`roundedDot fl n x y` also rounds each product (`n` products and `n − 1` additions). For any
`fl` satisfying the standard model with unit roundoff `u`:

* `abs_roundedSum_sub_le` — for `n + 1` terms, `|ŝ − Σ x| ≤ ((1 + u)^n − 1) Σ |x_i|`;
* `abs_roundedSum_perturbed_sub_le` — summing `n + 1` terms that are already within `a |z_i|`
  of `z_i`: `((1 + u)^n (1 + a) − 1) Σ |z_i|`;
* `abs_roundedDot_sub_le` — for length `n + 1`, `|fl(x·y) − x·y| ≤ ((1 + u)^(n+1) − 1) Σ |x_i y_i|`;
* **`abs_roundedSum_sub_le_gamma`**, **`abs_roundedDot_sub_le_gamma`** — the same with `γ_n`
  (a sum of `n + 1` terms) and `γ_{n+1}` (a dot product of length `n + 1`), for `(n+1) u < 1`:
  Higham's Lemma 3.1 bounds, the `γ_n` of `docs/tolerances.md` (a length-`n` dot product: `γ_n`;
  a sum of `n` terms: `γ_{n−1} ≤ γ_n`).
-/

@[expose] public section

namespace KimiK3.Rounding

open KimiK3

variable {α : Type}

/-- **Recursive summation with rounding** (Higham §4.2): `ŝ₁ = x₀`, `ŝ_{k+1} = fl(ŝ_k + x_k)`
(`0` for no terms). -/
def roundedSum [Scalar α] (fl : α → α) : (n : Nat) → (Fin n → α) → α
  | 0, _ => 0
  | 1, x => x 0
  | n + 2, x => fl (roundedSum fl (n + 1) (fun i => x i.castSucc) + x (Fin.last (n + 1)))

/-- **Rounded dot product**: each product rounded, then a rounded sum. -/
def roundedDot [Scalar α] (fl : α → α) (n : Nat) (x y : Fin n → α) : α :=
  roundedSum fl n (fun i => fl (x i * y i))

variable [OrderedScalarField α] {u : α} {fl : α → α}

/-- **Error of a rounded sum** of `n + 1` terms: `|ŝ − Σ x| ≤ ((1 + u)^n − 1) Σ |x_i|`. -/
theorem abs_roundedSum_sub_le (hu : 0 ≤ u) (hfl : ∀ z, RoundsTo u z (fl z)) (n : Nat)
    (x : Fin (n + 1) → α) :
    Scalar.abs (roundedSum fl (n + 1) x - finSum (n + 1) x) ≤
      ((1 + u) ^ n - 1) * finSum (n + 1) (fun i => Scalar.abs (x i)) := by
  induction n with
  | zero =>
    show Scalar.abs (x 0 - finSum 1 x) ≤ ((1 + u) ^ 0 - 1) * finSum 1 (fun i => Scalar.abs (x i))
    rw [finSum_one, finSum_one, Lean.Grind.Semiring.pow_zero]
    rw [show x 0 - x 0 = 0 by grind, abs_zero']; grind
  | succ n ih =>
    have ih' := ih (fun i => x i.castSucc)
    show Scalar.abs (fl (roundedSum fl (n + 1) (fun i => x i.castSucc) + x (Fin.last (n + 1))) -
      finSum (n + 1 + 1) x) ≤ _
    rw [finSum_succ, finSum_succ (f := fun i => Scalar.abs (x i)), Lean.Grind.Semiring.pow_succ]
    -- names: ŝ the rounded partial sum, s the exact one, S the sum of magnitudes, z the new term
    have hr := (hfl (roundedSum fl (n + 1) (fun i => x i.castSucc) + x (Fin.last (n + 1)))).abs_sub_le
    have hs := abs_finSum_le (n + 1) (fun i => x i.castSucc)
    have hS := finSum_nonneg (n := n + 1) (f := fun i => Scalar.abs (x i.castSucc)) (fun i => abs_nonneg _)
    have hc := one_add_pow_sub_one_nonneg hu n
    have t1 := abs_add_le (finSum (n + 1) (fun i => x i.castSucc))
      (roundedSum fl (n + 1) (fun i => x i.castSucc) - finSum (n + 1) (fun i => x i.castSucc))
    have t2 := abs_add_le (finSum (n + 1) (fun i => x i.castSucc) +
      (roundedSum fl (n + 1) (fun i => x i.castSucc) - finSum (n + 1) (fun i => x i.castSucc))) (x (Fin.last (n + 1)))
    have e1 : finSum (n + 1) (fun i => x i.castSucc) +
        (roundedSum fl (n + 1) (fun i => x i.castSucc) - finSum (n + 1) (fun i => x i.castSucc)) + x (Fin.last (n + 1)) =
        roundedSum fl (n + 1) (fun i => x i.castSucc) + x (Fin.last (n + 1)) := by grind
    rw [e1] at t2
    have t3 := abs_add_le (fl (roundedSum fl (n + 1) (fun i => x i.castSucc) + x (Fin.last (n + 1))) -
      (roundedSum fl (n + 1) (fun i => x i.castSucc) + x (Fin.last (n + 1))))
      (roundedSum fl (n + 1) (fun i => x i.castSucc) - finSum (n + 1) (fun i => x i.castSucc))
    have e2 : fl (roundedSum fl (n + 1) (fun i => x i.castSucc) + x (Fin.last (n + 1))) -
        (roundedSum fl (n + 1) (fun i => x i.castSucc) + x (Fin.last (n + 1))) +
        (roundedSum fl (n + 1) (fun i => x i.castSucc) - finSum (n + 1) (fun i => x i.castSucc)) =
        fl (roundedSum fl (n + 1) (fun i => x i.castSucc) + x (Fin.last (n + 1))) -
          (finSum (n + 1) (fun i => x i.castSucc) + x (Fin.last (n + 1))) := by grind
    rw [e2] at t3
    have hb : Scalar.abs (roundedSum fl (n + 1) (fun i => x i.castSucc) + x (Fin.last (n + 1))) ≤
        finSum (n + 1) (fun i => Scalar.abs (x i.castSucc)) +
          ((1 + u) ^ n - 1) * finSum (n + 1) (fun i => Scalar.abs (x i.castSucc)) +
            Scalar.abs (x (Fin.last (n + 1))) := by
      grind
    have p1 := mul_le_mul_of_nonneg_left' hb hu
    have p2 := mul_nonneg' (mul_nonneg' hc (show (0 : α) ≤ 1 + u by grind)) (abs_nonneg (x (Fin.last (n + 1))))
    grind

/-- **Summing perturbed terms**: if `|p_i − z_i| ≤ a |z_i|` for `n + 1` terms, then
`|fl(Σ p) − Σ z| ≤ ((1 + u)^n (1 + a) − 1) Σ |z_i|`. -/
theorem abs_roundedSum_perturbed_sub_le (hu : 0 ≤ u) {a : α}
    (hfl : ∀ z, RoundsTo u z (fl z)) (n : Nat) (p z : Fin (n + 1) → α)
    (hp : ∀ i, Scalar.abs (p i - z i) ≤ a * Scalar.abs (z i)) :
    Scalar.abs (roundedSum fl (n + 1) p - finSum (n + 1) z) ≤
      ((1 + u) ^ n * (1 + a) - 1) * finSum (n + 1) (fun i => Scalar.abs (z i)) := by
  have h1 := abs_roundedSum_sub_le hu hfl n p
  have h2 : Scalar.abs (finSum (n + 1) p - finSum (n + 1) z) ≤ a * finSum (n + 1) (fun i => Scalar.abs (z i)) := by
    rw [← finSum_sub, ← finSum_mul_left]
    exact Std.le_trans (abs_finSum_le _ _) (finSum_le_finSum hp)
  have h3 : finSum (n + 1) (fun i => Scalar.abs (p i)) ≤ (1 + a) * finSum (n + 1) (fun i => Scalar.abs (z i)) := by
    rw [← finSum_mul_left]
    refine finSum_le_finSum (fun i => ?_)
    have t := abs_add_le (z i) (p i - z i)
    have e : z i + (p i - z i) = p i := by grind
    rw [e] at t; have := hp i; grind
  have hc := one_add_pow_sub_one_nonneg hu n
  have p3 := mul_le_mul_of_nonneg_left' h3 hc
  have t := abs_add_le (roundedSum fl (n + 1) p - finSum (n + 1) p) (finSum (n + 1) p - finSum (n + 1) z)
  have e : roundedSum fl (n + 1) p - finSum (n + 1) p + (finSum (n + 1) p - finSum (n + 1) z) =
      roundedSum fl (n + 1) p - finSum (n + 1) z := by
    grind
  rw [e] at t
  grind

/-- **Error of a rounded dot product** of length `n + 1`:
`|fl(x·y) − Σ x_i y_i| ≤ ((1 + u)^(n+1) − 1) Σ |x_i y_i|`. -/
theorem abs_roundedDot_sub_le (hu : 0 ≤ u) (hfl : ∀ z, RoundsTo u z (fl z)) (n : Nat)
    (x y : Fin (n + 1) → α) :
    Scalar.abs (roundedDot fl (n + 1) x y - finSum (n + 1) (fun i => x i * y i)) ≤
      ((1 + u) ^ (n + 1) - 1) * finSum (n + 1) (fun i => Scalar.abs (x i * y i)) := by
  have := abs_roundedSum_perturbed_sub_le hu hfl n (fun i => fl (x i * y i)) (fun i => x i * y i)
    (fun i => (hfl (x i * y i)).abs_sub_le)
  rw [← Lean.Grind.Semiring.pow_succ] at this
  exact this

/-- **`γ_n` for a sum** of `n + 1` terms: `|ŝ − Σ x| ≤ γ_n Σ |x_i|` for `n u < 1`. -/
theorem abs_roundedSum_sub_le_gamma (hu : 0 ≤ u) (hfl : ∀ z, RoundsTo u z (fl z)) (n : Nat)
    (hn : (n : α) * u < 1) (x : Fin (n + 1) → α) :
    Scalar.abs (roundedSum fl (n + 1) x - finSum (n + 1) x) ≤
      gamma n u * finSum (n + 1) (fun i => Scalar.abs (x i)) :=
  Std.le_trans (abs_roundedSum_sub_le hu hfl n x) (mul_le_mul_of_nonneg_right'
    (one_add_pow_sub_one_le_gamma hu hn) (finSum_nonneg (fun _ => abs_nonneg _)))

/-- **`γ_n` for a dot product** of length `n`: `|fl(x·y) − Σ x_i y_i| ≤ γ_n Σ |x_i y_i|` for
`n u < 1` (stated at length `n + 1`). -/
theorem abs_roundedDot_sub_le_gamma (hu : 0 ≤ u) (hfl : ∀ z, RoundsTo u z (fl z)) (n : Nat)
    (hn : ((n + 1 : Nat) : α) * u < 1) (x y : Fin (n + 1) → α) :
    Scalar.abs (roundedDot fl (n + 1) x y - finSum (n + 1) (fun i => x i * y i)) ≤
      gamma (n + 1) u * finSum (n + 1) (fun i => Scalar.abs (x i * y i)) :=
  Std.le_trans (abs_roundedDot_sub_le hu hfl n x y) (mul_le_mul_of_nonneg_right'
    (one_add_pow_sub_one_le_gamma hu hn) (finSum_nonneg (fun _ => abs_nonneg _)))

end KimiK3.Rounding
