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

uint64_t SplitMix64(uint64_t x) {
  uint64_t z = x + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

uint64_t DeriveBatchSeed(uint64_t seed, const std::string& custom_id) {
  return SplitMix64(Fnv1a64(custom_id) ^ seed);
}

Request BuildBatchRequest(const BatchLine& line, const BatchDefaults& defaults,
                          const BatchFraming& framing) {
  WC_CHECK(line.error.empty() && line.custom_id.has_value(), "only good lines become requests");
  const Tokenizer& tok = *framing.tokenizer;
  const std::optional<ChatFormat>& format = *framing.chat_format;
  const char* field = line.from_text ? "the prompt" : line.chat ? "body.messages" : "body.prompt";
  Request r;
  try {
    if (line.prompt_ids) {  // fed exactly (as generate --ids)
      for (size_t i = 0; i < line.prompt_ids->size(); ++i)
        if ((*line.prompt_ids)[i] >= framing.vocab_size)
          throw Error(Cat("token id ", (*line.prompt_ids)[i], " at [", i, "]",
                          " is outside the vocabulary [0, ", framing.vocab_size, ")"));
      r.prompt_ids = *line.prompt_ids;
    } else if (line.from_text || !line.chat) {
      r.prompt_ids =
          EncodePrompt(tok, format, line.prompt, /*raw=*/!line.chat, framing.bos_token_id);
    } else {
      r.prompt_ids =
          EncodeMessages(tok, format, line.messages, framing.bos_token_id, framing.eos_token_id);
    }
  } catch (const Error& e) {
    throw Error(Cat("line ", line.line, ": ", field, ": ", e.what()));
  }
  if (r.prompt_ids.empty()) throw Error(Cat("line ", line.line, ": ", field, " gives no tokens"));
  if (static_cast<int>(r.prompt_ids.size()) >= framing.ctx)
    throw Error(Cat("line ", line.line, ": ", field, " is ", r.prompt_ids.size(),
                    " tokens, too long for the context of ", framing.ctx, " tokens"));
  r.chat = line.chat;
  r.sampling = defaults.sampling;
  if (line.temperature) r.sampling.temperature = *line.temperature;
  if (line.top_p) r.sampling.top_p = *line.top_p;
  if (line.top_k) r.sampling.top_k = *line.top_k;
  r.seed = line.seed ? *line.seed : DeriveBatchSeed(defaults.seed, *line.custom_id);
  r.max_new_tokens = line.max_tokens ? *line.max_tokens : defaults.max_tokens;
  if (line.stop && !line.stop->empty() && framing.ids)
    throw Error(Cat("line ", line.line, ": ", line.from_text ? "stop" : "body.stop",
                    " matches text, but with --ids replies are token ids"));
  r.stop = line.stop ? *line.stop : defaults.stop;
  if (line.num_beams) {
    BeamParams beams;
    beams.num_beams = *line.num_beams;
    if (line.length_penalty) beams.length_penalty = *line.length_penalty;
    if (line.early_stopping) beams.early_stopping = *line.early_stopping;
    if (line.n) beams.num_return = *line.n;
    r.beams = beams;
  }
  return r;
}

}  // namespace wc
