// Whether this test binary is a sanitizer build (tools/asan.sh, tools/tsan.sh). The slowest
// end-to-end tests run a smaller version of themselves there - fewer requests, the same code paths
// - because ASan + UBSan make the model 4-8x slower and CI has a time budget; the Release run keeps
// their full size.
#pragma once

namespace wc::test {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif

}  // namespace wc::test
