module

public import KimiK3.Sequence.CausalScan
public import KimiK3.Sequence.KDA
public import KimiK3.Sequence.AffineSummary

/-!
# Chunked KDA equals the recurrence (k3-spec §2.2, report §5.1; open in the article)

Each KDA token acts on the head state as the affine map `S ↦ A_t S + B_t` with
`A_t = (I − β k kᵀ) Diag(α)` and `B_t = β k vᵀ` (`tokenSummary`; the definitions of this file are in `Kernel.lean`).
Proved here:

* `update_eq_apply_tokenSummary`: the real KDA update *is* the action of the token summary;
* `apply_segmentSummary`: running the KDA steps over a segment equals applying the segment's
  composed summary;
* `chunkedFinal_eq`: folding over chunks, each applying its composed summary, gives the final
  state of the token-by-token scan for *any* split of the sequence into chunks;
* `chunkedRun_eq_run`: the chunked full-sequence form — for each chunk, prefix summaries are
  computed independently of the incoming state (the intra-chunk part) and each output reads the
  incoming state pushed through its prefix summary (the inter-chunk part) — equals the
  token-by-token scan, states and outputs, for any split.
-/

@[expose] public section

namespace KimiK3

namespace KDA

variable {α : Type} {keyDim valueDim : Nat}

section Field

variable [ScalarField α]

/-- **The KDA update is the action of the token's affine summary**:
`update S x = A_t S + B_t` with `A_t = (I − β k kᵀ) Diag(α)`, `B_t = β k vᵀ`. -/
theorem update_eq_apply_tokenSummary (S : State α keyDim valueDim) (x : Input α keyDim valueDim) :
    update S x = (tokenSummary x).apply S := by
  funext r c
  rw [update_apply_matrix]
  simp only [AffineSummary.apply, tokenSummary, Seq.sum_eq]
  congr 1
  apply finSum_congr; intro s; grind

/-- **Running the KDA steps over a segment equals applying the segment's composed summary.** -/
theorem apply_segmentSummary (S : State α keyDim valueDim) (xs : List (Input α keyDim valueDim)) :
    (segmentSummary xs).apply S = (CausalScan.run step S xs).1 := by
  induction xs generalizing S with
  | nil => simp [segmentSummary, summaries]
  | cons x xs ih =>
    have : segmentSummary (x :: xs) = AffineSummary.andThen (tokenSummary x) (segmentSummary xs) := by
      simp [segmentSummary, summaries]
    rw [this, AffineSummary.apply_andThen, ← update_eq_apply_tokenSummary, ih,
      CausalScan.run_cons, step_fst]

/-- Segment summaries compose along concatenation (context-parallel regrouping). -/
theorem segmentSummary_append (xs ys : List (Input α keyDim valueDim)) :
    segmentSummary (xs ++ ys) = AffineSummary.andThen (segmentSummary xs) (segmentSummary ys) := by
  have h : ∀ xs : List (Input α keyDim valueDim),
      summaries (xs ++ ys) = summaries xs ++ summaries ys := by
    intro xs; induction xs with
    | nil => rfl
    | cons x xs ih => simp [summaries, ih]
  simp only [segmentSummary, h, AffineSummary.compose_append]

/-- **Chunked evaluation with any chunk split gives the token-by-token final state.** -/
theorem chunkedFinal_eq (S : State α keyDim valueDim) (chunks : List (List (Input α keyDim valueDim))) :
    chunkedFinal S chunks = (CausalScan.run step S chunks.flatten).1 := by
  induction chunks generalizing S with
  | nil => rfl
  | cons c cs ih =>
    simp only [chunkedFinal, Seq.memo2_eq, ih, List.flatten_cons, CausalScan.run_append,
      apply_segmentSummary]

/-- Chunked final state for a split given as a hypothesis: any chunks concatenating to `xs`. -/
theorem chunkedFinal_eq_of_flatten (S : State α keyDim valueDim)
    (chunks : List (List (Input α keyDim valueDim))) (xs : List (Input α keyDim valueDim))
    (h : chunks.flatten = xs) : chunkedFinal S chunks = (CausalScan.run step S xs).1 := by
  rw [← h]; exact chunkedFinal_eq S chunks

/-- One chunk's scan: pushing the incoming state through the prefix summaries gives the
token-by-token run from the state the prefix `acc` reaches. -/
theorem chunkScan_eq (S₀ : State α keyDim valueDim) (acc : AffineSummary α keyDim valueDim)
    (xs : List (Input α keyDim valueDim)) :
    ((chunkScan S₀ acc xs).1.apply S₀, (chunkScan S₀ acc xs).2) =
      CausalScan.run step (acc.apply S₀) xs := by
  induction xs generalizing acc with
  | nil => rfl
  | cons x xs ih =>
    have ih' := ih ((AffineSummary.andThen acc (tokenSummary x)).memo)
    simp only [AffineSummary.memo_eq, AffineSummary.apply_andThen,
      ← update_eq_apply_tokenSummary] at ih'
    simp only [chunkScan, AffineSummary.memo_eq, AffineSummary.apply_andThen,
      ← update_eq_apply_tokenSummary, CausalScan.run_cons, step_fst, step_snd]
    rw [← ih']

/-- **The chunked full-sequence form of KDA equals the token-by-token scan** (states and
outputs), for any split of the sequence into chunks. -/
theorem chunkedRun_eq_run (S : State α keyDim valueDim) (chunks : List (List (Input α keyDim valueDim))) :
    chunkedRun S chunks = CausalScan.run step S chunks.flatten := by
  induction chunks generalizing S with
  | nil => rfl
  | cons c cs ih =>
    have h := chunkScan_eq S (AffineSummary.id keyDim valueDim) c
    simp only [AffineSummary.apply_id] at h
    simp only [chunkedRun, Seq.memo2_eq, ih, Seq.listAppend_eq, List.flatten_cons, CausalScan.run_append]
    rw [← h]

/-- `chunkedRun_eq_run` for a split given as a hypothesis. -/
theorem chunkedRun_eq_run_of_flatten (S : State α keyDim valueDim)
    (chunks : List (List (Input α keyDim valueDim))) (xs : List (Input α keyDim valueDim))
    (h : chunks.flatten = xs) : chunkedRun S chunks = CausalScan.run step S xs := by
  rw [← h]; exact chunkedRun_eq_run S chunks

end Field

end KDA

end KimiK3
