module

public import KimiK3.Vision.EmbedGraph

/-!
# Merge and project as one typed graph (k3-spec §2.9, §7)

The tail of the vision tower on one clip, `Vision.mergeProject`, as one graph
`MergeGraph.model`: input `features [t·(H·W), D]` (`H = h'·mH`, `W = w'·mW`), parameters
`first [E, E]`, `second [E, T]`, `norm [T]` (`E = mH·mW·D`); output
`tokens = RMSNorm_ε(GELU_erf(spaceToDepth(temporalMean features) · first) · second) ⊙ norm`.

Nodes: the temporal mean is `reshape [t, H·W, D]`, `swapAxes01`, a last-two-axes swap
(`swapLastTerm`: `swapAxes01`, `reshape`, `swapAxes01`, `reshape`) and `meanLast` over the frames;
the `mH × mW` space-to-depth is reshapes and two last-two-axes swaps (`spaceToDepthTerm`), with
the channel order `(dh·mW + dw)·D + c` of `spaceToDepth_apply`; the erf GELU is
`½ (u + u · erf(√(1/2) · u))` with the `erf` primitive (`geluErfTerm`, on the first projection
bound once by `let1`).

Proved: `eval_swapLastTerm`, `eval_meanTerm` (the frame mean), `eval_spaceToDepthTerm` (the
graph's merge is `spaceToDepth`), `eval_geluErfTerm` (`TrigLaws`: the node chain is `geluErf`),
and **`MergeGraph.specFwd_eq_mergeProject`** (`TrigLaws`): the graph computes `mergeProject` for
every projector, ε and clip. `modelTiny` is the tiny configuration's instance (exported as
`fixtures/graphs/vision_merge_project_tiny.json`).
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

/-- **The projector's erf GELU** of `u [N, E]` as a term (k3-spec §7, `nn.GELU()`):
`½ (u + u · erf(√(1/2) · u))`, i.e. `geluErf u = u · (1 + erf(u · √(1/2))) / 2` with the sums and
products written out (`eval_geluErfTerm`), the `erf` primitive in the middle. -/
@[macro_inline] def geluErfTerm [TrigScalar α] {Γ : List Shape} (N E : Nat) (u : Var Γ [N, E]) : Term α Γ [N, E] :=
  let x : Term α Γ [N, E] := .var u
  .op (.scale ((1 : α) / 2) [N, E]) (.cons (.op (.binary .add [N, E]) (.cons x (.cons (.op (.binary .mul [N, E])
    (.cons x (.cons (.op (.erf [N, E]) (.cons (.op (.scale (Scalar.sqrt (1 / 2)) [N, E]) (.cons x .nil)) .nil))
      .nil))) .nil))) .nil)

namespace MergeGraph

/-- **Merge and project one clip as a model** (k3-spec §2.9, §7; `Vision.mergeProject`): parameters
`first [E, E]` (`mm_projector.proj.0.weight`ᵀ), `second [E, T]` (`proj.2.weight`ᵀ), `norm [T]`
(`post_norm.weight`), input `features [t·((h'·mH)·(w'·mW)), D]` (the encoder's output on one clip);
output `tokens [h'·w', T] = RMSNorm_ε(GELU_erf(spaceToDepth(temporalMean features) · first) · second) ⊙ norm`,
`E = mH·(mW·D)`; the first projection is bound once (`let1`) and read three times by the GELU. -/
def model [TrigScalar α] (t h' w' mH mW D T : Nat) (eps : α) : Model α where
  params := [("first", [mH * (mW * D), mH * (mW * D)]), ("second", [mH * (mW * D), T]), ("norm", [T])]
  inputs := [("features", [t * ((h' * mH) * (w' * mW)), D])]
  outputs := [("tokens", [h' * w', T])]
  body := .cons (.let1 (.op (.matMul _ _ _)
      (.cons (spaceToDepthTerm h' w' mH mW D (meanTerm t _ D (.there (.there (.there .here)))))
        (.cons (.var .here) .nil)))
    (.op (.rmsNormLast eps [h' * w'] T) (.cons (.op (.matMul (h' * w') (mH * (mW * D)) T)
      (.cons (geluErfTerm _ _ .here) (.cons (.var (.there (.there .here))) .nil)))
      (.cons (.var (.there (.there (.there .here)))) .nil)))) .nil

/-- **A projector's weights as the graph's parameters** (k3-spec §7, checkpoint `mm_projector.`):
`first`, `second`, `norm` in `model`'s order. -/
def parameters {E T : Nat} (p : Projector α E T) : Env α [[E, E], [E, T], [T]] :=
  .cons p.first (.cons p.second (.cons p.norm .nil))

/-- **The tiny merge and project** (k3-spec §2.9, §7, at `fixtures/tiny/config.json`): 2 frames of 6 × 4 patches of
width 20, the 2 × 2 merge to 3 × 2 tokens of width 80, projected to the text width 24,
ε = 7·10⁻⁵ (`projector_ln_eps`). -/
def modelTiny : Model Float := model 2 3 2 2 2 20 24 0.00007

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

end Eval

/-- **The GELU node chain is `geluErf`** (k3-spec §7): `½ (u + u · erf(√(1/2) · u)) = geluErf u`
entrywise (the field laws reorder it). -/
theorem eval_geluErfTerm [TrigLaws α] {Γ : List Shape} {N E : Nat} (u : Var Γ [N, E]) (env : Env α Γ) :
    (geluErfTerm N E u).eval env = fun n k => geluErf (env.get u n k) := by
  funext n k
  simp only [geluErfTerm, Term.eval_op, Args.eval_cons, Args.eval_nil, Term.eval_var, PrimOp.eval_scale,
    PrimOp.eval_binary, PrimOp.eval_erf, Tensor.scale, Tensor.map, Tensor.zipWith, BinaryFn.apply, geluErf]
  grind

namespace MergeGraph

/-- **The merge-and-project graph computes `mergeProject`** (k3-spec §2.9, §7): for every projector,
ε and clip output `y` of `t` frames on an `(h'·mH) × (w'·mW)` grid. -/
theorem specFwd_eq_mergeProject [TrigLaws α] {t h' w' mH mW D T : Nat} (p : Projector α (mH * (mW * D)) T)
    (eps : α) (y : Tensor α [t * ((h' * mH) * (w' * mW)), D]) :
    (model t h' w' mH mW D T eps).specFwd (parameters p) (.cons y .nil) = .cons (mergeProject p eps y) .nil := by
  simp only [Model.specFwd_eq, model, parameters, Env.append_cons, Env.append_nil, Args.eval_cons, Args.eval_nil,
    Term.eval_let1, Term.eval_op, Term.eval_var, Env.get_here, Env.get_there, PrimOp.eval_matMul,
    PrimOp.eval_rmsNormLast, eval_spaceToDepthTerm, eval_geluErfTerm]
  rw [eval_meanTerm_grid]
  rfl

end MergeGraph

end Vision

end KimiK3
