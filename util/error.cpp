#include "util/error.h"

namespace wc {

void ThrowInternal(const char* file, int line, const char* cond, const std::string& msg) {
  throw InternalError(Cat("internal error at ", file, ":", line, ": check failed: ", cond,
                          msg.empty() ? "" : ": ", msg));
}

}  // namespace wc
