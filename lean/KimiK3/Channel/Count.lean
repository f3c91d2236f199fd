module

public import KimiK3.Core.Sum

/-!
# Counting indices that satisfy a test

`finCount n p = #{i : Fin n | p i}` by structural recursion (last index last, like `finSum`),
so it is computable and `decide`-able, with its link to sums of indicators
(`natCast_finCount`) and the monotonicity/congruence facts the channel mixers use; and `natSum`,
the `Nat` sum over `Fin n` that Quantile Balancing's pooled histograms and MoonEP's counts share.
General; could move to Core.
-/

@[expose] public section

namespace KimiK3

/-- The number of indices `i : Fin n` with `p i = true`. -/
def finCount : (n : Nat) → (Fin n → Bool) → Nat
  | 0, _ => 0
  | n + 1, p => finCount n (fun i => p ⟨i.val, by omega⟩) + (if p ⟨n, by omega⟩ then 1 else 0)

/-- Splitting off the last index. -/
theorem finCount_succ (n : Nat) (p : Fin (n + 1) → Bool) :
    finCount (n + 1) p = finCount n (fun i => p i.castSucc) + (if p (Fin.last n) then 1 else 0) :=
  rfl

/-- Counts are determined by the test. -/
theorem finCount_congr {n : Nat} {p q : Fin n → Bool} (h : ∀ i, p i = q i) :
    finCount n p = finCount n q := by
  rw [funext h]

/-- A test that implies another counts at most as many indices. -/
theorem finCount_le_finCount {n : Nat} {p q : Fin n → Bool} (h : ∀ i, p i = true → q i = true) :
    finCount n p ≤ finCount n q := by
  induction n with
  | zero => exact Nat.le_refl 0
  | succ n ih =>
    rw [finCount_succ, finCount_succ]
    have ih' := ih (p := fun i => p i.castSucc) (q := fun i => q i.castSucc) (fun i => h i.castSucc)
    by_cases hp : p (Fin.last n) = true
    · have hq := h _ hp; simp only [hp, hq, if_true]; omega
    · simp only [Bool.not_eq_true] at hp; simp only [hp, Bool.false_eq_true, if_false]
      split <;> omega

/-- A test that implies another, and misses one index the other passes, counts strictly fewer. -/
theorem finCount_lt_finCount {n : Nat} {p q : Fin n → Bool} (h : ∀ i, p i = true → q i = true)
    {j : Fin n} (hpj : p j = false) (hqj : q j = true) : finCount n p < finCount n q := by
  induction n with
  | zero => exact j.elim0
  | succ n ih =>
    rw [finCount_succ, finCount_succ]
    have hle := finCount_le_finCount (p := fun i => p i.castSucc) (q := fun i => q i.castSucc)
      (fun i => h i.castSucc)
    by_cases hj : j = Fin.last n
    · subst hj; simp only [hpj, hqj, Bool.false_eq_true, if_false, if_true]; omega
    · have hlt : j.val < n := by
        have := j.isLt; have : j.val ≠ n := fun e => hj (Fin.ext e); omega
      have e : (⟨j.val, hlt⟩ : Fin n).castSucc = j := Fin.ext rfl
      have := ih (p := fun i => p i.castSucc) (q := fun i => q i.castSucc) (fun i => h i.castSucc)
        (j := ⟨j.val, hlt⟩) (by show p (⟨j.val, hlt⟩ : Fin n).castSucc = false; rw [e]; exact hpj)
        (by show q (⟨j.val, hlt⟩ : Fin n).castSucc = true; rw [e]; exact hqj)
      by_cases hp : p (Fin.last n) = true
      · have hq := h _ hp; simp only [hp, hq, if_true]; omega
      · simp only [Bool.not_eq_true] at hp; simp only [hp, Bool.false_eq_true, if_false]
        split <;> omega

/-- No index passes a test that is false everywhere. -/
theorem finCount_eq_zero {n : Nat} {p : Fin n → Bool} (h : ∀ i, p i = false) :
    finCount n p = 0 := by
  induction n with
  | zero => rfl
  | succ n ih => rw [finCount_succ, ih (fun i => h i.castSucc), h (Fin.last n)]; rfl

/-- Every index passes a test that is true everywhere. -/
theorem finCount_eq_self {n : Nat} {p : Fin n → Bool} (h : ∀ i, p i = true) :
    finCount n p = n := by
  induction n with
  | zero => rfl
  | succ n ih => rw [finCount_succ, ih (fun i => h i.castSucc), h (Fin.last n)]; rfl

/-- At most `n` indices of `Fin n` pass. -/
theorem finCount_le {n : Nat} (p : Fin n → Bool) : finCount n p ≤ n := by
  have := finCount_le_finCount (p := p) (q := fun _ => true) (fun _ _ => rfl)
  rwa [finCount_eq_self (fun _ => rfl)] at this

/-- A count, cast to a scalar field, is the sum of the indicator of the test. -/
theorem natCast_finCount {α : Type} [ScalarField α] (n : Nat) (p : Fin n → Bool) :
    ((finCount n p : Nat) : α) = finSum n (fun i => if p i then 1 else 0) := by
  induction n with
  | zero => simp only [finCount, finSum_zero]; grind
  | succ n ih =>
    rw [finCount_succ, finSum_succ, ← ih]
    cases p (Fin.last n) <;> simp <;> grind

/-- `allFin n p` holds when every index passes (computable, `decide`-friendly). -/
def allFin : (n : Nat) → (Fin n → Bool) → Bool
  | 0, _ => true
  | n + 1, p => allFin n (fun i => p ⟨i.val, by omega⟩) && p ⟨n, by omega⟩

/-- `anyFin n p` holds when some index passes (computable, `decide`-friendly). -/
def anyFin : (n : Nat) → (Fin n → Bool) → Bool
  | 0, _ => false
  | n + 1, p => anyFin n (fun i => p ⟨i.val, by omega⟩) || p ⟨n, by omega⟩

theorem allFin_iff {n : Nat} (p : Fin n → Bool) : allFin n p = true ↔ ∀ i, p i = true := by
  induction n with
  | zero => exact ⟨fun _ i => i.elim0, fun _ => rfl⟩
  | succ n ih =>
    show (allFin n (fun i => p i.castSucc) && p (Fin.last n)) = true ↔ _
    rw [Bool.and_eq_true, ih]
    exact ⟨fun ⟨h1, h2⟩ i => Fin.lastCases h2 h1 i, fun h => ⟨fun i => h _, h _⟩⟩

theorem anyFin_iff {n : Nat} (p : Fin n → Bool) : anyFin n p = true ↔ ∃ i, p i = true := by
  induction n with
  | zero => exact ⟨fun h => by simp [anyFin] at h, fun ⟨i, _⟩ => i.elim0⟩
  | succ n ih =>
    show (anyFin n (fun i => p i.castSucc) || p (Fin.last n)) = true ↔ _
    rw [Bool.or_eq_true, ih]
    constructor
    · rintro (⟨i, h⟩ | h)
      · exact ⟨_, h⟩
      · exact ⟨_, h⟩
    · rintro ⟨i, h⟩
      revert h
      refine Fin.lastCases (fun h => Or.inr h) (fun j h => Or.inl ⟨j, h⟩) i

/-- The first index passing a test, if any (computable). -/
def findFin : (n : Nat) → (Fin n → Bool) → Option (Fin n)
  | 0, _ => none
  | n + 1, p =>
    if p ⟨0, by omega⟩ then some ⟨0, by omega⟩ else
      match findFin n (fun i => p ⟨i.val + 1, by omega⟩) with
      | some i => some ⟨i.val + 1, by omega⟩
      | none => none

/-- What `findFin` finds passes the test. -/
theorem findFin_spec {n : Nat} {p : Fin n → Bool} {i : Fin n} (h : findFin n p = some i) :
    p i = true := by
  induction n with
  | zero => simp [findFin] at h
  | succ n ih =>
    simp only [findFin] at h
    split at h
    · rename_i h0; cases h; exact h0
    · split at h
      · rename_i j hj; cases h; exact ih hj
      · cases h

/-- If some index passes, `findFin` finds one. -/
theorem findFin_isSome {n : Nat} {p : Fin n → Bool} {i : Fin n} (hi : p i = true) :
    ∃ j, findFin n p = some j := by
  induction n with
  | zero => exact i.elim0
  | succ n ih =>
    simp only [findFin]
    split
    · exact ⟨_, rfl⟩
    · rename_i h0
      have hpos : i.val ≠ 0 := fun e => h0 (by have : i = ⟨0, by omega⟩ := Fin.ext e; rw [← this]; exact hi)
      obtain ⟨j, hj⟩ := ih (p := fun k => p ⟨k.val + 1, by omega⟩) (i := ⟨i.val - 1, by omega⟩)
        (by have : (⟨i.val - 1 + 1, by omega⟩ : Fin (n + 1)) = i := Fin.ext (by simp; omega)
            simp only [this]; exact hi)
      rw [hj]; exact ⟨_, rfl⟩

/-- The array `#[f 0, …, f (k-1)]` of natural numbers (monomorphic, so it compiles offline
from any module). -/
def natArray {n : Nat} (f : Fin n → Nat) : (k : Nat) → k ≤ n → Array Nat
  | 0, _ => #[]
  | k + 1, h => (natArray f k (by omega)).push (f ⟨k, h⟩)

theorem size_natArray {n : Nat} (f : Fin n → Nat) (k : Nat) (h : k ≤ n) :
    (natArray f k h).size = k := by
  induction k with
  | zero => rfl
  | succ k ih => simp [natArray, ih]

theorem getElem_natArray {n : Nat} (f : Fin n → Nat) (k : Nat) (h : k ≤ n) (j : Nat)
    (hj : j < k) :
    (natArray f k h)[j]'(by rw [size_natArray]; exact hj) = f ⟨j, by omega⟩ := by
  induction k with
  | zero => omega
  | succ k ih =>
    simp only [natArray, Array.getElem_push]
    split
    · rename_i hlt
      exact ih _ (by rw [size_natArray] at hlt; exact hlt)
    · rename_i hge
      have : j = k := by rw [size_natArray] at hge; omega
      subst this; rfl

/-- `f` with its values computed once and stored in an array. -/
def memoNat {n : Nat} (f : Fin n → Nat) : Fin n → Nat :=
  let a := natArray f n (Nat.le_refl n)
  fun i => if h : i.val < a.size then a[i.val] else f i

/-- Memoizing does not change the function. -/
theorem memoNat_eq {n : Nat} (f : Fin n → Nat) : memoNat f = f := by
  funext i
  simp only [memoNat]
  split
  · rename_i h
    exact getElem_natArray f n _ i.val (by rw [size_natArray] at h; exact h)
  · rfl

/-- **Pigeonhole** for `Fin n`: an injective map `Fin n → Fin n` is surjective. -/
theorem fin_surjective_of_injective : (n : Nat) → (f : Fin n → Fin n) →
    (∀ x y, f x = f y → x = y) → ∀ y, ∃ x, f x = y
  | 0, _, _ => fun y => y.elim0
  | n + 1, f, hf => by
    have ih := fin_surjective_of_injective n
    have fixLast : ∀ g : Fin (n + 1) → Fin (n + 1), g (Fin.last n) = Fin.last n →
        (∀ x y, g x = g y → x = y) → ∀ y, ∃ x, g x = y := by
      intro g hlast hinj
      refine Fin.lastCases ⟨Fin.last n, hlast⟩ (fun i => ?_)
      have hlt : ∀ x : Fin n, (g x.castSucc).val < n := by
        intro x
        have hne : g x.castSucc ≠ Fin.last n := fun e => by
          have := hinj _ _ (e.trans hlast.symm)
          exact absurd (congrArg Fin.val this) (by simp; omega)
        have := (g x.castSucc).isLt
        have : (g x.castSucc).val ≠ n := fun e => hne (Fin.ext e)
        omega
      obtain ⟨x, hx⟩ := ih (fun x => ⟨(g x.castSucc).val, hlt x⟩)
        (fun x y e => by
          have e' := congrArg Fin.val e; simp only at e'
          exact Fin.ext (by have := congrArg Fin.val (hinj _ _ (Fin.ext e')); simpa using this)) i
      exact ⟨x.castSucc, Fin.ext (by simpa using congrArg Fin.val hx)⟩
    intro y
    let sw : Fin (n + 1) → Fin (n + 1) := fun z =>
      if z = f (Fin.last n) then Fin.last n else if z = Fin.last n then f (Fin.last n) else z
    have swsw : ∀ z, sw (sw z) = z := by intro z; simp only [sw]; grind
    obtain ⟨x, hx⟩ := fixLast (fun x => sw (f x)) (by simp [sw])
      (fun a b e => hf a b (by have := congrArg sw e; rwa [swsw, swsw] at this)) (sw y)
    exact ⟨x, by have := congrArg sw hx; rwa [swsw, swsw] at this⟩

/-! ## Sums of natural numbers over `Fin n`

Shared by the histogram pooling of Quantile Balancing (`QuantileHistogram.lean`) and MoonEP's
counts (`MoonEP.lean`). -/

/-- `Σ_{i < n} f i` over `Nat`, last index last (like `finCount` and `finSum`; computable, so
the MoonEP checker and the histogram `#eval`s run it). Pooled histograms (report App. D) and the
MoonEP loads and receive counts (report §5.2.1) are such sums. -/
def natSum : (n : Nat) → (Fin n → Nat) → Nat
  | 0, _ => 0
  | n + 1, f => natSum n (fun i => f i.castSucc) + f (Fin.last n)

/-- Splitting off the last index. -/
theorem natSum_succ (n : Nat) (f : Fin (n + 1) → Nat) :
    natSum (n + 1) f = natSum n (fun i => f i.castSucc) + f (Fin.last n) := rfl

/-- Sums are determined by their terms. -/
theorem natSum_congr {n : Nat} {f g : Fin n → Nat} (h : ∀ i, f i = g i) : natSum n f = natSum n g := by
  rw [funext h]

/-- The sum of termwise sums is the sum of the two sums. -/
theorem natSum_add (n : Nat) (f g : Fin n → Nat) :
    natSum n (fun i => f i + g i) = natSum n f + natSum n g := by
  induction n with
  | zero => rfl
  | succ n ih => rw [natSum_succ, natSum_succ, natSum_succ, ih]; omega

/-- A sum of zeros is zero. -/
theorem natSum_zero (n : Nat) : natSum n (fun _ => 0) = 0 := by
  induction n with
  | zero => rfl
  | succ n ih => show natSum n (fun _ => 0) + 0 = 0; rw [ih]

/-- A sum of `n` copies of `c` is `n * c`. -/
theorem natSum_const (n c : Nat) : natSum n (fun _ => c) = n * c := by
  induction n with
  | zero => simp [natSum]
  | succ n ih => rw [natSum_succ, ih, Nat.succ_mul]

/-- Sums over two indices may be swapped. -/
theorem natSum_comm (m n : Nat) (f : Fin m → Fin n → Nat) :
    natSum m (fun a => natSum n (f a)) = natSum n (fun b => natSum m (fun a => f a b)) := by
  induction m with
  | zero => simp only [natSum, natSum_const, Nat.mul_zero]
  | succ m ih =>
    rw [natSum_succ, ih (fun a => f a.castSucc)]
    simp only [natSum_succ]
    rw [natSum_add]

/-- A term is at most the sum. -/
theorem le_natSum {n : Nat} (f : Fin n → Nat) (i : Fin n) : f i ≤ natSum n f := by
  induction n with
  | zero => exact i.elim0
  | succ n ih =>
    rw [natSum_succ]
    cases i using Fin.lastCases with
    | last => omega
    | cast j => have := ih (fun i => f i.castSucc) j; simp only at this; omega

/-- The sum of an indicator: `Σ_r [s = r]·c = c`. -/
theorem natSum_indicator {n : Nat} (s : Fin n) (c : Nat) :
    natSum n (fun r => if s = r then c else 0) = c := by
  induction n with
  | zero => exact s.elim0
  | succ n ih =>
    show natSum n (fun r => if s = r.castSucc then c else 0) + (if s = Fin.last n then c else 0) = c
    revert s
    refine Fin.lastCases ?_ (fun j => ?_)
    · have : ∀ r : Fin n, (if Fin.last n = r.castSucc then c else 0) = 0 := fun r => by
        split
        · rename_i h; have := congrArg Fin.val h; have := r.isLt; simp at *; omega
        · rfl
      rw [show (fun r : Fin n => if Fin.last n = r.castSucc then c else 0) = fun _ => 0 from funext this,
        natSum_zero]; simp
    · have : ∀ r : Fin n, (if j.castSucc = r.castSucc then c else 0) = (if j = r then c else 0) :=
        fun r => by simp [Fin.castSucc_inj]
      rw [show (fun r : Fin n => if j.castSucc = r.castSucc then c else 0) =
        fun r => if j = r then c else 0 from funext this, ih]
      split
      · rename_i h; have := congrArg Fin.val h; have := j.isLt; simp at *; omega
      · rfl

end KimiK3
