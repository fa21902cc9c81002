// What the model tells about the FlashDecode attention it runs, for whoever keeps figures of it
// (mesh/attention_meter.h: the emulated mesh's totals, device time and last op for generate
// --stats, the chat's status bar and core-grid panel). model/ only reports each op; what it costs
// on the mesh is the emulator's business (mesh/ sits above model/).
//
// Not to be confused with DecoderModel::AttentionObserver, which sees every layer's attention
// output values (any attention implementation), for measurements such as a KV format's error.
#pragma once

#include "attention/flash_decode.h"

namespace wc {

// One layer's FlashDecode op of one Forward, as the engine ran it. Everything is borrowed for the
// duration of the call only (op's pointers included).
struct FlashDecodeRun {
  int layer = 0;
  const DecodeAttentionOp& op;      // its kv view gives the stored K/V row size (RowBytes)
  const OpTrace& trace;             // which cores did what, bytes read and moved
  const MeshSpec& mesh;             // the emulated mesh it ran on
  const FlashDecodeConfig& config;  // chunking, reduction, math fidelity
};

class FlashDecodeObserver {
 public:
  virtual ~FlashDecodeObserver() = default;
  // Called once per layer per Forward that runs the FlashDecode attention (never with the
  // reference attention), right after the op ran, on the thread running Forward. A
  // tensor-parallel rank reports its own KV heads' op. Must not throw.
  virtual void OnFlashDecode(const FlashDecodeRun& run) = 0;
};

}  // namespace wc
