module

public import KimiK3.Sequence.CausalScan
public import KimiK3.Sequence.KDA

/-!
# The WY/UT chunk form of KDA: definitions and the triangular solve
(k3-spec §2.2, report §5.1; the chunked algorithm of fla's `chunk_kda`)

Inside a chunk of tokens `x_0, …, x_{n-1}` entered with state `S₀`, write
`D[a, b) = ∏_{a ≤ r < b} α_r` (per key row) for the decay between positions (`decayRange`).
The recurrence `S_{t+1} = (I − β_t k_t k_tᵀ) Diag(α_t) S_t + β_t k_t v_tᵀ` keeps the form

`S_t = Diag(D[0, t)) S₀ + Σ_{s<t} Diag(D[s+1, t)) k_s e_sᵀ`,

where `e_t = β_t (v_t − k_tᵀ Diag(α_t) S_t)` is the value token `t` writes. Substituting,
`(I + A) E = Diag(β) (V − K̂ S₀)` with the strictly lower triangular
`A[t, s] = β_t ⟨k_t, D[s+1, t+1) ⊙ k_s⟩` (`wyMatrix`) and `K̂` the rows `D[0, t+1) ⊙ k_t`.
Solved by forward substitution (`forwardSolve`, no matrix inverse):
`E = U − W S₀` with `U = (I + A)⁻¹ Diag(β) V` (`wyU`) and `W = (I + A)⁻¹ Diag(β) K̂` (`wyW`).
Then the outputs `o_t = (D[0, t+1) ⊙ q_t)ᵀ S₀ + Σ_{s≤t} ⟨q_t, D[s+1, t+1) ⊙ k_s⟩ e_s`
(`wyOutput`) and the state passed on, `S_n` (`wyState`).

**Every decay factor is a product of retentions between two positions** (`D[a, b)`, `a ≤ b`):
no cumulative decay is ever divided out (no `e^{−G}` factor), so every factor lies in `(0, 1]`
for retentions in `(0, 1]`. The defined form *is* the numerically safe scheme; the factoring
that pybridge uses to compute `D[a, b)` (splitting at sub-chunk ends or halves,
`e^{G_t−G_s} = e^{G_t−G_m} e^{G_m−G_s}`) is `decayRange_split`.

The equality with the token recurrence is in `KDAWYChunk.lean`.
-/

@[expose] public section

-- Reasoning definitions only: no code generation (generic code across modules does not compile
-- offline, `Core/README.md`, "Toolchain constraints"); they evaluate in the kernel.
noncomputable section

namespace KimiK3

namespace KDA

variable {α : Type} {keyDim valueDim : Nat}

section Defs

variable [Scalar α]

/-- The identity token (zero query, key and value, retention `1`, write strength `0`): its
update leaves the state unchanged. It pads a chunk past its end (as pybridge's `kda_chunked`
pads with `q = k = v = 0`, `g = β = 0`). -/
def Input.identity (keyDim valueDim : Nat) : Input α keyDim valueDim :=
  ⟨fun _ => 0, fun _ => 0, fun _ => 0, fun _ => 1, 0⟩

/-- Token `r` of a chunk, the identity token past its end. -/
def chunkToken (c : List (Input α keyDim valueDim)) (r : Nat) : Input α keyDim valueDim :=
  Seq.listGet (Input.identity keyDim valueDim) c r

/-- The decay between positions `a` and `b` of a chunk, per key row:
`D[a, b) = ∏_{a ≤ r < b} α_r` (`1` when `b ≤ a`); fla's `e^{G_{b-1} − G_{a-1}}` with `G` the
cumulative log-decay. A product of retentions, never a quotient. -/
def decayRange (c : List (Input α keyDim valueDim)) (a : Nat) : Nat → Tensor α [keyDim]
  | 0 => fun _ => 1
  | b + 1 => fun i => if a ≤ b then decayRange c a b i * (chunkToken c b).retention i else 1

/-- The decay-weighted key product `⟨k_t, D[s+1, t+1) ⊙ k_s⟩` of positions `s < t`
(fla's `k_t · e^{G_t − G_s} k_s`). -/
def wyGram (c : List (Input α keyDim valueDim)) (t s : Nat) : α :=
  finSum keyDim (fun i =>
    (chunkToken c t).key i * (decayRange c (s + 1) (t + 1) i * (chunkToken c s).key i))

/-- The strictly lower triangular matrix of the UT system, `A[t, s] = β_t ⟨k_t, D[s+1, t+1) ⊙ k_s⟩`
(used for `s < t` only). -/
def wyMatrix (c : List (Input α keyDim valueDim)) (t s : Nat) : α :=
  (chunkToken c t).writeStrength * wyGram c t s

/-- Forward substitution, as a table: `forwardTable d L b m s = y_s` for `s < m`, where
`y_t = b_t − Σ_{s<t} L[t, s] y_s` (structural recursion over the positions). -/
def forwardTable (d : Nat) (L : Nat → Nat → α) (b : Nat → Tensor α [d]) : Nat → Nat → Tensor α [d]
  | 0 => fun _ _ => 0
  | m + 1 =>
    let prev := forwardTable d L b m
    fun s => if s < m then prev s else fun j => b m j - finSum m (fun r => L m r.val * prev r.val j)

/-- The solution of the unit lower triangular system `(I + L) y = b` by forward substitution:
`y_t = b_t − Σ_{s<t} L[t, s] y_s` (`forwardSolve_eq`), i.e. `y = (I + L)⁻¹ b` for a strictly
lower triangular `L`, without forming an inverse. -/
def forwardSolve (d : Nat) (L : Nat → Nat → α) (b : Nat → Tensor α [d]) (t : Nat) : Tensor α [d] :=
  forwardTable d L b (t + 1) t

/-- `U = (I + A)⁻¹ Diag(β) V` (fla's `u`): row `t` solves `u_t = β_t v_t − Σ_{s<t} A[t, s] u_s`. -/
def wyU (c : List (Input α keyDim valueDim)) : Nat → Tensor α [valueDim] :=
  forwardSolve valueDim (wyMatrix c)
    (fun t j => (chunkToken c t).writeStrength * (chunkToken c t).value j)

/-- `W = (I + A)⁻¹ Diag(β) K̂` (fla's `w`), `K̂` the rows `D[0, t+1) ⊙ k_t`:
`w_t = β_t D[0, t+1) ⊙ k_t − Σ_{s<t} A[t, s] w_s`. -/
def wyW (c : List (Input α keyDim valueDim)) : Nat → Tensor α [keyDim] :=
  forwardSolve keyDim (wyMatrix c)
    (fun t i => (chunkToken c t).writeStrength * (decayRange c 0 (t + 1) i * (chunkToken c t).key i))

/-- The value written by token `t` from the chunk's incoming state `S₀`: `e_t = u_t − S₀ᵀ w_t`
(`E = U − W S₀`). -/
def wyValue (c : List (Input α keyDim valueDim)) (S₀ : State α keyDim valueDim) (t : Nat) :
    Tensor α [valueDim] :=
  fun j => wyU c t j - finSum keyDim (fun i => wyW c t i * S₀ i j)

/-- The state after the first `t` tokens of the chunk (the inter-chunk pass for `t = n`):
`S_t = Diag(D[0, t)) S₀ + Σ_{s<t} Diag(D[s+1, t)) k_s e_sᵀ`. -/
def wyState (c : List (Input α keyDim valueDim)) (S₀ : State α keyDim valueDim) (t : Nat) :
    State α keyDim valueDim :=
  fun i j => decayRange c 0 t i * S₀ i j +
    finSum t (fun s => decayRange c (s.val + 1) t i * (chunkToken c s.val).key i * wyValue c S₀ s.val j)

/-- The output of token `t`: `o_t = (D[0, t+1) ⊙ q_t)ᵀ S₀ + Σ_{s≤t} ⟨q_t, D[s+1, t+1) ⊙ k_s⟩ e_s`
(`O = Q̂ S₀ + M E`, `M` the causal decay-weighted query-key products). -/
def wyOutput (c : List (Input α keyDim valueDim)) (S₀ : State α keyDim valueDim) (t : Nat) :
    Tensor α [valueDim] :=
  fun j => finSum keyDim (fun i => decayRange c 0 (t + 1) i * (chunkToken c t).query i * S₀ i j) +
    finSum (t + 1) (fun s =>
      finSum keyDim (fun i =>
        (chunkToken c t).query i * (decayRange c (s.val + 1) (t + 1) i * (chunkToken c s.val).key i))
      * wyValue c S₀ s.val j)

/-- The outputs `o_t, o_{t+1}, …` of the chunk `c`, one per element of `rest`. -/
def wyOutputsFrom (c : List (Input α keyDim valueDim)) (S₀ : State α keyDim valueDim) :
    Nat → List (Input α keyDim valueDim) → List (Tensor α [valueDim])
  | _, [] => []
  | t, _ :: ys => wyOutput c S₀ t :: wyOutputsFrom c S₀ (t + 1) ys

/-- **One chunk in WY/UT form** (fla's `chunk_kda`): from the incoming state `S₀`, the state
passed on `S_n` and the outputs `o_0, …, o_{n-1}`, for a chunk `c` of any length `n`. -/
def wyChunk (S₀ : State α keyDim valueDim) (c : List (Input α keyDim valueDim)) :
    State α keyDim valueDim × List (Tensor α [valueDim]) :=
  (wyState c S₀ c.length, wyOutputsFrom c S₀ 0 c)

/-- **The chunked WY/UT form of a KDA head** (report §5.1): chunk by chunk, `wyChunk` from the
state the previous chunk passed on; chunks may have any lengths. -/
def wyChunkedRun (S : State α keyDim valueDim) :
    List (List (Input α keyDim valueDim)) → State α keyDim valueDim × List (Tensor α [valueDim])
  | [] => (S, [])
  | c :: cs =>
    let r := wyChunk S c
    let rest := wyChunkedRun r.1 cs
    (rest.1, r.2 ++ rest.2)

end Defs

section Field

variable [ScalarField α]

/-- One more position: `D[a, b+1) = D[a, b) ⊙ α_b` for `a ≤ b`. -/
theorem decayRange_succ (c : List (Input α keyDim valueDim)) {a b : Nat} (h : a ≤ b) (i : Fin keyDim) :
    decayRange c a (b + 1) i = decayRange c a b i * (chunkToken c b).retention i := by
  simp [decayRange, h]

/-- The empty range: `D[a, a) = 1`. -/
@[simp] theorem decayRange_self (c : List (Input α keyDim valueDim)) (a : Nat) (i : Fin keyDim) :
    decayRange c a a i = 1 := by
  cases a with
  | zero => rfl
  | succ a => simp only [decayRange]; rw [if_neg (by omega)]

/-- **The decay between two positions factors at any position between them**:
`D[a, b) = D[a, m) ⊙ D[m, b)` for `a ≤ m ≤ b` (pybridge's `e^{G_t−G_s} = e^{G_t−G_m} e^{G_m−G_s}`,
each factor a product of retentions). -/
theorem decayRange_split (c : List (Input α keyDim valueDim)) {a m : Nat} (h : a ≤ m) (i : Fin keyDim) :
    ∀ k, decayRange c a (m + k) i = decayRange c a m i * decayRange c m (m + k) i
  | 0 => by simp only [Nat.add_zero, decayRange_self]; grind
  | k + 1 => by
    rw [← Nat.add_assoc, decayRange_succ c (by omega), decayRange_succ c (by omega),
      decayRange_split c h i k]
    grind

/-- A table entry is the solution at that position. -/
theorem forwardTable_eq (d : Nat) (L : Nat → Nat → α) (b : Nat → Tensor α [d]) :
    ∀ (m s : Nat), s < m → forwardTable d L b m s = forwardSolve d L b s
  | 0, s, h => absurd h (Nat.not_lt_zero s)
  | m + 1, s, h => by
    by_cases hs : s < m
    · simp only [forwardTable, hs, if_true]; exact forwardTable_eq d L b m s hs
    · have : s = m := by omega
      subst this; rfl

/-- **Forward substitution**: `y_t = b_t − Σ_{s<t} L[t, s] y_s`. -/
theorem forwardSolve_eq (d : Nat) (L : Nat → Nat → α) (b : Nat → Tensor α [d]) (t : Nat) (j : Fin d) :
    forwardSolve d L b t j = b t j - finSum t (fun s => L t s.val * forwardSolve d L b s.val j) := by
  show forwardTable d L b (t + 1) t j = _
  simp only [forwardTable, Nat.lt_irrefl, if_false]
  congr 1
  exact finSum_congr (fun s => by rw [forwardTable_eq d L b t s.val s.isLt])

/-- **The forward-substitution solution solves the triangular system** `(I + L) y = b`. -/
theorem forwardSolve_solves (d : Nat) (L : Nat → Nat → α) (b : Nat → Tensor α [d]) (t : Nat) (j : Fin d) :
    forwardSolve d L b t j + finSum t (fun s => L t s.val * forwardSolve d L b s.val j) = b t j := by
  rw [forwardSolve_eq d L b t j]; grind

end Field

end KDA

end KimiK3

end
