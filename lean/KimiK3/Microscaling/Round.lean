module

public import KimiK3.Microscaling.Lemmas
public import KimiK3.Microscaling.Search

/-!
# Round to nearest, ties to even, with saturation

The rounding rule every encoder of this folder uses, stated once for any strictly increasing
table of values `v 0 < v 1 < … < v N` (a format's nonnegative finite values, or E8M0's powers of
two):

* `t` rounds to the index of the nearest value;
* at a midpoint `(v k + v (k+1)) / 2` it rounds to the **even** index (for the OCP element
  formats the index parity is the mantissa's last bit: ties to even);
* below `v 0` it gives `0`, above `v N` it gives `N` (**saturation**: no overflow to NaN or
  infinity).

`roundIndex v N t` finds that index by a binary search for the first midpoint `t` does not round
past. Proved: the result's neighbourhood (`roundIndex_spec`), its characterization between
midpoints (`roundIndex_eq_of_between`), exactness on the table (`roundIndex_value`), the tie
rule (`roundIndex_midpoint`), saturation (`roundIndex_of_le`), and the error bound
`|v (roundIndex v N t) − t| ≤ (r t + a) / 2` when every gap is at most `r · v k + a`
(`abs_roundIndex_sub_le`; `r = 0` is the absolute bound, `a = 0` the relative one).
-/

@[expose] public section

namespace KimiK3.Microscaling

open KimiK3

variable {α : Type}

section Ordered

variable [OrderedScalarField α]

/-- `v` is strictly increasing on `0 … N`. -/
def StrictMonoUpTo (v : Nat → α) (N : Nat) : Prop := ∀ k, k < N → v k < v (k + 1)

variable {v : Nat → α} {N : Nat}

theorem StrictMonoUpTo.lt (hv : StrictMonoUpTo v N) {i j : Nat} (hij : i < j) (hj : j ≤ N) :
    v i < v j := by
  induction j with
  | zero => omega
  | succ j ih =>
    rcases Nat.lt_or_ge i j with h | h
    · exact Std.lt_trans (ih h (by omega)) (hv j (by omega))
    · rw [show i = j by omega]; exact hv j (by omega)

theorem StrictMonoUpTo.le (hv : StrictMonoUpTo v N) {i j : Nat} (hij : i ≤ j) (hj : j ≤ N) :
    v i ≤ v j := by
  rcases Nat.lt_or_ge i j with h | h
  · exact Std.le_of_lt (hv.lt h hj)
  · rw [show i = j by omega]; exact Std.le_refl _

theorem left_lt_midpoint (hv : StrictMonoUpTo v N) {k : Nat} (hk : k < N) : v k < midpoint v k := by
  have := hv k hk; unfold midpoint; grind

theorem midpoint_lt_right (hv : StrictMonoUpTo v N) {k : Nat} (hk : k < N) :
    midpoint v k < v (k + 1) := by
  have := hv k hk; unfold midpoint; grind

/-- Midpoints increase. -/
theorem midpoint_lt_midpoint (hv : StrictMonoUpTo v N) {i j : Nat} (hij : i < j) (hj : j < N) :
    midpoint v i < midpoint v j := by
  have h1 := midpoint_lt_right hv (Nat.lt_trans hij hj)
  have h2 := hv.le (show i + 1 ≤ j by omega) (by omega)
  have h3 := left_lt_midpoint hv hj
  exact Std.lt_of_lt_of_le h1 (Std.le_trans h2 (Std.le_of_lt h3))

theorem roundsPast_iff_lt {t : α} {k : Nat} (hk : k % 2 = 0) :
    roundsPast v t k = true ↔ midpoint v k < t := by
  unfold roundsPast; simp [show ¬ k % 2 = 1 by omega]

theorem roundsPast_iff_le {t : α} {k : Nat} (hk : k % 2 = 1) :
    roundsPast v t k = true ↔ midpoint v k ≤ t := by
  unfold roundsPast; simp [hk]

/-- Rounding past a midpoint puts `t` at or above it. -/
theorem midpoint_le_of_roundsPast {t : α} {k : Nat} (h : roundsPast v t k = true) :
    midpoint v k ≤ t := by
  rcases Nat.mod_two_eq_zero_or_one k with hk | hk
  · exact Std.le_of_lt ((roundsPast_iff_lt hk).mp h)
  · exact (roundsPast_iff_le hk).mp h

/-- Not rounding past a midpoint puts `t` at or below it. -/
theorem le_midpoint_of_not_roundsPast {t : α} {k : Nat} (h : roundsPast v t k = false) :
    t ≤ midpoint v k := by
  rcases Nat.mod_two_eq_zero_or_one k with hk | hk
  · rcases lt_or_le' (midpoint v k) t with h' | h'
    · have := (roundsPast_iff_lt hk).mpr h'; rw [h] at this; exact absurd this (by decide)
    · exact h'
  · rcases lt_or_le' (midpoint v k) t with h' | h'
    · have := (roundsPast_iff_le hk).mpr (Std.le_of_lt h'); rw [h] at this
      exact absurd this (by decide)
    · exact h'

/-- Above a midpoint, `t` rounds past it. -/
theorem roundsPast_of_lt {t : α} {k : Nat} (h : midpoint v k < t) : roundsPast v t k = true := by
  rcases Nat.mod_two_eq_zero_or_one k with hk | hk
  · exact (roundsPast_iff_lt hk).mpr h
  · exact (roundsPast_iff_le hk).mpr (Std.le_of_lt h)

/-- Below a midpoint, `t` does not round past it. -/
theorem roundsPast_of_gt {t : α} {k : Nat} (h : t < midpoint v k) : roundsPast v t k = false := by
  cases hp : roundsPast v t k
  · rfl
  · have := Std.lt_of_lt_of_le h (midpoint_le_of_roundsPast hp); grind

/-- Rounding past is antitone in the midpoint index (midpoints increase). -/
theorem roundsPast_antitone (hv : StrictMonoUpTo v N) (t : α) :
    ∀ i j, i ≤ j → j < N → roundsPast v t j = true → roundsPast v t i = true := by
  intro i j hij hj hp
  rcases Nat.lt_or_ge i j with h | h
  · exact roundsPast_of_lt (Std.lt_of_lt_of_le (midpoint_lt_midpoint hv h hj)
      (midpoint_le_of_roundsPast hp))
  · rw [show i = j by omega]; exact hp

/-- **Where the rounded index lies**: `t` is at or above the midpoint below `v k` and at or below
the midpoint above it. -/
theorem roundIndex_spec (hv : StrictMonoUpTo v N) (t : α) :
    (0 < roundIndex v N t → midpoint v (roundIndex v N t - 1) ≤ t) ∧
      (roundIndex v N t < N → t ≤ midpoint v (roundIndex v N t)) := by
  obtain ⟨h3, h4⟩ := firstFalse_spec (fun k => roundsPast v t k) 0 N
    (fun i j _ hij hj hp => roundsPast_antitone hv t i j hij hj hp)
  refine ⟨fun hpos => ?_, fun hlt => le_midpoint_of_not_roundsPast (h4 hlt)⟩
  exact midpoint_le_of_roundsPast (h3 _ (Nat.zero_le _) (Nat.sub_lt hpos Nat.one_pos))

/-- **Characterization**: strictly between the midpoints around `v k`, `t` rounds to `k`. -/
theorem roundIndex_eq_of_between (hv : StrictMonoUpTo v N) {t : α} {k : Nat} (hk : k ≤ N)
    (hlo : 0 < k → midpoint v (k - 1) < t) (hhi : k < N → t < midpoint v k) :
    roundIndex v N t = k := by
  refine firstFalse_eq_of _ N k hk (fun i j hij hj hp => roundsPast_antitone hv t i j hij hj hp)
    (fun i hi => roundsPast_of_lt ?_) (fun hkN => roundsPast_of_gt (hhi hkN))
  have h1 := hlo (by omega)
  rcases Nat.lt_or_ge i (k - 1) with h | h
  · exact Std.lt_trans (midpoint_lt_midpoint hv h (by omega)) h1
  · rw [show i = k - 1 by omega]; exact h1

/-- **Exactness**: every value of the table rounds to its own index. -/
theorem roundIndex_value (hv : StrictMonoUpTo v N) {k : Nat} (hk : k ≤ N) :
    roundIndex v N (v k) = k := by
  refine roundIndex_eq_of_between hv hk (fun hpos => ?_) (fun hkN => left_lt_midpoint hv hkN)
  have := midpoint_lt_right hv (show k - 1 < N by omega)
  rw [show k - 1 + 1 = k by omega] at this; exact this

/-- **The tie rule**: the midpoint between `v k` and `v (k+1)` rounds to the even index. -/
theorem roundIndex_midpoint (hv : StrictMonoUpTo v N) {k : Nat} (hk : k < N) :
    roundIndex v N (midpoint v k) = if k % 2 = 1 then k + 1 else k := by
  have hanti := fun i j hij hj hp => roundsPast_antitone hv (midpoint v k) i j hij hj hp
  split
  · rename_i hodd
    refine firstFalse_eq_of _ N (k + 1) (by omega) hanti (fun i hi => ?_) (fun hk1 =>
      roundsPast_of_gt (midpoint_lt_midpoint hv (Nat.lt_succ_self k) hk1))
    rcases Nat.lt_or_ge i k with h | h
    · exact roundsPast_of_lt (midpoint_lt_midpoint hv h hk)
    · rw [show i = k by omega]; exact (roundsPast_iff_le hodd).mpr (Std.le_refl _)
  · rename_i heven
    refine firstFalse_eq_of _ N k (by omega) hanti
      (fun i hi => roundsPast_of_lt (midpoint_lt_midpoint hv hi hk)) (fun _ => ?_)
    cases hp : roundsPast v (midpoint v k) k
    · rfl
    · have := (roundsPast_iff_lt (show k % 2 = 0 by omega)).mp hp
      grind

/-- **Saturation**: at or above the largest value, `t` rounds to `N`. -/
theorem roundIndex_of_le (hv : StrictMonoUpTo v N) {t : α} (h : v N ≤ t) : roundIndex v N t = N := by
  refine roundIndex_eq_of_between hv (Nat.le_refl N) (fun hpos => ?_) (fun h' => absurd h' (by omega))
  have := midpoint_lt_right hv (show N - 1 < N by omega)
  rw [show N - 1 + 1 = N by omega] at this
  exact Std.lt_of_lt_of_le this h

/-- **Rounding error.** If every gap `v (k+1) − v k` is at most `r · v k + a` (`r, a ≥ 0`, values
nonnegative), then for `v 0 ≤ t ≤ v N` the rounded value is within `(r · t + a) / 2` of `t`. With
`r = 0` this is half the largest gap; with `a = 0` a relative bound. -/
theorem abs_roundIndex_sub_le (hv : StrictMonoUpTo v N) {r a t : α} (hr : 0 ≤ r) (ha : 0 ≤ a)
    (hgap : ∀ k, k < N → v (k + 1) - v k ≤ r * v k + a) (hv0 : 0 ≤ v 0) (h0 : v 0 ≤ t)
    (h1 : t ≤ v N) : Scalar.abs (v (roundIndex v N t) - t) ≤ (r * t + a) / 2 := by
  obtain ⟨hlo, hhi⟩ := roundIndex_spec hv t
  have hkN := roundIndex_le v N t
  have ht0 : 0 ≤ t := Std.le_trans hv0 h0
  have hrt := mul_nonneg' hr ht0
  rw [abs_le_iff']
  constructor
  · -- `t` above the rounded value: at most half the gap above it
    rcases Nat.lt_or_ge (roundIndex v N t) N with hlt | hge
    · have hm := hhi hlt
      have hg := hgap _ hlt
      rcases lt_or_le' t (v (roundIndex v N t)) with hbelow | hvk
      · grind
      · have := mul_le_mul_of_nonneg_left' hvk hr
        unfold midpoint at hm; grind
    · rw [show roundIndex v N t = N by omega]; grind
  · -- `t` below the rounded value: at most half the gap below it
    rcases Nat.eq_zero_or_pos (roundIndex v N t) with h0' | hpos
    · rw [h0']; grind
    · have hm := hlo hpos
      have hg := hgap (roundIndex v N t - 1) (by omega)
      rw [show roundIndex v N t - 1 + 1 = roundIndex v N t by omega] at hg
      have hvk : v (roundIndex v N t - 1) ≤ t :=
        Std.le_trans (Std.le_of_lt (left_lt_midpoint hv (by omega))) hm
      have := mul_le_mul_of_nonneg_left' hvk hr
      unfold midpoint at hm
      rw [show roundIndex v N t - 1 + 1 = roundIndex v N t by omega] at hm
      grind

end Ordered

end KimiK3.Microscaling
