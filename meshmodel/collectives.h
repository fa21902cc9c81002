// Collective operations between the chips of a Wormhole mesh over Ethernet, modelled as tt-metal's
// CCLs run them: a ring over the chips (`chips` members), `links` Ethernet links between ring
// neighbours, every link full duplex at EthernetSpec::link_gbps per direction, each step paying
// one hop's latency. A bidirectional ring sends half of every chunk each way round, so a step
// carries half the bytes and the ring needs half the steps.
//
//   all-gather of a tensor of S bytes (every chip ends with all S, holding S / N at the start):
//     steps = N - 1 (bidirectional: ceil((N - 1) / 2)); each step moves S / N bytes per chip,
//     split over the links (and the two directions);
//     time  = steps * hop_latency + (N - 1) / N * S / (links * directions * link bandwidth).
//   reduce-scatter of S bytes (every chip ends with its reduced S / N): the same traffic and
//     steps as an all-gather (the additions run on Tensix cores as the chunks arrive, hidden).
//   all-reduce = reduce-scatter + all-gather.
// One chip (N = 1) costs nothing.
#pragma once

#include <string>

#include "mesh/wormhole_spec.h"

namespace wc {

enum class CollectiveKind { kAllGather, kReduceScatter, kAllReduce };

struct RingSpec {
  int chips = 1;
  int links = 1;              // Ethernet links between two ring neighbours
  bool bidirectional = true;  // chunks split over both directions of the ring
  EthernetSpec eth;
};

struct CollectiveCost {
  double us = 0;              // the whole collective
  double bytes_per_link = 0;  // bytes one link direction carries
  int steps = 0;
};

// Cost of `kind` over `ring` for a tensor of `bytes` (the gathered / unreduced size). Throws
// wc::Error for chips or links < 1 or negative bytes.
CollectiveCost RingCollective(CollectiveKind kind, const RingSpec& ring, double bytes);

}  // namespace wc
