// What a transcript's header says about the run (serving/transcript.h), in the terms of the
// command line: the model line, the fingerprint (and a GGUF file's size), and ModelRunOptions as
// `key: value` lines named after their flags. Shared by `wormchat transcript` and the chat's /save.
#pragma once

#include <string>
#include <vector>

#include "app/model_loader.h"
#include "app/model_options.h"
#include "serving/conversation.h"
#include "serving/transcript.h"

namespace wc {

// The run options a header records: every ModelRunOptions field that can change tokens, by flag
// name without the dashes - kv-dtype, kv-scale, kv-block-size, kv-blocks, ctx (as resolved: never
// 0), lm-head-fractures, attention, mesh, reduction, max-cores-per-head, k-chunk-size,
// matmul-precision (written only when not bf16; bf16 when absent), weights (the canonical --weights
// spec, written only when not auto; auto when absent), ids (written only when true; false when
// absent), and - not a token-changing option, but how replies were decoded, which replay repeats -
// speculate (written only when not off; off when absent) with speculate-k and
// lookup-ngram (written only when speculate is on), and - not an option, a fact of the machine -
// kv-kernels (KvKernelsOf, written only for fp8 and bfp8 K/V). Not --threads: tokens are the same
// on any thread count.
std::vector<TranscriptOption> RunOptionEntries(const ModelRunOptions& o, const LoadedModel& m);

// The attention kernels of m's K/V on this CPU where their bits depend on it: "bf16 dot" (fp8 and
// bfp8 on AVX-512 BF16: vdpbf16ps on the query and weights rounded to bf16) or "f32 FMA"; "" for
// every other format, whose bits are the same on every CPU (docs/correctness.md#determinism).
std::string KvKernelsOf(const LoadedModel& m);

// For a replay of t on m that differs: a note in parentheses when t's `kv-kernels:` (or its
// absence) is not what this CPU runs, so the difference reads as the CPU's; "" otherwise.
std::string KvKernelsNote(const Transcript& t, const LoadedModel& m);

// The header's run options as ModelRunOptions (model_dir from its model line: "default" is the
// model in assets/, anything else a directory; threads 0). Throws wc::Error "FILE:LINE: ..." for
// an unknown key or a bad number, "FILE: ..." for a missing key.
ModelRunOptions RunOptionsFromTranscript(const Transcript& t);

// A transcript of `turns` (those that finished) run with `run` on the loaded model `m`: the
// version, model line, fingerprint (model/fingerprint.h), a GGUF model's file size, run options,
// and the settings the conversation started with (the first turn's, or `settings` if there is
// none). Throws wc::Error naming a model file that cannot be read.
// `fingerprint`: RunFingerprint's, when the caller has it already ("" computes it).
Transcript MakeTranscript(const ModelRunOptions& run, const LoadedModel& m,
                          const ConversationSettings& settings,
                          const std::vector<ConversationTurn>& turns,
                          const std::string& fingerprint = "");

// The chat's /save: writes `conversation`'s turns so far to `path` (atomically) in the transcript
// format, for `wormchat transcript replay`. Throws wc::Error naming the path on failure.
void SaveConversation(const std::string& path, const ModelRunOptions& run, const LoadedModel& m,
                      const Conversation& conversation);

// The fingerprint of `m`'s directory as a transcript of `run` records it (kv_scales.json included
// when --kv-scale is tensor).
std::string RunFingerprint(const ModelRunOptions& run, const LoadedModel& m);

}  // namespace wc
