#include "app/batch/batch_request.h"

#include "util/error.h"

namespace wc {

namespace {

uint64_t Fnv1a64(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace

uint64_t DeriveBatchSeed(uint64_t seed, const std::string& custom_id) {
  return SplitMix64(Fnv1a64(custom_id) ^ seed);
}

Request BuildBatchRequest(const BatchLine& line, const BatchDefaults& defaults,
                          const BatchFraming& framing) {
  WC_CHECK(line.error.empty() && line.custom_id.has_value(), "only good lines become requests");
  RequestNaming naming;
  naming.prefix = "body.";
  naming.from_text = line.from_text;
  naming.seed = DeriveBatchSeed(defaults.seed, *line.custom_id);
  try {
    return BuildOpenAIRequest(line, defaults, framing, naming);
  } catch (const Error& e) {
    throw Error(Cat("line ", line.line, ": ", e.what()));
  }
}

}  // namespace wc
