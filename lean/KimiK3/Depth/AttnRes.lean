module

public import KimiK3.Depth.Kernel
public import KimiK3.Sequence.KernelLemmas
public import KimiK3.Core.Softmax

/-!
# Properties of depth attention (report Eq. 9–10, k3-spec §2.4)

`attendPacked eps w V` is `Σ_i a_i v_i` with `a = softmax(score)`, `score_i = w · RMSNorm(v_i)`
(`attendPacked_eq_weights`). Proved over every model of `ScalarLaws` (so for ℝ), for a
nonempty set of sources:
* `weights_pos`, `sum_weights`, `weights_le_one`: the weights are positive and sum to one;
* `weights_eq_exp`: the stabilizing shift is invisible, `a_i = e^{score_i} / Σ_j e^{score_j}`
  (the report's form, without max-subtraction);
* `attendPacked_le`, `le_attendPacked`, `attendPacked_mem_interval`: each output coordinate is a
  convex combination of the sources' coordinates, hence lies between their least and largest
  values; `abs_attendPacked_le`: `|h_k| ≤ M` when every `|v_ik| ≤ M`;
* `attendPacked_const`: identical sources are returned unchanged.
-/

@[expose] public section

namespace KimiK3

namespace AttnRes

variable {α : Type} {n d : Nat}

section Defs

variable [Scalar α]

/-- The score of one source (report Eq. 9): `w · RMSNorm(v)` with unit gain and stabilizer
`eps`. -/
@[macro_inline] def score (eps : α) (query v : Tensor α [d]) : α :=
  Seq.dot query (Seq.rmsNorm eps v (fun _ => 1))

/-- The depth-attention weights (report Eq. 10): the softmax of the sources' scores. -/
@[macro_inline] def weights (eps : α) (query : Tensor α [d]) (values : Tensor α [n, d]) :
    Tensor α [n] :=
  Seq.softmax (fun i => score eps query (values i))

/-- `attendPacked` is the weights' mix of the un-normalized sources. -/
theorem attendPacked_eq_weights (eps : α) (query : Tensor α [d]) (values : Tensor α [n, d]) :
    attendPacked eps query values =
      fun k => finSum n (fun i => weights eps query values i * values i k) := by
  funext k; simp [attendPacked, weights, score]

end Defs

section Laws

variable [ScalarLaws α]

/-- Every depth-attention weight is positive. -/
theorem weights_pos (eps : α) (query : Tensor α [d]) (values : Tensor α [n, d]) (i : Fin n) :
    0 < weights eps query values i := by
  rw [weights, Seq.softmax_eq_core]; exact Tensor.softmaxVec_pos _ i

/-- **The weights of a nonempty set of sources sum to one.** -/
theorem sum_weights (eps : α) (query : Tensor α [d]) (values : Tensor α [n + 1, d]) :
    finSum (n + 1) (weights eps query values) = 1 := by
  rw [weights, Seq.softmax_eq_core]; exact Tensor.finSum_softmaxVec _

/-- Every weight is at most one. -/
theorem weights_le_one (eps : α) (query : Tensor α [d]) (values : Tensor α [n, d]) (i : Fin n) :
    weights eps query values i ≤ 1 := by
  rw [weights, Seq.softmax_eq_core]; exact Tensor.softmaxVec_le_one _ i

/-- **The report's weights** (Eq. 10, no max-subtraction): `a_i = e^{score_i} / Σ_j e^{score_j}`. -/
theorem weights_eq_exp (eps : α) (query : Tensor α [d]) (values : Tensor α [n + 1, d])
    (i : Fin (n + 1)) :
    weights eps query values i = Scalar.exp (score eps query (values i)) /
      finSum (n + 1) (fun j => Scalar.exp (score eps query (values j))) :=
  Seq.softmax_eq_exp _ i

/-- **Upper bound**: if every source's coordinate `k` is at most `hi`, so is the output's. -/
theorem attendPacked_le (eps : α) (query : Tensor α [d]) (values : Tensor α [n + 1, d]) (k : Fin d)
    (hi : α) (h : ∀ i, values i k ≤ hi) : attendPacked eps query values k ≤ hi := by
  rw [attendPacked_eq_weights]
  have hle : finSum (n + 1) (fun i => weights eps query values i * values i k) ≤
      finSum (n + 1) (fun i => weights eps query values i * hi) :=
    finSum_le_finSum (fun i => Lean.Grind.OrderedRing.mul_le_mul_of_nonneg_left (h i)
      (Std.le_of_lt (weights_pos eps query values i)))
  rw [finSum_mul_right, sum_weights] at hle
  grind

/-- **Lower bound**: if every source's coordinate `k` is at least `lo`, so is the output's. -/
theorem le_attendPacked (eps : α) (query : Tensor α [d]) (values : Tensor α [n + 1, d]) (k : Fin d)
    (lo : α) (h : ∀ i, lo ≤ values i k) : lo ≤ attendPacked eps query values k := by
  rw [attendPacked_eq_weights]
  have hle : finSum (n + 1) (fun i => weights eps query values i * lo) ≤
      finSum (n + 1) (fun i => weights eps query values i * values i k) :=
    finSum_le_finSum (fun i => Lean.Grind.OrderedRing.mul_le_mul_of_nonneg_left (h i)
      (Std.le_of_lt (weights_pos eps query values i)))
  rw [finSum_mul_right, sum_weights] at hle
  grind

/-- **Convex combination**: the output coordinate lies in every interval `[lo, hi]` containing
all the sources' coordinates (so between `min_i v_ik` and `max_i v_ik`). -/
theorem attendPacked_mem_interval (eps : α) (query : Tensor α [d]) (values : Tensor α [n + 1, d])
    (k : Fin d) (lo hi : α) (h : ∀ i, lo ≤ values i k ∧ values i k ≤ hi) :
    lo ≤ attendPacked eps query values k ∧ attendPacked eps query values k ≤ hi :=
  ⟨le_attendPacked eps query values k lo (fun i => (h i).1),
    attendPacked_le eps query values k hi (fun i => (h i).2)⟩

/-- **Magnitude bound**: `|h_k| ≤ M` when every source has `|v_ik| ≤ M`. -/
theorem abs_attendPacked_le (eps : α) (query : Tensor α [d]) (values : Tensor α [n + 1, d])
    (k : Fin d) (M : α) (h : ∀ i, Scalar.abs (values i k) ≤ M) :
    Scalar.abs (attendPacked eps query values k) ≤ M := by
  have hb := attendPacked_mem_interval eps query values k (-M) M (fun i => by
    have h1 := h i; have h2 := le_abs_self (values i k); have h3 := neg_le_abs (values i k)
    constructor <;> grind)
  unfold Scalar.abs
  rcases max_eq_or (attendPacked eps query values k) (-attendPacked eps query values k) with e | e <;>
    rw [e] <;> grind

/-- Identical sources are returned unchanged (the weights sum to one). -/
theorem attendPacked_const (eps : α) (query v : Tensor α [d]) :
    attendPacked eps query (fun (_ : Fin (n + 1)) => v) = v := by
  funext k
  have := attendPacked_mem_interval eps query (fun (_ : Fin (n + 1)) => v) k (v k) (v k)
    (fun _ => ⟨Std.le_refl _, Std.le_refl _⟩)
  grind

end Laws

end AttnRes

end KimiK3
