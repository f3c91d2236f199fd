module

public import KimiK3.Sequence.KDAWY
public import KimiK3.Core.ScalarFacts

/-!
# The WY/UT form's decay factors are all in `[0, 1]` (k3-spec §2.2, report §2.1.1)

The WY/UT chunk form of `KDAWY.lean` uses the decay only through `D[a, b) = ∏_{a ≤ r < b} α_r`
with `a ≤ b` (`decayRange`): a product of retentions between two positions of the chunk, never a
cumulative decay divided out. So it is the numerically safe scheme itself:

* `decayRange_mem_unit`: with retentions in `[0, 1]`, every factor is in `[0, 1]`, whatever the
  chunk length;
* `decayRange_eq_exp`: with `α_r = e^{g_r}`, `D[a, b) = e^{Σ_{a ≤ r < b} g_r}` (`logDecayRange`),
  an exponent `≤ 0` when every `g_r ≤ 0` (`logDecayRange_nonpos`, `decayRange_exp_le_one`);
* `logDecayRange_eq_sub`: that exponent is `G_b − G_a` with `G` the cumulative log-decay
  (fla's `e^{G_t − G_s}`). The unsafe evaluation `e^{G_b} · e^{−G_a}` equals it over the reals
  but forms `e^{−G_a}`, up to `e^{5 a}` at the gate floor; pybridge's `kda_chunked` instead
  factors `D[a, b) = D[a, m) ⊙ D[m, b)` at sub-chunk ends and halves (`decayRange_split`,
  `decayRange_split_of_le`, `decayRange_subchunk`), each factor with an exponent `≤ 0`.
-/

@[expose] public section

noncomputable section

namespace KimiK3

namespace KDA

variable {α : Type} {keyDim valueDim : Nat}

/-- The summed log-decay `Σ_{a ≤ r < b} g_r` per key row (`0` when `b ≤ a`): the exponent of
`D[a, b)` when `α_r = e^{g_r}`. -/
def logDecayRange [Scalar α] (g : Nat → Tensor α [keyDim]) (a : Nat) : Nat → Tensor α [keyDim]
  | 0 => fun _ => 0
  | b + 1 => fun i => if a ≤ b then logDecayRange g a b i + g b i else 0

/-- A token of a chunk is one of its elements or the identity token. -/
theorem chunkToken_mem_or [Scalar α] (c : List (Input α keyDim valueDim)) (r : Nat) :
    chunkToken c r ∈ c ∨ chunkToken c r = Input.identity keyDim valueDim := by
  induction c generalizing r with
  | nil => right; rfl
  | cons x xs ih =>
    cases r with
    | zero => left; exact List.mem_cons_self
    | succ r =>
      rcases ih r with h | h
      · left; exact List.mem_cons_of_mem x h
      · right; exact h

section Field

variable [ScalarField α]

/-- `decayRange_split` with the split point given by inequalities: `D[a, b) = D[a, m) ⊙ D[m, b)`
for `a ≤ m ≤ b`. -/
theorem decayRange_split_of_le (c : List (Input α keyDim valueDim)) {a m b : Nat} (h1 : a ≤ m)
    (h2 : m ≤ b) (i : Fin keyDim) : decayRange c a b i = decayRange c a m i * decayRange c m b i := by
  obtain ⟨k, rfl⟩ := Nat.exists_eq_add_of_le h2
  exact decayRange_split c h1 i k

/-- **pybridge's factoring across sub-chunks**: for `s ≤ e ≤ b₀ ≤ t` (`s` in an earlier sub-chunk
ending at `e`, `b₀` the start of the sub-chunk of `t`),
`D[s, t) = D[b₀, t) ⊙ D[e, b₀) ⊙ D[s, e)`, pybridge's `e^{G_t−b_i} e^{b_i−E_j} e^{E_j−G_s}`. -/
theorem decayRange_subchunk (c : List (Input α keyDim valueDim)) {s e b₀ t : Nat} (h1 : s ≤ e)
    (h2 : e ≤ b₀) (h3 : b₀ ≤ t) (i : Fin keyDim) :
    decayRange c s t i = decayRange c b₀ t i * decayRange c e b₀ i * decayRange c s e i := by
  rw [decayRange_split_of_le c (Nat.le_trans h1 h2) h3, decayRange_split_of_le c h1 h2]
  grind

end Field

section Ordered

variable [OrderedScalarField α]

/-- **Every decay factor of the WY/UT form lies in `[0, 1]`** when the chunk's retentions do,
for every chunk length and every pair of positions. -/
theorem decayRange_mem_unit (c : List (Input α keyDim valueDim))
    (h : ∀ x ∈ c, ∀ i, 0 ≤ x.retention i ∧ x.retention i ≤ 1) (a : Nat) (i : Fin keyDim) :
    ∀ b, 0 ≤ decayRange c a b i ∧ decayRange c a b i ≤ 1
  | 0 => by simp only [decayRange]; have := zero_lt_one' (α := α); grind
  | b + 1 => by
    have ih := decayRange_mem_unit c h a i b
    have hr : 0 ≤ (chunkToken c b).retention i ∧ (chunkToken c b).retention i ≤ 1 := by
      rcases chunkToken_mem_or c b with hm | hm
      · exact h _ hm i
      · rw [hm]; simp only [Input.identity]; have := zero_lt_one' (α := α); grind
    simp only [decayRange]
    split
    · have h1 := mul_nonneg' ih.1 hr.1
      have h2 := mul_le_mul_of_nonneg_right' ih.2 hr.1
      grind
    · have := zero_lt_one' (α := α); grind

/-- With every log-decay `g_r ≤ 0`, every exponent `Σ_{a ≤ r < b} g_r` is `≤ 0`. -/
theorem logDecayRange_nonpos (g : Nat → Tensor α [keyDim]) (hg : ∀ r i, g r i ≤ 0) (a : Nat)
    (i : Fin keyDim) : ∀ b, logDecayRange g a b i ≤ 0
  | 0 => by simp only [logDecayRange]; grind
  | b + 1 => by
    have ih := logDecayRange_nonpos g hg a i b
    have := hg b i
    simp only [logDecayRange]; split <;> grind

/-- The empty range has exponent `0`. -/
@[simp] theorem logDecayRange_self (g : Nat → Tensor α [keyDim]) (a : Nat) (i : Fin keyDim) :
    logDecayRange g a a i = 0 := by
  cases a with
  | zero => rfl
  | succ a => simp only [logDecayRange]; rw [if_neg (by omega)]

/-- The exponent is a difference of cumulative log-decays, `Σ_{a ≤ r < b} g_r = G_b − G_a`
(`G_n = Σ_{r<n} g_r`), for `a ≤ b`. -/
theorem logDecayRange_eq_sub (g : Nat → Tensor α [keyDim]) (a : Nat) (i : Fin keyDim) :
    ∀ k, logDecayRange g a (a + k) i = logDecayRange g 0 (a + k) i - logDecayRange g 0 a i
  | 0 => by simp only [Nat.add_zero, logDecayRange_self]; grind
  | k + 1 => by
    rw [← Nat.add_assoc]
    have ih := logDecayRange_eq_sub g a i k
    simp only [logDecayRange, Nat.le_add_right, Nat.zero_le, if_true]
    grind

end Ordered

section Laws

variable [ScalarLaws α]

/-- **The decay factor in log space**: with `α_r = e^{g_r}`, `D[a, b) = e^{Σ_{a ≤ r < b} g_r}`. -/
theorem decayRange_eq_exp (c : List (Input α keyDim valueDim)) (g : Nat → Tensor α [keyDim])
    (hg : ∀ r i, (chunkToken c r).retention i = Scalar.exp (g r i)) (a : Nat) (i : Fin keyDim) :
    ∀ b, decayRange c a b i = Scalar.exp (logDecayRange g a b i)
  | 0 => by simp only [decayRange, logDecayRange]; rw [ScalarLaws.exp_zero]
  | b + 1 => by
    simp only [decayRange, logDecayRange]
    split
    · rw [ScalarLaws.exp_add, decayRange_eq_exp c g hg a i b, hg]
    · rw [ScalarLaws.exp_zero]

/-- With `α_r = e^{g_r}` and every `g_r ≤ 0`, every decay factor is `e^x` with `x ≤ 0`, so at
most `1`. -/
theorem decayRange_exp_le_one (c : List (Input α keyDim valueDim)) (g : Nat → Tensor α [keyDim])
    (hg : ∀ r i, (chunkToken c r).retention i = Scalar.exp (g r i)) (hneg : ∀ r i, g r i ≤ 0)
    (a b : Nat) (i : Fin keyDim) :
    logDecayRange g a b i ≤ 0 ∧ decayRange c a b i ≤ 1 := by
  refine ⟨logDecayRange_nonpos g hneg a i b, ?_⟩
  rw [decayRange_eq_exp c g hg a i b, ← ScalarLaws.exp_zero]
  exact exp_le_exp (logDecayRange_nonpos g hneg a i b)

end Laws

end KDA

end KimiK3

end
