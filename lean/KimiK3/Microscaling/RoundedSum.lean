module

public import KimiK3.Microscaling.RoundingModel

/-!
# Rounded sums and dot products (Higham §3.1, §4.2)

`roundedSum fl n x` is recursive summation with every addition rounded by `fl`
(`ŝ₀ = 0`, `ŝ_{k+1} = fl(ŝ_k + x_k)`); `roundedDot fl n x y` also rounds each product. For any
`fl` satisfying the standard model with unit roundoff `u`:

* `abs_roundedSum_sub_le` — `|ŝ − Σ x| ≤ ((1 + u)^n − 1) Σ |x_i|`;
* `abs_roundedSum_perturbed_sub_le` — summing terms that are already within `a |z_i|` of `z_i`:
  `((1 + u)^n (1 + a) − 1) Σ |z_i|`;
* `abs_roundedDot_sub_le` — `|fl(x·y) − x·y| ≤ ((1 + u)^(n+1) − 1) Σ |x_i y_i|`;
* `abs_roundedSum_sub_le_gamma`, `abs_roundedDot_sub_le_gamma` — the same with `γ_n`,
  `γ_{n+1}` (for `n u < 1`). (Real hardware's first addition `0 + x₀` is exact, so it meets
  `γ_{n−1}`; the bound here counts every addition.)
-/

@[expose] public section

namespace KimiK3.Rounding

open KimiK3

variable {α : Type}

/-- **Recursive summation with rounding** (Higham §4.2): `ŝ₀ = 0`, `ŝ_{k+1} = fl(ŝ_k + x_k)`. -/
def roundedSum [Scalar α] (fl : α → α) : (n : Nat) → (Fin n → α) → α
  | 0, _ => 0
  | n + 1, x => fl (roundedSum fl n (fun i => x i.castSucc) + x (Fin.last n))

/-- **Rounded dot product**: each product rounded, then a rounded sum. -/
def roundedDot [Scalar α] (fl : α → α) (n : Nat) (x y : Fin n → α) : α :=
  roundedSum fl n (fun i => fl (x i * y i))

variable [OrderedScalarField α] {u : α} {fl : α → α}

/-- **Error of a rounded sum**: `|ŝ − Σ x| ≤ ((1 + u)^n − 1) Σ |x_i|`. -/
theorem abs_roundedSum_sub_le (hu : 0 ≤ u) (hfl : ∀ z, RoundsTo u z (fl z)) (n : Nat) (x : Fin n → α) :
    Scalar.abs (roundedSum fl n x - finSum n x) ≤
      ((1 + u) ^ n - 1) * finSum n (fun i => Scalar.abs (x i)) := by
  induction n with
  | zero =>
    show Scalar.abs ((0 : α) - 0) ≤ ((1 + u) ^ 0 - 1) * 0
    rw [Lean.Grind.Semiring.pow_zero, abs_of_nonneg (by grind)]; grind
  | succ n ih =>
    have ih' := ih (fun i => x i.castSucc)
    show Scalar.abs (fl (roundedSum fl n (fun i => x i.castSucc) + x (Fin.last n)) -
      finSum (n + 1) x) ≤ _
    rw [finSum_succ, finSum_succ (f := fun i => Scalar.abs (x i)), Lean.Grind.Semiring.pow_succ]
    -- names: ŝ the rounded partial sum, s the exact one, S the sum of magnitudes, z the new term
    have hr := (hfl (roundedSum fl n (fun i => x i.castSucc) + x (Fin.last n))).abs_sub_le
    have hs := abs_finSum_le n (fun i => x i.castSucc)
    have hS := finSum_nonneg (n := n) (f := fun i => Scalar.abs (x i.castSucc)) (fun i => abs_nonneg _)
    have hc := one_add_pow_sub_one_nonneg hu n
    have t1 := abs_add_le (finSum n (fun i => x i.castSucc))
      (roundedSum fl n (fun i => x i.castSucc) - finSum n (fun i => x i.castSucc))
    have t2 := abs_add_le (finSum n (fun i => x i.castSucc) +
      (roundedSum fl n (fun i => x i.castSucc) - finSum n (fun i => x i.castSucc))) (x (Fin.last n))
    have e1 : finSum n (fun i => x i.castSucc) +
        (roundedSum fl n (fun i => x i.castSucc) - finSum n (fun i => x i.castSucc)) + x (Fin.last n) =
        roundedSum fl n (fun i => x i.castSucc) + x (Fin.last n) := by grind
    rw [e1] at t2
    have t3 := abs_add_le (fl (roundedSum fl n (fun i => x i.castSucc) + x (Fin.last n)) -
      (roundedSum fl n (fun i => x i.castSucc) + x (Fin.last n)))
      (roundedSum fl n (fun i => x i.castSucc) - finSum n (fun i => x i.castSucc))
    have e2 : fl (roundedSum fl n (fun i => x i.castSucc) + x (Fin.last n)) -
        (roundedSum fl n (fun i => x i.castSucc) + x (Fin.last n)) +
        (roundedSum fl n (fun i => x i.castSucc) - finSum n (fun i => x i.castSucc)) =
        fl (roundedSum fl n (fun i => x i.castSucc) + x (Fin.last n)) -
          (finSum n (fun i => x i.castSucc) + x (Fin.last n)) := by grind
    rw [e2] at t3
    have hb : Scalar.abs (roundedSum fl n (fun i => x i.castSucc) + x (Fin.last n)) ≤
        finSum n (fun i => Scalar.abs (x i.castSucc)) +
          ((1 + u) ^ n - 1) * finSum n (fun i => Scalar.abs (x i.castSucc)) + Scalar.abs (x (Fin.last n)) := by
      grind
    have p1 := mul_le_mul_of_nonneg_left' hb hu
    have p2 := mul_nonneg' (mul_nonneg' hc (show (0 : α) ≤ 1 + u by grind)) (abs_nonneg (x (Fin.last n)))
    grind

/-- **Summing perturbed terms**: if `|p_i − z_i| ≤ a |z_i|`, then
`|fl(Σ p) − Σ z| ≤ ((1 + u)^n (1 + a) − 1) Σ |z_i|`. -/
theorem abs_roundedSum_perturbed_sub_le (hu : 0 ≤ u) {a : α} (ha : 0 ≤ a)
    (hfl : ∀ z, RoundsTo u z (fl z)) (n : Nat) (p z : Fin n → α)
    (hp : ∀ i, Scalar.abs (p i - z i) ≤ a * Scalar.abs (z i)) :
    Scalar.abs (roundedSum fl n p - finSum n z) ≤
      ((1 + u) ^ n * (1 + a) - 1) * finSum n (fun i => Scalar.abs (z i)) := by
  have h1 := abs_roundedSum_sub_le hu hfl n p
  have h2 : Scalar.abs (finSum n p - finSum n z) ≤ a * finSum n (fun i => Scalar.abs (z i)) := by
    rw [← finSum_sub, ← finSum_mul_left]
    exact Std.le_trans (abs_finSum_le _ _) (finSum_le_finSum hp)
  have h3 : finSum n (fun i => Scalar.abs (p i)) ≤ (1 + a) * finSum n (fun i => Scalar.abs (z i)) := by
    rw [← finSum_mul_left]
    refine finSum_le_finSum (fun i => ?_)
    have t := abs_add_le (z i) (p i - z i)
    have e : z i + (p i - z i) = p i := by grind
    rw [e] at t; have := hp i; grind
  have hc := one_add_pow_sub_one_nonneg hu n
  have p3 := mul_le_mul_of_nonneg_left' h3 hc
  have t := abs_add_le (roundedSum fl n p - finSum n p) (finSum n p - finSum n z)
  have e : roundedSum fl n p - finSum n p + (finSum n p - finSum n z) = roundedSum fl n p - finSum n z := by
    grind
  rw [e] at t
  grind

/-- **Error of a rounded dot product**: `|fl(x·y) − Σ x_i y_i| ≤ ((1 + u)^(n+1) − 1) Σ |x_i y_i|`. -/
theorem abs_roundedDot_sub_le (hu : 0 ≤ u) (hfl : ∀ z, RoundsTo u z (fl z)) (n : Nat) (x y : Fin n → α) :
    Scalar.abs (roundedDot fl n x y - finSum n (fun i => x i * y i)) ≤
      ((1 + u) ^ (n + 1) - 1) * finSum n (fun i => Scalar.abs (x i * y i)) := by
  have := abs_roundedSum_perturbed_sub_le hu hu hfl n (fun i => fl (x i * y i)) (fun i => x i * y i)
    (fun i => (hfl (x i * y i)).abs_sub_le)
  rw [← Lean.Grind.Semiring.pow_succ] at this
  exact this

/-- `|ŝ − Σ x| ≤ γ_n Σ |x_i|` for `n u < 1`. -/
theorem abs_roundedSum_sub_le_gamma (hu : 0 ≤ u) (hfl : ∀ z, RoundsTo u z (fl z)) (n : Nat)
    (hn : (n : α) * u < 1) (x : Fin n → α) :
    Scalar.abs (roundedSum fl n x - finSum n x) ≤ gamma n u * finSum n (fun i => Scalar.abs (x i)) :=
  Std.le_trans (abs_roundedSum_sub_le hu hfl n x) (mul_le_mul_of_nonneg_right'
    (one_add_pow_sub_one_le_gamma hu hn) (finSum_nonneg (fun i => abs_nonneg _)))

/-- `|fl(x·y) − Σ x_i y_i| ≤ γ_{n+1} Σ |x_i y_i|` for `(n + 1) u < 1`. -/
theorem abs_roundedDot_sub_le_gamma (hu : 0 ≤ u) (hfl : ∀ z, RoundsTo u z (fl z)) (n : Nat)
    (hn : ((n + 1 : Nat) : α) * u < 1) (x y : Fin n → α) :
    Scalar.abs (roundedDot fl n x y - finSum n (fun i => x i * y i)) ≤
      gamma (n + 1) u * finSum n (fun i => Scalar.abs (x i * y i)) :=
  Std.le_trans (abs_roundedDot_sub_le hu hfl n x y) (mul_le_mul_of_nonneg_right'
    (one_add_pow_sub_one_le_gamma hu hn) (finSum_nonneg (fun i => abs_nonneg _)))

end KimiK3.Rounding
