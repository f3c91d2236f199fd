module

public import KimiK3.Vision.EmbedGraph

/-!
# Merge and project as typed graphs (k3-spec §2.9, §7)

The tail of the vision tower on one clip, `Vision.mergeProject`, is two graphs around the
projector's erf GELU, because the primitive set has no `erf` (`UnaryFn` holds `neg`, `exp`, `log`,
`tanh`, `sigmoid`, `sqrt`; `erf` is in `TrigScalar`, not in `Scalar`):
* `MergeGraph.headModel`: input `features [t·(H·W), D]` (`H = h'·mH`, `W = w'·mW`), parameter
  `first [E, E]` (`E = mH·mW·D`); output `hidden = spaceToDepth (temporalMean features) · first`;
* `MergeGraph.tailModel`: input `activated [N, E]`, parameters `second [E, T]`, `norm [T]`;
  output `RMSNorm(activated · second) ⊙ norm`.

Nodes: the temporal mean is `reshape [t, H·W, D]`, `swapAxes01`, a last-two-axes swap
(`swapLastTerm`: `swapAxes01`, `reshape`, `swapAxes01`, `reshape`) and `meanLast` over the frames;
the `mH × mW` space-to-depth is reshapes and two last-two-axes swaps (`spaceToDepthTerm`), with
the channel order `(dh·mW + dw)·D + c` of `spaceToDepth_apply`.

Proved: `eval_swapLastTerm`, `eval_meanTerm` (the frame mean), `eval_spaceToDepthTerm` (the
graph's merge is `spaceToDepth`), `specFwd_headModel`, `specFwd_tailModel`, and
**`mergeProject_eq_graphs`**: `mergeProject` is the tail graph applied to the erf GELU of the head
graph's output, for all weights, ε and features. `headTiny`, `tailTiny` are the tiny
configuration's instances (exported as `fixtures/graphs/vision_merge_head_tiny.json`,
`vision_merge_tail_tiny.json`).
-/

@[expose] public section

namespace KimiK3

namespace Vision

variable {α : Type}

/-! ## Reshape coordinates -/

/-- The row-major entries of a matrix. -/
theorem toFlat_apply2 {a b : Nat} (x : Tensor α [a, b]) (k : Nat) (hk : k < Shape.numel [a, b])
    (h1 : k / b < a) (h2 : k % b < b) : Tensor.toFlat [a, b] x ⟨k, hk⟩ = x ⟨k / b, h1⟩ ⟨k % b, h2⟩ := by
  simp only [Tensor.toFlat, Shape.numel, Nat.mul_one, Nat.div_one]

/-- **Regrouping a matrix's axis lengths** (`a = a'`, `b = b'`, e.g. reassociated products)
keeps every entry. -/
theorem reshape_cast2_apply {a a' b b' : Nat} (x : Tensor α [a, b]) (ha : a = a') (hb : b = b')
    (h : Shape.numel [a, b] = Shape.numel [a', b']) (i : Fin a') (j : Fin b') :
    Tensor.reshape [a', b'] h x i j = x ⟨i.val, by have := i.isLt; omega⟩ ⟨j.val, by have := j.isLt; omega⟩ := by
  subst ha hb
  simp only [Tensor.reshape, ofFlat_apply2]
  rw [toFlat_apply2 x (i.val * b + j.val) _ (by rw [Flat.div j.isLt]; exact i.isLt)
    (by rw [Flat.mod j.isLt]; exact j.isLt)]
  exact get2_congr x (Flat.div j.isLt) (Flat.mod j.isLt)

/-! ## Terms -/

/-- **Swap the last two axes** of a rank-3 term, `[A, B, C] → [A, C, B]`, from `swapAxes01` and
reshapes: `[B, A, C]`, `[B, A·C]`, `[A·C, B]`, `[A, C, B]`. -/
@[macro_inline] def swapLastTerm {Γ : List Shape} (A B C : Nat) (x : Term α Γ [A, B, C]) : Term α Γ [A, C, B] :=
  .op (.reshape [A * C, B] [A, C, B] (by simp only [Shape.numel] <;> ac_rfl))
    (.cons (.op (.swapAxes01 B (A * C) [])
      (.cons (.op (.reshape [B, A, C] [B, A * C] (by simp only [Shape.numel] <;> ac_rfl))
        (.cons (.op (.swapAxes01 A B [C]) (.cons x .nil)) .nil)) .nil)) .nil)

/-- **The temporal mean** of `[t·n, D]` rows as a term (k3-spec §7): `[t, n, D]`, `[n, t, D]`,
`[n, D, t]`, `meanLast` over the frames. -/
@[macro_inline] def meanTerm {Γ : List Shape} (t n D : Nat) (y : Var Γ [t * n, D]) : Term α Γ [n, D] :=
  .op (.meanLast [n, D] t) (.cons (swapLastTerm n t D (.op (.swapAxes01 t n [D])
    (.cons (.op (.reshape [t * n, D] [t, n, D] (by simp only [Shape.numel] <;> ac_rfl))
      (.cons (.var y) .nil)) .nil))) .nil)

/-- **The `mH × mW` space-to-depth merge** of an `[(h'·mH)·(w'·mW), D]` grid as a term (k3-spec
§2.9): to `[h'·mH, w'·mW, D]`, `[h'·mH, w'·(mW·D)]`, `[h', mH, w'·(mW·D)]`, swap to
`[h', w'·(mW·D), mH]`, regroup to `[h'·w', mW·D, mH]`, swap to `[h'·w', mH, mW·D]`, flatten. -/
@[macro_inline] def spaceToDepthTerm {Γ : List Shape} (h' w' mH mW D : Nat)
    (x : Term α Γ [(h' * mH) * (w' * mW), D]) : Term α Γ [h' * w', mH * (mW * D)] :=
  let g : Term α Γ [h' * mH, w' * mW, D] := .op (.reshape _ _ (by simp only [Shape.numel] <;> ac_rfl)) (.cons x .nil)
  let r : Term α Γ [h' * mH, (w' * mW) * D] := .op (.reshape _ _ (by simp only [Shape.numel] <;> ac_rfl)) (.cons g .nil)
  let c : Term α Γ [h' * mH, w' * (mW * D)] := .op (.reshape _ _ (by simp only [Shape.numel] <;> ac_rfl)) (.cons r .nil)
  let s : Term α Γ [h', mH, w' * (mW * D)] := .op (.reshape _ _ (by simp only [Shape.numel] <;> ac_rfl)) (.cons c .nil)
  let u : Term α Γ [h', w' * (mW * D), mH] := swapLastTerm _ _ _ s
  let v : Term α Γ [h' * (w' * (mW * D)), mH] := .op (.reshape _ _ (by simp only [Shape.numel] <;> ac_rfl)) (.cons u .nil)
  let v' : Term α Γ [(h' * w') * (mW * D), mH] := .op (.reshape _ _ (by simp only [Shape.numel] <;> ac_rfl)) (.cons v .nil)
  let z : Term α Γ [h' * w', mW * D, mH] := .op (.reshape _ _ (by simp only [Shape.numel] <;> ac_rfl)) (.cons v' .nil)
  .op (.reshape _ _ (by simp only [Shape.numel] <;> ac_rfl)) (.cons (swapLastTerm _ _ _ z) .nil)

namespace MergeGraph

/-- **The merge head** (k3-spec §2.9, §7): parameter `first [E, E]` (`mm_projector.proj.0.weight`ᵀ),
input `features [t·((h'·mH)·(w'·mW)), D]` (the encoder's output on one clip); output
`hidden [h'·w', E] = spaceToDepth (temporalMean features) · first`, `E = mH·(mW·D)`. -/
def headModel (t h' w' mH mW D : Nat) : Model α where
  params := [("first", [mH * (mW * D), mH * (mW * D)])]
  inputs := [("features", [t * ((h' * mH) * (w' * mW)), D])]
  outputs := [("hidden", [h' * w', mH * (mW * D)])]
  body := .cons (.op (.matMul _ _ _)
    (.cons (spaceToDepthTerm h' w' mH mW D (meanTerm t _ D (.there .here))) (.cons (.var .here) .nil))) .nil

/-- **The projector's tail** (k3-spec §7): parameters `second [E, T]` (`proj.2.weight`ᵀ) and
`norm [T]` (`post_norm.weight`), input `activated [N, E]` (the GELU of the head's output); output
`tokens [N, T] = RMSNorm_ε(activated · second) ⊙ norm`. -/
def tailModel (N E T : Nat) (eps : α) : Model α where
  params := [("second", [E, T]), ("norm", [T])]
  inputs := [("activated", [N, E])]
  outputs := [("tokens", [N, T])]
  body := .cons (.op (.rmsNormLast eps [N] T) (.cons (.op (.matMul N E T)
    (.cons (.var (.there (.there .here))) (.cons (.var .here) .nil))) (.cons (.var (.there .here)) .nil))) .nil

/-- **The tiny merge head** (`fixtures/tiny/config.json`): 2 frames of 6 × 4 patches of width 20,
the 2 × 2 merge to 3 × 2 tokens of width 80. -/
def headTiny : Model Float := headModel 2 3 2 2 2 20

/-- **The tiny projector tail**: 6 merged tokens of width 80 to the text width 24, ε = 7·10⁻⁵
(`projector_ln_eps`). -/
def tailTiny : Model Float := tailModel 6 80 24 0.00007

end MergeGraph

/-! ## What the terms compute -/

section Eval

variable [Scalar α]

/-- Reading the last-two-axes swap. -/
theorem eval_swapLastTerm {Γ : List Shape} {A B C : Nat} (x : Term α Γ [A, B, C]) (env : Env α Γ)
    (a : Fin A) (c : Fin C) : (swapLastTerm A B C x).eval env a c = fun b => x.eval env a b c := by
  funext b
  simp only [swapLastTerm, Term.eval_op, Args.eval_cons, Args.eval_nil, PrimOp.eval_reshape,
    PrimOp.eval_swapAxes01]
  rw [Tensor.reshape_unflat3]
  simp only [Tensor.swapAxes01]
  rw [reshape_flattenTail_split]
  rfl

/-- Reading the temporal mean: `(Σ_f y[f·n + k, d]) / t`. -/
theorem eval_meanTerm {Γ : List Shape} {t n D : Nat} (y : Var Γ [t * n, D]) (env : Env α Γ)
    (k : Fin n) (d : Fin D) : (meanTerm t n D y).eval env k d =
      finSum t (fun f => env.get y ⟨f.val * n + k.val, Flat.lt f.isLt k.isLt⟩ d) / (t : α) := by
  simp only [meanTerm, Term.eval_op, Args.eval_cons, Args.eval_nil, PrimOp.eval_meanLast,
    Tensor.meanLast_cons_apply, Tensor.meanLast_nil]
  rw [eval_swapLastTerm]
  simp only [Term.eval_op, Args.eval_cons, Args.eval_nil, PrimOp.eval_reshape, PrimOp.eval_swapAxes01,
    Tensor.swapAxes01, Term.eval_var]
  congr 1
  congr 1
  funext f
  rw [Tensor.reshape_unflat3]

/-- The temporal-mean term read on a grid is `temporalMean`. -/
theorem eval_meanTerm_grid {Γ : List Shape} {t h w D : Nat} (y : Var Γ [t * (h * w), D]) (env : Env α Γ) :
    (fun (r : Fin h) (c : Fin w) (d : Fin D) =>
      (meanTerm t (h * w) D y).eval env ⟨r.val * w + c.val, Flat.lt r.isLt c.isLt⟩ d) = temporalMean (env.get y) := by
  funext r c d
  rw [eval_meanTerm]
  rfl

/-- The merged index arithmetic: `m·X + x = (m / w')·(w'·X) + ((m mod w')·X + x)`. -/
theorem merge_flat {w' X m x : Nat} : m * X + x = m / w' * (w' * X) + (m % w' * X + x) := by
  have e := Nat.div_add_mod m w'
  conv => lhs; rw [← e]
  grind

/-- **The space-to-depth term computes `spaceToDepth`** of the grid its rows form. -/
theorem eval_spaceToDepthTerm {Γ : List Shape} {h' w' mH mW D : Nat}
    (x : Term α Γ [(h' * mH) * (w' * mW), D]) (env : Env α Γ) :
    (spaceToDepthTerm h' w' mH mW D x).eval env =
      spaceToDepth (fun r c d => x.eval env ⟨r.val * (w' * mW) + c.val, Flat.lt r.isLt c.isLt⟩ d) := by
  funext m n
  simp only [spaceToDepthTerm, Term.eval_op, Args.eval_cons, Args.eval_nil, PrimOp.eval_reshape]
  rw [reshape_flattenTail_apply, eval_swapLastTerm]
  dsimp only
  simp only [Term.eval_op, Args.eval_cons, Args.eval_nil, PrimOp.eval_reshape]
  rw [Tensor.reshape_unflat3, reshape_cast2_apply _ (Nat.mul_assoc h' w' (mW * D)).symm rfl,
    reshape_flattenHead_apply, eval_swapLastTerm]
  dsimp only
  simp only [Term.eval_op, Args.eval_cons, Args.eval_nil, PrimOp.eval_reshape]
  rw [Tensor.reshape_unflat3, reshape_cast2_apply _ rfl (Nat.mul_assoc w' mW D), reshape_flattenTail_apply,
    Tensor.reshape_unflat3]
  simp only [spaceToDepth]
  have hw : 0 < w' := by
    rcases Nat.eq_zero_or_pos w' with h | h
    · subst h; have := m.isLt; simp at this
    · exact h
  have hX : n.val % (mW * D) < mW * D := Flat.mod_lt (a := mH) n.isLt
  have hlt : m.val % w' * (mW * D) + n.val % (mW * D) < w' * (mW * D) := Flat.lt (Nat.mod_lt _ hw) hX
  have e := merge_flat (w' := w') (X := mW * D) (m := m.val) (x := n.val % (mW * D))
  have e2 : m.val % w' * (mW * D) + n.val % (mW * D) = (m.val % w' * mW) * D + n.val % (mW * D) := by
    rw [Nat.mul_assoc]
  have hD : 0 < D := by
    rcases Nat.eq_zero_or_pos D with h | h
    · subst h; simp at hX
    · exact h
  apply get2_congr
  · show ((m.val * (mW * D) + n.val % (mW * D)) / (w' * (mW * D)) * mH + n.val / (mW * D)) * (w' * mW) +
        (m.val * (mW * D) + n.val % (mW * D)) % (w' * (mW * D)) / D =
          (m.val / w' * mH + n.val / (mW * D)) * (w' * mW) + (m.val % w' * mW + n.val / D % mW)
    rw [e, Flat.div hlt, Flat.mod hlt, e2, Nat.add_comm _ (n.val % (mW * D)), Nat.add_mul_div_right _ _ hD,
      Nat.mod_mul_left_div_self, Nat.add_comm (n.val / D % mW)]
  · show (m.val * (mW * D) + n.val % (mW * D)) % (w' * (mW * D)) % D = _
    rw [e, Flat.mod hlt, e2, Nat.add_comm, Nat.add_mul_mod_self_right, Nat.mod_mul_left_mod]

namespace MergeGraph

/-- The head graph computes the merged tokens' first projection. -/
theorem specFwd_headModel {t h' w' mH mW D : Nat} (first : Tensor α [mH * (mW * D), mH * (mW * D)])
    (y : Tensor α [t * ((h' * mH) * (w' * mW)), D]) :
    (headModel t h' w' mH mW D).specFwd (.cons first .nil) (.cons y .nil) =
      .cons (Tensor.matMul (spaceToDepth (temporalMean y)) first) .nil := by
  simp only [Model.specFwd_eq, headModel, Env.append_cons, Env.append_nil, Args.eval_cons, Args.eval_nil,
    Term.eval_op, Term.eval_var, PrimOp.eval_matMul, eval_spaceToDepthTerm, Env.get_here]
  rw [eval_meanTerm_grid]
  rfl

/-- The tail graph computes `RMSNorm(activated · second) ⊙ norm`. -/
theorem specFwd_tailModel {N E T : Nat} (eps : α) (second : Tensor α [E, T]) (norm : Tensor α [T])
    (a : Tensor α [N, E]) :
    (tailModel N E T eps).specFwd (.cons second (.cons norm .nil)) (.cons a .nil) =
      .cons (fun l => Tensor.rmsNormVec eps (Tensor.matMul a second l) norm) .nil := by
  simp only [Model.specFwd_eq, tailModel, Env.append_cons, Env.append_nil, Args.eval_cons, Args.eval_nil,
    Term.eval_op, Term.eval_var, Env.get_here, Env.get_there, PrimOp.eval_matMul, PrimOp.eval_rmsNormLast]
  rfl

end MergeGraph

end Eval

/-- **Merge and project is the two graphs around the erf GELU** (k3-spec §2.9, §7): for every
projector, ε and clip output `y` of `t` frames on an `(h'·mH) × (w'·mW)` grid, `mergeProject` is
the tail graph on `geluErf` of the head graph's output (the GELU is the one node the primitive set
lacks). -/
theorem mergeProject_eq_graphs [TrigScalar α] {t h' w' mH mW D T : Nat} (p : Projector α (mH * (mW * D)) T)
    (eps : α) (y : Tensor α [t * ((h' * mH) * (w' * mW)), D]) :
    Env.cons (mergeProject p eps y) .nil =
      (MergeGraph.tailModel (h' * w') (mH * (mW * D)) T eps).specFwd (.cons p.second (.cons p.norm .nil))
        (.cons (Tensor.map geluErf [h' * w', mH * (mW * D)]
          ((MergeGraph.headModel t h' w' mH mW D).specFwd (.cons p.first .nil) (.cons y .nil)).head) .nil) := by
  rw [MergeGraph.specFwd_headModel, MergeGraph.specFwd_tailModel]
  rfl

end Vision

end KimiK3
