"""tf.experimental.dlpack: tensors shared with NumPy, PyTorch and other DLPack libraries without
copying (python/src/dlpack_bindings.cpp).

    t = tg.experimental.dlpack.from_dlpack(torch_tensor)   # or a NumPy array, or a capsule
    torch_tensor = torch.from_dlpack(t)                    # tg.Tensor has __dlpack__
"""
from tracegraph import _core


def to_dlpack(tf_tensor):
    """A DLPack capsule ("dltensor") sharing `tf_tensor`'s elements; consumable once."""
    return _core._to_dlpack(tf_tensor)


def from_dlpack(dlcapsule):
    """A tg.Tensor sharing the elements of a DLPack capsule, or of any object with __dlpack__ (a
    NumPy array, a PyTorch tensor, ...). Row-major, aligned memory is shared; other layouts are
    copied. The producer's memory is released when the last tensor using it is gone."""
    return _core._from_dlpack(dlcapsule)
