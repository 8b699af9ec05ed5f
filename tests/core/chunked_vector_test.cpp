// ChunkedVector: elements keep their addresses and values as it grows, past the size where its
// chunks come from huge blocks; truncating and freeing chunks at any point (inside a block, at
// a block's edge, before the first block) and growing again; copies and moves. Elements are
// strings on the heap, so that ASan sees any element used after its chunk was freed and leak
// checking any that was never destroyed.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/buffer.h"
#include "core/chunked_vector.h"
#include "tracegraph/config.h"

namespace tg::detail {
namespace {

// Big enough that a huge block holds only a few chunks: many blocks in a short test.
struct Item {
  std::string text;  // long: its characters live on the heap
  char pad[4000];
};

std::string text_of(std::size_t i) { return "element number " + std::to_string(i) + " of the chunked vector"; }

using Vec = ChunkedVector<Item, 4>;  // 16 per chunk: the huge blocks start at element 256

void fill(Vec& v, std::size_t from, std::size_t to) {
  for (std::size_t i = from; i < to; ++i) v.push_back(Item{text_of(i), {}});
}

void expect_items(const Vec& v, std::size_t n) {
  ASSERT_EQ(v.size(), n);
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(v[i].text, text_of(i)) << i;
}

TEST(ChunkedVector, ElementsKeepTheirPlacesPastTheHugeBlocks) {
  Vec v;
  fill(v, 0, 3000);
  expect_items(v, 3000);
  const Item* first = &v[0];
  const Item* late = &v[2000];
  fill(v, 3000, 5000);
  EXPECT_EQ(&v[0], first);
  EXPECT_EQ(&v[2000], late) << "growing moves nothing";
  expect_items(v, 5000);
}

TEST(ChunkedVector, ShrinksAndGrowsAgainAtEveryKindOfPoint) {
  Vec v;
  fill(v, 0, 4000);
  // 32 chunks (512 items) per huge block, from item 256: points inside blocks, at the edges
  // between blocks (768, 2304), at the first block's start (256), before it, and zero.
  for (std::size_t n : {std::size_t{3500}, std::size_t{2304}, std::size_t{2049}, std::size_t{1024},
                        std::size_t{768}, std::size_t{300}, std::size_t{256}, std::size_t{255},
                        std::size_t{17}, std::size_t{0}}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    v.truncate(n);
    v.shrink_to_fit();
    expect_items(v, n);
    fill(v, n, n + 700);  // across the next block edge
    expect_items(v, n + 700);
    v.truncate(n);
    fill(v, n, 4000);
    expect_items(v, 4000);
  }
}

TEST(ChunkedVector, CopiesAndMovesHoldTheSameItems) {
  Vec v;
  fill(v, 0, 2500);
  Vec copy(v);
  expect_items(copy, 2500);
  Vec moved(std::move(v));
  expect_items(moved, 2500);
  EXPECT_EQ(v.size(), 0u);
  fill(v, 0, 600);  // a moved-from vector is usable again
  expect_items(v, 600);
  copy = moved;
  expect_items(copy, 2500);
  v = std::move(copy);
  expect_items(v, 2500);
  fill(v, 2500, 3100);
  expect_items(v, 3100);
}

// Freed huge blocks are parked in the large-block cache for the next large graph (but not in a
// sanitized build, where a chunk used after its release should fault), and released with it.
TEST(ChunkedVector, FreedHugeBlocksAreParkedForTheNextLargeVector) {
  config::release_cached_memory();
  {
    Vec v;
    fill(v, 0, 1000);  // items 256 to 999: two huge blocks
  }
  if (!kParkCachedArrays) {
    EXPECT_EQ(cached_block_bytes(), 0u);
    return;
  }
  EXPECT_EQ(cached_block_bytes(), 2 * kHugeBlockBytes);
  {
    Vec v;
    fill(v, 0, 600);  // takes one of them back
    EXPECT_EQ(cached_block_bytes(), kHugeBlockBytes);
    expect_items(v, 600);
  }
  EXPECT_EQ(config::release_cached_memory(), 2 * kHugeBlockBytes);
  EXPECT_EQ(cached_block_bytes(), 0u);
}

}  // namespace
}  // namespace tg::detail
