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


class _Importer:
    def __init__(self, model, stem, name):
        import onnx
        import onnx.numpy_helper  # noqa: F401  (submodules are not imported by "import onnx")
        import onnx.shape_inference  # noqa: F401

        self.onnx = onnx
        self.model = model
        self.graph = model.graph
        self.stem = stem
        self.graph_name = _ident(name or self.graph.name, "main")
        self.ops = set(_gearbox.op_names())
        self.names = {}  # onnx value name -> gearbox value name
        self.used = set()
        self.lines = []
        self.files = {}  # .npy file name -> array
        self.consts = {}  # onnx value name -> numpy array (initializers and Constant outputs)
        self.shapes = {}  # onnx value name -> [int | str | None]
        self.unsupported = []  # (node name, op type, reason)
        try:
            inferred = onnx.shape_inference.infer_shapes(model)
        except Exception:  # shape inference is a help, not a requirement
            inferred = model
        for vi in list(inferred.graph.value_info) + list(inferred.graph.input) + list(
            inferred.graph.output
        ):
            self.shapes[vi.name] = self._shape_of(vi)

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

    def _shape_of(self, vi):
        if not vi.type.HasField("tensor_type") or not vi.type.tensor_type.HasField("shape"):
            return None
        dims = []
        for d in vi.type.tensor_type.shape.dim:
            if d.HasField("dim_value"):
                dims.append(int(d.dim_value))
            elif d.HasField("dim_param") and d.dim_param:
                dims.append(_ident(d.dim_param, "D"))
            else:
                dims.append(None)
        return dims

    @staticmethod
    def dims_text(dims):
        return ", ".join("-1" if d is None else str(d) for d in dims)

    def const_line(self, onnx_name, array, where):
        dt = _NP_DTYPES.get(array.dtype)
        if dt is None:
            raise _Unsupported(f"{where}: dtype {array.dtype} (gearbox has f32, i32, i64)")
        out = self.value(onnx_name)
        fname = f"{self.stem}.{self.names[onnx_name]}.npy"
        self.files[fname] = np.ascontiguousarray(array)
        self.consts[onnx_name] = array
        shape = ", ".join(str(d) for d in array.shape)
        self.lines.append(f'  {out} = const {dt}[{shape}] "{fname}"')

    def const_of(self, onnx_name):
        return self.consts.get(onnx_name)

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
                continue
            dims = self._shape_of(vi)
            if dims is None:
                self.unsupported.append((vi.name, "graph input", "no shape"))
                continue
            inputs.append(f"{self.value(vi.name)}: {_DTYPES[elem]}[{self.dims_text(dims)}]")
        for name, t in initializers.items():
            try:
                self.const_line(name, numpy_helper.to_array(t), f"initializer {name}")
            except _Unsupported as e:
                self.unsupported.append((name, "initializer", str(e)))
        for i, node in enumerate(g.node):
            label = node.name or f"node{i}"
            row = OPS.get(node.op_type)
            if row is None:
                self.unsupported.append((label, node.op_type, "no mapping"))
                continue
            needs, fn = row
            missing = [op for op in needs if op not in self.ops]
            if missing:
                self.unsupported.append(
                    (label, node.op_type, f"needs gearbox op {', '.join(missing)}, not in this build")
                )
                continue
            try:
                fn(self, node)
            except _Unsupported as e:
                self.unsupported.append((label, node.op_type, str(e)))
        if self.unsupported:
            listed = "; ".join(f"{n} ({op}: {why})" for n, op, why in self.unsupported)
            raise ImportFailure(
                "parse", f"{len(self.unsupported)} unsupported node(s), nothing written: {listed}"
            )
        outputs = ", ".join(self.value(o.name) for o in g.output)
        header = f"graph {self.graph_name}({', '.join(inputs)}) {{"
        body = "\n".join(self.lines)
        return f"# imported from ONNX by gearbox import\n{header}\n{body}\n  return {outputs}\n}}\n"

    # ---- helpers for rows -----------------------------------------------------------------------

    def emit(self, node, call):
        self.lines.append(f"  {self.value(node.output[0])} = {call}")

    def attr(self, node, name, default=None):
        for a in node.attribute:
            if a.name == name:
                return self.onnx.helper.get_attribute_value(a)
        return default

    def supports(self, text):
        """Whether this gearbox build accepts an IR snippet (capability probe)."""
        try:
            _gearbox.parse(text)
            return True
        except _gearbox.Error:
            return False


# ---- one function per ONNX op ---------------------------------------------------------------------


def _binary(op):
    def fn(im, node):
        im.emit(node, f"{op}({im.value(node.input[0])}, {im.value(node.input[1])})")

    return fn


def _unary(op):
    def fn(im, node):
        im.emit(node, f"{op}({im.value(node.input[0])})")

    return fn


def _matmul(im, node):
    ranks = [len(im.shapes.get(n) or [0, 0]) for n in node.input[:2]]
    if 1 in ranks and not im.supports(
        "graph t(%a: f32[4], %b: f32[4, 3]) { %m = matmul(%a, %b) return %m }"
    ):
        raise _Unsupported("a 1-D input; gearbox matmul in this build needs rank >= 2")
    im.emit(node, f"matmul({im.value(node.input[0])}, {im.value(node.input[1])})")


def _concat(im, node):
    axis = im.attr(node, "axis")
    args = ", ".join(im.value(n) for n in node.input)
    im.emit(node, f"cat({args}, dim={axis})")


def _gather(im, node):
    axis = im.attr(node, "axis", 0)
    data, indices = node.input[0], node.input[1]
    idx = im.const_of(indices)
    if idx is not None:
        if idx.ndim != 1:
            raise _Unsupported(f"{idx.ndim}-D indices (gearbox index_select takes 1-D indices)")
        if (idx < 0).any():
            # ONNX: a negative index i means i + size; index_select takes [0, size) only, so
            # constant indices are rewritten here, against the dim's static size.
            dims = im.shapes.get(data)
            size = dims[axis] if dims and -len(dims) <= axis < len(dims) else None
            if not isinstance(size, int):
                raise _Unsupported("negative constant indices on a dim of unknown size")
            if (idx < -size).any() or (idx >= size).any():
                raise _Unsupported(f"an index outside [-{size}, {size})")
            fixed = np.where(idx < 0, idx + size, idx).astype(idx.dtype)
            im.const_line(indices + ".wrapped", fixed, f"indices of {node.name}")
            indices = indices + ".wrapped"
    else:
        dims = im.shapes.get(indices)
        if dims is not None and len(dims) != 1:
            raise _Unsupported(f"{len(dims)}-D indices (gearbox index_select takes 1-D indices)")
    im.emit(node, f"index_select({im.value(data)}, {im.value(indices)}, dim={axis})")


def _reshape(im, node):
    target = im.const_of(node.input[1])
    if target is None:
        raise _Unsupported("a shape that is not a constant")
    if im.attr(node, "allowzero", 0):
        raise _Unsupported("allowzero=1")
    src = im.shapes.get(node.input[0]) or []
    dims = []
    for i, d in enumerate(target.tolist()):
        if d == 0:  # ONNX: copy the input's dim
            if i >= len(src) or src[i] is None:
                raise _Unsupported(f"0 at position {i} copies a dim of unknown size")
            d = src[i]
        dims.append(str(d))
    im.emit(node, f"reshape({im.value(node.input[0])}, shape=[{', '.join(dims)}])")


def _transpose(im, node):
    perm = im.attr(node, "perm")
    if perm is None:
        rank = len(im.shapes.get(node.input[0]) or [])
        if not rank:
            raise _Unsupported("no perm and an input of unknown rank")
        perm = list(reversed(range(rank)))
    im.emit(node, f"transpose({im.value(node.input[0])}, perm=[{', '.join(map(str, perm))}])")


def _gemm(im, node):
    # Y = alpha * A' @ B' + beta * C, A' = A or A^T, B' = B or B^T. Expressible when the
    # transposes and scales can be folded into constants, or a transpose op exists.
    alpha, beta = im.attr(node, "alpha", 1.0), im.attr(node, "beta", 1.0)
    trans = [im.attr(node, "transA", 0), im.attr(node, "transB", 0)]
    operands = []
    for k in range(2):
        name = node.input[k]
        c = im.const_of(name)
        if trans[k] or (k == 1 and alpha != 1.0):
            if c is None:
                if alpha != 1.0 and k == 1:
                    raise _Unsupported("alpha != 1 with a non-constant B")
                if "transpose" not in im.ops:
                    raise _Unsupported("transA/transB of a non-constant input needs transpose")
                t = f"{name}.T"
                im.lines.append(f"  {im.value(t)} = transpose({im.value(name)}, perm=[1, 0])")
                name = t
            else:
                c = c.T if trans[k] else c
                if k == 1 and alpha != 1.0:
                    c = (c * np.asarray(alpha, dtype=c.dtype)).astype(c.dtype)
                name = f"{name}.gemm{k}"
                im.const_line(name, np.ascontiguousarray(c), f"Gemm operand of {node.name}")
        operands.append(name)
    if len(node.input) < 3 or not node.input[2]:
        im.emit(node, f"matmul({im.value(operands[0])}, {im.value(operands[1])})")
        return
    bias = node.input[2]
    if beta != 1.0:
        c = im.const_of(bias)
        if c is None:
            raise _Unsupported("beta != 1 with a non-constant C")
        bias = f"{bias}.beta"
        im.const_line(bias, (c * np.asarray(beta, dtype=c.dtype)).astype(c.dtype), "Gemm C")
    mm = f"{node.output[0]}.mm"
    im.lines.append(f"  {im.value(mm)} = matmul({im.value(operands[0])}, {im.value(operands[1])})")
    im.emit(node, f"add({im.value(mm)}, {im.value(bias)})")


def _constant(im, node):
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
    im.const_line(node.output[0], arr, f"Constant {node.name}")


# ONNX op type -> (gearbox ops it needs, the function writing it). One row per op.
OPS = {
    "Add": (["add"], _binary("add")),
    "Mul": (["mul"], _binary("mul")),
    "Relu": (["relu"], _unary("relu")),
    "MatMul": (["matmul"], _matmul),
    "Gemm": (["matmul", "add"], _gemm),
    "Gather": (["index_select"], _gather),
    "Concat": (["cat"], _concat),
    "Reshape": (["reshape"], _reshape),
    "Transpose": (["transpose"], _transpose),
    "Constant": ([], _constant),
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
