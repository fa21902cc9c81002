// Layout of the TUI's text (app/tui/): word wrap of the scrollback, the status and title bars, and
// the side panel's core grid and KV line. The UTF-8 locale is set by tui_test.cpp's environment.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "app/tui/core_grid.h"
#include "app/tui/status_line.h"
#include "app/tui/text_width.h"
#include "app/tui/wrap.h"
#include "mesh/perf_model.h"
#include "serving/text_stream.h"
#include "util/error.h"

namespace wc::tui {
namespace {

using Lines = std::vector<std::string>;

const std::string kYiChar = "\xE4\xB8\x80", kEr = "\xE4\xBA\x8C", kSan = "\xE4\xB8\x89";
const std::string kReplacementChar = "\xEF\xBF\xBD";

// ---- word wrap ----

TEST(Wrap, BreaksAtSpaces) {
  EXPECT_EQ(WrapText("the quick brown fox", 10), (Lines{"the quick", "brown fox"}));
  EXPECT_EQ(WrapText("aaaa bbbbb", 10), (Lines{"aaaa bbbbb"}));             // exactly the width
  EXPECT_EQ(WrapText("a  b", 10), (Lines{"a  b"}));                         // inner spaces stay
  EXPECT_EQ(WrapText("aaaa   bbbbbbb   ", 8), (Lines{"aaaa", "bbbbbbb"}));  // break spaces go
  EXPECT_EQ(WrapText("    aaaa bbbb cccc", 10), (Lines{"    aaaa", "bbbb cccc"}));  // indentation
  EXPECT_EQ(WrapText("        abcdefgh", 10), (Lines{"  abcdefgh"}));  // indentation gives way
}

TEST(Wrap, HardBreaksLongWordsAtTheEdge) {
  EXPECT_EQ(WrapText("see https://example.com/x", 10),
            (Lines{"see https:", "//example.", "com/x"}));
  EXPECT_EQ(WrapText("abcdefghij", 3), (Lines{"abc", "def", "ghi", "j"}));
  EXPECT_EQ(WrapText("ab abcdefghij", 5), (Lines{"ab ab", "cdefg", "hij"}));
}

TEST(Wrap, KeepsExplicitNewlines) {
  EXPECT_EQ(WrapText("", 10), (Lines{""}));
  EXPECT_EQ(WrapText("a\n", 10), (Lines{"a", ""}));
  EXPECT_EQ(WrapText("a\n\nb", 10), (Lines{"a", "", "b"}));
  EXPECT_EQ(WrapText("one two\nthree", 5), (Lines{"one", "two", "three"}));
}

TEST(Wrap, WideAndCombiningCharacters) {
  const std::string five = kYiChar + kEr + kSan + kYiChar + kEr;  // 10 columns, no spaces
  EXPECT_EQ(WrapText(five, 5),
            (Lines{kYiChar + kEr, kSan + kYiChar, kEr}));  // never across the edge
  EXPECT_EQ(WrapText("a" + kYiChar, 1),
            (Lines{"a", kReplacementChar}));  // width 1: a wide character can't fit
  const std::string e_acute = "e\xCC\x81";
  EXPECT_EQ(WrapText(e_acute + e_acute + e_acute, 2), (Lines{e_acute + e_acute, e_acute}));
  EXPECT_EQ(WrapText("ab " + kYiChar + kEr, 5), (Lines{"ab", kYiChar + kEr}));
}

TEST(Wrap, TabsBecomeSpaces) {
  EXPECT_EQ(WrapText("a\tb", 20), (Lines{"a       b"}));
  EXPECT_EQ(WrapText("\tx", 20), (Lines{"        x"}));
  EXPECT_EQ(WrapText("ab\tc", 20, 4), (Lines{"ab  c"}));
  EXPECT_EQ(WrapText("aaaa\tbbbb", 8), (Lines{"aaaa", "bbbb"}));  // a tab is a break point
}

TEST(Wrap, OutputIsSafeToPrint) {
  EXPECT_EQ(WrapText("a\xFF"
                     "b\r\x07"
                     "c\x1B[2J",
                     20),
            (Lines{"a" + kReplacementChar + "bc[2J"}));
  EXPECT_EQ(WrapText("\xE4\xB8 x", 20),
            (Lines{kReplacementChar + kReplacementChar + " x"}));  // truncated sequence
}

TEST(Wrap, NoLineExceedsTheWidthAndNothingIsLost) {
  const std::string text = "Wormhole\tchips " + kYiChar + kEr + kSan +
                           " have 64 Tensix cores, e\xCC\x81 each with 1.5 MB of L1;\n\n"
                           "a-very-long-identifier-without-any-spaces-at-all " +
                           kYiChar + kYiChar + kYiChar + kYiChar + " \xF0\x9F\x98\x80 end  ";
  std::string visible;  // the text's non-space characters, in order
  for (const char c : text) {
    if (c != ' ' && c != '\t' && c != '\n') visible += c;
  }
  for (int width = 1; width <= 40; ++width) {
    const Lines lines = WrapText(text, width);
    std::string got;
    for (const std::string& line : lines) {
      EXPECT_LE(DisplayWidth(line), width) << "width " << width << ": '" << line << "'";
      for (const char c : line) {
        if (c != ' ') got += c;
      }
    }
    if (width >= 2) {
      EXPECT_EQ(got, visible) << "width " << width;
    }
  }
}

TEST(Wrap, StreamingEqualsWrappingTheWholeText) {
  const std::string text = "First paragraph of a reply, long enough to wrap.\n\nThen " + kYiChar +
                           kEr + kSan +
                           " and an emoji \xF0\x9F\x98\x80 split across chunks, a\ttab,"
                           " and a final line without a newline";
  for (int width : {7, 20, 33}) {
    WrappedText w(width);
    EXPECT_EQ(w.lines(), (Lines{""}));
    size_t pos = 0;
    for (size_t step = 1; pos < text.size(); step = step % 5 + 1) {  // chunks of 1..5 bytes
      const size_t n = std::min(step, text.size() - pos);
      w.Append(text.substr(pos, n));
      pos += n;
      // An unfinished UTF-8 character at the end is left out until it completes.
      const std::string so_far = text.substr(0, pos);
      const std::string complete = so_far.substr(0, Utf8CompletePrefix(so_far));
      ASSERT_EQ(w.lines(), WrapText(complete, width))
          << "width " << width << ", " << pos << " bytes";
    }
    EXPECT_EQ(w.text(), text);
    EXPECT_EQ(w.lines(), WrapText(text, width));
    w.SetWidth(width + 5);
    EXPECT_EQ(w.lines(), WrapText(text, width + 5));
    w.Clear();
    EXPECT_EQ(w.lines(), (Lines{""}));
  }
}

// ---- status and title bars ----

StatusFigures Generating() {
  StatusFigures f;
  f.state = ChatState::kGenerating;
  f.tokens_per_s = 23.44;
  f.ttft_ms = 412.3;
  f.ctx_tokens = 812;
  f.ctx_size = 2048;
  f.kv_fill = 0.396;
  f.kv_bytes = 13107200;  // 12.5 MiB
  f.mesh_us_per_tok = 85.24;
  f.seed = 42;
  return f;
}

TEST(StatusLine, DropsLowPriorityFieldsThenAbbreviates) {
  const StatusFigures f = Generating();
  const std::string full =
      "generating | 23.4 tok/s | ttft 412 ms | ctx 812/2048 | kv 40% 12.5 MiB | mesh 85.2 us/tok "
      "(tt-metal's graph) | seed 42";
  EXPECT_EQ(StatusLine(f, 200), full);
  EXPECT_EQ(StatusLine(f, 120), full);
  EXPECT_EQ(StatusLine(f, 118), full);
  EXPECT_EQ(StatusLine(f, 117),
            "generating | 23.4 tok/s | ttft 412 ms | ctx 812/2048 | kv 40% 12.5 MiB | seed 42");
  EXPECT_EQ(StatusLine(f, 80),
            "generating | 23.4 tok/s | ttft 412 ms | ctx 812/2048 | kv 40% 12.5 MiB | seed 42");
  EXPECT_EQ(StatusLine(f, 79), "generating | 23.4 tok/s | ttft 412 ms | ctx 812/2048 | seed 42");
  EXPECT_EQ(StatusLine(f, 60), "generating | 23.4 tok/s | ctx 812/2048 | seed 42");
  EXPECT_EQ(StatusLine(f, 40), "generating | 23.4 tok/s | seed 42");
  EXPECT_EQ(StatusLine(f, 30), "generating 23.4 tok/s seed 42");
  EXPECT_EQ(StatusLine(f, 22), "gen 23.4 tok/s seed 42");
  EXPECT_EQ(StatusLine(f, 20), "gen 23.4t/s seed 42");
  EXPECT_EQ(StatusLine(f, 16), "gen 23.4t/s s42");
  EXPECT_EQ(StatusLine(f, 10), "gen 23.4t/");
  EXPECT_EQ(StatusLine(f, 0), "");
}

// A layout tt-metal published no program for: the mesh figure says it is an estimate nothing
// measured checks.
TEST(StatusLine, AnEstimatedMeshFigureSaysSo) {
  StatusFigures f = Generating();
  f.mesh_estimated = true;
  EXPECT_EQ(StatusLine(f, 200),
            "generating | 23.4 tok/s | ttft 412 ms | ctx 812/2048 | kv 40% 12.5 MiB | mesh 85.2 "
            "us/tok (estimate, no device figure) | seed 42");
}

TEST(StatusLine, TokensPerStepFollowTheSpeedAndGoAfterKvBeforeTtft) {
  StatusFigures f = Generating();
  f.tokens_per_step = 2.44;
  EXPECT_EQ(StatusLine(f, 200),
            "generating | 23.4 tok/s | 2.4 tok/step | ttft 412 ms | ctx 812/2048 | kv 40% 12.5 "
            "MiB | mesh 85.2 us/tok (tt-metal's graph) | seed 42");
  EXPECT_EQ(StatusLine(f, 80),
            "generating | 23.4 tok/s | 2.4 tok/step | ttft 412 ms | ctx "
            "812/2048 | seed 42");
  EXPECT_EQ(StatusLine(f, 62), "generating | 23.4 tok/s | ttft 412 ms | ctx 812/2048 | seed 42");
  f.tokens_per_step = -1;  // not speculating: no field
  EXPECT_EQ(StatusLine(f, 200).find("tok/step"), std::string::npos);
}

TEST(StatusLine, APassingNoteFollowsTheSpeedAndGoesAfterTheOtherOptionalFields) {
  StatusFigures f = Generating();
  f.note = "copied the last reply (12 bytes) by OSC 52";
  EXPECT_EQ(StatusLine(f, 120),
            "generating | 23.4 tok/s | copied the last reply (12 bytes) by OSC 52 | ttft 412 ms | "
            "ctx 812/2048 | seed 42");
  EXPECT_EQ(StatusLine(f, 80),
            "generating | 23.4 tok/s | copied the last reply (12 bytes) by OSC 52 | seed 42");
  EXPECT_EQ(StatusLine(f, 40), "generating | 23.4 tok/s | seed 42");
}

TEST(StatusLine, NeverExceedsTheWidthAndKeepsTheRequiredFields) {
  StatusFigures f = Generating();
  for (int width = 0; width <= 200; ++width) {
    const std::string line = StatusLine(f, width);
    EXPECT_LE(DisplayWidth(line), width);
    if (width >= 40) {
      EXPECT_NE(line.find("generating"), std::string::npos) << line;
      EXPECT_NE(line.find("23.4 tok/s"), std::string::npos) << line;
      EXPECT_NE(line.find("seed 42"), std::string::npos) << line;
    }
  }
  // The largest seed and a 4-digit speed still fit 40 columns with all three fields.
  f.seed = 18446744073709551615ull;
  f.tokens_per_s = 1234.4;
  EXPECT_EQ(StatusLine(f, 80),
            "generating | 1234 tok/s | ttft 412 ms | ctx 812/2048 | seed 18446744073709551615");
  EXPECT_EQ(StatusLine(f, 40), "gen 1234 tok/s seed 18446744073709551615");
}

TEST(StatusLine, StatesAndUnknownFigures) {
  StatusFigures f;
  f.seed = 7;
  EXPECT_EQ(StatusLine(f, 80), "idle | - tok/s | seed 7");  // before the first reply
  f.ctx_tokens = 0;
  f.ctx_size = 2048;
  f.kv_bytes = 0;
  EXPECT_EQ(StatusLine(f, 80), "idle | - tok/s | ctx 0/2048 | kv 0 B | seed 7");
  f = Generating();
  f.state = ChatState::kPrefill;
  f.prefill_percent = 45;
  EXPECT_EQ(StatusLine(f, 40), "prefill 45% | 23.4 tok/s | seed 42");
  EXPECT_EQ(StatusLine(f, 21), "pf 45% 23.4t/s s42");
  f.state = ChatState::kIdle;  // the last reply's figures stay
  f.ttft_ms = 1534;
  f.tokens_per_s = 312.6;
  EXPECT_EQ(StatusLine(f, 79),
            "idle | 313 tok/s | ttft 1.53 s | ctx 812/2048 | kv 40% 12.5 MiB | seed 42");
}

TEST(StatusLine, ReusedPromptTokensShowAfterTheContextAndGoAfterTheKvCache) {
  StatusFigures f = Generating();
  f.state = ChatState::kIdle;
  f.reused_tokens = 448;
  EXPECT_EQ(StatusLine(f, 200),
            "idle | 23.4 tok/s | ttft 412 ms | ctx 812/2048 | reused 448 | kv 40% 12.5 MiB | mesh "
            "85.2 us/tok (tt-metal's graph) | seed 42");
  EXPECT_EQ(StatusLine(f, 87),
            "idle | 23.4 tok/s | ttft 412 ms | ctx 812/2048 | reused 448 | kv 40% 12.5 MiB | "
            "seed 42");
  const std::string no_kv = "idle | 23.4 tok/s | ttft 412 ms | ctx 812/2048 | reused 448 | seed 42";
  EXPECT_EQ(StatusLine(f, 86), no_kv);
  EXPECT_EQ(StatusLine(f, 80), no_kv);
  EXPECT_EQ(StatusLine(f, 69), no_kv);
  EXPECT_EQ(StatusLine(f, 68), "idle | 23.4 tok/s | ttft 412 ms | ctx 812/2048 | seed 42");
  for (int width = 0; width <= 200; ++width) EXPECT_LE(DisplayWidth(StatusLine(f, width)), width);
  f.reused_tokens = 0;  // nothing reused (or the cache off): no field
  EXPECT_EQ(StatusLine(f, 200).find("reused"), std::string::npos);
}

TEST(TitleLine, DropsFieldsThenCutsTheModelName) {
  TitleInfo t{"falcon-7b", 7217189760, "bf16", "int8", "n300"};
  EXPECT_EQ(TitleLine(t, 120), "wormchat | falcon-7b | 7.2B | bf16 | kv int8 | mesh n300");
  EXPECT_EQ(TitleLine(t, 55), "wormchat | falcon-7b | 7.2B | bf16 | kv int8");
  EXPECT_EQ(TitleLine(t, 40), "wormchat | falcon-7b | 7.2B | bf16");
  EXPECT_EQ(TitleLine(t, 20), "wormchat | falcon-7b");
  EXPECT_EQ(TitleLine(t, 19), "falcon-7b");
  EXPECT_EQ(TitleLine(t, 5), "falc\xE2\x80\xA6");
  EXPECT_EQ(TitleLine(TitleInfo{"default-model", -1, "", "", ""}, 80), "wormchat | default-model");
  for (int width = 0; width <= 80; ++width) EXPECT_LE(DisplayWidth(TitleLine(t, width)), width);
}

// A chat with a server that sends no KV or mesh figures: the state has no share while it waits,
// and what it cannot show stands where they would, dropped first when narrow.
TEST(StatusLine, AServerThatSendsNoFiguresSaysSoAndItGoesFirst) {
  StatusFigures f;
  f.state = ChatState::kPrefill;
  f.prefill_percent = -1;
  f.ctx_tokens = 40;
  f.seed = 7;
  f.unavailable = "kv, mesh: not from this server";
  EXPECT_EQ(StatusLine(f, 200),
            "prefill | - tok/s | ctx 40 | kv, mesh: not from this server | seed 7");
  EXPECT_EQ(StatusLine(f, 40), "prefill | - tok/s | ctx 40 | seed 7");
  EXPECT_EQ(StatusLine(f, 20), "pf - tok/s seed 7");
}

TEST(StatusLine, NumberFormats) {
  EXPECT_EQ(FormatCount(999), "999");
  EXPECT_EQ(FormatCount(1234), "1.2K");
  EXPECT_EQ(FormatCount(999999), "1.0M");
  EXPECT_EQ(FormatCount(10240000), "10M");
  EXPECT_EQ(FormatCount(1100048384), "1.1B");
  EXPECT_EQ(FormatCount(41800000000), "42B");
  EXPECT_EQ(FormatBytes(512), "512 B");
  EXPECT_EQ(FormatBytes(1536), "1.5 KiB");
  EXPECT_EQ(FormatBytes(13107200), "12.5 MiB");
  EXPECT_EQ(FormatBytes(128LL << 20), "128 MiB");
  EXPECT_EQ(FormatBytes(7680LL << 20), "7.5 GiB");
}

// ---- side panel ----

CoreGridFigures Pattern() {
  CoreGridFigures g;
  g.work.assign(64, 0);
  g.work[0] = 512;   // █
  g.work[1] = 384;   // ▓: up to three quarters
  g.work[2] = 256;   // ▒
  g.work[3] = 128;   // ░
  g.work[4] = 1;     // ░
  g.work[63] = 385;  // █: above three quarters
  return g;
}

TEST(CoreGrid, RendersShadesLabelsAndLegend) {
  const Lines wide = RenderCoreGrid(Pattern(), 26);
  const std::string idle_row = "\xC2\xB7\xC2\xB7\xC2\xB7\xC2\xB7\xC2\xB7\xC2\xB7\xC2\xB7\xC2\xB7";
  const std::string idle2 = idle_row + idle_row;  // 16 columns: 8 cores, 2 columns each
  Lines expected{"Tensix 8x8", "  0 1 2 3 4 5 6 7",
                 "0 \xE2\x96\x88\xE2\x96\x88\xE2\x96\x93\xE2\x96\x93\xE2\x96\x92\xE2\x96\x92"
                 "\xE2\x96\x91\xE2\x96\x91\xE2\x96\x91\xE2\x96\x91\xC2\xB7\xC2\xB7\xC2\xB7\xC2\xB7"
                 "\xC2\xB7\xC2\xB7"};
  for (int y = 1; y < 7; ++y) expected.push_back(std::to_string(y) + " " + idle2);
  expected.push_back("7 " + idle2.substr(0, 14 * 2) + "\xE2\x96\x88\xE2\x96\x88");
  expected.push_back(
      "\xC2\xB7 idle  \xE2\x96\x91 \xE2\x89\xA4"
      "128  \xE2\x96\x92 \xE2\x89\xA4"
      "256");
  expected.push_back(
      "\xE2\x96\x93 \xE2\x89\xA4"
      "384  \xE2\x96\x88 \xE2\x89\xA4"
      "512");
  expected.push_back("6/64 active, max 512 rows");
  EXPECT_EQ(wide, expected);

  const Lines narrow = RenderCoreGrid(Pattern(), 12);  // one column per core
  EXPECT_EQ(narrow[1], "  01234567");
  EXPECT_EQ(narrow[2],
            "0 \xE2\x96\x88\xE2\x96\x93\xE2\x96\x92\xE2\x96\x91\xE2\x96\x91\xC2\xB7"
            "\xC2\xB7\xC2\xB7");
  const Lines tiny = RenderCoreGrid(Pattern(), 8);  // no labels
  EXPECT_EQ(tiny[0], "Tensix \xE2\x80\xA6");
  EXPECT_EQ(tiny[1],
            "\xE2\x96\x88\xE2\x96\x93\xE2\x96\x92\xE2\x96\x91\xE2\x96\x91\xC2\xB7\xC2\xB7"
            "\xC2\xB7");
  for (int width = 1; width <= 40; ++width) {
    for (const std::string& line : RenderCoreGrid(Pattern(), width)) {
      EXPECT_LE(DisplayWidth(line), width) << "width " << width << ": '" << line << "'";
    }
  }
}

TEST(CoreGrid, DigitsAndIdleGrid) {
  const Lines digits = RenderCoreGrid(Pattern(), 30, GridGlyphs::kDigits);
  EXPECT_EQ(digits[2], "0 9977553311......");
  EXPECT_EQ(digits[9], "7 ..............77");  // 385 of 512: up to 7/9
  EXPECT_EQ(digits[10], ". idle  1-9 = ninths of 512");
  CoreGridFigures idle;
  idle.work.assign(64, 0);
  idle.caption = "layer 59";
  const Lines lines = RenderCoreGrid(idle, 20, GridGlyphs::kDigits);
  EXPECT_EQ(lines.front(), "Tensix 8x8  layer 59");
  EXPECT_EQ(lines[2], "0 ................");
  EXPECT_EQ(lines[lines.size() - 2], ". idle");
  EXPECT_EQ(lines.back(), "all idle");
  CoreGridFigures wrong;
  wrong.work.assign(10, 1);
  EXPECT_THROW(RenderCoreGrid(wrong, 20), InternalError);
}

TEST(CoreGrid, FromAFlashDecodeTrace) {
  // One user, one KV head, 2048 positions in chunks of 128: FlashDecode splits the work over 16
  // cores (the default max_cores_per_head_batch), one chunk of 128 K/V rows each. A planning run
  // suffices.
  const MeshSpec mesh = MeshPreset("n150");
  FlashDecodeConfig config;
  config.k_chunk_size = 128;
  const FlashDecodeEngine engine(mesh, config);
  const ShapeOnlyKV kv(/*row_bytes=*/128, /*head_dim=*/64);  // bf16
  const int32_t cur_pos[1] = {2047};
  DecodeAttentionOp op;
  op.bsz = 1;
  op.n_q_heads = 8;
  op.n_kv_heads = 1;
  op.head_dim = 64;
  op.kv_len = 2048;
  op.kv = &kv;
  op.cur_pos = cur_pos;
  const OpTrace trace = engine.Run(op, /*compute=*/false);
  const CoreGridFigures g = CoreGridFromTrace(trace, 0, mesh.chip, kv.RowBytes());
  ASSERT_EQ(g.work.size(), 64u);
  int64_t total = 0, active = 0;
  for (const int64_t w : g.work) {
    total += w;
    active += w > 0;
    if (w > 0) {
      EXPECT_EQ(w, 128);
    }
  }
  EXPECT_EQ(total, 2048);
  EXPECT_EQ(active, 16);
  EXPECT_EQ(g.unit, "K/V rows");
  EXPECT_EQ(RenderCoreGrid(g, 30).back(), "16/64 active, max 128 K/V rows");
}

TEST(CoreGrid, KVUsageLine) {
  const KVUsage u{12, 256, "bf16", 3LL << 20, 64LL << 20};
  EXPECT_EQ(KVUsageLine(u, 80), "kv 12/256 blocks | 244 free | bf16 | 3.0 MiB of 64.0 MiB");
  EXPECT_EQ(KVUsageLine(u, 40), "kv 12/256 blocks | 244 free | bf16");
  EXPECT_EQ(KVUsageLine(u, 30), "kv 12/256 blocks | 244 free");
  EXPECT_EQ(KVUsageLine(u, 20), "kv 12/256 blocks");
  EXPECT_EQ(KVUsageLine(u, 10), "kv 12/256\xE2\x80\xA6");
  const KVUsage contiguous{0, 0, "int8", 1536, -1};
  EXPECT_EQ(KVUsageLine(contiguous, 80), "kv contiguous | int8 | 1.5 KiB");
  for (int width = 0; width <= 80; ++width) EXPECT_LE(DisplayWidth(KVUsageLine(u, width)), width);
}

}  // namespace
}  // namespace wc::tui
