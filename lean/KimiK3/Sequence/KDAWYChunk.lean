module

public import KimiK3.Sequence.KDAWY
public import KimiK3.Sequence.KDAChunk

/-!
# The WY/UT chunk form equals the KDA recurrence (k3-spec §2.2, report §5.1)

The definitions (`wyChunk`, `wyChunkedRun`, …) and the triangular solve are in `KDAWY.lean`.
Proved here, over every scalar field, for chunks of any length and all inputs:

* `wyValue_solves`: the intra-chunk triangular system, `(I + A) E = Diag(β) (V − K̂ S₀)`,
  holds for `E = U − W S₀`;
* `wyValue_eq`: `e_t` is the value the recurrence writes at token `t`,
  `β_t (v_t − k_tᵀ Diag(α_t) S_t)`, when `S_t` is the WY state after `t` tokens;
* `update_wyState`, `read_wyState`: one recurrence step maps the WY state after `t` tokens to the
  one after `t + 1`, and reads `o_t`;
* **`wyChunk_eq_run`**: one chunk in WY/UT form = the token-by-token scan (state and outputs);
* **`wyChunkedRun_eq_run`**: chunk by chunk, any split = the token-by-token scan.
-/

@[expose] public section

namespace KimiK3

namespace KDA

variable {α : Type} {keyDim valueDim : Nat}

section Field

variable [ScalarField α]

/-- The WY state before any token is the incoming state. -/
@[simp] theorem wyState_zero (c : List (Input α keyDim valueDim)) (S₀ : State α keyDim valueDim) :
    wyState c S₀ 0 = S₀ := by
  funext i j; simp only [wyState, decayRange, finSum_zero]; grind

/-- **The intra-chunk triangular system** `(I + A) E = Diag(β) (V − K̂ S₀)`: for every position
`t`, `e_t + Σ_{s<t} A[t, s] e_s = β_t (v_t − (D[0, t+1) ⊙ k_t)ᵀ S₀)`. -/
theorem wyValue_solves (c : List (Input α keyDim valueDim)) (S₀ : State α keyDim valueDim)
    (t : Nat) (j : Fin valueDim) :
    wyValue c S₀ t j + finSum t (fun s => wyMatrix c t s.val * wyValue c S₀ s.val j) =
      (chunkToken c t).writeStrength * ((chunkToken c t).value j -
        finSum keyDim (fun i => decayRange c 0 (t + 1) i * (chunkToken c t).key i * S₀ i j)) := by
  have hu : wyU c t j + finSum t (fun s => wyMatrix c t s.val * wyU c s.val j) =
      (chunkToken c t).writeStrength * (chunkToken c t).value j :=
    forwardSolve_solves valueDim (wyMatrix c)
      (fun t j => (chunkToken c t).writeStrength * (chunkToken c t).value j) t j
  have hw : ∀ i, wyW c t i + finSum t (fun s => wyMatrix c t s.val * wyW c s.val i) =
      (chunkToken c t).writeStrength * (decayRange c 0 (t + 1) i * (chunkToken c t).key i) :=
    fun i => forwardSolve_solves keyDim (wyMatrix c)
      (fun t i => (chunkToken c t).writeStrength * (decayRange c 0 (t + 1) i * (chunkToken c t).key i)) t i
  -- Σ_s A[t,s] e_s = Σ_s A[t,s] u_s − Σ_i (Σ_s A[t,s] w_s[i]) S₀[i,j]
  have h1 : finSum t (fun s => wyMatrix c t s.val * wyValue c S₀ s.val j) =
      finSum t (fun s => wyMatrix c t s.val * wyU c s.val j) -
        finSum keyDim (fun i => finSum t (fun s => wyMatrix c t s.val * wyW c s.val i) * S₀ i j) := by
    have e : ∀ s : Fin t, wyMatrix c t s.val * wyValue c S₀ s.val j =
        wyMatrix c t s.val * wyU c s.val j -
          finSum keyDim (fun i => wyMatrix c t s.val * wyW c s.val i * S₀ i j) := by
      intro s
      simp only [wyValue]
      have : ∀ i : Fin keyDim, wyMatrix c t s.val * (wyW c s.val i * S₀ i j) =
          wyMatrix c t s.val * wyW c s.val i * S₀ i j := fun _ => by grind
      rw [← finSum_congr this, finSum_mul_left]; grind
    rw [finSum_congr e, finSum_sub, finSum_comm]
    congr 1
    exact finSum_congr (fun i => finSum_mul_right _ _ _)
  -- Σ_i w_t[i] S₀[i,j] = Σ_i β_t D k_t[i] S₀[i,j] − Σ_i (Σ_s A[t,s] w_s[i]) S₀[i,j]
  have h2 : finSum keyDim (fun i => wyW c t i * S₀ i j) =
      (chunkToken c t).writeStrength *
          finSum keyDim (fun i => decayRange c 0 (t + 1) i * (chunkToken c t).key i * S₀ i j) -
        finSum keyDim (fun i => finSum t (fun s => wyMatrix c t s.val * wyW c s.val i) * S₀ i j) := by
    rw [← finSum_mul_left, ← finSum_sub]
    apply finSum_congr; intro i
    have := hw i
    grind
  simp only [wyValue] at h1 ⊢
  rw [h1, h2]
  grind

/-- The correction `k_tᵀ Diag(α_t) S_t` at the WY state after `t` tokens, split into the
incoming-state part and the earlier written values. -/
theorem correction_wyState (c : List (Input α keyDim valueDim)) (S₀ : State α keyDim valueDim)
    (t : Nat) (j : Fin valueDim) :
    finSum keyDim (fun i => (chunkToken c t).key i * ((chunkToken c t).retention i * wyState c S₀ t i j)) =
      finSum keyDim (fun i => decayRange c 0 (t + 1) i * (chunkToken c t).key i * S₀ i j) +
        finSum t (fun s => wyGram c t s.val * wyValue c S₀ s.val j) := by
  have h : ∀ i : Fin keyDim,
      (chunkToken c t).key i * ((chunkToken c t).retention i * wyState c S₀ t i j) =
        decayRange c 0 (t + 1) i * (chunkToken c t).key i * S₀ i j +
          finSum t (fun s => (chunkToken c t).key i *
            (decayRange c (s.val + 1) (t + 1) i * (chunkToken c s.val).key i) * wyValue c S₀ s.val j) := by
    intro i
    have hs : finSum t (fun s => (chunkToken c t).key i *
          (decayRange c (s.val + 1) (t + 1) i * (chunkToken c s.val).key i) * wyValue c S₀ s.val j) =
        ((chunkToken c t).key i * (chunkToken c t).retention i) *
          finSum t (fun s => decayRange c (s.val + 1) t i * (chunkToken c s.val).key i * wyValue c S₀ s.val j) := by
      rw [← finSum_mul_left]
      exact finSum_congr (fun s => by rw [decayRange_succ c s.isLt]; grind)
    rw [hs, decayRange_succ c (Nat.zero_le t)]
    simp only [wyState]
    grind
  rw [finSum_congr h, finSum_add, finSum_comm]
  congr 1
  exact finSum_congr (fun s => by simp only [wyGram]; exact finSum_mul_right _ _ _)

/-- **`e_t` is the value the recurrence writes**: at the WY state after `t` tokens,
`e_t = β_t (v_t − k_tᵀ Diag(α_t) S_t)`. -/
theorem wyValue_eq (c : List (Input α keyDim valueDim)) (S₀ : State α keyDim valueDim)
    (t : Nat) (j : Fin valueDim) :
    wyValue c S₀ t j = (chunkToken c t).writeStrength * ((chunkToken c t).value j -
      finSum keyDim (fun i => (chunkToken c t).key i * ((chunkToken c t).retention i * wyState c S₀ t i j))) := by
  have h := wyValue_solves c S₀ t j
  rw [correction_wyState]
  have e : finSum t (fun s => wyMatrix c t s.val * wyValue c S₀ s.val j) =
      (chunkToken c t).writeStrength * finSum t (fun s => wyGram c t s.val * wyValue c S₀ s.val j) := by
    rw [← finSum_mul_left]
    exact finSum_congr (fun s => by simp only [wyMatrix]; grind)
  rw [e] at h
  grind

/-- **One recurrence step advances the WY state**: `update S_t x_t = S_{t+1}`. -/
theorem update_wyState (c : List (Input α keyDim valueDim)) (S₀ : State α keyDim valueDim) (t : Nat) :
    update (wyState c S₀ t) (chunkToken c t) = wyState c S₀ (t + 1) := by
  funext i j
  rw [update_get2]
  have he := wyValue_eq c S₀ t j
  generalize finSum keyDim (fun s => (chunkToken c t).key s *
    ((chunkToken c t).retention s * wyState c S₀ t s j)) = C at he ⊢
  have hs : wyState c S₀ (t + 1) i j = (chunkToken c t).retention i * wyState c S₀ t i j +
      (chunkToken c t).key i * wyValue c S₀ t j := by
    have hsum : finSum t (fun s => decayRange c (s.val + 1) (t + 1) i * (chunkToken c s.val).key i *
          wyValue c S₀ s.val j) =
        (chunkToken c t).retention i * finSum t (fun s => decayRange c (s.val + 1) t i *
          (chunkToken c s.val).key i * wyValue c S₀ s.val j) := by
      rw [← finSum_mul_left]
      exact finSum_congr (fun s => by rw [decayRange_succ c s.isLt]; grind)
    simp only [wyState]
    rw [finSum_succ]
    simp only [Fin.val_castSucc, Fin.val_last, decayRange_self]
    rw [hsum, decayRange_succ c (Nat.zero_le t)]
    grind
  rw [hs, he]
  grind

/-- **The readout after token `t` is the WY output** `o_t`. -/
theorem read_wyState (c : List (Input α keyDim valueDim)) (S₀ : State α keyDim valueDim) (t : Nat) :
    read (wyState c S₀ (t + 1)) (chunkToken c t).query = wyOutput c S₀ t := by
  funext j
  rw [read_apply]
  have h : ∀ i : Fin keyDim, (chunkToken c t).query i * wyState c S₀ (t + 1) i j =
      decayRange c 0 (t + 1) i * (chunkToken c t).query i * S₀ i j +
        finSum (t + 1) (fun s => (chunkToken c t).query i *
          (decayRange c (s.val + 1) (t + 1) i * (chunkToken c s.val).key i) * wyValue c S₀ s.val j) := by
    intro i
    simp only [wyState]
    rw [Lean.Grind.Semiring.left_distrib, ← finSum_mul_left]
    congr 1
    · grind
    · exact finSum_congr (fun s => by grind)
  rw [finSum_congr h, finSum_add, finSum_comm]
  simp only [wyOutput]
  congr 1
  exact finSum_congr (fun s => finSum_mul_right _ _ _)

/-- Token `pre.length` of `pre ++ y :: ys` is `y`. -/
theorem chunkToken_append (pre ys : List (Input α keyDim valueDim)) (y : Input α keyDim valueDim) :
    chunkToken (pre ++ y :: ys) pre.length = y := by
  induction pre with
  | nil => rfl
  | cons x xs ih => exact ih

/-- The scan over the rest `rest` of a chunk `c = pre ++ rest`, from the WY state after `pre`,
ends in the chunk's WY state and outputs the WY outputs from position `pre.length` on. -/
theorem run_wyState (S₀ : State α keyDim valueDim) (c : List (Input α keyDim valueDim)) :
    ∀ (rest pre : List (Input α keyDim valueDim)), pre ++ rest = c →
      CausalScan.run step (wyState c S₀ pre.length) rest =
        (wyState c S₀ c.length, wyOutputsFrom c S₀ pre.length rest)
  | [], pre, h => by
    simp only [List.append_nil] at h
    subst h; rfl
  | y :: ys, pre, h => by
    have hy : chunkToken c pre.length = y := by rw [← h]; exact chunkToken_append pre ys y
    have ih := run_wyState S₀ c ys (pre ++ [y]) (by rw [← h]; simp)
    simp only [List.length_append, List.length_cons, List.length_nil, Nat.zero_add] at ih
    rw [CausalScan.run_cons, step_fst, step_snd, ← hy, update_wyState, read_wyState, ih]
    rfl

/-- **One chunk in WY/UT form equals the token-by-token scan**, state and outputs, for a chunk
of any length and every incoming state. -/
theorem wyChunk_eq_run (S₀ : State α keyDim valueDim) (c : List (Input α keyDim valueDim)) :
    wyChunk S₀ c = CausalScan.run step S₀ c := by
  have h := run_wyState S₀ c c [] rfl
  simp only [List.length_nil, wyState_zero] at h
  rw [h]; rfl

/-- **The chunked WY/UT form of KDA equals the token-by-token scan** (states and outputs), for
any split of the sequence into chunks of any lengths. -/
theorem wyChunkedRun_eq_run (S : State α keyDim valueDim) (chunks : List (List (Input α keyDim valueDim))) :
    wyChunkedRun S chunks = CausalScan.run step S chunks.flatten := by
  induction chunks generalizing S with
  | nil => rfl
  | cons c cs ih =>
    simp only [wyChunkedRun, ih, List.flatten_cons, CausalScan.run_append, wyChunk_eq_run]

/-- `wyChunkedRun_eq_run` for a split given as a hypothesis: any chunks concatenating to `xs`. -/
theorem wyChunkedRun_eq_run_of_flatten (S : State α keyDim valueDim)
    (chunks : List (List (Input α keyDim valueDim))) (xs : List (Input α keyDim valueDim))
    (h : chunks.flatten = xs) : wyChunkedRun S chunks = CausalScan.run step S xs := by
  rw [← h]; exact wyChunkedRun_eq_run S chunks

/-- The WY/UT form and the affine-summary chunked form (`KDAChunk.lean`) agree. -/
theorem wyChunkedRun_eq_chunkedRun (S : State α keyDim valueDim)
    (chunks : List (List (Input α keyDim valueDim))) : wyChunkedRun S chunks = chunkedRun S chunks := by
  rw [wyChunkedRun_eq_run, chunkedRun_eq_run]

end Field

end KDA

end KimiK3
