module

public import KimiK3.Sequence.Kernel
public import KimiK3.Core.Json
public import KimiK3.Core.NamedVars

/-!
# Graphs of the sequence mixers (definitions; k3-spec §2.2, `GraphSpec/KDA.lean`)

`Core` typed graphs (`Term`, `Model`) for the KDA step — one head (`headStepModel`) and packed
over heads (`packedStepModel`) — and for the packed Gated MLA step (`GatedMLA.stepModel`,
k3-spec §2.3), with their `k3spec.graph.v1` JSON exports on the tiny fixture's dimensions
(`headStepJsonTiny`, `packedStepJsonTiny`, `GatedMLA.stepJsonTiny`). Definitions only
(executable, so the codegen bundle can evaluate them); their meaning is proved in
`KDAGraph.lean`, `KDAPacked.lean` and `MLAGraph.lean`. The term builders that the decoder
graph reuses (`expand*Term`, `batchedReadTerm`, `packedUpdateTerm`, `GatedMLA.stepModel`) are
`@[macro_inline]`, so that `Graph/Kernel.lean` can compile them (a module cannot compile a call
to another module's type-generic function offline).
-/

@[expose] public section

namespace KimiK3

namespace KDA

variable {α : Type}

/-- The input context of the head graph: state, key, value, retention, write strength, query. -/
abbrev headCtx (keyDim valueDim : Nat) : List Shape :=
  [[keyDim, valueDim], [keyDim], [valueDim], [keyDim], [], [keyDim]]

/-- The update term of report Eq. 1 in the context `headCtx`: decay, correct, write. -/
def updateTerm (keyDim valueDim : Nat) : Term α (headCtx keyDim valueDim) [keyDim, valueDim] :=
  .let1
    (.op (.binary .mul [keyDim, valueDim])
      (.cons (.op (.swapAxes01 valueDim keyDim [])
          (.cons (.op (.broadcast valueDim [keyDim]) (.cons (.var (.there (.there (.there .here)))) .nil)) .nil))
        (.cons (.var .here) .nil)))
    (.op (.binary .add [keyDim, valueDim])
      (.cons (.op (.binary .sub [keyDim, valueDim])
          (.cons (.var .here)
            (.cons (.op (.binary .mul [keyDim, valueDim])
                (.cons (.op (.broadcast keyDim [valueDim])
                    (.cons (.op (.broadcast valueDim []) (.cons (.var (.there (.there (.there (.there (.there .here)))))) .nil)) .nil))
                  (.cons (.op (.outer keyDim valueDim)
                      (.cons (.var (.there (.there .here)))
                        (.cons (.op (.vecMatMul keyDim valueDim)
                            (.cons (.var (.there (.there .here))) (.cons (.var .here) .nil))) .nil))) .nil))) .nil)))
        (.cons (.op (.binary .mul [keyDim, valueDim])
            (.cons (.op (.broadcast keyDim [valueDim])
                (.cons (.op (.broadcast valueDim []) (.cons (.var (.there (.there (.there (.there (.there .here)))))) .nil)) .nil))
              (.cons (.op (.outer keyDim valueDim)
                  (.cons (.var (.there (.there .here))) (.cons (.var (.there (.there (.there .here)))) .nil))) .nil)))
          .nil)))

/-- **The KDA head step graph** (report Eq. 1): outputs the updated state and the readout of the
updated state by the query. -/
def headStepModel (keyDim valueDim : Nat) : Model α where
  params := []
  inputs := [("state", [keyDim, valueDim]), ("key", [keyDim]), ("value", [valueDim]),
    ("retention", [keyDim]), ("beta", []), ("query", [keyDim])]
  outputs := [("next_state", [keyDim, valueDim]), ("output", [valueDim])]
  body :=
    .cons (updateTerm keyDim valueDim)
      (.cons (.let1 (updateTerm keyDim valueDim)
        (.op (.vecMatMul keyDim valueDim)
          (.cons (.var (.there (.there (.there (.there (.there (.there .here))))))) (.cons (.var .here) .nil))))
        .nil)

/-- Broadcast a `[H, K]` term along a new last axis of length `V`:
`reshape [H*K] → broadcast V → swapAxes01 → reshape [H, K, V]`. -/
@[macro_inline] def expandLastTerm {Γ : List Shape} (H K V : Nat) (t : Term α Γ [H, K]) : Term α Γ [H, K, V] :=
  .op (.reshape [H * K, V] [H, K, V] (by simp [Shape.numel, Nat.mul_assoc]))
    (.cons (.op (.swapAxes01 V (H * K) [])
      (.cons (.op (.broadcast V [H * K])
        (.cons (.op (.reshape [H, K] [H * K] (by simp [Shape.numel])) (.cons t .nil)) .nil)) .nil)) .nil)

/-- Broadcast a `[H, V]` term along a new middle axis of length `K`
(`broadcast K`, then `swapAxes01`). -/
@[macro_inline] def expandMidTerm {Γ : List Shape} (H K V : Nat) (t : Term α Γ [H, V]) : Term α Γ [H, K, V] :=
  .op (.swapAxes01 K H [V]) (.cons (.op (.broadcast K [H, V]) (.cons t .nil)) .nil)

/-- Broadcast a `[H]` term to `[H, V]` (`broadcast V`, then `swapAxes01`). -/
@[macro_inline] def expandHeadTerm {Γ : List Shape} (H V : Nat) (t : Term α Γ [H]) : Term α Γ [H, V] :=
  .op (.swapAxes01 V H []) (.cons (.op (.broadcast V [H]) (.cons t .nil)) .nil)

/-- The batched row-vector product `o[h, c] = Σ_r q[h, r] M[h, r, c]` (`reshape` the rows to
`[H, 1, K]`, `batchedMatMul`, `reshape` back to `[H, V]`). -/
@[macro_inline] def batchedReadTerm {Γ : List Shape} (H K V : Nat) (q : Term α Γ [H, K]) (m : Term α Γ [H, K, V]) :
    Term α Γ [H, V] :=
  .op (.reshape [H, 1, V] [H, V] (by simp [Shape.numel]))
    (.cons (.op (.batchedMatMul H 1 K V)
      (.cons (.op (.reshape [H, K] [H, 1, K] (by simp [Shape.numel])) (.cons q .nil))
        (.cons m .nil))) .nil)

/-- The packed input context: states, keys, values, retentions, write strengths, queries. -/
abbrev packedCtx (H K V : Nat) : List Shape := [[H, K, V], [H, K], [H, V], [H, K], [H], [H, K]]

/-- **The packed multi-head KDA update** (report Eq. 1, the article's `updateTerm`): the decay
`mul` (bound once), the batched correction, two outer products as broadcast `mul`s, two
`β`-scaled `mul`s, `sub` and `add`. -/
@[macro_inline] def packedUpdateTerm (H K V : Nat) : Term α (packedCtx H K V) [H, K, V] :=
  .let1
    (.op (.binary .mul [H, K, V])
      (.cons (expandLastTerm H K V (.var (.there (.there (.there .here))))) (.cons (.var .here) .nil)))
    (.op (.binary .add [H, K, V])
      (.cons (.op (.binary .sub [H, K, V])
          (.cons (.var .here)
            (.cons (.op (.binary .mul [H, K, V])
                (.cons (expandMidTerm H K V (expandHeadTerm H V (.var (.there (.there (.there (.there (.there .here))))))))
                  (.cons (.op (.binary .mul [H, K, V])
                      (.cons (expandLastTerm H K V (.var (.there (.there .here))))
                        (.cons (expandMidTerm H K V
                            (batchedReadTerm H K V (.var (.there (.there .here))) (.var .here))) .nil))) .nil))) .nil)))
        (.cons (.op (.binary .mul [H, K, V])
            (.cons (expandMidTerm H K V (expandHeadTerm H V (.var (.there (.there (.there (.there (.there .here))))))))
              (.cons (.op (.binary .mul [H, K, V])
                  (.cons (expandLastTerm H K V (.var (.there (.there .here))))
                    (.cons (expandMidTerm H K V (.var (.there (.there (.there .here))))) .nil))) .nil)))
          .nil)))

/-- **The packed multi-head KDA step graph**: updated head states `[heads, keyDim, valueDim]`
and readouts `[heads, valueDim]` of the updated states (report Eq. 1). -/
def packedStepModel (H K V : Nat) : Model α where
  params := []
  inputs := [("state", [H, K, V]), ("key", [H, K]), ("value", [H, V]), ("retention", [H, K]),
    ("beta", [H]), ("query", [H, K])]
  outputs := [("next_state", [H, K, V]), ("output", [H, V])]
  body :=
    .cons (packedUpdateTerm H K V)
      (.cons (.let1 (packedUpdateTerm H K V)
        (batchedReadTerm H K V (.var (.there (.there (.there (.there (.there (.there .here))))))) (.var .here)))
        .nil)

/-- The inputs of head `h` from the packed tensors. -/
def headInput {H K V : Nat} (key : Tensor α [H, K]) (value : Tensor α [H, V]) (ret : Tensor α [H, K])
    (beta : Tensor α [H]) (query : Tensor α [H, K]) (h : Fin H) : Input α K V :=
  ⟨query h, key h, value h, ret h, beta h⟩

end KDA

namespace KDA

/-- The `k3spec.graph.v1` JSON export of the KDA head step graph on the dimensions of
`fixtures/tiny/config.json` (`head_k_dim = 5`, `head_v_dim = 7`). -/
def headStepJsonTiny : String := Model.toJson "kda_head_step_tiny" (headStepModel (α := Float) 5 7)

/-- The `k3spec.graph.v1` JSON export of the packed KDA step graph on the dimensions of
`fixtures/tiny/config.json` (`num_heads = 2`, `head_k_dim = 5`, `head_v_dim = 7`). -/
def packedStepJsonTiny : String := Model.toJson "kda_packed_step_tiny" (packedStepModel (α := Float) 2 5 7)

end KDA

namespace GatedMLA

variable {α : Type}

/-- The parameters of the packed MLA step graph, in `Params` order. -/
def stepParams (d : Dims) : Signature :=
  [("query_down", [d.modelDim, d.queryLatentDim]), ("query_norm_scale", [d.queryLatentDim]),
    ("kv_down", [d.modelDim, d.kvLatentDim]), ("kv_norm_scale", [d.kvLatentDim]),
    ("shared_key_down", [d.modelDim, d.sharedKeyDim]),
    ("query_content_up", [d.heads, d.queryLatentDim, d.contentKeyDim]),
    ("query_shared_up", [d.heads, d.queryLatentDim, d.sharedKeyDim]),
    ("key_up", [d.heads, d.kvLatentDim, d.contentKeyDim]),
    ("value_up", [d.heads, d.kvLatentDim, d.valueDim]),
    ("gate_weight", [d.modelDim, d.heads, d.valueDim]),
    ("output_weight", [d.heads, d.valueDim, d.modelDim])]

/-- The inputs of the packed MLA step graph: the `T` cached rows, the token, the score scale. -/
def stepInputs (T : Nat) (d : Dims) : Signature :=
  [("latent_cache", [T, d.kvLatentDim]), ("shared_key_cache", [T, d.sharedKeyDim]),
    ("x", [d.modelDim]), ("score_scale", [])]

/-- **The packed Gated MLA step graph** (k3-spec §2.3, Eq. 7; the article's `stepModel`):
parameters `stepParams` (in `LayerParams` order), inputs `latent_cache [T, kvLatentDim]`,
`shared_key_cache [T, sharedKeyDim]`, `x [modelDim]`, `score_scale []`; the current rows are
appended with `concat0`, scores use the absorbed form `Σ_c qC[h,c] (c_kv[j] W_k[h])[c]` via
`sumLast`, the softmax runs along the token axis, the gate comes from `x`, and heads are summed
with `swapAxes01`/`sumLast`. The context is named with `Vars.all` (`Core/NamedVars.lean`). -/
@[macro_inline] def stepModel (eps : α) (T : Nat) (d : Dims) : Model α where
  params := stepParams d
  inputs := stepInputs T d
  outputs := [("latent_cache_next", [T + 1, d.kvLatentDim]),
    ("shared_key_cache_next", [T + 1, d.sharedKeyDim]), ("output", [d.modelDim])]
  body :=
    let (queryDown, queryNormScale, kvDown, kvNormScale, sharedKeyDown, queryContentUp,
        querySharedUp, keyUp, valueUp, gateWeight, outputWeight, latentCache, sharedKeyCache, x,
        scoreScale, ()) :=
      Vars.all (Shape.appendList (stepParams d).shapes (stepInputs T d).shapes)
    -- the token's cache entry: latent `RMSNorm(x W_kv↓)` and shared key `x W_k↓`, appended
    let latentCacheNext := Term.op (.concat0 T 1 [d.kvLatentDim]) (.cons (.var latentCache)
      (.cons (.op (.broadcast 1 [d.kvLatentDim]) (.cons (.op (.rmsNormLast eps [] d.kvLatentDim)
        (.cons (.op (.vecMatMul d.modelDim d.kvLatentDim) (.cons (.var x) (.cons (.var kvDown) .nil)))
          (.cons (.var kvNormScale) .nil))) .nil)) .nil))
    let sharedKeyCacheNext := Term.op (α := α) (.concat0 T 1 [d.sharedKeyDim]) (.cons (.var sharedKeyCache)
      (.cons (.op (.broadcast 1 [d.sharedKeyDim]) (.cons (.op (.vecMatMul d.modelDim d.sharedKeyDim)
        (.cons (.var x) (.cons (.var sharedKeyDown) .nil))) .nil)) .nil))
    -- the query latent `RMSNorm(x W_q↓)`, one copy per head
    let queryLatent := Term.op (.broadcast d.heads [d.queryLatentDim]) (.cons
      (.op (.rmsNormLast eps [] d.queryLatentDim) (.cons (.op (.vecMatMul d.modelDim d.queryLatentDim)
        (.cons (.var x) (.cons (.var queryDown) .nil))) (.cons (.var queryNormScale) .nil))) .nil)
    -- scores over the `T + 1` rows: content part in the absorbed form plus the shared-key part
    let contentScores := Term.op (.sumLast [d.heads, T + 1] d.contentKeyDim) (.cons
      (.op (.binary .mul [d.heads, T + 1, d.contentKeyDim]) (.cons
        (KDA.expandMidTerm d.heads (T + 1) d.contentKeyDim
          (KDA.batchedReadTerm d.heads d.queryLatentDim d.contentKeyDim queryLatent (.var queryContentUp)))
        (.cons (.op (.batchedMatMul d.heads (T + 1) d.kvLatentDim d.contentKeyDim) (.cons
          (.op (.broadcast d.heads [T + 1, d.kvLatentDim]) (.cons latentCacheNext .nil))
          (.cons (.var keyUp) .nil))) .nil))) .nil)
    let sharedScores := Term.op (.sumLast [d.heads, T + 1] d.sharedKeyDim) (.cons
      (.op (.binary .mul [d.heads, T + 1, d.sharedKeyDim]) (.cons
        (KDA.expandMidTerm d.heads (T + 1) d.sharedKeyDim
          (KDA.batchedReadTerm d.heads d.queryLatentDim d.sharedKeyDim queryLatent (.var querySharedUp)))
        (.cons (.op (.broadcast d.heads [T + 1, d.sharedKeyDim]) (.cons sharedKeyCacheNext .nil)) .nil)))
      .nil)
    let weights := Term.op (.softmaxLast [d.heads] (T + 1)) (.cons (.op (.binary .mul [d.heads, T + 1])
      (.cons (.op (.broadcast d.heads [T + 1]) (.cons (.op (.broadcast (T + 1) []) (.cons (.var scoreScale)
        .nil)) .nil)) (.cons (.op (.binary .add [d.heads, T + 1]) (.cons contentScores
          (.cons sharedScores .nil))) .nil))) .nil)
    -- per-head values `Σ_j w[h, j] (c_j W_v[h])`, gated by `σ(x G[h])`
    let headValues := KDA.batchedReadTerm d.heads (T + 1) d.valueDim weights
      (.op (.batchedMatMul d.heads (T + 1) d.kvLatentDim d.valueDim) (.cons
        (.op (.broadcast d.heads [T + 1, d.kvLatentDim]) (.cons latentCacheNext .nil))
        (.cons (.var valueUp) .nil)))
    let gate := Term.op (α := α) (.unary .sigmoid [d.heads, d.valueDim]) (.cons
      (KDA.batchedReadTerm d.heads d.modelDim d.valueDim (.op (.broadcast d.heads [d.modelDim])
        (.cons (.var x) .nil)) (.op (.swapAxes01 d.modelDim d.heads [d.valueDim])
          (.cons (.var gateWeight) .nil))) .nil)
    -- the output `Σ_h (gate ⊙ values)[h] W_o[h]`
    let output := Term.op (.sumLast [d.modelDim] d.heads) (.cons (.op (.swapAxes01 d.heads d.modelDim [])
      (.cons (KDA.batchedReadTerm d.heads d.valueDim d.modelDim
        (.op (.binary .mul [d.heads, d.valueDim]) (.cons gate (.cons headValues .nil)))
        (.var outputWeight)) .nil)) .nil)
    .cons latentCacheNext (.cons sharedKeyCacheNext (.cons output .nil))

/-- The tiny fixture's MLA dimensions (`fixtures/tiny/config.json`: hidden 24, 3 heads,
`q_lora_rank` 10, `kv_lora_rank` 11, NoPE content key 9, unrotated shared key 14, value 8). -/
def tinyDims : Dims := ⟨24, 3, 10, 11, 9, 14, 8⟩

/-- The parameters of a layer as a graph environment, in `LayerParams` order. -/
def paramsEnv (p : Params α d) : Env α (stepModel (α := α) p.normEps 0 d).params.shapes :=
  .cons p.queryDown (.cons p.queryNormScale (.cons p.kvDown (.cons p.kvNormScale
    (.cons p.sharedKeyDown (.cons p.queryContentUp (.cons p.querySharedUp (.cons p.keyUp
      (.cons p.valueUp (.cons p.gateWeight (.cons p.outputWeight .nil))))))))))

/-- The `k3spec.graph.v1` JSON export of the packed Gated MLA step graph on the tiny fixture's
dimensions, 2 past tokens, `ε = mla_latent_norm_eps = 2e-6` (the tiny configuration's). -/
def stepJsonTiny : String := Model.toJson "mla_packed_step_tiny" (stepModel (α := Float) 2e-6 2 tinyDims)

end GatedMLA

end KimiK3
