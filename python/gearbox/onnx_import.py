"""ONNX import: an ONNX model -> a gearbox .gbx model + .npy side files (docs/import.md).

    gearbox import model.onnx -o model.gbx             # the CLI runs this module
    python3 -m gearbox.onnx_import model.onnx -o model.gbx
    gearbox.onnx_import.import_model("model.onnx", "model.gbx")

Why Python: python3-onnx is the ONNX project's own reader (protobuf schema, shape inference,
numpy_helper for every tensor encoding); a C++ reader would need its own protobuf build and a
vendored onnx.proto, for a one-shot conversion whose output is checked by gearbox's parser anyway.

Every ONNX op the importer maps is one row of OPS below: the gearbox ops it needs and the
function that writes its IR. A row whose gearbox op is missing from this build (gearbox.op_names())
reports the node as unsupported, saying which op it needs. Any unsupported node, of whatever
kind, is collected; the import then fails with one error listing every one by name and op type,
and writes nothing. The output is written to a temporary directory beside it, loaded back with
gearbox.load (so the model is verified by the same parser the CLI uses), and only then moved
into place, .npy files first and the .gbx last.

Shape arithmetic is folded, not imported. Exported models compute shapes at run time
(Shape -> Gather -> Unsqueeze -> Concat -> Reshape, Div for C // groups, Cast, Slice). The
importer tracks every value whose elements it knows, as numbers (initializers, Constant) or as
dim expressions (_Dim: a graph input's dim_param symbol, sums, products and floor divisions of
them), and every value's symbolic shape, by its own shape inference for each op it maps. A node
whose inputs are all known is evaluated here (FOLD) and never written; a mapped op reading a
known value where gearbox wants an attribute (Reshape's shape, Slice's starts, Clip's min) gets
it as that attribute. Known values become `const` lines only where a written op uses them as a
tensor, so shape-only constants never reach the .gbx.
"""

import argparse
import os
import re
import shutil
import sys
import tempfile

import numpy as np

from . import _gearbox, _safe_io

_DTYPES = {1: "f32", 6: "i32", 7: "i64"}  # onnx.TensorProto FLOAT, INT32, INT64
_NP_DTYPES = {np.dtype("float32"): "f32", np.dtype("int32"): "i32", np.dtype("int64"): "i64"}
_ONNX_NP = {1: np.float32, 6: np.int32, 7: np.int64, 11: np.float64, 9: np.bool_}
_INT64_MAX = 2**63 - 1
# The largest constant the importer makes itself, by folding (an Expand or ConstantOfShape of
# known sizes, a broadcast, a Concat) or for a written op (a broadcast LayerNorm scale): an
# initializer's limit (_check_tensor), since a folded value is held here and, when a written op
# reads it, written as a .npy the CLI reads back under the same limit. Checked on the result's
# shape before any array is made: Expand of a 4-byte scalar to [1e5, 1e5] is a 40 GB array
# otherwise, allocated before anything could fail.
MAX_CONSTANT_BYTES = _safe_io.MAX_INPUT_FILE_BYTES


# gearbox.Error's kinds and the CLI's wording of them (graph/error.h, errorKindName).
_LABELS = {"parse": "parse error", "shape": "shape error", "index": "index error",
           "io": "I/O error", "gear": "gear error", "config": "config error"}


class ImportFailure(_gearbox.Error):
    """A model gearbox cannot import: a gearbox.Error whose `kind` is one of gearbox.Error's
    ("io", "parse", ...); the CLI prints it as "gearbox: <label>: <message>"."""

    def __init__(self, kind, message):
        super().__init__(message)
        self.kind = kind
        self.label = _LABELS.get(kind, "error")


class _Unsupported(Exception):
    """Raised by one op row: this node cannot be expressed (the reason says why)."""


def _ident(text, fallback):
    """An IR identifier ([A-Za-z_][A-Za-z0-9_]*) from an ONNX name."""
    s = re.sub(r"[^A-Za-z0-9_]", "_", text or "")
    if not s:
        s = fallback
    if s[0].isdigit():
        s = "_" + s
    return s


# ---- dim expressions --------------------------------------------------------------------------
#
# A dim is a Python int or a _Dim: sum(coeff * atom) + const, in a canonical form so that two
# computations of the same size compare equal (Reshape needs "is this the input's dim at this
# position?"). Atoms: ("sym", name) a graph input's dim_param; ("anon", k) a size nobody named
# (a graph input dim without dim_param, a ceil_mode pool over a symbol); ("div", d, c) floor
# division of a non-divisible expression by c > 0; ("mul", a, b) a product of two expressions.
# Sizes are non-negative, so ONNX's truncating integer Div is floor division on them.


class _Dim:
    __slots__ = ("terms", "const")

    def __init__(self, terms, const):
        self.terms = terms  # tuple of (atom, coeff), sorted by the atom's text
        self.const = const

    def __eq__(self, other):
        return isinstance(other, _Dim) and self.terms == other.terms and self.const == other.const

    def __hash__(self):
        return hash((self.terms, self.const))

    def __repr__(self):
        return _dim_str(self)

    def symbols(self):
        out = []
        for atom, _ in self.terms:
            if atom[0] == "sym":
                out.append(atom[1])
            elif atom[0] in ("div", "mul"):
                for part in atom[1:]:
                    if isinstance(part, _Dim):
                        out += part.symbols()
        return out


def _atom_str(atom):
    kind = atom[0]
    if kind == "sym":
        return atom[1]
    if kind == "anon":
        return f"?{atom[1]}"
    if kind == "div":
        inner = _dim_str(atom[1])
        return f"({inner}) // {atom[2]}" if isinstance(atom[1], _Dim) and (
            len(atom[1].terms) > 1 or atom[1].const) else f"{inner} // {atom[2]}"
    return f"({_dim_str(atom[1])}) * ({_dim_str(atom[2])})"


def _dim_str(d):
    if isinstance(d, (int, np.integer)):
        return str(int(d))
    parts = []
    for atom, c in d.terms:
        text = _atom_str(atom)
        if c == 1:
            parts.append(("+", text))
        elif c == -1:
            parts.append(("-", text))
        else:
            parts.append(("-" if c < 0 else "+", f"{abs(c)}*{text}"))
    if d.const:
        parts.append(("-" if d.const < 0 else "+", str(abs(d.const))))
    out = ("-" if parts[0][0] == "-" else "") + parts[0][1]
    for sign, text in parts[1:]:
        out += f" {sign} {text}"
    return out


def _lin(d):
    if isinstance(d, (int, np.integer)):
        return {}, int(d)
    return dict(d.terms), d.const


def _mk(terms, const):
    items = tuple(sorted(((a, c) for a, c in terms.items() if c), key=lambda kv: _atom_str(kv[0])))
    return _Dim(items, int(const)) if items else int(const)


def _sym(name):
    return _Dim(((("sym", name), 1),), 0)


def d_add(a, b):
    ta, ca = _lin(a)
    tb, cb = _lin(b)
    for atom, c in tb.items():
        ta[atom] = ta.get(atom, 0) + c
    return _mk(ta, ca + cb)


def d_neg(a):
    t, c = _lin(a)
    return _mk({k: -v for k, v in t.items()}, -c)


def d_sub(a, b):
    return d_add(a, d_neg(b))


def d_mul(a, b):
    if isinstance(b, (int, np.integer)):
        a, b = b, a
    if isinstance(a, (int, np.integer)):
        t, c = _lin(b)
        return _mk({k: v * int(a) for k, v in t.items()}, c * int(a))
    x, y = sorted((a, b), key=_dim_str)
    return _mk({("mul", x, y): 1}, 0)


def d_floordiv(a, b):
    if not isinstance(b, (int, np.integer)):
        raise _Unsupported(f"a division by the dim expression {_dim_str(b)}")
    b = int(b)
    if b <= 0:
        raise _Unsupported(f"a division of a dim by {b}")
    if isinstance(a, (int, np.integer)):
        return int(a) // b
    t, c = _lin(a)
    q, r = divmod(c, b)  # (T + q*b + r) // b == (T + r) // b + q, for any T
    if all(v % b == 0 for v in t.values()):  # (b*T' + r) // b == T' when 0 <= r < b
        return _mk({k: v // b for k, v in t.items()}, q)
    return d_add(_mk({("div", _mk(t, r), b): 1}, 0), q)


def _ir_expr(d):
    """d in the IR's dim-expression syntax (docs/IR.md: one symbol, floor((a * S + b) / c),
    '/' floor division), or None where the IR cannot spell it (two symbols, a product, a
    multiple of a quotient, a size nobody named)."""
    if _is_static(d):
        return str(d)
    if len(d.terms) != 1:
        return None
    (atom, coeff), const = d.terms[0], d.const
    if atom[0] == "sym" and coeff >= 1:
        text = atom[1] if coeff == 1 else f"{coeff} * {atom[1]}"
    elif atom[0] == "div" and coeff == 1:
        inner = _ir_expr(atom[1])
        if inner is None:
            return None
        text = f"({inner}) / {atom[2]}"
    else:
        return None
    if const:
        text += f" + {const}" if const > 0 else f" - {-const}"
    return text


def _is_static(d):
    return isinstance(d, (int, np.integer))


def _prod(dims):
    out = 1
    for d in dims:
        out = d_mul(out, d)
    return out


# ---- the importer -----------------------------------------------------------------------------


class _Importer:
    def __init__(self, model, stem, name):
        import onnx
        import onnx.numpy_helper  # noqa: F401  (submodules are not imported by "import onnx")

        self.onnx = onnx
        self.model = model
        self.graph = model.graph
        self.stem = stem
        self.graph_name = _ident(name or self.graph.name, "main")
        self.opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")),
                          1)
        self.ops = set(_gearbox.op_names())
        self.names = {}  # onnx value name -> gearbox value name
        self.used = set()
        self.lines = []
        self.files = {}  # .npy file name -> array
        self.known = {}  # onnx value name -> np.ndarray: numbers, or objects (ints and _Dims)
        self.shapes = {}  # onnx value name -> [int | _Dim] (None: rank unknown)
        self.etypes = {}  # onnx value name -> onnx element type
        self.emitted = set()  # onnx values that exist in the .gbx (inputs, op results, consts)
        self.poisoned = set()  # results of unsupported nodes: their consumers are not mapped
        self.attr_read = set()  # known values read as attributes (dropped if never emitted)
        self.dim_names = {}  # _Dim -> the IR name used for it in reshape targets
        self.input_symbols = set()  # dim_param symbols of the graph inputs
        self.anon = 0
        self.unsupported = []  # (node name, op type, reason)
        self.folded = 0  # nodes evaluated here, not written
        self.fused_inputs = {}  # id(last node of a fused pattern) -> the ONNX values it reads
        self.fusions_written = {}  # gearbox op -> patterns written as it (layer_norm, gelu)
        self.absorbed = 0  # nodes of fused patterns other than their last

    # ---- names, shapes, constants -------------------------------------------------------------

    def value(self, onnx_name):
        """The gearbox name of an ONNX value, made unique and valid on first use."""
        if onnx_name not in self.names:
            base = re.sub(r"[^A-Za-z0-9_.]", "_", onnx_name) or "v"
            name, n = base, 1
            while name in self.used:
                name, n = f"{base}_{n}", n + 1
            self.used.add(name)
            self.names[onnx_name] = name
        return "%" + self.names[onnx_name]

    def new_anon(self):
        self.anon += 1
        return _Dim(((("anon", self.anon), 1),), 0)

    def _shape_of(self, vi):
        if not vi.type.HasField("tensor_type") or not vi.type.tensor_type.HasField("shape"):
            return None
        dims = []
        for d in vi.type.tensor_type.shape.dim:
            if d.HasField("dim_value"):
                dims.append(int(d.dim_value))
            elif d.HasField("dim_param") and d.dim_param:
                dims.append(_sym(_ident(d.dim_param, "D")))
            else:
                dims.append(self.new_anon())
        return dims

    def dim_text(self, d):
        """A graph input dim as the IR spells it: a size, a symbol, or -1."""
        if _is_static(d):
            return str(d)
        if len(d.terms) == 1 and d.const == 0 and d.terms[0][1] == 1 and d.terms[0][0][0] == "sym":
            return d.terms[0][0][1]
        return "-1"

    def dim_name(self, d):
        """An IR name for dim expression d in a reshape target, where it means "the input's dim
        at this position". A bare symbol is its own name; any other expression gets a name
        derived from the symbol it comes from (the name only documents intent)."""
        text = self.dim_text(d)
        if text != "-1":
            return text
        if d not in self.dim_names:
            syms = d.symbols()
            base = _ident(syms[0], "d") if syms else "d"
            self.dim_names[d] = f"{base}_{len(self.dim_names) + 1}"
        return self.dim_names[d]

    def const_line(self, onnx_name, array, where):
        dt = _NP_DTYPES.get(array.dtype)
        if dt is None:
            raise _Unsupported(f"{where}: dtype {array.dtype} (gearbox has f32, i32, i64)")
        out = self.value(onnx_name)
        fname = f"{self.stem}.{self.names[onnx_name]}.npy"
        self.files[fname] = np.array(array, order="C")  # ascontiguousarray makes 0-D 1-D
        self.known.setdefault(onnx_name, array)
        self.shapes.setdefault(onnx_name, list(array.shape))
        self.emitted.add(onnx_name)
        shape = ", ".join(str(d) for d in array.shape)
        self.lines.append(f'  {out} = const {dt}[{shape}] "{fname}"')

    def const_of(self, onnx_name):
        """The numeric value of a known ONNX value (None if not known or symbolic)."""
        a = self.known.get(onnx_name)
        if a is None or a.dtype == object:
            return None
        return a

    def tensor(self, onnx_name):
        """The IR value of `onnx_name` as an op's tensor input; a known value not written yet
        becomes a const here (a dim expression cannot: the IR has no run-time dims yet)."""
        if onnx_name in self.emitted:
            return self.value(onnx_name)
        a = self.known.get(onnx_name)
        if a is None:
            raise _Unsupported(f"input {onnx_name} is not defined")
        if a.dtype == object:
            if not all(_is_static(v) for v in a.flat):
                raise _Unsupported(
                    f"{onnx_name} = [{', '.join(_dim_str(v) for v in a.flat)}] is used as a "
                    f"tensor; a tensor of dim expressions needs a dim expression in the IR")
            a = a.astype(_ONNX_NP.get(self.etypes.get(onnx_name, 7), np.int64))
        self.const_line(onnx_name, a, f"value {onnx_name}")
        return self.value(onnx_name)

    def set_out(self, name, dims, etype, known=None):
        self.shapes[name] = None if dims is None else list(dims)
        self.etypes[name] = etype
        if known is not None:
            self.known[name] = known

    def shape(self, name, what="input"):
        dims = self.shapes.get(name)
        if dims is None:
            raise _Unsupported(f"{what} {name} has a shape of unknown rank")
        return dims

    def attr_input(self, node, i, what):
        """Input i of `node` where gearbox wants an attribute: a known value (None if absent)."""
        if len(node.input) <= i or not node.input[i]:
            return None
        name = node.input[i]
        a = self.known.get(name)
        if a is None:
            src = "a graph input" if any(v.name == name for v in self.graph.input) else \
                "computed at run time"
            raise _Unsupported(f"{what} (input {i}, {name}) is not a constant ({src}); "
                               f"gearbox takes it as an attribute")
        self.attr_read.add(name)
        return a

    def int_list(self, node, i, what, default=None):
        a = self.attr_input(node, i, what)
        if a is None:
            return default
        vals = list(a.reshape(-1))
        if not all(_is_static(v) for v in vals):
            raise _Unsupported(f"{what} = [{', '.join(_dim_str(v) for v in vals)}] needs a dim "
                               "expression in the IR")
        return [int(v) for v in vals]

    # ---- the walk -------------------------------------------------------------------------------

    def run(self):
        g = self.graph
        numpy_helper = self.onnx.numpy_helper
        initializers = {t.name: t for t in g.initializer}
        inputs = []
        for vi in g.input:
            if vi.name in initializers:
                continue
            elem = vi.type.tensor_type.elem_type
            if elem not in _DTYPES:
                self.unsupported.append((vi.name, "graph input", f"element type {elem}"))
                self.poisoned.add(vi.name)
                continue
            dims = self._shape_of(vi)
            if dims is None:
                self.unsupported.append((vi.name, "graph input", "no shape"))
                self.poisoned.add(vi.name)
                continue
            self.set_out(vi.name, dims, elem)
            self.emitted.add(vi.name)
            for d in dims:
                if not _is_static(d):
                    self.input_symbols.update(d.symbols())
            text = ", ".join(self.dim_text(d) for d in dims)
            inputs.append(f"{self.value(vi.name)}: {_DTYPES[elem]}[{text}]")
        for name, t in initializers.items():
            try:
                arr = numpy_helper.to_array(t)
            except Exception as e:  # an element type onnx cannot read (99, say)
                raise ImportFailure("parse", f"initializer '{name[:80]}' (element type "
                                             f"{t.data_type}): cannot read its data: "
                                             f"{type(e).__name__}: {e}") from None
            self.set_out(name, arr.shape, t.data_type, arr)
        consumers = {}
        for node in g.node:
            for n in node.input:
                consumers.setdefault(n, []).append(node)
        self.consumers = consumers
        self.producer = {o: node for node in g.node for o in node.output if o}
        graph_outputs = {o.name for o in g.output}
        # Patterns written as one gearbox op (the decomposed LayerNorm, Gelu's erf and tanh
        # forms): {id(last node): (op, fn)}, and every other node of a pattern is absorbed.
        members = _plan_fusions(self, graph_outputs)
        folded_nodes = set()
        for i, node in enumerate(g.node):
            label = node.name or f"node{i}"
            row = OPS.get(node.op_type)
            fusion = members.get(id(node))
            if fusion is not None and not fusion.checked:
                # The pattern's first node: x's shape is known now, so whether the pattern's
                # constants keep it (a size-1 constant of a higher rank broadcasts the result
                # up, which the fused op would not). If not, its nodes are imported one by one.
                fusion.checked = True
                if not _fusion_keeps_shape(self, fusion):
                    for n in fusion.nodes:
                        members.pop(id(n), None)
                    self.absorbed -= len(fusion.nodes) - 1
                    fusion = None
            if fusion is not None and fusion.last is not node:
                folded_nodes.add(id(node))  # its constants are the fused op's business
                continue
            if fusion is not None:
                op = fusion.op
                if any(n in self.poisoned for n in self.fused_inputs[id(node)]):
                    self.poisoned.update(node.output)
                    continue
                try:
                    if op not in self.ops:
                        raise _Unsupported(f"needs gearbox op {op}, not in this build")
                    fusion.emit(self, node)
                    self.fusions_written[op] = self.fusions_written.get(op, 0) + 1
                except _Unsupported as e:
                    self.unsupported.append((label, node.op_type, str(e)))
                    self.poisoned.update(node.output)
                except ImportFailure:
                    raise
                except Exception as e:  # as for a row below: named, not a traceback
                    self.unsupported.append((label, node.op_type, f"malformed for the {op} "
                                             f"pattern: {type(e).__name__}: {str(e)[:200]}"))
                    self.poisoned.update(node.output)
                continue
            try:
                for n in node.input:
                    if n and n not in self.shapes and n not in self.poisoned:
                        raise _Unsupported(
                            f"undefined '{self.value(n)}': no graph input, initializer or earlier "
                            "node defines it (a cycle, or nodes out of order)")
                if self.fold(node):
                    self.folded += 1
                    folded_nodes.add(id(node))
                    continue
                if row is None:
                    raise _Unsupported("no mapping")
                if any(n in self.poisoned for n in node.input):
                    # The cause is listed already; whether this node would have folded or
                    # which op it needs is not known without its input.
                    self.poisoned.update(node.output)
                    continue
                missing = [op for op in row[0] if op not in self.ops]
                if missing:
                    self.unsupported.append((label, node.op_type, f"needs gearbox op "
                                             f"{', '.join(missing)}, not in this build"))
                    # Still mapped (the import fails anyway), for the shapes of the nodes after
                    # it: each of them is checked and listed too.
                    try:
                        row[1](self, node)
                    except ImportFailure:
                        raise
                    except Exception:  # _Unsupported, or a node its row cannot read
                        self.poisoned.update(node.output)
                    continue
                row[1](self, node)
            except _Unsupported as e:
                self.unsupported.append((label, node.op_type, str(e)))
                self.poisoned.update(node.output)
            except ImportFailure:
                raise
            except Exception as e:
                # A node its row cannot read (a missing attribute, a rank its op cannot have,
                # shapes that do not broadcast): named, with what went wrong, not a traceback
                # (found by tests/python/test_onnx_fuzz.py).
                self.unsupported.append((label, node.op_type, "malformed for this op: "
                                         f"{type(e).__name__}: {str(e)[:200]}"))
                self.poisoned.update(node.output)
        # An initializer no written op used as a tensor is dropped if it was read as an
        # attribute or every consumer was folded; else (a weight no op reads, indices a Gather
        # rewrote) it is written as before, so the model's declared constants stay visible.
        for name, t in initializers.items():
            if name in self.emitted or name in self.attr_read:
                continue
            users = consumers.get(name, [])
            if users and all(id(n) in folded_nodes for n in users):
                continue
            try:
                self.tensor(name)
            except _Unsupported as e:
                self.unsupported.append((name, "initializer", str(e)))
        outputs = []
        for o in g.output:
            if o.name in self.poisoned:
                continue
            try:
                outputs.append(self.tensor(o.name))
            except _Unsupported as e:
                self.unsupported.append((o.name, "graph output", str(e)))
        if self.unsupported:
            listed = "; ".join(f"{n} ({op}: {why})" for n, op, why in self.unsupported)
            raise ImportFailure(
                "parse", f"{len(self.unsupported)} unsupported node(s), nothing written: {listed}"
            )
        header = f"graph {self.graph_name}({', '.join(inputs)}) {{"
        body = "\n".join(self.lines)
        return (f"# imported from ONNX by gearbox import\n{header}\n{body}\n"
                f"  return {', '.join(outputs)}\n}}\n")

    # ---- folding --------------------------------------------------------------------------------

    def fold(self, node):
        """Evaluates `node` here when its value is known without running the model. Returns
        whether it did. Shape needs only its input's shape; the others need every input known."""
        fn = FOLD.get(node.op_type)
        if fn is None:
            return False
        if node.op_type == "Shape":
            if self.shapes.get(node.input[0]) is None:
                return False
        elif not all(n in self.known for n in node.input if n):
            return False
        if node.op_type in ("Cast", "Identity") and node.input[0] in self.emitted:
            return False  # a value that exists at run time stays one (Cast of data, say)
        return fn(self, node)

    # ---- helpers for rows -----------------------------------------------------------------------

    def emit(self, node, call, dims, etype=None, k=0):
        name = node.output[k]
        self.lines.append(f"  {self.value(name)} = {call}")
        self.set_out(name, dims, self.etypes.get(node.input[0], 1) if etype is None else etype)
        self.emitted.add(name)

    def emit_tmp(self, name, call, dims, etype):
        self.lines.append(f"  {self.value(name)} = {call}")
        self.set_out(name, dims, etype)
        self.emitted.add(name)
        return self.value(name)

    def attr(self, node, name, default=None):
        for a in node.attribute:
            if a.name == name:
                v = self.onnx.helper.get_attribute_value(a)
                return v.decode() if isinstance(v, bytes) else v
        return default

    def need(self, *ops):
        missing = [op for op in ops if op not in self.ops]
        if missing:
            raise _Unsupported(f"needs gearbox op {', '.join(missing)}, not in this build")

    def supports(self, text):
        """Whether this gearbox build accepts an IR snippet (capability probe)."""
        try:
            _gearbox.parse(text)
            return True
        except _gearbox.Error:
            return False

    def reshape_call(self, src, in_dims, out_dims, where):
        """IR for reshaping IR value `src` (dims in_dims) to out_dims: a list of (value name,
        call, dims) steps, the last one giving out_dims. A target dim is written as its size
        when static, as a name when it is the input's dim at the same position (reshape's
        "copy this dim"), or as -1 if it is the only other one. When two or more dims are
        neither (a [N, C, H, W] -> [N, g, C/g, H, W] channel split over symbolic H and W), the
        ranks are aligned first with size-1 dims (unsqueeze before, or squeeze after), so the
        dims the two shapes share at their ends sit at the same positions."""
        tokens = self._reshape_tokens(in_dims, out_dims)
        if tokens is not None:
            return [(f"reshape({src}, shape=[{', '.join(tokens)}])", out_dims)]
        r, t = len(in_dims), len(out_dims)
        p = 0
        while p < min(r, t) and in_dims[p] == out_dims[p]:
            p += 1
        s = 0
        while s < min(r, t) - p and in_dims[r - 1 - s] == out_dims[t - 1 - s]:
            s += 1
        if r < t and "unsqueeze" in self.ops:
            aligned = in_dims[:p] + [1] * (t - r) + in_dims[p:]
            tokens = self._reshape_tokens(aligned, out_dims)
            if tokens is not None:
                axes = ", ".join(str(a) for a in range(p, p + t - r))
                return [(f"unsqueeze({src}, axes=[{axes}])", aligned),
                        (f"reshape(@, shape=[{', '.join(tokens)}])", out_dims)]
        if r > t and "squeeze" in self.ops:
            aligned = out_dims[:t - s] + [1] * (r - t) + out_dims[t - s:]
            tokens = self._reshape_tokens(in_dims, aligned)
            if tokens is not None:
                axes = ", ".join(str(a) for a in range(t - s, t - s + r - t))
                return [(f"reshape({src}, shape=[{', '.join(tokens)}])", aligned),
                        (f"squeeze(@, axes=[{axes}])", out_dims)]
        bad = [f"dim {i} = {_dim_str(d)}" for i, d in enumerate(out_dims)
               if not _is_static(d) and not (i < r and in_dims[i] == d)]
        raise _Unsupported(
            f"{where}: target [{', '.join(_dim_str(d) for d in out_dims)}] from input "
            f"[{', '.join(_dim_str(d) for d in in_dims)}]: {', '.join(bad)} needs a dim "
            "expression (only one target dim may be inferred, as -1)")

    def _reshape_tokens(self, in_dims, out_dims):
        tokens, free = [], 0
        for i, d in enumerate(out_dims):
            expr = _ir_expr(d) if self.dim_exprs() else None
            if _is_static(d):
                tokens.append(str(d))
            elif i < len(in_dims) and in_dims[i] == d:
                tokens.append(expr or self.dim_name(d))
            elif expr is not None and d in in_dims:
                # A build with dim expressions resolves a named target dim against the dim the
                # input declares with the same expression, wherever it is (docs/IR.md).
                tokens.append(expr)
            elif expr is not None and self.graph_symbols() and set(d.symbols()) <= \
                    self.input_symbols:
                # A build that resolves a target's names against the graph inputs' symbols
                # (docs/IR.md) takes seq and batch back from a [seq * batch, d] row block.
                tokens.append(expr)
            else:
                tokens.append("-1")
                free += 1
        return tokens if free <= 1 else None

    def dim_exprs(self):
        """Whether this build's IR has dim expressions (a reshape target may name an input dim
        at another position by its expression)."""
        if not hasattr(self, "_dim_exprs"):
            self._dim_exprs = self.supports(
                "graph t(%x: f32[2, (H - 1) / 2 + 1]) {\n"
                "  %y = reshape(%x, shape=[(H - 1) / 2 + 1, 2])\n  return %y\n}\n")
        return self._dim_exprs

    def graph_symbols(self):
        """Whether this build's reshape resolves a target name against the graph inputs' symbols
        (a [6] input reshaped to [B, 3] with B a graph input's symbol: positionally it would be
        [6, 3], 18 elements, an error)."""
        if not hasattr(self, "_graph_symbols"):
            self._graph_symbols = self.supports(
                "graph t(%x: f32[B, 2], %y: f32[6]) {\n"
                "  %z = reshape(%y, shape=[B, 3])\n  return %z\n}\n")
        return self._graph_symbols

    def target_tokens(self, dims, what):
        """An expand (or fill) target in the IR: sizes, and symbolic dims as the graph input
        symbols' expressions, which expand resolves against the graph's inputs."""
        tokens = []
        for i, d in enumerate(dims):
            if _is_static(d):
                if d < 0:
                    raise _Unsupported(f"{what}: dim {i} is {d}")
                tokens.append(str(int(d)))
                continue
            expr = _ir_expr(d)
            if expr is None or not set(d.symbols()) <= self.input_symbols:
                raise _Unsupported(f"{what}: dim {i} = {_dim_str(d)} needs a dim expression over "
                                   "one graph input symbol")
            tokens.append(expr)
        return tokens

    def emit_steps(self, node, src, steps, etype, k=0):
        """Writes reshape_call's steps; the last one is node.output[k]."""
        for j, (call, dims) in enumerate(steps):
            call = call.replace("@", src)
            if j == len(steps) - 1:
                self.emit(node, call, dims, etype, k)
            else:
                src = self.emit_tmp(f"{node.output[k]}.aligned", call, dims, etype)


# ---- folding: one function per ONNX op the importer can evaluate -------------------------------


def _np_fn(f):
    return np.frompyfunc(f, 2, 1)


def _check_constant_size(shape, dtype, what="folding it"):
    """_Unsupported (so the error names the node) when an array of `shape` and `dtype` would pass
    MAX_CONSTANT_BYTES. Object arrays (dim expressions) count 8 bytes an element, their pointers."""
    count = 1
    for d in shape:
        count *= int(d)
    size = count * (8 if np.dtype(dtype) == object else np.dtype(dtype).itemsize)
    if size > MAX_CONSTANT_BYTES:
        raise _Unsupported(f"{what} makes a constant of shape {[int(d) for d in shape]} "
                           f"({count} elements, {size} bytes), above the limit of "
                           f"{MAX_CONSTANT_BYTES} bytes for a constant (an initializer's)")


def _broadcast_result(arrs):
    """The dtype-independent broadcast shape of known inputs, checked against the constant limit
    before NumPy makes it (two [65536, 1] and [1, 65536] constants broadcast to 16 GB)."""
    try:
        shape = np.broadcast_shapes(*(a.shape for a in arrs))
    except ValueError:
        raise _Unsupported(f"inputs of shapes {[list(a.shape) for a in arrs]} do not "
                           "broadcast") from None
    _check_constant_size(shape, max((a.dtype for a in arrs), key=lambda t: t.itemsize))
    return shape


def _as_known(a, etype):
    """A folded result: numeric arrays keep their dtype; object arrays of plain ints become
    numbers again (so a later tensor use writes a const of the right dtype)."""
    a = np.asarray(a)
    if a.dtype == object and all(_is_static(v) for v in a.flat):
        return a.astype(_ONNX_NP.get(etype, np.int64))
    return a


def _fold_out(im, node, arr, etype):
    arr = _as_known(arr, etype)
    im.set_out(node.output[0], arr.shape, etype, arr)
    return True


def _f_constant(im, node):
    numpy_helper = im.onnx.numpy_helper
    a = node.attribute[0] if len(node.attribute) == 1 else None
    if a is None:
        raise _Unsupported("expected exactly one attribute")
    if a.name == "value":
        arr = numpy_helper.to_array(a.t)
    elif a.name == "value_float":
        arr = np.asarray(a.f, dtype=np.float32)
    elif a.name == "value_floats":
        arr = np.asarray(list(a.floats), dtype=np.float32)
    elif a.name == "value_int":
        arr = np.asarray(a.i, dtype=np.int64)
    elif a.name == "value_ints":
        arr = np.asarray(list(a.ints), dtype=np.int64)
    else:
        raise _Unsupported(f"attribute {a.name}")
    etype = {v: k for k, v in _ONNX_NP.items()}.get(arr.dtype.type, 0)
    im.set_out(node.output[0], arr.shape, etype, arr)
    return True


def _f_shape(im, node):
    dims = im.shapes[node.input[0]]
    start, end = im.attr(node, "start", 0), im.attr(node, "end", None)
    dims = dims[slice(start, end)]
    arr = np.empty(len(dims), dtype=object)
    arr[:] = dims
    return _fold_out(im, node, arr, 7)


def _f_identity(im, node):
    a = im.known[node.input[0]]
    return _fold_out(im, node, a, im.etypes.get(node.input[0], 7))


def _f_cast(im, node):
    a = im.known[node.input[0]]
    to = im.attr(node, "to")
    if to not in _ONNX_NP:
        raise _Unsupported(f"to={to}: gearbox has f32, i32, i64")
    if a.dtype == object:
        if to not in (6, 7):
            raise _Unsupported(f"to={to} of dim expressions")
        return _fold_out(im, node, a, to)
    _check_constant_size(a.shape, _ONNX_NP[to])
    return _fold_out(im, node, a.astype(_ONNX_NP[to]), to)


def _axes_of(im, node, i, what, rank):
    axes = im.attr(node, "axes") if im.opset < 13 or len(node.input) <= i else None
    if axes is None:
        axes = im.int_list(node, i, what)
    if axes is None:
        return None
    out = []
    for a in axes:
        if not -rank <= a < rank:
            raise _Unsupported(f"axes={list(axes)}: axis {a} outside rank {rank}")
        out.append(a % rank)
    if len(set(out)) != len(out):
        raise _Unsupported(f"axes={list(axes)} repeats an axis")
    return sorted(out)


def _f_unsqueeze(im, node):
    a = im.known[node.input[0]]
    axes = _axes_of(im, node, 1, "axes", a.ndim + len(_raw_axes(im, node, 1)))
    for ax in axes:
        a = np.expand_dims(a, ax)
    return _fold_out(im, node, a, im.etypes.get(node.input[0], 7))


def _raw_axes(im, node, i):
    axes = im.attr(node, "axes") if im.opset < 13 or len(node.input) <= i else None
    if axes is None:
        axes = im.int_list(node, i, "axes", [])
    return list(axes)


def _f_squeeze(im, node):
    a = im.known[node.input[0]]
    axes = _axes_of(im, node, 1, "axes", a.ndim)
    a = np.squeeze(a, axis=tuple(axes) if axes is not None else None)
    return _fold_out(im, node, a, im.etypes.get(node.input[0], 7))


def _f_concat(im, node):
    arrs = [im.known[n] for n in node.input]
    if any(x.dtype == object for x in arrs):
        arrs = [x.astype(object) for x in arrs]
    # The result holds every input's elements: Concat(x, x) chains double a value each time.
    _check_constant_size([sum(x.size for x in arrs)], arrs[0].dtype)
    a = np.concatenate(arrs, axis=im.attr(node, "axis"))
    return _fold_out(im, node, a, im.etypes.get(node.input[0], 7))


def _f_gather(im, node):
    data, idx = im.known[node.input[0]], im.known[node.input[1]]
    if idx.dtype == object:
        raise _Unsupported("indices that are dim expressions")
    axis = im.attr(node, "axis", 0) % max(data.ndim, 1)
    size = data.shape[axis]
    if (idx < -size).any() or (idx >= size).any():
        raise _Unsupported(f"an index outside [-{size}, {size})")
    _check_constant_size(data.shape[:axis] + idx.shape + data.shape[axis + 1:], data.dtype)
    a = np.take(data, np.where(idx < 0, idx + size, idx), axis=axis)
    return _fold_out(im, node, a, im.etypes.get(node.input[0], 7))


def _slice_params(im, node, rank):
    """Slice's starts, ends, axes, steps as int lists (opset 10+ inputs, opset 1 attributes).
    An end that is a dim expression is allowed when it equals the sliced dim (to the end)."""
    if im.opset < 10:
        return im.attr(node, "starts"), im.attr(node, "ends"), im.attr(node, "axes"), None
    starts = im.attr_input(node, 1, "starts")
    ends = im.attr_input(node, 2, "ends")
    if starts is None or ends is None:
        raise _Unsupported("no starts or ends input")
    axes = im.int_list(node, 3, "axes")
    steps = im.int_list(node, 4, "steps")
    return list(starts.reshape(-1)), list(ends.reshape(-1)), axes, steps


def _normalize_slice(im, node, dims):
    starts, ends, axes, steps = _slice_params(im, node, len(dims))
    rank = len(dims)
    if axes is None:
        axes = list(range(len(starts)))
    if steps is None:
        steps = [1] * len(starts)
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise _Unsupported("starts, ends, axes and steps of different lengths")
    out = []
    for s, e, ax, st in zip(starts, ends, axes, steps):
        if not -rank <= ax < rank:
            raise _Unsupported(f"axes: axis {ax} outside rank {rank}")
        ax %= rank
        d = dims[ax]
        if not _is_static(s):
            raise _Unsupported(f"starts: {_dim_str(s)} needs a dim expression")
        if not _is_static(e):
            if e != d:
                raise _Unsupported(f"ends: {_dim_str(e)} needs a dim expression")
            e = _INT64_MAX  # ends at the dim's end: clamped
        if st == 0:
            raise _Unsupported("steps: 0")
        out.append((int(s), int(min(max(int(e), -_INT64_MAX), _INT64_MAX)), ax, int(st)))
    return out


def _sliced_dim(im, d, s, e, st):
    if _is_static(d):
        return len(range(*slice(s, e, st).indices(d)))
    if st == 1 and s == 0 and e >= _INT64_MAX // 2:
        return d
    if st == 1 and s >= 0 and e >= _INT64_MAX // 2:
        return d_sub(d, s)  # sizes below s are an error at run time anyway
    return im.new_anon()


def _f_slice(im, node):
    a = im.known[node.input[0]]
    index = [slice(None)] * a.ndim
    try:
        params = _normalize_slice(im, node, list(a.shape))
    except _Unsupported as e:
        if "needs a dim expression" in str(e):
            return False  # bounds known only as dim expressions: written (_symbolic_slice)
        raise
    for s, e, ax, st in params:
        index[ax] = slice(s, e, st)
    return _fold_out(im, node, a[tuple(index)], im.etypes.get(node.input[0], 7))


def _f_reshape(im, node):
    a = im.known[node.input[0]]
    target = im.int_list(node, 1, "shape")
    dims = [a.shape[i] if d == 0 and not im.attr(node, "allowzero", 0) else d
            for i, d in enumerate(target)]
    return _fold_out(im, node, a.reshape(dims), im.etypes.get(node.input[0], 7))


def _f_constant_of_shape(im, node):
    if not all(_is_static(d) for d in im.known[node.input[0]].reshape(-1)):
        return False  # a shape of dim expressions (a causal mask's [seq, seq]): an expand
    shape = im.int_list(node, 0, "input")
    t = im.attr(node, "value")
    value = im.onnx.numpy_helper.to_array(t).reshape(-1) if t is not None else \
        np.zeros(1, np.float32)
    etype = t.data_type if t is not None else 1
    if any(d < 0 for d in shape):
        raise _Unsupported(f"a negative dim in shape {shape}")
    _check_constant_size(shape, value.dtype)
    return _fold_out(im, node, np.full(shape, value[0], dtype=value.dtype), etype)


def _trunc_div(a, b):
    if _is_static(a) and _is_static(b):
        q = abs(int(a)) // abs(int(b))
        return q if (a >= 0) == (b >= 0) else -q
    return d_floordiv(a, b)


_SYM_BINARY = {"Add": d_add, "Sub": d_sub, "Mul": d_mul, "Div": _trunc_div}


def _f_binary(im, node):
    a, b = im.known[node.input[0]], im.known[node.input[1]]
    etype = im.etypes.get(node.input[0], 7)
    _broadcast_result([a, b])
    if a.dtype != object and b.dtype != object:
        if node.op_type == "Div" and np.issubdtype(a.dtype, np.integer):
            out = _np_fn(_trunc_div)(a.astype(object), b.astype(object))
        else:
            out = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply,
                   "Div": np.divide}[node.op_type](a, b).astype(a.dtype)
        return _fold_out(im, node, out, etype)
    if etype not in (6, 7):
        raise _Unsupported("dim expressions in a float computation")
    out = _np_fn(_SYM_BINARY[node.op_type])(a.astype(object), b.astype(object))
    return _fold_out(im, node, out, etype)


def _f_split(im, node):
    a = im.known[node.input[0]]
    pieces = _split_sizes(im, node, list(a.shape))
    axis, start = pieces[0], 0
    for k, size in enumerate(pieces[1]):
        index = [slice(None)] * a.ndim
        index[axis] = slice(start, start + size)
        start += size
        part = _as_known(a[tuple(index)], im.etypes.get(node.input[0], 7))
        im.set_out(node.output[k], part.shape, im.etypes.get(node.input[0], 7), part)
    return True


def _f_equal(im, node):
    a, b = im.known[node.input[0]], im.known[node.input[1]]
    _broadcast_result([a, b])
    if a.dtype != object and b.dtype != object:
        return _fold_out(im, node, np.equal(a, b), 9)

    def eq(x, y):
        # A size is never negative: a dim expression differs from any negative number (torch's
        # expand writes Where(Equal(shape, -1), ...)); equal expressions are equal.
        if _is_static(x) and _is_static(y):
            return int(x) == int(y)
        if x == y:
            return True
        other = y if not _is_static(x) else x
        if _is_static(other) and other < 0:
            return False
        raise _Unsupported(f"Equal of {_dim_str(x)} and {_dim_str(y)} depends on the sizes")

    out = np.frompyfunc(eq, 2, 1)(a.astype(object), b.astype(object)).astype(bool)
    return _fold_out(im, node, out, 9)


def _f_where(im, node):
    c, x, y = (im.known[n] for n in node.input[:3])
    if c.dtype == object:
        raise _Unsupported("a condition of dim expressions")
    _broadcast_result([c, x, y])
    if x.dtype == object or y.dtype == object:
        out = np.where(c.astype(bool), x.astype(object), y.astype(object))
    else:
        out = np.where(c.astype(bool), x, y)
    return _fold_out(im, node, out, im.etypes.get(node.input[1], 7))


def _f_expand(im, node):
    a = im.known[node.input[0]]
    shape = im.known[node.input[1]].reshape(-1)
    if not all(_is_static(d) for d in shape):
        return False  # a run-time size: written as an expand op
    if any(int(d) < 0 for d in shape):
        raise _Unsupported(f"a negative dim in shape {[int(d) for d in shape]}")
    try:
        out_shape = np.broadcast_shapes(a.shape, tuple(int(d) for d in shape))
    except ValueError:
        raise _Unsupported(f"input of shape {list(a.shape)} does not broadcast to "
                           f"{[int(d) for d in shape]}") from None
    _check_constant_size(out_shape, a.dtype)
    out = np.broadcast_to(a, out_shape)
    return _fold_out(im, node, np.array(out), im.etypes.get(node.input[0], 7))


def _f_numeric(fn):
    """A unary or binary op on known numbers (never on dim expressions)."""

    def fold(im, node):
        arrs = [im.known[n] for n in node.input if n]
        if any(a.dtype == object for a in arrs):
            return False
        _broadcast_result(arrs)
        out = np.asarray(fn(*arrs)).astype(arrs[0].dtype)
        return _fold_out(im, node, out, im.etypes.get(node.input[0], 1))

    return fold


def _f_trilu(im, node):
    a = im.known[node.input[0]]
    if a.dtype == object:
        return False
    k = int(np.asarray(im.known[node.input[1]]).reshape(-1)[0]) if len(node.input) > 1 and \
        node.input[1] else 0
    out = np.triu(a, k) if im.attr(node, "upper", 1) else np.tril(a, k)
    return _fold_out(im, node, out, im.etypes.get(node.input[0], 1))


# ONNX op type -> the function evaluating it on known inputs (fold): these nodes are never written.
FOLD = {
    "Constant": _f_constant,
    "Shape": _f_shape,
    "Identity": _f_identity,
    "Cast": _f_cast,
    "Unsqueeze": _f_unsqueeze,
    "Squeeze": _f_squeeze,
    "Concat": _f_concat,
    "Gather": _f_gather,
    "Slice": _f_slice,
    "Split": _f_split,
    "Reshape": _f_reshape,
    "ConstantOfShape": _f_constant_of_shape,
    "Add": _f_binary,
    "Sub": _f_binary,
    "Mul": _f_binary,
    "Div": _f_binary,
    "Equal": _f_equal,
    "Where": _f_where,
    "Expand": _f_expand,
    "Pow": _f_numeric(np.power),
    "Sqrt": _f_numeric(np.sqrt),
    "Trilu": _f_trilu,
}


# ---- one function per ONNX op written to the IR ------------------------------------------------


def _broadcast(a, b):
    out = []
    for i in range(max(len(a), len(b))):
        x = a[len(a) - 1 - i] if i < len(a) else 1
        y = b[len(b) - 1 - i] if i < len(b) else 1
        if x == y or y == 1:
            out.append(x)
        elif x == 1 or _is_static(y):
            out.append(y)
        else:
            out.append(x)
    return list(reversed(out))


def _binary(op):
    def fn(im, node):
        a, b = node.input[0], node.input[1]
        dims = _broadcast(im.shape(a), im.shape(b))
        im.emit(node, f"{op}({im.tensor(a)}, {im.tensor(b)})", dims)

    return fn


def _unary(op):
    def fn(im, node):
        im.emit(node, f"{op}({im.tensor(node.input[0])})", im.shape(node.input[0]))

    return fn


def _not_folded(what):
    def fn(im, node):
        raise _Unsupported(f"{what}; gearbox has no such op (folded only when its inputs are "
                           "known at import)")

    return fn


def _identity(im, node):
    # Dropped: the output is another name for the input's IR value.
    src, out = node.input[0], node.output[0]
    im.tensor(src)
    im.names[out] = im.names[src]
    im.emitted.add(out)
    im.set_out(out, im.shapes.get(src), im.etypes.get(src, 1), im.known.get(src))


def _cast(im, node):
    src, to = node.input[0], im.attr(node, "to")
    if im.etypes.get(src) == to:
        _identity(im, node)
        return
    if to not in _DTYPES or im.etypes.get(src) not in _DTYPES:
        raise _Unsupported(f"to={to} of a run-time tensor of element type "
                           f"{im.etypes.get(src)} (gearbox's cast takes f32, i32, i64)")
    im.need("cast")
    im.emit(node, f"cast({im.tensor(src)}, to={to})", im.shape(src), etype=to)


def _matmul(im, node):
    a, b = (im.shape(n) for n in node.input[:2])
    if 1 in (len(a), len(b)) and not im.supports(
        "graph t(%a: f32[4], %b: f32[4, 3]) { %m = matmul(%a, %b) return %m }"
    ):
        raise _Unsupported("a 1-D input; gearbox matmul in this build needs rank >= 2")
    if len(a) == 1 and len(b) == 1:
        dims = []
    elif len(a) == 1:
        dims = b[:-2] + b[-1:]
    elif len(b) == 1:
        dims = a[:-1]
    else:
        dims = _broadcast(a[:-2], b[:-2]) + [a[-2], b[-1]]
    im.emit(node, f"matmul({im.tensor(node.input[0])}, {im.tensor(node.input[1])})", dims)


def _concat(im, node):
    axis = im.attr(node, "axis")
    shapes = [im.shape(n) for n in node.input]
    dims = list(shapes[0])
    ax = axis % len(dims)
    dims[ax] = 0
    for s in shapes:
        dims[ax] = d_add(dims[ax], s[ax])
    args = ", ".join(im.tensor(n) for n in node.input)
    im.emit(node, f"cat({args}, dim={axis})", dims)


def _gather(im, node):
    axis = im.attr(node, "axis", 0)
    data, indices = node.input[0], node.input[1]
    dims = im.shape(data)
    if not -len(dims) <= axis < len(dims):
        raise _Unsupported(f"axis={axis} outside rank {len(dims)}")
    axis %= len(dims)
    idx = im.const_of(indices)
    if indices in im.known and idx is None:
        raise _Unsupported("indices that are dim expressions")
    idx_rank = idx.ndim if idx is not None else len(im.shape(indices, "indices"))
    if idx_rank != 1 and "gather" in im.ops:
        # N-D (an embedding's [batch, seq] ids) or 0-D indices: ONNX's Gather itself, negative
        # indices included.
        out = dims[:axis] + (list(idx.shape) if idx is not None else im.shape(indices)) + \
            dims[axis + 1:]
        attrs = f", axis={axis}" if axis else ""
        im.emit(node, f"gather({im.tensor(data)}, {im.tensor(indices)}{attrs})", out)
        return
    if idx is not None:
        idx_shape = list(idx.shape)
        if (idx < 0).any() or idx.ndim != 1:
            # ONNX: a negative index i means i + size; index_select takes [0, size) only, so
            # constant indices are rewritten here, against the dim's static size; N-D (and 0-D)
            # indices are flattened, and the result reshaped (or squeezed) after.
            size = dims[axis]
            if (idx < 0).any():
                if not _is_static(size):
                    raise _Unsupported("negative constant indices on a dim of unknown size")
                if (idx < -size).any() or (idx >= size).any():
                    raise _Unsupported(f"an index outside [-{size}, {size})")
            fixed = np.where(idx < 0, idx + (size if _is_static(size) else 0), idx)
            fixed = fixed.astype(idx.dtype).reshape(-1)
            indices = indices + ".wrapped" if (idx < 0).any() else indices + ".flat"
            im.const_line(indices, fixed, f"indices of {node.name}")
        idx_value = im.tensor(indices)
        wrap = ""
    else:
        # Run-time indices may be negative (ONNX); index_select's wrap=1 takes [-size, size).
        wrap = ", wrap=1"
        idx_shape = im.shape(indices, "indices")
        idx_value = im.tensor(indices)
        if len(idx_shape) != 1:
            im.need("reshape")
            flat = [_prod(idx_shape)]
            idx_value = im.emit_tmp(f"{node.output[0]}.indices", f"reshape({idx_value}, "
                                    "shape=[-1])", flat, im.etypes.get(indices, 7))
    n = _prod(idx_shape)
    selected = dims[:axis] + [n] + dims[axis + 1:]
    out = dims[:axis] + idx_shape + dims[axis + 1:]
    call = f"index_select({im.tensor(data)}, {idx_value}, dim={axis}{wrap})"
    if len(idx_shape) == 1:
        im.emit(node, call, out)
        return
    sel = im.emit_tmp(f"{node.output[0]}.select", call, selected, im.etypes.get(data, 1))
    if not idx_shape:
        im.need("squeeze")
        im.emit(node, f"squeeze({sel}, axes=[{axis}])", out)
        return
    im.emit_steps(node, sel, im.reshape_call(sel, selected, out, "indices reshape"),
                  im.etypes.get(data, 1))


def _reshape_dims(im, node, src):
    """Reshape's output dims (ONNX rules: 0 copies the input dim unless allowzero, one -1)."""
    target = im.attr_input(node, 1, "shape")
    if target is None:
        raise _Unsupported("no shape input")
    allowzero = im.attr(node, "allowzero", 0)
    dims, inferred = [], None
    for i, d in enumerate(target.reshape(-1).tolist()):
        if d == 0 and not allowzero:
            if i >= len(src):
                raise _Unsupported(f"shape: 0 at position {i} copies a dim the input lacks")
            d = src[i]
        elif _is_static(d) and d == -1:
            if inferred is not None:
                raise _Unsupported("shape: more than one -1")
            inferred = i
        elif _is_static(d) and d < -1:
            raise _Unsupported(f"shape: {d}")
        dims.append(d)
    if inferred is not None:
        rest = [d for i, d in enumerate(dims) if i != inferred]
        left = list(src)
        for d in list(rest):  # the same dims on both sides cancel
            if not _is_static(d) and d in left:
                left.remove(d)
                rest.remove(d)
        num, den = _prod(left), _prod(rest)
        if not _is_static(den):
            dims[inferred] = im.new_anon()
        elif den == 0:
            raise _Unsupported("shape: a -1 beside a 0 dim is ambiguous")
        elif _is_static(num) and num % den:
            raise _Unsupported(f"shape: {num} elements do not divide into {den}")
        else:
            dims[inferred] = d_floordiv(num, den)
    return dims


def _reshape(im, node):
    src = im.shape(node.input[0])
    dims = _reshape_dims(im, node, src)
    if im.attr(node, "allowzero", 0) and 0 in dims:
        raise _Unsupported("allowzero=1 with a 0 in shape (an empty tensor)")
    steps = im.reshape_call(im.tensor(node.input[0]), src, dims, "shape")
    im.emit_steps(node, im.tensor(node.input[0]), steps, im.etypes.get(node.input[0], 1))


def _transpose(im, node):
    src = im.shape(node.input[0])
    perm = im.attr(node, "perm")
    if perm is None:
        perm = list(reversed(range(len(src))))
    dims = [src[p] for p in perm]
    im.emit(node, f"transpose({im.tensor(node.input[0])}, perm=[{', '.join(map(str, perm))}])",
            dims)


def _gemm(im, node):
    # Y = alpha * A' @ B' + beta * C, A' = A or A^T, B' = B or B^T. Transposes and scales are
    # folded into constant operands; a non-constant operand gets a transpose op, and a scale
    # a mul by a scalar const.
    alpha, beta = im.attr(node, "alpha", 1.0), im.attr(node, "beta", 1.0)
    trans = [im.attr(node, "transA", 0), im.attr(node, "transB", 0)]
    etype = im.etypes.get(node.input[0], 1)
    operands, shapes, scale_after = [], [], alpha
    for k in range(2):
        name = node.input[k]
        c = im.const_of(name)
        dims = list(im.shape(name))
        if trans[k]:
            dims = dims[::-1]
        if c is not None and (trans[k] or (k == 1 and alpha != 1.0)):
            c = c.T if trans[k] else c
            if k == 1 and alpha != 1.0:
                c = (c * np.asarray(alpha, dtype=c.dtype)).astype(c.dtype)
                scale_after = 1.0
            name = f"{name}.gemm{k}"
            im.const_line(name, np.ascontiguousarray(c), f"Gemm operand of {node.name}")
        elif trans[k]:
            im.need("transpose")
            t = f"{name}.T"
            im.emit_tmp(t, f"transpose({im.tensor(name)}, perm=[1, 0])", dims, etype)
            name = t
        operands.append(name)
        shapes.append(dims)
    dims = [shapes[0][0], shapes[1][1]]
    has_bias = len(node.input) > 2 and node.input[2]
    call = f"matmul({im.tensor(operands[0])}, {im.tensor(operands[1])})"
    if scale_after != 1.0:
        im.need("mul")
        mm = im.emit_tmp(f"{node.output[0]}.mm", call, dims, etype)
        im.const_line(f"{node.output[0]}.alpha", np.asarray(alpha, np.float32), "Gemm alpha")
        call = f"mul({mm}, {im.tensor(node.output[0] + '.alpha')})"
    if not has_bias:
        im.emit(node, call, dims)
        return
    bias = node.input[2]
    if beta != 1.0:
        c = im.const_of(bias)
        if c is not None:
            bias = f"{bias}.beta"
            im.const_line(bias, (c * np.asarray(beta, dtype=c.dtype)).astype(c.dtype), "Gemm C")
        else:
            im.need("mul")
            im.const_line(f"{node.output[0]}.beta", np.asarray(beta, np.float32), "Gemm beta")
            scaled = f"{node.output[0]}.c"
            im.emit_tmp(scaled, f"mul({im.tensor(bias)}, {im.tensor(node.output[0] + '.beta')})",
                        im.shape(bias), etype)
            bias = scaled
    mm = im.emit_tmp(f"{node.output[0]}.mm2" if scale_after != 1.0 else f"{node.output[0]}.mm",
                     call, dims, etype)
    im.emit(node, f"add({mm}, {im.tensor(bias)})", _broadcast(dims, im.shape(bias)))


def _ints(v):
    return "[" + ", ".join(str(int(x)) for x in v) + "]"


def _float(v):
    return str(np.float32(v))


def _window_out(im, d, k, s, pb, pe, dil, ceil_mode):
    """One spatial output size of a conv or pool: floor((d + pads - dil*(k-1) - 1) / s) + 1,
    or with ceil_mode the ceiling, dropping a last window that would start in the end padding
    (PyTorch's and ONNX Runtime's rule)."""
    span = dil * (k - 1) + 1
    if not ceil_mode:
        return d_add(d_floordiv(d_add(d, pb + pe - span), s), 1)
    if not _is_static(d):
        return im.new_anon()  # the last-window rule needs the size
    out = -(-(d + pb + pe - span) // s) + 1
    if (out - 1) * s >= d + pb:
        out -= 1
    return out


def _spatial_pads(im, node, dims, kernel, strides, dilations):
    """Explicit [top, left, bottom, right] pads (ONNX's [x1_begin, x2_begin, x1_end, x2_end]),
    from pads or from auto_pad where the spatial input dims are static."""
    auto_pad = im.attr(node, "auto_pad", "NOTSET")
    if auto_pad == "NOTSET":
        pads = list(im.attr(node, "pads", [0, 0, 0, 0]))
        if any(p < 0 for p in pads):
            raise _Unsupported(f"pads={pads}: negative pads")
        return pads
    if auto_pad == "VALID":
        return [0, 0, 0, 0]
    if auto_pad not in ("SAME_UPPER", "SAME_LOWER"):
        raise _Unsupported(f"auto_pad={auto_pad}")
    begins, ends = [], []
    for i in range(2):
        d = dims[2 + i]
        if not _is_static(d):
            raise _Unsupported(f"auto_pad={auto_pad} with input dim {2 + i} = {_dim_str(d)} "
                               "(explicit pads need a static size)")
        out = -(-d // strides[i])
        total = max((out - 1) * strides[i] + dilations[i] * (kernel[i] - 1) + 1 - d, 0)
        small = total // 2
        begins.append(small if auto_pad == "SAME_UPPER" else total - small)
        ends.append(total - begins[-1])
    return begins + ends


def _kernel_2d(im, node, kernel, what):
    if len(kernel) != 2:
        raise _Unsupported(f"kernel_shape={list(kernel)} (rank {len(kernel)}): gearbox {what} "
                           "takes 2-D kernels only")


def _conv(im, node):
    x, w = node.input[0], node.input[1]
    dims, wdims = im.shape(x), im.shape(w, "weight")
    kernel = list(im.attr(node, "kernel_shape", wdims[2:]))
    _kernel_2d(im, node, kernel, "conv2d")
    if len(dims) != 4 or len(wdims) != 4:
        raise _Unsupported(f"input rank {len(dims)}, weight rank {len(wdims)} (conv2d: 4 and 4)")
    if list(kernel) != list(wdims[2:]):
        raise _Unsupported(f"kernel_shape={kernel} differs from the weight's {wdims[2:]}")
    strides = list(im.attr(node, "strides", [1, 1]))
    dilations = list(im.attr(node, "dilations", [1, 1]))
    group = im.attr(node, "group", 1)
    pads = _spatial_pads(im, node, dims, kernel, strides, dilations)
    out = [dims[0], wdims[0]] + [
        _window_out(im, dims[2 + i], kernel[i], strides[i], pads[i], pads[2 + i], dilations[i],
                    False) for i in range(2)]
    args = [im.tensor(x), im.tensor(w)]
    if len(node.input) > 2 and node.input[2]:
        args.append(im.tensor(node.input[2]))
    im.emit(node, f"conv2d({', '.join(args)}, strides={_ints(strides)}, pads={_ints(pads)}, "
            f"dilations={_ints(dilations)}, group={group})", out)


def _pool(op):
    def fn(im, node):
        if len(node.output) > 1 and node.output[1]:
            raise _Unsupported("the Indices output (gearbox max_pool2d returns values only)")
        dims = im.shape(node.input[0])
        kernel = list(im.attr(node, "kernel_shape"))
        _kernel_2d(im, node, kernel, op)
        if len(dims) != 4:
            raise _Unsupported(f"input rank {len(dims)} ({op} takes [N, C, H, W])")
        strides = list(im.attr(node, "strides", [1, 1]))
        dilations = list(im.attr(node, "dilations", [1, 1]))
        if im.attr(node, "storage_order", 0):
            raise _Unsupported("storage_order=1")
        if op == "avg_pool2d" and dilations != [1, 1]:
            raise _Unsupported(f"dilations={dilations} (gearbox avg_pool2d has none)")
        ceil_mode = im.attr(node, "ceil_mode", 0)
        pads = _spatial_pads(im, node, dims, kernel, strides, dilations)
        if any(2 * p > kernel[i % 2] for i, p in enumerate(pads)):
            # gearbox's pools take PyTorch's limit (a window never lies wholly in padding).
            raise _Unsupported(f"pads={pads} exceed half the kernel {kernel}")
        out = dims[:2] + [
            _window_out(im, dims[2 + i], kernel[i], strides[i], pads[i], pads[2 + i],
                        dilations[i], ceil_mode) for i in range(2)]
        attrs = f"kernel={_ints(kernel)}, strides={_ints(strides)}, pads={_ints(pads)}"
        if op == "max_pool2d":
            attrs += f", dilations={_ints(dilations)}, ceil_mode={ceil_mode}"
        else:
            attrs += (f", ceil_mode={ceil_mode}, "
                      f"count_include_pad={im.attr(node, 'count_include_pad', 0)}")
        im.emit(node, f"{op}({im.tensor(node.input[0])}, {attrs})", out)

    return fn


def _mean_call(im, node, axes, keepdims):
    dims = im.shape(node.input[0])
    out = [1 if i in axes else d for i, d in enumerate(dims)] if keepdims else \
        [d for i, d in enumerate(dims) if i not in axes]
    im.emit(node, f"mean({im.tensor(node.input[0])}, axes={_ints(axes)}, keepdims={keepdims})",
            out)


def _global_average_pool(im, node):
    rank = len(im.shape(node.input[0]))
    if rank < 3:
        raise _Unsupported(f"input rank {rank} (needs [N, C, spatial...])")
    _mean_call(im, node, list(range(2, rank)), 1)


def _reduce_mean(im, node):
    rank = len(im.shape(node.input[0]))
    axes = _axes_of(im, node, 1, "axes", rank)
    if axes is None:
        if im.attr(node, "noop_with_empty_axes", 0):
            raise _Unsupported("noop_with_empty_axes=1")
        axes = list(range(rank))
    _mean_call(im, node, axes, im.attr(node, "keepdims", 1))


def _batch_norm(im, node):
    if im.attr(node, "training_mode", 0):
        raise _Unsupported("training_mode=1 (gearbox batch_norm is inference only)")
    if len([o for o in node.output if o]) > 1:
        raise _Unsupported("running mean/var outputs (training mode)")
    if im.attr(node, "spatial", 1) != 1:
        raise _Unsupported("spatial=0")
    args = ", ".join(im.tensor(n) for n in node.input[:5])
    eps = im.attr(node, "epsilon", 1e-5)
    im.emit(node, f"batch_norm({args}, epsilon={_float(eps)})", im.shape(node.input[0]))


def _clip(im, node):
    if im.opset >= 11:
        lo = im.attr_input(node, 1, "min")
        hi = im.attr_input(node, 2, "max")
        lo = None if lo is None else float(np.asarray(lo).reshape(-1)[0])
        hi = None if hi is None else float(np.asarray(hi).reshape(-1)[0])
    else:
        lo, hi = im.attr(node, "min"), im.attr(node, "max")
    if im.etypes.get(node.input[0], 1) != 1:
        raise _Unsupported("a non-float input (gearbox clip is f32)")
    attrs = ""
    if lo is not None and lo != -np.inf:
        attrs += f", min={_float(lo)}"
    if hi is not None and hi != np.inf:
        attrs += f", max={_float(hi)}"
    im.emit(node, f"clip({im.tensor(node.input[0])}{attrs})", im.shape(node.input[0]))


def _flatten(im, node):
    dims = im.shape(node.input[0])
    axis = im.attr(node, "axis", 1)
    if not -len(dims) <= axis <= len(dims):
        raise _Unsupported(f"axis={axis} outside rank {len(dims)}")
    if axis < 0:
        axis += len(dims)
    out = [_prod(dims[:axis]), _prod(dims[axis:])]
    src = im.tensor(node.input[0])
    if "flatten" in im.ops:
        im.emit(node, f"flatten({src}, axis={axis})", out)
        return
    # A build without flatten: the same as a reshape, where the two dims can be written.
    im.need("reshape")
    im.emit_steps(node, src, im.reshape_call(src, dims, out, "flatten as reshape"),
                  im.etypes.get(node.input[0], 1))


def _slice_call(im, src, dims, params):
    out = list(dims)
    for s, e, ax, st in params:
        out[ax] = _sliced_dim(im, dims[ax], s, e, st)
    starts = _ints(p[0] for p in params)
    ends = _ints(p[1] for p in params)
    axes = _ints(p[2] for p in params)
    steps = _ints(p[3] for p in params)
    return f"slice({src}, starts={starts}, ends={ends}, axes={axes}, steps={steps})", out


def _slice(im, node):
    dims = im.shape(node.input[0])
    try:
        params = _normalize_slice(im, node, dims)
    except _Unsupported as e:
        if "needs a dim expression" not in str(e) or not _symbolic_slice(im, node, dims):
            raise
        return
    call, out = _slice_call(im, im.tensor(node.input[0]), dims, params)
    im.emit(node, call, out)


# The largest dim _symbolic_slice selects from: f32 holds every integer up to 2^24 exactly.
MAX_F32_SLICE_DIM = 2**24


def _symbolic_slice(im, node, dims):
    """A slice whose start or end is a dim expression, on one axis with step 1 (a position
    table's rows [:seq] in a prefill, [past:past + 1] in a decode step): gearbox's slice takes
    integer bounds, so the rows are selected by index_select with indices computed at run time
    from the bounds' sizes: start + arange(end - start), where a size n is the sum of a ones
    [n] (expand) and arange(n) the row sums of the strictly lower triangle of ones [n, n]
    (trilu). Their cost is charged like any op's: n^2 elements for the arange, which a static
    length folds to a const. Returns False when the slice is not of that form.

    The indices are computed in f32 (reduce_sum is f32 only), whose integers are exact up to
    2^24 = 16,777,216 and whose rounding is monotonic. So the sliced dim must be static and at
    most 2^24 (MAX_F32_SLICE_DIM): then every index below it is exact, and an index at or past
    it stays at or past it, an index error at run time as it would be in i64. A symbolic or
    larger dim is refused, naming the limit."""
    starts, ends, axes, steps = _slice_params(im, node, len(dims))
    if len(starts) != 1 or len(ends) != 1 or (steps is not None and list(steps) != [1]):
        return False
    ax = 0 if axes is None else int(axes[0])
    if not -len(dims) <= ax < len(dims):
        return False
    ax %= len(dims)
    s, e = starts[0], ends[0]
    for b in (s, e):
        if _is_static(b) and not 0 <= int(b) < _INT64_MAX // 2:
            return False  # negative or to-the-end bounds with a symbolic other bound: refused
    length = d_sub(e, s)
    if _is_static(length) and int(length) < 0:
        return False
    size = dims[ax]
    if not _is_static(size) or int(size) > MAX_F32_SLICE_DIM:
        raise _Unsupported(
            f"a slice of dim {ax} ({_dim_str(size)}) with bounds known only as dim expressions "
            f"([{_dim_str(s)}:{_dim_str(e)}]) is written as index_select with indices computed "
            f"in f32, exact for a static dim of at most 2^24 = {MAX_F32_SLICE_DIM}")
    if _is_static(length) and int(length) > int(size):
        raise _Unsupported(f"the slice [{_dim_str(s)}:{_dim_str(e)}] selects {int(length)} rows "
                           f"of dim {ax}, which has {int(size)}")
    im.need("expand", "reduce_sum", "trilu", "add", "cast", "index_select")
    stem = node.output[0]
    im.const_line(f"{stem}.one", np.array(1, np.float32), "slice bounds")
    one = im.value(f"{stem}.one")

    def size_of(n, what):  # [1] f32 holding the size n
        if _is_static(n):
            im.const_line(f"{stem}.{what}", np.array([int(n)], np.float32), "slice bounds")
            return im.value(f"{stem}.{what}")
        (tok,) = im.target_tokens([n], f"slice {what}")
        ones = im.emit_tmp(f"{stem}.{what}_ones", f"expand({one}, shape=[{tok}])", [n], 1)
        return im.emit_tmp(f"{stem}.{what}", f"reduce_sum({ones}, axes=[0], keepdims=1)", [1],
                           1)

    if _is_static(length):
        im.const_line(f"{stem}.arange", np.arange(int(length), dtype=np.float32),
                      "slice indices")
        arange = im.value(f"{stem}.arange")
    else:
        tok = im.target_tokens([length], "slice length")[0]
        sq = im.emit_tmp(f"{stem}.square", f"expand({one}, shape=[{tok}, {tok}])",
                         [length, length], 1)
        low = im.emit_tmp(f"{stem}.lower", f"trilu({sq}, upper=0, k=-1)", [length, length], 1)
        arange = im.emit_tmp(f"{stem}.arange", f"reduce_sum({low}, axes=[1], keepdims=0)",
                             [length], 1)
    if not (_is_static(s) and int(s) == 0):
        arange = im.emit_tmp(f"{stem}.rows", f"add({arange}, {size_of(s, 'start')})", [length],
                             1)
    idx = im.emit_tmp(f"{stem}.indices", f"cast({arange}, to=7)", [length], 7)
    out = list(dims)
    out[ax] = length
    im.emit(node, f"index_select({im.tensor(node.input[0])}, {idx}, dim={ax})", out)
    return True


def _split_sizes(im, node, dims):
    axis = im.attr(node, "axis", 0)
    if not -len(dims) <= axis < len(dims):
        raise _Unsupported(f"axis={axis} outside rank {len(dims)}")
    axis %= len(dims)
    split = im.attr(node, "split") if im.opset < 13 else im.int_list(node, 1, "split")
    n = len(node.output)
    if split is None:
        d = dims[axis]
        if not _is_static(d):
            raise _Unsupported(f"equal parts of dim {axis} = {_dim_str(d)} need a static size")
        num = im.attr(node, "num_outputs", n)
        chunk = -(-d // num)
        split = [min(chunk, d - k * chunk) for k in range(num)]
    if len(split) != n:
        raise _Unsupported(f"split={list(split)} for {n} outputs")
    return axis, [int(s) for s in split]


def _split(im, node):
    # The IR has one output per node: each output is its own slice of the input.
    dims = im.shape(node.input[0])
    axis, sizes = _split_sizes(im, node, dims)
    if _is_static(dims[axis]) and sum(sizes) != dims[axis]:
        raise _Unsupported(f"split={sizes} sums to {sum(sizes)}, not dim {axis} = {dims[axis]}")
    start = 0
    src = im.tensor(node.input[0])
    for k, size in enumerate(sizes):
        if node.output[k]:
            call, out = _slice_call(im, src, dims, [(start, start + size, axis, 1)])
            out[axis] = size
            im.emit(node, call, out, k=k)
        start += size


def _squeeze(im, node):
    dims = im.shape(node.input[0])
    axes = _axes_of(im, node, 1, "axes", len(dims))
    if axes is None:
        if not all(_is_static(d) for d in dims):
            raise _Unsupported("no axes and an input of symbolic dims (which ones are 1?)")
        axes = [i for i, d in enumerate(dims) if d == 1]
    for a in axes:
        if _is_static(dims[a]) and dims[a] != 1:
            raise _Unsupported(f"axes: dim {a} is {dims[a]}, not 1")
    out = [d for i, d in enumerate(dims) if i not in axes]
    im.emit(node, f"squeeze({im.tensor(node.input[0])}, axes={_ints(axes)})", out)


def _unsqueeze(im, node):
    dims = im.shape(node.input[0])
    axes = _axes_of(im, node, 1, "axes", len(dims) + len(_raw_axes(im, node, 1)))
    out = list(dims)
    for a in axes:
        out.insert(a, 1)
    im.emit(node, f"unsqueeze({im.tensor(node.input[0])}, axes={_ints(axes)})", out)


def _pad(im, node):
    mode = im.attr(node, "mode", "constant")
    if mode != "constant":
        raise _Unsupported(f"mode={mode} (gearbox pad is constant only)")
    dims = im.shape(node.input[0])
    if im.opset >= 11:
        pads = im.int_list(node, 1, "pads")
        value = im.attr_input(node, 2, "constant_value")
        value = 0.0 if value is None else float(np.asarray(value).reshape(-1)[0])
        if len(node.input) > 3 and node.input[3]:
            raise _Unsupported("the axes input (opset 18)")
    else:
        pads, value = list(im.attr(node, "pads")), im.attr(node, "value", 0.0)
    if len(pads) != 2 * len(dims):
        raise _Unsupported(f"pads={pads} for rank {len(dims)}")
    if any(p < 0 for p in pads):
        raise _Unsupported(f"pads={pads}: negative pads (cropping)")
    r = len(dims)
    out = [d_add(d, pads[i] + pads[r + i]) for i, d in enumerate(dims)]
    im.emit(node, f"pad({im.tensor(node.input[0])}, pads={_ints(pads)}, value={_float(value)})",
            out)


# ---- transformer ops (issue 24) ----------------------------------------------------------------


def _float_input(im, node, i=0, op=None):
    name = node.input[i]
    if im.etypes.get(name, 1) != 1:
        raise _Unsupported(f"input {i} ({name}) has element type {im.etypes.get(name)}; gearbox "
                           f"{op or node.op_type.lower()} takes f32")
    return name


def _float_unary(op):
    def fn(im, node):
        _float_input(im, node, 0, op)
        im.emit(node, f"{op}({im.tensor(node.input[0])})", im.shape(node.input[0]))

    return fn


def _float_binary(op):
    def fn(im, node):
        for i in range(2):
            _float_input(im, node, i, op)
        a, b = node.input[0], node.input[1]
        im.emit(node, f"{op}({im.tensor(a)}, {im.tensor(b)})", _broadcast(im.shape(a), im.shape(b)))

    return fn


def _pow(im, node):
    # An integer exponent known at import becomes an f32 constant (ONNX allows mixed types);
    # a run-time one would need a cast first.
    _float_input(im, node, 0, "pow")
    base, exp = node.input[0], node.input[1]
    c = im.const_of(exp)
    if c is not None and c.dtype != np.float32:
        exp = exp + ".f32"
        im.const_line(exp, c.astype(np.float32), f"exponent of {node.name}")
    elif c is None:
        _float_input(im, node, 1, "pow")
    im.emit(node, f"pow({im.tensor(base)}, {im.tensor(exp)})",
            _broadcast(im.shape(base), im.shape(node.input[1])))


def _softmax(im, node):
    x = _float_input(im, node, 0, "softmax")
    dims = im.shape(x)
    r = len(dims)
    axis = im.attr(node, "axis", -1 if im.opset >= 13 else 1)
    if not -r <= axis < r:
        raise _Unsupported(f"axis={axis} outside rank {r}")
    axis %= r
    src = im.tensor(x)
    if im.opset >= 13 or axis == r - 1:
        im.emit(node, f"softmax({src}{'' if axis == r - 1 else f', axis={axis}'})", dims)
        return
    # Before opset 13 the input is coerced to 2-D at `axis` and normalised over everything after
    # it: reshape to [prod(dims[:axis]), prod(dims[axis:])], softmax the rows, reshape back.
    im.need("reshape")
    flat = [_prod(dims[:axis]), _prod(dims[axis:])]
    steps = im.reshape_call(src, dims, flat, "softmax's 2-D view")
    cur = src
    for j, (call, out) in enumerate(steps):
        cur = im.emit_tmp(f"{node.output[0]}.rows{j}", call.replace("@", cur), out, 1)
    cur = im.emit_tmp(f"{node.output[0]}.soft", f"softmax({cur})", flat, 1)
    im.emit_steps(node, cur, im.reshape_call(cur, flat, dims, "softmax's 2-D view back"), 1)


def _affine_input(im, name, group, what, node):
    """LayerNorm's scale or bias as an IR tensor of the normalised group's shape: as it is when
    it has that shape, else broadcast at import when it is a known constant."""
    dims = im.shape(name, what)
    if list(dims) == list(group):
        return im.tensor(name)
    c = im.const_of(name)
    if c is None or not all(_is_static(d) for d in group):
        raise _Unsupported(f"{what} {name} has shape [{', '.join(_dim_str(d) for d in dims)}], "
                           f"not the normalised dims [{', '.join(_dim_str(d) for d in group)}]")
    _check_constant_size(group, np.float32, f"broadcasting {what} {name}")
    try:
        full = np.ascontiguousarray(np.broadcast_to(c, [int(d) for d in group]))
    except ValueError:
        raise _Unsupported(f"{what} {name} of shape {list(c.shape)} does not broadcast to "
                           f"{list(group)}") from None
    im.const_line(f"{name}.{node.output[0]}", full.astype(np.float32), f"{what} of {node.name}")
    return im.tensor(f"{name}.{node.output[0]}")


# Doubles from here up round to inf as an f32 (FLT_MAX + half its ulp ties to even, upward):
# gearbox's layer_norm takes an epsilon below it (graph/ops/layer_norm.cpp), its kernels add it
# as an f32.
_F32_OVERFLOW = 2.0**128 - 2.0**103


def _check_epsilon(eps, what):
    try:
        e = float(eps)
    except (TypeError, ValueError):
        raise _Unsupported(f"{what} is {eps!r}, not a number") from None
    if not 0 < e < _F32_OVERFLOW:
        raise _Unsupported(f"{what} is {e!r}, expected a number > 0 that is finite as an f32 (at "
                           f"most {np.finfo(np.float32).max}; gearbox's layer_norm adds it as "
                           "one)")
    return e


def _layer_norm_call(im, node, x, axis, eps, scale, bias, eps_what="attribute epsilon"):
    """layer_norm(x[, scale[, bias]], axis, epsilon) for node's output; axis in [-r, r).
    eps_what names where epsilon came from, for the error when it is not a usable one."""
    eps = _check_epsilon(eps, eps_what)
    dims = im.shape(x)
    r = len(dims)
    if not -r <= axis < r:
        raise _Unsupported(f"axis={axis} outside rank {r}")
    group = dims[axis % r:]
    args = [im.tensor(x)]
    if bias and not scale:  # gearbox's optional inputs are positional: scale first, ones
        ones = f"{node.output[0]}.scale"
        if not all(_is_static(d) for d in group):
            raise _Unsupported("a bias without a scale over symbolic dims")
        _check_constant_size(group, np.float32, "a bias without a scale (a scale of ones)")
        im.const_line(ones, np.ones([int(d) for d in group], np.float32), "LayerNorm scale")
        scale = ones
    for name, what in ((scale, "scale"), (bias, "bias")):
        if name:
            args.append(_affine_input(im, name, group, what, node))
    attrs = "" if axis in (-1, r - 1) else f", axis={axis}"
    im.emit(node, f"layer_norm({', '.join(args)}{attrs}, epsilon={_float(eps)})", dims, etype=1)


def _layer_norm(im, node):
    # ONNX LayerNormalization (opset 17). Its Mean and InvStdDev outputs (for training) are
    # written, when something reads them, as the ops computing them (mean over the normalised
    # dims, kept; 1 / sqrt(mean((x - mean)^2) + epsilon)): gearbox's layer_norm returns Y only.
    x = _float_input(im, node, 0, "layer_norm")
    scale = node.input[1] if len(node.input) > 1 and node.input[1] else None
    bias = node.input[2] if len(node.input) > 2 and node.input[2] else None
    axis, eps = im.attr(node, "axis", -1), im.attr(node, "epsilon", 1e-5)
    _layer_norm_call(im, node, x, axis, eps, scale, bias)
    used = [k for k, o in enumerate(node.output[1:], 1)
            if o and (o in im.consumers or any(o == g.name for g in im.graph.output))]
    if not used:
        return
    im.need("mean", "sub", "mul", "add", "sqrt", "div")
    dims = im.shape(x)
    r = len(dims)
    axes = list(range(axis % r, r))
    kept = [1 if i in axes else d for i, d in enumerate(dims)]
    stem = node.output[0]
    call = f"axes={_ints(axes)}, keepdims=1"
    mean = im.emit_tmp(node.output[1] if 1 in used else f"{stem}.mean",
                       f"mean({im.tensor(x)}, {call})", kept, 1)
    if 2 not in used:
        return
    d = im.emit_tmp(f"{stem}.centred", f"sub({im.tensor(x)}, {mean})", dims, 1)
    sq = im.emit_tmp(f"{stem}.squared", f"mul({d}, {d})", dims, 1)
    var = im.emit_tmp(f"{stem}.var", f"mean({sq}, {call})", kept, 1)
    im.const_line(f"{stem}.epsilon", np.array(eps, np.float32), "LayerNorm epsilon")
    e = im.emit_tmp(f"{stem}.var_eps", f"add({var}, {im.value(stem + '.epsilon')})", kept, 1)
    sd = im.emit_tmp(f"{stem}.std", f"sqrt({e})", kept, 1)
    im.const_line(f"{stem}.one", np.array(1, np.float32), "LayerNorm InvStdDev")
    im.emit_tmp(node.output[2], f"div({im.value(stem + '.one')}, {sd})", kept, 1)


def _reduce_sum(im, node):
    x = _float_input(im, node, 0, "reduce_sum")
    dims = im.shape(x)
    axes = _axes_of(im, node, 1, "axes", len(dims))
    keep = im.attr(node, "keepdims", 1)
    if not axes:
        if im.attr(node, "noop_with_empty_axes", 0):
            _identity(im, node)  # ONNX: empty axes with noop_with_empty_axes=1 reduce nothing
            return
        axes = list(range(len(dims)))
    out = [1 if i in axes else d for i, d in enumerate(dims)] if keep else \
        [d for i, d in enumerate(dims) if i not in axes]
    im.emit(node, f"reduce_sum({im.tensor(x)}, axes={_ints(axes)}, keepdims={keep})", out)


def _where(im, node):
    cond, x, y = node.input[:3]
    c = im.const_of(cond)
    if c is not None:
        if c.dtype == np.bool_:  # gearbox has no bool dtype: a known mask becomes i32 0 / 1
            im.attr_read.add(cond)  # the bool initializer itself is never written
            cond = cond + ".i32"
            im.const_line(cond, c.astype(np.int32), f"condition of {node.name}")
    elif im.etypes.get(cond) == 9:
        raise _Unsupported(f"condition {cond} is a run-time bool tensor (gearbox has no bool "
                           "dtype; a condition known at import is written as i32)")
    if im.etypes.get(x, 1) != im.etypes.get(y, 1):
        raise _Unsupported("x and y of different element types")
    dims = _broadcast(_broadcast(im.shape(node.input[0]), im.shape(x)), im.shape(y))
    im.emit(node, f"where({im.tensor(cond)}, {im.tensor(x)}, {im.tensor(y)})", dims,
            etype=im.etypes.get(x, 1))


def _expand_dims(xdims, target):
    """Expand's output dims, as gearbox's inferExpand (graph/ops/expand.cpp) infers them: a
    target 1 keeps x's dim, an x dim of 1 takes the target's, and where one side is a size and
    the other a symbol the size wins (the symbol must be 1 or equal at run time), so the dims
    recorded here are the ones the written model has."""
    out = []
    r = max(len(xdims), len(target))
    for i in range(r):
        a = xdims[i - (r - len(xdims))] if i >= r - len(xdims) else 1
        t = target[i - (r - len(target))] if i >= r - len(target) else 1
        if a == t or (_is_static(t) and t == 1):
            out.append(a)
        elif _is_static(a) and a == 1:
            out.append(t)
        elif _is_static(a) and _is_static(t):
            raise _Unsupported(f"dim {i}: {a} does not broadcast to {t}")
        else:
            out.append(t if _is_static(t) else a if _is_static(a) else t)
    return out


def _expand(im, node):
    target = im.attr_input(node, 1, "shape")
    if target is None:
        raise _Unsupported("no shape input")
    target = list(target.reshape(-1))
    dims = _expand_dims(im.shape(node.input[0]), target)
    tokens = im.target_tokens(target, "shape")
    im.emit(node, f"expand({im.tensor(node.input[0])}, shape=[{', '.join(tokens)}])", dims)


def _constant_of_shape(im, node):
    # A fill of a shape known only as dim expressions (a causal mask's [seq, seq]): the value as
    # a scalar const, expanded (ConstantOfShape of numbers is folded).
    shape = im.known.get(node.input[0])
    if shape is None:
        raise _Unsupported("a shape computed at run time; gearbox has no such op (folded only "
                           "when its inputs are known at import)")
    im.need("expand")
    dims = list(shape.reshape(-1))
    t = im.attr(node, "value")
    value = im.onnx.numpy_helper.to_array(t).reshape(-1) if t is not None else \
        np.zeros(1, np.float32)
    etype = t.data_type if t is not None else 1
    if np.dtype(value.dtype) not in _NP_DTYPES:
        raise _Unsupported(f"value of element type {etype} (gearbox has f32, i32, i64)")
    scalar = f"{node.output[0]}.value"
    im.const_line(scalar, np.asarray(value[0], dtype=value.dtype), f"value of {node.name}")
    tokens = im.target_tokens(dims, "shape")
    im.emit(node, f"expand({im.tensor(scalar)}, shape=[{', '.join(tokens)}])", dims, etype=etype)


def _trilu(im, node):
    dims = im.shape(node.input[0])
    if len(dims) < 2:
        raise _Unsupported(f"input rank {len(dims)} (needs a matrix)")
    k = im.attr_input(node, 1, "k")
    k = 0 if k is None else int(np.asarray(k).reshape(-1)[0])
    upper = im.attr(node, "upper", 1)
    attrs = ("" if upper else ", upper=0") + (f", k={k}" if k else "")
    im.emit(node, f"trilu({im.tensor(node.input[0])}{attrs})", dims)


# ---- patterns written as one op ----------------------------------------------------------------
#
# torch.onnx.export decomposes LayerNorm before opset 17 and GELU before opset 20. The importer
# recognises the exact graphs it writes (and the commonly hand-written orders of the same
# products) and writes one layer_norm / gelu: one kernel and the cost terms of a norm instead of
# eight elementwise and reduction ops. A pattern is taken only when every intermediate value
# feeds the pattern alone (no other node, no graph output reads it); otherwise its nodes are
# imported one by one, as the ops they are.


def _static_value(im, name):
    """The value of `name` if it is an initializer or a Constant node's, or an Identity of one
    (torch shares equal initializers through Identity nodes), before the walk."""
    if name in im.known and im.known[name].dtype != object:
        return im.known[name]
    node = im.producer.get(name)
    for _ in range(16):  # an Identity chain, bounded
        if node is None or node.op_type != "Identity":
            break
        if node.input[0] in im.known and im.known[node.input[0]].dtype != object:
            return im.known[node.input[0]]
        node = im.producer.get(node.input[0])
    if node is not None and node.op_type == "Constant" and len(node.attribute) == 1:
        a = node.attribute[0]
        if a.name == "value":
            return im.onnx.numpy_helper.to_array(a.t)
        if a.name == "value_float":
            return np.asarray(a.f, np.float32)
    return None


def _scalar(im, name):
    v = _static_value(im, name)
    if v is None or v.size != 1 or v.dtype.kind not in "fiu":
        return None
    return float(v.reshape(-1)[0])


def _node_of(im, name, op_type):
    n = im.producer.get(name)
    return n if n is not None and n.op_type == op_type else None


def _only_user(im, name, outputs):
    """The one node reading `name` (None if another node or a graph output reads it)."""
    users = {id(n): n for n in im.consumers.get(name, [])}
    if len(users) != 1 or name in outputs:
        return None
    return next(iter(users.values()))


def _split_const(im, node, value, tol):
    """For a two-input node with one input a scalar constant close to `value`: the other input."""
    for i in (0, 1):
        c = _scalar(im, node.input[i])
        if c is not None and abs(c - value) <= tol:
            return node.input[1 - i]
    return None


def _gelu_tail(im, x, add1, outputs):
    """After 1 + f(...) = add1: 0.5 * x * add1 in either order of the two products. Returns
    (last node, absorbed product nodes) or None."""
    m = _only_user(im, add1, outputs)
    if m is None or m.op_type != "Mul" or len(m.input) != 2:
        return None
    other = m.input[0] if m.input[1] == add1 else m.input[1]
    if other == x:  # torch: (x * add1) * 0.5
        last = _only_user(im, m.output[0], outputs)
        if last is not None and last.op_type == "Mul" and \
                _split_const(im, last, 0.5, 1e-6) == m.output[0]:
            return last, [m]
        return None
    half = _node_of(im, other, "Mul")  # HF BERT: (x * 0.5) * add1
    if half is not None and _split_const(im, half, 0.5, 1e-6) == x and \
            _only_user(im, half.output[0], outputs) is m:
        return m, [half]
    return None


def _match_gelu_erf(im, erf, outputs):
    pre = im.producer.get(erf.input[0])
    if pre is None or _only_user(im, erf.input[0], outputs) is not erf:
        return None
    if pre.op_type == "Div" and abs((_scalar(im, pre.input[1]) or 0) - 2 ** 0.5) < 1e-5:
        x = pre.input[0]
    elif pre.op_type == "Mul":
        x = _split_const(im, pre, 2 ** -0.5, 1e-5)
    else:
        return None
    add1 = _only_user(im, erf.output[0], outputs)
    if x is None or add1 is None or add1.op_type != "Add" or \
            _split_const(im, add1, 1.0, 1e-6) != erf.output[0]:
        return None
    tail = _gelu_tail(im, x, add1.output[0], outputs)
    if tail is None:
        return None
    last, more = tail
    return last, [pre, erf, add1] + more, x, 0


def _match_gelu_tanh(im, tanh, outputs):
    # tanh(sqrt(2/pi) * (x + 0.044715 * x^3)), x^3 as x * (x * x) or Pow(x, 3).
    scaled = im.producer.get(tanh.input[0])
    if scaled is None or scaled.op_type != "Mul" or \
            _only_user(im, tanh.input[0], outputs) is not tanh:
        return None
    inner = _split_const(im, scaled, (2 / np.pi) ** 0.5, 1e-5)
    add = _node_of(im, inner, "Add") if inner else None
    if add is None or _only_user(im, inner, outputs) is not scaled:
        return None
    for x, cubic in ((add.input[0], add.input[1]), (add.input[1], add.input[0])):
        term = _node_of(im, cubic, "Mul")
        cube_name = _split_const(im, term, 0.044715, 1e-6) if term is not None else None
        cube = im.producer.get(cube_name) if cube_name else None
        if cube is None or _only_user(im, cubic, outputs) is not add or \
                _only_user(im, cube_name, outputs) is not term:
            continue
        nodes = [cube]
        if cube.op_type == "Pow" and cube.input[0] == x and _scalar(im, cube.input[1]) == 3.0:
            pass
        elif cube.op_type == "Mul" and x in cube.input:
            sq_name = cube.input[1] if cube.input[0] == x else cube.input[0]
            sq = _node_of(im, sq_name, "Mul")
            if sq is None or list(sq.input) != [x, x] or \
                    _only_user(im, sq_name, outputs) is not cube:
                continue
            nodes.append(sq)
        else:
            continue
        add1 = _only_user(im, tanh.output[0], outputs)
        if add1 is None or add1.op_type != "Add" or \
                _split_const(im, add1, 1.0, 1e-6) != tanh.output[0]:
            return None
        tail = _gelu_tail(im, x, add1.output[0], outputs)
        if tail is None:
            return None
        last, more = tail
        return last, nodes + [term, add, scaled, tanh, add1] + more, x, 1
    return None


def _reduce_axes_static(im, node):
    axes = im.attr(node, "axes")
    if axes is None and len(node.input) > 1 and node.input[1]:
        v = _static_value(im, node.input[1])
        axes = None if v is None else [int(a) for a in v.reshape(-1)]
    return None if axes is None else list(axes)


def _match_layer_norm(im, div, outputs):
    # (x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps) [* scale] [+ bias], the means over the
    # trailing dims (negative axes, so the rank need not be known yet).
    d, s = div.input[0], div.input[1]
    sqrt = _node_of(im, s, "Sqrt")
    add = _node_of(im, sqrt.input[0], "Add") if sqrt is not None else None
    if add is None:
        return None
    eps = None
    for i in (0, 1):
        if _scalar(im, add.input[i]) is not None:
            eps, var = _scalar(im, add.input[i]), add.input[1 - i]
            eps_what = f"epsilon (input {i}, {add.input[i]}, of Add node '{add.name or '?'}')"
    rm2 = _node_of(im, var, "ReduceMean") if eps is not None else None
    sub = _node_of(im, d, "Sub")
    if rm2 is None or sub is None:
        return None
    sq = im.producer.get(rm2.input[0])
    if sq is None or not ((sq.op_type == "Pow" and sq.input[0] == d and
                           _scalar(im, sq.input[1]) == 2.0) or
                          (sq.op_type == "Mul" and list(sq.input) == [d, d])):
        return None
    x, mean = sub.input[0], sub.input[1]
    rm1 = _node_of(im, mean, "ReduceMean")
    if rm1 is None or rm1.input[0] != x:
        return None
    axes = _reduce_axes_static(im, rm1)
    if axes is None or axes != _reduce_axes_static(im, rm2) or \
            sorted(axes) != list(range(-len(axes), 0)):
        return None
    if rm1.output[0] in outputs or rm2.output[0] in outputs:
        return None
    for n in (rm1, rm2):
        if im.attr(n, "keepdims", 1) != 1:
            return None
    users = {id(n) for n in im.consumers.get(d, [])}
    if users != {id(sq), id(div)} or d in outputs:
        return None
    for name, user in ((mean, sub), (sq.output[0], rm2), (var, add), (add.output[0], sqrt),
                       (s, div)):
        if _only_user(im, name, outputs) is not user:
            return None
    nodes, last, scale, bias = [rm1, sub, sq, rm2, add, sqrt], div, None, None
    mul = _only_user(im, div.output[0], outputs)
    if mul is not None and mul.op_type == "Mul":
        other = mul.input[1] if mul.input[0] == div.output[0] else mul.input[0]
        if _static_value(im, other) is not None:
            nodes.append(last)
            last, scale = mul, other
    add_b = _only_user(im, last.output[0], outputs)
    if add_b is not None and add_b.op_type == "Add":
        other = add_b.input[1] if add_b.input[0] == last.output[0] else add_b.input[0]
        if _static_value(im, other) is not None:
            nodes.append(last)
            last, bias = add_b, other
    return last, nodes, x, (min(axes), eps, scale, bias, eps_what)


class _Fusion:
    """A pattern planned as one op: its nodes (the last one written as `op` by `emit`), the value
    x it applies to, and the constants it reads, checked against x's rank when the walk reaches
    its first node (_fusion_keeps_shape)."""

    __slots__ = ("op", "last", "nodes", "x", "consts", "emit", "checked")

    def __init__(self, op, last, nodes, x, consts, emit):
        self.op, self.last, self.nodes, self.x = op, last, nodes, x
        self.consts, self.emit, self.checked = consts, emit, False


def _pattern_constants(nodes, x):
    """The values a pattern's nodes read that neither x nor another of its nodes makes: its
    constants (and LayerNorm's scale and bias). ReduceMean's axes input is an attribute."""
    made = {o for n in nodes for o in n.output}
    return [name for n in nodes for name in (n.input[:1] if n.op_type == "ReduceMean" else n.input)
            if name and name != x and name not in made]


def _fusion_keeps_shape(im, fusion):
    """Whether the pattern's result has x's shape, as the fused op's has: every constant it
    reads has at most x's rank. The matchers take constants of one element (and a scale or
    bias of any shape); broadcasting one of a higher rank, ([1, 1, 1] against x of rank 2)
    prepends dims to the result. True while x's rank is unknown (the op then says so)."""
    dims = im.shapes.get(fusion.x)
    if dims is None:
        return True
    for name in fusion.consts:
        v = _static_value(im, name)
        if v is not None and v.ndim > len(dims):
            return False
    return True


def _plan_fusions(im, outputs):
    """The patterns this build can write as one op: {id(node): _Fusion} for every node of each."""
    members = {}

    def take(match, op, emit):
        last, nodes, x, arg = match
        everything = nodes + [last]
        if any(id(n) in members for n in everything):
            return
        f = _Fusion(op, last, everything, x, _pattern_constants(everything, x),
                    lambda im_, node: emit(im_, node, x, arg))
        for n in everything:
            members[id(n)] = f
        reads = [x] + ([n for n in arg[2:4] if n] if op == "layer_norm" else [])
        im.fused_inputs[id(last)] = reads
        im.absorbed += len(nodes)

    for i, node in enumerate(im.graph.node):
        if node.op_type == "Div" and "layer_norm" in im.ops:
            op, matcher = "layer_norm", _match_layer_norm
        elif node.op_type in ("Erf", "Tanh") and "gelu" in im.ops:
            op, matcher = "gelu", _match_gelu_erf if node.op_type == "Erf" else _match_gelu_tanh
        else:
            continue
        try:
            m = matcher(im, node, outputs)
        except (_Unsupported, ImportFailure):
            raise
        except Exception as e:
            # A node the matcher cannot read (a constant of an element type onnx cannot
            # convert, axes that are not integers): named, not a traceback without a node.
            raise ImportFailure(
                "parse", f"node '{(node.name or f'node{i}')[:80]}' ({node.op_type}): malformed "
                         f"where the {op} pattern was matched from it: {type(e).__name__}: "
                         f"{str(e)[:200]}") from None
        if not m:
            continue
        if op == "layer_norm":
            take(m, op, lambda im_, node, x, a: _layer_norm_call(
                im_, node, x, a[0], a[1], a[2], a[3], a[4]))
        else:
            take(m, op, lambda im_, node, x, approx: im_.emit(
                node, f"gelu({im_.tensor(x)}{', approximate=1' if approx else ''})",
                im_.shape(x), etype=1))
    return members


# ONNX op type -> (gearbox ops it needs, the function writing it). One row per op. Ops in FOLD
# are evaluated at import when their inputs are known; their row here handles the other case.
OPS = {
    "Add": (["add"], _binary("add")),
    "Mul": (["mul"], _binary("mul")),
    "Relu": (["relu"], _unary("relu")),
    "Sigmoid": (["sigmoid"], _unary("sigmoid")),
    "MatMul": (["matmul"], _matmul),
    "Gemm": (["matmul", "add"], _gemm),  # + mul, transpose where needed
    "Gather": (["index_select"], _gather),  # N-D indices: gather where the build has it
    "Concat": (["cat"], _concat),
    "Reshape": (["reshape"], _reshape),
    "Transpose": (["transpose"], _transpose),
    "Conv": (["conv2d"], _conv),
    "MaxPool": (["max_pool2d"], _pool("max_pool2d")),
    "AveragePool": (["avg_pool2d"], _pool("avg_pool2d")),
    "GlobalAveragePool": (["mean"], _global_average_pool),
    "ReduceMean": (["mean"], _reduce_mean),
    "BatchNormalization": (["batch_norm"], _batch_norm),
    "Clip": (["clip"], _clip),
    "Flatten": ([], _flatten),  # flatten, or reshape in a build without it
    "Slice": (["slice"], _slice),
    "Split": (["slice"], _split),
    "Squeeze": (["squeeze"], _squeeze),
    "Unsqueeze": (["unsqueeze"], _unsqueeze),
    "Pad": (["pad"], _pad),
    "Identity": ([], _identity),
    "Cast": ([], _cast),
    "Constant": ([], _f_constant),
    "Shape": ([], _not_folded("Shape of a value of unknown rank")),
    "ConstantOfShape": ([], _constant_of_shape),  # expand of a scalar; folded when static
    "Sub": (["sub"], _binary("sub")),
    "Div": (["div"], _float_binary("div")),
    "Pow": (["pow"], _pow),
    "Sqrt": (["sqrt"], _float_unary("sqrt")),
    "Erf": (["erf"], _float_unary("erf")),
    "Tanh": (["tanh"], _float_unary("tanh")),
    "Softmax": (["softmax"], _softmax),
    "LayerNormalization": (["layer_norm"], _layer_norm),
    "ReduceSum": (["reduce_sum"], _reduce_sum),
    "Where": (["where"], _where),
    "Expand": (["expand"], _expand),
    "Trilu": (["trilu"], _trilu),
    "Equal": ([], _not_folded("Equal of a run-time tensor (gearbox has no bool dtype)")),
}


def import_model(model_path, out_path, name=None):
    """Imports `model_path` (ONNX) to `out_path` (.gbx) + `<stem>.<value>.npy` beside it.

    Returns the list of files written. Raises ImportFailure, a gearbox.Error (nothing written),
    on bad input: the one error boundary of the importer, so no other exception escapes."""
    try:
        return _import_model(model_path, out_path, name)
    except ImportFailure:
        raise
    except _gearbox.Error as e:  # the file rules (_safe_io) and the C++ parser
        raise ImportFailure(getattr(e, "kind", "io"), str(e)) from None
    except OSError as e:  # staging files beside the output
        where = e.filename if isinstance(e.filename, str) else out_path
        raise ImportFailure("io", f"cannot write '{where}': {e.strerror or e}") from None
    except MemoryError:
        raise ImportFailure("parse", f"{model_path}: the model needs more memory than there "
                                     "is") from None
    except Exception as e:  # a malformed proto the checks above did not foresee
        raise ImportFailure("parse", f"{model_path}: cannot import: {type(e).__name__}: "
                                     f"{e}") from None


def _import_model(model_path, out_path, name):
    import onnx
    import onnx.numpy_helper  # noqa: F401

    _safe_io.check_output_path(out_path)
    model = _read_model(model_path)
    if os.path.exists(out_path) and os.path.samefile(model_path, out_path):
        raise ImportFailure("io", f"-o {out_path} is the model itself: refusing to overwrite "
                                  "an input")
    out_dir = os.path.dirname(os.path.abspath(out_path))
    stem = os.path.splitext(os.path.basename(out_path))[0] or "model"
    im = _Importer(model, stem, name)
    try:
        text = im.run()
    except ImportFailure as e:
        raise ImportFailure(e.kind, f"{model_path}: {e}")
    for fname in list(im.files) + [os.path.basename(out_path)]:
        # NAME_MAX, checked before anything is staged: an ONNX value name can be any length.
        if len(os.fsencode(fname)) > 255:
            raise ImportFailure("io", f"cannot write '{fname[:60]}...' in {out_dir}: the file "
                                      f"name is {len(os.fsencode(fname))} bytes, above the "
                                      "limit of 255 (a long ONNX value name?)")
    tmp = tempfile.mkdtemp(prefix=".gearbox-import-", dir=out_dir)
    try:
        # Staged and verified in a folder of its own first; then every file goes in place
        # together (_safe_io.AtomicFileSet), .npy files and the .gbx, or none of them.
        for fname, arr in im.files.items():
            np.save(os.path.join(tmp, fname), arr)
        gbx = os.path.join(tmp, os.path.basename(out_path))
        with open(gbx, "w", encoding="utf-8") as f:
            f.write(text)
        try:
            _gearbox.load(gbx)  # the CLI's own parser and shape inference
        except _gearbox.Error as e:
            msg = str(e).replace(gbx, out_path).replace(tmp + os.sep, "")
            raise ImportFailure(e.kind, f"{model_path}: the imported model does not verify: {msg}")
        files = _safe_io.AtomicFileSet()
        for fname in im.files:
            with open(os.path.join(tmp, fname), "rb") as f:
                files.add(os.path.join(out_dir, fname), f.read())
        files.add(out_path, text.encode("utf-8"))
        return files.commit()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _read_model(model_path):
    """The model through the file rules (_safe_io): a regular file within the size limit, its
    external data inlined from regular files inside its own folder, and its tensors and nodes
    checked against what they claim before any of them is used."""
    import onnx

    data = _safe_io.read_file(model_path)
    try:
        model = onnx.load_model_from_string(data)
    except Exception as e:  # protobuf decode errors
        raise ImportFailure("io", f"{model_path}: not a readable ONNX model: {e}") from None
    bad = _first_non_utf8_string(model)
    if bad is not None:
        raise ImportFailure("parse", f"{model_path}: {bad[0]} {bad[1]!r:.80} is not UTF-8 (ONNX "
                                     "names and strings must be)")
    if not model.HasField("graph") or not model.graph.output:
        raise ImportFailure("parse", f"{model_path}: not an ONNX model with a graph (no graph "
                                     "outputs; an empty or truncated file?)")
    folder = os.path.dirname(os.path.abspath(model_path))
    for t in _all_tensors(model):
        if t.data_location == onnx.TensorProto.EXTERNAL:
            _inline_external_data(t, folder, model_path)
        _check_tensor(t, model_path)
    _check_nodes(model, model_path)
    return model


def _first_non_utf8_string(msg, path="model"):
    """The first string field of the proto that protobuf could not decode as UTF-8 (it hands
    those over as bytes: proto2 does not reject them), as (field path, value), or None."""
    from google.protobuf.descriptor import FieldDescriptor

    for field, value in msg.ListFields():
        where = f"{path}.{field.name}"
        values = value if field.label == FieldDescriptor.LABEL_REPEATED else [value]
        if field.type == FieldDescriptor.TYPE_STRING:
            for v in values:
                if isinstance(v, bytes):
                    return where, v
        elif field.type == FieldDescriptor.TYPE_MESSAGE:
            for v in values:
                found = _first_non_utf8_string(v, where)
                if found is not None:
                    return found
    return None


def _all_tensors(model):
    from onnx import external_data_helper

    return list(external_data_helper._get_all_tensors(model))


def _inline_external_data(t, folder, model_path):
    import onnx

    info = {e.key: e.value for e in t.external_data}
    what = f"{model_path}: external data of tensor '{t.name}'"
    try:
        offset = int(info.get("offset") or 0)
        length = int(info["length"]) if info.get("length") else None
    except ValueError:
        raise ImportFailure("parse", f"{what}: offset and length must be integers") from None
    expected = _tensor_bytes(t)
    if length is None and expected is not None:
        length = expected
    t.raw_data = _safe_io.read_beside(folder, info.get("location", ""), offset, length, what)
    t.data_location = onnx.TensorProto.DEFAULT
    del t.external_data[:]


# onnx.TensorProto data type -> (bytes per element, the typed field holding it when not raw).
_ELEMENT = {1: (4, "float_data"), 2: (1, "int32_data"), 3: (1, "int32_data"),
            4: (2, "int32_data"), 5: (2, "int32_data"), 6: (4, "int32_data"),
            7: (8, "int64_data"), 9: (1, "int32_data"), 10: (2, "int32_data"),
            11: (8, "double_data"), 12: (4, "uint64_data"), 13: (8, "uint64_data"),
            16: (2, "int32_data")}


def _tensor_bytes(t):
    """Bytes the tensor's dims and type claim (None for a type without a fixed size)."""
    if t.data_type not in _ELEMENT:
        return None
    count = 1
    for d in t.dims:
        count *= d
    return count * _ELEMENT[t.data_type][0]


def _check_tensor(t, model_path):
    where = f"{model_path}: tensor '{t.name[:80]}'"
    if any(d < 0 for d in t.dims):
        raise ImportFailure("parse", f"{where}: negative dim in {list(t.dims)}")
    size = _tensor_bytes(t)
    if size is None:
        return  # an element type gearbox does not take; the importer reports it by name
    if size > _safe_io.MAX_INPUT_FILE_BYTES:
        raise ImportFailure("parse", f"{where}: dims {list(t.dims)} hold {size} bytes, above the "
                                     f"limit of {_safe_io.MAX_INPUT_FILE_BYTES} bytes")
    count = size // _ELEMENT[t.data_type][0]
    if t.raw_data:
        if len(t.raw_data) != size:
            raise ImportFailure("parse", f"{where}: raw_data has {len(t.raw_data)} bytes, its "
                                         f"dims {list(t.dims)} need {size}")
        return
    field = _ELEMENT[t.data_type][1]
    have = len(getattr(t, field))
    if have != count:
        raise ImportFailure("parse", f"{where}: {field} has {have} values, its dims "
                                     f"{list(t.dims)} need {count}")


def _check_nodes(model, model_path):
    """Every node has an output and at least the inputs its ONNX schema needs, so no op row
    meets a node shorter than its op allows."""
    import onnx.defs

    opset = {o.domain or "": o.version for o in model.opset_import}
    for i, node in enumerate(model.graph.node):
        label = f"node '{(node.name or f'node{i}')[:80]}' ({node.op_type[:80]})"
        if not node.output or not node.output[0]:
            raise ImportFailure("parse", f"{model_path}: {label} has no outputs")
        try:
            schema = onnx.defs.get_schema(node.op_type, opset.get(node.domain or "", 1),
                                          node.domain or "")
        except Exception:  # an op ONNX does not define: the importer lists it as unsupported
            continue
        if len(node.input) < schema.min_input:
            raise ImportFailure("parse", f"{model_path}: {label} has {len(node.input)} inputs, "
                                         f"its ONNX schema needs at least {schema.min_input}")


def main(argv=None):
    p = argparse.ArgumentParser(prog="gearbox import", description="Import an ONNX model.")
    p.add_argument("model")
    p.add_argument("-o", "--out", required=True)
    p.add_argument("--name")
    args = p.parse_args(argv)
    try:
        written = import_model(args.model, args.out, args.name)
    except _gearbox.Error as e:  # ImportFailure is one; import_model lets nothing else out
        label = getattr(e, "label", "error")
        print(f"gearbox: {label}: {e}", file=sys.stderr)
        return 2
    print(f"wrote {args.out} ({len(written) - 1} .npy constant file(s))")
    return 0


if __name__ == "__main__":
    sys.exit(main())
