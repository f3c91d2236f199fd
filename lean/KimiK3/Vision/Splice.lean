module

public import KimiK3.Model.Embedding
public import KimiK3.Vision.Merge

/-!
# Splicing the visual tokens into the text (k3-spec §2.5, §2.9, §7)

A prompt marks each visual token with the media placeholder id (`media_placeholder_token_id`,
163605 in the release). `splice ph tokens h` turns the ids into input slots: the `k`-th
placeholder becomes visual row `k`, every other id stays text. It takes a proof `h` that the
placeholder count **equals** the number `N` of projected rows — a prompt with too few or too
many placeholders has no splice (pybridge reports the two counts). For one clip of an
`(h'·mH) × (w'·mW)` grid, `N = h'·w'` (`Merge.lean`, `mergeProject_rows`); several clips'
rows are stacked in prompt order. `spliceClip` is that case: the prompt's placeholder count must
equal the merged token count `h'·w'` of the clip (`spliceClip_count`).

`multimodalPrefill` runs the language model token by token on the spliced rows
(`LanguageModel.runEmbedded` on `embedSlots`).

Proved: `splice_length` (one slot per id), **`splice_visualRows`** (the visual slots read rows
`0, 1, …, N−1` in order: every projected row exactly once), `splice_textTokens` (the text slots
are the non-placeholder ids in order), **`spliceClip_count`** (for one clip: placeholder count =
merged token count, the hypothesis the splice takes).
-/

@[expose] public section

namespace KimiK3

namespace Vision

variable {V : Nat}

/-- The number of placeholder ids in a prompt (k3-spec §2.5). -/
def placeholderCount (ph : Fin V) : List (Fin V) → Nat
  | [] => 0
  | t :: ts => (if t = ph then 1 else 0) + placeholderCount ph ts

/-- Slots from the `k`-th visual row on: the next placeholder reads row `k` (k3-spec §2.5). -/
def spliceFrom (ph : Fin V) (N : Nat) : (tokens : List (Fin V)) → (k : Nat) →
    k + placeholderCount ph tokens = N → List (InputSlot V N)
  | [], _, _ => []
  | t :: ts, k, h =>
    if ht : t = ph then
      .visual ⟨k, by simp only [placeholderCount, ht, if_true] at h; omega⟩ ::
        spliceFrom ph N ts (k + 1) (by simp only [placeholderCount, ht, if_true] at h; omega)
    else
      .text t :: spliceFrom ph N ts k (by simp only [placeholderCount, ht, if_false] at h; omega)

/-- **The splice** of `N` visual rows into a prompt with exactly `N` placeholders (k3-spec §2.5):
the `k`-th placeholder reads visual row `k`, every other id stays text. -/
def splice (ph : Fin V) {N : Nat} (tokens : List (Fin V)) (h : placeholderCount ph tokens = N) :
    List (InputSlot V N) :=
  spliceFrom ph N tokens 0 (by omega)

/-- The visual rows a list of slots reads, in order (k3-spec §2.5). -/
def visualRows {N : Nat} : List (InputSlot V N) → List Nat
  | [] => []
  | .visual v :: rest => v.val :: visualRows rest
  | .text _ :: rest => visualRows rest

/-- The text ids of a list of slots, in order (k3-spec §2.5). -/
def textTokens {N : Nat} : List (InputSlot V N) → List (Fin V)
  | [] => []
  | .visual _ :: rest => textTokens rest
  | .text t :: rest => t :: textTokens rest

/-- `[k, k + 1, …, k + n − 1]` (the rows a splice reads). -/
def rowsFrom (k : Nat) : Nat → List Nat
  | 0 => []
  | n + 1 => k :: rowsFrom (k + 1) n

/-- The ids that are not the placeholder, in order (k3-spec §2.5). -/
def withoutPlaceholder (ph : Fin V) : List (Fin V) → List (Fin V)
  | [] => []
  | t :: ts => if t = ph then withoutPlaceholder ph ts else t :: withoutPlaceholder ph ts

theorem spliceFrom_length (ph : Fin V) (N : Nat) (tokens : List (Fin V)) (k : Nat)
    (h : k + placeholderCount ph tokens = N) : (spliceFrom ph N tokens k h).length = tokens.length := by
  induction tokens generalizing k with
  | nil => rfl
  | cons t ts ih =>
    by_cases ht : t = ph
    · simp only [spliceFrom, ht, dite_true, List.length_cons, ih]
    · simp only [spliceFrom, ht, dite_false, List.length_cons, ih]

/-- One slot per id. -/
theorem splice_length (ph : Fin V) {N : Nat} (tokens : List (Fin V)) (h : placeholderCount ph tokens = N) :
    (splice ph tokens h).length = tokens.length :=
  spliceFrom_length ph N tokens 0 _

theorem spliceFrom_visualRows (ph : Fin V) (N : Nat) (tokens : List (Fin V)) (k : Nat)
    (h : k + placeholderCount ph tokens = N) :
    visualRows (spliceFrom ph N tokens k h) = rowsFrom k (placeholderCount ph tokens) := by
  induction tokens generalizing k with
  | nil => rfl
  | cons t ts ih =>
    by_cases ht : t = ph
    · simp only [spliceFrom, ht, dite_true, visualRows, ih, placeholderCount, if_true]
      rw [Nat.add_comm 1, rowsFrom]
    · simp only [spliceFrom, ht, dite_false, visualRows, ih, placeholderCount, if_false, Nat.zero_add]

/-- **Every projected row is read exactly once, in order**: the visual slots of the splice are
rows `0, 1, …, N − 1`. -/
theorem splice_visualRows (ph : Fin V) {N : Nat} (tokens : List (Fin V)) (h : placeholderCount ph tokens = N) :
    visualRows (splice ph tokens h) = rowsFrom 0 N := by
  unfold splice; rw [spliceFrom_visualRows, h]

theorem spliceFrom_textTokens (ph : Fin V) (N : Nat) (tokens : List (Fin V)) (k : Nat)
    (h : k + placeholderCount ph tokens = N) :
    textTokens (spliceFrom ph N tokens k h) = withoutPlaceholder ph tokens := by
  induction tokens generalizing k with
  | nil => rfl
  | cons t ts ih =>
    by_cases ht : t = ph
    · simp only [spliceFrom, ht, dite_true, textTokens, ih, withoutPlaceholder, if_true]
    · simp only [spliceFrom, ht, dite_false, textTokens, ih, withoutPlaceholder, if_false]

/-- The text slots of the splice are the prompt's other ids, in order. -/
theorem splice_textTokens (ph : Fin V) {N : Nat} (tokens : List (Fin V)) (h : placeholderCount ph tokens = N) :
    textTokens (splice ph tokens h) = withoutPlaceholder ph tokens :=
  spliceFrom_textTokens ph N tokens 0 _

/-- **The splice of one clip's visual tokens** (k3-spec §2.5, §7): the clip's `h'·w'` merged
tokens go into a prompt whose placeholder count is exactly `h'·w'`. -/
def spliceClip (ph : Fin V) (h' w' : Nat) (tokens : List (Fin V))
    (h : placeholderCount ph tokens = h' * w') : List (InputSlot V (h' * w')) :=
  splice ph tokens h

/-- **Placeholder count = merged token count**: for a clip on a `(h'·mH) × (w'·mW)` patch grid,
a prompt can take its visual tokens exactly when its placeholders number `(h/mH)·(w/mW)`, and then
every merged token is read once, in order. -/
theorem spliceClip_count (ph : Fin V) (h' w' mH mW : Nat) (hH : 0 < mH) (hW : 0 < mW)
    (tokens : List (Fin V)) (h : placeholderCount ph tokens = h' * w') :
    placeholderCount ph tokens = (h' * mH) / mH * ((w' * mW) / mW) ∧
      visualRows (spliceClip ph h' w' tokens h) = rowsFrom 0 (h' * w') := by
  rw [mergeProject_rows h' w' mH mW hH hW]
  exact ⟨h, splice_visualRows ph tokens h⟩

/-- **Multimodal prefill** (k3-spec §2.5): the prompt's slots (placeholders replaced by the
projected rows `visual`, in order) run through the language model token by token from its
initial state. -/
@[macro_inline] def multimodalPrefill {α : Type} [Scalar α] {c : Config} {N : Nat}
    (model : LanguageModel α c) (visual : Tensor α [N, c.hiddenDim]) (ph : Fin c.vocabSize)
    (tokens : List (Fin c.vocabSize)) (h : placeholderCount ph tokens = N) :
    LanguageModel.State α c × List (Tensor α [c.vocabSize]) :=
  model.runEmbedded model.initialState (model.embedSlots visual (splice ph tokens h))

end Vision

end KimiK3
