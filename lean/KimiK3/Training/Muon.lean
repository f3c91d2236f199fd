module

public import KimiK3.Core.Sum
public import KimiK3.Core.ScalarFacts

/-!
# Per-Head Muon: the head-major layout and the orthogonalizer contract (report §2.5; k3-spec §2.10)

K3 applies Muon to each attention head of the Q, K and V projections separately. A projection is
stored `[input, output] = rows × (heads · columns)` (the hub's `weight.T`); head `h` owns the
contiguous block of output columns `columns · h … columns · h + columns − 1` (head-major, the
order of mathlib's `finProdFinEquiv`, `headColumn h c = c + columns · h`).

* `split` cuts a matrix into its `heads` column blocks, `merge` puts them back:
  **`merge_split`** and **`split_merge`** (the two are inverse bijections);
* `orthogonalize O m = merge (h ↦ O (split m h))` applies a matrix orthogonalizer per head;
  **`split_orthogonalize`**: each head block of the result is `O` of that head's block;
* the column-Gram contract (spec §6 item 14, reconstructed): `columnGram M = MᵀM`; exact means
  `MᵀM = I` (`HasExactColumnGram`), approximate means every entry of `MᵀM − I` is at most `ε` in
  absolute value (`HasApproxColumnGram`, the max-entry norm); **`orthogonalize_hasExactColumnGram`**
  and **`orthogonalize_hasApproxColumnGram`**: when `O` meets the contract on every head block,
  every head block of the update meets it; `columnGram_orthogonalize_headColumn`: the diagonal
  head blocks of the whole update's Gram are the heads' Grams.

The momentum, the Newton–Schulz iteration and the distributed gather are not modelled
(`pybridge/muon.py` runs them; `docs/training.md`).
-/

@[expose] public section

namespace KimiK3.Training.Muon

open KimiK3

variable {α : Type}

/-! ## Head-major column indices -/

/-- A product `heads · columns` with an index has `0 < columns`. -/
theorem columns_pos_of_index {heads columns : Nat} (oc : Fin (heads * columns)) : 0 < columns := by
  have key : ∀ k, k < heads * columns → 0 < columns := fun k hk => by
    rcases Nat.eq_zero_or_pos columns with h | h
    · rw [h, Nat.mul_zero] at hk; omega
    · exact h
  exact key oc.val oc.isLt

/-- **Head-major output column** `c + columns · h` of column `c` of head `h` (k3-spec §2.10,
`finProdFinEquiv (h, c)`). -/
def headColumn {heads columns : Nat} (h : Fin heads) (c : Fin columns) : Fin (heads * columns) :=
  ⟨c.val + columns * h.val, by
    have h1 := Nat.mul_le_mul_left columns (show h.val + 1 ≤ heads from h.isLt)
    rw [Nat.mul_succ] at h1
    have := c.isLt
    rw [Nat.mul_comm heads]; omega⟩

/-- The head owning output column `oc`: `oc / columns`. -/
def headOf {heads columns : Nat} (oc : Fin (heads * columns)) : Fin heads :=
  ⟨oc.val / columns, Nat.div_lt_of_lt_mul (Nat.lt_of_lt_of_eq oc.isLt (Nat.mul_comm _ _))⟩

/-- The column of output column `oc` within its head: `oc % columns`. -/
def columnOf {heads columns : Nat} (oc : Fin (heads * columns)) : Fin columns :=
  ⟨oc.val % columns, Nat.mod_lt _ (columns_pos_of_index oc)⟩

@[simp] theorem headOf_headColumn {heads columns : Nat} (h : Fin heads) (c : Fin columns) :
    headOf (headColumn h c) = h := by
  apply Fin.ext
  show (c.val + columns * h.val) / columns = h.val
  rw [Nat.add_mul_div_left _ _ (Nat.lt_of_le_of_lt (Nat.zero_le _) c.isLt),
    Nat.div_eq_of_lt c.isLt, Nat.zero_add]

@[simp] theorem columnOf_headColumn {heads columns : Nat} (h : Fin heads) (c : Fin columns) :
    columnOf (headColumn h c) = c := by
  apply Fin.ext
  show (c.val + columns * h.val) % columns = c.val
  rw [Nat.add_mul_mod_self_left, Nat.mod_eq_of_lt c.isLt]

@[simp] theorem headColumn_headOf_columnOf {heads columns : Nat} (oc : Fin (heads * columns)) :
    headColumn (headOf oc) (columnOf oc) = oc := by
  apply Fin.ext
  show oc.val % columns + columns * (oc.val / columns) = oc.val
  have := Nat.mod_add_div oc.val columns
  omega

/-- Distinct (head, column) pairs have distinct output columns. -/
theorem headColumn_inj {heads columns : Nat} {h h' : Fin heads} {c c' : Fin columns}
    (e : headColumn h c = headColumn h' c') : h = h' ∧ c = c' := by
  have e1 := congrArg headOf e; have e2 := congrArg columnOf e
  simp only [headOf_headColumn, columnOf_headColumn] at e1 e2
  exact ⟨e1, e2⟩

/-! ## Split and merge -/

/-- The per-head blocks of a projection: `heads` matrices `rows × columns`. -/
abbrev HeadMatrices (α : Type) (heads rows columns : Nat) := Fin heads → Tensor α [rows, columns]

/-- **Split** a projection `rows × (heads · columns)` into its head blocks (k3-spec §2.10):
`split m h = [row, c] ↦ m[row, c + columns · h]`. -/
@[macro_inline] def split {heads rows columns : Nat} (m : Tensor α [rows, heads * columns]) :
    HeadMatrices α heads rows columns :=
  fun h row c => m row (headColumn h c)

/-- **Merge** head blocks back into one projection (k3-spec §2.10):
`merge b = [row, oc] ↦ b (oc / columns) [row, oc % columns]`. -/
@[macro_inline] def merge {heads rows columns : Nat} (blocks : HeadMatrices α heads rows columns) :
    Tensor α [rows, heads * columns] :=
  fun row oc => blocks (headOf oc) row (columnOf oc)

/-- **`merge (split m) = m`.** -/
theorem merge_split {heads rows columns : Nat} (m : Tensor α [rows, heads * columns]) :
    merge (split m) = m := by
  funext row oc; simp only [merge, split, headColumn_headOf_columnOf]

/-- **`split (merge b) = b`.** -/
theorem split_merge {heads rows columns : Nat} (blocks : HeadMatrices α heads rows columns) :
    split (merge blocks) = blocks := by
  funext h row c; simp only [merge, split, headOf_headColumn, columnOf_headColumn]

/-- Entry `[row, c + columns · h]` of a merge is entry `[row, c]` of block `h`. -/
@[simp] theorem merge_headColumn {heads rows columns : Nat} (blocks : HeadMatrices α heads rows columns)
    (row : Fin rows) (h : Fin heads) (c : Fin columns) :
    merge blocks row (headColumn h c) = blocks h row c := by
  simp only [merge, headOf_headColumn, columnOf_headColumn]

/-! ## Orthogonalizing per head -/

/-- **Per-head orthogonalization** (k3-spec §2.10, reconstructed): apply the matrix
orthogonalizer `O` to every head block, `orthogonalize O m = merge (h ↦ O (split m h))`. -/
@[macro_inline] def orthogonalize {heads rows columns : Nat}
    (O : Tensor α [rows, columns] → Tensor α [rows, columns]) (m : Tensor α [rows, heads * columns]) :
    Tensor α [rows, heads * columns] :=
  merge (fun h => O (split m h))

/-- **Splitting an orthogonalized projection gives `O` of each head block.** -/
theorem split_orthogonalize {heads rows columns : Nat}
    (O : Tensor α [rows, columns] → Tensor α [rows, columns]) (m : Tensor α [rows, heads * columns])
    (h : Fin heads) : split (orthogonalize O m) h = O (split m h) := by
  unfold orthogonalize; rw [split_merge]

/-! ## The column-Gram contract -/

section Contract

variable [Scalar α]

/-- The column Gram `MᵀM` of a `rows × columns` matrix: `G[i, j] = Σ_r M[r, i] M[r, j]`. -/
@[macro_inline] def columnGram {rows columns : Nat} (M : Tensor α [rows, columns]) :
    Tensor α [columns, columns] :=
  fun i j => finSum rows (fun r => M r i * M r j)

/-- The identity matrix. -/
@[macro_inline] def identity (n : Nat) : Tensor α [n, n] := fun i j => if i = j then 1 else 0

/-- The Gram residual `MᵀM − I`. -/
@[macro_inline] def gramResidual {rows columns : Nat} (M : Tensor α [rows, columns]) :
    Tensor α [columns, columns] :=
  fun i j => columnGram M i j - identity columns i j

/-- **Exact column-Gram contract** (k3-spec §2.10): `MᵀM = I`, orthonormal columns. -/
def HasExactColumnGram {rows columns : Nat} (M : Tensor α [rows, columns]) : Prop :=
  columnGram M = identity columns

/-- **Approximate column-Gram contract** (k3-spec §2.10; the norm is ours, spec §6 item 14): every
entry of `MᵀM − I` is at most `ε` in absolute value (the max-entry norm `≤ ε`). -/
def HasApproxColumnGram (ε : α) {rows columns : Nat} (M : Tensor α [rows, columns]) : Prop :=
  ∀ i j, Scalar.abs (gramResidual M i j) ≤ ε

/-- An orthogonalizer whose every output has orthonormal columns. -/
def ExactMatrixOrthogonalizer {rows columns : Nat}
    (O : Tensor α [rows, columns] → Tensor α [rows, columns]) : Prop :=
  ∀ M, HasExactColumnGram (O M)

/-- An orthogonalizer whose every output meets the approximate contract with tolerance `ε`. -/
def ApproxMatrixOrthogonalizer (ε : α) {rows columns : Nat}
    (O : Tensor α [rows, columns] → Tensor α [rows, columns]) : Prop :=
  ∀ M, HasApproxColumnGram ε (O M)

/-- The max-entry norm `max_{i,j} |A[i, j]|` (`0` for an empty matrix), executable. -/
@[macro_inline] def maxAbsEntry {n m : Nat} (A : Tensor α [n, m]) : α :=
  finMaxFrom 0 n (fun i => finMaxFrom 0 m (fun j => Scalar.abs (A i j)))

/-- The diagonal head blocks of the update's column Gram are the heads' column Grams:
`Gram(orthogonalize O m)[c + w h, c' + w h] = Gram(O (split m h))[c, c']`. -/
theorem columnGram_orthogonalize_headColumn {heads rows columns : Nat}
    (O : Tensor α [rows, columns] → Tensor α [rows, columns]) (m : Tensor α [rows, heads * columns])
    (h : Fin heads) (c c' : Fin columns) :
    columnGram (orthogonalize O m) (headColumn h c) (headColumn h c') = columnGram (O (split m h)) c c' := by
  simp only [columnGram, orthogonalize, merge_headColumn]

/-- **Exact contract per head**: if `O` gives orthonormal columns on every head block of `m`, every
head block of `orthogonalize O m` has orthonormal columns. -/
theorem orthogonalize_hasExactColumnGram_of_heads {heads rows columns : Nat}
    {O : Tensor α [rows, columns] → Tensor α [rows, columns]} {m : Tensor α [rows, heads * columns]}
    (hHeads : ∀ h, HasExactColumnGram (O (split m h))) :
    ∀ h, HasExactColumnGram (split (orthogonalize O m) h) := by
  intro h; rw [split_orthogonalize]; exact hHeads h

/-- **`orthogonalize_hasExactColumnGram`** (k3-spec §2.10): with an exact orthogonalizer, every
head block of the update has orthonormal columns. -/
theorem orthogonalize_hasExactColumnGram {heads rows columns : Nat}
    {O : Tensor α [rows, columns] → Tensor α [rows, columns]} (hExact : ExactMatrixOrthogonalizer O)
    (m : Tensor α [rows, heads * columns]) :
    ∀ h, HasExactColumnGram (split (orthogonalize O m) h) :=
  orthogonalize_hasExactColumnGram_of_heads (fun h => hExact (split m h))

/-- **Approximate contract per head**: if `O` meets the `ε` contract on every head block of `m`,
so does every head block of `orthogonalize O m`. -/
theorem orthogonalize_hasApproxColumnGram_of_heads (ε : α) {heads rows columns : Nat}
    {O : Tensor α [rows, columns] → Tensor α [rows, columns]} {m : Tensor α [rows, heads * columns]}
    (hHeads : ∀ h, HasApproxColumnGram ε (O (split m h))) :
    ∀ h, HasApproxColumnGram ε (split (orthogonalize O m) h) := by
  intro h; rw [split_orthogonalize]; exact hHeads h

/-- **`orthogonalize_hasApproxColumnGram`** (k3-spec §2.10): with an `ε`-approximate
orthogonalizer, every head block of the update meets the `ε` contract. -/
theorem orthogonalize_hasApproxColumnGram (ε : α) {heads rows columns : Nat}
    {O : Tensor α [rows, columns] → Tensor α [rows, columns]} (hApprox : ApproxMatrixOrthogonalizer ε O)
    (m : Tensor α [rows, heads * columns]) :
    ∀ h, HasApproxColumnGram ε (split (orthogonalize O m) h) :=
  orthogonalize_hasApproxColumnGram_of_heads ε (fun h => hApprox (split m h))

end Contract

section Ordered

variable [OrderedScalarField α]

/-- An exact contract meets every approximate one with `0 ≤ ε`. -/
theorem HasExactColumnGram.hasApprox {rows columns : Nat} {M : Tensor α [rows, columns]}
    (hM : HasExactColumnGram M) {ε : α} (hε : 0 ≤ ε) : HasApproxColumnGram ε M := by
  intro i j
  have e : gramResidual M i j = 0 := by
    show columnGram M i j - identity columns i j = 0
    rw [hM]; grind
  rw [e, abs_of_nonneg (Std.le_refl 0)]; exact hε

/-- The approximate contract with `ε = 0` is the exact one. -/
theorem hasApproxColumnGram_zero_iff {rows columns : Nat} (M : Tensor α [rows, columns]) :
    HasApproxColumnGram 0 M ↔ HasExactColumnGram M := by
  constructor
  · intro h; funext i j
    have h1 := le_abs_self (gramResidual M i j); have h2 := neg_le_abs (gramResidual M i j)
    have h3 := h i j
    have : gramResidual M i j = 0 := by grind
    show columnGram M i j = identity columns i j
    have e : gramResidual M i j = columnGram M i j - identity columns i j := rfl
    grind
  · intro h; exact h.hasApprox (Std.le_refl 0)

end Ordered

end KimiK3.Training.Muon
