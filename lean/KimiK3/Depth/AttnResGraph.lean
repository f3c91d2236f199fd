module

public import KimiK3.Depth.Graph
public import KimiK3.Sequence.KernelLemmas
public import KimiK3.Core.GraphEval

/-!
# The AttnRes graph denotes `attendPacked` (report Eq. 9–10, k3-spec §2.4)

Proved for every scalar model (`[Scalar α]`, no laws needed: the graph performs the kernel's
operations in the kernel's order):
* `eval_term`: with the gain all ones, the term `AttnRes.term` computes
  `attendPacked eps query values`;
* **`specFwd_eq_attendPacked`**: the same for the model `AttnRes.model n d eps`.
Over a field (`ScalarField α`): a general gain `g` is the unit-gain retrieval with the query
`w ⊙ g` (`eval_term_gain`, `specFwd_eq_attendPacked_gain`) — how a hub checkpoint's
`res_norm.weight` and `res_proj.weight` combine into one query.
The kernel/`Core` agreement lemmas come from `Sequence/KernelLemmas.lean`.
-/

@[expose] public section

namespace KimiK3

namespace AttnRes

variable {α : Type}

section Exact

variable [Scalar α]

/-- The graph term with gain input `g` computes, coordinate by coordinate, the softmax-weighted
mix of the rows with scores `w · RMSNorm_g(v_i)`. -/
theorem eval_term_apply {Γ : List Shape} (eps : α) (n d : Nat) (query gain : Var Γ [d])
    (values : Var Γ [n, d]) (env : Env α Γ) (k : Fin d) :
    (term eps n d query gain values).eval env k =
      finSum n (fun i => Tensor.softmaxVec (fun j => finSum d (fun c => env.get query c *
        Tensor.rmsNormVec eps (env.get values j) (env.get gain) c)) i * env.get values i k) := by
  simp only [term, Term.eval_op, Term.eval_var, Args.eval_cons, Args.eval_nil, PrimOp.eval_vecMatMul,
    PrimOp.eval_softmaxLast, PrimOp.eval_swapAxes01, PrimOp.eval_rmsNormLast, Tensor.softmaxLast_nil]
  rfl

/-- **The AttnRes term computes `attendPacked`** when its gain input is all ones. -/
theorem eval_term {Γ : List Shape} (eps : α) (n d : Nat) (query gain : Var Γ [d])
    (values : Var Γ [n, d]) (env : Env α Γ) (hg : env.get gain = fun _ => 1) :
    (term eps n d query gain values).eval env = attendPacked eps (env.get query) (env.get values) := by
  funext k
  rw [eval_term_apply, hg]
  simp [attendPacked, Seq.softmax_eq_core, Seq.rmsNorm_eq_core]

/-- **Denotation of the AttnRes graph** (report Eq. 9–10): for every scalar model, query and
sources, the model with unit gain computes `attendPacked eps query values`. -/
theorem specFwd_eq_attendPacked (n d : Nat) (eps : α) (query : Tensor α [d]) (values : Tensor α [n, d]) :
    (model n d eps).specFwd (.cons query (.cons (fun _ => 1) .nil)) (.cons values .nil) =
      .cons (attendPacked eps query values) .nil := by
  simp only [Model.specFwd, model, Args.eval_cons, Args.eval_nil]
  rw [eval_term eps n d _ _ _ _ rfl]
  rfl

end Exact

section Gain

variable [ScalarField α]

/-- With a general gain `g`, the term computes the unit-gain retrieval with query `w ⊙ g`. -/
theorem eval_term_gain {Γ : List Shape} (eps : α) (n d : Nat) (query gain : Var Γ [d])
    (values : Var Γ [n, d]) (env : Env α Γ) :
    (term eps n d query gain values).eval env =
      attendPacked eps (fun c => env.get query c * env.get gain c) (env.get values) := by
  funext k
  rw [eval_term_apply]
  simp only [attendPacked, Seq.softmax_eq_core, Seq.rmsNorm_eq_core,
    Seq.memoFn_eq, Seq.sum_eq, Seq.dot_eq]
  congr 1; funext i; congr 2; funext j; apply finSum_congr; intro c
  simp only [Tensor.rmsNormVec, Tensor.rmsNormVec.rmsWith]
  grind

/-- **A learned RMSNorm gain folds into the query**: the model with gain `g` computes
`attendPacked eps (w ⊙ g) values` (over any field model). -/
theorem specFwd_eq_attendPacked_gain (n d : Nat) (eps : α) (query gain : Tensor α [d])
    (values : Tensor α [n, d]) :
    (model n d eps).specFwd (.cons query (.cons gain .nil)) (.cons values .nil) =
      .cons (attendPacked eps (fun c => query c * gain c) values) .nil := by
  simp only [Model.specFwd, model, Args.eval_cons, Args.eval_nil]
  rw [eval_term_gain]
  rfl

end Gain

end AttnRes

end KimiK3
