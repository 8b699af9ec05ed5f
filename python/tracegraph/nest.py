"""tf.nest: nested structures of lists, tuples, namedtuples and dicts, and their leaves.

The one definition of what nests in the package (GradientTape.gradient, tg.cond and
tg.while_loop walk structures through it): lists, tuples, namedtuples and mappings nest; anything
else, None included, is a leaf. A mapping's leaves come in sorted key order, as in TF, and a
rebuilt mapping keeps the key order of the one it was built like.
"""
import collections.abc

__all__ = ["assert_same_structure", "flatten", "is_nested", "map_structure", "pack_sequence_as"]


def is_namedtuple(x):
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def is_nested(structure):
    """Whether `structure` is a list, tuple, namedtuple or mapping (tf.nest.is_nested)."""
    return isinstance(structure, (list, tuple, collections.abc.Mapping))


def sorted_keys(mapping):
    """A mapping's keys in the order its leaves are flattened: sorted, as tf.nest sorts them."""
    try:
        return sorted(mapping)
    except TypeError:
        raise TypeError(f"tg.nest only supports dicts with sortable keys; got the keys "
                        f"{list(mapping)!r}, which cannot be compared with each other") from None


def children(structure):
    """The direct children of a nested `structure` as (path suffix, child) pairs, in flattening
    order: ".name" for a namedtuple's fields, "[i]" for sequences, "[key]" for mappings."""
    if isinstance(structure, collections.abc.Mapping):
        return [(f"[{k!r}]", structure[k]) for k in sorted_keys(structure)]
    if is_namedtuple(structure):
        return [(f".{n}", v) for n, v in zip(structure._fields, structure)]
    return [(f"[{i}]", v) for i, v in enumerate(structure)]


def sequence_like(instance, values):
    """A container of `instance`'s type holding `values` (in children()'s order)."""
    if isinstance(instance, collections.abc.Mapping):
        by_key = dict(zip(sorted_keys(instance), values))
        if isinstance(instance, collections.defaultdict):
            rebuilt = collections.defaultdict(instance.default_factory)
            for key in instance:
                rebuilt[key] = by_key[key]
            return rebuilt
        return type(instance)((key, by_key[key]) for key in instance)
    if is_namedtuple(instance):
        return type(instance)(*values)
    if isinstance(instance, list):
        return list(values)
    return tuple(values) if type(instance) is tuple else type(instance)(values)


def flatten(structure):
    """The leaves of `structure`, in order (tf.nest.flatten); a leaf flattens to [leaf]."""
    if not is_nested(structure):
        return [structure]
    out = []
    for _, child in children(structure):
        out.extend(flatten(child))
    return out


def _pack(structure, leaves):
    if not is_nested(structure):
        return next(leaves)
    return sequence_like(structure, [_pack(child, leaves) for _, child in children(structure)])


def pack_sequence_as(structure, flat_sequence):
    """`structure` rebuilt with its leaves taken from `flat_sequence`, in flatten's order."""
    flat = list(flat_sequence)
    expected = len(flatten(structure))
    if len(flat) != expected:
        raise ValueError(f"The structure has {expected} leaves but flat_sequence has {len(flat)} "
                         f"elements; pass as many values as tg.nest.flatten(structure) returns")
    return _pack(structure, iter(flat))


def assert_same_structure(nest1, nest2, check_types=True):
    """Raises ValueError (TypeError for differing container types) unless the two structures
    nest alike."""
    def walk(a, b, path):
        if is_nested(a) != is_nested(b):
            raise ValueError(f"The two structures don't have the same nested structure at "
                             f"'{path or 'the top'}': {a!r} and {b!r}")
        if not is_nested(a):
            return
        if check_types and type(a) is not type(b):
            raise TypeError(f"The two structures don't have the same sequence type at "
                            f"'{path or 'the top'}': {type(a).__name__} and {type(b).__name__}")
        ca, cb = children(a), children(b)
        if [p for p, _ in ca] != [p for p, _ in cb]:
            raise ValueError(f"The two structures don't have the same nested structure at "
                             f"'{path or 'the top'}': {a!r} and {b!r}")
        for (p, x), (_, y) in zip(ca, cb):
            walk(x, y, path + p)
    walk(nest1, nest2, "")


def map_structure(func, *structure, check_types=True):
    """`func` applied to the leaves of the structures at each position, in the first one's
    structure (tf.nest.map_structure)."""
    if not structure:
        raise ValueError("map_structure needs at least one structure")
    for other in structure[1:]:
        assert_same_structure(structure[0], other, check_types=check_types)
    flats = [flatten(s) for s in structure]
    return pack_sequence_as(structure[0], [func(*leaves) for leaves in zip(*flats)])
