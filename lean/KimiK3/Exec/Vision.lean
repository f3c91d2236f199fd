module

public import KimiK3.Exec.Ops
public import KimiK3.Vision.Merge

/-!
# The executable MoonViT-V2 block, encoder and merge-and-project equal the reference (k3-spec §7)

For every `[TrigScalar α]` (no laws: each entry is the reference's expression in the reference's
order): the scalar helpers `geluTanh_eq`, `ropeAngle_eq`; the RoPE tables
`ropeCos_eq`, `ropeSin_eq`; `normRows_eq`, `rotated_get` (the rotated query/key channel `2p + j`
is `rotatePairs` of `projectPairs`), `Block.scores_eq`, `Block.attention_eq`, `Block.mlp_eq`,
**`Block.forward_eq`** (`Vision.Block.forward`), **`Block.forwardClip_eq`** (with the library's
RoPE tables and score scale, what `Block.forwardClipF` evaluates), `foldBlocks_eq`,
**`encode_eq`** (`Vision.encode`); merge-and-project: `geluErf_eq`, `temporalMean_eq`,
`spaceToDepth_eq`, `Projector.forward_eq`, **`mergeProject_eq`** (`Vision.mergeProject`), and the
whole tower on one clip, **`clipFeatures_eq`** (`Vision.clipFeatures` with the library's patch
embedding stored once, what `vision_encoder`'s Lean leg evaluates).
-/

@[expose] public section

namespace KimiK3

namespace Exec

namespace Vision

variable {α : Type} [TrigScalar α]

theorem geluTanh_eq (x : α) : geluTanh x = KimiK3.Vision.geluTanh x := rfl

theorem ropeAngle_eq (theta : α) (R row col p : Nat) :
    ropeAngle theta R row col p = KimiK3.Vision.ropeAngle theta R row col p := rfl

theorem ropeCos_eq (theta : α) (R t h w : Nat) :
    (ropeCos theta R t h w).toTensor = KimiK3.Vision.ropeCos theta R t h w := by
  funext l p
  rw [Arr.toTensor_apply2, ropeCos, Arr.get_mat _ l.isLt p.isLt]
  rfl

theorem ropeSin_eq (theta : α) (R t h w : Nat) :
    (ropeSin theta R t h w).toTensor = KimiK3.Vision.ropeSin theta R t h w := by
  funext l p
  rw [Arr.toTensor_apply2, ropeSin, Arr.get_mat _ l.isLt p.isLt]
  rfl

/-- The reference block of an array-backed one: the per-head views of the checkpoint layouts
(query/key channel `2p + j` is pair `p`, component `j`). -/
noncomputable def Block.toSpec {D A R V M : Nat} (b : Block α D A R V M) : KimiK3.Vision.Block α D A R V M where
  norm0 := b.norm0.toTensor
  query := fun a d p j => b.query.toTensor d a ⟨2 * p.val + j.val, by have := p.isLt; have := j.isLt; omega⟩
  key := fun a d p j => b.key.toTensor d a ⟨2 * p.val + j.val, by have := p.isLt; have := j.isLt; omega⟩
  value := fun a d c => b.value.toTensor d a c
  output := b.output.toTensor
  norm1 := b.norm1.toTensor
  fc0 := b.fc0.toTensor
  fc1 := b.fc1.toTensor

theorem normRows_eq {L D : Nat} (eps : α) (x : Arr α [L, D]) (g : Arr α [D]) :
    (normRows eps x g).toTensor = KimiK3.Vision.Block.normRows eps x.toTensor g.toTensor := by
  funext l j
  simp only [normRows, KimiK3.Vision.Block.normRows, Arr.toTensor_apply2, Arr.toTensor_apply1,
    Arr.get_mat _ l.isLt j.isLt, Arr.get_vec _ l.isLt, Tensor.rmsNormVec, Tensor.rmsNormVec.rmsWith, sumTo_eq]

/-- The rotated channel `2p + j` of head `a`, token `l` is the reference's rotated pair. -/
theorem rotated_get {L D A R : Nat} (cos sin : Arr α [L, 2 * R]) (h : Arr α [L, D]) (w : Arr α [D, A, 4 * R])
    (a : Fin A) (wq : Tensor α [D, 2 * R, 2])
    (hw : ∀ (d : Fin D) (p : Fin (2 * R)) (j : Fin 2), wq d p j =
      w.toTensor d a ⟨2 * p.val + j.val, by have := p.isLt; have := j.isLt; omega⟩)
    (l : Fin L) (p : Fin (2 * R)) (j : Nat) (hj : j < 2) :
    (rotated cos sin h w).get ((a.val * L + l.val) * (4 * R) + (2 * p.val + j)) =
      KimiK3.Vision.rotatePairs (cos.toTensor l) (sin.toTensor l)
        (KimiK3.Vision.Block.projectPairs h.toTensor wq l) p ⟨j, hj⟩ := by
  have hp := p.isLt
  have hc : 2 * p.val + j < 4 * R := by omega
  have h0 : 2 * p.val < 4 * R := by omega
  have h1 : 2 * p.val + 1 < 4 * R := by omega
  have hdiv : (2 * p.val + j) / 2 = p.val := by omega
  simp only [rotated, Arr.get_ten3 _ a.isLt l.isLt hc, hdiv, Arr.get_ten3 _ a.isLt l.isLt h0,
    Arr.get_ten3 _ a.isLt l.isLt h1, sumTo_eq, KimiK3.Vision.rotatePairs, KimiK3.Vision.Block.projectPairs,
    Arr.toTensor_apply2, hw, Arr.toTensor_apply3]
  by_cases hj0 : j = 0
  · subst hj0
    simp
  · have hj1 : j = 1 := by omega
    subst hj1
    simp

namespace Block

variable {D A R V M : Nat}

theorem scores_eq {L : Nat} (b : Block α D A R V M) (scale : α) (cos sin : Arr α [L, 2 * R])
    (h : Arr α [L, D]) (a : Fin A) (l : Fin L) :
    (Arr.block [L] (scores scale (rotated cos sin h b.query) (rotated cos sin h b.key))
        ((a.val * L + l.val) * L)).toTensor =
      KimiK3.Vision.Block.scores b.toSpec scale cos.toTensor sin.toTensor h.toTensor a l := by
  funext m
  have hq0 := fun p : Fin (2 * R) => rotated_get cos sin h b.query a (b.toSpec.query a) (fun _ _ _ => rfl) l p 0 (by omega)
  have hq1 := fun p : Fin (2 * R) => rotated_get cos sin h b.query a (b.toSpec.query a) (fun _ _ _ => rfl) l p 1 (by omega)
  have hk0 := fun p : Fin (2 * R) => rotated_get cos sin h b.key a (b.toSpec.key a) (fun _ _ _ => rfl) m p 0 (by omega)
  have hk1 := fun p : Fin (2 * R) => rotated_get cos sin h b.key a (b.toSpec.key a) (fun _ _ _ => rfl) m p 1 (by omega)
  simp only [Nat.add_zero] at hq0 hk0
  simp only [Arr.toTensor_apply1, Arr.get_block _ _ _ (show m.val < Shape.numel [L] by simp), scores,
    Arr.get_ten3 _ a.isLt l.isLt m.isLt, sumTo_eq, hq0, hq1, hk0, hk1]
  rfl

theorem attention_eq {L : Nat} (b : Block α D A R V M) (scale : α) (cos sin : Arr α [L, 2 * R])
    (h : Arr α [L, D]) :
    (b.attention scale cos sin h).toTensor =
      KimiK3.Vision.Block.attention b.toSpec scale cos.toTensor sin.toTensor h.toTensor := by
  funext l e
  simp only [attention, KimiK3.Vision.Block.attention, Arr.toTensor_apply2, Arr.get_mat _ l.isLt e.isLt, sumTo_eq]
  congr 1; funext a; congr 1; funext c
  rw [Arr.get_ten3 _ a.isLt l.isLt c.isLt]
  congr 1
  · congr 1; funext m
    rw [arrayGetD_arrayOfFn, if_pos (Arr.flat2_lt a.isLt l.isLt), Arr.get_ten3 _ a.isLt m.isLt c.isLt,
      ← Arr.toTensor_apply1 (Arr.softmax _) m, Arr.toTensor_softmax, scores_eq]
    simp [Block.toSpec]
  · simp [Block.toSpec]

theorem mlp_eq {L : Nat} (b : Block α D A R V M) (h : Arr α [L, D]) :
    (b.mlp h).toTensor = KimiK3.Vision.Block.mlp b.toSpec h.toTensor := by
  funext l e
  simp only [mlp, KimiK3.Vision.Block.mlp, Arr.toTensor_apply2, Arr.get_mat _ l.isLt e.isLt, sumTo_eq]
  congr 1; funext k
  rw [Arr.get_mat _ l.isLt k.isLt, geluTanh_eq]
  simp [Block.toSpec]

/-- **The executable block is `Vision.Block.forward`.** -/
theorem forward_eq {L : Nat} (b : Block α D A R V M) (eps scale : α) (cos sin : Arr α [L, 2 * R])
    (x : Arr α [L, D]) :
    (b.forward eps scale cos sin x).toTensor =
      KimiK3.Vision.Block.forward b.toSpec eps scale cos.toTensor sin.toTensor x.toTensor := by
  have hx₁ : (Arr.mat L D (fun l d => x.get (l * D + d) +
      (b.attention scale cos sin (normRows eps x b.norm0)).get (l * D + d))).toTensor =
      fun l d => x.toTensor l d + KimiK3.Vision.Block.attention b.toSpec scale cos.toTensor sin.toTensor
        (KimiK3.Vision.Block.normRows eps x.toTensor b.toSpec.norm0) l d := by
    funext l d
    rw [Arr.toTensor_apply2, Arr.get_mat _ l.isLt d.isLt, ← Arr.toTensor_apply2 (b.attention _ _ _ _) l d,
      attention_eq, normRows_eq, Arr.toTensor_apply2]
    rfl
  funext l d
  simp only [forward]
  rw [Arr.toTensor_apply2, Arr.get_mat _ l.isLt d.isLt, ← Arr.toTensor_apply2 (Arr.mat L D _) l d,
    ← Arr.toTensor_apply2 (b.mlp _) l d, mlp_eq, normRows_eq, hx₁]
  rfl

/-- **The executable block on one clip, with its RoPE tables and score scale, is the reference
block with the library's tables** (what `Block.forwardClipF` evaluates). -/
theorem forwardClip_eq (b : Block α D A R V M) (eps theta : α) (t h w : Nat) (x : Arr α [t * (h * w), D]) :
    (b.forward eps (scoreScale R) (ropeCos theta R t h w) (ropeSin theta R t h w) x).toTensor =
      KimiK3.Vision.Block.forward b.toSpec eps (1 / Scalar.sqrt ((4 * R : Nat) : α))
        (KimiK3.Vision.ropeCos theta R t h w) (KimiK3.Vision.ropeSin theta R t h w) x.toTensor := by
  rw [forward_eq, ropeCos_eq, ropeSin_eq]
  rfl

end Block

theorem foldBlocks_eq {D A R V M L : Nat} (eps scale : α) (cos sin : Arr α [L, 2 * R])
    (blocks : List (Block α D A R V M)) (x : Arr α [L, D]) :
    (foldBlocks eps scale cos sin blocks x).toTensor =
      ModelList.foldl (fun b y => b.forward eps scale cos.toTensor sin.toTensor y)
        (listMap Block.toSpec blocks) x.toTensor := by
  induction blocks generalizing x with
  | nil => rfl
  | cons b bs ih => simp only [foldBlocks, listMap, ModelList.foldl, ih, Block.forward_eq]

/-- **The executable encoder is `Vision.encode`** (the blocks in order, then the final norm). -/
theorem encode_eq {D A R V M L : Nat} (blocks : List (Block α D A R V M)) (finalNorm : Arr α [D])
    (eps scale : α) (cos sin : Arr α [L, 2 * R]) (x : Arr α [L, D]) :
    (encode blocks finalNorm eps scale cos sin x).toTensor =
      KimiK3.Vision.encode (listMap Block.toSpec blocks) finalNorm.toTensor eps scale cos.toTensor sin.toTensor
        x.toTensor := by
  rw [encode, normRows_eq, foldBlocks_eq]
  rfl

/-! ## Merge and project -/

theorem geluErf_eq (x : α) : geluErf x = KimiK3.Vision.geluErf x := rfl

theorem temporalMean_eq {t h w D : Nat} (x : Arr α [t * (h * w), D]) :
    (temporalMean x).toTensor = KimiK3.Vision.temporalMean x.toTensor := by
  funext r c d
  simp only [temporalMean, KimiK3.Vision.temporalMean, Arr.toTensor_apply3, Arr.toTensor_apply2,
    Arr.get_ten3 _ r.isLt c.isLt d.isLt, sumTo_eq]

theorem spaceToDepth_eq {h' w' mH mW D : Nat} (x : Arr α [h' * mH, w' * mW, D]) :
    (spaceToDepth x).toTensor = KimiK3.Vision.spaceToDepth x.toTensor := by
  funext m n
  simp only [spaceToDepth, KimiK3.Vision.spaceToDepth, Arr.toTensor_apply2, Arr.toTensor_apply3,
    Arr.get_mat _ m.isLt n.isLt]

/-- The reference projector of an array-backed one. -/
noncomputable def Projector.toSpec {E T : Nat} (p : Projector α E T) : KimiK3.Vision.Projector α E T where
  first := p.first.toTensor
  second := p.second.toTensor
  norm := p.norm.toTensor

/-- **The executable projector is `Vision.Projector.forward`.** -/
theorem Projector.forward_eq {E T N : Nat} (p : Projector α E T) (eps : α) (x : Arr α [N, E]) :
    (p.forward eps x).toTensor = KimiK3.Vision.Projector.forward p.toSpec eps x.toTensor := by
  simp only [Projector.forward, KimiK3.Vision.Projector.forward]
  rw [normRows_eq]
  congr 1
  funext n o
  simp only [Arr.toTensor_apply2, Arr.get_mat _ n.isLt o.isLt, sumTo_eq]
  congr 1; funext k
  rw [Arr.get_mat _ n.isLt k.isLt, geluErf_eq]
  simp [Projector.toSpec]

/-- **The executable merge-and-project is `Vision.mergeProject`** (temporal mean, space-to-depth,
projector). -/
theorem mergeProject_eq {t h' w' mH mW D T : Nat} (p : Projector α (mH * (mW * D)) T) (eps : α)
    (y : Arr α [t * ((h' * mH) * (w' * mW)), D]) :
    (mergeProject p eps y).toTensor = KimiK3.Vision.mergeProject p.toSpec eps y.toTensor := by
  rw [mergeProject, Projector.forward_eq, spaceToDepth_eq, temporalMean_eq]
  rfl

/-- **The executable tower on one clip is `Vision.clipFeatures`**: the library's patch embedding
`Vision.embed` (stored once; its tables' rotary entries `cos`, `sin` are any, the embedding does
not read them), the executable encoder with the library's RoPE tables and score scale, the
executable merge-and-project, for the tower whose blocks, final norm and projector are the
reference views of the array-backed ones (what `vision_encoder`'s Lean leg evaluates). -/
theorem clipFeatures_eq {P D H₀ W₀ A R V M mH mW T : Nat} (emb : KimiK3.Vision.Embedding α P D H₀ W₀)
    (blocks : List (Block α D A R V M)) (finalNorm : Arr α [D]) (p : Projector α (mH * (mW * D)) T)
    (eps projEps theta : α) (F t h' w' : Nat) (hF : t ≤ F)
    (cos sin : Tensor α [t * ((h' * mH) * (w' * mW)), 2 * R]) (patches : Tensor α [t * ((h' * mH) * (w' * mW)), P]) :
    (mergeProject p projEps (encode blocks finalNorm eps (scoreScale R)
        (ropeCos theta R t (h' * mH) (w' * mW)) (ropeSin theta R t (h' * mH) (w' * mW))
        (Arr.ofTensor _ (KimiK3.Vision.embed emb
          ({ rows := KimiK3.Vision.weightMatrix H₀ (h' * mH), cols := KimiK3.Vision.weightMatrix W₀ (w' * mW),
             time := KimiK3.Vision.timeRows t hF (KimiK3.Vision.timeTable F D),
             cos := cos, sin := sin } :
            KimiK3.Vision.GridTables α t (h' * mH) (w' * mW) D H₀ W₀ R) patches)))).toTensor =
      KimiK3.Vision.clipFeatures
        (⟨emb, listMap Block.toSpec blocks, finalNorm.toTensor, p.toSpec⟩ :
          KimiK3.Vision.MoonViT α P D H₀ W₀ A R V M mH mW T) eps projEps theta F t h' w' hF patches := by
  rw [mergeProject_eq, encode_eq, ropeCos_eq, ropeSin_eq, Arr.toTensor_ofTensor]
  rfl

end Vision

end Exec

end KimiK3
