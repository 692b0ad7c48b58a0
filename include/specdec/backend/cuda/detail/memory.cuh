//! \file backend/cuda/detail/memory.cuh
//! \brief Device memory for the cuda backend: CUB-style two-phase workspaces and a stream-ordered
//! buffer for the convenience overloads.
//!
//! Every algorithm that needs scratch memory has a `*_workspace_bytes(...)` function and an overload
//! taking a caller-owned `std::span<std::byte>` of device memory (CUB's pattern: ask, allocate once,
//! reuse every decode step); the overload without a workspace allocates one on the policy's stream
//! with cudaMallocAsync and frees it, stream-ordered, after the kernels.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <span>
#include <utility>

#include "specdec/backend/cuda/detail/error.cuh"
#include "specdec/errors.hpp"

namespace specdec::backend::cuda {

//! Carves a workspace into aligned parts. Used twice with the same calls: once with no buffer to
//! count the bytes (`bytes()`), then with the caller's buffer to hand out the pointers.
class workspace_plan {
 public:
  static constexpr std::size_t alignment = 256;  //!< cudaMalloc's alignment: every part starts on it

  //! Counts only: `take` returns null pointers.
  workspace_plan() = default;
  //! Hands out parts of `buffer` (device memory).
  explicit workspace_plan(std::span<std::byte> buffer) : base_(buffer.data()), capacity_(buffer.size()), counting_(false) {}

  //! `count` objects of type U. \throws specdec::error when the buffer is too small.
  template <class U>
  U* take(std::size_t count) {
    const std::size_t offset = used_;
    used_ = round_up(offset + count * sizeof(U));
    if (counting_) return nullptr;
    if (used_ > capacity_) throw error("specdec::cuda: the workspace is smaller than *_workspace_bytes() said");
    return reinterpret_cast<U*>(base_ + offset);
  }
  //! The bytes taken so far (a multiple of `alignment`).
  std::size_t bytes() const noexcept { return used_; }

 private:
  static constexpr std::size_t round_up(std::size_t n) noexcept { return (n + alignment - 1) / alignment * alignment; }
  std::byte* base_ = nullptr;
  std::size_t capacity_ = 0;
  std::size_t used_ = 0;
  bool counting_ = true;
};

//! Device memory allocated and freed in stream order (cudaMallocAsync / cudaFreeAsync).
class device_buffer {
 public:
  //! Allocates `bytes` bytes of device memory in the order of `stream` (nothing when bytes = 0).
  //! \throws specdec::cuda_error when the allocation fails.
  device_buffer(std::size_t bytes, cudaStream_t stream) : stream_(stream), bytes_(bytes) {
    if (bytes > 0) check(cudaMallocAsync(reinterpret_cast<void**>(&data_), bytes, stream), "cudaMallocAsync");
  }
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;
  ~device_buffer() {
    if (data_ != nullptr) (void)cudaFreeAsync(data_, stream_);  // a destructor must not throw
  }
  //! The whole allocation (empty when bytes = 0).
  std::span<std::byte> span() const noexcept { return {data_, bytes_}; }

 private:
  cudaStream_t stream_;
  std::size_t bytes_;
  std::byte* data_ = nullptr;
};

//! Copies `count` objects from host memory to device memory in stream order. Pageable host memory is
//! staged by the runtime before the call returns, so `host` may be freed afterwards.
template <class U>
void copy_to_device(U* device, const U* host, std::size_t count, cudaStream_t stream) {
  if (count > 0) check(cudaMemcpyAsync(device, host, count * sizeof(U), cudaMemcpyHostToDevice, stream), "cudaMemcpyAsync");
}

}  // namespace specdec::backend::cuda
