module

public import KimiK3.Sequence.KernelLemmas
public import KimiK3.Sequence.CausalScan

/-!
# Kimi Linear MLA: K3's MLA without the output gate (k3-spec §7)

transformers 5.23's `KimiLinearAttention` (`models/kimi_linear/modeling_kimi_linear.py`) is
DeepSeek-V2 MLA with NoPE: the query from `q_b_proj(RMSNorm(q_a_proj x))`, the cached latent
`RMSNorm(x W_kvd)` and the unrotated shared key (`kv_a_proj_with_mqa` split into both), per-head
content keys and values from the latent (`kv_b_proj`), softmax attention with
`scaling = (qk_nope_head_dim + qk_rope_head_dim)^{-1/2}`, then `o_proj` — the same as K3's
Gated MLA (`GatedMLA`, k3-spec §2.3) except that there is **no sigmoid output gate**. These
definitions reuse K3's cache entry, scores and per-head outputs (`GatedMLA.entry`,
`GatedMLA.headOutputsWith`) and drop the gate; `Params.gateWeight` is not read
(`attend_gateWeight_irrelevant`).

Proved: `gatedMLA_attendWith_eq` and `attendWith_eq` (K3's attention is the gated combination
`gatedOutput` at `σ(x G)`, Kimi Linear's is the same combination at the gate `1`), `step_cache`
(the same cache as K3's step), `forward_length`.

With `q_lora_rank = None` (the transformers default) the query is `q_proj x` with no latent and
no norm; `stepDirect` covers it: the same attention (`attendOf`) fed the layer input itself as the
query "latent" (`directQuery`, for dims with `queryLatentDim = modelDim`; `queryContentUp` and
`querySharedUp` then hold `q_proj`'s content and shared columns, `queryDown`/`queryNormScale`
are not read). `attendWith_eq_attendOf` ties the two query paths to one definition.
-/

@[expose] public section

namespace KimiK3

namespace KimiLinear

namespace MLA

variable {α : Type} [Scalar α] {d : GatedMLA.Dims}

/-- The score scale transformers fixes, `(contentKeyDim + sharedKeyDim)^{-1/2}` (k3-spec §7;
`KimiLinearAttention.scaling = qk_head_dim ** (-0.5)`). -/
@[macro_inline] def defaultScoreScale (d : GatedMLA.Dims) : α :=
  1 / Scalar.sqrt ((d.contentKeyDim + d.sharedKeyDim : Nat) : α)

/-- The head outputs combined under a gate `g`, then projected:
`y[f] = Σ_h Σ_c g[h, c] o[h, c] W_o[h, c, f]` (k3-spec §2.3 Eq. 7's combination). -/
@[macro_inline] def gatedOutput (g o : Tensor α [d.heads, d.valueDim]) (p : GatedMLA.Params α d) :
    Tensor α [d.modelDim] :=
  fun f => finSum d.heads (fun h => finSum d.valueDim (fun c => g h c * o h c * p.outputWeight h c f))

/-- Ungated attention of `x` over `n` rows with weights `wf`, then `o_proj`:
`y[f] = Σ_h Σ_c o_h[c] W_o[h, c, f]` (k3-spec §7; transformers `KimiLinearAttention.forward`). -/
@[macro_inline] def attendWith (wf : (n : Nat) → Tensor α [n] → Tensor α [n])
    (p : GatedMLA.Params α d) (x : Tensor α [d.modelDim]) (scoreScale : α) (n : Nat)
    (latent : Tensor α [n, d.kvLatentDim]) (shared : Tensor α [n, d.sharedKeyDim]) :
    Tensor α [d.modelDim] :=
  let o := Seq.memo2 (GatedMLA.headOutputsWith wf p x scoreScale n latent shared)
  fun f => Seq.sum d.heads (fun h => Seq.sum d.valueDim (fun c => o h c * p.outputWeight h c f))

/-- Ungated softmax attention over `n` cached rows (k3-spec §7). -/
@[macro_inline] def attend (p : GatedMLA.Params α d) (x : Tensor α [d.modelDim]) (scoreScale : α)
    (n : Nat) (latent : Tensor α [n, d.kvLatentDim]) (shared : Tensor α [n, d.sharedKeyDim]) :
    Tensor α [d.modelDim] :=
  attendWith (fun _ v => Seq.softmax v) p x scoreScale n latent shared

/-- **One causal Kimi Linear MLA step** on K3's list cache (k3-spec §7): append the current
entry, attend over past and current entries, no output gate. -/
@[macro_inline] def step (p : GatedMLA.Params α d) (scoreScale : α) (cache : GatedMLA.Cache α d)
    (x : Tensor α [d.modelDim]) : GatedMLA.Cache α d × Tensor α [d.modelDim] :=
  let cache' := Seq.listAppend cache [GatedMLA.entry p x]
  let n := Seq.listLen cache'
  (cache', attend p x scoreScale n (GatedMLA.packLatent n cache') (GatedMLA.packShared n cache'))

/-- The layer over a sequence from the empty cache (k3-spec §2.1 `forward`). -/
@[macro_inline] def forward (p : GatedMLA.Params α d) (scoreScale : α)
    (xs : List (Tensor α [d.modelDim])) : List (Tensor α [d.modelDim]) :=
  (CausalScan.run (step p scoreScale) [] xs).2

/-- K3's Gated MLA attention is `gatedOutput` at its sigmoid gate `σ(x G)`. -/
theorem gatedMLA_attendWith_eq (wf : (n : Nat) → Tensor α [n] → Tensor α [n])
    (p : GatedMLA.Params α d) (x : Tensor α [d.modelDim]) (scoreScale : α) (n : Nat)
    (latent : Tensor α [n, d.kvLatentDim]) (shared : Tensor α [n, d.sharedKeyDim]) :
    GatedMLA.attendWith wf p x scoreScale n latent shared =
      gatedOutput (GatedMLA.gate p x) (GatedMLA.headOutputsWith wf p x scoreScale n latent shared) p := by
  simp only [GatedMLA.attendWith, Seq.memo2_eq, Seq.sum_eq]
  rfl

/-- **Kimi Linear's MLA is K3's with the gate replaced by 1**: the ungated attention is
`gatedOutput` at the constant gate `1` on K3's head outputs. -/
theorem attendWith_eq {β : Type} [ScalarField β] {d : GatedMLA.Dims}
    (wf : (n : Nat) → Tensor β [n] → Tensor β [n])
    (p : GatedMLA.Params β d) (x : Tensor β [d.modelDim]) (scoreScale : β) (n : Nat)
    (latent : Tensor β [n, d.kvLatentDim]) (shared : Tensor β [n, d.sharedKeyDim]) :
    attendWith wf p x scoreScale n latent shared =
      gatedOutput (fun _ _ => 1) (GatedMLA.headOutputsWith wf p x scoreScale n latent shared) p := by
  funext f
  simp only [attendWith, gatedOutput, Seq.memo2_eq, Seq.sum_eq]
  exact finSum_congr (fun h => finSum_congr (fun c => by grind))

/-- The gate weight is not read: two parameter sets differing only in `gateWeight` attend
alike. -/
theorem attend_gateWeight_irrelevant (p : GatedMLA.Params α d)
    (G : Tensor α [d.modelDim, d.heads, d.valueDim]) (x : Tensor α [d.modelDim]) (scoreScale : α)
    (n : Nat) (latent : Tensor α [n, d.kvLatentDim]) (shared : Tensor α [n, d.sharedKeyDim]) :
    attend { p with gateWeight := G } x scoreScale n latent shared =
      attend p x scoreScale n latent shared := rfl

/-- The cache of a step is K3's: the same entry is appended (so K3's packed caches and
`GatedMLA.stepPacked_pack` apply unchanged). -/
theorem step_cache (p : GatedMLA.Params α d) (scoreScale : α) (cache : GatedMLA.Cache α d)
    (x : Tensor α [d.modelDim]) :
    (step p scoreScale cache x).1 = (GatedMLA.step p scoreScale cache x).1 := rfl

/-- The per-head outputs from a given query latent `cq` (K3's `GatedMLA.headOutputsWith` with
the query latent passed in): `o_h = Σ_j softmax-weights(score_h)[j] · c_kv[j] W_v[h]`. -/
@[macro_inline] def headOutputsOf (wf : (n : Nat) → Tensor α [n] → Tensor α [n])
    (p : GatedMLA.Params α d) (cq : Tensor α [d.queryLatentDim]) (scoreScale : α) (n : Nat)
    (latent : Tensor α [n, d.kvLatentDim]) (shared : Tensor α [n, d.sharedKeyDim]) :
    Tensor α [d.heads, d.valueDim] :=
  fun h =>
    let w := Seq.memoFn (wf n (GatedMLA.scores p cq scoreScale h n latent shared))
    Seq.memoFn (fun c => Seq.sum n (fun j => w j * Seq.vecMatMul (latent j) (p.valueUp h) c))

/-- Ungated attention from a given query latent `cq`, then `o_proj` (k3-spec §7). -/
@[macro_inline] def attendOf (wf : (n : Nat) → Tensor α [n] → Tensor α [n])
    (p : GatedMLA.Params α d) (cq : Tensor α [d.queryLatentDim]) (scoreScale : α) (n : Nat)
    (latent : Tensor α [n, d.kvLatentDim]) (shared : Tensor α [n, d.sharedKeyDim]) :
    Tensor α [d.modelDim] :=
  let o := Seq.memo2 (headOutputsOf wf p cq scoreScale n latent shared)
  fun f => Seq.sum d.heads (fun h => Seq.sum d.valueDim (fun c => o h c * p.outputWeight h c f))

/-- The layer input read as the query latent when `queryLatentDim = modelDim`
(`q_lora_rank = None`: transformers' `q_proj(hidden_states)`). -/
@[macro_inline] def directQuery (hq : d.queryLatentDim = d.modelDim) (x : Tensor α [d.modelDim]) :
    Tensor α [d.queryLatentDim] :=
  fun i => x ⟨i.val, hq ▸ i.isLt⟩

/-- **One causal Kimi Linear MLA step with a direct query** (`q_lora_rank = None`; k3-spec §7,
transformers `KimiLinearAttention.forward` with `q_proj`): K3's cache entry, the query `x W_q`
with no latent and no norm, ungated attention. -/
@[macro_inline] def stepDirect (p : GatedMLA.Params α d) (hq : d.queryLatentDim = d.modelDim)
    (scoreScale : α) (cache : GatedMLA.Cache α d) (x : Tensor α [d.modelDim]) :
    GatedMLA.Cache α d × Tensor α [d.modelDim] :=
  let cache' := Seq.listAppend cache [GatedMLA.entry p x]
  let n := Seq.listLen cache'
  (cache', attendOf (fun _ v => Seq.softmax v) p (directQuery hq x) scoreScale n
    (GatedMLA.packLatent n cache') (GatedMLA.packShared n cache'))

/-- The two query paths share one attention: the latent path is `attendOf` at K3's query
latent `RMSNorm(x W_qd) ⊙ γ_q`. -/
theorem attendWith_eq_attendOf (wf : (n : Nat) → Tensor α [n] → Tensor α [n])
    (p : GatedMLA.Params α d) (x : Tensor α [d.modelDim]) (scoreScale : α) (n : Nat)
    (latent : Tensor α [n, d.kvLatentDim]) (shared : Tensor α [n, d.sharedKeyDim]) :
    attendWith wf p x scoreScale n latent shared =
      attendOf wf p (GatedMLA.queryLatent p x) scoreScale n latent shared := by
  simp only [attendWith, attendOf, GatedMLA.headOutputsWith, headOutputsOf, Seq.memo2_eq,
    Seq.memoFn_eq]

/-- The direct-query step keeps K3's cache, and never reads the query latent's weights. -/
theorem stepDirect_cache (p : GatedMLA.Params α d) (hq : d.queryLatentDim = d.modelDim)
    (scoreScale : α) (cache : GatedMLA.Cache α d) (x : Tensor α [d.modelDim])
    (W : Tensor α [d.modelDim, d.queryLatentDim]) (γ : Tensor α [d.queryLatentDim]) :
    (stepDirect p hq scoreScale cache x).1 = (GatedMLA.step p scoreScale cache x).1 ∧
      stepDirect { p with queryDown := W, queryNormScale := γ } hq scoreScale cache x =
        stepDirect p hq scoreScale cache x := ⟨rfl, rfl⟩

/-- One output per token. -/
theorem forward_length (p : GatedMLA.Params α d) (scoreScale : α)
    (xs : List (Tensor α [d.modelDim])) : (forward p scoreScale xs).length = xs.length :=
  CausalScan.outputs_length _ _ _

end MLA

end KimiLinear

end KimiK3
