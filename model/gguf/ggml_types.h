// GGML's tensor types as GGUF files number them (ggml.h's enum ggml_type, llama.cpp b6673): each
// type's name, block (values a block holds along a row) and bytes a block. Every type a file may
// name is listed, so a tensor of a type wormchat does not compute with is refused by its name
// ("Q2_K"), never by a number; a number GGML never used (or retired) is unknown.
//
// The table is the one place deciding what wormchat does with each type (GgmlUse): computes with
// it (F32, F16, BF16), dequantizes it exactly (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K:
// `wormchat convert` and `info` read them; the quantized GEMM is a later slice of issue 52), or
// refuses it by name.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/gemm/quant/ggml_quants.h"

namespace wc {

enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kIQ2_XXS = 16,
  kIQ2_XS = 17,
  kIQ3_XXS = 18,
  kIQ1_S = 19,
  kIQ4_NL = 20,
  kIQ3_S = 21,
  kIQ2_S = 22,
  kIQ4_XS = 23,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kIQ1_M = 29,
  kBF16 = 30,
  kTQ1_0 = 34,
  kTQ2_0 = 35,
  kMXFP4 = 39,
};

enum class GgmlUse : uint8_t {
  kComputes,   // a safetensors dtype the engine runs (DTypeNamed: F32, F16, BF16)
  kQuantized,  // a quantized weight type: run by the integer GEMM
               // (kernels/gemm/quant/quant_gemm.h), read exactly to f32 by to_f32
  kRefused,    // named and refused
};

struct GgmlTypeInfo {
  GgmlType type;
  const char* name;  // upper case, as gguf-py's GGMLQuantizationType names it: "Q4_K", "BF16"
  int64_t block;     // values a block holds, along a row (ne[0])
  int64_t block_bytes;
  GgmlUse use = GgmlUse::kRefused;
  DequantizeRowFn to_f32 = nullptr;  // set for kQuantized (kernels/gemm/quant/ggml_quants.h)
};

// The type numbered `id`, or nullptr for a number that names no GGML type.
const GgmlTypeInfo* FindGgmlType(uint32_t id);
const GgmlTypeInfo& GgmlTypeOf(GgmlType type);
// The type named `name` ("Q4_K"), or nullptr.
const GgmlTypeInfo* FindGgmlTypeNamed(const std::string& name);
// "Q4_K"; for an unknown number, "type 31".
std::string GgmlTypeName(uint32_t id);
// The names of the types of one use, in the table's order: "Q8_0, Q4_0, ..." (for messages).
std::string GgmlTypeNames(GgmlUse use);
// Whether wormchat reads a tensor of type `id` (computes with it or dequantizes it).
bool GgmlTypeRead(uint32_t id);
// The f32 values of `rows` rows of `row_len` values of a kQuantized type, stored back to back at
// `data` (row_len / block blocks a row): [rows, row_len], exactly as ggml dequantizes them.
std::vector<float> DequantizeRows(const GgmlTypeInfo& type, const uint8_t* data, int64_t rows,
                                  int64_t row_len);

}  // namespace wc
