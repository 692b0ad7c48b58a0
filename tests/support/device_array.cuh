//! \file tests/support/device_array.cuh
//! \brief A device copy of a host vector for the GPU tests: upload on construction, download on
//! request. Errors become specdec::cuda_error.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <span>
#include <vector>

#include "specdec/backend/cuda/detail/error.cuh"
#include "specdec/core/batch.hpp"
#include "specdec/core/row_batch.hpp"
#include "specdec/core/token.hpp"

namespace specdec::test {

template <class T>
class device_array {
 public:
  explicit device_array(std::size_t n) : size_(n) {
    if (n > 0) backend::cuda::check(cudaMalloc(reinterpret_cast<void**>(&data_), n * sizeof(T)), "cudaMalloc");
  }
  explicit device_array(std::span<const T> host) : device_array(host.size()) {
    if (size_ > 0) backend::cuda::check(cudaMemcpy(data_, host.data(), size_ * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy");
  }
  explicit device_array(const std::vector<T>& host) : device_array(std::span<const T>(host)) {}
  device_array(const device_array&) = delete;
  device_array& operator=(const device_array&) = delete;
  ~device_array() { cudaFree(data_); }

  T* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  std::span<T> span() const noexcept { return {data_, size_}; }
  std::span<const T> cspan() const noexcept { return {data_, size_}; }
  //! The contents as rows of `width` entries (width must divide the size).
  row_batch<T> rows(std::size_t width) const { return {span(), width}; }
  //! The contents as read-only rows of `width` entries.
  row_batch<const T> crows(std::size_t width) const { return {cspan(), width}; }
  //! Waits for the device and copies the contents back.
  std::vector<T> download() const {
    std::vector<T> host(size_);
    backend::cuda::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    if (size_ > 0) backend::cuda::check(cudaMemcpy(host.data(), data_, size_ * sizeof(T), cudaMemcpyDeviceToHost), "cudaMemcpy");
    return host;
  }

 private:
  std::size_t size_ = 0;
  T* data_ = nullptr;
};

//! A device copy of a chain batch whose spans are host memory: `view` has the same layout and device spans.
template <class T>
struct device_chain_batch {
  device_array<token_id> drafts;
  device_array<T> draft_rows, target_rows;
  chain_batch<T> view;

  explicit device_chain_batch(const chain_batch<T>& host)
      : drafts(host.draft_tokens), draft_rows(host.draft_rows), target_rows(host.target_rows), view(host) {
    view.draft_tokens = drafts.cspan();
    view.draft_rows = draft_rows.cspan();
    view.target_rows = target_rows.cspan();
  }
};

}  // namespace specdec::test
