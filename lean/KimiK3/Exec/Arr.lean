module

public import KimiK3.Exec.Kernel
public import KimiK3.Core.Sum

/-!
# Array-backed tensors: reading what was built, and the meaning `toTensor`

* what the builders store: `Arr.get_ofFn`, `get_vec`, `get_mat`, `get_ten3`, `get_block`;
* the meaning of an array-backed tensor at each rank: `toTensor_apply1/2/3`, and of built
  tensors: `toTensor_ofFn`;
* `toTensor_ofTensor`: storing a function-backed tensor and reading it back is the identity, so
  every statement about `toTensor` of array-backed inputs covers every function-backed input;
* the loops: `sumTo_eq` (`sumTo n f = finSum n f`), `maxDown_eq` (`= finMaxFrom`), and the list
  helpers (`listMap_eq`, `listAppend_eq`, `listLen_eq`, `listGet_map`), `scan_map` (a scan of a
  step that commutes with a conversion is the converted `CausalScan`-style scan).
-/

@[expose] public section

namespace KimiK3

namespace Exec

variable {α β : Type}

/-! ## Built arrays -/

theorem arrayGetD_push (a : Array β) (x d : β) (j : Nat) :
    arrayGetD (a.push x) j d = if j < a.size then arrayGetD a j d else if j = a.size then x else d := by
  unfold arrayGetD
  by_cases h1 : j < a.size
  · rw [dif_pos (by simp; omega), if_pos h1, dif_pos h1, Array.getElem_push_lt h1]
  · by_cases h3 : j = a.size
    · subst h3; rw [dif_pos (by simp), if_neg h1, if_pos rfl, Array.getElem_push_eq]
    · rw [dif_neg (by simp; omega), if_neg h1, if_neg h3]

theorem arrayGetD_pushRange (f : Nat → β) (k i : Nat) (acc : Array β) (j : Nat) (d : β) :
    arrayGetD (pushRange f k i acc) j d =
      if j < acc.size then arrayGetD acc j d
      else if j < acc.size + k then f (i + (j - acc.size)) else d := by
  induction k generalizing i acc with
  | zero =>
    simp only [pushRange, Nat.add_zero]
    by_cases h : j < acc.size
    · simp [h]
    · simp only [h, if_false]; unfold arrayGetD; simp [h]
  | succ k ih =>
    simp only [pushRange, ih, arrayGetD_push, Array.size_push]
    by_cases h1 : j < acc.size
    · simp [h1, show j < acc.size + 1 by omega]
    · by_cases h2 : j = acc.size
      · subst h2; simp
      · have h3 : ¬ j < acc.size + 1 := by omega
        simp only [h1, h2, h3, if_false]
        by_cases h4 : j < acc.size + 1 + k
        · have h5 : j < acc.size + (k + 1) := by omega
          simp only [h4, h5, if_true]
          congr 1; omega
        · have h5 : ¬ j < acc.size + (k + 1) := by omega
          simp only [h4, h5, if_false]

theorem arrayGetD_arrayOfFn (n : Nat) (f : Nat → β) (j : Nat) (d : β) :
    arrayGetD (arrayOfFn n f) j d = if j < n then f j else d := by
  unfold arrayOfFn
  rw [arrayGetD_pushRange]
  simp

namespace Arr

variable [Scalar α] {s : Shape}

theorem get_eq_arrayGetD (a : Arr α s) (k : Nat) : a.get k = arrayGetD a.data k 0 := rfl

/-- What `ofFn` stores. -/
theorem get_ofFn (s : Shape) (f : Nat → α) (k : Nat) :
    (ofFn s f).get k = if k < Shape.numel s then f k else 0 := by
  rw [get_eq_arrayGetD]; exact arrayGetD_arrayOfFn _ _ _ _

theorem get_ofFn_of_lt {s : Shape} {k : Nat} (f : Nat → α) (h : k < Shape.numel s) :
    (ofFn s f).get k = f k := by
  rw [get_ofFn]; simp [h]

@[simp] theorem numel_nil : Shape.numel [] = 1 := rfl

@[simp] theorem numel_cons (n : Nat) (s : Shape) : Shape.numel (n :: s) = n * Shape.numel s := rfl

@[simp] theorem get_vec {n i : Nat} (f : Nat → α) (h : i < n) : (vec n f).get i = f i :=
  get_ofFn_of_lt f (by simp; exact h)

theorem flat2_lt {m n i j : Nat} (hi : i < m) (hj : j < n) : i * n + j < m * n :=
  Tensor.flat_index_lt hi hj

theorem flat2_div {n i j : Nat} (hj : j < n) : (i * n + j) / n = i := by
  rw [Nat.add_comm, Nat.add_mul_div_right _ _ (by omega), Nat.div_eq_of_lt hj, Nat.zero_add]

theorem flat2_mod {n i j : Nat} (hj : j < n) : (i * n + j) % n = j := by
  rw [Nat.add_comm, Nat.add_mul_mod_self_right, Nat.mod_eq_of_lt hj]

@[simp] theorem get_mat {m n i j : Nat} (f : Nat → Nat → α) (hi : i < m) (hj : j < n) :
    (mat m n f).get (i * n + j) = f i j := by
  unfold mat
  rw [get_ofFn_of_lt _ (by simp; exact flat2_lt hi hj), flat2_div hj, flat2_mod hj]

@[simp] theorem get_ten3 {l m n i j k : Nat} (f : Nat → Nat → Nat → α) (hi : i < l) (hj : j < m)
    (hk : k < n) : (ten3 l m n f).get ((i * m + j) * n + k) = f i j k := by
  unfold ten3
  have h1 : (i * m + j) * n + k < l * (m * n) := by
    have := flat2_lt (flat2_lt hi hj) hk; rw [Nat.mul_assoc] at this; exact this
  rw [get_ofFn_of_lt _ (by simp; exact h1), flat2_div hk, flat2_div hj, flat2_mod hj, flat2_mod hk]

/-! ## The meaning of an array-backed tensor -/

omit [Scalar α] in
theorem ofGet_congr : (s : Shape) → (g g' : Nat → α) → (∀ k, k < Shape.numel s → g k = g' k) →
    ofGet s g = ofGet s g'
  | [], g, g', h => h 0 (by simp)
  | n :: s, g, g', h => by
    funext i
    exact ofGet_congr s _ _ (fun k hk => h _ (by simp; exact Tensor.flat_index_lt i.isLt hk))

/-- The meaning of a built tensor. -/
theorem toTensor_ofFn (s : Shape) (f : Nat → α) : (ofFn s f).toTensor = ofGet s f :=
  ofGet_congr s _ _ (fun _ hk => get_ofFn_of_lt f hk)

@[simp] theorem toTensor_apply1 {n : Nat} (a : Arr α [n]) (i : Fin n) :
    a.toTensor i = a.get i.val := by
  simp [toTensor, ofGet]

@[simp] theorem toTensor_apply2 {m n : Nat} (a : Arr α [m, n]) (i : Fin m) (j : Fin n) :
    a.toTensor i j = a.get (i.val * n + j.val) := by
  simp [toTensor, ofGet]

@[simp] theorem toTensor_apply3 {l m n : Nat} (a : Arr α [l, m, n]) (i : Fin l) (j : Fin m)
    (k : Fin n) : a.toTensor i j k = a.get ((i.val * m + j.val) * n + k.val) := by
  simp only [toTensor, ofGet, numel_cons, numel_nil, Nat.mul_one, Nat.add_zero]
  congr 1
  rw [Nat.add_mul, Nat.mul_assoc, Nat.add_assoc]

theorem toTensor_scalar (a : Arr α []) : a.toTensor = a.get 0 := rfl

theorem flatGet_ofGet : (s : Shape) → (t : Tensor α s) → (g : Nat → α) →
    (∀ k, k < Shape.numel s → g k = flatGet s t k) → ofGet s g = t
  | [], t, g, h => h 0 (by simp)
  | n :: s, t, g, h => by
    funext i
    apply flatGet_ofGet s (t i)
    intro k hk
    have hpos : 0 < Shape.numel s := by omega
    rw [h _ (by simp; exact Tensor.flat_index_lt i.isLt hk)]
    simp only [flatGet, flat2_div hk, flat2_mod hk, i.isLt, dite_true]

/-- **Storing a tensor and reading it back is the identity.** -/
@[simp] theorem toTensor_ofTensor (s : Shape) (t : Tensor α s) : (ofTensor s t).toTensor = t := by
  unfold ofTensor
  rw [toTensor_ofFn]
  exact flatGet_ofGet s t _ (fun _ _ => rfl)

theorem toTensor_vec {n : Nat} (f : Nat → α) : (vec n f).toTensor = fun i => f i.val := by
  funext i; simp

theorem toTensor_mat {m n : Nat} (f : Nat → Nat → α) :
    (mat m n f).toTensor = fun i j => f i.val j.val := by
  funext i j; simp

theorem toTensor_ten3 {l m n : Nat} (f : Nat → Nat → Nat → α) :
    (ten3 l m n f).toTensor = fun i j k => f i.val j.val k.val := by
  funext i j k; simp

theorem toTensor_fill (s : Shape) (x : α) : (fill s x).toTensor = Tensor.fill x s := by
  unfold fill; rw [toTensor_ofFn]
  induction s with
  | nil => rfl
  | cons n s ih => funext i; exact ih

@[simp] theorem get_block {t : Shape} (s : Shape) (a : Arr α t) (off : Nat) {k : Nat}
    (h : k < Shape.numel s) : (block s a off).get k = a.get (off + k) :=
  get_ofFn_of_lt _ h

/-- Row `i` of a matrix is the `i`-th slice of its meaning. -/
theorem toTensor_row {m n : Nat} (a : Arr α [m, n]) (i : Fin m) :
    (row a i.val).toTensor = a.toTensor i := by
  funext j
  simp [row, Nat.add_comm]

/-- Slice `i` of an order-3 tensor is the `i`-th slice of its meaning. -/
theorem toTensor_slice3 {l m n : Nat} (a : Arr α [l, m, n]) (i : Fin l) :
    (slice3 a i.val).toTensor = a.toTensor i := by
  funext j k
  have h : j.val * n + k.val < m * n := flat2_lt j.isLt k.isLt
  simp only [toTensor_apply2, toTensor_apply3, slice3, get_block _ _ _ (show _ < Shape.numel [m, n] by simp; exact h)]
  congr 1
  rw [Nat.add_mul, Nat.mul_assoc, Nat.add_assoc]

end Arr

/-! ## Loops -/

section Loops

variable [Scalar α]

theorem sumFrom_finSum (f : Nat → α) (k i : Nat) :
    sumFrom f k i (finSum i (fun j => f j.val)) = finSum (i + k) (fun j => f j.val) := by
  induction k generalizing i with
  | zero => rfl
  | succ k ih =>
    show sumFrom f k (i + 1) (finSum (i + 1) (fun j => f j.val)) = _
    rw [ih, show i + 1 + k = i + (k + 1) by omega]

/-- **The array sum is `finSum`**, term for term and in the same order. -/
theorem sumTo_eq (n : Nat) (f : Nat → α) : sumTo n f = finSum n (fun i => f i.val) := by
  have h := sumFrom_finSum f n 0
  rw [Nat.zero_add] at h
  exact h

/-- The downward `max` fold is `finMaxFrom`. -/
theorem maxDown_eq (f : Nat → α) (k : Nat) (acc : α) :
    maxDown f k acc = finMaxFrom acc k (fun i => f i.val) := by
  induction k generalizing acc with
  | zero => rfl
  | succ k ih => simp only [maxDown, finMaxFrom, ih]

end Loops

section ListFacts

theorem listMap_eq (f : α → β) (xs : List α) : listMap f xs = xs.map f := by
  induction xs with
  | nil => rfl
  | cons x xs ih => simp [listMap, ih]

theorem listAppend_eq (xs ys : List α) : listAppend xs ys = xs ++ ys := by
  induction xs with
  | nil => rfl
  | cons x xs ih => simp [listAppend, ih]

theorem listLen_eq (xs : List α) : listLen xs = xs.length := by
  induction xs with
  | nil => rfl
  | cons x xs ih => simp [listLen, ih]

theorem listLen_map (f : α → β) (xs : List α) : listLen (listMap f xs) = listLen xs := by
  rw [listLen_eq, listLen_eq, listMap_eq, List.length_map]

theorem listMap_append (f : α → β) (xs ys : List α) :
    listMap f (listAppend xs ys) = listAppend (listMap f xs) (listMap f ys) := by
  simp [listMap_eq, listAppend_eq]

theorem listGet_map (f : α → β) (d : α) (xs : List α) (i : Nat) :
    listGet (f d) (listMap f xs) i = f (listGet d xs i) := by
  induction xs generalizing i with
  | nil => rfl
  | cons x xs ih => cases i with
    | zero => rfl
    | succ i => exact ih i

/-- A scan whose step commutes with conversions `cs`, `ci`, `co` of state, input and output is
the converted scan. -/
theorem scan_map {σ ι ο σ' ι' ο' : Type} (f : σ → ι → σ × ο) (g : σ' → ι' → σ' × ο')
    (cs : σ → σ') (ci : ι → ι') (co : ο → ο')
    (h : ∀ s x, (cs (f s x).1, co (f s x).2) = g (cs s) (ci x)) (s : σ) (xs : List ι) :
    (cs (scan f s xs).1, listMap co (scan f s xs).2) = scan g (cs s) (listMap ci xs) := by
  induction xs generalizing s with
  | nil => rfl
  | cons x xs ih =>
    simp only [scan, listMap]
    rw [← h s x]
    simp only [← ih (f s x).1]

/-- The same, for executable inputs computed from the reference inputs by `ci`. -/
theorem scan_map_inputs {σ ι ο σ' ι' ο' : Type} (f : σ → ι → σ × ο) (g : σ' → ι' → σ' × ο')
    (cs : σ → σ') (ci : ι' → ι) (co : ο → ο')
    (h : ∀ s x, (cs (f s (ci x)).1, co (f s (ci x)).2) = g (cs s) x) (s : σ) (xs : List ι') :
    (cs (scan f s (listMap ci xs)).1, listMap co (scan f s (listMap ci xs)).2) = scan g (cs s) xs := by
  induction xs generalizing s with
  | nil => rfl
  | cons x xs ih =>
    simp only [scan, listMap]
    rw [← h s x]
    simp only [← ih (f s (ci x)).1]

end ListFacts

end Exec

end KimiK3
