#include "model/gguf/ggml_types.h"

#include <iterator>

#include "util/error.h"

namespace wc {
namespace {

constexpr GgmlUse kComputes = GgmlUse::kComputes;
constexpr GgmlUse kQuantized = GgmlUse::kQuantized;

// ggml.c's type_traits (blck_size, type_size) for every type a GGUF file may name, and what
// wormchat does with it (the rest are refused).
constexpr GgmlTypeInfo kTypes[] = {
    {GgmlType::kF32, "F32", 1, 4, kComputes},
    {GgmlType::kF16, "F16", 1, 2, kComputes},
    {GgmlType::kQ4_0, "Q4_0", 32, 18, kQuantized, DequantizeRowQ4_0},
    {GgmlType::kQ4_1, "Q4_1", 32, 20, kQuantized, DequantizeRowQ4_1},
    {GgmlType::kQ5_0, "Q5_0", 32, 22, kQuantized, DequantizeRowQ5_0},
    {GgmlType::kQ5_1, "Q5_1", 32, 24, kQuantized, DequantizeRowQ5_1},
    {GgmlType::kQ8_0, "Q8_0", 32, 34, kQuantized, DequantizeRowQ8_0},
    {GgmlType::kQ8_1, "Q8_1", 32, 36},
    {GgmlType::kQ2_K, "Q2_K", 256, 84},
    {GgmlType::kQ3_K, "Q3_K", 256, 110},
    {GgmlType::kQ4_K, "Q4_K", 256, 144, kQuantized, DequantizeRowQ4_K},
    {GgmlType::kQ5_K, "Q5_K", 256, 176, kQuantized, DequantizeRowQ5_K},
    {GgmlType::kQ6_K, "Q6_K", 256, 210, kQuantized, DequantizeRowQ6_K},
    {GgmlType::kQ8_K, "Q8_K", 256, 292},
    {GgmlType::kIQ2_XXS, "IQ2_XXS", 256, 66},
    {GgmlType::kIQ2_XS, "IQ2_XS", 256, 74},
    {GgmlType::kIQ3_XXS, "IQ3_XXS", 256, 98},
    {GgmlType::kIQ1_S, "IQ1_S", 256, 50},
    {GgmlType::kIQ4_NL, "IQ4_NL", 32, 18},
    {GgmlType::kIQ3_S, "IQ3_S", 256, 110},
    {GgmlType::kIQ2_S, "IQ2_S", 256, 82},
    {GgmlType::kIQ4_XS, "IQ4_XS", 256, 136},
    {GgmlType::kI8, "I8", 1, 1},
    {GgmlType::kI16, "I16", 1, 2},
    {GgmlType::kI32, "I32", 1, 4},
    {GgmlType::kI64, "I64", 1, 8},
    {GgmlType::kF64, "F64", 1, 8},
    {GgmlType::kIQ1_M, "IQ1_M", 256, 56},
    {GgmlType::kBF16, "BF16", 1, 2, kComputes},
    {GgmlType::kTQ1_0, "TQ1_0", 256, 54},
    {GgmlType::kTQ2_0, "TQ2_0", 256, 66},
    {GgmlType::kMXFP4, "MXFP4", 32, 17},
};

}  // namespace

const GgmlTypeInfo* FindGgmlType(uint32_t id) {
  for (const GgmlTypeInfo& t : kTypes)
    if (static_cast<uint32_t>(t.type) == id) return &t;
  return nullptr;
}

const GgmlTypeInfo& GgmlTypeOf(GgmlType type) {
  const GgmlTypeInfo* t = FindGgmlType(static_cast<uint32_t>(type));
  WC_CHECK(t != nullptr, "ggml type ", static_cast<uint32_t>(type), " missing from the table");
  return *t;
}

const GgmlTypeInfo* FindGgmlTypeNamed(const std::string& name) {
  for (const GgmlTypeInfo& t : kTypes)
    if (name == t.name) return &t;
  return nullptr;
}

std::vector<float> DequantizeRows(const GgmlTypeInfo& type, const uint8_t* data, int64_t rows,
                                  int64_t row_len) {
  WC_CHECK(type.to_f32 != nullptr && row_len % type.block == 0, "dequantize ", type.name);
  std::vector<float> out(static_cast<size_t>(rows * row_len));
  const int64_t row_bytes = row_len / type.block * type.block_bytes;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r)
    type.to_f32(data + r * row_bytes, out.data() + r * row_len, row_len);
  return out;
}

std::string GgmlTypeName(uint32_t id) {
  const GgmlTypeInfo* t = FindGgmlType(id);
  return t != nullptr ? t->name : Cat("type ", id);
}

std::string GgmlTypeNames(GgmlUse use) {
  std::string s;
  for (const GgmlTypeInfo& t : kTypes)
    if (t.use == use) s += Cat(s.empty() ? "" : ", ", t.name);
  return s;
}

bool GgmlTypeRead(uint32_t id) {
  const GgmlTypeInfo* t = FindGgmlType(id);
  return t != nullptr && t->use != GgmlUse::kRefused;
}

}  // namespace wc
