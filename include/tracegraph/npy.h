// NumPy's .npy files: one tensor per file, readable and writable by numpy.load / numpy.save.
#pragma once
#include <string>

#include "tracegraph/tensor.h"

namespace tg {

/// Reads a .npy file (format versions 1.0, 2.0 and 3.0; either byte order; C or Fortran order).
/// dtypes: float32 and float64 stay; bool stays; int32 and int64 stay; int8, uint8, int16 and
/// uint16 become int32, uint32 becomes int64 (tracegraph has no narrower integer dtypes).
/// Everything is validated before it is used: the magic, the version, a header of at most
/// 10,000 bytes (NumPy's own limit), a header that is exactly the dict NumPy writes (keys
/// 'descr', 'fortran_order', 'shape', each once), a supported dtype - object arrays (pickled
/// Python objects) and structured dtypes are refused, never interpreted - and data exactly as
/// long as the shape says. A missing or unreadable file is a tg::InvalidArgumentError, bad
/// content a tg::ValueError naming the file, the byte offset, what was expected and what was
/// found.
Tensor load_npy(const std::string& path);

/// Writes an eager tensor as a version 1.0 .npy file (2.0 when the header needs it), little
/// endian, C order. float32, float64, int32, int64 and bool; a string tensor is a tg::TypeError.
void save_npy(const std::string& path, const Tensor& t);

}  // namespace tg
