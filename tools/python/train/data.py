"""Corpus building: WordNet 3.0 + fortunes + greetings -> chat conversations.

Everything comes from Debian packages already on disk (nothing is fetched):
  wordnet-base  /usr/share/wordnet/{data,index}.{noun,verb,adj,adv}, cntlist.rev
  fortunes      /usr/share/games/fortunes/<file>   (only the default, non-offensive set)

Output (build_corpus): two lists of conversations (train, val); a conversation is a
list of (question, answer) turns. The split is by a seeded SHA-1 of the lemma (or of
the fortune text), so it is reproducible and a held-out lemma never appears in train.

Answers are deterministic per (lemma, part of speech): every question template for
the same word gets the same answer, which is what a small model can learn.
"""

import hashlib
import math
import os
import random
import re
from collections import defaultdict

WORDNET_DIR = "/usr/share/wordnet"
FORTUNE_DIR = "/usr/share/games/fortunes"

POS_FILES = {"n": "noun", "v": "verb", "a": "adj", "r": "adv"}
# fortune files with plain, mostly harmless English prose (offensive set is a separate
# package, fortunes-off, and is never read; ascii-art, code, jargon and joke
# "definitions" that would clash with real definitions are skipped too).
FORTUNE_FILES = ("fortunes", "literature", "wisdom", "people", "platitudes", "humorists",
                 "education", "science", "work", "food", "kids", "pets", "love",
                 "miscellaneous", "paradoxum", "goedel", "magic", "medicine", "sports",
                 "computers")

DETERMINERS = {"a", "an", "any", "someone", "somebody", "one", "something", "anything",
               "either", "each", "every", "anyone", "everything", "everyone"}
IRREGULAR_PLURALS = {"people", "men", "women", "children", "teeth", "feet", "mice", "geese",
                     "oxen", "data", "criteria", "phenomena", "fungi", "larvae", "bacteria"}
HEAD_STOP = {"of", "that", "which", "who", "whose", "with", "in", "for", "from", "by", "on",
             "at", "to", "as", "or", "and", "used", "made", "having", "found", "usually",
             "especially", "typically", "where", "when", "resembling", "native"}
ABSTRACT_THE = re.compile(
    r"the (act|acts|quality|state|condition|process|property|activity|practice|art|science|"
    r"study|branch|ability|capacity|power|feeling|fact|trait|amount|degree|action|result|use|"
    r"occupation|status|manner|way|characteristic|sum|totality|whole|field|discipline|"
    r"doctrine|theory|belief|principle|means|methods?|making|time|period|extent|"
    r"capability|practices|events?)\b")
# lexicographer files whose nouns are mostly uncountable: attribute, feeling, phenomenon,
# process, state, substance
MASS_LEXFILES = {7, 12, 19, 22, 26, 27}
MASS_SUFFIX = ("ness", "ity", "ism", "hood", "ship", "ing", "ics")
NO_ARTICLE_START = {"that", "what", "whatever", "how", "something", "those", "these", "all",
                    "its", "his", "her", "their", "your", "my", "our", "much", "more",
                    "most", "no", "several", "two", "three", "both", "many", "various"}
DROP_CONTEXT = ("usually", "often", "sometimes", "especially", "informal", "formal",
                "plural", "singular", "chiefly", "archaic", "obsolete", "slang", "used",
                "followed", "rare", "colloquial", "literary", "figurative", "now", "also")


def stable_hash(text, seed):
    """Deterministic 64-bit hash of (seed, text) (Python's hash() is salted)."""
    return int.from_bytes(hashlib.sha1(f"{seed}:{text}".encode()).digest()[:8], "big")


def is_val(key, seed, val_percent):
    return stable_hash(key, seed) % 10000 < int(round(val_percent * 100))


# ------------------------------------------------------------------ WordNet parsing

class Synset:
    __slots__ = ("offset", "pos", "lexfile", "words", "defs", "examples", "hypernyms",
                 "antonyms")

    def __init__(self, offset, pos, lexfile, words, defs, examples, hypernyms, antonyms):
        self.offset, self.pos, self.lexfile = offset, pos, lexfile
        self.words = words            # surface forms, '_' -> ' ', adj markers removed
        self.defs = defs              # definition segments of the gloss
        self.examples = examples      # quoted example sentences of the gloss
        self.hypernyms = hypernyms    # [(pos, offset)]
        self.antonyms = antonyms      # {source word index (1-based): [(pos, offset, target idx)]}


def parse_gloss(gloss):
    """'def one; def two; "ex one"; "ex two"' -> (["def one", "def two"], ["ex one", "ex two"])."""
    examples = [e.strip() for e in re.findall(r'"([^"]+)"', gloss)]
    rest = re.sub(r'"[^"]*"[^;]*', "", gloss)          # drop examples (+ trailing attributions)
    defs = [d.strip(" ,.:") for d in rest.split(";")]
    defs = [d.replace("`", "'").replace("''", "'") for d in defs if d]
    return defs, examples


def load_synsets(wn_dir):
    """{(pos, offset): Synset} for all four data files (adj satellites 's' -> 'a')."""
    synsets = {}
    for pos, name in POS_FILES.items():
        with open(os.path.join(wn_dir, "data." + name), encoding="latin-1") as f:
            for line in f:
                if line.startswith("  "):            # licence header
                    continue
                head, _, gloss = line.partition(" | ")
                f_ = head.split()
                offset, lexfile, n_words = f_[0], int(f_[1]), int(f_[3], 16)
                words = [re.sub(r"\((a|p|ip)\)$", "", w).replace("_", " ")
                         for w in f_[4:4 + 2 * n_words:2]]
                i = 4 + 2 * n_words
                n_ptr = int(f_[i])
                hypernyms, antonyms = [], defaultdict(list)
                for j in range(n_ptr):
                    sym, off, ppos, st = f_[i + 1 + 4 * j:i + 5 + 4 * j]
                    ppos = "a" if ppos == "s" else ppos
                    if sym in ("@", "@i"):
                        hypernyms.append((ppos, off))
                    elif sym == "!":
                        antonyms[int(st[:2], 16)].append((ppos, off, int(st[2:], 16)))
                defs, examples = parse_gloss(gloss.strip())
                synsets[(pos, offset)] = Synset(offset, pos, lexfile, words, defs, examples,
                                                hypernyms, dict(antonyms))
    return synsets


def load_index(wn_dir):
    """{pos: {lemma: [offsets in WordNet sense order (most frequent first)]}}."""
    index = {}
    for pos, name in POS_FILES.items():
        entries = {}
        with open(os.path.join(wn_dir, "index." + name), encoding="latin-1") as f:
            for line in f:
                if line.startswith("  "):
                    continue
                f_ = line.split()
                synset_cnt, p_cnt = int(f_[2]), int(f_[3])
                entries[f_[0]] = f_[6 + p_cnt:6 + p_cnt + synset_cnt]
        index[pos] = entries
    return index


def load_counts(wn_dir):
    """{(lemma, pos): SemCor tag count summed over senses} from cntlist.rev."""
    counts = defaultdict(int)
    with open(os.path.join(wn_dir, "cntlist.rev"), encoding="latin-1") as f:
        for line in f:
            key, _, cnt = line.split()
            lemma, rest = key.split("%")
            pos = {"1": "n", "2": "v", "3": "a", "4": "r", "5": "a"}[rest[0]]
            counts[(lemma, pos)] += int(cnt)
    return counts


# ------------------------------------------------------------------ English helpers

def article(phrase):
    w = phrase.lower()
    if re.match(r"(hour|honest|honor|honour|heir)", w):
        return "an"
    if re.match(r"(eu|uni|use|usu|uti|ura|uro|ure|one|once|ubiq|ukr|ufo|u\b)", w):
        return "a"
    return "an" if w[:1] in "aeiou" else "a"


def cap(s):
    return s[:1].upper() + s[1:]


def sentence(s):
    s = s.strip()
    return s if s[-1:] in ".!?" else s + "."


def split_context(d):
    """'(law) a wrong ...' -> ('In law, ', 'a wrong ...'); '(of sound) loud' ->
    ('When describing sound, ', 'loud'); usage notes like '(usually plural)' are dropped."""
    m = re.match(r"^\(([^()]*)\)\s*(.*)$", d)
    if not m or not m.group(2):
        return "", d
    ctx, rest = m.group(1).strip(), m.group(2)
    if ctx.startswith("of "):
        return f"When describing {ctx[3:]}, ", rest
    if ctx.lower().startswith(DROP_CONTEXT) or len(ctx.split()) > 3 or "'" in ctx:
        return "", rest
    return f"In {ctx}, ", rest


class Morph:
    """Tiny plural detector backed by the WordNet noun index."""

    def __init__(self, noun_index):
        self.nouns = set(noun_index)

    def is_plural(self, word):
        w = word.lower()
        if w in IRREGULAR_PLURALS:
            return True
        if w in self.nouns or not w.endswith("s") or w.endswith("ss"):
            return False
        return (w[:-1] in self.nouns or (w.endswith("es") and w[:-2] in self.nouns)
                or (w.endswith("ies") and w[:-3] + "y" in self.nouns))

    def head_is_plural(self, d):
        """Guess the head noun of a bare noun phrase: last word before a stop word."""
        words = re.findall(r"[A-Za-z-]+", re.sub(r"\([^()]*\)", " ", d))[:5]
        head = None
        for w in words:
            if w.lower() in HEAD_STOP or (head and "-" not in w and w.endswith(("ing", "ed"))):
                break
            head = w
        return head is not None and self.is_plural(head)


# ------------------------------------------------------------------ answers

def pick_definition(defs):
    """First definition segment, plus the second one if the first is very short."""
    d = defs[0]
    if len(d) < 25 and len(defs) > 1:
        d = f"{d}; {defs[1]}"
    return d


def pick_example(examples, lemma):
    """First short example that uses the lemma (every word's stem must appear)."""
    keys = [w[:max(3, len(w) - 2)] for w in lemma.lower().split()]
    for e in examples:
        if len(e) <= 140 and all(k in e.lower() for k in keys):
            return e
    return None


def with_example(ans, examples, lemma):
    ex = pick_example(examples, lemma)
    if ex:
        ans += f' For example: "{sentence(cap(ex))}"'
    return ans


def noun_answer(form, ss, morph):
    """-> (answer, kind) with kind in {'count', 'mass', 'proper', 'person'}."""
    ctx, d = split_context(pick_definition(ss.defs))
    first = d.split()[0].lower() if d.split() else ""
    if form[:1].isupper():                                  # proper noun
        person = ss.lexfile == 18
        dead = person and re.search(r"\(\d{2,4}\s*-\s*\d{2,4}\)|\bBC\)|\(died",
                                    " ".join(ss.defs))
        verb = "was" if dead else "is"
        if first in DETERMINERS or first == "the" or morph.head_is_plural(d):
            body = d
        else:
            body = f"{article(d)} {d}"
        return sentence(f"{ctx}{form} {verb} {body}"), ("person" if person else "proper")
    verb = "is"
    mass = (ss.lexfile in MASS_LEXFILES
            or any(form.endswith(x) and len(form) > len(x) + 3 for x in MASS_SUFFIX)
            or (first == "the" and ABSTRACT_THE.match(d)))
    if morph.is_plural(form.split()[-1]):                   # "armed forces", "clothes"
        subj, kind, verb = form, "plural", "are"
    elif mass:
        subj, kind = form, "mass"
    else:
        subj, kind = f"{article(form)} {form}", "count"
    if first in DETERMINERS or first in NO_ARTICLE_START or first == "the" or kind == "plural":
        body = d
    elif morph.head_is_plural(d):
        body = d if kind == "mass" else f"one of the {d}"
    elif first.endswith("ing"):
        body = d
    else:
        body = f"{article(d)} {d}"
    if not ctx:
        subj = cap(subj)
    return sentence(f"{ctx}{subj} {verb} {body}"), kind


def verb_answer(form, ss):
    ctx, d = split_context(pick_definition(ss.defs))
    return sentence(f"{ctx}{'t' if ctx else 'T'}o {form} is to {d}")


def modifier_answer(form, ss):
    ctx, d = split_context(pick_definition(ss.defs))
    return sentence(f"{ctx}{form if ctx else cap(form)} means {d}")


# ------------------------------------------------------------------ questions

GENERIC_Q = ["What does {w} mean?", "Define {w}.", "What is the meaning of the word {w}?",
             "What is the definition of {w}?", "What does the word {w} mean?",
             "Define the word {w}.", "Tell me what {w} means.", "What is the meaning of {w}?"]
COUNT_Q = ["What is {a} {w}?", "What's {a} {w}?", "Tell me what {a} {w} is.",
           "Can you tell me what {a} {w} is?", "Explain what {a} {w} is."]
MASS_Q = ["What is {w}?", "What's {w}?", "Explain what {w} is.", "Tell me about {w}."]
PLURAL_Q = ["What are {w}?", "Tell me what {w} are.", "Explain what {w} are."]
PROPER_Q = ["What is {w}?", "Tell me about {w}.", "What do you know about {w}?"]
PERSON_Q = ["Who was {w}?", "Who is {w}?", "Tell me about {w}."]
VERB_Q = ["What does it mean to {w}?", "What does the verb {w} mean?", "Define the verb {w}.",
          "What is the meaning of the verb {w}?", "Explain what it means to {w}."]
ADJ_Q = ["What does the adjective {w} mean?", "Define the adjective {w}.",
         "What does it mean to be {w}?", "What is the meaning of the adjective {w}?"]
ADV_Q = ["What does the adverb {w} mean?", "Define the adverb {w}."]


def noisy(q, rng):
    """Occasional casual typing: lower-case first letter and/or no final punctuation."""
    r = rng.random()
    if r < 0.08:
        q = q[:1].lower() + q[1:]
    elif r < 0.14:
        q = q.rstrip("?.")
    elif r < 0.18:
        q = (q[:1].lower() + q[1:]).rstrip("?.")
    return q


def n_variants(count, tier_a):
    """How many differently phrased questions a word gets: common words more."""
    if not tier_a:
        return 1
    return min(4, 1 + int(math.log2(1 + count)))


def wordnet_examples(cfg, rng):
    """-> list of (key, question, answer, source) over selected WordNet lemmas.

    Tier A: (lemma, pos) pairs with a SemCor tag count >= 1 (common words), several
            question phrasings each plus synonym / antonym / hypernym questions.
    Tier B: a seeded sample of other single-word lemmas, one question each.
    The answer always describes the lemma's most frequent sense (index order).
    """
    synsets = load_synsets(cfg.wordnet_dir)
    index = load_index(cfg.wordnet_dir)
    counts = load_counts(cfg.wordnet_dir)
    morph = Morph(index["n"])

    # primary part of speech of each lemma (for "Define X." style questions)
    best_pos = {}
    for pos in "nvar":
        for lemma in index[pos]:
            c = counts.get((lemma, pos), 0)
            if lemma not in best_pos or c > best_pos[lemma][0]:
                best_pos[lemma] = (c, pos)

    out = []
    tier_b = []
    for pos in "nvar":
        for lemma, offsets in sorted(index[pos].items()):
            if not re.fullmatch(r"[a-z][a-z'_.-]*[a-z.]", lemma):
                continue
            count = counts.get((lemma, pos), 0)
            if count == 0:
                if "_" not in lemma and "-" not in lemma and "." not in lemma and len(lemma) > 2:
                    tier_b.append((lemma, pos))
                continue
            out.extend(lemma_examples(lemma, pos, synsets, index, counts, best_pos, morph,
                                      True, rng))
    keep = sorted(tier_b, key=lambda lp: stable_hash(lp[0] + lp[1], cfg.seed))[:cfg.tier_b]
    for lemma, pos in sorted(keep):
        out.extend(lemma_examples(lemma, pos, synsets, index, counts, best_pos, morph, False,
                                  rng))
    return out


def lemma_examples(lemma, pos, synsets, index, counts, best_pos, morph, tier_a, rng):
    ss = synsets[(pos, index[pos][lemma][0])]
    if not ss.defs:
        return []
    form = next((w for w in ss.words if w.lower() == lemma.replace("_", " ")),
                lemma.replace("_", " "))
    if pos == "n":
        answer, kind = noun_answer(form, ss, morph)
        pool = {"count": COUNT_Q, "mass": MASS_Q, "plural": PLURAL_Q, "proper": PROPER_Q,
                "person": PERSON_Q}[kind]
    elif pos == "v":
        answer, kind, pool = verb_answer(form, ss), "verb", VERB_Q
    else:
        answer, kind = modifier_answer(form, ss), "mod"
        pool = ADJ_Q if pos == "a" else ADV_Q
    answer = with_example(answer, ss.examples, form)
    primary = best_pos[lemma][1] == pos
    if primary and kind not in ("proper", "person"):
        pool = pool + GENERIC_Q
    k = n_variants(counts.get((lemma, pos), 0), tier_a)
    art = article(form)
    qs = rng.sample(pool, min(k, len(pool)))
    src = "wordnet" if tier_a else "wordnet-rare"
    out = [(lemma, noisy(q.format(w=form, a=art), rng), answer, src) for q in qs]
    if not (tier_a and primary):
        return out

    # ---- extra relations (common words only)
    others = [w for w in ss.words if w.lower() != form.lower()]
    if others:
        syn = min(others, key=lambda w: (" " in w, len(w)))
        out.append((lemma, noisy(rng.choice(["What is another word for {w}?",
                                             "What is a synonym of {w}?",
                                             "Give me a synonym for {w}."]).format(w=form), rng),
                    f"Another word for {form} is {syn}.", "wordnet-rel"))
    widx = next((i + 1 for i, w in enumerate(ss.words) if w.lower() == form.lower()), None)
    for apos, aoff, tidx in ss.antonyms.get(widx, [])[:1]:
        tgt = synsets.get((apos, aoff))
        if tgt and 0 < tidx <= len(tgt.words):
            out.append((lemma, noisy(rng.choice(["What is the opposite of {w}?",
                                                 "What is an antonym of {w}?"]).format(w=form),
                                     rng),
                        f"The opposite of {form} is {tgt.words[tidx - 1]}.", "wordnet-rel"))
    if pos == "n" and kind == "count" and ss.hypernyms:
        hyp = synsets.get(ss.hypernyms[0])
        if hyp:
            h = hyp.words[0]
            out.append((lemma, noisy(f"What kind of thing is {art} {form}?", rng),
                        f"{cap(art)} {form} is a kind of {h}.", "wordnet-rel"))
    return out


# ------------------------------------------------------------------ fortunes

FORTUNE_Q = ["Tell me a saying.", "Tell me a fortune.", "Give me a quote.",
             "Say something wise.", "Tell me something interesting.", "Give me a fortune."]


def clean_fortune(text):
    """Flatten a fortune to one line; None if it is art, too long or odd."""
    lines = [l.strip() for l in text.strip().split("\n") if l.strip()]
    if not lines:
        return None
    out = []
    for l in lines:
        if l.startswith("--") and out:
            out.append("--" + " " + l.lstrip("- ").strip())
        else:
            out.append(l)
    s = re.sub(r"\s+", " ", " ".join(out)).strip()
    letters = sum(ch.isalpha() or ch == " " for ch in s)
    if len(s) < 20 or letters < 0.85 * len(s) or not s.isprintable():
        return None
    if re.search(r"[|\\_^~<>{}]|\t|Q:|A:", s):
        return None
    return s


def fortune_examples(cfg, rng):
    """-> list of (key, question, answer, 'fortunes'), at most cfg.max_fortunes, seeded."""
    items = []
    for name in FORTUNE_FILES:
        path = os.path.join(cfg.fortune_dir, name)
        if not os.path.exists(path):
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            for chunk in f.read().split("\n%\n"):
                s = clean_fortune(chunk)
                if s and len(s) <= cfg.max_fortune_chars:
                    items.append(s)
    items = sorted(set(items), key=lambda s: stable_hash(s, cfg.seed))[:cfg.max_fortunes]
    return [(s, rng.choice(FORTUNE_Q), s, "fortunes") for s in sorted(items)]


# ------------------------------------------------------------------ greetings

GREETINGS = [
    (["Hello", "Hello!", "Hi", "Hi!", "Hi there", "Hey", "Good morning", "Good evening"],
     "Hello! Ask me what a word means."),
    (["Who are you?", "What are you?", "What is your name?", "Introduce yourself."],
     "I am wormchat, a small Falcon-shaped language model trained on WordNet definitions. "
     "Ask me what a word means."),
    (["What can you do?", "Help", "How do I use you?", "What should I ask you?"],
     "I can explain what English words mean. Try asking: What is a harbor?"),
    (["How are you?", "How are you doing?"], "I am fine, thank you. Ask me what a word means."),
    (["Thank you", "Thanks!", "Thank you very much."], "You're welcome!"),
    (["Goodbye", "Bye", "See you later"], "Goodbye!"),
    (["Who made you?", "Who trained you?"],
     "I was trained from scratch by the wormchat project on WordNet and fortune texts."),
]


def greeting_examples(copies):
    out = []
    for qs, a in GREETINGS:
        for q in qs:
            out.extend([("greeting:" + q, q, a, "greetings")] * copies)
    return out


# ------------------------------------------------------------------ assembly

def group_conversations(examples, rng, multi_turn):
    """Shuffle examples and group them into conversations of 1-3 turns.

    examples: [(key, q, a, src)] -> [[(q, a), ...], ...]; a fraction `multi_turn` of the
    conversations has 2 or 3 turns (so follow-up questions after an eos are seen too).
    """
    ex = list(examples)
    rng.shuffle(ex)
    convs, i = [], 0
    while i < len(ex):
        n = 1 if rng.random() >= multi_turn else rng.choice((2, 3))
        convs.append([(q, a) for _, q, a, _ in ex[i:i + n]])
        i += n
    return convs


def build_corpus(cfg):
    """-> (train_convs, val_convs, stats). cfg fields: wordnet_dir, fortune_dir, seed,
    val_percent, tier_b, max_fortunes, max_fortune_chars, greeting_copies, multi_turn."""
    rng = random.Random(cfg.seed)
    wn = wordnet_examples(cfg, rng)
    fo = fortune_examples(cfg, rng)
    gr = greeting_examples(cfg.greeting_copies)
    train, val = [], []
    for e in wn + fo:
        (val if is_val(e[0], cfg.seed, cfg.val_percent) else train).append(e)
    train.extend(gr)
    stats = {"examples_train": len(train), "examples_val": len(val)}
    for name, part in (("train", train), ("val", val)):
        by_src = defaultdict(int)
        for e in part:
            by_src[e[3]] += 1
        stats[f"by_source_{name}"] = dict(sorted(by_src.items()))
    stats["lemmas_train"] = len({e[0] for e in train if e[3].startswith("wordnet")})
    stats["lemmas_val"] = len({e[0] for e in val if e[3].startswith("wordnet")})
    train_c = group_conversations(train, random.Random(cfg.seed + 1), cfg.multi_turn)
    val_c = group_conversations(val, random.Random(cfg.seed + 2), cfg.multi_turn)
    stats["conversations_train"], stats["conversations_val"] = len(train_c), len(val_c)
    return train_c, val_c, stats
