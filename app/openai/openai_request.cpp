#include "app/openai/openai_request.h"

#include "util/error.h"

namespace wc {

uint64_t SplitMix64(uint64_t x) {
  uint64_t z = x + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t ChoiceSeed(uint64_t seed, int choice) {
  return choice == 0 ? seed : SplitMix64(seed ^ SplitMix64(static_cast<uint64_t>(choice)));
}

Request BuildOpenAIRequest(const OpenAIBody& body, const RequestDefaults& defaults,
                           const RequestFraming& framing, const RequestNaming& naming) {
  const std::string param = naming.from_text ? "" : body.chat ? "messages" : "prompt";
  const std::string field = naming.from_text ? "the prompt" : naming.prefix + param;
  Request r;
  try {
    if (body.prompt_ids) {  // fed exactly (as generate --ids)
      for (size_t i = 0; i < body.prompt_ids->size(); ++i)
        if ((*body.prompt_ids)[i] >= framing.vocab_size)
          throw Error(Cat("token id ", (*body.prompt_ids)[i], " at [", i, "]",
                          " is outside the vocabulary [0, ", framing.vocab_size, ")"));
      r.prompt_ids = *body.prompt_ids;
    } else if (framing.tokenizer == nullptr || framing.chat_format == nullptr) {
      throw Error("text needs the model's tokenizer, and this model has none; send token ids");
    } else if (naming.from_text || !body.chat) {
      r.prompt_ids = EncodePrompt(*framing.tokenizer, *framing.chat_format, body.prompt,
                                  /*raw=*/!body.chat, framing.bos_token_id);
    } else {
      r.prompt_ids = EncodeMessages(*framing.tokenizer, *framing.chat_format, body.messages,
                                    framing.bos_token_id, framing.eos_token_id);
    }
  } catch (const OpenAIFieldError&) {
    throw;
  } catch (const Error& e) {
    throw OpenAIFieldError(param, Cat(field, ": ", e.what()));
  }
  if (r.prompt_ids.empty()) throw OpenAIFieldError(param, Cat(field, " gives no tokens"));
  if (static_cast<int>(r.prompt_ids.size()) >= framing.ctx)
    throw OpenAIFieldError(
        param, Cat(field, " is ", r.prompt_ids.size(), " tokens, too long for the context of ",
                   framing.ctx, " tokens"));
  r.chat = body.chat;
  r.sampling = defaults.sampling;
  if (body.temperature) r.sampling.temperature = *body.temperature;
  if (body.top_p) r.sampling.top_p = *body.top_p;
  if (body.top_k) r.sampling.top_k = *body.top_k;
  r.seed = body.seed ? *body.seed : naming.seed;
  r.max_new_tokens = body.max_tokens ? *body.max_tokens : defaults.max_tokens;
  if (body.stop && !body.stop->empty() && framing.ids)
    throw OpenAIFieldError("stop", Cat(naming.from_text ? "stop" : naming.prefix + "stop",
                                       " matches text, but with --ids replies are token ids"));
  r.stop = body.stop ? *body.stop : defaults.stop;
  if (body.ignore_eos) r.stop_at_eos = false;
  if (body.num_beams) {
    BeamParams beams;
    beams.num_beams = *body.num_beams;
    if (body.length_penalty) beams.length_penalty = *body.length_penalty;
    if (body.early_stopping) beams.early_stopping = *body.early_stopping;
    if (body.n) beams.num_return = *body.n;
    r.beams = beams;
  }
  return r;
}

}  // namespace wc
