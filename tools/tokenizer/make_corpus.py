#!/usr/bin/python3
"""Write tests/fixtures/tokenizer/corpus.json: tricky strings for tokenizer tests.

The corpus is the input side of every hf_expected.json under
tests/fixtures/tokenizer/ (tools/tokenizer/hf_reference.mjs turns it into ids
with the official Hugging Face `tokenizers` library). Edit the CASES list
below, not the JSON, then regenerate the corpus and every hf_expected.json
(commands in tests/fixtures/tokenizer/README.md):

    python3 tools/tokenizer/make_corpus.py [--out tests/fixtures/tokenizer/corpus.json]
        [--out-falcon3 tests/fixtures/tokenizer/corpus_falcon3.json]

It also writes corpus_falcon3.json: the FALCON3_CASES below, extra inputs for
toy_falcon3 only (Falcon3-Instruct chat framing, newlines, tabs, CRLF, the
Llama-3 regex's contractions and digit triples, and the whole words toy_falcon3
holds for ignore_merges). toy_falcon3's hf_expected.json is corpus.json
followed by corpus_falcon3.json; the other fixtures use corpus.json alone, so
adding a case here changes no other expected file.

Format: a JSON array, one object per line, each either
    {"text": "...", "note": "..."}   a valid Unicode string, or
    {"hex": "c0af41", "note": "..."} raw bytes (usually invalid UTF-8, which
                                     JSON strings cannot hold).
Everything except printable ASCII and "visible" non-ASCII letters/symbols is
written as a \\u escape (controls, all whitespace/separators other than the
ASCII space, format characters such as U+200B/U+200D/U+FEFF, combining marks,
variation selectors, private use, conjoining jamo, and characters that NFC
would replace such as U+212B), so the file survives editors, git and
Unicode normalization byte-for-byte. The script checks that the file parses
back to exactly the same strings.
"""

import argparse
import json
import os
import unicodedata

FALCON_SPECIALS = [
    ">>TITLE<<", ">>ABSTRACT<<", ">>INTRODUCTION<<", ">>SUMMARY<<", ">>COMMENT<<", ">>ANSWER<<",
    ">>QUESTION<<", ">>DOMAIN<<", ">>PREFIX<<", ">>SUFFIX<<", ">>MIDDLE<<", "<|endoftext|>",
]

CASES = []


def t(text, note=""):
    CASES.append({"text": text, "note": note})


def h(hexstr, note):
    bytes.fromhex(hexstr)  # validate
    CASES.append({"hex": hexstr.lower(), "note": note})


# --- trivial / whitespace -------------------------------------------------
t("", "empty string")
t(" ", "single space")
t("  ", "two spaces")
t("   ", "three spaces")
t("a", "single letter")
t(" a", "leading space")
t("a ", "trailing space")
t("  a  ", "leading and trailing double spaces")
t("Hello world", "plain")
t(" Hello world ", "spaces around")
t("Hello  world", "double space inside")
t("Hello     world", "five spaces inside")
t("\t", "tab")
t("\t\t\tx", "tabs then letter")
t("a\tb", "tab between letters")
t("\n", "newline")
t("\n\n\n", "three newlines")
t("line1\nline2\n", "newline-terminated lines")
t("a\r\nb\r\n", "CRLF")
t("\r", "lone CR")
t(" \n \n", "space newline pairs")
t("x \n\ty  \t\n z", "mixed whitespace run")
t("\u00a0", "NBSP alone")
t("a\u00a0b", "NBSP between letters")
t("a \u00a0 b", "space NBSP space")
t("\u3000", "ideographic space alone")
t("日本\u3000語", "ideographic space in CJK")
t("a\u2028b", "LINE SEPARATOR")
t("a\u2029b", "PARAGRAPH SEPARATOR")
t("a\u0085b", "NEL U+0085")
t("a\u200bb", "zero-width space")
t("\u200b", "zero-width space alone")
t("\ufeffBOM at start", "byte order mark")
t("a\u000bb\u000cc", "VT and FF")
t("a\u2003b\u2009c\u202fd", "em space, thin space, narrow NBSP")
t(" \t\u00a0\u3000\n\u2028 x", "every kind of space in a row")
t("\u0000\u0001\u001f\u007f", "C0 controls and DEL")
t("    indented", "four-space indent")
t("        deeper", "eight-space indent")
t("\n\n  \n\t\t\n", "blank lines with indentation")
t(" " * 64, "64 spaces")
t(" " * 300 + "x", "300 spaces then x")
t("a" + "\n" * 50 + "b", "50 newlines")

# --- Latin, accents, combining marks ---------------------------------------
t("Äpfel", "umlaut")
t("café naïve façade", "precomposed accents")
t("cafe\u0301", "decomposed e + U+0301")
t("e\u0301\u0301\u0301", "stacked combining acutes")
t("a\u0308\u0323\u0304", "stacked diaeresis, dot below, macron")
t("Z\u0351\u036b\u0343\u036a\u0302\u036b\u033d\u034f\u0334\u0319\u0324\u031e\u0349\u035a", "zalgo")
t("1\u0301", "mark after digit")
t("!\u0301", "mark after punctuation")
t(" \u0301", "mark after space")
t("\u0301", "lone combining mark")
t("\u0301abc", "combining mark at start")
t("Cửa Việt", "Vietnamese")
t("Ångström ﬁ ﬂ \u212b", "ligatures and angstrom sign U+212B")
t("ß ẞ ǅ ǆ", "sharp s and titlecase digraph")
t("İstanbul ıi", "Turkish dotted/dotless i")
t("ÉCOLE École", "uppercase accents")
t("ñandú", "Spanish")
t("Œuvre", "OE ligature")

# --- other scripts -----------------------------------------------------------
t("нещо на Български", "Bulgarian")
t("Привет, мир!", "Russian")
t("Ελληνικά γράμματα", "Greek")
t("مرحبا بالعالم", "Arabic")
t("السَّلَامُ عَلَيْكُمْ", "Arabic with harakat")
t("שלום עולם", "Hebrew")
t("עִבְרִית", "Hebrew with niqqud")
t("नमस्ते दुनिया", "Devanagari")
t("क्षत्रिय", "Devanagari conjunct")
t("สวัสดีชาวโลก", "Thai")
t("កាន់តែពិសេសអាចខលចេញ", "Khmer")
t("你好，世界", "Chinese with fullwidth comma")
t("我想在apple工作1314151天～", "CJK mixed with Latin and digits")
t("안녕하세요 세계", "Hangul")
t("\u1100\u1161\u11a8", "Hangul conjoining jamo")
t("こんにちは カタカナ ｶﾀｶﾅ", "hiragana, katakana, halfwidth katakana")
t("日本語のテキスト、句読点。", "Japanese punctuation")
t("Hello мир 世界 عالم", "mixed scripts in one line")
t("ǈubljana ǋ", "titlecase letters")
t("𝐇𝐞𝐥𝐥𝐨 𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "mathematical alphanumerics (4-byte)")
t("𓀀𓁐 𐍈", "Egyptian hieroglyphs, Gothic")

# --- ByteLevel: UTF-8 continuation bytes that become Latin-1 digits/punct -----
t("в", "Cyrillic ve: D0 B2, 0xB2 -> superscript two")
t("вы", "D0 B2 D1 8B")
t("в 2", "ve then digit")
t("в2", "ve glued to digit")
t("Ѳ", "Cyrillic fita D1 B2")
t("ё", "Cyrillic yo D1 91")
t("гной", "D0 B3 / D0 BD / D0 BE / D0 B9: 3, 1/2, 3/4, 1")
t("мно́го", "D0 BC 1/4, plus combining acute")
t("Вот это в Москве", "Russian with several B2/BE bytes")
t("βγιμνξ", "Greek CE B2/B3/B9/BC/BD/BE")
t("ό ύ ώ", "Greek tonos CF 8C..")
t("زسعؽ", "Arabic D8 B2/B3/B9/BD")
t("¡¿§¶·«»", "Latin-1 punctuation as text")
t("x² + y³ = z¹", "superscript digits")
t("½ ¼ ¾ 1½", "vulgar fractions")
t("2²³", "digit then superscripts")
t("ⅫⅣ ① ⑳", "roman numerals, circled numbers")

# --- digits ------------------------------------------------------------------
for s in ["1", "12", "123", "1234", "12345", "1234567", "3333333333"]:
    t(s, "digit run")
t(" 1", "space digit")
t(" 123456", "space digit run")
t("3.14159", "decimal")
t("1,234,567.89", "thousands separators")
t("-42 +7 1e10 0x1F 0b1010", "signed, exponent, hex, binary")
t("abc123def", "digits inside letters")
t("v1.2.3-rc4", "version string")
t("2024-01-15T10:30:00Z", "ISO timestamp")
t("٠١٢٣٤٥٦٧٨٩", "Arabic-Indic digits")
t("०१२३४५६७८९", "Devanagari digits")
t("０１２３ ４５６７８", "fullwidth digits")
t("Price: $1,299.99 (≈€1200)", "money")
t("call 555-0123 or +1 (555) 012-3456", "phone numbers")
t("1 12 123 1234 12345 123456 1234567 12345678", "growing digit runs")

# --- punctuation and symbols -------------------------------------------------
t("!!!!!!", "exclamation run")
t("!" * 200, "200 exclamation marks")
t("?!?!...", "mixed punctuation")
t("$+<=>^~|`", "ASCII symbols Falcon's Punctuation step treats as punctuation")
t("a$b+c<d=e>f^g~h|i`j", "symbols between letters")
t("#%&*@\\/_{}[]();:,.\"'", "other ASCII punctuation")
t("------=======", "dash and equals runs")
t("''''''```````\"\"\"\"......!!!!!!??????", "quote runs")
t("«guillemets» „Anführung“ 「括弧」", "non-ASCII quotes")
t("—–‐ … • ‰ † ‡", "dashes, ellipsis, bullet, dagger")
t(" (", "space paren")
t("\n =", "newline space equals")
t("' era", "quote space word")
t("(((nested)))", "nested parens")
t("...", "ellipsis dots")
t("a.b,c;d:e", "punctuation between letters")
t("™®© ¢£¥€", "trademark and currency")
t("∀x∈ℝ: x²≥0 ∑∫√∞≠≤≥", "math symbols")
t("←↑→↓ ⇒ ⇔", "arrows")
t("♠♣♥♦ ★☆ ☃", "misc symbols")

# --- apostrophes and contractions -------------------------------------------
t("don't", "contraction")
t("I'M DON'T WON'T", "uppercase contractions")
t("it's isn't they're we've you'll he'd", "'s 't 're 've 'll 'd")
t("'s 't 're 've 'm 'll 'd", "bare contraction suffixes")
t("I've been 'told he's there, 'RE you sure? 'M not sure I'll make it, 'D you like some tea? We'Ve a'lL", "llama.cpp contraction case")
t("don’t it’s", "curly apostrophe U+2019")
t("O'Brien rock'n'roll", "apostrophes inside names")
t("''quoted''", "doubled apostrophes")
t("Hello, y'all! How are you 😁 ?", "y'all")

# --- emoji ------------------------------------------------------------------
t("🦙", "llama emoji")
t(" this is 🦙.cpp", "emoji inside text")
t("😀😃😄😁", "emoji run")
t("👍🏽 👋🏿", "skin tones")
t("👨‍👩‍👧‍👦", "family ZWJ sequence")
t("🏳️‍🌈 🏴‍☠️", "rainbow and pirate flags (VS16 + ZWJ)")
t("🇺🇸🇫🇷🇯🇵", "regional indicator flags")
t("🏴󠁧󠁢󠁳󠁣󠁴󠁿", "Scotland tag sequence")
t("😶‍🌫️", "face in clouds ZWJ")
t("❤️ ❤ ☺️", "VS16 vs text presentation")
t("1️⃣ #️⃣", "keycap sequences")
t("🚀 (normal) 😶‍🌫️ (multiple emojis concatenated) ✅ (only emoji that has its own token)", "llama.cpp emoji case")

# --- Falcon special tokens ----------------------------------------------------
for s in FALCON_SPECIALS:
    t(s, "Falcon special token alone")
t(" ".join(FALCON_SPECIALS), "all Falcon specials separated by spaces")
t("".join(FALCON_SPECIALS), "all Falcon specials adjacent")
t(">>QUESTION<<x", "special glued to a word")
t("a<|endoftext|>b", "special inside a word")
t("a <|endoftext|> b", "special between spaces")
t("<|endoftext|><|endoftext|><|endoftext|>", "repeated special")
t("<|endoftext|> <|endoftext|>", "repeated special with space")
t(" <|endoftext|>", "special after leading space")
t("<|endoftext|> ", "special before trailing space")
t("  <|endoftext|>  ", "special between double spaces")
t("\n<|endoftext|>\n", "special between newlines")
t(">>TITLE<<Hello>>ABSTRACT<< world", "specials inside prose")
t(">>TITLE<", "truncated special")
t(">>title<<", "lowercase special (not special)")
t("<|endoftext|", "unterminated special")
t("<|endoftext|>>>", "special followed by >>")
t(">>>>TITLE<<<<", "special surrounded by extra brackets")
t("<<|endoftext|>>", "special wrapped in brackets")
t("User: hi\nAssistant:", "Falcon-instruct framing")
t("User: What is 2+2?\nAssistant: 4\nUser: Thanks!\nAssistant:", "multi-turn chat framing")
t("<|endoftext|>User: hello\n\nAssistant: Hi there! How can I help?<|endoftext|>", "chat with EOS around")
t(">>QUESTION<<What is the capital of France?>>ANSWER<<Paris", "QA specials")
t(">>PREFIX<<def f(x):\n    >>SUFFIX<<\n    return y>>MIDDLE<<", "FIM specials")

# --- strings other test tokenizers treat specially ------------------------------
t("<s>", "BOS-like marker")
t("</s>", "EOS-like marker")
t("<s> hello </s>", "markers in text")
t("[MASK]", "mask token alone")
t("a [MASK] b", "mask between spaces")
t("a[MASK]b", "mask glued")
t("a  [MASK]  b", "mask between double spaces")
t("a\n[MASK]\nb", "mask between newlines")
t("[MASK][MASK]", "adjacent masks")
t("[mask]", "lowercase mask")
t("<tool>", "marker")
t(" <tool> ", "marker between spaces")
t("x<tool>y", "marker glued")
t("the cat", "phrase")
t("the cat sat on the mat", "repeated phrase candidates")
t("concatenate cathedral", "cat inside words")
t("cat", "single word")
t(" cat ", "single word spaced")
t("CAT Cat", "uppercase")
t("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n", "ChatML framing")
t("<|im_start|>   x   <|im_end|>", "ChatML markers with spaces inside")
t("a <|im_end|> b", "im_end between spaces")
t("a\n\n<|im_start|>\n\nb", "im_start between blank lines")
t("<|im_start|><|im_end|>", "adjacent ChatML markers")
t("this is spaced out", "added token with spaces in its content")
t("a spaced b", "spaced between letters")
t(" spaced ", "spaced alone with spaces")
t("\uff21\uff22 AB ab", "fullwidth AB vs ASCII")
t("Hello,world! helloworld worlds world", "single_word added tokens")
t("Hello world HELLO WORLD", "case of added tokens")
t("a::b :: c ::: d", "double colon")
t("x <sep> y", "sep between spaces")
t("x<sep>y", "sep glued")
t("x   <sep>   y", "sep between space runs")
t("x\t<sep>\ny", "sep between tab and newline")
t("the end", "end after space")
t("theend  end", "end glued and after two spaces")
t("End END", "end uppercase")
t("MiXeD mixed MIXED", "case-normalized added token")
t("CaseKept casekept CASEKEPT", "non-normalized added token")
t("new york New York new  york newyork", "added token with inner space")
t("\u2581the \u2581cat", "SentencePiece space marker in text")
t("a=b==c x-y--z a.b..c under_score__x", "Split delimiters")
t("wow!!! ! !!", "exclamation runs between words")
t("<unk>", "unk marker text")
t("<0x41>", "byte-token-looking text")
t("new_line\\n tab\\t", "escaped sequences as text")

# --- code ---------------------------------------------------------------------
t("#include <vector>\nint main() {\n    std::vector<int> v{1, 2, 3};\n    return v.size() > 2 ? 0 : 1;\n}\n", "C++")
t("template <typename T>\nauto f(T&& x) -> decltype(x) { return std::forward<T>(x); }", "C++ template")
t("def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n", "Python with indentation")
t("class A:\n\tdef __init__(self):\n\t\tself.x = {'a': [1, 2.5, None]}\n", "Python with tabs")
t("{\"key\": \"value\", \"n\": 123, \"arr\": [true, false, null], \"nested\": {\"a\": -1.5e-3}}", "JSON")
t("for f in *.txt; do echo \"$f\" | sed 's/a/b/g' >> out.log 2>&1; done && ls -la ~/", "shell")
t("<!DOCTYPE html>\n<html><body><p class=\"x\">Hi &amp; bye</p><br/></body></html>", "HTML")
t("SELECT * FROM users WHERE id = 42 AND name LIKE '%bob%';", "SQL")
t("x += 1; y -= 2; z *= 3; w /= 4; a <<= 1; b >>= 2; c != d; e == f; g <= h; i >= j;", "operators")
t("fn main() { let v: Vec<u8> = vec![0xFF; 3]; println!(\"{:?}\", v); }", "Rust")
t("```python\nprint('hi')\n```", "markdown code fence")
t("// comment\n/* block */ /** doc */", "comments")

# --- URLs, emails ----------------------------------------------------------------
t("https://example.com/path/to/page?query=1&x=y#frag", "URL")
t("http://localhost:8080/api/v1/items/123", "URL with port")
t("user.name+tag@example.co.uk", "email")
t("Contact: <admin@example.org>, www.example.org", "email in brackets")
t("C:\\Windows\\System32\\drivers\\etc\\hosts", "Windows path")
t("/usr/local/bin/python3.11", "Unix path")

# --- long / repeated ------------------------------------------------------------------
t("a" * 1000, "1000 a")
t("ab" * 300, "ab repeated")
t("Pneumonoultramicroscopicsilicovolcanoconiosis", "long English word")
t("Donaudampfschifffahrtsgesellschaftskapitänswitwe", "long German compound")
t("supercalifragilisticexpialidocious" * 5, "long concatenated word")
t("the " * 100, "repeated word with spaces")
t("\u00e9" * 100, "100 precomposed e-acute")
t("🦙" * 50, "50 llamas")
t("ab " * 20 + "\n" * 3 + "\t" * 3 + "x", "mixed repetition")
t(" discards", "space word")
t("ied 4 ½ months", "llama.cpp first case")
t("w048 7tuijk dsdfhu", "letters and digits")
t("Hello, world! How's it going? I'm fine — thanks. 3 apples, 12 pears, 123 plums & 1234 grapes.", "prose sentence")
t("The quick brown fox jumps over the lazy dog.", "pangram")
t("THE QUICK BROWN FOX", "all caps")

# --- invalid UTF-8 (lossy-decoded: each maximal invalid subpart -> U+FFFD) ------
h("80", "lone continuation byte")
h("41bf42", "continuation byte between ASCII")
h("8080808080", "run of continuation bytes")
h("c3", "truncated 2-byte sequence at end")
h("c328", "2-byte lead followed by ASCII")
h("e282", "truncated 3-byte sequence")
h("e28228", "truncated 3-byte sequence then ASCII")
h("f09f98", "truncated 4-byte sequence (emoji prefix)")
h("f09f9841", "truncated 4-byte sequence then ASCII")
h("c0af", "overlong 2-byte '/'")
h("e080af", "overlong 3-byte '/'")
h("f08080af", "overlong 4-byte")
h("eda080", "UTF-16 surrogate D800 encoded")
h("edbfbf", "surrogate DFFF encoded")
h("f4908080", "code point above U+10FFFF")
h("f5", "byte F5")
h("ff", "byte FF")
h("feff", "bytes FE FF")
h("f8888080", "5-byte form")
h("48656c6c6fff576f726c64", "Hello<FF>World")
h("d0b2d0", "valid Cyrillic then truncated lead")
h("e4bda0e5a5bde4", "valid CJK then truncated")
h("20c3a920ff20c3a920", "space e-acute space FF space e-acute space")
h("3c7c656e646f66746578747cff3e", "<|endoftext|<FF>> broken special")
h("3c7c656e646f66746578747c3e80", "special token then lone continuation")


# --- toy_falcon3 only (corpus_falcon3.json) --------------------------------------
FALCON3_CASES = []


def f3(text, note):
    FALCON3_CASES.append({"text": text, "note": note})


EOS3 = "<|endoftext|>"
# Falcon3-Instruct's chat template as rendered by HF (docs/falcon3/README.md section 2.1).
f3("<|system|>\nYou are helpful.\n<|user|>\nHi there!\n<|assistant|>\nHello" + EOS3 + "\n<|user|>\nWhat is 12345 + 678?\n<|assistant|>\n",
   "Falcon3 chat: system, two user turns, generation prompt")
f3("<|user|>\nHow many hours in one day?\n<|assistant|>\n", "Falcon3 chat: one user turn, generation prompt")
f3("<|system|>\nYou are a helpful friendly assistant Falcon3 from TII, try to follow instructions as much as possible.\n"
   "<|user|>\nWrite a function.\n<|assistant|>\ndef f(x):\n\tif x:\n\t\treturn 1\n\treturn 0" + EOS3,
   "Falcon3 chat: last assistant turn with tabs, ends in EOS")
f3("<|assistant|>\n\nHello there!\n\n" + EOS3 + "\n", "assistant turn with blank lines")
f3("<|user|>\n  indented question?  \n<|assistant|>\n", "user content with leading and trailing spaces")
f3("<|user|>\r\nHi\r\n<|assistant|>\r\n", "chat framing with CRLF")
f3("<|system|><|user|><|assistant|>", "role markers adjacent (plain text in Falcon3)")
f3("<|user|>", "role marker alone")
f3("< |user| >", "role marker with spaces")
f3(EOS3 + "\n<|user|>\n", "EOS then the next turn")
f3("Hello" + EOS3 + EOS3, "EOS twice")
f3(">>IP_ADDRESS<<>>IP_ADDRESS_3<<>>PASSWORD<<>>KEY<<", "Falcon3 specials adjacent")
f3("<|startoftext|>Hello" + EOS3, "startoftext and EOS")
f3("<|pad|><|pad|>x", "pad token")
f3(">>UNUSED_27<< >>UNUSED_99<<", "an unused placeholder and one that does not exist")
f3(">>IP_ADDRESS_1<", "truncated special")
# newline and tab: added tokens in byte-level form, also typed literally
f3("a\nb\tc", "newline and tab between letters")
f3("\n\t\n\t", "newline tab pairs")
f3("a\n\nb", "blank line")
f3("a\n\n\nb", "two blank lines (a whole-word token)")
f3("a\n\n\n\nb", "three blank lines")
f3("\n\n\n\n\n\n\n", "seven newlines")
f3("x\t\ty", "two tabs then a letter")
f3("\t\t x", "two tabs then a space (a whole-word token)")
f3("\t\t", "two tabs alone")
f3("\t \t\n", "tab space tab newline")
f3("line1\r\nline2\r\n\r\n", "CRLF and a blank CRLF line")
f3(" \r\n ", "space CRLF space")
f3("x\r\r\ny\n\rz", "CR runs")
f3("end.\r\n", "punctuation then CRLF")
f3("Hi!\n\n", "punctuation then blank line")
f3("?\n \n", "punctuation, newline, space, newline")
f3("a \n\n b", "spaces around blank line")
f3("  \n  x", "indent after newline")
f3("x\u00a0\ny", "NBSP before newline")
f3("x\u2028\u2029y", "line and paragraph separators")
f3("a\u0085b\n", "NEL and newline")
f3("a\u000bb\u000cc\n", "VT and FF before newline")
f3("\u010a\u0109", "the byte-level newline and tab characters typed literally")
f3("a\u010ab \u0109c", "literal byte-level newline and tab between letters")
f3("\u0120\u010a", "literal byte-level space and newline")
f3("\u010a\n\u0109\t", "literal byte-level forms next to the real characters")
# the Llama-3 regex
f3("12345 123456", "digit runs: triples")
f3("1234567890", "ten digits")
f3("a1b22c333d4444", "digits between letters")
f3(" 42 3.14159 2024-12-17", "numbers after spaces")
f3("\u0661\u0662\u0663\u0664", "Arabic-Indic digits")
f3("\u00bd\u2153 \u2460\u2461\u2462\u2463", "fractions and circled numbers (\\p{N})")
f3("I'M", "uppercase contraction")
f3("we'LL", "mixed-case contraction (a whole-word token)")
f3("you'Re they'VE she'D IT'S don'T", "mixed-case contractions")
f3("'S'T'RE'VE'M'LL'D", "bare uppercase contractions")
f3("'ll'll 'LLama", "contraction followed by letters")
f3("it'\u017f x'\u017fa", "long s after an apostrophe: (?i) and U+017F")
f3("'\u212a '\u0130 '\u0131", "Kelvin sign and Turkish i after an apostrophe")
f3("don\u2019t", "curly apostrophe")
f3("$hello @world #tag", "symbol glued to a word")
f3("\"quoted\" (paren) [bracket]", "punctuation around words")
f3("a+b=c", "operators between letters")
f3("...\n\n", "punctuation run then newlines")
f3("|>\n\n", "role-marker tail then newlines")
# whole words toy_falcon3's merges do not build (ignore_merges)
f3("Hello, I am a helpful assistant.", "whole-word tokens in a sentence")
f3(" Falcon  Falcon\tFalcon\nFalcon", "a whole-word token after different whitespace")
f3("HelloHello Hello", "a whole-word token repeated and glued")
f3(" helpfully unhelpful", "words containing a whole-word token")
f3(" instructions instruction", "a whole-word token and its prefix")
# unicode and trailing space
f3("Caf\u00e9 na\u00efve \u041f\u0440\u0438\u0432\u0435\u0442 \u65e5\u672c\u8a9e \U0001f985", "mixed scripts and an emoji")
f3("\u00c0\u00c9\u00ce\u00d5\u00dc", "uppercase accents")
f3("Hello   ", "trailing spaces")
f3("Hello \n", "space before newline")
f3("x \t\n", "space tab newline")
f3("   \n", "spaces then newline")
f3("a  ", "two trailing spaces")
f3("a \u3000", "space and ideographic space at the end")


def needs_escape(ch):
    if ch == " ":
        return False
    if " " < ch < "\x7f":
        return False
    if unicodedata.normalize("NFC", ch) != ch or 0x1100 <= ord(ch) <= 0x11FF:
        return True  # would change if an editor NFC-normalized the file
    cat = unicodedata.category(ch)
    return cat[0] in "CZM" or ord(ch) < 0x20 or ord(ch) == 0x7f


def dump_str(s):
    out = ['"']
    for ch in s:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif needs_escape(ch):
            cp = ord(ch)
            if cp > 0xFFFF:
                cp -= 0x10000
                out.append("\\u%04x\\u%04x" % (0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF)))
            else:
                out.append("\\u%04x" % cp)
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def dump(cases):
    lines = []
    for c in cases:
        parts = []
        for k in ("text", "hex", "note"):
            if k in c:
                parts.append(f'"{k}": {dump_str(c[k])}')
        lines.append("{" + ", ".join(parts) + "}")
    return "[\n" + ",\n".join(lines) + "\n]\n"


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    default_out = os.path.join(here, "..", "..", "tests", "fixtures", "tokenizer", "corpus.json")
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.normpath(default_out))
    default_falcon3 = os.path.join(os.path.dirname(default_out), "corpus_falcon3.json")
    ap.add_argument("--out-falcon3", default=os.path.normpath(default_falcon3))
    args = ap.parse_args()

    keys = [c.get("text", "hex:" + c.get("hex", "")) for c in CASES + FALCON3_CASES]
    dups = {k for k in keys if keys.count(k) > 1}
    if dups:
        raise SystemExit(f"duplicate cases: {sorted(dups)!r}")
    for out, cases in ((args.out, CASES), (args.out_falcon3, FALCON3_CASES)):
        text = dump(cases)
        if json.loads(text) != cases:
            raise SystemExit("corpus does not round-trip through JSON")
        with open(out, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
        n_hex = sum(1 for c in cases if "hex" in c)
        print(f"wrote {out}: {len(cases)} cases ({len(cases) - n_hex} text, {n_hex} hex)")


if __name__ == "__main__":
    main()
