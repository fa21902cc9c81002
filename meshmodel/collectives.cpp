#include "meshmodel/collectives.h"

#include "util/error.h"

namespace wc {

CollectiveCost RingCollective(CollectiveKind kind, const RingSpec& ring, double bytes) {
  if (ring.chips < 1 || ring.links < 1 || !(bytes >= 0))
    throw Error(Cat("a ring collective needs chips >= 1, links >= 1 and bytes >= 0, got ",
                    ring.chips, " chips, ", ring.links, " links, ", bytes, " bytes"));
  CollectiveCost c;
  if (ring.chips == 1) return c;
  const int n = ring.chips;
  const int directions = ring.bidirectional ? 2 : 1;
  // One pass (an all-gather or a reduce-scatter).
  const int steps = ring.bidirectional ? n / 2 : n - 1;  // ceil((n - 1) / 2) == n / 2
  const double per_link =
      static_cast<double>(n - 1) / n * bytes / (static_cast<double>(ring.links) * directions);
  const double gbps = ring.eth.link_gbps;  // GB/s = bytes per ns
  const double pass_latency_us = steps * ring.eth.hop_latency_us;
  const double pass_us = pass_latency_us + per_link / gbps / 1000.0;
  const int passes = kind == CollectiveKind::kAllReduce ? 2 : 1;
  c.us = passes * pass_us;
  c.bytes_per_link = passes * per_link;
  c.steps = passes * steps;
  return c;
}

}  // namespace wc
