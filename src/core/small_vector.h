// A vector that keeps up to N elements inside itself and more on the heap.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <new>
#include <stdexcept>
#include <utility>
#include <vector>

namespace tg::detail {

/// For lists that are nearly always short, held by objects made by the hundred thousand (a graph
/// node's inputs): up to N elements cost no allocation. Same size as std::vector<T> for N *
/// sizeof(T) <= 16. Only what its users need of std::vector's interface.
template <class T, std::size_t N>
class SmallVector {
  static_assert(N >= 1);

 public:
  SmallVector() = default;
  SmallVector(std::initializer_list<T> items) { append(items.begin(), items.end()); }
  // Implicit, as from a braced list: lists built up as vectors are stored as they are.
  SmallVector(const std::vector<T>& items) { append(items.begin(), items.end()); }  // NOLINT
  SmallVector(const SmallVector& other) { append(other.begin(), other.end()); }
  SmallVector(SmallVector&& other) noexcept { take(other); }
  SmallVector& operator=(const SmallVector& other) {
    if (this != &other) {
      clear();
      append(other.begin(), other.end());
    }
    return *this;
  }
  SmallVector& operator=(SmallVector&& other) noexcept {
    if (this != &other) {
      release();
      take(other);
    }
    return *this;
  }
  SmallVector& operator=(std::initializer_list<T> items) {
    clear();
    append(items.begin(), items.end());
    return *this;
  }
  ~SmallVector() { release(); }

  T* data() { return on_heap() ? heap_ : inline_items(); }
  const T* data() const { return on_heap() ? heap_ : inline_items(); }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T* begin() { return data(); }
  T* end() { return data() + size_; }
  const T* begin() const { return data(); }
  const T* end() const { return data() + size_; }
  T& operator[](std::size_t i) { return data()[i]; }
  const T& operator[](std::size_t i) const { return data()[i]; }
  const T& at(std::size_t i) const {
    if (i >= size_) throw std::out_of_range("SmallVector::at");
    return data()[i];
  }
  T& front() { return data()[0]; }
  const T& front() const { return data()[0]; }
  T& back() { return data()[size_ - 1]; }
  const T& back() const { return data()[size_ - 1]; }

  void reserve(std::size_t n) {
    if (n > capacity_) grow_to(n);
  }
  void push_back(T item) {
    if (size_ == capacity_) grow_to(2 * capacity_);
    new (data() + size_) T(std::move(item));
    ++size_;
  }
  void clear() {
    std::destroy(begin(), end());
    size_ = 0;
  }

  bool operator==(const SmallVector& other) const { return std::equal(begin(), end(), other.begin(), other.end()); }

 private:
  bool on_heap() const { return capacity_ > N; }
  T* inline_items() { return std::launder(reinterpret_cast<T*>(inline_)); }
  const T* inline_items() const { return std::launder(reinterpret_cast<const T*>(inline_)); }

  template <class It> void append(It first, It last) {
    reserve(size_ + static_cast<std::size_t>(std::distance(first, last)));
    for (; first != last; ++first) new (data() + size_++) T(*first);
  }
  void grow_to(std::size_t n) {
    T* items = static_cast<T*>(::operator new(n * sizeof(T)));
    std::uninitialized_move(begin(), end(), items);
    const uint32_t size = size_;
    release();
    heap_ = items;
    size_ = size;
    capacity_ = static_cast<uint32_t>(n);
  }
  // Destroys the elements and frees the heap block; leaves an empty, inline vector.
  void release() {
    clear();
    if (on_heap()) ::operator delete(heap_);
    capacity_ = N;
  }
  // Takes other's elements (its heap block, or moves the inline ones); other is left empty.
  void take(SmallVector& other) noexcept {
    if (other.on_heap()) {
      heap_ = other.heap_;
      capacity_ = other.capacity_;
      size_ = other.size_;
      other.capacity_ = N;
      other.size_ = 0;
      return;
    }
    std::uninitialized_move(other.begin(), other.end(), inline_items());
    size_ = other.size_;
    other.clear();
  }

  uint32_t size_ = 0;
  uint32_t capacity_ = N;  // > N: the elements are on the heap
  union {
    T* heap_;
    alignas(T) unsigned char inline_[N * sizeof(T)];
  };
};

}  // namespace tg::detail
