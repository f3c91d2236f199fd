module

public import KimiK3.Core.Kernel

/-!
# Executable kernel of the sequence mixers (k3-spec §2.1–2.3)

Every executable definition of `KimiK3.Sequence` lives in this one module, which calls no generic
definition of another module (why: `Core/README.md`, "Toolchain constraints"); it carries its own
copies of the few generic helpers it needs (`Seq.sum`, `Seq.memoFn`, …), each proved equal to the
`Core` one in `KernelLemmas.lean`. The theorems live in the other files of this folder (see
`README.md`).

Contents: list helpers; `Seq` vector operations (sum, memoization, products, softmax, RMSNorm,
L2 normalization, SiLU); `CausalScan.run`; KDA (state, input, update, read, step, retention,
token summaries, chunked evaluation, the full layer step); `AffineSummary`; Gated MLA (list and
packed steps, the masked full-sequence form).
-/

@[expose] public section

namespace KimiK3

namespace Seq

variable {α β : Type}

/-! ## Lists (own recursion: `List.length`, `List.append` do not compile offline) -/

/-- List concatenation. -/
def listAppend : List β → List β → List β
  | [], ys => ys
  | x :: xs, ys => x :: listAppend xs ys

/-- The length of a list. -/
def listLen : List β → Nat
  | [] => 0
  | _ :: xs => listLen xs + 1

/-- The `i`-th element of a list, `d` past its end. -/
def listGet (d : β) : List β → Nat → β
  | [], _ => d
  | x :: _, 0 => x
  | _ :: xs, i + 1 => listGet d xs i

/-- The last element of a list, `d` for the empty list. -/
def lastD (d : β) : List β → β
  | [] => d
  | [x] => x
  | _ :: xs => lastD d xs

/-! ## Memoization (copies of `Core`'s, proved equal to the identity) -/

/-- The array `#[f 0, …, f (k-1)]`. -/
def buildArray {n : Nat} (f : Fin n → β) : (k : Nat) → k ≤ n → Array β
  | 0, _ => #[]
  | k + 1, h => (buildArray f k (by omega)).push (f ⟨k, h⟩)

/-- Read `f i` from the array `a` (falling back to `f i` past its end). Not inlined, so that a
caller's array argument is computed once, before the closure is built (`Core/README.md`,
"Toolchain constraints", 3). -/
@[noinline] def readArray {n : Nat} (a : Array β) (f : Fin n → β) : Fin n → β :=
  fun i => if h : i.val < a.size then a[i.val] else f i

/-- `f` with its values computed once and stored in an array. -/
def memoFn {n : Nat} (f : Fin n → β) : Fin n → β :=
  readArray (buildArray f n (Nat.le_refl n)) f

/-- A matrix with its rows and entries memoized. -/
def memo2 {m n : Nat} (t : Fin m → Fin n → β) : Fin m → Fin n → β :=
  memoFn (fun i => memoFn (t i))

/-! ## Vector operations -/

section Ops

variable [Scalar α]

/-- The sum `f 0 + … + f (n-1)`, last term added last (equal to `finSum`). -/
def sum : (n : Nat) → (Fin n → α) → α
  | 0, _ => 0
  | n + 1, f => sum n (fun i => f ⟨i.val, by omega⟩) + f ⟨n, by omega⟩

/-- The dot product `Σ_i x_i y_i`. -/
def dot {n : Nat} (x y : Tensor α [n]) : α := sum n (fun i => x i * y i)

/-- Row vector times matrix, `y_k = Σ_i x_i W[i, k]` (`[in, out]` convention, k3-spec §0). -/
def vecMatMul {n m : Nat} (x : Tensor α [n]) (w : Tensor α [n, m]) : Tensor α [m] :=
  fun k => sum n (fun i => x i * w i k)

/-- The largest of `acc, f 0, …, f (n-1)`. -/
def maxFrom (acc : α) : (n : Nat) → (Fin n → α) → α
  | 0, _ => acc
  | n + 1, f => maxFrom (max acc (f ⟨n, by omega⟩)) n (fun i => f ⟨i.val, by omega⟩)

/-- The softmax of a vector shifted by its largest entry `m`:
`softmax(x)_i = exp(x_i − m) / Σ_j exp(x_j − m)` (k3-spec §2.0, §2.3). -/
def softmax : {n : Nat} → Tensor α [n] → Tensor α [n]
  | 0, x => x
  | n + 1, x =>
    let m := maxFrom (x 0) (n + 1) x
    let e := memoFn (fun i : Fin (n + 1) => Scalar.exp (x i - m))
    let z := sum (n + 1) e
    fun i => e i / z

/-- The sum of squares `Σ_i z_i²`. -/
def sumSq {n : Nat} (z : Tensor α [n]) : α := sum n (fun i => z i * z i)

/-- RMS normalization with gain `γ`: `y_i = z_i / √(Σ_k z_k² / n + ε) · γ_i` (k3-spec §2.3). -/
def rmsNorm {n : Nat} (eps : α) (z g : Tensor α [n]) : Tensor α [n] :=
  let d := Scalar.sqrt (sumSq z / (n : α) + eps)
  fun i => z i / d * g i

/-- Regularized L2 normalization `z / √(‖z‖² + ε)` (k3-spec §2.2 step 4, FLA convention). -/
def l2Normalize {n : Nat} (eps : α) (z : Tensor α [n]) : Tensor α [n] :=
  let d := Scalar.sqrt (sumSq z + eps)
  fun i => z i / d

/-- SiLU, `x · σ(x)` (KDA activation, k3-spec §2.2 step 3, following Kimi Linear). -/
def silu (x : α) : α := x * Scalar.sigmoid x

end Ops

end Seq

/-! ## Causal scan (k3-spec §2.1) -/

namespace CausalScan

variable {σ ι ο : Type}

/-- The causal scan of k3-spec §2.1: run the step `f` left to right over `xs` from state `s`,
returning the final state and the outputs in order. -/
def run (f : σ → ι → σ × ο) (s : σ) : List ι → σ × List ο
  | [] => (s, [])
  | x :: xs =>
    let r := f s x
    let rest := run f r.1 xs
    (rest.1, r.2 :: rest.2)

end CausalScan

/-! ## KDA, one head (k3-spec §2.2, report Eq. 1) -/

namespace KDA

/-- The recurrent state of one KDA head, `S ∈ α^{keyDim × valueDim}` (report Eq. 1). -/
abbrev State (α : Type) (keyDim valueDim : Nat) := Tensor α [keyDim, valueDim]

/-- The per-token inputs of one KDA head (report Eq. 1): query `q_t`, key `k_t`, value `v_t`,
per-key-row retention `α_t` and scalar write strength `β_t`. -/
structure Input (α : Type) (keyDim valueDim : Nat) where
  /-- The query `q_t`, read against the updated state. -/
  query : Tensor α [keyDim]
  /-- The key `k_t`. -/
  key : Tensor α [keyDim]
  /-- The value `v_t`. -/
  value : Tensor α [valueDim]
  /-- The retention `α_t`: one decay factor per key row. -/
  retention : Tensor α [keyDim]
  /-- The write strength `β_t` (one scalar per head). -/
  writeStrength : α

variable {α : Type} [Scalar α] {keyDim valueDim : Nat}

/-- The zero state of a head (no memory). -/
def State.zero (keyDim valueDim : Nat) : State α keyDim valueDim := fun _ _ => 0

/-- The decayed state `Diag(α) S`: row `r` multiplied by the retention `α[r]` (report Eq. 1). -/
def decay (S : State α keyDim valueDim) (retention : Tensor α [keyDim]) : State α keyDim valueDim :=
  fun r c => retention r * S r c

/-- The correction `kᵀ · decayed`: the value the decayed memory associates with the key
(report Eq. 1). -/
def correction (decayed : State α keyDim valueDim) (key : Tensor α [keyDim]) : Tensor α [valueDim] :=
  fun c => Seq.sum keyDim (fun s => key s * decayed s c)

/-- The KDA state update of report Eq. 1 in the article's factorized order: decay
(`decayed = Diag(α) S`), correct (`correction = kᵀ decayed`), write:
`S' = decayed − β (k ⊗ correction) + β (k ⊗ v)`. -/
def update (S : State α keyDim valueDim) (x : Input α keyDim valueDim) : State α keyDim valueDim :=
  let decayed := Seq.memo2 (decay S x.retention)
  let corr := Seq.memoFn (correction decayed x.key)
  fun r c => decayed r c - x.writeStrength * (x.key r * corr c)
    + x.writeStrength * (x.key r * x.value c)

/-- The readout `õ = Sᵀ q` of report Eq. 1 (`o[c] = Σ_r q[r] S[r, c]`). -/
def read (S : State α keyDim valueDim) (q : Tensor α [keyDim]) : Tensor α [valueDim] :=
  Seq.vecMatMul q S

/-- One token of one KDA head (report Eq. 1): update the state, then read the *updated* state
with the query. The new state is memoized so that scans evaluate in linear time. -/
def step (S : State α keyDim valueDim) (x : Input α keyDim valueDim) :
    State α keyDim valueDim × Tensor α [valueDim] :=
  let next := Seq.memo2 (update S x)
  (next, read next x.query)

/-- The KDA log-decay floor of the report, `g_min = −5` (Eq. 5). -/
def paperLogFloor : α := -5

/-- The bounded log-decay `g = g_min · σ(e^{s} · z)` of report Eq. 5. -/
def logDecay (logFloor logScale logit : α) : α :=
  logFloor * Scalar.sigmoid (Scalar.exp logScale * logit)

/-- The KDA retention `α = exp(g_min · σ(e^{s} · z))` of report Eq. 5 (`retentionReal` in the
article). -/
def retention (logFloor logScale logit : α) : α :=
  Scalar.exp (logDecay logFloor logScale logit)

/-- The scalar delta rule `s' = α s + β (v − α s)`: report Eq. 1 with `d_k = d_v = 1`,
`k = q = 1` (a decayed memory plus a scaled prediction error, k3-spec §2.2). -/
def scalarDelta (s a v b : α) : α := a * s + b * (v - a * s)

/-- A one-dimensional KDA input with `k = q = 1`, retention `a`, value `v`, write strength `b`. -/
def scalarInput (a v b : α) : Input α 1 1 :=
  ⟨fun _ => 1, fun _ => 1, fun _ => v, fun _ => a, b⟩

/-- The 1×1 state holding `s`. -/
def scalarState (s : α) : State α 1 1 := fun _ _ => s

/-- The toy input of the article (k3-spec §2.2): `q = k = [1, 0]`, `v = [3]`, retention
`[1, 1]`, `β = 1`. -/
def toyInput : Input α 2 1 :=
  ⟨fun i => if i.val = 0 then 1 else 0, fun i => if i.val = 0 then 1 else 0, fun _ => 3,
   fun _ => 1, 1⟩

end KDA

/-! ## Affine segment summaries (k3-spec §2.2 chunk algebra, report §5.1) -/

/-- A segment summary `(A, B)`: the affine map `S ↦ A · S + B` on `[keyDim, valueDim]` states
(k3-spec §2.2, report §5.1). -/
structure AffineSummary (α : Type) (keyDim valueDim : Nat) where
  /-- The transition `A`, acting on the state by left multiplication. -/
  transition : Tensor α [keyDim, keyDim]
  /-- The zero-state output `B` (the state the segment produces from `S = 0`). -/
  offset : Tensor α [keyDim, valueDim]

namespace AffineSummary

variable {α : Type} [Scalar α] {keyDim valueDim : Nat}

/-- The action of a summary on a state: `(A S + B)[r, c] = Σ_s A[r, s] S[s, c] + B[r, c]`. -/
def apply (s : AffineSummary α keyDim valueDim) (S : Tensor α [keyDim, valueDim]) :
    Tensor α [keyDim, valueDim] :=
  fun r c => Seq.sum keyDim (fun t => s.transition r t * S t c) + s.offset r c

/-- The summary of the empty segment, `(I, 0)`. -/
def id (keyDim valueDim : Nat) : AffineSummary α keyDim valueDim :=
  ⟨fun i j => if i = j then 1 else 0, fun _ _ => 0⟩

/-- The summary of `first` followed by `second`: `(A₂ A₁, A₂ B₁ + B₂)`. -/
def andThen (first second : AffineSummary α keyDim valueDim) : AffineSummary α keyDim valueDim :=
  ⟨fun r k => Seq.sum keyDim (fun t => second.transition r t * first.transition t k),
   fun r c => Seq.sum keyDim (fun t => second.transition r t * first.offset t c) + second.offset r c⟩

/-- The summary with both matrices memoized (equal to it); used by executable folds. -/
def memo (s : AffineSummary α keyDim valueDim) : AffineSummary α keyDim valueDim :=
  ⟨Seq.memo2 s.transition, Seq.memo2 s.offset⟩

/-- The composed summary of a list of summaries, first element applied first. -/
def compose : List (AffineSummary α keyDim valueDim) → AffineSummary α keyDim valueDim
  | [] => id keyDim valueDim
  | s :: ss => memo (andThen s (compose ss))

end AffineSummary

namespace KDA

variable {α : Type} [Scalar α] {keyDim valueDim : Nat}

/-- The affine summary of one token (report Eq. 1, k3-spec §2.2 chunk algebra):
`A = (I − β k kᵀ) Diag(α)`, i.e. `A[r, s] = (δ_rs − β k_r k_s) α_s`, and `B = β k vᵀ`. -/
def tokenSummary (x : Input α keyDim valueDim) : AffineSummary α keyDim valueDim :=
  ⟨fun r s => ((if r = s then 1 else 0) - x.writeStrength * x.key r * x.key s) * x.retention s,
   fun r c => x.writeStrength * x.key r * x.value c⟩

/-- The token summaries of a segment, in order. -/
def summaries : List (Input α keyDim valueDim) → List (AffineSummary α keyDim valueDim)
  | [] => []
  | x :: xs => tokenSummary x :: summaries xs

/-- The composed summary of a segment of tokens, first token applied first (report §5.1). -/
def segmentSummary (xs : List (Input α keyDim valueDim)) : AffineSummary α keyDim valueDim :=
  AffineSummary.compose (summaries xs)

/-- The final state of the chunked evaluation: each chunk applies its composed summary to the
state the previous chunks left (report §5.1). -/
def chunkedFinal (S : State α keyDim valueDim) : List (List (Input α keyDim valueDim)) →
    State α keyDim valueDim
  | [] => S
  | c :: cs => chunkedFinal (Seq.memo2 ((segmentSummary c).apply S)) cs

/-- The outputs of one chunk from incoming state `S₀`: the running prefix summary `acc` of the
chunk is extended token by token without looking at `S₀` (intra-chunk part); token `t` outputs
`(A_{≤t} S₀ + B_{≤t})ᵀ q_t` (inter-chunk part). Returns the chunk summary and the outputs. -/
def chunkScan (S₀ : State α keyDim valueDim) (acc : AffineSummary α keyDim valueDim) :
    List (Input α keyDim valueDim) → AffineSummary α keyDim valueDim × List (Tensor α [valueDim])
  | [] => (acc, [])
  | x :: xs =>
    let acc' := (AffineSummary.andThen acc (tokenSummary x)).memo
    let rest := chunkScan S₀ acc' xs
    (rest.1, read (acc'.apply S₀) x.query :: rest.2)

/-- The chunked full-sequence form of a KDA head (report §5.1): chunk by chunk, the outputs come
from `chunkScan` and the state passed on is the chunk summary applied to the incoming state. -/
def chunkedRun (S : State α keyDim valueDim) : List (List (Input α keyDim valueDim)) →
    State α keyDim valueDim × List (Tensor α [valueDim])
  | [] => (S, [])
  | c :: cs =>
    let r := chunkScan S (AffineSummary.id keyDim valueDim) c
    let S' := Seq.memo2 (r.1.apply S)
    let rest := chunkedRun S' cs
    (rest.1, Seq.listAppend r.2 rest.2)

end KDA

/-! ## Gated MLA (k3-spec §2.3, report Eq. 7) -/

namespace GatedMLA

/-- The dimensions of a Gated MLA layer (k3-spec §2.3). -/
structure Dims where
  /-- Model width. -/
  modelDim : Nat
  /-- Number of attention heads. -/
  heads : Nat
  /-- Query latent width. -/
  queryLatentDim : Nat
  /-- KV latent width (cached). -/
  kvLatentDim : Nat
  /-- Per-head content key width. -/
  contentKeyDim : Nat
  /-- Shared key width (cached, unrotated). -/
  sharedKeyDim : Nat
  /-- Per-head value width. -/
  valueDim : Nat

/-- The parameters of a Gated MLA layer, `[in, out]` layout (k3-spec §2.3 table, in the
article's `LayerParams` order), plus the RMSNorm stabilizer `normEps` (its value is not in the
article; the tiny fixture's `rms_norm_eps`). -/
structure Params (α : Type) (d : Dims) where
  /-- `W_qd : [modelDim, queryLatentDim]`. -/
  queryDown : Tensor α [d.modelDim, d.queryLatentDim]
  /-- `γ_q : [queryLatentDim]`. -/
  queryNormScale : Tensor α [d.queryLatentDim]
  /-- `W_kvd : [modelDim, kvLatentDim]`. -/
  kvDown : Tensor α [d.modelDim, d.kvLatentDim]
  /-- `γ_kv : [kvLatentDim]`. -/
  kvNormScale : Tensor α [d.kvLatentDim]
  /-- `W_sk : [modelDim, sharedKeyDim]`. -/
  sharedKeyDown : Tensor α [d.modelDim, d.sharedKeyDim]
  /-- `W_qC : [heads, queryLatentDim, contentKeyDim]`. -/
  queryContentUp : Tensor α [d.heads, d.queryLatentDim, d.contentKeyDim]
  /-- `W_qS : [heads, queryLatentDim, sharedKeyDim]`. -/
  querySharedUp : Tensor α [d.heads, d.queryLatentDim, d.sharedKeyDim]
  /-- `W_k : [heads, kvLatentDim, contentKeyDim]`. -/
  keyUp : Tensor α [d.heads, d.kvLatentDim, d.contentKeyDim]
  /-- `W_v : [heads, kvLatentDim, valueDim]`. -/
  valueUp : Tensor α [d.heads, d.kvLatentDim, d.valueDim]
  /-- Gate weight `G : [modelDim, heads, valueDim]`. -/
  gateWeight : Tensor α [d.modelDim, d.heads, d.valueDim]
  /-- Output weight `W_o : [heads, valueDim, modelDim]`. -/
  outputWeight : Tensor α [d.heads, d.valueDim, d.modelDim]
  /-- The RMSNorm stabilizer ε. -/
  normEps : α

/-- One cache entry (k3-spec §2.3): the KV latent and the unrotated shared key of a token. -/
structure Entry (α : Type) (d : Dims) where
  /-- The normalized KV latent `c_kv : [kvLatentDim]`. -/
  latent : Tensor α [d.kvLatentDim]
  /-- The shared key `k_s : [sharedKeyDim]` (NoPE). -/
  sharedKey : Tensor α [d.sharedKeyDim]

/-- The MLA cache: one entry per past token, oldest first (k3-spec §2.3). -/
abbrev Cache (α : Type) (d : Dims) := List (Entry α d)

variable {α : Type} [Scalar α] {d : Dims}

/-- The query latent `c_q = RMSNorm(x W_qd) ⊙ γ_q` (k3-spec §2.3, Eq. 7). -/
def queryLatent (p : Params α d) (x : Tensor α [d.modelDim]) : Tensor α [d.queryLatentDim] :=
  Seq.rmsNorm p.normEps (Seq.vecMatMul x p.queryDown) p.queryNormScale

/-- The cache entry of the current token: `c_kv = RMSNorm(x W_kvd) ⊙ γ_kv`, `k_s = x W_sk`
(no norm, no rotation) (k3-spec §2.3, Eq. 7). -/
def entry (p : Params α d) (x : Tensor α [d.modelDim]) : Entry α d :=
  ⟨Seq.memoFn (Seq.rmsNorm p.normEps (Seq.vecMatMul x p.kvDown) p.kvNormScale),
   Seq.memoFn (Seq.vecMatMul x p.sharedKeyDown)⟩

/-- The output gate `g[h, c] = σ(Σ_i x_i G[i, h, c])`, computed from the layer input
(k3-spec §2.3, Eq. 7). -/
def gate (p : Params α d) (x : Tensor α [d.modelDim]) : Tensor α [d.heads, d.valueDim] :=
  fun h c => Scalar.sigmoid (Seq.sum d.modelDim (fun i => x i * p.gateWeight i h c))

/-- The attention scores of head `h` over `n` rows:
`score[j] = scale · (c_q W_qC[h] · c_kv[j] W_k[h] + c_q W_qS[h] · k_s[j])` (Eq. 7). -/
def scores (p : Params α d) (cq : Tensor α [d.queryLatentDim]) (scoreScale : α) (h : Fin d.heads)
    (n : Nat) (latent : Tensor α [n, d.kvLatentDim]) (shared : Tensor α [n, d.sharedKeyDim]) :
    Tensor α [n] :=
  let qC := Seq.memoFn (Seq.vecMatMul cq (p.queryContentUp h))
  let qS := Seq.memoFn (Seq.vecMatMul cq (p.querySharedUp h))
  fun j => scoreScale *
    (Seq.dot qC (Seq.vecMatMul (latent j) (p.keyUp h)) + Seq.dot qS (shared j))

/-- The per-head attention outputs over `n` rows with the attention weights computed by `wf`
from the scores: `o_h = Σ_j wf(score_h)[j] · c_kv[j] W_v[h]` (Eq. 7). -/
def headOutputsWith (wf : (n : Nat) → Tensor α [n] → Tensor α [n]) (p : Params α d)
    (x : Tensor α [d.modelDim]) (scoreScale : α) (n : Nat)
    (latent : Tensor α [n, d.kvLatentDim]) (shared : Tensor α [n, d.sharedKeyDim]) :
    Tensor α [d.heads, d.valueDim] :=
  let cq := Seq.memoFn (queryLatent p x)
  fun h =>
    let w := Seq.memoFn (wf n (scores p cq scoreScale h n latent shared))
    Seq.memoFn (fun c => Seq.sum n (fun j => w j * Seq.vecMatMul (latent j) (p.valueUp h) c))

/-- Gated attention of `x` over `n` rows with weights `wf`, then the output projection:
`y[f] = Σ_h Σ_c g[h, c] o_h[c] W_o[h, c, f]` (k3-spec §2.3, Eq. 7). -/
def attendWith (wf : (n : Nat) → Tensor α [n] → Tensor α [n]) (p : Params α d)
    (x : Tensor α [d.modelDim]) (scoreScale : α) (n : Nat)
    (latent : Tensor α [n, d.kvLatentDim]) (shared : Tensor α [n, d.sharedKeyDim]) :
    Tensor α [d.modelDim] :=
  let o := Seq.memo2 (headOutputsWith wf p x scoreScale n latent shared)
  let g := Seq.memo2 (gate p x)
  fun f => Seq.sum d.heads (fun h => Seq.sum d.valueDim (fun c => g h c * o h c * p.outputWeight h c f))

/-- Gated attention of the input `x` over `n` cached rows with softmax weights (k3-spec §2.3,
Eq. 7): the attention of one causal step. -/
def attend (p : Params α d) (x : Tensor α [d.modelDim]) (scoreScale : α) (n : Nat)
    (latent : Tensor α [n, d.kvLatentDim]) (shared : Tensor α [n, d.sharedKeyDim]) :
    Tensor α [d.modelDim] :=
  attendWith (fun _ v => Seq.softmax v) p x scoreScale n latent shared

/-- The all-zero cache entry (the padding of `packLatent`/`packShared`). -/
def Entry.zero : Entry α d := ⟨fun _ => 0, fun _ => 0⟩

/-- The cache as `[n, kvLatentDim]` latent rows, oldest first (rows past the end are `0`). -/
def packLatent (n : Nat) (cache : Cache α d) : Tensor α [n, d.kvLatentDim] :=
  fun j => (Seq.listGet Entry.zero cache j.val).latent

/-- The cache as `[n, sharedKeyDim]` shared-key rows, oldest first (rows past the end are `0`). -/
def packShared (n : Nat) (cache : Cache α d) : Tensor α [n, d.sharedKeyDim] :=
  fun j => (Seq.listGet Entry.zero cache j.val).sharedKey

/-- **One causal Gated MLA step on a list cache** (k3-spec §2.3, Eq. 7): append the current
token's entry first, then attend over past and current entries. Returns the new cache and `y`. -/
def step (p : Params α d) (scoreScale : α) (cache : Cache α d) (x : Tensor α [d.modelDim]) :
    Cache α d × Tensor α [d.modelDim] :=
  let cache' := Seq.listAppend cache [entry p x]
  let n := Seq.listLen cache'
  (cache', attend p x scoreScale n (packLatent n cache') (packShared n cache'))

/-- Append one row after `T` rows (the `concatAxis … 0 T 1` of the article's graph). -/
def appendRow {T k : Nat} (rows : Tensor α [T, k]) (row : Tensor α [k]) : Tensor α [T + 1, k] :=
  fun i => if h : i.val < T then rows ⟨i.val, h⟩ else row

/-- **The packed Gated MLA step** (the contract of the article's `stepModel`/`stepFixed`): fixed
caches `[T, kvLatentDim]`, `[T, sharedKeyDim]`; the current rows are appended last and the layer
attends over all `T + 1` rows. Returns both new caches and `y`. -/
def stepPacked {T : Nat} (p : Params α d) (scoreScale : α) (latentCache : Tensor α [T, d.kvLatentDim])
    (sharedCache : Tensor α [T, d.sharedKeyDim]) (x : Tensor α [d.modelDim]) :
    Tensor α [T + 1, d.kvLatentDim] × Tensor α [T + 1, d.sharedKeyDim] × Tensor α [d.modelDim] :=
  let e := entry p x
  let lat := appendRow latentCache e.latent
  let sh := appendRow sharedCache e.sharedKey
  (lat, sh, attend p x scoreScale (T + 1) lat sh)

/-- The Gated MLA layer over a whole sequence, token by token from the empty cache
(k3-spec §2.1 `forward`). -/
def forward (p : Params α d) (scoreScale : α) (xs : List (Tensor α [d.modelDim])) :
    List (Tensor α [d.modelDim]) :=
  (CausalScan.run (step p scoreScale) [] xs).2

end GatedMLA

/-! ## Entry points for evaluating at `Float` from other modules

Other modules and generated files call these (why: `Core/README.md`, "Toolchain constraints"): each
is specialized at `Float` and takes every size it mentions explicitly. -/

namespace KDA

/-- `step` at `Float` (report Eq. 1). -/
def stepF (keyDim valueDim : Nat) (S : State Float keyDim valueDim) (x : Input Float keyDim valueDim) :
    State Float keyDim valueDim × Tensor Float [valueDim] :=
  step S x

/-- The token-by-token scan of `step` at `Float` (k3-spec §2.1). -/
def runF (keyDim valueDim : Nat) (S : State Float keyDim valueDim)
    (xs : List (Input Float keyDim valueDim)) : State Float keyDim valueDim × List (Tensor Float [valueDim]) :=
  CausalScan.run step S xs

/-- `chunkedRun` at `Float` (report §5.1). -/
def chunkedRunF (keyDim valueDim : Nat) (S : State Float keyDim valueDim)
    (chunks : List (List (Input Float keyDim valueDim))) :
    State Float keyDim valueDim × List (Tensor Float [valueDim]) :=
  chunkedRun S chunks

/-- `retention` at `Float` (report Eq. 5). -/
def retentionF (logFloor logScale logit : Float) : Float := retention logFloor logScale logit

/-- The scalar KDA step at `Float`: from memory `s`, the output of `step` on the 1×1 input. -/
def scalarStepF (s a v b : Float) : Float := (step (scalarState s) (scalarInput a v b)).2 0

/-- Two scalar KDA steps at `Float` from memory `s` (values `v₁` then `v₂`): the last output. -/
def scalarScan2F (s a b v₁ v₂ : Float) : Float :=
  Seq.lastD (fun _ => 0) (CausalScan.run step (scalarState s) [scalarInput a v₁ b, scalarInput a v₂ b]).2 0

/-- The toy 2×1 run of the article at `Float`: output coordinate 0. -/
def toyReadF : Float := (step (State.zero 2 1) (toyInput (α := Float))).2 0

end KDA

namespace GatedMLA

/-- The list step at `Float` (k3-spec §2.3). -/
def stepF (d : Dims) (p : Params Float d) (scoreScale : Float) (cache : Cache Float d)
    (x : Tensor Float [d.modelDim]) : Cache Float d × Tensor Float [d.modelDim] :=
  step p scoreScale cache x

/-- The packed step at `Float` (k3-spec §2.3). -/
def stepPackedF (d : Dims) (T : Nat) (p : Params Float d) (scoreScale : Float)
    (latentCache : Tensor Float [T, d.kvLatentDim]) (sharedCache : Tensor Float [T, d.sharedKeyDim])
    (x : Tensor Float [d.modelDim]) :
    Tensor Float [T + 1, d.kvLatentDim] × Tensor Float [T + 1, d.sharedKeyDim] × Tensor Float [d.modelDim] :=
  stepPacked p scoreScale latentCache sharedCache x

/-- The whole-sequence layer at `Float` (k3-spec §2.1). -/
def forwardF (d : Dims) (p : Params Float d) (scoreScale : Float) (xs : List (Tensor Float [d.modelDim])) :
    List (Tensor Float [d.modelDim]) :=
  forward p scoreScale xs

end GatedMLA

/-! ## The KDA layer step (k3-spec §2.2 steps 1–7, report Eq. 2–6) -/

namespace KDA

/-- The dimensions of a KDA layer (k3-spec §2.2; the article leaves the sizes as parameters). -/
structure LayerDims where
  /-- Model width. -/
  modelDim : Nat
  /-- Number of KDA heads. -/
  heads : Nat
  /-- Per-head key width. -/
  keyDim : Nat
  /-- Per-head value width. -/
  valueDim : Nat
  /-- Length of the short causal convolution (tokens in the window, current included). -/
  convWidth : Nat
  /-- Rank of the low-rank decay projection. -/
  decayRank : Nat

/-- The parameters of a KDA layer (k3-spec §2.2, `[in, out]` layout). Choices where the report
does not fix the form, following the public Kimi Linear code and the released checkpoint's
tensors: SiLU after the depthwise convolution; per-head `β = σ(x W_β)`; the decay logit from a
rank-`decayRank` projection plus a bias, `z = x W_down W_up + b` (hub `f_a_proj`, `f_b_proj`,
`dt_bias`), read as `g = g_min σ(e^{s_h} z)`; the L2-normalized query multiplied by the query
scale (fla's `q · scale`); a full-rank sigmoid output gate from the layer input (the fixtures'
`use_full_rank_gate`); per-head RMSNorm of the readout with a shared gain. -/
structure LayerParams (α : Type) (d : LayerDims) where
  /-- Query projection `[modelDim, heads, keyDim]`. -/
  queryProj : Tensor α [d.modelDim, d.heads, d.keyDim]
  /-- Key projection `[modelDim, heads, keyDim]`. -/
  keyProj : Tensor α [d.modelDim, d.heads, d.keyDim]
  /-- Value projection `[modelDim, heads, valueDim]`. -/
  valueProj : Tensor α [d.modelDim, d.heads, d.valueDim]
  /-- Depthwise causal convolution of the queries, `[convWidth, heads, keyDim]` (oldest tap
  first, the current token last). -/
  queryConv : Tensor α [d.convWidth, d.heads, d.keyDim]
  /-- Depthwise causal convolution of the keys. -/
  keyConv : Tensor α [d.convWidth, d.heads, d.keyDim]
  /-- Depthwise causal convolution of the values. -/
  valueConv : Tensor α [d.convWidth, d.heads, d.valueDim]
  /-- Low-rank decay projection, down part `[modelDim, decayRank]`. -/
  decayDown : Tensor α [d.modelDim, d.decayRank]
  /-- Low-rank decay projection, up part `[decayRank, heads, keyDim]`. -/
  decayUp : Tensor α [d.decayRank, d.heads, d.keyDim]
  /-- The decay-logit bias `b : [heads, keyDim]` (hub `dt_bias`, length `heads · keyDim`,
  head-major), added to the low-rank logit before the log-scale: `g = g_min σ(e^{s_h} (z + b))`. -/
  decayBias : Tensor α [d.heads, d.keyDim]
  /-- The decay log-scale `s` of report Eq. 5, one per head. -/
  decayLogScale : Tensor α [d.heads]
  /-- Write-strength projection `[modelDim, heads]`: `β = σ(x W_β)`. -/
  betaProj : Tensor α [d.modelDim, d.heads]
  /-- Output gate weight `[modelDim, heads, valueDim]`. -/
  gateWeight : Tensor α [d.modelDim, d.heads, d.valueDim]
  /-- Gain of the per-head output RMSNorm `[valueDim]`. -/
  outNormScale : Tensor α [d.valueDim]
  /-- Output projection `[heads, valueDim, modelDim]`. -/
  outputProj : Tensor α [d.heads, d.valueDim, d.modelDim]
  /-- The RMSNorm stabilizer of the output norm (not in the article; config
  `linear_attn_config.output_norm_eps`, default `rms_norm_eps`). -/
  normEps : α
  /-- The query scale (config `linear_attn_config.query_scale`, default `1/√keyDim`): the
  L2-normalized query is multiplied by it before the readout, as fla's `chunk_kda` does
  (`q · scale`); pybridge scales the readout instead, `scale · (Sᵀq)`, which is the same over the
  reals by linearity (`KDA.read_scale`). -/
  queryScale : α

/-- The causal state of a KDA layer: the convolution window of the last `convWidth` layer
inputs (oldest first) and one recurrent state per head (k3-spec §2.2, §2.1). -/
structure LayerState (α : Type) (d : LayerDims) where
  /-- The last `convWidth` layer inputs, oldest first. -/
  window : Tensor α [d.convWidth, d.modelDim]
  /-- The per-head recurrent states `[heads, keyDim, valueDim]`. -/
  heads : Tensor α [d.heads, d.keyDim, d.valueDim]

variable {α : Type} [Scalar α] {d : LayerDims}

/-- The zero initial state: an all-zero window and zero head states. -/
def LayerState.zero (d : LayerDims) : LayerState α d := ⟨fun _ _ => 0, fun _ _ _ => 0⟩

/-- The window after token `x`: drop the oldest row, append `x` last. -/
def shiftWindow (window : Tensor α [d.convWidth, d.modelDim]) (x : Tensor α [d.modelDim]) :
    Tensor α [d.convWidth, d.modelDim] :=
  fun w => if h : w.val + 1 < d.convWidth then window ⟨w.val + 1, h⟩ else x

/-- Project every window row with `W : [modelDim, heads, n]` and convolve depthwise with
`K : [convWidth, heads, n]`: `c[h, i] = Σ_w K[w, h, i] · (window[w] W)[h, i]` (report Eq. 2,
k3-spec §2.2 steps 1–2). -/
def projectConv {n : Nat} (window : Tensor α [d.convWidth, d.modelDim])
    (w : Tensor α [d.modelDim, d.heads, n]) (k : Tensor α [d.convWidth, d.heads, n]) :
    Tensor α [d.heads, n] :=
  fun h i => Seq.sum d.convWidth (fun t =>
    k t h i * Seq.sum d.modelDim (fun m => window t m * w m h i))

/-- The prepared KDA inputs of every head for the current token `x` with the updated window
(k3-spec §2.2 steps 1–6): projection and depthwise convolution, SiLU, L2 normalization of
queries and keys (`ε = l2Eps`), the query times `queryScale`, retention
`exp(g_min σ(e^{s} (z + b)))` from the low-rank logit `z` and the bias `b`, and
`β = σ(x W_β)`. -/
def prepare (p : LayerParams α d) (logFloor l2Eps : α) (window : Tensor α [d.convWidth, d.modelDim])
    (x : Tensor α [d.modelDim]) (h : Fin d.heads) : Input α d.keyDim d.valueDim :=
  let q := Seq.memo2 (projectConv window p.queryProj p.queryConv)
  let k := Seq.memo2 (projectConv window p.keyProj p.keyConv)
  let v := Seq.memo2 (projectConv window p.valueProj p.valueConv)
  let low := Seq.memoFn (Seq.vecMatMul x p.decayDown)
  let qn := Seq.memoFn (Seq.l2Normalize l2Eps (fun i => Seq.silu (q h i)))
  ⟨Seq.memoFn (fun i => p.queryScale * qn i),
   Seq.memoFn (Seq.l2Normalize l2Eps (fun i => Seq.silu (k h i))),
   Seq.memoFn (fun c => Seq.silu (v h c)),
   Seq.memoFn (fun i => retention logFloor (p.decayLogScale h)
     (Seq.sum d.decayRank (fun r => low r * p.decayUp r h i) + p.decayBias h i)),
   Scalar.sigmoid (Seq.sum d.modelDim (fun m => x m * p.betaProj m h))⟩

/-- The output of the layer from the per-head readouts `o : [heads, valueDim]`:
`y[f] = Σ_h Σ_c σ(x G)[h, c] · RMSNorm(o_h)[c] · W_o[h, c, f]` (report Eq. 6, k3-spec §2.2
step 7; form reconstructed from Kimi Linear). -/
def output (p : LayerParams α d) (x : Tensor α [d.modelDim]) (o : Tensor α [d.heads, d.valueDim]) :
    Tensor α [d.modelDim] :=
  let g := Seq.memo2 (fun h c => Scalar.sigmoid (Seq.sum d.modelDim (fun m => x m * p.gateWeight m h c)))
  let n := Seq.memo2 (fun h => Seq.rmsNorm p.normEps (o h) p.outNormScale)
  fun f => Seq.sum d.heads (fun h => Seq.sum d.valueDim (fun c => g h c * n h c * p.outputProj h c f))

/-- **One token of a KDA layer** (k3-spec §2.2, the article's `scanStep`): shift the window,
prepare every head's inputs, run `KDA.step` on every head (heads are independent), gate,
normalize and project the readouts. -/
def layerStep (p : LayerParams α d) (logFloor l2Eps : α) (s : LayerState α d)
    (x : Tensor α [d.modelDim]) : LayerState α d × Tensor α [d.modelDim] :=
  let window := Seq.memo2 (shiftWindow s.window x)
  let r := Seq.memoFn (fun h => step (s.heads h) (prepare p logFloor l2Eps window x h))
  (⟨window, fun h => (r h).1⟩, output p x (fun h => (r h).2))

/-- The KDA layer over a whole sequence from the zero state (k3-spec §2.1 `forward`), with the
paper's floor `g_min = −5` and `ε = 10⁻⁶` passed by the caller. -/
def layerForward (p : LayerParams α d) (logFloor l2Eps : α) (xs : List (Tensor α [d.modelDim])) :
    List (Tensor α [d.modelDim]) :=
  (CausalScan.run (layerStep p logFloor l2Eps) (LayerState.zero d) xs).2

/-- `layerStep` at `Float` (entry point for other modules). -/
def layerStepF (d : LayerDims) (p : LayerParams Float d) (logFloor l2Eps : Float)
    (s : LayerState Float d) (x : Tensor Float [d.modelDim]) :
    LayerState Float d × Tensor Float [d.modelDim] :=
  layerStep p logFloor l2Eps s x

/-- `layerForward` at `Float` (entry point for other modules). -/
def layerForwardF (d : LayerDims) (p : LayerParams Float d) (logFloor l2Eps : Float)
    (xs : List (Tensor Float [d.modelDim])) : List (Tensor Float [d.modelDim]) :=
  layerForward p logFloor l2Eps xs

end KDA

/-! ## Masked full-sequence Gated MLA (k3-spec §2.0, §2.3) -/

namespace Seq

variable {α : Type} [Scalar α]

/-- The causally masked softmax at query position `t` with true exclusion (k3-spec §2.0):
`w_j = [j ≤ t] exp(x_j − m) / Σ_k [k ≤ t] exp(x_k − m)`, `m` the largest entry; positions
`j > t` get weight exactly `0` (no finite sentinel). -/
def maskedSoftmax (t : Nat) : {n : Nat} → Tensor α [n] → Tensor α [n]
  | 0, x => x
  | n + 1, x =>
    let m := maxFrom (x 0) (n + 1) x
    let e := memoFn (fun i : Fin (n + 1) => if i.val ≤ t then Scalar.exp (x i - m) else 0)
    let z := sum (n + 1) e
    fun i => e i / z

end Seq

namespace GatedMLA

variable {α : Type} [Scalar α] {d : Dims}

/-- The cache entries of a list of tokens, in order. -/
def entries (p : Params α d) : List (Tensor α [d.modelDim]) → Cache α d
  | [] => []
  | x :: xs => entry p x :: entries p xs

/-- The outputs of the masked full-sequence form for the tokens `xs` at positions `t, t+1, …`,
attending over all `T` packed rows with the causal mask at each position. -/
def maskedOutputs (p : Params α d) (scoreScale : α) (T : Nat) (lat : Tensor α [T, d.kvLatentDim])
    (sh : Tensor α [T, d.sharedKeyDim]) : Nat → List (Tensor α [d.modelDim]) → List (Tensor α [d.modelDim])
  | _, [] => []
  | t, x :: xs => attendWith (fun _ v => Seq.maskedSoftmax t v) p x scoreScale T lat sh ::
      maskedOutputs p scoreScale T lat sh (t + 1) xs

/-- **The masked full-sequence form of Gated MLA** (k3-spec §2.3, "a parallel full-sequence
implementation has to apply the causal mask"): all `T` entries are computed and packed once;
position `t` attends over all rows with the mask `j ≤ t`. -/
def maskedForward (p : Params α d) (scoreScale : α) (xs : List (Tensor α [d.modelDim])) :
    List (Tensor α [d.modelDim]) :=
  let T := Seq.listLen xs
  let es := entries p xs
  maskedOutputs p scoreScale T (Seq.memo2 (packLatent T es)) (Seq.memo2 (packShared T es)) 0 xs

/-- `maskedForward` at `Float` (entry point for other modules). -/
def maskedForwardF (d : Dims) (p : Params Float d) (scoreScale : Float)
    (xs : List (Tensor Float [d.modelDim])) : List (Tensor Float [d.modelDim]) :=
  maskedForward p scoreScale xs

end GatedMLA

end KimiK3
