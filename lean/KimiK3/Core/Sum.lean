module

public import KimiK3.Core.ScalarFacts
public import KimiK3.Core.Kernel

/-!
# Finite sums over `Fin n`

`finSum n f = f 0 + … + f (n-1)` (defined in `Kernel`, last element added last), with
the lemmas later proofs need: linearity, splitting `Fin (m + n)`, first and last element,
swapping double sums, `|Σ f| ≤ Σ |f|`, monotonicity, sums of zero and of constants.
-/

@[expose] public section

namespace KimiK3

variable {α : Type}

/-- The empty sum is zero. -/
@[simp] theorem finSum_zero [Scalar α] (f : Fin 0 → α) : finSum 0 f = 0 := rfl

/-- Splitting off the last term. -/
theorem finSum_succ [Scalar α] (n : Nat) (f : Fin (n + 1) → α) :
    finSum (n + 1) f = finSum n (fun i => f i.castSucc) + f (Fin.last n) := rfl

section Field

variable [ScalarField α]

/-- Sums are determined by their terms. -/
theorem finSum_congr {n : Nat} {f g : Fin n → α} (h : ∀ i, f i = g i) :
    finSum n f = finSum n g := by
  rw [funext h]

/-- A one-term sum is that term. -/
@[simp] theorem finSum_one (f : Fin 1 → α) : finSum 1 f = f 0 := by
  simp only [finSum_succ, finSum_zero]; grind

/-- Splitting off the first term. -/
theorem finSum_succ' (n : Nat) (f : Fin (n + 1) → α) :
    finSum (n + 1) f = f 0 + finSum n (fun i => f i.succ) := by
  induction n with
  | zero => simp only [finSum_succ, finSum_zero]; grind
  | succ n ih =>
    rw [finSum_succ, ih, finSum_succ]
    have h1 : (0 : Fin (n + 1)).castSucc = (0 : Fin (n + 2)) := rfl
    have h2 : ∀ i : Fin n, i.castSucc.succ = i.succ.castSucc := fun _ => rfl
    have h3 : (Fin.last n).succ = Fin.last (n + 1) := rfl
    rw [h1, h3]; simp only [h2]; grind

/-- The sum of zeros is zero. -/
@[simp] theorem finSum_const_zero (n : Nat) : finSum n (fun _ => (0 : α)) = 0 := by
  induction n with
  | zero => rfl
  | succ n ih => rw [finSum_succ, ih]; grind

/-- The sum of a constant is the count times the constant. -/
theorem finSum_const (n : Nat) (c : α) : finSum n (fun _ => c) = (n : α) * c := by
  induction n with
  | zero => simp only [finSum_zero]; grind
  | succ n ih => rw [finSum_succ, ih]; grind

/-- Sums are additive. -/
theorem finSum_add (n : Nat) (f g : Fin n → α) :
    finSum n (fun i => f i + g i) = finSum n f + finSum n g := by
  induction n with
  | zero => simp only [finSum_zero]; grind
  | succ n ih => rw [finSum_succ, finSum_succ, finSum_succ, ih]; grind

/-- Sums commute with negation. -/
theorem finSum_neg (n : Nat) (f : Fin n → α) :
    finSum n (fun i => -f i) = -finSum n f := by
  induction n with
  | zero => simp only [finSum_zero]; grind
  | succ n ih => rw [finSum_succ, finSum_succ, ih]; grind

/-- Sums commute with subtraction. -/
theorem finSum_sub (n : Nat) (f g : Fin n → α) :
    finSum n (fun i => f i - g i) = finSum n f - finSum n g := by
  induction n with
  | zero => simp only [finSum_zero]; grind
  | succ n ih => rw [finSum_succ, finSum_succ, finSum_succ, ih]; grind

/-- A constant factor on the left comes out of a sum. -/
theorem finSum_mul_left (n : Nat) (c : α) (f : Fin n → α) :
    finSum n (fun i => c * f i) = c * finSum n f := by
  induction n with
  | zero => simp only [finSum_zero]; grind
  | succ n ih => rw [finSum_succ, finSum_succ, ih]; grind

/-- A constant factor on the right comes out of a sum. -/
theorem finSum_mul_right (n : Nat) (c : α) (f : Fin n → α) :
    finSum n (fun i => f i * c) = finSum n f * c := by
  induction n with
  | zero => simp only [finSum_zero]; grind
  | succ n ih => rw [finSum_succ, finSum_succ, ih]; grind

/-- Dividing every term divides the sum. -/
theorem finSum_div (n : Nat) (c : α) (f : Fin n → α) :
    finSum n (fun i => f i / c) = finSum n f / c := by
  simp only [Lean.Grind.Field.div_eq_mul_inv]; exact finSum_mul_right n c⁻¹ f

/-- A sum over `Fin (m + n)` splits into a sum over the first `m` and the last `n` indices. -/
theorem finSum_append (m n : Nat) (f : Fin (m + n) → α) :
    finSum (m + n) f =
      finSum m (fun i => f (Fin.castAdd n i)) + finSum n (fun j => f (Fin.natAdd m j)) := by
  induction n with
  | zero => rw [finSum_zero]; exact (Lean.Grind.Semiring.add_zero _).symm
  | succ n ih =>
    show finSum (m + n + 1) f = _
    rw [finSum_succ (m + n), ih, finSum_succ n]
    have h1 : ∀ i : Fin m, (Fin.castAdd n i).castSucc = Fin.castAdd (n + 1) i := fun _ => rfl
    have h2 : ∀ j : Fin n, (Fin.natAdd m j).castSucc = Fin.natAdd m j.castSucc := fun _ => rfl
    have h3 : Fin.last (m + n) = Fin.natAdd m (Fin.last n) := rfl
    simp only [h1, h2, h3]; grind

/-- Double sums can be taken in either order. -/
theorem finSum_comm (m n : Nat) (f : Fin m → Fin n → α) :
    finSum m (fun i => finSum n (fun j => f i j)) =
      finSum n (fun j => finSum m (fun i => f i j)) := by
  induction m with
  | zero => simp only [finSum_zero, finSum_const_zero]
  | succ m ih =>
    rw [finSum_succ, ih, ← finSum_add]
    rfl

/-- Summing against a Kronecker delta picks out one term (delta on the left). -/
theorem finSum_delta_mul : ∀ (n : Nat) (j : Fin n) (f : Fin n → α),
    finSum n (fun i => (if i = j then 1 else 0) * f i) = f j
  | 0, j, _ => j.elim0
  | n + 1, j, f => by
    rw [finSum_succ']
    cases j using Fin.cases with
    | zero =>
      have h : ∀ i : Fin n, ((if i.succ = (0 : Fin (n + 1)) then (1 : α) else 0) * f i.succ) = 0 :=
        fun i => by simp [Fin.succ_ne_zero]; grind
      rw [finSum_congr h, finSum_const_zero]; simp; grind
    | succ j =>
      have h : ∀ i : Fin n, ((if i.succ = j.succ then (1 : α) else 0) * f i.succ) =
          (if i = j then 1 else 0) * f i.succ := fun i => by simp [Fin.succ_inj]
      rw [finSum_congr h, finSum_delta_mul n j (fun i => f i.succ)]
      have : ((0 : Fin (n + 1)) = j.succ) = False := by simp [(Fin.succ_ne_zero j).symm]
      simp only [this, if_false]; grind

/-- Summing against a Kronecker delta picks out one term (delta on the left, other order). -/
theorem finSum_delta_mul' (n : Nat) (j : Fin n) (f : Fin n → α) :
    finSum n (fun i => (if j = i then 1 else 0) * f i) = f j := by
  rw [← finSum_delta_mul n j f]; apply finSum_congr; intro i
  by_cases h : i = j
  · subst h; rfl
  · have h' : ¬ j = i := fun e => h e.symm
    simp [h, h']

/-- Summing against a Kronecker delta picks out one term (delta on the right). -/
theorem finSum_mul_delta (n : Nat) (j : Fin n) (f : Fin n → α) :
    finSum n (fun i => f i * (if i = j then 1 else 0)) = f j := by
  rw [← finSum_delta_mul n j f]; apply finSum_congr; intro i; grind

/-- A sum over `Fin T` of terms masked to the positions `j ≤ t` (`t < T`) is the sum over the
first `t + 1` positions. -/
theorem finSum_mask : ∀ (T t : Nat) (_ : t < T) (g : Fin T → α),
    finSum T (fun j => if j.val ≤ t then g j else 0) = finSum (t + 1) (fun j => g ⟨j.val, by omega⟩)
  | 0, _, ht, _ => absurd ht (Nat.not_lt_zero _)
  | T + 1, t, ht, g => by
    rw [finSum_succ]
    by_cases h : t = T
    · subst h
      have hl : (Fin.last t).val ≤ t := by simp
      rw [if_pos hl, finSum_succ]
      congr 1
      apply finSum_congr; intro j
      have hj : (Fin.castSucc j).val ≤ t := by rw [Fin.val_castSucc]; omega
      rw [if_pos hj]
    · have hlt : t < T := by omega
      have hl : ¬ (Fin.last T).val ≤ t := by simp; omega
      rw [if_neg hl]
      have := finSum_mask T t hlt (fun j => g j.castSucc)
      simp only [Fin.val_castSucc] at this ⊢
      rw [this]; exact Lean.Grind.Semiring.add_zero _

/-- A sum of four terms, left to right. -/
theorem finSum_four (f : Fin 4 → α) : finSum 4 f = ((f 0 + f 1) + f 2) + f 3 := by
  have h : finSum 4 f = (((0 + f 0) + f 1) + f 2) + f 3 := rfl
  rw [h]; grind

end Field

section Ordered

variable [OrderedScalarField α]

/-- Sums are monotone in their terms. -/
theorem finSum_le_finSum {n : Nat} {f g : Fin n → α} (h : ∀ i, f i ≤ g i) :
    finSum n f ≤ finSum n g := by
  induction n with
  | zero => simp only [finSum_zero]; grind
  | succ n ih =>
    rw [finSum_succ, finSum_succ]
    have := ih (fun i => h i.castSucc); have := h (Fin.last n); grind

/-- A sum of nonnegative terms is nonnegative. -/
theorem finSum_nonneg {n : Nat} {f : Fin n → α} (h : ∀ i, 0 ≤ f i) : 0 ≤ finSum n f := by
  have := finSum_le_finSum (f := fun _ => (0 : α)) h
  rw [finSum_const_zero] at this; exact this

/-- A nonempty sum of positive terms is positive. -/
theorem finSum_pos {n : Nat} {f : Fin (n + 1) → α} (h : ∀ i, 0 < f i) : 0 < finSum (n + 1) f := by
  rw [finSum_succ]
  have := finSum_nonneg (n := n) (f := fun i => f i.castSucc) (fun i => by have := h i.castSucc; grind)
  have := h (Fin.last n); grind

/-- Each term of a sum of nonnegative terms is at most the sum. -/
theorem le_finSum {n : Nat} {f : Fin n → α} (h : ∀ i, 0 ≤ f i) (k : Fin n) : f k ≤ finSum n f := by
  induction n with
  | zero => exact k.elim0
  | succ n ih =>
    rw [finSum_succ]
    by_cases hk : k = Fin.last n
    · subst hk
      have := finSum_nonneg (n := n) (f := fun i => f i.castSucc) (fun i => h i.castSucc); grind
    · have hlt : k.val < n := by have := k.isLt; have : k.val ≠ n := fun e => hk (Fin.ext e); omega
      have h1 := ih (f := fun i => f i.castSucc) (fun i => h i.castSucc) ⟨k.val, hlt⟩
      have h2 := h (Fin.last n)
      have e : (⟨k.val, hlt⟩ : Fin n).castSucc = k := Fin.ext rfl
      simp only [e] at h1; grind

/-- The absolute value of a sum is at most the sum of absolute values. -/
theorem abs_finSum_le (n : Nat) (f : Fin n → α) :
    Scalar.abs (finSum n f) ≤ finSum n (fun i => Scalar.abs (f i)) := by
  induction n with
  | zero => simp only [finSum_zero]; rw [abs_of_nonneg (by grind)]; grind
  | succ n ih =>
    rw [finSum_succ, finSum_succ]
    have := abs_add_le (finSum n (fun i => f i.castSucc)) (f (Fin.last n))
    have := ih (fun i => f i.castSucc); grind

/-- A nonempty sum of strictly smaller terms is strictly smaller. -/
theorem finSum_lt_finSum : ∀ {n : Nat} {f g : Fin (n + 1) → α},
    (∀ i, f i < g i) → finSum (n + 1) f < finSum (n + 1) g
  | 0, f, g, h => by rw [finSum_one, finSum_one]; exact h 0
  | n + 1, f, g, h => by
    rw [finSum_succ (n + 1) f, finSum_succ (n + 1) g]
    have h1 := finSum_lt_finSum (n := n) (f := fun i => f i.castSucc) (g := fun i => g i.castSucc)
      (fun i => h i.castSucc)
    have h2 := h (Fin.last (n + 1))
    grind

end Ordered

end KimiK3
