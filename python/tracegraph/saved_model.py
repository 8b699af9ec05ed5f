"""tg.saved_model: a tg.function saved to one .tgx file and loaded back, in Python or in C++.

    tg.saved_model.save(f, "f.tgx")                # every concrete function of f, with its Variables
    tg.saved_model.save(f, "f.tgx", signatures=[f.get_concrete_function(tg.TensorSpec([None], tg.float32))])
    loaded = tg.saved_model.load("f.tgx")          # also a file that C++ tg::save wrote
    loaded(x)                                      # dispatches as f did; never traces

TensorFlow's names, over tracegraph's export (docs/export.md): the "export_dir" is one .tgx file,
which C++ loads with tg::load and the `tgx` tool runs. See docs/python.md for what differs from
TensorFlow's SavedModel.
"""
import ast
import os

from tracegraph import _core
from tracegraph._function import ConcreteFunction, Function

__all__ = ["save", "load", "LoadedFunction"]


def _path(export_dir):
    path = os.fspath(export_dir)
    if not isinstance(path, str):
        raise TypeError(f"the path must be a str or os.PathLike naming a file, got {export_dir!r}")
    return path


def save(obj, export_dir, signatures=None, options=None):
    """Saves `obj` (a tg.function, or a function tg.saved_model.load returned) to the .tgx file
    `export_dir`.

    Without `signatures`, every concrete function traced so far is saved (trace or call the
    function for each input type the file must serve first); with a ConcreteFunction or a list
    of them, those only. The Variables the function closes over are saved with their current
    values; a Variable argument is saved as a Variable parameter, which the loaded function binds
    to the Variable each call passes. Raises ValueError when there is nothing to save or an argument type cannot leave
    the process (None, objects matched by identity, TraceTypes written in Python)."""
    if options is not None:
        raise TypeError("tg.saved_model.save takes no options (a .tgx file has none to choose)")
    path = _path(export_dir)
    if isinstance(obj, LoadedFunction):
        if signatures is not None:
            raise TypeError("a loaded function is saved whole: signatures= applies to a tg.function")
        obj._handle.save(path)
        return
    if not isinstance(obj, Function):
        hint = ""
        if any(isinstance(getattr(type(obj), name, None), Function) for name in dir(type(obj))):
            hint = (" A .tgx file holds one function: save the tg.function itself, e.g. "
                    "tg.saved_model.save(obj.__call__, path)")
        raise TypeError(f"tg.saved_model.save expects a tg.function (or a loaded function), got "
                        f"{type(obj).__name__}.{hint}")
    chosen = None
    if signatures is not None:
        if isinstance(signatures, ConcreteFunction):
            signatures = [signatures]
        if isinstance(signatures, dict):
            raise TypeError("signatures must be a ConcreteFunction or a list of them: a .tgx file does not "
                            "name its signatures (pass list(signatures.values()))")
        chosen = []
        for c in signatures:
            if not isinstance(c, ConcreteFunction):
                raise TypeError(f"signatures must hold ConcreteFunctions of the function being saved, got {c!r}")
            chosen.append(c._handle)
    _core._saved_model_save(obj, path, chosen)


def load(export_dir, tags=None, options=None):
    """Loads a .tgx file (saved from Python or C++) as a LoadedFunction. A malformed file raises
    tg.errors.FormatError naming the section and byte; nothing in a file is run but the
    library's own ops."""
    del tags  # a .tgx file has one function; TF's tags select MetaGraphs it does not have
    if options is not None:
        raise TypeError("tg.saved_model.load takes no options")
    return LoadedFunction(_core._saved_model_load(_path(export_dir)))


class LoadedFunction:
    """A function read from a .tgx file, callable as the saved one was.

    A call is matched against the saved concrete functions as tf.function matches a call: the
    exact input type, else the most specific saved one the call is a subtype of. It never
    traces: a call no signature accepts raises TypeError listing every signature. Arguments are
    tensors, NumPy arrays and Python numbers where the signature has a tensor, the Python
    literals the file holds (a C++ function's int literal accepts a Python int), and tuples,
    lists and dicts of those; a parameter whose saved type holds no tensor may be left out.
    Results come back as the function returned them: a tensor, or the tuples, lists and dicts
    (namedtuples and dataclasses as tuples; the file keeps only their class name)."""

    def __init__(self, handle):
        self._handle = handle
        self._structures = {}

    def __call__(self, *args, **kwargs):
        description, flat = self._handle(*args, **kwargs)
        structure = self._structures.get(description)
        if structure is None:
            structure = _parse_structure(description, len(flat))
            self._structures[description] = structure
        if structure is _FLAT:
            return flat[0] if len(flat) == 1 else flat
        it = iter(flat)
        return _build(structure, it)

    @property
    def name(self):
        """The saved function's name."""
        return self._handle.name

    @property
    def producer(self):
        """The tracegraph version that wrote the file ("tracegraph 0.1.0")."""
        return self._handle.producer

    @property
    def variables(self):
        """The Variables the file's graphs read and write, in the order the saving program made
        them: real tg.Variables (a loaded train_step keeps training them)."""
        return tuple(self._handle.variables())

    @property
    def trainable_variables(self):
        return tuple(v for v in self._handle.variables() if getattr(v, "trainable", True))

    @property
    def signatures(self):
        """One line per saved concrete function: "(x: TensorSpec(...)) -> TensorSpec(...)".
        (TensorFlow's SavedModel names serving signatures; a .tgx file's are its concrete
        functions, in the file's order.)"""
        return tuple(self._handle.signatures())

    def pretty_printed_concrete_signatures(self):
        return "\n".join(self._handle.signatures())

    def __repr__(self):
        n = len(self._handle.signatures())
        return f"<tg.saved_model.LoadedFunction '{self.name}' with {n} signature{'s' if n != 1 else ''}>"


# ---- results: the structure the file's output description names --------------------------

_FLAT = object()  # the description could not be read: results come back flat


class _Unreadable(Exception):
    pass


def _scan(s, i, stops):
    """The index of the first character of `stops` at nesting depth 0 from i, skipping quoted
    strings."""
    depth = 0
    while i < len(s):
        c = s[i]
        if c in "'\"":
            j = i + 1
            while j < len(s) and s[j] != c:
                j += 2 if s[j] == "\\" else 1
            i = j + 1
            continue
        if depth == 0 and c in stops:
            return i
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        i += 1
    raise _Unreadable()


def _literal(text):
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError) as e:
        raise _Unreadable() from e


class _Parser:
    def __init__(self, s):
        self.s, self.i, self.tensors = s, 0, 0

    def expect(self, text):
        if not self.s.startswith(text, self.i):
            raise _Unreadable()
        self.i += len(text)

    def node(self):
        s, i = self.s, self.i
        if s.startswith("TensorSpec(", i):
            self.i = _scan(s, i + len("TensorSpec("), ")") + 1
            self.tensors += 1
            return ("tensor",)
        if s.startswith("None", i):
            self.i += 4
            return ("value", None)
        if s.startswith("Literal[", i):
            end = _scan(s, i + len("Literal["), "]")
            self.i = end + 1
            return ("value", _literal(s[i + len("Literal["):end]))
        open_at = s.find("[", i)
        if open_at < 0:
            raise _Unreadable()
        kind = s[i:open_at]
        self.i = open_at + 1
        children = []
        if kind == "Dict":
            while not s.startswith("]", self.i):
                if children:
                    self.expect(", ")
                self.expect("[")
                comma = _scan(s, self.i, ",")
                key = _literal(s[self.i:comma])
                self.i = comma
                self.expect(", ")
                children.append((key, self.node()))
                self.expect("]")
            self.i += 1
            return ("dict", children)
        while not s.startswith("]", self.i):
            if children:
                self.expect(", ")
            children.append(self.node())
        self.i += 1
        if kind == "Optional":
            if len(children) != 1:
                raise _Unreadable()
            return children[0]
        return ("list" if kind in ("List", "Array") else "tuple", children)


def _parse_structure(description, count):
    try:
        p = _Parser(description)
        tree = p.node()
        if p.i != len(description) or p.tensors != count:
            return _FLAT
        return tree
    except _Unreadable:
        return _FLAT


def _build(node, it):
    kind = node[0]
    if kind == "tensor":
        return next(it)
    if kind == "value":
        return node[1]
    if kind == "dict":
        return {key: _build(child, it) for key, child in node[1]}
    items = [_build(child, it) for child in node[1]]
    return items if kind == "list" else tuple(items)
