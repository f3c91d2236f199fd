module

public import KimiK3.Core.Kernel
public import KimiK3.Sequence.Kernel
public import KimiK3.Core.Trig

/-!
# Executable kernel: array-backed tensors and their operations

`Arr α s` stores the entries of a tensor of shape `s` once, row-major, in an `Array α`; `toTensor`
reads it back as the function-backed `Tensor α s` that the theorems are about, `ofTensor`
stores a function-backed tensor. Every operation here computes each entry with the same
expression, in the same order, as its function-backed counterpart (sums start from `0` and add
the last term last, like `finSum`; maxima fold from the last index down, like `finMaxFrom`), so
the equality theorems of `Ops.lean` hold as equalities of expressions, for every `[Scalar α]`,
`Float` included.

Executable code only (see `README.md` for why all generic array code sits in one module); the
proofs are in the other files of this folder. Only our own structural recursion and `Array`
`push`/indexing are used, which the offline compiler handles.
-/

@[expose] public section

namespace KimiK3

namespace Exec

variable {α β : Type}

/-! ## Arrays built from functions -/

/-- `acc` followed by `f i, f (i+1), …, f (i+k-1)` (tail recursive: one loop). -/
def pushRange (f : Nat → β) : Nat → Nat → Array β → Array β
  | 0, _, acc => acc
  | k + 1, i, acc => pushRange f k (i + 1) (acc.push (f i))

theorem size_pushRange (f : Nat → β) (k i : Nat) (acc : Array β) :
    (pushRange f k i acc).size = acc.size + k := by
  induction k generalizing i acc with
  | zero => rfl
  | succ k ih => simp only [pushRange, ih, Array.size_push]; omega

/-- The array `#[f 0, …, f (n-1)]`. -/
def arrayOfFn (n : Nat) (f : Nat → β) : Array β := pushRange f n 0 #[]

theorem size_arrayOfFn (n : Nat) (f : Nat → β) : (arrayOfFn n f).size = n := by
  simp [arrayOfFn, size_pushRange]

/-- The entry `k` of an array, `d` past its end. `@[macro_inline]`: the default is evaluated
only past the end, so a default such as `zeros n` costs nothing inside a loop (evaluated
eagerly it was the vision encoder's and MLA's largest cost, docs/benchmarks-lean.md). -/
@[macro_inline] def arrayGetD (a : Array β) (k : Nat) (d : β) : β := if h : k < a.size then a[k] else d

/-! ## Array-backed tensors -/

/-- **An array-backed tensor** of shape `s`: its entries in row-major order (the last axis
fastest), stored once. The executable counterpart of `Tensor α s`; `toTensor` gives its
meaning. -/
structure Arr (α : Type) (s : Shape) where
  /-- The entries, row-major. -/
  data : Array α
  /-- One entry per coordinate. -/
  size_eq : data.size = Shape.numel s

namespace Arr

variable [Scalar α] {s : Shape}

/-- The entry at flat (row-major) position `k`; `0` past the end. -/
def get (a : Arr α s) (k : Nat) : α := if h : k < a.data.size then a.data[k] else 0

/-- The tensor whose entry at flat position `k` is `f k`. -/
def ofFn (s : Shape) (f : Nat → α) : Arr α s :=
  ⟨arrayOfFn (Shape.numel s) f, size_arrayOfFn _ _⟩

/-- The vector `v[i] = f i`. -/
def vec (n : Nat) (f : Nat → α) : Arr α [n] := ofFn [n] f

/-- The matrix `M[i, j] = f i j`. -/
def mat (m n : Nat) (f : Nat → Nat → α) : Arr α [m, n] :=
  ofFn [m, n] (fun k => f (k / n) (k % n))

/-- The order-3 tensor `T[i, j, k] = f i j k`. -/
def ten3 (l m n : Nat) (f : Nat → Nat → Nat → α) : Arr α [l, m, n] :=
  ofFn [l, m, n] (fun k => f (k / n / m) (k / n % m) (k % n))

/-- The tensor `f` reads at flat offset `off` onward: `g k = f (off + i·numel s + k)` on slice
`i` (the meaning of an array-backed tensor, `toTensor`). -/
def ofGet : (s : Shape) → (Nat → α) → Tensor α s
  | [], g => g 0
  | _ :: s, g => fun i => ofGet s (fun k => g (i.val * Shape.numel s + k))

/-- **The meaning of an array-backed tensor**: the function-backed tensor with the same
row-major entries. -/
def toTensor (a : Arr α s) : Tensor α s := ofGet s a.get

/-- The entry of a function-backed tensor at flat position `k` (`0` past the end). -/
def flatGet : (s : Shape) → Tensor α s → Nat → α
  | [], x, _ => x
  | n :: s, t, k =>
    if h : k / Shape.numel s < n then flatGet s (t ⟨k / Shape.numel s, h⟩) (k % Shape.numel s) else 0

/-- **Store a function-backed tensor**: every entry computed once (`toTensor_ofTensor`). -/
def ofTensor (s : Shape) (t : Tensor α s) : Arr α s := ofFn s (flatGet s t)

/-- The all-`x` tensor. -/
def fill (s : Shape) (x : α) : Arr α s := ofFn s (fun _ => x)

/-- The tensor with entries `a.get (off + k)`: a contiguous block of a larger tensor, e.g.
slice `i` of a `[n, m]` matrix at `off = i·m`. -/
def block {t : Shape} (s : Shape) (a : Arr α t) (off : Nat) : Arr α s := ofFn s (fun k => a.get (off + k))

/-- Row `i` of a matrix. -/
def row {m n : Nat} (a : Arr α [m, n]) (i : Nat) : Arr α [n] := block [n] a (i * n)

/-- Slice `i` of an order-3 tensor. -/
def slice3 {l m n : Nat} (a : Arr α [l, m, n]) (i : Nat) : Arr α [m, n] := block [m, n] a (i * (m * n))

/-- The tensor of shape `s` stored in `a` from position `off` on (`0` past its end): e.g. one
input of a batch decoded into one flat array. -/
def ofArrayAt (a : Array α) (off : Nat) (s : Shape) : Arr α s :=
  ofFn s (fun k => arrayGetD a (off + k) 0)

end Arr

/-! ## Sums and maxima -/

section Reduce

variable [Scalar α]

/-- `acc + f i + f (i+1) + … + f (i+k-1)`, added left to right. -/
def sumFrom (f : Nat → α) : Nat → Nat → α → α
  | 0, _, acc => acc
  | k + 1, i, acc => sumFrom f k (i + 1) (acc + f i)

/-- **The sum** `f 0 + … + f (n-1)` from `0`, the last term added last (as `finSum`). -/
def sumTo (n : Nat) (f : Nat → α) : α := sumFrom f n 0 0

/-- The largest of `acc, f (k-1), …, f 0`, folding `max` from the last index down (as
`finMaxFrom`). -/
def maxDown (f : Nat → α) : Nat → α → α
  | 0, acc => acc
  | k + 1, acc => maxDown f k (max acc (f k))

end Reduce

/-! ## Lists (own recursion: `List.map`, `List.length`, `List.append` do not compile offline) -/

section Lists

/-- `f` on every element. -/
def listMap (f : α → β) : List α → List β
  | [] => []
  | x :: xs => f x :: listMap f xs

/-- Concatenation. -/
def listAppend : List α → List α → List α
  | [], ys => ys
  | x :: xs, ys => x :: listAppend xs ys

/-- The length. -/
def listLen : List α → Nat
  | [] => 0
  | _ :: xs => listLen xs + 1

/-- The element at `i`, `d` past the end. -/
def listGet (d : α) : List α → Nat → α
  | [], _ => d
  | x :: _, 0 => x
  | _ :: xs, i + 1 => listGet d xs i

/-- **The causal scan** (k3-spec §2.1, as `CausalScan.run`): run `f` left to right from state
`s`; the final state and the outputs in order. -/
def scan {σ ι ο : Type} (f : σ → ι → σ × ο) (s : σ) : List ι → σ × List ο
  | [] => (s, [])
  | x :: xs =>
    let r := f s x
    let rest := scan f r.1 xs
    (rest.1, r.2 :: rest.2)

end Lists

/-! ## Tensor operations -/

namespace Arr

variable [Scalar α]

/-- `f` on every entry (as `Tensor.map`). -/
def map [Scalar β] {s : Shape} (f : α → β) (a : Arr α s) : Arr β s := ofFn s (fun k => f (a.get k))

/-- `f` on corresponding entries (as `Tensor.zipWith`). -/
def zipWith {s : Shape} (f : α → α → α) (a b : Arr α s) : Arr α s :=
  ofFn s (fun k => f (a.get k) (b.get k))

/-- Entrywise sum (as `Tensor.add`). -/
def add {s : Shape} (a b : Arr α s) : Arr α s := zipWith (· + ·) a b

/-- Entrywise difference (as `Tensor.sub`). -/
def sub {s : Shape} (a b : Arr α s) : Arr α s := zipWith (· - ·) a b

/-- Entrywise product (as `Tensor.mul`). -/
def mul {s : Shape} (a b : Arr α s) : Arr α s := zipWith (· * ·) a b

/-- Entrywise quotient (as `Tensor.div`). -/
def div {s : Shape} (a b : Arr α s) : Arr α s := zipWith (· / ·) a b

/-- Entrywise negation (as `Tensor.neg`). -/
def neg {s : Shape} (a : Arr α s) : Arr α s := map (fun x => -x) a

/-- Every entry times `c` (as `Tensor.scale`). -/
def scale {s : Shape} (c : α) (a : Arr α s) : Arr α s := map (fun x => c * x) a

/-- The sum of the entries of a vector (as `Tensor.vecSum`). -/
def vecSum {n : Nat} (x : Arr α [n]) : α := sumTo n x.get

/-- The dot product `Σ_i x_i y_i` (as `Tensor.dot`). -/
def dot {n : Nat} (x y : Arr α [n]) : α := sumTo n (fun i => x.get i * y.get i)

/-- Row vector times `[in, out]` matrix, `y_k = Σ_i x_i W[i, k]` (as `Tensor.vecMatMul`). -/
def vecMatMul {n m : Nat} (x : Arr α [n]) (w : Arr α [n, m]) : Arr α [m] :=
  vec m (fun k => sumTo n (fun i => x.get i * w.get (i * m + k)))

/-- Matrix product `C[r, k] = Σ_i A[r, i] B[i, k]` (as `Tensor.matMul`). -/
def matMul {p n m : Nat} (a : Arr α [p, n]) (b : Arr α [n, m]) : Arr α [p, m] :=
  mat p m (fun r k => sumTo n (fun i => a.get (r * n + i) * b.get (i * m + k)))

/-- Outer product `M[i, j] = x_i y_j` (as `Tensor.outer`). -/
def outer {n m : Nat} (x : Arr α [n]) (y : Arr α [m]) : Arr α [n, m] :=
  mat n m (fun i j => x.get i * y.get j)

/-- Matrix transpose (as `Tensor.transpose`). -/
def transpose {m n : Nat} (a : Arr α [m, n]) : Arr α [n, m] := mat n m (fun j i => a.get (i * n + j))

/-- The largest entry of a vector, `0` for the empty vector (as `Tensor.vecMax`). -/
def vecMax : {n : Nat} → Arr α [n] → α
  | 0, _ => 0
  | n + 1, x => maxDown x.get (n + 1) (x.get 0)

/-- **Softmax** shifted by the maximum `m`: `y_j = exp (x_j - m) / Σ_k exp (x_k - m)`
(as `Tensor.softmaxVec` and `Seq.softmax`); the shifted exponentials, the shift and the
normalizer are computed once. -/
def softmax {n : Nat} (x : Arr α [n]) : Arr α [n] :=
  let m := vecMax x
  let e := vec n (fun i => Scalar.exp (x.get i - m))
  let z := sumTo n e.get
  vec n (fun j => e.get j / z)

/-- **Causally masked softmax** at position `t` (as `Seq.maskedSoftmax`): positions `j > t` get
weight exactly `0`. -/
def maskedSoftmax (t : Nat) {n : Nat} (x : Arr α [n]) : Arr α [n] :=
  let m := vecMax x
  let e := vec n (fun i => if i ≤ t then Scalar.exp (x.get i - m) else 0)
  let z := sumTo n e.get
  vec n (fun j => e.get j / z)

/-- The sum of squares `Σ_k x_k²`. -/
def sumSq {n : Nat} (x : Arr α [n]) : α := sumTo n (fun k => x.get k * x.get k)

/-- **RMSNorm** with gain `g`: `y_j = x_j / √(Σ_k x_k² / n + ε) · g_j` (as `Tensor.rmsNormVec`
and `Seq.rmsNorm`). -/
def rmsNorm {n : Nat} (eps : α) (x g : Arr α [n]) : Arr α [n] :=
  let r := Scalar.sqrt (sumSq x / (n : α) + eps)
  vec n (fun j => x.get j / r * g.get j)

/-- **L2 normalization** `y_j = x_j / √(Σ_k x_k² + ε)` (as `Tensor.l2NormVec` and
`Seq.l2Normalize`). -/
def l2Normalize {n : Nat} (eps : α) (x : Arr α [n]) : Arr α [n] :=
  let r := Scalar.sqrt (sumSq x + eps)
  vec n (fun j => x.get j / r)

end Arr

/-! ## Counting and search (route selection) -/

/-- `acc` plus the number of `j ∈ [i, i+k)` with `p j`. -/
def countFrom (p : Nat → Bool) : Nat → Nat → Nat → Nat
  | 0, _, acc => acc
  | k + 1, i, acc => countFrom p k (i + 1) (acc + if p i then 1 else 0)

/-- The number of `j < n` with `p j` (as `finCount`). -/
def countTo (n : Nat) (p : Nat → Bool) : Nat := countFrom p n 0 0

/-- The first `j ∈ [i, i+k)` with `p j` (as `findFin`). -/
def findFrom (p : Nat → Bool) : Nat → Nat → Option Nat
  | 0, _ => none
  | k + 1, i => if p i then some i else findFrom p k (i + 1)

/-! ## The expert FFN and SiTU (report §2.3.2, App. B, Eq. 18–19) -/

section Channel

variable [Scalar α]

/-- The soft cap `c · tanh (x / c)` (report Eq. 19, as `softCap`). -/
def softCap (cap x : α) : α := cap * Scalar.tanh (x / cap)

/-- SiTU on one coordinate, `softCap c_g g · σ(g) · softCap c_u u` (report Eq. 19, as
`SiTU.scalar`). -/
def situ (gateCap upCap gate up : α) : α := (softCap gateCap gate * Scalar.sigmoid gate) * softCap upCap up

/-- An expert FFN with array-backed weights `[in, out]` (as `Expert`). -/
structure Expert (α : Type) (inputDim hiddenDim outputDim : Nat) where
  /-- Gate projection `G : [d, h]`. -/
  gateWeight : Arr α [inputDim, hiddenDim]
  /-- Up projection `U : [d, h]`. -/
  upWeight : Arr α [inputDim, hiddenDim]
  /-- Down projection `D : [h, o]`. -/
  downWeight : Arr α [hiddenDim, outputDim]

/-- **The expert forward pass** `y = SiTU(c_g, c_u, x G, x U) D` (report Eq. 18–19, as
`Expert.forward`); gate and up projections computed once. -/
def Expert.forward {d h o : Nat} (e : Expert α d h o) (gateCap upCap : α) (x : Arr α [d]) :
    Arr α [o] :=
  let gate := Arr.vecMatMul x e.gateWeight
  let up := Arr.vecMatMul x e.upWeight
  Arr.vecMatMul (Arr.vec h (fun j => situ gateCap upCap (gate.get j) (up.get j))) e.downWeight

/-- `n` experts with their weights stacked along a leading axis (the layout of checkpoints). -/
structure Experts (α : Type) (n inputDim hiddenDim outputDim : Nat) where
  /-- Gate projections `[n, d, h]`. -/
  gateWeight : Arr α [n, inputDim, hiddenDim]
  /-- Up projections `[n, d, h]`. -/
  upWeight : Arr α [n, inputDim, hiddenDim]
  /-- Down projections `[n, h, o]`. -/
  downWeight : Arr α [n, hiddenDim, outputDim]

/-- Expert `i` of a stack. -/
def Experts.get {n d h o : Nat} (es : Experts α n d h o) (i : Nat) : Expert α d h o :=
  ⟨Arr.slice3 es.gateWeight i, Arr.slice3 es.upWeight i, Arr.slice3 es.downWeight i⟩

/-- The all-zero vector (the default of array reads past the end). -/
def zeros (n : Nat) : Arr α [n] := Arr.fill [n] 0

/-! ## The router (report §2.3, Eq. 12–13) -/

/-- Raw router scores `s_e = σ((x R)_e)` (report Eq. 12, as `Router.scores`). -/
def routerScores {d E : Nat} (routerWeight : Arr α [d, E]) (x : Arr α [d]) : Arr α [E] :=
  let logits := Arr.vecMatMul x routerWeight
  Arr.vec E (fun e => Scalar.sigmoid (logits.get e))

/-- Bias-adjusted scores `s_e + b_e` (report Eq. 13, as `Router.adjusted`). -/
def adjustedScores {E : Nat} (rawScores bias : Arr α [E]) : Arr α [E] :=
  Arr.vec E (fun e => rawScores.get e + bias.get e)

/-- Whether expert `a` beats expert `b` (as `Routing.Beats`: higher score, ties to the lower
index). -/
def beats {E : Nat} (score : Arr α [E]) (a b : Nat) : Bool :=
  decide (score.get b < score.get a) || (decide (score.get b ≤ score.get a) && decide (a < b))

/-- **The top-`k` route** (as `Routing.topKSlots`): slot `i` holds the expert of rank `i`, the
rank of `e` being the number of experts that beat it; ranks computed once. -/
def topK {E : Nat} (k : Nat) (score : Arr α [E]) : Array Nat :=
  let ranks := arrayOfFn E (fun e => countTo E (fun x => beats score x e))
  arrayOfFn k (fun i =>
    match findFrom (fun e => arrayGetD ranks e 0 == i) E 0 with
    | some e => e
    | none => i)

/-- Mixture weights from the raw scores renormalized over the route,
`w_i = s_{e_i} / Σ_j s_{e_j}` (as `Router.mixtureWeights`). -/
def mixtureWeights {E : Nat} (k : Nat) (rawScores : Arr α [E]) (route : Array Nat) : Arr α [k] :=
  let total := sumTo k (fun j => rawScores.get (arrayGetD route j 0))
  Arr.vec k (fun i => rawScores.get (arrayGetD route i 0) / total)

/-! ## Stable LatentMoE (report §2.3, Eq. 11–13) -/

/-- A Stable LatentMoE layer with array-backed weights (as `StableLatentMoE`; experts
stacked). -/
structure StableLatentMoE (α : Type) (d l hs hr S E : Nat) where
  /-- Shared experts, model width to model width. -/
  shared : Experts α S d hs d
  /-- The down projection `W↓ : [d, l]`. -/
  downProject : Arr α [d, l]
  /-- Router weight `R : [d, E]`. -/
  routerWeight : Arr α [d, E]
  /-- Balancing bias `b` (selection only). -/
  routerBias : Arr α [E]
  /-- Routed experts, latent width to latent width. -/
  routed : Experts α E l hr l
  /-- RMSNorm gain `g` of the routed path. -/
  routedNormScale : Arr α [l]
  /-- RMSNorm ε of the routed path. -/
  normEps : α
  /-- The routed scaling factor `ρ` (hub `routed_scaling_factor`). -/
  routedScale : α
  /-- The up projection `W↑ : [l, d]`. -/
  upProject : Arr α [l, d]

namespace StableLatentMoE

variable {d l hs hr S E : Nat}

/-- The shared path `Σ_i SharedExpert_i(x)` (as `sharedOutput`), each expert run once. -/
def sharedOutput (moe : StableLatentMoE α d l hs hr S E) (gateCap upCap : α) (x : Arr α [d]) :
    Arr α [d] :=
  let outs := arrayOfFn S (fun i => (moe.shared.get i).forward gateCap upCap x)
  Arr.vec d (fun c => sumTo S (fun i => (arrayGetD outs i (zeros d)).get c))

/-- The route the layer picks: top-`k` of the bias-adjusted scores (as `route`). -/
def route (moe : StableLatentMoE α d l hs hr S E) (k : Nat) (x : Arr α [d]) : Array Nat :=
  topK k (adjustedScores (routerScores moe.routerWeight x) moe.routerBias)

/-- The routed aggregate `Σ_i ρ w_i · Expert_{T_i}(x W↓)` for a route (as `routedAggregate`),
each chosen expert run once. -/
def routedAggregate (moe : StableLatentMoE α d l hs hr S E) (k : Nat) (route : Array Nat)
    (gateCap upCap : α) (x : Arr α [d]) : Arr α [l] :=
  let z := Arr.vecMatMul x moe.downProject
  let w := mixtureWeights k (routerScores moe.routerWeight x) route
  let outs := arrayOfFn k (fun i => (moe.routed.get (arrayGetD route i 0)).forward gateCap upCap z)
  Arr.vec l (fun c => sumTo k (fun i => moe.routedScale * w.get i * (arrayGetD outs i (zeros l)).get c))

/-- **The layer for a given route** `shared + (RMSNorm(routed) ⊙ g) W↑` (report Eq. 11, as
`forward`); the route's entries are expert indices. -/
def forward (moe : StableLatentMoE α d l hs hr S E) (k : Nat) (route : Array Nat)
    (gateCap upCap : α) (x : Arr α [d]) : Arr α [d] :=
  let shared := moe.sharedOutput gateCap upCap x
  let routed := moe.routedAggregate k route gateCap upCap x
  let up := Arr.vecMatMul (Arr.rmsNorm moe.normEps routed moe.routedNormScale) moe.upProject
  Arr.vec d (fun c => shared.get c + up.get c)

/-- **The layer with its own routing** (as `forwardAuto`). -/
def forwardAuto (moe : StableLatentMoE α d l hs hr S E) (k : Nat) (gateCap upCap : α)
    (x : Arr α [d]) : Arr α [d] :=
  moe.forward k (moe.route k x) gateCap upCap x

end StableLatentMoE

end Channel

/-! ## KDA (k3-spec §2.2, report Eq. 1–6) -/

namespace KDA

section Head

variable [Scalar α] {K V : Nat}

/-- The per-token inputs of one KDA head, array-backed (as `KDA.Input`). -/
structure Input (α : Type) (keyDim valueDim : Nat) where
  /-- The query `q_t`. -/
  query : Arr α [keyDim]
  /-- The key `k_t`. -/
  key : Arr α [keyDim]
  /-- The value `v_t`. -/
  value : Arr α [valueDim]
  /-- The retention `α_t`, one factor per key row. -/
  retention : Arr α [keyDim]
  /-- The write strength `β_t`. -/
  writeStrength : α

/-- **The KDA state update** of report Eq. 1 (as `KDA.update`): decay `Diag(α) S`, correct
`kᵀ · decayed`, write `decayed − β k ⊗ correction + β k ⊗ v`; the decayed state and the
correction computed once. -/
def update (S : Arr α [K, V]) (x : Input α K V) : Arr α [K, V] :=
  let decayed := Arr.mat K V (fun r c => x.retention.get r * S.get (r * V + c))
  let corr := Arr.vec V (fun c => sumTo K (fun s => x.key.get s * decayed.get (s * V + c)))
  Arr.mat K V (fun r c => decayed.get (r * V + c) - x.writeStrength * (x.key.get r * corr.get c)
    + x.writeStrength * (x.key.get r * x.value.get c))

/-- The readout `Sᵀ q` (as `KDA.read`). -/
def read (S : Arr α [K, V]) (q : Arr α [K]) : Arr α [V] := Arr.vecMatMul q S

/-- **One token of one KDA head** (report Eq. 1, as `KDA.step`): update, then read the updated
state. -/
def step (S : Arr α [K, V]) (x : Input α K V) : Arr α [K, V] × Arr α [V] :=
  let next := update S x
  (next, read next x.query)

/-- The token-by-token scan of `step` (as `CausalScan.run KDA.step`). -/
def run (S : Arr α [K, V]) (xs : List (Input α K V)) : Arr α [K, V] × List (Arr α [V]) :=
  scan step S xs

end Head

section Layer

variable [Scalar α]

/-- The bounded log-decay `g_min · σ(e^{s} · z)` (report Eq. 5, as `KDA.logDecay`). -/
def logDecay (logFloor logScale logit : α) : α :=
  logFloor * Scalar.sigmoid (Scalar.exp logScale * logit)

/-- The retention `exp(g_min · σ(e^{s} · z))` (report Eq. 5, as `KDA.retention`). -/
def retention (logFloor logScale logit : α) : α := Scalar.exp (logDecay logFloor logScale logit)

/-- SiLU, `x · σ(x)` (as `Seq.silu`). -/
def silu (x : α) : α := x * Scalar.sigmoid x

/-- The parameters of a KDA layer, array-backed (as `KDA.LayerParams`, same order). -/
structure LayerParams (α : Type) (d : KimiK3.KDA.LayerDims) where
  /-- Query projection `[modelDim, heads, keyDim]`. -/
  queryProj : Arr α [d.modelDim, d.heads, d.keyDim]
  /-- Key projection `[modelDim, heads, keyDim]`. -/
  keyProj : Arr α [d.modelDim, d.heads, d.keyDim]
  /-- Value projection `[modelDim, heads, valueDim]`. -/
  valueProj : Arr α [d.modelDim, d.heads, d.valueDim]
  /-- Query convolution `[convWidth, heads, keyDim]`. -/
  queryConv : Arr α [d.convWidth, d.heads, d.keyDim]
  /-- Key convolution. -/
  keyConv : Arr α [d.convWidth, d.heads, d.keyDim]
  /-- Value convolution. -/
  valueConv : Arr α [d.convWidth, d.heads, d.valueDim]
  /-- Low-rank decay projection, down part `[modelDim, decayRank]`. -/
  decayDown : Arr α [d.modelDim, d.decayRank]
  /-- Low-rank decay projection, up part `[decayRank, heads, keyDim]`. -/
  decayUp : Arr α [d.decayRank, d.heads, d.keyDim]
  /-- The decay-logit bias `b : [heads, keyDim]` (hub `dt_bias`). -/
  decayBias : Arr α [d.heads, d.keyDim]
  /-- The decay log-scale `s`, one per head. -/
  decayLogScale : Arr α [d.heads]
  /-- Write-strength projection `[modelDim, heads]`. -/
  betaProj : Arr α [d.modelDim, d.heads]
  /-- Output gate weight `[modelDim, heads, valueDim]`. -/
  gateWeight : Arr α [d.modelDim, d.heads, d.valueDim]
  /-- Gain of the per-head output RMSNorm. -/
  outNormScale : Arr α [d.valueDim]
  /-- Output projection `[heads, valueDim, modelDim]`. -/
  outputProj : Arr α [d.heads, d.valueDim, d.modelDim]
  /-- The RMSNorm stabilizer of the output norm. -/
  normEps : α
  /-- The query scale multiplying the L2-normalized query. -/
  queryScale : α

/-- The causal state of a KDA layer, array-backed (as `KDA.LayerState`). -/
structure LayerState (α : Type) (d : KimiK3.KDA.LayerDims) where
  /-- The last `convWidth` layer inputs, oldest first. -/
  window : Arr α [d.convWidth, d.modelDim]
  /-- The per-head recurrent states. -/
  heads : Arr α [d.heads, d.keyDim, d.valueDim]

variable {d : KimiK3.KDA.LayerDims}

/-- The zero initial state (as `LayerState.zero`). -/
def LayerState.zero (d : KimiK3.KDA.LayerDims) : LayerState α d :=
  ⟨Arr.fill _ 0, Arr.fill _ 0⟩

/-- The window after token `x`: drop the oldest row, append `x` (as `shiftWindow`). -/
def shiftWindow (window : Arr α [d.convWidth, d.modelDim]) (x : Arr α [d.modelDim]) :
    Arr α [d.convWidth, d.modelDim] :=
  Arr.mat d.convWidth d.modelDim (fun w m =>
    if w + 1 < d.convWidth then window.get ((w + 1) * d.modelDim + m) else x.get m)

/-- Projection of every window row and depthwise convolution, all heads at once
`c[h, i] = Σ_w K[w, h, i] · (window[w] W)[h, i]` (report Eq. 2, as `projectConv`). -/
def projectConv {n : Nat} (window : Arr α [d.convWidth, d.modelDim])
    (w : Arr α [d.modelDim, d.heads, n]) (k : Arr α [d.convWidth, d.heads, n]) : Arr α [d.heads, n] :=
  Arr.mat d.heads n (fun h i => sumTo d.convWidth (fun t =>
    k.get ((t * d.heads + h) * n + i) *
      sumTo d.modelDim (fun m => window.get (t * d.modelDim + m) * w.get ((m * d.heads + h) * n + i))))

/-- The convolved projections and the low-rank logit of one token, shared by all heads. -/
structure Prepared (α : Type) (d : KimiK3.KDA.LayerDims) where
  /-- Convolved queries `[heads, keyDim]`. -/
  query : Arr α [d.heads, d.keyDim]
  /-- Convolved keys `[heads, keyDim]`. -/
  key : Arr α [d.heads, d.keyDim]
  /-- Convolved values `[heads, valueDim]`. -/
  value : Arr α [d.heads, d.valueDim]
  /-- The low-rank decay activations `x W_down : [decayRank]`. -/
  low : Arr α [d.decayRank]

/-- The projections of every head, computed once per token. -/
def prepareAll (p : LayerParams α d) (window : Arr α [d.convWidth, d.modelDim]) (x : Arr α [d.modelDim]) :
    Prepared α d :=
  ⟨projectConv window p.queryProj p.queryConv, projectConv window p.keyProj p.keyConv,
   projectConv window p.valueProj p.valueConv, Arr.vecMatMul x p.decayDown⟩

/-- **The KDA inputs of head `h`** (k3-spec §2.2 steps 1–6, as `KDA.prepare`): SiLU, L2
normalization of query and key, the query times `queryScale`, retention from the low-rank
logit plus the bias, `β = σ(x W_β)`. -/
def prepareHead (p : LayerParams α d) (logFloor l2Eps : α) (pre : Prepared α d) (x : Arr α [d.modelDim])
    (h : Nat) : Input α d.keyDim d.valueDim :=
  let qn := Arr.l2Normalize l2Eps (Arr.vec d.keyDim (fun i => silu (pre.query.get (h * d.keyDim + i))))
  ⟨Arr.vec d.keyDim (fun i => p.queryScale * qn.get i),
   Arr.l2Normalize l2Eps (Arr.vec d.keyDim (fun i => silu (pre.key.get (h * d.keyDim + i)))),
   Arr.vec d.valueDim (fun c => silu (pre.value.get (h * d.valueDim + c))),
   Arr.vec d.keyDim (fun i => retention logFloor (p.decayLogScale.get h)
     (sumTo d.decayRank (fun r => pre.low.get r * p.decayUp.get ((r * d.heads + h) * d.keyDim + i)) +
       p.decayBias.get (h * d.keyDim + i))),
   Scalar.sigmoid (sumTo d.modelDim (fun m => x.get m * p.betaProj.get (m * d.heads + h)))⟩

/-- The layer output from the per-head readouts `o : [heads, valueDim]`
`y[f] = Σ_h Σ_c σ(x G)[h, c] · RMSNorm(o_h)[c] · W_o[h, c, f]` (report Eq. 6, as `KDA.output`);
gate and normalized readouts computed once. -/
def output (p : LayerParams α d) (x : Arr α [d.modelDim]) (o : Arr α [d.heads, d.valueDim]) :
    Arr α [d.modelDim] :=
  let g := Arr.mat d.heads d.valueDim (fun h c => Scalar.sigmoid
    (sumTo d.modelDim (fun m => x.get m * p.gateWeight.get ((m * d.heads + h) * d.valueDim + c))))
  let norms := arrayOfFn d.heads (fun h => Arr.rmsNorm p.normEps (Arr.row o h) p.outNormScale)
  Arr.vec d.modelDim (fun f => sumTo d.heads (fun h => sumTo d.valueDim (fun c =>
    g.get (h * d.valueDim + c) * (arrayGetD norms h (zeros _)).get c *
      p.outputProj.get ((h * d.valueDim + c) * d.modelDim + f))))

/-- **One token of a KDA layer** (k3-spec §2.2, as `KDA.layerStep`): shift the window, prepare
the heads' inputs (projections once for all heads), step every head, gate, normalize and
project. -/
def layerStep (p : LayerParams α d) (logFloor l2Eps : α) (s : LayerState α d) (x : Arr α [d.modelDim]) :
    LayerState α d × Arr α [d.modelDim] :=
  let window := shiftWindow s.window x
  let pre := prepareAll p window x
  let results := arrayOfFn d.heads (fun h =>
    step (Arr.slice3 s.heads h) (prepareHead p logFloor l2Eps pre x h))
  let dflt : Arr α [d.keyDim, d.valueDim] × Arr α [d.valueDim] := (Arr.fill _ 0, zeros _)
  let heads := Arr.ten3 d.heads d.keyDim d.valueDim (fun h r c =>
    (arrayGetD results h dflt).1.get (r * d.valueDim + c))
  let o := Arr.mat d.heads d.valueDim (fun h c => (arrayGetD results h dflt).2.get c)
  (⟨window, heads⟩, output p x o)

/-- The KDA layer over a whole sequence from the zero state (as `KDA.layerForward`). -/
def layerForward (p : LayerParams α d) (logFloor l2Eps : α) (xs : List (Arr α [d.modelDim])) :
    List (Arr α [d.modelDim]) :=
  (scan (layerStep p logFloor l2Eps) (LayerState.zero d) xs).2

end Layer

end KDA

/-! ## Gated MLA (k3-spec §2.3, report Eq. 7) -/

namespace GatedMLA

section MLA

variable [Scalar α]

/-- The parameters of a Gated MLA layer, array-backed (as `GatedMLA.Params`, same order). -/
structure Params (α : Type) (d : KimiK3.GatedMLA.Dims) where
  /-- `W_qd : [modelDim, queryLatentDim]`. -/
  queryDown : Arr α [d.modelDim, d.queryLatentDim]
  /-- `γ_q`. -/
  queryNormScale : Arr α [d.queryLatentDim]
  /-- `W_kvd : [modelDim, kvLatentDim]`. -/
  kvDown : Arr α [d.modelDim, d.kvLatentDim]
  /-- `γ_kv`. -/
  kvNormScale : Arr α [d.kvLatentDim]
  /-- `W_sk : [modelDim, sharedKeyDim]`. -/
  sharedKeyDown : Arr α [d.modelDim, d.sharedKeyDim]
  /-- `W_qC : [heads, queryLatentDim, contentKeyDim]`. -/
  queryContentUp : Arr α [d.heads, d.queryLatentDim, d.contentKeyDim]
  /-- `W_qS : [heads, queryLatentDim, sharedKeyDim]`. -/
  querySharedUp : Arr α [d.heads, d.queryLatentDim, d.sharedKeyDim]
  /-- `W_k : [heads, kvLatentDim, contentKeyDim]`. -/
  keyUp : Arr α [d.heads, d.kvLatentDim, d.contentKeyDim]
  /-- `W_v : [heads, kvLatentDim, valueDim]`. -/
  valueUp : Arr α [d.heads, d.kvLatentDim, d.valueDim]
  /-- Gate weight `[modelDim, heads, valueDim]`. -/
  gateWeight : Arr α [d.modelDim, d.heads, d.valueDim]
  /-- Output weight `[heads, valueDim, modelDim]`. -/
  outputWeight : Arr α [d.heads, d.valueDim, d.modelDim]
  /-- The RMSNorm stabilizer ε. -/
  normEps : α

/-- One cache entry, array-backed (as `GatedMLA.Entry`). -/
structure Entry (α : Type) (d : KimiK3.GatedMLA.Dims) where
  /-- The normalized KV latent. -/
  latent : Arr α [d.kvLatentDim]
  /-- The shared key. -/
  sharedKey : Arr α [d.sharedKeyDim]

/-- The MLA cache: one entry per past token, oldest first. -/
abbrev Cache (α : Type) (d : KimiK3.GatedMLA.Dims) := List (Entry α d)

variable {d : KimiK3.GatedMLA.Dims}

/-- The query latent `RMSNorm(x W_qd) ⊙ γ_q` (as `queryLatent`). -/
def queryLatent (p : Params α d) (x : Arr α [d.modelDim]) : Arr α [d.queryLatentDim] :=
  Arr.rmsNorm p.normEps (Arr.vecMatMul x p.queryDown) p.queryNormScale

/-- The cache entry of a token (as `entry`). -/
def entry (p : Params α d) (x : Arr α [d.modelDim]) : Entry α d :=
  ⟨Arr.rmsNorm p.normEps (Arr.vecMatMul x p.kvDown) p.kvNormScale, Arr.vecMatMul x p.sharedKeyDown⟩

/-- The output gate `σ(Σ_i x_i G[i, h, c])` (as `gate`). -/
def gate (p : Params α d) (x : Arr α [d.modelDim]) : Arr α [d.heads, d.valueDim] :=
  Arr.mat d.heads d.valueDim (fun h c => Scalar.sigmoid
    (sumTo d.modelDim (fun i => x.get i * p.gateWeight.get ((i * d.heads + h) * d.valueDim + c))))

/-- The attention scores of head `h` over `n` rows (as `scores`); the head's query projections
computed once. -/
def scores (p : Params α d) (cq : Arr α [d.queryLatentDim]) (scoreScale : α) (h : Nat) (n : Nat)
    (latent : Arr α [n, d.kvLatentDim]) (shared : Arr α [n, d.sharedKeyDim]) : Arr α [n] :=
  let qC := Arr.vecMatMul cq (Arr.slice3 p.queryContentUp h)
  let qS := Arr.vecMatMul cq (Arr.slice3 p.querySharedUp h)
  let kUp := Arr.slice3 p.keyUp h
  Arr.vec n (fun j => scoreScale *
    (Arr.dot qC (Arr.vecMatMul (Arr.row latent j) kUp) + Arr.dot qS (Arr.row shared j)))

/-- The per-head attention outputs with weights `wf` (as `headOutputsWith`): each head's
weights and value rows `c_kv[j] W_v[h]` computed once. -/
def headOutputsWith (wf : (n : Nat) → Arr α [n] → Arr α [n]) (p : Params α d) (x : Arr α [d.modelDim])
    (scoreScale : α) (n : Nat) (latent : Arr α [n, d.kvLatentDim]) (shared : Arr α [n, d.sharedKeyDim]) :
    Arr α [d.heads, d.valueDim] :=
  let cq := queryLatent p x
  let ws := arrayOfFn d.heads (fun h => wf n (scores p cq scoreScale h n latent shared))
  let vals := arrayOfFn d.heads (fun h => Arr.matMul latent (Arr.slice3 p.valueUp h))
  Arr.mat d.heads d.valueDim (fun h c => sumTo n (fun j =>
    (arrayGetD ws h (zeros n)).get j * (arrayGetD vals h (Arr.fill _ 0)).get (j * d.valueDim + c)))

/-- Gated attention with weights `wf`, then the output projection (as `attendWith`). -/
def attendWith (wf : (n : Nat) → Arr α [n] → Arr α [n]) (p : Params α d) (x : Arr α [d.modelDim])
    (scoreScale : α) (n : Nat) (latent : Arr α [n, d.kvLatentDim]) (shared : Arr α [n, d.sharedKeyDim]) :
    Arr α [d.modelDim] :=
  let o := headOutputsWith wf p x scoreScale n latent shared
  let g := gate p x
  Arr.vec d.modelDim (fun f => sumTo d.heads (fun h => sumTo d.valueDim (fun c =>
    g.get (h * d.valueDim + c) * o.get (h * d.valueDim + c) *
      p.outputWeight.get ((h * d.valueDim + c) * d.modelDim + f))))

/-- Gated softmax attention over `n` rows (as `attend`). -/
def attend (p : Params α d) (x : Arr α [d.modelDim]) (scoreScale : α) (n : Nat)
    (latent : Arr α [n, d.kvLatentDim]) (shared : Arr α [n, d.sharedKeyDim]) : Arr α [d.modelDim] :=
  attendWith (fun _ v => Arr.softmax v) p x scoreScale n latent shared

/-- The all-zero entry (as `Entry.zero`). -/
def Entry.zero : Entry α d := ⟨zeros _, zeros _⟩

/-- The cache's latents as `[n, kvLatentDim]` rows (as `packLatent`). -/
def packLatent (n : Nat) (cache : Cache α d) : Arr α [n, d.kvLatentDim] :=
  Arr.mat n d.kvLatentDim (fun j c => (listGet Entry.zero cache j).latent.get c)

/-- The cache's shared keys as `[n, sharedKeyDim]` rows (as `packShared`). -/
def packShared (n : Nat) (cache : Cache α d) : Arr α [n, d.sharedKeyDim] :=
  Arr.mat n d.sharedKeyDim (fun j c => (listGet Entry.zero cache j).sharedKey.get c)

/-- **One causal Gated MLA step on a list cache** (k3-spec §2.3, Eq. 7, as `GatedMLA.step`). -/
def step (p : Params α d) (scoreScale : α) (cache : Cache α d) (x : Arr α [d.modelDim]) :
    Cache α d × Arr α [d.modelDim] :=
  let cache' := listAppend cache [entry p x]
  let n := listLen cache'
  (cache', attend p x scoreScale n (packLatent n cache') (packShared n cache'))

/-- The Gated MLA layer over a sequence from the empty cache (as `GatedMLA.forward`). -/
def forward (p : Params α d) (scoreScale : α) (xs : List (Arr α [d.modelDim])) : List (Arr α [d.modelDim]) :=
  (scan (step p scoreScale) [] xs).2

end MLA

end GatedMLA

/-! ## Block Attention Residuals (report §2.2, Eq. 8–10; k3-spec §2.4) -/

namespace AttnRes

variable [Scalar α]

/-- **Depth attention over packed sources** (report Eq. 9–10, as `AttnRes.attendPacked`):
scores `w · RMSNorm(v_i)` (unit gain), softmax, mix of the un-normalized rows. -/
def attendPacked {n d : Nat} (eps : α) (query : Arr α [d]) (values : Arr α [n, d]) : Arr α [d] :=
  let ones := Arr.fill [d] 1
  let scores := Arr.vec n (fun i => Arr.dot query (Arr.rmsNorm eps (Arr.row values i) ones))
  let weights := Arr.softmax scores
  Arr.vec d (fun k => sumTo n (fun i => weights.get i * values.get (i * d + k)))

/-- The sources packed as rows (as `AttnRes.pack`). The default row is built once, not at every
entry (`listGet` evaluates its default eagerly, the cost `arrayGetD` avoids by `macro_inline`). -/
def pack {d : Nat} (sources : List (Arr α [d])) : Arr α [listLen sources, d] :=
  let z := zeros d
  Arr.mat (listLen sources) d (fun i k => (listGet z sources i).get k)

/-- Depth attention over a list of sources (as `AttnRes.attendList`). -/
def attendList {d : Nat} (eps : α) (query : Arr α [d]) (sources : List (Arr α [d])) : Arr α [d] :=
  attendPacked eps query (pack sources)

end AttnRes

/-- The depth state of one token, array-backed (as `BlockState`). -/
structure BlockState (α : Type) (d : Nat) where
  /-- The token's embedding, source 0. -/
  embedding : Arr α [d]
  /-- The completed block sums, oldest first. -/
  blocks : List (Arr α [d])
  /-- The partial sum of the unfinished block. -/
  partialSum : Arr α [d]
  /-- The number of layers in the unfinished block. -/
  count : Nat

namespace BlockState

variable [Scalar α] {d : Nat}

/-- The state before the first layer (as `BlockState.initial`). -/
def initial (embedding : Arr α [d]) : BlockState α d := ⟨embedding, [], zeros d, 0⟩

/-- The sources of a retrieval (as `BlockState.sources`). -/
def sources (s : BlockState α d) : List (Arr α [d]) :=
  s.embedding :: listAppend s.blocks (if s.count = 0 then [] else [s.partialSum])

/-- The partial block with the sequence output added (as `afterSequence`). -/
def afterSequence (s : BlockState α d) (seqOut : Arr α [d]) : Arr α [d] :=
  if s.count = 0 then seqOut else Arr.vec d (fun k => s.partialSum.get k + seqOut.get k)

/-- **Retrieval** with query `w` (report Eq. 9–10, as `BlockState.retrieve`). -/
def retrieve (eps : α) (query : Arr α [d]) (s : BlockState α d) : Arr α [d] :=
  AttnRes.attendList eps query s.sources

/-- The channel mixer's retrieval (as `retrieveAfterSequence`). -/
def retrieveAfterSequence (eps : α) (query : Arr α [d]) (s : BlockState α d) (seqOut : Arr α [d]) :
    Arr α [d] :=
  AttnRes.attendList eps query (s.embedding :: listAppend s.blocks [s.afterSequence seqOut])

/-- **The commit of one layer** (k3-spec §2.5, as `finishLayer`). -/
def finishLayer (blockSize : Nat) (s : BlockState α d) (seqOut chanOut : Arr α [d]) : BlockState α d :=
  let a := s.afterSequence seqOut
  let p := Arr.vec d (fun k => a.get k + chanOut.get k)
  if s.count + 1 = blockSize then ⟨s.embedding, listAppend s.blocks [p], zeros d, 0⟩
  else ⟨s.embedding, s.blocks, p, s.count + 1⟩

end BlockState

/-! ## The backbone and the language model (k3-spec §2.5) -/

/-- The widths and counts the executable model needs (the fields of `Config` it reads;
`Config.execDims` in `Model.lean` fills them from a configuration). -/
structure ModelDims where
  /-- `vocab_size`. -/
  vocab : Nat
  /-- `hidden_size`. -/
  hidden : Nat
  /-- `attn_res_block_size`. -/
  blockSize : Nat
  /-- MLA heads. -/
  mlaHeads : Nat
  /-- MLA query latent width. -/
  queryLatent : Nat
  /-- MLA KV latent width. -/
  kvLatent : Nat
  /-- MLA content key width. -/
  contentKey : Nat
  /-- MLA shared key width. -/
  sharedKey : Nat
  /-- MLA value width. -/
  mlaValue : Nat
  /-- KDA heads. -/
  kdaHeads : Nat
  /-- KDA key width. -/
  kdaKey : Nat
  /-- KDA value width. -/
  kdaValue : Nat
  /-- KDA convolution length. -/
  kdaConv : Nat
  /-- KDA decay rank. -/
  kdaRank : Nat
  /-- Dense FFN hidden width. -/
  denseHidden : Nat
  /-- Routed-expert latent width. -/
  latent : Nat
  /-- Expert hidden width. -/
  expertHidden : Nat
  /-- Shared experts. -/
  numShared : Nat
  /-- Routed experts. -/
  numRouted : Nat
  /-- Active routed experts (top-k). -/
  active : Nat
  /-- SiTU gate cap. -/
  gateCap : Nat
  /-- SiTU up cap. -/
  upCap : Nat

namespace ModelDims

/-- The KDA layer dimensions (as `Config.kdaDims`). -/
def kda (m : ModelDims) : KimiK3.KDA.LayerDims :=
  ⟨m.hidden, m.kdaHeads, m.kdaKey, m.kdaValue, m.kdaConv, m.kdaRank⟩

/-- The Gated MLA dimensions (as `Config.mlaDims`). -/
def mla (m : ModelDims) : KimiK3.GatedMLA.Dims :=
  ⟨m.hidden, m.mlaHeads, m.queryLatent, m.kvLatent, m.contentKey, m.sharedKey, m.mlaValue⟩

end ModelDims

/-- A sequence mixer, array-backed (as `SequenceMixer`). -/
inductive SequenceMixer (α : Type) (m : ModelDims) where
  /-- A KDA layer with its log-decay floor and L2 ε. -/
  | kda (params : KDA.LayerParams α m.kda) (logFloor l2Eps : α)
  /-- A Gated MLA layer with its score scale. -/
  | mla (params : GatedMLA.Params α m.mla) (scoreScale : α)

/-- The causal state of a sequence mixer, array-backed (as `MixerState`). -/
inductive MixerState (α : Type) (m : ModelDims) where
  /-- The state of a KDA layer. -/
  | kda (state : KDA.LayerState α m.kda)
  /-- The cache of a Gated MLA layer. -/
  | mla (cache : GatedMLA.Cache α m.mla)

/-- A channel mixer, array-backed (as `ChannelMixer`). -/
inductive ChannelMixer (α : Type) (m : ModelDims) where
  /-- The dense SiTU FFN. -/
  | dense (expert : Expert α m.hidden m.denseHidden m.hidden)
  /-- Stable LatentMoE with `active ≤ numRouted`. -/
  | moe (layer : StableLatentMoE α m.hidden m.latent m.expertHidden m.expertHidden m.numShared m.numRouted)
      (hActive : m.active ≤ m.numRouted)

section Model

variable [Scalar α] {m : ModelDims}

/-- The state before the first token (as `SequenceMixer.initialState`). -/
def SequenceMixer.initialState : SequenceMixer α m → MixerState α m
  | .kda .. => .kda (KDA.LayerState.zero m.kda)
  | .mla .. => .mla []

/-- **One token of a sequence mixer** (as `SequenceMixer.step`). -/
def SequenceMixer.step (mixer : SequenceMixer α m) (s : MixerState α m) (x : Arr α [m.hidden]) :
    MixerState α m × Arr α [m.hidden] :=
  match mixer with
  | .kda p logFloor l2Eps =>
    let st := match s with
      | .kda st => st
      | .mla _ => KDA.LayerState.zero m.kda
    let r := KDA.layerStep p logFloor l2Eps st x
    (.kda r.1, r.2)
  | .mla p scoreScale =>
    let cache := match s with
      | .kda _ => []
      | .mla cache => cache
    let r := GatedMLA.step p scoreScale cache x
    (.mla r.1, r.2)

/-- The channel mixer on one token (as `ChannelMixer.forward`). -/
def ChannelMixer.forward (mixer : ChannelMixer α m) (x : Arr α [m.hidden]) : Arr α [m.hidden] :=
  match mixer with
  | .dense expert => expert.forward (m.gateCap : α) (m.upCap : α) x
  | .moe layer _ => layer.forwardAuto m.active (m.gateCap : α) (m.upCap : α) x

/-- A backbone layer, array-backed (as `BackboneLayer`). -/
structure BackboneLayer (α : Type) (m : ModelDims) where
  /-- The sequence mixer. -/
  sequence : SequenceMixer α m
  /-- The channel mixer. -/
  channel : ChannelMixer α m
  /-- The retrieval query of the sequence mixer's input. -/
  sequenceQuery : Arr α [m.hidden]
  /-- The retrieval query of the channel mixer's input. -/
  channelQuery : Arr α [m.hidden]
  /-- The RMSNorm gain of the sequence mixer's input. -/
  sequenceNormScale : Arr α [m.hidden]
  /-- The RMSNorm gain of the channel mixer's input. -/
  channelNormScale : Arr α [m.hidden]
  /-- The stabilizer `ε'` of the two retrievals' score norms. -/
  retrievalEps : α
  /-- The stabilizer `ε` of the two pre-norms. -/
  normEps : α

namespace BackboneLayer

/-- The sequence mixer's input (as `sequenceInput`). -/
def sequenceInput (layer : BackboneLayer α m) (depth : BlockState α m.hidden) : Arr α [m.hidden] :=
  Arr.rmsNorm layer.normEps (depth.retrieve layer.retrievalEps layer.sequenceQuery) layer.sequenceNormScale

/-- The rest of the layer once the sequence output is known (as `commit`). -/
def commit (layer : BackboneLayer α m) (depth : BlockState α m.hidden) (seqOut : Arr α [m.hidden]) :
    BlockState α m.hidden :=
  let chanIn := Arr.rmsNorm layer.normEps (depth.retrieveAfterSequence layer.retrievalEps layer.channelQuery seqOut)
    layer.channelNormScale
  let chanOut := layer.channel.forward chanIn
  depth.finishLayer m.blockSize seqOut chanOut

/-- **One layer at one token** (k3-spec §2.5, as `BackboneLayer.forwardToken`). -/
def forwardToken (layer : BackboneLayer α m) (s : MixerState α m) (depth : BlockState α m.hidden) :
    MixerState α m × BlockState α m.hidden :=
  let r := layer.sequence.step s (layer.sequenceInput depth)
  (r.1, layer.commit depth r.2)

end BackboneLayer

/-- One token through a stack of layers (as `ModelList.scanLayers`). -/
def scanLayers {ℓ σ γ : Type} (f : ℓ → σ → γ → σ × γ) : List ℓ → List σ → γ → γ × List σ
  | l :: ls, s :: ss, x =>
    let r := f l s x
    let rest := scanLayers f ls ss r.2
    (rest.1, r.1 :: rest.2)
  | _, _, x => (x, [])

/-- The language model, array-backed (as `LanguageModel`). -/
structure LanguageModel (α : Type) (m : ModelDims) where
  /-- Token embedding table `[vocab, d]`. -/
  embedding : Arr α [m.vocab, m.hidden]
  /-- The backbone layers, first layer first. -/
  layers : List (BackboneLayer α m)
  /-- The query of the final retrieval. -/
  finalQuery : Arr α [m.hidden]
  /-- The gain of the final RMSNorm. -/
  finalNormScale : Arr α [m.hidden]
  /-- The vocabulary head `[d, vocab]`. -/
  head : Arr α [m.hidden, m.vocab]
  /-- The stabilizer `ε'` of the final retrieval's score norm. -/
  retrievalEps : α
  /-- The stabilizer `ε` of the final RMSNorm. -/
  normEps : α

namespace LanguageModel

/-- The model state: one mixer state per layer. -/
abbrev State (α : Type) (m : ModelDims) := List (MixerState α m)

/-- The state before the first token (as `initialState`). -/
def initialState (model : LanguageModel α m) : State α m :=
  listMap (fun layer => layer.sequence.initialState) model.layers

/-- The embedding row of a token id (as `embed`). -/
def embed (model : LanguageModel α m) (token : Nat) : Arr α [m.hidden] := Arr.row model.embedding token

/-- **The final head** (as `readout`). -/
def readout (model : LanguageModel α m) (depth : BlockState α m.hidden) : Arr α [m.vocab] :=
  let h := Arr.rmsNorm model.normEps (depth.retrieve model.retrievalEps model.finalQuery) model.finalNormScale
  Arr.vecMatMul h model.head

/-- One token's depth state through every layer (as `layersToken`). -/
def layersToken (model : LanguageModel α m) (states : State α m) (depth : BlockState α m.hidden) :
    BlockState α m.hidden × State α m :=
  scanLayers (fun layer s d => layer.forwardToken s d) model.layers states depth

/-- **One causal step on an embedding row** (as `stepEmbedded`). -/
def stepEmbedded (model : LanguageModel α m) (states : State α m) (x : Arr α [m.hidden]) :
    State α m × Arr α [m.vocab] :=
  let r := model.layersToken states (BlockState.initial x)
  (r.2, model.readout r.1)

/-- **One causal step on a token id** (as `step`). -/
def step (model : LanguageModel α m) (states : State α m) (token : Nat) : State α m × Arr α [m.vocab] :=
  model.stepEmbedded states (model.embed token)

/-- **Token-by-token evaluation** from state `s` (as `run`): the final state and the logits of
every token. -/
def run (model : LanguageModel α m) (s : State α m) (tokens : List Nat) : State α m × List (Arr α [m.vocab]) :=
  scan model.step s tokens

/-- **Token-by-token evaluation of embedding rows** from state `s` (k3-spec §2.5, as
`runEmbedded`): the final state and the logits of every row. -/
def runEmbedded (model : LanguageModel α m) (s : State α m) (xs : List (Arr α [m.hidden])) :
    State α m × List (Arr α [m.vocab]) :=
  scan model.stepEmbedded s xs

/-- **The rows of a prompt with its placeholders spliced** (k3-spec §2.5, as `embedSlots` of
`Vision.spliceFrom`): from visual row `k` on, each id equal to the placeholder `ph` reads the next
row of `visual`, in reading order, and every other id its embedding row. -/
def spliceRows {n : Nat} (model : LanguageModel α m) (visual : Arr α [n, m.hidden]) (ph : Nat) :
    List Nat → Nat → List (Arr α [m.hidden])
  | [], _ => []
  | t :: ts, k =>
    if t = ph then Arr.row visual k :: spliceRows model visual ph ts (k + 1)
    else model.embed t :: spliceRows model visual ph ts k

end LanguageModel

end Model

/-! ## Kimi Linear variant (k3-spec §7)

Executable versions of the Kimi Linear variant's layers (`KimiLinear.layerForward`,
`KimiLinear.MLA.forward` and its direct-query step, `KimiLinear.MoE.forwardAuto`). They reuse
KDA's head step, window and convolution (`KDA.step`, `KDA.shiftWindow`, `KDA.projectConv`,
`KDA.LayerState`), Gated MLA's entry, scores and caches, and the router and top-`k`; only what the
variant changes is new: the softplus retention, the low-rank output gate, the ungated attention
and the SwiGLU MoE. The dimensions are K3's `KDA.LayerDims` plus the gate rank as its own
argument (Kimi Linear's `LayerDims` lives in a module this one does not import). Proofs:
`KimiLinear.lean`. -/

namespace KimiLinear

section Layer

variable [Scalar α]

/-- Softplus `log(1 + e^z)` (k3-spec §7, as `KimiLinear.softplus`). -/
def softplus (z : α) : α := Scalar.log (1 + Scalar.exp z)

/-- The Kimi Linear retention `exp(−e^{A_log} softplus(z))` (k3-spec §7, as
`KimiLinear.retention`). -/
def retention (logRate logit : α) : α := Scalar.exp (-(Scalar.exp logRate * softplus logit))

/-- The parameters of a Kimi Linear KDA layer, array-backed (as `KimiLinear.LayerParams`, same
order), with the gate rank `r`. -/
structure LayerParams (α : Type) (d : KimiK3.KDA.LayerDims) (r : Nat) where
  /-- Query projection `[modelDim, heads, keyDim]` (`q_proj`). -/
  queryProj : Arr α [d.modelDim, d.heads, d.keyDim]
  /-- Key projection `[modelDim, heads, keyDim]` (`k_proj`). -/
  keyProj : Arr α [d.modelDim, d.heads, d.keyDim]
  /-- Value projection `[modelDim, heads, valueDim]` (`v_proj`). -/
  valueProj : Arr α [d.modelDim, d.heads, d.valueDim]
  /-- Query convolution `[convWidth, heads, keyDim]`, oldest tap first. -/
  queryConv : Arr α [d.convWidth, d.heads, d.keyDim]
  /-- Key convolution. -/
  keyConv : Arr α [d.convWidth, d.heads, d.keyDim]
  /-- Value convolution. -/
  valueConv : Arr α [d.convWidth, d.heads, d.valueDim]
  /-- Decay logit, down part `[modelDim, decayRank]` (`f_a_proj`). -/
  decayDown : Arr α [d.modelDim, d.decayRank]
  /-- Decay logit, up part `[decayRank, heads, keyDim]` (`f_b_proj`). -/
  decayUp : Arr α [d.decayRank, d.heads, d.keyDim]
  /-- Decay logit bias `[heads, keyDim]` (`dt_bias`). -/
  decayBias : Arr α [d.heads, d.keyDim]
  /-- The log decay rate `A_log`, one per head. -/
  decayLogRate : Arr α [d.heads]
  /-- Write-strength projection `[modelDim, heads]` (`b_proj`). -/
  betaProj : Arr α [d.modelDim, d.heads]
  /-- Output gate, down part `[modelDim, r]` (`g_a_proj`). -/
  gateDown : Arr α [d.modelDim, r]
  /-- Output gate, up part `[r, heads, valueDim]` (`g_b_proj`). -/
  gateUp : Arr α [r, d.heads, d.valueDim]
  /-- Gain of the per-head output RMSNorm (`o_norm.weight`). -/
  outNormScale : Arr α [d.valueDim]
  /-- Output projection `[heads, valueDim, modelDim]` (`o_proj`). -/
  outputProj : Arr α [d.heads, d.valueDim, d.modelDim]
  /-- The output RMSNorm ε. -/
  normEps : α
  /-- The query scale applied after the L2 norm. -/
  queryScale : α

variable {d : KimiK3.KDA.LayerDims} {r : Nat}

/-- The projections of every head, computed once per token (as `KDA.prepareAll`). -/
def prepareAll (p : LayerParams α d r) (window : Arr α [d.convWidth, d.modelDim]) (x : Arr α [d.modelDim]) :
    KDA.Prepared α d :=
  ⟨KDA.projectConv window p.queryProj p.queryConv, KDA.projectConv window p.keyProj p.keyConv,
   KDA.projectConv window p.valueProj p.valueConv, Arr.vecMatMul x p.decayDown⟩

/-- **The Kimi Linear KDA inputs of head `h`** (k3-spec §7, as `KimiLinear.prepare`): K3's
`KDA.prepareHead` with the softplus retention. -/
def prepareHead (p : LayerParams α d r) (l2Eps : α) (pre : KDA.Prepared α d) (x : Arr α [d.modelDim])
    (h : Nat) : KDA.Input α d.keyDim d.valueDim :=
  let qn := Arr.l2Normalize l2Eps (Arr.vec d.keyDim (fun i => KDA.silu (pre.query.get (h * d.keyDim + i))))
  ⟨Arr.vec d.keyDim (fun i => p.queryScale * qn.get i),
   Arr.l2Normalize l2Eps (Arr.vec d.keyDim (fun i => KDA.silu (pre.key.get (h * d.keyDim + i)))),
   Arr.vec d.valueDim (fun c => KDA.silu (pre.value.get (h * d.valueDim + c))),
   Arr.vec d.keyDim (fun i => retention (p.decayLogRate.get h)
     (sumTo d.decayRank (fun k => pre.low.get k * p.decayUp.get ((k * d.heads + h) * d.keyDim + i)) +
       p.decayBias.get (h * d.keyDim + i))),
   Scalar.sigmoid (sumTo d.modelDim (fun m => x.get m * p.betaProj.get (m * d.heads + h)))⟩

/-- The layer output from the per-head readouts (k3-spec §7, as `KimiLinear.output`):
`y[f] = Σ_h Σ_c RMSNorm(o_h)[c] · σ((x W_gd) W_gu)[h, c] · W_o[h, c, f]`; the low-rank
activations, the gate and the normalized readouts computed once. -/
def output (p : LayerParams α d r) (x : Arr α [d.modelDim]) (o : Arr α [d.heads, d.valueDim]) :
    Arr α [d.modelDim] :=
  let a := Arr.vecMatMul x p.gateDown
  let g := Arr.mat d.heads d.valueDim (fun h c => Scalar.sigmoid
    (sumTo r (fun k => a.get k * p.gateUp.get ((k * d.heads + h) * d.valueDim + c))))
  let norms := arrayOfFn d.heads (fun h => Arr.rmsNorm p.normEps (Arr.row o h) p.outNormScale)
  Arr.vec d.modelDim (fun f => sumTo d.heads (fun h => sumTo d.valueDim (fun c =>
    (arrayGetD norms h (zeros _)).get c * g.get (h * d.valueDim + c) *
      p.outputProj.get ((h * d.valueDim + c) * d.modelDim + f))))

/-- **One token of the Kimi Linear KDA layer** (k3-spec §7, as `KimiLinear.layerStep`): K3's
`KDA.layerStep` with this variant's head inputs and output. -/
def layerStep (p : LayerParams α d r) (l2Eps : α) (s : KDA.LayerState α d) (x : Arr α [d.modelDim]) :
    KDA.LayerState α d × Arr α [d.modelDim] :=
  let window := KDA.shiftWindow s.window x
  let pre := prepareAll p window x
  let results := arrayOfFn d.heads (fun h =>
    KDA.step (Arr.slice3 s.heads h) (prepareHead p l2Eps pre x h))
  let dflt : Arr α [d.keyDim, d.valueDim] × Arr α [d.valueDim] := (Arr.fill _ 0, zeros _)
  let heads := Arr.ten3 d.heads d.keyDim d.valueDim (fun h i c =>
    (arrayGetD results h dflt).1.get (i * d.valueDim + c))
  let o := Arr.mat d.heads d.valueDim (fun h c => (arrayGetD results h dflt).2.get c)
  (⟨window, heads⟩, output p x o)

/-- The Kimi Linear KDA layer over a sequence from the zero state (as
`KimiLinear.layerForward`). -/
def layerForward (p : LayerParams α d r) (l2Eps : α) (xs : List (Arr α [d.modelDim])) :
    List (Arr α [d.modelDim]) :=
  (scan (layerStep p l2Eps) (KDA.LayerState.zero d) xs).2

end Layer

namespace MLA

section MLA

variable [Scalar α] {d : KimiK3.GatedMLA.Dims}

/-- The per-head attention outputs from a given query latent `cq` with weights `wf` (as
`KimiLinear.MLA.headOutputsOf`): each head's weights and value rows computed once. -/
def headOutputsOf (wf : (n : Nat) → Arr α [n] → Arr α [n]) (p : GatedMLA.Params α d)
    (cq : Arr α [d.queryLatentDim]) (scoreScale : α) (n : Nat) (latent : Arr α [n, d.kvLatentDim])
    (shared : Arr α [n, d.sharedKeyDim]) : Arr α [d.heads, d.valueDim] :=
  let ws := arrayOfFn d.heads (fun h => wf n (GatedMLA.scores p cq scoreScale h n latent shared))
  let vals := arrayOfFn d.heads (fun h => Arr.matMul latent (Arr.slice3 p.valueUp h))
  Arr.mat d.heads d.valueDim (fun h c => sumTo n (fun j =>
    (arrayGetD ws h (zeros n)).get j * (arrayGetD vals h (Arr.fill _ 0)).get (j * d.valueDim + c)))

/-- Ungated attention from the query latent `cq`, then the output projection
`y[f] = Σ_h Σ_c o_h[c] W_o[h, c, f]` (k3-spec §7, as `KimiLinear.MLA.attendOf`). -/
def attendOf (wf : (n : Nat) → Arr α [n] → Arr α [n]) (p : GatedMLA.Params α d)
    (cq : Arr α [d.queryLatentDim]) (scoreScale : α) (n : Nat) (latent : Arr α [n, d.kvLatentDim])
    (shared : Arr α [n, d.sharedKeyDim]) : Arr α [d.modelDim] :=
  let o := headOutputsOf wf p cq scoreScale n latent shared
  Arr.vec d.modelDim (fun f => sumTo d.heads (fun h => sumTo d.valueDim (fun c =>
    o.get (h * d.valueDim + c) * p.outputWeight.get ((h * d.valueDim + c) * d.modelDim + f))))

/-- **One causal Kimi Linear MLA step** on a list cache, low-rank query (k3-spec §7, as
`KimiLinear.MLA.step`): K3's entry and caches, ungated softmax attention. -/
def step (p : GatedMLA.Params α d) (scoreScale : α) (cache : GatedMLA.Cache α d) (x : Arr α [d.modelDim]) :
    GatedMLA.Cache α d × Arr α [d.modelDim] :=
  let cache' := listAppend cache [GatedMLA.entry p x]
  let n := listLen cache'
  (cache', attendOf (fun _ v => Arr.softmax v) p (GatedMLA.queryLatent p x) scoreScale n
    (GatedMLA.packLatent n cache') (GatedMLA.packShared n cache'))

/-- The layer over a sequence from the empty cache (as `KimiLinear.MLA.forward`). -/
def forward (p : GatedMLA.Params α d) (scoreScale : α) (xs : List (Arr α [d.modelDim])) :
    List (Arr α [d.modelDim]) :=
  (scan (step p scoreScale) [] xs).2

/-- The layer input read as the query latent (`q_lora_rank = None`, as
`KimiLinear.MLA.directQuery`; meaningful when `queryLatentDim = modelDim`). -/
def directQuery (x : Arr α [d.modelDim]) : Arr α [d.queryLatentDim] :=
  Arr.vec d.queryLatentDim (fun i => x.get i)

/-- **One causal Kimi Linear MLA step with a direct query** (`q_lora_rank = None`; k3-spec §7, as
`KimiLinear.MLA.stepDirect`). -/
def stepDirect (p : GatedMLA.Params α d) (scoreScale : α) (cache : GatedMLA.Cache α d)
    (x : Arr α [d.modelDim]) : GatedMLA.Cache α d × Arr α [d.modelDim] :=
  let cache' := listAppend cache [GatedMLA.entry p x]
  let n := listLen cache'
  (cache', attendOf (fun _ v => Arr.softmax v) p (directQuery x) scoreScale n
    (GatedMLA.packLatent n cache') (GatedMLA.packShared n cache'))

/-- The direct-query layer over a sequence from the empty cache (the scan of
`KimiLinear.MLA.stepDirect`). -/
def forwardDirect (p : GatedMLA.Params α d) (scoreScale : α) (xs : List (Arr α [d.modelDim])) :
    List (Arr α [d.modelDim]) :=
  (scan (stepDirect p scoreScale) [] xs).2

end MLA

end MLA

section MoE

variable [Scalar α]

/-- SwiGLU on one coordinate, `g σ(g) u` (k3-spec §7, as `KimiLinear.swiglu`). -/
def swiglu (gate up : α) : α := gate * Scalar.sigmoid gate * up

/-- The SwiGLU expert `y = (SiLU(x G) ⊙ (x U)) D` (k3-spec §7, as `KimiLinear.swigluForward`);
gate and up projections computed once. -/
def swigluForward {d h o : Nat} (e : Expert α d h o) (x : Arr α [d]) : Arr α [o] :=
  let gate := Arr.vecMatMul x e.gateWeight
  let up := Arr.vecMatMul x e.upWeight
  Arr.vecMatMul (Arr.vec h (fun j => swiglu (gate.get j) (up.get j))) e.downWeight

/-- A Kimi Linear MoE block, array-backed, routed experts stacked (as `KimiLinear.MoE`). -/
structure MoE (α : Type) (d h hs E : Nat) where
  /-- The shared SwiGLU MLP. -/
  shared : Expert α d hs d
  /-- Router weight `R : [d, E]`. -/
  routerWeight : Arr α [d, E]
  /-- Selection bias `b`. -/
  routerBias : Arr α [E]
  /-- Routed SwiGLU experts. -/
  routed : Experts α E d h d
  /-- The routed scaling factor `ρ`. -/
  routedScale : α

namespace MoE

variable {d h hs E : Nat}

/-- The route: top-`k` of the bias-adjusted scores `σ(x R) + b` (as `KimiLinear.MoE.route`). -/
def route (moe : MoE α d h hs E) (k : Nat) (x : Arr α [d]) : Array Nat :=
  topK k (adjustedScores (routerScores moe.routerWeight x) moe.routerBias)

/-- The routed mixture `Σ_i ρ w_i · E_{T_i}(x)` for a route (as `KimiLinear.MoE.routedOutput`),
each chosen expert run once. -/
def routedOutput (moe : MoE α d h hs E) (k : Nat) (route : Array Nat) (x : Arr α [d]) : Arr α [d] :=
  let w := mixtureWeights k (routerScores moe.routerWeight x) route
  let outs := arrayOfFn k (fun i => swigluForward (moe.routed.get (arrayGetD route i 0)) x)
  Arr.vec d (fun c => sumTo k (fun i => moe.routedScale * w.get i * (arrayGetD outs i (zeros d)).get c))

/-- **The MoE block for a given route**: routed mixture plus the shared MLP (as
`KimiLinear.MoE.forward`). -/
def forward (moe : MoE α d h hs E) (k : Nat) (route : Array Nat) (x : Arr α [d]) : Arr α [d] :=
  let routed := moe.routedOutput k route x
  let shared := swigluForward moe.shared x
  Arr.vec d (fun c => routed.get c + shared.get c)

/-- **The block with its own routing** (as `KimiLinear.MoE.forwardAuto`). -/
def forwardAuto (moe : MoE α d h hs E) (k : Nat) (x : Arr α [d]) : Arr α [d] :=
  moe.forward k (moe.route k x) x

end MoE

end MoE

/-! ### The decoder layer and the model -/

/-- The widths and counts of a Kimi Linear model, array-backed (as `KimiLinear.Dims`, same
order). -/
structure ModelDims where
  /-- `vocab_size`. -/
  vocab : Nat
  /-- `hidden_size`. -/
  hidden : Nat
  /-- KDA heads. -/
  kdaHeads : Nat
  /-- KDA key width. -/
  kdaKey : Nat
  /-- KDA value width. -/
  kdaValue : Nat
  /-- KDA convolution length. -/
  kdaConv : Nat
  /-- KDA decay rank. -/
  kdaRank : Nat
  /-- KDA output-gate rank. -/
  gateRank : Nat
  /-- MLA heads. -/
  mlaHeads : Nat
  /-- MLA query latent width (`hidden` on the direct-query path). -/
  queryLatent : Nat
  /-- MLA KV latent width. -/
  kvLatent : Nat
  /-- MLA content key width. -/
  contentKey : Nat
  /-- MLA shared key width. -/
  sharedKey : Nat
  /-- MLA value width. -/
  mlaValue : Nat
  /-- Dense MLP hidden width. -/
  denseHidden : Nat
  /-- Routed-expert hidden width. -/
  expertHidden : Nat
  /-- Shared-MLP hidden width. -/
  sharedHidden : Nat
  /-- Routed experts. -/
  numRouted : Nat
  /-- Active routed experts (top-k). -/
  active : Nat

namespace ModelDims

/-- K3's KDA layer dimensions of the KDA layers (as `KimiLinear.Dims.kda` without the gate
rank). -/
def kda (m : ModelDims) : KimiK3.KDA.LayerDims :=
  ⟨m.hidden, m.kdaHeads, m.kdaKey, m.kdaValue, m.kdaConv, m.kdaRank⟩

/-- The MLA dimensions (as `KimiLinear.Dims.mla`). -/
def mla (m : ModelDims) : KimiK3.GatedMLA.Dims :=
  ⟨m.hidden, m.mlaHeads, m.queryLatent, m.kvLatent, m.contentKey, m.sharedKey, m.mlaValue⟩

end ModelDims

/-- The sequence mixer of a decoder layer, array-backed (as `KimiLinear.Mixer`). -/
inductive Mixer (α : Type) (m : ModelDims) where
  /-- A KDA layer with the L2-norm ε. -/
  | kda (params : LayerParams α m.kda m.gateRank) (l2Eps : α)
  /-- An MLA layer with the low-rank query and its score scale. -/
  | mla (params : GatedMLA.Params α m.mla) (scoreScale : α)
  /-- An MLA layer with the direct query (`queryLatent = hidden`) and its score scale. -/
  | mlaDirect (params : GatedMLA.Params α m.mla) (hq : m.queryLatent = m.hidden) (scoreScale : α)

/-- The causal state of a mixer, array-backed (as `KimiLinear.MixerState`). -/
inductive MixerState (α : Type) (m : ModelDims) where
  /-- The state of a KDA layer. -/
  | kda (state : KDA.LayerState α m.kda)
  /-- The cache of an MLA layer. -/
  | mla (cache : GatedMLA.Cache α m.mla)

/-- The MLP of a decoder layer, array-backed (as `KimiLinear.Channel`). -/
inductive Channel (α : Type) (m : ModelDims) where
  /-- The dense SwiGLU MLP. -/
  | dense (expert : Expert α m.hidden m.denseHidden m.hidden)
  /-- The MoE block with `active ≤ numRouted`. -/
  | moe (block : MoE α m.hidden m.expertHidden m.sharedHidden m.numRouted) (hActive : m.active ≤ m.numRouted)

/-- A Kimi Linear decoder layer, array-backed (as `KimiLinear.DecoderLayer`). -/
structure DecoderLayer (α : Type) (m : ModelDims) where
  /-- The sequence mixer. -/
  mixer : Mixer α m
  /-- The MLP. -/
  channel : Channel α m
  /-- Gain of the mixer's pre-norm. -/
  inputNormScale : Arr α [m.hidden]
  /-- Gain of the MLP's pre-norm. -/
  postNormScale : Arr α [m.hidden]
  /-- The ε of both pre-norms. -/
  normEps : α

/-- The Kimi Linear language model, array-backed (as `KimiLinear.Model`). -/
structure Model (α : Type) (m : ModelDims) where
  /-- Token embedding table `[vocab, d]`. -/
  embedding : Arr α [m.vocab, m.hidden]
  /-- The decoder layers, first layer first. -/
  layers : List (DecoderLayer α m)
  /-- Gain of the final RMSNorm. -/
  finalNormScale : Arr α [m.hidden]
  /-- The vocabulary head `[d, vocab]`. -/
  head : Arr α [m.hidden, m.vocab]
  /-- The ε of the final RMSNorm. -/
  normEps : α

section Decoder

variable [Scalar α] {m : ModelDims}

/-- The state before the first token (as `KimiLinear.Mixer.initialState`). -/
def Mixer.initialState : Mixer α m → MixerState α m
  | .kda .. => .kda (KDA.LayerState.zero m.kda)
  | .mla .. => .mla []
  | .mlaDirect .. => .mla []

/-- **One token of a mixer** (k3-spec §7, as `KimiLinear.Mixer.step`). -/
def Mixer.step (mixer : Mixer α m) (s : MixerState α m) (x : Arr α [m.hidden]) :
    MixerState α m × Arr α [m.hidden] :=
  match mixer with
  | .kda p l2Eps =>
    let st := match s with
      | .kda st => st
      | .mla _ => KDA.LayerState.zero m.kda
    let r := layerStep p l2Eps st x
    (.kda r.1, r.2)
  | .mla p scoreScale =>
    let cache := match s with
      | .kda _ => []
      | .mla cache => cache
    let r := MLA.step p scoreScale cache x
    (.mla r.1, r.2)
  | .mlaDirect p _ scoreScale =>
    let cache := match s with
      | .kda _ => []
      | .mla cache => cache
    let r := MLA.stepDirect p scoreScale cache x
    (.mla r.1, r.2)

/-- The MLP's output (as `KimiLinear.Channel.forward`). -/
def Channel.forward (channel : Channel α m) (x : Arr α [m.hidden]) : Arr α [m.hidden] :=
  match channel with
  | .dense expert => swigluForward expert x
  | .moe block _ => block.forwardAuto m.active x

namespace DecoderLayer

/-- The residual stream after the mixer, `x + Mixer(RMSNorm_ε(x) ⊙ γ_in)`, and the mixer's new
state (as `KimiLinear.DecoderLayer.mix`). -/
def mix (layer : DecoderLayer α m) (s : MixerState α m) (x : Arr α [m.hidden]) :
    MixerState α m × Arr α [m.hidden] :=
  let r := layer.mixer.step s (Arr.rmsNorm layer.normEps x layer.inputNormScale)
  (r.1, Arr.vec m.hidden (fun i => x.get i + r.2.get i))

/-- The residual stream after the MLP, `h + MLP(RMSNorm_ε(h) ⊙ γ_post)` (as
`KimiLinear.DecoderLayer.mlp`). -/
def mlp (layer : DecoderLayer α m) (h : Arr α [m.hidden]) : Arr α [m.hidden] :=
  let c := layer.channel.forward (Arr.rmsNorm layer.normEps h layer.postNormScale)
  Arr.vec m.hidden (fun i => h.get i + c.get i)

/-- **One token of the decoder layer** (k3-spec §7, as `KimiLinear.DecoderLayer.step`). -/
def step (layer : DecoderLayer α m) (s : MixerState α m) (x : Arr α [m.hidden]) :
    MixerState α m × Arr α [m.hidden] :=
  let r := layer.mix s x
  (r.1, layer.mlp r.2)

/-- The decoder layer over a sequence from its mixer's initial state (as
`KimiLinear.DecoderLayer.forward`). -/
def forward (layer : DecoderLayer α m) (xs : List (Arr α [m.hidden])) : List (Arr α [m.hidden]) :=
  (scan layer.step layer.mixer.initialState xs).2

end DecoderLayer

namespace Model

/-- The model state: one mixer state per layer. -/
abbrev State (α : Type) (m : ModelDims) := List (MixerState α m)

/-- The state before the first token (as `KimiLinear.Model.initialState`). -/
def initialState (model : Model α m) : State α m :=
  listMap (fun layer => layer.mixer.initialState) model.layers

/-- **The final head** `(RMSNorm_ε'(x) ⊙ γ_final) · head` (as `KimiLinear.Model.readout`). -/
def readout (model : Model α m) (x : Arr α [m.hidden]) : Arr α [m.vocab] :=
  Arr.vecMatMul (Arr.rmsNorm model.normEps x model.finalNormScale) model.head

/-- One token's residual stream through every layer (as `KimiLinear.Model.layersToken`). -/
def layersToken (model : Model α m) (states : State α m) (x : Arr α [m.hidden]) :
    Arr α [m.hidden] × State α m :=
  scanLayers (fun layer s x => layer.step s x) model.layers states x

/-- **One causal step on a token id** (k3-spec §7, as `KimiLinear.Model.step`). -/
def step (model : Model α m) (states : State α m) (token : Nat) : State α m × Arr α [m.vocab] :=
  let r := model.layersToken states (Arr.row model.embedding token)
  (r.2, model.readout r.1)

/-- **Token-by-token evaluation** from state `s` (as `KimiLinear.Model.run`). -/
def run (model : Model α m) (s : State α m) (tokens : List Nat) : State α m × List (Arr α [m.vocab]) :=
  scan model.step s tokens

/-- **The logits of a prompt** from the initial state (as `KimiLinear.Model.logits`). -/
def logits (model : Model α m) (tokens : List Nat) : List (Arr α [m.vocab]) :=
  (model.run model.initialState tokens).2

end Model

end Decoder

/-! ### Entry points at `Float` -/

/-- `KimiLinear.layerForward` at `Float`. -/
def layerForwardF (d : KimiK3.KDA.LayerDims) (r : Nat) (p : LayerParams Float d r) (l2Eps : Float)
    (xs : List (Arr Float [d.modelDim])) : List (Arr Float [d.modelDim]) :=
  layerForward p l2Eps xs

/-- `KimiLinear.MLA.forward` at `Float`. -/
def MLA.forwardF (d : KimiK3.GatedMLA.Dims) (p : GatedMLA.Params Float d) (scoreScale : Float)
    (xs : List (Arr Float [d.modelDim])) : List (Arr Float [d.modelDim]) :=
  MLA.forward p scoreScale xs

/-- `KimiLinear.MLA.forwardDirect` at `Float`. -/
def MLA.forwardDirectF (d : KimiK3.GatedMLA.Dims) (p : GatedMLA.Params Float d) (scoreScale : Float)
    (xs : List (Arr Float [d.modelDim])) : List (Arr Float [d.modelDim]) :=
  MLA.forwardDirect p scoreScale xs

/-- `KimiLinear.MoE.forwardAuto` at `Float`. -/
def MoE.forwardAutoF (d h hs E k : Nat) (moe : MoE Float d h hs E) (x : Arr Float [d]) : Arr Float [d] :=
  moe.forwardAuto k x

/-- `KimiLinear.MoE.route` at `Float`. -/
def MoE.routeF (d h hs E k : Nat) (moe : MoE Float d h hs E) (x : Arr Float [d]) : Array Nat :=
  moe.route k x

/-- `KimiLinear.DecoderLayer.forward` at `Float`. -/
def DecoderLayer.forwardF (m : ModelDims) (layer : DecoderLayer Float m) (xs : List (Arr Float [m.hidden])) :
    List (Arr Float [m.hidden]) :=
  layer.forward xs

/-- `KimiLinear.Model.logits` at `Float`. -/
def Model.logitsF (m : ModelDims) (model : Model Float m) (tokens : List Nat) : List (Arr Float [m.vocab]) :=
  model.logits tokens

end KimiLinear

/-! ## Entry points at `Float`

Specialized at `Float` and taking every size they mention, so that code outside this module
(tests, generated evaluation files) can call them (see `README.md`). -/

/-- `Arr.ofArrayAt` at `Float`. -/
def Arr.ofArrayAtF (a : Array Float) (off : Nat) (s : Shape) : Arr Float s := Arr.ofArrayAt a off s

/-- `Expert.forward` at `Float`. -/
def Expert.forwardF (d h o : Nat) (e : Expert Float d h o) (gateCap upCap : Float) (x : Arr Float [d]) :
    Arr Float [o] :=
  e.forward gateCap upCap x

/-- `StableLatentMoE.forwardAuto` at `Float`. -/
def StableLatentMoE.forwardAutoF (d l hs hr S E k : Nat) (moe : StableLatentMoE Float d l hs hr S E)
    (gateCap upCap : Float) (x : Arr Float [d]) : Arr Float [d] :=
  moe.forwardAuto k gateCap upCap x

/-- `StableLatentMoE.route` at `Float`. -/
def StableLatentMoE.routeF (d l hs hr S E k : Nat) (moe : StableLatentMoE Float d l hs hr S E)
    (x : Arr Float [d]) : Array Nat :=
  moe.route k x

/-- `KDA.run` at `Float`. -/
def KDA.runF (K V : Nat) (S : Arr Float [K, V]) (xs : List (KDA.Input Float K V)) :
    Arr Float [K, V] × List (Arr Float [V]) :=
  KDA.run S xs

/-- `KDA.layerForward` at `Float`. -/
def KDA.layerForwardF (d : KimiK3.KDA.LayerDims) (p : KDA.LayerParams Float d) (logFloor l2Eps : Float)
    (xs : List (Arr Float [d.modelDim])) : List (Arr Float [d.modelDim]) :=
  KDA.layerForward p logFloor l2Eps xs

/-- `GatedMLA.forward` at `Float`. -/
def GatedMLA.forwardF (d : KimiK3.GatedMLA.Dims) (p : GatedMLA.Params Float d) (scoreScale : Float)
    (xs : List (Arr Float [d.modelDim])) : List (Arr Float [d.modelDim]) :=
  GatedMLA.forward p scoreScale xs

/-- `BlockState.retrieve` at `Float`. -/
def BlockState.retrieveF (d : Nat) (eps : Float) (query : Arr Float [d]) (s : BlockState Float d) :
    Arr Float [d] :=
  s.retrieve eps query

/-- `BlockState.retrieveAfterSequence` at `Float`. -/
def BlockState.retrieveAfterSequenceF (d : Nat) (eps : Float) (query : Arr Float [d]) (s : BlockState Float d)
    (seqOut : Arr Float [d]) : Arr Float [d] :=
  s.retrieveAfterSequence eps query seqOut

/-- `BlockState.initial` at `Float`. -/
def BlockState.initialF (d : Nat) (embedding : Arr Float [d]) : BlockState Float d := BlockState.initial embedding

/-- `BlockState.finishLayer` at `Float`. -/
def BlockState.finishLayerF (d blockSize : Nat) (s : BlockState Float d) (seqOut chanOut : Arr Float [d]) :
    BlockState Float d :=
  s.finishLayer blockSize seqOut chanOut

/-- `LanguageModel.run` at `Float`. -/
def LanguageModel.runF (m : ModelDims) (model : LanguageModel Float m) (s : LanguageModel.State Float m)
    (tokens : List Nat) : LanguageModel.State Float m × List (Arr Float [m.vocab]) :=
  model.run s tokens

/-! ## Vision (MoonViT-V2, k3-spec §7)

Array-backed versions of the vision reference (`Vision/Block.lean`, `Vision/Merge.lean`): the
2-D RoPE tables, one block, the encoder (the blocks in order, then the final norm), and
merge-and-project (temporal mean, space-to-depth, the projector). Every intermediate that the
function-backed reference recomputes at each coordinate (the normalized rows, the rotated queries
and keys, the scores, each softmax row, the values, each head's mix, the MLP's hidden rows, the
frame means, the merged tokens, the projector's hidden rows and its rows before the post-norm) is
stored once; every entry is the reference's expression in the reference's order
(`Exec/Vision.lean`). The scalar helpers are own copies of `Vision.geluTanh`, `geluErf`,
`ropeFrequency`, `ropeAngle` (class methods of `TrigScalar` only). -/

namespace Vision

section Vision

variable [TrigScalar α]

/-- The tanh GELU of the encoder MLP (k3-spec §7, as `Vision.geluTanh`). -/
def geluTanh (x : α) : α :=
  x * (1 + Scalar.tanh (Scalar.sqrt (2 / TrigScalar.pi) * (x + 44715 / 1000000 * (x * x * x)))) / 2

/-- The rotary frequency `θ^(−f/R)` (k3-spec §7, as `Vision.ropeFrequency`). -/
def ropeFrequency (theta : α) (R f : Nat) : α :=
  Scalar.exp (-((f : α) / (R : α)) * Scalar.log theta)

/-- The rotary angle of pair `p` at grid position `(row, col)` (k3-spec §7, as `Vision.ropeAngle`). -/
def ropeAngle (theta : α) (R row col p : Nat) : α :=
  if p < R then (row : α) * ropeFrequency theta R p else (col : α) * ropeFrequency theta R (p - R)

/-- The cosines of the rotary angles of a clip's `t·h·w` tokens (k3-spec §7, as `Vision.ropeCos`). -/
def ropeCos (theta : α) (R t h w : Nat) : Arr α [t * (h * w), 2 * R] :=
  Arr.mat _ _ (fun l p => TrigScalar.cos (ropeAngle theta R (l % (h * w) / w) (l % (h * w) % w) p))

/-- The sines of the rotary angles of a clip's `t·h·w` tokens (k3-spec §7, as `Vision.ropeSin`). -/
def ropeSin (theta : α) (R t h w : Nat) : Arr α [t * (h * w), 2 * R] :=
  Arr.mat _ _ (fun l p => TrigScalar.sin (ropeAngle theta R (l % (h * w) / w) (l % (h * w) % w) p))

/-- The score scale `1/√(4R)` of heads of width `4R` (k3-spec §7, as in `Vision.clipFeatures`). -/
def scoreScale (R : Nat) : α := 1 / Scalar.sqrt ((4 * R : Nat) : α)

/-- **One encoder block's parameters, array-backed** (k3-spec §7), in the checkpoint's layouts:
`query`, `key` `[in, head, channel]` with channel `2p + j` (pair `p`, component `j`), `value`
`[in, head, out]`, `output` `[head, in, out]`, `fc0` `[D, M]`, `fc1` `[M, D]` (`Block.toSpec` in
`Exec/Vision.lean` gives the reference's per-head views). -/
structure Block (α : Type) (D A R V M : Nat) where
  /-- `norm0.weight`. -/
  norm0 : Arr α [D]
  /-- The query rows of `wqkv.weight`, `[D, A, 4R]`. -/
  query : Arr α [D, A, 4 * R]
  /-- The key rows of `wqkv.weight`, `[D, A, 4R]`. -/
  key : Arr α [D, A, 4 * R]
  /-- The value rows of `wqkv.weight`, `[D, A, V]`. -/
  value : Arr α [D, A, V]
  /-- `wo.weight`, per head, `[A, V, D]`. -/
  output : Arr α [A, V, D]
  /-- `norm1.weight`. -/
  norm1 : Arr α [D]
  /-- `mlp.fc0.weight`ᵀ `[D, M]`. -/
  fc0 : Arr α [D, M]
  /-- `mlp.fc1.weight`ᵀ `[M, D]`. -/
  fc1 : Arr α [M, D]

/-- RMSNorm of every row with gain `g` (k3-spec §2.0, as `Vision.Block.normRows`): each row's
root mean square computed once. -/
def normRows {L D : Nat} (eps : α) (x : Arr α [L, D]) (g : Arr α [D]) : Arr α [L, D] :=
  let r := Arr.vec L (fun l =>
    Scalar.sqrt (sumTo D (fun k => x.get (l * D + k) * x.get (l * D + k)) / (D : α) + eps))
  Arr.mat L D (fun l j => x.get (l * D + j) / r.get l * g.get j)

/-- The rotated query (or key) channels of every head and token, `[A, L, 4R]` at channel `2p + j`
(k3-spec §7, as `Vision.rotatePairs` of `Block.projectPairs`): the projections computed once. -/
def rotated {L D A R : Nat} (cos sin : Arr α [L, 2 * R]) (h : Arr α [L, D]) (w : Arr α [D, A, 4 * R]) :
    Arr α [A, L, 4 * R] :=
  let pr := Arr.ten3 A L (4 * R) (fun a l c =>
    sumTo D (fun d => h.get (l * D + d) * w.get ((d * A + a) * (4 * R) + c)))
  Arr.ten3 A L (4 * R) (fun a l c =>
    if c % 2 = 0 then
      pr.get ((a * L + l) * (4 * R) + 2 * (c / 2)) * cos.get (l * (2 * R) + c / 2) -
        pr.get ((a * L + l) * (4 * R) + (2 * (c / 2) + 1)) * sin.get (l * (2 * R) + c / 2)
    else
      pr.get ((a * L + l) * (4 * R) + 2 * (c / 2)) * sin.get (l * (2 * R) + c / 2) +
        pr.get ((a * L + l) * (4 * R) + (2 * (c / 2) + 1)) * cos.get (l * (2 * R) + c / 2))

/-- The attention scores `c·⟨q'[l], k'[m]⟩` of every head, `[A, L, L]` (k3-spec §7, as
`Block.scores`): component 0 of every pair, then component 1. -/
def scores {L A R : Nat} (scale : α) (q k : Arr α [A, L, 4 * R]) : Arr α [A, L, L] :=
  Arr.ten3 A L L (fun a l m => scale *
    (sumTo (2 * R) (fun p => q.get ((a * L + l) * (4 * R) + 2 * p) * k.get ((a * L + m) * (4 * R) + 2 * p)) +
      sumTo (2 * R) (fun p =>
        q.get ((a * L + l) * (4 * R) + (2 * p + 1)) * k.get ((a * L + m) * (4 * R) + (2 * p + 1)))))

namespace Block

variable {D A R V M : Nat}

/-- **The attention of a block** over one clip (k3-spec §7, as `Vision.Block.attention`): the
rotated queries and keys, the scores, each softmax row, the values and each head's mix are
computed once. -/
def attention {L : Nat} (b : Block α D A R V M) (scale : α) (cos sin : Arr α [L, 2 * R])
    (h : Arr α [L, D]) : Arr α [L, D] :=
  let s := scores scale (rotated cos sin h b.query) (rotated cos sin h b.key)
  let w := arrayOfFn (A * L) (fun r => Arr.softmax (Arr.block [L] s (r * L)))
  let v := Arr.ten3 A L V (fun a m c => sumTo D (fun d => h.get (m * D + d) * b.value.get ((d * A + a) * V + c)))
  let o := Arr.ten3 A L V (fun a l c => sumTo L (fun m =>
    (arrayGetD w (a * L + l) (zeros L)).get m * v.get ((a * L + m) * V + c)))
  Arr.mat L D (fun l e => sumTo A (fun a => sumTo V (fun c =>
    o.get ((a * L + l) * V + c) * b.output.get ((a * V + c) * D + e))))

/-- The MLP `fc1(GELU_tanh(fc0 h))` of every row (k3-spec §7, as `Vision.Block.mlp`): the hidden
rows computed once. -/
def mlp {L : Nat} (b : Block α D A R V M) (h : Arr α [L, D]) : Arr α [L, D] :=
  let u := Arr.mat L M (fun l k => geluTanh (sumTo D (fun d => h.get (l * D + d) * b.fc0.get (d * M + k))))
  Arr.mat L D (fun l e => sumTo M (fun k => u.get (l * M + k) * b.fc1.get (k * D + e)))

/-- **One MoonViT-V2 block** (k3-spec §7, as `Vision.Block.forward`): pre-norm residual
attention, then pre-norm residual MLP. -/
def forward {L : Nat} (b : Block α D A R V M) (eps scale : α) (cos sin : Arr α [L, 2 * R])
    (x : Arr α [L, D]) : Arr α [L, D] :=
  let att := b.attention scale cos sin (normRows eps x b.norm0)
  let x₁ := Arr.mat L D (fun l d => x.get (l * D + d) + att.get (l * D + d))
  let m := b.mlp (normRows eps x₁ b.norm1)
  Arr.mat L D (fun l d => x₁.get (l * D + d) + m.get (l * D + d))

end Block

/-- The blocks in order (k3-spec §7, as `ModelList.foldl` of `Block.forward`). -/
def foldBlocks {D A R V M L : Nat} (eps scale : α) (cos sin : Arr α [L, 2 * R]) :
    List (Block α D A R V M) → Arr α [L, D] → Arr α [L, D]
  | [], x => x
  | b :: bs, x => foldBlocks eps scale cos sin bs (b.forward eps scale cos sin x)

/-- **The encoder** (k3-spec §7, as `Vision.encode`): the blocks in order, then the final RMSNorm. -/
def encode {D A R V M L : Nat} (blocks : List (Block α D A R V M)) (finalNorm : Arr α [D])
    (eps scale : α) (cos sin : Arr α [L, 2 * R]) (x : Arr α [L, D]) : Arr α [L, D] :=
  normRows eps (foldBlocks eps scale cos sin blocks x) finalNorm

/-- The erf GELU of the projector (k3-spec §7, as `Vision.geluErf`). -/
def geluErf (x : α) : α :=
  x * (1 + TrigScalar.erf (x * Scalar.sqrt (1 / 2))) / 2

/-- **The temporal mean** of a clip's `t·h·w` encoder outputs (k3-spec §2.9, §7, as
`Vision.temporalMean`): `out[r, c, d] = (Σ_f x[f·h·w + r·w + c, d]) / t`. -/
def temporalMean {t h w D : Nat} (x : Arr α [t * (h * w), D]) : Arr α [h, w, D] :=
  Arr.ten3 h w D (fun r c d => sumTo t (fun f => x.get ((f * (h * w) + (r * w + c)) * D + d)) / (t : α))

/-- **The space-to-depth merge** of an `[h'·mH, w'·mW, D]` grid into `[h'·w', mH·(mW·D)]`
(k3-spec §2.9, §7, as `Vision.spaceToDepth`): merged token `m`, channel `n` reads pixel
`(m / w' · mH + n / (mW·D), m mod w' · mW + (n / D) mod mW)`, channel `n mod D`; so pixel
`(a·mH + dh, b·mW + dw)` lands at channel `(dh·mW + dw)·D + c`. -/
def spaceToDepth {h' w' mH mW D : Nat} (x : Arr α [h' * mH, w' * mW, D]) : Arr α [h' * w', mH * (mW * D)] :=
  Arr.mat _ _ (fun m n =>
    x.get (((m / w' * mH + n / (mW * D)) * (w' * mW) + (m % w' * mW + n / D % mW)) * D + n % D))

/-- **The projector's parameters, array-backed** (checkpoint `mm_projector.`, k3-spec §7):
`proj.0.weight`ᵀ `[E, E]`, `proj.2.weight`ᵀ `[E, T]`, `post_norm.weight [T]`. -/
structure Projector (α : Type) (E T : Nat) where
  /-- `proj.0.weight`ᵀ. -/
  first : Arr α [E, E]
  /-- `proj.2.weight`ᵀ. -/
  second : Arr α [E, T]
  /-- `post_norm.weight`. -/
  norm : Arr α [T]

/-- **The projector on merged tokens** `[N, E] → [N, T]` (k3-spec §7, as
`Vision.Projector.forward`): `RMSNorm(GELU_erf(x W₁) W₂) ⊙ g`; the hidden rows and the rows
before the norm are computed once. -/
def Projector.forward {E T N : Nat} (p : Projector α E T) (eps : α) (x : Arr α [N, E]) : Arr α [N, T] :=
  let u := Arr.mat N E (fun n k => geluErf (sumTo E (fun i => x.get (n * E + i) * p.first.get (i * E + k))))
  normRows eps (Arr.mat N T (fun n o => sumTo E (fun k => u.get (n * E + k) * p.second.get (k * T + o)))) p.norm

/-- **Merge and project one clip** (k3-spec §2.9, §7, as `Vision.mergeProject`): temporal mean
over the `t` frames, `mH × mW` space-to-depth, projector; `h'·w'` rows of the text width. -/
def mergeProject {t h' w' mH mW D T : Nat} (p : Projector α (mH * (mW * D)) T) (eps : α)
    (y : Arr α [t * ((h' * mH) * (w' * mW)), D]) : Arr α [h' * w', T] :=
  p.forward eps (spaceToDepth (temporalMean y))

end Vision

/-- **Multimodal prefill** (k3-spec §2.5, report §2.4; as `Vision.multimodalPrefill`): the
prompt's ids with each placeholder `ph` replaced by the next row of `visual` (reading order, row
`0` first), every other id by its embedding row, run through the language model token by token
from its initial state; the final state and the logits of every position. -/
def multimodalPrefill [Scalar α] {m : ModelDims} {n : Nat} (model : LanguageModel α m)
    (visual : Arr α [n, m.hidden]) (ph : Nat) (tokens : List Nat) :
    LanguageModel.State α m × List (Arr α [m.vocab]) :=
  model.runEmbedded model.initialState (model.spliceRows visual ph tokens 0)

end Vision

/-! ### Vision entry points at `Float` -/

/-- `Vision.Block.forward` at `Float` on one clip of `t` frames of `h × w` patches: the RoPE
tables at base `theta` and the score scale `1/√(4R)` as `Vision.clipFeatures` builds them. -/
def Vision.Block.forwardClipF (D A R V M t h w : Nat) (b : Vision.Block Float D A R V M) (eps theta : Float)
    (x : Arr Float [t * (h * w), D]) : Arr Float [t * (h * w), D] :=
  b.forward eps (Vision.scoreScale R) (Vision.ropeCos theta R t h w) (Vision.ropeSin theta R t h w) x

/-- `Vision.encode` at `Float` on one clip (tables and scale as in `Block.forwardClipF`). -/
def Vision.encodeClipF (D A R V M t h w : Nat) (blocks : List (Vision.Block Float D A R V M))
    (finalNorm : Arr Float [D]) (eps theta : Float) (x : Arr Float [t * (h * w), D]) :
    Arr Float [t * (h * w), D] :=
  Vision.encode blocks finalNorm eps (Vision.scoreScale R) (Vision.ropeCos theta R t h w)
    (Vision.ropeSin theta R t h w) x

/-- `Vision.mergeProject` at `Float` on one clip of `t` frames of `(h'·mH) × (w'·mW)` patches. -/
def Vision.mergeProjectF (t h' w' mH mW D T : Nat) (p : Vision.Projector Float (mH * (mW * D)) T) (eps : Float)
    (y : Arr Float [t * ((h' * mH) * (w' * mW)), D]) : Arr Float [h' * w', T] :=
  Vision.mergeProject p eps y

/-- `Vision.multimodalPrefill` at `Float`: `n` visual rows spliced into the prompt `tokens` at the
placeholder id `ph`, then the language model from its initial state (k3-spec §2.5). -/
def Vision.multimodalPrefillF (m : ModelDims) (n : Nat) (model : LanguageModel Float m)
    (visual : Arr Float [n, m.hidden]) (ph : Nat) (tokens : List Nat) :
    LanguageModel.State Float m × List (Arr Float [m.vocab]) :=
  Vision.multimodalPrefill model visual ph tokens

end Exec

end KimiK3
