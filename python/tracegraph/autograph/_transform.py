"""AutoGraph's conversion: a Python function's AST rewritten so that its control flow can become
graph ops (TensorFlow's AutoGraph, as far as tracegraph goes).

The function's source is parsed and lowered in passes, each a plain Python rewrite:

1. `a and b`, `a or b`, `not a`, `a if c else b` become `ag__.and_(lambda: a, lambda: b)`, ...
   (lazy, as Python's),
   and calls become `ag__.converted_call(f, args, kwargs)`, which converts the user's functions
   called from here (not library code);
2. `break` and `continue` become boolean flags, the statements after them guarded by
   `if not flag:`, a loop's `else:` an `if not break_:` after it;
3. `return` inside an `if` or a loop becomes `retval_ = value; do_return = True`, the rest
   guarded, loops stopped by `not do_return`, and one `return ag__.retval(retval_)` at the end
   (after moving the code that follows an `if` whose branch always returns into its other branch);
4. every `if`, `while` and `for` becomes functions - the branches or the body, writing the
   function's variables through `nonlocal` - and get_state / set_state over the variables the
   statement carries, passed to ag__.if_stmt / while_stmt / for_stmt (autograph/_operators.py),
   which decide at run time: a tg.Tensor condition in a trace makes a cond / while node, anything
   else runs as Python.

Which variables a statement carries is a liveness question answered conservatively: those it
assigns that are read after it, or anywhere in an enclosing loop (for loops: except those the body
assigns before reading them, which are local to an iteration).

The generated code keeps the user's line numbers and file name (every generated node takes the
line of the statement it came from), so tracebacks and the operators' messages name the user's
file and line; to_code() shows the generated source. The new function is built over the original's
globals and closure cells, so it reads and writes the same variables.
"""
import ast
import functools
import inspect
import logging
import sysconfig
import types
import weakref

from tracegraph.autograph import _operators

_logger = logging.getLogger("tracegraph")

_DO_RETURN = "do_return"
_RETVAL = "retval_"
_NOT_WRAPPED = {"super", "locals", "globals", "vars", "eval", "exec", "dir", "print"}


class ConversionError(Exception):
    """The function cannot be converted (no source, a generator, an unsupported construct)."""


# ---- analysis ----------------------------------------------------------------------------------------

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.ListComp, ast.SetComp,
           ast.DictComp, ast.GeneratorExp)


def _local_nodes(nodes):
    """The nodes of these statements' scope: nested scopes are yielded but not entered."""
    stack = list(reversed(nodes))
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, _SCOPES):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                stack.extend(d for d in node.args.defaults + [d for d in node.args.kw_defaults if d] if d)
            continue
        stack.extend(reversed(list(ast.iter_child_nodes(node))))


def stores(nodes):
    """Names these statements bind in their own scope, in order of first binding."""
    out = {}
    for node in _local_nodes(nodes):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            out.setdefault(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.setdefault(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                out.setdefault((alias.asname or alias.name).split(".")[0])
        elif isinstance(node, ast.ExceptHandler) and node.name:
            out.setdefault(node.name)
    return list(out)


def loads(nodes):
    """Names read anywhere in these nodes, nested scopes included (conservative)."""
    out = set()
    for root in nodes:
        for node in ast.walk(root):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                out.add(node.id)
            elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
                out.add(node.target.id)
    return out


def _loop_loads(loop):
    return loads([loop]) | set(getattr(loop, "_ag_extra", ()))


def _killed_first(body):
    """Names the loop body assigns (at its top level) before reading them: local to an iteration."""
    seen, killed = set(), set()
    for stmt in body:
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and getattr(stmt, "value", None) is not None:
            seen |= loads([stmt.value])
            for target in stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]:
                for n in ast.walk(target):
                    if isinstance(n, ast.Name):
                        if isinstance(n.ctx, ast.Store) and n.id not in seen:
                            killed.add(n.id)
                        seen.add(n.id)
        else:
            seen |= loads([stmt]) | set(stores([stmt]))
    return killed


def _jumps(stmts, kind):
    """Whether these statements hold a `kind` (Break / Continue) of the enclosing loop."""
    stack = list(stmts)
    while stack:
        node = stack.pop()
        if isinstance(node, kind):
            return True
        if isinstance(node, (ast.For, ast.While, ast.AsyncFor) + _SCOPES):
            if isinstance(node, (ast.For, ast.While, ast.AsyncFor)):
                stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))
    return False


def _returns(stmts):
    """Whether these statements hold a return of the function (nested functions aside)."""
    return any(isinstance(n, ast.Return) for n in _local_nodes(stmts))


# ---- building nodes ----------------------------------------------------------------------------------

def _name(id_, ctx=None):
    return ast.Name(id=id_, ctx=ctx or ast.Load())


def _ag(attr):
    return ast.Attribute(value=_name("ag__"), attr=attr, ctx=ast.Load())


def _call(func, *args):
    return ast.Call(func=func, args=list(args), keywords=[])


def _lambda(body):
    return ast.Lambda(args=ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[],
                                         kwarg=None, defaults=[]), body=body)


def _assign(name, value):
    return ast.Assign(targets=[_name(name, ast.Store())], value=value)


def _const(value):
    return ast.Constant(value=value)


def _not(expr):
    return _call(_ag("not_"), expr)


def _and(a, b):
    return _call(_ag("and_"), _lambda(a), _lambda(b))


def _def(name, params, body):
    return ast.FunctionDef(name=name, args=ast.arguments(
        posonlyargs=[], args=[ast.arg(arg=p) for p in params], vararg=None, kwonlyargs=[], kw_defaults=[],
        kwarg=None, defaults=[]), body=body or [ast.Pass()], decorator_list=[], returns=None, type_comment=None)


def _locate(node, like):
    """Gives every node of `node` without a location the location of `like` (the user's statement)."""
    for n in ast.walk(node):
        if "lineno" in n._attributes and not hasattr(n, "lineno"):
            # One point, the start of the user's statement: CPython gives a method call the line
            # where its attribute ends, so a span would move the call to the statement's last line.
            n.lineno = n.end_lineno = like.lineno
            n.col_offset = n.end_col_offset = like.col_offset
    return node


# ---- pass 1: and / or / not, calls -------------------------------------------------------------------

class _Expressions(ast.NodeTransformer):
    def __init__(self, root):
        self._root = root

    def visit_FunctionDef(self, node):
        if node is not self._root:
            return node  # converted on its own
        self.generic_visit(node)
        return node

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node):
        return node

    def visit_BoolOp(self, node):
        self.generic_visit(node)
        helper = "and_" if isinstance(node.op, ast.And) else "or_"
        result = node.values[-1]
        for value in reversed(node.values[:-1]):
            result = _call(_ag(helper), _lambda(value), _lambda(result))
        return _locate(result, node)

    def visit_IfExp(self, node):
        self.generic_visit(node)
        return _locate(_call(_ag("if_exp"), node.test, _lambda(node.body), _lambda(node.orelse)), node)

    def visit_UnaryOp(self, node):
        self.generic_visit(node)
        if isinstance(node.op, ast.Not):
            return _locate(_not(node.operand), node)
        return node

    def visit_Call(self, node):
        self.generic_visit(node)
        func = node.func
        if isinstance(func, ast.Name) and func.id in _NOT_WRAPPED:
            return node
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "ag__":
            return node
        args = ast.Tuple(elts=list(node.args), ctx=ast.Load())
        if node.keywords:
            kwargs = ast.Dict(keys=[None if k.arg is None else _const(k.arg) for k in node.keywords],
                              values=[k.value for k in node.keywords])
        else:
            kwargs = _const(None)
        return _locate(_call(_ag("converted_call"), func, args, kwargs), node)


# ---- pass 2: break and continue ----------------------------------------------------------------------

class _Names:
    def __init__(self):
        self._n = 0

    def fresh(self, stem):
        self._n += 1
        return f"{stem}_{self._n}"


def _map_blocks(stmt, fn, into_loops):
    """Applies fn to each statement list directly inside stmt (not into nested functions)."""
    if isinstance(stmt, ast.If):
        stmt.body, stmt.orelse = fn(stmt.body), fn(stmt.orelse)
    elif isinstance(stmt, (ast.For, ast.While)) and into_loops:
        stmt.body, stmt.orelse = fn(stmt.body), fn(stmt.orelse)
    elif isinstance(stmt, (ast.With, ast.AsyncWith)):
        stmt.body = fn(stmt.body)
    elif isinstance(stmt, ast.Try):
        stmt.body, stmt.orelse, stmt.finalbody = fn(stmt.body), fn(stmt.orelse), fn(stmt.finalbody)
        for h in stmt.handlers:
            h.body = fn(h.body)
    return stmt


def _guard(stmts, flag, is_jump, holds_jump, replace):
    """Replaces the jumps in stmts by `replace()` and guards what follows a statement that may jump
    with `if not flag:`."""
    out = []
    for i, stmt in enumerate(stmts):
        if is_jump(stmt):
            out.extend(_locate(s, stmt) for s in replace(stmt))
            return out  # the rest of the block is unreachable
        may_jump = holds_jump([stmt])
        if may_jump:
            stmt = _map_blocks(stmt, lambda b: _guard(b, flag, is_jump, holds_jump, replace),
                               into_loops=holds_jump is _returns)
        out.append(stmt)
        if may_jump and i + 1 < len(stmts):
            rest = _guard(stmts[i + 1:], flag, is_jump, holds_jump, replace)
            out.append(_locate(ast.If(test=_not(_name(flag)), body=rest, orelse=[]), stmts[i + 1]))
            return out
    return out


def _lower_jumps(stmts, names):
    out = []
    for stmt in stmts:
        _map_blocks(stmt, lambda b: _lower_jumps(b, names), into_loops=True)
        if isinstance(stmt, (ast.For, ast.While)):
            out.extend(_lower_loop(stmt, names))
        else:
            out.append(stmt)
    return out


def _lower_loop(loop, names):
    pre, post = [], []
    if _jumps(loop.body, ast.Continue):
        flag = names.fresh("continue_")
        body = _guard(loop.body, flag, lambda s: isinstance(s, ast.Continue),
                      lambda b: _jumps(b, ast.Continue), lambda s: [_assign(flag, _const(True))])
        loop.body = [_locate(_assign(flag, _const(False)), loop.body[0])] + body
    brk = None
    if _jumps(loop.body, ast.Break):
        brk = names.fresh("break_")
        pre.append(_locate(_assign(brk, _const(False)), loop))
        loop.body = _guard(loop.body, brk, lambda s: isinstance(s, ast.Break),
                           lambda b: _jumps(b, ast.Break), lambda s: [_assign(brk, _const(True))])
        _add_extra_test(loop, brk)
    if loop.orelse:
        if brk is not None:
            post.append(_locate(ast.If(test=_not(_name(brk)), body=loop.orelse, orelse=[]), loop.orelse[0]))
        else:
            post.extend(loop.orelse)
        loop.orelse = []
    return pre + [loop] + post


def _add_extra_test(loop, flag):
    if isinstance(loop, ast.While):
        loop.test = _locate(_and(_not(_name(flag)), loop.test), loop.test)
    else:
        loop._ag_extra = getattr(loop, "_ag_extra", []) + [flag]


# ---- pass 3: return ----------------------------------------------------------------------------------

def _always_returns(block):
    if not block:
        return False
    last = block[-1]
    if isinstance(last, (ast.Return, ast.Raise)):
        return True
    if isinstance(last, ast.If):
        return _always_returns(last.body) and _always_returns(last.orelse)
    return False


def _normalize_returns(stmts):
    """`if c: ...return...` followed by more code: the code moves into the branch that does not
    return (TF's normalization), so that both branches of a converted if end the function."""
    out = []
    for i, stmt in enumerate(stmts):
        _map_blocks(stmt, _normalize_returns, into_loops=True)
        if isinstance(stmt, ast.If) and i + 1 < len(stmts):
            rest = stmts[i + 1:]
            body_returns, else_returns = _always_returns(stmt.body), _always_returns(stmt.orelse)
            if body_returns and else_returns:
                out.append(stmt)
                return out
            if body_returns:
                stmt.orelse = _normalize_returns(stmt.orelse + rest)
                out.append(stmt)
                return out
            if else_returns:
                stmt.body = _normalize_returns(stmt.body + rest)
                out.append(stmt)
                return out
        out.append(stmt)
    return out


def _nested_return(body):
    for stmt in body:
        if not isinstance(stmt, ast.Return) and _returns([stmt]):
            return True
    return False


def _lower_returns(fn):
    if not _nested_return(fn.body):
        return
    body = _normalize_returns(fn.body)

    def replace(stmt):
        value = stmt.value if stmt.value is not None else _const(None)
        return [_assign(_RETVAL, value), _assign(_DO_RETURN, _const(True))]

    def mark_loops(stmts):
        for node in _local_nodes(stmts):
            if isinstance(node, (ast.For, ast.While)) and _returns(node.body):
                _add_extra_test(node, _DO_RETURN)

    mark_loops(body)
    body = _guard(body, _DO_RETURN, lambda s: isinstance(s, ast.Return), _returns, replace)
    first = fn.body[0]
    fn.body = ([_locate(_assign(_DO_RETURN, _const(False)), first),
                _locate(_assign(_RETVAL, _call(_ag("UndefinedReturnValue"))), first)] + body +
               [_locate(ast.Return(value=_call(_ag("retval"), _name(_RETVAL))), fn.body[-1])])


# ---- pass 4: liveness --------------------------------------------------------------------------------

def _annotate(stmts, live_after):
    suffix = set(live_after)
    for stmt in reversed(stmts):
        _annotate_stmt(stmt, suffix)
        suffix = suffix | loads([stmt]) | set(getattr(stmt, "_ag_extra", ()))


def _annotate_stmt(stmt, live_out):
    if isinstance(stmt, ast.If):
        assigned = stores(stmt.body + stmt.orelse)
        used = live_out | loads([stmt])
        stmt._ag_stores = assigned
        stmt._ag_state = [n for n in assigned if n in used]
        stmt._ag_live = [n in live_out for n in stmt._ag_state]
        _annotate(stmt.body, live_out)
        _annotate(stmt.orelse, live_out)
    elif isinstance(stmt, (ast.For, ast.While)):
        body_stores = stores(stmt.body)
        targets = stores([stmt.target]) if isinstance(stmt, ast.For) else []
        assigned = list(dict.fromkeys(targets + body_stores))
        killed = _killed_first(stmt.body) | set(targets)
        carried = live_out | (_loop_loads(stmt) - killed)
        stmt._ag_stores = assigned
        stmt._ag_state = [n for n in assigned if n in carried]
        inner = live_out | _loop_loads(stmt)
        _annotate(stmt.body, inner)
    elif isinstance(stmt, (ast.With, ast.AsyncWith)):
        _annotate(stmt.body, live_out)
    elif isinstance(stmt, ast.Try):
        inner = live_out | loads([stmt])
        for block in [stmt.body, stmt.orelse, stmt.finalbody] + [h.body for h in stmt.handlers]:
            _annotate(block, inner)


# ---- pass 5: control flow into operator calls --------------------------------------------------------

class _Converter:
    def __init__(self, names, filename, function, global_names):
        self._names = names
        self._filename = filename
        self._function = function
        self._globals = global_names

    def block(self, stmts):
        out = []
        for stmt in stmts:
            out.extend(self.stmt(stmt))
        return out

    def stmt(self, stmt):
        if isinstance(stmt, ast.If):
            return self._if(stmt)
        if isinstance(stmt, ast.While):
            return self._while(stmt)
        if isinstance(stmt, ast.For):
            return self._for(stmt)
        _map_blocks(stmt, self.block, into_loops=False)
        return [stmt]

    def _declare(self, names):
        local = [n for n in names if n not in self._globals]
        glob = [n for n in names if n in self._globals]
        out = []
        if local:
            out.append(ast.Nonlocal(names=local))
        if glob:
            out.append(ast.Global(names=glob))
        return out

    def _state_functions(self, state, n):
        if not state:
            return [], _const(None), _const(None)
        get_name, set_name = f"get_state_{n}", f"set_state_{n}"
        getter = _def(get_name, [], [ast.Return(value=ast.Tuple(
            elts=[_call(_ag("ld"), _lambda(_name(s)), _const(s)) for s in state], ctx=ast.Load()))])
        target = ast.Tuple(elts=[_name(s, ast.Store()) for s in state], ctx=ast.Store())
        setter = _def(set_name, ["vars_"], self._declare(state) + [ast.Assign(targets=[target], value=_name("vars_"))])
        return [getter, setter], _name(get_name), _name(set_name)

    def _prologue(self, assigned):
        return [_assign(n, _call(_ag("ld"), _lambda(_name(n)), _const(n))) for n in assigned]

    def _epilogue(self, assigned):
        return [ast.If(test=_call(_ag("bound_to_undefined"), _lambda(_name(n))),
                       body=[ast.Delete(targets=[_name(n, ast.Del())])], orelse=[]) for n in assigned]

    def _where(self, stmt, what):
        return _call(_ag("Location"), _const(self._filename), _const(stmt.lineno), _const(self._function),
                     _const(what))

    def _names_tuple(self, names):
        return ast.Tuple(elts=[_const(n) for n in names], ctx=ast.Load())

    def _if(self, stmt):
        n = self._names.fresh("")[1:]
        assigned, state = stmt._ag_stores, stmt._ag_state
        body = self.block(stmt.body)
        orelse = self.block(stmt.orelse)
        true_fn = _def(f"if_body_{n}", [], self._declare(assigned) + body)
        false_fn = _def(f"else_body_{n}", [], self._declare(assigned) + orelse)
        state_defs, get_state, set_state = self._state_functions(state, n)
        call = ast.Expr(value=_call(_ag("if_stmt"), stmt.test, _name(true_fn.name), _name(false_fn.name), get_state,
                                    set_state, self._names_tuple(state),
                                    ast.Tuple(elts=[_const(x) for x in stmt._ag_live], ctx=ast.Load()),
                                    self._where(stmt, "if statement")))
        out = self._prologue(assigned) + [true_fn, false_fn] + state_defs + [call] + self._epilogue(assigned)
        return [_locate(s, stmt) for s in out]

    def _while(self, stmt):
        n = self._names.fresh("")[1:]
        assigned, state = stmt._ag_stores, stmt._ag_state
        body = self.block(stmt.body)
        test = _def(f"loop_test_{n}", [], [ast.Return(value=stmt.test)])
        body_fn = _def(f"loop_body_{n}", [], self._declare(assigned) + body)
        state_defs, get_state, set_state = self._state_functions(state, n)
        call = ast.Expr(value=_call(_ag("while_stmt"), _name(test.name), _name(body_fn.name), get_state, set_state,
                                    self._names_tuple(state), self._where(stmt, "while loop")))
        out = self._prologue(assigned) + [test, body_fn] + state_defs + [call] + self._epilogue(assigned)
        return [_locate(s, stmt) for s in out]

    def _for(self, stmt):
        n = self._names.fresh("")[1:]
        assigned, state = stmt._ag_stores, stmt._ag_state
        body = self.block(stmt.body)
        item = f"itr_{n}"
        target = ast.Assign(targets=[stmt.target], value=_name(item))
        body_fn = _def(f"loop_body_{n}", [item], self._declare(assigned) + [_locate(target, stmt)] + body)
        defs = []
        extra = getattr(stmt, "_ag_extra", [])
        extra_fn = _const(None)
        if extra:
            test = _not(_name(extra[0]))
            for flag in extra[1:]:
                test = _and(test, _not(_name(flag)))
            extra_def = _def(f"extra_test_{n}", [], [ast.Return(value=test)])
            defs.append(extra_def)
            extra_fn = _name(extra_def.name)
        state_defs, get_state, set_state = self._state_functions(state, n)
        call = ast.Expr(value=_call(_ag("for_stmt"), stmt.iter, extra_fn, _name(body_fn.name), get_state, set_state,
                                    self._names_tuple(state), self._where(stmt, "for loop")))
        out = self._prologue(assigned) + defs + [body_fn] + state_defs + [call] + self._epilogue(assigned)
        return [_locate(s, stmt) for s in out]


# ---- one function --------------------------------------------------------------------------------

def _global_names(fn):
    out = set()
    for node in _local_nodes(fn.body):
        if isinstance(node, ast.Global):
            out.update(node.names)
    return out


def _convert_function(fn, names, filename, first_param_super=None):
    """Rewrites fn (a FunctionDef) in place: its nested functions first, then its own body."""
    for node in list(_local_nodes(fn.body)):
        if isinstance(node, (ast.FunctionDef,)) and node is not fn:
            _convert_function(node, names, filename)
    if any(isinstance(n, (ast.Yield, ast.YieldFrom, ast.Await)) for n in _local_nodes(fn.body)):
        return  # generators run as they are
    _Expressions(fn).visit(fn)
    fn.body = _lower_jumps(fn.body, names)
    _lower_returns(fn)
    _annotate(fn.body, set())
    fn.body = _Converter(names, filename, fn.name, _global_names(fn)).block(fn.body)


class _SuperArgs(ast.NodeTransformer):
    """super() -> super(__class__, self): the body of a converted method runs in nested
    functions, where zero-argument super() has no first argument to find."""

    def __init__(self, first):
        self._first = first

    def visit_Call(self, node):
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id == "super" and not node.args and not node.keywords:
            node.args = [_name("__class__"), _name(self._first)]
        return node


def _source(python_function):
    code = python_function.__code__
    filename = code.co_filename
    try:
        lines, first = inspect.findsource(code)
    except (OSError, TypeError) as e:
        raise ConversionError(f"its source is not available ({e})") from None
    block = inspect.getblock(lines[code.co_firstlineno - 1:])
    text = "".join(block)
    return filename, code.co_firstlineno, text, first


def _parse(python_function):
    filename, first_line, text, _ = _source(python_function)
    if text[:1] in (" ", "\t"):
        # An indented def (a method, a nested function): parsed inside `if 1:` so that its columns
        # (and strings at any indentation) stay as they are.
        source, offset = "if 1:\n" + text, first_line - 2
    else:
        source, offset = text, first_line - 1
    try:
        module = ast.parse(source)
    except SyntaxError as e:
        raise ConversionError(f"its source does not parse on its own ({e.msg})") from None
    ast.increment_lineno(module, offset)
    if python_function.__code__.co_name == "<lambda>":
        return filename, _lambda_def(python_function, module)
    body = module.body[0].body if source is not text else module.body
    defs = [n for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    if len(defs) != 1 or not isinstance(defs[0], ast.FunctionDef) or defs[0].name != python_function.__code__.co_name:
        raise ConversionError("its source is not one `def` statement (a lambda, or a function made by exec)")
    return filename, defs[0]


def _lambda_def(python_function, module):
    """The lambda of these source lines that compiled to python_function, as a `def` returning its
    body (found by its line, its parameters and the column where its body starts)."""
    code = python_function.__code__
    params = list(code.co_varnames[:code.co_argcount + code.co_kwonlyargcount +
                                   bool(code.co_flags & inspect.CO_VARARGS) +
                                   bool(code.co_flags & inspect.CO_VARKEYWORDS)])
    found = []
    for node in ast.walk(module):
        if isinstance(node, ast.Lambda) and node.lineno == code.co_firstlineno:
            a = node.args
            names = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs] + \
                [x.arg for x in (a.vararg, a.kwarg) if x is not None]
            if sorted(names) == sorted(params):
                found.append(node)
    if len(found) > 1:
        starts = {(p[0], p[2]) for p in code.co_positions() if p[0] is not None and p[2] is not None}
        found = [n for n in found if any(
            (n.body.lineno, n.body.col_offset) <= start <= (n.body.end_lineno, n.body.end_col_offset)
            for start in starts)]
    if len(found) != 1:
        raise ConversionError("its lambda cannot be told apart from the others on its line")
    lam = found[0]
    fn = ast.FunctionDef(name="tg_lambda", args=lam.args, body=[_locate(ast.Return(value=lam.body), lam.body)],
                         decorator_list=[], returns=None, type_comment=None)
    return _locate(fn, lam)


def _build(python_function, fn, filename):
    code = python_function.__code__
    freevars = list(code.co_freevars)
    fn.decorator_list = []
    fn.returns = None
    for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs + [fn.args.vararg, fn.args.kwarg]:
        if a is not None:
            a.annotation = None
    fn.args.defaults = []
    fn.args.kw_defaults = [None] * len(fn.args.kwonlyargs)
    names = _Names()
    params = fn.args.posonlyargs + fn.args.args
    if "__class__" in freevars and params:
        _SuperArgs(params[0].arg).visit(fn)
    _convert_function(fn, names, filename)
    if fn.name == "tg_lambda":
        fn.name = "_lambda_"
    source = ast.unparse(fn)
    # Inside the factory the def binds another name: the function's own name must stay what it
    # was (a global, or a cell of the enclosing function), e.g. for a recursive call.
    fn.name = "tg_autograph_converted"
    factory = _def("tg_autograph_factory", ["ag__"] + freevars, [fn, ast.Return(value=_name(fn.name))])
    _locate(factory, fn)
    module = ast.Module(body=[factory], type_ignores=[])
    ast.fix_missing_locations(module)
    compiled = compile(module, filename, "exec", dont_inherit=True)
    factory_code = next(c for c in compiled.co_consts if isinstance(c, types.CodeType))
    inner = next(c for c in factory_code.co_consts if isinstance(c, types.CodeType) and c.co_name == fn.name)
    inner = inner.replace(co_name=code.co_name, co_qualname=python_function.__qualname__)
    cells = dict(zip(code.co_freevars, python_function.__closure__ or ()))
    cells["ag__"] = types.CellType(_operators)
    closure = tuple(cells[name] for name in inner.co_freevars)
    converted = types.FunctionType(inner, python_function.__globals__, python_function.__name__,
                                   python_function.__defaults__, closure)
    converted.__kwdefaults__ = python_function.__kwdefaults__
    converted.__qualname__ = python_function.__qualname__
    converted.__doc__ = python_function.__doc__
    converted.__module__ = python_function.__module__
    converted.__dict__.update(python_function.__dict__)
    converted.__tg_converted__ = True
    converted.__tg_source__ = source
    return converted


# Weak in the original function, so the converted one must not refer to it (it shares its cells):
# a reference would keep the entry, and whatever the function captures, for good.
_cache = weakref.WeakKeyDictionary()


def convert(python_function):
    """The converted function (cached per function object); ConversionError when it cannot be."""
    hit = _cache.get(python_function)
    if hit is not None:
        if isinstance(hit, str):
            raise ConversionError(hit)
        return hit
    try:
        if not isinstance(python_function, types.FunctionType):
            raise ConversionError(f"it is not a Python function ({type(python_function).__name__})")
        if python_function.__code__.co_flags & (inspect.CO_GENERATOR | inspect.CO_COROUTINE |
                                                inspect.CO_ASYNC_GENERATOR):
            raise ConversionError("it is a generator or a coroutine")
        filename, fn = _parse(python_function)
        converted = _build(python_function, fn, filename)
    except ConversionError as e:
        # The message only: the exception's traceback holds the frames (and arguments) of the call.
        _cache[python_function] = str(e)
        raise
    _cache[python_function] = converted
    return converted


# ---- what is converted -------------------------------------------------------------------------------

_LIBRARY_PREFIXES = ("tracegraph", "numpy", "builtins", "functools", "pytest", "_pytest", "hypothesis")
_STDLIB = {sysconfig.get_paths().get("stdlib", ""), sysconfig.get_paths().get("platstdlib", "")}


def _is_user_code(f):
    if getattr(f, "__tg_converted__", False) or getattr(f, "__tg_do_not_convert__", False):
        return False
    code = getattr(f, "__code__", None)
    if code is not None and "ag__" in code.co_freevars:
        return False  # defined inside converted code: converted with it
    module = getattr(f, "__module__", None) or ""
    if module == "__main__":
        return True
    if module.split(".")[0] in _LIBRARY_PREFIXES:
        return False
    filename = getattr(getattr(f, "__code__", None), "co_filename", "")
    if not filename or filename.startswith("<"):
        return False
    if any(part in filename for part in ("site-packages", "dist-packages")):
        return False
    return not any(root and filename.startswith(root + "/") for root in _STDLIB)


_warned = set()


def _convert_or_original(f):
    try:
        return convert(f)
    except ConversionError as e:
        key = getattr(f, "__qualname__", repr(f))
        if key not in _warned and f.__code__.co_name != "<lambda>":
            _warned.add(key)
            _logger.warning("AutoGraph could not transform %s and will run it as-is: %s", key, e)
        return f


def call_target(f):
    """What converted code calls for f: f converted when it is the user's code."""
    from tracegraph._function import Function
    if isinstance(f, Function) or isinstance(f, type):
        return f
    if isinstance(f, types.FunctionType):
        return _convert_or_original(f) if _is_user_code(f) else f
    if isinstance(f, types.MethodType):
        func = f.__func__
        if isinstance(func, types.FunctionType) and _is_user_code(func):
            converted = _convert_or_original(func)
            if converted is not func:
                return types.MethodType(converted, f.__self__)
        return f
    if isinstance(f, functools.partial):
        inner = call_target(f.func)
        return f if inner is f.func else functools.partial(inner, *f.args, **f.keywords)
    call = getattr(type(f), "__call__", None)
    if isinstance(call, types.FunctionType) and _is_user_code(call):
        converted = _convert_or_original(call)
        if converted is not call:
            return types.MethodType(converted, f)
    return f


def transform_for_function(python_function):
    """tg.function's hook: the callable a trace runs - the function converted where it can be
    (the function the user decorated is converted wherever it lives; tracegraph's own wrappers
    are not)."""
    if isinstance(python_function, types.FunctionType):
        if (python_function.__module__ or "").split(".")[0] == "tracegraph":
            return python_function
        if getattr(python_function, "__tg_do_not_convert__", False):
            return python_function
        return _convert_or_original(python_function)
    return call_target(python_function)


def to_code_of(python_function):
    converted = convert(python_function)
    return converted.__tg_source__ + "\n"


