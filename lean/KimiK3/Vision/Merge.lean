module

public import KimiK3.Vision.Block

/-!
# Temporal mean, 2 × 2 space-to-depth merge and the projector (k3-spec §2.9, §7)

After the encoder, a clip's `t·h·w` tokens are averaged over its frames (`temporalMean`), and each
`mH × mW` neighbourhood of the `[h, w, D]` result becomes one token of width `mH·mW·D`
(`spaceToDepth`; `h = h'·mH`, `w = w'·mW`). Merged token `a·w' + b` holds the pixels
`(a·mH + dh, b·mW + dw)` in channel block `dh·mW + dw`:

  **merged channel `(dh·mW + dw)·D + c`** (for the checkpoint's 2 × 2: `(dh·2 + dw)·D + c`),
  token order row-major over `(a, b)`.

The projector (`mm_projector`) maps each merged token of width `E = mH·mW·D` to the text width
`T`: `Linear(E, E) → GELU(erf) → Linear(E, T) → RMSNorm(T)`, bias-free, the norm **after** the
second linear and no pre-norm (`mm_projector.post_norm.weight`). `mergeProject` is the tail of the
vision tower on one clip; `clipFeatures` the whole tower on one clip (embedding, encoder,
merge-and-project), whose `h'·w'` rows are the clip's visual tokens.

Proved: **`spaceToDepth_apply`** (the channel order), **`depthToSpace_spaceToDepth`** (the merge is
undone by its inverse: nothing is dropped or repeated), **`spaceToDepth_numel`** (the scalar count
`(h'·mH)·(w'·mW)·D = (h'·w')·(mH·mW·D)`), `temporalMean_one` (a single frame is its own mean),
`mergeProject_rows` (a grid of `(h'·mH) × (w'·mW)` patches gives `h'·w'` visual tokens).
-/

@[expose] public section

namespace KimiK3

namespace Vision

variable {α : Type}

/-- Entries at equal index pairs are equal. -/
theorem get2_congr {a b : Nat} {s : Shape} (x : Tensor α (a :: b :: s)) {i i' : Fin a} {j j' : Fin b}
    (hi : i.val = i'.val) (hj : j.val = j'.val) : x i j = x i' j' := by
  rw [Fin.ext hi, Fin.ext hj]

/-- Entries at equal index triples are equal. -/
theorem get3_congr {a b c : Nat} {s : Shape} (x : Tensor α (a :: b :: c :: s)) {i i' : Fin a}
    {j j' : Fin b} {k k' : Fin c} (hi : i.val = i'.val) (hj : j.val = j'.val) (hk : k.val = k'.val) :
    x i j k = x i' j' k' := by
  rw [Fin.ext hi, Fin.ext hj, Fin.ext hk]

/-- **The temporal mean** of a clip's `t·h·w` encoder outputs (k3-spec §2.9, §7): `[h, w, D]`,
`out[r, c, d] = (Σ_f x[f·h·w + r·w + c, d]) / t`. -/
@[macro_inline] def temporalMean [Scalar α] {t h w D : Nat} (x : Tensor α [t * (h * w), D]) :
    Tensor α [h, w, D] :=
  fun r c d => finSum t (fun f => x ⟨f.val * (h * w) + (r.val * w + c.val),
    Flat.lt f.isLt (Flat.lt r.isLt c.isLt)⟩ d) / (t : α)

/-- The merged token and channel of a pixel: row `a·mH + dh`, column `b·mW + dw`. -/
theorem merge_index_lt {h' w' mH mW D : Nat} (m : Fin (h' * w')) (n : Fin (mH * (mW * D))) :
    m.val / w' * mH + n.val / (mW * D) < h' * mH ∧ m.val % w' * mW + n.val / D % mW < w' * mW ∧
      n.val % D < D := by
  refine ⟨Flat.lt (Flat.div_lt m.isLt) (Flat.div_lt n.isLt), Flat.lt (Flat.mod_lt m.isLt) ?_, ?_⟩
  · have hpos : ∀ k : Nat, k < mH * (mW * D) → 0 < mW := by
      intro k hk
      cases mW with
      | zero => rw [Nat.zero_mul, Nat.mul_zero] at hk; omega
      | succ _ => omega
    exact Nat.mod_lt _ (hpos n.val n.isLt)
  · exact Flat.mod_lt (a := mH * mW) (by rw [Nat.mul_assoc]; exact n.isLt)

/-- **The space-to-depth merge** of an `[h'·mH, w'·mW, D]` grid into `[h'·w', mH·(mW·D)]`
(k3-spec §2.9, §7): merged token `m` is `(m / w', m mod w')`, channel `n` is
`(n / (mW·D), (n / D) mod mW, n mod D)`. -/
def spaceToDepth {h' w' mH mW D : Nat} (x : Tensor α [h' * mH, w' * mW, D]) :
    Tensor α [h' * w', mH * (mW * D)] :=
  fun m n => x ⟨_, (merge_index_lt m n).1⟩ ⟨_, (merge_index_lt m n).2.1⟩ ⟨_, (merge_index_lt m n).2.2⟩

/-- **The merge's channel order**: pixel `(a·mH + dh, b·mW + dw)`, channel `c`, lands in merged
token `a·w' + b` at channel `(dh·mW + dw)·D + c`. -/
theorem spaceToDepth_apply {h' w' mH mW D : Nat} (x : Tensor α [h' * mH, w' * mW, D]) (a : Fin h')
    (b : Fin w') (dh : Fin mH) (dw : Fin mW) (c : Fin D) :
    spaceToDepth x ⟨a.val * w' + b.val, Flat.lt a.isLt b.isLt⟩
        ⟨(dh.val * mW + dw.val) * D + c.val, by
          rw [← Nat.mul_assoc]; exact Flat.lt (Flat.lt dh.isLt dw.isLt) c.isLt⟩ =
      x ⟨a.val * mH + dh.val, Flat.lt a.isLt dh.isLt⟩ ⟨b.val * mW + dw.val, Flat.lt b.isLt dw.isLt⟩ c := by
  have e1 : (dh.val * mW + dw.val) * D + c.val = dh.val * (mW * D) + (dw.val * D + c.val) := by
    rw [Nat.add_mul, Nat.mul_assoc, Nat.add_assoc]
  have hlt : dw.val * D + c.val < mW * D := Flat.lt dw.isLt c.isLt
  apply get3_congr
  · show (a.val * w' + b.val) / w' * mH + ((dh.val * mW + dw.val) * D + c.val) / (mW * D) = _
    rw [Flat.div b.isLt, e1, Flat.div hlt]
  · show (a.val * w' + b.val) % w' * mW + ((dh.val * mW + dw.val) * D + c.val) / D % mW = _
    rw [Flat.mod b.isLt, Flat.div c.isLt, Flat.mod dw.isLt]
  · show ((dh.val * mW + dw.val) * D + c.val) % D = _
    rw [Flat.mod c.isLt]

/-- **The inverse merge** (depth back to space). -/
def depthToSpace {h' w' mH mW D : Nat} (y : Tensor α [h' * w', mH * (mW * D)]) :
    Tensor α [h' * mH, w' * mW, D] :=
  fun r c d => y ⟨r.val / mH * w' + c.val / mW, Flat.lt (Flat.div_lt r.isLt) (Flat.div_lt c.isLt)⟩
    ⟨(r.val % mH * mW + c.val % mW) * D + d.val, by
      rw [← Nat.mul_assoc]; exact Flat.lt (Flat.lt (Flat.mod_lt r.isLt) (Flat.mod_lt c.isLt)) d.isLt⟩

/-- **The merge drops and repeats nothing**: the inverse merge gives back the grid. -/
theorem depthToSpace_spaceToDepth {h' w' mH mW D : Nat} (x : Tensor α [h' * mH, w' * mW, D]) :
    depthToSpace (spaceToDepth x) = x := by
  funext r c d
  simp only [depthToSpace]
  have hr := Flat.div_mul_add_mod r.val mH
  have hc := Flat.div_mul_add_mod c.val mW
  have key := spaceToDepth_apply x ⟨r.val / mH, Flat.div_lt r.isLt⟩ ⟨c.val / mW, Flat.div_lt c.isLt⟩
    ⟨r.val % mH, Flat.mod_lt r.isLt⟩ ⟨c.val % mW, Flat.mod_lt c.isLt⟩ d
  rw [key]
  exact congrFun (get2_congr x hr hc) d

/-- **The merge keeps the scalar count**: `(h'·mH)·(w'·mW)·D = (h'·w')·(mH·mW·D)`. -/
theorem spaceToDepth_numel (h' w' mH mW D : Nat) :
    Shape.numel [h' * w', mH * (mW * D)] = Shape.numel [h' * mH, w' * mW, D] := by
  simp only [Shape.numel, Nat.mul_one]
  rw [Nat.mul_assoc, Nat.mul_assoc, Nat.mul_assoc, Nat.mul_left_comm w', Nat.mul_left_comm w' mW,
    Nat.mul_left_comm mH]

/-- A single frame is its own temporal mean. -/
theorem temporalMean_one [ScalarField α] {h w D : Nat} (x : Tensor α [1 * (h * w), D]) (r : Fin h)
    (c : Fin w) (d : Fin D) :
    temporalMean x r c d = x ⟨r.val * w + c.val, by rw [Nat.one_mul]; exact Flat.lt r.isLt c.isLt⟩ d := by
  simp only [temporalMean, finSum_one, Fin.val_zero, Nat.zero_mul, Nat.zero_add]
  rw [Lean.Grind.Semiring.natCast_one]; grind

/-! ## The projector -/

/-- **The projector's parameters** (checkpoint `mm_projector.`, k3-spec §7): `proj.0.weight`ᵀ
`[E, E]`, `proj.2.weight`ᵀ `[E, T]`, `post_norm.weight [T]`. -/
structure Projector (α : Type) (E T : Nat) where
  /-- `proj.0.weight`ᵀ. -/
  first : Tensor α [E, E]
  /-- `proj.2.weight`ᵀ. -/
  second : Tensor α [E, T]
  /-- `post_norm.weight`. -/
  norm : Tensor α [T]

/-- **The projector on merged tokens** `[N, E] → [N, T]` (k3-spec §7):
`RMSNorm(GELU_erf(x W₁) W₂) ⊙ g`, bias-free, post-norm only. -/
@[macro_inline] def Projector.forward [TrigScalar α] {E T N : Nat} (p : Projector α E T) (eps : α)
    (x : Tensor α [N, E]) : Tensor α [N, T] :=
  Block.normRows eps (fun n o => finSum E (fun k =>
    geluErf (finSum E (fun i => x n i * p.first i k)) * p.second k o)) p.norm

/-- **Merge and project one clip** (k3-spec §2.9 `mergeAndProject`, with the checkpoint's
projector): temporal mean over the `t` frames, `mH × mW` space-to-depth, projector. The clip's
grid is `(h'·mH) × (w'·mW)`; the result has `h'·w'` rows of the text width. -/
@[macro_inline] def mergeProject [TrigScalar α] {t h' w' mH mW D T : Nat}
    (p : Projector α (mH * (mW * D)) T) (eps : α) (y : Tensor α [t * ((h' * mH) * (w' * mW)), D]) :
    Tensor α [h' * w', T] :=
  p.forward eps (spaceToDepth (temporalMean y))

/-- The clip's visual tokens number `(h / mH)·(w / mW)`: a grid of `(h'·mH) × (w'·mW)` patches
gives `h'·w'` rows. -/
theorem mergeProject_rows (h' w' mH mW : Nat) (hH : 0 < mH) (hW : 0 < mW) :
    (h' * mH) / mH * ((w' * mW) / mW) = h' * w' := by
  rw [Nat.mul_div_cancel _ hH, Nat.mul_div_cancel _ hW]

/-! ## The whole tower on one clip -/

/-- **MoonViT-V2's weights** (k3-spec §7; `vision_tower.…`, `mm_projector.…`): patch embedding and
position table, the blocks, the final norm, the projector. `P = C·p²`, `[H₀, W₀]` the table,
`A` heads of `4R`, value width `V`, MLP `M`, merge `mH × mW`, text width `T`. -/
structure MoonViT (α : Type) (P D H₀ W₀ A R V M mH mW T : Nat) where
  /-- `vision_tower.patch_embed.`. -/
  embedding : Embedding α P D H₀ W₀
  /-- `vision_tower.encoder.blocks.{i}.`, in order. -/
  blocks : List (Block α D A R V M)
  /-- `vision_tower.encoder.final_layernorm.weight`. -/
  finalNorm : Tensor α [D]
  /-- `mm_projector.`. -/
  projector : Projector α (mH * (mW * D)) T

/-- **The visual tokens of one clip** (k3-spec §7) of `t ≤ F` frames on an `(h'·mH) × (w'·mW)`
grid: patch embedding (resampled table, time term for `t > 1`), the encoder with 2-D RoPE at base
`θ` and score scale `1/√(4R)`, merge and project. `eps` is the encoder norms' ε, `projEps` the
projector's. -/
@[macro_inline] def clipFeatures [TrigScalar α] {P D H₀ W₀ A R V M mH mW T : Nat}
    (model : MoonViT α P D H₀ W₀ A R V M mH mW T) (eps projEps theta : α) (F t h' w' : Nat)
    (hF : t ≤ F) (patches : Tensor α [t * ((h' * mH) * (w' * mW)), P]) : Tensor α [h' * w', T] :=
  let g : GridTables α t (h' * mH) (w' * mW) D H₀ W₀ R :=
    { rows := weightMatrix H₀ (h' * mH), cols := weightMatrix W₀ (w' * mW),
      time := timeRows t hF (timeTable F D),
      cos := ropeCos theta R t (h' * mH) (w' * mW), sin := ropeSin theta R t (h' * mH) (w' * mW) }
  mergeProject model.projector projEps
    (encode model.blocks model.finalNorm eps (1 / Scalar.sqrt ((4 * R : Nat) : α)) g.cos g.sin
      (embed model.embedding g patches))

end Vision

end KimiK3
