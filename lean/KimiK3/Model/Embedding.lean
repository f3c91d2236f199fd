module

public import KimiK3.Model.LanguageModel

/-!
# Multimodal embedding slots (k3-spec §2.5; report §2.4)

A position of the input holds a text token id or a row of the MoonViT output (a serialized
media placeholder expands into visual rows). `embedMultimodal` resolves every slot to its
`d`-wide row: the token's embedding row or the visual row. The rows feed the model through
`LanguageModel.runEmbedded` (token by token) or `logitsWith` (layer-major), which
`Streaming.lean` proves equal.
-/

@[expose] public section

namespace KimiK3

/-- **An input slot** (k3-spec §2.5): a text token id, or an index into the visual rows. -/
inductive InputSlot (vocabSize visualTokens : Nat) where
  /-- A text token. -/
  | text (token : Fin vocabSize)
  /-- A row of the vision encoder's output. -/
  | visual (row : Fin visualTokens)

namespace LanguageModel

variable {α : Type} [Scalar α] {c : Config}

/-- The row of one slot: the embedding of a text token, or the visual row. -/
@[macro_inline] def embedSlot {visualTokens : Nat} (model : LanguageModel α c)
    (visual : Tensor α [visualTokens, c.hiddenDim]) (slot : InputSlot c.vocabSize visualTokens) :
    Tensor α [c.hiddenDim] :=
  match slot with
  | .text t => model.embedding t
  | .visual v => visual v

/-- **The multimodal embedding** (k3-spec §2.5 `embedMultimodal`): row `p` is the embedding of
slot `p`. -/
@[macro_inline] def embedMultimodal {visualTokens sequenceLength : Nat} (model : LanguageModel α c)
    (visual : Tensor α [visualTokens, c.hiddenDim])
    (slots : Fin sequenceLength → InputSlot c.vocabSize visualTokens) :
    Tensor α [sequenceLength, c.hiddenDim] :=
  fun p => model.embedSlot visual (slots p)

/-- The rows of a list of slots, in order (the input of `runEmbedded`). -/
@[macro_inline] def embedSlots {visualTokens : Nat} (model : LanguageModel α c)
    (visual : Tensor α [visualTokens, c.hiddenDim]) (slots : List (InputSlot c.vocabSize visualTokens)) :
    List (Tensor α [c.hiddenDim]) :=
  ModelList.map (model.embedSlot visual) slots

omit [Scalar α] in
/-- A text slot resolves to the token's embedding row. -/
theorem get_embedMultimodal_text {visualTokens sequenceLength : Nat} (model : LanguageModel α c)
    (visual : Tensor α [visualTokens, c.hiddenDim])
    (slots : Fin sequenceLength → InputSlot c.vocabSize visualTokens) (p : Fin sequenceLength)
    (t : Fin c.vocabSize) (h : slots p = .text t) :
    model.embedMultimodal visual slots p = model.embedding t := by
  simp only [embedMultimodal, embedSlot, h]

omit [Scalar α] in
/-- A visual slot resolves to the visual row. -/
theorem get_embedMultimodal_visual {visualTokens sequenceLength : Nat} (model : LanguageModel α c)
    (visual : Tensor α [visualTokens, c.hiddenDim])
    (slots : Fin sequenceLength → InputSlot c.vocabSize visualTokens) (p : Fin sequenceLength)
    (v : Fin visualTokens) (h : slots p = .visual v) :
    model.embedMultimodal visual slots p = visual v := by
  simp only [embedMultimodal, embedSlot, h]

omit [Scalar α] in
/-- A text-only slot list embeds as the token ids do (`run` on ids = `runEmbedded` on these). -/
theorem embedSlots_text {visualTokens : Nat} (model : LanguageModel α c)
    (visual : Tensor α [visualTokens, c.hiddenDim]) (tokens : List (Fin c.vocabSize)) :
    model.embedSlots visual (tokens.map InputSlot.text) = tokens.map model.embed := by
  induction tokens with
  | nil => rfl
  | cons t ts ih => exact congrArg (List.cons (model.embed t)) ih

end LanguageModel

end KimiK3
