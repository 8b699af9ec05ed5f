// A vector whose elements live in fixed-size chunks, so that growing it never moves them.
#pragma once
#include <algorithm>
#include <cstddef>
#include <iterator>
#include <memory>
#include <new>
#include <utility>
#include <vector>

namespace tg::detail {

/// 2 MiB aligned to 2 MiB, marked for the kernel to back with one huge page (MADV_HUGEPAGE), or
/// nullptr when it cannot be had. For the chunks of large ChunkedVectors (buffer.cpp). Released
/// blocks are parked in the large-block cache (tg::config::release_cached_memory frees them),
/// so the next large graph reuses mapped pages.
inline constexpr std::size_t kHugeBlockBytes = std::size_t{2} << 20;
void* acquire_huge_block();
void release_huge_block(void* block);

/// For arrays that grow one element at a time to a size nobody knows in advance, by the hundred
/// thousand (a traced graph's nodes). A std::vector doubles: every element is moved once per
/// doubling and the memory touched is about twice the final size, in fresh pages each time
/// (on a paravirtualised VM a fresh page costs microseconds). Here growing allocates one more
/// chunk and moves nothing, and an element's address is stable while it lives. Indexing costs
/// one extra load (the chunk table). Only what its users need of std::vector's interface.
template <class T, std::size_t kChunkShift = 9>
class ChunkedVector {
  static_assert(alignof(T) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__, "chunks come from plain operator new");
  static constexpr std::size_t kChunk = std::size_t{1} << kChunkShift;
  static constexpr std::size_t kMask = kChunk - 1;

  template <class Owner, class Item>
  class Iter {
   public:
    using iterator_category = std::random_access_iterator_tag;
    using value_type = T;
    using difference_type = std::ptrdiff_t;
    using pointer = Item*;
    using reference = Item&;
    Iter() = default;
    Iter(Owner* v, std::size_t i) : v_(v), i_(i) {}
    Item& operator*() const { return (*v_)[i_]; }
    Item* operator->() const { return &(*v_)[i_]; }
    Item& operator[](difference_type k) const { return (*v_)[i_ + static_cast<std::size_t>(k)]; }
    Iter& operator++() { ++i_; return *this; }
    Iter operator++(int) { Iter old = *this; ++i_; return old; }
    Iter& operator--() { --i_; return *this; }
    Iter operator--(int) { Iter old = *this; --i_; return old; }
    Iter& operator+=(difference_type k) { i_ += static_cast<std::size_t>(k); return *this; }
    Iter& operator-=(difference_type k) { i_ -= static_cast<std::size_t>(k); return *this; }
    friend Iter operator+(Iter it, difference_type k) { return it += k; }
    friend Iter operator+(difference_type k, Iter it) { return it += k; }
    friend Iter operator-(Iter it, difference_type k) { return it -= k; }
    friend difference_type operator-(const Iter& a, const Iter& b) {
      return static_cast<difference_type>(a.i_) - static_cast<difference_type>(b.i_);
    }
    bool operator==(const Iter& o) const { return i_ == o.i_; }
    auto operator<=>(const Iter& o) const { return i_ <=> o.i_; }

   private:
    Owner* v_ = nullptr;
    std::size_t i_ = 0;
  };

 public:
  using value_type = T;
  using iterator = Iter<ChunkedVector, T>;
  using const_iterator = Iter<const ChunkedVector, const T>;

  ChunkedVector() = default;
  ChunkedVector(const ChunkedVector& other) {
    for (const T& item : other) push_back(item);
  }
  ChunkedVector(ChunkedVector&& other) noexcept
      : chunks_(std::move(other.chunks_)),
        size_(std::exchange(other.size_, 0)),
        blocks_(std::move(other.blocks_)),
        huge_failed_(std::exchange(other.huge_failed_, false)),
        huge_chunks_(std::exchange(other.huge_chunks_, 0)) {}
  ChunkedVector& operator=(const ChunkedVector& other) {
    if (this != &other) {
      ChunkedVector copy(other);
      *this = std::move(copy);
    }
    return *this;
  }
  ChunkedVector& operator=(ChunkedVector&& other) noexcept {
    if (this != &other) {
      release();
      chunks_ = std::move(other.chunks_);
      size_ = std::exchange(other.size_, 0);
      blocks_ = std::move(other.blocks_);
      huge_failed_ = std::exchange(other.huge_failed_, false);
      huge_chunks_ = std::exchange(other.huge_chunks_, 0);
    }
    return *this;
  }
  ~ChunkedVector() { release(); }

  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T& operator[](std::size_t i) { return chunks_[i >> kChunkShift][i & kMask]; }
  const T& operator[](std::size_t i) const { return chunks_[i >> kChunkShift][i & kMask]; }
  T& back() { return (*this)[size_ - 1]; }
  const T& back() const { return (*this)[size_ - 1]; }
  iterator begin() { return {this, 0}; }
  iterator end() { return {this, size_}; }
  const_iterator begin() const { return {this, 0}; }
  const_iterator end() const { return {this, size_}; }

  void push_back(const T& item) { new (next_slot()) T(item); ++size_; }
  void push_back(T&& item) { new (next_slot()) T(std::move(item)); ++size_; }
  /// Destroys the elements from `n` on (keeping their chunks: see shrink_to_fit).
  void truncate(std::size_t n) {
    for (std::size_t i = n; i < size_; ++i) (*this)[i].~T();
    if (n < size_) size_ = n;
  }
  /// Frees the chunks past the last element.
  void shrink_to_fit() {
    const std::size_t used = (size_ + kMask) >> kChunkShift;
    drop_chunks_from(used);
    chunks_.shrink_to_fit();
  }

 private:
  T* next_slot() {
    if ((size_ >> kChunkShift) == chunks_.size()) chunks_.push_back(new_chunk());
    return &chunks_[size_ >> kChunkShift][size_ & kMask];
  }
  bool carved(std::size_t c) const { return c >= kFirstHugeChunk && c - kFirstHugeChunk < huge_chunks_; }
  T* new_chunk() {
    const std::size_t c = chunks_.size();
    if (kChunksPerBlock >= 8 && c >= kFirstHugeChunk && c - kFirstHugeChunk == huge_chunks_ && !huge_failed_) {
      const std::size_t k = c - kFirstHugeChunk;
      if (k % kChunksPerBlock == 0 && k / kChunksPerBlock == blocks_.size()) {
        void* block = acquire_huge_block();
        if (!block) {
          huge_failed_ = true;
          return static_cast<T*>(::operator new(kChunk * sizeof(T)));
        }
        blocks_.push_back(block);
      }
      ++huge_chunks_;
      return reinterpret_cast<T*>(static_cast<char*>(blocks_[k / kChunksPerBlock]) +
                                  (k % kChunksPerBlock) * kChunk * sizeof(T));
    }
    return static_cast<T*>(::operator new(kChunk * sizeof(T)));
  }
  // Frees chunks [n, end): those from operator new one by one, and the huge blocks none of whose
  // chunks stay (a block keeps its place: chunk c is always carved from the same block).
  void drop_chunks_from(std::size_t n) {
    for (std::size_t c = n; c < chunks_.size(); ++c)
      if (!carved(c)) ::operator delete(chunks_[c]);
    if (n < kFirstHugeChunk + huge_chunks_) {
      huge_chunks_ = n > kFirstHugeChunk ? n - kFirstHugeChunk : 0;
      const std::size_t blocks_kept = (huge_chunks_ + kChunksPerBlock - 1) / std::max<std::size_t>(kChunksPerBlock, 1);
      while (blocks_.size() > blocks_kept) {
        release_huge_block(blocks_.back());
        blocks_.pop_back();
      }
    }
    chunks_.resize(std::min(n, chunks_.size()));
  }
  void release() {
    truncate(0);
    drop_chunks_from(0);
    huge_failed_ = false;
  }

  std::vector<T*> chunks_;  // each holds kChunk slots, the first size_ of all constructed
  std::size_t size_ = 0;
  // Chunks from kFirstHugeChunk on are carved from huge blocks, kChunksPerBlock each, chunk c
  // from block (c - kFirstHugeChunk) / kChunksPerBlock: a 100k-node graph is tens of MB, whose
  // 4 KiB pages each cost a fault of ~10 us on a paravirtualised VM, and a TLB entry per page in
  // every pass. Small vectors (most graphs) never reach them. When a block cannot be had, the
  // rest of the chunks come from operator new (huge_failed_).
  static constexpr std::size_t kChunksPerBlock = kHugeBlockBytes / (kChunk * sizeof(T));
  static constexpr std::size_t kFirstHugeChunk = 16;
  std::vector<void*> blocks_;
  bool huge_failed_ = false;
  std::size_t huge_chunks_ = 0;  // chunks_[kFirstHugeChunk, kFirstHugeChunk + huge_chunks_) are carved
};

}  // namespace tg::detail
