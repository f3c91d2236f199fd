module

public import KimiK3.Core.Kernel
public import KimiK3.Core.Program

/-!
# JSON export of typed graphs

`Model.toJson name m` serializes a `Model Float` to the interchange format `k3spec.graph.v1`
(documented in `docs/graph-format.md`, schema `fixtures/graph.schema.json`):

* `params`, `inputs`: named tensors with shapes and ids `0, 1, …` (parameters first);
* `nodes`: one per `Term.op`, in evaluation order (so every argument id is defined before it
  is used), each with `id`, `op`, `attrs`, `args` (ids) and the output `shape`;
  `let1` emits its bound term once and later uses refer to the same id, while a term written
  twice without `let1` is emitted twice;
* `outputs`: named ids.

`Program.toJson name p` writes the same format for a `Program Float` and emits each of the
program's shared bindings once.

`Float` attributes travel exactly as the decimal string of their IEEE-754 binary64 bits
(`Float.toBits`). Everything here is written with its own recursion, `String` operations and
`Array.push`/`Array.getD`, the subset the offline compiler handles.
-/

@[expose] public section

namespace KimiK3

namespace GraphJson

/-- A JSON string literal (names are identifiers; the schema rejects other characters). -/
def str (s : String) : String := "\"" ++ s ++ "\""

/-- Comma-separated items. -/
def joinComma : List String → String
  | [] => ""
  | [x] => x
  | x :: xs => x ++ ", " ++ joinComma xs

/-- A JSON array of natural numbers. -/
def natArray (l : List Nat) : String := "[" ++ joinComma (natStrings l) ++ "]"
where
  /-- Decimal strings of the numbers. -/
  natStrings : List Nat → List String
    | [] => []
    | n :: ns => toString n :: natStrings ns

/-- An exact `Float` attribute: its binary64 bits in decimal, and a display value. -/
def float (x : Float) : String :=
  "{\"float64_bits\": " ++ str (toString x.toBits.toNat) ++ ", \"display\": " ++ str (toString x) ++ "}"

/-- The operation name of a unary function. -/
def UnaryFn.name : UnaryFn → String
  | .neg => "neg" | .exp => "exp" | .log => "log"
  | .tanh => "tanh" | .sigmoid => "sigmoid" | .sqrt => "sqrt"

/-- The operation name of a binary function. -/
def BinaryFn.name : BinaryFn → String
  | .add => "add" | .sub => "sub" | .mul => "mul" | .div => "div"

/-- Operation name and attributes (a JSON object) of a primitive. -/
def opInfo : {ins : List Shape} → {out : Shape} → PrimOp Float ins out → String × String
  | _, _, .unary f _ => (UnaryFn.name f, "{}")
  | _, _, @PrimOp.erf _ _ _ => ("erf", "{}")
  | _, _, .binary f _ => (BinaryFn.name f, "{}")
  | _, _, .scale c _ => ("scale", "{\"c\": " ++ float c ++ "}")
  | _, _, .broadcast n _ => ("broadcast", "{\"n\": " ++ toString n ++ "}")
  | _, _, .sumLast _ _ => ("sumLast", "{}")
  | _, _, .meanLast _ _ => ("meanLast", "{}")
  | _, _, .vecMatMul _ _ => ("vecMatMul", "{}")
  | _, _, .matMul _ _ _ => ("matMul", "{}")
  | _, _, .batchedMatMul _ _ _ _ => ("batchedMatMul", "{}")
  | _, _, .outer _ _ => ("outer", "{}")
  | _, _, .swapAxes01 _ _ _ => ("swapAxes01", "{}")
  | _, _, .reshape _ _ _ => ("reshape", "{}")
  | _, _, .concat0 _ _ _ => ("concat0", "{}")
  | _, _, .concatLast _ _ _ => ("concatLast", "{}")
  | _, _, .softmaxLast _ _ => ("softmaxLast", "{}")
  | _, _, .rmsNormLast eps _ _ => ("rmsNormLast", "{\"eps\": " ++ float eps ++ "}")
  | _, _, .l2NormLast eps _ _ => ("l2NormLast", "{\"eps\": " ++ float eps ++ "}")

/-- The node ids of a context's entries, innermost binding last: the entry at context index `i`
is `ids[ids.size - 1 - i]`, so binding a value pushes its id (an array: a variable deep in a
large context is read in constant time, where a list took time linear in its index, about 64 s
of the paper-dimension decoder export, docs/benchmarks-lean.md). -/
abbrev Ids := Array Nat

/-- The id of context index `i` (0 past the context's end). -/
def idAt (ids : Ids) (i : Nat) : Nat :=
  if i < ids.size then ids.getD (ids.size - 1 - i) 0 else 0

/-- The id bound to a variable, given the ids of the context entries. -/
def varId {Γ : List Shape} {s : Shape} (v : Var Γ s) (ids : Ids) : Nat := idAt ids v.idx

/-- Serialization state: the next free id and the nodes emitted so far. -/
structure State where
  /-- The next free node id. -/
  next : Nat
  /-- The JSON objects of the emitted nodes. -/
  nodes : String

/-- Emit a node and return its id. -/
def emit (st : State) (op attrs : String) (args : List Nat) (shape : Shape) : State × Nat :=
  let obj := "{\"id\": " ++ toString st.next ++ ", \"op\": " ++ str op ++ ", \"attrs\": " ++ attrs ++
    ", \"args\": " ++ natArray args ++ ", \"shape\": " ++ natArray shape ++ "}"
  ({ next := st.next + 1, nodes := if st.nodes == "" then obj else st.nodes ++ ",\n    " ++ obj },
    st.next)

mutual

/-- Emit the nodes of a term (arguments first) and return the id of its value. -/
def termNodes : {Γ : List Shape} → {s : Shape} → Term Float Γ s → Ids → State → State × Nat
  | _, _, .var v, ids, st => (st, varId v ids)
  | _, out, .op p args, ids, st =>
    let r := argsNodes args ids st
    let info := opInfo p
    emit r.1 info.1 info.2 r.2 out
  | _, _, .let1 t b, ids, st =>
    let r := termNodes t ids st
    termNodes b (ids.push r.2) r.1

/-- Emit the nodes of an argument list and return the ids of its values. -/
def argsNodes : {Γ ss : List Shape} → Args Float Γ ss → Ids → State → State × List Nat
  | _, _, .nil, _, st => (st, [])
  | _, _, .cons t ts, ids, st =>
    let r := termNodes t ids st
    let rs := argsNodes ts ids r.1
    (rs.1, r.2 :: rs.2)

end

/-- The ids of a context whose entries are the signature's, ids `k, k+1, …` from the front, on
top of the context of `ids` (the front entry is innermost: pushed last). -/
def sigIds : Signature → Nat → Ids → Ids
  | [], _, ids => ids
  | _ :: rest, k, ids => (sigIds rest (k + 1) ids).push k

/-- JSON objects `{"name", "shape", "id"}` for a signature, ids from `k`. -/
def sigEntries : Signature → Nat → List String
  | [], _ => []
  | (n, s) :: rest, k =>
    ("{\"name\": " ++ str n ++ ", \"shape\": " ++ natArray s ++ ", \"id\": " ++ toString k ++ "}") ::
      sigEntries rest (k + 1)

/-- JSON objects `{"name", "shape", "id"}` for the outputs and their value ids. -/
def outputEntries : Signature → List Nat → List String
  | (n, s) :: rest, i :: is =>
    ("{\"name\": " ++ str n ++ ", \"shape\": " ++ natArray s ++ ", \"id\": " ++ toString i ++ "}") ::
      outputEntries rest is
  | _, _ => []

/-- The number of entries of a signature. -/
def sigLength : Signature → Nat
  | [] => 0
  | _ :: rest => sigLength rest + 1

/-- Emit the nodes of a chain of bindings; returns the ids of the final context. -/
def letsNodes : {Γ Δ : List Shape} → Lets Float Γ Δ → Ids → State → State × Ids
  | _, _, .nil, ids, st => (st, ids)
  | _, _, .bind t rest, ids, st =>
    let r := termNodes t ids st
    letsNodes rest (ids.push r.2) r.1

end GraphJson

open GraphJson in
/-- The `k3spec.graph.v1` JSON document of a program (bindings emitted once). -/
def Program.toJson (name : String) (p : Program Float) : String :=
  let np := sigLength p.params
  let ni := sigLength p.inputs
  let ids := sigIds p.params 0 (sigIds p.inputs np #[])
  let r := letsNodes p.lets ids { next := np + ni, nodes := "" }
  let o := argsNodes p.body r.2 r.1
  "{\n  \"format\": \"k3spec.graph.v1\",\n  \"name\": " ++ str name ++
    ",\n  \"params\": [" ++ joinComma (sigEntries p.params 0) ++
    "],\n  \"inputs\": [" ++ joinComma (sigEntries p.inputs np) ++
    "],\n  \"nodes\": [\n    " ++ o.1.nodes ++
    "\n  ],\n  \"outputs\": [" ++ joinComma (outputEntries p.outputs o.2) ++ "]\n}"

open GraphJson in
/-- The `k3spec.graph.v1` JSON document of a model. -/
def Model.toJson (name : String) (m : Model Float) : String :=
  let np := sigLength m.params
  let ni := sigLength m.inputs
  let ids := sigIds m.params 0 (sigIds m.inputs np #[])
  let r := argsNodes m.body ids { next := np + ni, nodes := "" }
  "{\n  \"format\": \"k3spec.graph.v1\",\n  \"name\": " ++ str name ++
    ",\n  \"params\": [" ++ joinComma (sigEntries m.params 0) ++
    "],\n  \"inputs\": [" ++ joinComma (sigEntries m.inputs np) ++
    "],\n  \"nodes\": [\n    " ++ r.1.nodes ++
    "\n  ],\n  \"outputs\": [" ++ joinComma (outputEntries m.outputs r.2) ++ "]\n}"

end KimiK3
