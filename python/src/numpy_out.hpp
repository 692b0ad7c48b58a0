// What the extension's translation units share: new NumPy arrays that own their memory.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstddef>
#include <initializer_list>
#include <memory>

namespace specdec_python {

// A new NumPy array that owns `data`.
template <class T>
nanobind::ndarray<nanobind::numpy, T> to_numpy(std::unique_ptr<T[]> data, std::initializer_list<std::size_t> shape) {
  T* raw = data.release();
  nanobind::capsule owner(raw, [](void* p) noexcept { delete[] static_cast<T*>(p); });
  return nanobind::ndarray<nanobind::numpy, T>(raw, shape.size(), shape.begin(), owner);
}

}  // namespace specdec_python
