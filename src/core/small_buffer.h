#pragma once
// SmallBuffer: a fixed-size scratch array that lives on the stack up to N elements and on the
// heap beyond. Hand-written (not a library) because fit and scoring run ~13 million times per
// simulation and must not allocate for ordinary nodes (≤ 16 GPUs, the largest HGX/DGX
// systems); std::vector always would.

#include <array>
#include <cstddef>
#include <span>
#include <type_traits>
#include <vector>

namespace fracgpu::core::internal {

/// `size` value-initialised elements of T; storage is inline when size ≤ N. T must be
/// trivially copyable (the inline array is default-initialised, then every element assigned).
template <typename T, size_t N = 16>
class SmallBuffer {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  explicit SmallBuffer(size_t size) : size_(size) {
    if (size > N) {
      heap_.assign(size, T{});
      data_ = heap_.data();
    } else {
      data_ = inline_.data();
      for (size_t i = 0; i < size; ++i) data_[i] = T{};
    }
  }
  SmallBuffer(const SmallBuffer&) = delete;
  SmallBuffer& operator=(const SmallBuffer&) = delete;

  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }
  T* data() { return data_; }
  size_t size() const { return size_; }
  std::span<T> span() { return {data_, size_}; }
  std::span<const T> span() const { return {data_, size_}; }

 private:
  size_t size_;
  T* data_;
  std::array<T, N> inline_;
  std::vector<T> heap_;
};

}  // namespace fracgpu::core::internal
