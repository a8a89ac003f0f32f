"""
Test inputs and checks for scripts/tests/test_tokenizer.sh.

    .venv/bin/python scripts/reference/tokenizer_test_data.py stress OUT [--no-js-deviations]
        writes the multilingual stress text (valid UTF-8). With --no-js-deviations the
        two characters on which JavaScript's \\s differs from Unicode's White_Space
        (U+0085, U+FEFF) are left out, everything else is the same.
    .venv/bin/python scripts/reference/tokenizer_test_data.py bytes OUT N SEED
        writes N pseudo-random bytes (mostly invalid UTF-8, with ASCII words and spaces
        mixed in so that merges happen).
    .venv/bin/python scripts/reference/tokenizer_test_data.py word OUT N
        writes one pseudo-random lower-case word of N letters (a long piece for the heap merge).
    .venv/bin/python scripts/reference/tokenizer_test_data.py token-bytes TOKENIZER.bin OUT
        writes the bytes of every token of an llm.c tokenizer file (its 1024-byte header
        skipped, each entry's length byte dropped), in id order.
    .venv/bin/python scripts/reference/tokenizer_test_data.py compare-classes UNICODEDATA.txt RANGES
        compares ./tokenize --char-classes output (RANGES) with the regex module's \\p{L},
        \\p{N} and \\p{White_Space} on every code point that UNICODEDATA.txt (the Unicode
        version our tables were made from) assigns. Prints the mismatches and exits 1 if
        there are any. Code points assigned only in a later Unicode version are counted
        and reported, not compared.

The pseudo-random parts come from mulberry32, a small seeded generator, so the inputs are
the same on every run (and the same bytes as this file's earlier JavaScript version made).
"""
import sys


def rng(seed):
    """mulberry32: floats in [0, 1), 32-bit integer arithmetic."""
    a = seed & 0xFFFFFFFF

    def imul(x, y):
        return (x * y) & 0xFFFFFFFF

    def next_float():
        nonlocal a
        a = (a + 0x6D2B79F5) & 0xFFFFFFFF
        t = imul(a ^ (a >> 15), a | 1)
        t ^= (t + imul(t ^ (t >> 7), t | 61)) & 0xFFFFFFFF
        return ((t ^ (t >> 14)) & 0xFFFFFFFF) / 4294967296
    return next_float


# Every White_Space character, JavaScript's extra U+FEFF, and look-alikes that are not
# spaces in either (ZERO WIDTH SPACE, WORD JOINER, MONGOLIAN VOWEL SEPARATOR).
SPACES = [chr(c) for c in (0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0x85, 0xA0, 0x1680, 0x2000, 0x2001, 0x2002,
                           0x2003, 0x2004, 0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200A, 0x2028, 0x2029,
                           0x202F, 0x205F, 0x3000, 0xFEFF, 0x200B, 0x2060, 0x180E)]


def stress_text(no_deviations):
    parts = [
        # contractions in lower and upper case, and apostrophes that are not contractions
        "I'm sure you're right: we'll see, they've said it's done, he'd go, can't won't isn't.",
        "I'M SURE YOU'RE RIGHT: WE'LL SEE, THEY'VE SAID IT'S DONE, HE'D GO. 'S 'T 'RE 'VE 'M 'LL 'D",
        "'s't're've'm'll'd 'sx 'ss ''s ' s 'x rock'n'roll 90's o'clock ’s ’re (curly apostrophes)",
        # accented Latin, Cyrillic, Greek, Arabic, Hebrew, Devanagari, Bengali
        "Ça va? Señor Müller aß Crème brûlée à Łódź, Ærøskøbing, Þórr, İstanbul, ǅemal, ﬁne ﬂow.",
        "Съешь же ещё этих мягких французских булок, да выпей чаю. Ёжик!",
        "Τάχιστη αλώπηξ βαφής ψημένη γη, δρασκελίζει υπέρ νωθρού κυνός. ΆΈΉ",
        "نص حكيم له سر قاطع وذو شأن عظيم مكتوب على ثوب أخضر ومغلف بجلد أزرق. ١٢٣٤٥٦٧٨٩٠",
        "דג סקרן שט בים מאוכזב ולפתע מצא חברה. שָׁלוֹם",
        "ऋषियों को सताने वाले दुष्ट राक्षसों के राजा रावण का सर्वनाश करने वाले विष्णुवतार भगवान श्रीराम। ०१२३४५६७८९",
        "আমার সোনার বাংলা, আমি তোমায় ভালোবাসি। ০১২৩৪৫৬৭৮৯",
        # CJK, kana, Hangul, Thai, fullwidth
        "我能吞下玻璃而不伤身体。日本語の文章とカタカナ、ひらがな。ｶﾀｶﾅ 한국어 문장입니다. 키스의 고유조건은",
        "เป็นมนุษย์สุดประเสริฐเลิศคุณค่า ๑๒๓ ＡＢＣ１２３！？",
        # emoji: ZWJ sequences, skin tones, flags, keycaps, variation selectors
        "👨‍👩‍👧‍👦 family, 👩🏽‍💻 coder, 👍🏻👍🏼👍🏽👍🏾👍🏿 thumbs, 🏳️‍🌈 🏴‍☠️ flags 🇺🇸🇯🇵🇩🇪🇫🇷 1️⃣ #️⃣ ❤️ ☺︎",
        # combining marks
        "e\u0301 a\u0308 n\u0303 Z\u0351\u0337\u0353a\u0300\u0321l\u0336\u0322g\u0338o\u0335 q\u0307\u0323 \u0301start",
        # digits of other scripts, fractions, superscripts, Roman numerals, math alphanumerics
        "digits: ٠١٢ ۴۵۶ ߀߁ ৪৫ ੬੭ ௧௨ ໑໒ ༢༣ ၃၄ ០១ ᠐᠑ １２ 𝟎𝟏𝟐 𝟘𝟙 🄀",
        "fractions: ½ ⅓ ¾ ⅞ ↉ 3½ 1⁄2 superscripts: x² y³ n⁹ H₂O ¹²³ ⁰ roman: Ⅰ Ⅱ Ⅻ ⅻ ↂ ⅰⅱⅲ",
        "math: 𝐀𝐁𝐂 𝑎𝑏𝑐 𝔄𝔅 𝕏𝕐 𝖆 𝗔𝗕 𝘢 𝙰𝙱 𝛂𝛃 ℝℕℤ ∀x∈ℝ: x²≥0 ∑∫∂ ≠≤≥ ⊕⊗",
        # ASCII punctuation, numbers, symbols
        "$1,234.56 + 7.8e-9 = ???; (a+b)*[c/d] {x: 'y'} <tag attr=\"v\"/> #hash @user 100% a_b a-b ~`^|\\",
        "<|endoftext|> is plain text here, and so is <|fim_prefix|>.",
        # control characters, CRLF, tabs
        "ctl:\u0000\u0001\u0007\u0008\u001b[0m\u001c\u001d\u001e\u001f\u007f end",
        "line one\r\nline two\r\n\r\nafter blank\rCR only\n\ttab\tbetween\t\twords\t \t\n",
        # whitespace runs of every length before words, numbers and symbols
        "x" + " " * 100 + "y" + "\n" * 7 + "z" + " \n \n" * 5 + "w\t\t\t  \t  !" + "   123",
        "trailing spaces then newline   \n   leading spaces\n\n\n   \n",
    ]
    # every space-like character between words, doubled, before a space, at the end of a run
    for s in SPACES:
        parts.append("a" + s + "b " + s + s + "c" + s + " d" + s + "  e " + s + "1" + s + "!" + s + s)
    # long pieces (the heap merge path): a long word, a long number, long symbol and space runs
    r = rng(12345)
    word = "".join("abcdefghijklmnopqrstuvwxyz"[int(r() * 26)] for _ in range(3000))
    parts.append(" " + word + " " + "9" * 500 + "1234567890" * 40 + " " + "-=" * 400 + " " * 2000 + "end")
    # pseudo-random mixtures of everything above, to hit combinations
    alphabet = list("".join(parts) + "".join(SPACES) * 20)  # code points
    for _ in range(400):
        n = 1 + int(r() * 40)
        parts.append("".join(alphabet[int(r() * len(alphabet))] for _ in range(n)))
    text = "\n".join(parts) + "  \u2029"  # ends in whitespace
    if no_deviations:
        text = text.replace("\u0085", "").replace("\ufeff", "")
    return text


def random_bytes(n, seed):
    r = rng(seed)
    words = [w.encode("utf-8") for w in ("the", " of", " and", "ing", " ", "  ", "\n", "'s", "'ll", "123", "é",
                                         "€", "😀")]
    out = bytearray()
    while len(out) < n:
        if r() < 0.3:
            out += words[int(r() * len(words))]
        else:
            out.append(int(r() * 256))
    return bytes(out[:n])


def random_word(n):
    r = rng(1)
    return "".join("etaoinshrdlucmfw"[int(r() * 16)] for _ in range(n))


def token_bytes(path):
    """The tokens of an llm.c tokenizer file, concatenated: entries are a length byte and the bytes."""
    with open(path, "rb") as f:
        b = f.read()[1024:]
    out, i = bytearray(), 0
    while i < len(b):
        out += b[i + 1:i + 1 + b[i]]
        i += 1 + b[i]
    return bytes(out)


def compare_classes(unicode_data_path, ranges_path):
    import regex
    # assigned code points of the Unicode version the tables were made from
    assigned = bytearray(0x110000)
    range_start = -1
    with open(unicode_data_path, encoding="utf-8") as f:
        for line in f:
            fields = line.rstrip("\n").split(";")
            if len(fields) < 2:
                continue
            c = int(fields[0], 16)
            if fields[1].endswith(", First>"):
                range_start = c
                continue
            first = range_start if fields[1].endswith(", Last>") else c
            assigned[first:c + 1] = b"\1" * (c + 1 - first)
    mine = [None] * 0x110000
    with open(ranges_path) as f:
        for line in f:
            if line.strip():
                lo, hi, cls = line.split()
                mine[int(lo, 16):int(hi, 16) + 1] = [cls] * (int(hi, 16) - int(lo, 16) + 1)
    # the regex module's classes of every code point but the surrogates, found in one pass each
    theirs = ["other"] * 0x110000
    chars = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)
    for cls, pattern in (("space", r"\p{White_Space}+"), ("number", r"\p{N}+"), ("letter", r"\p{L}+")):
        for m in regex.finditer(pattern, chars):  # letter last: L wins over N, N over White_Space
            for ch in m.group():
                theirs[ord(ch)] = cls
    compared, newer, bad = 0, 0, []
    for c in range(0x110000):
        if mine[c] is None:
            bad.append("U+%X missing from the ranges" % c)
            continue
        if 0xD800 <= c <= 0xDFFF:
            continue  # not characters
        if not assigned[c]:
            if mine[c] != "other":
                bad.append("U+%04X is unassigned but classed %s" % (c, mine[c]))
            if theirs[c] != "other":
                newer += 1
            continue
        compared += 1
        if theirs[c] != mine[c]:
            bad.append("U+%04X: tables say %s, the regex module says %s" % (c, mine[c], theirs[c]))
    print(f"compared {compared} assigned code points; {newer} letters/numbers/spaces assigned after our Unicode "
          f"version not compared; {len(bad)} mismatches")
    for b in bad[:20]:
        print(b)
    return 1 if bad else 0


def main():
    cmd, args = (sys.argv[1], sys.argv[2:]) if len(sys.argv) > 1 else ("", [])
    if cmd == "stress" and len(args) in (1, 2):
        with open(args[0], "w", encoding="utf-8", newline="") as f:
            f.write(stress_text("--no-js-deviations" in args[1:]))
    elif cmd == "bytes" and len(args) == 3:
        with open(args[0], "wb") as f:
            f.write(random_bytes(int(args[1]), int(args[2])))
    elif cmd == "word" and len(args) == 2:
        with open(args[0], "w") as f:
            f.write(random_word(int(args[1])))
    elif cmd == "token-bytes" and len(args) == 2:
        with open(args[1], "wb") as f:
            f.write(token_bytes(args[0]))
    elif cmd == "compare-classes" and len(args) == 2:
        return compare_classes(args[0], args[1])
    else:
        print("usage: tokenizer_test_data.py stress OUT [--no-js-deviations] | bytes OUT N SEED | word OUT N | "
              "token-bytes TOKENIZER.bin OUT | compare-classes UNICODEDATA RANGES", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
