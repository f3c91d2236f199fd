module

public import KimiK3.Sequence.KDAChunk

/-!
# Context-parallel KDA prefill equals the serial one (report §5.1; k3-spec §2.2, §6)

R ranks hold consecutive segments of one sequence. Each computes its segment's affine summary
`(A, B)` without its incoming state, the summaries are all-gathered (a fixed size per rank), and
rank `r` composes the summaries of ranks `< r` in rank order and applies the result to the
sequence's initial state: its incoming state. It then runs KDA over its own segment.

* `AffineSummary.composeAll`: the rank-order left fold of `andThen` (the seed's
  `ContextParallel.composeAll`; the accumulation a prefix scan performs);
  `composeAll_eq_compose` (it equals the right fold `compose`), `composeAll_append` (composition
  over concatenated rank lists), `composeAll_append_singleton` (one more rank), `apply_composeAll`
  (it acts as applying the summaries left to right);
* `KDA.composeAll_segmentSummaries`: the composed summaries of the segments of any split are the
  summary of the whole sequence; `KDA.apply_composeAll_segmentSummaries`: applied to the
  initial state they give the serial final state;
* `KDA.incomingState_eq`: the state entering rank `r` (composeAll of ranks `< r` applied to the
  initial state) is the serial recurrence's state after the first `r` segments;
* **`KDA.contextParallelOutputs_eq_run`**: the outputs of all ranks, concatenated in rank order,
  are the serial outputs, for every split of the sequence into segments.

All over the scalar law class `ScalarField` (so for ℝ and every lawful model). Not covered: the
all-gather (trusted collective), floating point, the parallel prefix-scan schedule (any
regrouping is licensed by `andThen_assoc`).
-/

@[expose] public section

namespace KimiK3

namespace AffineSummary

variable {α : Type} {keyDim valueDim : Nat}

/-- **Rank-order composition of per-rank segment summaries** (report §5.1, k3-spec §2.2): the left
fold `((id ⋙ s₀) ⋙ s₁) ⋙ …` of `andThen`, first rank applied first; each step memoized. -/
@[macro_inline] def composeAll [Scalar α] (ss : List (AffineSummary α keyDim valueDim)) :
    AffineSummary α keyDim valueDim :=
  ss.foldl (fun acc s => (andThen acc s).memo) (id keyDim valueDim)

section Field

variable [ScalarField α]

@[simp] theorem composeAll_nil : composeAll ([] : List (AffineSummary α keyDim valueDim)) =
    id keyDim valueDim := rfl

/-- The memoized left fold from `acc` is `acc` followed by the right fold. -/
theorem foldl_andThen_memo (acc : AffineSummary α keyDim valueDim)
    (ss : List (AffineSummary α keyDim valueDim)) :
    ss.foldl (fun acc s => (andThen acc s).memo) acc = andThen acc (compose ss) := by
  induction ss generalizing acc with
  | nil => simp
  | cons s ss ih => rw [List.foldl_cons, ih, memo_eq, andThen_assoc, compose_cons]

/-- The rank-order left fold equals the right fold `compose`. -/
theorem composeAll_eq_compose (ss : List (AffineSummary α keyDim valueDim)) :
    composeAll ss = compose ss := by
  simp only [composeAll, foldl_andThen_memo, id_andThen]

/-- **Composition over concatenated rank lists**: the summaries of `ss ++ tt` compose to those
of `ss` followed by those of `tt`. -/
theorem composeAll_append (ss tt : List (AffineSummary α keyDim valueDim)) :
    composeAll (ss ++ tt) = andThen (composeAll ss) (composeAll tt) := by
  simp only [composeAll_eq_compose, compose_append]

/-- One more rank: the accumulated summary followed by that rank's. -/
theorem composeAll_append_singleton (ss : List (AffineSummary α keyDim valueDim))
    (s : AffineSummary α keyDim valueDim) :
    composeAll (ss ++ [s]) = andThen (composeAll ss) s := by
  rw [composeAll_append, composeAll_eq_compose [s], compose_cons, compose_nil, andThen_id]

/-- The composed summary acts as applying the ranks' summaries left to right. -/
theorem apply_composeAll (ss : List (AffineSummary α keyDim valueDim))
    (S : Tensor α [keyDim, valueDim]) :
    (composeAll ss).apply S = ss.foldl (fun S s => s.apply S) S := by
  rw [composeAll_eq_compose, apply_compose]

end Field

end AffineSummary

namespace KDA

variable {α : Type} {keyDim valueDim : Nat}

noncomputable section

/-- The state entering rank `r` (report §5.1): the composed summaries of the segments of ranks
`< r`, applied to the sequence's initial state `S₀`. -/
def incomingState [Scalar α] (S₀ : State α keyDim valueDim)
    (segments : List (List (Input α keyDim valueDim))) (r : Nat) : State α keyDim valueDim :=
  (AffineSummary.composeAll ((segments.map segmentSummary).take r)).apply S₀

/-- The outputs of ranks `r, r + 1, …` holding `segments`, given the all-gathered summaries:
each rank runs KDA over its segment from its incoming state (report §5.1). -/
def rankOutputs [Scalar α] (S₀ : State α keyDim valueDim)
    (gathered : List (AffineSummary α keyDim valueDim)) :
    Nat → List (List (Input α keyDim valueDim)) → List (Tensor α [valueDim])
  | _, [] => []
  | r, seg :: rest =>
    (CausalScan.run step ((AffineSummary.composeAll (gathered.take r)).apply S₀) seg).2 ++
      rankOutputs S₀ gathered (r + 1) rest

/-- **The context-parallel prefill** (report §5.1): every rank's summary all-gathered, then each
rank's outputs from its incoming state, concatenated in rank order. -/
def contextParallelOutputs [Scalar α] (S₀ : State α keyDim valueDim)
    (segments : List (List (Input α keyDim valueDim))) : List (Tensor α [valueDim]) :=
  rankOutputs S₀ (segments.map segmentSummary) 0 segments

end

section Field

variable [ScalarField α]

/-- **The composed segment summaries of any split are the summary of the whole sequence**
(`segmentSummary_append` lifted to lists of segments). -/
theorem composeAll_segmentSummaries (segments : List (List (Input α keyDim valueDim))) :
    AffineSummary.composeAll (segments.map segmentSummary) = segmentSummary segments.flatten := by
  rw [AffineSummary.composeAll_eq_compose]
  induction segments with
  | nil => rfl
  | cons seg rest ih =>
    rw [List.map_cons, AffineSummary.compose_cons, ih, List.flatten_cons, segmentSummary_append]

/-- Applied to the initial state, the composed segment summaries give the serial final state. -/
theorem apply_composeAll_segmentSummaries (S₀ : State α keyDim valueDim)
    (segments : List (List (Input α keyDim valueDim))) :
    (AffineSummary.composeAll (segments.map segmentSummary)).apply S₀ =
      (CausalScan.run step S₀ segments.flatten).1 := by
  rw [composeAll_segmentSummaries, apply_segmentSummary]

/-- **The state entering rank `r`** is the serial recurrence's state after the first `r`
segments. -/
theorem incomingState_eq (S₀ : State α keyDim valueDim)
    (segments : List (List (Input α keyDim valueDim))) (r : Nat) :
    incomingState S₀ segments r = (CausalScan.run step S₀ (segments.take r).flatten).1 := by
  rw [incomingState, ← List.map_take, apply_composeAll_segmentSummaries]

private theorem take_length_append {β : Type} (l₁ l₂ : List β) : (l₁ ++ l₂).take l₁.length = l₁ := by
  induction l₁ with
  | nil => rfl
  | cons a l ih => rw [List.cons_append, List.length_cons, List.take_succ_cons, ih]

/-- Ranks after the segments `pre` produce the serial outputs from the state `pre` leaves. -/
theorem rankOutputs_eq (S₀ : State α keyDim valueDim)
    (pre segments : List (List (Input α keyDim valueDim))) :
    rankOutputs S₀ ((pre ++ segments).map segmentSummary) pre.length segments =
      (CausalScan.run step (CausalScan.run step S₀ pre.flatten).1 segments.flatten).2 := by
  induction segments generalizing pre with
  | nil => simp [rankOutputs]
  | cons seg rest ih =>
    have hin : (AffineSummary.composeAll (((pre ++ seg :: rest).map segmentSummary).take
        pre.length)).apply S₀ = (CausalScan.run step S₀ pre.flatten).1 := by
      have hl : pre.length = (pre.map segmentSummary).length := by simp
      rw [List.map_append, hl, take_length_append, apply_composeAll_segmentSummaries]
    have h := ih (pre ++ [seg])
    rw [List.append_assoc, List.singleton_append, List.length_append, List.length_singleton,
      List.flatten_append, List.flatten_singleton, CausalScan.run_append] at h
    rw [rankOutputs, hin, h, List.flatten_cons, CausalScan.run_append]

/-- **A context-parallel prefill equals the serial one**: for every split of the sequence into
rank segments, the ranks' outputs in rank order are the outputs of running KDA token by token
over the whole sequence. -/
theorem contextParallelOutputs_eq_run (S₀ : State α keyDim valueDim)
    (segments : List (List (Input α keyDim valueDim))) :
    contextParallelOutputs S₀ segments = (CausalScan.run step S₀ segments.flatten).2 := by
  have h := rankOutputs_eq S₀ [] segments
  simpa using h

end Field

end KDA

end KimiK3
