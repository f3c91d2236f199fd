module

public import KimiK3.Sequence.KernelLemmas

/-!
# KDA, one head: the update, its coordinate form and the β = 1 / β = 0 facts
(k3-spec §2.2, report Eq. 1)

The state of one KDA head is a matrix `S : [keyDim, valueDim]` (rows: key channels, columns:
value channels). One token with query `q`, key `k`, value `v`, per-key-row retention `α` and
write strength `β` updates it as (report Eq. 1)

`S' = (I − β k kᵀ) Diag(α) S + β k vᵀ`,

computed in the factorized order of the article's `KDA.update` (defined in `Kernel.lean`): decay
each row by `α`, take the correction `kᵀ · decayed`, subtract `β k ⊗ correction`, add
`β k ⊗ v`. The output reads the *updated* state: `o = S'ᵀ q`.

Proved: the coordinate formula `update_get2`; the matrix form `update_apply_matrix`; with
`β = 0` only the decay is applied (`update_beta_zero`); with `β = 1` and a unit key the updated
state predicts exactly `v` for the key (`update_beta_one_predicts`), so a query equal to the
key reads `v` (`step_beta_one_reads_value`).
-/

@[expose] public section

namespace KimiK3

namespace KDA

variable {α : Type} {keyDim valueDim : Nat}

@[simp] theorem decay_apply [Scalar α] (S : State α keyDim valueDim) (a : Tensor α [keyDim])
    (r : Fin keyDim) (c : Fin valueDim) : decay S a r c = a r * S r c := rfl

@[simp] theorem read_apply [Scalar α] (S : State α keyDim valueDim) (q : Tensor α [keyDim])
    (c : Fin valueDim) : read S q c = finSum keyDim (fun r => q r * S r c) := by
  simp [read]

/-- The state part of `step` is `update`. -/
@[simp] theorem step_fst [Scalar α] (S : State α keyDim valueDim) (x : Input α keyDim valueDim) :
    (step S x).1 = update S x := by
  simp [step]

/-- The output part of `step` reads the updated state. -/
@[simp] theorem step_snd [Scalar α] (S : State α keyDim valueDim) (x : Input α keyDim valueDim) :
    (step S x).2 = read (update S x) x.query := by
  simp [step]

section Field

variable [ScalarField α]

/-- **Coordinate form of the KDA update** (report Eq. 1): for every row `r` and column `c`,
`S'[r,c] = α[r] S[r,c] − β k[r] (kᵀ decayed)[c] + β k[r] v[c]` with `decayed[s,t] = α[s] S[s,t]`. -/
theorem update_get2 (S : State α keyDim valueDim) (x : Input α keyDim valueDim)
    (r : Fin keyDim) (c : Fin valueDim) :
    update S x r c =
      x.retention r * S r c
        - x.writeStrength * x.key r *
            finSum keyDim (fun s => x.key s * (x.retention s * S s c))
        + x.writeStrength * x.key r * x.value c := by
  simp only [update, Seq.memo2_eq, Seq.memoFn_eq, decay, correction, Seq.sum_eq]
  grind

/-- The update in matrix form: `S' = (I − β k kᵀ) Diag(α) S + β k vᵀ`, entrywise
(report Eq. 1). -/
theorem update_apply_matrix (S : State α keyDim valueDim) (x : Input α keyDim valueDim)
    (r : Fin keyDim) (c : Fin valueDim) :
    update S x r c =
      finSum keyDim (fun s =>
        ((if r = s then 1 else 0) - x.writeStrength * x.key r * x.key s) *
          (x.retention s * S s c))
        + x.writeStrength * x.key r * x.value c := by
  rw [update_get2]
  have h : ∀ s : Fin keyDim,
      ((if r = s then (1 : α) else 0) - x.writeStrength * x.key r * x.key s) *
          (x.retention s * S s c) =
        (if r = s then 1 else 0) * (x.retention s * S s c)
          + -(x.writeStrength * x.key r * (x.key s * (x.retention s * S s c))) := fun _ => by grind
  rw [finSum_congr h, finSum_add, finSum_neg, ← finSum_mul_left,
    finSum_delta_mul' keyDim r (fun s => x.retention s * S s c)]
  grind

/-- With write strength `β = 0` the update only decays: `S' = Diag(α) S`. -/
theorem update_beta_zero (S : State α keyDim valueDim) (x : Input α keyDim valueDim)
    (h : x.writeStrength = 0) : update S x = decay S x.retention := by
  funext r c
  rw [update_get2, h, decay_apply]; grind

/-- With write strength `β = 1` and a unit key (`kᵀ k = 1`), the updated state predicts exactly
`v` for the key: `kᵀ S' = v` (the delta rule writes the value exactly). -/
theorem update_beta_one_predicts (S : State α keyDim valueDim) (x : Input α keyDim valueDim)
    (h : x.writeStrength = 1) (hk : finSum keyDim (fun r => x.key r * x.key r) = 1)
    (c : Fin valueDim) :
    finSum keyDim (fun r => x.key r * update S x r c) = x.value c := by
  simp only [update_get2, h]
  generalize hC : finSum keyDim (fun s => x.key s * (x.retention s * S s c)) = C
  have e : ∀ r : Fin keyDim, x.key r * (x.retention r * S r c - 1 * x.key r * C + 1 * x.key r * x.value c)
      = x.key r * (x.retention r * S r c) + (x.key r * x.key r) * (x.value c - C) := fun _ => by grind
  rw [finSum_congr e, finSum_add, finSum_mul_right, hk, hC]; grind

/-- With `β = 1`, a unit key and a query equal to the key, the step outputs exactly `v`. -/
theorem step_beta_one_reads_value (S : State α keyDim valueDim) (x : Input α keyDim valueDim)
    (h : x.writeStrength = 1) (hk : finSum keyDim (fun r => x.key r * x.key r) = 1)
    (hq : x.query = x.key) : (step S x).2 = x.value := by
  funext c
  rw [step_snd, read_apply, hq]
  exact update_beta_one_predicts S x h hk c

/-- **The query scale commutes with the readout**: reading with the scaled query `c q` is `c`
times the readout `Sᵀq` (so scaling the query, as the layer and fla do, equals scaling the
readout, as pybridge does). -/
theorem read_scale (S : State α keyDim valueDim) (c : α) (q : Tensor α [keyDim]) :
    read S (fun r => c * q r) = fun j => c * read S q j := by
  funext j
  simp only [read_apply]
  rw [← finSum_mul_left]
  exact finSum_congr (fun r => by grind)

end Field

end KDA

end KimiK3
