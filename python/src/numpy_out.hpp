// What the extension's translation units share: new NumPy arrays that own their memory, and the
// check of the counts the library takes as std::size_t.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstddef>
#include <initializer_list>
#include <memory>
#include <string>

#include "specdec/errors.hpp"

namespace specdec_python {

// A new NumPy array that owns `data`.
template <class T>
nanobind::ndarray<nanobind::numpy, T> to_numpy(std::unique_ptr<T[]> data, std::initializer_list<std::size_t> shape) {
  T* raw = data.release();
  nanobind::capsule owner(raw, [](void* p) noexcept { delete[] static_cast<T*>(p); });
  return nanobind::ndarray<nanobind::numpy, T>(raw, shape.size(), shape.begin(), owner);
}

// A count the library takes as std::size_t (gamma, max_gamma, depth, k, n) from Python's int: a
// negative one is refused here, as specdec.Error naming the parameter.
inline std::size_t non_negative(int value, const char* name) {
  if (value < 0) throw specdec::error(std::string(name) + " must be >= 0");
  return static_cast<std::size_t>(value);
}

}  // namespace specdec_python
