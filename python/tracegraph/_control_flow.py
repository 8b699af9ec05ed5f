"""tg.cond, tg.while_loop and tg.TensorArray (TensorFlow's API) over the C++ control flow.

The C++ side (python/src/control_flow_bindings.cpp over include/tracegraph/control_flow.h) works
on flat lists of tensors; this module flattens the nested Python structures of branch results and
loop variables (lists, tuples, namedtuples, dicts; TensorArrays travel as their flow tensor),
checks that both branches / every iteration keep the structure, and rebuilds them. AutoGraph's
runtime (tracegraph.autograph) builds on the same helpers, passing variable names so that its
errors name the user's variables.
"""
from tracegraph import _core
from tracegraph import dtypes
from tracegraph import nest
from tracegraph._tensor import Tensor, TensorShape

__all__ = ["cond", "while_loop", "TensorArray"]


# ---- nested structures ---------------------------------------------------------------------------

class _Leaf:
    """A flattened leaf: a tensor (index into the flat list), a TensorArray (its flow is the flat
    entry) or a Python value kept as it is."""

    __slots__ = ("kind", "value")

    def __init__(self, kind, value=None):
        self.kind = kind  # "tensor", "array" (value: the TensorArray) or "python" (value: the value)
        self.value = value


def flatten(structure, convert, out, what):
    """The skeleton of `structure` (the same containers, _Leaf at the leaves); its tensors are
    appended to `out`. With `convert`, Python values other than None become tensors (TF's rule
    for values that leave a cond branch or enter a loop); `what(path)` names a leaf in errors."""
    return _flatten(structure, convert, out, what, "")


def _flatten(x, convert, out, what, path):
    if isinstance(x, Tensor):
        out.append(x)
        return _Leaf("tensor")
    if isinstance(x, TensorArray):
        out.append(x._ta.flow)
        return _Leaf("array", x)
    if getattr(type(x), "_tg_keep", False):
        return _Leaf("python", x.value)  # AutoGraph's marker: a Python value carried as itself
    if nest.is_nested(x):
        return nest.sequence_like(x, [_flatten(v, convert, out, what, path + p) for p, v in nest.children(x)])
    if convert and x is not None and not getattr(x, "_tg_undefined", False):
        try:
            t = _core.convert_to_tensor(x)
        except (TypeError, ValueError) as e:
            raise TypeError(f"{what(path)} is {_describe(x)}, which is not a tensor and does not convert to one "
                            f"({e}); only tensors, TensorArrays, Python numbers and nested lists, tuples and "
                            "dicts of those can be the outputs of a tensor-dependent cond or loop") from None
        out.append(t)
        return _Leaf("tensor")
    return _Leaf("python", x)


def pack(skeleton, flat):
    """The structure of `skeleton` with its tensors taken from `flat`, in order."""
    it = iter(flat)
    return _pack(skeleton, it)


def _pack(s, it):
    if isinstance(s, _Leaf):
        if s.kind == "tensor":
            return next(it)
        if s.kind == "array":
            return s.value._with_flow(next(it))
        return s.value
    return nest.sequence_like(s, [_pack(v, it) for _, v in nest.children(s)])


def describe(skeleton, flat):
    """A structure's type as messages print it: Tensor(float32, (2,)), TensorArray, lists..."""
    it = iter(flat)
    return _describe_skeleton(skeleton, it)


def _describe_skeleton(s, it):
    if isinstance(s, _Leaf):
        if s.kind == "tensor":
            t = next(it)
            return f"Tensor({t.dtype.name}, {t.shape})"
        if s.kind == "array":
            next(it)
            return f"TensorArray({s.value.dtype.name})"
        return _describe(s.value)
    if isinstance(s, dict):
        return "{" + ", ".join(f"{k!r}: {_describe_skeleton(s[k], it)}" for k in nest.sorted_keys(s)) + "}"
    inner = ", ".join(_describe_skeleton(v, it) for v in s)
    if nest.is_namedtuple(s):
        return f"{type(s).__name__}({inner})"
    return f"[{inner}]" if isinstance(s, list) else f"({inner}{',' if len(s) == 1 else ''})"


def _describe(x):
    if getattr(x, "_tg_undefined", False):
        return "undefined"
    if x is None or isinstance(x, (bool, int, float, str)):
        return repr(x)
    return f"a {type(x).__name__} object"


def same_structure(a, b):
    """Whether two skeletons have the same containers and leaf kinds (tensor / TensorArray /
    Python value, with equal Python values)."""
    if isinstance(a, _Leaf) or isinstance(b, _Leaf):
        if not (isinstance(a, _Leaf) and isinstance(b, _Leaf)) or a.kind != b.kind:
            return False
        if a.kind == "python":
            return a.value is b.value or (type(a.value) is type(b.value) and _equal(a.value, b.value))
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return nest.sorted_keys(a) == nest.sorted_keys(b) and all(same_structure(a[k], b[k]) for k in a)
    return len(a) == len(b) and all(same_structure(x, y) for x, y in zip(a, b))


def _equal(a, b):
    try:
        return bool(a == b)
    except Exception:  # pylint: disable=broad-except
        return False


def leaf_paths(skeleton, prefix):
    """The path of each flat entry ("loop_vars[1]", "x['a']"), and whether it is a TensorArray."""
    paths = []
    _leaf_paths(skeleton, prefix, paths)
    return paths


def _leaf_paths(s, path, out):
    if isinstance(s, _Leaf):
        if s.kind != "python":
            out.append((path, s.kind == "array"))
        return
    for suffix, v in nest.children(s):
        _leaf_paths(v, path + suffix, out)


def is_staged(value):
    """Whether a condition or iterable makes the control flow a graph op: a tensor that is
    symbolic, or any tensor while a trace records (a graph holds no Python decisions)."""
    return isinstance(value, Tensor) and (value._is_symbolic or _core._in_trace())


def _pred(pred, api):
    if isinstance(pred, Tensor):
        return pred
    if isinstance(pred, (bool, int)) or type(pred).__name__ == "bool_":
        return _core.constant(bool(pred))
    raise TypeError(f"[{api}] the condition must be a bool scalar tensor or a Python bool, got {_describe(pred)}")


# ---- tg.cond -------------------------------------------------------------------------------------

def cond(pred, true_fn=None, false_fn=None, name=None):
    """Returns true_fn() if pred (a bool scalar tensor) holds, else false_fn() (tf.cond).

    Eagerly only the chosen branch runs. In a tg.function with a symbolic pred both branches are
    traced into one cond node and the choice happens when the graph runs: their results must then
    have the same structure (lists, tuples, dicts, namedtuples) of tensors with the same dtypes;
    Python numbers they return become tensors. Tensors of the function that a branch uses are
    passed into the node; tg.print and Variable updates in a branch run only when it is taken.
    """
    del name
    if not callable(true_fn):
        raise TypeError(f"[cond] true_fn must be callable, got {_describe(true_fn)}")
    if not callable(false_fn):
        raise TypeError(f"[cond] false_fn must be callable, got {_describe(false_fn)}")
    return cond_structured(_pred(pred, "cond"), true_fn, false_fn, check=None)


def cond_structured(pred, true_fn, false_fn, check):
    """cond over structures. `check(true_result, false_result, true_flat, false_flat)` (AutoGraph's
    per-variable checks) runs once both staged branches are traced, before the generic checks."""
    staged = is_staged(pred)
    results = {}

    def branch(fn, key):
        def run():
            value = fn()
            flat = []
            skeleton = flatten(value, staged, flat, lambda path: f"the value {'true_fn' if key == 0 else 'false_fn'} "
                                                                 f"returned{path}")
            results[key] = (value, skeleton, flat)
            if staged and key == 1 and 0 in results:
                _compare_branches(results[0], results[1], check)
            return flat
        return run

    flat = _core._cond_flat(pred, branch(true_fn, 0), branch(false_fn, 1))
    taken = results[0] if 0 in results else results[1]  # an eager pred runs one branch
    if not staged:
        return taken[0]
    return pack(taken[1], flat)


def _compare_branches(t, f, check):
    if check is not None:
        check(t[0], f[0], t, f)
    if not same_structure(t[1], f[1]):
        raise ValueError(
            "true_fn and false_fn arguments to tg.cond must have the same number, type, and overall structure "
            f"of return values: true_fn returned {describe(t[1], t[2])} but false_fn returned "
            f"{describe(f[1], f[2])}")
    for (path, _), a, b in zip(leaf_paths(t[1], "output"), t[2], f[2]):
        if a.dtype != b.dtype:
            raise TypeError(f"{path} of tg.cond has dtype {a.dtype.name} in true_fn but {b.dtype.name} in false_fn; "
                            "both branches must return the same dtypes (tg.cast one of them)")


# ---- tg.while_loop -------------------------------------------------------------------------------

def while_loop(cond, body, loop_vars, shape_invariants=None, parallel_iterations=10, back_prop=True,  # pylint: disable=redefined-outer-name
               swap_memory=False, maximum_iterations=None, name=None):
    """Repeats body while cond is true (tf.while_loop).

    loop_vars is a tuple or list (nested freely: lists, tuples, namedtuples, dicts of tensors and
    TensorArrays; Python numbers become tensors); cond and body take the variables unpacked,
    cond returns a bool scalar and body the new variables in the same structure and dtypes. A
    single tensor may be passed alone. Eagerly this is a Python loop; in a tg.function the
    condition and the body are traced once into one while node. Shapes must stay the same across
    iterations except along the dims declared None in shape_invariants (the same structure as
    loop_vars, a TensorShape per tensor). maximum_iterations stops the loop after that many
    iterations. parallel_iterations, back_prop and swap_memory are accepted as TF does and change
    nothing.
    """
    del parallel_iterations, back_prop, swap_memory
    if not callable(cond):
        raise TypeError(f"[while_loop] cond must be callable, got {_describe(cond)}")
    if not callable(body):
        raise TypeError(f"[while_loop] body must be callable, got {_describe(body)}")
    single = not isinstance(loop_vars, (list, tuple))
    vars_list = (loop_vars,) if single else loop_vars
    if len(vars_list) == 0:
        raise ValueError("[while_loop] loop_vars is empty; pass at least one loop variable")
    invariants = None
    if shape_invariants is not None:
        invariants = (shape_invariants,) if single else shape_invariants

    def body_result(values):
        out = body(*values)
        if single or (len(vars_list) == 1 and not isinstance(out, (list, tuple))):
            out = (out,)
        if not isinstance(out, (list, tuple)):
            raise TypeError(f"[while_loop] body must return the loop variables ({len(vars_list)} values in a "
                            f"list or tuple), got {_describe(out)}")
        # As TF: the top-level list / tuple kind of body's result does not matter.
        if nest.is_namedtuple(vars_list):
            return type(vars_list)(*out) if len(out) == len(vars_list) else tuple(out)
        return type(vars_list)(out) if type(out) is not type(vars_list) else out

    result = loop_structured(vars_list, lambda values: cond(*values), body_result, invariants,
                             _max_iterations(maximum_iterations), name or "while", names=None)
    return result[0] if single else result


def _max_iterations(value):
    if value is None:
        return -1
    if isinstance(value, Tensor):
        if value._is_symbolic:
            raise _errors().UnimplementedError(
                None, None, "[while_loop] maximum_iterations must be known when the loop is built (a Python int "
                "or an eager tensor); tracegraph's while node takes it as a number, not a graph value. Add the "
                "bound to the condition instead (i < n)")
        value = int(value.numpy())
    value = int(value)
    if value < 0:
        raise ValueError(f"[while_loop] maximum_iterations must be >= 0, got {value}")
    return value


def _errors():
    from tracegraph import errors
    return errors


def loop_structured(init, cond_fn, body_fn, invariants, maximum_iterations, name, names):
    """while_loop over a structure `init` (tensors, TensorArrays, Python numbers converted).
    `cond_fn(values)` / `body_fn(values)` get the rebuilt structure. `names` (AutoGraph) gives
    the name of each top-level entry for messages; otherwise paths read loop_vars[i]."""
    flat_init = []

    def what(path):
        return f"loop variable {_path_name(path, names)}"
    skeleton = flatten(init, True, flat_init, what)
    paths = leaf_paths(skeleton, "")
    flat_invariants = None
    if invariants is not None:
        flat_invariants = _flatten_invariants(skeleton, invariants, flat_init)
    display = [_path_name(p, names) for p, _ in paths]
    state = {"skeleton": skeleton}

    def cond_flat(flat):
        values = pack(state["skeleton"], flat)
        c = cond_fn(values)
        if not isinstance(c, Tensor):
            c = _pred(c, "while_loop")
        return [c]

    def body_flat(flat):
        values = pack(state["skeleton"], flat)
        out = body_fn(values)
        new_flat = []
        new_skeleton = flatten(out, True, new_flat, lambda path: f"{what(path)} after an iteration")
        if names is not None:
            _check_iteration(names, init, skeleton, flat_init, out, new_flat, flat_invariants)
        if not same_structure(skeleton, new_skeleton):
            raise TypeError(
                f"the loop variables must keep their structure across iterations: "
                f"{_entry_names(names)} entered the loop as {describe(skeleton, flat_init)} but the body "
                f"returned {describe(new_skeleton, new_flat)}")
        state["skeleton"] = new_skeleton  # TensorArrays learn their element shapes from writes
        return new_flat

    out = _core._while_loop_flat(cond_flat, body_flat, flat_init, display, [a for _, a in paths],
                                 flat_invariants, maximum_iterations, name)
    return pack(state["skeleton"], out)


def _check_iteration(names, init, skeleton, flat_init, out, new_flat, flat_invariants):
    """AutoGraph's per-variable checks of one iteration, in TF's words: the same structure, dtype
    and shape (or one that fits the shape invariant) as before the loop."""
    del skeleton
    position = 0
    for k, (name, before, after) in enumerate(zip(names, init, out)):
        a_flat, b_flat = [], []
        sa = flatten(before, True, a_flat, lambda p: f"'{name}{p}'")
        sb = flatten(after, True, b_flat, lambda p: f"'{name}{p}'")
        if not same_structure(sa, sb):
            raise TypeError(f"'{name}' does not have the same nested structure after one iteration: it is "
                            f"{describe(sa, a_flat)} before the loop but {describe(sb, b_flat)} after; a loop "
                            "variable keeps one structure (use a tg.TensorArray to collect values)")
        for (path, is_array), x, y in zip(leaf_paths(sa, ""), a_flat, b_flat):
            if x.dtype != y.dtype:
                raise TypeError(f"'{name}{path}' has dtype {x.dtype.name} before the loop, but dtype {y.dtype.name} "
                                f"after one iteration; tg.cast it in the loop so that its dtype stays the same")
            invariant = flat_invariants[position] if flat_invariants is not None else None
            position += 1
            if is_array:
                continue
            limit = TensorShape(invariant) if invariant is not None else x.shape
            if not y.shape.is_subtype_of(limit):
                if invariant is not None:
                    raise ValueError(f"'{name}{path}' has shape {y.shape} after one iteration, which does not "
                                     f"conform to its shape invariant {limit}")
                wider = TensorShape(None if y.shape.rank is None else [None] * y.shape.rank)
                raise ValueError(f"'{name}{path}' has shape {x.shape} before the loop, but shape {y.shape} after "
                                 f"one iteration; keep its shape, or declare the dims that change as None in a "
                                 f"shape invariant (e.g. {wider})")
        del k


def _path_name(path, names):
    if names is None:
        return "loop_vars" + path
    # path starts with "[i]" for the i-th top-level entry
    close = path.index("]")
    index = int(path[1:close])
    return f"'{names[index]}{path[close + 1:]}'" if path[close + 1:] else f"'{names[index]}'"


def _entry_names(names):
    return "loop_vars" if names is None else ", ".join(f"'{n}'" for n in names)


def _flatten_invariants(skeleton, invariants, flat_init):
    """One shape per flat loop variable: the invariant given, else the entry shape (the C++ side
    takes all or none); TensorArrays' entries are ignored there."""
    out = []
    tensors = iter(flat_init)

    def walk(s, inv):
        if isinstance(s, _Leaf):
            if s.kind == "python":
                return
            t = next(tensors)
            if s.kind == "array":
                out.append(None)
            else:
                out.append(t._shape_tuple() if inv is None else TensorShape(inv).dims)
            return
        if isinstance(s, dict):
            for k in nest.sorted_keys(s):
                walk(s[k], None if inv is None else inv[k])
            return
        if inv is not None and (not isinstance(inv, (list, tuple)) or len(inv) != len(s)):
            raise ValueError(f"[while_loop] shape_invariants must have the structure of loop_vars, got {inv!r}")
        for i, v in enumerate(s):
            walk(v, None if inv is None else inv[i])
    walk(skeleton, invariants)
    return out


# ---- tg.TensorArray ------------------------------------------------------------------------------

class TensorArray:
    """A list of same-typed tensors that grows by writes, for loops (tf.TensorArray).

    write(i, v) returns the updated array: in a loop write `ta = ta.write(i, v)` and keep `ta` as
    a loop variable. Eagerly (outside any trace) the array is also updated in place, as TF's eager
    TensorArray is. Every element has one shape: element_shape, or that of the first write.
    Elements never written read and stack as zeros. unstack, gather, scatter and concat are
    written over write / stack / gather (they need the number of elements when the loop is
    built). String arrays are not supported.
    """

    def __init__(self, dtype, size=None, dynamic_size=None, clear_after_read=None, tensor_array_name=None,
                 handle=None, flow=None, infer_shape=True, element_shape=None,
                 colocate_with_first_write_call=True, name=None):
        del clear_after_read, tensor_array_name, infer_shape, colocate_with_first_write_call, name
        if handle is not None or flow is not None:
            raise _errors().UnimplementedError(
                None, None, "[TensorArray] handle= and flow= are not supported: tracegraph's TensorArray is a value "
                "carried by its flow tensor, made by TensorArray(dtype, size, ...) and updated by write()")
        self._ta = _core._TensorArray(dtypes.as_dtype(dtype), size, bool(dynamic_size), element_shape)

    @classmethod
    def _wrap(cls, ta):
        self = cls.__new__(cls)
        self._ta = ta
        return self

    def _with_flow(self, flow):
        return TensorArray._wrap(self._ta.with_flow(flow))

    def _update(self, new):
        if not new.flow._is_symbolic and not _core._in_trace():
            self._ta = new
            return self
        return TensorArray._wrap(new)

    @property
    def dtype(self):
        return dtypes.as_dtype(self._ta.dtype_name)

    @property
    def element_shape(self):
        return TensorShape(self._ta.element_dims)

    @property
    def dynamic_size(self):
        return self._ta.dynamic_size

    @property
    def flow(self):
        return self._ta.flow

    def size(self, name=None):
        del name
        return self._ta.size()

    def write(self, index, value, name=None):
        del name
        return self._update(self._ta.write(index, value))

    def read(self, index, name=None):
        del name
        return self._ta.read(index)

    def stack(self, name=None):
        del name
        return self._ta.stack()

    def unstack(self, value, name=None):
        """Writes value[i] at index i for each i of value's first dimension (known statically)."""
        del name
        value = _core.convert_to_tensor(value, dtype=self.dtype)
        dims = value._shape_tuple()
        if not dims or dims[0] is None:
            raise ValueError(f"[TensorArray.unstack] the first dimension of the value must be known when the array "
                             f"is built, got shape {value.shape}; write the elements in a loop instead")
        ta = self._ta
        for i, element in enumerate(_core.unstack(value, axis=0)):
            ta = ta.write(i, element)
        return self._update(ta)

    def gather(self, indices, name=None):
        """The elements at `indices`, stacked."""
        del name
        return _core.gather(self._ta.stack(), indices)

    def scatter(self, indices, value, name=None):
        """Writes value[k] at indices[k] (indices known when the array is built)."""
        del name
        if isinstance(indices, Tensor):
            if indices._is_symbolic:
                raise ValueError("[TensorArray.scatter] indices must be known when the array is built (a list or "
                                 "an eager tensor); write the elements in a loop instead")
            indices = indices.numpy().tolist()
        value = _core.convert_to_tensor(value, dtype=self.dtype)
        elements = _core.unstack(value, axis=0)
        if len(elements) != len(indices):
            raise ValueError(f"[TensorArray.scatter] {len(indices)} indices but the value has {len(elements)} elements")
        ta = self._ta
        for i, element in zip(indices, elements):
            ta = ta.write(int(i), element)
        return self._update(ta)

    def concat(self, name=None):
        """The elements concatenated along their first dimension."""
        del name
        stacked = self._ta.stack()
        shape = _core.shape(stacked)
        return _core.reshape(stacked, _core.concat([[-1], shape[2:]], axis=0))

    def close(self, name=None):
        del name

    def __repr__(self):
        return f"<tg.TensorArray dtype={self.dtype.name} element_shape={self.element_shape}>"
