module

public import KimiK3.Core.Scalar
public import KimiK3.Core.Trig

/-!
# Executable kernel: tensors, sums, operations, typed graphs

Every executable definition of the core lives in this one module (why: `Core/README.md`, "Toolchain
constraints"). Theorems about these definitions are split by concept into the other files of this
folder (see `README.md`).

Contents:
* `Shape`, `Tensor α s` (`[]` ↦ `α`, `n :: s` ↦ `Fin n → Tensor α s`), literals, memoization;
* `finSum`, the finite sum over `Fin n`;
* elementwise maps and zips, broadcasting, batch lifting (`mapSuffix`, `zipSuffix`);
* reductions, products in the row-vector `[in, out]` convention, layout operations;
* softmax, RMSNorm, L2 normalization;
* the typed graph language: `PrimOp`, `Term`, `Args`, `Env`, `Model` and their evaluation.
-/

@[expose] public section

namespace KimiK3

/-! ## Shapes and tensors -/

/-- A tensor shape: the list of axis lengths, outermost first. -/
abbrev Shape := List Nat

/-- The number of entries of a tensor of shape `s` (the product of its axis lengths). -/
def Shape.numel : Shape → Nat
  | [] => 1
  | n :: s => n * Shape.numel s

/-- Shape concatenation `Shape.append s t` (own recursion: `List.append` does not compile offline, and
graph terms store their shapes at run time). Equal to `s ++ t` (`Shape.append_eq`). -/
def Shape.append : Shape → Shape → Shape
  | [], t => t
  | n :: s, t => n :: Shape.append s t

/-- A tensor with entries in `α` and shape `s`: a scalar for `[]`, and a function from
`Fin n` to tensors of shape `s` for `n :: s`. -/
abbrev Tensor (α : Type) : Shape → Type
  | [] => α
  | n :: s => Fin n → Tensor α s

/-- Nested lists used to write tensor literals: `α` for `[]`, lists of `ListRep α s` for
`n :: s`. -/
abbrev ListRep (α : Type) : Shape → Type
  | [] => α
  | _ :: s => List (ListRep α s)

/-- The `i`-th element of a list, or `d` past its end (own recursion, so it compiles). -/
def listGetD {β : Type} (d : β) : List β → Nat → β
  | [], _ => d
  | x :: _, 0 => x
  | _ :: xs, i + 1 => listGetD d xs i

/-- The list `[f 0, …, f (n-1)]` (own recursion, so it compiles). -/
def finList {β : Type} : (n : Nat) → (Fin n → β) → List β
  | 0, _ => []
  | n + 1, f => f ⟨0, by omega⟩ :: finList n (fun i => f ⟨i.val + 1, by omega⟩)

namespace Tensor

variable {α β γ : Type}

/-- The tensor of shape `s` with every entry equal to `x`. -/
def fill (x : α) : (s : Shape) → Tensor α s
  | [] => x
  | _ :: s => fun _ => fill x s

/-- The nested-list form of an empty tensor slice (used as the default of `ofListRep`). -/
def ListRep.default (d : α) : (s : Shape) → ListRep α s
  | [] => d
  | _ :: _ => []

/-- A tensor from nested lists; entries missing from a short list are `d`. -/
def ofListRep (d : α) : (s : Shape) → ListRep α s → Tensor α s
  | [], x => x
  | _ :: s, l => fun i => ofListRep d s (listGetD (ListRep.default d s) l i.val)

/-- The entries of a tensor as nested lists. -/
def toListRep : (s : Shape) → Tensor α s → ListRep α s
  | [], x => x
  | n :: s, t => finList n (fun i => toListRep s (t i))

end Tensor

/-! ## Memoization -/

section Memo

variable {β : Type}

/-- The array `#[f 0, …, f (k-1)]`. -/
def buildArray {n : Nat} (f : Fin n → β) : (k : Nat) → k ≤ n → Array β
  | 0, _ => #[]
  | k + 1, h => (buildArray f k (by omega)).push (f ⟨k, h⟩)

/-- Read `f i` from the array `a` (falling back to `f i` past its end). Not inlined, so that a
caller's array argument is computed once, before the closure is built. -/
@[noinline] def readArray {n : Nat} (a : Array β) (f : Fin n → β) : Fin n → β :=
  fun i => if h : i.val < a.size then a[i.val] else f i

/-- `f` with its values computed once and stored in an array. -/
def memoFn {n : Nat} (f : Fin n → β) : Fin n → β :=
  readArray (buildArray f n (Nat.le_refl n)) f

/-- The tensor with every level stored in arrays, for fast repeated access (equal to the
tensor: `Tensor.memo_eq`). -/
def Tensor.memo {α : Type} : (s : Shape) → Tensor α s → Tensor α s
  | [], x => x
  | _ :: s, t => memoFn (fun i => Tensor.memo s (t i))

end Memo

/-! ## Finite sums -/

/-- The sum `f 0 + … + f (n-1)` (`0` for `n = 0`), last term added last. -/
def finSum {α : Type} [Scalar α] : (n : Nat) → (Fin n → α) → α
  | 0, _ => 0
  | n + 1, f => finSum n (fun i => f ⟨i.val, by omega⟩) + f ⟨n, by omega⟩

/-- The largest of `acc, f 0, …, f (n-1)` (folding `max` from the last index down). -/
def finMaxFrom {α : Type} [Scalar α] (acc : α) : (n : Nat) → (Fin n → α) → α
  | 0, _ => acc
  | n + 1, f => finMaxFrom (max acc (f ⟨n, by omega⟩)) n (fun i => f ⟨i.val, by omega⟩)

namespace Tensor

variable {α β γ : Type}

/-! ## Elementwise operations and broadcasting -/

/-- Apply `f` to every entry. -/
def map (f : α → β) : (s : Shape) → Tensor α s → Tensor β s
  | [], x => f x
  | _ :: s, t => fun i => map f s (t i)

/-- Combine two tensors of the same shape entry by entry. -/
def zipWith (f : α → β → γ) : (s : Shape) → Tensor α s → Tensor β s → Tensor γ s
  | [], x, y => f x y
  | _ :: s, t, u => fun i => zipWith f s (t i) (u i)

/-- Repeat a tensor `n` times along a new leading axis. -/
def broadcast (n : Nat) {s : Shape} (t : Tensor α s) : Tensor α (n :: s) := fun _ => t

/-- Lift an operation on the trailing axes `t` over the leading (batch) axes `s`. -/
def mapSuffix {t u : Shape} (f : Tensor α t → Tensor β u) :
    (s : Shape) → Tensor α (Shape.append s t) → Tensor β (Shape.append s u)
  | [], x => f x
  | _ :: s, x => fun i => mapSuffix f s (x i)

/-- Lift a two-argument operation on the trailing axes over the leading axes `s`. -/
def zipSuffix {t u v : Shape} (f : Tensor α t → Tensor β u → Tensor γ v) :
    (s : Shape) → Tensor α (Shape.append s t) → Tensor β (Shape.append s u) → Tensor γ (Shape.append s v)
  | [], x, y => f x y
  | _ :: s, x, y => fun i => zipSuffix f s (x i) (y i)

section Arith

variable [Scalar α]

/-- Entrywise sum. -/
def add (s : Shape) : Tensor α s → Tensor α s → Tensor α s := zipWith (· + ·) s

/-- Entrywise difference. -/
def sub (s : Shape) : Tensor α s → Tensor α s → Tensor α s := zipWith (· - ·) s

/-- Entrywise (Hadamard) product. -/
def mul (s : Shape) : Tensor α s → Tensor α s → Tensor α s := zipWith (· * ·) s

/-- Entrywise quotient. -/
def div (s : Shape) : Tensor α s → Tensor α s → Tensor α s := zipWith (· / ·) s

/-- Entrywise negation. -/
def neg (s : Shape) : Tensor α s → Tensor α s := map (fun x => -x) s

/-- Multiply every entry by `c`. -/
def scale (c : α) (s : Shape) : Tensor α s → Tensor α s := map (fun x => c * x) s

/-! ## Reductions -/

/-- The sum of the entries of a vector. -/
def vecSum {n : Nat} (x : Tensor α [n]) : α := finSum n x

/-- The mean of the entries of a vector, `(Σ x) / n`. -/
def vecMean {n : Nat} (x : Tensor α [n]) : α := finSum n x / (n : α)

/-- The largest entry of a vector (`0` for the empty vector). -/
def vecMax : {n : Nat} → Tensor α [n] → α
  | 0, _ => 0
  | _ + 1, x => finMaxFrom (x 0) _ x

/-- Sum over the last axis: `y[b] = Σ_k x[b, k]`. -/
def sumLast : (s : Shape) → {n : Nat} → Tensor α (Shape.append s [n]) → Tensor α s
  | [], n, x => finSum n x
  | _ :: s, _, x => fun i => sumLast s (x i)

/-- Mean over the last axis: `y[b] = (Σ_k x[b, k]) / n`. -/
def meanLast : (s : Shape) → {n : Nat} → Tensor α (Shape.append s [n]) → Tensor α s
  | [], n, x => finSum n x / (n : α)
  | _ :: s, _, x => fun i => meanLast s (x i)

/-- The entrywise sum of `m` tensors of shape `s`. -/
def sumFin (m : Nat) : (s : Shape) → (Fin m → Tensor α s) → Tensor α s
  | [], f => finSum m f
  | _ :: s, f => fun i => sumFin m s (fun k => f k i)

/-- Sum over the first axis: `y[b] = Σ_k x[k, b]`. -/
def sum0 {n : Nat} (s : Shape) (x : Tensor α (n :: s)) : Tensor α s := sumFin n s x

/-! ## Products (row-vector convention, weights stored `[in, out]`) -/

/-- The dot product `Σ_i x_i y_i`. -/
def dot {n : Nat} (x y : Tensor α [n]) : α := finSum n (fun i => x i * y i)

/-- Row vector times matrix: `y_k = Σ_i x_i W[i, k]` (`W` stored `[in, out]`). -/
def vecMatMul {n m : Nat} (x : Tensor α [n]) (w : Tensor α [n, m]) : Tensor α [m] :=
  fun k => finSum n (fun i => x i * w i k)

/-- Matrix product: `C[r, k] = Σ_i A[r, i] B[i, k]`. -/
def matMul {p n m : Nat} (a : Tensor α [p, n]) (b : Tensor α [n, m]) : Tensor α [p, m] :=
  fun r => vecMatMul (a r) b

/-- Batched matrix product: `C[b, r, k] = Σ_i A[b, r, i] B[b, i, k]`. -/
def batchedMatMul {q p n m : Nat} (a : Tensor α [q, p, n]) (b : Tensor α [q, n, m]) :
    Tensor α [q, p, m] :=
  fun j => matMul (a j) (b j)

/-- Outer product: `M[i, j] = x_i y_j`. -/
def outer {n m : Nat} (x : Tensor α [n]) (y : Tensor α [m]) : Tensor α [n, m] :=
  fun i j => x i * y j

/-! ## Softmax and normalizations (along the last axis) -/

/-- Softmax of a vector, shifted by its maximum `m`:
`y_j = exp (x_j - m) / Σ_k exp (x_k - m)`. -/
def softmaxVec {n : Nat} (x : Tensor α [n]) : Tensor α [n] :=
  softmaxWith x (vecMax x) (finSum n (fun k => Scalar.exp (x k - vecMax x)))
where
  /-- `y_j = exp (x_j - m) / z` for a precomputed shift `m` and normalizer `z` (not inlined,
  so both are computed once per vector). -/
  @[noinline] softmaxWith (x : Tensor α [n]) (m z : α) : Tensor α [n] :=
    fun j => Scalar.exp (x j - m) / z

/-- Softmax along the last axis. -/
def softmaxLast (s : Shape) {n : Nat} (x : Tensor α (Shape.append s [n])) : Tensor α (Shape.append s [n]) :=
  mapSuffix (t := [n]) (u := [n]) softmaxVec s x

/-- RMSNorm of a vector with gain `g`: `y_j = x_j / √(Σ_k x_k² / n + ε) · g_j`. -/
def rmsNormVec (eps : α) {n : Nat} (x g : Tensor α [n]) : Tensor α [n] :=
  rmsWith x g (Scalar.sqrt (finSum n (fun k => x k * x k) / (n : α) + eps))
where
  /-- `y_j = x_j / r · g_j` for a precomputed root mean square `r` (not inlined). -/
  @[noinline] rmsWith (x g : Tensor α [n]) (r : α) : Tensor α [n] := fun j => x j / r * g j

/-- RMSNorm along the last axis, the gain shared by all rows. -/
def rmsNormLast (eps : α) (s : Shape) {n : Nat} (x : Tensor α (Shape.append s [n])) (g : Tensor α [n]) :
    Tensor α (Shape.append s [n]) :=
  mapSuffix (t := [n]) (u := [n]) (fun v => rmsNormVec eps v g) s x

/-- L2 normalization of a vector: `y_j = x_j / √(Σ_k x_k² + ε)`. -/
def l2NormVec (eps : α) {n : Nat} (x : Tensor α [n]) : Tensor α [n] :=
  l2With x (Scalar.sqrt (finSum n (fun k => x k * x k) + eps))
where
  /-- `y_j = x_j / r` for a precomputed norm `r` (not inlined). -/
  @[noinline] l2With (x : Tensor α [n]) (r : α) : Tensor α [n] := fun j => x j / r

/-- L2 normalization along the last axis. -/
def l2NormLast (eps : α) (s : Shape) {n : Nat} (x : Tensor α (Shape.append s [n])) : Tensor α (Shape.append s [n]) :=
  mapSuffix (t := [n]) (u := [n]) (l2NormVec eps) s x

end Arith

/-! ## Layout -/

/-- Swap the first two axes: `u[j, i, …] = t[i, j, …]`. -/
def swapAxes01 {m n : Nat} {s : Shape} (t : Tensor α (m :: n :: s)) : Tensor α (n :: m :: s) :=
  fun j i => t i j

/-- Matrix transpose: `u[j, i] = t[i, j]`. -/
def transpose {m n : Nat} (t : Tensor α [m, n]) : Tensor α [n, m] := swapAxes01 t

/-- A flat index `i * N + j` with `i < n`, `j < N` is below `n * N`. -/
theorem flat_index_lt {n N i j : Nat} (hi : i < n) (hj : j < N) : i * N + j < n * N := by
  have h := Nat.mul_le_mul_right N (show i + 1 ≤ n by omega)
  rw [Nat.succ_mul] at h; omega

/-- The entries of a tensor in row-major order. -/
def toFlat : (s : Shape) → Tensor α s → Fin (Shape.numel s) → α
  | [], x => fun _ => x
  | n :: s, t => fun k =>
    have hk : k.val < Shape.numel s * n := by
      have := k.isLt; simp only [Shape.numel] at this; rw [Nat.mul_comm]; exact this
    have hpos : 0 < Shape.numel s := by
      cases h : Shape.numel s with
      | zero => rw [h] at hk; simp at hk
      | succ _ => omega
    toFlat s (t ⟨k.val / Shape.numel s, Nat.div_lt_of_lt_mul hk⟩)
      ⟨k.val % Shape.numel s, Nat.mod_lt _ hpos⟩

/-- The tensor whose row-major entries are `f 0, f 1, …`. -/
def ofFlat : (s : Shape) → (Fin (Shape.numel s) → α) → Tensor α s
  | [], f => f ⟨0, by simp [Shape.numel]⟩
  | _ :: s, f => fun i => ofFlat s (fun j =>
      f ⟨i.val * Shape.numel s + j.val, by
        simp only [Shape.numel]; exact flat_index_lt i.isLt j.isLt⟩)

/-- The tensor of shape `t` with the row-major entries of `x` (same number of entries). -/
def reshape {s : Shape} (t : Shape) (h : Shape.numel s = Shape.numel t) (x : Tensor α s) :
    Tensor α t :=
  ofFlat t (fun k => toFlat s x ⟨k.val, by rw [h]; exact k.isLt⟩)

/-- Concatenation along the first axis: the first `m` slices come from `x`, the next `n`
from `y`. -/
def concat0 {m n : Nat} {s : Shape} (x : Tensor α (m :: s)) (y : Tensor α (n :: s)) :
    Tensor α ((m + n) :: s) :=
  fun i => if h : i.val < m then x ⟨i.val, h⟩ else y ⟨i.val - m, by have := i.isLt; omega⟩

/-- Concatenation along the last axis (leading axes `s` kept). -/
def concatLast {m n : Nat} (s : Shape) (x : Tensor α (Shape.append s [m])) (y : Tensor α (Shape.append s [n])) :
    Tensor α (Shape.append s [m + n]) :=
  zipSuffix (t := [m]) (u := [n]) (v := [m + n]) (fun a b => concat0 (s := []) a b) s x y

end Tensor

/-! ## Typed graphs -/

/-- Scalar functions applied entrywise by `PrimOp.unary`. -/
inductive UnaryFn where
  | neg | exp | log | tanh | sigmoid | sqrt
  deriving DecidableEq, Repr

/-- Scalar functions applied entrywise by `PrimOp.binary`. -/
inductive BinaryFn where
  | add | sub | mul | div
  deriving DecidableEq, Repr

/-- The meaning of a `UnaryFn`. -/
def UnaryFn.apply {α : Type} [Scalar α] : UnaryFn → α → α
  | .neg, x => -x
  | .exp, x => Scalar.exp x
  | .log, x => Scalar.log x
  | .tanh, x => Scalar.tanh x
  | .sigmoid, x => Scalar.sigmoid x
  | .sqrt, x => Scalar.sqrt x

/-- The meaning of a `BinaryFn`. -/
def BinaryFn.apply {α : Type} [Scalar α] : BinaryFn → α → α → α
  | .add, x, y => x + y
  | .sub, x, y => x - y
  | .mul, x, y => x * y
  | .div, x, y => x / y

/-- Typed primitive operations: `PrimOp α ins out` takes tensors of the shapes `ins` to a
tensor of shape `out`. Operations carry no weights (weights are graph inputs); scalar
attributes such as `ε` have type `α`. -/
inductive PrimOp (α : Type) : List Shape → Shape → Type where
  /-- Entrywise scalar function. -/
  | unary (f : UnaryFn) (s : Shape) : PrimOp α [s] s
  /-- Entrywise error function (k3-spec §7, the projector's erf GELU): the `erf` of the
  `TrigScalar` structure the node carries. `erf` is not a `Scalar` operation (`Core/Trig.lean`),
  so the node holds the richer class itself; `PrimOp.eval` needs only `Scalar α`. -/
  | erf [TrigScalar α] (s : Shape) : PrimOp α [s] s
  /-- Entrywise binary function of two same-shaped tensors. -/
  | binary (f : BinaryFn) (s : Shape) : PrimOp α [s, s] s
  /-- Multiply every entry by the constant `c`. -/
  | scale (c : α) (s : Shape) : PrimOp α [s] s
  /-- Repeat along a new leading axis of length `n`. -/
  | broadcast (n : Nat) (s : Shape) : PrimOp α [s] (n :: s)
  /-- Sum over the last axis. -/
  | sumLast (s : Shape) (n : Nat) : PrimOp α [Shape.append s [n]] s
  /-- Mean over the last axis. -/
  | meanLast (s : Shape) (n : Nat) : PrimOp α [Shape.append s [n]] s
  /-- Row vector times `[in, out]` matrix. -/
  | vecMatMul (n m : Nat) : PrimOp α [[n], [n, m]] [m]
  /-- Matrix product. -/
  | matMul (p n m : Nat) : PrimOp α [[p, n], [n, m]] [p, m]
  /-- Batched matrix product. -/
  | batchedMatMul (q p n m : Nat) : PrimOp α [[q, p, n], [q, n, m]] [q, p, m]
  /-- Outer product of two vectors. -/
  | outer (n m : Nat) : PrimOp α [[n], [m]] [n, m]
  /-- Swap the first two axes. -/
  | swapAxes01 (m n : Nat) (s : Shape) : PrimOp α [m :: n :: s] (n :: m :: s)
  /-- Row-major reshape. -/
  | reshape (s t : Shape) (h : Shape.numel s = Shape.numel t) : PrimOp α [s] t
  /-- Concatenation along the first axis. -/
  | concat0 (m n : Nat) (s : Shape) : PrimOp α [m :: s, n :: s] ((m + n) :: s)
  /-- Concatenation along the last axis. -/
  | concatLast (s : Shape) (m n : Nat) : PrimOp α [Shape.append s [m], Shape.append s [n]] (Shape.append s [m + n])
  /-- Softmax along the last axis. -/
  | softmaxLast (s : Shape) (n : Nat) : PrimOp α [Shape.append s [n]] (Shape.append s [n])
  /-- RMSNorm along the last axis with gain (second argument). -/
  | rmsNormLast (eps : α) (s : Shape) (n : Nat) : PrimOp α [Shape.append s [n], [n]] (Shape.append s [n])
  /-- L2 normalization along the last axis. -/
  | l2NormLast (eps : α) (s : Shape) (n : Nat) : PrimOp α [Shape.append s [n]] (Shape.append s [n])

/-- One tensor for each shape of a list (a heterogeneous list); used for environments and
argument values. -/
inductive Env (α : Type) : List Shape → Type where
  /-- No tensors. -/
  | nil : Env α []
  /-- A tensor of shape `s` in front of an environment. -/
  | cons {s : Shape} {Γ : List Shape} : Tensor α s → Env α Γ → Env α (s :: Γ)

/-- The shape at position `i` of a context, counted from the front (`none` past its end). -/
def Shape.entryAt : List Shape → Nat → Option Shape
  | [], _ => none
  | s :: _, 0 => some s
  | _ :: Γ, i + 1 => entryAt Γ i

/-- A typed position in a context: `Var Γ s` points at an entry of shape `s`, by its index
counted from the front (a de Bruijn index) and a proof that the entry there has shape `s`.
At run time it is the index alone (the proof is erased and a one-field structure is unboxed),
so a variable deep in a large context allocates nothing; a chain of constructors `there (there
…)` would allocate one object per level, which put the paper-dimension decoder graph's ~9 600
parameter variables alone at about 46 M objects (`Graph/README.md`). `Var.here` and `Var.there`
build variables as the constructors did. -/
structure Var (Γ : List Shape) (s : Shape) where
  /-- The position, counted from the front. -/
  idx : Nat
  /-- The entry at `idx` has shape `s`. -/
  valid : Shape.entryAt Γ idx = some s

/-- The first entry. (`@[macro_inline]`, as both builders: compiled code in other modules cannot
call them otherwise, `Core/README.md`, "Toolchain constraints".) -/
@[macro_inline] def Var.here {Γ : List Shape} {s : Shape} : Var (s :: Γ) s := ⟨0, rfl⟩

/-- An entry of the tail. -/
@[macro_inline] def Var.there {Γ : List Shape} {s t : Shape} (v : Var Γ s) : Var (t :: Γ) s := ⟨v.idx + 1, v.valid⟩

/-- No variable points into the empty context. -/
theorem Var.not_nil {s : Shape} (i : Nat) (h : Shape.entryAt [] i = some s) : False := nomatch h

/-- The entry at index 0 of `t :: Γ` has shape `s` only if `t = s`. -/
theorem Var.head_eq {Γ : List Shape} {s t : Shape} (h : Shape.entryAt (t :: Γ) 0 = some s) : t = s :=
  Option.some.inj h

/-- The tensor a variable points at. -/
def Env.get {α : Type} : {Γ : List Shape} → {s : Shape} → Env α Γ → Var Γ s → Tensor α s
  | _, _, .cons x _, ⟨0, h⟩ => Var.head_eq h ▸ x
  | _, _, .cons _ e, ⟨i + 1, h⟩ => e.get ⟨i, h⟩
  | _, _, .nil, ⟨i, h⟩ => (Var.not_nil i h).elim

/-- The first tensor of a nonempty environment. -/
def Env.head {α : Type} {s : Shape} {Γ : List Shape} : Env α (s :: Γ) → Tensor α s
  | .cons x _ => x

/-- All but the first tensor of a nonempty environment. -/
def Env.tail {α : Type} {s : Shape} {Γ : List Shape} : Env α (s :: Γ) → Env α Γ
  | .cons _ e => e

/-- Append two shape lists (own recursion: `List.append` does not compile offline, and
environment constructors store their shape lists at run time). Equal to `++`
(`Shape.appendList_eq`). -/
def Shape.appendList : List Shape → List Shape → List Shape
  | [], Δ => Δ
  | s :: Γ, Δ => s :: Shape.appendList Γ Δ

/-- Concatenate two environments. -/
def Env.append {α : Type} : {Γ Δ : List Shape} → Env α Γ → Env α Δ → Env α (Shape.appendList Γ Δ)
  | _, _, .nil, e => e
  | _, _, .cons x e, e' => .cons x (e.append e')

/-- The meaning of a primitive operation on its argument tensors. -/
def PrimOp.eval {α : Type} [Scalar α] : {ins : List Shape} → {out : Shape} →
    PrimOp α ins out → Env α ins → Tensor α out
  | _, _, .unary f s, .cons x .nil => Tensor.map f.apply s x
  | _, _, @PrimOp.erf _ inst s, .cons x .nil => Tensor.map (@TrigScalar.erf α inst) s x
  | _, _, .binary f s, .cons x (.cons y .nil) => Tensor.zipWith f.apply s x y
  | _, _, .scale c s, .cons x .nil => Tensor.scale c s x
  | _, _, .broadcast n _, .cons x .nil => Tensor.broadcast n x
  | _, _, .sumLast s _, .cons x .nil => Tensor.sumLast s x
  | _, _, .meanLast s _, .cons x .nil => Tensor.meanLast s x
  | _, _, .vecMatMul _ _, .cons x (.cons w .nil) => Tensor.vecMatMul x w
  | _, _, .matMul _ _ _, .cons a (.cons b .nil) => Tensor.matMul a b
  | _, _, .batchedMatMul _ _ _ _, .cons a (.cons b .nil) => Tensor.batchedMatMul a b
  | _, _, .outer _ _, .cons x (.cons y .nil) => Tensor.outer x y
  | _, _, .swapAxes01 _ _ _, .cons x .nil => Tensor.swapAxes01 x
  | _, _, .reshape _ t h, .cons x .nil => Tensor.reshape t h x
  | _, _, .concat0 _ _ _, .cons x (.cons y .nil) => Tensor.concat0 x y
  | _, _, .concatLast s _ _, .cons x (.cons y .nil) => Tensor.concatLast s x y
  | _, _, .softmaxLast s _, .cons x .nil => Tensor.softmaxLast s x
  | _, _, .rmsNormLast eps s _, .cons x (.cons g .nil) => Tensor.rmsNormLast eps s x g
  | _, _, .l2NormLast eps s _, .cons x .nil => Tensor.l2NormLast eps s x

mutual

/-- A typed graph term over a context `Γ` of input shapes, producing a tensor of shape `s`.
`let1` binds a subterm once so that later uses share it (the graph is a DAG). -/
inductive Term (α : Type) : List Shape → Shape → Type where
  /-- An input of the context. -/
  | var {Γ : List Shape} {s : Shape} : Var Γ s → Term α Γ s
  /-- A primitive operation applied to argument terms. -/
  | op {Γ ins : List Shape} {out : Shape} : PrimOp α ins out → Args α Γ ins → Term α Γ out
  /-- Evaluate the first term once and bind it as the new first context entry of the body. -/
  | let1 {Γ : List Shape} {s t : Shape} : Term α Γ s → Term α (s :: Γ) t → Term α Γ t

/-- A list of terms, one for each shape of `ss`: the arguments of an operation. -/
inductive Args (α : Type) : List Shape → List Shape → Type where
  /-- No arguments. -/
  | nil {Γ : List Shape} : Args α Γ []
  /-- One more argument in front. -/
  | cons {Γ : List Shape} {s : Shape} {ss : List Shape} :
      Term α Γ s → Args α Γ ss → Args α Γ (s :: ss)

end

mutual

/-- The meaning of a term in an environment. (Results are not memoized: measured in the offline
interpreter, `Tensor.memo` does not share its array, because the compiler eta-expands it, and
only adds cost.) -/
def Term.eval {α : Type} [Scalar α] : {Γ : List Shape} → {s : Shape} →
    Term α Γ s → Env α Γ → Tensor α s
  | _, _, .var v, env => env.get v
  | _, _, .op p args, env => p.eval (Args.eval args env)
  | _, _, .let1 t b, env => Term.eval b (.cons (Term.eval t env) env)

/-- The meaning of an argument list: one tensor per argument. -/
def Args.eval {α : Type} [Scalar α] : {Γ ss : List Shape} → Args α Γ ss → Env α Γ → Env α ss
  | _, _, .nil, _ => .nil
  | _, _, .cons t ts, env => .cons (Term.eval t env) (Args.eval ts env)

end

/-- Named shapes: the signature of a model's parameters, inputs or outputs. -/
abbrev Signature := List (String × Shape)

/-- The shapes of a signature. -/
def Signature.shapes : Signature → List Shape
  | [] => []
  | (_, s) :: rest => s :: Signature.shapes rest

/-- A model: named parameters and inputs, and a graph computing named outputs. The graph's
context lists the parameters first, then the inputs. -/
structure Model (α : Type) where
  /-- Weights, in context order. -/
  params : Signature
  /-- Activations, in context order after the parameters. -/
  inputs : Signature
  /-- Named outputs. -/
  outputs : Signature
  /-- One term per output. -/
  body : Args α (Shape.appendList params.shapes inputs.shapes) outputs.shapes

/-- The forward pass of a model: evaluate its graph on the parameters and inputs. -/
def Model.specFwd {α : Type} [Scalar α] (m : Model α) (params : Env α m.params.shapes)
    (inputs : Env α m.inputs.shapes) : Env α m.outputs.shapes :=
  m.body.eval (params.append inputs)

/-! ## Entry points for evaluating at `Float` from other modules

These take every argument they mention, so other modules (tests, generated export files) can
call them. -/

/-- A `Float` tensor from nested lists (missing entries are `0`). -/
def Tensor.ofListsF (s : Shape) (l : ListRep Float s) : Tensor Float s := Tensor.ofListRep 0 s l

/-- The entries of a `Float` tensor as nested lists, after memoization. -/
def Tensor.toListsF (s : Shape) (t : Tensor Float s) : ListRep Float s :=
  Tensor.toListRep s (Tensor.memo s t)

/-- Whether two `Float` tensors agree entrywise within `tol`. -/
def Tensor.approxEqF (tol : Float) : (s : Shape) → Tensor Float s → Tensor Float s → Bool
  | [], x, y => (if x ≤ y then y - x else x - y) ≤ tol
  | n :: s, t, u => allFin n (fun i => Tensor.approxEqF tol s (t i) (u i))
where
  /-- Whether `p i` holds for every `i : Fin k`. -/
  allFin : (k : Nat) → (Fin k → Bool) → Bool
    | 0, _ => true
    | k + 1, p => p ⟨k, by omega⟩ && allFin k (fun i => p ⟨i.val, by omega⟩)

end KimiK3
