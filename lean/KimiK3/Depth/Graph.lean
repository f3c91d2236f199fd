module

public import KimiK3.Depth.Kernel
public import KimiK3.Core.Json

/-!
# The AttnRes retrieval as a typed graph (definitions; report Eq. 9–10, k3-spec §2.4)

`AttnRes.term` builds depth attention from primitive nodes: `rmsNormLast` of the source rows
(with a gain input, all ones for AttnRes), `swapAxes01`, `vecMatMul` with the query (the scores),
`softmaxLast`, and `vecMatMul` of the weights with the **un-normalized** rows. `AttnRes.model`
wraps it with parameters `query [d]`, `norm_gain [d]` and the input `values [n, d]`;
`jsonTiny` is its `k3spec.graph.v1` export on the tiny fixture (3 sources, `d = 24`,
`ε = 2e-5`, the tiny configuration's `attn_res_norm_eps`). Definitions only (executable, for the codegen bundle); the meaning is proved in
`AttnResGraph.lean` (`specFwd_eq_attendPacked`).
-/

@[expose] public section

namespace KimiK3

namespace AttnRes

variable {α : Type}

/-- **Depth attention as a graph term** (report Eq. 9–10) over context variables: the source
rows `values : [n, d]`, the query `[d]` and the RMSNorm gain `[d]` (all ones for AttnRes, whose
scores use unit gain). Nodes: `rmsNormLast eps` of the rows, `swapAxes01`, `vecMatMul` with the
query (scores `[n]`), `softmaxLast`, `vecMatMul` of the weights with the raw rows. The builder
takes variables so that a caller can share its inputs (`let1`) without re-indexing. -/
@[macro_inline] def term {Γ : List Shape} (eps : α) (n d : Nat) (query gain : Var Γ [d])
    (values : Var Γ [n, d]) : Term α Γ [d] :=
  .op (.vecMatMul n d)
    (.cons (.op (.softmaxLast [] n)
        (.cons (.op (.vecMatMul d n)
            (.cons (.var query)
              (.cons (.op (.swapAxes01 n d [])
                  (.cons (.op (.rmsNormLast eps [n] d) (.cons (.var values) (.cons (.var gain) .nil)))
                    .nil)) .nil))) .nil))
      (.cons (.var values) .nil))

/-- **The AttnRes retrieval model** over `n` sources of width `d` with RMSNorm stabilizer `eps`:
parameters `query [d]` (the learned per-layer query `w`) and `norm_gain [d]` (ones for the
report's unit gain; a hub checkpoint's `*_res_norm.weight` also fits, see
`specFwd_eq_attendPacked_gain`), input `values [n, d]` (the sources as rows, embedding first),
output `output [d]`. -/
@[macro_inline] def model (n d : Nat) (eps : α) : Model α where
  params := [("query", [d]), ("norm_gain", [d])]
  inputs := [("values", [n, d])]
  outputs := [("output", [d])]
  body := .cons (term eps n d .here (.there .here) (.there (.there .here))) .nil

/-- The `k3spec.graph.v1` JSON export of the AttnRes retrieval model on the tiny fixture:
3 sources, `d = hidden_size = 24`, `ε = attn_res_norm_eps = 2e-5`. -/
def jsonTiny : String := Model.toJson "attnres_tiny" (model (α := Float) 3 24 2e-5)

end AttnRes

end KimiK3
