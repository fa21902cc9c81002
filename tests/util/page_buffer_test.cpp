// PageBuffer: the KV cache's storage - zeros, 2 MiB aligned when large, movable, and a clear error
// (not a crash) when the memory cannot be mapped.
#include "util/page_buffer.h"

#include <cstdint>
#include <string>
#include <utility>

#include <gtest/gtest.h>

#include "util/error.h"

namespace wc {
namespace {

TEST(PageBuffer, ZeroedAlignedAndMovable) {
  PageBuffer empty;
  EXPECT_EQ(empty.size(), 0u);
  EXPECT_EQ(empty.data(), nullptr);

  const size_t bytes = (size_t{5} << 20) + 123;
  PageBuffer a(bytes);
  ASSERT_NE(a.data(), nullptr);
  EXPECT_EQ(a.size(), bytes);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data()) % (size_t{2} << 20), 0u);
  for (size_t i = 0; i < bytes; i += 4093) ASSERT_EQ(a.data()[i], 0) << i;
  EXPECT_EQ(a.data()[bytes - 1], 0);
  a.data()[bytes - 1] = 7;

  PageBuffer b = std::move(a);
  EXPECT_EQ(a.data(), nullptr);
  EXPECT_EQ(b.size(), bytes);
  EXPECT_EQ(b.data()[bytes - 1], 7);

  PageBuffer small(100);  // below a huge page: page aligned, all zeros
  for (size_t i = 0; i < 100; ++i) ASSERT_EQ(small.data()[i], 0);
  b = std::move(small);
  EXPECT_EQ(b.size(), 100u);
}

TEST(PageBuffer, UnmappableSizeIsAClearError) {
  try {
    PageBuffer huge(size_t{1} << 62);
    FAIL() << "mapped 4 EiB";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot map"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace wc
