module

public import KimiK3.Depth.AttnRes
public import KimiK3.Depth.AttnResGraph

/-!
# Retrieval from the block state = the packed graph = a weighted list sum (k3-spec §2.4)

Closes the open point of k3-spec §2.4 ("`BlockState.retrieve` takes list-valued sources; no
theorem equates it with `attendPacked`"):
* `retrieve_eq_attendPacked`, `retrieveAfterSequence_eq_attendPacked` (by definition) and
  **`specFwd_pack_sources`**, **`specFwd_pack_sourcesAfterSequence`**: the AttnRes graph
  `AttnRes.model` run on the packed sources computes `retrieve` / `retrieveAfterSequence`
  (every scalar model);
* **list-level form** (`ScalarLaws`), independent of packing:
  `retrieve eps w s = Σ_{v ∈ sources} (e^{score v} / Σ_{u ∈ sources} e^{score u}) · v`
  (`attendList_apply`, `retrieve_apply`, `retrieveAfterSequence_apply`, with `listSum`);
* bounds over the source list (`retrieve_mem_interval`, `abs_retrieve_le`) and
  `retrieve_initial`: before the first layer the retrieval returns the embedding.
-/

@[expose] public section

namespace KimiK3

namespace AttnRes

variable {α : Type} {d : Nat}

/-- The sum of a list of scalars, `x₀ + (x₁ + (… + 0))`. For proofs only. -/
noncomputable def listSum [Scalar α] (l : List α) : α := l.foldr (· + ·) 0

/-- A sum over the positions of a list is the list sum of the mapped list. -/
theorem finSum_listGet [ScalarField α] {β : Type} (f : β → α) (z : β) (l : List β) :
    finSum (Seq.listLen l) (fun i => f (Seq.listGet z l i.val)) = listSum (l.map f) := by
  induction l with
  | nil => rfl
  | cons v l ih =>
    show finSum (Seq.listLen l + 1) (fun i => f (Seq.listGet z (v :: l) i.val)) = _
    rw [finSum_succ']
    simp only [Fin.val_zero, Fin.val_succ, Seq.listGet]
    rw [ih]; rfl

/-- Every packed row is one of the sources. -/
theorem pack_mem [Scalar α] (l : List (Tensor α [d])) (i : Fin (Seq.listLen l)) : pack l i ∈ l := by
  have hi : i.val < l.length := by have := i.isLt; simpa using this
  simp only [pack]; rw [Seq.listGet_eq_getElem _ _ _ hi]; exact List.getElem_mem hi

section Laws

variable [ScalarLaws α]

/-- **Depth attention over a list, without packing** (report Eq. 9–10):
`h = Σ_{v} (e^{score v} / Σ_u e^{score u}) · v` over the source list. -/
theorem attendList_apply (eps : α) (query v : Tensor α [d]) (rest : List (Tensor α [d])) (k : Fin d) :
    attendList eps query (v :: rest) k =
      listSum ((v :: rest).map (fun u => Scalar.exp (score eps query u) /
        listSum ((v :: rest).map (fun u' => Scalar.exp (score eps query u'))) * u k)) := by
  have h1 := congrFun (attendPacked_eq_weights (n := Seq.listLen rest + 1) eps query (pack (v :: rest))) k
  refine h1.trans ?_
  simp only [weights_eq_exp]
  have hz := finSum_listGet (fun u => Scalar.exp (score eps query u)) (fun _ => 0) (v :: rest)
  have hz' : finSum (Seq.listLen rest + 1) (fun j => Scalar.exp (score eps query (pack (v :: rest) j))) =
      listSum ((v :: rest).map (fun u' => Scalar.exp (score eps query u'))) := hz
  rw [hz']
  exact finSum_listGet (fun u => Scalar.exp (score eps query u) /
    listSum ((v :: rest).map (fun u' => Scalar.exp (score eps query u'))) * u k) (fun _ => 0) (v :: rest)

/-- Depth attention over a list stays in every interval holding all the sources' coordinates. -/
theorem attendList_mem_interval (eps : α) (query v : Tensor α [d]) (rest : List (Tensor α [d]))
    (k : Fin d) (lo hi : α) (h : ∀ u ∈ v :: rest, lo ≤ u k ∧ u k ≤ hi) :
    lo ≤ attendList eps query (v :: rest) k ∧ attendList eps query (v :: rest) k ≤ hi :=
  attendPacked_mem_interval (n := Seq.listLen rest) eps query (pack (v :: rest)) k lo hi
    (fun i => h _ (pack_mem (v :: rest) i))

end Laws

end AttnRes

namespace BlockState

open AttnRes

variable {α : Type} {d : Nat}

section Exact

variable [Scalar α]

/-- `retrieve` is `attendPacked` of the packed sources (by definition). -/
theorem retrieve_eq_attendPacked (eps : α) (query : Tensor α [d]) (s : BlockState α d) :
    s.retrieve eps query = attendPacked eps query (pack s.sources) := rfl

/-- `retrieveAfterSequence` is `attendPacked` of the packed `sourcesAfterSequence`. -/
theorem retrieveAfterSequence_eq_attendPacked (eps : α) (query : Tensor α [d]) (s : BlockState α d)
    (seqOut : Tensor α [d]) :
    s.retrieveAfterSequence eps query seqOut = attendPacked eps query (pack (s.sourcesAfterSequence seqOut)) :=
  rfl

/-- **The AttnRes graph on the packed sources computes `retrieve`** (every scalar model). -/
theorem specFwd_pack_sources (eps : α) (query : Tensor α [d]) (s : BlockState α d) :
    (AttnRes.model (Seq.listLen s.sources) d eps).specFwd (.cons query (.cons (fun _ => 1) .nil))
      (.cons (pack s.sources) .nil) = .cons (s.retrieve eps query) .nil :=
  specFwd_eq_attendPacked _ d eps query _

/-- **The AttnRes graph on the packed sources after the sequence mixer computes
`retrieveAfterSequence`** (every scalar model). -/
theorem specFwd_pack_sourcesAfterSequence (eps : α) (query : Tensor α [d]) (s : BlockState α d)
    (seqOut : Tensor α [d]) :
    (AttnRes.model (Seq.listLen (s.sourcesAfterSequence seqOut)) d eps).specFwd
        (.cons query (.cons (fun _ => 1) .nil)) (.cons (pack (s.sourcesAfterSequence seqOut)) .nil) =
      .cons (s.retrieveAfterSequence eps query seqOut) .nil :=
  specFwd_eq_attendPacked _ d eps query _

end Exact

section Laws

variable [ScalarLaws α]

/-- **Retrieval as a weighted sum over the source list** (report Eq. 9–10): the weight of
source `v` is `e^{score v} / Σ_u e^{score u}`, `score v = w · RMSNorm(v)`. -/
theorem retrieve_apply (eps : α) (query : Tensor α [d]) (s : BlockState α d) (k : Fin d) :
    s.retrieve eps query k =
      listSum (s.sources.map (fun u => Scalar.exp (score eps query u) /
        listSum (s.sources.map (fun u' => Scalar.exp (score eps query u'))) * u k)) :=
  attendList_apply eps query s.embedding _ k

/-- The channel mixer's retrieval as a weighted sum over `sourcesAfterSequence`. -/
theorem retrieveAfterSequence_apply (eps : α) (query : Tensor α [d]) (s : BlockState α d)
    (seqOut : Tensor α [d]) (k : Fin d) :
    s.retrieveAfterSequence eps query seqOut k =
      listSum ((s.sourcesAfterSequence seqOut).map (fun u => Scalar.exp (score eps query u) /
        listSum ((s.sourcesAfterSequence seqOut).map (fun u' => Scalar.exp (score eps query u'))) * u k)) :=
  attendList_apply eps query s.embedding _ k

/-- **Retrieval is bounded by the sources**: if every source's coordinate `k` lies in
`[lo, hi]`, so does the retrieved one. -/
theorem retrieve_mem_interval (eps : α) (query : Tensor α [d]) (s : BlockState α d) (k : Fin d)
    (lo hi : α) (h : ∀ u ∈ s.sources, lo ≤ u k ∧ u k ≤ hi) :
    lo ≤ s.retrieve eps query k ∧ s.retrieve eps query k ≤ hi :=
  attendList_mem_interval eps query s.embedding _ k lo hi h

/-- `|retrieve_k| ≤ M` when every source has `|v_k| ≤ M`. -/
theorem abs_retrieve_le (eps : α) (query : Tensor α [d]) (s : BlockState α d) (k : Fin d) (M : α)
    (h : ∀ u ∈ s.sources, Scalar.abs (u k) ≤ M) : Scalar.abs (s.retrieve eps query k) ≤ M :=
  abs_attendPacked_le (n := Seq.listLen (Seq.listAppend s.blocks (if s.count = 0 then [] else [s.partialSum])))
    eps query (pack s.sources) k M (fun i => h _ (pack_mem s.sources i))

/-- **Before the first layer the retrieval returns the embedding** (its only source). -/
theorem retrieve_initial (eps : α) (query e : Tensor α [d]) : (initial e).retrieve eps query = e := by
  have hp : pack (initial e).sources = fun (_ : Fin 1) => e := by
    funext i; match i with | ⟨0, _⟩ => rfl
  show attendPacked eps query (pack (initial e).sources) = e
  rw [hp]; exact attendPacked_const (n := 0) eps query e

end Laws

end BlockState

end KimiK3
