module

public import KimiK3.Core.GraphEval
public import KimiK3.Core.Layout
public import KimiK3.Vision.Merge

/-!
# MoonViT-V2's patch embedding as a typed graph (k3-spec §7)

`EmbedGraph.model t h w P D m₁ m₂` has parameters `patchWeight [P, D]`, `posTable [m₁, m₂, D]`
and inputs `patches [t·h·w, P]`, `rows [h, m₁]`, `cols [w, m₂]` (the bilinear matrices), `time
[t, D]` (the time rows); its output is `patches · W + pos + [t ≠ 1] · time`, from primitive nodes:
* `U = reshape [h, m₂, D] (rows · reshape [m₁, m₂·D] posTable)` (`U[r, j, d] = Σ_i rows[r, i] T[i, j, d]`);
* `G = batchedMatMul (broadcast h cols) U` (`G[r, c, d] = Σ_j cols[c, j] U[r, j, d]`: `resample`);
* the grid tiled over the frames, `reshape [t·h·w, D] (broadcast t (reshape [h·w, D] G))`;
* the time rows spread over the tokens, `reshape [t·h·w, D] (swapAxes01 (broadcast (h·w) time))`,
  added only when `t ≠ 1` (the graph of a single image has no time node).

Proved: the reshape coordinates it uses (`reshape_flattenTail_apply`, `reshape_splitTail_apply`,
`reshape_flattenHead_apply`), and **`specFwd_eq_embed`**: the graph computes `Vision.embed` for
every grid, frame count, table size, width and patch size. `modelTiny` is the tiny configuration's
instance (`fixtures/tiny/config.json`: 2 frames of 6 × 4 patches of 27 values, width 20, a 4 × 6
table), exported as `fixtures/graphs/vision_embed_tiny.json`.
-/

@[expose] public section

namespace KimiK3

namespace Vision

variable {α : Type}

/-! ## Reshape coordinates -/

/-- The row-major entries of a rank-3 tensor. -/
theorem toFlat_apply3 {a b c : Nat} (x : Tensor α [a, b, c]) (k : Nat) (hk : k < Shape.numel [a, b, c])
    (h1 : k / (b * c) < a) (h2 : k % (b * c) / c < b) (h3 : k % (b * c) % c < c) :
    Tensor.toFlat [a, b, c] x ⟨k, hk⟩ = x ⟨k / (b * c), h1⟩ ⟨k % (b * c) / c, h2⟩ ⟨k % (b * c) % c, h3⟩ := by
  simp only [Tensor.toFlat, Shape.numel, Nat.mul_one, Nat.div_one]

/-- An `ofFlat` matrix entry is the flat entry `i·b + j`. -/
theorem ofFlat_apply2 {a b : Nat} (f : Fin (Shape.numel [a, b]) → α) (i : Fin a) (j : Fin b) :
    Tensor.ofFlat [a, b] f i j =
      f ⟨i.val * b + j.val, by simp only [Shape.numel, Nat.mul_one]; exact Flat.lt i.isLt j.isLt⟩ := by
  simp only [Tensor.ofFlat, Shape.numel, Nat.mul_one, Nat.add_zero]

/-- An `ofFlat` rank-3 entry is the flat entry `i·(b·c) + (j·c + k)`. -/
theorem ofFlat_apply3 {a b c : Nat} (f : Fin (Shape.numel [a, b, c]) → α) (i : Fin a) (j : Fin b) (k : Fin c) :
    Tensor.ofFlat [a, b, c] f i j k =
      f ⟨i.val * (b * c) + (j.val * c + k.val), by
        simp only [Shape.numel, Nat.mul_one]; exact Flat.lt i.isLt (Flat.lt j.isLt k.isLt)⟩ := by
  simp only [Tensor.ofFlat, Shape.numel, Nat.mul_one, Nat.add_zero]

/-- **Flatten the last two axes**, `[a, b, c] → [a, b·c]`: entry `(i, n)` is `(i, n / c, n mod c)`. -/
theorem reshape_flattenTail_apply {a b c : Nat} (x : Tensor α [a, b, c])
    (h : Shape.numel [a, b, c] = Shape.numel [a, b * c]) (i : Fin a) (n : Fin (b * c)) :
    Tensor.reshape [a, b * c] h x i n = x i ⟨n.val / c, Flat.div_lt n.isLt⟩ ⟨n.val % c, Flat.mod_lt n.isLt⟩ := by
  simp only [Tensor.reshape, ofFlat_apply2]
  rw [toFlat_apply3 x (i.val * (b * c) + n.val) _ (by rw [Flat.div n.isLt]; exact i.isLt)
    (by rw [Flat.mod n.isLt]; exact Flat.div_lt n.isLt) (by rw [Flat.mod n.isLt]; exact Flat.mod_lt n.isLt)]
  apply get3_congr
  · exact Flat.div n.isLt
  · show (i.val * (b * c) + n.val) % (b * c) / c = n.val / c
    rw [Flat.mod n.isLt]
  · show (i.val * (b * c) + n.val) % (b * c) % c = n.val % c
    rw [Flat.mod n.isLt]

/-- **Split the last axis**, `[a, b·c] → [a, b, c]`: entry `(i, j, k)` is `(i, j·c + k)`. -/
theorem reshape_splitTail_apply {a b c : Nat} (y : Tensor α [a, b * c])
    (h : Shape.numel [a, b * c] = Shape.numel [a, b, c]) (i : Fin a) (j : Fin b) (k : Fin c) :
    Tensor.reshape [a, b, c] h y i j k = y i ⟨j.val * c + k.val, Flat.lt j.isLt k.isLt⟩ := by
  have hjk : j.val * c + k.val < b * c := Flat.lt j.isLt k.isLt
  simp only [Tensor.reshape, ofFlat_apply3, Tensor.toFlat, Shape.numel, Nat.mul_one, Nat.div_one]
  apply get2_congr
  · exact Flat.div hjk
  · exact Flat.mod hjk

/-- Flattening the last two axes read at a split index `j·c + k` is entry `(i, j, k)`. -/
theorem reshape_flattenTail_split {a b c : Nat} (x : Tensor α [a, b, c])
    (h : Shape.numel [a, b, c] = Shape.numel [a, b * c]) (i : Fin a) (j : Fin b) (k : Fin c)
    (hjk : j.val * c + k.val < b * c) :
    Tensor.reshape [a, b * c] h x i ⟨j.val * c + k.val, hjk⟩ = x i j k := by
  rw [reshape_flattenTail_apply]
  apply get3_congr x rfl
  · exact Flat.div k.isLt
  · exact Flat.mod k.isLt

/-- **Flatten the first two axes**, `[a, b, c] → [a·b, c]`: entry `(m, k)` is `(m / b, m mod b, k)`. -/
theorem reshape_flattenHead_apply {a b c : Nat} (x : Tensor α [a, b, c])
    (h : Shape.numel [a, b, c] = Shape.numel [a * b, c]) (m : Fin (a * b)) (k : Fin c) :
    Tensor.reshape [a * b, c] h x m k = x ⟨m.val / b, Flat.div_lt m.isLt⟩ ⟨m.val % b, Flat.mod_lt m.isLt⟩ k := by
  simp only [Tensor.reshape, ofFlat_apply2]
  have e : m.val * c + k.val = (m.val / b) * (b * c) + ((m.val % b) * c + k.val) := by
    have := Flat.div_mul_add_mod m.val b
    rw [← Nat.mul_assoc, ← Nat.add_assoc, ← Nat.add_mul, this]
  have hlt : (m.val % b) * c + k.val < b * c := Flat.lt (Flat.mod_lt m.isLt) k.isLt
  rw [toFlat_apply3 x (m.val * c + k.val) _ (by rw [e, Flat.div hlt]; exact Flat.div_lt m.isLt)
    (by rw [e, Flat.mod hlt, Flat.div k.isLt]; exact Flat.mod_lt m.isLt)
    (by rw [e, Flat.mod hlt, Flat.mod k.isLt]; exact k.isLt)]
  apply get3_congr
  · show (m.val * c + k.val) / (b * c) = m.val / b
    rw [e, Flat.div hlt]
  · show (m.val * c + k.val) % (b * c) / c = m.val % b
    rw [e, Flat.mod hlt, Flat.div k.isLt]
  · show (m.val * c + k.val) % (b * c) % c = k.val
    rw [e, Flat.mod hlt, Flat.mod k.isLt]

/-! ## The graph -/

/-- Entrywise sum of two `[L, D]` terms. -/
@[macro_inline] def addTerm {Γ : List Shape} (L D : Nat) (a b : Term α Γ [L, D]) : Term α Γ [L, D] :=
  .op (.binary .add [L, D]) (.cons a (.cons b .nil))

/-- The resampled position table tiled over the frames, `[t·h·w, D]` (k3-spec §7). -/
@[macro_inline] def posTerm {Γ : List Shape} (t h w D m₁ m₂ : Nat) (table : Var Γ [m₁, m₂, D])
    (rows : Var Γ [h, m₁]) (cols : Var Γ [w, m₂]) : Term α Γ [t * (h * w), D] :=
  .op (.reshape [t, h * w, D] [t * (h * w), D] (by simp only [Shape.numel, Nat.mul_one, Nat.mul_assoc]))
    (.cons (.op (.broadcast t [h * w, D])
      (.cons (.op (.reshape [h, w, D] [h * w, D] (by simp only [Shape.numel, Nat.mul_one, Nat.mul_assoc]))
        (.cons (.op (.batchedMatMul h w m₂ D)
          (.cons (.op (.broadcast h [w, m₂]) (.cons (.var cols) .nil))
            (.cons (.op (.reshape [h, m₂ * D] [h, m₂, D] (by simp only [Shape.numel, Nat.mul_one]))
              (.cons (.op (.matMul h m₁ (m₂ * D))
                (.cons (.var rows)
                  (.cons (.op (.reshape [m₁, m₂, D] [m₁, m₂ * D] (by simp only [Shape.numel, Nat.mul_one]))
                    (.cons (.var table) .nil)) .nil))) .nil)) .nil))) .nil)) .nil)) .nil)

/-- The time rows spread over the tokens, `[t·h·w, D]`: token `l` reads row `l / (h·w)`. -/
@[macro_inline] def timeTerm {Γ : List Shape} (t h w D : Nat) (time : Var Γ [t, D]) :
    Term α Γ [t * (h * w), D] :=
  .op (.reshape [t, h * w, D] [t * (h * w), D] (by simp only [Shape.numel, Nat.mul_one, Nat.mul_assoc]))
    (.cons (.op (.swapAxes01 (h * w) t [D]) (.cons (.op (.broadcast (h * w) [t, D]) (.cons (.var time) .nil)) .nil)) .nil)

namespace EmbedGraph

/-- **The patch embedding as a model** (k3-spec §7): parameters `patchWeight [P, D]`,
`posTable [m₁, m₂, D]`; inputs `patches [t·h·w, P]`, `rows [h, m₁]`, `cols [w, m₂]`, `time [t, D]`;
output `embedding [t·h·w, D]` = projection + tiled position (+ spread time rows when `t ≠ 1`). -/
def model (t h w P D m₁ m₂ : Nat) : Model α where
  params := [("patchWeight", [P, D]), ("posTable", [m₁, m₂, D])]
  inputs := [("patches", [t * (h * w), P]), ("rows", [h, m₁]), ("cols", [w, m₂]), ("time", [t, D])]
  outputs := [("embedding", [t * (h * w), D])]
  body :=
    let proj : Term α _ [t * (h * w), D] :=
      .op (.matMul (t * (h * w)) P D) (.cons (.var (.there (.there .here))) (.cons (.var .here) .nil))
    let pos := posTerm t h w D m₁ m₂ (.there .here) (.there (.there (.there .here)))
      (.there (.there (.there (.there .here))))
    .cons (if t = 1 then addTerm _ _ proj pos
      else addTerm _ _ (addTerm _ _ proj pos) (timeTerm t h w D (.there (.there (.there (.there (.there .here))))))) .nil

/-- The embedding's weights as the graph's parameter environment. -/
def parameters {P D m₁ m₂ : Nat} (e : Embedding α P D m₁ m₂) :
    Env α (Signature.shapes [("patchWeight", [P, D]), ("posTable", [m₁, m₂, D])]) :=
  .cons e.patchWeight (.cons e.posTable .nil)

/-- A clip's patches and grid tables as the graph's inputs. -/
def inputs {t h w P D m₁ m₂ R : Nat} (patches : Tensor α [t * (h * w), P]) (g : GridTables α t h w D m₁ m₂ R) :
    Env α (model (α := α) t h w P D m₁ m₂).inputs.shapes :=
  .cons patches (.cons g.rows (.cons g.cols (.cons g.time .nil)))

/-- **The tiny embedding graph** (`fixtures/tiny/config.json`'s `vision_config`): 2 frames of
6 × 4 patches (rows ≠ columns, both axes resampled: 4 table rows up to 6, 6 columns down
to 4) of `3·3·3 = 27` values, width 20, the 4 × 6 table. -/
def modelTiny : Model Float := model 2 6 4 27 20 4 6

variable [Scalar α]

/-- Reading the position term: token `l` sees the resampled table at its row and column. -/
theorem eval_posTerm {Γ : List Shape} (t h w D m₁ m₂ : Nat) (table : Var Γ [m₁, m₂, D])
    (rows : Var Γ [h, m₁]) (cols : Var Γ [w, m₂]) (env : Env α Γ) (l : Fin (t * (h * w))) (d : Fin D) :
    (posTerm t h w D m₁ m₂ table rows cols).eval env l d =
      resample (env.get rows) (env.get cols) (env.get table) (rowOf l) (colOf l) d := by
  simp only [posTerm, Term.eval_op, Args.eval_cons, Args.eval_nil, Term.eval_var, PrimOp.eval_reshape,
    PrimOp.eval_broadcast, PrimOp.eval_batchedMatMul, PrimOp.eval_matMul]
  rw [reshape_flattenHead_apply]
  simp only [Tensor.broadcast]
  rw [reshape_flattenHead_apply]
  simp only [Tensor.batchedMatMul, Tensor.matMul, Tensor.vecMatMul, Tensor.broadcast, reshape_splitTail_apply,
    reshape_flattenTail_split, resample]
  rfl

/-- Reading the time term: token `l` sees its frame's row. -/
theorem eval_timeTerm {Γ : List Shape} (t h w D : Nat) (time : Var Γ [t, D]) (env : Env α Γ)
    (l : Fin (t * (h * w))) (d : Fin D) :
    (timeTerm t h w D time).eval env l d = env.get time (frameOf l) d := by
  simp only [timeTerm, Term.eval_op, Args.eval_cons, Args.eval_nil, Term.eval_var, PrimOp.eval_reshape,
    PrimOp.eval_broadcast, PrimOp.eval_swapAxes01]
  rw [reshape_flattenHead_apply]
  rfl

/-- **The embedding graph computes the patch embedding** (k3-spec §7): for every grid, frame
count, table size, width and patch size, `specFwd` of the graph on an embedding's weights and a
clip's patches and grid tables is `Vision.embed`. -/
theorem specFwd_eq_embed {t h w P D m₁ m₂ R : Nat} (e : Embedding α P D m₁ m₂)
    (g : GridTables α t h w D m₁ m₂ R) (patches : Tensor α [t * (h * w), P]) :
    (model t h w P D m₁ m₂).specFwd (parameters e) (inputs patches g) = .cons (embed e g patches) .nil := by
  simp only [Model.specFwd_eq, model, parameters, inputs, Env.append_cons, Env.append_nil]
  by_cases ht : t = 1
  · simp only [if_pos ht, Args.eval_cons, Args.eval_nil]
    congr 1
    funext l d
    simp only [addTerm, Term.eval_op, Args.eval_cons, Args.eval_nil, PrimOp.eval_binary, Tensor.zipWith,
      BinaryFn.apply, eval_posTerm, embed, if_pos ht]
    all_goals rfl
  · simp only [if_neg ht, Args.eval_cons, Args.eval_nil]
    congr 1
    funext l d
    simp only [addTerm, Term.eval_op, Args.eval_cons, Args.eval_nil, PrimOp.eval_binary, Tensor.zipWith,
      BinaryFn.apply, eval_posTerm, eval_timeTerm, embed, if_neg ht]
    all_goals rfl

end EmbedGraph

end Vision

end KimiK3
