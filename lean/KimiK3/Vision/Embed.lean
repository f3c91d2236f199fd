module

public import KimiK3.Core.Sum
public import KimiK3.Core.Trig

/-!
# MoonViT-V2's patch embedding: interpolated position table and time term (k3-spec §7)

A clip of `t` frames of `h × w` patches is `t·h·w` tokens, frame-major, then row, then column
(`tokenFrame`, `tokenRow`, `tokenCol`: token `l = f·h·w + r·w + c`). Token `l`'s embedding is
`patches[l] · W + pos[row l, col l] + [t > 1] · time[frame l]` (`embed`):
* `W : [C·p·p, D]` is the bias-free patch projection, a matrix product over the flattened patch
  (channel-major: the checkpoint's Conv2d `patch_embed.proj.weight [D, C, p, p]` reshaped to
  `[D, C·p·p]`, transposed);
* `pos = resample rows cols table` is the learned `[H₀, W₀, D]` table resampled **bilinearly with
  half-pixel centres** (`align_corners = false`, no antialiasing), as an explicit linear map:
  per axis, output `o` of `n` reads the source coordinate `x = (o + ½)·m/n − ½` of `m` table
  rows, clamped at 0, and mixes rows `⌊x⌋` and `⌊x⌋ + 1` (the last row twice at the far edge)
  with weights `1 − λ`, `λ = x − ⌊x⌋`. In integers `2n·x = (2o + 1)·m − n` (`sourceNumerator`;
  truncated subtraction is the clamp), so the weights are exact rationals of the sizes
  (`weightMatrix m n : [n, m]`), the same integer formula as `pybridge.moonvit_reference`;
* `time` is the fixed sincos table (`timeTable`: channel `c < D/2` is `sin(f·ω_c)`, channel
  `D/2 + c` is `cos(f·ω_c)`, `ω_c = 10⁴^(−c/(D/2))`), and **nothing is added for a single frame**
  (the checkpoint's port returns the 2-D table there, not the `f = 0` row, whose cosine half is 1).

Proved: **`finSum_weightMatrix`** (every row of interpolation weights sums to 1, any
`ScalarField`), `weightMatrix_self` (at the table's own size the map is the identity),
`resample_const` (a constant table resamples to itself), `lowIndex_lt`, `highIndex_lt` (the taps
are table rows), **`embed_single_frame`** (for `t = 1`: patch projection plus position, no time
term), `timeTable_zero_sin`, `timeTable_zero_cos` (over `TrigLaws`: the `f = 0` row is 0 on the
sine half and 1 on the cosine half, so adding it to a single image would move half the channels).
-/

@[expose] public section

namespace KimiK3

namespace Flat

/-! Row-major index arithmetic `i * b + j` (used by the token and merge indices). -/

/-- A pair index `i * b + j` with `i < a`, `j < b` is below `a * b`. -/
theorem lt {a b i j : Nat} (hi : i < a) (hj : j < b) : i * b + j < a * b :=
  Tensor.flat_index_lt hi hj

/-- The row of a pair index. -/
theorem div {b i j : Nat} (hj : j < b) : (i * b + j) / b = i := by
  have hb : 0 < b := by omega
  rw [show i * b + j = j + i * b by omega, Nat.add_mul_div_right _ _ hb, Nat.div_eq_of_lt hj]
  omega

/-- The column of a pair index. -/
theorem mod {b i j : Nat} (hj : j < b) : (i * b + j) % b = j := by
  rw [show i * b + j = j + b * i by rw [Nat.mul_comm]; omega, Nat.add_mul_mod_self_left,
    Nat.mod_eq_of_lt hj]

/-- A row-major index decomposes into its row and column. -/
theorem div_mul_add_mod (n b : Nat) : n / b * b + n % b = n := by
  rw [Nat.mul_comm]; exact Nat.div_add_mod n b

/-- The row of an index below `a * b` is below `a`. -/
theorem div_lt {a b n : Nat} (h : n < a * b) : n / b < a :=
  Nat.div_lt_of_lt_mul (by rw [Nat.mul_comm]; exact h)

/-- The column of an index below `a * b` is below `b`. -/
theorem mod_lt {a b n : Nat} (h : n < a * b) : n % b < b :=
  Nat.mod_lt _ (Nat.pos_of_ne_zero (fun hb => by rw [hb, Nat.mul_zero] at h; omega))

end Flat

namespace Vision

variable {α : Type}

/-! ## Tokens of a clip -/

/-- The row of token `l` of a clip of `h × w` frames (frame-major, then row, then column). -/
def tokenRow (h w l : Nat) : Nat := l % (h * w) / w

/-- The column of token `l`. -/
def tokenCol (h w l : Nat) : Nat := l % (h * w) % w

/-- The frame of token `l`. -/
def tokenFrame (h w l : Nat) : Nat := l / (h * w)

/-- A clip with a token has nonempty frames. -/
theorem frame_pos {t h w l : Nat} (hl : l < t * (h * w)) : 0 < h * w := by
  cases hhw : h * w with
  | zero => rw [hhw, Nat.mul_zero] at hl; omega
  | succ _ => omega

/-- The row of a token of a `t × h × w` clip, as an index. -/
def rowOf {t h w : Nat} (l : Fin (t * (h * w))) : Fin h :=
  ⟨tokenRow h w l.val, Flat.div_lt (Nat.mod_lt _ (frame_pos l.isLt))⟩

/-- The column of a token, as an index. -/
def colOf {t h w : Nat} (l : Fin (t * (h * w))) : Fin w :=
  ⟨tokenCol h w l.val, Flat.mod_lt (Nat.mod_lt _ (frame_pos l.isLt))⟩

/-- The frame of a token, as an index. -/
def frameOf {t h w : Nat} (l : Fin (t * (h * w))) : Fin t :=
  ⟨tokenFrame h w l.val, Flat.div_lt l.isLt⟩

/-! ## Bilinear resampling as a linear map -/

/-- `2n` times the clamped source coordinate of output `o` (`n` outputs, `m` table rows):
`(2o + 1)·m − n`, or `0` where that is negative (k3-spec §7, half-pixel centres). -/
def sourceNumerator (m n o : Nat) : Nat := (2 * o + 1) * m - n

/-- The first tap, `⌊x⌋`. -/
def lowIndex (m n o : Nat) : Nat := sourceNumerator m n o / (2 * n)

/-- The second tap, `⌊x⌋ + 1`, or `⌊x⌋` itself at the last row. -/
def highIndex (m n o : Nat) : Nat :=
  if lowIndex m n o + 1 < m then lowIndex m n o + 1 else lowIndex m n o

/-- The weight of the second tap, `λ = x − ⌊x⌋ = (sourceNumerator mod 2n) / 2n`. -/
@[macro_inline] def fraction [Scalar α] (m n o : Nat) : α :=
  ((sourceNumerator m n o % (2 * n) : Nat) : α) / ((2 * n : Nat) : α)

/-- **The bilinear weight of table row `i` for output `o`** (k3-spec §7): `1 − λ` at the first
tap plus `λ` at the second (both at the last row). -/
@[macro_inline] def bilinearWeight [Scalar α] (m n o i : Nat) : α :=
  (if i = lowIndex m n o then 1 - fraction m n o else 0) +
    (if i = highIndex m n o then fraction m n o else 0)

/-- **The resampling matrix** `[n, m]` of one axis (k3-spec §7): row `o` holds the weights of the
`m` table rows for output `o`. -/
@[macro_inline] def weightMatrix [Scalar α] (m n : Nat) : Tensor α [n, m] :=
  fun o i => bilinearWeight m n o.val i.val

/-- **Separable bilinear resampling** of a `[m₁, m₂, D]` table to an `[n₁, n₂, D]` grid with row
weights `rows : [n₁, m₁]` and column weights `cols : [n₂, m₂]` (k3-spec §7):
`out[r, c, d] = Σ_j cols[c, j] · Σ_i rows[r, i] · table[i, j, d]`. -/
@[macro_inline] def resample [Scalar α] {m₁ m₂ n₁ n₂ D : Nat} (rows : Tensor α [n₁, m₁])
    (cols : Tensor α [n₂, m₂]) (table : Tensor α [m₁, m₂, D]) : Tensor α [n₁, n₂, D] :=
  fun r c d => finSum m₂ (fun j => cols c j * finSum m₁ (fun i => rows r i * table i j d))

/-- The first tap is a row of the table. -/
theorem lowIndex_lt {m n o : Nat} (hm : 0 < m) (ho : o < n) : lowIndex m n o < m := by
  unfold lowIndex sourceNumerator
  apply Nat.div_lt_of_lt_mul
  have h1 : (2 * o + 1) * m - n ≤ (2 * o + 1) * m := Nat.sub_le _ _
  have h2 : (2 * o + 1) * m + m ≤ 2 * n * m := by
    rw [← Nat.succ_mul]; exact Nat.mul_le_mul_right m (by omega)
  omega

/-- The second tap is a row of the table. -/
theorem highIndex_lt {m n o : Nat} (hm : 0 < m) (ho : o < n) : highIndex m n o < m := by
  unfold highIndex
  split
  · assumption
  · exact lowIndex_lt hm ho

/-- A sum with one nonzero term `c`, at index `k < n`. -/
theorem finSum_ite_eq [ScalarField α] (n k : Nat) (hk : k < n) (c : α) :
    finSum n (fun i => if i.val = k then c else 0) = c := by
  have h : finSum n (fun i => if i.val = k then c else 0) =
      finSum n (fun i => (if i = ⟨k, hk⟩ then (1 : α) else 0) * c) := by
    apply finSum_congr
    intro i
    by_cases hi : i.val = k
    · have e : i = ⟨k, hk⟩ := Fin.ext hi
      rw [if_pos hi, if_pos e]; grind
    · have e : i ≠ ⟨k, hk⟩ := fun e => hi (congrArg Fin.val e)
      rw [if_neg hi, if_neg e]; grind
  rw [h]
  exact finSum_delta_mul n ⟨k, hk⟩ (fun _ => c)

/-- **The interpolation weights of every output position sum to 1** (a convex combination of the
two taps, for every table and grid size). -/
theorem finSum_weightMatrix [ScalarField α] {m n : Nat} (hm : 0 < m) (o : Fin n) :
    finSum m (fun i => weightMatrix (α := α) m n o i) = 1 := by
  simp only [weightMatrix, bilinearWeight]
  rw [finSum_add, finSum_ite_eq m _ (lowIndex_lt hm o.isLt), finSum_ite_eq m _ (highIndex_lt hm o.isLt)]
  grind

/-- For a grid of the table's own size the source coordinate is the output position. -/
theorem sourceNumerator_self (m o : Nat) : sourceNumerator m m o = o * (2 * m) := by
  unfold sourceNumerator
  rw [Nat.add_mul, Nat.one_mul, Nat.add_sub_cancel, Nat.mul_comm 2 o, Nat.mul_assoc]

/-- **A grid of the table's own size gets the identity map**: resampling returns the table (the
torch port's `64 × 64` shortcut is this case, not a special rule). -/
theorem weightMatrix_self [ScalarField α] {m : Nat} (o i : Fin m) :
    weightMatrix (α := α) m m o i = if o.val = i.val then 1 else 0 := by
  have hm : 0 < 2 * m := by have := o.isLt; omega
  have hlow : lowIndex m m o.val = o.val := by
    unfold lowIndex; rw [sourceNumerator_self, Nat.mul_div_cancel _ hm]
  have hfrac : fraction (α := α) m m o.val = 0 := by
    unfold fraction; rw [sourceNumerator_self, Nat.mul_mod_left, Lean.Grind.Semiring.natCast_zero]
    grind
  simp only [weightMatrix, bilinearWeight, hlow, hfrac]
  by_cases h : i.val = o.val
  · rw [if_pos h, if_pos h.symm]; split <;> grind
  · rw [if_neg h, if_neg (Ne.symm h)]; split <;> grind

/-- Resampling a table whose entries are all `k` gives `k` everywhere (weights that sum to 1 on
both axes). -/
theorem resample_const [ScalarField α] {m₁ m₂ n₁ n₂ D : Nat} (hm₁ : 0 < m₁) (hm₂ : 0 < m₂) (k : α)
    (r : Fin n₁) (c : Fin n₂) (d : Fin D) :
    resample (weightMatrix m₁ n₁) (weightMatrix m₂ n₂) (fun _ _ _ => k) r c d = k := by
  simp only [resample]
  have hrow : finSum m₁ (fun i => weightMatrix (α := α) m₁ n₁ r i * k) = k := by
    rw [finSum_mul_right, finSum_weightMatrix hm₁]; grind
  simp only [hrow]
  rw [finSum_mul_right, finSum_weightMatrix hm₂]; grind

/-! ## The time table -/

section Time

variable [TrigScalar α]

/-- The time frequency `ω_c = 10⁴^(−c/(D/2)) = exp(−(c/(D/2))·log 10⁴)` (k3-spec §7). -/
@[macro_inline] def timeFrequency (D c : Nat) : α :=
  Scalar.exp (-((c : α) / ((D / 2 : Nat) : α)) * Scalar.log 10000)

/-- **The fixed sincos time table** `[F, D]` (k3-spec §7): row `f`, channel `c < D/2` is
`sin(f·ω_c)`, channel `D/2 + c` is `cos(f·ω_c)` (and `0` in the last channel of an odd `D`). -/
@[macro_inline] def timeTable (F D : Nat) : Tensor α [F, D] :=
  fun f c =>
    if c.val < D / 2 then TrigScalar.sin ((f.val : α) * timeFrequency D c.val)
    else if c.val < 2 * (D / 2) then TrigScalar.cos ((f.val : α) * timeFrequency D (c.val - D / 2))
    else 0

/-- The first `t` rows of a time table (`t ≤ F`: no more frames than the table has). -/
@[macro_inline] def timeRows {F D : Nat} (t : Nat) (h : t ≤ F) (table : Tensor α [F, D]) : Tensor α [t, D] :=
  fun f => table ⟨f.val, by omega⟩

end Time

section TimeZero

variable [TrigLaws α]

/-- Row `0` of the time table is `0` on the sine half. -/
theorem timeTable_zero_sin {F D : Nat} (f : Fin F) (c : Fin D) (hf : f.val = 0) (hc : c.val < D / 2) :
    timeTable (α := α) F D f c = 0 := by
  simp only [timeTable, if_pos hc, hf]
  have e : ((0 : Nat) : α) * timeFrequency D c.val = 0 := by
    rw [Lean.Grind.Semiring.natCast_zero]; grind
  rw [e, Trig.sin_zero]

/-- Row `0` of the time table is `1` on the cosine half (adding it to a single image would shift
those channels by 1). -/
theorem timeTable_zero_cos {F D : Nat} (f : Fin F) (c : Fin D) (hf : f.val = 0) (hc1 : D / 2 ≤ c.val)
    (hc2 : c.val < 2 * (D / 2)) : timeTable (α := α) F D f c = 1 := by
  have hn : ¬ c.val < D / 2 := by omega
  simp only [timeTable, if_neg hn, if_pos hc2, hf]
  have e : ((0 : Nat) : α) * timeFrequency D (c.val - D / 2) = 0 := by
    rw [Lean.Grind.Semiring.natCast_zero]; grind
  rw [e, Trig.cos_zero]

end TimeZero

/-! ## The embedding -/

/-- **The patch embedding's parameters** (k3-spec §7): the projection `[C·p·p, D]` and the
learned position table `[H₀, W₀, D]`. -/
structure Embedding (α : Type) (P D m₁ m₂ : Nat) where
  /-- `vision_tower.patch_embed.proj.weight [D, C, p, p]` reshaped to `[D, C·p·p]`, transposed. -/
  patchWeight : Tensor α [P, D]
  /-- `vision_tower.patch_embed.pos_emb.weight [H₀, W₀, D]`. -/
  posTable : Tensor α [m₁, m₂, D]

/-- **The tables of a clip's grid** (fixed, not learned; k3-spec §7): the resampling matrices of
rows and columns, the time rows of its frames, the rotary cosines and sines of its tokens (`[L, 2R]`,
`Block.lean`'s `ropeCos`, `ropeSin`). A graph takes them as inputs. -/
structure GridTables (α : Type) (t h w D m₁ m₂ R : Nat) where
  /-- `weightMatrix m₁ h`. -/
  rows : Tensor α [h, m₁]
  /-- `weightMatrix m₂ w`. -/
  cols : Tensor α [w, m₂]
  /-- `timeRows t (timeTable F D)`. -/
  time : Tensor α [t, D]
  /-- The rotary cosines of the tokens. -/
  cos : Tensor α [t * (h * w), 2 * R]
  /-- The rotary sines of the tokens. -/
  sin : Tensor α [t * (h * w), 2 * R]

/-- **The patch embedding of a clip** (k3-spec §7): `patches[l] · W + pos[row l, col l]`, plus
`time[frame l]` only when the clip has more than one frame. `patches : [t·h·w, C·p·p]`. -/
@[macro_inline] def embed [Scalar α] {P D m₁ m₂ R t h w : Nat} (e : Embedding α P D m₁ m₂)
    (g : GridTables α t h w D m₁ m₂ R) (patches : Tensor α [t * (h * w), P]) :
    Tensor α [t * (h * w), D] :=
  fun l d =>
    if t = 1 then
      finSum P (fun k => patches l k * e.patchWeight k d) +
        resample g.rows g.cols e.posTable (rowOf l) (colOf l) d
    else
      finSum P (fun k => patches l k * e.patchWeight k d) +
        resample g.rows g.cols e.posTable (rowOf l) (colOf l) d + g.time (frameOf l) d

/-- **A single image gets no time term**: for `t = 1` the embedding is the patch projection plus
the resampled position table. -/
theorem embed_single_frame [Scalar α] {P D m₁ m₂ R h w : Nat} (e : Embedding α P D m₁ m₂)
    (g : GridTables α 1 h w D m₁ m₂ R) (patches : Tensor α [1 * (h * w), P]) (l : Fin (1 * (h * w)))
    (d : Fin D) :
    embed e g patches l d =
      finSum P (fun k => patches l k * e.patchWeight k d) +
        resample g.rows g.cols e.posTable (rowOf l) (colOf l) d := by
  simp only [embed, ↓reduceIte]

end Vision

end KimiK3
